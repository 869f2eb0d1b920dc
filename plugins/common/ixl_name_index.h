/*
 * An index of entries by name, for tables keyed by names that come from other agents (NET's
 * peers, the UCX plugin's remotes, the core's loaded remotes): open addressing with linear
 * probing over a power-of-2 number of slots, at most half full, doubled when it would be more;
 * a removal shifts the later entries of its probe run back (no tombstones). Each slot keeps the
 * entry, its name (the entry's own string, which must stay put while it is indexed) and the
 * name's hash (ixlp_name_hash from the index's random seed: colliding names cannot be chosen
 * without it, and names chosen anyway cost a walk of the colliding ones, as walking every
 * entry did). Not thread-safe: the table's owner locks. Header-only, like ixl_plugin_util.h.
 */
#ifndef IXL_NAME_INDEX_H
#define IXL_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ixl_plugin_util.h"

struct ixlp_name_slot {
    uint64_t hash;
    const char *name; /* NULL: empty */
    void *entry;
};

struct ixlp_name_index {
    struct ixlp_name_slot *slot;
    size_t cap, n; /* cap: 0 before the first entry */
    uint64_t seed; /* set by the owner (ixlp_random64) before the first entry */
};

static inline void *ixlp_index_find(const struct ixlp_name_index *x, const char *name)
{
    if (x->cap == 0)
        return NULL;
    uint64_t h = ixlp_name_hash(x->seed, name);
    for (size_t i = h & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
        const struct ixlp_name_slot *s = &x->slot[i];
        if (s->name == NULL)
            return NULL;
        if (s->hash == h && strcmp(s->name, name) == 0)
            return s->entry;
    }
}

static inline void ixlp_index_place(struct ixlp_name_slot *slot, size_t cap,
                                    struct ixlp_name_slot s)
{
    size_t i = s.hash & (cap - 1);
    while (slot[i].name != NULL)
        i = (i + 1) & (cap - 1);
    slot[i] = s;
}

/* Adds entry under name (not indexed yet). 0, or -1 when calloc_fn found no memory for a
 * larger table (nothing changed). */
static inline int ixlp_index_add(struct ixlp_name_index *x, const char *name, void *entry,
                                 void *(*calloc_fn)(size_t, size_t))
{
    if (2 * (x->n + 1) > x->cap) {
        size_t cap = x->cap ? x->cap : 16;
        while (cap < 2 * (x->n + 1))
            cap *= 2;
        struct ixlp_name_slot *slot = calloc_fn(cap, sizeof(*slot));
        if (slot == NULL)
            return -1;
        for (size_t i = 0; i < x->cap; i++)
            if (x->slot[i].name != NULL)
                ixlp_index_place(slot, cap, x->slot[i]);
        free(x->slot);
        x->slot = slot;
        x->cap = cap;
    }
    ixlp_index_place(x->slot, x->cap,
                     (struct ixlp_name_slot){ixlp_name_hash(x->seed, name), name, entry});
    x->n++;
    return 0;
}

/* Removes entry, indexed under name (nothing when it is not). */
static inline void ixlp_index_remove(struct ixlp_name_index *x, const char *name, void *entry)
{
    if (x->cap == 0)
        return;
    size_t mask = x->cap - 1, i = ixlp_name_hash(x->seed, name) & mask;
    while (x->slot[i].entry != entry) {
        if (x->slot[i].name == NULL)
            return;
        i = (i + 1) & mask;
    }
    for (size_t j = (i + 1) & mask; x->slot[j].name != NULL; j = (j + 1) & mask) {
        size_t home = x->slot[j].hash & mask;
        /* slot j's entry may move to i when i lies on its probe path: home to j, cyclically */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            x->slot[i] = x->slot[j];
            i = j;
        }
    }
    x->slot[i] = (struct ixlp_name_slot){0, NULL, NULL};
    x->n--;
}

static inline void ixlp_index_free(struct ixlp_name_index *x)
{
    free(x->slot);
    *x = (struct ixlp_name_index){NULL, 0, 0, x->seed};
}

#endif

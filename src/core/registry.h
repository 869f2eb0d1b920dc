/*
 * Regions (local registrations and loaded remote regions) and the index that finds the region
 * covering a range in O(log n), nested and overlapping regions included.
 *
 * An index holds regions of one memory type in an AVL tree ordered by (dev, addr, len) and, for
 * equal keys, by address of the region struct: adding or removing a region costs O(log n), so
 * registering or deregistering 10^4 regions stays O(n log n) whatever the order and however
 * many regions stay registered. Each node also keeps, over its left subtree and itself, the
 * region that reaches furthest (greatest (dev, end), the first in order on ties). Every region
 * before a position starts at or before it, so a range [a, a + l) on dev d is covered by some
 * region iff the furthest-reaching region among those with (dev, addr) <= (d, a) has dev d and
 * ends at or after a + l: one descent from the root, reading one node per level.
 */
#ifndef IXL_CORE_REGISTRY_H
#define IXL_CORE_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "core/agent.h"

/* Backend slots whose metadata a region holds in itself; the others' in a separate array,
 * made when one of them is first used. An agent rarely has more than a few backends, and the
 * struct's size is what a registration touches per region: with all IXL_MAX_BACKENDS slots
 * inline it was 320 bytes, 3.2 MB of fresh pages per 10^4 regions (on a virtual machine each
 * 4 KiB page costs microseconds at its first touch, populated or not). */
#ifndef IXL_REGION_SLOTS /* (a build may set it lower to test the separate array) */
#define IXL_REGION_SLOTS 4
#endif

struct region {
    enum ixl_mem type;
    uint32_t backend_mask;   /* backends holding metadata for this region */
    uint64_t addr, len, dev; /* len is the covered length (whole-file registrations: to the
                                end of the address space) */
    uint64_t reg_len;        /* len as registered (0 = whole file/volume/object) */
    /* Prepared lists and requests that use the region (local only): a region in use cannot
     * be deregistered. */
    _Atomic uint64_t users;
    /* Per backend slot b: md (register_mem for a local region, load_remote_md for a remote
     * one) and tmd (load_local_md: the target side for loopback), through region_md() and
     * region_md_at(): slot b < IXL_REGION_SLOTS at mds[2b] and mds[2b + 1], a higher one at
     * ext[2(b - IXL_REGION_SLOTS)] and the next (NULL until a higher slot is used). */
    struct ixl_md *mds[2 * IXL_REGION_SLOTS];
    struct ixl_md **ext;
};

/* Slot b's md (t = 0) or tmd (t = 1) of g, or NULL. */
static inline struct ixl_md *region_md(const struct region *g, unsigned b, int t)
{
    if (b < IXL_REGION_SLOTS)
        return g->mds[2 * b + (unsigned)t];
    return g->ext ? g->ext[2 * (b - IXL_REGION_SLOTS) + (unsigned)t] : NULL;
}

/* Where slot b's md (t = 0) or tmd (t = 1) of g is kept, making the array of the higher slots
 * when it is first needed; NULL without memory for it. */
struct ixl_md **region_md_at(struct region *g, unsigned b, int t);

/* Sets slot b's md and tmd of g to NULL (nothing to do where there is no array for them). */
static inline void region_md_clear(struct region *g, unsigned b)
{
    if (b < IXL_REGION_SLOTS)
        g->mds[2 * b] = g->mds[2 * b + 1] = NULL;
    else if (g->ext)
        g->ext[2 * (b - IXL_REGION_SLOTS)] = g->ext[2 * (b - IXL_REGION_SLOTS) + 1] = NULL;
}

struct rnode; /* registry.c */
struct slab;  /* registry.c */

struct rindex {
    struct rnode *root;
    size_t n; /* regions in the index */
};

struct ixl_registry {
    struct rindex all[IXL_MEM_COUNT]; /* every region, for exact lookups and listing */
    struct rindex by_backend[IXL_MEM_COUNT][IXL_MAX_BACKENDS];
    /* Nodes come from slabs of the registry and go back to its free list: allocating and
     * freeing 10^4 small blocks per call at malloc made malloc walk its bins. */
    struct rnode *free_nodes;
    struct rnode *carve, *carve_end; /* the unused rest of the newest slab */
    struct slab *slabs;              /* every slab of the registry (registry.c) */
    size_t slab_bytes;               /* their size in all */
    size_t expect;                   /* bytes a caller announced (ixl_registry_expect) */
    /* Region structs of ixl_registry_region_new (local and remote regions) come from slabs
     * too, and go back to a free list: a remote's metadata, loaded again after each restart of
     * its agent, reuses memory instead of faulting in what malloc gave back to the system. */
    void *free_regions;        /* linked by their first word */
    char *rcarve, *rcarve_end; /* the unused rest of the newest region slab */
    int region_arena;          /* the regions are the registry's (not freed one by one) */
    /* Scratch for batches, kept between calls: freeing a batch's arrays each call made malloc
     * give the top of the heap back and fault it in again at the next. */
    void **scratch; /* a block of ixl_scratch_take (util/scratch.h) */
    size_t scratch_cap;
};

struct ixl_registry *ixl_registry_create(void);
/* A zeroed region struct owned by r (freed with r, or earlier by ixl_registry_region_free), or
 * NULL without memory. A registry holds only such regions or only malloc'd ones. */
struct region *ixl_registry_region_new(struct ixl_registry *r);
/* Announces that about this many regions are to be added (0: the batch is over): their memory
 * is then taken in large pieces (huge pages where the system has them) rather than grown
 * page by page. Only a hint. */
void ixl_registry_expect(struct ixl_registry *r, size_t regions);
/* Gives back a region of ixl_registry_region_new that is in no index of r. */
void ixl_registry_region_free(struct ixl_registry *r, struct region *g);
/* Frees the index and the region structs (not the backends' metadata). */
void ixl_registry_free(struct ixl_registry *r);

/* The region that exactly matches (type, addr, reg_len, dev), or NULL. */
struct region *ixl_registry_exact(struct ixl_registry *r, enum ixl_mem type, uint64_t addr,
                                  uint64_t reg_len, uint64_t dev);
/* A region of backend slot b covering [addr, addr + len) on dev, or NULL. O(log n). When
 * several cover it: the one reaching furthest, the first in (dev, addr, len) order on ties. */
struct region *ixl_registry_cover(const struct ixl_registry *r, enum ixl_mem type, unsigned b,
                                  uint64_t dev, uint64_t addr, uint64_t len);
/* Adds region to the "all" index / to backend b's index; removes it (nothing when it is not
 * there). 0 or IXL_ERR_NO_MEMORY. O(log n) each. Callers hold the agent's lock for writing;
 * lookups see the change at once. ixl_registry_commit() is kept for the writers' protocol (it
 * marks where a writer is done) and has nothing left to do. */
int ixl_registry_add(struct ixl_registry *r, struct region *g);
int ixl_registry_add_backend(struct ixl_registry *r, struct region *g, unsigned b);
void ixl_registry_remove(struct ixl_registry *r, struct region *g);
void ixl_registry_remove_backend(struct ixl_registry *r, struct region *g, unsigned b);
void ixl_registry_commit(struct ixl_registry *r);
/* The same for k regions of one type at once, into or out of the "all" index (b < 0) or backend
 * b's: a batch large against the index is merged in (or filtered out) and the tree built again,
 * O(n + k log k) with sequential work instead of O(k log n) with a cache miss per level. Adding
 * is all or nothing (IXL_ERR_NO_MEMORY changes nothing); regions not in the index are skipped
 * when removing. */
int ixl_registry_add_many(struct ixl_registry *r, enum ixl_mem type, int b, struct region *const *v,
                          size_t k);
void ixl_registry_remove_many(struct ixl_registry *r, enum ixl_mem type, int b,
                              struct region *const *v, size_t k);

/* In-order walk of the regions of one type (their "all" index): nothing may be added to or
 * removed from that index while it lasts. */
struct ixl_registry_iter {
    const struct rnode *stack[96]; /* an AVL tree of 2^64 nodes is less than 93 high */
    int top;
};
void ixl_registry_iter_init(struct ixl_registry_iter *it, const struct ixl_registry *r,
                            enum ixl_mem type);
struct region *ixl_registry_iter_next(struct ixl_registry_iter *it);
/* The region of type after prev in order (the first when prev is NULL), or NULL: O(log n), and
 * prev may have been taken out of the index since (not freed), so a walk may remove as it
 * goes when it fetches the next region before freeing the current one. */
struct region *ixl_registry_next(const struct ixl_registry *r, enum ixl_mem type,
                                 const struct region *prev);

/* 0 when every index is a well-formed tree (order, balance, heights, reaches, counts), else -1:
 * for tests. O(n). */
int ixl_registry_check(const struct ixl_registry *r);

/* The last element of run that g still covers (g covers an element at or before it): walks over
 * runs then cost one lookup per region change, not one per descriptor. */
uint64_t ixl_region_last_covered(const struct region *g, const struct ixl_run *run);

/* The covered length of a registration: len, or for storage types with len 0 the rest of the
 * address space. */
uint64_t ixl_region_span(enum ixl_mem type, uint64_t addr, uint64_t len);

#endif

/*
 * Regions (local registrations and loaded remote regions) and the index that finds the region
 * covering a range in O(log n), nested and overlapping regions included.
 *
 * An index holds regions of one memory type sorted by (dev, addr, len). best[i] is the index,
 * among the regions of the same dev from the group's start up to i, of the one that reaches
 * furthest. Every region up to i starts at or before the region i starts, so a range
 * [a, a + l) on dev d is covered by some region iff, with i the last region whose (dev, addr)
 * <= (d, a), region best[i] (same dev) ends at or after a + l: one binary search.
 */
#ifndef IXL_CORE_REGISTRY_H
#define IXL_CORE_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "core/agent.h"

struct region {
    enum ixl_mem type;
    uint64_t addr, len, dev; /* len is the covered length (whole-file registrations: to the
                                end of the address space) */
    uint64_t reg_len;        /* len as registered (0 = whole file/volume/object) */
    uint32_t backend_mask;   /* backends holding metadata for this region */
    struct ixl_md *md[IXL_MAX_BACKENDS];  /* register_mem (local) or load_remote_md (remote) */
    struct ixl_md *tmd[IXL_MAX_BACKENDS]; /* load_local_md: target side for loopback */
    /* Prepared lists and requests that use the region (local only): a region in use cannot
     * be deregistered. */
    _Atomic uint64_t users;
};

struct rindex {
    struct region **v;
    uint32_t *best;
    size_t n, cap;
    size_t sorted; /* v[0..sorted) is in order; later entries were appended since */
    int dirty;     /* best[] is stale (a removal) */
};

struct ixl_registry {
    struct rindex all[IXL_MEM_COUNT]; /* every region, for exact lookups and listing */
    struct rindex by_backend[IXL_MEM_COUNT][IXL_MAX_BACKENDS];
};

struct ixl_registry *ixl_registry_create(void);
/* Frees the index and the region structs (not the backends' metadata). */
void ixl_registry_free(struct ixl_registry *r);

/* The region that exactly matches (type, addr, reg_len, dev), or NULL. */
struct region *ixl_registry_exact(struct ixl_registry *r, enum ixl_mem type, uint64_t addr,
                                  uint64_t reg_len, uint64_t dev);
/* A region of backend slot b covering [addr, addr + len) on dev, or NULL. O(log n). */
struct region *ixl_registry_cover(const struct ixl_registry *r, enum ixl_mem type, unsigned b,
                                  uint64_t dev, uint64_t addr, uint64_t len);
/* Adds region to the "all" index / to backend b's index; removes it. 0 or IXL_ERR_NO_MEMORY.
 * Adds and removals take effect for lookups after ixl_registry_commit(), which every writer
 * calls before it lets go of the agent's lock. */
int ixl_registry_add(struct ixl_registry *r, struct region *g);
int ixl_registry_add_backend(struct ixl_registry *r, struct region *g, unsigned b);
void ixl_registry_remove(struct ixl_registry *r, struct region *g);
void ixl_registry_remove_backend(struct ixl_registry *r, struct region *g, unsigned b);
void ixl_registry_commit(struct ixl_registry *r);

/* The last element of run that g still covers (g covers an element at or before it): walks over
 * runs then cost one lookup per region change, not one per descriptor. */
uint64_t ixl_region_last_covered(const struct region *g, const struct ixl_run *run);

/* The covered length of a registration: len, or for storage types with len 0 the rest of the
 * address space. */
uint64_t ixl_region_span(enum ixl_mem type, uint64_t addr, uint64_t len);

#endif

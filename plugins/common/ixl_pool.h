/*
 * A pool of fixed-size records for a plugin's per-region objects (what register_mem,
 * load_local_md and load_remote_md hand out), carved from chunks mapped with their pages
 * already in (ixlp_map): 64 KiB of small pages first, then 2 MiB ones (a huge page each where
 * the system gives them).
 *
 * Why: one malloc per region grew the heap a page at a time, and every new page was a page
 * fault: on a virtual machine ~14-18 us each (see ixlp_map), so registering 10^4 regions with
 * the TEST plugin spent ~470 faults, most of the call, in the plugin's own records. An engine
 * that registers a few regions maps 64 KiB; one that registers more than fit there, 2 MiB more
 * at a time.
 *
 * Freed records go to a free list and are reused first; chunks go back to the system only at
 * ixlp_pool_fini (the engine's end). Under AddressSanitizer a free record (past its link word)
 * and a chunk's uncarved rest are poisoned, so a use after free is still caught, and every
 * chunk is unpoisoned before it is unmapped.
 *
 * Not thread-safe: a plugin uses it from the "writer" methods (register_mem, deregister_mem,
 * load_local_md, load_remote_md, unload_md), which the core calls one at a time per agent
 * (ixl_plugin.h, "Threads"), or under a lock of its own. Memory comes through the host's
 * system-call table (sys->mmap), so a test that refuses mmap reaches it. Header-only (static
 * inline), like ixl_plugin_util.h; not part of the plugin ABI.
 */
#ifndef IXL_POOL_H
#define IXL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <ixl/ixl_plugin.h>

#if defined(__SANITIZE_ADDRESS__)
#define IXLP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IXLP_ASAN 1
#endif
#endif
#ifdef IXLP_ASAN
#include <sanitizer/asan_interface.h>
#define IXLP_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define IXLP_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define IXLP_POISON(p, n) ((void)(p), (void)(n))
#define IXLP_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define IXLP_POOL_FIRST ((size_t)64 << 10) /* the first chunk's bytes; the next ones IXLP_HUGE */

/* A chunk's header; records start at the next 64-byte boundary. */
struct ixlp_chunk {
    struct ixlp_chunk *next;
    size_t bytes; /* as mapped */
};

struct ixlp_pool {
    const struct ixl_sys *sys;
    size_t size;               /* bytes of a record (a multiple of 16, at least a pointer) */
    void *free;                /* free records, linked by their first word */
    char *carve, *carve_end;   /* the uncarved rest of the newest chunk */
    struct ixlp_chunk *chunks; /* every chunk, newest first */
    size_t next_bytes;         /* the next chunk's size */
};

/* An empty pool of records of size bytes (nothing is mapped until the first get). */
static inline void ixlp_pool_init(struct ixlp_pool *p, const struct ixl_sys *sys, size_t size)
{
    memset(p, 0, sizeof(*p));
    p->sys = sys;
    size = size < sizeof(void *) ? sizeof(void *) : size;
    p->size = (size + 15) & ~(size_t)15;
    p->next_bytes = IXLP_POOL_FIRST;
}

/*
 * bytes (a multiple of the page size) of fresh zeroed memory with its pages in, or NULL when
 * mmap fails; give it back with ixlp_unmap. With huge, a multiple of IXLP_HUGE lies on such a
 * boundary with MADV_HUGEPAGE, then populated (MADV_POPULATE_WRITE); anything else is mapped
 * with MAP_POPULATE. Ask for huge pages only for memory that will be used whole. The core's
 * registry slabs (huge) and scratch blocks (not) come from here too.
 *
 * Measured on this project's VMs (a paravirtualised guest with shadow page tables, free memory
 * reported back to the host), per 2 MiB: 512 small pages faulted in on first use 7-9 ms; the
 * same populated at the mapping 0.3-0.6 ms plus ~4 ms for the hypervisor's own fault at each
 * page's first touch; one transparent huge page 0.12-0.25 ms in all when the host still backs
 * it, 6-20 ms when the host has taken it back (memory freed some seconds before), which is
 * no worse than its small pages faulted one by one. Where the system has no huge pages to
 * give, the advice does nothing and the small pages are populated.
 */
#define IXLP_HUGE ((size_t)2 << 20)

static inline void *ixlp_map(const struct ixl_sys *sys, size_t bytes, bool huge)
{
    if (!huge || bytes < IXLP_HUGE || bytes % IXLP_HUGE != 0) {
        void *c = sys->mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        return c == MAP_FAILED ? NULL : c;
    }
    /* A huge page's room to spare, trimmed to the boundary; the advice has to come before the
     * pages are in, so madvise populates them rather than MAP_POPULATE. */
    char *m = sys->mmap(NULL, bytes + IXLP_HUGE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *c = (char *)(((uintptr_t)m + IXLP_HUGE - 1) & ~(uintptr_t)(IXLP_HUGE - 1));
    if (c > m)
        sys->munmap(m, (size_t)(c - m));
    if (c + bytes < m + bytes + IXLP_HUGE)
        sys->munmap(c + bytes, (size_t)(m + bytes + IXLP_HUGE - (c + bytes)));
#ifdef MADV_HUGEPAGE
    madvise(c, bytes, MADV_HUGEPAGE); /* advice: without it, small pages */
#endif
#ifdef MADV_POPULATE_WRITE
    madvise(c, bytes, MADV_POPULATE_WRITE); /* a kernel before 5.14: faulted in on use */
#endif
    return c;
}

/* Gives back memory of ixlp_map (unpoisoned first: the addresses may be mapped again). */
static inline void ixlp_unmap(const struct ixl_sys *sys, void *p, size_t bytes)
{
    IXLP_UNPOISON(p, bytes);
    sys->munmap(p, bytes);
}

/* A chunk of p->next_bytes (at least a header and one record); NULL without memory. */
static inline struct ixlp_chunk *ixlp_chunk_map(struct ixlp_pool *p)
{
    size_t bytes = p->next_bytes;
    while (bytes < sizeof(struct ixlp_chunk) + 64 + p->size)
        bytes *= 2;
    struct ixlp_chunk *k = ixlp_map(p->sys, bytes, true);
    if (k == NULL)
        return NULL;
    k->bytes = bytes;
    p->next_bytes = IXLP_HUGE;
    return k;
}

/* A zeroed record, or NULL without memory. */
static inline void *ixlp_pool_get(struct ixlp_pool *p)
{
    void **r = (void **)p->free;
    if (r != NULL) {
        IXLP_UNPOISON(r, p->size);
        p->free = *r;
    } else {
        if ((size_t)(p->carve_end - p->carve) < p->size) {
            struct ixlp_chunk *k = ixlp_chunk_map(p);
            if (k == NULL)
                return NULL;
            k->next = p->chunks;
            p->chunks = k;
            p->carve = (char *)(((uintptr_t)(k + 1) + 63) & ~(uintptr_t)63);
            p->carve_end = (char *)k + k->bytes;
            IXLP_POISON(p->carve, (size_t)(p->carve_end - p->carve));
        }
        r = (void **)(void *)p->carve;
        p->carve += p->size;
        IXLP_UNPOISON(r, p->size);
    }
    memset(r, 0, p->size);
    return r;
}

/* Gives back a record of ixlp_pool_get (NULL: nothing). */
static inline void ixlp_pool_put(struct ixlp_pool *p, void *rec)
{
    if (rec == NULL)
        return;
    void **r = (void **)rec;
    *r = p->free;
    p->free = r;
    IXLP_POISON((char *)rec + sizeof(void *), p->size - sizeof(void *));
}

/* Unmaps every chunk: every record of the pool is gone. The pool is empty again after. */
static inline void ixlp_pool_fini(struct ixlp_pool *p)
{
    while (p->chunks != NULL) {
        struct ixlp_chunk *k = p->chunks;
        p->chunks = k->next;
        ixlp_unmap(p->sys, k, k->bytes);
    }
    ixlp_pool_init(p, p->sys, p->size);
}

#endif

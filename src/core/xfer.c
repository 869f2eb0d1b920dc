/* Prepared lists and transfer requests: checks, backend choice, post / status / wait /
 * release. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "util/log.h"
#include "util/out.h"
#include "util/scratch.h"
#include "util/time.h"
#include "util/sys.h"

/* ---- prepared lists ------------------------------------------------------------------------ */

/*
 * The arrays of a prepared list (its merged runs and their first indices, the segment offsets,
 * steps and divisors, the segments, the regions): ~100 bytes per run, so a list of 10^5 single
 * descriptors holds ~10 MB. From malloc, such a list destroyed and made again left the top of
 * the heap free once the dynamic thresholds had moved (bench_core: after registration churn),
 * glibc gave it back to the system and the next list faulted ~2000 pages in again: 168 ->
 * 553-577 ns per descriptor on this VM, which looked like a registry that degrades. Arrays of
 * PREP_KEPT bytes and more come from the kept blocks of util/scratch.h (bounded, process-wide),
 * smaller ones from malloc; each starts after a header that says which.
 */
#define PREP_KEPT ((size_t)64 << 10)
#define PREP_RUNS0 1024 /* the merged runs' first room (copy_merged) */

struct parr {
    size_t kept; /* 1: a block of ixl_scratch_take, 0: malloc */
    size_t pad;  /* (keeps the array 16-byte aligned) */
};

/* An array of bytes (uninitialised), or NULL without memory. */
static void *parr_new(size_t bytes)
{
    if (bytes > SIZE_MAX - sizeof(struct parr))
        return NULL;
    int kept = bytes >= PREP_KEPT;
    struct parr *h =
        kept ? ixl_scratch_take_fit(sizeof(*h) + bytes) : sys_malloc(sizeof(*h) + bytes);
    if (h == NULL)
        return NULL;
    h->kept = (size_t)kept;
    return h + 1;
}

static void parr_free(void *a)
{
    if (a == NULL)
        return;
    struct parr *h = (struct parr *)a - 1;
    if (h->kept)
        ixl_scratch_give(h);
    else
        free(h);
}

/* a (old bytes of it kept) moved to an array of bytes; NULL without memory (a unchanged). */
static void *parr_grow(void *a, size_t old, size_t bytes)
{
    void *b = parr_new(bytes);
    if (b == NULL)
        return NULL;
    if (a != NULL)
        memcpy(b, a, old);
    parr_free(a);
    return b;
}

static void prep_backend_free(struct prep_backend *pb)
{
    parr_free(pb->seg_start);
    parr_free(pb->seg_step);
    parr_free(pb->seg_step_m);
    parr_free(pb->segs);
    memset(pb, 0, sizeof(*pb));
}

/* The prepared list's own copy of the runs (copy_merged), its arrays from parr_new. */
static void prep_list_free(struct ixl_dlist *l)
{
    if (l == NULL)
        return;
    parr_free(l->runs);
    parr_free(l->first);
    free(l);
}

static void prep_free(struct ixl_prep *p)
{
    if (p == NULL)
        return;
    if (p->counted)
        ixl_regions_unuse(p->regions, p->n_regions);
    parr_free(p->regions);
    for (int b = 0; b < IXL_MAX_BACKENDS; b++)
        prep_backend_free(&p->per[b]);
    if (p->remote)
        ixl_remote_put(p->remote, 0);
    prep_list_free(p->list);
    free(p);
}

static int push_region(struct ixl_prep *p, struct region *g, size_t *cap)
{
    /* Consecutive segments mostly share a region: check the last few before appending. */
    for (size_t i = p->n_regions; i > 0 && i + 4 > p->n_regions; i--)
        if (p->regions[i - 1] == g)
            return IXL_OK;
    if (p->n_regions == *cap) {
        /* First room for a region per run, like the segments: a list of runs in scattered
         * regions then never grows it (each growth left a block of the old size behind). */
        size_t c = *cap ? *cap * 2 : p->list->n_runs + 4;
        if (c > SIZE_MAX / sizeof(struct region *))
            return IXL_ERR_NO_MEMORY;
        struct region **v = parr_grow(p->regions, *cap * sizeof(*v), c * sizeof(*v));
        if (v == NULL)
            return IXL_ERR_NO_MEMORY;
        p->regions = v;
        *cap = c;
    }
    p->regions[p->n_regions++] = g;
    return IXL_OK;
}

/* Splits every run of the list into segments lying in one region of backend b. Returns
 * IXL_ERR_NOT_REGISTERED with *bad the first uncovered descriptor. Cost: one lookup per
 * region change, not per descriptor. */
static int prep_backend(struct ixl_prep *p, const struct ixl_registry *reg, unsigned b,
                        int target_local, uint64_t *bad, size_t *region_cap)
{
    const struct ixl_dlist *l = p->list;
    struct prep_backend *pb = &p->per[b];
    size_t cap = l->n_runs + 4;
    /* (n_runs is bounded by ixl_dlist's reserve: none of these byte counts wraps) */
    pb->seg_start = parr_new((l->n_runs + 1) * sizeof(*pb->seg_start));
    pb->seg_step = parr_new((l->n_runs ? l->n_runs : 1) * sizeof(*pb->seg_step));
    pb->segs = parr_new(cap * sizeof(*pb->segs));
    if (pb->seg_start == NULL || pb->seg_step == NULL || pb->segs == NULL)
        return IXL_ERR_NO_MEMORY;
    pb->n_segs = 0;
    for (size_t r = 0; r < l->n_runs; r++) {
        const struct ixl_run *run = &l->runs[r];
        pb->seg_start[r] = pb->n_segs;
        uint64_t e = 0;
        while (e < run->count) {
            uint64_t addr = run->addr + e * run->stride;
            struct region *g = ixl_registry_cover(reg, l->type, b, run->dev, addr, run->len);
            struct ixl_md *md = g ? region_md(g, b, target_local ? 1 : 0) : NULL;
            if (md == NULL) {
                *bad = l->first[r] + e;
                return IXL_ERR_NOT_REGISTERED;
            }
            uint64_t last = ixl_region_last_covered(g, run);
            if (pb->n_segs == cap) {
                if (cap > SIZE_MAX / 2 / sizeof(struct prep_seg))
                    return IXL_ERR_NO_MEMORY;
                struct prep_seg *s = parr_grow(pb->segs, cap * sizeof(*s), 2 * cap * sizeof(*s));
                if (s == NULL)
                    return IXL_ERR_NO_MEMORY;
                pb->segs = s;
                cap *= 2;
            }
            pb->segs[pb->n_segs++] = (struct prep_seg){e, last - e + 1, md, g};
            if (!p->remote && push_region(p, g, region_cap) != IXL_OK)
                return IXL_ERR_NO_MEMORY;
            e = last + 1;
        }
    }
    pb->seg_start[l->n_runs] = pb->n_segs;
    for (size_t r = 0; r < l->n_runs; r++) {
        size_t lo = pb->seg_start[r], hi = pb->seg_start[r + 1];
        uint64_t step = pb->segs[lo].count;
        for (size_t k = lo; step && k + 1 < hi; k++)
            if (pb->segs[k].count != step)
                step = 0;
        pb->seg_step[r] = hi - lo > 1 ? step : 0;
    }
    /* The steps' divisors, for lists that have any (no memory for the others). */
    for (size_t r = 0; r < l->n_runs; r++) {
        if (pb->seg_step[r] == 0)
            continue;
        if (pb->seg_step_m == NULL) {
            pb->seg_step_m = parr_new(l->n_runs * sizeof(*pb->seg_step_m));
            if (pb->seg_step_m == NULL)
                return IXL_ERR_NO_MEMORY;
            memset(pb->seg_step_m, 0, l->n_runs * sizeof(*pb->seg_step_m));
        }
        if (pb->seg_step[r] > 1)
            pb->seg_step_m[r] = ixl_udiv_magic(pb->seg_step[r]);
    }
    return IXL_OK;
}

static int in_list(struct ixl_backend *const *list, size_t n, const struct ixl_backend *b)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == b)
            return 1;
    return 0;
}

/* Whether run r continues the arithmetic progression of run t (same length and device, next
 * address where t's stride says): then they become one run with the same descriptor indices. A
 * list of single descriptors laid out at a fixed stride so costs one run, not one per block. */
static int extend_run(struct ixl_run *t, const struct ixl_run *r)
{
    if (t->len != r->len || t->dev != r->dev || r->addr <= t->addr)
        return 0;
    uint64_t gap = r->addr - t->addr, count;
    if (__builtin_add_overflow(t->count, r->count, &count))
        return 0;
    if (t->count == 1) {
        /* t's stride is free: it is whatever gets to r, if r itself agrees. */
        if (r->count > 1 && r->stride != gap)
            return 0;
        t->stride = gap;
        t->count = count;
        return 1;
    }
    uint64_t next;
    if (__builtin_mul_overflow(t->count, t->stride, &next) || next != gap ||
        (r->count > 1 && r->stride != t->stride))
        return 0;
    t->count = count;
    return 1;
}

/* The prepared list's copy of src, consecutive progressions merged straight into it (no
 * temporary array): arrays of parr_new, freed with prep_list_free, never appended to. */
static int copy_merged(const struct ixl_dlist *src, struct ixl_dlist **out)
{
    /* One pass over src (10^6 single descriptors are 40 MB of runs: a second pass to count
     * them first showed as 2x in bench_core), merged into an array that doubles from
     * PREP_RUNS0 runs up to src's count; src's arrays exist for that many runs (ixl_dlist's
     * reserve), so no byte count wraps. The first indices then for exactly the merged runs. */
    size_t cap = src->n_runs < PREP_RUNS0 ? src->n_runs : PREP_RUNS0;
    cap = cap ? cap : 1;
    struct ixl_dlist *l = sys_calloc(1, sizeof(*l));
    if (l == NULL)
        return IXL_ERR_NO_MEMORY;
    l->type = src->type;
    l->runs = parr_new(cap * sizeof(*l->runs));
    if (l->runs == NULL) {
        prep_list_free(l);
        return IXL_ERR_NO_MEMORY;
    }
    size_t n = 0;
    for (size_t i = 0; i < src->n_runs; i++) {
        if (n > 0 && extend_run(&l->runs[n - 1], &src->runs[i]))
            continue;
        if (n == cap) { /* (n <= i < src->n_runs) */
            size_t c = cap < src->n_runs / 2 ? 2 * cap : src->n_runs;
            struct ixl_run *r = parr_grow(l->runs, n * sizeof(*r), c * sizeof(*r));
            if (r == NULL) {
                prep_list_free(l);
                return IXL_ERR_NO_MEMORY;
            }
            l->runs = r;
            cap = c;
        }
        l->runs[n++] = src->runs[i];
    }
    l->first = parr_new((n + 1) * sizeof(*l->first));
    if (l->first == NULL) {
        prep_list_free(l);
        return IXL_ERR_NO_MEMORY;
    }
    l->cap = n; /* (never appended to: first[] has n + 1 entries) */
    /* Merging keeps the total, which src's first[] holds without overflow. */
    l->first[0] = 0;
    for (size_t i = 0; i < n; i++)
        l->first[i + 1] = l->first[i] + l->runs[i].count;
    l->n_runs = n;
    *out = l;
    return IXL_OK;
}

/* The count every run has, or 0: with it, an index's run is a division, not a search. */
static uint64_t uniform_count(const struct ixl_dlist *l)
{
    if (l->n_runs < 2)
        return 0;
    for (size_t i = 1; i < l->n_runs; i++)
        if (l->runs[i].count != l->runs[0].count)
            return 0;
    return l->runs[0].count;
}

static int ixl_mem_is_storage(enum ixl_mem t)
{
    return t == IXL_MEM_FILE || t == IXL_MEM_BLK || t == IXL_MEM_OBJ;
}

/* Builds a prepared list (agent->lock held for reading). remote NULL: the initiator side. */
static int prep_build(struct ixl_agent *agent, const char *remote, const struct ixl_dlist *list,
                      struct ixl_backend *const *only, size_t n_only, struct ixl_prep **out,
                      const char *side)
{
    struct ixl_prep *p = sys_calloc(1, sizeof(*p));
    if (p == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    p->agent = agent;
    p->initiator = remote == NULL;
    p->loopback = remote != NULL && strcmp(remote, agent->name) == 0;
    int rc = IXL_OK;
    const struct ixl_registry *reg = agent->registry;
    if (remote != NULL && !p->loopback) {
        p->remote = ixl_remote_find(agent, remote);
        if (p->remote == NULL) {
            free(p);
            return IXL_AGENT_ERR(agent, IXL_ERR_NOT_FOUND,
                                 "metadata for remote agent '%s' not found (%s'%s')", remote,
                                 ixl_mem_is_storage(list->type)
                                     ? "a transfer to storage is within the agent: storage "
                                       "backends never reach another agent; give this agent's "
                                       "own name "
                                     : "load it with ixl_md_load, or use this agent's own name "
                                       "for loopback and storage: ",
                                 agent->name);
        }
        ixl_remote_get(p->remote);
        reg = p->remote->regs;
    }
    p->list = NULL;
    rc = copy_merged(list, &p->list);
    if (rc == IXL_OK) {
        p->uniform = uniform_count(p->list);
        p->uniform_m = p->uniform > 1 ? ixl_udiv_magic(p->uniform) : 0;
    }
    if (rc != IXL_OK) {
        prep_free(p);
        return IXL_AGENT_ERR(agent, rc, "out of memory");
    }

    size_t region_cap = 0;
    uint64_t first_bad = UINT64_MAX;
    struct ixl_backend *bad_backend = NULL;
    int typed = 0;
    for (unsigned b = 0; b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || (only && !in_list(only, n_only, be)))
            continue;
        if (!(be->mem_mask & IXL_MEM_BIT(list->type)))
            continue;
        if (p->loopback && !(be->caps & IXL_CAP_LOCAL))
            continue;
        if (p->remote && !((be->caps & IXL_CAP_REMOTE) && (p->remote->conn_mask & (1u << b))))
            continue;
        typed = 1;
        uint64_t bad = 0;
        size_t keep_regions = p->n_regions;
        rc = prep_backend(p, reg, b, p->loopback, &bad, &region_cap);
        if (rc == IXL_OK) {
            p->valid_mask |= 1u << b;
            continue;
        }
        prep_backend_free(&p->per[b]);
        p->n_regions = keep_regions;
        if (rc != IXL_ERR_NOT_REGISTERED) {
            prep_free(p);
            return IXL_AGENT_ERR(agent, rc, "out of memory");
        }
        if (bad_backend == NULL || bad < first_bad) {
            first_bad = bad;
            bad_backend = be;
        }
    }
    if (p->valid_mask == 0) {
        if (!typed) {
            rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_BACKEND,
                               "no backend of agent '%s' can serve the %s list (%s memory%s%s)",
                               agent->name, side, ixl_mem_name(list->type),
                               p->remote ? ", remote agent " : (p->loopback ? ", loopback" : ""),
                               p->remote ? p->remote->name : "");
        } else {
            struct ixl_desc d = {0};
            ixl_dlist_get(list, first_bad, &d);
            rc = IXL_AGENT_ERR(
                agent, IXL_ERR_NOT_REGISTERED,
                "descriptor %llu of the %s list (addr 0x%llx, len %llu, dev %llu) "
                "is not inside a %s region %s%s%s with backend %s",
                (unsigned long long)first_bad, side, (unsigned long long)d.addr,
                (unsigned long long)d.len, (unsigned long long)d.dev, ixl_mem_name(list->type),
                p->remote ? "loaded for agent '" : "registered by agent '",
                p->remote ? p->remote->name : agent->name, "'", bad_backend->plugin->info.name);
        }
        prep_free(p);
        return rc;
    }
    for (size_t i = 0; i < p->n_regions; i++)
        atomic_fetch_add(&p->regions[i]->users, 1);
    p->counted = 1;
    *out = p;
    return IXL_OK;
}

ixl_status ixl_prep_create(struct ixl_agent *agent, const char *remote,
                           const struct ixl_dlist *list, const struct ixl_prep_params *params,
                           struct ixl_prep **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (list == NULL || out == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_prep_create: NULL list or out");
    int use = params && (params->field_mask & IXL_PREP_F_BACKENDS) && params->n_backends;
    if (use && params->backends == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "backends given as a NULL array");
    pthread_rwlock_rdlock(&agent->lock);
    struct ixl_prep *p = NULL;
    int rc = prep_build(agent, remote, list, use ? params->backends : NULL,
                        use ? params->n_backends : 0, &p, remote ? "target" : "local");
    /* Tracked before the lock goes, so ixl_backend_destroy sees every list it could use. */
    if (rc == IXL_OK)
        ixl_agent_track_prep(agent, p);
    pthread_rwlock_unlock(&agent->lock);
    if (rc != IXL_OK)
        return rc;
    *out = p;
    return IXL_OK;
}

void ixl_prep_destroy(struct ixl_prep *prep)
{
    if (prep == NULL)
        return;
    ixl_agent_untrack_prep(prep->agent, prep);
    prep_free(prep);
}

uint64_t ixl_prep_count(const struct ixl_prep *prep)
{
    return prep ? ixl_dlist_count(prep->list) : 0;
}

/* ---- building a request -------------------------------------------------------------------- */

/* Walks a prepared list by descriptor index, caching the current run and segment: consecutive
 * indices cost O(1), random ones a multiplication (uniform runs) or a binary search, then a
 * search over the run's segments (usually one). The list's arrays and constants are copied in
 * at the start: the request's descriptor stores (64-bit words, as the tables are) would
 * otherwise make the compiler load each pointer chain again for every index. */
struct cursor {
    const uint64_t *first;
    const struct ixl_run *runs;
    const size_t *seg_start;
    const uint64_t *seg_step, *seg_step_m;
    const struct prep_seg *segs;
    const struct ixl_dlist *list;
    uint64_t uniform, uniform_m;
    size_t run;
    size_t seg;
};

static void cursor_init(struct cursor *c, const struct ixl_prep *p, unsigned b)
{
    const struct prep_backend *pb = &p->per[b];
    *c = (struct cursor){p->list->first,
                         p->list->runs,
                         pb->seg_start,
                         pb->seg_step,
                         pb->seg_step_m,
                         pb->segs,
                         p->list,
                         p->uniform,
                         p->uniform_m,
                         0,
                         0};
}

/* idx / c->uniform (see ixl_udiv_m). */
static inline uint64_t uniform_run(const struct cursor *c, uint64_t idx)
{
    return c->uniform == 1 ? idx : ixl_udiv_m(idx, c->uniform, c->uniform_m);
}

/* e / step for a run's equal segments (magic: its seg_step_m entry). */
static inline uint64_t step_div(uint64_t e, uint64_t step, uint64_t magic)
{
    return step == 1 ? e : ixl_udiv_m(e, step, magic);
}

/* Fills out for descriptor idx and returns how many descriptors from idx on lie in the same
 * segment (>= 1), with their stride in *stride. */
static inline __attribute__((always_inline)) uint64_t
cursor_get(struct cursor *c, uint64_t idx, struct ixl_xfer_desc *out, uint64_t *stride)
{
    const uint64_t *first = c->first;
    size_t r = c->run, sgi = c->seg;
    if (!(idx >= first[r] && idx < first[r + 1])) {
        r = c->uniform ? (size_t)uniform_run(c, idx) : ixl_dlist_find_run(c->list, idx);
        sgi = c->seg_start[r];
    }
    const struct ixl_run *run = &c->runs[r];
    uint64_t e = idx - first[r];
    const struct prep_seg *segs = c->segs;
    size_t lo = c->seg_start[r], hi = c->seg_start[r + 1];
    if (!(sgi >= lo && sgi < hi && e >= segs[sgi].first && e - segs[sgi].first < segs[sgi].count)) {
        uint64_t step = c->seg_step[r];
        if (step) {
            /* Equal segments: the segment is a division away. */
            uint64_t k = step_div(e, step, c->seg_step_m[r]);
            lo = lo + k < hi ? lo + (size_t)k : hi - 1;
            hi = lo + 1;
        }
        while (hi - lo > 1) { /* the last segment with first <= e */
            size_t mid = lo + (hi - lo) / 2;
            if (segs[mid].first <= e)
                lo = mid;
            else
                hi = mid;
        }
        sgi = lo;
    }
    c->run = r;
    c->seg = sgi;
    const struct prep_seg *sg = &segs[sgi];
    out->addr = run->addr + e * run->stride;
    out->len = run->len;
    out->dev = run->dev;
    out->md = sg->md;
    *stride = run->stride;
    return sg->first + sg->count - e;
}

/*
 * The pairs of a request that no general rule applies to: from pair i on, as long as neither
 * index continues into the next pair on both sides (consecutive blocks: the general loop takes
 * those many at a time), both indices are inside their lists, the lengths agree and the output
 * has room. Each pair costs one lookup per side straight from the list's tables, without the
 * cursor's bookkeeping for consecutive indices: random indices (a serving engine's scattered
 * KV blocks) found the cursor's cached run and segment almost never right, and paid for its
 * checks, its state and the general loop's cases on every pair. The descriptors and merges
 * are those of the general loop (a pair adjacent to the previous one on both sides extends
 * it). Returns the first pair it did not take; the general loop takes that one (and reports
 * what is wrong with it, if anything).
 */
struct side {
    const uint64_t *first;
    const struct ixl_run *runs;
    const size_t *seg_start;
    const uint64_t *seg_step, *seg_step_m;
    const struct prep_seg *segs;
    const struct ixl_dlist *list;
    uint64_t uniform, uniform_m, count;
    int one_run;
    /* The shape fast_pairs knows (enum fast_shape), and for FAST_ONE_RUN its segments' count
     * (step) and last index. */
    int fast;
    uint64_t fstep;
    size_t fseg_last;
    /* fast_get's multiplier: ceil(2^64 / u), u = uniform (FAST_RUN_SEG) or fstep (FAST_ONE_RUN). */
    uint64_t fmul;
};

/* Shapes of a prepared list (for one backend) where a descriptor is found by one division, a
 * multiplication:
 * FAST_RUN_SEG: every run has the same count (> 1) and lies in one region (segment r is run
 * r's: a KV cache's per-layer runs); FAST_ONE_RUN: one run across regions of equal counts
 * (> 1), the last one possibly different (layers contiguous in memory, merged into one run). */
enum fast_shape { FAST_NONE, FAST_RUN_SEG, FAST_ONE_RUN };

static void side_init(struct side *s, const struct ixl_prep *p, unsigned b)
{
    const struct prep_backend *pb = &p->per[b];
    *s = (struct side){p->list->first,
                       p->list->runs,
                       pb->seg_start,
                       pb->seg_step,
                       pb->seg_step_m,
                       pb->segs,
                       p->list,
                       p->uniform,
                       p->uniform_m,
                       ixl_dlist_count(p->list),
                       p->list->n_runs == 1,
                       FAST_NONE,
                       0,
                       0,
                       0};
    /* (a run's count is > 0: in a uniform list each run has a segment or more) */
    if (p->uniform > 1 && pb->n_segs == p->list->n_runs) {
        s->fast = FAST_RUN_SEG;
    } else if (s->one_run && pb->n_segs > 1 && pb->seg_step[0] > 1) {
        s->fast = FAST_ONE_RUN;
        s->fstep = pb->seg_step[0];
        s->fseg_last = pb->n_segs - 1;
    }
    /* fast_get divides by one multiplication, with no correction: floor(idx / u) is the high
     * half of idx * m for m = ceil(2^64 / u) = (2^64 + e) / u, 0 <= e < u, whenever
     * idx * e < 2^64 (with idx = q * u + rho: idx * m / 2^64 = q + (rho + idx * e / 2^64) / u,
     * and rho <= u - 1), which every idx < count meets when count * u < 2^64. A larger list
     * (2^32 descriptors and more, at the least) takes the general lookup. */
    uint64_t u = s->fast == FAST_RUN_SEG ? s->uniform : s->fstep;
    if (s->fast != FAST_NONE) {
        unsigned __int128 cu = (unsigned __int128)s->count * u;
        if (cu >> 64)
            s->fast = FAST_NONE;
        else
            s->fmul = UINT64_MAX / u + 1;
    }
}

/* The descriptor of idx (< s->count) into *d. */
static inline __attribute__((always_inline)) void side_get(const struct side *s, uint64_t idx,
                                                           struct ixl_xfer_desc *d)
{
    size_t r;
    uint64_t e;
    if (s->uniform > 1) {
        r = (size_t)ixl_udiv_m(idx, s->uniform, s->uniform_m);
        e = idx - (uint64_t)r * s->uniform;
    } else if (s->uniform == 1) {
        r = (size_t)idx;
        e = 0;
    } else if (s->one_run) {
        r = 0;
        e = idx;
    } else {
        r = ixl_dlist_find_run(s->list, idx);
        e = idx - s->first[r];
    }
    size_t lo = s->seg_start[r], hi = s->seg_start[r + 1];
    if (__builtin_expect(hi - lo > 1, 0)) {
        const struct prep_seg *segs = s->segs;
        uint64_t step = s->seg_step[r];
        if (step) {
            uint64_t k = step_div(e, step, s->seg_step_m[r]);
            lo = lo + k < hi ? lo + (size_t)k : hi - 1;
            hi = lo + 1;
        }
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (segs[mid].first <= e)
                lo = mid;
            else
                hi = mid;
        }
    }
    const struct ixl_run *run = &s->runs[r];
    d->addr = run->addr + e * run->stride;
    d->len = run->len;
    d->dev = run->dev;
    d->md = s->segs[lo].md;
}

/* Extends the last of the m pairs of lout and rout by (ld, rd) when both sides continue it in
 * memory, in the same region (metadata) and on the same device: 1 merged, 0 not. */
static inline __attribute__((always_inline)) int
pair_merge(struct ixl_xfer_desc *restrict lout, struct ixl_xfer_desc *restrict rout, size_t m,
           const struct ixl_xfer_desc *ld, const struct ixl_xfer_desc *rd)
{
    if (m == 0)
        return 0;
    struct ixl_xfer_desc *pl = &lout[m - 1], *pr = &rout[m - 1];
    if (pl->addr + pl->len != ld->addr || pr->addr + pr->len != rd->addr || pl->md != ld->md ||
        pr->md != rd->md || pl->dev != ld->dev || pr->dev != rd->dev)
        return 0;
    pl->len += ld->len;
    pr->len += rd->len;
    return 1;
}

static __attribute__((noinline)) size_t
scattered_pairs(const struct side *L, const struct side *R, const int64_t *li, const int64_t *ri,
                size_t i, size_t n, struct ixl_xfer_desc *restrict lout,
                struct ixl_xfer_desc *restrict rout, size_t out_cap, int merge, size_t *m_io,
                uint64_t *bytes_io)
{
    size_t m = *m_io;
    uint64_t bytes = *bytes_io;
    for (; i < n && m < out_cap; i++) {
        uint64_t a = (uint64_t)li[i], c = (uint64_t)ri[i]; /* a negative index is huge */
        if (a >= L->count || c >= R->count)
            break;
        if (i + 1 < n && (uint64_t)li[i + 1] == a + 1 && (uint64_t)ri[i + 1] == c + 1)
            break;
        struct ixl_xfer_desc ld, rd;
        side_get(L, a, &ld);
        side_get(R, c, &rd);
        if (ld.len != rd.len)
            break;
        bytes += ld.len;
        if (merge && pair_merge(lout, rout, m, &ld, &rd))
            continue;
        lout[m] = ld;
        rout[m] = rd;
        m++;
    }
    *m_io = m;
    *bytes_io = bytes;
    return i;
}

/* side_get for a side of shape `shape` (a constant where inlined): no branch on the shape. */
static inline __attribute__((always_inline)) void fast_get(const struct side *s, int shape,
                                                           uint64_t idx, struct ixl_xfer_desc *d)
{
    const struct ixl_run *run;
    size_t seg;
    if (shape == FAST_RUN_SEG) {
        uint64_t r = (uint64_t)(((unsigned __int128)idx * s->fmul) >> 64);
        run = &s->runs[r];
        seg = (size_t)r;
        idx -= r * s->uniform;
    } else {
        uint64_t k = (uint64_t)(((unsigned __int128)idx * s->fmul) >> 64);
        run = &s->runs[0];
        seg = k < s->fseg_last ? (size_t)k : s->fseg_last;
    }
    d->addr = run->addr + idx * run->stride;
    d->len = run->len;
    d->dev = run->dev;
    d->md = s->segs[seg].md;
}

/* scattered_pairs for the shapes of enum fast_shape, inlined once per pair of shapes. */
static inline __attribute__((always_inline)) size_t
fast_pairs_of(const struct side *L, int lshape, const struct side *R, int rshape, const int64_t *li,
              const int64_t *ri, size_t i, size_t end, struct ixl_xfer_desc *restrict lout,
              struct ixl_xfer_desc *restrict rout, int merge, size_t *m_io, uint64_t *bytes_io)
{
    size_t m = *m_io;
    uint64_t bytes = *bytes_io;
    const uint64_t lcount = L->count, rcount = R->count;
    for (; i < end; i++) {
        uint64_t a = (uint64_t)li[i], c = (uint64_t)ri[i]; /* a negative index is huge */
        if (a >= lcount || c >= rcount)
            break;
        if ((uint64_t)li[i + 1] == a + 1 && (uint64_t)ri[i + 1] == c + 1)
            break; /* a consecutive stretch: the caller's loop takes it whole */
        struct ixl_xfer_desc ld, rd;
        fast_get(L, lshape, a, &ld);
        fast_get(R, rshape, c, &rd);
        if (ld.len != rd.len)
            break;
        bytes += ld.len;
        if (merge && pair_merge(lout, rout, m, &ld, &rd))
            continue;
        lout[m] = ld;
        rout[m] = rd;
        m++;
    }
    *m_io = m;
    *bytes_io = bytes;
    return i;
}

/* scattered_pairs where both sides have a shape of enum fast_shape (side_get's branches over
 * the list's shape and its segment search cost more than the rest of a random index pair).
 * Stops, for scattered_pairs to go on from i, before the last pair, at room for out_cap -
 * *m_io more descriptors, and where scattered_pairs would stop. */
static __attribute__((noinline)) size_t fast_pairs(const struct side *L, const struct side *R,
                                                   const int64_t *li, const int64_t *ri, size_t i,
                                                   size_t n, struct ixl_xfer_desc *restrict lout,
                                                   struct ixl_xfer_desc *restrict rout,
                                                   size_t out_cap, int merge, size_t *m_io,
                                                   uint64_t *bytes_io)
{
    size_t end = n - 1 > i ? n - 1 : i; /* the look at pair i + 1 stays inside */
    if (end - i > out_cap - *m_io)
        end = i + (out_cap - *m_io); /* each pair adds at most one descriptor */
    const int R1 = FAST_RUN_SEG, O1 = FAST_ONE_RUN;
    if (L->fast == R1 && R->fast == R1)
        return fast_pairs_of(L, R1, R, R1, li, ri, i, end, lout, rout, merge, m_io, bytes_io);
    if (L->fast == R1 && R->fast == O1)
        return fast_pairs_of(L, R1, R, O1, li, ri, i, end, lout, rout, merge, m_io, bytes_io);
    if (L->fast == O1 && R->fast == R1)
        return fast_pairs_of(L, O1, R, R1, li, ri, i, end, lout, rout, merge, m_io, bytes_io);
    if (L->fast == O1 && R->fast == O1)
        return fast_pairs_of(L, O1, R, O1, li, ri, i, end, lout, rout, merge, m_io, bytes_io);
    return i;
}

/* The first k' >= k (<= kmax) where li[k'] != a + k' or ri[k'] != c + k': the end of a stretch
 * of consecutive pairs. Four pairs a test (one branch for eight compares) while they continue. */
static inline size_t stretch_end(const int64_t *li, const int64_t *ri, uint64_t a, uint64_t c,
                                 size_t k, size_t kmax)
{
    for (; kmax - k >= 4; k += 4) {
        uint64_t d = ((uint64_t)li[k] ^ (a + k)) | ((uint64_t)li[k + 1] ^ (a + k + 1)) |
                     ((uint64_t)li[k + 2] ^ (a + k + 2)) | ((uint64_t)li[k + 3] ^ (a + k + 3)) |
                     ((uint64_t)ri[k] ^ (c + k)) | ((uint64_t)ri[k + 1] ^ (c + k + 1)) |
                     ((uint64_t)ri[k + 2] ^ (c + k + 2)) | ((uint64_t)ri[k + 3] ^ (c + k + 3));
        if (d != 0)
            break;
    }
    while (k < kmax && (uint64_t)li[k] == a + k && (uint64_t)ri[k] == c + k)
        k++;
    return k;
}

/* Descriptor arrays of finished requests, kept for the next ones: a 10^5-descriptor request
 * needs 6 MB of them, and returning that to the OS at every release makes the next request
 * fault it all in again. A few blocks per agent, under their own lock. */
struct desc_block {
    size_t cap; /* descriptors per side */
    struct ixl_xfer_desc d[];
};

#define DESC_FIRST ((size_t)1 << 18)

static struct ixl_xfer_desc *desc_take(struct ixl_agent *agent, size_t n)
{
    if (n > (SIZE_MAX - sizeof(struct desc_block)) / (2 * sizeof(struct ixl_xfer_desc)))
        return NULL;
    struct desc_block *blk = NULL;
    pthread_mutex_lock(&agent->pool_lock);
    for (int i = 0; i < IXL_DESC_POOL; i++) {
        struct desc_block *c = agent->desc_pool[i];
        if (c && c->cap >= n && (blk == NULL || c->cap < blk->cap))
            blk = c;
    }
    for (int i = 0; blk && i < IXL_DESC_POOL; i++)
        if (agent->desc_pool[i] == blk)
            agent->desc_pool[i] = NULL;
    pthread_mutex_unlock(&agent->pool_lock);
    if (blk == NULL) {
        blk = sys_malloc(sizeof(*blk) + 2 * n * sizeof(blk->d[0]));
        if (blk == NULL)
            return NULL;
        blk->cap = n;
    }
    return blk->d;
}

static void desc_give(struct ixl_agent *agent, struct ixl_xfer_desc *d)
{
    if (d == NULL)
        return;
    struct desc_block *blk = (struct desc_block *)((char *)d - offsetof(struct desc_block, d));
    pthread_mutex_lock(&agent->pool_lock);
    /* Keep the larger blocks: they serve every smaller request too. */
    int slot = -1;
    for (int i = 0; i < IXL_DESC_POOL; i++) {
        struct desc_block *c = agent->desc_pool[i];
        if (c == NULL) {
            slot = i;
            break;
        }
        if (c->cap < blk->cap && (slot < 0 || c->cap < agent->desc_pool[slot]->cap))
            slot = i;
    }
    if (slot >= 0) {
        struct desc_block *old = agent->desc_pool[slot];
        agent->desc_pool[slot] = blk;
        blk = old;
    }
    pthread_mutex_unlock(&agent->pool_lock);
    free(blk);
}

static size_t desc_cap(const struct ixl_xfer_desc *d)
{
    return ((const struct desc_block *)((const char *)d - offsetof(struct desc_block, d)))->cap;
}

/* Moves x's m descriptor pairs into a block twice as large (at most want). */
static int desc_grow(struct ixl_xfer *x, size_t m, size_t want)
{
    size_t cap = desc_cap(x->ldesc);
    size_t ncap = cap * 2 < want ? cap * 2 : want;
    struct ixl_xfer_desc *d = desc_take(x->agent, ncap);
    if (d == NULL)
        return IXL_ERR_NO_MEMORY;
    ncap = desc_cap(d);
    memcpy(d, x->ldesc, m * sizeof(*d));
    memcpy(d + ncap, x->rdesc, m * sizeof(*d));
    desc_give(x->agent, x->ldesc);
    x->ldesc = d;
    x->rdesc = d + ncap;
    return IXL_OK;
}

void ixl_desc_pool_fini(struct ixl_agent *agent)
{
    for (int i = 0; i < IXL_DESC_POOL; i++) {
        free(agent->desc_pool[i]);
        agent->desc_pool[i] = NULL;
    }
}

static void xfer_free(struct ixl_xfer *x)
{
    if (x == NULL)
        return;
    ixl_regions_unuse(x->regions, x->n_regions);
    free(x->regions);
    if (x->remote)
        ixl_remote_put(x->remote, 0);
    desc_give(x->agent, x->ldesc);
    free(x->notif);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

/* Chooses the backend: the first (in preference or creation order) that both lists can use and
 * that can notify when a notification is asked for. */
static int choose_backend(struct ixl_agent *agent, const struct ixl_prep *l,
                          const struct ixl_prep *r, const struct ixl_xfer_params *params, int notif,
                          uint32_t skip, struct ixl_backend **out)
{
    uint32_t both = l->valid_mask & r->valid_mask & ~skip;
    struct ixl_backend *const *pref = NULL;
    size_t n_pref = 0;
    if (params && (params->field_mask & IXL_XFER_F_BACKENDS) && params->n_backends) {
        pref = params->backends;
        n_pref = params->n_backends;
    }
    struct ixl_backend *no_notif = NULL;
    size_t n = pref ? n_pref : agent->n_backends;
    for (size_t i = 0; i < n; i++) {
        struct ixl_backend *b = pref ? pref[i] : agent->backends[i];
        if (b == NULL || b->agent != agent || !(both & (1u << b->slot)))
            continue;
        if (notif && !(b->caps & IXL_CAP_NOTIF)) {
            if (no_notif == NULL)
                no_notif = b;
            continue;
        }
        *out = b;
        return IXL_OK;
    }
    if (no_notif)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOTIF_UNSUPPORTED,
                             "backend %s does not support notifications: omit the notification "
                             "or choose a backend that has them",
                             no_notif->plugin->info.name);
    return IXL_AGENT_ERR(agent, IXL_ERR_NO_BACKEND,
                         "no backend can serve both lists (%s local, %s remote%s): each list's "
                         "descriptors must lie in regions of one common backend",
                         ixl_mem_name(l->list->type), ixl_mem_name(r->list->type),
                         pref ? ", among the preferred backends" : "");
}

/* x->path from its backend (req_info), when the backend says (x->lock held, or x not yet
 * shared). */
static void read_path(struct ixl_xfer *x)
{
    x->path_stale = 0;
    const struct ixl_backend *be = x->backend;
    if (!be->plugin->has[IXL_OPT_REQ_INFO] || x->req == NULL)
        return;
    struct ixl_req_info info = {.size = sizeof(info)};
    if (be->plugin->ops.req_info(be->engine, x->req, &info) == IXL_OK) {
        info.path[sizeof(info.path) - 1] = '\0';
        memcpy(x->path, info.path, sizeof(x->path));
    }
}

/* Makes the request from index arrays (NULL = 0, 1, 2, ...) into two prepared lists
 * (agent->lock held for reading), with the first suitable backend outside *skip; a backend
 * that refuses the pair of memory types (IXL_ERR_BAD_MEM_TYPE from prep_xfer) is added to
 * *skip. */
static int xfer_build_one(struct ixl_agent *agent, enum ixl_op op, const struct ixl_prep *lp,
                          const int64_t *li, const struct ixl_prep *rp, const int64_t *ri, size_t n,
                          const struct ixl_xfer_params *params, uint32_t *skip,
                          struct ixl_xfer **out)
{
    int notif = params && (params->field_mask & IXL_XFER_F_NOTIF) && params->notif_len > 0;
    if (notif && params->notif == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "notif_len > 0 with a NULL notif");
    if (notif && params->notif_len > agent->params.notif_max)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOTIF_TOO_LARGE,
                             "notification of %zu bytes exceeds the maximum of %zu",
                             params->notif_len, agent->params.notif_max);
    if (rp->remote && !atomic_load(&rp->remote->valid))
        return IXL_AGENT_ERR(agent, IXL_ERR_STALE,
                             "remote agent '%s' was invalidated or reloaded after the target "
                             "list was prepared: prepare it again",
                             rp->remote->name);
    struct ixl_backend *be = NULL;
    int rc = choose_backend(agent, lp, rp, params, notif, *skip, &be);
    if (rc != IXL_OK)
        return rc;
    unsigned b = be->slot;

    struct ixl_xfer *x = sys_calloc(1, sizeof(*x));
    if (x == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&x->lock, NULL);
    x->agent = agent;
    x->backend = be;
    x->op = op;
    /* Sized for the pairs before merging, up to a first step; grown while building when a
     * request merges less than that. */
    x->ldesc = desc_take(agent, n < DESC_FIRST ? (n ? n : 1) : DESC_FIRST);
    x->rdesc = x->ldesc ? x->ldesc + desc_cap(x->ldesc) : NULL;
    if (x->ldesc == NULL) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
        goto free_xfer;
    }
    uint64_t lcount = ixl_dlist_count(lp->list), rcount = ixl_dlist_count(rp->list);
    int merge = !(params && (params->field_mask & IXL_XFER_F_NO_MERGE) && params->no_merge);
    struct cursor lc, rc_;
    cursor_init(&lc, lp, b);
    cursor_init(&rc_, rp, b);
    struct side ls, rs;
    side_init(&ls, lp, b);
    side_init(&rs, rp, b);
    size_t m = 0;
    uint64_t bytes = 0;
    /* The output arrays in locals that alias nothing the loop reads (see struct cursor). */
    struct ixl_xfer_desc *restrict lout = x->ldesc, *restrict rout = x->rdesc;
    size_t out_cap = desc_cap(x->ldesc);
    for (size_t i = 0; i < n;) {
        if (li && ri) {
            if (ls.fast != FAST_NONE && rs.fast != FAST_NONE)
                i = fast_pairs(&ls, &rs, li, ri, i, n, lout, rout, out_cap, merge, &m, &bytes);
            i = scattered_pairs(&ls, &rs, li, ri, i, n, lout, rout, out_cap, merge, &m, &bytes);
            if (i == n)
                break;
        }
        int64_t a = li ? li[i] : (int64_t)i, c = ri ? ri[i] : (int64_t)i;
        if (a < 0 || (uint64_t)a >= lcount || c < 0 || (uint64_t)c >= rcount) {
            rc = IXL_AGENT_ERR(agent, IXL_ERR_INDEX,
                               "index pair %zu (%lld, %lld) is outside the prepared lists "
                               "(%llu local, %llu remote descriptors)",
                               i, (long long)a, (long long)c, (unsigned long long)lcount,
                               (unsigned long long)rcount);
            goto free_xfer;
        }
        struct ixl_xfer_desc ld, rd;
        uint64_t lstride, rstride;
        uint64_t lleft = cursor_get(&lc, (uint64_t)a, &ld, &lstride);
        uint64_t rleft = cursor_get(&rc_, (uint64_t)c, &rd, &rstride);
        if (ld.len != rd.len) {
            rc = IXL_AGENT_ERR(agent, IXL_ERR_MISMATCH,
                               "descriptor pair %zu: local length %llu, remote length %llu "
                               "(each pair must have equal lengths)",
                               i, (unsigned long long)ld.len, (unsigned long long)rd.len);
            goto free_xfer;
        }
        /* The pairs after i that continue both index sequences inside both segments: the
         * common case of consecutive blocks, handled without a lookup each. */
        uint64_t k = 1, kmax = lleft < rleft ? lleft : rleft;
        if (kmax > n - i)
            kmax = n - i;
        if (li && ri)
            k = stretch_end(li + i, ri + i, (uint64_t)a, (uint64_t)c, k, kmax);
        else if (li || ri)
            while (k < kmax && (li ? li[i + k] == a + (int64_t)k : ri[i + k] == c + (int64_t)k))
                k++;
        else
            k = kmax;
        uint64_t pairs = k;
        bytes += k * ld.len;
        if (merge && lstride == ld.len && rstride == rd.len) {
            /* Contiguous on both sides: k pairs are one descriptor. */
            ld.len *= k;
            rd.len *= k;
            k = 1;
        }
        /* Only the first can merge with the descriptor before: past it, one side at least
         * has a stride other than its length (else k is 1 now). */
        uint64_t j = 0;
        if (merge && pair_merge(lout, rout, m, &ld, &rd)) {
            ld.addr += lstride;
            rd.addr += rstride;
            j = 1;
        }
        while (j < k) {
            if (m == out_cap) {
                if (desc_grow(x, m, n) != IXL_OK) {
                    rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
                    goto free_xfer;
                }
                lout = x->ldesc;
                rout = x->rdesc;
                out_cap = desc_cap(x->ldesc);
            }
            uint64_t cnt = k - j < out_cap - m ? k - j : out_cap - m;
            for (uint64_t t = 0; t < cnt; t++) {
                lout[m + t] = (struct ixl_xfer_desc){ld.addr + t * lstride, ld.len, ld.dev, ld.md};
                rout[m + t] = (struct ixl_xfer_desc){rd.addr + t * rstride, rd.len, rd.dev, rd.md};
            }
            m += (size_t)cnt;
            j += cnt;
            ld.addr += cnt * lstride;
            rd.addr += cnt * rstride;
        }
        i += (size_t)pairs;
    }
    x->n = m;
    x->bytes = bytes;
    x->lside = (struct ixl_xfer_side){lp->list->type, m, x->ldesc};
    x->rside = (struct ixl_xfer_side){rp->list->type, m, x->rdesc};
    if (notif) {
        x->notif = sys_malloc(params->notif_len);
        if (x->notif == NULL) {
            rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
            goto free_xfer;
        }
        memcpy(x->notif, params->notif, params->notif_len);
        x->notif_len = params->notif_len;
    }
    /* The request keeps its regions from being deregistered, and the remote's metadata
     * loaded, until it is released. */
    size_t nreg = lp->n_regions + (rp->remote ? 0 : rp->n_regions);
    x->regions = sys_malloc((nreg ? nreg : 1) * sizeof(*x->regions));
    if (x->regions == NULL) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
        goto free_xfer;
    }
    memcpy(x->regions, lp->regions, lp->n_regions * sizeof(*x->regions));
    if (!rp->remote)
        memcpy(x->regions + lp->n_regions, rp->regions, rp->n_regions * sizeof(*x->regions));
    x->n_regions = nreg;
    for (size_t i = 0; i < nreg; i++)
        atomic_fetch_add(&x->regions[i]->users, 1);
    if (rp->remote) {
        x->remote = rp->remote;
        ixl_remote_get(x->remote);
    }

    struct ixl_xfer_opts opts = {sizeof(opts), x->notif, x->notif_len};
    const char *target = rp->remote ? rp->remote->name : agent->name;
    ixl_err_clear(agent->id);
    rc = be->plugin->ops.prep_xfer(be->engine, op, &x->lside, &x->rside, target, &opts, &x->req);
    if (rc != IXL_OK) {
        x->req = NULL;
        if (ixl_err_get(agent->id)[0] == '\0')
            IXL_AGENT_ERR(agent, rc, "backend %s could not prepare the request: %s",
                          be->plugin->info.name, ixl_strerror(rc));
        if (rc == IXL_ERR_BAD_MEM_TYPE)
            *skip |= 1u << b;
        goto free_xfer;
    }
    /* The path is known once prepared; a post may refine it (read again after a completion). */
    read_path(x);
    *out = x;
    return IXL_OK;

free_xfer:
    xfer_free(x);
    return rc;
}

/* xfer_build_one over the backends, in order, until one takes the pair of memory types. When
 * none does, the first refusal is the error. */
static int xfer_build_first(struct ixl_agent *agent, enum ixl_op op, const struct ixl_prep *lp,
                            const int64_t *li, const struct ixl_prep *rp, const int64_t *ri,
                            size_t n, const struct ixl_xfer_params *params, struct ixl_xfer **out)
{
    uint32_t skip = 0;
    int rc = xfer_build_one(agent, op, lp, li, rp, ri, n, params, &skip, out);
    if (rc != IXL_ERR_BAD_MEM_TYPE || skip == 0)
        return rc;
    char *first = sys_strdup(ixl_err_get(agent->id));
    for (;;) {
        uint32_t before = skip;
        ixl_err_clear(agent->id);
        int r = xfer_build_one(agent, op, lp, li, rp, ri, n, params, &skip, out);
        if (r == IXL_OK || (r != IXL_ERR_BAD_MEM_TYPE && r != IXL_ERR_NO_BACKEND)) {
            rc = r;
            break;
        }
        if (r == IXL_ERR_NO_BACKEND || skip == before) {
            IXL_AGENT_QUIET(agent, rc, "%s", first ? first : "no backend takes these memory types");
            break;
        }
    }
    free(first);
    return rc;
}

/* Releases a request built here that was never posted nor handed out. */
static void xfer_drop(struct ixl_xfer *x)
{
    if (x->req != NULL && x->backend->plugin->ops.release_req(x->backend->engine, x->req) != IXL_OK)
        x->backend->plugin->ops.release_req(x->backend->engine, x->req);
    xfer_free(x);
}

/*
 * Chooses the backend of a request: with no backend named, when two or more backends hold both
 * lists (and can notify, when asked) and give cost estimates, each of them prepares the request
 * and estimates it, and the shortest estimate wins; equal estimates go to the backend created
 * first, and a backend whose estimate fails ranks after every one that gave one. The choice
 * follows only capabilities and estimates, never names or sizes. Otherwise (a backend list
 * given, or fewer than two estimating candidates), the first backend in order that takes the
 * memory types, as xfer_build_first.
 */
static int xfer_build(struct ixl_agent *agent, enum ixl_op op, const struct ixl_prep *lp,
                      const int64_t *li, const struct ixl_prep *rp, const int64_t *ri, size_t n,
                      const struct ixl_xfer_params *params, struct ixl_xfer **out)
{
    int named = params && (params->field_mask & IXL_XFER_F_BACKENDS) && params->n_backends;
    int notif = params && (params->field_mask & IXL_XFER_F_NOTIF) && params->notif_len > 0;
    uint32_t both = lp->valid_mask & rp->valid_mask, cand = 0;
    unsigned n_cand = 0;
    for (unsigned b = 0; !named && b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || !(both & (1u << be->slot)) || !be->plugin->has[IXL_OPT_ESTIMATE] ||
            (notif && !(be->caps & IXL_CAP_NOTIF)))
            continue;
        cand |= 1u << be->slot;
        n_cand++;
    }
    if (n_cand < 2)
        return xfer_build_first(agent, op, lp, li, rp, ri, n, params, out);
    struct ixl_xfer *best = NULL, *unknown = NULL;
    uint64_t best_us = 0;
    for (unsigned b = 0; b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || !(cand & (1u << be->slot)))
            continue;
        uint32_t skip = ~(1u << be->slot);
        struct ixl_xfer *x = NULL;
        if (xfer_build_one(agent, op, lp, li, rp, ri, n, params, &skip, &x) != IXL_OK)
            continue;
        struct ixl_cost cost = {.size = sizeof(cost)};
        int rc = be->plugin->ops.estimate_xfer_cost(be->engine, x->req, &cost);
        if (rc == IXL_OK && (best == NULL || cost.duration_us < best_us)) {
            if (best)
                xfer_drop(best);
            best = x;
            best_us = cost.duration_us;
        } else if (rc != IXL_OK && unknown == NULL) {
            unknown = x;
        } else {
            xfer_drop(x);
        }
    }
    if (best && unknown)
        xfer_drop(unknown);
    if (best == NULL)
        best = unknown;
    if (best == NULL) /* none of them took it: the first-in-order rule says why */
        return xfer_build_first(agent, op, lp, li, rp, ri, n, params, out);
    ixl_err_clear(agent->id);
    *out = best;
    return IXL_OK;
}

static int check_op(struct ixl_agent *agent, enum ixl_op op, const struct ixl_xfer_params *p)
{
    if (p && (p->field_mask & IXL_XFER_F_BACKENDS) && p->n_backends > 0 && p->backends == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "backends given as a NULL array");
    if (op != IXL_OP_READ && op != IXL_OP_WRITE)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "operation %d is neither READ nor WRITE",
                             (int)op);
    return IXL_OK;
}

ixl_status ixl_xfer_create(struct ixl_agent *agent, enum ixl_op op, const struct ixl_dlist *local,
                           const struct ixl_dlist *remote, const char *remote_agent,
                           const struct ixl_xfer_params *params, struct ixl_xfer **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (local == NULL || remote == NULL || remote_agent == NULL || out == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_xfer_create: NULL list, remote agent name or out");
    int rc = check_op(agent, op, params);
    if (rc != IXL_OK)
        return rc;
    uint64_t n = ixl_dlist_count(local);
    if (n != ixl_dlist_count(remote))
        return IXL_AGENT_ERR(agent, IXL_ERR_MISMATCH,
                             "the local list has %llu descriptors, the remote list %llu",
                             (unsigned long long)n, (unsigned long long)ixl_dlist_count(remote));
    if (n == 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "empty descriptor lists");
    if (n > IXL_XFER_MAX_DESCS)
        return IXL_AGENT_ERR(agent, IXL_ERR_TOO_LARGE,
                             "a request of %llu descriptors is over the limit of %llu (use a "
                             "prepared list and index arrays, or larger descriptors)",
                             (unsigned long long)n, (unsigned long long)IXL_XFER_MAX_DESCS);
    int use = params && (params->field_mask & IXL_XFER_F_BACKENDS) && params->n_backends;
    struct ixl_backend *const *only = use ? params->backends : NULL;
    size_t n_only = use ? params->n_backends : 0;

    pthread_rwlock_rdlock(&agent->lock);
    struct ixl_prep *lp = NULL, *rp = NULL;
    struct ixl_xfer *x = NULL;
    rc = prep_build(agent, NULL, local, only, n_only, &lp, "local");
    if (rc == IXL_OK)
        rc = prep_build(agent, remote_agent, remote, only, n_only, &rp, "remote");
    if (rc == IXL_OK)
        rc = xfer_build(agent, op, lp, NULL, rp, NULL, (size_t)n, params, &x);
    if (rc == IXL_OK) /* before the lock goes: ixl_backend_destroy sees every request */
        ixl_agent_track_xfer(agent, x);
    pthread_rwlock_unlock(&agent->lock);
    /* The temporary lists' references go; the request holds its own. */
    prep_free(lp);
    prep_free(rp);
    if (rc != IXL_OK)
        return rc;
    *out = x;
    return IXL_OK;
}

ixl_status ixl_xfer_create_prepped(struct ixl_agent *agent, enum ixl_op op,
                                   const struct ixl_prep *local, const int64_t *local_idx,
                                   const struct ixl_prep *remote, const int64_t *remote_idx,
                                   size_t n, const struct ixl_xfer_params *params,
                                   struct ixl_xfer **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (local == NULL || remote == NULL || local_idx == NULL || remote_idx == NULL || out == NULL ||
        n == 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_xfer_create_prepped: NULL list, index array or out, or n = 0");
    if (local->agent != agent || remote->agent != agent)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "a prepared list belongs to another agent");
    if (!local->initiator || remote->initiator)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "the local list must be prepared with remote NULL and the remote "
                             "list with a remote agent's name (or this agent's own)");
    int rc = check_op(agent, op, params);
    if (rc != IXL_OK)
        return rc;
    pthread_rwlock_rdlock(&agent->lock);
    struct ixl_xfer *x = NULL;
    rc = xfer_build(agent, op, local, local_idx, remote, remote_idx, n, params, &x);
    if (rc == IXL_OK) /* before the lock goes: ixl_backend_destroy sees every request */
        ixl_agent_track_xfer(agent, x);
    pthread_rwlock_unlock(&agent->lock);
    if (rc != IXL_OK)
        return rc;
    *out = x;
    return IXL_OK;
}

/* ---- post / status / wait / release -------------------------------------------------------- */

/* in_post: the request ended in its post, whose end (in ticks, 0 without telemetry) is now. */
static void finish_at(struct ixl_xfer *x, int rc, int in_post, uint64_t now)
{
    struct ixl_agent *agent = x->agent;
    int alone;
    struct ixl_stat_stripe *st = ixl_agent_stripe(agent, &alone);
    if (rc == IXL_OK) {
        x->state = XFER_DONE;
        x->done_count++;
        if (in_post) {
            /* Nobody waited for it: it says nothing of the wait's spin. */
            x->xfer_ticks = now - x->post_start;
        } else {
            x->xfer_ticks = ixl_ticks() - x->post_start;
            /* For ixl_xfer_wait's spin; stored only when it moved by a quarter or more, so
             * that threads completing alike do not keep writing the shared line. */
            uint64_t ns = ixl_ticks_ns(x->xfer_ticks);
            uint64_t old = atomic_load_explicit(&agent->recent_done_ns, memory_order_relaxed);
            if (ns > old + old / 4 || ns + ns / 4 < old)
                atomic_store_explicit(&agent->recent_done_ns, ns, memory_order_relaxed);
        }
        ixl_stat_add(&st->completed, 1, alone);
        ixl_stat_add(&st->bytes, x->bytes, alone);
        /* The path this post took: asked of the backend when someone wants it (ixl_xfer_info),
         * not at every completion (a call and a string copy each, on the hot path). */
        x->path_stale = 1;
    } else {
        x->state = XFER_ERROR;
        x->status = rc;
        ixl_stat_add(&st->failed, 1, alone);
    }
}

static void finish(struct ixl_xfer *x, int rc)
{
    finish_at(x, rc, 0, 0);
}

/* A backend's answer for a request in flight (check_xfer or wait_xfer). */
static int answered(struct ixl_xfer *x, int rc)
{
    if (rc == IXL_IN_PROGRESS)
        return rc;
    if (rc != IXL_OK && ixl_err_get(x->agent->id)[0] == '\0')
        IXL_AGENT_ERR(x->agent, rc, "request on backend %s failed: %s",
                      x->backend->plugin->info.name, ixl_strerror(rc));
    finish(x, rc);
    return rc;
}

static int status_locked(struct ixl_xfer *x)
{
    switch (x->state) {
    case XFER_IDLE:
        return IXL_ERR_NOT_POSTED;
    case XFER_DONE:
        return IXL_OK;
    case XFER_ERROR:
        return x->status;
    case XFER_INFLIGHT:
        break;
    }
    return answered(x, x->backend->plugin->ops.check_xfer(x->backend->engine, x->req));
}

/* status_locked, watching the request's end on this thread for up to budget_ns where the
 * backend can (wait_xfer). */
static int watch_locked(struct ixl_xfer *x, uint64_t budget_ns)
{
    if (x->state != XFER_INFLIGHT)
        return status_locked(x);
    const struct ixl_plugin *p = x->backend->plugin;
    int rc = p->ops.wait_xfer(x->backend->engine, x->req, budget_ns);
    if (rc == IXL_ERR_NOT_SUPPORTED)
        rc = p->ops.check_xfer(x->backend->engine, x->req);
    return answered(x, rc);
}

static int post_locked(struct ixl_xfer *x)
{
    struct ixl_agent *agent = x->agent;
    if (x->canceling)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOT_ALLOWED,
                             "the request is being canceled: release it again");
    if (x->state == XFER_INFLIGHT && status_locked(x) == IXL_IN_PROGRESS)
        return IXL_AGENT_ERR(agent, IXL_ERR_REPOST_ACTIVE,
                             "the request is still in flight: wait for it before posting "
                             "it again");
    if (x->remote && !atomic_load(&x->remote->valid))
        return IXL_AGENT_ERR(agent, IXL_ERR_STALE,
                             "remote agent '%s' was invalidated or reloaded after this request "
                             "was made: make a new request",
                             x->remote->name);
    const struct ixl_plugin *p = x->backend->plugin;
    struct ixl_xfer_opts opts = {sizeof(opts), x->notif, x->notif_len};
    /* Without telemetry a request done in post reads no clock, and one in flight reads it
     * once here and once at its end (for the wait's spin, which counts from post's return). */
    int timed = agent->params.telemetry;
    uint64_t t0 = timed ? ixl_ticks() : 0;
    x->post_count++;
    int alone;
    struct ixl_stat_stripe *st = ixl_agent_stripe(agent, &alone);
    ixl_stat_add(&st->posted, 1, alone);
    x->state = XFER_INFLIGHT;
    int rc = p->ops.post_xfer(x->backend->engine, x->req, &opts);
    if (rc == IXL_IN_PROGRESS) {
        uint64_t t1 = ixl_ticks();
        x->post_start = timed ? t0 : t1;
        x->post_ticks = t1 - x->post_start;
        return rc;
    }
    uint64_t t1 = timed ? ixl_ticks() : 0;
    x->post_start = t0;
    x->post_ticks = t1 - t0;
    if (rc != IXL_OK && ixl_err_get(agent->id)[0] == '\0')
        IXL_AGENT_ERR(agent, rc, "backend %s failed to post the request: %s", p->info.name,
                      ixl_strerror(rc));
    finish_at(x, rc, 1, t1); /* done in post: its end is post's return */
    return rc;
}

ixl_status ixl_xfer_post(struct ixl_xfer *x)
{
    if (x == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(x->agent->id);
    pthread_mutex_lock(&x->lock);
    int rc = post_locked(x);
    pthread_mutex_unlock(&x->lock);
    return rc;
}

/* A caller polling ixl_xfer_status in a loop, on the CPU where the backend's own threads must
 * run (NET's event loops and copy threads, io_uring's workers: a backend without progress(),
 * whose work no status call does), keeps them off it until the scheduler takes the CPU from the
 * caller: a slice, about 4 ms on the 2-core VM (a 4 KiB TCP READ polled with the initiator on
 * one CPU, a process pinned or a container of one CPU, took 3.9 ms instead of tens of
 * microseconds; NET now yields there itself, where it knows its loop has bytes to read). As a
 * bound for the cases no backend sees, a status call that finds such a request still in flight
 * this long after its post yields the CPU (sched_yield: a syscall, and nothing more when no
 * other thread waits for that CPU). Shorter requests, the ones a polling caller polls for, are
 * not slowed (at 20 us a polled 256 KiB TCP WRITE took 57 us against 49 in an ad hoc run: its
 * loop thread, given the CPU, took the answer the caller would have). */
#define IXL_POLL_YIELD_NS 200000u

ixl_status ixl_xfer_status(struct ixl_xfer *x)
{
    if (x == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_mutex_lock(&x->lock);
    int rc = status_locked(x);
    uint64_t start = x->post_start;
    pthread_mutex_unlock(&x->lock);
    if (rc == IXL_IN_PROGRESS && !(x->backend->caps & IXL_CAP_PROGRESS) &&
        ixl_ticks_ns(ixl_ticks() - start) > IXL_POLL_YIELD_NS)
        sched_yield();
    return rc;
}

/* ixl_xfer_wait spins on the agent's wake sequence before it sleeps, for twice the post ->
 * done time of a recent request of the agent, when that is at most this: a completion that
 * comes that soon costs no sleep and no wake-up. Longer requests (and a second waiter while
 * one spins) sleep at once, leaving the cores to the threads that complete them. */
#define IXL_WAIT_SPIN_MAX_NS 50000u

/* The longest ixl_xfer_wait lets a backend watch a request's end on the caller's thread
 * (wait_xfer) before the usual spin and sleep: one sleep's slice of the wait. The watch saves
 * the hand-offs between the thread that sees the end and the one that waits for it. A watch
 * that sleeps (NET on the socket its frame went out on, POSIX in its io_uring) is woken by the
 * end itself, and needs a timer only for the budget: one due within about a millisecond is the
 * CPU's next, reprogrammed when armed and again when canceled, which on the 2-core VM made a
 * ping-pong over a socket 7 us slower per round trip with poll(2) for 1 ms than with 5 ms or
 * more (bench/bench_timer, one CPU: 15.67 us with 1 ms, 8.50 with 5 ms, 7.77 without a
 * timeout). (It was 1 ms: a NET 4 KiB TCP WRITE waited for unpinned went from 43.2 to 31.3 us,
 * bench/net_lat_ab.sh.) A watch that spins (a device's copy event, UCX's progress) keeps to its own
 * limit of about a millisecond (its work runs on no CPU of ixl's, so the spin takes a core from
 * nothing that moves its data). */
#define IXL_WAIT_WATCH_MAX_NS 20000000u

ixl_status ixl_xfer_wait(struct ixl_xfer *x, int timeout_ms)
{
    if (x == NULL)
        return IXL_ERR_INVALID_ARG;
    struct ixl_agent *agent = x->agent;
    /* From the first look that finds the request in flight: one done already (a same-node copy
     * ends inside its post) returns without reading the clock. */
    uint64_t deadline = 0;
    /* Backends that need progress() and have no thread driving it are polled every
     * millisecond; the others wake us through the host's signal(), with a coarse timer as a
     * safety net. */
    int slice = (x->backend->caps & IXL_CAP_PROGRESS) && !agent->params.progress_thread ? 1 : 20;
    uint64_t recent = atomic_load_explicit(&agent->recent_done_ns, memory_order_relaxed);
    uint64_t spin = recent <= IXL_WAIT_SPIN_MAX_NS ? 2 * recent : 0;
    if (spin > IXL_WAIT_SPIN_MAX_NS)
        spin = IXL_WAIT_SPIN_MAX_NS;
    int watched = !x->backend->plugin->has[IXL_OPT_WAIT_XFER];
    for (;;) {
        /* The sequence first: a completion after this read moves it. */
        uint32_t seq = ixl_agent_wake_seq(agent);
        pthread_mutex_lock(&x->lock); /* ixl_xfer_status without its yield: this one sleeps */
        int rc = status_locked(x);
        pthread_mutex_unlock(&x->lock);
        if (rc != IXL_IN_PROGRESS)
            return rc;
        if (x->backend->caps & IXL_CAP_PROGRESS)
            x->backend->plugin->ops.progress(x->backend->engine);
        int wait = slice;
        uint64_t now = 0;
        if (timeout_ms >= 0) {
            now = ixl_now_ns();
            if (deadline == 0)
                deadline = now + (uint64_t)timeout_ms * 1000000u;
            if (now >= deadline)
                return IXL_AGENT_QUIET(agent, IXL_ERR_TIMEOUT,
                                       "the request did not finish within %d ms", timeout_ms);
            uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
            if (left_ms < (uint64_t)wait)
                wait = (int)left_ms;
            if (deadline - now < spin)
                spin = deadline - now;
        }
        /* The backend watches first, once per wait, when it can. */
        if (!watched) {
            watched = 1;
            uint64_t budget = IXL_WAIT_WATCH_MAX_NS;
            if (timeout_ms >= 0) /* now: read above, in this pass */
                budget = deadline - now < budget ? deadline - now : budget;
            pthread_mutex_lock(&x->lock);
            rc = watch_locked(x, budget);
            pthread_mutex_unlock(&x->lock);
            if (rc != IXL_IN_PROGRESS)
                return rc;
            /* On to the spin and sleep with seq as read before the status: an end during the
             * watch moved it. */
        }
        /* Spin once per wait, before the first sleep: a wake for another request (or a
         * notification) moves the sequence too, and then the status is checked again. */
        if (spin > 0) {
            uint64_t t0 = ixl_now_ns();
            int moved = ixl_agent_spin_wake(
                agent, seq, spin, (x->backend->caps & IXL_CAP_PROGRESS) ? x->backend : NULL);
            uint64_t used = ixl_now_ns() - t0;
            spin = moved && used < spin ? spin - used : 0;
            if (moved)
                continue;
        }
        ixl_agent_wait_wake(agent, seq, wait);
    }
}

ixl_status ixl_xfer_release(struct ixl_xfer *x)
{
    if (x == NULL)
        return IXL_OK;
    struct ixl_agent *agent = x->agent;
    ixl_err_clear(agent->id);
    if (x->req != NULL) {
        pthread_mutex_lock(&x->lock);
        int rc = x->backend->plugin->ops.release_req(x->backend->engine, x->req);
        pthread_mutex_unlock(&x->lock);
        if (rc != IXL_OK) {
            pthread_mutex_lock(&x->lock);
            x->canceling = 1;
            if (x->state == XFER_INFLIGHT) {
                x->state = XFER_ERROR;
                x->status = IXL_ERR_CANCELED;
            }
            pthread_mutex_unlock(&x->lock);
            if (ixl_err_get(agent->id)[0] == '\0')
                IXL_AGENT_QUIET(agent, rc,
                                "backend %s could not stop the request yet: release it again",
                                x->backend->plugin->info.name);
            return rc;
        }
    }
    ixl_agent_untrack_xfer(agent, x);
    xfer_free(x);
    return IXL_OK;
}

void ixl_xfer_abandon(struct ixl_xfer *x)
{
    ixl_agent_untrack_xfer(x->agent, x);
    xfer_free(x);
}

ixl_status ixl_xfer_set_notif(struct ixl_xfer *x, const void *msg, size_t len)
{
    if (x == NULL)
        return IXL_ERR_INVALID_ARG;
    struct ixl_agent *agent = x->agent;
    ixl_err_clear(agent->id);
    if (len > 0 && msg == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "len > 0 with a NULL message");
    if (len > agent->params.notif_max)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOTIF_TOO_LARGE,
                             "notification of %zu bytes exceeds the maximum of %zu", len,
                             agent->params.notif_max);
    if (len > 0 && !(x->backend->caps & IXL_CAP_NOTIF))
        return IXL_AGENT_ERR(agent, IXL_ERR_NOTIF_UNSUPPORTED,
                             "backend %s does not support notifications",
                             x->backend->plugin->info.name);
    void *copy = NULL;
    if (len > 0) {
        copy = sys_malloc(len);
        if (copy == NULL)
            return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
        memcpy(copy, msg, len);
    }
    pthread_mutex_lock(&x->lock);
    int rc = IXL_OK;
    /* The backend borrows the message until the request is posted again or released. */
    if (x->canceling)
        rc = IXL_ERR_NOT_ALLOWED;
    else if (x->state == XFER_INFLIGHT && status_locked(x) == IXL_IN_PROGRESS)
        rc = IXL_ERR_REPOST_ACTIVE;
    if (rc == IXL_OK) {
        free(x->notif);
        x->notif = copy;
        x->notif_len = len;
        copy = NULL;
    }
    pthread_mutex_unlock(&x->lock);
    free(copy);
    if (rc == IXL_ERR_NOT_ALLOWED)
        return IXL_AGENT_ERR(agent, rc, "the request is being canceled: release it again");
    if (rc == IXL_ERR_REPOST_ACTIVE)
        return IXL_AGENT_ERR(agent, rc, "the notification of a request in flight cannot change");
    return IXL_OK;
}

/* First generations of the output structs (the growth rule in ixl.h). */
#define IXL_XFER_TELEMETRY_V1 IXL_SIZE_THROUGH(struct ixl_xfer_telemetry, post_count)
#define IXL_XFER_INFO_V1 IXL_SIZE_THROUGH(struct ixl_xfer_info, bytes)
#define IXL_COST_V1 IXL_SIZE_THROUGH(struct ixl_cost, method)

ixl_status ixl_xfer_telemetry(struct ixl_xfer *x, struct ixl_xfer_telemetry *out)
{
    if (x == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_XFER_TELEMETRY_V1) != IXL_OK)
        return IXL_AGENT_ERR(x->agent, IXL_ERR_INVALID_ARG,
                             "ixl_xfer_telemetry: out->size must be sizeof(struct "
                             "ixl_xfer_telemetry)");
    if (!x->agent->params.telemetry)
        return IXL_AGENT_QUIET(x->agent, IXL_ERR_NO_TELEMETRY, "telemetry is off for agent '%s'",
                               x->agent->name);
    pthread_mutex_lock(&x->lock);
    int rc = IXL_OK;
    struct ixl_xfer_telemetry t = {
        .size = sizeof(t),
        .post_us = ixl_ticks_ns(x->post_ticks) / 1000u,
        .xfer_us = ixl_ticks_ns(x->xfer_ticks) / 1000u,
        .bytes = x->bytes,
        .desc_count = x->n,
        .post_count = x->post_count,
    };
    if (x->done_count == 0)
        rc = IXL_AGENT_QUIET(x->agent, IXL_ERR_NOT_POSTED, "the request has not completed yet");
    pthread_mutex_unlock(&x->lock);
    if (rc != IXL_OK)
        return rc;
    return ixl_out_write(out, &t, sizeof(t), IXL_XFER_TELEMETRY_V1,
                         _Alignof(struct ixl_xfer_telemetry));
}

ixl_status ixl_xfer_info(struct ixl_xfer *x, struct ixl_xfer_info *out)
{
    if (x == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_XFER_INFO_V1) != IXL_OK)
        return IXL_AGENT_ERR(x->agent, IXL_ERR_INVALID_ARG,
                             "ixl_xfer_info: out->size must be sizeof(struct ixl_xfer_info)");
    pthread_mutex_lock(&x->lock);
    if (x->path_stale && x->state != XFER_INFLIGHT)
        read_path(x);
    struct ixl_xfer_info info = {
        .size = sizeof(info),
        .backend = x->backend->plugin->info.name,
        .path = x->path,
        .desc_count = x->n,
        .bytes = x->bytes,
    };
    pthread_mutex_unlock(&x->lock);
    return ixl_out_write(out, &info, sizeof(info), IXL_XFER_INFO_V1,
                         _Alignof(struct ixl_xfer_info));
}

ixl_status ixl_xfer_estimate(struct ixl_xfer *x, struct ixl_cost *out)
{
    if (x == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(x->agent->id);
    if (ixl_out_check(out, IXL_COST_V1) != IXL_OK)
        return IXL_AGENT_ERR(x->agent, IXL_ERR_INVALID_ARG,
                             "ixl_xfer_estimate: out->size must be sizeof(struct ixl_cost)");
    const struct ixl_plugin *p = x->backend->plugin;
    if (!p->has[IXL_OPT_ESTIMATE])
        return IXL_AGENT_QUIET(x->agent, IXL_ERR_NOT_SUPPORTED,
                               "backend %s gives no cost estimates", p->info.name);
    /* The plugin writes within the core's size (at least the first generation's), the caller
     * gets what lies within its own. */
    struct ixl_cost cost = {.size = sizeof(cost)};
    /* Under the request's lock: a backend never sees two calls on one request at once. */
    pthread_mutex_lock(&x->lock);
    int rc = p->ops.estimate_xfer_cost(x->backend->engine, x->req, &cost);
    pthread_mutex_unlock(&x->lock);
    if (rc != IXL_OK)
        return rc;
    if (cost.size < IXL_COST_V1 || cost.size > sizeof(cost))
        return IXL_AGENT_ERR(x->agent, IXL_ERR_PLUGIN,
                             "backend %s returned a cost estimate of size %u (expected %zu..%zu)",
                             p->info.name, (unsigned)cost.size, (size_t)IXL_COST_V1, sizeof(cost));
    cost.size = sizeof(cost);
    return ixl_out_write(out, &cost, sizeof(cost), IXL_COST_V1, _Alignof(struct ixl_cost));
}

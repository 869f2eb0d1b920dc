/* The region index against a brute-force search: nested, overlapping and disjoint regions on
 * several devices, inserted in batches and one at a time, with removals; then random adds and
 * removals over several backends' indexes (equal keys, adjacent, nested and overlapping ranges)
 * against a reference model, checking the trees' shape, which region a lookup returns, exact
 * lookups and walks; then ixl_mem_register / ixl_mem_deregister with the TEST and TESTB plugins
 * against a model of what is registered, failures (duplicates, unknown regions, regions in use)
 * included. */
#include <stdlib.h>

#include "check.h"
#include "core/internal.h"
#include "core/registry.h"
#include "util/log.h"

#define MAXR 3000

static struct region *regs[MAXR];
static int live[MAXR];
static int n_regs;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int brute(uint64_t dev, uint64_t addr, uint64_t len)
{
    for (int i = 0; i < n_regs; i++)
        if (live[i] && regs[i]->dev == dev && regs[i]->addr <= addr &&
            regs[i]->addr + regs[i]->len >= addr + len)
            return 1;
    return 0;
}

static void add(struct ixl_registry *r, uint64_t *seed)
{
    struct region *g = calloc(1, sizeof(*g));
    CHECK(g != NULL);
    g->type = IXL_MEM_DRAM;
    g->dev = rnd(seed) % 3;
    g->addr = rnd(seed) % 100000;
    g->len = 1 + rnd(seed) % ((rnd(seed) % 4 == 0) ? 50000 : 500);
    g->reg_len = g->len;
    g->backend_mask = 1;
    regs[n_regs] = g;
    live[n_regs] = 1;
    n_regs++;
    CHECK_RC(ixl_registry_add(r, g), IXL_OK);
    CHECK_RC(ixl_registry_add_backend(r, g, 0), IXL_OK);
}

static void query_all(struct ixl_registry *r, uint64_t *seed, int count)
{
    for (int q = 0; q < count; q++) {
        uint64_t dev = rnd(seed) % 3, addr = rnd(seed) % 110000, len = 1 + rnd(seed) % 3000;
        struct region *g = ixl_registry_cover(r, IXL_MEM_DRAM, 0, dev, addr, len);
        int want = brute(dev, addr, len);
        if (want != (g != NULL))
            check_fail(__FILE__, __LINE__, "cover(dev %llu, 0x%llx, %llu): index %s, brute %s",
                       (unsigned long long)dev, (unsigned long long)addr, (unsigned long long)len,
                       g ? "found" : "none", want ? "found" : "none");
        if (g) {
            CHECK(g->dev == dev && g->addr <= addr && g->addr + g->len >= addr + len);
            CHECK(ixl_registry_cover(r, IXL_MEM_DRAM, 1, dev, addr, len) == NULL);
            CHECK(ixl_registry_cover(r, IXL_MEM_VRAM, 0, dev, addr, len) == NULL);
        }
    }
}

/* ---- the index against a model ------------------------------------------------------------ */

#define MB 3   /* backends */
#define MM 600 /* regions of the model */

struct mregion {
    struct region *g; /* NULL: slot free */
    int in_all;
    uint32_t mask; /* backend indexes holding it */
};

static struct mregion model[MM];

/* The order of the index: (dev, addr, len), then the struct's address. */
static int before(const struct region *a, const struct region *b)
{
    if (a->dev != b->dev)
        return a->dev < b->dev;
    if (a->addr != b->addr)
        return a->addr < b->addr;
    if (a->len != b->len)
        return a->len < b->len;
    return (uintptr_t)a < (uintptr_t)b;
}

/* What ixl_registry_cover must return: among backend b's regions of dev with addr <= a, the one
 * reaching furthest (the first in order on ties), if it covers [a, a + len). */
static struct region *model_cover(unsigned b, uint64_t dev, uint64_t a, uint64_t len)
{
    struct region *best = NULL;
    for (int i = 0; i < MM; i++) {
        struct region *g = model[i].g;
        if (g == NULL || !(model[i].mask & (1u << b)) || g->dev != dev || g->addr > a)
            continue;
        uint64_t end = g->addr + g->len, bend = best ? best->addr + best->len : 0;
        if (best == NULL || end > bend || (end == bend && before(g, best)))
            best = g;
    }
    if (best && best->addr + best->len >= a + len)
        return best;
    return NULL;
}

static struct region *model_exact(uint64_t dev, uint64_t addr, uint64_t len)
{
    struct region *first = NULL;
    for (int i = 0; i < MM; i++) {
        struct region *g = model[i].g;
        if (g && model[i].in_all && g->dev == dev && g->addr == addr && g->len == len &&
            (first == NULL || before(g, first)))
            first = g;
    }
    return first;
}

static size_t model_count(void)
{
    size_t n = 0;
    for (int i = 0; i < MM; i++)
        n += model[i].g && model[i].in_all;
    return n;
}

static void model_verify(struct ixl_registry *r, uint64_t *seed, int queries)
{
    CHECK(ixl_registry_check(r) == 0);
    for (int q = 0; q < queries; q++) {
        unsigned b = (unsigned)(rnd(seed) % MB);
        uint64_t dev = rnd(seed) % 3, addr = rnd(seed) % 2200, len = 1 + rnd(seed) % 200;
        struct region *want = model_cover(b, dev, addr, len);
        struct region *got = ixl_registry_cover(r, IXL_MEM_DRAM, b, dev, addr, len);
        if (want != got)
            check_fail(__FILE__, __LINE__, "cover(b %u, dev %llu, %llu, %llu): index %p, model %p",
                       b, (unsigned long long)dev, (unsigned long long)addr,
                       (unsigned long long)len, (void *)got, (void *)want);
        /* Exact lookups, of keys that exist and of keys that mostly do not. */
        int i = (int)(rnd(seed) % MM);
        if (model[i].g) {
            struct region *g = model[i].g;
            CHECK(ixl_registry_exact(r, IXL_MEM_DRAM, g->addr, g->len, g->dev) ==
                  model_exact(g->dev, g->addr, g->len));
        }
        CHECK(ixl_registry_exact(r, IXL_MEM_DRAM, addr, len, dev) == model_exact(dev, addr, len));
    }
    /* Both walks: every region of "all" once, in order. */
    struct ixl_registry_iter it;
    ixl_registry_iter_init(&it, r, IXL_MEM_DRAM);
    size_t n = 0;
    struct region *prev = NULL, *g;
    while ((g = ixl_registry_iter_next(&it)) != NULL) {
        CHECK(prev == NULL || before(prev, g));
        CHECK(ixl_registry_next(r, IXL_MEM_DRAM, prev) == g);
        prev = g;
        n++;
    }
    CHECK(ixl_registry_next(r, IXL_MEM_DRAM, prev) == NULL);
    CHECK(n == model_count() && n == r->all[IXL_MEM_DRAM].n);
    ixl_registry_iter_init(&it, r, IXL_MEM_VRAM);
    CHECK(ixl_registry_iter_next(&it) == NULL);
}

static void model_add(struct ixl_registry *r, uint64_t *seed)
{
    int i = (int)(rnd(seed) % MM);
    if (model[i].g != NULL)
        return;
    struct region *g = calloc(1, sizeof(*g));
    CHECK(g != NULL);
    g->type = IXL_MEM_DRAM;
    int j = (int)(rnd(seed) % MM);
    if (model[j].g && rnd(seed) % 4 == 0) {
        /* The same key as another region, or adjacent to it. */
        *g = (struct region){.type = IXL_MEM_DRAM,
                             .dev = model[j].g->dev,
                             .addr = model[j].g->addr,
                             .len = model[j].g->len};
        if (rnd(seed) % 2)
            g->addr += g->len;
    } else {
        g->dev = rnd(seed) % 3;
        g->addr = rnd(seed) % 2000;
        g->len = 1 + rnd(seed) % ((rnd(seed) % 5 == 0) ? 1000 : 60);
    }
    g->reg_len = g->len;
    model[i] = (struct mregion){g, 1, 0};
    CHECK_RC(ixl_registry_add(r, g), IXL_OK);
    for (unsigned b = 0; b < MB; b++) {
        if (rnd(seed) % 2) {
            CHECK_RC(ixl_registry_add_backend(r, g, b), IXL_OK);
            model[i].mask |= 1u << b;
        }
    }
}

static void model_remove(struct ixl_registry *r, uint64_t *seed)
{
    int i = (int)(rnd(seed) % MM);
    struct mregion *m = &model[i];
    if (m->g == NULL)
        return;
    unsigned b = (unsigned)(rnd(seed) % MB);
    switch (rnd(seed) % 3) {
    case 0: /* one backend's index (a no-op when it is not there) */
        ixl_registry_remove_backend(r, m->g, b);
        m->mask &= ~(1u << b);
        break;
    case 1: /* "all" alone: still in backends' indexes, as between two steps of a caller */
        ixl_registry_remove(r, m->g);
        m->in_all = 0;
        break;
    default:
        break;
    }
    if (m->in_all && rnd(seed) % 2 == 0)
        return;
    for (b = 0; b < MB; b++)
        ixl_registry_remove_backend(r, m->g, b);
    ixl_registry_remove(r, m->g);
    free(m->g);
    *m = (struct mregion){0};
}

/* Batches: a group of new regions into "all" and a backend's index at once, or a group of
 * regions (some not in the index) out of one. Large groups rebuild the tree. */
static void model_batch(struct ixl_registry *r, uint64_t *seed)
{
    struct region *v[MM];
    int slot[MM];
    size_t k = 0;
    int want = 1 + (int)(rnd(seed) % (rnd(seed) % 4 == 0 ? 300 : 20));
    if (rnd(seed) % 2) {
        unsigned b = (unsigned)(rnd(seed) % MB);
        for (int i = 0; i < MM && (int)k < want; i++) {
            if (model[i].g != NULL || rnd(seed) % 2)
                continue;
            struct region *g = calloc(1, sizeof(*g));
            CHECK(g != NULL);
            *g = (struct region){.type = IXL_MEM_DRAM,
                                 .dev = rnd(seed) % 3,
                                 .addr = rnd(seed) % 2000,
                                 .len = 1 + rnd(seed) % 80};
            g->reg_len = g->len;
            model[i] = (struct mregion){g, 1, 1u << b};
            slot[k] = i;
            v[k++] = g;
        }
        CHECK_RC(ixl_registry_add_many(r, IXL_MEM_DRAM, -1, v, k), IXL_OK);
        CHECK_RC(ixl_registry_add_many(r, IXL_MEM_DRAM, (int)b, v, k), IXL_OK);
        return;
    }
    /* Out of backend b's index (regions it lacks are skipped), or out of everything. */
    int b = (int)(rnd(seed) % (MB + 1)) - 1;
    for (int i = 0; i < MM && (int)k < want; i++) {
        if (model[i].g == NULL || rnd(seed) % 3 == 0)
            continue;
        slot[k] = i;
        v[k++] = model[i].g;
    }
    if (b >= 0) {
        ixl_registry_remove_many(r, IXL_MEM_DRAM, b, v, k);
        for (size_t j = 0; j < k; j++)
            model[slot[j]].mask &= ~(1u << b);
        return;
    }
    for (unsigned bb = 0; bb < MB; bb++)
        ixl_registry_remove_many(r, IXL_MEM_DRAM, (int)bb, v, k);
    ixl_registry_remove_many(r, IXL_MEM_DRAM, -1, v, k);
    for (size_t j = 0; j < k; j++) {
        free(model[slot[j]].g);
        model[slot[j]] = (struct mregion){0};
    }
}

static void test_model(void)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    struct ixl_registry *r = ixl_registry_create();
    CHECK(r != NULL);
    for (int step = 0; step < 12000; step++) {
        /* Phases that grow and shrink the index. */
        int grow = (step / 1500) % 2 == 0;
        if (rnd(&seed) % 50 == 0)
            model_batch(r, &seed);
        else if (rnd(&seed) % 10 < (grow ? 7u : 3u))
            model_add(r, &seed);
        else
            model_remove(r, &seed);
        if (step % 40 == 0)
            model_verify(r, &seed, 40);
    }
    model_verify(r, &seed, 2000);
    /* A walk that removes as it goes (every other region), as ixl_mem_drop_backend does. */
    int k = 0;
    struct region *next;
    for (struct region *g = ixl_registry_next(r, IXL_MEM_DRAM, NULL); g != NULL; g = next) {
        next = ixl_registry_next(r, IXL_MEM_DRAM, g);
        if (k++ % 2)
            continue;
        for (int i = 0; i < MM; i++) {
            if (model[i].g == g) {
                for (unsigned b = 0; b < MB; b++)
                    ixl_registry_remove_backend(r, g, b);
                ixl_registry_remove(r, g);
                free(g);
                model[i] = (struct mregion){0};
                break;
            }
        }
    }
    model_verify(r, &seed, 2000);
    /* Regions out of "all" are freed by the model, the rest by the registry. */
    for (int i = 0; i < MM; i++) {
        if (model[i].g && !model[i].in_all) {
            for (unsigned b = 0; b < MB; b++)
                ixl_registry_remove_backend(r, model[i].g, b);
            free(model[i].g);
        }
    }
    ixl_registry_free(r);
}

/* ---- registration through the API against a model ---------------------------------------- */

#define AREA 65536
#define AM 64 /* regions of the model */

static unsigned char area[AREA] __attribute__((aligned(64)));

struct areg {
    uint64_t off, len;
    uint32_t mask; /* 1: TEST, 2: TESTB */
};

static struct areg areg[AM];
static int n_areg;

static int areg_find(uint64_t off, uint64_t len)
{
    for (int i = 0; i < n_areg; i++)
        if (areg[i].off == off && areg[i].len == len)
            return i;
    return -1;
}

static void random_range(uint64_t *seed, uint64_t *off, uint64_t *len)
{
    /* 64-byte steps in a small area: nested, overlapping and adjacent ranges are common. */
    *off = (rnd(seed) % (AREA / 64 - 16)) * 64;
    *len = 64 * (1 + rnd(seed) % 16);
}

/* Whether [off, off + len) lies in one region held by a backend of mask. */
static int area_covered(uint64_t off, uint64_t len, uint32_t mask)
{
    for (int i = 0; i < n_areg; i++)
        if ((areg[i].mask & mask) && areg[i].off <= off && areg[i].off + areg[i].len >= off + len)
            return 1;
    return 0;
}

static void api_verify(struct ixl_agent *a, struct ixl_backend *const *be, uint64_t *seed)
{
    for (int q = 0; q < 30; q++) {
        uint64_t off = (rnd(seed) % (AREA / 32 - 8)) * 32, len = 32 * (1 + rnd(seed) % 8);
        unsigned k = (unsigned)(rnd(seed) % 3); /* 0: either backend, 1: TEST, 2: TESTB */
        struct ixl_desc d = {(uintptr_t)area + off, len, 0};
        struct ixl_dlist *l = NULL;
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
        CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
        struct ixl_prep_params pp = {IXL_PREP_F_BACKENDS, &be[k ? k - 1 : 0], 1};
        struct ixl_prep *p = NULL;
        int rc = ixl_prep_create(a, NULL, l, k ? &pp : NULL, &p);
        int want = area_covered(off, len, k ? k : 3u);
        if ((rc == IXL_OK) != want)
            check_fail(__FILE__, __LINE__, "prep of +%llu len %llu (backends %u): %s, model %d",
                       (unsigned long long)off, (unsigned long long)len, k, ixl_strerror(rc), want);
        CHECK(rc == IXL_OK || rc == IXL_ERR_NOT_REGISTERED);
        ixl_prep_destroy(p);
        ixl_dlist_destroy(l);
    }
}

static void test_api(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        return; /* run through ctest for this part */
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST,TESTB"};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("reg", &ap, &a), IXL_OK);
    struct ixl_backend *be[2];
    CHECK_RC(ixl_backend_find(a, "TEST", &be[0]), IXL_OK);
    CHECK_RC(ixl_backend_find(a, "TESTB", &be[1]), IXL_OK);
    uint64_t seed = 0x1234567887654321ull;
    int ok_calls = 0, failed_calls = 0;
    for (int step = 0; step < 400; step++) {
        struct ixl_reg_desc d[8];
        int n = 1 + (int)(rnd(&seed) % 8);
        unsigned op = (unsigned)(rnd(&seed) % 10);
        if (op < 5) {
            /* Register: fresh ranges, sometimes a duplicate inside the call or one already
             * registered (the call fails and changes nothing). */
            uint32_t mask = rnd(&seed) % 3 == 0 ? 1u + (uint32_t)(rnd(&seed) % 2) : 3u;
            int fail = 0;
            for (int i = 0; i < n; i++) {
                uint64_t off, len;
                random_range(&seed, &off, &len);
                if (i > 0 && rnd(&seed) % 12 == 0) {
                    d[i] = d[i - 1];
                    fail = 1;
                    continue;
                }
                int j = areg_find(off, len);
                if (j >= 0 && (areg[j].mask & mask))
                    fail = 1;
                d[i] = (struct ixl_reg_desc){(uintptr_t)area + off, len, 0, NULL, 0};
            }
            for (int i = 0; i < n && !fail; i++) /* one region with the other backend: gains */
                for (int k = 0; k < i; k++)      /* it, unless the call names it twice */
                    if (d[k].addr == d[i].addr && d[k].len == d[i].len)
                        fail = 1;
            if (!fail && n_areg + n > AM)
                continue;
            struct ixl_reg_params rp = {IXL_REG_F_BACKENDS, &be[mask - 1], 1, NULL};
            int rc = ixl_mem_register(a, IXL_MEM_DRAM, d, (size_t)n, mask == 3 ? NULL : &rp);
            CHECK_RC(rc, fail ? IXL_ERR_EXISTS : IXL_OK);
            ok_calls += rc == IXL_OK;
            failed_calls += rc != IXL_OK;
            for (int i = 0; i < n && !fail; i++) {
                uint64_t off = d[i].addr - (uintptr_t)area;
                int j = areg_find(off, d[i].len);
                if (j < 0) {
                    j = n_areg++;
                    areg[j] = (struct areg){off, d[i].len, 0};
                }
                areg[j].mask |= mask;
            }
        } else if (op < 9 && n_areg > 0) {
            /* Deregister registered regions, sometimes with one that is not registered or
             * named twice (nothing changes). */
            int idx[8], fail_nf = 0, fail_dup = 0;
            for (int i = 0; i < n; i++) {
                idx[i] = (int)(rnd(&seed) % (uint64_t)n_areg);
                for (int k = 0; k < i; k++)
                    if (idx[k] == idx[i])
                        fail_dup = 1;
                d[i] = (struct ixl_reg_desc){(uintptr_t)area + areg[idx[i]].off, areg[idx[i]].len,
                                             0, NULL, 0};
            }
            if (rnd(&seed) % 8 == 0) {
                uint64_t off, len;
                random_range(&seed, &off, &len);
                if (areg_find(off, len) < 0) {
                    d[n - 1] = (struct ixl_reg_desc){(uintptr_t)area + off, len, 0, NULL, 0};
                    fail_nf = 1;
                    fail_dup = 0;
                    for (int i = 0; i < n - 1; i++)
                        for (int k = 0; k < i; k++)
                            if (idx[k] == idx[i])
                                fail_dup = 1;
                }
            }
            int rc = ixl_mem_deregister(a, IXL_MEM_DRAM, d, (size_t)n, NULL);
            CHECK_RC(rc, fail_nf ? IXL_ERR_NOT_FOUND : fail_dup ? IXL_ERR_INVALID_ARG : IXL_OK);
            ok_calls += rc == IXL_OK;
            failed_calls += rc != IXL_OK;
            if (rc == IXL_OK) {
                for (int i = 0; i < n; i++) {
                    int j = areg_find(d[i].addr - (uintptr_t)area, d[i].len);
                    areg[j] = areg[--n_areg];
                }
            }
        } else if (n_areg > 0) {
            /* A region in use cannot go: deregistering it fails and changes nothing. */
            int j = (int)(rnd(&seed) % (uint64_t)n_areg);
            struct ixl_desc dd = {(uintptr_t)area + areg[j].off, areg[j].len, 0};
            struct ixl_dlist *l = NULL;
            CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
            CHECK_RC(ixl_dlist_add(l, &dd, 1), IXL_OK);
            struct ixl_prep *p = NULL;
            CHECK_RC(ixl_prep_create(a, NULL, l, NULL, &p), IXL_OK);
            struct ixl_reg_desc one = {dd.addr, dd.len, 0, NULL, 0};
            /* The list may lie in another (covering) region: then this one can go. */
            int rc = ixl_mem_deregister(a, IXL_MEM_DRAM, &one, 1, NULL);
            CHECK(rc == IXL_OK || rc == IXL_ERR_BUSY);
            ok_calls += rc == IXL_OK;
            failed_calls += rc != IXL_OK;
            if (rc == IXL_OK)
                areg[j] = areg[--n_areg];
            ixl_prep_destroy(p);
            ixl_dlist_destroy(l);
        }
        api_verify(a, be, &seed);
        pthread_rwlock_rdlock(&a->lock);
        CHECK(ixl_registry_check(a->registry) == 0);
        CHECK(a->registry->all[IXL_MEM_DRAM].n == (size_t)n_areg);
        pthread_rwlock_unlock(&a->lock);
    }
    printf("api: %d calls succeeded, %d failed as the model said; %d regions left\n", ok_calls,
           failed_calls, n_areg);

    /* Large calls (the indexes are rebuilt): 512 regions in one call, 300 of them out in one. */
    struct ixl_reg_desc *big = calloc(512, sizeof(*big));
    CHECK(big != NULL);
    for (int i = 0; i < n_areg; i++)
        big[i] = (struct ixl_reg_desc){(uintptr_t)area + areg[i].off, areg[i].len, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, big, (size_t)n_areg, NULL), IXL_OK);
    for (int i = 0; i < 512; i++) /* every other 64 bytes, in a scrambled order */
        big[i] = (struct ixl_reg_desc){(uintptr_t)area + (uint64_t)((i * 37) % 512) * 128, 64, 0,
                                       NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, big, 512, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, big + 100, 300, NULL), IXL_OK);
    for (int i = 0; i < 512; i++) {
        int kept = i < 100 || i >= 400;
        for (int half = 0; half < 2; half++) {
            struct ixl_desc d = {big[i].addr + (uint64_t)half * 64, 64, 0};
            struct ixl_dlist *l = NULL;
            CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
            CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
            struct ixl_prep *p = NULL;
            CHECK_RC(ixl_prep_create(a, NULL, l, NULL, &p),
                     kept && half == 0 ? IXL_OK : IXL_ERR_NOT_REGISTERED);
            ixl_prep_destroy(p);
            ixl_dlist_destroy(l);
        }
    }
    pthread_rwlock_rdlock(&a->lock);
    CHECK(ixl_registry_check(a->registry) == 0);
    CHECK(a->registry->all[IXL_MEM_DRAM].n == 212);
    pthread_rwlock_unlock(&a->lock);
    free(big);
    CHECK(ok_calls > 100 && failed_calls > 20);
    ixl_agent_destroy(a);
}

int main(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct ixl_registry *r = ixl_registry_create();
    CHECK(r != NULL);
    /* A batch (sorted all at once), then single insertions. */
    for (int i = 0; i < 1000; i++)
        add(r, &seed);
    ixl_registry_commit(r);
    query_all(r, &seed, 20000);
    for (int i = 0; i < 200; i++) {
        add(r, &seed);
        ixl_registry_commit(r);
        query_all(r, &seed, 50);
    }
    /* Removals, one at a time and in groups. */
    for (int k = 0; k < 600; k++) {
        int i = (int)(rnd(&seed) % (uint64_t)n_regs);
        if (!live[i])
            continue;
        ixl_registry_remove_backend(r, regs[i], 0);
        ixl_registry_remove(r, regs[i]);
        live[i] = 0;
        if (k % 7 == 0) {
            ixl_registry_commit(r);
            query_all(r, &seed, 200);
        }
    }
    ixl_registry_commit(r);
    query_all(r, &seed, 20000);

    /* Exact lookups see every live region. */
    for (int i = 0; i < n_regs; i++) {
        struct region *g =
            ixl_registry_exact(r, IXL_MEM_DRAM, regs[i]->addr, regs[i]->len, regs[i]->dev);
        CHECK(live[i] ? g != NULL : 1);
        if (!live[i])
            free(regs[i]);
    }
    /* Whole-file registrations (len 0) cover everything after their offset. */
    CHECK(ixl_region_span(IXL_MEM_FILE, 4096, 0) == UINT64_MAX - 4096);
    CHECK(ixl_region_span(IXL_MEM_DRAM, 4096, 0) == 0);
    ixl_registry_free(r); /* frees the live regions */

    test_model();
    test_api();
    printf("ok\n");
    return 0;
}

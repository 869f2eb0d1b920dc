#include "core/registry.h"

#include <stdlib.h>
#include <string.h>

#include "util/sys.h"

static int cmp_key(const struct region *a, uint64_t dev, uint64_t addr, uint64_t len)
{
    if (a->dev != dev)
        return a->dev < dev ? -1 : 1;
    if (a->addr != addr)
        return a->addr < addr ? -1 : 1;
    if (a->len != len)
        return a->len < len ? -1 : 1;
    return 0;
}

uint64_t ixl_region_span(enum ixl_mem type, uint64_t addr, uint64_t len)
{
    if (len == 0 && (type == IXL_MEM_FILE || type == IXL_MEM_BLK || type == IXL_MEM_OBJ))
        return UINT64_MAX - addr;
    return len;
}

struct ixl_registry *ixl_registry_create(void)
{
    return sys_calloc(1, sizeof(struct ixl_registry));
}

static void rindex_free(struct rindex *x)
{
    free(x->v);
    free(x->best);
    memset(x, 0, sizeof(*x));
}

void ixl_registry_free(struct ixl_registry *r)
{
    if (r == NULL)
        return;
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        for (size_t i = 0; i < r->all[t].n; i++)
            free(r->all[t].v[i]);
        rindex_free(&r->all[t]);
        for (int b = 0; b < IXL_MAX_BACKENDS; b++)
            rindex_free(&r->by_backend[t][b]);
    }
    free(r);
}

/* First position whose key is >= (dev, addr, len). */
static size_t lower_bound(const struct rindex *x, uint64_t dev, uint64_t addr, uint64_t len)
{
    size_t lo = 0, hi = x->sorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_key(x->v[mid], dev, addr, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t end_of(const struct region *g)
{
    return g->addr + g->len;
}

/* best[] over the whole index: O(n). */
static void rebuild_best(struct rindex *x)
{
    for (size_t i = 0; i < x->n; i++) {
        if (i == 0 || x->v[i - 1]->dev != x->v[i]->dev) {
            x->best[i] = (uint32_t)i;
            continue;
        }
        uint32_t prev = x->best[i - 1];
        x->best[i] = end_of(x->v[i]) > end_of(x->v[prev]) ? (uint32_t)i : prev;
    }
}

static int cmp_regions(const void *a, const void *b)
{
    const struct region *x = *(const struct region *const *)a;
    const struct region *y = *(const struct region *const *)b;
    return cmp_key(x, y->dev, y->addr, y->len);
}

/* Appends without sorting; rindex_commit() restores the order before the next lookup. */
static int rindex_append(struct rindex *x, struct region *g)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        struct region **v = sys_realloc(x->v, cap * sizeof(*v));
        if (v == NULL)
            return IXL_ERR_NO_MEMORY;
        x->v = v;
        uint32_t *best = sys_realloc(x->best, cap * sizeof(*best));
        if (best == NULL)
            return IXL_ERR_NO_MEMORY;
        x->best = best;
        x->cap = cap;
    }
    x->v[x->n++] = g;
    return IXL_OK;
}

/* A few appended regions are moved into place (O(n) each); many are sorted together
 * (O(n log n)), so loading 10^4 regions at once stays fast. */
static void rindex_commit(struct rindex *x)
{
    if (x->sorted == x->n && !x->dirty)
        return;
    size_t added = x->n - x->sorted;
    if (added <= 8) {
        for (size_t i = x->sorted; i < x->n; i++) {
            struct region *g = x->v[i];
            size_t lo = 0, hi = i;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cmp_key(x->v[mid], g->dev, g->addr, g->len) <= 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            memmove(&x->v[lo + 1], &x->v[lo], (i - lo) * sizeof(x->v[0]));
            x->v[lo] = g;
        }
    } else {
        qsort(x->v, x->n, sizeof(x->v[0]), cmp_regions);
    }
    x->sorted = x->n;
    x->dirty = 0;
    rebuild_best(x);
}

static void rindex_remove(struct rindex *x, struct region *g)
{
    /* The search needs the order, not best[]: that is rebuilt once, at the writer's commit. */
    if (x->sorted != x->n)
        rindex_commit(x);
    size_t pos = lower_bound(x, g->dev, g->addr, g->len);
    while (pos < x->n && x->v[pos] != g && cmp_key(x->v[pos], g->dev, g->addr, g->len) == 0)
        pos++;
    if (pos >= x->n || x->v[pos] != g)
        return;
    memmove(&x->v[pos], &x->v[pos + 1], (x->n - pos - 1) * sizeof(x->v[0]));
    x->n--;
    x->sorted = x->n;
    x->dirty = 1;
}

struct region *ixl_registry_exact(struct ixl_registry *r, enum ixl_mem type, uint64_t addr,
                                  uint64_t reg_len, uint64_t dev)
{
    struct rindex *x = &r->all[type];
    uint64_t span = ixl_region_span(type, addr, reg_len);
    size_t pos = lower_bound(x, dev, addr, span);
    if (pos < x->sorted && cmp_key(x->v[pos], dev, addr, span) == 0)
        return x->v[pos];
    return NULL;
}

struct region *ixl_registry_cover(const struct ixl_registry *r, enum ixl_mem type, unsigned b,
                                  uint64_t dev, uint64_t addr, uint64_t len)
{
    const struct rindex *x = &r->by_backend[type][b];
    /* Last position with (dev, addr) <= (dev, addr): the first with key > (dev, addr, MAX),
     * minus one. */
    size_t pos = lower_bound(x, dev, addr, UINT64_MAX);
    while (pos < x->sorted && cmp_key(x->v[pos], dev, addr, UINT64_MAX) == 0)
        pos++;
    if (pos == 0)
        return NULL;
    pos--;
    if (x->v[pos]->dev != dev)
        return NULL;
    struct region *g = x->v[x->best[pos]];
    if (g->addr <= addr && end_of(g) >= addr && end_of(g) - addr >= len)
        return g;
    return NULL;
}

int ixl_registry_add(struct ixl_registry *r, struct region *g)
{
    return rindex_append(&r->all[g->type], g);
}

int ixl_registry_add_backend(struct ixl_registry *r, struct region *g, unsigned b)
{
    return rindex_append(&r->by_backend[g->type][b], g);
}

void ixl_registry_commit(struct ixl_registry *r)
{
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        rindex_commit(&r->all[t]);
        for (int b = 0; b < IXL_MAX_BACKENDS; b++)
            rindex_commit(&r->by_backend[t][b]);
    }
}

void ixl_registry_remove(struct ixl_registry *r, struct region *g)
{
    rindex_remove(&r->all[g->type], g);
}

void ixl_registry_remove_backend(struct ixl_registry *r, struct region *g, unsigned b)
{
    rindex_remove(&r->by_backend[g->type][b], g);
}

uint64_t ixl_region_last_covered(const struct region *g, const struct ixl_run *run)
{
    uint64_t last = run->count - 1;
    if (run->stride == 0)
        return last;
    /* Element k is covered while addr + k * stride + len <= the region's end. */
    uint64_t room = g->addr + g->len - run->addr - run->len;
    uint64_t k = room / run->stride;
    return k < last ? k : last;
}

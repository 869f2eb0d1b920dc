#include "core/registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/asan.h"
#include "util/scratch.h"
#include "util/sys.h"

#include "../../plugins/common/ixl_pool.h" /* ixlp_map: populated memory */

/*
 * A node of an index. Each node keeps, for each child, the child's height and reach (the
 * furthest-reaching region of the child's subtree), so that rebalancing on the way up reads
 * only the nodes on the path, never their siblings. What a lookup reads (the key, the children,
 * the left child's height and reach) fills the node's first cache line; nodes are aligned to
 * 64 bytes, so a lookup step costs one line.
 */
struct reach {
    uint64_t dev, end;
    struct region *g; /* NULL: empty subtree */
};

struct rnode {
    /* first cache line (the node's size is a multiple of it) */
    _Alignas(64) uint64_t dev;
    uint64_t addr, len;
    struct rnode *kid[2];
    uint64_t kr0_dev, kr0_end; /* kid[0]'s reach, when kh[0] > 0 */
    int32_t kh[2];             /* kid[i]'s height, 0 for none */
    /* second */
    struct region *g;
    struct region *kr0_g;
    struct reach kr1; /* kid[1]'s reach */
};

/*
 * Memory of a registry: slabs, carved as needed. A registry's first slab of each kind (nodes,
 * region structs) is small (SLAB_BYTES, from malloc, mapped apart from the heap; only the pages
 * used are touched); once it outgrows that, or a batch announces more, slabs are 2 MiB on a
 * 2 MiB boundary with MADV_HUGEPAGE and their pages in (ixlp_map, plugins/common/ixl_pool.h).
 * Where transparent huge pages are on, such a slab is one huge page instead of 512 small ones:
 * on a virtual machine a fault costs tens of microseconds, and registering 10^4 regions
 * faulted in ~1400 pages of nodes and region structs (38-42 ms for 10^4 regions, of which
 * ~6 ms is the work). Where they are off, a huge slab is populated page by page.
 *
 * Slabs of freed registries are kept for the next ones, up to SLAB_POOL_BYTES in all: a remote's
 * metadata is loaded again after each restart of its agent, and slabs handed back to the system
 * were faulted in again page by page at the next load (10^4 regions: 3 ms with kept slabs,
 * 40-100 ms faulting on this VM). The bound is what the process keeps at most after every
 * registry is gone.
 */
#define SLAB_NODES 2047
#define SLAB_BYTES (64 + (SLAB_NODES + 1) * sizeof(struct rnode))
#define HUGE_BYTES ((size_t)2 << 20)
#define SLAB_POOL_BYTES ((size_t)8 << 20)

/* A slab's header; what is carved starts at the next 64-byte boundary. */
struct slab {
    struct slab *next;
    size_t bytes; /* SLAB_BYTES (malloc) or HUGE_BYTES (mapped) */
};

static struct {
    pthread_mutex_t lock;
    struct slab *small, *huge;
    size_t bytes;
} slab_pool = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0};

/* HUGE_BYTES on a HUGE_BYTES boundary, its pages in, or NULL. */
static struct slab *huge_map(void)
{
    return ixlp_map(&ixl_sys_table, HUGE_BYTES, true);
}

/* A slab, huge when asked and possible (else small), or NULL without memory. */
static struct slab *slab_get(int huge)
{
    /* A kept slab first (its pages are there already): a huge one for a large registry, or a
     * small one when no huge one is kept; a small registry takes only small ones. */
    pthread_mutex_lock(&slab_pool.lock);
    struct slab **list = huge && slab_pool.huge ? &slab_pool.huge : &slab_pool.small;
    struct slab *s = *list;
    if (s != NULL) {
        *list = s->next;
        slab_pool.bytes -= s->bytes;
    }
    pthread_mutex_unlock(&slab_pool.lock);
    if (s != NULL)
        IXL_UNPOISON(s + 1, s->bytes - sizeof(*s));
    if (s == NULL && huge && (s = huge_map()) != NULL)
        s->bytes = HUGE_BYTES;
    if (s == NULL && (s = sys_malloc(SLAB_BYTES)) != NULL)
        s->bytes = SLAB_BYTES;
    return s;
}

static void slab_put(struct slab *s)
{
    pthread_mutex_lock(&slab_pool.lock);
    if (slab_pool.bytes + s->bytes <= SLAB_POOL_BYTES) {
        struct slab **list = s->bytes == HUGE_BYTES ? &slab_pool.huge : &slab_pool.small;
        s->next = *list;
        *list = s;
        slab_pool.bytes += s->bytes;
        IXL_POISON(s + 1, s->bytes - sizeof(*s));
        s = NULL;
    }
    pthread_mutex_unlock(&slab_pool.lock);
    if (s != NULL && s->bytes == HUGE_BYTES)
        ixlp_unmap(&ixl_sys_table, s, HUGE_BYTES);
    else
        free(s);
}

/* A new slab for r, linked into its list; [*begin, *end) is its carving space. */
static int slab_add(struct ixl_registry *r, char **begin, char **end)
{
    struct slab *s = slab_get(r->slab_bytes >= SLAB_BYTES || r->expect >= SLAB_BYTES);
    if (s == NULL)
        return IXL_ERR_NO_MEMORY;
    s->next = r->slabs;
    r->slabs = s;
    r->slab_bytes += s->bytes;
    *begin = (char *)(((uintptr_t)(s + 1) + 63) & ~(uintptr_t)63);
    *end = (char *)s + s->bytes;
    return IXL_OK;
}

/* A node from r's free list or its current slab (a new one when full); NULL without memory. */
static struct rnode *node_new(struct ixl_registry *r)
{
    struct rnode *n = r->free_nodes;
    if (n != NULL) {
        r->free_nodes = n->kid[0];
        return n;
    }
    if ((size_t)((char *)r->carve_end - (char *)r->carve) < sizeof(struct rnode)) {
        char *begin, *end;
        if (slab_add(r, &begin, &end) != IXL_OK)
            return NULL;
        r->carve = (struct rnode *)begin;
        r->carve_end = r->carve + (size_t)(end - begin) / sizeof(struct rnode);
    }
    return r->carve++;
}

static void node_free(struct ixl_registry *r, struct rnode *n)
{
    n->kid[0] = r->free_nodes;
    r->free_nodes = n;
}

static int cmp_key(uint64_t adev, uint64_t aaddr, uint64_t alen, uint64_t dev, uint64_t addr,
                   uint64_t len)
{
    if (adev != dev)
        return adev < dev ? -1 : 1;
    if (aaddr != addr)
        return aaddr < addr ? -1 : 1;
    if (alen != len)
        return alen < len ? -1 : 1;
    return 0;
}

/* Node t against (dev, addr, len, g): the order of the index, equal keys by region address. */
static int cmp_node(const struct rnode *t, uint64_t dev, uint64_t addr, uint64_t len,
                    const struct region *g)
{
    int c = cmp_key(t->dev, t->addr, t->len, dev, addr, len);
    if (c != 0)
        return c;
    if (t->g != g)
        return (uintptr_t)t->g < (uintptr_t)g ? -1 : 1;
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

struct region *ixl_registry_region_new(struct ixl_registry *r)
{
    r->region_arena = 1;
    const size_t size = (sizeof(struct region) + 63) & ~(size_t)63;
    void **g = r->free_regions;
    if (g != NULL) {
        IXL_UNPOISON((char *)g + sizeof(void *), size - sizeof(void *));
        r->free_regions = *g;
    } else {
        if ((size_t)(r->rcarve_end - r->rcarve) < size &&
            slab_add(r, &r->rcarve, &r->rcarve_end) != IXL_OK)
            return NULL;
        g = (void **)r->rcarve;
        r->rcarve += size;
    }
    memset(g, 0, sizeof(struct region));
    return (struct region *)g;
}

void ixl_registry_expect(struct ixl_registry *r, size_t regions)
{
    size_t per = ((sizeof(struct region) + 63) & ~(size_t)63) + 2 * sizeof(struct rnode);
    r->expect = regions > SIZE_MAX / per ? SIZE_MAX : regions * per;
}

struct ixl_md **region_md_at(struct region *g, unsigned b, int t)
{
    if (b < IXL_REGION_SLOTS)
        return &g->mds[2 * b + (unsigned)t];
    if (g->ext == NULL &&
        (g->ext = sys_calloc(2 * (IXL_MAX_BACKENDS - IXL_REGION_SLOTS), sizeof(*g->ext))) == NULL)
        return NULL;
    return &g->ext[2 * (b - IXL_REGION_SLOTS) + (unsigned)t];
}

void ixl_registry_region_free(struct ixl_registry *r, struct region *g)
{
    free(g->ext);
    g->ext = NULL;
    void **link = (void **)g;
    *link = r->free_regions;
    r->free_regions = link;
    IXL_POISON((char *)g + sizeof(void *),
               ((sizeof(struct region) + 63) & ~(size_t)63) - sizeof(void *));
}

/* Frees what the regions of t hold (the higher slots' arrays), and with own, the regions. */
static void free_regions(struct rnode *t, int own)
{
    while (t != NULL) {
        free_regions(t->kid[0], own);
        free(t->g->ext);
        t->g->ext = NULL;
        if (own)
            free(t->g);
        t = t->kid[1];
    }
}

void ixl_registry_free(struct ixl_registry *r)
{
    if (r == NULL)
        return;
    for (int t = 0; t < IXL_MEM_COUNT; t++)
        free_regions(r->all[t].root, !r->region_arena);
    ixl_scratch_give(r->scratch);
    while (r->slabs != NULL) {
        struct slab *s = r->slabs;
        r->slabs = s->next;
        slab_put(s);
    }
    free(r);
}

/* ---- the AVL tree ---------------------------------------------------------------------------- */

/* Whether a reaches further than b (in (dev, end) order); an empty b never does. */
static int further(const struct reach *a, const struct reach *b)
{
    if (b->g == NULL)
        return a->g != NULL;
    if (a->g == NULL)
        return 0;
    if (a->dev != b->dev)
        return a->dev > b->dev;
    return a->end > b->end;
}

static int height(const struct rnode *t)
{
    return 1 + (t->kh[0] > t->kh[1] ? t->kh[0] : t->kh[1]);
}

static struct reach get_kr(const struct rnode *t, int i)
{
    if (i == 1)
        return t->kr1;
    return (struct reach){t->kr0_dev, t->kr0_end, t->kh[0] ? t->kr0_g : NULL};
}

static void set_kr(struct rnode *t, int i, struct reach r)
{
    if (i == 1) {
        t->kr1 = r;
    } else {
        t->kr0_dev = r.dev;
        t->kr0_end = r.end;
        t->kr0_g = r.g;
    }
}

/* The reach of t's whole subtree; ties keep the earlier region (left subtree, node, right). */
static struct reach reach_of(const struct rnode *t)
{
    struct reach self = {t->dev, t->addr + t->len, t->g};
    struct reach l = get_kr(t, 0);
    struct reach best = further(&self, &l) ? self : l;
    return further(&t->kr1, &best) ? t->kr1 : best;
}

/* Sets t's slot i to child c (NULL: none), with c's height and reach. */
static void set_kid(struct rnode *t, int i, struct rnode *c)
{
    t->kid[i] = c;
    t->kh[i] = c ? height(c) : 0;
    set_kr(t, i, c ? reach_of(c) : (struct reach){0, 0, NULL});
}

/* Moves slot j of node f into slot i of t, height and reach with it (no read of the child). */
static void move_slot(struct rnode *t, int i, const struct rnode *f, int j)
{
    t->kid[i] = f->kid[j];
    t->kh[i] = f->kh[j];
    set_kr(t, i, get_kr(f, j));
}

/* dir 0: the right child comes up (rotation to the left); dir 1: the left child. */
static struct rnode *rotate(struct rnode *t, int dir)
{
    struct rnode *x = t->kid[!dir];
    move_slot(t, !dir, x, dir);
    set_kid(x, dir, t);
    return x;
}

/* t with its slots up to date, rebalanced: the new root of the subtree. */
static struct rnode *balance(struct rnode *t)
{
    int bf = t->kh[0] - t->kh[1];
    if (bf > 1) {
        struct rnode *l = t->kid[0];
        if (l->kh[0] < l->kh[1])
            set_kid(t, 0, rotate(l, 0));
        return rotate(t, 1);
    }
    if (bf < -1) {
        struct rnode *r = t->kid[1];
        if (r->kh[1] < r->kh[0])
            set_kid(t, 1, rotate(r, 1));
        return rotate(t, 0);
    }
    return t;
}

static struct rnode *insert(struct rnode *t, struct rnode *n)
{
    if (t == NULL)
        return n;
    int dir = cmp_node(n, t->dev, t->addr, t->len, t->g) > 0;
    set_kid(t, dir, insert(t->kid[dir], n));
    return balance(t);
}

/* Takes the first node of t out into *first. */
static struct rnode *remove_first(struct rnode *t, struct rnode **first)
{
    if (t->kid[0] == NULL) {
        *first = t;
        return t->kid[1];
    }
    set_kid(t, 0, remove_first(t->kid[0], first));
    return balance(t);
}

/* Takes g's node out of t into *gone (NULL when g is not there). */
static struct rnode *remove_node(struct rnode *t, const struct region *g, struct rnode **gone)
{
    if (t == NULL)
        return NULL;
    int c = cmp_node(t, g->dev, g->addr, g->len, g);
    if (c != 0) {
        int dir = c < 0;
        struct rnode *k = remove_node(t->kid[dir], g, gone);
        if (*gone == NULL)
            return t;
        set_kid(t, dir, k);
        return balance(t);
    }
    *gone = t;
    if (t->kid[0] == NULL)
        return t->kid[1];
    if (t->kid[1] == NULL)
        return t->kid[0];
    struct rnode *m = NULL;
    struct rnode *right = remove_first(t->kid[1], &m);
    move_slot(m, 0, t, 0);
    set_kid(m, 1, right);
    return balance(m);
}

static int rindex_add(struct ixl_registry *r, struct rindex *x, struct region *g)
{
    struct rnode *n = node_new(r);
    if (n == NULL)
        return IXL_ERR_NO_MEMORY;
    *n = (struct rnode){.dev = g->dev, .addr = g->addr, .len = g->len, .g = g};
    x->root = insert(x->root, n);
    x->n++;
    return IXL_OK;
}

static void rindex_remove(struct ixl_registry *r, struct rindex *x, struct region *g)
{
    struct rnode *gone = NULL;
    x->root = remove_node(x->root, g, &gone);
    if (gone != NULL) {
        node_free(r, gone);
        x->n--;
    }
}

/* ---- lookups --------------------------------------------------------------------------------- */

struct region *ixl_registry_exact(struct ixl_registry *r, enum ixl_mem type, uint64_t addr,
                                  uint64_t reg_len, uint64_t dev)
{
    uint64_t span = ixl_region_span(type, addr, reg_len);
    const struct rnode *t = r->all[type].root, *hit = NULL;
    while (t != NULL) { /* the first node with the key, if any */
        int c = cmp_key(t->dev, t->addr, t->len, dev, addr, span);
        if (c < 0) {
            t = t->kid[1];
        } else {
            if (c == 0)
                hit = t;
            t = t->kid[0];
        }
    }
    return hit ? hit->g : NULL;
}

struct region *ixl_registry_cover(const struct ixl_registry *r, enum ixl_mem type, unsigned b,
                                  uint64_t dev, uint64_t addr, uint64_t len)
{
    /* The furthest-reaching region among those with (dev, addr) <= (dev, addr): the pieces
     * gathered on the way down (each node's left subtree, then the node) come in index order,
     * so a tie keeps the first. Only the nodes' first cache lines are read on the way. */
    const struct rnode *t = r->by_backend[type][b].root, *at = NULL;
    uint64_t best_dev = 0, best_end = 0;
    int self = 0;
    while (t != NULL) {
        if (t->dev < dev || (t->dev == dev && t->addr <= addr)) {
            if (t->kh[0] > 0 && (at == NULL || t->kr0_dev > best_dev ||
                                 (t->kr0_dev == best_dev && t->kr0_end > best_end))) {
                at = t;
                self = 0;
                best_dev = t->kr0_dev;
                best_end = t->kr0_end;
            }
            uint64_t end = t->addr + t->len;
            if (at == NULL || t->dev > best_dev || (t->dev == best_dev && end > best_end)) {
                at = t;
                self = 1;
                best_dev = t->dev;
                best_end = end;
            }
            t = t->kid[1];
        } else {
            t = t->kid[0];
        }
    }
    if (at == NULL || best_dev != dev || best_end < addr || best_end - addr < len)
        return NULL;
    return self ? at->g : at->kr0_g;
}

/* ---- changes --------------------------------------------------------------------------------- */

int ixl_registry_add(struct ixl_registry *r, struct region *g)
{
    return rindex_add(r, &r->all[g->type], g);
}

int ixl_registry_add_backend(struct ixl_registry *r, struct region *g, unsigned b)
{
    return rindex_add(r, &r->by_backend[g->type][b], g);
}

void ixl_registry_commit(struct ixl_registry *r)
{
    (void)r;
}

void ixl_registry_remove(struct ixl_registry *r, struct region *g)
{
    rindex_remove(r, &r->all[g->type], g);
}

void ixl_registry_remove_backend(struct ixl_registry *r, struct region *g, unsigned b)
{
    rindex_remove(r, &r->by_backend[g->type][b], g);
}

/* ---- batches --------------------------------------------------------------------------------- */

/* A batch worth rebuilding the index for: a rebuild costs O(n + k log k) with sequential work,
 * k single changes O(k log n) with a dependent cache miss per level. */
static int batch_rebuilds(size_t k, size_t n)
{
    return k >= 64 && k * 8 >= n;
}

/* The nodes of t in order into v (room for all of them); returns the count. */
static size_t collect(struct rnode *t, struct rnode **v)
{
    struct rnode *stack[96];
    int top = 0;
    size_t n = 0;
    while (t != NULL || top > 0) {
        for (; t != NULL; t = t->kid[0])
            stack[top++] = t;
        t = stack[--top];
        v[n++] = t;
        t = t->kid[1];
    }
    return n;
}

/* A balanced tree of v[0..n) (in order), slots filled bottom-up. */
static struct rnode *build(struct rnode **v, size_t n)
{
    if (n == 0)
        return NULL;
    size_t mid = n / 2;
    struct rnode *t = v[mid];
    set_kid(t, 0, build(v, mid));
    set_kid(t, 1, build(v + mid + 1, n - mid - 1));
    return t;
}

static int cmp_nodes(const void *a, const void *b)
{
    const struct rnode *x = *(struct rnode *const *)a, *y = *(struct rnode *const *)b;
    return cmp_node(x, y->dev, y->addr, y->len, y->g);
}

static int cmp_regions(const void *a, const void *b)
{
    const struct region *x = *(struct region *const *)a, *y = *(struct region *const *)b;
    int c = cmp_key(x->dev, x->addr, x->len, y->dev, y->addr, y->len);
    if (c != 0)
        return c;
    return x == y ? 0 : ((uintptr_t)x < (uintptr_t)y ? -1 : 1);
}

/* Whether v[0..k) is in order already (a caller's batch often is): then no sort. */
static int sorted(void *const *v, size_t k, int (*cmp)(const void *, const void *))
{
    for (size_t i = 1; i < k; i++)
        if (cmp(&v[i - 1], &v[i]) > 0)
            return 0;
    return 1;
}

/* r's scratch with room for n pointers, or NULL without memory. */
static void **scratch(struct ixl_registry *r, size_t n)
{
    if (n > r->scratch_cap) {
        size_t cap = n < 1024 ? 1024 : n + n / 2;
        if (cap > SIZE_MAX / sizeof(void *))
            return NULL;
        void **v = ixl_scratch_take(cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        ixl_scratch_give(r->scratch);
        r->scratch = v;
        r->scratch_cap = ixl_scratch_cap(v) / sizeof(*v);
    }
    return r->scratch;
}

static struct rindex *index_of(struct ixl_registry *r, enum ixl_mem type, int b)
{
    return b < 0 ? &r->all[type] : &r->by_backend[type][b];
}

int ixl_registry_add_many(struct ixl_registry *r, enum ixl_mem type, int b, struct region *const *v,
                          size_t k)
{
    struct rindex *x = index_of(r, type, b);
    if (k == 0)
        return IXL_OK;
    /* Every node first, so that nothing changes on a failure; nodes and the merged order in
     * the scratch (k + n + k pointers), or one by one without memory for it. */
    int rebuild = batch_rebuilds(k, x->n + k);
    void **sc = scratch(r, rebuild ? x->n + 2 * k : k);
    struct rnode *one[1];
    struct rnode **nodes = sc ? (struct rnode **)sc : one;
    size_t expect = r->expect;
    if (k * sizeof(struct rnode) > expect)
        r->expect = k * sizeof(struct rnode);
    for (size_t i = 0; i < k; i++) {
        struct rnode *n = node_new(r);
        if (n == NULL) {
            r->expect = expect;
            while (sc && i-- > 0)
                node_free(r, nodes[i]);
            return IXL_ERR_NO_MEMORY; /* (without scratch, the first i are in the tree) */
        }
        *n = (struct rnode){.dev = v[i]->dev, .addr = v[i]->addr, .len = v[i]->len, .g = v[i]};
        if (sc == NULL) {
            x->root = insert(x->root, n);
            x->n++;
            continue;
        }
        nodes[i] = n;
    }
    r->expect = expect;
    if (sc == NULL)
        return IXL_OK;
    if (!rebuild || r->scratch_cap < x->n + 2 * k) {
        for (size_t i = 0; i < k; i++)
            x->root = insert(x->root, nodes[i]);
    } else {
        /* Merge the sorted batch into the index's order, then build the tree again. */
        struct rnode **all = nodes + k;
        if (!sorted((void **)nodes, k, cmp_nodes))
            qsort(nodes, k, sizeof(*nodes), cmp_nodes);
        struct rnode **old = all + k; /* the old nodes, moved down as the merge fills all */
        size_t n_old = collect(x->root, old);
        size_t i = 0, j = 0, o = 0;
        while (i < n_old || j < k) {
            if (j == k || (i < n_old && cmp_nodes(&old[i], &nodes[j]) < 0))
                all[o++] = old[i++];
            else
                all[o++] = nodes[j++];
        }
        x->root = build(all, o);
    }
    x->n += k;
    return IXL_OK;
}

void ixl_registry_remove_many(struct ixl_registry *r, enum ixl_mem type, int b,
                              struct region *const *v, size_t k)
{
    struct rindex *x = index_of(r, type, b);
    void **sc = batch_rebuilds(k, x->n) ? scratch(r, x->n + k) : NULL;
    if (sc == NULL) { /* a few (or no memory for the rebuild): one by one */
        for (size_t i = 0; i < k; i++)
            rindex_remove(r, x, v[i]);
        return;
    }
    /* Both in index order: one merge walk drops the batch's nodes. */
    struct rnode **all = (struct rnode **)sc;
    struct region **gone = (struct region **)(sc + x->n);
    memcpy(gone, v, k * sizeof(*gone));
    if (!sorted((void **)gone, k, cmp_regions))
        qsort(gone, k, sizeof(*gone), cmp_regions);
    size_t n = collect(x->root, all), kept = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        struct rnode *t = all[i];
        while (j < k && cmp_node(t, gone[j]->dev, gone[j]->addr, gone[j]->len, gone[j]) > 0)
            j++;
        if (j < k && gone[j] == t->g) {
            node_free(r, t);
            j++;
        } else {
            all[kept++] = t;
        }
    }
    x->root = build(all, kept);
    x->n = kept;
}

/* ---- walks ----------------------------------------------------------------------------------- */

static void iter_push_left(struct ixl_registry_iter *it, const struct rnode *t)
{
    for (; t != NULL; t = t->kid[0])
        it->stack[it->top++] = t;
}

void ixl_registry_iter_init(struct ixl_registry_iter *it, const struct ixl_registry *r,
                            enum ixl_mem type)
{
    it->top = 0;
    iter_push_left(it, r->all[type].root);
}

struct region *ixl_registry_iter_next(struct ixl_registry_iter *it)
{
    if (it->top == 0)
        return NULL;
    const struct rnode *t = it->stack[--it->top];
    iter_push_left(it, t->kid[1]);
    return t->g;
}

struct region *ixl_registry_next(const struct ixl_registry *r, enum ixl_mem type,
                                 const struct region *prev)
{
    const struct rnode *t = r->all[type].root, *after = NULL;
    while (t != NULL) { /* the first node after prev */
        if (prev == NULL || cmp_node(t, prev->dev, prev->addr, prev->len, prev) > 0) {
            after = t;
            t = t->kid[0];
        } else {
            t = t->kid[1];
        }
    }
    return after ? after->g : NULL;
}

/* ---- self-check (tests) ---------------------------------------------------------------------- */

/* Checks t's subtree: order within (lo, hi), AVL balance, the slots' heights and reaches. Returns
 * the height, or -1. */
static int check_node(const struct rnode *t, const struct rnode *lo, const struct rnode *hi,
                      size_t *count)
{
    if (t == NULL)
        return 0;
    (*count)++;
    if ((lo && cmp_node(t, lo->dev, lo->addr, lo->len, lo->g) <= 0) ||
        (hi && cmp_node(t, hi->dev, hi->addr, hi->len, hi->g) >= 0) || t->len != t->g->len ||
        t->addr != t->g->addr || t->dev != t->g->dev)
        return -1;
    int hl = check_node(t->kid[0], lo, t, count), hr = check_node(t->kid[1], t, hi, count);
    if (hl < 0 || hr < 0 || hl != t->kh[0] || hr != t->kh[1] || hl - hr > 1 || hr - hl > 1)
        return -1;
    for (int i = 0; i < 2; i++) {
        struct reach want = t->kid[i] ? reach_of(t->kid[i]) : (struct reach){0, 0, NULL};
        struct reach have = get_kr(t, i);
        if (want.g != have.g || (want.g && (want.dev != have.dev || want.end != have.end)))
            return -1;
    }
    if (((uintptr_t)t & 63) != 0)
        return -1;
    return 1 + (hl > hr ? hl : hr);
}

int ixl_registry_check(const struct ixl_registry *r)
{
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        for (int b = -1; b < IXL_MAX_BACKENDS; b++) {
            const struct rindex *x = b < 0 ? &r->all[t] : &r->by_backend[t][b];
            size_t count = 0;
            if (check_node(x->root, NULL, NULL, &count) < 0 || count != x->n)
                return -1;
        }
    }
    return 0;
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

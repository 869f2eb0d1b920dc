/* Memory registration, queries and allocation; the agent's sub-tables' life cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hooks.h"
#include "device/device.h"
#include "core/internal.h"
#include "util/log.h"
#include "util/scratch.h"
#include "util/time.h"
#include "util/sys.h"

int ixl_agent_hooks_init(struct ixl_agent *agent)
{
    agent->registry = ixl_registry_create();
    agent->remotes = sys_calloc(1, sizeof(*agent->remotes));
    if (agent->registry == NULL || agent->remotes == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "agent %s: calloc: out of memory",
                             agent->name);
    return IXL_OK;
}

/* The agent's lists of live requests and prepared lists (objs_lock held). */
static void node_push(struct ixl_node **head, struct ixl_node *n, void *owner)
{
    n->owner = owner;
    n->prev = NULL;
    n->next = *head;
    if (*head)
        (*head)->prev = n;
    *head = n;
}

static void node_remove(struct ixl_node **head, struct ixl_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        *head = n->next;
    if (n->next)
        n->next->prev = n->prev;
}

/* The owner of the first node, or NULL. */
static void *node_first(struct ixl_agent *agent, struct ixl_node **head)
{
    pthread_mutex_lock(&agent->objs_lock);
    void *owner = *head ? (*head)->owner : NULL;
    pthread_mutex_unlock(&agent->objs_lock);
    return owner;
}

void ixl_agent_track_xfer(struct ixl_agent *agent, struct ixl_xfer *x)
{
    pthread_mutex_lock(&agent->objs_lock);
    node_push(&agent->xfers, &x->node, x);
    pthread_mutex_unlock(&agent->objs_lock);
}

void ixl_agent_untrack_xfer(struct ixl_agent *agent, struct ixl_xfer *x)
{
    pthread_mutex_lock(&agent->objs_lock);
    node_remove(&agent->xfers, &x->node);
    pthread_mutex_unlock(&agent->objs_lock);
}

void ixl_agent_track_prep(struct ixl_agent *agent, struct ixl_prep *p)
{
    pthread_mutex_lock(&agent->objs_lock);
    node_push(&agent->preps, &p->node, p);
    pthread_mutex_unlock(&agent->objs_lock);
}

void ixl_agent_untrack_prep(struct ixl_agent *agent, struct ixl_prep *p)
{
    pthread_mutex_lock(&agent->objs_lock);
    node_remove(&agent->preps, &p->node);
    pthread_mutex_unlock(&agent->objs_lock);
}

void ixl_regions_unuse(struct region **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        atomic_fetch_sub(&v[i]->users, 1);
}

void ixl_agent_hooks_fini(struct ixl_agent *agent)
{
    if (agent->registry == NULL || agent->remotes == NULL) {
        ixl_registry_free(agent->registry);
        free(agent->remotes);
        return;
    }
    /* Requests first (they use regions and remotes), then prepared lists. A backend that
     * cannot stop a request gets 5 s in all; its requests are then abandoned (the engine's
     * destroy frees what it still holds). */
    uint64_t deadline = ixl_now_ns() + 5000000000ull;
    for (;;) {
        struct ixl_xfer *x = node_first(agent, &agent->xfers);
        if (x == NULL)
            break;
        int rc = ixl_xfer_release(x);
        while (rc != IXL_OK && ixl_now_ns() < deadline) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            rc = ixl_xfer_release(x);
        }
        if (rc != IXL_OK) {
            ixl_log_write(IXL_LOG_ERROR, "agent %s: a request could not be canceled; abandoning it",
                          agent->name);
            ixl_xfer_abandon(x);
        }
    }
    for (;;) {
        struct ixl_prep *p = node_first(agent, &agent->preps);
        if (p == NULL)
            break;
        ixl_prep_destroy(p);
    }
    ixl_desc_pool_fini(agent);
    pthread_rwlock_wrlock(&agent->lock);
    ixl_remotes_fini(agent);
    ixl_mem_fini(agent);
    pthread_rwlock_unlock(&agent->lock);
    ixl_registry_free(agent->registry);
    agent->registry = NULL;
    free(agent->remotes);
    agent->remotes = NULL;
}

/* ---- registration ------------------------------------------------------------------------ */

/* The backends a call targets: params->backends, or every backend that takes type. */
static int pick_backends(struct ixl_agent *agent, enum ixl_mem type,
                         struct ixl_backend *const *list, size_t n, uint32_t *mask)
{
    uint32_t m = 0;
    if (list == NULL && n > 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "%zu backends given as a NULL array", n);
    if (list != NULL && n > 0) {
        for (size_t i = 0; i < n; i++) {
            struct ixl_backend *b = list[i];
            if (b == NULL || b->agent != agent)
                return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                                     "backend %zu of the list does not belong to agent '%s'", i,
                                     agent->name);
            if (!(b->mem_mask & IXL_MEM_BIT(type)))
                return IXL_AGENT_ERR(agent, IXL_ERR_BAD_MEM_TYPE,
                                     "backend %s does not support %s memory", ixl_backend_name(b),
                                     ixl_mem_name(type));
            m |= 1u << b->slot;
        }
    } else {
        for (unsigned i = 0; i < agent->n_backends; i++)
            if (agent->backends[i] != NULL && (agent->backends[i]->mem_mask & IXL_MEM_BIT(type)))
                m |= 1u << i;
    }
    if (m == 0) {
        /* Backends whose plugin may take the type but whose engine dropped it say why. */
        char why[1024] = "";
        size_t w = 0;
        for (unsigned i = 0; i < agent->n_backends && w < sizeof(why); i++) {
            const struct ixl_backend *b = agent->backends[i];
            if (b != NULL && (b->plugin->info.mem_mask & IXL_MEM_BIT(type)) &&
                b->mem_why[0] != '\0') {
                int k = snprintf(why + w, sizeof(why) - w, "; backend %s: %s", ixl_backend_name(b),
                                 b->mem_why);
                w += k > 0 ? (size_t)k : 0;
            }
        }
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_BACKEND,
                             "agent '%s' has no backend that supports %s memory (create one "
                             "first; ixl-info lists the plugins and their memory types)%s",
                             agent->name, ixl_mem_name(type), why);
    }
    *mask = m;
    return IXL_OK;
}

/* Undoes backend b's registration of g (local). */
static void unregister_one(struct ixl_agent *agent, struct region *g, unsigned b)
{
    const struct ixl_plugin *p = agent->backends[b]->plugin;
    struct ixl_engine *e = agent->backends[b]->engine;
    if (region_md(g, b, 1))
        p->ops.unload_md(e, region_md(g, b, 1));
    if (region_md(g, b, 0))
        p->ops.deregister_mem(e, region_md(g, b, 0));
    region_md_clear(g, b);
    g->backend_mask &= ~(1u << b);
}

static int register_one(struct ixl_agent *agent, struct region *g, unsigned b,
                        const struct ixl_reg_desc *d)
{
    struct ixl_backend *be = agent->backends[b];
    const struct ixl_plugin *p = be->plugin;
    ixl_err_clear(agent->id);
    struct ixl_md **md = region_md_at(g, b, 0), **tmd = region_md_at(g, b, 1);
    if (md == NULL || tmd == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    int rc = p->ops.register_mem(be->engine, g->type, d, md);
    if (rc != IXL_OK) {
        *md = NULL;
        if (ixl_err_get(agent->id)[0] == '\0')
            IXL_AGENT_ERR(agent, rc, "backend %s refused to register %s region 0x%llx+%llu: %s",
                          p->info.name, ixl_mem_name(g->type), (unsigned long long)d->addr,
                          (unsigned long long)d->len, ixl_strerror(rc));
        return rc;
    }
    if (be->caps & IXL_CAP_LOCAL) {
        ixl_err_clear(agent->id);
        rc = p->ops.load_local_md(be->engine, *md, tmd);
        if (rc != IXL_OK) {
            *tmd = NULL;
            /* The backend's own text says why, when it gave one (before deregister_mem can
             * overwrite it). */
            char why[256];
            snprintf(why, sizeof(why), "%s", ixl_err_get(agent->id));
            p->ops.deregister_mem(be->engine, *md);
            *md = NULL;
            return IXL_AGENT_ERR(agent, rc, "backend %s: load_local_md failed: %s%s%s",
                                 p->info.name, ixl_strerror(rc), why[0] ? ": " : "", why);
        }
    }
    g->backend_mask |= 1u << b;
    return IXL_OK;
}

static int cmp_desc_idx(const void *a, const void *b, void *ctx)
{
    const struct ixl_reg_desc *d = ctx;
    const struct ixl_reg_desc *x = &d[*(const size_t *)a], *y = &d[*(const size_t *)b];
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return 0;
}

/* A FILE descriptor in path mode: the backend opens bytes' path; the agent assigns its dev. */
static int path_mode(enum ixl_mem type, const struct ixl_reg_desc *d)
{
    return type == IXL_MEM_FILE && d->dev == IXL_DEV_NONE;
}

/* Sorts ord[0..m) by cmp_desc_idx (a merge sort, stable), with tmp[0..m) as room: qsort_r
 * took a buffer of its own from malloc at every call, whose pages were faulted in afresh. Input
 * already in order costs one pass. */
static void sort_idx(size_t *ord, size_t *tmp, size_t m, const struct ixl_reg_desc *d)
{
    size_t i = 1;
    while (i < m && cmp_desc_idx(&ord[i - 1], &ord[i], (void *)d) <= 0)
        i++;
    if (i >= m)
        return;
    size_t *src = ord, *dst = tmp;
    for (size_t w = 1; w < m; w *= 2) {
        for (size_t lo = 0; lo < m; lo += 2 * w) {
            size_t mid = m - lo > w ? lo + w : m, hi = m - mid > w ? mid + w : m;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                dst[k++] = cmp_desc_idx(&src[b], &src[a], (void *)d) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[k++] = src[a++];
            while (b < hi)
                dst[k++] = src[b++];
        }
        size_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != ord)
        memcpy(ord, src, m * sizeof(*ord));
}

/* Finds two descriptors of one call that name the same region, by sorting (O(n log n), tmp[0..n)
 * the sort's room), into ord[0..n): the descriptors in (dev, addr, len) order, path-mode ones
 * last in call order (they always make new regions: they never clash). The calls then look
 * regions up and index them in that order: neighbours in key order share most of their path
 * down a tree, and a batch that comes sorted is not sorted again. */
static int find_dup(enum ixl_mem type, const struct ixl_reg_desc *d, size_t n, size_t *ord,
                    size_t *tmp, size_t *first, size_t *second)
{
    size_t m = 0, p = n;
    for (size_t i = 0; i < n; i++) /* path-mode ones filled in from the end, then reversed */
        if (!path_mode(type, &d[i]))
            ord[m++] = i;
        else
            ord[--p] = i;
    for (size_t a = m, b = n; a + 1 < b; a++, b--) {
        size_t t = ord[a];
        ord[a] = ord[b - 1];
        ord[b - 1] = t;
    }
    if (m < 2)
        return 0;
    sort_idx(ord, tmp, m, d);
    for (size_t i = 1; i < m; i++) {
        if (cmp_desc_idx(&ord[i - 1], &ord[i], (void *)d) == 0) {
            *first = ord[i - 1] < ord[i] ? ord[i - 1] : ord[i];
            *second = ord[i - 1] < ord[i] ? ord[i] : ord[i - 1];
            return 1;
        }
    }
    return 0;
}

static int check_reg_desc(struct ixl_agent *agent, enum ixl_mem type, const struct ixl_reg_desc *d,
                          size_t i)
{
    if (d->bytes == NULL && d->bytes_len > 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "registration descriptor %zu has bytes_len but no bytes", i);
    if (path_mode(type, d) && d->bytes_len == 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "FILE registration descriptor %zu has dev IXL_DEV_NONE (path mode) "
                             "but no bytes: give \"MODE:PATH\", e.g. \"rw,create:/data/kv.bin\"",
                             i);
    if (type == IXL_MEM_FILE && d->dev >= IXL_DEV_ASSIGNED_MIN && d->dev != IXL_DEV_NONE)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "FILE registration descriptor %zu: dev %llu is neither an open fd "
                             "nor IXL_DEV_NONE (ids from 2^62 are assigned by the agent)",
                             i, (unsigned long long)d->dev);
    uint64_t span = ixl_region_span(type, d->addr, d->len);
    if (span == 0 || span > UINT64_MAX - d->addr)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "registration descriptor %zu (addr 0x%llx, len %llu): %s", i,
                             (unsigned long long)d->addr, (unsigned long long)d->len,
                             span == 0 ? "len 0 is only for FILE, BLK and OBJ (whole object)"
                                       : "the range wraps around");
    return IXL_OK;
}

/*
 * The arrays of one register or deregister call of n descriptors come from one scratch block
 * (util/scratch.h), carved by carve(): kept between calls, its pages are in already. Five
 * mallocs (and qsort's buffer) a call grew and shrank the top of the heap, and registering
 * 10^4 regions faulted ~100 of their pages in afresh, tens of microseconds each on a virtual
 * machine. NULL when n is too large to count in bytes or there is no memory.
 */
#define CALL_ARRAYS 6 /* the most arrays a call carves */

static void *call_block(size_t n, size_t bytes_per_desc)
{
    n = n ? n : 1;
    if (n > (SIZE_MAX - 64 * CALL_ARRAYS) / bytes_per_desc)
        return NULL;
    return ixl_scratch_take(n * bytes_per_desc + 64 * CALL_ARRAYS);
}

/* The next bytes of a call block (64-byte aligned) at *at, which moves past them. */
static void *carve(char **at, size_t bytes)
{
    char *p = (char *)(((uintptr_t)*at + 63) & ~(uintptr_t)63);
    *at = p + bytes;
    return p;
}

/* Adds the regions of one ixl_mem_register call to the indexes: the fresh ones to "all", each to
 * the indexes of the backends that took it, one batch per index, listed in v[0..n).
 * IXL_ERR_NO_MEMORY leaves some added: the caller takes them all out again. */
static int publish(struct ixl_registry *reg, enum ixl_mem type, struct region **regs,
                   const uint32_t *added, const uint8_t *fresh, size_t n, const size_t *ord,
                   struct region **v)
{
    int rc = IXL_OK;
    for (int b = -1; b < IXL_MAX_BACKENDS && rc == IXL_OK; b++) {
        size_t k = 0;
        for (size_t j = 0; j < n; j++) {
            size_t i = ord[j];
            if (b < 0 ? fresh[i] != 0 : (added[i] & (1u << b)) != 0)
                v[k++] = regs[i];
        }
        rc = ixl_registry_add_many(reg, type, b, v, k);
    }
    return rc;
}

ixl_status ixl_mem_register(struct ixl_agent *agent, enum ixl_mem type,
                            const struct ixl_reg_desc *descs, size_t n,
                            const struct ixl_reg_params *params)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if ((unsigned)type >= IXL_MEM_COUNT || (descs == NULL && n > 0))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_mem_register: bad memory type or NULL descriptors");
    int want_devs = params && (params->field_mask & IXL_REG_F_DEVS_OUT);
    if (want_devs && params->devs_out == NULL && n > 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "IXL_REG_F_DEVS_OUT is set but devs_out is NULL");
    for (size_t i = 0; i < n; i++) {
        int rc = check_reg_desc(agent, type, &descs[i], i);
        if (rc != IXL_OK)
            return rc;
        if (type == IXL_MEM_VRAM) {
            /* Before any backend sees it: the device layer says what the memory is. */
            char why[384];
            rc = ixl_dev_check_vram(descs[i].addr, descs[i].len, descs[i].dev, why, sizeof(why));
            if (rc != IXL_OK)
                return IXL_AGENT_ERR(agent, rc,
                                     "cannot register VRAM descriptor %zu (addr 0x%llx, len %llu, "
                                     "dev %llu): %s",
                                     i, (unsigned long long)descs[i].addr,
                                     (unsigned long long)descs[i].len,
                                     (unsigned long long)descs[i].dev, why);
        }
        if (path_mode(type, &descs[i]) && !want_devs)
            return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                                 "FILE registration descriptor %zu is in path mode: set "
                                 "IXL_REG_F_DEVS_OUT and devs_out to learn the dev id that "
                                 "transfer descriptors use for it",
                                 i);
    }
    /* Per descriptor: the sort order and its room, the region (existing or new), which
     * backends this call added (so a failure can undo exactly what this call did), whether the
     * region is new, and publish's batch list. */
    const size_t n1 = n ? n : 1;
    char *block = call_block(n, 4 * sizeof(size_t) + sizeof(uint32_t) + 1), *at = block;
    if (block == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    size_t *ord = carve(&at, n1 * sizeof(size_t)), *tmp = carve(&at, n1 * sizeof(size_t));
    struct region **regs = carve(&at, n1 * sizeof(*regs)), **v = carve(&at, n1 * sizeof(*v));
    uint32_t *added = carve(&at, n1 * sizeof(*added));
    uint8_t *fresh = carve(&at, n1);
    memset(regs, 0, n1 * sizeof(*regs));
    memset(added, 0, n1 * sizeof(*added));
    memset(fresh, 0, n1);
    size_t d1, d2;
    if (find_dup(type, descs, n, ord, tmp, &d1, &d2)) {
        ixl_scratch_give(block);
        return IXL_AGENT_QUIET(agent, IXL_ERR_EXISTS,
                               "registration descriptors %zu and %zu name the same region", d1, d2);
    }
    int use_list = params && (params->field_mask & IXL_REG_F_BACKENDS);
    pthread_rwlock_wrlock(&agent->lock);
    uint32_t mask;
    int rc = pick_backends(agent, type, use_list ? params->backends : NULL,
                           use_list ? params->n_backends : 0, &mask);
    if (rc != IXL_OK)
        goto unlock;
    ixl_registry_expect(agent->registry, n);
    /* The regions already there, looked up in key order (no two descriptors name the same
     * region, so what this call adds changes none of the answers). */
    for (size_t j = 0; j < n; j++) {
        const struct ixl_reg_desc *d = &descs[ord[j]];
        if (!path_mode(type, d))
            regs[ord[j]] = ixl_registry_exact(agent->registry, type, d->addr, d->len, d->dev);
    }
    size_t i;
    for (i = 0; i < n; i++) {
        const struct ixl_reg_desc *d = &descs[i];
        int by_path = path_mode(type, d);
        struct region *g = regs[i];
        if (g != NULL && (g->backend_mask & mask)) {
            rc = IXL_AGENT_QUIET(
                agent, IXL_ERR_EXISTS,
                "%s region 0x%llx+%llu (dev %llu) is already registered with "
                "backend %s",
                ixl_mem_name(type), (unsigned long long)d->addr, (unsigned long long)d->len,
                (unsigned long long)d->dev,
                agent->backends[__builtin_ctz(g->backend_mask & mask)]->plugin->info.name);
            goto undo;
        }
        if (g == NULL) {
            g = ixl_registry_region_new(agent->registry);
            if (g == NULL) {
                rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
                goto undo;
            }
            g->type = type;
            g->addr = d->addr;
            g->reg_len = d->len;
            g->len = ixl_region_span(type, d->addr, d->len);
            g->dev = by_path ? IXL_DEV_ASSIGNED_MIN + agent->next_dev++ : d->dev;
            fresh[i] = 1;
        }
        regs[i] = g;
        /* With no backend named, a backend that cannot serve this region (IXL_ERR_NOT_SUPPORTED:
         * GDS for a file on a file system cuFile does not serve) is left out for it, as long as
         * another backend takes it; a named backend's refusal is the call's. */
        unsigned skipped = 0;
        for (unsigned b = 0; b < agent->n_backends; b++) {
            if (!(mask & (1u << b)))
                continue;
            rc = register_one(agent, g, b, d);
            if (rc == IXL_ERR_NOT_SUPPORTED && !use_list) {
                ixl_log_write(IXL_LOG_WARN, "agent %s: backend %s left out for %s region %zu: %s",
                              agent->name, agent->backends[b]->plugin->info.name,
                              ixl_mem_name(type), i, ixl_err_get(agent->id));
                skipped++;
                continue;
            }
            if (rc != IXL_OK)
                goto undo;
            added[i] |= 1u << b;
        }
        if (skipped > 0 && added[i] == 0 && !(g->backend_mask & mask)) {
            rc = IXL_ERR_NOT_SUPPORTED; /* no backend took it: the last refusal says why */
            goto undo;
        }
        rc = IXL_OK;
    }
    /* Everything registered: publish in the indexes, each index's regions in one batch. */
    rc = publish(agent->registry, type, regs, added, fresh, n, ord, v);
    if (rc != IXL_OK) {
        /* Out of memory while indexing: take every region of this call out again. */
        for (size_t j = 0; j < n; j++) {
            for (unsigned b = 0; b < agent->n_backends; b++)
                if (added[j] & (1u << b))
                    ixl_registry_remove_backend(agent->registry, regs[j], b);
            if (fresh[j])
                ixl_registry_remove(agent->registry, regs[j]);
        }
        IXL_AGENT_ERR(agent, rc, "out of memory while indexing regions");
        i = n;
        goto undo;
    }
    ixl_registry_commit(agent->registry);
    if (want_devs)
        for (i = 0; i < n; i++)
            params->devs_out[i] = regs[i]->dev;
    goto expect_none;

undo:
    for (size_t j = 0; j < n && j <= i; j++) {
        if (regs[j] == NULL)
            continue;
        for (unsigned b = 0; b < agent->n_backends; b++)
            if (added[j] & (1u << b))
                unregister_one(agent, regs[j], b);
        if (fresh[j])
            ixl_registry_region_free(agent->registry, regs[j]);
    }
    ixl_registry_commit(agent->registry);
expect_none:
    ixl_registry_expect(agent->registry, 0);
unlock:
    pthread_rwlock_unlock(&agent->lock);
    ixl_scratch_give(block);
    return rc;
}

/* A region of an ixl_mem_deregister call and the backends the call drops from it. */
struct gone {
    struct region *g;
    uint32_t mask;
};

/* Takes the regions of e[0..n) out of the indexes of the backends they lose, and out of "all"
 * when they lose every backend: one batch per index, listed in v[0..n). */
static void unindex(struct ixl_registry *reg, enum ixl_mem type, const struct gone *e, size_t n,
                    const size_t *ord, struct region **v)
{
    for (int b = -1; b < IXL_MAX_BACKENDS; b++) {
        size_t k = 0;
        for (size_t j = 0; j < n; j++) { /* in key order: the batches come sorted */
            size_t i = ord[j];
            if (b < 0 ? (e[i].g->backend_mask & ~e[i].mask) == 0 : (e[i].mask & (1u << b)) != 0)
                v[k++] = e[i].g;
        }
        if (k > 0)
            ixl_registry_remove_many(reg, type, b, v, k);
    }
}

ixl_status ixl_mem_deregister(struct ixl_agent *agent, enum ixl_mem type,
                              const struct ixl_reg_desc *descs, size_t n,
                              const struct ixl_reg_params *params)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if ((unsigned)type >= IXL_MEM_COUNT || (descs == NULL && n > 0))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_mem_deregister: bad memory type or NULL descriptors");
    int use_list = params && (params->field_mask & IXL_REG_F_BACKENDS);
    /* The backends' deregister_mem may wait for frames in flight from a region (bounded by
     * their request timeout): it runs after agent->lock is dropped, under calls_lock (read),
     * which keeps the backends alive. Other calls of the agent go on meanwhile. */
    /* Per descriptor (call_block): its region and what the call drops from it, the sort order
     * and its room, unindex's batch list. Without memory for them the call fails below. */
    const size_t n1 = n ? n : 1;
    char *block = call_block(n, sizeof(struct gone) + 3 * sizeof(size_t)), *at = block;
    struct gone *gone = NULL;
    size_t *ord = NULL, *tmp = NULL;
    struct region **v = NULL;
    if (block != NULL && n > 0) {
        gone = carve(&at, n1 * sizeof(*gone));
        ord = carve(&at, n1 * sizeof(*ord));
        tmp = carve(&at, n1 * sizeof(*tmp));
        v = carve(&at, n1 * sizeof(*v));
    }
    size_t n_gone = 0, d1 = 0, d2 = 0;
    int dup = block ? find_dup(type, descs, n, ord, tmp, &d1, &d2) : -1;
    pthread_rwlock_rdlock(&agent->calls_lock);
    pthread_rwlock_wrlock(&agent->lock);
    uint32_t mask = 0;
    int rc = IXL_OK;
    if (use_list)
        rc = pick_backends(agent, type, params->backends, params->n_backends, &mask);
    else
        mask = (1u << agent->n_backends) - 1;
    /* All or nothing: check every descriptor before changing anything. The regions are looked
     * up in key order first (neighbours share most of their path down the tree). */
    for (size_t j = 0; rc == IXL_OK && gone != NULL && j < n; j++) {
        const struct ixl_reg_desc *d = &descs[ord[j]];
        gone[ord[j]].g = ixl_registry_exact(agent->registry, type, d->addr, d->len, d->dev);
    }
    for (size_t i = 0; rc == IXL_OK && i < n; i++) {
        const struct ixl_reg_desc *d = &descs[i];
        struct region *g = gone != NULL
                               ? gone[i].g
                               : ixl_registry_exact(agent->registry, type, d->addr, d->len, d->dev);
        if (g == NULL || !(g->backend_mask & mask)) {
            rc = IXL_AGENT_QUIET(
                agent, IXL_ERR_NOT_FOUND, "%s region 0x%llx+%llu (dev %llu) is not registered%s%s",
                ixl_mem_name(type), (unsigned long long)d->addr, (unsigned long long)d->len,
                (unsigned long long)d->dev, use_list ? " with these backends" : "",
                path_mode(type, d) ? " (deregister a path-mode region with the dev id that its "
                                     "registration returned in devs_out)"
                                   : "");
        } else if (atomic_load(&g->users) > 0) {
            rc = IXL_AGENT_ERR(agent, IXL_ERR_BUSY,
                               "%s region 0x%llx+%llu is used by %llu prepared list(s) or "
                               "request(s): release them before deregistering",
                               ixl_mem_name(type), (unsigned long long)d->addr,
                               (unsigned long long)d->len,
                               (unsigned long long)atomic_load(&g->users));
        }
    }
    if (rc == IXL_OK && dup < 0)
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    else if (rc == IXL_OK && dup)
        rc = IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                           "descriptors %zu and %zu name the same region", d1, d2);
    if (rc == IXL_OK && gone != NULL) {
        /* gone[i] holds the region found above; its mask becomes what this call drops. Each
         * index loses its regions in one batch; then gone[0..n_gone) is refilled in place with
         * the regions no backend holds any more. */
        for (size_t i = 0; i < n; i++)
            gone[i].mask = gone[i].g->backend_mask & mask & ((1u << agent->n_backends) - 1);
        unindex(agent->registry, type, gone, n, ord, v);
        for (size_t i = 0; i < n; i++) {
            struct gone e = gone[i];
            if ((e.g->backend_mask & ~e.mask) == 0) {
                gone[n_gone++] = e; /* out of the registry: ours alone */
                continue;
            }
            /* Still registered with other backends: here. */
            for (unsigned b = 0; b < agent->n_backends; b++)
                if (e.mask & (1u << b))
                    unregister_one(agent, e.g, b);
        }
    }
    ixl_registry_commit(agent->registry);
    unsigned n_backends = agent->n_backends;
    pthread_rwlock_unlock(&agent->lock);
    for (size_t i = 0; i < n_gone; i++)
        for (unsigned b = 0; b < n_backends; b++)
            if (gone[i].mask & (1u << b))
                unregister_one(agent, gone[i].g, b);
    /* The region structs go back to the registry's free list, under its lock again. */
    if (n_gone > 0) {
        pthread_rwlock_wrlock(&agent->lock);
        for (size_t i = 0; i < n_gone; i++)
            ixl_registry_region_free(agent->registry, gone[i].g);
        pthread_rwlock_unlock(&agent->lock);
    }
    pthread_rwlock_unlock(&agent->calls_lock);
    ixl_scratch_give(block);
    return rc;
}

int ixl_mem_drop_backend(struct ixl_agent *agent, unsigned b)
{
    /* A region only b holds would be deregistered: refused while a prepared list or request
     * still counts on it (it keeps a pointer to the region). */
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        struct ixl_registry_iter it;
        ixl_registry_iter_init(&it, agent->registry, (enum ixl_mem)t);
        for (struct region *g; (g = ixl_registry_iter_next(&it)) != NULL;) {
            if (g->backend_mask == (1u << b) && atomic_load(&g->users) > 0)
                return IXL_AGENT_ERR(agent, IXL_ERR_BUSY,
                                     "%s region 0x%llx+%llu, registered with backend %s only, is "
                                     "used by %llu prepared list(s) or request(s)",
                                     ixl_mem_name(g->type), (unsigned long long)g->addr,
                                     (unsigned long long)g->reg_len,
                                     agent->backends[b]->plugin->info.name,
                                     (unsigned long long)atomic_load(&g->users));
        }
    }
    /* The walk fetches the next region before this one may leave the index. */
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        struct region *next;
        for (struct region *g = ixl_registry_next(agent->registry, (enum ixl_mem)t, NULL);
             g != NULL; g = next) {
            next = ixl_registry_next(agent->registry, (enum ixl_mem)t, g);
            if (!(g->backend_mask & (1u << b)))
                continue;
            ixl_registry_remove_backend(agent->registry, g, b);
            unregister_one(agent, g, b);
            if (g->backend_mask == 0) {
                ixl_registry_remove(agent->registry, g);
                ixl_registry_region_free(agent->registry, g);
            }
        }
    }
    ixl_registry_commit(agent->registry);
    return IXL_OK;
}

/* Deregisters everything left (agent destroy; agent->lock held for writing). */
void ixl_mem_fini(struct ixl_agent *agent)
{
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        struct ixl_registry_iter it;
        ixl_registry_iter_init(&it, agent->registry, (enum ixl_mem)t);
        for (struct region *g; (g = ixl_registry_iter_next(&it)) != NULL;) {
            for (unsigned b = 0; b < agent->n_backends; b++)
                if (g->backend_mask & (1u << b))
                    unregister_one(agent, g, b);
        }
    }
    for (size_t i = 0; i < agent->n_allocs; i++) {
        struct ixl_alloc *a = &agent->allocs[i];
        a->backend->plugin->ops.free_mem(a->backend->engine, a->addr, a->len);
    }
    free(agent->allocs);
    agent->allocs = NULL;
    agent->n_allocs = 0;
}

/* ---- queries and allocation --------------------------------------------------------------- */

ixl_status ixl_mem_query(struct ixl_agent *agent, enum ixl_mem type,
                         const struct ixl_reg_desc *descs, size_t n, struct ixl_backend *backend,
                         struct ixl_mem_query *out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if ((unsigned)type >= IXL_MEM_COUNT || (n > 0 && (descs == NULL || out == NULL)) ||
        (backend && backend->agent != agent))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_mem_query: bad arguments");
    pthread_rwlock_rdlock(&agent->lock);
    int rc = IXL_ERR_NOT_SUPPORTED;
    for (unsigned b = 0; b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || (backend && be != backend) || !(be->mem_mask & IXL_MEM_BIT(type)) ||
            !be->plugin->has[IXL_OPT_QUERY_MEM])
            continue;
        rc = be->plugin->ops.query_mem(be->engine, type, descs, n, out);
        if (rc != IXL_ERR_NOT_SUPPORTED)
            break;
    }
    pthread_rwlock_unlock(&agent->lock);
    if (rc == IXL_ERR_NOT_SUPPORTED)
        IXL_AGENT_QUIET(agent, rc, "no backend of agent '%s' answers queries about %s memory",
                        agent->name, ixl_mem_name(type));
    return rc;
}

ixl_status ixl_mem_alloc(struct ixl_agent *agent, enum ixl_mem type, size_t len,
                         struct ixl_backend *backend, void **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if ((unsigned)type >= IXL_MEM_COUNT || len == 0 || out == NULL ||
        (backend && backend->agent != agent))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_mem_alloc: bad arguments");
    pthread_rwlock_wrlock(&agent->lock);
    int rc = IXL_ERR_NOT_SUPPORTED;
    if (agent->n_allocs == agent->cap_allocs) {
        size_t cap = agent->cap_allocs ? agent->cap_allocs * 2 : 8;
        struct ixl_alloc *v = sys_realloc(agent->allocs, cap * sizeof(*v));
        if (v == NULL) {
            pthread_rwlock_unlock(&agent->lock);
            return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
        }
        agent->allocs = v;
        agent->cap_allocs = cap;
    }
    for (unsigned b = 0; b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || (backend && be != backend) || !(be->mem_mask & IXL_MEM_BIT(type)) ||
            !be->plugin->has[IXL_OPT_ALLOC_MEM])
            continue;
        void *p = NULL;
        rc = be->plugin->ops.alloc_mem(be->engine, type, len, &p);
        if (rc == IXL_OK) {
            agent->allocs[agent->n_allocs++] = (struct ixl_alloc){p, len, be};
            *out = p;
            break;
        }
        if (rc != IXL_ERR_NOT_SUPPORTED)
            break;
    }
    pthread_rwlock_unlock(&agent->lock);
    if (rc == IXL_ERR_NOT_SUPPORTED)
        IXL_AGENT_QUIET(agent, rc, "no backend of agent '%s' allocates %s memory", agent->name,
                        ixl_mem_name(type));
    return rc;
}

ixl_status ixl_mem_free(struct ixl_agent *agent, void *addr)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (addr == NULL)
        return IXL_OK;
    pthread_rwlock_wrlock(&agent->lock);
    int rc = IXL_ERR_NOT_FOUND;
    for (size_t i = 0; i < agent->n_allocs; i++) {
        struct ixl_alloc a = agent->allocs[i];
        if (a.addr != addr)
            continue;
        /* Memory still registered would leave regions pointing at unmapped pages. */
        for (int t = 0; t < IXL_MEM_COUNT && rc == IXL_ERR_NOT_FOUND; t++) {
            struct ixl_registry_iter it;
            ixl_registry_iter_init(&it, agent->registry, (enum ixl_mem)t);
            for (struct region *g; (g = ixl_registry_iter_next(&it)) != NULL;) {
                if (g->addr < (uintptr_t)addr + a.len && (uintptr_t)addr < g->addr + g->len &&
                    (t == IXL_MEM_DRAM || t == IXL_MEM_VRAM)) {
                    rc = IXL_AGENT_ERR(agent, IXL_ERR_BUSY,
                                       "memory at %p is still registered: deregister it first",
                                       addr);
                    break;
                }
            }
        }
        if (rc == IXL_ERR_BUSY)
            break;
        rc = a.backend->plugin->ops.free_mem(a.backend->engine, a.addr, a.len);
        agent->allocs[i] = agent->allocs[--agent->n_allocs];
        break;
    }
    pthread_rwlock_unlock(&agent->lock);
    if (rc == IXL_ERR_NOT_FOUND)
        IXL_AGENT_ERR(agent, rc, "%p was not allocated by ixl_mem_alloc() of agent '%s'", addr,
                      agent->name);
    return rc;
}

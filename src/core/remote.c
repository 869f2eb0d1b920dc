/* Metadata: the local agent's blob, loading remote agents, invalidation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "serdes/codec.h"

_Static_assert(IXL_MD_MAX_BACKENDS >= IXL_MAX_BACKENDS, "blobs must fit every backend");
#include "util/auth.h"
#include "util/log.h"
#include "util/scratch.h"
#include "util/sys.h"

/* ---- the remote table ---------------------------------------------------------------------- */

struct remote *ixl_remote_find(struct ixl_agent *agent, const char *name)
{
    return ixlp_index_find(&agent->remotes->idx, name);
}

struct remote *ixl_remote_require(struct ixl_agent *agent, const char *name)
{
    struct remote *r = ixl_remote_find(agent, name);
    if (r == NULL)
        IXL_AGENT_QUIET(agent, IXL_ERR_NOT_FOUND, "metadata for remote agent '%s' not found", name);
    return r;
}

void ixl_remote_get(struct remote *r)
{
    atomic_fetch_add(&r->refs, 1);
}

/* Unloads every region's metadata and frees the remote (agent->lock held for writing, since
 * unload_md is serialized with the other metadata methods). */
/* Links r into / out of the list of every live remote (agent->lock held for writing). */
static void all_link(struct ixl_agent *agent, struct remote *r)
{
    struct ixl_remote_table *t = agent->remotes;
    r->all_prev = NULL;
    r->all_next = t->all;
    if (t->all != NULL)
        t->all->all_prev = r;
    t->all = r;
}

static void all_unlink(struct ixl_agent *agent, struct remote *r)
{
    struct ixl_remote_table *t = agent->remotes;
    if (r->all_prev != NULL)
        r->all_prev->all_next = r->all_next;
    else if (t->all == r)
        t->all = r->all_next;
    if (r->all_next != NULL)
        r->all_next->all_prev = r->all_prev;
    r->all_prev = r->all_next = NULL;
}

static void remote_free(struct remote *r)
{
    struct ixl_agent *agent = r->agent;
    all_unlink(agent, r);
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        struct ixl_registry_iter it;
        ixl_registry_iter_init(&it, r->regs, (enum ixl_mem)t);
        for (struct region *g; (g = ixl_registry_iter_next(&it)) != NULL;) {
            for (unsigned b = 0; b < agent->n_backends; b++)
                if (g->backend_mask & (1u << b))
                    agent->backends[b]->plugin->ops.unload_md(agent->backends[b]->engine,
                                                              region_md(g, b, 0));
        }
    }
    ixl_registry_free(r->regs);
    free(r);
}

void ixl_remote_put(struct remote *r, int locked)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (locked) {
        remote_free(r);
        return;
    }
    struct ixl_agent *agent = r->agent;
    pthread_rwlock_wrlock(&agent->lock);
    remote_free(r);
    pthread_rwlock_unlock(&agent->lock);
}

/* Takes r out of the table, marks its requests stale, drops the table's reference; with
 * disconnect, also disconnects its backends (agent->lock held for writing). A remote replaced
 * by a restarted instance is not disconnected: the backends key connections by name, and the
 * new instance's connection info already replaced the old one. */
static void remote_retire(struct ixl_agent *agent, struct remote *r, int disconnect)
{
    struct ixl_remote_table *t = agent->remotes;
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i] == r) {
            t->v[i] = t->v[--t->n];
            ixlp_index_remove(&t->idx, r->name, r);
            break;
        }
    }
    atomic_store(&r->valid, 0);
    for (unsigned b = 0; disconnect && b < agent->n_backends; b++)
        if (r->conn_mask & (1u << b))
            agent->backends[b]->plugin->ops.disconnect(agent->backends[b]->engine, r->name);
    ixl_remote_put(r, 1);
}

static void remote_drop(struct ixl_agent *agent, struct remote *r)
{
    remote_retire(agent, r, 1);
}

void ixl_remotes_fini(struct ixl_agent *agent)
{
    while (agent->remotes->n > 0)
        remote_drop(agent, agent->remotes->v[agent->remotes->n - 1]);
    free(agent->remotes->v);
    agent->remotes->v = NULL;
    ixlp_index_free(&agent->remotes->idx);
}

void ixl_remotes_drop_backend(struct ixl_agent *agent, unsigned b)
{
    struct ixl_backend *be = agent->backends[b];
    /* Every remote, retired ones still held by requests of other backends included: when the
     * last of those goes, it must not call into this backend (or the next in its slot). */
    for (struct remote *r = agent->remotes->all; r != NULL; r = r->all_next) {
        for (int t = 0; t < IXL_MEM_COUNT; t++) {
            /* The walk fetches the next region before this one may leave the index. */
            struct region *next;
            for (struct region *g = ixl_registry_next(r->regs, (enum ixl_mem)t, NULL); g != NULL;
                 g = next) {
                next = ixl_registry_next(r->regs, (enum ixl_mem)t, g);
                if (!(g->backend_mask & (1u << b)))
                    continue;
                ixl_registry_remove_backend(r->regs, g, b);
                be->plugin->ops.unload_md(be->engine, region_md(g, b, 0));
                region_md_clear(g, b);
                g->backend_mask &= ~(1u << b);
                if (g->backend_mask == 0) {
                    ixl_registry_remove(r->regs, g);
                    ixl_registry_region_free(r->regs, g);
                }
            }
        }
        ixl_registry_commit(r->regs);
        if (r->conn_mask & (1u << b)) {
            be->plugin->ops.disconnect(be->engine, r->name);
            r->conn_mask &= ~(1u << b);
        }
    }
}

/* ---- the local agent's metadata ------------------------------------------------------------ */

static int want_backend(const struct ixl_md_params *p, const struct ixl_backend *b)
{
    if (!(b->caps & IXL_CAP_REMOTE))
        return 0; /* local-only backends have nothing a peer could use */
    if (p == NULL || !(p->field_mask & IXL_MD_F_BACKENDS))
        return 1;
    for (size_t i = 0; i < p->n_backends; i++)
        if (p->backends[i] == b)
            return 1;
    return 0;
}

/* Appends the region entries of g for the chosen backends. */
static int encode_region(struct ixl_agent *agent, struct ixl_wbuf *w, const struct region *g,
                         const unsigned *wire_index, uint32_t chosen, uint32_t *count)
{
    for (unsigned b = 0; b < agent->n_backends; b++) {
        if (!(chosen & g->backend_mask & (1u << b)))
            continue;
        const void *pub = NULL;
        size_t len = 0;
        struct ixl_backend *be = agent->backends[b];
        int rc = be->plugin->ops.get_public_data(be->engine, region_md(g, b, 0), &pub, &len);
        if (rc != IXL_OK)
            return IXL_AGENT_ERR(agent, rc, "backend %s: no public data for region 0x%llx: %s",
                                 be->plugin->info.name, (unsigned long long)g->addr,
                                 ixl_strerror(rc));
        ixl_md_encode_region(w, wire_index[b], g->type, g->addr, g->reg_len ? g->reg_len : g->len,
                             g->dev, pub, len);
        (*count)++;
    }
    return IXL_OK;
}

ixl_status ixl_md_get(struct ixl_agent *agent, const struct ixl_md_params *params, void **out,
                      size_t *out_len)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (out == NULL || out_len == NULL ||
        (params && (params->field_mask & IXL_MD_F_REGIONS) && params->regions == NULL) ||
        (params && (params->field_mask & IXL_MD_F_BACKENDS) && params->n_backends > 0 &&
         params->backends == NULL))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_get: bad arguments");
    uint64_t m = params ? params->field_mask : 0;
    int conn = (m & IXL_MD_F_CONN_INFO) ? params->conn_info : 1;
    int partial = (m & IXL_MD_F_REGIONS) != 0;
    const char *label = (m & IXL_MD_F_LABEL) ? params->label : NULL;
    if (label && strlen(label) > UINT16_MAX)
        return IXL_AGENT_ERR(agent, IXL_ERR_TOO_LARGE, "label longer than 65535 bytes");

    /* Encoded in a kept block, then copied out at its exact size (see util/scratch.h). */
    struct ixl_wbuf w = {.scratch = 1};
    pthread_rwlock_rdlock(&agent->lock);
    int keyed = agent->auth.mode == IXL_AUTH_KEY;
    uint16_t flags = (uint16_t)((conn ? IXL_MDF_CONN : 0) | (partial ? IXL_MDF_PARTIAL : 0) |
                                (label ? IXL_MDF_LABEL : 0) | (keyed ? IXL_MDF_MAC : 0));
    ixl_md_encode_header(&w, flags, agent->incarnation, agent->name);
    unsigned wire_index[IXL_MAX_BACKENDS];
    uint32_t chosen = 0;
    uint16_t nb = 0;
    size_t at_nb = ixl_md_encode_count16(&w);
    for (unsigned b = 0; b < agent->n_backends; b++) {
        struct ixl_backend *be = agent->backends[b];
        if (be == NULL || !want_backend(params, be))
            continue;
        chosen |= 1u << b;
        wire_index[b] = nb++;
        ixl_md_encode_backend(&w, be->plugin->info.name, conn ? be->conn_info : NULL,
                              conn ? be->conn_len : 0);
    }
    ixl_md_patch_count16(&w, at_nb, nb);

    uint32_t nr = 0;
    size_t at_nr = ixl_md_encode_count32(&w);
    int rc = IXL_OK;
    if (!partial) {
        for (int t = 0; t < IXL_MEM_COUNT && rc == IXL_OK; t++) {
            struct ixl_registry_iter it;
            ixl_registry_iter_init(&it, agent->registry, (enum ixl_mem)t);
            for (struct region *g; rc == IXL_OK && (g = ixl_registry_iter_next(&it)) != NULL;)
                rc = encode_region(agent, &w, g, wire_index, chosen, &nr);
        }
    } else {
        /* The regions covering each descriptor, each region once; one lookup per region
         * change along each run. */
        const struct ixl_dlist *l = params->regions;
        struct region **seen = NULL;
        size_t n_seen = 0;
        for (size_t r = 0; r < l->n_runs && rc == IXL_OK; r++) {
            const struct ixl_run *run = &l->runs[r];
            for (uint64_t k = 0; k < run->count && rc == IXL_OK;) {
                uint64_t addr = run->addr + k * run->stride;
                struct region *g = NULL;
                for (unsigned b = 0; b < agent->n_backends && g == NULL; b++)
                    if (chosen & (1u << b))
                        g = ixl_registry_cover(agent->registry, l->type, b, run->dev, addr,
                                               run->len);
                if (g == NULL) {
                    rc = IXL_AGENT_ERR(agent, IXL_ERR_NOT_REGISTERED,
                                       "partial metadata: descriptor %llu (addr 0x%llx, len "
                                       "%llu) is not inside a region registered with a "
                                       "backend that supports remote transfers",
                                       (unsigned long long)(l->first[r] + k),
                                       (unsigned long long)addr, (unsigned long long)run->len);
                    break;
                }
                k = ixl_region_last_covered(g, run) + 1;
                size_t j;
                for (j = 0; j < n_seen && seen[j] != g; j++)
                    ;
                if (j < n_seen)
                    continue;
                struct region **sn = sys_realloc(seen, (n_seen + 1) * sizeof(*sn));
                if (sn == NULL) {
                    rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
                    break;
                }
                seen = sn;
                seen[n_seen++] = g;
                rc = encode_region(agent, &w, g, wire_index, chosen, &nr);
            }
        }
        free(seen);
    }
    pthread_rwlock_unlock(&agent->lock);
    ixl_md_patch_count32(&w, at_nr, nr);
    if (label) {
        ixl_wb_u16(&w, (uint16_t)strlen(label));
        ixl_wb_bytes(&w, label, strlen(label));
    }
    if (rc == IXL_OK && w.failed)
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    if (rc == IXL_OK && keyed) {
        /* With a cluster key every blob, full or partial, ends with its MAC: region keys and
         * connection info travel only in authenticated metadata. */
        uint8_t mac[IXL_MD_MAC_LEN];
        const void *parts[] = {w.data};
        size_t lens[] = {w.len};
        rc = ixl_auth_mac(&agent->auth, IXL_MD_MAC_LABEL, parts, lens, 1, mac);
        if (rc != IXL_OK)
            rc = IXL_AGENT_ERR(agent, rc, "ixl_md_get: computing the metadata's MAC failed: %s",
                               ixl_strerror(rc));
        ixl_wb_bytes(&w, mac, sizeof(mac));
        if (rc == IXL_OK && w.failed)
            rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    }
    void *blob = rc == IXL_OK ? sys_malloc(w.len ? w.len : 1) : NULL;
    if (rc == IXL_OK && blob == NULL)
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    if (rc != IXL_OK) {
        ixl_scratch_give(w.data);
        return rc;
    }
    memcpy(blob, w.data, w.len);
    ixl_scratch_give(w.data);
    *out = blob;
    *out_len = w.len;
    return IXL_OK;
}

/* ---- loading a remote agent's metadata ------------------------------------------------------ */

static struct ixl_backend *local_counterpart(struct ixl_agent *agent,
                                             const struct ixl_md_backend *b)
{
    for (unsigned i = 0; i < agent->n_backends; i++) {
        struct ixl_backend *be = agent->backends[i];
        if (be == NULL)
            continue;
        const char *n = be->plugin->info.name;
        if ((be->caps & IXL_CAP_REMOTE) && strlen(n) == b->name_len &&
            memcmp(n, b->name, b->name_len) == 0)
            return be;
    }
    return NULL;
}

static int table_add(struct ixl_agent *agent, struct remote *r)
{
    struct ixl_remote_table *t = agent->remotes;
    if (t->idx.cap == 0)
        t->idx.seed = ixlp_random64(sys_getrandom);
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct remote **v = sys_realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return IXL_ERR_NO_MEMORY;
        t->v = v;
        t->cap = cap;
    }
    if (ixlp_index_add(&t->idx, r->name, r, sys_calloc) != 0)
        return IXL_ERR_NO_MEMORY;
    t->v[t->n++] = r;
    return IXL_OK;
}

static int cmp_entry(const void *a, const void *b, void *ctx)
{
    const struct ixl_md_region *v = ctx;
    const struct ixl_md_region *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return 0;
}

/* Metadata one call attached to a region, so a failure can take it back. */
struct attach {
    struct region *g;
    unsigned slot;
    int fresh; /* g was made by this call */
};

/* Adds the attachments of one load to r's indexes: one batch per (type, index), listed in v
 * (room for n). */
static int index_attachments(struct ixl_registry *regs, const struct attach *done, size_t n,
                             struct region **v)
{
    int rc = IXL_OK;
    for (int type = 0; type < IXL_MEM_COUNT && rc == IXL_OK; type++) {
        for (int b = -1; b < IXL_MAX_BACKENDS && rc == IXL_OK; b++) {
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                const struct attach *t = &done[i];
                if (t->g->type != (enum ixl_mem)type)
                    continue;
                if (b < 0 ? t->fresh && (i == 0 || done[i - 1].g != t->g) : t->slot == (unsigned)b)
                    v[k++] = t->g;
            }
            rc = ixl_registry_add_many(regs, (enum ixl_mem)type, b, v, k);
        }
    }
    return rc;
}

/* Loads the regions of a decoded blob into r. Entries are sorted so that those naming one
 * region (one per backend, or repeated) meet: one region struct carries every backend's
 * metadata, and a region loaded before gains only the backends it lacked. Nothing is indexed
 * until every load succeeded, so a failure leaves r as it was. */
static int load_regions(struct ixl_agent *agent, struct remote *r, const struct ixl_md_decoded *md,
                        struct ixl_backend *const *map, size_t *skipped)
{
    size_t n = md->n_regions;
    size_t *order = ixl_scratch_take((n ? n : 1) * sizeof(*order));
    struct attach *done = ixl_scratch_take((n ? n : 1) * sizeof(*done));
    if (order == NULL || done == NULL) {
        ixl_scratch_give(order);
        ixl_scratch_give(done);
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    }
    size_t n_order = 0, n_done = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ixl_md_region *e = &md->regions[i];
        struct ixl_backend *be = map[e->backend];
        if (be == NULL || !(r->conn_mask & (1u << be->slot)) ||
            !(be->mem_mask & IXL_MEM_BIT(e->type)))
            (*skipped)++;
        else
            order[n_order++] = i;
    }
    qsort_r(order, n_order, sizeof(*order), cmp_entry, (void *)md->regions);
    ixl_registry_expect(r->regs, n_order);
    int rc = IXL_OK;
    struct region *g = NULL;
    int g_fresh = 0;
    for (size_t k = 0; k < n_order && rc == IXL_OK; k++) {
        size_t i = order[k];
        const struct ixl_md_region *e = &md->regions[i];
        struct ixl_backend *be = map[e->backend];
        if (k == 0 || cmp_entry(&order[k - 1], &order[k], (void *)md->regions) != 0) {
            g = ixl_registry_exact(r->regs, e->type, e->addr, e->len, e->dev);
            g_fresh = g == NULL;
            if (g == NULL) {
                g = ixl_registry_region_new(r->regs);
                if (g == NULL) {
                    rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
                    break;
                }
                g->type = e->type;
                g->addr = e->addr;
                g->len = e->len;
                g->reg_len = e->len;
                g->dev = e->dev;
            }
        }
        if (g->backend_mask & (1u << be->slot)) {
            if (g_fresh && g->backend_mask == 0)
                ixl_registry_region_free(r->regs, g);
            continue; /* already loaded (an incremental update may resend a region) */
        }
        struct ixl_reg_desc d = {e->addr, e->len, e->dev, NULL, 0};
        ixl_err_clear(agent->id);
        struct ixl_md **slot = region_md_at(g, be->slot, 0);
        rc = slot == NULL ? IXL_ERR_NO_MEMORY
                          : be->plugin->ops.load_remote_md(be->engine, r->name, e->type, &d, e->pub,
                                                           e->pub_len, slot);
        if (rc != IXL_OK) {
            if (slot != NULL)
                *slot = NULL;
            if (g_fresh && g->backend_mask == 0)
                ixl_registry_region_free(r->regs, g);
            if (ixl_err_get(agent->id)[0] == '\0')
                IXL_AGENT_ERR(agent, rc,
                              "backend %s refused region %zu of agent '%s' (0x%llx+%llu): %s",
                              be->plugin->info.name, i, r->name, (unsigned long long)e->addr,
                              (unsigned long long)e->len, ixl_strerror(rc));
            break;
        }
        g->backend_mask |= 1u << be->slot;
        done[n_done++] = (struct attach){g, be->slot, g_fresh};
    }
    /* Index: each fresh region once in "all", each attachment in its backend's index, one
     * batch per index. On a failure every attachment counts as indexed: the undo below takes
     * out what is there (removing what is not is nothing). */
    size_t indexed = 0;
    if (rc == IXL_OK) {
        /* order[] is done with: its n words hold the batches (no allocation per load). */
        _Static_assert(sizeof(size_t) == sizeof(struct region *), "order[] holds pointers");
        rc = index_attachments(r->regs, done, n_done, (struct region **)(void *)order);
        indexed = n_done;
    }
    if (rc != IXL_OK) {
        if (rc == IXL_ERR_NO_MEMORY && ixl_err_get(agent->id)[0] == '\0')
            IXL_AGENT_ERR(agent, rc, "out of memory while indexing remote regions");
        for (size_t j = n_done; j-- > 0;) {
            struct attach *t = &done[j];
            if (j < indexed) {
                ixl_registry_remove_backend(r->regs, t->g, t->slot);
                if (t->fresh && (j == 0 || done[j - 1].g != t->g))
                    ixl_registry_remove(r->regs, t->g);
            }
            struct ixl_backend *be = agent->backends[t->slot];
            be->plugin->ops.unload_md(be->engine, region_md(t->g, t->slot, 0));
            region_md_clear(t->g, t->slot);
            t->g->backend_mask &= ~(1u << t->slot);
            if (t->fresh && t->g->backend_mask == 0)
                ixl_registry_region_free(r->regs, t->g);
        }
    }
    ixl_registry_commit(r->regs);
    ixl_registry_expect(r->regs, 0);
    ixl_scratch_give(order);
    ixl_scratch_give(done);
    return rc;
}

/* Whether the agent may load md at all, by its MAC and incarnation: IXL_OK, or the refusal
 * (recorded). Checked before anything is loaded. */
static int md_admit(struct ixl_agent *agent, const struct ixl_md_decoded *md)
{
    if (agent->auth.mode == IXL_AUTH_KEY) {
        if (md->mac == NULL)
            return IXL_AGENT_ERR(agent, IXL_ERR_AUTH,
                                 "metadata of agent '%s' carries no MAC: this agent has a "
                                 "cluster key (IXL_AUTH_KEY) and loads only metadata "
                                 "authenticated with it; nothing loaded",
                                 md->name);
        uint8_t mac[IXL_MD_MAC_LEN];
        const void *parts[] = {md->mac - md->signed_len};
        size_t lens[] = {md->signed_len};
        int rc = ixl_auth_mac(&agent->auth, IXL_MD_MAC_LABEL, parts, lens, 1, mac);
        if (rc != IXL_OK)
            return IXL_AGENT_ERR(agent, rc,
                                 "verifying the MAC of metadata of agent '%s' failed: %s", md->name,
                                 ixl_strerror(rc));
        if (!ixl_auth_equal(mac, md->mac, IXL_MD_MAC_LEN))
            return IXL_AGENT_ERR(agent, IXL_ERR_AUTH,
                                 "metadata of agent '%s' has a MAC that does not verify under this "
                                 "agent's cluster key (another key, or the bytes were altered); "
                                 "nothing loaded",
                                 md->name);
    } else if (md->mac != NULL) {
        return IXL_AGENT_ERR(agent, IXL_ERR_AUTH,
                             "metadata of agent '%s' is authenticated with a cluster key and this "
                             "agent has none (give it the same key: auth_key, IXL_AUTH_KEY or "
                             "IXL_AUTH_KEY_FILE); nothing loaded",
                             md->name);
    }
    /* Incarnations are start times (microseconds << 12, agent.c): one far ahead of this
     * host's clock would make every real instance of the name look older, for good. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
    uint64_t start_us = md->incarnation >> 12;
    if (start_us > now_us + (uint64_t)IXL_MD_INC_FUTURE_S * 1000000u)
        return IXL_AGENT_ERR(agent, IXL_ERR_MALFORMED,
                             "metadata of agent '%s' claims incarnation %llx, a start %llu s after "
                             "this host's clock (more than %d s ahead: refused, so that it cannot "
                             "make the real agent look older); nothing loaded",
                             md->name, (unsigned long long)md->incarnation,
                             (unsigned long long)((start_us - now_us) / 1000000u),
                             IXL_MD_INC_FUTURE_S);
    return IXL_OK;
}

ixl_status ixl_md_load(struct ixl_agent *agent, const void *blob, size_t len, char *name_out,
                       size_t name_cap)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    return ixl_md_load_as(agent, blob, len, NULL, name_out, name_cap);
}

int ixl_md_load_as(struct ixl_agent *agent, const void *blob, size_t len, const char *expect,
                   char *name_out, size_t name_cap)
{
    ixl_err_clear(agent->id);
    if (blob == NULL && len > 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_load: NULL blob");
    struct ixl_md_decoded md;
    char why[256];
    int rc = ixl_md_decode(blob, len, &md, why, sizeof(why));
    if (rc != IXL_OK)
        return IXL_AGENT_ERR(agent, rc, "%s", rc == IXL_ERR_MALFORMED ? why : "out of memory");
    if ((rc = md_admit(agent, &md)) != IXL_OK) {
        ixl_md_decoded_free(&md);
        return rc;
    }
    if (expect != NULL && strcmp(md.name, expect) != 0) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_AUTH,
                           "the metadata came from '%s' but describes agent '%s': an agent "
                           "replaces only its own metadata; nothing loaded",
                           expect, md.name);
        ixl_md_decoded_free(&md);
        return rc;
    }
    if (strcmp(md.name, agent->name) == 0) {
        ixl_md_decoded_free(&md);
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "metadata of agent '%s' is this agent's own: transfers to itself "
                             "need no metadata (use its own name as the remote)",
                             agent->name);
    }
    /* Checked before anything is loaded: the call is all or nothing, outputs included. */
    if (name_out != NULL && strlen(md.name) >= name_cap) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_TOO_LARGE,
                           "ixl_md_load: the remote agent's name '%s' needs %zu bytes, name_out "
                           "holds %zu (IXL_NAME_MAX always suffices); nothing loaded",
                           md.name, strlen(md.name) + 1, name_cap);
        ixl_md_decoded_free(&md);
        return rc;
    }

    struct ixl_backend **map = NULL;
    pthread_rwlock_wrlock(&agent->lock);
    struct remote *r = ixl_remote_find(agent, md.name);
    struct remote *fresh = NULL, *old = NULL;
    if (r != NULL && md.incarnation < r->incarnation) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_STALE,
                           "metadata of agent '%s' comes from an older instance (incarnation "
                           "%llx, loaded %llx): ignored",
                           md.name, (unsigned long long)md.incarnation,
                           (unsigned long long)r->incarnation);
        goto unlock;
    }
    if (r == NULL || md.incarnation > r->incarnation) {
        fresh = sys_calloc(1, sizeof(*fresh));
        if (fresh == NULL || (fresh->regs = ixl_registry_create()) == NULL) {
            free(fresh);
            fresh = NULL;
            rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
            goto unlock;
        }
        fresh->agent = agent;
        all_link(agent, fresh);
        snprintf(fresh->name, sizeof(fresh->name), "%s", md.name);
        fresh->incarnation = md.incarnation;
        atomic_init(&fresh->refs, 1);
        atomic_init(&fresh->valid, 1);
        /* A restarted agent: its old entry goes once the new one is loaded (its requests then
         * fail with STALE). */
        old = r;
        r = fresh;
    }

    /* Connection info: each backend both sides have. */
    map = sys_calloc(md.n_backends ? md.n_backends : 1, sizeof(*map));
    size_t common = 0, skipped = 0;
    if (map == NULL) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
        goto drop_fresh;
    }
    for (size_t i = 0; i < md.n_backends; i++) {
        map[i] = local_counterpart(agent, &md.backends[i]);
        if (map[i] == NULL)
            continue;
        common++;
        if (md.backends[i].conn_len == 0)
            continue;
        struct ixl_backend *be = map[i];
        ixl_err_clear(agent->id);
        rc = be->plugin->ops.load_remote_conn_info(be->engine, r->name, md.backends[i].conn,
                                                   md.backends[i].conn_len);
        if (rc != IXL_OK) {
            if (ixl_err_get(agent->id)[0] == '\0')
                IXL_AGENT_ERR(agent, rc, "backend %s refused the connection info of agent '%s': %s",
                              be->plugin->info.name, r->name, ixl_strerror(rc));
            goto drop_fresh;
        }
        r->conn_mask |= 1u << be->slot;
    }
    rc = load_regions(agent, r, &md, map, &skipped);
    if (rc != IXL_OK)
        goto drop_fresh;
    if (old != NULL) {
        ixl_log_write(IXL_LOG_INFO, "agent %s: remote %s restarted; its metadata replaced",
                      agent->name, md.name);
        remote_retire(agent, old, 0);
        old = NULL;
    }
    if (fresh != NULL && (rc = table_add(agent, fresh)) != IXL_OK) {
        IXL_AGENT_ERR(agent, rc, "out of memory");
        goto drop_fresh;
    }
    if (common == 0)
        ixl_log_write(IXL_LOG_WARN,
                      "agent %s: remote %s shares no backend that supports remote transfers; "
                      "no transfer to it is possible",
                      agent->name, md.name);
    else if (skipped)
        ixl_log_write(IXL_LOG_WARN,
                      "agent %s: %zu region(s) of %s skipped: no common backend, or no "
                      "connection info loaded for it yet (send it first, or with the regions)",
                      agent->name, skipped, md.name);
    if (name_out)
        snprintf(name_out, name_cap, "%s", md.name);
    goto unlock;

drop_fresh:
    if (fresh != NULL) {
        /* Backends that took the new connection info no longer reach the old instance: then
         * the old entry cannot stay either. Otherwise it stays as it was. */
        if (old != NULL && fresh->conn_mask != 0)
            remote_retire(agent, old, 0);
        for (unsigned b = 0; b < agent->n_backends; b++)
            if (fresh->conn_mask & (1u << b))
                agent->backends[b]->plugin->ops.disconnect(agent->backends[b]->engine, fresh->name);
        ixl_remote_put(fresh, 1);
    }
unlock:
    pthread_rwlock_unlock(&agent->lock);
    free(map);
    ixl_md_decoded_free(&md);
    if (rc == IXL_OK)
        ixl_agent_wake(agent);
    return rc;
}

ixl_status ixl_remote_invalidate(struct ixl_agent *agent, const char *remote)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (remote == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_remote_invalidate: NULL name");
    pthread_rwlock_wrlock(&agent->lock);
    struct remote *r = ixl_remote_require(agent, remote);
    int rc = IXL_OK;
    if (r == NULL)
        rc = IXL_ERR_NOT_FOUND;
    else
        remote_drop(agent, r);
    pthread_rwlock_unlock(&agent->lock);
    ixl_mdx_fetch_forget(agent, remote); /* a failed fetch's outcome goes with it */
    return rc;
}

int ixl_remote_invalidate_inc(struct ixl_agent *agent, const char *remote, uint64_t incarnation)
{
    if (incarnation == 0) /* never a wildcard: the whole name goes only by ixl_remote_invalidate */
        return IXL_ERR_INVALID_ARG;
    pthread_rwlock_wrlock(&agent->lock);
    struct remote *r = ixl_remote_find(agent, remote);
    int rc = IXL_ERR_NOT_FOUND;
    if (r != NULL && r->incarnation == incarnation) {
        remote_drop(agent, r);
        rc = IXL_OK;
    }
    pthread_rwlock_unlock(&agent->lock);
    if (rc == IXL_OK)
        ixl_mdx_fetch_forget(agent, remote);
    return rc;
}

ixl_status ixl_remote_check(struct ixl_agent *agent, const char *remote,
                            const struct ixl_dlist *descs)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (remote == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_remote_check: NULL name");
    pthread_rwlock_rdlock(&agent->lock);
    struct remote *r = ixl_remote_require(agent, remote);
    int rc = IXL_OK;
    if (r == NULL) {
        rc = IXL_ERR_NOT_FOUND;
    } else if (descs != NULL) {
        for (size_t i = 0; i < descs->n_runs && rc == IXL_OK; i++) {
            const struct ixl_run *run = &descs->runs[i];
            for (uint64_t k = 0; k < run->count && rc == IXL_OK;) {
                uint64_t addr = run->addr + k * run->stride;
                struct region *g = NULL;
                for (unsigned b = 0; b < agent->n_backends && g == NULL; b++)
                    g = ixl_registry_cover(r->regs, descs->type, b, run->dev, addr, run->len);
                if (g == NULL)
                    rc = IXL_AGENT_QUIET(agent, IXL_ERR_NOT_FOUND,
                                         "descriptor %llu is not in a region loaded for '%s'",
                                         (unsigned long long)(descs->first[i] + k), remote);
                else
                    k = ixl_region_last_covered(g, run) + 1;
            }
        }
    }
    pthread_rwlock_unlock(&agent->lock);
    return rc;
}

ixl_status ixl_remote_connect(struct ixl_agent *agent, const char *remote)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (remote == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_remote_connect: NULL name");
    pthread_rwlock_rdlock(&agent->lock);
    struct remote *r = ixl_remote_require(agent, remote);
    int rc = IXL_OK;
    if (r == NULL) {
        rc = IXL_ERR_NOT_FOUND;
    } else {
        for (unsigned b = 0; b < agent->n_backends && rc == IXL_OK; b++) {
            if (!(r->conn_mask & (1u << b)))
                continue;
            struct ixl_backend *be = agent->backends[b];
            ixl_err_clear(agent->id);
            rc = be->plugin->ops.connect(be->engine, remote);
            if (rc == IXL_ERR_NOT_SUPPORTED)
                rc = IXL_OK; /* connects lazily */
            else if (rc != IXL_OK && ixl_err_get(agent->id)[0] == '\0')
                IXL_AGENT_ERR(agent, rc, "backend %s could not connect to '%s': %s",
                              be->plugin->info.name, remote, ixl_strerror(rc));
        }
    }
    pthread_rwlock_unlock(&agent->lock);
    return rc;
}

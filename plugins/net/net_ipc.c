/* NET's VRAM between two agents of one node (issue 20): CUDA IPC, chosen by itself.
 *
 * A request to a peer with VRAM on a side goes here from prep_xfer. The peer must have passed
 * the same-node channel's checks (net_local.c: the kernel's SO_PEERCRED, the loaded name and
 * instance, the same pid as before). For each remote VRAM region the initiator asks that
 * channel, once per peer instance and allocation, for what opening it takes: the legacy IPC
 * handle of a cuMemAlloc allocation, or the POSIX fd of a VMM allocation passed over
 * SCM_RIGHTS. The peer answers only for a region it registered as VRAM, exactly as
 * registered; metadata carries no handle. The allocation is opened (ipc_open / vmm_open) and
 * kept per peer instance; it is closed when the peer is unloaded, restarts or is found gone,
 * once no copy into it is in flight. A DRAM target is reached through its memfd mapping
 * (shm, net_local.c) when it lies in memory of the peer's allocator. Where IPC cannot serve
 * (IXL_ERR_NOT_SUPPORTED: another node, same-node paths off, such a DRAM target, VMM memory
 * without an exportable handle), net_prep_xfer stages the request over TCP instead
 * (net_stage.c) unless path=shm is forced; a refused claim is an error, never a fallback.
 *
 * The copies are net_dev.c's: one asynchronous copy per descriptor on a stream of a local
 * GPU, one event, the stream's completion thread; the notification goes to the peer only
 * after the event (over the peer's TCP notification path). A peer that went away meanwhile
 * fails the request with IXL_ERR_REMOTE_DISCONNECT.
 *
 * Lock: ipc_lock (this file's, a leaf) covers every peer's list of opened allocations, their
 * counts and the requests' holds; opening (a channel round trip and a driver call) is
 * serialized by open_lock, taken with no other lock held.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

/* A peer's device allocation opened in this process. */
struct net_ipc {
    uint64_t instance;   /* the peer instance that exported it */
    uint64_t rbase, len; /* the allocation in the peer's address space */
    void *lbase;         /* and here */
    int kind;            /* 1 legacy IPC, 2 VMM */
    int refs;            /* requests holding it (prep to release) + 1 while listed */
    int inflight;        /* posts whose copies may still run into it */
    bool dead;           /* dropped: closed once inflight is 0 */
    bool closed;
    struct net_ipc *next;
};

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

#define DEVOPS_HAS(d, f) ((d)->size >= offsetof(struct ixl_devops, f) + sizeof((d)->f))

/* ipc_lock held: closes c's mapping when it is dead and idle; frees it when unreferenced. */
static void settle_locked(struct net_engine *e, struct net_ipc *c, struct net_ipc **to_free)
{
    if (c->dead && c->inflight == 0 && !c->closed) {
        const struct ixl_devops *d = e->dev;
        int rc =
            c->kind == 1 ? d->ipc_close(d->ctx, c->lbase) : d->vmm_close(d->ctx, c->lbase, c->len);
        if (rc != IXL_OK)
            e->host->log(e->host->ctx, IXL_LOG_WARN,
                         "NET: closing a peer's device allocation opened at %p failed (status "
                         "%d)",
                         c->lbase, rc);
        c->closed = true;
    }
    if (c->closed && c->refs == 0) {
        c->next = *to_free;
        *to_free = c;
    }
}

static void free_list(struct net_ipc *c)
{
    while (c) {
        struct net_ipc *n = c->next;
        free(c);
        c = n;
    }
}

void net_ipc_drop_peer(struct net_engine *e, struct net_peer *p)
{
    if (e->dev == NULL)
        return;
    struct net_ipc *to_free = NULL;
    pthread_mutex_lock(&ipc_lock);
    struct net_ipc *c = p->ipcs;
    p->ipcs = NULL;
    while (c) {
        struct net_ipc *n = c->next;
        c->dead = true;
        c->refs--; /* the list's */
        settle_locked(e, c, &to_free);
        c = n;
    }
    pthread_mutex_unlock(&ipc_lock);
    free_list(to_free);
}

/* ipc_lock held: the open allocation of instance that is [rbase, +len), or NULL. */
static struct net_ipc *find_locked(struct net_peer *p, uint64_t instance, uint64_t rbase,
                                   uint64_t len)
{
    struct net_ipc *c = p->ipcs;
    while (c && !(c->instance == instance && !c->dead && c->rbase == rbase && c->len == len))
        c = c->next;
    return c;
}

/* The opened allocation of p's current instance holding m's region, with a reference for the
 * caller. Each region is confirmed by the verified peer once per instance (it registered it
 * as VRAM, exactly so), even inside an allocation already open here: a claim for memory it
 * never registered moves nothing. The allocation is opened (on device dev) once. */
static int ipc_get(struct net_engine *e, struct net_peer *p, struct net_rmd *m, int dev,
                   struct net_ipc **out, char *why, size_t wl)
{
    pthread_mutex_lock(&p->lock);
    uint64_t instance = p->instance;
    int confirmed = m->confirmed_instance == instance && m->confirmed == 1;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&open_lock);
    struct net_ipc *c = NULL;
    if (confirmed) {
        pthread_mutex_lock(&ipc_lock);
        for (c = p->ipcs; c; c = c->next)
            if (c->instance == instance && !c->dead && m->addr >= c->rbase && m->len <= c->len &&
                m->addr - c->rbase <= c->len - m->len)
                break;
        if (c)
            c->refs++;
        pthread_mutex_unlock(&ipc_lock);
        if (c) {
            pthread_mutex_unlock(&open_lock);
            *out = c;
            return IXL_OK;
        }
    }
    struct net_vram_ans a = {.fd = -1};
    int rc = net_local_vram(e, m, &a, why, wl);
    if (rc != IXL_OK) {
        pthread_mutex_unlock(&open_lock);
        return rc;
    }
    pthread_mutex_lock(&p->lock);
    m->confirmed = 1;
    m->confirmed_instance = instance;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&ipc_lock);
    c = find_locked(p, instance, a.base, a.len);
    if (c)
        c->refs++;
    pthread_mutex_unlock(&ipc_lock);
    if (c) { /* another region of an allocation open here */
        if (a.fd >= 0)
            net_sys()->close(a.fd);
        pthread_mutex_unlock(&open_lock);
        *out = c;
        return IXL_OK;
    }
    const struct ixl_devops *d = e->dev;
    void *lbase = NULL;
    if (a.kind == 1) {
        rc = d->ipc_open(d->ctx, dev, &a.h, &lbase);
    } else if (!DEVOPS_HAS(d, vmm_close)) {
        rc = IXL_ERR_NOT_SUPPORTED;
    } else {
        rc = d->vmm_open(d->ctx, dev, a.fd, a.len, &lbase);
    }
    if (a.fd >= 0)
        net_sys()->close(a.fd);
    if (rc != IXL_OK) {
        pthread_mutex_unlock(&open_lock);
        snprintf(why, wl,
                 "opening its %s of VRAM region 0x%" PRIx64 "+%" PRIu64
                 " failed (status %d; the device layer logged the driver's error)",
                 a.kind == 1 ? "IPC handle" : "VMM file descriptor", m->addr, m->len, rc);
        return IXL_ERR_REMOTE_REFUSED;
    }
    c = net_sys()->calloc(1, sizeof(*c));
    if (c == NULL) {
        if (a.kind == 1)
            d->ipc_close(d->ctx, lbase);
        else
            d->vmm_close(d->ctx, lbase, a.len);
        pthread_mutex_unlock(&open_lock);
        snprintf(why, wl, "out of memory");
        return IXL_ERR_NO_MEMORY;
    }
    *c = (struct net_ipc){.instance = instance,
                          .rbase = a.base,
                          .len = a.len,
                          .lbase = lbase,
                          .kind = a.kind,
                          .refs = 2};
    pthread_mutex_lock(&p->lock);
    bool current = p->instance == instance && p->loaded;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&ipc_lock);
    if (current) {
        c->next = p->ipcs;
        p->ipcs = c;
    } else {
        c->dead = true; /* the peer changed meanwhile: closed with the request */
        c->refs = 1;
    }
    pthread_mutex_unlock(&ipc_lock);
    pthread_mutex_unlock(&open_lock);
    *out = c;
    return IXL_OK;
}

/* net_ipc_route's per-call memo: region m's allocation c, and the descriptors that found it
 * here (the first took its reference in ipc_get; the others' are added in one go when the
 * entry leaves the memo, as one entry of r->ipc). */
#define IPC_MEMO 64
struct ipc_memo {
    struct net_rmd *m;
    struct net_ipc *c;
    size_t descs;
};

/* Entry h into r->ipc (which has room for one entry per descriptor: each entry stands for
 * at least one). */
static void memo_flush(struct net_req *r, struct ipc_memo *h)
{
    if (h->descs == 0)
        return;
    if (h->descs > 1) {
        pthread_mutex_lock(&ipc_lock);
        h->c->refs += (int)(h->descs - 1);
        pthread_mutex_unlock(&ipc_lock);
    }
    r->ipc[r->n_ipc++] = (struct net_ipc_use){h->c, h->descs};
    h->descs = 0;
    h->m = NULL;
}

static void memo_flush_all(struct net_req *r, struct ipc_memo *memo)
{
    for (size_t k = 0; k < IPC_MEMO; k++)
        memo_flush(r, &memo[k]);
}

int net_ipc_route(struct net_engine *e, struct net_req *r, struct net_peer *p, bool lv, bool rv)
{
    char why[400] = "";
    const char *side = lv && rv ? "both sides" : lv ? "local side" : "remote side";
    if (e->force_path == NET_PATH_TCP || e->force_path == NET_PATH_CMA)
        return net_error(e, IXL_ERR_NOT_SUPPORTED,
                         "NET: path=%s is forced: VRAM (%s) to '%s' does not go through CUDA IPC",
                         e->force_path == NET_PATH_TCP ? "tcp" : "cma", side, p->name);
    pthread_mutex_lock(&p->lock);
    int allows = p->peer_allows_local;
    pthread_mutex_unlock(&p->lock);
    const struct net_region *lg = (const struct net_region *)r->ld[0].md;
    if (lg == NULL || lg->magic != NET_REGION_MAGIC || lg->vram != lv)
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "NET: descriptor 0's metadata does not match the request's memory types");
    /* r->ipc: room for one entry per descriptor (a few are used: the pages beyond are never
     * touched). */
    r->dev_tgt = net_sys()->malloc((r->n ? r->n : 1) * sizeof(*r->dev_tgt));
    r->ipc = net_sys()->malloc((r->n ? r->n : 1) * sizeof(*r->ipc));
    r->n_ipc = 0;
    if (r->dev_tgt == NULL || r->ipc == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    int rc = allows ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
    if (!allows)
        snprintf(why, sizeof(why), "the peer switched its same-node paths off");
    /* The local GPU whose streams carry it: the local VRAM's; else the target's ordinal when
     * this process has it, else GPU 0 (an imported allocation is usable from any context). */
    int dev = lv ? lg->dev : 0;
    struct ipc_memo memo[IPC_MEMO] = {{0}};
    bool same = true;
    /* The request's only pass over its targets (net_prep_xfer leaves them to this one): each
     * descriptor's metadata, the bytes, the region bounds. */
    r->bytes = 0;
    for (size_t i = 0; i < r->n && rc == IXL_OK; i++) {
        struct net_rmd *m = (struct net_rmd *)r->rd[i].md;
        if (m == NULL || m->magic != NET_RMD_MAGIC) {
            memo_flush_all(r, memo);
            return net_error(e, IXL_ERR_INVALID_ARG, "NET: descriptor %zu has no target metadata",
                             i);
        }
        r->bytes += r->ld[i].len;
        if (m->peer != p || m->vram != rv || r->rd[i].addr < m->addr || r->rd[i].len > m->len ||
            r->rd[i].addr - m->addr > m->len - r->rd[i].len) {
            snprintf(why, sizeof(why), "descriptor %zu lies outside its region", i);
            rc = IXL_ERR_INVALID_ARG;
            break;
        }
        if (!rv) {
            /* A DRAM target: only through the memfd the verified peer passed (shm). */
            char *map = net_rmd_map(m, why, sizeof(why));
            if (map == NULL) {
                rc = IXL_ERR_NOT_SUPPORTED;
                break;
            }
            r->dev_tgt[i] = (uint64_t)(uintptr_t)(map + m->map_off + (r->rd[i].addr - m->addr));
            continue;
        }
        /* A request's descriptors fall in few regions: the region's allocation is looked up
         * (three locks) once per region of this call, later hits only count a reference. */
        struct ipc_memo *h = &memo[((uintptr_t)m >> 4) % IPC_MEMO];
        struct net_ipc *c = NULL;
        if (h->m == m) {
            c = h->c;
            h->descs++;
        } else {
            rc = ipc_get(e, p, m, dev, &c, why, sizeof(why));
            if (rc != IXL_OK)
                break;
            memo_flush(r, h);
            *h = (struct ipc_memo){m, c, 1};
        }
        r->dev_tgt[i] = (uint64_t)(uintptr_t)c->lbase + (r->rd[i].addr - c->rbase);
        /* The kernel path needs every local region on dev (below). */
        const struct net_region *l = (const struct net_region *)r->ld[i].md;
        same = same && l != NULL && l->magic == NET_REGION_MAGIC && l->vram && l->dev == dev;
    }
    memo_flush_all(r, memo);
    if (rc != IXL_OK)
        return net_error(e, rc, "NET: VRAM (%s) between '%s' and '%s' cannot use CUDA IPC: %s%s",
                         side, e->name, p->name, why,
                         rc == IXL_ERR_NOT_SUPPORTED && e->force_path == NET_PATH_SHM
                             ? " (path=shm is forced; with path auto or tcp it moves over TCP "
                               "through pinned staging)"
                             : "");
    bool src_dev = r->op == IXL_OP_WRITE ? lv : rv, dst_dev = r->op == IXL_OP_WRITE ? rv : lv;
    r->dev = true;
    r->dev_ord = dev;
    r->dev_dir = src_dev && dst_dev ? NET_DIR_D2D : src_dev ? NET_DIR_D2H : NET_DIR_H2D;
    /* The peer's allocations are mapped for GPU dev (with peer access where they live on
     * another): a kernel on dev reaches them; the local regions must lie on dev too. */
    r->dev_same = r->dev_dir == NET_DIR_D2D && same;
    r->path = NET_PATH_SHM; /* a same-node path: the peer's liveness is checked at post */
    r->dev_path = rv ? "cuda-ipc" : "cuda-shm";
    return IXL_OK;
}

int net_ipc_hold(struct net_engine *e, struct net_req *r)
{
    if (r->ipc == NULL)
        return IXL_OK;
    int stale = 0;
    pthread_mutex_lock(&ipc_lock);
    for (size_t i = 0; i < r->n_ipc && !stale; i++)
        stale = r->ipc[i].c->dead;
    if (!stale && !r->ipc_held) {
        for (size_t i = 0; i < r->n_ipc; i++)
            r->ipc[i].c->inflight += (int)r->ipc[i].descs;
        r->ipc_held = true;
    }
    pthread_mutex_unlock(&ipc_lock);
    if (stale)
        return net_error(e, IXL_ERR_REMOTE_DISCONNECT,
                         "NET: '%s' restarted, was unloaded or exited since the request was "
                         "created: its device memory was closed here; create the request again",
                         r->peer->name);
    return IXL_OK;
}

void net_ipc_unhold(struct net_req *r)
{
    if (r->ipc == NULL)
        return;
    struct net_ipc *to_free = NULL;
    pthread_mutex_lock(&ipc_lock);
    if (r->ipc_held) {
        r->ipc_held = false;
        for (size_t i = 0; i < r->n_ipc; i++) {
            r->ipc[i].c->inflight -= (int)r->ipc[i].descs;
            settle_locked(r->e, r->ipc[i].c, &to_free);
        }
    }
    pthread_mutex_unlock(&ipc_lock);
    free_list(to_free);
}

int net_ipc_done(struct net_engine *e, struct net_req *r, int rc, char *why, size_t wl)
{
    struct net_peer *p = r->peer;
    pthread_mutex_lock(&p->lock);
    int same = p->instance == r->instance && p->loaded;
    pthread_mutex_unlock(&p->lock);
    if (same && !net_peer_alive(p))
        same = 0;
    if (!same) {
        net_ipc_unhold(r);
        net_ipc_drop_peer(e, p);
        snprintf(why, wl,
                 "NET: '%s' exited, restarted or was unloaded while the request's device copies "
                 "ran; its device memory was closed here",
                 p->name);
        return IXL_ERR_REMOTE_DISCONNECT;
    }
    net_ipc_unhold(r);
    if (rc != IXL_OK)
        snprintf(why, wl,
                 "NET: a device copy of the request to '%s' failed (the device layer logged the "
                 "driver's error)",
                 p->name);
    return rc == IXL_OK ? IXL_OK : IXL_ERR_BACKEND;
}

void net_ipc_req_free(struct net_req *r)
{
    if (r->ipc != NULL) {
        net_ipc_unhold(r);
        struct net_ipc *to_free = NULL; /* every reference dropped under one hold of the lock */
        pthread_mutex_lock(&ipc_lock);
        for (size_t i = 0; i < r->n_ipc; i++) {
            r->ipc[i].c->refs -= (int)r->ipc[i].descs;
            settle_locked(r->e, r->ipc[i].c, &to_free);
        }
        pthread_mutex_unlock(&ipc_lock);
        free_list(to_free);
    }
    free(r->ipc);
    free(r->dev_tgt);
    r->ipc = NULL;
    r->n_ipc = 0;
    r->dev_tgt = NULL;
}

/* NET's staged VRAM over TCP ("tcp-staged", issue 20): VRAM between agents that no same-node
 * path serves moves through pinned host slots of NET_STAGE_FRAME bytes, one pool per peer,
 * at most stage_bytes each (pinned once with host->dev->host_pin and reused).
 *
 * Initiator (its local side VRAM): every chunk of a request takes a slot of the peer's pool;
 * a WRITE copies the chunk device-to-slot, and its frame is queued once that copy's event is
 * done, sent from the slot, and the slot is free again once it is on the socket; a READ
 * queues its frame with the slot, the answer is received into the slot and copied
 * slot-to-device, and the chunk is done once that copy's event is. The copies of later chunks
 * run while earlier ones are on the network (the pipeline); a request beyond the pool waits
 * in the pool's queue for slots, never allocating more.
 *
 * Target (its region VRAM): a WRITE frame is received into a slot of the sender's pool,
 * copied slot-to-device, and answered only after that copy's event (so the initiator's
 * completion and notification keep their meaning); a READ frame's bytes are copied
 * device-to-slot and sent once that copy's event is done. A frame that finds no free slot
 * waits at its header (its connection is not read) until one comes free.
 *
 * Ownership of an initiator's slot: the request, recorded in chunks[k].slot under reqs_lock;
 * whoever clears that record gives the slot back (the frame sent, the copy done, a failure,
 * or net_stage_sweep once nothing touches the request: busy 0 and not running).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

struct net_spool {
    struct net_engine *e;
    struct net_peer *peer; /* initiator pools: whose waiting requests slots go to */
    pthread_mutex_t lock;
    int refs; /* the owner and every slot out */
    size_t max, made;
    struct net_slot *free, *all;
    bool want; /* target: a connection waits for a slot */
    /* initiator: serials of posted requests with chunks not started, in post order */
    uint64_t *wait;
    size_t wait_head, wait_len, wait_cap;
    bool pumping, again;
};

struct net_spool *net_spool_new(struct net_engine *e, struct net_peer *p)
{
    struct net_spool *pool = net_sys()->calloc(1, sizeof(*pool));
    if (pool == NULL)
        return NULL;
    pool->e = e;
    pool->peer = p;
    pool->refs = 1;
    pool->max = e->stage_bytes / NET_STAGE_FRAME;
    if (pool->max < 2)
        pool->max = 2;
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

static void pool_free(struct net_spool *pool)
{
    const struct ixl_devops *d = pool->e->dev;
    while (pool->all) {
        struct net_slot *s = pool->all;
        pool->all = s->anext;
        if (s->pinned)
            d->host_unpin(d->ctx, s->buf);
        free(s->buf);
        free(s);
    }
    free(pool->wait);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

void net_spool_unref(struct net_spool *pool)
{
    if (pool == NULL)
        return;
    pthread_mutex_lock(&pool->lock);
    bool last = --pool->refs == 0;
    pthread_mutex_unlock(&pool->lock);
    if (last)
        pool_free(pool);
}

/* A free slot, or a new one while the pool is below its bound (pool->lock held). */
static struct net_slot *slot_take(struct net_spool *pool)
{
    struct net_slot *s = pool->free;
    if (s != NULL) {
        pool->free = s->next;
    } else if (pool->made < pool->max) {
        s = net_sys()->calloc(1, sizeof(*s));
        void *buf = NULL;
        if (s == NULL || net_sys()->posix_memalign(&buf, 4096, NET_STAGE_FRAME) != 0) {
            free(s);
            return NULL;
        }
        s->buf = buf;
        s->pool = pool;
        const struct ixl_devops *d = pool->e->dev;
        /* Pinned once for the slot's life: copies from pinned memory are asynchronous and run
         * at the copy engines' speed. Unpinned memory still works (the driver stages it). */
        int rc = d->host_pin(d->ctx, buf, NET_STAGE_FRAME);
        s->pinned = rc == IXL_OK;
        if (rc != IXL_OK && rc != IXL_ERR_EXISTS && pool->made == 0)
            pool->e->host->log(pool->e->host->ctx, IXL_LOG_WARN,
                               "NET: cannot pin a staging slot (status %d); staged VRAM copies "
                               "run from pageable memory (slower)",
                               rc);
        s->anext = pool->all;
        pool->all = s;
        pool->made++;
    }
    if (s != NULL) {
        s->next = NULL;
        pool->refs++;
    }
    return s;
}

struct net_slot *net_slot_get(struct net_spool *pool)
{
    pthread_mutex_lock(&pool->lock);
    struct net_slot *s = slot_take(pool);
    if (s == NULL)
        pool->want = true;
    pthread_mutex_unlock(&pool->lock);
    return s;
}

static void pump(struct net_spool *pool);

void net_slot_put(struct net_slot *s)
{
    struct net_spool *pool = s->pool;
    pthread_mutex_lock(&pool->lock);
    s->r = NULL;
    s->next = pool->free;
    pool->free = s;
    bool want = pool->want;
    pool->want = false;
    bool initiator = pool->peer != NULL && pool->wait_len > 0;
    pthread_mutex_unlock(&pool->lock);
    if (want)
        net_loops_stage_kick(pool->e);
    if (initiator)
        pump(pool);
    net_spool_unref(pool); /* the slot's reference */
}

/* ---- the target's side: answers gated by their device copies ------------------------------ */

struct net_sgate *net_sgate_new(struct net_loop *l, struct net_slot *s, struct net_region *g,
                                uint64_t addr, uint64_t len)
{
    struct net_sgate *gt = net_sys()->calloc(1, sizeof(*gt));
    if (gt == NULL)
        return NULL;
    atomic_store(&gt->refs, 2);
    atomic_store(&gt->state, IXL_IN_PROGRESS);
    gt->e = l->e;
    gt->slot = s;
    gt->region = g;
    atomic_fetch_add(&g->inflight, 1); /* a deregistration waits for the copy */
    gt->loop = l;
    gt->addr = addr;
    gt->len = len;
    return gt;
}

void net_sgate_put(struct net_sgate *gt)
{
    if (atomic_fetch_sub(&gt->refs, 1) != 1)
        return;
    atomic_fetch_sub(&gt->region->inflight, 1);
    net_slot_put(gt->slot);
    free(gt);
}

static void gate_done(void *arg, int status)
{
    struct net_sgate *gt = arg;
    if (status != IXL_OK)
        gt->e->host->log(gt->e->host->ctx, IXL_LOG_ERROR,
                         "NET: a staged device copy of %" PRIu64 " bytes at 0x%" PRIx64
                         " failed; the peer's frame is answered with an error",
                         gt->len, gt->addr);
    atomic_store(&gt->state, status);
    net_loop_kick(gt->loop);
    net_sgate_put(gt);
}

void net_sgate_copy(struct net_sgate *gt, bool to_dev)
{
    char why[200];
    void *dev = (void *)(uintptr_t)gt->addr;
    int rc = net_dev_copy_async(gt->e, gt->region->dev, to_dev ? NET_DIR_H2D : NET_DIR_D2H,
                                to_dev ? dev : gt->slot->buf, to_dev ? gt->slot->buf : dev,
                                (size_t)gt->len, gate_done, gt, why, sizeof(why));
    if (rc != IXL_OK) {
        gt->e->host->log(gt->e->host->ctx, IXL_LOG_ERROR, "%s", why);
        atomic_store(&gt->state, IXL_ERR_BACKEND);
        net_sgate_put(gt); /* the copy's reference */
    }
}

/* ---- the initiator's side ------------------------------------------------------------------ */

int net_stage_prep(struct net_engine *e, struct net_req *r, bool lv, bool rv)
{
    (void)rv;
    for (size_t i = 0; i < r->n; i++) {
        const struct net_region *g = (const struct net_region *)r->ld[i].md;
        if (g == NULL || g->magic != NET_REGION_MAGIC || g->vram != lv)
            return net_error(e, IXL_ERR_INVALID_ARG,
                             "NET: descriptor %zu's local metadata does not match the request's "
                             "memory type",
                             i);
    }
    r->stage = true;
    r->stage_local = lv;
    return IXL_OK;
}

/* Takes back the slot of chunk k of r if r still records it (the caller gives it back). */
static struct net_slot *take_slot(struct net_engine *e, struct net_req *r, uint32_t k)
{
    pthread_mutex_lock(&e->reqs_lock);
    struct net_slot *s = k < r->n_chunks ? r->chunks[k].slot : NULL;
    if (s != NULL)
        r->chunks[k].slot = NULL;
    pthread_mutex_unlock(&e->reqs_lock);
    return s;
}

/* Chunk k of r (busy held by the caller's work, dropped here) ended with status. */
static void chunk_end(struct net_engine *e, struct net_req *r, uint64_t serial, uint32_t k,
                      int status, const char *why)
{
    struct net_slot *s = take_slot(e, r, k);
    struct net_peer *p = r->peer;
    if (s != NULL)
        net_slot_put(s);
    net_req_unbusy(e, r);
    if (net_req_part_done(e, serial, status, why) == 1)
        net_peer_submit_notif(p, serial);
}

/* A WRITE chunk's copy into its slot ended (stream thread): its frame goes. */
static void write_copied(void *arg, int status)
{
    struct net_slot *s = arg;
    struct net_req *r = s->r;
    struct net_engine *e = r->e;
    uint64_t serial = s->serial;
    uint32_t k = s->chunk;
    if (status != IXL_OK) {
        chunk_end(e, r, serial, k, IXL_ERR_BACKEND,
                  "NET: a device copy of the request's VRAM into a staging slot failed (the "
                  "device layer logged the driver's error)");
        return;
    }
    if (net_peer_submit_frame(r->peer, r, serial, k) != IXL_OK) {
        chunk_end(e, r, serial, k, IXL_ERR_REMOTE_DISCONNECT,
                  "NET: the connection the request was posted on went down while it was "
                  "staged");
        return;
    }
    net_req_unbusy(e, r);
}

/* A READ chunk's copy from its slot into VRAM ended (stream thread): the chunk is done. */
static void read_copied(void *arg, int status)
{
    struct net_slot *s = arg;
    struct net_req *r = s->r;
    chunk_end(r->e, r, s->serial, s->chunk, status == IXL_OK ? IXL_OK : IXL_ERR_BACKEND,
              status == IXL_OK ? NULL
                               : "NET: a device copy from a staging slot into the request's "
                                 "VRAM failed (the device layer logged the driver's error)");
}

/* Starts chunk k of r in slot s (busy held, dropped by what follows). */
static void chunk_start(struct net_spool *pool, struct net_req *r, uint64_t serial, uint32_t k,
                        struct net_slot *s)
{
    struct net_engine *e = pool->e;
    s->r = r;
    s->serial = serial;
    s->chunk = k;
    const struct net_chunk *ch = &r->chunks[k];
    if (r->op == IXL_OP_WRITE) {
        char why[200];
        int rc =
            net_dev_copy_async(e, ch->dev, NET_DIR_D2H, s->buf, (const void *)(uintptr_t)ch->laddr,
                               (size_t)ch->len, write_copied, s, why, sizeof(why));
        if (rc != IXL_OK)
            chunk_end(e, r, serial, k, rc, why);
        return;
    }
    if (net_peer_submit_frame(r->peer, r, serial, k) != IXL_OK) {
        chunk_end(e, r, serial, k, IXL_ERR_REMOTE_DISCONNECT,
                  "NET: the connection the request was posted on went down while it was "
                  "staged");
        return;
    }
    net_req_unbusy(e, r);
}

/* Gives free slots to the waiting requests' next chunks, in post order. One thread pumps at
 * a time; a call meanwhile makes it go round again. */
static void pump(struct net_spool *pool)
{
    struct net_engine *e = pool->e;
    pthread_mutex_lock(&pool->lock);
    if (pool->pumping) {
        pool->again = true;
        pthread_mutex_unlock(&pool->lock);
        return;
    }
    pool->pumping = true;
    for (;;) {
        pool->again = false;
        struct net_req *r = NULL;
        struct net_slot *s = NULL;
        uint64_t serial = 0;
        uint32_t k = 0;
        while (pool->wait_len > 0 && !atomic_load(&e->stopping)) {
            s = slot_take(pool);
            if (s == NULL)
                break;
            serial = pool->wait[pool->wait_head];
            pthread_mutex_lock(&e->reqs_lock);
            r = net_req_find(e, serial);
            bool go =
                r != NULL && r->state == NR_RUNNING && !r->canceled && r->stage_next < r->n_chunks;
            if (go) {
                k = r->stage_next++;
                r->chunks[k].slot = s;
                r->busy++;
            }
            bool last = !go || r->stage_next == r->n_chunks;
            pthread_mutex_unlock(&e->reqs_lock);
            if (last) {
                pool->wait_head = (pool->wait_head + 1) % pool->wait_cap;
                pool->wait_len--;
            }
            if (go)
                break;
            /* not startable: the slot goes back */
            s->next = pool->free;
            pool->free = s;
            pool->refs--;
            s = NULL;
            r = NULL;
        }
        if (r == NULL) {
            if (!pool->again)
                break;
            continue;
        }
        pthread_mutex_unlock(&pool->lock);
        chunk_start(pool, r, serial, k, s);
        pthread_mutex_lock(&pool->lock);
    }
    pool->pumping = false;
    pthread_mutex_unlock(&pool->lock);
}

int net_stage_start(struct net_engine *e, struct net_req *r, uint64_t serial)
{
    struct net_peer *p = r->peer;
    pthread_mutex_lock(&p->lock);
    if (p->stage == NULL)
        p->stage = net_spool_new(e, p);
    struct net_spool *pool = p->stage;
    /* The generation the chunks go to: one torn down meanwhile fails the request. */
    pthread_mutex_lock(&e->reqs_lock);
    r->gen = p->gen;
    pthread_mutex_unlock(&e->reqs_lock);
    pthread_mutex_unlock(&p->lock);
    if (pool == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "NET: out of memory for a staging pool");
    pthread_mutex_lock(&pool->lock);
    if (pool->wait_len == pool->wait_cap) {
        size_t cap = pool->wait_cap ? pool->wait_cap * 2 : 16;
        uint64_t *w = net_sys()->malloc(cap * sizeof(*w));
        if (w == NULL) {
            pthread_mutex_unlock(&pool->lock);
            return net_error(e, IXL_ERR_NO_MEMORY, "NET: out of memory queueing a staged post");
        }
        for (size_t i = 0; i < pool->wait_len; i++)
            w[i] = pool->wait[(pool->wait_head + i) % pool->wait_cap];
        free(pool->wait);
        pool->wait = w;
        pool->wait_cap = cap;
        pool->wait_head = 0;
    }
    pool->wait[(pool->wait_head + pool->wait_len++) % pool->wait_cap] = serial;
    pthread_mutex_unlock(&pool->lock);
    pump(pool);
    return IXL_OK;
}

void net_stage_sent(struct net_engine *e, struct net_req *r, uint32_t k)
{
    struct net_slot *s = take_slot(e, r, k);
    if (s != NULL)
        net_slot_put(s);
}

int net_stage_answer(struct net_engine *e, struct net_peer *p, const struct net_hdr *h)
{
    (void)p;
    if (h->op != NET_READ_DATA)
        return 0;
    struct net_req *r = net_req_get_busy(e, h->req);
    if (r == NULL)
        return 1; /* released or failed meanwhile: the sweep takes its slots back */
    if (!r->stage_local) {
        net_req_unbusy(e, r);
        return 0;
    }
    uint32_t k = h->chunk;
    if (h->status != 0) {
        char why[NET_WHY];
        snprintf(why, sizeof(why), "NET: '%s' refused frame %u of the READ (%s)", r->peer->name, k,
                 h->status == IXL_ERR_BACKEND ? "a device copy at the target failed"
                                              : "outside its registered regions or a wrong key");
        chunk_end(e, r, h->req, k,
                  h->status == IXL_ERR_BACKEND ? IXL_ERR_BACKEND : IXL_ERR_REMOTE_REFUSED, why);
        return 1;
    }
    pthread_mutex_lock(&e->reqs_lock);
    struct net_slot *s = r->chunks[k].slot;
    pthread_mutex_unlock(&e->reqs_lock);
    if (s == NULL) { /* cannot be: the frame was queued with its slot */
        chunk_end(e, r, h->req, k, IXL_ERR_BACKEND, "NET: a staged READ lost its slot");
        return 1;
    }
    const struct net_chunk *ch = &r->chunks[k];
    char why[200];
    int rc = net_dev_copy_async(e, ch->dev, NET_DIR_H2D, (void *)(uintptr_t)ch->laddr, s->buf,
                                (size_t)ch->len, read_copied, s, why, sizeof(why));
    if (rc != IXL_OK)
        chunk_end(e, r, h->req, k, rc, why);
    return 1;
}

void net_stage_sweep(struct net_engine *e, struct net_req *r)
{
    if (!r->stage_local || r->chunks == NULL)
        return;
    for (uint32_t k = 0; k < r->n_chunks; k++) {
        struct net_slot *s = take_slot(e, r, k);
        if (s != NULL)
            net_slot_put(s);
    }
}

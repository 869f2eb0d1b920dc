/* NET's device memory: VRAM within the agent through the process's device layer (host->dev,
 * ixl_plugin.h). Registration classifies the pointer; a request within the agent with VRAM on
 * a side enqueues one asynchronous copy per descriptor on a stream of its GPU, records one
 * event after them, and hands the event to its stream's completion thread, which waits for it
 * and only then completes the request (and queues its notification). A device pointer never
 * reaches memmove, process_vm_*, sendmsg or a mapping: VRAM regions stay out of the key table.
 * Requests between agents of one node run here too, into the peer's device allocations opened
 * through CUDA IPC or its mapped memfd (net_ipc.c chooses; r->dev_tgt says where).
 *
 * Streams: NET_DIRS per GPU (device to device, host to device, device to host, so the copy
 * engines of both directions overlap), each created on first use together with its completion
 * thread. Posts come from any application thread and a stream has one owner at a time, so each
 * stream has a mutex that covers a request's copies, its event's record and the event's place
 * in the stream's completion queue: the queue is in the stream's order, and the thread, waiting
 * for one event after the other, never waits behind work that completes later (completion
 * threads are per stream, so a long copy in one direction delays no other stream). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

/* One stream of one GPU and direction, with the completion thread of its events. */
struct net_dstream {
    struct net_engine *e;
    int ord;
    pthread_mutex_t lock;     /* the stream's owner: a request's copies and its event's record */
    struct ixl_dev_stream *s; /* NULL until first used (or after a failed copy) */
    /* Events recorded on the stream, in record order (pushed under lock, so the order is the
     * stream's); the thread waits for each in turn: a stream runs in order, so no event
     * waits behind one that completes later. */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct net_dwait *head, *tail;
    bool stop;
    bool started; /* the thread runs (started with the stream, under lock) */
    pthread_t thread;
    /* A request's copies for copy_batch (under lock), grown to the largest request posted. */
    struct ixl_dev_copy *cv;
    size_t cv_cap;
};

/* An event the completion thread waits for: request serial's device work. A request's event
 * may also be polled by a caller waiting for the request (net_dev_watch): whichever sees it
 * done first claims the completion (under e->reqs_lock, clearing r->dw), and the event goes
 * with the last reference. */
struct net_dwait {
    uint64_t serial;
    struct net_req *r; /* busy held until the event is done */
    struct ixl_dev_event *ev;
    struct ixl_dev_stream *s; /* the stream it was recorded on */
    /* A staged copy (net_stage.c): done(arg, status) is called instead of completing r. */
    void (*done)(void *arg, int status);
    void *arg;
    int refs;     /* e->reqs_lock: the completion thread's, and a watching caller's */
    bool claimed; /* e->reqs_lock: the request's completion was taken */
    struct net_dwait *next;
};

static void *dstream_main(void *arg);

/* A request's copies go to copy_batch in batches of NET_DEV_BATCH_FIRST, twice that, ... up
 * to NET_DEV_BATCH_MAX copies (net_dev_post). On an H200 (docs/benchmarks.md, "Real GPU,
 * fourth pass"), post + transfer of a random 32,768-copy READ took 0.99-1.02 ms with caps of
 * 2,048 to 8,192 and 1.21 ms with 16,384 (medians of 3 rounds): the device idled while the
 * last large batch was filled. Both may be set at build time (-D) to measure others. */
#ifndef NET_DEV_BATCH_FIRST
#define NET_DEV_BATCH_FIRST 1024u
#endif
#ifndef NET_DEV_BATCH_MAX
#define NET_DEV_BATCH_MAX 8192u
#endif

/* Where the device layer has copy_cols (ABI 2.7), a batch is handed over as the request's own
 * arrays (local descriptors, target addresses), read once as the layer fills its tables; else
 * NET builds an ixl_dev_copy array for copy_batch first. 0 at build time (-D) builds the array
 * always, to measure the difference. */
#ifndef NET_DEV_COLS
#define NET_DEV_COLS 1
#endif

/* The devops methods NET calls, all within the first generation of struct ixl_devops. */
#define DEVOPS_COVERS(d, f) ((d)->size >= offsetof(struct ixl_devops, f) + sizeof((d)->f))

int net_dev_init(struct net_engine *e)
{
    const struct ixl_host *h = e->host;
    e->dev = NULL;
    if (h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev) || h->dev == NULL ||
        !DEVOPS_COVERS(h->dev, event_destroy)) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: %s",
                 h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev)
                     ? "the core has no device layer (a host older than plugin ABI 2.2)"
                     : "the core's device layer is missing or too old");
        return IXL_OK;
    }
    const struct ixl_devops *d = h->dev;
    char why[200] = "";
    int n = d->count(d->ctx, why, sizeof(why));
    if (n <= 0) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: %s",
                 n == 0   ? "no GPU: the driver reports 0 devices"
                 : why[0] ? why
                          : "the device layer cannot say whether there is a GPU");
        return IXL_OK;
    }
    e->dstreams = net_sys()->calloc((size_t)n * NET_DIRS, sizeof(*e->dstreams));
    if (e->dstreams == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n * NET_DIRS; i++) {
        struct net_dstream *ds = &e->dstreams[i];
        ds->e = e;
        ds->ord = i / NET_DIRS;
        pthread_mutex_init(&ds->lock, NULL);
        pthread_mutex_init(&ds->qlock, NULL);
        pthread_cond_init(&ds->qcond, NULL);
    }
    e->n_devs = n;
    e->dev = d;
    return IXL_OK;
}

void net_dev_stop(struct net_engine *e)
{
    if (e->dstreams == NULL)
        return;
    for (int i = 0; i < e->n_devs * NET_DIRS; i++) {
        struct net_dstream *ds = &e->dstreams[i];
        if (ds->started) { /* it still waits for every queued event first */
            pthread_mutex_lock(&ds->qlock);
            ds->stop = true;
            pthread_cond_broadcast(&ds->qcond);
            pthread_mutex_unlock(&ds->qlock);
            pthread_join(ds->thread, NULL);
        }
        if (ds->s != NULL)
            e->host->dev->stream_destroy(e->host->dev->ctx, ds->s);
        pthread_cond_destroy(&ds->qcond);
        pthread_mutex_destroy(&ds->qlock);
        pthread_mutex_destroy(&ds->lock);
        free(ds->cv);
    }
    free(e->dstreams);
    e->dstreams = NULL;
}

int net_dev_region(struct net_engine *e, const struct ixl_reg_desc *d, struct net_region *g)
{
    if (e->dev == NULL)
        return net_error(e, IXL_ERR_BAD_MEM_TYPE, "NET cannot register VRAM here: %s", e->mem_why);
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    char why[256] = "";
    int rc = e->dev->classify(e->dev->ctx, (const void *)(uintptr_t)d->addr, (size_t)d->len, &p,
                              why, sizeof(why));
    if (rc != IXL_OK)
        return net_error(e, rc, "NET: VRAM region 0x%" PRIx64 "+%" PRIu64 ": %s", d->addr, d->len,
                         why[0] ? why : "the device layer cannot classify it");
    if (p.ordinal < 0)
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "NET: VRAM region 0x%" PRIx64 "+%" PRIu64
                         " is not device memory (register host memory as DRAM)",
                         d->addr, d->len);
    if ((uint64_t)p.ordinal != d->dev || p.ordinal >= e->n_devs)
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "NET: VRAM region 0x%" PRIx64 "+%" PRIu64
                         " is memory of GPU %d, registered as GPU %" PRIu64,
                         d->addr, d->len, (int)p.ordinal, d->dev);
    g->vram = true;
    g->dev = p.ordinal;
    g->dev_base = p.base;
    g->dev_buffer = p.buffer_id;
    return IXL_OK;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* The stream of ds, created on first use, and its completion thread with the first stream;
 * ds->lock held by the caller. */
static int stream_get(struct net_engine *e, struct net_dstream *ds, struct ixl_dev_stream **out,
                      char *why, size_t why_len)
{
    if (!ds->started) {
        int te = net_sys()->pthread_create(&ds->thread, NULL, dstream_main, ds);
        if (te != 0) {
            snprintf(why, why_len,
                     "NET: cannot start a device completion thread: pthread_create: %s",
                     strerror(te));
            return IXL_ERR_SYSTEM;
        }
        pthread_setname_np(ds->thread, "ixl-net-dev");
        ds->started = true;
    }
    if (ds->s == NULL) {
        int rc = e->dev->stream_create(e->dev->ctx, ds->ord, &ds->s);
        if (rc != IXL_OK) {
            ds->s = NULL;
            snprintf(why, why_len, "NET: cannot create a stream on GPU %d (status %d)", ds->ord,
                     rc);
            return rc;
        }
    }
    *out = ds->s;
    return IXL_OK;
}

int net_dev_post(struct net_engine *e, struct net_req *r, uint64_t serial, char *why,
                 size_t why_len)
{
    const struct ixl_devops *d = e->dev;
    struct net_dwait *w = net_sys()->calloc(1, sizeof(*w));
    if (w == NULL) {
        net_req_unbusy(e, r);
        snprintf(why, why_len, "NET: out of memory posting a device copy");
        return IXL_ERR_NO_MEMORY;
    }
    struct net_dstream *ds = &e->dstreams[r->dev_ord * NET_DIRS + r->dev_dir];
    struct ixl_dev_stream *s = NULL;
    struct ixl_dev_event *ev = NULL;
    size_t i = 0;
    pthread_mutex_lock(&ds->lock);
    int rc = stream_get(e, ds, &s, why, why_len);
    int copy_rc = IXL_OK, rec_rc = IXL_OK;
    bool batch = DEVOPS_COVERS(d, copy_batch) && d->copy_batch != NULL && r->n > 1;
    bool cols = NET_DEV_COLS && batch && DEVOPS_COVERS(d, copy_cols) && d->copy_cols != NULL;
    if (rc == IXL_OK && batch && !cols && ds->cv_cap < r->n) {
        struct ixl_dev_copy *cv = net_sys()->realloc(ds->cv, r->n * sizeof(*cv));
        if (cv != NULL) {
            ds->cv = cv;
            ds->cv_cap = r->n;
        }
        batch = cv != NULL; /* else one copy call each */
    }
    if (rc == IXL_OK && batch) {
        /* Every copy in a few driver calls (the device layer's copy kernel when both sides
         * are memory the stream's GPU reaches: r->dev_same), in batches that double from
         * NET_DEV_BATCH_FIRST copies to NET_DEV_BATCH_MAX: the device starts on the first
         * while this thread fills the next (a 32,768-copy request: 7 batches, the first
         * enqueued after 1,024 entries). On an error the layer may have enqueued part of
         * them: the event below is waited for (i = n). */
        bool wr = r->op == IXL_OP_WRITE;
        uint32_t flags = r->dev_same ? IXL_DEV_COPY_DEVICE_ONLY : 0u;
        size_t chunk = NET_DEV_BATCH_FIRST;
        for (size_t k0 = 0; k0 < r->n && copy_rc == IXL_OK; k0 += chunk, chunk *= 2) {
            if (chunk > NET_DEV_BATCH_MAX)
                chunk = NET_DEV_BATCH_MAX;
            size_t k1 = r->n - k0 < chunk ? r->n : k0 + chunk;
            if (cols) {
                struct ixl_dev_col l = {&r->ld[k0].addr, sizeof(*r->ld)},
                                   t = r->dev_tgt
                                           ? (struct ixl_dev_col){&r->dev_tgt[k0],
                                                                  sizeof(*r->dev_tgt)}
                                           : (struct ixl_dev_col){&r->rd[k0].addr, sizeof(*r->rd)};
                struct ixl_dev_cols c = {wr ? t : l, wr ? l : t, {&r->ld[k0].len, sizeof(*r->ld)}};
                copy_rc = d->copy_cols(d->ctx, s, &c, k1 - k0, flags);
                continue;
            }
            for (size_t k = k0; k < k1; k++) {
                void *l = (void *)(uintptr_t)r->ld[k].addr,
                     *t = (void *)(uintptr_t)(r->dev_tgt ? r->dev_tgt[k] : r->rd[k].addr);
                ds->cv[k] = (struct ixl_dev_copy){wr ? t : l, wr ? l : t, (size_t)r->ld[k].len};
            }
            copy_rc = d->copy_batch(d->ctx, s, ds->cv + k0, k1 - k0, flags);
        }
        i = r->n;
    }
    for (; rc == IXL_OK && !batch && i < r->n; i++) {
        void *l = (void *)(uintptr_t)r->ld[i].addr,
             *t = (void *)(uintptr_t)(r->dev_tgt ? r->dev_tgt[i] : r->rd[i].addr);
        copy_rc = d->copy(d->ctx, s, r->op == IXL_OP_WRITE ? t : l, r->op == IXL_OP_WRITE ? l : t,
                          (size_t)r->ld[i].len);
        if (copy_rc != IXL_OK)
            break;
    }
    if (rc == IXL_OK && (i > 0 || copy_rc == IXL_OK)) {
        rec_rc = d->record(d->ctx, s, &ev);
        if (rec_rc != IXL_OK) {
            /* No event: the stream's own teardown is the barrier for what was enqueued. */
            d->stream_destroy(d->ctx, s);
            ds->s = NULL;
            ev = NULL;
        }
    }
    if (rc == IXL_OK && copy_rc == IXL_OK && rec_rc == IXL_OK) {
        /* Queued in record order (under the stream's lock): the thread waits for it; a
         * caller waiting for the request may poll it meanwhile (r->dw). */
        *w = (struct net_dwait){.serial = serial, .r = r, .ev = ev, .s = s, .refs = 1};
        pthread_mutex_lock(&e->reqs_lock);
        r->dw = w;
        pthread_mutex_unlock(&e->reqs_lock);
        pthread_mutex_lock(&ds->qlock);
        if (ds->tail)
            ds->tail->next = w;
        else
            ds->head = w;
        ds->tail = w;
        pthread_cond_signal(&ds->qcond);
        pthread_mutex_unlock(&ds->qlock);
        pthread_mutex_unlock(&ds->lock);
        return IXL_IN_PROGRESS;
    }
    pthread_mutex_unlock(&ds->lock);
    /* Failed: nothing of the request may stay running on the device (its buffers may go once
     * the post's error is reported). */
    if (ev != NULL) {
        d->wait(d->ctx, ev);
        d->event_destroy(d->ctx, ev);
    }
    free(w);
    if (r->peer != NULL)
        net_ipc_unhold(r); /* nothing of it runs into a peer's memory */
    net_req_unbusy(e, r);
    if (rc != IXL_OK)
        return rc; /* why: from stream_get */
    if (copy_rc != IXL_OK && batch) {
        snprintf(why, why_len,
                 "NET: the device layer refused to enqueue the request's %zu copies as a batch "
                 "(status %d; its log says why); what it had enqueued was waited for",
                 r->n, copy_rc);
        return copy_rc;
    }
    if (copy_rc != IXL_OK) {
        snprintf(why, why_len,
                 "NET: the device layer refused to enqueue the copy of descriptor %zu (%" PRIu64
                 " bytes, status %d); the request's earlier copies were waited for",
                 i, r->ld[i].len, copy_rc);
        return copy_rc;
    }
    snprintf(why, why_len,
             "NET: cannot record a device event after the request's copies (status %d); its "
             "stream was drained and is made again",
             rec_rc);
    return rec_rc;
}

/* Takes the completion of w's request (its event is done): true for the first caller only. */
static bool dwait_claim(struct net_engine *e, struct net_dwait *w)
{
    pthread_mutex_lock(&e->reqs_lock);
    bool mine = !w->claimed;
    if (mine) {
        w->claimed = true;
        if (w->r->dw == w)
            w->r->dw = NULL;
    }
    pthread_mutex_unlock(&e->reqs_lock);
    return mine;
}

/* Drops a reference to w; the last one destroys its event and frees it. */
static void dwait_put(struct net_engine *e, struct net_dwait *w)
{
    pthread_mutex_lock(&e->reqs_lock);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&e->reqs_lock);
    if (last) {
        e->dev->event_destroy(e->dev->ctx, w->ev);
        free(w);
    }
}

/* Completes w's request, whose device work ended with rc (the claimant's call): its hold on a
 * peer's memory ends, a peer that went meanwhile fails it, and the notification goes now,
 * after the copies. */
static void dwait_complete(struct net_engine *e, struct net_dwait *w, int rc)
{
    struct net_peer *peer = w->r->peer;
    char why[NET_WHY];
    int st = peer           ? net_ipc_done(e, w->r, rc, why, sizeof(why))
             : rc == IXL_OK ? IXL_OK
                            : IXL_ERR_BACKEND;
    if (!peer && rc != IXL_OK)
        snprintf(why, sizeof(why),
                 "NET: a device copy of the request failed (the device "
                 "layer logged the driver's error)");
    /* busy dropped first (a release waiting for it may now free the request: it took the
     * request out of the table, so part_done below finds nothing and sends nothing). */
    net_req_unbusy(e, w->r);
    if (net_req_part_done(e, w->serial, st, st == IXL_OK ? NULL : why) == 1 && peer)
        net_peer_submit_notif(peer, w->serial);
}

/* The longest a caller spins on a device request's event (the core's watch budget is for
 * watches that sleep: tens of milliseconds). */
#define NET_DEV_WATCH_MAX_NS 1000000u

int net_dev_watch(struct net_engine *e, struct net_req *r, uint64_t budget_ns)
{
    const struct ixl_devops *d = e->dev;
    if (budget_ns > NET_DEV_WATCH_MAX_NS)
        budget_ns = NET_DEV_WATCH_MAX_NS;
    pthread_mutex_lock(&e->reqs_lock);
    struct net_dwait *w = r->dw;
    if (w != NULL)
        w->refs++;
    pthread_mutex_unlock(&e->reqs_lock);
    if (w == NULL)
        return IXL_ERR_NOT_SUPPORTED;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int q = d->query(d->ctx, w->ev);
        if (q == IXL_OK) {
            if (dwait_claim(e, w))
                dwait_complete(e, w, IXL_OK);
            break;
        }
        /* A failure is the completion thread's to handle (it replaces the stream). */
        if (q != IXL_IN_PROGRESS)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t spent =
            (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t.tv_nsec - t0.tv_nsec);
        if (spent >= budget_ns)
            break;
    }
    dwait_put(e, w);
    return IXL_OK;
}

/* A stream's completion thread: waits for each of its events in record order, then completes
 * the request (the notification of a request within the agent is queued only now, after the
 * copies) unless a waiting caller saw the event done first and completed it. */
static void *dstream_main(void *arg)
{
    struct net_dstream *ds = arg;
    struct net_engine *e = ds->e;
    const struct ixl_devops *d = e->host->dev;
    for (;;) {
        pthread_mutex_lock(&ds->qlock);
        while (ds->head == NULL && !ds->stop)
            pthread_cond_wait(&ds->qcond, &ds->qlock);
        struct net_dwait *w = ds->head;
        if (w != NULL) {
            ds->head = w->next;
            if (ds->head == NULL)
                ds->tail = NULL;
        }
        pthread_mutex_unlock(&ds->qlock);
        if (w == NULL)
            break; /* stopping, and every event was waited for */
        int rc = d->wait(d->ctx, w->ev);
        if (w->done != NULL) /* a staged copy's event is this thread's alone */
            d->event_destroy(d->ctx, w->ev);
        if (rc != IXL_OK) {
            /* A failed copy may leave its stream failed for good (CUDA's errors are sticky):
             * the next request gets a new one. The stream's own teardown waits for what is
             * still queued on it, whose events report the failure too. */
            pthread_mutex_lock(&ds->lock);
            if (ds->s == w->s) {
                d->stream_destroy(d->ctx, w->s);
                ds->s = NULL;
            }
            pthread_mutex_unlock(&ds->lock);
        }
        if (w->done != NULL) { /* a staged copy: its owner goes on (net_stage.c) */
            w->done(w->arg, rc == IXL_OK ? IXL_OK : IXL_ERR_BACKEND);
            free(w);
            continue;
        }
        if (dwait_claim(e, w))
            dwait_complete(e, w, rc);
        dwait_put(e, w);
    }
    return NULL;
}

int net_dev_copy_async(struct net_engine *e, int ord, int dir, void *dst, const void *src,
                       size_t len, void (*done)(void *arg, int status), void *arg, char *why,
                       size_t why_len)
{
    const struct ixl_devops *d = e->dev;
    if (d == NULL || ord < 0 || ord >= e->n_devs) {
        snprintf(why, why_len, "NET: no device %d for a staged copy", ord);
        return IXL_ERR_BACKEND;
    }
    struct net_dwait *w = net_sys()->calloc(1, sizeof(*w));
    if (w == NULL) {
        snprintf(why, why_len, "NET: out of memory posting a staged device copy");
        return IXL_ERR_NO_MEMORY;
    }
    struct net_dstream *ds = &e->dstreams[ord * NET_DIRS + dir];
    struct ixl_dev_stream *s = NULL;
    struct ixl_dev_event *ev = NULL;
    pthread_mutex_lock(&ds->lock);
    pthread_mutex_lock(&ds->qlock);
    bool stopping = ds->stop;
    pthread_mutex_unlock(&ds->qlock);
    int rc = stopping ? IXL_ERR_CANCELED : stream_get(e, ds, &s, why, why_len);
    if (stopping)
        snprintf(why, why_len, "NET: the agent is being destroyed");
    if (rc == IXL_OK) {
        rc = d->copy(d->ctx, s, dst, src, len);
        if (rc != IXL_OK)
            snprintf(why, why_len,
                     "NET: the device layer refused to enqueue a staged copy of %zu bytes "
                     "(status %d)",
                     len, rc);
    }
    if (rc == IXL_OK) {
        rc = d->record(d->ctx, s, &ev);
        if (rc != IXL_OK) {
            d->stream_destroy(d->ctx, s); /* the barrier for the copy enqueued */
            ds->s = NULL;
            snprintf(why, why_len,
                     "NET: cannot record a device event after a staged copy "
                     "(status %d)",
                     rc);
        }
    }
    if (rc != IXL_OK) {
        pthread_mutex_unlock(&ds->lock);
        free(w);
        return rc;
    }
    *w = (struct net_dwait){.ev = ev, .s = s, .done = done, .arg = arg};
    pthread_mutex_lock(&ds->qlock);
    bool late = ds->stop; /* the thread may have left already: this caller completes it */
    if (!late) {
        if (ds->tail)
            ds->tail->next = w;
        else
            ds->head = w;
        ds->tail = w;
        pthread_cond_signal(&ds->qcond);
    }
    pthread_mutex_unlock(&ds->qlock);
    pthread_mutex_unlock(&ds->lock);
    if (late) {
        int wrc = d->wait(d->ctx, ev);
        d->event_destroy(d->ctx, ev);
        free(w);
        done(arg, wrc == IXL_OK ? IXL_OK : IXL_ERR_BACKEND);
    }
    return IXL_OK;
}

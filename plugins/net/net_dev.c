/* NET's device memory: VRAM within the agent through the process's device layer (host->dev,
 * ixl_plugin.h). Registration classifies the pointer; a request within the agent with VRAM on
 * a side enqueues one asynchronous copy per descriptor on a stream of its GPU, records one
 * event after them, and hands the event to the completion thread, which waits for it and only
 * then completes the request (and queues its notification). A device pointer never reaches
 * memmove, process_vm_*, sendmsg or a mapping: VRAM regions stay out of the key table, and
 * requests between agents with VRAM on a side are refused at prep_xfer (part 2, issue 20).
 *
 * Streams: NET_DIRS per GPU (device to device, host to device, device to host, so the copy
 * engines of both directions overlap), created on first use, each with a mutex: posts come
 * from any application thread, and a stream has one owner at a time. The mutex covers a
 * request's copies and its event's record, so the event follows exactly its own copies (and
 * those queued before them). Events go to the completion thread in record order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

struct net_dstream {
    pthread_mutex_t lock;
    struct ixl_dev_stream *s; /* NULL until first used (or after a failed record) */
};

/* An event the completion thread waits for: request serial's device work. */
struct net_dwait {
    uint64_t serial;
    struct net_req *r; /* busy held until the event is done */
    struct ixl_dev_event *ev;
    struct net_dstream *ds; /* the stream it was recorded on */
    struct ixl_dev_stream *s;
    struct net_dwait *next;
};

static void *dev_main(void *arg);

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
    for (int i = 0; i < n * NET_DIRS; i++)
        pthread_mutex_init(&e->dstreams[i].lock, NULL);
    e->n_devs = n;
    int te = net_sys()->pthread_create(&e->dthread, NULL, dev_main, e);
    if (te != 0)
        return net_error(e, IXL_ERR_SYSTEM,
                         "NET: cannot start its device completion thread: pthread_create: %s",
                         strerror(te));
    e->dthread_started = true;
    e->dev = d;
    return IXL_OK;
}

void net_dev_stop(struct net_engine *e)
{
    if (e->dthread_started) {
        pthread_mutex_lock(&e->dq_lock);
        e->dq_stop = true; /* it still waits for every queued event first */
        pthread_cond_broadcast(&e->dq_cond);
        pthread_mutex_unlock(&e->dq_lock);
        pthread_join(e->dthread, NULL);
        e->dthread_started = false;
    }
    if (e->dstreams != NULL) {
        for (int i = 0; i < e->n_devs * NET_DIRS; i++) {
            if (e->dstreams[i].s != NULL)
                e->host->dev->stream_destroy(e->host->dev->ctx, e->dstreams[i].s);
            pthread_mutex_destroy(&e->dstreams[i].lock);
        }
        free(e->dstreams);
        e->dstreams = NULL;
    }
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

/* The stream of (ord, dir), created on first use; its lock held by the caller. */
static int stream_get(struct net_engine *e, struct net_dstream *ds, int ord,
                      struct ixl_dev_stream **out)
{
    if (ds->s == NULL) {
        int rc = e->dev->stream_create(e->dev->ctx, ord, &ds->s);
        if (rc != IXL_OK) {
            ds->s = NULL;
            return rc;
        }
    }
    *out = ds->s;
    return IXL_OK;
}

int net_dev_post(struct net_engine *e, struct net_req *r, uint64_t serial)
{
    const struct ixl_devops *d = e->dev;
    struct net_dwait *w = net_sys()->calloc(1, sizeof(*w));
    if (w == NULL) {
        net_req_unbusy(e, r);
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    }
    struct net_dstream *ds = &e->dstreams[r->dev_ord * NET_DIRS + r->dev_dir];
    struct ixl_dev_stream *s = NULL;
    struct ixl_dev_event *ev = NULL;
    size_t i = 0;
    pthread_mutex_lock(&ds->lock);
    int rc = stream_get(e, ds, r->dev_ord, &s);
    int copy_rc = IXL_OK;
    for (; rc == IXL_OK && i < r->n; i++) {
        void *l = (void *)(uintptr_t)r->ld[i].addr, *t = (void *)(uintptr_t)r->rd[i].addr;
        copy_rc = d->copy(d->ctx, s, r->op == IXL_OP_WRITE ? t : l, r->op == IXL_OP_WRITE ? l : t,
                          (size_t)r->ld[i].len);
        if (copy_rc != IXL_OK)
            break;
    }
    int rec_rc = IXL_OK;
    if (rc == IXL_OK && (i > 0 || copy_rc == IXL_OK)) {
        rec_rc = d->record(d->ctx, s, &ev);
        if (rec_rc != IXL_OK) {
            /* No event: the stream's own teardown is the barrier for what was enqueued. */
            d->stream_destroy(d->ctx, s);
            ds->s = NULL;
            ev = NULL;
        }
    }
    pthread_mutex_unlock(&ds->lock);
    if (rc == IXL_OK && copy_rc == IXL_OK && rec_rc == IXL_OK) {
        w->serial = serial;
        w->r = r;
        w->ev = ev;
        w->ds = ds;
        w->s = s;
        pthread_mutex_lock(&e->dq_lock);
        if (e->dq_tail)
            e->dq_tail->next = w;
        else
            e->dq_head = w;
        e->dq_tail = w;
        pthread_cond_signal(&e->dq_cond);
        pthread_mutex_unlock(&e->dq_lock);
        return IXL_IN_PROGRESS;
    }
    /* Failed: nothing of the request may stay running on the device (its buffers may go once
     * the post's error is reported). */
    if (ev != NULL) {
        d->wait(d->ctx, ev);
        d->event_destroy(d->ctx, ev);
    }
    free(w);
    net_req_unbusy(e, r);
    if (rc != IXL_OK)
        return net_error(e, rc, "NET: cannot create a stream on GPU %d (status %d)", r->dev_ord,
                         rc);
    if (copy_rc != IXL_OK)
        return net_error(e, copy_rc,
                         "NET: the device layer refused to enqueue the copy of descriptor %zu "
                         "(%" PRIu64 " bytes, status %d); the request's earlier copies were "
                         "waited for",
                         i, r->ld[i].len, copy_rc);
    return net_error(e, rec_rc,
                     "NET: cannot record a device event after the request's copies (status %d); "
                     "its stream was drained and is made again",
                     rec_rc);
}

/* The completion thread: waits for each event in record order, then completes its request
 * (the notification of a request within the agent is queued only now, after the copies). */
static void *dev_main(void *arg)
{
    struct net_engine *e = arg;
    const struct ixl_devops *d = e->host->dev;
    for (;;) {
        pthread_mutex_lock(&e->dq_lock);
        while (e->dq_head == NULL && !e->dq_stop)
            pthread_cond_wait(&e->dq_cond, &e->dq_lock);
        struct net_dwait *w = e->dq_head;
        if (w != NULL) {
            e->dq_head = w->next;
            if (e->dq_head == NULL)
                e->dq_tail = NULL;
        }
        pthread_mutex_unlock(&e->dq_lock);
        if (w == NULL)
            break; /* stopping, and every event was waited for */
        int rc = d->wait(d->ctx, w->ev);
        d->event_destroy(d->ctx, w->ev);
        if (rc != IXL_OK) {
            /* A failed copy may leave its stream failed for good (CUDA's errors are sticky):
             * the next request gets a new one. The stream's own teardown waits for what is
             * still queued on it, whose events report the failure too. */
            pthread_mutex_lock(&w->ds->lock);
            if (w->ds->s == w->s) {
                d->stream_destroy(d->ctx, w->s);
                w->ds->s = NULL;
            }
            pthread_mutex_unlock(&w->ds->lock);
        }
        /* busy dropped first (a release waiting for it may now free the request: it took the
         * request out of the table, so part_done below finds nothing and sends nothing). */
        net_req_unbusy(e, w->r);
        net_req_part_done(e, w->serial, rc == IXL_OK ? IXL_OK : IXL_ERR_BACKEND,
                          rc == IXL_OK ? NULL
                                       : "NET: a device copy of the request failed (the device "
                                         "layer logged the driver's error)");
        free(w);
    }
    return NULL;
}

/*
 * POSIX's VRAM path: GPU memory to and from files and volumes through pinned host bounce
 * buffers, pipelined with the file I/O of the engine (io_uring or the thread pool).
 *
 * A staged request is cut into chunks of at most bounce_size bytes (smaller for a small request:
 * px_stage_chunk), each with one bounce buffer
 * of the pool (bounce_buffers of them, allocated and pinned at the first staged request, reused
 * for the engine's life). One stager thread per engine owns the device side: a stream per GPU,
 * the copies and their events.
 *   WRITE (VRAM -> file): stager copies the chunk device -> bounce and records an event; when
 *     the event is done the chunk goes to e->ready, the I/O engine pwrites it (px_take takes
 *     ready chunks before the FIFO), and its completion frees the buffer.
 *   READ (file -> VRAM): the chunk goes to e->ready at once, the I/O engine preads it into the
 *     bounce buffer; its completion hands it back to the stager, which copies bounce -> device
 *     and frees the buffer when that copy's event is done.
 * So while chunk n is in the file I/O, chunk n+1's device copy runs (and the other way round):
 * with k buffers, up to k chunks are in flight across both stages. The request completes when
 * its last chunk is free: for a READ, after its last device copy.
 *
 * Errors: a failed copy (at enqueue, or reported by its event) fails the request with
 * IXL_ERR_BACKEND; a short or failed write/read fails it as for DRAM (ENOSPC, EDQUOT, EFBIG:
 * IXL_ERR_NO_SPACE). A failed request starts no more chunks, drops its chunks waiting for I/O
 * and lets those in a copy or in the kernel finish; it ends when the last one is free. A stream
 * whose copy failed is replaced once its other copies are done (a failed asynchronous copy may
 * leave a stream in error).
 *
 * Release in flight (px_stage_drain): the request starts nothing more, its chunks waiting for
 * I/O are dropped, and release waits until every chunk of it is free -- so no copy into the
 * user's VRAM is pending after release returns IXL_OK.
 *
 * Locking: everything here is under e->lock except the device calls (copy, record, query,
 * wait), which the stager makes without it. Only the stager touches the streams, the copy list
 * and the chunks' events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "posix.h"

struct px_chunk {
    struct px_req *r; /* NULL while free */
    uint8_t *buf;     /* its bounce buffer: bounce_size bytes, 4096-aligned */
    const struct px_md *f;
    uint64_t file_off;
    uint64_t vaddr;
    uint32_t len;
    int ord;
    struct ixl_dev_event *ev;
    struct px_chunk *next;
};

struct px_list {
    struct px_chunk *head, *tail;
};

struct px_stage {
    struct px_chunk *chunks;
    unsigned n;
    uint8_t *mem;
    size_t mem_len;
    bool pinned;
    struct px_chunk *free;
    struct px_list h2d;  /* READ chunks read into their buffer, waiting for the copy to VRAM */
    struct px_list copy; /* chunks whose device copy is in flight, in the order enqueued */
    struct ixl_dev_stream **streams;
    bool *broken;      /* the device's stream had a failed copy: replace it when idle */
    unsigned *pending; /* copies in flight per device */
    pthread_t thread;
    bool thread_started, stop;
    pthread_cond_t cv; /* a chunk moved, a buffer came free, a request came, or stop */
};

static void list_push(struct px_list *l, struct px_chunk *c)
{
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static struct px_chunk *list_pop(struct px_list *l)
{
    struct px_chunk *c = l->head;
    if (c) {
        l->head = c->next;
        if (l->head == NULL)
            l->tail = NULL;
        c->next = NULL;
    }
    return c;
}

#define DEVOPS_COVERS(d, f) ((d)->size >= offsetof(struct ixl_devops, f) + sizeof((d)->f))

void px_stage_init(struct px_engine *e)
{
    const struct ixl_host *h = e->host;
    e->dev = NULL;
    if (h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev) || h->dev == NULL ||
        !DEVOPS_COVERS(h->dev, host_unpin)) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: %s",
                 h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev)
                     ? "the core has no device layer (a host older than plugin ABI 2.2)"
                     : "the core's device layer is missing or too old");
        return;
    }
    char why[200] = "";
    int n = h->dev->count(h->dev->ctx, why, sizeof(why));
    if (n <= 0) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: %s",
                 n == 0   ? "no GPU: the driver reports 0 devices"
                 : why[0] ? why
                          : "the device layer cannot say whether there is a GPU");
        return;
    }
    e->n_devs = n;
    e->dev = h->dev;
}

/* Chunks of a request: bounce_size bytes, except that a request of less than 4 of them is cut
 * into 4 (at least 256 KiB each, a multiple of 64 KiB), so that even a 1 MiB request overlaps
 * its device copies with its file I/O. Files whose direct-I/O offset alignment does not divide
 * 64 KiB keep bounce_size (a multiple of it, checked at prep). */
#define PX_SPLIT 4
#define PX_CHUNK_MIN (256u << 10)
uint64_t px_stage_chunk(const struct px_engine *e, uint64_t bytes, uint32_t align)
{
    uint64_t c = e->bounce_size;
    if (align == 0 || 65536 % align != 0)
        return c;
    uint64_t per = (bytes / PX_SPLIT + 65535) / 65536 * 65536;
    if (per < PX_CHUNK_MIN)
        per = PX_CHUNK_MIN;
    return per < c ? per : c;
}

/* A chunk is free again (e->lock held): its request may have ended. */
static void chunk_free(struct px_engine *e, struct px_chunk *c)
{
    struct px_stage *st = e->stage;
    struct px_req *r = c->r;
    c->r = NULL;
    c->next = st->free;
    st->free = c;
    r->chunks--;
    pthread_cond_broadcast(&st->cv);
    if (px_maybe_finish(r))
        e->host->signal(e->host->ctx);
}

/* Drops r's chunks that wait for file I/O (e->lock held). */
static void drop_ready(struct px_engine *e, struct px_req *r)
{
    struct px_chunk **pp = &e->ready_head, *prev = NULL;
    while (*pp) {
        struct px_chunk *c = *pp;
        if (c->r != r) {
            prev = c;
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        if (e->ready_tail == c)
            e->ready_tail = prev;
        chunk_free(e, c);
    }
}

void px_stage_drop(struct px_engine *e, struct px_req *r)
{
    if (e->stage != NULL)
        drop_ready(e, r);
}

static void push_ready(struct px_engine *e, struct px_chunk *c)
{
    c->next = NULL;
    if (e->ready_tail)
        e->ready_tail->next = c;
    else
        e->ready_head = c;
    e->ready_tail = c;
    px_kick(e);
}

bool px_stage_take(struct px_engine *e, struct px_io *io)
{
    struct px_chunk *c = e->ready_head;
    if (c == NULL)
        return false;
    e->ready_head = c->next;
    if (e->ready_head == NULL)
        e->ready_tail = NULL;
    c->next = NULL;
    io->r = c->r;
    io->chunk = c;
    io->f = c->f;
    io->buf = c->buf;
    io->off = c->file_off;
    io->len = c->len;
    io->done = 0;
    c->r->inflight++;
    e->inflight++;
    return true;
}

void px_stage_io_done(struct px_engine *e, struct px_io *io)
{
    struct px_chunk *c = io->chunk;
    struct px_req *r = c->r;
    io->chunk = NULL;
    if (!r->to_file && r->status == IXL_OK && !r->canceled) {
        list_push(&e->stage->h2d, c); /* read into the buffer: now to the device */
        pthread_cond_broadcast(&e->stage->cv);
        return;
    }
    chunk_free(e, c); /* written (or failed): the buffer is free */
}

void px_stage_fail_ready(struct px_engine *e, int err, int *finished)
{
    while (e->ready_head != NULL)
        if (px_fail(e, e->ready_head->r, IXL_ERR_IO, "io_uring_enter failed earlier: %s",
                    strerror(err)))
            (*finished)++;
}

/* The stream for device ord (stager only, e->lock held): IXL_OK, IXL_ERR_BUSY while a broken
 * stream still has copies in flight, or the device layer's error. */
static int stream_for(struct px_engine *e, struct px_stage *st, int ord,
                      struct ixl_dev_stream **out)
{
    if (ord < 0 || ord >= e->n_devs)
        return IXL_ERR_INVALID_ARG;
    if (st->broken[ord]) {
        if (st->pending[ord] > 0)
            return IXL_ERR_BUSY;
        if (st->streams[ord])
            e->dev->stream_destroy(e->dev->ctx, st->streams[ord]);
        st->streams[ord] = NULL;
        st->broken[ord] = false;
    }
    if (st->streams[ord] == NULL) {
        int rc = e->dev->stream_create(e->dev->ctx, ord, &st->streams[ord]);
        if (rc != IXL_OK) {
            st->streams[ord] = NULL;
            return rc;
        }
    }
    *out = st->streams[ord];
    return IXL_OK;
}

/* Enqueues c's copy (to the device when to_dev) on s and records its event, without e->lock;
 * on success c joins the copy list. Returns the device layer's status. */
static int start_copy(struct px_engine *e, struct px_stage *st, struct px_chunk *c,
                      struct ixl_dev_stream *s, bool to_dev)
{
    void *dptr = (void *)(uintptr_t)c->vaddr;
    pthread_mutex_unlock(&e->lock);
    int rc = to_dev ? e->dev->copy(e->dev->ctx, s, dptr, c->buf, c->len)
                    : e->dev->copy(e->dev->ctx, s, c->buf, dptr, c->len);
    if (rc == IXL_OK)
        rc = e->dev->record(e->dev->ctx, s, &c->ev);
    pthread_mutex_lock(&e->lock);
    if (rc == IXL_OK) {
        st->pending[c->ord]++;
        list_push(&st->copy, c);
    } else {
        st->broken[c->ord] = true;
    }
    return rc;
}

static void copy_failed(struct px_engine *e, struct px_chunk *c, int rc, const char *when)
{
    struct px_req *r = c->r;
    px_fail(e, r, rc == IXL_ERR_NO_MEMORY ? rc : IXL_ERR_BACKEND,
            "POSIX staged %s: the copy of %u bytes %s GPU %d (0x%" PRIx64 ") %s failed: %s "
            "(the device layer logged the driver's error)",
            r->to_file ? "WRITE" : "READ", c->len, r->to_file ? "from" : "to", c->ord, c->vaddr,
            r->to_file ? "into the bounce buffer" : "from the bounce buffer", when);
    chunk_free(e, c);
}

/* READ: a chunk read into its buffer goes to the device. */
static bool stage_h2d(struct px_engine *e, struct px_stage *st)
{
    struct px_chunk *c = st->h2d.head;
    if (c == NULL)
        return false;
    if (c->r->status != IXL_OK || c->r->canceled) {
        list_pop(&st->h2d);
        chunk_free(e, c);
        return true;
    }
    struct ixl_dev_stream *s = NULL;
    int rc = stream_for(e, st, c->ord, &s);
    if (rc == IXL_ERR_BUSY)
        return false;
    list_pop(&st->h2d);
    if (rc == IXL_OK)
        rc = start_copy(e, st, c, s, true);
    if (rc != IXL_OK)
        copy_failed(e, c, rc, "at enqueue");
    return true;
}

/* The oldest copy in flight: done (or, with block, waited for) -> its next stage. */
static bool stage_reap(struct px_engine *e, struct px_stage *st, bool block)
{
    struct px_chunk *c = st->copy.head;
    if (c == NULL)
        return false;
    pthread_mutex_unlock(&e->lock);
    int rc = block ? e->dev->wait(e->dev->ctx, c->ev) : e->dev->query(e->dev->ctx, c->ev);
    if (rc != IXL_IN_PROGRESS)
        e->dev->event_destroy(e->dev->ctx, c->ev);
    pthread_mutex_lock(&e->lock);
    if (rc == IXL_IN_PROGRESS)
        return false;
    list_pop(&st->copy); /* still the head: only the stager changes the list */
    c->ev = NULL;
    st->pending[c->ord]--;
    struct px_req *r = c->r;
    if (rc != IXL_OK) {
        st->broken[c->ord] = true;
        copy_failed(e, c, rc, "on the device");
    } else if (r->to_file && r->status == IXL_OK && !r->canceled) {
        push_ready(e, c); /* in the buffer: now to the file */
    } else {
        chunk_free(e, c); /* READ: in the user's VRAM; or the request failed */
    }
    return true;
}

/* The next chunk of the first staged request, when a buffer is free. */
static bool stage_start(struct px_engine *e, struct px_stage *st)
{
    struct px_req *r = e->shead;
    if (r == NULL || st->free == NULL)
        return false;
    const struct ixl_xfer_desc *fd = &r->file[r->next_desc], *md = &r->mem[r->next_desc];
    int ord = ((const struct px_md *)md->md)->ordinal;
    struct ixl_dev_stream *s = NULL;
    int rc = IXL_OK;
    if (r->to_file && (rc = stream_for(e, st, ord, &s)) == IXL_ERR_BUSY)
        return false;
    struct px_chunk *c = st->free;
    st->free = c->next;
    c->next = NULL;
    c->r = r;
    r->chunks++;
    uint64_t left = fd->len - r->next_off;
    c->len = (uint32_t)(left < r->chunk ? left : r->chunk);
    c->f = (const struct px_md *)fd->md;
    c->file_off = fd->addr + r->next_off;
    c->vaddr = md->addr + r->next_off;
    c->ord = ord;
    r->next_off += c->len;
    if (r->next_off == fd->len) {
        r->next_off = 0;
        do
            r->next_desc++;
        while (r->next_desc < r->n && r->file[r->next_desc].len == 0);
        if (r->next_desc == r->n)
            px_dequeue(e, r);
    }
    if (!r->to_file) {
        push_ready(e, c); /* READ: the file first */
        return true;
    }
    if (rc == IXL_OK)
        rc = start_copy(e, st, c, s, false);
    if (rc != IXL_OK)
        copy_failed(e, c, rc, "at enqueue");
    return true;
}

static void *stage_main(void *arg)
{
    struct px_engine *e = arg;
    struct px_stage *st = e->stage;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (stage_h2d(e, st) || stage_reap(e, st, false) || stage_start(e, st))
            continue;
        if (st->copy.head != NULL) {
            stage_reap(e, st, true);
            continue;
        }
        if (st->stop)
            break;
        pthread_cond_wait(&st->cv, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

void px_stage_kick(struct px_engine *e)
{
    pthread_cond_broadcast(&e->stage->cv);
}

static void stage_free(struct px_engine *e, struct px_stage *st)
{
    if (st->streams)
        for (int i = 0; i < e->n_devs; i++)
            if (st->streams[i])
                e->dev->stream_destroy(e->dev->ctx, st->streams[i]);
    if (st->pinned)
        e->dev->host_unpin(e->dev->ctx, st->mem);
    pthread_cond_destroy(&st->cv);
    free(st->streams);
    free(st->broken);
    free(st->pending);
    free(st->chunks);
    free(st->mem);
    free(st);
}

int px_stage_start(struct px_engine *e)
{
    if (e->stage != NULL)
        return IXL_OK;
    const struct ixl_sys *sys = posix_sys();
    struct px_stage *st = sys->calloc(1, sizeof(*st));
    if (st == NULL)
        return px_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cv, &ca);
    pthread_condattr_destroy(&ca);
    st->n = e->bounce_count;
    st->mem_len = (size_t)e->bounce_size * st->n;
    void *mem = NULL;
    st->chunks = sys->calloc(st->n, sizeof(*st->chunks));
    st->streams = sys->calloc((size_t)e->n_devs, sizeof(*st->streams));
    st->broken = sys->calloc((size_t)e->n_devs, sizeof(*st->broken));
    st->pending = sys->calloc((size_t)e->n_devs, sizeof(*st->pending));
    int merr = sys->posix_memalign(&mem, 4096, st->mem_len);
    if (merr == 0)
        st->mem = mem;
    if (st->chunks == NULL || st->streams == NULL || st->broken == NULL || st->pending == NULL ||
        st->mem == NULL) {
        stage_free(e, st);
        return px_error(e, IXL_ERR_NO_MEMORY,
                        "POSIX: cannot allocate %u bounce buffers of %" PRIu64 " bytes for VRAM "
                        "(lower the options bounce_buffers or bounce_size)",
                        e->bounce_count, e->bounce_size);
    }
    int rc = e->dev->host_pin(e->dev->ctx, st->mem, st->mem_len);
    st->pinned = rc == IXL_OK;
    if (!st->pinned)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "POSIX: cannot pin the %zu bytes of bounce buffers (status %d): VRAM copies "
                     "run from pageable memory, slower",
                     st->mem_len, rc);
    for (unsigned i = 0; i < st->n; i++) {
        st->chunks[i].buf = st->mem + (size_t)i * e->bounce_size;
        st->chunks[i].next = st->free;
        st->free = &st->chunks[i];
    }
    e->stage = st;
    int te = sys->pthread_create(&st->thread, NULL, stage_main, e);
    if (te != 0) {
        e->stage = NULL;
        stage_free(e, st);
        return px_error(e, IXL_ERR_SYSTEM, "POSIX: cannot start the VRAM stager thread: %s",
                        strerror(te));
    }
    st->thread_started = true;
    return IXL_OK;
}

void px_stage_stop(struct px_engine *e)
{
    struct px_stage *st = e->stage;
    if (st == NULL)
        return;
    pthread_mutex_lock(&e->lock);
    st->stop = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&e->lock);
    if (st->thread_started)
        pthread_join(st->thread, NULL);
    e->stage = NULL;
    stage_free(e, st);
}

bool px_stage_drain(struct px_engine *e, struct px_req *r, int ms)
{
    struct px_stage *st = e->stage;
    if (st == NULL)
        return r->chunks == 0;
    drop_ready(e, r);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    while (r->chunks > 0)
        if (pthread_cond_timedwait(&st->cv, &e->lock, &dl) == ETIMEDOUT)
            return r->chunks == 0;
    return true;
}

/*
 * GDS: cuFile's batch API on one thread. Each round takes up to `entries` pieces of at most
 * `entry` bytes (cuFile's per-buffer limit: larger descriptors are split, so no size fails
 * with "Error in setting up Batch") from the FIFO, all on one device, submits them as one
 * batch (cuFileBatchIOSubmit) and collects their completions (cuFileBatchIOGetStatus). A short
 * entry is continued in the next round. The batch handle is set up once and reused; a submit
 * that fails on a reused handle is retried once on a fresh one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gds.h"

struct batch {
    struct gds_engine *e;
    gds_CUfileBatchHandle h;
    bool have;
    int cur; /* the device whose context is current on this thread */
    struct gds_io *ios;
    gds_CUfileIOParams *params;
    gds_CUfileIOEvents *events;
    ssize_t *res;      /* bytes moved, or -1 (failed: msgs[i]) */
    char (*msgs)[400]; /* why an entry failed */
};

static const char *status_name(int s)
{
    switch (s) {
    case GDS_CUFILE_WAITING:
        return "WAITING";
    case GDS_CUFILE_PENDING:
        return "PENDING";
    case GDS_CUFILE_INVALID:
        return "INVALID";
    case GDS_CUFILE_CANCELED:
        return "CANCELED";
    case GDS_CUFILE_COMPLETE:
        return "COMPLETE";
    case GDS_CUFILE_TIMEOUT:
        return "TIMEOUT";
    case GDS_CUFILE_FAILED:
        return "FAILED";
    default:
        return "unknown";
    }
}

static void fail_all(struct batch *b, size_t from, size_t k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_all(struct batch *b, size_t from, size_t k, const char *fmt, ...)
{
    va_list ap;
    for (size_t i = from; i < k; i++) {
        if (b->res[i] != -2)
            continue; /* already answered */
        va_start(ap, fmt);
        vsnprintf(b->msgs[i], sizeof(b->msgs[i]), fmt, ap);
        va_end(ap);
        b->res[i] = -1;
    }
}

/* What to do about a batch cuFile refused. */
const char *gds_batch_hint(gds_CUfileError ce)
{
    if (ce.err == GDS_CU_FILE_BATCH_NOCOMPAT_ERROR)
        return "cuFile refuses batch I/O in its compatibility mode (no nvidia-fs): use GDS_MT, "
               "or load nvidia-fs";
    return "cuFile's io_batchsize, per_buffer_cache_size_kb and max_device_cache_size_kb in "
           "cufile.json bound a batch; see cufile.log, lower option batch or max_entry, or use "
           "GDS_MT";
}

static gds_CUfileError setup(struct batch *b)
{
    gds_CUfileError ce = b->e->cf->cuFileBatchIOSetUp(&b->h, b->e->entries);
    b->have = ce.err == GDS_CU_FILE_SUCCESS;
    return ce;
}

/* Runs ios[0..k) as one batch; fills res/msgs for each. */
static void run(struct batch *b, size_t k)
{
    struct gds_engine *e = b->e;
    char t[96];
    for (size_t i = 0; i < k; i++)
        b->res[i] = -2; /* not answered yet */
    int rc = gds_thread_ctx(e, b->ios[0].dev, &b->cur);
    if (rc != IXL_OK) {
        fail_all(b, 0, k, "cannot make device %d's context current for cuFile", b->ios[0].dev);
        return;
    }
    gds_CUfileError ce = {0, 0};
    if (!b->have && (ce = setup(b)).err != GDS_CU_FILE_SUCCESS) {
        fail_all(b, 0, k,
                 "Error in setting up Batch: cuFileBatchIOSetUp(%u entries) failed: %s (%s)",
                 e->entries, gds_err_text(ce, t, sizeof(t)), gds_batch_hint(ce));
        return;
    }
    for (size_t i = 0; i < k; i++) {
        const struct gds_io *io = &b->ios[i];
        gds_CUfileIOParams *p = &b->params[i];
        memset(p, 0, sizeof(*p));
        p->mode = GDS_CUFILE_BATCH;
        p->u.batch.devPtr_base = io->base;
        p->u.batch.file_offset = io->off;
        p->u.batch.devPtr_offset = io->buf_off;
        p->u.batch.size = io->len;
        p->fh = io->f->fh;
        p->opcode = io->r->to_file ? GDS_CUFILE_WRITE : GDS_CUFILE_READ;
        p->cookie = (void *)(uintptr_t)i;
    }
    ce = e->cf->cuFileBatchIOSubmit(b->h, (unsigned)k, b->params, 0);
    if (ce.err != GDS_CU_FILE_SUCCESS) {
        /* A reused handle may be what cuFile refuses: once more on a fresh one. */
        e->cf->cuFileBatchIODestroy(b->h);
        b->have = false;
        if (setup(b).err == GDS_CU_FILE_SUCCESS)
            ce = e->cf->cuFileBatchIOSubmit(b->h, (unsigned)k, b->params, 0);
    }
    if (ce.err != GDS_CU_FILE_SUCCESS) {
        fail_all(b, 0, k,
                 "cuFileBatchIOSubmit of %zu entries of at most %" PRIu64 " bytes (within "
                 "cuFile's per-buffer size) failed: %s (%s)",
                 k, e->entry, gds_err_text(ce, t, sizeof(t)), gds_batch_hint(ce));
        return;
    }
    size_t got = 0;
    int idle_rounds = 0;
    while (got < k) {
        unsigned nr = (unsigned)(k - got);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
        ce = e->cf->cuFileBatchIOGetStatus(b->h, 1, &nr, b->events, &ts);
        if (ce.err != GDS_CU_FILE_SUCCESS) {
            e->cf->cuFileBatchIOCancel(b->h);
            e->cf->cuFileBatchIODestroy(b->h);
            b->have = false;
            fail_all(b, 0, k, "cuFileBatchIOGetStatus failed: %s", gds_err_text(ce, t, sizeof(t)));
            return;
        }
        if (nr == 0) {
            /* cuFile's own batch timeout (max_batch_io_timeout_msecs) ends entries that hang;
             * ours is a minute with nothing reported. */
            if (++idle_rounds >= 600) {
                e->cf->cuFileBatchIOCancel(b->h);
                e->cf->cuFileBatchIODestroy(b->h);
                b->have = false;
                fail_all(b, 0, k, "cuFile reported no completion of the batch for 60 s");
                return;
            }
            continue;
        }
        idle_rounds = 0;
        for (unsigned j = 0; j < nr; j++) {
            size_t i = (size_t)(uintptr_t)b->events[j].cookie;
            if (i >= k || b->res[i] != -2)
                continue;
            got++;
            if (b->events[j].status == GDS_CUFILE_COMPLETE) {
                b->res[i] = (ssize_t)b->events[j].ret;
            } else {
                const struct gds_io *io = &b->ios[i];
                snprintf(b->msgs[i], sizeof(b->msgs[i]),
                         "cuFile batch %s of %" PRIu64 " bytes %s '%s' at offset %" PRId64
                         " ended %s (ret %zu)",
                         io->r->to_file ? "write" : "read", io->len, io->r->to_file ? "to" : "from",
                         io->f->name, io->off, status_name(b->events[j].status), b->events[j].ret);
                b->res[i] = -1;
            }
        }
    }
}

void *gds_batch_main(void *arg)
{
    struct gds_engine *e = arg;
    size_t cap = e->entries;
    struct batch b = {.e = e, .cur = -1};
    b.ios = gds_sys()->calloc(cap, sizeof(*b.ios));
    b.params = gds_sys()->calloc(cap, sizeof(*b.params));
    b.events = gds_sys()->calloc(cap, sizeof(*b.events));
    b.res = gds_sys()->calloc(cap, sizeof(*b.res));
    b.msgs = gds_sys()->calloc(cap, sizeof(*b.msgs));
    bool ok = b.ios && b.params && b.events && b.res && b.msgs;
    size_t carry = 0;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        size_t k = carry;
        int dev = k > 0 ? b.ios[0].dev : -1;
        while (k < cap && gds_take(e, e->entry, dev, &b.ios[k])) {
            dev = b.ios[k].dev;
            k++;
        }
        if (k == 0) {
            if (e->stop)
                break;
            pthread_cond_wait(&e->work, &e->lock);
            continue;
        }
        if (!ok) {
            for (size_t i = 0; i < k; i++)
                gds_done_fail(e, &b.ios[i], IXL_ERR_NO_MEMORY,
                              "GDS: no memory for the batch thread's tables");
            carry = 0;
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        run(&b, k);
        pthread_mutex_lock(&e->lock);
        carry = 0;
        for (size_t i = 0; i < k; i++) {
            bool again;
            if (b.res[i] == -1) {
                gds_done_fail(e, &b.ios[i], IXL_ERR_IO, "%s", b.msgs[i]);
                again = false;
            } else {
                again = gds_done(e, &b.ios[i], b.res[i], 0);
            }
            if (again)
                b.ios[carry++] = b.ios[i];
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (b.have)
        e->cf->cuFileBatchIODestroy(b.h);
    free(b.ios);
    free(b.params);
    free(b.events);
    free(b.res);
    free(b.msgs);
    return NULL;
}

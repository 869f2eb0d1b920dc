/*
 * GDS_MT: a pool of threads, each taking the next piece of the FIFO (a descriptor is cut into
 * len / threads pieces, between min_chunk and max_chunk) and moving it with one synchronous
 * cuFileRead or cuFileWrite, in the VRAM's device context (made current once per thread).
 */
#include <errno.h>

#include "gds.h"

void *gds_mt_main(void *arg)
{
    struct gds_engine *e = arg;
    int cur = -1; /* the device whose context is current on this thread */
    struct gds_io io;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (!gds_take(e, 0, -1, &io)) {
            if (e->stop)
                break;
            pthread_cond_wait(&e->work, &e->lock);
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        for (;;) {
            int rc = gds_thread_ctx(e, io.dev, &cur);
            if (rc != IXL_OK) {
                pthread_mutex_lock(&e->lock);
                gds_done_fail(e, &io, rc, "cannot make device %d's context current for cuFile",
                              io.dev);
                break;
            }
            errno = 0;
            ssize_t n = io.r->to_file
                            ? e->cf->cuFileWrite(io.f->fh, io.base, io.len, io.off, io.buf_off)
                            : e->cf->cuFileRead(io.f->fh, io.base, io.len, io.off, io.buf_off);
            int err = errno;
            pthread_mutex_lock(&e->lock);
            if (!gds_done(e, &io, n, err))
                break;
            pthread_mutex_unlock(&e->lock);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

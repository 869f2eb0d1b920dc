/*
 * POSIX's thread-pool engine: `threads` workers take chunks from the FIFO and run pread/pwrite
 * without the lock (short transfers continued, EINTR retried). The engine where io_uring is
 * refused, and the simplest to reason about.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "posix.h"

struct pool {
    pthread_t *threads;
    unsigned n;
    pthread_cond_t work; /* the FIFO got work, or stop */
    pthread_cond_t idle; /* an I/O finished (drain waits on it) */
    bool stop;
};

static void *worker_main(void *arg)
{
    struct px_engine *e = arg;
    struct pool *p = e->impl;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!p->stop && !px_has_io(e))
            pthread_cond_wait(&p->work, &e->lock);
        if (p->stop)
            break;
        struct px_io io;
        px_take(e, &io);  /* true: px_has_io said there is an I/O to start */
        if (px_has_io(e)) /* more work: wake one more worker (one at a time, no herd) */
            pthread_cond_signal(&p->work);
        bool fin;
        for (;;) {
            pthread_mutex_unlock(&e->lock);
            ssize_t res;
            do {
                res = io.r->to_file ? posix_sys()->pwrite(io.f->fd, io.buf, io.len, (off_t)io.off)
                                    : posix_sys()->pread(io.f->fd, io.buf, io.len, (off_t)io.off);
            } while (res < 0 && errno == EINTR);
            long v = res < 0 ? -errno : (long)res;
            pthread_mutex_lock(&e->lock);
            if (!px_done(e, &io, v, &fin))
                break;
        }
        pthread_cond_broadcast(&p->idle);
        if (fin)
            e->host->signal(e->host->ctx);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static void pool_stop(struct px_engine *e)
{
    struct pool *p = e->impl;
    if (p == NULL)
        return;
    pthread_mutex_lock(&e->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&e->lock);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    free(p->threads);
    free(p);
    e->impl = NULL;
}

static int pool_start(struct px_engine *e, char *why, size_t why_len)
{
    struct pool *p = posix_sys()->calloc(1, sizeof(*p));
    if (p == NULL || (p->threads = posix_sys()->calloc(e->nthreads, sizeof(*p->threads))) == NULL) {
        free(p);
        snprintf(why, why_len, "calloc: out of memory");
        return IXL_ERR_NO_MEMORY;
    }
    pthread_cond_init(&p->work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->idle, &ca);
    pthread_condattr_destroy(&ca);
    e->impl = p;
    for (unsigned i = 0; i < e->nthreads; i++) {
        int te = posix_sys()->pthread_create(&p->threads[i], NULL, worker_main, e);
        if (te != 0) {
            snprintf(why, why_len, "cannot start worker thread %u: pthread_create: %s", i,
                     strerror(te));
            pool_stop(e);
            return IXL_ERR_SYSTEM;
        }
        p->n++;
    }
    return IXL_OK;
}

static void pool_kick(struct px_engine *e)
{
    struct pool *p = e->impl;
    pthread_cond_signal(&p->work);
}

static void pool_poll(struct px_engine *e)
{
    (void)e; /* the workers complete requests and signal */
}

static bool pool_drain(struct px_engine *e, struct px_req *r, int ms)
{
    struct pool *p = e->impl;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    while (r->inflight > 0)
        if (pthread_cond_timedwait(&p->idle, &e->lock, &dl) == ETIMEDOUT)
            return r->inflight == 0;
    return true;
}

const struct px_ops px_pool_ops = {
    .name = "threads",
    .start = pool_start,
    .stop = pool_stop,
    .kick = pool_kick,
    .poll = pool_poll,
    .drain = pool_drain,
};

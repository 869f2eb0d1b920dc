/*
 * POSIX's io_uring engine: one ring of queue_depth entries per backend.
 *
 * Whoever holds e->lock "pumps" the ring: reaps completions, continues short I/Os, fills free
 * slots from the FIFO of requests and submits. Buffered I/O on a warm page cache completes
 * inside io_uring_submit; its completions are reaped by the same thread's next round. Every
 * completion also signals the ring's eventfd (direct I/O completes from interrupts, which the
 * async-only eventfd would not report), which wakes the completion thread: it pumps until
 * nothing moves and wakes the agent's waiters when requests end. Pollers (check_xfer) pump
 * too, when the lock is free, so a polling caller never waits for a thread hop. A caller in
 * ixl_xfer_wait (wait_xfer) sleeps in the ring itself for up to the core's watch budget, with
 * the eventfd off, and pumps when the ring wakes it (uring_wait).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "posix.h"

#ifdef IXL_POSIX_HAVE_URING
#include <liburing.h>

struct uring {
    struct io_uring ring;
    int efd;
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    atomic_bool kicked; /* wake_thread asked the thread to pump (not only a completion) */
    bool can_quiet;     /* the kernel has IORING_CQ_EVENTFD_DISABLED (5.8) */
    bool can_watch;     /* can_quiet, and a timed wait in the ring (IORING_FEAT_EXT_ARG, 5.11) */
    unsigned quiet;     /* holders of the eventfd off (e->lock): a post, waiters in the ring */
    struct px_io *slots;
    uint32_t *free_slots;
    uint32_t nfree;
    int broken; /* errno of a hard io_uring_enter failure: the ring is never entered again */
};

static void free_slot(struct uring *u, struct px_io *io)
{
    u->free_slots[u->nfree++] = (uint32_t)(io - u->slots);
}

/* io_uring_enter failed hard: the I/Os in the submission ring were never consumed and never
 * will be (the ring is not entered again), so they fail, as does everything queued. */
static void fail_unsubmitted(struct px_engine *e, struct uring *u, int *finished)
{
    struct io_uring_sq *sq = &u->ring.sq;
    unsigned head = *sq->khead, tail = *sq->ktail;
    for (unsigned h = head; h != tail; h++) {
        struct io_uring_sqe *sqe = &sq->sqes[sq->array[h & sq->ring_mask]];
        struct px_io *io = (struct px_io *)(uintptr_t)sqe->user_data;
        bool fin;
        px_fail(e, io->r, IXL_ERR_IO, "io_uring_enter failed: %s", strerror(u->broken));
        px_done(e, io, -u->broken, &fin);
        free_slot(u, io);
        if (fin)
            (*finished)++;
    }
    px_stage_fail_ready(e, u->broken, finished);
    while (e->head != NULL)
        if (px_fail(e, e->head, IXL_ERR_IO, "io_uring_enter failed earlier: %s",
                    strerror(u->broken)))
            (*finished)++;
}

static void prep_sqe(struct io_uring_sqe *sqe, struct px_io *io)
{
    if (io->r->to_file)
        io_uring_prep_write(sqe, io->f->fd, io->buf, io->len, io->off);
    else
        io_uring_prep_read(sqe, io->f->fd, io->buf, io->len, io->off);
    io_uring_sqe_set_data(sqe, io);
}

/* One round (e->lock held): reap, continue, fill, submit. Returns whether anything moved;
 * *finished counts requests that ended. */
static bool pump(struct px_engine *e, struct uring *u, int *finished)
{
    bool moved = false;
    unsigned queued = 0;
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
        struct px_io *io = io_uring_cqe_get_data(cqe);
        long res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        moved = true;
        bool fin = false;
        if (res == -EAGAIN || res == -EINTR || px_done(e, io, res, &fin)) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
            if (sqe != NULL) { /* always: at most queue_depth I/Os exist */
                prep_sqe(sqe, io);
                queued++;
                continue;
            }
            px_fail(e, io->r, IXL_ERR_IO, "io_uring submission queue full");
            px_done(e, io, -EIO, &fin);
        }
        free_slot(u, io);
        if (fin)
            (*finished)++;
    }
    if (u->broken) {
        fail_unsubmitted(e, u, finished);
        return moved;
    }
    while (u->nfree > 0 && px_has_io(e)) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        if (sqe == NULL)
            break;
        struct px_io *io = &u->slots[u->free_slots[--u->nfree]];
        px_take(e, io); /* true: px_has_io said there is an I/O to start */
        prep_sqe(sqe, io);
        queued++;
    }
    if (queued > 0 || io_uring_sq_ready(&u->ring) > 0) {
        int rc = io_uring_submit(&u->ring);
        if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) {
            e->host->log(e->host->ctx, IXL_LOG_ERROR,
                         "io_uring_enter: %s; requests on this backend fail from now on",
                         strerror(-rc));
            u->broken = -rc;
            fail_unsubmitted(e, u, finished);
            return true;
        }
        moved = moved || rc > 0;
    }
    return moved;
}

/* Completions in the ring not yet reaped, read without e->lock (the head is advanced under
 * it, by a release store): only a hint, for the completion thread's choice to take the lock. */
static unsigned cq_pending(const struct uring *u)
{
    return __atomic_load_n(u->ring.cq.ktail, __ATOMIC_ACQUIRE) -
           __atomic_load_n(u->ring.cq.khead, __ATOMIC_ACQUIRE);
}

static void wake_thread(struct uring *u)
{
    atomic_store(&u->kicked, true);
    uint64_t one = 1;
    ssize_t n = posix_sys()->write(u->efd, &one, sizeof(one));
    (void)n; /* a full counter already wakes it */
}

/* A full barrier. GCC refuses atomic_thread_fence under -fsanitize=thread (-Wtsan, an error
 * with -Werror): there a locked read-modify-write, a full barrier on x86, stands in for it. */
static void full_fence(void)
{
#if defined(__SANITIZE_THREAD__)
    static atomic_int dummy;
    atomic_fetch_add(&dummy, 0);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* The ring's eventfd off while a thread that reaps what completes is sure to look (e->lock
 * held): a posting thread reaping inline, a waiter asleep in the ring. quiet_off turns it back
 * on when the last holder leaves and wakes the completion thread for what came meanwhile. */
static void quiet_on(struct uring *u)
{
    if (u->quiet++ == 0)
        io_uring_cq_eventfd_toggle(&u->ring, false);
}

static void quiet_off(struct uring *u)
{
    if (--u->quiet == 0) {
        io_uring_cq_eventfd_toggle(&u->ring, true);
        full_fence(); /* the flag store before the tail load */
        if (io_uring_cq_ready(&u->ring) > 0)
            wake_thread(u);
    }
}

static void *completion_main(void *arg)
{
    struct px_engine *e = arg;
    struct uring *u = e->impl;
    while (!atomic_load(&u->stop)) {
        struct pollfd p = {.fd = u->efd, .events = POLLIN};
        if (posix_sys()->poll(&p, 1, 1000) > 0) {
            uint64_t v;
            ssize_t n = posix_sys()->read(u->efd, &v, sizeof(v));
            (void)n;
        }
        /* The eventfd fires for every completion, also those the posting thread reaped
         * inline (buffered I/O on a warm cache): with none left in the ring and no kick,
         * there is nothing to do, and taking e->lock would only hold up the next post.
         * Nothing is lost: a completion posted after the read above fires the eventfd
         * again. (A timeout looks too: a safety net.) */
        if (!atomic_exchange(&u->kicked, false) && cq_pending(u) == 0)
            continue;
        for (;;) {
            int fin = 0;
            pthread_mutex_lock(&e->lock);
            bool moved = pump(e, u, &fin);
            pthread_mutex_unlock(&e->lock);
            if (fin)
                e->host->signal(e->host->ctx);
            if (!moved)
                break;
        }
    }
    return NULL;
}

static int uring_start(struct px_engine *e, char *why, size_t why_len)
{
    struct uring *u = posix_sys()->calloc(1, sizeof(*u));
    if (u == NULL) {
        snprintf(why, why_len, "calloc: out of memory");
        return IXL_ERR_NO_MEMORY;
    }
    u->efd = -1;
    int rc = posix_sys()->io_uring_queue_init(e->qd, &u->ring, 0);
    if (rc < 0) {
        snprintf(why, why_len, "io_uring_queue_init (io_uring_setup): %s", strerror(-rc));
        free(u);
        return rc == -ENOMEM ? IXL_ERR_NO_MEMORY : IXL_ERR_NOT_SUPPORTED;
    }
    /* What a seccomp filter or a policy may refuse separately: entering the ring (a no-op
     * round trip) and registering with it (the eventfd). */
    const char *step = "io_uring_enter";
    struct io_uring_sqe *nop = io_uring_get_sqe(&u->ring);
    io_uring_prep_nop(nop);
    rc = io_uring_submit_and_wait(&u->ring, 1);
    struct io_uring_cqe *cqe;
    if (rc >= 0 && (rc = io_uring_peek_cqe(&u->ring, &cqe)) == 0) {
        rc = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
    }
    u->efd = posix_sys()->eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rc >= 0) {
        step = "eventfd";
        rc = u->efd < 0 ? -errno : 0;
    }
    if (rc >= 0) {
        step = "io_uring_register";
        rc = io_uring_register_eventfd(&u->ring, u->efd);
    }
    struct io_uring_probe *probe = rc >= 0 ? io_uring_get_probe_ring(&u->ring) : NULL;
    if (rc >= 0 && !(probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                     io_uring_opcode_supported(probe, IORING_OP_WRITE))) {
        step = "probe";
        rc = -EOPNOTSUPP;
    }
    if (probe)
        io_uring_free_probe(probe);
    u->slots = posix_sys()->calloc(e->qd, sizeof(*u->slots));
    u->free_slots = posix_sys()->calloc(e->qd, sizeof(*u->free_slots));
    if (rc >= 0 && (u->slots == NULL || u->free_slots == NULL)) {
        step = "calloc";
        rc = -ENOMEM;
    }
    if (rc < 0) {
        if (rc == -EOPNOTSUPP)
            snprintf(why, why_len, "the kernel's io_uring lacks READ/WRITE (needs Linux 5.6)");
        else
            snprintf(why, why_len, "%s: %s", step, strerror(-rc));
        if (u->efd >= 0)
            posix_sys()->close(u->efd);
        free(u->slots);
        free(u->free_slots);
        io_uring_queue_exit(&u->ring);
        free(u);
        return rc == -ENOMEM ? IXL_ERR_NO_MEMORY : IXL_ERR_NOT_SUPPORTED;
    }
    for (uint32_t i = 0; i < e->qd; i++)
        u->free_slots[u->nfree++] = e->qd - 1 - i;
    u->can_quiet = io_uring_cq_eventfd_toggle(&u->ring, true) == 0;
    u->can_watch = u->can_quiet && (u->ring.features & IORING_FEAT_EXT_ARG);
    atomic_init(&u->stop, false);
    atomic_init(&u->kicked, false);
    e->impl = u;
    return IXL_OK;
}

static void uring_stop(struct px_engine *e)
{
    struct uring *u = e->impl;
    if (u == NULL)
        return;
    atomic_store(&u->stop, true);
    if (u->thread_started) {
        wake_thread(u);
        pthread_join(u->thread, NULL);
    }
    io_uring_queue_exit(&u->ring); /* waits for what is still in the kernel */
    posix_sys()->close(u->efd);
    free(u->slots);
    free(u->free_slots);
    free(u);
    e->impl = NULL;
}

static void uring_kick(struct px_engine *e)
{
    struct uring *u = e->impl;
    if (!u->thread_started) {
        if (posix_sys()->pthread_create(&u->thread, NULL, completion_main, e) == 0)
            u->thread_started = true;
        else
            e->host->log(e->host->ctx, IXL_LOG_WARN,
                         "cannot start the completion thread; requests complete when "
                         "polled");
    }
    int fin = 0;
    /* With nothing else in the kernel, the eventfd is off while this thread submits and reaps:
     * the completions it reaps here would only wake the completion thread for nothing (a
     * context switch on a busy CPU, in the middle of the post). The only completions that can
     * be posted meanwhile are those of the I/Os submitted here: inline ones, and those the
     * kernel posts through task work on this thread (the submitter), seen below in program
     * order; the eventfd is back on before the check that wakes the thread for what is left. */
    bool quiet = u->can_quiet && e->inflight == 0;
    if (quiet)
        quiet_on(u);
    /* Buffered I/O on a warm page cache completes inside io_uring_enter: its completions are
     * in the ring when submit returns. Reaping them here, on the posting thread, ends such a
     * request inside post_xfer (no thread hop, no wait); a few rounds at most, so that posting
     * a long request does not do all of its I/O. */
    for (int i = 0; i < 4 && pump(e, u, &fin) && io_uring_cq_ready(&u->ring) > 0; i++) {
    }
    /* Completions left for the next round: the thread goes on with them, so a request
     * progresses without a poller (quiet_off wakes it for those when it turns the eventfd
     * back on; with a waiter in the ring, that waiter reaps them). */
    if (quiet)
        quiet_off(u);
    else if (io_uring_cq_ready(&u->ring) > 0)
        wake_thread(u);
    if (fin)
        e->host->signal(e->host->ctx);
}

static void uring_poll(struct px_engine *e)
{
    struct uring *u = e->impl;
    if (pthread_mutex_trylock(&e->lock) != 0)
        return; /* someone is pumping: they wake the waiters */
    int fin = 0;
    for (int i = 0; i < 4 && pump(e, u, &fin); i++) {
    }
    if (io_uring_cq_ready(&u->ring) > 0 || (px_has_io(e) && u->nfree > 0))
        wake_thread(u);
    pthread_mutex_unlock(&e->lock);
    if (fin)
        e->host->signal(e->host->ctx);
}

/* A waiting caller (wait_xfer) sleeps in the ring itself, as fio at iodepth 1 does, for up to
 * budget_ns: the kernel posts a direct I/O's completion through task work on the thread that
 * submitted it, usually this one, here in the wait, and the wait returns with it. Without this
 * the completion goes from the task work (which has to interrupt this thread's sleep anyway)
 * through the eventfd to the completion thread, which reaps it and wakes this thread again:
 * two more wake-ups, tens of microseconds each on a virtual machine. Meanwhile the eventfd is
 * off (quiet): this thread reaps every completion of the ring, and signals the agent's other
 * waiters. Nothing is consumed from the ring without e->lock: the kernel's wait only reads it. */
static void uring_wait(struct px_engine *e, struct px_req *r, uint64_t budget_ns)
{
    struct uring *u = e->impl;
    if (!u->can_watch)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t end = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + budget_ns;
    pthread_mutex_lock(&e->lock);
    quiet_on(u);
    for (;;) {
        int fin = 0;
        for (int i = 0; i < 4 && pump(e, u, &fin); i++) {
        }
        if (fin)
            e->host->signal(e->host->ctx);
        if (u->broken || atomic_load(&r->state) != PX_RUNNING)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t t = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
        if (t >= end)
            break;
        /* Completions already in the ring are reaped above, under the lock: the kernel's wait
         * returns when one more is there, or when the time is up. */
        struct __kernel_timespec ts = {.tv_sec = (long long)((end - t) / 1000000000u),
                                       .tv_nsec = (long long)((end - t) % 1000000000u)};
        struct io_uring_getevents_arg arg = {
            .sigmask = 0, .sigmask_sz = _NSIG / 8, .ts = (uint64_t)(uintptr_t)&ts};
        pthread_mutex_unlock(&e->lock);
        io_uring_enter2((unsigned)u->ring.ring_fd, 0, 1,
                        IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, (sigset_t *)&arg,
                        sizeof(arg));
        pthread_mutex_lock(&e->lock);
    }
    quiet_off(u);
    pthread_mutex_unlock(&e->lock);
}

static bool uring_drain(struct px_engine *e, struct px_req *r, int ms)
{
    struct uring *u = e->impl;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int fin = 0;
        pump(e, u, &fin);
        if (fin)
            e->host->signal(e->host->ctx);
        if (r->inflight == 0)
            return true;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
            return false;
        pthread_mutex_unlock(&e->lock);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&e->lock);
    }
}

#else /* built without liburing */

static int uring_start(struct px_engine *e, char *why, size_t why_len)
{
    (void)e;
    snprintf(why, why_len,
             "ixl was built without liburing (IXL_WITH_URING=OFF; rebuild with it ON, which "
             "needs liburing-dev)");
    return IXL_ERR_NOT_SUPPORTED;
}
static void uring_stop(struct px_engine *e)
{
    (void)e;
}
static void uring_kick(struct px_engine *e)
{
    (void)e;
}
static void uring_poll(struct px_engine *e)
{
    (void)e;
}
static void uring_wait(struct px_engine *e, struct px_req *r, uint64_t budget_ns)
{
    (void)e;
    (void)r;
    (void)budget_ns;
}
static bool uring_drain(struct px_engine *e, struct px_req *r, int ms)
{
    (void)e;
    (void)r;
    (void)ms;
    return true;
}

#endif

const struct px_ops px_uring_ops = {
    .name = "io_uring",
    .start = uring_start,
    .stop = uring_stop,
    .kick = uring_kick,
    .poll = uring_poll,
    .wait = uring_wait,
    .drain = uring_drain,
};

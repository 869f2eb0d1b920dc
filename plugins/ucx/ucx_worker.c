/* UCX plugin: the workers (progress threads, the deadline) and their endpoints. See ucx.h. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "ucx.h"

void lock_workers(struct ucx_engine *e)
{
    for (unsigned i = 0; i < e->nw; i++)
        pthread_mutex_lock(&e->w[i].lock);
}

void unlock_workers(struct ucx_engine *e)
{
    for (unsigned i = e->nw; i-- > 0;)
        pthread_mutex_unlock(&e->w[i].lock);
}

void wake_now(struct ucx_worker *w)
{
    uint64_t one = 1;
    if (write(w->wakefd, &one, sizeof(one)) < 0) {
    }
}

/* Wakes w's thread if it may be sleeping in epoll: it sets `asleep` under w->lock after it
 * found nothing to do, so a caller that changed w's state under the lock and then sees it
 * false knows the thread will see that change before it sleeps (no write per post while the
 * thread polls). */
void wake(struct ucx_worker *w)
{
    if (atomic_load(&w->asleep))
        wake_now(w);
}

/* Progresses the worker until `until` (ms) has passed. Under w->lock. */
static void progress_until_locked(struct ucx_worker *w, uint64_t until)
{
    while (now_ms() < until)
        if (ucp_worker_progress(w->w) == 0)
            sched_yield();
}

/* Force-closes r's endpoint from worker w: every operation on it completes (canceled). Under
 * w->lock. */
void close_ep_locked(struct ucx_worker *w, struct ucx_remote *r)
{
    struct ucx_lane *l = &r->lane[w->idx];
    if (l->ep == NULL)
        return;
    ops_drop(w, r, NULL, IXL_ERR_REMOTE_DISCONNECT); /* replies on the old endpoint never come */
    /* UCX refuses a forced close without peer error handling: then the endpoint is flushed
     * and closed (bounded below; UCX finishes it if the peer answers later). */
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = w->e->err_mode == UCP_ERR_HANDLING_MODE_PEER ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    void *cr = ucp_ep_close_nbx(l->ep, &p);
    if (UCS_PTR_IS_PTR(cr)) {
        /* A forced close completes at once or within a few progress calls; it must end before
         * the worker is destroyed, and the requests it cancels report through their own
         * callbacks. */
        for (int i = 0; i < 1000 && ucp_request_check_status(cr) == UCS_INPROGRESS; i++)
            ucp_worker_progress(w->w);
        ucp_request_free(cr);
    }
    l->ep = NULL;
    l->failed = false;
    l->stalled = false;
    l->gen++;
    l->path[0] = '\0';
    l->quiet_until = now_ms() + UCX_REOPEN_QUIET_MS;
}

/* Which transports the endpoint's lanes use, from ucp_ep_print_info (1.13 has no query), and
 * whether one of them is an RMA lane (none: UCX would emulate put/get with messages). */
static bool ep_path(ucp_ep_h ep, char *out, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    bool rma = false;
    out[0] = '\0';
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return true;
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* lines like "#   lane[1]:  8:posix/memory.0 md[4]  ... rma_bw#0" */
    size_t used = 0;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        char *colon = strstr(line, "lane[");
        if (colon != NULL && strstr(colon, "rma") != NULL)
            rma = true;
        if (colon != NULL && (colon = strchr(colon, ':')) != NULL &&
            (colon = strchr(colon + 1, ':')) != NULL &&
            (strstr(line, "rma") != NULL || strstr(line, "am") != NULL)) {
            char tl[24];
            size_t k = 0;
            for (const char *s = colon + 1; *s && *s != '/' && *s != ' ' && k + 1 < sizeof(tl); s++)
                tl[k++] = *s;
            tl[k] = '\0';
            if (k > 0 && strstr(out, tl) == NULL && used + k + 2 < n) {
                used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "," : "", tl);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return rma;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct ucx_lane *l = arg;
    if (l->ep == ep)
        l->failed = true; /* closed after this progress call returns */
    (void)status;
}

/* Whether the transports allowed may include shared memory ones. */
static bool tls_has_shm(const char *tls)
{
    static const char *const shm_tls[] = {"all", "sm", "posix", "sysv", "cma", "xpmem", "knem"};
    for (size_t i = 0; i < sizeof(shm_tls) / sizeof(shm_tls[0]); i++)
        if (strstr(tls, shm_tls[i]) != NULL)
            return true;
    return false;
}

/* Whether UCX may open its tcp transport with these UCX_TLS and UCX_NET_DEVICES: tcp allowed
 * ("^..." lists what is excluded) and a device that is not an RDMA port ("mlx5_0:1"). */
bool tcp_may_open(const char *tls, const char *devices)
{
    bool tl = tls[0] == '^' ? strstr(tls, "tcp") == NULL
                            : strstr(tls, "all") != NULL || strstr(tls, "tcp") != NULL;
    if (!tl || strcmp(devices, "all") == 0)
        return tl;
    for (const char *d = devices; *d != '\0'; d += strcspn(d, ","), d += *d == ',') {
        size_t n = strcspn(d, ",");
        if (n > 0 && memchr(d, ':', n) == NULL)
            return true;
    }
    return false;
}

/* r's endpoint from worker w, created if needed. Under w->lock. */
int ep_get_locked(struct ucx_worker *w, struct ucx_remote *r, ucp_ep_h *out)
{
    struct ucx_engine *e = w->e;
    struct ucx_lane *l = &r->lane[w->idx];
    if (atomic_load(&r->stalled)) {
        fail(e, IXL_ERR_REMOTE_DISCONNECT,
             "agent '%s' stopped completing operations (none for timeout_ms=%" PRIu64
             " ms; stopped or unreachable): new requests fail until it answers again or is "
             "reloaded",
             r->name, e->timeout_ms);
        return IXL_ERR_REMOTE_DISCONNECT;
    }
    if (l->ep != NULL && !l->failed) {
        *out = l->ep;
        return IXL_OK;
    }
    if (l->failed)
        close_ep_locked(w, r);
    if (r->n_addrs == 0) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s': load its metadata", r->name);
        return IXL_ERR_NOT_FOUND;
    }
    progress_until_locked(w, l->quiet_until); /* the old endpoint's teardown ends first */
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = r->addr[w->idx % r->n_addrs],
        .err_mode = (ucp_err_handling_mode_t)e->err_mode,
        .err_handler = {.cb = ep_err_cb, .arg = l},
    };
    ucp_ep_h ep;
    ucs_status_t st = ucp_ep_create(w->w, &p, &ep);
    if (st != UCS_OK) {
        int rc = status_of(st);
        bool peer = e->err_mode == UCP_ERR_HANDLING_MODE_PEER;
        /* UCX says "unreachable" both for a refused configuration and for a peer that is gone
         * (tcp: connection refused). One this worker reached at this address before is a peer
         * that went away, as NET reports it; otherwise, with peer error handling and shared
         * memory allowed, the configuration is the likely cause and the message says so. */
        bool config = peer && !l->reached && tls_has_shm(e->tls);
        if (rc == IXL_ERR_UNREACHABLE || rc == IXL_ERR_REMOTE_DISCONNECT)
            rc = config ? IXL_ERR_UNREACHABLE : IXL_ERR_REMOTE_DISCONNECT;
        fail(e, rc, "cannot create an endpoint to '%s' with transports '%s' and err_mode=%s: %s%s",
             r->name, e->tls, peer ? "peer" : "none", ucs_status_string(st),
             config ? " (UCX 1.13 refuses shared memory transports (shm, sm, posix, sysv, cma, "
                      "xpmem, knem) with peer error handling: use err_mode=none for them, or a "
                      "network transport such as tcp)"
             : rc == IXL_ERR_REMOTE_DISCONNECT ? " (the peer is gone)"
                                               : "");
        return rc;
    }
    l->ep = ep;
    l->failed = false;
    l->reached = true;
    l->gen++;
    l->sw_rma = !ep_path(ep, l->path, sizeof(l->path)) && e->own_rma;
    *out = ep;
    return IXL_OK;
}

void active_add(struct ucx_worker *w, struct ucx_part *p)
{
    p->aprev = NULL;
    p->anext = w->active;
    if (w->active != NULL)
        w->active->aprev = p;
    w->active = p;
    w->n_active++;
    w->any_seq++;
}

void active_del(struct ucx_worker *w, struct ucx_part *p)
{
    if (p->aprev != NULL)
        p->aprev->anext = p->anext;
    else
        w->active = p->anext;
    if (p->anext != NULL)
        p->anext->aprev = p->aprev;
    p->anext = p->aprev = NULL;
    w->n_active--;
}

/* Whether r's lane l cannot take new operations: no endpoint, a failed one, or a stalled peer.
 * Under that lane's worker lock. */
bool lane_down(const struct ucx_lane *l, struct ucx_remote *r)
{
    return l->ep == NULL || l->failed || l->stalled || atomic_load(&r->stalled);
}

/* r's lane of w missed the deadline: its requests in flight fail now (their operations stay
 * with UCX, the requests stay busy until those end). Under w->lock. */
static void lane_stall_locked(struct ucx_worker *w, struct ucx_remote *r, uint64_t silent_ms)
{
    struct ucx_engine *e = w->e;
    r->lane[w->idx].stalled = true;
    atomic_store(&r->stalled, true);
    e->host->log(e->host->ctx, IXL_LOG_WARN,
                 "UCX: no operation to '%s' completed for %" PRIu64
                 " ms (timeout_ms): its requests fail; UCX keeps their operations until the "
                 "peer answers or dies",
                 r->name, silent_ms);
    for (struct ucx_part *p = w->active; p != NULL; p = p->anext) {
        if (p->q->rem != r)
            continue;
        req_set_err(p->q, IXL_ERR_REMOTE_DISCONNECT);
        int ip = IXL_IN_PROGRESS;
        atomic_compare_exchange_strong(&p->q->status, &ip, IXL_ERR_REMOTE_DISCONNECT);
    }
    e->host->signal(e->host->ctx);
}

/* ---- progress ---------------------------------------------------------------------------------
 */

/* Callers' passes between two deadline scans (a power of 2). A caller that watches or polls a
 * request passes every few hundred nanoseconds; the scan reads the clock and walks every
 * remote. */
#define UCX_SCAN_PASSES 16

/* The deadline scan: dates each lane's last activity (the moves of its `acts`), fails
 * endpoints past the deadline and closes failed ones. Under w->lock. */
static bool scan_locked(struct ucx_worker *w)
{
    struct ucx_engine *e = w->e;
    bool any = false;
    uint64_t now = e->timeout_ms > 0 ? now_ms() : 0;
    for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next) {
        struct ucx_lane *l = &r->lane[w->idx];
        if (l->acts != l->acts_seen) {
            l->acts_seen = l->acts;
            l->last_ms = now;
        }
        if (now > l->last_ms && w->n_active > 0 && l->ep != NULL && !l->failed && !l->stalled &&
            l->outstanding > 0 && now - l->last_ms > e->timeout_ms) {
            lane_stall_locked(w, r, now - l->last_ms);
            any = true;
        }
        if (l->failed) {
            close_ep_locked(w, r);
            any = true;
        }
    }
    return any;
}

/* Progresses the worker, starts queued parts, moves completed parts on; scans the deadlines
 * (scan_locked) when `scan` (the worker's thread, teardown) or every UCX_SCAN_PASSES-th pass
 * (callers). Under w->lock. Returns whether anything happened. No clock is read but by the
 * scan: a 4 KiB request over shared memory, when every pass read it, made ~35 readings at ~33
 * ns each on this project's VM (22% of the initiator's CPU samples; ~10 now). */
bool progress_locked(struct ucx_worker *w, bool scan)
{
    bool any = false;
    while (w->todo != NULL) {
        struct ucx_part *p = w->todo;
        w->todo = p->next;
        if (w->todo == NULL)
            w->todo_tail = &w->todo;
        part_start_locked(w, p);
        any = true;
    }
    for (int i = 0; i < 64 && ucp_worker_progress(w->w) != 0; i++)
        any = true;
    while (w->ready != NULL) {
        struct ucx_part *p = w->ready;
        w->ready = p->next;
        p->queued = false;
        part_advance_locked(w, p);
        any = true;
    }
    if (scan || (++w->passes & (UCX_SCAN_PASSES - 1)) == 0)
        any = scan_locked(w) || any;
    if (any) /* the worker's thread keeps polling for spin_us after the last of these */
        w->any_seq++;
    return any;
}

/* A caller (check_xfer, wait_xfer) progressed w within this long: it drives the worker, and
 * the thread stands back instead of competing for the lock and a CPU. */
#define UCX_CALLER_NS 5000u
/* How long the thread sleeps while a caller polls, before it looks again. */
#define UCX_STANDBY_NS 100000

/* Whether a caller drives w: a waiter watches it (wait_xfer; for at most its budget, and it
 * wakes this thread when it stops with work left), or a caller marked it within UCX_CALLER_NS.
 * A watcher that yielded its CPU (to this thread, on a CPU they share) still drives it. The
 * mark is read before the clock (UCX_CALLER_IN: a caller is in the worker now): a caller that
 * polls marks continuously, and a mark newer than this thread's clock reading must not count as
 * an ancient one through the unsigned difference (then the thread never stood back from a
 * polling caller and fought it for the lock). */
static bool caller_recent(struct ucx_worker *w)
{
    if (atomic_load(&w->watched))
        return true;
    uint64_t c = atomic_load(&w->caller_ns);
    uint64_t n = now_ns();
    return c != 0 && (c >= n || n - c < UCX_CALLER_NS);
}

void *progress_main(void *arg)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    int ms = (int)((e->progress_us + 999) / 1000);
    if (ms < 1)
        ms = 1;
    while (!atomic_load(&e->stop)) {
        if (caller_recent(w)) {
            /* A caller polls the worker: this thread sleeps rather than spinning beside it (a
             * third runnable thread on two CPUs can leave the peer's thread waiting for a
             * CPU for a scheduler tick). A waiting caller wakes it when it stops watching
             * (caller_release); a caller that polls through check_xfer is seen gone at the
             * next look, UCX_STANDBY_NS later. */
            struct pollfd pf = {.fd = w->wakefd, .events = POLLIN};
            struct timespec ts = {.tv_sec = 0, .tv_nsec = UCX_STANDBY_NS};
            atomic_store(&w->standby, true);
            if (caller_recent(w) && ppoll(&pf, 1, &ts, NULL) > 0) {
                uint64_t v;
                if (read(w->wakefd, &v, sizeof(v)) < 0) {
                }
            }
            atomic_store(&w->standby, false);
            continue;
        }
        if (pthread_mutex_trylock(&w->lock) != 0) {
            /* A caller holds the worker (a post, or a poll or watch that began after the look
             * above): it progresses it. Blocking here would park this thread in the kernel
             * and make the caller's unlock wake it, and the thread's own unlock after a
             * contended lock wakes again: two to three futex calls per request against a
             * polling caller (issue 18). It yields and looks again instead. */
            sched_yield();
            continue;
        }
        bool any = progress_locked(w, true);
        /* Spins while parts are in flight, unless nothing happened for UCX_STALL_MS (a stalled
         * peer): then it sleeps on the worker's events like an idle worker. An idle worker
         * keeps polling for spin_us after the last thing it did, so that the next message (the
         * next request of a peer, or of this process) is handled without a wake-up through
         * the event fd: a wake-up costs tens of microseconds, and over shared memory it makes
         * the sender signal this worker with a system call. */
        uint64_t ns = now_ns(), now = ns / 1000000u;
        if (w->any_seq != w->any_seen) { /* this pass or callers' did something */
            w->any_seen = w->any_seq;
            w->last_any_ns = ns;
            w->last_any_ms = now;
        }
        bool busy = w->n_active > 0 && now - w->last_any_ms < UCX_STALL_MS;
        bool hot = ns - w->last_any_ns < e->spin_ns;
        ucs_status_t st = UCS_ERR_BUSY;
        if (!any && !busy && !hot) {
            st = ucp_worker_arm(w->w);
            if (st == UCS_OK)
                atomic_store(&w->asleep, true);
        }
        pthread_mutex_unlock(&w->lock);
        if (any || busy || hot) {
            sched_yield();
            continue;
        }
        if (st == UCS_ERR_BUSY)
            continue;
        struct epoll_event ev[2];
        int n = epoll_wait(w->epfd, ev, 2, ms);
        atomic_store(&w->asleep, false);
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == w->wakefd) {
                uint64_t v;
                if (read(w->wakefd, &v, sizeof(v)) < 0) {
                }
            }
    }
    return NULL;
}

/* A caller stops driving w (a watch in wait_xfer ended, or a waiter goes to sleep after
 * check_xfer marked w): the worker's thread takes over at once if it stands back. */
void caller_release(struct ucx_worker *w)
{
    atomic_store(&w->caller_ns, 0);
    if (atomic_load(&w->standby))
        wake_now(w);
}

/* One pass over every worker, on the caller's thread (ixl_agent_progress, and ixl_xfer_wait
 * before it watches or sleeps). A worker whose lock is taken is being progressed by its thread
 * or another caller: skipped. Waiting callers poll through wait_xfer (ucx_xfer.c), which
 * watches one request's worker. */
int ucx_progress(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        if (pthread_mutex_trylock(&w->lock) != 0)
            continue;
        progress_locked(w, false);
        pthread_mutex_unlock(&w->lock);
    }
    return IXL_OK;
}

struct ucx_worker *next_home(struct ucx_engine *e)
{
    return &e->w[atomic_fetch_add(&e->rr, 1) % e->nw];
}

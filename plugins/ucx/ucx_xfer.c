/* UCX plugin: requests (prep, post, check, release) and their parts' phases. See ucx.h. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* ---- requests ---------------------------------------------------------------------------------
 */

bool req_stopped(struct ucx_req *q)
{
    return atomic_load(&q->err) != 0 || atomic_load(&q->canceled);
}

void req_set_err(struct ucx_req *q, int status)
{
    int none = 0;
    atomic_compare_exchange_strong(&q->err, &none, status);
}

/* One of p's operations ended with an IXL status; `answered`: the peer took part in it (a
 * completed put/get/flush, a reply), so it is not stalled. Under p's worker lock. */
void op_done(struct ucx_part *p, int status, bool answered)
{
    struct ucx_lane *l = &p->q->rem->lane[p->w->idx];
    l->outstanding--;
    l->acts++;
    if (answered) {
        l->stalled = false; /* the peer answers (again) */
        if (atomic_exchange(&p->q->rem->stalled, false)) {
            struct ucx_engine *e = p->q->e;
            e->host->log(e->host->ctx, IXL_LOG_INFO, "UCX: '%s' completes operations again",
                         p->q->rem->name);
        }
    }
    if (status != IXL_OK)
        req_set_err(p->q, status);
    if (--p->pending == 0 && !p->queued) {
        /* The next phase starts after ucp_worker_progress returns, not inside UCX's
         * callback. */
        p->queued = true;
        p->next = p->w->ready;
        p->w->ready = p;
    }
}

static void op_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request); /* freeing it earlier would cancel this callback */
    op_done(user_data, status_of(status), status == UCS_OK);
}

/* Counts an operation's immediate result: a request (completes by op_cb), done, or failed. */
static void op_started(struct ucx_part *p, ucs_status_ptr_t sp)
{
    if (UCS_PTR_IS_PTR(sp))
        return; /* op_cb comes, and frees it */
    p->q->rem->lane[p->w->idx].outstanding--;
    p->pending--;
    if (UCS_PTR_STATUS(sp) != UCS_OK)
        req_set_err(p->q, status_of(UCS_PTR_STATUS(sp)));
}

/* Before an operation on p's endpoint. */
void op_count(struct ucx_part *p)
{
    struct ucx_lane *l = &p->q->rem->lane[p->w->idx];
    if (l->outstanding++ == 0)
        l->acts++;
    p->pending++;
}

static void req_finish(struct ucx_req *q)
{
    struct ucx_engine *e = q->e;
    int err = atomic_load(&q->err);
    int st = atomic_load(&q->canceled) ? IXL_ERR_CANCELED : err != 0 ? err : IXL_OK;
    atomic_store(&q->status, st);
    atomic_store(&q->busy, false); /* release may free q from here on */
    e->host->signal(e->host->ctx);
}

/* All operations of p's current phase completed: start its next phase or end it. The part that
 * ends last sends the notification (every part's flush is complete by then) and finishes the
 * request. Under w->lock. */
void part_advance_locked(struct ucx_worker *w, struct ucx_part *p)
{
    struct ucx_req *q = p->q;
    struct ucx_lane *l = &q->rem->lane[w->idx];
    ucp_request_param_t rp = {.op_attr_mask =
                                  UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = op_cb,
                              .user_data = p};
    for (;;) {
        if (p->am && p->phase == PH_DATA && !req_stopped(q) &&
            (p->nd < p->d1 || (p->nd == p->d1 && p->no < p->o1))) {
            p->pending++; /* nothing completing inside finishes the part */
            part_fill_am_locked(w, p);
            p->pending--;
        }
        if (p->pending != 0 || p->phase == PH_DONE)
            return;
        /* The replies to the plugin's own messages say the data is in place: no flush. */
        if (p->phase == PH_DATA && !p->am && !req_stopped(q) &&
            (q->op == IXL_OP_WRITE || q->notif != NULL)) {
            p->phase = PH_FLUSH;
            if (lane_down(l, q->rem)) {
                req_set_err(q, IXL_ERR_REMOTE_DISCONNECT);
                continue;
            }
            op_count(p);
            op_started(p, ucp_ep_flush_nbx(l->ep, &rp));
            continue;
        }
        if (p->phase == PH_NOTIF) {
            p->phase = PH_DONE;
            active_del(w, p);
            req_finish(q);
            return;
        }
        /* This part's data is in place at the target, or the request stopped. Once the count
         * below reaches 0 another worker may finish q: nothing of p is touched after it. */
        p->phase = PH_DONE;
        active_del(w, p);
        if (atomic_fetch_sub(&q->parts_left, 1) != 1)
            return;
        if (q->notif != NULL && !req_stopped(q)) {
            p->phase = PH_NOTIF;
            active_add(w, p);
            if (lane_down(l, q->rem)) {
                req_set_err(q, IXL_ERR_REMOTE_DISCONNECT);
                continue;
            }
            /* The target answers whether it queued the notification (its queue is bounded):
             * the request completes with that answer. */
            struct ucx_send *s = send_new(w, p, 0, q->notif_len);
            uint64_t token = s != NULL ? notif_op_new(w, q->rem, p, NULL) : 0;
            if (token == 0) {
                if (s != NULL)
                    send_free(s);
                req_set_err(q, IXL_ERR_NO_MEMORY);
                continue;
            }
            s->token = token;
            memcpy(send_bytes(s), q->notif, q->notif_len);
            op_count(p); /* the answer */
            op_count(p); /* the send */
            send_notif(l->ep, s, q->notif_len);
            continue;
        }
        req_finish(q);
        return;
    }
}

/* The rkey of a remote md for worker w's current endpoint. Under w->lock. */
static ucp_rkey_h rkey_get_locked(struct ucx_worker *w, struct ucx_md *m, ucp_ep_h ep, int *rc)
{
    struct ucx_rkey *k = &m->rk[w->idx];
    uint64_t gen = m->rem->lane[w->idx].gen;
    if (k->rkey != NULL && k->gen == gen)
        return k->rkey;
    if (k->rkey != NULL)
        ucp_rkey_destroy(k->rkey);
    k->rkey = NULL;
    ucs_status_t st = ucp_ep_rkey_unpack(ep, m->rkey_buf, &k->rkey);
    if (st != UCS_OK) {
        k->rkey = NULL;
        *rc = IXL_ERR_MALFORMED;
        fail(w->e, IXL_ERR_MALFORMED, "cannot unpack the remote key of a region of '%s': %s",
             m->rem->name, ucs_status_string(st));
        return NULL;
    }
    k->gen = gen;
    return k->rkey;
}

/* Issues p's puts or gets (at most UCX_CHUNK bytes each) on worker w. Under w->lock. */
void part_start_locked(struct ucx_worker *w, struct ucx_part *p)
{
    struct ucx_req *q = p->q;
    struct ucx_lane *l = &q->rem->lane[w->idx];
    p->phase = PH_DATA;
    p->pending = 1; /* held until every operation is issued */
    if (!req_stopped(q) && lane_down(l, q->rem))
        req_set_err(q, IXL_ERR_REMOTE_DISCONNECT); /* failed since post created it */
    p->am = l->sw_rma && q->local.type == IXL_MEM_DRAM && q->remote.type == IXL_MEM_DRAM;
    if (p->am) {
        p->nd = p->d0;
        p->no = p->o0;
        p->inflight = 0;
        part_fill_am_locked(w, p);
        p->pending--;
        part_advance_locked(w, p);
        return;
    }
    ucp_request_param_t rp = {.op_attr_mask =
                                  UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = op_cb,
                              .user_data = p};
    size_t d = p->d0;
    uint64_t off = p->o0;
    while (!req_stopped(q) && (d < p->d1 || (d == p->d1 && off < p->o1))) {
        const struct ixl_xfer_desc *ld = &q->local.descs[d], *rd = &q->remote.descs[d];
        uint64_t end = d == p->d1 ? p->o1 : ld->len;
        if (off >= end) {
            d++;
            off = 0;
            continue;
        }
        uint64_t n = end - off < UCX_CHUNK ? end - off : UCX_CHUNK;
        int rc = IXL_OK;
        ucp_rkey_h rkey = rkey_get_locked(w, (struct ucx_md *)rd->md, l->ep, &rc);
        if (rkey == NULL) {
            req_set_err(q, rc);
            break;
        }
        const struct ucx_md *lm = (const struct ucx_md *)ld->md;
        rp.memh = lm != NULL && lm->kind == MD_LOCAL ? lm->memh : NULL;
        rp.op_attr_mask = rp.memh != NULL ? rp.op_attr_mask | UCP_OP_ATTR_FIELD_MEMH
                                          : rp.op_attr_mask & ~(uint32_t)UCP_OP_ATTR_FIELD_MEMH;
        void *buf = (void *)(uintptr_t)(ld->addr + off);
        op_count(p);
        if (q->op == IXL_OP_WRITE)
            op_started(p, ucp_put_nbx(l->ep, buf, n, rd->addr + off, rkey, &rp));
        else
            op_started(p, ucp_get_nbx(l->ep, buf, n, rd->addr + off, rkey, &rp));
        off += n;
    }
    p->pending--;
    part_advance_locked(w, p);
}

/* Cuts the request into at most nw parts of about equal bytes, none under UCX_STRIPE_MIN
 * (except a request smaller than that: one part). */
static void req_cut(struct ucx_req *q, unsigned nw)
{
    const struct ixl_xfer_side *s = &q->local;
    uint64_t total = 0;
    for (size_t i = 0; i < s->count; i++)
        total += s->descs[i].len;
    uint64_t n = total / UCX_STRIPE_MIN;
    if (n > nw)
        n = nw;
    if (n == 0)
        n = 1;
    uint64_t share = (total + n - 1) / n;
    size_t d = 0;
    uint64_t off = 0;
    q->nparts = 0;
    for (unsigned k = 0; k < n; k++) {
        struct ucx_part *p = &q->part[q->nparts];
        p->q = q;
        p->d0 = d;
        p->o0 = off;
        uint64_t need = k + 1 == n ? UINT64_MAX : share, got = 0;
        while (need > 0 && d < s->count) {
            uint64_t avail = s->descs[d].len - off;
            if (avail <= need) {
                need -= avail;
                got += avail;
                d++;
                off = 0;
            } else {
                off += need;
                got += need;
                need = 0;
            }
        }
        p->d1 = d;
        p->o1 = off;
        if (got > 0 || q->nparts == 0)
            q->nparts++;
    }
}

int ucx_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                  const struct ixl_xfer_side *remote, const char *remote_agent,
                  const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (!(e->base.mem_mask & IXL_MEM_BIT(local->type)) ||
        !(e->base.mem_mask & IXL_MEM_BIT(remote->type))) {
        fail(e, IXL_ERR_BAD_MEM_TYPE, "memory types %d -> %d not supported", local->type,
             remote->type);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    pthread_mutex_unlock(&e->lock);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s': load its metadata",
             remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    for (size_t i = 0; i < remote->count; i++) {
        const struct ixl_xfer_desc *d = &remote->descs[i];
        const struct ucx_md *m = (const struct ucx_md *)d->md;
        if (m == NULL || m->kind != MD_REMOTE || m->rem != r || d->addr < m->addr ||
            d->len > m->len || d->addr - m->addr > m->len - d->len) {
            fail(e, IXL_ERR_NOT_REGISTERED,
                 "remote descriptor %zu lies outside the regions loaded for '%s'", i, remote_agent);
            return IXL_ERR_NOT_REGISTERED;
        }
    }
    struct ucx_req *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return IXL_ERR_NO_MEMORY;
    q->e = e;
    q->op = op;
    q->local = *local;
    q->remote = *remote;
    q->rem = r;
    req_cut(q, e->nw);
    atomic_init(&q->status, IXL_ERR_NOT_POSTED);
    atomic_init(&q->busy, false);
    if (opts != NULL && opts->notif != NULL &&
        (q->notif = ucx_notif_encode(e->name, opts->notif, opts->notif_len, &q->notif_len)) ==
            NULL) {
        free(q);
        return IXL_ERR_NO_MEMORY;
    }
    *out = (struct ixl_req *)q;
    return IXL_OK;
}

int ucx_post_xfer(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    if (atomic_load(&q->busy)) {
        fail(e, IXL_ERR_BUSY,
             "UCX still holds operations of this request's last post to '%s' (the peer stopped "
             "answering): post it again once the peer answers, or release it",
             q->rem->name);
        return IXL_ERR_BUSY;
    }
    if (opts->notif != q->notif) {
        free(q->notif);
        q->notif = NULL;
        if (opts->notif != NULL &&
            (q->notif = ucx_notif_encode(e->name, opts->notif, opts->notif_len, &q->notif_len)) ==
                NULL)
            return IXL_ERR_NO_MEMORY;
    }
    /* The endpoints first, so that a peer that cannot be reached fails the post itself. */
    unsigned home = (unsigned)(next_home(e) - e->w);
    for (unsigned k = 0; k < q->nparts; k++) {
        struct ucx_worker *w = &e->w[(home + k) % e->nw];
        q->part[k].w = w;
        ucp_ep_h ep;
        pthread_mutex_lock(&w->lock);
        int rc = ep_get_locked(w, q->rem, &ep);
        pthread_mutex_unlock(&w->lock);
        if (rc != IXL_OK)
            return rc;
    }
    atomic_store(&q->err, 0);
    atomic_store(&q->canceled, false);
    atomic_store(&q->parts_left, q->nparts);
    atomic_store(&q->status, IXL_IN_PROGRESS);
    atomic_store(&q->busy, true);
    for (unsigned k = 1; k < q->nparts; k++) { /* the other workers' threads issue these */
        struct ucx_part *p = &q->part[k];
        struct ucx_worker *w = p->w;
        pthread_mutex_lock(&w->lock);
        p->phase = PH_TODO;
        p->queued = false;
        p->next = NULL;
        *w->todo_tail = p;
        w->todo_tail = &p->next;
        active_add(w, p);
        pthread_mutex_unlock(&w->lock);
        wake(w);
    }
    struct ucx_worker *w = q->part[0].w;
    pthread_mutex_lock(&w->lock);
    q->part[0].queued = false;
    active_add(w, &q->part[0]); /* makes its progress thread spin while this is in flight */
    part_start_locked(w, &q->part[0]);
    progress_locked(w, false);
    pthread_mutex_unlock(&w->lock);
    int rc = atomic_load(&q->status);
    if (rc == IXL_IN_PROGRESS)
        wake(w);
    return rc;
}

/* Progresses the workers of q's parts; blocking (lock) or not (trylock). */
static bool req_progress(struct ucx_req *q, bool block)
{
    bool any = false;
    uint64_t ns = block ? 0 : now_ns();
    for (unsigned k = 0; k < q->nparts; k++) {
        struct ucx_worker *w = q->part[k].w;
        if (block) {
            pthread_mutex_lock(&w->lock);
        } else {
            atomic_store(&w->caller_ns, ns); /* a polling caller: the thread stands back */
            if (pthread_mutex_trylock(&w->lock) != 0)
                continue;
            /* Inside the pass the mark reads as recent however long the pass takes (a system
             * call or two over tcp, more on a loaded machine), and after it the mark is the
             * pass's end: otherwise a caller that polls continuously read as gone while it was
             * in the worker, and the thread, finding the lock taken, spun on it (32 yields per
             * 4 KiB request over tcp). */
            atomic_store(&w->caller_ns, UCX_CALLER_IN);
        }
        any = progress_locked(w, false) || any;
        pthread_mutex_unlock(&w->lock);
        if (!block)
            atomic_store(&w->caller_ns, now_ns());
    }
    return any;
}

int ucx_check_xfer(struct ixl_engine *base, struct ixl_req *req)
{
    (void)base;
    struct ucx_req *q = (struct ucx_req *)req;
    int st = atomic_load(&q->status);
    if (st == IXL_IN_PROGRESS) {
        req_progress(q, false);
        st = atomic_load(&q->status);
    }
    return st;
}

/* A watching caller yields its CPU after w->watch_spins polls in a row that found nothing, at
 * most this many. The count adapts to whether the CPU is shared: a sched_yield that returns
 * after more than UCX_YIELD_SHARED_NS let another thread run (the peer's progress thread, on a
 * machine with fewer free CPUs than spinning threads): then the watcher yields after every
 * empty poll, as the worker's own thread does, so that thread is not kept waiting for the
 * scheduler's tick; a yield that returns at once doubles the count again, up to this. With
 * CPUs to spare a short request (a 4 KiB put over shared memory, ~2 us) is watched without a
 * system call. */
#define UCX_WATCH_IDLE_SPINS 64
#define UCX_YIELD_SHARED_NS 3000u
/* Passes of a watch between readings of the clock (its budget). */
#define UCX_WATCH_CLOCK_PASSES 8
/* The longest a caller progresses a worker in one watch: the core's budget is for watches that
 * sleep (tens of milliseconds), and this one spins. */
#define UCX_WATCH_MAX_NS 1000000u

/* ixl_xfer_wait's watch (plugin ABI 2.5): the caller's thread progresses the worker of q's
 * part for up to budget_ns, and that worker's thread stands back meanwhile (caller_ns): the
 * polling a request in flight needs moves from the worker's thread to the waiter's, instead of
 * the waiter sleeping until that thread hands the completion over (host->signal, a futex
 * wake-up: several microseconds, tens on a loaded machine). Requests cut into parts on several
 * workers are not watched: their workers' threads issue and progress the parts in parallel,
 * which one caller would serialize. One caller watches a worker at a time; the others sleep
 * and are woken by the completions the watcher's progress delivers (req_finish). */
int ucx_wait_xfer(struct ixl_engine *base, struct ixl_req *req, uint64_t budget_ns)
{
    (void)base;
    struct ucx_req *q = (struct ucx_req *)req;
    int st = atomic_load(&q->status);
    if (st != IXL_IN_PROGRESS)
        return st;
    if (q->nparts != 1) {
        /* check_xfer just marked these workers: their threads must not stand back while
         * this caller sleeps. */
        for (unsigned k = 0; k < q->nparts; k++)
            if (!atomic_load(&q->part[k].w->watched)) /* a watcher keeps it driven */
                caller_release(q->part[k].w);
        return IXL_IN_PROGRESS;
    }
    struct ucx_worker *w = q->part[0].w;
    bool none = false;
    if (budget_ns == 0 || !atomic_compare_exchange_strong(&w->watched, &none, true))
        return IXL_IN_PROGRESS; /* the watcher's progress completes this request too */
    if (budget_ns > UCX_WATCH_MAX_NS)
        budget_ns = UCX_WATCH_MAX_NS;
    uint64_t t0 = now_ns(), ns = t0;
    /* w->watch_spins is the watcher's alone (watched); 0: not set yet */
    unsigned idle = 0, spins = w->watch_spins ? w->watch_spins : UCX_WATCH_IDLE_SPINS;
    atomic_store(&w->caller_ns, ns);
    for (unsigned pass = 1;; pass++) {
        bool any = false;
        if (pthread_mutex_trylock(&w->lock) == 0) {
            any = progress_locked(w, false);
            pthread_mutex_unlock(&w->lock);
        }
        st = atomic_load(&q->status);
        if (st != IXL_IN_PROGRESS)
            break;
        /* The clock every UCX_WATCH_CLOCK_PASSES passes, and before a yield: a reading costs
         * about what a pass that finds nothing does. (The thread stands back while `watched`
         * is set, whatever caller_ns says.) */
        bool yield = !any && idle + 1 >= spins;
        if (yield || pass % UCX_WATCH_CLOCK_PASSES == 0) {
            ns = now_ns();
            if (ns - t0 >= budget_ns)
                break;
        }
        if (any) {
            idle = 0;
        } else if (++idle >= spins) {
            idle = 0;
            sched_yield();
            uint64_t after = now_ns();
            spins = after - ns > UCX_YIELD_SHARED_NS ? 1
                    : spins < UCX_WATCH_IDLE_SPINS   ? spins * 2
                                                     : UCX_WATCH_IDLE_SPINS;
            ns = after;
        }
    }
    w->watch_spins = spins;
    atomic_store(&w->caller_ns, ns); /* read within the last UCX_WATCH_CLOCK_PASSES passes */
    atomic_store(&w->watched, false);
    /* The worker's thread takes over again at once when this request is still in flight (the
     * caller sleeps next) or other parts are; otherwise it looks again within UCX_STANDBY_NS
     * (the caller likely posts its next request before that). */
    bool more = st == IXL_IN_PROGRESS;
    if (!more) {
        pthread_mutex_lock(&w->lock);
        more = w->n_active > 0 || w->todo != NULL;
        pthread_mutex_unlock(&w->lock);
    }
    if (more)
        caller_release(w);
    return st;
}

/* Progresses until UCX is done with q or ms ran out. */
static bool wait_done(struct ucx_req *q, uint64_t ms)
{
    uint64_t end = now_ms() + ms;
    while (atomic_load(&q->busy) && now_ms() < end)
        if (!req_progress(q, true))
            sched_yield();
    return !atomic_load(&q->busy);
}

int ucx_release_req(struct ixl_engine *base, struct ixl_req *req)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    if (atomic_load(&q->busy)) {
        atomic_store(&q->canceled, true); /* no more phases: no flush, no notification */
        /* Replies awaited by the plugin's own messages are dropped: a late one finds no slot,
         * so nothing lands in the buffers after this returns. What UCX still sends from them
         * (a WRITE's bytes) it must finish. */
        for (unsigned k = 0; k < q->nparts; k++) {
            struct ucx_worker *w = q->part[k].w;
            pthread_mutex_lock(&w->lock);
            if (q->part[k].replies > 0)
                ops_drop(w, NULL, &q->part[k], IXL_ERR_CANCELED);
            pthread_mutex_unlock(&w->lock);
        }
        if (!wait_done(q, UCX_RELEASE_WAIT_MS)) {
            /* A put or get cannot be canceled once issued, and the forced close that would
             * cancel them is not safe in UCX 1.13 (see UCX_STALL_MS): the operations end on
             * their own, completed or failed (a dead peer), and a later release succeeds. */
            fail(e, IXL_ERR_BUSY,
                 "a request to '%s' still has operations in UCX, which cannot cancel them: "
                 "release again once they end (completed, or failed if the peer is gone)",
                 q->rem->name);
            pthread_mutex_lock(&e->lock);
            if (!q->held) {
                q->held = true;
                q->hprev = NULL;
                q->hnext = e->held;
                if (e->held != NULL)
                    e->held->hprev = q;
                e->held = q;
            }
            pthread_mutex_unlock(&e->lock);
            return IXL_ERR_BUSY;
        }
    }
    pthread_mutex_lock(&e->lock);
    if (q->held) {
        if (q->hprev != NULL)
            q->hprev->hnext = q->hnext;
        else
            e->held = q->hnext;
        if (q->hnext != NULL)
            q->hnext->hprev = q->hprev;
    }
    pthread_mutex_unlock(&e->lock);
    free(q->notif);
    free(q);
    return IXL_OK;
}

int ucx_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)base;
    struct ucx_req *q = (struct ucx_req *)req;
    struct ucx_worker *w = q->part[0].w != NULL ? q->part[0].w : &q->e->w[0];
    pthread_mutex_lock(&w->lock);
    const struct ucx_lane *l = &q->rem->lane[w->idx];
    bool am = l->sw_rma && q->local.type == IXL_MEM_DRAM && q->remote.type == IXL_MEM_DRAM;
    snprintf(out->path, sizeof(out->path), "%s%s", l->path, am ? "+am" : "");
    pthread_mutex_unlock(&w->lock);
    return IXL_OK;
}

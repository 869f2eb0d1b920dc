/*
 * UCX: a dynamically loaded backend plugin on UCP (libucx), built through the plugin ABI alone.
 *
 * One UCP context and one worker per engine; the worker runs in UCS_THREAD_MODE_SERIALIZED and
 * every call into it is made under e->lock, so UCX's callbacks (completion, endpoint error,
 * active message) also run under it. Lock order: e->lock, then e->nlock (notifications).
 *
 * Connection info is the worker address, public data a packed remote key; WRITE and READ are
 * ucp_put_nbx / ucp_get_nbx, one per descriptor, whose completions are counted per request. A
 * WRITE is DONE after one ucp_ep_flush_nbx on the request's endpoint (put completion is only
 * local); a notification leaves, as an eager active message on the same endpoint, after that
 * flush, so its data is in place at the target on every lane before it arrives.
 *
 * Progress: the engine's own thread progresses the worker, spinning while requests are in
 * flight and otherwise sleeping on the worker's event fd (ucp_worker_arm + epoll) for at most
 * progress_us; progress() and check_xfer let the agent's threads progress it too.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <ixl/ixl_plugin.h>

#include "ucx_wire.h"

#define UCX_STR2(x) #x
#define UCX_STR(x) UCX_STR2(x)
#define UCX_AM_NOTIF 0x1d1
#define UCX_RELEASE_WAIT_MS 200
#define UCX_CLOSE_WAIT_MS 2000
/* After a forced close, UCX 1.13 still tears the old endpoint's tcp connections down in later
 * progress calls, on both sides. An endpoint to the same address created before that is over
 * can trip UCX's own assertions (tcp_ep.c "!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)", or the
 * peer's ucp_request.c "got REP message" at worker destroy): seen in 4 of 6 loaded runs of
 * `test_ucx churn 40` with no pause, in 2 of 3 with 3 ms, in none of 6 with 50 ms. */
#define UCX_REOPEN_QUIET_MS 100

enum md_kind { MD_LOCAL = 1, MD_REMOTE = 2 };

struct ucx_remote {
    char *name;
    void *addr; /* its worker address */
    size_t addr_len;
    ucp_ep_h ep;          /* NULL until the first transfer (or connect) */
    uint64_t gen;         /* bumped whenever ep is replaced: rkeys of an older gen are stale */
    bool failed;          /* ep reported an error: closed at the next progress */
    uint64_t quiet_until; /* CLOCK_MONOTONIC ms: no new ep to addr before (UCX_REOPEN_QUIET_MS) */
    char path[32];        /* transports of ep's RMA lanes */
    struct ucx_remote *next;
};

/* Memory UCX allocated (ucp_mem_map with UCP_MEM_MAP_ALLOCATE: a sysv/posix segment a
 * same-node peer maps, so its puts are single copies instead of emulated messages). */
struct ucx_alloc {
    uint64_t addr, len;
    ucp_mem_h memh;
    unsigned regs; /* registrations inside it */
    struct ucx_alloc *next;
};

struct ucx_md {
    enum md_kind kind;
    uint64_t addr, len;
    /* MD_LOCAL */
    ucp_mem_h memh;
    struct ucx_alloc *alloc; /* memh belongs to this allocation (not unmapped with md) */
    void *pub;               /* header + packed rkey */
    size_t pub_len;
    /* MD_REMOTE (load_remote_md, load_local_md) */
    struct ucx_remote *rem;
    void *rkey_buf;
    size_t rkey_len;
    ucp_rkey_h rkey;
    uint64_t rkey_gen;
};

enum req_phase { PH_IDLE, PH_DATA, PH_FLUSH, PH_NOTIF, PH_DONE };

struct ucx_req {
    struct ucx_engine *e;
    enum ixl_op op;
    struct ixl_xfer_side local, remote; /* borrowed until release */
    struct ucx_remote *rem;
    void *notif; /* [u16 name length][name][message], ready to send */
    size_t notif_len;
    /* under e->lock */
    enum req_phase phase;
    size_t pending;       /* UCX operations not completed */
    ucs_status_t err;     /* first error of this post */
    bool canceled;        /* release gave up: no more phases */
    bool queued;          /* on e->ready */
    struct ucx_req *next; /* e->ready */
    atomic_int status;    /* what check_xfer says */
};

struct notif {
    struct notif *next;
    char *agent;
    size_t len;
    unsigned char msg[];
};

struct ucx_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    char *name;
    size_t notif_max;
    int err_mode; /* ucp_err_handling_mode_t */
    char tls[128];
    unsigned progress_us;

    ucp_context_h ctx;
    ucp_worker_h worker;
    void *info; /* header + worker address */
    size_t info_len;
    int efd, wakefd, epfd;

    pthread_mutex_t lock; /* the worker, remotes, request phases, allocations */
    struct ucx_remote *remotes;
    struct ucx_alloc *allocs;
    struct ucx_req *ready; /* requests whose operations all completed: next phase */
    size_t inflight;

    pthread_mutex_t nlock;
    struct notif *nhead, **ntail;

    pthread_t thread;
    atomic_bool stop;
    bool thread_started;
};

static const struct ixl_option ucx_options[] = {
    {"workers", "1", "UCP workers per engine (only 1 is supported so far)"},
    {"devices", "all", "UCX_NET_DEVICES: network devices UCX may use, e.g. eth0, mlx5_0:1"},
    {"transports", "all",
     "UCX_TLS: transports UCX may use, e.g. tcp, shm, sm,self, rc,ud (all: UCX chooses)"},
    {"err_mode", "peer",
     "error handling: peer (a dead peer fails its requests; UCX 1.13 then refuses shared "
     "memory transports) or none (shared memory allowed; a dead peer may go unnoticed)"},
    {"keepalive_ms", "1000",
     "UCX_KEEPALIVE_INTERVAL in ms: how often endpoints check their peer (err_mode=peer)"},
    {"progress_us", "1000", "longest sleep of the progress thread between two progress calls"},
};

/* ---- helpers ----------------------------------------------------------------------------------
 */

static void fail(struct ucx_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct ucx_engine *e, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "UCX: %s", msg);
}

static int status_of(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return IXL_OK;
    case UCS_ERR_NO_MEMORY:
        return IXL_ERR_NO_MEMORY;
    case UCS_ERR_UNREACHABLE:
        return IXL_ERR_UNREACHABLE;
    case UCS_ERR_REJECTED:
        return IXL_ERR_CONN_REFUSED;
    default:
        /* connection reset, endpoint timeout, canceled by a forced close, I/O errors: the
         * peer or the connection to it went away */
        return IXL_ERR_REMOTE_DISCONNECT;
    }
}

static struct ucx_remote *remote_find(struct ucx_engine *e, const char *name)
{
    for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

static void req_finish(struct ucx_req *q);

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Progresses the worker until `until` (ms) has passed. Under e->lock. */
static void progress_until_locked(struct ucx_engine *e, uint64_t until)
{
    while (now_ms() < until)
        if (ucp_worker_progress(e->worker) == 0)
            sched_yield();
}

static void close_ep_locked(struct ucx_engine *e, struct ucx_remote *r)
{
    if (r->ep == NULL)
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_EP_CLOSE_FLAG_FORCE};
    void *cr = ucp_ep_close_nbx(r->ep, &p);
    if (UCS_PTR_IS_PTR(cr)) {
        /* A forced close completes at once or within a few progress calls; it must end before
         * the worker is destroyed, and the requests it cancels report through their own
         * callbacks. */
        for (int i = 0; i < 1000 && ucp_request_check_status(cr) == UCS_INPROGRESS; i++)
            ucp_worker_progress(e->worker);
        ucp_request_free(cr);
    }
    r->ep = NULL;
    r->failed = false;
    r->gen++;
    r->path[0] = '\0';
    r->quiet_until = now_ms() + UCX_REOPEN_QUIET_MS;
}

/* Which transports the endpoint's lanes use, from ucp_ep_print_info (1.13 has no query). */
static void ep_path(ucp_ep_h ep, char *out, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    out[0] = '\0';
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* lines like "#   lane[1]:  8:posix/memory.0 md[4]  ... rma_bw#0" */
    size_t used = 0;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        char *colon = strstr(line, "lane[");
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
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct ucx_remote *r = arg;
    if (r->ep == ep)
        r->failed = true; /* closed after this progress call returns */
    (void)status;
}

/* The remote's endpoint, created if needed. Under e->lock. */
static int ep_get_locked(struct ucx_engine *e, struct ucx_remote *r, ucp_ep_h *out)
{
    if (r->ep != NULL && !r->failed) {
        *out = r->ep;
        return IXL_OK;
    }
    if (r->failed)
        close_ep_locked(e, r);
    if (r->addr == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s': load its metadata", r->name);
        return IXL_ERR_NOT_FOUND;
    }
    progress_until_locked(e, r->quiet_until); /* the old endpoint's teardown ends first */
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = r->addr,
        .err_mode = (ucp_err_handling_mode_t)e->err_mode,
        .err_handler = {.cb = ep_err_cb, .arg = r},
    };
    ucp_ep_h ep;
    ucs_status_t st = ucp_ep_create(e->worker, &p, &ep);
    if (st != UCS_OK) {
        bool peer = e->err_mode == UCP_ERR_HANDLING_MODE_PEER;
        static const char *const shm_tls[] = {"all", "sm", "posix", "sysv", "cma", "xpmem", "knem"};
        bool shm = false;
        for (size_t i = 0; i < sizeof(shm_tls) / sizeof(shm_tls[0]); i++)
            shm = shm || strstr(e->tls, shm_tls[i]) != NULL;
        fail(e, status_of(st) == IXL_ERR_REMOTE_DISCONNECT ? IXL_ERR_UNREACHABLE : status_of(st),
             "cannot create an endpoint to '%s' with transports '%s' and err_mode=%s: %s%s",
             r->name, e->tls, peer ? "peer" : "none", ucs_status_string(st),
             peer && shm
                 ? " (UCX 1.13 refuses shared memory transports (shm, sm, posix, sysv, cma, "
                   "xpmem, knem) with peer error handling: use err_mode=none for them, or a "
                   "network transport such as tcp)"
                 : "");
        return status_of(st) == IXL_ERR_REMOTE_DISCONNECT ? IXL_ERR_UNREACHABLE : status_of(st);
    }
    r->ep = ep;
    r->failed = false;
    r->gen++;
    ep_path(ep, r->path, sizeof(r->path));
    *out = ep;
    return IXL_OK;
}

/* ---- progress ---------------------------------------------------------------------------------
 */

static void req_advance_locked(struct ucx_req *q);

/* Progresses the worker, then moves completed requests on and closes failed endpoints. Under
 * e->lock. Returns whether anything happened. */
static bool progress_locked(struct ucx_engine *e)
{
    bool any = false;
    for (int i = 0; i < 64 && ucp_worker_progress(e->worker) != 0; i++)
        any = true;
    while (e->ready != NULL) {
        struct ucx_req *q = e->ready;
        e->ready = q->next;
        q->queued = false;
        req_advance_locked(q);
        any = true;
    }
    for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next)
        if (r->failed) {
            close_ep_locked(e, r);
            any = true;
        }
    return any;
}

static void *progress_main(void *arg)
{
    struct ucx_engine *e = arg;
    int ms = (int)((e->progress_us + 999) / 1000);
    if (ms < 1)
        ms = 1;
    while (!atomic_load(&e->stop)) {
        pthread_mutex_lock(&e->lock);
        bool any = progress_locked(e);
        bool busy = e->inflight > 0;
        ucs_status_t st = UCS_ERR_BUSY;
        if (!any && !busy)
            st = ucp_worker_arm(e->worker);
        pthread_mutex_unlock(&e->lock);
        if (any || busy) {
            sched_yield();
            continue;
        }
        if (st == UCS_ERR_BUSY)
            continue;
        struct epoll_event ev[2];
        int n = epoll_wait(e->epfd, ev, 2, ms);
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == e->wakefd) {
                uint64_t v;
                if (read(e->wakefd, &v, sizeof(v)) < 0) {
                }
            }
    }
    return NULL;
}

static void wake(struct ucx_engine *e)
{
    uint64_t one = 1;
    if (write(e->wakefd, &one, sizeof(one)) < 0) {
    }
}

static int ucx_progress(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    pthread_mutex_lock(&e->lock);
    progress_locked(e);
    pthread_mutex_unlock(&e->lock);
    return IXL_OK;
}

/* ---- notifications ----------------------------------------------------------------------------
 */

static ucs_status_t am_notif_cb(void *arg, const void *header, size_t header_len, void *data,
                                size_t len, const ucp_am_recv_param_t *param)
{
    struct ucx_engine *e = arg;
    (void)header;
    (void)header_len;
    const char *name;
    const void *msg;
    size_t nlen, mlen;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !ucx_notif_decode(data, len, e->notif_max, &name, &nlen, &msg, &mlen)) {
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: dropped a malformed notification (bad name, or over notif_max)");
        return UCS_OK;
    }
    struct notif *n = malloc(sizeof(*n) + mlen + nlen + 1);
    if (n == NULL)
        return UCS_OK;
    n->next = NULL;
    n->len = mlen;
    memcpy(n->msg, msg, mlen);
    n->agent = (char *)n->msg + mlen;
    memcpy(n->agent, name, nlen);
    n->agent[nlen] = '\0';
    pthread_mutex_lock(&e->nlock);
    *e->ntail = n;
    e->ntail = &n->next;
    pthread_mutex_unlock(&e->nlock);
    e->host->signal(e->host->ctx);
    return UCS_OK;
}

static int ucx_get_notifs(struct ixl_engine *base, ixl_notif_sink_fn sink, void *sink_ctx)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    pthread_mutex_lock(&e->nlock);
    struct notif *n = e->nhead;
    e->nhead = NULL;
    e->ntail = &e->nhead;
    pthread_mutex_unlock(&e->nlock);
    while (n != NULL) {
        struct notif *next = n->next;
        sink(sink_ctx, n->agent, n->msg, n->len);
        free(n);
        n = next;
    }
    return IXL_OK;
}

static void am_free_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    ucp_request_free(request);
    free(user_data);
}

static int ucx_gen_notif(struct ixl_engine *base, const char *remote_agent, const void *msg,
                         size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    size_t blen;
    void *b = ucx_notif_encode(e->name, msg, len, &blen);
    if (b == NULL)
        return IXL_ERR_NO_MEMORY;
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    ucp_ep_h ep;
    int rc = IXL_OK;
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        rc = IXL_ERR_NOT_FOUND;
    } else if ((rc = ep_get_locked(e, r, &ep)) == IXL_OK) {
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA |
                                                 UCP_OP_ATTR_FIELD_FLAGS,
                                 .cb.send = am_free_cb,
                                 .user_data = b,
                                 .flags = UCP_AM_SEND_FLAG_EAGER};
        void *sr = ucp_am_send_nbx(ep, UCX_AM_NOTIF, NULL, 0, b, blen, &p);
        if (UCS_PTR_IS_ERR(sr)) {
            fail(e, status_of(UCS_PTR_STATUS(sr)), "notification to '%s': %s", remote_agent,
                 ucs_status_string(UCS_PTR_STATUS(sr)));
            rc = status_of(UCS_PTR_STATUS(sr));
        } else if (sr != NULL) {
            b = NULL; /* am_free_cb frees it and the request */
        }
    }
    pthread_mutex_unlock(&e->lock);
    wake(e);
    free(b);
    return rc;
}

/* ---- requests ---------------------------------------------------------------------------------
 */

static void op_cb(void *request, ucs_status_t status, void *user_data)
{
    struct ucx_req *q = user_data;
    ucp_request_free(request); /* freeing it earlier would cancel this callback */
    if (status != UCS_OK && q->err == UCS_OK)
        q->err = status;
    if (--q->pending == 0 && !q->queued) {
        /* The next phase starts after ucp_worker_progress returns, not inside UCX's
         * callback. */
        q->queued = true;
        q->next = q->e->ready;
        q->e->ready = q;
    }
}

static void req_finish(struct ucx_req *q)
{
    struct ucx_engine *e = q->e;
    q->phase = PH_DONE;
    e->inflight--;
    int st = q->canceled ? IXL_ERR_CANCELED : q->err == UCS_OK ? IXL_OK : status_of(q->err);
    atomic_store(&q->status, st);
    e->host->signal(e->host->ctx);
}

/* Counts an operation's immediate result: a request (completes by op_cb), done, or failed. */
static void op_started(struct ucx_req *q, ucs_status_ptr_t sp)
{
    if (UCS_PTR_IS_PTR(sp))
        return; /* op_cb comes, and frees it */
    q->pending--;
    if (UCS_PTR_STATUS(sp) != UCS_OK && q->err == UCS_OK)
        q->err = UCS_PTR_STATUS(sp);
}

/* All operations of the current phase completed: start the next one or finish. */
static void req_advance_locked(struct ucx_req *q)
{
    for (;;) {
        if (q->pending != 0 || q->phase == PH_DONE)
            return;
        if (q->err != UCS_OK || q->canceled) {
            req_finish(q);
            return;
        }
        ucp_ep_h ep = q->rem->ep;
        ucp_request_param_t p = {.op_attr_mask =
                                     UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                 .cb.send = op_cb,
                                 .user_data = q};
        if (q->phase == PH_DATA && (q->op == IXL_OP_WRITE || q->notif != NULL)) {
            q->phase = PH_FLUSH;
            if (ep == NULL || q->rem->failed) {
                q->err = UCS_ERR_CONNECTION_RESET;
                continue;
            }
            q->pending++;
            op_started(q, ucp_ep_flush_nbx(ep, &p));
            continue;
        }
        if ((q->phase == PH_DATA || q->phase == PH_FLUSH) && q->notif != NULL) {
            q->phase = PH_NOTIF;
            if (ep == NULL || q->rem->failed) {
                q->err = UCS_ERR_CONNECTION_RESET;
                continue;
            }
            p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
            p.flags = UCP_AM_SEND_FLAG_EAGER;
            q->pending++;
            op_started(q, ucp_am_send_nbx(ep, UCX_AM_NOTIF, NULL, 0, q->notif, q->notif_len, &p));
            continue;
        }
        req_finish(q);
        return;
    }
}

static int ucx_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
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
    q->phase = PH_IDLE;
    atomic_init(&q->status, IXL_ERR_NOT_POSTED);
    if (opts != NULL && opts->notif != NULL &&
        (q->notif = ucx_notif_encode(e->name, opts->notif, opts->notif_len, &q->notif_len)) ==
            NULL) {
        free(q);
        return IXL_ERR_NO_MEMORY;
    }
    *out = (struct ixl_req *)q;
    return IXL_OK;
}

/* The rkey of a remote md for the remote's current endpoint. Under e->lock. */
static ucp_rkey_h rkey_get_locked(struct ucx_engine *e, struct ucx_md *m, ucp_ep_h ep,
                                  ucs_status_t *st)
{
    if (m->rkey != NULL && m->rkey_gen == m->rem->gen)
        return m->rkey;
    if (m->rkey != NULL)
        ucp_rkey_destroy(m->rkey);
    m->rkey = NULL;
    *st = ucp_ep_rkey_unpack(ep, m->rkey_buf, &m->rkey);
    if (*st != UCS_OK) {
        m->rkey = NULL;
        fail(e, IXL_ERR_MALFORMED, "cannot unpack the remote key of a region of '%s': %s",
             m->rem->name, ucs_status_string(*st));
        return NULL;
    }
    m->rkey_gen = m->rem->gen;
    return m->rkey;
}

static int ucx_post_xfer(struct ixl_engine *base, struct ixl_req *req,
                         const struct ixl_xfer_opts *opts)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    if (opts->notif != q->notif) {
        free(q->notif);
        q->notif = NULL;
        if (opts->notif != NULL &&
            (q->notif = ucx_notif_encode(e->name, opts->notif, opts->notif_len, &q->notif_len)) ==
                NULL)
            return IXL_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&e->lock);
    ucp_ep_h ep;
    int rc = ep_get_locked(e, q->rem, &ep);
    if (rc != IXL_OK) {
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    q->phase = PH_DATA;
    q->err = UCS_OK;
    q->canceled = false;
    q->pending = 1; /* held until every operation is started */
    atomic_store(&q->status, IXL_IN_PROGRESS);
    e->inflight++;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                             UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
                             .cb.send = op_cb,
                             .user_data = q};
    for (size_t i = 0; i < q->local.count && q->err == UCS_OK; i++) {
        const struct ixl_xfer_desc *l = &q->local.descs[i], *r = &q->remote.descs[i];
        if (l->len == 0)
            continue;
        ucs_status_t st = UCS_OK;
        ucp_rkey_h rkey = rkey_get_locked(e, (struct ucx_md *)r->md, ep, &st);
        if (rkey == NULL) {
            q->err = st;
            break;
        }
        const struct ucx_md *lm = (const struct ucx_md *)l->md;
        p.memh = lm != NULL && lm->kind == MD_LOCAL ? lm->memh : NULL;
        p.op_attr_mask = p.memh != NULL ? p.op_attr_mask | UCP_OP_ATTR_FIELD_MEMH
                                        : p.op_attr_mask & ~(uint32_t)UCP_OP_ATTR_FIELD_MEMH;
        q->pending++;
        if (q->op == IXL_OP_WRITE)
            op_started(q, ucp_put_nbx(ep, (void *)(uintptr_t)l->addr, l->len, r->addr, rkey, &p));
        else
            op_started(q, ucp_get_nbx(ep, (void *)(uintptr_t)l->addr, l->len, r->addr, rkey, &p));
    }
    q->pending--;
    req_advance_locked(q);
    if (q->phase != PH_DONE) {
        /* make the progress thread spin while this is in flight */
        progress_locked(e);
    }
    rc = atomic_load(&q->status);
    pthread_mutex_unlock(&e->lock);
    if (rc == IXL_IN_PROGRESS)
        wake(e);
    return rc;
}

static int ucx_check_xfer(struct ixl_engine *base, struct ixl_req *req)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    int st = atomic_load(&q->status);
    if (st == IXL_IN_PROGRESS && pthread_mutex_trylock(&e->lock) == 0) {
        progress_locked(e);
        pthread_mutex_unlock(&e->lock);
        st = atomic_load(&q->status);
    }
    return st;
}

/* Progresses until q is done or ms ran out. Under e->lock. */
static bool wait_done_locked(struct ucx_engine *e, struct ucx_req *q, uint64_t ms)
{
    uint64_t end = now_ms() + ms;
    while (q->phase != PH_DONE && q->phase != PH_IDLE && now_ms() < end) {
        if (!progress_locked(e)) {
            pthread_mutex_unlock(&e->lock);
            sched_yield();
            pthread_mutex_lock(&e->lock);
        }
    }
    return q->phase == PH_DONE || q->phase == PH_IDLE;
}

static int ucx_release_req(struct ixl_engine *base, struct ixl_req *req)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    pthread_mutex_lock(&e->lock);
    if (q->phase != PH_DONE && q->phase != PH_IDLE) {
        q->canceled = true; /* no flush or notification after this */
        if (!wait_done_locked(e, q, UCX_RELEASE_WAIT_MS)) {
            /* UCX cannot cancel one put or get: a forced close of the endpoint cancels every
             * operation on it (other requests to this peer fail too, as NET's cut does). */
            e->host->log(e->host->ctx, IXL_LOG_WARN,
                         "UCX: release of a request to '%s' still in flight: closing the "
                         "endpoint",
                         q->rem->name);
            close_ep_locked(e, q->rem);
            wait_done_locked(e, q, UCX_CLOSE_WAIT_MS);
        }
        if (q->phase != PH_DONE) {
            atomic_store(&q->status, IXL_ERR_CANCELED);
            pthread_mutex_unlock(&e->lock);
            fail(e, IXL_ERR_BUSY, "a request to '%s' could not be stopped yet", q->rem->name);
            return IXL_ERR_BUSY;
        }
    }
    pthread_mutex_unlock(&e->lock);
    free(q->notif);
    free(q);
    return IXL_OK;
}

static int ucx_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_req *q = (struct ucx_req *)req;
    pthread_mutex_lock(&e->lock);
    snprintf(out->path, sizeof(out->path), "%s", q->rem->path);
    pthread_mutex_unlock(&e->lock);
    return IXL_OK;
}

/* ---- connections ------------------------------------------------------------------------------
 */

static int ucx_get_conn_info(struct ixl_engine *base, const void **info, size_t *len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    *info = e->info;
    *len = e->info_len;
    return IXL_OK;
}

static int remote_set_locked(struct ucx_engine *e, const char *name, const void *addr,
                             size_t addr_len)
{
    struct ucx_remote *r = remote_find(e, name);
    if (r != NULL && r->addr_len == addr_len && memcmp(r->addr, addr, addr_len) == 0)
        return IXL_OK;
    void *copy = malloc(addr_len);
    if (copy == NULL)
        return IXL_ERR_NO_MEMORY;
    memcpy(copy, addr, addr_len);
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL || (r->name = strdup(name)) == NULL) {
            free(r);
            free(copy);
            return IXL_ERR_NO_MEMORY;
        }
        r->next = e->remotes;
        e->remotes = r;
    } else {
        close_ep_locked(e, r); /* a restarted peer: its requests fail, rkeys go stale */
    }
    free(r->addr);
    r->addr = copy;
    r->addr_len = addr_len;
    r->quiet_until = 0; /* a new address: nothing of the old connections can collide */
    return IXL_OK;
}

static int ucx_load_remote_conn_info(struct ixl_engine *base, const char *remote_agent,
                                     const void *info, size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    size_t alen;
    const void *addr = ucx_unwrap(UCX_INFO_MAGIC, info, len, &alen);
    if (addr == NULL) {
        fail(e, IXL_ERR_MALFORMED, "connection info of '%s' is not a UCX worker address",
             remote_agent);
        return IXL_ERR_MALFORMED;
    }
    pthread_mutex_lock(&e->lock);
    int rc = remote_set_locked(e, remote_agent, addr, alen);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int ucx_connect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    ucp_ep_h ep;
    int rc = IXL_ERR_NOT_FOUND;
    if (r == NULL)
        fail(e, rc, "no connection info for agent '%s'", remote_agent);
    else if (strcmp(remote_agent, e->name) == 0)
        rc = IXL_OK; /* to itself: at the first transfer, so that an endpoint UCX refuses (shared
                        memory with err_mode=peer) fails that transfer with the reason */
    else
        rc = ep_get_locked(e, r, &ep);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int ucx_disconnect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    if (r != NULL)
        close_ep_locked(e, r);
    pthread_mutex_unlock(&e->lock);
    return IXL_OK;
}

/* ---- memory -----------------------------------------------------------------------------------
 */

static int ucx_register_mem(struct ixl_engine *base, enum ixl_mem type,
                            const struct ixl_reg_desc *desc, struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (!(e->base.mem_mask & IXL_MEM_BIT(type))) {
        fail(e, IXL_ERR_BAD_MEM_TYPE, "memory type %d not supported by this UCX", type);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    if (desc->len == 0) {
        fail(e, IXL_ERR_INVALID_ARG, "cannot register an empty region");
        return IXL_ERR_INVALID_ARG;
    }
    struct ucx_md *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    m->kind = MD_LOCAL;
    m->addr = desc->addr;
    m->len = desc->len;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address = (void *)(uintptr_t)desc->addr,
        .length = desc->len,
        .memory_type = type == IXL_MEM_VRAM ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST,
    };
    void *rk = NULL;
    size_t rk_len = 0;
    pthread_mutex_lock(&e->lock);
    for (struct ucx_alloc *a = e->allocs; a != NULL; a = a->next)
        if (desc->addr >= a->addr && desc->len <= a->len - (desc->addr - a->addr)) {
            m->alloc = a; /* its memh, whose rkey lets a peer map the segment */
            m->memh = a->memh;
            break;
        }
    ucs_status_t st = m->alloc ? UCS_OK : ucp_mem_map(e->ctx, &mp, &m->memh);
    if (st == UCS_OK && (st = ucp_rkey_pack(e->ctx, m->memh, &rk, &rk_len)) != UCS_OK &&
        m->alloc == NULL)
        ucp_mem_unmap(e->ctx, m->memh);
    if (st == UCS_OK && m->alloc)
        m->alloc->regs++;
    pthread_mutex_unlock(&e->lock);
    if (st != UCS_OK) {
        free(m);
        fail(e, IXL_ERR_BACKEND, "cannot register %" PRIu64 " bytes at 0x%" PRIx64 ": %s",
             desc->len, desc->addr, ucs_status_string(st));
        return IXL_ERR_BACKEND;
    }
    m->pub = ucx_wrap(UCX_RKEY_MAGIC, rk, rk_len, &m->pub_len);
    ucp_rkey_buffer_release(rk);
    if (m->pub == NULL) {
        pthread_mutex_lock(&e->lock);
        if (m->alloc)
            m->alloc->regs--;
        else
            ucp_mem_unmap(e->ctx, m->memh);
        pthread_mutex_unlock(&e->lock);
        free(m);
        return IXL_ERR_NO_MEMORY;
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int ucx_deregister_mem(struct ixl_engine *base, struct ixl_md *md)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    pthread_mutex_lock(&e->lock);
    if (m->alloc)
        m->alloc->regs--;
    else
        ucp_mem_unmap(e->ctx, m->memh);
    pthread_mutex_unlock(&e->lock);
    free(m->pub);
    free(m);
    return IXL_OK;
}

static int ucx_alloc_mem(struct ixl_engine *base, enum ixl_mem type, size_t len, void **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (type != IXL_MEM_DRAM) {
        fail(e, IXL_ERR_NOT_SUPPORTED, "UCX allocates DRAM only");
        return IXL_ERR_NOT_SUPPORTED;
    }
    struct ucx_alloc *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return IXL_ERR_NO_MEMORY;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .length = len,
        .flags = UCP_MEM_MAP_ALLOCATE,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
    pthread_mutex_lock(&e->lock);
    ucs_status_t st = ucp_mem_map(e->ctx, &mp, &a->memh);
    if (st == UCS_OK && (st = ucp_mem_query(a->memh, &attr)) != UCS_OK)
        ucp_mem_unmap(e->ctx, a->memh);
    if (st == UCS_OK) {
        a->addr = (uintptr_t)attr.address;
        a->len = attr.length;
        a->next = e->allocs;
        e->allocs = a;
    }
    pthread_mutex_unlock(&e->lock);
    if (st != UCS_OK) {
        free(a);
        fail(e, IXL_ERR_NO_MEMORY, "cannot allocate %zu bytes: %s", len, ucs_status_string(st));
        return IXL_ERR_NO_MEMORY;
    }
    *out = (void *)(uintptr_t)a->addr;
    return IXL_OK;
}

static int ucx_free_mem(struct ixl_engine *base, void *addr, size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    (void)len;
    pthread_mutex_lock(&e->lock);
    struct ucx_alloc **pp = &e->allocs;
    while (*pp != NULL && (*pp)->addr != (uintptr_t)addr)
        pp = &(*pp)->next;
    struct ucx_alloc *a = *pp;
    int rc = IXL_OK;
    if (a == NULL)
        rc = IXL_ERR_NOT_FOUND;
    else if (a->regs > 0)
        rc = IXL_ERR_BUSY;
    else {
        *pp = a->next;
        ucp_mem_unmap(e->ctx, a->memh);
        free(a);
    }
    pthread_mutex_unlock(&e->lock);
    if (rc == IXL_ERR_NOT_FOUND)
        fail(e, rc, "%p was not allocated by this UCX backend", addr);
    else if (rc == IXL_ERR_BUSY)
        fail(e, rc, "memory at %p is still registered: deregister it first", addr);
    return rc;
}

static int ucx_get_public_data(struct ixl_engine *base, const struct ixl_md *md, const void **data,
                               size_t *len)
{
    (void)base;
    const struct ucx_md *m = (const struct ucx_md *)md;
    *data = m->pub;
    *len = m->pub_len;
    return IXL_OK;
}

static int remote_md_new(struct ucx_engine *e, struct ucx_remote *r, uint64_t addr, uint64_t len,
                         const void *rkey, size_t rkey_len, struct ixl_md **out)
{
    (void)e;
    struct ucx_md *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->rkey_buf = malloc(rkey_len)) == NULL) {
        free(m);
        return IXL_ERR_NO_MEMORY;
    }
    m->kind = MD_REMOTE;
    m->addr = addr;
    m->len = len;
    m->rem = r;
    memcpy(m->rkey_buf, rkey, rkey_len);
    m->rkey_len = rkey_len;
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int ucx_load_remote_md(struct ixl_engine *base, const char *remote_agent, enum ixl_mem type,
                              const struct ixl_reg_desc *desc, const void *data, size_t len,
                              struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (!(e->base.mem_mask & IXL_MEM_BIT(type))) {
        fail(e, IXL_ERR_BAD_MEM_TYPE, "memory type %d not supported by this UCX", type);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    size_t rk_len;
    const void *rk = ucx_unwrap(UCX_RKEY_MAGIC, data, len, &rk_len);
    if (rk == NULL) {
        fail(e, IXL_ERR_MALFORMED, "public data of a region of '%s' is not a UCX remote key",
             remote_agent);
        return IXL_ERR_MALFORMED;
    }
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    pthread_mutex_unlock(&e->lock);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    return remote_md_new(e, r, desc->addr, desc->len, rk, rk_len, out);
}

static int ucx_load_local_md(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *self = remote_find(e, e->name);
    pthread_mutex_unlock(&e->lock);
    size_t rk_len;
    const void *rk = ucx_unwrap(UCX_RKEY_MAGIC, m->pub, m->pub_len, &rk_len);
    if (self == NULL || rk == NULL)
        return IXL_ERR_BACKEND;
    return remote_md_new(e, self, m->addr, m->len, rk, rk_len, out);
}

static int ucx_unload_md(struct ixl_engine *base, struct ixl_md *md)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    pthread_mutex_lock(&e->lock);
    if (m->rkey != NULL)
        ucp_rkey_destroy(m->rkey);
    pthread_mutex_unlock(&e->lock);
    free(m->rkey_buf);
    free(m);
    return IXL_OK;
}

/* ---- engine -----------------------------------------------------------------------------------
 */

static const char *param(const struct ixl_engine_init *init, const char *key)
{
    for (size_t i = 0; i < init->n_params; i++)
        if (strcmp(init->params[i].key, key) == 0)
            return init->params[i].value;
    for (size_t i = 0; i < sizeof(ucx_options) / sizeof(ucx_options[0]); i++)
        if (strcmp(ucx_options[i].name, key) == 0)
            return ucx_options[i].default_value;
    return "";
}

static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void ucx_destroy_engine(struct ixl_engine *base);

static int ucx_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    const struct ixl_host *host = init->host;
    struct ucx_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = host;
    e->efd = e->wakefd = e->epfd = -1;
    e->ntail = &e->nhead;
    e->notif_max = init->notif_max;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->nlock, NULL);
    if ((e->name = strdup(init->agent_name)) == NULL) {
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NO_MEMORY;
    }
    unsigned long workers, keepalive, prog;
    const char *mode = param(init, "err_mode");
    if (parse_uint(param(init, "workers"), 1, 1, &workers) != 0) {
        fail(e, IXL_ERR_NOT_SUPPORTED, "workers=%s: only 1 worker per engine is supported",
             param(init, "workers"));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NOT_SUPPORTED;
    }
    if (parse_uint(param(init, "keepalive_ms"), 1, 3600000, &keepalive) != 0 ||
        parse_uint(param(init, "progress_us"), 1, 1000000, &prog) != 0 ||
        (strcmp(mode, "peer") != 0 && strcmp(mode, "none") != 0)) {
        fail(e, IXL_ERR_INVALID_ARG,
             "bad option: keepalive_ms (1..3600000), progress_us (1..1000000) or err_mode "
             "(peer|none)");
        ucx_destroy_engine(&e->base);
        return IXL_ERR_INVALID_ARG;
    }
    e->progress_us = (unsigned)prog;
    e->err_mode =
        strcmp(mode, "peer") == 0 ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    snprintf(e->tls, sizeof(e->tls), "%s", param(init, "transports"));

    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "ucp_config_read: %s", ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    char ka[32];
    snprintf(ka, sizeof(ka), "%lums", keepalive);
    const char *mods[][2] = {
        {"TLS", e->tls}, {"NET_DEVICES", param(init, "devices")}, {"KEEPALIVE_INTERVAL", ka}};
    for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
        if ((st = ucp_config_modify(cfg, mods[i][0], mods[i][1])) != UCS_OK) {
            fail(e, IXL_ERR_INVALID_ARG, "UCX_%s=%s refused: %s", mods[i][0], mods[i][1],
                 ucs_status_string(st));
            ucp_config_release(cfg);
            ucx_destroy_engine(&e->base);
            return IXL_ERR_INVALID_ARG;
        }
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                       .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                       .mt_workers_shared = 0};
    st = ucp_init(&up, cfg, &e->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        e->ctx = NULL;
        fail(e, IXL_ERR_BACKEND, "ucp_init (transports '%s'): %s", e->tls, ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    e->base.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    e->base.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(e->ctx, &ca) == UCS_OK &&
        (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)))
        e->base.mem_mask |= IXL_MEM_BIT(IXL_MEM_VRAM);

    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = UCX_AM_NOTIF,
                                 .cb = am_notif_cb,
                                 .arg = e};
    ucp_address_t *addr = NULL;
    size_t addr_len = 0;
    if ((st = ucp_worker_create(e->ctx, &wp, &e->worker)) != UCS_OK) {
        e->worker = NULL;
    } else if ((st = ucp_worker_set_am_recv_handler(e->worker, &ap)) == UCS_OK &&
               (st = ucp_worker_get_efd(e->worker, &e->efd)) == UCS_OK) {
        st = ucp_worker_get_address(e->worker, &addr, &addr_len);
    }
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "cannot create a UCP worker (transports '%s'): %s", e->tls,
             ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    e->info = ucx_wrap(UCX_INFO_MAGIC, addr, addr_len, &e->info_len);
    int rc = e->info == NULL ? IXL_ERR_NO_MEMORY : remote_set_locked(e, e->name, addr, addr_len);
    ucp_worker_release_address(e->worker, addr);
    if (rc != IXL_OK) {
        ucx_destroy_engine(&e->base);
        return rc;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    if ((e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (e->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (ev.data.fd = e->efd, epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->efd, &ev)) != 0 ||
        (ev.data.fd = e->wakefd, epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wakefd, &ev)) != 0) {
        fail(e, IXL_ERR_SYSTEM, "epoll/eventfd: %s", strerror(errno));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_SYSTEM;
    }
    if ((rc = pthread_create(&e->thread, NULL, progress_main, e)) != 0) {
        fail(e, IXL_ERR_SYSTEM, "cannot start the progress thread: %s", strerror(rc));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_SYSTEM;
    }
    e->thread_started = true;
    *out = &e->base;
    return IXL_OK;
}

static void ucx_destroy_engine(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (e == NULL)
        return;
    if (e->thread_started) {
        atomic_store(&e->stop, true);
        wake(e);
        pthread_join(e->thread, NULL);
    }
    if (e->worker != NULL) {
        pthread_mutex_lock(&e->lock);
        uint64_t quiet = 0;
        for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next) {
            close_ep_locked(e, r);
            quiet = r->quiet_until > quiet ? r->quiet_until : quiet;
        }
        for (int i = 0; i < 100; i++)
            progress_locked(e);
        progress_until_locked(e, quiet);
        pthread_mutex_unlock(&e->lock);
        ucp_worker_destroy(e->worker);
    }
    while (e->allocs != NULL) { /* the core frees what it allocated; this is what it did not */
        struct ucx_alloc *a = e->allocs;
        e->allocs = a->next;
        ucp_mem_unmap(e->ctx, a->memh);
        free(a);
    }
    if (e->ctx != NULL)
        ucp_cleanup(e->ctx);
    while (e->remotes != NULL) {
        struct ucx_remote *r = e->remotes;
        e->remotes = r->next;
        free(r->name);
        free(r->addr);
        free(r);
    }
    struct notif *n = e->nhead;
    while (n != NULL) {
        struct notif *next = n->next;
        free(n);
        n = next;
    }
    if (e->wakefd >= 0)
        close(e->wakefd);
    if (e->epfd >= 0)
        close(e->epfd);
    free(e->info);
    free(e->name);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->nlock);
    free(e);
}

static const struct ixl_engine_ops ucx_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = ucx_connect,
    .disconnect = ucx_disconnect,
    .get_conn_info = ucx_get_conn_info,
    .load_remote_conn_info = ucx_load_remote_conn_info,
    .register_mem = ucx_register_mem,
    .deregister_mem = ucx_deregister_mem,
    .get_public_data = ucx_get_public_data,
    .load_remote_md = ucx_load_remote_md,
    .load_local_md = ucx_load_local_md,
    .unload_md = ucx_unload_md,
    .prep_xfer = ucx_prep_xfer,
    .post_xfer = ucx_post_xfer,
    .check_xfer = ucx_check_xfer,
    .release_req = ucx_release_req,
    .get_notifs = ucx_get_notifs,
    .gen_notif = ucx_gen_notif,
    .progress = ucx_progress,
    .alloc_mem = ucx_alloc_mem,
    .free_mem = ucx_free_mem,
    .req_info = ucx_req_info,
};

static const struct ixl_plugin_desc ucx_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "UCX",
    .version = "1.0 (built on UCP API " UCX_STR(UCP_API_MAJOR) "." UCX_STR(UCP_API_MINOR) ")",
    .caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_VRAM),
    .options = ucx_options,
    .n_options = sizeof(ucx_options) / sizeof(ucx_options[0]),
    .create_engine = ucx_create_engine,
    .destroy_engine = ucx_destroy_engine,
    .ops = &ucx_ops,
};

static const struct ixl_plugin_desc *ucx_entry(void)
{
    return &ucx_desc;
}

IXL_PLUGIN_EXPORT(ucx_entry)

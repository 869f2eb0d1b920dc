/*
 * UCX: a dynamically loaded backend plugin on UCP (libucx), built through the plugin ABI alone.
 *
 * One UCP context and `workers` UCP workers per engine (1..16), each with its own progress
 * thread and lock: a worker runs in UCS_THREAD_MODE_SERIALIZED and every call into it is made
 * under its w->lock, so UCX's callbacks for it (completion, endpoint error, active message) run
 * under that lock too. The context is shared by the workers (mt_workers_shared: UCX locks its
 * own context-level calls). Lock order: e->lock (remotes list and addresses, allocations), then
 * the workers' locks in index order, then e->nlock (notifications). A remote's list link and
 * addresses are written with e->lock and every worker lock held, so either may read them; a
 * remote's lane k (its endpoint from worker k) is under worker k's lock alone.
 *
 * Why a thread per worker rather than one thread progressing them all: the copy of a put over
 * shared memory (UCX-allocated target memory: single-copy puts) runs in the thread that issues
 * it, and an emulated put over tcp in the threads that progress the two workers; several
 * workers only add bandwidth when different threads drive them. A request is cut into parts of
 * about equal bytes (at least UCX_STRIPE_MIN each), one per worker, round-robin from a home
 * worker that changes with every post; the posting thread issues the home part itself and the
 * other workers' threads issue theirs. Single puts/gets are at most UCX_CHUNK bytes, so a
 * transfer completes operations steadily (the deadline below watches them).
 *
 * Connection info lists the worker addresses; worker k connects to the peer's worker
 * k % (its count). Public data is a packed remote key (unpacked once per endpoint). WRITE and
 * READ are ucp_put_nbx / ucp_get_nbx whose completions are counted per part. A WRITE's part is
 * done after one ucp_ep_flush_nbx on its endpoint (put completion is only local); the last part
 * to finish sends the notification, as an eager active message on its own endpoint, so the
 * data of every part is in place at the target, on every lane of every worker, before it
 * leaves.
 *
 * Progress: each worker's thread spins while that worker has parts in flight, and otherwise
 * sleeps on the worker's event fd (ucp_worker_arm + epoll) for at most progress_us; progress()
 * and check_xfer let the agent's threads progress the workers too. Deadline: an endpoint with
 * operations outstanding and none completed for timeout_ms is force-closed and its requests
 * fail with IXL_ERR_REMOTE_DISCONNECT (a stopped peer's kernel still acknowledges tcp, so
 * neither UCX's keepalive nor the socket notices it).
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
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <ixl/ixl_plugin.h>

#include "ucx_wire.h"

#define UCX_STR2(x) #x
#define UCX_STR(x) UCX_STR2(x)
#define UCX_AM_NOTIF 0x1d1
#define UCX_AM_RMA 0x1d2       /* the plugin's WRITE/READ messages (ucx_wire.h) */
#define UCX_AM_RMA_REPLY 0x1d3 /* their replies */
/* Largest request message of the plugin's own WRITE/READ: descriptors are batched up to this
 * many bytes (and UCX_RMA_MAX_ENTRIES), larger ones cut into pieces of it. */
#define UCX_AM_MSG ((uint64_t)1 << 20)
/* Bytes of a part's messages awaiting replies: more are issued as replies come back (below half
 * of it). Bounds what a target holds for one request (a READ's reply buffers). */
#define UCX_AM_WINDOW ((uint64_t)8 << 20)
#define UCX_RELEASE_WAIT_MS 200
/* After a forced close, UCX 1.13 still tears the old endpoint's tcp connections down in later
 * progress calls, on both sides. An endpoint to the same address created before that is over
 * can trip UCX's own assertions (tcp_ep.c "!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)", or the
 * peer's ucp_request.c "got REP message" at worker destroy): seen in 4 of 6 loaded runs of
 * `test_ucx churn 40` with no pause, in 2 of 3 with 3 ms, in none of 6 with 50 ms. */
#define UCX_REOPEN_QUIET_MS 100
/* A forced close of a tcp endpoint with data queued on its socket leaves UCX 1.13 with a
 * half-destroyed endpoint (operations purged, kept for receiving, a FIN queued behind a cut
 * message) that it uses after freeing it once the peer reads or goes away: segfaults and
 * "iovec.c:62 Assertion" in uct_tcp_iface_progress in 3 of 6 runs of `test_ucx stops 16`, where
 * release and timeout_ms force-closed the endpoints of a stopped peer. So neither does: a
 * request past timeout_ms fails while UCX keeps its operations (the request stays busy), and
 * release answers BUSY until they end. A worker with parts in flight and nothing done for
 * UCX_STALL_MS sleeps on its events instead of spinning. */
#define UCX_STALL_MS 100
#define UCX_MAX_WORKERS UCX_MAX_ADDRS
#define UCX_CHUNK ((uint64_t)4 << 20)        /* largest single put or get */
#define UCX_STRIPE_MIN ((uint64_t)256 << 10) /* smallest share of a request given to a worker */

enum md_kind { MD_LOCAL = 1, MD_REMOTE = 2 };

/* A remote as one worker sees it. Under that worker's lock. */
struct ucx_lane {
    ucp_ep_h ep;          /* NULL until the first transfer (or connect) */
    uint64_t gen;         /* bumped whenever ep is replaced: rkeys of an older gen are stale */
    bool failed;          /* ep reported an error: closed at next progress */
    bool stalled;         /* missed the deadline (timeout_ms): no new operations until it answers */
    bool reached;         /* an endpoint to the current address was created once */
    bool sw_rma;          /* ep has no RMA transport: WRITE/READ are the plugin's messages */
    uint64_t quiet_until; /* CLOCK_MONOTONIC ms: no new ep to addr before (UCX_REOPEN_QUIET_MS) */
    size_t outstanding;   /* operations on ep not completed */
    uint64_t last_ms;     /* last completion on ep, or when outstanding left 0 */
    char path[32];        /* transports of ep's RMA and AM lanes */
};

struct ucx_remote {
    char *name;
    void *info; /* its wrapped connection info; addr[] point into it */
    size_t info_len;
    size_t n_addrs;
    const void *addr[UCX_MAX_ADDRS];
    size_t addr_len[UCX_MAX_ADDRS];
    struct ucx_lane lane[UCX_MAX_WORKERS];
    atomic_bool stalled; /* a lane missed the deadline: posts fail until one completes again */
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

struct ucx_rkey {
    ucp_rkey_h rkey; /* for the remote's lane of one worker */
    uint64_t gen;    /* that lane's gen when unpacked */
};

struct ucx_md {
    enum md_kind kind;
    uint64_t addr, len;
    uint64_t key; /* the region's key in the plugin's messages (MD_LOCAL: random, its own) */
    /* MD_LOCAL */
    ucp_mem_h memh;
    struct ucx_alloc *alloc; /* memh belongs to this allocation (not unmapped with md) */
    void *pub;               /* header + packed rkey */
    size_t pub_len;
    /* MD_REMOTE (load_remote_md, load_local_md) */
    struct ucx_remote *rem;
    void *rkey_buf;
    size_t rkey_len;
    struct ucx_rkey *rk; /* one per worker, each under that worker's lock */
};

enum req_phase { PH_IDLE, PH_TODO, PH_DATA, PH_FLUSH, PH_NOTIF, PH_DONE };

struct ucx_worker;

/* The share of a request one worker moves: descriptor d0 from byte o0 up to descriptor d1 at
 * byte o1 (exclusive). Its state is under its worker's lock. */
struct ucx_part {
    struct ucx_req *q;
    struct ucx_worker *w; /* chosen at post */
    size_t d0, d1;
    uint64_t o0, o1;
    enum req_phase phase;
    size_t pending; /* UCX operations not completed (+1 while issuing) */
    size_t replies; /* of those, replies awaited to the plugin's messages */
    bool am;        /* moved by the plugin's messages (lane sw_rma) */
    size_t nd;      /* am: the next message starts at descriptor nd, byte no */
    uint64_t no;
    uint64_t inflight;              /* am: bytes of messages awaiting replies (<= UCX_AM_WINDOW) */
    bool queued;                    /* on w->ready */
    struct ucx_part *next;          /* w->todo or w->ready */
    struct ucx_part *anext, *aprev; /* w->active, while in flight */
};

/* What one of the plugin's active messages sends: UCX reads it through the plugin's generic
 * datatype (see pack_ops), from iov[0..n), `total` bytes; i/at: the entry the last pack ended
 * in and the message offset it starts at. Lives until UCX completes the send. */
struct pack_src {
    const ucp_dt_iov_t *iov;
    size_t n, total, i, at;
    ucp_dt_iov_t one; /* the entry of a contiguous message */
};

struct ucx_req {
    struct ucx_engine *e;
    enum ixl_op op;
    struct ixl_xfer_side local, remote; /* borrowed until release */
    struct ucx_remote *rem;
    void *notif; /* [u16 name length][name][message], ready to send */
    size_t notif_len;
    struct pack_src notif_src; /* while the notification is sent */
    unsigned nparts;           /* parts with bytes (at least 1), cut at prep */
    struct ucx_part part[UCX_MAX_WORKERS];
    atomic_uint parts_left; /* parts whose data (and flush) are not done */
    atomic_int err;         /* first error of this post (an IXL status), 0 while none */
    atomic_bool canceled;   /* release gave up: no more phases */
    atomic_int status;      /* what check_xfer says: may be an error while busy (a stall) */
    atomic_bool busy;       /* from post until every part ended: UCX may use the buffers */
    bool held;              /* release answered BUSY: on e->held (the core may abandon it) */
    struct ucx_req *hnext, *hprev;
};

/* A message of the plugin's own WRITE/READ awaiting its reply: slot of w->ops, named on the wire
 * by its token (gen << 32 | slot index), so that a reply that arrives late (the request failed or
 * was released) or is forged finds nothing. Under its worker's lock. */
struct ucx_op {
    struct ucx_remote *rem; /* NULL: free */
    struct ucx_part *p;     /* NULL: orphaned (its request was released): the reply, when it
                               comes, only says that rem answers again */
    uint32_t gen;
    uint32_t next_free;
    bool read;
    size_t d0; /* READ: the reply's bytes go to the local descriptors from d0 at o0 on */
    uint64_t o0, bytes;
};

/* A message the plugin handed to ucp_am_send_nbx (a request, or a target's reply when p is
 * NULL): its bytes and iov live until UCX completes the send. On its worker's list (under the
 * worker's lock) so that destroy frees what UCX never completed. */
struct ucx_send {
    struct ucx_send *next, *prev;
    struct ucx_worker *w;
    struct ucx_part *p;
    uint64_t token;
    struct pack_src src;
    size_t niov;
    ucp_dt_iov_t iov[]; /* niov entries, then the message's own bytes */
};

struct notif {
    struct notif *next;
    char *agent;
    size_t len;
    unsigned char msg[];
};

struct ucx_worker {
    struct ucx_engine *e;
    unsigned idx;
    pthread_mutex_t lock; /* the worker, its lanes, its parts */
    ucp_worker_h w;
    int efd, wakefd, epfd;
    struct ucx_part *todo, **todo_tail; /* parts posted by another thread, to issue */
    struct ucx_part *ready;             /* parts whose operations all completed: next phase */
    struct ucx_part *active;            /* parts in flight on this worker */
    size_t n_active;
    uint64_t last_any_ms; /* last progress that did something, or a part added */
    struct ucx_op *ops;   /* messages awaiting replies (see struct ucx_op) */
    uint32_t n_ops, cap_ops, free_op;
    uint64_t rng;           /* xorshift state: the random half of tokens */
    struct ucx_send *sends; /* messages UCX has not completed */
    pthread_t thread;
    bool thread_started;
};

struct ucx_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    char *name;
    size_t notif_max;
    int err_mode; /* ucp_err_handling_mode_t */
    char tls[128];
    unsigned progress_us;
    uint64_t timeout_ms; /* 0: no deadline */
    bool own_rma;        /* rma_emulation=ixl */

    ucp_context_h ctx;
    ucp_datatype_t packer; /* pack_ops; 0: not made */
    unsigned nw;
    struct ucx_worker *w; /* nw of them */
    void *info;           /* wrapped worker addresses */
    size_t info_len;
    atomic_uint rr; /* home worker of the next post */

    pthread_mutex_t lock; /* remotes list and addresses (with every worker lock), allocations */
    struct ucx_remote *remotes;
    struct ucx_alloc *allocs;
    struct ucx_req *held; /* requests whose release answered BUSY; destroy frees them */

    /* Local regions by key, for the targets' side of the plugin's messages: an open-addressing
     * table (linear probing; keys are random). Readers copy under the read lock, so a region
     * deregistered (write lock) is never written or read by a message after that returns. */
    pthread_rwlock_t klock;
    struct ucx_md **kt;
    size_t kt_cap, kt_n;

    pthread_mutex_t nlock;
    struct notif *nhead, **ntail;

    atomic_bool stop;
};

static const struct ixl_option ucx_options[] = {
    {"workers", "1",
     "UCP workers per engine (1..16), each with its own progress thread; a request is split "
     "over them in shares of at least 256 KiB"},
    {"devices", "all", "UCX_NET_DEVICES: network devices UCX may use, e.g. eth0, mlx5_0:1"},
    {"transports", "all",
     "UCX_TLS: transports UCX may use, e.g. tcp, shm, sm,self, rc,ud (all: UCX chooses)"},
    {"err_mode", "peer",
     "error handling: peer (a dead peer fails its requests; UCX 1.13 then refuses shared "
     "memory transports) or none (shared memory allowed; a dead peer may go unnoticed)"},
    {"keepalive_ms", "1000",
     "UCX_KEEPALIVE_INTERVAL in ms: how often endpoints check their peer (err_mode=peer)"},
    {"timeout_ms", "2000",
     "an endpoint with operations outstanding and none completed for this long is closed and "
     "its requests fail with IXL_ERR_REMOTE_DISCONNECT (a stopped peer); 0: never"},
    {"progress_us", "1000", "longest sleep of a progress thread between two progress calls"},
    {"rma_emulation", "ixl",
     "WRITE/READ over an endpoint without an RMA transport (tcp): ixl (the plugin's own active "
     "messages: descriptors batched, every range checked by the target against its regions' "
     "keys; a dead initiator cannot abort the target) or ucx (UCX's emulated put/get, one "
     "message per put; UCX 1.13.1 aborts a target whose initiator dies in the middle)"},
};

/* ---- helpers ----------------------------------------------------------------------------------
 */

static void fail(struct ucx_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct ucx_engine *e, int status, const char *fmt, ...)
{
    char msg[640];
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

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void lock_workers(struct ucx_engine *e)
{
    for (unsigned i = 0; i < e->nw; i++)
        pthread_mutex_lock(&e->w[i].lock);
}

static void unlock_workers(struct ucx_engine *e)
{
    for (unsigned i = e->nw; i-- > 0;)
        pthread_mutex_unlock(&e->w[i].lock);
}

static void wake(struct ucx_worker *w)
{
    uint64_t one = 1;
    if (write(w->wakefd, &one, sizeof(one)) < 0) {
    }
}

/* Progresses the worker until `until` (ms) has passed. Under w->lock. */
static void progress_until_locked(struct ucx_worker *w, uint64_t until)
{
    while (now_ms() < until)
        if (ucp_worker_progress(w->w) == 0)
            sched_yield();
}

static void ops_drop(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int status);

/* Force-closes r's endpoint from worker w: every operation on it completes (canceled). Under
 * w->lock. */
static void close_ep_locked(struct ucx_worker *w, struct ucx_remote *r)
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
static bool tcp_may_open(const char *tls, const char *devices)
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
static int ep_get_locked(struct ucx_worker *w, struct ucx_remote *r, ucp_ep_h *out)
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

static void active_add(struct ucx_worker *w, struct ucx_part *p)
{
    p->aprev = NULL;
    p->anext = w->active;
    if (w->active != NULL)
        w->active->aprev = p;
    w->active = p;
    w->n_active++;
    w->last_any_ms = now_ms();
}

static void active_del(struct ucx_worker *w, struct ucx_part *p)
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
static bool lane_down(const struct ucx_lane *l, struct ucx_remote *r)
{
    return l->ep == NULL || l->failed || l->stalled || atomic_load(&r->stalled);
}

static void req_set_err(struct ucx_req *q, int status);

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

static void part_start_locked(struct ucx_worker *w, struct ucx_part *p);
static void part_advance_locked(struct ucx_worker *w, struct ucx_part *p);

/* Progresses the worker, starts queued parts, moves completed parts on, fails endpoints past
 * the deadline and closes failed ones. Under w->lock. Returns whether anything happened. */
static bool progress_locked(struct ucx_worker *w)
{
    struct ucx_engine *e = w->e;
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
    uint64_t now = e->timeout_ms > 0 && w->n_active > 0 ? now_ms() : 0;
    for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next) {
        struct ucx_lane *l = &r->lane[w->idx];
        if (now > l->last_ms && l->ep != NULL && !l->failed && !l->stalled && l->outstanding > 0 &&
            now - l->last_ms > e->timeout_ms) {
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

static void *progress_main(void *arg)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    int ms = (int)((e->progress_us + 999) / 1000);
    if (ms < 1)
        ms = 1;
    while (!atomic_load(&e->stop)) {
        pthread_mutex_lock(&w->lock);
        bool any = progress_locked(w);
        /* Spins while parts are in flight, unless nothing happened for UCX_STALL_MS (a stalled
         * peer): then it sleeps on the worker's events like an idle worker. */
        uint64_t now = now_ms();
        if (any)
            w->last_any_ms = now;
        bool busy = w->n_active > 0 && now - w->last_any_ms < UCX_STALL_MS;
        ucs_status_t st = UCS_ERR_BUSY;
        if (!any && !busy)
            st = ucp_worker_arm(w->w);
        pthread_mutex_unlock(&w->lock);
        if (any || busy) {
            sched_yield();
            continue;
        }
        if (st == UCS_ERR_BUSY)
            continue;
        struct epoll_event ev[2];
        int n = epoll_wait(w->epfd, ev, 2, ms);
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == w->wakefd) {
                uint64_t v;
                if (read(w->wakefd, &v, sizeof(v)) < 0) {
                }
            }
    }
    return NULL;
}

static int ucx_progress(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    for (unsigned i = 0; i < e->nw; i++) {
        pthread_mutex_lock(&e->w[i].lock);
        progress_locked(&e->w[i]);
        pthread_mutex_unlock(&e->w[i].lock);
    }
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

/* ---- the plugin's active messages ------------------------------------------------------------
 *
 * Every message the plugin sends is handed to UCX as a generic datatype that packs from a
 * pack_src: UCX copies it into its own segments and never sends it zero-copy. UCX 1.13.1's tcp
 * transport completes a zero-copy send twice when the socket fails in the middle of it (the peer
 * died) and aborts the process ("uct_iface.h:884 Assertion `comp->count > 0' failed" under
 * uct_tcp_ep_sendv; `test_ucx wkill 40` hit it in 5 of 12 runs while the messages went
 * zero-copy). The copy costs what UCX's own bcopy costs; the shm and RDMA paths move data with
 * put/get and send only small messages. */

static void pack_src_set(struct pack_src *ps, const ucp_dt_iov_t *iov, size_t n, const void *buf,
                         size_t len)
{
    if (n == 0) {
        ps->one = (ucp_dt_iov_t){.buffer = (void *)buf, .length = len};
        iov = &ps->one;
        n = 1;
    }
    ps->iov = iov;
    ps->n = n;
    ps->total = 0;
    for (size_t i = 0; i < n; i++)
        ps->total += iov[i].length;
}

static void *pack_start(void *ctx, const void *buffer, size_t count)
{
    (void)ctx;
    (void)count;
    struct pack_src *ps = (struct pack_src *)buffer;
    ps->i = 0;
    ps->at = 0;
    return ps;
}

static void *unpack_start(void *ctx, void *buffer, size_t count)
{
    (void)ctx;
    (void)count;
    return buffer; /* never received into: the handlers take the data as it arrived */
}

static size_t pack_size(void *state)
{
    return ((struct pack_src *)state)->total;
}

/* Bytes [offset, offset + max) of the message (fewer at its end) into dest. UCX packs in order:
 * the entry the last call ended in is where the next one starts looking. */
static size_t pack_bytes(void *state, size_t offset, void *dest, size_t max)
{
    struct pack_src *ps = state;
    if (offset < ps->at) {
        ps->i = 0;
        ps->at = 0;
    }
    while (ps->i < ps->n && offset - ps->at >= ps->iov[ps->i].length) {
        ps->at += ps->iov[ps->i].length;
        ps->i++;
    }
    size_t done = 0;
    while (done < max && ps->i < ps->n) {
        const ucp_dt_iov_t *v = &ps->iov[ps->i];
        size_t skip = offset + done - ps->at;
        size_t take = v->length - skip < max - done ? v->length - skip : max - done;
        memcpy((char *)dest + done, (const char *)v->buffer + skip, take);
        done += take;
        if (skip + take == v->length) {
            ps->at += v->length;
            ps->i++;
        }
    }
    return done;
}

static ucs_status_t unpack_bytes(void *state, size_t offset, const void *src, size_t len)
{
    (void)state;
    (void)offset;
    (void)src;
    (void)len;
    return UCS_ERR_UNSUPPORTED;
}

static void pack_finish(void *state)
{
    (void)state;
}

static const ucp_generic_dt_ops_t pack_ops = {.start_pack = pack_start,
                                              .start_unpack = unpack_start,
                                              .packed_size = pack_size,
                                              .pack = pack_bytes,
                                              .unpack = unpack_bytes,
                                              .finish = pack_finish};

/* Hands ps's message to UCX as an eager active message with rp's callback. */
static ucs_status_ptr_t am_send_src(struct ucx_engine *e, ucp_ep_h ep, unsigned id,
                                    struct pack_src *ps, ucp_request_param_t *rp)
{
    rp->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    rp->datatype = e->packer;
    rp->flags |= UCP_AM_SEND_FLAG_EAGER;
    return ucp_am_send_nbx(ep, id, NULL, 0, ps, 1, rp);
}

static struct ucx_worker *next_home(struct ucx_engine *e)
{
    return &e->w[atomic_fetch_add(&e->rr, 1) % e->nw];
}

/* ---- requests ---------------------------------------------------------------------------------
 */

static bool req_stopped(struct ucx_req *q)
{
    return atomic_load(&q->err) != 0 || atomic_load(&q->canceled);
}

static void req_set_err(struct ucx_req *q, int status)
{
    int none = 0;
    atomic_compare_exchange_strong(&q->err, &none, status);
}

/* One of p's operations ended with an IXL status; `answered`: the peer took part in it (a
 * completed put/get/flush, a reply), so it is not stalled. Under p's worker lock. */
static void op_done(struct ucx_part *p, int status, bool answered)
{
    struct ucx_lane *l = &p->q->rem->lane[p->w->idx];
    l->outstanding--;
    l->last_ms = now_ms();
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
static void op_count(struct ucx_part *p)
{
    struct ucx_lane *l = &p->q->rem->lane[p->w->idx];
    if (l->outstanding++ == 0)
        l->last_ms = now_ms();
    p->pending++;
}

/* ---- the plugin's own WRITE/READ messages (lanes without an RMA transport) ---------------------
 *
 * UCX 1.13 emulates put/get over tcp with its own active messages, and its target side treats a
 * failed acknowledgment as fatal: a target whose initiator dies in the middle of a transfer
 * aborts ("ucp_request.inl:346 Fatal: unexpected error" under ucp_put_handler). So over such
 * lanes the plugin sends its own messages (ucx_wire.h): a WRITE message carries up to
 * UCX_RMA_MAX_ENTRIES descriptors' bytes (at most UCX_AM_MSG), the target checks every range
 * against its registered regions by key, copies, and replies; a READ message names the ranges
 * and the reply carries their bytes. A reply to a dead initiator fails like any send. The
 * replies replace the flush: a part whose messages were all answered is in place at the target.
 */

static size_t key_slot(const struct ucx_engine *e, uint64_t key)
{
    return (size_t)(key ^ key >> 29) & (e->kt_cap - 1);
}

/* The local region with this key, or NULL. Under e->klock (either). */
static struct ucx_md *key_find(const struct ucx_engine *e, uint64_t key)
{
    if (e->kt_cap == 0)
        return NULL;
    for (size_t i = key_slot(e, key);; i = (i + 1) & (e->kt_cap - 1)) {
        if (e->kt[i] == NULL)
            return NULL;
        if (e->kt[i]->key == key)
            return e->kt[i];
    }
}

/* Gives m a fresh random key and enters it. Under e->klock (write). */
static int key_insert(struct ucx_engine *e, struct ucx_md *m)
{
    if (2 * (e->kt_n + 1) > e->kt_cap) {
        size_t cap = e->kt_cap ? 2 * e->kt_cap : 64, old = e->kt_cap;
        struct ucx_md **t = calloc(cap, sizeof(*t)), **ot = e->kt;
        if (t == NULL)
            return IXL_ERR_NO_MEMORY;
        e->kt = t;
        e->kt_cap = cap;
        for (size_t i = 0; i < old; i++)
            if (ot[i] != NULL) {
                size_t j = key_slot(e, ot[i]->key);
                while (t[j] != NULL)
                    j = (j + 1) & (cap - 1);
                t[j] = ot[i];
            }
        free(ot);
    }
    do {
        if (getrandom(&m->key, sizeof(m->key), 0) != (ssize_t)sizeof(m->key))
            return IXL_ERR_SYSTEM;
    } while (m->key == 0 || key_find(e, m->key) != NULL);
    size_t i = key_slot(e, m->key);
    while (e->kt[i] != NULL)
        i = (i + 1) & (e->kt_cap - 1);
    e->kt[i] = m;
    e->kt_n++;
    return IXL_OK;
}

/* Removes m (backward-shift deletion: no tombstones). Under e->klock (write). */
static void key_remove(struct ucx_engine *e, struct ucx_md *m)
{
    size_t mask = e->kt_cap - 1, i = key_slot(e, m->key);
    while (e->kt[i] != m) {
        if (e->kt[i] == NULL)
            return;
        i = (i + 1) & mask;
    }
    e->kt[i] = NULL;
    e->kt_n--;
    for (size_t j = (i + 1) & mask; e->kt[j] != NULL; j = (j + 1) & mask) {
        size_t h = key_slot(e, e->kt[j]->key);
        /* kt[j] stays unless its home lies cyclically outside (i, j] */
        bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            e->kt[i] = e->kt[j];
            e->kt[j] = NULL;
            i = j;
        }
    }
}

/* A send context with room for niov iov entries and `bytes` bytes of message; on w's list. Under
 * w->lock. */
static struct ucx_send *send_new(struct ucx_worker *w, struct ucx_part *p, size_t niov,
                                 size_t bytes)
{
    struct ucx_send *s = malloc(sizeof(*s) + niov * sizeof(ucp_dt_iov_t) + bytes);
    if (s == NULL)
        return NULL;
    s->w = w;
    s->p = p;
    s->token = 0;
    s->niov = niov;
    s->prev = NULL;
    s->next = w->sends;
    if (w->sends != NULL)
        w->sends->prev = s;
    w->sends = s;
    return s;
}

static unsigned char *send_bytes(struct ucx_send *s)
{
    return (unsigned char *)&s->iov[s->niov];
}

static void send_free(struct ucx_send *s)
{
    struct ucx_worker *w = s->w;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        w->sends = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s);
}

/* A slot for a message of p awaiting its reply: its token, or 0 (no memory). Under w->lock. */
static uint64_t op_new(struct ucx_worker *w, struct ucx_part *p, bool read, size_t d0, uint64_t o0,
                       uint64_t bytes)
{
    if (w->free_op == UINT32_MAX) {
        if (w->n_ops == w->cap_ops) {
            uint32_t cap = w->cap_ops ? 2 * w->cap_ops : 256;
            struct ucx_op *ops = cap > w->cap_ops ? realloc(w->ops, cap * sizeof(*ops)) : NULL;
            if (ops == NULL)
                return 0;
            w->ops = ops;
            w->cap_ops = cap;
        }
        w->ops[w->n_ops] = (struct ucx_op){.gen = 0, .next_free = UINT32_MAX};
        w->free_op = w->n_ops++;
    }
    uint32_t i = w->free_op;
    struct ucx_op *o = &w->ops[i];
    w->free_op = o->next_free;
    o->rem = p->q->rem;
    o->p = p;
    /* A random generation: a peer cannot guess the token of another peer's message, and a late
     * reply does not match the slot's next use. Never 0, so tokens are never 0. */
    uint32_t g;
    do {
        w->rng ^= w->rng << 13;
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        g = (uint32_t)(w->rng >> 32);
    } while (g == 0 || g == o->gen);
    o->gen = g;
    o->read = read;
    o->d0 = d0;
    o->o0 = o0;
    o->bytes = bytes;
    p->replies++;
    p->inflight += bytes;
    return (uint64_t)o->gen << 32 | i;
}

/* The slot a token names (live or orphaned), or NULL (free, reused since, or never given out).
 * Under w->lock. */
static struct ucx_op *op_find(struct ucx_worker *w, uint64_t token)
{
    uint32_t i = (uint32_t)token;
    if (i >= w->n_ops || w->ops[i].rem == NULL || w->ops[i].gen != (uint32_t)(token >> 32))
        return NULL;
    return &w->ops[i];
}

static void op_free(struct ucx_worker *w, struct ucx_op *o)
{
    o->rem = NULL;
    o->p = NULL;
    o->next_free = w->free_op;
    w->free_op = (uint32_t)(o - w->ops);
}

/* The reply o awaited came (or never will, or no longer matters): the operation counts done;
 * `orphan`: the slot stays to recognize the reply, which writes nothing. Under w->lock. */
static void op_end(struct ucx_worker *w, struct ucx_op *o, int status, bool answered, bool orphan)
{
    struct ucx_part *p = o->p;
    o->p = NULL;
    p->inflight -= o->bytes;
    if (!orphan)
        op_free(w, o);
    p->replies--;
    op_done(p, status, answered);
    /* the window has room: its next messages go out after this progress call */
    if (p->pending > 0 && !p->queued && p->phase == PH_DATA && p->inflight <= UCX_AM_WINDOW / 2 &&
        (p->nd < p->d1 || (p->nd == p->d1 && p->no < p->o1))) {
        p->queued = true;
        p->next = w->ready;
        w->ready = p;
    }
}

/* Ends every awaited reply of r's requests, live or orphaned (r's endpoint of w is gone), or
 * orphans those of part p (released): none of them lands after this. Under w->lock. */
static void ops_drop(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int status)
{
    for (uint32_t i = 0; i < w->n_ops; i++) {
        struct ucx_op *o = &w->ops[i];
        if (p != NULL && o->p == p)
            op_end(w, o, status, false, true);
        else if (p == NULL && o->rem == r && o->p != NULL)
            op_end(w, o, status, false, false);
        else if (p == NULL && o->rem == r)
            op_free(w, o);
    }
}

/* UCX completed (or failed) a send of the plugin's. Under its worker's lock. */
static void send_done(struct ucx_send *s, ucs_status_t st)
{
    struct ucx_part *p = s->p;
    if (p != NULL) {
        struct ucx_op *o = st != UCS_OK ? op_find(s->w, s->token) : NULL;
        if (o != NULL && o->p != NULL)
            op_end(s->w, o, status_of(st), false, false); /* never left: no reply */
        else if (o != NULL)
            op_free(s->w, o);
        op_done(p, status_of(st), false); /* local completion says nothing of the peer */
    }
    send_free(s);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    send_done(user_data, status);
}

/* Hands s (its message: iov, or `len` bytes at buf) to UCX as an eager active message (a
 * request's message asks for a reply). UCS_INPROGRESS: UCX completes it later; otherwise it
 * ended (s is freed) with the status returned. Under s's worker's lock. */
static ucs_status_t send_am(ucp_ep_h ep, unsigned id, struct ucx_send *s, const void *buf,
                            size_t len, bool reply)
{
    ucp_request_param_t rp = {.op_attr_mask =
                                  UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = send_cb,
                              .user_data = s,
                              .flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0};
    pack_src_set(&s->src, s->iov, s->niov, buf, len);
    ucs_status_ptr_t sp = am_send_src(s->w->e, ep, id, &s->src, &rp);
    if (UCS_PTR_IS_PTR(sp))
        return UCS_INPROGRESS;
    send_done(s, UCS_PTR_STATUS(sp));
    return UCS_PTR_STATUS(sp);
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
    pthread_mutex_unlock(&e->lock);
    if (r == NULL) {
        free(b);
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    struct ucx_worker *w = next_home(e);
    pthread_mutex_lock(&w->lock);
    ucp_ep_h ep;
    int rc = ep_get_locked(w, r, &ep);
    struct ucx_send *s = NULL;
    if (rc == IXL_OK && (s = send_new(w, NULL, 0, blen)) == NULL)
        rc = IXL_ERR_NO_MEMORY;
    if (rc == IXL_OK) {
        memcpy(send_bytes(s), b, blen);
        ucs_status_t st = send_am(ep, UCX_AM_NOTIF, s, send_bytes(s), blen, false);
        if (st != UCS_OK && st != UCS_INPROGRESS) {
            fail(e, status_of(st), "notification to '%s': %s", remote_agent, ucs_status_string(st));
            rc = status_of(st);
        }
    }
    pthread_mutex_unlock(&w->lock);
    wake(w);
    free(b);
    return rc;
}

/* One request message of part p: n entries (src: their local bytes), `bytes` in all, whose local
 * side starts at descriptor d0, byte o0. Under w->lock. */
static int am_issue(struct ucx_worker *w, struct ucx_part *p, const struct ucx_rma_entry *ent,
                    void *const *src, size_t n, uint64_t bytes, size_t d0, uint64_t o0)
{
    struct ucx_req *q = p->q;
    bool read = q->op == IXL_OP_READ;
    size_t hlen = UCX_RMA_HDR + n * UCX_RMA_ENTRY;
    struct ucx_send *s = send_new(w, p, read ? 0 : n + 1, hlen);
    uint64_t token = s != NULL ? op_new(w, p, read, d0, o0, bytes) : 0;
    if (token == 0) {
        if (s != NULL)
            send_free(s);
        req_set_err(q, IXL_ERR_NO_MEMORY);
        return IXL_ERR_NO_MEMORY;
    }
    s->token = token;
    unsigned char *hdr = send_bytes(s);
    ucx_rma_req_encode(hdr, read ? UCX_RMA_READ : UCX_RMA_WRITE, token, n, ent);
    if (!read) {
        s->iov[0] = (ucp_dt_iov_t){.buffer = hdr, .length = hlen};
        for (size_t i = 0; i < n; i++)
            s->iov[i + 1] = (ucp_dt_iov_t){.buffer = src[i], .length = ent[i].len};
    }
    op_count(p); /* the reply */
    op_count(p); /* the send */
    send_am(q->rem->lane[w->idx].ep, UCX_AM_RMA, s, hdr, hlen, true);
    return IXL_OK;
}

/* Issues p's next messages on worker w, from (nd, no) while the window has room. Under w->lock,
 * with p->pending held above 0 by the caller. */
static void part_fill_am_locked(struct ucx_worker *w, struct ucx_part *p)
{
    struct ucx_req *q = p->q;
    size_t d = p->nd;
    uint64_t off = p->no;
    while (!req_stopped(q) && p->inflight < UCX_AM_WINDOW &&
           (d < p->d1 || (d == p->d1 && off < p->o1))) {
        struct ucx_rma_entry ent[UCX_RMA_MAX_ENTRIES];
        void *src[UCX_RMA_MAX_ENTRIES];
        size_t n = 0, d0 = d;
        uint64_t bytes = 0, o0 = off;
        while (n < UCX_RMA_MAX_ENTRIES && bytes < UCX_AM_MSG &&
               (d < p->d1 || (d == p->d1 && off < p->o1))) {
            const struct ixl_xfer_desc *ld = &q->local.descs[d], *rd = &q->remote.descs[d];
            uint64_t end = d == p->d1 ? p->o1 : ld->len;
            if (off >= end) {
                d++;
                off = 0;
                continue;
            }
            uint64_t take = end - off < UCX_AM_MSG - bytes ? end - off : UCX_AM_MSG - bytes;
            ent[n] = (struct ucx_rma_entry){
                .key = ((const struct ucx_md *)rd->md)->key, .addr = rd->addr + off, .len = take};
            src[n++] = (void *)(uintptr_t)(ld->addr + off);
            bytes += take;
            off += take;
        }
        if (n == 0 || am_issue(w, p, ent, src, n, bytes, d0, o0) != IXL_OK)
            break;
    }
    p->nd = d;
    p->no = off;
}

/* Target side: a request message from a peer's worker. Runs in ucp_worker_progress (w->lock). */
static ucs_status_t am_rma_cb(void *arg, const void *header, size_t header_len, void *data,
                              size_t len, const ucp_am_recv_param_t *param)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    (void)header;
    (void)header_len;
    enum ucx_rma_kind kind;
    uint64_t token, total;
    size_t n;
    const unsigned char *ents, *payload;
    ucp_ep_h reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    int st = IXL_OK;
    if (rndv || !ucx_rma_req_decode(data, len, &kind, &token, &n, &ents, &payload, &total)) {
        /* answered when its token can be read, so that its request fails now rather than at
         * the deadline */
        bool peek = !rndv && ucx_rma_peek(data, len, &kind, &token) &&
                    (kind == UCX_RMA_WRITE || kind == UCX_RMA_READ);
        e->host->log(e->host->ctx, IXL_LOG_WARN, "UCX: malformed WRITE/READ message (%zu bytes)%s",
                     len, peek && reply != NULL ? ": answered with IXL_ERR_PROTOCOL" : ", dropped");
        if (!peek)
            return UCS_OK;
        n = 0;
        total = 0;
        st = IXL_ERR_PROTOCOL;
    }
    if (reply == NULL) {
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: dropped a WRITE/READ message with no endpoint to reply on");
        return UCS_OK;
    }
    bool read = kind == UCX_RMA_READ;
    if (st == IXL_OK && total > UCX_RMA_MAX_BYTES)
        st = IXL_ERR_TOO_LARGE;
    struct ucx_send *s = NULL;
    pthread_rwlock_rdlock(&e->klock);
    struct ucx_rma_entry en;
    for (size_t i = 0; i < n && st == IXL_OK; i++) {
        ucx_rma_entry_at(ents, i, &en);
        const struct ucx_md *m = key_find(e, en.key);
        if (m == NULL || en.addr < m->addr || en.len > m->len ||
            en.addr - m->addr > m->len - en.len)
            st = IXL_ERR_REMOTE_REFUSED;
    }
    if (st == IXL_OK && read && (s = send_new(w, NULL, 0, UCX_RMA_HDR + total)) == NULL)
        st = IXL_ERR_NO_MEMORY;
    unsigned char *out = s != NULL ? send_bytes(s) + UCX_RMA_HDR : NULL;
    for (size_t i = 0; i < n && st == IXL_OK; i++) {
        ucx_rma_entry_at(ents, i, &en);
        if (read)
            memcpy(out, (const void *)(uintptr_t)en.addr, en.len);
        else
            memcpy((void *)(uintptr_t)en.addr, payload, en.len);
        out = read ? out + en.len : out;
        payload += read ? 0 : en.len;
    }
    pthread_rwlock_unlock(&e->klock);
    if (st != IXL_OK && st != IXL_ERR_PROTOCOL)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: refused a %s message of %zu ranges, %" PRIu64 " bytes: %s",
                     read ? "READ" : "WRITE", n, total,
                     st == IXL_ERR_REMOTE_REFUSED ? "a range outside every registered region"
                     : st == IXL_ERR_TOO_LARGE    ? "over the largest message"
                                                  : "out of memory");
    if (st != IXL_OK && s != NULL) {
        send_free(s);
        s = NULL;
    }
    if (s == NULL && (s = send_new(w, NULL, 0, UCX_RMA_HDR)) == NULL)
        return UCS_OK; /* no memory even for the reply: the initiator's deadline fails it */
    size_t blen = st == IXL_OK && read ? UCX_RMA_HDR + total : UCX_RMA_HDR;
    ucx_rma_reply_encode(send_bytes(s), read ? UCX_RMA_DATA : UCX_RMA_ACK, st, token);
    send_am(reply, UCX_AM_RMA_REPLY, s, send_bytes(s), blen, false);
    return UCS_OK;
}

/* Initiator side: a reply to one of w's messages. Runs in ucp_worker_progress (w->lock). */
static ucs_status_t am_reply_cb(void *arg, const void *header, size_t header_len, void *data,
                                size_t len, const ucp_am_recv_param_t *param)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    (void)header;
    (void)header_len;
    enum ucx_rma_kind kind;
    int32_t status;
    uint64_t token;
    const unsigned char *payload;
    size_t plen;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    bool bad = rndv || !ucx_rma_reply_decode(data, len, &kind, &status, &token, &payload, &plen);
    if (bad && (rndv || !ucx_rma_peek(data, len, &kind, &token))) {
        e->host->log(e->host->ctx, IXL_LOG_WARN, "UCX: dropped a malformed reply (%zu bytes)", len);
        return UCS_OK;
    }
    struct ucx_op *o = op_find(w, token);
    if (bad && o != NULL && o->p != NULL) { /* its message fails now, not at the deadline */
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: a malformed reply (%zu bytes) from '%s': its request fails", len,
                     o->rem->name);
        op_end(w, o, IXL_ERR_PROTOCOL, true, false);
        return UCS_OK;
    }
    if (bad)
        return UCS_OK;
    if (o == NULL)
        return UCS_OK;  /* its request failed: nothing of it lands */
    if (o->p == NULL) { /* its request was released: nothing lands, but the peer answers */
        struct ucx_remote *r = o->rem;
        op_free(w, o);
        r->lane[w->idx].stalled = false;
        if (atomic_exchange(&r->stalled, false))
            e->host->log(e->host->ctx, IXL_LOG_INFO, "UCX: '%s' answers again", r->name);
        return UCS_OK;
    }
    struct ucx_req *q = o->p->q;
    int st = IXL_OK;
    if (o->read != (kind == UCX_RMA_DATA) || (status == 0 && o->read && plen != o->bytes))
        st = IXL_ERR_PROTOCOL;
    else if (status != 0)
        st = status == IXL_ERR_TOO_LARGE || status == IXL_ERR_NO_MEMORY ? status
                                                                        : IXL_ERR_REMOTE_REFUSED;
    if (st != IXL_OK)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: '%s' answered a %s message with status %" PRId32 "%s", q->rem->name,
                     o->read ? "READ" : "WRITE", status,
                     st == IXL_ERR_PROTOCOL ? " and a reply that does not match it" : "");
    if (st == IXL_OK && o->read) {
        size_t d = o->d0;
        uint64_t off = o->o0;
        for (uint64_t left = plen; left > 0;) {
            const struct ixl_xfer_desc *ld = &q->local.descs[d];
            if (off >= ld->len) {
                d++;
                off = 0;
                continue;
            }
            uint64_t take = ld->len - off < left ? ld->len - off : left;
            memcpy((void *)(uintptr_t)(ld->addr + off), payload, take);
            payload += take;
            left -= take;
            off += take;
        }
    }
    op_end(w, o, st, true, false);
    return UCS_OK;
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
static void part_advance_locked(struct ucx_worker *w, struct ucx_part *p)
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
            op_count(p);
            pack_src_set(&q->notif_src, NULL, 0, q->notif, q->notif_len);
            op_started(p, am_send_src(q->e, l->ep, UCX_AM_NOTIF, &q->notif_src, &rp));
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
static void part_start_locked(struct ucx_worker *w, struct ucx_part *p)
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

static int ucx_post_xfer(struct ixl_engine *base, struct ixl_req *req,
                         const struct ixl_xfer_opts *opts)
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
    progress_locked(w);
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
    for (unsigned k = 0; k < q->nparts; k++) {
        struct ucx_worker *w = q->part[k].w;
        if (block)
            pthread_mutex_lock(&w->lock);
        else if (pthread_mutex_trylock(&w->lock) != 0)
            continue;
        any = progress_locked(w) || any;
        pthread_mutex_unlock(&w->lock);
    }
    return any;
}

static int ucx_check_xfer(struct ixl_engine *base, struct ixl_req *req)
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

/* Progresses until UCX is done with q or ms ran out. */
static bool wait_done(struct ucx_req *q, uint64_t ms)
{
    uint64_t end = now_ms() + ms;
    while (atomic_load(&q->busy) && now_ms() < end)
        if (!req_progress(q, true))
            sched_yield();
    return !atomic_load(&q->busy);
}

static int ucx_release_req(struct ixl_engine *base, struct ixl_req *req)
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

static int ucx_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
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

/* ---- connections ------------------------------------------------------------------------------
 */

static int ucx_get_conn_info(struct ixl_engine *base, const void **info, size_t *len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    *info = e->info;
    *len = e->info_len;
    return IXL_OK;
}

/* Records (or replaces) an agent's connection info. Under e->lock and every worker lock (or
 * before the threads start). */
static int remote_set_locked(struct ucx_engine *e, const char *name, const void *info, size_t len)
{
    struct ucx_remote *r = remote_find(e, name);
    if (r != NULL && r->info_len == len && memcmp(r->info, info, len) == 0) {
        /* reloaded as it was: a stalled peer gets another chance (a lane still silent with
         * operations outstanding is found stalled again at the next progress) */
        for (unsigned i = 0; i < e->nw; i++)
            r->lane[i].stalled = false;
        atomic_store(&r->stalled, false);
        return IXL_OK;
    }
    void *copy = malloc(len);
    if (copy == NULL)
        return IXL_ERR_NO_MEMORY;
    memcpy(copy, info, len);
    const void *addr[UCX_MAX_ADDRS];
    size_t alen[UCX_MAX_ADDRS];
    size_t n = ucx_info_decode(copy, len, addr, alen);
    if (n == 0) {
        free(copy);
        return IXL_ERR_MALFORMED;
    }
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL || (r->name = strdup(name)) == NULL) {
            free(r);
            free(copy);
            return IXL_ERR_NO_MEMORY;
        }
        r->next = e->remotes;
        e->remotes = r;
    } else {
        for (unsigned i = 0; i < e->nw; i++) { /* a restarted peer: its requests fail */
            close_ep_locked(&e->w[i], r);
            r->lane[i].quiet_until = 0; /* new addresses: nothing of the old can collide */
            r->lane[i].reached = false;
        }
        atomic_store(&r->stalled, false);
    }
    free(r->info);
    r->info = copy;
    r->info_len = len;
    r->n_addrs = n;
    memcpy(r->addr, addr, n * sizeof(addr[0]));
    memcpy(r->addr_len, alen, n * sizeof(alen[0]));
    return IXL_OK;
}

static int ucx_load_remote_conn_info(struct ixl_engine *base, const char *remote_agent,
                                     const void *info, size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    const void *addr[UCX_MAX_ADDRS];
    size_t alen[UCX_MAX_ADDRS];
    if (ucx_info_decode(info, len, addr, alen) == 0) {
        fail(e, IXL_ERR_MALFORMED,
             "connection info of '%s' is not a list of UCX worker addresses (version %d)",
             remote_agent, UCX_INFO_VERSION);
        return IXL_ERR_MALFORMED;
    }
    pthread_mutex_lock(&e->lock);
    lock_workers(e);
    int rc = remote_set_locked(e, remote_agent, info, len);
    unlock_workers(e);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static struct ucx_remote *remote_get(struct ucx_engine *e, const char *name)
{
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, name);
    pthread_mutex_unlock(&e->lock);
    return r;
}

static int ucx_connect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_remote *r = remote_get(e, remote_agent);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    if (strcmp(remote_agent, e->name) == 0)
        return IXL_OK; /* to itself: at the first transfer, so that an endpoint UCX refuses
                          (shared memory with err_mode=peer) fails that transfer with the reason */
    int rc = IXL_OK;
    for (unsigned i = 0; i < e->nw && rc == IXL_OK; i++) {
        ucp_ep_h ep;
        pthread_mutex_lock(&e->w[i].lock);
        rc = ep_get_locked(&e->w[i], r, &ep);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    return rc;
}

static int ucx_disconnect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_remote *r = remote_get(e, remote_agent);
    for (unsigned i = 0; r != NULL && i < e->nw; i++) {
        pthread_mutex_lock(&e->w[i].lock);
        struct ucx_lane *l = &r->lane[i];
        /* A stalled lane (a stopped peer) keeps its endpoint: a forced close with data queued
         * is not safe in UCX 1.13 (UCX_STALL_MS). Its requests already failed; the endpoint
         * ends when the peer answers or dies, and posts fail until then. */
        if (l->stalled && l->outstanding > 0)
            e->host->log(e->host->ctx, IXL_LOG_INFO,
                         "UCX: '%s' is stalled with %zu operations outstanding: its endpoint "
                         "of worker %u stays open until they end",
                         r->name, l->outstanding, i);
        else
            close_ep_locked(&e->w[i], r);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    return IXL_OK;
}

/* ---- memory -----------------------------------------------------------------------------------
 */

/* Undoes a local registration: its key out of the table (waiting for a peer's message copying in
 * or out of it), its memory handle unmapped (or its allocation's count dropped), m freed. */
static void md_local_free(struct ucx_engine *e, struct ucx_md *m)
{
    if (m->key != 0) {
        pthread_rwlock_wrlock(&e->klock);
        key_remove(e, m);
        pthread_rwlock_unlock(&e->klock);
    }
    pthread_mutex_lock(&e->lock);
    if (m->alloc)
        m->alloc->regs--;
    else
        ucp_mem_unmap(e->ctx, m->memh);
    pthread_mutex_unlock(&e->lock);
    free(m->pub);
    free(m);
}

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
    /* Only DRAM is reachable by the plugin's messages (the target copies with the CPU): other
     * regions keep key 0, which no table entry has. */
    int krc = IXL_OK;
    if (type == IXL_MEM_DRAM) {
        pthread_rwlock_wrlock(&e->klock);
        krc = key_insert(e, m);
        pthread_rwlock_unlock(&e->klock);
    }
    m->pub = krc == IXL_OK ? ucx_pub_encode(m->key, rk, rk_len, &m->pub_len) : NULL;
    ucp_rkey_buffer_release(rk);
    if (m->pub == NULL) {
        md_local_free(e, m);
        return krc != IXL_OK ? krc : IXL_ERR_NO_MEMORY;
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int ucx_deregister_mem(struct ixl_engine *base, struct ixl_md *md)
{
    md_local_free((struct ucx_engine *)base, (struct ucx_md *)md);
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
                         uint64_t key, const void *rkey, size_t rkey_len, struct ixl_md **out)
{
    struct ucx_md *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->rkey_buf = malloc(rkey_len)) == NULL ||
        (m->rk = calloc(e->nw, sizeof(*m->rk))) == NULL) {
        if (m != NULL)
            free(m->rkey_buf);
        free(m);
        return IXL_ERR_NO_MEMORY;
    }
    m->kind = MD_REMOTE;
    m->addr = addr;
    m->len = len;
    m->key = key;
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
    uint64_t key;
    const void *rk = ucx_pub_decode(data, len, &key, &rk_len);
    if (rk == NULL) {
        fail(e, IXL_ERR_MALFORMED,
             "public data of a region of '%s' is not a UCX region key and remote key (version %d)",
             remote_agent, UCX_VERSION);
        return IXL_ERR_MALFORMED;
    }
    struct ucx_remote *r = remote_get(e, remote_agent);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    return remote_md_new(e, r, desc->addr, desc->len, key, rk, rk_len, out);
}

static int ucx_load_local_md(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    struct ucx_remote *self = remote_get(e, e->name);
    size_t rk_len;
    uint64_t key;
    const void *rk = ucx_pub_decode(m->pub, m->pub_len, &key, &rk_len);
    if (self == NULL || rk == NULL)
        return IXL_ERR_BACKEND;
    return remote_md_new(e, self, m->addr, m->len, key, rk, rk_len, out);
}

static int ucx_unload_md(struct ixl_engine *base, struct ixl_md *md)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    for (unsigned i = 0; i < e->nw; i++) {
        pthread_mutex_lock(&e->w[i].lock);
        if (m->rk[i].rkey != NULL)
            ucp_rkey_destroy(m->rk[i].rkey);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    free(m->rk);
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

/* Creates worker i: its UCP worker, notification handler, event fd and epoll set. */
static int worker_create(struct ucx_engine *e, unsigned i, ucp_address_t **addr, size_t *addr_len)
{
    struct ucx_worker *w = &e->w[i];
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = UCX_AM_NOTIF,
                                 .cb = am_notif_cb,
                                 .arg = e};
    ucp_am_handler_param_t rma = ap, reply = ap;
    rma.id = UCX_AM_RMA;
    rma.cb = am_rma_cb;
    rma.arg = w;
    reply.id = UCX_AM_RMA_REPLY;
    reply.cb = am_reply_cb;
    reply.arg = w;
    ucs_status_t st = ucp_worker_create(e->ctx, &wp, &w->w);
    if (st != UCS_OK)
        w->w = NULL;
    else if ((st = ucp_worker_set_am_recv_handler(w->w, &ap)) == UCS_OK &&
             (st = ucp_worker_set_am_recv_handler(w->w, &rma)) == UCS_OK &&
             (st = ucp_worker_set_am_recv_handler(w->w, &reply)) == UCS_OK &&
             (st = ucp_worker_get_efd(w->w, &w->efd)) == UCS_OK)
        st = ucp_worker_get_address(w->w, addr, addr_len);
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "cannot create UCP worker %u (transports '%s'): %s", i, e->tls,
             ucs_status_string(st));
        return IXL_ERR_BACKEND;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    if ((w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (ev.data.fd = w->efd, epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->efd, &ev)) != 0 ||
        (ev.data.fd = w->wakefd, epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev)) != 0) {
        fail(e, IXL_ERR_SYSTEM, "epoll/eventfd: %s", strerror(errno));
        return IXL_ERR_SYSTEM;
    }
    return IXL_OK;
}

static int ucx_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    const struct ixl_host *host = init->host;
    struct ucx_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = host;
    e->ntail = &e->nhead;
    e->notif_max = init->notif_max;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->nlock, NULL);
    pthread_rwlock_init(&e->klock, NULL);
    if ((e->name = strdup(init->agent_name)) == NULL) {
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NO_MEMORY;
    }
    unsigned long workers, keepalive, prog, timeout;
    const char *mode = param(init, "err_mode"), *emu = param(init, "rma_emulation");
    if (parse_uint(param(init, "workers"), 1, UCX_MAX_WORKERS, &workers) != 0 ||
        parse_uint(param(init, "keepalive_ms"), 1, 3600000, &keepalive) != 0 ||
        parse_uint(param(init, "timeout_ms"), 0, 3600000, &timeout) != 0 ||
        parse_uint(param(init, "progress_us"), 1, 1000000, &prog) != 0 ||
        (strcmp(mode, "peer") != 0 && strcmp(mode, "none") != 0) ||
        (strcmp(emu, "ixl") != 0 && strcmp(emu, "ucx") != 0)) {
        fail(e, IXL_ERR_INVALID_ARG,
             "bad option: workers (1..%d), keepalive_ms (1..3600000), timeout_ms (0..3600000), "
             "progress_us (1..1000000), err_mode (peer|none) or rma_emulation (ixl|ucx)",
             UCX_MAX_WORKERS);
        ucx_destroy_engine(&e->base);
        return IXL_ERR_INVALID_ARG;
    }
    e->progress_us = (unsigned)prog;
    e->timeout_ms = timeout;
    e->own_rma = strcmp(emu, "ixl") == 0;
    e->err_mode =
        strcmp(mode, "peer") == 0 ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    snprintf(e->tls, sizeof(e->tls), "%s", param(init, "transports"));
    if ((e->w = calloc(workers, sizeof(*e->w))) == NULL) {
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NO_MEMORY;
    }
    e->nw = (unsigned)workers;
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        w->e = e;
        w->idx = i;
        w->efd = w->wakefd = w->epfd = -1;
        w->todo_tail = &w->todo;
        w->free_op = UINT32_MAX;
        if (getrandom(&w->rng, sizeof(w->rng), 0) != (ssize_t)sizeof(w->rng) || w->rng == 0)
            w->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)now_ms() ^ ((uint64_t)i << 40);
        pthread_mutex_init(&w->lock, NULL);
    }

    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "ucp_config_read: %s", ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    char ka[32];
    snprintf(ka, sizeof(ka), "%lums", keepalive);
    /* TX_SEG_SIZE, the tcp transport's send segment (UCX_TCP_TX_SEG_SIZE; transport settings
     * go through ucp_config_modify by their names without "TCP_", and no other transport has
     * this one): 64 KiB instead of 8. The plugin's messages are copied into these segments
     * (see pack_ops), one send() each; 64 KiB is the receive segment (UCX_TCP_RX_SEG_SIZE),
     * the most a peer takes in one. Left alone where the user set either, and where tcp cannot
     * open: UCX warns about a transport setting no transport took. */
    const char *devices = param(init, "devices");
    bool seg = tcp_may_open(e->tls, devices) && getenv("UCX_TCP_TX_SEG_SIZE") == NULL &&
               getenv("UCX_TCP_RX_SEG_SIZE") == NULL;
    const char *mods[][2] = {{"TLS", e->tls},
                             {"NET_DEVICES", devices},
                             {"KEEPALIVE_INTERVAL", ka},
                             {"TX_SEG_SIZE", "64k"}};
    size_t nmods = sizeof(mods) / sizeof(mods[0]) - (seg ? 0 : 1);
    for (size_t i = 0; i < nmods; i++)
        if ((st = ucp_config_modify(cfg, mods[i][0], mods[i][1])) != UCS_OK) {
            fail(e, IXL_ERR_INVALID_ARG, "UCX_%s=%s refused: %s", mods[i][0], mods[i][1],
                 ucs_status_string(st));
            ucp_config_release(cfg);
            ucx_destroy_engine(&e->base);
            return IXL_ERR_INVALID_ARG;
        }
    /* mt_workers_shared: memory registration runs beside the workers' threads. */
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                       .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                       .mt_workers_shared = 1};
    st = ucp_init(&up, cfg, &e->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        e->ctx = NULL;
        fail(e, IXL_ERR_BACKEND, "ucp_init (transports '%s'): %s", e->tls, ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    if ((st = ucp_dt_create_generic(&pack_ops, NULL, &e->packer)) != UCS_OK) {
        e->packer = 0;
        fail(e, IXL_ERR_BACKEND, "ucp_dt_create_generic: %s", ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    e->base.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(e->ctx, &ca) == UCS_OK &&
        (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)))
        e->base.mem_mask |= IXL_MEM_BIT(IXL_MEM_VRAM);

    ucp_address_t *addr[UCX_MAX_WORKERS] = {NULL};
    size_t addr_len[UCX_MAX_WORKERS] = {0};
    int rc = IXL_OK;
    for (unsigned i = 0; i < e->nw && rc == IXL_OK; i++)
        rc = worker_create(e, i, &addr[i], &addr_len[i]);
    if (rc == IXL_OK) {
        e->info = ucx_info_encode(e->nw, (const void *const *)addr, addr_len, &e->info_len);
        rc = e->info == NULL ? IXL_ERR_NO_MEMORY
                             : remote_set_locked(e, e->name, e->info, e->info_len);
    }
    for (unsigned i = 0; i < e->nw; i++)
        if (addr[i] != NULL)
            ucp_worker_release_address(e->w[i].w, addr[i]);
    if (rc != IXL_OK) {
        ucx_destroy_engine(&e->base);
        return rc;
    }
    for (unsigned i = 0; i < e->nw; i++) {
        if ((rc = pthread_create(&e->w[i].thread, NULL, progress_main, &e->w[i])) != 0) {
            fail(e, IXL_ERR_SYSTEM, "cannot start progress thread %u: %s", i, strerror(rc));
            ucx_destroy_engine(&e->base);
            return IXL_ERR_SYSTEM;
        }
        e->w[i].thread_started = true;
    }
    *out = &e->base;
    return IXL_OK;
}

static void ucx_destroy_engine(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (e == NULL)
        return;
    atomic_store(&e->stop, true);
    for (unsigned i = 0; i < e->nw; i++)
        if (e->w[i].thread_started) {
            wake(&e->w[i]);
            pthread_join(e->w[i].thread, NULL);
        }
    uint64_t quiet = 0;
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        if (w->w == NULL)
            continue;
        pthread_mutex_lock(&w->lock);
        for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next) {
            close_ep_locked(w, r);
            quiet = r->lane[i].quiet_until > quiet ? r->lane[i].quiet_until : quiet;
        }
        pthread_mutex_unlock(&w->lock);
    }
    /* The closed endpoints' teardown (both sides' tcp connections) ends before the workers go. */
    for (int k = 0; k < 100 || now_ms() < quiet; k++) {
        bool any = false;
        for (unsigned i = 0; i < e->nw; i++)
            if (e->w[i].w != NULL) {
                pthread_mutex_lock(&e->w[i].lock);
                any = progress_locked(&e->w[i]) || any;
                pthread_mutex_unlock(&e->w[i].lock);
            }
        if (!any && k >= 100)
            sched_yield();
    }
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        if (w->w != NULL)
            ucp_worker_destroy(w->w);
        while (w->sends != NULL) /* messages UCX never completed (a stopped peer) */
            send_free(w->sends);
        free(w->ops);
        if (w->wakefd >= 0)
            close(w->wakefd);
        if (w->epfd >= 0)
            close(w->epfd);
        pthread_mutex_destroy(&w->lock);
    }
    /* Requests the core abandoned (release kept answering BUSY): UCX is gone with their operations,
     * and nothing refers to them any more. */
    while (e->held != NULL) {
        struct ucx_req *q = e->held;
        e->held = q->hnext;
        free(q->notif);
        free(q);
    }
    while (e->allocs != NULL) { /* the core frees what it allocated; this is what it did not */
        struct ucx_alloc *a = e->allocs;
        e->allocs = a->next;
        ucp_mem_unmap(e->ctx, a->memh);
        free(a);
    }
    if (e->ctx != NULL)
        ucp_cleanup(e->ctx);
    if (e->packer != 0)
        ucp_dt_destroy(e->packer);
    while (e->remotes != NULL) {
        struct ucx_remote *r = e->remotes;
        e->remotes = r->next;
        free(r->name);
        free(r->info);
        free(r);
    }
    struct notif *n = e->nhead;
    while (n != NULL) {
        struct notif *next = n->next;
        free(n);
        n = next;
    }
    free(e->w);
    free(e->info);
    free(e->name);
    free(e->kt);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->nlock);
    pthread_rwlock_destroy(&e->klock);
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

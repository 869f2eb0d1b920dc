/*
 * UCX: a dynamically loaded backend plugin on UCP (libucx), built through the plugin ABI alone.
 * This is its private header. ucx_engine.c: options, create and destroy, connections, memory,
 * notifications; ucx_worker.c: progress threads, endpoints, the deadline; ucx_xfer.c: requests
 * and their parts; ucx_am.c: the plugin's own active messages (WRITE/READ over lanes without an
 * RMA transport); ucx_wire.c: their bytes and checked decoders.
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
 * leaves; the target answers whether it queued it (its queue is bounded), and the request ends
 * with that answer.
 *
 * Progress: each worker's thread spins while that worker has parts in flight and for spin_us
 * after its last activity, and otherwise sleeps on the worker's event fd (ucp_worker_arm +
 * epoll) for at most progress_us; progress(), check_xfer and wait_xfer let the agent's threads
 * progress the workers too: a caller waiting in ixl_xfer_wait watches its request's worker on
 * its own thread (wait_xfer: one such caller per worker, for the core's budget), and while a
 * caller polls or watches a worker, the worker's thread sleeps (ucx_worker.c), so the polling
 * moves from one thread to the other instead of adding one. Deadline: when operations to
 * a peer are outstanding and none completed for timeout_ms, the peer is stalled (a stopped
 * peer's kernel still acknowledges tcp, so neither UCX's keepalive nor the socket notices it):
 * its requests in flight fail with IXL_ERR_REMOTE_DISCONNECT and new posts to it fail at once,
 * until one of its operations completes again. Its endpoint stays open (UCX_STALL_MS): UCX keeps
 * the operations, so those requests stay busy and release answers IXL_ERR_BUSY until the peer
 * resumes or dies.
 */
#ifndef IXL_UCX_H
#define IXL_UCX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include <ixl/ixl_plugin.h>

#include "../common/ixl_name_index.h"
#include "ucx_wire.h"

#define UCX_AM_NOTIF 0x1d1
#define UCX_AM_RMA 0x1d2       /* the plugin's WRITE/READ messages (ucx_wire.h) */
#define UCX_AM_RMA_REPLY 0x1d3 /* their replies, and the answers to notifications */
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
 * peer's ucp_request.c "got REP message" at worker destroy); README.md, Connections. */
#define UCX_REOPEN_QUIET_MS 100
/* A forced close of a tcp endpoint with data queued on its socket leaves UCX 1.13 with a
 * half-destroyed endpoint (operations purged, kept for receiving, a FIN queued behind a cut
 * message) that it uses after freeing it once the peer reads or goes away (segfaults, and
 * "iovec.c:62 Assertion" in uct_tcp_iface_progress; README.md, Failures). So neither release
 * nor the deadline force-closes: a request past timeout_ms fails while UCX keeps its operations
 * (the request stays busy), and release answers BUSY until they end. A worker with parts in
 * flight and nothing done for UCX_STALL_MS sleeps on its events instead of spinning. */
#define UCX_STALL_MS 100
#define UCX_MAX_WORKERS UCX_MAX_ADDRS
#define UCX_CHUNK ((uint64_t)4 << 20) /* largest single put or get */
/* A notification with no request (gen_notif) waits this long for the target's answer when
 * timeout_ms is 0 (never). */
#define UCX_NOTIF_WAIT_MS 30000
/* caller_ns while a polling caller (check_xfer) progresses the worker: recent, whatever the
 * clock says (ucx_worker.c, caller_recent). */
#define UCX_CALLER_IN UINT64_MAX
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
    uint64_t quiet_until; /* now_ms: no new ep to addr before (UCX_REOPEN_QUIET_MS) */
    size_t outstanding;   /* operations on ep not completed */
    uint64_t last_ms;     /* now_ms of the deadline scan that saw `acts` move last */
    uint64_t acts, acts_seen; /* completions on ep, and starts from none outstanding: counted
                                 without a clock; the scan dates last_ms from their change */
    char path[32];            /* transports of ep's RMA and AM lanes */
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
    unsigned nparts; /* parts with bytes (at least 1), cut at prep */
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
    struct ucx_part *p;     /* NULL: orphaned (its request was released), or a notification
                               with no request (wait below): the reply, when it comes, only says
                               that rem answers again */
    int *wait;              /* a notification with no request: its answer (an IXL status) goes
                               here; NULL once its sender stopped waiting */
    bool notif;             /* awaits the answer to a notification (not a WRITE/READ reply) */
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
    unsigned char thdr[8]; /* a notification's UCX header: the token, little-endian */
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
    uint64_t any_seq, any_seen;     /* passes that did something, and parts added: counted
                                       without a clock, dated by the thread's next look */
    uint64_t last_any_ms;           /* when the thread saw any_seq move last */
    uint64_t last_any_ns;           /* the same in ns, for the spin window (spin_us) */
    unsigned passes;                /* callers' passes: every UCX_SCAN_PASSES-th one scans */
    atomic_uint_fast64_t caller_ns; /* the latest progress by a caller: the thread stands back
                                       (UCX_CALLER_IN: a caller's pass is under way) */
    atomic_bool watched;  /* a waiting caller watches a request on it (wait_xfer): one at a time */
    unsigned watch_spins; /* empty polls before a watcher yields (wait_xfer); the watcher's */
    atomic_bool asleep;   /* its thread armed the worker and may sleep in epoll: wake() it */
    atomic_bool standby;  /* its thread sleeps while a caller polls the worker */
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
    size_t nq_max, nq_bytes_max; /* bound of notifications received and not drained */
    int auth_mode;               /* host->auth_mode() (IXL_AUTH_LOCAL on a host without it) */
    int err_mode;                /* ucp_err_handling_mode_t */
    char tls[128];
    unsigned progress_us;
    uint64_t spin_ns;    /* spin_us: polling after the last activity before sleeping */
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
    /* The remotes by name (remote_find; plugins/common/ixl_name_index.h); remotes stay until
     * the engine goes. */
    struct ixlp_name_index remote_idx;
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
    size_t nq_count, nq_bytes; /* of the list above (<= nq_max, nq_bytes_max) */

    atomic_bool stop;
    atomic_bool rkey_unchecked; /* this UCX packs rkeys unlike ucx_rkey_check expects */
};

/* ucx_engine.c */
void fail(struct ucx_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int status_of(ucs_status_t st);
struct ucx_remote *remote_find(struct ucx_engine *e, const char *name);
uint64_t now_ms(void);
uint64_t now_ns(void);
struct ucx_md *key_find(const struct ucx_engine *e, uint64_t key);

/* ucx_worker.c */
void lock_workers(struct ucx_engine *e);
void unlock_workers(struct ucx_engine *e);
void wake(struct ucx_worker *w);
void wake_now(struct ucx_worker *w);
void close_ep_locked(struct ucx_worker *w, struct ucx_remote *r);
bool tcp_may_open(const char *tls, const char *devices);
int ep_get_locked(struct ucx_worker *w, struct ucx_remote *r, ucp_ep_h *out);
void active_add(struct ucx_worker *w, struct ucx_part *p);
void active_del(struct ucx_worker *w, struct ucx_part *p);
bool lane_down(const struct ucx_lane *l, struct ucx_remote *r);
bool progress_locked(struct ucx_worker *w, bool scan);
void *progress_main(void *arg);
void caller_release(struct ucx_worker *w);
int ucx_progress(struct ixl_engine *base);
struct ucx_worker *next_home(struct ucx_engine *e);

/* ucx_xfer.c */
bool req_stopped(struct ucx_req *q);
void req_set_err(struct ucx_req *q, int status);
void op_done(struct ucx_part *p, int status, bool answered);
void op_count(struct ucx_part *p);
void part_advance_locked(struct ucx_worker *w, struct ucx_part *p);
void part_start_locked(struct ucx_worker *w, struct ucx_part *p);
int ucx_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                  const struct ixl_xfer_side *remote, const char *remote_agent,
                  const struct ixl_xfer_opts *opts, struct ixl_req **out);
int ucx_post_xfer(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts);
int ucx_check_xfer(struct ixl_engine *base, struct ixl_req *req);
int ucx_wait_xfer(struct ixl_engine *base, struct ixl_req *req, uint64_t budget_ns);
int ucx_release_req(struct ixl_engine *base, struct ixl_req *req);
int ucx_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out);

/* ucx_am.c */
void pack_src_set(struct pack_src *ps, const ucp_dt_iov_t *iov, size_t n, const void *buf,
                  size_t len);
extern const ucp_generic_dt_ops_t pack_ops;
ucs_status_ptr_t am_send_src(struct ucx_engine *e, ucp_ep_h ep, unsigned id, const void *hdr,
                             size_t hdr_len, struct pack_src *ps, ucp_request_param_t *rp);
struct ucx_send *send_new(struct ucx_worker *w, struct ucx_part *p, size_t niov, size_t bytes);
unsigned char *send_bytes(struct ucx_send *s);
void send_free(struct ucx_send *s);
void ops_drop(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int status);
ucs_status_t send_am(ucp_ep_h ep, unsigned id, struct ucx_send *s, const void *buf, size_t len,
                     bool reply);
uint64_t notif_op_new(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int *wait);
struct ucx_op *op_find(struct ucx_worker *w, uint64_t token);
ucs_status_t send_notif(ucp_ep_h ep, struct ucx_send *s, size_t len);
ucs_status_t am_notif_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                         const ucp_am_recv_param_t *param);
void part_fill_am_locked(struct ucx_worker *w, struct ucx_part *p);
ucs_status_t am_rma_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                       const ucp_am_recv_param_t *param);
ucs_status_t am_reply_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                         const ucp_am_recv_param_t *param);

#endif

/*
 * Metadata exchange without a side channel: the agent's listener (peer mode) and etcd (central
 * KV mode), behind ixl_md_send / ixl_md_fetch / ixl_md_invalidate_local. Both implement
 * struct ixl_mdx_ops (mdx.h): the peer exchange is here, etcd's in mdx_etcd.c; mdx_pick chooses
 * per call.
 *
 * Peer mode (mdx_wire.h): the listener is one thread running an epoll loop. It accepts
 * connections (nonblocking) and moves each through header, body, answer and close without ever
 * waiting on one: a request is served on the loop (loading or getting metadata is local work),
 * its reply written as the socket takes it. A peer that sends garbage gets an error reply, one
 * that stalls, drips or closes early only ends its own connection; an idle or slow client costs
 * a struct mdx_conn (~0.5 KiB) and its socket, never a thread. Bounds (compile-time constants,
 * also in docs/metadata.md):
 *   - MDX_IO_MS (5 s): a connection's whole request (header, body, reply) from its accept; the
 *     loop closes it when it passes (the loop waits until the oldest deadline at most);
 *   - MDX_MAX_CONNS (1024): connections served at once; one more is accepted, answered
 *     IXL_ERR_BUSY and closed at once (never left in the backlog);
 *   - body memory follows the bytes that arrived: the buffer starts at MDX_BODY_STEP (4 KiB)
 *     when the first body byte comes and doubles as bytes fill it, up to the header's length
 *     (at most IXL_MDX_MAX_BODY, 256 MiB); nothing is allocated for a claimed length;
 *   - MDX_HELD_MAX (256 MiB): request and reply bytes held over all connections; a request
 *     that would pass it is read to its end without being kept and answered IXL_ERR_BUSY (as
 *     one that found no memory is answered IXL_ERR_NO_MEMORY), a reply that would, IXL_ERR_BUSY;
 *   - out of descriptors (EMFILE/ENFILE), the reserve descriptor (/dev/null, kept open) is
 *     closed to accept one connection, which is answered IXL_ERR_BUSY and closed, then reopened:
 *     the backlog drains instead of waking the loop forever; without a reserve, accepting
 *     pauses MDX_PAUSE_MS (100 ms);
 *   - warnings about clients: at most MDX_LOG_PER_S (20) a second, the rest counted.
 * Fetches run on threads of their own and complete into the remote table, then wake the agent
 * (its fd becomes readable); sends and invalidations run on the caller's thread.
 *
 * Labels: ixl_md_send with a label also keeps the labeled (partial) blob here, so a peer can
 * fetch it by label from this agent's listener; in etcd mode it is published under the label.
 *
 * Invalidation reaches the peers this agent sent its metadata to, the fetchers that told their
 * listener port, and etcd (whose watchers drop the agent when its head key goes).
 *
 * Threads and locks: x->lock guards the lists here and is never held across I/O or an agent
 * call; the listener's connections and counters belong to its thread alone. The loop takes the
 * agent's lock only inside ixl_md_load / ixl_md_get / ixl_remote_invalidate_inc, never while
 * waiting on a socket. Destroy (ixl_mdx_stop) runs before anything else of the agent is torn
 * down: it closes etcd (its watch thread may be inside the agent's remote table), stops the
 * listener (which closes its connections), cuts the sockets of every fetch still running
 * (shutdown), and joins them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/agent.h"
#include "core/internal.h"
#include "meta/mdx.h"
#include "meta/mdx_wire.h"
#include "util/auth.h"
#include "util/config.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"
#include "util/sys.h"

/* The listener's bounds (compile-time; see the header comment and docs/metadata.md). */
#define MDX_MAX_CONNS 1024               /* connections served at once; more are refused */
#define MDX_IO_MS 5000                   /* one request: connect, send, reply (both sides) */
#define MDX_HELD_MAX ((size_t)256 << 20) /* request and reply bytes held, all connections */
#define MDX_BODY_STEP 4096               /* a body buffer's first size; it doubles as bytes come */
#define MDX_BACKLOG 512                  /* listen() backlog */
#define MDX_SLICE (256u << 10)           /* bytes read from one connection per turn */
#define MDX_ACCEPT_BATCH 64              /* connections accepted per turn */
#define MDX_PAUSE_MS 100                 /* accepting pauses this long when accept4 fails */
#define MDX_EVENTS 64                    /* epoll events per turn */
#define MDX_LOG_PER_S 20                 /* listener warnings logged per second */
#define MDX_IDLE_WAKE_MS 1000            /* the listener looks at x->stop at least this often */
#define MDX_POLL_MS 50

_Static_assert(MDX_HELD_MAX >= IXL_MDX_MAX_BODY, "the largest request must fit when alone");
_Static_assert(IXL_MDX_NONCE == IXL_AUTH_NONCE && IXL_MDX_MAC == IXL_AUTH_MAC,
               "the wire's nonces and MACs are auth.h's");
#define MDX_PRE_AUTH_BODY                                                 \
    1024 /* the most a client reads of a frame before the listener proved \
            itself (HELLO, PROVEN, a refusal) */

/* A connection of the listener: one request read, answered, closed; owned by the loop. */
struct mdx_conn {
    int fd;
    /* PROOF: a keyed listener reads the client's PROOF (into proof[], nothing else) before
     * anything of a request; SINK: the body is read and dropped */
    enum { C_PROOF, C_HDR, C_BODY, C_SINK, C_REPLY } state;
    uint64_t deadline_us;         /* for the whole request: accept + MDX_IO_MS */
    struct mdx_conn *prev, *next; /* x->conns, in accept (= deadline) order */
    uint8_t hdr[IXL_MDX_HDR];
    enum mdx_type type;
    uint32_t len;      /* the body's length, from the header */
    uint32_t got;      /* header, then body bytes received */
    uint8_t *body;     /* cap bytes, grown as bytes arrive (counted in x->held) */
    size_t cap;        /* body buffer size */
    int sink_status;   /* C_SINK: the reply's status and text */
    char sink_why[96]; /* (MDX_HELD_MAX reached, or out of memory) */
    uint8_t *out;      /* the reply: malloc'd (out_held bytes in x->held) or small */
    size_t out_len, out_off, out_held;
    bool want_out; /* waits for EPOLLOUT */
    uint8_t small[192];
    struct sockaddr_storage addr; /* the client's, for remembering a fetcher */
    socklen_t addr_len;
    bool keyed;                     /* proved the cluster key: request and reply carry MACs */
    uint8_t nonce_s[IXL_MDX_NONCE]; /* the listener's challenge (HELLO) */
    uint8_t nonce_c[IXL_MDX_NONCE]; /* the client's (PROOF) */
    uint8_t proof[IXL_MDX_HDR + IXL_MDX_NONCE + IXL_MDX_MAC]; /* C_PROOF's bytes */
};

struct mdx_thread {
    pthread_t th;
    int fd; /* the socket it works on (-1: none), cut by shutdown() at stop */
    bool done;
    struct ixl_mdx *x;
    struct mdx_thread *next;
    /* a fetch */
    char remote[IXL_NAME_MAX];
    char label[IXL_MDX_LABEL_MAX + 1];
    char host[256];
    uint16_t port;
    const struct mdx_impl *im; /* the exchange it fetches from */
    uint64_t fetch_gen;        /* its entry in x->fetches */
};

struct mdx_peer {
    char host[256];
    uint16_t port;
    struct mdx_peer *next;
};

struct mdx_label {
    char label[IXL_MDX_LABEL_MAX + 1];
    void *blob;
    size_t len;
    struct mdx_label *next;
};

/* An implementation of the exchange: its operations (NULL: not configured) and their object. */
struct mdx_impl {
    const struct ixl_mdx_ops *ops;
    void *impl;
};
enum { MDX_PEER, MDX_ETCD, MDX_N }; /* stopped in reverse order: etcd first */

/* The last fetch of a remote that is running or failed (ixl_md_fetch_status). A fetch that
 * succeeded leaves no entry: the remote table then answers. */
struct mdx_fetch {
    char remote[IXL_NAME_MAX];
    uint64_t gen; /* of the fetch this entry is for: an older fetch's thread does not touch it */
    int status;   /* IXL_IN_PROGRESS, or the failed fetch's error */
    char reason[IXL_MDX_MSG_MAX + 300];
    struct mdx_fetch *next;
};

struct ixl_mdx {
    struct ixl_agent *agent;
    pthread_mutex_t lock;
    atomic_bool stop;
    int lfd;        /* listening socket, -1 when none */
    int wakefd;     /* wakes the listener thread at stop */
    int epfd;       /* the listener's epoll set, -1 when none */
    int reserve_fd; /* /dev/null, given up to accept when descriptors run out (-1: none) */
    uint16_t port;
    pthread_t lthread;
    bool listening;
    struct mdx_thread *threads; /* fetch threads */
    /* the listener thread's own (no lock): its connections, oldest first, and bounds */
    struct mdx_conn *conns, *conns_tail;
    unsigned n_conns;
    size_t held;               /* body and reply bytes held by connections */
    uint64_t accept_resume_us; /* accepting paused until then (0: not paused) */
    uint64_t warn_t0;          /* warn_ok's window */
    unsigned warn_n, warn_dropped;
    struct mdx_peer *peers;    /* where invalidate_local goes */
    struct mdx_label *labels;  /* labeled blobs served by the listener */
    struct mdx_fetch *fetches; /* fetches running or failed, by remote */
    uint64_t fetch_gen;
    struct mdx_impl impl[MDX_N];
};

/* ---- sockets with deadlines ------------------------------------------------------------- */

static int remaining_ms(uint64_t deadline_us)
{
    uint64_t now = ixl_now_us();
    return now >= deadline_us ? 0 : (int)((deadline_us - now + 999) / 1000);
}

/* Waits for events on fd in slices, so a stop is seen within MDX_POLL_MS. 1 ready, 0 time
 * ran out or stopping, -1 error. */
static int wait_fd(struct ixl_mdx *x, int fd, short events, uint64_t deadline_us)
{
    for (;;) {
        if (atomic_load(&x->stop))
            return 0;
        int ms = remaining_ms(deadline_us);
        if (ms == 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = sys_poll(&p, 1, ms < MDX_POLL_MS ? ms : MDX_POLL_MS);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Reads or writes exactly n bytes before the deadline: 0, or -1 with *why set. */
static int io_full(struct ixl_mdx *x, int fd, void *buf, size_t n, bool wr, uint64_t deadline_us,
                   const char **why)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k =
            wr ? sys_send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : sys_recv(fd, p, n, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0 && !wr) {
            *why = "the connection closed early";
            return -1;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            *why = wr ? "send() failed" : "recv() failed";
            return -1;
        }
        int w = wait_fd(x, fd, wr ? POLLOUT : POLLIN, deadline_us);
        if (w <= 0) {
            *why = atomic_load(&x->stop) ? "the agent is being destroyed"
                   : w == 0              ? "timed out"
                                         : "poll() failed";
            return -1;
        }
    }
    return 0;
}

/* Reads one frame (header into hdr, body malloc'd into *body, *len bytes) of a body of at most
 * max_body bytes. 0, or -1 with *why set. */
static int read_frame(struct ixl_mdx *x, int fd, uint64_t deadline_us, uint32_t max_body,
                      uint8_t hdr[IXL_MDX_HDR], enum mdx_type *type_out, uint8_t **body,
                      uint32_t *len_out, const char **why)
{
    enum mdx_type type;
    uint32_t len;
    *body = NULL;
    if (io_full(x, fd, hdr, IXL_MDX_HDR, false, deadline_us, why) != 0)
        return -1;
    if (mdx_header_decode(hdr, max_body, &type, &len) != 0) {
        *why = "not an ixl metadata-exchange frame (bad magic, version, type or length)";
        return -1;
    }
    *body = sys_malloc(len ? len : 1);
    if (*body == NULL) { /* read the body anyway, so the peer can be answered */
        uint8_t sink[4096];
        for (uint32_t k; len > 0; len -= k) {
            k = len < sizeof(sink) ? len : (uint32_t)sizeof(sink);
            if (io_full(x, fd, sink, k, false, deadline_us, why) != 0)
                return -1;
        }
        *why = "out of memory";
        return -1;
    }
    if (io_full(x, fd, *body, len, false, deadline_us, why) != 0)
        return -1;
    *type_out = type;
    *len_out = len;
    return 0;
}

static void set_nonblock(int fd)
{
    int fl = sys_fcntl(fd, F_GETFL, 0);
    if (fl >= 0)
        sys_fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Connects to host:port before the deadline: the socket, or -1 with msg filled. */
static int dial(struct ixl_mdx *x, const char *host, uint16_t port, uint64_t deadline_us, int *code,
                char *msg, size_t cap)
{
    char ps[8];
    snprintf(ps, sizeof(ps), "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = sys_getaddrinfo(host, ps, &hints, &res);
    if (gai != 0) {
        snprintf(msg, cap, "cannot resolve %s: getaddrinfo: %s", host, gai_strerror(gai));
        *code = IXL_ERR_UNREACHABLE;
        return -1;
    }
    int fd = -1, err = 0;
    const char *call = "connect"; /* the call that failed, for the message */
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = sys_socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            call = "socket";
            continue;
        }
        set_nonblock(fd);
        call = "connect";
        if (sys_connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        err = errno;
        int w = err == EINPROGRESS ? wait_fd(x, fd, POLLOUT, deadline_us) : 0;
        if (w == 1) {
            socklen_t sl = sizeof(err);
            if (sys_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0) {
                err = errno;
                call = "getsockopt(SO_ERROR)";
            } else if (err == 0) {
                break;
            }
        } else if (w < 0) {
            err = errno;
            call = "poll";
        } else if (err == EINPROGRESS) {
            err = ETIMEDOUT;
        }
        sys_close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        char eb[128];
        snprintf(msg, cap, "cannot connect to %s:%u: %s: %s", host, (unsigned)port, call,
                 ixl_errno_text(err ? err : ECONNREFUSED, eb, sizeof(eb)));
        *code = err == ECONNREFUSED ? IXL_ERR_CONN_REFUSED : IXL_ERR_UNREACHABLE;
        return -1;
    }
    int one = 1;
    sys_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* ---- thread bookkeeping ------------------------------------------------------------------ */

/* Joins threads that finished (x->lock held by the caller is released meanwhile). */
static void reap_locked(struct ixl_mdx *x)
{
    for (struct mdx_thread **pp = &x->threads; *pp != NULL;) {
        struct mdx_thread *t = *pp;
        if (!t->done) {
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        pthread_join(t->th, NULL); /* done: it is returning, so this is short */
        free(t);
    }
}

static void thread_set_fd(struct mdx_thread *t, int fd)
{
    pthread_mutex_lock(&t->x->lock);
    t->fd = fd;
    pthread_mutex_unlock(&t->x->lock);
}

static void thread_finish(struct mdx_thread *t)
{
    struct ixl_mdx *x = t->x;
    pthread_mutex_lock(&x->lock);
    if (t->fd >= 0)
        sys_close(t->fd);
    t->fd = -1;
    t->done = true;
    pthread_mutex_unlock(&x->lock);
}

static int spawn(struct ixl_mdx *x, struct mdx_thread *t, void *(*fn)(void *))
{
    t->x = x;
    pthread_mutex_lock(&x->lock);
    reap_locked(x);
    int te = sys_pthread_create(&t->th, NULL, fn, t);
    if (te != 0) {
        pthread_mutex_unlock(&x->lock);
        errno = te;
        return IXL_ERR_SYSTEM;
    }
    t->next = x->threads;
    x->threads = t;
    pthread_mutex_unlock(&x->lock);
    return IXL_OK;
}

/* ---- MACs of a keyed connection ------------------------------------------------------------ */

/* The MAC under label of both nonces (a PROOF's or PROVEN's). */
static int proof_mac(const struct ixl_auth *a, const char *label, const uint8_t *ns,
                     const uint8_t *nc, uint8_t out[IXL_MDX_MAC])
{
    const void *parts[] = {ns, nc};
    size_t lens[] = {IXL_MDX_NONCE, IXL_MDX_NONCE};
    return ixl_auth_mac(a, label, parts, lens, 2, out);
}

/* The MAC under label of both nonces, a frame's header and the first n bytes of its body
 * (all of it but the MAC at its end). */
static int frame_mac(const struct ixl_auth *a, const char *label, const uint8_t *ns,
                     const uint8_t *nc, const uint8_t *hdr, const uint8_t *body, size_t n,
                     uint8_t out[IXL_MDX_MAC])
{
    const void *parts[] = {ns, nc, hdr, body};
    size_t lens[] = {IXL_MDX_NONCE, IXL_MDX_NONCE, IXL_MDX_HDR, n};
    return ixl_auth_mac(a, label, parts, lens, 4, out);
}

/* Fills the last IXL_MDX_MAC bytes of frame (len bytes, made with that much extra room). */
static int frame_seal(const struct ixl_auth *a, const char *label, const uint8_t *ns,
                      const uint8_t *nc, uint8_t *frame, size_t len)
{
    return frame_mac(a, label, ns, nc, frame, frame + IXL_MDX_HDR, len - IXL_MDX_HDR - IXL_MDX_MAC,
                     frame + len - IXL_MDX_MAC);
}

/* Whether a body of len bytes (its MAC last) verifies; false also when it is too short. */
static bool frame_verify(const struct ixl_auth *a, const char *label, const uint8_t *ns,
                         const uint8_t *nc, const uint8_t *hdr, const uint8_t *body, size_t len)
{
    uint8_t want[IXL_MDX_MAC];
    if (len < IXL_MDX_MAC ||
        frame_mac(a, label, ns, nc, hdr, body, len - IXL_MDX_MAC, want) != IXL_OK)
        return false;
    return ixl_auth_equal(want, body + len - IXL_MDX_MAC, IXL_MDX_MAC) != 0;
}

/* ---- the listener (server side): one event loop --------------------------------------------- */

/* Adds host:port to the peers invalidate_local tells, with the entry p allocated by the caller
 * before the request (so that running out of memory fails the request instead of silently
 * leaving a peer that is never told); p is freed if the peer is known already. */
static void remember_peer(struct ixl_mdx *x, struct mdx_peer *p, const char *host, uint16_t port)
{
    pthread_mutex_lock(&x->lock);
    struct mdx_peer *q;
    for (q = x->peers; q != NULL; q = q->next)
        if (q->port == port && strcmp(q->host, host) == 0)
            break;
    if (q == NULL) {
        snprintf(p->host, sizeof(p->host), "%s", host);
        p->port = port;
        p->next = x->peers;
        x->peers = p;
    }
    pthread_mutex_unlock(&x->lock);
    if (q != NULL)
        free(p);
}

/* Warnings of the listener, at most MDX_LOG_PER_S a second (a flood of bad clients must not
 * turn into a flood of log lines); the ones left out are counted in the next second's line. */
static bool warn_ok(struct ixl_mdx *x)
{
    uint64_t now = ixl_now_us();
    if (now - x->warn_t0 >= 1000000u) {
        if (x->warn_dropped > 0)
            IXL_LOG_WARNING("agent %s listener: %u more warnings like the above in a second "
                            "(not logged)",
                            x->agent->name, x->warn_dropped);
        x->warn_t0 = now;
        x->warn_n = 0;
        x->warn_dropped = 0;
    }
    if (x->warn_n < MDX_LOG_PER_S) {
        x->warn_n++;
        return true;
    }
    x->warn_dropped++;
    return false;
}

/* A short reply (no blob) written at once to a connection about to be closed, best effort: the
 * clear error of a connection refused at accept. Allocates nothing. */
static void reply_now(int fd, int status, const char *text)
{
    uint8_t small[IXL_MDX_HDR + 6 + IXL_MDX_MSG_MAX];
    size_t len = mdx_encode_reply_into(status, text, 0, small, sizeof(small));
    if (len > 0) {
        ssize_t k = sys_send(fd, small, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)k;
    }
}

/* Closes fd after reading what already arrived of the request (so that the close sends a FIN,
 * not a reset that could overtake the reply). */
static void close_drained(int fd)
{
    uint8_t sink[4096];
    ssize_t k = sys_recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    (void)k;
    sys_close(fd);
}

static void held_release(struct ixl_mdx *x, size_t n)
{
    x->held -= n;
}

/* Ends a connection: out of the deadline list and epoll, its memory released, closed. */
static void conn_close(struct ixl_mdx *x, struct mdx_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        x->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        x->conns_tail = c->prev;
    x->n_conns--;
    /* Out of the epoll set first: close() alone removes it only when no other descriptor
     * shares the socket, and a fork() of the application (its child holds copies until it
     * execs) would leave it registered, its events naming the freed c. */
    sys_epoll_ctl(x->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    sys_close(c->fd);
    held_release(x, c->cap + c->out_held);
    free(c->body);
    if (c->out != c->small)
        free(c->out);
    free(c);
}

/* Drops a request without an answer (a client that stalled, closed early, or whose socket
 * failed): only its own connection ends. */
static void conn_drop(struct ixl_mdx *x, struct mdx_conn *c, const char *why)
{
    if (warn_ok(x))
        IXL_LOG_WARNING("agent %s listener: dropped a request: %s", x->agent->name, why);
    conn_close(x, c);
}

/* Writes what is left of the reply: 1 done (the connection is closed), 0 the socket is full
 * (waits for EPOLLOUT), -1 it failed (closed). */
static int conn_write(struct ixl_mdx *x, struct mdx_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t k = sys_send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            c->out_off += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_out) {
                struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
                if (sys_epoll_ctl(x->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
                    conn_drop(x, c, "epoll_ctl failed (waiting to send the reply)");
                    return -1;
                }
                c->want_out = true;
            }
            return 0;
        }
        conn_close(x, c); /* the client went away: nobody to tell */
        return -1;
    }
    conn_close(x, c); /* one request per connection */
    return 1;
}

/* Turns c into a reply (status, text, blob) and starts writing it. The reply's bytes count
 * against MDX_HELD_MAX too (a client that does not read its answer holds them): a reply that
 * would pass it becomes a short IXL_ERR_BUSY one, as does one there is no memory for
 * (IXL_ERR_NO_MEMORY), both written from c->small without allocating. */
static void conn_reply(struct ixl_mdx *x, struct mdx_conn *c, int status, const char *text,
                       const void *blob, size_t blob_len)
{
    held_release(x, c->cap);
    free(c->body);
    c->body = NULL;
    c->cap = 0;
    c->state = C_REPLY;
    size_t tl = text ? strlen(text) : 0;
    size_t len = 0;
    uint8_t *f = NULL;
    size_t extra = c->keyed ? IXL_MDX_MAC : 0; /* a keyed connection's reply ends with its MAC */
    if (x->held + IXL_MDX_HDR + 6 + tl + blob_len + extra > MDX_HELD_MAX) {
        char busy[160];
        snprintf(busy, sizeof(busy),
                 "the listener holds %u MiB of requests and replies at once (its limit): try "
                 "again",
                 (unsigned)(MDX_HELD_MAX >> 20));
        len = mdx_encode_reply_into(IXL_ERR_BUSY, busy, extra, c->small, sizeof(c->small));
    } else {
        struct mdx_msg r = {.type = MDX_REPLY,
                            .status = status,
                            .text = {text, tl},
                            .blob = blob,
                            .blob_len = blob_len};
        f = mdx_encode_extra(&r, extra, &len);
        if (f == NULL) /* out of memory (the only failure of a reply that fits): say so */
            len = mdx_encode_reply_into(IXL_ERR_NO_MEMORY, "the peer ran out of memory answering",
                                        extra, c->small, sizeof(c->small));
    }
    if (c->keyed && len > 0 &&
        frame_seal(&x->agent->auth, IXL_MDX_REPLY_LABEL, c->nonce_s, c->nonce_c,
                   f != NULL ? f : c->small, len) != IXL_OK) {
        free(f);
        conn_drop(x, c, "computing the reply's MAC failed");
        return;
    }
    if (f != NULL) {
        c->out = f;
        c->out_held = len;
        x->held += len;
    } else {
        c->out = c->small;
    }
    c->out_len = len;
    c->out_off = 0;
    conn_write(x, c);
}

/* Answers the request in c->body (decoded into m): what serve() did on a thread of its own,
 * now on the loop. Everything here is local (the agent's tables, this exchange's labels). */
static void conn_serve(struct ixl_mdx *x, struct mdx_conn *c, const struct mdx_msg *m)
{
    struct ixl_agent *agent = x->agent;
    char name[IXL_NAME_MAX], label[IXL_MDX_LABEL_MAX + 1], text[2 * IXL_NAME_MAX + 200];
    mdx_str_copy(m->name, name, sizeof(name));
    mdx_str_copy(m->label, label, sizeof(label));
    int st = IXL_OK;
    text[0] = '\0';
    void *out = NULL;
    size_t out_len = 0;
    switch (m->type) {
    case MDX_SEND:
        /* only the sender's own metadata: a peer does not replace another's */
        st = ixl_md_load_as(agent, m->blob, m->blob_len, name, NULL, 0);
        if (st != IXL_OK)
            snprintf(text, sizeof(text), "%s", ixl_agent_last_error(agent));
        break;
    case MDX_FETCH:
        if (strcmp(name, agent->name) != 0) {
            st = IXL_ERR_NOT_FOUND;
            /* the agent served here is not named: a wrong guess learns nothing */
            snprintf(text, sizeof(text), "this listener does not serve agent '%s'", name);
        } else if (label[0] == '\0') {
            st = ixl_md_get(agent, NULL, &out, &out_len);
            if (st != IXL_OK)
                snprintf(text, sizeof(text), "%s", ixl_agent_last_error(agent));
        } else {
            st = IXL_ERR_NOT_FOUND;
            snprintf(text, sizeof(text), "agent '%s' has no metadata under label '%s'", name,
                     label);
            pthread_mutex_lock(&x->lock);
            for (struct mdx_label *l = x->labels; l != NULL; l = l->next)
                if (strcmp(l->label, label) == 0 && (out = sys_malloc(l->len)) != NULL) {
                    memcpy(out, l->blob, l->len);
                    out_len = l->len;
                    st = IXL_OK;
                    text[0] = '\0';
                }
            pthread_mutex_unlock(&x->lock);
        }
        if (st == IXL_OK && m->port != 0) {
            char host[INET6_ADDRSTRLEN] = "";
            struct mdx_peer *p = sys_calloc(1, sizeof(*p));
            if (p == NULL) { /* the fetcher could not be told of invalidation: refuse */
                ixl_free(out);
                out = NULL;
                out_len = 0;
                st = IXL_ERR_NO_MEMORY;
                snprintf(text, sizeof(text), "out of memory (remembering the fetcher)");
            } else if (getnameinfo((struct sockaddr *)&c->addr, c->addr_len, host, sizeof(host),
                                   NULL, 0, NI_NUMERICHOST) == 0) {
                remember_peer(x, p, host, m->port);
            } else {
                free(p);
            }
        }
        break;
    case MDX_INVAL:
        if (m->incarnation == 0) { /* never a wildcard from the wire */
            st = IXL_ERR_INVALID_ARG;
            snprintf(text, sizeof(text),
                     "an invalidation names the exact incarnation to drop; 0 is refused");
            break;
        }
        st = ixl_remote_invalidate_inc(agent, name, m->incarnation);
        if (st != IXL_OK)
            snprintf(text, sizeof(text), "agent '%s' of that incarnation is not loaded here", name);
        break;
    default:
        st = IXL_ERR_MALFORMED;
        snprintf(text, sizeof(text), "a reply is not a request");
    }
    conn_reply(x, c, st, text, out, out_len);
    if (out != NULL)
        ixl_free(out);
}

/* The whole request arrived (or its body was read into the sink): decode and answer it. */
static void conn_request(struct ixl_mdx *x, struct mdx_conn *c)
{
    if (c->state == C_SINK) {
        if (warn_ok(x))
            IXL_LOG_WARNING("agent %s listener: dropped a request: %s", x->agent->name,
                            c->sink_why);
        conn_reply(x, c, c->sink_status, c->sink_why, NULL, 0);
        return;
    }
    size_t n = c->len;
    if (c->keyed) { /* the request must be the proven client's, unaltered */
        if (!frame_verify(&x->agent->auth, IXL_MDX_REQUEST_LABEL, c->nonce_s, c->nonce_c, c->hdr,
                          c->body, c->len)) {
            const char *why = "the request's MAC does not verify under the cluster key";
            if (warn_ok(x))
                IXL_LOG_WARNING("agent %s listener: refused a request: %s", x->agent->name, why);
            conn_reply(x, c, IXL_ERR_AUTH, why, NULL, 0);
            return;
        }
        n -= IXL_MDX_MAC;
    }
    struct mdx_msg m;
    if (mdx_decode(c->type, c->body, n, &m) != 0) {
        const char *why = "malformed frame body";
        if (warn_ok(x))
            IXL_LOG_WARNING("agent %s listener: dropped a request: %s", x->agent->name, why);
        conn_reply(x, c, IXL_ERR_MALFORMED, why, NULL, 0);
        return;
    }
    conn_serve(x, c, &m);
}

/* The body buffer holds at least one byte more than has arrived, growing in steps (doubling
 * from MDX_BODY_STEP, up to the length the header claims) as bytes come: memory follows what
 * the client sent, not what it claimed. 0, or -1: the request goes to the sink with the reason
 * (out of memory, or MDX_HELD_MAX reached). */
static int conn_grow(struct ixl_mdx *x, struct mdx_conn *c)
{
    if (c->got < c->cap)
        return 0;
    size_t cap = c->cap ? c->cap * 2 : MDX_BODY_STEP;
    if (cap > c->len)
        cap = c->len;
    size_t more = cap - c->cap;
    uint8_t *b = NULL;
    if (x->held + more <= MDX_HELD_MAX && (b = sys_realloc(c->body, cap)) != NULL) {
        c->body = b;
        c->cap = cap;
        x->held += more;
        return 0;
    }
    if (x->held + more > MDX_HELD_MAX) {
        c->sink_status = IXL_ERR_BUSY;
        snprintf(c->sink_why, sizeof(c->sink_why),
                 "the listener holds %u MiB of requests at once (its limit): try again",
                 (unsigned)(MDX_HELD_MAX >> 20));
    } else {
        c->sink_status = IXL_ERR_NO_MEMORY;
        snprintf(c->sink_why, sizeof(c->sink_why),
                 "the peer ran out of memory reading the request");
    }
    /* read the body anyway, so the peer can be answered */
    held_release(x, c->cap);
    free(c->body);
    c->body = NULL;
    c->cap = 0;
    c->state = C_SINK;
    return -1;
}

/* A keyed listener's refusal of a client that did not prove the key (answered, untagged). */
static void conn_refuse_auth(struct ixl_mdx *x, struct mdx_conn *c, const char *why)
{
    if (warn_ok(x))
        IXL_LOG_WARNING("agent %s listener: refused a connection: %s", x->agent->name, why);
    conn_reply(x, c, IXL_ERR_AUTH, why, NULL, 0);
}

/* Sends a small frame whole at once, or fails (the socket of a client that waits for it has
 * room: a short write means a client that does not play its part). 0 or -1. */
static int send_small(int fd, const struct mdx_msg *m)
{
    size_t len;
    uint8_t *f = mdx_encode(m, &len);
    if (f == NULL)
        return -1;
    ssize_t k = sys_send(fd, f, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(f);
    return k == (ssize_t)len ? 0 : -1;
}

/* C_PROOF after bytes arrived: the header must announce a PROOF (anything else is refused at
 * once, before a byte of it is kept); the whole PROOF must carry the MAC of both nonces. Then
 * the listener proves itself (PROVEN) and the request may come. 0 go on, -1 c was answered or
 * closed. */
static int conn_proof(struct ixl_mdx *x, struct mdx_conn *c)
{
    enum mdx_type type;
    uint32_t len;
    if (c->got == IXL_MDX_HDR &&
        (mdx_header_decode(c->proof, IXL_MDX_NONCE + IXL_MDX_MAC, &type, &len) != 0 ||
         type != MDX_PROOF || len != IXL_MDX_NONCE + IXL_MDX_MAC)) {
        conn_refuse_auth(x, c,
                         "this listener has a cluster key: a client proves it first (set the same "
                         "key: auth_key, IXL_AUTH_KEY or IXL_AUTH_KEY_FILE)");
        return -1;
    }
    if (c->got < sizeof(c->proof))
        return 0;
    const struct ixl_auth *a = &x->agent->auth;
    struct mdx_msg m;
    uint8_t want[IXL_MDX_MAC], mine[IXL_MDX_MAC];
    if (mdx_decode(MDX_PROOF, c->proof + IXL_MDX_HDR, IXL_MDX_NONCE + IXL_MDX_MAC, &m) != 0) {
        conn_refuse_auth(x, c, "malformed proof");
        return -1;
    }
    memcpy(c->nonce_c, m.nonce, IXL_MDX_NONCE);
    if (proof_mac(a, IXL_MDX_CLIENT_LABEL, c->nonce_s, c->nonce_c, want) != IXL_OK ||
        !ixl_auth_equal(want, m.mac, IXL_MDX_MAC)) {
        conn_refuse_auth(x, c,
                         "the client did not prove this listener's cluster key (another key, or "
                         "none)");
        return -1;
    }
    struct mdx_msg pv = {.type = MDX_PROVEN, .mac = mine};
    if (proof_mac(a, IXL_MDX_LISTENER_LABEL, c->nonce_s, c->nonce_c, mine) != IXL_OK ||
        send_small(c->fd, &pv) != 0) {
        conn_drop(x, c, "could not send the listener's proof");
        return -1;
    }
    c->keyed = true;
    c->state = C_HDR;
    c->got = 0;
    return 0;
}

/* Reads what the client sent, at most MDX_SLICE bytes per turn (others get theirs), and moves
 * the request on: header, body (or sink), answer. */
static void conn_read(struct ixl_mdx *x, struct mdx_conn *c)
{
    size_t budget = MDX_SLICE;
    while (budget > 0 && c->state != C_REPLY) {
        uint8_t sink[4096];
        uint8_t *dst;
        size_t want;
        if (c->state == C_PROOF) {
            dst = c->proof + c->got;
            want = (c->got < IXL_MDX_HDR ? IXL_MDX_HDR : sizeof(c->proof)) - c->got;
        } else if (c->state == C_HDR) {
            dst = c->hdr + c->got;
            want = IXL_MDX_HDR - c->got;
        } else if (c->state == C_BODY) {
            if (c->got == c->len) {
                conn_request(x, c);
                return;
            }
            if (conn_grow(x, c) != 0)
                continue; /* now C_SINK */
            dst = c->body + c->got;
            want = c->cap - c->got;
        } else { /* C_SINK */
            if (c->got == c->len) {
                conn_request(x, c);
                return;
            }
            dst = sink;
            want = c->len - c->got < sizeof(sink) ? c->len - c->got : sizeof(sink);
        }
        if (want > budget)
            want = budget;
        ssize_t k = sys_recv(c->fd, dst, want, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k <= 0) {
            conn_drop(x, c, k == 0 ? "the connection closed early" : "recv() failed");
            return;
        }
        c->got += (uint32_t)k;
        budget -= (size_t)k;
        if (c->state == C_PROOF) {
            if (conn_proof(x, c) != 0)
                return; /* refused (answered) or dropped */
            continue;
        }
        if (c->state == C_HDR && c->got == IXL_MDX_HDR) {
            if (mdx_header_decode(c->hdr, IXL_MDX_MAX_BODY, &c->type, &c->len) != 0) {
                /* a garbage frame gets an answer saying so */
                const char *why =
                    "not an ixl metadata-exchange frame (bad magic, version, type or length)";
                if (warn_ok(x))
                    IXL_LOG_WARNING("agent %s listener: dropped a request: %s", x->agent->name,
                                    why);
                conn_reply(x, c, IXL_ERR_MALFORMED, why, NULL, 0);
                return;
            }
            c->got = 0;
            c->state = C_BODY;
        }
    }
    if ((c->state == C_BODY || c->state == C_SINK) && c->got == c->len)
        conn_request(x, c); /* the last bytes came in this turn's last read */
}

/* Refuses a connection at accept with a clear error (best effort) and closes it. */
static void accept_refuse(struct ixl_mdx *x, int fd, int status, const char *why)
{
    if (warn_ok(x))
        IXL_LOG_WARNING("agent %s listener: %s: connection closed", x->agent->name, why);
    reply_now(fd, status, why);
    close_drained(fd);
}

/* Without a key: the kernel's word that the client runs as this process's user, before a byte
 * of it is read; otherwise it is refused (IXL_ERR_AUTH) and closed. */
static bool accept_local_ok(struct ixl_mdx *x, int fd)
{
    char why[256];
    int rc = ixl_peer_check(fd, NULL, why, sizeof(why));
    if (rc == IXL_ERR_SYSTEM && x->reserve_fd >= 0) {
        /* perhaps out of descriptors for sock_diag's socket: the reserve one is given up */
        sys_close(x->reserve_fd);
        rc = ixl_peer_check(fd, NULL, why, sizeof(why));
        x->reserve_fd = sys_open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
    }
    if (rc == IXL_OK)
        return true;
    char msg[IXL_MDX_MSG_MAX + 1];
    snprintf(msg, sizeof(msg),
             "refused: this listener has no cluster key and serves only processes of its own "
             "user on this host: %s",
             why);
    accept_refuse(x, fd, rc == IXL_ERR_SYSTEM ? IXL_ERR_SYSTEM : IXL_ERR_AUTH, msg);
    return false;
}

/* Greets a new connection with HELLO: the listener's mode and, with a key, its challenge;
 * the connection then waits for the client's PROOF (with a key) or its request. 0 or -1. */
static int conn_hello(struct ixl_mdx *x, struct mdx_conn *c, char *why, size_t why_len)
{
    enum ixl_auth_mode mode = x->agent->auth.mode;
    char eb[128];
    if (mode == IXL_AUTH_KEY && ixl_auth_nonce(c->nonce_s, sizeof(c->nonce_s)) != IXL_OK) {
        snprintf(why, why_len, "the peer could not draw its challenge: getrandom: %s",
                 ixl_errno_text(errno, eb, sizeof(eb)));
        return IXL_ERR_SYSTEM;
    }
    struct mdx_msg h = {.type = MDX_HELLO, .mode = (uint8_t)mode, .nonce = c->nonce_s};
    size_t len;
    uint8_t *f = mdx_encode(&h, &len);
    if (f == NULL) {
        snprintf(why, why_len, "the peer ran out of memory greeting the connection");
        return IXL_ERR_NO_MEMORY;
    }
    ssize_t k = sys_send(c->fd, f, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    int e = errno;
    free(f);
    if (k != (ssize_t)len) {
        snprintf(why, why_len, "the peer could not greet the connection: send: %s",
                 k < 0 ? ixl_errno_text(e, eb, sizeof(eb)) : "short");
        return IXL_ERR_SYSTEM;
    }
    c->state = mode == IXL_AUTH_KEY ? C_PROOF : C_HDR;
    return IXL_OK;
}

/* Accepts what waits in the backlog (at most MDX_ACCEPT_BATCH per turn). Out of descriptors,
 * the reserve descriptor is given up to accept and refuse one connection at a time, so the
 * backlog drains instead of waking the loop forever; without a reserve, accepting pauses for
 * MDX_PAUSE_MS. */
static void listener_accept(struct ixl_mdx *x)
{
    for (int i = 0; i < MDX_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = sys_accept4(x->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK)
                return;
            if (e == EINTR || e == ECONNABORTED || e == EPROTO)
                continue;
            char eb[128], why[300];
            snprintf(why, sizeof(why), "accept4: %s", ixl_errno_text(e, eb, sizeof(eb)));
            if ((e == EMFILE || e == ENFILE) && x->reserve_fd >= 0) {
                sys_close(x->reserve_fd);
                fd = sys_accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                int e2 = errno;
                if (fd >= 0) {
                    char msg[400];
                    snprintf(msg, sizeof(msg),
                             "the listener is out of file descriptors (%s): try again", why);
                    accept_refuse(x, fd, IXL_ERR_BUSY, msg);
                }
                x->reserve_fd = sys_open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
                if (fd < 0 && (e2 == EAGAIN || e2 == EWOULDBLOCK))
                    return; /* the backlog is empty */
                if (fd >= 0 && x->reserve_fd >= 0)
                    continue;
            }
            /* nothing to give back: stop accepting for a moment instead of spinning */
            if (warn_ok(x))
                IXL_LOG_WARNING("agent %s listener: %s: accepting paused for %d ms", x->agent->name,
                                why, MDX_PAUSE_MS);
            struct epoll_event ev = {.events = 0, .data.ptr = &x->lfd};
            if (sys_epoll_ctl(x->epfd, EPOLL_CTL_MOD, x->lfd, &ev) == 0)
                x->accept_resume_us = ixl_now_us() + (uint64_t)MDX_PAUSE_MS * 1000u;
            return;
        }
        if (x->n_conns >= MDX_MAX_CONNS) {
            char msg[IXL_MDX_MSG_MAX + 1];
            snprintf(msg, sizeof(msg),
                     "the listener serves %u connections at once (its limit): try again",
                     (unsigned)MDX_MAX_CONNS);
            accept_refuse(x, fd, IXL_ERR_BUSY, msg);
            continue;
        }
        if (x->agent->auth.mode == IXL_AUTH_LOCAL && !accept_local_ok(x, fd))
            continue;
        struct mdx_conn *c = sys_calloc(1, sizeof(*c));
        if (c == NULL) {
            accept_refuse(x, fd, IXL_ERR_NO_MEMORY,
                          "the peer ran out of memory accepting the connection");
            continue;
        }
        c->fd = fd;
        char hwhy[200];
        int hrc = conn_hello(x, c, hwhy, sizeof(hwhy));
        if (hrc != IXL_OK) {
            /* No greeting went out: the client still gets the reason, written without
             * allocating. */
            free(c);
            accept_refuse(x, fd, hrc, hwhy);
            continue;
        }
        memcpy(&c->addr, &ss, sl <= sizeof(ss) ? sl : sizeof(ss));
        c->addr_len = sl <= sizeof(ss) ? sl : sizeof(ss);
        c->deadline_us = ixl_now_us() + (uint64_t)MDX_IO_MS * 1000u;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (sys_epoll_ctl(x->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            char eb[128], msg[300];
            snprintf(msg, sizeof(msg), "the listener cannot watch the connection: epoll_ctl: %s",
                     ixl_errno_text(errno, eb, sizeof(eb)));
            free(c);
            accept_refuse(x, fd, IXL_ERR_SYSTEM, msg);
            continue;
        }
        /* every connection has the same time: the list in accept order is in deadline order */
        c->prev = x->conns_tail;
        if (x->conns_tail != NULL)
            x->conns_tail->next = c;
        else
            x->conns = c;
        x->conns_tail = c;
        x->n_conns++;
    }
}

/* Milliseconds until the loop has something to do by the clock (the oldest connection's
 * deadline, the end of an accept pause), at most MDX_IDLE_WAKE_MS (a stop whose wake-up write
 * failed is still seen). */
static int listener_timeout(struct ixl_mdx *x)
{
    uint64_t next = UINT64_MAX;
    if (x->conns != NULL)
        next = x->conns->deadline_us;
    if (x->accept_resume_us != 0 && x->accept_resume_us < next)
        next = x->accept_resume_us;
    int ms = next == UINT64_MAX ? MDX_IDLE_WAKE_MS : remaining_ms(next);
    return ms < MDX_IDLE_WAKE_MS ? ms : MDX_IDLE_WAKE_MS;
}

/* The listener thread: accepts, reads, answers and times out every connection, never waiting
 * on one of them. */
static void *listener_main(void *arg)
{
    struct ixl_mdx *x = arg;
    struct epoll_event evs[MDX_EVENTS];
    while (!atomic_load(&x->stop)) {
        int n = sys_epoll_wait(x->epfd, evs, MDX_EVENTS, listener_timeout(x));
        if (n < 0) {
            if (errno != EINTR) { /* not expected; a pause keeps a persistent one from spinning */
                char eb[128];
                if (warn_ok(x))
                    IXL_LOG_WARNING("agent %s listener: epoll_wait: %s", x->agent->name,
                                    ixl_errno_text(errno, eb, sizeof(eb)));
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            n = 0;
        }
        for (int i = 0; i < n && !atomic_load(&x->stop); i++) {
            void *p = evs[i].data.ptr;
            if (p == &x->wakefd)
                continue; /* stopping: seen at the top */
            if (p == &x->lfd) {
                listener_accept(x);
                continue;
            }
            struct mdx_conn *c = p;
            if (c->state == C_REPLY)
                conn_write(x, c);
            else
                conn_read(x, c);
        }
        /* A connection closed above may have been named again by a later event of the same
         * batch: impossible here, since each connection has one registration and is closed
         * only by its own event or by the deadline sweep below. */
        uint64_t now = ixl_now_us();
        while (x->conns != NULL && x->conns->deadline_us <= now)
            conn_drop(x, x->conns,
                      x->conns->state == C_REPLY ? "timed out sending the reply" : "timed out");
        if (x->accept_resume_us != 0 && x->accept_resume_us <= now) {
            if (x->reserve_fd < 0)
                x->reserve_fd = sys_open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &x->lfd};
            if (sys_epoll_ctl(x->epfd, EPOLL_CTL_MOD, x->lfd, &ev) == 0)
                x->accept_resume_us = 0;
            else
                x->accept_resume_us = now + (uint64_t)MDX_PAUSE_MS * 1000u;
        }
    }
    while (x->conns != NULL)
        conn_close(x, x->conns);
    return NULL;
}

/* Closes what listen_start opened (the listener thread is not running). */
static void listen_close(struct ixl_mdx *x)
{
    if (x->reserve_fd >= 0)
        sys_close(x->reserve_fd);
    if (x->epfd >= 0)
        sys_close(x->epfd);
    if (x->lfd >= 0)
        sys_close(x->lfd);
    x->reserve_fd = x->epfd = x->lfd = -1;
}

static bool addr_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

static int listen_start(struct ixl_mdx *x, const char *addr, uint16_t port)
{
    struct ixl_agent *agent = x->agent;
    char ps[8];
    snprintf(ps, sizeof(ps), "%u", (unsigned)port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int gai = sys_getaddrinfo(addr, ps, &hints, &res);
    if (gai != 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "listener address %s: getaddrinfo: %s",
                             addr, gai_strerror(gai));
    if (agent->auth.mode == IXL_AUTH_LOCAL && !addr_loopback(res->ai_addr)) {
        freeaddrinfo(res);
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "listener address %s is not a loopback address: without a cluster "
                             "key the metadata listener serves only this host's processes of "
                             "this user. Give the agent a key (auth_key, IXL_AUTH_KEY or "
                             "IXL_AUTH_KEY_FILE) to listen for other machines, or opt in to "
                             "unauthenticated peers with insecure_remote (IXL_INSECURE_REMOTE=1)",
                             addr);
    }
    const char *call = "socket";
    int fd = sys_socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0)
        sys_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || (call = "bind", sys_bind(fd, res->ai_addr, res->ai_addrlen)) != 0 ||
        (call = "listen", sys_listen(fd, MDX_BACKLOG)) != 0) {
        char eb[128];
        int e = errno;
        if (fd >= 0)
            sys_close(fd);
        freeaddrinfo(res);
        return IXL_AGENT_ERR(agent, e == EADDRINUSE ? IXL_ERR_BUSY : IXL_ERR_SYSTEM,
                             "cannot listen on %s port %u: %s: %s", addr, (unsigned)port, call,
                             ixl_errno_text(e, eb, sizeof(eb)));
    }
    freeaddrinfo(res);
    x->lfd = fd;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    call = "getsockname"; /* the port is unknown (and ss unset): nobody could be told it */
    if (sys_getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        goto close_listener;
    x->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    call = "epoll_create1";
    if ((x->epfd = sys_epoll_create1(EPOLL_CLOEXEC)) < 0)
        goto close_listener;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &x->lfd};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &x->wakefd};
    call = "epoll_ctl";
    if (sys_epoll_ctl(x->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 ||
        sys_epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->wakefd, &wev) != 0)
        goto close_listener;
    /* the descriptor given up to accept (and refuse) connections when none is left */
    call = "open(/dev/null) (the listener's reserve descriptor)";
    if ((x->reserve_fd = sys_open("/dev/null", O_RDONLY | O_CLOEXEC, 0)) < 0)
        goto close_listener;
    int te = sys_pthread_create(&x->lthread, NULL, listener_main, x);
    if (te != 0) {
        char eb[128];
        listen_close(x);
        return IXL_AGENT_ERR(agent, IXL_ERR_SYSTEM,
                             "cannot start the listener thread: pthread_create: %s",
                             ixl_errno_text(te, eb, sizeof(eb)));
    }
    pthread_setname_np(x->lthread, "ixl-md-listen");
    x->listening = true;
    IXL_LOG_INF("agent %s: metadata listener on %s port %u", agent->name, addr, (unsigned)x->port);
    return IXL_OK;

close_listener : {
    char eb[128];
    int e = errno;
    listen_close(x);
    return IXL_AGENT_ERR(agent, IXL_ERR_SYSTEM, "listener on %s port %u: %s: %s", addr,
                         (unsigned)port, call, ixl_errno_text(e, eb, sizeof(eb)));
}
}

/* ---- the client side ---------------------------------------------------------------------- */

/* The status and message of a connection that failed in io_full / read_frame. */
static int io_failed(const char *host, uint16_t port, const char *why, char *msg, size_t cap)
{
    snprintf(msg, cap, "%s:%u: %s%s", host, (unsigned)port, why,
             strncmp(why, "the connection closed", 21) == 0
                 ? " (the peer closed it without answering: its log says why)"
                 : "");
    return strcmp(why, "timed out") == 0       ? IXL_ERR_TIMEOUT
           : strcmp(why, "out of memory") == 0 ? IXL_ERR_NO_MEMORY
           : strncmp(why, "not an", 6) == 0 || strncmp(why, "malformed", 9) == 0
               ? IXL_ERR_PROTOCOL
               : IXL_ERR_REMOTE_DISCONNECT;
}

/* A listener's refusal (a REPLY where a greeting or proof was due): its status, never OK. */
static int refused(const char *host, uint16_t port, const struct mdx_msg *m, char *msg, size_t cap)
{
    char text[IXL_MDX_MSG_MAX + 1];
    mdx_str_copy(m->text, text, sizeof(text));
    snprintf(msg, cap, "%s:%u: %s", host, (unsigned)port, text);
    return m->status != IXL_OK ? m->status : IXL_ERR_PROTOCOL;
}

/* Reads a small frame of the opening (at most MDX_PRE_AUTH_BODY bytes: the listener has not
 * proved anything yet) and decodes it: 0 with *m pointing into *body (free()), or an error
 * with msg filled (a refusal's status when the listener refused). */
static int read_small(struct ixl_mdx *x, int fd, const char *host, uint16_t port, uint64_t deadline,
                      enum mdx_type want, uint8_t **body, struct mdx_msg *m, char *msg, size_t cap)
{
    uint8_t hdr[IXL_MDX_HDR];
    enum mdx_type type;
    uint32_t len;
    const char *why = NULL;
    if (read_frame(x, fd, deadline, MDX_PRE_AUTH_BODY, hdr, &type, body, &len, &why) != 0)
        return io_failed(host, port, why, msg, cap);
    if ((type != want && type != MDX_REPLY) || mdx_decode(type, *body, len, m) != 0) {
        snprintf(msg, cap, "%s:%u: not an ixl metadata listener of this version (unexpected frame)",
                 host, (unsigned)port);
        return IXL_ERR_PROTOCOL;
    }
    if (type == MDX_REPLY)
        return refused(host, port, m, msg, cap);
    return IXL_OK;
}

/* The client's half of a connection's opening: the listener's HELLO (or its refusal), the
 * checks this agent's mode asks for, and with a key the proofs both ways. IXL_OK (ns and nc
 * filled with a key), or an error with msg filled. The listener's announced mode only
 * explains a mismatch: what is required follows this agent's own mode. */
static int client_open(struct ixl_mdx *x, int fd, const char *host, uint16_t port,
                       uint64_t deadline, uint8_t ns[IXL_MDX_NONCE], uint8_t nc[IXL_MDX_NONCE],
                       char *msg, size_t cap)
{
    const struct ixl_auth *a = &x->agent->auth;
    uint8_t *body = NULL;
    struct mdx_msg m;
    int rc = read_small(x, fd, host, port, deadline, MDX_HELLO, &body, &m, msg, cap);
    if (rc != IXL_OK)
        goto free_body;
    if (a->mode == IXL_AUTH_KEY && m.mode != IXL_AUTH_KEY) {
        snprintf(msg, cap,
                 "%s:%u: the listener has no cluster key and this agent has one: refused (it "
                 "cannot prove it belongs to this cluster)",
                 host, (unsigned)port);
        rc = IXL_ERR_AUTH;
        goto free_body;
    }
    if (a->mode != IXL_AUTH_KEY && m.mode == IXL_AUTH_KEY) {
        snprintf(msg, cap,
                 "%s:%u: the listener has a cluster key and this agent has none (give it the same "
                 "key: auth_key, IXL_AUTH_KEY or IXL_AUTH_KEY_FILE)",
                 host, (unsigned)port);
        rc = IXL_ERR_AUTH;
        goto free_body;
    }
    if (a->mode == IXL_AUTH_LOCAL) { /* the kernel's word on the listener's process */
        char why[256];
        rc = ixl_peer_check(fd, NULL, why, sizeof(why));
        if (rc != IXL_OK) {
            snprintf(msg, cap,
                     "%s:%u: refused: without a cluster key this agent talks only to listeners "
                     "of its own user on this host (give it a key, IXL_AUTH_KEY, or opt in with "
                     "insecure_remote): %s",
                     host, (unsigned)port, why);
            rc = rc == IXL_ERR_SYSTEM ? IXL_ERR_SYSTEM : IXL_ERR_AUTH;
        }
        goto free_body;
    }
    if (a->mode != IXL_AUTH_KEY)
        goto free_body;
    memcpy(ns, m.nonce, IXL_MDX_NONCE);
    free(body);
    body = NULL;
    uint8_t mac[IXL_MDX_MAC], want[IXL_MDX_MAC];
    if ((rc = ixl_auth_nonce(nc, IXL_MDX_NONCE)) != IXL_OK ||
        (rc = proof_mac(a, IXL_MDX_CLIENT_LABEL, ns, nc, mac)) != IXL_OK) {
        snprintf(msg, cap, "%s:%u: making the proof of the key failed", host, (unsigned)port);
        goto free_body;
    }
    struct mdx_msg p = {.type = MDX_PROOF, .nonce = nc, .mac = mac};
    size_t plen;
    uint8_t *pf = mdx_encode(&p, &plen);
    const char *why = NULL;
    if (pf == NULL) {
        snprintf(msg, cap, "out of memory");
        rc = IXL_ERR_NO_MEMORY;
        goto free_body;
    }
    int w = io_full(x, fd, pf, plen, true, deadline, &why);
    free(pf);
    if (w != 0) {
        rc = io_failed(host, port, why, msg, cap);
        goto free_body;
    }
    rc = read_small(x, fd, host, port, deadline, MDX_PROVEN, &body, &m, msg, cap);
    if (rc != IXL_OK)
        goto free_body;
    if (proof_mac(a, IXL_MDX_LISTENER_LABEL, ns, nc, want) != IXL_OK ||
        !ixl_auth_equal(want, m.mac, IXL_MDX_MAC)) {
        snprintf(msg, cap, "%s:%u: the listener did not prove the cluster key: refused", host,
                 (unsigned)port);
        rc = IXL_ERR_AUTH;
    }
free_body:
    free(body);
    return rc;
}

/* One request to host:port and its reply: the reply's status (its text in msg, its blob in
 * *blob when blob is not NULL), or a local error with msg saying what failed. The connection
 * opens as client_open says; with a key the request and the reply carry MACs of the session. */
static int request(struct ixl_mdx *x, struct mdx_thread *t, const char *host, uint16_t port,
                   const struct mdx_msg *req, void **blob, size_t *blob_len, char *msg, size_t cap)
{
    uint64_t deadline = ixl_now_us() + (uint64_t)MDX_IO_MS * 1000u;
    const struct ixl_auth *a = &x->agent->auth;
    bool keyed = a->mode == IXL_AUTH_KEY;
    size_t extra = keyed ? IXL_MDX_MAC : 0;
    size_t flen;
    uint8_t *frame = mdx_encode_extra(req, extra, &flen);
    if (frame == NULL) {
        snprintf(msg, cap, "cannot encode the request (bad name or label, or out of memory)");
        return IXL_ERR_INVALID_ARG;
    }
    int code = IXL_OK;
    int fd = dial(x, host, port, deadline, &code, msg, cap);
    if (fd < 0) {
        free(frame);
        return code;
    }
    if (t != NULL)
        thread_set_fd(t, fd);
    uint8_t ns[IXL_MDX_NONCE] = {0}, nc[IXL_MDX_NONCE] = {0};
    const char *why = NULL;
    uint8_t *body = NULL, hdr[IXL_MDX_HDR];
    enum mdx_type type;
    uint32_t len;
    struct mdx_msg r;
    int rc = client_open(x, fd, host, port, deadline, ns, nc, msg, cap);
    if (rc != IXL_OK)
        goto close_fd;
    if (keyed && frame_seal(a, IXL_MDX_REQUEST_LABEL, ns, nc, frame, flen) != IXL_OK) {
        snprintf(msg, cap, "computing the request's MAC failed");
        rc = IXL_ERR_SYSTEM;
        goto close_fd;
    }
    if (io_full(x, fd, frame, flen, true, deadline, &why) != 0 ||
        read_frame(x, fd, deadline, IXL_MDX_MAX_BODY, hdr, &type, &body, &len, &why) != 0) {
        rc = io_failed(host, port, why, msg, cap);
    } else if (keyed && !frame_verify(a, IXL_MDX_REPLY_LABEL, ns, nc, hdr, body, len)) {
        snprintf(msg, cap, "%s:%u: the reply's MAC does not verify under the cluster key: ignored",
                 host, (unsigned)port);
        rc = IXL_ERR_AUTH;
    } else if (mdx_decode(type, body, len - extra, &r) != 0) {
        snprintf(msg, cap, "%s:%u: malformed frame body", host, (unsigned)port);
        rc = IXL_ERR_PROTOCOL;
    } else if (r.type != MDX_REPLY) {
        snprintf(msg, cap, "%s:%u answered with a request instead of a reply", host,
                 (unsigned)port);
        rc = IXL_ERR_PROTOCOL;
    } else {
        rc = r.status;
        char text[IXL_MDX_MSG_MAX + 1];
        mdx_str_copy(r.text, text, sizeof(text));
        snprintf(msg, cap, "%s:%u: %s", host, (unsigned)port, text);
        if (rc == IXL_OK && blob != NULL) {
            *blob = sys_malloc(r.blob_len ? r.blob_len : 1);
            if (*blob == NULL) {
                snprintf(msg, cap, "%s:%u: out of memory for the %zu-byte reply", host,
                         (unsigned)port, r.blob_len);
                rc = IXL_ERR_NO_MEMORY;
            } else {
                memcpy(*blob, r.blob, r.blob_len);
                *blob_len = r.blob_len;
            }
        }
    }
close_fd:
    free(body);
    free(frame);
    if (t != NULL)
        thread_set_fd(t, -1);
    sys_close(fd);
    return rc;
}

/* ---- the peer exchange (struct ixl_mdx_ops over the listeners) ----------------------------- */

static int peer_publish(void *impl, const struct ixl_peer *peer, const char *label,
                        const void *blob, size_t len, char *msg, size_t msglen)
{
    struct ixl_mdx *x = impl;
    struct ixl_agent *agent = x->agent;
    struct mdx_msg m = {.type = MDX_SEND,
                        .name = {agent->name, strlen(agent->name)},
                        .label = {label ? label : "", label ? strlen(label) : 0},
                        .blob = blob,
                        .blob_len = len};
    struct mdx_peer *p = sys_calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(msg, msglen, "out of memory");
        return IXL_ERR_NO_MEMORY;
    }
    int rc = request(x, NULL, peer->addr, peer->port, &m, NULL, NULL, msg, msglen);
    if (rc == IXL_OK)
        remember_peer(x, p, peer->addr, peer->port);
    else
        free(p);
    return rc;
}

static int peer_fetch(void *impl, struct mdx_thread *t, const char *remote,
                      const struct ixl_peer *peer, const char *label, void **blob, size_t *len,
                      char *msg, size_t msglen)
{
    struct ixl_mdx *x = impl;
    struct ixl_agent *agent = x->agent;
    struct mdx_msg m = {.type = MDX_FETCH,
                        .name = {remote, strlen(remote)},
                        .label = {label, strlen(label)},
                        .from = {agent->name, strlen(agent->name)},
                        .port = x->listening ? x->port : 0};
    return request(x, t, peer->addr, peer->port, &m, blob, len, msg, msglen);
}

/* Tells peer, or (NULL) every peer this agent sent its metadata to; a peer that had dropped it
 * already is fine, one that cannot be told is the error (the last one's message). */
static int peer_invalidate(void *impl, const struct ixl_peer *peer, char *msg, size_t msglen)
{
    struct ixl_mdx *x = impl;
    struct ixl_agent *agent = x->agent;
    int rc = IXL_OK;
    /* the peers to tell: the one given, or every one remembered (the list is taken) */
    struct mdx_peer *list = NULL, one;
    if (peer != NULL) {
        snprintf(one.host, sizeof(one.host), "%s", peer->addr);
        one.port = peer->port;
        one.next = NULL;
        list = &one;
    } else {
        pthread_mutex_lock(&x->lock);
        list = x->peers;
        x->peers = NULL;
        pthread_mutex_unlock(&x->lock);
    }
    struct mdx_msg m = {.type = MDX_INVAL,
                        .name = {agent->name, strlen(agent->name)},
                        .incarnation = agent->incarnation};
    char one_msg[IXL_MDX_MSG_MAX + 300];
    for (struct mdx_peer *p = list; p != NULL; p = p->next) {
        int r = request(x, NULL, p->host, p->port, &m, NULL, NULL, one_msg, sizeof(one_msg));
        if (r != IXL_OK && r != IXL_ERR_NOT_FOUND) {
            rc = r;
            snprintf(msg, msglen, "%s", one_msg);
        }
    }
    if (list != &one) {
        while (list != NULL) {
            struct mdx_peer *n = list->next;
            free(list);
            list = n;
        }
    }
    return rc;
}

/* Stops the listener; the connection threads are cut and joined with the fetches. */
static void peer_destroy(void *impl)
{
    struct ixl_mdx *x = impl;
    if (x->listening) {
        uint64_t one = 1; /* a failed write is tried again; the loop also looks every second */
        for (int i = 0; i < 3 && sys_write(x->wakefd, &one, sizeof(one)) != sizeof(one); i++)
            ;
        pthread_join(x->lthread, NULL);
    }
    listen_close(x);
}

static const struct ixl_mdx_ops peer_ops = {
    .name = "peer",
    .publish = peer_publish,
    .fetch = peer_fetch,
    .invalidate = peer_invalidate,
    .destroy = peer_destroy,
};

/* ---- the API ------------------------------------------------------------------------------- */

/* The one place a call chooses its exchange: a peer address goes to that peer's listener, no
 * address (peer NULL, or its addr NULL) to etcd, which must then be configured. */
static int mdx_pick(struct ixl_agent *agent, const struct ixl_peer *peer, const char *what,
                    const struct mdx_impl **out)
{
    const struct mdx_impl *im =
        &agent->mdx->impl[peer != NULL && peer->addr != NULL ? MDX_PEER : MDX_ETCD];
    if (im->ops == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "%s: no peer address given and no etcd configured (agent params "
                             "etcd_endpoints or IXL_ETCD_ENDPOINTS)",
                             what);
    *out = im;
    return IXL_OK;
}

/* Keeps blob under label, in the entry l allocated by the caller before the send (freed if the
 * label has one already): running out of memory fails the send instead of dropping the label. */
static void store_label(struct ixl_mdx *x, struct mdx_label *l, const char *label, void *blob,
                        size_t len)
{
    pthread_mutex_lock(&x->lock);
    struct mdx_label *o;
    for (o = x->labels; o != NULL; o = o->next)
        if (strcmp(o->label, label) == 0)
            break;
    if (o == NULL) {
        snprintf(l->label, sizeof(l->label), "%s", label);
        l->next = x->labels;
        x->labels = l;
        l = NULL;
        o = x->labels;
    }
    free(o->blob);
    o->blob = blob;
    o->len = len;
    pthread_mutex_unlock(&x->lock);
    free(l);
}

static int label_ok(const char *label)
{
    if (label == NULL)
        return 1;
    size_t n = strlen(label);
    if (n > IXL_MDX_LABEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = label[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

ixl_status ixl_md_send(struct ixl_agent *agent, const struct ixl_peer *peer,
                       const struct ixl_md_params *params)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    struct ixl_mdx *x = agent->mdx;
    const char *label = params && (params->field_mask & IXL_MD_F_LABEL) ? params->label : NULL;
    if (label != NULL && label[0] == '\0')
        label = NULL;
    if (!label_ok(label))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_md_send: a label is 1 to %d characters of [A-Za-z0-9_.-]",
                             IXL_MDX_LABEL_MAX);
    const struct mdx_impl *im = NULL;
    int rc = mdx_pick(agent, peer, "ixl_md_send", &im);
    if (rc != IXL_OK)
        return rc;
    void *blob;
    size_t len;
    rc = ixl_md_get(agent, params, &blob, &len);
    if (rc != IXL_OK)
        return rc;
    /* the labeled copy kept here, allocated before anything is sent */
    void *copy = NULL;
    struct mdx_label *l = NULL;
    if (label != NULL &&
        ((copy = sys_malloc(len)) == NULL || (l = sys_calloc(1, sizeof(*l))) == NULL)) {
        free(copy);
        ixl_free(blob);
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY,
                             "ixl_md_send: out of memory (keeping the metadata under label '%s')",
                             label);
    }
    char msg[IXL_MDX_MSG_MAX + 300];
    rc = im->ops->publish(im->impl, peer, label, blob, len, msg, sizeof(msg));
    if (rc != IXL_OK)
        IXL_AGENT_ERR(agent, rc, "ixl_md_send to %s: %s", im->ops->name, msg);
    if (rc == IXL_OK && label != NULL) {
        memcpy(copy, blob, len);
        store_label(x, l, label, copy, len);
    } else {
        free(copy);
        free(l);
    }
    ixl_free(blob);
    return rc;
}

/* The entry of remote in x->fetches, or NULL (x->lock held). prev: the link to it. */
static struct mdx_fetch *fetch_find_locked(struct ixl_mdx *x, const char *remote,
                                           struct mdx_fetch ***prev)
{
    for (struct mdx_fetch **pp = &x->fetches; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->remote, remote) == 0) {
            if (prev)
                *prev = pp;
            return *pp;
        }
    return NULL;
}

/* A fetch ended: success drops its entry (the remote table answers from now on), an error
 * stays with its reason until the next fetch of that remote or its invalidation. */
static void fetch_record(struct ixl_mdx *x, const struct mdx_thread *t, int rc, const char *why)
{
    pthread_mutex_lock(&x->lock);
    struct mdx_fetch **pp = NULL;
    struct mdx_fetch *f = fetch_find_locked(x, t->remote, &pp);
    if (f != NULL && f->gen == t->fetch_gen) {
        if (rc == IXL_OK) {
            *pp = f->next;
            free(f);
        } else {
            f->status = rc;
            /* A long name, host and peer message may not all fit: the reason is cut, and says
             * so with "..." at its end. */
            int n =
                snprintf(f->reason, sizeof(f->reason),
                         "fetching the metadata of '%s'%s%s from %s failed: %s", t->remote,
                         t->label[0] ? " under label " : "", t->label,
                         t->host[0] ? t->host : t->im->ops->name, why[0] ? why : ixl_strerror(rc));
            if (n < 0 || (size_t)n >= sizeof(f->reason))
                memcpy(f->reason + sizeof(f->reason) - 4, "...", 4);
        }
    }
    pthread_mutex_unlock(&x->lock);
}

/* A new fetch of remote starts: its entry says IN_PROGRESS (replacing an older outcome). 0, or
 * -1 out of memory. */
static int fetch_begin(struct ixl_mdx *x, struct mdx_thread *t)
{
    pthread_mutex_lock(&x->lock);
    struct mdx_fetch *f = fetch_find_locked(x, t->remote, NULL);
    if (f == NULL && (f = sys_calloc(1, sizeof(*f))) != NULL) {
        snprintf(f->remote, sizeof(f->remote), "%s", t->remote);
        f->next = x->fetches;
        x->fetches = f;
    }
    if (f != NULL) {
        f->gen = t->fetch_gen = ++x->fetch_gen;
        f->status = IXL_IN_PROGRESS;
        f->reason[0] = '\0';
    }
    pthread_mutex_unlock(&x->lock);
    return f != NULL ? 0 : -1;
}

/* Drops remote's entry (a fetch that could not start, or the remote's invalidation). gen 0:
 * whatever fetch it is for. */
static void fetch_forget(struct ixl_mdx *x, const char *remote, uint64_t gen)
{
    pthread_mutex_lock(&x->lock);
    struct mdx_fetch **pp = NULL;
    struct mdx_fetch *f = fetch_find_locked(x, remote, &pp);
    if (f != NULL && (gen == 0 || f->gen == gen)) {
        *pp = f->next;
        free(f);
    }
    pthread_mutex_unlock(&x->lock);
}

void ixl_mdx_fetch_forget(struct ixl_agent *agent, const char *remote)
{
    if (agent->mdx != NULL)
        fetch_forget(agent->mdx, remote, 0);
}

static void *fetch_main(void *arg)
{
    struct mdx_thread *t = arg;
    struct ixl_mdx *x = t->x;
    struct ixl_agent *agent = x->agent;
    void *blob = NULL;
    size_t len = 0;
    char msg[IXL_MDX_MSG_MAX + 300] = "";
    int rc;
    struct ixl_peer peer = {t->host[0] ? t->host : NULL, t->port};
    rc = t->im->ops->fetch(t->im->impl, t, t->remote, &peer, t->label, &blob, &len, msg,
                           sizeof(msg));
    if (rc == IXL_OK && !atomic_load(&x->stop)) {
        char name[IXL_NAME_MAX];
        /* only metadata of the agent asked for: a listener does not replace another's */
        rc = ixl_md_load_as(agent, blob, len, t->remote, name, sizeof(name));
        if (rc != IXL_OK) {
            snprintf(msg, sizeof(msg), "%s", ixl_agent_last_error(agent));
        }
    }
    if (rc != IXL_OK && !atomic_load(&x->stop))
        IXL_LOG_ERR("agent %s: fetching the metadata of '%s'%s%s from %s failed: %s (%s)",
                    agent->name, t->remote, t->label[0] ? " under label " : "", t->label,
                    t->host[0] ? t->host : t->im->ops->name, msg, ixl_strerror(rc));
    fetch_record(x, t, rc, msg);
    free(blob);
    ixl_agent_wake(agent); /* after the record: a woken poller sees the outcome */
    thread_finish(t);
    return NULL;
}

ixl_status ixl_md_fetch(struct ixl_agent *agent, const char *remote, const struct ixl_peer *peer,
                        const char *label)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    struct ixl_mdx *x = agent->mdx;
    if (remote == NULL || remote[0] == '\0' || strlen(remote) >= IXL_NAME_MAX)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_fetch: bad remote agent name");
    if (strcmp(remote, agent->name) == 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_fetch: '%s' is this agent itself",
                             remote);
    if (!label_ok(label))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_md_fetch: a label is 1 to %d characters of [A-Za-z0-9_.-]",
                             IXL_MDX_LABEL_MAX);
    const struct mdx_impl *im = NULL;
    int rc = mdx_pick(agent, peer, "ixl_md_fetch", &im);
    if (rc != IXL_OK)
        return rc;
    if (peer != NULL && peer->addr != NULL &&
        (strlen(peer->addr) >= sizeof(((struct mdx_thread *)0)->host) || peer->port == 0))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_fetch: bad peer address");
    struct mdx_thread *t = sys_calloc(1, sizeof(*t));
    if (t == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    t->fd = -1;
    snprintf(t->remote, sizeof(t->remote), "%s", remote);
    snprintf(t->label, sizeof(t->label), "%s", label ? label : "");
    t->im = im;
    if (peer != NULL && peer->addr != NULL) {
        snprintf(t->host, sizeof(t->host), "%s", peer->addr);
        t->port = peer->port;
    }
    if (fetch_begin(x, t) != 0) {
        free(t);
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    }
    rc = spawn(x, t, fetch_main);
    if (rc != IXL_OK) {
        char eb[128];
        ixl_errno_text(errno, eb, sizeof(eb));
        fetch_forget(x, t->remote, t->fetch_gen);
        free(t);
        return IXL_AGENT_ERR(agent, rc, "ixl_md_fetch: cannot start a thread: pthread_create: %s",
                             eb);
    }
    return IXL_OK;
}

ixl_status ixl_md_fetch_status(struct ixl_agent *agent, const char *remote)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (remote == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_md_fetch_status: NULL name");
    struct ixl_mdx *x = agent->mdx;
    pthread_mutex_lock(&x->lock);
    struct mdx_fetch *f = fetch_find_locked(x, remote, NULL);
    int rc = f != NULL ? f->status : IXL_OK;
    char reason[sizeof(f->reason)];
    if (f != NULL)
        memcpy(reason, f->reason, sizeof(reason));
    pthread_mutex_unlock(&x->lock);
    if (f == NULL) {
        /* No fetch running or failed: loaded (by a fetch, a load, a peer's send, etcd) or not. */
        rc = ixl_remote_check(agent, remote, NULL);
        if (rc == IXL_ERR_NOT_FOUND)
            rc = IXL_AGENT_QUIET(agent, rc,
                                 "no fetch of '%s' is running or failed, and its metadata is not "
                                 "loaded",
                                 remote);
        return rc;
    }
    if (rc == IXL_IN_PROGRESS)
        return IXL_IN_PROGRESS;
    /* The fetch thread logged it already: recorded for this caller, not logged again. */
    return IXL_AGENT_QUIET(agent, rc, "%s", reason);
}

ixl_status ixl_md_invalidate_local(struct ixl_agent *agent, const struct ixl_peer *peer)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    struct ixl_mdx *x = agent->mdx;
    /* peer NULL: every exchange this agent's metadata went to (etcd first); else the one
     * mdx_pick chooses */
    const struct mdx_impl *one = NULL;
    int rc = IXL_OK;
    if (peer != NULL && (rc = mdx_pick(agent, peer, "ixl_md_invalidate_local", &one)) != IXL_OK)
        return rc;
    char msg[IXL_MDX_MSG_MAX + 300];
    for (int i = MDX_N; i-- > 0;) {
        const struct mdx_impl *im = &x->impl[i];
        if (im->ops == NULL || (peer != NULL && im != one))
            continue;
        int r = im->ops->invalidate(im->impl, peer, msg, sizeof(msg));
        if (r != IXL_OK)
            rc = IXL_AGENT_ERR(agent, r, "ixl_md_invalidate_local at %s: %s", im->ops->name, msg);
    }
    if (peer == NULL) { /* labeled metadata is this agent's metadata too */
        pthread_mutex_lock(&x->lock);
        while (x->labels != NULL) {
            struct mdx_label *l = x->labels;
            x->labels = l->next;
            free(l->blob);
            free(l);
        }
        pthread_mutex_unlock(&x->lock);
    }
    return rc;
}

ixl_status ixl_agent_listen_port(struct ixl_agent *agent, uint16_t *out)
{
    if (agent == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (agent->mdx == NULL || !agent->mdx->listening)
        return IXL_AGENT_QUIET(agent, IXL_ERR_NOT_FOUND,
                               "agent '%s' has no listener (set listen_port in its params)",
                               agent->name);
    *out = agent->mdx->port;
    return IXL_OK;
}

/* ---- start / stop --------------------------------------------------------------------------- */

int ixl_mdx_start(struct ixl_agent *agent, const struct ixl_agent_params *params)
{
    struct ixl_mdx *x = sys_calloc(1, sizeof(*x));
    if (x == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    x->agent = agent;
    x->lfd = x->epfd = x->reserve_fd = -1;
    pthread_mutex_init(&x->lock, NULL);
    x->wakefd = sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    agent->mdx = x;
    if (x->wakefd < 0)
        return IXL_AGENT_ERR(agent, IXL_ERR_SYSTEM, "eventfd failed");
    uint64_t m = params ? params->field_mask : 0;
    if (m & IXL_AGENT_F_LISTEN_PORT) {
        int rc = listen_start(x, agent->listen_addr, params->listen_port);
        if (rc != IXL_OK)
            return rc;
    }
    /* The implementations the params configure: the peer exchange always (a listener only with
     * a listen port), etcd with endpoints. */
    x->impl[MDX_PEER] = (struct mdx_impl){&peer_ops, x};
    const char *ep =
        (m & IXL_AGENT_F_ETCD) ? params->etcd_endpoints : ixl_cfg_get(IXL_CFG_ETCD_ENDPOINTS);
    if (ep != NULL && ep[0] != '\0') {
        char msg[512];
        int rc = ixl_mdx_etcd_open(agent, ep, &x->stop, &x->impl[MDX_ETCD].impl, msg, sizeof(msg));
        if (rc != IXL_OK)
            return IXL_AGENT_ERR(agent, rc, "etcd %s: %s", ep, msg);
        x->impl[MDX_ETCD].ops = &ixl_mdx_etcd_ops;
    }
    return IXL_OK;
}

void ixl_mdx_stop(struct ixl_agent *agent)
{
    struct ixl_mdx *x = agent->mdx;
    if (x == NULL)
        return;
    atomic_store(&x->stop, true);
    /* etcd first: its watch thread may call into the remote table; then the listener */
    for (int i = MDX_N; i-- > 0;)
        if (x->impl[i].ops != NULL)
            x->impl[i].ops->destroy(x->impl[i].impl);
    /* cut every socket still in use, then wait for the threads (each sees stop within
     * MDX_POLL_MS) */
    pthread_mutex_lock(&x->lock);
    for (struct mdx_thread *t = x->threads; t != NULL; t = t->next)
        if (t->fd >= 0)
            shutdown(t->fd, SHUT_RDWR);
    struct mdx_thread *all = x->threads;
    x->threads = NULL;
    pthread_mutex_unlock(&x->lock);
    while (all != NULL) {
        struct mdx_thread *n = all->next;
        pthread_join(all->th, NULL);
        free(all);
        all = n;
    }
    while (x->peers != NULL) {
        struct mdx_peer *p = x->peers;
        x->peers = p->next;
        free(p);
    }
    while (x->labels != NULL) {
        struct mdx_label *l = x->labels;
        x->labels = l->next;
        free(l->blob);
        free(l);
    }
    while (x->fetches != NULL) {
        struct mdx_fetch *f = x->fetches;
        x->fetches = f->next;
        free(f);
    }
    if (x->wakefd >= 0)
        sys_close(x->wakefd);
    pthread_mutex_destroy(&x->lock);
    free(x);
    agent->mdx = NULL;
}

/*
 * Metadata exchange without a side channel: the agent's listener (peer mode) and etcd (central
 * KV mode), behind ixl_md_send / ixl_md_fetch / ixl_md_invalidate_local. Both implement
 * struct ixl_mdx_ops (mdx.h): the peer exchange is here, etcd's in mdx_etcd.c; mdx_pick chooses
 * per call.
 *
 * Peer mode (mdx_wire.h): the listener thread accepts connections and hands each to a thread
 * of its own (at most MDX_MAX_CONNS at once), which reads one request under a deadline, answers
 * and closes; a peer that sends garbage gets an error reply, one that stalls or closes early
 * only ends its own connection. Fetches run on threads of their own and complete into the
 * remote table, then wake the agent (its fd becomes readable).
 *
 * Labels: ixl_md_send with a label also keeps the labeled (partial) blob here, so a peer can
 * fetch it by label from this agent's listener; in etcd mode it is published under the label.
 *
 * Invalidation reaches the peers this agent sent its metadata to, the fetchers that told their
 * listener port, and etcd (whose watchers drop the agent when its head key goes).
 *
 * Threads and locks: x->lock guards the lists here and is never held across I/O or an agent
 * call. Destroy (ixl_mdx_stop) runs before anything else of the agent is torn down: it closes
 * etcd (its watch thread may be inside the agent's remote table), stops the listener, cuts the
 * sockets of every thread still running (shutdown), and joins them.
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/agent.h"
#include "core/internal.h"
#include "meta/mdx.h"
#include "meta/mdx_wire.h"
#include "util/config.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"
#include "util/sys.h"

#define MDX_MAX_CONNS 256 /* connections served at once; more are closed at accept */
#define MDX_IO_MS 5000    /* one request: connect, send, reply (both sides) */
#define MDX_POLL_MS 50

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
    int lfd;    /* listening socket, -1 when none */
    int wakefd; /* wakes the listener thread at stop */
    uint16_t port;
    pthread_t lthread;
    bool listening;
    struct mdx_thread *threads; /* connection and fetch threads */
    unsigned n_conns;
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

/* Reads one frame (header + body, body malloc'd) and decodes it. 0, or -1 with *why set. */
static int read_frame(struct ixl_mdx *x, int fd, uint64_t deadline_us, uint8_t **body,
                      struct mdx_msg *m, const char **why)
{
    uint8_t hdr[IXL_MDX_HDR];
    enum mdx_type type;
    uint32_t len;
    *body = NULL;
    if (io_full(x, fd, hdr, sizeof(hdr), false, deadline_us, why) != 0)
        return -1;
    if (mdx_header_decode(hdr, IXL_MDX_MAX_BODY, &type, &len) != 0) {
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
    if (mdx_decode(type, *body, len, m) != 0) {
        *why = "malformed frame body";
        return -1;
    }
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

static void thread_finish(struct mdx_thread *t, bool conn)
{
    struct ixl_mdx *x = t->x;
    pthread_mutex_lock(&x->lock);
    if (t->fd >= 0)
        sys_close(t->fd);
    t->fd = -1;
    if (conn)
        x->n_conns--;
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

/* ---- the listener (server side) ---------------------------------------------------------- */

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

static void send_reply(struct ixl_mdx *x, int fd, int status, const char *text, const void *blob,
                       size_t blob_len, uint64_t deadline_us)
{
    struct mdx_msg r = {.type = MDX_REPLY,
                        .status = status,
                        .text = {text, text ? strlen(text) : 0},
                        .blob = blob,
                        .blob_len = blob_len};
    size_t len;
    uint8_t *f = mdx_encode(&r, &len);
    const char *why;
    if (f != NULL) {
        io_full(x, fd, f, len, true, deadline_us, &why);
        free(f);
    } else { /* out of memory (the only failure of a reply that fits): say so, allocating nothing */
        uint8_t small[128];
        len = mdx_encode_reply_into(IXL_ERR_NO_MEMORY, "the peer ran out of memory answering",
                                    small, sizeof(small));
        if (len > 0)
            io_full(x, fd, small, len, true, deadline_us, &why);
    }
}

/* Serves one request on t->fd. */
static void serve(struct mdx_thread *t)
{
    struct ixl_mdx *x = t->x;
    struct ixl_agent *agent = x->agent;
    uint64_t deadline = ixl_now_us() + (uint64_t)MDX_IO_MS * 1000u;
    uint8_t *body = NULL;
    struct mdx_msg m;
    const char *why = NULL;
    if (read_frame(x, t->fd, deadline, &body, &m, &why) != 0) {
        IXL_LOG_WARNING("agent %s listener: dropped a request: %s", agent->name, why);
        /* a garbage frame gets an answer saying so, one it had no memory for too; a stalled or
         * closed one does not */
        if (strncmp(why, "not an", 6) == 0 || strncmp(why, "malformed", 9) == 0)
            send_reply(x, t->fd, IXL_ERR_MALFORMED, why, NULL, 0, deadline);
        else if (strcmp(why, "out of memory") == 0)
            send_reply(x, t->fd, IXL_ERR_NO_MEMORY,
                       "the peer ran out of memory reading the request", NULL, 0, deadline);
        free(body);
        return;
    }
    char name[IXL_NAME_MAX], label[IXL_MDX_LABEL_MAX + 1], text[2 * IXL_NAME_MAX + 200];
    mdx_str_copy(m.name, name, sizeof(name));
    mdx_str_copy(m.label, label, sizeof(label));
    int st = IXL_OK;
    text[0] = '\0';
    void *out = NULL;
    size_t out_len = 0;
    switch (m.type) {
    case MDX_SEND:
        st = ixl_md_load(agent, m.blob, m.blob_len, NULL, 0);
        if (st != IXL_OK)
            snprintf(text, sizeof(text), "%s", ixl_agent_last_error(agent));
        break;
    case MDX_FETCH:
        if (strcmp(name, agent->name) != 0) {
            st = IXL_ERR_NOT_FOUND;
            snprintf(text, sizeof(text), "this listener serves agent '%s', not '%s'", agent->name,
                     name);
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
        if (st == IXL_OK && m.port != 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof(ss);
            char host[INET6_ADDRSTRLEN] = "";
            struct mdx_peer *p = sys_calloc(1, sizeof(*p));
            if (p == NULL) { /* the fetcher could not be told of invalidation: refuse */
                ixl_free(out);
                out = NULL;
                out_len = 0;
                st = IXL_ERR_NO_MEMORY;
                snprintf(text, sizeof(text), "out of memory (remembering the fetcher)");
            } else if (getpeername(t->fd, (struct sockaddr *)&ss, &sl) == 0 &&
                       getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0,
                                   NI_NUMERICHOST) == 0) {
                remember_peer(x, p, host, m.port);
            } else {
                free(p);
            }
        }
        break;
    case MDX_INVAL:
        st = ixl_remote_invalidate_inc(agent, name, m.incarnation);
        if (st != IXL_OK)
            snprintf(text, sizeof(text), "agent '%s' of that incarnation is not loaded here", name);
        break;
    default:
        st = IXL_ERR_MALFORMED;
        snprintf(text, sizeof(text), "a reply is not a request");
    }
    send_reply(x, t->fd, st, text, out, out_len, deadline);
    if (out != NULL)
        ixl_free(out);
    free(body);
}

static void *conn_main(void *arg)
{
    struct mdx_thread *t = arg;
    serve(t);
    thread_finish(t, true);
    return NULL;
}

static void *listener_main(void *arg)
{
    struct ixl_mdx *x = arg;
    while (!atomic_load(&x->stop)) {
        struct pollfd p[2] = {{x->lfd, POLLIN, 0}, {x->wakefd, POLLIN, 0}};
        if (sys_poll(p, 2, 1000) <= 0 || atomic_load(&x->stop))
            continue;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = sys_accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&x->lock);
        bool full = x->n_conns >= MDX_MAX_CONNS;
        if (!full)
            x->n_conns++;
        pthread_mutex_unlock(&x->lock);
        struct mdx_thread *t = full ? NULL : sys_calloc(1, sizeof(*t));
        if (t == NULL) {
            IXL_LOG_WARNING("agent %s listener: %s: connection closed", x->agent->name,
                            full ? "too many connections at once" : "out of memory");
            sys_close(fd);
            if (!full) {
                pthread_mutex_lock(&x->lock);
                x->n_conns--;
                pthread_mutex_unlock(&x->lock);
            }
            continue;
        }
        t->fd = fd;
        if (spawn(x, t, conn_main) != IXL_OK) {
            sys_close(fd);
            free(t);
            pthread_mutex_lock(&x->lock);
            x->n_conns--;
            pthread_mutex_unlock(&x->lock);
        }
    }
    return NULL;
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
    const char *call = "socket";
    int fd = sys_socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0)
        sys_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || (call = "bind", sys_bind(fd, res->ai_addr, res->ai_addrlen)) != 0 ||
        (call = "listen", sys_listen(fd, 512)) != 0) {
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
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (sys_getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        char eb[128]; /* the port is unknown (and ss unset): nobody could be told it */
        int e = errno;
        sys_close(fd);
        return IXL_AGENT_ERR(agent, IXL_ERR_SYSTEM, "listener: getsockname: %s",
                             ixl_errno_text(e, eb, sizeof(eb)));
    }
    x->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    x->lfd = fd;
    int te = sys_pthread_create(&x->lthread, NULL, listener_main, x);
    if (te != 0) {
        char eb[128];
        sys_close(fd);
        x->lfd = -1;
        return IXL_AGENT_ERR(agent, IXL_ERR_SYSTEM,
                             "cannot start the listener thread: pthread_create: %s",
                             ixl_errno_text(te, eb, sizeof(eb)));
    }
    x->listening = true;
    IXL_LOG_INF("agent %s: metadata listener on %s port %u", agent->name, addr, (unsigned)x->port);
    return IXL_OK;
}

/* ---- the client side ---------------------------------------------------------------------- */

/* One request to host:port and its reply: the reply's status (its text in msg, its blob in
 * *blob when blob is not NULL), or a local error with msg saying what failed. */
static int request(struct ixl_mdx *x, struct mdx_thread *t, const char *host, uint16_t port,
                   const struct mdx_msg *req, void **blob, size_t *blob_len, char *msg, size_t cap)
{
    uint64_t deadline = ixl_now_us() + (uint64_t)MDX_IO_MS * 1000u;
    size_t flen;
    uint8_t *frame = mdx_encode(req, &flen);
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
    const char *why = NULL;
    uint8_t *body = NULL;
    struct mdx_msg r;
    int rc;
    if (io_full(x, fd, frame, flen, true, deadline, &why) != 0 ||
        read_frame(x, fd, deadline, &body, &r, &why) != 0) {
        snprintf(msg, cap, "%s:%u: %s%s", host, (unsigned)port, why,
                 strncmp(why, "the connection closed", 21) == 0
                     ? " (the peer closed it without answering: its log says why)"
                     : "");
        rc = strcmp(why, "timed out") == 0       ? IXL_ERR_TIMEOUT
             : strcmp(why, "out of memory") == 0 ? IXL_ERR_NO_MEMORY
             : strncmp(why, "not an", 6) == 0 || strncmp(why, "malformed", 9) == 0
                 ? IXL_ERR_PROTOCOL
                 : IXL_ERR_REMOTE_DISCONNECT;
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
        uint64_t one = 1;
        ssize_t w = sys_write(x->wakefd, &one, sizeof(one));
        (void)w;
        pthread_join(x->lthread, NULL);
    }
    if (x->lfd >= 0)
        sys_close(x->lfd);
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
        rc = ixl_md_load(agent, blob, len, name, sizeof(name));
        if (rc == IXL_OK && strcmp(name, t->remote) != 0) {
            IXL_LOG_WARNING("agent %s: fetched metadata of '%s' names agent '%s'", agent->name,
                            t->remote, name);
        } else if (rc != IXL_OK) {
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
    thread_finish(t, false);
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
    x->lfd = -1;
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

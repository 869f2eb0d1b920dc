/* NET over TCP: the listener and the target's server threads; the initiator's connections with
 * their sender and receiver threads; notifications; the watchdog. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net.h"

/* ---- socket helpers -------------------------------------------------------------------------- */

/* How long a frame may go without any byte moving (target side), set per thread from the
 * engine's timeout_ms; 0 = no limit. */
static _Thread_local uint64_t idle_limit_ns;

/* Waits until fd is ready for events, the deadline (ns, 0 = none) passes, or nothing happened
 * for idle_limit_ns. */
/* The system call that last failed on this thread's dialing or sending, with its errno, for the
 * error text ("" when the peer, not a call, was the cause). */
static _Thread_local char cause[96];

static void set_cause(const char *call, int err)
{
    snprintf(cause, sizeof(cause), " (%s: %s)", call, strerror(err));
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline) {
            uint64_t now = net_now_ns();
            if (now >= deadline)
                return -1;
            uint64_t until = deadline;
            if (idle_limit_ns && now + idle_limit_ns < until)
                until = now + idle_limit_ns;
            ms = (int)((until - now + 999999u) / 1000000u);
        }
        struct pollfd p = {.fd = fd, .events = events};
        int n = net_sys()->poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            set_cause("poll", errno);
        if (n == 0 || errno != EINTR)
            return -1; /* past the deadline, or idle for too long */
    }
}

/* Receives exactly len bytes, or fails at EOF, on error, or when the deadline (0 = none)
 * passes. */
static int recv_until(int fd, void *buf, size_t len, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        if (deadline && wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
        ssize_t n = net_sys()->recv(fd, p, len, deadline ? MSG_DONTWAIT : MSG_WAITALL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return -1;
        } else if (errno != EINTR && !(errno == EAGAIN && deadline)) {
            set_cause("recv", errno);
            return -1; /* without a deadline, EAGAIN is SO_RCVTIMEO running out */
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
    return recv_until(fd, buf, len, 0);
}

static int discard_until(int fd, uint64_t len, uint64_t deadline)
{
    char scratch[16384];
    while (len > 0) {
        size_t n = len < sizeof(scratch) ? (size_t)len : sizeof(scratch);
        if (recv_until(fd, scratch, n, deadline) != 0)
            return -1;
        len -= n;
    }
    return 0;
}

static int discard(int fd, uint64_t len)
{
    return discard_until(fd, len, 0);
}

/* Writes every byte of iov[0..n), advancing over partial writes (iov is modified); fails when
 * the deadline (0 = none) passes. */
static int writev_until(int fd, struct iovec *iov, int n, uint64_t deadline)
{
    while (n > 0) {
        if (deadline && wait_fd(fd, POLLOUT, deadline) != 0)
            return -1;
        int batch = n < IOV_MAX ? n : IOV_MAX;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)batch};
        ssize_t w = net_sys()->sendmsg(fd, &mh, MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0));
        if (w < 0) {
            if (errno == EINTR || (errno == EAGAIN && deadline))
                continue;
            set_cause("sendmsg", errno);
            return -1; /* without a deadline, EAGAIN is SO_SNDTIMEO running out */
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0 && w > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int writev_all(int fd, struct iovec *iov, int n)
{
    return writev_until(fd, iov, n, 0);
}

/* The target side gives a frame timeout_ms plus 100 ns per byte (a floor of 10 MB/s): a peer
 * that stops or drips in the middle of a frame is cut, since the frame may hold the regions'
 * lock, and deregistration waits for it. */
#define SERVE_NS_PER_BYTE 100u
#define SERVE_MAX_FRAME ((uint64_t)1 << 30)

static uint64_t frame_deadline(const struct net_engine *e, uint64_t len)
{
    return net_now_ns() + e->timeout_ns + len * SERVE_NS_PER_BYTE;
}

static void tune(int fd)
{
    int one = 1;
    net_sys()->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- target side ------------------------------------------------------------------------------
 */

/* Responses are gathered and sent when the request stream has nothing more waiting, so a burst
 * of small frames costs a few system calls. Data of READ responses points into registered
 * memory: the regions' read lock is held until the batch is sent. */
#define OUT_MAX 128

struct out_batch {
    int fd;
    struct iovec iov[2 * OUT_MAX];
    uint8_t hdr[OUT_MAX][NET_HDR_BYTES];
    int n_iov, n_hdr;
    uint64_t bytes;
    int locked;
    struct net_engine *e;
};

static int out_flush(struct out_batch *o)
{
    int rc = 0;
    if (o->n_iov > 0)
        rc = writev_until(o->fd, o->iov, o->n_iov, frame_deadline(o->e, o->bytes));
    o->bytes = 0;
    o->n_iov = o->n_hdr = 0;
    if (o->locked) {
        pthread_rwlock_unlock(&o->e->regions_lock);
        o->locked = 0;
    }
    return rc;
}

static int out_add(struct out_batch *o, const struct net_hdr *h, const void *data, size_t len)
{
    if (o->n_hdr == OUT_MAX && out_flush(o) != 0)
        return -1;
    net_hdr_encode(h, o->hdr[o->n_hdr]);
    o->iov[o->n_iov++] = (struct iovec){o->hdr[o->n_hdr++], NET_HDR_BYTES};
    if (len > 0)
        o->iov[o->n_iov++] = (struct iovec){(void *)data, len};
    o->bytes += NET_HDR_BYTES + len;
    return 0;
}

static int input_pending(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* The region of key that holds [addr, addr + len), or NULL (regions_lock held). */
static struct net_region *check_range(struct net_engine *e, uint64_t key, uint64_t addr,
                                      uint64_t len)
{
    struct net_region *g = net_region_find(e, key);
    if (g == NULL || len == 0 || addr < g->addr || addr - g->addr > g->len ||
        len > g->len - (addr - g->addr))
        return NULL;
    return g;
}

void net_serve_fd(struct net_engine *e, int fd)
{
    uint8_t raw[NET_HDR_BYTES];
    struct net_hdr h;
    struct net_hello hello;
    uint8_t hb[NET_HELLO_MAX];
    /* A client has timeout_ms in all to say who it is, and may never stall a frame longer. */
    idle_limit_ns = e->timeout_ns;
    uint64_t hello_by = net_now_ns() + e->timeout_ns;
    if (recv_until(fd, raw, sizeof(raw), hello_by) != 0 || net_hdr_decode(raw, &h) != 0 ||
        h.op != NET_HELLO || recv_until(fd, hb, (size_t)h.len, hello_by) != 0 ||
        net_hello_decode(hb, (size_t)h.len, &hello) != 0)
        return;
    struct net_hdr ack = {.op = NET_HELLO_ACK, .req = h.req};
    if (hello.to_instance != e->instance)
        ack.status = IXL_ERR_STALE; /* metadata of an earlier instance of this agent */
    net_hdr_encode(&ack, raw);
    struct iovec ackv = {raw, sizeof(raw)};
    if (writev_until(fd, &ackv, 1, hello_by) != 0 || ack.status != 0)
        return;
    tune(fd);

    struct out_batch *o = net_sys()->calloc(1, sizeof(*o));
    if (o == NULL)
        return;
    o->fd = fd;
    o->e = e;
    for (;;) {
        if (o->n_iov > 0 && !input_pending(fd) && out_flush(o) != 0)
            break;
        /* Idle between frames for as long as the peer likes; within a frame, a deadline. */
        if (wait_fd(fd, POLLIN, 0) != 0 ||
            recv_until(fd, raw, sizeof(raw), frame_deadline(e, 0)) != 0 ||
            net_hdr_decode(raw, &h) != 0 ||
            ((h.op == NET_WRITE || h.op == NET_NOTIF) && h.len > SERVE_MAX_FRAME)) {
            out_flush(o); /* answers to the frames before a bad one still go */
            break;
        }
        uint64_t by = frame_deadline(e, h.op == NET_WRITE || h.op == NET_NOTIF ? h.len : 0);
        struct net_hdr r = {.req = h.req, .chunk = h.chunk};
        if (h.op == NET_WRITE) {
            r.op = NET_WRITE_ACK;
            if (o->locked) { /* a write must not wait behind our own read lock */
                if (out_flush(o) != 0)
                    break;
            }
            pthread_rwlock_rdlock(&e->regions_lock);
            struct net_region *g = check_range(e, h.key, h.addr, h.len);
            int rc;
            if (g != NULL) {
                rc = recv_until(fd, (void *)(uintptr_t)h.addr, (size_t)h.len, by);
                pthread_rwlock_unlock(&e->regions_lock);
            } else {
                pthread_rwlock_unlock(&e->regions_lock);
                r.status = IXL_ERR_REMOTE_REFUSED;
                rc = discard_until(fd, h.len, by);
            }
            if (rc != 0 || out_add(o, &r, NULL, 0) != 0)
                break;
        } else if (h.op == NET_READ) {
            r.op = NET_READ_DATA;
            if (!o->locked) {
                pthread_rwlock_rdlock(&e->regions_lock);
                o->locked = 1;
            }
            struct net_region *g = check_range(e, h.key, h.addr, h.len);
            if (g == NULL)
                r.status = IXL_ERR_REMOTE_REFUSED;
            else
                r.len = h.len;
            if (out_add(o, &r, g ? (void *)(uintptr_t)h.addr : NULL, g ? (size_t)h.len : 0) != 0)
                break;
        } else if (h.op == NET_NOTIF) {
            if (h.len > e->notif_max)
                break; /* a peer that breaks the documented maximum is cut off */
            void *msg = net_sys()->malloc(h.len ? (size_t)h.len : 1);
            if (msg == NULL || recv_until(fd, msg, (size_t)h.len, by) != 0) {
                free(msg);
                break;
            }
            net_notif_push(e, hello.name, msg, (size_t)h.len);
            free(msg);
        } else if (h.op == NET_PING) {
            r.op = NET_PONG;
            if (out_add(o, &r, NULL, 0) != 0)
                break;
        } else {
            out_flush(o);
            break; /* a frame a target never receives */
        }
    }
    if (o->locked) {
        pthread_rwlock_unlock(&e->regions_lock);
        o->locked = 0;
    }
    free(o);
}

static void *server_main(void *arg)
{
    struct net_server_conn *s = arg;
    net_serve_fd(s->e, s->fd);
    shutdown(s->fd, SHUT_RDWR);
    atomic_store(&s->done, 1);
    return NULL;
}

/* Joins server threads that finished (e->lock held). */
static void reap_servers(struct net_engine *e, int all)
{
    struct net_server_conn **pp = &e->servers;
    while (*pp) {
        struct net_server_conn *s = *pp;
        if (all || atomic_load(&s->done)) {
            *pp = s->next;
            if (all)
                shutdown(s->fd, SHUT_RDWR);
            pthread_join(s->thread, NULL);
            net_sys()->close(s->fd);
            free(s);
        } else {
            pp = &s->next;
        }
    }
}

static void *acceptor_main(void *arg)
{
    struct net_engine *e = arg;
    for (;;) {
        int fd = net_sys()->accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (atomic_load(&e->stopping)) {
            if (fd >= 0)
                net_sys()->close(fd);
            break;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
                if (errno == EMFILE || errno == ENFILE)
                    usleep(10000);
                continue;
            }
            break;
        }
        struct net_server_conn *s = net_sys()->calloc(1, sizeof(*s));
        if (s == NULL) {
            net_sys()->close(fd);
            continue;
        }
        s->e = e;
        s->fd = fd;
        pthread_mutex_lock(&e->lock);
        reap_servers(e, 0);
        if (net_sys()->pthread_create(&s->thread, NULL, server_main, s) != 0) {
            pthread_mutex_unlock(&e->lock);
            net_sys()->close(fd);
            free(s);
            continue;
        }
        s->next = e->servers;
        e->servers = s;
        pthread_mutex_unlock(&e->lock);
    }
    return NULL;
}

int net_listen_start(struct net_engine *e)
{
    int fd = net_sys()->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return net_error(e, IXL_ERR_SYSTEM, "NET: socket: %s", strerror(errno));
    int one = 1;
    net_sys()->setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->port)};
    inet_pton(AF_INET, e->listen_addr, &sa.sin_addr);
    const char *call = "bind";
    if (net_sys()->bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        (call = "listen", net_sys()->listen(fd, 512)) != 0) {
        int err = errno;
        net_sys()->close(fd);
        return net_error(e, IXL_ERR_SYSTEM, "NET: cannot listen on %s:%u: %s: %s", e->listen_addr,
                         e->port, call, strerror(err));
    }
    socklen_t sl = sizeof(sa);
    if (net_sys()->getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int err = errno; /* the port bound is unknown: peers could not be told */
        net_sys()->close(fd);
        return net_error(e, IXL_ERR_SYSTEM, "NET: getsockname of its listener: %s", strerror(err));
    }
    e->port = ntohs(sa.sin_port);
    e->listen_fd = fd;
    int te = net_sys()->pthread_create(&e->acceptor, NULL, acceptor_main, e);
    if (te != 0)
        return net_error(e, IXL_ERR_SYSTEM,
                         "NET: cannot start its acceptor thread: pthread_create: %s", strerror(te));
    e->acceptor_started = true;
    return IXL_OK;
}

void net_listen_stop(struct net_engine *e)
{
    if (e->listen_fd >= 0) {
        shutdown(e->listen_fd, SHUT_RDWR);
        if (e->acceptor_started)
            pthread_join(e->acceptor, NULL);
        net_sys()->close(e->listen_fd);
        e->listen_fd = -1;
    }
    pthread_mutex_lock(&e->lock);
    reap_servers(e, 1);
    pthread_mutex_unlock(&e->lock);
}

/* ---- initiator side: connections ----------------------------------------------------------- */

/* port and addr: the peer's, as net_peer_connect read them under p->lock. */
static int connect_one(uint16_t port, uint32_t addr, int timeout_ms)
{
    int fd = net_sys()->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        set_cause("socket", errno);
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = addr;
    int rc = net_sys()->connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    if (rc != 0 && errno != EINPROGRESS)
        set_cause("connect", errno);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof(err);
        int n = net_sys()->poll(&pfd, 1, timeout_ms);
        if (n < 0)
            set_cause("poll", errno);
        else if (n == 0)
            set_cause("connect", ETIMEDOUT);
        else if (net_sys()->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            set_cause("getsockopt", errno);
        else if (err != 0)
            set_cause("connect", err);
        else
            rc = 0;
    }
    /* Blocking from here on; a failed F_GETFL must not turn into flags set at random. */
    int fl = rc == 0 ? net_sys()->fcntl(fd, F_GETFL, 0) : -1;
    if (rc == 0 && (fl < 0 || net_sys()->fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)) {
        set_cause("fcntl", errno);
        rc = -1;
    }
    if (rc != 0) {
        net_sys()->close(fd);
        return -1;
    }
    return fd;
}

/* Says who we are and waits for the target's answer until the deadline. IXL_ERR_TIMEOUT when
 * it does not answer (a stopped process still gets connections accepted by its kernel). */
static int hello(struct net_peer *p, uint64_t instance, int fd, uint64_t deadline)
{
    struct net_engine *e = p->e;
    struct net_hello hl = {.from_instance = e->instance, .to_instance = instance};
    snprintf(hl.name, sizeof(hl.name), "%s", e->name);
    uint8_t payload[NET_HELLO_MAX], raw[NET_HDR_BYTES];
    size_t plen = net_hello_encode(&hl, payload, sizeof(payload));
    struct net_hdr h = {.op = NET_HELLO, .len = plen};
    net_hdr_encode(&h, raw);
    struct iovec iov[2] = {{raw, sizeof(raw)}, {payload, plen}};
    if (writev_until(fd, iov, 2, deadline) != 0 || recv_until(fd, raw, sizeof(raw), deadline) != 0)
        return net_now_ns() >= deadline ? IXL_ERR_TIMEOUT : IXL_ERR_REMOTE_DISCONNECT;
    if (net_hdr_decode(raw, &h) != 0 || h.op != NET_HELLO_ACK)
        return IXL_ERR_REMOTE_DISCONNECT;
    if (h.status != 0)
        return h.status == IXL_ERR_STALE ? IXL_ERR_REMOTE_DISCONNECT : IXL_ERR_REMOTE_REFUSED;
    return IXL_OK;
}

/* Shuts c down (once). The caller keeps c alive and its descriptor open: c's sender or
 * receiver (net_peer_bury joins them first), a user reference (c->users), or p->lock held with
 * c among p->conns or not yet published. */
static void conn_fail(struct net_conn *c)
{
    if (atomic_exchange(&c->dead, 1) == 0)
        shutdown(c->fd, SHUT_RDWR);
}

static void peer_teardown(struct net_peer *p, int status, const struct net_conn *only,
                          uint64_t gen);

/* c broke: shuts it down and tears down its peer's connections, unless a teardown already
 * moved c to the grave; the connections made since then belong to a newer generation that
 * c's failure says nothing about (that teardown failed c's requests already). Same lifetime
 * rule as conn_fail: the caller keeps c alive until this returns. */
static void conn_broke(struct net_conn *c)
{
    conn_fail(c);
    peer_teardown(c->peer, IXL_ERR_REMOTE_DISCONNECT, c, UINT64_MAX);
}

#define SEND_BATCH 64
#define SEND_BYTES (8u << 20)

static void *sender_main(void *arg)
{
    struct net_conn *c = arg;
    struct net_peer *p = c->peer;
    struct net_engine *e = p->e;
    struct net_item items[SEND_BATCH];
    uint8_t hdrs[SEND_BATCH][NET_HDR_BYTES];
    struct iovec iov[2 * SEND_BATCH];
    struct net_req *busy[SEND_BATCH];
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->q_len == 0 && !p->closing && !atomic_load(&c->dead))
            pthread_cond_wait(&p->cond, &p->lock);
        if (p->closing || atomic_load(&c->dead)) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        int n = 0;
        uint64_t bytes = 0;
        while (p->q_len > 0 && n < SEND_BATCH && bytes < SEND_BYTES) {
            items[n] = p->q[p->q_head];
            p->q_head = (p->q_head + 1) % p->q_cap;
            p->q_len--;
            n++;
            bytes += 64 * 1024; /* a rough cost per frame keeps batches balanced */
        }
        pthread_mutex_unlock(&p->lock);

        int n_iov = 0, n_busy = 0;
        for (int i = 0; i < n; i++) {
            struct net_req *r = net_req_get_busy(e, items[i].serial);
            if (r == NULL)
                continue; /* released or failed meanwhile */
            busy[n_busy++] = r;
            const struct net_chunk *ch = &r->chunks[items[i].chunk];
            struct net_hdr h = {.op = r->op == IXL_OP_WRITE ? NET_WRITE : NET_READ,
                                .chunk = items[i].chunk,
                                .req = items[i].serial,
                                .addr = ch->raddr,
                                .len = ch->len,
                                .key = ch->key};
            net_hdr_encode(&h, hdrs[i]);
            iov[n_iov++] = (struct iovec){hdrs[i], NET_HDR_BYTES};
            if (r->op == IXL_OP_WRITE)
                iov[n_iov++] = (struct iovec){(void *)(uintptr_t)ch->laddr, (size_t)ch->len};
        }
        int rc = 0;
        if (n_iov > 0) {
            /* Silence is counted from the moment answers are owed, not from the last answer
             * of an earlier burst. */
            if (atomic_fetch_add(&c->outstanding, (uint64_t)n_busy) == 0)
                atomic_store(&c->last_rx_ns, net_now_ns());
            pthread_mutex_lock(&c->send_lock);
            rc = writev_all(c->fd, iov, n_iov);
            pthread_mutex_unlock(&c->send_lock);
            atomic_store(&c->last_tx_ns, net_now_ns());
        }
        for (int i = 0; i < n_busy; i++)
            net_req_unbusy(e, busy[i]);
        if (rc != 0) {
            conn_broke(c);
            break;
        }
    }
    return NULL;
}

static void *receiver_main(void *arg)
{
    struct net_conn *c = arg;
    struct net_peer *p = c->peer;
    struct net_engine *e = p->e;
    uint8_t raw[NET_HDR_BYTES];
    struct net_hdr h;
    for (;;) {
        if (recv_all(c->fd, raw, sizeof(raw)) != 0 || net_hdr_decode(raw, &h) != 0)
            break;
        atomic_store(&c->last_rx_ns, net_now_ns());
        if (h.op == NET_PONG)
            continue;
        if (h.op != NET_WRITE_ACK && h.op != NET_READ_DATA)
            break; /* protocol error */
        if (atomic_load(&c->outstanding) == 0)
            break; /* an answer nobody asked for */
        atomic_fetch_sub(&c->outstanding, 1);
        int status = h.status;
        /* The answer must match a frame of a live request sent to this peer: the right op,
         * an unanswered frame, the length asked for. Answers of released requests are
         * drained (bounded by the largest frame this engine sends). */
        int verdict = net_req_answer(e, p, &h);
        if (verdict < 0)
            break; /* protocol error: the peer answered something we never asked */
        if (h.op == NET_READ_DATA && h.len > 0) {
            struct net_req *r = verdict == 1 ? net_req_get_busy(e, h.req) : NULL;
            int rc;
            if (r != NULL && status == 0)
                rc = recv_all(c->fd, (void *)(uintptr_t)r->chunks[h.chunk].laddr, (size_t)h.len);
            else
                rc = discard(c->fd, h.len);
            if (r != NULL)
                net_req_unbusy(e, r);
            if (rc != 0)
                break;
            atomic_store(&c->last_rx_ns, net_now_ns());
        }
        if (verdict == 0)
            continue; /* a released request's answer */
        net_req_chunk_done(e, h.req, status);
    }
    conn_broke(c);
    return NULL;
}

/* Joins the threads of torn-down connections (never from one of them). */
void net_peer_bury(struct net_peer *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->n_grave;
    struct net_conn **g = p->grave;
    p->grave = NULL;
    p->n_grave = p->cap_grave = 0;
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < n; i++) {
        if (g[i]->threads) {
            pthread_join(g[i]->sender, NULL);
            pthread_join(g[i]->receiver, NULL);
        }
        /* A notification being sent on it finishes first (its send is bounded). */
        pthread_mutex_lock(&p->lock);
        while (g[i]->users > 0)
            pthread_cond_wait(&p->cond, &p->lock);
        pthread_mutex_unlock(&p->lock);
        net_sys()->close(g[i]->fd);
        pthread_mutex_destroy(&g[i]->send_lock);
        free(g[i]);
    }
    free(g);
}

int net_peer_connect(struct net_peer *p)
{
    struct net_engine *e = p->e;
    pthread_mutex_lock(&p->lock);
    while (p->connecting)
        pthread_cond_wait(&p->cond, &p->lock);
    if (p->n_conns > 0) {
        pthread_mutex_unlock(&p->lock);
        return IXL_OK;
    }
    if (!p->loaded || atomic_load(&e->stopping)) {
        pthread_mutex_unlock(&p->lock);
        return net_error(e, IXL_ERR_REMOTE_DISCONNECT, "NET: '%s' is disconnected", p->name);
    }
    p->connecting = 1;
    p->closing = 0;
    cause[0] = '\0';
    uint32_t addrs[NET_MAX_ADDRS];
    int n_addrs = p->n_addrs;
    memcpy(addrs, p->addrs, sizeof(addrs));
    bool same = p->same_host;
    /* A reload (net_load_remote_conn_info) rewrites these under p->lock meanwhile. */
    uint16_t port = p->port;
    uint64_t instance = p->instance;
    pthread_mutex_unlock(&p->lock);
    net_peer_bury(p);

    if (same) { /* the loopback address first: no trip through a real interface */
        for (int i = 1; i < n_addrs; i++) {
            if (addrs[i] == htonl(INADDR_LOOPBACK)) {
                uint32_t t = addrs[0];
                addrs[0] = addrs[i];
                addrs[i] = t;
            }
        }
    }
    /* One deadline for the whole attempt, whatever the number of addresses and connections. */
    uint64_t deadline = net_now_ns() + e->timeout_ns;
    struct net_conn *made[NET_MAX_CONNS];
    int n_made = 0, rc = IXL_OK;
    uint32_t good = 0;
    int have_good = 0;
    for (int k = 0; k < e->n_conns && rc == IXL_OK; k++) {
        int fd = -1;
        rc = IXL_ERR_UNREACHABLE;
        for (int i = 0; i < n_addrs; i++) {
            uint32_t a = have_good ? good : addrs[i];
            uint64_t now = net_now_ns();
            if (now >= deadline)
                break;
            fd = connect_one(port, a, (int)((deadline - now + 999999u) / 1000000u));
            if (fd >= 0) {
                rc = hello(p, instance, fd, deadline);
                if (rc == IXL_OK) {
                    good = a;
                    have_good = 1;
                    break;
                }
                net_sys()->close(fd);
                fd = -1;
                if (rc == IXL_ERR_REMOTE_REFUSED || rc == IXL_ERR_TIMEOUT)
                    break; /* reached the peer, which refused or does not answer */
            }
            if (have_good)
                break;
        }
        if (fd < 0)
            break;
        tune(fd);
        struct net_conn *c = net_sys()->calloc(1, sizeof(*c));
        if (c == NULL) {
            set_cause("calloc", ENOMEM);
            net_sys()->close(fd);
            rc = IXL_ERR_NO_MEMORY;
            break;
        }
        c->peer = p;
        c->fd = fd;
        c->index = k;
        pthread_mutex_init(&c->send_lock, NULL);
        atomic_store(&c->last_rx_ns, net_now_ns());
        atomic_store(&c->last_tx_ns, net_now_ns());
        made[n_made++] = c;
    }
    pthread_mutex_lock(&p->lock);
    if (rc == IXL_OK && (p->closing || !p->loaded || atomic_load(&e->stopping)))
        rc = IXL_ERR_REMOTE_DISCONNECT; /* torn down (destroy, disconnect) while dialing */
    if (rc == IXL_OK && p->cap_grave < p->n_grave + p->n_conns + n_made) {
        /* Room in the grave now, so that a teardown (from any thread) never allocates. */
        int cap = p->n_grave + p->n_conns + n_made + 8;
        struct net_conn **g = net_sys()->realloc(p->grave, (size_t)cap * sizeof(*g));
        if (g == NULL) {
            set_cause("realloc", ENOMEM);
            rc = IXL_ERR_NO_MEMORY;
        } else {
            p->grave = g;
            p->cap_grave = cap;
        }
    }
    if (rc == IXL_OK) {
        for (int i = 0; i < n_made; i++) {
            struct net_conn *c = made[i];
            int te = net_sys()->pthread_create(&c->sender, NULL, sender_main, c);
            if (te == 0) {
                te = net_sys()->pthread_create(&c->receiver, NULL, receiver_main, c);
                if (te == 0) {
                    c->threads = true;
                } else {
                    set_cause("pthread_create", te);
                    conn_fail(c);
                    p->closing = 1;
                    pthread_cond_broadcast(&p->cond);
                    pthread_mutex_unlock(&p->lock);
                    pthread_join(c->sender, NULL);
                    pthread_mutex_lock(&p->lock);
                    p->closing = 0;
                    rc = IXL_ERR_SYSTEM;
                }
            } else {
                set_cause("pthread_create", te);
                rc = IXL_ERR_SYSTEM;
            }
            p->conns[p->n_conns++] = c;
        }
    } else {
        for (int i = 0; i < n_made; i++) {
            net_sys()->close(made[i]->fd);
            pthread_mutex_destroy(&made[i]->send_lock);
            free(made[i]);
        }
    }
    p->connecting = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (rc != IXL_OK) {
        net_peer_teardown(p, IXL_ERR_REMOTE_DISCONNECT);
        char addr[INET_ADDRSTRLEN] = "?";
        if (n_addrs > 0)
            inet_ntop(AF_INET, &addrs[0], addr, sizeof(addr));
        /* A peer that cannot be reached is, to its requests, a peer that went away. */
        return net_error(
            e, rc == IXL_ERR_NO_MEMORY || rc == IXL_ERR_SYSTEM ? rc : IXL_ERR_REMOTE_DISCONNECT,
            "NET cannot connect to '%s' (%s:%u and %d other address(es)): %s%s", p->name, addr,
            port, n_addrs - 1,
            rc == IXL_ERR_REMOTE_DISCONNECT ? "it does not answer as the instance "
                                              "its metadata names"
            : rc == IXL_ERR_REMOTE_REFUSED  ? "it refused the connection"
            : rc == IXL_ERR_TIMEOUT         ? "it accepted but did not answer"
                                            : "no answer",
            cause);
    }
    return IXL_OK;
}

void net_peer_teardown(struct net_peer *p, int status)
{
    peer_teardown(p, status, NULL, UINT64_MAX);
}

/* Tears p's connections down; with only set, only while only is one of them, and with gen
 * other than UINT64_MAX, only while they are still of generation gen (both checked under
 * p->lock, so that a reconnect in between cannot make the teardown hit newer connections). */
static void peer_teardown(struct net_peer *p, int status, const struct net_conn *only, uint64_t gen)
{
    struct net_engine *e = p->e;
    pthread_mutex_lock(&p->lock);
    int current = gen == UINT64_MAX || gen == p->gen;
    if (current && only != NULL) {
        current = 0;
        for (int i = 0; i < p->n_conns; i++)
            current |= p->conns[i] == only;
    }
    if (!current) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    uint64_t torn = p->gen++; /* requests enqueued from now on belong to new connections */
    for (int i = 0; i < p->n_conns; i++) {
        conn_fail(p->conns[i]);
        if (p->n_grave == p->cap_grave) {
            int cap = p->cap_grave ? p->cap_grave * 2 : 8;
            struct net_conn **g = net_sys()->realloc(p->grave, (size_t)cap * sizeof(*g));
            if (g == NULL)
                continue; /* leaks the connection rather than joining from a worker */
            p->grave = g;
            p->cap_grave = cap;
        }
        p->grave[p->n_grave++] = p->conns[i];
    }
    p->n_conns = 0;
    p->q_len = 0; /* queued frames belong to requests failed below */
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    net_fail_peer_reqs(e, p, status, torn);
}

int net_peer_enqueue(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t n)
{
    pthread_mutex_lock(&p->lock);
    if (p->n_conns == 0) {
        pthread_mutex_unlock(&p->lock);
        return IXL_ERR_REMOTE_DISCONNECT;
    }
    /* The generation of the connections the frames go to: a teardown of older ones does not
     * fail this post. (p->lock -> reqs_lock: reqs_lock never waits for a peer's lock.) */
    pthread_mutex_lock(&p->e->reqs_lock);
    r->gen = p->gen;
    pthread_mutex_unlock(&p->e->reqs_lock);
    if (p->q_len + n > p->q_cap) {
        size_t cap = p->q_cap ? p->q_cap : 1024;
        while (cap < p->q_len + n)
            cap *= 2;
        struct net_item *q = net_sys()->malloc(cap * sizeof(*q));
        if (q == NULL) {
            pthread_mutex_unlock(&p->lock);
            return IXL_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < p->q_len; i++)
            q[i] = p->q[(p->q_head + i) % p->q_cap];
        free(p->q);
        p->q = q;
        p->q_cap = cap;
        p->q_head = 0;
    }
    for (uint32_t i = 0; i < n; i++)
        p->q[(p->q_head + p->q_len++) % p->q_cap] = (struct net_item){serial, i, NI_FRAME};
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return IXL_OK;
}

int net_send_notif(struct net_peer *p, const void *msg, size_t len)
{
    int rc = net_peer_connect(p);
    if (rc != IXL_OK)
        return rc;
    pthread_mutex_lock(&p->lock);
    struct net_conn *c = p->n_conns > 0 ? p->conns[0] : NULL;
    if (c != NULL)
        c->users++;                  /* keeps it from being freed by a teardown meanwhile */
    size_t notif_max = p->notif_max; /* a reload rewrites it under p->lock */
    pthread_mutex_unlock(&p->lock);
    if (c == NULL)
        return IXL_ERR_REMOTE_DISCONNECT;
    if (len > notif_max) {
        pthread_mutex_lock(&p->lock);
        c->users--;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
        return net_error(p->e, IXL_ERR_NOTIF_TOO_LARGE,
                         "NET: '%s' accepts notifications of at most %zu bytes, not %zu", p->name,
                         notif_max, len);
    }
    uint8_t raw[NET_HDR_BYTES];
    struct net_hdr h = {.op = NET_NOTIF, .len = len};
    net_hdr_encode(&h, raw);
    struct iovec iov[2] = {{raw, sizeof(raw)}, {(void *)msg, len}};
    /* Bounded: a stopped peer whose socket buffer is full must not hold the caller. */
    pthread_mutex_lock(&c->send_lock);
    cause[0] = '\0';
    rc = writev_until(c->fd, iov, len ? 2 : 1, net_now_ns() + p->e->timeout_ns);
    pthread_mutex_unlock(&c->send_lock);
    /* Still a user of c: once users drops, a reconnect's net_peer_bury may close c's
     * descriptor (whose number the next socket may get) and free c. */
    if (rc != 0)
        conn_broke(c);
    pthread_mutex_lock(&p->lock);
    c->users--;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (rc != 0) {
        return net_error(p->e, IXL_ERR_REMOTE_DISCONNECT,
                         "NET: the connection to '%s' broke while sending a notification%s",
                         p->name, cause);
    }
    return IXL_OK;
}

/* ---- watchdog ----------------------------------------------------------------------------------
 */

void *net_watchdog_main(void *arg)
{
    struct net_engine *e = arg;
    while (!atomic_load(&e->stopping)) {
        struct timespec ts = {(time_t)(e->heartbeat_ns / 1000000000u),
                              (long)(e->heartbeat_ns % 1000000000u)};
        /* Sleep in short steps so destroy does not wait a whole period. */
        uint64_t slept = 0;
        while (slept < e->heartbeat_ns && !atomic_load(&e->stopping)) {
            struct timespec step = {0, 5000000};
            nanosleep(&step, NULL);
            slept += 5000000;
        }
        (void)ts;
        uint64_t now = net_now_ns();
        struct net_peer *dead[64];
        uint64_t dead_gen[64];
        int n_dead = 0;
        pthread_mutex_lock(&e->lock);
        reap_servers(e, 0);
        for (struct net_peer *p = e->peers; p; p = p->next) {
            pthread_mutex_lock(&p->lock);
            int silent = 0;
            for (int i = 0; i < p->n_conns; i++) {
                struct net_conn *c = p->conns[i];
                if (atomic_load(&c->outstanding) == 0)
                    continue;
                uint64_t rx = atomic_load(&c->last_rx_ns);
                if (now > rx && now - rx > e->timeout_ns) {
                    silent = 1;
                    break;
                }
                /* Ask for a sign of life when the answers are slow to come. */
                uint64_t tx = atomic_load(&c->last_tx_ns);
                int queued = 0, sndbuf = 0;
                socklen_t sl = sizeof(sndbuf);
                int room = ioctl(c->fd, SIOCOUTQ, &queued) == 0 &&
                           net_sys()->getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl) == 0 &&
                           sndbuf - queued >= 4 * NET_HDR_BYTES;
                /* Only with room for the whole frame: a partial ping would break the stream. */
                if (room && now - rx > e->heartbeat_ns && now - tx > e->heartbeat_ns &&
                    pthread_mutex_trylock(&c->send_lock) == 0) {
                    uint8_t raw[NET_HDR_BYTES];
                    struct net_hdr h = {.op = NET_PING};
                    net_hdr_encode(&h, raw);
                    if (net_sys()->send(c->fd, raw, sizeof(raw), MSG_NOSIGNAL | MSG_DONTWAIT) ==
                        (ssize_t)sizeof(raw))
                        atomic_store(&c->last_tx_ns, now);
                    pthread_mutex_unlock(&c->send_lock);
                }
            }
            uint64_t gen = p->gen;
            pthread_mutex_unlock(&p->lock);
            if (silent && n_dead < 64) {
                dead_gen[n_dead] = gen;
                dead[n_dead++] = p;
            }
        }
        pthread_mutex_unlock(&e->lock);
        for (int i = 0; i < n_dead; i++) {
            e->host->log(e->host->ctx, IXL_LOG_WARN,
                         "NET: '%s' was silent for more than %llu ms with work outstanding: "
                         "disconnecting",
                         dead[i]->name, (unsigned long long)(e->timeout_ns / 1000000u));
            /* Not the connections a reconnect made meanwhile. */
            peer_teardown(dead[i], IXL_ERR_REMOTE_DISCONNECT, NULL, dead_gen[i]);
        }
    }
    return NULL;
}

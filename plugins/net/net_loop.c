/* NET's event loops: every TCP connection of an engine, both directions, on io_threads epoll
 * loops. A connection belongs to one loop for its life; only that loop's thread closes its
 * socket, and reads and writes it but for two exceptions under the connection's locks: a
 * poster sending a small request's one frame (txlock) and a caller reading the WRITE_ACKs at
 * the head of the stream (rxlock, net_tcp_watch); the rest of its rx/tx state is the loop's. Other
 * threads reach it through its peer (under p->lock) and only ever put it on a list of its loop
 * (ready: its peer queued frames; reap: torn down) and wake the loop through its eventfd.
 *
 * Why epoll and not io_uring: a connection here is a byte stream parsed in place, with bodies
 * received straight into user or registered memory whose lifetime a release or deregistration
 * ends at any moment; readiness lets the loop look the memory up again right before each
 * recv (under a reference held for that one non-blocking call) instead of handing a buffer to
 * the kernel for an unbounded time, and it needs no per-connection ring memory. On this
 * machine's kernel (6.1) epoll costs one epoll_wait per batch of ready connections.
 *
 * Memory per connection is bounded: the struct, a tx array of at most TX_SOFT frames plus one
 * scratch buffer's worth of answers, and a HELLO or NOTIF body (at most notif_max); the
 * receive scratch buffer (SCRATCH_BYTES) is one per loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "../common/ixl_plugin_util.h"

#define SCRATCH_BYTES (64u << 10)
#define DIRECT_MIN (16u << 10) /* a body with this much left is received straight into place */
#define RX_BUDGET (4u << 20)   /* bytes one connection reads per wakeup before the others */
#define TX_SOFT 256            /* answers queued on an accepted connection: stop reading */
#define PULL_FRAMES 64         /* frames a connection takes from its peer's queue at once */
#define PULL_BYTES (8u << 20)  /* ... or this many bytes of them */
/* A connection takes frames from its peer's queue only while the bytes it owes answers for
 * stay under this (its first frame always goes), so that one request's frames spread over the
 * peer's connections: without it the first connection to wake took up to PULL_FRAMES frames
 * at every pull (its READ headers left at once, so it pulled again), and a 64 MiB request in
 * 1 MiB frames went over one connection (the H200 machine: 3.9 GB/s against 11.4 for four
 * raw connections). */
#define PULL_WINDOW (8u << 20)
#define PULL_COST_MIN (64u << 10) /* a small frame's cost, which keeps batches balanced */
#define SERVE_MAX_FRAME ((uint64_t)1 << 30)
#define MAX_EVENTS 256
/* A request of one frame up to this many bytes may be sent by the posting thread itself
 * (net_peer_submit) when a connection to the peer is idle: no hop to a loop thread. */
#define INLINE_SEND_BYTES (1u << 20)
#define ACCEPTS_PER_EVENT 64

enum body_mode { BODY_DISCARD, BODY_PLACE_W, BODY_PLACE_R, BODY_BUF, BODY_AUTH, BODY_STAGE };

#define AUTH_LABEL "ixl-net-hello-v1" /* the domain of the handshake's MACs */

static void *const LISTEN_TAG = (void *)&LISTEN_TAG; /* epoll data of the listener */

/* ---- small helpers ------------------------------------------------------------------------ */

static void loop_wake(struct net_loop *l)
{
    if (atomic_exchange(&l->woken, 1) == 0) {
        uint64_t one = 1;
        if (net_sys()->write(l->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            atomic_store(&l->woken, 0); /* the next wake tries again; the tick takes it anyway */
    }
}

/* c->rxlock: adaptive (it spins a little before it sleeps: conn_close waits for a caller's
 * look at the socket, which takes microseconds). */
static void rxlock_init(struct net_conn *c)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&c->rxlock, &a);
    pthread_mutexattr_destroy(&a);
}

static void set_cause(struct net_conn *c, const char *call, int err)
{
    snprintf(c->cause, sizeof(c->cause), " (%s: %s)", call, strerror(err));
}

static int set_events(struct net_conn *c, uint32_t ev)
{
    if (c->events == ev)
        return 0;
    pthread_mutex_lock(&c->evlock); /* a polling caller may have parked EPOLLIN (rx_park) */
    struct epoll_event x = {.events = atomic_load(&c->parked) ? ev & ~(uint32_t)EPOLLIN : ev,
                            .data.ptr = c};
    int rc = net_sys()->epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &x);
    int err = errno;
    if (rc == 0)
        c->events = ev;
    pthread_mutex_unlock(&c->evlock);
    if (rc != 0) {
        set_cause(c, "epoll_ctl", err);
        return -1;
    }
    return 0;
}

/* A polling caller's answer comes after this long at most, or the loop reads c again. */
#define NET_PARK_NS 1000000u

/* EPOLLIN of c out of (park) or back into its loop's epoll set (rxlock held with c not
 * closing, or the loop thread). A failed epoll_ctl leaves it as it was. */
static void rx_park(struct net_conn *c, bool park)
{
    pthread_mutex_lock(&c->evlock);
    if ((atomic_load(&c->parked) != 0) != park && (!park || (c->events & EPOLLIN))) {
        struct epoll_event x = {.events = park ? c->events & ~(uint32_t)EPOLLIN : c->events,
                                .data.ptr = c};
        if (net_sys()->epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &x) == 0) {
            if (park)
                atomic_store(&c->parked_at, net_now_ns());
            atomic_store(&c->parked, park);
        }
    }
    pthread_mutex_unlock(&c->evlock);
}

static bool addr_is_loopback(uint32_t s_addr)
{
    return (ntohl(s_addr) >> 24) == 127;
}

/* A WARN at most once a second from any loop (refused connections come in floods). */
static void refuse_log(struct net_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void refuse_log(struct net_engine *e, const char *fmt, ...)
{
    uint64_t now = net_now_ns();
    uint64_t last = atomic_load(&e->last_refuse_log);
    if (now - last < 1000000000ull ||
        !atomic_compare_exchange_strong(&e->last_refuse_log, &last, now))
        return;
    char text[NET_WHY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    e->host->log(e->host->ctx, IXL_LOG_WARN, "%s (said at most once a second)", text);
}

static int make_nonce(uint8_t out[NET_NONCE_BYTES])
{
    size_t got = 0;
    while (got < NET_NONCE_BYTES) {
        ssize_t n = net_sys()->getrandom(out + got, NET_NONCE_BYTES - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

/*
 * The MAC one side of a connection proves the cluster key with: dir "i2t" (the initiator's)
 * or "t2i" (the target's) over both nonces, both instances and both names, under the label
 * AUTH_LABEL. Each side's nonce is fresh, so a MAC is good for one connection only; the
 * direction keeps one side's MAC from being replayed as the other's.
 */
static int hello_mac(struct net_engine *e, const char *dir, const uint8_t *ni, const uint8_t *nt,
                     const char *iname, uint64_t iinst, const char *tname, uint64_t tinst,
                     uint8_t out[NET_MAC_BYTES])
{
    uint8_t t[2 * NET_NONCE_BYTES + 16 + 2 * (2 + 255)];
    size_t at = 0;
    memcpy(t, ni, NET_NONCE_BYTES);
    memcpy(t + NET_NONCE_BYTES, nt, NET_NONCE_BYTES);
    at = 2 * NET_NONCE_BYTES;
    ixlp_put_le(t + at, iinst, 8);
    ixlp_put_le(t + at + 8, tinst, 8);
    at += 16;
    const char *names[2] = {iname, tname};
    for (int i = 0; i < 2; i++) {
        size_t n = strnlen(names[i], 255);
        ixlp_put_le(t + at, n, 2);
        memcpy(t + at + 2, names[i], n);
        at += 2 + n;
    }
    const void *parts[2] = {dir, t};
    size_t lens[2] = {strlen(dir) + 1, at};
    return e->host->auth_mac(e->host->ctx, AUTH_LABEL, parts, lens, 2, out);
}

/* c reads its socket again after a pause (a drain, a staging slot, answers owed first): the
 * peer's silence counts from now, not from the last byte read before the pause. */
static void read_again(struct net_conn *c)
{
    if (!c->reading)
        c->last_rx = net_now_ns();
    c->reading = true;
}

static size_t tx_pending(const struct net_conn *c)
{
    return c->tx_n - c->tx_head;
}

/* A free slot at the end of c's tx (grows the array), or NULL when out of memory. */
static struct net_txf *tx_slot(struct net_conn *c)
{
    if (c->tx_head == c->tx_n)
        c->tx_head = c->tx_n = 0;
    if (c->tx_n == c->tx_cap) {
        if (c->tx_head > 0) {
            memmove(c->tx, c->tx + c->tx_head, tx_pending(c) * sizeof(*c->tx));
            c->tx_n -= c->tx_head;
            c->tx_head = 0;
        } else {
            uint32_t cap = c->tx_cap ? c->tx_cap * 2 : 16;
            struct net_txf *t = net_sys()->realloc(c->tx, cap * sizeof(*t));
            if (t == NULL)
                return NULL;
            c->tx = t;
            c->tx_cap = cap;
        }
    }
    struct net_txf *f = &c->tx[c->tx_n];
    memset(f, 0, sizeof(*f));
    return f;
}

static int tx_add(struct net_conn *c, const struct net_hdr *h, const void *data, size_t len,
                  struct net_txf **out)
{
    struct net_txf *f = tx_slot(c);
    if (f == NULL) {
        set_cause(c, "realloc", ENOMEM);
        return -1;
    }
    if (tx_pending(c) == 0)
        c->last_tx = net_now_ns(); /* a send stall is counted from when bytes are owed */
    if (c->ack_owed &&
        (h->op == NET_HELLO_ACK || h->op == NET_WRITE_ACK || h->op == NET_READ_DATA ||
         h->op == NET_PONG || h->op == NET_HOLD || h->op == NET_NOTIF_ACK)) {
        /* A receiver's acknowledgement of notifications rides on its next answer. */
        struct net_hdr a = *h;
        a.flags |= NET_F_ACK;
        a.key = c->ack_val;
        c->ack_owed = false;
        c->since_ack = 0;
        net_hdr_encode(&a, f->hdr);
    } else {
        net_hdr_encode(h, f->hdr);
    }
    f->data = data;
    f->len = len;
    c->tx_n++;
    if (out)
        *out = f;
    return 0;
}

/* Whether READ answers queued on c and not sent yet read bytes of [addr, addr + len). */
static bool overlaps_answers(const struct net_conn *c, uint64_t addr, uint64_t len)
{
    for (uint32_t i = c->tx_head; i < c->tx_n; i++) {
        const struct net_txf *f = &c->tx[i];
        uint64_t a = f->gate ? f->gate->addr : (uintptr_t)f->data;
        uint64_t n = f->gate ? f->gate->len : f->len;
        if (f->region != NULL && a < addr + len && addr < a + n)
            return true;
    }
    return false;
}

static struct net_item ring_pop(struct net_ring *q)
{
    struct net_item it = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return it;
}

static void ring_push(struct net_ring *q, struct net_item it)
{
    q->v[(q->head + q->len++) % q->cap] = it;
}

/* Grows q to hold n more items. */
static int ring_room(struct net_ring *q, size_t n)
{
    if (q->len + n <= q->cap)
        return IXL_OK;
    size_t cap = q->cap ? q->cap : 64;
    while (cap < q->len + n)
        cap *= 2;
    struct net_item *v = net_sys()->malloc(cap * sizeof(*v));
    if (v == NULL)
        return IXL_ERR_NO_MEMORY;
    for (size_t i = 0; i < q->len; i++)
        v[i] = q->v[(q->head + i) % q->cap];
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
    return IXL_OK;
}

static void msg_done(struct net_engine *e, struct net_msg *m, int status, const char *why)
{
    pthread_mutex_lock(&e->msg_lock);
    if (m->status == IXL_IN_PROGRESS) {
        m->status = status;
        if (why)
            snprintf(m->why, sizeof(m->why), "%s", why);
        pthread_cond_broadcast(&e->msg_cond);
    }
    int last = --m->refs == 0;
    pthread_mutex_unlock(&e->msg_lock);
    if (last)
        free(m);
}

/* A notification is sequenced (net_msg.status IXL_OK) and gains a reference for the frame
 * that carries it (e->msg_lock). True when its sender waits to be told: the loop wakes it
 * after the frame went to the socket (conn_flush), so that it does not take the core from the
 * loop before the sendmsg. */
static bool msg_seq_ref(struct net_engine *e, struct net_msg *m)
{
    pthread_mutex_lock(&e->msg_lock);
    bool told = m->status == IXL_IN_PROGRESS;
    if (told)
        m->status = IXL_OK;
    m->refs++;
    pthread_mutex_unlock(&e->msg_lock);
    return told;
}

/* ---- acknowledged delivery of notifications (the sender's store; p->lock held) ------------- *
 *
 * Every notification to a peer gets the next sequence number of the session with the peer's
 * instance when a connection takes it (pull_some), and from then on it is kept in the peer's
 * store until the peer acknowledges it: a connection that closes with it in a socket buffer
 * (a teardown, a timeout, a reset) loses nothing, because the next connection that carries
 * notifications sends every unacknowledged one again, first and in order, and the receiver
 * drops the numbers it delivered already. The store is bounded (notif_unacked_max,
 * notif_unacked_bytes); at the bound nothing new is taken from the queue until acks come.
 * An instance that goes (new metadata with another instance, the engine destroyed) takes the
 * unacknowledged ones with it: they are reported (net_peer_notif_lost). */

static struct net_msg *un_at(const struct net_peer *p, size_t i)
{
    return p->un[(p->un_head + i) % p->un_cap];
}

/* Whether p's store takes one more notification of len bytes (one always fits an empty
 * store). */
static bool un_room(const struct net_engine *e, const struct net_peer *p, size_t len)
{
    return p->un_len == 0 ||
           (p->un_len < e->notif_unacked_max && p->un_bytes + len <= e->notif_unacked_bytes);
}

/* Room for one more entry in p->un: IXL_OK or IXL_ERR_NO_MEMORY. */
static int un_grow(struct net_peer *p)
{
    if (p->un_len < p->un_cap)
        return IXL_OK;
    size_t cap = p->un_cap ? 2 * p->un_cap : 64;
    struct net_msg **v = net_sys()->malloc(cap * sizeof(*v));
    if (v == NULL)
        return IXL_ERR_NO_MEMORY;
    for (size_t i = 0; i < p->un_len; i++)
        v[i] = un_at(p, i);
    free(p->un);
    p->un = v;
    p->un_cap = cap;
    p->un_head = 0;
    return IXL_OK;
}

/* m (its reference passed to the store) gets the next sequence number (un_grow done). */
static void un_take(struct net_peer *p, struct net_msg *m)
{
    m->seq = ++p->nseq;
    p->un[(p->un_head + p->un_len) % p->un_cap] = m;
    p->un_len++;
    p->un_bytes += m->len;
    p->un_resend = p->un_len; /* nothing is sent again behind a new one */
}

/* Drops what frame f holds; status says whether it was sent. */
static void txf_done(struct net_engine *e, struct net_txf *f, int status, const char *why)
{
    if (f->stage_k && f->busy) /* an initiator's staged WRITE: its slot is free again */
        net_stage_sent(e, f->busy, f->stage_k - 1);
    if (f->gate)
        net_sgate_put(f->gate);
    if (f->busy)
        net_req_unbusy(e, f->busy);
    if (f->notif_serial)
        net_req_notif_done(e, f->notif_serial, status, why);
    if (f->msg)
        msg_done(e, f->msg, status, why);
    if (f->region)
        atomic_fetch_sub(&f->region->inflight, 1);
    f->busy = NULL;
    f->msg = NULL;
    f->region = NULL;
    f->gate = NULL;
    f->stage_k = 0;
    f->notif_serial = 0;
}

/* ---- closing ---------------------------------------------------------------------------- */

static void peer_teardown_gen(struct net_peer *p, int status, uint64_t gen, const char *why);
static void mark_ready(struct net_conn *c, struct net_loop **wake, int *n_wake);
static void wake_all(struct net_loop **wake, int n);
static int serve_queue(struct net_peer *p, struct net_loop **wake, int *n_wake);

static void unname(struct net_engine *e, struct net_conn *c)
{
    if (!c->named)
        return;
    c->named = false;
    c->inname = NULL;
    pthread_mutex_lock(&e->lock);
    for (struct net_inname **pp = &e->innames; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->name, c->name) == 0) {
            struct net_inname *x = *pp;
            if (--x->n > 0)
                break;
            net_spool_unref(x->stage);
            x->stage = NULL;
            pthread_mutex_lock(&e->nsess_lock);
            bool session = x->delivered > 0;
            pthread_mutex_unlock(&e->nsess_lock);
            if (!session) {
                *pp = x->next;
                free(x);
                break;
            }
            /* Kept: a sender that reconnects sends its unacknowledged notifications again,
             * and this end must know which it delivered. At most NET_IDLE_NAMES are kept. */
            x->idle_since = net_now_ns();
            if (++e->n_idle_names > NET_IDLE_NAMES) {
                struct net_inname **old = NULL;
                for (struct net_inname **qq = &e->innames; *qq; qq = &(*qq)->next)
                    if ((*qq)->idle_since != 0 &&
                        (old == NULL || (*qq)->idle_since < (*old)->idle_since))
                        old = qq;
                struct net_inname *y = *old;
                *old = y->next;
                free(y);
                e->n_idle_names--;
            }
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
}

/* Closes c (loop thread). failed: a failure of the connection (status, why) rather than a
 * teardown or an idle close; for an initiator's connection it ends its peer's generation
 * (today's requests spread over all of them), or, while dialing, the attempt when no other
 * connection of it can still come up. c is freed after the current batch of events. */
static void conn_close(struct net_loop *l, struct net_conn *c, bool failed, int status,
                       const char *why)
{
    struct net_engine *e = l->e;
    if (c->closed)
        return;
    c->closed = true;
    /* No caller reads the socket from now on (one reading now finishes first). A caller asleep
     * in its watch (net_tcp_watch: poll(2) for up to the core's budget, 20 ms) is woken by
     * the socket's read side shut: its poll returns, its look finds the end (0), and it lets
     * go, instead of this loop thread, and every connection on it, waiting out its timer. */
    if (!c->rx_mine && pthread_mutex_trylock(&c->rxlock) != 0) {
        shutdown(c->fd, SHUT_RD);
        pthread_mutex_lock(&c->rxlock);
    }
    c->rx_gone = true;
    if (!c->rx_mine)
        pthread_mutex_unlock(&c->rxlock);
    /* No poster sends on the socket from now on; a frame one sent meanwhile is counted (its
     * answer will not come: a close that would lose nothing otherwise fails it), and the
     * rest of one a poster left half sent is dropped with the others. */
    pthread_mutex_lock(&c->txlock);
    c->tx_closed = true;
    /* Answers callers took first: each answers a frame counted before it was sent. */
    uint32_t took = atomic_exchange(&c->rx_answers, 0);
    uint32_t late = atomic_exchange(&c->inl_out, 0);
    bool handoff = atomic_exchange(&c->inl_handoff, 0) != 0;
    struct net_txf inl = c->inl;
    memset(&c->inl, 0, sizeof(c->inl));
    pthread_mutex_unlock(&c->txlock);
    c->outstanding = c->outstanding + late > took ? c->outstanding + late - took : 0;
    late = late > took ? late - took : 0;
    if (late > 0 && !failed && c->kind == NC_OUT) {
        failed = true;
        status = IXL_ERR_REMOTE_DISCONNECT;
        why = "NET: the connection closed as a frame was sent on it";
    }
    if (handoff)
        txf_done(e, &inl, IXL_ERR_REMOTE_DISCONNECT, "NET: the connection closed");
    if (c->fd >= 0) {
        net_sys()->epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        net_sys()->close(c->fd);
        c->fd = -1;
    }
    char text[NET_WHY];
    snprintf(text, sizeof(text), "%s", why ? why : "NET: the connection closed");
    for (uint32_t i = c->tx_head; i < c->tx_n; i++)
        txf_done(e, &c->tx[i], status ? status : IXL_ERR_REMOTE_DISCONNECT, text);
    c->tx_head = c->tx_n = 0;
    if (c->stage_slot != NULL) {
        net_slot_put(c->stage_slot);
        c->stage_slot = NULL;
    }
    if (c->kind == NC_IN) {
        atomic_fetch_sub(&e->n_in, 1);
        unname(e, c);
    } else {
        struct net_peer *p = c->peer;
        int fail_gen = 0;
        struct net_loop *wake[NET_MAX_LOOPS];
        int n_wake = 0;
        pthread_mutex_lock(&p->lock);
        int k = -1;
        for (int i = 0; i < p->n_conns; i++)
            if (p->conns[i] == c)
                k = i;
        if (k >= 0) { /* not torn down before */
            p->conns[k] = p->conns[--p->n_conns];
            if (c->state == NCS_UP)
                p->n_up--;
            if (p->notif_conn == c) {
                p->notif_conn = NULL;
                for (int i = 0; i < p->n_conns && p->notif_conn == NULL; i++)
                    if (p->conns[i]->up)
                        p->notif_conn = p->conns[i];
                p->un_resend = 0; /* what c carried unacknowledged goes again */
                if (p->notif_conn != NULL && (p->nq.len > 0 || p->un_len > 0))
                    mark_ready(p->notif_conn, wake, &n_wake);
            }
            if (failed && c->gen == p->gen) {
                /* Up: its frames were lost, the generation's requests fail. Dialing: the
                 * attempt fails when nothing else of it can come up. */
                fail_gen = c->state == NCS_UP || (p->n_up == 0 && p->n_conns == 0);
            } else if (p->n_conns == 0 && (p->q.len > 0 || p->nq.len > 0 || p->un_len > 0) &&
                       p->loaded && !atomic_load(&e->stopping)) {
                /* Closed with nothing lost (idle) while new frames were queued, or with
                 * notifications not acknowledged yet: dial again. */
                serve_queue(p, wake, &n_wake);
            }
            pthread_cond_broadcast(&p->cond);
        }
        pthread_mutex_unlock(&p->lock);
        wake_all(wake, n_wake);
        if (fail_gen)
            peer_teardown_gen(p, status, c->gen, text);
        if (fail_gen && c->state == NCS_UP)
            net_peer_notif_kick(p); /* a connection that worked broke: resend on a new one */
    }
    /* Off the cross-thread lists; freed after the batch (events may still name it). */
    pthread_mutex_lock(&l->lock);
    if (c->on_ready) {
        for (struct net_conn **pp = &l->ready; *pp; pp = &(*pp)->rnext)
            if (*pp == c) {
                *pp = c->rnext;
                break;
            }
        c->on_ready = false;
    }
    if (c->on_reap) {
        for (struct net_conn **pp = &l->reap; *pp; pp = &(*pp)->knext)
            if (*pp == c) {
                *pp = c->knext;
                break;
            }
        c->on_reap = false;
    }
    pthread_mutex_unlock(&l->lock);
    c->dnext = l->dead;
    l->dead = c;
}

static void conn_free(struct net_loop *l, struct net_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (l->conns == c)
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c->tx);
    free(c->buf);
    free(c->stash);
    pthread_mutex_destroy(&c->txlock);
    pthread_mutex_destroy(&c->rxlock);
    pthread_mutex_destroy(&c->evlock);
    free(c);
}

/* Frees the connections closed in this batch, but those a request still pins (a caller may
 * look at them: net_tcp_watch), which wait for a later batch; all when the loop exits. */
static void free_dead_all(struct net_loop *l, bool all)
{
    struct net_conn *keep = NULL;
    while (l->dead) {
        struct net_conn *c = l->dead;
        l->dead = c->dnext;
        if (!all && atomic_load(&c->pins) > 0) {
            c->dnext = keep;
            keep = c;
            continue;
        }
        conn_free(l, c);
    }
    l->dead = keep;
}

static void free_dead(struct net_loop *l)
{
    free_dead_all(l, false);
}

/* A system call on c's socket failed with err: c closes and its requests fail. */
static void conn_broke(struct net_loop *l, struct net_conn *c, const char *call, int err)
{
    set_cause(c, call, err);
    char why[NET_WHY];
    snprintf(why, sizeof(why), "NET: the connection to '%s' broke%s",
             c->kind == NC_OUT ? c->peer->name : c->name, c->cause);
    conn_close(l, c, true, IXL_ERR_REMOTE_DISCONNECT, why);
}

/* Why an attempt to reach p failed, for its requests. */
static void setup_failed(struct net_loop *l, struct net_conn *c, int status, const char *what)
{
    struct net_peer *p = c->peer;
    char addr[INET_ADDRSTRLEN] = "?";
    if (c->n_addrs > 0)
        inet_ntop(AF_INET, &c->addrs[c->addr_at < c->n_addrs ? c->addr_at : 0], addr, sizeof(addr));
    char why[NET_WHY];
    snprintf(why, sizeof(why), "NET cannot connect to '%s' (%s:%u, %d address(es)): %s%s", p->name,
             addr, c->port, c->n_addrs, what, c->cause);
    pthread_mutex_lock(&p->lock);
    if (c->gen == p->gen) {
        snprintf(p->why, sizeof(p->why), "%s", why);
        p->failed_gen = c->gen + 1;
        p->failed_status = status;
    }
    pthread_mutex_unlock(&p->lock);
    conn_close(l, c, true, status, why);
}

/* ---- the initiator's side: dialing, HELLO ------------------------------------------------ */

static void dial_next(struct net_loop *l, struct net_conn *c);

static void send_hello(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    struct net_hello hl = {.from_instance = e->instance, .to_instance = c->to_instance};
    snprintf(hl.name, sizeof(hl.name), "%s", e->name);
    pthread_mutex_lock(&c->peer->lock);
    if (c->peer->instance == c->to_instance) /* the session's acknowledgements so far */
        hl.notif_acked = c->peer->nacked;
    pthread_mutex_unlock(&c->peer->lock);
    c->buf = net_sys()->malloc(NET_HELLO_MAX);
    size_t plen = c->buf ? net_hello_encode(&hl, c->buf, NET_HELLO_MAX) : 0;
    /* req: the connection's generation, so the target can fence off an older one's WRITEs */
    struct net_hdr h = {.op = NET_HELLO, .len = plen, .req = c->gen};
    if (e->auth_mode == IXL_AUTH_KEY) { /* the challenge to the target: prove the key */
        if (make_nonce(c->nonce_i) != 0) {
            set_cause(c, "getrandom", errno);
            setup_failed(l, c, IXL_ERR_SYSTEM, "no random nonce for the handshake");
            return;
        }
        h.flags = NET_HELLO_F_AUTH;
        h.addr = ixlp_get_le(c->nonce_i, 8);
        h.key = ixlp_get_le(c->nonce_i + 8, 8);
    }
    if (c->buf == NULL || tx_add(c, &h, c->buf, plen, NULL) != 0) {
        set_cause(c, "malloc", ENOMEM);
        setup_failed(l, c, IXL_ERR_NO_MEMORY, "out of memory");
        return;
    }
    c->state = NCS_HELLO;
    if (set_events(c, EPOLLIN | EPOLLOUT) != 0)
        setup_failed(l, c, IXL_ERR_SYSTEM, "epoll_ctl failed");
    c->reading = true;
}

/* The socket of a dialing connection became writable (or failed). */
static void dial_done(struct net_loop *l, struct net_conn *c)
{
    int err = 0;
    socklen_t el = sizeof(err);
    if (net_sys()->getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        err = errno;
    if (err != 0) {
        set_cause(c, "connect", err);
        net_sys()->epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        net_sys()->close(c->fd);
        c->fd = -1;
        c->addr_at++;
        dial_next(l, c);
        return;
    }
    int one = 1;
    net_sys()->setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct net_engine *e = l->e;
    if (e->auth_mode == IXL_AUTH_LOCAL && e->can_check_peer) {
        /* Without a key, only a listener of this user is trusted: another user could have
         * taken the port after the peer's metadata was read. */
        char why[160] = "";
        int rc = e->host->peer_check(e->host->ctx, c->fd, NULL, why, sizeof(why));
        if (rc != IXL_OK) {
            snprintf(c->cause, sizeof(c->cause), " (%s)", why);
            setup_failed(l, c, rc == IXL_ERR_SYSTEM ? IXL_ERR_SYSTEM : IXL_ERR_AUTH,
                         rc == IXL_ERR_AUTH ? "the process listening there is not of this user; "
                                              "refused (without a cluster key only this user's "
                                              "agents are trusted)"
                                            : "the kernel cannot vouch for the process "
                                              "listening there; refused");
            return;
        }
    }
    send_hello(l, c);
}

/* Dials c's next address; the attempt fails when none is left. */
static void dial_next(struct net_loop *l, struct net_conn *c)
{
    bool local_only = l->e->auth_mode == IXL_AUTH_LOCAL;
    bool any_local = false;
    for (int i = 0; i < c->n_addrs; i++)
        any_local |= addr_is_loopback(c->addrs[i]);
    if (local_only && !any_local) {
        setup_failed(l, c, IXL_ERR_AUTH,
                     "it advertises no loopback address, and without a cluster key NET "
                     "reaches only agents of this host and user: set IXL_AUTH_KEY (the same "
                     "key) on both agents, or insecure_remote");
        return;
    }
    for (; c->addr_at < c->n_addrs; c->addr_at++) {
        if (local_only && !addr_is_loopback(c->addrs[c->addr_at]))
            continue; /* no key: only this host's agents, through loopback */
        int fd = net_sys()->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            set_cause(c, "socket", errno);
            setup_failed(l, c, IXL_ERR_REMOTE_DISCONNECT, "no socket");
            return;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port)};
        sa.sin_addr.s_addr = c->addrs[c->addr_at];
        int rc = net_sys()->connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        if (rc != 0 && errno != EINPROGRESS) {
            set_cause(c, "connect", errno);
            net_sys()->close(fd);
            continue;
        }
        c->fd = fd;
        struct epoll_event x = {.events = EPOLLOUT, .data.ptr = c};
        if (net_sys()->epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &x) != 0) {
            set_cause(c, "epoll_ctl", errno);
            net_sys()->close(fd);
            c->fd = -1;
            setup_failed(l, c, IXL_ERR_REMOTE_DISCONNECT, "no event registration");
            return;
        }
        c->events = EPOLLOUT;
        return;
    }
    setup_failed(l, c, IXL_ERR_REMOTE_DISCONNECT, "no answer");
}

/* ---- the initiator's side: frames out --------------------------------------------------- */

static int pull_some(struct net_loop *l, struct net_conn *c);

/* Takes frames from c's peer's queue into c's tx (c is up and has sent what it had): the
 * number put in tx, 0 when the queue has nothing left for c. Frames of released requests are
 * skipped on the way. */
static int pull(struct net_loop *l, struct net_conn *c)
{
    int added = 0;
    for (int round = 0; round < 1 << 16 && added == 0; round++) {
        uint32_t before = c->tx_n - c->tx_head;
        int taken = pull_some(l, c);
        added = (int)(c->tx_n - c->tx_head - before);
        if (taken == 0)
            break;
    }
    return added;
}

/* A notification of len bytes for the store (NULL: out of memory): refs references, status as
 * given (IXL_IN_PROGRESS while its sender waits to hear it was sequenced). */
static struct net_msg *msg_new(const void *bytes, size_t len, int refs, int status)
{
    struct net_msg *m = net_sys()->malloc(sizeof(*m) + (len ? len : 1));
    if (m == NULL)
        return NULL;
    m->refs = refs;
    m->status = status;
    m->why[0] = '\0';
    m->len = len;
    if (len)
        memcpy(m->bytes, bytes, len);
    return m;
}

/* Takes the next notification of p's queue into p's store, sequenced (p->lock held; the
 * store has room for one more entry): 1 with *out (a reference for its frame; 2: an
 * ixl_notif_send waits for it, to be woken after the flush), 0 when it does
 * not fit the store's bound now (it stays queued), -1 when it was dropped (its request was
 * released or failed; or out of memory, *serial_out naming the request to fail). A request's
 * notification is copied, and the request (*serial_out, on 1) is done once its notification
 * is sequenced, whatever becomes of the connection: NET delivers it or reports it lost. */
static int notif_sequence(struct net_engine *e, struct net_peer *p, struct net_msg **out,
                          uint64_t *serial_out)
{
    struct net_item *it = &p->nq.v[p->nq.head];
    if (it->kind == NI_MSG) {
        struct net_msg *m = it->msg;
        if (!un_room(e, p, m->len))
            return 0;
        ring_pop(&p->nq);
        un_take(p, m); /* the queue's reference is the store's */
        *out = m;
        return msg_seq_ref(e, m) ? 2 : 1; /* 2: its sender is woken after the flush */
    }
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, it->serial);
    if (r == NULL || r->state != NR_RUNNING || r->canceled) {
        pthread_mutex_unlock(&e->reqs_lock);
        ring_pop(&p->nq);
        return -1; /* released or failed meanwhile: never sent */
    }
    if (!un_room(e, p, r->notif_len)) {
        pthread_mutex_unlock(&e->reqs_lock);
        return 0;
    }
    struct net_msg *m = msg_new(r->notif, r->notif_len, 2, IXL_OK); /* the store and the frame */
    pthread_mutex_unlock(&e->reqs_lock);
    uint64_t serial = ring_pop(&p->nq).serial;
    *serial_out = serial;
    if (m == NULL)
        return -1;
    un_take(p, m);
    *out = m;
    return 1;
}

static int pull_some(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    struct net_peer *p = c->peer;
    struct net_item items[PULL_FRAMES];
    struct net_msg *nm[PULL_FRAMES / 2];
    uint64_t done[PULL_FRAMES / 2], failed[PULL_FRAMES / 2];
    int n = 0, n_nm = 0, n_done = 0, n_failed = 0;
    bool ping = false;
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&c->doomed) && c->gen == p->gen && !c->peer_hold) {
        /* Notifications on one connection only: one sender's arrive in order. The ones not
         * acknowledged yet go again first when this connection took over (un_resend). */
        while (p->notif_conn == c && p->un_resend < p->un_len && n_nm < PULL_FRAMES / 2) {
            struct net_msg *m = un_at(p, p->un_resend++);
            msg_seq_ref(e, m);
            nm[n_nm++] = m;
        }
        while (p->notif_conn == c && p->un_resend == p->un_len && p->nq.len > 0 &&
               n_nm < PULL_FRAMES / 2 && n_failed < PULL_FRAMES / 2) {
            uint64_t serial = 0;
            struct net_msg *m = NULL;
            if (un_grow(p) != IXL_OK) {
                struct net_item it = ring_pop(&p->nq);
                if (it.kind == NI_MSG)
                    msg_done(e, it.msg, IXL_ERR_NO_MEMORY, "NET: out of memory");
                else
                    failed[n_failed++] = it.serial;
                continue;
            }
            int v = notif_sequence(e, p, &m, &serial);
            if (v == 0) {
                p->un_blocked = true; /* an ack makes room and marks c ready again */
                break;
            }
            if (v > 0) {
                nm[n_nm++] = m;
                if (serial)
                    done[n_done++] = serial;
                if (v == 2)
                    c->wake_msgs = true;
            } else if (serial) {
                failed[n_failed++] = serial;
            }
        }
        if (p->notif_conn == c && p->ack_wanted) { /* its PONG carries the ack */
            p->ack_wanted = false;
            ping = true;
        }
        if (c->outstanding == 0)
            c->owed_bytes = 0;
        uint64_t bytes = 0;
        int first = n;
        while (p->q.len > 0 && n < PULL_FRAMES && bytes < PULL_BYTES) {
            uint64_t cost = p->q.v[p->q.head].len;
            cost = cost < PULL_COST_MIN ? PULL_COST_MIN : cost;
            if ((n > first || c->owed_bytes > 0) && c->owed_bytes + bytes + cost > PULL_WINDOW)
                break; /* the peer's other connections take the rest */
            items[n++] = ring_pop(&p->q);
            bytes += cost;
        }
        c->owed_bytes += bytes;
    }
    /* Frames taken for c are not on its socket yet: no poster may send ahead of them (a
     * notification sent by notif_inline would overtake the ones taken here). The loop sets
     * the hint again once c's tx is empty. */
    if (n_nm > 0 || n > 0 || ping)
        atomic_store(&c->tx_idle, 0);
    pthread_mutex_unlock(&p->lock);
    /* Done now, so that no teardown fails them; the waiters are woken after the flush. */
    for (int i = 0; i < n_done; i++)
        net_req_notif_sequenced(e, done[i]);
    if (n_done > 0)
        c->wake_reqs = true;
    for (int i = 0; i < n_failed; i++)
        net_req_notif_done(e, failed[i], IXL_ERR_NO_MEMORY,
                           "NET: out of memory keeping a notification until it is acknowledged");
    uint64_t unsent = 0; /* out of memory: the first number not put on c */
    for (int i = 0; i < n_nm; i++) {
        struct net_txf *f;
        struct net_hdr h = {.op = NET_NOTIF, .req = nm[i]->seq, .len = nm[i]->len};
        if (unsent != 0 || tx_add(c, &h, nm[i]->bytes, nm[i]->len, &f) != 0) {
            if (unsent == 0)
                unsent = nm[i]->seq;
            msg_done(e, nm[i], IXL_ERR_NO_MEMORY, "NET: out of memory"); /* the frame's ref */
            continue;
        }
        f->msg = nm[i];
        if (!c->nowed) { /* the peer's silence counts from now, as for answers */
            c->nowed = true;
            if (c->outstanding == 0)
                c->last_rx = net_now_ns();
        }
    }
    struct net_hdr ph = {.op = NET_PING};
    if (ping && tx_add(c, &ph, NULL, 0, NULL) != 0)
        ping = false;
    if (unsent != 0) { /* they stay in the store: this connection's next pull sends them */
        pthread_mutex_lock(&p->lock);
        if (p->notif_conn == c && unsent > p->nacked && unsent - p->nacked - 1 < p->un_resend)
            p->un_resend = (size_t)(unsent - p->nacked - 1);
        pthread_mutex_unlock(&p->lock);
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (rc != 0) /* out of memory: the rest are dropped with their requests failed */
            continue;
        struct net_txf *f;
        struct net_req *r = net_req_get_busy(e, items[i].serial);
        if (r == NULL)
            continue; /* released or failed meanwhile */
        const void *data = NULL;
        size_t len = 0;
        const struct net_chunk *ch = &r->chunks[items[i].chunk];
        struct net_hdr h = {.op = r->op == IXL_OP_WRITE ? NET_WRITE : NET_READ,
                            .chunk = items[i].chunk,
                            .req = items[i].serial,
                            .addr = ch->raddr,
                            .len = ch->len,
                            .key = ch->key};
        if (r->op == IXL_OP_WRITE && r->stage_local && ch->slot == NULL) {
            net_req_unbusy(e, r); /* cannot be: a staged frame is queued with its slot */
            net_req_part_done(e, items[i].serial, IXL_ERR_BACKEND,
                              "NET: a staged WRITE frame lost its slot");
            continue;
        }
        if (r->op == IXL_OP_WRITE) {
            /* A staged chunk's bytes wait in its slot (net_stage.c). */
            data = r->stage_local && ch->slot ? (const void *)ch->slot->buf
                                              : (const void *)(uintptr_t)ch->laddr;
            len = (size_t)ch->len;
        }
        if (tx_add(c, &h, data, len, &f) != 0) {
            net_req_unbusy(e, r);
            net_req_part_done(e, items[i].serial, IXL_ERR_NO_MEMORY,
                              "NET: out of memory queueing a frame");
            rc = -1;
            continue;
        }
        f->busy = r;
        if (r->stage_local && r->op == IXL_OP_WRITE)
            f->stage_k = items[i].chunk + 1;
        f->counts = 1;
        if (c->outstanding++ == 0)
            c->last_rx = net_now_ns(); /* silence counts from when answers are owed */
    }
    return n + n_nm + n_done + n_failed + (ping ? 1 : 0);
}

static int parse(struct net_loop *l, struct net_conn *c, const uint8_t *p, size_t n);

/* A frame a poster sent in part (net_peer_submit): its rest goes first, ahead of c's tx
 * (nothing of which is on the wire: a poster sends only between whole frames). */
static int take_handoff(struct net_conn *c)
{
    pthread_mutex_lock(&c->txlock);
    int rc = 0;
    if (atomic_load(&c->inl_handoff)) {
        if (c->tx_head == c->tx_n)
            c->tx_head = c->tx_n = 0;
        if (c->tx_head == 0 && tx_slot(c) == NULL) {
            rc = -1; /* out of memory: the connection breaks (its requests fail) */
        } else {
            if (c->tx_head > 0) {
                c->tx_head--;
            } else { /* tx_slot made room at the end: shift the queue by one */
                memmove(c->tx + 1, c->tx, c->tx_n * sizeof(*c->tx));
                c->tx_n++;
            }
            if (tx_pending(c) == 1)
                c->last_tx = net_now_ns();
            c->tx[c->tx_head] = c->inl;
            c->tx_off = c->inl_off;
            memset(&c->inl, 0, sizeof(c->inl));
            atomic_store(&c->inl_handoff, 0);
        }
    }
    pthread_mutex_unlock(&c->txlock);
    return rc;
}

/* Frames posters sent on c (net_peer_submit) join c's outstanding ones (loop thread). */
static void fold_inline(struct net_conn *c)
{
    if (atomic_load(&c->inl_out) == 0 && atomic_load(&c->rx_answers) == 0 &&
        atomic_load(&c->inl_nowed) == 0) {
        uint64_t at = atomic_load(&c->rx_ns); /* a caller took a PONG or a NOTIF_ACK alone */
        if (at > c->last_rx)
            c->last_rx = at;
        return;
    }
    pthread_mutex_lock(&c->txlock);
    /* The answers callers took (net_tcp_watch) first: each answers a frame counted (here, or
     * in inl_out before it was sent) before the answer came, so the sum never goes below 0. */
    uint32_t took = atomic_exchange(&c->rx_answers, 0);
    uint32_t n = atomic_exchange(&c->inl_out, 0);
    int nowed = atomic_exchange(&c->inl_nowed, 0);
    pthread_mutex_unlock(&c->txlock);
    if (nowed && !c->nowed) { /* a notification went: the peer owes its ack from now */
        c->nowed = true;
        if (c->outstanding == 0)
            c->last_rx = net_now_ns();
    }
    uint64_t at = atomic_load(&c->rx_ns);
    if (at > c->last_rx)
        c->last_rx = at; /* the peer answered */
    if (n > 0 && c->outstanding == 0)
        c->last_rx = net_now_ns(); /* silence counts from when answers are owed */
    uint64_t was = c->outstanding + n;
    c->outstanding = was > took ? was - took : 0;
    if (took > 0) /* each answer takes back the average, as in frame_begin */
        c->owed_bytes = c->outstanding == 0 ? 0 : c->owed_bytes - c->owed_bytes / was * took;
}

/* Whether frame f may go: an answer gated by a staged device copy goes once the copy ended;
 * one whose copy failed goes as an error with no data (its header rewritten). */
static bool txf_ready(struct net_txf *f)
{
    if (f->gate == NULL)
        return true;
    int st = atomic_load(&f->gate->state);
    if (st == IXL_IN_PROGRESS)
        return false;
    if (st != IXL_OK && f->len > 0) {
        struct net_hdr h;
        if (net_hdr_decode(f->hdr, &h) == 0) {
            h.status = IXL_ERR_BACKEND;
            h.len = 0;
            net_hdr_encode(&h, f->hdr);
        }
        f->data = NULL;
        f->len = 0;
    } else if (st != IXL_OK) {
        struct net_hdr h;
        if (net_hdr_decode(f->hdr, &h) == 0 && h.status == 0) {
            h.status = IXL_ERR_BACKEND;
            net_hdr_encode(&h, f->hdr);
        }
    }
    return true;
}

static int conn_flush_tx(struct net_loop *l, struct net_conn *c);

/* Sends what c's tx holds; an initiator's connection refills it from its peer's queue.
 * Returns -1 when c was closed. Senders of the notifications sequenced meanwhile are woken
 * once the frames went to the socket (their status was set when they were sequenced). */
static int conn_flush(struct net_loop *l, struct net_conn *c)
{
    int rc = conn_flush_tx(l, c);
    struct net_engine *e = l->e;
    if (c->wake_msgs) { /* threads in ixl_notif_send */
        c->wake_msgs = false;
        pthread_mutex_lock(&e->msg_lock);
        pthread_cond_broadcast(&e->msg_cond);
        pthread_mutex_unlock(&e->msg_lock);
    }
    if (c->wake_reqs) { /* requests done */
        c->wake_reqs = false;
        e->host->signal(e->host->ctx);
    }
    return rc;
}

static int conn_flush_tx(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    if (atomic_load(&c->inl_handoff) && take_handoff(c) != 0) {
        conn_broke(l, c, "realloc", ENOMEM);
        return -1;
    }
    for (int round = 0; round < 64; round++) {
        if (tx_pending(c) == 0 && c->kind == NC_OUT && c->state == NCS_UP && pull(l, c) == 0)
            break;
        if (tx_pending(c) == 0)
            break;
        struct iovec iov[2 * PULL_FRAMES];
        int n_iov = 0;
        size_t skip = c->tx_off;
        for (uint32_t i = c->tx_head; i < c->tx_n && n_iov + 2 <= (int)(2 * PULL_FRAMES); i++) {
            struct net_txf *f = &c->tx[i];
            if (!txf_ready(f))
                break; /* its device copy runs: the loop is kicked when it ends */
            if (skip < NET_HDR_BYTES) {
                iov[n_iov++] = (struct iovec){f->hdr + skip, NET_HDR_BYTES - skip};
                skip = 0;
            } else {
                skip -= NET_HDR_BYTES;
            }
            if (f->len > skip) {
                iov[n_iov++] = (struct iovec){(char *)(uintptr_t)f->data + skip, f->len - skip};
            }
            skip = 0;
        }
        if (n_iov == 0)
            break;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
        /* Under txlock: a poster sends only between whole frames (wire_partial). */
        pthread_mutex_lock(&c->txlock);
        ssize_t w = net_sys()->sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        int err = errno;
        uint32_t from = c->tx_head;
        size_t left = w > 0 ? (size_t)w : 0;
        while (left > 0 && c->tx_head < c->tx_n) {
            struct net_txf *f = &c->tx[c->tx_head];
            size_t whole = NET_HDR_BYTES + f->len - c->tx_off;
            if (left < whole) {
                c->tx_off += left;
                break;
            }
            left -= whole;
            c->tx_off = 0;
            c->tx_head++;
        }
        c->wire_partial = c->tx_off != 0;
        pthread_mutex_unlock(&c->txlock);
        for (uint32_t i = from; i < c->tx_head; i++)
            txf_done(e, &c->tx[i], IXL_OK, NULL);
        if (w < 0) {
            if (err == EINTR)
                continue;
            if (err == EAGAIN || err == EWOULDBLOCK)
                break;
            conn_broke(l, c, "sendmsg", err);
            return -1;
        }
        c->last_tx = net_now_ns();
    }
    if (c->held && !overlaps_answers(c, c->h.addr, c->h.len)) {
        /* The READ answers before the held WRITE are out: place it and go on. */
        uint8_t *st = c->stash;
        size_t n = c->stash_len;
        c->held = false;
        c->stash = NULL;
        c->stash_len = 0;
        int rc = st ? parse(l, c, st, n) : 0;
        free(st);
        if (c->closed)
            return -1;
        if (rc == 0 && !c->held && !c->paused && !c->stage_wait && !c->linger)
            read_again(c);
        if (tx_pending(c) > 0)
            return conn_flush(l, c);
    }
    bool more = tx_pending(c) > 0 && txf_ready(&c->tx[c->tx_head]);
    if (c->kind == NC_IN && !c->reading && !c->linger && !c->held && !c->paused && !c->stage_wait &&
        tx_pending(c) < TX_SOFT / 2)
        read_again(c); /* the peer reads its answers again */
    if (c->linger && tx_pending(c) == 0) {
        conn_close(l, c, false, 0, NULL);
        return -1;
    }
    if (c->kind == NC_OUT)
        atomic_store(&c->tx_idle, c->state == NCS_UP && tx_pending(c) == 0 && !c->peer_hold);
    uint32_t ev = (c->reading ? EPOLLIN : 0) | (more ? EPOLLOUT : 0);
    if (set_events(c, ev) != 0) {
        conn_close(l, c, true, IXL_ERR_SYSTEM, "NET: epoll_ctl failed");
        return -1;
    }
    return 0;
}

/* ---- frames in ---------------------------------------------------------------------------- */

static int protocol_error(struct net_loop *l, struct net_conn *c, const char *what)
{
    if (c->kind == NC_IN) {
        /* The answers to the frames before the bad one still go; then it closes. */
        c->linger = true;
        c->reading = false;
        return -1;
    }
    char why[NET_WHY];
    snprintf(why, sizeof(why), "NET: '%s' broke the protocol: %s",
             c->kind == NC_OUT ? c->peer->name : c->name, what);
    conn_close(l, c, true, IXL_ERR_REMOTE_DISCONNECT, why);
    return -1;
}

/* Initiator: the target acknowledged the notifications of c's session up to ack: they leave
 * the store (a queue held at the store's bound goes on). An ack beyond the last sequence
 * number given out is a protocol error: -1 with what it was in what[cap] (logged); an older
 * one (acks of several connections cross) changes nothing. Any thread reading c (p->lock). */
static int notif_ack_apply(struct net_engine *e, struct net_conn *c, uint64_t ack, char *what,
                           size_t cap)
{
    struct net_peer *p = c->peer;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    uint64_t given = 0;
    bool bad = false;
    pthread_mutex_lock(&p->lock);
    if (c->to_instance == p->instance) { /* else the session of an instance gone */
        if (ack > p->nseq) {
            bad = true;
            given = p->nseq;
        }
        while (!bad && p->nacked < ack) {
            struct net_msg *m = p->un[p->un_head];
            p->un_head = (p->un_head + 1) % p->un_cap;
            p->un_len--;
            p->un_bytes -= m->len;
            p->nacked++;
            if (p->un_resend > 0)
                p->un_resend--;
            msg_done(e, m, IXL_OK, NULL); /* the store's reference */
        }
        if (!bad && p->un_blocked && p->notif_conn != NULL) {
            p->un_blocked = false; /* room again: the queue goes on */
            mark_ready(p->notif_conn, wake, &n_wake);
        }
        if (!bad && p->settling)
            pthread_cond_broadcast(&p->cond); /* net_peer_notif_settle */
    }
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    if (!bad)
        return 0;
    snprintf(what, cap,
             "it acknowledged notification %" PRIu64 " of this session, but only %" PRIu64
             " were sent",
             ack, given);
    e->host->log(e->host->ctx, IXL_LOG_WARN,
                 "NET: closing the connection to '%s': %s (a forged or corrupt acknowledgement)",
                 p->name, what);
    return -1;
}

/* notif_ack_apply on the loop: 0, or -1 when c was closed. */
static int notif_acked(struct net_loop *l, struct net_conn *c, uint64_t ack)
{
    char what[200];
    if (notif_ack_apply(l->e, c, ack, what, sizeof(what)) == 0)
        return 0;
    return protocol_error(l, c, what);
}

/* Counts an accepted connection against its HELLO name (peer_conns): IXL_OK, or the status
 * its HELLO_ACK refuses it with. */
static int name_conn(struct net_engine *e, struct net_conn *c)
{
    int status = IXL_OK;
    pthread_mutex_lock(&e->lock);
    struct net_inname *x = e->innames;
    while (x && strcmp(x->name, c->name) != 0)
        x = x->next;
    if (x == NULL && (x = net_sys()->calloc(1, sizeof(*x))) != NULL) {
        snprintf(x->name, sizeof(x->name), "%s", c->name);
        x->next = e->innames;
        e->innames = x;
    }
    if (x == NULL || x->n >= e->peer_conns) {
        status = IXL_ERR_REMOTE_REFUSED;
    } else {
        x->n++;
        c->named = true;
        c->inname = x;
        if (atomic_load(&x->instance) != c->from_instance) {
            atomic_store(&x->max_gen, c->in_gen);
            atomic_store(&x->instance, c->from_instance);
        } else if (c->in_gen > atomic_load(&x->max_gen)) {
            atomic_store(&x->max_gen, c->in_gen);
        }
        if (x->idle_since != 0) { /* a name kept for its session has a connection again */
            x->idle_since = 0;
            e->n_idle_names--;
        }
        /* Its notification session: a new initiator instance starts one, at what it says
         * was acknowledged (0 for a new one; more when this end dropped an idle session). */
        pthread_mutex_lock(&e->nsess_lock);
        if (x->sess_inst != c->from_instance) {
            x->sess_inst = c->from_instance;
            x->delivered = c->hello_acked;
        } else if (c->hello_acked > x->delivered) {
            x->delivered = c->hello_acked;
        }
        c->ack_val = x->delivered; /* said in the HELLO_ACK */
        pthread_mutex_unlock(&e->nsess_lock);
    }
    pthread_mutex_unlock(&e->lock);
    if (status != IXL_OK)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: refused a connection from '%s': it has %d open already "
                     "(peer_conns)",
                     c->name, e->peer_conns);
    return status;
}

/* Sends the verdict on an accepted connection's setup: OK (it is up) or a refusal (it closes
 * once the refusal is out, and nothing it sent is taken). */
static int hello_ack(struct net_loop *l, struct net_conn *c, struct net_hdr *r)
{
    if (r->status != 0) {
        c->linger = true;
        c->reading = false;
    } else {
        c->state = NCS_UP;
        c->ack_owed = true; /* the session's ack (name_conn): the initiator resends after it */
    }
    return tx_add(c, r, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
}

/* Target, with a cluster key: answers a HELLO with its nonce and its proof of the key; the
 * connection then owes its AUTH (NCS_AUTH) before anything else is taken. */
static int challenge_send(struct net_loop *l, struct net_conn *c, uint64_t req)
{
    struct net_engine *e = l->e;
    struct net_hdr r = {.op = NET_CHALLENGE, .req = req, .len = NET_CHALLENGE_BYTES};
    if (make_nonce(c->nonce_t) != 0 ||
        hello_mac(e, "t2i", c->nonce_i, c->nonce_t, c->name, c->from_instance, e->name, e->instance,
                  c->auth_out + NET_NONCE_BYTES) != IXL_OK) {
        r = (struct net_hdr){.op = NET_HELLO_ACK, .req = req, .status = IXL_ERR_SYSTEM};
        e->host->log(e->host->ctx, IXL_LOG_ERROR,
                     "NET: cannot answer the HELLO of '%s': no nonce or MAC", c->name);
        return hello_ack(l, c, &r);
    }
    memcpy(c->auth_out, c->nonce_t, NET_NONCE_BYTES);
    c->state = NCS_AUTH;
    return tx_add(c, &r, c->auth_out, NET_CHALLENGE_BYTES, NULL) == 0
               ? 0
               : protocol_error(l, c, "out of memory");
}

/* Initiator, with a cluster key: the target's CHALLENGE arrived (in auth_in). Its MAC proves
 * the target holds the key; ours goes back in AUTH, and HELLO_ACK says whether it was taken. */
static int challenge_answer(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    uint8_t want[NET_MAC_BYTES];
    memcpy(c->nonce_t, c->auth_in, NET_NONCE_BYTES);
    if (hello_mac(e, "t2i", c->nonce_i, c->nonce_t, e->name, e->instance, c->peer->name,
                  c->to_instance, want) != IXL_OK ||
        !e->host->auth_equal(want, c->auth_in + NET_NONCE_BYTES, NET_MAC_BYTES)) {
        setup_failed(l, c, IXL_ERR_AUTH,
                     "it did not prove the cluster key: the two agents hold different keys "
                     "(IXL_AUTH_KEY), or what answers is not the agent its metadata names");
        return -1;
    }
    c->challenged = true;
    if (hello_mac(e, "i2t", c->nonce_i, c->nonce_t, e->name, e->instance, c->peer->name,
                  c->to_instance, c->auth_out) != IXL_OK) {
        setup_failed(l, c, IXL_ERR_SYSTEM, "no MAC for the handshake");
        return -1;
    }
    struct net_hdr a = {.op = NET_AUTH, .len = NET_MAC_BYTES};
    if (tx_add(c, &a, c->auth_out, NET_MAC_BYTES, NULL) != 0) {
        setup_failed(l, c, IXL_ERR_NO_MEMORY, "out of memory");
        return -1;
    }
    return 0;
}

static bool superseded(const struct net_conn *c);

/* A staged WRITE's body is in its slot: it is copied into the VRAM region, and its ack (r)
 * waits for that copy's event. A superseded generation or a region gone meanwhile is
 * answered at once and nothing is copied. */
static int stage_write_end(struct net_loop *l, struct net_conn *c, struct net_hdr *r)
{
    struct net_engine *e = l->e;
    struct net_slot *slot = c->stage_slot;
    c->stage_slot = NULL;
    struct net_region *g = NULL;
    struct net_sgate *gt = NULL;
    pthread_rwlock_rdlock(&e->regions_lock);
    if (superseded(c)) {
        r->status = IXL_ERR_REMOTE_DISCONNECT;
    } else if ((g = net_region_range(e, c->h.key, c->h.addr, c->h.len)) == NULL || !g->vram) {
        g = NULL;
        r->status = IXL_ERR_REMOTE_REFUSED;
    } else if ((gt = net_sgate_new(l, slot, g, c->h.addr, c->h.len)) == NULL) {
        r->status = IXL_ERR_REMOTE_REFUSED;
    }
    pthread_rwlock_unlock(&e->regions_lock);
    if (gt == NULL) {
        net_slot_put(slot);
        return tx_add(c, r, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
    }
    struct net_txf *f;
    if (tx_add(c, r, NULL, 0, &f) != 0) {
        atomic_store(&gt->state, IXL_ERR_CANCELED);
        net_sgate_put(gt);
        net_sgate_put(gt);
        return protocol_error(l, c, "out of memory");
    }
    f->gate = gt;
    net_sgate_copy(gt, true);
    return 0;
}

/* A pinned slot of c's peer name for a frame to or from VRAM, or NULL (the loops are kicked
 * when one comes free). */
static struct net_slot *stage_slot_get(struct net_engine *e, struct net_conn *c)
{
    struct net_inname *x = c->inname;
    if (x == NULL)
        return NULL;
    pthread_mutex_lock(&e->lock);
    if (x->stage == NULL)
        x->stage = net_spool_new(e, NULL);
    struct net_spool *pool = x->stage;
    pthread_mutex_unlock(&e->lock);
    return pool ? net_slot_get(pool) : NULL;
}

/* Target: notification seq arrived on c. Within the session of c's initiator instance it is
 * handed to the application only when it is the next one (1); one delivered before (a resend
 * after a reconnect) is dropped (0); a gap is a protocol error (-1). The check and the queueing
 * are one step under nsess_lock, so two connections of one sender (an old one's last bytes and
 * a new one's resends) deliver each number once and in order. c->ack_val: the ack to send. */
static int notif_deliver(struct net_engine *e, struct net_conn *c, uint64_t seq, const void *msg,
                         size_t len)
{
    struct net_inname *x = c->inname;
    int v = 1;
    pthread_mutex_lock(&e->nsess_lock);
    if (x != NULL && x->sess_inst == c->from_instance) {
        if (seq <= x->delivered)
            v = 0;
        else if (seq != x->delivered + 1)
            v = -1;
        else
            x->delivered = seq;
        c->ack_val = x->delivered;
    } else {
        c->ack_val = seq; /* an instance whose session a newer one replaced: no resends come */
    }
    if (v == 1)
        net_notif_push(e, c->name, msg, len);
    pthread_mutex_unlock(&e->nsess_lock);
    return v;
}

/* The end of frame c->h (its body, if any, is in place). */
static int frame_end(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    struct net_hdr *h = &c->h;
    if (c->kind == NC_OUT) {
        if (h->op == NET_CHALLENGE)
            return challenge_answer(l, c);
        if (h->op != NET_READ_DATA && h->op != NET_WRITE_ACK)
            return 0;
        if (c->answer != 1)
            return 0; /* a released request's answer, drained */
        if (net_stage_answer(e, c->peer, h) == 1)
            return 0; /* a staged READ: its slot goes to the device first (net_stage.c) */
        char why[NET_WHY] = "";
        int status = IXL_OK;
        if (h->status == IXL_ERR_BACKEND) {
            status = IXL_ERR_BACKEND;
            snprintf(why, sizeof(why),
                     "NET: '%s' answered frame %u of the %s with an error: a device copy "
                     "there failed (its log has the driver's error)",
                     c->peer->name, h->chunk, h->op == NET_WRITE_ACK ? "WRITE" : "READ");
        } else if (h->status != 0) {
            status = IXL_ERR_REMOTE_REFUSED;
            snprintf(why, sizeof(why),
                     "NET: '%s' refused frame %u of the %s: outside its registered regions or "
                     "a wrong key",
                     c->peer->name, h->chunk, h->op == NET_WRITE_ACK ? "WRITE" : "READ");
        }
        if (net_req_part_done(e, h->req, status, why) == 1)
            net_peer_submit_notif(c->peer, h->req);
        return 0;
    }
    struct net_hdr r = {.req = h->req, .chunk = h->chunk};
    switch (h->op) {
    case NET_HELLO: {
        struct net_hello hl;
        if (net_hello_decode(c->buf, (size_t)h->len, &hl) != 0)
            return protocol_error(l, c, "a malformed HELLO");
        free(c->buf);
        c->buf = NULL;
        snprintf(c->name, sizeof(c->name), "%s", hl.name);
        c->from_instance = hl.from_instance;
        c->hello_acked = hl.notif_acked;
        c->in_gen = h->req;
        r.op = NET_HELLO_ACK;
        if (hl.to_instance != e->instance) {
            r.status = IXL_ERR_STALE; /* metadata of an earlier instance of this agent */
        } else if (e->auth_mode == IXL_AUTH_KEY) {
            if (!(h->flags & NET_HELLO_F_AUTH)) {
                r.status = IXL_ERR_AUTH;
                refuse_log(e,
                           "NET: refused a connection claiming to be '%s': it offers no "
                           "proof of the cluster key (an agent without IXL_AUTH_KEY?)",
                           c->name);
            } else {
                ixlp_put_le(c->nonce_i, h->addr, 8);
                ixlp_put_le(c->nonce_i + 8, h->key, 8);
                return challenge_send(l, c, h->req);
            }
        } else {
            r.status = name_conn(e, c);
        }
        return hello_ack(l, c, &r);
    }
    case NET_AUTH: {
        uint8_t want[NET_MAC_BYTES];
        r.op = NET_HELLO_ACK;
        if (hello_mac(e, "i2t", c->nonce_i, c->nonce_t, c->name, c->from_instance, e->name,
                      e->instance, want) != IXL_OK ||
            !e->host->auth_equal(want, c->auth_in, NET_MAC_BYTES)) {
            r.status = IXL_ERR_AUTH;
            refuse_log(e,
                       "NET: refused a connection claiming to be '%s': it did not prove "
                       "the cluster key (another key, or none)",
                       c->name);
        } else {
            r.status = name_conn(e, c);
        }
        return hello_ack(l, c, &r);
    }
    case NET_WRITE:
        r.op = NET_WRITE_ACK;
        if (c->stage_slot != NULL)
            return stage_write_end(l, c, &r);
        r.status = c->answer;
        return tx_add(c, &r, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
    case NET_NOTIF: {
        int v = notif_deliver(e, c, h->req, c->buf, (size_t)h->len);
        free(c->buf);
        c->buf = NULL;
        if (v < 0)
            return protocol_error(l, c, "a notification out of sequence");
        c->ack_owed = true;
        if (++c->since_ack < NET_ACK_EVERY) {
            /* The ack rides on the next answer, or goes within NET_ACK_DELAY_NS (acks_due). */
            if (l->ack_at == 0)
                l->ack_at = net_now_ns() + NET_ACK_DELAY_NS;
            return 0;
        }
        struct net_hdr a = {.op = NET_NOTIF_ACK};
        return tx_add(c, &a, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
    }
    default:
        return 0;
    }
}

/* Tells the initiator of c whether it is read (HOLD 0) or not (1). */
static int send_hold(struct net_loop *l, struct net_conn *c, int on)
{
    struct net_hdr h = {.op = NET_HOLD, .status = on};
    c->peer_hold = on != 0;
    c->last_hold = net_now_ns();
    return tx_add(c, &h, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
}

/* The queue of received notifications is full: c stops reading at this NOTIF header until
 * the application drains (net_loops_resume, or the tick). Its initiator is told (HOLD), so
 * that it counts no silence against c and sends its other frames on its other connections. */
static int notif_pause(struct net_loop *l, struct net_conn *c)
{
    c->paused = true;
    c->reading = false;
    return c->peer_hold ? 0 : send_hold(l, c, 1);
}

/* A READ from VRAM region g (inflight held): its bytes are copied into a pinned slot and the
 * answer (r) goes once that copy's event is done. No free slot: the header waits. */
static int stage_read(struct net_loop *l, struct net_conn *c, struct net_region *g,
                      struct net_hdr *r)
{
    struct net_engine *e = l->e;
    struct net_hdr *h = &c->h;
    struct net_slot *slot = stage_slot_get(e, c);
    if (slot == NULL) {
        atomic_fetch_sub(&g->inflight, 1);
        c->stage_wait = true;
        c->reading = false;
        return 0;
    }
    struct net_sgate *gt = net_sgate_new(l, slot, g, h->addr, h->len);
    if (gt == NULL) {
        net_slot_put(slot);
        atomic_fetch_sub(&g->inflight, 1);
        return protocol_error(l, c, "out of memory");
    }
    r->len = h->len;
    struct net_txf *f;
    if (tx_add(c, r, slot->buf, (size_t)h->len, &f) != 0) {
        atomic_fetch_sub(&g->inflight, 1);
        atomic_store(&gt->state, IXL_ERR_CANCELED);
        net_sgate_put(gt);
        net_sgate_put(gt);
        return protocol_error(l, c, "out of memory");
    }
    f->region = g;
    f->gate = gt;
    net_sgate_copy(gt, false);
    return 0;
}

/* The header c->h arrived: checks it and sets up its body. */
static int frame_begin(struct net_loop *l, struct net_conn *c)
{
    struct net_engine *e = l->e;
    struct net_hdr *h = &c->h;
    c->body_off = 0;
    c->body_mode = BODY_DISCARD;
    c->answer = 0;
    c->last_frame = net_now_ns();
    if (c->kind == NC_OUT) {
        if (c->state == NCS_HELLO) {
            bool key = e->auth_mode == IXL_AUTH_KEY;
            if (h->op == NET_CHALLENGE && key && !c->challenged) {
                c->body_mode = BODY_AUTH; /* the target's nonce and MAC */
                c->in_body = true;
                return 0;
            }
            if (h->op != NET_HELLO_ACK)
                return protocol_error(l, c, "no HELLO_ACK");
            free(c->buf);
            c->buf = NULL;
            if (h->status != 0) {
                bool auth = h->status == IXL_ERR_AUTH;
                setup_failed(
                    l, c, auth ? IXL_ERR_AUTH : IXL_ERR_REMOTE_DISCONNECT,
                    h->status == IXL_ERR_STALE
                        ? "it does not answer as the instance its metadata names"
                    : auth && key ? "it refused this agent's proof of the cluster key (the two "
                                    "agents hold different keys)"
                    : auth ? "it requires a cluster key (IXL_AUTH_KEY) and this agent has none"
                           : "it refused the connection");
                return -1;
            }
            if (key && !c->challenged) {
                setup_failed(l, c, IXL_ERR_AUTH,
                             "it accepted the connection without proving the cluster key "
                             "(does it run without IXL_AUTH_KEY?); refused");
                return -1;
            }
            /* What the target delivered of this session leaves the store before anything is
             * sent again. */
            if ((h->flags & NET_F_ACK) && notif_acked(l, c, h->key) != 0)
                return -1;
            struct net_peer *p = c->peer;
            pthread_mutex_lock(&p->lock);
            int current = !atomic_load(&c->doomed) && c->gen == p->gen;
            if (current) {
                c->state = NCS_UP;
                c->up = true;
                p->n_up++;
                if (p->notif_conn == NULL) {
                    p->notif_conn = c;
                    p->un_resend = 0; /* the unacknowledged ones go again, first */
                }
                pthread_cond_broadcast(&p->cond);
            }
            pthread_mutex_unlock(&p->lock);
            if (!current) {
                conn_close(l, c, false, 0, NULL);
                return -1;
            }
            return 0;
        }
        if ((h->flags & NET_F_ACK) && notif_acked(l, c, h->key) != 0)
            return -1;
        if (h->op == NET_PONG || h->op == NET_NOTIF_ACK)
            return 0;
        if (h->op == NET_HOLD) { /* the target stops (1) or starts again (0) reading us */
            c->peer_hold = h->status != 0;
            if (c->peer_hold)
                atomic_store(&c->tx_idle, 0); /* posters queue their frames */
            return 0;
        }
        if (h->op != NET_WRITE_ACK && h->op != NET_READ_DATA)
            return protocol_error(l, c, "a frame a target never sends");
        fold_inline(c);
        if (c->outstanding == 0)
            return protocol_error(l, c, "an answer nobody asked for");
        c->outstanding--;
        c->owed_bytes =
            c->outstanding == 0 ? 0 : c->owed_bytes - c->owed_bytes / (c->outstanding + 1);
        int v = net_req_answer(e, c->peer, h);
        if (v < 0)
            return protocol_error(l, c, "an answer to a frame never sent");
        c->answer = v;
        if (h->op == NET_READ_DATA && h->len > 0) {
            c->body_mode = v == 1 && h->status == 0 ? BODY_PLACE_R : BODY_DISCARD;
            c->in_body = true;
            return 0;
        }
        return frame_end(l, c);
    }
    /* An accepted connection. */
    if (c->state == NCS_AUTH) {
        if (h->op != NET_AUTH) {
            refuse_log(e,
                       "NET: closed a connection claiming to be '%s': it sent a frame "
                       "before proving the cluster key",
                       c->name);
            return protocol_error(l, c, "no AUTH");
        }
        c->body_mode = BODY_AUTH;
        c->in_body = true;
        return 0;
    }
    if (c->state == NCS_HELLO) {
        if (h->op != NET_HELLO)
            return protocol_error(l, c, "no HELLO");
        c->buf = net_sys()->malloc((size_t)h->len);
        if (c->buf == NULL)
            return protocol_error(l, c, "out of memory");
        c->body_mode = BODY_BUF;
        c->in_body = true;
        return 0;
    }
    struct net_hdr r = {.req = h->req, .chunk = h->chunk};
    switch (h->op) {
    case NET_WRITE: {
        if (h->len > SERVE_MAX_FRAME)
            return protocol_error(l, c, "a WRITE frame over 1 GiB");
        pthread_rwlock_rdlock(&e->regions_lock);
        struct net_region *g = net_region_range(e, h->key, h->addr, h->len);
        int ok = g != NULL && (!g->vram || (h->len <= NET_STAGE_FRAME && e->dev != NULL));
        bool vram = ok && g->vram;
        pthread_rwlock_unlock(&e->regions_lock);
        if (vram && c->stage_slot == NULL) {
            /* Into VRAM: received into a pinned slot, then copied (net_stage.c). */
            c->stage_slot = stage_slot_get(e, c);
            if (c->stage_slot == NULL) {
                c->stage_wait = true; /* this header waits until a slot comes free */
                c->reading = false;
                return 0;
            }
        }
        c->answer = ok ? 0 : IXL_ERR_REMOTE_REFUSED;
        c->body_mode = vram ? BODY_STAGE : ok ? BODY_PLACE_W : BODY_DISCARD;
        c->in_body = true;
        c->held = ok && overlaps_answers(c, h->addr, h->len);
        if (h->len == 0 && vram) { /* nothing to copy */
            net_slot_put(c->stage_slot);
            c->stage_slot = NULL;
            c->body_mode = BODY_DISCARD;
        }
        return 0;
    }
    case NET_READ: {
        r.op = NET_READ_DATA;
        pthread_rwlock_rdlock(&e->regions_lock);
        struct net_region *g = net_region_range(e, h->key, h->addr, h->len);
        if (g != NULL && g->vram && (h->len > NET_STAGE_FRAME || h->len == 0 || e->dev == NULL))
            g = NULL; /* frames from VRAM fit one staging slot */
        if (g != NULL)
            atomic_fetch_add(&g->inflight, 1); /* seen by a deregistration from now on */
        pthread_rwlock_unlock(&e->regions_lock);
        if (g != NULL && g->vram)
            return stage_read(l, c, g, &r);
        if (g == NULL)
            r.status = IXL_ERR_REMOTE_REFUSED;
        else
            r.len = h->len;
        struct net_txf *f;
        if (tx_add(c, &r, g ? (void *)(uintptr_t)h->addr : NULL, g ? (size_t)h->len : 0, &f) != 0) {
            if (g)
                atomic_fetch_sub(&g->inflight, 1);
            return protocol_error(l, c, "out of memory");
        }
        f->region = g;
        return 0;
    }
    case NET_NOTIF:
        if (h->len > e->notif_max)
            return protocol_error(l, c, "a notification over the documented maximum");
        if (!net_notif_room(e, (size_t)h->len))
            return notif_pause(l, c); /* the header waits in c->h */
        c->buf = net_sys()->malloc(h->len ? (size_t)h->len : 1);
        if (c->buf == NULL)
            return protocol_error(l, c, "out of memory");
        c->body_mode = BODY_BUF;
        if (h->len == 0)
            return frame_end(l, c);
        c->in_body = true;
        return 0;
    case NET_PING:
        r.op = NET_PONG;
        /* A PONG always says what was delivered (a sender settling asks for it so). */
        c->ack_owed = c->ack_owed || c->inname != NULL;
        return tx_add(c, &r, NULL, 0, NULL) == 0 ? 0 : protocol_error(l, c, "out of memory");
    default:
        return protocol_error(l, c, "a frame a target never receives");
    }
}

/* Whether c's initiator instance has set up a newer connection generation than c's: its
 * frames on c belong to requests it failed at that teardown, and a WRITE among them must not
 * land after the newer generation's (their bytes may still wait in c's socket buffer). */
static bool superseded(const struct net_conn *c)
{
    const struct net_inname *x = c->inname;
    return x != NULL && atomic_load(&x->instance) == c->from_instance &&
           atomic_load(&x->max_gen) > c->in_gen;
}

/* Where the next n body bytes go: moves them from src (n bytes read into the scratch buffer)
 * or, with src NULL, receives up to n straight from the socket. The destination is looked up
 * again each time, under a reference held only for this copy or non-blocking recv: a request
 * released or a region deregistered meanwhile turns the rest of the body into discard.
 * Returns the bytes consumed, 0 at EOF, -1 with errno. */
static ssize_t body_move(struct net_loop *l, struct net_conn *c, const uint8_t *src, size_t n)
{
    struct net_engine *e = l->e;
    char *dst = NULL;
    struct net_req *r = NULL;
    int locked = 0;
    if (c->body_mode == BODY_PLACE_W) {
        pthread_rwlock_rdlock(&e->regions_lock);
        locked = 1;
        if (superseded(c)) { /* the initiator set up a newer generation: it failed this one */
            c->body_mode = BODY_DISCARD;
            c->answer = IXL_ERR_REMOTE_DISCONNECT;
        } else if (net_region_range(e, c->h.key, c->h.addr, c->h.len) != NULL) {
            dst = (char *)(uintptr_t)c->h.addr + c->body_off;
        } else { /* deregistered in the middle of the frame */
            c->body_mode = BODY_DISCARD;
            c->answer = IXL_ERR_REMOTE_REFUSED;
        }
    } else if (c->body_mode == BODY_STAGE) {
        dst = (char *)c->stage_slot->buf + c->body_off; /* copied to VRAM at the frame's end */
    } else if (c->body_mode == BODY_PLACE_R) {
        r = net_req_get_busy(e, c->h.req);
        const struct net_chunk *ch = r ? &r->chunks[c->h.chunk] : NULL;
        if (r != NULL && r->stage_local && ch->slot == NULL) {
            net_req_unbusy(e, r); /* cannot be: a staged READ is sent with its slot */
            r = NULL;
        }
        if (r != NULL)
            dst = r->stage_local ? (char *)ch->slot->buf + c->body_off /* then to VRAM */
                                 : (char *)(uintptr_t)ch->laddr + c->body_off;
        else
            c->body_mode = BODY_DISCARD; /* released: the rest is drained */
    } else if (c->body_mode == BODY_BUF) {
        dst = (char *)c->buf + c->body_off;
    } else if (c->body_mode == BODY_AUTH) {
        dst = (char *)c->auth_in + c->body_off; /* decode bounds its length */
    }
    ssize_t got;
    if (src != NULL) {
        if (dst != NULL)
            memcpy(dst, src, n);
        got = (ssize_t)n;
    } else {
        got = net_sys()->recv(c->fd, dst ? dst : (char *)l->scratch,
                              dst ? n : (n < SCRATCH_BYTES ? n : SCRATCH_BYTES), MSG_DONTWAIT);
    }
    int err = errno;
    if (locked)
        pthread_rwlock_unlock(&e->regions_lock);
    if (r != NULL)
        net_req_unbusy(e, r);
    errno = err;
    return got;
}

/* The header in hbuf is whole: its frame begins. -1: c was closed. */
static int header_whole(struct net_loop *l, struct net_conn *c)
{
    c->hgot = 0;
    if (net_hdr_decode(c->hbuf, &c->h) != 0)
        return protocol_error(l, c, "a malformed frame header");
    return frame_begin(l, c);
}

/* Parses n bytes read into the scratch buffer. -1: c was closed. */

static int parse(struct net_loop *l, struct net_conn *c, const uint8_t *p, size_t n)
{
    while (n > 0 && !c->closed && !c->linger) {
        if (!c->in_body) {
            size_t k = NET_HDR_BYTES - c->hgot < n ? NET_HDR_BYTES - c->hgot : n;
            memcpy(c->hbuf + c->hgot, p, k);
            c->hgot += (uint32_t)k;
            p += k;
            n -= k;
            if (c->hgot < NET_HDR_BYTES)
                break;
            if (header_whole(l, c) != 0)
                return -1;
            if (c->paused || c->stage_wait) { /* the rest waits (a drain, a staging slot) */
                if (n > 0) {
                    uint8_t *keep = net_sys()->malloc(n);
                    if (keep == NULL)
                        return protocol_error(l, c, "out of memory");
                    memcpy(keep, p, n);
                    c->stash = keep;
                    c->stash_len = n;
                }
                return 0;
            }
            continue;
        }
        if (c->held) { /* the rest waits until the READ answers before it are sent */
            uint8_t *keep = net_sys()->malloc(n);
            if (keep == NULL)
                return protocol_error(l, c, "out of memory");
            memcpy(keep, p, n);
            c->stash = keep;
            c->stash_len = n;
            c->reading = false;
            return 0;
        }
        uint64_t left = c->h.len - c->body_off;
        size_t k = left < n ? (size_t)left : n;
        body_move(l, c, p, k);
        c->body_off += k;
        p += k;
        n -= k;
        if (c->body_off == c->h.len) {
            c->in_body = false;
            if (frame_end(l, c) != 0)
                return -1;
        }
    }
    return c->closed || c->linger ? -1 : 0;
}

/* Reads what c's socket has (up to RX_BUDGET). -1: c was closed. */
static int conn_read(struct net_loop *l, struct net_conn *c)
{
    size_t budget = RX_BUDGET;
    /* A header a caller read and left (watch_take): its frame goes on first. */
    if (!c->in_body && c->hgot == NET_HDR_BYTES && !c->closed && header_whole(l, c) != 0)
        return c->closed ? -1 : 0;
    while (budget > 0 && c->reading && !c->closed && !c->held) {
        ssize_t got;
        uint64_t left = c->in_body ? c->h.len - c->body_off : 0;
        /* A read shorter than asked drained the socket: between frames the loop's
         * (level-triggered) epoll says when more comes, without another recv that finds
         * nothing. */
        size_t asked = SCRATCH_BYTES;
        if (c->in_body && c->body_mode != BODY_DISCARD && left >= DIRECT_MIN) {
            size_t want = left < budget ? (size_t)left : budget;
            asked = want < SCRATCH_BYTES ? want : SCRATCH_BYTES; /* at least this was asked */
            got = body_move(l, c, NULL, want);
            if (got > 0) {
                c->body_off += (uint64_t)got;
                if (c->body_off == c->h.len) {
                    c->in_body = false;
                    if (frame_end(l, c) != 0)
                        return c->closed ? -1 : 0;
                }
            }
        } else {
            got = net_sys()->recv(c->fd, l->scratch, SCRATCH_BYTES, MSG_DONTWAIT);
            if (got > 0 && parse(l, c, l->scratch, (size_t)got) != 0)
                return c->closed ? -1 : 0;
        }
        if (got == 0 && c->kind == NC_IN && tx_pending(c) > 0) {
            c->linger = true; /* the peer is done sending: its answers go, then we close */
            c->reading = false;
            return 0;
        }
        if (got == 0) {
            char why[NET_WHY];
            snprintf(why, sizeof(why), "NET: '%s' closed the connection",
                     c->kind == NC_OUT ? c->peer->name : c->name);
            if (c->kind == NC_OUT)
                fold_inline(c);
            /* A target closing an idle connection (its idle_ms) loses nothing. */
            bool idle = c->kind == NC_OUT && c->state == NCS_UP && c->outstanding == 0 &&
                        tx_pending(c) == 0 && !c->in_body && c->hgot == 0;
            conn_close(l, c, !idle, IXL_ERR_REMOTE_DISCONNECT, why);
            return -1;
        }
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_broke(l, c, "recv", errno);
            return -1;
        }
        c->last_rx = net_now_ns();
        budget -= (size_t)got < budget ? (size_t)got : budget;
        if (c->kind == NC_IN && tx_pending(c) >= TX_SOFT)
            c->reading = false; /* the peer does not read its answers: neither do we */
        if ((size_t)got < asked && !c->in_body && c->hgot == 0)
            break; /* between frames; within a body more may have come meanwhile */
    }
    return c->closed ? -1 : 0;
}

/* conn_read with c's receive side held (an initiator's connection, whose answers callers may
 * read too: net_tcp_watch). */
static int conn_read_rx(struct net_loop *l, struct net_conn *c, bool *skipped)
{
    if (c->kind != NC_OUT)
        return conn_read(l, c);
    /* Tried: a caller holding it was woken by the same bytes and takes them (or lets go) in
     * microseconds; the level-triggered epoll reports c again if anything is left. */
    if (pthread_mutex_trylock(&c->rxlock) != 0) {
        *skipped = true;
        return 0;
    }
    c->rx_mine = true;
    int rc = conn_read(l, c);
    c->rx_mine = false;
    pthread_mutex_unlock(&c->rxlock);
    return rc;
}

/* ---- the listener ----------------------------------------------------------------------- */

static void adopt(struct net_loop *l, struct net_conn *c)
{
    if (c->kind == NC_IN)
        c->loop = l; /* an initiator's connection got its loop when it was made */
    c->adopted = true;
    c->next = l->conns;
    c->prev = NULL;
    if (l->conns)
        l->conns->prev = c;
    l->conns = c;
    if (c->kind == NC_OUT) {
        if (atomic_load(&c->doomed))
            conn_close(l, c, false, 0, NULL); /* torn down before it was dialed */
        else
            dial_next(l, c);
        return;
    }
    struct epoll_event x = {.events = EPOLLIN, .data.ptr = c};
    if (net_sys()->epoll_ctl(l->epfd, EPOLL_CTL_ADD, c->fd, &x) != 0) {
        conn_close(l, c, false, 0, NULL);
        return;
    }
    c->events = EPOLLIN;
    c->reading = true;
}

/* Hands c to loop l (any thread): false when l has exited (engine destroy). */
static bool hand_over(struct net_loop *l, struct net_conn *c)
{
    pthread_mutex_lock(&l->lock);
    bool ok = !l->exited;
    if (ok) {
        c->inext = l->inbox;
        l->inbox = c;
    }
    pthread_mutex_unlock(&l->lock);
    if (ok)
        loop_wake(l);
    return ok;
}

static void shed_log(struct net_engine *e, const char *why)
{
    uint64_t now = net_now_ns();
    if (now - e->last_shed_log > 1000000000ull) {
        e->last_shed_log = now;
        e->host->log(e->host->ctx, IXL_LOG_WARN, "NET: closed an incoming connection at once: %s",
                     why);
    }
}

static void accept_some(struct net_loop *l)
{
    struct net_engine *e = l->e;
    for (int k = 0; k < ACCEPTS_PER_EVENT; k++) {
        int fd = net_sys()->accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if ((errno == EMFILE || errno == ENFILE) && e->spare_fd >= 0) {
                /* Out of descriptors: shed the connection so the backlog drains instead of
                 * waking this loop forever. */
                net_sys()->close(e->spare_fd);
                e->spare_fd = -1;
                fd = net_sys()->accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0)
                    net_sys()->close(fd);
                e->spare_fd = net_sys()->open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
                shed_log(e, "out of file descriptors (RLIMIT_NOFILE)");
                if (fd >= 0)
                    continue;
            }
            break;
        }
        if (atomic_load(&e->n_in) >= e->max_conns) {
            net_sys()->close(fd);
            shed_log(e, "max_conns connections are open");
            continue;
        }
        if (e->auth_mode == IXL_AUTH_LOCAL && e->can_check_peer) {
            /* No key: only processes of this user, as the kernel tells, before any byte. */
            char why[160] = "";
            if (e->host->peer_check(e->host->ctx, fd, NULL, why, sizeof(why)) != IXL_OK) {
                net_sys()->close(fd);
                refuse_log(e,
                           "NET: refused a connection: %s (without a cluster key only "
                           "processes of this user may connect)",
                           why);
                continue;
            }
        }
        struct net_conn *c = net_sys()->calloc(1, sizeof(*c));
        if (c == NULL) {
            net_sys()->close(fd);
            continue;
        }
        int one = 1;
        net_sys()->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pthread_mutex_init(&c->txlock, NULL);
        pthread_mutex_init(&c->evlock, NULL);
        rxlock_init(c);
        c->e = e;
        c->kind = NC_IN;
        c->state = NCS_HELLO;
        c->fd = fd;
        c->last_rx = c->last_tx = c->last_frame = net_now_ns();
        c->deadline = c->last_rx + e->timeout_ns; /* its HELLO is due by then */
        atomic_fetch_add(&e->n_in, 1);
        struct net_loop *to = &e->loops[atomic_fetch_add(&e->next_loop, 1) % (unsigned)e->n_loops];
        if (to == l) {
            adopt(l, c);
        } else if (!hand_over(to, c)) {
            atomic_fetch_sub(&e->n_in, 1);
            net_sys()->close(fd);
            free(c);
        }
    }
}

/* A connection paused at a NOTIF header reads again when the queue has room: true when it
 * was resumed (it may pause again at a later notification), false when still paused. */
static bool frame_resume(struct net_loop *l, struct net_conn *c);

static bool notif_resume(struct net_loop *l, struct net_conn *c)
{
    if (!c->paused || !net_notif_room(l->e, (size_t)c->h.len))
        return false;
    c->paused = false;
    return frame_resume(l, c);
}

/* A connection whose frame to or from VRAM waits for a staging slot tries again. */
static bool stage_resume(struct net_loop *l, struct net_conn *c)
{
    if (!c->stage_wait || c->closed)
        return false;
    c->stage_wait = false;
    return frame_resume(l, c);
}

/* The header waiting in c->h is taken again, then the input stashed after it. */
static bool frame_resume(struct net_loop *l, struct net_conn *c)
{
    if (frame_begin(l, c) != 0 || c->paused || c->stage_wait)
        return !(c->paused || c->stage_wait);
    uint8_t *st = c->stash;
    size_t n = c->stash_len;
    c->stash = NULL;
    c->stash_len = 0;
    int rc = st ? parse(l, c, st, n) : 0;
    free(st);
    if (c->closed)
        return true;
    if (rc == 0 && !c->held && !c->paused && !c->stage_wait && !c->linger) {
        read_again(c);
        if (c->peer_hold && send_hold(l, c, 0) != 0)
            return true;
    }
    conn_flush(l, c); /* its events follow reading */
    return true;
}

void net_loop_kick(struct net_loop *l)
{
    atomic_store(&l->stage_kick, 1);
    loop_wake(l);
}

void net_loops_stage_kick(struct net_engine *e)
{
    for (int i = 0; i < e->n_loops; i++)
        if (e->loops[i].e != NULL)
            net_loop_kick(&e->loops[i]);
}

/* Staged device copies ended or slots came free: gated answers go, waiting frames retry. */
static void stage_kicked(struct net_loop *l)
{
    for (struct net_conn *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (c->closed)
            continue;
        /* Answers first: their slots may be what a waiting frame needs. */
        if (tx_pending(c) > 0 && c->state == NCS_UP && conn_flush(l, c) != 0)
            continue;
        if (c->stage_wait)
            stage_resume(l, c);
    }
}

void net_loops_resume(struct net_engine *e)
{
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        if (l->e == NULL)
            continue;
        atomic_store(&l->resume, 1);
        loop_wake(l);
    }
}

/* ---- timers ------------------------------------------------------------------------------- */

/* now - t, 0 when t is later (a time set after now was read). */
static uint64_t since(uint64_t now, uint64_t t)
{
    return now > t ? now - t : 0;
}

/* Whether idle c may close: no poster sent on it since the last fold, and none will (the
 * socket is closed to them from now on). */
static bool shut_idle(struct net_conn *c)
{
    pthread_mutex_lock(&c->txlock);
    bool idle = atomic_load(&c->inl_out) == 0 && !atomic_load(&c->inl_handoff) &&
                !atomic_load(&c->inl_nowed);
    if (idle)
        c->tx_closed = true;
    pthread_mutex_unlock(&c->txlock);
    return idle;
}

static void tick(struct net_loop *l, uint64_t now)
{
    struct net_engine *e = l->e;
    bool cut = atomic_exchange(&l->cut_regions, 0) != 0;
    for (struct net_conn *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (c->closed)
            continue;
        char why[NET_WHY];
        if (cut && c->kind == NC_IN) {
            bool holds = false;
            for (uint32_t i = c->tx_head; i < c->tx_n && !holds; i++)
                holds = c->tx[i].region && atomic_load(&c->tx[i].region->cut);
            if (holds) {
                e->host->log(e->host->ctx, IXL_LOG_WARN,
                             "NET: closing the connection of '%s': it holds a region being "
                             "deregistered for more than %llu ms",
                             c->name, (unsigned long long)(e->timeout_ns / 1000000u));
                conn_close(l, c, false, 0, NULL);
                continue;
            }
        }
        bool stalled_tx = tx_pending(c) > 0 && since(now, c->last_tx) > e->timeout_ns;
        if (c->kind == NC_OUT) {
            if (c->state != NCS_UP) {
                if (now >= c->deadline) {
                    if (c->state == NCS_DIAL)
                        set_cause(c, "connect", ETIMEDOUT);
                    setup_failed(l, c, IXL_ERR_REMOTE_DISCONNECT,
                                 c->state == NCS_DIAL ? "no answer"
                                                      : "it accepted but did not answer");
                }
                continue;
            }
            fold_inline(c);
            if (atomic_load(&c->parked) && since(now, atomic_load(&c->parked_at)) > NET_PARK_NS)
                rx_park(c, false); /* its caller polls no more, or rarely: the loop reads */
            if (c->peer_hold) {
                /* The target stopped reading at our notification (its application does not
                 * drain): it says HOLD every heartbeat, and only its silence counts. */
                if (since(now, c->last_rx) > e->timeout_ns) {
                    snprintf(why, sizeof(why),
                             "NET: '%s' held the connection and then was silent for more than "
                             "%llu ms",
                             c->peer->name, (unsigned long long)(e->timeout_ns / 1000000u));
                    conn_close(l, c, true, IXL_ERR_REMOTE_DISCONNECT, why);
                }
                continue;
            }
            if (c->nowed) { /* notifications sent on c that the peer has not acknowledged */
                struct net_peer *p = c->peer;
                pthread_mutex_lock(&p->lock);
                c->nowed = p->notif_conn == c && p->un_len > 0;
                pthread_mutex_unlock(&p->lock);
            }
            bool owed = c->outstanding > 0 || c->nowed;
            if ((owed && since(now, c->last_rx) > e->timeout_ns) || stalled_tx) {
                snprintf(why, sizeof(why),
                         "NET: '%s' was silent for more than %llu ms with work outstanding",
                         c->peer->name, (unsigned long long)(e->timeout_ns / 1000000u));
                e->host->log(e->host->ctx, IXL_LOG_WARN, "%s: disconnecting", why);
                conn_close(l, c, true, IXL_ERR_REMOTE_DISCONNECT, why);
                continue;
            }
            if (owed && since(now, c->last_rx) > e->heartbeat_ns &&
                since(now, c->last_tx) > e->heartbeat_ns) {
                struct net_hdr h = {.op = NET_PING}; /* a sign of life, please */
                if (tx_add(c, &h, NULL, 0, NULL) == 0)
                    conn_flush(l, c);
                continue;
            }
            uint64_t act = c->last_rx > c->last_tx ? c->last_rx : c->last_tx;
            if (e->idle_ns && !owed && tx_pending(c) == 0 && since(now, act) > e->idle_ns / 2 &&
                shut_idle(c))
                conn_close(l, c, false, 0, NULL); /* before the target's idle_ms closes it */
            continue;
        }
        if ((c->state == NCS_HELLO || c->state == NCS_AUTH) && !c->linger) {
            if (now >= c->deadline)
                conn_close(l, c, false, 0, NULL); /* no HELLO (or AUTH) in timeout_ms */
            continue;
        }
        if (c->ack_owed && c->state == NCS_UP && !c->linger) {
            /* Notifications delivered since the last ack, and no answer to carry it. */
            struct net_hdr a = {.op = NET_NOTIF_ACK};
            if (tx_add(c, &a, NULL, 0, NULL) != 0 || conn_flush(l, c) != 0)
                continue;
        }
        if (c->stage_wait) { /* a frame to or from VRAM waits for a staging slot */
            if (stalled_tx)
                conn_close(l, c, false, 0, NULL);
            else if (conn_flush(l, c) == 0)
                stage_resume(l, c);
            continue;
        }
        if (c->paused) { /* neither idle nor stalled: waiting for the application */
            if (stalled_tx) {
                conn_close(l, c, false, 0, NULL); /* and its peer does not read */
            } else if (!notif_resume(l, c) && !c->closed &&
                       since(now, c->last_hold) >= e->heartbeat_ns) {
                if (send_hold(l, c, 1) == 0) /* a sign of life for the initiator's timers */
                    conn_flush(l, c);
            }
            continue;
        }
        /* Silence mid-frame counts only while c reads (not while it holds a WRITE until the
         * READ answers before it are out, or reads no more until its answers are taken). */
        bool mid_frame = c->in_body || c->hgot > 0;
        if ((mid_frame && c->reading && since(now, c->last_rx) > e->timeout_ns) || stalled_tx) {
            conn_close(l, c, false, 0, NULL); /* stalls a frame, or does not read answers */
            continue;
        }
        if (e->idle_ns && !mid_frame && tx_pending(c) == 0 && since(now, c->last_rx) > e->idle_ns)
            conn_close(l, c, false, 0, NULL);
    }
}

/* ---- the loop ----------------------------------------------------------------------------- */

static void take_lists(struct net_loop *l)
{
    uint64_t v;
    atomic_store(&l->woken, 0);
    if (net_sys()->read(l->evfd, &v, sizeof(v)) < 0) {
        /* EAGAIN: a wake that another pass consumed */
    }
    pthread_mutex_lock(&l->lock);
    struct net_conn *in = l->inbox;
    l->inbox = NULL;
    pthread_mutex_unlock(&l->lock);
    while (in) {
        struct net_conn *c = in;
        in = c->inext;
        adopt(l, c);
    }
    /* The reap and ready lists are taken one connection at a time under the lock: other
     * threads put connections on them meanwhile (a connection off a list may go back on). */
    for (;;) {
        pthread_mutex_lock(&l->lock);
        struct net_conn *c = l->reap;
        if (c) {
            l->reap = c->knext;
            c->on_reap = false;
        }
        pthread_mutex_unlock(&l->lock);
        if (c == NULL)
            break;
        /* One still in the inbox (handed over after it was taken above) closes when it is
         * adopted: it is doomed. */
        if (!c->closed && c->adopted)
            conn_close(l, c, false, 0, NULL);
    }
    for (;;) {
        pthread_mutex_lock(&l->lock);
        struct net_conn *c = l->ready;
        if (c) {
            l->ready = c->rnext;
            c->on_ready = false;
        }
        pthread_mutex_unlock(&l->lock);
        if (c == NULL)
            break;
        if (!c->closed && c->state == NCS_UP &&
            (tx_pending(c) == 0 || atomic_load(&c->inl_handoff)))
            conn_flush(l, c);
    }
    if (atomic_exchange(&l->resume, 0) != 0)
        for (struct net_conn *c = l->conns; c; c = c->next)
            if (!c->closed && c->paused)
                notif_resume(l, c);
    if (atomic_exchange(&l->stage_kick, 0) != 0)
        stage_kicked(l);
    if (atomic_exchange(&l->rx_kick, 0) != 0)
        for (struct net_conn *c = l->conns, *next; c; c = next) {
            next = c->next;
            bool skipped = false;
            if (!c->closed && c->reading && atomic_exchange(&c->rx_left, 0) != 0)
                (void)conn_read_rx(l, c, &skipped);
        }
}

/* Acks of notifications owed on l's connections go now, in a NOTIF_ACK each (no answer
 * carried them within NET_ACK_DELAY_NS). */
static void acks_due(struct net_loop *l)
{
    l->ack_at = 0;
    for (struct net_conn *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (c->closed || c->kind != NC_IN || !c->ack_owed || c->state != NCS_UP || c->linger)
            continue;
        struct net_hdr a = {.op = NET_NOTIF_ACK};
        if (tx_add(c, &a, NULL, 0, NULL) == 0)
            conn_flush(l, c);
    }
}

/* loop_nice (0 by default): this thread's nice raised by it (at most 19). On one CPU, the
 * answer to a caller's frame wakes both the caller (asleep in its watch, or preempted at its
 * send) and this side's loop; at the same priority the scheduler often ran the loop first,
 * which read the answer and handed the request over, a switch more per request (a checked
 * 4 KiB TCP WRITE, both processes on one CPU: 23 us in that mode, 17.5 with the loops at +5;
 * docs/benchmarks.md, which also has why it is not the default). Raising one's own nice needs
 * no privilege; where it is refused (a seccomp filter) the loop keeps the creating thread's. */
static void loop_lower_priority(const struct net_engine *e)
{
    if (e->loop_nice <= 0)
        return;
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, tid);
    if (cur == -1 && errno != 0)
        return;
    int want = cur + e->loop_nice > 19 ? 19 : cur + e->loop_nice;
    (void)setpriority(PRIO_PROCESS, tid, want);
}

static void *loop_main(void *arg)
{
    struct net_loop *l = arg;
    struct net_engine *e = l->e;
    loop_lower_priority(e);
    struct epoll_event evs[MAX_EVENTS];
    uint64_t tick_ns = e->heartbeat_ns / 4;
    if (tick_ns < 5000000u)
        tick_ns = 5000000u;
    if (tick_ns > 100000000u)
        tick_ns = 100000000u;
    l->next_tick = net_now_ns() + tick_ns;
    bool skipped = false;    /* a caller held a connection's receive side */
    uint64_t busy_until = 0; /* busy_poll_us: no sleep before this (after the last event) */
    while (!atomic_load(&e->stopping)) {
        if (skipped) /* it is runnable (the same bytes woke it): let it take them first */
            sched_yield();
        skipped = false;
        uint64_t now = net_now_ns();
        uint64_t until = l->ack_at && l->ack_at < l->next_tick ? l->ack_at : l->next_tick;
        int ms = now >= until || now < busy_until ? 0 : (int)((until - now + 999999u) / 1000000u);
        int n = net_sys()->epoll_wait(l->epfd, evs, MAX_EVENTS, ms);
        if (n > 0 && e->busy_poll_ns != 0)
            busy_until = net_now_ns() + e->busy_poll_ns;
        if (n < 0 && errno != EINTR) {
            struct timespec pause = {0, 10000000}; /* refused (a test): do not spin */
            nanosleep(&pause, NULL);
        }
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == (void *)l) {
                take_lists(l);
                continue;
            }
            if (tag == LISTEN_TAG) {
                accept_some(l);
                continue;
            }
            struct net_conn *c = tag;
            if (c->closed)
                continue;
            uint32_t ev = evs[i].events;
            if (c->state == NCS_DIAL && c->kind == NC_OUT) {
                dial_done(l, c);
                continue;
            }
            if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c->reading &&
                conn_read_rx(l, c, &skipped) != 0)
                continue;
            if ((ev & (EPOLLHUP | EPOLLERR)) && !c->reading) {
                conn_close(l, c, true, IXL_ERR_REMOTE_DISCONNECT, "NET: the connection broke");
                continue;
            }
            conn_flush(l, c);
        }
        if (l->ack_at && net_now_ns() >= l->ack_at)
            acks_due(l);
        free_dead(l);
        if (net_now_ns() >= l->next_tick || atomic_load(&l->cut_regions)) {
            take_lists(l);      /* in case a wake's eventfd write was refused */
            now = net_now_ns(); /* after take_lists: the times it sets are not in the future */
            tick(l, now);
            free_dead(l);
            l->next_tick = now + tick_ns;
        }
    }
    /* Destroy: nothing more is handed to this loop; every connection closes. */
    pthread_mutex_lock(&l->lock);
    l->exited = true;
    pthread_mutex_unlock(&l->lock);
    take_lists(l);
    for (struct net_conn *c = l->conns; c; c = c->next) {
        if (!c->closed && c->kind == NC_IN && c->ack_owed && c->state == NCS_UP && !c->linger) {
            /* What was delivered is acknowledged before the close: the sender then knows
             * nothing of it is lost (one small frame, sent if the socket takes it now). */
            struct net_hdr a = {.op = NET_NOTIF_ACK};
            if (tx_add(c, &a, NULL, 0, NULL) == 0)
                conn_flush(l, c);
        }
        conn_close(l, c, false, IXL_ERR_REMOTE_DISCONNECT, "NET: the agent is being destroyed");
    }
    free_dead_all(l, true); /* no caller looks at a connection of a destroyed engine */
    return NULL;
}

static int listen_start(struct net_engine *e)
{
    int fd = net_sys()->socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return net_error(e, IXL_ERR_SYSTEM, "NET: socket: %s", strerror(errno));
    int one = 1;
    net_sys()->setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->port)};
    inet_pton(AF_INET, e->listen_addr, &sa.sin_addr);
    const char *call = "bind";
    if (net_sys()->bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        (call = "listen", net_sys()->listen(fd, 4096)) != 0) {
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
    struct epoll_event x = {.events = EPOLLIN, .data.ptr = LISTEN_TAG};
    if (net_sys()->epoll_ctl(e->loops[0].epfd, EPOLL_CTL_ADD, fd, &x) != 0)
        return net_error(e, IXL_ERR_SYSTEM, "NET: epoll_ctl of its listener: %s", strerror(errno));
    e->spare_fd = net_sys()->open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
    return IXL_OK;
}

int net_loops_start(struct net_engine *e)
{
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        l->e = e;
        l->idx = i;
        l->epfd = l->evfd = -1;
        pthread_mutex_init(&l->lock, NULL);
    }
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        l->scratch = net_sys()->malloc(SCRATCH_BYTES);
        if (l->scratch == NULL)
            return net_error(e, IXL_ERR_NO_MEMORY, "NET: out of memory for its event loops");
        l->epfd = net_sys()->epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0)
            return net_error(e, IXL_ERR_SYSTEM, "NET: epoll_create1: %s", strerror(errno));
        l->evfd = net_sys()->eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (l->evfd < 0)
            return net_error(e, IXL_ERR_SYSTEM, "NET: eventfd: %s", strerror(errno));
        struct epoll_event x = {.events = EPOLLIN, .data.ptr = l};
        if (net_sys()->epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &x) != 0)
            return net_error(e, IXL_ERR_SYSTEM, "NET: epoll_ctl: %s", strerror(errno));
    }
    int rc = listen_start(e);
    if (rc != IXL_OK)
        return rc;
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        int te = net_sys()->pthread_create(&l->thread, NULL, loop_main, l);
        if (te != 0)
            return net_error(e, IXL_ERR_SYSTEM,
                             "NET: cannot start its event loop threads: pthread_create: %s",
                             strerror(te));
        l->started = true;
        char name[16]; /* a name for top -H and perf (15 characters at most) */
        snprintf(name, sizeof(name), "ixl-net-loop%d", i % 100);
        pthread_setname_np(l->thread, name);
    }
    return IXL_OK;
}

void net_loops_stop(struct net_engine *e)
{
    atomic_store(&e->stopping, 1);
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        if (l->started) {
            atomic_store(&l->woken, 0);
            loop_wake(l);
            pthread_join(l->thread, NULL);
            l->started = false;
        } else if (l->e != NULL) {
            /* Never ran (engine creation failed part-way): only the listener's loop can have
             * handed it accepted connections. */
            pthread_mutex_lock(&l->lock);
            l->exited = true;
            struct net_conn *in = l->inbox;
            l->inbox = NULL;
            pthread_mutex_unlock(&l->lock);
            while (in) {
                struct net_conn *c = in;
                in = c->inext;
                atomic_fetch_sub(&e->n_in, 1);
                net_sys()->close(c->fd);
                free(c);
            }
        }
    }
    for (int i = 0; i < e->n_loops; i++) {
        struct net_loop *l = &e->loops[i];
        if (l->e == NULL)
            continue;
        if (l->evfd >= 0)
            net_sys()->close(l->evfd);
        if (l->epfd >= 0)
            net_sys()->close(l->epfd);
        free(l->scratch);
        pthread_mutex_destroy(&l->lock);
        l->e = NULL;
    }
    if (e->listen_fd >= 0)
        net_sys()->close(e->listen_fd);
    e->listen_fd = -1;
    if (e->spare_fd >= 0)
        net_sys()->close(e->spare_fd);
    e->spare_fd = -1;
}

void net_loops_cut_regions(struct net_engine *e)
{
    for (int i = 0; i < e->n_loops; i++) {
        /* The tick looks at it; the loop runs one at once when it sees it set (next_tick is
         * the loop's own). */
        atomic_store(&e->loops[i].cut_regions, 1);
        loop_wake(&e->loops[i]);
    }
}

/* ---- peers: queues, dialing, teardown (any thread) ---------------------------------------- */

/* Puts c on its loop's ready list; returns the loop to wake (p->lock held). */
static void mark_ready(struct net_conn *c, struct net_loop **wake, int *n_wake)
{
    struct net_loop *l = c->loop;
    if (l == NULL)
        return; /* not adopted yet: it pulls when it comes up */
    pthread_mutex_lock(&l->lock);
    if (!c->on_ready) {
        c->on_ready = true;
        c->rnext = l->ready;
        l->ready = c;
    }
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < *n_wake; i++)
        if (wake[i] == l)
            return;
    wake[(*n_wake)++] = l;
}

/* Makes sure p's queue gets served (p->lock held): dials when p has no connection, else
 * marks its connections ready. The loops to wake are returned in wake. */
static int serve_queue(struct net_peer *p, struct net_loop **wake, int *n_wake)
{
    struct net_engine *e = p->e;
    if (p->n_conns > 0) {
        for (int i = 0; i < p->n_conns; i++)
            if (p->conns[i]->up)
                mark_ready(p->conns[i], wake, n_wake);
        return IXL_OK;
    }
    uint32_t addrs[NET_MAX_ADDRS];
    memcpy(addrs, p->addrs, sizeof(addrs));
    if (p->same_host) { /* the loopback address first: no trip through a real interface */
        for (int i = 1; i < p->n_addrs; i++) {
            if (addrs[i] == htonl(INADDR_LOOPBACK)) {
                uint32_t t = addrs[0];
                addrs[0] = addrs[i];
                addrs[i] = t;
            }
        }
    }
    uint64_t deadline = net_now_ns() + e->timeout_ns;
    struct net_conn *made[NET_MAX_CONNS];
    int n = 0;
    for (int k = 0; k < e->n_conns; k++) {
        struct net_conn *c = net_sys()->calloc(1, sizeof(*c));
        if (c == NULL)
            break;
        pthread_mutex_init(&c->txlock, NULL);
        pthread_mutex_init(&c->evlock, NULL);
        rxlock_init(c);
        c->e = e;
        c->peer = p;
        c->kind = NC_OUT;
        c->state = NCS_DIAL;
        c->fd = -1;
        c->gen = p->gen;
        c->index = k;
        memcpy(c->addrs, addrs, sizeof(addrs));
        c->n_addrs = p->n_addrs;
        c->port = p->port;
        c->to_instance = p->instance;
        c->deadline = deadline;
        c->last_rx = c->last_tx = net_now_ns();
        made[n++] = c;
    }
    if (n == 0)
        return IXL_ERR_NO_MEMORY;
    for (int k = 0; k < n; k++) {
        struct net_loop *l = &e->loops[(p->loop_base + k) % e->n_loops];
        made[k]->loop = l; /* a teardown before it is adopted finds it on l's reap list */
        p->conns[p->n_conns++] = made[k];
        if (!hand_over(l, made[k])) { /* destroy is under way */
            p->n_conns--;
            free(made[k]);
            continue;
        }
        /* woken by hand_over */
    }
    return p->n_conns > 0 ? IXL_OK : IXL_ERR_REMOTE_DISCONNECT;
}

static void wake_all(struct net_loop **wake, int n)
{
    for (int i = 0; i < n; i++)
        loop_wake(wake[i]);
}

/* The connection this thread last sent a frame on itself (inline_pick). */
static _Thread_local const struct net_conn *inl_last;

/* The connection a poster may send request r's one frame on itself (p->lock held): when
 * nothing waits in p's queues (no frame overtakes another) and a connection is up, idle and
 * not being sent on by another poster. Returned with its txlock held, or NULL: queue it. */
static struct net_conn *inline_pick(struct net_peer *p, const struct net_req *r)
{
    if (p->q.len > 0 || p->nq.len > 0 || r->stage_local || r->n_chunks != 1 || p->n_conns == 0)
        return NULL;
    if (r->op == IXL_OP_WRITE && r->chunks[0].len > INLINE_SEND_BYTES)
        return NULL;
    /* The connection this thread sent on last first (compared, never dereferenced: it may
     * be gone), while no answer of a poster's frame is awaited on it: one caller's requests
     * keep to one connection, so to one loop at each end. */
    uint32_t first = p->inl_next;
    for (int i = 0; i < p->n_conns; i++)
        if (p->conns[i] == inl_last && atomic_load(&p->conns[i]->pins) == 0)
            first = (uint32_t)i;
    for (int i = 0; i < p->n_conns; i++) {
        struct net_conn *x = p->conns[(first + (uint32_t)i) % (uint32_t)p->n_conns];
        if (!x->up || atomic_load(&x->doomed) || x->gen != p->gen || !atomic_load(&x->tx_idle))
            continue;
        /* Tried, not waited for: another poster sending on it takes the next one. */
        if (pthread_mutex_trylock(&x->txlock) != 0)
            continue;
        if (!x->tx_closed && !x->wire_partial && !atomic_load(&x->inl_handoff)) {
            p->inl_next++; /* spread posters over the connections */
            inl_last = x;
            return x;
        }
        pthread_mutex_unlock(&x->txlock);
    }
    return NULL;
}

/* Sends request r's one frame on c from the posting thread, without p->lock (so posters to
 * one peer send on its connections at once) and with c->txlock held from inline_pick (so c
 * cannot close meanwhile); unlocks it. The frame goes out whole or in part without waiting; a
 * part sent goes to the connection's loop, which sends the rest before anything else. 1: sent
 * (or handed on), 0: nothing went, queue it as usual. The loop's bookkeeping stays its own:
 * the frame counts as outstanding through c->inl_out. */
static int inline_send(struct net_conn *c, struct net_req *r, uint64_t serial)
{
    struct net_engine *e = c->e;
    const struct net_chunk *ch = &r->chunks[0];
    size_t dlen = r->op == IXL_OP_WRITE ? (size_t)ch->len : 0;
    struct net_hdr h = {.op = r->op == IXL_OP_WRITE ? NET_WRITE : NET_READ,
                        .chunk = 0,
                        .req = serial,
                        .addr = ch->raddr,
                        .len = ch->len,
                        .key = ch->key};
    struct net_txf f = {.data = (const void *)(uintptr_t)ch->laddr, .len = dlen, .busy = r};
    net_hdr_encode(&h, f.hdr);
    pthread_mutex_lock(&e->reqs_lock);
    r->busy++; /* the user's buffer is read until the frame is out: release waits for it */
    pthread_mutex_unlock(&e->reqs_lock);
    int sent = 0;
    atomic_fetch_add(&c->inl_out, 1); /* before the answer can come */
    struct iovec iov[2] = {{f.hdr, NET_HDR_BYTES}, {(void *)(uintptr_t)f.data, dlen}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = dlen > 0 ? 2 : 1};
    ssize_t w;
    do
        w = net_sys()->sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)(NET_HDR_BYTES + dlen)) {
        sent = 1;
    } else if (w > 0) {
        c->inl = f; /* the rest is the loop's, with the busy reference */
        c->inl_off = (size_t)w;
        c->wire_partial = true;
        atomic_store(&c->inl_handoff, 1);
        sent = 2;
    } else {
        atomic_fetch_sub(&c->inl_out, 1); /* nothing went: queued, as usual */
    }
    if (sent == 1) { /* its answer may be read by the caller (net_tcp_watch): this thread
                      * alone read its buffer (a part handed on is the loop's) */
        atomic_fetch_add(&c->pins, 1);
        r->wconn = c;
    }
    struct net_loop *wake[1];
    int n_wake = 0;
    if (sent == 2)
        mark_ready(c, wake, &n_wake); /* under txlock: c is not closed before */
    pthread_mutex_unlock(&c->txlock);
    if (sent != 2)
        net_req_unbusy(e, r);
    wake_all(wake, n_wake);
    return sent != 0;
}

/* The bytes frame k of r moves (its data, or its READ's answer), for PULL_WINDOW. */
static uint32_t frame_len(const struct net_req *r, uint32_t k)
{
    uint64_t len = k < r->n_chunks ? r->chunks[k].len : 0;
    return len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
}

int net_peer_submit(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t n)
{
    struct net_engine *e = p->e;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    net_tcp_unwatch(r);
    pthread_mutex_lock(&p->lock);
    int rc = IXL_OK;
    if (!p->loaded || atomic_load(&e->stopping))
        rc = IXL_ERR_REMOTE_DISCONNECT;
    else if (p->q.len + p->nq.len + n > e->queue_max)
        rc = IXL_ERR_BUSY;
    else
        rc = ring_room(&p->q, n);
    struct net_conn *ic = rc == IXL_OK && n == 1 ? inline_pick(p, r) : NULL;
    if (ic != NULL) {
        /* The generation the frame goes to: a teardown of older connections does not fail
         * this post. */
        pthread_mutex_lock(&e->reqs_lock);
        r->gen = p->gen;
        pthread_mutex_unlock(&e->reqs_lock);
        pthread_mutex_unlock(&p->lock);
        if (inline_send(ic, r, serial))
            return IXL_OK; /* sent from this thread */
        /* The socket took nothing: queued as usual (the peer's state looked at again). */
        pthread_mutex_lock(&p->lock);
        if (!p->loaded || atomic_load(&e->stopping))
            rc = IXL_ERR_REMOTE_DISCONNECT;
        else if (p->q.len + p->nq.len + n > e->queue_max)
            rc = IXL_ERR_BUSY;
        else
            rc = ring_room(&p->q, n);
    }
    if (rc == IXL_OK) {
        pthread_mutex_lock(&e->reqs_lock);
        r->gen = p->gen;
        pthread_mutex_unlock(&e->reqs_lock);
        for (uint32_t i = 0; i < n; i++)
            ring_push(&p->q,
                      (struct net_item){
                          .serial = serial, .chunk = i, .len = frame_len(r, i), .kind = NI_FRAME});
        rc = serve_queue(p, wake, &n_wake);
        if (rc != IXL_OK)
            p->q.len -= n; /* nothing can serve them: the post fails */
    }
    size_t queued = p->q.len + p->nq.len;
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    if (rc == IXL_ERR_BUSY)
        return net_error(e, rc,
                         "NET: the send queue to '%s' holds %zu frames; this request adds %u "
                         "over queue_max=%zu",
                         p->name, queued, n, e->queue_max);
    if (rc == IXL_ERR_NO_MEMORY)
        return net_error(e, rc, "NET: out of memory queueing frames to '%s'", p->name);
    if (rc != IXL_OK)
        return net_error(e, rc, "NET: '%s' is disconnected", p->name);
    return IXL_OK;
}

/* ---- answers read by the caller ------------------------------------------------------------ */

/* A caller left a whole header in c's hbuf (watch_take): c's loop goes on from it. */
static void rx_left(struct net_conn *c)
{
    atomic_store(&c->rx_left, 1);
    atomic_store(&c->loop->rx_kick, 1);
    loop_wake(c->loop);
}

/* Takes the answer of request r (posted as serial, its one frame sent by its poster on c) when
 * it is the WRITE_ACK at the head of c's socket (rxlock held, c not closing), as frame_begin
 * and frame_end would: 1 taken, 0 not (*got: what the last recv returned, -2 for an error).
 * Direct (r a WRITE, the only request reading c): the header is read, not peeked (one system
 * call fewer per request), and a notification ack riding on the answer, or alone in a
 * NOTIF_ACK or PONG before it, is taken too; any other header read stays in hbuf (c->hgot),
 * the loop's to go on with (the caller wakes it: net_tcp_watch). Not direct: peeked, and only
 * a plain WRITE_ACK of r is read. The rest (another request's answer, a READ's data, the loop
 * amid a frame) is the loop's: the frames the loop sent, and the memory they read, are the
 * loop's to account for. *notif: r's notification must now go; bad[0] != 0: what the peer
 * broke (an answer to no frame sent, a forged notification ack). */
static int watch_take(struct net_engine *e, struct net_conn *c, uint64_t serial, bool direct,
                      bool *notif, char *bad, ssize_t *got)
{
    *got = -1;
    if (c->hgot != 0 || c->in_body || serial == 0)
        return 0;
    uint8_t b[NET_HDR_BYTES];
    struct net_hdr h;
    for (;;) {
        ssize_t n = net_sys()->recv(c->fd, b, sizeof(b), MSG_DONTWAIT | (direct ? 0 : MSG_PEEK));
        *got = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR ? -2 : n;
        if (n <= 0)
            return 0;
        bool whole = n == (ssize_t)sizeof(b) && net_hdr_decode(b, &h) == 0;
        if (!direct) {
            if (!whole || h.op != NET_WRITE_ACK || (h.flags & NET_F_ACK) || h.req != serial)
                return 0;
            /* Peeked whole under rxlock: nobody else reads, so the same bytes come. */
            if (net_sys()->recv(c->fd, b, sizeof(b), MSG_DONTWAIT) != (ssize_t)sizeof(b)) {
                snprintf(bad, NET_WHY, "NET: the socket to '%s' lost a peeked answer",
                         c->peer->name);
                return 0;
            }
            break;
        }
        atomic_store(&c->rx_ns, net_now_ns()); /* the peer spoke (c's liveness) */
        bool mine = whole && h.op == NET_WRITE_ACK && h.req == serial;
        if (!mine && !(whole && (h.op == NET_NOTIF_ACK || h.op == NET_PONG))) {
            memcpy(c->hbuf, b, (size_t)n); /* read: the loop's from here, as if it had */
            c->hgot = (uint32_t)n;
            return 0;
        }
        char what[200];
        if ((h.flags & NET_F_ACK) && notif_ack_apply(e, c, h.key, what, sizeof(what)) != 0) {
            snprintf(bad, NET_WHY, "NET: '%s' broke the protocol: %s", c->peer->name, what);
            return 0;
        }
        if (mine)
            break;
        *got = -1; /* a frame taken aside: the next header is looked at */
    }
    atomic_fetch_add(&c->rx_answers, 1);
    if (!direct)
        atomic_store(&c->rx_ns, net_now_ns());
    int v = net_req_answer(e, c->peer, &h);
    if (v < 0) {
        snprintf(bad, NET_WHY,
                 "NET: a protocol error on the connection: an answer to a frame never sent");
        return 1;
    }
    if (v == 0)
        return 1; /* not running any more (failed meanwhile): drained */
    char why[NET_WHY] = "";
    int status = IXL_OK;
    if (h.status == IXL_ERR_BACKEND) {
        status = IXL_ERR_BACKEND;
        snprintf(why, sizeof(why),
                 "NET: '%s' answered frame %u of the WRITE with an error: a device copy "
                 "there failed (its log has the driver's error)",
                 c->peer->name, h.chunk);
    } else if (h.status != 0) {
        status = IXL_ERR_REMOTE_REFUSED;
        snprintf(why, sizeof(why),
                 "NET: '%s' refused frame %u of the WRITE: outside its registered regions "
                 "or a wrong key",
                 c->peer->name, h.chunk);
    }
    *notif = net_req_part_done(e, h.req, status, why) == 1;
    return 1;
}

void net_tcp_unwatch(struct net_req *r)
{
    struct net_conn *c = r->wconn;
    if (c == NULL)
        return;
    if (atomic_load(&c->parked)) { /* r's caller stopped polling (released it, say) */
        pthread_mutex_lock(&c->rxlock);
        if (!c->rx_gone)
            rx_park(c, false);
        pthread_mutex_unlock(&c->rxlock);
    }
    atomic_fetch_sub(&c->pins, 1);
    r->wconn = NULL;
}

int net_tcp_watch(struct net_engine *e, struct net_req *r, uint64_t budget_ns)
{
    struct net_conn *c = r->wconn; /* pinned: its memory stays, closed or not */
    if (c == NULL)
        return IXL_ERR_NOT_SUPPORTED;
    if (atomic_load(&r->state) != NR_RUNNING) {
        net_tcp_unwatch(r);
        return IXL_OK;
    }
    bool empty_before = r->looked_empty; /* the look just before this one found nothing */
    r->looked_empty = false;
    /* Only tried: a caller never makes the loop (or another caller) wait for it. */
    if (pthread_mutex_trylock(&c->rxlock) != 0)
        return IXL_OK;
    /* Asleep on the socket only while no other request sent on c is in flight (their answers
     * would come first and wake this caller for nothing): else one look, and the loop reads. */
    if (atomic_load(&c->pins) > 1)
        budget_ns = 0;
    uint64_t end = budget_ns > 0 ? net_now_ns() + budget_ns : 0;
    uint64_t serial = r->serial; /* set by this thread's post (the core serializes) */
    /* Read, not peeked, while r alone reads c and its answer is a header alone: another
     * request's answer or a READ's data would be read here only to be handed to the loop. */
    bool direct = r->op == IXL_OP_WRITE && atomic_load(&c->pins) == 1;
    bool gone = false, notif = false, loops = false;
    char bad[NET_WHY] = "";
    /* A watch right after a look that found nothing (the core's status before its wait)
     * sleeps first: poll(2) answers at once for what came meanwhile, and the look it would
     * repeat is a recv that finds nothing, one system call per waited request. */
    bool sleep_first = end != 0 && empty_before;
    ssize_t got = -1;
    for (;;) {
        gone = c->rx_gone; /* with rxlock held c does not close */
        if (gone)
            break;
        if (sleep_first && c->hgot == 0 && !c->in_body && atomic_load(&r->state) == NR_RUNNING) {
            got = -1; /* as that look's: nothing */
        } else if (watch_take(e, c, serial, direct, &notif, bad, &got) != 0 || bad[0] != '\0' ||
                   atomic_load(&r->state) != NR_RUNNING) {
            got = -3;
            break;
        }
        sleep_first = false;
        if (got == (ssize_t)NET_HDR_BYTES) {
            loops = true;
            break;
        }
        uint64_t now = end ? net_now_ns() : 0;
        if (now >= end)
            break;
        /* Not taken: the loop's to read (another frame at the head, the end, an error, the
         * loop amid a frame), or not all of a header came yet, or nothing came yet. The
         * loop's: r leaves it to the loop (a caller looking again at once would only keep
         * the loop's try of rxlock failing). */
        if (got == (ssize_t)NET_HDR_BYTES || got == 0 || got == -2 || c->hgot != 0 || c->in_body) {
            loops = true;
            break;
        }
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int ms = (int)((end - now + 999999u) / 1000000u);
        if (net_sys()->poll(&pf, 1, got > 0 ? 0 : ms) < 0 && errno != EINTR)
            break;
        if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
            break;
    }
    /* One look (no budget) that found nothing and left the stream's head to nobody. */
    bool broke = bad[0] != '\0';
    r->looked_empty = end == 0 && got == -1 && !gone && !broke && !loops && c->hgot == 0 &&
                      !c->in_body && atomic_load(&r->state) == NR_RUNNING;
    /* A second look in a row that found nothing, with no budget: a caller polling (a wait
     * looks once, then watches with a budget). Its answer will be read here: the loop is not
     * to be woken by it (rx_park), until the caller stops looking or NET_PARK_NS passed. */
    if (!gone) {
        if (direct && r->looked_empty && empty_before) {
            if (!atomic_load(&c->parked)) /* every later look of the poll: no lock taken */
                rx_park(c, true);
        } else if (atomic_load(&c->parked))
            rx_park(c, false);
    }
    /* A whole header read here and left (direct): the bytes that woke the loop for it may
     * all be gone from the socket, so the loop is told (rx_left). */
    bool left = !gone && !broke && !c->in_body && c->hgot == NET_HDR_BYTES;
    pthread_mutex_unlock(&c->rxlock);
    if (left)
        rx_left(c);
    if (notif)
        net_peer_submit_notif(r->peer, serial);
    if (broke) /* as the loop's protocol error: the generation's requests fail */
        net_peer_teardown(r->peer, IXL_ERR_REMOTE_DISCONNECT, bad);
    if (gone || broke || loops || atomic_load(&r->state) != NR_RUNNING) {
        net_tcp_unwatch(r); /* the loop completes it (or says what became of its frame) */
        return gone || broke || loops ? IXL_ERR_NOT_SUPPORTED : IXL_OK;
    }
    return IXL_OK;
}

int net_peer_submit_frame(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t k)
{
    struct net_engine *e = p->e;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    pthread_mutex_lock(&p->lock);
    pthread_mutex_lock(&e->reqs_lock);
    uint64_t gen = r->gen;
    pthread_mutex_unlock(&e->reqs_lock);
    int rc = IXL_OK;
    if (!p->loaded || atomic_load(&e->stopping) || gen != p->gen)
        rc = IXL_ERR_REMOTE_DISCONNECT; /* its generation was torn down: the request failed */
    else if (p->q.len + p->nq.len + 1 > e->queue_max)
        rc = IXL_ERR_BUSY;
    else
        rc = ring_room(&p->q, 1);
    if (rc == IXL_OK) {
        ring_push(&p->q,
                  (struct net_item){
                      .serial = serial, .chunk = k, .len = frame_len(r, k), .kind = NI_FRAME});
        rc = serve_queue(p, wake, &n_wake);
        if (rc != IXL_OK)
            p->q.len--;
    }
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    return rc;
}

#ifndef NET_NOTIF_INLINE
#define NET_NOTIF_INLINE 1 /* 0 at build time (-D): the loop sends every notification */
#endif
#ifndef NET_SEQ_HERE
#define NET_SEQ_HERE 1 /* 0 at build time (-D): always the loop's, to measure the difference */
#endif

/* Whether a notification may be sequenced on the calling thread (p->lock held): p's
 * notification connection is up with nothing to send and not held by the peer (tx_idle), so it
 * goes out at once, nothing is queued or unsent ahead of it, and the store has an entry free.
 * A held or busy connection leaves it to the loop, as it takes the queue. */
static bool seq_here_ok(struct net_peer *p)
{
    struct net_conn *c = p->notif_conn;
    return NET_SEQ_HERE && c != NULL && !atomic_load(&c->doomed) && c->gen == p->gen &&
           atomic_load(&c->tx_idle) && p->nq.len == 0 && p->un_resend == p->un_len &&
           !p->un_blocked && un_grow(p) == IXL_OK;
}

/* Sends notification m (just sequenced, the last of p's store) on p's notification connection
 * c from this thread (p->lock held, so no other notification goes between), when c's socket is
 * free: no frame of the loop's half sent, nothing in its tx, nobody else sending. Whole: the
 * loop only learns that the peer owes an ack (inl_nowed, folded). In part: the rest is the
 * loop's, first (inl, with a reference for the frame), as a poster's request frame. True when
 * it went (whole or handed on); false: the loop sends it. */
static bool notif_inline(struct net_engine *e, struct net_conn *c, struct net_msg *m,
                         struct net_loop **wake, int *n_wake)
{
    if (pthread_mutex_trylock(&c->txlock) != 0)
        return false;
    if (c->tx_closed || c->wire_partial || atomic_load(&c->inl_handoff) ||
        !atomic_load(&c->tx_idle)) {
        pthread_mutex_unlock(&c->txlock);
        return false;
    }
    struct net_hdr h = {.op = NET_NOTIF, .req = m->seq, .len = m->len};
    struct net_txf f = {.data = m->bytes, .len = m->len};
    net_hdr_encode(&h, f.hdr);
    struct iovec iov[2] = {{f.hdr, NET_HDR_BYTES}, {m->bytes, m->len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = m->len > 0 ? 2 : 1};
    ssize_t w;
    do
        w = net_sys()->sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    bool went = w > 0;
    if (went && (size_t)w < NET_HDR_BYTES + m->len) {
        msg_seq_ref(e, m); /* the frame's, dropped when the loop has sent the rest */
        f.msg = m;
        c->inl = f;
        c->inl_off = (size_t)w;
        c->wire_partial = true;
        atomic_store(&c->inl_handoff, 1);
        mark_ready(c, wake, n_wake); /* under txlock: c is not closed before */
    }
    if (went)
        atomic_store(&c->inl_nowed, 1);
    pthread_mutex_unlock(&c->txlock);
    return went;
}

/* m (its reference passed to the store) sequenced on the calling thread (seq_here_ok, room in
 * the store), and sent from it when the connection's socket is free (notif_inline); else the
 * next one the notification connection's loop sends, as it sends one again. */
static void seq_here(struct net_engine *e, struct net_peer *p, struct net_msg *m,
                     struct net_loop **wake, int *n_wake)
{
    un_take(p, m);
    if (NET_NOTIF_INLINE && notif_inline(e, p->notif_conn, m, wake, n_wake))
        return; /* it went: un_resend stays past it */
    p->un_resend = p->un_len - 1;
    mark_ready(p->notif_conn, wake, n_wake);
}

/* Request serial's notification sequenced by the thread that completed the request's data
 * (p->lock held), when nothing is ahead of it (seq_here_ok): it goes into the store and out
 * from this thread when the socket is free, else as the next one the connection's loop sends
 * (seq_here), and the request is done at once, as pull_some makes it done once sequenced; the
 * store keeps it until the peer acknowledges it (sent again on another connection, settled at
 * destroy). Without this a request with a notification completed only after the loop thread
 * woke, took it from the queue and flushed it: a hand-off and a wake-up in every such
 * request's latency. 1: sequenced, -1: the request was released or failed meanwhile (nothing
 * sent), 0: not here (queue it). */
static int notif_sequence_now(struct net_engine *e, struct net_peer *p, uint64_t serial,
                              struct net_loop **wake, int *n_wake)
{
    if (!seq_here_ok(p))
        return 0;
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    if (r == NULL || r->state != NR_RUNNING || r->canceled) {
        pthread_mutex_unlock(&e->reqs_lock);
        return -1;
    }
    if (!un_room(e, p, r->notif_len)) {
        pthread_mutex_unlock(&e->reqs_lock);
        return 0;
    }
    /* The store's reference; its frame takes one when the loop sends it. */
    struct net_msg *m = msg_new(r->notif, r->notif_len, 1, IXL_OK);
    pthread_mutex_unlock(&e->reqs_lock);
    if (m == NULL)
        return 0; /* the queue's path reports it */
    seq_here(e, p, m, wake, n_wake);
    return 1;
}

int net_peer_submit_notif(struct net_peer *p, uint64_t serial)
{
    struct net_engine *e = p->e;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0, seq = 0;
    char why[NET_WHY] = "";
    pthread_mutex_lock(&p->lock);
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    size_t len = r ? r->notif_len : 0;
    if (r)
        r->gen = p->gen;
    pthread_mutex_unlock(&e->reqs_lock);
    int rc = IXL_OK;
    if (r == NULL) {
        rc = IXL_ERR_CANCELED;
    } else if (len > p->notif_max) {
        rc = IXL_ERR_NOTIF_TOO_LARGE;
        snprintf(why, sizeof(why), "NET: '%s' accepts notifications of at most %zu bytes, not %zu",
                 p->name, p->notif_max, len);
    } else if (!p->loaded || atomic_load(&e->stopping)) {
        rc = IXL_ERR_REMOTE_DISCONNECT;
        snprintf(why, sizeof(why), "NET: '%s' is disconnected", p->name);
    } else if ((seq = notif_sequence_now(e, p, serial, wake, &n_wake)) != 0) {
        if (seq < 0)
            rc = IXL_ERR_CANCELED; /* released or failed meanwhile: never sent */
    } else if ((rc = ring_room(&p->nq, 1)) == IXL_OK) {
        ring_push(&p->nq, (struct net_item){.serial = serial, .kind = NI_NOTIF});
        rc = serve_queue(p, wake, &n_wake);
        if (rc != IXL_OK)
            p->nq.len--;
    }
    if (rc == IXL_ERR_NO_MEMORY)
        snprintf(why, sizeof(why), "NET: out of memory queueing a notification to '%s'", p->name);
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    if (seq > 0) { /* done now, on this thread: no hand-off to a loop before the caller knows */
        net_req_notif_sequenced(e, serial);
        e->host->signal(e->host->ctx);
    }
    if (rc != IXL_OK && rc != IXL_ERR_CANCELED)
        net_req_notif_done(e, serial, rc, why);
    return rc;
}

int net_peer_send_msg(struct net_peer *p, const void *msg, size_t len)
{
    struct net_engine *e = p->e;
    struct net_msg *m = msg_new(msg, len, 2, IXL_IN_PROGRESS); /* the queue's and this call's */
    if (m == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "NET: out of memory for a notification");
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    bool here = false; /* sequenced on this thread */
    pthread_mutex_lock(&p->lock);
    size_t notif_max = p->notif_max;
    uint64_t lost = p->lost_unreported, lost_all = p->notif_lost;
    p->lost_unreported = 0;
    int rc = IXL_OK;
    if (lost > 0)
        rc = IXL_ERR_REMOTE_DISCONNECT; /* said once; the next send goes */
    else if (len > notif_max)
        rc = IXL_ERR_NOTIF_TOO_LARGE;
    else if (!p->loaded || atomic_load(&e->stopping))
        rc = IXL_ERR_REMOTE_DISCONNECT;
    else if (p->q.len + p->nq.len >= e->queue_max)
        rc = IXL_ERR_BUSY;
    else if (seq_here_ok(p) && un_room(e, p, len)) {
        /* Sequenced here: sent, as far as the caller goes (no wait for a loop to take it). */
        m->status = IXL_OK; /* before the loop can see it (p->lock) */
        seq_here(e, p, m, wake, &n_wake);
        here = true;
    } else if ((rc = ring_room(&p->nq, 1)) == IXL_OK) {
        ring_push(&p->nq, (struct net_item){.msg = m, .kind = NI_MSG});
        rc = serve_queue(p, wake, &n_wake);
        if (rc != IXL_OK)
            p->nq.len--;
    }
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    if (rc != IXL_OK) {
        free(m);
        if (lost > 0)
            return net_error(e, rc,
                             "NET: %" PRIu64 " notification(s) sent to '%s' were never "
                             "acknowledged by its instance that went (it restarted or the agent "
                             "was told of a new one) and are lost (%" PRIu64 " in all); this "
                             "one was not sent: send it again",
                             lost, p->name, lost_all);
        if (rc == IXL_ERR_NOTIF_TOO_LARGE)
            return net_error(e, rc, "NET: '%s' accepts notifications of at most %zu bytes, not %zu",
                             p->name, notif_max, len);
        return net_error(e, rc, "NET: '%s' %s", p->name,
                         rc == IXL_ERR_NO_MEMORY ? "cannot be sent to: out of memory"
                         : rc == IXL_ERR_BUSY    ? "has queue_max items queued"
                                                 : "is disconnected");
    }
    /* The loops settle it within timeout_ms (dial deadline, send stall) plus a tick. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t wait_ns = e->timeout_ns + 2 * e->heartbeat_ns + 200000000ull;
    dl.tv_sec += (time_t)(wait_ns / 1000000000u);
    dl.tv_nsec += (long)(wait_ns % 1000000000u);
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&e->msg_lock);
    while (!here && m->status == IXL_IN_PROGRESS)
        if (pthread_cond_timedwait(&e->msg_cond, &e->msg_lock, &dl) != 0)
            break;
    rc = m->status;
    pthread_mutex_unlock(&e->msg_lock);
    bool withdrawn = false, full = false;
    size_t un_len = 0, un_bytes = 0;
    if (rc == IXL_IN_PROGRESS) {
        /* Still in the peer's queue (its connection is held or not up, or its store of
         * unacknowledged notifications is full): taken out, so that the caller knows for sure
         * it was not sent. One a connection took is sequenced: NET delivers it. */
        pthread_mutex_lock(&p->lock);
        full = p->un_blocked;
        un_len = p->un_len;
        un_bytes = p->un_bytes;
        for (size_t i = 0; i < p->nq.len && !withdrawn; i++) {
            struct net_item *it = &p->nq.v[(p->nq.head + i) % p->nq.cap];
            if (it->kind == NI_MSG && it->msg == m) {
                for (size_t k = i; k + 1 < p->nq.len; k++)
                    p->nq.v[(p->nq.head + k) % p->nq.cap] =
                        p->nq.v[(p->nq.head + k + 1) % p->nq.cap];
                p->nq.len--;
                withdrawn = true;
            }
        }
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_lock(&e->msg_lock);
    if (withdrawn)
        m->refs--; /* the queue's reference */
    rc = m->status;
    char why[NET_WHY];
    snprintf(why, sizeof(why), "%s", m->why);
    int last = --m->refs == 0;
    pthread_mutex_unlock(&e->msg_lock);
    if (last)
        free(m);
    if (withdrawn && full)
        return net_error(e, IXL_ERR_BUSY,
                         "NET: the notification to '%s' was not sent in %llu ms and is withdrawn: "
                         "%zu notifications (%zu bytes) sent to it are not acknowledged yet, the "
                         "bound (notif_unacked_max=%zu, notif_unacked_bytes=%zu): '%s' does not "
                         "acknowledge them (its application does not drain its notifications, "
                         "or it does not read at all)",
                         p->name, (unsigned long long)(wait_ns / 1000000u), un_len, un_bytes,
                         e->notif_unacked_max, e->notif_unacked_bytes, p->name);
    if (withdrawn)
        return net_error(e, IXL_ERR_BUSY,
                         "NET: the notification to '%s' was not sent in %llu ms and is withdrawn: "
                         "'%s' does not take more now (its queue of received notifications is "
                         "full because its application does not drain it: notif_queue_max, "
                         "notif_queue_bytes), or no connection to it came up",
                         p->name, (unsigned long long)(wait_ns / 1000000u), p->name);
    if (rc == IXL_IN_PROGRESS)
        return net_error(e, IXL_ERR_TIMEOUT,
                         "NET: the notification to '%s' is not sent after %llu ms; it is on the "
                         "connection and is delivered when '%s' reads again",
                         p->name, (unsigned long long)(wait_ns / 1000000u), p->name);
    if (rc != IXL_OK)
        return net_error(e, rc, "%s", why[0] ? why : "NET: the notification could not be sent");
    return IXL_OK;
}

int net_peer_connect(struct net_peer *p)
{
    struct net_engine *e = p->e;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    pthread_mutex_lock(&p->lock);
    if (!p->loaded || atomic_load(&e->stopping)) {
        pthread_mutex_unlock(&p->lock);
        return net_error(e, IXL_ERR_REMOTE_DISCONNECT, "NET: '%s' is disconnected", p->name);
    }
    int rc = p->n_up > 0 ? IXL_OK : serve_queue(p, wake, &n_wake);
    uint64_t gen = p->gen;
    wake_all(wake, n_wake);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t wait_ns = e->timeout_ns + 2 * e->heartbeat_ns + 200000000ull;
    dl.tv_sec += (time_t)(wait_ns / 1000000000u);
    dl.tv_nsec += (long)(wait_ns % 1000000000u);
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    while (rc == IXL_OK && p->n_up == 0 && p->gen == gen && p->n_conns > 0)
        if (pthread_cond_timedwait(&p->cond, &p->lock, &dl) != 0)
            break;
    int up = p->n_up > 0;
    char why[NET_WHY];
    snprintf(why, sizeof(why), "%s", p->failed_gen == gen + 1 ? p->why : "");
    int status = p->failed_gen == gen + 1 && p->failed_status != IXL_OK ? p->failed_status
                                                                        : IXL_ERR_REMOTE_DISCONNECT;
    pthread_mutex_unlock(&p->lock);
    if (up)
        return IXL_OK;
    if (rc == IXL_ERR_NO_MEMORY)
        return net_error(e, rc, "NET: out of memory connecting to '%s'", p->name);
    return net_error(e, status, "%s", why[0] ? why : "NET: the connection did not come up");
}

/* Tears down p's connections of generation gen (any gen: UINT64_MAX). */
static void peer_teardown_gen(struct net_peer *p, int status, uint64_t gen, const char *why)
{
    struct net_engine *e = p->e;
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    pthread_mutex_lock(&p->lock);
    if (gen != UINT64_MAX && gen != p->gen) {
        pthread_mutex_unlock(&p->lock);
        return; /* a reconnect came first: its connections are not ours to cut */
    }
    uint64_t torn = p->gen++; /* frames queued from now on belong to new connections */
    for (int i = 0; i < p->n_conns; i++) {
        struct net_conn *c = p->conns[i];
        atomic_store(&c->doomed, 1);
        struct net_loop *l = c->loop;
        pthread_mutex_lock(&l->lock);
        if (!c->on_reap) {
            c->on_reap = true;
            c->knext = l->reap;
            l->reap = c;
        }
        pthread_mutex_unlock(&l->lock);
        int seen = 0;
        for (int k = 0; k < n_wake; k++)
            seen |= wake[k] == l;
        if (!seen)
            wake[n_wake++] = l;
    }
    p->n_conns = p->n_up = 0;
    p->notif_conn = NULL;
    /* Queued frames belong to requests failed below; messages fail here. */
    while (p->nq.len > 0) {
        struct net_item it = ring_pop(&p->nq);
        if (it.kind == NI_MSG)
            msg_done(e, it.msg, status, why);
    }
    p->q.len = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    net_req_fail_peer(e, p, status, torn, why);
}

void net_peer_teardown(struct net_peer *p, int status, const char *why)
{
    peer_teardown_gen(p, status, UINT64_MAX, why);
}

void net_peer_notif_kick(struct net_peer *p)
{
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    pthread_mutex_lock(&p->lock);
    if (p->loaded && !atomic_load(&p->e->stopping) && p->un_len > 0 && p->n_conns == 0)
        serve_queue(p, wake, &n_wake); /* a failure is said to the next post or send */
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
}

void net_peer_notif_settle(struct net_peer *p, uint64_t deadline_ns)
{
    struct net_loop *wake[NET_MAX_LOOPS];
    int n_wake = 0;
    pthread_mutex_lock(&p->lock);
    /* Only what was sent before this call: notifications sequenced meanwhile do not extend it. */
    uint64_t want = p->nseq, instance = p->instance;
    if (p->nacked < want && p->notif_conn != NULL) {
        p->ack_wanted = true; /* a PING now: its PONG says what arrived */
        mark_ready(p->notif_conn, wake, &n_wake);
    }
    pthread_mutex_unlock(&p->lock);
    wake_all(wake, n_wake);
    pthread_mutex_lock(&p->lock);
    p->settling++;
    while (p->nacked < want && p->instance == instance && p->notif_conn != NULL &&
           net_now_ns() < deadline_ns) {
        struct timespec dl = {(time_t)(deadline_ns / 1000000000u),
                              (long)(deadline_ns % 1000000000u)};
        if (pthread_cond_timedwait(&p->cond, &p->lock, &dl) == ETIMEDOUT)
            break;
    }
    p->settling--;
    pthread_mutex_unlock(&p->lock);
}

void net_peer_notif_lost(struct net_peer *p, const char *why, bool last, uint64_t instance)
{
    struct net_engine *e = p->e;
    pthread_mutex_lock(&p->lock);
    p->instance = instance; /* acks of the old instance's connections are ignored from now */
    uint64_t n = p->un_len, first = p->nacked + 1;
    while (p->un_len > 0) {
        struct net_msg *m = p->un[p->un_head];
        p->un_head = (p->un_head + 1) % p->un_cap;
        p->un_len--;
        msg_done(e, m, IXL_ERR_REMOTE_DISCONNECT, why); /* the store's reference */
    }
    p->un_head = p->un_bytes = p->un_resend = 0;
    p->un_blocked = false;
    p->nseq = p->nacked = 0; /* a new session starts at 1 */
    p->notif_lost += n;
    p->lost_unreported += n;
    uint64_t total = p->notif_lost;
    if (last) {
        free(p->un);
        p->un = NULL;
        p->un_cap = 0;
    }
    pthread_mutex_unlock(&p->lock);
    if (n > 0 && last)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: %" PRIu64 " notification(s) to '%s' (sequence numbers %" PRIu64
                     "..%" PRIu64 ") were not acknowledged yet: %s; whether they arrived is not "
                     "known",
                     n, p->name, first, first + n - 1, why);
    else if (n > 0)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: %" PRIu64 " notification(s) to '%s' (sequence numbers %" PRIu64
                     "..%" PRIu64 ") were never acknowledged and are lost: %s (%" PRIu64
                     " lost to it in all)",
                     n, p->name, first, first + n - 1, why, total);
}

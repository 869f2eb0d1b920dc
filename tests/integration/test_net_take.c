/*
 * A caller's own read of its TCP request's answer (net_tcp_watch, plugins/net/README.md
 * "Answers read by the caller"): while a WRITE whose one frame the caller sent is the only
 * request reading its connection, the waiting or polling caller reads the next header itself
 * (a recv, no MSG_PEEK first). What it reads that is not its answer must still be handled, by
 * it or by the connection's loop thread. An in-process fake target (net_raw.h: nr_fake, a real
 * socket that speaks NET's wire) decides what comes and when; a recv hook on the waiting
 * thread writes down the headers that thread read, so that each case checks the caller's path
 * was the one taken (a run where the loop read first is made again, up to 5 times).
 *
 *  left    A 2 MiB WRITE X (one frame, sent by the loop: chunk=4M) is sent and not answered;
 *          a 4 KiB WRITE Y is posted and waited for on another thread (its frame sent from
 *          there). The fake answers X alone: the waiter reads X's answer and leaves it to the
 *          loop, with nothing more in the socket to wake the loop. X must complete within 3 s
 *          (the waiter wakes the loop: without that it never does); then Y's answer, Y done.
 *  aside   Y's answer comes after a PONG and a lone NOTIF_ACK (acknowledging nothing), and
 *          carries a notification ack of 0 itself: the waiter takes all three, Y completes,
 *          and the connection stays (the next WRITE goes on it; no second connection).
 *  park    Y polled (ixl_xfer_status in a loop) instead of waited for: after two empty
 *          looks the poller takes EPOLLIN of the connection out of its loop's epoll set (the
 *          answer it reads must not wake the loop), and puts it back when it took the answer
 *          (an epoll_ctl hook on the poller's thread sees both). Then a poller that parks and
 *          stops polling: the loop's tick gives EPOLLIN back, and the loop reads the answer
 *          that came meanwhile (this thread, looking 500 ms later with its recv hooked, must
 *          find the request done without reading the answer itself).
 *  forged  Y's answer carries an acknowledgement of notification 1000 when none was sent:
 *          the waiter's read of it tears the connection down as the loop would: Y fails with
 *          IXL_ERR_REMOTE_DISCONNECT, the log says why, and the fake sees the close.
 *
 * Every transfer's bytes are checked at the fake (a fresh pattern each). About 2 s.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "net_raw.h"

#define BIG (2u << 20)
#define SMALL 4096u
#define WAIT_MS 5000
/* After a waiter's frame arrived, the fake answers this much later: the waiter is asleep in
 * its watch by then (poll(2) on the socket, within the core's first 20 ms of a wait). */
#define WATCH_MS 5

static struct nr_fake fk;
static uint8_t *region; /* the fake's region (never written: the fake reads the bytes) */
static uint8_t *src;    /* this agent's sources (BIG + SMALL bytes), registered */
static struct ixl_agent *ag;
static int fd = -1; /* the fake's end of the connection */
static uint64_t seed = 1;

/* ---- the waiting thread's reads ---------------------------------------------------------- */

static ssize_t (*real_recv)(int, void *, size_t, int);
static __thread bool is_waiter;
static uint8_t read_ops[8]; /* ops of the whole headers the waiter read (no MSG_PEEK) */
static _Atomic int n_read;

static ssize_t hook_recv(int s, void *b, size_t n, int flags)
{
    ssize_t got = real_recv(s, b, n, flags);
    if (is_waiter && !(flags & MSG_PEEK) && got == NET_HDR_BYTES) {
        int i = atomic_fetch_add(&n_read, 1);
        if (i < (int)sizeof(read_ops))
            read_ops[i] = ((const uint8_t *)b)[5];
    }
    return got;
}

static int (*real_epoll_ctl)(int, int, int, struct epoll_event *);
static _Atomic int n_park, n_unpark; /* MODs by the waiter without and with EPOLLIN */

static int hook_epoll_ctl(int ep, int op, int s, struct epoll_event *ev)
{
    if (is_waiter && op == EPOLL_CTL_MOD && ev != NULL)
        atomic_fetch_add((ev->events & EPOLLIN) ? &n_unpark : &n_park, 1);
    return real_epoll_ctl(ep, op, s, ev);
}

static bool waiter_read(uint8_t op)
{
    int n = atomic_load(&n_read);
    for (int i = 0; i < n && i < (int)sizeof(read_ops); i++)
        if (read_ops[i] == op)
            return true;
    return false;
}

/* ---- the fake's side ---------------------------------------------------------------------- */

/* Reads one WRITE frame of len bytes to region offset off, its bytes checked against the
 * pattern of s: its request number and chunk. */
static uint64_t fake_write_in(uint64_t off, uint64_t len, uint64_t s, uint32_t *chunk)
{
    uint8_t h[NET_HDR_BYTES];
    CHECK(nr_recv_all(fd, h, sizeof(h)) == 0);
    CHECK(h[5] == NET_WRITE && nr_get(h + 32, 8) == len &&
          nr_get(h + 24, 8) == (uintptr_t)region + off && nr_get(h + 40, 8) == fk.key);
    uint8_t *body = malloc(len);
    CHECK(body != NULL && nr_recv_all(fd, body, len) == 0);
    if (net_pat_find_bad(body, len, s, 0) != len)
        nr_fail("the WRITE's %llu bytes at the fake are not the pattern sent",
                (unsigned long long)len);
    free(body);
    *chunk = (uint32_t)nr_get(h + 12, 4);
    return nr_get(h + 16, 8);
}

static void fake_send(uint8_t op, uint64_t req, uint32_t chunk, bool with_ack, uint64_t ack)
{
    uint8_t a[NET_HDR_BYTES];
    nr_hdr(a, op, req, 0, 0, with_ack ? ack : 0);
    nr_put(a + 12, chunk, 4);
    if (with_ack)
        nr_put(a + 6, NET_F_ACK, 2);
    CHECK(nr_send(fd, a, sizeof(a)) == 0);
}

/* ---- this agent's side --------------------------------------------------------------------- */

/* A WRITE of len bytes from src + off (a fresh pattern of s) to the fake's region + off: the
 * waiter's source (at BIG) is not the bytes of a request still in flight on another thread. */
static struct ixl_xfer *post(uint64_t off, uint64_t len, uint64_t s)
{
    net_pat_fill(src + off, len, s, 0);
    struct ixl_xfer *x = NULL;
    CHECK_RC(nr_xfer(ag, IXL_OP_WRITE, src + off, (uintptr_t)region + off, len, "take-tgt", &x),
             IXL_OK);
    ixl_status st = ixl_xfer_post(x);
    CHECK(st == IXL_OK || st == IXL_IN_PROGRESS);
    return x;
}

/* A WRITE of SMALL bytes at offset BIG, posted on a thread of its own and waited for there or
 * (poll) polled: ixl_xfer_status until it ends, or (stop_after > 0) until the connection was
 * parked that many times, then no more looks (the request stays posted). */
struct waiter {
    pthread_t th;
    uint64_t seed;
    bool poll;
    int stop_after;
    ixl_status st;
    struct ixl_xfer *x;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    is_waiter = true;
    w->x = post(BIG, SMALL, w->seed);
    if (!w->poll) {
        w->st = ixl_xfer_wait(w->x, WAIT_MS);
    } else {
        double end = nr_now() + WAIT_MS / 1000.0;
        while ((w->st = ixl_xfer_status(w->x)) == IXL_IN_PROGRESS && nr_now() < end)
            if (w->stop_after > 0 && atomic_load(&n_park) >= w->stop_after)
                break;
    }
    is_waiter = false;
    return NULL;
}

static void waiter_start(struct waiter *w, bool poll, int stop_after)
{
    atomic_store(&n_read, 0);
    memset(read_ops, 0, sizeof(read_ops));
    atomic_store(&n_park, 0);
    atomic_store(&n_unpark, 0);
    *w = (struct waiter){.seed = ++seed, .poll = poll, .stop_after = stop_after};
    CHECK(pthread_create(&w->th, NULL, waiter_main, w) == 0);
}

static ixl_status waiter_end(struct waiter *w)
{
    CHECK(pthread_join(w->th, NULL) == 0);
    CHECK_RC(ixl_xfer_release(w->x), IXL_OK);
    return w->st;
}

/* A fresh agent on a fresh connection to the fake, one checked WRITE answered over it (so that
 * the next requests find the connection up and their frames go from the posting thread). */
static void connect_fresh(void)
{
    const char *kv[] = {"path", "tcp", "conns", "1", "chunk", "4M", "timeout_ms", "5000", NULL};
    char why[512];
    ixl_status st = nr_agent("take-init", kv, &ag, why, sizeof(why));
    if (st != IXL_OK)
        fprintf(stderr, "%s\n", why);
    CHECK_RC(st, IXL_OK);
    struct ixl_reg_desc d = {.addr = (uintptr_t)src, .len = BIG + SMALL};
    CHECK_RC(ixl_mem_register(ag, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(ag, fk.md, fk.md_len, NULL, 0), IXL_OK);
    struct ixl_xfer *x = post(0, SMALL, ++seed);
    uint64_t acked = 0;
    fd = nr_fake_accept(&fk, 0, &acked, NULL, WAIT_MS);
    CHECK(fd >= 0);
    uint32_t k;
    uint64_t req = fake_write_in(0, SMALL, seed, &k);
    fake_send(NET_WRITE_ACK, req, k, false, 0);
    CHECK_RC(ixl_xfer_wait(x, WAIT_MS), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
}

static void disconnect(void)
{
    ixl_agent_destroy(ag);
    ag = NULL;
    close(fd);
    fd = -1;
}

/* ---- the cases ------------------------------------------------------------------------------ */

/* The waiter's WRITE posted, its frame read at the fake (checked), and the waiter asleep in its
 * watch: the request number of its frame (and *k its chunk). */
static uint64_t waiter_in(struct waiter *w, bool poll, int stop_after, uint32_t *k)
{
    waiter_start(w, poll, stop_after);
    uint64_t r = fake_write_in(BIG, SMALL, w->seed, k);
    nr_sleep_ms(WATCH_MS);
    return r;
}

/* The end of a case's attempt: 1 when it is to be made again (the loop read first, so the
 * waiter's path was not taken), else 0 (taken: done says what was seen; or never taken in 5
 * attempts: a failure). */
static int attempt_over(const char *name, bool by_waiter, int attempt, const char *done)
{
    if (by_waiter) {
        fprintf(stderr, "  %s: %s\n", name, done);
        return 0;
    }
    if (attempt < 5) {
        fprintf(stderr, "  %s: the loop read first this time: again\n", name);
        return 1;
    }
    nr_fail("%s: the waiter never read the headers in 5 attempts", name);
    return 0;
}

static void case_left(void)
{
    for (int attempt = 1;; attempt++) {
        connect_fresh();
        struct ixl_xfer *x = post(0, BIG, ++seed);
        uint32_t kx, ky;
        uint64_t rx = fake_write_in(0, BIG, seed, &kx);
        nr_sleep_ms(50); /* the loop has sent all of X: Y's frame goes from its poster */
        struct waiter w;
        uint64_t ry = waiter_in(&w, false, 0, &ky);
        CHECK(ixl_xfer_status(x) == IXL_IN_PROGRESS);
        fake_send(NET_WRITE_ACK, rx, kx, false, 0);
        ixl_status sx = IXL_IN_PROGRESS;
        double end = nr_now() + 3;
        while ((sx = ixl_xfer_status(x)) == IXL_IN_PROGRESS && nr_now() < end)
            nr_sleep_ms(1);
        bool by_waiter = waiter_read(NET_WRITE_ACK);
        fake_send(NET_WRITE_ACK, ry, ky, false, 0);
        CHECK_RC(waiter_end(&w), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        disconnect();
        if (attempt_over("left", by_waiter, attempt, "the waiter read X's answer"))
            continue;
        if (by_waiter && sx != IXL_OK)
            nr_fail("left: X, whose answer the waiter read and left, ended %s (not within 3 s: "
                    "the loop was never told)",
                    ixl_strerror(sx));
        return;
    }
}

static void case_aside(void)
{
    for (int attempt = 1;; attempt++) {
        connect_fresh();
        struct waiter w;
        uint32_t ky;
        uint64_t ry = waiter_in(&w, false, 0, &ky);
        fake_send(NET_PONG, 0, 0, false, 0);
        nr_sleep_ms(1);
        fake_send(NET_NOTIF_ACK, 0, 0, true, 0);
        nr_sleep_ms(1);
        fake_send(NET_WRITE_ACK, ry, ky, true, 0);
        CHECK_RC(waiter_end(&w), IXL_OK);
        bool all =
            waiter_read(NET_PONG) && waiter_read(NET_NOTIF_ACK) && waiter_read(NET_WRITE_ACK);
        /* The same connection goes on: a WRITE answered on it, no new connection. */
        struct ixl_xfer *x = post(0, SMALL, ++seed);
        uint32_t k;
        uint64_t r = fake_write_in(0, SMALL, seed, &k);
        fake_send(NET_WRITE_ACK, r, k, false, 0);
        CHECK_RC(ixl_xfer_wait(x, WAIT_MS), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        struct pollfd pfd = {.fd = fk.lfd, .events = POLLIN};
        CHECK(poll(&pfd, 1, 0) == 0); /* nobody dialed again */
        disconnect();
        if (!attempt_over("aside", all, attempt,
                          "the waiter took a PONG, a NOTIF_ACK and its answer"))
            return;
    }
}

static void case_park(void)
{
    connect_fresh();
    struct waiter p;
    uint32_t ky;
    uint64_t ry = waiter_in(&p, true, 0, &ky);
    int parked = atomic_load(&n_park);
    fake_send(NET_WRITE_ACK, ry, ky, false, 0);
    CHECK_RC(waiter_end(&p), IXL_OK);
    fprintf(stderr,
            "  park: parked %d time(s) before the answer, given back %d, answer read by "
            "the poller: %s\n",
            parked, atomic_load(&n_unpark), waiter_read(NET_WRITE_ACK) ? "yes" : "no");
    if (parked < 1 || atomic_load(&n_unpark) < 1 || !waiter_read(NET_WRITE_ACK))
        nr_fail("park: the polling caller did not park its connection, take its answer and "
                "give EPOLLIN back");

    /* A poller that parks and stops looking: the loop's tick gives EPOLLIN back. */
    ry = waiter_in(&p, true, 1, &ky);
    CHECK(pthread_join(p.th, NULL) == 0);
    CHECK(p.st == IXL_IN_PROGRESS && atomic_load(&n_park) >= 1);
    fake_send(NET_WRITE_ACK, ry, ky, false, 0);
    nr_sleep_ms(500); /* ticks of heartbeat_ms / 4 (at most 100 ms) */
    is_waiter = true; /* this thread's reads are recorded from here */
    atomic_store(&n_read, 0);
    ixl_status st = ixl_xfer_status(p.x);
    bool self = waiter_read(NET_WRITE_ACK);
    is_waiter = false;
    CHECK_RC(st, IXL_OK);
    CHECK_RC(ixl_xfer_release(p.x), IXL_OK);
    disconnect();
    if (self)
        nr_fail("park: the answer of an abandoned poll was still unread after 500 ms (the loop "
                "never read the connection again)");
    else
        fprintf(stderr, "  park: an abandoned poll's answer was read by the loop\n");
}

static void case_forged(void)
{
    for (int attempt = 1;; attempt++) {
        connect_fresh();
        struct waiter w;
        uint32_t ky;
        uint64_t ry = waiter_in(&w, false, 0, &ky);
        fake_send(NET_WRITE_ACK, ry, ky, true, 1000);
        CHECK_RC(waiter_end(&w), IXL_ERR_REMOTE_DISCONNECT);
        bool by_waiter = waiter_read(NET_WRITE_ACK);
        CHECK(nr_log_has("acknowledged notification 1000 of this session, but only 0 were sent"));
        uint8_t b[64];
        CHECK(recv(fd, b, sizeof(b), 0) <= 0); /* closed by the initiator */
        disconnect();
        if (!attempt_over("forged", by_waiter, attempt,
                          "the waiter read it; Y failed, the connection closed"))
            return;
    }
}

int main(int argc, char **argv)
{
    nr_guard("test_net_take", 100, NULL);
    ixl_log_set_sink(nr_log_sink, NULL);
    region = aligned_alloc(4096, BIG + SMALL);
    src = aligned_alloc(4096, BIG + SMALL);
    CHECK(region != NULL && src != NULL);
    memset(region, 0xEE, BIG + SMALL);
    nr_fake_open(&fk, "take-tgt", region, BIG + SMALL);
    real_recv = (ssize_t(*)(int, void *, size_t, int))ixl_syscall_get("recv");
    CHECK(real_recv != NULL);
    CHECK_RC(ixl_syscall_set("recv", (ixl_syscall_fn)hook_recv), IXL_OK);
    real_epoll_ctl = (int (*)(int, int, int, struct epoll_event *))ixl_syscall_get("epoll_ctl");
    CHECK(real_epoll_ctl != NULL);
    CHECK_RC(ixl_syscall_set("epoll_ctl", (ixl_syscall_fn)hook_epoll_ctl), IXL_OK);
    static const struct nr_case cases[] = {
        {"left", case_left},
        {"aside", case_aside},
        {"park", case_park},
        {"forged", case_forged},
    };
    int rc = nr_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
    CHECK_RC(ixl_syscall_set("recv", NULL), IXL_OK);
    CHECK_RC(ixl_syscall_set("epoll_ctl", NULL), IXL_OK);
    nr_fake_close(&fk);
    free(region);
    free(src);
    return rc;
}

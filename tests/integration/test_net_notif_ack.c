/*
 * NET's acknowledged notifications (wire version 2, plugins/net/README.md "Notifications"):
 * a notification counted sent is delivered exactly once within one peer instance, or reported
 * lost; never dropped in silence.
 *
 *  reset  Two processes. The receiver (a child) is stopped (SIGSTOP) while this process sends
 *         numbered notifications of 1 KiB until the socket buffers are full and a send waits;
 *         the sender's silence timer (timeout_ms) then closes the connection, and a close()
 *         hook turns that close into a reset (SO_LINGER 0) after recording how many bytes
 *         still sat unsent in the socket (SIOCOUTQ: asserted > 0, so notifications really
 *         were in flight and a reset discarded them). The receiver continues; one more
 *         notification reconnects, and every number sent arrives exactly once and in order.
 *         Before acknowledged delivery the ones in the discarded buffer never arrived.
 *  forge  An in-process fake receiver (a real socket that speaks the wire format) takes
 *         notification 1 and answers with an ack of 1000: the sender closes the connection
 *         and logs why; it reconnects by itself and sends notification 1 again (never
 *         acknowledged), which the fake then acknowledges.
 *  cap    The fake takes notifications and never acknowledges (it answers PINGs, so the peer
 *         is alive): with notif_unacked_max=4 four sends go, the fifth fails with
 *         IXL_ERR_BUSY naming the bound; after an ack the next send goes, as number 5.
 *  lost   The fake never acknowledges three notifications; metadata of a new instance of the
 *         receiver is loaded: the three are logged lost, the next send fails with
 *         IXL_ERR_REMOTE_DISCONNECT saying so, and the one after starts the new session at 1.
 *  inline With the connection idle (everything acknowledged), ixl_notif_send sequences and
 *         sends its notification on the calling thread: a sendmsg() hook sees a NOTIF header
 *         leave from this thread, and the fake reads it, in order, without the sender's loop
 *         having to wake; then with the fake not acknowledging and the sends back to back,
 *         every number still arrives once and in order (whichever thread sent each).
 *
 * Usage: test_net_notif_ack [case...] (all by default). About 5 s.
 */
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "net_raw.h"

#define MSG_LEN 1024
#define MAX_SEND 20000
#define FAKE_WAIT_MS 5000

static pid_t recv_pid;

/* The hang guard's (nr_guard) last act: no child outlives the test. */
static void kill_children(void)
{
    if (recv_pid > 0)
        kill(recv_pid, SIGKILL);
}

static void msg_fill(uint8_t *m, uint64_t num)
{
    nr_put(m, num, 8);
    for (size_t i = 8; i < MSG_LEN; i++)
        m[i] = (uint8_t)(num * 31 + i);
}

/* ---- close(): a reset instead of a close, while armed ---------------------------------- */

static int (*real_close)(int fd);
static atomic_int rst_armed, n_rst;
static atomic_long rst_unsent; /* bytes the socket still had to send at the first reset */

static int rst_close(int fd)
{
    if (atomic_load(&rst_armed)) {
        int type = 0;
        socklen_t tl = sizeof(type);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int listening = 0;
        socklen_t ll = sizeof(listening);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM &&
            getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET &&
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) == 0 && !listening) {
            int unsent = 0;
            ioctl(fd, SIOCOUTQ, &unsent);
            struct linger lg = {1, 0}; /* the close sends RST and drops what is buffered */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            if (atomic_fetch_add(&n_rst, 1) == 0)
                atomic_store(&rst_unsent, unsent);
        }
    }
    return real_close(fd);
}

/* ---- the receiver (case reset; a child process) ---------------------------------------- */

struct cmd {
    uint64_t want; /* drain until this many arrived in all, or ms passed */
    int32_t ms;
    int32_t quit;
};

struct reply {
    uint64_t got;   /* in all, in order, each once */
    int64_t bad_at; /* -1, or the count at which something was wrong */
    char why[256];
};

static int receiver_main(int fd)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
                                 .backends = "",
                                 .notif_max = 4096};
    struct ixl_agent *a;
    if (ixl_agent_create("ack-rcv", &p, &a) != IXL_OK)
        return 1;
    struct ixl_kv opts[] = {{"timeout_ms", "1000"}, {"heartbeat_ms", "100"}};
    if (ixl_backend_create(a, "NET", opts, 2, NULL) != IXL_OK)
        return 1;
    void *md;
    size_t md_len;
    if (ixl_md_get(a, NULL, &md, &md_len) != IXL_OK)
        return 1;
    uint64_t len64 = md_len;
    if (nr_write_all(fd, &len64, sizeof(len64)) != 0 || nr_write_all(fd, md, md_len) != 0)
        return 1;
    ixl_free(md);
    struct reply r = {.bad_at = -1};
    struct cmd c;
    while (nr_read_all(fd, &c, sizeof(c)) == 0 && !c.quit) {
        double t0 = nr_now();
        while (r.got < c.want && nr_now() - t0 < c.ms / 1000.0) {
            struct ixl_notif_batch *b = NULL;
            if (ixl_notif_drain(a, &b) != IXL_OK)
                return 1;
            size_t n = b ? b->count : 0;
            for (size_t i = 0; i < n; i++) {
                const struct ixl_notif *x = &b->items[i];
                uint8_t want[MSG_LEN];
                msg_fill(want, r.got);
                if (r.bad_at < 0 && (strcmp(x->agent, "ack-snd") != 0 || x->len != MSG_LEN ||
                                     memcmp(x->msg, want, MSG_LEN) != 0)) {
                    r.bad_at = (int64_t)r.got;
                    snprintf(r.why, sizeof(r.why),
                             "notification %llu: from '%s', %zu bytes, number %llu (a number "
                             "twice, one missing, or damaged)",
                             (unsigned long long)r.got, x->agent, x->len,
                             x->len >= 8 ? (unsigned long long)nr_get(x->msg, 8) : 0ull);
                }
                r.got++;
            }
            ixl_free(b);
            if (n == 0)
                nr_sleep_ms(2);
        }
        if (nr_write_all(fd, &r, sizeof(r)) != 0)
            return 1;
    }
    ixl_agent_destroy(a);
    return 0;
}

static struct reply command(int fd, uint64_t want, int ms)
{
    struct cmd c = {.want = want, .ms = ms};
    struct reply r;
    CHECK(nr_write_all(fd, &c, sizeof(c)) == 0);
    CHECK(nr_read_all(fd, &r, sizeof(r)) == 0);
    return r;
}

static struct ixl_agent *sender(const char *name, const char *const *kv)
{
    struct ixl_agent *a = NULL;
    char why[512];
    ixl_status st = nr_agent(name, kv, &a, why, sizeof(why));
    if (st != IXL_OK) {
        fprintf(stderr, "%s\n", why);
        CHECK_RC(st, IXL_OK);
    }
    return a;
}

static void case_reset(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(NULL);
    recv_pid = fork();
    CHECK(recv_pid >= 0);
    if (recv_pid == 0) {
        close(sv[0]);
        _exit(receiver_main(sv[1]));
    }
    close(sv[1]);
    uint64_t md_len;
    CHECK(nr_read_all(sv[0], &md_len, sizeof(md_len)) == 0 && md_len < (1u << 20));
    uint8_t *md = malloc(md_len);
    CHECK(md != NULL && nr_read_all(sv[0], md, md_len) == 0);

    /* One connection (conns=1), so that a reset loses what it carried; a silence of 1 s with
     * notifications unacknowledged declares the receiver dead. */
    const char *kv[] = {"timeout_ms", "1000", "heartbeat_ms", "100", "conns", "1", NULL};
    struct ixl_agent *a = sender("ack-snd", kv);
    CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
    uint8_t m[MSG_LEN];
    msg_fill(m, 0);
    CHECK_RC(ixl_notif_send(a, "ack-rcv", m, MSG_LEN, NULL), IXL_OK);
    struct reply r = command(sv[0], 1, 5000);
    CHECK(r.got == 1 && r.bad_at < 0);

    /* The receiver stops reading; sends go until its buffers and ours are full. */
    CHECK(kill(recv_pid, SIGSTOP) == 0);
    atomic_store(&rst_armed, 1);
    uint64_t sent = 1;
    ixl_status last = IXL_OK;
    double s0 = nr_now();
    while (sent < MAX_SEND) {
        msg_fill(m, sent);
        last = ixl_notif_send(a, "ack-rcv", m, MSG_LEN, NULL);
        if (last != IXL_OK)
            break; /* not sequenced: not sent (the connection was cut while it waited) */
        sent++;
    }
    double waited = nr_now() - s0;
    for (int i = 0; i < 300 && atomic_load(&n_rst) == 0; i++)
        nr_sleep_ms(10);
    atomic_store(&rst_armed, 0);
    long unsent = atomic_load(&rst_unsent);
    fprintf(stderr,
            "reset: %llu notifications sent while the receiver was stopped (%.1f s; the last "
            "send: %s), %d reset(s), %ld bytes unsent in the socket at the first\n",
            (unsigned long long)sent - 1, waited, ixl_strerror(last), atomic_load(&n_rst), unsent);
    if (last == IXL_OK)
        nr_fail("%d sends went to a stopped receiver without the connection being cut", MAX_SEND);
    if (atomic_load(&n_rst) == 0)
        nr_fail("the sender never closed its connection to the stopped receiver");
    if (unsent < MSG_LEN)
        nr_fail("only %ld bytes sat unsent in the socket when it was reset: nothing in flight was "
                "put at risk",
                unsent);

    /* The receiver goes on; one more notification reconnects (retried while the attempt that
     * started when the receiver was stopped fails), and everything arrives once, in order. */
    CHECK(kill(recv_pid, SIGCONT) == 0);
    msg_fill(m, sent);
    ixl_status st = IXL_ERR_REMOTE_DISCONNECT;
    for (int i = 0; i < 10 && st != IXL_OK; i++) {
        st = ixl_notif_send(a, "ack-rcv", m, MSG_LEN, NULL);
        if (st != IXL_OK) {
            if (st != IXL_ERR_REMOTE_DISCONNECT && st != IXL_ERR_BUSY)
                break;
            nr_sleep_ms(100);
        }
    }
    if (st != IXL_OK)
        nr_fail("the send after the receiver went on: %s: %s", ixl_strerror(st),
                ixl_agent_last_error(a));
    else
        sent++;
    r = command(sv[0], sent, 20000);
    fprintf(stderr, "reset: %llu of %llu arrived, in order, each once\n", (unsigned long long)r.got,
            (unsigned long long)sent);
    if (r.got < sent)
        nr_fail("%llu notifications counted sent never arrived (lost with the reset)",
                (unsigned long long)(sent - r.got));
    if (r.bad_at >= 0)
        nr_fail("%s", r.why);
    r = command(sv[0], sent + 1, 300); /* nothing more comes (a duplicate would) */
    if (r.got != sent || r.bad_at >= 0)
        nr_fail("%llu notifications arrived, %llu sent: %s", (unsigned long long)r.got,
                (unsigned long long)sent, r.why);
    struct cmd q = {.quit = 1};
    CHECK(nr_write_all(sv[0], &q, sizeof(q)) == 0);
    ixl_agent_destroy(a); /* everything was acknowledged: nothing is reported */
    if (nr_log_has("never acknowledged") || nr_log_has("not acknowledged yet"))
        nr_fail("notifications reported lost: %s", nr_log_text);
    int ws;
    CHECK(waitpid(recv_pid, &ws, 0) == recv_pid);
    recv_pid = 0;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        nr_fail("the receiver ended with status %d", ws);
    close(sv[0]);
    free(md);
}

/* ---- the fake receiver (net_raw.h: nr_fake) -------------------------------------------- */

static void fake_ack(int fd, uint64_t ack)
{
    uint8_t a[NET_HDR_BYTES];
    nr_hdr(a, NET_NOTIF_ACK, 0, 0, 0, ack);
    nr_put(a + 6, NET_F_ACK, 2);
    CHECK(nr_send(fd, a, sizeof(a)) == 0);
}

/* The next NOTIF within ms (PINGs answered with a PONG that acknowledges nothing): its
 * sequence number and first 8 bytes; 0 when the connection ended or nothing came in time. */
static uint64_t fake_notif_in(int fd, uint64_t *num, int ms)
{
    double end = nr_now() + ms / 1000.0;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int left = (int)((end - nr_now()) * 1000);
        if (left <= 0 || poll(&pfd, 1, left) != 1)
            return 0;
        uint8_t h[NET_HDR_BYTES];
        if (nr_recv_all(fd, h, sizeof(h)) != 0)
            return 0;
        uint64_t len = nr_get(h + 32, 8);
        if (h[5] == NET_PING) {
            uint8_t p[NET_HDR_BYTES];
            nr_hdr(p, NET_PONG, nr_get(h + 16, 8), 0, 0, 0);
            if (nr_send(fd, p, sizeof(p)) != 0)
                return 0;
            continue;
        }
        CHECK(h[5] == NET_NOTIF && len == MSG_LEN);
        uint8_t body[MSG_LEN];
        if (nr_recv_all(fd, body, sizeof(body)) != 0)
            return 0;
        *num = nr_get(body, 8);
        return nr_get(h + 16, 8);
    }
}

static uint64_t fake_notif(int fd, uint64_t *num)
{
    return fake_notif_in(fd, num, FAKE_WAIT_MS);
}

struct async_send {
    pthread_t th;
    struct ixl_agent *a;
    const char *to;
    uint64_t num;
    ixl_status st;
    char why[512];
};

static void *async_main(void *arg)
{
    struct async_send *s = arg;
    uint8_t m[MSG_LEN];
    msg_fill(m, s->num);
    s->st = ixl_notif_send(s->a, s->to, m, MSG_LEN, NULL);
    snprintf(s->why, sizeof(s->why), "%s", s->st == IXL_OK ? "" : ixl_agent_last_error(s->a));
    return NULL;
}

/* ixl_notif_send on a thread of its own (the fake answers on this one). */
static void send_start(struct async_send *s, struct ixl_agent *a, const char *to, uint64_t num)
{
    *s = (struct async_send){.a = a, .to = to, .num = num};
    CHECK(pthread_create(&s->th, NULL, async_main, s) == 0);
}

static ixl_status send_end(struct async_send *s)
{
    pthread_join(s->th, NULL);
    return s->st;
}

static void case_forge(void)
{
    struct nr_fake f;
    nr_fake_open(&f, "fake-rcv", NULL, 0);
    const char *kv[] = {"timeout_ms", "2000", "heartbeat_ms", "100", "conns", "1", NULL};
    struct ixl_agent *a = sender("forge-snd", kv);
    CHECK_RC(ixl_md_load(a, f.md, f.md_len, NULL, 0), IXL_OK);
    nr_log_clear();
    struct async_send s;
    send_start(&s, a, "fake-rcv", 1);
    uint64_t acked = 99, num = 0;
    int fd = nr_fake_accept(&f, 0, &acked, NULL, FAKE_WAIT_MS);
    CHECK(fd >= 0 && acked == 0);
    CHECK(fake_notif(fd, &num) == 1 && num == 1);
    CHECK_RC(send_end(&s), IXL_OK);
    /* An ack of 1000 when 1 was sent: the sender closes the connection, saying why. */
    fake_ack(fd, 1000);
    double t0 = nr_now();
    uint8_t b[256];
    ssize_t got;
    do
        got = recv(fd, b, sizeof(b), 0);
    while (got > 0 || (got < 0 && errno == EINTR));
    if (got < 0 && errno != ECONNRESET)
        nr_fail("forge: the sender did not close the connection after a forged ack (%.1f s)",
                nr_now() - t0);
    close(fd);
    for (int i = 0; i < 100 && !nr_log_has("acknowledged notification 1000"); i++)
        nr_sleep_ms(10);
    if (!nr_log_has("acknowledged notification 1000 of this session, but only 1 were sent"))
        nr_fail("forge: no clear log of the forged ack: '%s'", nr_log_text);
    else
        fprintf(stderr, "forge: the sender closed the connection and logged: %s", nr_log_text);
    /* It reconnects by itself (a working connection broke with a notification not
     * acknowledged) and sends notification 1 again; an honest ack ends it. */
    fd = nr_fake_accept(&f, 0, &acked, NULL, FAKE_WAIT_MS);
    if (fd < 0) {
        nr_fail("forge: the sender did not reconnect to send its unacknowledged notification");
    } else {
        CHECK(acked == 0);
        uint64_t seq = fake_notif(fd, &num);
        if (seq != 1 || num != 1)
            nr_fail("forge: after the reconnect came sequence %llu (number %llu), want 1 again",
                    (unsigned long long)seq, (unsigned long long)num);
        fake_ack(fd, 1);
        /* The store is empty now: the next one is 2, and nothing else comes before it. */
        send_start(&s, a, "fake-rcv", 2);
        seq = fake_notif(fd, &num);
        CHECK_RC(send_end(&s), IXL_OK);
        if (seq != 2 || num != 2)
            nr_fail("forge: then came sequence %llu (number %llu), want 2", (unsigned long long)seq,
                    (unsigned long long)num);
        fake_ack(fd, 2);
        nr_sleep_ms(50);
        close(fd);
    }
    nr_log_clear();
    ixl_agent_destroy(a);
    if (nr_log_has("never acknowledged") || nr_log_has("not acknowledged yet"))
        nr_fail("forge: notifications reported lost at destroy: %s", nr_log_text);
    nr_fake_close(&f);
}

static void case_cap(void)
{
    struct nr_fake f;
    nr_fake_open(&f, "fake-rcv", NULL, 0);
    const char *kv[] = {
        "timeout_ms", "500", "heartbeat_ms", "50", "conns", "1", "notif_unacked_max", "4", NULL};
    struct ixl_agent *a = sender("cap-snd", kv);
    CHECK_RC(ixl_md_load(a, f.md, f.md_len, NULL, 0), IXL_OK);
    struct async_send s;
    send_start(&s, a, "fake-rcv", 1);
    uint64_t acked = 99, num = 0;
    int fd = nr_fake_accept(&f, 0, &acked, NULL, FAKE_WAIT_MS);
    CHECK(fd >= 0);
    CHECK(fake_notif(fd, &num) == 1 && num == 1);
    CHECK_RC(send_end(&s), IXL_OK);
    for (uint64_t k = 2; k <= 4; k++) {
        send_start(&s, a, "fake-rcv", k);
        CHECK(fake_notif(fd, &num) == k && num == k);
        CHECK_RC(send_end(&s), IXL_OK);
    }
    /* Four unacknowledged: the fifth waits for an ack (the fake answers only PINGs), then
     * fails, withdrawn, naming the bound. */
    double t0 = nr_now();
    send_start(&s, a, "fake-rcv", 5);
    /* Meanwhile the fake answers the sender's PINGs (it is alive); no NOTIF may come. */
    uint64_t seq = fake_notif_in(fd, &num, 1500);
    ixl_status st = send_end(&s);
    fprintf(stderr, "cap: the fifth send: %s after %.2f s: %s\n", ixl_strerror(st), nr_now() - t0,
            s.why);
    if (seq != 0)
        nr_fail("cap: notification %llu went past notif_unacked_max=4", (unsigned long long)seq);
    if (st != IXL_ERR_BUSY || strstr(s.why, "notif_unacked_max=4") == NULL)
        nr_fail("cap: the send past the bound gave %s (%s), want IXL_ERR_BUSY naming "
                "notif_unacked_max=4",
                ixl_strerror(st), s.why);
    /* An ack of all four: the next send goes, as number 5. */
    fake_ack(fd, 4);
    send_start(&s, a, "fake-rcv", 5);
    seq = fake_notif(fd, &num);
    st = send_end(&s);
    if (st != IXL_OK || seq != 5 || num != 5)
        nr_fail("cap: after the ack: %s (%s), sequence %llu number %llu", ixl_strerror(st), s.why,
                (unsigned long long)seq, (unsigned long long)num);
    fake_ack(fd, 5);
    nr_sleep_ms(50);
    close(fd);
    ixl_agent_destroy(a);
    nr_fake_close(&f);
}

static void case_lost(void)
{
    struct nr_fake f;
    nr_fake_open(&f, "fake-rcv", NULL, 0);
    const char *kv[] = {"timeout_ms", "3000", "heartbeat_ms", "100", "conns", "1", NULL};
    struct ixl_agent *a = sender("lost-snd", kv);
    CHECK_RC(ixl_md_load(a, f.md, f.md_len, NULL, 0), IXL_OK);
    nr_log_clear();
    struct async_send s;
    uint64_t acked = 99, num = 0, inst1 = 0, inst2 = 0;
    send_start(&s, a, "fake-rcv", 1);
    int fd = nr_fake_accept(&f, 0, &acked, &inst1, FAKE_WAIT_MS);
    CHECK(fd >= 0);
    for (uint64_t k = 1; k <= 3; k++) {
        if (k > 1)
            send_start(&s, a, "fake-rcv", k);
        CHECK(fake_notif(fd, &num) == k && num == k);
        CHECK_RC(send_end(&s), IXL_OK);
    }
    /* The receiver "restarted": metadata of a new instance on the same port. */
    nr_put(f.conn + 8, nr_get(f.conn + 8, 8) ^ 0x5a5a, 8);
    CHECK_RC(ixl_md_load(a, f.md, f.md_len, NULL, 0), IXL_OK);
    close(fd);
    if (!nr_log_has("3 notification(s) to 'fake-rcv' (sequence numbers 1..3) were never "
                    "acknowledged and are lost"))
        nr_fail("lost: the three unacknowledged notifications were not reported: '%s'",
                nr_log_text);
    uint8_t m[MSG_LEN];
    msg_fill(m, 4);
    ixl_status st = ixl_notif_send(a, "fake-rcv", m, MSG_LEN, NULL);
    const char *why = ixl_agent_last_error(a);
    fprintf(stderr, "lost: the next send: %s: %s\n", ixl_strerror(st), why);
    if (st != IXL_ERR_REMOTE_DISCONNECT || strstr(why, "never acknowledged") == NULL)
        nr_fail("lost: the next send gave %s (%s), want IXL_ERR_REMOTE_DISCONNECT saying the "
                "notifications were lost",
                ixl_strerror(st), why);
    /* The one after goes to the new instance, sequence 1 of a new session. */
    send_start(&s, a, "fake-rcv", 4);
    fd = nr_fake_accept(&f, 0, &acked, &inst2, FAKE_WAIT_MS);
    CHECK(fd >= 0);
    if (acked != 0 || inst2 == inst1)
        nr_fail("lost: the new connection says ack %llu for instance %llx (was %llx)",
                (unsigned long long)acked, (unsigned long long)inst2, (unsigned long long)inst1);
    uint64_t seq = fake_notif(fd, &num);
    CHECK_RC(send_end(&s), IXL_OK);
    if (seq != 1 || num != 4)
        nr_fail("lost: the new session began with sequence %llu (number %llu), want 1 (4)",
                (unsigned long long)seq, (unsigned long long)num);
    fake_ack(fd, 1);
    nr_sleep_ms(50);
    close(fd);
    ixl_agent_destroy(a);
    nr_fake_close(&f);
}

/* ---- sendmsg(): which thread sends NOTIF frames, while armed ---------------------------- */

static ssize_t (*real_sendmsg)(int fd, const struct msghdr *m, int flags);
static _Atomic pid_t notif_watch; /* the thread to count, 0: none */
static atomic_int notif_by_watched, notif_by_others;

static ssize_t watch_sendmsg(int fd, const struct msghdr *m, int flags)
{
    pid_t w = atomic_load(&notif_watch);
    if (w != 0 && m->msg_iovlen > 0 && m->msg_iov[0].iov_len >= NET_HDR_BYTES &&
        ((const uint8_t *)m->msg_iov[0].iov_base)[5] == NET_NOTIF) {
        if ((pid_t)syscall(SYS_gettid) == w)
            atomic_fetch_add(&notif_by_watched, 1);
        else
            atomic_fetch_add(&notif_by_others, 1);
    }
    return real_sendmsg(fd, m, flags);
}

static void case_inline(void)
{
    struct nr_fake f;
    nr_fake_open(&f, "fake-rcv", NULL, 0);
    const char *kv[] = {"timeout_ms", "5000", "heartbeat_ms", "2000", "conns", "1", NULL};
    struct ixl_agent *a = sender("inline-snd", kv);
    CHECK_RC(ixl_md_load(a, f.md, f.md_len, NULL, 0), IXL_OK);
    struct async_send s;
    send_start(&s, a, "fake-rcv", 1); /* the first dials: the loop sends it */
    uint64_t acked = 99, num = 0;
    int fd = nr_fake_accept(&f, 0, &acked, NULL, FAKE_WAIT_MS);
    CHECK(fd >= 0);
    CHECK(fake_notif(fd, &num) == 1 && num == 1);
    CHECK_RC(send_end(&s), IXL_OK);
    fake_ack(fd, 1);
    int inline_seen = 0;
    for (uint64_t k = 2; k <= 6; k++) {
        nr_sleep_ms(30); /* the ack read, the connection idle */
        atomic_store(&notif_by_watched, 0);
        atomic_store(&notif_watch, (pid_t)syscall(SYS_gettid));
        uint8_t m[MSG_LEN];
        msg_fill(m, k);
        CHECK_RC(ixl_notif_send(a, "fake-rcv", m, MSG_LEN, NULL), IXL_OK);
        atomic_store(&notif_watch, 0);
        inline_seen += atomic_load(&notif_by_watched) > 0;
        uint64_t seq = fake_notif(fd, &num);
        if (seq != k || num != k)
            nr_fail("inline: sequence %llu (number %llu) arrived, want %llu",
                    (unsigned long long)seq, (unsigned long long)num, (unsigned long long)k);
        fake_ack(fd, k);
    }
    /* A heartbeat going out at that moment may leave one to the loop. */
    if (inline_seen < 4)
        nr_fail("inline: %d of 5 notifications to an idle connection left from the sending "
                "thread, want >= 4",
                inline_seen);
    else
        fprintf(stderr, "inline: %d of 5 notifications left from the sending thread\n",
                inline_seen);
    /* Back to back, unacknowledged: some from this thread, the rest by the loop behind them;
     * the fake must read 7..56 once each and in order. */
    atomic_store(&notif_by_watched, 0);
    atomic_store(&notif_by_others, 0);
    atomic_store(&notif_watch, (pid_t)syscall(SYS_gettid));
    for (uint64_t k = 7; k <= 56; k++) {
        uint8_t m[MSG_LEN];
        msg_fill(m, k);
        CHECK_RC(ixl_notif_send(a, "fake-rcv", m, MSG_LEN, NULL), IXL_OK);
    }
    atomic_store(&notif_watch, 0);
    for (uint64_t k = 7; k <= 56; k++) {
        uint64_t seq = fake_notif(fd, &num);
        if (seq != k || num != k) {
            nr_fail("inline: back to back, sequence %llu (number %llu) arrived, want %llu",
                    (unsigned long long)seq, (unsigned long long)num, (unsigned long long)k);
            break;
        }
    }
    fprintf(stderr,
            "inline: 50 back to back arrived in order (%d sends from this thread, %d "
            "from others)\n",
            atomic_load(&notif_by_watched), atomic_load(&notif_by_others));
    fake_ack(fd, 56);
    nr_sleep_ms(50);
    nr_log_clear();
    ixl_agent_destroy(a);
    close(fd);
    if (nr_log_has("never acknowledged") || nr_log_has("not acknowledged yet"))
        nr_fail("inline: notifications reported lost at destroy: %s", nr_log_text);
    nr_fake_close(&f);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_notif_ack", 100, kill_children);
    ixl_log_set_level(IXL_LOG_WARN);
    ixl_log_set_sink(nr_log_sink, NULL);
    real_close = (int (*)(int))ixl_syscall_get("close");
    CHECK(real_close != NULL);
    CHECK_RC(ixl_syscall_set("close", (ixl_syscall_fn)rst_close), IXL_OK);
    real_sendmsg = (ssize_t(*)(int, const struct msghdr *, int))ixl_syscall_get("sendmsg");
    CHECK(real_sendmsg != NULL);
    CHECK_RC(ixl_syscall_set("sendmsg", (ixl_syscall_fn)watch_sendmsg), IXL_OK);
    static const struct nr_case cases[] = {{"reset", case_reset},
                                           {"forge", case_forge},
                                           {"cap", case_cap},
                                           {"lost", case_lost},
                                           {"inline", case_inline}};
    return nr_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

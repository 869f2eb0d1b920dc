/*
 * NET's queue of received notifications is bounded (issue 16, finding 5): a receiver whose
 * application does not drain holds back its sender instead of growing without limit, and
 * loses nothing.
 *
 * A child process runs the receiver at RLIMIT_NOFILE=64 with notif_queue_bytes=1M (and
 * notif_queue_max=65536); this process sends notifications of 1 KiB, numbered, from one
 * thread (ixl_notif_send) while the receiver does not drain:
 *   1. the flood (at most FLOOD_S): the receiver's RSS grows by less than RSS_SLACK over its
 *      bound; the sender is held back: a send fails with IXL_ERR_BUSY (withdrawn: it was not
 *      sent; the same number is sent again later) or IXL_ERR_TIMEOUT (it is on the connection
 *      and arrives later), with a text that says why; any other error fails the test;
 *   2. held for 4 x timeout_ms more without a drain: the connection is not declared dead;
 *   3. the receiver drains: what its queue held is within the bound, and every notification
 *      the sender counts as sent arrives, in order, once, with its bytes intact; 200 more
 *      then go through at once.
 * Without notif_queue_bytes (NET before issue 16) the test fails, and still floods with the
 * defaults to show the growth. About 4 s.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "net_raw.h"

#define MSG_LEN 1024
#define QUEUE_BYTES (1u << 20)
#define TIMEOUT_MS 500
#define FLOOD_S 3.0
#define RSS_SLACK (16u << 20) /* allocator and per-entry overhead over the bound */
#define CASE_MAX_S 20.0

static pid_t recv_pid;

/* The hang guard's (nr_guard) last act: no child outlives the test. */
static void kill_children(void)
{
    if (recv_pid > 0)
        kill(recv_pid, SIGKILL);
}

static void msg_fill(uint8_t *m, uint64_t seq)
{
    nr_put(m, seq, 8);
    for (size_t i = 8; i < MSG_LEN; i++)
        m[i] = (uint8_t)(seq * 31 + i);
}

/* ---- the receiver (child) ------------------------------------------------------------- */

struct up {
    int32_t bound_known;
    int32_t pad;
    uint64_t md_len;
    char why[256];
};

struct cmd {
    uint64_t want; /* drain until this many arrived in all, or ms passed */
    int32_t ms;
    int32_t quit;
};

struct reply {
    uint64_t got;   /* in all, in order */
    uint64_t first; /* how many the first drain of this command took */
    int64_t bad_at; /* -1, or the count at which something was wrong */
    char why[256];
};

static int receiver_main(int fd)
{
    struct rlimit rl = {64, 64};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1;
    struct up up = {.bound_known = 1};
    const char *kv[] = {
        "timeout_ms", "500", "heartbeat_ms", "100", "notif_queue_bytes", "1M", "notif_queue_max",
        "65536",      NULL};
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
                                 .backends = "",
                                 .notif_max = 4096};
    struct ixl_agent *a;
    if (ixl_agent_create("recv", &p, &a) != IXL_OK)
        return 1;
    struct ixl_kv opts[4];
    for (int i = 0; i < 4; i++)
        opts[i] = (struct ixl_kv){kv[2 * i], kv[2 * i + 1]};
    if (ixl_backend_create(a, "NET", opts, 4, NULL) != IXL_OK) {
        up.bound_known = 0;
        snprintf(up.why, sizeof(up.why), "%s", ixl_agent_last_error(a));
        if (ixl_backend_create(a, "NET", opts, 2, NULL) != IXL_OK)
            return 1;
    }
    void *md;
    size_t md_len;
    if (ixl_md_get(a, NULL, &md, &md_len) != IXL_OK)
        return 1;
    up.md_len = md_len;
    if (nr_write_all(fd, &up, sizeof(up)) != 0 || nr_write_all(fd, md, md_len) != 0)
        return 1;
    ixl_free(md);
    struct reply r = {.bad_at = -1};
    struct cmd c;
    while (nr_read_all(fd, &c, sizeof(c)) == 0 && !c.quit) {
        double t0 = nr_now();
        r.first = 0;
        bool first = true;
        while (r.got < c.want && nr_now() - t0 < c.ms / 1000.0) {
            struct ixl_notif_batch *b = NULL;
            if (ixl_notif_drain(a, &b) != IXL_OK)
                return 1;
            size_t n = b ? b->count : 0;
            if (first && n > 0) {
                r.first = n;
                first = false;
            }
            for (size_t i = 0; i < n; i++) {
                const struct ixl_notif *x = &b->items[i];
                uint8_t want[MSG_LEN];
                msg_fill(want, r.got);
                if (r.bad_at < 0 && (strcmp(x->agent, "send") != 0 || x->len != MSG_LEN ||
                                     memcmp(x->msg, want, MSG_LEN) != 0)) {
                    r.bad_at = (int64_t)r.got;
                    snprintf(r.why, sizeof(r.why),
                             "notification %llu: from '%s', %zu bytes, number %llu",
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

/* ---- the sender ------------------------------------------------------------------------ */

struct sender {
    struct ixl_agent *a;
    atomic_int stop;
    atomic_ullong sent; /* numbers sent (or on their way): the next to send */
    atomic_long held;   /* sends that came back held */
    atomic_long other;  /* other errors */
    char held_why[512], err[512];
};

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    uint8_t m[MSG_LEN];
    while (!atomic_load(&s->stop)) {
        uint64_t seq = atomic_load(&s->sent);
        msg_fill(m, seq);
        ixl_status st = ixl_notif_send(s->a, "recv", m, MSG_LEN, NULL);
        if (st == IXL_OK) {
            atomic_store(&s->sent, seq + 1);
        } else if (st == IXL_ERR_BUSY || st == IXL_ERR_TIMEOUT) {
            if (st == IXL_ERR_TIMEOUT) /* on the connection: it arrives later */
                atomic_store(&s->sent, seq + 1);
            if (atomic_fetch_add(&s->held, 1) == 0)
                snprintf(s->held_why, sizeof(s->held_why), "%s: %s", ixl_strerror(st),
                         ixl_agent_last_error(s->a));
        } else {
            if (atomic_fetch_add(&s->other, 1) == 0)
                snprintf(s->err, sizeof(s->err), "%s: %s", ixl_strerror(st),
                         ixl_agent_last_error(s->a));
            nr_sleep_ms(10);
        }
    }
    return NULL;
}

static long rss_kb(void)
{
    return nr_proc_field(recv_pid, "VmRSS:");
}

static struct reply command(int fd, uint64_t want, int ms)
{
    struct cmd c = {.want = want, .ms = ms};
    struct reply r;
    CHECK(nr_write_all(fd, &c, sizeof(c)) == 0);
    CHECK(nr_read_all(fd, &r, sizeof(r)) == 0);
    return r;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_notif_flood", 60, kill_children);
    ixl_log_set_level(IXL_LOG_NONE);
    double t0 = nr_now();

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
    struct up up;
    CHECK(nr_read_all(sv[0], &up, sizeof(up)) == 0 && up.md_len < (1u << 20));
    uint8_t *md = malloc(up.md_len);
    CHECK(md != NULL && nr_read_all(sv[0], md, up.md_len) == 0);
    if (!up.bound_known)
        nr_fail("NET refused notif_queue_bytes / notif_queue_max: %s; the flood runs with the "
                "defaults",
                up.why);

    struct sender s = {0};
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
                                 .backends = "",
                                 .notif_max = 4096};
    CHECK_RC(ixl_agent_create("send", &p, &s.a), IXL_OK);
    const struct ixl_kv kv[] = {{"timeout_ms", "500"}, {"heartbeat_ms", "100"}};
    CHECK_RC(ixl_backend_create(s.a, "NET", kv, 2, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(s.a, md, up.md_len, NULL, 0), IXL_OK);
    uint8_t m0[MSG_LEN];
    msg_fill(m0, 0);
    CHECK_RC(ixl_notif_send(s.a, "recv", m0, MSG_LEN, NULL), IXL_OK);
    atomic_store(&s.sent, 1);
    nr_sleep_ms(100);
    long rss0 = rss_kb();

    /* 1. the flood */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, sender_main, &s) == 0);
    double f0 = nr_now();
    long peak = rss0;
    while (nr_now() - f0 < FLOOD_S && atomic_load(&s.held) < 2) {
        nr_sleep_ms(20);
        long r = rss_kb();
        if (r > peak)
            peak = r;
    }
    double flood_s = nr_now() - f0;
    unsigned long long sent1 = atomic_load(&s.sent);
    fprintf(stderr,
            "flood: %.1f s, %llu notifications of %u bytes sent, %ld sends held back, the "
            "receiver's RSS %ld -> %ld KiB (peak)\n",
            flood_s, sent1, MSG_LEN, atomic_load(&s.held), rss0, peak);
    if ((peak - rss0) * 1024L > (long)(QUEUE_BYTES + RSS_SLACK))
        nr_fail("the receiver's RSS grew by %ld KiB while it did not drain (bound %u KiB + %u KiB)",
                peak - rss0, QUEUE_BYTES >> 10, RSS_SLACK >> 10);
    if (atomic_load(&s.held) == 0)
        nr_fail("the sender was never held back: %llu notifications went out to a receiver that "
                "does not drain",
                sent1);
    else
        fprintf(stderr, "held back: %s\n", s.held_why);
    if (atomic_load(&s.held) > 0 && strstr(s.held_why, "drain") == NULL &&
        strstr(s.held_why, "reads again") == NULL)
        nr_fail("the sender's error does not say why: %s", s.held_why);

    /* 2. held longer than the liveness timeout, sender still trying */
    nr_sleep_ms(4 * TIMEOUT_MS);
    long r2 = rss_kb();
    if (r2 > peak)
        peak = r2;
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    if (atomic_load(&s.other) > 0)
        nr_fail("the sender saw %ld other error(s), first: %s", atomic_load(&s.other), s.err);
    if ((peak - rss0) * 1024L > (long)(QUEUE_BYTES + RSS_SLACK))
        nr_fail("the receiver's RSS grew by %ld KiB by the end of the hold", peak - rss0);

    /* 3. the drain: everything the sender counts, in order */
    uint64_t want = atomic_load(&s.sent);
    struct reply r = command(sv[0], want, 8000);
    fprintf(stderr, "drain: %llu of %llu arrived in order; the first drain took %llu (%llu KiB)\n",
            (unsigned long long)r.got, (unsigned long long)want, (unsigned long long)r.first,
            (unsigned long long)(r.first * MSG_LEN) >> 10);
    if (r.got < want)
        nr_fail("only %llu of the %llu notifications the sender counts arrived",
                (unsigned long long)r.got, (unsigned long long)want);
    if (r.bad_at >= 0)
        nr_fail("out of order, doubled or damaged: %s", r.why);
    /* 16 connections may each have had one notification's body in flight at the bound. */
    if (r.first * MSG_LEN > QUEUE_BYTES + 16u * 4096u)
        nr_fail("the receiver's queue held %llu bytes (bound %u)",
                (unsigned long long)(r.first * MSG_LEN), QUEUE_BYTES);
    uint8_t m[MSG_LEN];
    for (int i = 0; i < 200; i++) {
        msg_fill(m, want + (uint64_t)i);
        ixl_status st = ixl_notif_send(s.a, "recv", m, MSG_LEN, NULL);
        if (st != IXL_OK) {
            nr_fail("after the drain, send %d: %s: %s", i, ixl_strerror(st),
                    ixl_agent_last_error(s.a));
            break;
        }
    }
    r = command(sv[0], want + 200, 5000);
    if (r.got != want + 200 || r.bad_at >= 0)
        nr_fail("after the drain: %llu of %llu arrived%s%s", (unsigned long long)r.got,
                (unsigned long long)want + 200, r.bad_at >= 0 ? "; " : "",
                r.bad_at >= 0 ? r.why : "");

    struct cmd q = {.quit = 1};
    CHECK(nr_write_all(sv[0], &q, sizeof(q)) == 0);
    ixl_agent_destroy(s.a);
    int ws;
    CHECK(waitpid(recv_pid, &ws, 0) == recv_pid);
    recv_pid = 0;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        nr_fail("the receiver ended with status %d", ws);
    free(md);
    double took = nr_now() - t0;
    fprintf(stderr, "took %.1f s\n", took);
    if (took > CASE_MAX_S)
        nr_fail("took %.1f s (want < %.0f)", took, CASE_MAX_S);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return 0;
}

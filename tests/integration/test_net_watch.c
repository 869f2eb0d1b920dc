/*
 * Callers that read their own TCP answers (issue 18): a WRITE of one frame sent by the posting
 * thread has its WRITE_ACK read by the caller itself, asleep in poll(2) on the socket inside
 * ixl_xfer_wait or looking once per ixl_xfer_status (net_tcp_watch), while the connection's
 * loop thread reads everything else on it. Here THREADS threads of one agent post to one peer
 * process over path=tcp on one connection (conns=1: posters share it and take turns on it,
 * frames of the others go through the peer's queue and the loop, and answers of the others
 * come first; one connection also keeps the target's placing and answering on one loop thread,
 * whose order ThreadSanitizer sees, where two loops' order comes through this process), half
 * of them waiting, half polling, each ROUNDS times:
 *   - a fresh pattern into its source slot, the target's slot poisoned first (through a
 *     WRITE of the poison, checked by a READ back), then the WRITE with a notification naming
 *     the thread and round; completed by ixl_xfer_wait or by polling ixl_xfer_status, which
 *     must then say IXL_OK again (no second end, no error);
 *   - the target process checks its slot at once, asked outside NET (over a socketpair): a
 *     WRITE said done before its answer came (by an answer of another post, or of nothing)
 *     would often find the poison there;
 *   - a READ back into a poisoned local slot: the bytes must be the pattern;
 * some threads reuse one request per slot (its serial changes per post: an answer read late
 * must not complete a later post), the others make a request per post. The target process
 * counts the notifications: each (thread, round) exactly once, none missing (a completion
 * lost or doubled sends none or two). Every wait is bounded (10 s): a lost completion fails.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "net_raw.h"

#define THREADS 8
#define ROUNDS 40
#define SLOT 4096u
#define LEN (2u * THREADS * SLOT) /* per thread: a data slot and a poison slot */

static pid_t target_pid;

/* The hang guard's (nr_guard) last act: the target does not outlive the test. */
static void kill_target(void)
{
    if (target_pid > 0)
        kill(target_pid, SIGKILL);
}

/* The target's check reads bytes a loop thread placed, ordered by the initiator's completion
 * and its question over the socketpair: an order through another process, which
 * ThreadSanitizer cannot see. That read (only it) is hidden from it. */
#if defined(__SANITIZE_THREAD__)
#define WATCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WATCH_TSAN 1
#endif
#endif
#ifdef WATCH_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define READS_UNSEEN_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define READS_UNSEEN_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define READS_UNSEEN_BEGIN() ((void)0)
#define READS_UNSEEN_END() ((void)0)
#endif

/* What the initiator asks the target over the socketpair (outside NET). */
enum { ASK_CHECK = 1, ASK_COUNT = 2 };
struct ask {
    uint32_t kind, t; /* ASK_COUNT: t is the number of notifications to expect */
    uint64_t seed;
};

/* The target: registers LEN bytes, sends its metadata and the buffer's address up fd, then
 * counts notifications until fd says how many to expect (or closes); answers "ok" or what
 * was wrong. Meanwhile it checks a thread's slot for a pattern when asked (ASK_CHECK): the
 * first byte that differs, or SLOT. */
static int target_main(int fd)
{
    char why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1", NULL};
    struct ixl_agent *a;
    if (nr_agent("watch-target", kv, &a, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    uint8_t *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 1;
    struct ixl_reg_desc rd = {(uint64_t)(uintptr_t)buf, LEN, 0, NULL, 0};
    void *md;
    size_t md_len;
    if (ixl_mem_register(a, IXL_MEM_DRAM, &rd, 1, NULL) != IXL_OK ||
        ixl_md_get(a, NULL, &md, &md_len) != IXL_OK)
        return 1;
    uint64_t hdr[2] = {md_len, (uint64_t)(uintptr_t)buf};
    if (nr_write_all(fd, hdr, sizeof(hdr)) != 0 || nr_write_all(fd, md, md_len) != 0)
        return 1;
    ixl_free(md);
    static uint8_t seen[THREADS][ROUNDS];
    unsigned got = 0, dups = 0, bad = 0;
    uint32_t expect = 0;
    bool told = false;
    double end = 0;
    for (;;) {
        struct ixl_notif_batch *b = NULL;
        if (ixl_notif_drain(a, &b) == IXL_OK && b != NULL) {
            for (size_t i = 0; i < b->count; i++) {
                unsigned t, r;
                char s[64];
                size_t n = b->items[i].len < sizeof(s) - 1 ? b->items[i].len : sizeof(s) - 1;
                memcpy(s, b->items[i].msg, n);
                s[n] = '\0';
                if (sscanf(s, "w %u %u", &t, &r) != 2 || t >= THREADS || r >= ROUNDS) {
                    bad++;
                } else if (seen[t][r]++ > 0) {
                    dups++;
                } else {
                    got++;
                }
            }
            ixl_free(b);
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (!told && poll(&pf, 1, 1) > 0) {
            struct ask q;
            if (nr_read_all(fd, &q, sizeof(q)) != 0)
                break;
            if (q.kind == ASK_CHECK) { /* a WRITE said done: its bytes must be here now */
                uint64_t at = 0;
                READS_UNSEEN_BEGIN();
                if (q.t < THREADS)
                    at = net_pat_find_bad(buf + 2 * q.t * SLOT, SLOT, q.seed, 0);
                READS_UNSEEN_END();
                if (nr_write_all(fd, &at, sizeof(at)) != 0)
                    break;
                continue;
            }
            expect = q.t;
            told = true;
            end = nr_now() + 10.0; /* every notification was sent before the count */
        }
        if (told && (got >= expect || nr_now() > end))
            break;
    }
    char out[200];
    if (got == expect && dups == 0 && bad == 0)
        snprintf(out, sizeof(out), "ok");
    else
        snprintf(out, sizeof(out), "notifications: %u of %u, %u duplicated, %u malformed", got,
                 expect, dups, bad);
    uint32_t n = (uint32_t)strlen(out);
    if (nr_write_all(fd, &n, sizeof(n)) != 0 || nr_write_all(fd, out, n) != 0)
        return 1;
    char c;
    while (read(fd, &c, 1) > 0) {
    }
    int rc = ixl_mem_deregister(a, IXL_MEM_DRAM, &rd, 1, NULL) == IXL_OK ? 0 : 1;
    ixl_agent_destroy(a);
    return rc;
}

static struct ixl_agent *agent;
static uint8_t *src, *dst;
static uint64_t raddr;
static _Atomic unsigned notifs_sent;
static int ctl_fd;
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;

/* Asks the target, outside NET, whether thread t's slot holds pattern seed: a WRITE said done
 * must have placed its bytes (a completion before its answer came would often not have). */
static uint64_t target_check(unsigned t, uint64_t seed)
{
    struct ask q = {ASK_CHECK, t, seed};
    uint64_t at = 0;
    pthread_mutex_lock(&ctl_lock);
    if (nr_write_all(ctl_fd, &q, sizeof(q)) != 0 || nr_read_all(ctl_fd, &at, sizeof(at)) != 0)
        at = 0;
    pthread_mutex_unlock(&ctl_lock);
    return at;
}

/* Ends x: ixl_xfer_wait, or polling ixl_xfer_status; then the status must stay IXL_OK. */
static ixl_status finish(struct ixl_xfer *x, bool poll_mode)
{
    ixl_status st;
    if (!poll_mode) {
        st = ixl_xfer_wait(x, 10000);
    } else {
        double end = nr_now() + 10.0;
        while ((st = ixl_xfer_status(x)) == IXL_IN_PROGRESS && nr_now() < end) {
        }
        if (st == IXL_IN_PROGRESS)
            st = IXL_ERR_TIMEOUT;
    }
    if (st == IXL_OK && ixl_xfer_status(x) != IXL_OK)
        return IXL_ERR_BACKEND; /* ended twice, or otherwise */
    return st;
}

static void release(struct ixl_xfer *x)
{
    if (x != NULL && ixl_xfer_release(x) != IXL_OK)
        nr_fail("release: %s", ixl_agent_last_error(agent));
}

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    bool poll_mode = t % 2 == 1, reuse = t % 4 < 2;
    uint8_t *s = src + 2 * t * SLOT, *p = src + (2 * t + 1) * SLOT, *d = dst + 2 * t * SLOT;
    uint64_t r_slot = raddr + 2 * t * SLOT;
    struct ixl_xfer *w = NULL, *rb = NULL;
    memset(p, 0xee, SLOT);
    for (unsigned r = 0; r < ROUNDS && nr_failures == 0; r++) {
        uint64_t seed = ((uint64_t)t << 32) + r * 7919u + 1;
        /* The target's slot poisoned, and checked poisoned through a READ. */
        struct ixl_xfer *x = NULL;
        memset(d, 0x11, SLOT);
        if (nr_xfer(agent, IXL_OP_WRITE, p, r_slot, SLOT, "watch-target", &x) != IXL_OK ||
            nr_post_wait(x, 10000) != IXL_OK) {
            nr_fail("thread %u round %u: the poison WRITE: %s", t, r, ixl_agent_last_error(agent));
            release(x);
            break;
        }
        release(x);
        x = NULL;
        if (nr_xfer(agent, IXL_OP_READ, d, r_slot, SLOT, "watch-target", &x) != IXL_OK ||
            nr_post_wait(x, 10000) != IXL_OK || net_byte_find_bad(d, SLOT, 0xee) != SLOT) {
            nr_fail("thread %u round %u: the target's slot is not poisoned", t, r);
            release(x);
            break;
        }
        release(x);
        /* The WRITE of a fresh pattern, with its notification. */
        net_pat_fill(s, SLOT, seed, 0);
        if (w == NULL &&
            nr_xfer(agent, IXL_OP_WRITE, s, r_slot, SLOT, "watch-target", &w) != IXL_OK) {
            nr_fail("thread %u: create: %s", t, ixl_agent_last_error(agent));
            break;
        }
        char msg[32];
        int n = snprintf(msg, sizeof(msg), "w %u %u", t, r);
        ixl_status st = ixl_xfer_set_notif(w, msg, (size_t)n);
        if (st == IXL_OK)
            st = ixl_xfer_post(w);
        if (st == IXL_IN_PROGRESS || st == IXL_OK)
            st = finish(w, poll_mode);
        if (st != IXL_OK) {
            nr_fail("thread %u round %u: the WRITE (%s): %s (%s)", t, r,
                    poll_mode ? "polled" : "waited", ixl_strerror(st), ixl_agent_last_error(agent));
            break;
        }
        atomic_fetch_add(&notifs_sent, 1);
        uint64_t at = target_check(t, seed);
        if (at != SLOT) {
            nr_fail("thread %u round %u: the WRITE said done (%s) with byte %llu of the target's "
                    "slot not written",
                    t, r, poll_mode ? "polled" : "waited", (unsigned long long)at);
            break;
        }
        if (!reuse) {
            release(w);
            w = NULL;
        }
        /* READ back into a poisoned slot: the pattern. */
        memset(d, 0x11, SLOT);
        if (rb == NULL &&
            nr_xfer(agent, IXL_OP_READ, d, r_slot, SLOT, "watch-target", &rb) != IXL_OK) {
            nr_fail("thread %u: create the READ: %s", t, ixl_agent_last_error(agent));
            break;
        }
        st = ixl_xfer_post(rb);
        if (st == IXL_IN_PROGRESS || st == IXL_OK)
            st = finish(rb, poll_mode);
        size_t bad = st == IXL_OK ? net_pat_find_bad(d, SLOT, seed, 0) : 0;
        if (st != IXL_OK || bad != SLOT) {
            nr_fail("thread %u round %u: READ back: %s, first bad byte %zu", t, r, ixl_strerror(st),
                    bad);
            break;
        }
    }
    release(w);
    release(rb);
    return NULL;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_watch", 110, kill_target);
    ixl_log_set_level(IXL_LOG_NONE);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    target_pid = pid;
    if (pid == 0) {
        close(sv[0]);
        _exit(target_main(sv[1]));
    }
    close(sv[1]);
    int fd = sv[0];
    ctl_fd = fd;
    uint64_t hdr[2];
    CHECK(nr_read_all(fd, hdr, sizeof(hdr)) == 0 && hdr[0] > 0 && hdr[0] < (1u << 20));
    uint8_t *md = malloc((size_t)hdr[0]);
    CHECK(md != NULL && nr_read_all(fd, md, (size_t)hdr[0]) == 0);
    raddr = hdr[1];

    char why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1", "path",
                        "tcp",         "conns",     "1",     NULL};
    if (nr_agent("watch-init", kv, &agent, why, sizeof(why)) != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s", why);
    src = aligned_alloc(4096, LEN);
    dst = aligned_alloc(4096, LEN);
    CHECK(src != NULL && dst != NULL);
    struct ixl_reg_desc rd[2] = {{(uint64_t)(uintptr_t)src, LEN, 0, NULL, 0},
                                 {(uint64_t)(uintptr_t)dst, LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(agent, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(agent, md, (size_t)hdr[0], NULL, 0), IXL_OK);

    double t0 = nr_now();
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) == 0);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    double took = nr_now() - t0;

    /* The target counts the notifications. */
    uint32_t expect = atomic_load(&notifs_sent), n = 0;
    char ans[201] = "";
    struct ask q = {ASK_COUNT, expect, 0};
    if (nr_write_all(fd, &q, sizeof(q)) != 0 || nr_read_all(fd, &n, sizeof(n)) != 0 || n > 200 ||
        nr_read_all(fd, ans, n) != 0)
        nr_fail("the target did not answer its count");
    ans[n] = '\0';
    if (strcmp(ans, "ok") != 0)
        nr_fail("the target: %s", ans);
    if (expect != THREADS * ROUNDS && nr_failures == 0)
        nr_fail("%u WRITEs ended, %u expected", expect, THREADS * ROUNDS);
    close(fd);
    int ws;
    CHECK(waitpid(pid, &ws, 0) == pid);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        nr_fail("the target process ended badly (%d)", ws);
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    ixl_agent_destroy(agent);
    free(md);
    free(src);
    free(dst);
    if (nr_failures > 0)
        return 1;
    printf("test_net_watch: %u threads x %u rounds (waiting and polling), data and "
           "notifications checked, %.2f s\n",
           THREADS, ROUNDS, took);
    return 0;
}

/*
 * One NET target, many initiators (issue 15): this process is the target; N initiator agents
 * (argv[1], default 256; the sanitizer builds run 64) live in 4 worker processes, 4 more in
 * victim processes of one agent each. Every initiator forces path=tcp with conns=1.
 *
 *  1. Every agent connects: a WRITE of a fresh pattern into its own 64 KiB slice of the
 *     target's memory and a READ of it back into a poisoned buffer, compared.
 *  2. With all of them connected, the target's threads (this process's, minus the test's own
 *     main thread) must not exceed MAX_TARGET_THREADS: threads must not grow with peers (the
 *     count with only the victims connected is printed beside it). The target asks for
 *     io_threads=4, so that the bound holds whatever the core count.
 *  3. Each worker runs ROUNDS more checked WRITE/READ rounds over all its agents (4 threads per
 *     worker) while each victim posts a 32 MiB WRITE, says it is in flight (status
 *     IXL_IN_PROGRESS) and is SIGKILLed at once, mid-transfer. No worker's request may fail.
 *  4. After the kills, one more checked round by every worker, and the target agent still
 *     answers (ixl_md_get), deregisters and is destroyed within DESTROY_MAX_S.
 * Failures of 2-4 are counted and reported together (the test goes on to show the rest); a
 * hang is a failure (alarm). With today's thread-per-connection NET, step 2 fails (a thread per
 * accepted connection).
 */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "net_raw.h"

#define MAX_N 256
#define WORKERS 4
#define VICTIMS 4
#define THREADS 4
#define SLICE (64u << 10)
#define VSLICE (32u << 20)
#define ROUNDS 3
#define MAX_TARGET_THREADS 16
#define DESTROY_MAX_S 5.0
#define WAIT_MS 20000
#define REPLY_MS 90000

enum { CMD_CONNECT = 1, CMD_ROUNDS, CMD_QUIT };

struct cmd {
    int32_t type, rounds;
    uint64_t seed;
};

struct rep {
    int32_t ok, failed;
    char msg[256];
};

struct setup { /* what every child gets from the target */
    uint64_t md_len, base, vbase;
};

struct kid {
    pid_t pid;
    int fd;
};

static struct kid kids[WORKERS + VICTIMS];

/* The hang guard's (nr_guard) last act: no child outlives the test. */
static void kill_children(void)
{
    for (int i = 0; i < WORKERS + VICTIMS; i++)
        if (kids[i].pid > 0)
            kill(kids[i].pid, SIGKILL);
}

static const char *const init_opts[] = {
    "listen_addr", "127.0.0.1", "addrs", "127.0.0.1",    "timeout_ms", "2000", "path",
    "tcp",         "conns",     "1",     "copy_threads", "1",          NULL};

/* ---- worker processes ------------------------------------------------------------------ */

struct ipeer {
    int idx;
    struct ixl_agent *a;
    uint8_t *src, *dst;
    struct ixl_xfer *w, *r;
    struct ixl_reg_desc rd[2];
    bool dead;
};

struct wctx {
    struct ipeer *p;
    int n;
    char err[256];
    pthread_mutex_t lock;
};

static void wnote(struct wctx *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wnote(struct wctx *w, const char *fmt, ...)
{
    pthread_mutex_lock(&w->lock);
    if (w->err[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof(w->err), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&w->lock);
}

/* One checked round of agent p: fresh pattern WRITE, READ back into poison, compare. */
static int peer_round(struct wctx *w, struct ipeer *p, uint64_t seed)
{
    net_pat_fill(p->src, SLICE, seed, 0);
    memset(p->dst, 0xa5, SLICE);
    ixl_status st = nr_post_wait(p->w, WAIT_MS);
    if (st == IXL_OK)
        st = nr_post_wait(p->r, WAIT_MS);
    if (st != IXL_OK) {
        wnote(w, "peer%03d: %s: %s", p->idx, ixl_strerror(st), ixl_agent_last_error(p->a));
        return -1;
    }
    size_t bad = net_pat_find_bad(p->dst, SLICE, seed, 0);
    if (bad != SLICE) {
        wnote(w, "peer%03d: data read back differs at byte %zu", p->idx, bad);
        return -1;
    }
    return 0;
}

struct rctx {
    struct wctx *w;
    int t, rounds, failed;
    uint64_t seed;
    pthread_t th;
};

static void *rounds_main(void *arg)
{
    struct rctx *r = arg;
    for (int k = 0; k < r->rounds; k++)
        for (int i = r->t; i < r->w->n; i += THREADS) {
            struct ipeer *p = &r->w->p[i];
            if (p->dead)
                continue;
            if (peer_round(r->w, p, r->seed + (uint64_t)k * 1000003u + (uint64_t)p->idx) != 0)
                r->failed++;
        }
    return NULL;
}

static int worker_main(int fd, int wid, int n)
{
    struct setup su;
    static struct ipeer peers[MAX_N];
    struct wctx w = {.p = peers, .lock = PTHREAD_MUTEX_INITIALIZER};
    if (nr_read_all(fd, &su, sizeof(su)) != 0)
        return 1;
    uint8_t *md = malloc(su.md_len);
    if (md == NULL || nr_read_all(fd, md, su.md_len) != 0)
        return 1;
    for (int i = wid; i < n; i += WORKERS)
        peers[w.n++] = (struct ipeer){.idx = i};
    struct cmd c;
    while (nr_read_all(fd, &c, sizeof(c)) == 0 && c.type != CMD_QUIT) {
        struct rep rp = {0};
        w.err[0] = '\0';
        if (c.type == CMD_CONNECT) {
            for (int i = 0; i < w.n; i++) {
                struct ipeer *p = &peers[i];
                char name[32], why[256];
                snprintf(name, sizeof(name), "peer%03d", p->idx);
                uint64_t slice = su.base + (uint64_t)p->idx * SLICE;
                ixl_status st = nr_agent(name, init_opts, &p->a, why, sizeof(why));
                if (st != IXL_OK) {
                    wnote(&w, "%s", why);
                    p->dead = true;
                    rp.failed++;
                    continue;
                }
                p->src = aligned_alloc(4096, SLICE);
                p->dst = aligned_alloc(4096, SLICE);
                p->rd[0] = (struct ixl_reg_desc){(uintptr_t)p->src, SLICE, 0, NULL, 0};
                p->rd[1] = (struct ixl_reg_desc){(uintptr_t)p->dst, SLICE, 0, NULL, 0};
                st = ixl_mem_register(p->a, IXL_MEM_DRAM, p->rd, 2, NULL);
                if (st == IXL_OK)
                    st = ixl_md_load(p->a, md, su.md_len, NULL, 0);
                if (st == IXL_OK)
                    st = nr_xfer(p->a, IXL_OP_WRITE, p->src, slice, SLICE, "target", &p->w);
                if (st == IXL_OK)
                    st = nr_xfer(p->a, IXL_OP_READ, p->dst, slice, SLICE, "target", &p->r);
                if (st != IXL_OK) {
                    wnote(&w, "%s: setup: %s: %s", name, ixl_strerror(st),
                          ixl_agent_last_error(p->a));
                    p->dead = true;
                    rp.failed++;
                    continue;
                }
                if (peer_round(&w, p, c.seed + (uint64_t)p->idx) != 0) {
                    p->dead = true;
                    rp.failed++;
                    continue;
                }
                rp.ok++;
            }
        } else if (c.type == CMD_ROUNDS) {
            struct rctx r[THREADS];
            int nt = 0;
            for (int t = 0; t < THREADS && t < w.n; t++, nt++) {
                r[t] = (struct rctx){.w = &w, .t = t, .rounds = c.rounds, .seed = c.seed};
                if (pthread_create(&r[t].th, NULL, rounds_main, &r[t]) != 0) {
                    wnote(&w, "pthread_create failed");
                    rp.failed++;
                    break;
                }
            }
            for (int t = 0; t < nt; t++) {
                pthread_join(r[t].th, NULL);
                rp.failed += r[t].failed;
            }
            for (int i = 0; i < w.n; i++)
                rp.ok += !peers[i].dead;
        }
        snprintf(rp.msg, sizeof(rp.msg), "%s", w.err);
        if (nr_write_all(fd, &rp, sizeof(rp)) != 0)
            break;
    }
    for (int i = 0; i < w.n; i++) {
        struct ipeer *p = &peers[i];
        if (p->a == NULL)
            continue;
        if (ixl_xfer_release(p->w) == IXL_OK && ixl_xfer_release(p->r) == IXL_OK &&
            ixl_mem_deregister(p->a, IXL_MEM_DRAM, p->rd, 2, NULL) != IXL_OK)
            fprintf(stderr, "peer%03d: deregister: %s\n", p->idx, ixl_agent_last_error(p->a));
        ixl_agent_destroy(p->a);
        free(p->src);
        free(p->dst);
    }
    free(md);
    return 0;
}

/* A victim: connects with a small WRITE, then on CMD_ROUNDS posts a 32 MiB WRITE, says "in
 * flight" once its status is IXL_IN_PROGRESS and waits to be killed. */
static int victim_main(int fd, int vid)
{
    struct setup su;
    if (nr_read_all(fd, &su, sizeof(su)) != 0)
        return 1;
    uint8_t *md = malloc(su.md_len);
    if (md == NULL || nr_read_all(fd, md, su.md_len) != 0)
        return 1;
    char name[32], why[256];
    snprintf(name, sizeof(name), "victim%d", vid);
    struct ixl_agent *a;
    struct rep rp = {0};
    uint8_t *src = aligned_alloc(4096, VSLICE);
    uint64_t slice = su.vbase + (uint64_t)vid * VSLICE;
    struct ixl_xfer *small = NULL, *big = NULL;
    ixl_status st = nr_agent(name, init_opts, &a, why, sizeof(why));
    if (st == IXL_OK) {
        memset(src, 0x3c, VSLICE);
        struct ixl_reg_desc rd = {(uintptr_t)src, VSLICE, 0, NULL, 0};
        st = ixl_mem_register(a, IXL_MEM_DRAM, &rd, 1, NULL);
        if (st == IXL_OK)
            st = ixl_md_load(a, md, su.md_len, NULL, 0);
        if (st == IXL_OK)
            st = nr_xfer(a, IXL_OP_WRITE, src, slice, SLICE, "target", &small);
        if (st == IXL_OK)
            st = nr_xfer(a, IXL_OP_WRITE, src, slice, VSLICE, "target", &big);
        if (st == IXL_OK)
            st = nr_post_wait(small, WAIT_MS);
        snprintf(why, sizeof(why), "%s: %s: %s", name, ixl_strerror(st), ixl_agent_last_error(a));
    }
    rp.ok = st == IXL_OK;
    rp.failed = st != IXL_OK;
    if (st != IXL_OK)
        snprintf(rp.msg, sizeof(rp.msg), "%s", why);
    struct cmd c;
    if (nr_write_all(fd, &rp, sizeof(rp)) != 0 || nr_read_all(fd, &c, sizeof(c)) != 0 ||
        st != IXL_OK)
        return 1;
    st = ixl_xfer_post(big);
    char inflight = st == IXL_IN_PROGRESS && ixl_xfer_status(big) == IXL_IN_PROGRESS ? 'f' : 'n';
    if (nr_write_all(fd, &inflight, 1) != 0)
        return 1;
    (void)!ixl_xfer_wait(big, WAIT_MS); /* killed meanwhile, normally */
    pause();
    return 0;
}

/* ---- the target (this process) -------------------------------------------------------- */

static void start_kid(int i, int n)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        for (int j = 0; j < i; j++)
            close(kids[j].fd);
        _exit(i < WORKERS ? worker_main(sv[1], i, n) : victim_main(sv[1], i - WORKERS));
    }
    close(sv[1]);
    kids[i] = (struct kid){pid, sv[0]};
}

static int read_to(int fd, void *buf, size_t len, int ms)
{
    struct pollfd pf = {fd, POLLIN, 0};
    double end = nr_now() + ms / 1000.0;
    uint8_t *p = buf;
    while (len > 0) {
        int left = (int)((end - nr_now()) * 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            return -1;
        ssize_t r = read(fd, p, len);
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Sends c to the workers and sums their answers; returns the agents ok. */
static int workers_do(const struct cmd *c, const char *what)
{
    int ok = 0;
    for (int i = 0; i < WORKERS; i++)
        CHECK(nr_write_all(kids[i].fd, c, sizeof(*c)) == 0);
    for (int i = 0; i < WORKERS; i++) {
        struct rep rp;
        if (read_to(kids[i].fd, &rp, sizeof(rp), REPLY_MS) != 0)
            check_fail(__FILE__, __LINE__, "%s: worker %d died or did not answer", what, i);
        ok += rp.ok;
        if (rp.failed > 0)
            nr_fail("%s: worker %d: %d failure(s), the first: %s", what, i, rp.failed, rp.msg);
    }
    return ok;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : MAX_N;
    CHECK(n >= WORKERS && n <= MAX_N);
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_peers", 110, kill_children);
    ixl_log_set_level(IXL_LOG_NONE);
    /* File descriptors: the target holds one accepted connection per peer (conns=1), a worker
     * a few per agent. */
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)(n * 4 + 64))
        skip(0, "RLIMIT_NOFILE's hard limit is too low for this many peers");
    double t_start = nr_now();

    for (int i = 0; i < WORKERS + VICTIMS; i++)
        start_kid(i, n);
    long base_threads = nr_proc_field(0, "Threads:");
    CHECK(base_threads == 1);

    /* io_threads=4: a bound that holds on a machine of any core count. A NET that does not
     * know the option (before issue 15) runs with its defaults. */
    char why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1",  "addrs", "127.0.0.1", "timeout_ms",
                        "2000",        "io_threads", "4",     NULL};
    struct ixl_agent *t;
    if (nr_agent("target", kv, &t, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "(%s: without io_threads)\n", why);
        kv[6] = NULL;
        if (nr_agent("target", kv, &t, why, sizeof(why)) != IXL_OK)
            check_fail(__FILE__, __LINE__, "%s", why);
    }
    size_t len = (size_t)n * SLICE, vlen = (size_t)VICTIMS * VSLICE;
    uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *vbuf = mmap(NULL, vlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED && vbuf != MAP_FAILED);
    struct ixl_reg_desc rd[2] = {{(uintptr_t)buf, len, 0, NULL, 0},
                                 {(uintptr_t)vbuf, vlen, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(t, NULL, &md, &md_len), IXL_OK);
    struct setup su = {md_len, (uintptr_t)buf, (uintptr_t)vbuf};

    /* 1. The victims connect first (the target's threads with few peers), then everyone
     * (each agent with a checked round). */
    for (int i = WORKERS; i < WORKERS + VICTIMS; i++) {
        struct rep rp = {0};
        CHECK(nr_write_all(kids[i].fd, &su, sizeof(su)) == 0 &&
              nr_write_all(kids[i].fd, md, md_len) == 0);
        if (read_to(kids[i].fd, &rp, sizeof(rp), REPLY_MS) != 0 || rp.ok != 1)
            check_fail(__FILE__, __LINE__, "victim %d did not connect: %s", i - WORKERS, rp.msg);
    }
    nr_sleep_ms(200);
    long threads_few = nr_proc_field(0, "Threads:") - base_threads;
    for (int i = 0; i < WORKERS; i++)
        CHECK(nr_write_all(kids[i].fd, &su, sizeof(su)) == 0 &&
              nr_write_all(kids[i].fd, md, md_len) == 0);
    ixl_free(md);
    uint64_t seed = (uint64_t)time(NULL) << 16;
    struct cmd c = {.type = CMD_CONNECT, .seed = seed};
    double t0 = nr_now();
    int ok = workers_do(&c, "connecting");
    fprintf(stderr, "%d of %d initiators (+%d victims) connected in %.2f s\n", ok, n, VICTIMS,
            nr_now() - t0);
    if (ok != n)
        nr_fail("only %d of %d initiators connected", ok, n);

    /* 2. The target's threads do not grow with its peers. */
    nr_sleep_ms(200);
    long threads = nr_proc_field(0, "Threads:") - base_threads;
    fprintf(stderr, "the target agent runs %ld threads with %d peers connected (%ld with %d)\n",
            threads, n + VICTIMS, threads_few, VICTIMS);
    if (threads > MAX_TARGET_THREADS)
        nr_fail("the target agent runs %ld threads with %d peers connected (want <= %d, "
                "independent of the peer count)",
                threads, n + VICTIMS, MAX_TARGET_THREADS);

    /* 3. Checked rounds while the victims die mid-transfer. */
    c = (struct cmd){.type = CMD_ROUNDS, .rounds = ROUNDS, .seed = seed + 7777777};
    for (int i = 0; i < WORKERS + VICTIMS; i++)
        CHECK(nr_write_all(kids[i].fd, &c, sizeof(c)) == 0);
    for (int i = WORKERS; i < WORKERS + VICTIMS; i++) {
        char f = 0;
        if (read_to(kids[i].fd, &f, 1, REPLY_MS) != 0)
            check_fail(__FILE__, __LINE__, "victim %d died before its big WRITE", i - WORKERS);
        CHECK(kill(kids[i].pid, SIGKILL) == 0);
        if (f != 'f')
            nr_fail("victim %d: its 32 MiB WRITE was not in flight when killed", i - WORKERS);
    }
    for (int i = WORKERS; i < WORKERS + VICTIMS; i++) {
        int ws;
        CHECK(waitpid(kids[i].pid, &ws, 0) == kids[i].pid);
        CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
        kids[i].pid = 0;
        close(kids[i].fd);
    }
    for (int i = 0; i < WORKERS; i++) {
        struct rep rp;
        if (read_to(kids[i].fd, &rp, sizeof(rp), REPLY_MS) != 0)
            check_fail(__FILE__, __LINE__, "rounds: worker %d died or did not answer", i);
        if (rp.failed > 0)
            nr_fail("rounds beside the killed victims: worker %d: %d failure(s), the first: %s", i,
                    rp.failed, rp.msg);
    }

    /* 4. After the kills: one more round each, and the target is still itself. */
    c = (struct cmd){.type = CMD_ROUNDS, .rounds = 1, .seed = seed + 99999999};
    ok = workers_do(&c, "the round after the kills");
    if (ok != n)
        nr_fail("after the kills, %d of %d initiators still work", ok, n);
    CHECK_RC(ixl_md_get(t, NULL, &md, &md_len), IXL_OK);
    ixl_free(md);
    c = (struct cmd){.type = CMD_QUIT};
    for (int i = 0; i < WORKERS; i++) {
        CHECK(nr_write_all(kids[i].fd, &c, sizeof(c)) == 0);
        int ws;
        CHECK(waitpid(kids[i].pid, &ws, 0) == kids[i].pid);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            nr_fail("worker %d ended with status %d", i, ws);
        kids[i].pid = 0;
        close(kids[i].fd);
    }
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    t0 = nr_now();
    ixl_agent_destroy(t);
    if (nr_now() - t0 > DESTROY_MAX_S)
        nr_fail("ixl_agent_destroy of the target took %.2f s", nr_now() - t0);
    munmap(buf, len);
    munmap(vbuf, vlen);
    fprintf(stderr, "%d peers: %.1f s\n", n, nr_now() - t_start);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return 0;
}

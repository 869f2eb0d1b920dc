/*
 * Many threads of one agent against one peer over NET's same-node paths (issue 18, gap 6):
 *
 *   test_net_threads [THREADS [ROUNDS]]     (default 8 threads, 48 rounds each)
 *
 * This process is the initiator (one agent, NET, path chosen automatically); one ixl_peer
 * process is the target with two buffers: ixl_mem_alloc memory (path shm) and other memory
 * (path cma). Every thread owns one slot of each buffer and one local slot pair, and per round
 * picks a buffer, a size (4 KiB and 64 KiB and 1 MiB copied in post itself, 2 MiB and now and
 * then 4 MiB + 4 KiB copied by NET's workers), how it waits (ixl_xfer_wait, busy polling of
 * ixl_xfer_status, or two requests in flight at once), whether the WRITE carries a
 * notification, and whether it reuses its request (reposted, with its notification changed or
 * dropped) or makes a new one. Each round writes a fresh pattern into its remote slot, then
 * reads it back into a poisoned local slot and checks every byte and the guard after it; the
 * first round reads the peer's own initial pattern. Meanwhile one more thread waits on the
 * agent's fd and calls ixl_agent_progress. At the end the peer checks each slot against the
 * thread's last pattern (the bytes really landed where they were sent, the guards around them
 * untouched) and every notification arrived exactly once (none lost, none duplicated, none
 * unknown). Exits 0 passed, 1 failed, 77 when the same-node paths are refused here (cma alone:
 * its rounds go to shm, with a message).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h"
#include "peer_ctl.h"

#ifndef IXL_PEER_PATH
#error "IXL_PEER_PATH must name the ixl_peer binary"
#endif

#define MAX_THREADS 32
#define GUARD 4096u
#define BIG ((size_t)(4u << 20) + 4096u)
#define SLOT (BIG + 2 * GUARD) /* per thread and buffer, at both ends */
#define POISON_R 0xa5
#define POISON_L 0x5a
#define WAIT_MS 60000

static struct peer *tp;
static struct rbuf rbs[2]; /* 0: shm, 1: heap (cma) */
static bool cma_ok = true;
static struct ixl_agent *ag;
static uint8_t *L; /* per thread: SLOT source, SLOT READ destination */
static size_t L_len;
static unsigned n_threads = 8, n_rounds = 48;
static atomic_bool stop_fd;
static atomic_ulong n_notifs, n_posts;
static uint64_t seed0[2];

struct thr {
    unsigned t;
    pthread_t th;
    uint64_t last_seed[2]; /* the pattern now in the thread's remote slot of each buffer */
    size_t last_len[2];
    /* requests kept for reuse, by buffer and size class */
    struct ixl_xfer *keep_w[2][5], *keep_r[2][5];
};
static struct thr thrs[MAX_THREADS];
static pthread_mutex_t seed_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fresh_seed(void)
{
    pthread_mutex_lock(&seed_lock);
    uint64_t s = peer_fresh_seed();
    pthread_mutex_unlock(&seed_lock);
    return s;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t roff(unsigned t)
{
    return (uint64_t)t * SLOT + GUARD;
}

static uint8_t *lsrc(unsigned t)
{
    return L + (size_t)t * 2 * SLOT + GUARD;
}

static uint8_t *ldst(unsigned t)
{
    return L + (size_t)t * 2 * SLOT + SLOT + GUARD;
}

static struct ixl_xfer *make(enum ixl_op op, uint8_t *local, int b, uint64_t off, size_t len)
{
    struct ixl_dlist *l, *r;
    struct ixl_desc ld = {(uintptr_t)local, len, 0}, rd = {rbs[b].addr + off, len, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(ag, op, l, r, tp->name, NULL, &x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return x;
}

/* Waits for x as mode says: 0 ixl_xfer_wait, 1 busy polling of ixl_xfer_status. */
static int finish(struct ixl_xfer *x, int posted, int mode)
{
    if (posted != IXL_IN_PROGRESS)
        return posted;
    if (mode == 0)
        return ixl_xfer_wait(x, WAIT_MS);
    uint64_t end = now_ms() + WAIT_MS;
    for (unsigned i = 0;; i++) {
        int rc = ixl_xfer_status(x);
        if (rc != IXL_IN_PROGRESS)
            return rc;
        if (now_ms() > end)
            return IXL_ERR_TIMEOUT;
        /* more threads than cores: let NET's threads (workers, loops) run */
        if (i >= 4096)
            sleep_ms(1);
        else if ((i & 63) == 63)
            sched_yield();
    }
}

static void check_path(struct ixl_xfer *x, int b, unsigned t, unsigned k)
{
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    const char *want = b == 0 ? "shm" : "cma";
    if (strcmp(info.path, want) != 0)
        check_fail(__FILE__, __LINE__, "thread %u round %u: path '%s', want '%s'", t, k, info.path,
                   want);
}

static void check_local(const uint8_t *d, size_t len, uint64_t seed, uint64_t off, unsigned t,
                        unsigned k, const char *what)
{
    size_t bad = net_pat_find_bad(d, len, seed, off);
    if (bad != len)
        check_fail(__FILE__, __LINE__,
                   "thread %u round %u (%s, %zu bytes): byte %zu is 0x%02x, want 0x%02x", t, k,
                   what, len, bad, d[bad], net_pat_byte(seed, off + bad));
    size_t g = net_byte_find_bad(d + len, GUARD, POISON_L);
    if (g != GUARD)
        check_fail(__FILE__, __LINE__, "thread %u round %u (%s): guard byte %zu after it changed",
                   t, k, what, g);
}

static void release_kept(struct ixl_xfer **x)
{
    if (*x != NULL)
        CHECK_RC(ixl_xfer_release(*x), IXL_OK);
    *x = NULL;
}

static void *thread_main(void *arg)
{
    struct thr *th = arg;
    unsigned t = th->t;
    uint64_t rs = 0x9e3779b97f4a7c15ull * (t + 1);
    static const size_t sizes[5] = {4096, 65536, 1u << 20, 2u << 20, BIG};
    uint64_t off_r = roff(t);
    for (unsigned k = 0; k < n_rounds; k++) {
        int b = cma_ok ? (int)((rnd(&rs) >> 7) & 1) : 0;
        unsigned sc = (unsigned)(rnd(&rs) % 8);
        sc = sc < 3 ? 0 : sc < 5 ? 1 : sc < 6 ? 2 : sc < 7 ? 3 : (k % 6 == t % 6 ? 4 : 0);
        size_t len = sizes[sc];
        int mode = (int)((t + k) % 3); /* 0 wait, 1 poll, 2 two in flight */
        bool notif = rnd(&rs) % 3 == 0;
        bool reuse = rnd(&rs) % 4 != 0;
        uint8_t *src = lsrc(t), *dst = ldst(t);

        /* the first round: the peer's own pattern, read */
        if (k == 0) {
            len = 65536;
            memset(dst, POISON_L, len + GUARD);
            struct ixl_xfer *x = make(IXL_OP_READ, dst, b, off_r, len);
            CHECK_RC(finish(x, ixl_xfer_post(x), mode & 1), IXL_OK);
            check_path(x, b, t, k);
            check_local(dst, len, seed0[b], off_r, t, k, "READ of the initial pattern");
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            atomic_fetch_add(&n_posts, 1);
            continue;
        }

        uint64_t seed = fresh_seed();
        net_pat_fill(src, len, seed, off_r);
        char msg[64];
        snprintf(msg, sizeof(msg), "t%02u r%04u", t, k);
        struct ixl_xfer *w = reuse ? th->keep_w[b][sc] : NULL;
        if (w == NULL)
            w = make(IXL_OP_WRITE, src, b, off_r, len);
        CHECK_RC(ixl_xfer_set_notif(w, notif ? msg : NULL, notif ? strlen(msg) : 0), IXL_OK);
        int pw = ixl_xfer_post(w);
        if (pw != IXL_OK && pw != IXL_IN_PROGRESS)
            check_fail(__FILE__, __LINE__, "thread %u round %u: post WRITE: %s: %s", t, k,
                       ixl_strerror(pw), ixl_agent_last_error(ag));
        if (mode == 2 && len <= (1u << 20)) {
            /* a second request in flight meanwhile: a READ of the peer's other buffer slot,
             * which holds what this thread wrote there last */
            int ob = cma_ok ? 1 - b : b;
            if (ob != b && th->last_len[ob] > 0) {
                size_t ol = th->last_len[ob];
                memset(dst, POISON_L, ol + GUARD);
                struct ixl_xfer *o = make(IXL_OP_READ, dst, ob, off_r, ol);
                int po = ixl_xfer_post(o);
                CHECK_RC(finish(o, po, 0), IXL_OK);
                check_path(o, ob, t, k);
                check_local(dst, ol, th->last_seed[ob], off_r, t, k, "READ beside a WRITE");
                CHECK_RC(ixl_xfer_release(o), IXL_OK);
                atomic_fetch_add(&n_posts, 1);
            }
        }
        int rc = finish(w, pw, mode & 1);
        if (rc != IXL_OK)
            check_fail(__FILE__, __LINE__, "thread %u round %u: WRITE of %zu bytes: %s: %s", t, k,
                       len, ixl_strerror(rc), ixl_agent_last_error(ag));
        check_path(w, b, t, k);
        atomic_fetch_add(&n_posts, 1);
        if (notif)
            atomic_fetch_add(&n_notifs, 1);
        th->last_seed[b] = seed;
        th->last_len[b] = len;
        if (reuse) {
            th->keep_w[b][sc] = w;
        } else {
            CHECK_RC(ixl_xfer_release(w), IXL_OK);
        }

        /* read it back */
        memset(dst, POISON_L, len + GUARD);
        struct ixl_xfer *r = reuse ? th->keep_r[b][sc] : NULL;
        if (r == NULL)
            r = make(IXL_OP_READ, dst, b, off_r, len);
        rc = finish(r, ixl_xfer_post(r), mode & 1);
        if (rc != IXL_OK)
            check_fail(__FILE__, __LINE__, "thread %u round %u: READ of %zu bytes: %s: %s", t, k,
                       len, ixl_strerror(rc), ixl_agent_last_error(ag));
        check_path(r, b, t, k);
        check_local(dst, len, seed, off_r, t, k, "READ back");
        atomic_fetch_add(&n_posts, 1);
        if (reuse)
            th->keep_r[b][sc] = r;
        else
            CHECK_RC(ixl_xfer_release(r), IXL_OK);
    }
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 5; s++) {
            release_kept(&th->keep_w[b][s]);
            release_kept(&th->keep_r[b][s]);
        }
    return NULL;
}

/* Waits on the agent's fd and drives progress, as an event loop would, beside the posters. */
static void *fd_main(void *arg)
{
    (void)arg;
    int fd = -1;
    CHECK_RC(ixl_agent_fd(ag, &fd), IXL_OK);
    while (!atomic_load(&stop_fd)) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int n = poll(&pf, 1, 5);
        CHECK(n >= 0 || errno == EINTR);
        CHECK_RC(ixl_agent_progress(ag), IXL_OK);
    }
    return NULL;
}

/* Every notification of a WRITE that completed came exactly once. */
static void check_notifs(unsigned long want)
{
    size_t cap = want ? want : 1;
    char **seen = calloc(cap, sizeof(*seen));
    CHECK(seen != NULL);
    size_t got = 0;
    uint64_t end = now_ms() + 30000;
    while (got < want && now_ms() < end) {
        char *r = PEER_OK(tp, "notifs");
        unsigned n = (unsigned)strtoul(r, NULL, 10);
        for (unsigned i = 0; i < n; i++) {
            char *line = peer_line(tp, REPLY_MS);
            CHECK(line != NULL);
            char *sp = strchr(line, ' ');
            CHECK(sp != NULL);
            *sp = '\0';
            CHECK(strcmp(line, ixl_agent_name(ag)) == 0);
            size_t ml;
            uint8_t *m = net_hex_decode(sp + 1, strlen(sp + 1), &ml);
            CHECK(m != NULL);
            char *s = malloc(ml + 1);
            CHECK(s != NULL);
            memcpy(s, m, ml);
            s[ml] = '\0';
            free(m);
            for (size_t j = 0; j < got; j++)
                if (strcmp(seen[j], s) == 0)
                    check_fail(__FILE__, __LINE__, "notification '%s' came twice", s);
            unsigned tt, kk;
            if (sscanf(s, "t%u r%u", &tt, &kk) != 2 || tt >= n_threads || kk >= n_rounds)
                check_fail(__FILE__, __LINE__, "an unknown notification '%s'", s);
            if (got == cap)
                check_fail(__FILE__, __LINE__, "more notifications than the %lu sent ('%s')", want,
                           s);
            seen[got++] = s;
        }
        if (got < want)
            sleep_ms(20);
    }
    if (got != want)
        check_fail(__FILE__, __LINE__, "%zu notifications arrived, want %lu", got, want);
    sleep_ms(200); /* none more comes */
    char *r = PEER_OK(tp, "notifs");
    if (strtoul(r, NULL, 10) != 0)
        check_fail(__FILE__, __LINE__, "more notifications than the %lu sent", want);
    for (size_t j = 0; j < got; j++)
        free(seen[j]);
    free(seen);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_threads = (unsigned)strtoul(argv[1], NULL, 10);
    if (argc > 2)
        n_rounds = (unsigned)strtoul(argv[2], NULL, 10);
    CHECK(n_threads >= 1 && n_threads <= MAX_THREADS && n_rounds >= 2 && n_rounds < 10000);
    peers_init("test_net_threads", IXL_PEER_PATH);
    alarm(110);
    tp = peer_start("thr_t", NULL);
    peer_ready(tp);
    size_t rlen = (size_t)n_threads * SLOT;
    rbs[0] = peer_alloc(tp, 0, rlen, "shm");
    rbs[1] = peer_alloc(tp, 1, rlen, "heap");
    uint8_t probe;
    struct iovec li = {&probe, 1}, ri = {(void *)(uintptr_t)rbs[1].addr, 1};
    if (process_vm_readv(tp->pid, &li, 1, &ri, 1, 0) != 1) {
        fprintf(stderr,
                "SKIP (cma rounds, run over shm instead): cross-memory attach to a child "
                "is refused here: %s\n",
                strerror(errno));
        cma_ok = false;
    }
    for (int b = 0; b < 2; b++) {
        seed0[b] = peer_fresh_seed();
        PEER_OK(tp, "poison %d %d", b, POISON_R);
        PEER_OK(tp, "fill %d %" PRIu64, b, seed0[b]);
    }

    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create("thr_i", &ap, &ag), IXL_OK);
    CHECK_RC(ixl_backend_create(ag, "NET", NULL, 0, NULL), IXL_OK);
    L_len = (size_t)n_threads * 2 * SLOT;
    L = aligned_alloc(4096, L_len);
    CHECK(L != NULL);
    memset(L, POISON_L, L_len);
    struct ixl_reg_desc d = {(uintptr_t)L, L_len, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(ag, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    load_peer(ag, tp);

    /* A same-node path must serve the shm buffer, or there is nothing to test here. */
    {
        struct ixl_xfer *x = make(IXL_OP_READ, ldst(0), 0, roff(0), 4096);
        CHECK_RC(finish(x, ixl_xfer_post(x), 0), IXL_OK);
        struct ixl_xfer_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
        char path[32];
        snprintf(path, sizeof(path), "%s", info.path); /* info's strings go with the request */
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        if (strcmp(path, "shm") != 0) {
            fprintf(stderr, "SKIP: the same-node paths are refused here (path %s): %s\n", path,
                    ixl_agent_last_error(ag));
            ixl_agent_destroy(ag);
            peer_exit(tp);
            free(L);
            return 77;
        }
    }

    uint64_t t0 = now_ms();
    pthread_t fdt;
    CHECK(pthread_create(&fdt, NULL, fd_main, NULL) == 0);
    for (unsigned t = 0; t < n_threads; t++) {
        thrs[t].t = t;
        CHECK(pthread_create(&thrs[t].th, NULL, thread_main, &thrs[t]) == 0);
    }
    for (unsigned t = 0; t < n_threads; t++)
        CHECK(pthread_join(thrs[t].th, NULL) == 0);
    atomic_store(&stop_fd, true);
    CHECK(pthread_join(fdt, NULL) == 0);
    fprintf(stderr, "%u threads x %u rounds: %lu requests, %lu notifications, %.1f s\n", n_threads,
            n_rounds, atomic_load(&n_posts), atomic_load(&n_notifs), (double)(now_ms() - t0) / 1e3);

    /* The peer's view: each slot holds its thread's last pattern; the guards kept theirs. */
    for (unsigned t = 0; t < n_threads; t++)
        for (int b = 0; b < 2; b++) {
            uint64_t o = roff(t);
            if (thrs[t].last_len[b] > 0)
                PEER_OK(tp, "check %d %" PRIu64 " %" PRIu64 " %zu", b, thrs[t].last_seed[b], o,
                        thrs[t].last_len[b]);
            /* no request reaches the guards: both still hold the initial pattern */
            PEER_OK(tp, "check %d %" PRIu64 " %" PRIu64 " %u", b, seed0[b], o - GUARD, GUARD);
            PEER_OK(tp, "check %d %" PRIu64 " %" PRIu64 " %u", b, seed0[b], o + BIG, GUARD);
        }
    check_notifs(atomic_load(&n_notifs));

    CHECK_RC(ixl_mem_deregister(ag, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(ag);
    peer_exit(tp);
    free(L);
    printf("PASS\n");
    return 0;
}

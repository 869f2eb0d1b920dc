/*
 * The etcd client (src/meta/etcd.c) against a real etcd started by the test (etcd_ctl.c):
 * round trips, labels, metadata over etcd's request limit, atomic replacement under a
 * concurrent reader, lease expiry of a SIGKILLed client (a child process: this binary run as
 * "child"), remove and the watch, fetch timeouts, malformed heads and chunks written behind the
 * client's back, etcd stopped under a client, close with a watch running.
 *
 *   test_etcd_client                      the suite
 *   test_etcd_client child <ep> <agent>   publish <agent> with a 2 s lease, print "ready", wait
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "etcd_ctl.h"
#include "meta/etcd.h"

static struct etcd_srv srv;   /* default request limit */
static struct etcd_srv small; /* --max-request-bytes 65536 */
static char err[512];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *rand_bytes(size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)rnd();
    return p;
}

static struct ixl_etcd *open_client(const struct etcd_srv *s, unsigned ttl, unsigned timeout_ms)
{
    struct ixl_etcd_opts o = {.endpoints = s->endpoint, .ttl_s = ttl, .timeout_ms = timeout_ms};
    struct ixl_etcd *c = NULL;
    int rc = ixl_etcd_open(&o, &c, err, sizeof(err));
    if (rc == IXL_ERR_NOT_SUPPORTED)
        skip(1, err);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_etcd_open(%s): %d %s", s->endpoint, rc, err);
    return c;
}

static void expect_blob(struct ixl_etcd *c, const char *agent, const char *label, const void *want,
                        size_t wlen)
{
    void *b = NULL;
    size_t l = 0;
    int rc = ixl_etcd_fetch(c, agent, label, 0, &b, &l, err, sizeof(err));
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "fetch %s/%s: %d %s", agent, label ? label : "", rc, err);
    CHECK(l == wlen);
    CHECK(wlen == 0 || memcmp(b, want, wlen) == 0);
    free(b);
}

static int fetch_rc(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms)
{
    void *b = NULL;
    size_t l = 0;
    int rc = ixl_etcd_fetch(c, agent, label, timeout_ms, &b, &l, err, sizeof(err));
    if (rc == IXL_OK)
        free(b);
    return rc;
}

/* ---- Watch events, recorded ---- */

struct ev {
    char agent[IXL_NAME_MAX], label[64];
    uint64_t inc;
};
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ev evs[256];
static int n_evs;

static void on_gone(void *ctx, const char *agent, const char *label, uint64_t inc)
{
    (void)ctx;
    pthread_mutex_lock(&ev_mu);
    if (n_evs < 256) {
        snprintf(evs[n_evs].agent, sizeof(evs[n_evs].agent), "%s", agent);
        snprintf(evs[n_evs].label, sizeof(evs[n_evs].label), "%s", label);
        evs[n_evs].inc = inc;
        n_evs++;
    }
    pthread_mutex_unlock(&ev_mu);
}

/* Count of events seen for (agent, label, inc). */
static int ev_count(const char *agent, const char *label, uint64_t inc)
{
    int n = 0;
    pthread_mutex_lock(&ev_mu);
    for (int i = 0; i < n_evs; i++)
        n += strcmp(evs[i].agent, agent) == 0 && strcmp(evs[i].label, label) == 0 &&
             evs[i].inc == inc;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

static int ev_wait(const char *agent, const char *label, uint64_t inc, unsigned ms)
{
    uint64_t end = now_ms() + ms;
    while (ev_count(agent, label, inc) == 0) {
        if (now_ms() >= end)
            return 0;
        sleep_ms(10);
    }
    return 1;
}

/* ---- Cases ---- */

static void test_round_trip(void)
{
    struct ixl_etcd *c = open_client(&srv, 5, 0);
    size_t n = 10000 + (size_t)(rnd() % 5000);
    void *b = rand_bytes(n);
    CHECK_RC(ixl_etcd_publish(c, "rt-agent", NULL, 7, b, n, err, sizeof(err)), IXL_OK);
    expect_blob(c, "rt-agent", NULL, b, n);
    expect_blob(c, "rt-agent", "", b, n);
    /* An empty blob, and an agent name that needs encoding. */
    CHECK_RC(ixl_etcd_publish(c, "rt/agent %1", NULL, 7, "", 0, err, sizeof(err)), IXL_OK);
    expect_blob(c, "rt/agent %1", NULL, "", 0);
    CHECK_RC(fetch_rc(c, "rt", NULL, 0), IXL_ERR_NOT_FOUND);
    /* Bad arguments. */
    CHECK_RC(ixl_etcd_publish(c, "", NULL, 1, b, n, err, sizeof(err)), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_etcd_publish(c, "x", "bad/label", 1, b, n, err, sizeof(err)), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_etcd_publish(c, "x", NULL, 1, NULL, 5, err, sizeof(err)), IXL_ERR_INVALID_ARG);
    free(b);
    ixl_etcd_close(c);
    fprintf(stderr, "round trip: ok\n");
}

static void test_labels(void)
{
    struct ixl_etcd *c = open_client(&srv, 5, 0);
    void *full = rand_bytes(3000), *x = rand_bytes(2000), *y = rand_bytes(1000);
    void *x2 = rand_bytes(2500);
    CHECK_RC(ixl_etcd_publish(c, "lab", NULL, 1, full, 3000, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(c, "lab", "x", 1, x, 2000, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(c, "lab", "y.1-Z_", 1, y, 1000, err, sizeof(err)), IXL_OK);
    expect_blob(c, "lab", NULL, full, 3000);
    expect_blob(c, "lab", "x", x, 2000);
    expect_blob(c, "lab", "y.1-Z_", y, 1000);
    CHECK_RC(ixl_etcd_publish(c, "lab", "x", 1, x2, 2500, err, sizeof(err)), IXL_OK);
    expect_blob(c, "lab", "x", x2, 2500);
    expect_blob(c, "lab", NULL, full, 3000);
    expect_blob(c, "lab", "y.1-Z_", y, 1000);
    CHECK_RC(fetch_rc(c, "lab", "z", 0), IXL_ERR_NOT_FOUND);
    /* "f" as a label is not the full metadata. */
    CHECK_RC(fetch_rc(c, "lab", "f", 0), IXL_ERR_NOT_FOUND);
    free(full);
    free(x);
    free(y);
    free(x2);
    ixl_etcd_close(c);
    fprintf(stderr, "labels: ok\n");
}

static void test_big(void)
{
    struct ixl_etcd *c = open_client(&small, 5, 0);
    size_t n = 1u << 20;
    void *b = rand_bytes(n);
    uint64_t t0 = now_ms();
    CHECK_RC(ixl_etcd_publish(c, "big", NULL, 1, b, n, err, sizeof(err)), IXL_OK);
    uint64_t t1 = now_ms();
    expect_blob(c, "big", NULL, b, n);
    uint64_t t2 = now_ms();
    ((unsigned char *)b)[n / 2] ^= 1;
    CHECK_RC(ixl_etcd_publish(c, "big", NULL, 1, b, n, err, sizeof(err)), IXL_OK);
    uint64_t t3 = now_ms();
    expect_blob(c, "big", NULL, b, n);
    uint64_t t4 = now_ms();
    fprintf(stderr,
            "1 MiB under --max-request-bytes 65536: first publish %" PRIu64 " ms (learning the "
            "chunk size), publish %" PRIu64 " ms, fetch %" PRIu64 " / %" PRIu64 " ms\n",
            t1 - t0, t3 - t2, t2 - t1, t4 - t3);
    /* The first chunk of the version exists; the old version's chunks were deleted. */
    char out[4096];
    CHECK(etcd_http(&small, "POST", "/v3/kv/range",
                    "{\"key\":\"aXhsL2RhdGEvYmlnL2Yv\",\"range_end\":\"aXhsL2RhdGEvYmlnL2Yw\","
                    "\"count_only\":true}",
                    out, sizeof(out), 5000) == 200);
    long cnt = 0;
    const char *p = strstr(out, "\"count\":\"");
    CHECK(p != NULL);
    cnt = strtol(p + 9, NULL, 10);
    fprintf(stderr, "big: %ld chunk keys\n", cnt);
    CHECK(cnt > 16 && cnt <= 64); /* split, and only one version left */
    free(b);

    /* On the default limit, 1 MiB is 2 chunks of 512 KiB. */
    struct ixl_etcd *d = open_client(&srv, 5, 0);
    b = rand_bytes(n);
    t0 = now_ms();
    CHECK_RC(ixl_etcd_publish(d, "big", NULL, 1, b, n, err, sizeof(err)), IXL_OK);
    t1 = now_ms();
    expect_blob(d, "big", NULL, b, n);
    t2 = now_ms();
    fprintf(stderr, "1 MiB on etcd's default limit: publish %" PRIu64 " ms, fetch %" PRIu64 " ms\n",
            t1 - t0, t2 - t1);
    free(b);
    ixl_etcd_close(d);
    ixl_etcd_close(c);
}

/* Version k: its length and bytes follow from k, so a mixture of two versions shows. */
static size_t ver_len(uint32_t k)
{
    return k % 2 ? 300000 + k : 700000 + k;
}

static void fill_ver(unsigned char *p, uint32_t k)
{
    size_t n = ver_len(k);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(k * 131 + i * 7 + (i >> 12));
    memcpy(p, &k, 4);
}

struct reader {
    struct ixl_etcd *c;
    atomic_int stop;
    int reads, fails;
    _Atomic uint32_t last;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    char rerr[512];
    unsigned char *want = malloc(800000);
    CHECK(want != NULL);
    while (!atomic_load(&r->stop)) {
        void *b = NULL;
        size_t l = 0;
        int rc = ixl_etcd_fetch(r->c, "atomic", NULL, 0, &b, &l, rerr, sizeof(rerr));
        if (rc != IXL_OK) {
            fprintf(stderr, "reader: %d %s\n", rc, rerr);
            r->fails++;
            continue;
        }
        uint32_t k;
        CHECK(l >= 4);
        memcpy(&k, b, 4);
        CHECK(l == ver_len(k));
        fill_ver(want, k);
        if (memcmp(b, want, l) != 0)
            check_fail(__FILE__, __LINE__, "reader saw a mixture in version %u", k);
        CHECK(k >= atomic_load(&r->last)); /* never goes back */
        atomic_store(&r->last, k);
        r->reads++;
        free(b);
    }
    free(want);
    return NULL;
}

static void test_atomic(void)
{
    struct ixl_etcd *w = open_client(&small, 5, 0);
    struct ixl_etcd *rc_ = open_client(&small, 5, 0);
    unsigned char *buf = malloc(800000);
    CHECK(buf != NULL);
    fill_ver(buf, 1);
    CHECK_RC(ixl_etcd_publish(w, "atomic", NULL, 1, buf, ver_len(1), err, sizeof(err)), IXL_OK);
    struct reader r = {.c = rc_};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, reader_main, &r) == 0);
    uint32_t k;
    for (k = 2; k <= 25; k++) {
        fill_ver(buf, k);
        CHECK_RC(ixl_etcd_publish(w, "atomic", NULL, 1, buf, ver_len(k), err, sizeof(err)), IXL_OK);
    }
    uint64_t t0 = now_ms(); /* until the reader saw the last version */
    while (atomic_load(&r.last) != 25 && now_ms() - t0 < 10000)
        sleep_ms(10);
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    fprintf(stderr, "atomic: %d versions written, %d reads, %d failed reads, last seen %u\n", k - 1,
            r.reads, r.fails, r.last);
    CHECK(r.fails == 0);
    CHECK(r.reads > 0);
    CHECK(atomic_load(&r.last) == 25);
    free(buf);
    ixl_etcd_close(rc_);
    ixl_etcd_close(w);
}

static int child_main(const char *ep, const char *agent)
{
    struct ixl_etcd_opts o = {.endpoints = ep, .ttl_s = 2};
    struct ixl_etcd *c;
    if (ixl_etcd_open(&o, &c, err, sizeof(err)) != IXL_OK ||
        ixl_etcd_publish(c, agent, NULL, 42, "child", 5, err, sizeof(err)) != IXL_OK ||
        ixl_etcd_publish(c, agent, "part", 42, "p", 1, err, sizeof(err)) != IXL_OK) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}

static void test_lease_expiry(void)
{
    struct ixl_etcd *c = open_client(&srv, 5, 0);
    CHECK_RC(ixl_etcd_watch(c, on_gone, NULL, err, sizeof(err)), IXL_OK);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl("/proc/self/exe", "test_etcd_client", "child", srv.endpoint, "dead-agent",
              (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char line[16] = {0};
    CHECK(read(pfd[0], line, 6) == 6 && memcmp(line, "ready\n", 6) == 0);
    close(pfd[0]);
    expect_blob(c, "dead-agent", NULL, "child", 5);
    /* The lease is kept alive past its TTL while the child lives. */
    sleep_ms(2500);
    expect_blob(c, "dead-agent", NULL, "child", 5);
    uint64_t t0 = now_ms();
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, NULL, 0) == pid);
    while (fetch_rc(c, "dead-agent", NULL, 0) == IXL_OK) {
        CHECK(now_ms() - t0 < 4000); /* ttl + 2 s */
        sleep_ms(50);
    }
    uint64_t gone = now_ms() - t0;
    CHECK_RC(fetch_rc(c, "dead-agent", "part", 0), IXL_ERR_NOT_FOUND);
    CHECK(ev_wait("dead-agent", "", 0, 1000));
    CHECK(ev_wait("dead-agent", "part", 0, 1000));
    fprintf(stderr, "lease expiry: gone %" PRIu64 " ms after SIGKILL (ttl 2 s), watch saw it\n",
            gone);
    ixl_etcd_close(c);
}

static void test_remove_watch(void)
{
    struct ixl_etcd *a = open_client(&srv, 5, 0);
    struct ixl_etcd *b = open_client(&srv, 5, 0);
    CHECK_RC(ixl_etcd_watch(b, on_gone, NULL, err, sizeof(err)), IXL_OK);
    sleep_ms(200); /* the watch is established */
    CHECK_RC(ixl_etcd_publish(a, "rm1", NULL, 1, "a", 1, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(a, "rm1", "l", 1, "b", 1, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(a, "rm10", NULL, 1, "c", 1, err, sizeof(err)), IXL_OK);
    /* Same incarnation again: no event; a new one: an event with it. */
    CHECK_RC(ixl_etcd_publish(a, "rm1", NULL, 1, "aa", 2, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(a, "rm1", NULL, 0x1234, "aaa", 3, err, sizeof(err)), IXL_OK);
    CHECK(ev_wait("rm1", "", 0x1234, 2000));
    CHECK(ev_count("rm1", "", 1) == 0);
    CHECK_RC(ixl_etcd_remove(a, "rm1", err, sizeof(err)), IXL_OK);
    CHECK(ev_wait("rm1", "", 0, 2000));
    CHECK(ev_wait("rm1", "l", 0, 2000));
    CHECK_RC(fetch_rc(b, "rm1", NULL, 0), IXL_ERR_NOT_FOUND);
    CHECK_RC(fetch_rc(b, "rm1", "l", 0), IXL_ERR_NOT_FOUND);
    expect_blob(b, "rm10", NULL, "c", 1); /* a name with rm1 as a prefix stays */
    sleep_ms(100);
    CHECK(ev_count("rm10", "", 0) == 0);
    /* Close with the watch running returns at once. */
    uint64_t t0 = now_ms();
    ixl_etcd_close(b);
    uint64_t dt = now_ms() - t0;
    fprintf(stderr, "remove + watch: ok; close with a watch running took %" PRIu64 " ms\n", dt);
    CHECK(dt < 1000);
    ixl_etcd_close(a);
}

struct late {
    struct ixl_etcd *c;
};

static void *late_main(void *arg)
{
    struct late *l = arg;
    char lerr[256];
    sleep_ms(300);
    CHECK_RC(ixl_etcd_publish(l->c, "late", NULL, 1, "hello", 5, lerr, sizeof(lerr)), IXL_OK);
    return NULL;
}

static void test_fetch_timeout(void)
{
    struct ixl_etcd *c = open_client(&srv, 5, 0);
    struct late l = {.c = c};
    pthread_t t;
    uint64_t t0 = now_ms();
    CHECK(pthread_create(&t, NULL, late_main, &l) == 0);
    void *b = NULL;
    size_t n = 0;
    CHECK_RC(ixl_etcd_fetch(c, "late", NULL, 5000, &b, &n, err, sizeof(err)), IXL_OK);
    uint64_t dt = now_ms() - t0;
    CHECK(n == 5 && memcmp(b, "hello", 5) == 0);
    CHECK(dt >= 250 && dt < 2000);
    free(b);
    pthread_join(t, NULL);
    t0 = now_ms();
    CHECK_RC(fetch_rc(c, "never", "lbl", 500), IXL_ERR_NOT_FOUND);
    dt = now_ms() - t0;
    CHECK(dt >= 450 && dt < 1500);
    CHECK_STR_HAS(err, "never");
    CHECK_STR_HAS(err, "lbl");
    CHECK_STR_HAS(err, srv.endpoint);
    fprintf(stderr, "fetch timeout: ok (%s)\n", err);
    ixl_etcd_close(c);
}

static void bad(struct ixl_etcd *c, const char *agent, const char *head, const char *what)
{
    char key[256];
    snprintf(key, sizeof(key), "ixl/md/%s/f", agent);
    CHECK(etcd_put_raw(&srv, key, head, strlen(head)) == 0);
    int rc = fetch_rc(c, agent, NULL, 0);
    if (rc != IXL_ERR_MALFORMED)
        check_fail(__FILE__, __LINE__, "%s: fetch gave %d (%s), want MALFORMED", what, rc, err);
}

static void test_malformed(void)
{
    struct ixl_etcd *c = open_client(&srv, 5, 0);
    bad(c, "m1", "v=0000000000000001 n=1000000 len=5 crc=0 inc=1", "n over the cap");
    bad(c, "m2", "v=0000000000000001 n=1 len=999999999999 crc=0 inc=1", "len over the cap");
    bad(c, "m3", "v=xyz n=1 len=5 crc=0 inc=1", "non-hex version");
    bad(c, "m4", "v=1 n=one len=5 crc=0 inc=1", "non-numeric n");
    bad(c, "m5", "garbage\x01\xff", "garbage");
    bad(c, "m6", "", "empty head");
    bad(c, "m7", "v=1 n=2 len=1 crc=0 inc=1", "more chunks than bytes");
    bad(c, "m8", "v=1 n=1 len=5 crc=0 inc=1 extra", "trailing bytes");
    bad(c, "m9", "v=1 n=1 len=5 crc=0 inc=1", "missing chunk");
    bad(c, "m10", "v=1 n=1 len=-5 crc=0 inc=1", "negative len");
    bad(c, "m11", "v=11111111111111111 n=1 len=5 crc=0 inc=1", "17-digit version");
    /* A real version with a wrong crc in its head. */
    CHECK(etcd_put_raw(&srv, "ixl/data/m12/f/0000000000000001/00000000", "hello", 5) == 0);
    bad(c, "m12", "v=1 n=1 len=5 crc=12345678 inc=1", "bad crc");
    /* The right crc: it reads. */
    char head[160];
    struct ixl_etcd_head h = {
        .ver = 1, .n = 1, .len = 5, .crc = ixl_etcd_crc32c(0, "hello", 5), .inc = 1};
    ixl_etcd_head_format(&h, head, sizeof(head));
    CHECK(etcd_put_raw(&srv, "ixl/md/m12/f", head, strlen(head)) == 0);
    expect_blob(c, "m12", NULL, "hello", 5);
    /* A chunk longer than the head says; an extra chunk; a misnamed chunk. */
    CHECK(etcd_put_raw(&srv, "ixl/data/m13/f/0000000000000001/00000000", "hello!", 6) == 0);
    bad(c, "m13", head, "chunk past the length");
    CHECK(etcd_put_raw(&srv, "ixl/data/m14/f/0000000000000001/00000000", "hel", 3) == 0);
    CHECK(etcd_put_raw(&srv, "ixl/data/m14/f/0000000000000001/00000001", "lo", 2) == 0);
    bad(c, "m14", head, "two chunks where the head says one");
    CHECK(etcd_put_raw(&srv, "ixl/data/m15/f/0000000000000001/0000000x", "hello", 5) == 0);
    bad(c, "m15", head, "misnamed chunk");
    CHECK(etcd_put_raw(&srv, "ixl/data/m16/f/0000000000000001/00000000", "", 0) == 0);
    h.len = 0;
    h.n = 0;
    bad(c, "m16", "v=1 n=1 len=1 crc=0 inc=1", "empty chunk");
    /* Hostile keys under the watch's prefix do not upset the watch. */
    CHECK_RC(ixl_etcd_watch(c, on_gone, NULL, err, sizeof(err)), IXL_OK);
    sleep_ms(200);
    CHECK(etcd_put_raw(&srv, "ixl/md/%zz/f", "x", 1) == 0);
    CHECK(etcd_put_raw(&srv, "ixl/md/a/q", "x", 1) == 0);
    CHECK(etcd_put_raw(&srv, "ixl/md/m12/f", "garbage", 7) == 0);
    CHECK(etcd_put_raw(&srv, "ixl/md/m12/f", head, strlen(head)) == 0);
    CHECK_RC(ixl_etcd_publish(c, "m20", NULL, 1, "x", 1, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_remove(c, "m20", err, sizeof(err)), IXL_OK);
    CHECK(ev_wait("m20", "", 0, 2000)); /* the watch is still alive */
    ixl_etcd_close(c);
    fprintf(stderr, "malformed: ok\n");
}

/* Head parser: what the format accepts, directly. */
static void test_head_parse(void)
{
    struct ixl_etcd_head h, g;
    char s[160];
    h = (struct ixl_etcd_head){
        .ver = UINT64_MAX, .n = 3, .len = 1000, .crc = 0xdeadbeef, .inc = 0x123456789abcdefull};
    size_t n = ixl_etcd_head_format(&h, s, sizeof(s));
    CHECK(ixl_etcd_head_parse(s, n, &g) == 0);
    CHECK(memcmp(&h, &g, sizeof(h)) == 0);
    for (size_t i = 0; i < n; i++) /* a truncation fails, or (in inc's digits) differs */
        CHECK(ixl_etcd_head_parse(s, i, &g) != 0 || g.inc != h.inc);
    char b64[16];
    unsigned char out[16];
    ixl_etcd_b64_encode("ab", 2, b64);
    CHECK(strcmp(b64, "YWI=") == 0);
    CHECK(ixl_etcd_b64_decode("YWI=", 4, out) == 2);
    CHECK(ixl_etcd_b64_decode("YWJ=", 4, out) == -1); /* unused bits set */
    CHECK(ixl_etcd_b64_decode("YW=I", 4, out) == -1);
    CHECK(ixl_etcd_b64_decode("YWI", 3, out) == -1);
    CHECK(ixl_etcd_crc32c(0, "123456789", 9) == 0xE3069283u);
}

static void test_etcd_down(void)
{
    struct etcd_srv tmp;
    CHECK(etcd_start(&tmp, 0) == 0);
    struct ixl_etcd *c = open_client(&tmp, 5, 1000);
    CHECK_RC(ixl_etcd_watch(c, on_gone, NULL, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_publish(c, "down", NULL, 1, "x", 1, err, sizeof(err)), IXL_OK);
    etcd_kill(&tmp);
    uint64_t t0 = now_ms();
    int rc = ixl_etcd_publish(c, "down", NULL, 1, "y", 1, err, sizeof(err));
    uint64_t dt = now_ms() - t0;
    fprintf(stderr, "etcd down: publish %d (%s) in %" PRIu64 " ms\n", rc, err, dt);
    CHECK_RC(rc, IXL_ERR_UNREACHABLE);
    CHECK_STR_HAS(err, tmp.endpoint);
    CHECK(dt < 3000);
    t0 = now_ms();
    CHECK_RC(fetch_rc(c, "down", NULL, 2000), IXL_ERR_UNREACHABLE);
    CHECK(now_ms() - t0 < 3000);
    CHECK_RC(ixl_etcd_remove(c, "down", err, sizeof(err)), IXL_ERR_UNREACHABLE);
    t0 = now_ms();
    ixl_etcd_close(c);
    dt = now_ms() - t0;
    fprintf(stderr, "etcd down: close took %" PRIu64 " ms\n", dt);
    CHECK(dt < 3000);
    /* Open against nothing: unreachable, within the timeout. */
    struct ixl_etcd_opts o = {.endpoints = tmp.endpoint, .timeout_ms = 500};
    struct ixl_etcd *d = NULL;
    t0 = now_ms();
    CHECK_RC(ixl_etcd_open(&o, &d, err, sizeof(err)), IXL_ERR_UNREACHABLE);
    CHECK(now_ms() - t0 < 2000 && d == NULL);
    o.endpoints = "ftp://x";
    CHECK_RC(ixl_etcd_open(&o, &d, err, sizeof(err)), IXL_ERR_INVALID_ARG);
    etcd_stop(&tmp);
}

/* Close from within the callback (allowed: the watch thread finishes it). */
static atomic_int closed_in_cb;
static void close_cb(void *ctx, const char *agent, const char *label, uint64_t inc)
{
    (void)label;
    (void)inc;
    if (strcmp(agent, "closeme") == 0 && !atomic_load(&closed_in_cb)) {
        ixl_etcd_close(ctx);
        atomic_store(&closed_in_cb, 1);
    }
}

static void test_close_in_callback(void)
{
    struct ixl_etcd *a = open_client(&srv, 5, 0);
    struct ixl_etcd *b = open_client(&srv, 5, 0);
    CHECK_RC(ixl_etcd_watch(b, close_cb, b, err, sizeof(err)), IXL_OK);
    sleep_ms(200);
    CHECK_RC(ixl_etcd_publish(a, "closeme", NULL, 1, "x", 1, err, sizeof(err)), IXL_OK);
    CHECK_RC(ixl_etcd_remove(a, "closeme", err, sizeof(err)), IXL_OK);
    uint64_t t0 = now_ms();
    while (!atomic_load(&closed_in_cb)) {
        CHECK(now_ms() - t0 < 3000);
        sleep_ms(10);
    }
    sleep_ms(100); /* the watch thread frees b */
    ixl_etcd_close(a);
    fprintf(stderr, "close in callback: ok\n");
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2], argv[3]);
    alarm(110);
    rng ^= (uint64_t)time(NULL) * 0x100000001B3ull ^ (uint64_t)getpid();
    test_head_parse();
    {
        struct ixl_etcd_opts o = {.endpoints = "http://127.0.0.1:1"};
        struct ixl_etcd *c;
        if (ixl_etcd_open(&o, &c, err, sizeof(err)) == IXL_ERR_NOT_SUPPORTED)
            skip(1, err);
    }
    etcd_require();
    CHECK(etcd_start(&srv, 0) == 0);
    CHECK(etcd_start(&small, 65536) == 0);
    test_round_trip();
    test_labels();
    test_big();
    test_atomic();
    test_remove_watch();
    test_fetch_timeout();
    test_malformed();
    test_lease_expiry();
    test_close_in_callback();
    test_etcd_down();
    etcd_stop(&small);
    etcd_stop(&srv);
    fprintf(stderr, "test_etcd_client: all passed\n");
    return 0;
}

/*
 * Thread safety under load: in-process agents ("init" and "targ", each with the in-memory TEST
 * backend doing its copies on a worker thread after delay_us) driven by 8 threads with a fixed
 * mix for a few seconds (2.5 s unless told otherwise):
 *
 *   xfer x3  WRITE init -> targ with a notification, completed by status polling, wait, or the
 *            agent's fd; sometimes re-posted with a new notification, sometimes released while
 *            in flight; then READ back. Every completed transfer's bytes are checked.
 *   meta     invalidates "targ" on "init" and loads it again (full and partial blobs),
 *            loads/invalidates "init" on "targ", and restarts a third agent "peer" (a newer
 *            incarnation replaces the old entry; old handles and old metadata are refused).
 *   reg      registers and deregisters scratch regions on both agents; a region used by a live
 *            prepared list or request must answer IXL_ERR_BUSY; loopback transfers on "init";
 *            allocates and frees backend memory; creates a second backend on "init" mid-run.
 *   prep     prepared lists and index requests with random indices (WRITE and READ back).
 *   notif    drains both agents' notifications and sends standalone ones.
 *   monitor  poll()s the agents' fds, drives progress, checks the stats, runs loopback
 *            transfers on "targ" completed through the fd, reads info and telemetry, and calls
 *            status/wait on the transfer threads' requests while they are in flight (the
 *            contract allows status/wait on a request concurrently with anything but its
 *            release).
 *
 * Invariants: every notification of a request that reached IXL_OK, and of every standalone
 * send that returned IXL_OK, arrives exactly once; a released request's at most once; a request
 * that was never posted or that failed, never; notifications of one sending thread arrive in
 * order. A handle made before the remote was invalidated, posted after the invalidation
 * returned, is refused with IXL_ERR_STALE; errors that only an invalidation can cause appear
 * only when one overlapped. The agents' counters agree with what the threads saw. A hang is
 * a failure (alarm). Runs under ThreadSanitizer.
 *
 * Usage: test_stress_mt [seconds] [--own-status-only] (the second leaves out the monitor's
 * status/wait on other threads' requests).
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define N_XFER 3  /* transfer threads */
#define CHUNK 512 /* bytes per descriptor of the transfer threads */
#define N_CHUNK 4 /* descriptors per transfer */
#define BUF (CHUNK * N_CHUNK)
#define BLOCK 256               /* prepared-list block */
#define N_BLOCK 16              /* blocks per prepared list */
#define N_SCRATCH 6             /* scratch regions per agent for the registration thread */
#define SCRATCH 1024            /* bytes per scratch region */
#define MAXSEQ (1u << 20)       /* sequence numbers per (kind, sender thread) */
#define WAIT_MS 10000           /* any single wait longer than this is a hang */
#define NOTIF_MAGIC 0x5354524eu /* "STRN" */

enum kind { K_XFER, K_PREP, K_SEND, K_REG, K_LOOP, K_COUNT };
static const char *const kind_sender[K_COUNT] = {"init", "init", "init", "init", "targ"};
static const char *const kind_name[K_COUNT] = {"xfer", "prep", "send", "reg", "loop"};

/* What a notification's fate must be, decided by the thread that made the request. */
enum fate { F_NEVER = 0, F_MAY = 1, F_ONCE = 2 };

struct msg {
    uint32_t magic;
    uint16_t kind;
    uint16_t thread;
    uint32_t seq;
};

static struct ixl_agent *init_a, *targ_a;
static double run_seconds = 2.5;
static int cross_status = 1;
static uint64_t t_end_ns;
static _Atomic int stop;

/* Written by the owner thread during the run, read by main after the joins. */
static uint8_t fate[K_COUNT][N_XFER][MAXSEQ];
/* Written by the notification thread, then by main after joining it. */
static uint8_t received[K_COUNT][N_XFER][MAXSEQ];
static uint32_t last_seq[K_COUNT][N_XFER];
static uint64_t drained_targ, drained_init;

/* Invalidation bookkeeping (meta thread): begun is bumped before ixl_remote_invalidate(init,
 * "targ"), done after it returned. meta_state is odd from just before an invalidation until a
 * full reload has returned: lookups of "targ" on "init" may fail only then. */
static _Atomic uint64_t inval_begun, inval_done, meta_state;

/* What the threads saw, per agent (0: init, 1: targ), to compare with ixl_agent_stats. */
static _Atomic uint64_t seen_posted[2], seen_ok[2], seen_failed[2], seen_released_inflight[2];
static _Atomic uint64_t n_sends_ok, n_stale_post, n_stale_create, n_disconnect, n_meta_miss,
    n_writes_ok, n_reads_ok, n_prepped_ok, n_busy, n_loop_ok, n_cross_status, n_reposts,
    n_invalidations, n_canceled, n_restarts;

/* The current in-flight request of each transfer thread, for the monitor's status/wait. */
struct published {
    pthread_mutex_t lock;
    struct ixl_xfer *x;
};
static struct published pub[N_XFER];

/* ---- helpers ------------------------------------------------------------------------------ */

static void quiet(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_stress_mt: still running 90 s past its duration: a hang\n";
    ssize_t rc = write(2, m, sizeof(m) - 1);
    (void)rc;
    _exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int time_up(void)
{
    if (atomic_load(&stop))
        return 1;
    if (now_ns() >= t_end_ns) {
        atomic_store(&stop, 1);
        return 1;
    }
    return 0;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
}

static uint64_t rnd(uint64_t *s)
{
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A pattern unique to (tag, word index), written into len bytes (a multiple of 8). */
static void fill(uint8_t *p, size_t len, uint64_t tag)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = mix(tag * 0x100000001b3ull + i);
        memcpy(p + i, &v, 8);
    }
}

static void expect_bytes(const uint8_t *got, const uint8_t *want, size_t len, const char *what)
{
    if (memcmp(got, want, len) == 0)
        return;
    size_t i = 0;
    while (got[i] == want[i])
        i++;
    check_fail(__FILE__, __LINE__, "%s: byte %zu is 0x%02x, want 0x%02x", what, i, got[i], want[i]);
}

static void expect_poison(const uint8_t *got, size_t len, uint8_t poison, const char *what)
{
    for (size_t i = 0; i < len; i++)
        if (got[i] != poison)
            check_fail(__FILE__, __LINE__, "%s: byte %zu was written (0x%02x)", what, i, got[i]);
}

static void reg_one(struct ixl_agent *a, const void *p, size_t len, int want)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)p, len, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), want);
}

static int dereg_one(struct ixl_agent *a, const void *p, size_t len)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)p, len, 0, NULL, 0};
    return ixl_mem_deregister(a, IXL_MEM_DRAM, &d, 1, NULL);
}

static struct ixl_dlist *list_of(const uint8_t *base, size_t n, size_t len, const unsigned *order)
{
    struct ixl_dlist *l = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, n, &l), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc d = {(uint64_t)(uintptr_t)(base + (order ? order[i] : i) * len), len, 0};
        CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    }
    return l;
}

static void notif_params(struct ixl_xfer_params *p, struct msg *m, enum kind k, unsigned thread,
                         uint32_t seq)
{
    *m = (struct msg){NOTIF_MAGIC, (uint16_t)k, (uint16_t)thread, seq};
    *p = (struct ixl_xfer_params){
        .field_mask = IXL_XFER_F_NOTIF, .notif = m, .notif_len = sizeof(*m)};
}

/* Lookups of "targ" on "init" may fail (NOT_FOUND, NOT_REGISTERED) only while an invalidation
 * and its reload are under way: m0 and m1 are meta_state before and after the call. */
static void expect_meta_window(int rc, uint64_t m0, uint64_t m1)
{
    if (rc != IXL_ERR_NOT_FOUND && rc != IXL_ERR_NOT_REGISTERED)
        check_fail(__FILE__, __LINE__, "a lookup of 'targ' on 'init' failed with %s: %s",
                   ixl_strerror(rc), ixl_agent_last_error(init_a));
    if (!((m0 & 1) || m1 != m0))
        check_fail(__FILE__, __LINE__,
                   "a lookup of 'targ' failed with %s while its metadata was fully loaded",
                   ixl_strerror(rc));
    atomic_fetch_add(&n_meta_miss, 1);
}

/* Completes a posted request: 0 polls status, 1 waits, 2 poll()s the agent's fd and drives
 * progress. Never IXL_IN_PROGRESS or IXL_ERR_TIMEOUT (a hang fails the test). */
static int complete(struct ixl_agent *a, struct ixl_xfer *x, int mode)
{
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    int fd = -1;
    CHECK_RC(ixl_agent_fd(a, &fd), IXL_OK);
    for (;;) {
        int rc;
        if (mode == 1) {
            rc = ixl_xfer_wait(x, WAIT_MS);
            CHECK(rc != IXL_ERR_TIMEOUT && rc != IXL_IN_PROGRESS);
            return rc;
        }
        rc = ixl_xfer_status(x);
        if (rc != IXL_IN_PROGRESS)
            return rc;
        if (now_ns() > deadline)
            check_fail(__FILE__, __LINE__, "a request stayed in flight for %d ms", WAIT_MS);
        if (mode == 0) {
            sleep_us(20);
        } else {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int n = poll(&pfd, 1, 5);
            CHECK(n >= 0);
            CHECK_RC(ixl_agent_progress(a), IXL_OK);
        }
    }
}

/* Releases, answering IXL_ERR_BUSY (the backend is stopping the request) by trying again. */
static void release(struct ixl_xfer *x)
{
    int rc = IXL_ERR_BUSY;
    for (int tries = 0; tries < 10000 && rc == IXL_ERR_BUSY; tries++) {
        rc = ixl_xfer_release(x);
        if (rc == IXL_ERR_BUSY) {
            atomic_fetch_add(&n_busy, 1);
            sleep_us(10);
        }
    }
    CHECK_RC(rc, IXL_OK);
}

static void publish(unsigned t, struct ixl_xfer *x)
{
    pthread_mutex_lock(&pub[t].lock);
    pub[t].x = x;
    pthread_mutex_unlock(&pub[t].lock);
}

/* Records a completion of a request of agent ai (0 init, 1 targ). */
static void saw_completion(int ai, int rc)
{
    atomic_fetch_add(rc == IXL_OK ? &seen_ok[ai] : &seen_failed[ai], 1);
}

/* ---- memory -------------------------------------------------------------------------------- */

/* init side */
static _Alignas(64) uint8_t src_buf[N_XFER][BUF], read_buf[N_XFER][BUF];
static _Alignas(64) uint8_t prep_local[N_BLOCK * BLOCK], prep_expect[N_BLOCK * BLOCK];
static _Alignas(64) uint8_t scratch_init[N_SCRATCH][SCRATCH];
/* targ side */
static _Alignas(64) uint8_t dst_buf[N_XFER][BUF];
static _Alignas(64) uint8_t prep_remote[N_BLOCK * BLOCK];
static _Alignas(64) uint8_t scratch_targ[N_SCRATCH][SCRATCH];
static _Alignas(64) uint8_t mon_a[BUF], mon_b[BUF];
/* "peer", an agent the meta thread restarts, and the init buffer it writes from */
static struct ixl_agent *peer_a;
static _Alignas(64) uint8_t peer_buf[BUF], meta_local[BUF];

/* ---- transfer threads ---------------------------------------------------------------------- */

struct xfer_ctx {
    unsigned id;
    uint32_t seq;
    uint64_t rng;
};

static void write_expected(uint8_t *out, unsigned t, uint32_t seq)
{
    fill(out, BUF, ((uint64_t)K_XFER << 56) | ((uint64_t)t << 40) | seq);
}

/* One WRITE request, posted up to `posts` times; returns 1 if the last post completed and its
 * bytes were checked (the READ back may then run). */
static int write_round(struct xfer_ctx *c, const struct ixl_dlist *local,
                       const struct ixl_dlist *remote, unsigned rot)
{
    unsigned t = c->id;
    uint32_t seq = ++c->seq;
    write_expected(src_buf[t], t, seq);
    memset(dst_buf[t], 0xA5, BUF);
    struct msg m;
    struct ixl_xfer_params p;
    notif_params(&p, &m, K_XFER, t, seq);
    uint64_t done_before_create = atomic_load(&inval_done);
    uint64_t m0 = atomic_load(&meta_state);
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(init_a, IXL_OP_WRITE, local, remote, "targ", &p, &x);
    if (rc != IXL_OK) {
        expect_meta_window(rc, m0, atomic_load(&meta_state));
        sleep_us(50);
        return 0;
    }
    uint64_t begun_after_create = atomic_load(&inval_begun);
    int posts = (rnd(&c->rng) % 3 == 0) ? 2 + (int)(rnd(&c->rng) % 2) : 1;
    int checked = 0;
    int published = 0;
    for (int k = 0;;) {
        if (rnd(&c->rng) % 4 == 0)
            sleep_us((unsigned)(rnd(&c->rng) % 300)); /* room for an invalidation */
        uint64_t done_before_post = atomic_load(&inval_done);
        rc = ixl_xfer_post(x);
        if (done_before_post > begun_after_create && rc != IXL_ERR_STALE)
            check_fail(__FILE__, __LINE__,
                       "a request made before 'targ' was invalidated was posted after the "
                       "invalidation returned: got %s, want IXL_ERR_STALE",
                       ixl_strerror(rc));
        if (rc == IXL_ERR_STALE) {
            CHECK(atomic_load(&inval_begun) > done_before_create);
            atomic_fetch_add(&n_stale_post, 1);
            break;
        }
        atomic_fetch_add(&seen_posted[0], 1);
        CHECK(rc == IXL_IN_PROGRESS || rc == IXL_OK);
        if (!published && cross_status) {
            publish(t, x);
            published = 1;
        }
        if (rnd(&c->rng) % 8 == 0) {
            /* Released below while (probably) in flight: delivered at most once. */
            fate[K_XFER][t][seq] = F_MAY;
            atomic_fetch_add(&seen_released_inflight[0], 1);
            atomic_fetch_add(&n_canceled, 1);
            break;
        }
        rc = complete(init_a, x, (int)(rnd(&c->rng) % 3));
        saw_completion(0, rc);
        if (rc == IXL_ERR_REMOTE_DISCONNECT) {
            /* Only an invalidation that overlapped the transfer may cut it. */
            CHECK(atomic_load(&inval_begun) > done_before_post);
            atomic_fetch_add(&n_disconnect, 1);
            break;
        }
        CHECK_RC(rc, IXL_OK);
        fate[K_XFER][t][seq] = F_ONCE;
        uint8_t want[BUF];
        write_expected(want, t, seq);
        char what[96];
        snprintf(what, sizeof(what), "WRITE target bytes after post %d of a request (seq %u)",
                 k + 1, seq);
        for (unsigned i = 0; i < N_CHUNK; i++)
            expect_bytes(dst_buf[t] + ((i + rot) % N_CHUNK) * CHUNK, want + i * CHUNK, CHUNK, what);
        struct ixl_xfer_telemetry tm = {.size = sizeof(tm)};
        CHECK_RC(ixl_xfer_telemetry(x, &tm), IXL_OK);
        CHECK(tm.post_count == (uint64_t)k + 1);
        CHECK(tm.bytes == BUF);
        atomic_fetch_add(&n_writes_ok, 1);
        checked = 1;
        if (++k >= posts || seq + 2 >= MAXSEQ)
            break;
        /* Post the same request again with new bytes and a new notification. */
        checked = 0;
        seq = ++c->seq;
        write_expected(src_buf[t], t, seq);
        memset(dst_buf[t], 0xA5, BUF);
        notif_params(&p, &m, K_XFER, t, seq);
        CHECK_RC(ixl_xfer_set_notif(x, &m, sizeof(m)), IXL_OK);
        atomic_fetch_add(&n_reposts, 1);
    }
    if (published)
        publish(t, NULL);
    release(x);
    return checked;
}

static void read_round(struct xfer_ctx *c, const struct ixl_dlist *local,
                       const struct ixl_dlist *remote)
{
    unsigned t = c->id;
    memset(read_buf[t], 0x5A, BUF);
    uint64_t m0 = atomic_load(&meta_state);
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(init_a, IXL_OP_READ, local, remote, "targ", NULL, &x);
    if (rc != IXL_OK) {
        expect_meta_window(rc, m0, atomic_load(&meta_state));
        return;
    }
    uint64_t begun_after_create = atomic_load(&inval_begun);
    uint64_t done_before_post = atomic_load(&inval_done);
    rc = ixl_xfer_post(x);
    if (done_before_post > begun_after_create)
        CHECK_RC(rc, IXL_ERR_STALE);
    if (rc == IXL_ERR_STALE) {
        atomic_fetch_add(&n_stale_post, 1);
        expect_poison(read_buf[t], BUF, 0x5A, "READ refused at post");
        release(x);
        return;
    }
    atomic_fetch_add(&seen_posted[0], 1);
    rc = complete(init_a, x, (int)(rnd(&c->rng) % 3));
    saw_completion(0, rc);
    if (rc == IXL_ERR_REMOTE_DISCONNECT) {
        CHECK(atomic_load(&inval_begun) > done_before_post);
        atomic_fetch_add(&n_disconnect, 1);
    } else {
        CHECK_RC(rc, IXL_OK);
        /* local chunk i <- target chunk (i + rot), which holds source chunk i. */
        expect_bytes(read_buf[t], src_buf[t], BUF, "READ back");
        atomic_fetch_add(&n_reads_ok, 1);
    }
    release(x);
}

static void *xfer_main(void *arg)
{
    struct xfer_ctx *c = arg;
    unsigned t = c->id;
    struct ixl_dlist *local = list_of(src_buf[t], N_CHUNK, CHUNK, NULL);
    struct ixl_dlist *rlocal = list_of(read_buf[t], N_CHUNK, CHUNK, NULL);
    struct ixl_dlist *remote[N_CHUNK];
    for (unsigned rot = 0; rot < N_CHUNK; rot++) {
        unsigned order[N_CHUNK];
        for (unsigned i = 0; i < N_CHUNK; i++)
            order[i] = (i + rot) % N_CHUNK;
        remote[rot] = list_of(dst_buf[t], N_CHUNK, CHUNK, order);
    }
    while (!time_up() && c->seq + 8 < MAXSEQ) {
        unsigned rot = (unsigned)(rnd(&c->rng) % N_CHUNK);
        if (write_round(c, local, remote[rot], rot))
            read_round(c, rlocal, remote[rot]);
    }
    for (unsigned rot = 0; rot < N_CHUNK; rot++)
        ixl_dlist_destroy(remote[rot]);
    ixl_dlist_destroy(local);
    ixl_dlist_destroy(rlocal);
    return NULL;
}

/* ---- metadata churn ------------------------------------------------------------------------ */

static void load_into(struct ixl_agent *to, struct ixl_agent *from,
                      const struct ixl_md_params *params)
{
    void *blob = NULL;
    size_t len = 0;
    CHECK_RC(ixl_md_get(from, params, &blob, &len), IXL_OK);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(to, blob, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, ixl_agent_name(from)) == 0);
    ixl_free(blob);
}

static void load_partial(uint64_t *rng)
{
    /* A few of the transfer threads' target regions, or the prepared list's. */
    struct ixl_dlist *l = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 0, &l), IXL_OK);
    unsigned pick = (unsigned)(rnd(rng) % (1u << (N_XFER + 1)));
    for (unsigned t = 0; t < N_XFER + 1; t++) {
        if (!(pick & (1u << t)))
            continue;
        struct ixl_desc d = {t < N_XFER ? (uint64_t)(uintptr_t)dst_buf[t] + CHUNK
                                        : (uint64_t)(uintptr_t)prep_remote + BLOCK,
                             64, 0};
        CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    }
    struct ixl_md_params p = {.field_mask = IXL_MD_F_REGIONS, .regions = l};
    load_into(init_a, targ_a, &p);
    ixl_dlist_destroy(l);
}

static void setup_agent(const char *name, int progress_thread, struct ixl_agent **out);

static void start_peer(void)
{
    setup_agent("peer", 0, &peer_a);
    reg_one(peer_a, peer_buf, BUF, IXL_OK);
}

/* "peer" restarts: its new metadata replaces the old entry on "init", whose handles are then
 * refused, and the old metadata is refused as older; the new instance takes requests. */
static void restart_peer(uint64_t *rng, uint32_t round)
{
    struct ixl_dlist *l = list_of(meta_local, 1, BUF, NULL);
    struct ixl_dlist *r = list_of(peer_buf, 1, BUF, NULL);
    struct ixl_xfer *old = NULL;
    CHECK_RC(ixl_xfer_create(init_a, IXL_OP_WRITE, l, r, "peer", NULL, &old), IXL_OK);
    void *old_blob = NULL;
    size_t old_len = 0;
    CHECK_RC(ixl_md_get(peer_a, NULL, &old_blob, &old_len), IXL_OK);
    ixl_agent_destroy(peer_a);
    start_peer();
    load_into(init_a, peer_a, NULL);
    CHECK_RC(ixl_xfer_post(old), IXL_ERR_STALE);
    release(old);
    CHECK_RC(ixl_md_load(init_a, old_blob, old_len, NULL, 0), IXL_ERR_STALE);
    ixl_free(old_blob);

    fill(meta_local, BUF, ((uint64_t)K_COUNT << 56) | round);
    memset(peer_buf, 0x11, BUF);
    struct ixl_xfer *x = NULL;
    CHECK_RC(ixl_xfer_create(init_a, IXL_OP_WRITE, l, r, "peer", NULL, &x), IXL_OK);
    int rc = ixl_xfer_post(x);
    CHECK(rc == IXL_IN_PROGRESS || rc == IXL_OK);
    atomic_fetch_add(&seen_posted[0], 1);
    rc = complete(init_a, x, (int)(rnd(rng) % 3));
    saw_completion(0, rc);
    CHECK_RC(rc, IXL_OK);
    expect_bytes(peer_buf, meta_local, BUF, "WRITE to a restarted agent");
    release(x);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    atomic_fetch_add(&n_restarts, 1);
}

static void *meta_main(void *arg)
{
    uint64_t rng = 0x1234567u + (uintptr_t)arg;
    struct ixl_dlist *all = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 0, &all), IXL_OK);
    for (unsigned t = 0; t < N_XFER; t++) {
        struct ixl_desc d = {(uint64_t)(uintptr_t)dst_buf[t], BUF, 0};
        CHECK_RC(ixl_dlist_add(all, &d, 1), IXL_OK);
    }
    struct ixl_desc pd = {(uint64_t)(uintptr_t)prep_remote, sizeof(prep_remote), 0};
    CHECK_RC(ixl_dlist_add(all, &pd, 1), IXL_OK);
    int targ_knows_init = 1;
    uint32_t restarts = 0;
    while (!time_up()) {
        sleep_us(300 + (unsigned)(rnd(&rng) % 1200));
        switch (rnd(&rng) % 6) {
        case 0:
        case 1:
            /* Invalidate and reload: handles made before are refused from now on. */
            atomic_fetch_add(&meta_state, 1);
            atomic_fetch_add(&inval_begun, 1);
            CHECK_RC(ixl_remote_invalidate(init_a, "targ"), IXL_OK);
            atomic_fetch_add(&inval_done, 1);
            atomic_fetch_add(&n_invalidations, 1);
            CHECK_RC(ixl_remote_invalidate(init_a, "targ"), IXL_ERR_NOT_FOUND);
            CHECK_RC(ixl_remote_check(init_a, "targ", NULL), IXL_ERR_NOT_FOUND);
            sleep_us((unsigned)(rnd(&rng) % 400));
            if (rnd(&rng) % 2)
                load_partial(&rng); /* a fresh entry with some regions only */
            load_into(init_a, targ_a, NULL);
            CHECK_RC(ixl_remote_check(init_a, "targ", all), IXL_OK);
            atomic_fetch_add(&meta_state, 1);
            break;
        case 2:
            load_partial(&rng); /* incremental: adds nothing new */
            CHECK_RC(ixl_remote_check(init_a, "targ", all), IXL_OK);
            break;
        case 3:
            load_into(init_a, targ_a, NULL);
            CHECK_RC(ixl_remote_check(init_a, "targ", all), IXL_OK);
            CHECK_RC(ixl_remote_connect(init_a, "targ"), IXL_OK);
            break;
        case 4:
            /* The other direction, while "init" registers and deregisters. */
            if (targ_knows_init && rnd(&rng) % 2) {
                CHECK_RC(ixl_remote_invalidate(targ_a, "init"), IXL_OK);
                targ_knows_init = 0;
            } else {
                load_into(targ_a, init_a, NULL);
                targ_knows_init = 1;
            }
            break;
        case 5:
            restart_peer(&rng, ++restarts);
            break;
        }
    }
    ixl_dlist_destroy(all);
    return NULL;
}

/* ---- registration churn -------------------------------------------------------------------- */

static void *reg_main(void *arg)
{
    uint64_t rng = 0xabcdefu + (uintptr_t)arg;
    int on_init[N_SCRATCH] = {0}, on_targ[N_SCRATCH] = {0};
    uint32_t seq = 0;
    int second_backend = 0;
    uint64_t t_second = t_end_ns - (uint64_t)(run_seconds * 1e9 * 2 / 3);
    while (!time_up() && seq + 2 < MAXSEQ) {
        unsigned i = (unsigned)(rnd(&rng) % N_SCRATCH);
        unsigned j = (unsigned)(rnd(&rng) % N_SCRATCH);
        if (!second_backend && now_ns() >= t_second) {
            /* A backend created while the others run: later registrations use both. */
            struct ixl_kv opts[] = {{"delay_us", "30"}};
            CHECK_RC(ixl_backend_create(init_a, "TESTB", opts, 1, NULL), IXL_OK);
            CHECK_RC(ixl_backend_create(init_a, "TESTB", NULL, 0, NULL), IXL_ERR_EXISTS);
            CHECK(ixl_backend_count(init_a) == 2);
            second_backend = 1;
        }
        switch (rnd(&rng) % 9) {
        case 0:
        case 1:
        case 2: {
            /* Toggle a scratch region on one agent. */
            int targ = (int)(rnd(&rng) % 2);
            struct ixl_agent *a = targ ? targ_a : init_a;
            uint8_t *p = targ ? scratch_targ[i] : scratch_init[i];
            int *state = targ ? &on_targ[i] : &on_init[i];
            if (*state) {
                CHECK_RC(dereg_one(a, p, SCRATCH), IXL_OK);
                CHECK_RC(dereg_one(a, p, SCRATCH), IXL_ERR_NOT_FOUND);
            } else {
                reg_one(a, p, SCRATCH, IXL_OK);
                reg_one(a, p, SCRATCH, IXL_ERR_EXISTS);
            }
            *state = !*state;
            break;
        }
        case 3:
            /* A region nested in another (allowed), registered and deregistered. */
            if (!on_init[i])
                break;
            reg_one(init_a, scratch_init[i] + 64, 128, IXL_OK);
            CHECK_RC(dereg_one(init_a, scratch_init[i] + 64, 128), IXL_OK);
            break;
        case 4:
        case 5: {
            /* A live prepared list keeps its region registered. */
            if (!on_init[i]) {
                reg_one(init_a, scratch_init[i], SCRATCH, IXL_OK);
                on_init[i] = 1;
            }
            struct ixl_dlist *l = list_of(scratch_init[i] + 128, 4, 64, NULL);
            struct ixl_prep *pr = NULL;
            CHECK_RC(ixl_prep_create(init_a, NULL, l, NULL, &pr), IXL_OK);
            CHECK(ixl_prep_count(pr) == 4);
            CHECK_RC(dereg_one(init_a, scratch_init[i], SCRATCH), IXL_ERR_BUSY);
            ixl_prep_destroy(pr);
            ixl_dlist_destroy(l);
            if (rnd(&rng) % 2) {
                CHECK_RC(dereg_one(init_a, scratch_init[i], SCRATCH), IXL_OK);
                on_init[i] = 0;
            }
            break;
        }
        case 6:
        case 7: {
            /* A loopback WRITE on "init" between two scratch regions: both stay registered
             * while the request lives. */
            if (i == j)
                j = (i + 1) % N_SCRATCH;
            for (unsigned k = 0; k < 2; k++) {
                unsigned s = k ? j : i;
                if (!on_init[s]) {
                    reg_one(init_a, scratch_init[s], SCRATCH, IXL_OK);
                    on_init[s] = 1;
                }
            }
            uint32_t sq = ++seq;
            uint64_t tag = ((uint64_t)K_REG << 56) | sq;
            fill(scratch_init[i], SCRATCH, tag);
            memset(scratch_init[j], 0xC3, SCRATCH);
            struct ixl_dlist *l = list_of(scratch_init[i], 2, SCRATCH / 2, NULL);
            unsigned order[2] = {1, 0};
            struct ixl_dlist *r = list_of(scratch_init[j], 2, SCRATCH / 2, order);
            struct msg m;
            struct ixl_xfer_params p;
            notif_params(&p, &m, K_REG, 0, sq);
            struct ixl_xfer *x = NULL;
            CHECK_RC(ixl_xfer_create(init_a, IXL_OP_WRITE, l, r, "init", &p, &x), IXL_OK);
            ixl_dlist_destroy(l);
            ixl_dlist_destroy(r);
            CHECK_RC(dereg_one(init_a, scratch_init[i], SCRATCH), IXL_ERR_BUSY);
            CHECK_RC(dereg_one(init_a, scratch_init[j], SCRATCH), IXL_ERR_BUSY);
            int rc = ixl_xfer_post(x);
            CHECK(rc == IXL_IN_PROGRESS || rc == IXL_OK);
            atomic_fetch_add(&seen_posted[0], 1);
            CHECK_RC(dereg_one(init_a, scratch_init[i], SCRATCH), IXL_ERR_BUSY);
            rc = complete(init_a, x, (int)(rnd(&rng) % 3));
            saw_completion(0, rc);
            CHECK_RC(rc, IXL_OK);
            fate[K_REG][0][sq] = F_ONCE;
            expect_bytes(scratch_init[j], scratch_init[i] + SCRATCH / 2, SCRATCH / 2,
                         "loopback first half");
            expect_bytes(scratch_init[j] + SCRATCH / 2, scratch_init[i], SCRATCH / 2,
                         "loopback second half");
            CHECK_RC(dereg_one(init_a, scratch_init[j], SCRATCH), IXL_ERR_BUSY);
            release(x);
            if (rnd(&rng) % 2) {
                CHECK_RC(dereg_one(init_a, scratch_init[j], SCRATCH), IXL_OK);
                on_init[j] = 0;
            }
            break;
        }
        case 8: {
            /* Memory from the backend: registered memory cannot be freed. */
            void *mem = NULL;
            CHECK_RC(ixl_mem_alloc(targ_a, IXL_MEM_DRAM, 8192, NULL, &mem), IXL_OK);
            reg_one(targ_a, mem, 8192, IXL_OK);
            CHECK_RC(ixl_mem_free(targ_a, mem), IXL_ERR_BUSY);
            CHECK_RC(dereg_one(targ_a, mem, 8192), IXL_OK);
            CHECK_RC(ixl_mem_free(targ_a, mem), IXL_OK);
            CHECK_RC(ixl_mem_free(targ_a, mem), IXL_ERR_NOT_FOUND);
            break;
        }
        }
    }
    CHECK(second_backend || time_up());
    for (unsigned i = 0; i < N_SCRATCH; i++) {
        if (on_init[i])
            CHECK_RC(dereg_one(init_a, scratch_init[i], SCRATCH), IXL_OK);
        if (on_targ[i])
            CHECK_RC(dereg_one(targ_a, scratch_targ[i], SCRATCH), IXL_OK);
    }
    return NULL;
}

/* ---- prepared lists -------------------------------------------------------------------------- */

static void *prep_main(void *arg)
{
    uint64_t rng = 0x777u + (uintptr_t)arg;
    struct ixl_dlist *ll = list_of(prep_local, N_BLOCK, BLOCK, NULL);
    struct ixl_dlist *rl = list_of(prep_remote, N_BLOCK, BLOCK, NULL);
    struct ixl_prep *lp = NULL, *rp = NULL;
    CHECK_RC(ixl_prep_create(init_a, NULL, ll, NULL, &lp), IXL_OK);
    CHECK(ixl_prep_count(lp) == N_BLOCK);
    uint64_t begun_after_prep = 0, done_before_prep = 0;
    uint32_t seq = 0;
    while (!time_up() && seq + 2 < MAXSEQ) {
        if (rp == NULL) {
            uint64_t m0 = atomic_load(&meta_state);
            done_before_prep = atomic_load(&inval_done);
            int rc = ixl_prep_create(init_a, "targ", rl, NULL, &rp);
            if (rc != IXL_OK) {
                expect_meta_window(rc, m0, atomic_load(&meta_state));
                rp = NULL;
                sleep_us(100);
                continue;
            }
            begun_after_prep = atomic_load(&inval_begun);
        }
        /* n pairs: distinct target blocks, any local blocks. */
        unsigned n = 1 + (unsigned)(rnd(&rng) % 8);
        int64_t li[8], ri[8];
        unsigned perm[N_BLOCK];
        for (unsigned k = 0; k < N_BLOCK; k++)
            perm[k] = k;
        for (unsigned k = 0; k < n; k++) {
            unsigned s = k + (unsigned)(rnd(&rng) % (N_BLOCK - k));
            unsigned tmp = perm[k];
            perm[k] = perm[s];
            perm[s] = tmp;
            ri[k] = perm[k];
            li[k] = (int64_t)(rnd(&rng) % N_BLOCK);
        }
        if (rnd(&rng) % 4 == 0) { /* consecutive indices on both sides: merged */
            unsigned base = (unsigned)(rnd(&rng) % (N_BLOCK - n + 1));
            for (unsigned k = 0; k < n; k++)
                li[k] = ri[k] = base + k;
        }
        uint32_t sq = ++seq;
        fill(prep_local, sizeof(prep_local), ((uint64_t)K_PREP << 56) | sq);
        memcpy(prep_expect, prep_local, sizeof(prep_local));
        memset(prep_remote, 0x3C, sizeof(prep_remote));
        struct msg m;
        struct ixl_xfer_params p;
        notif_params(&p, &m, K_PREP, 0, sq);
        uint64_t done_before = atomic_load(&inval_done);
        struct ixl_xfer *x = NULL;
        int rc = ixl_xfer_create_prepped(init_a, IXL_OP_WRITE, lp, li, rp, ri, n, &p, &x);
        if (done_before > begun_after_prep)
            CHECK_RC(rc, IXL_ERR_STALE);
        if (rc == IXL_ERR_STALE) {
            CHECK(atomic_load(&inval_begun) > done_before_prep);
            atomic_fetch_add(&n_stale_create, 1);
            ixl_prep_destroy(rp);
            rp = NULL;
            continue;
        }
        CHECK_RC(rc, IXL_OK);
        done_before = atomic_load(&inval_done);
        rc = ixl_xfer_post(x);
        if (done_before > begun_after_prep)
            CHECK_RC(rc, IXL_ERR_STALE);
        if (rc == IXL_ERR_STALE) {
            atomic_fetch_add(&n_stale_post, 1);
            release(x);
            ixl_prep_destroy(rp);
            rp = NULL;
            continue;
        }
        atomic_fetch_add(&seen_posted[0], 1);
        rc = complete(init_a, x, (int)(rnd(&rng) % 3));
        saw_completion(0, rc);
        release(x);
        if (rc == IXL_ERR_REMOTE_DISCONNECT) {
            CHECK(atomic_load(&inval_begun) > done_before);
            atomic_fetch_add(&n_disconnect, 1);
            expect_poison(prep_remote, sizeof(prep_remote), 0x3C, "failed prepped WRITE");
            continue;
        }
        CHECK_RC(rc, IXL_OK);
        fate[K_PREP][0][sq] = F_ONCE;
        /* Target block ri[k] holds local block li[k]; the others were not touched. */
        uint8_t touched[N_BLOCK] = {0};
        for (unsigned k = 0; k < n; k++) {
            expect_bytes(prep_remote + ri[k] * BLOCK, prep_expect + li[k] * BLOCK, BLOCK,
                         "prepped WRITE block");
            touched[ri[k]] = 1;
        }
        for (unsigned b = 0; b < N_BLOCK; b++)
            if (!touched[b])
                expect_poison(prep_remote + b * BLOCK, BLOCK, 0x3C, "block outside the indices");
        atomic_fetch_add(&n_prepped_ok, 1);

        /* READ the same pairs back into poisoned local blocks. */
        memset(prep_local, 0x4B, sizeof(prep_local));
        done_before = atomic_load(&inval_done);
        rc = ixl_xfer_create_prepped(init_a, IXL_OP_READ, lp, ri, rp, ri, n, NULL, &x);
        if (done_before > begun_after_prep)
            CHECK_RC(rc, IXL_ERR_STALE);
        if (rc == IXL_OK) {
            done_before = atomic_load(&inval_done);
            rc = ixl_xfer_post(x);
            if (done_before > begun_after_prep)
                CHECK_RC(rc, IXL_ERR_STALE);
            if (rc != IXL_ERR_STALE) {
                atomic_fetch_add(&seen_posted[0], 1);
                rc = complete(init_a, x, (int)(rnd(&rng) % 3));
                saw_completion(0, rc);
                if (rc == IXL_OK) {
                    for (unsigned k = 0; k < n; k++)
                        expect_bytes(prep_local + ri[k] * BLOCK, prep_expect + li[k] * BLOCK, BLOCK,
                                     "prepped READ block");
                    atomic_fetch_add(&n_reads_ok, 1);
                } else {
                    CHECK_RC(rc, IXL_ERR_REMOTE_DISCONNECT);
                    CHECK(atomic_load(&inval_begun) > done_before);
                }
            }
            release(x);
        } else {
            CHECK_RC(rc, IXL_ERR_STALE);
        }
        if (rc == IXL_ERR_STALE || rnd(&rng) % 16 == 0) {
            ixl_prep_destroy(rp);
            rp = NULL;
        }
        if (rnd(&rng) % 32 == 0) {
            ixl_prep_destroy(lp);
            CHECK_RC(ixl_prep_create(init_a, NULL, ll, NULL, &lp), IXL_OK);
        }
    }
    ixl_prep_destroy(rp);
    ixl_prep_destroy(lp);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    return NULL;
}

/* ---- notifications ------------------------------------------------------------------------- */

static void take(struct ixl_notif_batch *b, const char *who)
{
    for (size_t i = 0; b && i < b->count; i++) {
        const struct ixl_notif *n = &b->items[i];
        struct msg m;
        if (n->len != sizeof(m))
            check_fail(__FILE__, __LINE__, "%s drained a notification of %zu bytes", who, n->len);
        memcpy(&m, n->msg, sizeof(m));
        CHECK(m.magic == NOTIF_MAGIC);
        CHECK(m.kind < K_COUNT && m.thread < N_XFER && m.seq > 0 && m.seq < MAXSEQ);
        if (strcmp(n->agent, kind_sender[m.kind]) != 0)
            check_fail(__FILE__, __LINE__, "%s notification %u from '%s', want '%s'",
                       kind_name[m.kind], m.seq, n->agent, kind_sender[m.kind]);
        /* One thread's requests run one after the other: arrival order is sequence order, so a
         * duplicate shows up as a sequence number that does not grow. */
        if (m.seq <= last_seq[m.kind][m.thread])
            check_fail(__FILE__, __LINE__,
                       "%s notification (thread %u, seq %u) after seq %u: duplicated or "
                       "reordered",
                       kind_name[m.kind], m.thread, m.seq, last_seq[m.kind][m.thread]);
        last_seq[m.kind][m.thread] = m.seq;
        received[m.kind][m.thread][m.seq]++;
    }
}

static void drain_both(void)
{
    struct ixl_notif_batch *b = NULL;
    CHECK_RC(ixl_notif_drain(targ_a, &b), IXL_OK);
    if (b) {
        drained_targ += b->count;
        take(b, "targ");
        ixl_free(b);
    }
    b = NULL;
    CHECK_RC(ixl_notif_drain(init_a, &b), IXL_OK);
    if (b) {
        drained_init += b->count;
        take(b, "init");
        ixl_free(b);
    }
}

static void *notif_main(void *arg)
{
    (void)arg;
    int fd = -1;
    CHECK_RC(ixl_agent_fd(targ_a, &fd), IXL_OK);
    uint32_t seq = 0;
    while (!time_up()) {
        drain_both();
        if (seq + 2 < MAXSEQ) {
            uint32_t sq = ++seq;
            struct msg m = {NOTIF_MAGIC, K_SEND, 0, sq};
            uint64_t m0 = atomic_load(&meta_state);
            int rc = ixl_notif_send(init_a, "targ", &m, sizeof(m), NULL);
            if (rc == IXL_OK) {
                fate[K_SEND][0][sq] = F_ONCE;
                atomic_fetch_add(&n_sends_ok, 1);
            } else {
                expect_meta_window(rc, m0, atomic_load(&meta_state));
            }
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        CHECK(poll(&pfd, 1, 1) >= 0);
    }
    return NULL;
}

/* ---- monitor ------------------------------------------------------------------------------- */

static void stats_ok(struct ixl_agent *a, struct ixl_agent_stats *prev)
{
    struct ixl_agent_stats s1 = {.size = sizeof(s1)}, s2 = {.size = sizeof(s2)};
    CHECK_RC(ixl_agent_stats(a, &s1), IXL_OK);
    CHECK_RC(ixl_agent_stats(a, &s2), IXL_OK);
    /* Each post ends at most once: what ended so far cannot exceed what was posted later. */
    if (s1.completed + s1.failed > s2.posted)
        check_fail(__FILE__, __LINE__,
                   "agent %s: %llu completed + %llu failed > %llu posted: a post ended twice",
                   ixl_agent_name(a), (unsigned long long)s1.completed,
                   (unsigned long long)s1.failed, (unsigned long long)s2.posted);
    CHECK(s1.posted >= prev->posted && s1.completed >= prev->completed &&
          s1.failed >= prev->failed && s1.bytes >= prev->bytes &&
          s1.notifs_received >= prev->notifs_received && s1.notifs_sent >= prev->notifs_sent);
    *prev = s2;
}

static void loopback_targ(uint32_t sq, int mode)
{
    fill(mon_a, BUF, ((uint64_t)K_LOOP << 56) | sq);
    memset(mon_b, 0x69, BUF);
    struct ixl_dlist *l = list_of(mon_a, N_CHUNK, CHUNK, NULL);
    struct ixl_dlist *r = list_of(mon_b, N_CHUNK, CHUNK, NULL);
    struct msg m;
    struct ixl_xfer_params p;
    notif_params(&p, &m, K_LOOP, 0, sq);
    struct ixl_xfer *x = NULL;
    CHECK_RC(ixl_xfer_create(targ_a, IXL_OP_WRITE, l, r, "targ", &p, &x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    struct ixl_xfer_telemetry tm = {.size = sizeof(tm)};
    CHECK_RC(ixl_xfer_telemetry(x, &tm), IXL_ERR_NOT_POSTED);
    int rc = ixl_xfer_post(x);
    CHECK(rc == IXL_IN_PROGRESS || rc == IXL_OK);
    atomic_fetch_add(&seen_posted[1], 1);
    rc = complete(targ_a, x, mode);
    saw_completion(1, rc);
    CHECK_RC(rc, IXL_OK);
    fate[K_LOOP][0][sq] = F_ONCE;
    expect_bytes(mon_b, mon_a, BUF, "loopback on targ");
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(strcmp(info.backend, "TEST") == 0);
    CHECK(info.bytes == BUF && info.desc_count == 1); /* adjacent pairs merged */
    CHECK_STR_HAS(info.path, "memcpy");
    CHECK_RC(ixl_xfer_telemetry(x, &tm), IXL_OK);
    CHECK(tm.post_count == 1 && tm.bytes == BUF && tm.desc_count == 1);
    struct ixl_cost cost = {.size = sizeof(cost)};
    CHECK_RC(ixl_xfer_estimate(x, &cost), IXL_OK);
    release(x);
    atomic_fetch_add(&n_loop_ok, 1);
}

static void *monitor_main(void *arg)
{
    (void)arg;
    struct ixl_agent_stats prev_i = {.size = sizeof(prev_i)}, prev_t = {.size = sizeof(prev_t)};
    struct pollfd pfd[2] = {{.events = POLLIN}, {.events = POLLIN}};
    CHECK_RC(ixl_agent_fd(init_a, &pfd[0].fd), IXL_OK);
    CHECK_RC(ixl_agent_fd(targ_a, &pfd[1].fd), IXL_OK);
    uint32_t seq = 0;
    for (unsigned it = 0; !time_up(); it++) {
        CHECK(poll(pfd, 2, 2) >= 0);
        CHECK_RC(ixl_agent_progress(init_a), IXL_OK);
        CHECK_RC(ixl_agent_progress(targ_a), IXL_OK);
        stats_ok(init_a, &prev_i);
        stats_ok(targ_a, &prev_t);
        for (unsigned t = 0; cross_status && t < N_XFER; t++) {
            pthread_mutex_lock(&pub[t].lock);
            if (pub[t].x != NULL) {
                int rc = (it & 1) ? ixl_xfer_status(pub[t].x) : ixl_xfer_wait(pub[t].x, 1);
                if (!(rc == IXL_OK || rc == IXL_IN_PROGRESS || rc == IXL_ERR_TIMEOUT ||
                      rc == IXL_ERR_REMOTE_DISCONNECT))
                    check_fail(__FILE__, __LINE__, "status of another thread's request: %s",
                               ixl_strerror(rc));
                atomic_fetch_add(&n_cross_status, 1);
            }
            pthread_mutex_unlock(&pub[t].lock);
        }
        if (it % 4 == 0 && seq + 2 < MAXSEQ)
            loopback_targ(++seq, (int)((it / 4) % 3));
    }
    return NULL;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void setup_agent(const char *name, int progress_thread, struct ixl_agent **out)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_PROGRESS_THREAD,
                                 .backends = "",
                                 .progress_thread = progress_thread};
    CHECK_RC(ixl_agent_create(name, &p, out), IXL_OK);
    /* Posts go through the backend's worker thread, so requests are really in flight; an
     * in-flight release answers IXL_ERR_BUSY once before it cancels. */
    struct ixl_kv opts[] = {{"delay_us", "50"}, {"release_busy", "1"}};
    CHECK_RC(ixl_backend_create(*out, "TEST", opts, 2, NULL), IXL_OK);
}

static void final_checks(void)
{
    /* Every request was released before its thread ended, so every notification that will
     * ever arrive is queued: drain until the expected ones are in, for at most 5 s. */
    uint64_t deadline = now_ns() + 5000000000ull;
    for (;;) {
        drain_both();
        int missing = 0;
        for (int k = 0; k < K_COUNT && !missing; k++)
            for (int t = 0; t < N_XFER && !missing; t++)
                for (uint32_t s = 1; s < MAXSEQ && !missing; s++)
                    missing = fate[k][t][s] == F_ONCE && received[k][t][s] == 0;
        if (!missing || now_ns() > deadline)
            break;
        sleep_us(1000);
    }
    uint64_t once = 0, may = 0, may_got = 0;
    for (int k = 0; k < K_COUNT; k++) {
        for (int t = 0; t < N_XFER; t++) {
            for (uint32_t s = 1; s < MAXSEQ; s++) {
                unsigned got = received[k][t][s];
                switch ((enum fate)fate[k][t][s]) {
                case F_ONCE:
                    once++;
                    if (got != 1)
                        check_fail(__FILE__, __LINE__,
                                   "%s notification (thread %d, seq %u) of a completed request "
                                   "arrived %u times, want once",
                                   kind_name[k], t, s, got);
                    break;
                case F_MAY:
                    may++;
                    may_got += got;
                    CHECK(got <= 1);
                    break;
                case F_NEVER:
                    if (got != 0)
                        check_fail(__FILE__, __LINE__,
                                   "%s notification (thread %d, seq %u) arrived %u times, but its "
                                   "request was never posted or failed",
                                   kind_name[k], t, s, got);
                    break;
                }
            }
        }
    }

    /* The agents' counters agree with what the threads saw. */
    struct ixl_agent *agents[2] = {init_a, targ_a};
    for (int a = 0; a < 2; a++) {
        struct ixl_agent_stats s = {.size = sizeof(s)};
        CHECK_RC(ixl_agent_stats(agents[a], &s), IXL_OK);
        uint64_t posted = atomic_load(&seen_posted[a]), ok = atomic_load(&seen_ok[a]);
        uint64_t failed = atomic_load(&seen_failed[a]);
        uint64_t loose = atomic_load(&seen_released_inflight[a]);
        if (s.posted != posted || s.completed < ok || s.completed > ok + loose ||
            s.failed < failed || s.failed > failed + loose)
            check_fail(__FILE__, __LINE__,
                       "agent %s counters: posted %llu completed %llu failed %llu; the threads "
                       "posted %llu, saw %llu complete and %llu fail, released %llu in flight",
                       ixl_agent_name(agents[a]), (unsigned long long)s.posted,
                       (unsigned long long)s.completed, (unsigned long long)s.failed,
                       (unsigned long long)posted, (unsigned long long)ok,
                       (unsigned long long)failed, (unsigned long long)loose);
    }
    struct ixl_agent_stats si = {.size = sizeof(si)}, st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(init_a, &si), IXL_OK);
    CHECK_RC(ixl_agent_stats(targ_a, &st), IXL_OK);
    CHECK(si.notifs_sent == atomic_load(&n_sends_ok));
    CHECK(st.notifs_received == drained_targ);
    CHECK(si.notifs_received == drained_init);

    printf("writes %llu (reposts %llu), reads %llu, prepped %llu, loopback %llu, sends %llu; "
           "notifications: %llu exactly once, %llu of %llu released requests arrived; "
           "invalidations %llu, STALE at post %llu / at create %llu, disconnects %llu, lookups "
           "during reload %llu, released in flight %llu, BUSY releases %llu, cross-thread "
           "status %llu, restarts %llu\n",
           (unsigned long long)n_writes_ok, (unsigned long long)n_reposts,
           (unsigned long long)n_reads_ok, (unsigned long long)n_prepped_ok,
           (unsigned long long)n_loop_ok, (unsigned long long)n_sends_ok, (unsigned long long)once,
           (unsigned long long)may_got, (unsigned long long)may,
           (unsigned long long)n_invalidations, (unsigned long long)n_stale_post,
           (unsigned long long)n_stale_create, (unsigned long long)n_disconnect,
           (unsigned long long)n_meta_miss, (unsigned long long)n_canceled,
           (unsigned long long)n_busy, (unsigned long long)n_cross_status,
           (unsigned long long)n_restarts);
    /* The mix really ran: every thread made progress. */
    CHECK(n_writes_ok > 0 && n_reads_ok > 0 && n_prepped_ok > 0 && n_loop_ok > 0);
    CHECK(n_sends_ok > 0 && n_invalidations > 0);
}

int main(int argc, char **argv)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--own-status-only") == 0)
            cross_status = 0;
        else if (atof(argv[i]) > 0)
            run_seconds = atof(argv[i]);
    }
    signal(SIGALRM, on_alarm);
    alarm((unsigned)run_seconds + 90); /* a hang is a failure; bench/stress.sh runs 60 s */
    ixl_log_set_sink(quiet, NULL);
    for (int t = 0; t < N_XFER; t++)
        pthread_mutex_init(&pub[t].lock, NULL);

    setup_agent("init", 0, &init_a);
    setup_agent("targ", 1, &targ_a);
    for (int t = 0; t < N_XFER; t++) {
        reg_one(init_a, src_buf[t], BUF, IXL_OK);
        reg_one(init_a, read_buf[t], BUF, IXL_OK);
        reg_one(targ_a, dst_buf[t], BUF, IXL_OK);
    }
    reg_one(init_a, prep_local, sizeof(prep_local), IXL_OK);
    reg_one(targ_a, prep_remote, sizeof(prep_remote), IXL_OK);
    reg_one(targ_a, mon_a, BUF, IXL_OK);
    reg_one(targ_a, mon_b, BUF, IXL_OK);
    reg_one(init_a, meta_local, BUF, IXL_OK);
    start_peer();
    load_into(init_a, peer_a, NULL);
    load_into(init_a, targ_a, NULL);
    load_into(targ_a, init_a, NULL);

    t_end_ns = now_ns() + (uint64_t)(run_seconds * 1e9);
    pthread_t th[N_XFER + 5];
    struct xfer_ctx xc[N_XFER];
    int n = 0;
    for (unsigned t = 0; t < N_XFER; t++) {
        xc[t] = (struct xfer_ctx){.id = t, .seq = 0, .rng = 0x9e3779b9u * (t + 1)};
        CHECK(pthread_create(&th[n++], NULL, xfer_main, &xc[t]) == 0);
    }
    CHECK(pthread_create(&th[n++], NULL, meta_main, NULL) == 0);
    CHECK(pthread_create(&th[n++], NULL, reg_main, NULL) == 0);
    CHECK(pthread_create(&th[n++], NULL, prep_main, NULL) == 0);
    CHECK(pthread_create(&th[n++], NULL, notif_main, NULL) == 0);
    CHECK(pthread_create(&th[n++], NULL, monitor_main, NULL) == 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);

    final_checks();

    /* The long-lived registrations go; what is left is the destroy's to clean up. */
    for (int t = 0; t < N_XFER; t++) {
        CHECK_RC(dereg_one(init_a, src_buf[t], BUF), IXL_OK);
        CHECK_RC(dereg_one(targ_a, dst_buf[t], BUF), IXL_OK);
    }
    ixl_agent_destroy(init_a);
    ixl_agent_destroy(targ_a);
    ixl_agent_destroy(peer_a);
    for (int t = 0; t < N_XFER; t++)
        pthread_mutex_destroy(&pub[t].lock);
    ixl_log_set_sink(NULL, NULL);
    printf("ok\n");
    return 0;
}

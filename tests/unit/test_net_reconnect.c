/*
 * NET over TCP while the peer is invalidated and reloaded (issue 15): two agents in this
 * process, "ra" (initiator) and "rb" (target), NET with path=tcp. For a few seconds (3 s unless
 * told otherwise) 8 threads post WRITEs ra -> rb with a notification each, while one thread
 * invalidates rb on ra (ixl_remote_invalidate: NET tears the connections down) and loads its
 * metadata again (the next post reconnects and buries the torn-down connections).
 *
 * A notification whose send fails on a torn-down connection used to touch the connection after
 * dropping its reference (net_send_notif: conn_fail after users--), while a reconnect's
 * net_peer_bury freed it: a use-after-free, and a shutdown() of a descriptor that may have been
 * closed and reused. This test reproduces that window under AddressSanitizer: to make it
 * likely, a sendmsg hook (ixl_syscall_set) holds every NOTIF frame for NOTIF_DELAY_US before
 * sending it, so that the churn tears the connection down and a writer's post reconnects and
 * waits in net_peer_bury for the notification's reference while the send is still under way.
 *
 * Failures a churn can cause are expected and handled (the request is released and made again):
 * ixl_xfer_create IXL_ERR_NOT_FOUND (rb not loaded), post or completion IXL_ERR_STALE or
 * IXL_ERR_REMOTE_DISCONNECT. Every request is released and the release must succeed. A WRITE
 * that completes must have put its bytes in place, and its notification must arrive exactly
 * once; a failed one's at most once; every notification is well formed and from "ra". A hang is
 * a failure (alarm).
 *
 * Usage: test_net_reconnect [seconds]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_wire.h"

#define N_THREADS 8
#define SLOTS 16          /* destination slots per thread, used in turn */
#define SLOT (16u << 10)  /* bytes per WRITE */
#define MAXSEQ (1u << 18) /* sequence numbers a thread may use */
#define NOTIF_MAGIC 0x4e524e43u
#define NOTIF_DELAY_US 1000

struct msg {
    uint32_t magic, thread, seq;
};

static struct ixl_agent *ra, *rb;
static uint8_t *src, *dst; /* src: N_THREADS * SLOT on ra; dst: N_THREADS * SLOTS * SLOT on rb */
static atomic_int stop;
static atomic_uint_fast64_t n_ok, n_failed, n_create_nf, n_inval;
static uint8_t ok_seq[N_THREADS][MAXSEQ / 8]; /* requests that completed IXL_OK */
static uint8_t recv_count[N_THREADS][MAXSEQ]; /* notifications received (drainer only) */
static pthread_mutex_t ok_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_sendmsg)(int fd, const struct msghdr *m, int flags);
static atomic_uint_fast64_t n_notif_sends;

/* NET's sendmsg: a NOTIF frame (its header's op byte, net_wire.h) waits a little first. */
static ssize_t slow_notif_sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (m->msg_iovlen > 0 && m->msg_iov[0].iov_len >= NET_HDR_BYTES &&
        ((const uint8_t *)m->msg_iov[0].iov_base)[5] == NET_NOTIF) {
        atomic_fetch_add(&n_notif_sends, 1);
        struct timespec ts = {0, NOTIF_DELAY_US * 1000};
        nanosleep(&ts, NULL);
    }
    return real_sendmsg(fd, m, flags);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint8_t pattern(unsigned t, uint32_t seq, size_t i)
{
    return (uint8_t)(t * 31u + seq * 7u + i * 13u + (i >> 8));
}

static struct ixl_dlist *dlist1(const void *addr, size_t len)
{
    struct ixl_dlist *l = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uint64_t)(uintptr_t)addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static void release(struct ixl_xfer *x)
{
    /* A request that is not in flight releases at once; one that is may answer IXL_ERR_BUSY
     * once before it is canceled. */
    int rc = IXL_ERR_BUSY;
    for (int i = 0; i < 1000 && rc == IXL_ERR_BUSY; i++) {
        rc = ixl_xfer_release(x);
        if (rc == IXL_ERR_BUSY)
            sleep_us(1000);
    }
    CHECK_RC(rc, IXL_OK);
}

static int churn_error(int rc)
{
    return rc == IXL_ERR_STALE || rc == IXL_ERR_REMOTE_DISCONNECT;
}

static void *writer_main(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (t + 1);
    uint8_t *s = src + (size_t)t * SLOT;
    uint32_t seq = 0;
    while (!atomic_load(&stop) && seq + 1 < MAXSEQ) {
        seq++;
        unsigned slot = seq % SLOTS;
        uint8_t *d = dst + ((size_t)t * SLOTS + slot) * SLOT;
        for (size_t i = 0; i < SLOT; i++)
            s[i] = pattern(t, seq, i);
        struct ixl_dlist *l = dlist1(s, SLOT), *r = dlist1(d, SLOT);
        struct msg m = {NOTIF_MAGIC, t, seq};
        struct ixl_xfer_params p = {
            .field_mask = IXL_XFER_F_NOTIF, .notif = &m, .notif_len = sizeof(m)};
        struct ixl_xfer *x = NULL;
        int rc = ixl_xfer_create(ra, IXL_OP_WRITE, l, r, "rb", &p, &x);
        ixl_dlist_destroy(l);
        ixl_dlist_destroy(r);
        if (rc == IXL_ERR_NOT_FOUND) { /* rb is invalidated right now */
            atomic_fetch_add(&n_create_nf, 1);
            sleep_us((unsigned)(rnd(&rng) % 200));
            continue;
        }
        CHECK_RC(rc, IXL_OK);
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS) {
            rc = ixl_xfer_wait(x, 20000);
            if (rc == IXL_IN_PROGRESS)
                check_fail(__FILE__, __LINE__, "thread %u seq %u: no completion in 20 s", t, seq);
        }
        if (rc == IXL_OK) {
            /* The notification is sent after every byte is in place. */
            for (size_t i = 0; i < SLOT; i++)
                if (d[i] != pattern(t, seq, i))
                    check_fail(__FILE__, __LINE__,
                               "thread %u seq %u: byte %zu is 0x%02x, want 0x%02x", t, seq, i, d[i],
                               pattern(t, seq, i));
            pthread_mutex_lock(&ok_lock);
            ok_seq[t][seq / 8] |= (uint8_t)(1u << (seq % 8));
            pthread_mutex_unlock(&ok_lock);
            atomic_fetch_add(&n_ok, 1);
        } else if (churn_error(rc)) {
            atomic_fetch_add(&n_failed, 1);
        } else {
            check_fail(__FILE__, __LINE__, "thread %u seq %u: post/completion gave %d (%s): %s", t,
                       seq, rc, ixl_strerror(rc), ixl_agent_last_error(ra));
        }
        release(x);
    }
    return NULL;
}

static void load_rb(void)
{
    void *blob = NULL;
    size_t len = 0;
    CHECK_RC(ixl_md_get(rb, NULL, &blob, &len), IXL_OK);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(ra, blob, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, "rb") == 0);
    ixl_free(blob);
}

static void *churn_main(void *arg)
{
    (void)arg;
    uint64_t rng = 12345;
    while (!atomic_load(&stop)) {
        /* Mostly short gaps (a teardown during a notification's send), now and then a quiet
         * while in which WRITEs complete. */
        sleep_us(rnd(&rng) % 4 == 0 ? 10000 : 100 + (unsigned)(rnd(&rng) % 3000));
        CHECK_RC(ixl_remote_invalidate(ra, "rb"), IXL_OK);
        atomic_fetch_add(&n_inval, 1);
        sleep_us((unsigned)(rnd(&rng) % 200));
        load_rb();
    }
    return NULL;
}

static uint64_t drain(void)
{
    struct ixl_notif_batch *b = NULL;
    CHECK_RC(ixl_notif_drain(rb, &b), IXL_OK);
    uint64_t n = 0;
    for (size_t i = 0; b && i < b->count; i++) {
        const struct ixl_notif *nf = &b->items[i];
        struct msg m;
        if (nf->len != sizeof(m))
            check_fail(__FILE__, __LINE__, "a notification of %zu bytes", nf->len);
        memcpy(&m, nf->msg, sizeof(m));
        CHECK(m.magic == NOTIF_MAGIC && m.thread < N_THREADS && m.seq > 0 && m.seq < MAXSEQ);
        if (strcmp(nf->agent, "ra") != 0)
            check_fail(__FILE__, __LINE__, "a notification from '%s'", nf->agent);
        if (recv_count[m.thread][m.seq]++ != 0)
            check_fail(__FILE__, __LINE__, "thread %u seq %u: notification delivered twice",
                       m.thread, m.seq);
        n++;
    }
    ixl_free(b);
    return n;
}

static void make_agent(const char *name, struct ixl_agent **out)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create(name, &ap, out), IXL_OK);
    struct ixl_kv kv[] = {{"path", "tcp"}, {"conns", "2"}, {"timeout_ms", "5000"}};
    CHECK_RC(ixl_backend_create(*out, "NET", kv, 3, NULL), IXL_OK);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    alarm((unsigned)seconds + 90); /* a hang is a failure */
    src = calloc(N_THREADS, SLOT);
    dst = calloc((size_t)N_THREADS * SLOTS, SLOT);
    CHECK(src != NULL && dst != NULL);
    real_sendmsg = (ssize_t(*)(int, const struct msghdr *, int))ixl_syscall_get("sendmsg");
    CHECK(real_sendmsg != NULL);
    CHECK_RC(ixl_syscall_set("sendmsg", (ixl_syscall_fn)slow_notif_sendmsg), IXL_OK);
    make_agent("ra", &ra);
    make_agent("rb", &rb);
    struct ixl_reg_desc da = {(uint64_t)(uintptr_t)src, (uint64_t)N_THREADS * SLOT, 0, NULL, 0};
    struct ixl_reg_desc db = {(uint64_t)(uintptr_t)dst, (uint64_t)N_THREADS * SLOTS * SLOT, 0, NULL,
                              0};
    CHECK_RC(ixl_mem_register(ra, IXL_MEM_DRAM, &da, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(rb, IXL_MEM_DRAM, &db, 1, NULL), IXL_OK);
    load_rb();

    pthread_t w[N_THREADS], c;
    for (unsigned t = 0; t < N_THREADS; t++)
        CHECK(pthread_create(&w[t], NULL, writer_main, (void *)(uintptr_t)t) == 0);
    CHECK(pthread_create(&c, NULL, churn_main, NULL) == 0);
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), received = 0;
    while (now_ns() < end) {
        received += drain();
        sleep_us(2000);
    }
    atomic_store(&stop, 1);
    for (unsigned t = 0; t < N_THREADS; t++)
        pthread_join(w[t], NULL);
    pthread_join(c, NULL);

    /* Every request is released: the notifications of those that completed are on their way
     * (sent before completion), so they all arrive; wait at most 10 s. */
    uint64_t missing = 0, deadline = now_ns() + 10000000000ull;
    for (;;) {
        received += drain();
        missing = 0;
        for (unsigned t = 0; t < N_THREADS; t++)
            for (uint32_t s = 1; s < MAXSEQ; s++)
                if ((ok_seq[t][s / 8] >> (s % 8) & 1) && recv_count[t][s] == 0)
                    missing++;
        if (missing == 0 || now_ns() > deadline)
            break;
        sleep_us(10000);
    }
    fprintf(
        stderr,
        "%.1f s: %llu WRITEs completed, %llu failed by the churn, %llu creates refused "
        "(not loaded), %llu invalidations, %llu notification sends, %llu received\n",
        seconds, (unsigned long long)atomic_load(&n_ok), (unsigned long long)atomic_load(&n_failed),
        (unsigned long long)atomic_load(&n_create_nf), (unsigned long long)atomic_load(&n_inval),
        (unsigned long long)atomic_load(&n_notif_sends), (unsigned long long)received);
    if (missing != 0)
        check_fail(__FILE__, __LINE__, "%llu notifications of completed WRITEs never arrived",
                   (unsigned long long)missing);
    CHECK(received >= atomic_load(&n_ok));
    CHECK(atomic_load(&n_ok) > 0);
    CHECK(atomic_load(&n_inval) > 0);
    ixl_agent_destroy(ra);
    ixl_agent_destroy(rb);
    CHECK_RC(ixl_syscall_set("sendmsg", NULL), IXL_OK);
    free(src);
    free(dst);
    return 0;
}

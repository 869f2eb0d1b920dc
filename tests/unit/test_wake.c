/*
 * The agent's wake-up path (src/core/agent.c, "waking"): no wake is ever lost, neither to a
 * thread going to sleep in ixl_agent_wait_wake nor to the pollable fd while
 * ixl_agent_progress drains it; timeouts are honoured. Races run for a fixed time (about
 * 0.5 s each) with random pauses on both sides so every window gets hit; runs under TSan.
 *
 * The safety nets ixl_xfer_wait keeps (timed slices) would hide a lost wake there, so the
 * races call the primitives themselves, with no timer to fall back on: a lost wake shows as a
 * wait that reaches its (long) timeout.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/agent.h"

#define RACE_NS 500000000ull /* per race */
#define LOST_MS 2000         /* a wait this long means a wake was lost */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift: the pauses that move each side across the other's windows. */
static void pause_some(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    unsigned n = (unsigned)(*rng % 400);
    if (n < 100)
        return;
    if (n < 390) {
        for (volatile unsigned i = 0; i < n * 4; i++)
            ;
        return;
    }
    sched_yield();
}

static struct ixl_agent *make_agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

/* ---- a completion racing a waiter going to sleep ------------------------------------------ */

struct sleep_race {
    struct ixl_agent *agent;
    _Atomic uint64_t posted, done; /* request i is posted / done (the "plugin's" state) */
    _Atomic int stop;
    unsigned long rounds;
};

static void *completer(void *arg)
{
    struct sleep_race *r = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull, i = 0;
    while (!atomic_load(&r->stop)) {
        if (atomic_load(&r->posted) == i) {
            sched_yield();
            continue;
        }
        pause_some(&rng);
        atomic_store(&r->done, ++i); /* the completion becomes visible, then signal() */
        ixl_agent_wake(r->agent);
    }
    return NULL;
}

static void test_sleep_race(void)
{
    struct sleep_race r = {.agent = make_agent("sleeper")};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, completer, &r) == 0);
    uint64_t rng = 0x2545f4914f6cdd1dull, end = now_ns() + RACE_NS;
    int spin = 0;
    for (uint64_t i = 1; now_ns() < end; i++) {
        atomic_store(&r.posted, i);
        pause_some(&rng);
        uint64_t t0 = now_ns();
        /* ixl_xfer_wait's order: the sequence, then the status, then sleep (alternately after
         * a brief spin). */
        for (;;) {
            uint32_t seq = ixl_agent_wake_seq(r.agent);
            if (atomic_load(&r.done) == i)
                break;
            if (spin && ixl_agent_spin_wake(r.agent, seq, 2000, NULL))
                continue;
            ixl_agent_wait_wake(r.agent, seq, LOST_MS);
            if (now_ns() - t0 >= (uint64_t)LOST_MS * 1000000u)
                check_fail(__FILE__, __LINE__, "a wake was lost (round %lu)", (unsigned long)i);
        }
        spin ^= 1;
        r.rounds++;
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    CHECK(r.rounds > 100);
    fprintf(stderr, "sleep race: %lu rounds\n", r.rounds);
    ixl_agent_destroy(r.agent);
}

/* ---- several sleepers, one sequence --------------------------------------------------------- */

struct herd {
    struct ixl_agent *agent;
    _Atomic uint64_t done;
    uint64_t want;
};

static void *herd_sleeper(void *arg)
{
    struct herd *h = arg;
    uint64_t t0 = now_ns();
    for (;;) {
        uint32_t seq = ixl_agent_wake_seq(h->agent);
        if (atomic_load(&h->done) >= h->want)
            break;
        ixl_agent_wait_wake(h->agent, seq, LOST_MS);
        CHECK(now_ns() - t0 < (uint64_t)LOST_MS * 1000000u);
    }
    return NULL;
}

static void test_herd(void)
{
    struct herd h = {.agent = make_agent("herd"), .want = 1};
    for (int round = 0; round < 50; round++) {
        pthread_t t[4];
        for (int k = 0; k < 4; k++)
            CHECK(pthread_create(&t[k], NULL, herd_sleeper, &h) == 0);
        usleep((useconds_t)(round % 5) * 100);
        atomic_store(&h.done, h.want);
        ixl_agent_wake(h.agent); /* one wake reaches every sleeper */
        for (int k = 0; k < 4; k++)
            pthread_join(t[k], NULL);
        h.want++;
    }
    ixl_agent_destroy(h.agent);
}

/* ---- the fd: wakes racing ixl_agent_progress's drain ---------------------------------------- */

struct fd_race {
    struct ixl_agent *agent;
    _Atomic uint64_t woken; /* wakes made so far */
    _Atomic uint64_t seen;  /* what the poller has seen: the waker waits for it, at times */
    _Atomic int stop;
};

static void *fd_waker(void *arg)
{
    struct fd_race *r = arg;
    uint64_t rng = 0xd1b54a32d192ed03ull;
    while (!atomic_load(&r->stop)) {
        pause_some(&rng);
        atomic_fetch_add(&r->woken, 1);
        ixl_agent_wake(r->agent);
        /* Now and then let the poller catch up, so it also drains an idle fd. */
        if ((rng & 7) == 0)
            while (!atomic_load(&r->stop) && atomic_load(&r->seen) < atomic_load(&r->woken))
                sched_yield();
    }
    return NULL;
}

static void test_fd_race(void)
{
    struct fd_race r = {.agent = make_agent("poller")};
    int fd;
    CHECK_RC(ixl_agent_fd(r.agent, &fd), IXL_OK);
    CHECK_RC(ixl_agent_progress(r.agent), IXL_OK);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 0); /* drained, nothing since */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fd_waker, &r) == 0);
    uint64_t end = now_ns() + RACE_NS, rng = 0x8cb92ba72f3d8dd7ull;
    unsigned long polls = 0;
    while (now_ns() < end) {
        /* The application's loop: poll, drain, look at what changed. Whatever changed after
         * the look must leave the fd readable. */
        if (atomic_load(&r.seen) < atomic_load(&r.woken)) {
            pfd.revents = 0;
            if (poll(&pfd, 1, LOST_MS) != 1)
                check_fail(__FILE__, __LINE__, "the fd stayed unreadable after a wake");
        }
        pause_some(&rng);
        CHECK_RC(ixl_agent_progress(r.agent), IXL_OK);
        atomic_store(&r.seen, atomic_load(&r.woken));
        polls++;
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    /* Quiet now: one wake makes the fd readable, one drain empties it. */
    CHECK_RC(ixl_agent_progress(r.agent), IXL_OK);
    CHECK_RC(ixl_agent_progress(r.agent), IXL_OK);
    CHECK(poll(&pfd, 1, 0) == 0);
    ixl_agent_wake(r.agent);
    ixl_agent_wake(r.agent);
    CHECK(poll(&pfd, 1, 0) == 1);
    CHECK_RC(ixl_agent_progress(r.agent), IXL_OK);
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK(polls > 100);
    fprintf(stderr, "fd race: %lu polls\n", polls);
    ixl_agent_destroy(r.agent);
}

/* ---- timeouts ----------------------------------------------------------------------------------
 */

static void test_timeouts(void)
{
    struct ixl_agent *a = make_agent("timer");
    uint32_t seq = ixl_agent_wake_seq(a);
    uint64_t t0 = now_ns();
    ixl_agent_wait_wake(a, seq, 30);
    uint64_t ms = (now_ns() - t0) / 1000000u;
    CHECK(ms >= 29 && ms < 1000);
    t0 = now_ns();
    ixl_agent_wait_wake(a, seq, 0);
    CHECK(now_ns() - t0 < 100000000u);
    CHECK(ixl_agent_spin_wake(a, seq, 1000, NULL) == 0);
    /* A sequence that already moved returns at once, even with no timeout. */
    ixl_agent_wake(a);
    t0 = now_ns();
    ixl_agent_wait_wake(a, seq, -1);
    CHECK(ixl_agent_spin_wake(a, seq, 1000, NULL) == 1);
    CHECK(now_ns() - t0 < 100000000u);
    ixl_agent_destroy(a);
}

int main(void)
{
    test_timeouts();
    test_herd();
    test_sleep_race();
    test_fd_race();
    printf("test_wake: ok\n");
    return 0;
}

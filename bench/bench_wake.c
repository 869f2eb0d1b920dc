/*
 * bench_wake.c - how long a completion takes to reach the thread waiting for it.
 *
 * A TEST backend (tests/plugins/testmem.c) with delay_us > 0 completes each request in its
 * worker thread; with stamp=1 that thread writes CLOCK_MONOTONIC ns into the first 8 bytes of
 * the READ's destination just before the completion becomes visible and it calls the host's
 * signal(). The waiter reads that stamp once it saw the completion: wake-up = the waiter's
 * clock then - the stamp. The delay (default 100 us, plus the worker's timer slack) is long
 * enough for the waiter to be asleep, so the rows measure the sleeping path, not a spin.
 *
 * Rows (median and p99 over -n requests, in us):
 *   wait        ixl_xfer_wait returning
 *   fd          poll() on ixl_agent_fd returning (then ixl_agent_progress and a status check)
 *   busy-poll   a caller spinning on ixl_xfer_status (the floor: no sleep at all)
 *   cond        baseline: a bare pthread cond wake between two threads, same delay
 *   eventfd     baseline: a bare eventfd write -> poll() between two threads, same delay
 * Modes run interleaved in -r rounds; each row is the median (and p99) of all its samples.
 *
 * Usage: bench_wake [-n requests per round] [-r rounds] [-d delay_us] [-m wait|fd|busy]
 * -m runs one row only (for profiling: strace -c -f, perf).
 * Exit status: 0 when every step ran, 1 when an ixl call failed, 77 when the TEST plugin
 * cannot be found (build with BUILD_TESTING=ON).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

#ifndef IXL_BENCH_PLUGIN_DIR
#define IXL_BENCH_PLUGIN_DIR ""
#endif

#define T_WAKE_US 10.0 /* the target for the wait and fd rows (median) */

enum mode { M_WAIT, M_FD, M_BUSY, M_COND, M_EVENTFD, M_N };
static const char *const mode_name[M_N] = {"wait", "fd", "busy-poll", "cond (baseline)",
                                           "eventfd (baseline)"};

static unsigned g_n = 2000, g_rounds = 3, g_delay_us = 100;
static int g_only = -1; /* -m: one row only (for profiling) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void need(int rc, struct ixl_agent *agent, const char *what)
{
    if (rc == IXL_OK || rc == IXL_IN_PROGRESS)
        return;
    fprintf(stderr, "bench_wake: %s: %s (%s)\n", what, ixl_strerror(rc),
            agent ? ixl_agent_last_error(agent) : "");
    exit(rc == IXL_ERR_NOT_FOUND ? 77 : 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- ixl: one agent, a READ from itself completed by TEST's worker ------------------------ */

struct ixl_side {
    struct ixl_agent *agent;
    struct ixl_xfer *x;
    volatile uint64_t *dst; /* the stamp lands here */
    int fd;
};

static void ixl_setup(struct ixl_side *s, uint64_t *buf)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    need(ixl_agent_create("wake", &p, &s->agent), NULL, "ixl_agent_create");
    char delay[32];
    snprintf(delay, sizeof(delay), "%u", g_delay_us);
    /* no_progress: like a backend whose own threads complete requests (NET). */
    struct ixl_kv opts[] = {{"delay_us", delay}, {"stamp", "1"}, {"no_progress", "1"}};
    need(ixl_backend_create(s->agent, "TEST", opts, 3, NULL), s->agent, "TEST backend");
    struct ixl_reg_desc d = {(uintptr_t)buf, 2 * 4096, 0, NULL, 0};
    need(ixl_mem_register(s->agent, IXL_MEM_DRAM, &d, 1, NULL), s->agent, "ixl_mem_register");
    struct ixl_dlist *l, *r;
    need(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), NULL, "ixl_dlist_create");
    need(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), NULL, "ixl_dlist_create");
    struct ixl_desc ld = {(uintptr_t)buf, 64, 0}, rd = {(uintptr_t)buf + 4096, 64, 0};
    need(ixl_dlist_add(l, &ld, 1), NULL, "ixl_dlist_add");
    need(ixl_dlist_add(r, &rd, 1), NULL, "ixl_dlist_add");
    need(ixl_xfer_create(s->agent, IXL_OP_READ, l, r, "wake", NULL, &s->x), s->agent,
         "ixl_xfer_create");
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    need(ixl_agent_fd(s->agent, &s->fd), s->agent, "ixl_agent_fd");
    s->dst = (volatile uint64_t *)buf;
}

/* One request; returns the wake-up in us. */
static double ixl_once(struct ixl_side *s, enum mode m)
{
    *s->dst = 0;
    if (m == M_FD)
        need(ixl_agent_progress(s->agent), s->agent, "ixl_agent_progress"); /* clears the fd */
    need(ixl_xfer_post(s->x), s->agent, "ixl_xfer_post");
    uint64_t t = 0;
    int rc;
    switch (m) {
    case M_WAIT:
        rc = ixl_xfer_wait(s->x, 10000);
        t = now_ns();
        need(rc, s->agent, "ixl_xfer_wait");
        break;
    case M_FD:
        for (;;) {
            struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
            if (poll(&pfd, 1, 10000) != 1) {
                fprintf(stderr, "bench_wake: the agent's fd did not become readable\n");
                exit(1);
            }
            t = now_ns();
            need(ixl_agent_progress(s->agent), s->agent, "ixl_agent_progress");
            rc = ixl_xfer_status(s->x);
            if (rc != IXL_IN_PROGRESS)
                break;
        }
        need(rc, s->agent, "ixl_xfer_status");
        break;
    default:
        while ((rc = ixl_xfer_status(s->x)) == IXL_IN_PROGRESS)
            ;
        t = now_ns();
        need(rc, s->agent, "ixl_xfer_status");
        break;
    }
    uint64_t stamp = *s->dst;
    if (stamp == 0 || stamp > t) {
        fprintf(stderr, "bench_wake: no completion stamp (is TEST built with 'stamp'?)\n");
        exit(1);
    }
    return (double)(t - stamp) / 1e3;
}

/* ---- baselines: two bare threads ----------------------------------------------------------- */

struct bare {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int efd;
    enum mode m;
    unsigned n;
    _Atomic uint64_t stamp;
    int flag;
    _Atomic int ready; /* the waiter is about to wait for request i */
};

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
}

static void *bare_waker(void *arg)
{
    struct bare *b = arg;
    for (unsigned i = 0; i < b->n; i++) {
        while (atomic_load(&b->ready) != (int)i + 1)
            sleep_us(1);
        sleep_us(g_delay_us);
        if (b->m == M_COND) {
            pthread_mutex_lock(&b->lock);
            atomic_store(&b->stamp, now_ns());
            b->flag = 1;
            pthread_cond_signal(&b->cond);
            pthread_mutex_unlock(&b->lock);
        } else {
            uint64_t one = 1;
            atomic_store(&b->stamp, now_ns());
            if (write(b->efd, &one, sizeof(one)) != sizeof(one))
                abort();
        }
    }
    return NULL;
}

static void bare_run(enum mode m, double *out, unsigned n)
{
    struct bare b = {.m = m, .n = n};
    pthread_mutex_init(&b.lock, NULL);
    pthread_cond_init(&b.cond, NULL);
    b.efd = eventfd(0, EFD_CLOEXEC);
    if (b.efd < 0) {
        perror("bench_wake: eventfd");
        exit(1);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, bare_waker, &b) != 0)
        exit(1);
    for (unsigned i = 0; i < n; i++) {
        uint64_t w;
        if (m == M_COND) {
            pthread_mutex_lock(&b.lock);
            b.flag = 0;
            atomic_store(&b.ready, (int)i + 1);
            while (!b.flag)
                pthread_cond_wait(&b.cond, &b.lock);
            w = now_ns();
            pthread_mutex_unlock(&b.lock);
        } else {
            atomic_store(&b.ready, (int)i + 1);
            struct pollfd pfd = {.fd = b.efd, .events = POLLIN};
            if (poll(&pfd, 1, 10000) != 1)
                exit(1);
            w = now_ns();
            uint64_t v;
            if (read(b.efd, &v, sizeof(v)) != sizeof(v))
                exit(1);
        }
        out[i] = (double)(w - atomic_load(&b.stamp)) / 1e3;
    }
    pthread_join(t, NULL);
    close(b.efd);
    pthread_cond_destroy(&b.cond);
    pthread_mutex_destroy(&b.lock);
}

/* ---- main ----------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench_wake [-n requests per round] [-r rounds] [-d delay_us] "
                    "[-m wait|fd|busy]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            g_n = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            g_rounds = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
            g_delay_us = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            i++;
            g_only = strcmp(argv[i], "wait") == 0   ? M_WAIT
                     : strcmp(argv[i], "fd") == 0   ? M_FD
                     : strcmp(argv[i], "busy") == 0 ? M_BUSY
                                                    : -2;
            if (g_only == -2)
                usage();
        } else
            usage();
    }
    if (g_n == 0 || g_rounds == 0 || g_delay_us == 0)
        usage();
    if (getenv("IXL_PLUGIN_DIR") == NULL && IXL_BENCH_PLUGIN_DIR[0] != '\0')
        setenv("IXL_PLUGIN_DIR", IXL_BENCH_PLUGIN_DIR, 1);

    uint64_t *buf = aligned_alloc(4096, 2 * 4096);
    if (buf == NULL)
        return 1;
    memset(buf, 0, 2 * 4096);
    struct ixl_side s;
    ixl_setup(&s, buf);

    size_t total = (size_t)g_n * g_rounds;
    double *v[M_N];
    size_t nv[M_N] = {0};
    for (int m = 0; m < M_N; m++) {
        v[m] = calloc(total, sizeof(double));
        if (v[m] == NULL)
            return 1;
    }
    for (unsigned r = 0; r < g_rounds; r++)
        for (int m = 0; m < M_N; m++) {
            if (g_only >= 0 && m != g_only)
                continue;
            if (m == M_COND || m == M_EVENTFD) {
                bare_run((enum mode)m, v[m] + nv[m], g_n);
                nv[m] += g_n;
                continue;
            }
            for (unsigned i = 0; i < g_n; i++)
                v[m][nv[m]++] = ixl_once(&s, (enum mode)m);
        }

    printf("wake-up: completion -> waiter running, us (TEST backend, worker delay %u us, %u "
           "requests x %u rounds)\n",
           g_delay_us, g_n, g_rounds);
    printf("%-20s %10s %10s %10s\n", "row", "median", "p99", "target");
    for (int m = 0; m < M_N; m++) {
        if (nv[m] == 0)
            continue;
        qsort(v[m], nv[m], sizeof(double), cmp_double);
        double med = v[m][nv[m] / 2], p99 = v[m][(size_t)((double)(nv[m] - 1) * 0.99)];
        char tgt[32] = "";
        if (m == M_WAIT || m == M_FD)
            snprintf(tgt, sizeof(tgt), "<= %.0f %s", T_WAKE_US,
                     med <= T_WAKE_US ? "met" : "MISSED");
        printf("%-20s %10.2f %10.2f %10s\n", mode_name[m], med, p99, tgt);
        free(v[m]);
    }
    need(ixl_xfer_release(s.x), s.agent, "ixl_xfer_release");
    ixl_agent_destroy(s.agent);
    free(buf);
    return 0;
}

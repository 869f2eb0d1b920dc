/*
 * No lock held at a slow peer's pace (issue 15): this process is the target agent (NET,
 * timeout_ms=2000) with a 64 MiB region R1 and a 1 MiB region R2. A reader process (forked;
 * a raw client of NET's wire format, net_raw.h, since an ixl agent would read at full speed)
 * sets a 4 KiB SO_RCVBUF, says HELLO, asks for all of R1 16 times over (16 READs of 64 MiB,
 * in 1 MiB frames as an initiator's chunk would cut them), checks that the first answer is
 * READ_DATA OK, and then reads at about 1 MB/s. Meanwhile, in this process:
 *
 *   1. ixl_mem_deregister(R2), a region nobody reads:            < QUICK_MS
 *   2. ixl_md_get:                                                < QUICK_MS
 *   3. ixl_mem_deregister(R1), the region being read:             <= timeout_ms + 1 s, IXL_OK
 *      and, 200 ms into it, ixl_md_get from another thread:       < QUICK_MS
 *   4. (R1 registered again, a new reader) ixl_agent_destroy:     <= 5 s
 *
 * Each runs in a thread of its own; one past its bound by 3 s more counts as failed, and the
 * reader is then killed (its connection reset) so that the call can end and the test go on; a
 * new reader starts for the next step. Before issue 15 these calls stall for as long as the
 * reader takes (30-40 s).
 *
 * QUICK_MS, the bound of the calls that must not wait for the reader at all, is half of
 * timeout_ms: a call that waited for the reader takes at least timeout_ms (the reader is only
 * dropped then) and before issue 15 30-40 s; it is not a speed target (these calls take a few
 * ms; 100 ms was once exceeded by 6 ms under ThreadSanitizer on a loaded 2-core machine).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "net_raw.h"

#define TIMEOUT_MS 2000
#define QUICK_MS (TIMEOUT_MS / 2)
#define R1_LEN (64u << 20)
#define R2_LEN (1u << 20)
#define FRAME (1u << 20)
#define N_READS 16
#define GRACE_S 3.0

static struct ixl_agent *agent;
static uint8_t *r1, *r2;
static struct nr_target tg;
static uint64_t key1;
static pid_t reader_pid;
static int reader_fd = -1; /* its 'r' (ready) comes up this pipe */

/* The hang guard's (nr_guard) last act: no child outlives the test. */
static void kill_children(void)
{
    if (reader_pid > 0)
        kill(reader_pid, SIGKILL);
}

/* The reader process: system calls only (forked from a process with NET's threads). */
static int reader_main(int up)
{
    int fd = nr_connect(tg.port, 4096, 30000);
    if (fd < 0)
        return 2;
    if (nr_send_hello(fd, tg.instance, "slowreader") != 0 || nr_hello_ack(fd) != 0)
        return 3;
    uint8_t h[NET_HDR_BYTES];
    for (uint64_t i = 0; i < N_READS; i++)
        for (uint64_t off = 0; off < R1_LEN; off += FRAME) {
            nr_hdr(h, NET_READ, i + 1, (uintptr_t)r1 + off, FRAME, key1);
            nr_put(h + 12, off / FRAME, 4); /* chunk */
            if (nr_send(fd, h, sizeof(h)) != 0)
                return 4;
        }
    if (nr_recv_all(fd, h, sizeof(h)) != 0 || h[5] != NET_READ_DATA || nr_get(h + 8, 4) != 0 ||
        nr_get(h + 32, 8) != FRAME)
        return 5;
    if (nr_write_all(up, "r", 1) != 0)
        return 6;
    /* About 1 MB/s: 10 KiB every 10 ms, until the target cuts the connection; a PING every
     * 100 ms, as an initiator's heartbeat, so that the target sees a live (slow) peer. */
    static uint8_t b[10240];
    for (int k = 1;; k++) {
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        nr_sleep_ms(10);
        if (k % 10 == 0) {
            nr_hdr(h, NET_PING, 1000000 + (uint64_t)k, 0, 0, 0);
            if (nr_send(fd, h, sizeof(h)) != 0)
                break;
        }
    }
    (void)!write(up, "e", 1); /* the connection ended */
    return 0;
}

static void reader_start(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(NULL);
    reader_pid = fork();
    CHECK(reader_pid >= 0);
    if (reader_pid == 0) {
        close(sv[0]);
        _exit(reader_main(sv[1]));
    }
    close(sv[1]);
    reader_fd = sv[0];
    char c = 0;
    struct timeval tv = {10, 0};
    setsockopt(reader_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (read(reader_fd, &c, 1) != 1 || c != 'r') {
        int ws = 0;
        kill(reader_pid, SIGKILL);
        waitpid(reader_pid, &ws, 0);
        check_fail(__FILE__, __LINE__, "the reader did not start reading (status %d)", ws);
    }
    nr_sleep_ms(300); /* the target's socket buffers are full by now */
}

/* 1 while the reader's connection is up. */
static int reader_alive(void)
{
    char c;
    if (reader_pid <= 0 || waitpid(reader_pid, NULL, WNOHANG) != 0)
        return 0;
    return recv(reader_fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

/* Kills the reader (if alive) and reaps it; 1 when it had already ended by itself. */
static int reader_stop(void)
{
    if (reader_pid <= 0)
        return 1;
    int ws, ended = waitpid(reader_pid, &ws, WNOHANG) == reader_pid;
    if (!ended) {
        kill(reader_pid, SIGKILL);
        waitpid(reader_pid, &ws, 0);
    }
    close(reader_fd);
    reader_fd = -1;
    reader_pid = 0;
    return ended;
}

struct step {
    int what; /* 0 deregister R2, 1 md_get, 2 deregister R1, 3 destroy */
    ixl_status rc;
    atomic_int done;
};

static void *step_main(void *arg)
{
    struct step *s = arg;
    struct ixl_reg_desc d2 = {(uintptr_t)r2, R2_LEN, 0, NULL, 0};
    struct ixl_reg_desc d1 = {(uintptr_t)r1, R1_LEN, 0, NULL, 0};
    void *md;
    size_t len;
    switch (s->what) {
    case 0:
        s->rc = ixl_mem_deregister(agent, IXL_MEM_DRAM, &d2, 1, NULL);
        break;
    case 1:
        s->rc = ixl_md_get(agent, NULL, &md, &len);
        if (s->rc == IXL_OK)
            ixl_free(md);
        break;
    case 2:
        s->rc = ixl_mem_deregister(agent, IXL_MEM_DRAM, &d1, 1, NULL);
        break;
    default:
        ixl_agent_destroy(agent);
        s->rc = IXL_OK;
        break;
    }
    atomic_store(&s->done, 1);
    return NULL;
}

/* Runs step what beside the reader; checks it ends within bound_s with IXL_OK. With side, an
 * ixl_md_get starts 200 ms into the step (if it is still running) and must end within QUICK_MS:
 * no agent-wide lock may be held while the step waits on the reader. Returns 1 when the reader
 * had to be killed (so that the calls could end). */
static int timed_step(int what, const char *name, double bound_s, bool side)
{
    struct step s = {.what = what}, m = {.what = 1};
    pthread_t th, th2;
    bool m_started = false;
    double m_t0 = 0, m_took = -1;
    if (!reader_alive()) { /* each step runs beside a live, slow reader */
        fprintf(stderr, "(the target cut the reader's connection before: a new reader)\n");
        reader_stop();
        reader_start();
    }
    double t0 = nr_now(), took = -1;
    CHECK(pthread_create(&th, NULL, step_main, &s) == 0);
    for (;;) {
        double now = nr_now();
        if (took < 0 && atomic_load(&s.done))
            took = now - t0;
        if (m_started && m_took < 0 && atomic_load(&m.done))
            m_took = now - m_t0;
        if (side && !m_started && took < 0 && now - t0 >= 0.2) {
            m_t0 = nr_now();
            CHECK(pthread_create(&th2, NULL, step_main, &m) == 0);
            m_started = true;
        }
        if (took >= 0 && (!m_started || m_took >= 0))
            break;
        if ((took < 0 && now - t0 > bound_s + GRACE_S) ||
            (m_started && m_took < 0 && now - m_t0 > QUICK_MS / 1000.0 + GRACE_S))
            break;
        nr_sleep_ms(2);
    }
    double cut = nr_now();
    int killed = 0;
    if (took < 0 || (m_started && m_took < 0)) {
        reader_stop();
        killed = 1;
    }
    pthread_join(th, NULL);
    if (m_started)
        pthread_join(th2, NULL);
    if (took >= 0) {
        fprintf(stderr, "%s beside a slow reader: %.0f ms (%s)\n", name, took * 1e3,
                ixl_strerror(s.rc));
        if (took > bound_s)
            nr_fail("%s beside a slow reader took %.0f ms (want <= %.0f ms)", name, took * 1e3,
                    bound_s * 1e3);
    } else {
        fprintf(stderr,
                "%s beside a slow reader: still blocked after %.1f s; it ended %.0f ms "
                "after the reader was killed\n",
                name, cut - t0, (nr_now() - cut) * 1e3);
        nr_fail("%s beside a slow reader did not end in %.1f s (want <= %.0f ms)", name, cut - t0,
                bound_s * 1e3);
    }
    if (m_started) {
        if (m_took >= 0) {
            fprintf(stderr, "  ixl_md_get meanwhile: %.0f ms (%s)\n", m_took * 1e3,
                    ixl_strerror(m.rc));
            if (m_took > QUICK_MS / 1000.0)
                nr_fail("ixl_md_get during %s took %.0f ms (want <= %d ms)", name, m_took * 1e3,
                        QUICK_MS);
        } else {
            fprintf(stderr, "  ixl_md_get meanwhile: still blocked after %.1f s\n", cut - m_t0);
            nr_fail("ixl_md_get during %s did not end in %.1f s (want <= %d ms)", name, cut - m_t0,
                    QUICK_MS);
        }
        if (m.rc != IXL_OK)
            nr_fail("ixl_md_get during %s: %s", name, ixl_strerror(m.rc));
    }
    if (s.rc != IXL_OK)
        nr_fail("%s: %s: %s", name, ixl_strerror(s.rc),
                what < 3 ? ixl_agent_last_error(agent) : "");
    return killed;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_slow_reader", 110, kill_children);
    ixl_log_set_level(IXL_LOG_NONE);
    char why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1",
                        "timeout_ms",  "2000",      NULL};
    if (nr_agent("target", kv, &agent, why, sizeof(why)) != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s", why);
    r1 = mmap(NULL, R1_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    r2 = mmap(NULL, R2_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(r1 != MAP_FAILED && r2 != MAP_FAILED);
    net_pat_fill(r1, R1_LEN, 11, 0);
    struct ixl_reg_desc d[2] = {{(uintptr_t)r1, R1_LEN, 0, NULL, 0},
                                {(uintptr_t)r2, R2_LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(agent, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    nr_learn(agent, &tg);
    key1 = nr_region_key(agent, (uintptr_t)r1, R1_LEN);
    double t_start = nr_now();

    reader_start();
    timed_step(0, "ixl_mem_deregister of another region", QUICK_MS / 1000.0, false);
    timed_step(1, "ixl_md_get", QUICK_MS / 1000.0, false);
    if (!timed_step(2, "ixl_mem_deregister of the region being read", TIMEOUT_MS / 1000.0 + 1.0,
                    true)) {
        /* R1 is gone: the target cuts the reader's connection (the reader may still drain
         * what the kernel had queued for it: said, not checked). */
        double t0 = nr_now();
        while (waitpid(reader_pid, NULL, WNOHANG) == 0 && nr_now() - t0 < 2.0)
            nr_sleep_ms(10);
        fprintf(stderr, "the reader %s\n",
                reader_stop() ? "saw its connection end" : "was still connected 2 s later");
    }
    ixl_status rr = ixl_mem_register(agent, IXL_MEM_DRAM, d, 1, NULL);
    CHECK(rr == IXL_OK || rr == IXL_ERR_EXISTS);
    key1 = nr_region_key(agent, (uintptr_t)r1, R1_LEN);
    if (reader_pid > 0)
        reader_stop();
    reader_start();
    timed_step(3, "ixl_agent_destroy", 5.0, false);
    if (reader_pid > 0)
        reader_stop();
    munmap(r1, R1_LEN);
    munmap(r2, R2_LEN);
    fprintf(stderr, "%.1f s in all\n", nr_now() - t_start);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return 0;
}

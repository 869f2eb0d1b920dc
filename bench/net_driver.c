/*
 * net_driver - a small two-process driver for bench/net.sh, until ixlbench exists.
 *
 *   net_driver memcpy SIZE ITERS       one thread copying between two buffers of SIZE bytes
 *   net_driver memcpy-mt SIZE MS THREADS
 *                                      THREADS threads, each copying between two buffers of its
 *                                      own of SIZE bytes, as often as it can for MS milliseconds
 *                                      (bench/threads.sh's baseline: the copies NET's shm path
 *                                      makes, without NET); adds copies_per_s=
 *   net_driver tcp-mt SIZE MS THREADS  THREADS threads, each with its own TCP loopback connection
 *                                      into a child (a thread of its own there), sending SIZE
 *                                      bytes and waiting for a 1-byte ack, for MS milliseconds
 *                                      (bench/threads.sh's tcp baseline); adds msgs_per_s=
 *   net_driver pvm SIZE ITERS          process_vm_writev of SIZE bytes into a child's buffer
 *   net_driver tcp SIZE ITERS          one TCP loopback stream into a child, acked per SIZE
 *   net_driver tcplat SIZE ITERS       ping-pong: SIZE bytes to a child over TCP loopback, one
 *                                      byte back, blocking sockets (both sides sleep in read)
 *   net_driver tcplat-poll SIZE ITERS  the same with non-blocking sockets, both sides spinning
 *                                      on recv (a busy-polling transport's floor)
 *   net_driver tcplat-frame-poll SIZE ITERS
 *                                      NET's system calls for a TCP WRITE of SIZE bytes, both
 *                                      sides spinning, without NET: one sendmsg of a 48-byte
 *                                      header and the bytes, the receiver polling epoll_wait
 *                                      with no timeout (a busy-polling loop), reading into a
 *                                      64 KiB scratch buffer, copying the bytes out and
 *                                      answering with a 48-byte sendmsg, the sender reading the
 *                                      answer with one recv per look (NET's wire floor)
 *   net_driver tcplat-chk SIZE ITERS, tcplat-poll-chk SIZE ITERS
 *                                      the same two with ixlbench's per-iteration data check
 *                                      around each timed round trip, untimed: a fresh pattern
 *                                      into the source before it, and after it a second
 *                                      connection to another thread of the child, which checks
 *                                      the bytes it received, poisons them and answers (the
 *                                      shape of ixlbench --reuse with checks on; the plain modes
 *                                      stay the targets' baselines)
 *   net_driver ixl PATH SIZE ITERS [KEY=VALUE...]
 *                                      NET backend WRITE of SIZE bytes into a target process,
 *                                      PATH (auto|shm|cma|tcp) forced on the initiator; the
 *                                      KEY=VALUE pairs are more NET options for both sides
 *
 * NET_DRIVER_CPUS=S,R (tcp and the tcplat modes) pins the sender (this process) to CPU S and the
 * receiver (the child) to CPU R: bench/net.sh measures the stream with both ends on one CPU and on
 * two, since where the scheduler happens to put two unpinned processes moves it by 2x here.
 *
 * Every mode warms up with one iteration, times ITERS more with CLOCK_MONOTONIC and prints one
 * line for the script to parse:
 *
 *   RESULT mode=ixl path=shm used=shm size=67108864 iters=20 gbps=8.910
 *
 * (the ping-pongs add p50_us=, the median microseconds of one round trip, and avg_us=)
 *
 * GB/s are 10^9 bytes per second. Exit status: 0 measured (and, for ixl, the data read back
 * matched), 77 when the NET backend is unavailable (a RESULT line with gbps=NA and the reason
 * still comes), 1 on any other failure.
 *
 * Baselines are measured the way a transfer library would have to do the same work, so the
 * script's ratios compare like with like: every byte lands in memory of another process
 * (except memcpy, the single-copy ceiling), and the TCP receiver acknowledges each SIZE so a
 * timed iteration covers delivery, not just the sender's socket buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "ixl/ixl.h"

#define EXIT_SKIP 77
/* Socket buffers asked for by the raw TCP baseline; the kernel caps them at
 * net.core.{w,r}mem_max (4 MiB here) and doubles the value for its bookkeeping. */
#define TCP_SOCKBUF (4u << 20)
#define WAIT_MS 120000
/* Extra NET options (key=value) the ixl mode passes to both backends. */
#define MAX_EXTRA 8

/* Read by nothing; stores into it keep the compiler from dropping the memcpy loop. */
static volatile unsigned char g_sink;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double gbps(size_t size, unsigned iters, double seconds)
{
    return seconds > 0 ? (double)size * iters / seconds / 1e9 : 0.0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *s == '-') {
        return -1;
    }
    /* Allow K/M/G suffixes (binary) so the script can say 64M. */
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

/* Touches every page (first touch decides where it lives) with a pattern that differs at
 * every 8-byte word, so a misplaced or partial copy shows in a compare. */
static void fill_pattern(unsigned char *buf, size_t size, uint64_t seed)
{
    size_t words = size / sizeof(uint64_t);
    uint64_t *w = (uint64_t *)(void *)buf;

    for (size_t i = 0; i < words; i++) {
        w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
    }
    for (size_t i = words * sizeof(uint64_t); i < size; i++) {
        buf[i] = (unsigned char)(i ^ seed);
    }
}

static void *alloc_buf(size_t size)
{
    void *p = NULL;

    /* Page-aligned, like any large transfer buffer. */
    if (posix_memalign(&p, 4096, size ? size : 1) != 0) {
        return NULL;
    }
    return p;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 0 when len bytes came, 1 on EOF before any byte, -1 on error or a short read. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            return got == 0 ? 1 : -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static int reap(pid_t pid)
{
    int st;

    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void print_result(const char *mode, const char *path, const char *used, size_t size,
                         unsigned iters, double rate, const char *note)
{
    printf("RESULT mode=%s", mode);
    if (path != NULL) {
        printf(" path=%s used=%s", path, used != NULL && used[0] != '\0' ? used : "?");
    }
    printf(" size=%zu iters=%u", size, iters);
    if (rate >= 0) {
        printf(" gbps=%.3f", rate);
    } else {
        printf(" gbps=NA");
    }
    if (note != NULL) {
        printf(" note=\"%s\"", note);
    }
    printf("\n");
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------- */
/* memcpy                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static int run_memcpy(size_t size, unsigned iters)
{
    unsigned char *src = alloc_buf(size);
    unsigned char *dst = alloc_buf(size);
    double t0, t1;

    if (src == NULL || dst == NULL) {
        fprintf(stderr, "net_driver: out of memory for 2 x %zu bytes\n", size);
        free(src);
        free(dst);
        return 1;
    }
    fill_pattern(src, size, 1);
    memset(dst, 0, size);
    memcpy(dst, src, size);
    t0 = now_s();
    for (unsigned i = 0; i < iters; i++) {
        memcpy(dst, src, size);
        g_sink = dst[(size_t)i * 4096 % size];
    }
    t1 = now_s();
    print_result("memcpy", NULL, NULL, size, iters, gbps(size, iters, t1 - t0), NULL);
    free(src);
    free(dst);
    return 0;
}

/* The measurement window of the -mt modes: the threads get ready, then work while it is open
 * and count what they finished inside it. */
struct mt_window {
    _Atomic int state; /* 0: get ready, 1: open, 2: closed */
    _Atomic unsigned ready;
};

/* A thread: ready, waiting for the window to open (or close at once). */
static void mt_wait_open(struct mt_window *w)
{
    atomic_fetch_add(&w->ready, 1);
    while (atomic_load(&w->state) == 0) {
        sched_yield();
    }
}

static bool mt_is_open(struct mt_window *w)
{
    return atomic_load(&w->state) == 1;
}

/* Once `started` threads are ready, opens the window for ms milliseconds (closes it at once
 * when !ok) and closes it: how long it was open, in seconds. */
static double mt_window_run(struct mt_window *w, unsigned started, unsigned ms, bool ok)
{
    while (atomic_load(&w->ready) < started) {
        sched_yield();
    }
    double t0 = now_s();
    atomic_store(&w->state, ok ? 1 : 2);
    if (ok) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    atomic_store(&w->state, 2);
    return now_s() - t0;
}

/* memcpy-mt: one thread's buffers and count. */
struct mt_thread {
    pthread_t tid;
    size_t size;
    struct mt_window *win;
    uint64_t copies; /* inside the window */
    int rc;
};

static void *mt_main(void *arg)
{
    struct mt_thread *t = arg;
    unsigned char *src = alloc_buf(t->size);
    unsigned char *dst = alloc_buf(t->size);

    if (src == NULL || dst == NULL) {
        t->rc = 1;
    } else {
        fill_pattern(src, t->size, 1);
        memset(dst, 0, t->size);
        memcpy(dst, src, t->size); /* warm-up: every page touched before the window */
    }
    mt_wait_open(t->win);
    /* Locals: threads' counters (or one global sink) written side by side would share a
     * cache line and make the threads wait for each other. */
    uint64_t copies = 0;
    unsigned sink = 0;
    while (t->rc == 0 && mt_is_open(t->win)) {
        memcpy(dst, src, t->size);
        sink += dst[(size_t)copies * 4096 % t->size];
        if (mt_is_open(t->win)) {
            copies++; /* a copy that ended after the window closed is not counted */
        }
    }
    t->copies = copies;
    g_sink = (unsigned char)sink;
    if (t->rc == 0 && memcmp(dst, src, t->size) != 0) {
        t->rc = 1;
    }
    free(src);
    free(dst);
    return NULL;
}

static int run_memcpy_mt(size_t size, unsigned ms, unsigned n)
{
    struct mt_thread *t = calloc(n, sizeof(*t));
    struct mt_window win = {0};
    unsigned started = 0;
    uint64_t copies = 0;
    double secs;
    int rc = 0;

    if (t == NULL) {
        return 1;
    }
    for (; started < n; started++) {
        t[started] = (struct mt_thread){.size = size, .win = &win};
        if (pthread_create(&t[started].tid, NULL, mt_main, &t[started]) != 0) {
            rc = 1;
            break;
        }
    }
    secs = mt_window_run(&win, started, ms, rc == 0);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(t[i].tid, NULL);
        copies += t[i].copies;
        rc |= t[i].rc;
    }
    free(t);
    if (rc != 0) {
        fprintf(stderr, "net_driver: memcpy-mt: a thread failed (memory, or a copy that did not "
                        "match)\n");
        return 1;
    }
    printf("RESULT mode=memcpy-mt size=%zu iters=%" PRIu64 " threads=%u gbps=%.3f "
           "copies_per_s=%.0f\n",
           size, copies, n, (double)copies * (double)size / secs / 1e9, (double)copies / secs);
    fflush(stdout);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* process_vm_writev                                                                        */
/* ---------------------------------------------------------------------------------------- */

/* The child: a touched buffer whose address goes up the pipe; it waits for the parent to
 * close its end, then checks a few words of what was written and says so by its status. */
static int pvm_child(size_t size, int addr_fd, int ctl_fd)
{
    unsigned char *buf = alloc_buf(size);
    unsigned char *want = alloc_buf(4096);
    uint64_t addr;
    char c;
    int rc = 0;

    if (buf == NULL || want == NULL) {
        return 1;
    }
    memset(buf, 0, size);
    addr = (uint64_t)(uintptr_t)buf;
    if (write_all(addr_fd, &addr, sizeof(addr)) != 0) {
        return 1;
    }
    while (read(ctl_fd, &c, 1) < 0 && errno == EINTR) {
    }
    /* The pattern is position-dependent: compare the first page against a regenerated one. */
    fill_pattern(want, size < 4096 ? size : 4096, 2);
    if (memcmp(buf, want, size < 4096 ? size : 4096) != 0) {
        rc = 1;
    }
    return rc;
}

static int run_pvm(size_t size, unsigned iters)
{
    int addr_pipe[2], ctl_pipe[2];
    unsigned char *src;
    uint64_t raddr;
    pid_t pid;
    double t0 = 0, t1;
    int rc = 1, child_rc;

    src = alloc_buf(size);
    if (src == NULL || pipe(addr_pipe) != 0 || pipe(ctl_pipe) != 0) {
        perror("net_driver: pvm setup");
        free(src);
        return 1;
    }
    fill_pattern(src, size, 2);
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("net_driver: fork");
        return 1;
    }
    if (pid == 0) {
        close(addr_pipe[0]);
        close(ctl_pipe[1]);
        _exit(pvm_child(size, addr_pipe[1], ctl_pipe[0]));
    }
    close(addr_pipe[1]);
    close(ctl_pipe[0]);
    if (read_all(addr_pipe[0], &raddr, sizeof(raddr)) != 0) {
        fprintf(stderr, "net_driver: pvm child sent no address\n");
        goto out;
    }
    for (unsigned i = 0; i <= iters; i++) {
        size_t done = 0;
        if (i == 1) {
            t0 = now_s(); /* iteration 0 is the warm-up */
        }
        while (done < size) {
            /* One iovec each side; a partial write (a fault) resumes where it stopped. */
            struct iovec l = {src + done, size - done};
            struct iovec r = {(void *)(uintptr_t)(raddr + done), size - done};
            ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
            if (n <= 0) {
                perror("net_driver: process_vm_writev");
                goto out;
            }
            done += (size_t)n;
        }
    }
    t1 = now_s();
    rc = 0;
    print_result("pvm", NULL, NULL, size, iters, gbps(size, iters, t1 - t0), NULL);
out:
    close(ctl_pipe[1]);
    close(addr_pipe[0]);
    child_rc = reap(pid);
    if (rc == 0 && child_rc != 0) {
        fprintf(stderr, "net_driver: pvm child saw wrong data (status %d)\n", child_rc);
        rc = 1;
    }
    free(src);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Raw TCP loopback                                                                         */
/* ---------------------------------------------------------------------------------------- */

static void tcp_tune(int fd)
{
    int one = 1;
    int buf = (int)TCP_SOCKBUF;

    /* Large fixed buffers (the brief's "large socket buffers"); NODELAY so neither the tail
     * of a SIZE nor the 1-byte ack waits for Nagle. */
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* NET_DRIVER_CPUS=S,R: the calling thread to CPU S (which 0) or R (which 1). Unset: nothing.
 * A malformed value or a refused CPU is an error, not a silently unpinned run. */
static int pin_from_env(int which)
{
    const char *v = getenv("NET_DRIVER_CPUS");
    unsigned cpu[2];
    cpu_set_t set;

    if (v == NULL || *v == '\0') {
        return 0;
    }
    if (sscanf(v, "%u,%u", &cpu[0], &cpu[1]) != 2 || cpu[which] >= CPU_SETSIZE) {
        fprintf(stderr, "net_driver: NET_DRIVER_CPUS=%s: want two CPU numbers, S,R\n", v);
        return -1;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu[which], &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "net_driver: pinning to CPU %u: %s\n", cpu[which], strerror(errno));
        return -1;
    }
    return 0;
}

/* The receiver: reads SIZE into its buffer per iteration and acks each with one byte. */
static int tcp_child(uint16_t port, size_t size, unsigned iters)
{
    struct sockaddr_in sa;
    unsigned char *buf = alloc_buf(size);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char ack = 'k';

    if (buf == NULL || fd < 0) {
        return 1;
    }
    memset(buf, 0, size);
    tcp_tune(fd);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        return 1;
    }
    for (unsigned i = 0; i <= iters; i++) {
        if (read_all(fd, buf, size) != 0 || write_all(fd, &ack, 1) != 0) {
            return 1;
        }
    }
    close(fd);
    return 0;
}

static int run_tcp(size_t size, unsigned iters)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    unsigned char *src = alloc_buf(size);
    int lfd, fd = -1, rc = 1, child_rc, one = 1;
    pid_t pid;
    double t0 = 0, t1;
    char ack;

    if (src == NULL || size == 0) {
        fprintf(stderr, "net_driver: tcp needs a non-empty buffer\n");
        return 1;
    }
    fill_pattern(src, size, 3);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        perror("net_driver: socket");
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    tcp_tune(lfd); /* inherited by the accepted socket, before the handshake sets windows */
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("net_driver: listen");
        return 1;
    }
    /* The receiver's CPU first, here, so that the child inherits it and a refusal stops the
     * run before there is a child to wait for. */
    if (pin_from_env(1) != 0) {
        close(lfd);
        free(src);
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("net_driver: fork");
        return 1;
    }
    if (pid == 0) {
        close(lfd);
        _exit(tcp_child(ntohs(sa.sin_port), size, iters));
    }
    if (pin_from_env(0) != 0) {
        kill(pid, SIGKILL);
        close(lfd);
        goto out;
    }
    fd = accept(lfd, NULL, NULL);
    close(lfd);
    if (fd < 0) {
        perror("net_driver: accept");
        goto out;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (unsigned i = 0; i <= iters; i++) {
        if (i == 1) {
            t0 = now_s();
        }
        if (write_all(fd, src, size) != 0 || read_all(fd, &ack, 1) != 0) {
            fprintf(stderr, "net_driver: tcp stream broke at iteration %u\n", i);
            goto out;
        }
    }
    t1 = now_s();
    rc = 0;
    print_result("tcp", NULL, NULL, size, iters, gbps(size, iters, t1 - t0), NULL);
out:
    if (fd >= 0) {
        close(fd);
    }
    child_rc = reap(pid);
    if (rc == 0 && child_rc != 0) {
        fprintf(stderr, "net_driver: tcp receiver failed (status %d)\n", child_rc);
        rc = 1;
    }
    free(src);
    return rc;
}

/* tcp-mt: one connection per thread on each side; the senders' window as in memcpy-mt (the
 * receivers leave it NULL). */
struct tmt_thread {
    pthread_t tid;
    int fd;
    size_t size;
    struct mt_window *win;
    uint64_t msgs; /* acknowledged inside the window */
    int rc;
};

/* The child's side of one connection: SIZE bytes in, one byte back, until the sender closes. */
static void *tmt_recv_main(void *arg)
{
    struct tmt_thread *t = arg;
    unsigned char *buf = alloc_buf(t->size);
    char ack = 'k';
    int r = 0;

    t->rc = buf == NULL;
    while (t->rc == 0 && (r = read_all(t->fd, buf, t->size)) == 0) {
        if (write_all(t->fd, &ack, 1) != 0) {
            t->rc = 1;
        }
    }
    if (r < 0) {
        t->rc = 1; /* a short message: the sender closes only between messages */
    }
    free(buf);
    return NULL;
}

static int tmt_child(uint16_t port, size_t size, unsigned n)
{
    struct tmt_thread *t = calloc(n, sizeof(*t));
    int rc = t == NULL;

    for (unsigned i = 0; rc == 0 && i < n; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        t[i] = (struct tmt_thread){.fd = socket(AF_INET, SOCK_STREAM, 0), .size = size};
        if (t[i].fd < 0) {
            return 1;
        }
        tcp_tune(t[i].fd);
        if (connect(t[i].fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            pthread_create(&t[i].tid, NULL, tmt_recv_main, &t[i]) != 0) {
            return 1;
        }
    }
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        pthread_join(t[i].tid, NULL);
        rc |= t[i].rc;
        close(t[i].fd);
    }
    free(t);
    return rc;
}

static void *tmt_send_main(void *arg)
{
    struct tmt_thread *t = arg;
    unsigned char *src = alloc_buf(t->size);
    uint64_t msgs = 0;
    char ack;

    if (src == NULL) {
        t->rc = 1;
    } else {
        fill_pattern(src, t->size, 3);
    }
    mt_wait_open(t->win);
    while (t->rc == 0 && mt_is_open(t->win)) {
        if (write_all(t->fd, src, t->size) != 0 || read_all(t->fd, &ack, 1) != 0) {
            t->rc = 1;
            break;
        }
        if (mt_is_open(t->win)) {
            msgs++; /* one acknowledged after the window closed is not counted */
        }
    }
    t->msgs = msgs;
    free(src);
    return NULL;
}

static int run_tcp_mt(size_t size, unsigned ms, unsigned n)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    struct tmt_thread *t = calloc(n, sizeof(*t));
    struct mt_window win = {0};
    unsigned started = 0;
    uint64_t msgs = 0;
    int lfd, rc = 0, child_rc, one = 1;
    double secs;
    pid_t pid;

    if (t == NULL) {
        return 1;
    }
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        perror("net_driver: socket");
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    tcp_tune(lfd);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, (int)n) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("net_driver: listen");
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("net_driver: fork");
        return 1;
    }
    if (pid == 0) {
        close(lfd);
        _exit(tmt_child(ntohs(sa.sin_port), size, n));
    }
    for (; started < n; started++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            perror("net_driver: accept");
            rc = 1;
            break;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        t[started] = (struct tmt_thread){.fd = fd, .size = size, .win = &win};
        if (pthread_create(&t[started].tid, NULL, tmt_send_main, &t[started]) != 0) {
            close(fd);
            rc = 1;
            break;
        }
    }
    close(lfd);
    secs = mt_window_run(&win, started, ms, rc == 0);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(t[i].tid, NULL);
        msgs += t[i].msgs;
        rc |= t[i].rc;
        close(t[i].fd); /* the child's thread reads the end of the stream and ends */
    }
    free(t);
    child_rc = reap(pid);
    if (rc != 0 || child_rc != 0) {
        fprintf(stderr, "net_driver: tcp-mt: a connection failed (sender %d, receiver %d)\n", rc,
                child_rc);
        return 1;
    }
    printf("RESULT mode=tcp-mt size=%zu iters=%" PRIu64 " threads=%u gbps=%.3f msgs_per_s=%.0f\n",
           size, msgs, n, (double)msgs * (double)size / secs / 1e9, (double)msgs / secs);
    fflush(stdout);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Raw TCP ping-pong (latency)                                                              */
/* ---------------------------------------------------------------------------------------- */

/* Spinning or sleeping I/O of exactly len bytes: 0, or -1 on error or EOF. */
static int xfer_all(int fd, void *buf, size_t len, bool rd, bool spin)
{
    char *p = buf;
    size_t done = 0;

    while (done < len) {
        ssize_t n = rd ? recv(fd, p + done, len - done, spin ? MSG_DONTWAIT : 0)
                       : send(fd, p + done, len - done, MSG_NOSIGNAL | (spin ? MSG_DONTWAIT : 0));
        if (n < 0) {
            if (errno == EINTR || (spin && (errno == EAGAIN || errno == EWOULDBLOCK))) {
                continue;
            }
            return -1;
        }
        if (n == 0 && rd) {
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

/* The echoing side: per round, SIZE bytes in, one byte out. */
/* tcplat-chk: the child's checker, on a connection of its own: for each 8-byte seed, compares
 * the ping-pong buffer with the pattern of that seed, poisons it, answers 'y' or 'n'. */
struct lat_check {
    int fd;
    unsigned char *buf;
    size_t size;
    int bad;
};

static void *lat_check_main(void *arg)
{
    struct lat_check *k = arg;
    unsigned char *want = alloc_buf(k->size);
    uint64_t seed;

    if (want == NULL) {
        k->bad = 1;
        return NULL;
    }
    while (read_all(k->fd, &seed, sizeof(seed)) == 0) {
        fill_pattern(want, k->size, seed);
        char a = memcmp(k->buf, want, k->size) == 0 ? 'y' : 'n';
        k->bad |= a != 'y';
        memset(k->buf, 0xA5, k->size);
        if (write_all(k->fd, &a, 1) != 0) {
            k->bad = 1;
            break;
        }
    }
    free(want);
    return NULL;
}

/* tcplat-frame-poll: NET's frame header size, and its receiver's scratch buffer. */
#define FRAME_HDR 48
#define FRAME_SCRATCH (64u << 10)

/* One sendmsg of header and body (more only for what a full socket left), spinning. */
static int frame_send(int fd, const void *hdr, size_t hn, const void *body, size_t n)
{
    struct iovec v[2] = {{(void *)hdr, hn}, {(void *)body, n}};
    struct msghdr m = {.msg_iov = v, .msg_iovlen = n > 0 ? 2 : 1};
    size_t left = hn + n;
    while (left > 0) {
        ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            return -1;
        }
        left -= (size_t)w;
        while (w > 0) { /* past what went */
            size_t k = (size_t)w < m.msg_iov->iov_len ? (size_t)w : m.msg_iov->iov_len;
            m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + k;
            m.msg_iov->iov_len -= k;
            w -= (ssize_t)k;
            if (m.msg_iov->iov_len == 0 && m.msg_iovlen > 1) {
                m.msg_iov++;
                m.msg_iovlen--;
            }
        }
    }
    return 0;
}

/* A frame of FRAME_HDR + n bytes in, as NET's busy-polling loop reads one: epoll_wait with no
 * timeout until the socket is readable, one recv of up to FRAME_SCRATCH, the body copied to
 * dst. */
static int frame_recv(int ep, int fd, unsigned char *scratch, unsigned char *dst, size_t n)
{
    size_t got = 0, want = FRAME_HDR + n;
    while (got < want) {
        struct epoll_event ev;
        int k = epoll_wait(ep, &ev, 1, 0);
        if (k < 0 && errno != EINTR) {
            return -1;
        }
        if (k <= 0) {
            continue;
        }
        size_t cap = FRAME_SCRATCH - got < want - got ? FRAME_SCRATCH - got : want - got;
        ssize_t r = recv(fd, scratch + got, cap, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
            return -1;
        }
        got += r > 0 ? (size_t)r : 0;
    }
    memcpy(dst, scratch + FRAME_HDR, n);
    return 0;
}

static int lat_connect(uint16_t port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int lat_child(uint16_t port, size_t size, unsigned rounds, bool spin, bool check, bool frame)
{
    unsigned char *buf = alloc_buf(size);
    int fd = lat_connect(port);
    unsigned char *scratch = frame ? malloc(FRAME_SCRATCH) : NULL, ans[FRAME_HDR] = {0};
    int ep = frame ? epoll_create1(EPOLL_CLOEXEC) : -1;
    struct epoll_event ev = {.events = EPOLLIN};
    if (frame && (scratch == NULL || ep < 0 || size > FRAME_SCRATCH - FRAME_HDR ||
                  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)) {
        return 1;
    }
    struct lat_check k = {.fd = -1, .buf = buf, .size = size};
    pthread_t tid;
    char ack = 'k';
    int rc = 0;

    if (buf == NULL || fd < 0) {
        return 1;
    }
    if (check) {
        k.fd = lat_connect(port); /* accepted second */
        if (k.fd < 0 || pthread_create(&tid, NULL, lat_check_main, &k) != 0) {
            return 1;
        }
    }
    for (unsigned i = 0; i < rounds; i++) {
        if (frame ? frame_recv(ep, fd, scratch, buf, size) != 0 ||
                        frame_send(fd, ans, sizeof(ans), NULL, 0) != 0
                  : xfer_all(fd, buf, size, true, spin) != 0 ||
                        xfer_all(fd, &ack, 1, false, spin) != 0) {
            rc = 1;
            break;
        }
    }
    close(fd);
    if (frame) {
        close(ep);
        free(scratch);
    }
    if (check) {
        pthread_join(tid, NULL); /* it ends when the parent closes the check connection */
        close(k.fd);
        rc |= k.bad;
    }
    free(buf);
    return rc;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ITERS timed round trips after WARM untimed ones; prints their median and mean. */
static int run_tcplat(size_t size, unsigned iters, bool spin, bool check, bool frame)
{
    unsigned char hdr[FRAME_HDR] = {0}, ans[FRAME_HDR];
    const unsigned warm = iters / 10 + 10;
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    unsigned char *src = alloc_buf(size);
    double *us = calloc(iters, sizeof(double)), sum = 0;
    int lfd, fd = -1, cfd = -1, rc = 1, child_rc, one = 1;
    pid_t pid;
    char ack;

    if (src == NULL || us == NULL) {
        fprintf(stderr, "net_driver: out of memory\n");
        return 1;
    }
    fill_pattern(src, size, 5);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        perror("net_driver: socket");
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("net_driver: listen");
        return 1;
    }
    if (pin_from_env(1) != 0) { /* as in run_tcp */
        close(lfd);
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("net_driver: fork");
        return 1;
    }
    if (pid == 0) {
        close(lfd);
        _exit(lat_child(ntohs(sa.sin_port), size, warm + iters, spin, check, frame));
    }
    if (pin_from_env(0) != 0) {
        kill(pid, SIGKILL);
        close(lfd);
        goto out;
    }
    fd = accept(lfd, NULL, NULL);
    if (check && fd >= 0) {
        cfd = accept(lfd, NULL, NULL); /* the child's checker, connected second */
        if (cfd < 0) {
            perror("net_driver: accept");
            goto out;
        }
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    close(lfd);
    if (fd < 0) {
        perror("net_driver: accept");
        goto out;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (unsigned i = 0; i < warm + iters; i++) {
        uint64_t seed = 0x5eed0000u + i;
        if (check) {
            fill_pattern(src, size, seed); /* untimed, as ixlbench's fill */
        }
        double t0 = now_s();
        if (frame ? frame_send(fd, hdr, sizeof(hdr), src, size) != 0 ||
                        xfer_all(fd, ans, sizeof(ans), true, true) != 0
                  : xfer_all(fd, src, size, false, spin) != 0 ||
                        xfer_all(fd, &ack, 1, true, spin) != 0) {
            fprintf(stderr, "net_driver: ping-pong broke at round %u\n", i);
            goto out;
        }
        if (i >= warm) {
            us[i - warm] = (now_s() - t0) * 1e6;
            sum += us[i - warm];
        }
        char a = 0;
        if (check &&
            (write_all(cfd, &seed, sizeof(seed)) != 0 || read_all(cfd, &a, 1) != 0 || a != 'y')) {
            fprintf(stderr, "net_driver: round %u: the child's check %s\n", i,
                    a == 'n' ? "found other bytes" : "broke");
            goto out;
        }
    }
    qsort(us, iters, sizeof(double), cmp_dbl);
    printf("RESULT mode=%s size=%zu iters=%u p50_us=%.2f avg_us=%.2f\n",
           frame  ? "tcplat-frame-poll"
           : spin ? (check ? "tcplat-poll-chk" : "tcplat-poll")
                  : (check ? "tcplat-chk" : "tcplat"),
           size, iters, iters % 2 ? us[iters / 2] : (us[iters / 2 - 1] + us[iters / 2]) / 2,
           sum / iters);
    fflush(stdout);
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (cfd >= 0) {
        close(cfd);
    }
    child_rc = reap(pid);
    if (rc == 0 && child_rc != 0) {
        fprintf(stderr, "net_driver: ping-pong echo failed (status %d)\n", child_rc);
        rc = 1;
    }
    free(src);
    free(us);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* ixl NET backend                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* Agents start with no backend (NET may be the configured default): the driver creates NET
 * itself, with its own options. */
static const struct ixl_agent_params no_default_backends = {
    .field_mask = IXL_AGENT_F_BACKENDS,
    .backends = "",
};

/* What the target sends up its pipe: a header, then the metadata blob and the serialized
 * descriptor list of its buffer. status != 0 means "no NET here" and reason says why. */
struct target_hdr {
    int32_t status;
    uint32_t no_net; /* the NET plugin is not there at all (exit 77, not a failure) */
    uint32_t malloc_fallback;
    uint32_t pad;
    uint64_t md_len;
    uint64_t dl_len;
    char reason[256];
};

static void target_fail(int fd, struct target_hdr *h, struct ixl_agent *agent, const char *what,
                        int status)
{
    h->status = status != 0 ? status : -1;
    snprintf(h->reason, sizeof(h->reason), "%s: %s%s%s", what, ixl_strerror(status),
             agent != NULL ? ": " : "", agent != NULL ? ixl_agent_last_error(agent) : "");
    /* The reason goes into a quoted field of the RESULT line. */
    for (char *p = h->reason; *p != '\0'; p++) {
        if (*p == '"' || *p == '\n') {
            *p = '\'';
        }
    }
    write_all(fd, h, sizeof(*h));
}

/* Blocks until the parent writes or closes the control pipe, driving the agent's progress
 * whenever its fd says so (a backend whose target side needs progress still works). */
static void target_wait(struct ixl_agent *agent, int ctl_fd)
{
    int afd = -1;

    if (ixl_agent_fd(agent, &afd) != IXL_OK) {
        afd = -1;
    }
    for (;;) {
        struct pollfd p[2] = {{ctl_fd, POLLIN, 0}, {afd, POLLIN, 0}};
        int n = poll(p, afd >= 0 ? 2 : 1, -1);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        if (p[0].revents != 0) {
            return;
        }
        if (afd >= 0 && p[1].revents != 0) {
            ixl_agent_progress(agent);
        }
    }
}

static int ixl_target(size_t size, const struct ixl_kv *extra, size_t n_extra, int md_fd,
                      int ctl_fd)
{
    struct ixl_kv opts[1 + MAX_EXTRA] = {{"local_paths", "1"}};
    struct target_hdr h;
    struct ixl_agent *agent = NULL;
    struct ixl_backend *be = NULL;
    struct ixl_dlist *dl = NULL;
    struct ixl_reg_desc rd;
    struct ixl_desc d;
    void *buf = NULL, *md = NULL, *dls = NULL;
    size_t md_len = 0, dl_len = 0;
    bool from_ixl = false, registered = false;
    ixl_status st;
    int rc = 1;

    memset(&h, 0, sizeof(h));
    memcpy(opts + 1, extra, n_extra * sizeof(*extra));
    st = ixl_agent_create("target", &no_default_backends, &agent);
    if (st != IXL_OK) {
        target_fail(md_fd, &h, NULL, "ixl_agent_create", st);
        goto out;
    }
    st = ixl_backend_create(agent, "NET", opts, 1 + n_extra, &be);
    if (st != IXL_OK) {
        h.no_net = st == IXL_ERR_NOT_FOUND;
        target_fail(md_fd, &h, agent,
                    h.no_net ? "NET unavailable: ixl_backend_create"
                             : "target: NET refused to start: ixl_backend_create",
                    st);
        goto out;
    }
    st = ixl_mem_alloc(agent, IXL_MEM_DRAM, size, be, &buf);
    if (st == IXL_OK) {
        from_ixl = true;
    } else {
        fprintf(stderr,
                "net_driver: target: ixl_mem_alloc failed (%s: %s); using malloc, so "
                "the mapped (shm) path cannot be used\n",
                ixl_strerror(st), ixl_agent_last_error(agent));
        h.malloc_fallback = 1;
        buf = alloc_buf(size);
        if (buf == NULL) {
            target_fail(md_fd, &h, NULL, "out of memory", IXL_ERR_NO_MEMORY);
            goto out;
        }
    }
    memset(buf, 0, size);
    rd = (struct ixl_reg_desc){(uint64_t)(uintptr_t)buf, size, 0, NULL, 0};
    st = ixl_mem_register(agent, IXL_MEM_DRAM, &rd, 1, NULL);
    if (st != IXL_OK) {
        target_fail(md_fd, &h, agent, "ixl_mem_register", st);
        goto out;
    }
    registered = true;
    d = (struct ixl_desc){(uint64_t)(uintptr_t)buf, size, 0};
    st = ixl_dlist_create(IXL_MEM_DRAM, 1, &dl);
    if (st == IXL_OK) {
        st = ixl_dlist_add(dl, &d, 1);
    }
    if (st == IXL_OK) {
        st = ixl_dlist_serialize(dl, &dls, &dl_len);
    }
    if (st != IXL_OK) {
        target_fail(md_fd, &h, NULL, "descriptor list", st);
        goto out;
    }
    st = ixl_md_get(agent, NULL, &md, &md_len);
    if (st != IXL_OK) {
        target_fail(md_fd, &h, agent, "ixl_md_get", st);
        goto out;
    }
    h.md_len = md_len;
    h.dl_len = dl_len;
    if (write_all(md_fd, &h, sizeof(h)) != 0 || write_all(md_fd, md, md_len) != 0 ||
        write_all(md_fd, dls, dl_len) != 0) {
        goto out;
    }
    target_wait(agent, ctl_fd);
    rc = 0;
out:
    ixl_free(md);
    ixl_free(dls);
    ixl_dlist_destroy(dl);
    if (registered && ixl_mem_deregister(agent, IXL_MEM_DRAM, &rd, 1, NULL) != IXL_OK)
        fprintf(stderr, "net_driver: deregister: %s\n", ixl_agent_last_error(agent));
    if (from_ixl) {
        if (ixl_mem_free(agent, buf) != IXL_OK)
            fprintf(stderr, "net_driver: ixl_mem_free: %s\n", ixl_agent_last_error(agent));
    } else {
        free(buf);
    }
    ixl_agent_destroy(agent);
    return rc;
}

/* Posts and waits; IXL_OK when the request completed. */
static ixl_status post_wait(struct ixl_xfer *x)
{
    ixl_status st = ixl_xfer_post(x);

    if (st == IXL_IN_PROGRESS) {
        st = ixl_xfer_wait(x, WAIT_MS);
    }
    return st;
}

static int run_ixl(const char *path, size_t size, unsigned iters, const struct ixl_kv *extra,
                   size_t n_extra)
{
    int md_pipe[2], ctl_pipe[2];
    struct target_hdr h;
    struct ixl_agent *agent = NULL;
    struct ixl_dlist *remote = NULL, *local = NULL, *back = NULL;
    struct ixl_xfer *wx = NULL, *rx = NULL;
    struct ixl_xfer_info info = {.size = sizeof(info)};
    struct ixl_reg_desc rd[2];
    unsigned char *src = NULL, *dst = NULL, *md = NULL, *dls = NULL;
    const char *used = "";
    char used_buf[32] = "";
    char note[320];
    bool registered = false;
    ixl_status st;
    pid_t pid;
    double t0 = 0, t1;
    int rc = 1, child_rc;

    if (size == 0) {
        fprintf(stderr, "net_driver: ixl needs a non-empty buffer\n");
        return 1;
    }
    if (pipe(md_pipe) != 0 || pipe(ctl_pipe) != 0) {
        perror("net_driver: pipe");
        return 1;
    }
    /* Fork before this process has any ixl state (threads, sockets). */
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        perror("net_driver: fork");
        return 1;
    }
    if (pid == 0) {
        close(md_pipe[0]);
        close(ctl_pipe[1]);
        _exit(ixl_target(size, extra, n_extra, md_pipe[1], ctl_pipe[0]));
    }
    close(md_pipe[1]);
    close(ctl_pipe[0]);

    if (read_all(md_pipe[0], &h, sizeof(h)) != 0) {
        fprintf(stderr, "net_driver: the target process died before sending its metadata\n");
        goto out;
    }
    h.reason[sizeof(h.reason) - 1] = '\0';
    if (h.status != 0) {
        print_result("ixl", path, NULL, size, iters, -1, h.reason);
        fprintf(stderr, "net_driver: target: %s\n", h.reason);
        rc = h.no_net ? EXIT_SKIP : 1;
        goto out;
    }
    if (h.md_len > (1u << 30) || h.dl_len > (1u << 30)) {
        fprintf(stderr, "net_driver: implausible metadata sizes from the target\n");
        goto out;
    }
    md = malloc(h.md_len ? h.md_len : 1);
    dls = malloc(h.dl_len ? h.dl_len : 1);
    if (md == NULL || dls == NULL || read_all(md_pipe[0], md, h.md_len) != 0 ||
        read_all(md_pipe[0], dls, h.dl_len) != 0) {
        fprintf(stderr, "net_driver: could not read the target's metadata\n");
        goto out;
    }

    {
        struct ixl_kv opts[1 + MAX_EXTRA] = {{"path", path}};
        memcpy(opts + 1, extra, n_extra * sizeof(*extra));
        st = ixl_agent_create("init", &no_default_backends, &agent);
        if (st != IXL_OK) {
            fprintf(stderr, "net_driver: ixl_agent_create: %s\n", ixl_strerror(st));
            goto out;
        }
        st = ixl_backend_create(agent, "NET", opts, 1 + n_extra, NULL);
        if (st != IXL_OK) {
            snprintf(note, sizeof(note), "%s: ixl_backend_create: %s: %s",
                     st == IXL_ERR_NOT_FOUND ? "NET unavailable" : "NET refused to start",
                     ixl_strerror(st), ixl_agent_last_error(agent));
            for (char *p = note; *p != '\0'; p++) {
                if (*p == '"' || *p == '\n') {
                    *p = '\'';
                }
            }
            print_result("ixl", path, NULL, size, iters, -1, note);
            fprintf(stderr, "net_driver: %s\n", note);
            rc = st == IXL_ERR_NOT_FOUND ? EXIT_SKIP : 1;
            goto out;
        }
    }
    src = alloc_buf(size);
    dst = alloc_buf(size);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "net_driver: out of memory for 2 x %zu bytes\n", size);
        goto out;
    }
    fill_pattern(src, size, 4);
    memset(dst, 0xA5, size); /* poison: the read-back must overwrite all of it */
    rd[0] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)src, size, 0, NULL, 0};
    rd[1] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)dst, size, 0, NULL, 0};
    st = ixl_mem_register(agent, IXL_MEM_DRAM, rd, 2, NULL);
    if (st != IXL_OK) {
        fprintf(stderr, "net_driver: ixl_mem_register: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(agent));
        goto out;
    }
    registered = true;
    st = ixl_md_load(agent, md, h.md_len, NULL, 0);
    if (st != IXL_OK) {
        fprintf(stderr, "net_driver: ixl_md_load: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(agent));
        goto out;
    }
    st = ixl_dlist_deserialize(dls, h.dl_len, &remote);
    if (st == IXL_OK) {
        struct ixl_desc d = {(uint64_t)(uintptr_t)src, size, 0};
        st = ixl_dlist_create(IXL_MEM_DRAM, 1, &local);
        if (st == IXL_OK) {
            st = ixl_dlist_add(local, &d, 1);
        }
    }
    if (st == IXL_OK) {
        struct ixl_desc d = {(uint64_t)(uintptr_t)dst, size, 0};
        st = ixl_dlist_create(IXL_MEM_DRAM, 1, &back);
        if (st == IXL_OK) {
            st = ixl_dlist_add(back, &d, 1);
        }
    }
    if (st != IXL_OK) {
        fprintf(stderr, "net_driver: descriptor lists: %s\n", ixl_strerror(st));
        goto out;
    }
    st = ixl_xfer_create(agent, IXL_OP_WRITE, local, remote, "target", NULL, &wx);
    if (st != IXL_OK) {
        fprintf(stderr, "net_driver: ixl_xfer_create(WRITE, path=%s): %s: %s\n", path,
                ixl_strerror(st), ixl_agent_last_error(agent));
        goto out;
    }
    for (unsigned i = 0; i <= iters; i++) {
        if (i == 1) {
            t0 = now_s(); /* iteration 0 is the warm-up (and connects) */
        }
        st = post_wait(wx);
        if (st != IXL_OK) {
            fprintf(stderr, "net_driver: WRITE %u (path=%s): %s: %s\n", i, path, ixl_strerror(st),
                    ixl_agent_last_error(agent));
            goto out;
        }
    }
    t1 = now_s();
    if (ixl_xfer_info(wx, &info) == IXL_OK && info.path != NULL) {
        snprintf(used_buf, sizeof(used_buf), "%s", info.path);
        used = used_buf;
    }

    /* Verify once: read the target's buffer back into the poisoned one. */
    st = ixl_xfer_create(agent, IXL_OP_READ, back, remote, "target", NULL, &rx);
    if (st == IXL_OK) {
        st = post_wait(rx);
    }
    if (st != IXL_OK) {
        fprintf(stderr, "net_driver: READ back (path=%s): %s: %s\n", path, ixl_strerror(st),
                ixl_agent_last_error(agent));
        goto out;
    }
    if (memcmp(src, dst, size) != 0) {
        size_t at = 0;
        while (at < size && src[at] == dst[at]) {
            at++;
        }
        fprintf(stderr, "net_driver: data mismatch after path=%s (used %s): first at byte %zu\n",
                path, used, at);
        print_result("ixl", path, used, size, iters, -1, "data mismatch");
        goto out;
    }
    snprintf(note, sizeof(note), "target buffer from malloc (ixl_mem_alloc failed)");
    print_result("ixl", path, used, size, iters, gbps(size, iters, t1 - t0),
                 h.malloc_fallback ? note : NULL);
    rc = 0;
out:
    /* A release refused (BUSY) leaves the request to ixl_agent_destroy() below. */
    if (ixl_xfer_release(rx) != IXL_OK || ixl_xfer_release(wx) != IXL_OK)
        fprintf(stderr, "net_driver: release: %s\n", ixl_agent_last_error(agent));
    ixl_dlist_destroy(back);
    ixl_dlist_destroy(local);
    ixl_dlist_destroy(remote);
    if (registered && ixl_mem_deregister(agent, IXL_MEM_DRAM, rd, 2, NULL) != IXL_OK)
        fprintf(stderr, "net_driver: deregister: %s\n", ixl_agent_last_error(agent));
    ixl_agent_destroy(agent);
    /* Closing the control pipe tells the target to exit. */
    close(ctl_pipe[1]);
    close(md_pipe[0]);
    child_rc = reap(pid);
    if (rc == 0 && child_rc != 0) {
        fprintf(stderr, "net_driver: target exited with status %d\n", child_rc);
        rc = 1;
    }
    free(md);
    free(dls);
    free(src);
    free(dst);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr,
            "usage: net_driver memcpy|pvm|tcp|tcplat|tcplat-poll|tcplat-chk|tcplat-poll-chk|"
            "tcplat-frame-poll SIZE ITERS\n"
            "       net_driver memcpy-mt|tcp-mt SIZE MS THREADS\n"
            "       net_driver ixl auto|shm|cma|tcp SIZE ITERS [KEY=VALUE...]\n"
            "SIZE takes K/M/G suffixes (binary); KEY=VALUE are NET options given to\n"
            "both processes' backends (at most 8); exit 77 when NET is unavailable\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *mode, *path = NULL;
    struct ixl_kv extra[MAX_EXTRA];
    size_t n_extra = 0;
    uint64_t size, iters;
    int a = 2;

    if (argc < 2) {
        return usage();
    }
    mode = argv[1];
    if (strcmp(mode, "ixl") == 0) {
        if (argc < 5 || argc > 5 + MAX_EXTRA) {
            return usage();
        }
        path = argv[a++];
        for (int i = 5; i < argc; i++) {
            char *eq = strchr(argv[i], '=');
            if (eq == NULL || eq == argv[i]) {
                return usage();
            }
            *eq = '\0';
            extra[n_extra++] = (struct ixl_kv){argv[i], eq + 1};
        }
    } else if (strcmp(mode, "memcpy-mt") == 0 || strcmp(mode, "tcp-mt") == 0) {
        uint64_t n;
        if (argc != 5 || parse_u64(argv[2], &size) != 0 || parse_u64(argv[3], &iters) != 0 ||
            parse_u64(argv[4], &n) != 0 || size == 0 || size > SIZE_MAX / 2 || iters == 0 ||
            iters > 600000 || n == 0 || n > 1024) {
            return usage();
        }
        if (strcmp(mode, "tcp-mt") == 0) {
            signal(SIGPIPE, SIG_IGN);
            return run_tcp_mt((size_t)size, (unsigned)iters, (unsigned)n);
        }
        return run_memcpy_mt((size_t)size, (unsigned)iters, (unsigned)n);
    } else if (argc != 4) {
        return usage();
    }
    if (parse_u64(argv[a], &size) != 0 || parse_u64(argv[a + 1], &iters) != 0 || size == 0 ||
        iters == 0 || iters > UINT_MAX || size > SIZE_MAX / 2) {
        return usage();
    }
    /* A dead peer must fail a write, not kill the driver. */
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(mode, "memcpy") == 0) {
        return run_memcpy((size_t)size, (unsigned)iters);
    }
    if (strcmp(mode, "pvm") == 0) {
        return run_pvm((size_t)size, (unsigned)iters);
    }
    if (strcmp(mode, "tcp") == 0) {
        return run_tcp((size_t)size, (unsigned)iters);
    }
    if (strcmp(mode, "tcplat") == 0 || strcmp(mode, "tcplat-poll") == 0 ||
        strcmp(mode, "tcplat-chk") == 0 || strcmp(mode, "tcplat-poll-chk") == 0) {
        return run_tcplat((size_t)size, (unsigned)iters, strncmp(mode, "tcplat-poll", 11) == 0,
                          strstr(mode, "-chk") != NULL, false);
    }
    if (strcmp(mode, "tcplat-frame-poll") == 0) {
        if (size > FRAME_SCRATCH - FRAME_HDR) {
            fprintf(stderr, "net_driver: tcplat-frame-poll takes at most %u bytes (one read)\n",
                    FRAME_SCRATCH - FRAME_HDR);
            return 2;
        }
        return run_tcplat((size_t)size, (unsigned)iters, true, false, true);
    }
    if (strcmp(mode, "ixl") == 0) {
        return run_ixl(path, (size_t)size, (unsigned)iters, extra, n_extra);
    }
    return usage();
}

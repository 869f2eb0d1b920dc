/*
 * bench_timer.c - what a timeout costs a thread that sleeps until a socket is readable.
 *
 * Two processes on one CPU ping-pong one byte over a UNIX socketpair; before each read both
 * sleep until the socket is readable in one of these ways (the rows):
 *   read        a blocking read (no timer; the floor)
 *   poll-inf    poll(2) without a timeout
 *   poll-1ms    poll(2) with a 1 ms timeout (ixl_xfer_wait's watch budget before issue 18's
 *               last pass: NET slept so on its socket, POSIX in its io_uring)
 *   poll-5ms, poll-20ms
 *   epoll-inf, epoll-30ms
 *                epoll_wait(2) without and with a timeout (NET's event loops)
 * The answer always comes before the timeout, so a row's extra cost over "read" is arming and
 * canceling the timer: on a virtual machine, a timer that becomes the CPU's next is
 * reprogrammed on each (a VM exit each time). Rounds interleave the rows; each row prints the
 * median of its rounds' mean round trips (us) and its ratio to "read".
 *
 * -C cpu2 puts the echoing child on another CPU: each wake-up then crosses CPUs and finds the
 * other CPU idle, where a timer armed before the sleep may be the one the idle CPU programs.
 *
 * Usage: bench_timer [-n round trips per run (20000)] [-r rounds (5)] [-c cpu (0)] [-C cpu2]
 */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { READ, POLL_INF, POLL_1, POLL_5, POLL_20, EPOLL_INF, EPOLL_30, NMODES };
static const char *names[NMODES] = {"read",      "poll-inf",  "poll-1ms",  "poll-5ms",
                                    "poll-20ms", "epoll-inf", "epoll-30ms"};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int sleep_until_readable(int mode, int fd, int ep)
{
    struct pollfd p = {fd, POLLIN, 0};
    struct epoll_event e;
    switch (mode) {
    case POLL_INF:
        return poll(&p, 1, -1);
    case POLL_1:
        return poll(&p, 1, 1);
    case POLL_5:
        return poll(&p, 1, 5);
    case POLL_20:
        return poll(&p, 1, 20);
    case EPOLL_INF:
        return epoll_wait(ep, &e, 1, -1);
    case EPOLL_30:
        return epoll_wait(ep, &e, 1, 30);
    default:
        return 1;
    }
}

static int watch(int fd)
{
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) {
        perror("bench_timer: epoll");
        exit(1);
    }
    return ep;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof(s), &s) != 0) {
        perror("bench_timer: sched_setaffinity");
        exit(1);
    }
}

/* Mean round trip (us) of n round trips in mode, both ends on cpu (the child on cpu2 when it
 * is >= 0). */
static double run(int mode, int n, int cpu, int cpu2)
{
    int sv[2];
    char b = 'x';
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("bench_timer: socketpair");
        exit(1);
    }
    pin(cpu);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench_timer: fork");
        exit(1);
    }
    if (pid == 0) {
        if (cpu2 >= 0)
            pin(cpu2);
        int ep = watch(sv[1]);
        for (int i = 0; i <= n; i++)
            if (sleep_until_readable(mode, sv[1], ep) < 0 || read(sv[1], &b, 1) != 1 ||
                write(sv[1], &b, 1) != 1)
                _exit(1);
        _exit(0);
    }
    int ep = watch(sv[0]);
    double t0 = 0;
    for (int i = 0; i <= n; i++) {
        if (i == 1)
            t0 = now_s(); /* after one warm-up round trip */
        if (write(sv[0], &b, 1) != 1 || sleep_until_readable(mode, sv[0], ep) < 0 ||
            read(sv[0], &b, 1) != 1) {
            perror("bench_timer: ping-pong");
            exit(1);
        }
    }
    double us = (now_s() - t0) / n * 1e6;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_timer: the echoing child failed\n");
        exit(1);
    }
    close(ep);
    close(sv[0]);
    close(sv[1]);
    return us;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = 20000, rounds = 5, cpu = 0, cpu2 = -1, c;
    while ((c = getopt(argc, argv, "n:r:c:C:")) != -1) {
        if (c == 'n')
            n = atoi(optarg);
        else if (c == 'r')
            rounds = atoi(optarg);
        else if (c == 'c')
            cpu = atoi(optarg);
        else if (c == 'C')
            cpu2 = atoi(optarg);
        else {
            fprintf(stderr, "usage: bench_timer [-n round trips] [-r rounds] [-c cpu] [-C cpu2]\n");
            return 2;
        }
    }
    if (n < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "bench_timer: -n must be >= 1 and -r 1..99\n");
        return 2;
    }
    double v[NMODES][99];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NMODES; k++) {
            int m = (k + r) % NMODES; /* rotating order */
            v[m][r] = run(m, n, cpu, cpu2);
        }
    if (cpu2 >= 0)
        printf("one-byte ping-pong over a socketpair, ends on CPUs %d and %d, %d round trips x "
               "%d rounds\n",
               cpu, cpu2, n, rounds);
    else
        printf("one-byte ping-pong over a socketpair, both ends on CPU %d, %d round trips x %d "
               "rounds\n",
               cpu, n, rounds);
    printf("%-11s %9s %9s %9s %8s\n", "row", "median us", "min", "max", "/ read");
    double base = 0;
    for (int m = 0; m < NMODES; m++) {
        qsort(v[m], (size_t)rounds, sizeof(double), cmp);
        double med = rounds % 2 ? v[m][rounds / 2] : (v[m][rounds / 2 - 1] + v[m][rounds / 2]) / 2;
        if (m == READ)
            base = med;
        printf("%-11s %9.2f %9.2f %9.2f %8.2f\n", names[m], med, v[m][0], v[m][rounds - 1],
               med / base);
    }
    return 0;
}

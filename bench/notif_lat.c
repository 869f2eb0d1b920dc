/*
 * bench/notif.sh's driver: NET notifications between two processes over loopback TCP (an agent
 * each, NET with its defaults and path=tcp, so that nothing same-node is involved).
 *
 *   notif_lat pp ITERS SIZE      ping-pong: this process sends a notification of SIZE bytes,
 *                                the other answers with one; prints the median and p99 round
 *                                trip in microseconds over ITERS (after ITERS/10 warm-up)
 *   notif_lat flood ITERS SIZE   one way: ITERS notifications of SIZE bytes back to back
 *                                (ixl_notif_send each), then one back when all arrived; prints
 *                                notifications per second
 *
 * Waiting is by the agent's file descriptor (poll, ixl_agent_progress, ixl_notif_drain): no
 * spinning thread competes with NET's loops for the cores. Exit status 0, or 1 on any error.
 * Only the public API, so the same source measures any build (bench/notif.sh A/B).
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, struct ixl_agent *a)
{
    fprintf(stderr, "notif_lat: %s: %s\n", what, a ? ixl_agent_last_error(a) : "");
    exit(1);
}

static int io_all(int fd, void *buf, size_t len, int wr)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static struct ixl_agent *agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    if (ixl_agent_create(name, &p, &a) != IXL_OK)
        die("ixl_agent_create", NULL);
    struct ixl_kv kv[] = {{"path", "tcp"}};
    if (ixl_backend_create(a, "NET", kv, 1, NULL) != IXL_OK)
        die("NET", a);
    return a;
}

/* Swaps metadata with the other process over fd and loads its. */
static void swap_md(struct ixl_agent *a, int fd)
{
    void *md;
    size_t len;
    if (ixl_md_get(a, NULL, &md, &len) != IXL_OK)
        die("ixl_md_get", a);
    uint64_t l64 = len, theirs;
    if (io_all(fd, &l64, sizeof(l64), 1) != 0 || io_all(fd, md, len, 1) != 0)
        die("metadata out", NULL);
    ixl_free(md);
    if (io_all(fd, &theirs, sizeof(theirs), 0) != 0 || theirs > (1u << 24))
        die("metadata in", NULL);
    void *in = malloc(theirs);
    if (in == NULL || io_all(fd, in, theirs, 0) != 0)
        die("metadata in", NULL);
    if (ixl_md_load(a, in, theirs, NULL, 0) != IXL_OK)
        die("ixl_md_load", a);
    free(in);
}

/* Waits until *got reaches want (notifications drained in all). */
static void wait_for(struct ixl_agent *a, int afd, uint64_t want, uint64_t *got)
{
    while (*got < want) {
        struct ixl_notif_batch *b = NULL;
        if (ixl_notif_drain(a, &b) != IXL_OK)
            die("ixl_notif_drain", a);
        if (b != NULL) {
            *got += b->count;
            ixl_free(b);
            continue;
        }
        struct pollfd p = {.fd = afd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1)
            die("no notification in 10 s", a);
        ixl_agent_progress(a);
    }
}

static void send1(struct ixl_agent *a, const char *to, const void *msg, size_t len)
{
    ixl_status st;
    while ((st = ixl_notif_send(a, to, msg, len, NULL)) == IXL_ERR_BUSY) {
    }
    if (st != IXL_OK)
        die("ixl_notif_send", a);
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "pp") != 0 && strcmp(argv[1], "flood") != 0)) {
        fprintf(stderr, "usage: notif_lat pp|flood ITERS SIZE\n");
        return 2;
    }
    int pp = strcmp(argv[1], "pp") == 0;
    long iters = atol(argv[2]);
    size_t size = (size_t)atol(argv[3]);
    if (iters < 1 || size < 8 || size > 65536)
        return 2;
    uint8_t *msg = calloc(1, size);
    int sv[2];
    if (msg == NULL || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    long warm = pp ? iters / 10 : 0;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    int child = pid == 0;
    int fd = child ? sv[1] : sv[0];
    close(child ? sv[0] : sv[1]);
    struct ixl_agent *a = agent(child ? "nl-b" : "nl-a");
    const char *peer = child ? "nl-a" : "nl-b";
    swap_md(a, fd);
    int afd;
    if (ixl_agent_fd(a, &afd) != IXL_OK)
        die("ixl_agent_fd", a);
    uint64_t got = 0;
    char c = 0;
    if (io_all(fd, &c, 1, 1) != 0 || io_all(fd, &c, 1, 0) != 0) /* both loaded */
        die("sync", NULL);
    if (child) {
        if (pp) {
            for (long i = 0; i < warm + iters; i++) {
                wait_for(a, afd, (uint64_t)i + 1, &got);
                send1(a, peer, msg, size);
            }
        } else {
            wait_for(a, afd, (uint64_t)iters, &got);
            send1(a, peer, msg, size);
        }
        io_all(fd, &c, 1, 0); /* the parent is done */
        ixl_agent_destroy(a);
        _exit(0);
    }
    if (pp) {
        double *rtt = malloc(sizeof(double) * (size_t)iters);
        if (rtt == NULL)
            return 1;
        for (long i = 0; i < warm + iters; i++) {
            memcpy(msg, &i, sizeof(i));
            double t0 = now_us();
            send1(a, peer, msg, size);
            wait_for(a, afd, (uint64_t)i + 1, &got);
            if (i >= warm)
                rtt[i - warm] = now_us() - t0;
        }
        qsort(rtt, (size_t)iters, sizeof(double), cmp_d);
        printf("pp %.1f %.1f\n", rtt[iters / 2], rtt[(size_t)((double)iters * 0.99)]);
        free(rtt);
    } else {
        double t0 = now_us();
        for (long i = 0; i < iters; i++) {
            memcpy(msg, &i, sizeof(i));
            send1(a, peer, msg, size);
        }
        wait_for(a, afd, 1, &got);
        printf("flood %.0f\n", (double)iters / ((now_us() - t0) / 1e6));
    }
    io_all(fd, &c, 1, 1);
    int ws;
    waitpid(pid, &ws, 0);
    ixl_agent_destroy(a);
    free(msg);
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : 1;
}

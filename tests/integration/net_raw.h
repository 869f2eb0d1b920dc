/*
 * Helpers of the issue-15 NET tests (test_net_peers, test_net_post_async, test_net_bounds,
 * test_net_slow_reader, and the later NET tests): failures and the hang guard, time, /proc
 * counters, the data pattern of net_common.h, small agents with a NET backend, and a raw client
 * speaking NET's wire format (plugins/net/net_wire.h, read only: frames are encoded here from the
 * format's description, as test_net_wire does).
 *
 * The raw-client functions use only system calls (no stdio, no malloc), so a child forked from a
 * process with ixl's threads running may call them.
 */
#ifndef IXL_TEST_NET_RAW_H
#define IXL_TEST_NET_RAW_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h"
#include "net_wire.h"

/* ---- failures and the hang guard -------------------------------------------------------- */

/* A FAIL line on stderr, counted in nr_failures (the test's exit status comes from it); any
 * thread may call it (the line is written whole, the count is atomic). */
static _Atomic int nr_failures __attribute__((unused));
static inline void nr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void nr_fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    (void)n;
    fprintf(stderr, "FAIL: %s\n", line);
    nr_failures++;
}

static const char *nr_guard_name __attribute__((unused));
static void (*nr_guard_on_hang)(void) __attribute__((unused));

static inline void nr_guard_fire(int sig)
{
    (void)sig;
    if (nr_guard_on_hang != NULL)
        nr_guard_on_hang();
    (void)!write(2, nr_guard_name, strlen(nr_guard_name));
    static const char msg[] = ": timed out (a hang)\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(1);
}

/* Arms the hang guard: after `seconds`, on_hang (when not NULL; async-signal-safe: it kills the
 * test's children) runs, "<name>: timed out (a hang)" is printed and the process exits 1. */
static inline void nr_guard(const char *name, unsigned seconds, void (*on_hang)(void))
{
    nr_guard_name = name;
    nr_guard_on_hang = on_hang;
    signal(SIGALRM, nr_guard_fire);
    alarm(seconds);
}

static inline double nr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void nr_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A test's cases: those named on the command line (all without any), each timed and reported
 * on stderr ("case NAME: ok" or "FAILED"); the exit status, 1 when a check failed. */
struct nr_case {
    const char *name;
    void (*fn)(void);
};

static inline int nr_run_cases(const struct nr_case *cases, size_t n, int argc, char **argv)
{
    double t0 = nr_now();
    for (size_t i = 0; i < n; i++) {
        bool run = argc < 2;
        for (int k = 1; k < argc; k++)
            run |= strcmp(argv[k], cases[i].name) == 0;
        if (!run)
            continue;
        double c0 = nr_now();
        int before = nr_failures;
        cases[i].fn();
        fprintf(stderr, "case %s: %s (%.1f s)\n", cases[i].name,
                nr_failures == before ? "ok" : "FAILED", nr_now() - c0);
    }
    fprintf(stderr, "took %.1f s\n", nr_now() - t0);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return 0;
}

/* A field of /proc/self/status (or of pid's) such as "Threads:"; -1 when missing. */
static inline long nr_proc_field(pid_t pid, const char *field)
{
    char path[64], line[256];
    long v = -1;
    if (pid > 0)
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof(path), "/proc/self/status");
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, strlen(field)) == 0)
            v = strtol(line + strlen(field), NULL, 10);
    fclose(f);
    return v;
}

static inline int nr_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static inline int nr_read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- agents ---------------------------------------------------------------------------- */

/* An agent named name with only a NET backend, with the options given (NULL-terminated pairs
 * of key, value). On a refusal: the status, and the reason in why (why_cap bytes). */
static inline ixl_status nr_agent(const char *name, const char *const *kv, struct ixl_agent **out,
                                  char *why, size_t why_cap)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_kv opts[32];
    size_t n = 0;
    struct ixl_agent *a = NULL;
    for (; kv != NULL && kv[2 * n] != NULL && n < 32; n++)
        opts[n] = (struct ixl_kv){kv[2 * n], kv[2 * n + 1]};
    ixl_status st = ixl_agent_create(name, &p, &a);
    if (st != IXL_OK) {
        snprintf(why, why_cap, "ixl_agent_create %s: %s", name, ixl_agent_last_error(NULL));
        return st;
    }
    st = ixl_backend_create(a, "NET", opts, n, NULL);
    if (st != IXL_OK) {
        snprintf(why, why_cap, "NET of %s: %s", name, ixl_agent_last_error(a));
        ixl_agent_destroy(a);
        return st;
    }
    *out = a;
    return IXL_OK;
}

static inline ixl_status nr_xfer(struct ixl_agent *a, enum ixl_op op, const void *local,
                                 uint64_t remote, uint64_t len, const char *peer,
                                 struct ixl_xfer **out)
{
    struct ixl_dlist *l = NULL, *r = NULL;
    struct ixl_desc dl = {(uint64_t)(uintptr_t)local, len, 0}, dr = {remote, len, 0};
    ixl_status st = ixl_dlist_create(IXL_MEM_DRAM, 1, &l);
    if (st == IXL_OK)
        st = ixl_dlist_add(l, &dl, 1);
    if (st == IXL_OK)
        st = ixl_dlist_create(IXL_MEM_DRAM, 1, &r);
    if (st == IXL_OK)
        st = ixl_dlist_add(r, &dr, 1);
    if (st == IXL_OK)
        st = ixl_xfer_create(a, op, l, r, peer, NULL, out);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return st;
}

static inline ixl_status nr_post_wait(struct ixl_xfer *x, int ms)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, ms);
    return st;
}

/* rounds checked WRITEs and READs of len bytes from a (src, registered there) to peer's dst
 * (registered there, in this process): before each WRITE a fresh pattern at src and dst
 * poisoned, after it dst checked; then src poisoned, READ back, src checked. Failures go to
 * nr_fail, prefixed by what. */
static inline void nr_checked_rw(struct ixl_agent *a, uint8_t *src, uint8_t *dst, size_t len,
                                 unsigned rounds, uint64_t seed0, const char *peer,
                                 const char *what)
{
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t seed = seed0 + r;
        net_pat_fill(src, len, seed, 0);
        memset(dst, 0xa5, len);
        struct ixl_xfer *x = NULL;
        CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, (uint64_t)(uintptr_t)dst, len, peer, &x), IXL_OK);
        ixl_status st = nr_post_wait(x, 10000);
        if (st != IXL_OK)
            nr_fail("%s: WRITE %u: %s: %s", what, r, ixl_strerror(st), ixl_agent_last_error(a));
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        size_t bad = net_pat_find_bad(dst, len, seed, 0);
        if (bad != len)
            nr_fail("%s: WRITE %u: the target's byte %zu is wrong", what, r, bad);
        memset(src, 0x5a, len);
        CHECK_RC(nr_xfer(a, IXL_OP_READ, src, (uint64_t)(uintptr_t)dst, len, peer, &x), IXL_OK);
        st = nr_post_wait(x, 10000);
        if (st != IXL_OK)
            nr_fail("%s: READ %u: %s: %s", what, r, ixl_strerror(st), ixl_agent_last_error(a));
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        bad = net_pat_find_bad(src, len, seed, 0);
        if (bad != len)
            nr_fail("%s: READ %u: byte %zu is wrong", what, r, bad);
    }
}

/* ---- what a raw client needs from a target's metadata ------------------------------------ */

struct nr_target {
    uint16_t port;
    uint64_t instance;
};

static inline uint64_t nr_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void nr_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Port and instance from NET's connection info in an agent's metadata ("IXLNETC3" u64 instance
 * u32 0 u8[24] host u8 local u64 socket id u16 port ...; net_engine.c). */
static inline void nr_learn_blob(const void *blob, size_t len, struct nr_target *t)
{
    const uint8_t *c = memmem(blob, len, "IXLNETC3", 8);
    CHECK(c != NULL && (size_t)(c - (const uint8_t *)blob) + 64 <= len);
    t->instance = nr_get(c + 8, 8);
    t->port = (uint16_t)nr_get(c + 53, 2);
    CHECK(t->port != 0);
}

static inline void nr_learn(struct ixl_agent *a, struct nr_target *t)
{
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &len), IXL_OK);
    nr_learn_blob(blob, len, t);
    ixl_free(blob);
}

/* The key NET gave the region [addr, addr + len) (its public data: "NUB1" u64 key u64 addr
 * u64 len ...). */
static inline uint64_t nr_region_key(struct ixl_agent *a, uint64_t addr, uint64_t rlen)
{
    void *blob;
    size_t len;
    uint64_t key = 0;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &len), IXL_OK);
    const uint8_t *p = blob, *end = p + len;
    while (p + 28 <= end && (p = memmem(p, (size_t)(end - p), "NUB1", 4)) != NULL &&
           p + 28 <= end) {
        if (nr_get(p + 12, 8) == addr && nr_get(p + 20, 8) == rlen) {
            key = nr_get(p + 4, 8);
            break;
        }
        p += 4;
    }
    ixl_free(blob);
    CHECK(key != 0);
    return key;
}

/* ---- the raw client: system calls only ---------------------------------------------------- */

/* A TCP connection to 127.0.0.1:port (rcvbuf > 0: SO_RCVBUF set before connecting); -1 on
 * failure. Receives time out after recv_ms. */
static inline int nr_connect(uint16_t port, int rcvbuf, int recv_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct timeval tv = {recv_ms / 1000, (recv_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A frame header (net_wire.h): magic, version, op, flags, status, chunk, req, addr, len, key. */
static inline void nr_hdr(uint8_t out[NET_HDR_BYTES], uint8_t op, uint64_t req, uint64_t addr,
                          uint64_t len, uint64_t key)
{
    memset(out, 0, NET_HDR_BYTES);
    nr_put(out, NET_MAGIC, 4);
    out[4] = NET_WIRE_VERSION;
    out[5] = op;
    nr_put(out + 16, req, 8);
    nr_put(out + 24, addr, 8);
    nr_put(out + 32, len, 8);
    nr_put(out + 40, key, 8);
}

static inline int nr_send(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends a HELLO from name to the target instance (header and payload in one send). */
static inline int nr_send_hello(int fd, uint64_t instance, const char *name)
{
    uint8_t b[NET_HDR_BYTES + NET_HELLO_MAX];
    size_t n = strlen(name);
    uint8_t *pl = b + NET_HDR_BYTES;
    nr_put(pl, 0x1234, 8); /* from_instance */
    nr_put(pl + 8, instance, 8);
    nr_put(pl + 16, n, 2);
    memcpy(pl + 18, name, n);
    nr_hdr(b, NET_HELLO, 77, 0, 18 + n, 0);
    return nr_send(fd, b, NET_HDR_BYTES + 18 + n);
}

static inline int nr_recv_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Waits for HELLO_ACK: its status (0 = OK), or -1000 when the connection ended or timed out. */
static inline int nr_hello_ack(int fd)
{
    uint8_t h[NET_HDR_BYTES];
    if (nr_recv_all(fd, h, sizeof(h)) != 0 || nr_get(h, 4) != NET_MAGIC || h[5] != NET_HELLO_ACK)
        return -1000;
    return (int)(int32_t)(uint32_t)nr_get(h + 8, 4);
}

/* 1 when the peer closed the connection (end of stream or reset), 0 when it is open with
 * nothing to read; bytes waiting are read and dropped (a HELLO_ACK, say). */
static inline int nr_closed(int fd)
{
    uint8_t b[256];
    for (;;) {
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return 1;
        if (n < 0 && errno == EINTR)
            continue;
        return 0;
    }
}

/* ---- the log: the lines ixl logged in this process, kept for a test's checks -------------- */

static pthread_mutex_t nr_log_lock __attribute__((unused)) = PTHREAD_MUTEX_INITIALIZER;
static char nr_log_text[16384] __attribute__((unused));
static size_t nr_log_len __attribute__((unused));

/* For ixl_log_set_sink: appends the line (what does not fit in nr_log_text is dropped). */
static inline void nr_log_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    pthread_mutex_lock(&nr_log_lock);
    int n = snprintf(nr_log_text + nr_log_len, sizeof(nr_log_text) - nr_log_len, "%s\n", msg);
    if (n > 0 && nr_log_len + (size_t)n < sizeof(nr_log_text))
        nr_log_len += (size_t)n;
    pthread_mutex_unlock(&nr_log_lock);
}

static inline bool nr_log_has(const char *what)
{
    pthread_mutex_lock(&nr_log_lock);
    bool has = strstr(nr_log_text, what) != NULL;
    pthread_mutex_unlock(&nr_log_lock);
    return has;
}

static inline void nr_log_clear(void)
{
    pthread_mutex_lock(&nr_log_lock);
    nr_log_len = 0;
    nr_log_text[0] = '\0';
    pthread_mutex_unlock(&nr_log_lock);
}

/* ---- a fake target: a socket in this process that speaks NET's wire ------------------------ */

struct nr_fake {
    int lfd;
    uint16_t port;
    void *md; /* metadata of an agent, its NET port replaced by the fake's */
    size_t md_len;
    uint8_t *conn; /* its NET connection info in md */
    uint64_t key;  /* the key of the region given to nr_fake_open (0: none) */
};

/* A listening socket on 127.0.0.1 and the metadata of a real NET agent named name (no cluster
 * key: no MAC) with its port replaced by the socket's; with region [addr, addr + rlen) (rlen >
 * 0) registered there first, so that WRITEs and READs to it are posted to the fake. */
static inline void nr_fake_open(struct nr_fake *f, const char *name, const void *addr, size_t rlen)
{
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(f->lfd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(f->lfd, 8) == 0);
    socklen_t sl = sizeof(sa);
    CHECK(getsockname(f->lfd, (struct sockaddr *)&sa, &sl) == 0);
    f->port = ntohs(sa.sin_port);
    struct ixl_agent *a = NULL;
    char why[512];
    ixl_status st = nr_agent(name, NULL, &a, why, sizeof(why));
    if (st != IXL_OK)
        fprintf(stderr, "%s\n", why);
    CHECK_RC(st, IXL_OK);
    f->key = 0;
    if (rlen > 0) {
        struct ixl_reg_desc d = {.addr = (uintptr_t)addr, .len = rlen};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
        f->key = nr_region_key(a, (uintptr_t)addr, rlen);
    }
    CHECK_RC(ixl_md_get(a, NULL, &f->md, &f->md_len), IXL_OK);
    ixl_agent_destroy(a);
    f->conn = memmem(f->md, f->md_len, "IXLNETC3", 8);
    CHECK(f->conn != NULL && f->conn + 64 <= (uint8_t *)f->md + f->md_len);
    nr_put(f->conn + 53, f->port, 2);
}

static inline void nr_fake_close(struct nr_fake *f)
{
    close(f->lfd);
    ixl_free(f->md);
}

/* A connection from an initiator within ms: accepted, its HELLO read (*acked: its
 * notif_acked; *to_instance when not NULL) and answered with HELLO_ACK OK carrying ack.
 * Receives on it time out after ms. -1 when none came in time. */
static inline int nr_fake_accept(struct nr_fake *f, uint64_t ack, uint64_t *acked,
                                 uint64_t *to_instance, int ms)
{
    struct pollfd pfd = {.fd = f->lfd, .events = POLLIN};
    if (poll(&pfd, 1, ms) != 1)
        return -1;
    int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint8_t h[NET_HDR_BYTES], pl[NET_HELLO_MAX];
    CHECK(nr_recv_all(fd, h, sizeof(h)) == 0 && h[5] == NET_HELLO);
    uint64_t len = nr_get(h + 32, 8);
    CHECK(len >= 18 && len <= NET_HELLO_MAX && nr_recv_all(fd, pl, (size_t)len) == 0);
    size_t n = (size_t)nr_get(pl + 16, 2);
    CHECK(len == 26 + n); /* wire version 2: the ack it saw ends the payload */
    *acked = nr_get(pl + 18 + n, 8);
    if (to_instance)
        *to_instance = nr_get(pl + 8, 8);
    uint8_t a[NET_HDR_BYTES];
    nr_hdr(a, NET_HELLO_ACK, nr_get(h + 16, 8), 0, 0, ack);
    nr_put(a + 6, NET_F_ACK, 2);
    CHECK(nr_send(fd, a, sizeof(a)) == 0);
    return fd;
}

#endif

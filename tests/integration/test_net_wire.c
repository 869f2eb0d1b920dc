/*
 * NET's target side against a hostile client: this process creates agent "target" with a NET
 * backend, registers two regions inside one larger buffer (guard bytes around and between
 * them), learns the listener's port, the agent's instance and the regions' keys by decoding
 * its own metadata blob (codec.h and net_engine.c give the layouts), and then talks to the
 * listener with plain sockets, forging every frame by hand from net_wire.h's description.
 *
 *   test_net_wire          correct frames, refusals, truncated and garbage frames,
 *                          notifications, an idle client, 100 concurrent clients, a pipeline
 *   test_net_wire stall    clients that stall mid-frame or stop reading must not hold the
 *                          target's region lock (registration, deregistration and agent
 *                          destroy go on), and a client dripping its HELLO a byte at a time
 *                          is dropped after timeout_ms, as net_serve_fd() promises
 *
 * The backend runs with timeout_ms=500 so that the timeouts are quick to observe.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_wire.h"

#define TIMEOUT_MS 500
#define GUARD (64u << 10)
#define A_LEN (2u << 20)
#define B_LEN (64u << 10)
#define A_OFF GUARD
#define B_OFF (GUARD + A_LEN + GUARD)
#define BUF_LEN (B_OFF + B_LEN + GUARD)
#define N_CLIENTS 100
#define CLIENT_SLICE (16u << 10)
#define CLIENT_ROUNDS 20
#define RECV_TIMEOUT_S 5

struct target {
    struct ixl_agent *agent;
    uint8_t *buf; /* guard | A | guard | B | guard; only A and B are registered */
    uint64_t a, b;
    uint64_t key_a, key_b;
    uint64_t instance;
    uint16_t port;
};

/* A frame header as net_wire.h describes it. */
struct frame {
    uint8_t version, op;
    uint16_t flags;
    int32_t status;
    uint32_t chunk;
    uint64_t req, addr, len, key;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- little-endian encoding, written from the format's description --------------------- */

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void frame_encode(const struct frame *f, uint8_t out[NET_HDR_BYTES])
{
    put(out, NET_MAGIC, 4);
    out[4] = f->version ? f->version : NET_WIRE_VERSION;
    out[5] = f->op;
    put(out + 6, f->flags, 2);
    put(out + 8, (uint32_t)f->status, 4);
    put(out + 12, f->chunk, 4);
    put(out + 16, f->req, 8);
    put(out + 24, f->addr, 8);
    put(out + 32, f->len, 8);
    put(out + 40, f->key, 8);
}

static void frame_decode(const uint8_t in[NET_HDR_BYTES], struct frame *f)
{
    CHECK(get(in, 4) == NET_MAGIC);
    f->version = in[4];
    CHECK(f->version == NET_WIRE_VERSION);
    f->op = in[5];
    f->flags = (uint16_t)get(in + 6, 2);
    f->status = (int32_t)(uint32_t)get(in + 8, 4);
    f->chunk = (uint32_t)get(in + 12, 4);
    f->req = get(in + 16, 8);
    f->addr = get(in + 24, 8);
    f->len = get(in + 32, 8);
    f->key = get(in + 40, 8);
}

/* ---- the target and its metadata ------------------------------------------------------- */

static uint8_t poison_at(size_t i)
{
    return (uint8_t)(0xa5u ^ (i * 131u) ^ (i >> 9));
}

static void poison(struct target *t)
{
    for (size_t i = 0; i < BUF_LEN; i++)
        t->buf[i] = poison_at(i);
}

/* Every byte of buf[off, off + len) still holds the poison. */
static void check_untouched_at(const char *file, int line, const struct target *t, size_t off,
                               size_t len)
{
    for (size_t i = off; i < off + len; i++)
        if (t->buf[i] != poison_at(i))
            check_fail(file, line, "byte %zu of the buffer (%s) was written", i,
                       i < A_OFF                   ? "guard before A"
                       : i < A_OFF + A_LEN         ? "region A"
                       : i < B_OFF                 ? "guard between A and B"
                       : i < B_OFF + (size_t)B_LEN ? "region B"
                                                   : "guard after B");
}
#define CHECK_UNTOUCHED(t, off, len) check_untouched_at(__FILE__, __LINE__, (t), (off), (len))

struct rd {
    const uint8_t *p;
    size_t left;
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
    CHECK(r->left >= n);
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t rd_u(struct rd *r, int n)
{
    return get(rd_take(r, (size_t)n), n);
}

/* Reads port, instance and the keys of A and B out of the agent's metadata blob. */
static void learn_md(struct target *t)
{
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(t->agent, NULL, &blob, &len), IXL_OK);
    struct rd r = {blob, len};
    CHECK(memcmp(rd_take(&r, 4), "IXLM", 4) == 0);
    CHECK(rd_u(&r, 2) == 1); /* version */
    uint16_t flags = (uint16_t)rd_u(&r, 2);
    rd_u(&r, 8);
    size_t nlen = (size_t)rd_u(&r, 2);
    CHECK(nlen == 6 && memcmp(rd_take(&r, nlen), "target", 6) == 0);
    size_t nb = (size_t)rd_u(&r, 2);
    int net = -1;
    for (size_t i = 0; i < nb; i++) {
        size_t bl = (size_t)rd_u(&r, 1);
        const uint8_t *bn = rd_take(&r, bl);
        size_t cl = (size_t)rd_u(&r, 4);
        const uint8_t *c = rd_take(&r, cl);
        if (bl != 3 || memcmp(bn, "NET", 3) != 0)
            continue;
        net = (int)i;
        /* "IXLNETC3" u64 instance u32 0 u8[24] host u8 local u64 socket id u16 port u8 n u32[n]
         * u32 notif_max */
        CHECK(cl >= 64 && memcmp(c, "IXLNETC3", 8) == 0);
        t->instance = get(c + 8, 8);
        t->port = (uint16_t)get(c + 53, 2);
        CHECK(c[55] == 1 && cl == 64);
        CHECK(get(c + 60, 4) == IXL_NOTIF_MAX_DEFAULT);
        CHECK(get(c + 56, 4) == (uint64_t)htonl(INADDR_LOOPBACK)); /* addrs=127.0.0.1 */
    }
    CHECK(net >= 0 && t->port != 0);
    size_t nr = (size_t)rd_u(&r, 4);
    int found = 0;
    for (size_t i = 0; i < nr; i++) {
        unsigned backend = (unsigned)rd_u(&r, 2);
        CHECK(rd_u(&r, 1) == IXL_MEM_DRAM);
        uint64_t addr = rd_u(&r, 8), rlen = rd_u(&r, 8);
        rd_u(&r, 8);
        size_t pl = (size_t)rd_u(&r, 4);
        const uint8_t *pub = rd_take(&r, pl);
        if (backend != (unsigned)net)
            continue;
        /* u32 "NUB1" u64 key u64 addr u64 len i32 memfd u64 off u64 size */
        CHECK(pl == 48 && get(pub, 4) == 0x3142554eu);
        CHECK(get(pub + 12, 8) == addr && get(pub + 20, 8) == rlen);
        if (addr == t->a && rlen == A_LEN) {
            t->key_a = get(pub + 4, 8);
            found |= 1;
        } else if (addr == t->b && rlen == B_LEN) {
            t->key_b = get(pub + 4, 8);
            found |= 2;
        }
    }
    if (flags & 4u) /* a label */
        rd_take(&r, (size_t)rd_u(&r, 2));
    CHECK(r.left == 0);
    CHECK(found == 3 && t->key_a != t->key_b);
    ixl_free(blob);
}

static void target_start(struct target *t)
{
    memset(t, 0, sizeof(*t));
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
                                 .backends = "",
                                 .notif_max = IXL_NOTIF_MAX_DEFAULT};
    CHECK_RC(ixl_agent_create("target", &p, &t->agent), IXL_OK);
    const struct ixl_kv kv[] = {
        {"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}, {"timeout_ms", "500"}};
    CHECK_RC(ixl_backend_create(t->agent, "NET", kv, 3, NULL), IXL_OK);
    t->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(t->buf != MAP_FAILED);
    poison(t);
    t->a = (uintptr_t)(t->buf + A_OFF);
    t->b = (uintptr_t)(t->buf + B_OFF);
    struct ixl_reg_desc d[2] = {{t->a, A_LEN, 0, NULL, 0}, {t->b, B_LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(t->agent, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    learn_md(t);
}

static void target_stop(struct target *t)
{
    ixl_agent_destroy(t->agent);
    munmap(t->buf, BUF_LEN);
    t->agent = NULL;
}

/* ---- a raw client ---------------------------------------------------------------------- */

static int cl_connect(const struct target *t)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct timeval tv = {RECV_TIMEOUT_S, 0};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
    CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(t->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    return fd;
}

/* Sends every byte; 0, or -1 when the target closed the connection meanwhile. */
static int send_bytes(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return -1;
        CHECK(n > 0);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void send_all(int fd, const void *buf, size_t len)
{
    CHECK(send_bytes(fd, buf, len) == 0);
}

static void send_frame(int fd, const struct frame *f, const void *payload, size_t n)
{
    uint8_t raw[NET_HDR_BYTES];
    frame_encode(f, raw);
    send_all(fd, raw, sizeof(raw));
    if (n > 0)
        send_all(fd, payload, n);
}

/* Reads exactly len bytes: 0, -1 at end of stream (or reset); fails the test on a timeout. */
static int recv_exact(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            check_fail(__FILE__, __LINE__, "no answer from the target in %d s", RECV_TIMEOUT_S);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return -1;
        CHECK(n > 0);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void recv_frame(int fd, struct frame *f)
{
    uint8_t raw[NET_HDR_BYTES];
    CHECK(recv_exact(fd, raw, sizeof(raw)) == 0);
    frame_decode(raw, f);
}

/* The target closes the connection without sending anything (more). */
static void expect_closed_at(const char *file, int line, int fd)
{
    uint8_t b;
    for (;;) {
        ssize_t n = recv(fd, &b, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return;
        if (n > 0)
            check_fail(file, line, "the target sent a byte where it should close the connection");
        check_fail(file, line, "the target did not close the connection in %d s", RECV_TIMEOUT_S);
    }
}
#define EXPECT_CLOSED(fd) expect_closed_at(__FILE__, __LINE__, (fd))

static size_t hello_payload(uint64_t to_instance, const char *name, uint8_t *out)
{
    size_t n = strlen(name);
    put(out, 0x1234, 8); /* from_instance: the target does not care */
    put(out + 8, to_instance, 8);
    put(out + 16, n, 2);
    memcpy(out + 18, name, n);
    return 18 + n;
}

static void send_hello(int fd, uint64_t to_instance, const char *name, uint64_t req)
{
    uint8_t pl[NET_HELLO_MAX];
    size_t n = hello_payload(to_instance, name, pl);
    struct frame f = {.op = NET_HELLO, .req = req, .len = n};
    send_frame(fd, &f, pl, n);
}

/* A connection that said HELLO and got HELLO_ACK OK. */
static int cl_open(const struct target *t, const char *name)
{
    int fd = cl_connect(t);
    send_hello(fd, t->instance, name, 77);
    struct frame f;
    recv_frame(fd, &f);
    CHECK(f.op == NET_HELLO_ACK && f.status == 0 && f.len == 0 && f.req == 77);
    return fd;
}

static void ping(int fd, uint64_t req)
{
    struct frame f = {.op = NET_PING, .req = req};
    send_frame(fd, &f, NULL, 0);
    recv_frame(fd, &f);
    while (f.op == NET_NOTIF_ACK) /* acks of notifications sent before, at the tick */
        recv_frame(fd, &f);
    CHECK(f.op == NET_PONG && f.req == req && f.status == 0 && f.len == 0);
}

/* WRITE; returns the WRITE_ACK's status. */
static int do_write(int fd, uint64_t addr, uint64_t key, const void *data, size_t len, uint64_t req)
{
    struct frame f = {
        .op = NET_WRITE, .req = req, .chunk = 3, .addr = addr, .len = len, .key = key};
    send_frame(fd, &f, data, len);
    recv_frame(fd, &f);
    CHECK(f.op == NET_WRITE_ACK && f.req == req && f.chunk == 3 && f.len == 0);
    return f.status;
}

/* READ; returns READ_DATA's status; the data lands in out (len bytes) when it is OK. A PING
 * follows a READ that carried data: ThreadSanitizer records the target's read of the region
 * after the send that carried it, so only a later answer orders that read before this test's
 * next writes into the region. */
static int do_read(int fd, uint64_t addr, uint64_t key, void *out, size_t len, uint64_t req)
{
    struct frame f = {.op = NET_READ, .req = req, .chunk = 9, .addr = addr, .len = len, .key = key};
    send_frame(fd, &f, NULL, 0);
    recv_frame(fd, &f);
    CHECK(f.op == NET_READ_DATA && f.req == req && f.chunk == 9);
    if (f.status != 0) {
        CHECK(f.len == 0);
        return f.status;
    }
    CHECK(f.len == len);
    CHECK(recv_exact(fd, out, len) == 0);
    ping(fd, req ^ 0x50494e47u);
    return 0;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(seed * 73u + i * 29u + (i >> 8));
}

/* A correct connection still gets served. */
static void check_alive(struct target *t)
{
    int fd = cl_open(t, "alive-check");
    ping(fd, 5);
    uint8_t tmp[64];
    CHECK_RC(do_read(fd, t->b, t->key_b, tmp, sizeof(tmp), 6), IXL_OK);
    close(fd);
}

static struct ixl_notif_batch *drain(struct target *t)
{
    struct ixl_notif_batch *b = NULL;
    CHECK_RC(ixl_notif_drain(t->agent, &b), IXL_OK);
    return b;
}

/* ---- cases ------------------------------------------------------------------------------ */

static void case_basic(struct target *t)
{
    poison(t);
    int fd = cl_open(t, "wire-client");
    uint8_t data[4096], back[4096];
    fill(data, sizeof(data), 1);
    CHECK_RC(do_write(fd, t->a + 100, t->key_a, data, sizeof(data), 11), IXL_OK);
    CHECK(memcmp(t->buf + A_OFF + 100, data, sizeof(data)) == 0);
    CHECK_UNTOUCHED(t, 0, A_OFF + 100);
    CHECK_UNTOUCHED(t, A_OFF + 100 + sizeof(data), BUF_LEN - (A_OFF + 100 + sizeof(data)));
    CHECK_RC(do_read(fd, t->a + 100, t->key_a, back, sizeof(back), 12), IXL_OK);
    CHECK(memcmp(back, data, sizeof(data)) == 0);
    ping(fd, 13);

    /* The exact ends of both regions, and all of each. */
    CHECK_RC(do_write(fd, t->a + A_LEN - 16, t->key_a, data, 16, 14), IXL_OK);
    CHECK(memcmp(t->buf + A_OFF + A_LEN - 16, data, 16) == 0);
    CHECK_RC(do_write(fd, t->b, t->key_b, data, 1, 15), IXL_OK);
    CHECK(t->buf[B_OFF] == data[0]);
    uint8_t *whole = malloc(A_LEN);
    CHECK(whole != NULL);
    CHECK_RC(do_read(fd, t->a, t->key_a, whole, A_LEN, 16), IXL_OK);
    CHECK(memcmp(whole, t->buf + A_OFF, A_LEN) == 0);
    fill(whole, B_LEN, 2);
    CHECK_RC(do_write(fd, t->b, t->key_b, whole, B_LEN, 17), IXL_OK);
    CHECK(memcmp(t->buf + B_OFF, whole, B_LEN) == 0);
    free(whole);
    CHECK_UNTOUCHED(t, 0, A_OFF);
    CHECK_UNTOUCHED(t, A_OFF + A_LEN, B_OFF - (A_OFF + A_LEN));
    CHECK_UNTOUCHED(t, B_OFF + B_LEN, GUARD);
    close(fd);
}

static void case_hello(struct target *t)
{
    /* The wrong instance: a nonzero HELLO_ACK, then the end. */
    int fd = cl_connect(t);
    send_hello(fd, t->instance ^ 1, "wire-stale", 21);
    struct frame f;
    recv_frame(fd, &f);
    CHECK(f.op == NET_HELLO_ACK && f.status != 0 && f.req == 21);
    EXPECT_CLOSED(fd);
    close(fd);

    /* Anything but a well-formed HELLO first: the end, with no answer and nothing written. */
    poison(t);
    fd = cl_connect(t);
    uint8_t data[64];
    fill(data, sizeof(data), 3);
    f = (struct frame){.op = NET_WRITE, .addr = t->a, .len = sizeof(data), .key = t->key_a};
    send_frame(fd, &f, data, sizeof(data));
    EXPECT_CLOSED(fd);
    close(fd);
    CHECK_UNTOUCHED(t, 0, BUF_LEN);

    fd = cl_connect(t); /* a name with a NUL in it */
    uint8_t pl[64];
    size_t n = hello_payload(t->instance, "badXname", pl);
    pl[18 + 3] = '\0';
    f = (struct frame){.op = NET_HELLO, .len = n};
    send_frame(fd, &f, pl, n);
    EXPECT_CLOSED(fd);
    close(fd);

    fd = cl_connect(t); /* a payload longer than its name */
    n = hello_payload(t->instance, "name", pl);
    f = (struct frame){.op = NET_HELLO, .len = n + 1};
    pl[n] = 'x';
    send_frame(fd, &f, pl, n + 1);
    EXPECT_CLOSED(fd);
    close(fd);

    fd = cl_connect(t); /* a HELLO longer than NET_HELLO_MAX */
    f = (struct frame){.op = NET_HELLO, .len = NET_HELLO_MAX + 1};
    send_frame(fd, &f, NULL, 0);
    EXPECT_CLOSED(fd);
    close(fd);
    check_alive(t);
}

/* One refused WRITE of len payload bytes (sent in full): WRITE_ACK REMOTE_REFUSED, nothing
 * written anywhere, the connection still serves. */
static void refused_write(struct target *t, int fd, uint64_t addr, uint64_t key, size_t len,
                          int line)
{
    static uint8_t data[A_LEN + 1];
    poison(t);
    fill(data, len, (unsigned)line);
    int st = do_write(fd, addr, key, data, len, (uint64_t)line);
    if (st != IXL_ERR_REMOTE_REFUSED)
        check_fail(__FILE__, line, "WRITE at 0x%llx+%zu got status %d, want %d",
                   (unsigned long long)addr, len, st, IXL_ERR_REMOTE_REFUSED);
    check_untouched_at(__FILE__, line, t, 0, BUF_LEN);
    ping(fd, (uint64_t)line + 1000);
}

static void case_write_refused(struct target *t)
{
    int fd = cl_open(t, "wire-write");
    uint64_t a = t->a, b = t->b, ka = t->key_a, kb = t->key_b;
    refused_write(t, fd, a - 1, ka, 16, __LINE__);            /* straddles A's start */
    refused_write(t, fd, a - 4096, ka, 16, __LINE__);         /* below A */
    refused_write(t, fd, a + A_LEN - 8, ka, 16, __LINE__);    /* straddles A's end */
    refused_write(t, fd, a + A_LEN, ka, 1, __LINE__);         /* just past A */
    refused_write(t, fd, a + A_LEN + 4096, ka, 16, __LINE__); /* in the guard after A */
    refused_write(t, fd, a, ka, A_LEN + 1, __LINE__);         /* longer than A */
    refused_write(t, fd, UINT64_MAX - 7, ka, 16, __LINE__);   /* addr + len wraps */
    refused_write(t, fd, a + 16, kb, 16, __LINE__);           /* B's key, A's address */
    refused_write(t, fd, b, ka, 16, __LINE__);                /* A's key, B's address */
    refused_write(t, fd, b + B_LEN - 1, kb, 2, __LINE__);     /* straddles B's end */
    refused_write(t, fd, a + 16, ka ^ 1, 16, __LINE__);       /* a wrong key */
    refused_write(t, fd, a + 16, 0, 16, __LINE__);            /* key 0 */
    refused_write(t, fd, a + 16, ka ^ (1ull << 63), 16, __LINE__);
    close(fd);

    /* A length whose end wraps past 2^64 back into A: the target must not write, whatever it
     * answers (it cannot wait for 2^64 bytes; closing the connection is fine). */
    poison(t);
    fd = cl_open(t, "wire-wrap");
    uint8_t data[64];
    fill(data, sizeof(data), 4);
    struct frame f = {.op = NET_WRITE, .req = 5, .addr = a + 16, .len = UINT64_MAX - 7, .key = ka};
    send_frame(fd, &f, NULL, 0);
    (void)send_bytes(fd, data, sizeof(data));
    shutdown(fd, SHUT_WR);
    uint8_t raw[NET_HDR_BYTES];
    if (recv_exact(fd, raw, sizeof(raw)) == 0) {
        frame_decode(raw, &f);
        CHECK(f.op == NET_WRITE_ACK && f.status == IXL_ERR_REMOTE_REFUSED);
    }
    close(fd);
    sleep_ms(50);
    CHECK_UNTOUCHED(t, 0, BUF_LEN);
    check_alive(t);
    CHECK_UNTOUCHED(t, 0, BUF_LEN);
}

static void refused_read(int fd, uint64_t addr, uint64_t key, uint64_t len, int line)
{
    /* READ and PING together: READ_DATA must carry no payload, so PONG follows at once. */
    uint8_t raw[2][NET_HDR_BYTES];
    struct frame f = {.op = NET_READ, .req = (uint64_t)line, .addr = addr, .len = len, .key = key};
    frame_encode(&f, raw[0]);
    f = (struct frame){.op = NET_PING, .req = 1};
    frame_encode(&f, raw[1]);
    send_all(fd, raw, sizeof(raw));
    recv_frame(fd, &f);
    if (f.op != NET_READ_DATA || f.req != (uint64_t)line || f.status != IXL_ERR_REMOTE_REFUSED ||
        f.len != 0)
        check_fail(__FILE__, line, "READ at 0x%llx+%llu: op %u status %d len %llu",
                   (unsigned long long)addr, (unsigned long long)len, f.op, f.status,
                   (unsigned long long)f.len);
    recv_frame(fd, &f);
    if (f.op != NET_PONG || f.req != 1)
        check_fail(__FILE__, line, "a refused READ carried data (op %u after it)", f.op);
}

static void case_read_refused(struct target *t)
{
    int fd = cl_open(t, "wire-read");
    uint64_t a = t->a, b = t->b, ka = t->key_a, kb = t->key_b;
    refused_read(fd, a - 1, ka, 16, __LINE__);
    refused_read(fd, a + A_LEN - 8, ka, 16, __LINE__);
    refused_read(fd, a + A_LEN, ka, 1, __LINE__);
    refused_read(fd, a, ka, A_LEN + 1, __LINE__);
    refused_read(fd, a, ka, UINT64_MAX, __LINE__);
    refused_read(fd, a + 16, ka, UINT64_MAX - 7, __LINE__); /* end wraps into A */
    refused_read(fd, UINT64_MAX - 7, ka, 16, __LINE__);
    refused_read(fd, a + 16, kb, 16, __LINE__);
    refused_read(fd, b, ka, 16, __LINE__);
    refused_read(fd, a + 16, ka ^ 1, 16, __LINE__);
    refused_read(fd, a + 16, 0, 16, __LINE__);
    uint8_t tmp[16];
    CHECK_RC(do_read(fd, b + B_LEN - 16, kb, tmp, 16, 3), IXL_OK); /* still serves */
    close(fd);
}

static void case_truncated(struct target *t)
{
    uint8_t raw[NET_HDR_BYTES];
    struct frame f;

    /* Half a HELLO header, then the end. */
    int fd = cl_connect(t);
    f = (struct frame){.op = NET_HELLO, .len = 30};
    frame_encode(&f, raw);
    send_all(fd, raw, NET_HDR_BYTES / 2);
    close(fd);
    /* A HELLO header and part of its payload. */
    fd = cl_connect(t);
    uint8_t pl[NET_HELLO_MAX];
    size_t n = hello_payload(t->instance, "half-hello", pl);
    f = (struct frame){.op = NET_HELLO, .len = n};
    frame_encode(&f, raw);
    send_all(fd, raw, sizeof(raw));
    send_all(fd, pl, 10);
    close(fd);
    check_alive(t);

    /* After HELLO: half a header. */
    fd = cl_open(t, "wire-trunc");
    f = (struct frame){.op = NET_WRITE, .addr = t->a, .len = 64, .key = t->key_a};
    frame_encode(&f, raw);
    send_all(fd, raw, NET_HDR_BYTES / 2);
    close(fd);
    check_alive(t);

    /* A WRITE promising 1 MiB, then 10 bytes and the end: what arrived may have landed, not a
     * byte more. */
    poison(t);
    fd = cl_open(t, "wire-trunc");
    uint8_t data[10];
    fill(data, sizeof(data), 5);
    f = (struct frame){.op = NET_WRITE, .addr = t->a + 4096, .len = 1u << 20, .key = t->key_a};
    send_frame(fd, &f, data, sizeof(data));
    shutdown(fd, SHUT_WR);
    EXPECT_CLOSED(fd); /* no WRITE_ACK for a frame that never completed */
    close(fd);
    /* The 10 bytes are not read here: the server thread that may have written them sent
     * nothing afterwards, so ThreadSanitizer would see no order between its write and a read
     * here. The pause lets that thread finish, so the next accept joins it (which orders its
     * writes before this test's next poison()). */
    sleep_ms(50);
    check_alive(t);
    CHECK_UNTOUCHED(t, 0, A_OFF + 4096);
    CHECK_UNTOUCHED(t, A_OFF + 4096 + sizeof(data), BUF_LEN - (A_OFF + 4096 + sizeof(data)));

    /* A NOTIF cut short is not delivered. */
    fd = cl_open(t, "wire-trunc");
    f = (struct frame){.op = NET_NOTIF, .req = 1, .len = 100};
    send_frame(fd, &f, data, sizeof(data));
    shutdown(fd, SHUT_WR);
    EXPECT_CLOSED(fd);
    close(fd);
    struct ixl_notif_batch *nb = drain(t);
    CHECK(nb == NULL);
}

static void garbage_after_hello(struct target *t, const uint8_t raw[NET_HDR_BYTES], int line)
{
    int fd = cl_open(t, "wire-garbage");
    send_all(fd, raw, NET_HDR_BYTES);
    expect_closed_at(__FILE__, line, fd);
    close(fd);
}

static void case_garbage(struct target *t)
{
    uint8_t raw[NET_HDR_BYTES];
    struct frame f = {.op = NET_PING};

    /* Before HELLO: bad magic is closed without a HELLO_ACK. */
    int fd = cl_connect(t);
    memset(raw, 0x5a, sizeof(raw));
    send_all(fd, raw, sizeof(raw));
    EXPECT_CLOSED(fd);
    close(fd);

    frame_encode(&f, raw);
    raw[0] ^= 0xff; /* bad magic */
    garbage_after_hello(t, raw, __LINE__);
    f.version = NET_WIRE_VERSION + 1;
    frame_encode(&f, raw);
    garbage_after_hello(t, raw, __LINE__);
    f.version = 0;
    const uint8_t ops[] = {
        0, NET_HELLO_ACK, NET_WRITE_ACK, NET_READ_DATA, NET_PONG, NET_OP_MAX + 1, 255};
    for (size_t i = 0; i < sizeof(ops); i++) {
        f = (struct frame){.op = ops[i]};
        frame_encode(&f, raw);
        garbage_after_hello(t, raw, __LINE__);
    }
    /* A second HELLO (with its payload sent) is a frame a target never takes mid-stream. */
    fd = cl_open(t, "wire-garbage");
    send_hello(fd, t->instance, "again", 1);
    EXPECT_CLOSED(fd);
    close(fd);
    /* Lengths the header forbids. */
    f = (struct frame){.op = NET_WRITE, .addr = t->a, .len = 0, .key = t->key_a};
    frame_encode(&f, raw);
    garbage_after_hello(t, raw, __LINE__);
    f = (struct frame){.op = NET_READ, .addr = t->a, .len = 0, .key = t->key_a};
    frame_encode(&f, raw);
    garbage_after_hello(t, raw, __LINE__);
    f = (struct frame){.op = NET_PING, .len = 1};
    frame_encode(&f, raw);
    garbage_after_hello(t, raw, __LINE__);
    check_alive(t);
}

static void case_notif(struct target *t)
{
    struct ixl_notif_batch *nb = drain(t);
    CHECK(nb == NULL);

    /* Over the agent's maximum: the connection is cut, nothing is delivered. */
    int fd = cl_open(t, "wire-notif");
    uint8_t *msg = malloc(IXL_NOTIF_MAX_DEFAULT + 1);
    CHECK(msg != NULL);
    fill(msg, IXL_NOTIF_MAX_DEFAULT + 1, 6);
    struct frame f = {.op = NET_NOTIF, .req = 1, .len = IXL_NOTIF_MAX_DEFAULT + 1};
    send_frame(fd, &f, NULL, 0);
    (void)send_bytes(fd, msg, 1000);
    EXPECT_CLOSED(fd);
    close(fd);
    nb = drain(t);
    CHECK(nb == NULL);

    /* Valid ones, up to exactly the maximum, come with the HELLO's name as the sender, in
     * order. PING after them: its PONG means they were handed over, and acknowledges them
     * (wire version 2: flag NET_F_ACK, key = the last sequence number delivered). A number
     * delivered before (a resend) is dropped and acknowledged again. */
    fd = cl_open(t, "wire-notif-sender");
    f = (struct frame){.op = NET_NOTIF, .req = 1, .len = 5};
    send_frame(fd, &f, "hello", 5);
    f.req = 2;
    f.len = IXL_NOTIF_MAX_DEFAULT;
    send_frame(fd, &f, msg, IXL_NOTIF_MAX_DEFAULT);
    f.req = 3;
    f.len = 0;
    send_frame(fd, &f, NULL, 0);
    f.req = 2;
    f.len = 5;
    send_frame(fd, &f, "dupl!", 5);
    f = (struct frame){.op = NET_PING, .req = 8};
    send_frame(fd, &f, NULL, 0);
    recv_frame(fd, &f);
    while (f.op == NET_NOTIF_ACK) { /* an ack of the tick's came first */
        CHECK((f.flags & NET_F_ACK) && f.key <= 3);
        recv_frame(fd, &f);
    }
    CHECK(f.op == NET_PONG && f.req == 8 && f.status == 0 && f.len == 0);
    CHECK((f.flags & NET_F_ACK) && f.key == 3);
    nb = drain(t);
    CHECK(nb != NULL && nb->count == 3);
    for (size_t i = 0; i < 3; i++)
        CHECK(strcmp(nb->items[i].agent, "wire-notif-sender") == 0);
    CHECK(nb->items[0].len == 5 && memcmp(nb->items[0].msg, "hello", 5) == 0);
    CHECK(nb->items[1].len == IXL_NOTIF_MAX_DEFAULT &&
          memcmp(nb->items[1].msg, msg, IXL_NOTIF_MAX_DEFAULT) == 0);
    CHECK(nb->items[2].len == 0);
    ixl_free(nb);
    /* A gap in the sequence is a protocol error: the connection closes, nothing delivered. */
    f = (struct frame){.op = NET_NOTIF, .req = 5, .len = 5};
    send_frame(fd, &f, "gap!!", 5);
    EXPECT_CLOSED(fd);
    close(fd);
    nb = drain(t);
    CHECK(nb == NULL);
    /* The session outlives the connection: the same sender instance reconnecting and sending
     * 1..4 again gets only 4 delivered (exactly once within an instance). */
    fd = cl_open(t, "wire-notif-sender");
    for (uint64_t q = 1; q <= 4; q++) {
        f = (struct frame){.op = NET_NOTIF, .req = q, .len = 5};
        send_frame(fd, &f, q == 4 ? "four!" : "again", 5);
    }
    ping(fd, 9);
    nb = drain(t);
    CHECK(nb != NULL && nb->count == 1);
    CHECK(nb->items[0].len == 5 && memcmp(nb->items[0].msg, "four!", 5) == 0);
    ixl_free(nb);
    close(fd);
    free(msg);
    struct ixl_agent_stats st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(t->agent, &st), IXL_OK);
    CHECK(st.notifs_received >= 3);
}

static void case_idle(struct target *t)
{
    /* A client that connects and says nothing... */
    double t0 = now_s();
    int idle = cl_connect(t);
    /* ...does not keep others waiting... */
    int fd = cl_open(t, "wire-busy");
    uint8_t data[256], back[256];
    fill(data, sizeof(data), 7);
    CHECK_RC(do_write(fd, t->a, t->key_a, data, sizeof(data), 1), IXL_OK);
    CHECK_RC(do_read(fd, t->a, t->key_a, back, sizeof(back), 2), IXL_OK);
    CHECK(memcmp(back, data, sizeof(data)) == 0);
    close(fd);
    double served = now_s() - t0;
    if (served > 0.8 * TIMEOUT_MS / 1000.0)
        fprintf(stderr, "note: serving beside an idle client took %.3f s\n", served);
    /* ...and is dropped after timeout_ms. */
    EXPECT_CLOSED(idle);
    double dropped = now_s() - t0;
    close(idle);
    if (dropped < 0.8 * TIMEOUT_MS / 1000.0 || dropped > 6.0 * TIMEOUT_MS / 1000.0)
        check_fail(__FILE__, __LINE__, "an idle client was dropped after %.3f s, timeout_ms %d",
                   dropped, TIMEOUT_MS);
}

struct client {
    struct target *t;
    int idx;
    pthread_barrier_t *start;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    char name[32];
    snprintf(name, sizeof(name), "client-%d", c->idx);
    pthread_barrier_wait(c->start);
    int fd = cl_open(c->t, name);
    uint64_t at = c->t->a + (uint64_t)c->idx * CLIENT_SLICE;
    uint8_t data[CLIENT_SLICE / 2], back[CLIENT_SLICE / 2];
    for (int r = 0; r < CLIENT_ROUNDS; r++) {
        fill(data, sizeof(data), (unsigned)(c->idx * 1000 + r));
        uint64_t req = (uint64_t)c->idx << 32 | (uint64_t)r;
        CHECK_RC(do_write(fd, at + (uint64_t)(r % 2) * sizeof(data), c->t->key_a, data,
                          sizeof(data), req),
                 IXL_OK);
        CHECK_RC(do_read(fd, at + (uint64_t)(r % 2) * sizeof(data), c->t->key_a, back, sizeof(back),
                         req),
                 IXL_OK);
        CHECK(memcmp(back, data, sizeof(data)) == 0);
    }
    close(fd);
    return NULL;
}

static void case_concurrent(struct target *t)
{
    poison(t);
    pthread_t th[N_CLIENTS];
    struct client c[N_CLIENTS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N_CLIENTS);
    for (int i = 0; i < N_CLIENTS; i++) {
        c[i] = (struct client){t, i, &start};
        CHECK(pthread_create(&th[i], NULL, client_main, &c[i]) == 0);
    }
    for (int i = 0; i < N_CLIENTS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    uint8_t data[CLIENT_SLICE / 2];
    for (int i = 0; i < N_CLIENTS; i++) {
        const uint8_t *slice = t->buf + A_OFF + (size_t)i * CLIENT_SLICE;
        fill(data, sizeof(data), (unsigned)(i * 1000 + CLIENT_ROUNDS - 2));
        CHECK(memcmp(slice, data, sizeof(data)) == 0);
        fill(data, sizeof(data), (unsigned)(i * 1000 + CLIENT_ROUNDS - 1));
        CHECK(memcmp(slice + sizeof(data), data, sizeof(data)) == 0);
    }
    CHECK_UNTOUCHED(t, A_OFF + (size_t)N_CLIENTS * CLIENT_SLICE,
                    BUF_LEN - (A_OFF + (size_t)N_CLIENTS * CLIENT_SLICE));
}

/* Many small frames sent at once, answered in order (the target batches its answers). */
static void case_pipeline(struct target *t)
{
    enum { N = 300, SZ = 256 };
    poison(t);
    int fd = cl_open(t, "wire-pipe");
    size_t cap = (size_t)N * (NET_HDR_BYTES + SZ);
    uint8_t *out = malloc(cap), *p = out;
    CHECK(out != NULL);
    for (int i = 0; i < N; i++) {
        uint64_t at = t->a + (uint64_t)(i / 3) * SZ;
        struct frame f = {.req = (uint64_t)i, .chunk = (uint32_t)i, .op = NET_PING};
        if (i % 3 == 0)
            f = (struct frame){.op = NET_WRITE,
                               .req = (uint64_t)i,
                               .chunk = (uint32_t)i,
                               .addr = at,
                               .len = SZ,
                               .key = t->key_a};
        else if (i % 3 == 1)
            f = (struct frame){.op = NET_READ,
                               .req = (uint64_t)i,
                               .chunk = (uint32_t)i,
                               .addr = at,
                               .len = SZ,
                               .key = t->key_a};
        frame_encode(&f, p);
        p += NET_HDR_BYTES;
        if (f.op == NET_WRITE) {
            fill(p, SZ, (unsigned)i);
            p += SZ;
        }
    }
    send_all(fd, out, (size_t)(p - out));
    uint8_t data[SZ], back[SZ];
    for (int i = 0; i < N; i++) {
        struct frame f;
        recv_frame(fd, &f);
        CHECK(f.req == (uint64_t)i && f.chunk == (uint32_t)i && f.status == 0);
        if (i % 3 == 0) {
            CHECK(f.op == NET_WRITE_ACK && f.len == 0);
        } else if (i % 3 == 1) {
            CHECK(f.op == NET_READ_DATA && f.len == SZ);
            CHECK(recv_exact(fd, back, SZ) == 0);
            fill(data, SZ, (unsigned)(i - 1));
            CHECK(memcmp(back, data, SZ) == 0);
        } else {
            CHECK(f.op == NET_PONG);
        }
    }
    ping(fd, N); /* see do_read() */
    free(out);
    close(fd);
}

/* ---- stalls: the target must not be held by a client that stops --------------------------- */

struct bg {
    struct target *t;
    int what; /* 0 deregister B, 1 register a new region, 2 destroy the agent */
    uint8_t *extra;
    _Atomic int done;
    int rc;
};

static void *bg_main(void *arg)
{
    struct bg *g = arg;
    struct ixl_reg_desc d = {g->t->b, B_LEN, 0, NULL, 0};
    if (g->what == 0) {
        g->rc = ixl_mem_deregister(g->t->agent, IXL_MEM_DRAM, &d, 1, NULL);
    } else if (g->what == 1) {
        d.addr = (uintptr_t)g->extra;
        g->rc = ixl_mem_register(g->t->agent, IXL_MEM_DRAM, &d, 1, NULL);
    } else {
        ixl_agent_destroy(g->t->agent);
        g->rc = IXL_OK;
    }
    atomic_store(&g->done, 1);
    return NULL;
}

/* Closes a connection with a reset: the target's blocked send or receive fails at once. */
static void reset_close(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* Runs what in the background while client fd stalls; 1 if it finished within limit_s. Either
 * way the client's connection is then reset (which lets a blocked operation finish). */
static int finishes_beside(struct target *t, int what, int fd, double limit_s, int *rc)
{
    static uint8_t extra[B_LEN];
    struct bg g = {.t = t, .what = what, .extra = extra};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bg_main, &g) == 0);
    double t0 = now_s();
    while (!atomic_load(&g.done) && now_s() - t0 < limit_s)
        sleep_ms(10);
    int ok = atomic_load(&g.done);
    reset_close(fd);
    pthread_join(th, NULL);
    *rc = g.rc;
    return ok;
}

static int stall_failures;

static void stall_report(int ok, const char *what)
{
    fprintf(stderr, "%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        stall_failures++;
}

/* A client sends a WRITE header promising 1 MiB and 10 bytes of it, then nothing. */
static int stalled_writer(struct target *t)
{
    int fd = cl_open(t, "wire-stall");
    uint8_t data[10];
    fill(data, sizeof(data), 8);
    struct frame f = {.op = NET_WRITE, .addr = t->a, .len = 1u << 20, .key = t->key_a};
    send_frame(fd, &f, data, sizeof(data));
    sleep_ms(50); /* the target is inside the frame now */
    return fd;
}

/* A client asks for far more READ data than the sockets hold and reads none of it. */
static int stalled_reader(struct target *t)
{
    int fd = cl_open(t, "wire-noread");
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    for (int i = 0; i < 64; i++) {
        struct frame f = {
            .op = NET_READ, .req = (uint64_t)i, .addr = t->a, .len = A_LEN, .key = t->key_a};
        send_frame(fd, &f, NULL, 0);
    }
    sleep_ms(200); /* the target is blocked writing now */
    return fd;
}

static void stall_cases(void)
{
    struct target t;
    int rc, fd, ok;
    double limit = 4.0 * TIMEOUT_MS / 1000.0;

    target_start(&t);
    fd = stalled_writer(&t);
    ok = finishes_beside(&t, 0, fd, limit, &rc);
    stall_report(ok && rc == IXL_OK, "deregistration beside a client stalled mid-WRITE");
    fd = stalled_writer(&t);
    ok = finishes_beside(&t, 1, fd, limit, &rc);
    stall_report(ok && rc == IXL_OK, "registration beside a client stalled mid-WRITE");
    fd = stalled_writer(&t);
    ok = finishes_beside(&t, 2, fd, limit, &rc);
    stall_report(ok, "ixl_agent_destroy beside a client stalled mid-WRITE");
    munmap(t.buf, BUF_LEN);

    target_start(&t);
    fd = stalled_reader(&t);
    ok = finishes_beside(&t, 0, fd, limit, &rc);
    stall_report(ok && rc == IXL_OK, "deregistration beside a client that reads no answers");
    fd = stalled_reader(&t);
    ok = finishes_beside(&t, 2, fd, limit, &rc);
    stall_report(ok, "ixl_agent_destroy beside a client that reads no answers");
    munmap(t.buf, BUF_LEN);

    /* "A client has timeout_ms to say who it is": one byte every timeout_ms / 3 is not a
     * HELLO in time. */
    target_start(&t);
    fd = cl_connect(&t);
    uint8_t pl[NET_HELLO_MAX + NET_HDR_BYTES];
    size_t n = hello_payload(t.instance, "wire-drip", pl + NET_HDR_BYTES);
    struct frame f = {.op = NET_HELLO, .len = n};
    frame_encode(&f, pl);
    double t0 = now_s();
    int closed = 0;
    for (size_t i = 0; i < NET_HDR_BYTES + n && now_s() - t0 < limit; i++) {
        if (send_bytes(fd, pl + i, 1) != 0) {
            closed = 1;
            break;
        }
        sleep_ms(TIMEOUT_MS / 3);
        uint8_t b;
        ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) {
            closed = 1;
            break;
        }
    }
    stall_report(closed, "a HELLO dripped one byte at a time is cut off after timeout_ms");
    close(fd);
    target_stop(&t);
}

int main(int argc, char **argv)
{
    ixl_log_set_level(IXL_LOG_NONE);
    if (argc > 1 && strcmp(argv[1], "stall") == 0) {
        stall_cases();
        if (stall_failures > 0) {
            fprintf(stderr, "%d stall case(s) failed\n", stall_failures);
            return 1;
        }
        return 0;
    }
    struct target t;
    target_start(&t);
    case_basic(&t);
    case_hello(&t);
    case_write_refused(&t);
    case_read_refused(&t);
    case_truncated(&t);
    case_garbage(&t);
    case_notif(&t);
    case_idle(&t);
    case_concurrent(&t);
    case_pipeline(&t);
    case_basic(&t); /* still serving after all that */
    target_stop(&t);
    return 0;
}

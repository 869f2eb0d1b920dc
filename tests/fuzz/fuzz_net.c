/*
 * Fuzz target for NET's wire format (net_wire.c) and the target side's frame handling
 * (an accepted connection in net_loop.c). The NET sources are compiled into this binary, with a
 * table of built-in plugins that lists NET, because the fuzz targets link the core statically.
 *
 * Each input is used twice:
 *  1. The decoders alone: net_hdr_decode() on the input's first 48 bytes and
 *     net_hello_decode() on all of it, each against the format's rules written out here again
 *     (accept exactly what the rules accept) and for a lossless round trip through the
 *     matching encoder.
 *  2. The frame handler: a valid HELLO and then the input go to the real listener of an agent
 *     with a NET backend, over loopback TCP; the write side is shut and the answers are read
 *     until the target closes (a deadline aborts a target that hangs).
 *
 * The input of 2 is the byte stream the target reads after HELLO, with one relocation so that
 * the fuzzer reaches the registered regions, whose addresses and keys change from run to run.
 * The harness frames the stream as the target does; in each header it meets, addr is an offset
 * from region A's start (wrapping at 2^64), and key 0 stands for A's key, key 1 for B's key
 * (any other key is sent as it is). The buffer is laid out as
 *
 *   guard 4 KiB | A 16 KiB | guard 4 KiB | B 16 KiB | guard 4 KiB     (B = A + 0x5000)
 *
 * with only A and B registered. While framing, the harness runs a model of the target (the
 * rules of net_wire.h: WRITE and READ inside the region of their key, NOTIF up to the agent's
 * maximum and in sequence (a number delivered before is dropped, a gap ends the connection;
 * each input is a new initiator instance, so its numbers start at 1), PING answered, anything
 * else ends the connection) and checks afterwards:
 *  - the guards hold their pattern, and A and B hold exactly what the model wrote (so nothing
 *    lands outside a region, under a wrong key, or from a frame after the connection ended);
 *  - the answers are a prefix of the model's (WRITE_ACK, READ_DATA with the bytes the region
 *    held at that point, PONG), and all of them when the stream ended cleanly at a frame
 *    boundary with no bad frame; the acks of notifications among them (NOTIF_ACK frames and
 *    NET_F_ACK on answers, sent when the target's tick says) never exceed what was delivered
 *    and never go back, and are taken out before the comparison;
 *  - the notifications delivered are exactly the model's, from the HELLO's name, in order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

#include "fuzz.h"
#include "net_wire.h"
#include "plugin/builtin.h"
#include "serdes/codec.h"

/* The built-in plugins of this binary: NET, compiled in with IXL_PLUGIN_BUILTIN_NAME=NET. */
const struct ixl_plugin_desc *ixl_plugin_builtin_NET(void);
const ixl_plugin_entry_fn ixl_builtin_plugins[] = {ixl_plugin_builtin_NET, NULL};

#define AGENT_NAME "fuzz_net_target"
#define PEER_NAME "fuzz-peer"
#define HELLO_REQ 0x4845u
#define GUARD 4096u
#define REGION 16384u
#define A_OFF GUARD
#define B_OFF (GUARD + REGION + GUARD)
#define BUF_LEN (B_OFF + REGION + GUARD)
#define NOTIF_MAX IXL_NOTIF_MAX_DEFAULT
#define DEADLINE_S 20.0

static struct ixl_agent *agent;
static uint8_t *buf;
static uint64_t key_a, key_b, instance;
static uint16_t port;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_net: %s\n", what);
    abort();
}

static uint8_t guard_at(size_t i)
{
    return (uint8_t)(0x5au ^ (i * 151u));
}

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

/* ---- the format's rules, written out independently of net_wire.c ------------------------ */

struct hdr {
    uint8_t op;
    uint16_t flags;
    int32_t status;
    uint32_t chunk;
    uint64_t req, addr, len, key;
};

static void hdr_parse(const uint8_t *p, struct hdr *h)
{
    h->op = p[5];
    h->flags = (uint16_t)get(p + 6, 2);
    h->status = (int32_t)(uint32_t)get(p + 8, 4);
    h->chunk = (uint32_t)get(p + 12, 4);
    h->req = get(p + 16, 8);
    h->addr = get(p + 24, 8);
    h->len = get(p + 32, 8);
    h->key = get(p + 40, 8);
}

/* Whether 48 bytes are a header of this version, by net_wire.h's rules. */
static int hdr_valid(const uint8_t *p)
{
    struct hdr h;
    hdr_parse(p, &h);
    if (get(p, 4) != 0x4e4c5849u || p[4] != 2 || h.op < NET_HELLO || h.op > NET_NOTIF_ACK)
        return 0;
    if (h.op == NET_HELLO)
        return h.len >= 18 && h.len <= NET_HELLO_MAX;
    if (h.op == NET_HELLO_ACK || h.op == NET_WRITE_ACK || h.op == NET_PING || h.op == NET_PONG ||
        h.op == NET_HOLD)
        return h.len == 0;
    if (h.op == NET_NOTIF_ACK) /* the cumulative ack in key, flagged */
        return h.len == 0 && (h.flags & NET_F_ACK);
    if (h.op == NET_NOTIF) /* its sequence number */
        return h.req != 0;
    if (h.op == NET_CHALLENGE) /* the target's nonce and MAC */
        return h.len == 48;
    if (h.op == NET_AUTH) /* the initiator's MAC */
        return h.len == 32;
    if (h.op == NET_WRITE || h.op == NET_READ)
        return h.len != 0;
    return 1;
}

static void hdr_write(uint8_t *p, uint8_t op, int32_t status, uint32_t chunk, uint64_t req,
                      uint64_t len)
{
    memset(p, 0, NET_HDR_BYTES);
    put(p, 0x4e4c5849u, 4);
    p[4] = 2;
    p[5] = op;
    put(p + 8, (uint32_t)status, 4);
    put(p + 12, chunk, 4);
    put(p + 16, req, 8);
    put(p + 32, len, 8);
}

static void check_decoders(const uint8_t *data, size_t size)
{
    if (size >= NET_HDR_BYTES) {
        struct net_hdr h;
        int ok = net_hdr_decode(data, &h) == 0;
        if (ok != hdr_valid(data))
            fail(ok ? "net_hdr_decode accepts a header the format forbids"
                    : "net_hdr_decode refuses a valid header");
        if (ok) {
            struct hdr m;
            hdr_parse(data, &m);
            if (h.op != m.op || h.flags != m.flags || h.status != m.status || h.chunk != m.chunk ||
                h.req != m.req || h.addr != m.addr || h.len != m.len || h.key != m.key)
                fail("net_hdr_decode misreads a field");
            uint8_t again[NET_HDR_BYTES];
            net_hdr_encode(&h, again);
            if (memcmp(again, data, NET_HDR_BYTES) != 0)
                fail("net_hdr_encode(net_hdr_decode(x)) != x");
        }
    }
    struct net_hello hl;
    int ok = net_hello_decode(data, size, &hl) == 0;
    size_t n = size >= 18 ? (size_t)get(data + 16, 2) : 0;
    /* The name, then (wire version 2) the ack the initiator saw, or nothing (read as 0). */
    int want = size >= 18 && n >= 1 && n <= 255 && (size == 18 + n || size == 26 + n) &&
               !memchr(data + 18, 0, n);
    if (ok != want)
        fail(ok ? "net_hello_decode accepts a payload the format forbids"
                : "net_hello_decode refuses a valid payload");
    if (ok) {
        uint64_t acked = size == 26 + n ? get(data + 18 + n, 8) : 0;
        if (hl.from_instance != get(data, 8) || hl.to_instance != get(data + 8, 8) ||
            strlen(hl.name) != n || memcmp(hl.name, data + 18, n) != 0 || hl.notif_acked != acked)
            fail("net_hello_decode misreads a field");
        uint8_t again[NET_HELLO_MAX];
        size_t k = net_hello_encode(&hl, again, sizeof(again));
        if (k != 26 + n || memcmp(again, data, 18 + n) != 0 || get(again + 18 + n, 8) != acked)
            fail("net_hello_encode(net_hello_decode(x)) != x");
    }
}

/* ---- growable byte buffers ------------------------------------------------------------- */

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static uint8_t *bytes_grow(struct bytes *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL)
            fail("out of memory");
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

/* ---- the model of the target --------------------------------------------------------- */

struct model {
    uint8_t a[REGION], b[REGION];
    struct bytes answers; /* what the target must send after HELLO_ACK */
    struct bytes notifs;  /* u32 length + bytes, each */
    size_t n_notifs;
    uint64_t delivered; /* the session's last notification sequence number delivered */
    int clean;          /* the stream ends at a frame boundary, every frame valid */
};

/* The model's bytes of [addr, addr + len) when one region of key holds them, else NULL. */
static uint8_t *model_range(struct model *m, uint64_t key, uint64_t addr, uint64_t len)
{
    uint64_t base = (uintptr_t)(buf + A_OFF);
    uint8_t *mem = m->a;
    if (key == key_b) {
        base = (uintptr_t)(buf + B_OFF);
        mem = m->b;
    } else if (key != key_a) {
        return NULL;
    }
    if (len == 0 || addr < base || addr - base > REGION || len > REGION - (addr - base))
        return NULL;
    return mem + (addr - base);
}

/* Frames the input as the target will, relocating addresses and keys into tx (which already
 * holds the HELLO), and runs the model over it. */
static void relocate_and_model(const uint8_t *data, size_t size, struct bytes *tx, struct model *m)
{
    uint64_t a = (uintptr_t)(buf + A_OFF);
    uint8_t *out = bytes_grow(tx, size);
    memcpy(out, data, size);
    size_t at = 0;
    m->clean = 0;
    for (;;) {
        size_t left = size - at;
        if (left == 0) {
            m->clean = 1;
            return;
        }
        if (left < NET_HDR_BYTES || !hdr_valid(out + at))
            return;
        struct net_hdr dh; /* the decoder on every header of the stream */
        if (net_hdr_decode(out + at, &dh) != 0)
            fail("net_hdr_decode refuses a valid header in the stream");
        struct hdr h;
        hdr_parse(out + at, &h);
        h.addr = a + h.addr;
        h.key = h.key == 0 ? key_a : h.key == 1 ? key_b : h.key;
        put(out + at + 24, h.addr, 8);
        put(out + at + 40, h.key, 8);
        at += NET_HDR_BYTES;
        left -= NET_HDR_BYTES;
        uint64_t avail = h.len < left ? h.len : left;
        uint8_t *ans;
        if (h.op == NET_WRITE) {
            uint8_t *dst = model_range(m, h.key, h.addr, h.len);
            if (dst != NULL) /* the bytes that arrive land, even in a frame cut short */
                memcpy(dst, out + at, (size_t)avail);
            if (avail < h.len)
                return;
            at += (size_t)h.len;
            ans = bytes_grow(&m->answers, NET_HDR_BYTES);
            hdr_write(ans, NET_WRITE_ACK, dst ? 0 : IXL_ERR_REMOTE_REFUSED, h.chunk, h.req, 0);
        } else if (h.op == NET_READ) {
            const uint8_t *src = model_range(m, h.key, h.addr, h.len);
            ans = bytes_grow(&m->answers, NET_HDR_BYTES);
            hdr_write(ans, NET_READ_DATA, src ? 0 : IXL_ERR_REMOTE_REFUSED, h.chunk, h.req,
                      src ? h.len : 0);
            if (src != NULL)
                memcpy(bytes_grow(&m->answers, (size_t)h.len), src, (size_t)h.len);
        } else if (h.op == NET_NOTIF) {
            if (h.len > NOTIF_MAX || avail < h.len || h.req > m->delivered + 1)
                return; /* over the maximum, cut short, or a gap in the sequence */
            if (h.req == m->delivered + 1) { /* the next one; an older one is a duplicate */
                put(bytes_grow(&m->notifs, 4), h.len, 4);
                memcpy(bytes_grow(&m->notifs, (size_t)h.len), out + at, (size_t)h.len);
                m->n_notifs++;
                m->delivered++;
            }
            at += (size_t)h.len;
        } else if (h.op == NET_PING) {
            ans = bytes_grow(&m->answers, NET_HDR_BYTES);
            hdr_write(ans, NET_PONG, 0, h.chunk, h.req, 0);
        } else {
            return; /* a frame a target never receives */
        }
    }
}

/* ---- the exchange over TCP ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sends tx while reading the answers into rx, shuts the write side, reads until the target
 * closes. */
static void exchange(const struct bytes *tx, struct bytes *rx, size_t rx_limit)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fail("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)
        fail("cannot connect to the target's listener");
    size_t sent = 0;
    int sending = 1, wr_shut = 0;
    double t0 = now_s();
    for (;;) {
        if (now_s() - t0 > DEADLINE_S)
            fail("the target neither answered nor closed the connection in time");
        if (!sending && !wr_shut) {
            shutdown(fd, SHUT_WR);
            wr_shut = 1;
        }
        struct pollfd pfd = {.fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0))};
        if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
            fail("poll");
        if (sending && (pfd.revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = send(fd, tx->p + sent, tx->len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                sending = 0; /* the target closed early: it may, after a bad frame */
            if (sent == tx->len)
                sending = 0;
        }
        if (pfd.revents & (POLLIN | POLLERR | POLLHUP)) {
            uint8_t *p = bytes_grow(rx, 65536);
            ssize_t n = recv(fd, p, 65536, 0);
            rx->len -= 65536 - (n > 0 ? (size_t)n : 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                break; /* end of stream, or a reset after the target stopped reading */
            if (rx->len > rx_limit)
                fail("the target sent more than every frame's answer");
        }
    }
    close(fd);
}

/* ---- setup ----------------------------------------------------------------------------- */

static void destroy_agent(void)
{
    ixl_agent_destroy(agent);
    agent = NULL;
    free(buf);
}

static void learn_md(void)
{
    void *blob;
    size_t len;
    if (ixl_md_get(agent, NULL, &blob, &len) != IXL_OK)
        fail("ixl_md_get");
    struct ixl_md_decoded md;
    char why[256];
    if (ixl_md_decode(blob, len, &md, why, sizeof(why)) != IXL_OK)
        fail("the agent's own metadata does not decode");
    int net = -1;
    for (size_t i = 0; i < md.n_backends; i++) {
        const struct ixl_md_backend *b = &md.backends[i];
        if (b->name_len == 3 && memcmp(b->name, "NET", 3) == 0 && b->conn_len >= 56) {
            net = (int)i;
            instance = get(b->conn + 8, 8); /* net_engine.c build_conn_info() */
            port = (uint16_t)get(b->conn + 53, 2);
        }
    }
    for (size_t i = 0; i < md.n_regions; i++) {
        const struct ixl_md_region *g = &md.regions[i];
        if ((int)g->backend != net || g->pub_len < 12)
            continue;
        if (g->addr == (uintptr_t)(buf + A_OFF))
            key_a = get(g->pub + 4, 8); /* net_register_mem(): u32 magic, u64 key, ... */
        else if (g->addr == (uintptr_t)(buf + B_OFF))
            key_b = get(g->pub + 4, 8);
    }
    ixl_md_decoded_free(&md);
    ixl_free(blob);
    if (net < 0 || port == 0 || key_a == 0 || key_b == 0 || key_a == key_b)
        fail("NET's port, instance or keys are missing from the metadata");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (agent != NULL)
        return 0;
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
                                 .backends = "",
                                 .notif_max = NOTIF_MAX};
    if (ixl_agent_create(AGENT_NAME, &p, &agent) != IXL_OK)
        fail("cannot create the agent");
    const struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"},
                                {"addrs", "127.0.0.1"},
                                {"copy_threads", "1"},
                                {"timeout_ms", "5000"}};
    if (ixl_backend_create(agent, "NET", kv, sizeof(kv) / sizeof(kv[0]), NULL) != IXL_OK) {
        fprintf(stderr, "fuzz_net: %s\n", ixl_agent_last_error(agent));
        fail("cannot create the NET backend");
    }
    buf = malloc(BUF_LEN);
    if (buf == NULL)
        fail("out of memory");
    for (size_t i = 0; i < BUF_LEN; i++)
        buf[i] = guard_at(i);
    struct ixl_reg_desc d[2] = {{(uintptr_t)(buf + A_OFF), REGION, 0, NULL, 0},
                                {(uintptr_t)(buf + B_OFF), REGION, 0, NULL, 0}};
    if (ixl_mem_register(agent, IXL_MEM_DRAM, d, 2, NULL) != IXL_OK)
        fail("cannot register the regions");
    learn_md();
    atexit(destroy_agent);
    return 0;
}

/* ---- one input ------------------------------------------------------------------------- */

static void check_guards(void)
{
    static const size_t guards[3][2] = {
        {0, GUARD}, {A_OFF + REGION, GUARD}, {B_OFF + REGION, GUARD}};
    for (int g = 0; g < 3; g++)
        for (size_t i = guards[g][0]; i < guards[g][0] + guards[g][1]; i++)
            if (buf[i] != guard_at(i))
                fail("the target wrote outside its registered regions");
}

/* The target's acks of notifications, taken out of its answers rx: NOTIF_ACK frames are
 * dropped and NET_F_ACK with its key cleared from the others, after checking that every ack is
 * at most what was delivered (delivered) and never goes back. A frame cut short stays. */
static void strip_acks(struct bytes *rx, uint64_t delivered)
{
    size_t in = 0, out = 0;
    uint64_t last = 0;
    while (rx->len - in >= NET_HDR_BYTES) {
        struct hdr h;
        hdr_parse(rx->p + in, &h);
        size_t body = h.op == NET_READ_DATA ? (size_t)h.len : 0;
        if (body > rx->len - in - NET_HDR_BYTES)
            break;
        if (h.flags & NET_F_ACK) {
            if (h.key > delivered || h.key < last)
                fail("the target acknowledged notifications it did not deliver, or went back");
            last = h.key;
        }
        if (h.op == NET_NOTIF_ACK) {
            in += NET_HDR_BYTES;
            continue;
        }
        memmove(rx->p + out, rx->p + in, NET_HDR_BYTES + body);
        if (h.flags & NET_F_ACK) {
            put(rx->p + out + 6, h.flags & ~NET_F_ACK, 2);
            put(rx->p + out + 40, 0, 8);
        }
        in += NET_HDR_BYTES + body;
        out += NET_HDR_BYTES + body;
    }
    memmove(rx->p + out, rx->p + in, rx->len - in);
    rx->len = out + (rx->len - in);
}

static void check_notifs(const struct model *m)
{
    struct ixl_notif_batch *nb = NULL;
    if (ixl_notif_drain(agent, &nb) != IXL_OK)
        fail("ixl_notif_drain");
    size_t count = nb ? nb->count : 0;
    if (count != m->n_notifs)
        fail("the notifications delivered are not those of the valid NOTIF frames");
    const uint8_t *p = m->notifs.p;
    for (size_t i = 0; i < count; i++) {
        size_t len = (size_t)get(p, 4);
        if (strcmp(nb->items[i].agent, PEER_NAME) != 0 || nb->items[i].len != len ||
            (len > 0 && memcmp(nb->items[i].msg, p + 4, len) != 0))
            fail("a notification's sender or bytes differ from its NOTIF frame");
        p += 4 + len;
    }
    ixl_free(nb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (agent == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    check_decoders(data, size);

    static struct model m;
    static uint64_t run;
    memset(&m.answers, 0, sizeof(m.answers));
    memset(&m.notifs, 0, sizeof(m.notifs));
    m.n_notifs = 0;
    m.delivered = 0;
    memcpy(m.a, buf + A_OFF, REGION);
    memcpy(m.b, buf + B_OFF, REGION);

    struct bytes tx = {0}, rx = {0};
    /* A new initiator instance per input: a new notification session (numbers from 1). */
    struct net_hello hl = {.from_instance = ++run, .to_instance = instance};
    snprintf(hl.name, sizeof(hl.name), "%s", PEER_NAME);
    uint8_t payload[NET_HELLO_MAX];
    size_t plen = net_hello_encode(&hl, payload, sizeof(payload));
    struct net_hdr h = {.op = NET_HELLO, .req = HELLO_REQ, .len = plen};
    net_hdr_encode(&h, bytes_grow(&tx, NET_HDR_BYTES));
    memcpy(bytes_grow(&tx, plen), payload, plen);
    relocate_and_model(data, size, &tx, &m);

    /* Acks of notifications (NOTIF_ACK frames, NET_F_ACK on answers) come when the target's
     * tick says, so that many more bytes may come; they are checked and taken out below. */
    exchange(&tx, &rx, NET_HDR_BYTES + m.answers.len + (m.n_notifs + 64) * 2 * NET_HDR_BYTES);
    strip_acks(&rx, m.delivered);

    /* HELLO_ACK OK, then a prefix of the model's answers (all of them after a clean end). */
    uint8_t ack[NET_HDR_BYTES];
    hdr_write(ack, NET_HELLO_ACK, 0, 0, HELLO_REQ, 0);
    if (rx.len < NET_HDR_BYTES || memcmp(rx.p, ack, NET_HDR_BYTES) != 0)
        fail("no HELLO_ACK OK for a valid HELLO");
    size_t got = rx.len - NET_HDR_BYTES;
    if (got > m.answers.len || (got > 0 && memcmp(rx.p + NET_HDR_BYTES, m.answers.p, got) != 0))
        fail("the target's answers differ from the model's");
    if (m.clean && got != m.answers.len)
        fail("answers are missing after a stream of valid frames");

    check_guards();
    if (memcmp(buf + A_OFF, m.a, REGION) != 0 || memcmp(buf + B_OFF, m.b, REGION) != 0)
        fail("a region's bytes differ from what the valid WRITE frames put there");
    check_notifs(&m);
    free(tx.p);
    free(rx.p);
    free(m.answers.p);
    free(m.notifs.p);
    return 0;
}

/*
 * Metadata exchange in peer mode: agents find each other through their listeners, with no side
 * channel, then transfer over NET. This process's agent "hub" listens; ixl_peer processes
 * (agent.listen=0) send it their metadata, fetch its, and are fetched from.
 *
 * Covered: send, fetch (asynchronous: the agent's fd signals it), check, transfers both ways
 * after each, labeled partial metadata (sent, and fetched by label from the owner's listener),
 * invalidate_local reaching the peers that were sent to and those that fetched, a peer
 * restarted under the same name (old requests STALE, new ones work), fetch from a dead
 * address, ixl_md_fetch_status (not yet / loaded / failed with its reason / forgotten at
 * invalidation), and the listener under untrusted input: garbage, a truncated frame, an oversized
 * length, a malformed metadata blob, a stalled client (cut after its deadline, not blocking
 * others), 100 concurrent clients, destroy with a fetch stuck on a silent server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h"
#include "peer_ctl.h"

#ifndef IXL_PEER_PATH
#error "IXL_PEER_PATH must name the ixl_peer binary"
#endif

#define BUF_LEN ((size_t)1 << 20)
#define WAIT_MS 10000
#define N_CLIENTS 100

static struct ixl_agent *hub_create(const char *name, uint16_t *port)
{
    struct ixl_agent_params ap = {
        .field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_LISTEN_PORT,
        .backends = "NET",
        .listen_port = 0,
    };
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &ap, &a), IXL_OK);
    CHECK_RC(ixl_agent_listen_port(a, port), IXL_OK);
    CHECK(*port != 0);
    return a;
}

/* Waits (on the agent's fd) until remote's metadata is loaded; returns the ms it took. */
static uint64_t wait_loaded(struct ixl_agent *a, const char *remote, int ms)
{
    uint64_t t0 = now_ms();
    int fd;
    CHECK_RC(ixl_agent_fd(a, &fd), IXL_OK);
    while (ixl_remote_check(a, remote, NULL) != IXL_OK) {
        if (now_ms() - t0 > (uint64_t)ms)
            check_fail(__FILE__, __LINE__, "metadata of '%s' not loaded after %d ms", remote, ms);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            uint64_t v;
            ssize_t r = read(fd, &v, sizeof(v));
            (void)r;
        }
    }
    return now_ms() - t0;
}

/* Polls ixl_md_fetch_status until the fetch of remote is no longer IXL_IN_PROGRESS. */
static int wait_fetch(struct ixl_agent *a, const char *remote, int ms)
{
    uint64_t t0 = now_ms();
    int rc;
    while ((rc = ixl_md_fetch_status(a, remote)) == IXL_IN_PROGRESS) {
        if (now_ms() - t0 > (uint64_t)ms)
            check_fail(__FILE__, __LINE__, "the fetch of '%s' still runs after %d ms", remote, ms);
        sleep_ms(5);
    }
    return rc;
}

static struct ixl_dlist *list1(uint64_t addr, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static uint16_t peer_port(struct peer *p)
{
    char *r = PEER_OK(p, "port");
    return (uint16_t)atoi(r);
}

/* ---- raw protocol clients ------------------------------------------------------------------ */

static int dial_local(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes the 16-byte header of the protocol (mdx_wire.h) for a body of len bytes. */
static size_t header(uint8_t *h, uint8_t type, uint32_t len)
{
    memcpy(h, "IXLX", 4);
    h[4] = 2;
    h[5] = type;
    put_le(h + 6, 0, 2);
    put_le(h + 8, len, 4);
    put_le(h + 12, 0, 4);
    return 16;
}

static size_t put_str(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    put_le(p, n, 2);
    memcpy(p + 2, s, n);
    return 2 + n;
}

/* Reads a reply: its status, the length of its blob (or -1 if the connection closed). The
 * listener's greeting (HELLO, sent at accept: without a key it asks for nothing) is skipped. */
static int read_reply(int fd, int32_t *status, size_t *blob_len)
{
    uint8_t h[16], *b = NULL;
    uint32_t len;
    do {
        free(b);
        size_t got = 0;
        while (got < sizeof(h)) {
            ssize_t k = recv(fd, h + got, sizeof(h) - got, 0);
            if (k <= 0)
                return -1;
            got += (size_t)k;
        }
        CHECK(memcmp(h, "IXLX", 4) == 0 && (h[5] == 4 || h[5] == 5));
        len = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
        b = malloc(len + 1);
        CHECK(b != NULL);
        got = 0;
        while (got < len) {
            ssize_t k = recv(fd, b + got, len - got, 0);
            if (k <= 0) {
                free(b);
                return -1;
            }
            got += (size_t)k;
        }
    } while (h[5] == 5);
    CHECK(len >= 6);
    *status = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                        (uint32_t)b[3] << 24);
    size_t tl = (size_t)b[4] | (size_t)b[5] << 8;
    CHECK(6 + tl <= len);
    *blob_len = len - 6 - tl;
    free(b);
    return 0;
}

static size_t fetch_frame(uint8_t *f, const char *want, const char *from)
{
    uint8_t body[600];
    size_t n = put_str(body, want);
    n += put_str(body + n, "");
    n += put_str(body + n, from);
    put_le(body + n, 0, 2);
    n += 2;
    size_t h = header(f, 2, (uint32_t)n);
    memcpy(f + h, body, n);
    return h + n;
}

struct client {
    uint16_t port;
    int ok;
    size_t blob_len;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    int fd = dial_local(c->port);
    uint8_t f[700];
    size_t n = fetch_frame(f, "hub", "client");
    if (send(fd, f, n, MSG_NOSIGNAL) == (ssize_t)n) {
        int32_t st;
        c->ok = read_reply(fd, &st, &c->blob_len) == 0 && st == IXL_OK;
    }
    close(fd);
    return NULL;
}

/* ---- the cases ----------------------------------------------------------------------------- */

static void test_untrusted(struct ixl_agent *hub, uint16_t port)
{
    fprintf(stderr, "listener under untrusted input\n");
    int32_t st;
    size_t bl;
    /* garbage: an error reply saying so */
    int fd = dial_local(port);
    static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(send(fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL) > 0);
    CHECK(read_reply(fd, &st, &bl) == 0 && st == IXL_ERR_MALFORMED);
    close(fd);
    /* an oversized body length: refused from the header, nothing allocated */
    uint8_t f[700];
    fd = dial_local(port);
    header(f, 1, 0xfffffff0u);
    CHECK(send(fd, f, 16, MSG_NOSIGNAL) == 16);
    CHECK(read_reply(fd, &st, &bl) == 0 && st == IXL_ERR_MALFORMED);
    close(fd);
    /* a truncated frame: the connection ends, the listener goes on */
    fd = dial_local(port);
    header(f, 1, 100);
    memset(f + 16, 'x', 10);
    CHECK(send(fd, f, 26, MSG_NOSIGNAL) == 26);
    close(fd);
    /* a SEND whose metadata is garbage: MALFORMED, nothing loaded */
    fd = dial_local(port);
    uint8_t body[64];
    size_t n = put_str(body, "mallory");
    n += put_str(body + n, "");
    memcpy(body + n, "IXLMnotmetadata", 15);
    n += 15;
    size_t h = header(f, 1, (uint32_t)n);
    memcpy(f + h, body, n);
    CHECK(send(fd, f, h + n, MSG_NOSIGNAL) == (ssize_t)(h + n));
    CHECK(read_reply(fd, &st, &bl) == 0 && st == IXL_ERR_MALFORMED);
    close(fd);
    CHECK(ixl_remote_check(hub, "mallory", NULL) == IXL_ERR_NOT_FOUND);
    /* a FETCH for another agent: NOT_FOUND */
    fd = dial_local(port);
    n = fetch_frame(f, "someone-else", "client");
    CHECK(send(fd, f, n, MSG_NOSIGNAL) == (ssize_t)n);
    CHECK(read_reply(fd, &st, &bl) == 0 && st == IXL_ERR_NOT_FOUND);
    close(fd);

    /* a stalled client does not block the others, and is cut after its deadline */
    int stalled = dial_local(port);
    CHECK(send(stalled, f, 5, MSG_NOSIGNAL) == 5); /* part of a header, then nothing */
    uint64_t t0 = now_ms();
    struct client c = {port, 0, 0};
    client_main(&c);
    CHECK(c.ok && c.blob_len > 0);
    CHECK(now_ms() - t0 < 1000);
    uint8_t hello[16 + 17]; /* the listener's greeting came at accept: nothing after it */
    CHECK(recv(stalled, hello, sizeof(hello), MSG_WAITALL) == (ssize_t)sizeof(hello));
    CHECK(hello[5] == 5);
    char b1;
    ssize_t k = recv(stalled, &b1, 1, 0); /* SO_RCVTIMEO 10 s */
    uint64_t cut = now_ms() - t0;
    CHECK(k == 0 || (k < 0 && errno == ECONNRESET));
    CHECK(cut >= 4000 && cut < 9000);
    close(stalled);
    fprintf(stderr,
            "  garbage, oversized, truncated, bad metadata, wrong agent refused; a "
            "stalled client cut after %" PRIu64 " ms without blocking others\n",
            cut);

    /* 100 clients at once */
    pthread_t th[N_CLIENTS];
    struct client cs[N_CLIENTS];
    t0 = now_ms();
    for (int i = 0; i < N_CLIENTS; i++) {
        cs[i] = (struct client){port, 0, 0};
        CHECK(pthread_create(&th[i], NULL, client_main, &cs[i]) == 0);
    }
    int ok = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ok += cs[i].ok && cs[i].blob_len == cs[0].blob_len;
    }
    CHECK(ok == N_CLIENTS);
    fprintf(stderr,
            "  %d concurrent clients each fetched the metadata (%zu bytes) in %" PRIu64 " ms\n",
            N_CLIENTS, cs[0].blob_len, now_ms() - t0);
}

/* A server that accepts and never answers: a fetch from it must not hold up destroy. */
static void test_destroy_with_stuck_fetch(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(s, 4) == 0);
    socklen_t sl = sizeof(sa);
    getsockname(s, (struct sockaddr *)&sa, &sl);
    uint16_t port;
    struct ixl_agent *a = hub_create("impatient", &port);
    struct ixl_peer pr = {"127.0.0.1", ntohs(sa.sin_port)};
    CHECK_RC(ixl_md_fetch(a, "silent", &pr, NULL), IXL_OK);
    sleep_ms(200);
    CHECK_RC(ixl_md_fetch_status(a, "silent"), IXL_IN_PROGRESS); /* no answer yet, no error */
    uint64_t t0 = now_ms();
    ixl_agent_destroy(a);
    uint64_t took = now_ms() - t0;
    CHECK(took < 1000);
    close(s);
    fprintf(stderr, "destroy with a fetch stuck on a silent server: %" PRIu64 " ms\n", took);
}

int main(void)
{
    peers_init("test_mdx", IXL_PEER_PATH);
    signal(SIGPIPE, SIG_IGN);
    alarm(110);
    uint64_t t0 = now_ms();
    uint16_t hport;
    struct ixl_agent *hub = hub_create("hub", &hport);
    uint8_t *local = aligned_alloc(4096, BUF_LEN);
    CHECK(local != NULL);
    struct ixl_reg_desc rd = {(uintptr_t)local, BUF_LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(hub, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);

    /* p1 sends its metadata to the hub; the hub fetches p2's from p2's listener */
    struct peer *p1 = peer_start("p1", "agent.listen=0", NULL);
    struct peer *p2 = peer_start("p2", "agent.listen=0", NULL);
    peer_ready(p1);
    peer_ready(p2);
    struct rbuf b1 = peer_alloc(p1, 0, BUF_LEN, "heap");
    struct rbuf b2 = peer_alloc(p2, 0, BUF_LEN, "heap");
    struct rbuf b2x = peer_alloc(p2, 1, BUF_LEN, "heap");
    uint16_t port2 = peer_port(p2);
    CHECK(ixl_remote_check(hub, "p1", NULL) == IXL_ERR_NOT_FOUND);
    PEER_OK(p1, "mdsend 127.0.0.1 %u", (unsigned)hport);
    CHECK_RC(ixl_remote_check(hub, "p1", NULL), IXL_OK); /* loaded before send returned */
    struct ixl_peer to2 = {"127.0.0.1", port2};
    CHECK_RC(ixl_md_fetch_status(hub, "p2"), IXL_ERR_NOT_FOUND); /* never fetched, not loaded */
    CHECK_STR_HAS(ixl_agent_last_error(hub), "no fetch of 'p2'");
    CHECK_RC(ixl_md_fetch_status(hub, "p1"), IXL_OK); /* loaded by p1's send, no fetch */
    CHECK_RC(ixl_md_fetch(hub, "p2", &to2, NULL), IXL_OK);
    int st = ixl_md_fetch_status(hub, "p2"); /* "not yet", unless it was very quick */
    CHECK(st == IXL_IN_PROGRESS || st == IXL_OK);
    uint64_t took = wait_loaded(hub, "p2", WAIT_MS);
    CHECK_RC(wait_fetch(hub, "p2", WAIT_MS), IXL_OK);
    peer_roundtrip(hub, local, &b1, BUF_LEN);
    peer_roundtrip(hub, local, &b2, BUF_LEN);
    peer_roundtrip(hub, local, &b2x, 4096);
    fprintf(stderr, "p1 sent, p2 fetched (%" PRIu64 " ms): 1 MiB WRITE+READ with each ok\n", took);

    /* p2 fetches the hub (telling its listener port), and writes into the hub */
    PEER_OK(p2, "mdfetch hub 127.0.0.1 %u", (unsigned)hport);
    PEER_OK(p2, "mdwait hub %d", WAIT_MS);

    /* labels: p1 publishes only buffer 1 under "kv1"; another agent fetches it by label */
    struct rbuf b1y = peer_alloc(p1, 1, BUF_LEN, "heap");
    uint16_t port1 = peer_port(p1);
    PEER_OK(p1, "mdsend 127.0.0.1 %u kv1 1", (unsigned)hport); /* an incremental update */
    peer_roundtrip(hub, local, &b1y, BUF_LEN);
    uint16_t lport;
    struct ixl_agent *lab = hub_create("labeled", &lport);
    CHECK_RC(ixl_mem_register(lab, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    struct ixl_peer to1 = {"127.0.0.1", port1};
    CHECK_RC(ixl_md_fetch(lab, "p1", &to1, "kv1"), IXL_OK);
    wait_loaded(lab, "p1", WAIT_MS);
    struct ixl_dlist *in1 = list1(b1y.addr, BUF_LEN), *in0 = list1(b1.addr, BUF_LEN);
    CHECK_RC(ixl_remote_check(lab, "p1", in1), IXL_OK);
    CHECK(ixl_remote_check(lab, "p1", in0) == IXL_ERR_NOT_FOUND); /* not under the label */
    peer_roundtrip(lab, local, &b1y, 4096);
    CHECK(ixl_md_fetch(lab, "p1", &to1, "no such label!") == IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_md_fetch(lab, "p1", &to1, "absent"), IXL_OK); /* fails in its thread */
    /* The failed fetch's outcome, though p1 is still loaded from the fetch by "kv1". */
    st = wait_fetch(lab, "p1", WAIT_MS);
    CHECK(st < 0);
    CHECK_STR_HAS(ixl_agent_last_error(lab), "under label absent");
    CHECK_RC(ixl_remote_check(lab, "p1", NULL), IXL_OK);
    CHECK_RC(ixl_md_fetch_status(lab, "p1"), st); /* it stays */
    ixl_dlist_destroy(in1);
    ixl_dlist_destroy(in0);
    fprintf(stderr, "labeled partial metadata: sent, fetched by label, only its region loaded\n");

    /* invalidate_local: the hub tells p2 (which fetched it); p1 tells the hub and 'labeled' */
    PEER_OK(p2, "has hub");
    CHECK_RC(ixl_md_invalidate_local(hub, NULL), IXL_OK);
    char *r = NULL;
    for (uint64_t t = now_ms(); now_ms() - t < 2000; sleep_ms(10)) {
        peer_send(p2, "has hub");
        r = peer_line(p2, REPLY_MS);
        if (strncmp(r, "err", 3) == 0)
            break;
    }
    CHECK(r != NULL && strncmp(r, "err IXL_ERR_NOT_FOUND", 21) == 0);
    PEER_OK(p1, "mdinval 127.0.0.1 %u", (unsigned)hport);
    CHECK(ixl_remote_check(hub, "p1", NULL) == IXL_ERR_NOT_FOUND);
    fprintf(stderr, "invalidate_local reached a fetcher and a peer sent to\n");

    /* p1 restarted under the same name: a request made for the old one is STALE */
    PEER_OK(p1, "mdsend 127.0.0.1 %u", (unsigned)hport);
    struct ixl_dlist *l = list1((uintptr_t)local, 4096), *rl = list1(b1.addr, 4096);
    struct ixl_xfer *old;
    CHECK_RC(ixl_xfer_create(hub, IXL_OP_WRITE, l, rl, "p1", NULL, &old), IXL_OK);
    peer_kill(p1);
    p1 = peer_start("p1", "agent.listen=0", NULL);
    peer_ready(p1);
    b1 = peer_alloc(p1, 0, BUF_LEN, "heap");
    PEER_OK(p1, "mdsend 127.0.0.1 %u", (unsigned)hport);
    CHECK_RC(ixl_xfer_post(old), IXL_ERR_STALE);
    CHECK_RC(ixl_xfer_release(old), IXL_OK);
    peer_roundtrip(hub, local, &b1, BUF_LEN);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(rl);
    fprintf(stderr, "restarted peer re-sent its metadata: old request STALE, new ones ok\n");

    /* a dead listener: send fails at once, fetch fails in its thread (nothing loaded) */
    uint16_t dead = peer_port(p2);
    peer_kill(p2);
    CHECK_RC(ixl_remote_invalidate(hub, "p2"), IXL_OK);
    struct ixl_peer tod = {"127.0.0.1", dead};
    CHECK_RC(ixl_md_send(hub, &tod, NULL), IXL_ERR_CONN_REFUSED);
    CHECK_RC(ixl_md_fetch(hub, "p2", &tod, NULL), IXL_OK);
    CHECK_RC(wait_fetch(hub, "p2", WAIT_MS), IXL_ERR_CONN_REFUSED); /* failed, with its reason */
    CHECK_STR_HAS(ixl_agent_last_error(hub), "cannot connect to 127.0.0.1");
    CHECK(ixl_remote_check(hub, "p2", NULL) == IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_md_fetch_status(hub, "p2"), IXL_ERR_CONN_REFUSED); /* until invalidated */
    CHECK_RC(ixl_remote_invalidate(hub, "p2"), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_md_fetch_status(hub, "p2"), IXL_ERR_NOT_FOUND);
    struct ixl_peer noetcd = {NULL, 0};
    CHECK(ixl_md_send(hub, &noetcd, NULL) == IXL_ERR_INVALID_ARG);
    fprintf(stderr, "dead listener: send CONN_REFUSED, fetch loads nothing; no etcd: refused\n");

    test_untrusted(hub, hport);
    test_destroy_with_stuck_fetch();

    peer_exit(p1);
    CHECK_RC(ixl_mem_deregister(lab, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(lab);
    CHECK_RC(ixl_mem_deregister(hub, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(hub);
    free(local);
    fprintf(stderr, "test_mdx: all passed in %" PRIu64 " ms\n", now_ms() - t0);
    return 0;
}

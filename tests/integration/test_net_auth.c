/*
 * Who may talk to NET's data listener (issue 16, finding 4).
 *
 * With a cluster key (agent parameter auth_key):
 *   K1. raw TCP clients that do not know the key (net_raw.h) send a HELLO, then a WRITE of the
 *       target's region with the region's real key from its metadata and a NOTIF under a
 *       sender name: without the HELLO's auth flag; with it and no AUTH; with a random AUTH;
 *       with the target's own MAC sent back as AUTH. No frame is answered but the refusal, the
 *       connection closes, the region keeps its pattern, and no notification appears;
 *   K2. an agent with another key, and one with none, get IXL_ERR_AUTH for a WRITE and for a
 *       notification, and nothing lands;
 *   K3. an agent with the same key WRITEs a fresh pattern, READs it back into a poisoned
 *       buffer (checked) and sends a notification that arrives.
 * Without a key:
 *   L1. the listener is bound to 127.0.0.1 (getsockname of the agent's listening socket); an
 *       explicit non-loopback listen_addr is refused at creation, naming IXL_AUTH_KEY and
 *       insecure_remote; with insecure_remote the default listener binds 0.0.0.0;
 *   L2. (root) a process of another user (nobody, forked) connects and sends HELLO, WRITE and
 *       NOTIF: closed without an answer, nothing lands, no notification;
 *   L3. (root) another user's process listens on a port an agent's metadata names (the agent
 *       is gone): a WRITE to it fails with IXL_ERR_AUTH before any byte is sent.
 * Without root, L2 and L3 are skipped and the test exits 77 after the rest passed.
 */
#include <grp.h>
#include <ifaddrs.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "net_raw.h"

/* The handshake's part of the wire format (net_wire.h since issue 16), written out here so that
 * the test builds, and fails, against a NET that has none. */
#ifndef NET_HELLO_F_AUTH
#define NET_HELLO_F_AUTH 1u
#define NET_CHALLENGE 10
#define NET_AUTH 11
#define NET_MAC_BYTES 32
#define NET_CHALLENGE_BYTES 48
#endif

#define KEY "test-net-auth: the cluster key 0123456789"
#define KEY2 "test-net-auth: another key 9876543210"
#define LEN (64u << 10)
#define NOBODY 65534

/* An agent with only NET; key NULL: none; insecure: insecure_remote. */
static ixl_status agent(const char *name, const char *key, bool insecure, const char *const *kv,
                        struct ixl_agent **out, char *why, size_t cap)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    if (key != NULL) {
        p.field_mask |= IXL_AGENT_F_AUTH_KEY;
        p.auth_key = key;
    }
    if (insecure) {
        p.field_mask |= IXL_AGENT_F_INSECURE_REMOTE;
        p.insecure_remote = true;
    }
    struct ixl_kv opts[16];
    size_t n = 0;
    for (; kv != NULL && kv[2 * n] != NULL && n < 16; n++)
        opts[n] = (struct ixl_kv){kv[2 * n], kv[2 * n + 1]};
    struct ixl_agent *a = NULL;
    ixl_status st = ixl_agent_create(name, &p, &a);
    if (st != IXL_OK) {
        snprintf(why, cap, "ixl_agent_create %s: %s", name, ixl_agent_last_error(NULL));
        return st;
    }
    st = ixl_backend_create(a, "NET", opts, n, NULL);
    if (st != IXL_OK) {
        snprintf(why, cap, "%s", ixl_agent_last_error(a));
        ixl_agent_destroy(a);
        return st;
    }
    *out = a;
    return IXL_OK;
}

static struct ixl_agent *agent_ok(const char *name, const char *key, const char *const *kv)
{
    struct ixl_agent *a;
    char why[512];
    if (agent(name, key, false, kv, &a, why, sizeof(why)) != IXL_OK)
        check_fail(__FILE__, __LINE__, "agent %s: %s", name, why);
    return a;
}

/* Notifications a has received (drained); with from, how many came from that name. */
static int drain(struct ixl_agent *a, const char *from, int *n_from)
{
    struct ixl_notif_batch *b = NULL;
    CHECK_RC(ixl_notif_drain(a, &b), IXL_OK);
    int n = b ? (int)b->count : 0;
    for (int i = 0; i < n && from; i++)
        *n_from += strcmp(b->items[i].agent, from) == 0;
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  notification from '%s' (%zu bytes)\n", b->items[i].agent,
                b->items[i].len);
    ixl_free(b);
    return n;
}

/* ---- raw clients ------------------------------------------------------------------------- */

static size_t put_hello(uint8_t *b, uint64_t instance, const char *name, uint16_t flags,
                        const uint8_t nonce[16])
{
    size_t n = strlen(name);
    uint8_t *pl = b + NET_HDR_BYTES;
    nr_put(pl, 0x1234, 8);
    nr_put(pl + 8, instance, 8);
    nr_put(pl + 16, n, 2);
    memcpy(pl + 18, name, n);
    nr_hdr(b, NET_HELLO, 77, nonce ? nr_get(nonce, 8) : 0, 18 + n,
           nonce ? nr_get(nonce + 8, 8) : 0);
    nr_put(b + 6, flags, 2);
    return NET_HDR_BYTES + 18 + n;
}

/* A WRITE of LEN bytes of 0x66 into the target's region, then a NOTIF under name "victim". */
static size_t put_attack(uint8_t *b, uint64_t addr, uint64_t key)
{
    nr_hdr(b, NET_WRITE, 5, addr, LEN, key);
    memset(b + NET_HDR_BYTES, 0x66, LEN);
    size_t at = NET_HDR_BYTES + LEN;
    nr_hdr(b + at, NET_NOTIF, 0, 0, 5, 0);
    memcpy(b + at + NET_HDR_BYTES, "evil!", 5);
    return at + NET_HDR_BYTES + 5;
}

/* Reads frames until the target closes (or 3 s): 0 when it closed having answered nothing
 * but a refusing HELLO_ACK; else 1, with what came in what. */
static int expect_refused(int fd, char *what, size_t cap)
{
    double t0 = nr_now();
    for (;;) {
        uint8_t h[NET_HDR_BYTES];
        ssize_t n = recv(fd, h, sizeof(h), MSG_WAITALL);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return 0; /* closed */
        if (n < 0) {
            if (nr_now() - t0 > 3.0) {
                snprintf(what, cap, "the connection is still open after 3 s");
                return 1;
            }
            continue;
        }
        if (n != (ssize_t)sizeof(h))
            return 0;
        int op = h[5];
        int32_t st = (int32_t)(uint32_t)nr_get(h + 8, 4);
        if (op == NET_HELLO_ACK && st != 0)
            continue; /* the refusal */
        snprintf(what, cap, "the target answered op %d status %d", op, (int)st);
        return 1;
    }
}

/* The cases of K1; each leaves the region and the notification queue to be checked. */
static void raw_case(const char *what, uint16_t port, uint64_t instance, uint64_t addr,
                     uint64_t key, int mode)
{
    static uint8_t b[2 * NET_HDR_BYTES + NET_HELLO_MAX + LEN + 64];
    int fd = nr_connect(port, 0, 500);
    CHECK(fd >= 0);
    uint8_t nonce[16];
    for (int i = 0; i < 16; i++)
        nonce[i] = (uint8_t)(i * 37 + 1);
    size_t n = put_hello(b, instance, "victim", mode == 0 ? 0 : NET_HELLO_F_AUTH, nonce);
    if (mode != 0) {
        /* The CHALLENGE first (a target that takes the HELLO as it is answers HELLO_ACK). */
        CHECK(nr_send(fd, b, n) == 0);
        uint8_t h[NET_HDR_BYTES], ch[NET_CHALLENGE_BYTES];
        if (nr_recv_all(fd, h, sizeof(h)) != 0) {
            nr_fail("%s: no answer to the HELLO", what);
            close(fd);
            return;
        }
        if (h[5] != NET_CHALLENGE || nr_get(h + 32, 8) != NET_CHALLENGE_BYTES) {
            nr_fail("%s: the HELLO was answered with op %d status %d, not a CHALLENGE", what, h[5],
                    (int)(int32_t)(uint32_t)nr_get(h + 8, 4));
        } else {
            CHECK(nr_recv_all(fd, ch, sizeof(ch)) == 0);
        }
        n = 0;
        if (mode == 2 || mode == 3) {
            nr_hdr(b, NET_AUTH, 0, 0, NET_MAC_BYTES, 0);
            for (int i = 0; i < NET_MAC_BYTES; i++) /* random, or the target's own MAC */
                b[NET_HDR_BYTES + i] = mode == 2 ? (uint8_t)(rand() & 0xff) : ch[16 + i];
            n = NET_HDR_BYTES + NET_MAC_BYTES;
        }
    }
    n += put_attack(b + n, addr, key);
    (void)nr_send(fd, b, n); /* the target may close before all of it is in */
    char got[128];
    if (expect_refused(fd, got, sizeof(got)) != 0)
        nr_fail("%s: %s", what, got);
    else
        fprintf(stderr, "%s: refused and closed\n", what);
    close(fd);
}

/* ---- the cases with a key ------------------------------------------------------------------- */

static void check_region(const char *what, const uint8_t *buf, uint64_t seed)
{
    size_t bad = net_pat_find_bad(buf, LEN, seed, 0);
    if (bad != LEN)
        nr_fail("%s: the target's region changed at byte %zu (0x%02x): bytes landed", what, bad,
                buf[bad]);
}

static void check_no_notif(const char *what, struct ixl_agent *t)
{
    nr_sleep_ms(100);
    int n = drain(t, NULL, NULL);
    if (n != 0)
        nr_fail("%s: %d notification(s) appeared at the target", what, n);
}

/* A peer that must be refused with IXL_ERR_AUTH (K2). */
static void bad_peer(const char *name, const char *key, struct ixl_agent *t, const void *md,
                     size_t md_len, uint8_t *tbuf, uint64_t seed)
{
    const char *kv[] = {"timeout_ms", "1000", "path", "tcp", NULL};
    struct ixl_agent *a = agent_ok(name, key, kv);
    uint8_t *src = aligned_alloc(4096, LEN);
    CHECK(src != NULL);
    memset(src, 0x77, LEN);
    struct ixl_reg_desc rd = {(uintptr_t)src, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_status st = ixl_md_load(a, md, md_len, NULL, 0);
    if (st != IXL_OK) {
        /* Authenticated metadata may refuse the blob already: as good. */
        if (st != IXL_ERR_AUTH)
            nr_fail("%s: ixl_md_load: %s: %s", name, ixl_strerror(st), ixl_agent_last_error(a));
        else
            fprintf(stderr, "%s: its ixl_md_load is refused: %s\n", name, ixl_agent_last_error(a));
    } else {
        struct ixl_xfer *x;
        CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, (uintptr_t)tbuf, LEN, "target", &x), IXL_OK);
        double t0 = nr_now();
        st = nr_post_wait(x, 5000);
        const char *why = ixl_agent_last_error(a);
        fprintf(stderr, "%s: WRITE: %s after %.2f s: %s\n", name, ixl_strerror(st), nr_now() - t0,
                why);
        if (st != IXL_ERR_AUTH)
            nr_fail("%s: its WRITE ended with %s, not IXL_ERR_AUTH", name, ixl_strerror(st));
        else if (strstr(why, "key") == NULL)
            nr_fail("%s: the error does not say it is about the key: %s", name, why);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        st = ixl_notif_send(a, "target", "bad", 3, NULL);
        fprintf(stderr, "%s: notification: %s: %s\n", name, ixl_strerror(st),
                ixl_agent_last_error(a));
        if (st != IXL_ERR_AUTH)
            nr_fail("%s: its notification ended with %s, not IXL_ERR_AUTH", name, ixl_strerror(st));
    }
    check_region(name, tbuf, seed);
    check_no_notif(name, t);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    free(src);
}

static void with_key(void)
{
    const char *kv[] = {"timeout_ms", "1000", NULL};
    struct ixl_agent *t = agent_ok("target", KEY, kv);
    uint8_t *buf = aligned_alloc(4096, LEN);
    CHECK(buf != NULL);
    uint64_t seed = (uint64_t)time(NULL);
    net_pat_fill(buf, LEN, seed, 0);
    struct ixl_reg_desc rd = {(uintptr_t)buf, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    struct nr_target tg;
    nr_learn(t, &tg);
    uint64_t rkey = nr_region_key(t, (uintptr_t)buf, LEN);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(t, NULL, &md, &md_len), IXL_OK);

    /* K1 */
    raw_case("K1a raw client, plain HELLO", tg.port, tg.instance, (uintptr_t)buf, rkey, 0);
    raw_case("K1b raw client, no AUTH", tg.port, tg.instance, (uintptr_t)buf, rkey, 1);
    raw_case("K1c raw client, random AUTH", tg.port, tg.instance, (uintptr_t)buf, rkey, 2);
    raw_case("K1d raw client, the target's MAC as AUTH", tg.port, tg.instance, (uintptr_t)buf, rkey,
             3);
    check_region("K1", buf, seed);
    check_no_notif("K1", t);

    /* K2 */
    bad_peer("K2a another key", KEY2, t, md, md_len, buf, seed);
    bad_peer("K2b no key", NULL, t, md, md_len, buf, seed);

    /* K3 */
    const char *gkv[] = {"timeout_ms", "1000", "path", "tcp", NULL};
    struct ixl_agent *g = agent_ok("good", KEY, gkv);
    uint8_t *src = aligned_alloc(4096, LEN), *dst = aligned_alloc(4096, LEN);
    CHECK(src != NULL && dst != NULL);
    struct ixl_reg_desc grd[2] = {{(uintptr_t)src, LEN, 0, NULL, 0},
                                  {(uintptr_t)dst, LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(g, IXL_MEM_DRAM, grd, 2, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(g, md, md_len, NULL, 0), IXL_OK);
    uint64_t s2 = seed + 1;
    net_pat_fill(src, LEN, s2, 0);
    memset(dst, 0xa5, LEN);
    struct ixl_xfer *w, *r;
    CHECK_RC(nr_xfer(g, IXL_OP_WRITE, src, (uintptr_t)buf, LEN, "target", &w), IXL_OK);
    CHECK_RC(nr_xfer(g, IXL_OP_READ, dst, (uintptr_t)buf, LEN, "target", &r), IXL_OK);
    ixl_status st = nr_post_wait(w, 10000);
    if (st != IXL_OK)
        nr_fail("K3: the WRITE with the same key: %s: %s", ixl_strerror(st),
                ixl_agent_last_error(g));
    check_region("K3 (the WRITE's pattern)", buf, s2);
    st = nr_post_wait(r, 10000);
    if (st != IXL_OK)
        nr_fail("K3: the READ with the same key: %s: %s", ixl_strerror(st),
                ixl_agent_last_error(g));
    size_t bad = net_pat_find_bad(dst, LEN, s2, 0);
    if (bad != LEN)
        nr_fail("K3: the READ brought wrong bytes at %zu", bad);
    CHECK_RC(ixl_notif_send(g, "target", "good", 4, NULL), IXL_OK);
    int from = 0;
    for (int i = 0; i < 100 && from == 0; i++) {
        drain(t, "good", &from);
        if (from == 0)
            nr_sleep_ms(20);
    }
    if (from != 1)
        nr_fail("K3: the notification of the agent with the key did not arrive");
    else
        fprintf(stderr, "K3: WRITE, READ (checked) and a notification with the same key\n");
    CHECK_RC(ixl_xfer_release(w), IXL_OK);
    CHECK_RC(ixl_xfer_release(r), IXL_OK);
    CHECK_RC(ixl_mem_deregister(g, IXL_MEM_DRAM, grd, 2, NULL), IXL_OK);
    ixl_agent_destroy(g);
    free(src);
    free(dst);
    ixl_free(md);
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(t);
    free(buf);
}

/* ---- without a key ------------------------------------------------------------------------ */

/* The address of the process's listening TCP socket on port, through getsockname. */
static int listener_addr(uint16_t port, struct in_addr *out)
{
    for (int fd = 3; fd < 4096; fd++) {
        int acc = 0;
        socklen_t al = sizeof(acc);
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0 || !acc ||
            getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 || sa.sin_family != AF_INET ||
            ntohs(sa.sin_port) != port)
            continue;
        *out = sa.sin_addr;
        return 0;
    }
    return -1;
}

static void check_listener(const char *what, struct ixl_agent *a, in_addr_t want)
{
    struct nr_target tg;
    nr_learn(a, &tg);
    struct in_addr in;
    if (listener_addr(tg.port, &in) != 0) {
        nr_fail("%s: no listening socket on port %u found", what, tg.port);
        return;
    }
    char s[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in, s, sizeof(s));
    fprintf(stderr, "%s: the listener is bound to %s:%u\n", what, s, tg.port);
    if (in.s_addr != want)
        nr_fail("%s: the listener is bound to %s", what, s);
}

/* A non-loopback IPv4 address of this host, or a documentation one. */
static void some_remote_addr(char *out, size_t cap)
{
    snprintf(out, cap, "192.0.2.1");
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            struct in_addr a = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) != 127) {
                inet_ntop(AF_INET, &a, out, cap);
                break;
            }
        }
    }
    freeifaddrs(ifs);
}

/* Child (another user): connects, sends HELLO, WRITE, NOTIF; exit 0 when closed unanswered. */
static int nobody_client(uint16_t port, uint64_t instance, uint64_t addr, uint64_t key)
{
    static uint8_t b[NET_HDR_BYTES + NET_HELLO_MAX + 2 * NET_HDR_BYTES + LEN + 64];
    if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        return 10;
    int fd = nr_connect(port, 0, 500);
    if (fd < 0)
        return 0; /* not even connected: as good */
    size_t n = put_hello(b, instance, "victim", 0, NULL);
    n += put_attack(b + n, addr, key);
    (void)nr_send(fd, b, n);
    double t0 = nr_now();
    for (;;) {
        uint8_t h[NET_HDR_BYTES];
        ssize_t got = recv(fd, h, sizeof(h), MSG_WAITALL);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return 0;
        if (got > 0)
            return 2; /* answered */
        if (nr_now() - t0 > 3.0)
            return 3; /* still open */
    }
}

/* Child (another user): listens on 127.0.0.1:port and answers every HELLO with HELLO_ACK OK
 * and every WRITE with a WRITE_ACK OK, as a squatter of the port would. */
static int nobody_squatter(uint16_t port, int ready)
{
    if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        return 10;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char ok = 1;
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(l, 16) != 0)
        ok = 0;
    (void)!write(ready, &ok, 1);
    if (!ok)
        return 11;
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0)
            continue;
        uint8_t h[NET_HDR_BYTES];
        nr_hdr(h, NET_HELLO_ACK, 77, 0, 0, 0);
        (void)nr_send(fd, h, sizeof(h));
        static uint8_t sink[1 << 16];
        while (recv(fd, sink, sizeof(sink), 0) > 0) {
        }
        close(fd);
    }
}

static int without_key(void)
{
    char why[512];
    /* L1 */
    struct ixl_agent *t = agent_ok("local", NULL, (const char *[]){"timeout_ms", "1000", NULL});
    check_listener("L1 no key, listen_addr by default", t, htonl(INADDR_LOOPBACK));
    char remote[INET_ADDRSTRLEN];
    some_remote_addr(remote, sizeof(remote));
    struct ixl_agent *x = NULL;
    ixl_status st = agent("explicit", NULL, false, (const char *[]){"listen_addr", remote, NULL},
                          &x, why, sizeof(why));
    fprintf(stderr, "L1 no key, listen_addr=%s: %s: %s\n", remote, ixl_strerror(st),
            st == IXL_OK ? "created" : why);
    if (st == IXL_OK) {
        nr_fail("L1: NET without a key listens on %s", remote);
        ixl_agent_destroy(x);
    } else if (st != IXL_ERR_INVALID_ARG || strstr(why, "IXL_AUTH_KEY") == NULL ||
               strstr(why, "insecure_remote") == NULL) {
        nr_fail("L1: the refusal does not name IXL_AUTH_KEY and insecure_remote: %s", why);
    }
    st = agent("open", NULL, true, NULL, &x, why, sizeof(why));
    if (st != IXL_OK) {
        nr_fail("L1: an agent with insecure_remote: %s", why);
    } else {
        check_listener("L1 insecure_remote", x, htonl(INADDR_ANY));
        ixl_agent_destroy(x);
    }
    if (geteuid() != 0) {
        fprintf(stderr, "L2, L3: skipped (not root: another user cannot be played)\n");
        ixl_agent_destroy(t);
        return 77;
    }

    /* L2 */
    uint8_t *buf = aligned_alloc(4096, LEN);
    CHECK(buf != NULL);
    uint64_t seed = (uint64_t)time(NULL) + 7;
    net_pat_fill(buf, LEN, seed, 0);
    struct ixl_reg_desc rd = {(uintptr_t)buf, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    struct nr_target tg;
    nr_learn(t, &tg);
    uint64_t rkey = nr_region_key(t, (uintptr_t)buf, LEN);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(nobody_client(tg.port, tg.instance, (uintptr_t)buf, rkey));
    int ws;
    CHECK(waitpid(pid, &ws, 0) == pid);
    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 100;
    fprintf(stderr, "L2 a process of uid %d: %s\n", NOBODY,
            code == 0   ? "closed unanswered"
            : code == 2 ? "answered"
            : code == 3 ? "left open"
                        : "could not run");
    if (code != 0)
        nr_fail("L2: the connection of another user was %s (child exit %d)",
                code == 2   ? "answered"
                : code == 3 ? "left open"
                            : "not tried",
                code);
    check_region("L2", buf, seed);
    check_no_notif("L2", t);
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(t);
    free(buf);

    /* L3: the agent goes; another user takes its port. */
    struct ixl_agent *gone = agent_ok("gone", NULL, (const char *[]){"timeout_ms", "1000", NULL});
    uint8_t *gbuf = aligned_alloc(4096, LEN);
    CHECK(gbuf != NULL);
    struct ixl_reg_desc grd = {(uintptr_t)gbuf, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(gone, IXL_MEM_DRAM, &grd, 1, NULL), IXL_OK);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(gone, NULL, &md, &md_len), IXL_OK);
    nr_learn_blob(md, md_len, &tg);
    CHECK_RC(ixl_mem_deregister(gone, IXL_MEM_DRAM, &grd, 1, NULL), IXL_OK);
    ixl_agent_destroy(gone);
    int pf[2];
    CHECK(pipe(pf) == 0);
    fflush(NULL);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(pf[0]);
        _exit(nobody_squatter(tg.port, pf[1]));
    }
    close(pf[1]);
    char ok = 0;
    CHECK(read(pf[0], &ok, 1) == 1);
    close(pf[0]);
    if (!ok) {
        nr_fail("L3: the squatter could not listen on port %u", tg.port);
    } else {
        struct ixl_agent *a = agent_ok("initiator", NULL,
                                       (const char *[]){"timeout_ms", "1000", "path", "tcp", NULL});
        uint8_t *src = aligned_alloc(4096, LEN);
        CHECK(src != NULL);
        memset(src, 0x55, LEN);
        struct ixl_reg_desc srd = {(uintptr_t)src, LEN, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &srd, 1, NULL), IXL_OK);
        CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
        struct ixl_xfer *w;
        CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, (uintptr_t)gbuf, LEN, "gone", &w), IXL_OK);
        st = nr_post_wait(w, 5000);
        fprintf(stderr, "L3 WRITE to a port of another user: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(a));
        if (st != IXL_ERR_AUTH)
            nr_fail("L3: a WRITE to another user's listener ended with %s, not IXL_ERR_AUTH",
                    ixl_strerror(st));
        CHECK_RC(ixl_xfer_release(w), IXL_OK);
        CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &srd, 1, NULL), IXL_OK);
        ixl_agent_destroy(a);
        free(src);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &ws, 0);
    ixl_free(md);
    free(gbuf);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_auth", 100, NULL);
    ixl_log_set_level(IXL_LOG_NONE);
    srand((unsigned)time(NULL));
    double t0 = nr_now();
    with_key();
    int rc = without_key();
    fprintf(stderr, "took %.1f s\n", nr_now() - t0);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return rc;
}

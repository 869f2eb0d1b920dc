/*
 * One side of test_net_netns_vram.sh (issue 20): VRAM on the simulated device between two
 * agents in two network namespaces, joined by a veth pair. The agents keep their defaults
 * (path auto, local_paths on): nothing switches the same-node paths off, so the staged path
 * must be NET's own choice, made because its same-node channel (an abstract Unix socket, which
 * a network namespace does not share) has no answer. Every NET has stage_bytes=2M (two 1 MiB
 * pinned slots per peer), so every transfer here is larger than the pool and its chunks wait
 * for slots at both ends.
 *
 *   net_ns_vram target <dir> <addr> <name>
 *       An agent <name> bound to <addr> with 8 MiB of VRAM and 8 MiB of DRAM registered; it
 *       writes <dir>/<name>.md (its metadata) and <dir>/<name>.info (pid, VRAM and DRAM
 *       addresses), then serves one initiator on the Unix socket <dir>/<name>.sock (a path in
 *       the file system: it joins the namespaces, unlike NET's abstract one): fill or poison a
 *       buffer, check a buffer, wait for a notification and check the data at once, quit. Its
 *       memory is touched only through ixl_device_copy when VRAM.
 *   net_ns_vram initiator <dir> <addr>
 *       Agent "nsv-i": loads the metadata of "nsv-t" (served) and "nsv-v" (the victim, whose
 *       copies the script slows down) and runs:
 *       pairs  VRAM->VRAM, VRAM->DRAM and DRAM->VRAM, by WRITE and READ, three descriptors
 *              (odd sizes and offsets, 6 MiB in all, one of them 5 MiB): a fresh pattern
 *              at the source and poison at the destination before each, the path
 *              "tcp-staged" (never cuda-ipc, cuda-shm or shm), and NET's log saying why the
 *              same-node channel was refused; each WRITE carries a notification, and the
 *              target checks its data the moment that notification is drained (the
 *              target's device copies are slowed, so a notification sent before the last
 *              slot-to-device copy ended finds the data incomplete)
 *       kill   a WRITE and a READ to "nsv-v" in flight together (asserted), the victim killed
 *              (SIGKILL, its pid from its .info: one pid namespace): both fail within a
 *              bound, never OK or a hang; once released, nothing lands in the READ's VRAM
 *       after  a checked WRITE to "nsv-t" still works, then "nsv-t" is told to quit
 *
 * Exit 0 when every check passed, 1 otherwise (with a message on stderr). A side that fails
 * leaves <dir>/failed behind, so that the others stop waiting at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define SZ ((size_t)8 << 20)
#define WAIT_S 60
#define KEY "net-netns-vram-test-cluster-key-0123456789"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the shared directory ------------------------------------------------------------------ */

static const char *shared_dir;
static int succeeded;

static void path_of(char *out, size_t cap, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", shared_dir, name);
    CHECK(n > 0 && (size_t)n < cap);
}

/* At exit: a failed run says so to the other side. */
static void mark_failed(void)
{
    char path[4096];
    if (succeeded || shared_dir == NULL ||
        snprintf(path, sizeof(path), "%s/failed", shared_dir) >= (int)sizeof(path))
        return;
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void stop_if_other_failed(void)
{
    char path[4096];
    path_of(path, sizeof(path), "failed");
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "another side failed\n");
        exit(1);
    }
}

/* Writes a file whole, under a temporary name first, so a reader never sees half of it. */
static void write_file(const char *name, const void *p, size_t len)
{
    char path[4096], tmp[4096], tname[300];
    snprintf(tname, sizeof(tname), ".%s.tmp", name);
    path_of(path, sizeof(path), name);
    path_of(tmp, sizeof(tmp), tname);
    FILE *f = fopen(tmp, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(p, 1, len, f) == len);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0);
}

/* Waits up to WAIT_S for a file and returns its bytes (malloc'd, NUL-terminated). */
static char *wait_file(const char *name, size_t *len)
{
    char path[4096];
    path_of(path, sizeof(path), name);
    uint64_t t0 = now_ms();
    FILE *f;
    while ((f = fopen(path, "rb")) == NULL) {
        stop_if_other_failed();
        if (now_ms() - t0 > WAIT_S * 1000u)
            check_fail(__FILE__, __LINE__, "%s did not appear in %d s", path, WAIT_S);
        sleep_ms(20);
    }
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

/* ---- agents and memory --------------------------------------------------------------------- */

static struct ixl_agent *agent_new(const char *name, const char *addr)
{
    /* A real link: NET listens beyond loopback only with a cluster key (issue 16). */
    struct ixl_agent_params p = {.field_mask =
                                     IXL_AGENT_F_BACKENDS | IXL_AGENT_F_AUTH_KEY | IXL_AGENT_F_ETCD,
                                 .backends = "",
                                 .auth_key = KEY,
                                 .etcd_endpoints = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    /* path and local_paths stay at their defaults (auto, on): see the top. */
    const struct ixl_kv kv[] = {
        {"listen_addr", addr}, {"addrs", addr}, {"stage_bytes", "2M"}, {"timeout_ms", "5000"}};
    ixl_status st = ixl_backend_create(a, "NET", kv, 4, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "NET on %s: %s: %s", addr, ixl_strerror(st),
                   ixl_agent_last_error(a));
    struct ixl_backend *be = NULL;
    CHECK_RC(ixl_backend_find(a, "NET", &be), IXL_OK);
    if (!(ixl_backend_mem_mask(be) & IXL_MEM_BIT(IXL_MEM_VRAM)))
        check_fail(__FILE__, __LINE__, "NET has no VRAM on the simulated device: %s",
                   ixl_backend_mem_why(be));
    return a;
}

struct buf {
    enum ixl_mem type;
    uint8_t *p;
};

static struct buf buf_new(struct ixl_agent *a, enum ixl_mem type)
{
    struct buf b = {type, NULL};
    if (type == IXL_MEM_VRAM) {
        void *p = NULL;
        CHECK_RC(ixl_device_alloc(0, SZ, &p), IXL_OK);
        b.p = p;
    } else {
        b.p = aligned_alloc(4096, SZ);
        CHECK(b.p != NULL);
    }
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b.p, SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, type, &d, 1, NULL), IXL_OK);
    return b;
}

static void buf_free(struct ixl_agent *a, struct buf *b)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b->p, SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, b->type, &d, 1, NULL), IXL_OK);
    if (b->type == IXL_MEM_VRAM)
        CHECK_RC(ixl_device_free(b->p), IXL_OK);
    else
        free(b->p);
}

/* The pattern of seed (byte i depends on seed and i), or poison (seed 0). */
static void pat_fill(uint8_t *h, uint64_t seed)
{
    if (seed == 0) {
        memset(h, 0xA5, SZ);
        return;
    }
    for (size_t i = 0; i < SZ; i += 8) {
        uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ ((i / 8 + 1) * 0xBF58476D1CE4E5B9ull);
        x ^= x >> 29;
        memcpy(h + i, &x, 8);
    }
}

/* The whole buffer: the pattern of seed, or poison (seed 0). */
static void buf_fill(const struct buf *b, uint64_t seed)
{
    if (b->type == IXL_MEM_DRAM) {
        pat_fill(b->p, seed);
        return;
    }
    uint8_t *h = malloc(SZ);
    CHECK(h != NULL);
    pat_fill(h, seed);
    CHECK_RC(ixl_device_copy(b->p, h, SZ), IXL_OK);
    free(h);
}

/* The transfers' layout: three descriptors, the source's at SOFF and the destination's at DOFF
 * (6 MiB in all, the first 5 MiB alone: both more than the 2 MiB of slots). */
#define NDESC 3
static const size_t SOFF[NDESC] = {3, ((size_t)5 << 20) + 8192, ((size_t)6 << 20) + 5};
static const size_t DOFF[NDESC] = {((size_t)2 << 20) + 11, 4096 + 5, ((size_t)1 << 19) + 1};
static const size_t LEN[NDESC] = {((size_t)5 << 20) + 17, 4099, ((size_t)1 << 20) + 12345};

/* 0 when b holds the source's pattern of seed at each descriptor and poison elsewhere; else
 * why in out. */
static int buf_check(const struct buf *b, uint64_t seed, char *why, size_t why_len)
{
    uint8_t *h = malloc(SZ), *want = malloc(SZ), *src = malloc(SZ);
    CHECK(h != NULL && want != NULL && src != NULL);
    if (b->type == IXL_MEM_VRAM)
        CHECK_RC(ixl_device_copy(h, b->p, SZ), IXL_OK);
    else
        memcpy(h, b->p, SZ);
    memset(want, 0xA5, SZ);
    pat_fill(src, seed);
    for (int d = 0; d < NDESC; d++)
        memcpy(want + DOFF[d], src + SOFF[d], LEN[d]);
    int rc = 0;
    if (memcmp(h, want, SZ) != 0) {
        size_t i = 0;
        while (h[i] == want[i])
            i++;
        snprintf(why, why_len, "byte %zu of the %s buffer is 0x%02x, want 0x%02x", i,
                 ixl_mem_name(b->type), h[i], want[i]);
        rc = 1;
    }
    free(h);
    free(want);
    free(src);
    return rc;
}

/* ---- the command channel: a Unix socket in the shared directory ---------------------------- */

struct cmd {
    char op;   /* f fill (seed 0: poison), c check, w wait for notification text then check, q */
    int which; /* 0 VRAM, 1 DRAM */
    uint64_t seed;
    char text[32];
};
struct reply {
    int rc;
    char why[200];
};

static int io_all(int fd, void *p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? send(fd, (char *)p + done, n - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)p + done, n - done, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static struct sockaddr_un sock_addr(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char file[300];
    snprintf(file, sizeof(file), "%s.sock", name);
    path_of(sa.sun_path, sizeof(sa.sun_path), file);
    return sa;
}

/* ---- the target ---------------------------------------------------------------------------- */

/* Waits for a notification from nsv-i saying text; 1 when it came, 0 after WAIT_S. */
static int notif_wait(struct ixl_agent *a, const char *text)
{
    uint64_t t0 = now_ms();
    while (now_ms() - t0 < WAIT_S * 1000u) {
        struct ixl_notif_batch *nb = NULL;
        CHECK_RC(ixl_notif_drain(a, &nb), IXL_OK);
        int got = 0;
        for (size_t i = 0; nb != NULL && i < nb->count; i++) {
            const struct ixl_notif *it = &nb->items[i];
            if (strcmp(it->agent, "nsv-i") != 0)
                check_fail(__FILE__, __LINE__, "a notification from '%s'", it->agent);
            if (it->len != strlen(text) || memcmp(it->msg, text, it->len) != 0)
                check_fail(__FILE__, __LINE__,
                           "an unexpected notification (%zu bytes) while waiting for '%s'", it->len,
                           text);
            got++;
        }
        ixl_free(nb);
        if (got > 1)
            check_fail(__FILE__, __LINE__, "'%s' delivered %d times", text, got);
        if (got == 1)
            return 1;
        /* The data is checked within 0.2 ms of the notification's arrival; the device
         * copies take 5 ms each here (the script slows them down). */
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int run_target(const char *addr, const char *name)
{
    struct ixl_agent *a = agent_new(name, addr);
    struct buf b[2] = {buf_new(a, IXL_MEM_VRAM), buf_new(a, IXL_MEM_DRAM)};
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = sock_addr(name);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(ls, 1) == 0);
    void *md = NULL;
    size_t md_len = 0;
    CHECK_RC(ixl_md_get(a, NULL, &md, &md_len), IXL_OK);
    char file[300], text[128];
    snprintf(file, sizeof(file), "%s.md", name);
    write_file(file, md, md_len);
    ixl_free(md);
    int n = snprintf(text, sizeof(text), "%d %" PRIxPTR " %" PRIxPTR "\n", (int)getpid(),
                     (uintptr_t)b[0].p, (uintptr_t)b[1].p);
    snprintf(file, sizeof(file), "%s.info", name);
    write_file(file, text, (size_t)n);

    /* One initiator. The victim waits here until it is killed. */
    uint64_t t0 = now_ms();
    struct pollfd pf = {ls, POLLIN, 0};
    while (poll(&pf, 1, 100) == 0) {
        stop_if_other_failed();
        if (now_ms() - t0 > WAIT_S * 1000u)
            check_fail(__FILE__, __LINE__, "%s: no initiator in %d s", name, WAIT_S);
    }
    int fd = accept(ls, NULL, NULL);
    CHECK(fd >= 0);
    struct cmd c;
    int commands = 0;
    while (io_all(fd, &c, sizeof(c), 0) == 0 && c.op != 'q') {
        struct reply r = {0, ""};
        c.text[sizeof(c.text) - 1] = '\0';
        CHECK(c.which == 0 || c.which == 1);
        if (c.op == 'f') {
            buf_fill(&b[c.which], c.seed);
        } else if (c.op == 'c') {
            r.rc = buf_check(&b[c.which], c.seed, r.why, sizeof(r.why));
        } else if (c.op == 'w') {
            if (!notif_wait(a, c.text)) {
                r.rc = 1;
                snprintf(r.why, sizeof(r.why), "no notification '%s' in %d s", c.text, WAIT_S);
            } else {
                r.rc = buf_check(&b[c.which], c.seed, r.why, sizeof(r.why));
            }
        } else {
            check_fail(__FILE__, __LINE__, "unknown command '%c'", c.op);
        }
        CHECK(io_all(fd, &r, sizeof(r), 1) == 0);
        commands++;
    }
    if (c.op != 'q')
        check_fail(__FILE__, __LINE__, "%s: the initiator went away without 'q'", name);
    struct reply r = {0, ""};
    CHECK(io_all(fd, &r, sizeof(r), 1) == 0);
    close(fd);
    close(ls);
    buf_free(a, &b[0]);
    buf_free(a, &b[1]);
    ixl_agent_destroy(a);
    printf("%s: served %d commands\n", name, commands);
    return 0;
}

/* ---- the initiator ------------------------------------------------------------------------- */

struct peer {
    char name[16];
    int pid;
    uint64_t addr[2]; /* VRAM, DRAM */
    int fd;           /* the command socket, -1 for the victim */
};

static struct peer peer_load(struct ixl_agent *a, const char *name, int serve)
{
    struct peer p = {.fd = -1};
    snprintf(p.name, sizeof(p.name), "%s", name);
    char file[300];
    size_t len;
    snprintf(file, sizeof(file), "%s.md", name);
    char *md = wait_file(file, &len);
    char got[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(a, md, len, got, sizeof(got)), IXL_OK);
    CHECK(strcmp(got, name) == 0);
    free(md);
    snprintf(file, sizeof(file), "%s.info", name);
    char *info = wait_file(file, NULL);
    CHECK(sscanf(info, "%d %" SCNx64 " %" SCNx64, &p.pid, &p.addr[0], &p.addr[1]) == 3);
    CHECK(p.pid > 1 && p.pid != getpid() && p.addr[0] != 0 && p.addr[1] != 0);
    free(info);
    if (!serve)
        return p;
    struct sockaddr_un sa = sock_addr(name);
    uint64_t t0 = now_ms();
    for (;;) {
        p.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(p.fd >= 0);
        if (connect(p.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        close(p.fd);
        stop_if_other_failed();
        if (now_ms() - t0 > WAIT_S * 1000u)
            check_fail(__FILE__, __LINE__, "cannot connect to %s: %s", sa.sun_path,
                       strerror(errno));
        sleep_ms(20);
    }
    /* A target that stops answering fails the run instead of hanging it. */
    struct timeval tv = {WAIT_S + 10, 0};
    CHECK(setsockopt(p.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
    return p;
}

static void cmd_send(struct peer *p, struct cmd c)
{
    if (io_all(p->fd, &c, sizeof(c), 1) != 0)
        check_fail(__FILE__, __LINE__, "%s's command socket: %s", p->name, strerror(errno));
}

static struct reply cmd_reply(struct peer *p)
{
    struct reply r;
    if (io_all(p->fd, &r, sizeof(r), 0) != 0)
        check_fail(__FILE__, __LINE__, "no answer from %s (it says why in its log)", p->name);
    r.why[sizeof(r.why) - 1] = '\0';
    return r;
}

static struct reply cmd(struct peer *p, struct cmd c)
{
    cmd_send(p, c);
    return cmd_reply(p);
}

/* NET's log, forwarded to stderr; remembers whether NET said that the same-node channel to
 * nsv-t had no answer (the reason it may not use CUDA IPC or shm there). */
static atomic_int refused_seen;
static void log_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    fprintf(stderr, "ixl: %s\n", msg);
    if (strstr(msg, "same-node paths to 'nsv-t' refused") != NULL &&
        strstr(msg, "no NET agent answers on its same-node socket") != NULL)
        atomic_store(&refused_seen, 1);
}

/* A request: local l, the peer's buffer rw (0 VRAM, 1 DRAM); the source's descriptors at SOFF
 * and the destination's at DOFF. */
static struct ixl_xfer *xfer_new(struct ixl_agent *a, enum ixl_op op, const struct buf *l,
                                 const struct peer *p, int rw, const char *notif)
{
    const size_t *loff = op == IXL_OP_WRITE ? SOFF : DOFF, *roff = op == IXL_OP_WRITE ? DOFF : SOFF;
    struct ixl_desc ld[NDESC], rd[NDESC];
    for (int i = 0; i < NDESC; i++) {
        ld[i] = (struct ixl_desc){(uint64_t)(uintptr_t)l->p + loff[i], LEN[i], 0};
        rd[i] = (struct ixl_desc){p->addr[rw] + roff[i], LEN[i], 0};
    }
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(l->type, NDESC, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(rw == 0 ? IXL_MEM_VRAM : IXL_MEM_DRAM, NDESC, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add(ll, ld, NDESC), IXL_OK);
    CHECK_RC(ixl_dlist_add(rl, rd, NDESC), IXL_OK);
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    if (notif != NULL) {
        xp.field_mask |= IXL_XFER_F_NOTIF;
        xp.notif = notif;
        xp.notif_len = strlen(notif);
    }
    struct ixl_xfer *x = NULL;
    ixl_status st = ixl_xfer_create(a, op, ll, rl, p->name, &xp, &x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_xfer_create to %s: %s: %s", p->name, ixl_strerror(st),
                   ixl_agent_last_error(a));
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    return x;
}

/* The path NET chose: tcp-staged, never a same-node one, between two network namespaces. */
static void want_staged(struct ixl_xfer *x, const char *what)
{
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.backend, "NET") != 0 || strcmp(info.path, "tcp-staged") != 0)
        check_fail(__FILE__, __LINE__, "%s ran on %s path '%s', want NET tcp-staged", what,
                   info.backend, info.path);
}

static ixl_status run_xfer(struct ixl_xfer *x)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, WAIT_S * 1000);
    return st;
}

static uint64_t seed_next = 1;

/* One checked transfer between local l and the peer's buffer rw. */
static void checked(struct ixl_agent *a, struct peer *t, enum ixl_op op, const struct buf *l,
                    int rw, const char *tag)
{
    uint64_t seed = seed_next++;
    enum ixl_mem rt = rw == 0 ? IXL_MEM_VRAM : IXL_MEM_DRAM;
    char what[96], notif[32];
    snprintf(what, sizeof(what), "%s %s -> %s", op == IXL_OP_WRITE ? "WRITE" : "READ",
             ixl_mem_name(op == IXL_OP_WRITE ? l->type : rt),
             ixl_mem_name(op == IXL_OP_WRITE ? rt : l->type));
    snprintf(notif, sizeof(notif), "landed-%" PRIu64, seed);
    struct ixl_xfer *x = xfer_new(a, op, l, t, rw, op == IXL_OP_WRITE ? notif : NULL);
    want_staged(x, what);
    uint64_t t0 = now_ms();
    if (op == IXL_OP_WRITE) {
        buf_fill(l, seed);
        cmd(t, (struct cmd){.op = 'f', .which = rw, .seed = 0});
        /* The target drains in a loop from now on and checks its data as soon as the
         * notification is there. */
        struct cmd w = {.op = 'w', .which = rw, .seed = seed};
        snprintf(w.text, sizeof(w.text), "%s", notif);
        cmd_send(t, w);
    } else {
        cmd(t, (struct cmd){.op = 'f', .which = rw, .seed = seed});
        buf_fill(l, 0);
    }
    ixl_status st = run_xfer(x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(st),
                   ixl_agent_last_error(a));
    want_staged(x, what);
    char why[200];
    if (op == IXL_OP_WRITE) {
        struct reply r = cmd_reply(t);
        if (r.rc != 0)
            check_fail(__FILE__, __LINE__, "%s: at %s when its notification came: %s", what,
                       t->name, r.why);
    } else if (buf_check(l, seed, why, sizeof(why)) != 0) {
        check_fail(__FILE__, __LINE__, "%s: %s", what, why);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    printf("%s: %s: ok, tcp-staged (%.1f MiB, %" PRIu64 " ms)\n", tag, what,
           (double)(LEN[0] + LEN[1] + LEN[2]) / (1 << 20), now_ms() - t0);
}

/* A WRITE and a READ to the victim in flight together; the victim killed; both must fail
 * within a bound. */
static void kill_case(struct ixl_agent *a, struct peer *v, const struct buf *wsrc,
                      const struct buf *rdst)
{
    buf_fill(wsrc, 77);
    buf_fill(rdst, 0);
    struct ixl_xfer *xw = xfer_new(a, IXL_OP_WRITE, wsrc, v, 0, "never");
    struct ixl_xfer *xr = xfer_new(a, IXL_OP_READ, rdst, v, 0, NULL);
    want_staged(xw, "WRITE to the victim");
    want_staged(xr, "READ from the victim");
    CHECK_RC(ixl_xfer_post(xw), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_post(xr), IXL_IN_PROGRESS);
    sleep_ms(60);
    /* In flight when the victim dies (each of its device copies takes 30 ms). */
    CHECK_RC(ixl_xfer_status(xw), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_status(xr), IXL_IN_PROGRESS);
    CHECK(kill(v->pid, SIGKILL) == 0);
    uint64_t t0 = now_ms();
    struct ixl_xfer *xs[2] = {xw, xr};
    for (int i = 0; i < 2; i++) {
        const char *what = i == 0 ? "WRITE" : "READ";
        ixl_status st = ixl_xfer_wait(xs[i], 15000);
        uint64_t took = now_ms() - t0;
        if (st == IXL_OK || st == IXL_IN_PROGRESS || st == IXL_ERR_TIMEOUT)
            check_fail(__FILE__, __LINE__, "%s to the killed victim gave %s after %" PRIu64 " ms",
                       what, ixl_strerror(st), took);
        /* timeout_ms=5000 bounds it; the closed connection usually tells at once. */
        if (took > 8000)
            check_fail(__FILE__, __LINE__,
                       "%s to the killed victim failed only after %" PRIu64 " ms", what, took);
        printf("kill: %s in flight to the killed victim: %s after %" PRIu64 " ms (%s)\n", what,
               ixl_strerror(st), took, ixl_agent_last_error(a));
    }
    for (int i = 0; i < 2; i++) {
        ixl_status st;
        uint64_t r0 = now_ms();
        while ((st = ixl_xfer_release(xs[i])) == IXL_ERR_BUSY)
            CHECK(now_ms() - r0 < 10000);
        CHECK_RC(st, IXL_OK);
    }
    /* Released: no slot-to-device copy of the failed READ lands in its VRAM afterwards. */
    uint8_t *before = malloc(SZ), *after = malloc(SZ);
    CHECK(before != NULL && after != NULL);
    CHECK_RC(ixl_device_copy(before, rdst->p, SZ), IXL_OK);
    sleep_ms(100);
    CHECK_RC(ixl_device_copy(after, rdst->p, SZ), IXL_OK);
    CHECK(memcmp(before, after, SZ) == 0);
    free(before);
    free(after);
}

static int run_initiator(const char *addr)
{
    ixl_log_set_sink(log_sink, NULL);
    struct ixl_agent *a = agent_new("nsv-i", addr);
    struct peer t = peer_load(a, "nsv-t", 1);
    struct peer v = peer_load(a, "nsv-v", 0);
    struct buf lv = buf_new(a, IXL_MEM_VRAM), ld = buf_new(a, IXL_MEM_DRAM);
    struct buf lv2 = buf_new(a, IXL_MEM_VRAM);
    uint64_t t0 = now_ms();

    /* (local, remote): VRAM->VRAM, VRAM->DRAM, DRAM->VRAM, each by WRITE and READ. */
    checked(a, &t, IXL_OP_WRITE, &lv, 0, "pairs");
    checked(a, &t, IXL_OP_READ, &lv, 0, "pairs");
    checked(a, &t, IXL_OP_WRITE, &lv, 1, "pairs");
    checked(a, &t, IXL_OP_READ, &lv, 1, "pairs");
    checked(a, &t, IXL_OP_WRITE, &ld, 0, "pairs");
    checked(a, &t, IXL_OP_READ, &ld, 0, "pairs");
    if (!atomic_load(&refused_seen))
        check_fail(__FILE__, __LINE__,
                   "NET never logged that nsv-t's same-node socket had no answer: how did it "
                   "rule out CUDA IPC?");
    printf("pairs: NET found no same-node channel to nsv-t (another network namespace)\n");

    kill_case(a, &v, &lv, &lv2);

    /* The engine still moves data to the live target. */
    checked(a, &t, IXL_OP_WRITE, &lv, 0, "after the kill");
    cmd(&t, (struct cmd){.op = 'q'});
    close(t.fd);
    buf_free(a, &lv);
    buf_free(a, &ld);
    buf_free(a, &lv2);
    ixl_agent_destroy(a);
    ixl_log_set_sink(NULL, NULL);
    printf("initiator: all checks passed in %.2f s\n", (double)(now_ms() - t0) / 1000.0);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    int target = argc == 5 && strcmp(argv[1], "target") == 0;
    int init = argc == 4 && strcmp(argv[1], "initiator") == 0;
    if (!target && !init) {
        fprintf(stderr,
                "usage: %s target <dir> <ipv4 address> <name>\n"
                "       %s initiator <dir> <ipv4 address>\n",
                argv[0], argv[0]);
        return 1;
    }
    ixl_log_set_level(IXL_LOG_WARN);
    shared_dir = argv[2];
    atexit(mark_failed);
    int rc = target ? run_target(argv[3], argv[4]) : run_initiator(argv[3]);
    succeeded = rc == 0;
    return rc;
}

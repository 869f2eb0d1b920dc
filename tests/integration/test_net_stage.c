/*
 * NET's staged VRAM between agents (tcp-staged, issue 20) on the simulated device: two
 * processes over loopback TCP with the same-node paths off (local_paths=0 at both), each
 * with stage_bytes=2M (two 1 MiB pinned slots per peer), so every transfer here is larger than
 * the pinned bound and its chunks wait for slots. Each case runs in a fresh process, which
 * forks the target (before either touches the device) and drives it over a pipe: the target
 * fills, poisons and checks its own memory through ixl_device_copy. Cases:
 *
 *   pairs    VRAM->VRAM, VRAM->DRAM, DRAM->VRAM, by WRITE and READ, three descriptors (odd
 *            sizes and offsets, 2.5 MiB in all: more than the 2 MiB of slots), VRAM->VRAM
 *            posted twice, the others once; a fresh pattern in the source and a poisoned
 *            destination before each; the path is "tcp-staged"; a WRITE's notification
 *            reaches the target only after its data is in place (the target checks the data
 *            as soon as the notification is there)
 *   fail     an injected device-copy failure at the target (IXL_CUDASIM_FAIL_COPY, in the
 *            target's process) ends the initiator's WRITE in an error, never OK; the next
 *            post works
 *   ifail    the same for a failed staging copy at the initiator
 *   kill-w/r the target killed mid-transfer (its copies slowed down): the WRITE or READ
 *            fails within a bounded time
 *   release  requests released in flight (the initiator's copies slowed down): release
 *            returns IXL_OK only once no copy can land, and nothing lands afterwards
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

#include "check.h"

#define SZ ((size_t)3 << 20)
#define NBUF 2 /* the target's buffers: 0 VRAM, 1 DRAM */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct ixl_agent *agent_new(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
                                 .backends = "",
                                 .etcd_endpoints = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    struct ixl_kv kv[] = {{"local_paths", "0"}, {"stage_bytes", "2M"}, {"timeout_ms", "5000"}};
    ixl_status st = ixl_backend_create(a, "NET", kv, 3, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "NET: %s: %s", ixl_strerror(st), ixl_agent_last_error(a));
    struct ixl_backend *be = NULL;
    CHECK_RC(ixl_backend_find(a, "NET", &be), IXL_OK);
    if (!(ixl_backend_mem_mask(be) & IXL_MEM_BIT(IXL_MEM_VRAM)))
        check_fail(__FILE__, __LINE__, "NET has no VRAM on the simulated device: %s",
                   ixl_backend_mem_why(be));
    return a;
}

/* ---- memory, touched only through the device layer when VRAM ------------------------------ */

struct buf {
    enum ixl_mem type;
    uint8_t *p;
    size_t len;
    uint8_t *alias; /* DRAM: a second mapping of the same memory, which the test touches */
};

/* DRAM is a memfd mapped twice: NET moves it at p, the test fills and checks it through alias.
 * The target's test thread learns of NET's accesses only through the other process (TCP, a
 * pipe), which ThreadSanitizer cannot see: a different address keeps its reports to NET's
 * own synchronization (as the simulated device's private alias does for VRAM). */
static struct buf buf_new(enum ixl_mem type, size_t len)
{
    struct buf b = {type, NULL, len, NULL};
    if (type == IXL_MEM_VRAM) {
        void *p = NULL;
        CHECK_RC(ixl_device_alloc(0, len, &p), IXL_OK);
        b.p = p;
    } else {
        int fd = memfd_create("stage-test", MFD_CLOEXEC);
        CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
        b.p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        b.alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(b.p != MAP_FAILED && b.alias != MAP_FAILED);
        close(fd);
    }
    return b;
}

static void buf_free(struct buf *b)
{
    if (b->type == IXL_MEM_VRAM) {
        CHECK_RC(ixl_device_free(b->p), IXL_OK);
    } else {
        munmap(b->p, b->len);
        munmap(b->alias, b->len);
    }
}

/* The pattern of seed over len bytes (byte i depends on seed and i), or poison (seed 0);
 * written a word at a time (the sanitizers check each store). */
static void pat_fill(uint8_t *h, size_t len, uint64_t seed)
{
    if (seed == 0) {
        memset(h, 0xA5, len);
        return;
    }
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ ((i / 8 + 1) * 0xBF58476D1CE4E5B9ull);
        x ^= x >> 29;
        memcpy(h + i, &x, 8);
    }
    for (; i < len; i++)
        h[i] = (uint8_t)(seed ^ i);
}

/* The whole of b: the pattern of seed, or poison (seed 0). */
static void buf_fill(const struct buf *b, uint64_t seed)
{
    uint8_t *h = b->type == IXL_MEM_VRAM ? malloc(b->len) : b->alias;
    CHECK(h != NULL);
    pat_fill(h, b->len, seed);
    if (b->type == IXL_MEM_VRAM) {
        CHECK_RC(ixl_device_copy(b->p, h, b->len), IXL_OK);
        free(h);
    }
}

static uint8_t *buf_get(const struct buf *b)
{
    uint8_t *h = malloc(b->len);
    CHECK(h != NULL);
    if (b->type == IXL_MEM_VRAM)
        CHECK_RC(ixl_device_copy(h, b->p, b->len), IXL_OK);
    else
        memcpy(h, b->alias, b->len);
    return h;
}

/* The transfers' layout: three descriptors, at these offsets of the source and destination. */
#define NDESC 3
static const size_t SOFF[NDESC] = {3, ((size_t)5 << 18) + 8192, ((size_t)3 << 19) + 5};
static const size_t DOFF[NDESC] = {(size_t)3 << 19, 4096 + 5, 8192 + 11};
static const size_t LEN[NDESC] = {((size_t)5 << 18) + 17, 4099, ((size_t)5 << 18) - 4099 - 17};

/* 0 when b holds the source's pattern of seed at each descriptor and poison elsewhere; else
 * why in out. */
static int buf_check(const struct buf *b, uint64_t seed, const size_t *soff, const size_t *doff,
                     char *why, size_t why_len)
{
    uint8_t *h = buf_get(b);
    uint8_t *want = malloc(b->len), *src = malloc(b->len);
    CHECK(want != NULL && src != NULL);
    memset(want, 0xA5, b->len);
    pat_fill(src, b->len, seed);
    for (int d = 0; d < NDESC; d++)
        memcpy(want + doff[d], src + soff[d], LEN[d]);
    int rc = 0;
    if (memcmp(h, want, b->len) != 0) {
        size_t i = 0;
        while (h[i] == want[i])
            i++;
        snprintf(why, why_len, "byte %zu is 0x%02x, want 0x%02x", i, h[i], want[i]);
        rc = 1;
    }
    free(h);
    free(want);
    free(src);
    return rc;
}

/* ---- the target process --------------------------------------------------------------------- */

struct cmd {
    char op; /* f fill, c check (seed, soff/doff swapped by dir), n notification, q quit */
    int which;
    int dir; /* c: 0 the target was the destination of soff->doff as laid out, 1 reversed */
    uint64_t seed;
    uint64_t wait_ms;
    char text[32];
};
struct reply {
    int rc;
    char why[200];
};

static int rd_all(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)p + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

static void wr_all(int fd, const void *p, size_t n)
{
    for (size_t put = 0; put < n;) {
        ssize_t k = write(fd, (const char *)p + put, n - put);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0);
        put += (size_t)k;
    }
}

static int notif_count(struct ixl_agent *a, const char *text)
{
    struct ixl_notif_batch *nb = NULL;
    int k = 0;
    CHECK_RC(ixl_notif_drain(a, &nb), IXL_OK);
    for (size_t i = 0; nb != NULL && i < nb->count; i++)
        if (nb->items[i].len == strlen(text) &&
            memcmp(nb->items[i].msg, text, nb->items[i].len) == 0)
            k++;
    ixl_free(nb);
    return k;
}

static void target_main(int in, int out)
{
    struct ixl_agent *a = agent_new("stage-t");
    struct buf b[NBUF] = {buf_new(IXL_MEM_VRAM, SZ), buf_new(IXL_MEM_DRAM, SZ)};
    for (int i = 0; i < NBUF; i++) {
        struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b[i].p, SZ, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(a, b[i].type, &d, 1, NULL), IXL_OK);
    }
    void *md = NULL;
    size_t md_len = 0;
    CHECK_RC(ixl_md_get(a, NULL, &md, &md_len), IXL_OK);
    uint64_t ml = md_len, addrs[NBUF] = {(uintptr_t)b[0].p, (uintptr_t)b[1].p};
    wr_all(out, &ml, sizeof(ml));
    wr_all(out, md, md_len);
    wr_all(out, addrs, sizeof(addrs));
    ixl_free(md);
    struct cmd c;
    while (rd_all(in, &c, sizeof(c)) == 0 && c.op != 'q') {
        struct reply r = {0, ""};
        if (c.op == 'f') {
            buf_fill(&b[c.which], c.seed);
        } else if (c.op == 'c') {
            r.rc = buf_check(&b[c.which], c.seed, c.dir ? DOFF : SOFF, c.dir ? SOFF : DOFF, r.why,
                             sizeof(r.why));
        } else if (c.op == 'n') {
            /* Waits for the notification, then says how many came. */
            uint64_t t0 = now_ms();
            int k = 0;
            while ((k = notif_count(a, c.text)) == 0 && now_ms() - t0 < c.wait_ms)
                usleep(1000);
            r.rc = k;
        }
        wr_all(out, &r, sizeof(r));
    }
    for (int i = 0; i < NBUF; i++) {
        struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b[i].p, SZ, 0, NULL, 0};
        CHECK_RC(ixl_mem_deregister(a, b[i].type, &d, 1, NULL), IXL_OK);
        buf_free(&b[i]);
    }
    ixl_agent_destroy(a);
}

struct target {
    pid_t pid;
    int to, from;
    uint64_t addrs[NBUF];
};

/* Forks the target (with env set in it only), loads its metadata into a later agent. */
static struct target target_start(const char *const *env, void **md, size_t *md_len)
{
    int p1[2], p2[2];
    CHECK(pipe(p1) == 0 && pipe(p2) == 0);
    struct target t = {0};
    t.pid = fork();
    CHECK(t.pid >= 0);
    if (t.pid == 0) {
        close(p1[1]);
        close(p2[0]);
        unsetenv("IXL_CUDASIM_FAIL_COPY"); /* the initiator's settings are not the target's */
        unsetenv("IXL_CUDASIM_DELAY_US");
        for (const char *const *e = env; e && *e; e += 2)
            setenv(e[0], e[1], 1);
        target_main(p1[0], p2[1]);
        _exit(0);
    }
    close(p1[0]);
    close(p2[1]);
    t.to = p1[1];
    t.from = p2[0];
    uint64_t ml = 0;
    CHECK(rd_all(t.from, &ml, sizeof(ml)) == 0 && ml > 0 && ml < (1u << 20));
    *md = malloc(ml);
    CHECK(*md != NULL && rd_all(t.from, *md, ml) == 0);
    *md_len = ml;
    CHECK(rd_all(t.from, t.addrs, sizeof(t.addrs)) == 0);
    return t;
}

static struct reply target_cmd(struct target *t, struct cmd c)
{
    struct reply r;
    wr_all(t->to, &c, sizeof(c));
    if (rd_all(t->from, &r, sizeof(r)) != 0)
        check_fail(__FILE__, __LINE__, "the target process ended (it says why above)");
    return r;
}

static void target_end(struct target *t)
{
    struct cmd c = {.op = 'q'};
    wr_all(t->to, &c, sizeof(c));
    int ws = 0;
    while (waitpid(t->pid, &ws, 0) < 0 && errno == EINTR) {
    }
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(t->to);
    close(t->from);
}

/* ---- the initiator ----------------------------------------------------------------------------
 */

static struct ixl_agent *initiator(void *md, size_t md_len)
{
    struct ixl_agent *a = agent_new("stage-i");
    CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
    free(md);
    return a;
}

static void reg(struct ixl_agent *a, const struct buf *b)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b->p, b->len, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, b->type, &d, 1, NULL), IXL_OK);
}

static void dereg(struct ixl_agent *a, const struct buf *b)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b->p, b->len, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, b->type, &d, 1, NULL), IXL_OK);
}

/* A request: local l, the target's buffer at raddr (type rt); the source's descriptors at SOFF
 * and the destination's at DOFF. */
static struct ixl_xfer *xfer_new(struct ixl_agent *a, enum ixl_op op, const struct buf *l,
                                 enum ixl_mem rt, uint64_t raddr, const char *notif)
{
    const size_t *loff = op == IXL_OP_WRITE ? SOFF : DOFF, *roff = op == IXL_OP_WRITE ? DOFF : SOFF;
    struct ixl_desc ld[NDESC], rd[NDESC];
    for (int i = 0; i < NDESC; i++) {
        ld[i] = (struct ixl_desc){(uint64_t)(uintptr_t)l->p + loff[i], LEN[i], 0};
        rd[i] = (struct ixl_desc){raddr + roff[i], LEN[i], 0};
    }
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(l->type, NDESC, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(rt, NDESC, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add(ll, ld, NDESC), IXL_OK);
    CHECK_RC(ixl_dlist_add(rl, rd, NDESC), IXL_OK);
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    if (notif != NULL) {
        p.field_mask |= IXL_XFER_F_NOTIF;
        p.notif = notif;
        p.notif_len = strlen(notif);
    }
    struct ixl_xfer *x = NULL;
    ixl_status st = ixl_xfer_create(a, op, ll, rl, "stage-t", &p, &x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_xfer_create: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.path, "tcp-staged") != 0)
        check_fail(__FILE__, __LINE__, "path '%s', want tcp-staged", info.path);
    return x;
}

static ixl_status run(struct ixl_xfer *x)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, 30000);
    return st;
}

static int case_pairs(void)
{
    void *md;
    size_t md_len;
    const char *none[] = {NULL};
    struct target t = target_start(none, &md, &md_len);
    struct ixl_agent *a = initiator(md, md_len);
    struct buf lb[NBUF] = {buf_new(IXL_MEM_VRAM, SZ), buf_new(IXL_MEM_DRAM, SZ)};
    reg(a, &lb[0]);
    reg(a, &lb[1]);
    /* (local, remote): VRAM->VRAM, VRAM->DRAM, DRAM->VRAM */
    static const int pairs[3][2] = {{0, 0}, {0, 1}, {1, 0}};
    uint64_t seed = 1;
    for (int pi = 0; pi < 3; pi++) {
        const struct buf *l = &lb[pairs[pi][0]];
        int rw = pairs[pi][1];
        enum ixl_mem rt = rw == 0 ? IXL_MEM_VRAM : IXL_MEM_DRAM;
        for (int opi = 0; opi < 2; opi++) {
            enum ixl_op op = opi ? IXL_OP_READ : IXL_OP_WRITE;
            const char *notif = op == IXL_OP_WRITE ? "landed" : NULL;
            struct ixl_xfer *x = xfer_new(a, op, l, rt, t.addrs[rw], notif);
            /* VRAM->VRAM posted twice (a repost), the mixed pairs once (the time budget). */
            int rounds = pi == 0 ? 2 : 1;
            for (int round = 0; round < rounds; round++, seed++) {
                char what[96];
                snprintf(what, sizeof(what), "%s %s -> %s, round %d",
                         op == IXL_OP_WRITE ? "WRITE" : "READ",
                         ixl_mem_name(op == IXL_OP_WRITE ? l->type : rt),
                         ixl_mem_name(op == IXL_OP_WRITE ? rt : l->type), round);
                uint64_t t0 = now_ms();
                if (op == IXL_OP_WRITE) {
                    buf_fill(l, seed);
                    target_cmd(&t, (struct cmd){.op = 'f', .which = rw, .seed = 0});
                } else {
                    target_cmd(&t, (struct cmd){.op = 'f', .which = rw, .seed = seed});
                    buf_fill(l, 0);
                }
                ixl_status st = run(x);
                if (st != IXL_OK)
                    check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(st),
                               ixl_agent_last_error(a));
                char why[200];
                if (op == IXL_OP_WRITE) {
                    /* The notification first, then the data must be there already. */
                    struct reply r =
                        target_cmd(&t, (struct cmd){.op = 'n', .wait_ms = 10000, .text = "landed"});
                    if (r.rc != 1)
                        check_fail(__FILE__, __LINE__, "%s: %d notifications, want 1", what, r.rc);
                    r = target_cmd(&t, (struct cmd){.op = 'c', .which = rw, .seed = seed});
                    if (r.rc != 0)
                        check_fail(__FILE__, __LINE__, "%s: at the target: %s", what, r.why);
                } else if (buf_check(l, seed, SOFF, DOFF, why, sizeof(why)) != 0) {
                    check_fail(__FILE__, __LINE__, "%s: %s", what, why);
                }
                printf("pairs: %s: ok (%.1f MiB, %" PRIu64 " ms)\n", what,
                       (double)(LEN[0] + LEN[1] + LEN[2]) / (1 << 20), now_ms() - t0);
            }
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
        }
    }
    dereg(a, &lb[0]);
    dereg(a, &lb[1]);
    buf_free(&lb[0]);
    buf_free(&lb[1]);
    ixl_agent_destroy(a);
    target_end(&t);
    return 0;
}

static void want_error(struct ixl_agent *a, ixl_status st, const char *what)
{
    if (st == IXL_OK || st == IXL_IN_PROGRESS || st == IXL_ERR_TIMEOUT)
        check_fail(__FILE__, __LINE__, "%s gave %s, want an error", what, ixl_strerror(st));
    printf("fail: %s: %s: %s\n", what, ixl_strerror(st), ixl_agent_last_error(a));
}

static int case_fail(void)
{
    void *md;
    size_t md_len;
    /* The target's copies: 1 is the poison of its VRAM below, 2.. NET's staging copies. */
    const char *env[] = {"IXL_CUDASIM_FAIL_COPY", "3", NULL};
    struct target t = target_start(env, &md, &md_len);
    struct ixl_agent *a = initiator(md, md_len);
    struct buf l = buf_new(IXL_MEM_DRAM, SZ);
    reg(a, &l);
    target_cmd(&t, (struct cmd){.op = 'f', .which = 0, .seed = 0});
    buf_fill(&l, 5);
    struct ixl_xfer *x = xfer_new(a, IXL_OP_WRITE, &l, IXL_MEM_VRAM, t.addrs[0], "never");
    want_error(a, run(x), "WRITE DRAM -> VRAM with a failed device copy at the target");
    CHECK(target_cmd(&t, (struct cmd){.op = 'n', .wait_ms = 200, .text = "never"}).rc == 0);
    /* The target's stream was replaced: the next post works. */
    ixl_status st = run(x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "the WRITE after the failure: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    struct reply r = target_cmd(&t, (struct cmd){.op = 'c', .which = 0, .seed = 5});
    if (r.rc != 0)
        check_fail(__FILE__, __LINE__, "after the failure: %s", r.why);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    dereg(a, &l);
    buf_free(&l);
    ixl_agent_destroy(a);
    target_end(&t);
    printf("fail: a failed device copy at the target fails the initiator's request: ok\n");
    return 0;
}

/* A failure of the initiator's own staging copy (this process: IXL_CUDASIM_FAIL_COPY=2, after
 * the fill of its VRAM). */
static int case_ifail(void)
{
    void *md;
    size_t md_len;
    const char *none[] = {NULL};
    struct target t = target_start(none, &md, &md_len);
    struct ixl_agent *a = initiator(md, md_len);
    struct buf l = buf_new(IXL_MEM_VRAM, SZ);
    reg(a, &l);
    buf_fill(&l, 6); /* copy 1 */
    struct ixl_xfer *x = xfer_new(a, IXL_OP_WRITE, &l, IXL_MEM_DRAM, t.addrs[1], "never");
    want_error(a, run(x), "WRITE VRAM -> DRAM with a failed staging copy at the initiator");
    CHECK(target_cmd(&t, (struct cmd){.op = 'n', .wait_ms = 200, .text = "never"}).rc == 0);
    target_cmd(&t, (struct cmd){.op = 'f', .which = 1, .seed = 0});
    ixl_status st = run(x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "the WRITE after the failure: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    struct reply r = target_cmd(&t, (struct cmd){.op = 'c', .which = 1, .seed = 6});
    if (r.rc != 0)
        check_fail(__FILE__, __LINE__, "after the failure: %s", r.why);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    dereg(a, &l);
    buf_free(&l);
    ixl_agent_destroy(a);
    target_end(&t);
    printf("ifail: a failed staging copy at the initiator fails its request: ok\n");
    return 0;
}

/* One target per case process: a process that used the device cannot fork another. */
static int kill_one(int opi)
{
    void *md;
    size_t md_len;
    /* Each of the target's copies takes 30 ms: a 2.5 MiB transfer takes over 90 ms there. */
    const char *env[] = {"IXL_CUDASIM_DELAY_US", "30000", NULL};
    {
        struct target t = target_start(env, &md, &md_len);
        struct ixl_agent *a = initiator(md, md_len);
        struct buf l = buf_new(IXL_MEM_VRAM, SZ);
        reg(a, &l);
        enum ixl_op op = opi ? IXL_OP_READ : IXL_OP_WRITE;
        struct ixl_xfer *x = xfer_new(a, op, &l, IXL_MEM_VRAM, t.addrs[0], NULL);
        CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
        usleep(30000);
        CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS); /* in flight when the target dies */
        kill(t.pid, SIGKILL);
        uint64_t t0 = now_ms();
        ixl_status st = ixl_xfer_wait(x, 10000);
        uint64_t took = now_ms() - t0;
        if (st == IXL_OK || st == IXL_IN_PROGRESS || st == IXL_ERR_TIMEOUT)
            check_fail(__FILE__, __LINE__, "%s to a killed target gave %s",
                       op == IXL_OP_WRITE ? "WRITE" : "READ", ixl_strerror(st));
        CHECK(took < 8000); /* timeout_ms=5000 bounds it (here the closed socket tells) */
        printf("kill: %s: %s after %" PRIu64 " ms: %s\n", op == IXL_OP_WRITE ? "WRITE" : "READ",
               ixl_strerror(st), took, ixl_agent_last_error(a));
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        int ws;
        waitpid(t.pid, &ws, 0);
        close(t.to);
        close(t.from);
        dereg(a, &l);
        buf_free(&l);
        ixl_agent_destroy(a);
    }
    printf("kill: a target killed mid-transfer fails the request in bounded time: ok\n");
    return 0;
}

static int case_kill_w(void)
{
    return kill_one(0);
}

static int case_kill_r(void)
{
    return kill_one(1);
}

static int case_release(void)
{
    void *md;
    size_t md_len;
    const char *none[] = {NULL};
    struct target t = target_start(none, &md, &md_len);
    /* This process's copies take 60 ms each from now on (the target's do not). */
    setenv("IXL_CUDASIM_DELAY_US", "60000", 1);
    struct ixl_agent *a = initiator(md, md_len);
    struct buf l = buf_new(IXL_MEM_VRAM, SZ);
    reg(a, &l);
    for (int opi = 0; opi < 2; opi++) {
        enum ixl_op op = opi ? IXL_OP_READ : IXL_OP_WRITE;
        target_cmd(&t, (struct cmd){.op = 'f', .which = 0, .seed = 30 + (uint64_t)opi});
        struct ixl_xfer *x = xfer_new(a, op, &l, IXL_MEM_VRAM, t.addrs[0], "released");
        CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
        usleep(90000); /* chunks are being copied and sent */
        CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
        ixl_status st;
        int busy = 0;
        uint64_t t0 = now_ms();
        while ((st = ixl_xfer_release(x)) == IXL_ERR_BUSY) {
            busy++;
            CHECK(now_ms() - t0 < 10000);
        }
        CHECK_RC(st, IXL_OK);
        /* Nothing lands in the local VRAM afterwards (a READ's copies into it ended). */
        uint8_t *before = buf_get(&l);
        usleep(200000);
        uint8_t *after = buf_get(&l);
        CHECK(memcmp(before, after, SZ) == 0);
        free(before);
        free(after);
        CHECK(target_cmd(&t, (struct cmd){.op = 'n', .wait_ms = 100, .text = "released"}).rc == 0);
        printf("release: %s released in flight (%d busy answers first): ok\n",
               op == IXL_OP_WRITE ? "WRITE" : "READ", busy);
    }
    /* The engine still moves data after the releases (their slots came back). */
    target_cmd(&t, (struct cmd){.op = 'f', .which = 0, .seed = 0});
    unsetenv("IXL_CUDASIM_DELAY_US");
    buf_fill(&l, 40);
    struct ixl_xfer *x = xfer_new(a, IXL_OP_WRITE, &l, IXL_MEM_VRAM, t.addrs[0], NULL);
    ixl_status st = run(x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "a WRITE after the releases: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    struct reply r = target_cmd(&t, (struct cmd){.op = 'c', .which = 0, .seed = 40});
    if (r.rc != 0)
        check_fail(__FILE__, __LINE__, "after the releases: %s", r.why);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    dereg(a, &l);
    buf_free(&l);
    ixl_agent_destroy(a);
    target_end(&t);
    return 0;
}

/* ---- the driver: each case in a fresh process ------------------------------------------------ */

static int run_case(const char *self, const char *name, const char *const *env)
{
    uint64_t t0 = now_ms();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e += 2)
            setenv(e[0], e[1], 1);
        execl(self, self, name, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "case %s failed (%s %d)\n", name,
                WIFSIGNALED(ws) ? "signal" : "exit status",
                WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
        return 1;
    }
    printf("%s: passed (%.2f s)\n", name, (double)(now_ms() - t0) / 1000.0);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (argc == 2) {
        const struct {
            const char *name;
            int (*fn)(void);
        } cases[] = {{"pairs", case_pairs},      {"fail", case_fail},
                     {"ifail", case_ifail},      {"kill-write", case_kill_w},
                     {"kill-read", case_kill_r}, {"release", case_release}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            if (strcmp(argv[1], cases[i].name) == 0)
                return cases[i].fn();
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    const char *lib = getenv("IXL_CUDA_LIBRARY");
    if (lib == NULL || access(lib, R_OK) != 0)
        skip(1, "IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)");
    const char *none[] = {NULL};
    const char *ifail[] = {"IXL_CUDASIM_FAIL_COPY", "2", NULL};
    int rc = 0;
    rc |= run_case("/proc/self/exe", "pairs", none);
    rc |= run_case("/proc/self/exe", "fail", none);
    rc |= run_case("/proc/self/exe", "ifail", ifail);
    rc |= run_case("/proc/self/exe", "kill-write", none);
    rc |= run_case("/proc/self/exe", "kill-read", none);
    rc |= run_case("/proc/self/exe", "release", none);
    return rc;
}

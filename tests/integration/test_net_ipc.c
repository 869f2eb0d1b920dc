/*
 * NET moves VRAM between two agents of one node through CUDA IPC (issue 20), on the simulated
 * device (tests/sim; ctest points IXL_CUDA_LIBRARY at it in both processes). This process is
 * the initiator; the target is an ixl_peer process. Device memory is touched only through
 * ixl_device_copy (the sim's device memory is PROT_NONE to the CPU); every checked transfer
 * starts from a fresh pattern in the source and a poisoned destination.
 *
 *   pairs    VRAM->VRAM WRITE (4 descriptors, a notification checked at the target when it
 *            arrives: it comes after the data) and READ, path "cuda-ipc"; the same into VMM
 *            memory exported as a POSIX fd; VMM memory made without an exportable handle type
 *            refused saying so; mixed pairs: DRAM -> remote VRAM ("cuda-ipc"), VRAM -> remote
 *            DRAM allocated with ixl_mem_alloc ("cuda-shm"), VRAM -> remote heap DRAM refused;
 *            a claim for a VRAM region the target no longer registered (stale metadata) refused
 *   kill     copies slowed (IXL_CUDASIM_DELAY_US): the target is killed while a WRITE is in
 *            flight: the request fails with IXL_ERR_REMOTE_DISCONNECT within a bound and the
 *            target's imported memory is unmapped here
 *   release  copies slowed: a WRITE released in flight: once release returns IXL_OK nothing
 *            lands at the target afterwards and its notification never comes
 *   many     WRITE and READ of 1,536 descriptors interleaved over 96 of the target's
 *            allocations (more than NET's memo per request, more than its first copy batch),
 *            every byte checked, twice; invalidating the peer then closes every import
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define CHECK_STR_EQ(a, b) CHECK(strcmp((a), (b)) == 0)
#include "net_common.h"
#include "peer_ctl.h"

#define REGION (2u << 20) /* the sim's VMM granularity */
#define DELAY_US "300000" /* per copy in the slow cases: beyond NET's 200 ms release wait */

static struct ixl_agent *agent_new(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
                                 .backends = "NET",
                                 .etcd_endpoints = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

/* Local memory of either type, registered. */
struct lbuf {
    enum ixl_mem type;
    uint8_t *p;
    size_t len;
};

static struct lbuf lbuf_new(struct ixl_agent *a, enum ixl_mem type, size_t len)
{
    struct lbuf b = {type, NULL, len};
    if (type == IXL_MEM_VRAM) {
        void *p = NULL;
        CHECK_RC(ixl_device_alloc(0, len, &p), IXL_OK);
        b.p = p;
    } else {
        b.p = malloc(len);
        CHECK(b.p != NULL);
    }
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b.p, len, 0, NULL, 0};
    ixl_status st = ixl_mem_register(a, type, &d, 1, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "registering %s: %s", ixl_mem_name(type),
                   ixl_agent_last_error(a));
    return b;
}

static void lbuf_free(struct ixl_agent *a, struct lbuf *b)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)b->p, b->len, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, b->type, &d, 1, NULL), IXL_OK);
    if (b->type == IXL_MEM_VRAM)
        CHECK_RC(ixl_device_free(b->p), IXL_OK);
    else
        free(b->p);
}

/* [off, +len) of b: the pattern of seed (at offsets off..), or the byte poison. */
static void lput(const struct lbuf *b, size_t off, size_t len, uint64_t seed, int poison)
{
    uint8_t *h = b->type == IXL_MEM_VRAM ? malloc(len) : b->p + off;
    CHECK(h != NULL);
    if (poison)
        memset(h, 0xa5, len);
    else
        net_pat_fill(h, len, seed, off);
    if (b->type == IXL_MEM_VRAM) {
        CHECK_RC(ixl_device_copy(b->p + off, h, len), IXL_OK);
        free(h);
    }
}

static void lexpect(const struct lbuf *b, size_t off, size_t len, uint64_t seed, const char *what)
{
    uint8_t *h = malloc(len);
    CHECK(h != NULL);
    if (b->type == IXL_MEM_VRAM)
        CHECK_RC(ixl_device_copy(h, b->p + off, len), IXL_OK);
    else
        memcpy(h, b->p + off, len);
    size_t bad = net_pat_find_bad(h, len, seed, off);
    if (bad != len)
        check_fail(__FILE__, __LINE__, "%s: byte %zu of the destination is 0x%02x, want 0x%02x",
                   what, off + bad, h[bad], net_pat_byte(seed, off + bad));
    free(h);
}

/* A request of n equal descriptors over [off, +len) of local l and of remote rb (type rt). */
static int xfer_make(struct ixl_agent *a, enum ixl_op op, const struct lbuf *l,
                     const struct rbuf *rb, enum ixl_mem rt, size_t off, size_t len, size_t n,
                     const char *notif, struct ixl_xfer **out)
{
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(l->type, n, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(rt, n, &rl), IXL_OK);
    size_t one = len / n;
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc ld = {(uint64_t)(uintptr_t)l->p + off + i * one, one, 0};
        struct ixl_desc rd = {rb->addr + off + i * one, one, 0};
        CHECK_RC(ixl_dlist_add(ll, &ld, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(rl, &rd, 1), IXL_OK);
    }
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    if (notif != NULL) {
        p.field_mask |= IXL_XFER_F_NOTIF;
        p.notif = notif;
        p.notif_len = strlen(notif);
    }
    int rc = ixl_xfer_create(a, op, ll, rl, rb->p->name, &p, out);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    return rc;
}

static const char *path_of(struct ixl_xfer *x)
{
    static struct ixl_xfer_info info;
    info = (struct ixl_xfer_info){.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    return info.path;
}

static char *hex_of(const char *s)
{
    static char h[256];
    net_hex_encode(s, strlen(s), h);
    return h;
}

/* A checked WRITE then READ of [off, +len) between l and rb; returns the path. */
static void roundtrip(struct ixl_agent *a, struct peer *p, const struct lbuf *l, int id,
                      const struct rbuf *rb, enum ixl_mem rt, size_t off, size_t len,
                      const char *want_path)
{
    uint64_t seed = peer_fresh_seed();
    lput(l, off, len, seed, 0);
    PEER_OK(p, "poison %d 165 %zu %zu", id, off, len);
    struct ixl_xfer *x = NULL;
    int rc = xfer_make(a, IXL_OP_WRITE, l, rb, rt, off, len, 4, "ipc-done", &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "WRITE %s -> %s: %s: %s", ixl_mem_name(l->type),
                   ixl_mem_name(rt), ixl_strerror(rc), ixl_agent_last_error(a));
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 20000);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "WRITE: %s: %s", ixl_strerror(rc), ixl_agent_last_error(a));
    CHECK_STR_EQ(path_of(x), want_path);
    /* The target checks the data the moment the notification arrives. */
    char *r = PEER_OK(p, "waitnotif 10000 %d %" PRIu64 " %zu %zu", id, seed, off, len);
    CHECK_STR_HAS(r, hex_of("ipc-done"));
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    seed = peer_fresh_seed();
    PEER_OK(p, "fill %d %" PRIu64 " %zu %zu", id, seed, off, len);
    lput(l, off, len, 0, 1);
    CHECK_RC(xfer_make(a, IXL_OP_READ, l, rb, rt, off, len, 4, NULL, &x), IXL_OK);
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 20000);
    CHECK_RC(rc, IXL_OK);
    CHECK_STR_EQ(path_of(x), want_path);
    lexpect(l, off, len, seed, "READ");
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    printf("pairs: %s <-> remote %s (%zu bytes at %zu): WRITE + READ checked, path %s\n",
           ixl_mem_name(l->type), ixl_mem_name(rt), len, off, want_path);
}

static void refused(struct ixl_agent *a, const struct lbuf *l, const struct rbuf *rb,
                    enum ixl_mem rt, int want, const char *has, const char *what)
{
    struct ixl_xfer *x = NULL;
    int rc = xfer_make(a, IXL_OP_WRITE, l, rb, rt, 0, 4096, 1, NULL, &x);
    if (rc == IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: the request was created (path %s)", what, path_of(x));
    CHECK_RC(rc, want);
    printf("pairs: %s refused: %s\n", what, ixl_agent_last_error(a));
    CHECK_STR_HAS(ixl_agent_last_error(a), has);
}

static int case_pairs(void)
{
    peers_init("test_net_ipc", IXL_PEER_PATH);
    alarm(100);
    struct peer *p = peer_start("ipc-tgt", NULL);
    peer_ready(p);
    struct ixl_agent *a = agent_new("ipc-init");
    struct rbuf v = peer_alloc(p, 0, REGION, "vram");
    struct rbuf m = peer_alloc(p, 1, REGION, "vmm");
    struct rbuf nx = peer_alloc(p, 2, REGION, "vmmnox");
    struct rbuf shm = peer_alloc(p, 3, REGION, "shm");
    struct rbuf heap = peer_alloc(p, 4, REGION, "heap");
    struct rbuf gone = peer_alloc(p, 5, REGION, "vram");
    load_peer(a, p);
    load_into_peer(p, a);
    PEER_OK(p, "free 5"); /* the loaded metadata still names it */
    struct lbuf lv = lbuf_new(a, IXL_MEM_VRAM, REGION);
    struct lbuf ld = lbuf_new(a, IXL_MEM_DRAM, REGION);

    roundtrip(a, p, &lv, 0, &v, IXL_MEM_VRAM, 0, REGION, "cuda-ipc");
    roundtrip(a, p, &lv, 0, &v, IXL_MEM_VRAM, 4096 + 8, 65536, "cuda-ipc"); /* cached handle */
    roundtrip(a, p, &lv, 1, &m, IXL_MEM_VRAM, 512, 131072, "cuda-ipc");
    roundtrip(a, p, &ld, 0, &v, IXL_MEM_VRAM, 8192, 65536, "cuda-ipc");
    roundtrip(a, p, &lv, 3, &shm, IXL_MEM_DRAM, 64, 65536, "cuda-shm");
    /* Where IPC cannot serve, the request is staged over TCP (net_stage.c) and says so. */
    roundtrip(a, p, &lv, 2, &nx, IXL_MEM_VRAM, 256, 65536, "tcp-staged"); /* VMM, no fd handle */
    /* Heap DRAM at the target: the choice only (the bytes' path is test_net_stage's; moved
     * here, TSan would see the target's loop write what its command thread poisoned, ordered
     * only through sockets). */
    {
        struct ixl_xfer *x = NULL;
        CHECK_RC(xfer_make(a, IXL_OP_WRITE, &lv, &heap, IXL_MEM_DRAM, 128, 65536, 1, NULL, &x),
                 IXL_OK);
        CHECK_STR_EQ(path_of(x), "tcp-staged");
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        printf("pairs: VRAM -> remote heap DRAM: path tcp-staged\n");
    }
    refused(a, &lv, &gone, IXL_MEM_VRAM, IXL_ERR_REMOTE_REFUSED, "did not register",
            "a VRAM region the target no longer registered");
    lbuf_free(a, &lv);
    lbuf_free(a, &ld);
    ixl_agent_destroy(a);
    peer_exit(p);
    return 0;
}

/* The sim's device memory mapped into this process (its memfds), for "imports closed". */
/* This process's mappings of the sim's device memory made by process owner (its memfds are
 * named "ixl_cudasim.PID"): the peer's, the allocations imported here. */
static int sim_maps(pid_t owner)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512], name[64];
    snprintf(name, sizeof(name), "memfd:ixl_cudasim.%d ", (int)owner);
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, name) != NULL;
    fclose(f);
    return n;
}

static int case_kill(void)
{
    peers_init("test_net_ipc", IXL_PEER_PATH);
    alarm(100);
    struct peer *p = peer_start("ipc-tgt", NULL);
    peer_ready(p);
    struct rbuf v = peer_alloc(p, 0, REGION, "vram");
    setenv("IXL_CUDASIM_DELAY_US", DELAY_US, 1); /* this process's copies only */
    struct ixl_agent *a = agent_new("ipc-init");
    load_peer(a, p);
    struct lbuf lv = lbuf_new(a, IXL_MEM_VRAM, REGION);
    int before = sim_maps(p->pid);
    lput(&lv, 0, REGION, peer_fresh_seed(), 0);
    struct ixl_xfer *x = NULL;
    CHECK_RC(xfer_make(a, IXL_OP_WRITE, &lv, &v, IXL_MEM_VRAM, 0, REGION, 1, "k", &x), IXL_OK);
    CHECK(sim_maps(p->pid) > before); /* the target's allocation is open here */
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS); /* in flight */
    peer_kill(p);
    uint64_t t0 = now_ms();
    int rc = ixl_xfer_wait(x, 10000);
    uint64_t took = now_ms() - t0;
    printf("kill: the target was killed mid-copy: %s after %" PRIu64 " ms: %s\n", ixl_strerror(rc),
           took, ixl_agent_last_error(a));
    CHECK_RC(rc, IXL_ERR_REMOTE_DISCONNECT);
    CHECK(took < 5000);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    CHECK(sim_maps(p->pid) == before); /* its imported memory is closed */
    printf("kill: bounded error, the imported allocation unmapped: ok\n");
    lbuf_free(a, &lv);
    ixl_agent_destroy(a);
    return 0;
}

static int case_release(void)
{
    peers_init("test_net_ipc", IXL_PEER_PATH);
    alarm(100);
    struct peer *p = peer_start("ipc-tgt", NULL);
    peer_ready(p);
    struct rbuf v = peer_alloc(p, 0, REGION, "vram");
    setenv("IXL_CUDASIM_DELAY_US", DELAY_US, 1);
    struct ixl_agent *a = agent_new("ipc-init");
    load_peer(a, p);
    load_into_peer(p, a);
    struct lbuf lv = lbuf_new(a, IXL_MEM_VRAM, REGION);
    lput(&lv, 0, REGION, peer_fresh_seed(), 0);
    PEER_OK(p, "poison 0 165");
    struct ixl_xfer *x = NULL;
    CHECK_RC(xfer_make(a, IXL_OP_WRITE, &lv, &v, IXL_MEM_VRAM, 0, REGION, 2, "late", &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    uint64_t t0 = now_ms();
    int rc;
    while ((rc = ixl_xfer_release(x)) == IXL_ERR_BUSY && now_ms() - t0 < 10000)
        sleep_ms(20);
    CHECK_RC(rc, IXL_OK);
    printf("release: released in flight after %" PRIu64 " ms\n", now_ms() - t0);
    /* Whatever landed landed before release returned: poison again, nothing comes after. */
    PEER_OK(p, "poison 0 165");
    sleep_ms(700);
    PEER_OK(p, "checkbyte 0 165");
    char *r = PEER_OK(p, "notifs");
    CHECK_STR_EQ(r, "0");
    printf("release: no late writes, no notification: ok\n");
    lbuf_free(a, &lv);
    ixl_agent_destroy(a);
    peer_exit(p);
    return 0;
}

/* One request into many of the target's allocations: more than NET's per-request memo has
 * slots (64), its descriptors interleaved so that consecutive ones hit other allocations, and
 * more descriptors than NET's first copy batch (1,024): the bytes land, and once the peer is
 * invalidated every import is closed (the per-allocation counts of references and in-flight
 * holds came back to zero). */
#define MANY_REGS 96
#define MANY_REG (64u << 10)
#define MANY_BLK (4u << 10)
#define MANY_PER (MANY_REG / MANY_BLK) /* blocks per allocation: 16 */
static int many_xfer(struct ixl_agent *a, enum ixl_op op, const struct lbuf *l,
                     const struct rbuf *rb)
{
    size_t n = (size_t)MANY_REGS * MANY_PER;
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, n, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, n, &rl), IXL_OK);
    for (size_t b = 0; b < MANY_PER; b++) /* block b of every allocation, then b + 1 */
        for (size_t g = 0; g < MANY_REGS; g++) {
            size_t k = (b * 7 + 3) % MANY_PER; /* a permutation of the blocks */
            struct ixl_desc ld = {(uint64_t)(uintptr_t)l->p + g * MANY_REG + k * MANY_BLK, MANY_BLK,
                                  0};
            struct ixl_desc rd = {rb[g].addr + k * MANY_BLK, MANY_BLK, 0};
            CHECK_RC(ixl_dlist_add(ll, &ld, 1), IXL_OK);
            CHECK_RC(ixl_dlist_add(rl, &rd, 1), IXL_OK);
        }
    struct ixl_xfer_params prm = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(a, op, ll, rl, rb[0].p->name, &prm, &x);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s of %zu descriptors: %s: %s",
                   op == IXL_OP_WRITE ? "WRITE" : "READ", n, ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK_STR_EQ(path_of(x), "cuda-ipc");
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 30000);
    CHECK_RC(rc, IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    return 0;
}

static int case_many(void)
{
    peers_init("test_net_ipc", IXL_PEER_PATH);
    alarm(100);
    struct peer *p = peer_start("ipc-tgt", NULL);
    peer_ready(p);
    static struct rbuf rb[MANY_REGS];
    for (int g = 0; g < MANY_REGS; g++)
        rb[g] = peer_alloc(p, g, MANY_REG, "vram");
    struct ixl_agent *a = agent_new("ipc-init");
    load_peer(a, p);
    struct lbuf lv = lbuf_new(a, IXL_MEM_VRAM, (size_t)MANY_REGS * MANY_REG);
    int before = sim_maps(p->pid); /* none of the peer's allocations is imported yet */
    uint64_t seed[MANY_REGS];
    uint8_t *h = malloc(MANY_REG);
    CHECK(h != NULL);
    for (int round = 0; round < 2; round++) {
        /* WRITE: allocation g receives the pattern of seed[g] at its own offsets. */
        for (int g = 0; g < MANY_REGS; g++) {
            seed[g] = peer_fresh_seed();
            net_pat_fill(h, MANY_REG, seed[g], 0);
            CHECK_RC(ixl_device_copy(lv.p + (size_t)g * MANY_REG, h, MANY_REG), IXL_OK);
            PEER_OK(p, "poison %d 165", g);
        }
        many_xfer(a, IXL_OP_WRITE, &lv, rb);
        for (int g = 0; g < MANY_REGS; g++)
            PEER_OK(p, "check %d %" PRIu64, g, seed[g]);
        /* READ: fresh bytes at the target, the local side poisoned. */
        for (int g = 0; g < MANY_REGS; g++) {
            seed[g] = peer_fresh_seed();
            PEER_OK(p, "fill %d %" PRIu64, g, seed[g]);
        }
        lput(&lv, 0, lv.len, 0, 1);
        many_xfer(a, IXL_OP_READ, &lv, rb);
        for (int g = 0; g < MANY_REGS; g++) {
            CHECK_RC(ixl_device_copy(h, lv.p + (size_t)g * MANY_REG, MANY_REG), IXL_OK);
            size_t bad = net_pat_find_bad(h, MANY_REG, seed[g], 0);
            if (bad != MANY_REG)
                check_fail(__FILE__, __LINE__, "READ: allocation %d, byte %zu is 0x%02x", g, bad,
                           h[bad]);
        }
    }
    free(h);
    printf("many: %d allocations x %u blocks, interleaved, WRITE + READ twice: every byte "
           "checked\n",
           MANY_REGS, MANY_PER);
    CHECK(sim_maps(p->pid) >= before + MANY_REGS); /* each allocation imported once, kept open */
    CHECK_RC(ixl_remote_invalidate(a, p->name), IXL_OK);
    int after = sim_maps(p->pid);
    printf("many: the peer invalidated: %d of the sim's mappings before, %d after\n", before,
           after);
    CHECK(after == before); /* every import closed: no count was left behind */
    lbuf_free(a, &lv);
    ixl_agent_destroy(a);
    peer_exit(p);
    return 0;
}

static int run_case(const char *name)
{
    uint64_t t0 = now_ms();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_net_ipc", name, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "case %s failed (%s %d)\n", name, WIFSIGNALED(ws) ? "signal" : "status",
                WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
        return 1;
    }
    printf("%s: passed (%.2f s)\n", name, (double)(now_ms() - t0) / 1000.0);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2) {
        if (strcmp(argv[1], "pairs") == 0)
            return case_pairs();
        if (strcmp(argv[1], "kill") == 0)
            return case_kill();
        if (strcmp(argv[1], "release") == 0)
            return case_release();
        if (strcmp(argv[1], "many") == 0)
            return case_many();
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    const char *lib = getenv("IXL_CUDA_LIBRARY");
    if (lib == NULL || access(lib, R_OK) != 0)
        skip(1, "IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)");
    int rc = 0;
    rc |= run_case("pairs");
    rc |= run_case("kill");
    rc |= run_case("release");
    rc |= run_case("many");
    return rc;
}

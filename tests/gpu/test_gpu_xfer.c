/*
 * Real GPU: NET moves VRAM within one agent (tests/gpu/README.md).
 *
 *   test_gpu_xfer         VRAM->VRAM (cuMemAlloc and VMM memory), VRAM->DRAM, DRAM->VRAM, as
 *                         WRITE and READ, 4 KiB / an odd 1 MiB + 3 at an odd offset / 48 MiB,
 *                         each with a fresh pattern in the source and the whole destination
 *                         poisoned first (cuMemsetD8), checked through the driver (cuMemcpy):
 *                         the range holds the pattern, the rest of the buffer the poison; 512
 *                         scattered 16 KiB blocks in one request; a notification delivered with
 *                         the data in place; release of a READ in flight (nothing lands
 *                         after). ~2 s.
 *   test_gpu_xfer bench   the bandwidth table: ixl (one request of one descriptor, posted and
 *                         waited k times) against cuMemcpy of the same size between the same
 *                         buffers (synchronized after each copy, and k copies back to back),
 *                         64 KiB .. 256 MiB, D2D / D2H / H2D, medians of interleaved rounds;
 *                         the data checked after each size. IXL_GPU_QUICK=1: 3 rounds. ~20 s.
 *
 * Markdown on stdout, diagnostics on stderr. Skips (77) without a GPU.
 */
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#include "gpu_common.h"

static struct ixl_agent *agent;
static const char *self = "gpu-xfer";

/* A buffer of the test: device memory (cuMemAlloc or VMM) or host memory. */
struct buf {
    const char *name;
    enum ixl_mem mem;
    uint64_t addr;
    size_t len;
    size_t seg; /* VMM: bytes per physical allocation (0: one allocation) */
};

static void reg(const struct buf *b)
{
    struct ixl_reg_desc d = {
        .addr = b->addr, .len = b->len, .dev = b->mem == IXL_MEM_VRAM ? (uint64_t)G.ordinal : 0};
    ixl_status st = ixl_mem_register(agent, b->mem, &d, 1, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "registering %s: %s: %s", b->name, ixl_strerror(st),
                   ixl_agent_last_error(agent));
}

static void dereg(const struct buf *b)
{
    struct ixl_reg_desc d = {
        .addr = b->addr, .len = b->len, .dev = b->mem == IXL_MEM_VRAM ? (uint64_t)G.ordinal : 0};
    CHECK_RC(ixl_mem_deregister(agent, b->mem, &d, 1, NULL), IXL_OK);
}

static struct ixl_dlist *list1(const struct buf *b, size_t off, size_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(b->mem, 1, &l), IXL_OK);
    struct ixl_desc d = {b->addr + off, len, b->mem == IXL_MEM_VRAM ? (uint64_t)G.ordinal : 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

enum dev_op { DEV_PUT, DEV_GET, DEV_POISON };

/* The test's own driver calls on b's device memory, one physical allocation at a time: they
 * never span two mappings of a VMM buffer (ixl's transfers do). */
static void dev_io(const struct buf *b, size_t off, uint8_t *host, size_t len, enum dev_op op)
{
    while (len > 0) {
        size_t n = len;
        if (b->seg != 0 && n > b->seg - off % b->seg)
            n = b->seg - off % b->seg;
        if (op == DEV_PUT)
            gpu_put(b->addr + off, host, n);
        else if (op == DEV_GET)
            gpu_get(host, b->addr + off, n);
        else
            gpu_poison(b->addr + off, 0xEE, n);
        off += n;
        len -= n;
        if (host != NULL)
            host += n;
    }
}

static void put(const struct buf *b, size_t off, const void *src, size_t len)
{
    if (b->mem == IXL_MEM_VRAM)
        dev_io(b, off, (uint8_t *)(uintptr_t)src, len, DEV_PUT);
    else
        memcpy((uint8_t *)(uintptr_t)b->addr + off, src, len);
}

static void poison(const struct buf *b)
{
    if (b->mem == IXL_MEM_VRAM)
        dev_io(b, 0, NULL, b->len, DEV_POISON);
    else
        memset((void *)(uintptr_t)b->addr, 0xEE, b->len);
}

/* The first byte of p[0..n) that differs from want (or from byte c when want is NULL), or n. */
static size_t first_diff(const uint8_t *p, const uint8_t *want, uint8_t c, size_t n)
{
    static uint8_t poison_block[1 << 16];
    if (poison_block[0] != 0xEE)
        memset(poison_block, 0xEE, sizeof(poison_block));
    for (size_t i = 0; i < n; i += sizeof(poison_block)) {
        size_t m = n - i < sizeof(poison_block) ? n - i : sizeof(poison_block);
        const uint8_t *w = want ? want + i : poison_block;
        if (memcmp(p + i, w, m) != 0)
            for (size_t j = 0; j < m; j++)
                if (p[i + j] != (want ? w[j] : c))
                    return i + j;
    }
    return n;
}

/* 1 when b[off, off + len) holds want and every other byte of b the poison 0xEE. */
static int holds(const struct buf *b, size_t off, const uint8_t *want, size_t len, const char *what)
{
    uint8_t *all = malloc(b->len);
    CHECK(all != NULL);
    if (b->mem == IXL_MEM_VRAM)
        dev_io(b, 0, all, b->len, DEV_GET);
    else
        memcpy(all, (void *)(uintptr_t)b->addr, b->len);
    size_t bad[3] = {first_diff(all, NULL, 0xEE, off), first_diff(all + off, want, 0, len),
                     first_diff(all + off + len, NULL, 0xEE, b->len - off - len)};
    int ok = 1;
    if (bad[0] < off || bad[1] < len || bad[2] < b->len - off - len) {
        size_t at = bad[0] < off ? bad[0] : bad[1] < len ? off + bad[1] : off + len + bad[2];
        uint8_t w = at >= off && at < off + len ? want[at - off] : 0xEE;
        fprintf(stderr, "FAIL: %s: %s byte %zu is 0x%02x, want 0x%02x (%s)\n", what, b->name, at,
                all[at], w, at >= off && at < off + len ? "in the range" : "outside it: poison");
        ok = 0;
    }
    free(all);
    return ok;
}

/* Posts x and waits for it (30 s at most). */
static void run_xfer(struct ixl_xfer *x, const char *what)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, 30000);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(st),
                   ixl_agent_last_error(agent));
}

/* Moves len bytes at off from src to dst with op (WRITE: local src; READ: local dst), with a
 * fresh pattern and a poisoned destination, and checks dst. */
static void moved(enum ixl_op op, const struct buf *src, const struct buf *dst, size_t off,
                  size_t len, const char *notif)
{
    char what[160];
    snprintf(what, sizeof(what), "%s %s -> %s, %zu bytes at %zu",
             op == IXL_OP_WRITE ? "WRITE" : "READ", src->name, dst->name, len, off);
    uint8_t *pat = malloc(len);
    CHECK(pat != NULL);
    gpu_pattern(pat, len);
    put(src, off, pat, len);
    poison(dst);
    struct ixl_dlist *ls = list1(src, off, len), *ld = list1(dst, off, len);
    struct ixl_xfer_params xp = {0};
    if (notif) {
        xp.field_mask = IXL_XFER_F_NOTIF;
        xp.notif = notif;
        xp.notif_len = strlen(notif);
    }
    struct ixl_xfer *x;
    ixl_status st = op == IXL_OP_WRITE
                        ? ixl_xfer_create(agent, op, ls, ld, self, notif ? &xp : NULL, &x)
                        : ixl_xfer_create(agent, op, ld, ls, self, notif ? &xp : NULL, &x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: ixl_xfer_create: %s: %s", what, ixl_strerror(st),
                   ixl_agent_last_error(agent));
    run_xfer(x, what);
    if (notif) {
        /* The notification comes after the copies: once drained, the data must be there. */
        int found = 0;
        for (int i = 0; i < 3000 && !found; i++) {
            struct ixl_notif_batch *b = NULL;
            CHECK_RC(ixl_notif_drain(agent, &b), IXL_OK);
            for (size_t j = 0; b && j < b->count; j++)
                found |= b->items[j].len == strlen(notif) &&
                         memcmp(b->items[j].msg, notif, strlen(notif)) == 0;
            ixl_free(b);
            if (!found)
                usleep(1000);
        }
        if (!found)
            check_fail(__FILE__, __LINE__, "%s: notification not delivered in 3 s", what);
    }
    if (!holds(dst, off, pat, len, what))
        check_fail(__FILE__, __LINE__, "%s: data check failed", what);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(ls);
    ixl_dlist_destroy(ld);
    free(pat);
}

static struct ixl_agent *make_agent(void)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "NET"};
    struct ixl_agent *a;
    ixl_status st = ixl_agent_create(self, &p, &a);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "agent with NET: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(NULL));
    return a;
}

/* ---- the functional cases ------------------------------------------------------------------ */

#define LEN (64u << 20)

static void scattered(const struct buf *src, const struct buf *dst)
{
    enum { N = 512, BLK = 16 << 10 };
    uint8_t *pat = malloc((size_t)N * BLK);
    CHECK(pat != NULL);
    gpu_pattern(pat, (size_t)N * BLK);
    put(src, 0, pat, (size_t)N * BLK);
    poison(dst);
    /* source block i goes to destination slot perm[i] (a stride-7 walk: nothing adjacent) */
    struct ixl_dlist *ls, *ld;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, N, &ls), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, N, &ld), IXL_OK);
    for (unsigned i = 0; i < N; i++) {
        unsigned to = (i * 7u) % N;
        struct ixl_desc s = {src->addr + (uint64_t)i * BLK, BLK, (uint64_t)G.ordinal};
        struct ixl_desc d = {dst->addr + (uint64_t)to * 2 * BLK, BLK, (uint64_t)G.ordinal};
        CHECK_RC(ixl_dlist_add(ls, &s, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(ld, &d, 1), IXL_OK);
    }
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(agent, IXL_OP_WRITE, ls, ld, self, NULL, &x), IXL_OK);
    run_xfer(x, "512 scattered blocks");
    uint8_t *want = malloc(dst->len);
    CHECK(want != NULL);
    memset(want, 0xEE, dst->len);
    for (unsigned i = 0; i < N; i++)
        memcpy(want + (size_t)((i * 7u) % N) * 2 * BLK, pat + (size_t)i * BLK, BLK);
    CHECK(gpu_equal(dst->addr, want, dst->len, "512 scattered 16 KiB blocks, VRAM -> VRAM"));
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(ls);
    ixl_dlist_destroy(ld);
    free(want);
    free(pat);
}

/* A 64 MiB READ VRAM -> VRAM released while in flight (asserted in flight first): once release
 * says IXL_OK, nothing more lands in the local buffer. The first look at it after the release
 * is a cuMemcpyDtoH on the legacy stream, which does not wait for ixl's non-blocking streams:
 * a copy still running then would show as a difference from the second look, taken after a
 * context-wide synchronize and a pause. */
static void release_in_flight(const struct buf *src, const struct buf *dst)
{
    uint8_t *pat = malloc(src->len), *snap = malloc(dst->len), *later = malloc(dst->len);
    CHECK(pat != NULL && snap != NULL && later != NULL);
    gpu_pattern(pat, src->len);
    put(src, 0, pat, src->len);
    int tries = 0, in_flight = 0;
    for (; tries < 20 && !in_flight; tries++) {
        poison(dst);
        struct ixl_dlist *ls = list1(src, 0, src->len), *ld = list1(dst, 0, dst->len);
        struct ixl_xfer *x;
        CHECK_RC(ixl_xfer_create(agent, IXL_OP_READ, ld, ls, self, NULL, &x), IXL_OK);
        ixl_status st = ixl_xfer_post(x);
        CHECK(st == IXL_OK || st == IXL_IN_PROGRESS);
        in_flight = st == IXL_IN_PROGRESS && ixl_xfer_status(x) == IXL_IN_PROGRESS;
        double t0 = gpu_now();
        while ((st = ixl_xfer_release(x)) == IXL_ERR_BUSY && gpu_now() - t0 < 10)
            usleep(100);
        CHECK_RC(st, IXL_OK);
        CU_CHECK(G.cuMemcpyDtoH_v2(snap, dst->addr, dst->len));
        CU_CHECK(G.cuCtxSynchronize());
        usleep(20000);
        gpu_get(later, dst->addr, dst->len);
        if (memcmp(snap, later, dst->len) != 0)
            check_fail(__FILE__, __LINE__,
                       "bytes landed in the local buffer after the release "
                       "of a READ returned IXL_OK (try %d)",
                       tries + 1);
        ixl_dlist_destroy(ls);
        ixl_dlist_destroy(ld);
    }
    if (!in_flight)
        check_fail(__FILE__, __LINE__,
                   "a 64 MiB READ of VRAM was never in flight after its "
                   "post (%d tries): the release case was not exercised",
                   tries);
    printf("| release of a 64 MiB READ VRAM -> VRAM in flight | nothing landed after release "
           "(in flight at try %d) |\n",
           tries);
    free(pat);
    free(snap);
    free(later);
}

static int functional(void)
{
    CUdeviceptr a = gpu_alloc(LEN), b = gpu_alloc(LEN);
    struct gpu_vmm v = {0};
    if (G.vmm)
        gpu_vmm_alloc(&v, LEN, 2);
    uint8_t *h = aligned_alloc(4096, LEN);
    CHECK(h != NULL);
    struct buf A = {"A (cuMemAlloc)", IXL_MEM_VRAM, a, LEN, 0};
    struct buf B = {"B (cuMemAlloc)", IXL_MEM_VRAM, b, LEN, 0};
    char vname[64];
    snprintf(vname, sizeof(vname), "V (VMM, %zu physical allocations)", v.n);
    struct buf V = {vname, IXL_MEM_VRAM, v.ptr, v.len, v.chunk};
    struct buf H = {"H (host)", IXL_MEM_DRAM, (uintptr_t)h, LEN, 0};
    reg(&A);
    reg(&B);
    reg(&H);
    if (G.vmm)
        reg(&V);

    printf("NET within one agent (test_gpu_xfer) on %s:\n\n", G.name);
    printf("| case | result |\n|---|---|\n");
    const struct buf *pairs[][2] = {{&A, &B}, {&A, &V}, {&V, &B}, {&A, &H},
                                    {&H, &A}, {&V, &H}, {&H, &V}};
    const size_t sizes[][2] = {{0, 4096}, {5, (1u << 20) + 3}, {4096, 48u << 20}};
    int cases = 0;
    double t0 = gpu_now();
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        if (!G.vmm && (pairs[p][0] == &V || pairs[p][1] == &V))
            continue;
        for (int op = 0; op < 2; op++)
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                enum ixl_op o = op ? IXL_OP_READ : IXL_OP_WRITE;
                moved(o, pairs[p][0], pairs[p][1], sizes[s][0], sizes[s][1],
                      s == 0 && op == 0 ? "gpu-done" : NULL);
                cases++;
            }
        printf("| %s -> %s: WRITE and READ of 4 KiB, 1 MiB + 3 at offset 5, 48 MiB | data "
               "checked |\n",
               pairs[p][0]->name, pairs[p][1]->name);
    }
    printf("| notifications (one per pair, WRITE 4 KiB) | delivered after the data |\n");
    scattered(&A, &B);
    printf("| 512 scattered 16 KiB blocks, VRAM -> VRAM, one request | data checked |\n");
    release_in_flight(&A, &B);
    fprintf(stderr, "%d checked transfers in %.2f s\n", cases, gpu_now() - t0);

    dereg(&A);
    dereg(&B);
    dereg(&H);
    if (G.vmm) {
        dereg(&V);
        gpu_vmm_free(&v);
    }
    gpu_free(a);
    gpu_free(b);
    free(h);
    return 0;
}

/* ---- the bandwidth table ------------------------------------------------------------------- */

#define BENCH_MAX (256u << 20)
#define NSIZES 5
#define NDIRS 3
#define NMETH 3
#define MAXROUNDS 7

static const size_t bench_sizes[NSIZES] = {64u << 10, 1u << 20, 16u << 20, 64u << 20, BENCH_MAX};
static const char *const dir_names[NDIRS] = {"VRAM -> VRAM", "VRAM -> DRAM", "DRAM -> VRAM"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Copies per sample: enough bytes to last a few ms at the expected rate, bounded. */
static int reps(size_t size, int dir)
{
    size_t target = dir == 0 ? (1024u << 20) : (256u << 20);
    size_t k = target / size;
    if (k < 3)
        k = 3;
    if (k > 2000)
        k = 2000;
    return (int)k;
}

static int bench(void)
{
    const char *quick = getenv("IXL_GPU_QUICK");
    int rounds = quick && quick[0] == '1' ? 3 : 5;
    CUdeviceptr a = gpu_alloc(BENCH_MAX), b = gpu_alloc(BENCH_MAX);
    uint8_t *h = aligned_alloc(4096, BENCH_MAX);
    CHECK(h != NULL);
    struct buf A = {"A", IXL_MEM_VRAM, a, BENCH_MAX, 0}, B = {"B", IXL_MEM_VRAM, b, BENCH_MAX, 0};
    struct buf H = {"H", IXL_MEM_DRAM, (uintptr_t)h, BENCH_MAX, 0};
    reg(&A);
    reg(&B);
    reg(&H);
    /* Is the host buffer page-locked now (ixl's registration may have pinned it)? cuMemcpy
     * below uses the same buffer, so both sides see the same memory either way. */
    unsigned mt = 0;
    CUresult pr =
        G.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h);
    const char *host_kind = pr == CUDA_SUCCESS && mt == CU_MEMORYTYPE_HOST
                                ? "page-locked (registered with the driver by ixl)"
                                : "pageable (aligned_alloc)";

    uint8_t *pat = malloc(BENCH_MAX);
    CHECK(pat != NULL);
    gpu_pattern(pat, BENCH_MAX);
    gpu_put(a, pat, BENCH_MAX);
    memcpy(h, pat, BENCH_MAX);

    const struct buf *src[NDIRS] = {&A, &A, &H}, *dst[NDIRS] = {&B, &H, &A};
    struct ixl_xfer *x[NSIZES][NDIRS];
    for (int s = 0; s < NSIZES; s++)
        for (int d = 0; d < NDIRS; d++) {
            struct ixl_dlist *ls = list1(src[d], 0, bench_sizes[s]);
            struct ixl_dlist *ld = list1(dst[d], 0, bench_sizes[s]);
            CHECK_RC(ixl_xfer_create(agent, IXL_OP_WRITE, ls, ld, self, NULL, &x[s][d]), IXL_OK);
            ixl_dlist_destroy(ls);
            ixl_dlist_destroy(ld);
        }
    static double gbs[NSIZES][NDIRS][NMETH][MAXROUNDS];
    double t_start = gpu_now();
    /* round 0 warms up (not counted); then rounds interleave sizes, directions, methods */
    for (int r = 0; r <= rounds; r++)
        for (int s = 0; s < NSIZES; s++)
            for (int d = 0; d < NDIRS; d++)
                for (int m = 0; m < NMETH; m++) {
                    size_t n = bench_sizes[s];
                    int k = r == 0 ? 2 : reps(n, d);
                    CU_CHECK(G.cuCtxSynchronize());
                    double t0 = gpu_now();
                    for (int i = 0; i < k; i++) {
                        if (m == 0) {
                            run_xfer(x[s][d], "bench");
                            continue;
                        }
                        if (d == 0)
                            CU_CHECK(G.cuMemcpy(b, a, n));
                        else if (d == 1)
                            CU_CHECK(G.cuMemcpyDtoH_v2(h, a, n));
                        else
                            CU_CHECK(G.cuMemcpyHtoD_v2(a, h, n));
                        if (m == 1)
                            CU_CHECK(G.cuCtxSynchronize());
                    }
                    CU_CHECK(G.cuCtxSynchronize());
                    double t = gpu_now() - t0;
                    if (r > 0)
                        gbs[s][d][m][r - 1] = (double)n * k / t / 1e9;
                }
    double t_bench = gpu_now() - t_start;

    /* The data: every path copied the pattern (H2D wrote A from H, which holds it too). */
    CHECK(gpu_equal(b, pat, BENCH_MAX, "bench: B after VRAM -> VRAM"));
    CHECK(memcmp(h, pat, BENCH_MAX) == 0);
    CHECK(gpu_equal(a, pat, BENCH_MAX, "bench: A after DRAM -> VRAM"));

    printf("Bandwidth (test_gpu_xfer bench) on %s, CUDA driver API %d.%d: GB/s (10^9 bytes/s), "
           "medians of %d interleaved rounds (%.1f s in all). ixl: NET within one agent, one "
           "WRITE request of one descriptor posted and waited for k times (cuMemAlloc memory; "
           "host memory %s). cuMemcpy: the same copy between the same buffers, synchronized "
           "after each copy (as a waited request is), and k copies back to back then one "
           "synchronize. Data checked after the runs.\n\n",
           G.name, G.driver_version / 1000, G.driver_version % 1000 / 10, rounds, t_bench,
           host_kind);
    printf("| direction | size | ixl | cuMemcpy, each synchronized | cuMemcpy, back to back | "
           "ixl / cuMemcpy each |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (int d = 0; d < NDIRS; d++)
        for (int s = 0; s < NSIZES; s++) {
            double med[NMETH];
            for (int m = 0; m < NMETH; m++) {
                qsort(gbs[s][d][m], (size_t)rounds, sizeof(double), cmp_double);
                med[m] = gbs[s][d][m][rounds / 2];
            }
            char sz[32];
            printf("| %s | %s | %.1f | %.1f | %.1f | %.2f |\n", dir_names[d],
                   gpu_size(bench_sizes[s], sz, sizeof(sz)), med[0], med[1], med[2],
                   med[0] / med[1]);
        }

    for (int s = 0; s < NSIZES; s++)
        for (int d = 0; d < NDIRS; d++)
            CHECK_RC(ixl_xfer_release(x[s][d]), IXL_OK);
    dereg(&A);
    dereg(&B);
    dereg(&H);
    gpu_free(a);
    gpu_free(b);
    free(h);
    free(pat);
    return 0;
}

int main(int argc, char **argv)
{
    int is_bench = argc > 1 && strcmp(argv[1], "bench") == 0;
    alarm(is_bench ? 280 : 170);
    gpu_open();
    agent = make_agent();
    int rc = is_bench ? bench() : functional();
    ixl_agent_destroy(agent);
    if (rc == 0)
        fprintf(stderr, "PASS\n");
    return rc;
}

/*
 * The device layer's batched copies (ixl_devops.copy_batch; docs/device.md, "Batched copies")
 * against the simulated driver (tests/sim), which runs the copy kernel's semantics: it reads
 * the table from mapped pinned host memory when the launch runs (not when it is enqueued) and
 * faults on anything but device memory.
 *
 * In this process (IXL_DEV_COPY=auto): device-to-device batches of odd sizes and offsets go
 * through the kernel (entries over 256 KiB split, 16 MiB ones to the copy engines), with the
 * request in flight first and the bytes between the copies left poisoned; twelve batches posted
 * back to back (more than the layer's 8 tables, each launch 2 ms late) all land, so a table is
 * reused only after its launch ran (tables of small entries copied to device memory first, as
 * the counters show; in a child with no device memory left, read from the mapped table);
 * 70,000 entries take two launches; NET's growing batches allocate each table once;
 * host<->device batches
 * go through cuMemcpyBatchAsync; bad arguments are refused. In children: IXL_DEV_COPY=loop (one
 * cuMemcpyAsync each), the driver refusing the kernel (IXL_CUDASIM_NO_KERNEL: the batch API
 * takes over) and the batch API (IXL_CUDASIM_NO_BATCH: one call each), an injected failure of
 * a kernel entry (the event reports it), and a host pointer in a device-only batch (the
 * kernel faults, the event reports it). Each path is shown by the layer's counters.
 *
 * ctest runs it with IXL_CUDA_LIBRARY = the sim and IXL_CUDASIM_DELAY_US=2000. On a real GPU
 * (tests/gpu/run.sh runs it with the driver) the same cases run on the real copy kernel, except
 * the sim's refusals and faults (a fault would end the GPU context) and the in-flight checks
 * (a GPU may be done before the query).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ixl/ixl.h>
#include <ixl/ixl_plugin.h>

#include "check.h"
#include "in_child.h"
#include "device/device.h"

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

static const struct ixl_devops *ops;
static bool sim; /* the simulated driver (else a real GPU) */

static char logged[8192];

static void log_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(logged); /* the layer logs from the calling thread here */
    snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed * 7u + 1u) ^ (i >> 8));
}

static struct ixl_dev_counters counters(void)
{
    struct ixl_dev_counters c;
    ixl_dev_counters(&c);
    return c;
}

/* Device buffers src and dst of len bytes: src holds pattern seed, dst is poisoned. */
struct pair {
    unsigned char *src, *dst; /* device memory */
    unsigned char *want;      /* host: what dst must hold afterwards */
    unsigned char *pat;       /* host: what src holds */
    size_t len;
};

static void pair_make(struct pair *p, size_t len, unsigned seed)
{
    p->len = len;
    CHECK_RC(ixl_device_alloc(0, len, (void **)&p->src), IXL_OK);
    CHECK_RC(ixl_device_alloc(0, len, (void **)&p->dst), IXL_OK);
    p->pat = malloc(len);
    p->want = malloc(len);
    CHECK(p->pat != NULL && p->want != NULL);
    fill(p->pat, len, seed);
    CHECK_RC(ixl_device_copy(p->src, p->pat, len), IXL_OK);
    memset(p->want, 0xA5, len);
    CHECK_RC(ixl_device_copy(p->dst, p->want, len), IXL_OK);
}

/* Adds the copy src[off, +len) -> dst[off2, +len) to v (and to p->want). */
static void add(struct pair *p, struct ixl_dev_copy *v, size_t *n, size_t off, size_t off2,
                size_t len)
{
    memcpy(p->want + off2, p->pat + off, len);
    v[(*n)++] = (struct ixl_dev_copy){p->dst + off2, p->src + off, len};
}

static void pair_check(struct pair *p)
{
    unsigned char *got = malloc(p->len);
    CHECK(got != NULL);
    CHECK_RC(ixl_device_copy(got, p->dst, p->len), IXL_OK);
    if (memcmp(got, p->want, p->len) != 0) {
        size_t i = 0;
        while (got[i] == p->want[i])
            i++;
        check_fail(__FILE__, __LINE__, "byte %zu of %zu: 0x%02x, want 0x%02x", i, p->len, got[i],
                   p->want[i]);
    }
    free(got);
}

static void pair_free(struct pair *p)
{
    CHECK_RC(ixl_device_free(p->src), IXL_OK);
    CHECK_RC(ixl_device_free(p->dst), IXL_OK);
    free(p->want);
    free(p->pat);
}

static int run(struct ixl_dev_stream *s, const struct ixl_dev_copy *v, size_t n, uint32_t flags,
               bool in_flight)
{
    CHECK_RC(ops->copy_batch(ops->ctx, s, v, n, flags), IXL_OK);
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    if (in_flight && sim)
        CHECK_RC(ops->query(ops->ctx, e), IXL_IN_PROGRESS);
    int rc = ops->wait(ops->ctx, e);
    ops->event_destroy(ops->ctx, e);
    return rc;
}

/* Odd sizes and offsets, one entry split into chunks, one for the copy engines. */
static void mixed(struct ixl_dev_stream *s, uint32_t flags, unsigned seed)
{
    struct pair p;
    pair_make(&p, 20 * MB, seed);
    struct ixl_dev_copy v[16];
    size_t n = 0, at = 0;
    const size_t sizes[] = {1, 15, 16, 17, 4 * KB + 5, 256 * KB, 256 * KB + 3, 3 * MB + 7, 16 * MB};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t off = at + (i % 3) * 5, off2 = at + (i % 4) * 3 + 1; /* misaligned pairs too */
        add(&p, v, &n, off, off2, sizes[i]);
        at += sizes[i] + 64;
    }
    v[n++] = (struct ixl_dev_copy){p.dst + at, p.src + at, 0}; /* nothing to copy */
    CHECK_RC(run(s, v, n, flags, true), IXL_OK);
    pair_check(&p);
    pair_free(&p);
}

/* More batches back to back than the layer has tables (8): the ninth and later reuse the
 * first tables while earlier launches may still be waiting to run. */
#define RING_BATCHES 12
static void ring(struct ixl_dev_stream *s)
{
    struct pair p;
    pair_make(&p, RING_BATCHES * 100 * 4 * KB, 7);
    struct ixl_dev_copy v[RING_BATCHES][100];
    struct ixl_dev_event *e[RING_BATCHES];
    struct ixl_dev_counters c0 = counters();
    for (int b = 0; b < RING_BATCHES; b++) {
        size_t n = 0;
        for (int i = 0; i < 100; i++) { /* batch b's blocks, every RING_BATCHES-th, reversed */
            size_t blk = (size_t)(99 - i) * RING_BATCHES + (size_t)b;
            add(&p, v[b], &n, blk * 4 * KB, ((size_t)i * RING_BATCHES + (size_t)b) * 4 * KB,
                4 * KB);
        }
        CHECK_RC(ops->copy_batch(ops->ctx, s, v[b], n, IXL_DEV_COPY_DEVICE_ONLY), IXL_OK);
        CHECK_RC(ops->record(ops->ctx, s, &e[b]), IXL_OK);
    }
    struct ixl_dev_counters c1 = counters();
    CHECK(c1.kernel_launches - c0.kernel_launches == RING_BATCHES);
    /* 4 KiB entries: each table went to device memory first (the tables reused alike) */
    CHECK(c1.kernel_table_copies - c0.kernel_table_copies == RING_BATCHES);
    for (int b = 0; b < RING_BATCHES; b++) {
        CHECK_RC(ops->wait(ops->ctx, e[b]), IXL_OK);
        ops->event_destroy(ops->ctx, e[b]);
    }
    pair_check(&p);
    pair_free(&p);
}

/* 70,000 entries: more than one table holds. */
static void many(struct ixl_dev_stream *s)
{
    size_t n = 70000, sz = 16;
    struct pair p;
    pair_make(&p, n * sz, 9);
    struct ixl_dev_copy *v = malloc(n * sizeof(*v));
    CHECK(v != NULL);
    for (size_t i = 0; i < n; i++) { /* a permutation of the blocks */
        size_t from = (i * 7919) % n;
        v[i] = (struct ixl_dev_copy){p.dst + i * sz, p.src + from * sz, sz};
        memcpy(p.want + i * sz, p.pat + from * sz, sz);
    }
    struct ixl_dev_counters c0 = counters();
    CHECK_RC(run(s, v, n, IXL_DEV_COPY_DEVICE_ONLY, true), IXL_OK);
    struct ixl_dev_counters c1 = counters();
    CHECK(c1.kernel_launches - c0.kernel_launches == 2);
    CHECK(c1.kernel_copies - c0.kernel_copies == n);
    CHECK(c1.kernel_table_copies - c0.kernel_table_copies == 2);
    pair_check(&p);
    pair_free(&p);
    free(v);
}

/* NET's batches (1,024, 2,048, 4,096, then 8,192 copies) taking turns in the ring of 8 tables,
 * three requests of 32,768 on a new stream: the tables are allocated while the ring is first
 * filled (one per slot), none later; a batch larger than every earlier one grows its slot and,
 * in turn, every other slot once. */
static void growth(void)
{
    static const size_t sizes[] = {1024, 2048, 4096, 8192, 8192, 8192, 1024};
    size_t n = 32768, sz = 16;
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    struct pair p;
    pair_make(&p, 2 * n * sz, 47);
    struct ixl_dev_copy *v = malloc(2 * n * sizeof(*v));
    CHECK(v != NULL);
    uint64_t allocs[4];
    for (int req = 0; req < 3; req++) {
        uint64_t a0 = counters().table_allocs;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) /* a new permutation each request */
            add(&p, v, &k, ((i * 7919 + (size_t)req * 13) % n) * sz, i * sz, sz);
        size_t at = 0;
        for (size_t b = 0; b < sizeof(sizes) / sizeof(sizes[0]); b++) {
            CHECK_RC(ops->copy_batch(ops->ctx, s, v + at, sizes[b], IXL_DEV_COPY_DEVICE_ONLY),
                     IXL_OK);
            at += sizes[b];
        }
        CHECK(at == n);
        struct ixl_dev_event *e;
        CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
        CHECK_RC(ops->wait(ops->ctx, e), IXL_OK);
        ops->event_destroy(ops->ctx, e);
        pair_check(&p);
        allocs[req] = counters().table_allocs - a0;
    }
    /* The first request fills 7 slots, the second the eighth; the third allocates nothing. */
    CHECK(allocs[0] == 7 && allocs[1] == 1 && allocs[2] == 0);
    /* 20,000 copies in one batch: a slot of 32,768 entries; the next 7 batches (smaller) each
     * grow their slot to it; then nothing. */
    uint64_t a0 = counters().table_allocs;
    size_t k = 0;
    for (size_t i = 0; i < 20000; i++)
        add(&p, v, &k, (n + (i * 31) % 20000) * sz, (n + i) * sz, sz);
    CHECK_RC(ops->copy_batch(ops->ctx, s, v, k, IXL_DEV_COPY_DEVICE_ONLY), IXL_OK);
    for (int b = 0; b < 2 * 8 - 1; b++)
        CHECK_RC(ops->copy_batch(ops->ctx, s, v + (size_t)b * 1000, 1000, IXL_DEV_COPY_DEVICE_ONLY),
                 IXL_OK);
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    CHECK_RC(ops->wait(ops->ctx, e), IXL_OK);
    ops->event_destroy(ops->ctx, e);
    allocs[3] = counters().table_allocs - a0;
    CHECK(allocs[3] == 8);
    pair_check(&p);
    printf("test_device_batch: table allocations per request of 32,768 copies: %llu, %llu, %llu; "
           "after a batch of 20,000: %llu\n",
           (unsigned long long)allocs[0], (unsigned long long)allocs[1],
           (unsigned long long)allocs[2], (unsigned long long)allocs[3]);
    pair_free(&p);
    free(v);
    ops->stream_destroy(ops->ctx, s);
}

/* Host to device, then device to host, as one batch each (not device-only). */
static void host_side(struct ixl_dev_stream *s)
{
    size_t n = 64, sz = 3 * KB + 1;
    unsigned char *h = malloc(n * sz), *back = malloc(n * sz), *d;
    CHECK(h != NULL && back != NULL);
    CHECK_RC(ixl_device_alloc(0, n * sz, (void **)&d), IXL_OK);
    fill(h, n * sz, 11);
    memset(back, 0x5A, n * sz);
    struct ixl_dev_copy v[64];
    for (size_t i = 0; i < n; i++)
        v[i] = (struct ixl_dev_copy){d + i * sz, h + (n - 1 - i) * sz, sz};
    CHECK_RC(run(s, v, n, 0, true), IXL_OK);
    for (size_t i = 0; i < n; i++)
        v[i] = (struct ixl_dev_copy){back + (n - 1 - i) * sz, d + i * sz, sz};
    CHECK_RC(run(s, v, n, 0, true), IXL_OK);
    CHECK(memcmp(h, back, n * sz) == 0);
    CHECK_RC(ixl_device_free(d), IXL_OK);
    free(h);
    free(back);
}

/* copy_cols (ABI 2.7): the copies read from a plugin's kind of arrays, destinations and
 * lengths from 32-byte descriptors, sources from an array of addresses: sizes as mixed()'s
 * but none for the copy engines, one of nothing (zero addresses, skipped), one split. */
struct xdesc {
    uint64_t addr, len, dev, md;
};

static size_t cols_case(struct ixl_dev_stream *s, uint32_t flags, unsigned seed, size_t *pieces)
{
    struct pair p;
    pair_make(&p, 4 * MB, seed);
    const size_t sizes[] = {1, 15, 16, 17, 4 * KB + 5, 256 * KB, 256 * KB + 3, 1 * MB + 7};
    enum { N = 8 * 24 + 1 };
    struct xdesc *d = calloc(N, sizeof(*d));
    uint64_t *src = calloc(N, sizeof(*src));
    CHECK(d != NULL && src != NULL);
    size_t n = 0, at = 0, moved = 0;
    for (size_t i = 0; at + 2 * MB < p.len; i++) {
        size_t len = sizes[i % 8], from = (p.len - at - len - 64) - (i % 5);
        memcpy(p.want + at, p.pat + from, len);
        d[n] = (struct xdesc){(uint64_t)(uintptr_t)(p.dst + at), len, 0, 7};
        src[n++] = (uint64_t)(uintptr_t)(p.src + from);
        at += len + 64 + (i % 3);
        moved++;
        *pieces += (len + 256 * KB - 1) / (256 * KB); /* the kernel's entries */
        if (n == 5)
            d[n++] = (struct xdesc){0, 0, 0, 0}; /* nothing to copy, src[5] = 0 */
    }
    CHECK(n <= N);
    struct ixl_dev_cols c = {
        {&d[0].addr, sizeof(*d)}, {src, sizeof(*src)}, {&d[0].len, sizeof(*d)}};
    CHECK_RC(ops->copy_cols(ops->ctx, s, &c, n, flags), IXL_OK);
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    if (sim)
        CHECK_RC(ops->query(ops->ctx, e), IXL_IN_PROGRESS);
    CHECK_RC(ops->wait(ops->ctx, e), IXL_OK);
    ops->event_destroy(ops->ctx, e);
    pair_check(&p);
    pair_free(&p);
    free(d);
    free(src);
    return moved;
}

/* A zero source in copy_cols: refused, and its table never launched (nothing lands). */
static void cols_refused(struct ixl_dev_stream *s, uint32_t flags)
{
    struct pair p;
    pair_make(&p, 64 * KB, 51);
    struct xdesc d[3];
    uint64_t src[3];
    for (int i = 0; i < 3; i++) {
        d[i] = (struct xdesc){(uint64_t)(uintptr_t)(p.dst + (size_t)i * 4 * KB), 4 * KB, 0, 0};
        src[i] = i == 2 ? 0 : (uint64_t)(uintptr_t)(p.src + (size_t)i * 8 * KB);
    }
    struct ixl_dev_cols c = {{&d[0].addr, sizeof(d[0])}, {src, 8}, {&d[0].len, sizeof(d[0])}};
    struct ixl_dev_counters c0 = counters();
    CHECK_RC(ops->copy_cols(ops->ctx, s, &c, 3, flags), IXL_ERR_INVALID_ARG);
    struct ixl_dev_counters c1 = counters();
    CHECK(c1.kernel_launches == c0.kernel_launches && c1.batch_calls == c0.batch_calls &&
          c1.single_copies == c0.single_copies);
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    CHECK_RC(ops->wait(ops->ctx, e), IXL_OK);
    ops->event_destroy(ops->ctx, e);
    pair_check(&p); /* still all poison */
    pair_free(&p);
}

static void refusals(struct ixl_dev_stream *s)
{
    uint64_t a[4] = {0};
    struct ixl_dev_cols ok = {{a, 8}, {a, 8}, {a, 8}}, odd = ok, unaligned = ok;
    odd.src.stride = 12;
    unaligned.len.base = (const char *)a + 4;
    CHECK_RC(ops->copy_cols(ops->ctx, s, NULL, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_cols(ops->ctx, NULL, &ok, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_cols(ops->ctx, s, &odd, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_cols(ops->ctx, s, &unaligned, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_cols(ops->ctx, s, &ok, 4, IXL_DEV_COPY_DEVICE_ONLY), IXL_OK); /* lengths 0 */
    CHECK_RC(ops->copy_cols(ops->ctx, s, &odd, 0, 0), IXL_OK);
    cols_refused(s, IXL_DEV_COPY_DEVICE_ONLY);
    cols_refused(s, 0);

    unsigned char x[16];
    struct ixl_dev_copy bad = {NULL, x, sizeof(x)}, empty = {NULL, NULL, 0};
    CHECK_RC(ops->copy_batch(ops->ctx, s, NULL, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_batch(ops->ctx, s, &bad, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_batch(ops->ctx, NULL, &empty, 1, 0), IXL_ERR_INVALID_ARG);
    CHECK_RC(ops->copy_batch(ops->ctx, s, NULL, 0, 0), IXL_OK);
    CHECK_RC(ops->copy_batch(ops->ctx, s, &empty, 1, IXL_DEV_COPY_DEVICE_ONLY), IXL_OK);
}

/* ---- children ----------------------------------------------------------------------------- */

/* mixed() in both directions under the child's settings; which path ran, by the counters. */
static void child_paths(const char *mode)
{
    ixl_log_set_sink(log_sink, NULL);
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    struct ixl_dev_counters c0 = counters();
    mixed(s, IXL_DEV_COPY_DEVICE_ONLY, 21);
    host_side(s);
    size_t pieces = 0;
    uint64_t cols = cols_case(s, IXL_DEV_COPY_DEVICE_ONLY, 23, &pieces); /* not the empty one */
    struct ixl_dev_counters c1 = counters();
    uint64_t k = c1.kernel_launches - c0.kernel_launches, b = c1.batch_calls - c0.batch_calls,
             one = c1.single_copies - c0.single_copies;
    CHECK(c1.cols_calls - c0.cols_calls == 1);
    printf("child %s: %llu launches, %llu batch calls, %llu single copies\n", mode,
           (unsigned long long)k, (unsigned long long)b, (unsigned long long)one);
    if (strcmp(mode, "loop") == 0) {
        CHECK(k == 0 && b == 0 && one == 9 + 128 + cols);
    } else if (strcmp(mode, "no-kernel") == 0) {
        CHECK(k == 0 && b == 3 + 1 && one == 0);
        CHECK_STR_HAS(logged, "the copy kernel is unusable");
        CHECK_STR_HAS(logged, "CUDA_ERROR_NO_BINARY_FOR_GPU");
        CHECK_STR_HAS(logged, "IXL_CUDASIM_NO_KERNEL"); /* the JIT's log */
    } else if (strcmp(mode, "no-batch") == 0) {
        /* the 16 MiB entry went to the engines */
        CHECK(k == 1 + 1 && b == 0 && one == 1 + 128);
        CHECK_STR_HAS(logged, "cuMemcpyBatchAsync: CUDA_ERROR_NOT_SUPPORTED");
    } else {
        check_fail(__FILE__, __LINE__, "unknown mode %s", mode);
    }
    ops->stream_destroy(ops->ctx, s);
}

/* IXL_CUDASIM_FAIL_COPY=3: the third entry the kernel copies fails, and so does the event. */
static void child_entry_fails(const char *arg)
{
    (void)arg;
    ixl_log_set_sink(log_sink, NULL);
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    struct pair p;
    pair_make(&p, 64 * KB, 31); /* two copies by ixl_device_copy: 1 and 2 */
    struct ixl_dev_copy v[4];
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        add(&p, v, &n, (size_t)i * 16 * KB, (size_t)(3 - i) * 16 * KB, 16 * KB);
    CHECK_RC(run(s, v, n, IXL_DEV_COPY_DEVICE_ONLY, false), IXL_ERR_BACKEND);
    CHECK_STR_HAS(logged, "CUDA_ERROR_ILLEGAL_ADDRESS");
    ops->stream_destroy(ops->ctx, s);
}

/* No device memory left for a table: the kernel reads the mapped table instead. */
static void child_no_table_mem(const char *arg)
{
    (void)arg;
    ixl_log_set_sink(log_sink, NULL); /* (the refused allocations below log) */
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    struct pair p;
    size_t n = 200;
    pair_make(&p, n * 4 * KB, 43);
    /* Every byte of the device's memory taken (IXL_CUDASIM_MEM_MB=64 here). */
    void *held[64];
    int nh = 0;
    for (size_t sz = 64 * MB; sz >= 4 * KB && nh < 64;)
        if (ixl_device_alloc(0, sz, &held[nh]) == IXL_OK)
            nh++;
        else
            sz /= 2;
    CHECK(nh > 0 && nh < 64);
    struct ixl_dev_copy *v = malloc(n * sizeof(*v));
    CHECK(v != NULL);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        add(&p, v, &k, ((i * 37) % n) * 4 * KB, i * 4 * KB, 4 * KB);
    struct ixl_dev_counters c0 = counters();
    CHECK_RC(run(s, v, n, IXL_DEV_COPY_DEVICE_ONLY, true), IXL_OK);
    struct ixl_dev_counters c1 = counters();
    CHECK(c1.kernel_launches - c0.kernel_launches == 1);
    CHECK(c1.kernel_table_copies == c0.kernel_table_copies);
    while (nh > 0)
        CHECK_RC(ixl_device_free(held[--nh]), IXL_OK);
    pair_check(&p);
    pair_free(&p);
    free(v);
    ops->stream_destroy(ops->ctx, s);
}

/* A host buffer in a device-only batch: the kernel cannot reach it (a real GPU faults). */
static void child_host_in_kernel(const char *arg)
{
    (void)arg;
    ixl_log_set_sink(log_sink, NULL);
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    unsigned char *d, h[4096];
    CHECK_RC(ixl_device_alloc(0, sizeof(h), (void **)&d), IXL_OK);
    fill(h, sizeof(h), 41);
    struct ixl_dev_copy v[2] = {{d, h, 2048}, {d + 2048, h + 2048, 2048}};
    CHECK_RC(run(s, v, 2, IXL_DEV_COPY_DEVICE_ONLY, false), IXL_ERR_BACKEND);
    CHECK_STR_HAS(logged, "CUDA_ERROR_ILLEGAL_ADDRESS");
    ops->stream_destroy(ops->ctx, s);
}

static void set_ops(void)
{
    ops = ixl_dev_ops();
}

static void in_child(const char *name, const char *value, void (*fn)(const char *), const char *arg)
{
    check_in_child(NULL, name, value, set_ops, fn, arg, 0);
}

int main(void)
{
    const char *lib = getenv("IXL_CUDA_LIBRARY");
    sim = lib != NULL && strstr(lib, "cudasim") != NULL;
    /* Children first: this process has not loaded the driver yet. */
    in_child("IXL_DEV_COPY", "loop", child_paths, "loop");
    if (sim) {
        in_child("IXL_CUDASIM_NO_KERNEL", "1", child_paths, "no-kernel");
        in_child("IXL_CUDASIM_NO_BATCH", "1", child_paths, "no-batch");
        in_child("IXL_CUDASIM_FAIL_COPY", "3", child_entry_fails, "entry fails");
        in_child(NULL, NULL, child_host_in_kernel, "host memory in a kernel");
        in_child("IXL_CUDASIM_MEM_MB", "64", child_no_table_mem, "no device memory for a table");
    }

    ops = ixl_dev_ops();
    char why[256] = "";
    int ndev = ops->count(ops->ctx, why, sizeof(why));
    if (!sim && ndev <= 0) {
        fprintf(stderr, "SKIP: no GPU (%s)\n", why);
        return 77;
    }
    CHECK(ops->size >= sizeof(struct ixl_devops) && ops->copy_batch != NULL);
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    struct ixl_dev_counters c0 = counters();
    mixed(s, IXL_DEV_COPY_DEVICE_ONLY, 1);
    struct ixl_dev_counters c1 = counters();
    /* One launch: 8 entries, 256 KiB + 3 and 3 MiB + 7 split (2 + 13 pieces): 21 pieces. */
    CHECK(c1.kernel_launches - c0.kernel_launches == 1);
    CHECK(c1.kernel_copies - c0.kernel_copies == 21);
    CHECK(c1.single_copies - c0.single_copies == 1);         /* 16 MiB: the copy engines */
    CHECK(c1.kernel_table_copies == c0.kernel_table_copies); /* large entries: mapped table */
    ring(s);
    many(s);
    growth();
    c0 = counters();
    size_t pieces = 0;
    size_t cols = cols_case(s, IXL_DEV_COPY_DEVICE_ONLY, 3, &pieces);
    c1 = counters();
    /* one launch, the longer copies split in pieces of 256 KiB */
    CHECK(c1.cols_calls - c0.cols_calls == 1 && c1.kernel_launches - c0.kernel_launches == 1);
    CHECK(c1.kernel_copies - c0.kernel_copies == pieces && pieces > cols);
    printf("test_device_batch: copy_cols: %zu copies, %zu kernel entries\n", cols, pieces);
    c0 = counters();
    host_side(s);
    c1 = counters();
    /* cuMemcpyBatchAsync when the driver has it (CUDA 12.8 on; the sim has it), else one
     * cuMemcpyAsync per copy. */
    CHECK(c1.kernel_launches == c0.kernel_launches);
    CHECK(c1.batch_calls - c0.batch_calls == 2 ||
          (!sim && c1.batch_calls == c0.batch_calls && c1.single_copies - c0.single_copies == 128));
    printf("test_device_batch: host<->device batches: %llu cuMemcpyBatchAsync calls, %llu "
           "cuMemcpyAsync calls\n",
           (unsigned long long)(c1.batch_calls - c0.batch_calls),
           (unsigned long long)(c1.single_copies - c0.single_copies));
    refusals(s);
    ops->stream_destroy(ops->ctx, s);
    printf("test_device_batch: ok\n");
    return 0;
}

/*
 * POSIX moves VRAM to and from files through pinned bounce buffers (plugins/posix/
 * posix_stage.c), on the simulated device (tests/sim; ctest points IXL_CUDA_LIBRARY at it).
 * Small bounce buffers (64 KiB, 3 of them) make every request many pipelined chunks. Each case
 * runs in a fresh process:
 *
 *   data      both engines (threads, and auto: io_uring where the kernel allows it): WRITE
 *             VRAM -> FILE and READ FILE -> VRAM, descriptors of odd sizes at odd offsets,
 *             posted twice, and one of the whole region; a fresh pattern in the source and a
 * poisoned destination before each (device memory only through ixl_device_copy), gaps stay
 * poisoned; the request says backend POSIX, path "staged"; direct I/O (O_DIRECT) where the
 * filesystem allows it; a notification and a wrong agent name refused with what to do short
 * pwrite/pread moving at most a third per call (ixl_syscall_set): continued, OK full RLIMIT_FSIZE:
 * the WRITE fails with IXL_ERR_NO_SPACE, never OK; the bytes below the limit are there inflight
 * copies delayed (IXL_CUDASIM_DELAY_US): a READ and a WRITE in flight after their post, released in
 * flight: release returns IXL_OK and nothing lands in the VRAM afterwards fail      an injected
 * copy failure (IXL_CUDASIM_FAIL_COPY): the WRITE fails (IXL_ERR_BACKEND), not OK; posted again it
 * succeeds (the stream was replaced) nodev     no device (IXL_CUDASIM_NO_DEVICE): VRAM is not among
 * POSIX's memory types and ixl_backend_mem_why says why auto      automatic choice (COSTFAKE,
 * tests/plugins/costfake.c, estimates from the same table): two tables flip the choice between
 * POSIX and COSTFAKE, by size; equal figures go to the backend created first; a named backend is
 * used as named
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define REGION MIB
#define NDESC 5
#define DELAY_US 100000

static char dir[64];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint8_t pat(uint64_t seed, uint64_t i)
{
    uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
    return (uint8_t)(x >> 56 ^ x >> 29 ^ i);
}

static struct ixl_agent *agent_new(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
                                 .backends = "",
                                 .etcd_endpoints = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static struct ixl_backend *posix_new(struct ixl_agent *a, const char *engine, const char *table)
{
    struct ixl_kv kv[] = {{"engine", engine},
                          {"bounce_size", "64K"},
                          {"bounce_buffers", "3"},
                          {"cost_table", table ? table : ""}};
    struct ixl_backend *be = NULL;
    ixl_status st = ixl_backend_create(a, "POSIX", kv, 4, &be);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "POSIX engine=%s: %s: %s", engine, ixl_strerror(st),
                   ixl_agent_last_error(a));
    if (!(ixl_backend_mem_mask(be) & IXL_MEM_BIT(IXL_MEM_VRAM)))
        check_fail(__FILE__, __LINE__, "POSIX has no VRAM on the simulated device: %s",
                   ixl_backend_mem_why(be));
    return be;
}

/* ---- device memory (only through ixl_device_copy) and the file ----------------------------- */

static uint8_t *vram_new(size_t len)
{
    void *p = NULL;
    CHECK_RC(ixl_device_alloc(0, len, &p), IXL_OK);
    return p;
}

static void vram_put(uint8_t *v, size_t len, uint64_t seed, int poison)
{
    uint8_t *h = malloc(len);
    CHECK(h != NULL);
    for (size_t i = 0; i < len; i++)
        h[i] = poison ? 0xA5 : pat(seed, i);
    CHECK_RC(ixl_device_copy(v, h, len), IXL_OK);
    free(h);
}

static uint8_t *vram_get(const uint8_t *v, size_t len)
{
    uint8_t *h = malloc(len);
    CHECK(h != NULL);
    CHECK_RC(ixl_device_copy(h, v, len), IXL_OK);
    return h;
}

static void file_put(int fd, size_t len, uint64_t seed, int poison)
{
    uint8_t *h = aligned_alloc(4096, len);
    CHECK(h != NULL);
    for (size_t i = 0; i < len; i++)
        h[i] = poison ? 0xA5 : pat(seed, i);
    CHECK(pwrite(fd, h, len, 0) == (ssize_t)len);
    free(h);
}

static uint8_t *file_get(int fd, size_t len)
{
    uint8_t *h = aligned_alloc(4096, len);
    CHECK(h != NULL);
    CHECK(pread(fd, h, len, 0) == (ssize_t)len);
    return h;
}

/* A file of the temp directory (flags added to O_RDWR | O_CREAT | O_TRUNC); -1 with errno. */
static int file_open(const char *name, int flags)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return open(path, O_RDWR | O_CREAT | O_TRUNC | flags, 0600);
}

static void reg(struct ixl_agent *a, enum ixl_mem type, uint64_t addr, uint64_t len, uint64_t dev)
{
    struct ixl_reg_desc d = {addr, len, dev, NULL, 0};
    ixl_status st = ixl_mem_register(a, type, &d, 1, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "registering %s: %s: %s", ixl_mem_name(type),
                   ixl_strerror(st), ixl_agent_last_error(a));
}

static void dereg(struct ixl_agent *a, enum ixl_mem type, uint64_t addr, uint64_t len, uint64_t dev)
{
    struct ixl_reg_desc d = {addr, len, dev, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, type, &d, 1, NULL), IXL_OK);
}

/* The request VRAM v at voffs <-> FILE fd at foffs, lens; st receives the creation's status. */
static struct ixl_xfer *xfer_try(struct ixl_agent *a, enum ixl_op op, const uint8_t *v,
                                 const size_t *voffs, int fd, const size_t *foffs,
                                 const size_t *lens, size_t n, const char *remote,
                                 const char *notif, struct ixl_backend *only, ixl_status *st)
{
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, n, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, n, &rl), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc ld = {(uint64_t)(uintptr_t)v + voffs[i], lens[i], 0};
        struct ixl_desc rd = {foffs[i], lens[i], (uint64_t)fd};
        CHECK_RC(ixl_dlist_add(ll, &ld, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(rl, &rd, 1), IXL_OK);
    }
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    if (notif) {
        p.field_mask |= IXL_XFER_F_NOTIF;
        p.notif = notif;
        p.notif_len = strlen(notif);
    }
    if (only) {
        p.field_mask |= IXL_XFER_F_BACKENDS;
        p.backends = &only;
        p.n_backends = 1;
    }
    struct ixl_xfer *x = NULL;
    *st = ixl_xfer_create(a, op, ll, rl, remote ? remote : ixl_agent_name(a), &p, &x);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    return *st == IXL_OK ? x : NULL;
}

static struct ixl_xfer *xfer_new(struct ixl_agent *a, enum ixl_op op, const uint8_t *v,
                                 const size_t *voffs, int fd, const size_t *foffs,
                                 const size_t *lens, size_t n)
{
    ixl_status st;
    struct ixl_xfer *x = xfer_try(a, op, v, voffs, fd, foffs, lens, n, NULL, NULL, NULL, &st);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_xfer_create: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    return x;
}

static ixl_status run(struct ixl_xfer *x)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, 20000);
    return st;
}

static void check_info(struct ixl_xfer *x, const char *backend, const char *path)
{
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.backend, backend) != 0 || strcmp(info.path, path) != 0)
        check_fail(__FILE__, __LINE__, "request ran on %s path '%s', want %s path '%s'",
                   info.backend, info.path, backend, path);
}

/* WRITE then READ of descriptors (voffs, foffs, lens) through fd, each posted rounds times,
 * checked. */
static void roundtrip(struct ixl_agent *a, uint8_t *v, int fd, const size_t *voffs,
                      const size_t *foffs, const size_t *lens, size_t n, int rounds, uint64_t *seed,
                      const char *what)
{
    for (int opi = 0; opi < 2; opi++) {
        enum ixl_op op = opi ? IXL_OP_READ : IXL_OP_WRITE;
        struct ixl_xfer *x = xfer_new(a, op, v, voffs, fd, foffs, lens, n);
        check_info(x, "POSIX", "staged");
        for (int round = 0; round < rounds; round++, (*seed)++) {
            if (op == IXL_OP_WRITE) {
                vram_put(v, REGION, *seed, 0);
                file_put(fd, REGION, 0, 1);
            } else {
                file_put(fd, REGION, *seed, 0);
                vram_put(v, REGION, 0, 1);
            }
            ixl_status st = run(x);
            if (st != IXL_OK)
                check_fail(__FILE__, __LINE__, "%s %s: %s: %s", what, opi ? "READ" : "WRITE",
                           ixl_strerror(st), ixl_agent_last_error(a));
            uint8_t *dst = op == IXL_OP_WRITE ? file_get(fd, REGION) : vram_get(v, REGION);
            const size_t *doffs = op == IXL_OP_WRITE ? foffs : voffs;
            const size_t *soffs = op == IXL_OP_WRITE ? voffs : foffs;
            /* The destination must be the source's pattern in every descriptor, poison
             * elsewhere: one comparison with what it should hold. */
            uint8_t *want = malloc(REGION);
            CHECK(want != NULL);
            memset(want, 0xA5, REGION);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < lens[i]; j++)
                    want[doffs[i] + j] = pat(*seed, soffs[i] + j);
            if (memcmp(dst, want, REGION) != 0) {
                size_t k = 0;
                while (dst[k] == want[k])
                    k++;
                check_fail(__FILE__, __LINE__,
                           "%s %s: byte %zu of the destination is 0x%02x, want "
                           "0x%02x",
                           what, opi ? "READ" : "WRITE", k, dst[k], want[k]);
            }
            free(want);
            free(dst);
        }
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
}

/* ---- cases -------------------------------------------------------------------------------- */

static const size_t odd_v[NDESC] = {0, 150001, 262144 + 7, 524288 + 4095, 750000};
static const size_t odd_f[NDESC] = {600000, 3, 300000, 100, 900000};
static const size_t odd_l[NDESC] = {100003, 1, 65536 * 2 + 13, 4096, 50001};

static int case_data(void)
{
    static const char *const engines[] = {"threads", "auto"};
    uint64_t seed = 1;
    for (int ei = 0; ei < 2; ei++) {
        struct ixl_agent *a = agent_new("pvram-data");
        posix_new(a, engines[ei], NULL);
        uint8_t *v = vram_new(REGION);
        reg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
        int fd = file_open("data", 0);
        CHECK(fd >= 0);
        reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        roundtrip(a, v, fd, odd_v, odd_f, odd_l, NDESC, 2, &seed, engines[ei]);
        /* One descriptor of the whole region: 16 chunks through 3 buffers. */
        size_t z = 0, all = REGION;
        roundtrip(a, v, fd, &z, &z, &all, 1, 1, &seed, engines[ei]);
        if (ei == 0) {
            /* What the seeds' troubleshooting lists, refused with what to do. */
            ixl_status st;
            xfer_try(a, IXL_OP_WRITE, v, odd_v, fd, odd_f, odd_l, 1, NULL, "done", NULL, &st);
            CHECK_RC(st, IXL_ERR_NOTIF_UNSUPPORTED);
            CHECK_STR_HAS(ixl_agent_last_error(a), "omit the notification");
            xfer_try(a, IXL_OP_WRITE, v, odd_v, fd, odd_f, odd_l, 1, "storage", NULL, NULL, &st);
            CHECK_RC(st, IXL_ERR_NOT_FOUND);
            CHECK_STR_HAS(ixl_agent_last_error(a), "own name 'pvram-data'");
            fprintf(stderr, "  wrong agent name: %s\n", ixl_agent_last_error(a));
        }
        dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        close(fd);
        /* Direct I/O: the bounce buffers are aligned; file offsets and lengths must be. */
        fd = file_open("direct", O_DIRECT);
        if (fd < 0 && errno == EINVAL) {
            fprintf(stderr, "  %s: skipping direct I/O: %s does not support O_DIRECT\n",
                    engines[ei], dir);
        } else {
            CHECK(fd >= 0);
            CHECK(ftruncate(fd, REGION) == 0);
            reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
            static const size_t dv[3] = {5, 400000, 524288 + 1};
            static const size_t df[3] = {524288, 0, 4096 * 50};
            static const size_t dl[3] = {192 * KIB, 4096, 64 * KIB + 3 * 4096};
            roundtrip(a, v, fd, dv, df, dl, 3, 1, &seed, "direct");
            dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
            close(fd);
        }
        dereg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
        CHECK_RC(ixl_device_free(v), IXL_OK);
        ixl_agent_destroy(a);
    }
    return 0;
}

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t third_pwrite(int fd, const void *b, size_t n, off_t off)
{
    return real_pwrite(fd, b, n > 3 ? n / 3 : n, off);
}
static ssize_t third_pread(int fd, void *b, size_t n, off_t off)
{
    return real_pread(fd, b, n > 3 ? n / 3 : n, off);
}

static int case_short(void)
{
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))ixl_syscall_get("pwrite");
    real_pread = (ssize_t(*)(int, void *, size_t, off_t))ixl_syscall_get("pread");
    CHECK_RC(ixl_syscall_set("pwrite", (ixl_syscall_fn)third_pwrite), IXL_OK);
    CHECK_RC(ixl_syscall_set("pread", (ixl_syscall_fn)third_pread), IXL_OK);
    struct ixl_agent *a = agent_new("pvram-short");
    posix_new(a, "threads", NULL);
    uint8_t *v = vram_new(REGION);
    reg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    int fd = file_open("short", 0);
    CHECK(fd >= 0);
    reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    uint64_t seed = 50;
    roundtrip(a, v, fd, odd_v, odd_f, odd_l, NDESC, 1, &seed, "short");
    dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    dereg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    ixl_agent_destroy(a);
    CHECK_RC(ixl_syscall_set("pwrite", NULL), IXL_OK);
    CHECK_RC(ixl_syscall_set("pread", NULL), IXL_OK);
    close(fd);
    CHECK_RC(ixl_device_free(v), IXL_OK);
    return 0;
}

static int case_full(void)
{
    static const char *const engines[] = {"threads", "auto"};
    signal(SIGXFSZ, SIG_IGN);
    for (int ei = 0; ei < 2; ei++) {
        struct ixl_agent *a = agent_new("pvram-full");
        posix_new(a, engines[ei], NULL);
        uint8_t *v = vram_new(REGION);
        reg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
        int fd = file_open("full", 0);
        CHECK(fd >= 0);
        reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        vram_put(v, REGION, 77, 0);
        size_t z = 0, len = MIB;
        struct ixl_xfer *x = xfer_new(a, IXL_OP_WRITE, v, &z, fd, &z, &len, 1);
        struct rlimit old, lim;
        CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
        if (old.rlim_max != RLIM_INFINITY && old.rlim_max < MIB)
            skip(1, "RLIMIT_FSIZE's hard limit is below 1 MiB");
        lim = old;
        lim.rlim_cur = 300001; /* inside the 5th chunk: a short write, then EFBIG */
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        ixl_status st = run(x);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
        if (st != IXL_ERR_NO_SPACE)
            check_fail(__FILE__, __LINE__,
                       "%s: WRITE past RLIMIT_FSIZE: %s (%s), want "
                       "IXL_ERR_NO_SPACE",
                       engines[ei], ixl_strerror(st), ixl_agent_last_error(a));
        fprintf(stderr, "  %s: %s\n", engines[ei], ixl_agent_last_error(a));
        CHECK_STR_HAS(ixl_agent_last_error(a), "full");
        uint8_t *h = malloc(300001);
        CHECK(pread(fd, h, 300001, 0) == 300001);
        for (size_t i = 0; i < 300001; i++)
            if (h[i] != pat(77, i))
                check_fail(__FILE__, __LINE__, "byte %zu below the limit is wrong", i);
        free(h);
        /* Posted again without the limit, it succeeds. */
        CHECK_RC(run(x), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        close(fd);
        dereg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
        CHECK_RC(ixl_device_free(v), IXL_OK);
        ixl_agent_destroy(a);
    }
    return 0;
}

static int case_inflight(void)
{
    struct ixl_agent *a = agent_new("pvram-inflight");
    posix_new(a, "auto", NULL);
    uint8_t *v = vram_new(REGION);
    reg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    int fd = file_open("inflight", 0);
    CHECK(fd >= 0);
    reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    file_put(fd, REGION, 5, 0);
    size_t z = 0, len = 16 * 64 * KIB;
    for (int opi = 0; opi < 2; opi++) {
        enum ixl_op op = opi ? IXL_OP_WRITE : IXL_OP_READ;
        vram_put(v, REGION, 0, 1);
        struct ixl_xfer *x = xfer_new(a, op, v, &z, fd, &z, &len, 1);
        ixl_status st = ixl_xfer_post(x);
        CHECK_RC(st, IXL_IN_PROGRESS);
        usleep(150000); /* a few chunks into the pipeline, copies pending */
        CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
        uint64_t t0 = now_ms();
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        fprintf(stderr, "  %s released in flight after %" PRIu64 " ms\n", opi ? "WRITE" : "READ",
                now_ms() - t0);
        uint8_t *h1 = vram_get(v, REGION);
        usleep(3 * DELAY_US);
        uint8_t *h2 = vram_get(v, REGION);
        CHECK(memcmp(h1, h2, REGION) == 0); /* nothing landed after the release */
        if (opi == 0) {
            size_t got = 0;
            while (got < len && h1[got] != 0xA5)
                got++;
            CHECK(got < len); /* released before the end */
        }
        free(h1);
        free(h2);
    }
    dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    close(fd);
    dereg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    ixl_agent_destroy(a);
    CHECK_RC(ixl_device_free(v), IXL_OK);
    return 0;
}

static int case_fail(void)
{
    struct ixl_agent *a = agent_new("pvram-fail");
    posix_new(a, "threads", NULL);
    uint8_t *v = vram_new(REGION);
    reg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    int fd = file_open("fail", 0);
    CHECK(fd >= 0);
    reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    vram_put(v, REGION, 9, 0); /* copy 1; the request's are 2, 3 (fails), ... */
    size_t z = 0, len = 8 * 64 * KIB;
    struct ixl_xfer *x = xfer_new(a, IXL_OP_WRITE, v, &z, fd, &z, &len, 1);
    ixl_status st = run(x);
    if (st != IXL_ERR_BACKEND)
        check_fail(__FILE__, __LINE__, "WRITE with a failed copy: %s (%s), want IXL_ERR_BACKEND",
                   ixl_strerror(st), ixl_agent_last_error(a));
    CHECK_STR_HAS(ixl_agent_last_error(a), "copy");
    fprintf(stderr, "  %s\n", ixl_agent_last_error(a));
    file_put(fd, REGION, 0, 1);
    CHECK_RC(run(x), IXL_OK); /* a new stream replaced the failed one */
    uint8_t *h = file_get(fd, REGION);
    for (size_t i = 0; i < len; i++)
        if (h[i] != pat(9, i))
            check_fail(__FILE__, __LINE__, "after recovery: byte %zu is wrong", i);
    free(h);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
    close(fd);
    dereg(a, IXL_MEM_VRAM, (uintptr_t)v, REGION, 0);
    ixl_agent_destroy(a);
    CHECK_RC(ixl_device_free(v), IXL_OK);
    return 0;
}

static int case_nodev(void)
{
    struct ixl_agent *a = agent_new("pvram-nodev");
    struct ixl_backend *be = NULL;
    CHECK_RC(ixl_backend_create(a, "POSIX", NULL, 0, &be), IXL_OK);
    CHECK(!(ixl_backend_mem_mask(be) & IXL_MEM_BIT(IXL_MEM_VRAM)));
    CHECK(ixl_backend_mem_mask(be) & IXL_MEM_BIT(IXL_MEM_FILE));
    CHECK_STR_HAS(ixl_backend_mem_why(be), "VRAM: ");
    fprintf(stderr, "  mem_why: %s\n", ixl_backend_mem_why(be));
    ixl_agent_destroy(a);
    return 0;
}

static void table_write(const char *path, const char *rows)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "ixl-cost-table 1\n%s", rows);
    CHECK(fclose(f) == 0);
}

/* With the table at path: the backend the automatic choice takes for WRITE and READ of one
 * descriptor of len bytes must be want (both directions). */
static void choose(struct ixl_agent *a, uint8_t *v, int fd, size_t len, const char *want,
                   struct ixl_backend *only)
{
    for (int opi = 0; opi < 2; opi++) {
        size_t z = 0;
        ixl_status st;
        struct ixl_xfer *x = xfer_try(a, opi ? IXL_OP_READ : IXL_OP_WRITE, v, &z, fd, &z, &len, 1,
                                      NULL, NULL, only, &st);
        if (st != IXL_OK)
            check_fail(__FILE__, __LINE__, "ixl_xfer_create: %s: %s", ixl_strerror(st),
                       ixl_agent_last_error(a));
        struct ixl_xfer_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
        if (strcmp(info.backend, want) != 0)
            check_fail(__FILE__, __LINE__, "%s of %zu bytes went to %s, want %s",
                       opi ? "READ" : "WRITE", len, info.backend, want);
        if (strcmp(want, "POSIX") == 0 && len <= MIB) { /* the chosen request runs */
            vram_put(v, len, 3, 0);
            CHECK_RC(run(x), IXL_OK);
        }
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
}

static int case_auto(void)
{
    char t1[128], t2[128], t3[128];
    snprintf(t1, sizeof(t1), "%s/table1", dir);
    snprintf(t2, sizeof(t2), "%s/table2", dir);
    snprintf(t3, sizeof(t3), "%s/table3", dir);
    /* Table 1: POSIX faster at 1 MiB, COSTFAKE at 64 MiB; table 2 the other way round; table 3
     * equal figures. */
    table_write(t1, "POSIX staged WRITE 1M 8\nPOSIX staged WRITE 64M 2\n"
                    "POSIX staged READ 1M 8\nPOSIX staged READ 64M 2\n"
                    "COSTFAKE fake WRITE 1M 2\nCOSTFAKE fake WRITE 64M 8\n"
                    "COSTFAKE fake READ 1M 2\nCOSTFAKE fake READ 64M 8\n");
    table_write(t2, "POSIX staged WRITE 1M 2\nPOSIX staged WRITE 64M 8\n"
                    "POSIX staged READ 1M 2\nPOSIX staged READ 64M 8\n"
                    "COSTFAKE fake WRITE 1M 8\nCOSTFAKE fake WRITE 64M 2\n"
                    "COSTFAKE fake READ 1M 8\nCOSTFAKE fake READ 64M 2\n");
    table_write(t3, "POSIX staged WRITE 1M 5\nPOSIX staged READ 1M 5\n"
                    "COSTFAKE fake WRITE 1M 5\nCOSTFAKE fake READ 1M 5\n");
    const size_t big = 64 * MIB;
    uint8_t *v = vram_new(big);
    int fd = file_open("auto", 0);
    CHECK(fd >= 0);
    const char *tables[3] = {t1, t2, t3};
    const char *want_small[3] = {"POSIX", "COSTFAKE", "POSIX"};
    const char *want_big[3] = {"COSTFAKE", "POSIX", "POSIX"};
    for (int ti = 0; ti < 3; ti++) {
        struct ixl_agent *a = agent_new("pvram-auto");
        posix_new(a, "threads", tables[ti]);
        struct ixl_kv kv = {"cost_table", tables[ti]};
        struct ixl_backend *fake = NULL;
        ixl_status st = ixl_backend_create(a, "COSTFAKE", &kv, 1, &fake);
        if (st != IXL_OK)
            check_fail(__FILE__, __LINE__, "COSTFAKE: %s: %s (IXL_PLUGIN_DIR must hold it)",
                       ixl_strerror(st), ixl_agent_last_error(a));
        reg(a, IXL_MEM_VRAM, (uintptr_t)v, big, 0);
        reg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        choose(a, v, fd, MIB, want_small[ti], NULL);
        choose(a, v, fd, big, want_big[ti], NULL);
        if (ti == 0) /* named: as named, whatever the table says */
            choose(a, v, fd, MIB, "COSTFAKE", fake);
        fprintf(stderr, "  table %d: 1 MiB -> %s, 64 MiB -> %s\n", ti + 1, want_small[ti],
                want_big[ti]);
        dereg(a, IXL_MEM_FILE, 0, 0, (uint64_t)fd);
        dereg(a, IXL_MEM_VRAM, (uintptr_t)v, big, 0);
        ixl_agent_destroy(a);
    }
    close(fd);
    CHECK_RC(ixl_device_free(v), IXL_OK);
    return 0;
}

/* ---- the driver: each case in a fresh process --------------------------------------------- */

static int run_case(const char *name, const char *const *env)
{
    uint64_t t0 = now_ms();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e += 2)
            setenv(e[0], e[1], 1);
        execl("/proc/self/exe", "test_posix_vram", name, dir, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    double s = (double)(now_ms() - t0) / 1000.0;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "case %s failed (%s %d)\n", name,
                WIFSIGNALED(ws) ? "signal" : "exit status",
                WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
        return 1;
    }
    printf("%s: passed (%.2f s)\n", name, s);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3) {
        snprintf(dir, sizeof(dir), "%s", argv[2]);
        const struct {
            const char *name;
            int (*fn)(void);
        } cases[] = {{"data", case_data},         {"short", case_short}, {"full", case_full},
                     {"inflight", case_inflight}, {"fail", case_fail},   {"nodev", case_nodev},
                     {"auto", case_auto}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            if (strcmp(argv[1], cases[i].name) == 0)
                return cases[i].fn();
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    const char *lib = getenv("IXL_CUDA_LIBRARY");
    if (lib == NULL || access(lib, R_OK) != 0)
        skip(1, "IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)");
    snprintf(dir, sizeof(dir), "/tmp/ixl_pvram_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char delay[32];
    snprintf(delay, sizeof(delay), "%d", DELAY_US);
    const char *none[] = {NULL};
    const char *slow[] = {"IXL_CUDASIM_DELAY_US", delay, NULL};
    const char *fail[] = {"IXL_CUDASIM_FAIL_COPY", "3", NULL};
    const char *nodev[] = {"IXL_CUDASIM_NO_DEVICE", "1", NULL};
    int rc = 0;
    const char *only = argc == 2 ? argv[1] : NULL;
#define RUN(n, env)                           \
    if (only == NULL || strcmp(only, n) == 0) \
    rc |= run_case(n, env)
    RUN("data", none);
    RUN("short", none);
    RUN("full", none);
    RUN("inflight", slow);
    RUN("fail", fail);
    RUN("nodev", nodev);
    RUN("auto", none);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

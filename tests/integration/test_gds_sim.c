/*
 * GDS and GDS_MT on the simulated device (tests/sim: libixl_cudasim.so as libcuda, and
 * libixl_cufilesim.so as libcufile, given through the backends' `library` option). ctest sets
 * IXL_CUDA_LIBRARY; the fake cuFile refuses batch entries over its per-buffer size (1 MiB:
 * the seeds' "Error in setting up Batch") and any call on a thread without a CUDA context.
 *
 * For each backend: VRAM -> FILE (WRITE) and FILE -> VRAM (READ) of 1 MiB, 16 MiB (the seeds'
 * failing size: GDS splits it into 1 MiB entries) and an odd multi-descriptor request, a fresh
 * pattern in the source and a poisoned destination before each checked transfer (device memory
 * through ixl_device_copy), in flight after its post; the file in path mode (GDS) and fd mode
 * (GDS_MT); the path reported ("batch.compat" / "mt.compat": no nvidia-fs here); an estimate
 * from the cost table; a READ past the end of the file fails naming it; a notification asked
 * of a storage backend and a wrong agent name get messages saying what to do; a cuFile that
 * refuses batch I/O makes GDS unavailable with the reason; with no backend named, the core's
 * choice among POSIX, GDS and GDS_MT follows a cost table. Argument
 * "short": the fake moves half of each I/O (short transfers are continued; 1 MiB and the odd
 * request only).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

#define MiB (1024u * 1024u)
#define VRAM_LEN (17u * MiB)

static char dir[64];
static bool shorten;
#if defined(__SANITIZE_THREAD__)
static const bool under_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
static const bool under_tsan = true;
#else
static const bool under_tsan = false;
#endif
#else
static const bool under_tsan = false;
#endif
static uint8_t *host, *back;

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
}

/* The fake cuFile's counters (tests/sim/cufilesim.c): reads, writes, batch entries, batches,
 * the largest entry, calls without a context, buffer registrations refused as already
 * registered, deregistrations of memory not registered, buffers registered now. */
#define STATS 9
static void stats(uint64_t out[STATS])
{
    void *h = dlopen(IXL_CUFILESIM_PATH, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    void (*fn)(uint64_t *);
    *(void **)&fn = dlsym(h, "ixl_cufilesim_stats");
    CHECK(fn != NULL);
    fn(out);
    dlclose(h);
}

static char logged[4096];

static void log_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
}

struct seg {
    uint64_t voff, foff, len;
};

/* Moves segs between vram and the file (dev fdev) with op; checks the data. */
static void xfer(struct ixl_agent *a, struct ixl_backend *b, uint8_t *vram, int fd, uint64_t fdev,
                 enum ixl_op op, const struct seg *segs, size_t n, const char *want_path,
                 uint32_t seed)
{
    struct ixl_dlist *lv, *lf;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, n, &lv), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, n, &lf), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc v = {(uint64_t)(uintptr_t)vram + segs[i].voff, segs[i].len, 0};
        struct ixl_desc f = {segs[i].foff, segs[i].len, fdev};
        CHECK_RC(ixl_dlist_add(lv, &v, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(lf, &f, 1), IXL_OK);
    }
    /* A fresh pattern at the source, the destination poisoned: over the span the segments
     * touch (the whole of it on either side). */
    size_t span = 0;
    for (size_t i = 0; i < n; i++) {
        size_t end = (size_t)(segs[i].voff > segs[i].foff ? segs[i].voff : segs[i].foff) +
                     (size_t)segs[i].len;
        span = end > span ? end : span;
    }
    CHECK(span <= VRAM_LEN);
    fill(host, span, seed);
    if (op == IXL_OP_WRITE) {
        CHECK_RC(ixl_device_copy(vram, host, span), IXL_OK);
        memset(back, 0xEE, span);
        CHECK(pwrite(fd, back, span, 0) == (ssize_t)span);
    } else {
        CHECK(pwrite(fd, host, span, 0) == (ssize_t)span);
        memset(back, 0xEE, span);
        CHECK_RC(ixl_device_copy(vram, back, span), IXL_OK);
    }
    struct ixl_backend *bs[] = {b};
    struct ixl_xfer_params p = {
        .field_mask = IXL_XFER_F_BACKENDS | IXL_XFER_F_NO_MERGE, .backends = bs, .n_backends = 1};
    struct ixl_xfer *x = NULL;
    CHECK_RC(ixl_xfer_create(a, op, lv, lf, "gds-sim", &p, &x), IXL_OK);
    struct ixl_cost c = {.size = sizeof(c)};
    CHECK_RC(ixl_xfer_estimate(x, &c), IXL_OK);
    CHECK(c.duration_us > 0);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS); /* the pool or batch thread moves it */
    CHECK_RC(ixl_xfer_wait(x, 30000), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(strcmp(info.path, want_path) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(lv);
    ixl_dlist_destroy(lf);
    /* Check each segment where it landed; the rest of the destination keeps the poison. */
    if (op == IXL_OP_WRITE)
        CHECK(pread(fd, back, span, 0) == (ssize_t)span);
    else
        CHECK_RC(ixl_device_copy(back, vram, span), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *src = host + (op == IXL_OP_WRITE ? segs[i].voff : segs[i].foff);
        uint8_t *dst = back + (op == IXL_OP_WRITE ? segs[i].foff : segs[i].voff);
        if (memcmp(src, dst, segs[i].len) != 0)
            check_fail(__FILE__, __LINE__, "%s of segment %zu (%" PRIu64 " bytes): data differ",
                       op == IXL_OP_WRITE ? "WRITE" : "READ", i, segs[i].len);
        memset(dst, 0xEE, segs[i].len); /* checked: what is left must be poison */
    }
    for (size_t i = 0; i < span; i++)
        if (back[i] != 0xEE)
            check_fail(__FILE__, __LINE__, "%s: byte %zu outside the segments was written",
                       op == IXL_OP_WRITE ? "WRITE" : "READ", i);
}

static void run(const char *name, bool path_mode, const char *want_path)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("gds-sim", &ap, &a), IXL_OK);
    struct ixl_kv kv[] = {{"library", IXL_CUFILESIM_PATH}};
    struct ixl_backend *b = NULL;
    int rc = ixl_backend_create(a, name, kv, 1, &b);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: %s", name, ixl_agent_last_error(a));
    void *vram = NULL;
    CHECK_RC(ixl_device_alloc(0, VRAM_LEN, &vram), IXL_OK);
    struct ixl_reg_desc v = {(uint64_t)(uintptr_t)vram, VRAM_LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_VRAM, &v, 1, NULL), IXL_OK);
    char path[128];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    uint64_t fdev = (uint64_t)fd;
    struct ixl_reg_desc f = {0, 0, (uint64_t)fd, NULL, 0};
    char mode[160];
    if (path_mode) {
        snprintf(mode, sizeof(mode), "rw:%s", path);
        f = (struct ixl_reg_desc){0, 0, IXL_DEV_NONE, mode, strlen(mode)};
    }
    struct ixl_reg_params rp = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = &fdev};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &f, 1, &rp), IXL_OK);

    /* {VRAM offset, file offset, bytes} */
    const struct seg one[] = {{0, 0, 1 * MiB}};
    const struct seg sixteen[] = {{0, 0, 16 * MiB}};
    const struct seg odd[] = {
        {4096, 8 * MiB, 3 * MiB + 4096}, {16 * MiB, 0, 4096}, {12 * MiB, 1 * MiB, 2 * MiB + 8192}};
    uint32_t seed = 7;
    for (int op = 0; op < 2; op++) {
        enum ixl_op o = op ? IXL_OP_READ : IXL_OP_WRITE;
        xfer(a, b, vram, fd, fdev, o, one, 1, want_path, seed++);
        /* The 16 MiB case is the plain and ASan builds' (TSan: its threads are exercised as
         * well by the others, whose 3 MiB descriptor is split too). */
        if (!shorten && !under_tsan)
            xfer(a, b, vram, fd, fdev, o, sixteen, 1, want_path, seed++);
        xfer(a, b, vram, fd, fdev, o, odd, 3, want_path, seed++);
    }

    /* A READ past the end of the file fails and says so. */
    CHECK(ftruncate(fd, 1 * MiB) == 0);
    struct ixl_dlist *lv, *lf;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &lv), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &lf), IXL_OK);
    struct ixl_desc dv = {(uint64_t)(uintptr_t)vram, 2 * MiB, 0}, df = {0, 2 * MiB, fdev};
    CHECK_RC(ixl_dlist_add(lv, &dv, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(lf, &df, 1), IXL_OK);
    struct ixl_backend *bs[] = {b};
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_BACKENDS, .backends = bs, .n_backends = 1};
    struct ixl_xfer *x = NULL;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_READ, lv, lf, "gds-sim", &p, &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 30000), IXL_ERR_IO);
    CHECK_STR_HAS(ixl_agent_last_error(a), "end of the file");
    CHECK_STR_HAS(ixl_agent_last_error(a), path);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* The seeds' troubleshooting: a notification asked of a storage backend, the wrong agent
     * name for a loopback storage transfer. */
    struct ixl_xfer_params pn = {.field_mask = IXL_XFER_F_BACKENDS | IXL_XFER_F_NOTIF,
                                 .backends = bs,
                                 .n_backends = 1,
                                 .notif = "n",
                                 .notif_len = 1};
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, lv, lf, "gds-sim", &pn, &x),
             IXL_ERR_NOTIF_UNSUPPORTED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "omit the notification");
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, lv, lf, "other-agent", &p, &x), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(ixl_agent_last_error(a), "own name 'gds-sim'");
    ixl_dlist_destroy(lv);
    ixl_dlist_destroy(lf);

    struct ixl_reg_desc fd_desc = f;
    fd_desc.dev = fdev;
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &fd_desc, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &v, 1, NULL), IXL_OK);
    CHECK_RC(ixl_backend_destroy(b), IXL_OK);
    ixl_agent_destroy(a);
    close(fd);
    unlink(path);
    CHECK_RC(ixl_device_free(vram), IXL_OK);
}

/* The core's automatic choice (no backend named) follows the backends' estimates from a cost
 * table: GDS fastest at 1 MiB, GDS_MT at 16 MiB, POSIX's staged path slowest (in this table). */
static void choice(void)
{
    char table[128];
    snprintf(table, sizeof(table), "%s/cost_table", dir);
    FILE *t = fopen(table, "w");
    CHECK(t != NULL);
    fprintf(t, "ixl-cost-table 1\n"
               "GDS    batch.compat WRITE 1M  9\nGDS    batch.compat WRITE 16M 1\n"
               "GDS_MT mt.compat    WRITE 1M  1\nGDS_MT mt.compat    WRITE 16M 9\n"
               "POSIX  staged       WRITE 1M  0.5\nPOSIX  staged       WRITE 16M 0.5\n");
    fclose(t);
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("gds-choice", &ap, &a), IXL_OK);
    const char *names[] = {"POSIX", "GDS", "GDS_MT"};
    struct ixl_backend *b[3];
    for (int i = 0; i < 3; i++) {
        struct ixl_kv kv[] = {{"cost_table", table}, {"library", IXL_CUFILESIM_PATH}};
        if (ixl_backend_create(a, names[i], kv, i == 0 ? 1 : 2, &b[i]) != IXL_OK)
            check_fail(__FILE__, __LINE__, "%s: %s", names[i], ixl_agent_last_error(a));
    }
    void *vram = NULL;
    CHECK_RC(ixl_device_alloc(0, 16 * MiB, &vram), IXL_OK);
    struct ixl_reg_desc v = {(uint64_t)(uintptr_t)vram, 16 * MiB, 0, NULL, 0};
    /* GDS and GDS_MT both register the tensor with cuFile: the second is told it already is
     * (as cuFile on an H200), uses it as registered and leaves its deregistration to the first. */
    uint64_t s0[STATS], s1[STATS];
    stats(s0);
    logged[0] = '\0';
    ixl_log_set_level(IXL_LOG_INFO);
    ixl_log_set_sink(log_sink, NULL);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_VRAM, &v, 1, NULL), IXL_OK);
    ixl_log_set_sink(NULL, NULL);
    ixl_log_set_level(IXL_LOG_WARN);
    stats(s1);
    CHECK(s1[6] - s0[6] == 1 && s1[8] - s0[8] == 1);
    CHECK_STR_HAS(logged, "already registered with cuFile");
    CHECK(strstr(logged, "bounce buffers") == NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/choice.bin", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    struct ixl_reg_desc f = {0, 0, (uint64_t)fd, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &f, 1, NULL), IXL_OK);
    const uint64_t sizes[] = {1 * MiB, 16 * MiB};
    const char *want[] = {"GDS", "GDS_MT"};
    for (int i = 0; i < 2; i++) {
        struct ixl_dlist *lv, *lf;
        CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &lv), IXL_OK);
        CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &lf), IXL_OK);
        struct ixl_desc dv = {(uint64_t)(uintptr_t)vram, sizes[i], 0}, df = {0, sizes[i], f.dev};
        CHECK_RC(ixl_dlist_add(lv, &dv, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(lf, &df, 1), IXL_OK);
        struct ixl_xfer *x = NULL;
        CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, lv, lf, "gds-choice", NULL, &x), IXL_OK);
        struct ixl_xfer_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
        if (strcmp(info.backend, want[i]) != 0)
            check_fail(__FILE__, __LINE__, "%" PRIu64 " bytes went to %s, want %s", sizes[i],
                       info.backend, want[i]);
        if (i == 0) { /* it runs there (the data paths are checked above) */
            CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
            CHECK_RC(ixl_xfer_wait(x, 30000), IXL_OK);
        }
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        ixl_dlist_destroy(lv);
        ixl_dlist_destroy(lf);
    }
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &f, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &v, 1, NULL), IXL_OK);
    stats(s1);
    CHECK(s1[7] == s0[7] && s1[8] == s0[8]); /* deregistered once, by its owner */
    ixl_agent_destroy(a);
    close(fd);
    unlink(path);
    unlink(table);
    CHECK_RC(ixl_device_free(vram), IXL_OK);
}

int main(int argc, char **argv)
{
    shorten = argc > 1 && strcmp(argv[1], "short") == 0;
    if (shorten)
        setenv("IXL_CUFILESIM_SHORT", "1", 1);
    char why[256];
    if (ixl_device_count(why, sizeof(why)) <= 0)
        check_fail(__FILE__, __LINE__, "the simulated device is not there: %s", why);
    snprintf(dir, sizeof(dir), "/tmp/ixl_gds_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    host = malloc(VRAM_LEN);
    back = malloc(VRAM_LEN);
    CHECK(host && back);

    uint64_t s1[STATS], s2[STATS], s3[STATS];
    /* A cuFile that refuses batch I/O (compatibility mode): GDS is unavailable, saying so. */
    {
        struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
        struct ixl_agent *a = NULL;
        CHECK_RC(ixl_agent_create("gds-nobatch", &ap, &a), IXL_OK);
        struct ixl_kv kv[] = {{"library", IXL_CUFILESIM_PATH}};
        struct ixl_backend *b = NULL;
        setenv("IXL_CUFILESIM_NOBATCH", "1", 1);
        CHECK_RC(ixl_backend_create(a, "GDS", kv, 1, &b), IXL_ERR_NOT_SUPPORTED);
        CHECK_STR_HAS(ixl_agent_last_error(a), "Error in setting up Batch");
        CHECK_STR_HAS(ixl_agent_last_error(a), "CU_FILE_BATCH_NOCOMPAT_ERROR");
        CHECK_STR_HAS(ixl_agent_last_error(a), "use GDS_MT");
        unsetenv("IXL_CUFILESIM_NOBATCH");
        ixl_agent_destroy(a);
    }
    /* A file cuFile cannot serve (IXL_CUFILESIM_NOFILE): registered with every backend, GDS
     * is left out for it and POSIX takes it; named alone, GDS refuses it saying why. */
    {
        struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "POSIX"};
        struct ixl_agent *a = NULL;
        CHECK_RC(ixl_agent_create("gds-nofile", &ap, &a), IXL_OK);
        struct ixl_kv kv[] = {{"library", IXL_CUFILESIM_PATH}};
        struct ixl_backend *g = NULL;
        CHECK_RC(ixl_backend_create(a, "GDS", kv, 1, &g), IXL_OK);
        char path[300];
        snprintf(path, sizeof(path), "%s/nofile", dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fd >= 0);
        CHECK(ftruncate(fd, 1 << 20) == 0);
        setenv("IXL_CUFILESIM_NOFILE", "1", 1);
        struct ixl_reg_desc rf = {0, 1 << 20, (uint64_t)fd, NULL, 0};
        struct ixl_reg_params only = {
            .field_mask = IXL_REG_F_BACKENDS, .backends = &g, .n_backends = 1};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &rf, 1, &only), IXL_ERR_NOT_SUPPORTED);
        CHECK_STR_HAS(ixl_agent_last_error(a), "cuFile cannot serve this file");
        CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &rf, 1, NULL), IXL_OK); /* POSIX took it */
        CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &rf, 1, NULL), IXL_OK);
        unsetenv("IXL_CUFILESIM_NOFILE");
        ixl_agent_destroy(a);
        close(fd);
        unlink(path);
    }
    run("GDS", true, "batch.compat");
    stats(s1);
    CHECK(s1[2] > 0 && s1[3] > 0); /* batch entries and batches */
    CHECK(s1[4] <= 1 * MiB);       /* none over the per-buffer size */
    CHECK(s1[5] == 0);             /* every call had a context */
    CHECK(s1[0] + s1[1] == s1[2]); /* GDS moved everything through batches */
    run("GDS_MT", false, "mt.compat");
    stats(s2);
    CHECK(s2[2] == s1[2]); /* GDS_MT: no batch */
    CHECK(s2[0] + s2[1] > s1[0] + s1[1]);
    CHECK(s2[5] == 0);
    CHECK(s2[6] == 0 && s2[7] == 0); /* one backend an agent: no double registration */
    if (!shorten)
        choice();
    /* Every registration undone, none twice (agents destroyed deregister what they hold). */
    stats(s3);
    CHECK(s3[7] == 0);
    CHECK(s3[8] == 0);
    printf("batch entries %" PRIu64 " (at most %" PRIu64 " bytes), GDS_MT I/Os %" PRIu64 "\n",
           s1[2], s1[4], s2[0] + s2[1] - s1[0] - s1[1]);
    free(host);
    free(back);
    rmdir(dir);
    printf("ok\n");
    return 0;
}

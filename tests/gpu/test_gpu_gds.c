/*
 * GDS and GDS_MT on a real GPU (tests/gpu/README.md), against the raw baseline measured in the
 * same run: test_gpu_gds [LIBCUFILE [DIR]] (default libcufile.so.0 and the current directory).
 *
 * For each backend, WRITE (VRAM -> FILE) and READ (FILE -> VRAM) of one descriptor of 1, 16
 * and 64 MiB on a file in DIR (opened O_DIRECT when the file system allows it): first a checked
 * transfer (a fresh pattern at the source, the destination poisoned; the file read back with
 * pread, the device memory with cuMemcpy), then the bandwidth, the median of k posts of the
 * same request. The baseline moves the same bytes the way an application without GDS would:
 * cuMemcpy to pinned host memory then pwrite (WRITE), pread then cuMemcpy (READ), on the same
 * file descriptor (the automatic choice is test_gpu_storage's). Markdown on stdout.
 * Exits 77 without a GPU or without cuFile (LIBCUFILE "" or not loadable), 1 when a transfer
 * fails or its data differ (the report says which, with cuFile's error).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_common.h"

#define MiB (1024u * 1024u)
#define MAXLEN (64u * MiB)

static struct ixl_agent *agent;
static CUdeviceptr vram;
static uint8_t *pinned, *want;
static int fd;
static int failed;

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

static int rounds(size_t len)
{
    return len <= MiB ? 21 : len <= 16 * MiB ? 9 : 5;
}

/* The raw baseline: seconds per transfer of len bytes (median). */
static double raw(enum ixl_op op, size_t len)
{
    double t[32];
    int n = rounds(len);
    for (int i = 0; i < n; i++) {
        double t0 = gpu_now();
        if (op == IXL_OP_WRITE) {
            CU_CHECK(G.cuMemcpy((CUdeviceptr)(uintptr_t)pinned, vram, len));
            CU_CHECK(G.cuCtxSynchronize());
            CHECK(pwrite(fd, pinned, len, 0) == (ssize_t)len);
        } else {
            CHECK(pread(fd, pinned, len, 0) == (ssize_t)len);
            CU_CHECK(G.cuMemcpy(vram, (CUdeviceptr)(uintptr_t)pinned, len));
            CU_CHECK(G.cuCtxSynchronize());
        }
        t[i] = gpu_now() - t0;
    }
    return median(t, n);
}

/* One request of backend b: checked once, then timed. Returns the
 * seconds per transfer (median), 0 on failure (reported). */
static double run(struct ixl_backend *b, enum ixl_op op, size_t len, char *used, size_t used_len,
                  char *path, size_t path_len)
{
    struct ixl_dlist *lv, *lf;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &lv), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &lf), IXL_OK);
    struct ixl_desc dv = {vram, len, 0}, df = {0, len, (uint64_t)fd};
    CHECK_RC(ixl_dlist_add(lv, &dv, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(lf, &df, 1), IXL_OK);
    struct ixl_backend *bs[] = {b};
    struct ixl_xfer_params p = {
        .field_mask = b ? IXL_XFER_F_BACKENDS : 0, .backends = bs, .n_backends = b ? 1 : 0};
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(agent, op, lv, lf, "gds-gpu", &p, &x);
    ixl_dlist_destroy(lv);
    ixl_dlist_destroy(lf);
    if (rc != IXL_OK) {
        snprintf(used, used_len, "refused: %s", ixl_agent_last_error(agent));
        return 0;
    }
    struct ixl_xfer_info info = {.size = sizeof(info)};
    if (ixl_xfer_info(x, &info) == IXL_OK) {
        snprintf(used, used_len, "%s", info.backend);
    }
    /* Checked: a fresh pattern at the source, the destination poisoned. */
    gpu_pattern(want, len);
    if (op == IXL_OP_WRITE) {
        gpu_put(vram, want, len);
        memset(pinned, 0xEE, len);
        CHECK(pwrite(fd, pinned, len, 0) == (ssize_t)len);
    } else {
        memcpy(pinned, want, len);
        CHECK(pwrite(fd, pinned, len, 0) == (ssize_t)len);
        gpu_poison(vram, 0xEE, len);
    }
    double secs = 0;
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 60000);
    if (ixl_xfer_info(x, &info) == IXL_OK)
        snprintf(path, path_len, "%s", info.path);
    if (rc != IXL_OK) {
        snprintf(used + strlen(used), used_len - strlen(used), " FAILED: %s (%s)",
                 ixl_agent_last_error(agent), ixl_strerror(rc));
        goto out;
    }
    int ok;
    if (op == IXL_OP_WRITE) {
        CHECK(pread(fd, pinned, len, 0) == (ssize_t)len);
        ok = memcmp(pinned, want, len) == 0;
    } else {
        ok = gpu_equal(vram, want, len, "READ destination");
    }
    if (!ok) {
        snprintf(used + strlen(used), used_len - strlen(used), " DATA DIFFER");
        goto out;
    }
    double t[32];
    int n = rounds(len);
    for (int i = 0; i < n; i++) {
        double t0 = gpu_now();
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, 60000);
        t[i] = gpu_now() - t0;
        if (rc != IXL_OK) {
            snprintf(used + strlen(used), used_len - strlen(used), " FAILED in round %d: %s", i,
                     ixl_agent_last_error(agent));
            goto out;
        }
    }
    secs = median(t, n);
out:
    if (ixl_xfer_release(x) != IXL_OK)
        fprintf(stderr, "release: %s\n", ixl_agent_last_error(agent));
    return secs;
}

int main(int argc, char **argv)
{
    gpu_open();
    /* Under ctest (no arguments): the system's cuFile, a file in the current directory. */
    const char *lib = argc > 1 ? argv[1] : "libcufile.so.0";
    const char *dir = argc > 2 ? argv[2] : ".";
    void *h = lib[0] ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h == NULL) {
        fprintf(stderr, "SKIP: no cuFile (%s)\n", lib[0] ? dlerror() : "none found");
        return 77;
    }
    dlclose(h);
    char file[1024];
    snprintf(file, sizeof(file), "%s/gds.bin", dir);
    int direct = 1;
    fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) {
        direct = 0;
        fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    }
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, MAXLEN) == 0);
    CHECK(posix_memalign((void **)&pinned, 4096, MAXLEN) == 0);
    CHECK(posix_memalign((void **)&want, 4096, MAXLEN) == 0);
    CU_CHECK(G.cuMemHostRegister_v2(pinned, MAXLEN, 1 /* PORTABLE */));
    vram = gpu_alloc(MAXLEN);

    /* The agent's default backends (NET, POSIX) and both GDS backends on this cuFile. */
    CHECK_RC(ixl_agent_create("gds-gpu", NULL, &agent), IXL_OK);
    struct ixl_kv kv[] = {{"library", lib}};
    const char *names[] = {"GDS", "GDS_MT"};
    struct ixl_backend *bk[2] = {NULL, NULL};
    printf("### GDS and GDS_MT (cuFile %s), file %s%s\n\n", lib, file,
           direct ? " (O_DIRECT)" : " (no O_DIRECT here)");
    for (int i = 0; i < 2; i++) {
        if (ixl_backend_create(agent, names[i], kv, 1, &bk[i]) != IXL_OK) {
            printf("- %s: **not created**: %s\n", names[i], ixl_agent_last_error(agent));
            bk[i] = NULL;
            failed = 1;
        }
    }
    struct ixl_reg_desc rv = {vram, MAXLEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(agent, IXL_MEM_VRAM, &rv, 1, NULL), IXL_OK);
    struct ixl_reg_desc rf = {0, 0, (uint64_t)fd, NULL, 0};
    ixl_status frc = ixl_mem_register(agent, IXL_MEM_FILE, &rf, 1, NULL);
    if (frc == IXL_ERR_NOT_SUPPORTED) {
        /* cuFile itself refuses files here (even in compatibility mode): nothing to measure. */
        printf("- **cuFile serves no file here**: %s\n", ixl_agent_last_error(agent));
        fprintf(stderr, "SKIP: cuFile cannot serve a file on this machine: %s\n",
                ixl_agent_last_error(agent));
        return 77;
    }
    CHECK_RC(frc, IXL_OK);
    /* Registered with every backend: one that cuFile cannot serve the file for was left out
     * (IXL_ERR_NOT_SUPPORTED at registration). Probe each; none left: nothing to measure. */
    int held = 0;
    for (int i = 0; i < 2; i++) {
        if (bk[i] == NULL)
            continue;
        struct ixl_dlist *l, *r;
        CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &l), IXL_OK);
        CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &r), IXL_OK);
        struct ixl_desc ld = {vram, 4096, 0}, rd = {0, 4096, (uint64_t)fd};
        CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
        struct ixl_xfer_params p = {
            .field_mask = IXL_XFER_F_BACKENDS, .backends = &bk[i], .n_backends = 1};
        struct ixl_xfer *x = NULL;
        ixl_status st = ixl_xfer_create(agent, IXL_OP_WRITE, l, r, "gds-gpu", &p, &x);
        ixl_dlist_destroy(l);
        ixl_dlist_destroy(r);
        if (st == IXL_OK) {
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            held++;
        } else {
            printf("- %s: **serves no file here** (left out at registration; cuFile's refusal "
                   "is in the log): %s\n",
                   names[i], ixl_strerror(st));
            bk[i] = NULL;
        }
    }
    if (held == 0) {
        fprintf(stderr, "SKIP: cuFile serves no file on this machine (see the log)\n");
        return 77;
    }

    printf("\n| backend | path | op | size | GB/s | raw GB/s (cuMemcpy pinned + p%s%s) | "
           "ratio |\n|---|---|---|---|---|---|---|\n",
           "write/pread", direct ? ", O_DIRECT" : "");
    const size_t sizes[] = {1 * MiB, 16 * MiB, 64 * MiB};
    for (int s = 0; s < 3; s++) {
        for (int o = 0; o < 2; o++) {
            enum ixl_op op = o ? IXL_OP_READ : IXL_OP_WRITE;
            size_t len = sizes[s];
            double base = raw(op, len);
            double base_gbps = len / base / 1e9;
            for (int i = 0; i < 2; i++) {
                struct ixl_backend *b = bk[i];
                if (b == NULL)
                    continue;
                char used[1024] = "", path[64] = "";
                double t = run(b, op, len, used, sizeof(used), path, sizeof(path));
                char sz[32];
                gpu_size(len, sz, sizeof(sz));
                const char *label = names[i];
                if (t <= 0) {
                    failed = 1;
                    printf("| %s (%s) | %s | %s | %s | FAIL | %.2f | |\n", label, used, path,
                           o ? "READ" : "WRITE", sz, base_gbps);
                    continue;
                }
                double g = len / t / 1e9;
                printf("| %s%s%s | %s | %s | %s | %.2f | %.2f | %.2f |\n", label,
                       i == 2 ? ": " : "", i == 2 ? used : "", path, o ? "READ" : "WRITE", sz, g,
                       base_gbps, g / base_gbps);
                fflush(stdout);
            }
        }
    }
    printf("\nMedians of %d/%d/%d posts of one request (1/16/64 MiB); data checked before "
           "timing (pattern at the source, destination poisoned). The automatic choice and the "
           "calibrated table: test_gpu_storage / bench_storage.\n",
           rounds(MiB), rounds(16 * MiB), rounds(64 * MiB));
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_FILE, &rf, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_VRAM, &rv, 1, NULL), IXL_OK);
    ixl_agent_destroy(agent);
    close(fd);
    unlink(file);
    CU_CHECK(G.cuMemHostUnregister(pinned));
    gpu_free(vram);
    free(pinned);
    free(want);
    return failed;
}

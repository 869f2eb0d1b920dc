/*
 * bench_copy_kernel.c - the device layer's copy kernel (src/device/copy_kernel.cu) on a real
 * GPU, without ixl around it: where its time goes for a KV request's table of copies.
 *
 * Two 1 GiB cuMemAlloc buffers; a table of N entries of one size (4, 16 and 32 KiB: 65,536,
 * 32,768 and 32,768 entries), each from a random block of the source to a random block of the
 * destination (a permutation: no two entries write the same bytes). Rows, each the median of -r
 * timed runs after one untimed (cuEvent timing, launch to last copy):
 *   one, mapped      one launch reading the table from mapped pinned host memory (the layer's
 *                    table)
 *   one, copied      the table copied to device memory on the stream first (cuMemcpyAsync),
 *                    then one launch reading it there (the layer, for small entries)
 *   NET, mapped      NET's batches (1,024 entries, doubling to 8,192: net_dev.c) as launches
 *                    of the mapped table
 *   NET, copied      the same batches, each copied to device memory first
 *   one, device      one launch of a table already in device memory (the floor for the kernel)
 * and the baseline: cuMemcpyAsync of the whole 1 GiB, device to device (the copy engines).
 * GB/s = table bytes / time. Before timing, each kernel's copies are checked once (the
 * destination poisoned, every entry's bytes compared, sampled every 776 bytes).
 *
 * Usage: bench_copy_kernel [-r runs] [PTX-file ...]
 * Without a file it runs the kernel ixl embeds (copy_kernel_ptx.h); a file is another build of
 * an ixl_copy_batch(table, n) kernel to compare (nvcc -ptx). The driver: libcuda.so.1 (the
 * simulated device cannot time or run PTX). Exit status: 0, 1 when a call failed or a check
 * did not hold, 77 without a GPU.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/copy_kernel_ptx.h"
#include "device/cuda_api.h"

typedef CUresult ixl_cuEventElapsedTime_fn(float *ms, CUevent start, CUevent end);

static struct {
    ixl_cuInit_fn *cuInit;
    ixl_cuDeviceGet_fn *cuDeviceGet;
    ixl_cuDeviceGetName_fn *cuDeviceGetName;
    ixl_cuDeviceGetAttribute_fn *cuDeviceGetAttribute;
    ixl_cuDevicePrimaryCtxRetain_fn *cuDevicePrimaryCtxRetain;
    ixl_cuCtxSetCurrent_fn *cuCtxSetCurrent;
    ixl_cuMemAlloc_v2_fn *cuMemAlloc_v2;
    ixl_cuMemHostAlloc_fn *cuMemHostAlloc;
    ixl_cuMemHostGetDevicePointer_v2_fn *cuMemHostGetDevicePointer_v2;
    ixl_cuMemcpyHtoD_v2_fn *cuMemcpyHtoD_v2;
    ixl_cuMemcpyDtoH_v2_fn *cuMemcpyDtoH_v2;
    ixl_cuMemsetD8_v2_fn *cuMemsetD8_v2;
    ixl_cuMemcpyAsync_fn *cuMemcpyAsync;
    ixl_cuStreamCreate_fn *cuStreamCreate;
    ixl_cuStreamSynchronize_fn *cuStreamSynchronize;
    ixl_cuEventCreate_fn *cuEventCreate;
    ixl_cuEventRecord_fn *cuEventRecord;
    ixl_cuEventSynchronize_fn *cuEventSynchronize;
    ixl_cuEventElapsedTime_fn *cuEventElapsedTime;
    ixl_cuModuleLoadDataEx_fn *cuModuleLoadDataEx;
    ixl_cuModuleGetFunction_fn *cuModuleGetFunction;
    ixl_cuLaunchKernel_fn *cuLaunchKernel;
} F;

#define CK(call)                                                                       \
    do {                                                                               \
        CUresult r_ = (call);                                                          \
        if (r_ != CUDA_SUCCESS) {                                                      \
            fprintf(stderr, "bench_copy_kernel: %s: CUDA error %d\n", #call, (int)r_); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define BUF ((size_t)1 << 30)
#define THREADS 256u /* copy_kernel.cu's __launch_bounds__ */
#define SAMPLE 97    /* words between the checked ones */

struct entry {
    uint64_t dst, src, len;
};

static CUstream st;
static CUevent ev0, ev1;
static unsigned max_grid;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s == NULL || n < 0 || fread(s, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench_copy_kernel: cannot read %s\n", path);
        exit(1);
    }
    s[n] = '\0';
    fclose(f);
    return s;
}

/* The table's n entries by launches of `first` entries doubling to 8,192 (first 0: one launch),
 * each launch's entries copied from the mapped table to dev first when copied is set, else
 * read at tab (mapped or device); ms from the first launch to the last copy. */
static float run(CUfunction fn, const struct entry *host, CUdeviceptr tab, CUdeviceptr dev,
                 unsigned n, unsigned first, int copied)
{
    CK(F.cuEventRecord(ev0, st));
    for (unsigned k0 = 0, chunk = first ? first : n; k0 < n;) {
        unsigned nk = n - k0 < chunk ? n - k0 : chunk;
        CUdeviceptr t = tab + (CUdeviceptr)k0 * sizeof(struct entry);
        if (copied) {
            t = dev + (CUdeviceptr)k0 * sizeof(struct entry);
            CK(F.cuMemcpyAsync(t, (CUdeviceptr)(uintptr_t)(host + k0), nk * sizeof(struct entry),
                               st));
        }
        unsigned grid = nk < max_grid ? nk : max_grid;
        void *args[2] = {&t, &nk};
        CK(F.cuLaunchKernel(fn, grid, 1, 1, THREADS, 1, 1, 0, st, args, NULL));
        k0 += nk;
        if (chunk < 8192)
            chunk *= 2;
    }
    CK(F.cuEventRecord(ev1, st));
    CK(F.cuEventSynchronize(ev1));
    float ms = 0;
    CK(F.cuEventElapsedTime(&ms, ev0, ev1));
    return ms;
}

static uint64_t word(size_t i)
{
    return i * 0x9E3779B97F4A7C15ull + 1;
}

int main(int argc, char **argv)
{
    int reps = 15, opt;
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if (opt != 'r' || (reps = atoi(optarg)) < 1 || reps > 101) {
            fprintf(stderr, "usage: bench_copy_kernel [-r runs (1..101)] [PTX-file ...]\n");
            return 1;
        }
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "SKIP: no GPU driver (libcuda.so.1: %s)\n", dlerror());
        return 77;
    }
#define RESOLVE(name)                                               \
    do {                                                            \
        void *p_ = dlsym(lib, #name);                               \
        if (p_ == NULL) {                                           \
            fprintf(stderr, "SKIP: the driver has no %s\n", #name); \
            return 77;                                              \
        }                                                           \
        memcpy(&F.name, &p_, sizeof(p_));                           \
    } while (0)
    RESOLVE(cuInit);
    RESOLVE(cuDeviceGet);
    RESOLVE(cuDeviceGetName);
    RESOLVE(cuDeviceGetAttribute);
    RESOLVE(cuDevicePrimaryCtxRetain);
    RESOLVE(cuCtxSetCurrent);
    RESOLVE(cuMemAlloc_v2);
    RESOLVE(cuMemHostAlloc);
    RESOLVE(cuMemHostGetDevicePointer_v2);
    RESOLVE(cuMemcpyHtoD_v2);
    RESOLVE(cuMemcpyDtoH_v2);
    RESOLVE(cuMemsetD8_v2);
    RESOLVE(cuMemcpyAsync);
    RESOLVE(cuStreamCreate);
    RESOLVE(cuStreamSynchronize);
    RESOLVE(cuEventCreate);
    RESOLVE(cuEventRecord);
    RESOLVE(cuEventSynchronize);
    RESOLVE(cuEventElapsedTime);
    RESOLVE(cuModuleLoadDataEx);
    RESOLVE(cuModuleGetFunction);
    RESOLVE(cuLaunchKernel);
    if (F.cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "SKIP: cuInit failed (no GPU)\n");
        return 77;
    }
    CUdevice dev;
    CUcontext ctx;
    int sms = 0;
    char name[128] = "";
    CK(F.cuDeviceGet(&dev, 0));
    CK(F.cuDeviceGetName(name, (int)sizeof(name), dev));
    CK(F.cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(F.cuCtxSetCurrent(ctx));
    CK(F.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    max_grid = sms > 0 ? (unsigned)sms * 16u : 1024u; /* as the device layer launches */
    CK(F.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(F.cuEventCreate(&ev0, 0));
    CK(F.cuEventCreate(&ev1, 0));
    CUdeviceptr src, dst;
    CK(F.cuMemAlloc_v2(&src, BUF));
    CK(F.cuMemAlloc_v2(&dst, BUF));
    uint64_t *h = malloc(BUF);
    float *t = malloc((size_t)reps * sizeof(float));
    if (h == NULL || t == NULL) {
        fprintf(stderr, "bench_copy_kernel: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < BUF / 8; i++)
        h[i] = word(i);
    CK(F.cuMemcpyHtoD_v2(src, h, BUF));

    int nk = argc - optind > 0 ? argc - optind : 1;
    CUfunction *fns = calloc((size_t)nk, sizeof(*fns));
    const char **names = calloc((size_t)nk, sizeof(*names));
    if (fns == NULL || names == NULL)
        return 1;
    for (int k = 0; k < nk; k++) {
        char *ptx = optind < argc ? read_file(argv[optind + k]) : NULL;
        CUmodule mod;
        CK(F.cuModuleLoadDataEx(&mod, ptx ? ptx : ixl_copy_kernel_ptx, 0, NULL, NULL));
        CK(F.cuModuleGetFunction(&fns[k], mod, "ixl_copy_batch"));
        names[k] = optind < argc ? argv[optind + k] : "ixl (copy_kernel_ptx.h)";
        free(ptx);
    }

    for (int r = 0; r < reps; r++) {
        CK(F.cuEventRecord(ev0, st));
        CK(F.cuMemcpyAsync(dst, src, BUF, st));
        CK(F.cuEventRecord(ev1, st));
        CK(F.cuEventSynchronize(ev1));
        CK(F.cuEventElapsedTime(&t[r], ev0, ev1));
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_float);
    printf("bench_copy_kernel: %s, %d multiprocessors, grid up to %u blocks of %u threads; medians "
           "of %d runs\n",
           name, sms, max_grid, THREADS, reps);
    printf("baseline: cuMemcpyAsync 1 GiB device to device: %.3f ms, %.0f GB/s\n\n", t[reps / 2],
           BUF / (t[reps / 2] * 1e6));

    const size_t sizes[] = {4096, 16384, 32768};
    const unsigned counts[] = {65536, 32768, 32768};
    const struct {
        const char *name;
        unsigned first;
        int table; /* 0 mapped, 1 copied first, 2 in device memory already */
    } rows[] = {{"one, mapped", 0, 0},
                {"one, copied", 0, 1},
                {"NET, mapped", 1024, 0},
                {"NET, copied", 1024, 1},
                {"one, device", 0, 2}};
    int bad = 0;
    printf("%-24s %6s %8s %-12s %9s %8s\n", "kernel", "entry", "entries", "table", "ms", "GB/s");
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        size_t sz = sizes[si], slots = BUF / sz;
        unsigned n = counts[si];
        struct entry *tab;
        CUdeviceptr mapped, devtab;
        CK(F.cuMemHostAlloc((void **)&tab, n * sizeof(*tab),
                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
        CK(F.cuMemHostGetDevicePointer_v2(&mapped, tab, 0));
        CK(F.cuMemAlloc_v2(&devtab, n * sizeof(*tab)));
        uint32_t *perm = malloc(slots * sizeof(*perm));
        if (perm == NULL)
            return 1;
        for (size_t i = 0; i < slots; i++)
            perm[i] = (uint32_t)i;
        srand(7);
        for (size_t i = slots - 1; i > 0; i--) {
            size_t j = ((size_t)rand() * 65536u + (size_t)rand()) % (i + 1);
            uint32_t x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (unsigned i = 0; i < n; i++)
            tab[i] = (struct entry){dst + (uint64_t)perm[i] * sz,
                                    src + (uint64_t)perm[(i + 7) % slots] * sz, sz};
        CK(F.cuMemcpyHtoD_v2(devtab, tab, n * sizeof(*tab)));
        for (int k = 0; k < nk; k++) {
            /* Checked once: every entry's sampled words where the table says. */
            CK(F.cuMemsetD8_v2(dst, 0xEE, BUF));
            run(fns[k], tab, mapped, devtab, n, 0, 0);
            CK(F.cuMemcpyDtoH_v2(h, dst, BUF));
            size_t wrong = 0;
            for (unsigned i = 0; i < n; i++) {
                const uint64_t *got = h + (tab[i].dst - dst) / 8;
                size_t from = (tab[i].src - src) / 8;
                for (size_t w = 0; w < sz / 8; w += SAMPLE)
                    wrong += got[w] != word(from + w);
            }
            if (wrong) {
                printf("%-24s %5zuK: %zu sampled words wrong: CHECK FAILED\n", names[k], sz >> 10,
                       wrong);
                bad = 1;
                continue;
            }
            for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
                CUdeviceptr at = rows[ri].table == 2 ? devtab : mapped;
                run(fns[k], tab, at, devtab, n, rows[ri].first, rows[ri].table == 1);
                for (int r = 0; r < reps; r++)
                    t[r] = run(fns[k], tab, at, devtab, n, rows[ri].first, rows[ri].table == 1);
                qsort(t, (size_t)reps, sizeof(float), cmp_float);
                printf("%-24s %5zuK %8u %-12s %9.3f %8.0f\n", names[k], sz >> 10, n, rows[ri].name,
                       t[reps / 2], n * (double)sz / (t[reps / 2] * 1e6));
            }
        }
        free(perm);
    }
    return bad;
}

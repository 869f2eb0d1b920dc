/* The real-GPU tests' driver access: see gpu_common.h. */
#include "gpu_common.h"

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

struct gpu G;

const char *gpu_err(CUresult r)
{
    const char *s = NULL;
    if (G.cuGetErrorName == NULL || G.cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL)
        return "unknown CUDA error";
    return s;
}

void gpu_check_at(const char *file, int line, const char *expr, CUresult r)
{
    if (r != CUDA_SUCCESS) {
        const char *text = NULL;
        if (G.cuGetErrorString == NULL || G.cuGetErrorString(r, &text) != CUDA_SUCCESS)
            text = NULL;
        check_fail(file, line, "%s returned %d (%s: %s)", expr, (int)r, gpu_err(r),
                   text ? text : "no description");
    }
}

void gpu_open(void)
{
    char why[512];
    /* ixl reads its configuration once, at its first call: none has been made yet. */
    const char *sim = getenv("IXL_CUDA_LIBRARY");
    if (sim != NULL && sim[0] != '\0') {
        fprintf(stderr, "IXL_CUDA_LIBRARY=%s ignored: these tests use the real driver\n", sim);
        unsetenv("IXL_CUDA_LIBRARY");
    }
    G.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (G.lib == NULL) {
        snprintf(why, sizeof(why), "no GPU driver: cannot load libcuda.so.1 (%s)", dlerror());
        skip(0, why);
    }
    /* Each entry point by its exported name; cuda_api.h lists them and their types. */
    struct {
        const char *name;
        void **slot;
    } fns[] = {
#define GPU_FN(name) {#name, (void **)&G.name},
        IXL_CUDA_LAYER_ENTRY_POINTS(GPU_FN) IXL_CUDA_OTHER_ENTRY_POINTS(GPU_FN)
#undef GPU_FN
            {"cuCtxSynchronize", (void **)&G.cuCtxSynchronize},
    };
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        *fns[i].slot = dlsym(G.lib, fns[i].name);
        if (*fns[i].slot == NULL) {
            snprintf(why, sizeof(why), "libcuda.so.1 has no %s: a driver too old", fns[i].name);
            skip(0, why);
        }
    }

    CUresult r = G.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(why, sizeof(why), "no GPU: cuInit returned %d (%s)", (int)r, gpu_err(r));
        skip(0, why);
    }
    CU_CHECK(G.cuDriverGetVersion(&G.driver_version));
    r = G.cuDeviceGetCount(&G.count);
    if (r != CUDA_SUCCESS || G.count < 1) {
        snprintf(why, sizeof(why), "no GPU: cuDeviceGetCount returned %d (%s), count %d", (int)r,
                 gpu_err(r), G.count);
        skip(0, why);
    }
    G.ordinal = 0;
    CU_CHECK(G.cuDeviceGet(&G.dev, G.ordinal));
    CU_CHECK(G.cuDeviceGetName(G.name, (int)sizeof(G.name), G.dev));
    CU_CHECK(G.cuDeviceTotalMem_v2(&G.total_mem, G.dev));
    CU_CHECK(
        G.cuDeviceGetAttribute(&G.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, G.dev));
    CU_CHECK(
        G.cuDeviceGetAttribute(&G.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, G.dev));
    CU_CHECK(G.cuDeviceGetAttribute(&G.vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                    G.dev));
    CU_CHECK(G.cuDeviceGetAttribute(
        &G.vmm_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, G.dev));
    CU_CHECK(G.cuDevicePrimaryCtxRetain(&G.ctx, G.dev));
    CU_CHECK(G.cuCtxSetCurrent(G.ctx));
    fprintf(stderr, "GPU %d of %d: %s, %.1f GiB, compute capability %d.%d, CUDA driver API %d.%d\n",
            G.ordinal, G.count, G.name, (double)G.total_mem / (1 << 30), G.cc_major, G.cc_minor,
            G.driver_version / 1000, G.driver_version % 1000 / 10);
}

CUdeviceptr gpu_alloc(size_t len)
{
    CUdeviceptr p = 0;
    CU_CHECK(G.cuMemAlloc_v2(&p, len));
    return p;
}

void gpu_free(CUdeviceptr p)
{
    if (p != 0)
        CU_CHECK(G.cuMemFree_v2(p));
}

static void vmm_prop(CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes =
        G.vmm_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = G.ordinal;
}

void gpu_vmm_alloc(struct gpu_vmm *v, size_t len, size_t nchunks)
{
    CHECK(G.vmm);
    CHECK(nchunks >= 1 && nchunks <= sizeof(v->h) / sizeof(v->h[0]));
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    size_t gran = 0;
    CU_CHECK(G.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran > 0);
    size_t chunk = (len / nchunks + gran - 1) / gran * gran;
    memset(v, 0, sizeof(*v));
    v->chunk = chunk;
    v->n = nchunks;
    v->len = chunk * nchunks;
    CU_CHECK(G.cuMemAddressReserve(&v->ptr, v->len, 0, 0, 0));
    /* Mapped, and its access set, one physical allocation at a time (as PyTorch's expandable
     * segments grow). */
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (size_t i = 0; i < nchunks; i++) {
        CU_CHECK(G.cuMemCreate(&v->h[i], chunk, &prop, 0));
        CU_CHECK(G.cuMemMap(v->ptr + i * chunk, chunk, 0, v->h[i], 0));
        CU_CHECK(G.cuMemSetAccess(v->ptr + i * chunk, chunk, &acc, 1));
    }
}

void gpu_vmm_free(struct gpu_vmm *v)
{
    if (v->ptr == 0)
        return;
    CU_CHECK(G.cuCtxSynchronize());
    for (size_t i = 0; i < v->n; i++) {
        CU_CHECK(G.cuMemUnmap(v->ptr + i * v->chunk, v->chunk));
        CU_CHECK(G.cuMemRelease(v->h[i]));
    }
    CU_CHECK(G.cuMemAddressFree(v->ptr, v->len));
    memset(v, 0, sizeof(*v));
}

void gpu_pattern(void *buf, size_t len)
{
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x =
        ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (++counter * 0x9E3779B97F4A7C15ull);
    x |= 1;
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < len; i++)
        p[i] = (uint8_t)(x >> (8 * (i % 8)));
}

void gpu_put(CUdeviceptr dst, const void *src, size_t len)
{
    CU_CHECK(G.cuMemcpyHtoD_v2(dst, src, len));
    CU_CHECK(G.cuCtxSynchronize());
}

void gpu_get(void *dst, CUdeviceptr src, size_t len)
{
    CU_CHECK(G.cuCtxSynchronize());
    CU_CHECK(G.cuMemcpyDtoH_v2(dst, src, len));
    CU_CHECK(G.cuCtxSynchronize());
}

void gpu_poison(CUdeviceptr dst, unsigned char b, size_t len)
{
    CU_CHECK(G.cuMemsetD8_v2(dst, b, len));
    CU_CHECK(G.cuCtxSynchronize());
}

int gpu_equal(CUdeviceptr dev, const void *want, size_t len, const char *what)
{
    uint8_t *got = malloc(len ? len : 1);
    CHECK(got != NULL);
    gpu_get(got, dev, len);
    const uint8_t *w = want;
    int ok = 1;
    for (size_t i = 0; i < len; i++)
        if (got[i] != w[i]) {
            size_t bad = 0;
            for (size_t j = i; j < len; j++)
                bad += got[j] != w[j];
            fprintf(stderr, "FAIL: %s: byte %zu of %zu is 0x%02x, want 0x%02x (%zu bytes differ)\n",
                    what, i, len, got[i], w[i], bad);
            ok = 0;
            break;
        }
    free(got);
    return ok;
}

int gpu_all(CUdeviceptr dev, unsigned char b, size_t len, const char *what)
{
    uint8_t *want = malloc(len ? len : 1);
    CHECK(want != NULL);
    memset(want, b, len);
    int ok = gpu_equal(dev, want, len, what);
    free(want);
    return ok;
}

double gpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *gpu_size(size_t n, char *buf, size_t cap)
{
    if (n >= (1u << 30) && n % (1u << 30) == 0)
        snprintf(buf, cap, "%zu GiB", n >> 30);
    else if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu B", n);
    return buf;
}

/*
 * The real-GPU tests' access to the CUDA driver (tests/gpu/README.md): libcuda.so.1 loaded with
 * dlopen, as ixl's device layer loads it, through the project's own declarations
 * (src/device/cuda_api.h), so that the tests build without the CUDA toolkit. The tests prepare
 * and check device memory with the driver directly (cuMemAlloc, cuMemCreate/cuMemMap,
 * cuMemcpy), never through ixl, and compare ixl's transfers against cuMemcpy.
 */
#ifndef IXL_TEST_GPU_COMMON_H
#define IXL_TEST_GPU_COMMON_H

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "device/cuda_api.h"

/* Not in cuda_api.h's subset (ixl does not use it): waits for all work of the current
 * context. */
typedef CUresult gpu_cuCtxSynchronize_fn(void);

struct gpu {
    void *lib;
#define GPU_FN(name) ixl_##name##_fn *name;
    IXL_CUDA_LAYER_ENTRY_POINTS(GPU_FN)
    IXL_CUDA_OTHER_ENTRY_POINTS(GPU_FN)
#undef GPU_FN
    gpu_cuCtxSynchronize_fn *cuCtxSynchronize;
    int ordinal; /* the device the tests use: 0 */
    int count;   /* devices the driver shows */
    CUdevice dev;
    CUcontext ctx; /* the device's primary context, current on the main thread */
    int driver_version;
    char name[256];
    size_t total_mem;
    int cc_major, cc_minor;
    int vmm;    /* VMM supported (cuMemCreate) */
    int vmm_fd; /* POSIX fd handles supported */
};

extern struct gpu G;

/*
 * Opens the real driver and its device 0 and makes its primary context current, or exits 77
 * (a skip, allowed under CI=true: CI has no GPU) saying why there is none. Call it first:
 * it drops IXL_CUDA_LIBRARY from the environment before ixl reads its configuration, so that
 * ixl's device layer loads the same driver (these tests never run on the simulated device).
 */
void gpu_open(void);

/* The driver's name for a result ("CUDA_ERROR_INVALID_VALUE"), never NULL. */
const char *gpu_err(CUresult r);

/* CU_CHECK(call): the driver call must return CUDA_SUCCESS (else the test fails, naming it). */
#define CU_CHECK(expr) gpu_check_at(__FILE__, __LINE__, #expr, (expr))
void gpu_check_at(const char *file, int line, const char *expr, CUresult r);

/* Device memory from cuMemAlloc. */
CUdeviceptr gpu_alloc(size_t len);
void gpu_free(CUdeviceptr p);

/*
 * Device memory from the VMM API, as PyTorch's expandable segments make it: an address range
 * reserved once, physical allocations (cuMemCreate, requested handle type POSIX fd when the
 * device supports it) mapped into it side by side, read-write access set for the device.
 */
struct gpu_vmm {
    CUdeviceptr ptr;
    size_t len;   /* reserved and mapped bytes */
    size_t chunk; /* bytes per physical allocation */
    size_t n;     /* physical allocations */
    CUmemGenericAllocationHandle h[8];
};
/* len rounded up to the granularity, made of nchunks (1..8) physical allocations. */
void gpu_vmm_alloc(struct gpu_vmm *v, size_t len, size_t nchunks);
void gpu_vmm_free(struct gpu_vmm *v);

/* A fresh pseudo-random pattern (seeded from the clock and a counter) in a host buffer. */
void gpu_pattern(void *buf, size_t len);
/* Host <-> device through the driver (cuMemcpy, then a context synchronize). */
void gpu_put(CUdeviceptr dst, const void *src, size_t len);
void gpu_get(void *dst, CUdeviceptr src, size_t len);
/* Fills device memory with byte b (cuMemsetD8, then a context synchronize). */
void gpu_poison(CUdeviceptr dst, unsigned char b, size_t len);
/* 1 when dev[0..len) equals want[0..len); else prints the first difference as what and
 * returns 0. */
int gpu_equal(CUdeviceptr dev, const void *want, size_t len, const char *what);
/* 1 when dev[0..len) holds only byte b; else prints where it does not and returns 0. */
int gpu_all(CUdeviceptr dev, unsigned char b, size_t len, const char *what);

/* Monotonic time in seconds. */
double gpu_now(void);

/* A human size ("64 KiB", "256 MiB"). */
const char *gpu_size(size_t n, char *buf, size_t cap);

#endif

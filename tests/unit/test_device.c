/*
 * The device layer (src/device/, docs/device.md) against the simulated driver (tests/sim):
 * devices, classification (host, device, inside an allocation, past its end, another device,
 * VMM mappings side by side), copies H2D / D2D / D2H on a stream with events in flight then
 * done, IPC export cached per allocation, host pinning, a thread that never touched CUDA,
 * the caller's context left as it was, VRAM registration refusals through ixl_mem_register,
 * another process opening an IPC export (this binary run again), and in child processes: no driver,
 * no device, the stub, an injected copy failure, and a CPU access to device memory (it faults).
 *
 * ctest runs it with IXL_CUDA_LIBRARY = the sim, IXL_CUDASIM_DEVICES=2 and
 * IXL_CUDASIM_DELAY_US=30000 (each copy takes 30 ms, so a copy is reliably in flight).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
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
#include "device/cuda_api.h"
#include "device/device.h"

#define MB ((size_t)1 << 20)

static const struct ixl_devops *ops;

/* The sim's own entry points, for what an application does itself (VMM, its own context). */
static struct {
    ixl_cuDevicePrimaryCtxRetain_fn *cuDevicePrimaryCtxRetain;
    ixl_cuCtxSetCurrent_fn *cuCtxSetCurrent;
    ixl_cuCtxGetCurrent_fn *cuCtxGetCurrent;
    ixl_cuMemGetAllocationGranularity_fn *cuMemGetAllocationGranularity;
    ixl_cuMemCreate_fn *cuMemCreate;
    ixl_cuMemRelease_fn *cuMemRelease;
    ixl_cuMemAddressReserve_fn *cuMemAddressReserve;
    ixl_cuMemAddressFree_fn *cuMemAddressFree;
    ixl_cuMemMap_fn *cuMemMap;
    ixl_cuMemUnmap_fn *cuMemUnmap;
    ixl_cuMemSetAccess_fn *cuMemSetAccess;
} cu;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL)
        check_fail(__FILE__, __LINE__, "the sim lacks %s", name);
    return p;
}

static void load_sim(void)
{
    const char *path = ixl_config_value("IXL_CUDA_LIBRARY");
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the layer loaded it: the same one */
    if (lib == NULL)
        check_fail(__FILE__, __LINE__, "%s is not loaded: %s", path, dlerror());
#define LOAD(n) memcpy(&cu.n, &(void *){sym(lib, #n)}, sizeof(void *))
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxGetCurrent);
    LOAD(cuMemGetAllocationGranularity);
    LOAD(cuMemCreate);
    LOAD(cuMemRelease);
    LOAD(cuMemAddressReserve);
    LOAD(cuMemAddressFree);
    LOAD(cuMemMap);
    LOAD(cuMemUnmap);
    LOAD(cuMemSetAccess);
#undef LOAD
}

static struct ixl_agent *make_agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static int reg_vram(struct ixl_agent *a, uint64_t addr, uint64_t len, uint64_t dev)
{
    struct ixl_reg_desc d = {addr, len, dev, NULL, 0};
    return ixl_mem_register(a, IXL_MEM_VRAM, &d, 1, NULL);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131u + seed * 7u + 1u);
}

/* ---- child processes: what the layer says without a usable driver ----------------------- */

static char logged[8192];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

static void child_no_gpu(const char *needle)
{
    char why[512];
    CHECK_RC(ixl_device_count(why, sizeof(why)), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(why, needle);
    CHECK_RC(ixl_device_count(NULL, 0), IXL_ERR_NOT_SUPPORTED); /* cached, why optional */
    void *p;
    CHECK_RC(ixl_device_alloc(0, 4096, &p), IXL_ERR_NOT_SUPPORTED);
    struct ixl_device_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_device_info(0, &info), IXL_ERR_NOT_SUPPORTED);
    /* Host memory stays host memory for plugins: DRAM paths need no driver. */
    const struct ixl_devops *o = ixl_dev_ops();
    struct ixl_dev_ptr dp = {.size = sizeof(dp)};
    CHECK_RC(o->classify(o->ctx, why, sizeof(why), &dp, NULL, 0), IXL_OK);
    CHECK(dp.ordinal == -1);
    CHECK(o->count(o->ctx, why, sizeof(why)) == IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(why, needle);
    /* VRAM registration is refused before any backend sees it, saying why. */
    struct ixl_agent *a = make_agent("nogpu");
    CHECK_RC(reg_vram(a, 0x10000, 4096, 0), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "cannot register VRAM");
    CHECK_STR_HAS(ixl_agent_last_error(a), needle);
    /* DRAM registration is untouched. */
    static char host[4096];
    struct ixl_reg_desc d = {(uintptr_t)host, sizeof(host), 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
}

/* The Nth copy fails (IXL_CUDASIM_FAIL_COPY=2): the event after it says so, with the
 * driver's error name in the log. */
static void child_copy_fails(void)
{
    ixl_log_set_sink(log_sink, NULL);
    void *d;
    CHECK_RC(ixl_device_alloc(0, 4096, &d), IXL_OK);
    unsigned char src[4096];
    fill(src, sizeof(src), 1);
    CHECK_RC(ixl_device_copy(d, src, sizeof(src)), IXL_OK); /* copy 1 */
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    CHECK_RC(ops->copy(ops->ctx, s, src, d, sizeof(src)), IXL_OK); /* copy 2: fails later */
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    CHECK_RC(ops->wait(ops->ctx, e), IXL_ERR_BACKEND);
    CHECK_RC(ops->query(ops->ctx, e), IXL_ERR_BACKEND);
    pthread_mutex_lock(&log_mu);
    CHECK_STR_HAS(logged, "CUDA_ERROR_ILLEGAL_ADDRESS");
    pthread_mutex_unlock(&log_mu);
    ops->event_destroy(ops->ctx, e);
    ops->stream_destroy(ops->ctx, s);
}

/* The children's device table (check_in_child's setup). */
static void set_ops(void)
{
    ops = ixl_dev_ops();
}

static void in_child(const char *lib, const char *name, const char *value, void (*fn)(const char *),
                     const char *arg, int sig)
{
    check_in_child(lib, name, value, set_ops, fn, arg, sig);
}

static void run_copy_fails(const char *arg)
{
    (void)arg;
    child_copy_fails();
}

/* Reading device memory with the CPU, as code that forgot the device layer would: faults. */
static void run_touch(const char *arg)
{
    (void)arg;
    void *d;
    CHECK_RC(ixl_device_alloc(0, 4096, &d), IXL_OK);
    signal(SIGSEGV, SIG_DFL);
    volatile unsigned char *p = d;
    unsigned char v = p[0];
    fprintf(stderr, "read device memory from the CPU: %u\n", v);
    _exit(0);
}

/* ---- with the simulated driver ---------------------------------------------------------- */

static void test_devices(void)
{
    char why[256] = "x";
    CHECK(ixl_device_count(why, sizeof(why)) == 2);
    CHECK(why[0] == '\0');
    int v = 0;
    CHECK_RC(ixl_device_driver_version(&v), IXL_OK);
    CHECK(v >= 11000);
    for (int d = 0; d < 2; d++) {
        struct ixl_device_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_device_info(d, &info), IXL_OK);
        CHECK(info.size == sizeof(info));
        CHECK(info.ordinal == d);
        CHECK(info.name[0] != '\0');
        CHECK(info.total_mem > 0);
        CHECK(info.cc_major > 0);
    }
    struct ixl_device_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_device_info(2, &info), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_device_info(-1, &info), IXL_ERR_INVALID_ARG);
    info.size = 8;
    CHECK_RC(ixl_device_info(0, &info), IXL_ERR_INVALID_ARG);
    CHECK(ops->count(ops->ctx, NULL, 0) == 2);
    void *p;
    CHECK_RC(ixl_device_alloc(2, 4096, &p), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_device_alloc(0, 0, &p), IXL_ERR_INVALID_ARG);
}

static void test_classify(void *d0, void *d1)
{
    char why[512];
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    unsigned char *host = calloc(1, 4096);
    CHECK(host != NULL);
    CHECK_RC(ops->classify(ops->ctx, host, 4096, &p, why, sizeof(why)), IXL_OK);
    CHECK(p.ordinal == -1);
    free(host);

    uint64_t b0 = (uintptr_t)d0;
    CHECK_RC(ops->classify(ops->ctx, (char *)d0 + 4096, 4096, &p, why, sizeof(why)), IXL_OK);
    CHECK(p.ordinal == 0);
    CHECK(p.base == b0);
    CHECK(p.len >= MB);
    CHECK(p.buffer_id != 0);
    CHECK(p.flags & IXL_DEV_PTR_IPC_LEGACY);
    CHECK(!(p.flags & IXL_DEV_PTR_VMM));
    uint64_t id0 = p.buffer_id;
    CHECK_RC(ops->classify(ops->ctx, d1, MB, &p, why, sizeof(why)), IXL_OK);
    CHECK(p.ordinal == 1);
    CHECK(p.buffer_id != id0);
    /* The whole allocation, and one byte past it. */
    CHECK_RC(ops->classify(ops->ctx, d0, MB, &p, why, sizeof(why)), IXL_OK);
    why[0] = '\0';
    CHECK_RC(ops->classify(ops->ctx, (char *)d0 + MB - 10, 11, &p, why, sizeof(why)),
             IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(why, "runs past the end of its device allocation");
    p.size = 4;
    CHECK_RC(ops->classify(ops->ctx, d0, 16, &p, why, sizeof(why)), IXL_ERR_INVALID_ARG);
}

/* VMM memory as PyTorch's expandable segments make it: one reservation, mappings of one
 * granule each side by side, the last granule left unmapped. */
static void test_vmm(struct ixl_agent *a)
{
    CUcontext ctx;
    CHECK_RC(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_RC(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g = 0;
    CHECK_RC(cu.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             CUDA_SUCCESS);
    CHECK(g > 0);
    CUdeviceptr va;
    CHECK_RC(cu.cuMemAddressReserve(&va, 4 * g, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h[3];
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < 3; i++) {
        CHECK_RC(cu.cuMemCreate(&h[i], g, &prop, 0), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemMap(va + i * g, g, 0, h[i], 0), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemSetAccess(va + i * g, g, &acc, 1), CUDA_SUCCESS);
    }
    char why[512];
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    /* Inside one mapping. */
    CHECK_RC(ops->classify(ops->ctx, (void *)(uintptr_t)(va + 4096), 4096, &p, why, sizeof(why)),
             IXL_OK);
    CHECK(p.ordinal == 0);
    CHECK(p.flags & IXL_DEV_PTR_VMM);
    CHECK(!(p.flags & IXL_DEV_PTR_IPC_LEGACY));
    CHECK(p.base == va && p.len == g);
    /* Across two mappings, and across all three. */
    CHECK_RC(ops->classify(ops->ctx, (void *)(uintptr_t)(va + g / 2), g, &p, why, sizeof(why)),
             IXL_OK);
    CHECK(p.ordinal == 0 && p.base == va && p.len == 2 * g);
    CHECK_RC(ops->classify(ops->ctx, (void *)(uintptr_t)va, 3 * g, &p, why, sizeof(why)), IXL_OK);
    CHECK(p.len == 3 * g);
    /* Into the unmapped granule. */
    CHECK_RC(ops->classify(ops->ctx, (void *)(uintptr_t)(va + 2 * g), g + 1, &p, why, sizeof(why)),
             IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(why, "runs past the end");
    /* Not exportable with legacy IPC. */
    struct ixl_dev_ipc ipc;
    CHECK_RC(ops->ipc_export(ops->ctx, (void *)(uintptr_t)va, &ipc), IXL_ERR_NOT_SUPPORTED);
    /* Nor as a POSIX fd: created without that handle type (issue 20: NET refuses it). */
    int vfd = -1;
    uint64_t vb = 0, vl = 0;
    CHECK_RC(ops->vmm_export(ops->ctx, (void *)(uintptr_t)va, &vfd, &vb, &vl),
             IXL_ERR_NOT_SUPPORTED);
    CHECK(vfd == -1);
    /* With it: exported, imported (here: the sim maps the fd again), copied through, closed. */
    {
        CUmemAllocationProp xp = prop;
        xp.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        CUmemGenericAllocationHandle xh;
        CUdeviceptr xva;
        CHECK_RC(cu.cuMemAddressReserve(&xva, g, 0, 0, 0), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemCreate(&xh, g, &xp, 0), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemMap(xva, g, 0, xh, 0), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemSetAccess(xva, g, &acc, 1), CUDA_SUCCESS);
        CHECK_RC(ops->vmm_export(ops->ctx, (void *)(uintptr_t)(xva + 4096), &vfd, &vb, &vl),
                 IXL_OK);
        CHECK(vfd >= 0 && vb == xva && vl == g);
        void *imp = NULL;
        CHECK_RC(ops->vmm_open(ops->ctx, 0, vfd, vl, &imp), IXL_OK);
        unsigned char w[4096], r[4096];
        fill(w, sizeof(w), 21);
        memset(r, 0xEE, sizeof(r));
        CHECK_RC(ixl_device_copy((void *)(uintptr_t)(xva + 8192), w, sizeof(w)), IXL_OK);
        CHECK_RC(ixl_device_copy(r, (char *)imp + 8192, sizeof(r)), IXL_OK);
        CHECK(memcmp(w, r, sizeof(r)) == 0);
        CHECK_RC(ops->vmm_close(ops->ctx, imp, vl), IXL_OK);
        close(vfd);
        /* A descriptor that is no export (a pipe) is refused, not a crash. */
        int pp[2];
        CHECK(pipe(pp) == 0);
        CHECK(ops->vmm_open(ops->ctx, 0, pp[0], g, &imp) != IXL_OK);
        close(pp[0]);
        close(pp[1]);
        CHECK_RC(cu.cuMemUnmap(xva, g), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemRelease(xh), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemAddressFree(xva, g), CUDA_SUCCESS);
    }
    /* Registration of a tensor spanning mappings; of one running into the unmapped granule. */
    CHECK_RC(reg_vram(a, va + g - 4096, 8192, 0), IXL_OK);
    struct ixl_reg_desc d = {va + g - 4096, 8192, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &d, 1, NULL), IXL_OK);
    CHECK_RC(reg_vram(a, va + 2 * g, g + 4096, 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "runs past the end");

    /* The caller's context is as it left it after the layer worked on device 1. */
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 1, &s), IXL_OK);
    CUcontext cur = NULL;
    CHECK_RC(cu.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == ctx);
    ops->stream_destroy(ops->ctx, s);

    for (int i = 0; i < 3; i++) {
        CHECK_RC(cu.cuMemUnmap(va + i * g, g), CUDA_SUCCESS);
        CHECK_RC(cu.cuMemRelease(h[i]), CUDA_SUCCESS);
    }
    CHECK_RC(cu.cuMemAddressFree(va, 4 * g), CUDA_SUCCESS);
    CHECK_RC(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

/* H2D into d0, D2D to d1, D2H back, on one stream with one event after all three. */
static void copy_round(void *d0, void *d1, size_t n, unsigned seed, int check_in_flight)
{
    unsigned char *src = malloc(n), *dst = malloc(n);
    CHECK(src != NULL && dst != NULL);
    fill(src, n, seed);
    memset(dst, 0xEE, n); /* poisoned */
    struct ixl_dev_stream *s;
    CHECK_RC(ops->stream_create(ops->ctx, 0, &s), IXL_OK);
    CHECK_RC(ops->copy(ops->ctx, s, d0, src, n), IXL_OK);
    CHECK_RC(ops->copy(ops->ctx, s, d1, d0, n), IXL_OK);
    CHECK_RC(ops->copy(ops->ctx, s, dst, d1, n), IXL_OK);
    struct ixl_dev_event *e;
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    if (check_in_flight) {
        /* 3 copies of 30 ms each. (dst is not read here: the copy may be writing it.) */
        CHECK_RC(ops->query(ops->ctx, e), IXL_IN_PROGRESS);
    }
    CHECK_RC(ops->wait(ops->ctx, e), IXL_OK);
    CHECK_RC(ops->query(ops->ctx, e), IXL_OK);
    CHECK(memcmp(src, dst, n) == 0);
    ops->event_destroy(ops->ctx, e);
    /* A second round on the same stream reuses a pooled event. */
    fill(src, n, seed + 1);
    memset(dst, 0xEE, n);
    CHECK_RC(ops->copy(ops->ctx, s, d1, src, n), IXL_OK);
    CHECK_RC(ops->copy(ops->ctx, s, dst, d1, n), IXL_OK);
    CHECK_RC(ops->record(ops->ctx, s, &e), IXL_OK);
    int rc;
    while ((rc = ops->query(ops->ctx, e)) == IXL_IN_PROGRESS)
        usleep(1000);
    CHECK_RC(rc, IXL_OK);
    CHECK(memcmp(src, dst, n) == 0);
    ops->event_destroy(ops->ctx, e);
    CHECK_RC(ops->copy(ops->ctx, s, dst, src, 0), IXL_OK);
    ops->stream_destroy(ops->ctx, s);
    free(src);
    free(dst);
}

struct thread_arg {
    void *d0, *d1;
    CUcontext after;
};

/* A thread that never touched CUDA uses the layer; its context is none again afterwards. */
static void *fresh_thread(void *arg)
{
    struct thread_arg *t = arg;
    copy_round(t->d0, t->d1, 8192, 9, 0);
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    CHECK_RC(ops->classify(ops->ctx, t->d1, 64, &p, NULL, 0), IXL_OK);
    CHECK(p.ordinal == 1);
    unsigned char buf[256], back[256];
    fill(buf, sizeof(buf), 3);
    memset(back, 0xEE, sizeof(back));
    CHECK_RC(ixl_device_copy(t->d1, buf, sizeof(buf)), IXL_OK);
    CHECK_RC(ixl_device_copy(back, t->d1, sizeof(back)), IXL_OK);
    CHECK(memcmp(buf, back, sizeof(buf)) == 0);
    t->after = (CUcontext)(uintptr_t)1;
    CHECK_RC(cu.cuCtxGetCurrent(&t->after), CUDA_SUCCESS);
    return NULL;
}

/* Another process (this binary, run again) opens the export and reads the pattern. */
static int ipc_child(const char *hex, const char *tid)
{
    ops = ixl_dev_ops();
    struct ixl_dev_ipc h;
    CHECK(strlen(hex) == 2 * sizeof(h.bytes));
    for (size_t i = 0; i < sizeof(h.bytes); i++)
        CHECK(sscanf(hex + 2 * i, "%2hhx", &h.bytes[i]) == 1);
    void *base;
    CHECK_RC(ops->ipc_open(ops->ctx, 0, &h, &base), IXL_OK);
    unsigned char want[4096], got[4096];
    fill(want, sizeof(want), 77);
    memset(got, 0xEE, sizeof(got));
    CHECK_RC(ixl_device_copy(got, (char *)base + 4096, sizeof(got)), IXL_OK);
    CHECK(memcmp(want, got, sizeof(got)) == 0);
    CHECK_RC(ops->ipc_close(ops->ctx, base), IXL_OK);
    /* Forged handles (a byte changed, all zeros) are refused, never a crash. */
    struct ixl_dev_ipc bad = h;
    bad.bytes[8] ^= 0x5a;
    CHECK(ops->ipc_open(ops->ctx, 0, &bad, &base) != IXL_OK);
    bad = h;
    bad.bytes[IXL_DEV_IPC_LEN / 2] ^= 0x01;
    CHECK(ops->ipc_open(ops->ctx, 0, &bad, &base) != IXL_OK);
    /* The simulator's handle names the exporter by pid (bytes 8..11): a thread id of the
     * exporter is another name for that process in /proc, not the process the handle names;
     * it is refused too (CI once drew such a pid by flipping bits above). */
    int32_t t = (int32_t)atoi(tid);
    CHECK(t > 0);
    bad = h;
    memcpy(&bad.bytes[8], &t, sizeof(t));
    CHECK(ops->ipc_open(ops->ctx, 0, &bad, &base) != IXL_OK);
    memset(&bad, 0, sizeof(bad));
    CHECK(ops->ipc_open(ops->ctx, 0, &bad, &base) != IXL_OK);
    return 0;
}

struct parked {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pid_t tid;
    bool go;
};

/* A thread of this process that waits until told to end; it publishes its thread id. */
static void *parked_thread(void *arg)
{
    struct parked *p = arg;
    pthread_mutex_lock(&p->lock);
    p->tid = gettid();
    pthread_cond_broadcast(&p->cond);
    while (!p->go)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void test_ipc_open(void *d0, const struct ixl_dev_ipc *h)
{
    struct parked pk = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, parked_thread, &pk) == 0);
    pthread_mutex_lock(&pk.lock);
    while (pk.tid == 0)
        pthread_cond_wait(&pk.cond, &pk.lock);
    pthread_mutex_unlock(&pk.lock);
    char tid[24];
    snprintf(tid, sizeof(tid), "%d", (int)pk.tid);
    unsigned char pat[4096];
    fill(pat, sizeof(pat), 77);
    CHECK_RC(ixl_device_copy((char *)d0 + 4096, pat, sizeof(pat)), IXL_OK);
    char hex[2 * IXL_DEV_IPC_LEN + 1];
    for (size_t i = 0; i < IXL_DEV_IPC_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", h->bytes[i]);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_device", "ipc-child", hex, tid, (char *)NULL);
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        check_fail(__FILE__, __LINE__, "the IPC child failed (status 0x%x)", st);
    pthread_mutex_lock(&pk.lock);
    pk.go = true;
    pthread_cond_broadcast(&pk.cond);
    pthread_mutex_unlock(&pk.lock);
    CHECK(pthread_join(th, NULL) == 0);
}

static void test_ipc_pin(void *d0)
{
    struct ixl_dev_counters c0, c1;
    struct ixl_dev_ipc h1, h2;
    ixl_dev_counters(&c0);
    CHECK_RC(ops->ipc_export(ops->ctx, (char *)d0 + 4096, &h1), IXL_OK);
    CHECK_RC(ops->ipc_export(ops->ctx, (char *)d0 + 65536, &h2), IXL_OK);
    CHECK_RC(ops->ipc_export(ops->ctx, d0, &h2), IXL_OK);
    ixl_dev_counters(&c1);
    CHECK(memcmp(&h1, &h2, sizeof(h1)) == 0);
    CHECK(c1.ipc_exports - c0.ipc_exports == 1); /* one export per allocation, reused */
    test_ipc_open(d0, &h1);
    unsigned char stack[64];
    CHECK_RC(ops->ipc_export(ops->ctx, stack, &h1), IXL_ERR_INVALID_ARG);

    size_t n = 1 << 16;
    void *pin = NULL;
    CHECK(posix_memalign(&pin, 4096, n) == 0);
    CHECK_RC(ops->host_pin(ops->ctx, pin, n), IXL_OK);
    CHECK_RC(ops->host_pin(ops->ctx, pin, n), IXL_ERR_EXISTS);
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    CHECK_RC(ops->classify(ops->ctx, pin, n, &p, NULL, 0), IXL_OK);
    CHECK(p.ordinal == -1); /* pinned host memory is host memory */
    CHECK_RC(ops->host_unpin(ops->ctx, pin), IXL_OK);
    free(pin);
}

static void test_register(struct ixl_agent *a, void *d0, void *d1)
{
    uint64_t b0 = (uintptr_t)d0, b1 = (uintptr_t)d1;
    static char host[4096];
    CHECK_RC(reg_vram(a, (uintptr_t)host, sizeof(host), 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "not device memory");
    CHECK_RC(reg_vram(a, b1, 4096, 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "memory of device 1, not of device 0");
    CHECK_RC(reg_vram(a, b0 + MB - 4096, 8192, 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "runs past the end");
    CHECK_RC(reg_vram(a, b0, 4096, 5), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "device 5 does not exist");

    /* Many tensors inside one allocation: one driver query each, the allocation derived once. */
    enum { N = 64 };
    struct ixl_reg_desc d[N];
    for (int i = 0; i < N; i++)
        d[i] = (struct ixl_reg_desc){b0 + (uint64_t)i * 8192, 8192, 0, NULL, 0};
    struct ixl_dev_counters c0, c1;
    ixl_dev_counters(&c0);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_VRAM, d, N, NULL), IXL_OK);
    ixl_dev_counters(&c1);
    CHECK(c1.probes - c0.probes == N);
    CHECK(c1.alloc_misses - c0.alloc_misses == 0); /* classified before: cached */
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, d, N, NULL), IXL_OK);
    CHECK_RC(reg_vram(a, b1, MB, 1), IXL_OK);
    struct ixl_reg_desc whole = {b1, MB, 1, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &whole, 1, NULL), IXL_OK);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "ipc-child") == 0)
        return ipc_child(argv[2], argv[3]);
    const char *sim = getenv("IXL_CUDA_LIBRARY");
    if (sim == NULL || strstr(sim, "cudasim") == NULL)
        check_fail(__FILE__, __LINE__, "run me with IXL_CUDA_LIBRARY = libixl_cudasim.so");

    /* Children first: this process has not loaded anything yet. */
    in_child("/nonexistent/libcuda.so.1", NULL, NULL, child_no_gpu,
             "no GPU driver (/nonexistent/libcuda.so.1: not found", 0);
    in_child(NULL, "IXL_CUDASIM_NO_DEVICE", "1", child_no_gpu, "no CUDA device", 0);
    in_child(NULL, "IXL_CUDASIM_STUB", "1", child_no_gpu, "stub library, not a driver", 0);
    in_child(NULL, "IXL_CUDASIM_FAIL_COPY", "2", run_copy_fails, "copy fails", 0);
    in_child(NULL, NULL, NULL, run_touch, "touches device memory", SIGSEGV);

    ops = ixl_dev_ops();
    CHECK(ops->size >= sizeof(struct ixl_devops));
    test_devices();
    load_sim();
    void *d0, *d1;
    CHECK_RC(ixl_device_alloc(0, MB, &d0), IXL_OK);
    CHECK_RC(ixl_device_alloc(1, MB, &d1), IXL_OK);
    test_classify(d0, d1);
    copy_round(d0, d1, 64 * 1024, 1, 1);

    pthread_t th;
    struct thread_arg ta = {d0, d1, NULL};
    CHECK(pthread_create(&th, NULL, fresh_thread, &ta) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(ta.after == NULL);

    test_ipc_pin(d0);
    struct ixl_agent *a = make_agent("vram");
    test_register(a, d0, d1);
    test_vmm(a);
    ixl_agent_destroy(a);

    CHECK_RC(ixl_device_free(d0), IXL_OK);
    CHECK_RC(ixl_device_free(d1), IXL_OK);
    CHECK_RC(ixl_device_free(NULL), IXL_OK);
    static char host[64];
    CHECK_RC(ixl_device_free(host), IXL_ERR_INVALID_ARG);
    printf("test_device: ok\n");
    return 0;
}

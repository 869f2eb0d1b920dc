/*
 * cuda_probe: asks a CUDA driver the questions the simulated one (libixl_cudasim.so) answers,
 * one "question: answer" line each, so a run on a real GPU and a run on the sim can be diffed:
 *
 *   cuda_probe [library]   (default libcuda.so.1; tests/sim/README.md, "Checked on a GPU")
 *
 * It needs one device and uses ~64 MiB of it. It never copies to or from unmapped host memory:
 * a real driver dies of SIGSEGV there (an H200 did), where the sim says CUDA_ERROR_INVALID_VALUE.
 * Answers are return codes (numbers) and values; addresses are printed relative to the allocation
 * they belong to, so runs compare.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/cuda_api.h"

static struct {
#define X(n) ixl_##n##_fn *n;
    IXL_CUDA_LAYER_ENTRY_POINTS(X) IXL_CUDA_OTHER_ENTRY_POINTS(X)
#undef X
} cu;

static const char *lib_path = "libcuda.so.1";
static const char *self_exe = "/proc/self/exe";
static CUcontext ctx;

#define Q(name, expr) printf("%s: %d\n", name, (int)(expr))

static void load(void)
{
    void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("dlopen: %s\n", dlerror());
        exit(2);
    }
#define X(n)                             \
    cu.n = (ixl_##n##_fn *)dlsym(h, #n); \
    if (cu.n == NULL) {                  \
        printf("missing: %s\n", #n);     \
        exit(2);                         \
    }
    IXL_CUDA_LAYER_ENTRY_POINTS(X)
    IXL_CUDA_OTHER_ENTRY_POINTS(X)
#undef X
}

static void init(void)
{
    Q("init.cuInit(1)", cu.cuInit(1));
    Q("init.cuInit(0)", cu.cuInit(0));
    Q("init.retain", cu.cuDevicePrimaryCtxRetain(&ctx, 0));
}

/* Every attribute 1..19 of ptr, relative to base where it is an address. */
static void attrs(const char *tag, CUdeviceptr ptr, uintptr_t base)
{
    for (int a = 1; a <= 19; a++) {
        if (a == 5)
            continue;
        unsigned long long v = 0xdeadbeefdeadbeefull;
        CUresult r = cu.cuPointerGetAttribute(&v, (CUpointer_attribute)a, ptr);
        if (a == 3 || a == 4 || a == 11 || a == 19) /* addresses */
            v = r == CUDA_SUCCESS ? v - base : v;
        if (a == 1) /* context */
            v = r == CUDA_SUCCESS ? (v == (uintptr_t)ctx ? 1 : v == 0 ? 0 : 2) : v;
        if (a == 7) /* buffer id */
            v = r == CUDA_SUCCESS ? (v != 0) : v;
        if (a == 17) /* mempool */
            v = r == CUDA_SUCCESS ? (v != 0) : v;
        if (r == CUDA_SUCCESS)
            printf("%s.attr%d: 0 value=%lld (low32 %d)\n", tag, a, (long long)v, (int)(uint32_t)v);
        else
            printf("%s.attr%d: %d\n", tag, a, (int)r);
    }
    CUpointer_attribute list[6] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_CONTEXT,          CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned int mt = 77;
    int ord = 77, ipc = 77;
    CUdeviceptr start = 77;
    size_t size = 77;
    CUcontext c = (CUcontext)77;
    void *data[6] = {&mt, &ord, &start, &size, &c, &ipc};
    CUresult r = cu.cuPointerGetAttributes(6, list, data, ptr);
    printf("%s.attrs: %d mt=%u ord=%d start=%lld size=%zu ctx=%d ipc=%d\n", tag, (int)r, mt, ord,
           start ? (long long)(start - base) : 0LL, size,
           c == ctx             ? 1
           : c == NULL          ? 0
           : c == (CUcontext)77 ? 77
                                : 2,
           ipc);
    CUdeviceptr b = 0;
    size_t s = 0;
    r = cu.cuMemGetAddressRange_v2(&b, &s, ptr);
    printf("%s.range: %d base=%lld size=%zu\n", tag, (int)r, r == 0 ? (long long)(b - base) : 0LL,
           r == 0 ? s : 0);
}

static void *no_ctx_thread(void *arg)
{
    CUdeviceptr d = *(CUdeviceptr *)arg;
    CUdeviceptr p;
    char host[64];
    unsigned int mt;
    CUpointer_attribute a = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &mt;
    CUevent e;
    CUstream s;
    CUdevice dev;
    Q("noctx.cuMemAlloc", cu.cuMemAlloc_v2(&p, 64));
    Q("noctx.cuMemcpyDtoH", cu.cuMemcpyDtoH_v2(host, d, 64));
    Q("noctx.cuMemcpyAsync", cu.cuMemcpyAsync((CUdeviceptr)host, d, 64, NULL));
    Q("noctx.cuPointerGetAttribute", cu.cuPointerGetAttribute(&mt, a, d));
    Q("noctx.cuPointerGetAttributes", cu.cuPointerGetAttributes(1, &a, &data, d));
    Q("noctx.cuMemGetAddressRange", cu.cuMemGetAddressRange_v2(NULL, NULL, d));
    Q("noctx.cuStreamCreate", cu.cuStreamCreate(&s, 0));
    Q("noctx.cuEventCreate", cu.cuEventCreate(&e, 0));
    Q("noctx.cuCtxGetDevice", cu.cuCtxGetDevice(&dev));
    CUipcMemHandle h;
    Q("noctx.cuIpcGetMemHandle", cu.cuIpcGetMemHandle(&h, d));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    Q("noctx.cuMemGetAllocationGranularity",
      cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle mh;
    CUresult r = cu.cuMemCreate(&mh, gran ? gran : (2 << 20), &prop, 0);
    Q("noctx.cuMemCreate", r);
    if (r == CUDA_SUCCESS)
        cu.cuMemRelease(mh);
    return NULL;
}

/* Events and streams used from a thread without a context (created with one). */
struct ev_arg {
    CUevent e;
    CUstream s;
};

static void *no_ctx_events(void *arg)
{
    struct ev_arg *a = arg;
    Q("noctx.cuEventQuery", cu.cuEventQuery(a->e));
    Q("noctx.cuEventSynchronize", cu.cuEventSynchronize(a->e));
    Q("noctx.cuEventRecord", cu.cuEventRecord(a->e, a->s));
    Q("noctx.cuStreamSynchronize", cu.cuStreamSynchronize(a->s));
    return NULL;
}

static void errors(void)
{
    static const int codes[] = {0,   1,   2,   3,   4,   34,  100, 101, 201, 205, 208,
                                211, 400, 500, 600, 700, 712, 713, 800, 801, 999};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *n = NULL, *s = NULL;
        CUresult rn = cu.cuGetErrorName((CUresult)codes[i], &n);
        CUresult rs = cu.cuGetErrorString((CUresult)codes[i], &s);
        printf("err.%d: %d %d %s | %s\n", codes[i], (int)rn, (int)rs, n ? n : "(null)",
               s ? s : "(null)");
    }
    const char *n = "x";
    CUresult r = cu.cuGetErrorName((CUresult)12345, &n);
    printf("err.unknown: %d %s\n", (int)r, n ? n : "(null)");
}

static void memory(void)
{
    CUdeviceptr d, d2;
    const size_t len = (1 << 20) + 100;
    Q("mem.alloc0", cu.cuMemAlloc_v2(&d, 0));
    Q("mem.alloc", cu.cuMemAlloc_v2(&d, len));
    Q("mem.alloc2", cu.cuMemAlloc_v2(&d2, 4096));
    printf("mem.align4096: %d\n", (int)(d % 4096 == 0));
    attrs("alloc", d + 1000, d);
    char *host = malloc(4096);
    attrs("malloc", (CUdeviceptr)host, (uintptr_t)host);
    attrs("null", 0, 0);

    char *buf = malloc(len);
    memset(buf, 1, len);
    Q("mem.HtoD", cu.cuMemcpyHtoD_v2(d, buf, len));
    Q("mem.HtoD.pastend", cu.cuMemcpyHtoD_v2(d + 1, buf, len));
    Q("mem.DtoH.pastend", cu.cuMemcpyDtoH_v2(buf, d, len + 1));
    void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 8192);
    Q("mem.HtoD.null", cu.cuMemcpyHtoD_v2(d, NULL, 100));
    Q("mem.memcpy.hosthost", cu.cuMemcpy((CUdeviceptr)buf, (CUdeviceptr)host, 64));
    Q("mem.memsetD8.host", cu.cuMemsetD8_v2((CUdeviceptr)host, 0, 8));
    Q("mem.memsetD8", cu.cuMemsetD8_v2(d, 0, 8));
    Q("mem.free.interior", cu.cuMemFree_v2(d + 16));
    Q("mem.free.host", cu.cuMemFree_v2((CUdeviceptr)host));
    Q("mem.free0", cu.cuMemFree_v2(0));

    CUstream s;
    Q("stream.create.badflags", cu.cuStreamCreate(&s, 0x80));
    Q("stream.create", cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    Q("async.pastend", cu.cuMemcpyAsync(d, (CUdeviceptr)buf, len + 1, s));
    Q("async.zero", cu.cuMemcpyAsync(d, (CUdeviceptr)buf, 0, s));
    CUevent e;
    Q("event.create", cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    Q("event.query.unrecorded", cu.cuEventQuery(e));
    Q("event.create.badflags", cu.cuEventCreate(&e, 0x100));
    Q("async.big", cu.cuMemcpyAsync((CUdeviceptr)buf, d, len, s));
    Q("event.record", cu.cuEventRecord(e, s));
    Q("event.sync", cu.cuEventSynchronize(e));

    pthread_t t;
    pthread_create(&t, NULL, no_ctx_thread, &d);
    pthread_join(t, NULL);
    struct ev_arg ea = {e, s};
    pthread_create(&t, NULL, no_ctx_events, &ea);
    pthread_join(t, NULL);

    /* Host registration. */
    char *reg = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Q("reg.zero", cu.cuMemHostRegister_v2(reg, 0, 0));
    Q("reg", cu.cuMemHostRegister_v2(reg, 3 * 4096, CU_MEMHOSTREGISTER_PORTABLE));
    Q("reg.overlap", cu.cuMemHostRegister_v2(reg + 4096, 4096, 0));
    attrs("reg", (CUdeviceptr)(reg + 100), (uintptr_t)reg);
    Q("reg.unreg.interior", cu.cuMemHostUnregister(reg + 4096));
    Q("reg.unreg", cu.cuMemHostUnregister(reg));
    Q("reg.unreg.again", cu.cuMemHostUnregister(reg));
    Q("reg.unmapped", cu.cuMemHostRegister_v2(gone, 4096, 0));

    /* IPC in this process. */
    CUipcMemHandle h;
    Q("ipc.get.interior", cu.cuIpcGetMemHandle(&h, d + 4096));
    Q("ipc.get.host", cu.cuIpcGetMemHandle(&h, (CUdeviceptr)host));
    Q("ipc.get", cu.cuIpcGetMemHandle(&h, d));
    CUdeviceptr o = 0;
    Q("ipc.open.self", cu.cuIpcOpenMemHandle_v2(&o, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    char hex[2 * CU_IPC_HANDLE_SIZE + 1];
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)h.reserved[i]);
    CUipcMemHandle h2;
    Q("ipc.get.interior2", cu.cuIpcGetMemHandle(&h2, d + 4096));
    printf("ipc.interior_same_handle: %d\n", memcmp(&h, &h2, sizeof(h)) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self_exe, self_exe, lib_path, "ipc-child", hex, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("ipc.child_status: %d\n", st);

    /* A child forked after cuInit, without exec. */
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        CUdeviceptr p;
        int n;
        printf("fork.cuMemAlloc: %d\n", (int)cu.cuMemAlloc_v2(&p, 64));
        printf("fork.cuDeviceGetCount: %d\n", (int)cu.cuDeviceGetCount(&n));
        printf("fork.cuInit: %d\n", (int)cu.cuInit(0));
        fflush(stdout);
        _exit(0);
    }
    waitpid(pid, &st, 0);

    Q("mem.free", cu.cuMemFree_v2(d));
    Q("mem.free.again", cu.cuMemFree_v2(d));
    Q("mem.free2", cu.cuMemFree_v2(d2));
    cu.cuStreamDestroy_v2(s);
    cu.cuEventDestroy_v2(e);
    free(buf);
    free(host);
}

static void vmm(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0, rec = 0;
    Q("vmm.gran", cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    Q("vmm.gran.rec",
      cu.cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("vmm.gran.value: %zu %zu\n", gran, rec);
    CUmemGenericAllocationHandle h, h2, hp;
    Q("vmm.create.odd", cu.cuMemCreate(&h, gran + 1, &prop, 0));
    Q("vmm.create", cu.cuMemCreate(&h, gran, &prop, 0));
    CUdeviceptr va;
    Q("vmm.reserve", cu.cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CUdeviceptr at = va + gran;
    attrs("vmm.reserved", va + 5, va);
    Q("vmm.map.offset", cu.cuMemMap(at, gran, 4096, h, 0));
    Q("vmm.map.badhandle", cu.cuMemMap(at, gran, 0, h + 8, 0));
    Q("vmm.map", cu.cuMemMap(at, gran, 0, h, 0));
    Q("vmm.map.again", cu.cuMemMap(at, gran, 0, h, 0));
    attrs("vmm.noaccess", at + 5, va);
    char *buf = malloc(gran);
    memset(buf, 3, gran);
    Q("vmm.HtoD.noaccess", cu.cuMemcpyHtoD_v2(at, buf, 4096));
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    Q("vmm.setaccess.unmapped", cu.cuMemSetAccess(va, 2 * gran, &acc, 1));
    Q("vmm.setaccess", cu.cuMemSetAccess(at, gran, &acc, 1));
    Q("vmm.HtoD", cu.cuMemcpyHtoD_v2(at, buf, gran));
    attrs("vmm.mapped", at + 5, va);
    CUipcMemHandle ih;
    Q("vmm.ipcget", cu.cuIpcGetMemHandle(&ih, at));
    Q("vmm.retain", cu.cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(at + 100)));
    printf("vmm.retain_same: %d\n", h2 == h);
    Q("vmm.retain.unmapped", cu.cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va));
    Q("vmm.release.retained", cu.cuMemRelease(h));
    int fd = -1;
    Q("vmm.export.fabric", cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0));
    Q("vmm.export",
      cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    Q("vmm.import.self", cu.cuMemImportFromShareableHandle(
                             &h2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    Q("vmm.import.same_handle", h2 == h);
    Q("vmm.import.stdin", cu.cuMemImportFromShareableHandle(
                              &hp, (void *)(intptr_t)0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    Q("vmm.import.socket",
      cu.cuMemImportFromShareableHandle(&hp, (void *)(intptr_t)sv[0],
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUmemAllocationProp plain = prop;
    plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    Q("vmm.create.plain", cu.cuMemCreate(&hp, gran, &plain, 0));
    int fd2 = -1;
    Q("vmm.export.plain",
      cu.cuMemExportToShareableHandle(&fd2, hp, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    Q("vmm.release.plain", cu.cuMemRelease(hp));
    Q("vmm.release", cu.cuMemRelease(h));
    Q("vmm.DtoH.released_mapped", cu.cuMemcpyDtoH_v2(buf, at, 64));
    Q("vmm.addressfree.mapped", cu.cuMemAddressFree(va, 2 * gran));
    Q("vmm.unmap.partial", cu.cuMemUnmap(at, gran / 2));
    Q("vmm.unmap", cu.cuMemUnmap(at, gran));
    Q("vmm.DtoH.unmapped", cu.cuMemcpyDtoH_v2(buf, at, 64));
    Q("vmm.release.again", cu.cuMemRelease(h));
    Q("vmm.addressfree", cu.cuMemAddressFree(va, 2 * gran));
    free(buf);
}

static int ipc_child(const char *hex)
{
    CUipcMemHandle h;
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    cu.cuInit(0);
    CUdevice dv;
    cu.cuDeviceGet(&dv, 0);
    cu.cuDevicePrimaryCtxRetain(&ctx, dv);
    CUdeviceptr d = 0, d2 = 0;
    Q("child.open.noctx", cu.cuIpcOpenMemHandle_v2(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    cu.cuCtxSetCurrent(ctx);
    Q("child.open.flags0", cu.cuIpcOpenMemHandle_v2(&d, h, 0));
    if (d != 0)
        cu.cuIpcCloseMemHandle(d);
    Q("child.open", cu.cuIpcOpenMemHandle_v2(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    Q("child.open.again", cu.cuIpcOpenMemHandle_v2(&d2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("child.same_ptr: %d\n", d == d2);
    attrs("child.ipc", d + 10, d);
    Q("child.close.interior", cu.cuIpcCloseMemHandle(d + 16));
    Q("child.close", cu.cuIpcCloseMemHandle(d));
    char b[16];
    Q("child.DtoH.after_one_close", cu.cuMemcpyDtoH_v2(b, d, 16));
    Q("child.close.again", cu.cuIpcCloseMemHandle(d));
    Q("child.close.third", cu.cuIpcCloseMemHandle(d));
    CUipcMemHandle f = h;
    for (int i = 16; i < 64; i++)
        f.reserved[i] ^= 0x5a;
    Q("child.open.forged_tail",
      cu.cuIpcOpenMemHandle_v2(&d, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    memset(&f, 0, sizeof(f));
    Q("child.open.zero", cu.cuIpcOpenMemHandle_v2(&d, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    for (int i = 0; i < 64; i++)
        f.reserved[i] = (char)(i * 37 + 11);
    Q("child.open.garbage", cu.cuIpcOpenMemHandle_v2(&d, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2)
        lib_path = argv[1];
    load();
    if (argc >= 4 && strcmp(argv[2], "ipc-child") == 0)
        return ipc_child(argv[3]);
    int n = -1;
    Q("pre.cuDeviceGetCount", cu.cuDeviceGetCount(&n));
    init();
    Q("noctx.main.cuMemAlloc", cu.cuMemAlloc_v2(&(CUdeviceptr){0}, 64));
    Q("ctx.set", cu.cuCtxSetCurrent(ctx));
    errors();
    memory();
    vmm();
    Q("ctx.release", cu.cuDevicePrimaryCtxRelease_v2(0));
    Q("ctx.release.again", cu.cuDevicePrimaryCtxRelease_v2(0));
    CUdeviceptr p;
    Q("ctx.released.cuMemAlloc", cu.cuMemAlloc_v2(&p, 64));
    return 0;
}

/*
 * The simulated CUDA driver (tests/sim/libixl_cudasim.so) driven directly through dlopen and
 * src/device/cuda_api.h, not through ixl: initialization, devices, contexts per thread, device
 * memory the CPU cannot touch (a child that memcpy's from it dies of SIGSEGV), pointer
 * attributes, synchronous and stream copies with events in flight, failure injection, host
 * registration, VMM with fd export over a socketpair, and legacy IPC between processes with
 * forged handles refused. Child processes are this binary run again (child <mode> ...) with
 * the environment each case needs. Label threaded: TSan runs it too.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "device/cuda_api.h"

#define CU(expr, want) cu_check(__FILE__, __LINE__, #expr, (int)(expr), (int)(want))
#define CU_OK(expr) CU(expr, CUDA_SUCCESS)

/* Per-copy delay the test runs the sim with: long enough that work is observably in flight. */
#define DELAY_US "20000"

static struct {
#define X(n) ixl_##n##_fn *n;
    IXL_CUDA_LAYER_ENTRY_POINTS(X) IXL_CUDA_OTHER_ENTRY_POINTS(X)
#undef X
} cu;

static const char *self_exe;

static void cu_check(const char *file, int line, const char *expr, int got, int want)
{
    if (got == want)
        return;
    const char *gn = NULL, *wn = NULL;
    if (cu.cuGetErrorName != NULL) {
        cu.cuGetErrorName((CUresult)got, &gn);
        cu.cuGetErrorName((CUresult)want, &wn);
    }
    check_fail(file, line, "%s returned %d (%s), want %d (%s)", expr, got, gn ? gn : "?", want,
               wn ? wn : "?");
}

static void load(void)
{
    void *h = dlopen(IXL_CUDASIM_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        check_fail(__FILE__, __LINE__, "dlopen %s: %s", IXL_CUDASIM_PATH, dlerror());
#define X(n)                             \
    cu.n = (ixl_##n##_fn *)dlsym(h, #n); \
    if (cu.n == NULL)                    \
        check_fail(__FILE__, __LINE__, "the sim does not export %s", #n);
    IXL_CUDA_LAYER_ENTRY_POINTS(X)
    IXL_CUDA_OTHER_ENTRY_POINTS(X)
#undef X
}

/* A pattern of seed, 8 bytes per step (one instrumented store each under the sanitizers). */
static void fill(void *buf, size_t len, uint32_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    unsigned char *p = buf;
    size_t i = 0;
    for (; i < len; i += sizeof(x)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t n = len - i < sizeof(x) ? len - i : sizeof(x);
        memcpy(p + i, &x, n);
    }
}

static void check_pattern(const void *buf, size_t len, uint32_t seed)
{
    unsigned char *want = malloc(len);
    CHECK(want != NULL);
    fill(want, len, seed);
    CHECK(memcmp(buf, want, len) == 0);
    free(want);
}

static CUcontext ctx0;

static void init_ctx(void)
{
    CU_OK(cu.cuInit(0));
    CUdevice d;
    CU_OK(cu.cuDeviceGet(&d, 0));
    CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx0, d));
    CU_OK(cu.cuCtxSetCurrent(ctx0));
}

/* Starts this binary as `child <mode> <arg>` with extra environment (NAME=VALUE, NULL-ended);
 * keep_fd stays open across exec (-1: none). wait_child gives its wait status. */
static pid_t spawn_child(const char *mode, const char *arg, int keep_fd, const char *const *env)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (const char *const *e = env; e != NULL && *e != NULL; e++)
            putenv((char *)*e);
        if (keep_fd >= 0) {
            int fl = fcntl(keep_fd, F_GETFD);
            fcntl(keep_fd, F_SETFD, fl & ~FD_CLOEXEC);
        }
        execl(self_exe, self_exe, "child", mode, arg ? arg : "", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_child(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        CHECK(errno == EINTR);
    return st;
}

static int run_child(const char *mode, const char *arg, int keep_fd, const char *const *env)
{
    return wait_child(spawn_child(mode, arg, keep_fd, env));
}

static void expect_exit0(int st, const char *what)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        check_fail(__FILE__, __LINE__, "child %s: status %#x", what, st);
}

static void hex_encode(const void *p, size_t n, char *out)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void hex_decode(const char *s, void *p, size_t n)
{
    unsigned char *b = p;
    CHECK(strlen(s) == 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        CHECK(sscanf(s + 2 * i, "%2x", &v) == 1);
        b[i] = (unsigned char)v;
    }
}

/* ---- cases in this process ------------------------------------------------------------- */

static void test_init_and_devices(void)
{
    int n = -1;
    CU(cu.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr p;
    CU(cu.cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    int ver = 0;
    CU_OK(cu.cuDriverGetVersion(&ver));
    CHECK(ver >= 12000);
    CU(cu.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuInit(0));
    CU_OK(cu.cuDeviceGetCount(&n));
    CHECK(n == 1);
    CUdevice d;
    CU(cu.cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CU_OK(cu.cuDeviceGet(&d, 0));
    char name[64];
    CU_OK(cu.cuDeviceGetName(name, sizeof(name), d));
    CHECK_STR_HAS(name, "cudasim");
    int v = 0;
    CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d));
    CHECK(v == 1);
    CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    CHECK(v >= 7);
    CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d));
    CHECK(v == 1);
    CU(cu.cuDeviceGetAttribute(&v, (CUdevice_attribute)0, d), CUDA_ERROR_INVALID_VALUE);
    size_t total = 0;
    CU_OK(cu.cuDeviceTotalMem_v2(&total, d));
    CHECK(total >= ((size_t)1 << 30));

    const char *s = NULL;
    CU_OK(cu.cuGetErrorName(CUDA_ERROR_INVALID_CONTEXT, &s));
    CHECK(strcmp(s, "CUDA_ERROR_INVALID_CONTEXT") == 0);
    CU_OK(cu.cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    CHECK(strcmp(s, "an illegal memory access was encountered") == 0);
    CU_OK(cu.cuGetErrorString(CUDA_ERROR_NO_DEVICE, &s));
    CHECK(strcmp(s, "no CUDA-capable device is detected") == 0);
    CU(cu.cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);

    /* No context current on this thread yet: calls that need one say so. */
    CUcontext c = (CUcontext)1;
    CU_OK(cu.cuCtxGetCurrent(&c));
    CHECK(c == NULL);
    CU(cu.cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    CU(cu.cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    CU(cu.cuCtxSetCurrent((CUcontext)&c), CUDA_ERROR_INVALID_CONTEXT);
    CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx0, 0));
    CU_OK(cu.cuCtxSetCurrent(ctx0));
    CU_OK(cu.cuCtxGetCurrent(&c));
    CHECK(c == ctx0);
    CU_OK(cu.cuCtxGetDevice(&d));
    CHECK(d == 0);
    /* Retains are counted: a second retain gives the same context, one release keeps it. */
    CUcontext c2;
    CU_OK(cu.cuDevicePrimaryCtxRetain(&c2, 0));
    CHECK(c2 == ctx0);
    CU_OK(cu.cuDevicePrimaryCtxRelease_v2(0));
    CU_OK(cu.cuMemAlloc_v2(&p, 16));
    CU_OK(cu.cuMemFree_v2(p));
}

static void test_memory_and_attributes(void)
{
    const size_t len = (1 << 20) + 100;
    CUdeviceptr p, q;
    CU(cu.cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemAlloc_v2(&p, len));
    CU_OK(cu.cuMemAlloc_v2(&q, 4096));
    CHECK(p != 0 && p % 256 == 0);

    CUdeviceptr at = p + 1000;
    unsigned int type = 0;
    CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    int ord = -1, ipc = -1, mapped = -1;
    CU_OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, at));
    CHECK(ord == 0);
    CU_OK(cu.cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, at));
    CHECK(ipc == 1);
    CU_OK(cu.cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, at));
    CHECK(mapped == 1);
    CUdeviceptr start = 0;
    size_t size = 0;
    CU_OK(cu.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, at));
    CU_OK(cu.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, at));
    CHECK(start == p && size == len);
    CUcontext c = NULL;
    CU_OK(cu.cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, at));
    CHECK(c == ctx0);
    void *hp;
    CU(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, at),
       CUDA_ERROR_INVALID_VALUE);
    unsigned long long id_p = 0, id_q = 0;
    CU_OK(cu.cuPointerGetAttribute(&id_p, CU_POINTER_ATTRIBUTE_BUFFER_ID, at));
    CU_OK(cu.cuPointerGetAttribute(&id_q, CU_POINTER_ATTRIBUTE_BUFFER_ID, q));
    CHECK(id_p != 0 && id_q != 0 && id_p != id_q);
    CU_OK(cu.cuMemGetAddressRange_v2(&start, &size, p + len - 1));
    CHECK(start == p && size == len);
    CU(cu.cuMemGetAddressRange_v2(&start, &size, p + len + 8192), CUDA_ERROR_NOT_FOUND);

    /* The batch form as the device layer uses it. */
    CUpointer_attribute attrs[4] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[4] = {&type, &ord, &start, &size};
    CU_OK(cu.cuPointerGetAttributes(4, attrs, data, at));
    CHECK(type == CU_MEMORYTYPE_DEVICE && ord == 0 && start == p && size == len);

    /* Host memory the driver does not know: an error one at a time, defaults in a batch. */
    char *host = malloc(64);
    CHECK(host != NULL);
    CU(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host),
       CUDA_ERROR_INVALID_VALUE);
    type = 99;
    ord = 99;
    start = 77;
    size = 77;
    CU_OK(cu.cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)host));
    CHECK(type == 0 && ord == -2 && start == 77 && size == 77); /* ranges untouched: an H200 */
    CU(cu.cuMemGetAddressRange_v2(&start, &size, (CUdeviceptr)host), CUDA_ERROR_NOT_FOUND);

    /* Buffer ids are never reused; a freed address is no longer device memory. */
    CU_OK(cu.cuMemFree_v2(q));
    CU(cu.cuMemFree_v2(q), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemFree_v2(p + 16), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q),
       CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemAlloc_v2(&q, 4096));
    unsigned long long id_q2 = 0;
    CU_OK(cu.cuPointerGetAttribute(&id_q2, CU_POINTER_ATTRIBUTE_BUFFER_ID, q));
    CHECK(id_q2 != id_q && id_q2 != id_p);

    /* Synchronous copies: host -> device -> device -> host, memset. */
    char *src = malloc(len), *dst = malloc(len);
    CHECK(src != NULL && dst != NULL);
    fill(src, len, 1);
    memset(dst, 0xEE, len);
    CU_OK(cu.cuMemcpyHtoD_v2(p, src, len));
    CUdeviceptr r;
    CU_OK(cu.cuMemAlloc_v2(&r, len));
    CU_OK(cu.cuMemcpy(r, p, len));
    CU_OK(cu.cuMemcpyDtoH_v2(dst, r, len));
    check_pattern(dst, len, 1);
    CU_OK(cu.cuMemsetD8_v2(r + 10, 0x5A, 20));
    CU_OK(cu.cuMemcpyDtoH_v2(dst, r, 64));
    CHECK(dst[9] == src[9] && dst[10] == 0x5A && dst[29] == 0x5A && dst[30] == src[30]);
    CU(cu.cuMemsetD8_v2((CUdeviceptr)host, 0, 8), CUDA_ERROR_INVALID_VALUE);

    /* Refused at enqueue: past an allocation's end, unmapped host memory, NULL. */
    CU(cu.cuMemcpyHtoD_v2(p + 1, src, len), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyDtoH_v2(dst, p, len + 1), CUDA_ERROR_INVALID_VALUE);
    void *gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(gone != MAP_FAILED);
    munmap(gone, 8192);
    CU(cu.cuMemcpyDtoH_v2(gone, p, 100), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyHtoD_v2(p, gone, 100), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyHtoD_v2(p, NULL, 100), CUDA_ERROR_INVALID_VALUE);
    /* A host range that runs into device memory is not host memory either. */
    CU(cu.cuMemcpy(p, (CUdeviceptr)(uintptr_t)p - 4096, 8192), CUDA_ERROR_INVALID_VALUE);

    CU_OK(cu.cuMemFree_v2(r));
    CU_OK(cu.cuMemFree_v2(q));
    CU_OK(cu.cuMemFree_v2(p));
    free(src);
    free(dst);
    free(host);
}

static void test_streams_events(void)
{
    const size_t len = 256 * 1024;
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, len));
    char *src = malloc(len), *dst = malloc(len);
    CHECK(src != NULL && dst != NULL);
    fill(src, len, 7);
    memset(dst, 0xEE, len);
    CUstream s;
    CU(cu.cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1;
    CU_OK(cu.cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
    CU_OK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CU_OK(cu.cuEventQuery(e0)); /* never recorded: done */

    CU_OK(cu.cuMemcpyAsync(d, (CUdeviceptr)src, len, s));
    CU_OK(cu.cuEventRecord(e0, s));
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s));
    CU_OK(cu.cuEventRecord(e1, s));
    /* In flight: both copies take DELAY_US each. */
    CU(cu.cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CU(cu.cuEventQuery(e0), CUDA_ERROR_NOT_READY);
    CHECK((unsigned char)dst[0] == 0xEE && (unsigned char)dst[len - 1] == 0xEE);
    CU_OK(cu.cuEventSynchronize(e0));
    CU_OK(cu.cuEventQuery(e0));
    CU_OK(cu.cuEventSynchronize(e1));
    CU_OK(cu.cuEventQuery(e1));
    check_pattern(dst, len, 7);

    /* Re-recording makes the event pending again; stream sync waits for everything. */
    memset(dst, 0xEE, len);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s));
    CU_OK(cu.cuEventRecord(e1, s));
    CU(cu.cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CU_OK(cu.cuStreamSynchronize(s));
    CU_OK(cu.cuEventQuery(e1));
    check_pattern(dst, len, 7);

    /* An event destroyed while its record is pending completes harmlessly. */
    CUevent e2;
    CU_OK(cu.cuEventCreate(&e2, 0));
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s));
    CU_OK(cu.cuEventRecord(e2, s));
    CU_OK(cu.cuEventDestroy_v2(e2));
    CU_OK(cu.cuStreamSynchronize(s)); /* its copy writes dst: done before dst is reused */

    /* Refused at enqueue, nothing queued: past the end, unmapped host memory. */
    CU(cu.cuMemcpyAsync(d, (CUdeviceptr)src, len + 1, s), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyAsync(d + 8, (CUdeviceptr)src, len, s), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyAsync(d, 4096, 64, s), CUDA_ERROR_INVALID_VALUE);

    /* The legacy default stream (0) works too. */
    memset(dst, 0xEE, len);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, NULL));
    CU_OK(cu.cuEventRecord(e0, NULL));
    CU_OK(cu.cuEventSynchronize(e0));
    check_pattern(dst, len, 7);
    CU_OK(cu.cuStreamSynchronize(NULL));

    CU_OK(cu.cuStreamSynchronize(s));
    CU_OK(cu.cuStreamDestroy_v2(s));
    CU_OK(cu.cuEventDestroy_v2(e0));
    CU_OK(cu.cuEventDestroy_v2(e1));
    CU_OK(cu.cuMemFree_v2(d));
    free(src);
    free(dst);
}

/* Threads: one without a context is refused; several with it copy on their own streams. */
struct worker_arg {
    CUdeviceptr dev;
    size_t len;
    int id;
    bool set_ctx;
    CUresult got;
};

static void *worker(void *p)
{
    struct worker_arg *a = p;
    char *buf = malloc(a->len), *back = malloc(a->len);
    CHECK(buf != NULL && back != NULL);
    fill(buf, a->len, 100 + (uint32_t)a->id);
    CUstream s;
    if (!a->set_ctx) {
        a->got = cu.cuMemcpyAsync(a->dev, (CUdeviceptr)buf, a->len, NULL);
        CU(cu.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
        CU(cu.cuMemcpyDtoH_v2(back, a->dev, 16), CUDA_ERROR_INVALID_CONTEXT);
        /* Pointer queries need no context (as on an H200). */
        unsigned int type = 0;
        CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a->dev));
        CHECK(type == CU_MEMORYTYPE_DEVICE);
        CU_OK(cu.cuMemGetAddressRange_v2(NULL, NULL, a->dev));
        free(buf);
        free(back);
        return NULL;
    }
    CU_OK(cu.cuCtxSetCurrent(ctx0));
    CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e;
    CU_OK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    for (int round = 0; round < 3; round++) {
        memset(back, 0xEE, a->len);
        CU_OK(cu.cuMemcpyAsync(a->dev, (CUdeviceptr)buf, a->len, s));
        CU_OK(cu.cuMemcpyAsync((CUdeviceptr)back, a->dev, a->len, s));
        CU_OK(cu.cuEventRecord(e, s));
        CUresult q;
        while ((q = cu.cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
            usleep(1000);
        CU_OK(q);
        check_pattern(back, a->len, 100 + (uint32_t)a->id);
    }
    CU_OK(cu.cuEventDestroy_v2(e));
    CU_OK(cu.cuStreamDestroy_v2(s));
    free(buf);
    free(back);
    a->got = CUDA_SUCCESS;
    return NULL;
}

static void test_threads(void)
{
    enum { N = 4 };
    struct worker_arg args[N + 1];
    pthread_t th[N + 1];
    for (int i = 0; i <= N; i++) {
        args[i] = (struct worker_arg){.len = 64 * 1024, .id = i, .set_ctx = i < N};
        CU_OK(cu.cuMemAlloc_v2(&args[i].dev, args[i].len));
        CHECK(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    for (int i = 0; i <= N; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CU(args[i].got, i < N ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT);
        CU_OK(cu.cuMemFree_v2(args[i].dev));
    }
}

/* A child forked after cuInit (no exec) cannot use the driver, as with CUDA. */
static void test_forked_child(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CUdeviceptr d;
        int n;
        _exit(cu.cuMemAlloc_v2(&d, 64) == CUDA_ERROR_NOT_INITIALIZED &&
                      cu.cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED &&
                      cu.cuInit(0) == CUDA_ERROR_NOT_INITIALIZED
                  ? 0
                  : 1);
    }
    expect_exit0(wait_child(pid), "forked without exec");
}

static void test_host_register(void)
{
    size_t len = 3 * 4096;
    char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED);
    CU(cu.cuMemHostRegister_v2(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemHostRegister_v2(buf, len, CU_MEMHOSTREGISTER_PORTABLE));
    CU(cu.cuMemHostRegister_v2(buf + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    unsigned int type = 0;
    int ord = -1, mapped = 0, ipc = 1;
    CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   (CUdeviceptr)(buf + 100)));
    CHECK(type == CU_MEMORYTYPE_HOST);
    CU_OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)buf));
    CHECK(ord == 0);
    CU_OK(cu.cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)buf));
    CHECK(mapped == 1);
    CU_OK(cu.cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   (CUdeviceptr)buf));
    CHECK(ipc == 0);
    void *hp = NULL;
    CU_OK(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(buf + 8)));
    CHECK(hp == buf + 8);
    CUdeviceptr start = 0;
    size_t size = 0;
    CU_OK(cu.cuMemGetAddressRange_v2(&start, &size, (CUdeviceptr)(buf + 5000)));
    CHECK(start == (CUdeviceptr)buf && size == len);
    CU(cu.cuMemHostUnregister(buf + 4096), CUDA_ERROR_INVALID_VALUE); /* not its start */
    CU_OK(cu.cuMemHostUnregister(buf));
    CU(cu.cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CU(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)buf),
       CUDA_ERROR_INVALID_VALUE);
    munmap(buf, len);
}

static CUmemAllocationProp vmm_prop(CUmemAllocationHandleType types)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = types;
    return prop;
}

static void vmm_rw(CUdeviceptr va, size_t size)
{
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_OK(cu.cuMemSetAccess(va, size, &acc, 1));
}

static void test_vmm(void)
{
    CUmemAllocationProp prop = vmm_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    size_t gran = 0;
    CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran >= 4096 && (gran & (gran - 1)) == 0);
    CUmemGenericAllocationHandle h, h2;
    CU(cu.cuMemCreate(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemCreate(&h, gran, &prop, 0));
    CUmemAllocationProp got;
    CU_OK(cu.cuMemGetAllocationPropertiesFromHandle(&got, h));
    CHECK(got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUdeviceptr va;
    CU_OK(cu.cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CHECK(va % gran == 0);
    /* Mapped at the reservation's second half. */
    CUdeviceptr at = va + gran;
    CU(cu.cuMemMap(at, gran, 4096, h, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemMap(at, gran, 0, h, 0));
    CU(cu.cuMemMap(at, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);     /* already mapped */
    CU(cu.cuMemMap(va, gran, 0, h + 8, 0), CUDA_ERROR_INVALID_VALUE); /* not a handle */

    char *buf = malloc(gran), *back = malloc(gran);
    CHECK(buf != NULL && back != NULL);
    fill(buf, gran, 21);
    /* No access set yet: the copy is refused. */
    CU(cu.cuMemcpyHtoD_v2(at, buf, 4096), CUDA_ERROR_INVALID_VALUE);
    vmm_rw(at, gran);
    int acc = 0;
    CU_OK(cu.cuPointerGetAttribute(&acc, (CUpointer_attribute)16 /* ACCESS_FLAGS */, at));
    CHECK(acc == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CU_OK(cu.cuMemcpyHtoD_v2(at, buf, gran));
    memset(back, 0xEE, gran);
    CU_OK(cu.cuMemcpyDtoH_v2(back, at, gran));
    check_pattern(back, gran, 21);

    /* Attributes: range = the reservation, cuMemGetAddressRange = the mapping. */
    int ipc = 1, ord = -1;
    unsigned int type = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned long long types = 0;
    CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at + 5));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    CU_OK(cu.cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, at));
    CHECK(ipc == 0);
    CU_OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, at));
    CHECK(ord == 0);
    CU_OK(cu.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, at + 5));
    CU_OK(cu.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, at + 5));
    CHECK(start == va && size == 2 * gran);
    CU_OK(cu.cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, at));
    CHECK(types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CU_OK(cu.cuMemGetAddressRange_v2(&start, &size, at + 5));
    CHECK(start == at && size == gran);
    /* Reserved, not mapped: unknown one by one, the reservation in a batch (an H200). */
    int mapped = 1;
    CU(cu.cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va),
       CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemGetAddressRange_v2(&start, &size, va), CUDA_ERROR_NOT_FOUND);
    CUpointer_attribute ra[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *rd[3] = {&type, &start, &size};
    CU_OK(cu.cuPointerGetAttributes(3, ra, rd, va + 5));
    CHECK(type == 0 && start == va && size == 2 * gran);
    CUipcMemHandle ih;
    CU(cu.cuIpcGetMemHandle(&ih, at), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(at + 100)));
    CHECK(h2 == h);
    CU_OK(cu.cuMemRelease(h2));

    /* Export as a descriptor, pass it over a socketpair to another process that imports it,
     * maps it, checks the pattern and writes a new one. */
    int fd = -1;
    CU(cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
       CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof(cbuf));
    char one = 'F';
    struct iovec iov = {.iov_base = &one, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    CHECK(sendmsg(sv[0], &msg, 0) == 1);
    close(fd);
    char arg[32];
    snprintf(arg, sizeof(arg), "%d", sv[1]);
    const char *env[] = {"IXL_CUDASIM_DELAY_US=0", NULL};
    expect_exit0(run_child("vmm", arg, sv[1], env), "vmm import");
    close(sv[0]);
    close(sv[1]);
    memset(back, 0xEE, gran);
    CU_OK(cu.cuMemcpyDtoH_v2(back, at, gran));
    check_pattern(back, gran, 22);

    /* Created without an exportable type: no export. */
    CUmemAllocationProp plain = vmm_prop(CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle hp;
    CU_OK(cu.cuMemCreate(&hp, gran, &plain, 0));
    CU(cu.cuMemExportToShareableHandle(&fd, hp, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)0,
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemRelease(hp));

    /* Release while mapped keeps the memory until the unmap. */
    CU_OK(cu.cuMemRelease(h));
    CU(cu.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemcpyDtoH_v2(back, at, 64));
    CU(cu.cuMemAddressFree(va, 2 * gran), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CU(cu.cuMemUnmap(at, gran / 2), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemUnmap(at, gran));
    CU(cu.cuMemcpyDtoH_v2(back, at, 64), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cu.cuMemAddressFree(va, 2 * gran));
    free(buf);
    free(back);
}

static void test_ipc(void)
{
    const size_t len = 300 * 1024 + 7;
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, len));
    char *buf = malloc(len);
    CHECK(buf != NULL);
    fill(buf, len, 31);
    CU_OK(cu.cuMemcpyHtoD_v2(d, buf, len));
    CUipcMemHandle h;
    CU_OK(cu.cuIpcGetMemHandle(&h, d + 64)); /* any address in it names the allocation */
    CUdeviceptr o;
    CU(cu.cuIpcOpenMemHandle_v2(&o, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       CUDA_ERROR_INVALID_CONTEXT); /* this process's own handle */
    char arg[2 * CU_IPC_HANDLE_SIZE + 1];
    hex_encode(h.reserved, CU_IPC_HANDLE_SIZE, arg);
    const char *env[] = {"IXL_CUDASIM_DELAY_US=0", NULL};
    expect_exit0(run_child("ipc", arg, -1, env), "ipc open");
    memset(buf, 0xEE, len);
    CU_OK(cu.cuMemcpyDtoH_v2(buf, d, len));
    check_pattern(buf, len, 32); /* the child's writes landed here */
    CU_OK(cu.cuMemFree_v2(d));
    free(buf);
}

/* ---- child processes -------------------------------------------------------------------- */

static int child_segv(void)
{
    /* "Forgot the device layer": the CPU reads VRAM directly. */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    init_ctx();
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, 4096));
    char host[64];
    memcpy(host, (const void *)(uintptr_t)d, sizeof(host));
    fprintf(stderr, "read device memory without a fault: %d\n", host[0]);
    return 3;
}

static int child_ipc(const char *hex)
{
    init_ctx();
    CUipcMemHandle h;
    hex_decode(hex, h.reserved, CU_IPC_HANDLE_SIZE);
    CUdeviceptr d, d2;
    CU(cu.cuIpcOpenMemHandle_v2(&d, h, 0), CUDA_ERROR_INVALID_VALUE); /* flags are required */
    CU_OK(cu.cuIpcOpenMemHandle_v2(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CU_OK(cu.cuIpcOpenMemHandle_v2(&d2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(d2 == d); /* opened twice: the same address, counted */
    const size_t len = 300 * 1024 + 7;
    CUdeviceptr start;
    size_t size;
    CU_OK(cu.cuMemGetAddressRange_v2(&start, &size, d + 10));
    CHECK(start == d && size == len);
    unsigned int type = 0;
    CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    char *buf = malloc(len);
    CHECK(buf != NULL);
    memset(buf, 0xEE, len);
    CU_OK(cu.cuMemcpyDtoH_v2(buf, d, len));
    check_pattern(buf, len, 31);
    fill(buf, len, 32);
    CU_OK(cu.cuMemcpyHtoD_v2(d, buf, len));
    CU_OK(cu.cuIpcCloseMemHandle(d));
    CU_OK(cu.cuMemcpyDtoH_v2(buf, d, 16)); /* one open left */
    CU_OK(cu.cuIpcCloseMemHandle(d));
    CU(cu.cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemcpyDtoH_v2(buf, d, 16), CUDA_ERROR_INVALID_VALUE);

    /* Forged handles: a wrong nonce, another descriptor of the exporter (its stdin), a pid
     * that is not the exporter, random bytes, a truncated size. Refused, no crash. */
    struct {
        uint32_t magic, version;
        int32_t pid, fd;
        uint64_t size;
        uint8_t nonce[16];
    } genuine, f;
    memcpy(&genuine, h.reserved, sizeof(genuine));
    CUipcMemHandle forged;
    f = genuine;
    f.nonce[3] ^= 0x40;
    memcpy(forged.reserved, &f, sizeof(f));
    CU(cu.cuIpcOpenMemHandle_v2(&d, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       CUDA_ERROR_INVALID_VALUE);
    f = genuine;
    f.fd = 0;
    memcpy(forged.reserved, &f, sizeof(f));
    CU(cu.cuIpcOpenMemHandle_v2(&d, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       CUDA_ERROR_INVALID_VALUE);
    f = genuine;
    f.pid = 1;
    memcpy(forged.reserved, &f, sizeof(f));
    CU(cu.cuIpcOpenMemHandle_v2(&d, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       CUDA_ERROR_INVALID_VALUE);
    f = genuine;
    f.size = 4096;
    memcpy(forged.reserved, &f, sizeof(f));
    CU(cu.cuIpcOpenMemHandle_v2(&d, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
       CUDA_ERROR_INVALID_VALUE);
    for (int i = 0; i < 64; i++) {
        fill(forged.reserved, sizeof(forged.reserved), 1000 + (uint32_t)i);
        if (i & 1)
            memcpy(forged.reserved, h.reserved, 8); /* right magic and version */
        CU(cu.cuIpcOpenMemHandle_v2(&d, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
           CUDA_ERROR_INVALID_VALUE);
    }
    free(buf);
    return 0;
}

static int child_vmm(const char *sock)
{
    init_ctx();
    int s = atoi(sock);
    char one;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &one, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    CHECK(recvmsg(s, &msg, 0) == 1);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    CHECK(cm != NULL && cm->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    CUmemGenericAllocationHandle h;
    CU(cu.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_WIN32),
       CUDA_ERROR_INVALID_VALUE);
    CU(cu.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)s,
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       CUDA_ERROR_INVALID_VALUE); /* a socket is not an allocation */
    CU_OK(cu.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd); /* the import holds its own reference */
    CUmemAllocationProp prop;
    CU_OK(cu.cuMemGetAllocationPropertiesFromHandle(&prop, h));
    size_t gran;
    CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va;
    CU_OK(cu.cuMemAddressReserve(&va, gran, 0, 0, 0));
    CU_OK(cu.cuMemMap(va, gran, 0, h, 0));
    CU_OK(cu.cuMemRelease(h));
    vmm_rw(va, gran);
    char *buf = malloc(gran);
    CHECK(buf != NULL);
    memset(buf, 0xEE, gran);
    CU_OK(cu.cuMemcpyDtoH_v2(buf, va, gran));
    check_pattern(buf, gran, 21);
    fill(buf, gran, 22);
    CU_OK(cu.cuMemcpyHtoD_v2(va, buf, gran));
    CU_OK(cu.cuMemUnmap(va, gran));
    CU_OK(cu.cuMemAddressFree(va, gran));
    free(buf);
    return 0;
}

/* IXL_CUDASIM_FAIL_COPY=3: copies 1 and 2 succeed, the third (async) fails. */
static int child_fail(void)
{
    init_ctx();
    const size_t len = 64 * 1024;
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, len));
    char *src = malloc(len), *dst = malloc(len);
    CHECK(src != NULL && dst != NULL);
    fill(src, len, 41);
    CU_OK(cu.cuMemcpyHtoD_v2(d, src, len)); /* copy 1 */
    CUstream s;
    CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent before, after, later;
    CU_OK(cu.cuEventCreate(&before, 0));
    CU_OK(cu.cuEventCreate(&after, 0));
    CU_OK(cu.cuEventCreate(&later, 0));
    memset(dst, 0xEE, len);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s)); /* copy 2 */
    CU_OK(cu.cuEventRecord(before, s));
    char *dst2 = malloc(len);
    CHECK(dst2 != NULL);
    memset(dst2, 0xEE, len);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst2, d, len, s)); /* copy 3: fails on the stream */
    CU_OK(cu.cuEventRecord(after, s));
    CU(cu.cuEventQuery(after), CUDA_ERROR_NOT_READY);
    CU_OK(cu.cuEventSynchronize(before));
    check_pattern(dst, len, 41);
    CU(cu.cuEventSynchronize(after), CUDA_ERROR_ILLEGAL_ADDRESS);
    CU(cu.cuEventQuery(after), CUDA_ERROR_ILLEGAL_ADDRESS);
    for (size_t i = 0; i < len; i++)
        CHECK((unsigned char)dst2[i] == 0xEE); /* nothing written */
    /* The stream stays failed (sticky); later work on it does not run. */
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst2, d, len, s)); /* copy 4 */
    CU_OK(cu.cuEventRecord(later, s));
    CU(cu.cuEventSynchronize(later), CUDA_ERROR_ILLEGAL_ADDRESS);
    CU(cu.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK((unsigned char)dst2[0] == 0xEE);
    CU_OK(cu.cuStreamDestroy_v2(s));
    /* Other streams and synchronous copies still work. */
    CU_OK(cu.cuStreamCreate(&s, 0));
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst2, d, len, s));
    CU_OK(cu.cuEventRecord(later, s));
    CU_OK(cu.cuEventSynchronize(later));
    check_pattern(dst2, len, 41);
    CU_OK(cu.cuStreamDestroy_v2(s));
    CU_OK(cu.cuEventDestroy_v2(before));
    CU_OK(cu.cuEventDestroy_v2(after));
    CU_OK(cu.cuEventDestroy_v2(later));
    CU_OK(cu.cuMemFree_v2(d));
    free(src);
    free(dst);
    free(dst2);
    return 0;
}

/* IXL_CUDASIM_FAIL_COPY=2,4 IXL_CUDASIM_FAIL_STICKY=0: the first event after each failed copy
 * reports it, and the stream runs on. */
static int child_fail_once(void)
{
    init_ctx();
    const size_t len = 16 * 1024;
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, len));
    char *src = malloc(len), *dst = malloc(len);
    CHECK(src != NULL && dst != NULL);
    fill(src, len, 61);
    CUstream s;
    CU_OK(cu.cuStreamCreate(&s, 0));
    CUevent e;
    CU_OK(cu.cuEventCreate(&e, 0));
    CU_OK(cu.cuMemcpyAsync(d, (CUdeviceptr)src, len, s)); /* copy 1 */
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s)); /* copy 2: fails */
    CU_OK(cu.cuEventRecord(e, s));
    CU(cu.cuEventSynchronize(e), CUDA_ERROR_ILLEGAL_ADDRESS);
    memset(dst, 0xEE, len);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s)); /* copy 3 */
    CU_OK(cu.cuEventRecord(e, s));
    CU_OK(cu.cuEventSynchronize(e));
    check_pattern(dst, len, 61);
    CU_OK(cu.cuMemcpyAsync((CUdeviceptr)dst, d, len, s)); /* copy 4: fails */
    CU(cu.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    CU_OK(cu.cuStreamDestroy_v2(s));
    CU_OK(cu.cuEventDestroy_v2(e));
    CU_OK(cu.cuMemFree_v2(d));
    free(src);
    free(dst);
    return 0;
}

/* IXL_CUDASIM_FAIL_COPY=1: a synchronous copy reports the failure itself. */
static int child_fail_sync(void)
{
    init_ctx();
    CUdeviceptr d;
    CU_OK(cu.cuMemAlloc_v2(&d, 4096));
    char buf[4096];
    memset(buf, 1, sizeof(buf));
    CU(cu.cuMemcpyHtoD_v2(d, buf, sizeof(buf)), CUDA_ERROR_ILLEGAL_ADDRESS);
    CU_OK(cu.cuMemcpyHtoD_v2(d, buf, sizeof(buf)));
    CU_OK(cu.cuMemFree_v2(d));
    return 0;
}

static int child_devices(void)
{
    init_ctx();
    int n = 0;
    CU_OK(cu.cuDeviceGetCount(&n));
    CHECK(n == 3);
    CUcontext c2;
    CU_OK(cu.cuDevicePrimaryCtxRetain(&c2, 2));
    CHECK(c2 != ctx0);
    int bus0, bus2;
    CU_OK(cu.cuDeviceGetAttribute(&bus0, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0));
    CU_OK(cu.cuDeviceGetAttribute(&bus2, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 2));
    CHECK(bus0 != bus2);
    CUdeviceptr a, b;
    CU_OK(cu.cuMemAlloc_v2(&a, 8192));
    CU_OK(cu.cuCtxSetCurrent(c2));
    CU_OK(cu.cuMemAlloc_v2(&b, 8192));
    int ord = -1;
    CU_OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
    CHECK(ord == 2);
    CU_OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    CHECK(ord == 0);
    /* Peer copy (unified addressing): device 0's memory into device 2's. */
    char buf[8192], back[8192];
    fill(buf, sizeof(buf), 51);
    CU_OK(cu.cuCtxSetCurrent(ctx0));
    CU_OK(cu.cuMemcpyHtoD_v2(a, buf, sizeof(buf)));
    CU_OK(cu.cuCtxSetCurrent(c2));
    CU_OK(cu.cuMemcpy(b, a, sizeof(buf)));
    CU_OK(cu.cuMemcpyDtoH_v2(back, b, sizeof(back)));
    check_pattern(back, sizeof(back), 51);
    /* A stream belongs to its context. */
    CUstream s;
    CU_OK(cu.cuStreamCreate(&s, 0));
    CU_OK(cu.cuCtxSetCurrent(ctx0));
    CU(cu.cuMemcpyAsync(a, b, 16, s), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cu.cuStreamDestroy_v2(s));
    /* A released context is no longer usable. */
    CU_OK(cu.cuDevicePrimaryCtxRelease_v2(2));
    CU_OK(cu.cuCtxSetCurrent(c2));
    CU(cu.cuMemFree_v2(b), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CU(cu.cuDevicePrimaryCtxRelease_v2(2), CUDA_ERROR_INVALID_CONTEXT);
    return 0;
}

static int child_nodevice(void)
{
    CU(cu.cuInit(0), CUDA_ERROR_NO_DEVICE);
    int n;
    CU(cu.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    return 0;
}

static int child_stub(void)
{
    CU(cu.cuInit(0), CUDA_ERROR_STUB_LIBRARY);
    int v;
    CU(cu.cuDriverGetVersion(&v), CUDA_ERROR_STUB_LIBRARY);
    const char *s = "x";
    CU(cu.cuGetErrorName(CUDA_ERROR_STUB_LIBRARY, &s), CUDA_ERROR_STUB_LIBRARY);
    CHECK(s == NULL); /* as the toolkit's stub libcuda.so answers */
    CU(cu.cuGetErrorString(CUDA_ERROR_STUB_LIBRARY, &s), CUDA_ERROR_STUB_LIBRARY);
    return 0;
}

static int child_main(const char *mode, const char *arg)
{
    load();
    if (strcmp(mode, "segv") == 0)
        return child_segv();
    if (strcmp(mode, "ipc") == 0)
        return child_ipc(arg);
    if (strcmp(mode, "vmm") == 0)
        return child_vmm(arg);
    if (strcmp(mode, "fail") == 0)
        return child_fail();
    if (strcmp(mode, "failonce") == 0)
        return child_fail_once();
    if (strcmp(mode, "failsync") == 0)
        return child_fail_sync();
    if (strcmp(mode, "devices") == 0)
        return child_devices();
    if (strcmp(mode, "nodevice") == 0)
        return child_nodevice();
    if (strcmp(mode, "stub") == 0)
        return child_stub();
    fprintf(stderr, "unknown child mode %s\n", mode);
    return 2;
}

/* The cases that need their own configuration, in children started before this process's
 * own cases and waited for after them (each child starts a sanitizer runtime: the slow part
 * of this test, so they overlap). */
static const struct {
    const char *mode;
    const char *env[4];
} child_cases[] = {
    /* The sanitizers catch SIGSEGV themselves and exit 1; the child must die of the signal. */
    {"segv",
     {"ASAN_OPTIONS=handle_segv=0:detect_leaks=0", "TSAN_OPTIONS=handle_segv=0",
      "UBSAN_OPTIONS=handle_segv=0", NULL}},
    {"fail", {"IXL_CUDASIM_FAIL_COPY=3", NULL}},
    {"failsync", {"IXL_CUDASIM_FAIL_COPY=1", NULL}},
    {"failonce", {"IXL_CUDASIM_FAIL_COPY=2,4", "IXL_CUDASIM_FAIL_STICKY=0", NULL}},
    {"devices", {"IXL_CUDASIM_DEVICES=3", "IXL_CUDASIM_DELAY_US=0", NULL}},
    {"nodevice", {"IXL_CUDASIM_NO_DEVICE=1", NULL}},
    {"stub", {"IXL_CUDASIM_STUB=1", NULL}},
};
#define N_CHILD_CASES (sizeof(child_cases) / sizeof(child_cases[0]))

static void children_start(pid_t *pids)
{
    for (size_t i = 0; i < N_CHILD_CASES; i++)
        pids[i] = spawn_child(child_cases[i].mode, NULL, -1, child_cases[i].env);
}

static void children_check(const pid_t *pids)
{
    for (size_t i = 0; i < N_CHILD_CASES; i++) {
        int st = wait_child(pids[i]);
        if (strcmp(child_cases[i].mode, "segv") == 0) {
            if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV)
                check_fail(__FILE__, __LINE__,
                           "CPU read of device memory: status %#x, want death by SIGSEGV", st);
        } else {
            expect_exit0(st, child_cases[i].mode);
        }
    }
}

int main(int argc, char **argv)
{
    self_exe = "/proc/self/exe";
    if (argc >= 3 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2], argc >= 4 ? argv[3] : NULL);
    /* This process's sim configuration (read at the sim's first call). */
    setenv("IXL_CUDASIM_DELAY_US", DELAY_US, 1);
    unsetenv("IXL_CUDASIM_FAIL_COPY");
    unsetenv("IXL_CUDASIM_DEVICES");
    unsetenv("IXL_CUDASIM_NO_DEVICE");
    unsetenv("IXL_CUDASIM_STUB");
    pid_t children[N_CHILD_CASES];
    children_start(children);
    load();
    test_init_and_devices();
    test_memory_and_attributes();
    test_streams_events();
    test_threads();
    test_forked_child();
    test_host_register();
    test_vmm();
    test_ipc();
    children_check(children);
    printf("test_cudasim: all passed\n");
    return 0;
}

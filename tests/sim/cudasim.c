/*
 * libixl_cudasim.so: a simulated CUDA driver (tests/sim/README.md). Tests point
 * IXL_CUDA_LIBRARY at it so ixl's real device layer runs on a machine without a GPU. It exports
 * the driver entry points of src/device/cuda_api.h under their exported names with CUDA's
 * semantics and error codes, as far as ixl can observe them:
 *
 * - Device memory is a memfd per allocation. Its device address is a PROT_NONE shared mapping
 *   of the memfd, so any code that touches VRAM without the copy calls faults; the sim keeps a
 *   private read-write alias mapping of the same memfd and copies through it.
 * - Copies on a stream run on that stream's worker thread, in order, each after
 *   IXL_CUDASIM_DELAY_US; events complete when the work before them has.
 * - Contexts are per-thread (thread-local current context); calls that need one fail with
 *   CUDA_ERROR_INVALID_CONTEXT on a thread that has none, as CUDA does.
 * - Legacy IPC handles name the exporting process and its memfd's descriptor (opened by the
 *   importer through /proc/<pid>/fd/<fd>) and carry a random nonce that the memfd's trailer page
 *   must match; VMM handles export a dup of the memfd (a real descriptor: SCM_RIGHTS carries it).
 *
 * Configuration is read from the environment here (a test artifact, not ixl code):
 * IXL_CUDASIM_DEVICES, IXL_CUDASIM_NO_DEVICE, IXL_CUDASIM_STUB, IXL_CUDASIM_DELAY_US,
 * IXL_CUDASIM_FAIL_COPY, IXL_CUDASIM_MEM_MB, IXL_CUDASIM_NO_KERNEL, IXL_CUDASIM_NO_BATCH.
 *
 * Lock order: g_lock (contexts, memory tables) before a stream's mu before g_ev_lock. A stream
 * worker holds no lock while it copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/cuda_api.h"

/* Every entry point, declared from cuda_api.h's function types and exported. */
#define SIM_DECLARE(name) __attribute__((visibility("default"))) ixl_##name##_fn name;
IXL_CUDA_LAYER_ENTRY_POINTS(SIM_DECLARE)
IXL_CUDA_OTHER_ENTRY_POINTS(SIM_DECLARE)
IXL_CUDA_BATCH_ENTRY_POINTS(SIM_DECLARE)
#undef SIM_DECLARE

/* Pointer attributes beyond cuda_api.h's list (cuda.h 12.x values). */
#define SIM_PTR_ATTR_SYNC_MEMOPS 6
#define SIM_PTR_ATTR_ACCESS_FLAGS 16
#define SIM_PTR_ATTR_MEMPOOL_HANDLE 17
#define SIM_PTR_ATTR_MAPPING_SIZE 18
#define SIM_PTR_ATTR_MAPPING_BASE_ADDR 19

#define SIM_MAX_DEVICES 16
#define SIM_MAX_FAILS 16
#define SIM_DRIVER_VERSION 12060 /* what cuDriverGetVersion reports: CUDA 12.6 */
#define SIM_VMM_GRANULARITY ((size_t)2 << 20)
#define SIM_TRAILER 4096 /* the memfd's last page: who it is, for importers to verify */
#define SIM_MEMFD_NAME "ixl_cudasim"
#define SIM_STREAM_MAGIC 0x5354524du
#define SIM_EVENT_MAGIC 0x4556454eu
#define SIM_IPC_MAGIC 0x49584c49u /* "IXLI" */
#define SIM_IPC_VERSION 1u

/* ---- configuration ---------------------------------------------------------------------- */

static struct {
    int devices;
    bool no_device;
    bool stub;
    unsigned delay_us;
    unsigned sync_late_us; /* cuEventSynchronize returns this long after the event is done */
    long fail_copy[SIM_MAX_FAILS]; /* which copies fail (1-based; 0 ends the list) */
    bool fail_sticky;              /* a failed stream stays failed */
    size_t mem_bytes;
    bool no_kernel; /* cuModuleLoadDataEx refuses every image (a driver too old for its PTX) */
    bool no_batch;  /* cuMemcpyBatchAsync_v2 answers CUDA_ERROR_NOT_SUPPORTED */
} g_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "cudasim: %s=%s is not a number in [%ld, %ld]; using %ld\n", name, s, lo,
                hi, dflt);
        return dflt;
    }
    return v;
}

static bool env_flag(const char *name)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

/* IXL_CUDASIM_FAIL_COPY: N or N,M,... (copies counted from 1 across the process). */
static void fail_list_load(void)
{
    const char *s = getenv("IXL_CUDASIM_FAIL_COPY");
    int n = 0;
    while (s != NULL && *s != '\0' && n < SIM_MAX_FAILS) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno != 0 || end == s || v <= 0 || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "cudasim: IXL_CUDASIM_FAIL_COPY=%s is not N or N,M,... (N >= 1)\n",
                    getenv("IXL_CUDASIM_FAIL_COPY"));
            n = 0;
            break;
        }
        g_cfg.fail_copy[n++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    if (n < SIM_MAX_FAILS)
        g_cfg.fail_copy[n] = 0;
}

static void cfg_load(void)
{
    g_cfg.devices = (int)env_long("IXL_CUDASIM_DEVICES", 1, 0, SIM_MAX_DEVICES);
    g_cfg.no_device = env_flag("IXL_CUDASIM_NO_DEVICE") || g_cfg.devices == 0;
    g_cfg.stub = env_flag("IXL_CUDASIM_STUB");
    g_cfg.delay_us = (unsigned)env_long("IXL_CUDASIM_DELAY_US", 200, 0, 10 * 1000 * 1000);
    g_cfg.sync_late_us = (unsigned)env_long("IXL_CUDASIM_SYNC_LATE_US", 0, 0, 10 * 1000 * 1000);
    fail_list_load();
    const char *sticky = getenv("IXL_CUDASIM_FAIL_STICKY");
    g_cfg.fail_sticky = sticky == NULL || *sticky == '\0' || strcmp(sticky, "0") != 0;
    g_cfg.mem_bytes = (size_t)env_long("IXL_CUDASIM_MEM_MB", 16384, 1, 1L << 30) << 20;
    g_cfg.no_kernel = env_flag("IXL_CUDASIM_NO_KERNEL");
    g_cfg.no_batch = env_flag("IXL_CUDASIM_NO_BATCH");
}

static void cfg_get(void)
{
    pthread_once(&g_cfg_once, cfg_load);
}

/* ---- state ------------------------------------------------------------------------------ */

struct CUstream_st;

struct CUctx_st {
    int dev;
    int refs;                 /* primary context retains; usable while > 0 (g_lock) */
    struct CUstream_st *dflt; /* the legacy default stream, made on first use (g_lock) */
};

/* A memfd: a cuMemAlloc allocation's, a cuMemCreate handle's, or an imported one. */
struct sim_phys {
    int fd;      /* -1 once nothing needs it (IPC imports close it after mapping) */
    size_t size; /* bytes of data (the trailer page follows in the memfd) */
    int dev;
    bool vmm;
    CUmemAllocationProp prop; /* VMM: as created (or as the trailer says, for imports) */
    bool accounted;           /* counts against its device's memory (not an import) */
    int handles;              /* g_lock: VMM handles held (create, import, retain) */
    int refs;                 /* g_lock: handles + regions mapping it */
    struct sim_phys *next;
};

enum sim_kind { SIM_ALLOC, SIM_IPC, SIM_VMM, SIM_HOSTREG };

/* A range of addresses this process knows: device memory (with its alias) or registered host
 * memory. Freed when unlisted and no copy in flight holds it. */
struct sim_region {
    enum sim_kind kind;
    uintptr_t base;
    size_t len;     /* cuMemAlloc: the requested size; VMM: the mapping's size */
    size_t map_len; /* bytes mapped at base (page-rounded) */
    int dev;
    uint64_t buffer_id;
    struct CUctx_st *ctx; /* NULL for VMM */
    char *alias;          /* read-write view of [base, base + map_len) */
    struct sim_phys *phys;
    int access;      /* VMM: CUmemAccess_flags set by cuMemSetAccess */
    bool host_alloc; /* SIM_HOSTREG made by cuMemHostAlloc (freed by cuMemFreeHost) */
    bool devmap;     /* ... with CU_MEMHOSTALLOC_DEVICEMAP: kernels may read it */
    int refs;        /* g_lock: 1 while listed + 1 per copy in flight */
    bool listed;
    /* SIM_IPC: who exported it, and how many opens are outstanding */
    int ipc_pid, ipc_fd, ipc_opens;
    uint8_t ipc_nonce[16];
    struct sim_region *next;
};

/* A cuMemAddressReserve range. */
struct sim_resv {
    uintptr_t base;
    size_t len;
    struct sim_resv *next;
};

/* What the memfd's trailer page says (pwrite at offset size). */
struct sim_trailer {
    char magic[8];
    uint64_t size;
    uint8_t nonce[16];
    int32_t dev;
    int32_t vmm;
    CUmemAllocationProp prop;
};

/* The 64 bytes of a CUipcMemHandle. */
struct sim_ipc {
    uint32_t magic;
    uint32_t version;
    int32_t pid;
    int32_t fd;
    uint64_t size;
    uint8_t nonce[16];
    int32_t dev;
    uint8_t pad[20];
};
_Static_assert(sizeof(struct sim_ipc) == CU_IPC_HANDLE_SIZE, "IPC handle layout");

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* cuInit ran, in the process with this pid (0: not yet). A child forked after cuInit gets
 * CUDA_ERROR_NOT_INITIALIZED from everything, as CUDA's forked children do (its threads and
 * locks did not come along); atomic, so such a child never waits on a lock it inherited. */
static atomic_int g_init_pid;
static struct CUctx_st g_ctx[SIM_MAX_DEVICES];
static size_t g_used[SIM_MAX_DEVICES]; /* g_lock: bytes allocated per device */
static struct sim_region *g_regions;   /* g_lock */
static struct sim_resv *g_resvs;       /* g_lock */
static struct sim_phys *g_phys;        /* g_lock */
static uint64_t g_next_buffer_id = 1;  /* g_lock */
static atomic_long g_copies;           /* copies enqueued so far (IXL_CUDASIM_FAIL_COPY) */
static _Thread_local struct CUctx_st *t_current;

static pthread_mutex_t g_ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ev_cv = PTHREAD_COND_INITIALIZER;

/* ---- helpers ---------------------------------------------------------------------------- */

static bool initialized(void)
{
    int pid = atomic_load(&g_init_pid);
    return pid != 0 && pid == (int)getpid();
}

/* CUDA_SUCCESS when the driver is usable: the stub refuses all, cuInit must have run. */
static CUresult check_init(void)
{
    cfg_get();
    if (g_cfg.stub)
        return CUDA_ERROR_STUB_LIBRARY;
    if (!initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    return CUDA_SUCCESS;
}

/* The calling thread's current context, which must be a retained one (a primary context
 * released to 0 is destroyed: CUDA_ERROR_CONTEXT_IS_DESTROYED, as an H200 answers). */
static CUresult current_ctx(struct CUctx_st **out)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUctx_st *c = t_current;
    if (c == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_lock);
    int refs = c->refs;
    pthread_mutex_unlock(&g_lock);
    if (refs <= 0)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

static bool valid_dev(CUdevice d)
{
    return d >= 0 && d < g_cfg.devices;
}

static size_t page_size(void)
{
    static size_t ps;
    if (ps == 0)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

static void sleep_us(unsigned us)
{
    if (us == 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* g_lock held. The region containing addr (device memory first, then registered host). */
static struct sim_region *region_find(uintptr_t addr)
{
    struct sim_region *host = NULL;
    for (struct sim_region *r = g_regions; r != NULL; r = r->next) {
        if (addr >= r->base && addr - r->base < r->len) {
            if (r->kind != SIM_HOSTREG)
                return r;
            host = r;
        }
    }
    return host;
}

/* g_lock held. Whether [addr, addr + len) overlaps device memory or a VMM reservation. */
static bool overlaps_device(uintptr_t addr, size_t len)
{
    for (struct sim_region *r = g_regions; r != NULL; r = r->next) {
        if (r->kind != SIM_HOSTREG && addr < r->base + r->map_len && r->base < addr + len)
            return true;
    }
    for (struct sim_resv *v = g_resvs; v != NULL; v = v->next) {
        if (addr < v->base + v->len && v->base < addr + len)
            return true;
    }
    return false;
}

/* g_lock held. */
static struct sim_resv *resv_find(uintptr_t addr)
{
    for (struct sim_resv *v = g_resvs; v != NULL; v = v->next) {
        if (addr >= v->base && addr - v->base < v->len)
            return v;
    }
    return NULL;
}

/* g_lock held. */
static bool phys_listed(const struct sim_phys *p)
{
    for (struct sim_phys *q = g_phys; q != NULL; q = q->next) {
        if (q == p)
            return true;
    }
    return false;
}

/* g_lock held. Drops a reference; the last one closes the memfd. */
static void phys_put(struct sim_phys *p)
{
    if (--p->refs > 0)
        return;
    for (struct sim_phys **pp = &g_phys; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    if (p->accounted)
        g_used[p->dev] -= p->size;
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

/* g_lock held. Drops a reference; the last one unmaps the alias. */
static void region_put(struct sim_region *r)
{
    if (--r->refs > 0)
        return;
    if (r->alias != NULL)
        munmap(r->alias, r->map_len);
    if (r->phys != NULL)
        phys_put(r->phys);
    if (r->host_alloc)
        munmap((void *)r->base, r->map_len);
    free(r);
}

/* g_lock held. Takes r off the list (its addresses are no longer known). */
static void region_unlist(struct sim_region *r)
{
    for (struct sim_region **pp = &g_regions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    r->listed = false;
    region_put(r);
}

/* g_lock held. */
static void region_list(struct sim_region *r)
{
    r->refs = 1;
    r->listed = true;
    r->buffer_id = g_next_buffer_id++;
    r->next = g_regions;
    g_regions = r;
}

/* Whether every page of [addr, addr + len) is mapped in this process. */
static bool host_mapped(uintptr_t addr, size_t len)
{
    size_t ps = page_size();
    uintptr_t start = addr & ~(uintptr_t)(ps - 1);
    uintptr_t end = addr + len;
    if (end < addr)
        return false;
    unsigned char vec[256];
    while (start < end) {
        size_t pages = (end - start + ps - 1) / ps;
        if (pages > sizeof(vec))
            pages = sizeof(vec);
        if (mincore((void *)start, pages * ps, vec) != 0)
            return false;
        start += pages * ps;
    }
    return true;
}

/* A new memfd of size data bytes plus the trailer page that says who it is. */
static CUresult memfd_make(size_t size, int dev, bool vmm, const CUmemAllocationProp *prop,
                           struct sim_trailer *tr_out, int *fd_out)
{
    /* Named after the creating process ("ixl_cudasim.PID" in /proc/PID/maps): a test tells the
     * allocations it imported from a peer from its own (the device layer's tables among them). */
    char name[48];
    snprintf(name, sizeof(name), SIM_MEMFD_NAME ".%d", (int)getpid());
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_trailer tr;
    memset(&tr, 0, sizeof(tr));
    memcpy(tr.magic, "IXLCSIM1", 8);
    tr.size = size;
    tr.dev = dev;
    tr.vmm = vmm;
    if (prop != NULL)
        tr.prop = *prop;
    if (getrandom(tr.nonce, sizeof(tr.nonce), 0) != (ssize_t)sizeof(tr.nonce))
        goto close_fd;
    if (ftruncate(fd, (off_t)(size + SIM_TRAILER)) != 0)
        goto close_fd;
    if (pwrite(fd, &tr, sizeof(tr), (off_t)size) != (ssize_t)sizeof(tr))
        goto close_fd;
    /* Nobody may resize it under a mapping (a shrunk memfd would SIGBUS the copier). */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        goto close_fd;
    *tr_out = tr;
    *fd_out = fd;
    return CUDA_SUCCESS;
close_fd:
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Whether fd is one of the sim's memfds whose trailer reads back; fills *tr. */
static bool memfd_check(int fd, const char *proc_path, struct sim_trailer *tr)
{
    char link[256];
    ssize_t n = readlink(proc_path, link, sizeof(link) - 1);
    if (n <= 0)
        return false;
    link[n] = '\0';
    if (strncmp(link, "/memfd:" SIM_MEMFD_NAME, strlen("/memfd:" SIM_MEMFD_NAME)) != 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < SIM_TRAILER)
        return false;
    size_t size = (size_t)st.st_size - SIM_TRAILER;
    if (pread(fd, tr, sizeof(*tr), (off_t)size) != (ssize_t)sizeof(*tr))
        return false;
    return memcmp(tr->magic, "IXLCSIM1", 8) == 0 && tr->size == size;
}

/* Maps [0, len) of fd at a PROT_NONE device address (at `at` when not NULL) and a read-write
 * alias. */
static CUresult map_pair(int fd, size_t len, void *at, void **dev_out, char **alias_out)
{
    int fixed = at != NULL ? MAP_FIXED : 0;
    void *dev = mmap(at, len, PROT_NONE, MAP_SHARED | fixed, fd, 0);
    if (dev == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (alias == MAP_FAILED) {
        if (at == NULL)
            munmap(dev, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dev_out = dev;
    *alias_out = alias;
    return CUDA_SUCCESS;
}

/* ---- initialization, devices, contexts ------------------------------------------------- */

CUresult cuInit(unsigned int flags)
{
    cfg_get();
    if (g_cfg.stub)
        return CUDA_ERROR_STUB_LIBRARY;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (g_cfg.no_device)
        return CUDA_ERROR_NO_DEVICE;
    int pid = atomic_load(&g_init_pid);
    if (pid != 0)
        return pid == (int)getpid() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        g_ctx[i].dev = i;
    pthread_mutex_unlock(&g_lock);
    int zero = 0;
    atomic_compare_exchange_strong(&g_init_pid, &zero, (int)getpid());
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    cfg_get();
    if (g_cfg.stub)
        return CUDA_ERROR_STUB_LIBRARY;
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *version = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static const char *error_name(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS:
        return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
        return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
        return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
        return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
        return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
        return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_INVALID_CONTEXT:
        return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case CUDA_ERROR_MAP_FAILED:
        return "CUDA_ERROR_MAP_FAILED";
    case CUDA_ERROR_ALREADY_MAPPED:
        return "CUDA_ERROR_ALREADY_MAPPED";
    case CUDA_ERROR_NOT_MAPPED:
        return "CUDA_ERROR_NOT_MAPPED";
    case CUDA_ERROR_INVALID_HANDLE:
        return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
        return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
        return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
        return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
        return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
    case CUDA_ERROR_NOT_PERMITTED:
        return "CUDA_ERROR_NOT_PERMITTED";
    case CUDA_ERROR_NOT_SUPPORTED:
        return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_UNKNOWN:
        return "CUDA_ERROR_UNKNOWN";
    default:
        return NULL;
    }
}

/* CUDA's own texts (cuGetErrorString) for the codes the sim returns. */
static const char *error_string(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS:
        return "no error";
    case CUDA_ERROR_INVALID_VALUE:
        return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY:
        return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED:
        return "initialization error";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        return "no kernel image is available for execution on the device";
    case CUDA_ERROR_INVALID_PTX:
        return "a PTX JIT compilation failed";
    case CUDA_ERROR_DEINITIALIZED:
        return "driver shutting down";
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA driver is a stub library";
    case CUDA_ERROR_NO_DEVICE:
        return "no CUDA-capable device is detected";
    case CUDA_ERROR_INVALID_DEVICE:
        return "invalid device ordinal";
    case CUDA_ERROR_INVALID_CONTEXT:
        return "invalid device context";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return "context is destroyed";
    case CUDA_ERROR_MAP_FAILED:
        return "mapping of buffer object failed";
    case CUDA_ERROR_ALREADY_MAPPED:
        return "resource already mapped";
    case CUDA_ERROR_NOT_MAPPED:
        return "resource not mapped";
    case CUDA_ERROR_INVALID_HANDLE:
        return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND:
        return "named symbol not found";
    case CUDA_ERROR_NOT_READY:
        return "device not ready";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "an illegal memory access was encountered";
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
        return "part or all of the requested memory range is already mapped";
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
        return "pointer does not correspond to a registered memory region";
    case CUDA_ERROR_NOT_PERMITTED:
        return "operation not permitted";
    case CUDA_ERROR_NOT_SUPPORTED:
        return "operation not supported";
    case CUDA_ERROR_UNKNOWN:
        return "unknown error";
    default:
        return NULL;
    }
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
    cfg_get();
    if (g_cfg.stub) {
        /* The toolkit's stub answers these too with CUDA_ERROR_STUB_LIBRARY. */
        if (str != NULL)
            *str = NULL;
        return CUDA_ERROR_STUB_LIBRARY;
    }
    if (str == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *str = error_name(error);
    return *str != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
    cfg_get();
    if (g_cfg.stub) {
        if (str != NULL)
            *str = NULL;
        return CUDA_ERROR_STUB_LIBRARY;
    }
    if (str == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *str = error_string(error);
    return *str != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g_cfg.devices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "ixl cudasim GPU %d (simulated)", dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    int a = (int)attrib;
    if (a <= 0 || a >= 200)
        return CUDA_ERROR_INVALID_VALUE;
    int v = 0;
    switch (a) {
    case 1:
        v = 1024;
        break; /* MAX_THREADS_PER_BLOCK */
    case 10:
        v = 32;
        break; /* WARP_SIZE */
    case 16:
        v = 4;
        break; /* MULTIPROCESSOR_COUNT */
    case 19:
        v = 1;
        break; /* CAN_MAP_HOST_MEMORY */
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        v = 0x10 + dev;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        v = 0;
        break;
    case 40:
        v = 2;
        break; /* ASYNC_ENGINE_COUNT */
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        v = 0;
        break;
    case 91:
        v = 1;
        break; /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    case 99:
        v = 1;
        break; /* HOST_REGISTER_SUPPORTED */
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        v = 1;
        break;
    default:
        v = 0;
        break;
    }
    *value = v;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = g_cfg.mem_bytes;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    g_ctx[dev].refs++;
    pthread_mutex_unlock(&g_lock);
    *ctx = &g_ctx[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!valid_dev(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    rc = g_ctx[dev].refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (rc == CUDA_SUCCESS)
        g_ctx[dev].refs--;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx != NULL && (ctx < &g_ctx[0] || ctx >= &g_ctx[g_cfg.devices]))
        return CUDA_ERROR_INVALID_CONTEXT;
    t_current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = t_current;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

/* ---- memory ----------------------------------------------------------------------------- */

CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t map_len = round_up(bytes, page_size());
    if (map_len < bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    bool room = g_used[c->dev] + map_len <= g_cfg.mem_bytes;
    if (room)
        g_used[c->dev] += map_len;
    pthread_mutex_unlock(&g_lock);
    if (!room)
        return CUDA_ERROR_OUT_OF_MEMORY;

    struct sim_region *r = calloc(1, sizeof(*r));
    struct sim_phys *p = calloc(1, sizeof(*p));
    struct sim_trailer tr;
    void *dev = NULL;
    if (r == NULL || p == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto free_structs;
    }
    rc = memfd_make(map_len, c->dev, false, NULL, &tr, &p->fd);
    if (rc != CUDA_SUCCESS)
        goto free_structs;
    rc = map_pair(p->fd, map_len, NULL, &dev, &r->alias);
    if (rc != CUDA_SUCCESS)
        goto close_fd;
    p->size = map_len;
    p->dev = c->dev;
    p->accounted = true;
    p->refs = 1; /* the region's */
    r->kind = SIM_ALLOC;
    r->base = (uintptr_t)dev;
    r->len = bytes;
    r->map_len = map_len;
    r->dev = c->dev;
    r->ctx = c;
    r->phys = p;
    memcpy(r->ipc_nonce, tr.nonce, sizeof(r->ipc_nonce));
    pthread_mutex_lock(&g_lock);
    p->next = g_phys;
    g_phys = p;
    region_list(r);
    pthread_mutex_unlock(&g_lock);
    *ptr = (CUdeviceptr)(uintptr_t)dev;
    return CUDA_SUCCESS;

close_fd:
    close(p->fd);
free_structs:
    free(r);
    free(p);
    pthread_mutex_lock(&g_lock);
    g_used[c->dev] -= map_len;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

CUresult cuMemFree_v2(CUdeviceptr ptr)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ptr == 0)
        return CUDA_SUCCESS; /* as cudaFree(NULL) */
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    if (r == NULL || r->kind != SIM_ALLOC || r->base != (uintptr_t)ptr) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The address stops being device memory now; a copy in flight keeps the alias. */
    munmap((void *)r->base, r->map_len);
    region_unlist(r);
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* No current context needed (a real driver answers without one); registered host memory
 * gives its registered range. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    if (r == NULL) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_NOT_FOUND;
    }
    /* VMM: the mapping (cuMemMap's range), not the reservation. */
    if (base != NULL)
        *base = (CUdeviceptr)r->base;
    if (size != NULL)
        *size = r->len;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* What one pointer attribute reads for region r (NULL: memory the driver does not know, which
 * includes a reserved but unmapped VMM range, as on an H200; resv: the VMM reservation around
 * a mapping). CUDA_ERROR_INVALID_VALUE where cuPointerGetAttribute answers so. g_lock held. */
static CUresult attr_get(void *data, int attr, uintptr_t ptr, const struct sim_region *r,
                         const struct sim_resv *resv)
{
    if (r == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    bool dev = r->kind != SIM_HOSTREG;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = r->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = (CUdeviceptr)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = dev ? NULL : (void *)ptr;
        if (dev)
            return CUDA_ERROR_INVALID_VALUE; /* no CPU address (NULL written, as a GPU does) */
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = r->buffer_id;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r->dev;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = r->kind == SIM_ALLOC;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        /* VMM: the reservation the mapping lies in (cuda.h's documentation), not the mapping */
        *(CUdeviceptr *)data = (CUdeviceptr)(resv != NULL ? resv->base : r->base);
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = resv != NULL ? resv->len : r->len;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data =
            r->kind == SIM_VMM ? (unsigned long long)r->phys->prop.requestedHandleTypes : 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        /* an H200 says 1 for cuMemAlloc memory, 0 opened through IPC; VMM as requested */
        *(int *)data = r->kind == SIM_ALLOC ||
                       (r->kind == SIM_VMM && r->phys->prop.allocFlags.gpuDirectRDMACapable);
        break;
    case SIM_PTR_ATTR_SYNC_MEMOPS:
        *(int *)data = 0;
        break;
    case SIM_PTR_ATTR_ACCESS_FLAGS:
        *(int *)data = r->kind == SIM_VMM ? r->access : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        break;
    case SIM_PTR_ATTR_MEMPOOL_HANDLE:
        *(void **)data = NULL;
        break;
    case SIM_PTR_ATTR_MAPPING_SIZE:
        /* cuMemAlloc memory lies in 2 MiB granules (an H200 says 2 MiB for 1 MiB + 100) */
        *(size_t *)data = r->kind == SIM_ALLOC || r->kind == SIM_IPC
                              ? round_up(r->len, SIM_VMM_GRANULARITY)
                              : r->len;
        break;
    case SIM_PTR_ATTR_MAPPING_BASE_ADDR:
        *(void **)data = (void *)r->base;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Like cuMemGetAddressRange_v2, no current context needed. */
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    struct sim_resv *v = r != NULL && r->kind == SIM_VMM ? resv_find((uintptr_t)ptr) : NULL;
    rc = attr_get(data, (int)attribute, (uintptr_t)ptr, r, v);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* The value cuPointerGetAttributes writes for memory the driver does not know ("default NULL
 * values"): zeros, the device ordinal -2 (CUDA's invalid device id), and the range attributes
 * left as they were (what an H200 does). */
static void attr_default(void *data, int attr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case SIM_PTR_ATTR_MAPPING_SIZE:
    case SIM_PTR_ATTR_MAPPING_BASE_ADDR:
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case SIM_PTR_ATTR_MEMPOOL_HANDLE:
        *(void **)data = NULL;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = -2;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = 0;
        break;
    default:
        *(int *)data = 0;
        break;
    }
}

static bool attr_known(int attr)
{
    /* All of cuda.h's 1-19 but P2P_TOKENS (5), which needs nv-p2p. */
    return attr >= CU_POINTER_ATTRIBUTE_CONTEXT && attr <= SIM_PTR_ATTR_MAPPING_BASE_ADDR &&
           attr != 5;
}

CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == 0 || attributes == NULL || data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        if (data[i] == NULL || !attr_known((int)attributes[i]))
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* Unlike cuPointerGetAttribute, unknown pointers are no error: defaults and success. */
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    struct sim_resv *v = r == NULL || r->kind == SIM_VMM ? resv_find((uintptr_t)ptr) : NULL;
    for (unsigned i = 0; i < count; i++) {
        int a = (int)attributes[i];
        if (r == NULL && v != NULL && a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(CUdeviceptr *)data[i] = (CUdeviceptr)v->base; /* reserved, unmapped: an H200 */
        else if (r == NULL && v != NULL && a == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
            *(size_t *)data[i] = v->len; /* gives the reservation here, an error one by one */
        else if (attr_get(data[i], a, (uintptr_t)ptr, r, v) != CUDA_SUCCESS)
            attr_default(data[i], a);
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* ---- copies ----------------------------------------------------------------------------- */

/* Where a copy reads or writes: a pointer the sim may touch (a device alias or host memory),
 * and the device region it holds a reference on (NULL for host memory). */
struct sim_end {
    char *p;
    struct sim_region *r;
};

/* Resolves [addr, addr + len) for a copy (or memset, device_only): device memory wholly
 * inside one allocation or mapping with access, or mapped host memory outside any device
 * range. Holds a reference on the region until end_put. */
static CUresult end_get(uintptr_t addr, size_t len, bool device_only, struct sim_end *out)
{
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find(addr);
    if (r != NULL && r->kind != SIM_HOSTREG) {
        bool ok = len <= r->len - (addr - r->base) &&
                  (r->kind != SIM_VMM || r->access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        if (ok) {
            r->refs++;
            out->p = r->alias + (addr - r->base);
            out->r = r;
        }
        pthread_mutex_unlock(&g_lock);
        return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    bool dev = overlaps_device(addr, len);
    pthread_mutex_unlock(&g_lock);
    if (device_only || dev || addr == 0 || !host_mapped(addr, len))
        return CUDA_ERROR_INVALID_VALUE;
    out->p = (char *)addr;
    out->r = NULL;
    return CUDA_SUCCESS;
}

static void end_put(struct sim_end *e)
{
    if (e->r == NULL)
        return;
    pthread_mutex_lock(&g_lock);
    region_put(e->r);
    pthread_mutex_unlock(&g_lock);
    e->r = NULL;
}

/* The first piece of [addr, addr + len) that one region holds: all of it, or, where addr lies
 * in a VMM mapping followed at once by another (allocations mapped side by side, which CUDA
 * copies across as one range), up to the end of addr's mapping. */
static size_t piece_len(uintptr_t addr, size_t len)
{
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find(addr);
    size_t n = len;
    if (r != NULL && r->kind == SIM_VMM && len > r->len - (addr - r->base)) {
        struct sim_region *next = region_find(r->base + r->len);
        if (next != NULL && next->kind == SIM_VMM && next->base == r->base + r->len)
            n = r->len - (addr - r->base);
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

#define SIM_MAX_PIECES 64

/* Resolves a copy's ends piece by piece (piece_len): every piece valid, or none held. */
static CUresult pieces_get(uintptr_t dst, uintptr_t src, size_t len, struct sim_end *d,
                           struct sim_end *s, size_t *lens, int *n_out)
{
    int n = 0;
    CUresult rc = CUDA_SUCCESS;
    while (len > 0) {
        size_t a = piece_len(dst, len), b = piece_len(src, len), k = a < b ? a : b;
        if (n == SIM_MAX_PIECES) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        rc = end_get(dst, k, false, &d[n]);
        if (rc != CUDA_SUCCESS)
            break;
        rc = end_get(src, k, false, &s[n]);
        if (rc != CUDA_SUCCESS) {
            end_put(&d[n]);
            break;
        }
        lens[n++] = k;
        dst += k;
        src += k;
        len -= k;
    }
    if (rc != CUDA_SUCCESS)
        for (int i = 0; i < n; i++) {
            end_put(&d[i]);
            end_put(&s[i]);
        }
    *n_out = rc == CUDA_SUCCESS ? n : 0;
    return rc;
}

/* Whether this copy is the one IXL_CUDASIM_FAIL_COPY names (counted at enqueue). */
static bool copy_fails(void)
{
    long n = atomic_fetch_add(&g_copies, 1) + 1;
    for (int i = 0; i < SIM_MAX_FAILS && g_cfg.fail_copy[i] != 0; i++) {
        if (g_cfg.fail_copy[i] == n)
            return true;
    }
    return false;
}

/* ---- streams and events ----------------------------------------------------------------- */

struct CUevent_st {
    uint32_t magic;
    uint64_t gen;    /* g_ev_lock: bumped by each record */
    bool pending;    /* g_ev_lock: the latest record's work is not done */
    CUresult status; /* g_ev_lock: the latest completed record's answer */
    int refs;        /* g_ev_lock: the handle + marks in queues */
};

enum sim_op_type { SIM_OP_COPY, SIM_OP_SET, SIM_OP_MARK, SIM_OP_KERNEL };

struct sim_op {
    enum sim_op_type type;
    uintptr_t ktab; /* KERNEL: ixl_copy_batch's arguments, as launched */
    uint32_t kn;
    struct sim_end dst, src; /* SET: dst only */
    size_t len;
    unsigned char value;
    bool fail;
    struct CUevent_st *ev;
    uint64_t gen;
    struct sim_op *next;
};

struct CUstream_st {
    uint32_t magic;
    struct CUctx_st *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, idle_cv;
    struct sim_op *head, *tail; /* mu */
    bool busy, stop;            /* mu */
    CUresult err;               /* mu: sticky once a copy failed */
    struct CUstream_st *next;   /* g_lock: every live stream (cuCtxSynchronize) */
};

static struct CUstream_st *g_streams; /* g_lock */

static void event_put_locked(struct CUevent_st *e)
{
    if (--e->refs == 0) {
        e->magic = 0;
        free(e);
    }
}

/* ixl_copy_batch (src/device/copy_kernel.cu) as the GPU runs it: the table is read now, from
 * mapped pinned host memory or from device memory (cuMemAlloc: the layer copies small
 * entries' tables there first), and every entry's two ends must be device memory this context
 * reaches (a kernel touching anything else faults: CUDA_ERROR_ILLEGAL_ADDRESS, sticky).
 * IXL_CUDASIM_FAIL_COPY counts each entry as a copy. */
static CUresult kernel_run(uintptr_t tab, uint32_t n)
{
    size_t bytes = (size_t)n * 24;
    pthread_mutex_lock(&g_lock);
    struct sim_region *t = region_find(tab);
    bool ok = t != NULL && ((t->kind == SIM_HOSTREG && t->devmap) || t->kind == SIM_ALLOC) &&
              tab - t->base <= t->len && bytes <= t->len - (tab - t->base);
    if (ok)
        t->refs++;
    const char *rows = ok && t->kind == SIM_ALLOC ? t->alias + (tab - t->base) : (const char *)tab;
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    CUresult rc = CUDA_SUCCESS;
    for (uint32_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        uint64_t e[3];
        memcpy(e, rows + (size_t)i * 24, sizeof(e));
        if (copy_fails()) {
            rc = CUDA_ERROR_ILLEGAL_ADDRESS;
            break;
        }
        if (e[2] == 0)
            continue;
        struct sim_end d[SIM_MAX_PIECES], sr[SIM_MAX_PIECES];
        size_t lens[SIM_MAX_PIECES];
        int np = 0;
        if (pieces_get((uintptr_t)e[0], (uintptr_t)e[1], (size_t)e[2], d, sr, lens, &np) !=
            CUDA_SUCCESS)
            rc = CUDA_ERROR_ILLEGAL_ADDRESS;
        for (int k = 0; k < np; k++) {
            if (d[k].r == NULL || sr[k].r == NULL)
                rc = CUDA_ERROR_ILLEGAL_ADDRESS; /* host memory: not mapped for the GPU */
            else if (rc == CUDA_SUCCESS)
                memmove(d[k].p, sr[k].p, lens[k]);
        }
        for (int k = 0; k < np; k++) {
            end_put(&d[k]);
            end_put(&sr[k]);
        }
    }
    pthread_mutex_lock(&g_lock);
    region_put(t);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static void op_run(struct CUstream_st *s, struct sim_op *op)
{
    pthread_mutex_lock(&s->mu);
    CUresult err = s->err;
    pthread_mutex_unlock(&s->mu);
    switch (op->type) {
    case SIM_OP_COPY:
    case SIM_OP_SET:
        if (err == CUDA_SUCCESS) {
            sleep_us(g_cfg.delay_us);
            if (op->fail) {
                pthread_mutex_lock(&s->mu);
                s->err = CUDA_ERROR_ILLEGAL_ADDRESS;
                pthread_mutex_unlock(&s->mu);
            } else if (op->type == SIM_OP_COPY) {
                memmove(op->dst.p, op->src.p, op->len);
            } else {
                memset(op->dst.p, op->value, op->len);
            }
        }
        end_put(&op->dst);
        end_put(&op->src);
        break;
    case SIM_OP_KERNEL:
        if (err == CUDA_SUCCESS) {
            sleep_us(g_cfg.delay_us);
            err = kernel_run(op->ktab, op->kn);
            if (err != CUDA_SUCCESS) {
                pthread_mutex_lock(&s->mu);
                s->err = err;
                pthread_mutex_unlock(&s->mu);
            }
        }
        break;
    case SIM_OP_MARK:
        if (!g_cfg.fail_sticky && err != CUDA_SUCCESS) {
            /* IXL_CUDASIM_FAIL_STICKY=0: the first event after a failure reports it, then the
             * stream runs on. */
            pthread_mutex_lock(&s->mu);
            s->err = CUDA_SUCCESS;
            pthread_mutex_unlock(&s->mu);
        }
        pthread_mutex_lock(&g_ev_lock);
        if (op->ev->gen == op->gen) {
            op->ev->pending = false;
            op->ev->status = err;
        }
        event_put_locked(op->ev);
        pthread_cond_broadcast(&g_ev_cv);
        pthread_mutex_unlock(&g_ev_lock);
        break;
    }
    free(op);
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop)
            pthread_cond_wait(&s->work_cv, &s->mu);
        if (s->head == NULL)
            break;
        struct sim_op *op = s->head;
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        op_run(s, op);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        if (s->head == NULL)
            pthread_cond_broadcast(&s->idle_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Called with g_lock held (the stream joins the list of live streams). */
static CUresult stream_new(struct CUctx_st *c, struct CUstream_st **out)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = SIM_STREAM_MAGIC;
    s->ctx = c;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->idle_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->next = g_streams;
    g_streams = s;
    *out = s;
    return CUDA_SUCCESS;
}

static void stream_enqueue(struct CUstream_st *s, struct sim_op *op)
{
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
}

static CUresult stream_sync(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head != NULL || s->busy)
        pthread_cond_wait(&s->idle_cv, &s->mu);
    CUresult rc = s->err;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The stream a handle names for context c: the legacy default stream for 0,
 * CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2), made on first use. */
static CUresult stream_resolve(struct CUctx_st *c, CUstream h, struct CUstream_st **out)
{
    if ((uintptr_t)h > 2) {
        if (h->magic != SIM_STREAM_MAGIC)
            return CUDA_ERROR_INVALID_HANDLE;
        if (h->ctx != c)
            return CUDA_ERROR_INVALID_HANDLE; /* a stream of another context */
        *out = h;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&g_lock);
    CUresult rc = CUDA_SUCCESS;
    if (c->dflt == NULL)
        rc = stream_new(c, &c->dflt);
    *out = c->dflt;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* Synchronous copies wait for the legacy default stream first, as CUDA's do. */
static void default_stream_drain(struct CUctx_st *c)
{
    pthread_mutex_lock(&g_lock);
    struct CUstream_st *s = c->dflt;
    pthread_mutex_unlock(&g_lock);
    if (s != NULL)
        stream_sync(s);
}

static CUresult copy_sync(uintptr_t dst, uintptr_t src, size_t len)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (len == 0)
        return CUDA_SUCCESS;
    struct sim_end d[SIM_MAX_PIECES], s[SIM_MAX_PIECES];
    size_t lens[SIM_MAX_PIECES];
    int n;
    rc = pieces_get(dst, src, len, d, s, lens, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    bool fail = copy_fails();
    default_stream_drain(c); /* no delay: a synchronous copy's duration is not observable */
    if (fail)
        rc = CUDA_ERROR_ILLEGAL_ADDRESS;
    for (int i = 0; i < n; i++) {
        if (!fail)
            memmove(d[i].p, s[i].p, lens[i]);
        end_put(&s[i]);
        end_put(&d[i]);
    }
    return rc;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    return copy_sync((uintptr_t)dst, (uintptr_t)src, bytes);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
    return copy_sync((uintptr_t)dst, (uintptr_t)src, bytes);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)
{
    return copy_sync((uintptr_t)dst, (uintptr_t)src, bytes);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == 0)
        return CUDA_SUCCESS;
    struct sim_end d;
    rc = end_get((uintptr_t)dst, count, true, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    default_stream_drain(c);
    memset(d.p, value, count);
    end_put(&d);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s;
    rc = stream_resolve(c, stream, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (bytes == 0)
        return CUDA_SUCCESS;
    /* One operation per piece (allocations mapped side by side), enqueued together; the
     * injected failure (one copy as counted) goes with the first. */
    struct sim_end d[SIM_MAX_PIECES], sr[SIM_MAX_PIECES];
    size_t lens[SIM_MAX_PIECES];
    struct sim_op *ops[SIM_MAX_PIECES];
    int n;
    rc = pieces_get((uintptr_t)dst, (uintptr_t)src, bytes, d, sr, lens, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (int i = 0; i < n; i++) {
        ops[i] = calloc(1, sizeof(*ops[i]));
        if (ops[i] == NULL) {
            for (int j = 0; j < n; j++) {
                if (j < i)
                    free(ops[j]);
                end_put(&d[j]);
                end_put(&sr[j]);
            }
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    bool fail = copy_fails();
    for (int i = 0; i < n; i++) {
        ops[i]->type = SIM_OP_COPY;
        ops[i]->dst = d[i];
        ops[i]->src = sr[i];
        ops[i]->len = lens[i];
        ops[i]->fail = fail && i == 0;
        stream_enqueue(s, ops[i]);
    }
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (stream == NULL || (flags & ~CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    rc = stream_new(c, stream);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

CUresult cuStreamDestroy_v2(CUstream stream)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((uintptr_t)stream <= 2 || stream->magic != SIM_STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    /* CUDA returns at once and frees the stream once its work is done; waiting here is
     * indistinguishable to the caller except in time. */
    pthread_mutex_lock(&stream->mu);
    stream->stop = true;
    pthread_cond_signal(&stream->work_cv);
    pthread_mutex_unlock(&stream->mu);
    pthread_join(stream->thread, NULL);
    pthread_mutex_lock(&g_lock);
    for (struct CUstream_st **pp = &g_streams; *pp != NULL; pp = &(*pp)->next)
        if (*pp == stream) {
            *pp = stream->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    stream->magic = 0;
    pthread_cond_destroy(&stream->idle_cv);
    pthread_cond_destroy(&stream->work_cv);
    pthread_mutex_destroy(&stream->mu);
    free(stream);
    return CUDA_SUCCESS;
}

/* Waits until every stream of the current context (the legacy default one included) is idle:
 * what CUDA waits for, and possibly work queued meanwhile too, which the caller cannot tell
 * apart. The first sticky error of those streams is the answer. */
__attribute__((visibility("default"))) CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    for (;;) {
        bool busy = false;
        CUresult err = CUDA_SUCCESS;
        pthread_mutex_lock(&g_lock);
        for (struct CUstream_st *s = g_streams; s != NULL; s = s->next) {
            if (s->ctx != c)
                continue;
            pthread_mutex_lock(&s->mu);
            busy |= s->head != NULL || s->busy;
            if (err == CUDA_SUCCESS)
                err = s->err;
            pthread_mutex_unlock(&s->mu);
        }
        pthread_mutex_unlock(&g_lock);
        if (!busy)
            return err;
        usleep(50);
    }
}

CUresult cuStreamSynchronize(CUstream stream)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s;
    if ((uintptr_t)stream <= 2) {
        struct CUctx_st *c;
        rc = current_ctx(&c);
        if (rc != CUDA_SUCCESS)
            return rc;
        pthread_mutex_lock(&g_lock);
        s = c->dflt;
        pthread_mutex_unlock(&g_lock);
        if (s == NULL)
            return CUDA_SUCCESS;
    } else {
        if (stream->magic != SIM_STREAM_MAGIC)
            return CUDA_ERROR_INVALID_HANDLE;
        s = stream;
    }
    return stream_sync(s);
}

CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (event == NULL || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = SIM_EVENT_MAGIC;
    e->refs = 1;
    e->status = CUDA_SUCCESS;
    *event = e;
    return CUDA_SUCCESS;
}

/* On a created stream no current context is needed (the stream names it, as on an H200); the
 * default stream is the current context's. */
CUresult cuEventRecord(CUevent event, CUstream stream)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event == NULL || event->magic != SIM_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream;
    if ((uintptr_t)stream > 2) {
        if (stream->magic != SIM_STREAM_MAGIC)
            return CUDA_ERROR_INVALID_HANDLE;
    } else {
        struct CUctx_st *c;
        rc = current_ctx(&c);
        if (rc == CUDA_SUCCESS)
            rc = stream_resolve(c, stream, &s);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    struct sim_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->type = SIM_OP_MARK;
    op->ev = event;
    pthread_mutex_lock(&g_ev_lock);
    op->gen = ++event->gen;
    event->pending = true;
    event->refs++;
    pthread_mutex_unlock(&g_ev_lock);
    stream_enqueue(s, op);
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event == NULL || event->magic != SIM_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_ev_lock);
    rc = event->pending ? CUDA_ERROR_NOT_READY : event->status;
    pthread_mutex_unlock(&g_ev_lock);
    return rc;
}

CUresult cuEventSynchronize(CUevent event)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event == NULL || event->magic != SIM_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_ev_lock);
    while (event->pending)
        pthread_cond_wait(&g_ev_cv, &g_ev_lock);
    rc = event->status;
    pthread_mutex_unlock(&g_ev_lock);
    cfg_get();
    if (g_cfg.sync_late_us > 0) /* a waiting thread slow to learn it (cuEventQuery is not) */
        usleep(g_cfg.sync_late_us);
    return rc;
}

CUresult cuEventDestroy_v2(CUevent event)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event == NULL || event->magic != SIM_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    /* As in CUDA, an event destroyed while its record is pending is freed once it completes. */
    pthread_mutex_lock(&g_ev_lock);
    event_put_locked(event);
    pthread_mutex_unlock(&g_ev_lock);
    return CUDA_SUCCESS;
}

/* ---- legacy IPC ------------------------------------------------------------------------- */

/* Whether pid is a process (a thread group's leader), read from /proc/<pid>/status. */
static bool is_process(int32_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    long tgid = -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Tgid: %ld", &tgid) == 1)
            break;
    fclose(f);
    return tgid == (long)pid;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr ptr)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (handle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    if (r == NULL || r->kind != SIM_ALLOC) {
        /* VMM memory (cuMemCreate) and imported memory are not legacy-IPC capable. */
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_ipc h;
    memset(&h, 0, sizeof(h));
    h.magic = SIM_IPC_MAGIC;
    h.version = SIM_IPC_VERSION;
    h.pid = (int32_t)getpid();
    h.fd = r->phys->fd;
    h.size = r->len;
    h.dev = r->dev;
    memcpy(h.nonce, r->ipc_nonce, sizeof(h.nonce));
    pthread_mutex_unlock(&g_lock);
    memcpy(handle->reserved, &h, sizeof(h));
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *ptr, CUipcMemHandle handle, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ptr == NULL || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_ipc h;
    memcpy(&h, handle.reserved, sizeof(h));
    if (h.magic != SIM_IPC_MAGIC || h.version != SIM_IPC_VERSION || h.pid <= 0 || h.fd < 0 ||
        h.size == 0 || h.size > ((size_t)1 << 46))
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == (int32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT; /* CUDA: "invalid device context" for its own */

    /* Opened before in this process: one more reference, the same address (CUDA's rule). */
    pthread_mutex_lock(&g_lock);
    for (struct sim_region *r = g_regions; r != NULL; r = r->next) {
        if (r->kind == SIM_IPC && r->ipc_pid == h.pid && r->ipc_fd == h.fd &&
            memcmp(r->ipc_nonce, h.nonce, sizeof(h.nonce)) == 0) {
            r->ipc_opens++;
            *ptr = (CUdeviceptr)r->base;
            pthread_mutex_unlock(&g_lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);

    /* The handle names a process: a thread id of that process is another entry in /proc that
     * would reach the same descriptors, and is not the name the exporter wrote. */
    if (!is_process(h.pid))
        return CUDA_ERROR_INVALID_VALUE;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    /* Only a sim memfd is opened (never a FIFO or device a forged handle might name). */
    char link[256];
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    link[n] = '\0';
    if (strncmp(link, "/memfd:" SIM_MEMFD_NAME, strlen("/memfd:" SIM_MEMFD_NAME)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    struct sim_trailer tr;
    size_t map_len = round_up(h.size, page_size());
    if (!memfd_check(fd, self, &tr) || tr.vmm || tr.size != map_len ||
        memcmp(tr.nonce, h.nonce, sizeof(h.nonce)) != 0) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_region *r = calloc(1, sizeof(*r));
    void *dev = NULL;
    if (r == NULL) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = map_pair(fd, map_len, NULL, &dev, &r->alias);
    close(fd); /* the mappings keep the memory */
    if (rc != CUDA_SUCCESS) {
        free(r);
        return CUDA_ERROR_MAP_FAILED;
    }
    r->kind = SIM_IPC;
    r->base = (uintptr_t)dev;
    r->len = h.size;
    r->map_len = map_len;
    r->dev = valid_dev(h.dev) ? h.dev : c->dev;
    r->ctx = c;
    r->ipc_pid = h.pid;
    r->ipc_fd = h.fd;
    r->ipc_opens = 1;
    memcpy(r->ipc_nonce, h.nonce, sizeof(h.nonce));
    pthread_mutex_lock(&g_lock);
    region_list(r);
    pthread_mutex_unlock(&g_lock);
    *ptr = (CUdeviceptr)(uintptr_t)dev;
    return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr ptr)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)ptr);
    if (r == NULL || r->kind != SIM_IPC || r->base != (uintptr_t)ptr) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--r->ipc_opens == 0) {
        munmap((void *)r->base, r->map_len);
        region_unlist(r);
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* ---- host registration ------------------------------------------------------------------ */

CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                     CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (p == NULL || bytes == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t a = (uintptr_t)p;
    if (a + bytes < a || !host_mapped(a, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_region *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    if (overlaps_device(a, bytes)) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto unlock;
    }
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind == SIM_HOSTREG && a < q->base + q->len && q->base < a + bytes) {
            rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
            goto unlock;
        }
    }
    r->kind = SIM_HOSTREG;
    r->base = a;
    r->len = bytes;
    r->map_len = bytes;
    r->dev = c->dev;
    r->ctx = c;
    region_list(r);
    r = NULL;
unlock:
    pthread_mutex_unlock(&g_lock);
    free(r);
    return rc;
}

CUresult cuMemHostUnregister(void *p)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = NULL;
    rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind != SIM_HOSTREG || (uintptr_t)p < q->base || (uintptr_t)p - q->base >= q->len)
            continue;
        if (q->base == (uintptr_t)p)
            r = q;
        else
            rc = CUDA_ERROR_INVALID_VALUE; /* inside a registration, not its start (an H200) */
    }
    if (r != NULL) {
        region_unlist(r);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- virtual memory management ---------------------------------------------------------- */

static CUresult prop_check(const CUmemAllocationProp *prop)
{
    if (prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->win32HandleMetaData != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(prop->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (granularity == NULL || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    rc = prop_check(prop);
    if (rc != CUDA_SUCCESS)
        return rc;
    *granularity = SIM_VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (handle == NULL || flags != 0 || size == 0 || size % SIM_VMM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = prop_check(prop);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0)
        return CUDA_ERROR_NOT_SUPPORTED; /* Win32 and fabric handles: not on this "machine" */
    int dev = prop->location.id;
    pthread_mutex_lock(&g_lock);
    bool room = g_used[dev] + size <= g_cfg.mem_bytes;
    if (room)
        g_used[dev] += size;
    pthread_mutex_unlock(&g_lock);
    if (!room)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_phys *p = calloc(1, sizeof(*p));
    struct sim_trailer tr;
    if (p == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto unaccount;
    }
    rc = memfd_make(size, dev, true, prop, &tr, &p->fd);
    if (rc != CUDA_SUCCESS)
        goto free_phys;
    p->size = size;
    p->dev = dev;
    p->vmm = true;
    p->prop = *prop;
    p->accounted = true;
    p->handles = 1;
    p->refs = 1;
    pthread_mutex_lock(&g_lock);
    p->next = g_phys;
    g_phys = p;
    pthread_mutex_unlock(&g_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
free_phys:
    free(p);
unaccount:
    pthread_mutex_lock(&g_lock);
    g_used[dev] -= size;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* g_lock held. The phys a VMM handle names, or NULL for a handle that is not one. */
static struct sim_phys *vmm_handle(CUmemGenericAllocationHandle handle)
{
    struct sim_phys *p = (struct sim_phys *)(uintptr_t)handle;
    return handle != 0 && phys_listed(p) && p->vmm && p->handles > 0 ? p : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct sim_phys *p = vmm_handle(handle);
    if (p != NULL) {
        p->handles--;
        phys_put(p); /* the memory stays while mapped */
    }
    pthread_mutex_unlock(&g_lock);
    return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    (void)addr; /* a hint, as in CUDA */
    if (ptr == NULL || flags != 0 || size == 0 || size % SIM_VMM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment == 0)
        alignment = SIM_VMM_GRANULARITY;
    if ((alignment & (alignment - 1)) != 0 || size + alignment < size)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_resv *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = size + alignment;
    char *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t base = round_up((uintptr_t)m, alignment);
    if (base > (uintptr_t)m)
        munmap(m, base - (uintptr_t)m);
    uintptr_t end = (uintptr_t)m + span;
    if (end > base + size)
        munmap((void *)(base + size), end - (base + size));
    v->base = base;
    v->len = size;
    pthread_mutex_lock(&g_lock);
    v->next = g_resvs;
    g_resvs = v;
    pthread_mutex_unlock(&g_lock);
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct sim_resv **pp = &g_resvs;
    while (*pp != NULL && !((*pp)->base == (uintptr_t)ptr && (*pp)->len == size))
        pp = &(*pp)->next;
    struct sim_resv *v = *pp;
    if (v == NULL) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (struct sim_region *r = g_regions; r != NULL; r = r->next) {
        if (r->kind == SIM_VMM && r->base >= v->base && r->base < v->base + v->len) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_INVALID_VALUE; /* still mapped: cuMemUnmap first */
        }
    }
    *pp = v->next;
    munmap((void *)v->base, v->len);
    pthread_mutex_unlock(&g_lock);
    free(v);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    uintptr_t a = (uintptr_t)ptr;
    /* cuda.h: offset "currently must be zero". */
    if (flags != 0 || offset != 0 || size == 0 || size % SIM_VMM_GRANULARITY != 0 ||
        a % SIM_VMM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_region *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    struct sim_phys *p = vmm_handle(handle);
    struct sim_resv *v = resv_find(a);
    /* cuda.h lists no INVALID_HANDLE or ALREADY_MAPPED for cuMemMap: a bad handle, a range
     * outside a reservation or one already mapped are all CUDA_ERROR_INVALID_VALUE. */
    if (p == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto unlock;
    }
    if (v == NULL || size > v->len - (a - v->base) || size > p->size) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto unlock;
    }
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind == SIM_VMM && a < q->base + q->map_len && q->base < a + size) {
            rc = CUDA_ERROR_INVALID_VALUE;
            goto unlock;
        }
    }
    void *dev;
    rc = map_pair(p->fd, size, (void *)a, &dev, &r->alias);
    if (rc != CUDA_SUCCESS) {
        rc = CUDA_ERROR_MAP_FAILED;
        goto unlock;
    }
    p->refs++;
    r->kind = SIM_VMM;
    r->base = a;
    r->len = size;
    r->map_len = size;
    r->dev = p->dev;
    r->phys = p;
    r->access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    region_list(r);
    r = NULL;
unlock:
    pthread_mutex_unlock(&g_lock);
    free(r);
    return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    uintptr_t a = (uintptr_t)ptr;
    pthread_mutex_lock(&g_lock);
    /* The range must consist of whole mappings. */
    size_t covered = 0;
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind != SIM_VMM || !(a < q->base + q->map_len && q->base < a + size))
            continue;
        if (q->base < a || q->base + q->map_len > a + size) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
        covered += q->map_len;
    }
    if (size == 0 || covered != size) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_region *q = g_regions;
    while (q != NULL) {
        struct sim_region *next = q->next;
        if (q->kind == SIM_VMM && q->base >= a && q->base < a + size) {
            /* Back to reserved-only: PROT_NONE anonymous, still the reservation's. */
            mmap((void *)q->base, q->map_len, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            region_unlist(q);
        }
        q = next;
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (desc == NULL || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int flags = -1;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!valid_dev(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        flags = (int)desc[i].flags; /* one device's view is all the sim models */
    }
    uintptr_t a = (uintptr_t)ptr;
    pthread_mutex_lock(&g_lock);
    size_t covered = 0;
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind == SIM_VMM && a < q->base + q->map_len && q->base < a + size) {
            uintptr_t lo = q->base > a ? q->base : a;
            uintptr_t hi = q->base + q->map_len < a + size ? q->base + q->map_len : a + size;
            covered += hi - lo;
        }
    }
    if (covered != size) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE; /* part of the range is not mapped */
    }
    for (struct sim_region *q = g_regions; q != NULL; q = q->next) {
        if (q->kind == SIM_VMM && a < q->base + q->map_len && q->base < a + size)
            q->access = flags;
    }
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (handle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)addr);
    if (r == NULL || r->kind != SIM_VMM) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    r->phys->handles++;
    r->phys->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)r->phys;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (prop == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_phys *p = vmm_handle(handle);
    if (p != NULL)
        *prop = p->prop;
    pthread_mutex_unlock(&g_lock);
    return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (shareable == NULL || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_phys *p = vmm_handle(handle);
    int fd = -1;
    if (p == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if ((p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
        rc = CUDA_ERROR_INVALID_VALUE; /* created without an exportable handle type */
    else if ((fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_lock);
    if (rc == CUDA_SUCCESS)
        *(int *)shareable = fd;
    return rc;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                        CUmemAllocationHandleType type)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (handle == NULL || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    intptr_t v = (intptr_t)os_handle;
    if (v < 0 || v > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = (int)v;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    struct sim_trailer tr;
    if (!memfd_check(fd, self, &tr) || !tr.vmm)
        return CUDA_ERROR_INVALID_VALUE;
    /* The caller keeps its descriptor (CUDA does not take it over). */
    struct sim_phys *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (p->fd < 0) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->size = tr.size;
    p->dev = valid_dev(tr.dev) ? tr.dev : 0;
    p->vmm = true;
    p->prop = tr.prop;
    p->prop.location.id = p->dev;
    p->handles = 1;
    p->refs = 1;
    pthread_mutex_lock(&g_lock);
    p->next = g_phys;
    g_phys = p;
    pthread_mutex_unlock(&g_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* ---- pinned host allocations, the copy kernel, batched copies --------------------------- */

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pp == NULL || bytes == 0 ||
        (flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | 0x04u)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t len = round_up(bytes, page_size());
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_region *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        munmap(p, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->kind = SIM_HOSTREG;
    r->base = (uintptr_t)p;
    r->len = bytes;
    r->map_len = len;
    r->dev = c->dev;
    r->ctx = c;
    r->host_alloc = true;
    r->devmap = (flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0;
    pthread_mutex_lock(&g_lock);
    region_list(r);
    pthread_mutex_unlock(&g_lock);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)p);
    rc = r != NULL && r->host_alloc && r->base == (uintptr_t)p ? CUDA_SUCCESS
                                                               : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        region_unlist(r); /* unmapped once no kernel in flight reads it */
    pthread_mutex_unlock(&g_lock);
    return rc;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pdptr == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct sim_region *r = region_find((uintptr_t)p);
    rc = r != NULL && r->kind == SIM_HOSTREG && r->devmap ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&g_lock);
    if (rc == CUDA_SUCCESS)
        *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
    return rc;
}

/* A module is known by its image: the sim runs one kernel, ixl_copy_batch, and accepts a PTX
 * image only when it declares that entry with its two parameters. */
struct CUmod_st {
    uint32_t magic;
};
struct CUfunc_st {
    uint32_t magic;
    struct CUmod_st *mod;
};
#define SIM_MODULE_MAGIC 0x4d4f4455u
#define SIM_FUNC_MAGIC 0x46554e43u

static void jit_log(unsigned n, CUjit_option *o, void **v, const char *msg)
{
    char *buf = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < n && o != NULL && v != NULL; i++) {
        if (o[i] == CU_JIT_ERROR_LOG_BUFFER)
            buf = v[i];
        else if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            cap = (size_t)(uintptr_t)v[i];
    }
    if (buf != NULL && cap > 0)
        snprintf(buf, cap, "%s", msg);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                            CUjit_option *options, void **values)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (module == NULL || image == NULL || (n > 0 && (options == NULL || values == NULL)))
        return CUDA_ERROR_INVALID_VALUE;
    cfg_get();
    if (g_cfg.no_kernel) {
        jit_log(n, options, values, "cudasim: IXL_CUDASIM_NO_KERNEL: no binary for this GPU");
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    const char *ptx = image;
    if (strncmp(ptx, ".version ", 9) != 0 || strstr(ptx, "\n.target sm_") == NULL ||
        strstr(ptx, ".visible .entry ixl_copy_batch(\n    .param .u64 ixl_copy_batch_param_0,\n"
                    "    .param .u32 ixl_copy_batch_param_1\n)") == NULL) {
        jit_log(n, options, values, "cudasim: not the PTX of ixl_copy_batch");
        return CUDA_ERROR_INVALID_PTX;
    }
    struct CUmod_st *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = SIM_MODULE_MAGIC;
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (f == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (mod == NULL || mod->magic != SIM_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (strcmp(name, "ixl_copy_batch") != 0)
        return CUDA_ERROR_NOT_FOUND;
    struct CUfunc_st *fn = calloc(1, sizeof(*fn));
    if (fn == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fn->magic = SIM_FUNC_MAGIC;
    fn->mod = mod;
    *f = fn;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule mod)
{
    CUresult rc = check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (mod == NULL || mod->magic != SIM_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    mod->magic = 0; /* its functions stay allocated: a launch through them is caught */
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream stream, void **params, void **extra)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (f == NULL || f->magic != SIM_FUNC_MAGIC || f->mod->magic != SIM_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    /* ixl_copy_batch: at most 256 threads (.maxntid), no dynamic shared memory, its two
     * parameters through kernelParams. */
    if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 256 || by != 1 || bz != 1 || shmem != 0 ||
        params == NULL || params[0] == NULL || params[1] == NULL || extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    rc = stream_resolve(c, stream, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_op *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t tab;
    memcpy(&tab, params[0], sizeof(tab)); /* the arguments are copied at launch */
    memcpy(&op->kn, params[1], sizeof(op->kn));
    op->type = SIM_OP_KERNEL;
    op->ktab = (uintptr_t)tab;
    stream_enqueue(s, op);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                               CUstream stream)
{
    struct CUctx_st *c;
    CUresult rc = current_ctx(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    cfg_get();
    if (g_cfg.no_batch)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (dsts == NULL || srcs == NULL || sizes == NULL || count == 0 || attrs == NULL ||
        attrsIdxs == NULL || numAttrs == 0 || numAttrs > count || attrsIdxs[0] != 0 ||
        (uintptr_t)stream <= 2)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttrs; i++) {
        if (attrs[i].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            attrs[i].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
            (i > 0 && attrsIdxs[i] <= attrsIdxs[i - 1]) || attrsIdxs[i] >= count)
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* Every copy checked first: an invalid one fails the call with nothing enqueued. */
    for (size_t i = 0; i < count; i++) {
        struct sim_end d[SIM_MAX_PIECES], sr[SIM_MAX_PIECES];
        size_t lens[SIM_MAX_PIECES];
        int n = 0;
        if (sizes[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
        rc = pieces_get((uintptr_t)dsts[i], (uintptr_t)srcs[i], sizes[i], d, sr, lens, &n);
        for (int k = 0; k < n; k++) {
            end_put(&d[k]);
            end_put(&sr[k]);
        }
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    for (size_t i = 0; i < count; i++) {
        rc = cuMemcpyAsync(dsts[i], srcs[i], sizes[i], stream);
        if (rc != CUDA_SUCCESS)
            return rc; /* freed meanwhile by another thread: the caller's race */
    }
    return CUDA_SUCCESS;
}

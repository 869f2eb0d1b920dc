/*
 * The device layer (docs/device.md): the CUDA driver API loaded at run time, one per process.
 *
 * Threads and contexts. The driver is loaded and the devices enumerated once (pthread_once).
 * A device's primary context is retained the first time something needs that device (an
 * allocation, a stream, a registration on it), not at load: retaining every device's context
 * up front would cost each GPU a context's memory in every process that merely loads ixl. The
 * retained contexts are never released, by design: releasing at library unload would call
 * into the driver from a destructor while the process exits, when the driver (and the
 * serving engine's own CUDA state) may already be torn down, and a primary context stays
 * alive anyway while the engine that allocated the memory holds it. Each call that talks to
 * the driver makes the right context current on the calling thread first, only when
 * cuCtxGetCurrent says another (or none) is current, and puts the caller's back afterwards,
 * so a serving engine's thread finds its own context unchanged and ixl's background threads
 * need no setup.
 *
 * Classification costs one cuPointerGetAttributes call; what is derived from it per
 * allocation (VMM or not, the IPC export) is cached by the allocation's buffer id, which the
 * driver never reuses within a process: registering many tensors inside one allocation costs
 * one driver call each and no second IPC export.
 */
#include "device/device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "device/copy_kernel_ptx.h"
#include "device/cuda_api.h"
#include "util/config.h"
#include "util/log.h"
#include "util/out.h"
#include "util/sys.h"

/* The resolved entry points: one member per name of IXL_CUDA_LAYER_ENTRY_POINTS. */
struct cu {
#define IXL_CU_MEMBER(name) ixl_##name##_fn *name;
    IXL_CUDA_LAYER_ENTRY_POINTS(IXL_CU_MEMBER)
#undef IXL_CU_MEMBER
};

/* The names and where each lands in struct cu, from the same list: resolve() walks these. */
static const char *const entry_names[] = {
#define IXL_CU_NAME(name) #name,
    IXL_CUDA_LAYER_ENTRY_POINTS(IXL_CU_NAME)
#undef IXL_CU_NAME
};
static const size_t entry_offsets[] = {
#define IXL_CU_OFFSET(name) offsetof(struct cu, name),
    IXL_CUDA_LAYER_ENTRY_POINTS(IXL_CU_OFFSET)
#undef IXL_CU_OFFSET
};
#define N_ENTRIES (sizeof(entry_names) / sizeof(entry_names[0]))
_Static_assert(sizeof(entry_offsets) / sizeof(entry_offsets[0]) == N_ENTRIES, "one list");

/* copy_batch's kernel path: a ring of tables the copy kernel reads (mapped pinned host
 * memory), each reused once the launch that read it is done. */
#define BATCH_SLOTS 8
#define BATCH_MAX 65536u /* table entries per launch (one slot: 1.5 MiB pinned at most) */
/* A slot's first table holds at least this many entries (192 KiB pinned, and as much device
 * memory once small entries' tables are copied there), and a slot that grows takes the largest
 * size any slot of its stream has: a table is reallocated only when a batch larger than every
 * earlier one arrives. Growing one slot at a time, as batches of 1,024 to 8,192 copies took
 * turns in the ring, reallocated tables in the first requests after the warm-up: a
 * cuMemHostAlloc, and a cuMemFree that waits for the whole device, inside a post. Set at
 * build time (-D) to start tables smaller (each still grows to its stream's largest). */
#ifndef BATCH_SLOT_FIRST
#define BATCH_SLOT_FIRST 8192u
#endif

struct kdesc { /* copy_kernel.cu's struct ixl_copy_desc */
    uint64_t dst, src, len;
};

struct batch_slot {
    struct kdesc *tab; /* cuMemHostAlloc'd, mapped */
    CUdeviceptr dtab;  /* tab as the kernel sees it */
    size_t cap;        /* entries */
    /* Device memory the table of small entries is copied to before the launch (0: none yet;
     * dev_cap entries), so that the kernel reads it from device memory, not over the bus. */
    CUdeviceptr dev_tab;
    size_t dev_cap;
    CUevent ev; /* recorded after the launch that last read tab */
    int busy;
};

struct ixl_dev_stream {
    int dev;
    CUstream s;
    struct batch_slot slot[BATCH_SLOTS];
    unsigned next;
    size_t tab_cap;           /* the largest table of any slot (entries) */
    CUdeviceptr *bdst, *bsrc; /* cuMemcpyBatchAsync's arrays */
    size_t *blen, bcap;
    struct ixl_dev_copy *v; /* copy_cols's copies for the driver's paths (vcap entries) */
    size_t vcap;
};

enum copy_mode { COPY_AUTO, COPY_KERNEL, COPY_BATCH, COPY_LOOP };

/* The optional entry points, looked up on first use (IXL_CUDA_BATCH_ENTRY_POINTS), and the
 * mode IXL_DEV_COPY asks for. */
static struct {
    pthread_once_t once;
    ixl_cuModuleLoadDataEx_fn *load;
    ixl_cuModuleGetFunction_fn *func;
    ixl_cuLaunchKernel_fn *launch;
    ixl_cuMemHostAlloc_fn *alloc_host;
    ixl_cuMemFreeHost_fn *free_host;
    ixl_cuMemHostGetDevicePointer_v2_fn *host_dptr;
    ixl_cuMemcpyBatchAsync_v2_fn *batch2;
    ixl_cuMemcpyBatchAsync_v1_fn *batch1;
    int batch_off; /* set when the driver refused a batch as unsupported */
    enum copy_mode mode;
} B = {.once = PTHREAD_ONCE_INIT};

struct ixl_dev_event {
    int dev;
    CUevent e;
    struct ixl_dev_event *next; /* in its device's pool */
};

/* Events are recorded per transfer; a pool per device keeps cuEventCreate off that path. */
#define EVENT_POOL_MAX 256

struct device {
    CUdevice cu;
    CUcontext ctx; /* primary context once retained: written under L.lock, read atomically */
    struct ixl_device_info info;
    CUstream copy_stream; /* ixl_device_copy's, created on first use under L.lock */
    pthread_mutex_t pool_lock;
    struct ixl_dev_event *pool;
    unsigned pooled;
    /* The copy kernel, loaded on first use under L.lock: kstate 0 not tried, 1 loaded, -1
     * the driver refused it (logged once; copy_batch goes on without it). The module stays
     * loaded for the process's life, as the primary context does. */
    int kstate;
    CUmodule kmod;
    CUfunction kfn;
    unsigned kblocks; /* blocks per launch at most: 16 per multiprocessor */
};

/* What the layer knows of one allocation (by buffer id). */
struct alloc {
    uint64_t id; /* 0: free slot */
    uint64_t base, len;
    int32_t ordinal;
    uint32_t flags; /* IXL_DEV_PTR_* */
    int has_ipc;
    CUipcMemHandle ipc;
};

/* Open addressing; cleared when it fills (entries of freed allocations are never hit again,
 * since buffer ids are not reused, so clearing only costs re-deriving live ones). */
#define CACHE_SLOTS 4096u
#define CACHE_MAX (CACHE_SLOTS * 3 / 4)

static struct {
    pthread_once_t once;
    int count; /* devices, or a negative status (why says why) */
    char why[320];
    int version; /* cuDriverGetVersion, 0 if unknown */
    char path[256];
    void *lib;
    struct cu f;
    struct device *devs;
    pthread_mutex_t lock; /* context retains, copy streams */
    pthread_mutex_t cache_lock;
    struct alloc *cache;
    unsigned cached;
    struct ixl_dev_counters n; /* atomic increments */
} L = {
    .once = PTHREAD_ONCE_INIT,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cache_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* ---- driver errors ---------------------------------------------------------------------- */

static const char *known_name(CUresult rc)
{
    switch (rc) {
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
    case CUDA_ERROR_INVALID_CONTEXT:
        return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE:
        return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
        return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
        return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_NOT_SUPPORTED:
        return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
        return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    default:
        return "CUDA error";
    }
}

/* "NAME (code): the driver's text" for rc, from the driver when it answers. */
static const char *cu_text(CUresult rc, char *buf, size_t cap)
{
    const char *name = NULL, *str = NULL;
    if (L.f.cuGetErrorName == NULL || L.f.cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
        name = known_name(rc);
    if (L.f.cuGetErrorString == NULL || L.f.cuGetErrorString(rc, &str) != CUDA_SUCCESS ||
        str == NULL)
        str = "no description from the driver";
    snprintf(buf, cap, "%s (%d): %s", name, (int)rc, str);
    return buf;
}

/* Logs "device layer: WHAT failed: NAME (code): text" and maps rc to a status. */
static int cu_fail(const char *what, CUresult rc)
{
    char t[256];
    IXL_LOG_ERR("device layer: %s failed: %s", what, cu_text(rc, t, sizeof(t)));
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? IXL_ERR_NO_MEMORY : IXL_ERR_BACKEND;
}

/* The same, also written to why. */
static int cu_fail_why(const char *what, CUresult rc, char *why, size_t why_len)
{
    char t[256];
    cu_text(rc, t, sizeof(t));
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "%s failed: %s", what, t);
    IXL_LOG_ERR("device layer: %s failed: %s", what, t);
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? IXL_ERR_NO_MEMORY : IXL_ERR_BACKEND;
}

/* ---- loading ---------------------------------------------------------------------------- */

static void unusable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void unusable(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L.why, sizeof(L.why), fmt, ap);
    va_end(ap);
    L.count = IXL_ERR_NOT_SUPPORTED;
    IXL_LOG_INF("device layer: %s", L.why);
}

static void unload(void)
{
    if (L.lib != NULL)
        dlclose(L.lib);
    L.lib = NULL;
    memset(&L.f, 0, sizeof(L.f));
}

static int resolve(void)
{
    for (size_t i = 0; i < N_ENTRIES; i++) {
        void *sym = dlsym(L.lib, entry_names[i]);
        if (sym == NULL) {
            unusable("no usable GPU driver (%s lacks the entry point %s: a driver older than "
                     "CUDA 11, or not the CUDA driver)",
                     L.path, entry_names[i]);
            return -1;
        }
        memcpy((char *)&L.f + entry_offsets[i], &sym, sizeof(sym));
    }
    return 0;
}

static int describe(int i)
{
    struct device *d = &L.devs[i];
    char t[256];
    const char *what = "cuDeviceGet";
    CUresult rc = L.f.cuDeviceGet(&d->cu, i);
    struct ixl_device_info *info = &d->info;
    info->size = sizeof(*info);
    info->ordinal = i;
    size_t total = 0;
    int uva = 0;
    if (rc == CUDA_SUCCESS &&
        (what = "cuDeviceGetName",
         rc = L.f.cuDeviceGetName(info->name, (int)sizeof(info->name), d->cu)) == CUDA_SUCCESS)
        what = "cuDeviceTotalMem_v2", rc = L.f.cuDeviceTotalMem_v2(&total, d->cu);
    if (rc == CUDA_SUCCESS)
        what = "cuDeviceGetAttribute",
        rc = L.f.cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                      d->cu);
    if (rc == CUDA_SUCCESS)
        rc = L.f.cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                      d->cu);
    if (rc == CUDA_SUCCESS)
        rc = L.f.cuDeviceGetAttribute(&info->pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d->cu);
    if (rc == CUDA_SUCCESS)
        rc = L.f.cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d->cu);
    if (rc != CUDA_SUCCESS) {
        unusable("GPU driver unusable (%s (device %d) failed: %s)", what, i,
                 cu_text(rc, t, sizeof(t)));
        return -1;
    }
    info->name[sizeof(info->name) - 1] = '\0';
    info->total_mem = total;
    if (!uva) {
        unusable("GPU driver unusable (device %d: %s has no unified addressing, which the "
                 "device layer needs)",
                 i, info->name);
        return -1;
    }
    pthread_mutex_init(&d->pool_lock, NULL);
    return 0;
}

static void init(void)
{
    char t[256];
    snprintf(L.path, sizeof(L.path), "%s", ixl_cfg_get(IXL_CFG_CUDA_LIBRARY));
    L.count = IXL_ERR_NOT_SUPPORTED;
    L.lib = dlopen(L.path, RTLD_NOW | RTLD_LOCAL);
    if (L.lib == NULL) {
        const char *e = dlerror();
        unusable("no GPU driver (%s: not found: %s)", L.path, e ? e : "dlopen failed");
        return;
    }
    if (resolve() != 0)
        goto unload;
    int v = 0;
    if (L.f.cuDriverGetVersion(&v) == CUDA_SUCCESS)
        L.version = v;
    CUresult rc = L.f.cuInit(0);
    if (rc == CUDA_ERROR_STUB_LIBRARY) {
        unusable("no GPU driver (%s is the CUDA toolkit's stub library, not a driver: cuInit "
                 "returned %s)",
                 L.path, cu_text(rc, t, sizeof(t)));
        L.version = 0;
        goto unload;
    }
    if (rc == CUDA_ERROR_NO_DEVICE) {
        unusable("no CUDA device (the driver %s reports none: cuInit returned %s)", L.path,
                 cu_text(rc, t, sizeof(t)));
        goto unload;
    }
    if (rc != CUDA_SUCCESS) {
        unusable("GPU driver unusable (%s: cuInit failed: %s)", L.path, cu_text(rc, t, sizeof(t)));
        goto unload;
    }
    int n = 0;
    rc = L.f.cuDeviceGetCount(&n);
    if (rc != CUDA_SUCCESS) {
        unusable("GPU driver unusable (%s: cuDeviceGetCount failed: %s)", L.path,
                 cu_text(rc, t, sizeof(t)));
        goto unload;
    }
    if (n <= 0) {
        unusable("no CUDA device (the driver %s reports none: cuDeviceGetCount returned 0)",
                 L.path);
        goto unload;
    }
    L.devs = sys_calloc((size_t)n, sizeof(*L.devs));
    L.cache = sys_calloc(CACHE_SLOTS, sizeof(*L.cache));
    if (L.devs == NULL || L.cache == NULL) {
        unusable("GPU driver unusable (%s: out of memory)", L.path);
        goto free_devs;
    }
    for (int i = 0; i < n; i++)
        if (describe(i) != 0)
            goto free_devs;
    L.count = n;
    L.why[0] = '\0';
    IXL_LOG_INF("device layer: %s: CUDA driver %d.%d, %d device(s)", L.path, L.version / 1000,
                L.version % 1000 / 10, n);
    return;

free_devs:
    free(L.devs);
    free(L.cache);
    L.devs = NULL;
    L.cache = NULL;
unload:
    unload();
}

/* Devices (>= 0) or the negative status, with why (may be NULL) set either way. */
static int ready(char *why, size_t why_len)
{
    pthread_once(&L.once, init);
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", L.count < 0 ? L.why : "");
    return L.count;
}

/* ---- contexts --------------------------------------------------------------------------- */

static int dev_ctx(int d, CUcontext *out)
{
    CUcontext c = __atomic_load_n(&L.devs[d].ctx, __ATOMIC_ACQUIRE);
    if (c == NULL) {
        pthread_mutex_lock(&L.lock);
        c = L.devs[d].ctx;
        if (c == NULL) {
            CUresult rc = L.f.cuDevicePrimaryCtxRetain(&c, L.devs[d].cu);
            if (rc != CUDA_SUCCESS) {
                pthread_mutex_unlock(&L.lock);
                return cu_fail("cuDevicePrimaryCtxRetain", rc);
            }
            __atomic_store_n(&L.devs[d].ctx, c, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&L.lock);
    }
    *out = c;
    return IXL_OK;
}

/* The caller's context, to put back. */
struct saved_ctx {
    CUcontext prev;
    int switched;
};

/* Makes device d's primary context current on this thread (only if it is not already). */
static int ctx_enter(int d, struct saved_ctx *s)
{
    CUcontext want = NULL, cur = NULL;
    s->switched = 0;
    int rc = dev_ctx(d, &want);
    if (rc != IXL_OK)
        return rc;
    if (L.f.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        cur = NULL;
    if (cur == want)
        return IXL_OK;
    CUresult r = L.f.cuCtxSetCurrent(want);
    if (r != CUDA_SUCCESS)
        return cu_fail("cuCtxSetCurrent", r);
    s->prev = cur;
    s->switched = 1;
    return IXL_OK;
}

static void ctx_leave(struct saved_ctx *s)
{
    if (s->switched)
        L.f.cuCtxSetCurrent(s->prev);
    s->switched = 0;
}

/*
 * Before a call whose device is not known yet (classification): a thread with no current
 * context gets one already retained, if any. Without any, the call goes on without one:
 * cuPointerGetAttributes answers without a context (checked on driver 580 / CUDA 13: full
 * attributes; cuMemGetAddressRange returned CUDA_ERROR_INVALID_CONTEXT there on a thread whose
 * context had been unset, hence classify_now's device context), and retaining device 0's
 * context here would cost a DRAM-only process a GPU context.
 */
static void ctx_enter_any(struct saved_ctx *s)
{
    CUcontext cur = NULL;
    s->switched = 0;
    if (L.f.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL)
        return;
    for (int d = 0; d < L.count; d++) {
        CUcontext c = __atomic_load_n(&L.devs[d].ctx, __ATOMIC_ACQUIRE);
        if (c != NULL) {
            if (L.f.cuCtxSetCurrent(c) == CUDA_SUCCESS) {
                s->prev = NULL;
                s->switched = 1;
            }
            return;
        }
    }
}

/* ---- classification --------------------------------------------------------------------- */

struct probe {
    unsigned memtype;
    int ordinal;
    CUdeviceptr start;
    size_t size;
    unsigned long long id;
    int ipc;
    int managed;
    int mapped;
};

static CUresult probe(CUdeviceptr p, struct probe *o)
{
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_BUFFER_ID,        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_MAPPED,
    };
    memset(o, 0, sizeof(*o));
    o->ordinal = -1;
    void *data[] = {&o->memtype, &o->ordinal, &o->start,   &o->size,
                    &o->id,      &o->ipc,     &o->managed, &o->mapped};
    _Static_assert(sizeof(attrs) / sizeof(attrs[0]) == sizeof(data) / sizeof(data[0]), "pairs");
    __atomic_fetch_add(&L.n.probes, 1, __ATOMIC_RELAXED);
    return L.f.cuPointerGetAttributes(sizeof(attrs) / sizeof(attrs[0]), attrs, data, p);
}

static int is_device(const struct probe *pr)
{
    return pr->memtype == CU_MEMORYTYPE_DEVICE && !pr->managed && pr->ordinal >= 0 &&
           pr->ordinal < L.count;
}

static struct alloc *cache_slot(uint64_t id)
{
    unsigned h = (unsigned)((id * 0x9E3779B97F4A7C15ull) >> 52) & (CACHE_SLOTS - 1);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        struct alloc *a = &L.cache[(h + i) & (CACHE_SLOTS - 1)];
        if (a->id == id || a->id == 0)
            return a;
    }
    return NULL; /* cannot happen below CACHE_MAX */
}

static int cache_get(uint64_t id, struct alloc *out)
{
    int hit = 0;
    pthread_mutex_lock(&L.cache_lock);
    struct alloc *a = cache_slot(id);
    if (a != NULL && a->id == id) {
        *out = *a;
        hit = 1;
    }
    pthread_mutex_unlock(&L.cache_lock);
    return hit;
}

static void cache_put(const struct alloc *v)
{
    pthread_mutex_lock(&L.cache_lock);
    struct alloc *a = cache_slot(v->id);
    if (a != NULL && a->id == 0 && L.cached >= CACHE_MAX) {
        memset(L.cache, 0, CACHE_SLOTS * sizeof(*L.cache));
        L.cached = 0;
        a = cache_slot(v->id);
    }
    if (a != NULL) {
        if (a->id == 0)
            L.cached++;
        else if (a->has_ipc && !v->has_ipc) {
            pthread_mutex_unlock(&L.cache_lock);
            return; /* keep the export another thread stored */
        }
        *a = *v;
    }
    pthread_mutex_unlock(&L.cache_lock);
}

/*
 * The allocation containing device pointer p (probed as pr): from the cache, or derived. For
 * VMM memory the range is the one mapping (cuMemMap) that contains p, which is what
 * cuMemGetAddressRange reports; the range attributes report the whole reservation there
 * (cuMemAddressReserve), mapped or not, so they cannot bound VMM memory.
 */
static int alloc_of(CUdeviceptr p, const struct probe *pr, struct alloc *out)
{
    if (pr->id != 0 && cache_get(pr->id, out))
        return IXL_OK;
    struct alloc a = {.id = pr->id, .ordinal = pr->ordinal};
    __atomic_fetch_add(&L.n.alloc_misses, 1, __ATOMIC_RELAXED);
    /* cuMemRetainAllocationHandle succeeds only for cuMemCreate memory (VMM). */
    CUmemGenericAllocationHandle h = 0;
    if (L.f.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p) == CUDA_SUCCESS) {
        a.flags |= IXL_DEV_PTR_VMM;
        L.f.cuMemRelease(h);
    } else {
        a.base = pr->start;
        a.len = pr->size;
        if (pr->ipc)
            a.flags |= IXL_DEV_PTR_IPC_LEGACY;
    }
    if (a.len == 0) {
        CUdeviceptr b = 0;
        size_t s = 0;
        if (L.f.cuMemGetAddressRange_v2(&b, &s, p) == CUDA_SUCCESS && b <= p && p - b < s) {
            a.base = b;
            a.len = s;
        }
    }
    if (a.id != 0 && a.len != 0)
        cache_put(&a);
    *out = a;
    return IXL_OK;
}

/* The VMM granule the fallback below steps by: 2 MiB on every GPU with VMM so far. */
#define VMM_STEP ((uint64_t)2 << 20)

static int past_end(uint64_t p, uint64_t len, uint64_t base, uint64_t alen, int ordinal, char *why,
                    size_t why_len)
{
    if (why != NULL && why_len > 0)
        snprintf(why, why_len,
                 "[0x%llx, +%llu) runs past the end of its device allocation [0x%llx, +%llu) "
                 "on device %d",
                 (unsigned long long)p, (unsigned long long)len, (unsigned long long)base,
                 (unsigned long long)alen, ordinal);
    return IXL_ERR_INVALID_ARG;
}

/*
 * VMM memory (cuMemCreate + cuMemMap, as PyTorch's expandable segments make): a tensor may
 * span several mappings laid side by side in one reserved range. The run of adjacent mappings
 * of the same device that covers [p, end) counts as one allocation. When the driver reports
 * no mapping at all, every VMM granule of [p, end) must be device memory of the device.
 */
static int vmm_cover(uint64_t p, uint64_t end, struct alloc *a, char *why, size_t why_len)
{
    if (a->len == 0) {
        for (uint64_t q = p;; q = (q & ~(VMM_STEP - 1)) + VMM_STEP) {
            if (q >= end)
                q = end - 1;
            struct probe pr;
            CUresult rc = probe(q, &pr);
            if (rc != CUDA_SUCCESS)
                return cu_fail_why("cuPointerGetAttributes", rc, why, why_len);
            if (!is_device(&pr) || pr.ordinal != a->ordinal)
                return past_end(p, end - p, p, q - p, a->ordinal, why, why_len);
            if (q == end - 1)
                break;
        }
        a->base = p;
        a->len = end - p;
        return IXL_OK;
    }
    uint64_t cover = a->base + a->len;
    while (cover < end) {
        struct probe pr;
        CUdeviceptr b = 0;
        size_t s = 0;
        CUresult rc = probe(cover, &pr);
        if (rc != CUDA_SUCCESS)
            return cu_fail_why("cuPointerGetAttributes", rc, why, why_len);
        if (!is_device(&pr) || pr.ordinal != a->ordinal ||
            L.f.cuMemGetAddressRange_v2(&b, &s, cover) != CUDA_SUCCESS || b != cover || s == 0)
            return past_end(p, end - p, a->base, cover - a->base, a->ordinal, why, why_len);
        cover += s;
    }
    a->len = cover - a->base;
    return IXL_OK;
}

/* The allocation (or run of VMM mappings) holding [p, p + len), device memory probed as pr. */
static int classify_device(uint64_t p, size_t len, const struct probe *pr, struct alloc *a,
                           char *why, size_t why_len)
{
    if (len > UINT64_MAX - p) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "[0x%llx, +%zu) wraps around the address space",
                     (unsigned long long)p, len);
        return IXL_ERR_INVALID_ARG;
    }
    int s = alloc_of(p, pr, a);
    if (s != IXL_OK)
        return s;
    uint64_t end = p + (len ? len : 1);
    if (a->flags & IXL_DEV_PTR_VMM)
        return vmm_cover(p, end, a, why, why_len);
    if (a->len == 0 || p < a->base || end > a->base + a->len)
        return past_end(p, len, a->base, a->len, a->ordinal, why, why_len);
    return IXL_OK;
}

/* Classification proper; the caller has made a context current (or chose not to). */
static int classify_now(const void *ptr, size_t len, struct ixl_dev_ptr *out, struct alloc *aout,
                        char *why, size_t why_len)
{
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    struct ixl_dev_ptr r = {.size = sizeof(r), .ordinal = -1, .base = p, .len = len};
    struct probe pr;
    CUresult rc = probe(p, &pr);
    if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_VALUE) {
        /* A driver that wants a context for pointer queries (the simulated one does; CUDA
         * 13's does not) on a thread without one while no device is in use here yet, or an
         * address the driver does not know: host memory either way. */
        pr.memtype = 0;
    } else if (rc != CUDA_SUCCESS) {
        return cu_fail_why("cuPointerGetAttributes", rc, why, why_len);
    }
    struct alloc a = {.ordinal = -1};
    if (is_device(&pr)) {
        /* Pointer attributes answer without a context, range queries need one: a thread
         * with none gets the device's own for the rest (its primary context, which the
         * application that allocated the memory holds already). */
        struct saved_ctx inner = {0};
        CUcontext cur = NULL;
        if (L.f.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == NULL) {
            int s = ctx_enter(pr.ordinal, &inner);
            if (s != IXL_OK)
                return s;
        }
        int s = classify_device(p, len, &pr, &a, why, why_len);
        ctx_leave(&inner);
        if (s != IXL_OK)
            return s;
        r.ordinal = a.ordinal;
        r.base = a.base;
        r.len = a.len;
        r.buffer_id = a.id;
        r.flags = a.flags;
    }
    if (out != NULL) {
        if (out->size < sizeof(r)) {
            if (why != NULL && why_len > 0)
                snprintf(why, why_len, "struct ixl_dev_ptr's size %u is below %zu", out->size,
                         sizeof(r));
            return IXL_ERR_INVALID_ARG;
        }
        *out = r;
    }
    if (aout != NULL)
        *aout = a;
    return IXL_OK;
}

/* ---- the plugins' table ----------------------------------------------------------------- */

static int op_count(void *ctx, char *why, size_t why_len)
{
    (void)ctx;
    return ready(why, why_len);
}

static int op_classify(void *ctx, const void *ptr, size_t len, struct ixl_dev_ptr *out, char *why,
                       size_t why_len)
{
    (void)ctx;
    if (out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ready(NULL, 0) < 0) {
        if (out->size < sizeof(*out))
            return IXL_ERR_INVALID_ARG;
        uint64_t p = (uint64_t)(uintptr_t)ptr;
        *out = (struct ixl_dev_ptr){.size = sizeof(*out), .ordinal = -1, .base = p, .len = len};
        return IXL_OK; /* without a driver every address is host memory */
    }
    struct saved_ctx s;
    ctx_enter_any(&s);
    int rc = classify_now(ptr, len, out, NULL, why, why_len);
    ctx_leave(&s);
    return rc;
}

static int check_dev(int dev)
{
    return ready(NULL, 0) < 0          ? IXL_ERR_NOT_SUPPORTED
           : dev < 0 || dev >= L.count ? IXL_ERR_INVALID_ARG
                                       : IXL_OK;
}

static int op_stream_create(void *ctx, int dev, struct ixl_dev_stream **out)
{
    (void)ctx;
    int rc = check_dev(dev);
    if (rc != IXL_OK || out == NULL)
        return rc != IXL_OK ? rc : IXL_ERR_INVALID_ARG;
    struct ixl_dev_stream *s = sys_calloc(1, sizeof(*s));
    if (s == NULL)
        return IXL_ERR_NO_MEMORY;
    struct saved_ctx sc;
    rc = ctx_enter(dev, &sc);
    if (rc != IXL_OK)
        goto free_s;
    CUresult r = L.f.cuStreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS) {
        rc = cu_fail("cuStreamCreate", r);
        goto free_s;
    }
    s->dev = dev;
    *out = s;
    return IXL_OK;

free_s:
    free(s);
    return rc;
}

static void op_stream_destroy(void *ctx, struct ixl_dev_stream *s)
{
    (void)ctx;
    if (s == NULL)
        return;
    struct saved_ctx sc;
    if (ctx_enter(s->dev, &sc) == IXL_OK) {
        CUresult r = L.f.cuStreamSynchronize(s->s);
        if (r != CUDA_SUCCESS)
            cu_fail("cuStreamSynchronize (destroying a stream)", r);
        r = L.f.cuStreamDestroy_v2(s->s);
        if (r != CUDA_SUCCESS)
            cu_fail("cuStreamDestroy_v2", r);
        for (int i = 0; i < BATCH_SLOTS; i++) {
            if (s->slot[i].tab != NULL)
                B.free_host(s->slot[i].tab);
            if (s->slot[i].dev_tab != 0)
                L.f.cuMemFree_v2(s->slot[i].dev_tab);
            if (s->slot[i].ev != NULL)
                L.f.cuEventDestroy_v2(s->slot[i].ev);
        }
        ctx_leave(&sc);
    }
    free(s->bdst);
    free(s->bsrc);
    free(s->blen);
    free(s->v);
    free(s);
}

static int op_copy(void *ctx, struct ixl_dev_stream *s, void *dst, const void *src, size_t len)
{
    (void)ctx;
    if (s == NULL || (len > 0 && (dst == NULL || src == NULL)))
        return IXL_ERR_INVALID_ARG;
    if (len == 0)
        return IXL_OK;
    struct saved_ctx sc;
    int rc = ctx_enter(s->dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r =
        L.f.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, s->s);
    ctx_leave(&sc);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemcpyAsync", r);
}

/* ---- batched copies (docs/device.md, "Batched copies") -------------------------------- */

#define KERNEL_MAX_LEN ((size_t)16 << 20) /* copies this large go to the copy engines */
#define KERNEL_CHUNK ((size_t)256 << 10)  /* one block copies at most this much of an entry */
#define KERNEL_THREADS 256u               /* copy_kernel.cu's __launch_bounds__ */
/* A launch whose entries average less than this many bytes reads its table from device memory
 * (copied there on the stream first): each block reads an entry before copying it, and a read
 * of mapped host memory crosses the bus (a microsecond or two). On an H200 (docs/device.md,
 * "Batched copies"), 65,536 entries of 4 KiB went from 0.226 to 0.182 ms in one launch and from
 * 0.488 to 0.323 ms in NET's batches; 16 KiB entries were even, 32 KiB 1-3 % slower with the
 * copy. 0 at build time (-D) turns it off. */
#ifndef KERNEL_TABLE_COPY_BELOW
#define KERNEL_TABLE_COPY_BELOW ((size_t)8 << 10)
#endif

static void *sym(const char *name)
{
    return L.lib != NULL ? dlsym(L.lib, name) : NULL;
}

static void batch_resolve(void)
{
    void *p[6] = {sym("cuModuleLoadDataEx"), sym("cuModuleGetFunction"),
                  sym("cuLaunchKernel"),     sym("cuMemHostAlloc"),
                  sym("cuMemFreeHost"),      sym("cuMemHostGetDevicePointer_v2")};
    int all = 1;
    for (int i = 0; i < 6; i++)
        all &= p[i] != NULL;
    if (all) {
        memcpy(&B.load, &p[0], sizeof(p[0]));
        memcpy(&B.func, &p[1], sizeof(p[1]));
        memcpy(&B.launch, &p[2], sizeof(p[2]));
        memcpy(&B.alloc_host, &p[3], sizeof(p[3]));
        memcpy(&B.free_host, &p[4], sizeof(p[4]));
        memcpy(&B.host_dptr, &p[5], sizeof(p[5]));
    }
    void *b2 = sym("cuMemcpyBatchAsync_v2"), *b1 = b2 == NULL ? sym("cuMemcpyBatchAsync") : NULL;
    memcpy(&B.batch2, &b2, sizeof(b2));
    memcpy(&B.batch1, &b1, sizeof(b1));
    const char *m = ixl_cfg_get(IXL_CFG_DEV_COPY);
    B.mode = strcmp(m, "kernel") == 0  ? COPY_KERNEL
             : strcmp(m, "batch") == 0 ? COPY_BATCH
             : strcmp(m, "loop") == 0  ? COPY_LOOP
                                       : COPY_AUTO;
    if (B.mode == COPY_AUTO && strcmp(m, "auto") != 0)
        IXL_LOG_ERR("device layer: IXL_DEV_COPY=%s is not auto, kernel, batch or loop: using auto",
                    m);
    IXL_LOG_INF("device layer: batched copies: mode %s, copy kernel entry points %s, "
                "cuMemcpyBatchAsync %s",
                m, B.launch != NULL ? "present" : "missing",
                b2 != NULL   ? "(CUDA 13 ABI)"
                : b1 != NULL ? "(CUDA 12.8 ABI)"
                             : "missing");
}

/* Device d's copy kernel (its context current), loaded on first use; NULL when the driver
 * refused it (logged once, with the JIT's log). */
static CUfunction kernel_get(int d)
{
    struct device *dv = &L.devs[d];
    int st = __atomic_load_n(&dv->kstate, __ATOMIC_ACQUIRE);
    if (st != 0)
        return st > 0 ? dv->kfn : NULL;
    pthread_mutex_lock(&L.lock);
    if (dv->kstate == 0) {
        char log[1024] = "";
        CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *ov[2] = {log, (void *)(uintptr_t)sizeof(log)};
        const char *what = "cuModuleLoadDataEx";
        CUresult r = B.load(&dv->kmod, ixl_copy_kernel_ptx, 2, o, ov);
        if (r == CUDA_SUCCESS)
            what = "cuModuleGetFunction", r = B.func(&dv->kfn, dv->kmod, "ixl_copy_batch");
        int sms = 0;
        if (r == CUDA_SUCCESS)
            what = "cuDeviceGetAttribute",
            r = L.f.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dv->cu);
        if (r == CUDA_SUCCESS) {
            dv->kblocks = sms > 0 && sms < 4096 ? (unsigned)sms * 16u : 1024u;
            IXL_LOG_INF("device layer: GPU %d: copy kernel loaded (%u blocks per launch at most)",
                        d, dv->kblocks);
        } else {
            char t[256];
            log[sizeof(log) - 1] = '\0';
            IXL_LOG_ERR("device layer: GPU %d: the copy kernel is unusable (%s failed: %s%s%s): "
                        "batches of device copies go through the driver's copies",
                        d, what, cu_text(r, t, sizeof(t)), log[0] ? "; JIT log: " : "", log);
        }
        __atomic_store_n(&dv->kstate, r == CUDA_SUCCESS ? 1 : -1, __ATOMIC_RELEASE);
    }
    CUfunction f = dv->kstate > 0 ? dv->kfn : NULL;
    pthread_mutex_unlock(&L.lock);
    return f;
}

/* The next table of s with room for want entries (1..BATCH_MAX), once the launch that last
 * read it is done. */
static int slot_take(struct ixl_dev_stream *s, size_t want, struct batch_slot **out)
{
    struct batch_slot *b = &s->slot[s->next];
    if (b->busy) {
        CUresult r = L.f.cuEventSynchronize(b->ev);
        if (r != CUDA_SUCCESS)
            return cu_fail("cuEventSynchronize (a copy table's last launch)", r);
        b->busy = 0;
    }
    if (b->ev == NULL) {
        CUresult r = L.f.cuEventCreate(&b->ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            b->ev = NULL;
            return cu_fail("cuEventCreate", r);
        }
    }
    if (b->cap < want || b->cap < s->tab_cap) {
        size_t cap = s->tab_cap > BATCH_SLOT_FIRST ? s->tab_cap : BATCH_SLOT_FIRST;
        while (cap < want)
            cap *= 2;
        if (b->tab != NULL)
            B.free_host(b->tab);
        b->tab = NULL;
        b->cap = 0;
        void *p = NULL;
        CUresult r = B.alloc_host(&p, cap * sizeof(struct kdesc),
                                  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
        if (r != CUDA_SUCCESS)
            return cu_fail("cuMemHostAlloc (a copy table)", r);
        r = B.host_dptr(&b->dtab, p, 0);
        if (r != CUDA_SUCCESS) {
            B.free_host(p);
            return cu_fail("cuMemHostGetDevicePointer_v2 (a copy table)", r);
        }
        b->tab = p;
        b->cap = cap;
        if (cap > s->tab_cap)
            s->tab_cap = cap;
        __atomic_add_fetch(&L.n.table_allocs, 1, __ATOMIC_RELAXED);
    }
    *out = b;
    return IXL_OK;
}

static int copy_one(struct ixl_dev_stream *s, const struct ixl_dev_copy *c)
{
    __atomic_add_fetch(&L.n.single_copies, 1, __ATOMIC_RELAXED);
    CUresult r = L.f.cuMemcpyAsync((CUdeviceptr)(uintptr_t)c->dst, (CUdeviceptr)(uintptr_t)c->src,
                                   c->len, s->s);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemcpyAsync", r);
}

/* Slot b's first k entries copied to its device table on s (allocated on first use, or grown),
 * ordered before the launch that reads them; the event recorded after that launch covers the
 * copy too. Not IXL_OK: the kernel reads the mapped table instead (nothing was enqueued). */
static int table_to_device(struct ixl_dev_stream *s, struct batch_slot *b, size_t k)
{
    if (b->dev_cap < b->cap) {
        if (b->dev_tab != 0)
            L.f.cuMemFree_v2(b->dev_tab); /* the slot's last launch is done (slot_take) */
        b->dev_tab = 0;
        b->dev_cap = 0;
        CUdeviceptr p = 0;
        if (L.f.cuMemAlloc_v2(&p, b->cap * sizeof(struct kdesc)) != CUDA_SUCCESS)
            return IXL_ERR_NO_MEMORY;
        b->dev_tab = p;
        b->dev_cap = b->cap;
    }
    if (L.f.cuMemcpyAsync(b->dev_tab, (CUdeviceptr)(uintptr_t)b->tab, k * sizeof(struct kdesc),
                          s->s) != CUDA_SUCCESS)
        return IXL_ERR_BACKEND;
    __atomic_add_fetch(&L.n.kernel_table_copies, 1, __ATOMIC_RELAXED);
    return IXL_OK;
}

/* Copies as columns (struct ixl_dev_cols): copy_cols's as given, copy_batch's array as three
 * columns at the stride of struct ixl_dev_copy. */
_Static_assert(sizeof(void *) == sizeof(uint64_t) && sizeof(size_t) == sizeof(uint64_t),
               "copy_batch's pointers and lengths are read as 64-bit column values");

static inline uint64_t col_at(const struct ixl_dev_col *c, size_t k)
{
    uint64_t v;
    memcpy(&v, (const unsigned char *)c->base + k * c->stride, sizeof(v));
    return v;
}

static struct ixl_dev_cols cols_of(const struct ixl_dev_copy *v)
{
    const size_t st = sizeof(*v);
    return (struct ixl_dev_cols){{&v->dst, st}, {&v->src, st}, {&v->len, st}};
}

/* Device-to-device copies by the copy kernel: entries of up to KERNEL_CHUNK bytes into the
 * tables, one launch per table (its table copied to device memory first when its entries are
 * small); copies of KERNEL_MAX_LEN and more to the copy engines. Each copy is read once, as its
 * table is filled: one with len > 0 and a zero address ends the call (IXL_ERR_INVALID_ARG)
 * before its table is launched. */
static int batch_kernel(struct ixl_dev_stream *s, CUfunction fn, const struct ixl_dev_cols *c,
                        size_t n)
{
    size_t i = 0;
    uint64_t off = 0; /* the next byte to place: copy i from off */
    while (i < n) {
        struct batch_slot *b = NULL;
        int rc = slot_take(s, n - i < BATCH_MAX ? n - i : BATCH_MAX, &b);
        if (rc != IXL_OK)
            return rc;
        size_t k = 0, bytes = 0;
        while (i < n && k < b->cap) {
            uint64_t dst = col_at(&c->dst, i), src = col_at(&c->src, i), len = col_at(&c->len, i);
            if (__builtin_expect(len > 0 && (dst == 0 || src == 0), 0))
                return IXL_ERR_INVALID_ARG;
            if (len >= KERNEL_MAX_LEN) {
                struct ixl_dev_copy one = {(void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                                           (size_t)len};
                if ((rc = copy_one(s, &one)) != IXL_OK)
                    return rc;
                i++;
                continue;
            }
            uint64_t piece = len - off < KERNEL_CHUNK ? len - off : KERNEL_CHUNK;
            if (piece > 0)
                b->tab[k++] = (struct kdesc){dst + off, src + off, piece};
            bytes += piece;
            off += piece;
            if (off == len) {
                i++;
                off = 0;
            }
        }
        if (k == 0)
            continue;
        unsigned nk = (unsigned)k, grid = nk < L.devs[s->dev].kblocks ? nk : L.devs[s->dev].kblocks;
        CUdeviceptr tab = b->dtab;
        if (bytes < k * KERNEL_TABLE_COPY_BELOW && table_to_device(s, b, k) == IXL_OK)
            tab = b->dev_tab;
        void *args[2] = {&tab, &nk};
        CUresult r = B.launch(fn, grid, 1, 1, KERNEL_THREADS, 1, 1, 0, s->s, args, NULL);
        if (r != CUDA_SUCCESS)
            return cu_fail("cuLaunchKernel (the copy kernel)", r);
        r = L.f.cuEventRecord(b->ev, s->s);
        if (r != CUDA_SUCCESS) {
            /* No event to wait for before the table is reused: wait for the stream now. */
            L.f.cuStreamSynchronize(s->s);
            return cu_fail("cuEventRecord (after the copy kernel)", r);
        }
        b->busy = 1;
        s->next = (s->next + 1) % BATCH_SLOTS;
        __atomic_add_fetch(&L.n.kernel_launches, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&L.n.kernel_copies, k, __ATOMIC_RELAXED);
    }
    return IXL_OK;
}

/* The driver's batched copy, up to BATCH_MAX copies a call; IXL_ERR_NOT_SUPPORTED when the
 * driver refused the first call as unsupported (nothing was enqueued then). */
static int batch_driver(struct ixl_dev_stream *s, const struct ixl_dev_copy *v, size_t n)
{
    size_t want = n < BATCH_MAX ? n : BATCH_MAX;
    if (s->bcap < want) {
        CUdeviceptr *d = realloc(s->bdst, want * sizeof(*d)), *sr = NULL;
        if (d != NULL)
            s->bdst = d;
        sr = d != NULL ? realloc(s->bsrc, want * sizeof(*sr)) : NULL;
        if (sr != NULL)
            s->bsrc = sr;
        size_t *l = sr != NULL ? realloc(s->blen, want * sizeof(*l)) : NULL;
        if (l == NULL)
            return IXL_ERR_NO_MEMORY;
        s->blen = l;
        s->bcap = want;
    }
    for (size_t i = 0, first = 1; i < n; first = 0) {
        size_t m = 0;
        for (; i < n && m < s->bcap; i++) {
            if (v[i].len == 0)
                continue;
            s->bdst[m] = (CUdeviceptr)(uintptr_t)v[i].dst;
            s->bsrc[m] = (CUdeviceptr)(uintptr_t)v[i].src;
            s->blen[m++] = v[i].len;
        }
        if (m == 0)
            break;
        CUmemcpyAttributes a = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
        size_t idx = 0, fail = 0;
        CUresult r = B.batch2 != NULL
                         ? B.batch2(s->bdst, s->bsrc, s->blen, m, &a, &idx, 1, s->s)
                         : B.batch1(s->bdst, s->bsrc, s->blen, m, &a, &idx, 1, &fail, s->s);
        if (r == CUDA_ERROR_NOT_SUPPORTED && first) {
            __atomic_store_n(&B.batch_off, 1, __ATOMIC_RELAXED);
            IXL_LOG_ERR("device layer: cuMemcpyBatchAsync: CUDA_ERROR_NOT_SUPPORTED: batches go "
                        "one cuMemcpyAsync per copy from now on");
            return IXL_ERR_NOT_SUPPORTED;
        }
        if (r != CUDA_SUCCESS)
            return cu_fail("cuMemcpyBatchAsync", r);
        __atomic_add_fetch(&L.n.batch_calls, 1, __ATOMIC_RELAXED);
    }
    return IXL_OK;
}

/* copy_batch and copy_cols: the kernel reads the columns as it fills its tables; the driver's
 * batch and the one-call loop take an ixl_dev_copy array (copy_cols's built in the stream's
 * scratch array, checked as copy_batch checks its own). */
static int copy_many(struct ixl_dev_stream *s, const struct ixl_dev_copy *v,
                     const struct ixl_dev_cols *c, size_t n, uint32_t flags)
{
    if (n == 0)
        return IXL_OK;
    pthread_once(&B.once, batch_resolve);
    struct saved_ctx sc;
    int rc = ctx_enter(s->dev, &sc);
    if (rc != IXL_OK)
        return rc;
    enum copy_mode m = B.mode;
    CUfunction fn = NULL;
    if ((flags & IXL_DEV_COPY_DEVICE_ONLY) && (m == COPY_AUTO || m == COPY_KERNEL) &&
        B.launch != NULL)
        fn = kernel_get(s->dev);
    if (fn != NULL) {
        rc = batch_kernel(s, fn, c, n);
        goto leave;
    }
    if (v == NULL) { /* copy_cols: an array for the driver's paths */
        if (s->vcap < n) {
            struct ixl_dev_copy *nv = realloc(s->v, n * sizeof(*nv));
            if (nv == NULL) {
                rc = IXL_ERR_NO_MEMORY;
                goto leave;
            }
            s->v = nv;
            s->vcap = n;
        }
        for (size_t i = 0; i < n; i++) {
            s->v[i] = (struct ixl_dev_copy){(void *)(uintptr_t)col_at(&c->dst, i),
                                            (const void *)(uintptr_t)col_at(&c->src, i),
                                            (size_t)col_at(&c->len, i)};
            if (s->v[i].len > 0 && (s->v[i].dst == NULL || s->v[i].src == NULL)) {
                rc = IXL_ERR_INVALID_ARG;
                goto leave;
            }
        }
        v = s->v;
    }
    rc = IXL_ERR_NOT_SUPPORTED;
    if (m != COPY_LOOP && (B.batch2 != NULL || B.batch1 != NULL) &&
        !__atomic_load_n(&B.batch_off, __ATOMIC_RELAXED))
        rc = batch_driver(s, v, n);
    if (rc == IXL_ERR_NOT_SUPPORTED) {
        rc = IXL_OK;
        for (size_t i = 0; rc == IXL_OK && i < n; i++)
            if (v[i].len > 0)
                rc = copy_one(s, &v[i]);
    }
leave:
    ctx_leave(&sc);
    return rc;
}

static int op_copy_batch(void *ctx, struct ixl_dev_stream *s, const struct ixl_dev_copy *v,
                         size_t n, uint32_t flags)
{
    (void)ctx;
    if (s == NULL || (n > 0 && v == NULL))
        return IXL_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++)
        if (v[i].len > 0 && (v[i].dst == NULL || v[i].src == NULL))
            return IXL_ERR_INVALID_ARG;
    if (n == 0)
        return IXL_OK; /* v may be NULL */
    struct ixl_dev_cols c = cols_of(v);
    return copy_many(s, v, &c, n, flags);
}

static int col_ok(const struct ixl_dev_col *c)
{
    return c->base != NULL && (uintptr_t)c->base % 8 == 0 && c->stride % 8 == 0;
}

static int op_copy_cols(void *ctx, struct ixl_dev_stream *s, const struct ixl_dev_cols *c, size_t n,
                        uint32_t flags)
{
    (void)ctx;
    if (s == NULL || c == NULL)
        return IXL_ERR_INVALID_ARG;
    if (n > 0 && !(col_ok(&c->dst) && col_ok(&c->src) && col_ok(&c->len)))
        return IXL_ERR_INVALID_ARG;
    __atomic_add_fetch(&L.n.cols_calls, 1, __ATOMIC_RELAXED);
    return copy_many(s, NULL, c, n, flags);
}

static int op_record(void *ctx, struct ixl_dev_stream *s, struct ixl_dev_event **out)
{
    (void)ctx;
    if (s == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    struct device *d = &L.devs[s->dev];
    pthread_mutex_lock(&d->pool_lock);
    struct ixl_dev_event *e = d->pool;
    if (e != NULL) {
        d->pool = e->next;
        d->pooled--;
    }
    pthread_mutex_unlock(&d->pool_lock);
    struct saved_ctx sc;
    int rc = ctx_enter(s->dev, &sc);
    if (rc != IXL_OK)
        goto put_back;
    if (e == NULL) {
        e = sys_calloc(1, sizeof(*e));
        if (e == NULL) {
            rc = IXL_ERR_NO_MEMORY;
            goto leave;
        }
        CUresult r = L.f.cuEventCreate(&e->e, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            rc = cu_fail("cuEventCreate", r);
            free(e);
            e = NULL;
            goto leave;
        }
        e->dev = s->dev;
    }
    CUresult r = L.f.cuEventRecord(e->e, s->s);
    if (r != CUDA_SUCCESS) {
        rc = cu_fail("cuEventRecord", r);
        goto leave;
    }
    ctx_leave(&sc);
    e->next = NULL;
    *out = e;
    return IXL_OK;

leave:
    ctx_leave(&sc);
put_back:
    if (e != NULL) {
        pthread_mutex_lock(&d->pool_lock);
        e->next = d->pool;
        d->pool = e;
        d->pooled++;
        pthread_mutex_unlock(&d->pool_lock);
    }
    return rc;
}

static int event_answer(const char *what, CUresult r)
{
    if (r == CUDA_SUCCESS)
        return IXL_OK;
    if (r == CUDA_ERROR_NOT_READY)
        return IXL_IN_PROGRESS;
    (void)cu_fail(what, r);
    return IXL_ERR_BACKEND;
}

static int op_query(void *ctx, struct ixl_dev_event *e)
{
    (void)ctx;
    if (e == NULL)
        return IXL_ERR_INVALID_ARG;
    struct saved_ctx sc;
    int rc = ctx_enter(e->dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuEventQuery(e->e);
    ctx_leave(&sc);
    return event_answer("the copies before an event (cuEventQuery)", r);
}

static int op_wait(void *ctx, struct ixl_dev_event *e)
{
    (void)ctx;
    if (e == NULL)
        return IXL_ERR_INVALID_ARG;
    struct saved_ctx sc;
    int rc = ctx_enter(e->dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuEventSynchronize(e->e);
    ctx_leave(&sc);
    rc = event_answer("the copies before an event (cuEventSynchronize)", r);
    return rc == IXL_IN_PROGRESS ? IXL_ERR_BACKEND : rc;
}

static void op_event_destroy(void *ctx, struct ixl_dev_event *e)
{
    (void)ctx;
    if (e == NULL)
        return;
    struct device *d = &L.devs[e->dev];
    pthread_mutex_lock(&d->pool_lock);
    if (d->pooled < EVENT_POOL_MAX) {
        e->next = d->pool;
        d->pool = e;
        d->pooled++;
        e = NULL;
    }
    pthread_mutex_unlock(&d->pool_lock);
    if (e == NULL)
        return;
    struct saved_ctx sc;
    if (ctx_enter(e->dev, &sc) == IXL_OK) {
        CUresult r = L.f.cuEventDestroy_v2(e->e);
        if (r != CUDA_SUCCESS)
            cu_fail("cuEventDestroy_v2", r);
        ctx_leave(&sc);
    }
    free(e);
}

static int op_ipc_export(void *ctx, const void *ptr, struct ixl_dev_ipc *out)
{
    (void)ctx;
    char why[256] = "";
    if (out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    struct saved_ctx sc;
    ctx_enter_any(&sc);
    struct alloc a;
    int rc = classify_now(ptr, 1, NULL, &a, why, sizeof(why));
    ctx_leave(&sc);
    if (rc != IXL_OK) {
        IXL_LOG_ERR("device layer: cannot export %p: %s", ptr, why);
        return rc;
    }
    if (a.ordinal < 0) {
        IXL_LOG_ERR("device layer: cannot export %p for IPC: not device memory", ptr);
        return IXL_ERR_INVALID_ARG;
    }
    if (!(a.flags & IXL_DEV_PTR_IPC_LEGACY)) {
        IXL_LOG_ERR("device layer: cannot export %p with cuIpcGetMemHandle: its allocation is "
                    "%s",
                    ptr,
                    (a.flags & IXL_DEV_PTR_VMM) ? "VMM memory (cuMemCreate), exported otherwise"
                                                : "not legacy-IPC capable");
        return IXL_ERR_NOT_SUPPORTED;
    }
    if (a.has_ipc) {
        memcpy(out->bytes, a.ipc.reserved, sizeof(out->bytes));
        return IXL_OK;
    }
    rc = ctx_enter(a.ordinal, &sc);
    if (rc != IXL_OK)
        return rc;
    CUipcMemHandle h;
    __atomic_fetch_add(&L.n.ipc_exports, 1, __ATOMIC_RELAXED);
    CUresult r = L.f.cuIpcGetMemHandle(&h, (CUdeviceptr)a.base);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS)
        return cu_fail("cuIpcGetMemHandle", r);
    a.ipc = h;
    a.has_ipc = 1;
    if (a.id != 0)
        cache_put(&a);
    memcpy(out->bytes, h.reserved, sizeof(out->bytes));
    return IXL_OK;
}

static int op_ipc_open(void *ctx, int dev, const struct ixl_dev_ipc *h, void **base_out)
{
    (void)ctx;
    int rc = check_dev(dev);
    if (rc != IXL_OK || h == NULL || base_out == NULL)
        return rc != IXL_OK ? rc : IXL_ERR_INVALID_ARG;
    CUipcMemHandle ch;
    memcpy(ch.reserved, h->bytes, sizeof(ch.reserved));
    struct saved_ctx sc;
    rc = ctx_enter(dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUdeviceptr p = 0;
    CUresult r = L.f.cuIpcOpenMemHandle_v2(&p, ch, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS)
        return cu_fail("cuIpcOpenMemHandle_v2", r);
    *base_out = (void *)(uintptr_t)p;
    return IXL_OK;
}

/* The device of device pointer p, or -1. */
static int ordinal_of(const void *p)
{
    struct saved_ctx sc;
    struct probe pr;
    ctx_enter_any(&sc);
    CUresult r = probe((CUdeviceptr)(uintptr_t)p, &pr);
    ctx_leave(&sc);
    return r == CUDA_SUCCESS && is_device(&pr) && pr.ordinal < L.count ? pr.ordinal : -1;
}

static int op_ipc_close(void *ctx, void *base)
{
    (void)ctx;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    int d = ordinal_of(base);
    if (d < 0)
        return IXL_ERR_INVALID_ARG;
    struct saved_ctx sc;
    int rc = ctx_enter(d, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)base);
    ctx_leave(&sc);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuIpcCloseMemHandle", r);
}

/* ---- VMM memory between processes (issue 20) ------------------------------------------ */

/* The VMM entry points, looked up on first use (optional: a driver without them has no VMM
 * export, nothing else changes). */
static struct {
    pthread_once_t once;
    ixl_cuMemExportToShareableHandle_fn *exp;
    ixl_cuMemImportFromShareableHandle_fn *imp;
    ixl_cuMemAddressReserve_fn *reserve;
    ixl_cuMemAddressFree_fn *unreserve;
    ixl_cuMemMap_fn *map;
    ixl_cuMemUnmap_fn *unmap;
    ixl_cuMemSetAccess_fn *access;
} V = {.once = PTHREAD_ONCE_INIT};

static void vmm_resolve(void)
{
    void *f[7];
    const char *n[7] = {"cuMemExportToShareableHandle",
                        "cuMemImportFromShareableHandle",
                        "cuMemAddressReserve",
                        "cuMemAddressFree",
                        "cuMemMap",
                        "cuMemUnmap",
                        "cuMemSetAccess"};
    for (int i = 0; i < 7; i++)
        if ((f[i] = dlsym(L.lib, n[i])) == NULL)
            return;
    memcpy(&V.exp, &f[0], sizeof(f[0]));
    memcpy(&V.imp, &f[1], sizeof(f[1]));
    memcpy(&V.reserve, &f[2], sizeof(f[2]));
    memcpy(&V.unreserve, &f[3], sizeof(f[3]));
    memcpy(&V.map, &f[4], sizeof(f[4]));
    memcpy(&V.unmap, &f[5], sizeof(f[5]));
    memcpy(&V.access, &f[6], sizeof(f[6]));
}

static int vmm_ready(void)
{
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    pthread_once(&V.once, vmm_resolve);
    if (V.access == NULL) {
        IXL_LOG_ERR("device layer: the driver %s lacks the VMM export entry points", L.path);
        return IXL_ERR_NOT_SUPPORTED;
    }
    return IXL_OK;
}

static int op_vmm_export(void *ctx, const void *ptr, int *fd_out, uint64_t *base_out,
                         uint64_t *len_out)
{
    (void)ctx;
    if (fd_out == NULL || base_out == NULL || len_out == NULL)
        return IXL_ERR_INVALID_ARG;
    int rc = vmm_ready();
    if (rc != IXL_OK)
        return rc;
    struct probe pr;
    struct saved_ctx sc;
    ctx_enter_any(&sc);
    CUresult r = probe((CUdeviceptr)(uintptr_t)ptr, &pr);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS || !is_device(&pr)) {
        IXL_LOG_ERR("device layer: cannot export %p: not device memory", ptr);
        return IXL_ERR_INVALID_ARG;
    }
    rc = ctx_enter(pr.ordinal, &sc);
    if (rc != IXL_OK)
        return rc;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr b = 0;
    size_t s = 0;
    int fd = -1;
    const char *what = "cuMemRetainAllocationHandle";
    r = L.f.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr);
    if (r == CUDA_SUCCESS) {
        what = "cuMemGetAddressRange_v2";
        r = L.f.cuMemGetAddressRange_v2(&b, &s, (CUdeviceptr)(uintptr_t)ptr);
        if (r == CUDA_SUCCESS) {
            what = "cuMemExportToShareableHandle";
            r = V.exp(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        }
        L.f.cuMemRelease(h);
    }
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS) {
        char t[256];
        IXL_LOG_ERR("device layer: cannot export %p as a POSIX file descriptor: %s failed: %s "
                    "(VMM memory must be created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                    "among its requestedHandleTypes; cuMemAlloc memory is exported with "
                    "ipc_export)",
                    ptr, what, cu_text(r, t, sizeof(t)));
        return IXL_ERR_NOT_SUPPORTED;
    }
    *fd_out = fd;
    *base_out = b;
    *len_out = s;
    return IXL_OK;
}

static int op_vmm_open(void *ctx, int dev, int fd, uint64_t len, void **base_out)
{
    (void)ctx;
    int rc = vmm_ready();
    if (rc == IXL_OK)
        rc = check_dev(dev);
    if (rc != IXL_OK || base_out == NULL || fd < 0 || len == 0)
        return rc != IXL_OK ? rc : IXL_ERR_INVALID_ARG;
    struct saved_ctx sc;
    rc = ctx_enter(dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr p = 0;
    const char *what = "cuMemImportFromShareableHandle";
    CUresult r = V.imp(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS)
        goto leave;
    what = "cuMemAddressReserve";
    r = V.reserve(&p, (size_t)len, 0, 0, 0);
    if (r != CUDA_SUCCESS)
        goto release;
    what = "cuMemMap";
    r = V.map(p, (size_t)len, 0, h, 0);
    if (r != CUDA_SUCCESS)
        goto unreserve;
    what = "cuMemSetAccess";
    CUmemAccessDesc ad = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = V.access(p, (size_t)len, &ad, 1);
    if (r == CUDA_SUCCESS)
        goto release; /* the mapping keeps the memory */
    V.unmap(p, (size_t)len);
unreserve:
    V.unreserve(p, (size_t)len);
release:
    L.f.cuMemRelease(h);
leave:
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS)
        return cu_fail(what, r);
    *base_out = (void *)(uintptr_t)p;
    return IXL_OK;
}

static int op_vmm_close(void *ctx, void *base, uint64_t len)
{
    (void)ctx;
    int rc = vmm_ready();
    if (rc != IXL_OK)
        return rc;
    int d = ordinal_of(base);
    if (d < 0)
        return IXL_ERR_INVALID_ARG;
    struct saved_ctx sc;
    rc = ctx_enter(d, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = V.unmap((CUdeviceptr)(uintptr_t)base, (size_t)len);
    CUresult r2 = V.unreserve((CUdeviceptr)(uintptr_t)base, (size_t)len);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS)
        return cu_fail("cuMemUnmap", r);
    return r2 == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemAddressFree", r2);
}

/* Pinning needs a context: the thread's, else device 0's primary one. */
static int ctx_enter_pin(struct saved_ctx *s)
{
    CUcontext cur = NULL;
    s->switched = 0;
    if (L.f.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL)
        return IXL_OK;
    return ctx_enter(0, s);
}

static int op_host_pin(void *ctx, void *addr, size_t len)
{
    (void)ctx;
    if (addr == NULL || len == 0)
        return IXL_ERR_INVALID_ARG;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    struct saved_ctx sc;
    int rc = ctx_enter_pin(&sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuMemHostRegister_v2(addr, len, CU_MEMHOSTREGISTER_PORTABLE);
    ctx_leave(&sc);
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        return IXL_ERR_EXISTS; /* pinned by someone else: nothing for us to undo */
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemHostRegister_v2", r);
}

static int op_host_unpin(void *ctx, void *addr)
{
    (void)ctx;
    if (addr == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    struct saved_ctx sc;
    int rc = ctx_enter_pin(&sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuMemHostUnregister(addr);
    ctx_leave(&sc);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemHostUnregister", r);
}

/* The token of ctx_enter when nothing was switched (any other token is the previous context,
 * NULL included). */
static char no_switch;

static int op_ctx_enter(void *ctx, int dev, void **saved)
{
    (void)ctx;
    int rc = check_dev(dev);
    if (rc != IXL_OK)
        return rc;
    struct saved_ctx s;
    rc = ctx_enter(dev, &s);
    if (rc != IXL_OK)
        return rc;
    *saved = s.switched ? (void *)s.prev : (void *)&no_switch;
    return IXL_OK;
}

static void op_ctx_leave(void *ctx, void *saved)
{
    (void)ctx;
    if (saved == (void *)&no_switch || L.count <= 0)
        return;
    L.f.cuCtxSetCurrent((CUcontext)saved);
}

static const struct ixl_devops devops = {
    .size = sizeof(struct ixl_devops),
    .ctx = NULL,
    .count = op_count,
    .classify = op_classify,
    .stream_create = op_stream_create,
    .stream_destroy = op_stream_destroy,
    .copy = op_copy,
    .record = op_record,
    .query = op_query,
    .wait = op_wait,
    .event_destroy = op_event_destroy,
    .ipc_export = op_ipc_export,
    .ipc_open = op_ipc_open,
    .ipc_close = op_ipc_close,
    .host_pin = op_host_pin,
    .host_unpin = op_host_unpin,
    .vmm_export = op_vmm_export,
    .vmm_open = op_vmm_open,
    .vmm_close = op_vmm_close,
    .ctx_enter = op_ctx_enter,
    .ctx_leave = op_ctx_leave,
    .copy_batch = op_copy_batch,
    .copy_cols = op_copy_cols,
};

const struct ixl_devops *ixl_dev_ops(void)
{
    return &devops;
}

void ixl_dev_counters(struct ixl_dev_counters *out)
{
    out->probes = __atomic_load_n(&L.n.probes, __ATOMIC_RELAXED);
    out->alloc_misses = __atomic_load_n(&L.n.alloc_misses, __ATOMIC_RELAXED);
    out->ipc_exports = __atomic_load_n(&L.n.ipc_exports, __ATOMIC_RELAXED);
    out->kernel_launches = __atomic_load_n(&L.n.kernel_launches, __ATOMIC_RELAXED);
    out->kernel_copies = __atomic_load_n(&L.n.kernel_copies, __ATOMIC_RELAXED);
    out->kernel_table_copies = __atomic_load_n(&L.n.kernel_table_copies, __ATOMIC_RELAXED);
    out->table_allocs = __atomic_load_n(&L.n.table_allocs, __ATOMIC_RELAXED);
    out->cols_calls = __atomic_load_n(&L.n.cols_calls, __ATOMIC_RELAXED);
    out->batch_calls = __atomic_load_n(&L.n.batch_calls, __ATOMIC_RELAXED);
    out->single_copies = __atomic_load_n(&L.n.single_copies, __ATOMIC_RELAXED);
}

size_t ixl_device_entry_points(const char *const **out)
{
    *out = entry_names;
    return N_ENTRIES;
}

/* ---- the core's registration check ------------------------------------------------------ */

int ixl_dev_check_vram(uint64_t addr, uint64_t len, uint64_t dev, char *why, size_t why_len)
{
    char w[320];
    int n = ready(w, sizeof(w));
    if (n < 0) {
        snprintf(why, why_len, "%s", w);
        return n;
    }
    if (dev >= (uint64_t)n) {
        snprintf(why, why_len, "device %llu does not exist (%d CUDA device%s: 0..%d)",
                 (unsigned long long)dev, n, n == 1 ? "" : "s", n - 1);
        return IXL_ERR_INVALID_ARG;
    }
    struct saved_ctx sc;
    int rc = ctx_enter((int)dev, &sc);
    if (rc != IXL_OK) {
        snprintf(why, why_len,
                 "device %llu's primary context could not be made current (the log "
                 "says why)",
                 (unsigned long long)dev);
        return rc;
    }
    struct ixl_dev_ptr p = {.size = sizeof(p)};
    w[0] = '\0';
    rc = classify_now((const void *)(uintptr_t)addr, (size_t)len, &p, NULL, w, sizeof(w));
    ctx_leave(&sc);
    if (rc != IXL_OK) {
        snprintf(why, why_len, "%s", w);
        return rc;
    }
    if (p.ordinal < 0) {
        snprintf(why, why_len,
                 "[0x%llx, +%llu) is not device memory (the driver reports host memory; register "
                 "it as DRAM)",
                 (unsigned long long)addr, (unsigned long long)len);
        return IXL_ERR_INVALID_ARG;
    }
    if ((uint64_t)p.ordinal != dev) {
        snprintf(why, why_len, "[0x%llx, +%llu) is memory of device %d, not of device %llu",
                 (unsigned long long)addr, (unsigned long long)len, p.ordinal,
                 (unsigned long long)dev);
        return IXL_ERR_INVALID_ARG;
    }
    return IXL_OK;
}

/* ---- the public functions --------------------------------------------------------------- */

int ixl_device_count(char *why, size_t why_len)
{
    return ready(why, why_len);
}

ixl_status ixl_device_driver_version(int *out)
{
    if (out == NULL)
        return IXL_ERR_INVALID_ARG;
    ready(NULL, 0);
    if (L.version <= 0)
        return IXL_ERR_NOT_SUPPORTED;
    *out = L.version;
    return IXL_OK;
}

/* The first generation of struct ixl_device_info ends at pci_bus. */
#define IXL_DEVICE_INFO_V1 IXL_SIZE_THROUGH(struct ixl_device_info, pci_bus)

ixl_status ixl_device_info(int dev, struct ixl_device_info *out)
{
    if (out == NULL || ixl_out_check(out, IXL_DEVICE_INFO_V1) != IXL_OK)
        return IXL_ERR_INVALID_ARG;
    int rc = check_dev(dev);
    if (rc != IXL_OK)
        return rc;
    return ixl_out_write(out, &L.devs[dev].info, sizeof(L.devs[dev].info), IXL_DEVICE_INFO_V1,
                         _Alignof(struct ixl_device_info));
}

ixl_status ixl_device_alloc(int dev, size_t len, void **out)
{
    if (out == NULL || len == 0)
        return IXL_ERR_INVALID_ARG;
    int rc = check_dev(dev);
    if (rc != IXL_OK)
        return rc;
    struct saved_ctx sc;
    rc = ctx_enter(dev, &sc);
    if (rc != IXL_OK)
        return rc;
    CUdeviceptr p = 0;
    CUresult r = L.f.cuMemAlloc_v2(&p, len);
    ctx_leave(&sc);
    if (r != CUDA_SUCCESS)
        return cu_fail("cuMemAlloc_v2", r);
    *out = (void *)(uintptr_t)p;
    return IXL_OK;
}

ixl_status ixl_device_free(void *ptr)
{
    if (ptr == NULL)
        return IXL_OK;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    int d = ordinal_of(ptr);
    if (d < 0) {
        IXL_LOG_ERR("device layer: ixl_device_free(%p): not device memory", ptr);
        return IXL_ERR_INVALID_ARG;
    }
    struct saved_ctx sc;
    int rc = ctx_enter(d, &sc);
    if (rc != IXL_OK)
        return rc;
    CUresult r = L.f.cuMemFree_v2((CUdeviceptr)(uintptr_t)ptr);
    ctx_leave(&sc);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuMemFree_v2", r);
}

/* Device d's stream for synchronous copies, created on first use. */
static int copy_stream(int d, CUstream *out)
{
    pthread_mutex_lock(&L.lock);
    CUresult r = CUDA_SUCCESS;
    if (L.devs[d].copy_stream == NULL)
        r = L.f.cuStreamCreate(&L.devs[d].copy_stream, CU_STREAM_NON_BLOCKING);
    *out = L.devs[d].copy_stream;
    pthread_mutex_unlock(&L.lock);
    return r == CUDA_SUCCESS ? IXL_OK : cu_fail("cuStreamCreate", r);
}

ixl_status ixl_device_copy(void *dst, const void *src, size_t len)
{
    if (len == 0)
        return IXL_OK;
    if (dst == NULL || src == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ready(NULL, 0) < 0)
        return IXL_ERR_NOT_SUPPORTED;
    int d = ordinal_of(dst);
    if (d < 0)
        d = ordinal_of(src);
    if (d < 0) {
        memmove(dst, src, len); /* host to host */
        return IXL_OK;
    }
    struct saved_ctx sc;
    int rc = ctx_enter(d, &sc);
    if (rc != IXL_OK)
        return rc;
    CUstream s;
    rc = copy_stream(d, &s);
    if (rc == IXL_OK) {
        CUresult r =
            L.f.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, s);
        if (r != CUDA_SUCCESS)
            rc = cu_fail("cuMemcpyAsync", r);
        r = L.f.cuStreamSynchronize(s);
        if (r != CUDA_SUCCESS && rc == IXL_OK)
            rc = cu_fail("the copy (cuStreamSynchronize)", r);
    }
    ctx_leave(&sc);
    return rc;
}

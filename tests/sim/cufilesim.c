/*
 * libixl_cufilesim.so: a fake libcufile.so.0 for the GDS and GDS_MT backends on the simulated
 * device (libixl_cudasim.so), so that their batch and thread paths run in make test. A test
 * artifact: it reads its own environment.
 *
 * It exports the cuFile entry points plugins/gds/gds_cufile.h declares, with cuFile's
 * semantics as far as GDS relies on them, in compatibility mode (POSIX I/O through a bounce
 * buffer in host memory, copied to or from device memory with the sim's cuMemcpy):
 *   - every I/O call needs a CUDA context current on the calling thread (cuCtxGetCurrent of the
 *     sim), else it fails with CU_FILE_CUDA_DRIVER_ERROR / -CU_FILE_CUDA_DRIVER_ERROR: cuFile
 *     needs the caller's context;
 *   - a batch entry larger than per_buffer_cache_size_kb fails the submission with
 *     CU_FILE_INVALID_VALUE ("Error in setting up Batch", the seeds' 16 MiB failure), as does
 *     a submission of more entries than the batch was set up for;
 *   - batch I/O runs at submission; GetStatus hands out the completions;
 *   - cuFileBufRegister of memory that overlaps a registered buffer fails with
 *     CU_FILE_MEMORY_ALREADY_REGISTERED (as cuFile: "device memory already registered", logged
 *     on an H200 when GDS and GDS_MT of one process registered the same tensor), and
 *     cuFileBufDeregister of a pointer no registration starts at fails with
 *     CU_FILE_MEMORY_NOT_REGISTERED.
 * Environment: IXL_CUDA_LIBRARY (the sim, whose cuMemcpy/cuCtxGetCurrent it uses: the same
 * instance as the device layer's; unset: libcuda.so.1), IXL_CUFILESIM_PER_BUFFER_KB (default 1024),
 * IXL_CUFILESIM_CACHE_KB (131072), IXL_CUFILESIM_BATCH (128), IXL_CUFILESIM_DELAY_US (a sleep
 * per I/O call or batch, to observe requests in flight), IXL_CUFILESIM_SHORT (1: reads and
 * writes move at most half of what is asked, at least 4096 bytes: short transfers),
 * IXL_CUFILESIM_NOBATCH (1: batch setup fails with CU_FILE_BATCH_NOCOMPAT_ERROR, as a cuFile
 * that refuses batch I/O in compatibility mode; read at each call).
 * ixl_cufilesim_stats() reports what it saw.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugins/gds/gds_cufile.h"

/* ixl_cufilesim_stats: reads, writes, batch entries, batches, the largest entry, calls without
 * a context, registrations refused as already registered, deregistrations of memory not
 * registered, buffers registered now. */
#define IXL_CUFILESIM_STATS 9
/* Buffers registered at once (more: CU_FILE_INTERNAL_ERROR). */
#define BUF_MAX 4096

#define EXPORT __attribute__((visibility("default")))

/* The prototypes, from the plugin's own list (the same types). */
#define DECLARE(name, ret, params) EXPORT ret name params;
GDS_CUFILE_ENTRY_POINTS(DECLARE)
#undef DECLARE
EXPORT gds_CUfileError cuFileGetVersion(int *v);
EXPORT void ixl_cufilesim_stats(uint64_t out[IXL_CUFILESIM_STATS]);

typedef int (*memcpy_fn)(unsigned long long dst, unsigned long long src, size_t n);
typedef int (*ctxget_fn)(void **ctx);

static struct {
    pthread_once_t once;
    memcpy_fn cpy;
    ctxget_fn ctxget;
    uint64_t per_buffer, cache, batch, delay_us;
    bool shorten;
    pthread_mutex_t lock;
    uint64_t reads, writes, batch_entries, batches, max_entry, no_ctx;
    uint64_t buf_dup, buf_unknown;
    struct {
        uintptr_t base;
        size_t len;
    } bufs[BUF_MAX];
    size_t n_bufs;
} S = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : def;
}

static void init(void)
{
    const char *lib = getenv("IXL_CUDA_LIBRARY");
    void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        *(void **)&S.cpy = dlsym(h, "cuMemcpy");
        *(void **)&S.ctxget = dlsym(h, "cuCtxGetCurrent");
    }
    S.per_buffer = env_u64("IXL_CUFILESIM_PER_BUFFER_KB", 1024);
    S.cache = env_u64("IXL_CUFILESIM_CACHE_KB", 131072);
    S.batch = env_u64("IXL_CUFILESIM_BATCH", 128);
    S.delay_us = env_u64("IXL_CUFILESIM_DELAY_US", 0);
    S.shorten = env_u64("IXL_CUFILESIM_SHORT", 0) != 0;
}

static gds_CUfileError ok(void)
{
    return (gds_CUfileError){0, 0};
}

static gds_CUfileError fail(int err)
{
    return (gds_CUfileError){err, 0};
}

EXPORT gds_CUfileError cuFileDriverOpen(void)
{
    pthread_once(&S.once, init);
    return S.cpy && S.ctxget ? ok() : fail(GDS_CU_FILE_CUDA_DRIVER_ERROR);
}

EXPORT gds_CUfileError cuFileGetVersion(int *v)
{
    *v = 1150;
    return ok();
}

EXPORT gds_CUfileError cuFileDriverGetProperties(gds_CUfileDrvProps *p)
{
    pthread_once(&S.once, init);
    memset(p, 0, sizeof(*p));
    p->nvfs.dcontrolflags = 1u << GDS_CU_FILE_ALLOW_COMPAT_MODE;
    p->fflags = 1u << GDS_CU_FILE_BATCH_IO_SUPPORTED;
    p->per_buffer_cache_size = (unsigned)S.per_buffer;
    p->max_device_cache_size = (unsigned)S.cache;
    p->max_batch_io_size = (unsigned)S.batch;
    p->max_batch_io_timeout_msecs = 5;
    return ok();
}

struct handle {
    int fd;
};

EXPORT gds_CUfileError cuFileHandleRegister(gds_CUfileHandle *fh, gds_CUfileDescr *d)
{
    if (d->type != GDS_CU_FILE_HANDLE_TYPE_OPAQUE_FD || d->handle.fd < 0)
        return fail(GDS_CU_FILE_INVALID_VALUE);
    /* IXL_CUFILESIM_NOFILE: as cuFile answers, even in compatibility mode, for a file on a
     * volume it cannot describe (seen on an H200 VM: no udev attributes for /dev/vda). */
    const char *nf = getenv("IXL_CUFILESIM_NOFILE");
    if (nf != NULL && nf[0] == '1')
        return fail(GDS_CU_FILE_HANDLE_NOT_REGISTERED);
    struct handle *h = malloc(sizeof(*h));
    if (h == NULL)
        return fail(GDS_CU_FILE_INTERNAL_ERROR);
    h->fd = d->handle.fd;
    *fh = h;
    return ok();
}

EXPORT void cuFileHandleDeregister(gds_CUfileHandle fh)
{
    free(fh);
}

EXPORT gds_CUfileError cuFileBufRegister(const void *p, size_t len, int flags)
{
    (void)flags;
    uintptr_t a = (uintptr_t)p;
    if (p == NULL || len == 0)
        return fail(GDS_CU_FILE_INVALID_VALUE);
    gds_CUfileError rc = ok();
    pthread_mutex_lock(&S.lock);
    for (size_t i = 0; i < S.n_bufs && rc.err == GDS_CU_FILE_SUCCESS; i++)
        if (a < S.bufs[i].base + S.bufs[i].len && S.bufs[i].base < a + len)
            rc = fail(GDS_CU_FILE_MEMORY_ALREADY_REGISTERED);
    if (rc.err == GDS_CU_FILE_MEMORY_ALREADY_REGISTERED)
        S.buf_dup++;
    else if (S.n_bufs == BUF_MAX)
        rc = fail(GDS_CU_FILE_INTERNAL_ERROR);
    else {
        S.bufs[S.n_bufs].base = a;
        S.bufs[S.n_bufs++].len = len;
    }
    pthread_mutex_unlock(&S.lock);
    return rc;
}

EXPORT gds_CUfileError cuFileBufDeregister(const void *p)
{
    gds_CUfileError rc = fail(GDS_CU_FILE_MEMORY_NOT_REGISTERED);
    pthread_mutex_lock(&S.lock);
    for (size_t i = 0; i < S.n_bufs; i++)
        if (S.bufs[i].base == (uintptr_t)p) {
            S.bufs[i] = S.bufs[--S.n_bufs];
            rc = ok();
            break;
        }
    if (rc.err != GDS_CU_FILE_SUCCESS)
        S.buf_unknown++;
    pthread_mutex_unlock(&S.lock);
    return rc;
}

static bool have_ctx(void)
{
    void *c = NULL;
    if (S.ctxget(&c) != 0 || c == NULL) {
        pthread_mutex_lock(&S.lock);
        S.no_ctx++;
        pthread_mutex_unlock(&S.lock);
        return false;
    }
    return true;
}

/* One I/O: bytes moved, or -errno / -CU_FILE_xxx as cuFileRead returns them (-1 + errno). */
static ssize_t io(bool write, gds_CUfileHandle fh, const void *base, size_t size, off_t off,
                  off_t boff)
{
    if (!have_ctx())
        return -GDS_CU_FILE_CUDA_DRIVER_ERROR;
    if (S.shorten && size > 4096)
        size = size / 2 < 4096 ? 4096 : size / 2;
    struct handle *h = fh;
    void *mem = NULL; /* aligned: the file may be open with O_DIRECT */
    if (posix_memalign(&mem, 4096, size ? size : 1) != 0)
        return -GDS_CU_FILE_INTERNAL_ERROR;
    char *bounce = mem;
    unsigned long long dev = (unsigned long long)(uintptr_t)base + (unsigned long long)boff;
    ssize_t n;
    if (write) {
        if (S.cpy((unsigned long long)(uintptr_t)bounce, dev, size) != 0) {
            free(bounce);
            return -GDS_CU_FILE_CUDA_DRIVER_ERROR;
        }
        n = pwrite(h->fd, bounce, size, off);
    } else {
        n = pread(h->fd, bounce, size, off);
        if (n > 0 && S.cpy(dev, (unsigned long long)(uintptr_t)bounce, (size_t)n) != 0) {
            free(bounce);
            return -GDS_CU_FILE_CUDA_DRIVER_ERROR;
        }
    }
    int err = errno;
    free(bounce);
    pthread_mutex_lock(&S.lock);
    if (write)
        S.writes++;
    else
        S.reads++;
    pthread_mutex_unlock(&S.lock);
    if (n < 0) {
        errno = err;
        return -1;
    }
    return n;
}

EXPORT ssize_t cuFileRead(gds_CUfileHandle fh, void *base, size_t size, off_t off, off_t boff)
{
    if (S.delay_us)
        usleep((useconds_t)S.delay_us);
    return io(false, fh, base, size, off, boff);
}

EXPORT ssize_t cuFileWrite(gds_CUfileHandle fh, const void *base, size_t size, off_t off,
                           off_t boff)
{
    if (S.delay_us)
        usleep((useconds_t)S.delay_us);
    return io(true, fh, base, size, off, boff);
}

struct batch {
    unsigned cap, n, next;
    gds_CUfileIOEvents *ev;
};

EXPORT gds_CUfileError cuFileBatchIOSetUp(gds_CUfileBatchHandle *out, unsigned nr)
{
    const char *nb = getenv("IXL_CUFILESIM_NOBATCH"); /* read at each call */
    if (nb && strcmp(nb, "1") == 0)
        return fail(GDS_CU_FILE_BATCH_NOCOMPAT_ERROR);
    if (nr == 0 || nr > S.batch || nr > S.cache / (S.per_buffer ? S.per_buffer : 1))
        return fail(GDS_CU_FILE_INVALID_VALUE);
    struct batch *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->ev = calloc(nr, sizeof(*b->ev))) == NULL) {
        free(b);
        return fail(GDS_CU_FILE_INTERNAL_ERROR);
    }
    b->cap = nr;
    *out = b;
    return ok();
}

EXPORT gds_CUfileError cuFileBatchIOSubmit(gds_CUfileBatchHandle bh, unsigned nr,
                                           gds_CUfileIOParams *p, unsigned flags)
{
    struct batch *b = bh;
    (void)flags;
    if (nr == 0 || nr > b->cap || b->next < b->n)
        return fail(GDS_CU_FILE_INVALID_VALUE);
    for (unsigned i = 0; i < nr; i++)
        if (p[i].mode != GDS_CUFILE_BATCH || p[i].u.batch.size > S.per_buffer * 1024)
            return fail(GDS_CU_FILE_INVALID_VALUE); /* "Error in setting up Batch" */
    if (!have_ctx())
        return fail(GDS_CU_FILE_CUDA_DRIVER_ERROR);
    if (S.delay_us)
        usleep((useconds_t)S.delay_us);
    for (unsigned i = 0; i < nr; i++) {
        ssize_t n = io(p[i].opcode == GDS_CUFILE_WRITE, p[i].fh, p[i].u.batch.devPtr_base,
                       p[i].u.batch.size, p[i].u.batch.file_offset, p[i].u.batch.devPtr_offset);
        b->ev[i].cookie = p[i].cookie;
        b->ev[i].status = n >= 0 ? GDS_CUFILE_COMPLETE : GDS_CUFILE_FAILED;
        b->ev[i].ret = n >= 0 ? (size_t)n : 0;
        pthread_mutex_lock(&S.lock);
        S.batch_entries++;
        if (p[i].u.batch.size > S.max_entry)
            S.max_entry = p[i].u.batch.size;
        pthread_mutex_unlock(&S.lock);
    }
    pthread_mutex_lock(&S.lock);
    S.batches++;
    pthread_mutex_unlock(&S.lock);
    b->n = nr;
    b->next = 0;
    return ok();
}

EXPORT gds_CUfileError cuFileBatchIOGetStatus(gds_CUfileBatchHandle bh, unsigned min_nr,
                                              unsigned *nr, gds_CUfileIOEvents *ev,
                                              struct timespec *timeout)
{
    struct batch *b = bh;
    (void)min_nr;
    (void)timeout;
    unsigned k = 0;
    while (k < *nr && b->next < b->n)
        ev[k++] = b->ev[b->next++];
    *nr = k;
    return ok();
}

EXPORT gds_CUfileError cuFileBatchIOCancel(gds_CUfileBatchHandle bh)
{
    struct batch *b = bh;
    b->next = b->n;
    return ok();
}

EXPORT void cuFileBatchIODestroy(gds_CUfileBatchHandle bh)
{
    struct batch *b = bh;
    free(b->ev);
    free(b);
}

/* What the fake saw: cuFileRead/cuFileWrite-level I/Os, batch entries and batches, the
 * largest batch entry, and calls made without a current context. */
EXPORT void ixl_cufilesim_stats(uint64_t out[IXL_CUFILESIM_STATS])
{
    pthread_mutex_lock(&S.lock);
    out[0] = S.reads;
    out[1] = S.writes;
    out[2] = S.batch_entries;
    out[3] = S.batches;
    out[4] = S.max_entry;
    out[5] = S.no_ctx;
    out[6] = S.buf_dup;
    out[7] = S.buf_unknown;
    out[8] = S.n_bufs;
    pthread_mutex_unlock(&S.lock);
}

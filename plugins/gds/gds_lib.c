/*
 * cuFile, loaded at run time: dlopen of the library the backend's option `library` names
 * (default libcufile.so.0), its entry points by dlsym, cuFileDriverOpen once per process.
 *
 * The driver is never closed (as the device layer never releases primary contexts): closing it
 * from a destructor at exit races the application's own CUDA teardown, and another user of
 * cuFile in the process (the application, another engine) would lose its registrations.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gds.h"

#define GDS_LIBS_MAX 4

struct gds_lib {
    char path[256];
    void *handle;
    struct gds_cufile f;
    gds_CUfileDrvProps props;
    bool compat;
    char mode[384];
};

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gds_lib libs[GDS_LIBS_MAX];
static int nlibs;

static const char *const err_names[] = {
    [1] = "CU_FILE_DRIVER_NOT_INITIALIZED",
    [2] = "CU_FILE_DRIVER_INVALID_PROPS",
    [3] = "CU_FILE_DRIVER_UNSUPPORTED_LIMIT",
    [4] = "CU_FILE_DRIVER_VERSION_MISMATCH",
    [5] = "CU_FILE_DRIVER_VERSION_READ_ERROR",
    [6] = "CU_FILE_DRIVER_CLOSING",
    [7] = "CU_FILE_PLATFORM_NOT_SUPPORTED",
    [8] = "CU_FILE_IO_NOT_SUPPORTED",
    [9] = "CU_FILE_DEVICE_NOT_SUPPORTED",
    [10] = "CU_FILE_NVFS_DRIVER_ERROR",
    [11] = "CU_FILE_CUDA_DRIVER_ERROR",
    [12] = "CU_FILE_CUDA_POINTER_INVALID",
    [13] = "CU_FILE_CUDA_MEMORY_TYPE_INVALID",
    [14] = "CU_FILE_CUDA_POINTER_RANGE_ERROR",
    [15] = "CU_FILE_CUDA_CONTEXT_MISMATCH",
    [16] = "CU_FILE_INVALID_MAPPING_SIZE",
    [17] = "CU_FILE_INVALID_MAPPING_RANGE",
    [18] = "CU_FILE_INVALID_FILE_TYPE",
    [19] = "CU_FILE_INVALID_FILE_OPEN_FLAG",
    [20] = "CU_FILE_DIO_NOT_SET",
    [22] = "CU_FILE_INVALID_VALUE",
    [23] = "CU_FILE_MEMORY_ALREADY_REGISTERED",
    [24] = "CU_FILE_MEMORY_NOT_REGISTERED",
    [25] = "CU_FILE_PERMISSION_DENIED",
    [26] = "CU_FILE_DRIVER_ALREADY_OPEN",
    [27] = "CU_FILE_HANDLE_NOT_REGISTERED",
    [28] = "CU_FILE_HANDLE_ALREADY_REGISTERED",
    [29] = "CU_FILE_DEVICE_NOT_FOUND",
    [30] = "CU_FILE_INTERNAL_ERROR",
    [31] = "CU_FILE_GETNEWFD_FAILED",
    [33] = "CU_FILE_NVFS_SETUP_ERROR",
    [34] = "CU_FILE_IO_DISABLED",
    [35] = "CU_FILE_BATCH_SUBMIT_FAILED",
    [36] = "CU_FILE_GPU_MEMORY_PINNING_FAILED",
    [37] = "CU_FILE_BATCH_FULL",
    [38] = "CU_FILE_ASYNC_NOT_SUPPORTED",
    [39] = "CU_FILE_INTERNAL_BATCH_SETUP_ERROR",
    [40] = "CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR",
    [41] = "CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR",
    [42] = "CU_FILE_INTERNAL_BATCH_CANCEL_ERROR",
    [43] = "CU_FILE_NOMEM_ERROR",
    [44] = "CU_FILE_IO_ERROR",
    [45] = "CU_FILE_INTERNAL_BUF_REGISTER_ERROR",
    [46] = "CU_FILE_HASH_OPR_ERROR",
    [47] = "CU_FILE_INVALID_CONTEXT_ERROR",
    [48] = "CU_FILE_NVFS_INTERNAL_DRIVER_ERROR",
    [49] = "CU_FILE_BATCH_NOCOMPAT_ERROR",
};

static const char *err_name(int err)
{
    int i = err - 5000;
    if (err == 0)
        return "CU_FILE_SUCCESS";
    if (i > 0 && i < (int)(sizeof(err_names) / sizeof(err_names[0])) && err_names[i])
        return err_names[i];
    return "CU_FILE_(unknown)";
}

const char *gds_err_text(gds_CUfileError e, char *buf, size_t cap)
{
    if (e.err == GDS_CU_FILE_CUDA_DRIVER_ERROR)
        snprintf(buf, cap, "%s (%d), CUDA error %d", err_name(e.err), e.err, e.cu_err);
    else
        snprintf(buf, cap, "%s (%d)", err_name(e.err), e.err);
    return buf;
}

const char *gds_io_err_text(ssize_t res, int err, char *buf, size_t cap)
{
    if (res == -1)
        snprintf(buf, cap, "%s", strerror(err));
    else
        snprintf(buf, cap, "%s (%ld)", err_name((int)-res), (long)-res);
    return buf;
}

/* Whether the nvidia-fs kernel module is loaded: without it cuFile can only run in its
 * compatibility mode (POSIX I/O through bounce buffers in host memory). */
static bool nvfs_loaded(void)
{
    int fd = gds_sys()->open("/proc/driver/nvidia-fs/version", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    gds_sys()->close(fd);
    return true;
}

static int load(const struct ixl_host *host, struct gds_lib *L, char *why, size_t why_len)
{
    dlerror();
    L->handle = dlopen(L->path, RTLD_NOW | RTLD_LOCAL);
    if (L->handle == NULL) {
        const char *d = dlerror();
        size_t pl = strlen(L->path);
        if (d && strncmp(d, L->path, pl) == 0 && d[pl] == ':' && d[pl + 1] == ' ')
            d += pl + 2; /* dlerror() repeats the path */
        snprintf(why, why_len,
                 "cuFile not found (%s: %s); install GPUDirect Storage (the "
                 "nvidia-cufile package or wheel) or give its path in option library",
                 L->path, d ? d : "dlopen failed");
        return IXL_ERR_NOT_SUPPORTED;
    }
#define GDS_RESOLVE(name, ret, params)                                                           \
    *(void **)&L->f.name = dlsym(L->handle, #name);                                              \
    if (L->f.name == NULL) {                                                                     \
        snprintf(why, why_len, "cuFile unusable (%s lacks the entry point %s)", L->path, #name); \
        goto close_lib;                                                                          \
    }
    GDS_CUFILE_ENTRY_POINTS(GDS_RESOLVE)
#undef GDS_RESOLVE
    *(void **)&L->f.cuFileGetVersion = dlsym(L->handle, "cuFileGetVersion");

    /* cuFile sets up its device state on open: in device 0's context, when there is one. */
    const struct ixl_devops *dev =
        host->size >= offsetof(struct ixl_host, dev) + sizeof(host->dev) ? host->dev : NULL;
    void *saved = NULL;
    bool entered = false;
    char dwhy[256] = "";
    if (dev && dev->size >= offsetof(struct ixl_devops, ctx_leave) + sizeof(dev->ctx_leave) &&
        dev->count(dev->ctx, dwhy, sizeof(dwhy)) > 0)
        entered = dev->ctx_enter(dev->ctx, 0, &saved) == IXL_OK;
    gds_CUfileError e = L->f.cuFileDriverOpen();
    if (e.err == GDS_CU_FILE_SUCCESS || e.err == GDS_CU_FILE_DRIVER_ALREADY_OPEN) {
        memset(&L->props, 0, sizeof(L->props));
        gds_CUfileError pe = L->f.cuFileDriverGetProperties(&L->props);
        if (pe.err != GDS_CU_FILE_SUCCESS) {
            char t[96];
            host->log(host->ctx, IXL_LOG_WARN,
                      "GDS: cuFileDriverGetProperties failed (%s): using cuFile's default "
                      "limits",
                      gds_err_text(pe, t, sizeof(t)));
            memset(&L->props, 0, sizeof(L->props));
        }
    }
    if (entered)
        dev->ctx_leave(dev->ctx, saved);
    if (e.err != GDS_CU_FILE_SUCCESS && e.err != GDS_CU_FILE_DRIVER_ALREADY_OPEN) {
        char t[96];
        snprintf(why, why_len,
                 "cuFile (%s) refused to open its driver: cuFileDriverOpen returned %s%s%s",
                 L->path, gds_err_text(e, t, sizeof(t)), dwhy[0] ? "; " : "", dwhy);
        goto close_lib;
    }
    int version = 0;
    if (L->f.cuFileGetVersion == NULL || L->f.cuFileGetVersion(&version).err != 0)
        version = 0;
    bool nvfs = nvfs_loaded();
    bool allow_compat = (L->props.nvfs.dcontrolflags & (1u << GDS_CU_FILE_ALLOW_COMPAT_MODE)) != 0;
    L->compat = !nvfs;
    char ver[32] = "version unknown";
    if (version > 0)
        snprintf(ver, sizeof(ver), "%d.%d", version / 1000, version % 1000 / 10);
    snprintf(L->mode, sizeof(L->mode), "cuFile %s (%.200s), %s", ver, L->path,
             nvfs ? "nvidia-fs loaded: GPUDirect"
                  : (allow_compat ? "no nvidia-fs: compatibility mode (POSIX I/O through host "
                                    "bounce buffers)"
                                  : "no nvidia-fs and compatibility mode off in cufile.json"));
    return IXL_OK;
close_lib:
    dlclose(L->handle);
    L->handle = NULL;
    return IXL_ERR_NOT_SUPPORTED;
}

int gds_lib_load(const struct ixl_host *host, const char *lib, const struct gds_cufile **out,
                 gds_CUfileDrvProps *props, bool *compat, char *mode, size_t mode_len, char *why,
                 size_t why_len)
{
    int rc = IXL_OK;
    pthread_mutex_lock(&libs_lock);
    struct gds_lib *L = NULL;
    for (int i = 0; i < nlibs; i++)
        if (strcmp(libs[i].path, lib) == 0)
            L = &libs[i];
    if (L == NULL) {
        if (nlibs == GDS_LIBS_MAX) {
            snprintf(why, why_len, "cuFile: at most %d different libraries per process",
                     GDS_LIBS_MAX);
            rc = IXL_ERR_NOT_SUPPORTED;
            goto unlock;
        }
        L = &libs[nlibs];
        memset(L, 0, sizeof(*L));
        snprintf(L->path, sizeof(L->path), "%s", lib);
        rc = load(host, L, why, why_len);
        if (rc != IXL_OK)
            goto unlock; /* not kept: a later engine tries again */
        nlibs++;
    }
    *out = &L->f;
    *props = L->props;
    *compat = L->compat;
    snprintf(mode, mode_len, "%s", L->mode);
unlock:
    pthread_mutex_unlock(&libs_lock);
    return rc;
}

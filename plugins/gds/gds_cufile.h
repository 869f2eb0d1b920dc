/*
 * gds_cufile.h - the few cuFile entry points GDS and GDS_MT use, declared here so that ixl
 * builds without cuFile (the library is dlopen()ed at run time: libcufile.so.0, or the path
 * in the backend's option `library`).
 *
 * Types, constants and signatures follow NVIDIA's public cufile.h (CUDA 12.x / 13.x; checked
 * against its text and against generated bindings of it for 12.9 to 13.x): LP64 Linux layouts,
 * with the sizes asserted below. Only what the plugin uses is declared; names carry a gds_
 * prefix so that the real header can never clash with these.
 */
#ifndef IXL_GDS_CUFILE_H
#define IXL_GDS_CUFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* CUfileOpError: 0 is success; cuFile's own errors start at 5001 (CUFILEOP_BASE_ERR 5000). */
enum {
    GDS_CU_FILE_SUCCESS = 0,
    GDS_CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
    GDS_CU_FILE_DRIVER_INVALID_PROPS = 5002,
    GDS_CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
    GDS_CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
    GDS_CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
    GDS_CU_FILE_DRIVER_CLOSING = 5006,
    GDS_CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
    GDS_CU_FILE_IO_NOT_SUPPORTED = 5008,
    GDS_CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
    GDS_CU_FILE_NVFS_DRIVER_ERROR = 5010,
    GDS_CU_FILE_CUDA_DRIVER_ERROR = 5011,
    GDS_CU_FILE_CUDA_POINTER_INVALID = 5012,
    GDS_CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
    GDS_CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
    GDS_CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
    GDS_CU_FILE_INVALID_MAPPING_SIZE = 5016,
    GDS_CU_FILE_INVALID_MAPPING_RANGE = 5017,
    GDS_CU_FILE_INVALID_FILE_TYPE = 5018,
    GDS_CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
    GDS_CU_FILE_DIO_NOT_SET = 5020,
    GDS_CU_FILE_INVALID_VALUE = 5022,
    GDS_CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
    GDS_CU_FILE_MEMORY_NOT_REGISTERED = 5024,
    GDS_CU_FILE_PERMISSION_DENIED = 5025,
    GDS_CU_FILE_DRIVER_ALREADY_OPEN = 5026,
    GDS_CU_FILE_HANDLE_NOT_REGISTERED = 5027,
    GDS_CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
    GDS_CU_FILE_DEVICE_NOT_FOUND = 5029,
    GDS_CU_FILE_INTERNAL_ERROR = 5030,
    GDS_CU_FILE_GETNEWFD_FAILED = 5031,
    GDS_CU_FILE_NVFS_SETUP_ERROR = 5033,
    GDS_CU_FILE_IO_DISABLED = 5034,
    GDS_CU_FILE_BATCH_SUBMIT_FAILED = 5035,
    GDS_CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
    GDS_CU_FILE_BATCH_FULL = 5037,
    GDS_CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
    /* newer libraries (CUDA 12.x late, 13.x) */
    GDS_CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
    GDS_CU_FILE_BATCH_NOCOMPAT_ERROR = 5049, /* batch I/O not available in compatibility mode */
};

/* CUfileError_t: returned by value (two 32-bit enums: one register on x86-64 and aarch64). */
typedef struct {
    int err;    /* CUfileOpError */
    int cu_err; /* CUresult, when err is CU_FILE_CUDA_DRIVER_ERROR */
} gds_CUfileError;

typedef void *gds_CUfileHandle;
typedef void *gds_CUfileBatchHandle;

#define GDS_CU_FILE_HANDLE_TYPE_OPAQUE_FD 1

/* CUfileDescr_t */
typedef struct {
    int type; /* CUfileFileHandleType */
    union {
        int fd;
        void *handle;
    } handle;
    const void *fs_ops; /* CUfileFSOps_t *: NULL for kernel file systems */
} gds_CUfileDescr;

/* CUfileDrvProps_t; the sizes are in KB (cufile.json's *_kb keys). */
typedef struct {
    struct {
        unsigned int major_version;
        unsigned int minor_version;
        size_t poll_thresh_size;
        size_t max_direct_io_size;
        unsigned int dstatusflags;
        unsigned int dcontrolflags;
    } nvfs;
    unsigned int fflags;
    unsigned int max_device_cache_size;
    unsigned int per_buffer_cache_size;
    unsigned int max_device_pinned_mem_size;
    unsigned int max_batch_io_size;
    unsigned int max_batch_io_timeout_msecs;
} gds_CUfileDrvProps;

/* CUfileDriverControlFlags_t and CUfileFeatureFlags_t are bit numbers. */
#define GDS_CU_FILE_USE_POLL_MODE 0
#define GDS_CU_FILE_ALLOW_COMPAT_MODE 1
#define GDS_CU_FILE_BATCH_IO_SUPPORTED 1

/* CUfileOpcode_t, CUfileBatchMode_t, CUfileStatus_t */
#define GDS_CUFILE_READ 0
#define GDS_CUFILE_WRITE 1
#define GDS_CUFILE_BATCH 1
enum {
    GDS_CUFILE_WAITING = 0x1,
    GDS_CUFILE_PENDING = 0x2,
    GDS_CUFILE_INVALID = 0x4,
    GDS_CUFILE_CANCELED = 0x8,
    GDS_CUFILE_COMPLETE = 0x10,
    GDS_CUFILE_TIMEOUT = 0x20,
    GDS_CUFILE_FAILED = 0x40,
};

/* CUfileIOParams_t */
typedef struct {
    int mode; /* CUFILE_BATCH */
    union {
        struct {
            void *devPtr_base;
            off_t file_offset;
            off_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    gds_CUfileHandle fh;
    int opcode;
    void *cookie;
} gds_CUfileIOParams;

/* CUfileIOEvents_t */
typedef struct {
    void *cookie;
    int status; /* CUfileStatus_t */
    size_t ret; /* bytes moved, when COMPLETE */
} gds_CUfileIOEvents;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(gds_CUfileError) == 8, "CUfileError_t");
_Static_assert(sizeof(gds_CUfileDescr) == 24, "CUfileDescr_t");
_Static_assert(sizeof(gds_CUfileDrvProps) == 56, "CUfileDrvProps_t");
_Static_assert(sizeof(gds_CUfileIOParams) == 64, "CUfileIOParams_t");
_Static_assert(offsetof(gds_CUfileIOParams, fh) == 40, "CUfileIOParams_t.fh");
_Static_assert(sizeof(gds_CUfileIOEvents) == 24, "CUfileIOEvents_t");
#endif

/*
 * The entry points, as X(name, return type, parameters). The exported names are these
 * (cuFileDriverClose is not used: the driver stays open for the process's life, as the device
 * layer's primary contexts do; cuFile closes it at exit).
 */
#define GDS_CUFILE_ENTRY_POINTS(X)                                                            \
    X(cuFileDriverOpen, gds_CUfileError, (void))                                              \
    X(cuFileDriverGetProperties, gds_CUfileError, (gds_CUfileDrvProps *))                     \
    X(cuFileHandleRegister, gds_CUfileError, (gds_CUfileHandle *, gds_CUfileDescr *))         \
    X(cuFileHandleDeregister, void, (gds_CUfileHandle))                                       \
    X(cuFileBufRegister, gds_CUfileError, (const void *, size_t, int))                        \
    X(cuFileBufDeregister, gds_CUfileError, (const void *))                                   \
    X(cuFileRead, ssize_t, (gds_CUfileHandle, void *, size_t, off_t, off_t))                  \
    X(cuFileWrite, ssize_t, (gds_CUfileHandle, const void *, size_t, off_t, off_t))           \
    X(cuFileBatchIOSetUp, gds_CUfileError, (gds_CUfileBatchHandle *, unsigned))               \
    X(cuFileBatchIOSubmit, gds_CUfileError,                                                   \
      (gds_CUfileBatchHandle, unsigned, gds_CUfileIOParams *, unsigned))                      \
    X(cuFileBatchIOGetStatus, gds_CUfileError,                                                \
      (gds_CUfileBatchHandle, unsigned, unsigned *, gds_CUfileIOEvents *, struct timespec *)) \
    X(cuFileBatchIOCancel, gds_CUfileError, (gds_CUfileBatchHandle))                          \
    X(cuFileBatchIODestroy, void, (gds_CUfileBatchHandle))

/* Optional: older libraries lack it. */
typedef gds_CUfileError (*gds_cuFileGetVersion_fn)(int *);

struct gds_cufile {
#define GDS_CUFILE_FIELD(name, ret, params) ret(*name) params;
    GDS_CUFILE_ENTRY_POINTS(GDS_CUFILE_FIELD)
#undef GDS_CUFILE_FIELD
    gds_cuFileGetVersion_fn cuFileGetVersion; /* NULL when absent */
};

#endif

/*
 * The subset of the CUDA driver API that ixl uses, declared here so that ixl builds without
 * CUDA (docs/device.md). The device layer (src/device/) resolves these entry points at run time
 * with dlsym from libcuda.so.1 (or IXL_CUDA_LIBRARY); the simulated device for the tests
 * (tests/sim/cudasim.c) defines them with CUDA's semantics.
 *
 * Every value below equals the one in NVIDIA's cuda.h (CUDA 12.x; unchanged in 13.x for the
 * names used here), checked against the public header text; the entry points are the exported
 * symbol names (the _v2 names are the ones cuda.h's macros select). Append-only: the simulated
 * device and tests/gpu include this header too.
 */
#ifndef IXL_DEVICE_CUDA_API_H
#define IXL_DEVICE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- handles ---------------------------------------------------------------------------- */

typedef unsigned long long CUdeviceptr; /* LP64: pointer-sized */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUmemGenericAllocationHandle;

#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

/* ---- results ---------------------------------------------------------------------------- */

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_UNMAP_FAILED = 206,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NOT_MAPPED = 211,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_TOO_MANY_PEERS = 711,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_NOT_READY = 802,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

/* ---- enums and flags -------------------------------------------------------------------- */

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103
} CUdevice_attribute;

typedef enum CUpointer_attribute_enum {
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,                 /* unsigned int: CUmemorytype */
    CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,              /* CUdeviceptr */
    CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,                /* void * */
    CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,                   /* unsigned long long */
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,                  /* int (bool) */
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,              /* int */
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10, /* int (bool) */
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,           /* CUdeviceptr */
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,                 /* size_t */
    CU_POINTER_ATTRIBUTE_MAPPED = 13,                     /* int (bool) */
    CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14,       /* unsigned long long */
    CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15  /* int (bool) */
} CUpointer_attribute;

typedef enum CUmemorytype_enum {
    CU_MEMORYTYPE_HOST = 1,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_ARRAY = 3,
    CU_MEMORYTYPE_UNIFIED = 4
} CUmemorytype;

/* cuStreamCreate flags */
#define CU_STREAM_DEFAULT 0x0u
#define CU_STREAM_NON_BLOCKING 0x1u

/* cuEventCreate flags */
#define CU_EVENT_DEFAULT 0x0u
#define CU_EVENT_BLOCKING_SYNC 0x1u
#define CU_EVENT_DISABLE_TIMING 0x2u
#define CU_EVENT_INTERPROCESS 0x4u

/* cuIpcOpenMemHandle flags */
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1u

/* cuMemHostRegister flags */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01u
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02u
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04u
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08u

/* cuMemHostAlloc flags */
#define CU_MEMHOSTALLOC_PORTABLE 0x01u
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02u

/* ---- modules, kernels, batched copies (the device layer's batched copies) ---------------- */

typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

typedef enum CUjit_option_enum {
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
} CUjit_option;

typedef enum CUmemcpySrcAccessOrder_enum {
    CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0x0,
    CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 0x1,
    CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL = 0x2,
    CU_MEMCPY_SRC_ACCESS_ORDER_ANY = 0x3,
    CU_MEMCPY_SRC_ACCESS_ORDER_MAX = 0x7FFFFFFF
} CUmemcpySrcAccessOrder;

#define CU_MEMCPY_FLAG_DEFAULT 0x0

/* ---- virtual memory management (cuMemCreate / cuMemMap) --------------------------------- */

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
    CU_MEM_ALLOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1, /* an int fd */
    CU_MEM_HANDLE_TYPE_WIN32 = 0x2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 0x4,
    CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
    CU_MEM_HANDLE_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1, /* id is a device ordinal */
    CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemLocationType;

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
    CU_MEM_ACCESS_FLAGS_PROT_MAX = 0x7FFFFFFF
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData; /* must be NULL on Linux */
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

/* cuMemcpyBatchAsync's attributes (CUDA 12.8). */
typedef struct CUmemcpyAttributes_st {
    CUmemcpySrcAccessOrder srcAccessOrder;
    CUmemLocation srcLocHint;
    CUmemLocation dstLocHint;
    unsigned int flags;
} CUmemcpyAttributes;

_Static_assert(sizeof(CUdeviceptr) == sizeof(void *), "CUdeviceptr is pointer-sized");
_Static_assert(sizeof(CUipcMemHandle) == 64, "CUipcMemHandle is 64 bytes");
_Static_assert(sizeof(CUresult) == 4, "CUresult is an int-sized enum");
_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout (LP64)");
_Static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == 16, "CUmemAllocationProp");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

/* ---- entry points ----------------------------------------------------------------------- */

/*
 * One function type per entry point, named ixl_<symbol>_fn. A definition can be checked
 * against it (the sim declares `ixl_cuInit_fn cuInit;` before defining cuInit), and the
 * device layer holds `ixl_cuInit_fn *` pointers.
 */
typedef CUresult ixl_cuInit_fn(unsigned int flags);
typedef CUresult ixl_cuDriverGetVersion_fn(int *version);
typedef CUresult ixl_cuGetErrorString_fn(CUresult error, const char **str);
typedef CUresult ixl_cuGetErrorName_fn(CUresult error, const char **str);
typedef CUresult ixl_cuDeviceGetCount_fn(int *count);
typedef CUresult ixl_cuDeviceGet_fn(CUdevice *device, int ordinal);
typedef CUresult ixl_cuDeviceGetName_fn(char *name, int len, CUdevice dev);
typedef CUresult ixl_cuDeviceGetAttribute_fn(int *value, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult ixl_cuDeviceTotalMem_v2_fn(size_t *bytes, CUdevice dev);
typedef CUresult ixl_cuDevicePrimaryCtxRetain_fn(CUcontext *ctx, CUdevice dev);
typedef CUresult ixl_cuDevicePrimaryCtxRelease_v2_fn(CUdevice dev);
typedef CUresult ixl_cuCtxSetCurrent_fn(CUcontext ctx);
typedef CUresult ixl_cuCtxGetCurrent_fn(CUcontext *ctx);
typedef CUresult ixl_cuCtxGetDevice_fn(CUdevice *device);
typedef CUresult ixl_cuPointerGetAttribute_fn(void *data, CUpointer_attribute attribute,
                                              CUdeviceptr ptr);
typedef CUresult ixl_cuPointerGetAttributes_fn(unsigned int count, CUpointer_attribute *attributes,
                                               void **data, CUdeviceptr ptr);
typedef CUresult ixl_cuMemGetAddressRange_v2_fn(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
typedef CUresult ixl_cuMemAlloc_v2_fn(CUdeviceptr *ptr, size_t bytes);
typedef CUresult ixl_cuMemFree_v2_fn(CUdeviceptr ptr);
typedef CUresult ixl_cuMemcpy_fn(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
typedef CUresult ixl_cuMemcpyAsync_fn(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                      CUstream stream);
typedef CUresult ixl_cuMemcpyHtoD_v2_fn(CUdeviceptr dst, const void *src, size_t bytes);
typedef CUresult ixl_cuMemcpyDtoH_v2_fn(void *dst, CUdeviceptr src, size_t bytes);
typedef CUresult ixl_cuMemsetD8_v2_fn(CUdeviceptr dst, unsigned char value, size_t count);
typedef CUresult ixl_cuStreamCreate_fn(CUstream *stream, unsigned int flags);
typedef CUresult ixl_cuStreamDestroy_v2_fn(CUstream stream);
typedef CUresult ixl_cuStreamSynchronize_fn(CUstream stream);
typedef CUresult ixl_cuEventCreate_fn(CUevent *event, unsigned int flags);
typedef CUresult ixl_cuEventRecord_fn(CUevent event, CUstream stream);
typedef CUresult ixl_cuEventQuery_fn(CUevent event);
typedef CUresult ixl_cuEventSynchronize_fn(CUevent event);
typedef CUresult ixl_cuEventDestroy_v2_fn(CUevent event);
typedef CUresult ixl_cuIpcGetMemHandle_fn(CUipcMemHandle *handle, CUdeviceptr ptr);
typedef CUresult ixl_cuIpcOpenMemHandle_v2_fn(CUdeviceptr *ptr, CUipcMemHandle handle,
                                              unsigned int flags);
typedef CUresult ixl_cuIpcCloseMemHandle_fn(CUdeviceptr ptr);
typedef CUresult ixl_cuMemHostRegister_v2_fn(void *p, size_t bytes, unsigned int flags);
typedef CUresult ixl_cuMemHostUnregister_fn(void *p);
typedef CUresult ixl_cuMemGetAllocationGranularity_fn(size_t *granularity,
                                                      const CUmemAllocationProp *prop,
                                                      CUmemAllocationGranularity_flags option);
typedef CUresult ixl_cuMemCreate_fn(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags);
typedef CUresult ixl_cuMemRelease_fn(CUmemGenericAllocationHandle handle);
typedef CUresult ixl_cuMemAddressReserve_fn(CUdeviceptr *ptr, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags);
typedef CUresult ixl_cuMemAddressFree_fn(CUdeviceptr ptr, size_t size);
typedef CUresult ixl_cuMemMap_fn(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult ixl_cuMemUnmap_fn(CUdeviceptr ptr, size_t size);
typedef CUresult ixl_cuMemSetAccess_fn(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                       size_t count);
typedef CUresult ixl_cuMemRetainAllocationHandle_fn(CUmemGenericAllocationHandle *handle,
                                                    void *addr);
typedef CUresult ixl_cuMemGetAllocationPropertiesFromHandle_fn(CUmemAllocationProp *prop,
                                                               CUmemGenericAllocationHandle handle);
typedef CUresult ixl_cuMemExportToShareableHandle_fn(void *shareable,
                                                     CUmemGenericAllocationHandle handle,
                                                     CUmemAllocationHandleType type,
                                                     unsigned long long flags);
typedef CUresult ixl_cuMemImportFromShareableHandle_fn(CUmemGenericAllocationHandle *handle,
                                                       void *os_handle,
                                                       CUmemAllocationHandleType type);

typedef CUresult ixl_cuModuleLoadDataEx_fn(CUmodule *module, const void *image,
                                           unsigned int numOptions, CUjit_option *options,
                                           void **optionValues);
typedef CUresult ixl_cuModuleGetFunction_fn(CUfunction *hfunc, CUmodule hmod, const char *name);
typedef CUresult ixl_cuModuleUnload_fn(CUmodule hmod);
typedef CUresult ixl_cuLaunchKernel_fn(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX,
                                       unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra);
typedef CUresult ixl_cuMemHostAlloc_fn(void **pp, size_t bytesize, unsigned int Flags);
typedef CUresult ixl_cuMemFreeHost_fn(void *p);
typedef CUresult ixl_cuMemHostGetDevicePointer_v2_fn(CUdeviceptr *pdptr, void *p,
                                                     unsigned int Flags);
/* CUDA 13.0's cuMemcpyBatchAsync (the symbol cuMemcpyBatchAsync_v2). */
typedef CUresult ixl_cuMemcpyBatchAsync_v2_fn(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                              size_t count, CUmemcpyAttributes *attrs,
                                              size_t *attrsIdxs, size_t numAttrs, CUstream hStream);
/* CUDA 12.8's (the symbol cuMemcpyBatchAsync, which cuda.h 13 no longer declares: it names
 * the _v2 one, so test_cuda_api_h cannot compare this type; its failIdx is the difference). */
typedef CUresult ixl_cuMemcpyBatchAsync_v1_fn(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                              size_t count, CUmemcpyAttributes *attrs,
                                              size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                              CUstream hStream);

/*
 * The entry points the device layer resolves (every one required: a missing one makes the
 * driver unusable, and the layer says which). X(name) per entry point; the layer's table and
 * the list ixl_device_entry_points() returns (tests/unit/test_cuda_stub.c) both expand it.
 */
#define IXL_CUDA_LAYER_ENTRY_POINTS(X) \
    X(cuInit)                          \
    X(cuDriverGetVersion)              \
    X(cuGetErrorString)                \
    X(cuGetErrorName)                  \
    X(cuDeviceGetCount)                \
    X(cuDeviceGet)                     \
    X(cuDeviceGetName)                 \
    X(cuDeviceGetAttribute)            \
    X(cuDeviceTotalMem_v2)             \
    X(cuDevicePrimaryCtxRetain)        \
    X(cuCtxSetCurrent)                 \
    X(cuCtxGetCurrent)                 \
    X(cuPointerGetAttributes)          \
    X(cuMemGetAddressRange_v2)         \
    X(cuMemAlloc_v2)                   \
    X(cuMemFree_v2)                    \
    X(cuMemcpyAsync)                   \
    X(cuStreamCreate)                  \
    X(cuStreamDestroy_v2)              \
    X(cuStreamSynchronize)             \
    X(cuEventCreate)                   \
    X(cuEventRecord)                   \
    X(cuEventQuery)                    \
    X(cuEventSynchronize)              \
    X(cuEventDestroy_v2)               \
    X(cuIpcGetMemHandle)               \
    X(cuIpcOpenMemHandle_v2)           \
    X(cuIpcCloseMemHandle)             \
    X(cuMemHostRegister_v2)            \
    X(cuMemHostUnregister)             \
    X(cuMemRetainAllocationHandle)     \
    X(cuMemRelease)

/* The rest of the subset: the simulated device exports these too, tests/gpu uses them. */
#define IXL_CUDA_OTHER_ENTRY_POINTS(X)        \
    X(cuDevicePrimaryCtxRelease_v2)           \
    X(cuMemcpy)                               \
    X(cuCtxGetDevice)                         \
    X(cuPointerGetAttribute)                  \
    X(cuMemcpyHtoD_v2)                        \
    X(cuMemcpyDtoH_v2)                        \
    X(cuMemsetD8_v2)                          \
    X(cuMemGetAllocationGranularity)          \
    X(cuMemCreate)                            \
    X(cuMemAddressReserve)                    \
    X(cuMemAddressFree)                       \
    X(cuMemMap)                               \
    X(cuMemUnmap)                             \
    X(cuMemSetAccess)                         \
    X(cuMemGetAllocationPropertiesFromHandle) \
    X(cuMemExportToShareableHandle)           \
    X(cuMemImportFromShareableHandle)

/* Optional: the device layer's batched copies use them when the driver has them
 * (docs/device.md, "Batched copies"); the simulated device exports them too. */
#define IXL_CUDA_BATCH_ENTRY_POINTS(X) \
    X(cuModuleLoadDataEx)              \
    X(cuModuleGetFunction)             \
    X(cuModuleUnload)                  \
    X(cuLaunchKernel)                  \
    X(cuMemHostAlloc)                  \
    X(cuMemFreeHost)                   \
    X(cuMemHostGetDevicePointer_v2)    \
    X(cuMemcpyBatchAsync_v2)

#endif

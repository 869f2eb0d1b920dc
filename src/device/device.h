/*
 * The device layer (docs/device.md): the process's one way to GPU memory. It loads the CUDA
 * driver API at run time (libcuda.so.1 or IXL_CUDA_LIBRARY) on first use, and serves the
 * public ixl_device_* functions, the plugins' table (struct ixl_devops through host->dev) and
 * the core's VRAM registration check.
 */
#ifndef IXL_DEVICE_DEVICE_H
#define IXL_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

/* The table every engine's host->dev points at (never NULL; count() says whether a driver
 * is there). */
const struct ixl_devops *ixl_dev_ops(void);

/*
 * The entry points the layer resolves with dlsym, in the order it resolves them: the same
 * list (IXL_CUDA_LAYER_ENTRY_POINTS in cuda_api.h) expands into the layer's table, so this is
 * what the code uses, not a copy. *out points at static storage.
 */
size_t ixl_device_entry_points(const char *const **out);

/* What the layer asked the driver, since the process started (tests read it to show that the
 * per-allocation cache works). */
struct ixl_dev_counters {
    uint64_t probes;       /* cuPointerGetAttributes calls */
    uint64_t alloc_misses; /* allocations derived (not found in the cache) */
    uint64_t ipc_exports;  /* cuIpcGetMemHandle calls */
    /* copy_batch: which way the copies went (docs/device.md, "Batched copies") */
    uint64_t kernel_launches;     /* launches of the copy kernel */
    uint64_t kernel_copies;       /* table entries those launches copied */
    uint64_t kernel_table_copies; /* launches whose table was copied to device memory first */
    uint64_t table_allocs;        /* copy tables (pinned) allocated or grown */
    uint64_t cols_calls;          /* copy_cols calls (ABI 2.7) */
    uint64_t batch_calls;         /* cuMemcpyBatchAsync calls */
    uint64_t single_copies;       /* cuMemcpyAsync calls made by copy_batch */
};
void ixl_dev_counters(struct ixl_dev_counters *out);

/*
 * The core's check of a VRAM registration descriptor: [addr, addr + len) must be device memory
 * of device dev lying wholly inside one allocation (or one contiguous run of VMM mappings).
 * IXL_OK, or a status with a sentence in why: IXL_ERR_NOT_SUPPORTED (no driver, stub, no
 * device: says which), IXL_ERR_INVALID_ARG (not device memory, another device, past the
 * allocation's end, dev out of range), IXL_ERR_BACKEND (the driver failed).
 */
int ixl_dev_check_vram(uint64_t addr, uint64_t len, uint64_t dev, char *why, size_t why_len);

#endif

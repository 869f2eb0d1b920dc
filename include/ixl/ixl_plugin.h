/*
 * ixl_plugin.h - the south-bound ABI: what a backend plugin implements.
 *
 * A plugin exports one entry symbol, IXL_PLUGIN_ENTRY_SYMBOL ("ixl_plugin_entry"), a function
 * returning a pointer to a const struct ixl_plugin_desc. The descriptor begins with the ABI
 * major/minor and its own size; it carries the plugin's name, version, capabilities, memory
 * types and options as data, the plugin-manager entry points (create/destroy an engine), and
 * the engine's ops table, which begins with its own size.
 *
 * Growth rules: every struct that crosses this boundary begins with its size, and new fields
 * only ever go at its end (the descriptor carries its size after the ABI version):
 *  - written by the plugin, read by the core (struct ixl_plugin_desc, ixl_engine_ops,
 *    ixl_engine): the plugin sets size to sizeof() as it was built; the core reads a field or
 *    calls a method only when that size covers it, ignores whatever a plugin built against a
 *    newer header has past the end of what this core knows, and refuses a size below the first
 *    generation's;
 *  - written by the core, read by the plugin (struct ixl_host, ixl_engine_init,
 *    ixl_xfer_opts): the core sets size; the plugin reads a field only when size covers it;
 *  - buffers the core hands the plugin to fill (struct ixl_req_info, ixl_cost): the core
 *    sets size to its own sizeof, never below the first generation's; the plugin writes only
 *    fields that lie entirely within size (so a plugin that writes only first-generation
 *    fields needs no check);
 *  - structs in arrays (struct ixl_xfer_desc, ixl_reg_desc, ixl_kv, ixl_mem_query,
 *    ixl_option, ixl_opt_value) are frozen: a later generation adds a new struct type and a
 *    new method.
 * A change to a frozen layout, or any removal, bumps IXL_PLUGIN_ABI_MAJOR; the manager refuses
 * a plugin of another major. Every optional method has a documented fallback. Methods every
 * backend needs (register_mem, deregister_mem, unload_md, prep_xfer, post_xfer, check_xfer,
 * release_req) and the methods a capability the plugin advertises requires (listed with each
 * method) must be implemented: the manager refuses the plugin otherwise, naming the missing
 * method in the log and in ixl-info. Any other slot may be NULL (or lie past the table's
 * size): the core then applies the method's fallback, never calls into the plugin for it.
 *
 * Callbacks: the core never holds a lock that host->signal() takes while it calls into a
 * plugin, so a plugin may call signal() from any thread at any time, and destroy_engine may
 * wait for its own threads that do.
 *
 * Threads: see "Threads" below (which calls the core serializes, which may run at once).
 *
 * Objects: struct ixl_md (per-region metadata) and struct ixl_req (per-request state) are
 * never defined: a plugin casts its own objects to these pointer types. A plugin's engine
 * embeds struct ixl_engine first.
 *
 * Language: this header is C99 (or later) and C++11 (or later) for GCC-compatible compilers
 * (GCC, clang): it uses __attribute__ (format, visibility). ctest's test_headers_* compile it
 * with -std=c99 and -std=c11 -pedantic -Wall -Wextra -Werror, and with g++ -std=c++11 and
 * -std=c++17 -pedantic -Wall -Wextra -Werror. In C++, IXL_PLUGIN_EXPORT gives the entry symbol
 * C linkage; designated initializers of the ops table need C++20, or fill it member by member.
 *
 * Everything the plugin manager and the core check and assume is written in this header:
 * "Validation" (what gets a plugin refused, with the reason ixl-info shows), "Memory types",
 * "Notifications", "Pointers" and "Threads" below, and each method's comment (whether it is
 * required and by which capability, or optional with the core's fallback). A third party
 * implements a plugin from this header alone.
 */
#ifndef IXL_IXL_PLUGIN_H
#define IXL_IXL_PLUGIN_H

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ixl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2.0: struct ixl_engine and struct ixl_req_info begin with their size; struct ixl_cost too.
 * 2.3: struct ixl_devops ends with ctx_enter/ctx_leave.
 * 2.4: struct ixl_host ends with env (a plugin's documented environment defaults).
 * 2.5: struct ixl_engine_ops ends with wait_xfer (a waiting caller watches the request's end).
 * 2.6: struct ixl_devops ends with copy_batch (many copies in a few driver calls).
 * 2.7: struct ixl_devops ends with copy_cols (copy_batch from the caller's own arrays). */
#define IXL_PLUGIN_ABI_MAJOR 2
#define IXL_PLUGIN_ABI_MINOR 7

/** The symbol a dynamic plugin exports. */
#define IXL_PLUGIN_ENTRY_SYMBOL "ixl_plugin_entry"

struct ixl_md; /* a backend's metadata for one region (local or remote); never defined */
struct ixl_devops;
struct ixl_sys;
struct iovec;
struct stat;
struct sockaddr;
struct msghdr;
struct addrinfo;
struct pollfd;
struct epoll_event;
struct io_uring;
struct ixl_req; /* a backend's request handle; never defined */
struct ixl_plugin_desc;

/** What the core gives an engine to call back. Valid for the engine's whole life. */
struct ixl_host {
    uint32_t size; /* sizeof(struct ixl_host) as the core built it */
    void *ctx;     /* pass back to the callbacks */
    /** Logs a line through the application's sink (no trailing newline needed). */
    void (*log)(void *ctx, enum ixl_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /**
     * Sets the text the agent reports through ixl_agent_last_error() for the error the
     * calling method is about to return; also logs it at ERROR level unless status is
     * IXL_ERR_NOT_SUPPORTED or IXL_ERR_BAD_MEM_TYPE (prep_xfer refusing a pair of memory
     * types: the core then tries the next backend that holds both lists).
     */
    void (*error)(void *ctx, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /**
     * Wakes the agent's waiters: a request of this engine may have completed or a
     * notification arrived. Cheap, safe from any thread (including the plugin's own) and
     * from inside other methods.
     */
    void (*signal)(void *ctx);
    /**
     * The process-wide table of allocation and system-call hooks (struct ixl_sys below),
     * never NULL. A plugin makes its allocations and system calls through it so that
     * ixl_syscall_set() (ixl.h) can refuse them in tests; the table is the same for every
     * engine and lives as long as the library. Added in ABI 2.0.
     */
    const struct ixl_sys *sys;
    /*
     * Trust (ABI 2.1; docs/security.md). A plugin reads these only when size covers them; a
     * host without them is one with no key whose peers the plugin cannot check (so a plugin
     * that needs them refuses to listen beyond loopback).
     */
    /**
     * How peers prove who they are to this agent: IXL_AUTH_KEY (the agent holds a cluster
     * key: every connection to a listener of the plugin proves it through auth_mac before
     * anything else is accepted), IXL_AUTH_LOCAL (no key: listeners bind loopback only and
     * accept only connections whose process peer_check vouches for) or IXL_AUTH_OPEN (no key,
     * and the application opted in to unauthenticated peers beyond loopback).
     */
    int (*auth_mode)(void *ctx);
    /**
     * HMAC-SHA-256 under the cluster key of label (a NUL-terminated domain-separation string
     * such as "ixl-net-hello-v1", its NUL included) followed by parts[0..n) of lens[0..n)
     * bytes, into out. IXL_OK, or IXL_ERR_NOT_ALLOWED when the agent has no key. Compare
     * MACs with auth_equal, never memcmp.
     */
    int (*auth_mac)(void *ctx, const char *label, const void *const *parts, const size_t *lens,
                    size_t n, uint8_t out[32]);
    /** 1 when a and b (n bytes each) are equal, in time that does not depend on where they
     * differ. */
    int (*auth_equal)(const void *a, const void *b, size_t n);
    /**
     * What the kernel says of the process at the other end of the connected socket fd:
     * IXL_OK when it runs as this process's effective user (AF_UNIX: SO_PEERCRED; TCP over
     * loopback: the owner of the peer's socket as sock_diag reports it); IXL_ERR_AUTH when
     * another user; IXL_ERR_NOT_SUPPORTED when the kernel cannot say (TCP from another
     * address: only a key authenticates that); IXL_ERR_SYSTEM when asking failed. why (may
     * be NULL) receives the reason. pid_out (may be NULL) receives the peer's pid when the
     * kernel knows it (AF_UNIX), else 0.
     */
    int (*peer_check)(void *ctx, int fd, int32_t *pid_out, char *why, size_t why_len);
    /**
     * The device layer (ABI 2.2; docs/device.md): GPU memory through the process's one
     * device layer, shared by every engine. Never NULL when size covers it; a host without it
     * (an older core) has no device memory. Whether a device is there is ops->count()'s answer.
     */
    const struct ixl_devops *dev;
    /**
     * ABI 2.4: the value of the environment variable name (a default the plugin documents in
     * its README, such as OBJ's AWS_REGION), copied into buf (cap bytes, NUL-terminated):
     * IXL_OK; IXL_ERR_NOT_FOUND when it is not set; IXL_ERR_TOO_LARGE when it does not fit in
     * cap (buf then holds ""). ixl reads the environment in one place (its configuration
     * layer), and a plugin reads it through this call, never getenv. Safe from any thread. A
     * host without it (size does not cover it) has no environment for plugins: use the
     * option's default.
     */
    int (*env)(void *ctx, const char *name, char *buf, size_t cap);
};

/* host->auth_mode() */
enum ixl_auth_mode { IXL_AUTH_LOCAL = 0, IXL_AUTH_KEY = 1, IXL_AUTH_OPEN = 2 };

/*
 * Device memory (ABI 2.2). One device layer per process (the core's), reached by every plugin
 * through host->dev: it loads the GPU driver at run time (the CUDA driver API,
 * dlopen("libcuda.so.1"), or the library IXL_CUDA_LIBRARY names), uses each device's primary
 * context and makes it current on the calling thread inside every call below, so a plugin's
 * own threads need no setup. Every method is safe from any thread. Streams and events belong
 * to the caller that created them (one thread at a time per stream). Device pointers are
 * never dereferenced by a plugin: all access goes through copy().
 */
struct ixl_dev_stream; /* never defined */
struct ixl_dev_event;  /* never defined */

/** What a pointer is (classify). The caller sets size; the layer writes fields within it. */
struct ixl_dev_ptr {
    uint32_t size;
    int32_t ordinal;    /* the device index of device memory; -1 for host memory */
    uint64_t base;      /* the allocation's (or VMM mapping's) first byte */
    uint64_t len;       /* its length in bytes */
    uint64_t buffer_id; /* unique per allocation for the process's life (0: unknown) */
    uint32_t flags;     /* IXL_DEV_PTR_* */
};
#define IXL_DEV_PTR_VMM 1u        /* from cuMemCreate/cuMemMap (not cuMemAlloc) */
#define IXL_DEV_PTR_IPC_LEGACY 2u /* cuIpcGetMemHandle can export it */

/** An exported allocation: opaque bytes another process of this node passes to ipc_open. */
#define IXL_DEV_IPC_LEN 64
struct ixl_dev_ipc {
    uint8_t bytes[IXL_DEV_IPC_LEN];
};

/** One copy of ixl_devops.copy_batch. */
struct ixl_dev_copy {
    void *dst;
    const void *src;
    size_t len;
};
/** One column of copy_cols's copies: value k is the uint64_t at (const char *)base + k * stride
 *  (base 8-byte aligned, stride a multiple of 8). */
struct ixl_dev_col {
    const void *base;
    size_t stride;
};
/** copy_cols's copies: copy k moves len[k] bytes from address src[k] to address dst[k]. */
struct ixl_dev_cols {
    struct ixl_dev_col dst, src, len;
};
/** copy_batch flags: every dst and src is device memory the stream's device can reach from a
 *  kernel (its own memory, or a peer's mapped through ipc_open/vmm_open on that device). */
#define IXL_DEV_COPY_DEVICE_ONLY 1u

struct ixl_devops {
    uint32_t size; /* sizeof(struct ixl_devops) as the core built it; grows at the end */
    void *ctx;     /* pass back to every method */
    /**
     * How many devices there are (>= 0), or a negative status when the layer cannot say:
     * IXL_ERR_NOT_SUPPORTED with why = "no GPU driver: libcuda.so.1 not found" (or the
     * driver's own answer, such as CUDA_ERROR_NO_DEVICE / the stub's "no driver"). Cheap after
     * the first call (the answer is cached).
     */
    int (*count)(void *ctx, char *why, size_t why_len);
    /**
     * What [ptr, ptr + len) is. IXL_OK with out->ordinal >= 0 for device memory lying wholly
     * inside one allocation (base, len, buffer_id, flags filled); IXL_OK with out->ordinal = -1
     * for host memory (or any address the driver does not know); IXL_ERR_INVALID_ARG with
     * why when the range starts in device memory and runs past its allocation's end.
     */
    int (*classify)(void *ctx, const void *ptr, size_t len, struct ixl_dev_ptr *out, char *why,
                    size_t why_len);
    /** A stream on device dev (non-blocking with respect to the legacy default stream). */
    int (*stream_create)(void *ctx, int dev, struct ixl_dev_stream **out);
    /** Waits for the stream's work, then frees it. */
    void (*stream_destroy)(void *ctx, struct ixl_dev_stream *s);
    /**
     * Enqueues a copy of len bytes from src to dst on s and returns without waiting. Either
     * side may be device memory of any device or host memory (unified addressing); host
     * memory must stay valid until an event recorded after the copy reports done. Errors
     * found at enqueue time return here (IXL_ERR_BACKEND with the driver's text).
     */
    int (*copy)(void *ctx, struct ixl_dev_stream *s, void *dst, const void *src, size_t len);
    /** Records an event after everything enqueued on s so far. */
    int (*record)(void *ctx, struct ixl_dev_stream *s, struct ixl_dev_event **out);
    /** IXL_OK when the work before the event is done, IXL_IN_PROGRESS while not, or
     *  IXL_ERR_BACKEND when it failed (the layer logs the driver's text). Never blocks. */
    int (*query)(void *ctx, struct ixl_dev_event *e);
    /** Blocks until the event's work is done; the same answers as query except
     *  IXL_IN_PROGRESS. */
    int (*wait)(void *ctx, struct ixl_dev_event *e);
    void (*event_destroy)(void *ctx, struct ixl_dev_event *e);
    /**
     * Exports the allocation containing ptr for another process of this node (CUDA IPC).
     * The layer caches one export per allocation (by buffer_id); repeated calls are cheap.
     */
    int (*ipc_export)(void *ctx, const void *ptr, struct ixl_dev_ipc *out);
    /** Maps a peer's exported allocation into this process on device dev; *base_out is its
     *  first byte here. Close with ipc_close. */
    int (*ipc_open)(void *ctx, int dev, const struct ixl_dev_ipc *h, void **base_out);
    int (*ipc_close)(void *ctx, void *base);
    /** Page-locks host memory for fast copies (cuMemHostRegister); unpin undoes it. */
    int (*host_pin)(void *ctx, void *addr, size_t len);
    int (*host_unpin)(void *ctx, void *addr);
    /*
     * ABI 2.3 (read only when size covers them; an older core lacks them): VMM memory
     * (cuMemCreate) between processes of this node (issue 20), then the thread's context.
     */
    /**
     * Exports the VMM mapping containing ptr as a POSIX file descriptor
     * (cuMemExportToShareableHandle): *fd_out (the caller closes it), *base_out and *len_out
     * (the mapping's first byte and length in this process). IXL_ERR_NOT_SUPPORTED when the
     * memory is not VMM memory or was created without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
     * (the layer logs which).
     */
    int (*vmm_export)(void *ctx, const void *ptr, int *fd_out, uint64_t *base_out,
                      uint64_t *len_out);
    /** Imports a peer's exported VMM memory (fd, len bytes from its start) and maps it
     *  read-write for device dev; *base_out is its first byte here. The caller keeps fd. Close
     *  with vmm_close(base, len). */
    int (*vmm_open)(void *ctx, int dev, int fd, uint64_t len, void **base_out);
    int (*vmm_close)(void *ctx, void *base, uint64_t len);
    /**
     * Makes device dev's primary context current on the calling thread and leaves it there,
     * for a library the plugin calls that needs the thread's current context itself (cuFile:
     * its calls fail on a thread without the buffer's context). *saved receives a token for
     * ctx_leave, which puts back the context the thread had before; a plugin's own threads
     * may keep the context and never call ctx_leave. Cheap when it is current already.
     */
    int (*ctx_enter)(void *ctx, int dev, void **saved);
    void (*ctx_leave)(void *ctx, void *saved);
    /**
     * ABI 2.6 (read only when size covers it): enqueues the n copies v[0..n) on s, as n calls
     * of copy() would but in a few driver calls: with IXL_DEV_COPY_DEVICE_ONLY, one launch of
     * the layer's copy kernel per up to 65,536 copies (those under 16 MiB; larger ones go to the
     * copy engines one call each); else the driver's batched copy (cuMemcpyBatchAsync, CUDA
     * 12.8 on), else one copy call each. The order among the n copies is unspecified (none
     * may depend on another); the batch as a whole is in stream order. Host memory must stay
     * valid until an event recorded after the batch reports done. On an error some copies may
     * have been enqueued: wait for an event recorded after the call before reusing the memory.
     * docs/device.md, "Batched copies", gives the choice and IXL_DEV_COPY, which overrides it.
     */
    int (*copy_batch)(void *ctx, struct ixl_dev_stream *s, const struct ixl_dev_copy *v, size_t n,
                      uint32_t flags);
    /**
     * ABI 2.7 (read only when size covers it): copy_batch of the n copies that c's columns
     * describe, read where they lie (a plugin's descriptor arrays: addresses and lengths at a
     * stride) as the layer fills its own tables, instead of an ixl_dev_copy array built for the
     * call: one pass over the copies instead of two. A copy of len > 0 with a zero dst or src
     * is refused (IXL_ERR_INVALID_ARG), as copy_batch refuses it, but found while the tables
     * are filled: copies before it (earlier tables of 65,536, copies of 16 MiB and more) may
     * have been enqueued; wait for an event recorded after the call. As copy_batch otherwise.
     */
    int (*copy_cols)(void *ctx, struct ixl_dev_stream *s, const struct ixl_dev_cols *c, size_t n,
                     uint32_t flags);
};

/**
 * Allocation and system calls, one typed pointer per function, each the libc function of the
 * same name unless a test replaced it with ixl_syscall_set() (ixl.h). Each behaves as its libc
 * namesake (errno on failure; getaddrinfo returns its EAI_* code; io_uring_queue_init returns
 * -errno as liburing does, and -ENOSYS when libixl was built without liburing). open, openat
 * and fcntl take their optional third argument always (pass 0 when unused).
 *
 * Memory from malloc/calloc/realloc/strdup/strndup/aligned_alloc/posix_memalign is released
 * with free(), which is not in the table. close and munmap are: a replacement refuses them as
 * the kernel does (close releases the descriptor even when it returns -1, munmap that fails
 * leaves the mapping), so a caller treats their failure as done and never retries a close
 * (the descriptor number may already belong to another thread's open).
 *
 * The table begins with its size and only grows at the end: a plugin reads a member only when
 * size covers it. Dynamic plugins and the built-in NET and POSIX plugins use it; the UCX plugin
 * (UCX allocates and calls the kernel itself), etcd's libcurl and the OBJ plugin's libcurl (its
 * sockets and buffers; OBJ's own allocations and thread go through the table) do not.
 */
struct ixl_sys {
    uint32_t size; /* sizeof(struct ixl_sys) as the core built it */
    /* memory */
    void *(*malloc)(size_t size);
    void *(*calloc)(size_t n, size_t size);
    void *(*realloc)(void *ptr, size_t size);
    char *(*strdup)(const char *s);
    char *(*strndup)(const char *s, size_t n);
    void *(*aligned_alloc)(size_t align, size_t size);
    int (*posix_memalign)(void **out, size_t align, size_t size);
    /* files and descriptors */
    int (*open)(const char *path, int flags, mode_t mode);
    int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
    int (*close)(int fd);
    ssize_t (*read)(int fd, void *buf, size_t n);
    ssize_t (*write)(int fd, const void *buf, size_t n);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    ssize_t (*preadv)(int fd, const struct iovec *iov, int n, off_t off);
    ssize_t (*pwritev)(int fd, const struct iovec *iov, int n, off_t off);
    int (*fstat)(int fd, struct stat *st);
    int (*ftruncate)(int fd, off_t len);
    int (*fallocate)(int fd, int mode, off_t off, off_t len);
    void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
    int (*munmap)(void *addr, size_t len);
    int (*memfd_create)(const char *name, unsigned int flags);
    int (*eventfd)(unsigned int initval, int flags);
    int (*pipe2)(int fds[2], int flags);
    int (*fcntl)(int fd, int cmd, long arg);
    /* sockets */
    int (*socket)(int domain, int type, int protocol);
    int (*bind)(int fd, const struct sockaddr *addr, socklen_t len);
    int (*listen)(int fd, int backlog);
    int (*accept4)(int fd, struct sockaddr *addr, socklen_t *len, int flags);
    int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
    int (*setsockopt)(int fd, int level, int name, const void *val, socklen_t len);
    int (*getsockopt)(int fd, int level, int name, void *val, socklen_t *len);
    int (*getsockname)(int fd, struct sockaddr *addr, socklen_t *len);
    ssize_t (*send)(int fd, const void *buf, size_t n, int flags);
    ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
    ssize_t (*recv)(int fd, void *buf, size_t n, int flags);
    ssize_t (*recvmsg)(int fd, struct msghdr *msg, int flags);
    int (*getaddrinfo)(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
    /* waiting */
    int (*poll)(struct pollfd *fds, unsigned long n, int timeout_ms);
    int (*epoll_create1)(int flags);
    int (*epoll_ctl)(int epfd, int op, int fd, struct epoll_event *ev);
    int (*epoll_wait)(int epfd, struct epoll_event *evs, int max, int timeout_ms);
    /* threads, processes, randomness, io_uring */
    int (*pthread_create)(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
    ssize_t (*process_vm_readv)(pid_t pid, const struct iovec *local, unsigned long n_local,
                                const struct iovec *remote, unsigned long n_remote,
                                unsigned long flags);
    ssize_t (*process_vm_writev)(pid_t pid, const struct iovec *local, unsigned long n_local,
                                 const struct iovec *remote, unsigned long n_remote,
                                 unsigned long flags);
    ssize_t (*getrandom)(void *buf, size_t n, unsigned int flags);
    int (*io_uring_queue_init)(unsigned int entries, struct io_uring *ring, unsigned int flags);
};

/** Creation parameters of an engine. Borrowed for create_engine() only (copy what you keep). */
struct ixl_engine_init {
    uint32_t size;          /* sizeof(struct ixl_engine_init) as the core built it */
    const char *agent_name; /* the owning agent's name */
    const struct ixl_host *host;
    /* Every option of the plugin, in the order of its options array, as key and normalized
     * text (see enum ixl_opt_type): the user's value, else the default. values has the same
     * options parsed; reading those needs no string parsing. */
    const struct ixl_kv *params;
    size_t n_params;
    bool progress_thread; /* the agent calls progress() on a timer */
    uint32_t progress_period_us;
    size_t notif_max; /* the agent's maximum notification size */
    /* ABI 2: the options, typed. values[i] is the value of the descriptor's options[i]
     * (n_values == n_options): the core parsed and range-checked it, so create_engine reads
     * values[i].i, .u or .str and checks only what the type cannot say (a list's syntax, a
     * multiple of 4096), naming the option in its error. Borrowed for create_engine(). */
    const struct ixl_opt_value *values;
    size_t n_values;
};

/**
 * The base of every engine: the plugin's engine struct embeds it first. The plugin sets size
 * to sizeof(struct ixl_engine) and fills caps and mem_mask in create_engine(); they may be
 * narrower than the descriptor's (a UCX built without CUDA drops VRAM) but never wider. The
 * core refuses an engine whose size is below IXL_ENGINE_MIN_SIZE (IXL_ERR_PLUGIN), writes
 * desc and reads later fields only when size covers them.
 */
struct ixl_engine {
    uint32_t size;                      /* sizeof(struct ixl_engine) as the plugin was built */
    const struct ixl_plugin_desc *desc; /* set by the core after create_engine() returns */
    uint32_t caps;                      /* enum ixl_cap bits */
    uint32_t mem_mask;                  /* IXL_MEM_BIT() of each memory type */
    /* ABI 2.2: why memory types of the descriptor's mem_mask are missing from mem_mask, one
     * "TYPE: reason" per line (e.g. "VRAM: no GPU driver: libcuda.so.1 not found"); NULL or ""
     * when none are or the plugin does not say. The engine's, unchanged until destroy_engine;
     * ixl-info and a registration that finds no backend for a type show it
     * (ixl_backend_mem_why). */
    const char *mem_why;
};

/** The first generation of struct ixl_engine: everything up to mem_mask. */
#define IXL_ENGINE_MIN_SIZE \
    (offsetof(struct ixl_engine, mem_mask) + sizeof(((struct ixl_engine *)0)->mem_mask))

/** One side of a transfer as the core hands it to the backend: matched element by element. */
struct ixl_xfer_desc {
    uint64_t addr;
    uint64_t len;
    uint64_t dev;
    struct ixl_md *md; /* the region's metadata: local (register_mem) or target (load_*_md) */
};

struct ixl_xfer_side {
    enum ixl_mem type;
    size_t count;
    const struct ixl_xfer_desc *descs;
};

/** Options of one request. */
struct ixl_xfer_opts {
    uint32_t size;
    /* NULL: no notification (else notif_len > 0). Borrowed: given to prep_xfer, valid until
     * the first post_xfer (which passes it again) or release_req; given to post_xfer, valid
     * while that post is in flight -- until check_xfer or post_xfer reports the request's end,
     * or release_req returns IXL_OK. Copy it to keep it longer. */
    const void *notif;
    size_t notif_len;
};

/** What a backend says of a request (optional method req_info). The core sets size (at least
 *  through path); the plugin writes only fields within it. */
struct ixl_req_info {
    uint32_t size; /* sizeof(struct ixl_req_info) as the core was built */
    char path[32]; /* the data path used: "tcp", "cma", "shm", "io_uring", ... */
};

/**
 * A notification sink the core passes to get_notifs(): called once per notification; agent
 * and msg are borrowed for the call (the core copies them).
 */
typedef void (*ixl_notif_sink_fn)(void *sink_ctx, const char *agent, const void *msg, size_t len);

/*
 * Files. A dynamic plugin is a shared object named libixl_plugin_<name>.so, where <name> is
 * its descriptor's name (ixl_backend_create("X") opens libixl_plugin_X.so first; a listing
 * opens every libixl_plugin_*.so), in a directory of IXL_PLUGIN_DIR, ixl/plugins or plugins/
 * next to libixl.so, or the installed plugin directory. It is opened with RTLD_NOW | RTLD_LOCAL and
 * never closed once accepted. It includes only this header (and its own) and reaches the core only
 * through struct ixl_host.
 *
 * Validation. The manager checks a descriptor once, when it loads the plugin, and refuses it
 * (the plugin stays unloaded; the reason is logged at WARN and listed by ixl-info and
 * ixl_plugin_refused_get) when, in this order:
 *   - the file cannot be dlopen()ed, has no IXL_PLUGIN_ENTRY_SYMBOL, or the entry returns NULL;
 *   - abi_major is not IXL_PLUGIN_ABI_MAJOR (abi_minor is informative only);
 *   - size is smaller than the descriptor of ABI 2.0 (up to and including ops);
 *   - name is not 1-31 characters of [A-Za-z0-9_];
 *   - create_engine or destroy_engine is NULL; ops is NULL;
 *   - ops->size is smaller than IXL_ENGINE_OPS_MIN_SIZE;
 *   - caps has a bit that is not an enum ixl_cap; caps has neither IXL_CAP_LOCAL nor
 *     IXL_CAP_REMOTE; caps has IXL_CAP_REMOTE without IXL_CAP_NOTIF (a remote-capable backend
 *     must support notifications);
 *   - mem_mask is 0 or has a bit at or above IXL_MEM_BIT(IXL_MEM_COUNT);
 *   - a method every backend needs is NULL, or one that a capability in caps requires (see
 *     each method: "Required by X");
 *   - exactly one of alloc_mem and free_mem is present (they come as a pair);
 *   - options is NULL while n_options > 0, or the option table is malformed: an option
 *     lacks its name ([A-Za-z0-9_]+), default value or description, two share a name, its
 *     type is not an enum ixl_opt_type, its range is empty (or negative for a size or
 *     duration), a duration's unit is not us, ms or s, an enum has no choices (or an empty or
 *     repeated one), or the default does not parse as the type or lies outside the range
 *     (flags and the reserved slots are ignored: later minors may give them meaning);
 *   - another plugin already loaded has the same name (built-in plugins load first, then the
 *     directories in search order, the files of one directory sorted by name).
 * Fields and methods past the sizes the plugin reports read as zero/NULL; fields and methods
 * past what this core knows are ignored.
 *
 * Engines. After create_engine returns IXL_OK with an engine, the core refuses the engine
 * (destroy_engine is called, ixl_backend_create fails with IXL_ERR_PLUGIN) when its size is
 * below the first generation's struct ixl_engine (IXL_ENGINE_MIN_SIZE), when its caps or
 * mem_mask have a bit the descriptor's lack, or its caps have REMOTE without NOTIF. An engine
 * with REMOTE must answer get_conn_info at once, one with LOCAL gets connect(own agent name)
 * (see connect); either failing fails the backend's creation. The methods a plugin must have
 * follow the descriptor's caps, so an engine that drops a capability keeps its methods; the
 * core does not call methods of capabilities the engine dropped (progress, get_notifs,
 * gen_notif, load_local_md; remote ones for a local-only engine).
 *
 * Memory types. What addr, len, dev and bytes mean in register_mem's and query_mem's
 * struct ixl_reg_desc, in load_remote_md's, and in struct ixl_xfer_desc:
 *
 *   type  addr                  len                      dev                    bytes
 *   DRAM  virtual address in    bytes (> 0)              0, or a NUMA node      unused
 *         the owner's process
 *   VRAM  device virtual addr   bytes (> 0)              GPU index              unused
 *   BLK   byte offset in the    bytes; 0 at              volume id              volume path
 *         volume                registration: to the end                        (+ mode)
 *   FILE  byte offset in the    bytes; 0 at              an open fd of the      "MODE:PATH" in
 *         file                  registration: the whole  owner's process, or    path mode, else
 *                               file, growing            IXL_DEV_NONE (path     a label
 *                                                        mode: the backend
 *                                                        opens bytes' path)
 *   OBJ   byte offset in the    bytes; 0 at              key id                 object key
 *         object                registration: the whole                         (+ bucket)
 *                               object
 *
 *   register_mem: the user's descriptor as given (bytes borrowed for the call; bytes_len > 0
 *     implies bytes != NULL). The core has checked: type is in the engine's mem_mask; len > 0
 *     unless BLK, FILE or OBJ; addr + len does not wrap; a FILE dev is an fd (< 2^62) or
 *     IXL_DEV_NONE with bytes; the same (addr, len, dev) is not registered twice with one
 *     engine (regions may overlap and nest; path-mode descriptors always make new regions).
 *     A path-mode FILE region's transfers carry the dev the agent assigned to it (from 2^62 up,
 *     IXL_DEV_ASSIGNED_MIN in ixl.h), never IXL_DEV_NONE: find the file through md, not dev.
 *   load_remote_md: the owner's region as the owner registered it: addr, len (a region
 *     registered with len 0 arrives with len UINT64_MAX - addr), dev (a path-mode FILE region's
 *     assigned id); bytes NULL and bytes_len 0. Every field, and the public data, is untrusted.
 *   struct ixl_xfer_desc: one element of a request, in the memory type of its side: addr, len
 *     and dev as in the user's transfer descriptor (neighbours contiguous on both sides with
 *     the same md and dev merged into one); len > 0 and [addr, addr + len) lies inside the
 *     region whose metadata is md (the core checked it against the registered or loaded range
 *     of this engine). md is: on the local side, register_mem's; on the remote side, for a
 *     transfer within the agent (remote_agent is the agent's own name) load_local_md's, else
 *     load_remote_md's.
 *
 * Notifications. A notification given with a request (struct ixl_xfer_opts, non-NULL notif,
 * notif_len > 0; the core gives one only to an engine with NOTIF) is delivered to the target
 * agent -- the remote, or the agent itself for a transfer within the agent -- only after every
 * byte of the request is in place at the target: for a WRITE, written into the target's
 * memory and visible there; for a READ, read out of the target's memory (the target may then
 * reuse it). The target engine hands it to its get_notifs() sink with the initiator's agent
 * name, exactly once per post that completes with IXL_OK; a post that fails delivers it only
 * if every byte was in place first; a request released while in flight (release_req returned
 * IXL_OK) never delivers it after release_req returned. check_xfer answers
 * IXL_OK only once the notification is sent or copied: the engine may not touch notif after
 * that. gen_notif's messages are not ordered with transfers.
 *
 * Pointers. Unless a method says otherwise, pointers the core passes in are borrowed for the
 * call, and pointers the plugin hands out stay the plugin's. In particular:
 *   - the descriptor, its strings, options and ops table: the plugin's, constant, valid while
 *     the plugin is loaded (an accepted plugin is never unloaded). The entry function may be
 *     called more than once and returns the same descriptor each time.
 *   - struct ixl_engine_init and everything it points to: borrowed for create_engine only,
 *     except init->host, which stays valid until destroy_engine returns.
 *   - the engine: allocated by create_engine, freed by destroy_engine; the core writes only the
 *     fields of struct ixl_engine marked "set by the core".
 *   - get_conn_info's bytes: the engine's, unchanged until destroy_engine.
 *   - struct ixl_md from register_mem, load_local_md, load_remote_md: the engine's, valid
 *     until deregister_mem or unload_md of it; get_public_data's bytes: unchanged while the md
 *     is registered. The core passes an md only to the engine that made it.
 *   - prep_xfer's sides, their descriptor arrays and remote_agent: unchanged and valid until
 *     release_req returns IXL_OK; the regions and loaded metadata they name stay registered
 *     and loaded until then. opts is borrowed for the call; see struct ixl_xfer_opts for notif.
 *   - struct ixl_req: the engine's, from prep_xfer until release_req returns IXL_OK; a
 *     request whose release kept failing is abandoned by the core, and destroy_engine frees it.
 *   - get_notifs' sink and sink_ctx: only for that call, on that thread; the agent and msg the
 *     plugin passes to sink are borrowed for the sink call (the core copies them).
 *   - alloc_mem's memory: the engine's until free_mem of it (the core frees whatever is left
 *     before destroy_engine).
 *   - out-pointers (struct ixl_md **, struct ixl_req **, struct ixl_cost *, ...) point at the
 *     core's memory; the core reads them only after IXL_OK.
 *
 * Threads. The core calls one engine from any thread of the application, and from the agent's
 * progress thread. It serializes these calls (for all engines of one agent):
 *   - create_engine returns before any method of the engine is called, and destroy_engine is
 *     called after every other call on the engine has returned (the progress thread stopped,
 *     every request released or abandoned, every md deregistered or unloaded, every
 *     allocation freed), never concurrently with anything on that engine;
 *   - "writers", called with the agent's lock held for writing, so never concurrently with
 *     each other nor with the "readers": register_mem, deregister_mem, load_local_md,
 *     load_remote_md, unload_md, load_remote_conn_info, disconnect, alloc_mem, free_mem,
 *     and get_conn_info and connect(own name) during the backend's creation;
 *   - "readers", called with that lock held for reading, so possibly concurrently with each
 *     other: prep_xfer, get_public_data, connect, query_mem;
 *   - calls on one request (post_xfer, check_xfer, release_req, estimate_xfer_cost,
 *     req_info) are never concurrent with each other, but run concurrently with anything else,
 *     writers included (which never touch the regions the request uses);
 *   - get_notifs runs on one thread at a time per engine, concurrently with anything else.
 * gen_notif and progress may be called from several threads at once, concurrently with
 * everything else above. The plugin's own threads may call host->log and host->signal at any
 * time from create_engine's start until destroy_engine returns; the core never holds a lock
 * that they take while it calls into the plugin, so they are safe inside methods too, and
 * destroy_engine may wait for threads that call them. host->error records the text for the
 * thread that calls it: call it on the thread of the method about to fail. A method must not
 * call the north-bound API (ixl.h) of the agent that owns the engine: the agent's lock may be
 * held.
 */

/**
 * The engine's methods. Every method returns IXL_OK or a negative enum ixl_status unless said
 * otherwise. "Required by X" means: a plugin advertising capability X must implement it.
 */
struct ixl_engine_ops {
    uint32_t size; /* sizeof(struct ixl_engine_ops) as the plugin was built */

    /* -- connections ------------------------------------------------------------------- */
    /** Connects to a remote agent ahead of the first transfer (ixl_remote_connect, for each
     *  backend whose connection info for remote_agent was loaded), or to the agent itself:
     *  at the creation of an engine with LOCAL, connect(own agent name), where an error other
     *  than IXL_ERR_NOT_SUPPORTED fails the backend's creation. Optional. Fallback (NULL, or
     *  IXL_ERR_NOT_SUPPORTED returned): the core treats it as IXL_OK, and the engine connects
     *  lazily, at prep_xfer or post_xfer. */
    int (*connect)(struct ixl_engine *e, const char *remote_agent);
    /** Drops the connection to remote_agent when it is invalidated, when the agent is
     *  destroyed, or when its load failed after its connection info was loaded; its requests in
     * flight end in IXL_ERR_REMOTE_DISCONNECT (their md stay loaded until released). The result is
     * ignored. Not called when a restarted remote replaces its old instance (load_remote_conn_info
     * is called again instead). Optional. Fallback: nothing; the engine keeps the connection until
     * new connection info for that name replaces it, or destroy_engine. */
    int (*disconnect)(struct ixl_engine *e, const char *remote_agent);
    /** The engine's connection info (what peers pass to load_remote_conn_info), called once
     *  at creation; the bytes stay the engine's, unchanged until destroy_engine. Required by
     *  REMOTE. */
    int (*get_conn_info)(struct ixl_engine *e, const void **info, size_t *len);
    /** Loads a remote's connection info (does not connect). Untrusted bytes. Required by
     *  REMOTE. May be called again for the same agent with new info (it restarted). */
    int (*load_remote_conn_info)(struct ixl_engine *e, const char *remote_agent, const void *info,
                                 size_t len);

    /* -- memory ------------------------------------------------------------------------ */
    /** Registers one region (see "Memory types"); *out is the plugin's metadata for it, valid
     *  until deregister_mem. Called once per engine and region. Required. */
    int (*register_mem)(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *desc,
                        struct ixl_md **out);
    /** Releases a registration made by register_mem (after unload_md of its load_local_md
     *  result). No prepared list or request uses the region any more. Required. */
    int (*deregister_mem)(struct ixl_engine *e, struct ixl_md *md);

    /* -- metadata ---------------------------------------------------------------------- */
    /** Public data of a registered region for remote peers (what they pass to
     *  load_remote_md), the engine's, unchanged while md is registered. Required by REMOTE. */
    int (*get_public_data)(struct ixl_engine *e, const struct ixl_md *md, const void **data,
                           size_t *len);
    /** Loads a remote region (desc: its addr, len, dev as "Memory types" says; bytes NULL)
     *  with its public data; every byte and field is untrusted. Called only for a remote whose
     *  connection info this engine loaded. *out: valid until unload_md. Required by REMOTE. */
    int (*load_remote_md)(struct ixl_engine *e, const char *remote_agent, enum ixl_mem type,
                          const struct ixl_reg_desc *desc, const void *data, size_t len,
                          struct ixl_md **out);
    /** Target-side metadata of a local region for transfers within the agent, called right
     *  after register_mem by an engine with LOCAL; may return md itself. Required by LOCAL. */
    int (*load_local_md)(struct ixl_engine *e, struct ixl_md *md, struct ixl_md **out);
    /** Releases metadata from load_remote_md or load_local_md (called once per load, even
     *  when load_local_md returned md itself). The result is ignored. Required. */
    int (*unload_md)(struct ixl_engine *e, struct ixl_md *md);

    /* -- transfers --------------------------------------------------------------------- */
    /** Prepares a request without moving data: op READ moves remote to local, WRITE local to
     *  remote. The sides have equal counts (>= 1) and equal lengths pairwise (see "Memory
     *  types" for the descriptors), and stay valid until release_req; remote_agent is the
     *  target agent's name, the agent's own for a transfer within it. A pair of memory types
     *  the engine cannot move: return IXL_ERR_BAD_MEM_TYPE (with host->error), and the core
     *  tries the next backend. *out is valid until release_req returns IXL_OK. Required. */
    int (*prep_xfer)(struct ixl_engine *e, enum ixl_op op, const struct ixl_xfer_side *local,
                     const struct ixl_xfer_side *remote, const char *remote_agent,
                     const struct ixl_xfer_opts *opts, struct ixl_req **out);
    /** Estimates a prepared request's duration into out, whose size the core set (the growth
     *  rule at the top). Optional. Fallback: ixl_xfer_estimate() returns IXL_ERR_NOT_SUPPORTED. */
    int (*estimate_xfer_cost)(struct ixl_engine *e, struct ixl_req *req, struct ixl_cost *out);
    /** Starts a prepared request without blocking: IXL_OK (already done), IXL_IN_PROGRESS,
     *  or an error. opts is never NULL: its notification (notif NULL = none) replaces the one
     *  given at prep_xfer or at an earlier post. A request is posted again only after it
     *  ended (never while check_xfer would answer IXL_IN_PROGRESS). Required. */
    int (*post_xfer)(struct ixl_engine *e, struct ixl_req *req, const struct ixl_xfer_opts *opts);
    /** IXL_OK (done: every byte in place, the notification sent), IXL_IN_PROGRESS, or the
     *  request's error; asked only after a post that answered IXL_IN_PROGRESS, until it
     *  answers something else. Never blocks. Required. */
    int (*check_xfer)(struct ixl_engine *e, struct ixl_req *req);
    /** Cancels if in flight and frees. IXL_OK: freed, nothing more will be written into local
     *  buffers nor notified. An error (IXL_ERR_BUSY): not stopped yet; the request stays valid,
     *  check_xfer reports IXL_ERR_CANCELED, and the core calls again later. Called for every
     *  request prep_xfer made, in flight or not. Required. */
    int (*release_req)(struct ixl_engine *e, struct ixl_req *req);

    /* -- notifications ----------------------------------------------------------------- */
    /** Hands every notification received since the last call to sink, one sink call each, in
     *  arrival order per sender (agent: the sender's agent name). Required by NOTIF. */
    int (*get_notifs)(struct ixl_engine *e, ixl_notif_sink_fn sink, void *sink_ctx);
    /** Sends a notification not bound to a transfer to remote_agent (or to the agent itself,
     *  for an engine with LOCAL): msg is borrowed for the call, len <= init->notif_max. Not
     *  ordered with transfers. Required by NOTIF. */
    int (*gen_notif)(struct ixl_engine *e, const char *remote_agent, const void *msg, size_t len);

    /* -- progress ---------------------------------------------------------------------- */
    /** Advances transfers and notifications without blocking long; called by the agent's
     *  progress thread (init->progress_thread), by waits on this engine's requests and by
     *  ixl_agent_progress(). Required by PROGRESS; an engine without PROGRESS must advance
     *  on its own threads. */
    int (*progress)(struct ixl_engine *e);

    /* -- optional methods past IXL_ENGINE_OPS_MIN_SIZE (ABI 2.0): the core checks the size
     *    before calling them -------------------------------------------------------------- */
    /** Does each registration descriptor's object exist, and its size: writes out[0..n-1].
     *  Returning IXL_ERR_NOT_SUPPORTED passes the question on. Optional. Fallback (NULL, or
     *  IXL_ERR_NOT_SUPPORTED): ixl_mem_query() asks the next backend, else returns
     *  IXL_ERR_NOT_SUPPORTED. */
    int (*query_mem)(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *descs,
                     size_t n, struct ixl_mem_query *out);
    /** Allocates len bytes of memory of type that the engine shares best. Optional, together
     *  with free_mem. Fallback (NULL, or IXL_ERR_NOT_SUPPORTED): ixl_mem_alloc() asks the next
     *  backend, else returns IXL_ERR_NOT_SUPPORTED. */
    int (*alloc_mem)(struct ixl_engine *e, enum ixl_mem type, size_t len, void **out);
    /** Frees memory from alloc_mem (addr and len as allocated). Optional, together with
     *  alloc_mem: a plugin with exactly one of the two is refused. */
    int (*free_mem)(struct ixl_engine *e, void *addr, size_t len);
    /** Says how a request runs or ran, into the core's zeroed *out; asked right after
     *  prep_xfer and when the request completes. Optional. Fallback (NULL): ixl_xfer_info()'s
     *  path is ""; an error leaves the path as it was. */
    int (*req_info)(struct ixl_engine *e, struct ixl_req *req, struct ixl_req_info *out);
    /** Watches, on the calling thread and for at most budget_ns, for the end of a request
     *  whose remaining work no CPU of the engine's does (a device's copies, whose event the
     *  caller can poll), or whose polling the caller's thread takes over from the engine's
     *  own thread while it watches (UCX: the worker's progress, its thread standing back), or
     *  whose answer the caller can sleep on itself (NET: the socket its frame went out on;
     *  POSIX: the io_uring), completing it there when it ends; then answers as check_xfer
     *  does.
     *  A request with nothing to watch that way answers IXL_IN_PROGRESS at once (the core has
     *  just asked check_xfer), or as check_xfer. Asked by
     *  ixl_xfer_wait, once per wait before it sleeps, under check_xfer's rules (never
     *  concurrent with another call on the request). The budget is up to 20 ms (less when the
     *  caller's timeout is nearer): a watch that sleeps takes it whole, one that spins keeps
     *  to about a millisecond of its own. Optional (2.5). Fallback (NULL): the
     *  core spins on its wake sequence for short requests, then sleeps until signaled. */
    int (*wait_xfer)(struct ixl_engine *e, struct ixl_req *req, uint64_t budget_ns);
};

/** The smallest ops table the core accepts: everything up to progress. A table of exactly
 *  this size has none of the methods after progress: the core uses their fallbacks. */
#define IXL_ENGINE_OPS_MIN_SIZE \
    (offsetof(struct ixl_engine_ops, progress) + sizeof(((struct ixl_engine_ops *)0)->progress))

/**
 * The plugin descriptor. Capabilities, memory types and options are data; the entry points are
 * the plugin manager's (the seeds' get_plugin_name, get_plugin_version, get_backend_mems and
 * get_backend_options are the fields name, version, mem_mask and options).
 */
struct ixl_plugin_desc {
    uint16_t abi_major; /* IXL_PLUGIN_ABI_MAJOR: a different major is refused */
    uint16_t abi_minor; /* IXL_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t size;      /* sizeof(struct ixl_plugin_desc) as the plugin was built */

    const char *name;    /* [A-Za-z0-9_]{1,31}; unique among loaded plugins */
    const char *version; /* the plugin's own version, free text */
    uint32_t caps;       /* enum ixl_cap bits: what engines of this plugin can at most do */
    uint32_t mem_mask;   /* IXL_MEM_BIT() of each memory type it may support */
    /* Every option create_engine accepts, typed (struct ixl_option, ixl_types.h: a malformed
     * table is refused); create_engine gets their values parsed, in this order. */
    const struct ixl_option *options;
    size_t n_options;

    /** Creates an engine: IXL_OK with *out set (caps and mem_mask filled in), or an error,
     *  explained through init->host->error (IXL_OK with *out NULL counts as IXL_ERR_BACKEND).
     *  Called with the agent's lock held for writing; init is borrowed for the call. */
    int (*create_engine)(const struct ixl_engine_init *init, struct ixl_engine **out);
    /** Destroys an engine; everything registered or loaded has been released before, and
     *  every request too, except those whose release_req kept failing: destroy frees them.
     *  Also called right after create_engine when the core refuses the engine. */
    void (*destroy_engine)(struct ixl_engine *e);

    const struct ixl_engine_ops *ops;
};

typedef const struct ixl_plugin_desc *(*ixl_plugin_entry_fn)(void);

/*
 * IXL_PLUGIN_EXPORT(entry_fn) names a plugin's entry function. In a dynamic plugin
 * (the default) it defines the exported "ixl_plugin_entry"; in a plugin built into libixl
 * (compiled with IXL_PLUGIN_BUILTIN_NAME=<name>) it defines ixl_plugin_builtin_<name>, which
 * the generated table of built-in plugins lists.
 */
#define IXL_PLUGIN_CAT2(a, b) a##b
#define IXL_PLUGIN_CAT(a, b) IXL_PLUGIN_CAT2(a, b)
#ifdef IXL_PLUGIN_BUILTIN_NAME
#define IXL_PLUGIN_EXPORT(entry_fn)                                             \
    IXL_PLUGIN_EXTERN_C const struct ixl_plugin_desc *IXL_PLUGIN_CAT(           \
        ixl_plugin_builtin_, IXL_PLUGIN_BUILTIN_NAME)(void);                    \
    const struct ixl_plugin_desc *IXL_PLUGIN_CAT(ixl_plugin_builtin_,           \
                                                 IXL_PLUGIN_BUILTIN_NAME)(void) \
    {                                                                           \
        return entry_fn();                                                      \
    }
#else
#define IXL_PLUGIN_EXPORT(entry_fn)                                                             \
    IXL_PLUGIN_EXTERN_C __attribute__((visibility("default"))) const struct ixl_plugin_desc *   \
    ixl_plugin_entry(void);                                                                     \
    __attribute__((visibility("default"))) const struct ixl_plugin_desc *ixl_plugin_entry(void) \
    {                                                                                           \
        return entry_fn();                                                                      \
    }
#endif
/* C++ plugins: the entry (and a built-in's) has C linkage, so its symbol is not mangled. */
#ifdef __cplusplus
#define IXL_PLUGIN_EXTERN_C extern "C"
#else
#define IXL_PLUGIN_EXTERN_C
#endif

#ifdef __cplusplus
}
#endif

#endif /* IXL_IXL_PLUGIN_H */

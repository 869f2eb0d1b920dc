/*
 * ixl_plugin.h - the south-bound ABI: what a backend plugin implements.
 *
 * A plugin exports one entry symbol, IXL_PLUGIN_ENTRY_SYMBOL ("ixl_plugin_entry"), a function
 * returning a pointer to a const struct ixl_plugin_desc. The descriptor begins with the ABI
 * major/minor and its own size; it carries the plugin's name, version, capabilities, memory
 * types and options as data, the plugin-manager entry points (create/destroy an engine), and
 * the engine's ops table, which begins with its own size.
 *
 * Growth rules: the descriptor and the ops table only grow at the end. The core reads a field
 * or calls a method only when the size the plugin reports covers it; every optional method
 * has a documented fallback. Methods every backend needs (register_mem, deregister_mem,
 * unload_md, prep_xfer, post_xfer, check_xfer, release_req) and the methods a capability the
 * plugin advertises requires (listed with each method) must be implemented: the manager refuses
 * the plugin otherwise, with the reason in the log and in ixl-info. Any other slot may be NULL:
 * the core points it at a shared stub that returns IXL_ERR_NOT_SUPPORTED.
 *
 * Callbacks: the core never holds a lock that host->signal() takes while it calls into a
 * plugin, so a plugin may call signal() from any thread at any time, and destroy_engine may
 * wait for its own threads that do.
 *
 * Threads: the core serializes nothing for the plugin except what is written here. Methods may
 * be called concurrently from several threads of an agent, except that
 *   - create/destroy never race with anything on the same engine;
 *   - register_mem/deregister_mem/load_*_md/unload_md on one engine are serialized by the core
 *     (it holds the agent's registry lock for writing);
 *   - post_xfer/check_xfer/release_req on one request are never concurrent with each other.
 * A plugin that supports notifications and progress must make get_notifs, gen_notif and
 * progress safe to call from several threads.
 *
 * Objects: struct ixl_md (per-region metadata) and struct ixl_req (per-request state) are
 * never defined: a plugin casts its own objects to these pointer types. A plugin's engine
 * embeds struct ixl_engine first.
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

#define IXL_PLUGIN_ABI_MAJOR 1
#define IXL_PLUGIN_ABI_MINOR 0

/** The symbol a dynamic plugin exports. */
#define IXL_PLUGIN_ENTRY_SYMBOL "ixl_plugin_entry"

struct ixl_md; /* a backend's metadata for one region (local or remote); never defined */
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
};

/**
 * Allocation and system calls, one typed pointer per function, each the libc function of the
 * same name unless a test replaced it with ixl_syscall_set() (ixl.h). Each behaves as its libc
 * namesake (errno on failure; getaddrinfo returns its EAI_* code; io_uring_queue_init returns
 * -errno as liburing does, and -ENOSYS when libixl was built without liburing). open, openat
 * and fcntl take their optional third argument always (pass 0 when unused).
 *
 * Memory from malloc/calloc/realloc/strdup/strndup/aligned_alloc/posix_memalign is released
 * with free(); free() itself, munmap's failure-free uses and close() on exit paths are not
 * worth refusing, but close and munmap are in the table for completeness.
 *
 * The table begins with its size and only grows at the end: a plugin reads a member only when
 * size covers it. Dynamic plugins and the built-in NET and POSIX plugins use it; the UCX plugin
 * (UCX allocates and calls the kernel itself) and etcd's libcurl do not.
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
    /* The user's options after the core checked every key against the plugin's options;
     * options the user left out are present with their default value. */
    const struct ixl_kv *params;
    size_t n_params;
    bool progress_thread; /* the agent calls progress() on a timer */
    uint32_t progress_period_us;
    size_t notif_max; /* the agent's maximum notification size */
};

/**
 * The base of every engine: the plugin's engine struct embeds it first. The plugin fills caps
 * and mem_mask in create_engine(); they may be narrower than the descriptor's (a UCX built
 * without CUDA drops VRAM) but never wider.
 */
struct ixl_engine {
    const struct ixl_plugin_desc *desc; /* set by the core after create_engine() returns */
    uint32_t caps;                      /* enum ixl_cap bits */
    uint32_t mem_mask;                  /* IXL_MEM_BIT() of each memory type */
};

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
    const void *notif; /* NULL: no notification. Borrowed until the request is released or
                          posted again. */
    size_t notif_len;
};

/** What a backend says of a request (optional method req_info). */
struct ixl_req_info {
    char path[32]; /* the data path used: "tcp", "cma", "shm", "io_uring", ... */
};

/**
 * A notification sink the core passes to get_notifs(): called once per notification; agent
 * and msg are borrowed for the call (the core copies them).
 */
typedef void (*ixl_notif_sink_fn)(void *sink_ctx, const char *agent, const void *msg, size_t len);

/**
 * The engine's methods. Every method returns IXL_OK or a negative enum ixl_status unless said
 * otherwise. "Required by X" means: a plugin advertising capability X must implement it.
 */
struct ixl_engine_ops {
    uint32_t size; /* sizeof(struct ixl_engine_ops) as the plugin was built */

    /* -- connections ------------------------------------------------------------------- */
    /** Connects to a remote agent (or to itself, for local transfers). Required by LOCAL or
     *  REMOTE; connecting is otherwise done lazily at the first transfer. */
    int (*connect)(struct ixl_engine *e, const char *remote_agent);
    /** Drops a connection; the remote's requests end in IXL_ERR_REMOTE_DISCONNECT. */
    int (*disconnect)(struct ixl_engine *e, const char *remote_agent);
    /** The engine's connection info, borrowed for the engine's life. Required by REMOTE. */
    int (*get_conn_info)(struct ixl_engine *e, const void **info, size_t *len);
    /** Loads a remote's connection info (does not connect). Untrusted bytes. Required by
     *  REMOTE. May be called again for the same agent with new info (it restarted). */
    int (*load_remote_conn_info)(struct ixl_engine *e, const char *remote_agent, const void *info,
                                 size_t len);

    /* -- memory ------------------------------------------------------------------------ */
    /** Registers one region; *out is the plugin's metadata for it. */
    int (*register_mem)(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *desc,
                        struct ixl_md **out);
    /** Releases a registration made by register_mem. */
    int (*deregister_mem)(struct ixl_engine *e, struct ixl_md *md);

    /* -- metadata ---------------------------------------------------------------------- */
    /** Public data of a registered region for remote peers, borrowed while md is registered.
     *  Required by REMOTE. */
    int (*get_public_data)(struct ixl_engine *e, const struct ixl_md *md, const void **data,
                           size_t *len);
    /** Loads a remote region (desc: its addr, len, dev; bytes unused) with its public data
     *  (untrusted). Required by REMOTE. */
    int (*load_remote_md)(struct ixl_engine *e, const char *remote_agent, enum ixl_mem type,
                          const struct ixl_reg_desc *desc, const void *data, size_t len,
                          struct ixl_md **out);
    /** Target-side metadata of a local region for transfers within the agent; may return md
     *  itself. Required by LOCAL. */
    int (*load_local_md)(struct ixl_engine *e, struct ixl_md *md, struct ixl_md **out);
    /** Releases metadata from load_remote_md or load_local_md (called once per load, even
     *  when load_local_md returned md itself). */
    int (*unload_md)(struct ixl_engine *e, struct ixl_md *md);

    /* -- transfers --------------------------------------------------------------------- */
    /** Prepares a request; the sides have equal counts and equal lengths pairwise, and are
     *  borrowed until release_req. */
    int (*prep_xfer)(struct ixl_engine *e, enum ixl_op op, const struct ixl_xfer_side *local,
                     const struct ixl_xfer_side *remote, const char *remote_agent,
                     const struct ixl_xfer_opts *opts, struct ixl_req **out);
    /** Optional: estimates a prepared request's duration. Fallback: IXL_ERR_NOT_SUPPORTED. */
    int (*estimate_xfer_cost)(struct ixl_engine *e, struct ixl_req *req, struct ixl_cost *out);
    /** Starts a prepared request without blocking: IXL_OK (already done), IXL_IN_PROGRESS,
     *  or an error. opts is never NULL: its notification (notif NULL = none) replaces the one
     *  given at prep_xfer for this and later posts. */
    int (*post_xfer)(struct ixl_engine *e, struct ixl_req *req, const struct ixl_xfer_opts *opts);
    /** IXL_OK (done), IXL_IN_PROGRESS, or the request's error. */
    int (*check_xfer)(struct ixl_engine *e, struct ixl_req *req);
    /** Cancels if in flight and frees. IXL_OK: freed, nothing more will be written into local
     *  buffers nor notified. An error (IXL_ERR_BUSY): not stopped yet; the request stays valid,
     *  check_xfer reports IXL_ERR_CANCELED, and the core calls again later. */
    int (*release_req)(struct ixl_engine *e, struct ixl_req *req);

    /* -- notifications ----------------------------------------------------------------- */
    /** Hands every notification received since the last call to sink. Required by NOTIF. */
    int (*get_notifs)(struct ixl_engine *e, ixl_notif_sink_fn sink, void *sink_ctx);
    /** Sends a notification not bound to a transfer. Required by NOTIF. */
    int (*gen_notif)(struct ixl_engine *e, const char *remote_agent, const void *msg, size_t len);

    /* -- progress ---------------------------------------------------------------------- */
    /** Advances transfers and notifications. Required by PROGRESS. */
    int (*progress)(struct ixl_engine *e);

    /* -- optional methods (ABI 1.0); the core checks size before calling them ----------- */
    /** Does each registration descriptor's object exist, and its size. Fallback: the agent
     *  tries the next backend, else IXL_ERR_NOT_SUPPORTED. */
    int (*query_mem)(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *descs,
                     size_t n, struct ixl_mem_query *out);
    /** Allocates memory the engine shares best. Fallback: IXL_ERR_NOT_SUPPORTED. */
    int (*alloc_mem)(struct ixl_engine *e, enum ixl_mem type, size_t len, void **out);
    /** Frees memory from alloc_mem. */
    int (*free_mem)(struct ixl_engine *e, void *addr, size_t len);
    /** Says how a request ran. Fallback: path "". */
    int (*req_info)(struct ixl_engine *e, struct ixl_req *req, struct ixl_req_info *out);
};

/** The smallest ops table the core accepts: everything up to progress. */
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
    const struct ixl_option *options; /* every option create_engine accepts */
    size_t n_options;

    /** Creates an engine. On failure returns an error and explains through init->host. */
    int (*create_engine)(const struct ixl_engine_init *init, struct ixl_engine **out);
    /** Destroys an engine; everything registered or loaded has been released before, and
     *  every request too, except those whose release_req kept failing: destroy frees them. */
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
#define IXL_PLUGIN_EXPORT(entry_fn)                                              \
    const struct ixl_plugin_desc *IXL_PLUGIN_CAT(ixl_plugin_builtin_,            \
                                                 IXL_PLUGIN_BUILTIN_NAME)(void); \
    const struct ixl_plugin_desc *IXL_PLUGIN_CAT(ixl_plugin_builtin_,            \
                                                 IXL_PLUGIN_BUILTIN_NAME)(void)  \
    {                                                                            \
        return entry_fn();                                                       \
    }
#else
#define IXL_PLUGIN_EXPORT(entry_fn)                                                              \
    __attribute__((visibility("default"))) const struct ixl_plugin_desc *ixl_plugin_entry(void); \
    __attribute__((visibility("default"))) const struct ixl_plugin_desc *ixl_plugin_entry(void)  \
    {                                                                                            \
        return entry_fn();                                                                       \
    }
#endif

#ifdef __cplusplus
}
#endif

#endif /* IXL_IXL_PLUGIN_H */

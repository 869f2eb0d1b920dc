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
 *    calls a method only when that size covers it, and refuses a size below the first
 *    generation's;
 *  - written by the core, read by the plugin (struct ixl_host, ixl_engine_init,
 *    ixl_xfer_opts): the core sets size; the plugin reads a field only when size covers it;
 *  - buffers the core hands the plugin to fill (struct ixl_req_info, ixl_cost): the core
 *    sets size to its own sizeof, never below the first generation's; the plugin writes only
 *    fields that lie entirely within size (so a plugin that writes only first-generation
 *    fields needs no check);
 *  - structs in arrays (struct ixl_xfer_desc, ixl_reg_desc, ixl_kv, ixl_mem_query,
 *    ixl_option) are frozen: a later generation adds a new struct type and a new method.
 * A change to a frozen layout, or any removal, bumps IXL_PLUGIN_ABI_MAJOR; the manager refuses
 * a plugin of another major. Every optional method has a documented fallback. Methods every backend
 * needs (register_mem, deregister_mem, unload_md, prep_xfer, post_xfer, check_xfer, release_req)
 * and the methods a capability the plugin advertises requires (listed with each method) must be
 * implemented: the manager refuses the plugin otherwise, with the reason in the log and in
 * ixl-info. Any other slot may be NULL: the core points it at a shared stub that returns
 * IXL_ERR_NOT_SUPPORTED.
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

#include "ixl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2.0: struct ixl_engine and struct ixl_req_info begin with their size; struct ixl_cost too. */
#define IXL_PLUGIN_ABI_MAJOR 2
#define IXL_PLUGIN_ABI_MINOR 0

/** The symbol a dynamic plugin exports. */
#define IXL_PLUGIN_ENTRY_SYMBOL "ixl_plugin_entry"

struct ixl_md;  /* a backend's metadata for one region (local or remote); never defined */
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
    const void *notif; /* NULL: no notification. Borrowed until the request is released or
                          posted again. */
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
    /** Optional: estimates a prepared request's duration into out, whose size the core set
     *  (the growth rule at the top). Fallback: IXL_ERR_NOT_SUPPORTED. */
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
    /* Every option create_engine accepts, typed (struct ixl_option, ixl_types.h: a malformed
     * table is refused); create_engine gets their values parsed, in this order. */
    const struct ixl_option *options;
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

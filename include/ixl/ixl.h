/*
 * ixl.h - the north-bound API of ixl, the inference transfer library.
 *
 * An application creates an agent, creates one or more backends in it, registers memory,
 * exchanges metadata with other agents, and moves data with transfer requests made from two
 * descriptor lists (or from index arrays into two prepared lists). Requests are posted without
 * blocking and completed by polling, by a blocking wait with a timeout, or by watching the
 * agent's pollable file descriptor.
 *
 * Conventions for every function in this header:
 *  - Functions that can fail return enum ixl_status: IXL_OK (0), IXL_IN_PROGRESS (1), or a
 *    negative error. Output parameters come last and are written only on success.
 *  - Pointers passed in are borrowed for the duration of the call unless the function says
 *    otherwise. Pointers handed out are owned by the library unless the function says the
 *    caller frees them (with ixl_free() or the matching destroy function).
 *  - Threads: an agent created in IXL_THREAD_SAFE mode (the default) may be called from any
 *    number of threads at once, except where a function says otherwise. A single request
 *    (struct ixl_xfer) must not be posted, released or re-parameterised by two threads at the
 *    same time; status/wait on one request may run concurrently with anything except its
 *    release. Destroy functions must not race with any other use of the same object.
 *  - Functions marked IXL_NODISCARD return a status that must be looked at: ignoring it
 *    loses data or leaks (a post or wait that failed, a release or deregistration refused
 *    with IXL_ERR_BUSY that leaves the handle or registration alive). GCC and clang warn
 *    when the result is dropped (GCC even through a (void) cast).
 *  - After an error, ixl_agent_last_error() gives a sentence that says what went wrong and,
 *    where the caller can fix it, what to do.
 *
 * How the structs of this header grow without breaking callers built against an older one:
 *  - Output structs the caller allocates and the library fills (struct ixl_plugin_info,
 *    ixl_config_var, ixl_xfer_telemetry, ixl_xfer_info, ixl_cost, ixl_agent_stats,
 *    ixl_device_info) begin
 *    with uint32_t size. Set it to sizeof(struct ...) before the call. The library writes
 *    only the fields that lie entirely within min(size, its own sizeof) and sets size to that
 *    min: a caller built against an older header gets the fields it knows and nothing past
 *    them; a caller built against a newer one reads size back to see which fields the library
 *    filled. A size below the struct's first generation is IXL_ERR_INVALID_ARG, and nothing
 *    is written on any error.
 *  - Input parameter structs (struct ixl_agent_params, ixl_reg_params, ixl_md_params,
 *    ixl_xfer_params, ixl_prep_params) begin with field_mask: a field is read only when its
 *    bit is set.
 *  - Structs passed in arrays (struct ixl_desc, ixl_run, ixl_reg_desc, ixl_kv, ixl_mem_query,
 *    ixl_option, and the items of struct ixl_notif_batch) are frozen: their stride is part of
 *    the contract. A later generation adds a new struct type and new functions that take it.
 *  - New fields only ever go at the end of a struct; enum values are never renumbered.
 *
 * Memory types and the meaning of a registration descriptor's fields:
 *
 *   type  addr     len                  dev                        bytes
 *   DRAM  address  length               0 (or a NUMA region)       -
 *   VRAM  address  length               GPU index                  -
 *   BLK   offset   length, 0 = volume   volume id                  volume path (+ mode)
 *   FILE  offset   length, 0 = file     open fd, or IXL_DEV_NONE   "mode:path" when dev is
 *                                                                  IXL_DEV_NONE, else a label
 *   OBJ   offset   length, 0 = object   key id                     object key (+ bucket)
 *
 * Language: C99 or later and C++11 or later, with GCC-compatible compilers (GCC, clang; the
 * headers use __attribute__). In C++, struct ixl_notif_batch's flexible array member is a
 * compiler extension (its -Wpedantic diagnostic is silenced there only). ctest's
 * test_headers_c and test_headers_cxx check it with -pedantic -Wall -Wextra -Werror.
 */
#ifndef IXL_IXL_H
#define IXL_IXL_H

#include "ixl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header (the library reports its own through ixl_version()). */
#define IXL_VERSION_MAJOR 0
#define IXL_VERSION_MINOR 2
#define IXL_VERSION_PATCH 0

/** Name of a status ("IXL_ERR_NOT_FOUND"...); "unknown status" for a value not listed. */
IXL_API const char *ixl_strerror(int status);

/** The library's version as "major.minor.patch". */
IXL_API const char *ixl_version(void);

/**
 * Whether the library running now provides everything of header version major.minor: IXL_OK
 * when its major equals major and its minor is major.minor's or later (a minor release only
 * adds symbols and appends to size-first structs; docs/abi.md). Otherwise
 * IXL_ERR_NOT_SUPPORTED, with a log message naming both versions. In major 0, 0.2 is the
 * first version whose ABI is kept: a request for 0.0 or 0.1 is refused too. The patch level
 * never matters. Call it as IXL_VERSION_CHECK() to pass the header the caller compiled with.
 */
IXL_API ixl_status ixl_version_check(unsigned major, unsigned minor);
#define IXL_VERSION_CHECK() ixl_version_check(IXL_VERSION_MAJOR, IXL_VERSION_MINOR)

/** Frees memory that a function of this header says the caller frees with ixl_free(). */
IXL_API void ixl_free(void *ptr);

/* ------------------------------------------------------------------------------------------ */
/* Memory types, descriptors                                                                  */
/* ------------------------------------------------------------------------------------------ */

/** "DRAM", "VRAM", ...; NULL for a value outside the enum. */
IXL_API const char *ixl_mem_name(enum ixl_mem type);
/** Parses a memory-type name (case-insensitive). IXL_ERR_INVALID_ARG if unknown. */
IXL_API ixl_status ixl_mem_parse(const char *name, enum ixl_mem *out);

/** A transfer descriptor: one contiguous range. */
struct ixl_desc {
    uint64_t addr;
    uint64_t len;
    uint64_t dev;
};

/**
 * A strided run: count ranges of len bytes starting at addr, addr + stride, ... The layout
 * serving engines use for KV blocks (one run per layer x K/V). Stored compressed: a list of
 * 10^7 blocks made of 64 runs costs 64 entries.
 */
struct ixl_run {
    uint64_t addr;
    uint64_t len;
    uint64_t stride;
    uint64_t count;
    uint64_t dev;
};

/* ------------------------------------------------------------------------------------------ */
/* Descriptor lists                                                                           */
/* ------------------------------------------------------------------------------------------ */

/** A list of transfer descriptors of one memory type, kept as runs. Not thread-safe. */
struct ixl_dlist;

/** Creates an empty list. capacity_hint (runs) may be 0. */
IXL_API ixl_status ixl_dlist_create(enum ixl_mem type, size_t capacity_hint,
                                    struct ixl_dlist **out);
/** Destroys a list. Accepts NULL. Lists are copied by the calls that take them. */
IXL_API void ixl_dlist_destroy(struct ixl_dlist *list);
/** Appends n descriptors (each a run of count 1; adjacent ones are not merged here). */
IXL_API ixl_status ixl_dlist_add(struct ixl_dlist *list, const struct ixl_desc *descs, size_t n);
/** Appends n strided runs. A run with count 0 or len 0 is IXL_ERR_INVALID_ARG. */
IXL_API ixl_status ixl_dlist_add_runs(struct ixl_dlist *list, const struct ixl_run *runs, size_t n);
IXL_API enum ixl_mem ixl_dlist_type(const struct ixl_dlist *list);
/** Number of descriptors (the sum of the runs' counts). */
IXL_API uint64_t ixl_dlist_count(const struct ixl_dlist *list);
/** Number of runs stored. */
IXL_API size_t ixl_dlist_run_count(const struct ixl_dlist *list);
/** Descriptor number index. IXL_ERR_INDEX past the end. O(log runs). */
IXL_API ixl_status ixl_dlist_get(const struct ixl_dlist *list, uint64_t index,
                                 struct ixl_desc *out);
/** Run number index. IXL_ERR_INDEX past the end. */
IXL_API ixl_status ixl_dlist_get_run(const struct ixl_dlist *list, size_t index,
                                     struct ixl_run *out);
/**
 * Serializes a list into a new buffer the caller frees with ixl_free(). The encoding is
 * versioned and compact (runs, not descriptors).
 */
IXL_API ixl_status ixl_dlist_serialize(const struct ixl_dlist *list, void **out, size_t *out_len);
/**
 * Decodes bytes from ixl_dlist_serialize(), possibly from another process. The bytes are
 * untrusted: anything malformed is IXL_ERR_MALFORMED, never a crash.
 */
IXL_API ixl_status ixl_dlist_deserialize(const void *buf, size_t len, struct ixl_dlist **out);

/* ------------------------------------------------------------------------------------------ */
/* Logging and configuration (process-wide)                                                   */
/* ------------------------------------------------------------------------------------------ */

/**
 * A log sink. Called from any thread, one call at a time; msg is one line without a trailing
 * newline, borrowed for the call. The sink must not call ixl functions (ixl may hold its own
 * locks while it logs). The default sink writes to stderr.
 */
typedef void (*ixl_log_fn)(void *ctx, enum ixl_log_level level, const char *msg);

/** Sets the level (the initial one comes from IXL_LOG_LEVEL, default WARN). Thread-safe. */
IXL_API void ixl_log_set_level(enum ixl_log_level level);
IXL_API enum ixl_log_level ixl_log_get_level(void);
/** Replaces the sink; NULL restores the default. ctx is borrowed until replaced. */
IXL_API void ixl_log_set_sink(ixl_log_fn fn, void *ctx);

/** A configuration variable: its environment name, value now, default and meaning. */
struct ixl_config_var {
    uint32_t size; /* set by the caller to sizeof(struct ixl_config_var) */
    const char *name;
    const char *value;
    const char *default_value;
    const char *description;
};

/** Number of configuration variables. */
IXL_API size_t ixl_config_count(void);
/** Variable number index (strings live until process exit). IXL_ERR_INDEX past the end. */
IXL_API ixl_status ixl_config_get(size_t index, struct ixl_config_var *out);
/** Value of a variable by name; NULL if there is no such variable. */
IXL_API const char *ixl_config_value(const char *name);

/* ------------------------------------------------------------------------------------------ */
/* System-call hooks (process-wide; for tests)                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every allocation and system call that the core and the built-in NET and POSIX plugins make
 * goes through one process-wide table (struct ixl_sys in ixl_plugin.h, which dynamic plugins
 * reach through ixl_host.sys), modelled on SQLite's xSetSystemCall. A test replaces an entry to
 * make a call fail (fault injection) or to observe it. The names are the libc names: "malloc",
 * "calloc", "realloc", "strdup", "strndup", "aligned_alloc", "posix_memalign", "open",
 * "openat", "close", "read", "write", "pread", "pwrite", "preadv", "pwritev", "fstat",
 * "ftruncate", "fallocate", "mmap", "munmap", "memfd_create", "eventfd", "pipe2", "fcntl",
 * "socket", "bind", "listen", "accept4", "connect", "setsockopt", "getsockopt", "getsockname",
 * "send", "sendmsg", "recv", "recvmsg", "getaddrinfo", "poll", "epoll_create1", "epoll_ctl",
 * "epoll_wait", "pthread_create", "process_vm_readv", "process_vm_writev", "getrandom",
 * "io_uring_queue_init" (liburing's; -errno on failure). A replacement has the type of the
 * matching member of struct ixl_sys, cast to ixl_syscall_fn, and behaves as the libc function
 * does (returns -1 and sets errno, returns NULL, ...). Not covered: free(), the UCX plugin
 * (UCX allocates and calls the kernel itself), etcd's libcurl and jansson, and the plugin
 * manager's dlopen/opendir.
 *
 * Threads: the table is read without locks. Set entries before creating agents, or while no
 * other thread is inside ixl and no agent has a background thread (NET's and the progress
 * thread call through it too); a replacement must itself be thread-safe. Memory a replaced
 * allocator returns is released with free().
 */
/** A hook as the table stores it: the matching member of struct ixl_sys, cast to this type. */
typedef void (*ixl_syscall_fn)(void);
/** Replaces the function called name; fn NULL restores the default. IXL_ERR_NOT_FOUND if no
 *  such name. */
IXL_API ixl_status ixl_syscall_set(const char *name, ixl_syscall_fn fn);
/** The function called name now (the default or a replacement); NULL if no such name. */
IXL_API ixl_syscall_fn ixl_syscall_get(const char *name);
/** Enumerates the names: NULL gives the first; the last (or an unknown name) gives NULL. */
IXL_API const char *ixl_syscall_next(const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Plugins                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/** What the plugin manager knows of a plugin. Strings live until process exit. */
struct ixl_plugin_info {
    uint32_t size; /* set by the caller to sizeof(struct ixl_plugin_info) */
    const char *name;
    const char *version;
    unsigned abi_major;
    unsigned abi_minor;
    uint32_t caps;     /* enum ixl_cap bits */
    uint32_t mem_mask; /* IXL_MEM_BIT() of each memory type */
    bool builtin;
    const char *path; /* the shared object, or "(built in)" */
    const struct ixl_option *options;
    size_t n_options;
};

/**
 * Plugins found on the search path: IXL_PLUGIN_DIR (colon-separated), ixl/plugins and then
 * plugins/ next to libixl.so, then the installed plugin directory; built-in plugins first. The
 * first call scans and opens every candidate; later calls reuse the result. Thread-safe.
 */
IXL_API size_t ixl_plugin_count(void);
IXL_API ixl_status ixl_plugin_get(size_t index, struct ixl_plugin_info *out);
/** Finds a plugin by name, opening only what it needs. IXL_ERR_NOT_FOUND if none. */
IXL_API ixl_status ixl_plugin_find(const char *name, struct ixl_plugin_info *out);
/** Candidates the manager refused (path and reason), for ixl-info. */
IXL_API size_t ixl_plugin_refused_count(void);
IXL_API ixl_status ixl_plugin_refused_get(size_t index, const char **path, const char **reason);

/*
 * Backend options (struct ixl_option, from struct ixl_plugin_info's options, or one the
 * caller declares): what one accepts, and the one parser the core uses for backend options
 * and configuration variables, so that a tool reads "64K" or "2s" exactly as ixl does.
 *
 * Both functions first check the descriptor by the rules the plugin manager refuses plugins
 * by (see struct ixl_option): a descriptor they refuse is IXL_ERR_INVALID_ARG. Both are
 * thread-safe and need no agent. After an error, ixl_agent_last_error(NULL) gives the reason
 * (to the calling thread, until its next agent-less call), and no output is written.
 */

/** Room for the normalized text of a BOOL, INT, SIZE or DURATION value (with its NUL). */
#define IXL_OPTION_NORM_MAX 32

/**
 * The option's type and what it accepts, as ixl-info prints it, into buf (cap bytes, NUL
 * included): the type name, then for INT, SIZE and DURATION the range (bounds included; an
 * upper bound of INT64_MAX and an INT's lower bound of INT64_MIN are left out: "64K..",
 * "..0") and the unit, or the unit alone in parentheses when the range is the type's own;
 * for ENUM the choices separated by '|'. Sizes print in the largest binary unit that is
 * exact (K, M, G, T). Examples:
 *   "bool"   "int 1..16 connections"   "int (connections)"   "int"
 *   "size 4K..1G bytes"   "size (bytes)"   "duration 10..3600000 ms"   "duration (us)"
 *   "enum auto|shm|cma|tcp"   "string"
 * Errors: IXL_ERR_INVALID_ARG: o or buf NULL, a descriptor the manager would refuse, or cap
 * too small for the text (the reason says how many bytes it needs); buf is then untouched.
 */
IXL_API ixl_status ixl_option_describe(const struct ixl_option *o, char *buf, size_t cap);

/**
 * Parses text as a value of option o by the rules of every backend option (enum
 * ixl_opt_type: suffixes K/M/G/T, us/ms/s, blanks, ranges). On IXL_OK, *out holds the value
 * as a plugin's create_engine receives it, and out->str points at the normalized text: in norm
 * (BOOL, INT, SIZE, DURATION), at the option's declared choice (ENUM; it lives as long as
 * o->choices) or at text itself (STRING; it lives as long as text). norm must hold at least
 * IXL_OPTION_NORM_MAX bytes (norm_cap) for every type, and is written only for the types
 * that use it. Nothing is retained after the call.
 * Errors: IXL_ERR_INVALID_ARG: a NULL argument, norm_cap below IXL_OPTION_NORM_MAX, a
 * descriptor the manager would refuse, or text that is not a value of o; the reason reads as
 * a backend's would ("NAME='TEXT': out of range; want a size in bytes, 4K..1G (...)").
 * *out and norm are then untouched.
 */
IXL_API ixl_status ixl_option_parse(const struct ixl_option *o, const char *text,
                                    struct ixl_opt_value *out, char *norm, size_t norm_cap);

/* ------------------------------------------------------------------------------------------ */
/* Agent                                                                                      */
/* ------------------------------------------------------------------------------------------ */

struct ixl_agent;
struct ixl_backend;

enum ixl_thread_mode {
    IXL_THREAD_SAFE = 0, /* default: any thread, concurrently */
    IXL_THREAD_NONE = 1, /* the caller serializes every call on the agent */
};

enum ixl_agent_field {
    IXL_AGENT_F_PROGRESS_THREAD = 1u << 0,
    IXL_AGENT_F_PROGRESS_PERIOD = 1u << 1,
    IXL_AGENT_F_LISTEN_PORT = 1u << 2,
    IXL_AGENT_F_LISTEN_ADDR = 1u << 3,
    IXL_AGENT_F_THREAD_MODE = 1u << 4,
    IXL_AGENT_F_TELEMETRY = 1u << 5,
    IXL_AGENT_F_BACKENDS = 1u << 6,
    IXL_AGENT_F_NOTIF_MAX = 1u << 7,
    IXL_AGENT_F_ETCD = 1u << 8,
    IXL_AGENT_F_AUTH_KEY = 1u << 9,
    IXL_AGENT_F_INSECURE_REMOTE = 1u << 10,
};

/**
 * Agent parameters. Set field_mask to the fields you fill; the others take their defaults.
 * The struct only grows at the end, and a field is read only when its bit is set.
 */
struct ixl_agent_params {
    uint64_t field_mask;
    bool progress_thread;             /* default false: also call backends' progress() on a timer */
    uint32_t progress_period_us;      /* default 1000 */
    uint16_t listen_port;             /* metadata listener; default: none; 0 = any free port */
    const char *listen_addr;          /* default "127.0.0.1"; another than loopback needs
                                         auth_key or insecure_remote (docs/metadata.md) */
    enum ixl_thread_mode thread_mode; /* default IXL_THREAD_SAFE */
    bool telemetry;                   /* default true: per-request telemetry */
    /* Backends created with default options at agent creation, comma-separated; "" = none.
     * Default: the configuration's IXL_BACKENDS. A name the manager cannot load is logged and
     * skipped, unless it was given here explicitly, which fails creation. */
    const char *backends;
    size_t notif_max;           /* default IXL_NOTIF_MAX_DEFAULT; smaller values are raised */
    const char *etcd_endpoints; /* default: IXL_ETCD_ENDPOINTS; NULL/"" = no etcd */
    /* Trust (docs/security.md). The cluster key, at least 16 bytes: every agent of the cluster
     * holds the same one. Metadata is then authenticated, and every connection to this agent's
     * listeners must prove the key before anything else is accepted. Default: IXL_AUTH_KEY, or
     * the contents of the file IXL_AUTH_KEY_FILE (refused unless a regular file of this
     * process's user that no other user can read or write); NULL/"" = no key: listeners bind to
     * loopback only and accept only processes of this user (the kernel's word). */
    const char *auth_key;
    /* Without a key, listen beyond loopback and accept any peer (logged at WARN): for a
     * trusted network only. Default: IXL_INSECURE_REMOTE (0). Ignored when there is a key. */
    bool insecure_remote;
};

/**
 * Creates an agent named name (1..IXL_NAME_MAX-1 bytes, no NUL). params may be NULL.
 * Errors: IXL_ERR_INVALID_ARG (name), IXL_ERR_NOT_FOUND / IXL_ERR_PLUGIN (a backend named in
 * params cannot be created), IXL_ERR_NO_MEMORY.
 */
IXL_API ixl_status ixl_agent_create(const char *name, const struct ixl_agent_params *params,
                                    struct ixl_agent **out);
/**
 * Destroys an agent: releases its requests and prepared lists, deregisters what is still
 * registered, invalidates remotes, destroys its backends. Accepts NULL. No other call on the
 * agent may run concurrently or afterwards.
 *
 * It blocks until every thread of the agent is joined. The worst case is the sum of:
 *  - etcd (only with etcd_endpoints): the lease keep-alive request in flight, then the lease
 *    revoke, each up to E x 5 s (E endpoints tried in turn, 5 s per HTTP request, 2 s of it
 *    to connect); a fetch from etcd in flight (up to E x 5 s) runs meanwhile;
 *  - the metadata listener and peer fetches: sockets are cut and each thread sees the stop
 *    within 50 ms, except one still resolving a host name (getaddrinfo: the resolver's own
 *    timeout; none for numeric addresses);
 *  - the progress thread: one progress_period_us plus one progress() call;
 *  - requests whose backend keeps refusing release (IXL_ERR_BUSY): retried for at most 5 s
 *    in all, then abandoned to the engine's destroy;
 *  - each backend's destroy_engine, which joins its threads and waits for I/O it cannot
 *    cancel (a POSIX read or write in the kernel lasts as long as the device takes; see each
 *    plugin's page).
 * With no etcd and numeric addresses that is about 5 s + progress_period_us + 50 ms plus
 * the engines' own time; with etcd, add up to 2 x E x 5 s.
 */
IXL_API void ixl_agent_destroy(struct ixl_agent *agent);
/** The agent's name (borrowed for the agent's lifetime). */
IXL_API const char *ixl_agent_name(const struct ixl_agent *agent);
/**
 * The text of the last error an ixl call on this agent reported to the calling thread ("" if
 * none). Borrowed until the calling thread's next ixl call. With agent NULL: the text of the
 * calling thread's last failed agent-less call, ixl_agent_create(), ixl_option_describe() or
 * ixl_option_parse() ("" if the last of these it made succeeded), since they leave no agent
 * to ask.
 */
IXL_API const char *ixl_agent_last_error(const struct ixl_agent *agent);

/**
 * Creates a backend from plugin plugin_name with options params (n entries; unknown keys
 * are IXL_ERR_INVALID_ARG, with the known ones in the message; a value that does not parse
 * as the option's type (enum ixl_opt_type) or lies outside its range is IXL_ERR_INVALID_ARG
 * naming the option, the value and what it wants). The backend belongs to the agent and lives
 * until ixl_backend_destroy() or the agent's destruction. out may be NULL.
 * It takes the lowest free place in the agent's backend order (the order requests choose
 * backends in): after the agent's existing ones, or a destroyed backend's place.
 * Errors: IXL_ERR_NOT_FOUND (no such plugin), IXL_ERR_EXISTS (the agent already has a
 * backend of this plugin), IXL_ERR_PLUGIN, IXL_ERR_BACKEND (the plugin's constructor failed).
 */
IXL_API ixl_status ixl_backend_create(struct ixl_agent *agent, const char *plugin_name,
                                      const struct ixl_kv *params, size_t n,
                                      struct ixl_backend **out);
/**
 * Destroys a backend and gives its place back (another backend of the same plugin may be
 * created next). Refused with IXL_ERR_BUSY, changing nothing, while it is in use: by a
 * request made with it that is not released (a release that failed included), by a prepared
 * list that can use it (destroy the list), or by memory it allocated (ixl_mem_free it), or
 * when a region registered with it alone is used by a prepared list or request. Otherwise it
 * takes its share of everything with it: each local region loses its registration with this
 * backend, and a region registered with it alone is deregistered (ixl_mem_deregister of it is
 * then IXL_ERR_NOT_FOUND); loaded remote regions and connection info it held are unloaded
 * (remotes stay loaded for the other backends); notifications it received but that were not
 * drained are lost; peers that loaded this agent's metadata keep its connection info until
 * sent the metadata again. Backends created at agent creation (IXL_BACKENDS) are destroyed
 * the same way and not created again. Accepts NULL (IXL_OK). Safe against concurrent calls on
 * the agent that do not name this backend; it waits for progress and notification calls in
 * the backend to return, and blocks the agent's other calls while the engine is destroyed.
 * The handle is gone on IXL_OK. Unlike other destroy functions it returns a status, since
 * in-use is refused instead of undone (see docs/design.md).
 */
IXL_API IXL_NODISCARD ixl_status ixl_backend_destroy(struct ixl_backend *backend);
/** Number of backends of the agent, and each by index (in the agent's backend order). */
IXL_API size_t ixl_backend_count(struct ixl_agent *agent);
IXL_API ixl_status ixl_backend_get(struct ixl_agent *agent, size_t index, struct ixl_backend **out);
/** Finds the agent's backend of plugin name. IXL_ERR_NOT_FOUND if none. */
IXL_API ixl_status ixl_backend_find(struct ixl_agent *agent, const char *name,
                                    struct ixl_backend **out);
IXL_API const char *ixl_backend_name(const struct ixl_backend *backend);
/** Effective capabilities and memory types of a created backend. */
IXL_API uint32_t ixl_backend_caps(const struct ixl_backend *backend);
IXL_API uint32_t ixl_backend_mem_mask(const struct ixl_backend *backend);
/**
 * Why memory types of the backend's plugin (struct ixl_plugin_info's mem_mask) are missing
 * from ixl_backend_mem_mask(): one "TYPE: reason" per line, as the engine said it (e.g.
 * "VRAM: no GPU driver: libcuda.so.1 not found"); "" when none are missing or the engine gave
 * no reason. Borrowed for the backend's lifetime.
 */
IXL_API const char *ixl_backend_mem_why(const struct ixl_backend *backend);
/**
 * The backend's effective options: every option of its plugin, in the order of the plugin's
 * options, with the value in force normalized (see enum ixl_opt_type: a size in bytes, a
 * duration in the option's base unit, a boolean as 1 or 0, an enum's choice as declared).
 * *out points into the backend (lives as long as the agent); *n is its length.
 */
IXL_API ixl_status ixl_backend_params(const struct ixl_backend *backend, const struct ixl_kv **out,
                                      size_t *n);

/* ------------------------------------------------------------------------------------------ */
/* Memory registration                                                                        */
/* ------------------------------------------------------------------------------------------ */

enum ixl_reg_field {
    IXL_REG_F_BACKENDS = 1u << 0,
    IXL_REG_F_DEVS_OUT = 1u << 1,
};

struct ixl_reg_params {
    uint64_t field_mask;
    struct ixl_backend *const *backends; /* register with these only (default: every
                                            backend that supports the memory type) */
    size_t n_backends;
    /* With IXL_REG_F_DEVS_OUT: n entries written on success with the dev value transfer
     * descriptors (and ixl_mem_deregister) use for each region: the dev given, or for a
     * path-mode FILE region (dev IXL_DEV_NONE) the id the agent assigned to it. */
    uint64_t *devs_out;
};

/** Path-mode FILE regions get dev ids from IXL_DEV_ASSIGNED_MIN up (never an fd). */
#define IXL_DEV_ASSIGNED_MIN (1ull << 62)

/**
 * Registers n regions of memory type type with the chosen backends (params NULL: all that
 * support the type). All or nothing: on error nothing stays registered. A region may nest in
 * or overlap another; registering the exact same (addr, len, dev) twice with a backend is
 * IXL_ERR_EXISTS. descs (and their bytes) are borrowed for the call. With no backend named,
 * a backend that answers IXL_ERR_NOT_SUPPORTED for a region (it cannot serve that one: GDS for a
 * file on a file system cuFile does not serve) is left out for it, with a WARN log line, when
 * another backend takes it; transfers over that region then use the others.
 * FILE in path mode (dev IXL_DEV_NONE, bytes "MODE:PATH", the backend opens the file): each
 * such descriptor is a new region with a dev id assigned by the agent (>=
 * IXL_DEV_ASSIGNED_MIN), returned through params->devs_out, which such a call must give.
 * Errors: IXL_ERR_INVALID_ARG, IXL_ERR_NO_BACKEND (no backend takes this type),
 * IXL_ERR_EXISTS, or the backend's error.
 */
IXL_API ixl_status ixl_mem_register(struct ixl_agent *agent, enum ixl_mem type,
                                    const struct ixl_reg_desc *descs, size_t n,
                                    const struct ixl_reg_params *params);
/**
 * Deregisters regions registered with the same (addr, len, dev). All or nothing. A region
 * still used by a prepared list or a request that is not released is IXL_ERR_BUSY (release
 * those first). Unknown regions are IXL_ERR_NOT_FOUND.
 */
IXL_API IXL_NODISCARD ixl_status ixl_mem_deregister(struct ixl_agent *agent, enum ixl_mem type,
                                                    const struct ixl_reg_desc *descs, size_t n,
                                                    const struct ixl_reg_params *params);

/**
 * Asks a backend about n registration descriptors (does the file exist, its size), writing
 * out[0..n-1]. backend NULL: the first backend that supports type and answers queries.
 * IXL_ERR_NOT_SUPPORTED if no backend answers.
 */
IXL_API ixl_status ixl_mem_query(struct ixl_agent *agent, enum ixl_mem type,
                                 const struct ixl_reg_desc *descs, size_t n,
                                 struct ixl_backend *backend, struct ixl_mem_query *out);

/**
 * Allocates len bytes of memory type type that backend can share best (NET: a memfd that
 * same-node peers map, so their transfers are single copies). The memory is not registered.
 * backend NULL: the first backend that offers allocation for type. Free with ixl_mem_free().
 * IXL_ERR_NOT_SUPPORTED if no backend allocates.
 */
IXL_API ixl_status ixl_mem_alloc(struct ixl_agent *agent, enum ixl_mem type, size_t len,
                                 struct ixl_backend *backend, void **out);
/** Frees memory from ixl_mem_alloc() (deregister it first). Accepts NULL. */
IXL_API IXL_NODISCARD ixl_status ixl_mem_free(struct ixl_agent *agent, void *addr);

/* ------------------------------------------------------------------------------------------ */
/* Device memory (docs/device.md)                                                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * The process's one device layer: it loads the GPU driver (the CUDA driver API: libcuda.so.1,
 * or the library configuration IXL_CUDA_LIBRARY names) on first use and keeps it for the
 * process's life. Every function here is safe from any thread, needs no agent, and makes the
 * device's primary context current on the calling thread itself. VRAM registration
 * (ixl_mem_register with IXL_MEM_VRAM, dev = the device index) goes through the same layer.
 * Errors are logged with the driver's error name and text.
 */

/** A device, as ixl_device_info() describes it (size first: see the top of this header). */
struct ixl_device_info {
    uint32_t size;      /* set by the caller to sizeof(struct ixl_device_info) */
    int32_t ordinal;    /* the device index (the dev of a VRAM descriptor) */
    char name[128];     /* the driver's name for it, NUL-terminated */
    uint64_t total_mem; /* bytes */
    int32_t cc_major;   /* compute capability */
    int32_t cc_minor;
    int32_t pci_bus; /* PCI bus id */
};

/**
 * How many devices there are (>= 0), or a negative status when there is no usable driver:
 * IXL_ERR_NOT_SUPPORTED with why (a NUL-terminated sentence, may be NULL) saying which: no GPU
 * driver (the library not found, or missing an entry point), the toolkit's stub library
 * instead of a driver, no device, or the driver's own error. With >= 0, why is "" (0 devices
 * is reported as IXL_ERR_NOT_SUPPORTED with why "no CUDA device", since the driver says so
 * itself). The answer is computed once and cached.
 */
IXL_API int ixl_device_count(char *why, size_t why_len);
/** The driver's CUDA version (e.g. 12040 for 12.4). IXL_ERR_NOT_SUPPORTED without a driver. */
IXL_API ixl_status ixl_device_driver_version(int *out);
/** Describes device dev. IXL_ERR_INVALID_ARG for a dev outside [0, count). */
IXL_API ixl_status ixl_device_info(int dev, struct ixl_device_info *out);
/**
 * Allocates len bytes of device memory on dev (cuMemAlloc in dev's primary context); free it
 * with ixl_device_free(). The CPU cannot touch it: move bytes with ixl_device_copy() or
 * transfers. IXL_ERR_NOT_SUPPORTED without a driver, IXL_ERR_NO_MEMORY when the device is
 * full, IXL_ERR_INVALID_ARG for len 0 or a bad dev.
 */
IXL_API ixl_status ixl_device_alloc(int dev, size_t len, void **out);
/** Frees memory from ixl_device_alloc(). Accepts NULL. */
IXL_API ixl_status ixl_device_free(void *ptr);
/**
 * Copies len bytes from src to dst and returns when they are there. Either side may be device
 * memory (of any device) or host memory (unified addressing). IXL_ERR_BACKEND with the
 * driver's text on failure.
 */
IXL_API ixl_status ixl_device_copy(void *dst, const void *src, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Metadata                                                                                   */
/* ------------------------------------------------------------------------------------------ */

enum ixl_md_field {
    IXL_MD_F_REGIONS = 1u << 0,   /* partial: only the regions covering these descriptors */
    IXL_MD_F_CONN_INFO = 1u << 1, /* include connection info (default: yes) */
    IXL_MD_F_BACKENDS = 1u << 2,  /* only these backends */
    IXL_MD_F_LABEL = 1u << 3,     /* label of partial metadata (peer/etcd exchange) */
};

struct ixl_md_params {
    uint64_t field_mask;
    const struct ixl_dlist *regions; /* with IXL_MD_F_REGIONS; empty list = no regions */
    bool conn_info;
    struct ixl_backend *const *backends;
    size_t n_backends;
    const char *label;
};

/**
 * The agent's metadata as bytes, for another agent's ixl_md_load(): name, incarnation,
 * connection info of each backend that supports remote transfers, and the public data of
 * each registered region. params NULL = everything. The caller frees *out with ixl_free().
 * A partial blob (IXL_MD_F_REGIONS) carries only regions covering the given descriptors:
 * IXL_ERR_NOT_REGISTERED if one is not covered. With a cluster key every blob ends with a MAC
 * under it (docs/metadata.md).
 */
IXL_API ixl_status ixl_md_get(struct ixl_agent *agent, const struct ixl_md_params *params,
                              void **out, size_t *out_len);
/**
 * Loads a remote agent's metadata (untrusted bytes). A new agent is added; for an agent
 * already known with the same incarnation the blob's regions are added (incremental update)
 * and its connection info, if any, replaces the old one; a blob of a newer incarnation
 * (the agent restarted) replaces the old entry, whose requests then fail with IXL_ERR_STALE;
 * a blob of an older incarnation is IXL_ERR_STALE. name_out (may be NULL) receives the remote
 * agent's name, NUL-terminated, in name_cap bytes (IXL_NAME_MAX always suffices); a name
 * that does not fit is IXL_ERR_TOO_LARGE and nothing of the blob is loaded.
 * Regions of a backend whose connection info was never loaded for that agent are skipped
 * (send connection info first, or with them). An agent with no backend in common is still
 * loaded (IXL_OK, with a warning in the log); transfers to it fail with IXL_ERR_NO_BACKEND.
 * With a cluster key only a blob whose MAC verifies under it loads; without one a MAC'd blob
 * is refused (IXL_ERR_AUTH either way). An incarnation claiming a start more than 600 s after
 * this host's clock is IXL_ERR_MALFORMED (it would make the real agent look older for good).
 * Errors: IXL_ERR_MALFORMED, IXL_ERR_STALE, IXL_ERR_AUTH, IXL_ERR_INVALID_ARG (the agent's own
 * metadata),
 * IXL_ERR_TOO_LARGE (name_cap), or a backend's refusal of the connection info or a region's public
 * data; on error nothing of the blob's regions is loaded. One exception: when a backend accepted a
 * restarted agent's new connection info before another part of its blob was refused, the old entry
 * is gone too (that backend no longer reaches the old instance).
 */
IXL_API ixl_status ixl_md_load(struct ixl_agent *agent, const void *blob, size_t len,
                               char *name_out, size_t name_cap);
/**
 * Invalidates a remote agent: disconnects its backends and unloads its regions. Requests
 * made for it fail at post with IXL_ERR_STALE, in-flight ones end in an error.
 * IXL_ERR_NOT_FOUND if the agent is not loaded. Whatever incarnation is loaded goes: the way
 * to force the next ixl_md_load or fetch of the name to load, whichever incarnation it has.
 */
IXL_API ixl_status ixl_remote_invalidate(struct ixl_agent *agent, const char *remote);
/**
 * IXL_OK when the remote agent's metadata is loaded and, if descs is not NULL, every
 * descriptor lies in a region loaded for it; IXL_ERR_NOT_FOUND otherwise.
 */
IXL_API ixl_status ixl_remote_check(struct ixl_agent *agent, const char *remote,
                                    const struct ixl_dlist *descs);
/** Connects now to a loaded remote agent with every backend in common (optional). */
IXL_API ixl_status ixl_remote_connect(struct ixl_agent *agent, const char *remote);

/** Where ixl_md_send / fetch / invalidate_local talk to: a peer's listener, or etcd. */
struct ixl_peer {
    const char *addr; /* a peer's listener "host"; NULL = the agent's etcd service */
    uint16_t port;
};

/** Sends the agent's metadata (params as in ixl_md_get) to a peer's listener or etcd. */
IXL_API ixl_status ixl_md_send(struct ixl_agent *agent, const struct ixl_peer *peer,
                               const struct ixl_md_params *params);
/**
 * Starts fetching remote's metadata from a peer or etcd; it completes into the agent's remote
 * table (the agent's fd becomes readable when it ends). Returns at once; follow it with
 * ixl_md_fetch_status(). A peer's fetch gives up after 5 s without an answer; an etcd fetch
 * waits up to 30 s for the name to appear.
 */
IXL_API ixl_status ixl_md_fetch(struct ixl_agent *agent, const char *remote,
                                const struct ixl_peer *peer, const char *label);
/**
 * Where remote's metadata stands: IXL_OK (loaded: by a fetch, ixl_md_load, a peer's
 * ixl_md_send or etcd), IXL_IN_PROGRESS (a fetch of it is running), IXL_ERR_NOT_FOUND (no
 * fetch running or failed, and not loaded), or the error the last fetch of it failed with
 * (IXL_ERR_CONN_REFUSED, IXL_ERR_UNREACHABLE, IXL_ERR_TIMEOUT, IXL_ERR_MALFORMED, the
 * loader's refusal...), its reason in ixl_agent_last_error(). A fetch that failed because
 * the peer or etcd has no such agent or label also gives IXL_ERR_NOT_FOUND: either way
 * nothing is loaded and nothing is coming; the reason tells which. A failed fetch's outcome
 * stays until the next fetch of that remote or its invalidation (ixl_remote_invalidate, or
 * the remote's own). Non-blocking; thread-safe.
 */
IXL_API ixl_status ixl_md_fetch_status(struct ixl_agent *agent, const char *remote);
/** Tells the peers that loaded this agent's metadata (or etcd) to drop it. */
IXL_API ixl_status ixl_md_invalidate_local(struct ixl_agent *agent, const struct ixl_peer *peer);
/** The listener's port (after listen_port 0 = any). IXL_ERR_NOT_FOUND if none listens. */
IXL_API ixl_status ixl_agent_listen_port(struct ixl_agent *agent, uint16_t *out);

/* ------------------------------------------------------------------------------------------ */
/* Transfers                                                                                  */
/* ------------------------------------------------------------------------------------------ */

struct ixl_xfer;
struct ixl_prep;

enum ixl_xfer_field {
    IXL_XFER_F_NOTIF = 1u << 0,
    IXL_XFER_F_BACKENDS = 1u << 1,
    IXL_XFER_F_NO_MERGE = 1u << 2,
};

struct ixl_xfer_params {
    uint64_t field_mask;
    const void *notif; /* sent to the remote after all data is in place; copied */
    size_t notif_len;
    /* Preference list: the first of these that can serve the request is used. */
    struct ixl_backend *const *backends;
    size_t n_backends;
    bool no_merge; /* keep descriptors as given (default: merge adjacent pairs) */
};

/**
 * Creates a request to move local <-> remote: READ copies remote into local, WRITE local into
 * remote. remote_agent is a loaded agent's name, or this agent's own name (loopback, storage).
 * The lists must have the same number of descriptors and equal lengths pairwise; each
 * descriptor must lie inside a region registered (locally) or loaded (remote) with the chosen
 * backend. The backend is chosen by memory types, capabilities and registered ranges, in
 * creation order or by params->backends. Adjacent pairs are merged unless no_merge is set.
 * Lists are copied; nothing is borrowed after the call. Free with ixl_xfer_release().
 * Errors: IXL_ERR_MISMATCH, IXL_ERR_NOT_FOUND (remote not loaded), IXL_ERR_NOT_REGISTERED
 * (names the descriptor), IXL_ERR_NO_BACKEND, IXL_ERR_NOTIF_UNSUPPORTED,
 * IXL_ERR_NOTIF_TOO_LARGE, or the backend's error.
 */
IXL_API ixl_status ixl_xfer_create(struct ixl_agent *agent, enum ixl_op op,
                                   const struct ixl_dlist *local, const struct ixl_dlist *remote,
                                   const char *remote_agent, const struct ixl_xfer_params *params,
                                   struct ixl_xfer **out);
/**
 * Starts the request without blocking. IXL_OK if it already completed, IXL_IN_PROGRESS if it
 * runs, an error otherwise. A request may be posted again once it is no longer in flight.
 * Errors: IXL_ERR_REPOST_ACTIVE, IXL_ERR_STALE (the remote was invalidated or reloaded since
 * the request was made: make a new one), IXL_ERR_REMOTE_DISCONNECT, the backend's error.
 */
IXL_API IXL_NODISCARD ixl_status ixl_xfer_post(struct ixl_xfer *xfer);
/**
 * Progress and state: IXL_OK (done), IXL_IN_PROGRESS, IXL_ERR_NOT_POSTED, or the error. A
 * caller may poll it in a loop: where the request's work runs on threads of the backend (NET's
 * event loops, io_uring's workers) that may share the caller's CPU, a call that finds it still
 * in flight gives the CPU up (sched_yield) when the backend knows its thread has work for it
 * there, and after 200 us in any case, so a poller pinned to one CPU does not starve them.
 */
IXL_API ixl_status ixl_xfer_status(struct ixl_xfer *xfer);
/**
 * Waits for the request to leave IXL_IN_PROGRESS, for at most timeout_ms (-1 = no limit),
 * without spinning. Returns what ixl_xfer_status() would, or IXL_ERR_TIMEOUT.
 */
IXL_API IXL_NODISCARD ixl_status ixl_xfer_wait(struct ixl_xfer *xfer, int timeout_ms);
/**
 * Releases the request, canceling it if in flight. IXL_OK: the handle is gone; nothing more is
 * written into local buffers for it and its notification will never be delivered (bytes of a
 * WRITE already sent may have landed). An error (IXL_ERR_BUSY: the backend could not stop the
 * transfer yet) leaves the handle valid and canceled; call again later. Accepts NULL (IXL_OK).
 */
IXL_API IXL_NODISCARD ixl_status ixl_xfer_release(struct ixl_xfer *xfer);
/** Replaces the notification message (not while in flight). len 0 = no notification. */
IXL_API ixl_status ixl_xfer_set_notif(struct ixl_xfer *xfer, const void *msg, size_t len);

/** Per-request telemetry of the last completed post (times from the clock IXL_CLOCK picks:
 * the CPU's time-stamp counter where the kernel keeps time with it, else CLOCK_MONOTONIC). */
struct ixl_xfer_telemetry {
    uint32_t size;       /* set by the caller to sizeof(struct ixl_xfer_telemetry) */
    uint64_t post_us;    /* time spent in ixl_xfer_post() */
    uint64_t xfer_us;    /* from post to the completion the agent saw */
    uint64_t bytes;      /* bytes moved */
    uint64_t desc_count; /* descriptors after merging */
    uint64_t post_count; /* times posted */
};

/** IXL_ERR_NO_TELEMETRY when telemetry is off; IXL_ERR_NOT_POSTED before the first completion. */
IXL_API ixl_status ixl_xfer_telemetry(struct ixl_xfer *xfer, struct ixl_xfer_telemetry *out);

/** What a request is and how it ran. Strings live as long as the request. */
struct ixl_xfer_info {
    uint32_t size;       /* set by the caller to sizeof(struct ixl_xfer_info) */
    const char *backend; /* the chosen backend */
    const char *path;    /* the data path the backend used ("tcp", "cma", ...) or "": of the
                            last post when the request is done; in flight, the one known
                            before (the path planned when it was made, at first) */
    uint64_t desc_count; /* after merging */
    uint64_t bytes;
};
IXL_API ixl_status ixl_xfer_info(struct ixl_xfer *xfer, struct ixl_xfer_info *out);

/** The backend's estimate of the request's duration. IXL_ERR_NOT_SUPPORTED if it has none. */
IXL_API ixl_status ixl_xfer_estimate(struct ixl_xfer *xfer, struct ixl_cost *out);

/* ------------------------------------------------------------------------------------------ */
/* Prepared lists and index requests                                                          */
/* ------------------------------------------------------------------------------------------ */

enum ixl_prep_field {
    IXL_PREP_F_BACKENDS = 1u << 0,
};

struct ixl_prep_params {
    uint64_t field_mask;
    struct ixl_backend *const *backends;
    size_t n_backends;
};

/**
 * Prepares a descriptor list once, for many requests: remote NULL makes the initiator's
 * local side; a remote agent's name (or this agent's own, for loopback and storage) makes a
 * target side. Every run is checked against registrations now (IXL_ERR_NOT_REGISTERED names
 * the first uncovered descriptor). The list is kept as runs: memory grows with runs, not
 * descriptors. The regions it covers cannot be deregistered until it is destroyed.
 */
IXL_API ixl_status ixl_prep_create(struct ixl_agent *agent, const char *remote,
                                   const struct ixl_dlist *list,
                                   const struct ixl_prep_params *params, struct ixl_prep **out);
/** Destroys a prepared list; requests made from it stay valid. Accepts NULL. */
IXL_API void ixl_prep_destroy(struct ixl_prep *prep);
IXL_API uint64_t ixl_prep_count(const struct ixl_prep *prep);

/**
 * Makes a request from index arrays into two prepared lists: descriptor local_idx[i] of local
 * pairs with remote_idx[i] of remote, i < n. Runs of consecutive indices that are adjacent in
 * memory on both sides are merged. Errors: IXL_ERR_INDEX (names i), IXL_ERR_MISMATCH
 * (lengths), IXL_ERR_STALE (remote reloaded since remote was prepared), and those of
 * ixl_xfer_create(). The arrays are borrowed for the call.
 */
IXL_API ixl_status ixl_xfer_create_prepped(struct ixl_agent *agent, enum ixl_op op,
                                           const struct ixl_prep *local, const int64_t *local_idx,
                                           const struct ixl_prep *remote, const int64_t *remote_idx,
                                           size_t n, const struct ixl_xfer_params *params,
                                           struct ixl_xfer **out);

/* ------------------------------------------------------------------------------------------ */
/* Notifications                                                                              */
/* ------------------------------------------------------------------------------------------ */

struct ixl_notif {
    const char *agent; /* the sender's name */
    const void *msg;
    size_t len;
};

/** Notifications drained in one call: one allocation, freed with ixl_free(). */
struct ixl_notif_batch {
    size_t count;
/* A flexible array member: ISO C99 and C11; in C++ an extension that GCC and clang accept,
 * whose -Wpedantic diagnostic is silenced here only (the layout is the same as in C). */
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
    struct ixl_notif items[];
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
};

/**
 * Takes every notification received since the last call, from every backend. Entries from one
 * sender are in arrival order. *out is NULL when there are none (and IXL_OK is returned).
 */
IXL_API ixl_status ixl_notif_drain(struct ixl_agent *agent, struct ixl_notif_batch **out);
/**
 * Sends a notification not bound to a transfer to a loaded remote agent (or to itself),
 * through backend if given, else the first backend both share that supports notifications.
 * No ordering with transfers. Errors: IXL_ERR_NOT_FOUND, IXL_ERR_NO_BACKEND,
 * IXL_ERR_NOTIF_TOO_LARGE.
 */
IXL_API ixl_status ixl_notif_send(struct ixl_agent *agent, const char *remote, const void *msg,
                                  size_t len, struct ixl_backend *backend);

/* ------------------------------------------------------------------------------------------ */
/* Waiting and progress                                                                       */
/* ------------------------------------------------------------------------------------------ */

/**
 * A file descriptor that becomes readable when a request of this agent may have completed or
 * a notification or fetched metadata may have arrived (a request that ixl_xfer_post itself
 * reports done, IXL_OK, need not make it readable: the post's return says so). Wait with
 * poll/epoll, then call
 * ixl_agent_progress() (which clears it) and check what you wait for. Owned by the agent:
 * never read or write it yourself (ixl writes it once per readiness, not once per completion,
 * and only ixl_agent_progress() clears it; a read of your own may leave it unreadable when
 * the next request completes).
 */
IXL_API ixl_status ixl_agent_fd(struct ixl_agent *agent, int *out);
/** Drives backends that need progress() and clears the fd's readiness. */
IXL_API ixl_status ixl_agent_progress(struct ixl_agent *agent);

/** Agent-wide counters (since creation). */
struct ixl_agent_stats {
    uint32_t size; /* set by the caller to sizeof(struct ixl_agent_stats) */
    uint64_t posted;
    uint64_t completed;
    uint64_t failed;
    uint64_t bytes;
    uint64_t notifs_received;
    uint64_t notifs_sent;
};
IXL_API ixl_status ixl_agent_stats(struct ixl_agent *agent, struct ixl_agent_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* IXL_IXL_H */

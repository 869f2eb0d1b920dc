/*
 * ixl_types.h - types shared by the north-bound API (ixl.h) and the plugin ABI
 * (ixl_plugin.h): status codes, memory types, registration descriptors, capabilities.
 * Everything here is part of both contracts: enum values are never renumbered, structs
 * never change layout.
 *
 * Language: C99 or later and C++11 or later, with no compiler extension (IXL_API uses
 * __attribute__ only where __GNUC__ is defined).
 */
#ifndef IXL_IXL_TYPES_H
#define IXL_IXL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define IXL_API __attribute__((visibility("default")))
#else
#define IXL_API
#endif

/** Longest agent or backend name, including the terminating NUL. */
#define IXL_NAME_MAX 256
/** Default and minimum value of the agent's maximum notification size (bytes). */
#define IXL_NOTIF_MAX_DEFAULT (64u * 1024u)
/** A registration dev value meaning "no device": FILE regions opened by the backend. */
#define IXL_DEV_NONE UINT64_MAX

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                               */
/* ------------------------------------------------------------------------------------------ */

/**
 * One status enum. Errors are negative, grouped in reserved ranges by what failed; values are
 * never renumbered and new ones are only appended within their range.
 */
enum ixl_status {
    IXL_OK = 0,
    IXL_IN_PROGRESS = 1,

    /* -100..-199: the caller's arguments */
    IXL_ERR_INVALID_ARG = -100,  /* a NULL, out-of-range or contradictory argument */
    IXL_ERR_MISMATCH = -101,     /* two lists that must agree (length, sizes, types) differ */
    IXL_ERR_MALFORMED = -102,    /* bytes (metadata, descriptor list) do not decode */
    IXL_ERR_TOO_LARGE = -103,    /* a size over a documented limit */
    IXL_ERR_BAD_MEM_TYPE = -104, /* a memory type the operation cannot take */
    IXL_ERR_INDEX = -105,        /* an index outside a prepared list */

    /* -200..-299: a transfer request */
    IXL_ERR_NOT_POSTED = -200,      /* status/wait on a request never posted */
    IXL_ERR_REPOST_ACTIVE = -201,   /* post of a request that is still in flight */
    IXL_ERR_CANCELED = -202,        /* the request was canceled */
    IXL_ERR_STALE = -203,           /* the remote was invalidated/reloaded since creation */
    IXL_ERR_TIMEOUT = -204,         /* a wait's timeout ran out; the request goes on */
    IXL_ERR_NOT_REGISTERED = -205,  /* a descriptor lies outside every registered region */
    IXL_ERR_NO_TELEMETRY = -206,    /* telemetry is off for this agent */
    IXL_ERR_NOTIF_TOO_LARGE = -207, /* notification over the agent's maximum */

    /* -300..-399: a connection to another agent */
    IXL_ERR_REMOTE_DISCONNECT = -300, /* the peer went away (died, closed, invalidated) */
    IXL_ERR_CONN_REFUSED = -301,      /* the peer refused the connection */
    IXL_ERR_UNREACHABLE = -302,       /* the peer cannot be reached (no route, timeout) */
    IXL_ERR_PROTOCOL = -303,          /* the peer sent something that breaks the protocol */
    IXL_ERR_REMOTE_REFUSED = -304,    /* the peer checked the request and refused it */

    /* -400..-499: a backend */
    IXL_ERR_BACKEND = -400,           /* a backend failed; the message says how */
    IXL_ERR_NOT_SUPPORTED = -401,     /* the backend (or ixl) cannot do this */
    IXL_ERR_IO = -402,                /* an I/O error (EIO, short I/O that could not go on) */
    IXL_ERR_NO_SPACE = -403,          /* ENOSPC, EFBIG, a quota */
    IXL_ERR_NO_BACKEND = -404,        /* no backend can serve these memory types / agents */
    IXL_ERR_PLUGIN = -405,            /* a plugin was refused (ABI, symbol, capabilities) */
    IXL_ERR_NOTIF_UNSUPPORTED = -406, /* the chosen backend does not support notifications */

    /* -500..-599: the agent and its tables */
    IXL_ERR_NOT_FOUND = -500,   /* no such agent, backend, plugin, region or entry */
    IXL_ERR_EXISTS = -501,      /* already registered / loaded / created */
    IXL_ERR_BUSY = -502,        /* in use by a prepared list or an in-flight request */
    IXL_ERR_NO_MEMORY = -503,   /* an allocation failed */
    IXL_ERR_NOT_ALLOWED = -504, /* the operation is not allowed in this state or mode */
    IXL_ERR_SYSTEM = -505,      /* a system call failed; the message carries errno's text */
};

typedef enum ixl_status ixl_status;

/* ------------------------------------------------------------------------------------------ */
/* Memory types, operations, registration descriptors                                         */
/* ------------------------------------------------------------------------------------------ */

enum ixl_mem {
    IXL_MEM_DRAM = 0,
    IXL_MEM_VRAM = 1,
    IXL_MEM_BLK = 2,
    IXL_MEM_FILE = 3,
    IXL_MEM_OBJ = 4,
    IXL_MEM_COUNT
};

/** Bit of a memory type in a memory-type mask. */
#define IXL_MEM_BIT(t) (1u << (t))

enum ixl_op { IXL_OP_READ = 0, IXL_OP_WRITE = 1 };

/** A registration descriptor. See the table at the top for each memory type. */
struct ixl_reg_desc {
    uint64_t addr;
    uint64_t len;
    uint64_t dev;
    const void *bytes; /* optional; borrowed for the call */
    size_t bytes_len;
};

enum ixl_log_level {
    IXL_LOG_NONE = 0,
    IXL_LOG_ERROR = 1,
    IXL_LOG_WARN = 2,
    IXL_LOG_INFO = 3,
    IXL_LOG_DEBUG = 4,
    IXL_LOG_TRACE = 5,
};

/** Capability bits of a plugin or backend (the seeds' supports* indicators). */
enum ixl_cap {
    IXL_CAP_LOCAL = 1u << 0,    /* transfers within one agent */
    IXL_CAP_REMOTE = 1u << 1,   /* transfers between agents */
    IXL_CAP_NOTIF = 1u << 2,    /* notifications */
    IXL_CAP_PROGRESS = 1u << 3, /* implements progress() */
};

/** An option a plugin accepts at backend creation. */
struct ixl_option {
    const char *name;
    const char *default_value;
    const char *description;
};

/** Key/value parameter (backend options). Strings borrowed for the call. */
struct ixl_kv {
    const char *key;
    const char *value;
};

/** What a backend knows of a registration descriptor before it is registered. */
struct ixl_mem_query {
    bool exists;   /* the file / object / volume exists */
    uint64_t size; /* its size in bytes when it exists */
};

enum ixl_cost_method { IXL_COST_UNKNOWN = 0, IXL_COST_ANALYTICAL = 1, IXL_COST_MEASURED = 2 };

struct ixl_cost {
    uint64_t duration_us;
    uint64_t error_margin_us;
    enum ixl_cost_method method;
};
#ifdef __cplusplus
}
#endif

#endif /* IXL_IXL_TYPES_H */

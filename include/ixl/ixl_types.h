/*
 * ixl_types.h - types shared by the north-bound API (ixl.h) and the plugin ABI
 * (ixl_plugin.h): status codes, memory types, registration descriptors, capabilities.
 * Everything here is part of both contracts: enum values are never renumbered.
 *
 * How the structs grow (the same rule as in ixl.h and ixl_plugin.h):
 *  - A struct written into the caller's memory begins with uint32_t size (here: struct
 *    ixl_cost). The caller sets size to sizeof(struct) as it was compiled; the callee writes
 *    only the fields that lie entirely within min(size, its own sizeof), sets size to that
 *    min, and refuses a size below the first generation's with IXL_ERR_INVALID_ARG. New
 *    fields only ever go at the end.
 *  - Structs passed in arrays (struct ixl_reg_desc, ixl_kv, ixl_mem_query, ixl_option)
 *    cannot grow, since their stride is part of the contract: they are frozen. A later
 *    generation adds a new struct type and new functions that take it.
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

/* A function whose result must be looked at: ignoring it loses data or leaks (a release
 * refused with IXL_ERR_BUSY leaves the handle alive). */
#if defined(__GNUC__) || defined(__clang__)
#define IXL_NODISCARD __attribute__((warn_unused_result))
#else
#define IXL_NODISCARD
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
    IXL_ERR_AUTH = -305, /* the peer did not prove the cluster key, or the kernel says it is
                          * another user or process than it claims; nothing was accepted */

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

/* ------------------------------------------------------------------------------------------ */
/* Backend options                                                                            */
/* ------------------------------------------------------------------------------------------ */

/**
 * The type of a backend option. The core parses every value (the user's and the default) by
 * the same rules and hands the plugin the result (struct ixl_opt_value); surrounding blanks
 * are ignored for every type but STRING. Numbers are decimal.
 *
 *   BOOL      1, 0, true, false, yes, no, on, off (any case). Normalized: "1" or "0".
 *   INT       a signed integer. unit, when not NULL, names what it counts ("connections"),
 *             for people only: no suffix is accepted. Normalized: the decimal number.
 *   SIZE      bytes: a bare number, or one followed by K, M, G or T (also KiB, MiB, GiB,
 *             TiB; k, m, g, t): powers of 1024. Never negative. Normalized: bytes, decimal.
 *   DURATION  a bare number is in the option's base unit, unit: "us", "ms" or "s"; or a
 *             number followed by us, ms or s, converted to the base unit and refused unless
 *             whole there ("1500us" for a base of ms). Never negative. Normalized: the
 *             number in the base unit, without suffix.
 *   ENUM      one of choices (any case). Normalized: the choice as declared; the value's
 *             number is its index in choices.
 *   STRING    any text, taken as it is (the plugin checks what it needs and names the
 *             option in its error). Normalized: the text.
 *
 * Value 0 is no type: the manager refuses a plugin with an option of no type or of a type it
 * does not know (a later ixl may add types; a plugin using one is refused by an older ixl,
 * with the reason, rather than misread). Values are never renumbered.
 */
enum ixl_opt_type {
    IXL_OPT_BOOL = 1,
    IXL_OPT_INT = 2,
    IXL_OPT_SIZE = 3,
    IXL_OPT_DURATION = 4,
    IXL_OPT_ENUM = 5,
    IXL_OPT_STRING = 6,
};

/**
 * An option a plugin accepts at backend creation: one entry of the descriptor's options
 * array.
 *
 * Layout frozen: arrays of ixl_option cannot grow (the core indexes a plugin's array with
 * its own sizeof), so this struct never changes size or layout within an ABI major. Later
 * minor versions may give meaning only to the reserved slots, and only for hints an older
 * core may ignore; anything that changes how a value is read is a new enum ixl_opt_type
 * value instead. A plugin leaves the reserved slots zero (a designated initializer does).
 *
 * The manager refuses a plugin (with the reason, as for other refusals) whose table has an
 * option without name or description, two options of one name, a type it does not know, a
 * range with min > max, an ENUM without choices (or with a NULL or repeated choice), a
 * DURATION whose unit is not "us", "ms" or "s", or a default value that does not parse as
 * the option's type or lies outside its range.
 */
struct ixl_option {
    const char *name;          /* [A-Za-z0-9_]+, unique within the plugin */
    const char *default_value; /* parsed like a user's value; "" is valid for STRING */
    const char *description;   /* one line for ixl-info: what it does (range and type are
                                  printed from the fields below) */
    enum ixl_opt_type type;
    uint32_t flags; /* none defined: 0 */
    /** INT: what it counts, for people (NULL: nothing said); DURATION: the base unit, "us",
     *  "ms" or "s"; other types: NULL. */
    const char *unit;
    /** INT, SIZE, DURATION: the accepted range, bounds included (SIZE in bytes, DURATION in
     *  the base unit). min == max == 0: no range beyond the type's own (INT: all of int64_t;
     *  SIZE, DURATION: 0..INT64_MAX). Other types: 0. */
    int64_t min;
    int64_t max;
    /** ENUM: the choices, a NULL-terminated array of non-empty strings; other types: NULL. */
    const char *const *choices;
    const void *reserved[4]; /* zero */
};

/**
 * The value of one option as the core hands it to create_engine (struct ixl_engine_init's
 * values): the user's value, else the default, parsed once. Same layout rule as ixl_option
 * (arrays: frozen; the reserved slots are zero).
 */
struct ixl_opt_value {
    /** BOOL: 0 or 1; INT: the value; ENUM: the index of the choice in choices; SIZE and
     *  DURATION: the same number as u (their range ends at INT64_MAX). STRING: 0. */
    int64_t i;
    /** SIZE: bytes; DURATION: in the option's base unit; BOOL, ENUM, and INT when not
     *  negative: the same number as i; a negative INT: 0. STRING: 0. */
    uint64_t u;
    /** The normalized text (see enum ixl_opt_type), as ixl_backend_params reports it. */
    const char *str;
    uint64_t reserved[2]; /* zero */
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

/** A cost estimate; size first (see the growth rule at the top). */
struct ixl_cost {
    uint32_t size; /* set by the caller to sizeof(struct ixl_cost) */
    uint64_t duration_us;
    uint64_t error_margin_us;
    enum ixl_cost_method method;
};
#ifdef __cplusplus
}
#endif

#endif /* IXL_IXL_TYPES_H */

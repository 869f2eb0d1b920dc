/* State shared by the agent's parts: remotes, prepared lists, requests. */
#ifndef IXL_CORE_INTERNAL_H
#define IXL_CORE_INTERNAL_H

#include <stdatomic.h>

#include "../../plugins/common/ixl_name_index.h"
#include "core/agent.h"
#include "core/dlist.h"
#include "core/registry.h"
#include "util/err.h"

/* A loaded remote agent. The table holds one reference; each prepared list and request made
 * for it holds one more, so its regions' metadata stays loaded until the last of them is gone
 * even after the remote was invalidated or replaced by a restarted instance. */
struct remote {
    struct ixl_agent *agent;
    char name[IXL_NAME_MAX];
    uint64_t incarnation;
    _Atomic int refs;
    _Atomic int valid;  /* 0 once invalidated or replaced: its requests fail with STALE */
    uint32_t conn_mask; /* backend slots whose connection info was loaded */
    struct ixl_registry *regs;
    struct remote *all_prev, *all_next; /* in the table's list of every live remote */
};

struct ixl_remote_table {
    struct remote **v;
    size_t n, cap;
    struct ixlp_name_index idx; /* v by name (ixl_remote_find; plugins/common/ixl_name_index.h) */
    /* Every remote struct not yet freed: the loaded ones and those retired but still held by
     * a prepared list or request. Linked and unlinked with agent->lock held for writing. */
    struct remote *all;
};

/* The most descriptors one request may have before merging. */
#define IXL_XFER_MAX_DESCS ((uint64_t)1 << 32)

/* Finds a valid remote by name (agent->lock held). */
struct remote *ixl_remote_find(struct ixl_agent *agent, const char *name);
/* The same, or NULL with the "metadata for remote agent 'X' not found" error recorded. */
struct remote *ixl_remote_require(struct ixl_agent *agent, const char *name);
void ixl_remote_get(struct remote *r);
/* Invalidates remote if it is loaded with exactly this incarnation: IXL_OK, or
 * IXL_ERR_NOT_FOUND (no error text recorded); IXL_ERR_INVALID_ARG for incarnation 0, which is
 * never a wildcard (the application drops a name whatever is loaded with
 * ixl_remote_invalidate). Takes agent->lock. */
int ixl_remote_invalidate_inc(struct ixl_agent *agent, const char *remote, uint64_t incarnation);
/* ixl_md_load, and with expect, only metadata describing the agent of that name (a peer
 * replaces only its own metadata: IXL_ERR_AUTH otherwise). */
int ixl_md_load_as(struct ixl_agent *agent, const void *blob, size_t len, const char *expect,
                   char *name_out, size_t name_cap);
/* How far ahead of this host's clock a loaded incarnation's start time may be (seconds). */
#define IXL_MD_INC_FUTURE_S 600
/* Drops a reference; the last one unloads the remote's metadata. locked: the caller holds
 * agent->lock for writing. */
void ixl_remote_put(struct remote *r, int locked);

/* One segment of a prepared run: elements [first, first + count) of the run lie in region
 * reg, whose metadata for the backend is md. */
struct prep_seg {
    uint64_t first, count;
    struct ixl_md *md;
    struct region *reg;
};

struct prep_backend {
    size_t *seg_start;    /* n_runs + 1 offsets into segs */
    uint64_t *seg_step;   /* per run: the count of each of its segments when all but the last
                             have the same (a run across equal regions), else 0 */
    uint64_t *seg_step_m; /* per run: ixl_udiv_magic of seg_step when > 1; NULL when every
                             seg_step is 0 */
    struct prep_seg *segs;
    size_t n_segs;
};

struct ixl_prep {
    struct ixl_agent *agent;
    int initiator;          /* 1: the initiator's local side; 0: a target side */
    int loopback;           /* target side on this agent itself */
    struct remote *remote;  /* target side of another agent (holds a reference) */
    struct ixl_dlist *list; /* the user's runs, consecutive progressions merged */
    uint64_t uniform;       /* every run's count when they all have the same, else 0 */
    uint64_t uniform_m;     /* ixl_udiv_magic(uniform) when uniform > 1 */
    uint32_t valid_mask;    /* backends that can serve every descriptor */
    struct prep_backend per[IXL_MAX_BACKENDS];
    struct region **regions; /* local regions used (each holds one "users" count) */
    size_t n_regions;
    int counted;          /* the users counts were taken */
    struct ixl_node node; /* in the agent's list of live prepared lists */
};

enum xfer_state { XFER_IDLE, XFER_INFLIGHT, XFER_DONE, XFER_ERROR };

struct ixl_xfer {
    /* One thread posts a request, but others may ask its status or wait on it at the same
     * time (the API contract): post, status, set_notif and telemetry hold this lock. */
    pthread_mutex_t lock;
    struct ixl_agent *agent;
    struct ixl_backend *backend;
    enum ixl_op op;
    struct remote *remote; /* NULL for loopback */
    struct ixl_xfer_desc *ldesc, *rdesc;
    size_t n;
    struct ixl_xfer_side lside, rside;
    struct ixl_req *req;
    enum xfer_state state;
    int status;    /* the last error */
    int canceling; /* release failed once: the request is being canceled */
    void *notif;
    size_t notif_len;
    struct region **regions;
    size_t n_regions;
    uint64_t bytes;
    /* Ticks (util/time.h): post's start (its end, without telemetry, for a request left in
     * flight), post's length, post to end. */
    uint64_t post_start, post_ticks, xfer_ticks, post_count, done_count;
    char path[32];
    int path_stale;       /* a completion since path was read (ixl_xfer_info reads it again) */
    struct ixl_node node; /* in the agent's list of live requests */
};

/* The agent's lists of live objects (for destroy), under agent->objs_lock. */
void ixl_agent_track_xfer(struct ixl_agent *agent, struct ixl_xfer *x);
void ixl_agent_untrack_xfer(struct ixl_agent *agent, struct ixl_xfer *x);
void ixl_agent_track_prep(struct ixl_agent *agent, struct ixl_prep *p);
void ixl_agent_untrack_prep(struct ixl_agent *agent, struct ixl_prep *p);

/* Forgets a request whose backend could not release it (agent destroy only). */
void ixl_xfer_abandon(struct ixl_xfer *x);

/* ixl_backend_destroy's parts (agent->lock held for writing, the backend idle): drop backend
 * slot b's share of every local region (a region left with no backend is deregistered;
 * IXL_ERR_BUSY without changing anything when such a region is still in use), and of every
 * remote's regions and connection info. */
int ixl_mem_drop_backend(struct ixl_agent *agent, unsigned b);
void ixl_remotes_drop_backend(struct ixl_agent *agent, unsigned b);

/* Releases local region references taken by a prepared list or request. */
void ixl_regions_unuse(struct region **v, size_t n);

/* Teardown helpers called by ixl_agent_hooks_fini(). */
void ixl_desc_pool_fini(struct ixl_agent *agent);
void ixl_remotes_fini(struct ixl_agent *agent);
void ixl_mem_fini(struct ixl_agent *agent);

#endif

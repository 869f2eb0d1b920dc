/*
 * The agent's internal state. Lock order (take left before right, never the reverse):
 *
 *   agent->notif_lock  ->  agent->calls_lock  ->  agent->lock (rwlock: registry, remotes,
 *                                                               backends list)
 *   agent->lock  ->  agent->pool_lock, agent->objs_lock
 *   xfer->lock  ->  (backend calls only; never an agent lock)
 *
 * Requests (struct ixl_xfer) are not protected by agent->lock once created: one thread posts
 * a request while others may ask its status (xfer->lock); what requests share with the agent
 * (regions, remotes) is reference counted.
 */
#ifndef IXL_CORE_AGENT_H
#define IXL_CORE_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <ixl/ixl.h>
#include <ixl/ixl_plugin.h>

#include "plugin/manager.h"
#include "util/auth.h"

/* Backends per agent: a small fixed cap keeps per-region metadata an array indexed by
 * backend slot instead of a map. */
#define IXL_MAX_BACKENDS 16

struct ixl_backend {
    struct ixl_agent *agent;
    const struct ixl_plugin *plugin;
    struct ixl_engine *engine;
    unsigned slot; /* index in agent->backends */
    uint32_t caps;
    uint32_t mem_mask;
    char mem_why[512];            /* the engine's mem_why, copied at creation ("" if none) */
    struct ixl_kv *params;        /* effective options: every option of the plugin, normalized */
    struct ixl_opt_value *values; /* the same, typed (values[i].str is params[i].value) */
    size_t n_params;
    const void *conn_info; /* borrowed from the engine (REMOTE only) */
    size_t conn_len;
    struct ixl_host host;
};

struct ixl_registry;
struct ixl_remote_table;
struct ixl_xfer;
struct ixl_prep;
struct desc_block;

/* A link in one of the agent's lists of live objects. */
struct ixl_node {
    struct ixl_node *next, *prev;
    void *owner;
};

struct ixl_alloc {
    void *addr;
    size_t len;
    struct ixl_backend *backend;
};

/* Stripes of the request counters: the first IXL_STAT_ALONE threads that count get one each,
 * for themselves alone; later threads share the rest, in turn. */
#define IXL_STAT_STRIPES 64
#define IXL_STAT_ALONE 48

struct ixl_agent {
    uint64_t id;          /* unique in the process: keys the thread-local error slots */
    uint64_t incarnation; /* random per instance: tells a restarted agent from its old self */
    char name[IXL_NAME_MAX];
    struct ixl_agent_params params; /* with every field filled */
    char listen_addr[64];

    pthread_rwlock_t lock;
    /* Indexed by slot; NULL where a backend was destroyed (ixl_backend_create reuses the
     * lowest free slot). n_backends: one past the highest slot in use. */
    struct ixl_backend *backends[IXL_MAX_BACKENDS];
    unsigned n_backends;
    /* Held for reading around calls into backends made without agent->lock (progress,
     * notifications), for writing by ixl_backend_destroy while it takes a backend out, so no
     * such call is inside an engine being destroyed. Writers first. */
    pthread_rwlock_t calls_lock;
    struct ixl_registry *registry;    /* local regions (src/core/registry.c) */
    uint64_t next_dev;                /* next dev id for a path-mode FILE region (lock held) */
    struct ixl_remote_table *remotes; /* loaded remote agents (src/core/remote.c) */

    /* Waking waiters, without a lock (src/core/agent.c, "waking"): signal() bumps wake_seq
     * and, only when a thread sleeps on it (wake_sleepers > 0), wakes them with one futex
     * call; it writes event_fd for poll()ing applications only when fd_armed was 0 (the fd
     * was drained since the last write). */
    _Atomic uint32_t wake_seq;
    _Atomic uint32_t wake_sleepers;
    _Atomic uint32_t wake_spinners;
    /* post -> done of a recent request (ns): ixl_xfer_wait spins only when that is short. */
    _Atomic uint64_t recent_done_ns;
    _Atomic int fd_armed;
    int event_fd;

    /* Serializes draining notifications, so entries keep their arrival order. */
    pthread_mutex_t notif_lock;

    /* Live requests and prepared lists, released by destroy if the user did not. */
    pthread_mutex_t objs_lock;
    struct ixl_node *xfers;
    struct ixl_node *preps;

    /* Descriptor arrays of released requests, for reuse (src/core/xfer.c). */
#define IXL_DESC_POOL 4
    pthread_mutex_t pool_lock;
    struct desc_block *desc_pool[IXL_DESC_POOL];

    /* Memory from ixl_mem_alloc(), under lock. */
    struct ixl_alloc *allocs;
    size_t n_allocs, cap_allocs;

    /* The optional progress thread. */
    pthread_t progress_thread;
    bool progress_running;
    pthread_mutex_t progress_lock;
    pthread_cond_t progress_cond;
    bool progress_stop;

    /* Metadata exchange (src/meta/exchange.c; which implementation serves a call is its own
     * choice, src/meta/mdx.h). */
    struct ixl_mdx *mdx;

    /* Trust: the cluster key and the mode, fixed at creation (src/util/auth.h). */
    struct ixl_auth auth;

    /* Request counters, striped: each thread adds to its own stripe (ixl_agent_stripe), so
     * threads posting on one agent write no shared line per request; ixl_agent_stats sums.
     * The padding keeps two stripes' counters 96 bytes apart, off any common cache line
     * whatever the agent's alignment (calloc's). A stripe of one thread alone is added to
     * without a locked instruction (ixl_stat_add). */
    struct ixl_stat_stripe {
        uint64_t pad0[8];
        _Atomic uint64_t posted, completed, failed, bytes;
        uint64_t pad1[4];
    } st[IXL_STAT_STRIPES];
    _Atomic uint64_t st_notifs_rx, st_notifs_tx;
};

/* This thread's stripe of the request counters; *alone: no other thread adds to it. */
struct ixl_stat_stripe *ixl_agent_stripe(struct ixl_agent *agent, int *alone);

/* Adds v to counter c of this thread's stripe. Alone, a load and a store (release: a reader
 * that sees an end's count sees its post's, as ixl_agent_stats relies on): a locked add is a
 * full barrier on x86, which after a small copy waited for its stores to drain. */
static inline void ixl_stat_add(_Atomic uint64_t *c, uint64_t v, int alone)
{
    if (alone)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                              memory_order_release);
    else
        atomic_fetch_add_explicit(c, v, memory_order_release);
}

/* Convenience for API functions: clear the thread's error text for this agent, record one. */
#define IXL_AGENT_ERR(agent, status, ...) ixl_err_set((agent)->id, (status), __VA_ARGS__)
#define IXL_AGENT_QUIET(agent, status, ...) ixl_err_quiet((agent)->id, (status), __VA_ARGS__)

/* Wakes waiters of the agent (the host's signal callback). */
void ixl_agent_wake(struct ixl_agent *agent);
/* Waits until the wake sequence moves past seq or timeout_ms passes (<0: forever); a wake
 * that came after seq was read is never missed. */
void ixl_agent_wait_wake(struct ixl_agent *agent, uint32_t seq, int timeout_ms);
/* The wake sequence: read it before checking what a wake would change. */
static inline uint32_t ixl_agent_wake_seq(struct ixl_agent *agent)
{
    return atomic_load(&agent->wake_seq);
}
/* Spins (briefly, one thread per agent at a time) until the wake sequence moves past seq:
 * 1 if it did, 0 when the spin gave up (the caller then sleeps in ixl_agent_wait_wake).
 * drive: NULL, or a backend whose progress() is called every few dozen turns. */
int ixl_agent_spin_wake(struct ixl_agent *agent, uint32_t seq, uint64_t spin_ns,
                        struct ixl_backend *drive);

/* Calls progress() on every backend that has it (under agent->calls_lock, not agent->lock). */
void ixl_agent_progress_backends(struct ixl_agent *agent);

/* Backend lookups under agent->lock (read). */
struct ixl_backend *ixl_agent_backend_by_name(struct ixl_agent *agent, const char *name);

/* The metadata exchange (src/meta/exchange.c): started after the backends at creation with
 * the implementations the params configure, stopped first at destroy. */
int ixl_mdx_start(struct ixl_agent *agent, const struct ixl_agent_params *params);
void ixl_mdx_stop(struct ixl_agent *agent);
/* Forgets the outcome of the last fetch of remote (its invalidation): ixl_md_fetch_status. */
void ixl_mdx_fetch_forget(struct ixl_agent *agent, const char *remote);

#endif

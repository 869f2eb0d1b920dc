/*
 * NET: ixl's built-in network backend. DRAM within an agent (memcpy), between agents on one
 * machine (the peer's memory mapped when it lives in memory ixl allocated; cross-memory attach
 * otherwise), and between machines (TCP). See README.md.
 *
 * Threads of an engine: an acceptor; one server thread per incoming connection (the target side,
 * serving with no call from its user, as a NIC would); per outgoing connection a sender and a
 * receiver; copy workers for the same-node paths; a watchdog that fails connections silent for
 * longer than timeout_ms while they have work outstanding.
 *
 * Lock order: e->lock (peers, allocations) -> peer->lock -> conn->send_lock;
 * peer->lock -> e->reqs_lock -> e->work_lock (completion queues a notification);
 * e->regions_lock and
 * e->notif_lock are leaves.
 */
#ifndef IXL_NET_H
#define IXL_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "net_wire.h"

/* The host's table of allocation and system calls (ixl_host.sys): one per process, so every
 * create_engine stores the same pointer; every call of the plugin goes through it so tests can
 * refuse it. */
extern const struct ixl_sys *net_sys_ptr;
static inline const struct ixl_sys *net_sys(void)
{
    return __atomic_load_n(&net_sys_ptr, __ATOMIC_RELAXED);
}
/* Stores init's table; IXL_ERR_PLUGIN (explained) if the host has none. */
int net_sys_set(const struct ixl_engine_init *init);

enum net_path { NET_PATH_AUTO, NET_PATH_SHM, NET_PATH_CMA, NET_PATH_TCP, NET_PATH_LOCAL };

#define NET_MAX_ADDRS 8
#define NET_PUB_BYTES 48
#define NET_MAX_CONNS 16

/* A registered local region (register_mem), also the target-side record for TCP checks. */
struct net_region {
    uint32_t magic;
    uint64_t addr, len, key;
    int memfd;          /* >= 0 when the region lies in memory NET allocated */
    uint64_t memfd_off; /* the region's offset in that memfd */
    uint64_t memfd_size;
    struct net_region *hnext;   /* key hash chain */
    uint8_t pub[NET_PUB_BYTES]; /* public data, built at registration */
};

/* A remote region (load_remote_md) or a local one seen as a target (load_local_md). */
struct net_rmd {
    uint32_t magic;
    uint64_t addr, len, key;
    int memfd; /* the owner's fd number, -1 if none */
    uint64_t memfd_off, memfd_size;
    struct net_peer *peer;    /* NULL for load_local_md */
    struct net_region *local; /* load_local_md: the region itself */
    /* Lazily mapped view of the owner's memfd (same-node peers). */
    pthread_mutex_t map_lock;
    int map_tried;
    void *map; /* the mapping, and where the region starts in it */
    size_t map_len, map_off;
};

struct net_engine;
struct net_req;

/* A unit of work: one TCP frame of a posted request, or (copy workers) a whole same-node or
 * loopback request, or the notification of a finished request. */
enum net_item_kind { NI_FRAME, NI_COPY, NI_NOTIF };
struct net_item {
    uint64_t serial;
    uint32_t chunk;
    uint8_t kind;
};

struct net_conn {
    struct net_peer *peer;
    int fd;
    int index;
    pthread_t sender, receiver;
    bool threads;
    pthread_mutex_t send_lock; /* the sender thread and NOTIF frames share the socket */
    _Atomic int dead;
    _Atomic uint64_t last_rx_ns, last_tx_ns;
    _Atomic uint64_t outstanding; /* frames sent and not answered */
    int users; /* threads outside the sender/receiver using it (notifications), under p->lock */
};

struct net_peer {
    struct net_engine *e;
    char name[256];
    uint64_t instance;
    uint32_t pid;
    bool same_host, peer_allows_local;
    uint64_t probe_addr;
    uint16_t port;
    uint32_t addrs[NET_MAX_ADDRS];
    int n_addrs;
    size_t notif_max; /* the largest notification it accepts */
    int cma;          /* -1 unknown, 0 refused, 1 works (probed once) */
    int pidfd;        /* the peer process, for liveness before cross-memory attach; -1 if none */

    pthread_mutex_t lock;
    pthread_cond_t cond; /* queue has items, or the connection set changed */
    struct net_item *q;  /* ring of pending items */
    size_t q_head, q_len, q_cap;
    struct net_conn *conns[NET_MAX_CONNS];
    int n_conns;
    struct net_conn **grave; /* torn-down connections whose threads are not joined yet */
    int n_grave, cap_grave;
    int connecting;
    int closing;  /* engine destroy or disconnect: threads exit */
    uint64_t gen; /* bumps when the connections are torn down */
    int refs;     /* rmds that point at this peer */
    bool loaded;  /* conn info present (not disconnected by the core) */
    struct net_peer *next;
};

enum net_req_state { NR_IDLE, NR_RUNNING, NR_DONE, NR_ERROR };

struct net_chunk {
    uint64_t laddr, raddr, len, key;
};

struct net_req {
    struct net_engine *e;
    enum ixl_op op;
    enum net_path path;
    struct net_peer *peer; /* NULL for loopback */
    const struct ixl_xfer_desc *ld, *rd;
    size_t n;
    struct net_chunk *chunks; /* TCP: descriptors split at the chunk size */
    uint32_t n_chunks;
    void *notif;
    size_t notif_len;
    uint64_t bytes;    /* total of the descriptors */
    uint64_t instance; /* the peer instance the request was posted to */
    uint8_t *answered; /* TCP: per frame, answered in this post */
    uint64_t gen;      /* TCP: the peer's connection generation this post went to */

    /* Per post, under e->reqs_lock. */
    uint64_t serial; /* 0 when not registered in the table */
    enum net_req_state state;
    int status;
    uint64_t pending;
    int busy; /* threads copying into/out of the user's buffers right now */
    bool canceled;
    struct net_req *tnext;         /* serial hash chain */
    struct net_req *anext, *aprev; /* every request of the engine, for destroy */
};

struct net_notif {
    char *agent;
    void *msg;
    size_t len;
    struct net_notif *next;
};

struct net_alloc {
    void *addr;
    size_t len;
    int fd;
    struct net_alloc *next;
};

struct net_server_conn {
    struct net_engine *e;
    int fd;
    pthread_t thread;
    char peer_name[256];
    struct net_server_conn *next;
    _Atomic int done;
};

struct net_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    char name[256];
    uint64_t instance;
    size_t notif_max;

    /* options */
    enum net_path force_path;
    bool local_paths;
    int n_conns;
    uint64_t chunk;
    uint64_t timeout_ns, heartbeat_ns;
    bool hugepages;
    int copy_threads;
    char listen_addr[64];
    uint16_t port;
    uint32_t adv_addrs[NET_MAX_ADDRS];
    int n_adv_addrs;

    /* identity and conn info */
    uint8_t host_id[24]; /* boot id + pid namespace: "same kernel, same pids" */
    uint8_t conn_info[256];
    size_t conn_len;
    volatile uint64_t probe; /* peers read it with process_vm_readv to test CMA */

    int listen_fd;
    pthread_t acceptor, watchdog;
    bool acceptor_started, watchdog_started;
    _Atomic int stopping;

    pthread_mutex_t lock; /* peers, allocations, server connections */
    struct net_peer *peers;
    struct net_alloc *allocs;
    struct net_server_conn *servers;

    pthread_rwlock_t regions_lock; /* key -> region, for TCP checks */
    struct net_region **rtab;
    size_t rtab_cap, n_regions;

    pthread_mutex_t reqs_lock; /* serial -> request */
    pthread_cond_t reqs_cond;  /* busy dropped */
    struct net_req **qtab;
    size_t qtab_cap;
    uint64_t next_serial;
    struct net_req *all_reqs; /* requests not released (destroy frees what is left) */

    pthread_mutex_t notif_lock;
    struct net_notif *notif_head, *notif_tail;

    /* copy workers for same-node and loopback transfers */
    pthread_mutex_t work_lock;
    pthread_cond_t work_cond;
    struct net_item *work;
    size_t work_head, work_len, work_cap;
    pthread_t workers[8];
    int n_workers;
};

#define NET_REGION_MAGIC 0x4e524547u
#define NET_RMD_MAGIC 0x4e524d44u

/* net_engine.c */
int net_error(struct net_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t net_now_ns(void);
struct net_region *net_region_find(struct net_engine *e, uint64_t key); /* regions_lock held */
int net_notif_push(struct net_engine *e, const char *agent, const void *msg, size_t len);

/* net_tcp.c */
int net_listen_start(struct net_engine *e);
void net_listen_stop(struct net_engine *e);
int net_peer_connect(struct net_peer *p);               /* makes sure p has its connections */
void net_peer_teardown(struct net_peer *p, int status); /* closes connections, fails work */
int net_peer_enqueue(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t n);
int net_send_notif(struct net_peer *p, const void *msg, size_t len);
void net_serve_fd(struct net_engine *e, int fd); /* a server connection, on this thread */
void *net_watchdog_main(void *arg);

/* net_xfer.c */
int net_workers_start(struct net_engine *e);
void net_workers_stop(struct net_engine *e);
/* Request table: lookup takes a "busy" reference the caller drops with net_req_unbusy(). */
struct net_req *net_req_get_busy(struct net_engine *e, uint64_t serial);
void net_req_unbusy(struct net_engine *e, struct net_req *r);
/* One frame of request serial finished with status; completes the request when it was the
 * last. */
void net_req_chunk_done(struct net_engine *e, uint64_t serial, int status);
/* Fails p's TCP requests sent on connections of generation torn or older. */
void net_fail_peer_reqs(struct net_engine *e, struct net_peer *p, int status, uint64_t torn);
void *net_rmd_map(struct net_rmd *m);       /* same-node mapping of a remote region, or NULL */
int net_peer_alive(struct net_peer *p);     /* 0 once the peer's process is known to be gone */
int net_peer_same(const struct net_req *r); /* the peer is still the instance posted to */
/* Matches an answer from peer p with its frame: 1 (marked answered), 0 (no live request:
 * drain it), -1 (a protocol error). */
int net_req_answer(struct net_engine *e, struct net_peer *p, const struct net_hdr *h);

/* The request methods of the ops table (net_xfer.c). */
int net_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                  const struct ixl_xfer_side *remote, const char *remote_agent,
                  const struct ixl_xfer_opts *opts, struct ixl_req **out);
int net_post_xfer(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts);
int net_check_xfer(struct ixl_engine *base, struct ixl_req *req);
int net_release_req(struct ixl_engine *base, struct ixl_req *req);
int net_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out);
int net_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out);
void net_peer_bury(struct net_peer *p);       /* joins torn-down connections' threads */
void net_reqs_free_all(struct net_engine *e); /* destroy: requests whose release failed */

#endif

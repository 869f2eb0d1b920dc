/*
 * NET: ixl's built-in network backend. DRAM within an agent (memcpy), between agents on one
 * machine (the peer's memory mapped when it lives in memory ixl allocated; cross-memory attach
 * otherwise), and between machines (TCP); VRAM within an agent through the core's device
 * layer (host->dev). See README.md.
 *
 * Files, each owning one thing; calls go one way, downwards:
 *   net_engine.c  the ops table: options, identity and connection info, peers, notifications,
 *                 create/destroy; orchestrates deregistration (region table + event loops)
 *   net_xfer.c    requests: path choice, prep/post/check/release, same-node copy workers
 *   net_loop.c    the event loops: connections (dialing, HELLO, frames in and out), the
 *                 listener, per-peer send queues, timers (liveness, idle, deadlines)
 *   net_req.c     the request table and completion (state, parts, failure of a generation)
 *   net_region.c  registered regions (key table, public data), remote regions, allocation
 *   net_dev.c     VRAM: classification at registration, device copies on streams, events and
 *                 the completion thread
 *   net_ipc.c     VRAM between agents of one node: CUDA IPC handles asked over the same-node
 *                 channel, opened once per peer instance and allocation, closed when it goes
 *   net_wire.c    the wire format
 *   net_local.c   the same-node channel: a Unix socket per engine through which the kernel
 *                 says who a same-node peer is (SO_PEERCRED), the peer proves its pid and
 *                 confirms its regions, and hands over its memfds (SCM_RIGHTS)
 *
 * Threads of an engine: io_threads event loops (epoll) that own every socket: each connection
 * belongs to one loop for its life and only that loop closes it (a poster may send a frame
 * between whole frames under its send lock, a waiting or polling caller may read a WRITE_ACK
 * under its receive lock: README.md, issue 18), so threads
 * and memory do not grow with the number of peers; copy_threads workers for the same-node
 * paths. Posting never blocks on a peer: frames wait in the peer's bounded queue (queue_max)
 * while the loops dial.
 *
 * Lock order: e->lock (peers, allocations, accepted names) -> p->lock -> e->reqs_lock ->
 * loop->lock; e->lock -> e->nsess_lock -> e->notif_lock (a notification is checked against its
 * session and queued in one step); e->regions_lock, e->notif_lock, e->work_lock and
 * e->msg_lock are leaves (p->lock -> e->msg_lock: the unacked store's references); a device
 * stream's lock -> its queue lock (net_dev.c), taken with no other NET lock held. No
 * lock is held across a blocking system call: sockets are non-blocking, and a frame that touches
 * user or registered memory holds a reference (request busy count, region inflight count)
 * instead of a lock while it waits for the peer.
 */
#ifndef IXL_NET_H
#define IXL_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "../common/ixl_name_index.h"
#include "../common/ixl_pool.h"
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
#define NET_MAX_LOOPS 64
#define NET_WHY 600 /* bytes of a request's error text */
/* A receiver acknowledges notifications after NET_ACK_EVERY of them, or NET_ACK_DELAY_NS
 * after the first one not acknowledged (unless an answer carries the ack sooner). */
#define NET_ACK_EVERY 32
#define NET_ACK_DELAY_NS 20000000u
#define NET_IDLE_NAMES 1024 /* notification sessions kept for names with no connection */

/* A registered local region (register_mem), also the target-side record for TCP checks. */
struct net_region {
    uint32_t magic;
    uint64_t addr, len, key;
    int memfd;          /* >= 0 when the region lies in memory NET allocated */
    uint64_t memfd_off; /* the region's offset in that memfd */
    uint64_t memfd_size;
    struct net_region *hnext;   /* key hash chain */
    uint8_t pub[NET_PUB_BYTES]; /* public data, built at registration */
    /* READ answers queued on connections that point into the region (taken under
     * regions_lock read, so a deregistration that removed the region sees every one). */
    _Atomic uint32_t inflight;
    _Atomic int cut; /* deregistration gave up waiting: connections holding it are closed */
    /* VRAM (net_dev.c): device memory of GPU dev, classified through the device layer at
     * registration (the allocation's base and buffer id kept). Never in the key table, so no
     * frame, cma confirmation or memfd request of a peer ever finds it. */
    bool vram;
    int dev;
    uint64_t dev_base, dev_buffer;
    struct net_region *vnext; /* e->vram_regions (the same-node channel's VRAM lookup) */
};

/* A remote region (load_remote_md) or a local one seen as a target (load_local_md). */
struct net_rmd {
    uint32_t magic;
    uint64_t addr, len, key;
    int memfd; /* the owner's fd number, -1 if none */
    uint64_t memfd_off, memfd_size;
    struct net_peer *peer;    /* NULL for load_local_md */
    struct net_region *local; /* load_local_md: the region itself */
    /* Lazily mapped view of the owner's memfd (same-node peers), passed by the verified peer
     * over the same-node channel (net_local.c). */
    pthread_mutex_t map_lock;
    atomic_int map_tried;  /* set once (release), after map, map_len, map_off, map_instance:
                              those then stay until unload, and are read without map_lock */
    uint64_t map_instance; /* the peer instance that handed the memfd over */
    /* cma: the verified peer confirmed the region (1), denied it (-1), not asked yet (0);
     * for peer instance confirmed_instance. Under the peer's lock. */
    int confirmed;
    uint64_t confirmed_instance;
    void *map; /* the mapping, and where the region starts in it */
    size_t map_len, map_off;
    bool vram; /* a VRAM region (a peer's, or local->vram): only net_dev.c moves it */
    int dev;   /* its GPU (local VRAM regions) */
};

struct net_engine;
struct net_req;
struct net_loop;
struct net_item;
struct net_dwait;

/* A ring of queued items (a peer's queues). */
struct net_ring {
    struct net_item *v;
    size_t head, len, cap;
};

/* A notification's bytes. One of gen_notif (the caller waits for its verdict) or a copy of a
 * request's, made when it gets its sequence number; from then on it is kept in its peer's
 * unacknowledged store until the peer acknowledges it (net_loop.c, "acknowledged delivery"). */
struct net_msg {
    int refs;   /* the caller, the queue, the unacked store, frames carrying it (e->msg_lock) */
    int status; /* IXL_IN_PROGRESS until sequenced (IXL_OK) or failed */
    char why[NET_WHY];
    uint64_t seq; /* its sequence number to the peer, 0 before */
    size_t len;
    uint8_t bytes[];
};

/* A unit of work: one TCP frame of a posted request or the notification of a finished one
 * (a peer's send queue), or a same-node copy (the copy workers' queue). */
enum net_item_kind { NI_FRAME, NI_COPY, NI_NOTIF, NI_MSG, NI_DEVPOST };
struct net_item {
    uint64_t serial;
    struct net_msg *msg; /* NI_MSG */
    uint32_t chunk;
    uint32_t len; /* NI_FRAME on a peer's queue: the bytes it moves (sent, or answered) */
    uint8_t kind;
};

/* A frame being sent on a connection: header, then data that stays where it is (user memory
 * under a request's busy reference, registered memory under a region's inflight count, a
 * request's or message's notification). */
struct net_txf {
    uint8_t hdr[NET_HDR_BYTES];
    const void *data;
    size_t len;
    struct net_req *busy;      /* a busy reference taken for this frame */
    struct net_region *region; /* inflight reference (a READ answer) */
    struct net_msg *msg;       /* reference (NI_MSG) */
    uint64_t notif_serial;     /* a request's notification: its serial */
    uint8_t counts;            /* an answer is owed for it (WRITE, READ) */
    /* Staged VRAM (net_stage.c): a target's answer waits for its device copy (gate); an
     * initiator's WRITE frame sends from the slot of chunk stage_k - 1 (0: none). */
    struct net_sgate *gate;
    uint32_t stage_k;
};

enum net_conn_kind { NC_OUT, NC_IN };
/* NCS_AUTH: an accepted connection that was sent the CHALLENGE and owes its AUTH. */
enum net_conn_state { NCS_DIAL, NCS_HELLO, NCS_AUTH, NCS_UP };

/* One TCP connection, owned by one event loop (its thread alone touches the socket and the
 * rx/tx state); others reach it only through its peer under p->lock (doomed, ready). */
struct net_conn {
    struct net_engine *e;
    struct net_loop *loop;
    struct net_peer *peer; /* NC_OUT */
    enum net_conn_kind kind;
    enum net_conn_state state;
    int fd;
    /* The loop's own flags (kept apart from the fields other threads write). */
    bool closed;     /* closed, freed after the current batch of events */
    bool linger;     /* NC_IN: close once the queued answers are sent */
    bool reading;    /* EPOLLIN is on */
    bool adopted;    /* taken from the inbox (in the loop's list) */
    uint32_t events; /* the epoll mask set */
    uint64_t gen;    /* NC_OUT: the peer's generation it was dialed in */
    int index;       /* NC_OUT: its index among the peer's connections */
    /* dialing */
    uint32_t addrs[NET_MAX_ADDRS];
    int n_addrs, addr_at;
    uint16_t port;
    uint64_t to_instance;
    uint64_t deadline; /* dial and HELLO, or the HELLO an accepted connection owes */
    char cause[200];   /* the system call that failed last, for the error text */
    /* liveness (loop thread) */
    uint64_t last_rx, last_tx, last_frame;
    uint64_t outstanding; /* NC_OUT: frames sent and not answered */
    /* NC_OUT: bytes those frames move (an estimate: each answer takes back the average; none
     * owed when no answer is), bounded by PULL_WINDOW when it takes from its peer's queue. */
    uint64_t owed_bytes;
    /* tx: frames [tx_head, tx_n) of tx, tx_off bytes of the first already sent */
    struct net_txf *tx;
    uint32_t tx_head, tx_n, tx_cap;
    size_t tx_off;
    /* rx: a header being assembled, then the body of the frame h */
    uint8_t hbuf[NET_HDR_BYTES];
    uint32_t hgot;
    bool in_body;
    struct net_hdr h;
    uint64_t body_off;
    int body_mode;
    int32_t answer; /* NC_IN WRITE: the status its ack carries */
    /* NC_IN: a WRITE whose range overlaps READ answers not sent yet waits for them (a READ
     * answers with the bytes as they were when it arrived); the input read after its header
     * waits in stash meanwhile. */
    bool held;
    uint8_t *stash;
    size_t stash_len;
    uint8_t *buf; /* HELLO and NOTIF bodies */
    /* Authentication (with a cluster key): the nonces of both sides, the CHALLENGE or AUTH
     * being sent (out) and the one received (in); the initiator's instance (NC_IN). */
    uint8_t nonce_i[NET_NONCE_BYTES], nonce_t[NET_NONCE_BYTES];
    uint8_t auth_out[NET_CHALLENGE_BYTES], auth_in[NET_CHALLENGE_BYTES];
    bool challenged; /* NC_OUT: the target proved the key */
    uint64_t from_instance;
    uint64_t in_gen;           /* NC_IN: the initiator's connection generation (HELLO) */
    struct net_inname *inname; /* NC_IN while named: its name's record */
    /* NC_IN: stopped at a NOTIF header while the queue of received notifications is full
     * (the header waits in h, the input read after it in stash); the initiator was sent
     * HOLD, again every heartbeat. NC_OUT: the target said HOLD: nothing new is pulled onto
     * this connection and its silence is not counted until it reads again. */
    bool paused;
    bool peer_hold;
    /* NC_IN: a frame to or from VRAM waits at its header for a pinned slot (stage_wait); the
     * slot a staged WRITE body is received into (stage_slot). */
    bool stage_wait;
    struct net_slot *stage_slot;
    uint64_t last_hold;
    /* NC_IN */
    char name[256]; /* the HELLO's name */
    bool named;     /* counted against peer_conns */
    /* NC_IN, acknowledged notifications: the HELLO's notif_acked; ack_val, the cumulative
     * ack to send (the session's delivered count); ack_owed: not sent yet (it rides on the
     * next answer, or a NOTIF_ACK after NET_ACK_EVERY notifications or NET_ACK_DELAY_NS). */
    uint64_t hello_acked, ack_val;
    bool ack_owed;
    uint32_t since_ack;
    /* NC_OUT: the peer's unacknowledged notifications may ride on c (its silence counts);
     * notifications were sequenced during this flush: wake their senders after it (threads
     * in ixl_notif_send: wake_msgs; requests: wake_reqs) */
    bool nowed, wake_msgs, wake_reqs;
    /* cross-thread (under p->lock or loop->lock) */
    _Atomic int doomed;
    bool on_ready, on_reap;
    bool up; /* under p->lock: NC_OUT past its HELLO (state is the loop's own copy) */
    struct net_conn *rnext, *knext; /* loop's ready and reap lists */
    struct net_conn *dnext;         /* the loop's closed-in-this-batch list */
    struct net_conn *inext;         /* the loop's inbox */
    struct net_conn *next, *prev;   /* the loop's connections */
    /* The socket's send side (NC_OUT): a posting thread may send a small request's single
     * frame itself when the connection is idle (net_peer_submit), so every sendmsg on the
     * socket, and closing it, happens under txlock. Under txlock: wire_partial (the loop's
     * last sendmsg left a frame half sent), tx_closed (no more sends: the socket is closing),
     * inl (a frame a poster sent in part: the rest is the loop's to send first) and inl_out
     * (frames posters sent whose answers the loop has not counted in outstanding yet). */
    pthread_mutex_t txlock;
    bool wire_partial, tx_closed;
    _Atomic uint32_t inl_out;
    _Atomic int inl_handoff; /* inl holds a frame for the loop */
    _Atomic int inl_nowed;   /* a poster sent a notification on c: folded into nowed */
    struct net_txf inl;
    size_t inl_off;
    _Atomic int tx_idle; /* a hint for posters: the loop's tx is empty, the target reads */
    /* The socket's receive side (NC_OUT): a caller waiting for or polling a request whose
     * frame went on c reads its answer itself when the next bytes are a plain WRITE_ACK
     * header (net_tcp_watch, net_loop.c), so every recv on the socket, the rx state and the
     * close happen under rxlock (both only try it to read: the loop wakes for c only when
     * bytes came, which wake a caller asleep in poll(2) on it too; the close waits for it).
     * rx_mine: the loop
     * holds it (its own flag); rx_gone: closing, nothing more is read (under rxlock);
     * rx_answers, rx_ns: answers callers took and when, folded into outstanding and last_rx
     * by the loop (fold_inline); pins: requests that may still read it (r->wconn), which
     * keep its memory (closed or not) from being freed. */
    pthread_mutex_t rxlock;
    bool rx_mine, rx_gone;
    _Atomic int rx_left; /* a caller left a whole header in hbuf for the loop */
    /* NC_OUT: parked, a caller polling its answer on c took EPOLLIN out of the loop's epoll
     * set (the bytes it reads would wake the loop for nothing: a wake-up across CPUs sat inside
     * the answer's delivery); given back when it stops, or by the loop's tick NET_PARK_NS after
     * parked_at. Every epoll_ctl MOD of c is made under evlock: c->events is the loop's mask,
     * the one registered lacks EPOLLIN while parked. A caller parks only under rxlock with c
     * not closing (so c->fd is c's). */
    pthread_mutex_t evlock;
    _Atomic int parked;
    _Atomic uint64_t parked_at;
    _Atomic int pins;
    _Atomic uint32_t rx_answers;
    _Atomic uint64_t rx_ns;
};

struct net_loop {
    struct net_engine *e;
    int idx;
    int epfd, evfd;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;    /* inbox, ready, reap */
    struct net_conn *inbox;  /* connections to adopt (dial, or accepted by another loop) */
    struct net_conn *ready;  /* connections whose peer queued frames */
    struct net_conn *reap;   /* connections others tore down */
    _Atomic int woken;       /* an eventfd write is pending */
    _Atomic int cut_regions; /* a deregistration asks to close connections holding a cut region */
    _Atomic int resume;      /* the notification queue was drained: paused connections read */
    _Atomic int stage_kick;  /* a staged device copy ended or a slot came free (net_stage.c) */
    _Atomic int rx_kick;     /* a caller left a frame header it read in a connection's hbuf */
    struct net_conn *conns;  /* every connection of the loop (loop thread only) */
    uint8_t *scratch;
    uint64_t next_tick;
    uint64_t ack_at;       /* 0, or when its connections' owed notification acks go */
    bool exited;           /* under lock: nothing more may be handed to it */
    struct net_conn *dead; /* closed in this batch of events, freed after it */
};

struct net_peer {
    struct net_engine *e;
    char name[256];
    uint64_t instance;
    /* Same-node identity, from the kernel (net_local.c), never from metadata: pid is what
     * SO_PEERCRED said of the process answering on the peer's socket (0 until verified). */
    uint32_t pid;
    bool same_host; /* a hint only (the announced boot id): the dial order of net_loop.c */
    bool peer_allows_local;
    uint64_t local_id; /* the peer's same-node socket ("ixl-net-<hex>" in the abstract space) */
    int local_ok;      /* -1 not checked for this instance, 0 refused (local_why), 1 verified */
    char local_why[256];
    uint16_t port;
    uint32_t addrs[NET_MAX_ADDRS];
    int n_addrs;
    size_t notif_max; /* the largest notification it accepts */
    int cma;          /* -1 unknown, 0 refused, 1 works (the pid proved by a challenge, once) */
    int pidfd; /* the verified peer process, for liveness of the same-node paths; -1 if none */
    const void *life; /* its life page mapped read-only at life_at (net_local.c, LIFE_A), or NULL */
    /* The peer's page of address space for its life page, for as long as the peer exists: each
     * life page is mapped over it (MAP_FIXED, one step) and a dropped one stays until then, so
     * a reader without p->lock (peer_at_post) never touches unmapped memory. NULL: no
     * reservation (no life page for this peer; the pidfd answers). */
    void *life_at;  /* set at the peer's creation, never changed */
    bool life_lost; /* a MAP_FIXED there failed: the page is not ours any more (p->lock) */
    /* The post view: what peer_at_post reads without p->lock, so that threads posting to one
     * peer do not take turns on it (two threads posting 4 KiB over shm reached 1.1x one
     * thread's requests a second with the lock). Written under p->lock between
     * net_peer_pv_begin and net_peer_pv_end, a sequence lock (pv_seq odd while written):
     * a reader that saw it move (a pidfd closed, a life page replaced) reads again. */
    _Atomic uint32_t pv_seq;
    _Atomic uint32_t pv_pid; /* for the message of a post refused as gone */
    _Atomic uint64_t pv_instance;
    _Atomic int pv_loaded, pv_pidfd, pv_life;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* a connection came up or the attempt failed */
    struct net_ring q;   /* frames, taken by any of its connections */
    struct net_ring nq;  /* notifications, sent in order on one connection (notif_conn) */
    struct net_conn *notif_conn;
    struct net_conn *conns[NET_MAX_CONNS]; /* of generation gen: dialing or up */
    int n_conns, n_up;
    uint32_t inl_next;       /* the connection a poster tries first for its inline frame */
    uint64_t gen;            /* bumps when the connections are torn down */
    int loop_base;           /* its connections go to loops loop_base, loop_base + 1, ... */
    char why[NET_WHY];       /* why the last attempt failed */
    uint64_t failed_gen;     /* the generation that failed to come up (why applies), 0 none */
    int failed_status;       /* and its status (IXL_ERR_AUTH, IXL_ERR_REMOTE_DISCONNECT) */
    int refs;                /* rmds that point at this peer */
    bool loaded;             /* conn info present (not disconnected by the core) */
    struct net_ipc *ipcs;    /* its device allocations opened here (net_ipc.c, under its lock) */
    struct net_spool *stage; /* pinned slots for staged VRAM to this peer (under lock) */
    /* Acknowledged notifications (net_loop.c), a session per peer instance (instance): nseq
     * is the last sequence number given, nacked the highest the peer acknowledged; un holds
     * the notifications nacked + 1 .. nseq (un_len, un_bytes), each kept until acknowledged
     * and sent again from index un_resend on a new notification connection. Bounded by
     * notif_unacked_max/_bytes: at the bound no new one is taken from nq (un_blocked). */
    uint64_t nseq, nacked;
    struct net_msg **un;
    size_t un_head, un_len, un_cap, un_bytes, un_resend;
    bool un_blocked;
    bool ack_wanted;          /* net_peer_notif_settle: the notification connection sends a PING */
    int settling;             /* threads in net_peer_notif_settle (acks broadcast cond) */
    uint64_t notif_lost;      /* never acknowledged by an instance that went (in all) */
    uint64_t lost_unreported; /* ... not said yet by an ixl_notif_send to it */
    struct net_peer *next;
};

enum net_req_state { NR_IDLE, NR_RUNNING, NR_DONE, NR_ERROR };

struct net_slot;
struct net_spool;
struct net_sgate;

struct net_chunk {
    uint64_t laddr, raddr, len, key;
    /* Staged (net_stage.c): the pinned slot the chunk's bytes pass through, owned by the
     * request while recorded here (under reqs_lock); dev: the GPU of the local side. */
    struct net_slot *slot;
    int dev;
};

/* An imported device allocation a request uses, and for how many of its descriptors: the
 * references and in-flight holds it takes are counted per descriptor (net_ipc.c). */
struct net_ipc_use {
    struct net_ipc *c;
    size_t descs;
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
    uint32_t pid;      /* its process as that post saw it (cma's process_vm_*) */
    uint8_t *answered; /* TCP: per frame, answered in this post */
    bool dev;          /* loopback with VRAM on a side: device copies on events (net_dev.c) */
    int dev_ord;       /* the GPU whose streams carry it */
    int dev_dir;       /* NET_DIR_*: which of that GPU's streams */
    bool dev_same;     /* D2D, every byte on both sides reachable by a kernel on dev_ord */
    /* VRAM between agents of one node (net_ipc.c): per descriptor the target's bytes as this
     * process reaches them (an imported device allocation, or a mapped memfd), the imported
     * allocations it holds, each once or a few times with the count of its descriptors
     * (n_ipc entries; the array is allocated on this path even when it holds none), and the
     * path's name; NULL/0/"" otherwise. */
    uint64_t *dev_tgt;
    struct net_ipc_use *ipc;
    size_t n_ipc;
    bool ipc_held; /* an in-flight hold on ipc[] (net_ipc_hold), under net_ipc's lock */
    const char *dev_path;
    /* The device event of the post in flight, while its completion is still to be claimed
     * (net_dev.c; under e->reqs_lock): a waiting caller polls it (net_wait_xfer). */
    struct net_dwait *dw;
    uint64_t gen; /* TCP: the peer's connection generation this post went to */
    /* tcp-staged (net_stage.c): VRAM on a side of a request to another agent. stage_local:
     * the local side is VRAM, so its chunks pass through the peer's pinned slots here;
     * stage_next: the next chunk to start (under the pool's lock and reqs_lock). */
    bool stage, stage_local;
    uint32_t stage_next;

    /* TCP: the connection this post's one frame was sent on by the posting thread, pinned
     * (c->pins) until the request lets it go (net_tcp_unwatch), or NULL. Written and read by
     * the threads that post, check and release (the core serializes them). */
    struct net_conn *wconn;
    /* TCP: the caller's look found this post's answer (or whatever came first) at the head of
     * the socket, for the loop to read: a status call yields the CPU until the request ends
     * (net_check_xfer). Set and read by the same threads as wconn; cleared at each post. */
    bool loop_turn;
    /* TCP: the last look (net_tcp_watch) found nothing at the head of the socket: a watch that
     * follows it sleeps in poll(2) before it looks again (poll says at once what came since).
     * Same threads as wconn; cleared at each post. */
    bool looked_empty;
    /* Per post, under e->reqs_lock (state also read without it: check_xfer's fast path). */
    uint64_t serial; /* 0 when not registered in the table */
    _Atomic enum net_req_state state;
    int status;
    char why[NET_WHY]; /* an error's text, said again by check_xfer on the caller's thread */
    uint64_t pending;
    int busy; /* threads or queued frames touching the user's buffers right now */
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

/* Accepted connections per HELLO name (peer_conns), under e->lock. */
struct net_inname {
    char name[256];
    int n;
    /* The newest connection generation its initiator instance has set up (the HELLO's req):
     * a WRITE arriving on an older generation's connection of that instance was failed by the
     * initiator already and must not land after the newer generation's WRITEs (a torn-down
     * connection's bytes may still wait in this host's socket buffer). Written under e->lock,
     * read by the loops per body step. */
    _Atomic uint64_t instance, max_gen;
    struct net_spool *stage; /* pinned slots for its frames to and from VRAM (e->lock) */
    /* The notification session with initiator instance sess_inst (e->nsess_lock): delivered,
     * the highest sequence number handed to the application (in order, exactly once). Kept
     * while no connection of the name is open (idle_since) so that a reconnecting sender's
     * resends are recognised; at most NET_IDLE_NAMES such names, the oldest dropped first. */
    uint64_t sess_inst, delivered;
    uint64_t idle_since; /* 0 while connections of the name are open (e->lock) */
    struct net_inname *next;
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
    uint64_t timeout_ns, heartbeat_ns, idle_ns;
    uint64_t busy_poll_ns; /* busy_poll_us: a loop polls this long after an event */
    int loop_nice;         /* loop_nice: added to each loop thread's nice at its start */
    bool hugepages;
    int copy_threads;
    int n_loops;
    int max_conns, peer_conns;
    size_t queue_max;
    char listen_addr[64];
    /* Trust (host->auth_mode; a host without it: IXL_AUTH_LOCAL without peer_check). */
    int auth_mode;
    bool can_check_peer; /* host->peer_check is there */
    _Atomic uint64_t last_refuse_log;
    size_t notif_queue_max, notif_queue_bytes;     /* the bound of the received queue */
    size_t notif_unacked_max, notif_unacked_bytes; /* the bound of a peer's unacked store */
    size_t stage_bytes; /* pinned memory per peer for staged VRAM (net_stage.c) */
    uint16_t port;
    uint32_t adv_addrs[NET_MAX_ADDRS];
    int n_adv_addrs;

    /* identity and conn info */
    uint8_t host_id[24]; /* boot id + pid namespace: a hint for the dial order, never trusted */
    uint8_t conn_info[256];
    size_t conn_len;
    uint64_t local_id;       /* the same-node socket's name (0: local_paths off or no socket) */
    struct net_local *local; /* its server (net_local.c) */

    int listen_fd;
    int spare_fd;     /* held open so that accept can shed connections at EMFILE */
    _Atomic int n_in; /* accepted connections open */
    _Atomic int stopping;
    struct net_loop loops[NET_MAX_LOOPS];
    _Atomic unsigned next_loop;
    uint64_t last_shed_log;

    pthread_mutex_t lock; /* peers, allocations, accepted names */
    struct net_peer *peers;
    int n_peers;
    /* The peers by name (net_peer_find; plugins/common/ixl_name_index.h); peers stay until
     * the engine goes. */
    struct ixlp_name_index peer_idx;
    struct net_alloc *allocs;
    struct net_inname *innames;
    int n_idle_names;           /* innames kept with no connection (their notification sessions) */
    pthread_mutex_t nsess_lock; /* the innames' notification sessions; then notif_lock */

    /* Where net_region and net_rmd records come from: one calloc each grew the heap a page
     * at a time, a page fault each (tens of microseconds on a virtual machine; see
     * ../common/ixl_pool.h). Used only by the "writer" methods (ixl_plugin.h, "Threads"),
     * which the core calls one at a time. */
    struct ixlp_pool region_pool, rmd_pool;
    pthread_rwlock_t regions_lock; /* key -> region, for TCP checks */
    struct net_region **rtab;
    size_t rtab_cap, n_regions;
    /* Region keys drawn from the kernel's random source a batch at a time (under
     * regions_lock): one getrandom(2) per region was a third of registering 10^4 regions,
     * a system call costing microseconds on a virtual machine. The same source, fewer calls. */
    uint64_t key_batch[32];
    unsigned keys_left;
    struct net_region *vram_regions; /* VRAM regions (never in rtab), for the channel's answers */

    pthread_mutex_t reqs_lock; /* serial -> request */
    pthread_cond_t reqs_cond;  /* busy dropped */
    struct net_req **qtab;
    size_t qtab_cap;
    uint64_t next_serial;
    struct net_req *all_reqs; /* requests not released (destroy frees what is left) */

    pthread_mutex_t notif_lock;
    struct net_notif *notif_head, *notif_tail;
    size_t notif_count, notif_bytes; /* what the queue holds */
    bool notif_blocked;              /* a loop stopped reading at the bound: wake them */

    pthread_mutex_t msg_lock; /* net_msg refs and verdicts */
    pthread_cond_t msg_cond;

    /* copy workers for same-node and loopback transfers */
    pthread_mutex_t work_lock;
    pthread_cond_t work_cond;
    struct net_item *work;
    size_t work_head, work_len, work_cap;
    pthread_t workers[8];
    int n_workers;

    /* Device memory (net_dev.c): host->dev when the core has a device layer with a device;
     * else NULL and mem_why says why VRAM is not among the engine's memory types. */
    const struct ixl_devops *dev;
    int n_devs;
    char mem_why[256];
    /* n_devs * NET_DIRS streams (index ordinal * NET_DIRS + direction), each created on first
     * use with its completion thread (net_dev.c). */
    struct net_dstream *dstreams;
};

#define NET_REGION_MAGIC 0x4e524547u
#define NET_RMD_MAGIC 0x4e524d44u

/* net_engine.c */
int net_error(struct net_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t net_now_ns(void);
int net_notif_push(struct net_engine *e, const char *agent, const void *msg, size_t len);
/* Whether the queue of received notifications has room for one of len bytes; when not, the
 * caller (a loop) stops reading and is woken (net_loops_resume) once the application drains. */
bool net_notif_room(struct net_engine *e, size_t len);

/* net_region.c */
struct net_region *net_region_find(struct net_engine *e, uint64_t key); /* regions_lock held */
/* The region of key that holds [addr, addr + len), or NULL (regions_lock held). */
struct net_region *net_region_range(struct net_engine *e, uint64_t key, uint64_t addr,
                                    uint64_t len);
int net_region_register(struct net_engine *e, enum ixl_mem type, const struct ixl_reg_desc *d,
                        struct net_region **out);
void net_region_unpublish(struct net_engine *e, struct net_region *g); /* out of the table */
void net_region_free(struct net_engine *e, struct net_region *g);
void net_rtab_free(struct net_region **t, size_t cap); /* the key table (net_region.c) */
int net_rmd_load_remote(struct net_engine *e, struct net_peer *p, const struct ixl_reg_desc *d,
                        const void *data, size_t len, struct net_rmd **out);
int net_rmd_load_local(struct net_engine *e, struct net_region *g, struct net_rmd **out);
void net_rmd_unload(struct net_engine *e, struct net_rmd *m);
/* Same-node mapping of a remote region (the memfd its verified owner passed), or NULL with
 * why filled. */
void *net_rmd_map(struct net_rmd *m, char *why, size_t why_len);
int net_alloc(struct net_engine *e, size_t len, void **out);
int net_free(struct net_engine *e, void *addr);
void net_allocs_free_all(struct net_engine *e);

/* net_req.c: the request table. Lookup takes a "busy" reference the caller drops with
 * net_req_unbusy(). */
struct net_req *net_req_get_busy(struct net_engine *e, uint64_t serial);
void net_req_unbusy(struct net_engine *e, struct net_req *r);
int net_req_insert(struct net_engine *e, struct net_req *r);  /* reqs_lock held: a new serial */
void net_req_remove(struct net_engine *e, struct net_req *r); /* reqs_lock held */
struct net_req *net_req_find(struct net_engine *e, uint64_t serial); /* reqs_lock held */
/* One part of request serial finished with status. Returns 1 when it was the last part and
 * the request's notification must now go to its peer (the caller queues it), else 0. */
int net_req_part_done(struct net_engine *e, uint64_t serial, int status, const char *why);
/* The notification of request serial was sent (status OK) or could not be. */
void net_req_notif_done(struct net_engine *e, uint64_t serial, int status, const char *why);
/* The notification of request serial was sequenced: the request is done (NET delivers it or
 * reports it lost); the caller signals the host. */
void net_req_notif_sequenced(struct net_engine *e, uint64_t serial);
/* Fails p's TCP requests posted to generation torn or older, with why. */
void net_req_fail_peer(struct net_engine *e, struct net_peer *p, int status, uint64_t torn,
                       const char *why);
/* Matches an answer from peer p with its frame: 1 (marked answered), 0 (no live request:
 * drain it), -1 (a protocol error). */
int net_req_answer(struct net_engine *e, struct net_peer *p, const struct net_hdr *h);
void net_req_link(struct net_engine *e, struct net_req *r); /* into all_reqs */
void net_req_unlink(struct net_engine *e, struct net_req *r);
void net_req_free(struct net_req *r);
void net_reqs_free_all(struct net_engine *e); /* destroy: requests whose release failed */

/* net_loop.c */
int net_loops_start(struct net_engine *e); /* also the listener */
void net_loops_stop(struct net_engine *e); /* closes every connection */
/* Queues frames [0, n) of request r, posted as serial, to r's peer and dials it when it has
 * no connection: IXL_OK, IXL_ERR_BUSY (queue_max), IXL_ERR_NO_MEMORY or
 * IXL_ERR_REMOTE_DISCONNECT (the peer was unloaded). Never waits on the peer. */
int net_peer_submit(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t n);
/* The life page of a verified peer (net_local.c): 1 its server thread lives, 0 it ended
 * (read under p->lock, or at life_at in the post view); drop stops its use, leaving it mapped
 * (p->lock held, inside net_peer_pv_begin/end); reserve takes the peer's page of address space
 * at its creation, release gives it back at its end. */
int net_local_life_state(const void *life);
void net_local_life_drop(struct net_peer *p);
void net_local_life_reserve(struct net_peer *p);
void net_local_life_release(struct net_peer *p);
/* Queues the notification of request serial (sent once every frame before it is answered). */
int net_peer_submit_notif(struct net_peer *p, uint64_t serial);
/* Sends a notification with no request: waits until it is sequenced (NET then delivers it
 * exactly once or reports it lost) or failed (bounded by timeout_ms). */
int net_peer_send_msg(struct net_peer *p, const void *msg, size_t len);
/* Acknowledged notifications: p's unacknowledged ones are sent again on a connection dialed
 * now (p was loaded again with the same instance; any thread). */
void net_peer_notif_kick(struct net_peer *p);
/* Waits (until deadline_ns, CLOCK_MONOTONIC) for p's peer to acknowledge what it was sent,
 * while a connection to it is up, asking for the ack at once (a PING, whose PONG carries it):
 * a disconnect or a destroy reports only what is really outstanding. */
void net_peer_notif_settle(struct net_peer *p, uint64_t deadline_ns);
/* p's instance changed to instance (or the engine is destroyed: last): its unacknowledged
 * notifications are lost; logged, counted, and said by the next ixl_notif_send to it. */
void net_peer_notif_lost(struct net_peer *p, const char *why, bool last, uint64_t instance);
/* Reads, on the caller's thread, the answers waiting on the connection r's frame went on
 * (r->wconn) while they are plain WRITE_ACKs, completing their requests as the loop would;
 * budget_ns 0: one look; else it sleeps in poll(2) on the socket (as a blocking ping-pong
 * does) for up to budget_ns or until r is no longer running or the socket's next frame is
 * one for the loop. Never waits for a lock another thread holds. IXL_OK if it looked,
 * IXL_ERR_NOT_SUPPORTED if r has no such connection (any more). */
int net_tcp_watch(struct net_engine *e, struct net_req *r, uint64_t budget_ns);
/* r lets its connection go (post, release). */
void net_tcp_unwatch(struct net_req *r);
/* Dials p if needed and waits (bounded by timeout_ms) until a connection is up. */
int net_peer_connect(struct net_peer *p);
/* Tears p's connections down and fails its queued and outstanding TCP work with status. */
void net_peer_teardown(struct net_peer *p, int status, const char *why);
/* Queues frame k of the staged request r (posted as serial) to p: IXL_OK, or the request's
 * connection generation is gone (IXL_ERR_REMOTE_DISCONNECT), queue_max, out of memory. */
int net_peer_submit_frame(struct net_peer *p, struct net_req *r, uint64_t serial, uint32_t k);
/* Wakes loop l (or every loop) to flush answers whose device copies ended and to retry
 * connections waiting for a slot (net_stage.c). */
void net_loop_kick(struct net_loop *l);
void net_loops_stage_kick(struct net_engine *e);
/* Asks every loop to close the accepted connections that hold a region whose cut is set. */
void net_loops_cut_regions(struct net_engine *e);
/* The application drained notifications: loops read the connections they paused again. */
void net_loops_resume(struct net_engine *e);

/* net_local.c: the same-node channel. */
/* Listens on the abstract Unix socket named after e->local_id (set here) and serves it on a
 * thread of its own. A failure is logged and leaves the same-node paths off (IXL_OK). */
int net_local_start(struct net_engine *e);
void net_local_stop(struct net_engine *e);
/* The socket's abstract name for id, NUL first; returns its length (sockaddr's sun_path). */
size_t net_local_name(uint64_t id, char *out, size_t cap);
/* shm: asks the verified peer of m for the memfd of m's region (key, addr, len): on IXL_OK
 * *fd (a memfd of the peer's NET allocator, checked), *off (the region's offset in it) and
 * *size (the memfd's size, covering the region). Otherwise why says what failed. */
int net_local_memfd(struct net_engine *e, struct net_rmd *m, int *fd, uint64_t *off, uint64_t *size,
                    uint64_t *instance, char *why, size_t why_len);
/* cma: 1 when the peer's pid was proved by a fresh challenge (once per instance) and the peer
 * confirmed every region of ms[0..n) (once per region); 0 otherwise (why says why). */
int net_local_cma(struct net_engine *e, struct net_peer *p, struct net_rmd *const *ms, size_t n,
                  char *why, size_t why_len);

/* net_dev.c: VRAM within the agent through the device layer (host->dev). */
enum { NET_DIR_D2D, NET_DIR_H2D, NET_DIR_D2H, NET_DIRS };
/* Decides whether the engine offers VRAM (a device layer with at least one device) and, if
 * so, starts the completion thread; otherwise fills e->mem_why. IXL_OK either way unless a
 * thread cannot start. */
int net_dev_init(struct net_engine *e);
void net_dev_stop(struct net_engine *e); /* waits for every recorded event, frees streams */
/* Classifies a VRAM registration through the device layer into g (vram, dev, base). */
int net_dev_region(struct net_engine *e, const struct ixl_reg_desc *d, struct net_region *g);
/* Enqueues the copies of r (posted as serial, busy held for the device work) on its stream,
 * records an event and hands it to the stream's completion thread: IXL_IN_PROGRESS. On an
 * error nothing of r is left running on the device, busy is dropped and why says what failed
 * (the caller reports it: net_error on the posting thread, the request's status on a worker). */
int net_dev_post(struct net_engine *e, struct net_req *r, uint64_t serial, char *why,
                 size_t why_len);
/* Polls, on the caller's thread and for at most budget_ns, the device event of r's post in
 * flight; when the event is done first here, completes r here (as the stream's completion
 * thread would). IXL_OK if r had such an event (done or not), IXL_ERR_NOT_SUPPORTED if not. */
int net_dev_watch(struct net_engine *e, struct net_req *r, uint64_t budget_ns);

/* net_ipc.c: VRAM between agents of one node (issue 20). */
/* The route of request r (remote peer p, VRAM on a side as lv/rv): CUDA IPC into the peer's
 * device allocations (their handles asked over the verified same-node channel, opened once
 * per peer instance and allocation) and, for a DRAM target, its memfd mapping; the copies on
 * device streams (net_dev.c). IXL_OK with r->dev set, else an error said through net_error. */
int net_ipc_route(struct net_engine *e, struct net_req *r, struct net_peer *p, bool lv, bool rv);
/* At post: the allocations r uses are still open for the peer's current instance; takes the
 * in-flight hold (dropped by net_ipc_unhold once the copies ended or never started). */
int net_ipc_hold(struct net_engine *e, struct net_req *r);
void net_ipc_unhold(struct net_req *r);
/* A device request to a peer ended on the device with status rc: REMOTE_DISCONNECT when the
 * peer went meanwhile (its allocations are then closed); why filled on an error. */
int net_ipc_done(struct net_engine *e, struct net_req *r, int rc, char *why, size_t wl);
/* The peer went, was unloaded or restarted: its allocations are closed (each once no copy
 * into it is in flight). */
void net_ipc_drop_peer(struct net_engine *e, struct net_peer *p);
void net_ipc_req_free(struct net_req *r); /* the references of a freed request */
/* The target's answer (net_local.c): what a peer needs to open VRAM region [addr, +len). */
struct net_vram_ans {
    int kind;           /* 1: legacy IPC handle, 2: VMM POSIX fd */
    uint64_t base, len; /* the exported allocation in the target's address space */
    int dev;            /* the target's ordinal (a hint) */
    struct ixl_dev_ipc h;
    int fd;
};
int net_local_vram(struct net_engine *e, struct net_rmd *m, struct net_vram_ans *out, char *why,
                   size_t why_len);
/* The VRAM region of key exactly [addr, +len) (regions_lock held), or NULL. */
struct net_region *net_region_vram(struct net_engine *e, uint64_t key, uint64_t addr, uint64_t len);
/* A staged copy (net_stage.c): one asynchronous copy on the GPU ord's stream for dir, then
 * done(arg, status) on that stream's completion thread once its event is done. IXL_OK, or
 * an error (why filled) with nothing enqueued and done never called. */
int net_dev_copy_async(struct net_engine *e, int ord, int dir, void *dst, const void *src,
                       size_t len, void (*done)(void *arg, int status), void *arg, char *why,
                       size_t why_len);

/* net_stage.c: VRAM over TCP through pinned host slots (tcp-staged). */
#define NET_STAGE_FRAME ((uint64_t)1 << 20) /* a slot; frames to or from VRAM are no larger */
struct net_slot {
    struct net_spool *pool;
    struct net_slot *next, *anext; /* free list, every slot of the pool */
    uint8_t *buf;
    bool pinned;
    /* initiator: the chunk it carries */
    struct net_req *r;
    uint64_t serial;
    uint32_t chunk;
};
/* A target's answer waiting for its device copy: a WRITE_ACK after the copy into VRAM, a
 * READ_DATA whose bytes are copied out of VRAM into the slot. Two references: the frame and
 * the copy. */
struct net_sgate {
    _Atomic int refs;
    _Atomic int state; /* IXL_IN_PROGRESS, then IXL_OK or the copy's error */
    struct net_engine *e;
    struct net_slot *slot;
    struct net_region *region; /* inflight held until the copy ended and the frame went */
    struct net_loop *loop;
    uint64_t addr, len;
};
/* A pool of pinned slots (stage_bytes / NET_STAGE_FRAME), one per peer: p (initiator) or a
 * peer name of accepted connections (p NULL). NULL when out of memory. */
struct net_spool *net_spool_new(struct net_engine *e, struct net_peer *p);
void net_spool_unref(struct net_spool *pool); /* the owner's reference */
/* A free slot or NULL (target pools: the loops are kicked when one comes free). */
struct net_slot *net_slot_get(struct net_spool *pool);
void net_slot_put(struct net_slot *s);
/* Target: a gate for slot s (addr, len: the region's bytes it moves); copy to the device
 * (to_dev) or from it. On IXL_OK the copy runs and ends the gate; on failure the gate is
 * failed at once. The caller holds the frame's reference. */
struct net_sgate *net_sgate_new(struct net_loop *l, struct net_slot *s, struct net_region *g,
                                uint64_t addr, uint64_t len);
void net_sgate_copy(struct net_sgate *gt, bool to_dev);
void net_sgate_put(struct net_sgate *gt);
/* Initiator: a staged request's route (prep_xfer): checks descriptors, sets stage flags. */
int net_stage_prep(struct net_engine *e, struct net_req *r, bool lv, bool rv);
/* Starts a posted stage_local request: its chunks take slots as they come free. */
int net_stage_start(struct net_engine *e, struct net_req *r, uint64_t serial);
/* A WRITE frame of chunk k of r was sent or dropped (busy held): its slot comes free. */
void net_stage_sent(struct net_engine *e, struct net_req *r, uint32_t k);
/* An answer of a stage_local READ arrived (h): its slot goes to the device. 1: handled. */
int net_stage_answer(struct net_engine *e, struct net_peer *p, const struct net_hdr *h);
/* Gives back the slots r still records (busy 0 and not running, or the engine stopping). */
void net_stage_sweep(struct net_engine *e, struct net_req *r);

/* net_xfer.c */
int net_workers_start(struct net_engine *e);
void net_workers_stop(struct net_engine *e);
int net_peer_alive(struct net_peer *p); /* 0 once the peer's process is known to be gone */
/* The post view of p (struct net_peer): begin before changing its instance, loaded, pid, pidfd
 * or life page (before a close or an unmap), end after; p->lock held throughout. */
void net_peer_pv_begin(struct net_peer *p);
void net_peer_pv_end(struct net_peer *p);
/* The peer named name, or NULL (e->lock held). */
struct net_peer *net_peer_find(struct net_engine *e, const char *name);
int net_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                  const struct ixl_xfer_side *remote, const char *remote_agent,
                  const struct ixl_xfer_opts *opts, struct ixl_req **out);
int net_post_xfer(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts);
int net_check_xfer(struct ixl_engine *base, struct ixl_req *req);
int net_wait_xfer(struct ixl_engine *base, struct ixl_req *req, uint64_t budget_ns);
int net_release_req(struct ixl_engine *base, struct ixl_req *req);
int net_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out);
int net_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out);

#endif

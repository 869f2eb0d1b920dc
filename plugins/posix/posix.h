/*
 * POSIX: the built-in storage backend (DRAM <-> FILE/BLK). See README.md for the contract.
 *
 * posix_engine.c holds what both engines share: options, registration, requests and the queue
 * of I/Os (px_take/px_done). posix_uring.c feeds that queue to io_uring, posix_pool.c to
 * threads running pread/pwrite.
 *
 * Locking: one mutex per engine (e->lock) guards the FIFO of requests with I/O left to start,
 * every request's progress fields and the engines' slot tables. I/O itself (the kernel's copy
 * in io_uring_submit, or pread/pwrite) runs without it in the thread pool; io_uring submits
 * under it (submission is what the ring's single-producer queue needs).
 */
#ifndef IXL_POSIX_H
#define IXL_POSIX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "../common/ixl_cost_table.h"
#include "../common/ixl_pool.h"

/* The host's table of allocation and system calls (ixl_host.sys): one per process, so every
 * create_engine stores the same pointer; every call of the plugin goes through it so tests can
 * refuse it. */
extern const struct ixl_sys *posix_sys_ptr;
static inline const struct ixl_sys *posix_sys(void)
{
    return __atomic_load_n(&posix_sys_ptr, __ATOMIC_RELAXED);
}
/* Stores init's table; IXL_ERR_PLUGIN (explained) if the host has none. */
int posix_sys_set(const struct ixl_engine_init *init);

enum px_kind { PX_URING, PX_THREADS };

/* A registered region: DRAM, VRAM, or a FILE/BLK with the fd this backend owns. */
struct px_md {
    enum ixl_mem type;
    int fd;             /* -1 for DRAM and VRAM */
    int ordinal;        /* VRAM: the device */
    bool rd_ok, wr_ok;  /* the open mode allows reading / writing */
    bool append;        /* O_APPEND: positioned writes would land at the end */
    bool direct;        /* O_DIRECT */
    uint32_t mem_align; /* direct I/O: buffer address alignment */
    uint32_t off_align; /* direct I/O: file offset and length alignment */
    uint64_t vol_size;  /* BLK: the volume's size; FILE: 0 (files grow) */
    char name[256];     /* FILE and BLK: the path (or "fd N") for messages. A DRAM or VRAM
                           record ends before it (px_mds: 10^4 registrations of memory touch
                           48 bytes each instead of 304) */
};

enum px_state { PX_IDLE, PX_RUNNING, PX_DONE, PX_FAILED };

struct px_req {
    struct px_engine *e;
    bool to_file;    /* the data flows memory -> file (else file -> memory) */
    bool staged;     /* VRAM: through the bounce buffers (posix_stage.c) */
    uint32_t chunks; /* staged: chunks of this request in any stage (e->lock) */
    uint64_t bytes;  /* every descriptor's bytes */
    uint64_t chunk;  /* staged: bytes per chunk (posix_stage.c: px_stage_chunk) */
    size_t n;
    const struct ixl_xfer_desc *mem, *file; /* borrowed from the core until release */
    /* Progress (e->lock): the next byte to start, I/Os in the kernel, the outcome. */
    size_t next_desc;
    uint64_t next_off;
    uint32_t inflight;
    _Atomic int state; /* enum px_state; read without the lock by check_xfer */
    int status;
    bool reported, canceled, queued;
    bool inlined; /* the last post was written by the posting thread (post_inline) */
    char msg[512];
    struct px_req *qnext; /* FIFO of requests with I/O left to start */
};

/* One I/O: a chunk of a descriptor, continued after a short read or write. */
struct px_io {
    struct px_req *r;
    struct px_chunk *chunk; /* a staged chunk (its bounce buffer), or NULL */
    uint8_t *buf;
    const struct px_md *f;
    uint64_t off;
    uint32_t len;  /* bytes left */
    uint32_t done; /* bytes moved so far */
};

struct px_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    /* Where px_md records come from (file_mds: FILE and BLK, mds: DRAM and VRAM, without the
     * name): one calloc each grew the heap a page at a time, a page fault each (tens of
     * microseconds on a virtual machine; see ../common/ixl_pool.h). Used only by register_mem
     * and deregister_mem, which the core calls one at a time. */
    struct ixlp_pool mds, file_mds;
    enum px_kind kind;
    uint32_t qd;
    uint64_t chunk;
    uint64_t inline_bytes; /* option inline_bytes: small buffered WRITEs written in post */
    unsigned nthreads;
    pthread_mutex_t lock;
    struct px_req *head, *tail; /* FIFO */
    uint32_t inflight;          /* I/Os in the kernel or in a worker */
    void *impl;                 /* the engine's own state */
    /* VRAM through bounce buffers (posix_stage.c): the device layer (NULL: no VRAM, mem_why
     * says why), the staged requests with chunks left to start, the chunks whose file I/O
     * may start (taken by px_take before the FIFO), and the stager (started at the first
     * staged request). */
    const struct ixl_devops *dev;
    int n_devs;
    char mem_why[256];
    uint64_t bounce_size;
    unsigned bounce_count;
    struct px_req *shead, *stail;
    struct px_chunk *ready_head, *ready_tail;
    struct px_stage *stage;
    struct ixl_cost_table costs;
};

/* Work for the I/O engines: a chunk ready or a request in the FIFO (e->lock held). */
static inline bool px_has_io(const struct px_engine *e)
{
    return e->head != NULL || e->ready_head != NULL;
}

/* ---- posix_engine.c ------------------------------------------------------------------------ */

/* Fills io with the next chunk of the FIFO's first request (e->lock held); false if none. */
bool px_take(struct px_engine *e, struct px_io *io);
/* Accounts for a finished I/O (e->lock held): res = bytes moved by this attempt (>= 0) or
 * -errno. Returns true when io is to be continued (a short transfer: io advanced), false when
 * it is finished (completed or failed). *finished is set when its request reached its end. */
bool px_done(struct px_engine *e, struct px_io *io, long res, bool *finished);
/* Fails a request with status and a message (e->lock held); takes it off the FIFO. Returns
 * true when the request thereby ended (nothing of it in flight). */
bool px_fail(struct px_engine *e, struct px_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int px_error(struct px_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The request's end once nothing is left to start nor in flight (e->lock held): true when it
 * ended now. */
bool px_maybe_finish(struct px_req *r);
/* Takes r off its queue (the FIFO, or the staged requests'); e->lock held. */
void px_dequeue(struct px_engine *e, struct px_req *r);
/* The I/O engine has work (e->lock held). */
void px_kick(struct px_engine *e);

/* ---- posix_stage.c: VRAM through pinned bounce buffers -------------------------------------- */

/* Finds the device layer and its devices (create_engine); no device leaves e->dev NULL with
 * e->mem_why saying why. */
void px_stage_init(struct px_engine *e);
/* The chunk size of a staged request of bytes whose files need offsets aligned to align:
 * bounce_size, or smaller so that a small request still pipelines. */
uint64_t px_stage_chunk(const struct px_engine *e, uint64_t bytes, uint32_t align);
/* Starts the stager (bounce buffers, pinned; the thread) if not yet: e->lock held. */
int px_stage_start(struct px_engine *e);
void px_stage_stop(struct px_engine *e);
/* A staged request was queued (e->lock held): wake the stager. */
void px_stage_kick(struct px_engine *e);
/* Takes the first ready chunk into io (e->lock held): false if none. */
bool px_stage_take(struct px_engine *e, struct px_io *io);
/* The file I/O of a chunk ended (e->lock held), ok or not (the request's status says). */
void px_stage_io_done(struct px_engine *e, struct px_io *io);
/* Drops r's chunks that wait for file I/O and waits until r has no chunk, up to ms (e->lock
 * held on entry and return): true when none is left. */
bool px_stage_drain(struct px_engine *e, struct px_req *r, int ms);
/* Drops r's chunks that wait for file I/O (r failed; e->lock held). */
void px_stage_drop(struct px_engine *e, struct px_req *r);
/* Fails every ready chunk's request (the I/O engine broke; e->lock held); counts ended ones. */
void px_stage_fail_ready(struct px_engine *e, int err, int *finished);

/* ---- posix_uring.c / posix_pool.c: each engine ----------------------------------------------- */

struct px_ops {
    const char *name;
    /* Starts the engine: 0, or an error (for io_uring, IXL_ERR_NOT_SUPPORTED when the kernel
     * refuses it, with the reason in why). */
    int (*start)(struct px_engine *e, char *why, size_t why_len);
    void (*stop)(struct px_engine *e);
    /* A request was queued (e->lock held): start I/O. */
    void (*kick)(struct px_engine *e);
    /* Advances completions for a poller (takes e->lock if free; never blocks long). */
    void (*poll)(struct px_engine *e);
    /* A caller waits for r's end: watch it on this thread for up to budget_ns where the engine
     * can (io_uring: asleep in the ring; NULL: nothing to watch). */
    void (*wait)(struct px_engine *e, struct px_req *r, uint64_t budget_ns);
    /* Waits until r has no I/O in flight, up to ms (e->lock held on entry and return). */
    bool (*drain)(struct px_engine *e, struct px_req *r, int ms);
};

extern const struct px_ops px_uring_ops;
extern const struct px_ops px_pool_ops;

#endif

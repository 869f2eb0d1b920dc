/*
 * GDS and GDS_MT: VRAM <-> FILE/BLK through NVIDIA cuFile (GPUDirect Storage), loaded at run
 * time. See README.md for the contract.
 *
 * Two plugins share this code: GDS (gds_batch.c: cuFile's batch API, one batch thread, every
 * descriptor split at cuFile's per-buffer limit) and GDS_MT (gds_mt.c: a pool of threads
 * calling cuFileRead/cuFileWrite, each descriptor split across them). gds_engine.c holds what
 * both share: options, cuFile loading (gds_lib.c), registration, requests and the FIFO of I/O
 * pieces (gds_take/gds_done), as the POSIX plugin does for its engines.
 *
 * Locking: one mutex per engine (e->lock) guards the FIFO of requests with pieces left to
 * start and every request's progress fields. cuFile calls run without it.
 */
#ifndef IXL_GDS_H
#define IXL_GDS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "../common/ixl_cost_table.h"
#include "gds_cufile.h"
#include "gds_split.h"

/* The host's table of allocation and system calls (one per process). */
extern const struct ixl_sys *gds_sys_ptr;
static inline const struct ixl_sys *gds_sys(void)
{
    return __atomic_load_n(&gds_sys_ptr, __ATOMIC_RELAXED);
}

enum gds_kind { GDS_BATCH, GDS_THREADS };

/* A registered region: VRAM (with its cuFile buffer registration), or a FILE/BLK with the fd
 * this backend owns and its cuFile handle. */
struct gds_md {
    enum ixl_mem type;
    /* VRAM */
    uint64_t base, len;
    int dev;
    bool buf_registered;
    /* FILE / BLK */
    int fd;
    gds_CUfileHandle fh;
    bool fh_ok; /* fh is registered */
    bool rd_ok, wr_ok, append, direct;
    uint64_t vol_size; /* BLK: the volume's size */
    char name[256];    /* the path (or "fd N") for messages */
};

enum gds_state { GDS_IDLE, GDS_RUNNING, GDS_DONE, GDS_FAILED };

struct gds_req {
    struct gds_engine *e;
    bool to_file;
    size_t n;
    const struct ixl_xfer_desc *mem, *file; /* borrowed from the core until release */
    uint64_t bytes;                         /* the request's total */
    struct gds_cursor cur;                  /* the next piece to start (e->lock) */
    uint32_t inflight;
    _Atomic int state;
    int status;
    bool reported, canceled, queued;
    char msg[512];
    struct gds_req *qnext;
    uint64_t lens[]; /* the descriptors' lengths (the planner's input) */
};

/* One piece of I/O: cuFile moves len bytes between the buffer (base + buf_off) and the file
 * at off; continued after a short transfer. */
struct gds_io {
    struct gds_req *r;
    const struct gds_md *f; /* the file */
    void *base;             /* the VRAM region's first byte (cuFile's devPtr_base) */
    int64_t buf_off;        /* devPtr_offset */
    int64_t off;            /* file_offset */
    uint64_t len;           /* bytes left */
    int dev;
};

struct gds_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    const struct ixl_devops *dev;
    enum gds_kind kind;
    const struct gds_cufile *cf;
    bool compat;         /* cuFile runs in compatibility mode (no nvidia-fs) */
    bool register_bufs;  /* cuFileBufRegister VRAM regions */
    char lib[256];       /* the library as named */
    char mode_text[384]; /* how cuFile runs (version, nvidia-fs or compatibility mode) */
    char cost_path[256]; /* option cost_table */
    struct ixl_cost_table costs;
    /* GDS: the batch limits; GDS_MT: the pool */
    uint64_t entry;   /* largest batch entry */
    uint32_t entries; /* entries per batch */
    unsigned nthreads;
    uint64_t min_piece, max_piece;
    pthread_mutex_t lock;
    pthread_cond_t work; /* a request was queued, or stop */
    pthread_cond_t idle; /* an I/O finished (release waits on it) */
    struct gds_req *head, *tail;
    bool stop;
    pthread_t *threads;
    unsigned nstarted;
};

/* ---- gds_lib.c: cuFile, loaded once per process ---------------------------------------- */

/*
 * Loads cuFile from lib (dlopen), resolves its entry points and opens its driver (in device
 * 0's context), once per process and library path. IXL_OK with *out, and what cuFile says of
 * itself in mode (its version, nvidia-fs or compatibility mode) and *compat; or
 * IXL_ERR_NOT_SUPPORTED with why ("cuFile not found (libcufile.so.0: ...)", a missing entry
 * point, the driver's refusal).
 */
int gds_lib_load(const struct ixl_host *host, const char *lib, const struct gds_cufile **out,
                 gds_CUfileDrvProps *props, bool *compat, char *mode, size_t mode_len, char *why,
                 size_t why_len);
/* "CU_FILE_xxx (5011)" with the CUDA error for a driver error. */
const char *gds_err_text(gds_CUfileError e, char *buf, size_t cap);
/* The text of a negative cuFileRead/cuFileWrite result (-1: errno; else -CU_FILE_xxx). */
const char *gds_io_err_text(ssize_t res, int err, char *buf, size_t cap);

/* ---- gds_engine.c ------------------------------------------------------------------------- */

int gds_error(struct gds_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The next piece (at most max bytes; for GDS_MT max 0 means "spread over the pool") of the
 * FIFO's first request whose VRAM lies on device dev (-1: any); false if none (e->lock held). */
bool gds_take(struct gds_engine *e, uint64_t max, int dev, struct gds_io *io);
/* Accounts for an attempt on io (e->lock held): res = bytes moved (>= 0) or a negative
 * cuFile result with err its errno. Returns true when io is to be continued (short: io
 * advanced). Signals the host when the request ended. */
bool gds_done(struct gds_engine *e, struct gds_io *io, ssize_t res, int err);
/* Fails io's request with a message (e->lock held) and accounts for io as finished. */
void gds_done_fail(struct gds_engine *e, struct gds_io *io, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Makes io->dev's context current on this (own) thread; *cur caches which is. */
int gds_thread_ctx(struct gds_engine *e, int dev, int *cur);

/* ---- gds_batch.c / gds_mt.c ---------------------------------------------------------------- */

void *gds_batch_main(void *arg);
/* What to do about a batch cuFile refused (gds_batch.c). */
const char *gds_batch_hint(gds_CUfileError ce);
void *gds_mt_main(void *arg);

/* The two descriptors (gds_engine.c). */
const struct ixl_plugin_desc *gds_desc_batch(void);
const struct ixl_plugin_desc *gds_desc_mt(void);

#endif

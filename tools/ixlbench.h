/*
 * ixlbench - ixl's transfer benchmark: the declarations its files share (options, result rows,
 * the control channel between the two roles, helpers). See docs/ixlbench.md.
 *
 * Files: ixlbench.c (options, roles), ixlbench_target.c (the target role: memory on request,
 * fills and checks), ixlbench_initiator.c (the control channel, memory, the sweep),
 * ixlbench_kv.c (the KV-cache scenario), ixlbench_storage.c (storage mode: DRAM <-> FILE/BLK
 * in one agent, loopback), ixlbench_out.c (table, CSV, JSON, progress bar, plot),
 * ixlbench_util.c (clock, patterns, statistics, the metadata file, control messages).
 */
#ifndef IXLBENCH_H
#define IXLBENCH_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ixl/ixl.h>

#define IXB_MAX_OPTS 32
/* Notifications carry the control messages, and with them metadata and descriptor lists:
 * both agents raise their maximum to this. */
#define IXB_NOTIF_MAX (1u << 20)
#define IXB_EXIT_SKIP 77
/* How long the initiator waits for one control answer, and for one request. */
#define IXB_CTL_TIMEOUT_MS 60000
#define IXB_XFER_TIMEOUT_MS 120000
/* Poison written into destinations before a checked transfer. */
#define IXB_POISON 0xA5

enum ixb_role { IXB_ROLE_BOTH, IXB_ROLE_INITIATOR, IXB_ROLE_TARGET };
enum ixb_api { IXB_API_PLAIN, IXB_API_PREP };
/* The KV scenario's variants (ixlbench_kv.c); single is the baseline, always run. */
enum ixb_kv_variant {
    IXB_KV_RANDOM,
    IXB_KV_SEQUENTIAL,
    IXB_KV_MERGED,
    IXB_KV_SINGLE,
    IXB_KV_MEMCPY_RANDOM,
    IXB_KV_MEMCPY_SINGLE,
    IXB_KV_N
};

struct ixb_opts {
    enum ixb_role role;
    const char *md_file;
    const char *name; /* this process's agent (default by role) */
    const char *backend;
    bool backend_set;                 /* --backend given (storage mode defaults to POSIX) */
    struct ixl_kv opts[IXB_MAX_OPTS]; /* this process's backend (the initiator in --role both) */
    size_t n_opts;
    struct ixl_kv topts[IXB_MAX_OPTS]; /* the target's backend in --role both */
    size_t n_topts;
    enum ixl_mem init_mem, target_mem;
    int init_dev, target_dev; /* GPU index of a VRAM side (--initiator-dev, --target-dev) */
    bool target_heap;         /* target memory from mmap instead of ixl_mem_alloc */
    /* Storage mode (--target-mem FILE or BLK): one agent, the file its own loopback target. */
    const char *file;       /* FILE: the file (default: a temporary one); BLK: the volume */
    uint64_t file_size;     /* 0: the file's size, or as large as the largest row needs */
    bool direct;            /* O_DIRECT registration ("rw,direct,create:PATH") */
    bool scatter;           /* descriptors at shuffled 4 KiB-aligned offsets, not consecutive */
    bool warm;              /* read the whole file once (into the page cache) before measuring */
    bool keep_file;         /* keep a file ixlbench created */
    const char *obj_prefix; /* OBJ: objects are "PREFIX/0", "PREFIX/1", ... */
    bool op_read, op_write;
    uint64_t block_min, block_max, batch_min, batch_max;
    unsigned iters, warmup;
    uint64_t max_bytes;   /* per row: iterations are cut to stay under it */
    uint64_t max_request; /* rows whose request would be larger are skipped */
    double runtime_s;     /* 0, or a row's timed part stops after this long */
    unsigned threads, depth;
    bool check, reuse, merge;
    bool poll;         /* busy-poll ixl_xfer_status instead of sleeping in ixl_xfer_wait */
    bool cold_buffers; /* each row starts with the local memory given back to the kernel */
    enum ixb_api api;
    bool sweep, kv;
    unsigned kv_regions, kv_iters, kv_warmup;
    uint64_t kv_blocks, kv_block_size, kv_req_blocks;
    unsigned kv_variants; /* bit (1 << enum ixb_kv_variant) of each variant to run */
    uint64_t seed;
    const char *csv_file, *json_file; /* NULL: none; "-": stdout (replaces the table) */
    const char *plot_file;
    int progress; /* -1: on a terminal, 0 off, 1 on */
    bool corrupt_for_test;
    double wait_s; /* for the target's metadata (file, listener or etcd) */
    /* Finding the target without the metadata file: its listener (target --listen PORT,
     * initiator --peer HOST:PORT) or etcd (--etcd ENDPOINTS on both). */
    int listen_port; /* -1: no listener */
    const char *peer_host;
    uint16_t peer_port;
    const char *etcd;
    const char *target_name; /* whose metadata the initiator fetches */
    unsigned idle_timeout_s; /* target: exit when nothing came for this long */
    bool quiet;
    int argc; /* the command line, for the header */
    char **argv;
};

/* Storage mode: the target is a file or a volume of this agent's own. */
static inline bool ixb_storage(const struct ixb_opts *o)
{
    return o->target_mem == IXL_MEM_FILE || o->target_mem == IXL_MEM_BLK ||
           o->target_mem == IXL_MEM_OBJ;
}

/* Device mode: VRAM on a side and no --role; one agent moves its own two pools
 * (ixlbench_dev.c). With --role target/initiator, VRAM goes between two processes (NET: CUDA
 * IPC on one node) through the usual target and initiator. */
static inline bool ixb_devmode(const struct ixb_opts *o)
{
    return (o->init_mem == IXL_MEM_VRAM || o->target_mem == IXL_MEM_VRAM) &&
           o->role == IXB_ROLE_BOTH;
}

/* VRAM on a side (either mode). */
static inline bool ixb_vram(const struct ixb_opts *o)
{
    return o->init_mem == IXL_MEM_VRAM || o->target_mem == IXL_MEM_VRAM;
}

/* The dev of a side's descriptors: the GPU index for VRAM, else 0. */
static inline uint64_t ixb_init_dev(const struct ixb_opts *o)
{
    return o->init_mem == IXL_MEM_VRAM ? (uint64_t)o->init_dev : 0;
}

static inline uint64_t ixb_target_dev(const struct ixb_opts *o)
{
    return o->target_mem == IXL_MEM_VRAM ? (uint64_t)o->target_dev : 0;
}

/* Average and percentiles of a set of samples, in microseconds. */
struct ixb_summ {
    size_t n;
    double avg, p50, p99, max;
};

/* One measured row (a sweep point, or one variant of the KV scenario). */
struct ixb_row {
    char scenario[24]; /* "sweep", "kv-random", "kv-consecutive", "kv-single" */
    enum ixl_op op;
    enum ixb_api api;
    char path[32];
    uint64_t block, batch; /* batch: descriptors per request as built */
    uint64_t descs;        /* descriptors per request after merging */
    unsigned depth, threads, iters, warmup;
    uint64_t bytes; /* moved in the timed iterations */
    double seconds; /* wall time of the timed iterations */
    double gbps;
    struct ixb_summ lat, prep, post, comp;
    bool has_notif;
    struct ixb_summ notif, notif_done; /* post -> target, done -> target */
    double prep_list_us;               /* prepared lists: ixl_prep_create, local + remote */
    double iops;                       /* descriptors (as built) per second */
    int check;                         /* -1 off, 0 failed, 1 passed */
    char check_msg[200];
};

/* ---- ixlbench_util.c ------------------------------------------------------------------------ */

uint64_t ixb_now_ns(void);
/* Waits for x: ixl_xfer_wait, or with o->poll a busy loop on ixl_xfer_status (the same
 * timeout, then IXL_ERR_TIMEOUT). */
ixl_status ixb_wait(const struct ixb_opts *o, struct ixl_xfer *x, int timeout_ms);
int ixb_parse_size(const char *s, uint64_t *out);
/* "4 KiB", "64 MiB" (exact binary units, else bytes). */
const char *ixb_size_str(uint64_t v, char *buf, size_t len);
/* The pattern of seed at absolute offset off onwards: every 8-byte word differs, every seed
 * differs at every word. */
void ixb_fill(void *buf, size_t len, uint64_t seed, uint64_t off);
/* Index of the first byte that differs from the pattern, or -1. */
int64_t ixb_verify(const void *buf, size_t len, uint64_t seed, uint64_t off);
/* The pattern's byte at absolute offset off. */
uint8_t ixb_pattern_byte(uint64_t seed, uint64_t off);
/* Index of the first byte that is not b, or -1. */
int64_t ixb_verify_byte(const void *buf, size_t len, uint8_t b);
void *ixb_map(size_t len); /* page-aligned anonymous memory; NULL on failure */
void ixb_unmap(void *p, size_t len);
void ixb_summarize(double *samples_us, size_t n, struct ixb_summ *out); /* sorts samples */
const char *ixb_boot_id(void);
/* Writes the metadata file (atomically: a temporary file renamed into place). */
int ixb_md_write(const char *path, const char *agent, const void *md, size_t len);
/* Reads it; *md is the caller's to free(). */
int ixb_md_read(const char *path, void **md, size_t *len);
/* Agent with no default backend, the notification maximum raised, and backend name created
 * with opts. 77 when the backend is not there, 1 on other errors (message printed). */
int ixb_agent_make(const char *name, const char *backend, const struct ixl_kv *opts, size_t n,
                   struct ixl_agent **agent, struct ixl_backend **be);

/* A control message: a text line "WORD SEQ ARGS..." then, after '\n', an optional binary
 * payload. ixb_msg_parse splits one received message. */
struct ixb_msg {
    char line[512];
    char *argv[24];
    int argc;
    const uint8_t *payload;
    size_t payload_len;
};
int ixb_msg_parse(const void *msg, size_t len, struct ixb_msg *out);
/* Two blobs in one payload: [u64 len][bytes][u64 len][bytes]. */
int ixb_pack2(const void *a, size_t alen, const void *b, size_t blen, void **out, size_t *len);
int ixb_unpack2(const uint8_t *p, size_t len, const uint8_t **a, size_t *alen, const uint8_t **b,
                size_t *blen);

/* ---- ixlbench_target.c ---------------------------------------------------------------------- */

/* Set by a signal handler: the target role stops at its next wake-up. */
extern volatile sig_atomic_t ixb_target_stop;
/* Agent params for the exchange (--listen, --etcd), applied by ixb_agent_make. */
extern int ixb_listen_port;
extern const char *ixb_listen_addr; /* default "127.0.0.1" */
extern const char *ixb_etcd;
/* --role both: the target thread has returned (the initiator stops waiting for it). */
extern _Atomic int ixb_target_gone;
/* Runs the target until an initiator says "done" (0), a failure (1), or no backend (77). */
int ixb_target_run(const struct ixb_opts *o, const char *md_file, const char *name,
                   const struct ixl_kv *opts, size_t n_opts);

/* ---- ixlbench_initiator.c ------------------------------------------------------------------- */

/* The control channel to the target (see ixlbench_target.c for the messages). */
struct ixb_ctl {
    struct ixl_agent *agent;
    char target[IXL_NAME_MAX];
    int fd;
    pthread_mutex_t lock; /* one exchange at a time: any answer is the awaited one */
    uint64_t seq;
    long target_pid; /* > 0 once known and on this machine: a dead target fails a call */
};

struct ixb_ctl_ans {
    struct ixb_msg m;
    uint8_t *raw; /* the whole message (m.payload points into it) */
};

/* Sends "WORD SEQ ARGS" (+ payload) and waits for the answer with SEQ. 0: "ok"; 1: "bad"
 * (a failed check: *ans says where); -1: an error (printed). Thread-safe (one exchange at a
 * time). Free *ans with ixb_ctl_ans_free() after 0 or 1. */
int ixb_ctl_call(struct ixb_ctl *c, const char *word, const void *payload, size_t plen,
                 struct ixb_ctl_ans *ans, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void ixb_ctl_ans_free(struct ixb_ctl_ans *a);

/* Memory of a pool: nreg regions of rlen bytes, gap bytes apart, each registered (and the
 * whole span as well when nreg > 1, so one descriptor may cover them all). */
struct ixb_rpool { /* at the target */
    unsigned id;
    uint64_t base;
    size_t len;
    struct ixl_dlist *regions; /* one descriptor per region */
    /* Device mode: the pool is this agent's own (target_mem), filled and checked here. */
    uint8_t *mem;
    struct ixl_reg_desc reg;
    bool registered;
};

struct ixb_lpool { /* here */
    uint8_t *base;
    size_t len;
    struct ixl_reg_desc *regs;
    size_t n_regs;
    bool registered;
    bool touched; /* DRAM: its pages were faulted in (poisoned at allocation, or a row ran) */
};

struct ixb_store;

/* The initiator's state, shared by the sweep and the KV scenario. */
struct ixb_init {
    const struct ixb_opts *o;
    struct ixb_store *store; /* storage mode: the file (ctl.target is this agent's name) */
    bool loop; /* device mode: both pools are this agent's (ctl.target is its own name) */
    struct ixl_agent *agent;
    struct ixl_backend *be;
    struct ixb_ctl ctl;
    const char *name;
    bool same_host;
    unsigned next_pool;
    uint64_t seed;
    int check_failures;
    double rows_done, rows_total; /* progress */
};

/* Asks the target for a pool and loads its metadata (device mode: allocates and registers the
 * pool here, one region). */
int ixb_remote_alloc(struct ixb_init *in, uint64_t nreg, uint64_t rlen, uint64_t gap,
                     struct ixb_rpool *out);
void ixb_rpool_free(struct ixb_init *in, struct ixb_rpool *p);
/* Maps, poisons (unless fresh: DRAM left untouched, for --cold-buffers) and registers a local
 * pool. */
int ixb_local_alloc(struct ixb_init *in, uint64_t nreg, uint64_t rlen, uint64_t gap, bool fresh,
                    struct ixb_lpool *p);
void ixb_lpool_free(struct ixb_init *in, struct ixb_lpool *p);

/* Runs the sweep and/or the KV scenario against the target of md_file. 0: every data check
 * passed; 1: a failure; 77: no backend. */
int ixb_initiator_run(const struct ixb_opts *o, const char *md_file);
/* The sweep (against the target, or the file of storage mode). 0, or 1 on an error. */
int ixb_sweep(struct ixb_init *in);

/* ---- ixlbench_storage.c --------------------------------------------------------------------- */

/* Storage mode: one agent moves DRAM <-> the file or volume it registered itself (the remote
 * agent of every request is its own name). 0: every check passed; 1: a failure; 77: no backend. */
int ixb_storage_run(const struct ixb_opts *o);
/* The sweep's view of the file: per row, where descriptor k of request number r lies, and the
 * untimed fills and checks (pwrite/pread on a buffered fd of ixlbench's own). */
struct ixb_store {
    const char *path;
    enum ixl_mem type; /* IXL_MEM_FILE or IXL_MEM_BLK */
    bool direct, scatter;
    int fd;         /* O_RDWR, buffered: fills, poisons, checks */
    uint64_t size;  /* bytes the layouts use */
    uint64_t dev;   /* the dev of transfer descriptors (assigned for FILE, ours for BLK) */
    uint64_t block; /* the current row: block size, descriptors per request */
    uint64_t batch;
    uint64_t stride;  /* unit u lies at u * stride: the block (consecutive), or the block
                         rounded up to 4 KiB (scattered) */
    uint64_t n_units; /* units in the file */
    uint64_t n_reqs;  /* consecutive: requests of batch units before the walk wraps */
    uint32_t *perm;   /* scattered: a random permutation of the units */
    size_t perm_cap;
    /* OBJ (--target-mem OBJ): unit u is the whole object "PREFIX/u" of dev obj_dev0 + u (a
     * WRITE is a PUT of the whole object); n_objs objects are registered, enough for the
     * sweep's largest row. Fills and checks move objects through the backend, untimed. */
    bool obj;
    uint64_t n_objs, obj_dev0;
};
/* Lays out a row: in_flight = descriptors one iteration uses (threads x depth x batch), which
 * must fit in the file without overlapping. 0, or -1 (printed). */
int ixb_store_row(struct ixb_store *s, uint64_t block, uint64_t batch, uint64_t in_flight,
                  uint64_t seed);
/* The unit of descriptor k of request r (offset: unit * stride). Requests walk through the
 * file: consecutive ones are adjacent (consecutive layout) or take the next units of the
 * permutation (scattered), wrapping at the end. */
uint64_t ixb_store_unit(const struct ixb_store *s, uint64_t r, uint64_t k);
/* Untimed: writes the pattern of seed (poison: IXB_POISON bytes) into [off, off + len). */
int ixb_store_put(const struct ixb_store *s, uint64_t off, uint64_t len, uint64_t seed, bool poison,
                  uint8_t *scratch, size_t scratch_len);
/* Untimed: reads [off, off + len) back: -1 when it holds the pattern, else the index of the
 * first wrong byte (*got its value); -2 on a read error (printed). */
int64_t ixb_store_verify(const struct ixb_store *s, uint64_t off, uint64_t len, uint64_t seed,
                         uint8_t *scratch, size_t scratch_len, uint8_t *got);
/* Untimed, after fills: with direct I/O, the page cache's dirty pages go to the disk now, not
 * inside the timed region. 0, or -1 (printed). */
int ixb_store_settle(const struct ixb_store *s);

/* ---- ixlbench_dev.c ------------------------------------------------------------------------- */

/* Device mode: one agent moves between its own pools, one of them (or both) VRAM. 0: every
 * check passed; 1: a failure; 77: no GPU, or the backend does not move VRAM here. */
int ixb_dev_run(const struct ixb_opts *o);
/* Memory of a type: DRAM from mmap, VRAM from ixl_device_alloc on GPU dev (NULL: printed). */
void *ixb_mem_alloc(enum ixl_mem type, int dev, size_t len);
void ixb_mem_release(enum ixl_mem type, void *p, size_t len);
/* Untimed fills and checks of [off, off + len) of a pool at base of type, at pattern offset
 * off: DRAM directly, VRAM through scratch (scratch_len bytes at a time) and ixl_device_copy,
 * never touching device memory. put: 0, or -1 (printed). verify: -1 when it holds the
 * pattern, else the index of the first wrong byte from off (*got its value), -2 on a copy
 * error (printed). flip: inverts the byte at off (--corrupt-for-test). */
int ixb_mem_put(enum ixl_mem type, uint8_t *base, uint64_t off, uint64_t len, uint64_t seed,
                bool poison, uint8_t *scratch, size_t scratch_len);
int64_t ixb_mem_verify(enum ixl_mem type, const uint8_t *base, uint64_t off, uint64_t len,
                       uint64_t seed, uint8_t *scratch, size_t scratch_len, uint8_t *got);
int ixb_mem_flip(enum ixl_mem type, uint8_t *base, uint64_t off);
/* As ixb_mem_put / ixb_mem_verify, with the pattern of offset pat_off at base + off (storage
 * mode: the pattern follows the file offset). */
int ixb_mem_put_at(enum ixl_mem type, uint8_t *base, uint64_t off, uint64_t len, uint64_t seed,
                   uint64_t pat_off, bool poison, uint8_t *scratch, size_t scratch_len);
int64_t ixb_mem_verify_at(enum ixl_mem type, const uint8_t *base, uint64_t off, uint64_t len,
                          uint64_t seed, uint64_t pat_off, uint8_t *scratch, size_t scratch_len,
                          uint8_t *got);

/* ---- ixlbench_kv.c -------------------------------------------------------------------------- */

/* The KV-cache scenario (see the comment at the top of ixlbench_kv.c). 0, or 1 on an error. */
int ixb_kv_run(struct ixb_init *in);
/* The rows it measures (its variants): the initiator counts them in its progress up front. */
unsigned ixb_kv_rows(const struct ixb_opts *o);

/* ---- ixlbench_out.c ------------------------------------------------------------------------- */

int ixb_out_open(const struct ixb_opts *o); /* checks the plot's gnuplot and opens the files */
void ixb_out_header(const char *backend, const char *initiator, const char *target);
void ixb_out_section(const char *title); /* a titled table follows (table format only) */
void ixb_out_sweep_row(const struct ixb_row *r);
void ixb_out_kv_row(const struct ixb_row *r);
void ixb_out_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A ratio of two bandwidths, "what" naming them; target 0: informative only. */
void ixb_out_ratio(const char *what, double a, double b, double target);
/* Writes JSON and the plot; returns 0, or 1 when the plot failed. */
int ixb_out_close(int status);
/* The progress bar on stderr (a terminal only): done of total work units, label. */
void ixb_progress(double done, double total, const char *label);
void ixb_progress_clear(void);

#endif /* IXLBENCH_H */

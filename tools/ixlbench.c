/*
 * ixlbench - the transfer benchmark of ixl: what nixlbench is to NIXL and ucx_perftest to UCX.
 *
 *   ixlbench --role target --md-file F &           # one process serves the memory
 *   ixlbench --role initiator --md-file F [...]    # another measures against it
 *   ixlbench [...]                                 # both roles in one process
 *   ixlbench --target-mem FILE --file F [...]      # storage: DRAM <-> a file, one agent
 *   ixlbench --initiator-mem VRAM --target-mem VRAM  # device mode: GPU memory, one agent
 *   ixlbench --role target --target-mem VRAM ... &  # VRAM between two processes (NET: CUDA
 *   ixlbench --role initiator --initiator-mem VRAM --target-mem VRAM ...  # IPC on one node)
 *
 * Exit status: 0 measured and every data check passed; 1 a failure (a check, a transfer, a
 * peer); 2 bad usage; 77 the backend is not available. See docs/ixlbench.md.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ixlbench.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ixlbench [OPTION...]\n"
            "roles:\n"
            "  --role both|initiator|target  both (default): two agents in this process;\n"
            "                        target/initiator: one role each, in two processes\n"
            "  --md-file PATH        where the target publishes its metadata (required with\n"
            "                        --role target/initiator; a temporary file with both)\n"
            "  --name NAME           this process's agent name\n"
            "  --wait SEC            initiator: wait this long for the target's metadata (30)\n"
            "  --listen [ADDR:]PORT  target: serve the metadata on this port (0: any, printed) of\n"
            "                        ADDR (default 127.0.0.1; others need a cluster key)\n"
            "  --peer HOST:PORT      initiator: fetch the target's metadata from its listener\n"
            "  --etcd ENDPOINTS      both: exchange metadata through etcd (http://H:P[,...])\n"
            "  --target-name NAME    initiator with --peer/--etcd: the target's agent name\n"
            "                        (default ixlbench-target)\n"
            "  --idle-timeout SEC    target: exit after SEC without a message (600; 0: never)\n"
            "backend:\n"
            "  --backend NAME        plugin to measure (NET; storage: POSIX, or auto: the core\n"
            "                        chooses among POSIX, GDS, GDS_MT by their estimates)\n"
            "  --opt KEY=VALUE       an option of this process's backend (repeatable)\n"
            "  --target-opt KEY=VALUE  an option of the target's backend in --role both\n"
            "  --path auto|shm|cma|tcp  shorthand for --opt path=... (NET, initiator side)\n"
            "  --initiator-mem TYPE, --target-mem TYPE  memory types (DRAM; --target-mem FILE\n"
            "                        or BLK: storage mode, below; VRAM on a side: device mode,\n"
            "                        or with --role target/initiator VRAM between two processes)\n"
            "  --target-alloc ixl|heap  target memory from ixl_mem_alloc (default; NET can map\n"
            "                        it: path shm) or from mmap (NET: path cma)\n"
            "storage (--target-mem FILE|BLK; one agent, loopback; backend POSIX by default):\n"
            "  --file PATH           the file (FILE; default: a temporary file in /var/tmp,\n"
            "                        removed at exit) or the volume (BLK: a block device or a\n"
            "                        file). Its data is overwritten. --file alone means FILE\n"
            "  --file-size SIZE      size the file to SIZE (added bytes are written once);\n"
            "                        default: its size, or what the largest row needs\n"
            "  --direct              register with O_DIRECT (\"rw,direct,create:PATH\");\n"
            "                        default: buffered I/O\n"
            "  --layout consecutive|scattered  a request's descriptors at consecutive offsets\n"
            "                        (default) or at shuffled 4 KiB-aligned ones; requests walk\n"
            "                        through the whole file\n"
            "  --warm                read the whole file once (page cache) before measuring\n"
            "  --keep-file           keep a file that ixlbench created\n"
            "object storage (--target-mem OBJ, backend OBJ; the server by --opt\n"
            "  endpoint_override=URL --opt bucket=B, or AWS_ENDPOINT_URL, AWS_DEFAULT_BUCKET,\n"
            "  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION):\n"
            "  --obj-prefix PREFIX   the objects are PREFIX/0, PREFIX/1, ... (ixlbench)\n"
            "device mode (VRAM on a side; one agent moves between its own two pools):\n"
            "  --initiator-dev N, --target-dev N  GPU index of a VRAM side (0); device memory\n"
            "                        from ixl_device_alloc, filled and checked through\n"
            "                        ixl_device_copy; exit 77 when there is no GPU\n"
            "sweep:\n"
            "  --op read|write|both  operations (both: READ then WRITE; default both)\n"
            "  --block SIZE          first block size (4K); K/M/G suffixes are binary\n"
            "  --block-max SIZE      last block size, doubling (64M; --block alone: just it)\n"
            "  --batch N, --batch-max N  descriptors per request, doubling (1)\n"
            "  --iters N             timed iterations per row (1000)\n"
            "  --warmup N            untimed iterations first (10, at most an eighth of iters)\n"
            "  --max-bytes SIZE      fewer iterations where a row would move more (512M;\n"
            "                        not a time-based row's)\n"
            "  --max-request SIZE    skip rows whose request is larger (1G)\n"
            "  --runtime SEC         stop a row's timed iterations after SEC seconds (0: no\n"
            "                        limit; iterations are then a maximum)\n"
            "  --threads N           threads on the initiator's agent (1)\n"
            "  --depth N             requests in flight per thread (1)\n"
            "  --api plain|prep      descriptor lists (ixl_xfer_create) or prepared lists and\n"
            "                        index requests (ixl_xfer_create_prepped) (plain)\n"
            "  --no-check            no data checks (default: a fresh pattern each iteration,\n"
            "                        poisoned destinations, checked outside the timing)\n"
            "  --reuse               make each slot's request once and post it again\n"
            "  --poll                busy-poll ixl_xfer_status instead of ixl_xfer_wait\n"
            "  --merge               let ixl merge adjacent descriptors (default: no_merge)\n"
            "  --cold-buffers        each row starts with fresh local memory: READs fault its\n"
            "                        pages in during the timed part (as fio's buffers do),\n"
            "                        WRITE sources are filled first (default: touched once)\n"
            "scenarios:\n"
            "  --scenario sweep|kv|all  (sweep)\n"
            "  --kv-regions N (64), --kv-blocks N per region (512), --kv-block-size SIZE (32K),\n"
            "  --kv-req-blocks N per region per request (512), --kv-iters N (8),\n"
            "  --kv-warmup N (1), --kv-variants LIST: of random,sequential,merged,memcpy\n"
            "                        (all; the single-descriptor baseline always runs; with\n"
            "                        VRAM memcpy is devcopy: the copies by ixl_device_copy).\n"
            "                        VRAM: --role target/initiator with --target-mem and/or\n"
            "                        --initiator-mem VRAM (two processes; not device mode)\n"
            "output:\n"
            "  --csv[=FILE]          CSV (to stdout in place of the tables, or to FILE)\n"
            "  --json[=FILE]         JSON (to stdout in place of the tables, or to FILE)\n"
            "  --plot FILE.png       bandwidth against block size (gnuplot)\n"
            "  --progress, --no-progress  the progress bar (default: when stderr is a terminal)\n"
            "  --quiet               no header, no section titles\n"
            "  --seed N              first pattern seed (1)\n"
            "  --corrupt-for-test    flip one byte per row before its check (tests only)\n"
            "  --help, --version\n"
            "An option given where it does not apply (to the target, a mode, a scenario or a\n"
            "backend it is not for) is refused with where it belongs (exit 2).\n");
}

enum {
    O_ROLE = 256,
    O_MD,
    O_NAME,
    O_WAIT,
    O_IDLE,
    O_BACKEND,
    O_OPT,
    O_TOPT,
    O_PATH,
    O_IMEM,
    O_TMEM,
    O_IDEV,
    O_TDEV,
    O_TALLOC,
    O_FILE,
    O_FILE_SIZE,
    O_DIRECT,
    O_LAYOUT,
    O_WARM,
    O_KEEP_FILE,
    O_OBJ_PREFIX,
    O_OP,
    O_BLOCK,
    O_BLOCK_MAX,
    O_BATCH,
    O_BATCH_MAX,
    O_ITERS,
    O_WARMUP,
    O_MAX_BYTES,
    O_MAX_REQ,
    O_RUNTIME,
    O_THREADS,
    O_DEPTH,
    O_API,
    O_NO_CHECK,
    O_CHECK,
    O_REUSE,
    O_POLL,
    O_MERGE,
    O_COLD,
    O_SCENARIO,
    O_KV_REGIONS,
    O_KV_BLOCKS,
    O_KV_BSIZE,
    O_KV_REQ,
    O_KV_ITERS,
    O_KV_WARMUP,
    O_KV_VARIANTS,
    O_CSV,
    O_JSON,
    O_PLOT,
    O_PROGRESS,
    O_NO_PROGRESS,
    O_QUIET,
    O_SEED,
    O_CORRUPT,
    O_LISTEN,
    O_PEER,
    O_ETCD,
    O_TNAME,
    O_HELP,
    O_VERSION,
    O_END
};

static const struct option long_opts[] = {
    {"role", required_argument, NULL, O_ROLE},
    {"md-file", required_argument, NULL, O_MD},
    {"name", required_argument, NULL, O_NAME},
    {"wait", required_argument, NULL, O_WAIT},
    {"idle-timeout", required_argument, NULL, O_IDLE},
    {"backend", required_argument, NULL, O_BACKEND},
    {"opt", required_argument, NULL, O_OPT},
    {"target-opt", required_argument, NULL, O_TOPT},
    {"path", required_argument, NULL, O_PATH},
    {"initiator-mem", required_argument, NULL, O_IMEM},
    {"target-mem", required_argument, NULL, O_TMEM},
    {"initiator-dev", required_argument, NULL, O_IDEV},
    {"target-dev", required_argument, NULL, O_TDEV},
    {"target-alloc", required_argument, NULL, O_TALLOC},
    {"file", required_argument, NULL, O_FILE},
    {"file-size", required_argument, NULL, O_FILE_SIZE},
    {"direct", no_argument, NULL, O_DIRECT},
    {"layout", required_argument, NULL, O_LAYOUT},
    {"warm", no_argument, NULL, O_WARM},
    {"keep-file", no_argument, NULL, O_KEEP_FILE},
    {"obj-prefix", required_argument, NULL, O_OBJ_PREFIX},
    {"op", required_argument, NULL, O_OP},
    {"block", required_argument, NULL, O_BLOCK},
    {"block-max", required_argument, NULL, O_BLOCK_MAX},
    {"batch", required_argument, NULL, O_BATCH},
    {"batch-max", required_argument, NULL, O_BATCH_MAX},
    {"iters", required_argument, NULL, O_ITERS},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"max-bytes", required_argument, NULL, O_MAX_BYTES},
    {"max-request", required_argument, NULL, O_MAX_REQ},
    {"runtime", required_argument, NULL, O_RUNTIME},
    {"threads", required_argument, NULL, O_THREADS},
    {"depth", required_argument, NULL, O_DEPTH},
    {"api", required_argument, NULL, O_API},
    {"no-check", no_argument, NULL, O_NO_CHECK},
    {"check", no_argument, NULL, O_CHECK},
    {"reuse", no_argument, NULL, O_REUSE},
    {"poll", no_argument, NULL, O_POLL},
    {"merge", no_argument, NULL, O_MERGE},
    {"cold-buffers", no_argument, NULL, O_COLD},
    {"scenario", required_argument, NULL, O_SCENARIO},
    {"kv-regions", required_argument, NULL, O_KV_REGIONS},
    {"kv-blocks", required_argument, NULL, O_KV_BLOCKS},
    {"kv-block-size", required_argument, NULL, O_KV_BSIZE},
    {"kv-req-blocks", required_argument, NULL, O_KV_REQ},
    {"kv-iters", required_argument, NULL, O_KV_ITERS},
    {"kv-warmup", required_argument, NULL, O_KV_WARMUP},
    {"kv-variants", required_argument, NULL, O_KV_VARIANTS},
    {"csv", optional_argument, NULL, O_CSV},
    {"json", optional_argument, NULL, O_JSON},
    {"plot", required_argument, NULL, O_PLOT},
    {"progress", no_argument, NULL, O_PROGRESS},
    {"no-progress", no_argument, NULL, O_NO_PROGRESS},
    {"quiet", no_argument, NULL, O_QUIET},
    {"seed", required_argument, NULL, O_SEED},
    {"corrupt-for-test", no_argument, NULL, O_CORRUPT},
    {"listen", required_argument, NULL, O_LISTEN},
    {"peer", required_argument, NULL, O_PEER},
    {"etcd", required_argument, NULL, O_ETCD},
    {"target-name", required_argument, NULL, O_TNAME},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

/* Where each option applies (docs/ixlbench.md, "Where an option applies"). After parsing, the
 * run is of one kind; an option given to a kind it does not apply to, or without the scenario
 * or backend it needs, is refused with where it belongs (exit 2), never silently ignored. */
enum {
    K_TARGET = 1u << 0, /* --role target: serves memory, measures nothing */
    K_INIT = 1u << 1,   /* --role initiator (DRAM, or VRAM between two processes) */
    K_BOTH = 1u << 2,   /* one process, two agents (the default) */
    K_DEV = 1u << 3,    /* device mode: VRAM on a side, one process, one agent */
    K_STORE = 1u << 4,  /* storage mode: --target-mem FILE or BLK (or --file) */
    K_OBJ = 1u << 5,    /* object storage: --target-mem OBJ */
    K_ALL = (1u << 6) - 1,
    K_MEASURE = K_ALL & ~K_TARGET, /* every process that measures */
    N_SWEEP = 1u << 8,             /* needs the sweep (--scenario sweep or all) */
    N_KV = 1u << 9,                /* needs the KV scenario (--scenario kv or all) */
    N_NET = 1u << 10,              /* needs --backend NET */
};

#define B_MEASURE "the process that measures (the initiator, or one process), not the target"
#define B_STORE "storage mode (--target-mem FILE or BLK, or --file alone)"
#define B_SWEEP "the sweep (--scenario sweep, the default, or all)"
#define B_KV "the KV scenario (--scenario kv or all) between two agents"

static const char *const kind_names[] = {
    "the target (--role target)",
    "the initiator (--role initiator)",
    "a one-process run (--role both, the default)",
    "device mode (VRAM in one process)",
    B_STORE,
    "object storage (--target-mem OBJ)",
};

static const struct {
    int code;
    unsigned where;      /* K_* kinds, N_* needs */
    const char *belongs; /* where it belongs, for the message */
} placement[] = {
    {O_ROLE, K_ALL, NULL},
    {O_MD, K_TARGET | K_INIT | K_BOTH,
     "the two roles (--role target and --role initiator, or both in one process)"},
    {O_NAME, K_ALL, NULL},
    {O_WAIT, K_INIT, "the initiator (--role initiator): how long it waits for the target"},
    {O_IDLE, K_TARGET, "the target (--role target)"},
    {O_BACKEND, K_ALL, NULL},
    {O_OPT, K_ALL, NULL},
    {O_TOPT, K_BOTH,
     "a one-process run of two agents (--role both); give --role target its options with --opt"},
    {O_PATH, K_INIT | K_BOTH | N_NET,
     "the NET backend's initiator (--role initiator, or one "
     "process with two agents); other backends: --opt"},
    {O_IMEM, K_MEASURE, "the initiator (the target allocates what --target-mem says)"},
    {O_TMEM, K_ALL, NULL},
    {O_IDEV, K_INIT | K_DEV | K_STORE,
     "a VRAM initiator (--initiator-mem VRAM: device or storage mode, or --role initiator)"},
    {O_TDEV, K_TARGET | K_INIT | K_DEV,
     "a VRAM target (--target-mem VRAM: device mode, or --role target and initiator)"},
    {O_TALLOC, K_INIT | K_BOTH,
     "the initiator, which asks the target for its memory (--role initiator, or one process "
     "with two agents)"},
    {O_FILE, K_STORE, B_STORE},
    {O_FILE_SIZE, K_STORE, B_STORE},
    {O_DIRECT, K_STORE, B_STORE},
    {O_LAYOUT, K_STORE, B_STORE},
    {O_WARM, K_STORE, B_STORE},
    {O_KEEP_FILE, K_STORE, B_STORE},
    {O_OBJ_PREFIX, K_OBJ, "object storage (--target-mem OBJ)"},
    {O_OP, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_BLOCK, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_BLOCK_MAX, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_BATCH, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_BATCH_MAX, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_ITERS, K_MEASURE | N_SWEEP, B_SWEEP " (the KV scenario: --kv-iters)"},
    {O_WARMUP, K_MEASURE | N_SWEEP, B_SWEEP " (the KV scenario: --kv-warmup)"},
    {O_MAX_BYTES, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_MAX_REQ, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_RUNTIME, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_THREADS, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_DEPTH, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_API, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_NO_CHECK, K_MEASURE, B_MEASURE},
    {O_CHECK, K_MEASURE, B_MEASURE},
    {O_REUSE, K_MEASURE | N_SWEEP, B_SWEEP},
    {O_POLL, K_MEASURE, B_MEASURE},
    {O_MERGE, K_MEASURE | N_SWEEP, B_SWEEP " (the KV scenario has its merged variant)"},
    {O_COLD, K_INIT | K_BOTH | K_STORE | K_OBJ | N_SWEEP,
     "the sweep of DRAM on the measuring side (not the target, not device mode)"},
    {O_SCENARIO, K_MEASURE, B_MEASURE},
    {O_KV_REGIONS, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_BLOCKS, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_BSIZE, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_REQ, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_ITERS, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_WARMUP, K_INIT | K_BOTH | N_KV, B_KV},
    {O_KV_VARIANTS, K_INIT | K_BOTH | N_KV, B_KV},
    {O_CSV, K_MEASURE, B_MEASURE},
    {O_JSON, K_MEASURE, B_MEASURE},
    {O_PLOT, K_MEASURE | N_SWEEP, "the sweep of the process that measures (not the target)"},
    {O_PROGRESS, K_MEASURE, B_MEASURE},
    {O_NO_PROGRESS, K_MEASURE, B_MEASURE},
    {O_QUIET, K_ALL, NULL},
    {O_SEED, K_MEASURE, B_MEASURE},
    {O_CORRUPT, K_MEASURE, B_MEASURE},
    {O_LISTEN, K_TARGET, "the target (--role target); the initiator finds it with --peer"},
    {O_PEER, K_INIT, "the initiator (--role initiator); the target listens with --listen"},
    {O_ETCD, K_TARGET | K_INIT, "two processes (--role target and --role initiator)"},
    {O_TNAME, K_INIT, "the initiator (--role initiator) with --peer or --etcd"},
    {O_HELP, K_ALL, NULL},
    {O_VERSION, K_ALL, NULL},
};

_Static_assert(sizeof(placement) / sizeof(placement[0]) == O_END - O_ROLE,
               "every option has its place in the table");

/* The kind of run the options make (K_*); storage and --role were checked together before. */
static unsigned run_kind(const struct ixb_opts *o)
{
    if (ixb_storage(o))
        return o->target_mem == IXL_MEM_OBJ ? K_OBJ : K_STORE;
    if (o->role == IXB_ROLE_TARGET)
        return K_TARGET;
    if (o->role == IXB_ROLE_INITIATOR)
        return K_INIT;
    return ixb_devmode(o) ? K_DEV : K_BOTH;
}

/* 0, or 2 after a message for the first option given (seen) where it does not apply. */
static int check_placement(const struct ixb_opts *o, const bool *seen)
{
    unsigned kind = run_kind(o);
    const char *name = "";
    int k = 0;

    while ((1u << k) != kind)
        k++;
    for (size_t i = 0; i < sizeof(placement) / sizeof(placement[0]); i++) {
        unsigned w = placement[i].where;
        if (!seen[placement[i].code - O_ROLE])
            continue;
        for (size_t j = 0; long_opts[j].name != NULL; j++)
            if (long_opts[j].val == placement[i].code)
                name = long_opts[j].name;
        if ((w & kind) == 0) {
            fprintf(stderr, "ixlbench: --%s does not apply to %s; it belongs to %s\n", name,
                    kind_names[k], placement[i].belongs);
            return 2;
        }
        if (((w & N_SWEEP) && !o->sweep) || ((w & N_KV) && !o->kv)) {
            fprintf(stderr, "ixlbench: --%s does not apply to %s; it belongs to %s\n", name,
                    o->sweep ? "the sweep alone (--scenario sweep, the default)"
                             : "the KV scenario alone (--scenario kv)",
                    placement[i].belongs);
            return 2;
        }
        if ((w & N_NET) && strcmp(o->backend, "NET") != 0) {
            fprintf(stderr, "ixlbench: --%s does not apply to backend %s; it belongs to %s\n", name,
                    o->backend, placement[i].belongs);
            return 2;
        }
    }
    return 0;
}

static int bad(const char *opt, const char *arg)
{
    fprintf(stderr, "ixlbench: bad value for --%s: '%s' (see --help)\n", opt, arg);
    return 2;
}

static int add_kv(struct ixl_kv *kv, size_t *n, char *arg, const char *opt)
{
    char *eq = strchr(arg, '=');

    if (eq == NULL || eq == arg)
        return bad(opt, arg);
    if (*n == IXB_MAX_OPTS) {
        fprintf(stderr, "ixlbench: more than %d --%s\n", IXB_MAX_OPTS, opt);
        return 2;
    }
    *eq = '\0';
    kv[(*n)++] = (struct ixl_kv){arg, eq + 1};
    return 0;
}

static int num(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;

    if (ixb_parse_size(arg, &v) != 0 || v < lo || v > hi)
        return bad(opt, arg);
    *out = v;
    return 0;
}

static int num_u(const char *opt, const char *arg, unsigned lo, unsigned hi, unsigned *out)
{
    uint64_t v;
    int rc = num(opt, arg, lo, hi, &v);

    if (rc == 0)
        *out = (unsigned)v;
    return rc;
}

static int kv_variants(const char *arg, unsigned *out)
{
    static const struct {
        const char *name;
        unsigned bits;
    } names[] = {
        {"random", 1u << IXB_KV_RANDOM},
        {"sequential", 1u << IXB_KV_SEQUENTIAL},
        {"merged", 1u << IXB_KV_MERGED},
        {"single", 1u << IXB_KV_SINGLE},
        {"memcpy", (1u << IXB_KV_MEMCPY_RANDOM) | (1u << IXB_KV_MEMCPY_SINGLE)},
        {"all", (1u << IXB_KV_N) - 1},
    };
    unsigned bits = 1u << IXB_KV_SINGLE;
    const char *p = arg;

    while (*p != '\0') {
        size_t n = strcspn(p, ","), i;
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strlen(names[i].name) == n && strncmp(p, names[i].name, n) == 0)
                break;
        if (i == sizeof(names) / sizeof(names[0]))
            return bad("kv-variants", arg);
        bits |= names[i].bits;
        p += n;
        if (*p == ',')
            p++;
    }
    *out = bits;
    return 0;
}

static int parse(int argc, char **argv, struct ixb_opts *o)
{
    bool block_set = false, block_max_set = false, batch_max_set = false, tmem_set = false;
    bool role_set = false, seen[O_END - O_ROLE] = {false};
    const char *path = NULL;
    int c, rc = 0;
    uint64_t v;

    memset(o, 0, sizeof(*o));
    o->argc = argc;
    o->argv = argv;
    o->backend = "NET";
    o->obj_prefix = "ixlbench";
    o->init_mem = o->target_mem = IXL_MEM_DRAM;
    o->op_read = o->op_write = true;
    o->block_min = 4096;
    o->block_max = 64u << 20;
    o->batch_min = o->batch_max = 1;
    o->iters = 1000;
    o->warmup = 10;
    o->max_bytes = 512u << 20;
    o->max_request = 1u << 30;
    o->threads = o->depth = 1;
    o->check = true;
    o->sweep = true;
    o->kv_regions = 64;
    o->kv_blocks = 512;
    o->kv_block_size = 32u << 10;
    o->kv_req_blocks = 512;
    o->kv_iters = 8;
    o->kv_warmup = 1;
    o->kv_variants = (1u << IXB_KV_N) - 1;
    o->seed = 1;
    o->progress = -1;
    o->wait_s = 30;
    o->listen_port = -1;
    o->target_name = "ixlbench-target";
    o->idle_timeout_s = 600;

    while (rc == 0 && (c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (c >= O_ROLE && c < O_END)
            seen[c - O_ROLE] = true;
        switch (c) {
        case O_ROLE:
            role_set = true;
            if (strcmp(optarg, "both") == 0)
                o->role = IXB_ROLE_BOTH;
            else if (strcmp(optarg, "initiator") == 0)
                o->role = IXB_ROLE_INITIATOR;
            else if (strcmp(optarg, "target") == 0)
                o->role = IXB_ROLE_TARGET;
            else
                rc = bad("role", optarg);
            break;
        case O_MD:
            o->md_file = optarg;
            break;
        case O_NAME:
            o->name = optarg;
            break;
        case O_WAIT:
            rc = num("wait", optarg, 0, 86400, &v);
            o->wait_s = (double)v;
            break;
        case O_IDLE:
            rc = num_u("idle-timeout", optarg, 0, 86400 * 7, &o->idle_timeout_s);
            break;
        case O_BACKEND:
            o->backend = optarg;
            o->backend_set = true;
            break;
        case O_OPT:
            rc = add_kv(o->opts, &o->n_opts, optarg, "opt");
            break;
        case O_TOPT:
            rc = add_kv(o->topts, &o->n_topts, optarg, "target-opt");
            break;
        case O_PATH:
            path = optarg;
            break;
        case O_IMEM:
            if (ixl_mem_parse(optarg, &o->init_mem) != IXL_OK)
                rc = bad("initiator-mem", optarg);
            break;
        case O_TMEM:
            if (ixl_mem_parse(optarg, &o->target_mem) != IXL_OK)
                rc = bad("target-mem", optarg);
            tmem_set = true;
            break;
        case O_IDEV:
        case O_TDEV:
            rc = num(c == O_IDEV ? "initiator-dev" : "target-dev", optarg, 0, 1023, &v);
            if (rc == 0)
                *(c == O_IDEV ? &o->init_dev : &o->target_dev) = (int)v;
            break;
        case O_FILE:
            o->file = optarg;
            if (*optarg == '\0')
                rc = bad("file", optarg);
            break;
        case O_FILE_SIZE:
            rc = num("file-size", optarg, 1, INT64_MAX, &o->file_size);
            break;
        case O_DIRECT:
            o->direct = true;
            break;
        case O_LAYOUT:
            if (strcmp(optarg, "consecutive") == 0 || strcmp(optarg, "scattered") == 0)
                o->scatter = strcmp(optarg, "scattered") == 0;
            else
                rc = bad("layout", optarg);
            break;
        case O_WARM:
            o->warm = true;
            break;
        case O_KEEP_FILE:
            o->keep_file = true;
            break;
        case O_OBJ_PREFIX:
            o->obj_prefix = optarg;
            if (*optarg == '\0' || strlen(optarg) > 64)
                rc = bad("obj-prefix", optarg);
            break;
        case O_TALLOC:
            if (strcmp(optarg, "ixl") == 0 || strcmp(optarg, "heap") == 0)
                o->target_heap = strcmp(optarg, "heap") == 0;
            else
                rc = bad("target-alloc", optarg);
            break;
        case O_OP:
            o->op_read = strcmp(optarg, "read") == 0 || strcmp(optarg, "both") == 0;
            o->op_write = strcmp(optarg, "write") == 0 || strcmp(optarg, "both") == 0;
            if (!o->op_read && !o->op_write)
                rc = bad("op", optarg);
            break;
        case O_BLOCK:
            rc = num("block", optarg, 1, 1ull << 40, &o->block_min);
            block_set = true;
            break;
        case O_BLOCK_MAX:
            rc = num("block-max", optarg, 1, 1ull << 40, &o->block_max);
            block_max_set = true;
            break;
        case O_BATCH:
            rc = num("batch", optarg, 1, 1u << 24, &o->batch_min);
            break;
        case O_BATCH_MAX:
            rc = num("batch-max", optarg, 1, 1u << 24, &o->batch_max);
            batch_max_set = true;
            break;
        case O_ITERS:
            rc = num_u("iters", optarg, 1, 100000000, &o->iters);
            break;
        case O_WARMUP:
            rc = num_u("warmup", optarg, 0, 100000000, &o->warmup);
            break;
        case O_MAX_BYTES:
            rc = num("max-bytes", optarg, 1, UINT64_MAX, &o->max_bytes);
            break;
        case O_MAX_REQ:
            rc = num("max-request", optarg, 1, UINT64_MAX, &o->max_request);
            break;
        case O_RUNTIME: {
            char *end;
            errno = 0;
            o->runtime_s = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(o->runtime_s >= 0) ||
                o->runtime_s > 86400)
                rc = bad("runtime", optarg);
            break;
        }
        case O_THREADS:
            rc = num_u("threads", optarg, 1, 256, &o->threads);
            break;
        case O_DEPTH:
            rc = num_u("depth", optarg, 1, 4096, &o->depth);
            break;
        case O_API:
            if (strcmp(optarg, "plain") == 0 || strcmp(optarg, "prep") == 0)
                o->api = strcmp(optarg, "prep") == 0 ? IXB_API_PREP : IXB_API_PLAIN;
            else
                rc = bad("api", optarg);
            break;
        case O_NO_CHECK:
            o->check = false;
            break;
        case O_CHECK:
            o->check = true;
            break;
        case O_REUSE:
            o->reuse = true;
            break;
        case O_POLL:
            o->poll = true;
            break;
        case O_MERGE:
            o->merge = true;
            break;
        case O_COLD:
            o->cold_buffers = true;
            break;
        case O_SCENARIO:
            o->sweep = strcmp(optarg, "sweep") == 0 || strcmp(optarg, "all") == 0;
            o->kv = strcmp(optarg, "kv") == 0 || strcmp(optarg, "all") == 0;
            if (!o->sweep && !o->kv)
                rc = bad("scenario", optarg);
            break;
        case O_KV_REGIONS:
            rc = num_u("kv-regions", optarg, 1, 4000, &o->kv_regions);
            break;
        case O_KV_BLOCKS:
            rc = num("kv-blocks", optarg, 1, 1u << 24, &o->kv_blocks);
            break;
        case O_KV_BSIZE:
            rc = num("kv-block-size", optarg, 1, 1u << 30, &o->kv_block_size);
            break;
        case O_KV_REQ:
            rc = num("kv-req-blocks", optarg, 1, 1u << 24, &o->kv_req_blocks);
            break;
        case O_KV_ITERS:
            rc = num_u("kv-iters", optarg, 1, 1000000, &o->kv_iters);
            break;
        case O_KV_WARMUP:
            rc = num_u("kv-warmup", optarg, 0, 1000000, &o->kv_warmup);
            break;
        case O_KV_VARIANTS:
            rc = kv_variants(optarg, &o->kv_variants);
            break;
        case O_CSV:
            o->csv_file = optarg ? optarg : "-";
            break;
        case O_JSON:
            o->json_file = optarg ? optarg : "-";
            break;
        case O_PLOT:
            o->plot_file = optarg;
            break;
        case O_PROGRESS:
            o->progress = 1;
            break;
        case O_NO_PROGRESS:
            o->progress = 0;
            break;
        case O_QUIET:
            o->quiet = true;
            break;
        case O_SEED:
            rc = num("seed", optarg, 0, UINT64_MAX >> 8, &o->seed);
            break;
        case O_LISTEN: {
            /* [ADDR:]PORT: the address defaults to loopback (another one needs a cluster key
             * or IXL_INSECURE_REMOTE=1, docs/security.md). */
            const char *colon = strrchr(optarg, ':');
            static char addr[64];
            if (colon != NULL) {
                size_t n = (size_t)(colon - optarg);
                if (n == 0 || n >= sizeof(addr)) {
                    fprintf(stderr, "ixlbench: --listen '%s': want [ADDR:]PORT\n", optarg);
                    return 1;
                }
                memcpy(addr, optarg, n);
                addr[n] = '\0';
                ixb_listen_addr = addr;
            }
            rc = num("listen", colon ? colon + 1 : optarg, 0, 65535, &v);
            o->listen_port = (int)v;
            break;
        }
        case O_PEER: {
            const char *colon = strrchr(optarg, ':');
            unsigned long port = colon ? strtoul(colon + 1, NULL, 10) : 0;
            static char host[256];
            if (colon == NULL || port == 0 || port > 65535 ||
                (size_t)(colon - optarg) >= sizeof(host)) {
                rc = bad("peer", optarg);
                break;
            }
            memcpy(host, optarg, (size_t)(colon - optarg));
            host[colon - optarg] = '\0';
            o->peer_host = host;
            o->peer_port = (uint16_t)port;
            break;
        }
        case O_ETCD:
            o->etcd = optarg;
            break;
        case O_TNAME:
            o->target_name = optarg;
            break;
        case O_CORRUPT:
            o->corrupt_for_test = true;
            break;
        case O_HELP:
            usage(stdout);
            exit(0);
        case O_VERSION:
            printf("ixlbench (ixl %s)\n", ixl_version());
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (rc != 0)
        return rc;
    if (optind < argc) {
        fprintf(stderr, "ixlbench: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    /* Storage mode: --target-mem FILE|BLK, or --file alone (FILE). */
    if (o->file != NULL && !tmem_set)
        o->target_mem = IXL_MEM_FILE;
    if (ixb_storage(o) && role_set && o->role != IXB_ROLE_BOTH) {
        fprintf(stderr, "ixlbench: --target-mem %s runs in one process (no --role)\n",
                ixl_mem_name(o->target_mem));
        return 2;
    }
    if (ixb_storage(o) && !o->backend_set)
        o->backend = o->target_mem == IXL_MEM_OBJ ? "OBJ" : "POSIX";
    rc = check_placement(o, seen);
    if (rc != 0)
        return rc;
    if (seen[O_TNAME - O_ROLE] && o->peer_host == NULL && o->etcd == NULL) {
        fprintf(stderr, "ixlbench: --target-name says whose metadata --peer or --etcd fetches "
                        "(with --md-file the file says it)\n");
        return 2;
    }
    if ((seen[O_IDEV - O_ROLE] && o->init_mem != IXL_MEM_VRAM) ||
        (seen[O_TDEV - O_ROLE] && o->target_mem != IXL_MEM_VRAM)) {
        fprintf(
            stderr, "ixlbench: --%s is the GPU of a VRAM side: it needs --%s VRAM\n",
            seen[O_IDEV - O_ROLE] && o->init_mem != IXL_MEM_VRAM ? "initiator-dev" : "target-dev",
            seen[O_IDEV - O_ROLE] && o->init_mem != IXL_MEM_VRAM ? "initiator-mem" : "target-mem");
        return 2;
    }
    if (block_set && !block_max_set)
        o->block_max = o->block_min;
    if (!batch_max_set && o->batch_max < o->batch_min)
        o->batch_max = o->batch_min;
    if (o->block_max < o->block_min || o->batch_max < o->batch_min) {
        fprintf(stderr, "ixlbench: --block-max/--batch-max below --block/--batch\n");
        return 2;
    }
    if (o->kv_req_blocks > o->kv_blocks) {
        fprintf(stderr, "ixlbench: --kv-req-blocks %" PRIu64 " > --kv-blocks %" PRIu64 "\n",
                o->kv_req_blocks, o->kv_blocks);
        return 2;
    }
    if (ixb_vram(o) && !ixb_storage(o)) {
        /* Device mode (one agent), or two processes (--role; NET: CUDA IPC between them when
         * they share the node): VRAM on a side, DRAM or VRAM on the other. */
        enum ixl_mem other = o->init_mem == IXL_MEM_VRAM ? o->target_mem : o->init_mem;
        if (other != IXL_MEM_DRAM && other != IXL_MEM_VRAM) {
            fprintf(stderr, "ixlbench: VRAM moves to and from DRAM or VRAM only (not %s)\n",
                    ixl_mem_name(other));
            return 2;
        }
        if (o->cold_buffers) {
            fprintf(stderr, "ixlbench: --cold-buffers does not apply with VRAM (it gives DRAM "
                            "back to the kernel)\n");
            return 2;
        }
        if (o->kv && ixb_devmode(o)) {
            fprintf(stderr, "ixlbench: the KV scenario with VRAM runs between two processes "
                            "(--role target --target-mem ... and --role initiator), not in "
                            "device mode (one agent)\n");
            return 2;
        }
        if (o->target_heap && o->target_mem == IXL_MEM_VRAM) {
            fprintf(stderr, "ixlbench: --target-alloc heap is for DRAM at the target (not "
                            "--target-mem VRAM)\n");
            return 2;
        }
    } else if (ixb_storage(o)) {
        if (o->kv) {
            fprintf(stderr,
                    "ixlbench: the KV scenario is DRAM to DRAM (not with --target-mem "
                    "%s)\n",
                    ixl_mem_name(o->target_mem));
            return 2;
        }
        if (o->target_mem == IXL_MEM_BLK && o->file == NULL) {
            fprintf(stderr, "ixlbench: --target-mem BLK needs --file VOLUME (a block device or "
                            "a file)\n");
            return 2;
        }
        if (o->init_mem != IXL_MEM_DRAM && o->init_mem != IXL_MEM_VRAM) {
            fprintf(stderr,
                    "ixlbench: storage mode moves DRAM or VRAM (not --initiator-mem "
                    "%s)\n",
                    ixl_mem_name(o->init_mem));
            return 2;
        }
    } else if (o->target_mem != IXL_MEM_DRAM || o->init_mem != IXL_MEM_DRAM) {
        fprintf(stderr,
                "ixlbench: --%s-mem %s: ixlbench moves DRAM, VRAM, FILE, BLK or OBJ "
                "only\n",
                o->target_mem != IXL_MEM_DRAM ? "target" : "initiator",
                ixl_mem_name(o->target_mem != IXL_MEM_DRAM ? o->target_mem : o->init_mem));
        return 2;
    }
    bool found = o->role == IXB_ROLE_TARGET ? o->listen_port >= 0 || o->etcd != NULL
                                            : o->peer_host != NULL || o->etcd != NULL;
    if (o->role != IXB_ROLE_BOTH && o->md_file == NULL && !found) {
        fprintf(stderr, "ixlbench: --role %s needs --md-file PATH, %s or --etcd\n",
                o->role == IXB_ROLE_TARGET ? "target" : "initiator",
                o->role == IXB_ROLE_TARGET ? "--listen PORT" : "--peer HOST:PORT");
        return 2;
    }
    ixb_listen_port = o->role == IXB_ROLE_TARGET ? o->listen_port : -1;
    ixb_etcd = o->etcd;
    if (o->csv_file && o->json_file && strcmp(o->csv_file, "-") == 0 &&
        strcmp(o->json_file, "-") == 0) {
        fprintf(stderr, "ixlbench: --csv and --json cannot both go to stdout\n");
        return 2;
    }
    if (path != NULL) {
        if (o->n_opts == IXB_MAX_OPTS) {
            fprintf(stderr, "ixlbench: too many options\n");
            return 2;
        }
        o->opts[o->n_opts++] = (struct ixl_kv){"path", path};
    }
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    ixb_target_stop = 1;
}

struct target_thread {
    const struct ixb_opts *o;
    const char *md;
    int rc;
};

static void *target_main(void *arg)
{
    struct target_thread *t = arg;

    t->rc = ixb_target_run(t->o, t->md, "ixlbench-target", t->o->topts, t->o->n_topts);
    atomic_store(&ixb_target_gone, 1);
    return NULL;
}

static int run_both(struct ixb_opts *o)
{
    char dir[] = "/tmp/ixlbench-XXXXXX", md[64];
    const char *path = o->md_file;
    struct target_thread tt = {o, NULL, 1};
    pthread_t tid;
    int rc;

    if (path == NULL) {
        if (mkdtemp(dir) == NULL) {
            perror("ixlbench: mkdtemp");
            return 1;
        }
        snprintf(md, sizeof(md), "%s/md", dir);
        path = md;
    }
    tt.md = path;
    if (pthread_create(&tid, NULL, target_main, &tt) != 0) {
        perror("ixlbench: pthread_create");
        return 1;
    }
    rc = ixb_initiator_run(o, path);
    if (rc != 0)
        ixb_target_stop = 1; /* no "done" may have reached it */
    pthread_join(tid, NULL);
    if (o->md_file == NULL) {
        unlink(md);
        rmdir(dir);
    }
    if ((rc == 0 && tt.rc != 0) || tt.rc == IXB_EXIT_SKIP)
        rc = tt.rc;
    return rc;
}

int main(int argc, char **argv)
{
    struct ixb_opts o;
    int rc = parse(argc, argv, &o);

    if (rc != 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    if (o.role == IXB_ROLE_TARGET) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        return ixb_target_run(&o, o.md_file, o.name ? o.name : "ixlbench-target", o.opts, o.n_opts);
    }
    if (ixb_out_open(&o) != 0)
        return 1;
    if (ixb_storage(&o))
        rc = ixb_storage_run(&o);
    else if (ixb_devmode(&o))
        rc = ixb_dev_run(&o);
    else if (o.role == IXB_ROLE_INITIATOR)
        rc = ixb_initiator_run(&o, o.md_file);
    else
        rc = run_both(&o);
    if (ixb_out_close(rc) != 0 && rc == 0)
        rc = 1;
    return rc;
}

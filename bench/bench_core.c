/*
 * bench_core.c - the core's own costs, measured with the in-memory TEST plugin (no data is
 * moved: nothing is posted).
 *
 * Scenario: the KV cache of a serving engine. Each agent has 32 layers; a layer is one
 * registered region holding 156250 blocks of K and V (64 bytes each here, so that 10^7
 * descriptors fit in 640 MB of address space per agent). A prepared list has 64 runs
 * (layer x K/V) of 156250 blocks: 10^7 descriptors. Two layouts of the same memory:
 *   interleaved: [block][K|V] - K and V runs have stride 2 x len, so consecutive blocks are
 *                not adjacent and a request keeps one descriptor per block;
 *   contiguous:  [K|V][block] - stride = len, so consecutive blocks merge.
 * The memory is mapped PROT_READ|PROT_WRITE, MAP_NORESERVE and never touched: registration
 * with the TEST plugin only records addresses, and no request is posted.
 *
 * Measured (median of -r repetitions, default 11):
 *   - ixl_prep_create of the 10^7-entry list, local side and remote side (against a second
 *     agent whose metadata was loaded with ixl_md_get / ixl_md_load): ns per descriptor, and
 *     the resident-memory change of keeping the prepared lists;
 *   - ixl_xfer_create_prepped from 10^5 consecutive and 10^5 random index pairs (new random
 *     pairs for every repetition, drawn outside the timing): ms, and the descriptor count after
 *     merging;
 *   - ixl_md_load of the metadata of an agent with 10^4 registered regions: ms, blob size;
 *   - registration churn: with 10^4 regions kept registered, 100 rounds of registering 10^4
 *     regions (random free slots, random order) in one call and deregistering them (another
 *     random order) in one call: ms of rounds 1 and 100 of each.
 * Also printed, without targets: the time per prepared list, ixl_xfer_release of each request,
 * preparing 10^6 single descriptors (ixl_dlist_add, runs of one) and its resident memory, and
 * for the 10^4 regions ixl_mem_register, ixl_md_get, ixl_remote_invalidate and
 * ixl_mem_deregister (each in one call); one region per register / deregister call; preparing
 * 10^5 descriptors each in a random one of 10^4 regions (a region lookup each), before the
 * churn, after its first round and after the last, each with its page faults. With them, the page
 * faults (getrusage's minor faults) of the registration, of an ixl_md_get and an ixl_md_load
 * (median, and the first load) and of churn rounds 1 and 100: on a virtual machine a fault can cost
 * tens of microseconds, and fault counts stay meaningful on a loaded machine where times do not.
 * The count includes the pages the kernel puts in when memory is mapped populated (MAP_POPULATE,
 * MADV_POPULATE_WRITE: one per small page, one per huge page), which take no exception; `perf
 * record -e page-faults:u -g` tells the two apart.
 *
 * Exit status: 0 when every step ran (targets missed or not), 1 when an ixl call failed, 77
 * when the TEST plugin cannot be found (build with BUILD_TESTING=ON).
 *
 * Usage: bench_core [-r repetitions] [-s seed] [-o kv|single|md|churn] [-b backend]
 * -o runs one part only (for profiling): kv = prepared KV lists and requests, single = the
 * list of single descriptors, md = registration and metadata, churn = registration churn.
 * -b names the backend of the agents instead of TEST (e.g. POSIX or NET, whose per-region
 * records a registration builds too): registration and churn take any backend that takes
 * DRAM; md (ixl_md_get / ixl_md_load) one with remote transfers; kv and single register
 * untouched memory of 640 MB per agent, which only TEST takes without touching it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

#ifndef IXL_BENCH_PLUGIN_DIR
#define IXL_BENCH_PLUGIN_DIR ""
#endif

#define LAYERS 32
#define RUNS (2 * LAYERS) /* layer x K/V */
#define BLOCKS 156250ull  /* blocks per run: RUNS x BLOCKS = 10^7 */
#define BLOCK_LEN 64ull   /* bytes of one block of K (or of V) */
#define LAYER_BYTES (BLOCKS * 2 * BLOCK_LEN)
#define N_DESCS ((uint64_t)RUNS * BLOCKS)
#define N_SINGLE 1000000ull   /* descriptors of the list made without runs */
#define N_REQ 100000ull       /* index pairs of a request */
#define N_MD_REGIONS 10000ull /* regions of the metadata agent */
#define MD_REGION_LEN 4096ull
#define N_CHURN 10000ull       /* regions registered and deregistered in one call, each round */
#define CHURN_ROUNDS 100       /* rounds of that */
#define N_SINGLE_CALLS 1000ull /* calls of one region each */
#define N_LOOKUP 100000ull     /* descriptors of the list prepared over the resident regions */

/* Targets of the issue. */
#define T_PREP_NS 5.0
#define T_REQ_CONSEC_MS 1.0
#define T_REQ_RANDOM_MS 1.0
#define T_MD_LOAD_MS 10.0
#define T_CHURN_MS 10.0

static int g_reps = 11;
static const char *g_backend = "TEST";

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Minor page faults of the process so far: on a virtual machine a fault can cost tens of
 * microseconds, so the rows of the allocating steps say how many they took. */
static double minflt(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_minflt : 0;
}

/* Resident set size in KiB, from /proc/self/statm; -1 if it cannot be read. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    long size = 0, resident = -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Ends the benchmark when an ixl call failed: the numbers would mean nothing. */
static void need(int rc, struct ixl_agent *agent, const char *what)
{
    if (rc == IXL_OK)
        return;
    fprintf(stderr, "bench_core: %s: %s%s%s\n", what, ixl_strerror(rc), agent ? ": " : "",
            agent ? ixl_agent_last_error(agent) : "");
    exit(1);
}

static void *need_mem(void *p, const char *what)
{
    if (p == NULL) {
        fprintf(stderr, "bench_core: %s: out of memory\n", what);
        exit(1);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    /* xorshift64*: reproducible for a seed, and cheap. */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

/* Address space for the regions: reserved, never touched. */
static void *map_untouched(size_t len)
{
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "bench_core: mmap of %zu bytes: %s\n", len, strerror(errno));
        exit(1);
    }
    return p;
}

/* ---- the result table ---------------------------------------------------------------------- */

struct row {
    char what[72];
    double value;
    const char *unit;
    double target; /* < 0: no target (informational) */
};

static struct row g_rows[64];
static int g_n_rows;

static void add_row(const char *what, double value, const char *unit, double target)
{
    if (g_n_rows == (int)(sizeof(g_rows) / sizeof(g_rows[0])))
        return;
    struct row *r = &g_rows[g_n_rows++];
    snprintf(r->what, sizeof(r->what), "%s", what);
    r->value = value;
    r->unit = unit;
    r->target = target;
}

static void print_rows(void)
{
    printf("\n%-64s %14s %-8s %10s  %s\n", "measurement", "value", "unit", "target", "result");
    for (int i = 0; i < g_n_rows; i++) {
        const struct row *r = &g_rows[i];
        char target[32] = "-";
        const char *result = "(info)";
        if (r->target >= 0) {
            snprintf(target, sizeof(target), "< %g", r->target);
            result = r->value < r->target ? "PASS" : "MISS";
        }
        char value[32];
        if (r->value >= 1000 || r->value == (double)(int64_t)r->value)
            snprintf(value, sizeof(value), "%.0f", r->value);
        else if (r->value >= 1)
            snprintf(value, sizeof(value), "%.3f", r->value);
        else
            snprintf(value, sizeof(value), "%.3g", r->value);
        printf("%-64s %14s %-8s %10s  %s\n", r->what, value, r->unit, target, result);
    }
}

/* ---- agents and memory --------------------------------------------------------------------- */

static struct ixl_agent *make_agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = g_backend};
    struct ixl_agent *a = NULL;
    need(ixl_agent_create(name, &p, &a), NULL, "ixl_agent_create with the -b backend");
    return a;
}

/* An agent with the KV cache registered: LAYERS regions of LAYER_BYTES. */
struct kv_agent {
    struct ixl_agent *agent;
    uint8_t *base;
};

static void kv_setup(struct kv_agent *kv, const char *name)
{
    kv->agent = make_agent(name);
    kv->base = map_untouched(LAYERS * LAYER_BYTES);
    struct ixl_reg_desc regs[LAYERS];
    for (int l = 0; l < LAYERS; l++)
        regs[l] =
            (struct ixl_reg_desc){(uintptr_t)kv->base + l * LAYER_BYTES, LAYER_BYTES, 0, NULL, 0};
    need(ixl_mem_register(kv->agent, IXL_MEM_DRAM, regs, LAYERS, NULL), kv->agent,
         "ixl_mem_register (KV cache)");
}

/* The 10^7-descriptor list of kv's memory in one of the two layouts. */
static struct ixl_dlist *kv_list(const struct kv_agent *kv, int interleaved)
{
    struct ixl_run runs[RUNS];
    for (int l = 0; l < LAYERS; l++) {
        uint64_t layer = (uintptr_t)kv->base + l * LAYER_BYTES;
        for (int kvi = 0; kvi < 2; kvi++) {
            struct ixl_run *r = &runs[2 * l + kvi];
            r->len = BLOCK_LEN;
            r->count = BLOCKS;
            r->dev = 0;
            if (interleaved) {
                r->addr = layer + kvi * BLOCK_LEN;
                r->stride = 2 * BLOCK_LEN;
            } else {
                r->addr = layer + kvi * BLOCKS * BLOCK_LEN;
                r->stride = BLOCK_LEN;
            }
        }
    }
    struct ixl_dlist *list = NULL;
    need(ixl_dlist_create(IXL_MEM_DRAM, RUNS, &list), NULL, "ixl_dlist_create");
    need(ixl_dlist_add_runs(list, runs, RUNS), NULL, "ixl_dlist_add_runs");
    return list;
}

/* ---- measurements -------------------------------------------------------------------------- */

/* Median ns of ixl_prep_create(list) (each created list destroyed again); with faults, the
 * median page faults of one ixl_prep_create there. */
static double time_prep_faults(struct ixl_agent *a, const char *remote,
                               const struct ixl_dlist *list, double *faults)
{
    double *t = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    double *f = need_mem(calloc((size_t)g_reps, sizeof(double)), "faults");
    for (int i = 0; i < g_reps; i++) {
        struct ixl_prep *p = NULL;
        double f0 = minflt();
        uint64_t t0 = now_ns();
        int rc = ixl_prep_create(a, remote, list, NULL, &p);
        uint64_t t1 = now_ns();
        f[i] = minflt() - f0;
        need(rc, a, "ixl_prep_create");
        ixl_prep_destroy(p);
        t[i] = (double)(t1 - t0);
    }
    double m = median(t, g_reps);
    if (faults != NULL)
        *faults = median(f, g_reps);
    free(t);
    free(f);
    return m;
}

static double time_prep(struct ixl_agent *a, const char *remote, const struct ixl_dlist *list)
{
    return time_prep_faults(a, remote, list, NULL);
}

struct req_result {
    double create_ms; /* median */
    double release_ms;
    uint64_t descs; /* after merging */
};

/* Fresh random index pairs over the whole lists, for one repetition. */
static void random_indices(int64_t *li, int64_t *ri, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        li[i] = (int64_t)(rng_next() % N_DESCS);
        ri[i] = (int64_t)(rng_next() % N_DESCS);
    }
}

/* fresh: new random index arrays before every repetition (outside the timing), so that no
 * repetition sees the arrays of another. */
static struct req_result time_request(struct ixl_agent *a, const struct ixl_prep *lp, int64_t *li,
                                      const struct ixl_prep *rp, int64_t *ri, size_t n, int fresh)
{
    double *tc = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    double *tr = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    struct req_result res = {0};
    for (int i = 0; i < g_reps; i++) {
        if (fresh)
            random_indices(li, ri, n);
        struct ixl_xfer *x = NULL;
        uint64_t t0 = now_ns();
        int rc = ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, n, NULL, &x);
        uint64_t t1 = now_ns();
        need(rc, a, "ixl_xfer_create_prepped");
        struct ixl_xfer_info info = {.size = sizeof(info)};
        need(ixl_xfer_info(x, &info), a, "ixl_xfer_info");
        res.descs = info.desc_count;
        uint64_t t2 = now_ns();
        need(ixl_xfer_release(x), a, "ixl_xfer_release");
        uint64_t t3 = now_ns();
        tc[i] = (double)(t1 - t0) / 1e6;
        tr[i] = (double)(t3 - t2) / 1e6;
    }
    res.create_ms = median(tc, g_reps);
    res.release_ms = median(tr, g_reps);
    free(tc);
    free(tr);
    return res;
}

/* The machine's floor for a request from fresh random indices: as many descriptor pairs (32
 * bytes a side, as the plugin ABI's) computed from the indices by plain arithmetic and written,
 * then read back once, as a backend's prep_xfer reads them. No ixl: the ratio of a request to
 * it says how much of its time the machine of the day leaves to the library (the absolute
 * target is < 1 ms). */
static double floor_ms(int64_t *li, int64_t *ri, size_t n)
{
    struct pair_desc {
        uint64_t addr, len, dev, md;
    };
    struct pair_desc *d = need_mem(malloc(2 * n * sizeof(*d)), "descriptors");
    memset(d, 0, 2 * n * sizeof(*d));
    double *t = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    volatile uint64_t sink = 0;
    for (int r = 0; r < g_reps; r++) {
        random_indices(li, ri, n);
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < n; i++) {
            uint64_t a = (uint64_t)li[i], c = (uint64_t)ri[i];
            uint64_t ra = a / BLOCKS, rc = c / BLOCKS;
            d[i] = (struct pair_desc){(1u << 16) + ra * LAYER_BYTES +
                                          (a - ra * BLOCKS) * 2 * BLOCK_LEN,
                                      BLOCK_LEN, 0, ra};
            d[n + i] = (struct pair_desc){(2u << 16) + rc * LAYER_BYTES +
                                              (c - rc * BLOCKS) * 2 * BLOCK_LEN,
                                          BLOCK_LEN, 0, rc};
        }
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += d[i].addr + d[i].len + d[n + i].addr + d[n + i].md;
        t[r] = (double)(now_ns() - t0) / 1e6;
        sink += sum;
    }
    double m = median(t, g_reps);
    free(t);
    free(d);
    return m;
}

static void bench_prep_and_requests(void)
{
    struct kv_agent A, B;
    kv_setup(&A, "bench-a");
    kv_setup(&B, "bench-b");
    void *blob = NULL;
    size_t blob_len = 0;
    need(ixl_md_get(B.agent, NULL, &blob, &blob_len), B.agent, "ixl_md_get (bench-b)");
    need(ixl_md_load(A.agent, blob, blob_len, NULL, 0), A.agent,
         "ixl_md_load (bench-b into bench-a)");
    ixl_free(blob);

    const char *layout_name[2] = {"contiguous, stride = len", "interleaved, stride 2 x len"};
    struct ixl_prep *lp[2], *rp[2];
    for (int il = 1; il >= 0; il--) {
        struct ixl_dlist *llist = kv_list(&A, il), *rlist = kv_list(&B, il);
        char what[72];
        double t = time_prep(A.agent, NULL, llist);
        snprintf(what, sizeof(what), "prepare 10^7 descs, 64 runs (%s), local", layout_name[il]);
        add_row(what, t / (double)N_DESCS, "ns/desc", T_PREP_NS);
        add_row("  time per prepared list", t / 1e3, "us", -1);
        t = time_prep(A.agent, "bench-b", rlist);
        snprintf(what, sizeof(what), "prepare 10^7 descs, 64 runs (%s), remote", layout_name[il]);
        add_row(what, t / (double)N_DESCS, "ns/desc", T_PREP_NS);
        add_row("  time per prepared list", t / 1e3, "us", -1);

        /* The lists kept for the requests: what they cost in resident memory. */
        long rss0 = rss_kib();
        need(ixl_prep_create(A.agent, NULL, llist, NULL, &lp[il]), A.agent, "ixl_prep_create");
        need(ixl_prep_create(A.agent, "bench-b", rlist, NULL, &rp[il]), A.agent, "ixl_prep_create");
        long rss1 = rss_kib();
        add_row("  RSS change of keeping both lists", (double)(rss1 - rss0), "KiB", -1);
        ixl_dlist_destroy(llist);
        ixl_dlist_destroy(rlist);
    }

    /* Index arrays: 10^5 consecutive blocks of one layer's K (local from block 0 of layer 0,
     * remote from block 25000 of layer 5), and 10^5 random pairs over the whole lists, drawn
     * anew for every repetition. */
    int64_t *cl = need_mem(malloc(N_REQ * sizeof(int64_t)), "indices");
    int64_t *cr = need_mem(malloc(N_REQ * sizeof(int64_t)), "indices");
    int64_t *xl = need_mem(malloc(N_REQ * sizeof(int64_t)), "indices");
    int64_t *xr = need_mem(malloc(N_REQ * sizeof(int64_t)), "indices");
    for (uint64_t i = 0; i < N_REQ; i++) {
        cl[i] = (int64_t)i;
        cr[i] = (int64_t)(10 * BLOCKS + 25000 + i);
    }
    for (int il = 1; il >= 0; il--) {
        char what[72];
        struct req_result c = time_request(A.agent, lp[il], cl, rp[il], cr, N_REQ, 0);
        snprintf(what, sizeof(what), "request, 10^5 consecutive idx (%s)", layout_name[il]);
        add_row(what, c.create_ms, "ms", T_REQ_CONSEC_MS);
        snprintf(what, sizeof(what), "  descriptors after merging");
        add_row(what, (double)c.descs, "descs", -1);
        snprintf(what, sizeof(what), "  release of that request");
        add_row(what, c.release_ms, "ms", -1);
        struct req_result x = time_request(A.agent, lp[il], xl, rp[il], xr, N_REQ, 1);
        snprintf(what, sizeof(what), "request, 10^5 random idx, fresh each rep (%s)",
                 layout_name[il]);
        add_row(what, x.create_ms, "ms", T_REQ_RANDOM_MS);
        snprintf(what, sizeof(what), "  descriptors after merging");
        add_row(what, (double)x.descs, "descs", -1);
        snprintf(what, sizeof(what), "  release of that request");
        add_row(what, x.release_ms, "ms", -1);
    }
    add_row("  floor: the same pairs by arithmetic, written, read back", floor_ms(xl, xr, N_REQ),
            "ms", -1);
    free(cl);
    free(cr);
    free(xl);
    free(xr);
    for (int il = 0; il < 2; il++) {
        ixl_prep_destroy(lp[il]);
        ixl_prep_destroy(rp[il]);
    }
    ixl_agent_destroy(A.agent);
    ixl_agent_destroy(B.agent);
    munmap(A.base, LAYERS * LAYER_BYTES);
    munmap(B.base, LAYERS * LAYER_BYTES);
}

/* A list of single descriptors (no runs, as an application that adds blocks one by one would
 * make it): what the per-run costs of preparing are when every run has one descriptor. */
static void bench_prep_single(void)
{
    struct kv_agent A;
    kv_setup(&A, "bench-single");
    struct ixl_desc *d = need_mem(malloc(N_SINGLE * sizeof(*d)), "descriptors");
    for (uint64_t i = 0; i < N_SINGLE; i++)
        d[i] = (struct ixl_desc){(uintptr_t)A.base + i * 2 * BLOCK_LEN, BLOCK_LEN, 0};
    struct ixl_dlist *list = NULL;
    need(ixl_dlist_create(IXL_MEM_DRAM, N_SINGLE, &list), NULL, "ixl_dlist_create");
    need(ixl_dlist_add(list, d, N_SINGLE), NULL, "ixl_dlist_add");
    free(d);
    add_row("prepare 10^6 single descriptors (ixl_dlist_add), local",
            time_prep(A.agent, NULL, list) / (double)N_SINGLE, "ns/desc", -1);
    long rss0 = rss_kib();
    struct ixl_prep *p = NULL;
    need(ixl_prep_create(A.agent, NULL, list, NULL, &p), A.agent, "ixl_prep_create");
    long rss1 = rss_kib();
    add_row("  RSS change of that prepared list", (double)(rss1 - rss0), "KiB", -1);
    ixl_prep_destroy(p);
    ixl_dlist_destroy(list);
    ixl_agent_destroy(A.agent);
    munmap(A.base, LAYERS * LAYER_BYTES);
}

static void bench_metadata(void)
{
    struct ixl_agent *m = make_agent("bench-md");
    struct ixl_agent *loader = make_agent("bench-loader");
    uint8_t *base = map_untouched(N_MD_REGIONS * MD_REGION_LEN);
    struct ixl_reg_desc *regs = need_mem(calloc(N_MD_REGIONS, sizeof(*regs)), "regions");
    for (uint64_t i = 0; i < N_MD_REGIONS; i++)
        regs[i] =
            (struct ixl_reg_desc){(uintptr_t)base + i * MD_REGION_LEN, MD_REGION_LEN, 0, NULL, 0};
    double f0 = minflt();
    uint64_t t0 = now_ns();
    need(ixl_mem_register(m, IXL_MEM_DRAM, regs, N_MD_REGIONS, NULL), m,
         "ixl_mem_register (10^4 regions)");
    uint64_t t1 = now_ns();
    add_row("register 10^4 regions (one ixl_mem_register call)", (double)(t1 - t0) / 1e6, "ms", -1);
    add_row("  page faults of that", minflt() - f0, "faults", -1);

    double *tg = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    double *tl = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    double *ti = need_mem(calloc((size_t)g_reps, sizeof(double)), "timings");
    double *fg = need_mem(calloc((size_t)g_reps, sizeof(double)), "faults");
    double *fl = need_mem(calloc((size_t)g_reps, sizeof(double)), "faults");
    size_t blob_len = 0;
    for (int i = 0; i < g_reps; i++) {
        void *blob = NULL;
        double fa = minflt();
        uint64_t a = now_ns();
        need(ixl_md_get(m, NULL, &blob, &blob_len), m, "ixl_md_get (10^4 regions)");
        uint64_t b = now_ns();
        double fb = minflt();
        need(ixl_md_load(loader, blob, blob_len, NULL, 0), loader, "ixl_md_load (10^4 regions)");
        uint64_t c = now_ns();
        double fc = minflt();
        fg[i] = fb - fa;
        fl[i] = fc - fb;
        need(ixl_remote_invalidate(loader, "bench-md"), loader, "ixl_remote_invalidate");
        uint64_t d = now_ns();
        ixl_free(blob);
        tg[i] = (double)(b - a) / 1e6;
        tl[i] = (double)(c - b) / 1e6;
        ti[i] = (double)(d - c) / 1e6;
    }
    double tl0 = tl[0], fl0 = fl[0];
    add_row("load metadata with 10^4 regions (ixl_md_load)", median(tl, g_reps), "ms",
            T_MD_LOAD_MS);
    add_row("  the first load", tl0, "ms", -1);
    add_row("  page faults of a load (median)", median(fl, g_reps), "faults", -1);
    add_row("  page faults of the first load", fl0, "faults", -1);
    add_row("  metadata blob size", (double)blob_len / 1024.0, "KiB", -1);
    add_row("  ixl_md_get of that metadata", median(tg, g_reps), "ms", -1);
    add_row("  page faults of an ixl_md_get (median)", median(fg, g_reps), "faults", -1);
    add_row("  ixl_remote_invalidate of that remote", median(ti, g_reps), "ms", -1);
    free(fg);
    free(fl);
    free(tg);
    free(tl);
    free(ti);

    t0 = now_ns();
    need(ixl_mem_deregister(m, IXL_MEM_DRAM, regs, N_MD_REGIONS, NULL), m,
         "ixl_mem_deregister (10^4 regions)");
    t1 = now_ns();
    add_row("deregister 10^4 regions (one ixl_mem_deregister call)", (double)(t1 - t0) / 1e6, "ms",
            -1);
    free(regs);
    ixl_agent_destroy(loader);
    ixl_agent_destroy(m);
    munmap(base, N_MD_REGIONS * MD_REGION_LEN);
}

/* ---- registration churn -------------------------------------------------------------------- */

static void shuffle(uint64_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next() % i);
        uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* Median ns per descriptor of ixl_prep_create of N_LOOKUP descriptors, each in a random one of
 * the resident regions (so each needs its own region lookup): the lookup of the transfer path.
 * Its rows (when says when, e.g. "before churn"): that, and the median page faults of one
 * ixl_prep_create, which a loaded machine does not change (a list of 10^5 single descriptors
 * holds ~10 MB: from memory given back to the system, ~2000 faults each time). */
static void lookup_rows(struct ixl_agent *a, const uint8_t *base, const uint64_t *resident,
                        const char *when)
{
    struct ixl_desc *d = need_mem(malloc(N_LOOKUP * sizeof(*d)), "descriptors");
    for (uint64_t i = 0; i < N_LOOKUP; i++) {
        uint64_t slot = resident[rng_next() % N_CHURN];
        uint64_t off = (rng_next() % (MD_REGION_LEN / BLOCK_LEN)) * BLOCK_LEN;
        d[i] = (struct ixl_desc){(uintptr_t)base + slot * MD_REGION_LEN + off, BLOCK_LEN, 0};
    }
    struct ixl_dlist *list = NULL;
    need(ixl_dlist_create(IXL_MEM_DRAM, N_LOOKUP, &list), NULL, "ixl_dlist_create");
    need(ixl_dlist_add(list, d, N_LOOKUP), NULL, "ixl_dlist_add");
    free(d);
    double faults = 0;
    double ns = time_prep_faults(a, NULL, list, &faults) / (double)N_LOOKUP;
    ixl_dlist_destroy(list);
    char what[72];
    snprintf(what, sizeof(what), "prepare 10^5 descs in random regions of 10^4, %s", when);
    add_row(what, ns, "ns/desc", -1);
    snprintf(what, sizeof(what), "  page faults of one such prepare, %s", when);
    add_row(what, faults, "faults", -1);
}

/*
 * A serving engine's churn: N_CHURN resident regions stay registered (every fourth 4 KiB slot
 * of an address range); each round registers N_CHURN other regions, drawn at random from the
 * free slots and given in random order, in one ixl_mem_register call, then deregisters them in
 * one call, in another random order. Rounds 1 and CHURN_ROUNDS say whether the cost stays
 * flat. Then one region per call, and the lookup cost over the resident regions before the
 * rounds, after the first and after the last.
 */
static void bench_churn(void)
{
    struct ixl_agent *a = make_agent("bench-churn");
    const uint64_t slots = 4 * N_CHURN;
    uint8_t *base = map_untouched(slots * MD_REGION_LEN);
    uint64_t *resident = need_mem(malloc(N_CHURN * sizeof(uint64_t)), "slots");
    uint64_t *free_slots = need_mem(malloc(3 * N_CHURN * sizeof(uint64_t)), "slots");
    struct ixl_reg_desc *regs = need_mem(calloc(N_CHURN, sizeof(*regs)), "regions");
    for (uint64_t s = 0, nr = 0, nf = 0; s < slots; s++) {
        if (s % 4 == 0)
            resident[nr++] = s;
        else
            free_slots[nf++] = s;
    }
    for (uint64_t i = 0; i < N_CHURN; i++)
        regs[i] = (struct ixl_reg_desc){(uintptr_t)base + resident[i] * MD_REGION_LEN,
                                        MD_REGION_LEN, 0, NULL, 0};
    need(ixl_mem_register(a, IXL_MEM_DRAM, regs, N_CHURN, NULL), a,
         "ixl_mem_register (resident regions)");
    /* The lookup rows come last in the table; their measurements here, between the rounds. */
    struct row lookup[4];
    int n_before = g_n_rows;
    lookup_rows(a, base, resident, "before churn");

    double *tr = need_mem(calloc(CHURN_ROUNDS, sizeof(double)), "timings");
    double *td = need_mem(calloc(CHURN_ROUNDS, sizeof(double)), "timings");
    double *fr = need_mem(calloc(CHURN_ROUNDS, sizeof(double)), "faults");
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        shuffle(free_slots, 3 * N_CHURN);
        for (uint64_t i = 0; i < N_CHURN; i++)
            regs[i] = (struct ixl_reg_desc){(uintptr_t)base + free_slots[i] * MD_REGION_LEN,
                                            MD_REGION_LEN, 0, NULL, 0};
        double f0 = minflt();
        uint64_t t0 = now_ns();
        need(ixl_mem_register(a, IXL_MEM_DRAM, regs, N_CHURN, NULL), a, "ixl_mem_register (churn)");
        uint64_t t1 = now_ns();
        fr[round] = minflt() - f0;
        shuffle(free_slots, N_CHURN);
        for (uint64_t i = 0; i < N_CHURN; i++)
            regs[i].addr = (uintptr_t)base + free_slots[i] * MD_REGION_LEN;
        uint64_t t2 = now_ns();
        need(ixl_mem_deregister(a, IXL_MEM_DRAM, regs, N_CHURN, NULL), a,
             "ixl_mem_deregister (churn)");
        uint64_t t3 = now_ns();
        tr[round] = (double)(t1 - t0) / 1e6;
        td[round] = (double)(t3 - t2) / 1e6;
        if (round == 0)
            lookup_rows(a, base, resident, "after round 1");
    }
    int n_lookup = g_n_rows - n_before; /* (4, fewer only when the table is full) */
    memcpy(lookup, &g_rows[n_before], (size_t)n_lookup * sizeof(*lookup));
    g_n_rows = n_before;
    char what[72];
    snprintf(what, sizeof(what), "churn: register 10^4 regions in one call, round 1 (10^4 kept)");
    add_row(what, tr[0], "ms", T_CHURN_MS);
    add_row("  page faults of round 1", fr[0], "faults", -1);
    snprintf(what, sizeof(what), "churn: register 10^4 regions in one call, round %d",
             CHURN_ROUNDS);
    add_row(what, tr[CHURN_ROUNDS - 1], "ms", T_CHURN_MS);
    snprintf(what, sizeof(what), "  page faults of round %d", CHURN_ROUNDS);
    add_row(what, fr[CHURN_ROUNDS - 1], "faults", -1);
    add_row("  median over the rounds", median(tr, CHURN_ROUNDS), "ms", -1);
    add_row("churn: deregister 10^4 regions in one call, round 1", td[0], "ms", T_CHURN_MS);
    snprintf(what, sizeof(what), "churn: deregister 10^4 regions in one call, round %d",
             CHURN_ROUNDS);
    add_row(what, td[CHURN_ROUNDS - 1], "ms", T_CHURN_MS);
    add_row("  median over the rounds", median(td, CHURN_ROUNDS), "ms", -1);

    /* One region per call, N_SINGLE_CALLS of them, with the resident regions registered. */
    shuffle(free_slots, 3 * N_CHURN);
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < N_SINGLE_CALLS; i++) {
        struct ixl_reg_desc d = {(uintptr_t)base + free_slots[i] * MD_REGION_LEN, MD_REGION_LEN, 0,
                                 NULL, 0};
        need(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), a, "ixl_mem_register (one)");
    }
    uint64_t t1 = now_ns();
    shuffle(free_slots, N_SINGLE_CALLS);
    uint64_t t2 = now_ns();
    for (uint64_t i = 0; i < N_SINGLE_CALLS; i++) {
        struct ixl_reg_desc d = {(uintptr_t)base + free_slots[i] * MD_REGION_LEN, MD_REGION_LEN, 0,
                                 NULL, 0};
        need(ixl_mem_deregister(a, IXL_MEM_DRAM, &d, 1, NULL), a, "ixl_mem_deregister (one)");
    }
    uint64_t t3 = now_ns();
    add_row("register 1 region per call (10^4 kept)", (double)(t1 - t0) / 1e3 / N_SINGLE_CALLS,
            "us/call", -1);
    add_row("deregister 1 region per call (10^4 kept)", (double)(t3 - t2) / 1e3 / N_SINGLE_CALLS,
            "us/call", -1);
    for (int i = 0; i < n_lookup && g_n_rows < (int)(sizeof(g_rows) / sizeof(g_rows[0])); i++)
        g_rows[g_n_rows++] = lookup[i];
    snprintf(what, sizeof(what), "after %d rounds", CHURN_ROUNDS);
    lookup_rows(a, base, resident, what);

    free(tr);
    free(td);
    free(fr);
    free(regs);
    free(resident);
    free(free_slots);
    ixl_agent_destroy(a);
    munmap(base, slots * MD_REGION_LEN);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_core [-r repetitions (1..1000, default 11)] [-s seed] "
                    "[-o kv|single|md|churn] [-b backend (default TEST)]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            g_reps = atoi(argv[++i]);
            if (g_reps < 1 || g_reps > 1000)
                usage();
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            g_rng = strtoull(argv[++i], NULL, 0);
            if (g_rng == 0)
                usage();
        } else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
            g_backend = argv[++i];
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            only = argv[++i];
            if (strcmp(only, "kv") != 0 && strcmp(only, "single") != 0 && strcmp(only, "md") != 0 &&
                strcmp(only, "churn") != 0)
                usage();
        } else {
            usage();
        }
    }
    /* Before the first ixl call: the configuration is read once. */
    if (getenv("IXL_PLUGIN_DIR") == NULL && IXL_BENCH_PLUGIN_DIR[0] != '\0')
        setenv("IXL_PLUGIN_DIR", IXL_BENCH_PLUGIN_DIR, 1);
    struct ixl_plugin_info info = {.size = sizeof(info)};
    if (ixl_plugin_find("TEST", &info) != IXL_OK) {
        fprintf(stderr,
                "bench_core: skipped: the TEST plugin is not on the plugin path (IXL_PLUGIN_DIR="
                "'%s'); build with BUILD_TESTING=ON or point IXL_PLUGIN_DIR at "
                "<build>/tests/plugins\n",
                getenv("IXL_PLUGIN_DIR") ? getenv("IXL_PLUGIN_DIR") : "");
        return 77;
    }
    printf("bench_core: ixl %s, TEST plugin %s, backend %s, %d repetitions (medians)\n",
           ixl_version(), info.path, g_backend, g_reps);
    printf("KV cache: %d layers x K/V = %d runs of %llu blocks of %llu B = %llu descriptors\n",
           LAYERS, RUNS, (unsigned long long)BLOCKS, (unsigned long long)BLOCK_LEN,
           (unsigned long long)N_DESCS);

    if (only == NULL || strcmp(only, "kv") == 0)
        bench_prep_and_requests();
    if (only == NULL || strcmp(only, "single") == 0)
        bench_prep_single();
    if (only == NULL || strcmp(only, "md") == 0)
        bench_metadata();
    if (only == NULL || strcmp(only, "churn") == 0)
        bench_churn();
    print_rows();
    return 0;
}

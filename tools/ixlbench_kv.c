/*
 * ixlbench's KV-cache scenario: the shape vLLM moves between a prefill and a decode worker.
 *
 * Each side holds `regions` regions (layers x K/V) of `blocks` blocks of `bsize` bytes (64 x
 * 512 x 32 KiB = 1 GiB by default) in one allocation, a page apart (as separate tensors would
 * be: consecutive blocks merge within a region, not across), each region registered, and the
 * whole span too for the single-descriptor baseline (1 GiB from the first byte). Each side's
 * prepared list is one strided run per region. A request READs `req` blocks of every region from
 * the target (64 x 512 = 32,768 descriptors, 1 GiB) with a notification. Variants, run interleaved
 * (iteration i of every variant, then i + 1: drift on a shared machine hits them alike):
 *
 *   random      distinct blocks in random order, drawn independently on each side: nothing
 *               merges, every descriptor is its own scattered 32 KiB copy (the worst case)
 *   sequential  blocks 0..req-1 on both sides with no_merge: 32,768 descriptors in address
 *               order (ixl's per-descriptor cost without the scatter)
 *   merged      the same indices with merging on (ixl's default): adjacent blocks become one
 *               descriptor
 *   single      one descriptor of the same bytes (ixl_xfer_create): the baseline
 *   memcpy-random, memcpy-single  no ixl: the same copies done by memcpy inside this process
 *               with as many threads as NET's copy_threads, between two local buffers: what
 *               the memory system gives for each shape. With VRAM on a side they are
 *               devcopy-random and devcopy-single instead: the same copies by ixl_device_copy
 *               (one thread) into the local pool from a buffer of this process in the target's
 *               memory type (VRAM on --target-dev: cuMemcpyDtoD within one process for VRAM to
 *               VRAM), what the copy engines give for each shape
 *
 * Times: prepare = ixl_prep_create of both lists (once); make = ixl_xfer_create_prepped (or
 * ixl_xfer_create); post; transfer = post's return to the completion ixl_xfer_wait saw. GB/s =
 * bytes / (make + post + transfer). The target stamps each notification when it drains it:
 * notif = stamp - start of the post (one CLOCK_MONOTONIC: same machine only); notif-done =
 * stamp - the moment the initiator saw the completion (negative when the target knew first).
 * Data checks (on by default): before each iteration the target fills its memory with a fresh
 * pattern and the local memory is poisoned; after it every requested block must hold its
 * source block and every other block the poison.
 *
 * VRAM (--role target --target-mem VRAM, --role initiator --initiator-mem VRAM, either or
 * both): the pools come from ixl_device_alloc on the side's GPU and are registered as VRAM
 * (dev = the GPU index); the CPU never touches them. The target fills its pool through
 * ixl_device_copy (ixlbench_dev.c); the initiator poisons its own through a host copy of it
 * (lview, as large as the pool) and ixl_device_copy, and checks that copy after each READ.
 * The path column is NET's (cuda-ipc on one node, tcp-staged across nodes or with
 * local_paths=0).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ixlbench.h"

static const char *const kv_names[IXB_KV_N] = {
    "random", "sequential", "merged", "single", "memcpy-random", "memcpy-single",
};

struct kv_var {
    bool on;
    double *make, *post, *xfer, *lat;
    uint64_t *t_post, *t_done, *arrival; /* per iteration, warm-up included */
    double seconds;
    bool failed;
    struct ixb_row row;
};

struct kv {
    struct ixb_init *in;
    uint64_t regions, blocks, bsize, req;
    uint64_t stride; /* from one region to the next */
    struct ixb_lpool lp;
    struct ixb_rpool rp;
    uint8_t *msrc; /* the memcpy variants' source (devcopy: in the target's memory type) */
    size_t msrc_len;
    bool dev_ref;   /* VRAM on a side: the references copy with ixl_device_copy (devcopy) */
    uint8_t *lview; /* VRAM here: the host copy of the local pool that is poisoned and checked */
    unsigned copy_threads;
    struct ixl_prep *lprep, *rprep;
    struct ixl_dlist *lsingle, *rsingle;
    int64_t *li, *ri;
    uint32_t *perm;
    uint8_t *picked; /* local blocks a request wrote into */
    double prep_us;
    uint64_t rng;
    struct kv_var var[IXB_KV_N];
};

#define REGION_GAP 4096

/* A variant's name: with VRAM on a side the memcpy references are the device copies. */
static const char *var_name(const struct kv *k, int v)
{
    if (k->dev_ref && v == IXB_KV_MEMCPY_RANDOM)
        return "devcopy-random";
    if (k->dev_ref && v == IXB_KV_MEMCPY_SINGLE)
        return "devcopy-single";
    return kv_names[v];
}

/* Device memory here: the local pool into lview (one ixl_device_copy). 0, or -1 (printed). */
static int lview_get(struct kv *k)
{
    ixl_status st = ixl_device_copy(k->lview, k->lp.base, k->lp.len);

    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: KV: copying the local VRAM pool back: %s: %s\n",
                ixl_strerror(st), ixl_agent_last_error(NULL));
        return -1;
    }
    return 0;
}

/* Offset of block idx (region idx / blocks) in a pool. */
static uint64_t blk_off(const struct kv *k, int64_t idx)
{
    return (uint64_t)idx / k->blocks * k->stride + (uint64_t)idx % k->blocks * k->bsize;
}

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* req distinct blocks of [0, blocks) in random order, into perm[0..req). */
static void pick(struct kv *k)
{
    for (uint64_t i = 0; i < k->blocks; i++)
        k->perm[i] = (uint32_t)i;
    for (uint64_t i = 0; i < k->req; i++) {
        uint64_t j = i + rng_next(&k->rng) % (k->blocks - i);
        uint32_t t = k->perm[i];
        k->perm[i] = k->perm[j];
        k->perm[j] = t;
    }
}

static void indices(struct kv *k, bool random)
{
    for (uint64_t r = 0; r < k->regions; r++) {
        int64_t base = (int64_t)(r * k->blocks);
        if (!random) {
            for (uint64_t j = 0; j < k->req; j++)
                k->li[r * k->req + j] = k->ri[r * k->req + j] = base + (int64_t)j;
            continue;
        }
        pick(k);
        for (uint64_t j = 0; j < k->req; j++)
            k->li[r * k->req + j] = base + k->perm[j];
        pick(k);
        for (uint64_t j = 0; j < k->req; j++)
            k->ri[r * k->req + j] = base + k->perm[j];
    }
}

/* The local memory after a READ of pattern seed: each requested block holds its source
 * block, every other block still holds the poison. */
static int verify(struct kv *k, bool single, uint64_t seed, char *msg, size_t len)
{
    uint64_t n = k->regions * k->req;
    const uint8_t *base = k->lview != NULL ? k->lview : k->lp.base;

    if (k->lview != NULL && lview_get(k) != 0) {
        snprintf(msg, len, "the local VRAM could not be read back");
        return -1;
    }

    if (single) {
        int64_t bad = ixb_verify(base, (size_t)(n * k->bsize), seed, 0);
        if (bad >= 0) {
            snprintf(msg, len, "byte %" PRId64 " is 0x%02x, want 0x%02x", bad, base[bad],
                     ixb_pattern_byte(seed, (uint64_t)bad));
            return -1;
        }
        bad = ixb_verify_byte(base + n * k->bsize, k->lp.len - (size_t)(n * k->bsize), IXB_POISON);
        if (bad >= 0) {
            snprintf(msg, len, "byte %" PRIu64 ", past the request, was written",
                     n * k->bsize + (uint64_t)bad);
            return -1;
        }
        return 0;
    }
    memset(k->picked, 0, (size_t)(k->regions * k->blocks));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t lo = blk_off(k, k->li[i]), ro = blk_off(k, k->ri[i]);
        int64_t bad = ixb_verify(base + lo, (size_t)k->bsize, seed, ro);
        k->picked[k->li[i]] = 1;
        if (bad >= 0) {
            snprintf(msg, len,
                     "block %" PRId64 " (from remote block %" PRId64 "): byte %" PRId64
                     " is 0x%02x, want 0x%02x",
                     k->li[i], k->ri[i], bad, base[lo + (uint64_t)bad],
                     ixb_pattern_byte(seed, ro + (uint64_t)bad));
            return -1;
        }
    }
    for (uint64_t b = 0; b < k->regions * k->blocks; b++) {
        if (k->picked[b])
            continue;
        if (ixb_verify_byte(base + blk_off(k, (int64_t)b), (size_t)k->bsize, IXB_POISON) >= 0) {
            snprintf(msg, len, "block %" PRIu64 ", not in the request, was written", b);
            return -1;
        }
    }
    return 0;
}

/* ---- the memcpy references ---------------------------------------------------------------- */

struct copier {
    const struct kv *k;
    bool single;
    uint64_t from, to; /* pairs (or bytes, single) of this thread */
    pthread_t tid;
    bool started;
};

static void *copier_main(void *arg)
{
    struct copier *c = arg;
    const struct kv *k = c->k;

    if (c->single) {
        memcpy(k->lp.base + c->from, k->msrc + c->from, (size_t)(c->to - c->from));
        return NULL;
    }
    for (uint64_t i = c->from; i < c->to; i++)
        memcpy(k->lp.base + blk_off(k, k->li[i]), k->msrc + blk_off(k, k->ri[i]), (size_t)k->bsize);
    return NULL;
}

static void memcpy_run(struct kv *k, bool single)
{
    struct copier c[8];
    unsigned n = k->copy_threads;
    uint64_t total = single ? k->regions * k->req * k->bsize : k->regions * k->req;

    for (unsigned i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].k = k;
        c[i].single = single;
        c[i].from = total / n * i;
        c[i].to = i + 1 == n ? total : total / n * (i + 1);
        if (i == 0)
            continue;
        c[i].started = pthread_create(&c[i].tid, NULL, copier_main, &c[i]) == 0;
        if (!c[i].started)
            copier_main(&c[i]);
    }
    copier_main(&c[0]);
    for (unsigned i = 1; i < n; i++)
        if (c[i].started)
            pthread_join(c[i].tid, NULL);
}

/* The device-copy references (VRAM on a side): the same copies by ixl_device_copy, one
 * thread (the device layer copies on one stream per device anyway). 0, or -1 (printed). */
static int devcopy_run(struct kv *k, bool single)
{
    uint64_t n = k->regions * k->req;
    ixl_status st = IXL_OK;

    if (single)
        st = ixl_device_copy(k->lp.base, k->msrc, (size_t)(n * k->bsize));
    for (uint64_t i = 0; !single && st == IXL_OK && i < n; i++)
        st = ixl_device_copy(k->lp.base + blk_off(k, k->li[i]), k->msrc + blk_off(k, k->ri[i]),
                             (size_t)k->bsize);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: KV %s: ixl_device_copy: %s: %s\n",
                single ? "devcopy-single" : "devcopy-random", ixl_strerror(st),
                ixl_agent_last_error(NULL));
        return -1;
    }
    return 0;
}

/* ---- one iteration of one variant --------------------------------------------------------- */

static int run_one(struct kv *k, enum ixb_kv_variant v, unsigned it, unsigned w)
{
    struct ixb_init *in = k->in;
    const struct ixb_opts *o = in->o;
    struct kv_var *kv = &k->var[v];
    uint64_t nd = k->regions * k->req;
    bool single = v == IXB_KV_SINGLE || v == IXB_KV_MEMCPY_SINGLE;
    bool record = it >= w;
    uint64_t seed = in->seed++, t0, t1, t2, t3;
    struct ixl_xfer *x = NULL;
    struct ixl_xfer_info info = {.size = sizeof(info)};
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NOTIF};
    struct ixb_ctl_ans a;
    char tag[64];
    ixl_status st;

    if (v == IXB_KV_RANDOM || v == IXB_KV_MEMCPY_RANDOM)
        indices(k, true);
    else if (!single)
        indices(k, false);
    if (v == IXB_KV_MEMCPY_RANDOM || v == IXB_KV_MEMCPY_SINGLE) {
        t0 = ixb_now_ns();
        if (k->dev_ref) {
            if (devcopy_run(k, single) != 0)
                return -1;
        } else {
            memcpy_run(k, single);
        }
        t1 = ixb_now_ns();
        if (record) {
            kv->make[it - w] = kv->post[it - w] = 0;
            kv->xfer[it - w] = kv->lat[it - w] = (double)(t1 - t0) / 1e3;
            kv->seconds += (double)(t1 - t0) / 1e9;
        }
        return 0;
    }
    if (o->check) {
        if (ixb_ctl_call(&in->ctl, "fill", NULL, 0, &a, "%u %" PRIu64 " 0 %zu 0 1", k->rp.id, seed,
                         k->rp.len) != 0)
            return -1;
        ixb_ctl_ans_free(&a);
        /* VRAM: through lview, as large as the pool (one memset, one copy). */
        if (ixb_mem_put(o->init_mem, k->lp.base, 0, k->lp.len, 0, true, k->lview, k->lp.len) != 0)
            return -1;
    }
    snprintf(tag, sizeof(tag), "kvn.%s.%u", kv_names[v], it);
    p.notif = tag;
    p.notif_len = strlen(tag);
    if (v == IXB_KV_SEQUENTIAL) {
        p.field_mask |= IXL_XFER_F_NO_MERGE;
        p.no_merge = true;
    }
    t0 = ixb_now_ns();
    if (single)
        st =
            ixl_xfer_create(in->agent, IXL_OP_READ, k->lsingle, k->rsingle, in->ctl.target, &p, &x);
    else
        st = ixl_xfer_create_prepped(in->agent, IXL_OP_READ, k->lprep, k->li, k->rprep, k->ri,
                                     (size_t)nd, &p, &x);
    t1 = ixb_now_ns();
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: KV %s: making the request: %s: %s\n", kv_names[v],
                ixl_strerror(st), ixl_agent_last_error(in->agent));
        return -1;
    }
    st = ixl_xfer_post(x);
    t2 = ixb_now_ns();
    if (st == IXL_IN_PROGRESS)
        st = ixb_wait(in->o, x, IXB_XFER_TIMEOUT_MS);
    t3 = ixb_now_ns();
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: KV %s: the READ failed: %s: %s\n", kv_names[v], ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        if (ixl_xfer_release(x) != IXL_OK)
            fprintf(stderr, "ixlbench: KV release: %s\n", ixl_agent_last_error(in->agent));
        return -1;
    }
    if (kv->row.path[0] == '\0' && ixl_xfer_info(x, &info) == IXL_OK) {
        snprintf(kv->row.path, sizeof(kv->row.path), "%s",
                 info.path && info.path[0] ? info.path : "-");
        kv->row.descs = info.desc_count;
    }
    if (ixl_xfer_release(x) != IXL_OK) {
        fprintf(stderr, "ixlbench: KV release: %s\n", ixl_agent_last_error(in->agent));
        return -1;
    }
    kv->t_post[it] = t1;
    kv->t_done[it] = t3;
    if (record) {
        kv->make[it - w] = (double)(t1 - t0) / 1e3;
        kv->post[it - w] = (double)(t2 - t1) / 1e3;
        kv->xfer[it - w] = (double)(t3 - t2) / 1e3;
        kv->lat[it - w] = (double)(t3 - t0) / 1e3;
        kv->seconds += (double)(t3 - t0) / 1e9;
    }
    if (o->check && !kv->failed) {
        char m[160];
        if (o->corrupt_for_test && it == w && ixb_mem_flip(o->init_mem, k->lp.base, k->lp.len / 3))
            return -1;
        if (verify(k, single, seed, m, sizeof(m)) != 0) {
            snprintf(kv->row.check_msg, sizeof(kv->row.check_msg), "iteration %u: %s", it, m);
            kv->failed = true;
        }
    }
    return 0;
}

/* The target's stamps of the notifications: lines "kvn.VARIANT.ITER NS". */
static int fetch_notes(struct kv *k, unsigned total)
{
    struct ixb_ctl_ans a;
    const char *p, *end;

    if (ixb_ctl_call(&k->in->ctl, "notes", NULL, 0, &a, NULL) != 0)
        return -1;
    p = (const char *)a.m.payload;
    end = p + a.m.payload_len;
    while (p != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[128], name[64];
        unsigned it;
        uint64_t ns;
        if (l < sizeof(line)) {
            memcpy(line, p, l);
            line[l] = '\0';
            if (sscanf(line, "kvn.%63[a-z-].%u %" SCNu64, name, &it, &ns) == 3 && it < total)
                for (int v = 0; v < IXB_KV_N; v++)
                    if (k->var[v].on && strcmp(name, kv_names[v]) == 0)
                        k->var[v].arrival[it] = ns;
        }
        p = nl ? nl + 1 : NULL;
    }
    ixb_ctl_ans_free(&a);
    return 0;
}

static void var_free(struct kv_var *kv)
{
    free(kv->make);
    free(kv->post);
    free(kv->xfer);
    free(kv->lat);
    free(kv->t_post);
    free(kv->t_done);
    free(kv->arrival);
}

static int var_init(struct kv_var *kv, unsigned n, unsigned total)
{
    kv->make = calloc(n, sizeof(double));
    kv->post = calloc(n, sizeof(double));
    kv->xfer = calloc(n, sizeof(double));
    kv->lat = calloc(n, sizeof(double));
    kv->t_post = calloc(total, sizeof(uint64_t));
    kv->t_done = calloc(total, sizeof(uint64_t));
    kv->arrival = calloc(total, sizeof(uint64_t));
    return kv->make && kv->post && kv->xfer && kv->lat && kv->t_post && kv->t_done && kv->arrival
               ? 0
               : -1;
}

/* The row of a variant once every iteration ran. */
static void var_row(struct kv *k, enum ixb_kv_variant v, unsigned w, unsigned n)
{
    struct ixb_init *in = k->in;
    struct kv_var *kv = &k->var[v];
    struct ixb_row *row = &kv->row;
    bool single = v == IXB_KV_SINGLE || v == IXB_KV_MEMCPY_SINGLE;
    bool ref = v == IXB_KV_MEMCPY_RANDOM || v == IXB_KV_MEMCPY_SINGLE;
    uint64_t bytes = k->regions * k->req * k->bsize;
    double *nt = calloc(n + 1, sizeof(double)), *ntd = calloc(n + 1, sizeof(double));
    size_t m = 0;

    snprintf(row->scenario, sizeof(row->scenario), "kv-%s", var_name(k, v));
    if (ref) {
        snprintf(row->path, sizeof(row->path), "%s", k->dev_ref ? "device-copy" : "memcpy");
        row->descs = single ? 1 : k->regions * k->req;
    }
    row->op = IXL_OP_READ;
    row->api = single ? IXB_API_PLAIN : IXB_API_PREP;
    row->block = single ? bytes : k->bsize;
    row->batch = single ? 1 : k->regions * k->req;
    row->depth = 1;
    row->threads = ref && !k->dev_ref ? k->copy_threads : 1;
    row->iters = n;
    row->warmup = w;
    row->bytes = bytes * n;
    row->seconds = kv->seconds;
    row->gbps = kv->seconds > 0 ? (double)row->bytes / kv->seconds / 1e9 : 0;
    row->prep_list_us = single || ref ? 0 : k->prep_us;
    ixb_summarize(kv->make, n, &row->prep);
    ixb_summarize(kv->post, n, &row->post);
    ixb_summarize(kv->xfer, n, &row->comp);
    ixb_summarize(kv->lat, n, &row->lat);
    row->check = ref || !in->o->check ? -1 : !kv->failed;
    if (kv->failed)
        in->check_failures++;
    if (!ref && nt != NULL && ntd != NULL) {
        for (unsigned it = w; it < w + n; it++) {
            if (kv->arrival[it] == 0)
                continue;
            nt[m] = ((double)kv->arrival[it] - (double)kv->t_post[it]) / 1e3;
            ntd[m] = ((double)kv->arrival[it] - (double)kv->t_done[it]) / 1e3;
            m++;
        }
        if (m < n)
            ixb_out_note("KV %s: the target saw %zu of %u notifications", kv_names[v], m, n);
        /* One clock only on one machine. */
        if (in->same_host && m > 0) {
            row->has_notif = true;
            ixb_summarize(nt, m, &row->notif);
            ixb_summarize(ntd, m, &row->notif_done);
        }
    }
    free(nt);
    free(ntd);
}

/* Both prepared lists (one strided run per region), and the single-descriptor lists. */
static int make_lists(struct kv *k)
{
    struct ixb_init *in = k->in;
    const struct ixb_opts *o = in->o;
    struct ixl_dlist *l = NULL, *r = NULL;
    uint64_t bytes = k->regions * k->req * k->bsize, a;
    uint64_t ldev = ixb_init_dev(o), rdev = ixb_target_dev(o);
    struct ixl_desc ld = {(uint64_t)(uintptr_t)k->lp.base, bytes, ldev},
                    rd = {k->rp.base, bytes, rdev};
    ixl_status st = ixl_dlist_create(o->init_mem, (size_t)k->regions, &l);

    if (st == IXL_OK)
        st = ixl_dlist_create(o->target_mem, (size_t)k->regions, &r);
    for (uint64_t i = 0; st == IXL_OK && i < k->regions; i++) {
        struct ixl_desc reg;
        st = ixl_dlist_get(k->rp.regions, i, &reg);
        struct ixl_run lr = {(uint64_t)(uintptr_t)k->lp.base + i * k->stride, k->bsize, k->bsize,
                             k->blocks, ldev};
        struct ixl_run rr = {reg.addr, k->bsize, k->bsize, k->blocks, rdev};
        if (st == IXL_OK)
            st = ixl_dlist_add_runs(l, &lr, 1);
        if (st == IXL_OK)
            st = ixl_dlist_add_runs(r, &rr, 1);
    }
    a = ixb_now_ns();
    if (st == IXL_OK)
        st = ixl_prep_create(in->agent, NULL, l, NULL, &k->lprep);
    if (st == IXL_OK)
        st = ixl_prep_create(in->agent, in->ctl.target, r, NULL, &k->rprep);
    k->prep_us = (double)(ixb_now_ns() - a) / 1e3;
    if (st == IXL_OK)
        st = ixl_dlist_create(o->init_mem, 1, &k->lsingle);
    if (st == IXL_OK)
        st = ixl_dlist_create(o->target_mem, 1, &k->rsingle);
    if (st == IXL_OK)
        st = ixl_dlist_add(k->lsingle, &ld, 1);
    if (st == IXL_OK)
        st = ixl_dlist_add(k->rsingle, &rd, 1);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: KV lists: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        return -1;
    }
    return 0;
}

/* NET's copy_threads (the memcpy references use as many threads), 1 if it has none. */
static unsigned backend_copy_threads(struct ixb_init *in)
{
    const struct ixl_kv *kv;
    size_t n;
    unsigned t = 1;

    if (ixl_backend_params(in->be, &kv, &n) == IXL_OK)
        for (size_t i = 0; i < n; i++)
            if (strcmp(kv[i].key, "copy_threads") == 0)
                t = (unsigned)strtoul(kv[i].value, NULL, 10);
    return t < 1 ? 1 : t > 8 ? 8 : t;
}

unsigned ixb_kv_rows(const struct ixb_opts *o)
{
    unsigned n = 0;

    for (int v = 0; v < IXB_KV_N; v++)
        n += v == IXB_KV_SINGLE || (o->kv_variants & (1u << v));
    return n;
}

int ixb_kv_run(struct ixb_init *in)
{
    const struct ixb_opts *o = in->o;
    unsigned w = o->kv_warmup, n = o->kv_iters, total = w + n, n_on = 0;
    char title[480], b1[32], b2[32], b3[32], sides[96] = "";
    struct kv k;
    int rc = 1;

    memset(&k, 0, sizeof(k));
    k.in = in;
    k.regions = o->kv_regions;
    k.blocks = o->kv_blocks;
    k.bsize = o->kv_block_size;
    k.req = o->kv_req_blocks;
    k.stride = k.blocks * k.bsize + REGION_GAP;
    k.rng = o->seed * 0x2545F4914F6CDD1Dull + 1;
    k.copy_threads = backend_copy_threads(in);
    k.dev_ref = ixb_vram(o);
    for (int v = 0; v < IXB_KV_N; v++) {
        k.var[v].on = v == IXB_KV_SINGLE || (o->kv_variants & (1u << v));
        n_on += k.var[v].on;
        if (k.var[v].on && var_init(&k.var[v], n, total) != 0)
            goto oom;
    }
    k.li = calloc((size_t)(k.regions * k.req), sizeof(int64_t));
    k.ri = calloc((size_t)(k.regions * k.req), sizeof(int64_t));
    k.perm = calloc((size_t)k.blocks, sizeof(uint32_t));
    k.picked = calloc((size_t)(k.regions * k.blocks), 1);
    if (!k.li || !k.ri || !k.perm || !k.picked)
        goto oom;
    if (ixb_remote_alloc(in, k.regions, k.blocks * k.bsize, REGION_GAP, &k.rp) != 0 ||
        ixb_local_alloc(in, k.regions, k.blocks * k.bsize, REGION_GAP, false, &k.lp) != 0 ||
        make_lists(&k) != 0)
        goto out;
    if (o->init_mem == IXL_MEM_VRAM && o->check) {
        k.lview = ixb_map(k.lp.len);
        if (k.lview == NULL)
            goto oom;
    }
    if (k.var[IXB_KV_MEMCPY_RANDOM].on || k.var[IXB_KV_MEMCPY_SINGLE].on) {
        k.msrc_len = k.lp.len;
        if (k.dev_ref) {
            /* the device copies' source: the target's memory type, on its GPU */
            k.msrc = ixb_mem_alloc(o->target_mem, o->target_dev, k.msrc_len);
            if (k.msrc == NULL)
                goto out;
            if (o->target_mem != IXL_MEM_VRAM)
                ixb_fill(k.msrc, k.msrc_len, 12345, 0);
        } else {
            k.msrc = ixb_map(k.msrc_len);
            if (k.msrc == NULL)
                goto oom;
            ixb_fill(k.msrc, k.msrc_len, 12345, 0);
        }
    }
    if (ixb_vram(o)) {
        char im[32] = "DRAM", tm[32] = "DRAM";
        if (o->init_mem == IXL_MEM_VRAM)
            snprintf(im, sizeof(im), "VRAM of GPU %d", o->init_dev);
        if (o->target_mem == IXL_MEM_VRAM)
            snprintf(tm, sizeof(tm), "VRAM of GPU %d", o->target_dev);
        snprintf(sides, sizeof(sides), " (initiator %s, target %s)", im, tm);
    }
    snprintf(title, sizeof(title),
             "KV cache: %" PRIu64 " regions x %" PRIu64
             " blocks x %s = %s per side%s; READ of %" PRIu64 " blocks x %" PRIu64
             " regions = %" PRIu64 " descriptors (%s) per request, with a "
             "notification; prepared lists (ixl_prep_create, both sides): %.0f us; %u "
             "iterations (+%u warm-up), variants interleaved",
             k.regions, k.blocks, ixb_size_str(k.bsize, b1, sizeof(b1)),
             ixb_size_str(k.regions * k.blocks * k.bsize, b2, sizeof(b2)), sides, k.req, k.regions,
             k.regions * k.req, ixb_size_str(k.regions * k.req * k.bsize, b3, sizeof(b3)),
             k.prep_us, n, w);
    ixb_out_section(title);
    for (unsigned it = 0; it < total; it++)
        for (int v = 0; v < IXB_KV_N; v++) {
            if (!k.var[v].on)
                continue;
            ixb_progress(in->rows_done + (double)n_on * it / total, in->rows_total, "KV cache");
            if (run_one(&k, (enum ixb_kv_variant)v, it, w) != 0)
                goto out;
        }
    if (fetch_notes(&k, total) != 0)
        goto out;
    for (int v = 0; v < IXB_KV_N; v++)
        if (k.var[v].on) {
            var_row(&k, (enum ixb_kv_variant)v, w, n);
            ixb_out_kv_row(&k.var[v].row);
        }
    in->rows_done += n_on;
    {
        static const struct {
            enum ixb_kv_variant v, base;
            double target;
        } ratios[] = {
            {IXB_KV_RANDOM, IXB_KV_SINGLE, 0.8},
            {IXB_KV_SEQUENTIAL, IXB_KV_SINGLE, 0.8},
            {IXB_KV_MERGED, IXB_KV_SINGLE, 0},
            {IXB_KV_MEMCPY_RANDOM, IXB_KV_MEMCPY_SINGLE, 0},
            {IXB_KV_RANDOM, IXB_KV_MEMCPY_RANDOM, 0},
            {IXB_KV_SINGLE, IXB_KV_MEMCPY_SINGLE, 0}, /* devcopy only: IPC vs DtoD in one */
        };
        for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
            const struct ixb_row *a = &k.var[ratios[i].v].row, *b = &k.var[ratios[i].base].row;
            char what[128];
            if (!k.var[ratios[i].v].on || !k.var[ratios[i].base].on || b->gbps <= 0 ||
                (ratios[i].v == IXB_KV_SINGLE && ratios[i].base == IXB_KV_MEMCPY_SINGLE &&
                 !k.dev_ref))
                continue;
            snprintf(what, sizeof(what), "%s / %s", var_name(&k, ratios[i].v),
                     var_name(&k, ratios[i].base));
            ixb_out_ratio(what, a->gbps, b->gbps, ratios[i].target);
        }
    }
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "ixlbench: out of memory for the KV scenario\n");
out:
    ixl_prep_destroy(k.lprep);
    ixl_prep_destroy(k.rprep);
    ixl_dlist_destroy(k.lsingle);
    ixl_dlist_destroy(k.rsingle);
    ixb_unmap(k.lview, k.lp.len);
    if (k.lp.base != NULL)
        ixb_lpool_free(in, &k.lp);
    ixl_dlist_destroy(k.rp.regions);
    if (k.dev_ref)
        ixb_mem_release(o->target_mem, k.msrc, k.msrc_len);
    else
        ixb_unmap(k.msrc, k.msrc_len);
    for (int v = 0; v < IXB_KV_N; v++)
        var_free(&k.var[v]);
    free(k.li);
    free(k.ri);
    free(k.perm);
    free(k.picked);
    return rc;
}

/*
 * ixlbench's initiator role: finds the target through its metadata file, says hello (with its
 * own metadata, so the target can answer), asks it for memory, then measures.
 *
 * Sweep rows. Each of `threads` threads owns `depth` slots; a slot is one request of `batch`
 * descriptors of `block` bytes, at the same offsets in the local and the target pool:
 *   slot (t, s) at (t * depth + s) * slot_bytes, descriptor k at + k * block.
 * One iteration = every thread runs its `depth` requests. With data checks on (the default),
 * iterations are rounds: untimed set-up (READ: the target fills a fresh pattern, the local
 * destination is poisoned; WRITE: the local source gets a fresh pattern), then the timed part
 * (each thread creates and posts its requests, then waits for them), then the untimed check
 * (READ: here; WRITE: the target checks, on request). With checks off each thread keeps
 * `depth` requests in flight without pause (a slot is re-posted as soon as it completed).
 *
 * Times per request: prepare = ixl_xfer_create / ixl_xfer_create_prepped, post = inside
 * ixl_xfer_post, complete = from post's return to the completion seen by ixl_xfer_wait
 * (with --poll: by a busy loop on ixl_xfer_status),
 * latency = post + complete. GB/s = bytes of the timed iterations / their wall time
 * (creation and release included: an application pays them).
 *
 * Storage mode (ixlbench_storage.c) runs the same rows against a file the agent registered
 * itself: the remote agent is its own name, the local slots are laid out as above, and each
 * request's file side is computed when the request is made (requests walk through the file:
 * see ixb_store_unit()); fills and checks are pwrite/pread on ixlbench's own fd, untimed.
 *
 * The KV scenario: ixlbench_kv.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ixlbench.h"

/* ---- the control channel ------------------------------------------------------------------ */

void ixb_ctl_ans_free(struct ixb_ctl_ans *a)
{
    free(a->raw);
    a->raw = NULL;
}

int ixb_ctl_call(struct ixb_ctl *c, const char *word, const void *payload, size_t plen,
                 struct ixb_ctl_ans *ans, const char *fmt, ...)
{
    char line[480], args[400] = "";
    uint8_t *msg;
    size_t ll;
    va_list ap;
    uint64_t seq, deadline;
    int rc = -1;
    ixl_status st;

    memset(ans, 0, sizeof(*ans));
    if (fmt != NULL) {
        va_start(ap, fmt);
        vsnprintf(args, sizeof(args), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&c->lock);
    seq = ++c->seq;
    snprintf(line, sizeof(line), "%s %" PRIu64 "%s%s\n", word, seq, args[0] ? " " : "", args);
    ll = strlen(line);
    msg = malloc(ll + plen);
    if (msg == NULL) {
        pthread_mutex_unlock(&c->lock);
        fprintf(stderr, "ixlbench: out of memory\n");
        return -1;
    }
    memcpy(msg, line, ll);
    if (plen)
        memcpy(msg + ll, payload, plen);
    st = ixl_notif_send(c->agent, c->target, msg, ll + plen, NULL);
    free(msg);
    if (st != IXL_OK) {
        pthread_mutex_unlock(&c->lock);
        fprintf(stderr, "ixlbench: cannot send '%s' to the target %s: %s: %s\n", word, c->target,
                ixl_strerror(st), ixl_agent_last_error(c->agent));
        return -1;
    }
    deadline = ixb_now_ns() + (uint64_t)IXB_CTL_TIMEOUT_MS * 1000000ull;
    while (ans->raw == NULL) {
        struct ixl_notif_batch *b = NULL;
        uint64_t now = ixb_now_ns();
        if (ixl_notif_drain(c->agent, &b) == IXL_OK && b != NULL) {
            for (size_t i = 0; i < b->count; i++) {
                const struct ixl_notif *n = &b->items[i];
                struct ixb_msg m;
                if (ans->raw == NULL && strcmp(n->agent, c->target) == 0 &&
                    ixb_msg_parse(n->msg, n->len, &m) == 0 && m.argc >= 2 &&
                    strtoull(m.argv[1], NULL, 10) == seq) {
                    ans->raw = malloc(n->len + 1);
                    if (ans->raw == NULL)
                        break;
                    memcpy(ans->raw, n->msg, n->len);
                    ixb_msg_parse(ans->raw, n->len, &ans->m);
                } else {
                    fprintf(stderr, "ixlbench: unexpected notification from %s ignored\n",
                            n->agent);
                }
            }
            ixl_free(b);
            continue;
        }
        if (now >= deadline) {
            fprintf(stderr,
                    "ixlbench: the target %s did not answer '%s' within %d s (is it running?)\n",
                    c->target, word, IXB_CTL_TIMEOUT_MS / 1000);
            break;
        }
        if (c->target_pid > 0 && kill((pid_t)c->target_pid, 0) != 0 && errno == ESRCH) {
            fprintf(stderr, "ixlbench: the target %s (pid %ld) has exited\n", c->target,
                    c->target_pid);
            break;
        }
        struct pollfd p = {c->fd, POLLIN, 0};
        int left = (int)((deadline - now) / 1000000ull) + 1;
        if (poll(&p, 1, left < 200 ? left : 200) > 0)
            ixl_agent_progress(c->agent);
    }
    pthread_mutex_unlock(&c->lock);
    if (ans->raw == NULL)
        return -1;
    if (strcmp(ans->m.argv[0], "ok") == 0)
        rc = 0;
    else if (strcmp(ans->m.argv[0], "bad") == 0)
        rc = 1;
    else {
        fprintf(stderr, "ixlbench: the target refused '%s':", word);
        for (int i = 2; i < ans->m.argc; i++)
            fprintf(stderr, " %s", ans->m.argv[i]);
        fprintf(stderr, "\n");
        ixb_ctl_ans_free(ans);
    }
    return rc;
}

/* ---- memory ------------------------------------------------------------------------------- */

/* Device mode: the target's pool is this agent's own, one region in target_mem. */
static int loop_alloc(struct ixb_init *in, uint64_t nreg, uint64_t rlen, uint64_t gap, unsigned id,
                      struct ixb_rpool *out)
{
    const struct ixb_opts *o = in->o;
    size_t len = (size_t)(nreg * (rlen + gap) - gap);
    size_t scratch_len = len < (8u << 20) ? len : (8u << 20);
    uint8_t *scratch = ixb_map(scratch_len);
    ixl_status st;

    out->mem = ixb_mem_alloc(o->target_mem, o->target_dev, len);
    if (out->mem == NULL || scratch == NULL) {
        if (scratch == NULL)
            fprintf(stderr, "ixlbench: out of memory for %zu bytes\n", scratch_len);
        ixb_unmap(scratch, scratch_len);
        ixb_rpool_free(in, out);
        return -1;
    }
    out->len = len;
    out->id = id;
    out->base = (uint64_t)(uintptr_t)out->mem;
    int prc = ixb_mem_put(o->target_mem, out->mem, 0, len, 0, true, scratch, scratch_len);
    ixb_unmap(scratch, scratch_len);
    if (prc != 0) {
        ixb_rpool_free(in, out);
        return -1;
    }
    out->reg = (struct ixl_reg_desc){out->base, len, ixb_target_dev(o), NULL, 0};
    st = ixl_mem_register(in->agent, o->target_mem, &out->reg, 1, NULL);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: registering the target's %s pool: %s: %s\n",
                ixl_mem_name(o->target_mem), ixl_strerror(st), ixl_agent_last_error(in->agent));
        ixb_rpool_free(in, out);
        return -1;
    }
    out->registered = true;
    return 0;
}

void ixb_rpool_free(struct ixb_init *in, struct ixb_rpool *p)
{
    if (p->registered &&
        ixl_mem_deregister(in->agent, in->o->target_mem, &p->reg, 1, NULL) != IXL_OK)
        fprintf(stderr, "ixlbench: deregistering the target's pool: %s\n",
                ixl_agent_last_error(in->agent));
    if (p->mem != NULL)
        ixb_mem_release(in->o->target_mem, p->mem, p->len);
    ixl_dlist_destroy(p->regions);
    memset(p, 0, sizeof(*p));
}

int ixb_remote_alloc(struct ixb_init *in, uint64_t nreg, uint64_t rlen, uint64_t gap,
                     struct ixb_rpool *out)
{
    struct ixb_ctl_ans a;
    const uint8_t *md, *dl;
    size_t md_len, dl_len;
    struct ixl_desc d;
    ixl_status st;
    unsigned id = in->next_pool++;

    memset(out, 0, sizeof(*out));
    if (in->loop)
        return loop_alloc(in, nreg, rlen, gap, id, out);
    if (ixb_ctl_call(&in->ctl, "alloc", NULL, 0, &a, "%u %s %" PRIu64 " %" PRIu64 " %" PRIu64, id,
                     in->o->target_heap ? "heap" : "ixl", nreg, rlen, gap) != 0)
        return -1;
    if (ixb_unpack2(a.m.payload, a.m.payload_len, &md, &md_len, &dl, &dl_len) != 0) {
        fprintf(stderr, "ixlbench: the target's answer to alloc is malformed\n");
        ixb_ctl_ans_free(&a);
        return -1;
    }
    st = ixl_md_load(in->agent, md, md_len, NULL, 0);
    if (st == IXL_OK)
        st = ixl_dlist_deserialize(dl, dl_len, &out->regions);
    ixb_ctl_ans_free(&a);
    if (st == IXL_OK)
        st = ixl_dlist_get(out->regions, 0, &d);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: the target's memory: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        ixl_dlist_destroy(out->regions);
        out->regions = NULL;
        return -1;
    }
    out->id = id;
    out->base = d.addr;
    out->len = (size_t)(nreg * (rlen + gap) - gap);
    return 0;
}

void ixb_lpool_free(struct ixb_init *in, struct ixb_lpool *p)
{
    if (p->registered &&
        ixl_mem_deregister(in->agent, in->o->init_mem, p->regs, p->n_regs, NULL) != IXL_OK)
        fprintf(stderr, "ixlbench: deregistering the local pool: %s\n",
                ixl_agent_last_error(in->agent));
    ixb_mem_release(in->o->init_mem, p->base, p->len);
    free(p->regs);
    memset(p, 0, sizeof(*p));
}

int ixb_local_alloc(struct ixb_init *in, uint64_t nreg, uint64_t rlen, uint64_t gap, bool fresh,
                    struct ixb_lpool *p)
{
    ixl_status st;

    const struct ixb_opts *o = in->o;
    uint64_t dev = ixb_init_dev(o);

    memset(p, 0, sizeof(*p));
    p->len = (size_t)(nreg * (rlen + gap) - gap);
    p->base = ixb_mem_alloc(o->init_mem, o->init_dev, p->len);
    p->n_regs = nreg > 1 ? nreg + 1 : 1;
    p->regs = calloc(p->n_regs, sizeof(*p->regs));
    if (p->base == NULL || p->regs == NULL) {
        if (o->init_mem != IXL_MEM_VRAM || p->base != NULL)
            fprintf(stderr, "ixlbench: out of memory for %zu bytes\n", p->len);
        ixb_lpool_free(in, p);
        return -1;
    }
    if (o->init_mem == IXL_MEM_VRAM) {
        size_t sl = p->len < (8u << 20) ? p->len : (8u << 20);
        uint8_t *scratch = ixb_map(sl);
        int prc = scratch ? ixb_mem_put(o->init_mem, p->base, 0, p->len, 0, true, scratch, sl) : -1;
        ixb_unmap(scratch, sl);
        if (prc != 0) {
            ixb_lpool_free(in, p);
            return -1;
        }
    } else if (!fresh) {
        memset(p->base, IXB_POISON, p->len);
        p->touched = true;
    }
    for (uint64_t r = 0; r < nreg; r++)
        p->regs[r] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->base + r * (rlen + gap), rlen,
                                           dev, NULL, 0};
    if (nreg > 1)
        p->regs[nreg] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->base, p->len, dev, NULL, 0};
    st = ixl_mem_register(in->agent, in->o->init_mem, p->regs, p->n_regs, NULL);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_mem_register: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        ixb_lpool_free(in, p);
        return -1;
    }
    p->registered = true;
    return 0;
}

/* ---- sweep rows --------------------------------------------------------------------------- */

struct row_ctx;

struct thr {
    struct row_ctx *rc;
    unsigned t;
    pthread_t tid;
    double *prep, *post, *comp, *lat;
    size_t n_prep, n_samp;
    size_t cap_prep, cap_samp;   /* the arrays' room (--runtime: grown as requests complete) */
    struct ixl_dlist **ll, **rl; /* plain API: per slot */
    int64_t *li, *ri;            /* prepared API: per slot, batch entries each */
    struct ixl_xfer **x;
    uint64_t *t_post0, *t_post1; /* per slot: post started, post returned */
    bool *inflight;
    bool noted;        /* note_info() ran */
    uint64_t it;       /* the iteration being made (storage: where in the file) */
    uint64_t *done_at; /* --runtime, checks off: when each recorded request completed */
    /* Storage mode: one request's file descriptors (scattered layout), and a buffer for the
     * untimed fills and checks. */
    struct ixl_desc *fdescs;
    uint8_t *scratch;
    size_t scratch_len;
};

struct row_ctx {
    struct ixb_init *in;
    enum ixl_op op;
    uint64_t block, batch, slot_bytes;
    unsigned iters, warmup, threads, depth;
    struct ixb_lpool *lp;
    struct ixb_rpool *rp;
    struct ixl_prep *lprep, *rprep;
    struct ixl_xfer_params params;
    pthread_barrier_t bar;
    uint64_t seed;
    double seconds;
    uint64_t t0;
    bool time_up; /* --runtime, checks on: set by thread 0 between two barriers */
    /* --runtime, checks off: the measurement window (0 until thread 0 opens it). */
    _Atomic uint64_t win_t0, win_end;
    _Atomic int abort;
    pthread_mutex_t lock; /* path, descs, check message */
    char path[32];
    uint64_t descs;
    bool check_failed;
    char check_msg[200];
    struct thr *thr;
};

static void row_error(struct row_ctx *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void row_error(struct row_ctx *rc, const char *fmt, ...)
{
    va_list ap;

    ixb_progress_clear();
    va_start(ap, fmt);
    fprintf(stderr, "ixlbench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    atomic_store(&rc->abort, 1);
}

static void check_failed(struct row_ctx *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void check_failed(struct row_ctx *rc, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&rc->lock);
    if (!rc->check_failed) {
        rc->check_failed = true;
        va_start(ap, fmt);
        vsnprintf(rc->check_msg, sizeof(rc->check_msg), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&rc->lock);
}

static uint64_t slot_off(const struct row_ctx *rc, unsigned t, unsigned s)
{
    return ((uint64_t)t * rc->depth + s) * rc->slot_bytes;
}

/* Storage mode: the request number of slot s in the current iteration (with --reuse each slot's
 * request is made once, so its file offsets are those of iteration 0). */
static uint64_t req_no(const struct thr *th, unsigned s)
{
    const struct row_ctx *rc = th->rc;
    uint64_t it = rc->in->o->reuse ? 0 : th->it;

    return (it * rc->threads + th->t) * rc->depth + s;
}

static uint64_t file_off(const struct thr *th, unsigned s, uint64_t k)
{
    const struct ixb_store *st = th->rc->in->store;

    return ixb_store_unit(st, req_no(th, s), k) * st->stride;
}

/* Storage mode: the file side of slot s's next request (a list, or prepared-list indices). */
static int store_side(struct thr *th, unsigned s)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_store *st = rc->in->store;
    uint64_t r = req_no(th, s);
    ixl_status st2;

    if (rc->in->o->api == IXB_API_PREP) {
        for (uint64_t k = 0; k < rc->batch; k++)
            th->ri[s * rc->batch + k] = (int64_t)ixb_store_unit(st, r, k);
        return 0;
    }
    ixl_dlist_destroy(th->rl[s]);
    th->rl[s] = NULL;
    st2 = ixl_dlist_create(st->type, st->scatter || st->obj ? 0 : 1, &th->rl[s]);
    if (st2 == IXL_OK && st->obj) {
        for (uint64_t k = 0; k < rc->batch; k++)
            th->fdescs[k] =
                (struct ixl_desc){0, rc->block, st->obj_dev0 + ixb_store_unit(st, r, k)};
        st2 = ixl_dlist_add(th->rl[s], th->fdescs, (size_t)rc->batch);
    } else if (st2 == IXL_OK && !st->scatter) {
        struct ixl_run run = {ixb_store_unit(st, r, 0) * st->stride, rc->block, rc->block,
                              rc->batch, st->dev};
        st2 = ixl_dlist_add_runs(th->rl[s], &run, 1);
    } else if (st2 == IXL_OK) {
        for (uint64_t k = 0; k < rc->batch; k++)
            th->fdescs[k] =
                (struct ixl_desc){ixb_store_unit(st, r, k) * st->stride, rc->block, st->dev};
        st2 = ixl_dlist_add(th->rl[s], th->fdescs, (size_t)rc->batch);
    }
    if (st2 != IXL_OK) {
        row_error(rc, "building the file's descriptor list: %s", ixl_strerror(st2));
        return -1;
    }
    return 0;
}

static void barrier(struct row_ctx *rc)
{
    if (rc->threads > 1)
        pthread_barrier_wait(&rc->bar);
}

/* The path and descriptor count of the row, from each thread's first completed request (the
 * path a backend took, which can differ from the one planned when the request was made: a
 * POSIX WRITE written in post says "pwrite"). */
static void note_info(struct thr *th, struct ixl_xfer *x)
{
    struct row_ctx *rc = th->rc;
    struct ixl_xfer_info info = {.size = sizeof(info)};

    if (th->noted || ixl_xfer_info(x, &info) != IXL_OK)
        return;
    th->noted = true;
    pthread_mutex_lock(&rc->lock);
    if (rc->path[0] == '\0' && strcmp(rc->in->o->backend, "auto") == 0) {
        /* The core chose: which backend, and its path. */
        snprintf(rc->path, sizeof(rc->path), "%.15s:%.15s", info.backend,
                 info.path && info.path[0] ? info.path : "-");
        rc->descs = info.desc_count;
    } else if (rc->path[0] == '\0') {
        snprintf(rc->path, sizeof(rc->path), "%s", info.path && info.path[0] ? info.path : "-");
        rc->descs = info.desc_count;
    }
    pthread_mutex_unlock(&rc->lock);
}

/* Doubles the room of the n arrays of elem-byte entries at *a[0..n) from *cap entries. A time-based
 * row (--runtime) grows its samples as requests complete rather than reserving them for every
 * iteration it might run. 0, or -1 when out of memory. */
static int grow_samples(void **a[], size_t n, size_t elem, size_t *cap)
{
    _Static_assert(sizeof(double) == sizeof(uint64_t), "done_at grows with the doubles");
    size_t want = *cap ? *cap * 2 : 1024;

    for (size_t i = 0; i < n; i++) {
        void *p = realloc(*a[i], want * elem);
        if (p == NULL)
            return -1;
        *a[i] = p;
    }
    *cap = want;
    return 0;
}

static int make_req(struct thr *th, unsigned s, bool record)
{
    struct row_ctx *rc = th->rc;
    struct ixb_init *in = rc->in;
    uint64_t a, b;
    ixl_status st;

    if (in->store != NULL && store_side(th, s) != 0)
        return -1;
    a = ixb_now_ns();
    if (in->o->api == IXB_API_PREP)
        st = ixl_xfer_create_prepped(in->agent, rc->op, rc->lprep, th->li + s * rc->batch,
                                     rc->rprep, th->ri + s * rc->batch, (size_t)rc->batch,
                                     &rc->params, &th->x[s]);
    else
        st = ixl_xfer_create(in->agent, rc->op, th->ll[s], th->rl[s], in->ctl.target, &rc->params,
                             &th->x[s]);
    b = ixb_now_ns();
    if (st != IXL_OK) {
        th->x[s] = NULL;
        row_error(rc, "creating a request: %s: %s", ixl_strerror(st),
                  ixl_agent_last_error(in->agent));
        return -1;
    }
    if (record && th->n_prep == th->cap_prep &&
        grow_samples((void **[]){(void **)&th->prep}, 1, sizeof(double), &th->cap_prep) != 0) {
        row_error(rc, "out of memory for the row's samples");
        return -1;
    }
    if (record)
        th->prep[th->n_prep++] = (double)(b - a) / 1e3;
    return 0;
}

static int post_req(struct thr *th, unsigned s)
{
    struct row_ctx *rc = th->rc;
    ixl_status st;

    th->t_post0[s] = ixb_now_ns();
    st = ixl_xfer_post(th->x[s]);
    th->t_post1[s] = ixb_now_ns();
    if (st != IXL_OK && st != IXL_IN_PROGRESS) {
        row_error(rc, "posting a request: %s: %s", ixl_strerror(st),
                  ixl_agent_last_error(rc->in->agent));
        return -1;
    }
    th->inflight[s] = true;
    return 0;
}

/* record < 0: when the request completed after the measurement window opened (run_timed). */
static int finish_req(struct thr *th, unsigned s, int record)
{
    struct row_ctx *rc = th->rc;
    ixl_status st = ixb_wait(rc->in->o, th->x[s], IXB_XFER_TIMEOUT_MS);
    uint64_t d = ixb_now_ns();

    th->inflight[s] = false;
    if (st != IXL_OK) {
        row_error(rc, "a request failed: %s: %s", ixl_strerror(st),
                  ixl_agent_last_error(rc->in->agent));
        return -1;
    }
    note_info(th, th->x[s]);
    if (record < 0) {
        uint64_t t0 = atomic_load(&rc->win_t0);
        record = t0 != 0 && d > t0;
    }
    if (record && th->n_samp == th->cap_samp &&
        grow_samples((void **[]){(void **)&th->post, (void **)&th->comp, (void **)&th->lat,
                                 (void **)&th->done_at},
                     4, sizeof(double), &th->cap_samp) != 0) {
        row_error(rc, "out of memory for the row's samples");
        return -1;
    }
    if (record) {
        th->done_at[th->n_samp] = d;
        th->post[th->n_samp] = (double)(th->t_post1[s] - th->t_post0[s]) / 1e3;
        th->comp[th->n_samp] = (double)(d - th->t_post1[s]) / 1e3;
        th->lat[th->n_samp] = (double)(d - th->t_post0[s]) / 1e3;
        th->n_samp++;
    }
    if (!rc->in->o->reuse) {
        st = ixl_xfer_release(th->x[s]);
        th->x[s] = NULL;
        if (st != IXL_OK) {
            row_error(rc, "ixl_xfer_release: %s", ixl_strerror(st));
            return -1;
        }
    }
    return 0;
}

/* OBJ, untimed: one request moving every slot of this thread between its DRAM and its
 * objects (the requests of this iteration's slots), through the backend measured. */
static int obj_move(struct thr *th, enum ixl_op op)
{
    struct row_ctx *rc = th->rc;
    struct ixb_init *in = rc->in;
    const struct ixb_store *st = in->store;
    struct ixl_dlist *l = NULL, *r = NULL;
    struct ixl_xfer *x = NULL;
    size_t n = (size_t)(rc->depth * rc->batch);
    ixl_status s2 = ixl_dlist_create(in->o->init_mem, n, &l);

    if (s2 == IXL_OK)
        s2 = ixl_dlist_create(IXL_MEM_OBJ, n, &r);
    for (unsigned s = 0; s2 == IXL_OK && s < rc->depth; s++)
        for (uint64_t k = 0; s2 == IXL_OK && k < rc->batch; k++) {
            struct ixl_desc dl = {(uint64_t)(uintptr_t)rc->lp->base + slot_off(rc, th->t, s) +
                                      k * rc->block,
                                  rc->block, ixb_init_dev(in->o)};
            struct ixl_desc dr = {0, rc->block,
                                  st->obj_dev0 + ixb_store_unit(st, req_no(th, s), k)};
            s2 = ixl_dlist_add(l, &dl, 1);
            if (s2 == IXL_OK)
                s2 = ixl_dlist_add(r, &dr, 1);
        }
    if (s2 == IXL_OK)
        s2 = ixl_xfer_create(in->agent, op, l, r, in->ctl.target, &rc->params, &x);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (s2 == IXL_OK) {
        s2 = ixl_xfer_post(x);
        if (s2 == IXL_IN_PROGRESS)
            s2 = ixl_xfer_wait(x, -1);
    }
    if (s2 != IXL_OK)
        row_error(rc, "untimed %s of the objects: %s: %s", op == IXL_OP_READ ? "READ" : "WRITE",
                  ixl_strerror(s2), ixl_agent_last_error(in->agent));
    if (x != NULL && ixl_xfer_release(x) != IXL_OK && s2 == IXL_OK)
        s2 = IXL_ERR_BUSY;
    return s2 == IXL_OK ? 0 : -1;
}

/* Fills (poison false: the pattern) or poisons every slot's DRAM of this thread. */
static int obj_mem_all(struct thr *th, uint64_t seed, bool poison)
{
    struct row_ctx *rc = th->rc;
    for (unsigned s = 0; s < rc->depth; s++)
        for (uint64_t k = 0; k < rc->batch; k++)
            if (ixb_mem_put_at(rc->in->o->init_mem, rc->lp->base,
                               slot_off(rc, th->t, s) + k * rc->block, rc->block, seed,
                               file_off(th, s, k), poison, th->scratch, th->scratch_len) != 0) {
                row_error(rc, "could not prepare the DRAM side");
                return -1;
            }
    return 0;
}

/* Untimed, storage mode: READ writes the pattern into the file and poisons the DRAM
 * destination; WRITE fills the DRAM source and poisons the file. OBJ: READ writes the pattern
 * into the objects (through the backend) and poisons DRAM; WRITE fills DRAM (the pattern
 * depends on the seed, which each round changes, so stale objects fail the check). */
static int store_setup(struct thr *th, uint64_t seed, bool corrupt)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_store *st = rc->in->store;
    bool rd = rc->op == IXL_OP_READ;

    if (st->obj) {
        if (obj_mem_all(th, seed, false) != 0)
            return -1;
        if (rd && (obj_move(th, IXL_OP_WRITE) != 0 || obj_mem_all(th, seed, true) != 0))
            return -1;
        if (corrupt && !rd &&
            ixb_mem_flip(rc->in->o->init_mem, rc->lp->base,
                         slot_off(rc, th->t, 0) + rc->block / 2) != 0) {
            row_error(rc, "could not corrupt the source");
            return -1;
        }
        return 0;
    }

    enum ixl_mem mt = rc->in->o->init_mem; /* DRAM, or VRAM through ixl_device_copy */
    for (unsigned s = 0; s < rc->depth; s++)
        for (uint64_t k = 0; k < rc->batch; k++) {
            uint64_t off = file_off(th, s, k);
            uint64_t moff = slot_off(rc, th->t, s) + k * rc->block;
            if (ixb_mem_put_at(mt, rc->lp->base, moff, rc->block, seed, off, rd, th->scratch,
                               th->scratch_len) != 0) {
                row_error(rc, "could not prepare the %s side", ixl_mem_name(mt));
                return -1;
            }
            if (ixb_store_put(st, off, rc->block, seed, !rd, th->scratch, th->scratch_len) != 0) {
                row_error(rc, "could not prepare the file");
                return -1;
            }
        }
    if (corrupt && !rd &&
        ixb_mem_flip(mt, rc->lp->base, slot_off(rc, th->t, 0) + rc->block / 2) != 0) {
        row_error(rc, "could not corrupt the source");
        return -1;
    }
    if (ixb_store_settle(st) != 0) {
        row_error(rc, "could not prepare the file");
        return -1;
    }
    return 0;
}

/* Untimed, storage mode: READ compares the DRAM destination, WRITE reads the file back. */
static void store_check(struct thr *th, uint64_t seed, bool corrupt, unsigned it)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_store *st = rc->in->store;
    bool rd = rc->op == IXL_OP_READ;

    enum ixl_mem mt = rc->in->o->init_mem;
    if (corrupt && rd &&
        ixb_mem_flip(mt, rc->lp->base, slot_off(rc, th->t, 0) + rc->block / 2) != 0) {
        row_error(rc, "could not corrupt the destination");
        return;
    }
    /* OBJ WRITE: read the objects back into the poisoned DRAM, then check DRAM. */
    bool obj_back = st->obj && !rd;
    if (obj_back && (obj_mem_all(th, seed, true) != 0 || obj_move(th, IXL_OP_READ) != 0))
        return;
    for (unsigned s = 0; s < rc->depth; s++)
        for (uint64_t k = 0; k < rc->batch; k++) {
            uint64_t off = file_off(th, s, k);
            uint64_t moff = slot_off(rc, th->t, s) + k * rc->block;
            uint8_t got = 0;
            int64_t bad;
            if (rd || obj_back) {
                bad = ixb_mem_verify_at(mt, rc->lp->base, moff, rc->block, seed, off, th->scratch,
                                        th->scratch_len, &got);
            } else {
                bad =
                    ixb_store_verify(st, off, rc->block, seed, th->scratch, th->scratch_len, &got);
            }
            if (bad == -2) {
                row_error(rc, "could not read the file back");
                return;
            }
            if (bad >= 0) {
                check_failed(rc,
                             "%s iteration %u, thread %u, descriptor %" PRIu64 " of slot %u: the "
                             "byte at file offset %" PRIu64 " is 0x%02x %s, want 0x%02x",
                             rd ? "READ" : "WRITE", it, th->t, k, s, off + (uint64_t)bad, got,
                             rd         ? (mt == IXL_MEM_VRAM ? "in VRAM" : "in DRAM")
                             : obj_back ? "in the object (read back)"
                                        : "in the file",
                             ixb_pattern_byte(seed, off + (uint64_t)bad));
                return;
            }
        }
}

/* Untimed, device mode: both pools are here. READ fills the target's slots and poisons the
 * local ones, WRITE the other way round; VRAM through ixl_device_copy (ixlbench_dev.c). */
static int loop_setup(struct thr *th, uint64_t seed, bool corrupt)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_opts *o = rc->in->o;
    uint64_t len = rc->batch * rc->block;
    bool rd = rc->op == IXL_OP_READ;

    for (unsigned s = 0; s < rc->depth; s++) {
        uint64_t off = slot_off(rc, th->t, s);
        if (ixb_mem_put(o->target_mem, rc->rp->mem, off, len, seed, !rd, th->scratch,
                        th->scratch_len) != 0 ||
            ixb_mem_put(o->init_mem, rc->lp->base, off, len, seed, rd, th->scratch,
                        th->scratch_len) != 0) {
            row_error(rc, "could not prepare the pools");
            return -1;
        }
    }
    if (corrupt && !rd &&
        ixb_mem_flip(o->init_mem, rc->lp->base, slot_off(rc, th->t, 0) + len / 2)) {
        row_error(rc, "could not corrupt the source");
        return -1;
    }
    return 0;
}

/* Untimed, device mode: the destination's slots (READ: here, WRITE: the target's pool). */
static void loop_check(struct thr *th, uint64_t seed, bool corrupt, unsigned it)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_opts *o = rc->in->o;
    uint64_t len = rc->batch * rc->block;
    bool rd = rc->op == IXL_OP_READ;
    enum ixl_mem type = rd ? o->init_mem : o->target_mem;
    uint8_t *base = rd ? rc->lp->base : rc->rp->mem;

    if (corrupt && rd && ixb_mem_flip(type, base, slot_off(rc, th->t, 0) + len / 2)) {
        row_error(rc, "could not corrupt the destination");
        return;
    }
    for (unsigned s = 0; s < rc->depth; s++) {
        uint64_t off = slot_off(rc, th->t, s);
        uint8_t got = 0;
        int64_t bad =
            ixb_mem_verify(type, base, off, len, seed, th->scratch, th->scratch_len, &got);
        if (bad == -2) {
            row_error(rc, "could not read the destination back");
            return;
        }
        if (bad >= 0) {
            uint64_t at = off + (uint64_t)bad;
            check_failed(rc,
                         "%s iteration %u, thread %u: byte %" PRIu64 " of the %s %s is 0x%02x, "
                         "want 0x%02x",
                         rd ? "READ" : "WRITE", it, th->t, at, rd ? "initiator's" : "target's",
                         ixl_mem_name(type), got, ixb_pattern_byte(seed, at));
            return;
        }
    }
}

/* Untimed: the data of one round. */
static int round_setup(struct thr *th, uint64_t seed, bool corrupt)
{
    struct row_ctx *rc = th->rc;
    struct ixb_init *in = rc->in;
    uint64_t len = rc->batch * rc->block;
    struct ixb_ctl_ans a;

    if (in->store != NULL)
        return store_setup(th, seed, corrupt);
    if (in->loop)
        return loop_setup(th, seed, corrupt);
    if (rc->op == IXL_OP_READ) {
        if (ixb_ctl_call(&in->ctl, "fill", NULL, 0, &a,
                         "%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u", rc->rp->id, seed,
                         slot_off(rc, th->t, 0), len, rc->slot_bytes, rc->depth) != 0) {
            row_error(rc, "the target could not fill its memory");
            return -1;
        }
        ixb_ctl_ans_free(&a);
        for (unsigned s = 0; s < rc->depth; s++)
            if (ixb_mem_put(in->o->init_mem, rc->lp->base, slot_off(rc, th->t, s), len, 0, true,
                            th->scratch, th->scratch_len) != 0) {
                row_error(rc, "could not poison the local pool");
                return -1;
            }
    } else {
        for (unsigned s = 0; s < rc->depth; s++) {
            uint64_t off = slot_off(rc, th->t, s);
            if (ixb_mem_put(in->o->init_mem, rc->lp->base, off, len, seed, false, th->scratch,
                            th->scratch_len) != 0) {
                row_error(rc, "could not fill the local pool");
                return -1;
            }
        }
        if (corrupt &&
            ixb_mem_flip(in->o->init_mem, rc->lp->base, slot_off(rc, th->t, 0) + len / 2)) {
            row_error(rc, "could not corrupt the source");
            return -1;
        }
    }
    return 0;
}

/* Untimed: the check of one round. */
static void round_check(struct thr *th, uint64_t seed, bool corrupt, unsigned it)
{
    struct row_ctx *rc = th->rc;
    struct ixb_init *in = rc->in;
    uint64_t len = rc->batch * rc->block;
    struct ixb_ctl_ans a;

    if (in->store != NULL) {
        store_check(th, seed, corrupt, it);
        return;
    }
    if (in->loop) {
        loop_check(th, seed, corrupt, it);
        return;
    }
    if (rc->op == IXL_OP_READ) {
        enum ixl_mem lt = in->o->init_mem;
        if (corrupt && ixb_mem_flip(lt, rc->lp->base, slot_off(rc, th->t, 0) + len / 2)) {
            row_error(rc, "could not corrupt the destination");
            return;
        }
        for (unsigned s = 0; s < rc->depth; s++) {
            uint64_t off = slot_off(rc, th->t, s);
            uint8_t got = 0;
            int64_t bad = ixb_mem_verify(lt, rc->lp->base, off, len, seed, th->scratch,
                                         th->scratch_len, &got);
            if (bad == -2) {
                row_error(rc, "could not read the destination back");
                return;
            }
            if (bad >= 0) {
                uint64_t at = off + (uint64_t)bad;
                check_failed(
                    rc, "READ iteration %u, thread %u: byte %" PRIu64 " is 0x%02x, want 0x%02x", it,
                    th->t, at, got, ixb_pattern_byte(seed, at));
                return;
            }
        }
        return;
    }
    int r = ixb_ctl_call(&in->ctl, "check", NULL, 0, &a,
                         "%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u", rc->rp->id, seed,
                         slot_off(rc, th->t, 0), len, rc->slot_bytes, rc->depth);
    if (r == 1) {
        check_failed(rc,
                     "WRITE iteration %u, thread %u: the target's byte %s is 0x%02x, want 0x%02x",
                     it, th->t, a.m.argc > 2 ? a.m.argv[2] : "?",
                     a.m.argc > 3 ? (unsigned)strtoul(a.m.argv[3], NULL, 10) : 0u,
                     a.m.argc > 4 ? (unsigned)strtoul(a.m.argv[4], NULL, 10) : 0u);
    } else if (r < 0) {
        row_error(rc, "the target could not check its memory");
    }
    ixb_ctl_ans_free(&a);
}

static void progress_tick(struct row_ctx *rc, unsigned it, unsigned total)
{
    static uint64_t last;
    char label[96], b[32];
    uint64_t now = ixb_now_ns();

    if (now - last < 100000000ull)
        return;
    last = now;
    snprintf(label, sizeof(label), "%s %s x %" PRIu64, rc->op == IXL_OP_READ ? "READ" : "WRITE",
             ixb_size_str(rc->block, b, sizeof(b)), rc->batch);
    ixb_progress(rc->in->rows_done + (double)it / total, rc->in->rows_total, label);
}

static void run_rounds(struct thr *th)
{
    struct row_ctx *rc = th->rc;
    const struct ixb_opts *o = rc->in->o;
    unsigned total = rc->warmup + rc->iters;

    for (unsigned it = 0; it < total; it++) {
        bool record = it >= rc->warmup;
        uint64_t seed = rc->seed + (uint64_t)it * rc->threads + th->t;
        bool corrupt = o->corrupt_for_test && it == rc->warmup && th->t == 0;
        bool ok = !atomic_load(&rc->abort);

        th->it = it;
        if (ok && o->check)
            ok = round_setup(th, seed, corrupt) == 0;
        barrier(rc);
        if (th->t == 0)
            rc->t0 = ixb_now_ns();
        for (unsigned s = 0; ok && s < rc->depth && !atomic_load(&rc->abort); s++) {
            if (th->x[s] == NULL && make_req(th, s, record) != 0)
                break;
            if (post_req(th, s) != 0)
                break;
        }
        for (unsigned s = 0; s < rc->depth; s++)
            if (th->inflight[s])
                finish_req(th, s, record);
        barrier(rc);
        if (th->t == 0) {
            if (record)
                rc->seconds += (double)(ixb_now_ns() - rc->t0) / 1e9;
            rc->time_up = record && o->runtime_s > 0 && rc->seconds >= o->runtime_s;
            progress_tick(rc, it, total);
        }
        if (o->check && !atomic_load(&rc->abort))
            round_check(th, seed, corrupt, it);
        if (o->runtime_s > 0) {
            barrier(rc); /* every thread reads time_up after thread 0 wrote it */
            if (rc->time_up)
                break;
        }
    }
}

/* Checks off: depth requests in flight without a pause; n iterations of depth requests. */
static void run_window(struct thr *th, unsigned n, bool record)
{
    struct row_ctx *rc = th->rc;
    uint64_t total = (uint64_t)n * rc->depth;

    for (uint64_t i = 0; i < total && !atomic_load(&rc->abort); i++) {
        unsigned s = (unsigned)(i % rc->depth);
        th->it = i / rc->depth + (record ? rc->warmup : 0);
        if (th->inflight[s] && finish_req(th, s, record) != 0)
            break;
        if (th->x[s] == NULL && make_req(th, s, record) != 0)
            break;
        if (post_req(th, s) != 0)
            break;
        if (th->t == 0 && s == 0)
            progress_tick(rc, (unsigned)(i / rc->depth) + (record ? rc->warmup : 0),
                          rc->warmup + rc->iters);
    }
    for (unsigned s = 0; s < rc->depth; s++)
        if (th->inflight[s])
            finish_req(th, s, record);
}

/* --runtime, checks off: the window closes at the first completion at or after its end (or at
 * the last completion, when posting stopped earlier); only completions up to it count. */
static void close_window(struct row_ctx *rc)
{
    uint64_t t0 = atomic_load(&rc->win_t0), end = atomic_load(&rc->win_end);
    uint64_t close = 0, last = 0;

    for (unsigned t = 0; t < rc->threads; t++)
        for (size_t i = 0; i < rc->thr[t].n_samp; i++) {
            uint64_t d = rc->thr[t].done_at[i];
            if (d >= end && (close == 0 || d < close))
                close = d;
            if (d > last)
                last = d;
        }
    if (close == 0)
        close = last;
    for (unsigned t = 0; t < rc->threads; t++) {
        struct thr *th = &rc->thr[t];
        size_t k = 0;
        for (size_t i = 0; i < th->n_samp; i++)
            if (th->done_at[i] <= close) {
                th->post[k] = th->post[i];
                th->comp[k] = th->comp[i];
                th->lat[k] = th->lat[i];
                th->done_at[k] = th->done_at[i];
                k++;
            }
        th->n_samp = k;
    }
    rc->seconds = t0 != 0 && close > t0 ? (double)(close - t0) / 1e9 : 0;
}

/* Checks off with --runtime: time-based, like fio's time_based jobs. One pipeline without a
 * pause: the warm-up requests, then the measured ones. The window opens when thread 0 has seen
 * its last warm-up request complete (depth requests are then in flight; without a warm-up, at
 * the start); no request is posted after runtime seconds, and the window closes at the first
 * completion from then on. GB/s = the bytes of the requests that completed inside the window /
 * its length (from one completion to another), so neither the ramp-up nor the drain at the end
 * (a second, for a deep queue of large I/Os) is measured. Iterations stay a maximum: posting
 * also stops after warm-up + iters of them. */
static void run_timed(struct thr *th)
{
    struct row_ctx *rc = th->rc;
    uint64_t warm = (uint64_t)rc->warmup * rc->depth, done = 0;
    uint64_t max = warm + (uint64_t)rc->iters * rc->depth;

    if (th->t == 0 && warm == 0) {
        uint64_t now = ixb_now_ns();
        atomic_store(&rc->win_end, now + (uint64_t)(rc->in->o->runtime_s * 1e9));
        atomic_store(&rc->win_t0, now);
    }
    barrier(rc);
    for (uint64_t i = 0; !atomic_load(&rc->abort); i++) {
        unsigned s = (unsigned)(i % rc->depth);
        uint64_t end;
        if (th->inflight[s]) {
            if (finish_req(th, s, -1) != 0)
                break;
            if (++done == warm && th->t == 0) {
                uint64_t now = ixb_now_ns();
                atomic_store(&rc->win_end, now + (uint64_t)(rc->in->o->runtime_s * 1e9));
                atomic_store(&rc->win_t0, now);
            }
        }
        end = atomic_load(&rc->win_end);
        if (i >= max || (end != 0 && ixb_now_ns() >= end))
            break;
        th->it = i / rc->depth;
        if (th->x[s] == NULL && make_req(th, s, i >= warm) != 0)
            break;
        if (post_req(th, s) != 0)
            break;
        if (th->t == 0 && s == 0)
            progress_tick(rc, (unsigned)(i / rc->depth), rc->warmup + rc->iters);
    }
    for (unsigned s = 0; s < rc->depth; s++)
        if (th->inflight[s])
            finish_req(th, s, -1);
    barrier(rc);
    if (th->t == 0)
        close_window(rc);
}

static void run_stream(struct thr *th)
{
    struct row_ctx *rc = th->rc;

    if (rc->in->o->runtime_s > 0) {
        run_timed(th);
        return;
    }
    run_window(th, rc->warmup, false);
    barrier(rc);
    if (th->t == 0)
        rc->t0 = ixb_now_ns();
    run_window(th, rc->iters, true);
    barrier(rc);
    if (th->t == 0)
        rc->seconds = (double)(ixb_now_ns() - rc->t0) / 1e9;
}

static void *thr_main(void *arg)
{
    struct thr *th = arg;
    struct row_ctx *rc = th->rc;

    /* --reuse: each slot's request is made once, before the warm-up, and posted again. */
    if (rc->in->o->reuse)
        for (unsigned s = 0; s < rc->depth && !atomic_load(&rc->abort); s++)
            make_req(th, s, true);
    barrier(rc);
    if (rc->in->o->check)
        run_rounds(th);
    else
        run_stream(th);
    for (unsigned s = 0; s < rc->depth; s++)
        if (th->x[s] != NULL) {
            /* The wait's outcome no longer matters (the run is over); a release refused
             * (BUSY) leaves the request to ixl_agent_destroy(). */
            if (th->inflight[s] && ixb_wait(rc->in->o, th->x[s], IXB_XFER_TIMEOUT_MS) != IXL_OK)
                fprintf(stderr, "ixlbench: an unfinished request at the end: %s\n",
                        ixl_agent_last_error(rc->in->agent));
            if (ixl_xfer_release(th->x[s]) != IXL_OK)
                fprintf(stderr, "ixlbench: release: %s\n", ixl_agent_last_error(rc->in->agent));
            th->x[s] = NULL;
        }
    return NULL;
}

static void thr_free(struct thr *th, unsigned depth)
{
    for (unsigned s = 0; th->ll != NULL && s < depth; s++)
        ixl_dlist_destroy(th->ll[s]);
    for (unsigned s = 0; th->rl != NULL && s < depth; s++)
        ixl_dlist_destroy(th->rl[s]);
    free(th->ll);
    free(th->rl);
    free(th->li);
    free(th->ri);
    free(th->x);
    free(th->t_post0);
    free(th->t_post1);
    free(th->inflight);
    free(th->prep);
    free(th->post);
    free(th->comp);
    free(th->lat);
    free(th->fdescs);
    free(th->done_at);
    ixb_unmap(th->scratch, th->scratch_len);
}

static int thr_init(struct row_ctx *rc, struct thr *th, unsigned t)
{
    size_t nreq = ((size_t)rc->warmup + rc->iters) * rc->depth + rc->depth;
    const struct ixb_opts *o = rc->in->o;

    /* A time-based row records what completes in its time, however many: its arrays start
     * small and grow (make_req, finish_req: doubling, so a few reallocations in all, and the
     * short rows of test_ixlbench grow them too); any other row reserves every sample. */
    if (o->runtime_s > 0 && nreq > 64)
        nreq = 64;

    memset(th, 0, sizeof(*th));
    th->rc = rc;
    th->t = t;
    th->x = calloc(rc->depth, sizeof(*th->x));
    th->t_post0 = calloc(rc->depth, sizeof(uint64_t));
    th->t_post1 = calloc(rc->depth, sizeof(uint64_t));
    th->inflight = calloc(rc->depth, sizeof(bool));
    th->prep = calloc(nreq, sizeof(double));
    th->post = calloc(nreq, sizeof(double));
    th->comp = calloc(nreq, sizeof(double));
    th->lat = calloc(nreq, sizeof(double));
    th->done_at = calloc(nreq, sizeof(uint64_t));
    th->cap_prep = th->cap_samp = nreq;
    if (!th->done_at || !th->x || !th->t_post0 || !th->t_post1 || !th->inflight || !th->prep ||
        !th->post || !th->comp || !th->lat)
        return -1;
    if (rc->in->store != NULL || rc->in->loop || o->init_mem == IXL_MEM_VRAM) {
        /* Fills and checks go through this buffer, up to 8 MiB at a time (device mode: a
         * slot's bytes, VRAM copied through it). */
        uint64_t want = rc->in->loop || rc->in->store == NULL ? rc->batch * rc->block : rc->block;
        th->scratch_len = (size_t)(want < (8u << 20) ? want : (8u << 20));
        th->scratch = ixb_map(th->scratch_len);
        if (th->scratch == NULL)
            return -1;
    }
    if (rc->in->store != NULL) {
        if ((rc->in->store->scatter || rc->in->store->obj) && o->api == IXB_API_PLAIN &&
            (th->fdescs = calloc((size_t)rc->batch, sizeof(*th->fdescs))) == NULL)
            return -1;
    }
    if (o->api == IXB_API_PREP) {
        th->li = calloc((size_t)(rc->depth * rc->batch), sizeof(int64_t));
        th->ri = calloc((size_t)(rc->depth * rc->batch), sizeof(int64_t));
        if (!th->li || !th->ri)
            return -1;
        for (uint64_t i = 0; i < rc->depth * rc->batch; i++)
            th->li[i] = th->ri[i] = (int64_t)((uint64_t)t * rc->depth * rc->batch + i);
        return 0;
    }
    th->ll = calloc(rc->depth, sizeof(*th->ll));
    th->rl = calloc(rc->depth, sizeof(*th->rl));
    if (!th->ll || !th->rl)
        return -1;
    for (unsigned s = 0; s < rc->depth; s++) {
        uint64_t off = slot_off(rc, t, s);
        struct ixl_run lr = {(uint64_t)(uintptr_t)rc->lp->base + off, rc->block, rc->block,
                             rc->batch, ixb_init_dev(o)};
        if (ixl_dlist_create(o->init_mem, 1, &th->ll[s]) != IXL_OK ||
            ixl_dlist_add_runs(th->ll[s], &lr, 1) != IXL_OK)
            return -1;
        if (rc->in->store != NULL)
            continue; /* the file side is made with each request (store_side) */
        struct ixl_run rr = {rc->rp->base + off, rc->block, rc->block, rc->batch,
                             ixb_target_dev(o)};
        if (ixl_dlist_create(o->target_mem, 1, &th->rl[s]) != IXL_OK ||
            ixl_dlist_add_runs(th->rl[s], &rr, 1) != IXL_OK)
            return -1;
    }
    return 0;
}

/* Prepared lists of every slot's blocks, in slot order: index (t * depth + s) * batch + k. */
static int row_preps(struct row_ctx *rc, double *us)
{
    struct ixb_init *in = rc->in;
    size_t nslots = (size_t)rc->threads * rc->depth;
    struct ixl_dlist *l = NULL, *r = NULL;
    ixl_status st = ixl_dlist_create(in->o->init_mem, nslots, &l);
    uint64_t a, b;

    if (st == IXL_OK)
        st = ixl_dlist_create(in->o->target_mem, nslots, &r);
    for (size_t i = 0; st == IXL_OK && i < nslots; i++) {
        uint64_t off = (uint64_t)i * rc->slot_bytes;
        struct ixl_run lr = {(uint64_t)(uintptr_t)rc->lp->base + off, rc->block, rc->block,
                             rc->batch, ixb_init_dev(in->o)};
        st = ixl_dlist_add_runs(l, &lr, 1);
        if (st == IXL_OK && in->store == NULL) {
            struct ixl_run rr = {rc->rp->base + off, rc->block, rc->block, rc->batch,
                                 ixb_target_dev(in->o)};
            st = ixl_dlist_add_runs(r, &rr, 1);
        }
    }
    /* Storage mode: the file side is every unit of the file, one strided run; requests index
     * it (store_side). */
    if (st == IXL_OK && in->store != NULL && in->store->obj) {
        for (uint64_t u = 0; st == IXL_OK && u < in->store->n_units; u++) {
            struct ixl_desc d = {0, rc->block, in->store->obj_dev0 + u};
            st = ixl_dlist_add(r, &d, 1);
        }
    } else if (st == IXL_OK && in->store != NULL) {
        struct ixl_run rr = {0, rc->block, in->store->stride, in->store->n_units, in->store->dev};
        st = ixl_dlist_add_runs(r, &rr, 1);
    }
    a = ixb_now_ns();
    if (st == IXL_OK)
        st = ixl_prep_create(in->agent, NULL, l, NULL, &rc->lprep);
    if (st == IXL_OK)
        st = ixl_prep_create(in->agent, in->ctl.target, r, NULL, &rc->rprep);
    b = ixb_now_ns();
    *us = (double)(b - a) / 1e3;
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_prep_create: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        return -1;
    }
    return 0;
}

static void merge_samples(struct row_ctx *rc, struct ixb_row *row)
{
    size_t n = 0, np = 0;
    double *lat, *prep, *post, *comp;

    for (unsigned t = 0; t < rc->threads; t++) {
        n += rc->thr[t].n_samp;
        np += rc->thr[t].n_prep;
    }
    lat = calloc(n + 1, sizeof(double));
    post = calloc(n + 1, sizeof(double));
    comp = calloc(n + 1, sizeof(double));
    prep = calloc(np + 1, sizeof(double));
    if (lat && post && comp && prep) {
        size_t k = 0, kp = 0;
        for (unsigned t = 0; t < rc->threads; t++) {
            struct thr *th = &rc->thr[t];
            memcpy(lat + k, th->lat, th->n_samp * sizeof(double));
            memcpy(post + k, th->post, th->n_samp * sizeof(double));
            memcpy(comp + k, th->comp, th->n_samp * sizeof(double));
            memcpy(prep + kp, th->prep, th->n_prep * sizeof(double));
            k += th->n_samp;
            kp += th->n_prep;
        }
        ixb_summarize(lat, n, &row->lat);
        ixb_summarize(post, n, &row->post);
        ixb_summarize(comp, n, &row->comp);
        ixb_summarize(prep, np, &row->prep);
    }
    free(lat);
    free(post);
    free(comp);
    free(prep);
}

/* Runs one sweep row. 0, or -1 when it could not run (a transfer error). */
static int run_row(struct ixb_init *in, enum ixl_op op, uint64_t block, uint64_t batch,
                   uint64_t slot_bytes, struct ixb_lpool *lp, struct ixb_rpool *rp)
{
    const struct ixb_opts *o = in->o;
    struct row_ctx rc;
    struct ixb_row row;
    uint64_t per_iter = (uint64_t)o->threads * o->depth * batch * block;
    int status = 0;

    memset(&rc, 0, sizeof(rc));
    memset(&row, 0, sizeof(row));
    rc.in = in;
    rc.op = op;
    rc.block = block;
    rc.batch = batch;
    rc.slot_bytes = slot_bytes;
    rc.threads = o->threads;
    rc.depth = o->depth;
    rc.lp = lp;
    rc.rp = rp;
    rc.iters = o->iters;
    /* --max-bytes cuts a row by its iterations; a time-based row is cut by its time. */
    if (o->runtime_s == 0 && (uint64_t)rc.iters * per_iter > o->max_bytes)
        rc.iters = (unsigned)(o->max_bytes / per_iter > 0 ? o->max_bytes / per_iter : 1);
    rc.warmup = o->warmup < rc.iters / 8 ? o->warmup : rc.iters / 8;
    if (rc.warmup == 0 && o->warmup > 0)
        rc.warmup = 1;
    rc.seed = in->seed;
    in->seed += ((uint64_t)rc.warmup + rc.iters) * rc.threads + 1;
    rc.params.field_mask = o->merge ? 0 : IXL_XFER_F_NO_MERGE;
    rc.params.no_merge = !o->merge;
    pthread_mutex_init(&rc.lock, NULL);
    if (rc.threads > 1)
        pthread_barrier_init(&rc.bar, NULL, rc.threads);
    rc.thr = calloc(rc.threads, sizeof(*rc.thr));
    if (rc.thr == NULL)
        status = -1;
    if (in->store != NULL && ixb_store_row(in->store, block, batch,
                                           (uint64_t)rc.threads * rc.depth * batch, rc.seed) != 0)
        status = -1;
    if (status == 0 && o->api == IXB_API_PREP && row_preps(&rc, &row.prep_list_us) != 0)
        status = -1;
    void *cold_aside = NULL;
    if (status == 0 && o->cold_buffers && lp->touched) {
        /* Fresh pages: a READ faults them in during the transfer, as a program reading into
         * new memory does (fio's read buffers); a WRITE's source is written again first. A
         * pool never touched (the first row without checks) is fresh already: its pages come
         * from the allocator in the same state as those of fio's buffers in a new process (the
         * pages the last process gave back, last freed first). A touched one is moved aside
         * (mremap) until the row ends and the range mapped anew: its faults then take what the
         * allocator has then. MADV_DONTNEED would instead hand the pages just freed back in
         * descending physical order, no two neighbours contiguous: a direct I/O then has a
         * segment per 4 KiB and the device's max_segments cuts a 1 MiB read in two. */
        void *aside = mmap(NULL, lp->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (aside != MAP_FAILED &&
            mremap(lp->base, lp->len, lp->len, MREMAP_MAYMOVE | MREMAP_FIXED, aside) == aside) {
            cold_aside = aside;
            if (mmap(lp->base, lp->len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != lp->base) {
                fprintf(stderr, "ixlbench: --cold-buffers: mmap: %s\n", strerror(errno));
                exit(1); /* the registered range is unmapped: nothing sensible is left */
            }
        } else {
            if (aside != MAP_FAILED)
                munmap(aside, lp->len);
            madvise(lp->base, lp->len, MADV_DONTNEED);
        }
    }
    if (status == 0 && o->cold_buffers) {
        lp->touched = true; /* by this row, for the next one */
        if (op == IXL_OP_WRITE)
            memset(lp->base, IXB_POISON, lp->len);
    }
    for (unsigned t = 0; status == 0 && t < rc.threads; t++)
        if (thr_init(&rc, &rc.thr[t], t) != 0) {
            fprintf(stderr, "ixlbench: out of memory for a row\n");
            status = -1;
        }
    if (status == 0) {
        unsigned started = 1;
        for (unsigned t = 1; t < rc.threads; t++, started++)
            if (pthread_create(&rc.thr[t].tid, NULL, thr_main, &rc.thr[t]) != 0)
                break;
        if (started < rc.threads) {
            /* Cannot happen short of resource exhaustion; the barrier would wait forever. */
            fprintf(stderr, "ixlbench: cannot start %u threads\n", rc.threads);
            exit(1);
        }
        thr_main(&rc.thr[0]);
        for (unsigned t = 1; t < rc.threads; t++)
            pthread_join(rc.thr[t].tid, NULL);
        if (atomic_load(&rc.abort))
            status = -1;
    }
    if (status == 0) {
        snprintf(row.scenario, sizeof(row.scenario), "sweep");
        row.op = op;
        row.api = o->api;
        snprintf(row.path, sizeof(row.path), "%s", rc.path);
        row.block = block;
        row.batch = batch;
        row.descs = rc.descs;
        row.depth = rc.depth;
        row.threads = rc.threads;
        /* What completed in the timed part: all iterations, or fewer with --runtime. */
        uint64_t done = 0;
        for (unsigned t = 0; t < rc.threads; t++)
            done += rc.thr[t].n_samp;
        row.iters = (unsigned)(done / ((uint64_t)rc.threads * rc.depth));
        row.warmup = rc.warmup;
        row.bytes = done * batch * block;
        row.seconds = rc.seconds;
        row.gbps = rc.seconds > 0 ? (double)row.bytes / rc.seconds / 1e9 : 0;
        row.iops = rc.seconds > 0 ? (double)(row.bytes / block) / rc.seconds : 0;
        merge_samples(&rc, &row);
        row.check = o->check ? !rc.check_failed : -1;
        snprintf(row.check_msg, sizeof(row.check_msg), "%s", rc.check_msg);
        if (rc.check_failed)
            in->check_failures++;
        ixb_out_sweep_row(&row);
    }
    if (cold_aside != NULL)
        munmap(cold_aside, lp->len);
    for (unsigned t = 0; rc.thr != NULL && t < rc.threads; t++)
        thr_free(&rc.thr[t], rc.depth);
    free(rc.thr);
    ixl_prep_destroy(rc.lprep);
    ixl_prep_destroy(rc.rprep);
    if (rc.threads > 1)
        pthread_barrier_destroy(&rc.bar);
    pthread_mutex_destroy(&rc.lock);
    return status;
}

/* The section title of storage mode. */
static void store_title(struct ixb_init *in, uint64_t local_bytes)
{
    const struct ixb_opts *o = in->o;
    const struct ixb_store *st = in->store;
    char title[512], b1[32], b2[32];

    if (st->obj) {
        snprintf(title, sizeof(title),
                 "object storage: %s <-> OBJ objects %s/0..%" PRIu64
                 " (one object per descriptor; WRITE: PUT of whole objects, READ: ranged GET), "
                 "%u thread(s) x depth %u, %s API, data checks %s",
                 ixl_mem_name(o->init_mem), st->path, st->n_objs - 1, o->threads, o->depth,
                 o->api == IXB_API_PREP ? "prepared-list" : "descriptor-list",
                 o->check ? "on" : "off");
        (void)local_bytes;
        (void)b1;
        (void)b2;
        ixb_out_section(title);
        return;
    }

    snprintf(title, sizeof(title),
             "storage: %s <-> %s %s (%s, %s, %s), %s descriptors, %u thread(s) x depth %u, "
             "%s API, data checks %s (%s of %s)",
             ixl_mem_name(o->init_mem), ixl_mem_name(st->type), st->path,
             ixb_size_str(st->size, b1, sizeof(b1)), st->direct ? "direct I/O" : "buffered",
             st->direct ? "no page cache"
             : o->warm  ? "page cache warmed: the file was read once first"
                        : "page cache as found",
             st->scatter ? "scattered (4 KiB-aligned, shuffled)" : "consecutive", o->threads,
             o->depth, o->api == IXB_API_PREP ? "prepared-list" : "descriptor-list",
             o->check ? "on" : "off", ixb_size_str(local_bytes, b2, sizeof(b2)),
             ixl_mem_name(o->init_mem));
    ixb_out_section(title);
}

int ixb_sweep(struct ixb_init *in)
{
    const struct ixb_opts *o = in->o;
    uint64_t slot = 0;
    unsigned rows = 0, skipped = 0;
    enum ixl_op ops[2];
    int n_ops = 0;
    struct ixb_lpool lp;
    struct ixb_rpool rp;
    int rc = 0;
    char b1[32], b2[32];

    /* Storage: WRITE first, so that the file is written before it is read (DRAM -> FILE ->
     * DRAM); each row still fills what it reads itself. */
    if (o->op_write && in->store != NULL)
        ops[n_ops++] = IXL_OP_WRITE;
    if (o->op_read)
        ops[n_ops++] = IXL_OP_READ;
    if (o->op_write && in->store == NULL)
        ops[n_ops++] = IXL_OP_WRITE;
    for (uint64_t batch = o->batch_min; batch <= o->batch_max; batch *= 2)
        for (uint64_t block = o->block_min; block <= o->block_max; block *= 2) {
            if (batch * block > o->max_request) {
                skipped++;
                continue;
            }
            rows++;
            if (batch * block > slot)
                slot = batch * block;
        }
    if (rows == 0) {
        fprintf(stderr, "ixlbench: every request of the sweep is over --max-request %s\n",
                ixb_size_str(o->max_request, b1, sizeof(b1)));
        return 1;
    }
    in->rows_total += (double)rows * n_ops;
    /* The pools are as large as the largest request, times threads and depth. */
    memset(&rp, 0, sizeof(rp));
    if (in->store == NULL && ixb_remote_alloc(in, 1, slot * o->threads * o->depth, 0, &rp) != 0)
        return 1;
    /* --cold-buffers without checks: the pool stays untouched until its first row, whose READs
     * then fault its pages in as fio's fresh buffers are (see row_run). */
    if (ixb_local_alloc(in, 1, slot * o->threads * o->depth, 0, o->cold_buffers && !o->check,
                        &lp) != 0) {
        ixb_rpool_free(in, &rp);
        return 1;
    }
    if (in->store != NULL) {
        store_title(in, slot * o->threads * o->depth);
    } else if (in->loop) {
        char title[256], m1[24] = "DRAM", m2[24] = "DRAM";
        if (o->init_mem == IXL_MEM_VRAM)
            snprintf(m1, sizeof(m1), "VRAM of GPU %d", o->init_dev);
        if (o->target_mem == IXL_MEM_VRAM)
            snprintf(m2, sizeof(m2), "VRAM of GPU %d", o->target_dev);
        snprintf(title, sizeof(title),
                 "device mode (one agent): initiator %s, target %s, %u thread(s) x depth %u, %s "
                 "API, data checks %s (%s per side)",
                 m1, m2, o->threads, o->depth,
                 o->api == IXB_API_PREP ? "prepared-list" : "descriptor-list",
                 o->check ? "on" : "off",
                 ixb_size_str(slot * o->threads * o->depth, b2, sizeof(b2)));
        ixb_out_section(title);
    } else {
        char title[256];
        snprintf(title, sizeof(title),
                 "sweep: %u thread(s) x depth %u, %s API, data checks %s, %s memory at the "
                 "target (%s per side)",
                 o->threads, o->depth, o->api == IXB_API_PREP ? "prepared-list" : "descriptor-list",
                 o->check ? "on" : "off", o->target_heap ? "mmap" : "ixl_mem_alloc",
                 ixb_size_str(slot * o->threads * o->depth, b2, sizeof(b2)));
        ixb_out_section(title);
    }
    if (skipped)
        ixb_out_note("%u combination(s) over --max-request %s skipped", skipped,
                     ixb_size_str(o->max_request, b1, sizeof(b1)));
    for (int k = 0; k < n_ops && rc == 0; k++)
        for (uint64_t batch = o->batch_min; batch <= o->batch_max && rc == 0; batch *= 2)
            for (uint64_t block = o->block_min; block <= o->block_max && rc == 0; block *= 2) {
                if (batch * block > o->max_request)
                    continue;
                if (run_row(in, ops[k], block, batch, slot, &lp, in->store ? NULL : &rp) != 0)
                    rc = 1;
                in->rows_done += 1;
            }
    ixb_lpool_free(in, &lp);
    ixb_rpool_free(in, &rp);
    return rc;
}

/* ---- the role ----------------------------------------------------------------------------- */

static int wait_md(const struct ixb_opts *o, const char *path, void **md, size_t *len)
{
    uint64_t deadline = ixb_now_ns() + (uint64_t)(o->wait_s * 1e9);

    for (;;) {
        int r = ixb_md_read(path, md, len);
        if (r == 0)
            return 0;
        if (r == -2 || atomic_load(&ixb_target_gone))
            return -1;
        if (ixb_now_ns() >= deadline) {
            fprintf(stderr,
                    "ixlbench: no target metadata in %s after %.0f s (start ixlbench --role "
                    "target --md-file %s first)\n",
                    path, o->wait_s, path);
            return -1;
        }
        usleep(20000);
    }
}

int ixb_initiator_run(const struct ixb_opts *o, const char *md_file)
{
    struct ixb_init in;
    void *tmd = NULL, *md = NULL;
    size_t tmd_len = 0, md_len = 0;
    struct ixb_ctl_ans a;
    ixl_status st;
    int rc;
    char hello[160];

    memset(&in, 0, sizeof(in));
    in.o = o;
    in.seed = o->seed;
    in.name = o->name ? o->name : "ixlbench-initiator";
    if ((o->init_mem != IXL_MEM_DRAM && o->init_mem != IXL_MEM_VRAM) ||
        (o->target_mem != IXL_MEM_DRAM && o->target_mem != IXL_MEM_VRAM)) {
        fprintf(stderr, "ixlbench: %s memory between agents: not supported\n",
                ixl_mem_name(o->init_mem != IXL_MEM_DRAM ? o->init_mem : o->target_mem));
        return 1;
    }
    bool exchange = md_file == NULL && (o->peer_host != NULL || o->etcd != NULL);
    if (!exchange && wait_md(o, md_file, &tmd, &tmd_len) != 0)
        return 1;
    rc = ixb_agent_make(in.name, o->backend, o->opts, o->n_opts, &in.agent, &in.be);
    if (rc != 0) {
        free(tmd);
        return rc;
    }
    rc = 1;
    pthread_mutex_init(&in.ctl.lock, NULL);
    in.ctl.agent = in.agent;
    ixl_agent_fd(in.agent, &in.ctl.fd);
    if (exchange) {
        /* the target's metadata through its listener or etcd, then wait until it is loaded */
        struct ixl_peer peer = {o->peer_host, o->peer_port};
        uint64_t t0 = ixb_now_ns(), deadline = t0 + (uint64_t)(o->wait_s * 1e9), asked = t0;
        st = ixl_md_fetch(in.agent, o->target_name, o->peer_host ? &peer : NULL, NULL);
        while (st == IXL_OK && ixl_remote_check(in.agent, o->target_name, NULL) != IXL_OK) {
            if (ixb_now_ns() >= deadline) {
                st = IXL_ERR_TIMEOUT;
                break;
            }
            usleep(2000);
            /* a listener not up yet refused the first fetch: ask again every 500 ms (etcd's
             * fetch waits by itself) */
            if (o->peer_host != NULL && ixb_now_ns() - asked > 500000000u) {
                asked = ixb_now_ns();
                st = ixl_md_fetch(in.agent, o->target_name, &peer, NULL);
            }
        }
        if (st != IXL_OK) {
            fprintf(stderr, "ixlbench: the metadata of %s from %s: %s: %s\n", o->target_name,
                    o->peer_host ? o->peer_host : "etcd", ixl_strerror(st),
                    ixl_agent_last_error(in.agent));
            goto out;
        }
        snprintf(in.ctl.target, sizeof(in.ctl.target), "%s", o->target_name);
        if (!o->quiet)
            fprintf(stderr, "ixlbench: metadata of %s from %s in %.1f ms\n", o->target_name,
                    o->peer_host ? "its listener" : "etcd", (double)(ixb_now_ns() - t0) / 1e6);
    } else {
        st = ixl_md_load(in.agent, tmd, tmd_len, in.ctl.target, sizeof(in.ctl.target));
        free(tmd);
        if (st != IXL_OK) {
            fprintf(stderr, "ixlbench: the target's metadata in %s: %s: %s\n", md_file,
                    ixl_strerror(st), ixl_agent_last_error(in.agent));
            goto out;
        }
    }
    st = ixl_md_get(in.agent, NULL, &md, &md_len);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_md_get: %s\n", ixl_strerror(st));
        goto out;
    }
    snprintf(hello, sizeof(hello), "%ld %s", (long)getpid(), ixb_boot_id());
    if (ixb_ctl_call(&in.ctl, "hello", md, md_len, &a, "%s", hello) != 0) {
        ixl_free(md);
        goto out;
    }
    ixl_free(md);
    in.same_host = a.m.argc > 3 && strcmp(a.m.argv[3], ixb_boot_id()) == 0;
    if (in.same_host)
        in.ctl.target_pid = strtol(a.m.argv[2], NULL, 10);
    ixb_ctl_ans_free(&a);
    ixb_out_header(o->backend, in.name, in.ctl.target);
    rc = 0;
    if (o->kv) /* the sweep's rows come first, then these: the progress bar never goes back */
        in.rows_total += ixb_kv_rows(o);
    if (o->sweep && ixb_sweep(&in) != 0)
        rc = 1;
    if (rc == 0 && o->kv && ixb_kv_run(&in) != 0)
        rc = 1;
    ixb_progress_clear();
    if (ixb_ctl_call(&in.ctl, "done", NULL, 0, &a, NULL) == 0)
        ixb_ctl_ans_free(&a);
    if (rc == 0 && in.check_failures > 0) {
        fprintf(stderr, "ixlbench: %d row(s) failed their data check\n", in.check_failures);
        rc = 1;
    }
out:
    ixl_agent_destroy(in.agent);
    pthread_mutex_destroy(&in.ctl.lock);
    return rc;
}

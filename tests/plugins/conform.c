/*
 * conform.c - conformance plugins: what a third party writes from ixl_plugin.h alone, at both
 * ends of the size rules. One compile definition picks the variant:
 *   CONFORM_MIN - "CONFMIN": an ops table of exactly IXL_ENGINE_OPS_MIN_SIZE and only the
 *                 methods LOCAL requires (no connect, disconnect, estimate, notifications,
 *                 progress, nor anything past progress): the core must use every fallback.
 *                 Capabilities LOCAL, memory DRAM; a post copies at once.
 *   CONFORM_BIG - "CONFBIG": a descriptor and an ops table larger than this core knows, with
 *                 extra trailing fields and methods (the methods abort if ever called), and
 *                 every optional method. Capabilities LOCAL, NOTIF, PROGRESS; memory DRAM; a
 *                 post answers IXL_IN_PROGRESS and progress() (or check_xfer) copies, then
 *                 queues the notification: after the data.
 * Behaviour that the conformance test needs is keyed on the agent's name, so the plugins take
 * no options: an agent whose name contains "widen" gets a CONFBIG engine that claims REMOTE
 * (beyond its descriptor: the core must refuse it), one whose name contains "narrow" an engine
 * without NOTIF and PROGRESS.
 * Transfers are within the agent only (memcpy between registered DRAM of this process).
 * Tables use designated initializers only, so that fields added to the ABI's structs leave
 * them valid.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl_plugin.h>

#if defined(CONFORM_MIN)
#define CF_NAME "CONFMIN"
#define CF_CAPS ((uint32_t)IXL_CAP_LOCAL)
#elif defined(CONFORM_BIG)
#define CF_NAME "CONFBIG"
#define CF_CAPS ((uint32_t)(IXL_CAP_LOCAL | IXL_CAP_NOTIF | IXL_CAP_PROGRESS))
#else
#error "define CONFORM_MIN or CONFORM_BIG"
#endif

struct cf_notif {
    struct cf_notif *next;
    char *agent;
    void *msg;
    size_t len;
};

struct cf_engine {
    struct ixl_engine base; /* first, as the ABI requires */
    const struct ixl_host *host;
    char *agent;
    pthread_mutex_t lock; /* the notification queue, the posted list, the requests' state */
    struct cf_notif *head, **tail;
    struct cf_req *posted; /* requests posted and not complete (CONFBIG) */
};

struct cf_md {
    uint64_t addr, len;
};

enum cf_state { CF_IDLE, CF_POSTED, CF_DONE };

struct cf_req {
    enum ixl_op op;
    const struct ixl_xfer_side *local, *remote;
    enum cf_state state;
    void *notif; /* the posted notification, copied at post */
    size_t notif_len;
    struct cf_req *next_posted;
};

/* Takes r off the engine's posted list (lock held). */
static void cf_unpost_locked(struct cf_engine *g, struct cf_req *r)
{
    for (struct cf_req **p = &g->posted; *p != NULL; p = &(*p)->next_posted) {
        if (*p == r) {
            *p = r->next_posted;
            r->next_posted = NULL;
            return;
        }
    }
}

static struct cf_engine *cf(struct ixl_engine *e)
{
    return (struct cf_engine *)e;
}

static int cf_register_mem(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *desc,
                           struct ixl_md **out)
{
    if (type != IXL_MEM_DRAM) {
        cf(e)->host->error(cf(e)->host->ctx, IXL_ERR_BAD_MEM_TYPE, "%s takes DRAM only", CF_NAME);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    struct cf_md *md = malloc(sizeof(*md));
    if (md == NULL)
        return IXL_ERR_NO_MEMORY;
    md->addr = desc->addr;
    md->len = desc->len;
    *out = (struct ixl_md *)md;
    return IXL_OK;
}

static int cf_deregister_mem(struct ixl_engine *e, struct ixl_md *md)
{
    (void)e;
    free(md);
    return IXL_OK;
}

static int cf_load_local_md(struct ixl_engine *e, struct ixl_md *md, struct ixl_md **out)
{
    (void)e;
    *out = md; /* the same metadata serves as the target of transfers within the agent */
    return IXL_OK;
}

static int cf_unload_md(struct ixl_engine *e, struct ixl_md *md)
{
    (void)e;
    (void)md; /* load_local_md returned the registration itself: nothing to free */
    return IXL_OK;
}

static int cf_prep_xfer(struct ixl_engine *e, enum ixl_op op, const struct ixl_xfer_side *local,
                        const struct ixl_xfer_side *remote, const char *remote_agent,
                        const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    (void)opts;
    struct cf_engine *g = cf(e);
    if (strcmp(remote_agent, g->agent) != 0) {
        g->host->error(g->host->ctx, IXL_ERR_NOT_SUPPORTED,
                       "%s moves data within its agent only, not to '%s'", CF_NAME, remote_agent);
        return IXL_ERR_NOT_SUPPORTED;
    }
    if (local->type != IXL_MEM_DRAM || remote->type != IXL_MEM_DRAM) {
        g->host->error(g->host->ctx, IXL_ERR_BAD_MEM_TYPE, "%s moves DRAM to DRAM only", CF_NAME);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    if (local->count != remote->count)
        return IXL_ERR_MISMATCH;
    for (size_t i = 0; i < local->count; i++) {
        const struct ixl_xfer_desc *l = &local->descs[i], *r = &remote->descs[i];
        const struct cf_md *lm = (const struct cf_md *)l->md, *rm = (const struct cf_md *)r->md;
        /* What the header promises: equal lengths, each inside its region. */
        if (l->len != r->len || l->len == 0 || l->addr < lm->addr ||
            l->addr + l->len > lm->addr + lm->len || r->addr < rm->addr ||
            r->addr + r->len > rm->addr + rm->len) {
            g->host->error(g->host->ctx, IXL_ERR_INVALID_ARG,
                           "%s: descriptor pair %zu breaks the core's promises", CF_NAME, i);
            return IXL_ERR_INVALID_ARG;
        }
    }
    struct cf_req *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    r->op = op;
    r->local = local;
    r->remote = remote;
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

static void cf_copy(const struct cf_req *r)
{
    for (size_t i = 0; i < r->local->count; i++) {
        const struct ixl_xfer_desc *l = &r->local->descs[i], *t = &r->remote->descs[i];
        void *lp = (void *)(uintptr_t)l->addr, *tp = (void *)(uintptr_t)t->addr;
        if (r->op == IXL_OP_WRITE)
            memmove(tp, lp, (size_t)l->len);
        else
            memmove(lp, tp, (size_t)l->len);
    }
}

static int cf_check_xfer(struct ixl_engine *e, struct ixl_req *req);

static int cf_post_xfer(struct ixl_engine *e, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct cf_req *r = (struct cf_req *)req;
    void *copy = NULL;
    if (opts->notif != NULL) {
        copy = malloc(opts->notif_len);
        if (copy == NULL)
            return IXL_ERR_NO_MEMORY;
        memcpy(copy, opts->notif, opts->notif_len);
    }
#if defined(CONFORM_MIN)
    (void)e;
    free(copy); /* never given one: the engine has no NOTIF */
    cf_copy(r);
    r->state = CF_DONE;
    return IXL_OK;
#else
    pthread_mutex_lock(&cf(e)->lock);
    free(r->notif);
    r->notif = copy;
    r->notif_len = opts->notif_len;
    r->state = CF_POSTED;
    r->next_posted = cf(e)->posted;
    cf(e)->posted = r;
    pthread_mutex_unlock(&cf(e)->lock);
    return IXL_IN_PROGRESS;
#endif
}

#if defined(CONFORM_BIG)
/* Completes a posted request: the data first, then its notification (lock held). */
static int cf_complete_locked(struct cf_engine *g, struct cf_req *r)
{
    if (r->state != CF_POSTED)
        return IXL_OK;
    cf_copy(r);
    if (r->notif != NULL) {
        struct cf_notif *n = calloc(1, sizeof(*n));
        char *agent = strdup(g->agent);
        if (n == NULL || agent == NULL) {
            free(n);
            free(agent);
            return IXL_ERR_NO_MEMORY;
        }
        n->agent = agent;
        n->msg = r->notif;
        n->len = r->notif_len;
        r->notif = NULL;
        *g->tail = n;
        g->tail = &n->next;
    }
    r->state = CF_DONE;
    cf_unpost_locked(g, r);
    return IXL_OK;
}
#endif

static int cf_check_xfer(struct ixl_engine *e, struct ixl_req *req)
{
    struct cf_req *r = (struct cf_req *)req;
#if defined(CONFORM_MIN)
    (void)e;
    return r->state == CF_DONE ? IXL_OK : IXL_ERR_NOT_POSTED;
#else
    struct cf_engine *g = cf(e);
    pthread_mutex_lock(&g->lock);
    int rc = cf_complete_locked(g, r);
    pthread_mutex_unlock(&g->lock);
    return rc;
#endif
}

static int cf_release_req(struct ixl_engine *e, struct ixl_req *req)
{
    struct cf_req *r = (struct cf_req *)req;
    pthread_mutex_lock(&cf(e)->lock);
    cf_unpost_locked(cf(e), r); /* in flight: canceled, no notification */
    free(r->notif);
    pthread_mutex_unlock(&cf(e)->lock);
    free(r);
    return IXL_OK;
}

#if defined(CONFORM_BIG)
static int cf_connect(struct ixl_engine *e, const char *remote)
{
    /* Within the agent only: connecting to itself is all there is. */
    return strcmp(remote, cf(e)->agent) == 0 ? IXL_OK : IXL_ERR_NOT_FOUND;
}

static int cf_disconnect(struct ixl_engine *e, const char *remote)
{
    (void)e;
    (void)remote;
    return IXL_OK;
}

static int cf_estimate(struct ixl_engine *e, struct ixl_req *req, struct ixl_cost *out)
{
    (void)e;
    const struct cf_req *r = (const struct cf_req *)req;
    uint64_t bytes = 0;
    for (size_t i = 0; i < r->local->count; i++)
        bytes += r->local->descs[i].len;
    out->duration_us = bytes / 1000u + 1u; /* 1 GB/s */
    out->error_margin_us = 0;
    out->method = IXL_COST_ANALYTICAL;
    return IXL_OK;
}

static int cf_get_notifs(struct ixl_engine *e, ixl_notif_sink_fn sink, void *sink_ctx)
{
    struct cf_engine *g = cf(e);
    pthread_mutex_lock(&g->lock);
    struct cf_notif *n = g->head;
    g->head = NULL;
    g->tail = &g->head;
    pthread_mutex_unlock(&g->lock);
    while (n != NULL) {
        struct cf_notif *next = n->next;
        sink(sink_ctx, n->agent, n->msg, n->len);
        free(n->agent);
        free(n->msg);
        free(n);
        n = next;
    }
    return IXL_OK;
}

static int cf_gen_notif(struct ixl_engine *e, const char *remote, const void *msg, size_t len)
{
    struct cf_engine *g = cf(e);
    if (strcmp(remote, g->agent) != 0)
        return IXL_ERR_NOT_FOUND;
    struct cf_notif *n = calloc(1, sizeof(*n));
    char *agent = strdup(g->agent);
    void *copy = malloc(len ? len : 1);
    if (n == NULL || agent == NULL || copy == NULL) {
        free(n);
        free(agent);
        free(copy);
        return IXL_ERR_NO_MEMORY;
    }
    if (len)
        memcpy(copy, msg, len);
    n->agent = agent;
    n->msg = copy;
    n->len = len;
    pthread_mutex_lock(&g->lock);
    *g->tail = n;
    g->tail = &n->next;
    pthread_mutex_unlock(&g->lock);
    g->host->signal(g->host->ctx);
    return IXL_OK;
}

static int cf_progress(struct ixl_engine *e)
{
    struct cf_engine *g = cf(e);
    int done = 0, rc = IXL_OK;
    pthread_mutex_lock(&g->lock);
    while (g->posted != NULL && rc == IXL_OK) {
        rc = cf_complete_locked(g, g->posted);
        done = 1;
    }
    pthread_mutex_unlock(&g->lock);
    if (done)
        g->host->signal(g->host->ctx);
    return rc;
}

static int cf_query_mem(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *descs,
                        size_t n, struct ixl_mem_query *out)
{
    (void)e;
    if (type != IXL_MEM_DRAM)
        return IXL_ERR_NOT_SUPPORTED;
    for (size_t i = 0; i < n; i++) {
        out[i].exists = true;
        out[i].size = descs[i].len;
    }
    return IXL_OK;
}

static int cf_alloc_mem(struct ixl_engine *e, enum ixl_mem type, size_t len, void **out)
{
    (void)e;
    if (type != IXL_MEM_DRAM)
        return IXL_ERR_NOT_SUPPORTED;
    void *p = calloc(1, len);
    if (p == NULL)
        return IXL_ERR_NO_MEMORY;
    *out = p;
    return IXL_OK;
}

static int cf_free_mem(struct ixl_engine *e, void *addr, size_t len)
{
    (void)e;
    (void)len;
    free(addr);
    return IXL_OK;
}

static int cf_req_info(struct ixl_engine *e, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)e;
    (void)req;
    strcpy(out->path, "conform-big");
    return IXL_OK;
}

/* Methods of a future ABI this core does not know: it must never call them. */
static int cf_future_method(struct ixl_engine *e)
{
    (void)e;
    abort();
}
#endif

static int cf_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    struct cf_engine *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return IXL_ERR_NO_MEMORY;
    g->agent = strdup(init->agent_name); /* init is borrowed for this call only */
    if (g->agent == NULL) {
        free(g);
        return IXL_ERR_NO_MEMORY;
    }
    g->host = init->host;
    pthread_mutex_init(&g->lock, NULL);
    g->tail = &g->head;
    g->base.size = sizeof(g->base);
    g->base.caps = CF_CAPS;
    g->base.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
#if defined(CONFORM_BIG)
    if (strstr(init->agent_name, "widen") != NULL)
        g->base.caps |= IXL_CAP_REMOTE; /* beyond the descriptor: must be refused */
    if (strstr(init->agent_name, "narrow") != NULL)
        g->base.caps = IXL_CAP_LOCAL;
#endif
    *out = &g->base;
    return IXL_OK;
}

static void cf_destroy_engine(struct ixl_engine *e)
{
    struct cf_engine *g = cf(e);
    while (g->head != NULL) {
        struct cf_notif *n = g->head;
        g->head = n->next;
        free(n->agent);
        free(n->msg);
        free(n);
    }
    pthread_mutex_destroy(&g->lock);
    free(g->agent);
    free(g);
}

#if defined(CONFORM_MIN)
/* Exactly the smallest table: the slots up to progress, nothing after. */
static const struct ixl_engine_ops cf_ops = {
    .size = IXL_ENGINE_OPS_MIN_SIZE,
    .register_mem = cf_register_mem,
    .deregister_mem = cf_deregister_mem,
    .load_local_md = cf_load_local_md,
    .unload_md = cf_unload_md,
    .prep_xfer = cf_prep_xfer,
    .post_xfer = cf_post_xfer,
    .check_xfer = cf_check_xfer,
    .release_req = cf_release_req,
};
#define CF_OPS (&cf_ops)

static const struct ixl_plugin_desc cf_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = CF_NAME,
    .version = "1.0-conformance",
    .caps = CF_CAPS,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM),
    .create_engine = cf_create_engine,
    .destroy_engine = cf_destroy_engine,
    .ops = CF_OPS,
};
#define CF_DESC (&cf_desc)
#else
/* A plugin built against a newer header: both structs carry fields this core does not know,
 * and report their full size. */
struct cf_future_ops {
    struct ixl_engine_ops known;
    int (*future_a)(struct ixl_engine *e);
    int (*future_b)(struct ixl_engine *e);
    uint64_t future_word;
};

static const struct cf_future_ops cf_ops = {
    .known =
        {
            .size = sizeof(struct cf_future_ops),
            .connect = cf_connect,
            .disconnect = cf_disconnect,
            .register_mem = cf_register_mem,
            .deregister_mem = cf_deregister_mem,
            .load_local_md = cf_load_local_md,
            .unload_md = cf_unload_md,
            .prep_xfer = cf_prep_xfer,
            .estimate_xfer_cost = cf_estimate,
            .post_xfer = cf_post_xfer,
            .check_xfer = cf_check_xfer,
            .release_req = cf_release_req,
            .get_notifs = cf_get_notifs,
            .gen_notif = cf_gen_notif,
            .progress = cf_progress,
            .query_mem = cf_query_mem,
            .alloc_mem = cf_alloc_mem,
            .free_mem = cf_free_mem,
            .req_info = cf_req_info,
        },
    .future_a = cf_future_method,
    .future_b = cf_future_method,
    .future_word = 0xdeadbeefcafef00dull,
};

struct cf_future_desc {
    struct ixl_plugin_desc known;
    uint64_t future_flags;
    const char *future_text;
    int (*future_entry)(struct ixl_engine *e);
};

static const struct cf_future_desc cf_desc = {
    .known =
        {
            .abi_major = IXL_PLUGIN_ABI_MAJOR,
            .abi_minor = IXL_PLUGIN_ABI_MINOR + 7, /* a later minor of the same major */
            .size = sizeof(struct cf_future_desc),
            .name = CF_NAME,
            .version = "1.7-conformance",
            .caps = CF_CAPS,
            .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM),
            .create_engine = cf_create_engine,
            .destroy_engine = cf_destroy_engine,
            .ops = &cf_ops.known,
        },
    .future_flags = ~0ull,
    .future_text = "a field of a future ABI",
    .future_entry = cf_future_method,
};
#define CF_DESC (&cf_desc.known)
#endif

static const struct ixl_plugin_desc *cf_entry(void)
{
    return CF_DESC;
}

IXL_PLUGIN_EXPORT(cf_entry)

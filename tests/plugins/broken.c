/*
 * broken.c - plugins the plugin manager must refuse (or, for BROKEN_DUP, refuse as a duplicate),
 * one per refusal rule of ixl_pm_check_desc() and of loading a file. Every field but the
 * defect's is valid (all methods present, caps LOCAL|REMOTE|NOTIF|PROGRESS, DRAM):
 *   BROKEN_NOSYM      - no ixl_plugin_entry symbol (exports another name);
 *   BROKEN_NODESC     - the entry returns NULL;
 *   BROKEN_ABI        - abi_major one above IXL_PLUGIN_ABI_MAJOR;
 *   BROKEN_DESCSMALL  - a descriptor size that stops before ops;
 *   BROKEN_NAME       - a name with characters outside [A-Za-z0-9_];
 *   BROKEN_NOCREATE   - no create_engine;       BROKEN_NODESTROY - no destroy_engine;
 *   BROKEN_NOOPS      - no ops table;
 *   BROKEN_SMALL      - an ops table smaller than IXL_ENGINE_OPS_MIN_SIZE;
 *   BROKEN_CAPS       - a capability bit that is not an enum ixl_cap;
 *   BROKEN_NOXFER     - NOTIF|PROGRESS only: neither local nor remote;
 *   BROKEN_NONOTIF    - REMOTE|LOCAL without NOTIF;
 *   BROKEN_MEM0       - an empty memory-type mask; BROKEN_MEMBAD - a bit past IXL_MEM_COUNT;
 *   BROKEN_NOCHECK    - check_xfer missing (a method every backend needs);
 *   BROKEN_NOLOCALMD  - LOCAL without load_local_md;
 *   BROKEN_NOREMOTEMD - REMOTE without load_remote_md;
 *   BROKEN_NOGENNOTIF - NOTIF without gen_notif;
 *   BROKEN_NOPROGRESS - PROGRESS without progress;
 *   BROKEN_ALLOCPAIR  - alloc_mem without free_mem;
 *   BROKEN_OPTION     - an option without a name;
 *   BROKEN_OPTS       - an option of a type ixl does not know;
 *   BROKEN_DUP        - a valid plugin that calls itself "TEST";
 *   BROKEN_ENGSIZE    - a valid plugin (OLDENGINE) whose engines have no size (base.size 0, as
 *                       an engine built against ABI 1 reads): backend creation must refuse them.
 * BROKEN_<defect> picks the defect and BR_PLUGIN_NAME ("BROKEN_<defect>") the plugin's name.
 * None of them makes working engines: create_engine answers IXL_ERR_NOT_SUPPORTED (or, for
 * BROKEN_ENGSIZE, an engine the core must refuse and destroy). Tables use
 * designated initializers only, so fields added to the ABI's structs do not disturb them.
 */
#include <stddef.h>
#include <stdlib.h>

#include <ixl/ixl_plugin.h>

/* A defect that leaves a slot NULL leaves its method unreferenced. */
#pragma GCC diagnostic ignored "-Wunused-function"

#if defined(BROKEN_DUP)
#define BR_NAME "TEST"
#elif defined(BROKEN_ENGSIZE)
#define BR_NAME "OLDENGINE"
#elif defined(BROKEN_NAME)
#define BR_NAME "BROKEN-NAME!"
#elif defined(BR_PLUGIN_NAME)
#define BR_NAME BR_PLUGIN_NAME
#else
#error "define BROKEN_<defect> and BR_PLUGIN_NAME=\"BROKEN_<defect>\" (see above), or BROKEN_DUP"
#endif

#if defined(BROKEN_NONOTIF)
#define BR_CAPS (IXL_CAP_LOCAL | IXL_CAP_REMOTE)
#elif defined(BROKEN_CAPS)
#define BR_CAPS (IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | (1u << 7))
#elif defined(BROKEN_NOXFER)
#define BR_CAPS (IXL_CAP_NOTIF | IXL_CAP_PROGRESS)
#else
#define BR_CAPS (IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS)
#endif

#if defined(BROKEN_MEM0)
#define BR_MEM_MASK 0u
#elif defined(BROKEN_MEMBAD)
#define BR_MEM_MASK (IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_COUNT))
#else
#define BR_MEM_MASK IXL_MEM_BIT(IXL_MEM_DRAM)
#endif

#if defined(BROKEN_SMALL)
#define BR_OPS_SIZE offsetof(struct ixl_engine_ops, prep_xfer)
#else
#define BR_OPS_SIZE sizeof(struct ixl_engine_ops)
#endif

#if defined(BROKEN_DESCSMALL)
#define BR_DESC_SIZE offsetof(struct ixl_plugin_desc, ops)
#else
#define BR_DESC_SIZE sizeof(struct ixl_plugin_desc)
#endif

#if defined(BROKEN_ABI)
#define BR_ABI_MAJOR (IXL_PLUGIN_ABI_MAJOR + 1)
#else
#define BR_ABI_MAJOR IXL_PLUGIN_ABI_MAJOR
#endif

/* Slots a defect leaves NULL. */
#if defined(BROKEN_NOCHECK)
#define BR_CHECK_FN NULL
#else
#define BR_CHECK_FN br_req
#endif
#if defined(BROKEN_NOLOCALMD)
#define BR_LOCAL_MD_FN NULL
#else
#define BR_LOCAL_MD_FN br_load_local_md
#endif
#if defined(BROKEN_NOREMOTEMD)
#define BR_REMOTE_MD_FN NULL
#else
#define BR_REMOTE_MD_FN br_load_remote_md
#endif
#if defined(BROKEN_NOGENNOTIF)
#define BR_GEN_NOTIF_FN NULL
#else
#define BR_GEN_NOTIF_FN br_gen_notif
#endif
#if defined(BROKEN_NOPROGRESS)
#define BR_PROGRESS_FN NULL
#else
#define BR_PROGRESS_FN br_progress
#endif
#if defined(BROKEN_NOCREATE)
#define BR_CREATE_FN NULL
#else
#define BR_CREATE_FN br_create_engine
#endif
#if defined(BROKEN_NODESTROY)
#define BR_DESTROY_FN NULL
#else
#define BR_DESTROY_FN br_destroy_engine
#endif

static int br_conn(struct ixl_engine *e, const char *remote)
{
    (void)e;
    (void)remote;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_get_conn_info(struct ixl_engine *e, const void **info, size_t *len)
{
    (void)e;
    (void)info;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_load_remote_conn_info(struct ixl_engine *e, const char *remote, const void *info,
                                    size_t len)
{
    (void)e;
    (void)remote;
    (void)info;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_register_mem(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *desc,
                           struct ixl_md **out)
{
    (void)e;
    (void)type;
    (void)desc;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_md(struct ixl_engine *e, struct ixl_md *md)
{
    (void)e;
    (void)md;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_get_public_data(struct ixl_engine *e, const struct ixl_md *md, const void **data,
                              size_t *len)
{
    (void)e;
    (void)md;
    (void)data;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_load_remote_md(struct ixl_engine *e, const char *remote, enum ixl_mem type,
                             const struct ixl_reg_desc *desc, const void *data, size_t len,
                             struct ixl_md **out)
{
    (void)e;
    (void)remote;
    (void)type;
    (void)desc;
    (void)data;
    (void)len;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_load_local_md(struct ixl_engine *e, struct ixl_md *md, struct ixl_md **out)
{
    (void)e;
    (void)md;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_prep_xfer(struct ixl_engine *e, enum ixl_op op, const struct ixl_xfer_side *local,
                        const struct ixl_xfer_side *remote, const char *remote_agent,
                        const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    (void)e;
    (void)op;
    (void)local;
    (void)remote;
    (void)remote_agent;
    (void)opts;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_post_xfer(struct ixl_engine *e, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    (void)e;
    (void)req;
    (void)opts;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_req(struct ixl_engine *e, struct ixl_req *req)
{
    (void)e;
    (void)req;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_get_notifs(struct ixl_engine *e, ixl_notif_sink_fn sink, void *ctx)
{
    (void)e;
    (void)sink;
    (void)ctx;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_gen_notif(struct ixl_engine *e, const char *remote, const void *msg, size_t len)
{
    (void)e;
    (void)remote;
    (void)msg;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int br_progress(struct ixl_engine *e)
{
    (void)e;
    return IXL_ERR_NOT_SUPPORTED;
}

#if defined(BROKEN_ENGSIZE)
static int br_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    (void)init;
    struct ixl_engine *e = calloc(1, sizeof(*e)); /* size left 0; malloc'd so a leak shows */
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->caps = IXL_CAP_LOCAL;
    e->mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    *out = e;
    return IXL_OK;
}

static void br_destroy_engine(struct ixl_engine *e)
{
    free(e);
}
#else
static int br_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    (void)out;
    if (init != NULL && init->host != NULL && init->host->error != NULL)
        init->host->error(init->host->ctx, IXL_ERR_NOT_SUPPORTED,
                          "%s: a broken test plugin makes no engines", BR_NAME);
    return IXL_ERR_NOT_SUPPORTED;
}

static void br_destroy_engine(struct ixl_engine *e)
{
    (void)e;
}
#endif

#if defined(BROKEN_ALLOCPAIR)
static int br_alloc_mem(struct ixl_engine *e, enum ixl_mem type, size_t len, void **out)
{
    (void)e;
    (void)type;
    (void)len;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}
#endif

__attribute__((unused)) static const struct ixl_engine_ops br_ops = {
    .size = BR_OPS_SIZE,
    .connect = br_conn,
    .disconnect = br_conn,
    .get_conn_info = br_get_conn_info,
    .load_remote_conn_info = br_load_remote_conn_info,
    .register_mem = br_register_mem,
    .deregister_mem = br_md,
    .get_public_data = br_get_public_data,
    .load_remote_md = BR_REMOTE_MD_FN,
    .load_local_md = BR_LOCAL_MD_FN,
    .unload_md = br_md,
    .prep_xfer = br_prep_xfer,
    .post_xfer = br_post_xfer,
    .check_xfer = BR_CHECK_FN,
    .release_req = br_req,
    .get_notifs = br_get_notifs,
    .gen_notif = BR_GEN_NOTIF_FN,
    .progress = BR_PROGRESS_FN,
#if defined(BROKEN_ALLOCPAIR)
    .alloc_mem = br_alloc_mem,
#endif
};

#if defined(BROKEN_OPTION)
/* The manager must refuse an option that lacks its name. */
static const struct ixl_option br_options[] = {
    {.name = NULL},
};
#define BR_OPTIONS br_options
#define BR_N_OPTIONS (sizeof(br_options) / sizeof(br_options[0]))
#elif defined(BROKEN_OPTS)
/* The manager must refuse an option of a type it does not know. */
static const struct ixl_option br_options[] = {
    {.name = "unused",
     .default_value = "0",
     .type = (enum ixl_opt_type)99,
     .description = "an option of an unknown type"},
};
#define BR_OPTIONS br_options
#define BR_N_OPTIONS (sizeof(br_options) / sizeof(br_options[0]))
#else
#define BR_OPTIONS NULL
#define BR_N_OPTIONS 0
#endif

__attribute__((unused)) static const struct ixl_plugin_desc br_desc = {
    .abi_major = BR_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = BR_DESC_SIZE,
    .name = BR_NAME,
    .version = "0.0-broken",
    .caps = BR_CAPS,
    .mem_mask = BR_MEM_MASK,
    .options = BR_OPTIONS,
    .n_options = BR_N_OPTIONS,
    .create_engine = BR_CREATE_FN,
    .destroy_engine = BR_DESTROY_FN,
#if !defined(BROKEN_NOOPS)
    .ops = &br_ops,
#endif
};

static const struct ixl_plugin_desc *br_entry(void)
{
#if defined(BROKEN_NODESC)
    return NULL;
#else
    return &br_desc;
#endif
}

#if defined(BROKEN_NOSYM)
/* Looks like a plugin, under the wrong name: the manager must not find an entry. */
__attribute__((visibility("default"))) const struct ixl_plugin_desc *ixl_plugin_entry_v0(void);
__attribute__((visibility("default"))) const struct ixl_plugin_desc *ixl_plugin_entry_v0(void)
{
    return br_entry();
}
#else
IXL_PLUGIN_EXPORT(br_entry)
#endif

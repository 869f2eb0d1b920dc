/*
 * broken.c - plugins the plugin manager must refuse (or, for BROKEN_DUP, refuse as a duplicate).
 * One compile definition picks the defect:
 *   BROKEN_NOSYM   - no ixl_plugin_entry symbol (exports another name);
 *   BROKEN_ABI     - abi_major one above IXL_PLUGIN_ABI_MAJOR;
 *   BROKEN_SMALL   - an ops table smaller than IXL_ENGINE_OPS_MIN_SIZE;
 *   BROKEN_NONOTIF - REMOTE|LOCAL without NOTIF, every method present;
 *   BROKEN_OPTS    - an option of a type ixl does not know;
 *   BROKEN_DUP     - a valid plugin that calls itself "TEST";
 *   BROKEN_ENGSIZE - a valid plugin (OLDENGINE) whose engines have no size (base.size 0, as
 *                    an engine built against ABI 1 reads): backend creation must refuse them.
 * None of them makes working engines: create_engine answers IXL_ERR_NOT_SUPPORTED (or, for
 * BROKEN_ENGSIZE, an engine the core must refuse and destroy).
 */
#include <stddef.h>
#include <stdlib.h>

#include <ixl/ixl_plugin.h>

#if defined(BROKEN_NOSYM)
#define BROKEN_NAME "BROKEN_NOSYM"
#elif defined(BROKEN_ABI)
#define BROKEN_NAME "BROKEN_ABI"
#elif defined(BROKEN_SMALL)
#define BROKEN_NAME "BROKEN_SMALL"
#elif defined(BROKEN_NONOTIF)
#define BROKEN_NAME "BROKEN_NONOTIF"
#elif defined(BROKEN_OPTS)
#define BROKEN_NAME "BROKEN_OPTS"
#elif defined(BROKEN_DUP)
#define BROKEN_NAME "TEST"
#elif defined(BROKEN_ENGSIZE)
#define BROKEN_NAME "OLDENGINE"
#else
#error \
    "define one of BROKEN_NOSYM, BROKEN_ABI, BROKEN_SMALL, BROKEN_NONOTIF, BROKEN_OPTS, BROKEN_DUP, BROKEN_ENGSIZE"
#endif

#if defined(BROKEN_NONOTIF)
#define BROKEN_CAPS (IXL_CAP_LOCAL | IXL_CAP_REMOTE)
#else
#define BROKEN_CAPS (IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS)
#endif

#if defined(BROKEN_SMALL)
#define BROKEN_OPS_SIZE offsetof(struct ixl_engine_ops, prep_xfer)
#else
#define BROKEN_OPS_SIZE sizeof(struct ixl_engine_ops)
#endif

#if defined(BROKEN_OPTS)
#define BROKEN_OPT_TYPE ((enum ixl_opt_type)99)
#else
#define BROKEN_OPT_TYPE IXL_OPT_INT
#endif

#if defined(BROKEN_ABI)
#define BROKEN_ABI_MAJOR (IXL_PLUGIN_ABI_MAJOR + 1)
#else
#define BROKEN_ABI_MAJOR IXL_PLUGIN_ABI_MAJOR
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
                          "%s: a broken test plugin makes no engines", BROKEN_NAME);
    return IXL_ERR_NOT_SUPPORTED;
}

static void br_destroy_engine(struct ixl_engine *e)
{
    (void)e;
}
#endif

static const struct ixl_engine_ops br_ops = {
    .size = BROKEN_OPS_SIZE,
    .connect = br_conn,
    .disconnect = br_conn,
    .get_conn_info = br_get_conn_info,
    .load_remote_conn_info = br_load_remote_conn_info,
    .register_mem = br_register_mem,
    .deregister_mem = br_md,
    .get_public_data = br_get_public_data,
    .load_remote_md = br_load_remote_md,
    .load_local_md = br_load_local_md,
    .unload_md = br_md,
    .prep_xfer = br_prep_xfer,
    .post_xfer = br_post_xfer,
    .check_xfer = br_req,
    .release_req = br_req,
    .get_notifs = br_get_notifs,
    .gen_notif = br_gen_notif,
    .progress = br_progress,
};

static const struct ixl_option br_options[] = {
    {.name = "unused",
     .default_value = "0",
     .type = BROKEN_OPT_TYPE,
     .description = "an option so that the descriptor is complete"},
};

static const struct ixl_plugin_desc br_desc = {
    .abi_major = BROKEN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = BROKEN_NAME,
    .version = "0.0-broken",
    .caps = BROKEN_CAPS,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM),
    .options = br_options,
    .n_options = sizeof(br_options) / sizeof(br_options[0]),
    .create_engine = br_create_engine,
    .destroy_engine = br_destroy_engine,
    .ops = &br_ops,
};

static const struct ixl_plugin_desc *br_entry(void)
{
    return &br_desc;
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

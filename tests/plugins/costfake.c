/*
 * COSTFAKE: a second VRAM <-> FILE backend for the automatic-choice test (test_posix_vram
 * "auto"), where CI has no GDS. It registers VRAM and FILE, prepares VRAM <-> FILE requests and
 * estimates them from the same cost table as POSIX (plugins/common/ixl_cost_table.h; option
 * cost_table, rows "COSTFAKE fake READ|WRITE SIZE GBPS"), but moves no data: a post fails with
 * IXL_ERR_NOT_SUPPORTED. Only the choice is under test.
 */
#include <stdlib.h>

#include <ixl/ixl_plugin.h>

#include "../../plugins/common/ixl_cost_table.h"

struct cf_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    struct ixl_cost_table costs;
};

struct cf_req {
    int op; /* as the table names it: WRITE = memory -> file */
    uint64_t bytes, n;
};

static const struct ixl_option cf_options[] = {
    {.name = "cost_table",
     .default_value = "",
     .type = IXL_OPT_STRING,
     .description = "the cost table file (empty: the default path, else the built-in table)"},
};

static int cf_create(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    const struct ixl_host *h = init->host;
    struct cf_engine *e = h->sys->calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    char why[512];
    int rc = ixl_cost_table_open(h->sys, init->values[0].str, &e->costs, why, sizeof(why));
    if (rc != IXL_OK) {
        h->error(h->ctx, rc, "COSTFAKE: %s", why);
        free(e);
        return rc;
    }
    e->host = h;
    e->base.size = sizeof(e->base);
    e->base.caps = IXL_CAP_LOCAL;
    e->base.mem_mask = IXL_MEM_BIT(IXL_MEM_VRAM) | IXL_MEM_BIT(IXL_MEM_FILE);
    *out = &e->base;
    return IXL_OK;
}

static void cf_destroy(struct ixl_engine *base)
{
    struct cf_engine *e = (struct cf_engine *)base;
    ixl_cost_table_free(&e->costs);
    free(e);
}

static int cf_register(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *d,
                       struct ixl_md **out)
{
    struct cf_engine *e = (struct cf_engine *)base;
    (void)d;
    int *m = e->host->sys->malloc(sizeof(int));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    *m = (int)type;
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int cf_deregister(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    free(md);
    return IXL_OK;
}

static int cf_load_local(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    (void)base;
    *out = md;
    return IXL_OK;
}

static int cf_unload(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    (void)md;
    return IXL_OK;
}

static int cf_prep(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                   const struct ixl_xfer_side *remote, const char *remote_agent,
                   const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct cf_engine *e = (struct cf_engine *)base;
    (void)remote_agent;
    (void)opts;
    int rfile = remote->type == IXL_MEM_FILE;
    if (rfile == (local->type == IXL_MEM_FILE)) {
        e->host->error(e->host->ctx, IXL_ERR_BAD_MEM_TYPE, "COSTFAKE moves VRAM <-> FILE only");
        return IXL_ERR_BAD_MEM_TYPE;
    }
    struct cf_req *r = e->host->sys->calloc(1, sizeof(*r));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    r->op = (op == IXL_OP_WRITE) == (bool)rfile ? IXL_OP_WRITE : IXL_OP_READ;
    r->n = local->count;
    for (size_t i = 0; i < local->count; i++)
        r->bytes += local->descs[i].len;
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

static int cf_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out)
{
    struct cf_engine *e = (struct cf_engine *)base;
    struct cf_req *r = (struct cf_req *)req;
    return ixl_cost_table_estimate(&e->costs, "COSTFAKE", "fake", r->op, r->bytes / r->n, r->bytes,
                                   out);
}

static int cf_post(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct cf_engine *e = (struct cf_engine *)base;
    (void)req;
    (void)opts;
    e->host->error(e->host->ctx, IXL_ERR_NOT_SUPPORTED,
                   "COSTFAKE only takes part in the choice of a backend: it moves no data");
    return IXL_ERR_NOT_SUPPORTED;
}

static int cf_check(struct ixl_engine *base, struct ixl_req *req)
{
    (void)base;
    (void)req;
    return IXL_ERR_NOT_SUPPORTED;
}

static int cf_release(struct ixl_engine *base, struct ixl_req *req)
{
    (void)base;
    free(req);
    return IXL_OK;
}

static int cf_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)base;
    (void)req;
    snprintf(out->path, sizeof(out->path), "fake");
    return IXL_OK;
}

static const struct ixl_engine_ops cf_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .register_mem = cf_register,
    .deregister_mem = cf_deregister,
    .load_local_md = cf_load_local,
    .unload_md = cf_unload,
    .prep_xfer = cf_prep,
    .estimate_xfer_cost = cf_estimate,
    .post_xfer = cf_post,
    .check_xfer = cf_check,
    .release_req = cf_release,
    .req_info = cf_req_info,
};

static const struct ixl_plugin_desc cf_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "COSTFAKE",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_VRAM) | IXL_MEM_BIT(IXL_MEM_FILE),
    .options = cf_options,
    .n_options = 1,
    .create_engine = cf_create,
    .destroy_engine = cf_destroy,
    .ops = &cf_ops,
};

static const struct ixl_plugin_desc *cf_entry(void)
{
    return &cf_desc;
}

IXL_PLUGIN_EXPORT(cf_entry)

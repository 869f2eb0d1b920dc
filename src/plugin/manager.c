#include "plugin/manager.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/builtin.h"
#include "util/config.h"
#include "util/out.h"
#include "util/log.h"
#include "util/opt.h"
#include "util/sys.h"

#define PLUGIN_PREFIX "libixl_plugin_"
#define PLUGIN_SUFFIX ".so"

/* ---- stubs for methods a plugin lacks: every slot of the core's copy is callable ---------- */

static int stub_conn(struct ixl_engine *e, const char *remote)
{
    (void)e;
    (void)remote;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_get_conn_info(struct ixl_engine *e, const void **info, size_t *len)
{
    (void)e;
    (void)info;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_load_remote_conn_info(struct ixl_engine *e, const char *remote, const void *info,
                                      size_t len)
{
    (void)e;
    (void)remote;
    (void)info;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_register_mem(struct ixl_engine *e, enum ixl_mem type,
                             const struct ixl_reg_desc *desc, struct ixl_md **out)
{
    (void)e;
    (void)type;
    (void)desc;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_md(struct ixl_engine *e, struct ixl_md *md)
{
    (void)e;
    (void)md;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_get_public_data(struct ixl_engine *e, const struct ixl_md *md, const void **data,
                                size_t *len)
{
    (void)e;
    (void)md;
    (void)data;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_load_remote_md(struct ixl_engine *e, const char *remote, enum ixl_mem type,
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

static int stub_load_local_md(struct ixl_engine *e, struct ixl_md *md, struct ixl_md **out)
{
    (void)e;
    (void)md;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_prep_xfer(struct ixl_engine *e, enum ixl_op op, const struct ixl_xfer_side *local,
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

static int stub_estimate(struct ixl_engine *e, struct ixl_req *req, struct ixl_cost *out)
{
    (void)e;
    (void)req;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_post_xfer(struct ixl_engine *e, struct ixl_req *req,
                          const struct ixl_xfer_opts *opts)
{
    (void)e;
    (void)req;
    (void)opts;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_req(struct ixl_engine *e, struct ixl_req *req)
{
    (void)e;
    (void)req;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_get_notifs(struct ixl_engine *e, ixl_notif_sink_fn sink, void *ctx)
{
    (void)e;
    (void)sink;
    (void)ctx;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_gen_notif(struct ixl_engine *e, const char *remote, const void *msg, size_t len)
{
    (void)e;
    (void)remote;
    (void)msg;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_progress(struct ixl_engine *e)
{
    (void)e;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_query_mem(struct ixl_engine *e, enum ixl_mem type, const struct ixl_reg_desc *d,
                          size_t n, struct ixl_mem_query *out)
{
    (void)e;
    (void)type;
    (void)d;
    (void)n;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_alloc_mem(struct ixl_engine *e, enum ixl_mem type, size_t len, void **out)
{
    (void)e;
    (void)type;
    (void)len;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_free_mem(struct ixl_engine *e, void *addr, size_t len)
{
    (void)e;
    (void)addr;
    (void)len;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_req_info(struct ixl_engine *e, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)e;
    (void)req;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static int stub_wait_xfer(struct ixl_engine *e, struct ixl_req *req, uint64_t budget_ns)
{
    (void)e;
    (void)req;
    (void)budget_ns;
    return IXL_ERR_NOT_SUPPORTED;
}

static const struct ixl_engine_ops stubs = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = stub_conn,
    .disconnect = stub_conn,
    .get_conn_info = stub_get_conn_info,
    .load_remote_conn_info = stub_load_remote_conn_info,
    .register_mem = stub_register_mem,
    .deregister_mem = stub_md,
    .get_public_data = stub_get_public_data,
    .load_remote_md = stub_load_remote_md,
    .load_local_md = stub_load_local_md,
    .unload_md = stub_md,
    .prep_xfer = stub_prep_xfer,
    .estimate_xfer_cost = stub_estimate,
    .post_xfer = stub_post_xfer,
    .check_xfer = stub_req,
    .release_req = stub_req,
    .get_notifs = stub_get_notifs,
    .gen_notif = stub_gen_notif,
    .progress = stub_progress,
    .query_mem = stub_query_mem,
    .alloc_mem = stub_alloc_mem,
    .free_mem = stub_free_mem,
    .req_info = stub_req_info,
    .wait_xfer = stub_wait_xfer,
};

/* True when the plugin's table (of size bytes) covers the slot at offset off and sets it. */
#define OPS_COVERS(size, member) \
    ((size) >=                   \
     offsetof(struct ixl_engine_ops, member) + sizeof(((struct ixl_engine_ops *)0)->member))

/* Copies the plugin's table into a full-size one; slots missing or NULL get the stub. Every
 * slot is a function pointer, so the copy walks them as an array. */
static void fill_ops(struct ixl_plugin *p, const struct ixl_engine_ops *src)
{
    typedef int (*slot_fn)(void);
    size_t have = src->size < sizeof(*src) ? src->size : sizeof(*src);
    p->ops = stubs;
    size_t first = offsetof(struct ixl_engine_ops, connect);
    size_t n = (sizeof(struct ixl_engine_ops) - first) / sizeof(slot_fn);
    for (size_t i = 0; i < n; i++) {
        size_t off = first + i * sizeof(slot_fn);
        if (off + sizeof(slot_fn) > have)
            break;
        slot_fn f;
        memcpy(&f, (const char *)src + off, sizeof(f));
        if (f != NULL)
            memcpy((char *)&p->ops + off, &f, sizeof(f));
    }
    p->has[IXL_OPT_ESTIMATE] = OPS_COVERS(have, estimate_xfer_cost) && src->estimate_xfer_cost;
    p->has[IXL_OPT_QUERY_MEM] = OPS_COVERS(have, query_mem) && src->query_mem;
    p->has[IXL_OPT_ALLOC_MEM] = OPS_COVERS(have, alloc_mem) && src->alloc_mem &&
                                OPS_COVERS(have, free_mem) && src->free_mem;
    p->has[IXL_OPT_FREE_MEM] = p->has[IXL_OPT_ALLOC_MEM];
    p->has[IXL_OPT_REQ_INFO] = OPS_COVERS(have, req_info) && src->req_info;
    p->has[IXL_OPT_WAIT_XFER] = OPS_COVERS(have, wait_xfer) && src->wait_xfer;
}

static int valid_name(const char *s)
{
    size_t n = 0;
    if (s == NULL)
        return 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return n >= 1 && n <= 31;
}

static const char *cap_name(uint32_t cap)
{
    switch (cap) {
    case IXL_CAP_LOCAL:
        return "local transfers";
    case IXL_CAP_REMOTE:
        return "remote transfers";
    case IXL_CAP_NOTIF:
        return "notifications";
    case IXL_CAP_PROGRESS:
        return "progress";
    }
    return "a capability";
}

#define DESC_MIN_SIZE (offsetof(struct ixl_plugin_desc, ops) + sizeof(void *))

int ixl_pm_check_desc(const struct ixl_plugin_desc *desc, char *why, size_t cap)
{
    if (desc == NULL) {
        snprintf(why, cap, "entry function returned no descriptor");
        return IXL_ERR_PLUGIN;
    }
    if (desc->abi_major != IXL_PLUGIN_ABI_MAJOR) {
        snprintf(why, cap, "plugin ABI %u.%u, this ixl speaks ABI %u.x", desc->abi_major,
                 desc->abi_minor, IXL_PLUGIN_ABI_MAJOR);
        return IXL_ERR_PLUGIN;
    }
    if (desc->size < DESC_MIN_SIZE) {
        snprintf(why, cap, "descriptor of %u bytes, ABI %u needs at least %zu", desc->size,
                 IXL_PLUGIN_ABI_MAJOR, (size_t)DESC_MIN_SIZE);
        return IXL_ERR_PLUGIN;
    }
    if (!valid_name(desc->name)) {
        snprintf(why, cap, "invalid plugin name (1-31 characters of [A-Za-z0-9_])");
        return IXL_ERR_PLUGIN;
    }
    if (desc->create_engine == NULL || desc->destroy_engine == NULL) {
        snprintf(why, cap, "plugin %s lacks %s", desc->name,
                 desc->create_engine == NULL ? "create_engine" : "destroy_engine");
        return IXL_ERR_PLUGIN;
    }
    const struct ixl_engine_ops *ops = desc->ops;
    if (ops == NULL) {
        snprintf(why, cap, "plugin %s has no ops table", desc->name);
        return IXL_ERR_PLUGIN;
    }
    if (ops->size < IXL_ENGINE_OPS_MIN_SIZE) {
        snprintf(why, cap, "plugin %s: ops table of %u bytes is too small (ABI %u needs %zu)",
                 desc->name, ops->size, IXL_PLUGIN_ABI_MAJOR, (size_t)IXL_ENGINE_OPS_MIN_SIZE);
        return IXL_ERR_PLUGIN;
    }
    uint32_t known_caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    if (desc->caps & ~known_caps) {
        snprintf(why, cap, "plugin %s: unknown capability bits 0x%x", desc->name,
                 desc->caps & ~known_caps);
        return IXL_ERR_PLUGIN;
    }
    if (!(desc->caps & (IXL_CAP_LOCAL | IXL_CAP_REMOTE))) {
        snprintf(why, cap, "plugin %s supports neither local nor remote transfers", desc->name);
        return IXL_ERR_PLUGIN;
    }
    if ((desc->caps & IXL_CAP_REMOTE) && !(desc->caps & IXL_CAP_NOTIF)) {
        snprintf(why, cap,
                 "plugin %s advertises remote transfers without notifications "
                 "(a remote-capable backend must support notifications)",
                 desc->name);
        return IXL_ERR_PLUGIN;
    }
    if (desc->mem_mask == 0 || (desc->mem_mask & ~((1u << IXL_MEM_COUNT) - 1))) {
        snprintf(why, cap, "plugin %s: memory-type mask 0x%x is empty or unknown", desc->name,
                 desc->mem_mask);
        return IXL_ERR_PLUGIN;
    }
    /* Methods every backend needs, then those each capability requires (ixl_plugin.h lists
     * them with each method). The first one missing is named. */
    static const struct {
        uint32_t cap; /* 0: every backend */
        size_t off;
        const char *name;
    } required[] = {
        {0, offsetof(struct ixl_engine_ops, register_mem), "register_mem"},
        {0, offsetof(struct ixl_engine_ops, deregister_mem), "deregister_mem"},
        {0, offsetof(struct ixl_engine_ops, unload_md), "unload_md"},
        {0, offsetof(struct ixl_engine_ops, prep_xfer), "prep_xfer"},
        {0, offsetof(struct ixl_engine_ops, post_xfer), "post_xfer"},
        {0, offsetof(struct ixl_engine_ops, check_xfer), "check_xfer"},
        {0, offsetof(struct ixl_engine_ops, release_req), "release_req"},
        {IXL_CAP_LOCAL, offsetof(struct ixl_engine_ops, load_local_md), "load_local_md"},
        {IXL_CAP_REMOTE, offsetof(struct ixl_engine_ops, get_conn_info), "get_conn_info"},
        {IXL_CAP_REMOTE, offsetof(struct ixl_engine_ops, load_remote_conn_info),
         "load_remote_conn_info"},
        {IXL_CAP_REMOTE, offsetof(struct ixl_engine_ops, get_public_data), "get_public_data"},
        {IXL_CAP_REMOTE, offsetof(struct ixl_engine_ops, load_remote_md), "load_remote_md"},
        {IXL_CAP_NOTIF, offsetof(struct ixl_engine_ops, get_notifs), "get_notifs"},
        {IXL_CAP_NOTIF, offsetof(struct ixl_engine_ops, gen_notif), "gen_notif"},
        {IXL_CAP_PROGRESS, offsetof(struct ixl_engine_ops, progress), "progress"},
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (required[i].cap != 0 && !(desc->caps & required[i].cap))
            continue;
        void (*slot)(void);
        memcpy(&slot, (const char *)ops + required[i].off, sizeof(slot));
        if (slot != NULL)
            continue;
        if (required[i].cap == 0)
            snprintf(why, cap, "plugin %s lacks %s, a method every backend needs", desc->name,
                     required[i].name);
        else
            snprintf(why, cap, "plugin %s advertises %s but lacks %s", desc->name,
                     cap_name(required[i].cap), required[i].name);
        return IXL_ERR_PLUGIN;
    }
    /* Optional methods that only make sense together. */
    int has_alloc = OPS_COVERS(ops->size, alloc_mem) && ops->alloc_mem != NULL;
    int has_free = OPS_COVERS(ops->size, free_mem) && ops->free_mem != NULL;
    if (has_alloc != has_free) {
        snprintf(why, cap, "plugin %s has %s without %s (alloc_mem and free_mem come as a pair)",
                 desc->name, has_alloc ? "alloc_mem" : "free_mem",
                 has_alloc ? "free_mem" : "alloc_mem");
        return IXL_ERR_PLUGIN;
    }
    if (desc->n_options > 0 && desc->options == NULL) {
        snprintf(why, cap, "plugin %s: %zu options but no options array", desc->name,
                 desc->n_options);
        return IXL_ERR_PLUGIN;
    }
    for (size_t i = 0; i < desc->n_options; i++) {
        const struct ixl_option *o = &desc->options[i];
        char bad[480];
        if (ixl_opt_check(o, bad, sizeof(bad)) != IXL_OK) {
            snprintf(why, cap, "plugin %s: option table entry %zu: %s", desc->name, i, bad);
            return IXL_ERR_PLUGIN;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(desc->options[j].name, o->name) == 0) {
                snprintf(why, cap, "plugin %s: two options are called %s", desc->name, o->name);
                return IXL_ERR_PLUGIN;
            }
    }
    return IXL_OK;
}

/* ---- options of a backend --------------------------------------------------------------- */

void ixl_pm_options_free(struct ixl_kv *kv, struct ixl_opt_value *values, size_t n)
{
    for (size_t i = 0; kv && i < n; i++) {
        free((char *)kv[i].key);
        free((char *)kv[i].value);
    }
    free(kv);
    free(values);
}

/* Unknown keys are refused with the list of known ones, since a misspelt option silently
 * ignored is a lost setting. Only the value in force of each option is parsed (a key given
 * twice: the last wins). */
int ixl_pm_options_build(const struct ixl_plugin *p, const struct ixl_kv *user, size_t n_user,
                         struct ixl_kv **kv_out, struct ixl_opt_value **values_out, size_t *n_out,
                         char *why, size_t cap)
{
    const struct ixl_option *opts = p->info.options;
    size_t n = p->info.n_options;
    for (size_t i = 0; i < n_user; i++) {
        if (user[i].key == NULL || user[i].value == NULL) {
            snprintf(why, cap, "backend %s: option %zu has a NULL key or value", p->info.name, i);
            return IXL_ERR_INVALID_ARG;
        }
        size_t j;
        for (j = 0; j < n; j++)
            if (strcmp(opts[j].name, user[i].key) == 0)
                break;
        if (j == n) {
            char known[512] = "";
            size_t used = 0;
            for (j = 0; j < n && used < sizeof(known); j++)
                used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s", j ? ", " : "",
                                         opts[j].name);
            snprintf(why, cap, "backend %s has no option '%s' (its options: %s)", p->info.name,
                     user[i].key, n ? known : "none");
            return IXL_ERR_INVALID_ARG;
        }
    }
    int rc = IXL_ERR_NO_MEMORY;
    struct ixl_kv *kv = sys_calloc(n ? n : 1, sizeof(*kv));
    struct ixl_opt_value *values = sys_calloc(n ? n : 1, sizeof(*values));
    if (kv == NULL || values == NULL) {
        snprintf(why, cap, "out of memory");
        goto free_options;
    }
    for (size_t j = 0; j < n; j++) {
        const char *text = opts[j].default_value;
        for (size_t i = 0; i < n_user; i++)
            if (strcmp(opts[j].name, user[i].key) == 0)
                text = user[i].value; /* the last one given wins */
        char norm[IXL_OPT_NORM_MAX], bad[640];
        if ((rc = ixl_opt_parse(&opts[j], text, &values[j], norm, bad, sizeof(bad))) != IXL_OK) {
            snprintf(why, cap, "backend %s: option %s", p->info.name, bad);
            goto free_options;
        }
        kv[j].key = sys_strdup(opts[j].name);
        kv[j].value = sys_strdup(values[j].str);
        if (kv[j].key == NULL || kv[j].value == NULL) {
            rc = IXL_ERR_NO_MEMORY;
            snprintf(why, cap, "out of memory");
            goto free_options;
        }
        values[j].str = kv[j].value; /* norm is on this stack; the copy lives with the backend */
    }
    *kv_out = kv;
    *values_out = values;
    *n_out = n;
    return IXL_OK;

free_options:
    ixl_pm_options_free(kv, values, n);
    return rc;
}

/* ---- the registry of plugins ------------------------------------------------------------ */

struct refusal {
    char *path;
    char *reason;
};

/* Everything below is guarded by lock. Accepted plugins are never freed (a plugin stays loaded
 * for the life of the process), so pointers handed out stay valid without the lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ixl_plugin **plugins;
static size_t n_plugins, cap_plugins;
static struct refusal *refused;
static size_t n_refused, cap_refused;
static char **tried; /* real paths already opened (accepted or refused) */
static size_t n_tried, cap_tried;
static int builtins_done, scanned_all;

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = sys_realloc(*arr, ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static void refuse(const char *path, const char *reason)
{
    ixl_log_write(IXL_LOG_WARN, "plugin %s refused: %s", path, reason);
    if (grow((void **)&refused, &cap_refused, n_refused + 1, sizeof(*refused)) != 0)
        return;
    refused[n_refused].path = sys_strdup(path);
    refused[n_refused].reason = sys_strdup(reason);
    if (refused[n_refused].path && refused[n_refused].reason)
        n_refused++;
}

static struct ixl_plugin *find_loaded(const char *name)
{
    for (size_t i = 0; i < n_plugins; i++)
        if (strcmp(plugins[i]->d.name, name) == 0)
            return plugins[i];
    return NULL;
}

/* Checks and records a descriptor; returns 0 when accepted. */
static int accept_desc(const struct ixl_plugin_desc *desc, const char *path, void *dl, int builtin)
{
    char why[512];
    if (ixl_pm_check_desc(desc, why, sizeof(why)) != IXL_OK) {
        refuse(path, why);
        return -1;
    }
    struct ixl_plugin *other = find_loaded(desc->name);
    if (other != NULL) {
        snprintf(why, sizeof(why), "duplicate plugin name '%s' (already loaded from %s)",
                 desc->name, other->info.path);
        refuse(path, why);
        return -1;
    }
    struct ixl_plugin *p = sys_calloc(1, sizeof(*p));
    if (p == NULL || grow((void **)&plugins, &cap_plugins, n_plugins + 1, sizeof(*plugins))) {
        free(p);
        refuse(path, "out of memory");
        return -1;
    }
    size_t dsize = desc->size < sizeof(p->d) ? desc->size : sizeof(p->d);
    memcpy(&p->d, desc, dsize);
    p->desc = desc;
    fill_ops(p, desc->ops);
    p->dl = dl;
    p->info.name = p->d.name;
    p->info.version = p->d.version ? p->d.version : "";
    p->info.abi_major = desc->abi_major;
    p->info.abi_minor = desc->abi_minor;
    p->info.caps = p->d.caps;
    p->info.mem_mask = p->d.mem_mask;
    p->info.builtin = builtin;
    p->info.path = builtin ? "(built in)" : sys_strdup(path);
    p->info.options = (const struct ixl_option *)p->d.options;
    p->info.n_options = p->d.n_options;
    plugins[n_plugins++] = p;
    ixl_log_write(IXL_LOG_DEBUG, "plugin %s %s loaded from %s", p->info.name, p->info.version,
                  p->info.path);
    return 0;
}

static void load_builtins(void)
{
    if (builtins_done)
        return;
    builtins_done = 1;
    for (size_t i = 0; ixl_builtin_plugins[i] != NULL; i++)
        accept_desc(ixl_builtin_plugins[i](), "(built in)", NULL, 1);
}

static int already_tried(const char *real)
{
    for (size_t i = 0; i < n_tried; i++)
        if (strcmp(tried[i], real) == 0)
            return 1;
    return 0;
}

static void load_file(const char *path)
{
    char real[PATH_MAX];
    if (realpath(path, real) == NULL)
        return;
    if (already_tried(real))
        return;
    if (grow((void **)&tried, &cap_tried, n_tried + 1, sizeof(*tried)) == 0) {
        char *copy = sys_strdup(real);
        if (copy)
            tried[n_tried++] = copy;
    }
    void *dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *e = dlerror();
        char why[600];
        snprintf(why, sizeof(why), "cannot be opened: %s", e ? e : "unknown dlopen error");
        refuse(real, why);
        return;
    }
    void *sym = dlsym(dl, IXL_PLUGIN_ENTRY_SYMBOL);
    if (sym == NULL) {
        refuse(real, "no entry symbol " IXL_PLUGIN_ENTRY_SYMBOL " (not an ixl plugin?)");
        dlclose(dl);
        return;
    }
    ixl_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    if (accept_desc(entry(), real, dl, 0) != 0)
        dlclose(dl);
}

/* The search path, in order. Returns the number of directories written to dirs. */
static size_t search_dirs(char dirs[][PATH_MAX], size_t max)
{
    size_t n = 0;
    const char *env = ixl_cfg_get(IXL_CFG_PLUGIN_DIR);
    while (env && *env && n < max) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        if (len > 0 && len < PATH_MAX) {
            memcpy(dirs[n], env, len);
            dirs[n][len] = '\0';
            n++;
        }
        env = colon ? colon + 1 : NULL;
    }
    /* Next to this libixl: ixl/plugins where it is installed (found even when the tree was
     * moved: a DESTDIR staging root, a package being built, a wheel), plugins/ in a build
     * tree. The compiled-in installed directory comes last: a libixl elsewhere prefers the
     * plugins that came with it. */
    Dl_info info;
    if (dladdr((void *)ixl_plugin_count, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash) {
            int len = (int)(slash - info.dli_fname);
            if (n < max)
                snprintf(dirs[n++], PATH_MAX, "%.*s/ixl/plugins", len, info.dli_fname);
            if (n < max)
                snprintf(dirs[n++], PATH_MAX, "%.*s/plugins", len, info.dli_fname);
        }
    }
    if (n < max)
        snprintf(dirs[n++], PATH_MAX, "%s", IXL_PLUGIN_INSTALL_DIR);
    return n;
}

static int is_plugin_file(const char *name)
{
    size_t n = strlen(name), np = strlen(PLUGIN_PREFIX), ns = strlen(PLUGIN_SUFFIX);
    return n > np + ns && strncmp(name, PLUGIN_PREFIX, np) == 0 &&
           strcmp(name + n - ns, PLUGIN_SUFFIX) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (!is_plugin_file(ent->d_name))
            continue;
        if (grow((void **)&names, &cap, n + 1, sizeof(*names)) != 0)
            break;
        names[n] = sys_strdup(ent->d_name);
        if (names[n])
            n++;
    }
    closedir(d);
    /* Sorted, so that which of two duplicates wins does not depend on readdir order (no
     * qsort of an empty list: names is NULL then, and qsort's argument must not be). */
    if (n > 1)
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX * 2];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        load_file(path);
        free(names[i]);
    }
    free(names);
}

#define MAX_DIRS 32

static void scan_all(void)
{
    load_builtins();
    if (scanned_all)
        return;
    scanned_all = 1;
    static char dirs[MAX_DIRS][PATH_MAX];
    size_t n = search_dirs(dirs, MAX_DIRS);
    for (size_t i = 0; i < n; i++)
        scan_dir(dirs[i]);
}

int ixl_pm_find(const char *name, const struct ixl_plugin **out)
{
    pthread_mutex_lock(&lock);
    load_builtins();
    struct ixl_plugin *p = find_loaded(name);
    if (p == NULL && !scanned_all && valid_name(name)) {
        /* Lazy: try the file that should hold the plugin before opening everything. */
        static char dirs[MAX_DIRS][PATH_MAX];
        size_t n = search_dirs(dirs, MAX_DIRS);
        for (size_t i = 0; i < n && p == NULL; i++) {
            char path[PATH_MAX * 2];
            snprintf(path, sizeof(path), "%s/" PLUGIN_PREFIX "%s" PLUGIN_SUFFIX, dirs[i], name);
            if (access(path, F_OK) == 0)
                load_file(path);
            p = find_loaded(name);
        }
    }
    if (p == NULL) {
        scan_all();
        p = find_loaded(name);
    }
    pthread_mutex_unlock(&lock);
    if (p == NULL)
        return IXL_ERR_NOT_FOUND;
    *out = p;
    return IXL_OK;
}

size_t ixl_pm_count(void)
{
    pthread_mutex_lock(&lock);
    scan_all();
    size_t n = n_plugins;
    pthread_mutex_unlock(&lock);
    return n;
}

const struct ixl_plugin *ixl_pm_get(size_t index)
{
    pthread_mutex_lock(&lock);
    scan_all();
    const struct ixl_plugin *p = index < n_plugins ? plugins[index] : NULL;
    pthread_mutex_unlock(&lock);
    return p;
}

/* ---- north-bound listing ---------------------------------------------------------------- */

/* struct ixl_plugin_info's first generation ends at n_options (see the growth rule in ixl.h). */
#define IXL_PLUGIN_INFO_V1 IXL_SIZE_THROUGH(struct ixl_plugin_info, n_options)

size_t ixl_plugin_count(void)
{
    return ixl_pm_count();
}

ixl_status ixl_plugin_get(size_t index, struct ixl_plugin_info *out)
{
    if (out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_PLUGIN_INFO_V1) != IXL_OK)
        return IXL_ERR_INVALID_ARG;
    const struct ixl_plugin *p = ixl_pm_get(index);
    if (p == NULL)
        return IXL_ERR_INDEX;
    return ixl_out_write(out, &p->info, sizeof(p->info), IXL_PLUGIN_INFO_V1,
                         _Alignof(struct ixl_plugin_info));
}

ixl_status ixl_plugin_find(const char *name, struct ixl_plugin_info *out)
{
    if (name == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_PLUGIN_INFO_V1) != IXL_OK)
        return IXL_ERR_INVALID_ARG;
    const struct ixl_plugin *p;
    int rc = ixl_pm_find(name, &p);
    if (rc != IXL_OK)
        return rc;
    return ixl_out_write(out, &p->info, sizeof(p->info), IXL_PLUGIN_INFO_V1,
                         _Alignof(struct ixl_plugin_info));
}

size_t ixl_plugin_refused_count(void)
{
    pthread_mutex_lock(&lock);
    scan_all();
    size_t n = n_refused;
    pthread_mutex_unlock(&lock);
    return n;
}

ixl_status ixl_plugin_refused_get(size_t index, const char **path, const char **reason)
{
    if (path == NULL || reason == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_mutex_lock(&lock);
    scan_all();
    int rc = IXL_ERR_INDEX;
    if (index < n_refused) {
        *path = refused[index].path;
        *reason = refused[index].reason;
        rc = IXL_OK;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

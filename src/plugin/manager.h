/*
 * The plugin manager: finds plugins (built in first, then IXL_PLUGIN_DIR, ixl/plugins and
 * plugins/ next to libixl.so, and the installed plugin directory), opens them lazily, checks their
 * descriptor and ABI, and keeps the accepted ones for the life of the process. Refused candidates
 * are kept with their reason for ixl-info.
 */
#ifndef IXL_PLUGIN_MANAGER_H
#define IXL_PLUGIN_MANAGER_H

#include <stdbool.h>

#include <ixl/ixl.h>
#include <ixl/ixl_plugin.h>

struct ixl_plugin {
    const struct ixl_plugin_desc *desc;
    /* The descriptor copied at the size this core knows (fields the plugin did not have are
     * zero), and the ops table at full size with every slot the plugin left NULL or did not
     * have pointing at a stub: the core calls ops.x without checking. */
    struct ixl_plugin_desc d;
    struct ixl_engine_ops ops;
    bool has[32]; /* has[i]: the plugin implements optional method i (enum ixl_opt_method) */
    struct ixl_plugin_info info;
    void *dl;
};

/* Optional methods, in the order of the ops table's tail. */
enum ixl_opt_method {
    IXL_OPT_ESTIMATE,
    IXL_OPT_QUERY_MEM,
    IXL_OPT_ALLOC_MEM,
    IXL_OPT_FREE_MEM,
    IXL_OPT_REQ_INFO,
    IXL_OPT_WAIT_XFER,
};

/* Finds (and if needed opens) the plugin called name. IXL_ERR_NOT_FOUND if none. */
int ixl_pm_find(const char *name, const struct ixl_plugin **out);
/* Scans every candidate (once) and returns the number of accepted plugins. */
size_t ixl_pm_count(void);
const struct ixl_plugin *ixl_pm_get(size_t index);

/* Validates a descriptor; on refusal writes the reason. Exposed for tests. */
int ixl_pm_check_desc(const struct ixl_plugin_desc *desc, char *why, size_t cap);

/*
 * The options of a backend of plugin p: the user's values (unknown keys refused with the list
 * of known ones) over the defaults, each parsed by its type. On success *kv_out and
 * *values_out hold *n_out (the plugin's n_options) entries in the order of its options array:
 * key and normalized value, and the typed value whose str is kv's value. On failure: the
 * status (IXL_ERR_INVALID_ARG naming the option, its value and what it wants; or
 * IXL_ERR_NO_MEMORY) with the message in why, and no output written.
 */
int ixl_pm_options_build(const struct ixl_plugin *p, const struct ixl_kv *user, size_t n_user,
                         struct ixl_kv **kv_out, struct ixl_opt_value **values_out, size_t *n_out,
                         char *why, size_t cap);
/* Frees what ixl_pm_options_build made (NULLs accepted). */
void ixl_pm_options_free(struct ixl_kv *kv, struct ixl_opt_value *values, size_t n);

#endif

/* The core's configuration table: the only place that reads the environment. */
#ifndef IXL_UTIL_CONFIG_H
#define IXL_UTIL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum ixl_cfg {
    IXL_CFG_LOG_LEVEL,
    IXL_CFG_PLUGIN_DIR,
    IXL_CFG_BACKENDS,
    IXL_CFG_ETCD_ENDPOINTS,
    IXL_CFG_ETCD_NAMESPACE,
    IXL_CFG_ETCD_TTL,
    IXL_CFG_NOTIF_MAX,
    IXL_CFG_AUTH_KEY,
    IXL_CFG_AUTH_KEY_FILE,
    IXL_CFG_INSECURE_REMOTE,
    IXL_CFG_CUDA_LIBRARY,
    IXL_CFG_DEV_COPY,
    IXL_CFG_CLOCK,
    IXL_CFG_COUNT
};

/* Value in force: the environment variable if set, else the default (never NULL). */
const char *ixl_cfg_get(enum ixl_cfg which);

/*
 * The value in force of a variable that holds a size (bytes) or a duration (in its base
 * unit), parsed by the rules of every option (src/util/opt.h). IXL_OK, or IXL_ERR_INVALID_ARG
 * with "NAME='VALUE': what is wrong; want WHAT" in why and *out untouched.
 */
int ixl_cfg_num(enum ixl_cfg which, uint64_t *out, char *why, size_t cap);

/*
 * A plugin's environment variable (struct ixl_host.env, ABI 2.4): the value of name copied into
 * buf (NUL-terminated). IXL_OK; IXL_ERR_NOT_FOUND when unset; IXL_ERR_TOO_LARGE when it does
 * not fit (buf = ""); IXL_ERR_INVALID_ARG for a NULL or empty name or cap 0.
 */
int ixl_cfg_env(const char *name, char *buf, size_t cap);

#endif

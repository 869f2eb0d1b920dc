/* The core's configuration table: the only place that reads the environment. */
#ifndef IXL_UTIL_CONFIG_H
#define IXL_UTIL_CONFIG_H

enum ixl_cfg {
    IXL_CFG_LOG_LEVEL,
    IXL_CFG_PLUGIN_DIR,
    IXL_CFG_BACKENDS,
    IXL_CFG_ETCD_ENDPOINTS,
    IXL_CFG_ETCD_NAMESPACE,
    IXL_CFG_ETCD_TTL,
    IXL_CFG_NOTIF_MAX,
    IXL_CFG_COUNT
};

/* Value in force: the environment variable if set, else the default (never NULL). */
const char *ixl_cfg_get(enum ixl_cfg which);

#endif

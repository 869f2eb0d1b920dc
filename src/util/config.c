#include "util/config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "util/out.h"

struct cfg_entry {
    const char *name;
    const char *default_value;
    const char *description;
};

/* One table, read once: ixl-info prints it, and nothing else in ixl calls getenv(). */
static const struct cfg_entry table[IXL_CFG_COUNT] = {
    [IXL_CFG_LOG_LEVEL] = {"IXL_LOG_LEVEL", "warn",
                           "log level: none, error, warn, info, debug, trace (or 0-5)"},
    [IXL_CFG_PLUGIN_DIR] = {"IXL_PLUGIN_DIR", "",
                            "colon-separated directories searched for plugins before the "
                            "installed plugin directory and plugins/ next to libixl.so"},
    [IXL_CFG_BACKENDS] = {"IXL_BACKENDS", "NET,POSIX",
                          "backends an agent creates when its params name none "
                          "(comma-separated plugin names)"},
    [IXL_CFG_ETCD_ENDPOINTS] = {"IXL_ETCD_ENDPOINTS", "",
                                "etcd endpoints for metadata exchange (http://host:port,...)"},
    [IXL_CFG_ETCD_NAMESPACE] = {"IXL_ETCD_NAMESPACE", "/ixl/agents",
                                "key prefix of agent metadata in etcd"},
    [IXL_CFG_ETCD_TTL] = {"IXL_ETCD_TTL", "10",
                          "seconds an agent's etcd entries outlive it (its lease's TTL)"},
    [IXL_CFG_NOTIF_MAX] = {"IXL_NOTIF_MAX", "65536",
                           "default maximum notification size in bytes (at least 65536)"},
};

static const char *values[IXL_CFG_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    for (int i = 0; i < IXL_CFG_COUNT; i++) {
        const char *v = getenv(table[i].name);
        values[i] = v ? strdup(v) : NULL;
        if (values[i] == NULL)
            values[i] = table[i].default_value;
    }
}

const char *ixl_cfg_get(enum ixl_cfg which)
{
    pthread_once(&once, read_env);
    return values[which];
}

size_t ixl_config_count(void)
{
    return IXL_CFG_COUNT;
}

/* struct ixl_config_var's first generation ends at description (the growth rule in ixl.h). */
#define IXL_CONFIG_VAR_V1 IXL_SIZE_THROUGH(struct ixl_config_var, description)

ixl_status ixl_config_get(size_t index, struct ixl_config_var *out)
{
    if (out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_CONFIG_VAR_V1) != IXL_OK)
        return IXL_ERR_INVALID_ARG;
    if (index >= IXL_CFG_COUNT)
        return IXL_ERR_INDEX;
    struct ixl_config_var v = {
        .size = sizeof(v),
        .name = table[index].name,
        .value = ixl_cfg_get((enum ixl_cfg)index),
        .default_value = table[index].default_value,
        .description = table[index].description,
    };
    return ixl_out_write(out, &v, sizeof(v), IXL_CONFIG_VAR_V1, _Alignof(struct ixl_config_var));
}

const char *ixl_config_value(const char *name)
{
    if (name == NULL)
        return NULL;
    for (int i = 0; i < IXL_CFG_COUNT; i++)
        if (strcmp(table[i].name, name) == 0)
            return ixl_cfg_get((enum ixl_cfg)i);
    return NULL;
}

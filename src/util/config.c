#include "util/config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "util/opt.h"
#include "util/out.h"

/* One table, read once: ixl-info prints it, and nothing else in ixl calls getenv(). Entries
 * are typed like backend options (enum ixl_opt_type): a size or a duration is parsed by
 * src/util/opt.c, by the same rules (K/M/G, us/ms/s) as every option. */
static const struct ixl_option table[IXL_CFG_COUNT] = {
    [IXL_CFG_LOG_LEVEL] = {.name = "IXL_LOG_LEVEL",
                           .default_value = "warn",
                           .type = IXL_OPT_STRING,
                           .description =
                               "log level: none, error, warn, info, debug, trace (or 0-5)"},
    [IXL_CFG_PLUGIN_DIR] = {.name = "IXL_PLUGIN_DIR",
                            .default_value = "",
                            .type = IXL_OPT_STRING,
                            .description = "colon-separated directories searched for plugins "
                                           "before ixl/plugins and plugins/ next to libixl.so "
                                           "and the installed plugin directory"},
    [IXL_CFG_BACKENDS] = {.name = "IXL_BACKENDS",
                          .default_value = "NET,POSIX",
                          .type = IXL_OPT_STRING,
                          .description = "backends an agent creates when its params name none "
                                         "(comma-separated plugin names)"},
    [IXL_CFG_ETCD_ENDPOINTS] = {.name = "IXL_ETCD_ENDPOINTS",
                                .default_value = "",
                                .type = IXL_OPT_STRING,
                                .description = "etcd endpoints for metadata exchange "
                                               "(http://host:port,...)"},
    [IXL_CFG_ETCD_NAMESPACE] = {.name = "IXL_ETCD_NAMESPACE",
                                .default_value = "/ixl/agents",
                                .type = IXL_OPT_STRING,
                                .description = "key prefix of agent metadata in etcd"},
    [IXL_CFG_ETCD_TTL] = {.name = "IXL_ETCD_TTL",
                          .default_value = "10",
                          .type = IXL_OPT_DURATION,
                          .unit = "s",
                          .min = 1,
                          .max = 3600,
                          .description = "how long an agent's etcd entries outlive it (its "
                                         "lease's TTL): a duration, 1..3600 s (a bare number is "
                                         "seconds; suffixes us, ms, s)"},
    [IXL_CFG_NOTIF_MAX] = {.name = "IXL_NOTIF_MAX",
                           .default_value = "64K",
                           .type = IXL_OPT_SIZE,
                           .min = IXL_NOTIF_MAX_DEFAULT,
                           .max = INT64_MAX,
                           .description = "default maximum notification size: a size in bytes, "
                                          "at least 64K (suffixes K, M, G, T: powers of 1024)"},
    [IXL_CFG_AUTH_KEY] = {.name = "IXL_AUTH_KEY",
                          .default_value = "",
                          .type = IXL_OPT_STRING,
                          .description = "the cluster key (16..256 bytes) agents prove to each "
                                         "other; \"\" = none (docs/security.md). Prefer "
                                         "IXL_AUTH_KEY_FILE: the environment of a process can be "
                                         "read by its user's other processes"},
    [IXL_CFG_AUTH_KEY_FILE] = {.name = "IXL_AUTH_KEY_FILE",
                               .default_value = "",
                               .type = IXL_OPT_STRING,
                               .description = "a file holding the cluster key, used when "
                                              "IXL_AUTH_KEY is empty; refused unless a regular "
                                              "file of this user with mode 0600 or stricter"},
    [IXL_CFG_INSECURE_REMOTE] = {.name = "IXL_INSECURE_REMOTE",
                                 .default_value = "0",
                                 .type = IXL_OPT_BOOL,
                                 .description = "1: without a key, listen beyond loopback and "
                                                "accept unauthenticated peers (a trusted network "
                                                "only; logged at WARN)"},
    [IXL_CFG_CUDA_LIBRARY] = {.name = "IXL_CUDA_LIBRARY",
                              .default_value = "libcuda.so.1",
                              .type = IXL_OPT_STRING,
                              .description = "the CUDA driver library the device layer loads "
                                             "(docs/device.md): a name the dynamic linker "
                                             "searches for, or a path"},
    [IXL_CFG_DEV_COPY] = {.name = "IXL_DEV_COPY",
                          .default_value = "auto",
                          .type = IXL_OPT_STRING,
                          .description = "how the device layer enqueues a batch of copies "
                                         "(docs/device.md, \"Batched copies\"): auto, kernel "
                                         "(the copy kernel for device-to-device batches), "
                                         "batch (cuMemcpyBatchAsync) or loop (one "
                                         "cuMemcpyAsync per copy)"},
    [IXL_CFG_CLOCK] = {.name = "IXL_CLOCK",
                       .default_value = "auto",
                       .type = IXL_OPT_STRING,
                       .description = "the clock of per-request times (telemetry, the wait's "
                                      "spin): auto (the CPU's time-stamp counter where the "
                                      "kernel keeps time with it, else CLOCK_MONOTONIC) or "
                                      "monotonic"},
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

int ixl_cfg_num(enum ixl_cfg which, uint64_t *out, char *why, size_t cap)
{
    struct ixl_opt_value v;
    char norm[IXL_OPT_NORM_MAX];
    int rc = ixl_opt_parse(&table[which], ixl_cfg_get(which), &v, norm, why, cap);
    if (rc == IXL_OK)
        *out = v.u;
    return rc;
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
        .value = index == IXL_CFG_AUTH_KEY && ixl_cfg_get(IXL_CFG_AUTH_KEY)[0] != '\0'
                     ? "(set, not shown)"
                     : ixl_cfg_get((enum ixl_cfg)index),
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
            return i == IXL_CFG_AUTH_KEY && ixl_cfg_get(IXL_CFG_AUTH_KEY)[0] != '\0'
                       ? "(set, not shown)"
                       : ixl_cfg_get((enum ixl_cfg)i);
    return NULL;
}

int ixl_cfg_env(const char *name, char *buf, size_t cap)
{
    if (name == NULL || name[0] == '\0' || buf == NULL || cap == 0)
        return IXL_ERR_INVALID_ARG;
    buf[0] = '\0';
    /* Read at each call (not cached like the table): plugins' variables are few and read at
     * backend creation. getenv is safe beside other getenv calls; ixl never calls setenv. */
    const char *v = getenv(name);
    if (v == NULL)
        return IXL_ERR_NOT_FOUND;
    size_t n = strlen(v);
    if (n >= cap)
        return IXL_ERR_TOO_LARGE;
    memcpy(buf, v, n + 1);
    return IXL_OK;
}

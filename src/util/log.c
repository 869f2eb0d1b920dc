#include "util/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/config.h"

static const char *level_name(enum ixl_log_level level)
{
    switch (level) {
    case IXL_LOG_NONE:
        return "none";
    case IXL_LOG_ERROR:
        return "error";
    case IXL_LOG_WARN:
        return "warn";
    case IXL_LOG_INFO:
        return "info";
    case IXL_LOG_DEBUG:
        return "debug";
    case IXL_LOG_TRACE:
        return "trace";
    }
    return "?";
}

static void default_sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "ixl %s: %s\n", level_name(level), msg);
}

/* The sink and its context change together, so they sit under one lock; the level is read on
 * every log call and is an atomic. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static ixl_log_fn sink_fn = default_sink;
static void *sink_ctx;
static atomic_int level_now = -1;

static int parse_level(const char *s)
{
    static const char *names[] = {"none", "error", "warn", "info", "debug", "trace"};
    if (s == NULL || *s == '\0')
        return IXL_LOG_WARN;
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == '\0' && v >= IXL_LOG_NONE && v <= IXL_LOG_TRACE)
        return (int)v;
    return IXL_LOG_WARN;
}

static int current_level(void)
{
    int l = atomic_load_explicit(&level_now, memory_order_relaxed);
    if (l < 0) {
        l = parse_level(ixl_cfg_get(IXL_CFG_LOG_LEVEL));
        int expected = -1;
        atomic_compare_exchange_strong(&level_now, &expected, l);
        l = atomic_load(&level_now);
    }
    return l;
}

void ixl_log_set_level(enum ixl_log_level level)
{
    if ((int)level < IXL_LOG_NONE)
        level = IXL_LOG_NONE;
    if (level > IXL_LOG_TRACE)
        level = IXL_LOG_TRACE;
    atomic_store(&level_now, (int)level);
}

enum ixl_log_level ixl_log_get_level(void)
{
    return (enum ixl_log_level)current_level();
}

void ixl_log_set_sink(ixl_log_fn fn, void *ctx)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn ? fn : default_sink;
    sink_ctx = fn ? ctx : NULL;
    pthread_mutex_unlock(&sink_lock);
}

int ixl_log_enabled(enum ixl_log_level level)
{
    return level != IXL_LOG_NONE && (int)level <= current_level();
}

void ixl_log_vwrite(enum ixl_log_level level, const char *fmt, va_list ap)
{
    if (!ixl_log_enabled(level))
        return;
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    /* The sink is called under the lock so that a sink being replaced is never called after
     * ixl_log_set_sink() returns. */
    pthread_mutex_lock(&sink_lock);
    sink_fn(sink_ctx, level, line);
    pthread_mutex_unlock(&sink_lock);
}

void ixl_log_write(enum ixl_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ixl_log_vwrite(level, fmt, ap);
    va_end(ap);
}

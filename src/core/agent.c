#include "core/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/hooks.h"
#include "device/device.h"
#include "core/internal.h"
#include "util/config.h"
#include "util/out.h"
#include "util/err.h"
#include "util/log.h"
#include "util/sys.h"
#include "util/time.h"

static _Atomic uint64_t next_agent_id = 1;

/* ---- host callbacks handed to engines --------------------------------------------------- */

static void host_log(void *ctx, enum ixl_log_level level, const char *fmt, ...)
{
    struct ixl_backend *b = ctx;
    if (!ixl_log_enabled(level))
        return;
    char line[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ixl_log_write(level, "[%s %s] %s", b->agent->name, b->plugin->info.name, line);
}

static void host_error(void *ctx, int status, const char *fmt, ...)
{
    struct ixl_backend *b = ctx;
    char line[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (status == IXL_ERR_NOT_SUPPORTED || status == IXL_ERR_BAD_MEM_TYPE)
        ixl_err_quiet(b->agent->id, status, "backend %s: %s", b->plugin->info.name, line);
    else
        ixl_err_set(b->agent->id, status, "backend %s: %s", b->plugin->info.name, line);
}

static void host_signal(void *ctx)
{
    struct ixl_backend *b = ctx;
    ixl_agent_wake(b->agent);
}

static int host_auth_mode(void *ctx)
{
    struct ixl_backend *b = ctx;
    return (int)b->agent->auth.mode;
}

static int host_auth_mac(void *ctx, const char *label, const void *const *parts, const size_t *lens,
                         size_t n, uint8_t out[32])
{
    struct ixl_backend *b = ctx;
    return ixl_auth_mac(&b->agent->auth, label, parts, lens, n, out);
}

static int host_peer_check(void *ctx, int fd, int32_t *pid_out, char *why, size_t why_len)
{
    (void)ctx;
    return ixl_peer_check(fd, pid_out, why, why_len);
}

/* ---- waking ----------------------------------------------------------------------------- */

/*
 * No lock on this path. A waker makes its news visible (the plugin marks the request done),
 * then bumps wake_seq (seq_cst) and reads wake_sleepers; a sleeper adds itself to
 * wake_sleepers (seq_cst), then sleeps on wake_seq only while it still holds the value it read
 * before checking its request (the kernel compares and queues atomically). In the single total
 * order of the two seq_cst pairs, either the waker sees the sleeper (and wakes it) or the
 * sleeper's futex sees the new sequence (and does not sleep): no wake is lost.
 *
 * The fd: fd_armed is 1 from the wake that wrote the eventfd until ixl_agent_progress drains
 * it, so a stream of completions nobody poll()s costs one write, not one per completion. The
 * drain clears fd_armed before reading and writes again if a wake armed it meanwhile (its
 * write may have been the one read): fd_armed == 1 always means "the fd is or will be
 * readable".
 */
static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps while *word == val, at most rel (NULL: no limit). */
static void futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *rel)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

static void fd_arm(struct ixl_agent *agent)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is saturated: the fd is readable already. */
    ssize_t rc = sys_write(agent->event_fd, &one, sizeof(one));
    (void)rc;
}

void ixl_agent_wake(struct ixl_agent *agent)
{
    atomic_fetch_add(&agent->wake_seq, 1);
    if (atomic_load(&agent->wake_sleepers) > 0)
        futex_wake_all(&agent->wake_seq);
    if (atomic_load(&agent->fd_armed) == 0 && atomic_exchange(&agent->fd_armed, 1) == 0)
        fd_arm(agent);
}

struct ixl_stat_stripe *ixl_agent_stripe(struct ixl_agent *agent, int *alone)
{
    /* Threads take stripes once each, in the order they first count: the first IXL_STAT_ALONE
     * one each (the same index in every agent, so theirs alone), the others the rest in turn.
     * 64 bits: the count never wraps to hand out a stripe of one thread again. */
    static _Atomic uint64_t next_stripe;
    static _Thread_local unsigned mine = UINT_MAX;
    if (mine == UINT_MAX) {
        uint64_t n = atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed);
        mine = n < IXL_STAT_ALONE
                   ? (unsigned)n
                   : IXL_STAT_ALONE +
                         (unsigned)((n - IXL_STAT_ALONE) % (IXL_STAT_STRIPES - IXL_STAT_ALONE));
    }
    *alone = mine < IXL_STAT_ALONE;
    return &agent->st[mine];
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

int ixl_agent_spin_wake(struct ixl_agent *agent, uint32_t seq, uint64_t spin_ns,
                        struct ixl_backend *drive)
{
    if (spin_ns == 0)
        return 0;
    /* One spinner per agent: more would take the cores the completing threads need. */
    uint32_t none = 0;
    if (!atomic_compare_exchange_strong(&agent->wake_spinners, &none, 1))
        return 0;
    int moved = 0;
    uint64_t end = mono_ns() + spin_ns;
    for (unsigned i = 0;; i++) {
        if (atomic_load(&agent->wake_seq) != seq) {
            moved = 1;
            break;
        }
        if ((i & 63) == 63) {
            if (mono_ns() >= end)
                break;
            /* A backend whose progress() moves requests: drive it while spinning, as a
             * polling caller would (its completion then moves the sequence). */
            if (drive != NULL)
                drive->plugin->ops.progress(drive->engine);
        }
        cpu_relax();
    }
    atomic_store(&agent->wake_spinners, 0);
    return moved;
}

void ixl_agent_wait_wake(struct ixl_agent *agent, uint32_t seq, int timeout_ms)
{
    uint64_t deadline = timeout_ms >= 0 ? mono_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    atomic_fetch_add(&agent->wake_sleepers, 1);
    while (atomic_load(&agent->wake_seq) == seq) {
        if (timeout_ms < 0) {
            futex_wait(&agent->wake_seq, seq, NULL);
            continue;
        }
        uint64_t now = mono_ns();
        if (now >= deadline)
            break;
        uint64_t left = deadline - now;
        struct timespec rel = {.tv_sec = (time_t)(left / 1000000000u),
                               .tv_nsec = (long)(left % 1000000000u)};
        futex_wait(&agent->wake_seq, seq, &rel);
    }
    atomic_fetch_sub(&agent->wake_sleepers, 1);
}

/* ---- progress ----------------------------------------------------------------------------- */

void ixl_agent_progress_backends(struct ixl_agent *agent)
{
    pthread_rwlock_rdlock(&agent->calls_lock);
    pthread_rwlock_rdlock(&agent->lock);
    unsigned n = 0;
    struct ixl_backend *list[IXL_MAX_BACKENDS];
    for (unsigned i = 0; i < agent->n_backends; i++)
        if (agent->backends[i] != NULL && (agent->backends[i]->caps & IXL_CAP_PROGRESS))
            list[n++] = agent->backends[i];
    pthread_rwlock_unlock(&agent->lock);
    for (unsigned i = 0; i < n; i++)
        list[i]->plugin->ops.progress(list[i]->engine);
    pthread_rwlock_unlock(&agent->calls_lock);
}

static void *progress_main(void *arg)
{
    struct ixl_agent *agent = arg;
    pthread_mutex_lock(&agent->progress_lock);
    while (!agent->progress_stop) {
        pthread_mutex_unlock(&agent->progress_lock);
        ixl_agent_progress_backends(agent);
        pthread_mutex_lock(&agent->progress_lock);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)agent->params.progress_period_us * 1000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        if (!agent->progress_stop)
            pthread_cond_timedwait(&agent->progress_cond, &agent->progress_lock, &ts);
    }
    pthread_mutex_unlock(&agent->progress_lock);
    return NULL;
}

/* ---- backends ----------------------------------------------------------------------------- */

struct ixl_backend *ixl_agent_backend_by_name(struct ixl_agent *agent, const char *name)
{
    for (unsigned i = 0; i < agent->n_backends; i++)
        if (agent->backends[i] != NULL && strcmp(agent->backends[i]->plugin->info.name, name) == 0)
            return agent->backends[i];
    return NULL;
}

/* The engine's size covers field (the plugin ABI's growth rule). */
#define ENGINE_COVERS(e, field) \
    ((e)->size >= offsetof(struct ixl_engine, field) + sizeof((e)->field))

static void backend_free(struct ixl_backend *b)
{
    if (b == NULL)
        return;
    if (b->engine)
        b->plugin->d.destroy_engine(b->engine);
    ixl_pm_options_free(b->params, b->values, b->n_params);
    free(b);
}

static int host_env(void *ctx, const char *name, char *buf, size_t cap)
{
    (void)ctx;
    return ixl_cfg_env(name, buf, cap);
}

static int backend_create_locked(struct ixl_agent *agent, const char *name,
                                 const struct ixl_kv *params, size_t n, struct ixl_backend **out)
{
    const struct ixl_plugin *p;
    if (ixl_pm_find(name, &p) != IXL_OK)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOT_FOUND,
                             "no plugin '%s' (see ixl-info for the plugins found and the ones "
                             "refused; IXL_PLUGIN_DIR adds directories)",
                             name);
    if (ixl_agent_backend_by_name(agent, p->info.name))
        return IXL_AGENT_QUIET(agent, IXL_ERR_EXISTS, "agent '%s' already has a %s backend",
                               agent->name, p->info.name);
    unsigned slot = 0; /* the lowest free one: a destroyed backend's, or the next */
    while (slot < agent->n_backends && agent->backends[slot] != NULL)
        slot++;
    if (slot == IXL_MAX_BACKENDS)
        return IXL_AGENT_ERR(agent, IXL_ERR_TOO_LARGE, "an agent holds at most %d backends",
                             IXL_MAX_BACKENDS);

    struct ixl_backend *b = sys_calloc(1, sizeof(*b));
    if (b == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    b->agent = agent;
    b->plugin = p;
    b->slot = slot;
    b->host.size = sizeof(b->host);
    b->host.ctx = b;
    b->host.log = host_log;
    b->host.error = host_error;
    b->host.signal = host_signal;
    b->host.sys = &ixl_sys_table;
    b->host.auth_mode = host_auth_mode;
    b->host.auth_mac = host_auth_mac;
    b->host.auth_equal = ixl_auth_equal;
    b->host.peer_check = host_peer_check;
    b->host.dev = ixl_dev_ops();
    b->host.env = host_env;
    char why[1024];
    int rc =
        ixl_pm_options_build(p, params, n, &b->params, &b->values, &b->n_params, why, sizeof(why));
    if (rc != IXL_OK) {
        IXL_AGENT_ERR(agent, rc, "%s", why);
        goto free_backend;
    }

    struct ixl_engine_init init = {
        .size = sizeof(init),
        .agent_name = agent->name,
        .host = &b->host,
        .params = b->params,
        .n_params = b->n_params,
        .progress_thread = agent->params.progress_thread,
        .progress_period_us = agent->params.progress_period_us,
        .notif_max = agent->params.notif_max,
        .values = b->values,
        .n_values = b->n_params,
    };
    struct ixl_engine *e = NULL;
    ixl_err_clear(agent->id);
    rc = p->d.create_engine(&init, &e);
    if (rc != IXL_OK || e == NULL) {
        if (rc == IXL_OK)
            rc = IXL_ERR_BACKEND;
        if (ixl_err_get(agent->id)[0] == '\0')
            IXL_AGENT_ERR(agent, rc, "backend %s could not be created (%s)", p->info.name,
                          ixl_strerror(rc));
        goto free_backend;
    }
    b->engine = e;
    /* The engine's base grows size first: refuse one older than the first generation, touch
     * only what its size covers. */
    if (e->size < IXL_ENGINE_MIN_SIZE) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_PLUGIN,
                           "backend %s: its engine's size %u is below the smallest struct "
                           "ixl_engine (%zu bytes); set base.size = sizeof(struct ixl_engine) in "
                           "create_engine",
                           p->info.name, (unsigned)e->size, (size_t)IXL_ENGINE_MIN_SIZE);
        goto free_backend;
    }
    if (ENGINE_COVERS(e, desc))
        e->desc = p->desc;
    b->caps = ENGINE_COVERS(e, caps) ? e->caps : 0;
    b->mem_mask = ENGINE_COVERS(e, mem_mask) ? e->mem_mask : 0;
    if (ENGINE_COVERS(e, mem_why) && e->mem_why != NULL)
        snprintf(b->mem_why, sizeof(b->mem_why), "%s", e->mem_why);
    if ((b->caps & ~p->info.caps) || (b->mem_mask & ~p->info.mem_mask)) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_PLUGIN,
                           "backend %s claims capabilities or memory types beyond its plugin's",
                           p->info.name);
        goto free_backend;
    }
    if ((b->caps & IXL_CAP_REMOTE) && !(b->caps & IXL_CAP_NOTIF)) {
        rc = IXL_AGENT_ERR(agent, IXL_ERR_PLUGIN,
                           "backend %s supports remote transfers but not notifications; "
                           "a remote-capable backend must support notifications",
                           p->info.name);
        goto free_backend;
    }
    if ((b->caps & IXL_CAP_PROGRESS) == 0 && agent->params.progress_thread)
        ixl_log_write(IXL_LOG_DEBUG, "backend %s has no progress(); the progress thread skips it",
                      p->info.name);
    if (b->caps & IXL_CAP_REMOTE) {
        rc = p->ops.get_conn_info(e, &b->conn_info, &b->conn_len);
        if (rc != IXL_OK) {
            IXL_AGENT_ERR(agent, rc, "backend %s: no connection info (%s)", p->info.name,
                          ixl_strerror(rc));
            goto free_backend;
        }
    }
    if (b->caps & IXL_CAP_LOCAL) {
        /* Some backends need a connection to themselves for loopback (seed 001). */
        rc = p->ops.connect(e, agent->name);
        if (rc != IXL_OK && rc != IXL_ERR_NOT_SUPPORTED) {
            IXL_AGENT_ERR(agent, rc, "backend %s: connecting to itself failed (%s)", p->info.name,
                          ixl_strerror(rc));
            goto free_backend;
        }
    }
    agent->backends[slot] = b;
    if (slot == agent->n_backends)
        agent->n_backends++;
    if (out)
        *out = b;
    ixl_log_write(IXL_LOG_INFO, "agent %s: backend %s created", agent->name, p->info.name);
    return IXL_OK;

free_backend:
    backend_free(b);
    return rc;
}

ixl_status ixl_backend_create(struct ixl_agent *agent, const char *plugin_name,
                              const struct ixl_kv *params, size_t n, struct ixl_backend **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (plugin_name == NULL || (params == NULL && n > 0))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_backend_create: plugin name or params missing");
    pthread_rwlock_wrlock(&agent->lock);
    int rc = backend_create_locked(agent, plugin_name, params, n, out);
    pthread_rwlock_unlock(&agent->lock);
    return rc;
}

/* Why b cannot go yet (agent->lock held for writing): a request made with it that is not
 * released, a prepared list that can use it, memory it allocated. 0 when none. */
static int backend_busy(struct ixl_agent *agent, struct ixl_backend *b)
{
    size_t xfers = 0, preps = 0, allocs = 0;
    pthread_mutex_lock(&agent->objs_lock);
    for (struct ixl_node *n = agent->xfers; n != NULL; n = n->next)
        xfers += ((struct ixl_xfer *)n->owner)->backend == b;
    for (struct ixl_node *n = agent->preps; n != NULL; n = n->next)
        preps += (((struct ixl_prep *)n->owner)->valid_mask >> b->slot) & 1u;
    pthread_mutex_unlock(&agent->objs_lock);
    for (size_t i = 0; i < agent->n_allocs; i++)
        allocs += agent->allocs[i].backend == b;
    if (xfers + preps + allocs == 0)
        return IXL_OK;
    return IXL_AGENT_ERR(agent, IXL_ERR_BUSY,
                         "backend %s of agent '%s' is in use by %zu request(s) not released, "
                         "%zu prepared list(s) that can use it and %zu ixl_mem_alloc() buffer(s): "
                         "release, destroy and free them first",
                         b->plugin->info.name, agent->name, xfers, preps, allocs);
}

ixl_status ixl_backend_destroy(struct ixl_backend *backend)
{
    if (backend == NULL)
        return IXL_OK;
    struct ixl_agent *agent = backend->agent;
    ixl_err_clear(agent->id);
    /* First no call made without agent->lock is inside the engine (progress, notifications),
     * then nothing else of the agent moves while the backend's share of it goes. */
    pthread_rwlock_wrlock(&agent->calls_lock);
    pthread_rwlock_wrlock(&agent->lock);
    unsigned b = backend->slot;
    int rc = IXL_OK;
    if (b >= agent->n_backends || agent->backends[b] != backend)
        rc = IXL_AGENT_ERR(agent, IXL_ERR_NOT_FOUND,
                           "ixl_backend_destroy: not a backend of agent '%s'", agent->name);
    if (rc == IXL_OK)
        rc = backend_busy(agent, backend);
    if (rc == IXL_OK)
        rc = ixl_mem_drop_backend(agent, b);
    if (rc == IXL_OK) {
        ixl_remotes_drop_backend(agent, b);
        agent->backends[b] = NULL;
        while (agent->n_backends > 0 && agent->backends[agent->n_backends - 1] == NULL)
            agent->n_backends--;
        ixl_log_write(IXL_LOG_INFO, "agent %s: backend %s destroyed", agent->name,
                      backend->plugin->info.name);
        /* Under the locks, so a backend of the same plugin created next never overlaps this
         * engine. destroy_engine may join threads that call host->signal(), which takes
         * neither lock. */
        backend_free(backend);
    }
    pthread_rwlock_unlock(&agent->lock);
    pthread_rwlock_unlock(&agent->calls_lock);
    return rc;
}

size_t ixl_backend_count(struct ixl_agent *agent)
{
    if (agent == NULL)
        return 0;
    pthread_rwlock_rdlock(&agent->lock);
    size_t n = 0;
    for (unsigned i = 0; i < agent->n_backends; i++)
        n += agent->backends[i] != NULL;
    pthread_rwlock_unlock(&agent->lock);
    return n;
}

ixl_status ixl_backend_get(struct ixl_agent *agent, size_t index, struct ixl_backend **out)
{
    if (agent == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_rwlock_rdlock(&agent->lock);
    int rc = IXL_ERR_INDEX;
    for (unsigned i = 0; i < agent->n_backends && rc != IXL_OK; i++)
        if (agent->backends[i] != NULL && index-- == 0) {
            *out = agent->backends[i];
            rc = IXL_OK;
        }
    pthread_rwlock_unlock(&agent->lock);
    return rc;
}

ixl_status ixl_backend_find(struct ixl_agent *agent, const char *name, struct ixl_backend **out)
{
    if (agent == NULL || name == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_rwlock_rdlock(&agent->lock);
    struct ixl_backend *b = ixl_agent_backend_by_name(agent, name);
    pthread_rwlock_unlock(&agent->lock);
    if (b == NULL)
        return IXL_AGENT_QUIET(agent, IXL_ERR_NOT_FOUND, "agent '%s' has no backend '%s'",
                               agent->name, name);
    *out = b;
    return IXL_OK;
}

const char *ixl_backend_name(const struct ixl_backend *backend)
{
    return backend ? backend->plugin->info.name : NULL;
}

uint32_t ixl_backend_caps(const struct ixl_backend *backend)
{
    return backend ? backend->caps : 0;
}

uint32_t ixl_backend_mem_mask(const struct ixl_backend *backend)
{
    return backend ? backend->mem_mask : 0;
}

const char *ixl_backend_mem_why(const struct ixl_backend *backend)
{
    return backend ? backend->mem_why : "";
}

ixl_status ixl_backend_params(const struct ixl_backend *backend, const struct ixl_kv **out,
                              size_t *n)
{
    if (backend == NULL || out == NULL || n == NULL)
        return IXL_ERR_INVALID_ARG;
    *out = backend->params;
    *n = backend->n_params;
    return IXL_OK;
}

/* ---- agent -------------------------------------------------------------------------------- */

static int valid_agent_name(const char *name)
{
    if (name == NULL)
        return 0;
    size_t n = strnlen(name, IXL_NAME_MAX);
    return n > 0 && n < IXL_NAME_MAX;
}

/* IXL_ERR_INVALID_ARG (logged) when an IXL_* variable it reads does not parse. */
static int fill_params(struct ixl_agent *agent, const struct ixl_agent_params *p)
{
    struct ixl_agent_params *d = &agent->params;
    uint64_t m = p ? p->field_mask : 0;
    d->field_mask = m;
    d->progress_thread = (m & IXL_AGENT_F_PROGRESS_THREAD) ? p->progress_thread : false;
    d->progress_period_us =
        (m & IXL_AGENT_F_PROGRESS_PERIOD) && p->progress_period_us ? p->progress_period_us : 1000;
    d->listen_port = (m & IXL_AGENT_F_LISTEN_PORT) ? p->listen_port : 0;
    snprintf(agent->listen_addr, sizeof(agent->listen_addr), "%s",
             (m & IXL_AGENT_F_LISTEN_ADDR) && p->listen_addr ? p->listen_addr : "127.0.0.1");
    d->listen_addr = agent->listen_addr;
    d->thread_mode = (m & IXL_AGENT_F_THREAD_MODE) ? p->thread_mode : IXL_THREAD_SAFE;
    d->telemetry = (m & IXL_AGENT_F_TELEMETRY) ? p->telemetry : true;
    d->backends = NULL; /* consumed at creation */
    uint64_t nmax = IXL_NOTIF_MAX_DEFAULT;
    if (m & IXL_AGENT_F_NOTIF_MAX) {
        nmax = p->notif_max;
    } else {
        char why[512];
        if (ixl_cfg_num(IXL_CFG_NOTIF_MAX, &nmax, why, sizeof(why)) != IXL_OK) {
            ixl_log_write(IXL_LOG_ERROR, "ixl_agent_create %s: %s", agent->name, why);
            return IXL_ERR_INVALID_ARG;
        }
    }
    d->notif_max = nmax < IXL_NOTIF_MAX_DEFAULT ? IXL_NOTIF_MAX_DEFAULT : (size_t)nmax;
    d->etcd_endpoints = NULL;
    char why[512];
    const char *key = (m & IXL_AGENT_F_AUTH_KEY) ? (p->auth_key ? p->auth_key : "") : NULL;
    int insecure = (m & IXL_AGENT_F_INSECURE_REMOTE) ? p->insecure_remote : -1;
    if (ixl_auth_setup(&agent->auth, key, insecure, why, sizeof(why)) != IXL_OK) {
        ixl_log_write(IXL_LOG_ERROR, "ixl_agent_create %s: %s", agent->name, why);
        return IXL_ERR_INVALID_ARG;
    }
    d->auth_key = NULL; /* the key lives in agent->auth only */
    d->insecure_remote = agent->auth.mode == IXL_AUTH_OPEN;
    if (agent->auth.mode == IXL_AUTH_OPEN)
        ixl_log_write(IXL_LOG_WARN,
                      "agent %s: INSECURE: no cluster key and insecure_remote is set: listeners "
                      "accept unauthenticated peers from any address (docs/security.md)",
                      agent->name);
    return IXL_OK;
}

/* Creates the backends of a comma-separated list. explicit: a failure fails the agent. */
static int create_default_backends(struct ixl_agent *agent, const char *list, int explicit_list)
{
    char *copy = sys_strdup(list);
    if (copy == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_NO_MEMORY, "out of memory");
    int rc = IXL_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        pthread_rwlock_wrlock(&agent->lock);
        int r = ixl_agent_backend_by_name(agent, tok)
                    ? IXL_OK
                    : backend_create_locked(agent, tok, NULL, 0, NULL);
        pthread_rwlock_unlock(&agent->lock);
        if (r != IXL_OK) {
            if (explicit_list) {
                rc = r;
                break;
            }
            ixl_log_write(IXL_LOG_WARN, "agent %s: default backend %s not created: %s", agent->name,
                          tok, ixl_err_get(agent->id));
        }
    }
    free(copy);
    return rc;
}

ixl_status ixl_agent_create(const char *name, const struct ixl_agent_params *params,
                            struct ixl_agent **out)
{
    ixl_err_clear(IXL_ERR_NO_AGENT);
    if (!valid_agent_name(name) || out == NULL) {
        return ixl_err_set(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG,
                           "ixl_agent_create: the name must be 1 to %d bytes and out "
                           "must not be NULL",
                           IXL_NAME_MAX - 1);
    }
    ixl_tick_init(); /* before the agent can have a request */
    struct ixl_agent *agent = sys_calloc(1, sizeof(*agent));
    if (agent == NULL)
        return ixl_err_set(IXL_ERR_NO_AGENT, IXL_ERR_NO_MEMORY,
                           "ixl_agent_create: calloc: out of memory");
    int rc = IXL_ERR_SYSTEM;
    agent->id = atomic_fetch_add(&next_agent_id, 1);
    agent->event_fd = -1;
    snprintf(agent->name, sizeof(agent->name), "%s", name);
    /* Incarnations grow with time (a restarted agent's is larger than its predecessor's), with
     * random low bits so two instances started in the same microsecond still differ. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint16_t salt = 0;
    if (sys_getrandom(&salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
        salt = (uint16_t)(getpid() ^ agent->id);
    agent->incarnation =
        (((uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u) << 12) | (salt & 0xfffu);
    if ((rc = fill_params(agent, params)) != IXL_OK) {
        free(agent);
        return rc;
    }

    pthread_rwlock_init(&agent->lock, NULL);
    /* Writers first: a destroy must not wait behind a stream of progress calls. No reader
     * takes it twice, so the non-recursive kind is safe. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&agent->calls_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&agent->notif_lock, NULL);
    pthread_mutex_init(&agent->objs_lock, NULL);
    pthread_mutex_init(&agent->pool_lock, NULL);
    pthread_mutex_init(&agent->progress_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&agent->progress_cond, &ca);
    pthread_condattr_destroy(&ca);

    agent->event_fd = sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (agent->event_fd < 0) {
        char eb[128];
        rc = ixl_err_set(agent->id, IXL_ERR_SYSTEM, "ixl_agent_create: eventfd: %s",
                         ixl_errno_text(errno, eb, sizeof(eb)));
        goto destroy_agent;
    }
    rc = ixl_agent_hooks_init(agent);
    if (rc != IXL_OK)
        goto destroy_agent;

    uint64_t m = params ? params->field_mask : 0;
    if ((m & IXL_AGENT_F_BACKENDS) && params->backends)
        rc = create_default_backends(agent, params->backends, 1);
    else
        rc = create_default_backends(agent, ixl_cfg_get(IXL_CFG_BACKENDS), 0);
    if (rc != IXL_OK) {
        ixl_log_write(IXL_LOG_ERROR, "ixl_agent_create %s: %s", name, ixl_err_get(agent->id));
        goto destroy_agent;
    }

    rc = ixl_mdx_start(agent, params);
    if (rc != IXL_OK) {
        ixl_log_write(IXL_LOG_ERROR, "ixl_agent_create %s: %s", name, ixl_err_get(agent->id));
        goto destroy_agent;
    }

    if (agent->params.progress_thread) {
        int e = sys_pthread_create(&agent->progress_thread, NULL, progress_main, agent);
        if (e != 0) {
            char eb[128];
            rc = ixl_err_set(agent->id, IXL_ERR_SYSTEM,
                             "ixl_agent_create %s: pthread_create of the progress thread: %s", name,
                             ixl_errno_text(e, eb, sizeof(eb)));
            goto destroy_agent;
        }
        agent->progress_running = true;
        pthread_setname_np(agent->progress_thread, "ixl-progress");
    }
    ixl_log_write(IXL_LOG_INFO, "agent %s created", name);
    *out = agent;
    return IXL_OK;

destroy_agent : {
    /* No agent survives to ask: the text goes where ixl_agent_last_error(NULL) reads. */
    char why[512];
    snprintf(why, sizeof(why), "%s", ixl_err_get(agent->id));
    ixl_agent_destroy(agent);
    ixl_err_quiet(IXL_ERR_NO_AGENT, rc, "%s",
                  why[0] ? why : "ixl_agent_create failed with no reason given");
    return rc;
}
}

void ixl_agent_destroy(struct ixl_agent *agent)
{
    if (agent == NULL)
        return;
    ixl_mdx_stop(agent); /* no more metadata arrives from peers or etcd */
    if (agent->progress_running) {
        pthread_mutex_lock(&agent->progress_lock);
        agent->progress_stop = true;
        pthread_cond_broadcast(&agent->progress_cond);
        pthread_mutex_unlock(&agent->progress_lock);
        pthread_join(agent->progress_thread, NULL);
    }
    /* Requests, prepared lists, remotes and registrations go before the engines they use. */
    ixl_agent_hooks_fini(agent);
    for (unsigned i = agent->n_backends; i-- > 0;)
        backend_free(agent->backends[i]);
    if (agent->event_fd >= 0)
        sys_close(agent->event_fd);
    pthread_cond_destroy(&agent->progress_cond);
    pthread_mutex_destroy(&agent->progress_lock);
    pthread_mutex_destroy(&agent->notif_lock);
    pthread_mutex_destroy(&agent->objs_lock);
    pthread_mutex_destroy(&agent->pool_lock);
    pthread_rwlock_destroy(&agent->calls_lock);
    pthread_rwlock_destroy(&agent->lock);
    ixl_auth_clear(&agent->auth);
    free(agent);
}

const char *ixl_agent_name(const struct ixl_agent *agent)
{
    return agent ? agent->name : NULL;
}

const char *ixl_agent_last_error(const struct ixl_agent *agent)
{
    return ixl_err_get(agent ? agent->id : IXL_ERR_NO_AGENT);
}

ixl_status ixl_agent_fd(struct ixl_agent *agent, int *out)
{
    if (agent == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    *out = agent->event_fd;
    return IXL_OK;
}

ixl_status ixl_agent_progress(struct ixl_agent *agent)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    uint64_t v;
    /* Disarm, then drain: a signal that lands after the read leaves the fd readable again,
     * and one that armed it between the two (its write maybe the one read) is written again
     * (see "waking"). */
    atomic_store(&agent->fd_armed, 0);
    ssize_t rc = sys_read(agent->event_fd, &v, sizeof(v));
    (void)rc;
    if (atomic_load(&agent->fd_armed) != 0)
        fd_arm(agent);
    ixl_agent_progress_backends(agent);
    return IXL_OK;
}

/* struct ixl_agent_stats's first generation ends at notifs_sent (the growth rule in ixl.h). */
#define IXL_AGENT_STATS_V1 IXL_SIZE_THROUGH(struct ixl_agent_stats, notifs_sent)

ixl_status ixl_agent_stats(struct ixl_agent *agent, struct ixl_agent_stats *out)
{
    if (agent == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (ixl_out_check(out, IXL_AGENT_STATS_V1) != IXL_OK)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG,
                             "ixl_agent_stats: out->size must be sizeof(struct ixl_agent_stats)");
    struct ixl_agent_stats st = {
        .size = sizeof(st),
        .notifs_received = atomic_load(&agent->st_notifs_rx),
        .notifs_sent = atomic_load(&agent->st_notifs_tx),
    };
    /* Ends first, posts after: a request counted as ended was counted as posted before it
     * (its post's add precedes its end's), so posted >= completed + failed. */
    for (unsigned i = 0; i < IXL_STAT_STRIPES; i++) {
        st.completed += atomic_load(&agent->st[i].completed);
        st.failed += atomic_load(&agent->st[i].failed);
        st.bytes += atomic_load(&agent->st[i].bytes);
    }
    for (unsigned i = 0; i < IXL_STAT_STRIPES; i++)
        st.posted += atomic_load(&agent->st[i].posted);
    return ixl_out_write(out, &st, sizeof(st), IXL_AGENT_STATS_V1,
                         _Alignof(struct ixl_agent_stats));
}

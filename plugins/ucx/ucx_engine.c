/* UCX plugin: the engine (options, create and destroy), connections, memory and notifications. See
 * ucx.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../common/ixl_plugin_util.h"
#include "ucx.h"

#define UCX_STR2(x) #x
#define UCX_STR(x) UCX_STR2(x)

/* The options, by index: create_engine reads init->values[UO_x]. */
enum ucx_opt {
    UO_WORKERS,
    UO_DEVICES,
    UO_TRANSPORTS,
    UO_ERR_MODE,
    UO_KEEPALIVE,
    UO_TIMEOUT,
    UO_PROGRESS,
    UO_SPIN,
    UO_RMA_EMULATION,
    UO_NOTIF_QUEUE,
    UO_NOTIF_QUEUE_BYTES,
    UO_COUNT
};

static const char *const ucx_err_modes[] = {"peer", "none", NULL};    /* UCP_ERR_HANDLING_MODE_ */
static const char *const ucx_rma_emulations[] = {"ixl", "ucx", NULL}; /* own_rma: index 0 */

static const struct ixl_option ucx_options[UO_COUNT] = {
    [UO_WORKERS] = {.name = "workers",
                    .default_value = "1",
                    .type = IXL_OPT_INT,
                    .unit = "workers",
                    .min = 1,
                    .max = UCX_MAX_WORKERS,
                    .description = "UCP workers per engine, each with its own progress thread; a "
                                   "request is split over them in shares of at least 256 KiB"},
    [UO_DEVICES] = {.name = "devices",
                    .default_value = "all",
                    .type = IXL_OPT_STRING,
                    .description =
                        "UCX_NET_DEVICES: network devices UCX may use, e.g. eth0, mlx5_0:1"},
    [UO_TRANSPORTS] = {.name = "transports",
                       .default_value = "all",
                       .type = IXL_OPT_STRING,
                       .description = "UCX_TLS: transports UCX may use, e.g. tcp, shm, sm,self, "
                                      "rc,ud (all: UCX chooses)"},
    [UO_ERR_MODE] = {.name = "err_mode",
                     .default_value = "peer",
                     .type = IXL_OPT_ENUM,
                     .choices = ucx_err_modes,
                     .description = "error handling: peer (a dead peer fails its requests; UCX "
                                    "1.13 then refuses shared memory transports) or none "
                                    "(shared memory allowed; a dead peer may go unnoticed)"},
    [UO_KEEPALIVE] = {.name = "keepalive_ms",
                      .default_value = "1000",
                      .type = IXL_OPT_DURATION,
                      .unit = "ms",
                      .min = 1,
                      .max = 3600000,
                      .description = "UCX_KEEPALIVE_INTERVAL: how often endpoints check their "
                                     "peer (err_mode=peer)"},
    [UO_TIMEOUT] = {.name = "timeout_ms",
                    .default_value = "2000",
                    .type = IXL_OPT_DURATION,
                    .unit = "ms",
                    .min = 0,
                    .max = 3600000,
                    .description = "operations to a peer outstanding and none completed for "
                                   "this long: its requests fail with IXL_ERR_REMOTE_DISCONNECT "
                                   "and new posts to it fail until it completes one again (a "
                                   "stopped peer); the endpoint stays open, so release "
                                   "answers IXL_ERR_BUSY until the peer resumes or dies; 0: "
                                   "never"},
    [UO_PROGRESS] = {.name = "progress_us",
                     .default_value = "1000",
                     .type = IXL_OPT_DURATION,
                     .unit = "us",
                     .min = 1,
                     .max = 1000000,
                     .description = "longest sleep of a progress thread between two progress "
                                    "calls"},
    [UO_SPIN] = {.name = "spin_us",
                 .default_value = "200",
                 .type = IXL_OPT_DURATION,
                 .unit = "us",
                 .min = 0,
                 .max = 1000000,
                 .description = "a progress thread keeps polling its worker this long after the "
                                "last thing it did (a message received, an operation completed) "
                                "before it sleeps on the worker's events: a message that "
                                "arrives in that window is handled without a wake-up; 0: sleep "
                                "as soon as the worker is idle"},
    [UO_RMA_EMULATION] = {.name = "rma_emulation",
                          .default_value = "ixl",
                          .type = IXL_OPT_ENUM,
                          .choices = ucx_rma_emulations,
                          .description =
                              "WRITE/READ over an endpoint without an RMA transport (tcp): ixl "
                              "(the plugin's own active messages: descriptors batched, every "
                              "range checked by the target against its regions' keys; a dead "
                              "initiator cannot abort the target) or ucx (UCX's emulated "
                              "put/get, one message per put; UCX 1.13.1 aborts a target whose "
                              "initiator dies in the middle)"},
    [UO_NOTIF_QUEUE] = {.name = "notif_queue_max",
                        .default_value = "65536",
                        .type = IXL_OPT_INT,
                        .unit = "notifications",
                        .min = 1,
                        .max = 1 << 24,
                        .description = "notifications received and not drained yet that this "
                                       "engine holds; one more is refused and its sender's "
                                       "request (or ixl_notif_send) fails with "
                                       "IXL_ERR_REMOTE_REFUSED"},
    [UO_NOTIF_QUEUE_BYTES] = {.name = "notif_queue_bytes",
                              .default_value = "64M",
                              .type = IXL_OPT_SIZE,
                              .min = 4096,
                              .max = (int64_t)1 << 40,
                              .description = "bytes of notifications received and not drained "
                                             "yet (messages, sender names, about 40 bytes each "
                                             "besides) that this engine holds; above it they are "
                                             "refused as with notif_queue_max"},
};

/* ---- helpers ----------------------------------------------------------------------------------
 */

void fail(struct ucx_engine *e, int status, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "UCX: %s", msg);
}

int status_of(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return IXL_OK;
    case UCS_ERR_NO_MEMORY:
        return IXL_ERR_NO_MEMORY;
    case UCS_ERR_UNREACHABLE:
        return IXL_ERR_UNREACHABLE;
    case UCS_ERR_REJECTED:
        return IXL_ERR_CONN_REFUSED;
    default:
        /* connection reset, endpoint timeout, canceled by a forced close, I/O errors: the
         * peer or the connection to it went away */
        return IXL_ERR_REMOTE_DISCONNECT;
    }
}

struct ucx_remote *remote_find(struct ucx_engine *e, const char *name)
{
    return ixlp_index_find(&e->remote_idx, name);
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC's coarse reading (its last tick: 1-4 ms old), for deadlines of tens of
 * milliseconds and more: half the cost of a precise one here (17 against 33 ns). Compared only
 * with itself, never with now_ns. */
uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- notifications ----------------------------------------------------------------------------
 */

static int ucx_get_notifs(struct ixl_engine *base, ixl_notif_sink_fn sink, void *sink_ctx)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    pthread_mutex_lock(&e->nlock);
    struct notif *n = e->nhead;
    e->nhead = NULL;
    e->ntail = &e->nhead;
    e->nq_count = 0;
    e->nq_bytes = 0;
    pthread_mutex_unlock(&e->nlock);
    while (n != NULL) {
        struct notif *next = n->next;
        sink(sink_ctx, n->agent, n->msg, n->len);
        free(n);
        n = next;
    }
    return IXL_OK;
}

static int ucx_gen_notif(struct ixl_engine *base, const char *remote_agent, const void *msg,
                         size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    size_t blen;
    void *b = ucx_notif_encode(e->name, msg, len, &blen);
    if (b == NULL)
        return IXL_ERR_NO_MEMORY;
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, remote_agent);
    pthread_mutex_unlock(&e->lock);
    if (r == NULL) {
        free(b);
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    struct ucx_worker *w = next_home(e);
    pthread_mutex_lock(&w->lock);
    ucp_ep_h ep;
    int rc = ep_get_locked(w, r, &ep);
    struct ucx_send *s = NULL;
    uint64_t token = 0;
    int answer = IXL_IN_PROGRESS; /* the target's answer (notif_op_new), under w->lock */
    if (rc == IXL_OK && ((s = send_new(w, NULL, 0, blen)) == NULL ||
                         (token = notif_op_new(w, r, NULL, &answer)) == 0)) {
        if (s != NULL)
            send_free(s);
        rc = IXL_ERR_NO_MEMORY;
    }
    if (rc == IXL_OK) {
        s->token = token;
        memcpy(send_bytes(s), b, blen);
        send_notif(ep, s, blen); /* a failure sets answer */
    }
    pthread_mutex_unlock(&w->lock);
    free(b);
    if (rc != IXL_OK)
        return rc;
    /* The target answers whether it queued the notification; a refusal (its queue is full) is
     * this call's error, never a silent loss. */
    uint64_t end = now_ms() + (e->timeout_ms > 0 ? e->timeout_ms : UCX_NOTIF_WAIT_MS);
    for (;;) {
        pthread_mutex_lock(&w->lock);
        bool any = answer == IXL_IN_PROGRESS && progress_locked(w, false);
        rc = answer;
        if (rc == IXL_IN_PROGRESS && now_ms() >= end) {
            struct ucx_op *o = op_find(w, token);
            if (o != NULL && o->wait == &answer)
                o->wait = NULL; /* a late answer only says the peer answers again */
            rc = IXL_ERR_REMOTE_DISCONNECT;
        }
        pthread_mutex_unlock(&w->lock);
        if (rc != IXL_IN_PROGRESS)
            break;
        if (!any)
            sched_yield();
    }
    wake(w);
    if (rc == IXL_ERR_REMOTE_DISCONNECT && answer == IXL_IN_PROGRESS)
        fail(e, rc, "notification to '%s': no answer in %" PRIu64 " ms", remote_agent,
             e->timeout_ms > 0 ? e->timeout_ms : (uint64_t)UCX_NOTIF_WAIT_MS);
    else if (rc == IXL_ERR_REMOTE_REFUSED)
        fail(e, rc,
             "notification to '%s' refused: its queue of notifications not drained is full (it "
             "answers again once the application there drains them)",
             remote_agent);
    else if (rc != IXL_OK)
        fail(e, rc, "notification to '%s': %s", remote_agent,
             rc == IXL_ERR_NOTIF_TOO_LARGE ? "over the target's notif_max"
             : rc == IXL_ERR_NO_MEMORY     ? "the target had no memory for it"
             : rc == IXL_ERR_PROTOCOL      ? "the target answered with a malformed reply"
                                           : "the connection failed");
    return rc;
}

/* ---- connections ------------------------------------------------------------------------------
 */

static int ucx_get_conn_info(struct ixl_engine *base, const void **info, size_t *len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    *info = e->info;
    *len = e->info_len;
    return IXL_OK;
}

/* Records (or replaces) an agent's connection info. Under e->lock and every worker lock (or
 * before the threads start). */
static int remote_set_locked(struct ucx_engine *e, const char *name, const void *info, size_t len)
{
    struct ucx_remote *r = remote_find(e, name);
    if (r != NULL && r->info_len == len && memcmp(r->info, info, len) == 0) {
        /* reloaded as it was: a stalled peer gets another chance (a lane still silent with
         * operations outstanding is found stalled again at the next progress) */
        for (unsigned i = 0; i < e->nw; i++)
            r->lane[i].stalled = false;
        atomic_store(&r->stalled, false);
        return IXL_OK;
    }
    void *copy = malloc(len);
    if (copy == NULL)
        return IXL_ERR_NO_MEMORY;
    memcpy(copy, info, len);
    const void *addr[UCX_MAX_ADDRS];
    size_t alen[UCX_MAX_ADDRS];
    size_t n = ucx_info_decode(copy, len, addr, alen);
    if (n == 0) {
        free(copy);
        return IXL_ERR_MALFORMED;
    }
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL || (r->name = strdup(name)) == NULL ||
            ixlp_index_add(&e->remote_idx, r->name, r, calloc) != 0) {
            if (r != NULL)
                free(r->name);
            free(r);
            free(copy);
            return IXL_ERR_NO_MEMORY;
        }
        r->next = e->remotes;
        e->remotes = r;
    } else {
        for (unsigned i = 0; i < e->nw; i++) { /* a restarted peer: its requests fail */
            close_ep_locked(&e->w[i], r);
            r->lane[i].quiet_until = 0; /* new addresses: nothing of the old can collide */
            r->lane[i].reached = false;
        }
        atomic_store(&r->stalled, false);
    }
    free(r->info);
    r->info = copy;
    r->info_len = len;
    r->n_addrs = n;
    memcpy(r->addr, addr, n * sizeof(addr[0]));
    memcpy(r->addr_len, alen, n * sizeof(alen[0]));
    return IXL_OK;
}

static int ucx_load_remote_conn_info(struct ixl_engine *base, const char *remote_agent,
                                     const void *info, size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    const void *addr[UCX_MAX_ADDRS], *own[UCX_MAX_ADDRS];
    size_t alen[UCX_MAX_ADDRS], olen[UCX_MAX_ADDRS];
    size_t n = ucx_info_decode(info, len, addr, alen);
    if (n == 0) {
        fail(e, IXL_ERR_MALFORMED,
             "connection info of '%s' is not a list of UCX worker addresses (version %d)",
             remote_agent, UCX_INFO_VERSION);
        return IXL_ERR_MALFORMED;
    }
    /* UCX aborts on a worker address of another format version (address.c "addr_version"):
     * the low 4 bits of its first byte must be this UCX's own (what ucx_info_decode and this
     * can check; the rest of an address only UCX parses). */
    if (ucx_info_decode(e->info, e->info_len, own, olen) > 0)
        for (size_t i = 0; i < n; i++)
            if ((((const unsigned char *)addr[i])[0] & 0xf) !=
                (((const unsigned char *)own[0])[0] & 0xf)) {
                fail(e, IXL_ERR_MALFORMED,
                     "worker address %zu of '%s' is of UCX address version %u, not %u", i,
                     remote_agent, ((const unsigned char *)addr[i])[0] & 0xfu,
                     ((const unsigned char *)own[0])[0] & 0xfu);
                return IXL_ERR_MALFORMED;
            }
    pthread_mutex_lock(&e->lock);
    lock_workers(e);
    int rc = remote_set_locked(e, remote_agent, info, len);
    unlock_workers(e);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static struct ucx_remote *remote_get(struct ucx_engine *e, const char *name)
{
    pthread_mutex_lock(&e->lock);
    struct ucx_remote *r = remote_find(e, name);
    pthread_mutex_unlock(&e->lock);
    return r;
}

static int ucx_connect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_remote *r = remote_get(e, remote_agent);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    if (strcmp(remote_agent, e->name) == 0)
        return IXL_OK; /* to itself: at the first transfer, so that an endpoint UCX refuses
                          (shared memory with err_mode=peer) fails that transfer with the reason */
    int rc = IXL_OK;
    for (unsigned i = 0; i < e->nw && rc == IXL_OK; i++) {
        ucp_ep_h ep;
        pthread_mutex_lock(&e->w[i].lock);
        rc = ep_get_locked(&e->w[i], r, &ep);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    return rc;
}

static int ucx_disconnect(struct ixl_engine *base, const char *remote_agent)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_remote *r = remote_get(e, remote_agent);
    for (unsigned i = 0; r != NULL && i < e->nw; i++) {
        pthread_mutex_lock(&e->w[i].lock);
        struct ucx_lane *l = &r->lane[i];
        /* A stalled lane (a stopped peer) keeps its endpoint: a forced close with data queued
         * is not safe in UCX 1.13 (UCX_STALL_MS). Its requests already failed; the endpoint
         * ends when the peer answers or dies, and posts fail until then. */
        if (l->stalled && l->outstanding > 0)
            e->host->log(e->host->ctx, IXL_LOG_INFO,
                         "UCX: '%s' is stalled with %zu operations outstanding: its endpoint "
                         "of worker %u stays open until they end",
                         r->name, l->outstanding, i);
        else
            close_ep_locked(&e->w[i], r);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    return IXL_OK;
}

/* ---- memory -----------------------------------------------------------------------------------
 */

static size_t key_slot(const struct ucx_engine *e, uint64_t key)
{
    return (size_t)(key ^ key >> 29) & (e->kt_cap - 1);
}

/* The local region with this key, or NULL. Under e->klock (either). */
struct ucx_md *key_find(const struct ucx_engine *e, uint64_t key)
{
    if (e->kt_cap == 0)
        return NULL;
    for (size_t i = key_slot(e, key);; i = (i + 1) & (e->kt_cap - 1)) {
        if (e->kt[i] == NULL)
            return NULL;
        if (e->kt[i]->key == key)
            return e->kt[i];
    }
}

/* Gives m a fresh random key and enters it. Under e->klock (write). */
static int key_insert(struct ucx_engine *e, struct ucx_md *m)
{
    if (2 * (e->kt_n + 1) > e->kt_cap) {
        size_t cap = e->kt_cap ? 2 * e->kt_cap : 64, old = e->kt_cap;
        struct ucx_md **t = calloc(cap, sizeof(*t)), **ot = e->kt;
        if (t == NULL)
            return IXL_ERR_NO_MEMORY;
        e->kt = t;
        e->kt_cap = cap;
        for (size_t i = 0; i < old; i++)
            if (ot[i] != NULL) {
                size_t j = key_slot(e, ot[i]->key);
                while (t[j] != NULL)
                    j = (j + 1) & (cap - 1);
                t[j] = ot[i];
            }
        free(ot);
    }
    do {
        if (!ixlp_getrandom64(getrandom, &m->key))
            return IXL_ERR_SYSTEM;
    } while (m->key == 0 || key_find(e, m->key) != NULL);
    size_t i = key_slot(e, m->key);
    while (e->kt[i] != NULL)
        i = (i + 1) & (e->kt_cap - 1);
    e->kt[i] = m;
    e->kt_n++;
    return IXL_OK;
}

/* Removes m (backward-shift deletion: no tombstones). Under e->klock (write). */
static void key_remove(struct ucx_engine *e, struct ucx_md *m)
{
    size_t mask = e->kt_cap - 1, i = key_slot(e, m->key);
    while (e->kt[i] != m) {
        if (e->kt[i] == NULL)
            return;
        i = (i + 1) & mask;
    }
    e->kt[i] = NULL;
    e->kt_n--;
    for (size_t j = (i + 1) & mask; e->kt[j] != NULL; j = (j + 1) & mask) {
        size_t h = key_slot(e, e->kt[j]->key);
        /* kt[j] stays unless its home lies cyclically outside (i, j] */
        bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            e->kt[i] = e->kt[j];
            e->kt[j] = NULL;
            i = j;
        }
    }
}

/* Undoes a local registration: its key out of the table (waiting for a peer's message copying in
 * or out of it), its memory handle unmapped (or its allocation's count dropped), m freed. */
static void md_local_free(struct ucx_engine *e, struct ucx_md *m)
{
    if (m->key != 0) {
        pthread_rwlock_wrlock(&e->klock);
        key_remove(e, m);
        pthread_rwlock_unlock(&e->klock);
    }
    pthread_mutex_lock(&e->lock);
    if (m->alloc)
        m->alloc->regs--;
    else
        ucp_mem_unmap(e->ctx, m->memh);
    pthread_mutex_unlock(&e->lock);
    free(m->pub);
    free(m);
}

static int ucx_register_mem(struct ixl_engine *base, enum ixl_mem type,
                            const struct ixl_reg_desc *desc, struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (!(e->base.mem_mask & IXL_MEM_BIT(type))) {
        fail(e, IXL_ERR_BAD_MEM_TYPE, "memory type %d not supported by this UCX", type);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    if (desc->len == 0) {
        fail(e, IXL_ERR_INVALID_ARG, "cannot register an empty region");
        return IXL_ERR_INVALID_ARG;
    }
    struct ucx_md *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    m->kind = MD_LOCAL;
    m->addr = desc->addr;
    m->len = desc->len;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address = (void *)(uintptr_t)desc->addr,
        .length = desc->len,
        .memory_type = type == IXL_MEM_VRAM ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST,
    };
    void *rk = NULL;
    size_t rk_len = 0;
    pthread_mutex_lock(&e->lock);
    for (struct ucx_alloc *a = e->allocs; a != NULL; a = a->next)
        if (desc->addr >= a->addr && desc->len <= a->len - (desc->addr - a->addr)) {
            m->alloc = a; /* its memh, whose rkey lets a peer map the segment */
            m->memh = a->memh;
            break;
        }
    ucs_status_t st = m->alloc ? UCS_OK : ucp_mem_map(e->ctx, &mp, &m->memh);
    if (st == UCS_OK && (st = ucp_rkey_pack(e->ctx, m->memh, &rk, &rk_len)) != UCS_OK &&
        m->alloc == NULL)
        ucp_mem_unmap(e->ctx, m->memh);
    if (st == UCS_OK && m->alloc)
        m->alloc->regs++;
    pthread_mutex_unlock(&e->lock);
    if (st != UCS_OK) {
        free(m);
        fail(e, IXL_ERR_BACKEND, "cannot register %" PRIu64 " bytes at 0x%" PRIx64 ": %s",
             desc->len, desc->addr, ucs_status_string(st));
        return IXL_ERR_BACKEND;
    }
    /* Only DRAM is reachable by the plugin's messages (the target copies with the CPU): other
     * regions keep key 0, which no table entry has. */
    int krc = IXL_OK;
    if (type == IXL_MEM_DRAM) {
        pthread_rwlock_wrlock(&e->klock);
        krc = key_insert(e, m);
        pthread_rwlock_unlock(&e->klock);
    }
    unsigned mt;
    if (!ucx_rkey_check(rk, rk_len, &mt) && !atomic_exchange(&e->rkey_unchecked, true))
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: this UCX packs remote keys in a layout the plugin does not know: peers' "
                     "keys go to UCX unchecked");
    m->pub = krc == IXL_OK ? ucx_pub_encode(m->key, rk, rk_len, &m->pub_len) : NULL;
    ucp_rkey_buffer_release(rk);
    if (m->pub == NULL) {
        md_local_free(e, m);
        return krc != IXL_OK ? krc : IXL_ERR_NO_MEMORY;
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int ucx_deregister_mem(struct ixl_engine *base, struct ixl_md *md)
{
    md_local_free((struct ucx_engine *)base, (struct ucx_md *)md);
    return IXL_OK;
}

static int ucx_alloc_mem(struct ixl_engine *base, enum ixl_mem type, size_t len, void **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (type != IXL_MEM_DRAM) {
        fail(e, IXL_ERR_NOT_SUPPORTED, "UCX allocates DRAM only");
        return IXL_ERR_NOT_SUPPORTED;
    }
    struct ucx_alloc *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return IXL_ERR_NO_MEMORY;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .length = len,
        .flags = UCP_MEM_MAP_ALLOCATE,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
    pthread_mutex_lock(&e->lock);
    ucs_status_t st = ucp_mem_map(e->ctx, &mp, &a->memh);
    if (st == UCS_OK && (st = ucp_mem_query(a->memh, &attr)) != UCS_OK)
        ucp_mem_unmap(e->ctx, a->memh);
    if (st == UCS_OK) {
        a->addr = (uintptr_t)attr.address;
        a->len = attr.length;
        a->next = e->allocs;
        e->allocs = a;
    }
    pthread_mutex_unlock(&e->lock);
    if (st != UCS_OK) {
        free(a);
        fail(e, IXL_ERR_NO_MEMORY, "cannot allocate %zu bytes: %s", len, ucs_status_string(st));
        return IXL_ERR_NO_MEMORY;
    }
    *out = (void *)(uintptr_t)a->addr;
    return IXL_OK;
}

static int ucx_free_mem(struct ixl_engine *base, void *addr, size_t len)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    (void)len;
    pthread_mutex_lock(&e->lock);
    struct ucx_alloc **pp = &e->allocs;
    while (*pp != NULL && (*pp)->addr != (uintptr_t)addr)
        pp = &(*pp)->next;
    struct ucx_alloc *a = *pp;
    int rc = IXL_OK;
    if (a == NULL)
        rc = IXL_ERR_NOT_FOUND;
    else if (a->regs > 0)
        rc = IXL_ERR_BUSY;
    else {
        *pp = a->next;
        ucp_mem_unmap(e->ctx, a->memh);
        free(a);
    }
    pthread_mutex_unlock(&e->lock);
    if (rc == IXL_ERR_NOT_FOUND)
        fail(e, rc, "%p was not allocated by this UCX backend", addr);
    else if (rc == IXL_ERR_BUSY)
        fail(e, rc, "memory at %p is still registered: deregister it first", addr);
    return rc;
}

static int ucx_get_public_data(struct ixl_engine *base, const struct ixl_md *md, const void **data,
                               size_t *len)
{
    (void)base;
    const struct ucx_md *m = (const struct ucx_md *)md;
    *data = m->pub;
    *len = m->pub_len;
    return IXL_OK;
}

static int remote_md_new(struct ucx_engine *e, struct ucx_remote *r, uint64_t addr, uint64_t len,
                         uint64_t key, const void *rkey, size_t rkey_len, struct ixl_md **out)
{
    struct ucx_md *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->rkey_buf = malloc(rkey_len)) == NULL ||
        (m->rk = calloc(e->nw, sizeof(*m->rk))) == NULL) {
        if (m != NULL)
            free(m->rkey_buf);
        free(m);
        return IXL_ERR_NO_MEMORY;
    }
    m->kind = MD_REMOTE;
    m->addr = addr;
    m->len = len;
    m->key = key;
    m->rem = r;
    memcpy(m->rkey_buf, rkey, rkey_len);
    m->rkey_len = rkey_len;
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int ucx_load_remote_md(struct ixl_engine *base, const char *remote_agent, enum ixl_mem type,
                              const struct ixl_reg_desc *desc, const void *data, size_t len,
                              struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (!(e->base.mem_mask & IXL_MEM_BIT(type))) {
        fail(e, IXL_ERR_BAD_MEM_TYPE, "memory type %d not supported by this UCX", type);
        return IXL_ERR_BAD_MEM_TYPE;
    }
    size_t rk_len;
    uint64_t key;
    const void *rk = ucx_pub_decode(data, len, &key, &rk_len);
    if (rk == NULL) {
        fail(e, IXL_ERR_MALFORMED,
             "public data of a region of '%s' is not a UCX region key and remote key (version %d)",
             remote_agent, UCX_VERSION);
        return IXL_ERR_MALFORMED;
    }
    /* What the plugin can check before UCX parses it (ucx_rkey_check): the layout, the lengths,
     * and a memory type that agrees with the region's. */
    unsigned mt = 0;
    bool layout = ucx_rkey_check(rk, rk_len, &mt);
    if ((!layout && !atomic_load(&e->rkey_unchecked)) ||
        (layout &&
         (mt >= UCS_MEMORY_TYPE_LAST || (type == IXL_MEM_DRAM) != (mt == UCS_MEMORY_TYPE_HOST)))) {
        fail(e, IXL_ERR_MALFORMED,
             "the remote key of a region of '%s' (%zu bytes) is not one UCX packed for %s memory",
             remote_agent, rk_len, type == IXL_MEM_DRAM ? "host" : "device");
        return IXL_ERR_MALFORMED;
    }
    struct ucx_remote *r = remote_get(e, remote_agent);
    if (r == NULL) {
        fail(e, IXL_ERR_NOT_FOUND, "no connection info for agent '%s'", remote_agent);
        return IXL_ERR_NOT_FOUND;
    }
    return remote_md_new(e, r, desc->addr, desc->len, key, rk, rk_len, out);
}

static int ucx_load_local_md(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    struct ucx_remote *self = remote_get(e, e->name);
    size_t rk_len;
    uint64_t key;
    const void *rk = ucx_pub_decode(m->pub, m->pub_len, &key, &rk_len);
    if (self == NULL || rk == NULL)
        return IXL_ERR_BACKEND;
    return remote_md_new(e, self, m->addr, m->len, key, rk, rk_len, out);
}

static int ucx_unload_md(struct ixl_engine *base, struct ixl_md *md)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    struct ucx_md *m = (struct ucx_md *)md;
    for (unsigned i = 0; i < e->nw; i++) {
        pthread_mutex_lock(&e->w[i].lock);
        if (m->rk[i].rkey != NULL)
            ucp_rkey_destroy(m->rk[i].rkey);
        pthread_mutex_unlock(&e->w[i].lock);
    }
    free(m->rk);
    free(m->rkey_buf);
    free(m);
    return IXL_OK;
}

/* ---- engine -----------------------------------------------------------------------------------
 */

/* Whether every device of a UCX_NET_DEVICES list is the loopback device. */
static bool devices_loopback(const char *devices)
{
    for (const char *d = devices; *d != '\0'; d += strcspn(d, ","), d += *d == ',')
        if (strcspn(d, ",") != 2 || strncmp(d, "lo", 2) != 0)
            return false;
    return devices[0] != '\0';
}

/* e->tls without UCX's sysv transport: its segments are created 0660, so that any process of
 * the agent's group may attach them (its shared memory FIFO and the memory it allocates), where
 * posix segments are reached through /proc/<pid>/fd (the agent's own user). "all" becomes
 * "^sysv", an exclusion list gains sysv, and in a list of transports sysv is dropped and the
 * aliases sm, shm (posix, cma; knem and xpmem stay when named) and mm (posix) are spelled out.
 * False when nothing is left. */
static bool tls_without_sysv(char *tls, size_t cap)
{
    char out[sizeof(((struct ucx_engine *)0)->tls)] = "";
    size_t used = 0;
    bool all = false;
    for (const char *t = tls; *t != '\0'; t += strcspn(t, ","), t += *t == ',') {
        size_t n = strcspn(t, ",");
        const char *put = NULL;
        if (tls[0] == '^' || (n == 4 && strncmp(t, "sysv", 4) == 0))
            continue;
        if (n == 3 && strncmp(t, "all", 3) == 0)
            all = true;
        else if ((n == 2 && strncmp(t, "sm", 2) == 0) || (n == 3 && strncmp(t, "shm", 3) == 0))
            put = "posix,cma";
        else if (n == 2 && strncmp(t, "mm", 2) == 0)
            put = "posix";
        int k = put != NULL ? snprintf(out + used, sizeof(out) - used, "%s%s", used ? "," : "", put)
                            : snprintf(out + used, sizeof(out) - used, "%s%.*s", used ? "," : "",
                                       (int)n, t);
        if (k > 0 && (size_t)k < sizeof(out) - used)
            used += (size_t)k;
    }
    if (tls[0] == '^') {
        if (strstr(tls, "sysv") == NULL && strlen(tls) + 6 <= cap)
            strcat(tls, ",sysv");
        return true;
    }
    if (all)
        snprintf(tls, cap, "^sysv");
    else
        snprintf(tls, cap, "%s", out);
    return tls[0] != '\0';
}

/* The UCX_NET_DEVICES the engine runs with, from the devices option and how the agent's peers
 * prove who they are (host->auth_mode, ABI 2.1). Without a key (IXL_AUTH_LOCAL, also a host too
 * old to say) the network transports use the loopback device only, as the other listeners of ixl
 * bind loopback only: devices=all becomes lo, anything else is refused. Shared memory transports
 * (posix, sysv, cma, self) are host-local and stay. */
static int devices_for(struct ucx_engine *e, const char *devices, const char **out)
{
    const struct ixl_host *h = e->host;
    e->auth_mode = h->size >= offsetof(struct ixl_host, auth_mode) + sizeof(h->auth_mode) &&
                           h->auth_mode != NULL
                       ? h->auth_mode(h->ctx)
                       : IXL_AUTH_LOCAL;
    *out = devices;
    if (e->auth_mode != IXL_AUTH_LOCAL) {
        h->log(h->ctx, IXL_LOG_INFO,
               "UCX: network devices '%s'%s; UCX's own connections (tcp, RDMA, shared memory) are "
               "not authenticated by ixl: the cluster key covers the metadata that names them "
               "(docs/ucx.md, Trust)",
               devices,
               e->auth_mode == IXL_AUTH_OPEN ? " (insecure_remote: no key, any peer)" : "");
        return IXL_OK;
    }
    char asked[sizeof(e->tls)];
    snprintf(asked, sizeof(asked), "%s", e->tls);
    if (!tls_without_sysv(e->tls, sizeof(e->tls))) {
        fail(e, IXL_ERR_NOT_ALLOWED,
             "transports=%s: without a cluster key the UCX backend leaves out sysv, whose "
             "segments every process of this group may attach; use posix (shm) instead",
             asked);
        return IXL_ERR_NOT_ALLOWED;
    }
    if (strcmp(devices, "all") == 0)
        *out = "lo";
    else if (!devices_loopback(devices)) {
        fail(e, IXL_ERR_NOT_ALLOWED,
             "devices=%s: without a cluster key the UCX backend uses the loopback device (lo) "
             "only; set auth_key (IXL_AUTH_KEY, IXL_AUTH_KEY_FILE) or insecure_remote to use "
             "other devices",
             devices);
        return IXL_ERR_NOT_ALLOWED;
    }
    h->log(h->ctx, IXL_LOG_INFO,
           "UCX: no cluster key: network transports use the loopback device only "
           "(UCX_NET_DEVICES=lo), shared memory transports but sysv stay (UCX_TLS=%s); UCX's "
           "own connections are not authenticated by ixl (docs/ucx.md, Trust)",
           e->tls);
    return IXL_OK;
}

static void ucx_destroy_engine(struct ixl_engine *base);

/* Creates worker i: its UCP worker, notification handler, event fd and epoll set. */
static int worker_create(struct ucx_engine *e, unsigned i, ucp_address_t **addr, size_t *addr_len)
{
    struct ucx_worker *w = &e->w[i];
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = UCX_AM_NOTIF,
                                 .cb = am_notif_cb,
                                 .arg = w};
    ucp_am_handler_param_t rma = ap, reply = ap;
    rma.id = UCX_AM_RMA;
    rma.cb = am_rma_cb;
    rma.arg = w;
    reply.id = UCX_AM_RMA_REPLY;
    reply.cb = am_reply_cb;
    reply.arg = w;
    ucs_status_t st = ucp_worker_create(e->ctx, &wp, &w->w);
    if (st != UCS_OK)
        w->w = NULL;
    else if ((st = ucp_worker_set_am_recv_handler(w->w, &ap)) == UCS_OK &&
             (st = ucp_worker_set_am_recv_handler(w->w, &rma)) == UCS_OK &&
             (st = ucp_worker_set_am_recv_handler(w->w, &reply)) == UCS_OK &&
             (st = ucp_worker_get_efd(w->w, &w->efd)) == UCS_OK)
        st = ucp_worker_get_address(w->w, addr, addr_len);
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "cannot create UCP worker %u (transports '%s'): %s", i, e->tls,
             ucs_status_string(st));
        return IXL_ERR_BACKEND;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    if ((w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (ev.data.fd = w->efd, epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->efd, &ev)) != 0 ||
        (ev.data.fd = w->wakefd, epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev)) != 0) {
        fail(e, IXL_ERR_SYSTEM, "epoll/eventfd: %s", strerror(errno));
        return IXL_ERR_SYSTEM;
    }
    return IXL_OK;
}

static int ucx_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    const struct ixl_host *host = init->host;
    struct ucx_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = host;
    e->ntail = &e->nhead;
    e->notif_max = init->notif_max;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->nlock, NULL);
    pthread_rwlock_init(&e->klock, NULL);
    e->remote_idx.seed = ixlp_random64(getrandom);
    if ((e->name = strdup(init->agent_name)) == NULL) {
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NO_MEMORY;
    }
    /* The core parsed and range-checked every option (see ucx_options). */
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != UO_COUNT) {
        fail(e, IXL_ERR_INVALID_ARG, "the core passed no typed options");
        ucx_destroy_engine(&e->base);
        return IXL_ERR_INVALID_ARG;
    }
    const struct ixl_opt_value *opt = init->values;
    uint64_t workers = opt[UO_WORKERS].u, keepalive = opt[UO_KEEPALIVE].u;
    e->progress_us = (unsigned)opt[UO_PROGRESS].u;
    e->spin_ns = opt[UO_SPIN].u * 1000u;
    e->timeout_ms = opt[UO_TIMEOUT].u;
    e->own_rma = opt[UO_RMA_EMULATION].i == 0;
    e->nq_max = (size_t)opt[UO_NOTIF_QUEUE].u;
    e->nq_bytes_max = (size_t)opt[UO_NOTIF_QUEUE_BYTES].u;
    e->err_mode = opt[UO_ERR_MODE].i == 0 ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    snprintf(e->tls, sizeof(e->tls), "%s", opt[UO_TRANSPORTS].str);
    if ((e->w = calloc(workers, sizeof(*e->w))) == NULL) {
        ucx_destroy_engine(&e->base);
        return IXL_ERR_NO_MEMORY;
    }
    e->nw = (unsigned)workers;
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        w->e = e;
        w->idx = i;
        w->efd = w->wakefd = w->epfd = -1;
        w->todo_tail = &w->todo;
        w->free_op = UINT32_MAX;
        w->rng = ixlp_random64(getrandom); /* xorshift state: never 0 */
        pthread_mutex_init(&w->lock, NULL);
    }

    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        fail(e, IXL_ERR_BACKEND, "ucp_config_read: %s", ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    char ka[32];
    snprintf(ka, sizeof(ka), "%" PRIu64 "ms", keepalive);
    /* TX_SEG_SIZE, the tcp transport's send segment (UCX_TCP_TX_SEG_SIZE; transport settings
     * go through ucp_config_modify by their names without "TCP_", and no other transport has
     * this one): 64 KiB instead of 8. The plugin's messages are copied into these segments
     * (see pack_ops), one send() each; 64 KiB is the receive segment (UCX_TCP_RX_SEG_SIZE),
     * the most a peer takes in one. Left alone where the user set either, and where tcp cannot
     * open: UCX warns about a transport setting no transport took. */
    const char *devices;
    int rc = devices_for(e, opt[UO_DEVICES].str, &devices);
    if (rc != IXL_OK) {
        ucp_config_release(cfg);
        ucx_destroy_engine(&e->base);
        return rc;
    }
    bool seg = tcp_may_open(e->tls, devices) && getenv("UCX_TCP_TX_SEG_SIZE") == NULL &&
               getenv("UCX_TCP_RX_SEG_SIZE") == NULL;
    const char *mods[][2] = {{"TLS", e->tls},
                             {"NET_DEVICES", devices},
                             {"KEEPALIVE_INTERVAL", ka},
                             {"TX_SEG_SIZE", "64k"}};
    size_t nmods = sizeof(mods) / sizeof(mods[0]) - (seg ? 0 : 1);
    for (size_t i = 0; i < nmods; i++)
        if ((st = ucp_config_modify(cfg, mods[i][0], mods[i][1])) != UCS_OK) {
            fail(e, IXL_ERR_INVALID_ARG, "UCX_%s=%s refused: %s", mods[i][0], mods[i][1],
                 ucs_status_string(st));
            ucp_config_release(cfg);
            ucx_destroy_engine(&e->base);
            return IXL_ERR_INVALID_ARG;
        }
    /* UCX's put/get (UCP_FEATURE_RMA) includes its software emulation over active messages,
     * which a peer connected to a worker's tcp port uses to write to or read from any address of
     * this process: no key travels with it (ucp_put_handler). Whoever reaches that port may
     * connect: without a cluster key any local user (the port is on lo), with one anyone on the
     * network. With peer error handling, the plugin's own WRITE/READ messages and no RDMA port
     * among the devices (lo, or named interfaces), no endpoint can have an RMA lane anyway (tcp
     * has none, and UCX 1.13 refuses shared memory then), so the feature is left out and UCX
     * answers no put or get. Otherwise it stays (shared memory or RDMA puts, rma_emulation=ucx),
     * and the exposure is logged. */
    bool rdma = strcmp(devices, "all") == 0 || strchr(devices, ':') != NULL;
    bool rma = !(e->err_mode == UCP_ERR_HANDLING_MODE_PEER && e->own_rma && !rdma);
    if (rma && tcp_may_open(e->tls, devices))
        host->log(host->ctx, e->auth_mode == IXL_AUTH_LOCAL ? IXL_LOG_WARN : IXL_LOG_INFO,
                  "UCX: tcp allowed and %s: UCX's own put/get stays on, which %s that speaks UCX "
                  "can use through the tcp port to write and read this process's memory "
                  "(docs/ucx.md, Trust); %s",
                  !e->own_rma ? "rma_emulation=ucx"
                  : rdma      ? "RDMA devices possible"
                              : "err_mode=none",
                  e->auth_mode == IXL_AUTH_LOCAL ? "a process of any user of this host"
                                                 : "anyone who reaches the port",
                  e->auth_mode == IXL_AUTH_LOCAL ? "transports=shm avoids that"
                                                 : "name the network interfaces in devices "
                                                   "(no RDMA port) with err_mode=peer to avoid it");
    /* mt_workers_shared: memory registration runs beside the workers' threads. */
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                       .features =
                           (rma ? UCP_FEATURE_RMA : 0) | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                       .mt_workers_shared = 1};
    st = ucp_init(&up, cfg, &e->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        e->ctx = NULL;
        fail(e, IXL_ERR_BACKEND, "ucp_init (transports '%s'): %s", e->tls, ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    if ((st = ucp_dt_create_generic(&pack_ops, NULL, &e->packer)) != UCS_OK) {
        e->packer = 0;
        fail(e, IXL_ERR_BACKEND, "ucp_dt_create_generic: %s", ucs_status_string(st));
        ucx_destroy_engine(&e->base);
        return IXL_ERR_BACKEND;
    }
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    e->base.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    st = ucp_context_query(e->ctx, &ca);
    if (st == UCS_OK && (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)))
        e->base.mem_mask |= IXL_MEM_BIT(IXL_MEM_VRAM);
    else
        /* Shown by ixl-info and by a VRAM registration that finds no backend. */
        e->base.mem_why = st != UCS_OK ? "VRAM: ucp_context_query failed, so whether this UCX "
                                         "moves CUDA memory is unknown"
                                       : "VRAM: this UCX reports no CUDA memory type (built "
                                         "without CUDA transports, as Debian's UCX is)";

    ucp_address_t *addr[UCX_MAX_WORKERS] = {NULL};
    size_t addr_len[UCX_MAX_WORKERS] = {0};
    for (unsigned i = 0; i < e->nw && rc == IXL_OK; i++)
        rc = worker_create(e, i, &addr[i], &addr_len[i]);
    if (rc == IXL_OK) {
        e->info = ucx_info_encode(e->nw, (const void *const *)addr, addr_len, &e->info_len);
        rc = e->info == NULL ? IXL_ERR_NO_MEMORY
                             : remote_set_locked(e, e->name, e->info, e->info_len);
    }
    for (unsigned i = 0; i < e->nw; i++)
        if (addr[i] != NULL)
            ucp_worker_release_address(e->w[i].w, addr[i]);
    if (rc != IXL_OK) {
        ucx_destroy_engine(&e->base);
        return rc;
    }
    for (unsigned i = 0; i < e->nw; i++) {
        if ((rc = pthread_create(&e->w[i].thread, NULL, progress_main, &e->w[i])) != 0) {
            fail(e, IXL_ERR_SYSTEM, "cannot start progress thread %u: %s", i, strerror(rc));
            ucx_destroy_engine(&e->base);
            return IXL_ERR_SYSTEM;
        }
        e->w[i].thread_started = true;
        char name[16];
        snprintf(name, sizeof(name), "ixl-ucx-prog%u", i % 100u);
        pthread_setname_np(e->w[i].thread, name);
    }
    *out = &e->base;
    return IXL_OK;
}

static void ucx_destroy_engine(struct ixl_engine *base)
{
    struct ucx_engine *e = (struct ucx_engine *)base;
    if (e == NULL)
        return;
    atomic_store(&e->stop, true);
    for (unsigned i = 0; i < e->nw; i++)
        if (e->w[i].thread_started) {
            wake_now(&e->w[i]);
            pthread_join(e->w[i].thread, NULL);
        }
    uint64_t quiet = 0;
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        if (w->w == NULL)
            continue;
        pthread_mutex_lock(&w->lock);
        for (struct ucx_remote *r = e->remotes; r != NULL; r = r->next) {
            close_ep_locked(w, r);
            quiet = r->lane[i].quiet_until > quiet ? r->lane[i].quiet_until : quiet;
        }
        pthread_mutex_unlock(&w->lock);
    }
    /* The closed endpoints' teardown (both sides' tcp connections) ends before the workers go. */
    for (int k = 0; k < 100 || now_ms() < quiet; k++) {
        bool any = false;
        for (unsigned i = 0; i < e->nw; i++)
            if (e->w[i].w != NULL) {
                pthread_mutex_lock(&e->w[i].lock);
                any = progress_locked(&e->w[i], true) || any;
                pthread_mutex_unlock(&e->w[i].lock);
            }
        if (!any && k >= 100)
            sched_yield();
    }
    for (unsigned i = 0; i < e->nw; i++) {
        struct ucx_worker *w = &e->w[i];
        if (w->w != NULL)
            ucp_worker_destroy(w->w);
        while (w->sends != NULL) /* messages UCX never completed (a stopped peer) */
            send_free(w->sends);
        free(w->ops);
        if (w->wakefd >= 0)
            close(w->wakefd);
        if (w->epfd >= 0)
            close(w->epfd);
        pthread_mutex_destroy(&w->lock);
    }
    /* Requests the core abandoned (release kept answering BUSY): UCX is gone with their operations,
     * and nothing refers to them any more. */
    while (e->held != NULL) {
        struct ucx_req *q = e->held;
        e->held = q->hnext;
        free(q->notif);
        free(q);
    }
    while (e->allocs != NULL) { /* the core frees what it allocated; this is what it did not */
        struct ucx_alloc *a = e->allocs;
        e->allocs = a->next;
        ucp_mem_unmap(e->ctx, a->memh);
        free(a);
    }
    if (e->ctx != NULL)
        ucp_cleanup(e->ctx);
    if (e->packer != 0)
        ucp_dt_destroy(e->packer);
    while (e->remotes != NULL) {
        struct ucx_remote *r = e->remotes;
        e->remotes = r->next;
        free(r->name);
        free(r->info);
        free(r);
    }
    ixlp_index_free(&e->remote_idx);
    struct notif *n = e->nhead;
    while (n != NULL) {
        struct notif *next = n->next;
        free(n);
        n = next;
    }
    free(e->w);
    free(e->info);
    free(e->name);
    free(e->kt);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->nlock);
    pthread_rwlock_destroy(&e->klock);
    free(e);
}

static const struct ixl_engine_ops ucx_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = ucx_connect,
    .disconnect = ucx_disconnect,
    .get_conn_info = ucx_get_conn_info,
    .load_remote_conn_info = ucx_load_remote_conn_info,
    .register_mem = ucx_register_mem,
    .deregister_mem = ucx_deregister_mem,
    .get_public_data = ucx_get_public_data,
    .load_remote_md = ucx_load_remote_md,
    .load_local_md = ucx_load_local_md,
    .unload_md = ucx_unload_md,
    .prep_xfer = ucx_prep_xfer,
    .post_xfer = ucx_post_xfer,
    .check_xfer = ucx_check_xfer,
    .release_req = ucx_release_req,
    .get_notifs = ucx_get_notifs,
    .gen_notif = ucx_gen_notif,
    .progress = ucx_progress,
    .alloc_mem = ucx_alloc_mem,
    .free_mem = ucx_free_mem,
    .req_info = ucx_req_info,
    .wait_xfer = ucx_wait_xfer,
};

static const struct ixl_plugin_desc ucx_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "UCX",
    .version = "1.0 (built on UCP API " UCX_STR(UCP_API_MAJOR) "." UCX_STR(UCP_API_MINOR) ")",
    .caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_VRAM),
    .options = ucx_options,
    .n_options = UO_COUNT,
    .create_engine = ucx_create_engine,
    .destroy_engine = ucx_destroy_engine,
    .ops = &ucx_ops,
};

static const struct ixl_plugin_desc *ucx_entry(void)
{
    return &ucx_desc;
}

IXL_PLUGIN_EXPORT(ucx_entry)

/*
 * testmem.c - an in-memory backend that implements the whole south-bound ABI, for the core's
 * tests. Built as the dynamic plugins TEST and TESTB and as the built-in TESTSTATIC (the name
 * comes from TESTMEM_NAME).
 *
 * "Remote" agents are engines of the same plugin in the same process: a process-wide registry
 * lists live engines, and a transfer copies with memmove straight into the target engine's
 * registered memory. A target is found by agent name AND instance id (both from its connection
 * info), so a destroyed engine, or a new one under the same name, is a disconnected peer.
 *
 * VRAM is fake (addr is a host address); FILE regions can be registered and queried but not
 * transferred.
 *
 * Options (see tm_options): delay_us makes posts asynchronous (a per-engine worker thread does
 * the copies after the delay); mems narrows the memory types; fail_post makes every post fail;
 * release_busy makes release of an in-flight request answer IXL_ERR_BUSY that many times;
 * no_progress drops IXL_CAP_PROGRESS.
 *
 * Locks. g_lock guards the registry (list, reference counts). Each engine has:
 *   lock       - its connection table, its requests' states, the worker queue (cond: wakes
 *                the worker and release_req waiting for a running request);
 *   reg_lock   - its registered regions and loaded metadata; held while data is copied into or
 *                out of its regions, so deregister_mem waits for a copy in progress;
 *   notif_lock - its queue of received notifications.
 * No code path holds two of these at once, and none is held while calling the host, so there
 * is no lock order to respect (and no inversion with the core's locks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl_plugin.h>

#include "../../plugins/common/ixl_pool.h"

#ifndef TESTMEM_NAME
#define TESTMEM_NAME "TEST"
#endif

#define TM_CONN_PREFIX "testmem1:" TESTMEM_NAME ":"
#define TM_HEX_DIGITS 16
#define TM_REGION_MAGIC 0x544d5247u /* "TMRG" */
#define TM_MDREF_MAGIC 0x544d4d44u  /* "TMMD" */
#define TM_PUB_MAGIC 0x544d4431u    /* "TMD1" */
/* Public data: magic, type (u32 each), then key, instance id, addr, len (u64 each). */
#define TM_PUB_LEN (2 * 4 + 4 * 8)
#define TM_MAX_DELAY_US 600000000ull /* ten minutes */
#define TM_MAX_RELEASE_BUSY 1000000ull
#define TM_BYTES_PER_US 10000ull /* 10 GB/s */

/* The options, by index: create_engine reads init->values[TO_x]. */
enum tm_opt {
    TO_DELAY_US,
    TO_MEMS,
    TO_FAIL_POST,
    TO_RELEASE_BUSY,
    TO_NO_PROGRESS,
    TO_STAMP,
    TO_COUNT
};

static const struct ixl_option tm_options[TO_COUNT] = {
    [TO_DELAY_US] = {.name = "delay_us",
                     .default_value = "0",
                     .type = IXL_OPT_DURATION,
                     .unit = "us",
                     .min = 0,
                     .max = TM_MAX_DELAY_US,
                     .description = "how long a worker thread waits before doing a posted "
                                    "transfer; 0 = inline"},
    [TO_MEMS] = {.name = "mems",
                 .default_value = "DRAM,VRAM,FILE",
                 .type = IXL_OPT_STRING,
                 .description = "memory types the engine supports, comma separated"},
    [TO_FAIL_POST] = {.name = "fail_post",
                      .default_value = "0",
                      .type = IXL_OPT_INT,
                      .unit = "status",
                      .min = INT_MIN,
                      .max = 0,
                      .description = "if nonzero, every post_xfer fails with this (negative) "
                                     "status"},
    [TO_RELEASE_BUSY] = {.name = "release_busy",
                         .default_value = "0",
                         .type = IXL_OPT_INT,
                         .unit = "times",
                         .min = 0,
                         .max = TM_MAX_RELEASE_BUSY,
                         .description = "release of an in-flight request returns IXL_ERR_BUSY "
                                        "this many times first"},
    [TO_NO_PROGRESS] = {.name = "no_progress",
                        .default_value = "0",
                        .type = IXL_OPT_BOOL,
                        .description = "engines do not advertise the progress capability"},
    [TO_STAMP] = {.name = "stamp",
                  .default_value = "0",
                  .type = IXL_OPT_BOOL,
                  .description = "the worker writes CLOCK_MONOTONIC ns into the first 8 bytes "
                                 "of a READ's destination just before completing it (wake-up "
                                 "benchmarks)"},
};

/* ---- objects ---------------------------------------------------------------------------- */

/* A registered region; the md register_mem hands out. Immutable once created. */
struct tm_region {
    uint32_t magic;
    enum ixl_mem type;
    uint64_t key;
    uint64_t addr, len, dev;
    void *bytes; /* copy of the descriptor's bytes (FILE: "mode:path" or a label) */
    size_t bytes_len;
    unsigned char pub[TM_PUB_LEN];
    struct tm_engine *owner;
    struct tm_region *prev, *next; /* the engine's regions: unlinked in O(1) */
};

/* Target-side metadata from load_remote_md or load_local_md. */
struct tm_mdref {
    uint32_t magic;
    enum ixl_mem type;
    uint64_t key;
    uint64_t inst; /* the engine instance that registered the region */
    uint64_t addr, len;
    struct tm_mdref *prev, *next;
};

struct tm_conn {
    char name[IXL_NAME_MAX];
    uint64_t inst;
    uint64_t epoch; /* bumped by disconnect and by new conn info: in-flight requests fail */
    int connected;
};

/* One pair of a request, with what it needs of the target's metadata copied at prep. */
enum tm_req_state { TM_IDLE, TM_QUEUED, TM_RUNNING, TM_DONE };

struct tm_req {
    enum ixl_op op;
    enum ixl_mem ltype, rtype;
    char remote[IXL_NAME_MAX];
    size_t n;
    /* The core's descriptor arrays, borrowed until release_req (the ABI's promise): nothing
     * is copied per pair, so preparing a 10^5-descriptor request costs one pass. */
    const struct ixl_xfer_desc *ld, *rd;
    uint64_t total;
    void *notif; /* NULL: none */
    size_t notif_len;
    /* Guarded by the engine's lock. */
    enum tm_req_state state;
    int status;
    uint64_t epoch;             /* the connection's epoch at post */
    uint64_t due_ns;            /* CLOCK_MONOTONIC time the worker may start it */
    int canceling;              /* release_req was called while it was in flight */
    unsigned busy_left;         /* IXL_ERR_BUSY answers release_req still owes */
    int async;                  /* the last post went through the worker */
    unsigned posts;             /* post_xfer calls that got past the checks (req_info says) */
    struct tm_req *prev, *next; /* every request of the engine */
    struct tm_req *qnext;       /* the worker queue */
};

struct tm_notif {
    struct tm_notif *next;
    char *agent;
    size_t len;
    unsigned char msg[]; /* followed by the agent name */
};

struct tm_engine {
    struct ixl_engine base; /* first: the core casts */
    char name[IXL_NAME_MAX];
    uint64_t inst;
    const struct ixl_host *host;
    uint64_t delay_us;
    int stamp;
    int fail_post;
    unsigned release_busy;
    size_t notif_max;
    char conn_info[sizeof(TM_CONN_PREFIX) + TM_HEX_DIGITS + 1 + IXL_NAME_MAX];
    size_t conn_info_len;
    atomic_uint_fast64_t progress_calls;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct tm_conn *conns;
    size_t n_conns, cap_conns;
    struct tm_req *reqs;
    struct tm_req *q_head, *q_tail;
    int stop;
    int worker_started;
    pthread_t worker;

    pthread_mutex_t reg_lock;
    struct tm_region *regions;
    struct tm_mdref *mdrefs;
    /* Where regions and mdrefs come from (under reg_lock): 10^4 regions, one calloc each,
     * grew the heap a page at a time, and each page fault costs tens of microseconds on a
     * virtual machine (plugins/common/ixl_pool.h). */
    struct ixlp_pool region_pool, mdref_pool;

    pthread_mutex_t notif_lock;
    struct tm_notif *n_head, *n_tail;

    /* Guarded by g_lock. */
    struct tm_engine *g_prev, *g_next;
    unsigned refs;
};

/* ---- the process-wide registry ---------------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER; /* a reference was dropped */
static struct tm_engine *g_engines;
static uint64_t g_seed, g_counter;
static int g_seeded;

static uint64_t tm_mix(uint64_t x)
{
    /* splitmix64's finalizer: a bijection, so distinct counters give distinct ids. */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A random 64-bit id, never 0, never repeated within the process. */
static uint64_t tm_new_id(void)
{
    pthread_mutex_lock(&g_lock);
    if (!g_seeded) {
        uint64_t s = 0;
        if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            s = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
        }
        g_seed = s;
        g_seeded = 1;
    }
    uint64_t id;
    do {
        id = tm_mix(g_seed + g_counter++);
    } while (id == 0);
    pthread_mutex_unlock(&g_lock);
    return id;
}

static void tm_registry_add(struct tm_engine *e)
{
    pthread_mutex_lock(&g_lock);
    e->g_prev = NULL;
    e->g_next = g_engines;
    if (g_engines)
        g_engines->g_prev = e;
    g_engines = e;
    pthread_mutex_unlock(&g_lock);
}

/* Unlinks e (no new lookup finds it), then waits until nobody holds a reference. */
static void tm_registry_remove(struct tm_engine *e)
{
    pthread_mutex_lock(&g_lock);
    if (e->g_prev)
        e->g_prev->g_next = e->g_next;
    else
        g_engines = e->g_next;
    if (e->g_next)
        e->g_next->g_prev = e->g_prev;
    e->g_prev = e->g_next = NULL;
    while (e->refs > 0)
        pthread_cond_wait(&g_cond, &g_lock);
    pthread_mutex_unlock(&g_lock);
}

/* The live engine named name with instance inst, with a reference; NULL if gone. */
static struct tm_engine *tm_registry_get(const char *name, uint64_t inst)
{
    struct tm_engine *found = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct tm_engine *t = g_engines; t; t = t->g_next) {
        if (t->inst == inst && strcmp(t->name, name) == 0) {
            t->refs++;
            found = t;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

static void tm_registry_put(struct tm_engine *t)
{
    pthread_mutex_lock(&g_lock);
    if (--t->refs == 0)
        pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
}

/* ---- host callbacks --------------------------------------------------------------------- */

#define TM_HOST_HAS(h, field)                                                             \
    ((h) != NULL && (h)->size >= offsetof(struct ixl_host, field) + sizeof((h)->field) && \
     (h)->field != NULL)

__attribute__((format(printf, 3, 4))) static int tm_error(const struct ixl_host *h, int status,
                                                          const char *fmt, ...)
{
    if (TM_HOST_HAS(h, error)) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        h->error(h->ctx, status, "%s", buf);
    }
    return status;
}

__attribute__((format(printf, 3, 4))) static void
tm_log(const struct ixl_host *h, enum ixl_log_level level, const char *fmt, ...)
{
    if (TM_HOST_HAS(h, log)) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        h->log(h->ctx, level, "%s", buf);
    }
}

static void tm_signal(const struct ixl_host *h)
{
    if (TM_HOST_HAS(h, signal))
        h->signal(h->ctx);
}

static struct tm_engine *tm_eng(struct ixl_engine *e)
{
    return (struct tm_engine *)e;
}

/* ---- small helpers ---------------------------------------------------------------------- */

static uint64_t tm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int tm_covers(uint64_t raddr, uint64_t rlen, uint64_t addr, uint64_t len)
{
    return addr >= raddr && len <= rlen && addr - raddr <= rlen - len;
}

static int tm_name_ok(const char *s)
{
    if (s == NULL)
        return 0;
    size_t n = strnlen(s, IXL_NAME_MAX);
    return n >= 1 && n < IXL_NAME_MAX;
}

static int tm_parse_mems(const char *s, uint32_t *out)
{
    static const struct {
        const char *name;
        enum ixl_mem type;
    } names[] = {{"DRAM", IXL_MEM_DRAM}, {"VRAM", IXL_MEM_VRAM}, {"FILE", IXL_MEM_FILE}};
    uint32_t mask = 0;
    if (s == NULL)
        return -1;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *p = s;
        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        size_t i;
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strlen(names[i].name) == len && strncasecmp(p, names[i].name, len) == 0)
                break;
        if (i == sizeof(names) / sizeof(names[0]))
            return -1;
        mask |= IXL_MEM_BIT(names[i].type);
        if (end == NULL)
            break;
        s = end + 1;
    }
    if (mask == 0)
        return -1;
    *out = mask;
    return 0;
}

/* Types a transfer can touch: DRAM and (fake) VRAM. */
static int tm_check_xfer_type(struct tm_engine *e, enum ixl_mem type, const char *side)
{
    if ((unsigned)type >= IXL_MEM_COUNT || !(e->base.mem_mask & IXL_MEM_BIT(type)))
        return tm_error(e->host, IXL_ERR_BAD_MEM_TYPE, "%s: %s memory type %d not supported",
                        TESTMEM_NAME, side, (int)type);
    if (type == IXL_MEM_FILE)
        return tm_error(e->host, IXL_ERR_NOT_SUPPORTED, "%s: transfers of FILE memory",
                        TESTMEM_NAME);
    return IXL_OK;
}

/* The key and instance of target-side metadata: a tm_mdref, or (robustness) a tm_region of
 * this engine handed over directly. */
static int tm_target_md(struct tm_engine *e, const struct ixl_md *md, uint64_t *key, uint64_t *inst)
{
    uint32_t magic;
    if (md == NULL)
        return IXL_ERR_INVALID_ARG;
    memcpy(&magic, md, sizeof(magic));
    if (magic == TM_MDREF_MAGIC) {
        const struct tm_mdref *m = (const struct tm_mdref *)md;
        *key = m->key;
        *inst = m->inst;
        return IXL_OK;
    }
    if (magic == TM_REGION_MAGIC) {
        *key = ((const struct tm_region *)md)->key;
        *inst = e->inst;
        return IXL_OK;
    }
    return IXL_ERR_INVALID_ARG;
}

/* Index of remote's connection entry, or -1. Called with e->lock held. */
static ptrdiff_t tm_conn_find(struct tm_engine *e, const char *remote)
{
    for (size_t i = 0; i < e->n_conns; i++)
        if (strcmp(e->conns[i].name, remote) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* Adds or updates a connection entry. Called with e->lock held. */
static int tm_conn_set(struct tm_engine *e, const char *remote, uint64_t inst)
{
    ptrdiff_t i = tm_conn_find(e, remote);
    if (i >= 0) {
        if (e->conns[i].inst != inst) {
            e->conns[i].inst = inst;
            e->conns[i].epoch++;
            e->conns[i].connected = 0;
        }
        return IXL_OK;
    }
    if (e->n_conns == e->cap_conns) {
        size_t ncap = e->cap_conns ? e->cap_conns * 2 : 4;
        struct tm_conn *p = realloc(e->conns, ncap * sizeof(*p));
        if (p == NULL)
            return IXL_ERR_NO_MEMORY;
        e->conns = p;
        e->cap_conns = ncap;
    }
    struct tm_conn *c = &e->conns[e->n_conns++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", remote);
    c->inst = inst;
    return IXL_OK;
}

/*
 * The engine that serves remote for e, with a reference. reconnect: mark the connection up
 * (a post or gen_notif reconnects lazily). epoch (optional) receives the connection's epoch.
 */
static int tm_resolve(struct tm_engine *e, const char *remote, int reconnect, uint64_t *epoch,
                      struct tm_engine **out)
{
    pthread_mutex_lock(&e->lock);
    ptrdiff_t i = tm_conn_find(e, remote);
    if (i < 0) {
        pthread_mutex_unlock(&e->lock);
        return IXL_ERR_NOT_FOUND;
    }
    if (reconnect)
        e->conns[i].connected = 1;
    uint64_t inst = e->conns[i].inst;
    if (epoch)
        *epoch = e->conns[i].epoch;
    pthread_mutex_unlock(&e->lock);
    struct tm_engine *t = tm_registry_get(remote, inst);
    if (t == NULL)
        return IXL_ERR_REMOTE_DISCONNECT;
    *out = t;
    return IXL_OK;
}

/* Queues a notification on t; the caller wakes t's agent (tm_signal) once it holds no state a
 * waiter of that agent could need. */
static int tm_notif_push(struct tm_engine *t, const char *from, const void *msg, size_t len)
{
    size_t alen = strlen(from) + 1;
    struct tm_notif *n = malloc(sizeof(*n) + len + alen);
    if (n == NULL)
        return IXL_ERR_NO_MEMORY;
    n->next = NULL;
    n->len = len;
    if (len > 0)
        memcpy(n->msg, msg, len);
    n->agent = (char *)n->msg + len;
    memcpy(n->agent, from, alen);
    pthread_mutex_lock(&t->notif_lock);
    if (t->n_tail)
        t->n_tail->next = n;
    else
        t->n_head = n;
    t->n_tail = n;
    pthread_mutex_unlock(&t->notif_lock);
    return IXL_OK;
}

/*
 * Does the copies of r and queues its notification. check_epoch: fail if the connection was
 * dropped or replaced since the post (the worker's case). Runs without e's locks held. When a
 * notification was queued, *notified is the target, still referenced: the caller signals it
 * and drops the reference after marking r done, so that release_req, which waits for a
 * running request, never waits on a host callback.
 */
static int tm_execute(struct tm_engine *e, struct tm_req *r, int check_epoch,
                      struct tm_engine **notified)
{
    *notified = NULL;
    struct tm_engine *t;
    uint64_t epoch;
    int rc = tm_resolve(e, r->remote, 0, &epoch, &t);
    if (rc == IXL_ERR_NOT_FOUND)
        rc = IXL_ERR_REMOTE_DISCONNECT;
    if (rc != IXL_OK)
        return rc;
    if (check_epoch && epoch != r->epoch) {
        tm_registry_put(t);
        return IXL_ERR_REMOTE_DISCONNECT;
    }
    /* Check every pair against the target's registry first, so that a refused request writes
     * nothing; keep the registry locked while copying so a deregistration waits for us. */
    pthread_mutex_lock(&t->reg_lock);
    const struct ixl_md *last_md = NULL;
    const struct tm_region *g = NULL;
    uint64_t rkey = 0, rinst = 0;
    for (size_t i = 0; i < r->n && rc == IXL_OK; i++) {
        const struct ixl_xfer_desc *rd = &r->rd[i];
        if (rd->md != last_md) {
            if (tm_target_md(e, rd->md, &rkey, &rinst) != IXL_OK) {
                rc = IXL_ERR_REMOTE_REFUSED;
                break;
            }
            last_md = rd->md;
            g = NULL;
        }
        if (rinst != t->inst) {
            rc = IXL_ERR_REMOTE_DISCONNECT;
            break;
        }
        if (g == NULL || g->key != rkey) {
            g = t->regions;
            while (g && g->key != rkey)
                g = g->next;
        }
        if (g == NULL || g->type != r->rtype || !tm_covers(g->addr, g->len, rd->addr, rd->len))
            rc = IXL_ERR_REMOTE_REFUSED;
    }
    if (rc == IXL_OK) {
        for (size_t i = 0; i < r->n; i++) {
            uint64_t len = r->ld[i].len;
            if (len == 0)
                continue;
            void *l = (void *)(uintptr_t)r->ld[i].addr;
            void *rm = (void *)(uintptr_t)r->rd[i].addr;
            if (r->op == IXL_OP_READ)
                memmove(l, rm, len);
            else
                memmove(rm, l, len);
        }
    }
    pthread_mutex_unlock(&t->reg_lock);
    if (rc == IXL_OK && r->notif != NULL) {
        pthread_mutex_lock(&e->lock);
        int canceling = r->canceling;
        pthread_mutex_unlock(&e->lock);
        if (!canceling) {
            rc = tm_notif_push(t, e->name, r->notif, r->notif_len);
            if (rc == IXL_OK) {
                *notified = t;
                return rc;
            }
        }
    }
    tm_registry_put(t);
    return rc;
}

/* Wakes the agent of a target that tm_execute() notified, and drops its reference. */
static void tm_notified(struct tm_engine *t)
{
    if (t != NULL) {
        tm_signal(t->host);
        tm_registry_put(t);
    }
}

/* ---- the worker ------------------------------------------------------------------------- */

static void *tm_worker(void *arg)
{
    struct tm_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->stop) {
        struct tm_req *r = e->q_head;
        if (r == NULL) {
            pthread_cond_wait(&e->cond, &e->lock);
            continue;
        }
        uint64_t now = tm_now_ns();
        if (now < r->due_ns) {
            struct timespec ts = {.tv_sec = (time_t)(r->due_ns / 1000000000ull),
                                  .tv_nsec = (long)(r->due_ns % 1000000000ull)};
            pthread_cond_timedwait(&e->cond, &e->lock, &ts);
            continue;
        }
        e->q_head = r->qnext;
        if (e->q_head == NULL)
            e->q_tail = NULL;
        r->qnext = NULL;
        if (r->canceling) {
            r->state = TM_DONE;
            r->status = IXL_ERR_CANCELED;
            pthread_cond_broadcast(&e->cond);
            continue;
        }
        r->state = TM_RUNNING;
        pthread_mutex_unlock(&e->lock);
        struct tm_engine *t;
        int rc = tm_execute(e, r, 1, &t);
        if (e->stamp && rc == IXL_OK && r->op == IXL_OP_READ && r->n > 0 && r->ld[0].len >= 8) {
            uint64_t stamp = tm_now_ns(); /* the moment the completion becomes visible */
            memcpy((void *)(uintptr_t)r->ld[0].addr, &stamp, sizeof(stamp));
        }
        pthread_mutex_lock(&e->lock);
        r->state = TM_DONE; /* from here release_req may free r */
        r->status = r->canceling ? IXL_ERR_CANCELED : rc;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->lock);
        if (rc != IXL_OK)
            tm_log(e->host, IXL_LOG_DEBUG, "%s: an asynchronous transfer failed: %d", TESTMEM_NAME,
                   rc);
        tm_notified(t);
        tm_signal(e->host);
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* ---- create / destroy ------------------------------------------------------------------- */

static void tm_free_engine(struct tm_engine *e)
{
    while (e->reqs) {
        struct tm_req *r = e->reqs;
        e->reqs = r->next;
        free(r->notif);
        free(r);
    }
    for (struct tm_region *g = e->regions; g; g = g->next)
        free(g->bytes);
    e->regions = NULL;
    e->mdrefs = NULL;
    ixlp_pool_fini(&e->region_pool);
    ixlp_pool_fini(&e->mdref_pool);
    while (e->n_head) {
        struct tm_notif *n = e->n_head;
        e->n_head = n->next;
        free(n);
    }
    free(e->conns);
    pthread_mutex_destroy(&e->notif_lock);
    pthread_mutex_destroy(&e->reg_lock);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static int tm_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    if (init == NULL || out == NULL ||
        init->size < offsetof(struct ixl_engine_init, host) + sizeof(init->host))
        return IXL_ERR_INVALID_ARG;
    const struct ixl_host *h = init->host;
    if (!tm_name_ok(init->agent_name))
        return tm_error(h, IXL_ERR_INVALID_ARG, "%s: invalid agent name", TESTMEM_NAME);

    /* The core parsed every option by its type and range (tm_options): only mems, a list,
     * is left to check here. */
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != TO_COUNT || init->values == NULL)
        return tm_error(h, IXL_ERR_INVALID_ARG, "%s: the core passed no typed options",
                        TESTMEM_NAME);
    const struct ixl_opt_value *opt = init->values;
    uint64_t delay_us = opt[TO_DELAY_US].u, release_busy = opt[TO_RELEASE_BUSY].u;
    int fail_post = (int)opt[TO_FAIL_POST].i, no_progress = opt[TO_NO_PROGRESS].i != 0;
    uint32_t mems = 0;
    if (tm_parse_mems(opt[TO_MEMS].str, &mems) != 0)
        return tm_error(h, IXL_ERR_INVALID_ARG,
                        "%s: option mems='%s': want DRAM, VRAM or FILE, comma separated",
                        TESTMEM_NAME, opt[TO_MEMS].str);
    size_t notif_max = IXL_NOTIF_MAX_DEFAULT;
    if (init->size >= offsetof(struct ixl_engine_init, notif_max) + sizeof(init->notif_max) &&
        init->notif_max > 0)
        notif_max = init->notif_max;

    struct tm_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return tm_error(h, IXL_ERR_NO_MEMORY, "%s: out of memory", TESTMEM_NAME);
    ixlp_pool_init(&e->region_pool, h->sys, sizeof(struct tm_region));
    ixlp_pool_init(&e->mdref_pool, h->sys, sizeof(struct tm_mdref));
    int rc;
    pthread_condattr_t ca;
    if (pthread_mutex_init(&e->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_condattr_init(&ca) != 0)
        goto fail_condattr;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_cond_init(&e->cond, &ca) != 0)
        goto fail_cond;
    if (pthread_mutex_init(&e->reg_lock, NULL) != 0)
        goto fail_reg_lock;
    if (pthread_mutex_init(&e->notif_lock, NULL) != 0)
        goto fail_notif_lock;
    pthread_condattr_destroy(&ca);

    snprintf(e->name, sizeof(e->name), "%s", init->agent_name);
    e->inst = tm_new_id();
    e->host = h;
    e->delay_us = delay_us;
    e->stamp = opt[TO_STAMP].i != 0;
    e->fail_post = fail_post;
    e->release_busy = (unsigned)release_busy;
    e->notif_max = notif_max;
    atomic_init(&e->progress_calls, 0);
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF;
    if (!no_progress)
        e->base.caps |= IXL_CAP_PROGRESS;
    e->base.mem_mask = mems;
    int n = snprintf(e->conn_info, sizeof(e->conn_info), TM_CONN_PREFIX "%016" PRIx64 ":%s",
                     e->inst, e->name);
    e->conn_info_len = (size_t)n;
    /* Loopback: the agent's own name always resolves to this engine. */
    rc = tm_conn_set(e, e->name, e->inst);
    if (rc != IXL_OK)
        goto fail_self;
    if (delay_us > 0) {
        if (pthread_create(&e->worker, NULL, tm_worker, e) != 0) {
            rc = tm_error(h, IXL_ERR_SYSTEM, "%s: cannot start the worker thread", TESTMEM_NAME);
            goto fail_self;
        }
        e->worker_started = 1;
    }
    tm_registry_add(e);
    *out = &e->base;
    return IXL_OK;

fail_self:
    tm_free_engine(e); /* destroys the locks too */
    return rc == IXL_ERR_SYSTEM ? rc : tm_error(h, rc, "%s: out of memory", TESTMEM_NAME);
fail_notif_lock:
    pthread_mutex_destroy(&e->reg_lock);
fail_reg_lock:
    pthread_cond_destroy(&e->cond);
fail_cond:
    pthread_condattr_destroy(&ca);
fail_condattr:
    pthread_mutex_destroy(&e->lock);
fail_lock:
    free(e);
    return tm_error(h, IXL_ERR_SYSTEM, "%s: cannot initialise a lock", TESTMEM_NAME);
}

static void tm_destroy_engine(struct ixl_engine *base)
{
    if (base == NULL)
        return;
    struct tm_engine *e = tm_eng(base);
    /* First no new peer finds us and no peer is copying into us, then our own worker stops;
     * requests never released are freed with the rest. */
    tm_registry_remove(e);
    if (e->worker_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = 1;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->worker, NULL);
    }
    tm_free_engine(e);
}

/* ---- connections ------------------------------------------------------------------------ */

static int tm_connect(struct ixl_engine *base, const char *remote)
{
    struct tm_engine *e = tm_eng(base);
    if (!tm_name_ok(remote))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: invalid remote name", TESTMEM_NAME);
    struct tm_engine *t;
    int rc = tm_resolve(e, remote, 1, NULL, &t);
    if (rc == IXL_ERR_NOT_FOUND)
        return tm_error(e->host, rc, "%s: no connection info loaded for '%s'", TESTMEM_NAME,
                        remote);
    if (rc != IXL_OK)
        return tm_error(e->host, IXL_ERR_UNREACHABLE, "%s: agent '%s' is gone", TESTMEM_NAME,
                        remote);
    tm_registry_put(t);
    return IXL_OK;
}

static int tm_disconnect(struct ixl_engine *base, const char *remote)
{
    struct tm_engine *e = tm_eng(base);
    if (!tm_name_ok(remote))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: invalid remote name", TESTMEM_NAME);
    pthread_mutex_lock(&e->lock);
    ptrdiff_t i = tm_conn_find(e, remote);
    if (i >= 0) {
        e->conns[i].connected = 0;
        e->conns[i].epoch++;
    }
    pthread_mutex_unlock(&e->lock);
    if (i < 0)
        return tm_error(e->host, IXL_ERR_NOT_FOUND, "%s: no connection to '%s'", TESTMEM_NAME,
                        remote);
    return IXL_OK;
}

static int tm_get_conn_info(struct ixl_engine *base, const void **info, size_t *len)
{
    struct tm_engine *e = tm_eng(base);
    if (info == NULL || len == NULL)
        return IXL_ERR_INVALID_ARG;
    *info = e->conn_info;
    *len = e->conn_info_len;
    return IXL_OK;
}

static int tm_hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int tm_load_remote_conn_info(struct ixl_engine *base, const char *remote, const void *info,
                                    size_t len)
{
    struct tm_engine *e = tm_eng(base);
    if (!tm_name_ok(remote) || (info == NULL && len > 0))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: invalid remote name or info",
                        TESTMEM_NAME);
    /* "testmem1:<plugin>:<16 hex digits>:<agent>", untrusted and not NUL-terminated. */
    const unsigned char *b = info;
    size_t plen = sizeof(TM_CONN_PREFIX) - 1;
    if (len < plen + TM_HEX_DIGITS + 2 || memcmp(b, TM_CONN_PREFIX, plen) != 0)
        return tm_error(e->host, IXL_ERR_MALFORMED,
                        "%s: connection info of '%s' is not from a %s engine", TESTMEM_NAME, remote,
                        TESTMEM_NAME);
    uint64_t inst = 0;
    for (size_t i = 0; i < TM_HEX_DIGITS; i++) {
        int d = tm_hex(b[plen + i]);
        if (d < 0)
            return tm_error(e->host, IXL_ERR_MALFORMED,
                            "%s: connection info of '%s': bad instance id", TESTMEM_NAME, remote);
        inst = inst << 4 | (uint64_t)d;
    }
    const unsigned char *agent = b + plen + TM_HEX_DIGITS + 1;
    size_t alen = len - plen - TM_HEX_DIGITS - 1;
    if (b[plen + TM_HEX_DIGITS] != ':' || inst == 0 || alen >= IXL_NAME_MAX ||
        memchr(agent, '\0', alen) != NULL)
        return tm_error(e->host, IXL_ERR_MALFORMED, "%s: connection info of '%s' is malformed",
                        TESTMEM_NAME, remote);
    if (strlen(remote) != alen || memcmp(agent, remote, alen) != 0)
        return tm_error(e->host, IXL_ERR_MALFORMED,
                        "%s: connection info loaded as '%s' belongs to agent '%.*s'", TESTMEM_NAME,
                        remote, (int)alen, (const char *)agent);
    pthread_mutex_lock(&e->lock);
    int rc = tm_conn_set(e, remote, inst);
    pthread_mutex_unlock(&e->lock);
    if (rc != IXL_OK)
        return tm_error(e->host, rc, "%s: out of memory", TESTMEM_NAME);
    return IXL_OK;
}

/* ---- memory ----------------------------------------------------------------------------- */

static int tm_register_mem(struct ixl_engine *base, enum ixl_mem type,
                           const struct ixl_reg_desc *desc, struct ixl_md **out)
{
    struct tm_engine *e = tm_eng(base);
    if (desc == NULL || out == NULL)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: register_mem: NULL argument",
                        TESTMEM_NAME);
    if ((unsigned)type >= IXL_MEM_COUNT || !(e->base.mem_mask & IXL_MEM_BIT(type)))
        return tm_error(e->host, IXL_ERR_BAD_MEM_TYPE, "%s: memory type %d not supported",
                        TESTMEM_NAME, (int)type);
    if (desc->addr + desc->len < desc->addr)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: region wraps around", TESTMEM_NAME);
    if (desc->bytes == NULL && desc->bytes_len > 0)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: bytes_len without bytes", TESTMEM_NAME);
    if (type == IXL_MEM_FILE && desc->dev == IXL_DEV_NONE &&
        (desc->bytes_len == 0 || memchr(desc->bytes, ':', desc->bytes_len) == NULL))
        return tm_error(e->host, IXL_ERR_INVALID_ARG,
                        "%s: a FILE region without a descriptor needs bytes \"mode:path\"",
                        TESTMEM_NAME);
    void *bytes = NULL;
    if (desc->bytes_len > 0) {
        bytes = malloc(desc->bytes_len);
        if (bytes == NULL)
            return tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: out of memory", TESTMEM_NAME);
        memcpy(bytes, desc->bytes, desc->bytes_len);
    }
    uint64_t key = tm_new_id(); /* (takes g_lock: before reg_lock, never inside it) */
    pthread_mutex_lock(&e->reg_lock);
    struct tm_region *g = ixlp_pool_get(&e->region_pool);
    if (g == NULL) {
        int err = errno;
        pthread_mutex_unlock(&e->reg_lock);
        free(bytes);
        return tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: no memory for a region (mmap: %s)",
                        TESTMEM_NAME, strerror(err));
    }
    g->bytes = bytes;
    g->bytes_len = desc->bytes_len;
    g->magic = TM_REGION_MAGIC;
    g->type = type;
    g->key = key;
    g->addr = desc->addr;
    g->len = desc->len;
    g->dev = desc->dev;
    uint32_t magic = TM_PUB_MAGIC, t32 = (uint32_t)type;
    unsigned char *p = g->pub;
    memcpy(p, &magic, 4);
    memcpy(p + 4, &t32, 4);
    memcpy(p + 8, &g->key, 8);
    memcpy(p + 16, &e->inst, 8);
    memcpy(p + 24, &g->addr, 8);
    memcpy(p + 32, &g->len, 8);
    g->owner = e;
    g->prev = NULL;
    g->next = e->regions;
    if (e->regions)
        e->regions->prev = g;
    e->regions = g;
    pthread_mutex_unlock(&e->reg_lock);
    *out = (struct ixl_md *)g;
    return IXL_OK;
}

static int tm_deregister_mem(struct ixl_engine *base, struct ixl_md *md)
{
    struct tm_engine *e = tm_eng(base);
    struct tm_region *g = (struct tm_region *)md;
    /* Not a registration of this engine: refused (a region of another engine, or loaded
     * metadata, has another owner or magic). */
    if (g == NULL || g->magic != TM_REGION_MAGIC || g->owner != e)
        return tm_error(e->host, IXL_ERR_NOT_FOUND, "%s: deregister_mem: unknown region",
                        TESTMEM_NAME);
    pthread_mutex_lock(&e->reg_lock);
    if (g->prev)
        g->prev->next = g->next;
    else
        e->regions = g->next;
    if (g->next)
        g->next->prev = g->prev;
    g->magic = 0;
    free(g->bytes);
    ixlp_pool_put(&e->region_pool, g);
    pthread_mutex_unlock(&e->reg_lock);
    return IXL_OK;
}

static int tm_get_public_data(struct ixl_engine *base, const struct ixl_md *md, const void **data,
                              size_t *len)
{
    (void)base;
    if (md == NULL || data == NULL || len == NULL)
        return IXL_ERR_INVALID_ARG;
    const struct tm_region *g = (const struct tm_region *)md;
    *data = g->pub;
    *len = sizeof(g->pub);
    return IXL_OK;
}

static int tm_new_mdref(struct tm_engine *e, enum ixl_mem type, uint64_t key, uint64_t inst,
                        uint64_t addr, uint64_t len, struct ixl_md **out)
{
    pthread_mutex_lock(&e->reg_lock);
    struct tm_mdref *m = ixlp_pool_get(&e->mdref_pool);
    if (m == NULL) {
        int err = errno;
        pthread_mutex_unlock(&e->reg_lock);
        return tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: no memory for metadata (mmap: %s)",
                        TESTMEM_NAME, strerror(err));
    }
    m->magic = TM_MDREF_MAGIC;
    m->type = type;
    m->key = key;
    m->inst = inst;
    m->addr = addr;
    m->len = len;
    m->next = e->mdrefs;
    if (e->mdrefs)
        e->mdrefs->prev = m;
    e->mdrefs = m;
    pthread_mutex_unlock(&e->reg_lock);
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int tm_load_remote_md(struct ixl_engine *base, const char *remote, enum ixl_mem type,
                             const struct ixl_reg_desc *desc, const void *data, size_t len,
                             struct ixl_md **out)
{
    struct tm_engine *e = tm_eng(base);
    (void)desc;
    if (!tm_name_ok(remote) || out == NULL || (data == NULL && len > 0))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: load_remote_md: bad argument",
                        TESTMEM_NAME);
    if ((unsigned)type >= IXL_MEM_COUNT || !(e->base.mem_mask & IXL_MEM_BIT(type)))
        return tm_error(e->host, IXL_ERR_BAD_MEM_TYPE, "%s: memory type %d not supported",
                        TESTMEM_NAME, (int)type);
    if (len != TM_PUB_LEN)
        return tm_error(e->host, IXL_ERR_MALFORMED,
                        "%s: public data of '%s' is %zu bytes, expected %d", TESTMEM_NAME, remote,
                        len, TM_PUB_LEN);
    const unsigned char *p = data;
    uint32_t magic, t32;
    uint64_t key, inst, addr, rlen;
    memcpy(&magic, p, 4);
    memcpy(&t32, p + 4, 4);
    memcpy(&key, p + 8, 8);
    memcpy(&inst, p + 16, 8);
    memcpy(&addr, p + 24, 8);
    memcpy(&rlen, p + 32, 8);
    if (magic != TM_PUB_MAGIC || t32 != (uint32_t)type || key == 0 || inst == 0 ||
        addr + rlen < addr)
        return tm_error(e->host, IXL_ERR_MALFORMED, "%s: public data of '%s' is malformed",
                        TESTMEM_NAME, remote);
    return tm_new_mdref(e, type, key, inst, addr, rlen, out);
}

static int tm_load_local_md(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    struct tm_engine *e = tm_eng(base);
    if (md == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    const struct tm_region *g = (const struct tm_region *)md;
    if (g->magic != TM_REGION_MAGIC)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: load_local_md: not a registration",
                        TESTMEM_NAME);
    /* A separate object, so unload_md never has to tell it from a registration. */
    return tm_new_mdref(e, g->type, g->key, e->inst, g->addr, g->len, out);
}

static int tm_unload_md(struct ixl_engine *base, struct ixl_md *md)
{
    struct tm_engine *e = tm_eng(base);
    struct tm_mdref *m = (struct tm_mdref *)md;
    if (m == NULL || m->magic != TM_MDREF_MAGIC)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: unload_md: not loaded metadata",
                        TESTMEM_NAME);
    pthread_mutex_lock(&e->reg_lock);
    if (m->prev)
        m->prev->next = m->next;
    else
        e->mdrefs = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->magic = 0;
    ixlp_pool_put(&e->mdref_pool, m);
    pthread_mutex_unlock(&e->reg_lock);
    return IXL_OK;
}

/* ---- transfers -------------------------------------------------------------------------- */

/* Reads opts' notification when opts is big enough to carry one. */
static void tm_opts_notif(const struct ixl_xfer_opts *opts, const void **msg, size_t *len)
{
    *msg = NULL;
    *len = 0;
    if (opts != NULL &&
        opts->size >= offsetof(struct ixl_xfer_opts, notif_len) + sizeof(opts->notif_len) &&
        opts->notif != NULL) {
        *msg = opts->notif;
        *len = opts->notif_len;
    }
}

/* A copy of a notification; a non-NULL pointer even for an empty one. */
static void *tm_dup_notif(const void *msg, size_t len)
{
    void *c = malloc(len > 0 ? len : 1);
    if (c != NULL && len > 0)
        memcpy(c, msg, len);
    return c;
}

static int tm_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                        const struct ixl_xfer_side *remote, const char *remote_agent,
                        const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct tm_engine *e = tm_eng(base);
    if (local == NULL || remote == NULL || out == NULL || !tm_name_ok(remote_agent) ||
        (op != IXL_OP_READ && op != IXL_OP_WRITE) || (local->count > 0 && local->descs == NULL) ||
        (remote->count > 0 && remote->descs == NULL))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: prep_xfer: bad argument", TESTMEM_NAME);
    if (local->count != remote->count)
        return tm_error(e->host, IXL_ERR_MISMATCH, "%s: %zu local and %zu remote descriptors",
                        TESTMEM_NAME, local->count, remote->count);
    int rc = tm_check_xfer_type(e, local->type, "local");
    if (rc == IXL_OK)
        rc = tm_check_xfer_type(e, remote->type, "remote");
    if (rc != IXL_OK)
        return rc;
    const void *msg;
    size_t msg_len;
    tm_opts_notif(opts, &msg, &msg_len);
    if (msg != NULL && msg_len > e->notif_max)
        return tm_error(e->host, IXL_ERR_NOTIF_TOO_LARGE,
                        "%s: notification of %zu bytes, the maximum is %zu", TESTMEM_NAME, msg_len,
                        e->notif_max);

    struct tm_req *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: out of memory", TESTMEM_NAME);
    r->n = local->count;
    r->ld = local->descs;
    r->rd = remote->descs;
    const struct ixl_md *last_md = NULL; /* consecutive pairs mostly share the target region */
    for (size_t i = 0; i < r->n; i++) {
        const struct ixl_xfer_desc *ld = &local->descs[i], *rd = &remote->descs[i];
        if (ld->len != rd->len) {
            rc = tm_error(e->host, IXL_ERR_MISMATCH,
                          "%s: pair %zu: local length %" PRIu64 ", remote %" PRIu64, TESTMEM_NAME,
                          i, ld->len, rd->len);
            goto fail_req;
        }
        const struct tm_region *lg = (const struct tm_region *)ld->md;
        if (lg == NULL || lg->magic != TM_REGION_MAGIC ||
            !tm_covers(lg->addr, lg->len, ld->addr, ld->len)) {
            rc = tm_error(e->host, IXL_ERR_NOT_REGISTERED,
                          "%s: local descriptor %zu lies outside its region", TESTMEM_NAME, i);
            goto fail_req;
        }
        uint64_t key, inst;
        if (rd->md != last_md && tm_target_md(e, rd->md, &key, &inst) != IXL_OK) {
            rc = tm_error(e->host, IXL_ERR_INVALID_ARG,
                          "%s: remote descriptor %zu has no loaded metadata", TESTMEM_NAME, i);
            goto fail_req;
        }
        last_md = rd->md;
        r->total += ld->len;
    }
    if (msg != NULL) {
        r->notif = tm_dup_notif(msg, msg_len);
        if (r->notif == NULL) {
            rc = tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: out of memory", TESTMEM_NAME);
            goto fail_req;
        }
        r->notif_len = msg_len;
    }
    r->op = op;
    r->ltype = local->type;
    r->rtype = remote->type;
    snprintf(r->remote, sizeof(r->remote), "%s", remote_agent);
    r->state = TM_IDLE;
    pthread_mutex_lock(&e->lock);
    r->next = e->reqs;
    if (e->reqs)
        e->reqs->prev = r;
    e->reqs = r;
    pthread_mutex_unlock(&e->lock);
    *out = (struct ixl_req *)r;
    return IXL_OK;

fail_req:
    free(r);
    return rc;
}

static int tm_estimate_xfer_cost(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out)
{
    (void)base;
    if (req == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    const struct tm_req *r = (const struct tm_req *)req;
    uint64_t us = (r->total + TM_BYTES_PER_US - 1) / TM_BYTES_PER_US;
    out->duration_us = us;
    out->error_margin_us = (us + 9) / 10;
    out->method = IXL_COST_ANALYTICAL;
    return IXL_OK;
}

/* Records a post's outcome (e->lock not held). */
static int tm_post_done(struct tm_engine *e, struct tm_req *r, int rc)
{
    pthread_mutex_lock(&e->lock);
    r->state = TM_DONE;
    r->status = rc;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int tm_post_xfer(struct ixl_engine *base, struct ixl_req *req,
                        const struct ixl_xfer_opts *opts)
{
    struct tm_engine *e = tm_eng(base);
    struct tm_req *r = (struct tm_req *)req;
    if (r == NULL)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: post_xfer: no request", TESTMEM_NAME);
    pthread_mutex_lock(&e->lock);
    int active = r->state == TM_QUEUED || r->state == TM_RUNNING;
    int canceling = r->canceling;
    pthread_mutex_unlock(&e->lock);
    if (active)
        return tm_error(e->host, IXL_ERR_REPOST_ACTIVE, "%s: request still in flight",
                        TESTMEM_NAME);
    if (canceling)
        return tm_error(e->host, IXL_ERR_CANCELED, "%s: request was canceled", TESTMEM_NAME);
    /* A post that carries opts says what this post's notification is (NULL: none); without
     * opts the request keeps the one it has. */
    if (opts != NULL) {
        const void *msg;
        size_t msg_len;
        tm_opts_notif(opts, &msg, &msg_len);
        if (msg != NULL && msg_len > e->notif_max)
            return tm_error(e->host, IXL_ERR_NOTIF_TOO_LARGE,
                            "%s: notification of %zu bytes, the maximum is %zu", TESTMEM_NAME,
                            msg_len, e->notif_max);
        void *copy = NULL;
        if (msg != NULL && (copy = tm_dup_notif(msg, msg_len)) == NULL)
            return tm_error(e->host, IXL_ERR_NO_MEMORY, "%s: out of memory", TESTMEM_NAME);
        free(r->notif);
        r->notif = copy;
        r->notif_len = msg != NULL ? msg_len : 0;
    }
    if (e->fail_post != 0)
        return tm_post_done(e, r,
                            tm_error(e->host, e->fail_post,
                                     "%s: post_xfer failing as configured (fail_post=%d)",
                                     TESTMEM_NAME, e->fail_post));
    /* Fail early when the peer is already gone; the worker checks again when it runs. */
    struct tm_engine *t;
    uint64_t epoch;
    int rc = tm_resolve(e, r->remote, 1, &epoch, &t);
    if (rc == IXL_ERR_NOT_FOUND)
        return tm_post_done(e, r,
                            tm_error(e->host, rc, "%s: no connection info loaded for '%s'",
                                     TESTMEM_NAME, r->remote));
    if (rc != IXL_OK)
        return tm_post_done(
            e, r, tm_error(e->host, rc, "%s: agent '%s' is gone", TESTMEM_NAME, r->remote));
    tm_registry_put(t);

    if (e->delay_us == 0) {
        pthread_mutex_lock(&e->lock);
        r->state = TM_RUNNING;
        r->async = 0;
        r->posts++;
        r->epoch = epoch;
        pthread_mutex_unlock(&e->lock);
        struct tm_engine *nt;
        rc = tm_execute(e, r, 0, &nt);
        if (rc != IXL_OK)
            tm_error(e->host, rc, "%s: transfer to '%s' failed", TESTMEM_NAME, r->remote);
        tm_post_done(e, r, rc);
        tm_notified(nt);
        return rc;
    }
    pthread_mutex_lock(&e->lock);
    r->state = TM_QUEUED;
    r->status = IXL_IN_PROGRESS;
    r->async = 1;
    r->posts++;
    r->epoch = epoch;
    r->busy_left = e->release_busy;
    r->due_ns = tm_now_ns() + e->delay_us * 1000ull;
    r->qnext = NULL;
    if (e->q_tail)
        e->q_tail->qnext = r;
    else
        e->q_head = r;
    e->q_tail = r;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return IXL_IN_PROGRESS;
}

static int tm_check_xfer(struct ixl_engine *base, struct ixl_req *req)
{
    struct tm_engine *e = tm_eng(base);
    struct tm_req *r = (struct tm_req *)req;
    if (r == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_mutex_lock(&e->lock);
    int rc;
    if (r->canceling)
        rc = IXL_ERR_CANCELED;
    else if (r->state == TM_IDLE)
        rc = IXL_ERR_NOT_POSTED;
    else if (r->state == TM_DONE)
        rc = r->status;
    else
        rc = IXL_IN_PROGRESS;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int tm_release_req(struct ixl_engine *base, struct ixl_req *req)
{
    struct tm_engine *e = tm_eng(base);
    struct tm_req *r = (struct tm_req *)req;
    if (r == NULL)
        return IXL_ERR_INVALID_ARG;
    pthread_mutex_lock(&e->lock);
    int in_flight = r->state == TM_QUEUED || r->state == TM_RUNNING;
    if (in_flight)
        r->canceling = 1; /* the worker will neither copy nor notify */
    if (r->canceling && r->busy_left > 0) {
        r->busy_left--;
        pthread_mutex_unlock(&e->lock);
        tm_log(e->host, IXL_LOG_DEBUG, "%s: release of an in-flight request: busy", TESTMEM_NAME);
        return IXL_ERR_BUSY;
    }
    if (r->state == TM_QUEUED) {
        struct tm_req **pp = &e->q_head, *prev = NULL;
        while (*pp && *pp != r) {
            prev = *pp;
            pp = &(*pp)->qnext;
        }
        if (*pp) {
            *pp = r->qnext;
            if (e->q_tail == r)
                e->q_tail = prev;
        }
    }
    /* A copy in progress finishes before we return: nothing is written after IXL_OK. */
    while (r->state == TM_RUNNING)
        pthread_cond_wait(&e->cond, &e->lock);
    if (r->prev)
        r->prev->next = r->next;
    else
        e->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&e->lock);
    free(r->notif);
    free(r);
    return IXL_OK;
}

/* ---- notifications, progress ------------------------------------------------------------ */

static int tm_get_notifs(struct ixl_engine *base, ixl_notif_sink_fn sink, void *sink_ctx)
{
    struct tm_engine *e = tm_eng(base);
    if (sink == NULL)
        return IXL_ERR_INVALID_ARG;
    /* Taken off the queue first, handed over without the lock: the sink is the core's. */
    pthread_mutex_lock(&e->notif_lock);
    struct tm_notif *n = e->n_head;
    e->n_head = e->n_tail = NULL;
    pthread_mutex_unlock(&e->notif_lock);
    while (n) {
        struct tm_notif *next = n->next;
        sink(sink_ctx, n->agent, n->msg, n->len);
        free(n);
        n = next;
    }
    return IXL_OK;
}

static int tm_gen_notif(struct ixl_engine *base, const char *remote, const void *msg, size_t len)
{
    struct tm_engine *e = tm_eng(base);
    if (!tm_name_ok(remote) || (msg == NULL && len > 0))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: gen_notif: bad argument", TESTMEM_NAME);
    if (len > e->notif_max)
        return tm_error(e->host, IXL_ERR_NOTIF_TOO_LARGE,
                        "%s: notification of %zu bytes, the maximum is %zu", TESTMEM_NAME, len,
                        e->notif_max);
    struct tm_engine *t;
    int rc = tm_resolve(e, remote, 1, NULL, &t);
    if (rc == IXL_ERR_NOT_FOUND)
        return tm_error(e->host, rc, "%s: no connection info loaded for '%s'", TESTMEM_NAME,
                        remote);
    if (rc != IXL_OK)
        return tm_error(e->host, rc, "%s: agent '%s' is gone", TESTMEM_NAME, remote);
    rc = tm_notif_push(t, e->name, msg, len);
    if (rc == IXL_OK)
        tm_signal(t->host);
    tm_registry_put(t);
    if (rc != IXL_OK)
        return tm_error(e->host, rc, "%s: out of memory", TESTMEM_NAME);
    return IXL_OK;
}

static int tm_progress(struct ixl_engine *base)
{
    struct tm_engine *e = tm_eng(base);
    atomic_fetch_add_explicit(&e->progress_calls, 1, memory_order_relaxed);
    return IXL_OK;
}

/* ---- optional methods ------------------------------------------------------------------- */

/* The path of a FILE descriptor's "mode:path" bytes, NUL-terminated into buf. */
static int tm_file_path(const struct ixl_reg_desc *d, char *buf, size_t cap)
{
    if (d->bytes == NULL || d->bytes_len == 0)
        return -1;
    const char *colon = memchr(d->bytes, ':', d->bytes_len);
    if (colon == NULL)
        return -1;
    size_t off = (size_t)(colon - (const char *)d->bytes) + 1;
    size_t n = d->bytes_len - off;
    if (n == 0 || n >= cap || memchr(colon + 1, '\0', n) != NULL)
        return -1;
    memcpy(buf, colon + 1, n);
    buf[n] = '\0';
    return 0;
}

static int tm_query_mem(struct ixl_engine *base, enum ixl_mem type,
                        const struct ixl_reg_desc *descs, size_t n, struct ixl_mem_query *out)
{
    struct tm_engine *e = tm_eng(base);
    if (n > 0 && (descs == NULL || out == NULL))
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: query_mem: bad argument", TESTMEM_NAME);
    if ((unsigned)type >= IXL_MEM_COUNT || !(e->base.mem_mask & IXL_MEM_BIT(type)))
        return tm_error(e->host, IXL_ERR_BAD_MEM_TYPE, "%s: memory type %d not supported",
                        TESTMEM_NAME, (int)type);
    char path[PATH_MAX];
    if (type == IXL_MEM_FILE) {
        for (size_t i = 0; i < n; i++) {
            int bad = descs[i].dev == IXL_DEV_NONE
                          ? tm_file_path(&descs[i], path, sizeof(path)) != 0
                          : descs[i].dev > (uint64_t)INT_MAX;
            if (bad)
                return tm_error(e->host, IXL_ERR_INVALID_ARG,
                                "%s: FILE descriptor %zu: needs an fd or bytes \"mode:path\"",
                                TESTMEM_NAME, i);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (type != IXL_MEM_FILE) {
            out[i].exists = true;
            out[i].size = descs[i].len;
            continue;
        }
        struct stat st;
        int rc;
        if (descs[i].dev == IXL_DEV_NONE) {
            tm_file_path(&descs[i], path, sizeof(path));
            rc = stat(path, &st);
        } else {
            rc = fstat((int)descs[i].dev, &st);
        }
        out[i].exists = rc == 0;
        out[i].size = rc == 0 ? (uint64_t)st.st_size : 0;
    }
    return IXL_OK;
}

static int tm_alloc_mem(struct ixl_engine *base, enum ixl_mem type, size_t len, void **out)
{
    struct tm_engine *e = tm_eng(base);
    if (len == 0 || out == NULL)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: alloc_mem: bad argument", TESTMEM_NAME);
    if ((type != IXL_MEM_DRAM && type != IXL_MEM_VRAM) || !(e->base.mem_mask & IXL_MEM_BIT(type)))
        return tm_error(e->host, IXL_ERR_BAD_MEM_TYPE, "%s: cannot allocate memory type %d",
                        TESTMEM_NAME, (int)type);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        return tm_error(e->host, err == ENOMEM ? IXL_ERR_NO_MEMORY : IXL_ERR_SYSTEM,
                        "%s: mmap of %zu bytes: %s", TESTMEM_NAME, len, strerror(err));
    }
    *out = p;
    return IXL_OK;
}

static int tm_free_mem(struct ixl_engine *base, void *addr, size_t len)
{
    struct tm_engine *e = tm_eng(base);
    if (addr == NULL || len == 0)
        return tm_error(e->host, IXL_ERR_INVALID_ARG, "%s: free_mem: bad argument", TESTMEM_NAME);
    if (munmap(addr, len) != 0) {
        int err = errno;
        return tm_error(e->host, IXL_ERR_SYSTEM, "%s: munmap: %s", TESTMEM_NAME, strerror(err));
    }
    return IXL_OK;
}

static int tm_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    struct tm_engine *e = tm_eng(base);
    if (req == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    struct tm_req *r = (struct tm_req *)req;
    pthread_mutex_lock(&e->lock);
    int async = r->state == TM_IDLE ? e->delay_us > 0 : r->async;
    unsigned posts = r->posts;
    pthread_mutex_unlock(&e->lock);
    /* With the post count: a caller sees which post the path it was given is of. */
    snprintf(out->path, sizeof(out->path), "%s #%u", async ? "memcpy-async" : "memcpy", posts);
    return IXL_OK;
}

/* ---- the descriptor --------------------------------------------------------------------- */

static const struct ixl_engine_ops tm_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = tm_connect,
    .disconnect = tm_disconnect,
    .get_conn_info = tm_get_conn_info,
    .load_remote_conn_info = tm_load_remote_conn_info,
    .register_mem = tm_register_mem,
    .deregister_mem = tm_deregister_mem,
    .get_public_data = tm_get_public_data,
    .load_remote_md = tm_load_remote_md,
    .load_local_md = tm_load_local_md,
    .unload_md = tm_unload_md,
    .prep_xfer = tm_prep_xfer,
    .estimate_xfer_cost = tm_estimate_xfer_cost,
    .post_xfer = tm_post_xfer,
    .check_xfer = tm_check_xfer,
    .release_req = tm_release_req,
    .get_notifs = tm_get_notifs,
    .gen_notif = tm_gen_notif,
    .progress = tm_progress,
    .query_mem = tm_query_mem,
    .alloc_mem = tm_alloc_mem,
    .free_mem = tm_free_mem,
    .req_info = tm_req_info,
};

static const struct ixl_plugin_desc tm_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = TESTMEM_NAME,
    .version = "1.0",
    .caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_VRAM) | IXL_MEM_BIT(IXL_MEM_FILE),
    .options = tm_options,
    .n_options = TO_COUNT,
    .create_engine = tm_create_engine,
    .destroy_engine = tm_destroy_engine,
    .ops = &tm_ops,
};

static const struct ixl_plugin_desc *tm_entry(void)
{
    return &tm_desc;
}

IXL_PLUGIN_EXPORT(tm_entry)

/* NET requests: path choice, prep/post/check/release, and the same-node and loopback copies
 * on worker threads. TCP frames go to the peer's queue (net_loop.c); the request table and
 * completion are net_req.c's. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net.h"

/* errno of the last failed poll of a pidfd on this thread (0: none): such a peer is taken as
 * exited, since a recycled pid must never be written to, and the text says why. */
static _Thread_local int alive_err;

#define INLINE_BYTES (1024u * 1024u) /* same-node copies this small run in post itself */
#define SPLIT_BYTES (4u << 20)       /* copies this large are shared among the workers */
#define COPY_STEP ((uint64_t)1 << 30)

static const char *path_name(enum net_path p)
{
    switch (p) {
    case NET_PATH_SHM:
        return "shm";
    case NET_PATH_CMA:
        return "cma";
    case NET_PATH_TCP:
        return "tcp";
    case NET_PATH_LOCAL:
        return "local";
    case NET_PATH_AUTO:
        break;
    }
    return "auto";
}

/* ---- the copy workers' queue ------------------------------------------------------------ */

static void work_push(struct net_engine *e, struct net_item it)
{
    pthread_mutex_lock(&e->work_lock);
    if (e->work_len == e->work_cap) {
        size_t cap = e->work_cap ? e->work_cap * 2 : 64;
        struct net_item *w = net_sys()->malloc(cap * sizeof(*w));
        if (w == NULL) {
            pthread_mutex_unlock(&e->work_lock);
            return; /* the request stays running; its release still works */
        }
        for (size_t i = 0; i < e->work_len; i++)
            w[i] = e->work[(e->work_head + i) % e->work_cap];
        free(e->work);
        e->work = w;
        e->work_cap = cap;
        e->work_head = 0;
    }
    e->work[(e->work_head + e->work_len++) % e->work_cap] = it;
    pthread_cond_signal(&e->work_cond);
    pthread_mutex_unlock(&e->work_lock);
}

/* ---- same-node copies ---------------------------------------------------------------------- */

static int net_peer_same(const struct net_req *r);

static int is_canceled(struct net_engine *e, struct net_req *r)
{
    pthread_mutex_lock(&e->reqs_lock);
    int c = r->canceled;
    pthread_mutex_unlock(&e->reqs_lock);
    return c;
}

/* The target address of descriptor i in this process: the mapping (shm) or the address
 * itself (loopback). */
static char *target_ptr(const struct net_req *r, size_t i)
{
    const struct net_rmd *m = (const struct net_rmd *)r->rd[i].md;
    if (r->path == NET_PATH_LOCAL)
        return (char *)(uintptr_t)r->rd[i].addr;
    return (char *)m->map + m->map_off + (r->rd[i].addr - m->addr);
}

#if defined(__x86_64__)
#include <emmintrin.h>

#define NT_PAGE 4096u

/* Copies with non-temporal stores, four pages at a time, interleaved (the idea of glibc's
 * large-copy loop): for requests much larger than the cache the destination is not worth
 * caching, and streaming stores skip the read for ownership. memcpy streams only single calls
 * past a threshold derived from the cache size (190 MiB on a small VM), so a request of
 * many 32 KiB blocks or 16 MiB descriptors would never stream. Callers end with copy_fence(). */
static void copy_nt(char *d, const char *s, size_t n)
{
    while (n > 0 && ((uintptr_t)d & 63)) {
        *d++ = *s++;
        n--;
    }
    for (; n >= 4 * NT_PAGE; n -= 4 * NT_PAGE, d += 4 * NT_PAGE, s += 4 * NT_PAGE) {
        for (size_t off = 0; off < NT_PAGE; off += 64) {
            for (size_t p = 0; p < 4; p++) {
                const char *sp = s + p * NT_PAGE + off;
                char *dp = d + p * NT_PAGE + off;
                __builtin_prefetch(sp + 256);
                __m128i a = _mm_loadu_si128((const __m128i *)(const void *)sp);
                __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(sp + 16));
                __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(sp + 32));
                __m128i f = _mm_loadu_si128((const __m128i *)(const void *)(sp + 48));
                _mm_stream_si128((__m128i *)(void *)dp, a);
                _mm_stream_si128((__m128i *)(void *)(dp + 16), b);
                _mm_stream_si128((__m128i *)(void *)(dp + 32), c);
                _mm_stream_si128((__m128i *)(void *)(dp + 48), f);
            }
        }
    }
    memcpy(d, s, n);
}

static void copy_fence(void)
{
    _mm_sfence();
}
#define HAVE_COPY_NT 1
#else
#define HAVE_COPY_NT 0
static void copy_nt(char *d, const char *s, size_t n)
{
    memmove(d, s, n);
}

static void copy_fence(void)
{
}
#endif

/* Requests at least this large stream their stores: a few times a server's last-level cache,
 * where streaming makes many descriptors as fast as one large memcpy (README.md, Paths). */
#define NT_BYTES ((uint64_t)64 << 20)

/* Copies bytes [from, to) of the request (its descriptors laid end to end). in_post: on the
 * posting thread, inside post_xfer, right after post checked the peer alive: nothing can cancel
 * the request meanwhile (the core never runs release_req during post_xfer), so neither is asked
 * again before the first batch (a request of up to 64 ranges makes one system call, no lock). */
static int copy_range(struct net_engine *e, struct net_req *r, uint64_t from, uint64_t to,
                      bool in_post)
{
    int stream = HAVE_COPY_NT && r->path != NET_PATH_CMA && r->bytes >= NT_BYTES;
    uint64_t pos = 0;
    struct iovec liov[64], riov[64];
    int n_iov = 0;
    for (size_t i = 0; i < r->n && pos < to; i++) {
        uint64_t len = r->ld[i].len;
        uint64_t a = pos > from ? pos : from, b = pos + len < to ? pos + len : to;
        pos += len;
        if (a >= b)
            continue;
        uint64_t off = a - (pos - len), n = b - a;
        char *l = (char *)(uintptr_t)r->ld[i].addr + off;
        if (r->path == NET_PATH_CMA) {
            liov[n_iov] = (struct iovec){l, (size_t)n};
            riov[n_iov] = (struct iovec){(void *)(uintptr_t)(r->rd[i].addr + off), (size_t)n};
            if (++n_iov < 64 && i + 1 < r->n && pos < to)
                continue;
        } else {
            char *t = target_ptr(r, i) + off;
            /* Large copies in 1 GiB steps, so a release waits at most one step (~0.1 s). One
             * call per large range lets memcpy choose non-temporal stores for sizes past the
             * cache (smaller steps are markedly slower: README.md, Paths). */
            for (uint64_t done = 0; done < n;) {
                size_t step = (size_t)(n - done < COPY_STEP ? n - done : COPY_STEP);
                char *dst = r->op == IXL_OP_WRITE ? t + done : l + done;
                const char *src = r->op == IXL_OP_WRITE ? l + done : t + done;
                /* Copies that may overlap (loopback within one buffer) keep memmove. */
                if (stream && (dst + step <= src || src + step <= dst))
                    copy_nt(dst, src, step);
                else
                    memmove(dst, src, step);
                done += step;
                if (done < n && !in_post && is_canceled(e, r))
                    return IXL_ERR_CANCELED;
            }
            continue;
        }
        /* Cross-memory attach: one system call per batch, continued after partial copies. */
        if (!in_post && !net_peer_same(r))
            return net_error(r->e, IXL_ERR_REMOTE_DISCONNECT,
                             "NET: '%s' was restarted, unloaded or exited%s%s", r->peer->name,
                             alive_err ? " (poll of its pidfd: " : "",
                             alive_err ? strerror(alive_err) : "");
        int k = 0;
        while (k < n_iov) {
            ssize_t w = r->op == IXL_OP_WRITE
                            ? net_sys()->process_vm_writev((pid_t)r->pid, &liov[k],
                                                           (unsigned long)(n_iov - k), &riov[k],
                                                           (unsigned long)(n_iov - k), 0)
                            : net_sys()->process_vm_readv((pid_t)r->pid, &liov[k],
                                                          (unsigned long)(n_iov - k), &riov[k],
                                                          (unsigned long)(n_iov - k), 0);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                int err = errno;
                return net_error(r->e,
                                 err == ESRCH ? IXL_ERR_REMOTE_DISCONNECT : IXL_ERR_REMOTE_REFUSED,
                                 "NET: %s into '%s' (pid %u): %s",
                                 r->op == IXL_OP_WRITE ? "process_vm_writev" : "process_vm_readv",
                                 r->peer->name, r->pid, strerror(err));
            }
            if (w == 0)
                return IXL_ERR_REMOTE_REFUSED;
            size_t left = (size_t)w;
            while (k < n_iov && left >= liov[k].iov_len) {
                left -= liov[k].iov_len;
                k++;
            }
            if (k < n_iov && left > 0) {
                liov[k].iov_base = (char *)liov[k].iov_base + left;
                liov[k].iov_len -= left;
                riov[k].iov_base = (char *)riov[k].iov_base + left;
                riov[k].iov_len -= left;
            }
        }
        n_iov = 0;
        in_post = false; /* later batches check again (a long request, a peer that ends) */
        if (is_canceled(e, r))
            return IXL_ERR_CANCELED;
    }
    if (stream)
        copy_fence(); /* streamed stores land before the request is declared done */
    return IXL_OK;
}

static uint64_t total_bytes(const struct net_req *r)
{
    uint64_t t = 0;
    for (size_t i = 0; i < r->n; i++)
        t += r->ld[i].len;
    return t;
}

/* A device request whose host side is large: its copies are enqueued here, on a copy worker,
 * since the driver's copy from or to pageable host memory may return only once it is done
 * (ixl_xfer_post never blocks on a large copy). A request released meanwhile is not started. */
static void do_devpost(struct net_engine *e, const struct net_item *it)
{
    struct net_req *r = net_req_get_busy(e, it->serial);
    if (r == NULL)
        return;
    char why[NET_WHY];
    int rc = net_dev_post(e, r, it->serial, why, sizeof(why)); /* consumes busy */
    if (rc != IXL_IN_PROGRESS)
        net_req_part_done(e, it->serial, rc, why);
}

static void do_copy(struct net_engine *e, const struct net_item *it)
{
    struct net_req *r = net_req_get_busy(e, it->serial);
    if (r == NULL)
        return;
    uint64_t total = total_bytes(r);
    uint32_t parts = (uint32_t)r->n_chunks; /* for copies: the number of parts */
    uint64_t from = total / parts * it->chunk;
    uint64_t to = it->chunk + 1 == parts ? total : total / parts * (it->chunk + 1);
    int rc = copy_range(e, r, from, to, false);
    struct net_peer *p = r->peer;
    net_req_unbusy(e, r);
    if (net_req_part_done(e, it->serial, rc, NULL) == 1)
        net_peer_submit_notif(p, it->serial);
}

static void *worker_main(void *arg)
{
    struct net_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->work_lock);
        while (e->work_len == 0 && !atomic_load(&e->stopping))
            pthread_cond_wait(&e->work_cond, &e->work_lock);
        if (e->work_len == 0) {
            pthread_mutex_unlock(&e->work_lock);
            break;
        }
        struct net_item it = e->work[e->work_head];
        e->work_head = (e->work_head + 1) % e->work_cap;
        e->work_len--;
        pthread_mutex_unlock(&e->work_lock);
        if (it.kind == NI_DEVPOST)
            do_devpost(e, &it);
        else
            do_copy(e, &it);
    }
    return NULL;
}

int net_workers_start(struct net_engine *e)
{
    for (int i = 0; i < e->copy_threads; i++) {
        int te = net_sys()->pthread_create(&e->workers[i], NULL, worker_main, e);
        if (te != 0)
            return net_error(e, IXL_ERR_SYSTEM,
                             "NET: cannot start its copy threads: pthread_create: %s",
                             strerror(te));
        char name[16];
        snprintf(name, sizeof(name), "ixl-net-copy%d", i % 100);
        pthread_setname_np(e->workers[i], name);
        e->n_workers++;
    }
    return IXL_OK;
}

void net_workers_stop(struct net_engine *e)
{
    pthread_mutex_lock(&e->work_lock);
    pthread_cond_broadcast(&e->work_cond);
    pthread_mutex_unlock(&e->work_lock);
    for (int i = 0; i < e->n_workers; i++)
        pthread_join(e->workers[i], NULL);
    e->n_workers = 0;
}

/* ---- path choice ----------------------------------------------------------------------------- */

/* The request's peer is still the process it was posted to: same instance (a restarted peer
 * reuses the name, maybe even the pid) and alive. */
static int net_peer_same(const struct net_req *r)
{
    struct net_peer *p = r->peer;
    pthread_mutex_lock(&p->lock);
    int same = p->instance == r->instance && p->loaded;
    pthread_mutex_unlock(&p->lock);
    return same && net_peer_alive(p);
}

/* Alive from what was read under p->lock: the life page's state (-1: none) or else a poll of
 * the pidfd (-1: none). */
static int alive_from(int life, int fd)
{
    alive_err = 0;
    if (life >= 0)
        return life;
    if (fd < 0)
        return 1; /* no pidfd (old kernel): the connection check stands alone */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n = net_sys()->poll(&pfd, 1, 0);
    if (n < 0)
        alive_err = errno;
    return n == 0;
}

int net_peer_alive(struct net_peer *p)
{
    pthread_mutex_lock(&p->lock);
    int fd = p->pidfd;
    /* The life page answers without a system call; read under the lock (a reload unmaps it). */
    int life = p->life != NULL ? net_local_life_state(p->life) : -1;
    pthread_mutex_unlock(&p->lock);
    return alive_from(life, fd);
}

/* At post: records the peer's instance in r and says whether it is loaded and (same-node
 * paths) alive, from one consistent reading of its post view (no lock); *pid: its process, for
 * a message. 1 fine, 0 not loaded, -1 gone. */
static int peer_at_post(struct net_req *r, uint32_t *pid)
{
    struct net_peer *p = r->peer;
    bool same = r->path == NET_PATH_CMA || r->path == NET_PATH_SHM;
    /* The post view, without p->lock (struct net_peer): read again when a writer was at it,
     * including while the pidfd was polled (it may have been closed and its number reused). */
    for (unsigned spins = 0;; spins++) {
        uint32_t s = atomic_load_explicit(&p->pv_seq, memory_order_acquire);
        if (s & 1u) {
            if (spins >= 64)
                sched_yield();
            continue;
        }
        uint64_t instance = atomic_load_explicit(&p->pv_instance, memory_order_acquire);
        *pid = atomic_load_explicit(&p->pv_pid, memory_order_acquire);
        int loaded = atomic_load_explicit(&p->pv_loaded, memory_order_acquire);
        int fd = atomic_load_explicit(&p->pv_pidfd, memory_order_acquire);
        int has_life = atomic_load_explicit(&p->pv_life, memory_order_acquire);
        int alive = 1;
        if (loaded && same)
            alive = alive_from(has_life ? net_local_life_state(p->life_at) : -1, fd);
        if (atomic_load_explicit(&p->pv_seq, memory_order_seq_cst) != s)
            continue;
        r->instance = instance;
        if (!loaded)
            return 0;
        return alive ? 1 : -1;
    }
}

static int build_chunks(struct net_engine *e, struct net_req *r)
{
    /* Frames to or from VRAM fit a staging slot at both ends (net_stage.c). */
    uint64_t step = r->stage && e->chunk > NET_STAGE_FRAME ? NET_STAGE_FRAME : e->chunk;
    uint64_t count = 0; /* (a division only for a descriptor longer than a frame, or empty) */
    for (size_t i = 0; i < r->n; i++)
        count += r->ld[i].len - 1 < step ? 1 : (r->ld[i].len + step - 1) / step;
    if (count > UINT32_MAX)
        return net_error(e, IXL_ERR_TOO_LARGE, "NET: request of %" PRIu64 " frames", count);
    free(r->chunks);
    free(r->answered);
    r->chunks = net_sys()->malloc((count ? count : 1) * sizeof(*r->chunks));
    r->answered = net_sys()->calloc(count ? count : 1, 1);
    if (r->chunks == NULL || r->answered == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    uint32_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct net_rmd *m = (const struct net_rmd *)r->rd[i].md;
        const struct net_region *lg = (const struct net_region *)r->ld[i].md;
        int dev = r->stage_local ? lg->dev : -1;
        if (r->ld[i].len - 1 < step) { /* one frame */
            r->chunks[k++] =
                (struct net_chunk){r->ld[i].addr, r->rd[i].addr, r->ld[i].len, m->key, NULL, dev};
            continue;
        }
        for (uint64_t off = 0; off < r->ld[i].len; off += step) {
            uint64_t len = r->ld[i].len - off < step ? r->ld[i].len - off : step;
            r->chunks[k++] = (struct net_chunk){
                r->ld[i].addr + off, r->rd[i].addr + off, len, m->key, NULL, dev};
        }
    }
    r->n_chunks = k;
    return IXL_OK;
}

/* A request within the agent with VRAM on a side: the GPU and stream (direction) that carry
 * it, from its first descriptor (copies use unified addressing, so the other descriptors may
 * lie on other GPUs). The device copies run on that GPU's stream for the direction (net_dev.c). */
static int dev_route(struct net_engine *e, struct net_req *r, bool lv, bool rv)
{
    const struct net_region *lg = (const struct net_region *)r->ld[0].md;
    const struct net_rmd *rm = (const struct net_rmd *)r->rd[0].md;
    if (lg == NULL || lg->magic != NET_REGION_MAGIC || lg->vram != lv || rm->local == NULL ||
        rm->vram != rv)
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "NET: descriptor 0's metadata does not match the request's memory types");
    bool src_dev = r->op == IXL_OP_WRITE ? lv : rv, dst_dev = r->op == IXL_OP_WRITE ? rv : lv;
    r->dev = true;
    r->dev_ord = lv ? lg->dev : rm->dev;
    r->dev_dir = src_dev && dst_dev ? NET_DIR_D2D : src_dev ? NET_DIR_D2H : NET_DIR_H2D;
    /* The device layer's copy kernel may take it when every region lies on that GPU (memory
     * of another GPU would need peer access the layer does not enable). */
    r->dev_same = r->dev_dir == NET_DIR_D2D;
    for (size_t i = 0; i < r->n && r->dev_same; i++) {
        const struct net_region *l = (const struct net_region *)r->ld[i].md;
        const struct net_rmd *m = (const struct net_rmd *)r->rd[i].md;
        r->dev_same = l != NULL && m != NULL && l->magic == NET_REGION_MAGIC && l->vram &&
                      m->vram && l->dev == r->dev_ord && (int)m->dev == r->dev_ord;
    }
    return IXL_OK;
}

/* The pass over the targets every path but CUDA IPC needs first (net_ipc_route checks the same
 * in its own pass): each descriptor's target metadata, the request's bytes, whether every
 * target descriptor lies inside its region, all of one peer (the same-node paths' condition),
 * else the first that does not (*outside; SIZE_MAX when all do). */
static int scan_targets(struct net_engine *e, struct net_req *r, const struct net_peer **m_peer,
                        size_t *outside)
{
    *m_peer = NULL;
    *outside = SIZE_MAX;
    r->bytes = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct net_rmd *m = (const struct net_rmd *)r->rd[i].md;
        if (m == NULL || m->magic != NET_RMD_MAGIC)
            return net_error(e, IXL_ERR_INVALID_ARG, "NET: descriptor %zu has no target metadata",
                             i);
        r->bytes += r->ld[i].len;
        if (i == 0)
            *m_peer = m->peer;
        if (*outside == SIZE_MAX &&
            (m->peer != *m_peer || r->rd[i].addr < m->addr || r->rd[i].len > m->len ||
             r->rd[i].addr - m->addr > m->len - r->rd[i].len))
            *outside = i;
    }
    return IXL_OK;
}

int net_prep_xfer(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                  const struct ixl_xfer_side *remote, const char *remote_agent,
                  const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct net_engine *e = (struct net_engine *)base;
    bool lv = local->type == IXL_MEM_VRAM, rv = remote->type == IXL_MEM_VRAM;
    if ((local->type != IXL_MEM_DRAM && !lv) || (remote->type != IXL_MEM_DRAM && !rv))
        return net_error(e, IXL_ERR_BAD_MEM_TYPE, "NET moves DRAM and VRAM only");
    if ((lv || rv) && e->dev == NULL)
        return net_error(e, IXL_ERR_BAD_MEM_TYPE, "NET cannot move VRAM here: %s", e->mem_why);
    /* A device pointer never goes to memmove, process_vm_*, sendmsg or a mapping: VRAM moves
     * within the agent on the device's copy engines; between agents through CUDA IPC on one
     * node (net_ipc.c), else through pinned staging slots over TCP (net_stage.c). */
    if ((lv || rv) && strcmp(remote_agent, e->name) != 0 && e->force_path == NET_PATH_CMA)
        return net_error(e, IXL_ERR_NOT_SUPPORTED,
                         "NET: path=cma is forced, and VRAM between agents (%s VRAM, '%s' -> "
                         "'%s') moves through CUDA IPC (path auto or shm) or over TCP through "
                         "pinned staging (path auto or tcp)",
                         lv && rv ? "both sides"
                         : lv     ? "local side"
                                  : "remote side",
                         e->name, remote_agent);
    struct net_req *r = net_sys()->calloc(1, sizeof(*r));
    if (r == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    r->e = e;
    r->op = op;
    r->ld = local->descs;
    r->rd = remote->descs;
    r->n = local->count;
    const struct net_peer *m_peer = NULL;
    size_t outside = SIZE_MAX;
    int rc = IXL_OK;
    bool to_self = strcmp(remote_agent, e->name) == 0;
    /* VRAM to another agent takes CUDA IPC first, whose pass checks the targets itself: the
     * request's descriptors are read once there (a 32,768-descriptor KV READ: 2 MiB of them). */
    if ((to_self || !(lv || rv)) && (rc = scan_targets(e, r, &m_peer, &outside)) != IXL_OK) {
        free(r);
        return rc;
    }
    if (to_self) {
        r->path = NET_PATH_LOCAL;
        if (lv || rv)
            rc = dev_route(e, r, lv, rv);
    } else {
        pthread_mutex_lock(&e->lock);
        struct net_peer *p = net_peer_find(e, remote_agent);
        pthread_mutex_unlock(&e->lock);
        if (p == NULL || !p->loaded) {
            free(r);
            return net_error(e, IXL_ERR_NOT_FOUND, "NET has no connection info for '%s'",
                             remote_agent);
        }
        r->peer = p;
        if (lv || rv) {
            /* VRAM between agents: CUDA IPC when the verified same-node channel grants it
             * (net_ipc.c); where it cannot (another node, same-node paths off, a DRAM target
             * NET did not allocate, VMM memory without an exportable handle) and no path is
             * forced, staged through pinned slots over TCP (net_stage.c). Refusals of a claim
             * (a stale or forged region) are errors, never a fallback. */
            rc = IXL_ERR_NOT_SUPPORTED;
            if (e->force_path != NET_PATH_TCP)
                rc = net_ipc_route(e, r, p, lv, rv);
            if (rc == IXL_ERR_NOT_SUPPORTED && e->force_path != NET_PATH_SHM) {
                net_ipc_req_free(r);
                r->path = NET_PATH_TCP;
                rc = scan_targets(e, r, &m_peer, &outside);
                if (rc == IXL_OK)
                    rc = net_stage_prep(e, r, lv, rv);
                if (rc == IXL_OK)
                    rc = build_chunks(e, r);
            }
            goto chosen;
        }
        /* Same-node paths only to a peer the same-node channel verified (net_local.c): the
         * kernel says who answers on its socket, shm maps only memfds it passed, cma writes
         * only regions it confirmed after a challenge proved its pid. Each is asked once per
         * peer instance or region; a refusal is logged and the request goes over TCP. */
        pthread_mutex_lock(&p->lock);
        int local_ok = p->peer_allows_local;
        pthread_mutex_unlock(&p->lock);
        int shm_ok = 0, cma_ok = 0;
        char why[256] = "the peer switched its same-node paths off";
        if (local_ok && r->n && (m_peer != p || outside != SIZE_MAX)) {
            snprintf(why, sizeof(why), "descriptor %zu lies outside its region",
                     m_peer != p ? (size_t)0 : outside);
            local_ok = 0;
        }
        if (local_ok && (e->force_path == NET_PATH_AUTO || e->force_path == NET_PATH_SHM)) {
            shm_ok = 1;
            const struct ixl_md *last = NULL; /* runs of one region are asked once */
            for (size_t i = 0; i < r->n && shm_ok; i++) {
                if (r->rd[i].md == last)
                    continue;
                last = r->rd[i].md;
                shm_ok = net_rmd_map((struct net_rmd *)r->rd[i].md, why, sizeof(why)) != NULL;
            }
        }
        if (local_ok && !shm_ok &&
            (e->force_path == NET_PATH_AUTO || e->force_path == NET_PATH_CMA)) {
            struct net_rmd *ms[64];
            cma_ok = 1;
            for (size_t i = 0; i < r->n && cma_ok; i += 64) {
                size_t k = r->n - i < 64 ? r->n - i : 64;
                for (size_t j = 0; j < k; j++)
                    ms[j] = (struct net_rmd *)r->rd[i + j].md;
                cma_ok = net_local_cma(e, p, ms, k, why, sizeof(why));
            }
        }
        if (shm_ok)
            r->path = NET_PATH_SHM;
        else if (cma_ok)
            r->path = NET_PATH_CMA;
        else
            r->path = NET_PATH_TCP;
        if (e->force_path != NET_PATH_AUTO && r->path != e->force_path) {
            free(r);
            return net_error(e, IXL_ERR_NOT_SUPPORTED,
                             "NET: path=%s is forced but cannot reach '%s': %s",
                             path_name(e->force_path), p->name, why);
        }
        if (r->path == NET_PATH_TCP)
            rc = build_chunks(e, r);
    }
chosen:
    if (rc == IXL_OK && opts && opts->notif) {
        r->notif = net_sys()->malloc(opts->notif_len ? opts->notif_len : 1);
        if (r->notif == NULL)
            rc = net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
        else {
            memcpy(r->notif, opts->notif, opts->notif_len);
            r->notif_len = opts->notif_len;
        }
    }
    if (rc != IXL_OK) {
        net_ipc_req_free(r);
        free(r->chunks);
        free(r->answered);
        free(r);
        return rc;
    }
    net_req_link(e, r);
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

static int set_notif(struct net_req *r, const struct ixl_xfer_opts *opts)
{
    if (opts == NULL)
        return IXL_OK;
    if (opts->notif == r->notif && opts->notif_len == r->notif_len)
        return IXL_OK;
    void *copy = NULL;
    if (opts->notif) {
        copy = net_sys()->malloc(opts->notif_len ? opts->notif_len : 1);
        if (copy == NULL)
            return IXL_ERR_NO_MEMORY;
        memcpy(copy, opts->notif, opts->notif_len);
    }
    free(r->notif);
    r->notif = copy;
    r->notif_len = opts->notif ? opts->notif_len : 0;
    return IXL_OK;
}

/* Whether a device request's copies are enqueued by a copy worker rather than in post: a host
 * side (the driver may copy pageable memory synchronously) of more than INLINE_BYTES. */
static bool dev_deferred(const struct net_req *r, uint64_t total)
{
    return r->dev_dir != NET_DIR_D2D && total > INLINE_BYTES;
}

/* Records a failure of r's post before anything started (reqs_lock not held). */
static int post_failed(struct net_engine *e, struct net_req *r, int rc)
{
    pthread_mutex_lock(&e->reqs_lock);
    r->state = NR_ERROR;
    r->status = rc;
    pthread_mutex_unlock(&e->reqs_lock);
    return rc;
}

/* A small same-node copy without a notification, posted while no thread of NET knows the
 * request (it is in no table: the last post was one of these, or its entry was just taken
 * out): copied here, on the posting thread, and done when post returns. Nothing else can
 * reach it meanwhile (the core never runs two calls on one request at once; NET's threads find
 * requests only through the table), so its per-post fields need no lock, and nobody is woken:
 * post's own return says it is done. */
static int post_quick(struct net_engine *e, struct net_req *r)
{
    /* The state without a full barrier (a plain assignment to the atomic is one: an xchg on
     * x86, which waited for the copy's 4 KiB of stores to drain): no other thread reads it
     * before the core's own lock hands the request on. */
    atomic_store_explicit(&r->state, NR_RUNNING, memory_order_relaxed);
    r->status = IXL_OK;
    r->why[0] = '\0';
    r->canceled = false;
    r->n_chunks = 1;
    r->pending = 1;
    int rc = copy_range(e, r, 0, r->bytes, true);
    r->pending = 0;
    atomic_store_explicit(&r->state, rc == IXL_OK ? NR_DONE : NR_ERROR, memory_order_release);
    r->status = rc;
    return rc;
}

int net_post_xfer(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_req *r = (struct net_req *)req;
    bool quick = !r->dev && r->path != NET_PATH_TCP && r->bytes <= INLINE_BYTES &&
                 (opts != NULL ? opts->notif == NULL : r->notif == NULL);
    /* serial 0: in no table, so no thread of NET holds it (busy is 0) */
    if (!quick || r->serial != 0) {
        /* A frame or copy of the last post may still be winding down (the answers completed
         * the request between its send and its unbusy): that takes microseconds, so wait for
         * it, bounded. */
        pthread_mutex_lock(&e->reqs_lock);
        if (r->busy > 0) { /* the deadline only when there is something to wait for */
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 1;
            while (r->busy > 0 && pthread_cond_timedwait(&e->reqs_cond, &e->reqs_lock, &dl) == 0) {
            }
        }
        int busy = r->busy;
        if (busy == 0 && quick) /* out of the table: the last post's threads are done with it */
            net_req_remove(e, r);
        pthread_mutex_unlock(&e->reqs_lock);
        if (busy > 0) /* a thread of the last post still touches its buffers */
            return net_error(e, IXL_ERR_REPOST_ACTIVE, "NET: the last post is still winding down");
        net_stage_sweep(e, r); /* slots a failed last post still held */
    }
    if (set_notif(r, opts) != IXL_OK)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    if (r->peer != NULL) {
        uint32_t pid = 0;
        int at = peer_at_post(r, &pid);
        r->pid = pid; /* with the instance and the life it was checked with */
        if (at == 0)
            return net_error(e, IXL_ERR_REMOTE_DISCONNECT, "NET: '%s' is disconnected",
                             r->peer->name);
        /* Same-node paths touch the peer's memory directly: a peer known to be gone is
         * refused here (a pidfd poll, no waiting). */
        if (at < 0) {
            if (r->ipc != NULL) /* its device memory opened here is closed */
                net_ipc_drop_peer(e, r->peer);
            return net_error(e, IXL_ERR_REMOTE_DISCONNECT, "NET: process %u of '%s' has exited%s%s",
                             pid, r->peer->name,
                             alive_err ? " or cannot be told alive: poll of its pidfd: " : "",
                             alive_err ? strerror(alive_err) : "");
        }
        if (r->dev && net_ipc_hold(e, r) != IXL_OK) /* said by net_ipc_hold */
            return IXL_ERR_REMOTE_DISCONNECT;
    }
    r->loop_turn = false;
    r->looked_empty = false;
    if (quick)
        return post_quick(e, r);
    uint64_t total = total_bytes(r);
    pthread_mutex_lock(&e->reqs_lock);
    net_req_remove(e, r);
    int rc = net_req_insert(e, r);
    uint64_t serial = r->serial;
    if (rc == IXL_OK) {
        r->state = NR_RUNNING;
        r->status = IXL_OK;
        r->why[0] = '\0';
        r->canceled = false;
        if (r->dev)
            r->n_chunks = 1; /* one event */
        else if (r->path != NET_PATH_TCP)
            r->n_chunks = total >= SPLIT_BYTES ? (uint32_t)e->copy_threads : 1;
        else
            memset(r->answered, 0, r->n_chunks);
        r->pending = r->n_chunks;
        r->stage_next = 0;
        /* Device work enqueued below on this thread, or copied below on this thread (a device
         * request with a large host side is enqueued by a copy worker, which takes its own
         * reference). */
        if ((r->dev && !dev_deferred(r, total)) ||
            (!r->dev && r->path != NET_PATH_TCP && total <= INLINE_BYTES))
            r->busy++;
    }
    /* Read under the lock: a teardown (net_req_fail_peer) may zero it at any time after. */
    uint64_t pending = r->pending;
    pthread_mutex_unlock(&e->reqs_lock);
    if (rc != IXL_OK)
        return net_error(e, rc, "out of memory");
    if (r->dev && dev_deferred(r, total)) {
        work_push(e, (struct net_item){.serial = serial, .kind = NI_DEVPOST});
        return IXL_IN_PROGRESS;
    }
    if (r->dev) {
        /* Device copies on a stream, completed by net_dev.c's thread once the event is done
         * (the notification then). On an error here nothing of it runs on the device. */
        char why[NET_WHY];
        rc = net_dev_post(e, r, serial, why, sizeof(why));
        if (rc == IXL_IN_PROGRESS)
            return rc;
        net_error(e, rc, "%s", why);
        return post_failed(e, r, rc);
    }
    if (r->path != NET_PATH_TCP && total <= INLINE_BYTES) {
        /* Small same-node copies: no thread hop. A notification then is sequenced here when
         * the peer's notification connection is idle (the request is done now), else it goes
         * to the peer's queue and the request completes when a loop sequences it. */
        rc = copy_range(e, r, 0, total, true);
        net_req_unbusy(e, r);
        if (net_req_part_done(e, serial, rc, NULL) == 1)
            net_peer_submit_notif(r->peer, serial);
        if (rc != IXL_OK)
            return rc;
        return net_check_xfer(base, req);
    }
    if (pending == 0) {
        net_req_part_done(e, serial, IXL_OK, NULL);
        return IXL_IN_PROGRESS;
    }
    if (r->stage_local) {
        /* Its chunks start as the peer's staging slots come free (net_stage.c). */
        rc = net_stage_start(e, r, serial);
        if (rc != IXL_OK)
            return post_failed(e, r, rc);
    } else if (r->path == NET_PATH_TCP) {
        rc = net_peer_submit(r->peer, r, serial, r->n_chunks);
        if (rc != IXL_OK)
            return post_failed(e, r, rc);
    } else {
        for (uint32_t k = 0; k < r->n_chunks; k++)
            work_push(e, (struct net_item){.serial = serial, .chunk = k, .kind = NI_COPY});
    }
    return IXL_IN_PROGRESS;
}

int net_check_xfer(struct ixl_engine *base, struct ixl_req *req)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_req *r = (struct net_req *)req;
    /* A device request's event is asked once (never waited for): a polling caller completes
     * it as soon as its copies are done, without the completion thread's hand-off. */
    if (r->dev)
        (void)net_dev_watch(e, r, 0);
    else if (r->wconn != NULL && net_tcp_watch(e, r, 0) == IXL_ERR_NOT_SUPPORTED)
        r->loop_turn = true; /* its answer, read here if it came; else the loop's to read */
    /* Running and not canceled (release, on this thread, cancels): in progress, without the
     * lock the completing threads need (a polling caller would keep taking it from them).
     * When the loop has bytes of it to read, a caller polling on the loop thread's CPU would
     * keep it from them until the scheduler takes the CPU away (a slice: a 4 KiB READ polled
     * with the initiator on one CPU took 3.9 ms): the CPU is given up at each such call. */
    if (atomic_load(&r->state) == NR_RUNNING && !r->canceled) {
        if (r->loop_turn)
            sched_yield();
        return IXL_IN_PROGRESS;
    }
    pthread_mutex_lock(&e->reqs_lock);
    /* An error is reported once no thread of this post touches its buffers any more. */
    int rc = r->state == NR_DONE                    ? IXL_OK
             : r->state == NR_ERROR && r->busy == 0 ? r->status
             : r->canceled && r->state != NR_ERROR  ? IXL_ERR_CANCELED
                                                    : IXL_IN_PROGRESS;
    char why[NET_WHY];
    snprintf(why, sizeof(why), "%s", rc < 0 ? r->why : "");
    pthread_mutex_unlock(&e->reqs_lock);
    if (rc < 0 && rc != IXL_ERR_CANCELED && r->stage_local)
        net_stage_sweep(e, r);    /* ended with nothing touching it: its slots go back */
    if (rc < 0 && why[0] != '\0') /* said again on the caller's thread */
        net_error(e, rc, "%s", why);
    return rc;
}

int net_wait_xfer(struct ixl_engine *base, struct ixl_req *req, uint64_t budget_ns)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_req *r = (struct net_req *)req;
    /* Device copies are watched here (their event polled); everything else NET moves on its
     * own threads' CPUs, which a spinning caller would take from them: nothing to watch, and
     * the core has just asked check_xfer. */
    if (!r->dev) {
        /* A TCP frame sent on this thread: its answer is read here as it comes, the caller
         * asleep in poll(2) on the socket meanwhile (no hand-off from the loop thread that
         * would read it, no core taken). */
        if (r->wconn == NULL)
            return IXL_IN_PROGRESS;
        (void)net_tcp_watch(e, r, budget_ns);
        return net_check_xfer(base, req);
    }
    if (budget_ns > 0)
        (void)net_dev_watch(e, r, budget_ns);
    return net_check_xfer(base, req);
}

int net_release_req(struct ixl_engine *base, struct ixl_req *req)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_req *r = (struct net_req *)req;
    net_tcp_unwatch(r);
    pthread_mutex_lock(&e->reqs_lock);
    r->canceled = true;
    /* Out of the table: no frame or copy can start touching the user's buffers for it. */
    net_req_remove(e, r);
    /* A copy or a frame already touching the user's buffers finishes first. A WRITE frame
     * stuck on a peer that stopped reading does not: after a short wait the peer's
     * connections are cut (its other requests fail as they would at the watchdog's verdict),
     * and the loops drop the frame at once. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    while (r->busy > 0)
        if (pthread_cond_timedwait(&e->reqs_cond, &e->reqs_lock, &ts) != 0)
            break;
    if (r->busy > 0 && r->path == NET_PATH_TCP && r->peer != NULL) {
        pthread_mutex_unlock(&e->reqs_lock);
        net_peer_teardown(r->peer, IXL_ERR_REMOTE_DISCONNECT,
                          "NET: a request released while its frames were stuck on the "
                          "connection cut it");
        pthread_mutex_lock(&e->reqs_lock);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        while (r->busy > 0)
            if (pthread_cond_timedwait(&e->reqs_cond, &e->reqs_lock, &ts) != 0)
                break;
    }
    int busy = r->busy;
    if (busy == 0)
        net_req_unlink(e, r);
    pthread_mutex_unlock(&e->reqs_lock);
    if (busy > 0)
        return net_error(e, IXL_ERR_BUSY, "NET: a copy of the request is still running");
    net_stage_sweep(e, r);
    net_req_free(r);
    return IXL_OK;
}

int net_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out)
{
    (void)base;
    struct net_req *r = (struct net_req *)req;
    /* Rough figures of the machines NET was measured on (GB/s = bytes per ns). */
    double gbps = r->path == NET_PATH_TCP ? 3.0 : r->path == NET_PATH_CMA ? 5.0 : 8.0;
    double us = (double)total_bytes(r) / (gbps * 1000.0) + (r->path == NET_PATH_TCP ? 60 : 2);
    out->duration_us = (uint64_t)us;
    out->error_margin_us = (uint64_t)(us / 2);
    out->method = IXL_COST_ANALYTICAL;
    return IXL_OK;
}

int net_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)base;
    struct net_req *r = (struct net_req *)req;
    snprintf(out->path, sizeof(out->path), "%s",
             r->dev_path ? r->dev_path
             : r->dev    ? "local-cuda"
             : r->stage  ? "tcp-staged"
                         : path_name(r->path));
    return IXL_OK;
}

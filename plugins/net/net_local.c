/* NET's same-node channel. Whether a peer shares this kernel, which process it is and which of
 * its memory may be mapped or written are never taken from metadata: every engine with
 * local_paths on listens on an abstract Unix socket (its name, from a random value, is all the
 * connection info says), and an initiator that wants shm or cma connects to it first. The
 * kernel then says who answered (SO_PEERCRED: uid and pid); the answer's agent name and
 * instance must be the loaded ones; cma also needs a fresh challenge read back from that pid's
 * memory; a region is used only after the peer confirms it registered it, and shm maps only a
 * memfd of the peer's own allocator passed over the socket (SCM_RIGHTS). Nothing ever targets
 * this process.
 *
 * Frames: SOCK_SEQPACKET, one fixed-size frame per message (LF_BYTES), little-endian:
 *   u32 magic "IXLU", u8 type, u8 status, u16 0, then per type:
 *   HELLO_Q   -
 *   HELLO_A   u64 instance, char name[256] (NUL-terminated)
 *   CHAL_Q    u8 nonce[16]
 *   CHAL_A    u64 address of a word holding the nonce in the answering process
 *   REG_Q     u64 key, u64 addr, u64 len, u8 want_fd
 *   REG_A     status (LS_OK, LS_NO_REGION, LS_NO_MEMFD), u64 offset, u64 memfd size; with
 *             want_fd and LS_OK the memfd as SCM_RIGHTS
 *   VREG_Q    u64 key, u64 addr, u64 len: a VRAM region the asker loaded (issue 20)
 *   VREG_A    status (LS_OK, LS_NO_REGION, LS_NO_EXPORT), u8 kind (1 legacy IPC handle, 2 VMM
 *             POSIX fd), u64 allocation base, u64 allocation length, u32 device ordinal,
 *             64 bytes of IPC handle (kind 1) at 40, a reason (LS_NO_EXPORT) at 104; kind 2
 *             passes the fd as SCM_RIGHTS. Answered only for a VRAM region this engine
 *             registered, exactly as registered; nothing else of its memory is ever exported.
 *   LIFE_Q    -
 *   LIFE_A    status (LS_OK, LS_NO_EXPORT), with LS_OK the engine's life page as SCM_RIGHTS: a
 *             sealed 4 KiB memfd "ixl-net-life" holding a robust process-shared mutex that the
 *             server thread holds for the engine's life. When that thread exits (the process
 *             dies, however) the kernel marks the lock word FUTEX_OWNER_DIED before the
 *             process can be reaped, so an initiator that maps the page read-only tells the
 *             peer alive by one load instead of a poll of its pidfd per request. An older
 *             peer closes the connection at LIFE_Q: the pidfd is polled as before.
 * The server: one thread, poll over the listener and at most LOCAL_SLOTS connections, each
 * closed after timeout_ms without a frame and LIFE_TIMEOUTS x timeout_ms after it was
 * accepted; a connection of another user is closed at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "net.h"
#include "../common/ixl_plugin_util.h"

#define LF_MAGIC 0x554c5849u /* "IXLU" */
#define LF_BYTES 280
#define LF_NAME 256
#define LOCAL_SLOTS 8
#define LIFE_TIMEOUTS 4

enum lf_type {
    LF_HELLO_Q = 1,
    LF_HELLO_A,
    LF_CHAL_Q,
    LF_CHAL_A,
    LF_REG_Q,
    LF_REG_A,
    LF_VREG_Q,
    LF_VREG_A,
    LF_LIFE_Q,
    LF_LIFE_A
};
#define LIFE_BYTES 4096u
enum lf_status { LS_OK = 0, LS_NO_REGION = 1, LS_NO_MEMFD = 2, LS_NO_EXPORT = 3 };

struct net_lslot {
    int fd;            /* -1: free */
    uint64_t deadline; /* closed when no frame came by then */
    uint64_t end;      /* closed then in any case (LIFE_TIMEOUTS x timeout_ms after accept) */
    _Alignas(16) volatile uint8_t word[16]; /* the last challenge's nonce */
};

struct net_local {
    int lfd, wake;
    int life_fd;           /* the life page (LIFE_A), -1 when it could not be made */
    pthread_mutex_t *life; /* its robust mutex, held by the server thread */
    bool life_held;
    pthread_t thread;
    bool started;
    uint64_t last_log;
    struct net_lslot slots[LOCAL_SLOTS];
};

size_t net_local_name(uint64_t id, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%cixl-net-%016" PRIx64, '\0', id);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static void lf_head(uint8_t *f, enum lf_type t, uint8_t status)
{
    memset(f, 0, LF_BYTES);
    ixlp_put_le(f, LF_MAGIC, 4);
    f[4] = (uint8_t)t;
    f[5] = status;
}

static uint64_t ms_ns(struct net_engine *e)
{
    return e->timeout_ns;
}

/* ---- the server ---------------------------------------------------------------------------- */

static void slot_close(struct net_lslot *s)
{
    if (s->fd >= 0)
        net_sys()->close(s->fd);
    s->fd = -1;
    memset((void *)s->word, 0, sizeof(s->word));
}

/* Sends frame f (and fd when >= 0) without waiting: a peer that does not read is dropped. */
static int lf_send(int fd, const uint8_t *f, int pass_fd)
{
    struct iovec iov = {(void *)f, LF_BYTES};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    if (pass_fd >= 0) {
        memset(&cm, 0, sizeof(cm));
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    ssize_t n;
    do
        n = net_sys()->sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == LF_BYTES ? 0 : -1;
}

/* The memfd of NET's allocator that holds [addr, addr + len), duplicated (the caller closes
 * it), with the range's offset and the memfd's size; -1 when none. */
static int alloc_dup(struct net_engine *e, uint64_t addr, uint64_t len, uint64_t *off,
                     uint64_t *size)
{
    int fd = -1;
    pthread_mutex_lock(&e->lock);
    for (struct net_alloc *a = e->allocs; a; a = a->next) {
        uint64_t base = (uintptr_t)a->addr;
        if (addr >= base && len <= a->len && addr - base <= a->len - len) {
            fd = net_sys()->fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
            *off = addr - base;
            *size = a->len;
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
    return fd;
}

/* VREG_Q: what a verified same-node peer needs to open one of this engine's VRAM regions
 * (issue 20). Only a region registered here as VRAM, exactly as registered, is answered;
 * the export covers the allocation (or VMM mapping) holding it. */
static int serve_vram(struct net_engine *e, struct net_lslot *s, const uint8_t *f)
{
    uint8_t out[LF_BYTES];
    uint64_t key = ixlp_get_le(f + 8, 8), addr = ixlp_get_le(f + 16, 8),
             len = ixlp_get_le(f + 24, 8);
    pthread_rwlock_rdlock(&e->regions_lock);
    struct net_region *g = net_region_vram(e, key, addr, len);
    int dev = g ? g->dev : -1;
    pthread_rwlock_unlock(&e->regions_lock);
    const struct ixl_devops *d = e->dev;
    if (g == NULL || d == NULL) {
        lf_head(out, LF_VREG_A, LS_NO_REGION);
        return lf_send(s->fd, out, -1);
    }
    /* The region may be deregistered meanwhile: the layer classifies the address again and
     * exports only device memory (the peer asked for a region it was given). */
    struct ixl_dev_ptr dp = {.size = sizeof(dp)};
    char why[160] = "";
    int rc = d->classify(d->ctx, (const void *)(uintptr_t)addr, (size_t)len, &dp, why, sizeof(why));
    int fd = -1, kind = 0;
    uint64_t base = 0, alen = 0;
    struct ixl_dev_ipc h;
    memset(&h, 0, sizeof(h));
    if (rc != IXL_OK || dp.ordinal < 0) {
        snprintf(why, sizeof(why), "its VRAM region is no longer device memory");
    } else if (dp.flags & IXL_DEV_PTR_VMM) {
        if (d->size < offsetof(struct ixl_devops, vmm_close) + sizeof(d->vmm_close))
            snprintf(why, sizeof(why), "its device layer cannot export VMM memory");
        else if (d->vmm_export(d->ctx, (const void *)(uintptr_t)addr, &fd, &base, &alen) != IXL_OK)
            snprintf(why, sizeof(why),
                     "its VMM memory has no POSIX-fd shareable handle (created without "
                     "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)");
        else if (addr < base || len > alen || addr - base > alen - len)
            snprintf(why, sizeof(why), "its VRAM region spans several VMM mappings");
        else
            kind = 2;
    } else if (d->ipc_export(d->ctx, (const void *)(uintptr_t)addr, &h) != IXL_OK) {
        snprintf(why, sizeof(why), "its allocation cannot be exported (cuIpcGetMemHandle)");
    } else {
        kind = 1;
        base = dp.base;
        alen = dp.len;
    }
    if (kind == 0 && fd >= 0) {
        net_sys()->close(fd);
        fd = -1;
    }
    lf_head(out, LF_VREG_A, kind ? LS_OK : LS_NO_EXPORT);
    out[6] = (uint8_t)kind;
    ixlp_put_le(out + 8, base, 8);
    ixlp_put_le(out + 16, alen, 8);
    ixlp_put_le(out + 24, (uint32_t)dev, 4);
    memcpy(out + 40, h.bytes, sizeof(h.bytes));
    if (kind == 0)
        snprintf((char *)out + 104, LF_BYTES - 104, "%s", why);
    rc = lf_send(s->fd, out, fd);
    if (fd >= 0)
        net_sys()->close(fd);
    return rc;
}

/* One frame from connection s: 0 handled, -1 close it. */
static int serve_frame(struct net_engine *e, struct net_lslot *s)
{
    uint8_t f[LF_BYTES + 1], out[LF_BYTES];
    struct iovec iov = {f, sizeof(f)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1}; /* no control: passed fds are dropped */
    ssize_t n;
    do
        n = net_sys()->recvmsg(s->fd, &mh, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n != LF_BYTES || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || ixlp_get_le(f, 4) != LF_MAGIC)
        return -1;
    switch (f[4]) {
    case LF_HELLO_Q:
        lf_head(out, LF_HELLO_A, LS_OK);
        ixlp_put_le(out + 8, e->instance, 8);
        snprintf((char *)out + 16, LF_NAME, "%s", e->name);
        return lf_send(s->fd, out, -1);
    case LF_CHAL_Q:
        memcpy((void *)s->word, f + 8, sizeof(s->word));
        lf_head(out, LF_CHAL_A, LS_OK);
        ixlp_put_le(out + 8, (uint64_t)(uintptr_t)s->word, 8);
        return lf_send(s->fd, out, -1);
    case LF_REG_Q: {
        uint64_t key = ixlp_get_le(f + 8, 8), addr = ixlp_get_le(f + 16, 8),
                 len = ixlp_get_le(f + 24, 8);
        int want_fd = f[32] == 1;
        pthread_rwlock_rdlock(&e->regions_lock);
        struct net_region *g = net_region_find(e, key);
        /* VRAM regions are in the table for TCP frames only: never confirmed here */
        int ok = g != NULL && g->addr == addr && g->len == len && !g->vram;
        pthread_rwlock_unlock(&e->regions_lock);
        uint64_t off = 0, size = 0;
        int fd = ok && want_fd ? alloc_dup(e, addr, len, &off, &size) : -1;
        lf_head(out, LF_REG_A, !ok ? LS_NO_REGION : want_fd && fd < 0 ? LS_NO_MEMFD : LS_OK);
        ixlp_put_le(out + 8, off, 8);
        ixlp_put_le(out + 16, size, 8);
        int rc = lf_send(s->fd, out, fd);
        if (fd >= 0)
            net_sys()->close(fd);
        return rc;
    }
    case LF_VREG_Q:
        return serve_vram(e, s, f);
    case LF_LIFE_Q: {
        int fd = e->local->life_held ? e->local->life_fd : -1;
        lf_head(out, LF_LIFE_A, fd >= 0 ? LS_OK : LS_NO_EXPORT);
        return lf_send(s->fd, out, fd);
    }
    default:
        return -1;
    }
}

/* Takes the connections waiting on the listener while a slot is free (the others wait in the
 * backlog; a full backlog makes the initiator's connect fail with EAGAIN, which it does not
 * hold against the peer): another user's is closed at once. */
static void serve_accept(struct net_engine *e, struct net_local *l)
{
    for (int i = 0; i < 64; i++) {
        int free_slots = 0;
        for (int k = 0; k < LOCAL_SLOTS; k++)
            free_slots += l->slots[k].fd < 0;
        if (free_slots == 0)
            return;
        int fd = net_sys()->accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        const char *why = NULL;
        if (net_sys()->getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
            why = "SO_PEERCRED failed";
        else if (cr.uid != geteuid())
            why = "another user";
        struct net_lslot *s = NULL;
        for (int k = 0; k < LOCAL_SLOTS && why == NULL && s == NULL; k++)
            if (l->slots[k].fd < 0)
                s = &l->slots[k];
        if (why == NULL && s == NULL)
            why = "all its same-node slots are busy";
        if (why != NULL) {
            uint64_t now = net_now_ns();
            if (now - l->last_log > 1000000000ull) {
                l->last_log = now;
                e->host->log(e->host->ctx, IXL_LOG_WARN,
                             "NET: refused a same-node connection from pid %d uid %u: %s",
                             why[0] == 'S' ? -1 : (int)cr.pid, why[0] == 'S' ? 0u : cr.uid, why);
            }
            net_sys()->close(fd);
            continue;
        }
        s->fd = fd;
        s->deadline = net_now_ns() + ms_ns(e);
        s->end = s->deadline + (LIFE_TIMEOUTS - 1) * ms_ns(e);
    }
}

static void *local_main(void *arg)
{
    struct net_engine *e = arg;
    struct net_local *l = e->local;
    /* Held until this thread ends: its end (or the process's) is what LIFE_A's page shows. */
    if (l->life != NULL && pthread_mutex_lock(l->life) == 0)
        l->life_held = true;
    for (;;) {
        struct pollfd pf[2 + LOCAL_SLOTS];
        int at[2 + LOCAL_SLOTS];
        int n = 0;
        pf[n++] = (struct pollfd){.fd = l->wake, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = l->lfd, .events = 0}; /* POLLIN while a slot is free */
        uint64_t now = net_now_ns(), next = now + 1000000000ull;
        for (int k = 0; k < LOCAL_SLOTS; k++)
            if (l->slots[k].fd < 0)
                pf[1].events = POLLIN;
        for (int k = 0; k < LOCAL_SLOTS; k++)
            if (l->slots[k].fd >= 0) {
                at[n] = k;
                pf[n++] = (struct pollfd){.fd = l->slots[k].fd, .events = POLLIN};
                if (l->slots[k].deadline < next)
                    next = l->slots[k].deadline;
                if (l->slots[k].end < next)
                    next = l->slots[k].end;
            }
        int wait_ms = next > now ? (int)((next - now) / 1000000 + 1) : 0;
        int r = net_sys()->poll(pf, (unsigned long)n, wait_ms);
        if (atomic_load(&e->stopping) || (r > 0 && (pf[0].revents & POLLIN)))
            break;
        if (r < 0 && errno != EINTR) {
            e->host->log(e->host->ctx, IXL_LOG_ERROR,
                         "NET: poll of the same-node socket failed (%s): it is no longer served",
                         strerror(errno));
            break;
        }
        for (int i = 2; r > 0 && i < n; i++) {
            struct net_lslot *s = &l->slots[at[i]];
            if (pf[i].revents == 0)
                continue;
            if (!(pf[i].revents & POLLIN) || serve_frame(e, s) != 0)
                slot_close(s);
            else
                s->deadline = net_now_ns() + ms_ns(e);
        }
        if (r > 0 && (pf[1].revents & POLLIN))
            serve_accept(e, l);
        now = net_now_ns();
        for (int k = 0; k < LOCAL_SLOTS; k++)
            if (l->slots[k].fd >= 0 && (l->slots[k].deadline <= now || l->slots[k].end <= now))
                slot_close(&l->slots[k]);
    }
    if (l->life_held)
        pthread_mutex_unlock(l->life);
    return NULL;
}

/* The life page (LIFE_A): a sealed memfd holding a robust process-shared mutex; NULL (and
 * peers poll the pidfd) when any step fails. */
static void life_make(struct net_local *l)
{
    int fd = net_sys()->memfd_create("ixl-net-life", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return;
    void *p = MAP_FAILED;
    if (net_sys()->ftruncate(fd, LIFE_BYTES) == 0)
        p = net_sys()->mmap(NULL, LIFE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    pthread_mutexattr_t a;
    int ok = p != MAP_FAILED && pthread_mutexattr_init(&a) == 0;
    if (ok) {
        ok = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) == 0 &&
             pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) == 0 &&
             pthread_mutex_init((pthread_mutex_t *)p, &a) == 0;
        pthread_mutexattr_destroy(&a);
    }
    /* Sealed: a peer that maps it can count on its size. */
    if (ok && net_sys()->fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        ok = 0;
    if (!ok) {
        if (p != MAP_FAILED)
            net_sys()->munmap(p, LIFE_BYTES);
        net_sys()->close(fd);
        return;
    }
    l->life_fd = fd;
    l->life = p;
}

/* ---- liveness through the life page --------------------------------------------------------- */

int net_local_life_state(const void *life)
{
    /* The first word of glibc's mutex is its futex word: the owner's tid, with
     * FUTEX_OWNER_DIED set by the kernel when the owner ended without unlocking. */
    uint32_t w = atomic_load((const _Atomic uint32_t *)life);
    return (w & FUTEX_TID_MASK) != 0 && !(w & FUTEX_OWNER_DIED);
}

void net_local_life_drop(struct net_peer *p)
{
    /* The page stays mapped at life_at, unread (pv_life is 0 once the caller's
     * net_peer_pv_end publishes it), until the next life page is mapped over it or the peer
     * ends: a reader that saw it in use a moment ago never finds a hole there. */
    p->life = NULL;
}

void net_local_life_reserve(struct net_peer *p)
{
    void *m = net_sys()->mmap(NULL, LIFE_BYTES, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p->life_at = m == MAP_FAILED ? NULL : m;
}

void net_local_life_release(struct net_peer *p)
{
    if (p->life_at != NULL && !p->life_lost)
        net_sys()->munmap(p->life_at, LIFE_BYTES);
    p->life = NULL;
}

int net_local_start(struct net_engine *e)
{
    e->local_id = 0;
    if (!e->local_paths)
        return IXL_OK;
    struct net_local *l = net_sys()->calloc(1, sizeof(*l));
    if (l == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    l->lfd = l->wake = l->life_fd = -1;
    for (int k = 0; k < LOCAL_SLOTS; k++)
        l->slots[k].fd = -1;
    e->local = l;
    const char *what = "socket";
    l->lfd = net_sys()->socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    uint64_t id = 0;
    int ok = l->lfd >= 0;
    for (int tries = 0; ok && tries < 8; tries++) {
        id = ixlp_random64(net_sys()->getrandom);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t nl = net_local_name(id, sa.sun_path, sizeof(sa.sun_path));
        what = "bind";
        ok = net_sys()->bind(l->lfd, (struct sockaddr *)&sa,
                             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + nl)) == 0;
        if (ok || errno != EADDRINUSE)
            break;
        ok = 1;
    }
    if (ok) {
        what = "listen";
        ok = net_sys()->listen(l->lfd, 64) == 0;
    }
    if (ok) {
        what = "eventfd";
        l->wake = net_sys()->eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ok = l->wake >= 0;
    }
    if (ok) {
        life_make(l);
        what = "pthread_create";
        int te = net_sys()->pthread_create(&l->thread, NULL, local_main, e);
        ok = te == 0;
        if (!ok)
            errno = te;
        else
            pthread_setname_np(l->thread, "ixl-net-local");
    }
    if (!ok) {
        int err = errno;
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: no same-node socket (%s: %s): same-node peers use TCP to reach '%s'",
                     what, strerror(err), e->name);
        net_local_stop(e);
        return IXL_OK;
    }
    l->started = true;
    e->local_id = id;
    return IXL_OK;
}

void net_local_stop(struct net_engine *e)
{
    struct net_local *l = e->local;
    if (l == NULL)
        return;
    if (l->started) {
        uint64_t one = 1;
        if (net_sys()->write(l->wake, &one, sizeof(one)) < 0) {
            /* the stopping flag ends the loop at its next wakeup (at most a second) */
        }
        pthread_join(l->thread, NULL);
    }
    for (int k = 0; k < LOCAL_SLOTS; k++)
        slot_close(&l->slots[k]);
    if (l->lfd >= 0)
        net_sys()->close(l->lfd);
    if (l->wake >= 0)
        net_sys()->close(l->wake);
    if (l->life != NULL) {
        pthread_mutex_destroy(l->life);
        net_sys()->munmap(l->life, LIFE_BYTES);
    }
    if (l->life_fd >= 0)
        net_sys()->close(l->life_fd);
    free(l);
    e->local = NULL;
    e->local_id = 0;
}

/* ---- the initiator ------------------------------------------------------------------------- */

struct lsess {
    int fd;
    pid_t pid; /* SO_PEERCRED's, in this pid namespace (0: not visible here) */
    int pidfd;
    uint64_t deadline;
    bool transient; /* it failed for a reason that may pass (busy, slow): not remembered */
};

static void sess_close(struct lsess *s)
{
    if (s->fd >= 0)
        net_sys()->close(s->fd);
    if (s->pidfd >= 0)
        net_sys()->close(s->pidfd);
    s->fd = s->pidfd = -1;
}

/* Receives one frame of type t before the session's deadline; *fd (may be NULL) receives a
 * passed descriptor or -1. 0, or -1 with why. */
static int lf_recv(struct lsess *s, uint8_t *f, enum lf_type t, int *fd, char *why, size_t wl)
{
    if (fd)
        *fd = -1;
    for (;;) {
        uint64_t now = net_now_ns();
        if (now >= s->deadline) {
            snprintf(why, wl, "no answer on its same-node socket within timeout_ms");
            s->transient = true;
            return -1;
        }
        struct pollfd pf = {.fd = s->fd, .events = POLLIN};
        int r = net_sys()->poll(&pf, 1, (int)((s->deadline - now) / 1000000 + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, wl, "poll of its same-node socket: %s", strerror(errno));
            s->transient = true;
            return -1;
        }
        if (r == 0)
            continue;
        uint8_t buf[LF_BYTES + 1];
        struct iovec iov = {buf, sizeof(buf)};
        union {
            char b[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } cm;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd) {
            mh.msg_control = cm.b;
            mh.msg_controllen = sizeof(cm.b);
        }
        ssize_t n = net_sys()->recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        /* Every descriptor the kernel installed is taken; more than one is an error (and
         * all are closed). */
        int got = -1, extra = 0;
        if (fd && n >= 0)
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
                    c->cmsg_len < CMSG_LEN(0))
                    continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t j = 0; j < k; j++) {
                    int one;
                    memcpy(&one, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
                    if (got < 0) {
                        got = one;
                    } else {
                        net_sys()->close(one);
                        extra = 1;
                    }
                }
            }
        if (n != LF_BYTES || extra || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
            ixlp_get_le(buf, 4) != LF_MAGIC || buf[4] != (uint8_t)t) {
            if (got >= 0)
                net_sys()->close(got);
            snprintf(why, wl, "%s on its same-node socket",
                     n == 0  ? "the connection closed"
                     : n < 0 ? strerror(errno)
                             : "a malformed answer");
            return -1;
        }
        memcpy(f, buf, LF_BYTES);
        if (fd)
            *fd = got;
        else if (got >= 0)
            net_sys()->close(got);
        return 0;
    }
}

/* Connects to p's same-node socket and establishes who answers: the kernel's uid (this
 * process's) and pid (not this process), and the agent name and instance it states (those
 * loaded for p). 0, or -1 with why. */
static int sess_open(struct net_engine *e, struct net_peer *p, struct lsess *s, uint64_t *inst,
                     char *why, size_t wl)
{
    s->fd = s->pidfd = -1;
    s->pid = 0;
    s->transient = false;
    s->deadline = net_now_ns() + e->timeout_ns;
    pthread_mutex_lock(&p->lock);
    uint64_t id = p->local_id, instance = p->instance;
    bool allows = p->peer_allows_local;
    pthread_mutex_unlock(&p->lock);
    *inst = instance;
    if (!allows || id == 0) {
        snprintf(why, wl, "the peer switched its same-node paths off");
        return -1;
    }
    s->fd = net_sys()->socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        snprintf(why, wl, "socket(AF_UNIX): %s", strerror(errno));
        s->transient = true;
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t nl = net_local_name(id, sa.sun_path, sizeof(sa.sun_path));
    if (net_sys()->connect(s->fd, (struct sockaddr *)&sa,
                           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + nl)) != 0) {
        int err = errno;
        s->transient = err == EAGAIN || err == EINTR;
        snprintf(why, wl,
                 "no NET agent answers on its same-node socket (connect: %s): another "
                 "node or network namespace, or it exited",
                 strerror(err));
        goto fail;
    }
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (net_sys()->getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        snprintf(why, wl, "SO_PEERCRED of its same-node socket: %s", strerror(errno));
        goto fail;
    }
    s->pid = cr.pid;
    if (cr.pid > 0) /* held from now on: a recycled pid is never mistaken for the peer */
        s->pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
    if (cr.uid != geteuid()) {
        snprintf(why, wl, "the kernel says its same-node socket belongs to uid %u, not %u",
                 (unsigned)cr.uid, (unsigned)geteuid());
        goto fail;
    }
    if (cr.pid == getpid()) {
        snprintf(why, wl,
                 "the kernel says its same-node socket belongs to this very process "
                 "(pid %d): another agent of this process, or forged connection info; "
                 "same-node paths never target their own process",
                 (int)cr.pid);
        goto fail;
    }
    uint8_t f[LF_BYTES];
    lf_head(f, LF_HELLO_Q, 0);
    if (lf_send(s->fd, f, -1) != 0) {
        snprintf(why, wl, "send on its same-node socket: %s", strerror(errno));
        goto fail;
    }
    if (lf_recv(s, f, LF_HELLO_A, NULL, why, wl) != 0)
        goto fail;
    char name[LF_NAME];
    memcpy(name, f + 16, LF_NAME);
    uint64_t ginst = ixlp_get_le(f + 8, 8);
    if (memchr(name, '\0', LF_NAME) == NULL || strcmp(name, p->name) != 0 || ginst != instance) {
        if (memchr(name, '\0', LF_NAME) == NULL)
            snprintf(name, sizeof(name), "(unterminated)");
        snprintf(why, wl,
                 "the process answering on its same-node socket (pid %d) is agent "
                 "'%.64s' instance %016" PRIx64 ", not '%.64s' instance %016" PRIx64,
                 (int)cr.pid, name, ginst, p->name, instance);
        goto fail;
    }
    return 0;
fail:
    sess_close(s);
    return -1;
}

/* Records a refusal for p's current instance and logs it (once per instance). */
static void refuse(struct net_engine *e, struct net_peer *p, uint64_t instance, const char *why)
{
    pthread_mutex_lock(&p->lock);
    int first = p->instance == instance && p->local_ok != 0;
    if (p->instance == instance) {
        p->local_ok = 0;
        snprintf(p->local_why, sizeof(p->local_why), "%s", why);
    }
    pthread_mutex_unlock(&p->lock);
    if (first)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: same-node paths to '%s' refused (%s); using TCP", p->name, why);
}

/* A failure of session s: remembered for the instance, unless it may pass (then only logged,
 * and the next request asks again). */
static void settle(struct net_engine *e, struct net_peer *p, uint64_t instance,
                   const struct lsess *s, const char *why)
{
    if (s->transient)
        e->host->log(e->host->ctx, IXL_LOG_INFO,
                     "NET: same-node check of '%s' did not finish (%s); TCP for now", p->name, why);
    else
        refuse(e, p, instance, why);
}

/* Records a verified session: p's pid is the kernel's, watched through the session's pidfd. */
static void verified(struct net_peer *p, uint64_t instance, struct lsess *s)
{
    pthread_mutex_lock(&p->lock);
    if (p->instance == instance) {
        if (p->local_ok != 1 || p->pid != (uint32_t)s->pid) {
            net_peer_pv_begin(p);
            p->local_ok = 1;
            p->pid = (uint32_t)s->pid;
            net_local_life_drop(p);
            if (p->pidfd >= 0)
                net_sys()->close(p->pidfd);
            p->pidfd = s->pidfd;
            s->pidfd = -1;
            net_peer_pv_end(p);
        }
    }
    pthread_mutex_unlock(&p->lock);
}

/* Asks verified session s's peer for its life page (LIFE_A) once per peer instance and pid;
 * any failure leaves p without one (its pidfd is polled instead). Call last on s: an older
 * peer closes the connection at the question. */
static void ask_life(struct net_peer *p, uint64_t instance, struct lsess *s)
{
    pthread_mutex_lock(&p->lock);
    bool have = p->life != NULL || p->instance != instance || p->pid != (uint32_t)s->pid;
    pthread_mutex_unlock(&p->lock);
    if (have)
        return;
    uint8_t f[LF_BYTES];
    char why[160];
    int fd = -1;
    lf_head(f, LF_LIFE_Q, 0);
    if (lf_send(s->fd, f, -1) != 0 || lf_recv(s, f, LF_LIFE_A, &fd, why, sizeof(why)) != 0 ||
        f[5] != LS_OK || fd < 0) {
        if (fd >= 0)
            net_sys()->close(fd);
        return;
    }
    /* A sealed memfd of NET's life page, of its size: mapped read-only, it cannot shrink
     * under the loads (no SIGBUS) and this process never writes it. */
    char path[64], link[128];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n >= 0)
        link[n] = '\0';
    int seals = net_sys()->fcntl(fd, F_GET_SEALS, 0);
    struct stat st;
    if (n >= 0 && strncmp(link, "/memfd:ixl-net-life", 19) == 0 &&
        (link[19] == '\0' || link[19] == ' ') && seals >= 0 && (seals & F_SEAL_SHRINK) &&
        net_sys()->fstat(fd, &st) == 0 && (uint64_t)st.st_size == LIFE_BYTES) {
        pthread_mutex_lock(&p->lock);
        if (p->life == NULL && p->life_at != NULL && !p->life_lost && p->instance == instance &&
            p->pid == (uint32_t)s->pid) {
            /* Mapped over the peer's reserved page (the empty page, or an earlier instance's
             * life page nobody reads: pv_life is 0 now). (Not mremap: UCX's memory hooks,
             * loaded into some processes, drop its new-address argument.) */
            net_peer_pv_begin(p);
            if (net_sys()->mmap(p->life_at, LIFE_BYTES, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) ==
                p->life_at)
                p->life = p->life_at;
            else /* a failed MAP_FIXED may leave a hole that others map into: not ours now */
                p->life_lost = true;
            net_peer_pv_end(p);
        }
        pthread_mutex_unlock(&p->lock);
    }
    net_sys()->close(fd);
}

/* A peer refused for this instance stays refused (a forger gets one connection per load);
 * a peer verified before must answer from the same pid. */
static int known_refused(struct net_peer *p, char *why, size_t wl)
{
    pthread_mutex_lock(&p->lock);
    int no = p->local_ok == 0;
    if (no)
        snprintf(why, wl, "%s", p->local_why);
    pthread_mutex_unlock(&p->lock);
    return no;
}

static int same_pid(struct net_engine *e, struct net_peer *p, uint64_t instance,
                    const struct lsess *s, char *why, size_t wl)
{
    pthread_mutex_lock(&p->lock);
    int differs = p->local_ok == 1 && p->pid != (uint32_t)s->pid;
    uint32_t was = p->pid;
    pthread_mutex_unlock(&p->lock);
    if (differs) {
        snprintf(why, wl, "its same-node socket was answered by pid %u and now by pid %d", was,
                 (int)s->pid);
        refuse(e, p, instance, why);
        return -1;
    }
    return 0;
}

/* Whether fd is a memfd of a NET allocator ("memfd:ixl-net"), not one of this agent's. */
static int check_memfd(struct net_engine *e, int fd, uint64_t need, char *why, size_t wl)
{
    if (net_sys()->fcntl(fd, F_GET_SEALS, 0) < 0) {
        snprintf(why, wl, "the descriptor it passed is not a memfd (F_GET_SEALS: %s)",
                 strerror(errno));
        return -1;
    }
    char path[64], link[128];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n >= 0)
        link[n] = '\0';
    if (n < 0 || strncmp(link, "/memfd:ixl-net", 14) != 0 ||
        (link[14] != '\0' && link[14] != ' ')) {
        snprintf(why, wl, "the descriptor it passed is not a memfd of NET's allocator (%s)",
                 n < 0 ? strerror(errno) : link);
        return -1;
    }
    struct stat st;
    if (net_sys()->fstat(fd, &st) != 0 || (uint64_t)st.st_size < need) {
        snprintf(why, wl, "the memfd it passed is smaller than its region");
        return -1;
    }
    /* Never this agent's own memory (a peer may hold one of our memfds). */
    int ours = 0;
    pthread_mutex_lock(&e->lock);
    for (struct net_alloc *a = e->allocs; a && !ours; a = a->next) {
        struct stat mine;
        ours = net_sys()->fstat(a->fd, &mine) == 0 && mine.st_dev == st.st_dev &&
               mine.st_ino == st.st_ino;
    }
    pthread_mutex_unlock(&e->lock);
    if (ours) {
        snprintf(why, wl, "the memfd it passed is this agent's own memory");
        return -1;
    }
    return 0;
}

/* Asks s's peer about region m; 1 confirmed, 0 denied, -1 failed (why). */
static int ask_region(struct lsess *s, const struct net_rmd *m, int want_fd, int *fd, uint64_t *off,
                      uint64_t *size, char *why, size_t wl)
{
    uint8_t f[LF_BYTES];
    lf_head(f, LF_REG_Q, 0);
    ixlp_put_le(f + 8, m->key, 8);
    ixlp_put_le(f + 16, m->addr, 8);
    ixlp_put_le(f + 24, m->len, 8);
    f[32] = want_fd ? 1 : 0;
    if (lf_send(s->fd, f, -1) != 0) {
        snprintf(why, wl, "send on its same-node socket: %s", strerror(errno));
        return -1;
    }
    int got = -1;
    if (lf_recv(s, f, LF_REG_A, want_fd ? &got : NULL, why, wl) != 0)
        return -1;
    if (f[5] != LS_OK) {
        if (got >= 0)
            net_sys()->close(got);
        snprintf(why, wl,
                 f[5] == LS_NO_MEMFD ? "its region 0x%" PRIx64 "+%" PRIu64
                                       " does not lie in memory it allocated with ixl_mem_alloc"
                                     : "it did not register region 0x%" PRIx64 "+%" PRIu64
                                       " (forged or stale metadata)",
                 m->addr, m->len);
        return 0;
    }
    if (want_fd) {
        if (got < 0) {
            snprintf(why, wl, "it confirmed its region but passed no memfd");
            return -1;
        }
        *fd = got;
        *off = ixlp_get_le(f + 8, 8);
        *size = ixlp_get_le(f + 16, 8);
    }
    return 1;
}

int net_local_memfd(struct net_engine *e, struct net_rmd *m, int *fd_out, uint64_t *off_out,
                    uint64_t *size_out, uint64_t *inst_out, char *why, size_t wl)
{
    struct net_peer *p = m->peer;
    if (known_refused(p, why, wl))
        return IXL_ERR_AUTH;
    struct lsess s;
    uint64_t instance;
    if (sess_open(e, p, &s, &instance, why, wl) != 0) {
        settle(e, p, instance, &s, why);
        return s.transient ? IXL_ERR_BUSY : IXL_ERR_AUTH;
    }
    int rc = IXL_ERR_AUTH;
    int fd = -1;
    uint64_t off = 0, size = 0;
    if (same_pid(e, p, instance, &s, why, wl) != 0)
        goto done;
    int a = ask_region(&s, m, 1, &fd, &off, &size, why, wl);
    if (a < 0) {
        settle(e, p, instance, &s, why);
        if (s.transient)
            rc = IXL_ERR_BUSY;
    }
    if (a <= 0)
        goto done;
    if (off > size || m->len > size - off || check_memfd(e, fd, size, why, wl) != 0) {
        if (why[0] == '\0' || off > size || m->len > size - off)
            snprintf(why, wl, "the memfd it passed does not hold its region");
        refuse(e, p, instance, why);
        goto done;
    }
    verified(p, instance, &s);
    ask_life(p, instance, &s);
    *fd_out = fd;
    *off_out = off;
    *size_out = size;
    *inst_out = instance;
    fd = -1;
    rc = IXL_OK;
done:
    if (fd >= 0)
        net_sys()->close(fd);
    sess_close(&s);
    return rc;
}

/* The fresh challenge: the peer stores a random nonce in its memory and says where; reading
 * it back from the kernel's pid shows that pid is the process answering. */
static int challenge(struct net_engine *e, struct lsess *s, char *why, size_t wl)
{
    if (s->pid <= 0) {
        snprintf(why, wl, "its process is not visible in this pid namespace");
        return -1;
    }
    uint8_t f[LF_BYTES], nonce[16], got[16];
    if (net_sys()->getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
        snprintf(why, wl, "getrandom: %s", strerror(errno));
        return -1;
    }
    lf_head(f, LF_CHAL_Q, 0);
    memcpy(f + 8, nonce, sizeof(nonce));
    if (lf_send(s->fd, f, -1) != 0) {
        snprintf(why, wl, "send on its same-node socket: %s", strerror(errno));
        return -1;
    }
    if (lf_recv(s, f, LF_CHAL_A, NULL, why, wl) != 0)
        return -1;
    struct iovec l = {got, sizeof(got)}, r = {(void *)(uintptr_t)ixlp_get_le(f + 8, 8), 16};
    ssize_t n = net_sys()->process_vm_readv(s->pid, &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof(got)) {
        snprintf(why, wl, "cross-memory attach to pid %d: %s", (int)s->pid,
                 n < 0 ? strerror(errno) : "short read");
        return -1;
    }
    if (memcmp(got, nonce, sizeof(nonce)) != 0) {
        snprintf(why, wl, "pid %d does not hold the challenge its socket answered", (int)s->pid);
        return -1;
    }
    struct pollfd pf = {.fd = s->pidfd, .events = POLLIN};
    if (s->pidfd < 0 || net_sys()->poll(&pf, 1, 0) != 0) {
        snprintf(why, wl, "pid %d exited or cannot be watched (pidfd_open)", (int)s->pid);
        return -1;
    }
    (void)e;
    return 0;
}

int net_local_cma(struct net_engine *e, struct net_peer *p, struct net_rmd *const *ms, size_t n,
                  char *why, size_t wl)
{
    pthread_mutex_lock(&p->lock);
    uint64_t instance = p->instance;
    int cma = p->cma;
    size_t todo = 0;
    for (size_t i = 0; i < n; i++)
        if (ms[i]->confirmed_instance != instance || ms[i]->confirmed != 1)
            todo++;
    pthread_mutex_unlock(&p->lock);
    if (cma == 1 && todo == 0)
        return 1; /* verified before: no system call */
    if (cma == 0) {
        pthread_mutex_lock(&p->lock);
        snprintf(why, wl, "%s", p->local_why[0] ? p->local_why : "cma was refused before");
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    if (known_refused(p, why, wl))
        return 0;
    struct lsess s;
    if (sess_open(e, p, &s, &instance, why, wl) != 0) {
        settle(e, p, instance, &s, why);
        return 0;
    }
    int ok = 0;
    if (same_pid(e, p, instance, &s, why, wl) != 0)
        goto done;
    if (cma != 1) {
        if (challenge(e, &s, why, wl) != 0) {
            if (s.transient) {
                settle(e, p, instance, &s, why);
                goto done;
            }
            pthread_mutex_lock(&p->lock);
            if (p->instance == instance) {
                p->cma = 0;
                snprintf(p->local_why, sizeof(p->local_why), "%s", why);
            }
            pthread_mutex_unlock(&p->lock);
            e->host->log(e->host->ctx, IXL_LOG_INFO,
                         "NET: cross-memory attach to '%s' unavailable (%s); using another path",
                         p->name, why);
            goto done;
        }
        verified(p, instance, &s);
        pthread_mutex_lock(&p->lock);
        if (p->instance == instance)
            p->cma = 1;
        pthread_mutex_unlock(&p->lock);
    }
    ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        pthread_mutex_lock(&p->lock);
        int known = ms[i]->confirmed_instance == instance ? ms[i]->confirmed : 0;
        pthread_mutex_unlock(&p->lock);
        if (known == 1)
            continue;
        int a = known == -1 ? 0 : ask_region(&s, ms[i], 0, NULL, NULL, NULL, why, wl);
        if (known == -1)
            snprintf(why, wl,
                     "it did not register region 0x%" PRIx64 "+%" PRIu64
                     " (forged or stale metadata)",
                     ms[i]->addr, ms[i]->len);
        if (a < 0) {
            settle(e, p, instance, &s, why);
            ok = 0;
            break;
        }
        pthread_mutex_lock(&p->lock);
        ms[i]->confirmed = a == 1 ? 1 : -1;
        ms[i]->confirmed_instance = instance;
        pthread_mutex_unlock(&p->lock);
        if (a == 0) {
            e->host->log(e->host->ctx, IXL_LOG_WARN, "NET: cma to '%s' refused: %s", p->name, why);
            ok = 0;
        }
    }
    if (ok)
        ask_life(p, instance, &s);
done:
    sess_close(&s);
    return ok;
}

int net_local_vram(struct net_engine *e, struct net_rmd *m, struct net_vram_ans *out, char *why,
                   size_t wl)
{
    struct net_peer *p = m->peer;
    if (known_refused(p, why, wl))
        return IXL_ERR_NOT_SUPPORTED;
    struct lsess s;
    uint64_t instance;
    if (sess_open(e, p, &s, &instance, why, wl) != 0) {
        settle(e, p, instance, &s, why);
        return IXL_ERR_NOT_SUPPORTED;
    }
    int rc = IXL_ERR_NOT_SUPPORTED;
    int fd = -1;
    uint8_t f[LF_BYTES];
    if (same_pid(e, p, instance, &s, why, wl) != 0)
        goto done;
    lf_head(f, LF_VREG_Q, 0);
    ixlp_put_le(f + 8, m->key, 8);
    ixlp_put_le(f + 16, m->addr, 8);
    ixlp_put_le(f + 24, m->len, 8);
    if (lf_send(s.fd, f, -1) != 0) {
        snprintf(why, wl, "send on its same-node socket: %s", strerror(errno));
        goto done;
    }
    if (lf_recv(&s, f, LF_VREG_A, &fd, why, wl) != 0) {
        settle(e, p, instance, &s, why);
        goto done;
    }
    /* The peer is verified from here on (the kernel's pid, the loaded name and instance). */
    verified(p, instance, &s);
    if (f[5] == LS_NO_REGION) {
        snprintf(why, wl,
                 "it did not register VRAM region 0x%" PRIx64 "+%" PRIu64
                 " (forged or stale metadata)",
                 m->addr, m->len);
        rc = IXL_ERR_REMOTE_REFUSED;
        goto done;
    }
    if (f[5] != LS_OK) {
        char r[LF_BYTES - 104 + 1];
        memcpy(r, f + 104, LF_BYTES - 104);
        r[LF_BYTES - 104] = '\0';
        snprintf(why, wl, "it cannot export VRAM region 0x%" PRIx64 "+%" PRIu64 ": %s", m->addr,
                 m->len, r[0] ? r : "no reason given");
        goto done;
    }
    uint64_t base = ixlp_get_le(f + 8, 8), alen = ixlp_get_le(f + 16, 8);
    int kind = f[6];
    if ((kind != 1 && kind != 2) || alen == 0 || m->addr < base || m->len > alen ||
        m->addr - base > alen - m->len || (kind == 2) != (fd >= 0)) {
        snprintf(why, wl, "its answer for VRAM region 0x%" PRIx64 "+%" PRIu64 " is malformed",
                 m->addr, m->len);
        rc = IXL_ERR_REMOTE_REFUSED;
        goto done;
    }
    out->kind = kind;
    out->base = base;
    out->len = alen;
    out->dev = (int)(uint32_t)ixlp_get_le(f + 24, 4);
    memcpy(out->h.bytes, f + 40, sizeof(out->h.bytes));
    out->fd = fd;
    fd = -1;
    rc = IXL_OK;
done:
    if (fd >= 0)
        net_sys()->close(fd);
    sess_close(&s);
    return rc;
}

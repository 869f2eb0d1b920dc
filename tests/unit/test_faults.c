/*
 * Fault injection (ixl_syscall_set): the main API sequences, with the Nth allocation, and
 * separately the Nth system call, of the calling thread refused, for every N from 1 until a
 * run completes without reaching N (capped at the count of a clean run plus a margin).
 *
 * Sequences:
 *   net    two agents in this process over NET (127.0.0.1; the same-node paths), each with a
 *          region: metadata both ways, a WRITE with a notification, a READ from prepared
 *          lists, notifications both ways, deregistration, destruction
 *   tcp    the same with path=tcp, conns=1
 *   local  one agent, NET loopback WRITE with a notification to itself
 *   mdx    two NET agents with metadata listeners and memory from ixl_mem_alloc (memfds):
 *          ixl_md_send (labeled) to the peer's listener, ixl_md_fetch from it (followed with
 *          ixl_md_fetch_status), a WRITE with a notification via ixl_xfer_create_prepped, a
 *          READ, ixl_md_invalidate_local, deregister, ixl_mem_free, ixl_backend_destroy
 *   posix  one agent with POSIX (engine auto: io_uring where allowed), a file in path mode and
 *          one in fd mode: query, WRITE DRAM -> file, READ back, deregister,
 *          ixl_backend_destroy, destroy
 *   pool   the same with engine=threads
 *
 * Kinds: allocations; system calls; close and munmap (refused as the kernel fails them: close
 * releases the descriptor and returns -1, munmap keeps the mapping and returns -1).
 * Domains (mdx only, besides the test's thread): the fetch thread ixl_md_fetch starts, and
 * the agents' listener threads (one event loop each) that serve the peer's ixl_md_send,
 * ixl_md_fetch and ixl_md_invalidate_local; each counts its own calls, and a failure there must
 * reach the caller (ixl_md_fetch_status's reason, or the reply's text) without hanging.
 *
 * Every run must: not crash; when an API call fails, fail with a status and a last-error text
 * that names the refused call (for allocations: the allocator or "memory"); when every call
 * succeeds, leave correct data and deliver every notification; destroy cleanly (the sanitizer
 * build's LeakSanitizer checks leaks at exit; IXL_FAULTS_LEAKCHECK=1 checks after every run to
 * name the N that leaked), leave as many descriptors open as before, and close nothing twice
 * (a close that finds its descriptor not open is a finding in every run). Only the test's own
 * thread (or the one domain's threads) counts and fails calls, so the sweep is deterministic up
 * to the polling loops; the other background threads of NET and POSIX call through unhindered.
 *
 *   test_faults [net|tcp|local|mdx|posix|pool ...]   default: all
 *
 * Exit 0 passed, 1 failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl_plugin.h>

#include "check.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define BUF 65536u
#define WAIT_MS 10000

/* ---- the hooks ------------------------------------------------------------------------------ */

/* K_REL: close and munmap, refused the way the kernel fails them: close releases the
 * descriptor and still returns -1 (EIO), munmap leaves the mapping and returns -1. */
enum kind { K_ALLOC, K_SYS, K_REL, K_N };
static const char *const kind_name[K_N] = {"alloc", "sys", "close"};

static _Thread_local bool armed;       /* only the test's thread (or a fetch thread) counts */
static _Thread_local long counts[K_N]; /* calls seen, per kind */
static _Thread_local long target;      /* fail the target-th call of kind fail_kind (0: none) */
static _Thread_local enum kind fail_kind;
static _Thread_local const char *hit; /* the call refused, once it was */
static _Thread_local bool is_bg;      /* this is a fetch thread the test armed */

/* Two domains besides the test's thread, each a set of threads the test arms; their calls are
 * counted together (bg_counts) and the bg_target-th of kind bg_kind is refused, the call
 * refused landing in bg_hit. Runs of these domains refuse nothing on the test's thread.
 *   fetch: the thread ixl_md_fetch starts (the test's thread has inherit set meanwhile);
 *   serve: the agents' listener threads (started by ixl_agent_create while the test's thread
 *          has creating_listener set), over their whole life: their event loops accept, read,
 *          serve and answer the peer's ixl_md_send, ixl_md_fetch and ixl_md_invalidate_local. */
enum domain { D_CALLER, D_FETCH, D_SERVE, D_N };
static const char *const domain_name[D_N] = {"", "fetch-thread ", "serve-thread "};
static enum domain domain;
static _Thread_local bool inherit;
static _Thread_local bool creating_listener;
static long bg_target;
static enum kind bg_kind;
static atomic_long bg_counts[K_N];
static _Atomic(const char *) bg_hit;
static atomic_int bad_close; /* closes of descriptors that were not open (EBADF) */
static atomic_int bad_close_fd;

static struct ixl_sys real; /* the defaults */

static bool refuse(enum kind k, const char *name)
{
    if (!armed)
        return false;
    long n = is_bg ? atomic_fetch_add(&bg_counts[k], 1) + 1 : ++counts[k];
    if (target == 0 || k != fail_kind || n != target)
        return false;
    hit = name;
    if (is_bg)
        atomic_store(&bg_hit, name);
    return true;
}

static void *h_malloc(size_t n)
{
    if (refuse(K_ALLOC, "malloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.malloc(n);
}
static void *h_calloc(size_t n, size_t s)
{
    if (refuse(K_ALLOC, "calloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.calloc(n, s);
}
static void *h_realloc(void *p, size_t n)
{
    if (refuse(K_ALLOC, "realloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.realloc(p, n);
}
static char *h_strdup(const char *s)
{
    if (refuse(K_ALLOC, "strdup")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.strdup(s);
}
static char *h_strndup(const char *s, size_t n)
{
    if (refuse(K_ALLOC, "strndup")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.strndup(s, n);
}
static void *h_aligned_alloc(size_t a, size_t n)
{
    if (refuse(K_ALLOC, "aligned_alloc")) {
        errno = ENOMEM;
        return NULL;
    }
    return real.aligned_alloc(a, n);
}
static int h_posix_memalign(void **out, size_t a, size_t n)
{
    if (refuse(K_ALLOC, "posix_memalign"))
        return ENOMEM;
    return real.posix_memalign(out, a, n);
}

/* System calls fail the way they do in practice: -1 with a plausible errno. */
#define SYS_HOOK(ret, name, err, params, args) \
    static ret h_##name params                 \
    {                                          \
        if (refuse(K_SYS, #name)) {            \
            errno = err;                       \
            return (ret)-1;                    \
        }                                      \
        return real.name args;                 \
    }

SYS_HOOK(int, open, EMFILE, (const char *p, int f, mode_t m), (p, f, m))
SYS_HOOK(int, openat, EMFILE, (int d, const char *p, int f, mode_t m), (d, p, f, m))
SYS_HOOK(ssize_t, read, EIO, (int fd, void *b, size_t n), (fd, b, n))
SYS_HOOK(ssize_t, write, EIO, (int fd, const void *b, size_t n), (fd, b, n))
SYS_HOOK(ssize_t, pread, EIO, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
SYS_HOOK(ssize_t, pwrite, EIO, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
SYS_HOOK(ssize_t, preadv, EIO, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o))
SYS_HOOK(ssize_t, pwritev, EIO, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o))
SYS_HOOK(int, fstat, EIO, (int fd, struct stat *st), (fd, st))
SYS_HOOK(int, ftruncate, EIO, (int fd, off_t n), (fd, n))
SYS_HOOK(int, fallocate, ENOSPC, (int fd, int m, off_t o, off_t n), (fd, m, o, n))
SYS_HOOK(int, memfd_create, EMFILE, (const char *n, unsigned f), (n, f))
SYS_HOOK(int, eventfd, EMFILE, (unsigned v, int f), (v, f))
SYS_HOOK(int, pipe2, EMFILE, (int fds[2], int f), (fds, f))
SYS_HOOK(int, fcntl, EBADF, (int fd, int c, long a), (fd, c, a))
SYS_HOOK(int, socket, EMFILE, (int d, int t, int p), (d, t, p))
SYS_HOOK(int, bind, EADDRINUSE, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))
SYS_HOOK(int, listen, EADDRINUSE, (int fd, int b), (fd, b))
SYS_HOOK(int, accept4, EMFILE, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f))
SYS_HOOK(int, connect, ECONNREFUSED, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))
SYS_HOOK(int, setsockopt, ENOMEM, (int fd, int lv, int n, const void *v, socklen_t l),
         (fd, lv, n, v, l))
SYS_HOOK(int, getsockopt, ENOMEM, (int fd, int lv, int n, void *v, socklen_t *l), (fd, lv, n, v, l))
SYS_HOOK(int, getsockname, ENOBUFS, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
SYS_HOOK(ssize_t, send, ECONNRESET, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
SYS_HOOK(ssize_t, sendmsg, ECONNRESET, (int fd, const struct msghdr *m, int f), (fd, m, f))
SYS_HOOK(ssize_t, recv, ECONNRESET, (int fd, void *b, size_t n, int f), (fd, b, n, f))
SYS_HOOK(ssize_t, recvmsg, ECONNRESET, (int fd, struct msghdr *m, int f), (fd, m, f))
SYS_HOOK(int, poll, ENOMEM, (struct pollfd * p, unsigned long n, int t), (p, n, t))
SYS_HOOK(int, epoll_create1, EMFILE, (int f), (f))
SYS_HOOK(int, epoll_ctl, ENOMEM, (int e, int o, int fd, struct epoll_event *v), (e, o, fd, v))
SYS_HOOK(int, epoll_wait, EINVAL, (int e, struct epoll_event *v, int m, int t), (e, v, m, t))
SYS_HOOK(ssize_t, process_vm_readv, EFAULT,
         (pid_t p, const struct iovec *l, unsigned long nl, const struct iovec *r, unsigned long nr,
          unsigned long f),
         (p, l, nl, r, nr, f))
SYS_HOOK(ssize_t, process_vm_writev, EFAULT,
         (pid_t p, const struct iovec *l, unsigned long nl, const struct iovec *r, unsigned long nr,
          unsigned long f),
         (p, l, nl, r, nr, f))
SYS_HOOK(ssize_t, getrandom, ENOSYS, (void *b, size_t n, unsigned f), (b, n, f))

static void *h_mmap(void *a, size_t n, int p, int f, int fd, off_t o)
{
    if (refuse(K_SYS, "mmap")) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return real.mmap(a, n, p, f, fd, o);
}
struct tramp {
    void *(*fn)(void *);
    void *arg;
};

static void *bg_main(void *p)
{
    struct tramp tr = *(struct tramp *)p;
    free(p);
    is_bg = true;
    target = bg_target;
    fail_kind = bg_kind;
    armed = true;
    void *r = tr.fn(tr.arg);
    armed = false;
    return r;
}

static int h_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    if (refuse(K_SYS, "pthread_create"))
        return EAGAIN;
    if ((domain == D_FETCH && armed && inherit && !is_bg) ||
        (domain == D_SERVE && armed && creating_listener && !is_bg)) {
        struct tramp *tr = malloc(sizeof(*tr));
        CHECK(tr != NULL);
        *tr = (struct tramp){fn, arg};
        int rc = real.pthread_create(t, a, bg_main, tr);
        if (rc != 0)
            free(tr);
        return rc;
    }
    return real.pthread_create(t, a, fn, arg);
}
static int h_close(int fd)
{
    int r = real.close(fd);
    if (r != 0 && errno == EBADF) {
        atomic_fetch_add(&bad_close, 1);
        atomic_store(&bad_close_fd, fd);
    }
    if (refuse(K_REL, "close")) {
        errno = EIO; /* Linux: the descriptor is gone even when close reports an error */
        return -1;
    }
    return r;
}
static int h_munmap(void *p, size_t n)
{
    if (refuse(K_REL, "munmap")) {
        errno = EINVAL; /* the mapping stays */
        return -1;
    }
    return real.munmap(p, n);
}
static int h_getaddrinfo(const char *n, const char *s, const struct addrinfo *h,
                         struct addrinfo **r)
{
    if (refuse(K_SYS, "getaddrinfo"))
        return EAI_AGAIN;
    return real.getaddrinfo(n, s, h, r);
}
static int h_io_uring_queue_init(unsigned e, struct io_uring *r, unsigned f)
{
    if (refuse(K_SYS, "io_uring_queue_init"))
        return -ENOMEM;
    return real.io_uring_queue_init(e, r, f);
}

#define SET(name) CHECK_RC(ixl_syscall_set(#name, (ixl_syscall_fn)h_##name), IXL_OK)

static void install(void)
{
    /* Enumerate first: every name resolves and the defaults are saved. */
    int n = 0;
    for (const char *s = ixl_syscall_next(NULL); s; s = ixl_syscall_next(s)) {
        CHECK(ixl_syscall_get(s) != NULL);
        n++;
    }
    CHECK(n >= 40);
    CHECK(ixl_syscall_get("no_such_call") == NULL);
    CHECK_RC(ixl_syscall_set("no_such_call", NULL), IXL_ERR_NOT_FOUND);
#define GET(name) real.name = (__typeof__(real.name))ixl_syscall_get(#name)
    GET(malloc), GET(calloc), GET(realloc), GET(strdup), GET(strndup), GET(aligned_alloc);
    GET(posix_memalign), GET(open), GET(openat), GET(read), GET(write), GET(pread), GET(pwrite);
    GET(preadv), GET(pwritev), GET(fstat), GET(ftruncate), GET(fallocate), GET(mmap);
    GET(memfd_create), GET(eventfd), GET(pipe2), GET(fcntl), GET(socket), GET(bind), GET(listen);
    GET(accept4), GET(connect), GET(setsockopt), GET(getsockopt), GET(getsockname), GET(send);
    GET(sendmsg), GET(recv), GET(recvmsg), GET(getaddrinfo), GET(poll), GET(epoll_create1);
    GET(epoll_ctl), GET(epoll_wait), GET(pthread_create), GET(process_vm_readv);
    GET(process_vm_writev), GET(getrandom), GET(io_uring_queue_init), GET(close), GET(munmap);
    SET(malloc), SET(calloc), SET(realloc), SET(strdup), SET(strndup), SET(aligned_alloc);
    SET(posix_memalign), SET(open), SET(openat), SET(read), SET(write), SET(pread), SET(pwrite);
    SET(preadv), SET(pwritev), SET(fstat), SET(ftruncate), SET(fallocate), SET(mmap);
    SET(memfd_create), SET(eventfd), SET(pipe2), SET(fcntl), SET(socket), SET(bind), SET(listen);
    SET(accept4), SET(connect), SET(setsockopt), SET(getsockopt), SET(getsockname), SET(send);
    SET(sendmsg), SET(recv), SET(recvmsg), SET(getaddrinfo), SET(poll), SET(epoll_create1);
    SET(epoll_ctl), SET(epoll_wait), SET(pthread_create), SET(process_vm_readv);
    SET(process_vm_writev), SET(getrandom), SET(io_uring_queue_init), SET(close), SET(munmap);
    /* set(NULL) restores the default; set it back again. */
    CHECK_RC(ixl_syscall_set("malloc", NULL), IXL_OK);
    CHECK(ixl_syscall_get("malloc") == (ixl_syscall_fn)real.malloc);
    SET(malloc);
}

/* ---- one run -------------------------------------------------------------------------------- */

static int n_bad; /* findings */
static char run_label[96];

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAULT %s: ", run_label);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    n_bad++;
}

static bool is_alloc(const char *name)
{
    return strstr(name, "alloc") || strstr(name, "strdup") || strstr(name, "strndup") ||
           strcmp(name, "posix_memalign") == 0;
}

/* An API call of the sequence failed with rc: was it the refused call, and does the text say
 * so? Returns true (the run stops there). */
static bool failed(const char *what, int rc, const char *text)
{
    const char *h = hit ? hit : atomic_load(&bg_hit);
    if (h == NULL) {
        bad("%s failed (%s: %s) with nothing refused", what, ixl_strerror(rc), text);
        return true;
    }
    if (rc >= 0)
        bad("%s: status %d after %s was refused", what, rc, h);
    bool io = strcmp(h, "send") == 0 || strcmp(h, "recv") == 0 || strcmp(h, "poll") == 0;
    if (domain == D_SERVE && io && text != NULL &&
        (strstr(text, "closed it without answering") || strstr(text, "recv() failed"))) {
        /* the serving thread's I/O failed: the client can only see the connection end */
    } else if (text == NULL || text[0] == '\0') {
        bad("%s failed (%s) after %s was refused, with no error text", what, ixl_strerror(rc), h);
    } else if (strstr(text, h) == NULL &&
               !(is_alloc(h) && (strcasestr(text, "memory") || strstr(text, "alloc")))) {
        bad("%s failed (%s) after %s was refused; the text does not name it: %s", what,
            ixl_strerror(rc), h, text);
    }
    return true;
}

#define STEP(agent, expr)                                           \
    do {                                                            \
        int rc_ = (expr);                                           \
        if (rc_ < 0 || (rc_ != IXL_OK && rc_ != IXL_IN_PROGRESS)) { \
            failed(#expr, rc_, ixl_agent_last_error(agent));        \
            goto out;                                               \
        }                                                           \
    } while (0)

static uint8_t *bufa, *bufb;
static char tmpdir[64];

static int load_md(struct ixl_agent *into, struct ixl_agent *from)
{
    void *blob = NULL;
    size_t len = 0;
    int rc = ixl_md_get(from, NULL, &blob, &len);
    if (rc != IXL_OK) {
        failed("ixl_md_get", rc, ixl_agent_last_error(from));
        return rc;
    }
    char name[IXL_NAME_MAX];
    rc = ixl_md_load(into, blob, len, name, sizeof(name));
    ixl_free(blob);
    if (rc != IXL_OK) {
        failed("ixl_md_load", rc, ixl_agent_last_error(into));
        return rc;
    }
    return IXL_OK;
}

static int make_agent2(const char *name, const char *plugin, const struct ixl_kv *kv, size_t n,
                       bool listen, struct ixl_agent **out)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    if (listen) {
        ap.field_mask |= IXL_AGENT_F_LISTEN_PORT;
        ap.listen_port = 0; /* any free port, on 127.0.0.1 */
    }
    struct ixl_agent *a = NULL;
    creating_listener = listen;
    int rc = ixl_agent_create(name, &ap, &a);
    creating_listener = false;
    if (rc != IXL_OK) {
        failed("ixl_agent_create", rc, ixl_agent_last_error(NULL));
        return rc;
    }
    if (a == NULL) { /* a refusal reported as success: the caller would use a bad pointer */
        bad("ixl_agent_create returned IXL_OK without an agent (%s)", ixl_agent_last_error(NULL));
        return IXL_ERR_SYSTEM;
    }
    rc = ixl_backend_create(a, plugin, kv, n, NULL);
    if (rc != IXL_OK) {
        failed("ixl_backend_create", rc, ixl_agent_last_error(a));
        ixl_agent_destroy(a);
        return rc;
    }
    *out = a;
    return IXL_OK;
}

static int make_agent(const char *name, const char *plugin, const struct ixl_kv *kv, size_t n,
                      struct ixl_agent **out)
{
    return make_agent2(name, plugin, kv, n, false, out);
}

/* Destroys the agent's only backend (ixl_backend_destroy), as a step. */
static int destroy_backend(struct ixl_agent *a)
{
    struct ixl_backend *be = NULL;
    int rc = ixl_backend_get(a, 0, &be);
    if (rc != IXL_OK) {
        bad("ixl_backend_get: %s", ixl_agent_last_error(a));
        return rc;
    }
    rc = ixl_backend_destroy(be);
    if (rc != IXL_OK) {
        failed("ixl_backend_destroy", rc, ixl_agent_last_error(a));
        return rc;
    }
    if (ixl_backend_count(a) != 0)
        bad("ixl_backend_destroy succeeded but the agent still counts %zu backends",
            ixl_backend_count(a));
    return IXL_OK;
}

static int xfer_run(struct ixl_agent *a, struct ixl_xfer *x)
{
    int rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, WAIT_MS);
    if (rc == IXL_ERR_TIMEOUT)
        bad("a transfer did not complete in %d ms", WAIT_MS);
    if (rc != IXL_OK)
        failed("ixl_xfer_post/wait", rc, ixl_agent_last_error(a));
    return rc;
}

static int dlist1(uint64_t addr, uint64_t len, uint64_t dev, enum ixl_mem type,
                  struct ixl_dlist **out)
{
    struct ixl_dlist *l = NULL;
    int rc = ixl_dlist_create(type, 1, &l);
    if (rc == IXL_OK) {
        struct ixl_desc d = {addr, len, dev};
        rc = ixl_dlist_add(l, &d, 1);
        if (rc != IXL_OK)
            ixl_dlist_destroy(l);
    }
    if (rc != IXL_OK) {
        failed("ixl_dlist", rc, "out of memory (dlist)");
        return rc;
    }
    *out = l;
    return IXL_OK;
}

/* Waits for a notification msg from sender at agent a; false after WAIT_MS. */
static int wait_notif(struct ixl_agent *a, const char *sender, const char *msg)
{
    for (int i = 0; i < WAIT_MS / 2; i++) {
        struct ixl_notif_batch *b = NULL;
        int rc = ixl_notif_drain(a, &b);
        if (rc != IXL_OK) {
            failed("ixl_notif_drain", rc, ixl_agent_last_error(a));
            return rc;
        }
        bool got = false;
        for (size_t k = 0; b && k < b->count; k++)
            if (strcmp(b->items[k].agent, sender) == 0 && b->items[k].len == strlen(msg) &&
                memcmp(b->items[k].msg, msg, b->items[k].len) == 0)
                got = true;
        ixl_free(b);
        if (got)
            return IXL_OK;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    bad("notification '%s' from %s never arrived", msg, sender);
    return IXL_ERR_TIMEOUT;
}

/* NET between agents a and b in this process (loopback: b is a). */
static void seq_net(const struct ixl_kv *kv, size_t nkv, bool loopback)
{
    struct ixl_agent *a = NULL, *b = NULL;
    struct ixl_xfer *x = NULL;
    struct ixl_dlist *la = NULL, *lb = NULL;
    struct ixl_prep *pa = NULL, *pb = NULL;
    memset(bufa, 0x11, BUF);
    memset(bufb, 0x22, BUF);
    if (make_agent("fa", "NET", kv, nkv, &a) != IXL_OK)
        goto out;
    if (loopback)
        b = a;
    else if (make_agent("fb", "NET", kv, nkv, &b) != IXL_OK)
        goto out;
    struct ixl_reg_desc ra = {(uintptr_t)bufa, BUF, 0, NULL, 0};
    struct ixl_reg_desc rb = {(uintptr_t)bufb, BUF, 0, NULL, 0};
    STEP(a, ixl_mem_register(a, IXL_MEM_DRAM, &ra, 1, NULL));
    STEP(b, ixl_mem_register(b, IXL_MEM_DRAM, &rb, 1, NULL));
    if (!loopback && (load_md(a, b) != IXL_OK || load_md(b, a) != IXL_OK))
        goto out;
    const char *bn = ixl_agent_name(b);
    /* WRITE a[0..BUF/2) -> b[0..BUF/2) with a notification. */
    if (dlist1((uintptr_t)bufa, BUF / 2, 0, IXL_MEM_DRAM, &la) != IXL_OK ||
        dlist1((uintptr_t)bufb, BUF / 2, 0, IXL_MEM_DRAM, &lb) != IXL_OK)
        goto out;
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_NOTIF, .notif = "w1", .notif_len = 2};
    STEP(a, ixl_xfer_create(a, IXL_OP_WRITE, la, lb, bn, &xp, &x));
    if (xfer_run(a, x) != IXL_OK)
        goto out;
    STEP(a, ixl_xfer_release(x));
    x = NULL;
    if (wait_notif(b, "fa", "w1") != IXL_OK)
        goto out;
    /* READ b[BUF/2..BUF) -> a[BUF/2..BUF) from prepared lists. */
    ixl_dlist_destroy(la);
    ixl_dlist_destroy(lb);
    la = lb = NULL;
    if (dlist1((uintptr_t)bufa + BUF / 2, BUF / 2, 0, IXL_MEM_DRAM, &la) != IXL_OK ||
        dlist1((uintptr_t)bufb + BUF / 2, BUF / 2, 0, IXL_MEM_DRAM, &lb) != IXL_OK)
        goto out;
    STEP(a, ixl_prep_create(a, NULL, la, NULL, &pa));
    STEP(a, ixl_prep_create(a, bn, lb, NULL, &pb));
    int64_t i0 = 0;
    STEP(a, ixl_xfer_create_prepped(a, IXL_OP_READ, pa, &i0, pb, &i0, 1, NULL, &x));
    if (xfer_run(a, x) != IXL_OK)
        goto out;
    STEP(a, ixl_xfer_release(x));
    x = NULL;
    /* Notifications outside transfers, both ways. */
    STEP(a, ixl_notif_send(a, bn, "n1", 2, NULL));
    if (wait_notif(b, "fa", "n1") != IXL_OK)
        goto out;
    STEP(b, ixl_notif_send(b, "fa", "n2", 2, NULL));
    if (wait_notif(a, bn, "n2") != IXL_OK)
        goto out;
    for (size_t i = 0; i < BUF / 2; i++)
        if (bufb[i] != 0x11 || bufa[BUF / 2 + i] != 0x22) {
            bad("every call succeeded but the data is wrong at %zu", i);
            break;
        }
    ixl_prep_destroy(pa);
    ixl_prep_destroy(pb);
    pa = pb = NULL;
    STEP(a, ixl_mem_deregister(a, IXL_MEM_DRAM, &ra, 1, NULL));
    if (!loopback)
        STEP(b, ixl_mem_deregister(b, IXL_MEM_DRAM, &rb, 1, NULL));
out:
    if (x != NULL && ixl_xfer_release(x) != IXL_OK)
        bad("ixl_xfer_release failed after the failure: %s", ixl_agent_last_error(a));
    ixl_prep_destroy(pa);
    ixl_prep_destroy(pb);
    ixl_dlist_destroy(la);
    ixl_dlist_destroy(lb);
    if (b != a)
        ixl_agent_destroy(b);
    ixl_agent_destroy(a);
}

/* Waits for the fetch of remote at a to end (ixl_md_fetch_status); a failure must carry a
 * reason that names the refused call, and it must never stay in progress. */
static int wait_fetch(struct ixl_agent *a, const char *remote)
{
    for (int i = 0; i < WAIT_MS / 2; i++) {
        int rc = ixl_md_fetch_status(a, remote);
        if (rc == IXL_OK)
            return IXL_OK;
        if (rc != IXL_IN_PROGRESS) {
            failed("ixl_md_fetch_status", rc, ixl_agent_last_error(a));
            return rc;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    bad("the fetch of '%s' was still in progress after %d ms", remote, WAIT_MS);
    return IXL_ERR_TIMEOUT;
}

/* NET between two agents that exchange metadata over their listeners, with memory from
 * ixl_mem_alloc (memfds the other agent maps): send (labeled) and fetch, a WRITE with a
 * notification from prepared lists, a READ, invalidation, deregistration, ixl_mem_free,
 * ixl_backend_destroy, destruction. The fetch thread's own calls are the "fetch" domain. */
static void seq_mdx(const struct ixl_kv *kv, size_t nkv)
{
    struct ixl_agent *a = NULL, *b = NULL;
    struct ixl_xfer *x = NULL;
    struct ixl_dlist *la = NULL, *lb = NULL;
    struct ixl_prep *pa = NULL, *pb = NULL;
    uint8_t *ma = NULL, *mb = NULL;
    bool reg_a = false, reg_b = false;
    struct ixl_reg_desc ra = {0}, rb = {0};
    if (make_agent2("fa", "NET", kv, nkv, true, &a) != IXL_OK ||
        make_agent2("fb", "NET", kv, nkv, true, &b) != IXL_OK)
        goto out;
    uint16_t port_b = 0;
    STEP(b, ixl_agent_listen_port(b, &port_b));
    STEP(a, ixl_mem_alloc(a, IXL_MEM_DRAM, BUF, NULL, (void **)&ma));
    STEP(b, ixl_mem_alloc(b, IXL_MEM_DRAM, BUF, NULL, (void **)&mb));
    memset(ma, 0x44, BUF);
    memset(mb, 0x55, BUF);
    ra = (struct ixl_reg_desc){(uintptr_t)ma, BUF, 0, NULL, 0};
    rb = (struct ixl_reg_desc){(uintptr_t)mb, BUF, 0, NULL, 0};
    STEP(a, ixl_mem_register(a, IXL_MEM_DRAM, &ra, 1, NULL));
    reg_a = true;
    STEP(b, ixl_mem_register(b, IXL_MEM_DRAM, &rb, 1, NULL));
    reg_b = true;
    /* a's metadata to b's listener (kept under a label at a), b's fetched by a */
    struct ixl_peer to_b = {"127.0.0.1", port_b};
    struct ixl_md_params mp = {.field_mask = IXL_MD_F_LABEL, .label = "lab"};
    int src = ixl_md_send(a, &to_b, &mp);
    STEP(a, src);
    if (ixl_remote_check(b, "fa", NULL) != IXL_OK)
        bad("ixl_md_send succeeded but b has not loaded a");
    inherit = true;
    int frc = ixl_md_fetch(a, "fb", &to_b, NULL);
    inherit = false;
    STEP(a, frc);
    frc = wait_fetch(a, "fb");
    if (frc != IXL_OK)
        goto out;
    /* WRITE ma[0..BUF/2) -> mb[0..BUF/2) from prepared lists, with a notification */
    if (dlist1((uintptr_t)ma, BUF / 2, 0, IXL_MEM_DRAM, &la) != IXL_OK ||
        dlist1((uintptr_t)mb, BUF / 2, 0, IXL_MEM_DRAM, &lb) != IXL_OK)
        goto out;
    STEP(a, ixl_prep_create(a, NULL, la, NULL, &pa));
    STEP(a, ixl_prep_create(a, "fb", lb, NULL, &pb));
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_NOTIF, .notif = "m1", .notif_len = 2};
    int64_t i0 = 0;
    STEP(a, ixl_xfer_create_prepped(a, IXL_OP_WRITE, pa, &i0, pb, &i0, 1, &xp, &x));
    if (xfer_run(a, x) != IXL_OK)
        goto out;
    STEP(a, ixl_xfer_release(x));
    x = NULL;
    if (wait_notif(b, "fa", "m1") != IXL_OK)
        goto out;
    /* READ mb[BUF/2..BUF) -> ma[BUF/2..BUF) */
    ixl_dlist_destroy(la);
    ixl_dlist_destroy(lb);
    la = lb = NULL;
    if (dlist1((uintptr_t)ma + BUF / 2, BUF / 2, 0, IXL_MEM_DRAM, &la) != IXL_OK ||
        dlist1((uintptr_t)mb + BUF / 2, BUF / 2, 0, IXL_MEM_DRAM, &lb) != IXL_OK)
        goto out;
    STEP(a, ixl_xfer_create(a, IXL_OP_READ, la, lb, "fb", NULL, &x));
    if (xfer_run(a, x) != IXL_OK)
        goto out;
    STEP(a, ixl_xfer_release(x));
    x = NULL;
    for (size_t i = 0; i < BUF / 2; i++)
        if (mb[i] != 0x44 || ma[BUF / 2 + i] != 0x55) {
            bad("every call succeeded but the data is wrong at %zu", i);
            break;
        }
    ixl_prep_destroy(pa);
    ixl_prep_destroy(pb);
    pa = pb = NULL;
    /* b drops a (a sent it and a fetched from b: b is a's peer) */
    int irc = ixl_md_invalidate_local(a, NULL);
    STEP(a, irc);
    if (ixl_remote_check(b, "fa", NULL) != IXL_ERR_NOT_FOUND)
        bad("ixl_md_invalidate_local succeeded but b still has a loaded");
    STEP(a, ixl_mem_deregister(a, IXL_MEM_DRAM, &ra, 1, NULL));
    reg_a = false;
    STEP(a, ixl_mem_free(a, ma));
    ma = NULL;
    if (destroy_backend(a) != IXL_OK)
        goto out;
    STEP(b, ixl_mem_deregister(b, IXL_MEM_DRAM, &rb, 1, NULL));
    reg_b = false;
out:
    if (x != NULL && ixl_xfer_release(x) != IXL_OK)
        bad("ixl_xfer_release failed after the failure: %s", ixl_agent_last_error(a));
    ixl_prep_destroy(pa);
    ixl_prep_destroy(pb);
    ixl_dlist_destroy(la);
    ixl_dlist_destroy(lb);
    /* what is left: deregistered and freed here when the calls succeed, else by the destroy */
    if (reg_a)
        reg_a = ixl_mem_deregister(a, IXL_MEM_DRAM, &ra, 1, NULL) != IXL_OK;
    if (!reg_a && ma != NULL && ixl_mem_free(a, ma) != IXL_OK) {
    }
    if (reg_b)
        reg_b = ixl_mem_deregister(b, IXL_MEM_DRAM, &rb, 1, NULL) != IXL_OK;
    if (!reg_b && mb != NULL && ixl_mem_free(b, mb) != IXL_OK) {
    }
    ixl_agent_destroy(b);
    ixl_agent_destroy(a);
}

/* POSIX: a FILE in path mode and one in fd mode, DRAM <-> file within one agent. */
static void seq_posix(const struct ixl_kv *kv, size_t nkv)
{
    struct ixl_agent *a = NULL;
    struct ixl_xfer *x = NULL;
    struct ixl_dlist *la = NULL, *lf = NULL;
    char path1[128], path2[128], bytes1[160];
    snprintf(path1, sizeof(path1), "%s/f1", tmpdir);
    snprintf(path2, sizeof(path2), "%s/f2", tmpdir);
    unlink(path1);
    int fd = open(path2, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    memset(bufa, 0x33, BUF);
    memset(bufb, 0, BUF);
    if (make_agent("fp", "POSIX", kv, nkv, &a) != IXL_OK)
        goto out;
    struct ixl_reg_desc rd[2] = {{(uintptr_t)bufa, BUF, 0, NULL, 0},
                                 {(uintptr_t)bufb, BUF, 0, NULL, 0}};
    STEP(a, ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL));
    snprintf(bytes1, sizeof(bytes1), "rw,create:%s", path1);
    struct ixl_reg_desc rf[2] = {{0, 0, IXL_DEV_NONE, bytes1, strlen(bytes1)},
                                 {0, 0, (uint64_t)fd, NULL, 0}};
    uint64_t devs[2];
    struct ixl_reg_params rp = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = devs};
    struct ixl_mem_query q[2];
    STEP(a, ixl_mem_query(a, IXL_MEM_FILE, rf, 2, NULL, q));
    STEP(a, ixl_mem_register(a, IXL_MEM_FILE, rf, 2, &rp));
    for (int f = 0; f < 2; f++) {
        /* WRITE bufa -> file, READ file -> bufb. */
        if (dlist1((uintptr_t)bufa, BUF, 0, IXL_MEM_DRAM, &la) != IXL_OK ||
            dlist1(0, BUF, devs[f], IXL_MEM_FILE, &lf) != IXL_OK)
            goto out;
        STEP(a, ixl_xfer_create(a, IXL_OP_WRITE, la, lf, "fp", NULL, &x));
        if (xfer_run(a, x) != IXL_OK)
            goto out;
        STEP(a, ixl_xfer_release(x));
        x = NULL;
        ixl_dlist_destroy(la);
        la = NULL;
        if (dlist1((uintptr_t)bufb, BUF, 0, IXL_MEM_DRAM, &la) != IXL_OK)
            goto out;
        STEP(a, ixl_xfer_create(a, IXL_OP_READ, la, lf, "fp", NULL, &x));
        if (xfer_run(a, x) != IXL_OK)
            goto out;
        STEP(a, ixl_xfer_release(x));
        x = NULL;
        ixl_dlist_destroy(la);
        ixl_dlist_destroy(lf);
        la = lf = NULL;
        if (memcmp(bufa, bufb, BUF) != 0)
            bad("every call succeeded but file %d reads back wrong", f);
        memset(bufb, 0, BUF);
    }
    STEP(a,
         ixl_mem_deregister(
             a, IXL_MEM_FILE,
             (struct ixl_reg_desc[]){{0, 0, devs[0], NULL, 0}, {0, 0, devs[1], NULL, 0}}, 2, NULL));
    STEP(a, ixl_mem_deregister(a, IXL_MEM_DRAM, rd, 2, NULL));
    if (destroy_backend(a) != IXL_OK)
        goto out;
out:
    if (x != NULL && ixl_xfer_release(x) != IXL_OK)
        bad("ixl_xfer_release failed after the failure: %s", ixl_agent_last_error(a));
    ixl_dlist_destroy(la);
    ixl_dlist_destroy(lf);
    ixl_agent_destroy(a);
    close(fd);
}

/* ---- the sweep ------------------------------------------------------------------------------ */

struct seq {
    const char *name;
    void (*run)(const void *arg);
    const void *arg;
    bool fetch; /* it calls ixl_md_fetch: sweep the fetch thread's calls too */
};

/* A generous timeout: a loaded machine (ctest -j) must not make a HELLO look unanswered. */
static const struct ixl_kv net_kv[] = {{"timeout_ms", "3000"}};
static const struct ixl_kv tcp_kv[] = {{"timeout_ms", "3000"}, {"path", "tcp"}, {"conns", "1"}};
static const struct ixl_kv auto_kv[] = {{"engine", "auto"}};
static const struct ixl_kv pool_kv[] = {{"engine", "threads"}, {"threads", "1"}};

static void run_net(const void *arg)
{
    seq_net(net_kv, 1, arg != NULL);
}
static void run_tcp(const void *arg)
{
    (void)arg;
    seq_net(tcp_kv, 3, false);
}
static void run_mdx(const void *arg)
{
    (void)arg;
    seq_mdx(net_kv, 1);
}
static void run_posix(const void *arg)
{
    (void)arg;
    seq_posix(auto_kv, 1);
}
static void run_pool(const void *arg)
{
    (void)arg;
    seq_posix(pool_kv, 2);
}

static const struct seq seqs[] = {
    {"net", run_net, NULL, false},         {"tcp", run_tcp, NULL, false},
    {"local", run_net, "loopback", false}, {"mdx", run_mdx, NULL, true},
    {"posix", run_posix, NULL, false},     {"pool", run_pool, NULL, false},
};

static bool leakcheck;
static long points;      /* injection points exercised (runs in which a call was refused) */
static int fds_baseline; /* descriptors open before the sweep */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* One run: the n-th call of kind k refused on the test's thread or in domain d; n 0: none.
 * Returns the refused call, or NULL if none was reached. */
static const char *one(const struct seq *s, enum kind k, long n, enum domain d)
{
    bool bg = d != D_CALLER;
    domain = d;
    memset(counts, 0, sizeof(counts));
    for (int i = 0; i < K_N; i++)
        atomic_store(&bg_counts[i], 0);
    target = bg ? 0 : n;
    fail_kind = k;
    bg_target = bg ? n : 0;
    bg_kind = k;
    hit = NULL;
    atomic_store(&bg_hit, NULL);
    atomic_store(&bad_close, 0);
    snprintf(run_label, sizeof(run_label), "%s %s%s #%ld", s->name, domain_name[d], kind_name[k],
             n);
    armed = true;
    s->run(s->arg);
    armed = false;
    const char *h = bg ? atomic_load(&bg_hit) : hit;
    if (atomic_load(&bad_close) != 0)
        bad("%d close() of a descriptor that was not open (the last: %d; refused %s)",
            atomic_load(&bad_close), atomic_load(&bad_close_fd), h ? h : "nothing");
    int fds = count_fds();
    if (fds != fds_baseline) {
        bad("%d descriptors open after the run, %d before (refused %s)", fds, fds_baseline,
            h ? h : "nothing");
        fds_baseline = fds; /* report each leak once */
    }
#ifdef HAVE_LSAN
    if (leakcheck && __lsan_do_recoverable_leak_check() != 0)
        bad("leak (refused %s)", h ? h : "nothing");
#endif
    return h;
}

static void sweep(const struct seq *s)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int bad_before = n_bad;
    one(s, K_ALLOC, 0, D_CALLER); /* clean run: the counts */
    long clean[K_N];
    memcpy(clean, counts, sizeof(clean));
    if (n_bad != bad_before) {
        fprintf(stderr, "test_faults: %s fails without faults\n", s->name);
        return;
    }
    long done[D_N][K_N] = {{0}};
    for (int d = 0; d < (s->fetch ? D_N : 1); d++)
        for (int k = 0; k < K_N; k++) {
            /* A margin over the clean count: a refused call may make the calls after it differ
             * (the other domains' counts are not known beforehand: until one completes). */
            long cap = d ? 100000 : clean[k] + clean[k] / 4 + 8;
            for (long n = 1; n <= cap; n++) {
                if (one(s, (enum kind)k, n, (enum domain)d) == NULL)
                    break; /* completed without reaching n */
                done[d][k]++;
            }
        }
    long total = 0;
    for (int bg = 0; bg < D_N; bg++)
        for (int k = 0; k < K_N; k++)
            total += done[bg][k];
    points += total;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%-6s clean run: %ld allocations, %ld system calls, %ld close/munmap; refused %ld + %ld "
           "+ %ld",
           s->name, clean[K_ALLOC], clean[K_SYS], clean[K_REL], done[0][K_ALLOC], done[0][K_SYS],
           done[0][K_REL]);
    if (s->fetch)
        printf(", on the fetch thread %ld + %ld + %ld, on the serving threads %ld + %ld + %ld",
               done[D_FETCH][K_ALLOC], done[D_FETCH][K_SYS], done[D_FETCH][K_REL],
               done[D_SERVE][K_ALLOC], done[D_SERVE][K_SYS], done[D_SERVE][K_REL]);
    printf("; %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    fflush(stdout);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_faults: alarm: a run hung\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
    }
    _exit(1);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(600);
    const char *lc = getenv("IXL_FAULTS_LEAKCHECK");
    leakcheck = lc && strcmp(lc, "1") == 0;
    ixl_log_set_level(IXL_LOG_NONE);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/ixl_faults_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    CHECK(posix_memalign((void **)&bufa, 4096, BUF) == 0);
    CHECK(posix_memalign((void **)&bufb, 4096, BUF) == 0);
    /* Warm up unhooked: the plugin manager's one-time discovery is not part of a sequence. */
    for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
        seqs[i].run(seqs[i].arg);
    CHECK(n_bad == 0);
    install();
    fds_baseline = count_fds();
    for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
        bool want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], seqs[i].name) == 0;
        if (want)
            sweep(&seqs[i]);
    }
    for (const char *s = ixl_syscall_next(NULL); s; s = ixl_syscall_next(s))
        CHECK_RC(ixl_syscall_set(s, NULL), IXL_OK);
    char p[160];
    snprintf(p, sizeof(p), "%s/f1", tmpdir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/f2", tmpdir);
    unlink(p);
    rmdir(tmpdir);
    free(bufa);
    free(bufb);
    printf("test_faults: %ld injection points, %d findings\n", points, n_bad);
    return n_bad ? 1 : 0;
}

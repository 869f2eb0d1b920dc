/*
 * The table of allocation and system-call hooks (struct ixl_sys in ixl_plugin.h). One
 * process-wide table: the core calls through it (src/util/sys.h), plugins through
 * ixl_host.sys. Entries are plain pointers read without locks, which is why ixl_syscall_set()
 * is documented as for use while no other thread is inside ixl.
 */
#include "util/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ixl/ixl.h>

/* libixl links liburing when the POSIX plugin was built with it; the core only refers to it
 * weakly so that a build without liburing (and the internal static core) still links. */
extern int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
    __attribute__((weak));

static int def_open(const char *path, int flags, mode_t mode)
{
    return open(path, flags, mode);
}

static int def_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return openat(dirfd, path, flags, mode);
}

static int def_fcntl(int fd, int cmd, long arg)
{
    return fcntl(fd, cmd, arg);
}

static int def_poll(struct pollfd *fds, unsigned long n, int timeout_ms)
{
    return poll(fds, (nfds_t)n, timeout_ms);
}

static int def_memfd_create(const char *name, unsigned flags)
{
    return memfd_create(name, flags);
}

static int def_eventfd(unsigned initval, int flags)
{
    return eventfd(initval, flags);
}

static ssize_t def_getrandom(void *buf, size_t n, unsigned flags)
{
    return getrandom(buf, n, flags);
}

static int def_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    if (io_uring_queue_init == NULL)
        return -ENOSYS;
    return io_uring_queue_init(entries, ring, flags);
}

/* Each entry: name, its member and its default. The order is the order of struct ixl_sys,
 * which ixl_syscall_next() follows. */
#define IXL_SYS_LIST(X)                     \
    X(malloc, malloc)                       \
    X(calloc, calloc)                       \
    X(realloc, realloc)                     \
    X(strdup, strdup)                       \
    X(strndup, strndup)                     \
    X(aligned_alloc, aligned_alloc)         \
    X(posix_memalign, posix_memalign)       \
    X(open, def_open)                       \
    X(openat, def_openat)                   \
    X(close, close)                         \
    X(read, read)                           \
    X(write, write)                         \
    X(pread, pread)                         \
    X(pwrite, pwrite)                       \
    X(preadv, preadv)                       \
    X(pwritev, pwritev)                     \
    X(fstat, fstat)                         \
    X(ftruncate, ftruncate)                 \
    X(fallocate, fallocate)                 \
    X(mmap, mmap)                           \
    X(munmap, munmap)                       \
    X(memfd_create, def_memfd_create)       \
    X(eventfd, def_eventfd)                 \
    X(pipe2, pipe2)                         \
    X(fcntl, def_fcntl)                     \
    X(socket, socket)                       \
    X(bind, bind)                           \
    X(listen, listen)                       \
    X(accept4, accept4)                     \
    X(connect, connect)                     \
    X(setsockopt, setsockopt)               \
    X(getsockopt, getsockopt)               \
    X(getsockname, getsockname)             \
    X(send, send)                           \
    X(sendmsg, sendmsg)                     \
    X(recv, recv)                           \
    X(recvmsg, recvmsg)                     \
    X(getaddrinfo, getaddrinfo)             \
    X(poll, def_poll)                       \
    X(epoll_create1, epoll_create1)         \
    X(epoll_ctl, epoll_ctl)                 \
    X(epoll_wait, epoll_wait)               \
    X(pthread_create, pthread_create)       \
    X(process_vm_readv, process_vm_readv)   \
    X(process_vm_writev, process_vm_writev) \
    X(getrandom, def_getrandom)             \
    X(io_uring_queue_init, def_io_uring_queue_init)

#define IXL_SYS_INIT(name, def) .name = def,
struct ixl_sys ixl_sys_table = {.size = sizeof(struct ixl_sys), IXL_SYS_LIST(IXL_SYS_INIT)};

#define IXL_SYS_DEFAULT(name, def) .name = def,
static const struct ixl_sys sys_defaults = {.size = sizeof(struct ixl_sys),
                                            IXL_SYS_LIST(IXL_SYS_DEFAULT)};

struct sys_entry {
    const char *name;
    size_t offset;
};

#define IXL_SYS_ENTRY(name, def) {#name, offsetof(struct ixl_sys, name)},
static const struct sys_entry entries[] = {IXL_SYS_LIST(IXL_SYS_ENTRY)};
#define N_ENTRIES (sizeof(entries) / sizeof(entries[0]))

typedef void (*sys_fn)(void);

static const struct sys_entry *entry_by_name(const char *name)
{
    for (size_t i = 0; name && i < N_ENTRIES; i++)
        if (strcmp(entries[i].name, name) == 0)
            return &entries[i];
    return NULL;
}

/* Every member after size is a function pointer; they are reached by offset so that one
 * name table serves set, get and next. */
static sys_fn *slot(struct ixl_sys *t, const struct sys_entry *e)
{
    return (sys_fn *)(void *)((char *)t + e->offset);
}

ixl_status ixl_syscall_set(const char *name, ixl_syscall_fn fn)
{
    const struct sys_entry *e = entry_by_name(name);
    if (e == NULL)
        return IXL_ERR_NOT_FOUND;
    *slot(&ixl_sys_table, e) = fn ? fn : *slot((struct ixl_sys *)&sys_defaults, e);
    return IXL_OK;
}

ixl_syscall_fn ixl_syscall_get(const char *name)
{
    const struct sys_entry *e = entry_by_name(name);
    return e ? *slot(&ixl_sys_table, e) : NULL;
}

const char *ixl_syscall_next(const char *name)
{
    if (name == NULL)
        return entries[0].name;
    const struct sys_entry *e = entry_by_name(name);
    if (e == NULL || e == &entries[N_ENTRIES - 1])
        return NULL;
    return e[1].name;
}

/*
 * The core's allocation and system calls, through the hook table (struct ixl_sys,
 * ixl_syscall_set() in ixl.h) so tests can refuse any of them. Call these instead of libc's
 * names; free() stays libc's.
 */
#ifndef IXL_UTIL_SYS_H
#define IXL_UTIL_SYS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include <ixl/ixl_plugin.h>

extern struct ixl_sys ixl_sys_table;

static inline void *sys_malloc(size_t n)
{
    return ixl_sys_table.malloc(n);
}

static inline void *sys_calloc(size_t n, size_t size)
{
    return ixl_sys_table.calloc(n, size);
}

static inline void *sys_realloc(void *p, size_t n)
{
    return ixl_sys_table.realloc(p, n);
}

static inline char *sys_strdup(const char *s)
{
    return ixl_sys_table.strdup(s);
}

static inline char *sys_strndup(const char *s, size_t n)
{
    return ixl_sys_table.strndup(s, n);
}

static inline int sys_close(int fd)
{
    return ixl_sys_table.close(fd);
}

static inline ssize_t sys_read(int fd, void *buf, size_t n)
{
    return ixl_sys_table.read(fd, buf, n);
}

static inline ssize_t sys_write(int fd, const void *buf, size_t n)
{
    return ixl_sys_table.write(fd, buf, n);
}

static inline int sys_eventfd(unsigned initval, int flags)
{
    return ixl_sys_table.eventfd(initval, flags);
}

static inline int sys_fcntl(int fd, int cmd, long arg)
{
    return ixl_sys_table.fcntl(fd, cmd, arg);
}

static inline int sys_socket(int domain, int type, int protocol)
{
    return ixl_sys_table.socket(domain, type, protocol);
}

static inline int sys_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    return ixl_sys_table.bind(fd, addr, len);
}

static inline int sys_listen(int fd, int backlog)
{
    return ixl_sys_table.listen(fd, backlog);
}

static inline int sys_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    return ixl_sys_table.accept4(fd, addr, len, flags);
}

static inline int sys_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    return ixl_sys_table.connect(fd, addr, len);
}

static inline int sys_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    return ixl_sys_table.setsockopt(fd, level, name, val, len);
}

static inline int sys_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    return ixl_sys_table.getsockopt(fd, level, name, val, len);
}

static inline int sys_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
    return ixl_sys_table.getsockname(fd, addr, len);
}

static inline ssize_t sys_send(int fd, const void *buf, size_t n, int flags)
{
    return ixl_sys_table.send(fd, buf, n, flags);
}

static inline ssize_t sys_recv(int fd, void *buf, size_t n, int flags)
{
    return ixl_sys_table.recv(fd, buf, n, flags);
}

static inline int sys_getaddrinfo(const char *node, const char *service,
                                  const struct addrinfo *hints, struct addrinfo **res)
{
    return ixl_sys_table.getaddrinfo(node, service, hints, res);
}

static inline int sys_poll(struct pollfd *fds, unsigned long n, int timeout_ms)
{
    return ixl_sys_table.poll(fds, n, timeout_ms);
}

static inline int sys_epoll_create1(int flags)
{
    return ixl_sys_table.epoll_create1(flags);
}

static inline int sys_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    return ixl_sys_table.epoll_ctl(epfd, op, fd, ev);
}

static inline int sys_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout_ms)
{
    return ixl_sys_table.epoll_wait(epfd, evs, max, timeout_ms);
}

static inline int sys_open(const char *path, int flags, mode_t mode)
{
    return ixl_sys_table.open(path, flags, mode);
}

static inline int sys_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                                     void *arg)
{
    return ixl_sys_table.pthread_create(t, attr, fn, arg);
}

static inline ssize_t sys_getrandom(void *buf, size_t n, unsigned flags)
{
    return ixl_sys_table.getrandom(buf, n, flags);
}

#endif

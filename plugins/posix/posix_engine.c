/* POSIX: options, registration, requests and the queue both engines feed from. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

#define PX_MEMS (IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_FILE) | IXL_MEM_BIT(IXL_MEM_BLK))

/* The options, by index: create_engine reads init->values[PO_x]. */
enum px_opt { PO_ENGINE, PO_QUEUE_DEPTH, PO_CHUNK, PO_THREADS, PO_COUNT };

static const char *const px_engines[] = {"auto", "io_uring", "threads", NULL};

static const struct ixl_option px_options[PO_COUNT] = {
    [PO_ENGINE] = {.name = "engine",
                   .default_value = "auto",
                   .type = IXL_OPT_ENUM,
                   .choices = px_engines,
                   .description = "auto (io_uring, else a thread pool of pread/pwrite when the "
                                  "kernel refuses io_uring), io_uring, or threads"},
    [PO_QUEUE_DEPTH] = {.name = "queue_depth",
                        .default_value = "64",
                        .type = IXL_OPT_INT,
                        .unit = "I/Os",
                        .min = 1,
                        .max = 4096,
                        .description = "I/Os in flight per backend"},
    [PO_CHUNK] = {.name = "chunk",
                  .default_value = "64M",
                  .type = IXL_OPT_SIZE,
                  .min = 4096,
                  .max = 1 << 30,
                  .description = "largest single I/O, a multiple of 4096; larger descriptors are "
                                 "split"},
    [PO_THREADS] = {.name = "threads",
                    .default_value = "4",
                    .type = IXL_OPT_INT,
                    .unit = "threads",
                    .min = 1,
                    .max = 64,
                    .description = "workers of the thread-pool engine"},
};

int px_error(struct px_engine *e, int status, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "%s", buf);
    return status;
}

/* ---- options ------------------------------------------------------------------------------- */

/* The core parsed and range-checked every option (see px_options); what is left is what no
 * option type says. */
static int parse_options(struct px_engine *e, const struct ixl_engine_init *init, int *engine)
{
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != PO_COUNT)
        return px_error(e, IXL_ERR_INVALID_ARG, "POSIX: the core passed no typed options");
    const struct ixl_opt_value *opt = init->values;
    static const int kinds[] = {-1, PX_URING, PX_THREADS}; /* in the order of px_engines */
    uint64_t chunk = opt[PO_CHUNK].u;
    if (chunk % 4096 != 0)
        return px_error(e, IXL_ERR_INVALID_ARG,
                        "option chunk=%" PRIu64 " bytes: want a multiple of 4096", chunk);
    *engine = kinds[opt[PO_ENGINE].i];
    e->qd = (uint32_t)opt[PO_QUEUE_DEPTH].u;
    e->chunk = chunk;
    e->nthreads = (unsigned)opt[PO_THREADS].u;
    return IXL_OK;
}

static const struct px_ops *ops_of(const struct px_engine *e)
{
    return e->kind == PX_URING ? &px_uring_ops : &px_pool_ops;
}

const struct ixl_sys *posix_sys_ptr;

int posix_sys_set(const struct ixl_engine_init *init)
{
    const struct ixl_host *h = init->host;
    if (h->size < offsetof(struct ixl_host, sys) + sizeof(h->sys) || h->sys == NULL ||
        h->sys->size < offsetof(struct ixl_sys, io_uring_queue_init) + sizeof(void *)) {
        h->error(h->ctx, IXL_ERR_PLUGIN, "the host has no system-call table (ixl_host.sys)");
        return IXL_ERR_PLUGIN;
    }
    __atomic_store_n(&posix_sys_ptr, h->sys, __ATOMIC_RELAXED);
    return IXL_OK;
}

static int px_create(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    if (posix_sys_set(init) != IXL_OK)
        return IXL_ERR_PLUGIN;
    struct px_engine *e = posix_sys()->calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = init->host;
    int engine = -1;
    int rc = parse_options(e, init, &engine);
    if (rc != IXL_OK) {
        free(e);
        return rc;
    }
    pthread_mutex_init(&e->lock, NULL);
    char why[256] = "";
    e->kind = engine == PX_THREADS ? PX_THREADS : PX_URING;
    rc = ops_of(e)->start(e, why, sizeof(why));
    if (rc == IXL_ERR_NOT_SUPPORTED && engine < 0) {
        e->host->log(e->host->ctx, IXL_LOG_INFO,
                     "io_uring is not available (%s); using the thread pool", why);
        e->kind = PX_THREADS;
        rc = ops_of(e)->start(e, why, sizeof(why));
    }
    if (rc != IXL_OK) {
        px_error(e, rc, "cannot start the %s engine: %s",
                 e->kind == PX_URING ? "io_uring" : "thread-pool", why);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return rc;
    }
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL;
    e->base.mem_mask = PX_MEMS;
    *out = &e->base;
    return IXL_OK;
}

static void px_destroy(struct ixl_engine *base)
{
    struct px_engine *e = (struct px_engine *)base;
    ops_of(e)->stop(e);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* ---- registration -------------------------------------------------------------------------- */

struct px_mode {
    int flags;
    const char *path;
};

/* Parses "MODE:PATH" (MODE: comma-separated ro, rw, direct, sync, dsync, create). */
static int parse_mode(struct px_engine *e, const void *bytes, size_t len, char *path, size_t cap,
                      int *flags)
{
    const char *s = bytes;
    const char *colon = memchr(s, ':', len);
    if (colon == NULL)
        return px_error(e, IXL_ERR_INVALID_ARG,
                        "registration bytes must be \"MODE:PATH\" (MODE: ro or rw, and "
                        "direct, sync, dsync, create, comma-separated; e.g. "
                        "\"rw,create:/data/kv.bin\")");
    size_t plen = len - (size_t)(colon + 1 - s);
    while (plen > 0 && colon[plen] == '\0') /* a terminating NUL counted in bytes_len */
        plen--;
    if (plen == 0 || plen >= cap || memchr(colon + 1, '\0', plen) != NULL)
        return px_error(e, IXL_ERR_INVALID_ARG, "the path after \"MODE:\" is %s",
                        plen == 0 ? "empty" : "too long or contains a NUL");
    memcpy(path, colon + 1, plen);
    path[plen] = '\0';
    int f = O_RDWR;
    const char *w = s;
    while (w < colon) {
        const char *end = memchr(w, ',', (size_t)(colon - w));
        if (end == NULL)
            end = colon;
        size_t n = (size_t)(end - w);
#define WORD(lit) (n == sizeof(lit) - 1 && memcmp(w, lit, n) == 0)
        if (WORD("ro"))
            f = (f & ~O_ACCMODE) | O_RDONLY;
        else if (WORD("rw"))
            f = (f & ~O_ACCMODE) | O_RDWR;
        else if (WORD("direct"))
            f |= O_DIRECT;
        else if (WORD("sync"))
            f |= O_SYNC;
        else if (WORD("dsync"))
            f |= O_DSYNC;
        else if (WORD("create"))
            f |= O_CREAT;
        else if (n != 0)
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "unknown mode word '%.*s' (known: ro, rw, direct, sync, dsync, "
                            "create)",
                            (int)n, w);
#undef WORD
        w = end + 1;
    }
    if ((f & O_CREAT) && (f & O_ACCMODE) == O_RDONLY)
        return px_error(e, IXL_ERR_INVALID_ARG, "mode 'create' needs 'rw'");
    *flags = f;
    return IXL_OK;
}

/* Direct-I/O alignment: statx's, else the device's logical block size, else 4096. */
static void dio_align(struct px_md *m, const struct stat *st)
{
    m->mem_align = m->off_align = 4096;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(m->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align != 0) {
        m->mem_align = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : 1;
        m->off_align = sx.stx_dio_offset_align;
        return;
    }
#endif
    int lbs;
    if (S_ISBLK(st->st_mode) && ioctl(m->fd, BLKSSZGET, &lbs) == 0 && lbs > 0)
        m->mem_align = m->off_align = (uint32_t)lbs;
}

static int open_region(struct px_engine *e, enum ixl_mem type, const struct ixl_reg_desc *d,
                       struct px_md *m)
{
    int by_path = (type == IXL_MEM_FILE && d->dev == IXL_DEV_NONE) ||
                  (type == IXL_MEM_BLK && d->bytes_len > 0);
    int flags;
    if (by_path) {
        int rc = parse_mode(e, d->bytes, d->bytes_len, m->name, sizeof(m->name), &flags);
        if (rc != IXL_OK)
            return rc;
        m->fd = posix_sys()->open(m->name, flags | O_CLOEXEC, 0644);
        if (m->fd < 0) {
            int err = errno;
            return px_error(e, err == ENOENT ? IXL_ERR_NOT_FOUND : IXL_ERR_SYSTEM,
                            "cannot open '%s': %s%s", m->name, strerror(err),
                            err == EINVAL && (flags & O_DIRECT)
                                ? " (this filesystem may not support direct I/O: drop 'direct')"
                                : "");
        }
    } else {
        if (d->dev > INT32_MAX || (flags = posix_sys()->fcntl((int)d->dev, F_GETFL, 0)) < 0)
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "%s dev %" PRIu64 " is not an open file descriptor (fcntl "
                            "F_GETFL: %s; give an open fd, or%s bytes \"MODE:PATH\")",
                            type == IXL_MEM_FILE ? "FILE" : "BLK", d->dev,
                            d->dev > INT32_MAX ? "out of range" : strerror(errno),
                            type == IXL_MEM_FILE ? " IXL_DEV_NONE and" : "");
        m->fd = posix_sys()->fcntl((int)d->dev, F_DUPFD_CLOEXEC, 0);
        if (m->fd < 0)
            return px_error(e, IXL_ERR_SYSTEM,
                            "cannot duplicate fd %" PRIu64 " (fcntl F_DUPFD_CLOEXEC): %s", d->dev,
                            strerror(errno));
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", m->fd);
        ssize_t n = readlink(link, m->name, sizeof(m->name) - 1);
        if (n <= 0)
            snprintf(m->name, sizeof(m->name), "fd %" PRIu64, d->dev);
        else
            m->name[n] = '\0';
    }
    m->rd_ok = (flags & O_ACCMODE) != O_WRONLY;
    m->wr_ok = (flags & O_ACCMODE) != O_RDONLY;
    m->direct = (flags & O_DIRECT) != 0;
    m->append = (flags & O_APPEND) != 0;
    struct stat st;
    if (posix_sys()->fstat(m->fd, &st) != 0)
        return px_error(e, IXL_ERR_SYSTEM, "fstat '%s': %s", m->name, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
        return px_error(e, IXL_ERR_INVALID_ARG, "'%s' is neither a regular file nor a block device",
                        m->name);
    if (m->direct)
        dio_align(m, &st);
    if (type == IXL_MEM_BLK) {
        uint64_t size = (uint64_t)st.st_size;
        if (S_ISBLK(st.st_mode) && ioctl(m->fd, BLKGETSIZE64, &size) != 0)
            return px_error(e, IXL_ERR_SYSTEM, "cannot read the size of '%s': %s", m->name,
                            strerror(errno));
        m->vol_size = size;
        if (d->addr > size || (d->len != 0 && d->len > size - d->addr))
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "BLK region %" PRIu64 "+%" PRIu64 " lies past the end of "
                            "volume '%s' (%" PRIu64 " bytes)",
                            d->addr, d->len, m->name, size);
    }
    return IXL_OK;
}

static int px_register(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *d,
                       struct ixl_md **out)
{
    struct px_engine *e = (struct px_engine *)base;
    if (!(PX_MEMS & IXL_MEM_BIT(type)))
        return px_error(e, IXL_ERR_BAD_MEM_TYPE, "POSIX registers DRAM, FILE and BLK only");
    struct px_md *m = posix_sys()->calloc(1, sizeof(*m));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    m->type = type;
    m->fd = -1;
    if (type != IXL_MEM_DRAM) {
        int rc = open_region(e, type, d, m);
        if (rc != IXL_OK) {
            if (m->fd >= 0)
                posix_sys()->close(m->fd);
            free(m);
            return rc;
        }
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int px_deregister(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    struct px_md *m = (struct px_md *)md;
    if (m->fd >= 0)
        posix_sys()->close(m->fd);
    free(m);
    return IXL_OK;
}

static int px_load_local(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    (void)base;
    *out = md; /* the same object serves both sides */
    return IXL_OK;
}

static int px_unload(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    (void)md; /* only ever md itself (px_load_local): deregister frees it */
    return IXL_OK;
}

static int px_connect(struct ixl_engine *base, const char *agent)
{
    (void)base;
    (void)agent;
    return IXL_OK;
}

static int px_query(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *descs,
                    size_t n, struct ixl_mem_query *out)
{
    struct px_engine *e = (struct px_engine *)base;
    if (type != IXL_MEM_FILE && type != IXL_MEM_BLK)
        return px_error(e, IXL_ERR_BAD_MEM_TYPE, "POSIX answers queries about FILE and BLK only");
    for (size_t i = 0; i < n; i++) {
        const struct ixl_reg_desc *d = &descs[i];
        struct stat st;
        int r, fd = -1;
        if ((type == IXL_MEM_FILE && d->dev == IXL_DEV_NONE) ||
            (type == IXL_MEM_BLK && d->bytes_len > 0)) {
            char path[256];
            int flags;
            int rc = parse_mode(e, d->bytes, d->bytes_len, path, sizeof(path), &flags);
            if (rc != IXL_OK)
                return rc;
            fd = posix_sys()->open(path, O_RDONLY | O_CLOEXEC, 0);
            r = fd < 0 ? -1 : posix_sys()->fstat(fd, &st);
        } else {
            r = d->dev > INT32_MAX ? -1 : posix_sys()->fstat((int)d->dev, &st);
            if (r != 0 && errno != EBADF)
                return px_error(e, IXL_ERR_SYSTEM, "fstat fd %" PRIu64 ": %s", d->dev,
                                strerror(errno));
            if (r != 0)
                errno = ENOENT;
        }
        int err = errno;
        if (r != 0 && err != ENOENT && err != ENOTDIR) {
            if (fd >= 0)
                posix_sys()->close(fd);
            return px_error(e, IXL_ERR_SYSTEM, "query of descriptor %zu: %s", i, strerror(err));
        }
        out[i].exists = r == 0;
        out[i].size = 0;
        if (r == 0) {
            uint64_t size = (uint64_t)st.st_size;
            if (S_ISBLK(st.st_mode) && ioctl(fd >= 0 ? fd : (int)d->dev, BLKGETSIZE64, &size) != 0)
                size = 0;
            out[i].size = size;
        }
        if (fd >= 0)
            posix_sys()->close(fd);
    }
    return IXL_OK;
}

/* ---- requests ------------------------------------------------------------------------------- */

static int px_prep(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                   const struct ixl_xfer_side *remote, const char *remote_agent,
                   const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct px_engine *e = (struct px_engine *)base;
    (void)remote_agent;
    if (opts && opts->notif)
        return px_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                        "storage backends do not support notifications: omit the notification");
    int lfile = local->type != IXL_MEM_DRAM, rfile = remote->type != IXL_MEM_DRAM;
    if (lfile == rfile)
        return px_error(e, IXL_ERR_BAD_MEM_TYPE,
                        "POSIX moves data between DRAM and FILE or BLK, not %s to %s",
                        lfile ? "storage" : "DRAM", rfile ? "storage" : "DRAM");
    const struct ixl_xfer_desc *mem = lfile ? remote->descs : local->descs;
    const struct ixl_xfer_desc *file = lfile ? local->descs : remote->descs;
    /* WRITE moves local -> remote, READ remote -> local. */
    bool to_file = (op == IXL_OP_WRITE) == (bool)rfile;
    for (size_t i = 0; i < local->count; i++) {
        const struct ixl_xfer_desc *fd = &file[i], *md = &mem[i];
        const struct px_md *f = (const struct px_md *)fd->md;
        if (f == NULL || f->fd < 0)
            return px_error(e, IXL_ERR_INVALID_ARG, "descriptor %zu has no file metadata", i);
        if (to_file ? !f->wr_ok : !f->rd_ok)
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "'%s' is registered %s: descriptor %zu cannot be %s", f->name,
                            to_file ? "read-only" : "write-only", i, to_file ? "written" : "read");
        if (to_file && f->append)
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "'%s' is open with O_APPEND, where a write ignores its offset: "
                            "descriptor %zu cannot be written (register an fd opened without "
                            "O_APPEND)",
                            f->name, i);
        if (f->vol_size && (fd->addr > f->vol_size || fd->len > f->vol_size - fd->addr))
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "descriptor %zu (offset %" PRIu64 ", %" PRIu64 " bytes) lies "
                            "past the end of volume '%s' (%" PRIu64 " bytes)",
                            i, fd->addr, fd->len, f->name, f->vol_size);
        if (f->direct &&
            (md->addr % f->mem_align || fd->addr % f->off_align || fd->len % f->off_align))
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "'%s' is open for direct I/O (O_DIRECT): buffers must be "
                            "aligned to %u bytes and file offsets and lengths to %u bytes; "
                            "descriptor %zu has buffer 0x%" PRIx64 ", offset %" PRIu64
                            ", length %" PRIu64,
                            f->name, f->mem_align, f->off_align, i, md->addr, fd->addr, fd->len);
    }
    struct px_req *r = posix_sys()->calloc(1, sizeof(*r));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    r->e = e;
    r->n = local->count;
    r->mem = mem;
    r->file = file;
    r->to_file = to_file;
    atomic_init(&r->state, PX_IDLE);
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

static void enqueue(struct px_engine *e, struct px_req *r)
{
    r->qnext = NULL;
    if (e->tail)
        e->tail->qnext = r;
    else
        e->head = r;
    e->tail = r;
    r->queued = true;
}

static void dequeue(struct px_engine *e, struct px_req *r)
{
    if (!r->queued)
        return;
    struct px_req **pp = &e->head, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (*pp == r) {
        *pp = r->qnext;
        if (e->tail == r)
            e->tail = prev;
    }
    r->queued = false;
    r->qnext = NULL;
}

/* The request's end once nothing is left to start nor in flight (e->lock held). */
static bool maybe_finish(struct px_req *r)
{
    if (r->inflight != 0 || r->queued)
        return false;
    if (atomic_load(&r->state) != PX_RUNNING)
        return false;
    atomic_store(&r->state, r->status == IXL_OK ? PX_DONE : PX_FAILED);
    return true;
}

bool px_fail(struct px_engine *e, struct px_req *r, int status, const char *fmt, ...)
{
    if (r->status == IXL_OK) {
        r->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
        va_end(ap);
    }
    dequeue(e, r);
    return maybe_finish(r);
}

bool px_take(struct px_engine *e, struct px_io *io)
{
    struct px_req *r = e->head;
    if (r == NULL)
        return false;
    const struct ixl_xfer_desc *f = &r->file[r->next_desc], *m = &r->mem[r->next_desc];
    uint64_t left = f->len - r->next_off;
    uint64_t len = left < e->chunk ? left : e->chunk;
    io->r = r;
    io->f = (const struct px_md *)f->md;
    io->buf = (uint8_t *)(uintptr_t)(m->addr + r->next_off);
    io->off = f->addr + r->next_off;
    io->len = (uint32_t)len;
    io->done = 0;
    r->next_off += len;
    if (r->next_off == f->len) {
        r->next_off = 0;
        /* Zero-length descriptors have nothing to move. */
        do
            r->next_desc++;
        while (r->next_desc < r->n && r->file[r->next_desc].len == 0);
        if (r->next_desc == r->n)
            dequeue(e, r);
    }
    r->inflight++;
    e->inflight++;
    return true;
}

static int errno_status(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EFBIG ? IXL_ERR_NO_SPACE : IXL_ERR_IO;
}

bool px_done(struct px_engine *e, struct px_io *io, long res, bool *finished)
{
    struct px_req *r = io->r;
    *finished = false;
    if (res > 0 && (unsigned long)res < io->len && r->status == IXL_OK && !r->canceled) {
        /* Short: continue where it stopped. */
        io->buf += res;
        io->off += (uint64_t)res;
        io->len -= (uint32_t)res;
        io->done += (uint32_t)res;
        return true;
    }
    const char *what = r->to_file ? "write" : "read";
    const char *prep = r->to_file ? "to" : "from";
    if (res < 0) {
        px_fail(e, r, errno_status((int)-res),
                "%s of %u bytes %s '%s' at offset %" PRIu64 " failed: %s%s", what, io->len, prep,
                io->f->name, io->off, strerror((int)-res),
                res == -EINVAL && io->f->direct ? " (direct I/O: check the alignment)" : "");
    } else if (res == 0 && io->len > 0) {
        if (r->to_file) {
            px_fail(e, r, IXL_ERR_IO,
                    "write of %u bytes to '%s' at offset %" PRIu64 " wrote nothing", io->len,
                    io->f->name, io->off);
        } else {
            struct stat st;
            long long size = posix_sys()->fstat(io->f->fd, &st) == 0 ? (long long)st.st_size : -1;
            px_fail(e, r, IXL_ERR_IO,
                    "read of %u bytes from '%s' at offset %" PRIu64 " reached the end of "
                    "the file (%lld bytes): the descriptor lies past its end",
                    io->len, io->f->name, io->off, size);
        }
    }
    r->inflight--;
    e->inflight--;
    *finished = maybe_finish(r);
    return false;
}

static int px_post(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    if (opts && opts->notif)
        return px_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                        "storage backends do not support notifications: omit the notification");
    pthread_mutex_lock(&e->lock);
    r->next_desc = 0;
    r->next_off = 0;
    r->status = IXL_OK;
    r->reported = false;
    r->canceled = false;
    r->msg[0] = '\0';
    while (r->next_desc < r->n && r->file[r->next_desc].len == 0)
        r->next_desc++;
    if (r->next_desc == r->n) {
        atomic_store(&r->state, PX_DONE);
        pthread_mutex_unlock(&e->lock);
        return IXL_OK;
    }
    atomic_store(&r->state, PX_RUNNING);
    enqueue(e, r);
    ops_of(e)->kick(e);
    int st = atomic_load(&r->state);
    pthread_mutex_unlock(&e->lock);
    if (st == PX_RUNNING)
        return IXL_IN_PROGRESS;
    return st == PX_DONE ? IXL_OK : IXL_IN_PROGRESS; /* an error is reported by check_xfer */
}

static int px_check(struct ixl_engine *base, struct ixl_req *req)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    int st = atomic_load(&r->state);
    if (st == PX_RUNNING) {
        ops_of(e)->poll(e);
        st = atomic_load(&r->state);
    }
    switch (st) {
    case PX_DONE:
        return IXL_OK;
    case PX_FAILED: {
        pthread_mutex_lock(&e->lock);
        int status = r->status;
        if (!r->reported) {
            r->reported = true;
            px_error(e, status, "%s", r->msg);
        }
        pthread_mutex_unlock(&e->lock);
        return status;
    }
    case PX_RUNNING:
        return IXL_IN_PROGRESS;
    default:
        return IXL_ERR_NOT_POSTED;
    }
}

static int px_release(struct ixl_engine *base, struct ixl_req *req)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    pthread_mutex_lock(&e->lock);
    r->canceled = true;
    dequeue(e, r);
    if (r->inflight > 0 && !ops_of(e)->drain(e, r, 2000)) {
        if (r->status == IXL_OK) {
            r->status = IXL_ERR_CANCELED;
            snprintf(r->msg, sizeof(r->msg), "the request was canceled");
        }
        pthread_mutex_unlock(&e->lock);
        return px_error(e, IXL_ERR_BUSY,
                        "%u I/O(s) of the request are still in the kernel: release again",
                        r->inflight);
    }
    pthread_mutex_unlock(&e->lock);
    free(r);
    return IXL_OK;
}

static int px_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    struct px_engine *e = (struct px_engine *)base;
    (void)req;
    snprintf(out->path, sizeof(out->path), "%s", ops_of(e)->name);
    return IXL_OK;
}

static const struct ixl_engine_ops px_engine_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = px_connect,
    .register_mem = px_register,
    .deregister_mem = px_deregister,
    .load_local_md = px_load_local,
    .unload_md = px_unload,
    .prep_xfer = px_prep,
    .post_xfer = px_post,
    .check_xfer = px_check,
    .release_req = px_release,
    .query_mem = px_query,
    .req_info = px_req_info,
};

static const struct ixl_plugin_desc px_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "POSIX",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = PX_MEMS,
    .options = px_options,
    .n_options = PO_COUNT,
    .create_engine = px_create,
    .destroy_engine = px_destroy,
    .ops = &px_engine_ops,
};

static const struct ixl_plugin_desc *px_entry(void)
{
    return &px_desc;
}

IXL_PLUGIN_EXPORT(px_entry)

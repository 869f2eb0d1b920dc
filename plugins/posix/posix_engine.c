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

#include "../common/ixl_file_mode.h"
#include "posix.h"

#define PX_MEMS (IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_FILE) | IXL_MEM_BIT(IXL_MEM_BLK))
/* VRAM only where the device layer has a device (posix_stage.c). */
#define PX_MEMS_ALL (PX_MEMS | IXL_MEM_BIT(IXL_MEM_VRAM))

/* The options, by index: create_engine reads init->values[PO_x]. */
enum px_opt {
    PO_ENGINE,
    PO_QUEUE_DEPTH,
    PO_CHUNK,
    PO_THREADS,
    PO_BOUNCE_SIZE,
    PO_BOUNCE_BUFFERS,
    PO_COST_TABLE,
    PO_INLINE_BYTES,
    PO_COUNT
};

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
    [PO_BOUNCE_SIZE] = {.name = "bounce_size",
                        .default_value = "4M",
                        .type = IXL_OPT_SIZE,
                        .min = 65536,
                        .max = 256 << 20,
                        .description =
                            "VRAM: bytes of one pinned host bounce buffer (a multiple of "
                            "4096); a VRAM transfer moves in chunks of this size"},
    [PO_BOUNCE_BUFFERS] = {.name = "bounce_buffers",
                           .default_value = "8",
                           .type = IXL_OPT_INT,
                           .unit = "buffers",
                           .min = 2,
                           .max = 256,
                           .description = "VRAM: bounce buffers, allocated and pinned at the first "
                                          "VRAM transfer: the chunks in flight between the GPU "
                                          "copies and the file I/O"},
    [PO_COST_TABLE] = {.name = "cost_table",
                       .default_value = "",
                       .type = IXL_OPT_STRING,
                       .description = "the calibration file (bench/gds.sh writes it) whose "
                                      "figures give the cost estimates; empty: "
                                      "~/.cache/ixl/cost_table, else the built-in default table "
                                      "(docs/device.md)"},
    [PO_INLINE_BYTES] = {.name = "inline_bytes",
                         .default_value = "1M",
                         .type = IXL_OPT_SIZE,
                         .min = 0,
                         .max = 64 << 20,
                         .description = "a buffered WRITE of one descriptor up to this size, "
                                        "posted while no other I/O is queued or in flight, is "
                                        "written by the posting thread (pwrite) and done when "
                                        "post returns; 0: always through the engine"},
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
    e->inline_bytes = opt[PO_INLINE_BYTES].u;
    e->chunk = chunk;
    e->nthreads = (unsigned)opt[PO_THREADS].u;
    e->bounce_size = opt[PO_BOUNCE_SIZE].u;
    e->bounce_count = (unsigned)opt[PO_BOUNCE_BUFFERS].u;
    if (e->bounce_size % 4096 != 0)
        return px_error(e, IXL_ERR_INVALID_ARG,
                        "option bounce_size=%" PRIu64 " bytes: want a multiple of 4096",
                        e->bounce_size);
    const char *table = opt[PO_COST_TABLE].str ? opt[PO_COST_TABLE].str : "";
    char why[512];
    int rc = ixl_cost_table_open(posix_sys(), table, &e->costs, why, sizeof(why));
    if (rc != IXL_OK && table[0] != '\0')
        return px_error(e, rc, "POSIX: %s", why);
    if (rc != IXL_OK) { /* the default file is broken: say so, and use the built-in table */
        e->host->log(e->host->ctx, IXL_LOG_WARN, "POSIX: %s; using the built-in cost table", why);
        rc = ixl_cost_table_parse(IXL_COST_TABLE_DEFAULT, sizeof(IXL_COST_TABLE_DEFAULT) - 1,
                                  "built-in default", false, posix_sys()->malloc, &e->costs, why,
                                  sizeof(why));
        if (rc != IXL_OK)
            return px_error(e, rc, "POSIX: %s", why);
    }
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
    ixlp_pool_init(&e->mds, posix_sys(), offsetof(struct px_md, name));
    ixlp_pool_init(&e->file_mds, posix_sys(), sizeof(struct px_md));
    int engine = -1;
    int rc = parse_options(e, init, &engine);
    if (rc != IXL_OK) {
        ixl_cost_table_free(&e->costs);
        free(e);
        return rc;
    }
    px_stage_init(e);
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
        ixl_cost_table_free(&e->costs);
        free(e);
        return rc;
    }
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL;
    e->base.mem_mask = e->dev ? PX_MEMS_ALL : PX_MEMS;
    e->base.mem_why = e->mem_why; /* "" with a device */
    *out = &e->base;
    return IXL_OK;
}

static void px_destroy(struct ixl_engine *base)
{
    struct px_engine *e = (struct px_engine *)base;
    px_stage_stop(e);
    ops_of(e)->stop(e);
    pthread_mutex_destroy(&e->lock);
    ixl_cost_table_free(&e->costs);
    ixlp_pool_fini(&e->mds);
    ixlp_pool_fini(&e->file_mds);
    free(e);
}

/* ---- registration -------------------------------------------------------------------------- */

/* Parses "MODE:PATH" (plugins/common/ixl_file_mode.h), saying why through the engine. */
static int parse_mode(struct px_engine *e, const void *bytes, size_t len, char *path, size_t cap,
                      int *flags)
{
    char why[256];
    int rc = ixlp_parse_file_mode(bytes, len, path, cap, flags, why, sizeof(why));
    return rc == IXL_OK ? IXL_OK : px_error(e, rc, "%s", why);
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
    int flags = 0;
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

/* The pool of type's records: only FILE and BLK ones have a name. */
static struct ixlp_pool *px_mds(struct px_engine *e, enum ixl_mem type)
{
    return type == IXL_MEM_FILE || type == IXL_MEM_BLK ? &e->file_mds : &e->mds;
}

static int px_register(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *d,
                       struct ixl_md **out)
{
    struct px_engine *e = (struct px_engine *)base;
    if (type == IXL_MEM_VRAM && e->dev == NULL)
        return px_error(e, IXL_ERR_BAD_MEM_TYPE, "POSIX cannot register VRAM here: %s", e->mem_why);
    if (!(PX_MEMS_ALL & IXL_MEM_BIT(type)))
        return px_error(e, IXL_ERR_BAD_MEM_TYPE, "POSIX registers DRAM, VRAM, FILE and BLK only");
    int ordinal = -1;
    if (type == IXL_MEM_VRAM) {
        struct ixl_dev_ptr p = {.size = sizeof(p)};
        char why[256] = "";
        int rc = e->dev->classify(e->dev->ctx, (const void *)(uintptr_t)d->addr, (size_t)d->len, &p,
                                  why, sizeof(why));
        if (rc != IXL_OK)
            return px_error(e, rc, "POSIX: VRAM region 0x%" PRIx64 "+%" PRIu64 ": %s", d->addr,
                            d->len, why[0] ? why : "the device layer cannot classify it");
        if (p.ordinal < 0)
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "POSIX: VRAM region 0x%" PRIx64 "+%" PRIu64
                            " is not device memory (register host memory as DRAM)",
                            d->addr, d->len);
        ordinal = p.ordinal;
    }
    struct ixlp_pool *pool = px_mds(e, type);
    struct px_md *m = ixlp_pool_get(pool);
    if (m == NULL)
        return px_error(e, IXL_ERR_NO_MEMORY, "POSIX: no memory for a region record (mmap: %s)",
                        strerror(errno));
    m->type = type;
    m->fd = -1;
    m->ordinal = ordinal;
    if (type == IXL_MEM_FILE || type == IXL_MEM_BLK) {
        int rc = open_region(e, type, d, m);
        if (rc != IXL_OK) {
            if (m->fd >= 0)
                posix_sys()->close(m->fd);
            ixlp_pool_put(pool, m);
            return rc;
        }
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int px_deregister(struct ixl_engine *base, struct ixl_md *md)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_md *m = (struct px_md *)md;
    if (m->fd >= 0)
        posix_sys()->close(m->fd);
    ixlp_pool_put(px_mds(e, m->type), m);
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
#define PX_IS_FILE(t) ((t) == IXL_MEM_FILE || (t) == IXL_MEM_BLK)
#define PX_IS_MEM(t) ((t) == IXL_MEM_DRAM || (t) == IXL_MEM_VRAM)
    int lfile = PX_IS_FILE(local->type), rfile = PX_IS_FILE(remote->type);
    if (lfile == rfile || !PX_IS_MEM(lfile ? remote->type : local->type))
        return px_error(e, IXL_ERR_BAD_MEM_TYPE,
                        "POSIX moves data between DRAM or VRAM and FILE or BLK, not %s to %s",
                        lfile ? "storage" : "memory", rfile ? "storage" : "memory");
    bool staged = (lfile ? remote->type : local->type) == IXL_MEM_VRAM;
    if (staged && e->dev == NULL)
        return px_error(e, IXL_ERR_BAD_MEM_TYPE, "POSIX cannot move VRAM here: %s", e->mem_why);
    const struct ixl_xfer_desc *mem = lfile ? remote->descs : local->descs;
    const struct ixl_xfer_desc *file = lfile ? local->descs : remote->descs;
    /* WRITE moves local -> remote, READ remote -> local. */
    bool to_file = (op == IXL_OP_WRITE) == (bool)rfile;
    uint64_t bytes = 0;
    uint32_t align = 1; /* the largest direct-I/O offset alignment of the request's files */
    for (size_t i = 0; i < local->count; i++) {
        bytes += file[i].len;
        const struct ixl_xfer_desc *fd = &file[i], *md = &mem[i];
        const struct px_md *f = (const struct px_md *)fd->md;
        if (f == NULL || f->fd < 0)
            return px_error(e, IXL_ERR_INVALID_ARG, "descriptor %zu has no file metadata", i);
        if (f->direct && f->off_align > align)
            align = f->off_align;
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
        if (staged && f->direct && (f->mem_align > 4096 || e->bounce_size % f->off_align))
            return px_error(e, IXL_ERR_INVALID_ARG,
                            "'%s' is open for direct I/O with alignments (%u bytes of memory, %u "
                            "of offset) the bounce buffers (4096-aligned, bounce_size %" PRIu64
                            ") do not meet: set bounce_size to a multiple of %u",
                            f->name, f->mem_align, f->off_align, e->bounce_size, f->off_align);
        if (f->direct && ((!staged && md->addr % f->mem_align) || fd->addr % f->off_align ||
                          fd->len % f->off_align))
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
    r->staged = staged;
    r->bytes = bytes;
    r->chunk = staged ? px_stage_chunk(e, bytes, align) : 0;
    atomic_init(&r->state, PX_IDLE);
    if (staged) {
        pthread_mutex_lock(&e->lock);
        int rc = px_stage_start(e);
        pthread_mutex_unlock(&e->lock);
        if (rc != IXL_OK) {
            free(r);
            return rc;
        }
    }
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

/* A request with I/O left to start joins its queue: the FIFO the I/O engines take from, or,
 * staged, the stager's. */
static void enqueue(struct px_engine *e, struct px_req *r)
{
    struct px_req **head = r->staged ? &e->shead : &e->head;
    struct px_req **tail = r->staged ? &e->stail : &e->tail;
    r->qnext = NULL;
    if (*tail)
        (*tail)->qnext = r;
    else
        *head = r;
    *tail = r;
    r->queued = true;
}

void px_dequeue(struct px_engine *e, struct px_req *r)
{
    if (!r->queued)
        return;
    struct px_req **pp = r->staged ? &e->shead : &e->head, *prev = NULL;
    struct px_req **tail = r->staged ? &e->stail : &e->tail;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (*pp == r) {
        *pp = r->qnext;
        if (*tail == r)
            *tail = prev;
    }
    r->queued = false;
    r->qnext = NULL;
}
#define dequeue px_dequeue

void px_kick(struct px_engine *e)
{
    ops_of(e)->kick(e);
}

/* The request's end once nothing is left to start nor in flight (e->lock held). */
bool px_maybe_finish(struct px_req *r)
{
    if (r->inflight != 0 || r->queued || r->chunks != 0)
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
    if (r->staged)
        px_stage_drop(e, r); /* chunks not yet in the kernel never get there */
    return px_maybe_finish(r);
}

bool px_take(struct px_engine *e, struct px_io *io)
{
    if (px_stage_take(e, io))
        return true;
    struct px_req *r = e->head;
    if (r == NULL)
        return false;
    io->chunk = NULL;
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
    if (io->chunk)
        px_stage_io_done(e, io);
    *finished = px_maybe_finish(r);
    return false;
}

/*
 * A buffered WRITE of one small descriptor while the engine is idle (e->lock held on entry and
 * on return, let go of around the write): written on the posting thread. Its I/O would go to
 * io_uring's worker thread (the file systems here take no buffered write without blocking: io-wq),
 * which copies it into the page cache and then wakes the caller: on a virtual machine the wake-up
 * across CPUs cost as much as the copy (a 1 MiB WRITE at depth 1: 72-127 us waited for, 58-68 us
 * written here; bench/posix.sh's batch-1 rows). With I/O in flight the engine keeps it, so a caller
 * that pipelines is not held up. True: the request ended (done, or failed with its status); false:
 * it goes the usual way, the engine's I/O (a pwrite refused with EAGAIN: from where it stopped, all
 * of it when no byte was written). EINTR is tried again. The messages are px_done's for the same
 * failures, naming pwrite and "(in post)".
 */
static bool post_inline(struct px_engine *e, struct px_req *r)
{
    const struct ixl_xfer_desc *fd = &r->file[0], *md = &r->mem[0];
    const struct px_md *f = (const struct px_md *)fd->md;
    if (r->staged || !r->to_file || r->n != 1 || f->direct || fd->len > e->inline_bytes ||
        e->inflight != 0 || e->head != NULL || e->shead != NULL)
        return false;
    const uint8_t *buf = (const uint8_t *)(uintptr_t)md->addr;
    uint64_t off = fd->addr, left = fd->len;
    /* Written without the engine's lock: other posters and the engine go on meanwhile (r is in
     * no queue, and the core runs no other call on it), and posters of small WRITEs write side
     * by side. */
    pthread_mutex_unlock(&e->lock);
    ssize_t w;
    int err = 0;
    for (;;) {
        w = posix_sys()->pwrite(f->fd, buf, left, (off_t)off);
        if (w > 0) {
            buf += w;
            off += (uint64_t)w;
            left -= (uint64_t)w;
            if (left == 0)
                break;
            continue;
        }
        err = w < 0 ? errno : 0;
        if (err != EINTR)
            break;
    }
    pthread_mutex_lock(&e->lock);
    if (left > 0) {
        if (err == EAGAIN) {
            if (left == fd->len)
                return false;             /* nothing written: the engine's I/O */
            r->next_off = fd->len - left; /* the rest through the engine */
            return false;
        }
        if (err != 0)
            px_fail(e, r, errno_status(err),
                    "pwrite of %" PRIu64 " bytes to '%s' at offset %" PRIu64
                    " (in post) failed: %s",
                    left, f->name, off, strerror(err));
        else
            px_fail(e, r, IXL_ERR_IO,
                    "pwrite of %" PRIu64 " bytes to '%s' at offset %" PRIu64
                    " (in post) wrote nothing",
                    left, f->name, off);
        return true;
    }
    atomic_store(&r->state, PX_DONE);
    return true;
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
    r->inlined = false;
    r->msg[0] = '\0';
    while (r->next_desc < r->n && r->file[r->next_desc].len == 0)
        r->next_desc++;
    if (r->next_desc == r->n) {
        atomic_store(&r->state, PX_DONE);
        pthread_mutex_unlock(&e->lock);
        return IXL_OK;
    }
    atomic_store(&r->state, PX_RUNNING);
    if (post_inline(e, r)) {
        r->inlined = true;
        int st = atomic_load(&r->state);
        pthread_mutex_unlock(&e->lock);
        return st == PX_DONE ? IXL_OK : IXL_IN_PROGRESS; /* an error: reported by check_xfer */
    }
    enqueue(e, r);
    if (r->staged)
        px_stage_kick(e);
    else
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

/* ixl_xfer_wait's watch (plugin ABI 2.5): a request whose I/O is the kernel's and the disk's
 * (no CPU of ours moves it) is watched where its completion lands, then answered as check. */
static int px_wait(struct ixl_engine *base, struct ixl_req *req, uint64_t budget_ns)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    if (ops_of(e)->wait && !r->staged && atomic_load(&r->state) == PX_RUNNING)
        ops_of(e)->wait(e, r, budget_ns);
    return px_check(base, req);
}

static int px_release(struct ixl_engine *base, struct ixl_req *req)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    pthread_mutex_lock(&e->lock);
    r->canceled = true;
    dequeue(e, r);
    bool idle = r->staged ? px_stage_drain(e, r, 2000) : true;
    if (idle && r->inflight > 0 && !ops_of(e)->drain(e, r, 2000))
        idle = false;
    if (!idle) {
        if (r->status == IXL_OK) {
            r->status = IXL_ERR_CANCELED;
            snprintf(r->msg, sizeof(r->msg), "the request was canceled");
        }
        pthread_mutex_unlock(&e->lock);
        return px_error(e, IXL_ERR_BUSY,
                        "%u I/O(s) and %u staged chunk(s) of the request are still in flight: "
                        "release again",
                        r->inflight, r->chunks);
    }
    pthread_mutex_unlock(&e->lock);
    free(r);
    return IXL_OK;
}

/* The data path as the cost table names it: "staged" for VRAM, else the I/O engine's. */
static const char *path_of(const struct px_engine *e, const struct px_req *r)
{
    return r->staged ? "staged" : ops_of(e)->name;
}

static int px_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    snprintf(out->path, sizeof(out->path), "%s", r->inlined ? "pwrite" : path_of(e, r));
    return IXL_OK;
}

/* The cost table's figure for the request's path, direction and block size. */
static int px_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out)
{
    struct px_engine *e = (struct px_engine *)base;
    struct px_req *r = (struct px_req *)req;
    uint64_t block = r->n ? r->bytes / r->n : 0;
    int rc = ixl_cost_table_estimate(&e->costs, "POSIX", path_of(e, r),
                                     r->to_file ? IXL_OP_WRITE : IXL_OP_READ, block, r->bytes, out);
    if (rc != IXL_OK)
        return px_error(e, rc, "POSIX: the cost table (%s) has no row for path %s %s",
                        e->costs.source, path_of(e, r), r->to_file ? "WRITE" : "READ");
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
    .estimate_xfer_cost = px_estimate,
    .wait_xfer = px_wait,
};

static const struct ixl_plugin_desc px_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "POSIX",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = PX_MEMS_ALL,
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

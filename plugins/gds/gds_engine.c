/* GDS and GDS_MT: options, engines, registration, requests and the FIFO both feed from. */
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
#include <time.h>
#include <unistd.h>

#include "../common/ixl_file_mode.h"
#include "gds.h"
#include "../common/ixl_cost_table.h"

#define GDS_MEMS (IXL_MEM_BIT(IXL_MEM_VRAM) | IXL_MEM_BIT(IXL_MEM_FILE) | IXL_MEM_BIT(IXL_MEM_BLK))

/* ---- options ----------------------------------------------------------------------------- */

#define OPT_LIBRARY                                                                               \
    {                                                                                             \
        .name = "library", .default_value = "libcufile.so.0", .type = IXL_OPT_STRING,             \
        .description = "the cuFile library to dlopen: a name the dynamic linker finds, or a path" \
    }
#define OPT_REGISTER                                                                        \
    {                                                                                       \
        .name = "register_buffers", .default_value = "1", .type = IXL_OPT_BOOL,             \
        .description = "register each VRAM region with cuFileBufRegister (without: cuFile " \
                       "copies through its own bounce buffers)"                             \
    }

#define OPT_COST_TABLE                                                                         \
    {                                                                                          \
        .name = "cost_table", .default_value = "", .type = IXL_OPT_STRING,                     \
        .description = "the calibration file estimates read (bench/gds.sh writes it); empty: " \
                       "~/.cache/ixl/cost_table, else the built-in default table"              \
    }

enum gds_opt { GO_LIBRARY, GO_REGISTER, GO_COST_TABLE, GO_MAX_ENTRY, GO_BATCH, GO_COUNT };
static const struct ixl_option gds_options[GO_COUNT] = {
    [GO_LIBRARY] = OPT_LIBRARY,
    [GO_REGISTER] = OPT_REGISTER,
    [GO_COST_TABLE] = OPT_COST_TABLE,
    [GO_MAX_ENTRY] = {.name = "max_entry",
                      .default_value = "0",
                      .type = IXL_OPT_SIZE,
                      .min = 0,
                      .max = 1 << 30,
                      .description = "largest batch entry; 0: cuFile's per_buffer_cache_size_kb "
                                     "(larger descriptors are split), a multiple of 4096"},
    [GO_BATCH] = {.name = "batch",
                  .default_value = "0",
                  .type = IXL_OPT_INT,
                  .unit = "entries",
                  .min = 0,
                  .max = 1024,
                  .description = "entries per batch; 0: cuFile's io_batchsize (capped by "
                                 "max_device_cache_size_kb / per_buffer_cache_size_kb)"},
};

enum gds_mt_opt {
    MO_LIBRARY,
    MO_REGISTER,
    MO_COST_TABLE,
    MO_THREADS,
    MO_MIN_CHUNK,
    MO_MAX_CHUNK,
    MO_COUNT
};
static const struct ixl_option gds_mt_options[MO_COUNT] = {
    [MO_LIBRARY] = OPT_LIBRARY,
    [MO_REGISTER] = OPT_REGISTER,
    [MO_COST_TABLE] = OPT_COST_TABLE,
    [MO_THREADS] = {.name = "threads",
                    .default_value = "8",
                    .type = IXL_OPT_INT,
                    .unit = "threads",
                    .min = 1,
                    .max = 64,
                    .description = "threads calling cuFileRead/cuFileWrite"},
    [MO_MIN_CHUNK] = {.name = "min_chunk",
                      .default_value = "1M",
                      .type = IXL_OPT_SIZE,
                      .min = 4096,
                      .max = 1 << 30,
                      .description = "smallest piece a descriptor is split into across the "
                                     "threads"},
    [MO_MAX_CHUNK] = {.name = "max_chunk",
                      .default_value = "16M",
                      .type = IXL_OPT_SIZE,
                      .min = 4096,
                      .max = 1 << 30,
                      .description = "largest single cuFileRead/cuFileWrite"},
};

const struct ixl_sys *gds_sys_ptr;

static const char *kind_name(const struct gds_engine *e)
{
    return e->kind == GDS_BATCH ? "GDS" : "GDS_MT";
}

int gds_error(struct gds_engine *e, int status, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "%s", buf); /* the core names the backend */
    return status;
}

static int parse_options(struct gds_engine *e, const struct ixl_engine_init *init)
{
    size_t want = e->kind == GDS_BATCH ? GO_COUNT : MO_COUNT;
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != want)
        return gds_error(e, IXL_ERR_INVALID_ARG, "the core passed no typed options");
    const struct ixl_opt_value *v = init->values;
    /* STRING options are read as text, from params. */
    const char *lib = NULL;
    for (size_t i = 0; i < init->n_params; i++) {
        if (strcmp(init->params[i].key, "library") == 0)
            lib = init->params[i].value;
        if (strcmp(init->params[i].key, "cost_table") == 0 && init->params[i].value)
            snprintf(e->cost_path, sizeof(e->cost_path), "%s", init->params[i].value);
    }
    if (lib == NULL || lib[0] == '\0' || strlen(lib) >= sizeof(e->lib))
        return gds_error(e, IXL_ERR_INVALID_ARG,
                         "option library: want a library name or path of 1 to %zu characters",
                         sizeof(e->lib) - 1);
    snprintf(e->lib, sizeof(e->lib), "%s", lib);
    e->register_bufs = v[GO_REGISTER].i != 0;
    if (e->kind == GDS_BATCH) {
        e->entry = v[GO_MAX_ENTRY].u;
        e->entries = (uint32_t)v[GO_BATCH].u;
        if (e->entry % 4096 != 0)
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "option max_entry=%" PRIu64 " bytes: want a multiple of 4096",
                             e->entry);
    } else {
        e->nthreads = (unsigned)v[MO_THREADS].u;
        e->min_piece = v[MO_MIN_CHUNK].u;
        e->max_piece = v[MO_MAX_CHUNK].u;
        if (e->min_piece > e->max_piece)
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "option min_chunk (%" PRIu64 ") exceeds max_chunk (%" PRIu64 ")",
                             e->min_piece, e->max_piece);
    }
    return IXL_OK;
}

/* The batch limits from cuFile's properties (KB; 0 = not reported: cuFile's default). */
static int batch_limits(struct gds_engine *e, const gds_CUfileDrvProps *p)
{
    struct gds_limits l;
    gds_limits_default(&l);
    if (p->per_buffer_cache_size)
        l.per_buffer = (uint64_t)p->per_buffer_cache_size * 1024;
    if (p->max_device_cache_size)
        l.device_cache = (uint64_t)p->max_device_cache_size * 1024;
    if (p->max_batch_io_size)
        l.batch_max = p->max_batch_io_size;
    char why[512];
    uint64_t entry;
    uint32_t entries;
    int rc = gds_limits_batch(&l, e->entry, e->entries, &entry, &entries, why, sizeof(why));
    if (rc != IXL_OK)
        return gds_error(e, rc, "%s", why);
    e->entry = entry;
    e->entries = entries;
    return IXL_OK;
}

static void stop_threads(struct gds_engine *e)
{
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    for (unsigned i = 0; i < e->nstarted; i++)
        pthread_join(e->threads[i], NULL);
    e->nstarted = 0;
}

static int gds_create(enum gds_kind kind, const struct ixl_engine_init *init,
                      struct ixl_engine **out)
{
    const struct ixl_host *h = init->host;
    if (h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev) || h->sys == NULL ||
        h->dev == NULL ||
        h->sys->size < offsetof(struct ixl_sys, io_uring_queue_init) + sizeof(void *)) {
        h->error(h->ctx, IXL_ERR_PLUGIN,
                 "%s: the host has no device layer or system-call table (an older core)",
                 kind == GDS_BATCH ? "GDS" : "GDS_MT");
        return IXL_ERR_PLUGIN;
    }
    __atomic_store_n(&gds_sys_ptr, h->sys, __ATOMIC_RELAXED);
    struct gds_engine *e = gds_sys()->calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = h;
    e->dev = h->dev;
    e->kind = kind;
    int rc = parse_options(e, init);
    if (rc != IXL_OK)
        goto free_engine;
    if (e->dev->size < offsetof(struct ixl_devops, ctx_leave) + sizeof(e->dev->ctx_leave)) {
        rc = gds_error(e, IXL_ERR_PLUGIN, "the device layer lacks ctx_enter (an older core)");
        goto free_engine;
    }
    char why[512] = "";
    gds_CUfileDrvProps props;
    rc = gds_lib_load(h, e->lib, &e->cf, &props, &e->compat, e->mode_text, sizeof(e->mode_text),
                      why, sizeof(why));
    if (rc != IXL_OK) {
        gds_error(e, rc, "%s", why);
        goto free_engine;
    }
    char dwhy[256] = "";
    if (e->dev->count(e->dev->ctx, dwhy, sizeof(dwhy)) <= 0) {
        rc = gds_error(e, IXL_ERR_NOT_SUPPORTED, "no GPU to move data to or from: %s",
                       dwhy[0] ? dwhy : "no CUDA device");
        goto free_engine;
    }
    rc = ixl_cost_table_open(gds_sys(), e->cost_path, &e->costs, why, sizeof(why));
    if (rc != IXL_OK) {
        gds_error(e, rc, "%s", why);
        goto free_engine;
    }
    if (kind == GDS_BATCH) {
        rc = batch_limits(e, &props);
        if (rc != IXL_OK)
            goto free_costs;
        /* A batch as large as the thread will set up, now: a cuFile that refuses batch I/O
         * here (compatibility mode on some versions, a cufile.json that cannot hold it) makes
         * GDS unavailable with the reason, rather than failing every request. */
        void *saved;
        if (e->dev->ctx_enter(e->dev->ctx, 0, &saved) == IXL_OK) {
            gds_CUfileBatchHandle bh;
            gds_CUfileError ce = e->cf->cuFileBatchIOSetUp(&bh, e->entries);
            if (ce.err == GDS_CU_FILE_SUCCESS)
                e->cf->cuFileBatchIODestroy(bh);
            e->dev->ctx_leave(e->dev->ctx, saved);
            if (ce.err != GDS_CU_FILE_SUCCESS) {
                char t[96];
                rc = gds_error(e, IXL_ERR_NOT_SUPPORTED,
                               "Error in setting up Batch: cuFileBatchIOSetUp(%u entries) failed: "
                               "%s (%s)",
                               e->entries, gds_err_text(ce, t, sizeof(t)), gds_batch_hint(ce));
                goto free_costs;
            }
        }
        if (!(props.fflags & (1u << GDS_CU_FILE_BATCH_IO_SUPPORTED)) && props.fflags != 0)
            h->log(h->ctx, IXL_LOG_WARN,
                   "GDS: cuFile does not report batch I/O support (fflags 0x%x); GDS_MT does "
                   "not need it",
                   props.fflags);
    }
    h->log(h->ctx, IXL_LOG_INFO, "%s: %s; %s", kind_name(e), e->mode_text,
           kind == GDS_BATCH ? "batch I/O" : "thread pool");
    if (kind == GDS_BATCH)
        h->log(h->ctx, IXL_LOG_INFO,
               "GDS: batch entries of at most %" PRIu64 " bytes, %u per batch (cuFile's "
               "per_buffer_cache_size %u KB, max_device_cache_size %u KB, max_batch_io_size %u)",
               e->entry, e->entries, props.per_buffer_cache_size, props.max_device_cache_size,
               props.max_batch_io_size);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->idle, NULL);
    unsigned n = kind == GDS_BATCH ? 1 : e->nthreads;
    e->threads = gds_sys()->calloc(n, sizeof(pthread_t));
    if (e->threads == NULL) {
        rc = IXL_ERR_NO_MEMORY;
        goto destroy_sync;
    }
    for (unsigned i = 0; i < n; i++) {
        int err = gds_sys()->pthread_create(&e->threads[i], NULL,
                                            kind == GDS_BATCH ? gds_batch_main : gds_mt_main, e);
        if (err != 0) {
            rc = gds_error(e, IXL_ERR_SYSTEM, "cannot start a thread: %s", strerror(err));
            goto join_threads;
        }
        e->nstarted++;
    }
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL;
    e->base.mem_mask = GDS_MEMS;
    *out = &e->base;
    return IXL_OK;
join_threads:
    stop_threads(e);
    free(e->threads);
destroy_sync:
    pthread_cond_destroy(&e->idle);
    pthread_cond_destroy(&e->work);
    pthread_mutex_destroy(&e->lock);
free_costs:
    ixl_cost_table_free(&e->costs);
free_engine:
    free(e);
    return rc;
}

static int gds_create_batch(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    return gds_create(GDS_BATCH, init, out);
}

static int gds_create_mt(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    return gds_create(GDS_THREADS, init, out);
}

static void gds_destroy(struct ixl_engine *base)
{
    struct gds_engine *e = (struct gds_engine *)base;
    stop_threads(e);
    free(e->threads);
    pthread_cond_destroy(&e->idle);
    pthread_cond_destroy(&e->work);
    pthread_mutex_destroy(&e->lock);
    ixl_cost_table_free(&e->costs);
    free(e);
}

int gds_thread_ctx(struct gds_engine *e, int dev, int *cur)
{
    if (*cur == dev)
        return IXL_OK;
    void *saved;
    int rc = e->dev->ctx_enter(e->dev->ctx, dev, &saved);
    if (rc == IXL_OK)
        *cur = dev; /* the plugin's own thread keeps it */
    return rc;
}

/* ---- registration -------------------------------------------------------------------------- */

/* Parses "MODE:PATH" (plugins/common/ixl_file_mode.h), saying why through the engine. */
static int parse_mode(struct gds_engine *e, const void *bytes, size_t len, char *path, size_t cap,
                      int *flags)
{
    char why[256];
    int rc = ixlp_parse_file_mode(bytes, len, path, cap, flags, why, sizeof(why));
    return rc == IXL_OK ? IXL_OK : gds_error(e, rc, "%s", why);
}

static int open_file(struct gds_engine *e, enum ixl_mem type, const struct ixl_reg_desc *d,
                     struct gds_md *m)
{
    int by_path = (type == IXL_MEM_FILE && d->dev == IXL_DEV_NONE) ||
                  (type == IXL_MEM_BLK && d->bytes_len > 0);
    int flags = 0;
    if (by_path) {
        int rc = parse_mode(e, d->bytes, d->bytes_len, m->name, sizeof(m->name), &flags);
        if (rc != IXL_OK)
            return rc;
        m->fd = gds_sys()->open(m->name, flags | O_CLOEXEC, 0644);
        if (m->fd < 0) {
            int err = errno;
            return gds_error(e, err == ENOENT ? IXL_ERR_NOT_FOUND : IXL_ERR_SYSTEM,
                             "cannot open '%s': %s%s", m->name, strerror(err),
                             err == EINVAL && (flags & O_DIRECT)
                                 ? " (this filesystem may not support direct I/O: drop 'direct')"
                                 : "");
        }
    } else {
        if (d->dev > INT32_MAX || (flags = gds_sys()->fcntl((int)d->dev, F_GETFL, 0)) < 0)
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "%s dev %" PRIu64 " is not an open file descriptor (give an open "
                             "fd, or%s bytes \"MODE:PATH\")",
                             type == IXL_MEM_FILE ? "FILE" : "BLK", d->dev,
                             type == IXL_MEM_FILE ? " IXL_DEV_NONE and" : "");
        m->fd = gds_sys()->fcntl((int)d->dev, F_DUPFD_CLOEXEC, 0);
        if (m->fd < 0)
            return gds_error(e, IXL_ERR_SYSTEM, "cannot duplicate fd %" PRIu64 ": %s", d->dev,
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
    if (gds_sys()->fstat(m->fd, &st) != 0)
        return gds_error(e, IXL_ERR_SYSTEM, "fstat '%s': %s", m->name, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
        return gds_error(e, IXL_ERR_INVALID_ARG,
                         "'%s' is neither a regular file nor a block device", m->name);
    if (type == IXL_MEM_BLK) {
        uint64_t size = (uint64_t)st.st_size;
        if (S_ISBLK(st.st_mode) && ioctl(m->fd, BLKGETSIZE64, &size) != 0)
            return gds_error(e, IXL_ERR_SYSTEM, "cannot read the size of '%s': %s", m->name,
                             strerror(errno));
        m->vol_size = size;
        if (d->addr > size || (d->len != 0 && d->len > size - d->addr))
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "BLK region %" PRIu64 "+%" PRIu64 " lies past the end of volume "
                             "'%s' (%" PRIu64 " bytes)",
                             d->addr, d->len, m->name, size);
    }
    gds_CUfileDescr cd;
    memset(&cd, 0, sizeof(cd));
    cd.type = GDS_CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    cd.handle.fd = m->fd;
    gds_CUfileError ce = e->cf->cuFileHandleRegister(&m->fh, &cd);
    if (ce.err != GDS_CU_FILE_SUCCESS) {
        char t[96];
        bool flag =
            ce.err == GDS_CU_FILE_INVALID_FILE_OPEN_FLAG || ce.err == GDS_CU_FILE_DIO_NOT_SET;
        /* Anything but the open flags means cuFile cannot serve this file here (its file
         * system, its volume: cuFile's log says which): IXL_ERR_NOT_SUPPORTED, so that a
         * registration with every backend goes on without GDS for this file. */
        return gds_error(e, flag ? IXL_ERR_BACKEND : IXL_ERR_NOT_SUPPORTED,
                         "cuFileHandleRegister of '%s' failed: %s%s", m->name,
                         gds_err_text(ce, t, sizeof(t)),
                         flag ? " (GPUDirect Storage wants the file open with O_DIRECT: mode "
                                "'direct', or an fd opened with O_DIRECT)"
                              : " (cuFile cannot serve this file here, even in compatibility "
                                "mode: its file system or volume is not one cuFile supports, or "
                                "cuFile cannot identify the volume because udev's database "
                                "(/run/udev/data) lacks it, as in containers and VMs that run "
                                "no udevd (cufile.log then says 'udev property not found'); "
                                "cufile.log says why)");
    }
    m->fh_ok = true;
    return IXL_OK;
}

static int register_vram(struct gds_engine *e, const struct ixl_reg_desc *d, struct gds_md *m)
{
    m->base = d->addr;
    m->len = d->len;
    m->dev = (int)d->dev;
    if (!e->register_bufs)
        return IXL_OK;
    void *saved;
    int rc = e->dev->ctx_enter(e->dev->ctx, m->dev, &saved);
    if (rc != IXL_OK)
        return gds_error(e, rc, "cannot make device %d's context current", m->dev);
    gds_CUfileError ce = e->cf->cuFileBufRegister((const void *)(uintptr_t)d->addr, d->len, 0);
    e->dev->ctx_leave(e->dev->ctx, saved);
    if (ce.err == GDS_CU_FILE_SUCCESS) {
        m->buf_registered = true;
    } else if (ce.err == GDS_CU_FILE_MEMORY_ALREADY_REGISTERED) {
        /* Another user of cuFile in this process registered it (the other of GDS and GDS_MT,
         * or the application): it is registered, and stays the other's to deregister. */
        e->host->log(e->host->ctx, IXL_LOG_INFO,
                     "%s: the %" PRIu64 " bytes at 0x%" PRIx64
                     " on device %d are already registered with cuFile (by another backend of "
                     "this process or the application): used as they are, not deregistered here",
                     kind_name(e), d->len, d->addr, m->dev);
    } else {
        /* Not fatal: cuFile moves unregistered memory through its own bounce buffers. */
        char t[96];
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "%s: cuFileBufRegister of %" PRIu64 " bytes at 0x%" PRIx64
                     " on device %d failed (%s): transfers use cuFile's bounce buffers",
                     kind_name(e), d->len, d->addr, m->dev, gds_err_text(ce, t, sizeof(t)));
    }
    return IXL_OK;
}

static int gds_register(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *d,
                        struct ixl_md **out)
{
    struct gds_engine *e = (struct gds_engine *)base;
    if (!(GDS_MEMS & IXL_MEM_BIT(type)))
        return gds_error(e, IXL_ERR_BAD_MEM_TYPE, "registers VRAM, FILE and BLK only");
    struct gds_md *m = gds_sys()->calloc(1, sizeof(*m));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    m->type = type;
    m->fd = -1;
    int rc = type == IXL_MEM_VRAM ? register_vram(e, d, m) : open_file(e, type, d, m);
    if (rc != IXL_OK) {
        if (m->fd >= 0)
            gds_sys()->close(m->fd);
        free(m);
        return rc;
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int gds_deregister(struct ixl_engine *base, struct ixl_md *md)
{
    struct gds_engine *e = (struct gds_engine *)base;
    struct gds_md *m = (struct gds_md *)md;
    if (m->buf_registered) {
        void *saved;
        bool in = e->dev->ctx_enter(e->dev->ctx, m->dev, &saved) == IXL_OK;
        e->cf->cuFileBufDeregister((const void *)(uintptr_t)m->base);
        if (in)
            e->dev->ctx_leave(e->dev->ctx, saved);
    }
    if (m->fh_ok)
        e->cf->cuFileHandleDeregister(m->fh);
    if (m->fd >= 0)
        gds_sys()->close(m->fd);
    free(m);
    return IXL_OK;
}

static int gds_load_local(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    (void)base;
    *out = md;
    return IXL_OK;
}

static int gds_unload(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    (void)md;
    return IXL_OK;
}

static int gds_connect(struct ixl_engine *base, const char *agent)
{
    (void)base;
    (void)agent;
    return IXL_OK;
}

/* ---- requests ------------------------------------------------------------------------------ */

static const char *mem_name(enum ixl_mem t)
{
    switch (t) {
    case IXL_MEM_DRAM:
        return "DRAM";
    case IXL_MEM_VRAM:
        return "VRAM";
    case IXL_MEM_BLK:
        return "BLK";
    case IXL_MEM_FILE:
        return "FILE";
    default:
        return "OBJ";
    }
}

static int gds_prep(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                    const struct ixl_xfer_side *remote, const char *remote_agent,
                    const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct gds_engine *e = (struct gds_engine *)base;
    (void)remote_agent;
    if (opts && opts->notif)
        return gds_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                         "storage backends do not support notifications: omit the notification");
    int lfile = local->type != IXL_MEM_VRAM, rfile = remote->type != IXL_MEM_VRAM;
    if (lfile == rfile)
        return gds_error(e, IXL_ERR_BAD_MEM_TYPE,
                         "moves data between VRAM and FILE or BLK, not %s to %s",
                         mem_name(local->type), mem_name(remote->type));
    const struct ixl_xfer_desc *mem = lfile ? remote->descs : local->descs;
    const struct ixl_xfer_desc *file = lfile ? local->descs : remote->descs;
    bool to_file = (op == IXL_OP_WRITE) == (bool)rfile;
    for (size_t i = 0; i < local->count; i++) {
        const struct gds_md *f = (const struct gds_md *)file[i].md;
        if (f == NULL || f->fd < 0 || mem[i].md == NULL)
            return gds_error(e, IXL_ERR_INVALID_ARG, "descriptor %zu has no metadata", i);
        if (to_file ? !f->wr_ok : !f->rd_ok)
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "'%s' is registered %s: descriptor %zu cannot be %s", f->name,
                             to_file ? "read-only" : "write-only", i, to_file ? "written" : "read");
        if (to_file && f->append)
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "'%s' is open with O_APPEND: descriptor %zu cannot be written "
                             "(register an fd opened without O_APPEND)",
                             f->name, i);
        if (f->vol_size && (file[i].addr > f->vol_size || file[i].len > f->vol_size - file[i].addr))
            return gds_error(e, IXL_ERR_INVALID_ARG,
                             "descriptor %zu (offset %" PRIu64 ", %" PRIu64 " bytes) lies past "
                             "the end of volume '%s' (%" PRIu64 " bytes)",
                             i, file[i].addr, file[i].len, f->name, f->vol_size);
        if (file[i].addr > INT64_MAX - file[i].len)
            return gds_error(e, IXL_ERR_INVALID_ARG, "descriptor %zu: offset out of range", i);
    }
    struct gds_req *r = gds_sys()->calloc(1, sizeof(*r) + local->count * sizeof(uint64_t));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    r->e = e;
    r->n = local->count;
    r->mem = mem;
    r->file = file;
    r->to_file = to_file;
    for (size_t i = 0; i < r->n; i++) {
        r->lens[i] = file[i].len;
        r->bytes += file[i].len;
    }
    atomic_init(&r->state, GDS_IDLE);
    *out = (struct ixl_req *)r;
    return IXL_OK;
}

static void enqueue(struct gds_engine *e, struct gds_req *r)
{
    r->qnext = NULL;
    if (e->tail)
        e->tail->qnext = r;
    else
        e->head = r;
    e->tail = r;
    r->queued = true;
}

static void dequeue(struct gds_engine *e, struct gds_req *r)
{
    if (!r->queued)
        return;
    struct gds_req **pp = &e->head, *prev = NULL;
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

static bool maybe_finish(struct gds_req *r)
{
    if (r->inflight != 0 || r->queued || atomic_load(&r->state) != GDS_RUNNING)
        return false;
    atomic_store(&r->state, r->status == IXL_OK ? GDS_DONE : GDS_FAILED);
    return true;
}

/* Skips exhausted descriptors; dequeues the request when nothing is left to start. */
static void settle(struct gds_engine *e, struct gds_req *r)
{
    while (r->cur.desc < r->n && r->cur.off >= r->lens[r->cur.desc]) {
        r->cur.desc++;
        r->cur.off = 0;
    }
    if (r->cur.desc >= r->n)
        dequeue(e, r);
}

bool gds_take(struct gds_engine *e, uint64_t max, int dev, struct gds_io *io)
{
    struct gds_req *r = e->head;
    if (r == NULL)
        return false;
    settle(e, r);
    if (!r->queued) {
        bool ended = maybe_finish(r);
        if (ended)
            e->host->signal(e->host->ctx);
        return gds_take(e, max, dev, io);
    }
    size_t d = r->cur.desc;
    const struct gds_md *m = (const struct gds_md *)r->mem[d].md;
    if (dev >= 0 && m->dev != dev)
        return false;
    if (max == 0)
        max = gds_mt_piece(r->lens[d], e->nthreads, e->min_piece, e->max_piece);
    struct gds_piece p;
    if (!gds_next_piece(r->lens, r->n, max, &r->cur, &p))
        return false; /* settle() left a piece: not reached */
    io->r = r;
    io->f = (const struct gds_md *)r->file[p.desc].md;
    io->base = (void *)(uintptr_t)m->base;
    io->buf_off = (int64_t)(r->mem[p.desc].addr - m->base + p.off);
    io->off = (int64_t)(r->file[p.desc].addr + p.off);
    io->len = p.len;
    io->dev = m->dev;
    r->inflight++;
    settle(e, r);
    return true;
}

static int errno_status(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EFBIG ? IXL_ERR_NO_SPACE : IXL_ERR_IO;
}

static void fail_req(struct gds_engine *e, struct gds_req *r, int status, const char *msg)
{
    if (r->status == IXL_OK) {
        r->status = status;
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
    }
    dequeue(e, r);
}

static void finish_io(struct gds_engine *e, struct gds_io *io)
{
    struct gds_req *r = io->r;
    r->inflight--;
    pthread_cond_broadcast(&e->idle);
    if (maybe_finish(r))
        e->host->signal(e->host->ctx);
}

void gds_done_fail(struct gds_engine *e, struct gds_io *io, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_req(e, io->r, status, msg);
    finish_io(e, io);
}

bool gds_done(struct gds_engine *e, struct gds_io *io, ssize_t res, int err)
{
    struct gds_req *r = io->r;
    if (res > 0 && (uint64_t)res < io->len && r->status == IXL_OK && !r->canceled) {
        io->buf_off += res;
        io->off += res;
        io->len -= (uint64_t)res;
        return true;
    }
    const char *what = r->to_file ? "write" : "read";
    const char *prep = r->to_file ? "to" : "from";
    char t[128], msg[512];
    if (res < 0) {
        snprintf(msg, sizeof(msg),
                 "cuFile%s of %" PRIu64 " bytes %s '%s' at offset %" PRId64 " failed: %s",
                 r->to_file ? "Write" : "Read", io->len, prep, io->f->name, io->off,
                 gds_io_err_text(res, err, t, sizeof(t)));
        fail_req(e, r, res == -1 ? errno_status(err) : IXL_ERR_IO, msg);
    } else if (res == 0 && io->len > 0) {
        if (r->to_file)
            snprintf(msg, sizeof(msg),
                     "%s of %" PRIu64 " bytes to '%s' at offset %" PRId64 " wrote nothing", what,
                     io->len, io->f->name, io->off);
        else
            snprintf(msg, sizeof(msg),
                     "%s of %" PRIu64 " bytes from '%s' at offset %" PRId64 " reached the end "
                     "of the file: the descriptor lies past its end",
                     what, io->len, io->f->name, io->off);
        fail_req(e, r, IXL_ERR_IO, msg);
    }
    finish_io(e, io);
    return false;
}

static int gds_post(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct gds_engine *e = (struct gds_engine *)base;
    struct gds_req *r = (struct gds_req *)req;
    if (opts && opts->notif)
        return gds_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                         "storage backends do not support notifications: omit the notification");
    pthread_mutex_lock(&e->lock);
    r->cur.desc = 0;
    r->cur.off = 0;
    r->status = IXL_OK;
    r->reported = false;
    r->canceled = false;
    r->msg[0] = '\0';
    if (r->bytes == 0) {
        atomic_store(&r->state, GDS_DONE);
        pthread_mutex_unlock(&e->lock);
        return IXL_OK;
    }
    atomic_store(&r->state, GDS_RUNNING);
    enqueue(e, r);
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    return IXL_IN_PROGRESS;
}

static int gds_check(struct ixl_engine *base, struct ixl_req *req)
{
    struct gds_engine *e = (struct gds_engine *)base;
    struct gds_req *r = (struct gds_req *)req;
    switch (atomic_load(&r->state)) {
    case GDS_DONE:
        return IXL_OK;
    case GDS_FAILED: {
        pthread_mutex_lock(&e->lock);
        int status = r->status;
        if (!r->reported) {
            r->reported = true;
            gds_error(e, status, "%s", r->msg);
        }
        pthread_mutex_unlock(&e->lock);
        return status;
    }
    case GDS_RUNNING:
        return IXL_IN_PROGRESS;
    default:
        return IXL_ERR_NOT_POSTED;
    }
}

static int gds_release(struct ixl_engine *base, struct ixl_req *req)
{
    struct gds_engine *e = (struct gds_engine *)base;
    struct gds_req *r = (struct gds_req *)req;
    pthread_mutex_lock(&e->lock);
    r->canceled = true;
    dequeue(e, r);
    if (r->inflight > 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        while (r->inflight > 0)
            if (pthread_cond_timedwait(&e->idle, &e->lock, &dl) != 0)
                break;
    }
    if (r->inflight > 0) {
        if (r->status == IXL_OK) {
            r->status = IXL_ERR_CANCELED;
            snprintf(r->msg, sizeof(r->msg), "the request was canceled");
        }
        uint32_t n = r->inflight;
        pthread_mutex_unlock(&e->lock);
        return gds_error(e, IXL_ERR_BUSY,
                         "%u cuFile I/O(s) of the request are in flight: "
                         "release again",
                         n);
    }
    pthread_mutex_unlock(&e->lock);
    free(r);
    return IXL_OK;
}

static int gds_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    struct gds_engine *e = (struct gds_engine *)base;
    (void)req;
    snprintf(out->path, sizeof(out->path), "%s%s", e->kind == GDS_BATCH ? "batch" : "mt",
             e->compat ? ".compat" : "");
    return IXL_OK;
}

/* From the cost table (plugins/common/ixl_cost_table.h): the row of this backend's path as
 * req_info reports it ("batch" or "mt", with ".compat" in cuFile's compatibility mode), else
 * the path without ".compat" (the default table has no compat rows). */
static int gds_estimate(struct ixl_engine *base, struct ixl_req *req, struct ixl_cost *out)
{
    struct gds_engine *e = (struct gds_engine *)base;
    struct gds_req *r = (struct gds_req *)req;
    const char *name = kind_name(e);
    const char *path = e->kind == GDS_BATCH ? "batch" : "mt";
    int op = r->to_file ? IXL_OP_WRITE : IXL_OP_READ;
    uint64_t block = r->n ? r->bytes / r->n : 0;
    struct ixl_cost c = {.size = sizeof(c)};
    int rc = IXL_ERR_NOT_SUPPORTED;
    if (e->compat) {
        char cpath[IXL_COST_NAME_MAX];
        snprintf(cpath, sizeof(cpath), "%s.compat", path);
        rc = ixl_cost_table_estimate(&e->costs, name, cpath, op, block, r->bytes, &c);
    }
    if (rc != IXL_OK)
        rc = ixl_cost_table_estimate(&e->costs, name, path, op, block, r->bytes, &c);
    if (rc != IXL_OK)
        return gds_error(e, rc, "the cost table (%s) has no row for %s %s %s", e->costs.source,
                         name, path, r->to_file ? "WRITE" : "READ");
    out->duration_us = c.duration_us;
    out->error_margin_us = c.error_margin_us;
    out->method = c.method;
    return IXL_OK;
}

static const struct ixl_engine_ops gds_engine_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = gds_connect,
    .register_mem = gds_register,
    .deregister_mem = gds_deregister,
    .load_local_md = gds_load_local,
    .unload_md = gds_unload,
    .prep_xfer = gds_prep,
    .estimate_xfer_cost = gds_estimate,
    .post_xfer = gds_post,
    .check_xfer = gds_check,
    .release_req = gds_release,
    .req_info = gds_req_info,
};

static const struct ixl_plugin_desc gds_batch_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "GDS",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = GDS_MEMS,
    .options = gds_options,
    .n_options = GO_COUNT,
    .create_engine = gds_create_batch,
    .destroy_engine = gds_destroy,
    .ops = &gds_engine_ops,
};

static const struct ixl_plugin_desc gds_mt_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "GDS_MT",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = GDS_MEMS,
    .options = gds_mt_options,
    .n_options = MO_COUNT,
    .create_engine = gds_create_mt,
    .destroy_engine = gds_destroy,
    .ops = &gds_engine_ops,
};

const struct ixl_plugin_desc *gds_desc_batch(void)
{
    return &gds_batch_desc;
}

const struct ixl_plugin_desc *gds_desc_mt(void)
{
    return &gds_mt_desc;
}

IXL_PLUGIN_EXPORT(gds_desc_batch)

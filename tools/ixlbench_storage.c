/*
 * ixlbench's storage mode (--target-mem FILE or BLK): one process, one agent, no target role
 * and no control channel. The agent registers the file (or volume) itself, in path mode, and
 * every request's remote agent is its own name (loopback, as storage backends want). The sweep
 * of ixlbench_initiator.c runs unchanged on the DRAM side; the file side comes from here:
 *
 *   - The file is sized before anything is timed: as given by --file-size, else its present
 *     size, else what the largest row needs. A part that ixlbench adds is written with data
 *     once (not a hole: a READ of a hole costs no I/O), then synced, so READs never pass EOF
 *     and never read holes.
 *   - Layout: the file is cut into units of one block (consecutive layout), or of the block
 *     rounded up to 4 KiB (scattered layout). Request number r = (iteration x threads + thread)
 *     x depth + slot takes batch units: the next batch units in file order (consecutive: a
 *     request is one contiguous range, consecutive requests are adjacent), or the next batch
 *     entries of a random permutation of the units (scattered). Requests walk through the
 *     whole file and wrap at its end, as fio's sequential jobs do; one iteration's requests
 *     never overlap (a row that would overlap is refused: the file is too small).
 *   - Data checks (untimed): READ writes a fresh pattern into the file with pwrite (and, with
 *     direct I/O, fdatasync, so no writeback lands in the timed region), poisons the DRAM
 *     destination, then compares it; WRITE fills the DRAM source, poisons the file, then reads
 *     the file back with pread. The pattern is a function of the file offset, so a block
 *     written or read at the wrong offset fails. ixlbench's own fd is buffered: the kernel
 *     keeps it coherent with O_DIRECT I/O of the backend (dirty pages are written before a
 *     direct read, cached pages dropped after a direct write).
 *   - --warm reads the whole file once through the page cache before the first row.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#include "ixlbench.h"

#define IXB_IO_STEP (8u << 20) /* pwrite/pread step of the fills, checks, sizing and warming */
#define IXB_SCATTER_ALIGN 4096u
/* A scattered layout shuffles at most this many units (a 64 MiB permutation); a larger file
 * uses its first IXB_SCATTER_MAX units. */
#define IXB_SCATTER_MAX (1u << 24)
#define IXB_BLK_VOLUME_ID 1

/* A file ixlbench created, removed at exit and on SIGINT/SIGTERM (unless --keep-file). */
static char created_path[PATH_MAX];

static void on_signal(int sig)
{
    if (created_path[0] != '\0')
        unlink(created_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int ixb_store_row(struct ixb_store *s, uint64_t block, uint64_t batch, uint64_t in_flight,
                  uint64_t seed)
{
    char b1[32], b2[32];

    s->block = block;
    s->batch = batch;
    if (s->obj) {
        /* One object per descriptor in flight: every iteration rewrites / rereads them. */
        s->stride = block;
        s->n_units = in_flight;
        s->n_reqs = in_flight / batch;
        if (in_flight > s->n_objs) {
            fprintf(stderr, "ixlbench: %" PRIu64 " objects in flight, %" PRIu64 " registered\n",
                    in_flight, s->n_objs);
            return -1;
        }
        return 0;
    }
    if (s->scatter) {
        s->stride = (block + IXB_SCATTER_ALIGN - 1) / IXB_SCATTER_ALIGN * IXB_SCATTER_ALIGN;
        s->n_units = s->size / s->stride;
        if (s->n_units > IXB_SCATTER_MAX)
            s->n_units = IXB_SCATTER_MAX;
        s->n_reqs = s->n_units / batch;
    } else {
        s->stride = block;
        s->n_units = s->size / block;
        s->n_reqs = s->n_units / batch;
    }
    if (s->n_reqs == 0 || s->n_reqs * batch < in_flight) {
        fprintf(stderr,
                "ixlbench: %s is too small for %" PRIu64 " descriptor(s) of %s in flight: it "
                "holds %" PRIu64 " (give a larger --file-size)\n",
                s->path, in_flight, ixb_size_str(block, b1, sizeof(b1)), s->n_units);
        return -1;
    }
    if (!s->scatter)
        return 0;
    if (s->perm_cap < s->n_units) {
        uint32_t *p = realloc(s->perm, (size_t)s->n_units * sizeof(*p));
        if (p == NULL) {
            fprintf(stderr, "ixlbench: out of memory for a permutation of %s\n",
                    ixb_size_str(s->n_units * sizeof(*p), b2, sizeof(b2)));
            return -1;
        }
        s->perm = p;
        s->perm_cap = (size_t)s->n_units;
    }
    for (uint64_t i = 0; i < s->n_units; i++)
        s->perm[i] = (uint32_t)i;
    uint64_t x = seed * 0x632BE59BD9B4E019ull + 1;
    for (uint64_t i = s->n_units - 1; i > 0; i--) {
        uint64_t j = splitmix(&x) % (i + 1);
        uint32_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    return 0;
}

uint64_t ixb_store_unit(const struct ixb_store *s, uint64_t r, uint64_t k)
{
    if (s->scatter)
        return s->perm[(r * s->batch + k) % s->n_units];
    return (r % s->n_reqs) * s->batch + k;
}

/* pwrite/pread of all of len bytes (short transfers continued). 0, or -1 with errno (0: EOF). */
static int full_io(int fd, bool wr, uint8_t *buf, size_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t n = wr ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = 0;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static void io_error(const struct ixb_store *s, bool wr, uint64_t off, uint64_t len)
{
    fprintf(stderr, "ixlbench: %s of %" PRIu64 " bytes at offset %" PRIu64 " of %s failed: %s\n",
            wr ? "pwrite" : "pread", len, off, s->path,
            errno == 0 ? "end of file" : strerror(errno));
}

int ixb_store_put(const struct ixb_store *s, uint64_t off, uint64_t len, uint64_t seed, bool poison,
                  uint8_t *scratch, size_t scratch_len)
{
    for (uint64_t done = 0; done < len;) {
        size_t n = (size_t)(len - done < scratch_len ? len - done : scratch_len);
        if (poison)
            memset(scratch, IXB_POISON, n);
        else
            ixb_fill(scratch, n, seed, off + done);
        if (full_io(s->fd, true, scratch, n, off + done) != 0) {
            io_error(s, true, off + done, n);
            return -1;
        }
        done += n;
    }
    return 0;
}

int64_t ixb_store_verify(const struct ixb_store *s, uint64_t off, uint64_t len, uint64_t seed,
                         uint8_t *scratch, size_t scratch_len, uint8_t *got)
{
    for (uint64_t done = 0; done < len;) {
        size_t n = (size_t)(len - done < scratch_len ? len - done : scratch_len);
        int64_t bad;
        if (full_io(s->fd, false, scratch, n, off + done) != 0) {
            io_error(s, false, off + done, n);
            return -2;
        }
        bad = ixb_verify(scratch, n, seed, off + done);
        if (bad >= 0) {
            *got = scratch[bad];
            return (int64_t)done + bad;
        }
        done += n;
    }
    return -1;
}

int ixb_store_settle(const struct ixb_store *s)
{
    if (s->direct && fdatasync(s->fd) != 0) {
        fprintf(stderr, "ixlbench: fdatasync of %s: %s\n", s->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The file size the largest row of the sweep needs. */
static uint64_t size_needed(const struct ixb_opts *o)
{
    uint64_t need = 0;

    for (uint64_t batch = o->batch_min; batch <= o->batch_max; batch *= 2)
        for (uint64_t block = o->block_min; block <= o->block_max; block *= 2) {
            uint64_t stride =
                o->scatter ? (block + IXB_SCATTER_ALIGN - 1) / IXB_SCATTER_ALIGN * IXB_SCATTER_ALIGN
                           : block;
            uint64_t n = (uint64_t)o->threads * o->depth * batch * stride;
            if (batch * block <= o->max_request && n > need)
                need = n;
        }
    return need;
}

/* Writes [from, to) of the file with data (not a hole), then syncs it. */
static int extend(struct ixb_store *s, uint64_t from, uint64_t to)
{
    size_t len = IXB_IO_STEP;
    uint8_t *buf = ixb_map(len);
    char b1[32];
    int rc = 0;

    if (buf == NULL) {
        fprintf(stderr, "ixlbench: out of memory\n");
        return -1;
    }
    ixb_out_note("writing %s into %s once, before measuring",
                 ixb_size_str(to - from, b1, sizeof(b1)), s->path);
    memset(buf, 0x5A, len);
    for (uint64_t off = from; off < to && rc == 0; off += len) {
        size_t n = (size_t)(to - off < len ? to - off : len);
        if (full_io(s->fd, true, buf, n, off) != 0) {
            io_error(s, true, off, n);
            rc = -1;
        }
    }
    if (rc == 0 && fdatasync(s->fd) != 0) {
        fprintf(stderr, "ixlbench: fdatasync of %s: %s\n", s->path, strerror(errno));
        rc = -1;
    }
    ixb_unmap(buf, len);
    return rc;
}

/* Reads the whole layout once through the page cache. */
static int warm(struct ixb_store *s)
{
    size_t len = IXB_IO_STEP;
    uint8_t *buf = ixb_map(len);
    uint64_t t0 = ixb_now_ns();
    char b1[32];

    if (buf == NULL) {
        fprintf(stderr, "ixlbench: out of memory\n");
        return -1;
    }
    for (uint64_t off = 0; off < s->size; off += len) {
        size_t n = (size_t)(s->size - off < len ? s->size - off : len);
        if (full_io(s->fd, false, buf, n, off) != 0) {
            io_error(s, false, off, n);
            ixb_unmap(buf, len);
            return -1;
        }
    }
    ixb_unmap(buf, len);
    ixb_out_note("page cache warmed: read %s of %s in %.2f s",
                 ixb_size_str(s->size, b1, sizeof(b1)), s->path, (double)(ixb_now_ns() - t0) / 1e9);
    return 0;
}

/* Opens (creating a FILE when missing) and sizes the file. */
static int store_open(const struct ixb_opts *o, struct ixb_store *s, bool *created)
{
    uint64_t need = size_needed(o), cur, want;
    struct stat sb;
    char b1[32], b2[32];

    *created = false;
    if (o->file == NULL) {
        const char *dir = "/var/tmp"; /* not tmpfs, where O_DIRECT is refused */
        snprintf(created_path, sizeof(created_path), "%s/ixlbench-XXXXXX", dir);
        s->fd = mkostemp(created_path, O_CLOEXEC);
        if (s->fd < 0) {
            fprintf(stderr, "ixlbench: cannot create a file in %s: %s (give --file PATH)\n", dir,
                    strerror(errno));
            created_path[0] = '\0';
            return -1;
        }
        *created = true;
    } else {
        s->fd = open(o->file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (s->fd >= 0) {
            *created = true;
            snprintf(created_path, sizeof(created_path), "%s", o->file);
        } else if (errno == EEXIST) {
            s->fd = open(o->file, O_RDWR | O_CLOEXEC);
        }
        if (s->fd < 0) {
            fprintf(stderr, "ixlbench: cannot open %s for reading and writing: %s\n", o->file,
                    strerror(errno));
            return -1;
        }
    }
    s->path = o->file != NULL ? o->file : strdup(created_path);
    if (*created && o->keep_file)
        created_path[0] = '\0'; /* kept: nothing to remove */
    if (s->path == NULL || fstat(s->fd, &sb) != 0) {
        fprintf(stderr, "ixlbench: fstat: %s\n", strerror(errno));
        return -1;
    }
    if (S_ISBLK(sb.st_mode)) {
        if (ioctl(s->fd, BLKGETSIZE64, &cur) != 0) {
            fprintf(stderr, "ixlbench: the size of %s (BLKGETSIZE64): %s\n", s->path,
                    strerror(errno));
            return -1;
        }
    } else if (S_ISREG(sb.st_mode)) {
        cur = (uint64_t)sb.st_size;
    } else {
        fprintf(stderr, "ixlbench: %s is neither a regular file nor a block device\n", s->path);
        return -1;
    }
    want = o->file_size ? o->file_size : (cur > need ? cur : need);
    if (want < need) {
        fprintf(stderr,
                "ixlbench: the largest row needs %s of %s (threads x depth x batch x "
                "block): give --file-size %" PRIu64 " or more\n",
                ixb_size_str(need, b1, sizeof(b1)), s->path, need);
        return -1;
    }
    if (want > cur && S_ISBLK(sb.st_mode)) {
        fprintf(stderr, "ixlbench: the volume %s holds %s, less than %s\n", s->path,
                ixb_size_str(cur, b1, sizeof(b1)), ixb_size_str(want, b2, sizeof(b2)));
        return -1;
    }
    if (want > cur && extend(s, cur, want) != 0)
        return -1;
    s->size = want;
    return 0;
}

/* --target-mem OBJ: register n_objs objects "PREFIX/i" (dev IXB_OBJ_DEV0 + i, whole objects),
 * sweep, deregister. The endpoint, bucket and keys come from --opt (endpoint_override=...,
 * bucket=...) or the AWS variables (plugins/obj/README.md). */
#define IXB_OBJ_DEV0 1000
static int obj_run(const struct ixb_opts *o, struct ixb_store *store, struct ixb_init *in)
{
    uint64_t n = 0;
    for (uint64_t batch = o->batch_min; batch <= o->batch_max; batch *= 2)
        if (batch * o->block_min <= o->max_request && batch > n)
            n = batch;
    n *= (uint64_t)o->threads * o->depth;
    struct ixl_reg_desc *regs = calloc(n ? n : 1, sizeof(*regs));
    char(*keys)[96] = calloc(n ? n : 1, sizeof(*keys));
    int rc = 1;
    bool registered = false;
    ixl_status st;

    store->obj = true;
    store->n_objs = n;
    store->obj_dev0 = IXB_OBJ_DEV0;
    store->path = o->obj_prefix;
    if (regs == NULL || keys == NULL) {
        fprintf(stderr, "ixlbench: out of memory\n");
        goto out;
    }
    in->o = o;
    in->seed = o->seed;
    in->store = store;
    if (o->init_mem != IXL_MEM_DRAM) {
        fprintf(stderr, "ixlbench: --target-mem OBJ moves DRAM only\n");
        rc = 2;
        goto out;
    }
    rc = ixb_agent_make(in->name, o->backend, o->opts, o->n_opts, &in->agent, &in->be);
    if (rc != 0)
        goto out;
    rc = 1;
    for (uint64_t i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s/%" PRIu64, o->obj_prefix, i);
        regs[i] = (struct ixl_reg_desc){0, 0, IXB_OBJ_DEV0 + i, keys[i], strlen(keys[i])};
    }
    st = ixl_mem_register(in->agent, IXL_MEM_OBJ, regs, (size_t)n, NULL);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: registering %" PRIu64 " objects %s/0.. with %s: %s: %s\n", n,
                o->obj_prefix, o->backend, ixl_strerror(st), ixl_agent_last_error(in->agent));
        goto out;
    }
    registered = true;
    in->ctl.agent = in->agent;
    snprintf(in->ctl.target, sizeof(in->ctl.target), "%s", in->name);
    pthread_mutex_init(&in->ctl.lock, NULL);
    rc = ixb_sweep(in);
    ixb_progress_clear();
    if (rc == 0 && in->check_failures > 0) {
        fprintf(stderr, "ixlbench: %d row(s) failed their data check\n", in->check_failures);
        rc = 1;
    }
    pthread_mutex_destroy(&in->ctl.lock);
out:
    if (registered &&
        (st = ixl_mem_deregister(in->agent, IXL_MEM_OBJ, regs, (size_t)n, NULL)) != IXL_OK) {
        fprintf(stderr, "ixlbench: deregistering the objects: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(in->agent));
        rc = 1;
    }
    ixl_agent_destroy(in->agent);
    free(regs);
    free(keys);
    return rc;
}

int ixb_storage_run(const struct ixb_opts *o)
{
    struct ixb_store store;
    struct ixb_init in;
    struct ixl_reg_desc reg;
    struct ixl_reg_params rp = {.field_mask = IXL_REG_F_DEVS_OUT};
    char bytes[PATH_MAX + 32];
    uint64_t dev = 0;
    bool created = false, registered = false;
    ixl_status st;
    int rc = 1;
    struct sigaction sa;

    memset(&store, 0, sizeof(store));
    memset(&in, 0, sizeof(in));
    store.fd = -1;
    store.type = o->target_mem;
    store.direct = o->direct;
    store.scatter = o->scatter;
    /* The contract of POSIX: a write past RLIMIT_FSIZE fails with EFBIG, if SIGXFSZ does not
     * kill the process first. */
    signal(SIGXFSZ, SIG_IGN);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    in.name = o->name ? o->name : "ixlbench";
    ixb_out_header(o->backend, in.name, in.name);
    if (store.type == IXL_MEM_OBJ)
        return obj_run(o, &store, &in);
    if (store_open(o, &store, &created) != 0)
        goto out;
    if (o->warm && warm(&store) != 0)
        goto out;

    in.o = o;
    in.seed = o->seed;
    in.store = &store;
    if (o->init_mem == IXL_MEM_VRAM) {
        char why[256] = "";
        int n = ixl_device_count(why, sizeof(why));
        if (n <= o->init_dev) {
            fprintf(stderr, "ixlbench: VRAM needs GPU %d, and there is %s: %s\n", o->init_dev,
                    n <= 0 ? "none" : "not that one", n < 0 ? why : "the driver lists fewer");
            rc = IXB_EXIT_SKIP;
            goto out;
        }
    }
    /* --backend auto: POSIX (with the --opt options) and every other storage backend that
     * loads here, and no backend named in the requests: the core chooses by the backends'
     * estimates (docs/device.md, "Automatic choice"); the path column says what ran. */
    bool autoc = strcmp(o->backend, "auto") == 0;
    rc = ixb_agent_make(in.name, autoc ? "POSIX" : o->backend, o->opts, o->n_opts, &in.agent,
                        &in.be);
    if (rc != 0)
        goto out;
    rc = 1;
    if (o->init_mem == IXL_MEM_VRAM && !(ixl_backend_mem_mask(in.be) & IXL_MEM_BIT(IXL_MEM_VRAM))) {
        const char *w = ixl_backend_mem_why(in.be);
        fprintf(stderr, "ixlbench: backend %s does not move VRAM here%s%s\n",
                autoc ? "POSIX" : o->backend, w[0] ? ": " : "", w);
        rc = IXB_EXIT_SKIP;
        goto out;
    }
    for (int i = 0; autoc && i < 2; i++) {
        static const char *const more[] = {"GDS", "GDS_MT"};
        struct ixl_backend *b = NULL;
        st = ixl_backend_create(in.agent, more[i], NULL, 0, &b);
        ixb_out_note("--backend auto: %s %s%s%s", more[i], st == IXL_OK ? "created" : "absent",
                     st == IXL_OK ? "" : ": ", st == IXL_OK ? "" : ixl_agent_last_error(in.agent));
    }
    /* Path mode: the backend opens the file itself (O_DIRECT with "direct"). A FILE region gets
     * its dev id from the agent (devs_out); a BLK volume takes an id of ours. */
    snprintf(bytes, sizeof(bytes), "rw%s%s:%s", o->direct ? ",direct" : "",
             store.type == IXL_MEM_FILE ? ",create" : "", store.path);
    reg = (struct ixl_reg_desc){0, 0, store.type == IXL_MEM_FILE ? IXL_DEV_NONE : IXB_BLK_VOLUME_ID,
                                bytes, strlen(bytes)};
    rp.devs_out = &dev;
    st = ixl_mem_register(in.agent, store.type, &reg, 1, &rp);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: registering %s %s (\"%s\") with %s: %s: %s\n",
                ixl_mem_name(store.type), store.path, bytes, o->backend, ixl_strerror(st),
                ixl_agent_last_error(in.agent));
        goto out;
    }
    registered = true;
    store.dev = dev;
    reg.dev = dev;
    in.ctl.agent = in.agent;
    snprintf(in.ctl.target, sizeof(in.ctl.target), "%s", in.name);
    pthread_mutex_init(&in.ctl.lock, NULL);
    rc = ixb_sweep(&in);
    ixb_progress_clear();
    if (rc == 0 && in.check_failures > 0) {
        fprintf(stderr, "ixlbench: %d row(s) failed their data check\n", in.check_failures);
        rc = 1;
    }
    pthread_mutex_destroy(&in.ctl.lock);
out:
    if (registered && (st = ixl_mem_deregister(in.agent, store.type, &reg, 1, NULL)) != IXL_OK) {
        fprintf(stderr, "ixlbench: deregistering %s: %s: %s\n", store.path, ixl_strerror(st),
                ixl_agent_last_error(in.agent));
        rc = 1;
    }
    ixl_agent_destroy(in.agent);
    if (store.fd >= 0)
        close(store.fd);
    if (created && created_path[0] != '\0')
        unlink(created_path);
    created_path[0] = '\0';
    if (o->file == NULL)
        free((char *)store.path);
    free(store.perm);
    return rc;
}

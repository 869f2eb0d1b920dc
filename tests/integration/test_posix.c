/*
 * The POSIX storage backend (plugins/posix/README.md) on real files in a mkdtemp directory
 * under /tmp, through real io_uring and the pread/pwrite thread pool.
 *
 *   test_posix           engine=auto (io_uring where the kernel allows it), plus io_uring
 *                        refused by seccomp filters, the options, the default backends
 *   test_posix threads   the same suite with engine=threads
 *   test_posix big       64 MiB transfers, buffered and O_DIRECT, with both engines
 *   test_posix root-blk DEV | root-enospc DIR
 *                        run by test_posix_root.sh on a loop device / a small mounted ext4
 *
 * Every checked transfer writes a fresh pattern to its source (a function of the file offset, so
 * scattered descriptors check against one seed) and poisons its destination with guard bytes on
 * both sides; the file side of a WRITE is checked through this test's own fd, not through the
 * backend. Covered: WRITE and READ of 1 B, 4 KiB, 1 MiB (64 MiB: big) in FILE path mode and fd
 * mode, buffered and O_DIRECT (aligned to statx's 512 where it says so), BLK on a regular file
 * (path and fd mode); descriptors split into 4 KiB chunks; 10^4 descriptors of 4 KiB at
 * shuffled, non-contiguous file offsets in one request, and 10^5 of 1 byte; len 0 = whole file
 * (a WRITE extends it); parts of a file as regions; the lists the other way round (local FILE);
 * prepared lists; ixl_mem_query; misaligned O_DIRECT refused at creation; READ past the end of
 * a file (IXL_ERR_IO naming file and offset; nothing lands after the error; the request posted
 * again once the file is long enough); WRITE to a read-only registration; O_WRONLY and O_APPEND
 * fds; EFBIG from RLIMIT_FSIZE (IXL_ERR_NO_SPACE); a BLK descriptor past the volume's end; the
 * queue still working after each failure; 8 requests in flight at once (one failing) and 4
 * threads posting; the agent's fd; a wait that times out; release of READs and WRITEs asserted
 * in flight and agent destroy with one in flight; mode words, odd paths, directories and pipes;
 * io_uring_setup (or io_uring_enter) refused by a seccomp filter: auto -> threads, engine=io_uring
 * fails; DRAM -> DRAM through NET in an agent with NET and POSIX; no fd leaked by agents.
 *
 * Exit 0 passed, 1 failed, 77 skipped. alarm() is the backstop for hangs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h" /* the data pattern: net_pat_fill / net_pat_find_bad */

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

#define GUARD 4096u
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define BIG_BYTES (64 * MIB)
#define NDESC 10000u
#define DESC_LEN 4096u
#define DESC_STRIDE 8192u /* file offsets of the scattered descriptors: never adjacent */
#define VOL_BYTES (4 * MIB)
#define BUF_BYTES (BIG_BYTES + 4 * GUARD)
#define POISON_D 0x5a /* DRAM destinations */
#define POISON_F 0xa5 /* file destinations */
#define WAIT_MS 30000
static int wait_ms = WAIT_MS; /* post_wait's bound (shorter where a hang is the suspected bug) */

static uint8_t *B;     /* DRAM registered with every agent (page-aligned, BUF_BYTES) */
static uint8_t *C;     /* scratch for checking files (BUF_BYTES) */
static char dir[64];   /* the mkdtemp directory */
static pid_t main_pid; /* the directory is removed by this process only */
static const char *want_path = "io_uring"; /* ixl_xfer_info().path of a storage request */
static const char *engine = "auto";
static bool uring_ok;          /* the kernel lets this process set up io_uring */
static bool direct_ok;         /* O_DIRECT opens in dir */
static uint32_t dio_off_align; /* statx's direct-I/O offset alignment in dir (0: unknown) */
static uint32_t dio_mem_align;
static int n_part_skips_ci; /* parts skipped that the project installs (fail under CI=true) */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_posix: alarm: the test ran out of time (a hang)\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
    }
    _exit(1);
}

/* A part of the suite that cannot run here. project_installs: under CI=true it fails. */
static void skip_part(int project_installs, const char *why)
{
    fprintf(stderr, "SKIP (part): %s\n", why);
    const char *ci = getenv("CI");
    if (project_installs && ci && strcmp(ci, "true") == 0)
        n_part_skips_ci++;
}

static void rm_dir(void)
{
    if (getpid() != main_pid || dir[0] == '\0')
        return;
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char p[PATH_MAX];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static const char *path_of(const char *name)
{
    static char p[8][PATH_MAX];
    static unsigned next;
    char *s = p[next++ % 8];
    snprintf(s, PATH_MAX, "%s/%s", dir, name);
    return s;
}

/* ---- data ---------------------------------------------------------------------------------- */

static uint64_t seed_counter;

/* A seed whose pattern byte at off differs from both poisons (so a 1-byte check can fail). */
static uint64_t fresh_seed(uint64_t off)
{
    for (;;) {
        uint64_t s = ((uint64_t)getpid() << 32) + ++seed_counter;
        if (net_pat_byte(s, off) != POISON_D && net_pat_byte(s, off) != POISON_F)
            return s;
    }
}

static void pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            check_fail(__FILE__, __LINE__, "pwrite at %" PRIu64 ": %s", off, strerror(errno));
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
}

static void pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            check_fail(__FILE__, __LINE__, "pread at %" PRIu64 ": %s", off,
                       n == 0 ? "end of file" : strerror(errno));
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
}

/* Writes len bytes of byte b (or of the pattern seed when pattern) at off, through C. */
static void file_fill(int fd, uint64_t off, size_t len, bool pattern, uint64_t seed, uint8_t b)
{
    while (len > 0) {
        size_t n = len < 8 * MIB ? len : 8 * MIB;
        if (pattern)
            net_pat_fill(C, n, seed, off);
        else
            memset(C, b, n);
        pwrite_all(fd, C, n, off);
        off += n;
        len -= n;
    }
}

static void check_pat(const char *what, const uint8_t *p, size_t len, uint64_t seed, uint64_t off)
{
    size_t bad = net_pat_find_bad(p, len, seed, off);
    if (bad != len)
        check_fail(__FILE__, __LINE__, "%s: byte %zu of %zu is 0x%02x, want 0x%02x", what, bad, len,
                   p[bad], net_pat_byte(seed, off + bad));
}

static void check_poison(const char *what, const uint8_t *p, size_t len, uint8_t b)
{
    size_t bad = net_byte_find_bad(p, len, b);
    if (bad != len)
        check_fail(__FILE__, __LINE__, "%s: guard byte %zu of %zu is 0x%02x, want poison 0x%02x",
                   what, bad, len, p[bad], b);
}

/* ---- agents, registrations, requests -------------------------------------------------------- */

/* An agent with no default backends and a POSIX backend with these options (NULL: default). */
static struct ixl_agent *posix_agent(const char *name, const char *eng, const char *qd,
                                     const char *chunk)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &ap, &a), IXL_OK);
    struct ixl_kv kv[3];
    size_t n = 0;
    if (eng)
        kv[n++] = (struct ixl_kv){"engine", eng};
    if (qd)
        kv[n++] = (struct ixl_kv){"queue_depth", qd};
    if (chunk)
        kv[n++] = (struct ixl_kv){"chunk", chunk};
    int rc = ixl_backend_create(a, "POSIX", kv, n, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "POSIX backend (engine=%s): %s: %s", eng ? eng : "default",
                   ixl_strerror(rc), ixl_agent_last_error(a));
    struct ixl_reg_desc d = {(uintptr_t)B, BUF_BYTES, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    return a;
}

/* A FILE or BLK region under test, and this test's own fd on the same file for checks. */
struct tgt {
    const char *what;
    enum ixl_mem type;
    uint64_t dev; /* what descriptors (and deregistration) use */
    uint64_t end; /* BLK: the volume's size; FILE: no end */
    int vfd;      /* this test's buffered O_RDWR fd */
    int own;      /* fd mode: the fd registered (-1 once closed) */
    bool direct;  /* offsets, lengths and buffers must be aligned */
    char path[PATH_MAX];
};

static int reg_path_rc(struct ixl_agent *a, enum ixl_mem type, const char *mode, const char *path,
                       uint64_t vol, uint64_t *dev_out)
{
    char bytes[PATH_MAX + 64];
    snprintf(bytes, sizeof(bytes), "%s:%s", mode, path);
    struct ixl_reg_desc d = {0, 0, type == IXL_MEM_FILE ? IXL_DEV_NONE : vol, bytes, strlen(bytes)};
    uint64_t dev = UINT64_MAX;
    struct ixl_reg_params p = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = &dev};
    int rc = ixl_mem_register(a, type, &d, 1, &p);
    if (rc == IXL_OK && dev_out)
        *dev_out = dev;
    return rc;
}

/* Path mode: POSIX opens the file (mode "rw,create", "ro", "rw,direct", ...). A BLK volume is
 * a regular file of VOL_BYTES made here first. */
static void tgt_path(struct tgt *t, struct ixl_agent *a, enum ixl_mem type, const char *mode,
                     const char *name, uint64_t vol)
{
    memset(t, 0, sizeof(*t));
    t->what = name;
    t->type = type;
    t->own = -1;
    t->direct = strstr(mode, "direct") != NULL;
    snprintf(t->path, sizeof(t->path), "%s", path_of(name));
    t->end = UINT64_MAX;
    if (type == IXL_MEM_BLK || strstr(mode, "create") == NULL) {
        int fd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        if (type == IXL_MEM_BLK) {
            CHECK(ftruncate(fd, VOL_BYTES) == 0);
            t->end = VOL_BYTES;
        }
        close(fd);
    } else {
        unlink(t->path); /* "create" makes it */
    }
    int rc = reg_path_rc(a, type, mode, t->path, vol, &t->dev);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "register %s \"%s:%s\": %s: %s", ixl_mem_name(type), mode,
                   t->path, ixl_strerror(rc), ixl_agent_last_error(a));
    if (type == IXL_MEM_FILE) {
        CHECK(t->dev >= IXL_DEV_ASSIGNED_MIN && t->dev != IXL_DEV_NONE);
    } else {
        CHECK(t->dev == vol);
    }
    /* Opened after the registration: "create" made the file. */
    t->vfd = open(t->path, O_RDWR | O_CLOEXEC);
    if (t->vfd < 0)
        check_fail(__FILE__, __LINE__, "%s after registration with \"%s\": %s", t->path, mode,
                   strerror(errno));
}

/* fd mode: this test opens the file with flags and registers the fd (len 0: all of it). */
static void tgt_fd(struct tgt *t, struct ixl_agent *a, enum ixl_mem type, int flags,
                   const char *name)
{
    memset(t, 0, sizeof(*t));
    t->what = name;
    t->type = type;
    t->direct = (flags & O_DIRECT) != 0;
    snprintf(t->path, sizeof(t->path), "%s", path_of(name));
    t->vfd = open(t->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    CHECK(t->vfd >= 0);
    t->end = UINT64_MAX;
    if (type == IXL_MEM_BLK) {
        CHECK(ftruncate(t->vfd, VOL_BYTES) == 0);
        t->end = VOL_BYTES;
    }
    t->own = open(t->path, flags | O_CLOEXEC);
    CHECK(t->own >= 0);
    t->dev = (uint64_t)t->own;
    struct ixl_reg_desc d = {0, 0, t->dev, NULL, 0};
    int rc = ixl_mem_register(a, type, &d, 1, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "register %s fd %d (%s): %s: %s", ixl_mem_name(type), t->own,
                   t->path, ixl_strerror(rc), ixl_agent_last_error(a));
}

static void tgt_done(struct tgt *t, struct ixl_agent *a)
{
    struct ixl_reg_desc d = {0, 0, t->dev, NULL, 0};
    int rc = ixl_mem_deregister(a, t->type, &d, 1, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "deregister %s: %s: %s", t->what, ixl_strerror(rc),
                   ixl_agent_last_error(a));
    if (t->own >= 0)
        close(t->own);
    close(t->vfd);
    t->vfd = t->own = -1;
}

static struct ixl_dlist *mklist(enum ixl_mem type, const struct ixl_desc *d, size_t n)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(type, n, &l), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, d, n), IXL_OK);
    return l;
}

/* A loopback request: n DRAM descriptors ld paired with n descriptors rd of type rtype. */
static int xfer_make(struct ixl_agent *a, enum ixl_op op, const struct ixl_desc *ld,
                     enum ixl_mem rtype, const struct ixl_desc *rd, size_t n,
                     const struct ixl_xfer_params *xp, struct ixl_xfer **out)
{
    struct ixl_dlist *l = mklist(IXL_MEM_DRAM, ld, n), *r = mklist(rtype, rd, n);
    int rc = ixl_xfer_create(a, op, l, r, ixl_agent_name(a), xp, out);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return rc;
}

static int post_wait(struct ixl_xfer *x)
{
    int rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, wait_ms);
    return rc;
}

static const char *op_name(enum ixl_op op)
{
    return op == IXL_OP_WRITE ? "WRITE" : "READ";
}

/* Runs a request that must succeed, with the backend and path (NULL: any) it must take. */
static void xfer_ok(struct ixl_agent *a, enum ixl_op op, const struct ixl_desc *ld,
                    enum ixl_mem rtype, const struct ixl_desc *rd, size_t n, const char *backend,
                    const char *path, const char *what)
{
    struct ixl_xfer *x;
    int rc = xfer_make(a, op, ld, rtype, rd, n, NULL, &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s %s: create: %s: %s", what, op_name(op), ixl_strerror(rc),
                   ixl_agent_last_error(a));
    rc = post_wait(x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s %s: %s: %s", what, op_name(op), ixl_strerror(rc),
                   ixl_agent_last_error(a));
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.backend, backend) != 0 || (path && strcmp(info.path, path) != 0))
        check_fail(__FILE__, __LINE__, "%s %s ran on %s path '%s', want %s path '%s'", what,
                   op_name(op), info.backend, info.path, backend, path ? path : "(any)");
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += ld[i].len;
    CHECK(info.bytes == bytes);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
}

/* A request refused at creation with want; the message contains needle (NULL: not checked). */
static void xfer_refused(struct ixl_agent *a, enum ixl_op op, const struct ixl_desc *ld,
                         enum ixl_mem rtype, const struct ixl_desc *rd, size_t n, int want,
                         const char *needle, const char *what)
{
    struct ixl_xfer *x = NULL;
    int rc = xfer_make(a, op, ld, rtype, rd, n, NULL, &x);
    if (rc != want)
        check_fail(__FILE__, __LINE__, "%s: ixl_xfer_create gave %s, want %s (%s)", what,
                   ixl_strerror(rc), ixl_strerror(want),
                   rc == IXL_OK ? "the request was made" : ixl_agent_last_error(a));
    if (needle)
        CHECK_STR_HAS(ixl_agent_last_error(a), needle);
    fprintf(stderr, "  %-44s refused: %s\n", what, ixl_agent_last_error(a));
}

/* A request made fine whose run ends in want; returns the message (static, until next call). */
static const char *xfer_fails(struct ixl_agent *a, enum ixl_op op, const struct ixl_desc *ld,
                              enum ixl_mem rtype, const struct ixl_desc *rd, size_t n, int want,
                              const char *what)
{
    static char msg[1024];
    struct ixl_xfer *x;
    int rc = xfer_make(a, op, ld, rtype, rd, n, NULL, &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: create: %s: %s", what, ixl_strerror(rc),
                   ixl_agent_last_error(a));
    rc = post_wait(x);
    snprintf(msg, sizeof(msg), "%s", ixl_agent_last_error(a));
    if (rc != want)
        check_fail(__FILE__, __LINE__, "%s: the request ended in %s, want %s (message: '%s')", what,
                   ixl_strerror(rc), ixl_strerror(want), msg);
    /* The error stays the request's status. */
    CHECK_RC(ixl_xfer_status(x), want);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    fprintf(stderr, "  %-44s %s: %s\n", what, ixl_strerror(rc), msg);
    return msg;
}

/* The path a request of n descriptors must report: a buffered WRITE of one descriptor of up
 * to 1 MiB (POSIX's inline_bytes) on an idle engine is written by the posting thread. */
static const char *path_for(enum ixl_op op, size_t n, uint64_t len, bool direct)
{
    if (want_path != NULL && op == IXL_OP_WRITE && n == 1 && len > 0 && len <= MIB && !direct)
        return "pwrite";
    return want_path;
}

/* op of len bytes between B + GUARD and t at off, checked: pattern at the destination, its
 * guard bytes (GUARD each side, less at offset 0 or the volume's end) still poisoned. */
static void rw_check(struct ixl_agent *a, const struct tgt *t, enum ixl_op op, size_t len,
                     uint64_t off)
{
    CHECK(len + 2 * GUARD <= BUF_BYTES && off + len <= t->end);
    uint64_t t0 = now_ms();
    uint64_t seed = fresh_seed(off);
    uint8_t *d = B + GUARD;
    char what[PATH_MAX + 64];
    snprintf(what, sizeof(what), "%s %s %zu B at %" PRIu64, t->what, op_name(op), len, off);
    size_t gb = off < GUARD ? (size_t)off : GUARD;
    size_t ga = t->end - off - len < GUARD ? (size_t)(t->end - off - len) : GUARD;
    if (op == IXL_OP_WRITE) {
        net_pat_fill(d, len, seed, off);
        file_fill(t->vfd, off - gb, gb + len + ga, false, 0, POISON_F);
    } else {
        file_fill(t->vfd, off, len, true, seed, 0);
        memset(B, POISON_D, len + 2 * GUARD);
    }
    /* Direct I/O would write back the dirty pages of each chunk's range one by one (seconds
     * on a slow disk): write them all back at once first. */
    if (t->direct)
        CHECK(fdatasync(t->vfd) == 0);
    struct ixl_desc ld = {(uintptr_t)d, len, 0}, rd = {off, len, t->dev};
    xfer_ok(a, op, &ld, t->type, &rd, 1, "POSIX", path_for(op, 1, len, t->direct), what);
    if (op == IXL_OP_WRITE) {
        pread_all(t->vfd, C, gb + len + ga, off - gb);
        check_pat(what, C + gb, len, seed, off);
        check_poison(what, C, gb, POISON_F);
        check_poison(what, C + gb + len, ga, POISON_F);
    } else {
        check_pat(what, d, len, seed, off);
        check_poison(what, B, GUARD, POISON_D);
        check_poison(what, d + len, GUARD, POISON_D);
    }
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", what, now_ms() - t0);
}

static void rw_both(struct ixl_agent *a, const struct tgt *t, size_t len, uint64_t off)
{
    rw_check(a, t, IXL_OP_WRITE, len, off);
    rw_check(a, t, IXL_OP_READ, len, off);
}

/* The message contains one of the offsets (as " N" or "N" at a word's start). */
static bool has_offset(const char *msg, uint64_t off)
{
    char s[32];
    snprintf(s, sizeof(s), "%" PRIu64, off);
    for (const char *p = strstr(msg, s); p != NULL; p = strstr(p + 1, s)) {
        bool start = p == msg || !(p[-1] >= '0' && p[-1] <= '9');
        bool end = !(p[strlen(s)] >= '0' && p[strlen(s)] <= '9');
        if (start && end)
            return true;
    }
    return false;
}

/* ---- the suite ------------------------------------------------------------------------------- */

static void test_sizes(struct ixl_agent *a, const struct tgt *t)
{
    if (t->direct) {
        rw_both(a, t, 4096, 2 * GUARD);
        rw_both(a, t, MIB, 4 * GUARD);
        /* Aligned to what statx says, not to 4096: accepted. */
        if (dio_off_align > 0 && dio_off_align < 4096)
            rw_both(a, t, 4096, 2 * GUARD + dio_off_align);
    } else {
        rw_both(a, t, 1, 2 * GUARD + 1);
        rw_both(a, t, 4096, 2 * GUARD + 3);
        rw_both(a, t, MIB, 4 * GUARD + 7);
    }
}

/* O_DIRECT: misaligned buffer, length and offset refused at creation; aligned goes on. */
static void test_misaligned(struct ixl_agent *a, const struct tgt *t)
{
    char need_mem[16] = "align", need_off[16] = "align";
    if (dio_mem_align > 1)
        snprintf(need_mem, sizeof(need_mem), "%u", dio_mem_align);
    if (dio_off_align > 1)
        snprintf(need_off, sizeof(need_off), "%u", dio_off_align);
    char what[128];
    uint8_t *d = B + GUARD;
    struct ixl_desc ld = {(uintptr_t)d + 1, 4096, 0}, rd = {2 * GUARD, 4096, t->dev};
    for (int op = IXL_OP_READ; op <= IXL_OP_WRITE; op++) {
        snprintf(what, sizeof(what), "%s %s buffer +1", t->what, op_name(op));
        xfer_refused(a, op, &ld, t->type, &rd, 1, IXL_ERR_INVALID_ARG, "align", what);
        CHECK_STR_HAS(ixl_agent_last_error(a), need_mem);
    }
    ld = (struct ixl_desc){(uintptr_t)d, 1, 0};
    rd = (struct ixl_desc){2 * GUARD, 1, t->dev};
    snprintf(what, sizeof(what), "%s WRITE length 1", t->what);
    xfer_refused(a, IXL_OP_WRITE, &ld, t->type, &rd, 1, IXL_ERR_INVALID_ARG, "align", what);
    CHECK_STR_HAS(ixl_agent_last_error(a), need_off);
    ld = (struct ixl_desc){(uintptr_t)d, 4096, 0};
    rd = (struct ixl_desc){2 * GUARD + 1, 4096, t->dev};
    snprintf(what, sizeof(what), "%s READ offset +1", t->what);
    xfer_refused(a, IXL_OP_READ, &ld, t->type, &rd, 1, IXL_ERR_INVALID_ARG, "align", what);
    CHECK_STR_HAS(ixl_agent_last_error(a), need_off);
    /* One misaligned descriptor among aligned ones refuses the whole request. */
    struct ixl_desc l2[2] = {{(uintptr_t)d, 4096, 0}, {(uintptr_t)d + 8192, 4097, 0}};
    struct ixl_desc r2[2] = {{2 * GUARD, 4096, t->dev}, {6 * GUARD, 4097, t->dev}};
    snprintf(what, sizeof(what), "%s WRITE 2nd descriptor length 4097", t->what);
    xfer_refused(a, IXL_OP_WRITE, l2, t->type, r2, 2, IXL_ERR_INVALID_ARG, "align", what);
    rw_both(a, t, 4096, 2 * GUARD);
}

/* len 0 = the whole file: a WRITE past its end extends it; "create" alone means read-write. */
static void test_grow(struct ixl_agent *a)
{
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "create", "grow", 0);
    struct stat st;
    CHECK(fstat(t.vfd, &st) == 0 && st.st_size == 0);
    uint64_t seed = fresh_seed(0);
    net_pat_fill(B, MIB, seed, 0);
    struct ixl_desc ld = {(uintptr_t)B, MIB, 0}, rd = {0, MIB, t.dev};
    xfer_ok(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, "POSIX",
            path_for(IXL_OP_WRITE, 1, MIB, false), "grow WRITE 1 MiB");
    CHECK(fstat(t.vfd, &st) == 0 && st.st_size == (off_t)MIB);
    pread_all(t.vfd, C, MIB, 0);
    check_pat("grow: the file after WRITE", C, MIB, seed, 0);
    /* Past the end again, with a hole before. */
    net_pat_fill(B, 4096, seed, 3 * MIB);
    ld.len = rd.len = 4096;
    rd.addr = 3 * MIB;
    xfer_ok(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, "POSIX",
            path_for(IXL_OP_WRITE, 1, 4096, false), "grow WRITE at 3 MiB");
    CHECK(fstat(t.vfd, &st) == 0 && st.st_size == (off_t)(3 * MIB + 4096));
    memset(B, POISON_D, MIB + 2 * GUARD);
    ld = (struct ixl_desc){(uintptr_t)B + GUARD, MIB, 0};
    rd = (struct ixl_desc){0, MIB, t.dev};
    xfer_ok(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, "POSIX", want_path, "grow READ 1 MiB");
    check_pat("grow READ", B + GUARD, MIB, seed, 0);
    check_poison("grow READ", B + GUARD + MIB, GUARD, POISON_D);
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok\n", "len 0: WRITE extends the file");
}

/* fd mode: the caller may close its fd at once, POSIX has its own copy. */
static void test_fd_closed(struct ixl_agent *a)
{
    struct tgt t;
    tgt_fd(&t, a, IXL_MEM_FILE, O_RDWR, "fd_closed");
    CHECK(close(t.own) == 0);
    t.own = -1;
    rw_both(a, &t, 4096, GUARD + 1);
    tgt_done(&t, a);
}

/* 10^4 descriptors of 4 KiB at shuffled file offsets DESC_STRIDE apart, in one request. */
static void shuffle(uint32_t *v, uint32_t n, uint64_t *rng)
{
    for (uint32_t i = 0; i < n; i++)
        v[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t j = (uint32_t)((*rng >> 33) % (i + 1));
        uint32_t tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
}

static void test_scatter(struct ixl_agent *a)
{
    uint64_t t0 = now_ms();
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "scatter", 0);
    uint32_t *perm = malloc(NDESC * sizeof(*perm));
    struct ixl_desc *ld = malloc(NDESC * sizeof(*ld)), *rd = malloc(NDESC * sizeof(*rd));
    CHECK(perm && ld && rd);
    uint64_t rng = 0x1234567 + (uint64_t)getpid();
    uint64_t file_len = (uint64_t)NDESC * DESC_STRIDE + GUARD;

    /* WRITE: DRAM contiguous, file offsets shuffled; gaps and the tail keep their poison. */
    shuffle(perm, NDESC, &rng);
    uint64_t seed = fresh_seed(0);
    for (uint32_t i = 0; i < NDESC; i++) {
        uint64_t off = (uint64_t)perm[i] * DESC_STRIDE;
        ld[i] = (struct ixl_desc){(uintptr_t)B + GUARD + (uint64_t)i * DESC_LEN, DESC_LEN, 0};
        rd[i] = (struct ixl_desc){off, DESC_LEN, t.dev};
        net_pat_fill(B + GUARD + (size_t)i * DESC_LEN, DESC_LEN, seed, off);
    }
    file_fill(t.vfd, 0, file_len, false, 0, POISON_F);
    struct ixl_xfer *x;
    int rc = xfer_make(a, IXL_OP_WRITE, ld, IXL_MEM_FILE, rd, NDESC, NULL, &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "scatter WRITE: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    rc = post_wait(x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "scatter WRITE: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(strcmp(info.backend, "POSIX") == 0 && strcmp(info.path, want_path) == 0);
    CHECK(info.desc_count == NDESC && info.bytes == (uint64_t)NDESC * DESC_LEN);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    for (uint64_t off = 0; off < file_len; off += 8 * MIB) {
        size_t n = file_len - off < 8 * MIB ? (size_t)(file_len - off) : 8 * MIB;
        pread_all(t.vfd, C, n, off);
        for (size_t s = 0; s < n; s += DESC_STRIDE) {
            if (off + s >= (uint64_t)NDESC * DESC_STRIDE) {
                check_poison("scatter WRITE: after the last slot", C + s, n - s, POISON_F);
                break;
            }
            check_pat("scatter WRITE: a slot", C + s, DESC_LEN, seed, off + s);
            check_poison("scatter WRITE: a gap", C + s + DESC_LEN, DESC_STRIDE - DESC_LEN,
                         POISON_F);
        }
    }
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "scatter WRITE 10^4 x 4 KiB", now_ms() - t0);

    /* READ: a new shuffle pairs DRAM slots with other file slots. */
    t0 = now_ms();
    shuffle(perm, NDESC, &rng);
    seed = fresh_seed(0);
    file_fill(t.vfd, 0, file_len, true, seed, 0);
    for (uint32_t i = 0; i < NDESC; i++)
        rd[i].addr = (uint64_t)perm[i] * DESC_STRIDE;
    memset(B, POISON_D, (size_t)NDESC * DESC_LEN + 2 * GUARD);
    xfer_ok(a, IXL_OP_READ, ld, IXL_MEM_FILE, rd, NDESC, "POSIX", want_path, "scatter READ");
    for (uint32_t i = 0; i < NDESC; i++)
        check_pat("scatter READ: a slot", B + GUARD + (size_t)i * DESC_LEN, DESC_LEN, seed,
                  rd[i].addr);
    check_poison("scatter READ", B, GUARD, POISON_D);
    check_poison("scatter READ", B + GUARD + (size_t)NDESC * DESC_LEN, GUARD, POISON_D);
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "scatter READ 10^4 x 4 KiB", now_ms() - t0);
    free(perm);
    free(ld);
    free(rd);
    tgt_done(&t, a);
    unlink(path_of("scatter"));
}

static void test_query(struct ixl_agent *a)
{
    const char *have = path_of("q_have"), *missing = path_of("q_missing");
    int fd = open(have, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    file_fill(fd, 0, 12345, true, 1, 0);
    char b0[PATH_MAX + 8], b1[PATH_MAX + 8];
    snprintf(b0, sizeof(b0), "ro:%s", have);
    snprintf(b1, sizeof(b1), "rw:%s", missing);
    struct ixl_reg_desc q[3] = {{0, 0, IXL_DEV_NONE, b0, strlen(b0)},
                                {0, 0, IXL_DEV_NONE, b1, strlen(b1)},
                                {0, 0, (uint64_t)fd, NULL, 0}};
    struct ixl_mem_query out[3];
    memset(out, 0xee, sizeof(out));
    int rc = ixl_mem_query(a, IXL_MEM_FILE, q, 3, NULL, out);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_mem_query FILE: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK(out[0].exists && out[0].size == 12345);
    CHECK(!out[1].exists);
    CHECK(out[2].exists && out[2].size == 12345);
    CHECK(access(missing, F_OK) != 0 && errno == ENOENT); /* a query creates nothing */
    /* BLK: a regular file used as a volume, in path and fd mode. */
    CHECK(ftruncate(fd, VOL_BYTES) == 0);
    struct ixl_reg_desc qb[2] = {{0, 0, 3, b0, strlen(b0)}, {0, 0, (uint64_t)fd, NULL, 0}};
    rc = ixl_mem_query(a, IXL_MEM_BLK, qb, 2, NULL, out);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_mem_query BLK: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK(out[0].exists && out[0].size == VOL_BYTES);
    CHECK(out[1].exists && out[1].size == VOL_BYTES);
    close(fd);
    unlink(have);
    fprintf(stderr, "  %-44s ok\n", "ixl_mem_query FILE and BLK");
}

/* BLK on a regular file: descriptors past the volume's end refused at creation. */
static void test_blk_end(struct ixl_agent *a, const struct tgt *t)
{
    struct ixl_desc ld = {(uintptr_t)B + GUARD, 4096, 0};
    struct ixl_desc rd = {t->end - 2048, 4096, t->dev};
    char what[128];
    snprintf(what, sizeof(what), "%s WRITE across the volume's end", t->what);
    xfer_refused(a, IXL_OP_WRITE, &ld, t->type, &rd, 1, IXL_ERR_INVALID_ARG, NULL, what);
    rd.addr = t->end;
    snprintf(what, sizeof(what), "%s READ at the volume's end", t->what);
    xfer_refused(a, IXL_OP_READ, &ld, t->type, &rd, 1, IXL_ERR_INVALID_ARG, NULL, what);
    rw_both(a, t, 4096, t->end - 4096); /* the last block is fine */
}

/* READ past the end of a file: IXL_ERR_IO naming the file and the offset; never IXL_OK. */
static void test_eof(struct ixl_agent *a)
{
    struct tgt t, f;
    tgt_path(&t, a, IXL_MEM_FILE, "ro", "eof_p", 0);
    file_fill(t.vfd, 0, 8192, true, 7, 0);
    struct ixl_desc ld = {(uintptr_t)B + GUARD, 8192, 0}, rd = {4096, 8192, t.dev};
    const char *m =
        xfer_fails(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_IO, "READ across EOF");
    CHECK_STR_HAS(m, t.path);
    if (!has_offset(m, 4096) && !has_offset(m, 8192))
        check_fail(__FILE__, __LINE__, "READ across EOF: '%s' names neither offset 4096 nor 8192",
                   m);
    rd.addr = 65536;
    ld.len = rd.len = 4096;
    m = xfer_fails(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_IO, "READ wholly past EOF");
    CHECK_STR_HAS(m, t.path);
    if (!has_offset(m, 65536))
        check_fail(__FILE__, __LINE__, "READ past EOF: '%s' does not name offset 65536", m);
    /* A multi-descriptor READ whose last descriptor crosses EOF. */
    struct ixl_desc l3[3] = {{(uintptr_t)B + GUARD, 4096, 0},
                             {(uintptr_t)B + 3 * GUARD, 4096, 0},
                             {(uintptr_t)B + 5 * GUARD, 4096, 0}};
    struct ixl_desc r3[3] = {{0, 4096, t.dev}, {4096, 4096, t.dev}, {6144, 4096, t.dev}};
    xfer_fails(a, IXL_OP_READ, l3, IXL_MEM_FILE, r3, 3, IXL_ERR_IO, "READ, 3rd desc across EOF");
    /* The queue goes on. */
    rw_check(a, &t, IXL_OP_READ, 4096, 4096);

    /* fd mode, O_RDONLY: READ past the end fails the same way; WRITE is refused. */
    tgt_fd(&f, a, IXL_MEM_FILE, O_RDONLY, "eof_fd");
    file_fill(f.vfd, 0, 8192, true, 7, 0);
    rd = (struct ixl_desc){4096, 8192, f.dev};
    ld.len = 8192;
    xfer_fails(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_IO, "fd mode READ across EOF");
    rd.len = ld.len = 4096;
    xfer_refused(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_INVALID_ARG, NULL,
                 "WRITE to an O_RDONLY fd");
    xfer_refused(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &(struct ixl_desc){0, 4096, t.dev}, 1,
                 IXL_ERR_INVALID_ARG, NULL, "WRITE to a \"ro:\" registration");
    rw_check(a, &f, IXL_OP_READ, 4096, 0);
    rw_check(a, &t, IXL_OP_READ, 1, 8191);
    tgt_done(&f, a);

    /* The first of 2001 descriptors fails: when the request reports the error, nothing more
     * lands in DRAM. Then the file grows and the same request, posted again, succeeds. */
    enum { N = 2001 };
    struct ixl_desc *ln = malloc(N * sizeof(*ln)), *rn = malloc(N * sizeof(*rn));
    CHECK(ln && rn);
    for (size_t i = 0; i < N; i++) {
        ln[i] = (struct ixl_desc){(uintptr_t)B + GUARD + i * 8192, 4096, 0};
        rn[i] = (struct ixl_desc){i == 0 ? 16 * MIB : i * 8192, 4096, t.dev};
    }
    uint64_t seed = fresh_seed(0);
    file_fill(t.vfd, 0, N * 8192, true, seed, 0);
    memset(B, POISON_D, GUARD + N * 8192);
    struct ixl_xfer *x;
    CHECK_RC(xfer_make(a, IXL_OP_READ, ln, IXL_MEM_FILE, rn, N, NULL, &x), IXL_OK);
    CHECK_RC(post_wait(x), IXL_ERR_IO);
    CHECK_STR_HAS(ixl_agent_last_error(a), t.path);
    memcpy(C, B, GUARD + N * 8192);
    sleep_ms(50);
    if (memcmp(C, B, GUARD + N * 8192) != 0)
        check_fail(__FILE__, __LINE__,
                   "bytes landed in DRAM after the request reported IXL_ERR_IO");
    file_fill(t.vfd, 16 * MIB, 4096, true, seed, 0);
    memset(B, POISON_D, GUARD + N * 8192);
    int rc = post_wait(x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__,
                   "a failed request posted again after the cause was fixed: "
                   "%s: %s",
                   ixl_strerror(rc), ixl_agent_last_error(a));
    for (size_t i = 0; i < N; i++) {
        check_pat("READ posted again", B + GUARD + i * 8192, 4096, seed, rn[i].addr);
        check_poison("READ posted again", B + GUARD + i * 8192 + 4096, 4096, POISON_D);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    free(ln);
    free(rn);
    fprintf(stderr, "  %-44s ok\n", "quiet after an error; failed request reposted");
    tgt_done(&t, a);
}

/* Open modes of fds that do not fit: O_WRONLY cannot serve a READ, O_APPEND would put a WRITE
 * at the end of the file instead of at its offset. Refused, or done right; never misplaced. */
static void test_fd_modes(struct ixl_agent *a)
{
    struct tgt t;
    tgt_fd(&t, a, IXL_MEM_FILE, O_WRONLY, "fd_wronly");
    rw_check(a, &t, IXL_OP_WRITE, 4096, GUARD + 1);
    struct ixl_desc ld = {(uintptr_t)B + GUARD, 4096, 0}, rd = {GUARD + 1, 4096, t.dev};
    struct ixl_xfer *x;
    int rc = xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x);
    if (rc == IXL_OK) {
        rc = post_wait(x);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        if (rc == IXL_OK)
            check_fail(__FILE__, __LINE__, "a READ through an O_WRONLY fd returned IXL_OK");
    }
    fprintf(stderr, "  %-44s %s: %s\n", "READ through an O_WRONLY fd", ixl_strerror(rc),
            ixl_agent_last_error(a));
    tgt_done(&t, a);

    tgt_fd(&t, a, IXL_MEM_FILE, O_RDWR | O_APPEND, "fd_append");
    file_fill(t.vfd, 0, 64 * KIB, false, 0, POISON_F);
    uint64_t seed = fresh_seed(GUARD);
    net_pat_fill(B + GUARD, 4096, seed, GUARD);
    rd.addr = GUARD;
    rc = xfer_make(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x);
    if (rc == IXL_OK) {
        rc = post_wait(x);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    struct stat st;
    CHECK(fstat(t.vfd, &st) == 0);
    if (rc == IXL_OK) {
        pread_all(t.vfd, C, 64 * KIB, 0);
        if (st.st_size != (off_t)(64 * KIB) ||
            net_pat_find_bad(C + GUARD, 4096, seed, GUARD) != 4096)
            check_fail(__FILE__, __LINE__,
                       "WRITE of 4 KiB at offset 4096 through an O_APPEND fd "
                       "returned IXL_OK but the data is not there (file size %lld, was 65536)",
                       (long long)st.st_size);
        check_poison("O_APPEND WRITE", C, GUARD, POISON_F);
        check_poison("O_APPEND WRITE", C + 2 * GUARD, 64 * KIB - 2 * GUARD, POISON_F);
    } else {
        CHECK(st.st_size == (off_t)(64 * KIB));
    }
    fprintf(stderr, "  %-44s %s%s%s\n", "WRITE at 4096 through an O_APPEND fd", ixl_strerror(rc),
            rc == IXL_OK ? "" : ": ", rc == IXL_OK ? "(in place)" : ixl_agent_last_error(a));
    tgt_done(&t, a);
}

/* RLIMIT_FSIZE: EFBIG -> IXL_ERR_NO_SPACE naming the file; a short write (up to the limit) is
 * continued into the error. The limit is the process's: lowered only around the requests. */
static void test_efbig(struct ixl_agent *a)
{
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "efbig", 0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 2 * MIB) {
        skip_part(0, "RLIMIT_FSIZE's hard limit is below 2 MiB");
        tgt_done(&t, a);
        return;
    }
    lim = old;
    lim.rlim_cur = MIB;
    net_pat_fill(B + GUARD, 2 * MIB, 9, 0);
    struct ixl_desc ld = {(uintptr_t)B + GUARD, 2 * MIB, 0}, rd = {0, 2 * MIB, t.dev};
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    const char *m = xfer_fails(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_NO_SPACE,
                               "WRITE 2 MiB, RLIMIT_FSIZE 1 MiB");
    char m1[1024];
    snprintf(m1, sizeof(m1), "%s", m);
    ld.len = rd.len = 4096;
    rd.addr = MIB + 4096;
    m = xfer_fails(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_NO_SPACE,
                   "WRITE past RLIMIT_FSIZE");
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK_STR_HAS(m1, t.path);
    CHECK_STR_HAS(m, t.path);
    CHECK(has_offset(m, MIB + 4096));
    /* What was written before the limit is there: the short write was continued. */
    pread_all(t.vfd, C, MIB, 0);
    check_pat("efbig: the first MiB", C, MIB, 9, 0);
    rw_both(a, &t, 4096, MIB + GUARD);
    tgt_done(&t, a);
}

/* Several requests in flight on one backend at once, one of them failing: the others complete,
 * each request can be posted again, and the agent's fd wakes a poller. */
#define NCONC 8u
#define CONC_LEN (256 * KIB)
#define CONC_SLOT (CONC_LEN + GUARD)

static void test_concurrent(struct ixl_agent *a)
{
    uint64_t t0 = now_ms();
    struct tgt t, e;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "conc", 0);
    tgt_path(&e, a, IXL_MEM_FILE, "ro", "conc_eof", 0);
    struct ixl_xfer *w[NCONC], *r[NCONC], *bad;
    struct ixl_desc ld, rd;
    for (unsigned i = 0; i < NCONC; i++) {
        ld = (struct ixl_desc){(uintptr_t)B + GUARD + i * CONC_SLOT, CONC_LEN, 0};
        rd = (struct ixl_desc){GUARD + (uint64_t)i * CONC_SLOT, CONC_LEN, t.dev};
        CHECK_RC(xfer_make(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, NULL, &w[i]), IXL_OK);
        CHECK_RC(xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &r[i]), IXL_OK);
    }
    ld = (struct ixl_desc){(uintptr_t)B + GUARD + NCONC * CONC_SLOT, 4096, 0};
    rd = (struct ixl_desc){0, 4096, e.dev}; /* the file is empty */
    CHECK_RC(xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &bad), IXL_OK);
    int afd;
    CHECK_RC(ixl_agent_fd(a, &afd), IXL_OK);
    uint64_t file_len = GUARD + (uint64_t)NCONC * CONC_SLOT;
    for (int round = 0; round < 2; round++) {
        /* WRITE all, the failing READ among them; then each is waited for. */
        uint64_t seed = fresh_seed(GUARD);
        for (unsigned i = 0; i < NCONC; i++)
            net_pat_fill(B + GUARD + i * CONC_SLOT, CONC_LEN, seed,
                         GUARD + (uint64_t)i * CONC_SLOT);
        file_fill(t.vfd, 0, file_len, false, 0, POISON_F);
        for (unsigned i = 0; i < NCONC; i++) {
            int rc = ixl_xfer_post(w[i]);
            CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
            if (i == NCONC / 2) {
                rc = ixl_xfer_post(bad);
                CHECK(rc == IXL_ERR_IO || rc == IXL_IN_PROGRESS);
            }
        }
        CHECK_RC(ixl_xfer_wait(bad, WAIT_MS), IXL_ERR_IO);
        for (unsigned i = 0; i < NCONC; i++) {
            int rc = ixl_xfer_wait(w[i], WAIT_MS);
            if (rc != IXL_OK)
                check_fail(__FILE__, __LINE__, "concurrent WRITE %u (round %d): %s: %s", i, round,
                           ixl_strerror(rc), ixl_agent_last_error(a));
        }
        pread_all(t.vfd, C, file_len, 0);
        for (unsigned i = 0; i < NCONC; i++) {
            check_poison("concurrent WRITE: a gap", C + i * CONC_SLOT, GUARD, POISON_F);
            check_pat("concurrent WRITE", C + GUARD + i * CONC_SLOT, CONC_LEN, seed,
                      GUARD + (uint64_t)i * CONC_SLOT);
        }
        /* READ all back into poisoned DRAM; a poller learns of completions from the fd. */
        memset(B, POISON_D, GUARD + NCONC * CONC_SLOT);
        CHECK_RC(ixl_agent_progress(a), IXL_OK);
        bool pending = false;
        for (unsigned i = 0; i < NCONC; i++) {
            int rc = ixl_xfer_post(r[i]);
            CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
            pending |= rc == IXL_IN_PROGRESS;
        }
        if (pending) {
            struct pollfd pfd = {afd, POLLIN, 0};
            int n = poll(&pfd, 1, WAIT_MS);
            if (n != 1)
                check_fail(__FILE__, __LINE__, "the agent's fd did not become readable (%d)", n);
            CHECK_RC(ixl_agent_progress(a), IXL_OK);
        }
        for (unsigned i = 0; i < NCONC; i++) {
            if (round == 0) {
                CHECK_RC(ixl_xfer_wait(r[i], WAIT_MS), IXL_OK);
                continue;
            }
            /* Round 1: completions reaped by polling the status only. */
            uint64_t until = now_ms() + WAIT_MS;
            int rc;
            while ((rc = ixl_xfer_status(r[i])) == IXL_IN_PROGRESS && now_ms() < until) {
            }
            CHECK_RC(rc, IXL_OK);
        }
        for (unsigned i = 0; i < NCONC; i++) {
            check_poison("concurrent READ: a gap", B + i * CONC_SLOT, GUARD, POISON_D);
            check_pat("concurrent READ", B + GUARD + i * CONC_SLOT, CONC_LEN, seed,
                      GUARD + (uint64_t)i * CONC_SLOT);
        }
        check_poison("concurrent READ: after", B + NCONC * CONC_SLOT, GUARD, POISON_D);
    }
    for (unsigned i = 0; i < NCONC; i++) {
        CHECK_RC(ixl_xfer_release(w[i]), IXL_OK);
        CHECK_RC(ixl_xfer_release(r[i]), IXL_OK);
    }
    CHECK_RC(ixl_xfer_release(bad), IXL_OK);
    tgt_done(&e, a);
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "8 requests in flight, 1 failing, reposted",
            now_ms() - t0);
}

/* Threads posting to one backend at once, each on its own DRAM and file range. */
#define NTHR 4
#define THR_ITERS 40
#define THR_LEN (64 * KIB)
#define THR_SLOT (2 * (THR_LEN + 2 * GUARD))

struct thr {
    pthread_t id;
    struct ixl_agent *a;
    const struct tgt *t;
    unsigned no;
};

static void *thr_main(void *arg)
{
    struct thr *h = arg;
    uint8_t *src = B + (size_t)h->no * THR_SLOT + GUARD;
    uint8_t *dst = src + THR_LEN + 2 * GUARD;
    uint64_t off = (uint64_t)h->no * THR_SLOT + (h->t->direct ? 0 : 1); /* direct: aligned */
    for (unsigned it = 0; it < THR_ITERS; it++) {
        uint64_t seed = ((uint64_t)(h->no + 1) << 40) + it;
        net_pat_fill(src, THR_LEN, seed, off);
        struct ixl_desc ls = {(uintptr_t)src, THR_LEN, 0}, ldd = {(uintptr_t)dst, THR_LEN, 0};
        struct ixl_desc rd = {off, THR_LEN, h->t->dev};
        struct ixl_xfer *x;
        CHECK_RC(xfer_make(h->a, IXL_OP_WRITE, &ls, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
        CHECK_RC(post_wait(x), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        memset(dst - GUARD, POISON_D, THR_LEN + 2 * GUARD);
        CHECK_RC(xfer_make(h->a, IXL_OP_READ, &ldd, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
        CHECK_RC(post_wait(x), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        check_pat("thread READ", dst, THR_LEN, seed, off);
        check_poison("thread READ", dst - GUARD, GUARD, POISON_D);
        check_poison("thread READ", dst + THR_LEN, GUARD, POISON_D);
    }
    return NULL;
}

/* Buffered (writes complete on the kernel's io-wq workers) and, where O_DIRECT works, direct
 * (completions from the disk's interrupts, delivered through task work to the submitting
 * thread): each thread waits in ixl_xfer_wait while the others' I/O completes, so waiters
 * asleep in the ring at once reap one another's completions. */
static void test_threads(struct ixl_agent *a)
{
    for (int direct = 0; direct <= (direct_ok ? 1 : 0); direct++) {
        uint64_t t0 = now_ms();
        struct tgt t;
        tgt_path(&t, a, IXL_MEM_FILE, direct ? "rw,direct,create" : "rw,create",
                 direct ? "threads_direct" : "threads", 0);
        struct thr h[NTHR];
        for (unsigned i = 0; i < NTHR; i++) {
            h[i] = (struct thr){.a = a, .t = &t, .no = i};
            CHECK(pthread_create(&h[i].id, NULL, thr_main, &h[i]) == 0);
        }
        for (unsigned i = 0; i < NTHR; i++)
            CHECK(pthread_join(h[i].id, NULL) == 0);
        tgt_done(&t, a);
        fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n",
                direct ? "4 threads x 40 WRITE+READ of 64 KiB, direct"
                       : "4 threads x 40 WRITE+READ of 64 KiB",
                now_ms() - t0);
    }
}

/* The other mode words, paths with a colon, bytes without a NUL, the same path twice, and
 * files that are not regular files. */
static void test_modes(struct ixl_agent *a)
{
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,sync,create", "m_sync", 0);
    rw_both(a, &t, 4096, GUARD + 1);
    tgt_done(&t, a);
    tgt_path(&t, a, IXL_MEM_FILE, "dsync,create", "m_dsync", 0);
    rw_both(a, &t, 4096, GUARD + 1);
    tgt_done(&t, a);
    /* "The path is everything after the first ':'". */
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "m_a:b", 0);
    rw_both(a, &t, 4096, GUARD);
    tgt_done(&t, a);
    if (direct_ok) {
        tgt_path(&t, a, IXL_MEM_FILE, "ro,direct", "m_ro_direct", 0);
        rw_check(a, &t, IXL_OP_READ, 8192, 2 * GUARD);
        struct ixl_desc ld = {(uintptr_t)B + GUARD, 4096, 0}, rd = {GUARD, 4096, t.dev};
        xfer_refused(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_INVALID_ARG, NULL,
                     "WRITE to \"ro,direct:\"");
        tgt_done(&t, a);
    }

    /* bytes_len, not a NUL, ends the path: the file is m_nul, not m_nulXYZ. */
    char bytes[PATH_MAX + 64];
    int n = snprintf(bytes, sizeof(bytes), "rw,create:%s", path_of("m_nul"));
    memcpy(bytes + n, "XYZ", 4);
    struct ixl_reg_desc d = {0, 0, IXL_DEV_NONE, bytes, (size_t)n};
    uint64_t dev[2];
    struct ixl_reg_params p = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = dev};
    int rc = ixl_mem_register(a, IXL_MEM_FILE, &d, 1, &p);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "bytes without a NUL: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK(access(path_of("m_nul"), F_OK) == 0);
    CHECK(access(path_of("m_nulXYZ"), F_OK) != 0);
    d.dev = dev[0];
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &d, 1, NULL), IXL_OK);

    /* The same path twice: two regions, two dev ids, both usable. */
    n = snprintf(bytes, sizeof(bytes), "rw,create:%s", path_of("m_twice"));
    struct ixl_reg_desc d2[2] = {{0, 0, IXL_DEV_NONE, bytes, (size_t)n},
                                 {0, 0, IXL_DEV_NONE, bytes, (size_t)n}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, d2, 2, &p), IXL_OK);
    CHECK(dev[0] != dev[1]);
    struct tgt tw = {.what = "m_twice", .type = IXL_MEM_FILE, .end = UINT64_MAX, .own = -1};
    snprintf(tw.path, sizeof(tw.path), "%s", path_of("m_twice"));
    tw.vfd = open(tw.path, O_RDWR | O_CLOEXEC);
    CHECK(tw.vfd >= 0);
    for (int i = 0; i < 2; i++) {
        tw.dev = dev[i];
        rw_both(a, &tw, 4096, GUARD * (1 + 2 * (unsigned)i));
    }
    d2[0].dev = dev[0];
    d2[1].dev = dev[1];
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, d2, 2, NULL), IXL_OK);
    close(tw.vfd);

    /* A path longer than PATH_MAX is an error, not a crash. */
    size_t long_len = PATH_MAX + 100;
    char *lp = malloc(long_len + 16);
    CHECK(lp != NULL);
    memcpy(lp, "rw,create:/tmp/", 15);
    memset(lp + 15, 'x', long_len);
    d = (struct ixl_reg_desc){0, 0, IXL_DEV_NONE, lp, 15 + long_len};
    rc = ixl_mem_register(a, IXL_MEM_FILE, &d, 1, &p);
    CHECK(rc != IXL_OK);
    fprintf(stderr, "  %-44s %s\n", "a path longer than PATH_MAX", ixl_strerror(rc));
    free(lp);

    /* A directory and a pipe: refused at registration, or their requests fail; never OK. */
    uint64_t ddev;
    rc = reg_path_rc(a, IXL_MEM_FILE, "ro", dir, 0, &ddev);
    if (rc == IXL_OK) {
        struct ixl_desc ld = {(uintptr_t)B, 4096, 0}, rd = {0, 4096, ddev};
        xfer_fails(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_IO, "READ of a directory");
        d = (struct ixl_reg_desc){0, 0, ddev, NULL, 0};
        CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &d, 1, NULL), IXL_OK);
    } else {
        fprintf(stderr, "  %-44s %s: %s\n", "register a directory", ixl_strerror(rc),
                ixl_agent_last_error(a));
    }
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    CHECK(write(pfd[1], B, 4096) == 4096);
    d = (struct ixl_reg_desc){0, 0, (uint64_t)pfd[0], NULL, 0};
    rc = ixl_mem_register(a, IXL_MEM_FILE, &d, 1, NULL);
    if (rc == IXL_OK) {
        struct ixl_desc ld = {(uintptr_t)B, 4096, 0}, rd = {0, 4096, (uint64_t)pfd[0]};
        struct ixl_xfer *x;
        rc = xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x);
        if (rc == IXL_OK) {
            rc = post_wait(x);
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
        }
        if (rc == IXL_OK)
            check_fail(__FILE__, __LINE__, "a READ of a pipe registered as FILE returned IXL_OK");
        fprintf(stderr, "  %-44s %s: %s\n", "READ of a pipe", ixl_strerror(rc),
                ixl_agent_last_error(a));
        CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &d, 1, NULL), IXL_OK);
    } else {
        fprintf(stderr, "  %-44s %s: %s\n", "register a pipe", ixl_strerror(rc),
                ixl_agent_last_error(a));
    }
    close(pfd[0]);
    close(pfd[1]);
}

/* Registrations that must fail. */
static void test_bad_regs(struct ixl_agent *a)
{
    const char *missing = path_of("r_missing");
    uint64_t dev;
    int rc = reg_path_rc(a, IXL_MEM_FILE, "rw", missing, 0, &dev);
    if (rc == IXL_OK)
        check_fail(__FILE__, __LINE__, "path mode \"rw:\" of a missing file was registered");
    CHECK_STR_HAS(ixl_agent_last_error(a), missing);
    fprintf(stderr, "  %-44s %s: %s\n", "register a missing file", ixl_strerror(rc),
            ixl_agent_last_error(a));
    CHECK(access(missing, F_OK) != 0);
    rc = reg_path_rc(a, IXL_MEM_BLK, "rw", missing, 5, &dev);
    CHECK(rc != IXL_OK);
    int fd = open(path_of("r_have"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    rc = reg_path_rc(a, IXL_MEM_FILE, "rw,bogus", path_of("r_have"), 0, &dev);
    if (rc != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, __LINE__, "mode \"rw,bogus\": %s, want IXL_ERR_INVALID_ARG (%s)",
                   ixl_strerror(rc), ixl_agent_last_error(a));
    fprintf(stderr, "  %-44s %s: %s\n", "register with mode \"rw,bogus\"", ixl_strerror(rc),
            ixl_agent_last_error(a));
    /* fd mode with an fd that is not open. */
    int bad = fd + 1000;
    struct ixl_reg_desc d = {0, 0, (uint64_t)bad, NULL, 0};
    CHECK(fcntl(bad, F_GETFD) == -1);
    rc = ixl_mem_register(a, IXL_MEM_FILE, &d, 1, NULL);
    CHECK(rc != IXL_OK);
    fprintf(stderr, "  %-44s %s: %s\n", "register fd mode, fd not open", ixl_strerror(rc),
            ixl_agent_last_error(a));

    /* Path-mode registrations the agent refuses before any backend sees them, and "MODE:PATH"
     * strings POSIX refuses: each is IXL_ERR_INVALID_ARG with a message, nothing registered. */
    char spec[512];
    snprintf(spec, sizeof(spec), "rw:%s", path_of("r_have"));
    uint64_t devs[1] = {0};
    struct ixl_reg_desc pd = {0, 0, IXL_DEV_NONE, spec, strlen(spec)};
    rc = ixl_mem_register(a, IXL_MEM_FILE, &pd, 1, NULL); /* no devs_out */
    CHECK_RC(rc, IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "devs_out");
    struct ixl_reg_params np = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = NULL};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &pd, 1, &np), IXL_ERR_INVALID_ARG);
    struct ixl_reg_params dp = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = devs};
    struct ixl_reg_desc nob = {0, 0, IXL_DEV_NONE, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &nob, 1, &dp), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "MODE:PATH");
    struct ixl_reg_desc asg = {0, 0, IXL_DEV_ASSIGNED_MIN + 3, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &asg, 1, &dp), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "assigned");
    const char *bad_specs[] = {"no-colon-here", "rw:", "ro,create:/tmp/x", ",,:"};
    for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]); i++) {
        struct ixl_reg_desc b = {0, 0, IXL_DEV_NONE, bad_specs[i], strlen(bad_specs[i])};
        rc = ixl_mem_register(a, IXL_MEM_FILE, &b, 1, &dp);
        if (rc != IXL_ERR_INVALID_ARG)
            check_fail(__FILE__, __LINE__, "spec \"%s\": %s, want IXL_ERR_INVALID_ARG (%s)",
                       bad_specs[i], ixl_strerror(rc), ixl_agent_last_error(a));
    }
    /* A path-mode region is deregistered by its assigned dev, not IXL_DEV_NONE. */
    CHECK_RC(ixl_mem_register(a, IXL_MEM_FILE, &pd, 1, &dp), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &pd, 1, NULL), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(ixl_agent_last_error(a), "devs_out");
    struct ixl_reg_desc byid = {0, 0, devs[0], NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, &byid, 1, NULL), IXL_OK);
    fprintf(stderr, "  %-44s ok\n", "path mode: devs_out, bad MODE:PATH, dev ids");
    close(fd);
}

/* The lists the other way round (local FILE, remote DRAM): WRITE copies the file into DRAM,
 * READ copies DRAM into the file. */
static void test_reversed(struct ixl_agent *a)
{
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "reversed", 0);
    size_t len = 300000;
    uint64_t off = GUARD + 11;
    for (int op = IXL_OP_READ; op <= IXL_OP_WRITE; op++) {
        uint64_t seed = fresh_seed(off);
        bool to_file = op == IXL_OP_READ; /* READ: remote (DRAM) into local (FILE) */
        if (to_file) {
            net_pat_fill(B + GUARD, len, seed, off);
            file_fill(t.vfd, off - GUARD, len + 2 * GUARD, false, 0, POISON_F);
        } else {
            file_fill(t.vfd, off, len, true, seed, 0);
            memset(B, POISON_D, len + 2 * GUARD);
        }
        struct ixl_desc fd = {off, len, t.dev}, dd = {(uintptr_t)B + GUARD, len, 0};
        struct ixl_dlist *l = mklist(IXL_MEM_FILE, &fd, 1), *r = mklist(IXL_MEM_DRAM, &dd, 1);
        struct ixl_xfer *x;
        int rc = ixl_xfer_create(a, op, l, r, ixl_agent_name(a), NULL, &x);
        if (rc != IXL_OK)
            check_fail(__FILE__, __LINE__, "reversed %s: %s: %s", op_name(op), ixl_strerror(rc),
                       ixl_agent_last_error(a));
        CHECK_RC(post_wait(x), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        ixl_dlist_destroy(l);
        ixl_dlist_destroy(r);
        if (to_file) {
            pread_all(t.vfd, C, len + 2 * GUARD, off - GUARD);
            check_pat("reversed READ (DRAM -> local FILE)", C + GUARD, len, seed, off);
            check_poison("reversed READ", C, GUARD, POISON_F);
            check_poison("reversed READ", C + GUARD + len, GUARD, POISON_F);
        } else {
            check_pat("reversed WRITE (local FILE -> DRAM)", B + GUARD, len, seed, off);
            check_poison("reversed WRITE", B, GUARD, POISON_D);
            check_poison("reversed WRITE", B + GUARD + len, GUARD, POISON_D);
        }
    }
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok\n", "local FILE, remote DRAM (both ops)");
}

/* A region that is part of a file (addr = 1 MiB, len = 1 MiB): descriptors carry absolute
 * file offsets; outside the region the core refuses them. */
static void test_subrange(struct ixl_agent *a)
{
    struct tgt t;
    tgt_fd(&t, a, IXL_MEM_FILE, O_RDWR, "subrange"); /* the whole file (len 0) */
    char bytes[PATH_MAX + 8];
    snprintf(bytes, sizeof(bytes), "rw:%s", t.path);
    struct ixl_reg_desc d[2] = {{MIB, MIB, t.dev, NULL, 0},
                                {2 * MIB, MIB, IXL_DEV_NONE, bytes, strlen(bytes)}};
    uint64_t devs[2];
    struct ixl_reg_params p = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = devs};
    int rc = ixl_mem_register(a, IXL_MEM_FILE, d, 2, &p);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "register parts of a file: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK(devs[0] == t.dev && devs[1] >= IXL_DEV_ASSIGNED_MIN);
    struct tgt part = t;
    part.what = "subrange 2 MiB+1 MiB";
    part.dev = devs[1];
    part.own = -1;
    rw_both(a, &part, 100000, 2 * MIB + 4097);
    rw_both(a, &part, MIB - 2 * GUARD, 2 * MIB + GUARD);
    struct ixl_desc ld = {(uintptr_t)B, 4096, 0}, rd = {3 * MIB - 2048, 4096, devs[1]};
    xfer_refused(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_NOT_REGISTERED, NULL,
                 "WRITE across the end of a file part");
    d[1].dev = devs[1];
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_FILE, d, 2, NULL), IXL_OK);
    /* The fd's whole-file region lives on: each registration had its own copy of the fd. */
    rw_both(a, &t, 4096, MIB + 1);
    tgt_done(&t, a);
}

/* Prepared lists on both sides, requests made from index arrays. */
static void test_prepped(struct ixl_agent *a)
{
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "prepped", 0);
    enum { N = 64, LEN = 8192 };
    struct ixl_desc ld[N], rd[N];
    for (unsigned i = 0; i < N; i++) {
        ld[i] = (struct ixl_desc){(uintptr_t)B + GUARD + i * LEN, LEN, 0};
        rd[i] = (struct ixl_desc){GUARD + (uint64_t)i * 2 * LEN, LEN, t.dev};
    }
    struct ixl_dlist *l = mklist(IXL_MEM_DRAM, ld, N), *r = mklist(IXL_MEM_FILE, rd, N);
    struct ixl_prep *lp, *rp;
    CHECK_RC(ixl_prep_create(a, NULL, l, NULL, &lp), IXL_OK);
    int rc = ixl_prep_create(a, ixl_agent_name(a), r, NULL, &rp);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "prepare FILE list: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    int64_t li[N], ri[N];
    for (unsigned i = 0; i < N; i++) {
        li[i] = i;
        ri[i] = (int64_t)((i * 37u) % N); /* a permutation */
    }
    uint64_t seed = fresh_seed(0);
    for (unsigned i = 0; i < N; i++)
        net_pat_fill(B + GUARD + i * LEN, LEN, seed, rd[ri[i]].addr);
    file_fill(t.vfd, 0, GUARD + (uint64_t)N * 2 * LEN, false, 0, POISON_F);
    struct ixl_xfer *x;
    rc = ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, N, NULL, &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "prepped WRITE: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    CHECK_RC(post_wait(x), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    pread_all(t.vfd, C, GUARD + (size_t)N * 2 * LEN, 0);
    for (unsigned i = 0; i < N; i++) {
        check_pat("prepped WRITE", C + rd[i].addr, LEN, seed, rd[i].addr);
        check_poison("prepped WRITE: a gap", C + rd[i].addr - GUARD, GUARD, POISON_F);
        check_poison("prepped WRITE: a gap", C + rd[i].addr + LEN, GUARD, POISON_F);
    }
    memset(B, POISON_D, GUARD + (size_t)N * LEN + GUARD);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_READ, lp, li, rp, ri, N, NULL, &x), IXL_OK);
    CHECK_RC(post_wait(x), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    for (unsigned i = 0; i < N; i++)
        check_pat("prepped READ", B + GUARD + i * LEN, LEN, seed, rd[ri[i]].addr);
    check_poison("prepped READ", B, GUARD, POISON_D);
    check_poison("prepped READ", B + GUARD + (size_t)N * LEN, GUARD, POISON_D);
    ixl_prep_destroy(lp);
    ixl_prep_destroy(rp);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok\n", "prepared lists, 64 permuted indices");
}

/* 10^5 descriptors of 1 byte, none adjacent, run to completion. */
static void test_tiny(struct ixl_agent *a)
{
    uint64_t t0 = now_ms();
    enum { N = 100000 };
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "tiny", 0);
    struct ixl_desc *ld = malloc(N * sizeof(*ld)), *rd = malloc(N * sizeof(*rd));
    CHECK(ld && rd);
    for (size_t i = 0; i < N; i++) {
        ld[i] = (struct ixl_desc){(uintptr_t)B + 2 * i + 1, 1, 0};
        rd[i] = (struct ixl_desc){3 * i, 1, t.dev};
    }
    uint64_t seed = fresh_seed(0);
    for (size_t i = 0; i < N; i++)
        B[2 * i + 1] = net_pat_byte(seed, 3 * i);
    file_fill(t.vfd, 0, 3 * N, false, 0, POISON_F);
    xfer_ok(a, IXL_OP_WRITE, ld, IXL_MEM_FILE, rd, N, "POSIX", want_path, "10^5 x 1 B");
    pread_all(t.vfd, C, 3 * N, 0);
    for (size_t i = 0; i < 3 * N; i++)
        if (C[i] != (i % 3 == 0 ? net_pat_byte(seed, i) : POISON_F))
            check_fail(__FILE__, __LINE__, "10^5 x 1 B WRITE: file byte %zu is 0x%02x", i, C[i]);
    memset(B, POISON_D, 2 * N + GUARD);
    xfer_ok(a, IXL_OP_READ, ld, IXL_MEM_FILE, rd, N, "POSIX", want_path, "10^5 x 1 B");
    for (size_t i = 0; i < 2 * N; i++)
        if (B[i] != (i % 2 == 1 ? net_pat_byte(seed, 3 * (i / 2)) : POISON_D))
            check_fail(__FILE__, __LINE__, "10^5 x 1 B READ: byte %zu is 0x%02x", i, B[i]);
    free(ld);
    free(rd);
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "10^5 descriptors of 1 B, WRITE and READ",
            now_ms() - t0);
}

/* io_uring: a READ from the warm page cache completes inside the submission, and the posting
 * thread reaps it there: ixl_xfer_post may return IXL_OK, with the data already in place and
 * the status done without a wait; posted again, it does the same. A request with more I/O
 * than the posting thread does inline (4 rounds of queue_depth 2) still completes without a
 * poller (the completion thread takes over), in ixl_xfer_wait. */
static void test_inline(struct ixl_agent *a, const char *eng)
{
    uint64_t t0 = now_ms();
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "inline", 0);
    enum { LEN = 64 * 1024, N = 64 };
    uint64_t seed = fresh_seed(0);
    file_fill(t.vfd, 0, N * 4096, true, seed, 0);
    pread_all(t.vfd, C, N * 4096, 0); /* the page cache warm */
    struct ixl_desc ld = {(uintptr_t)B, LEN, 0}, rd = {0, LEN, t.dev};
    struct ixl_xfer *x;
    CHECK_RC(xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
    int inline_done = 0;
    for (int round = 0; round < 3; round++) {
        memset(B, POISON_D, LEN);
        int rc = ixl_xfer_post(x);
        if (rc == IXL_OK) { /* done in post: the bytes are there, no wait needed */
            inline_done++;
            check_pat("inline READ (done in post)", B, LEN, seed, 0);
            CHECK_RC(ixl_xfer_status(x), IXL_OK);
        } else {
            CHECK_RC(rc, IXL_IN_PROGRESS);
            CHECK_RC(ixl_xfer_wait(x, wait_ms), IXL_OK);
            check_pat("inline READ (waited)", B, LEN, seed, 0);
        }
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    if (strcmp(want_path, "io_uring") == 0 && inline_done == 0)
        fprintf(stderr, "  (no READ completed inside post: the kernel handed them to its "
                        "workers)\n");
    /* N descriptors of 4 KiB, READ on a queue of 2: the posting thread does at most 4 rounds. */
    struct ixl_agent *b = posix_agent("posix_inline", eng, "2", NULL);
    struct tgt tb;
    tgt_path(&tb, b, IXL_MEM_FILE, "rw", "inline", 0);
    struct ixl_desc lds[N], rds[N];
    for (size_t i = 0; i < N; i++) {
        lds[i] = (struct ixl_desc){(uintptr_t)B + (N - 1 - i) * 4096, 4096, 0};
        rds[i] = (struct ixl_desc){i * 4096, 4096, tb.dev};
    }
    memset(B, POISON_D, N * 4096);
    CHECK_RC(xfer_make(b, IXL_OP_READ, lds, IXL_MEM_FILE, rds, N, NULL, &x), IXL_OK);
    CHECK_RC(post_wait(x), IXL_OK);
    for (size_t i = 0; i < N; i++)
        check_pat("inline READ, 64 descriptors", B + (N - 1 - i) * 4096, 4096, seed, i * 4096);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    tgt_done(&tb, b);
    ixl_agent_destroy(b);
    tgt_done(&t, a);
    fprintf(stderr, "  %-44s ok, %d of 3 done in post (%" PRIu64 " ms)\n",
            "READ from the warm page cache", inline_done, now_ms() - t0);
}

/* ---- small buffered WRITEs written by the posting thread (option inline_bytes) ---------- */

static ssize_t (*real_pwrite)(int fd, const void *buf, size_t n, off_t off);
static pthread_t pw_poster;  /* the thread whose pwrite calls are counted and refused */
static _Atomic int pw_mode;  /* 0 pass, 1 EAGAIN at once, 2 half then EAGAIN, 3 ENOSPC */
static _Atomic int pw_calls; /* the poster's pwrite calls */

static ssize_t hook_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (!pthread_equal(pthread_self(), pw_poster))
        return real_pwrite(fd, buf, n, off);
    int k = atomic_fetch_add(&pw_calls, 1), m = atomic_load(&pw_mode);
    if ((m == 1 && k == 0) || (m == 2 && k == 1)) {
        errno = EAGAIN;
        return -1;
    }
    if (m == 2 && k == 0)
        return real_pwrite(fd, buf, n / 2, off);
    if (m == 3) {
        errno = ENOSPC;
        return -1;
    }
    return real_pwrite(fd, buf, n, off);
}

/* A WRITE of len bytes at off through agent b (file t), the poster's pwrite in mode; checked
 * (a fresh pattern, the file's range poisoned first). Returns the post's status; *calls: the
 * poster's pwrite calls. */
static char iw_path[32]; /* ixl_xfer_info's path of inline_write's last request */

static int inline_write(struct ixl_agent *b, const struct tgt *t, size_t len, uint64_t off,
                        int mode, int *calls, const char *what)
{
    uint64_t seed = fresh_seed(off);
    net_pat_fill(B, len, seed, off);
    file_fill(t->vfd, off, len, false, 0, POISON_F);
    struct ixl_desc ld = {(uintptr_t)B, len, 0}, rd = {off, len, t->dev};
    struct ixl_xfer *x;
    CHECK_RC(xfer_make(b, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
    atomic_store(&pw_calls, 0);
    atomic_store(&pw_mode, mode);
    int posted = ixl_xfer_post(x);
    int rc = posted == IXL_IN_PROGRESS ? ixl_xfer_wait(x, wait_ms) : posted;
    *calls = atomic_load(&pw_calls);
    atomic_store(&pw_mode, 0);
    if (rc != IXL_OK) {
        if (mode != 3)
            check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(rc),
                       ixl_agent_last_error(b));
        CHECK_STR_HAS(ixl_agent_last_error(b), "No space left");
        fprintf(stderr, "  %-44s %s: %s\n", what, ixl_strerror(rc), ixl_agent_last_error(b));
    } else {
        pread_all(t->vfd, C, len, off);
        check_pat(what, C, len, seed, off);
    }
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    snprintf(iw_path, sizeof(iw_path), "%s", info.path);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    return posted;
}

static struct ixl_agent *inline_agent(const char *eng, const char *bytes, struct tgt *t)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *b;
    CHECK_RC(ixl_agent_create("posix_iw", &ap, &b), IXL_OK);
    struct ixl_kv kv[] = {{"engine", eng}, {"inline_bytes", bytes}};
    CHECK_RC(ixl_backend_create(b, "POSIX", kv, 2, NULL), IXL_OK);
    struct ixl_reg_desc d = {(uintptr_t)B, BUF_BYTES, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(b, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    tgt_path(t, b, IXL_MEM_FILE, "rw,create", "inline_w", 0);
    return b;
}

static void inline_done(struct ixl_agent *b, struct tgt *t)
{
    tgt_done(t, b);
    ixl_agent_destroy(b);
}

/* A buffered WRITE of one descriptor up to inline_bytes, posted to an idle engine, is written
 * by the posting thread (a pwrite() hook sees it there) and done when post returns; above the
 * size, or with inline_bytes=0, the engine writes it. A pwrite refused with EAGAIN before any
 * byte, or after half, leaves the request (or its rest) to the engine, which completes it; one
 * that fails with ENOSPC fails the request with IXL_ERR_NO_SPACE, saying so. Every WRITE is
 * checked in the file. */
static void test_inline_write(const char *eng)
{
    uint64_t t0 = now_ms();
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))ixl_syscall_get("pwrite");
    CHECK(real_pwrite != NULL);
    pw_poster = pthread_self();
    CHECK_RC(ixl_syscall_set("pwrite", (ixl_syscall_fn)hook_pwrite), IXL_OK);
    struct tgt t;
    struct ixl_agent *b = inline_agent(eng, "64K", &t);
    int calls;
    int posted = inline_write(b, &t, 64 * 1024, 8192, 0, &calls, "inline WRITE 64 KiB");
    if (posted != IXL_OK || calls < 1)
        check_fail(__FILE__, __LINE__,
                   "a 64 KiB WRITE with inline_bytes=64K: post gave %s, %d "
                   "pwrite(s) on the posting thread (want IXL_OK and >= 1)",
                   ixl_strerror(posted), calls);
    CHECK(strcmp(iw_path, "pwrite") == 0);
    (void)inline_write(b, &t, 128 * 1024, 0, 0, &calls, "WRITE 128 KiB over inline_bytes");
    CHECK(strcmp(iw_path, "pwrite") != 0);
    if (calls != 0)
        check_fail(__FILE__, __LINE__,
                   "a 128 KiB WRITE over inline_bytes=64K was written by "
                   "the posting thread (%d pwrite calls)",
                   calls);
    (void)inline_write(b, &t, 64 * 1024, 4096, 1, &calls, "inline WRITE refused (EAGAIN)");
    CHECK(calls == 1);
    CHECK(strcmp(iw_path, "pwrite") != 0); /* the engine wrote it */
    (void)inline_write(b, &t, 64 * 1024, 12288, 2, &calls, "inline WRITE, half, then EAGAIN");
    CHECK(calls == 2);
    (void)inline_write(b, &t, 64 * 1024, 0, 3, &calls, "inline WRITE failing (ENOSPC)");
    CHECK(calls == 1);
    inline_done(b, &t);
    b = inline_agent(eng, "0", &t);
    (void)inline_write(b, &t, 4096, 0, 0, &calls, "WRITE 4 KiB with inline_bytes=0");
    if (calls != 0)
        check_fail(__FILE__, __LINE__, "inline_bytes=0: the posting thread wrote (%d calls)",
                   calls);
    inline_done(b, &t);
    CHECK_RC(ixl_syscall_set("pwrite", (ixl_syscall_fn)real_pwrite), IXL_OK);
    fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "buffered WRITEs in post (inline_bytes)",
            now_ms() - t0);
}

/* Release of requests asserted in flight: queue_depth=1 and 10^5 descriptors of 1 byte (a
 * request that cannot finish before the checks below look at it). */
enum { REL_N = 100000 };

/* Makes and posts op of n 1-byte descriptors (DRAM B + 2i <-> file 2i); true when the
 * request is still in flight after post, false when it completed first (released then). */
static bool post_inflight(struct ixl_agent *a, const struct tgt *t, enum ixl_op op, size_t n,
                          struct ixl_xfer **out)
{
    struct ixl_desc *ld = malloc(n * sizeof(*ld)), *rd = malloc(n * sizeof(*rd));
    CHECK(ld && rd);
    for (size_t i = 0; i < n; i++) {
        ld[i] = (struct ixl_desc){(uintptr_t)B + 2 * i, 1, 0};
        rd[i] = (struct ixl_desc){2 * i, 1, t->dev};
    }
    struct ixl_xfer *x;
    int rc = xfer_make(a, op, ld, IXL_MEM_FILE, rd, n, NULL, &x);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "release: create %zu descriptors: %s: %s", n,
                   ixl_strerror(rc), ixl_agent_last_error(a));
    free(ld);
    free(rd);
    rc = ixl_xfer_post(x);
    int st = rc == IXL_IN_PROGRESS ? ixl_xfer_status(x) : rc;
    if (st == IXL_OK) {
        fprintf(stderr, "  release: %zu descriptors completed before the check\n", n);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        return false;
    }
    CHECK_RC(st, IXL_IN_PROGRESS);
    *out = x;
    return true;
}

static void test_release(const char *eng)
{
    struct ixl_agent *a = posix_agent("posix_rel", eng, "1", NULL);
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "release", 0);
    struct ixl_xfer *x = NULL;

    /* A wait that times out leaves the request going; the next wait sees it done. */
    for (size_t n = REL_N; n <= 4 * REL_N; n *= 4) {
        uint64_t seed = fresh_seed(0);
        file_fill(t.vfd, 0, 2 * n, true, seed, 0);
        memset(B, POISON_D, 2 * n + GUARD);
        if (!post_inflight(a, &t, IXL_OP_READ, n, &x))
            continue;
        int rc = ixl_xfer_wait(x, 1);
        if (rc == IXL_OK) {
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            continue;
        }
        CHECK_RC(rc, IXL_ERR_TIMEOUT);
        CHECK_RC(ixl_xfer_wait(x, WAIT_MS), IXL_OK);
        for (size_t i = 0; i < n; i++)
            CHECK(B[2 * i] == net_pat_byte(seed, 2 * i) && B[2 * i + 1] == POISON_D);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        fprintf(stderr, "  %-44s ok\n", "wait timed out, then completed");
        break;
    }

    /* READ: nothing lands in DRAM after release returns. */
    bool caught = false;
    for (size_t n = REL_N; n <= 4 * REL_N && !caught; n *= 4) {
        uint64_t seed = fresh_seed(0);
        file_fill(t.vfd, 0, 2 * n, true, seed, 0);
        memset(B, POISON_D, 2 * n + GUARD);
        if (!post_inflight(a, &t, IXL_OP_READ, n, &x))
            continue;
        caught = true;
        uint64_t t0 = now_ms();
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        uint64_t dt = now_ms() - t0;
        memcpy(C, B, 2 * n + GUARD);
        sleep_ms(100);
        if (memcmp(C, B, 2 * n + GUARD) != 0)
            check_fail(__FILE__, __LINE__, "READ: bytes landed in DRAM after release returned");
        size_t landed = 0;
        for (size_t i = 0; i < n; i++) {
            CHECK(B[2 * i + 1] == POISON_D);
            if (B[2 * i] != POISON_D) {
                CHECK(B[2 * i] == net_pat_byte(seed, 2 * i));
                landed++;
            }
        }
        check_poison("release: after the last descriptor", B + 2 * n, GUARD, POISON_D);
        fprintf(stderr, "  %-44s ok (release took %" PRIu64 " ms, %zu of %zu landed)\n",
                "release of a READ in flight", dt, landed, n);
        CHECK(dt < 5000);
    }
    if (!caught)
        check_fail(__FILE__, __LINE__, "release: every READ completed before it was checked");
    rw_both(a, &t, 4096, GUARD);

    /* WRITE: the file stops changing when release returns. */
    caught = false;
    for (size_t n = REL_N; n <= 4 * REL_N && !caught; n *= 4) {
        uint64_t seed = fresh_seed(0);
        for (size_t i = 0; i < n; i++)
            B[2 * i] = net_pat_byte(seed, 2 * i);
        file_fill(t.vfd, 0, 2 * n, false, 0, POISON_F);
        if (!post_inflight(a, &t, IXL_OP_WRITE, n, &x))
            continue;
        caught = true;
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        pread_all(t.vfd, C, 2 * n, 0);
        sleep_ms(100);
        uint8_t *again = malloc(2 * n);
        CHECK(again != NULL);
        pread_all(t.vfd, again, 2 * n, 0);
        if (memcmp(C, again, 2 * n) != 0)
            check_fail(__FILE__, __LINE__, "WRITE: the file changed after release returned");
        size_t landed = 0;
        for (size_t i = 0; i < n; i++) {
            CHECK(C[2 * i + 1] == POISON_F);
            landed += C[2 * i] != POISON_F;
        }
        free(again);
        fprintf(stderr, "  %-44s ok (%zu of %zu landed)\n", "release of a WRITE in flight", landed,
                n);
    }
    if (!caught)
        check_fail(__FILE__, __LINE__, "release: every WRITE completed before it was checked");

    /* queue_depth=1: an error does not wedge the only slot. */
    struct tgt e;
    tgt_path(&e, a, IXL_MEM_FILE, "ro", "release_eof", 0);
    struct ixl_desc l2[3] = {
        {(uintptr_t)B, 4096, 0}, {(uintptr_t)B + 8192, 4096, 0}, {(uintptr_t)B + 16384, 4096, 0}};
    struct ixl_desc r2[3] = {{0, 4096, e.dev}, {8192, 4096, e.dev}, {16384, 4096, e.dev}};
    xfer_fails(a, IXL_OP_READ, l2, IXL_MEM_FILE, r2, 3, IXL_ERR_IO, "queue_depth=1: READ at EOF");
    tgt_done(&e, a);
    rw_both(a, &t, 4096, GUARD);
    rw_both(a, &t, MIB, 2 * GUARD + 5);

    /* Agent destroy with a request in flight (never released) returns, and frees it. */
    for (size_t n = REL_N; n <= 4 * REL_N; n *= 4) {
        memset(B, POISON_D, 2 * n + GUARD);
        if (post_inflight(a, &t, IXL_OP_READ, n, &x)) {
            uint64_t t0 = now_ms();
            ixl_agent_destroy(a);
            a = NULL;
            memcpy(C, B, 2 * n + GUARD);
            sleep_ms(50);
            CHECK(memcmp(C, B, 2 * n + GUARD) == 0);
            fprintf(stderr, "  %-44s ok (%" PRIu64 " ms)\n", "agent destroyed, request in flight",
                    now_ms() - t0);
            break;
        }
    }
    if (a != NULL) {
        tgt_done(&t, a);
        ixl_agent_destroy(a);
        check_fail(__FILE__, __LINE__, "release: every READ completed before it was checked");
    }
    close(t.vfd);
}

/* The options are in force and bad values refused. */
static void test_options(void)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create("posix_opts", &ap, &a), IXL_OK);
    /* Each refusal names the option, the value and what it wants. */
    static const struct {
        struct ixl_kv kv[1];
        const char *says;
    } bad[] = {
        {{{"engine", "bogus"}},
         "option engine='bogus': not a choice; want one of auto, io_uring, threads"},
        {{{"queue_depth", "0"}}, "option queue_depth='0': out of range; want an integer"},
        {{{"queue_depth", "4097"}}, "1..4096"},
        {{{"queue_depth", "1K"}}, "option queue_depth='1K'"},
        {{{"chunk", "4097"}}, "option chunk=4097 bytes: want a multiple of 4096"},
        {{{"chunk", "2048"}}, "option chunk='2048': out of range; want a size in bytes, 4K..1G"},
        {{{"chunk", "2G"}}, "option chunk='2G'"},
        {{{"chunk", "-4K"}}, "option chunk='-4K': negative"},
        {{{"chunk", "99999999999G"}}, "too large"},
        {{{"chunk", "64KB"}}, "unknown size suffix"},
        {{{"chunk", ""}}, "option chunk='': empty"},
        {{{"threads", "0"}}, "option threads='0'"},
        {{{"threads", "65"}}, "1..64"},
        {{{"no_such_option", "1"}}, "no option 'no_such_option'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = ixl_backend_create(a, "POSIX", bad[i].kv, 1, NULL);
        if (rc != IXL_ERR_INVALID_ARG)
            check_fail(__FILE__, __LINE__, "POSIX %s=%s: %s, want IXL_ERR_INVALID_ARG",
                       bad[i].kv[0].key, bad[i].kv[0].value, ixl_strerror(rc));
        CHECK_STR_HAS(ixl_agent_last_error(a), bad[i].says);
        fprintf(stderr, "  %-44s %s: %s\n", "option refused", ixl_strerror(rc),
                ixl_agent_last_error(a));
    }
    /* Suffixes, case and blanks: the effective values are normalized. */
    struct ixl_kv sfx[] = {{"engine", " THREADS"}, {"chunk", "64K"}, {"queue_depth", "+8 "}};
    struct ixl_backend *bs;
    CHECK_RC(ixl_backend_create(a, "POSIX", sfx, 3, &bs), IXL_OK);
    const struct ixl_kv *skv;
    size_t sn;
    CHECK_RC(ixl_backend_params(bs, &skv, &sn), IXL_OK);
    CHECK(sn == 8);
    CHECK(strcmp(skv[0].key, "engine") == 0 && strcmp(skv[0].value, "threads") == 0);
    CHECK(strcmp(skv[1].key, "queue_depth") == 0 && strcmp(skv[1].value, "8") == 0);
    CHECK(strcmp(skv[2].key, "chunk") == 0 && strcmp(skv[2].value, "65536") == 0);
    CHECK(strcmp(skv[3].key, "threads") == 0 && strcmp(skv[3].value, "4") == 0);
    CHECK(strcmp(skv[4].key, "bounce_size") == 0 && strcmp(skv[4].value, "4194304") == 0);
    CHECK(strcmp(skv[5].key, "bounce_buffers") == 0 && strcmp(skv[5].value, "8") == 0);
    CHECK(strcmp(skv[6].key, "cost_table") == 0 && strcmp(skv[6].value, "") == 0);
    CHECK(strcmp(skv[7].key, "inline_bytes") == 0 && strcmp(skv[7].value, "1048576") == 0);
    ixl_agent_destroy(a);
    CHECK_RC(ixl_agent_create("posix_opts", &ap, &a), IXL_OK);
    struct ixl_kv good[] = {
        {"engine", "threads"}, {"queue_depth", "7"}, {"chunk", "65536"}, {"threads", "3"}};
    struct ixl_backend *b;
    CHECK_RC(ixl_backend_create(a, "POSIX", good, 4, &b), IXL_OK);
    const struct ixl_kv *kv;
    size_t n;
    CHECK_RC(ixl_backend_params(b, &kv, &n), IXL_OK);
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 4; j++)
            if (strcmp(kv[i].key, good[j].key) == 0) {
                CHECK(strcmp(kv[i].value, good[j].value) == 0);
                seen++;
            }
    CHECK(seen == 4);
    uint32_t caps = ixl_backend_caps(b), mem = ixl_backend_mem_mask(b);
    CHECK((caps & IXL_CAP_LOCAL) && !(caps & IXL_CAP_NOTIF));
    CHECK((mem & IXL_MEM_BIT(IXL_MEM_DRAM)) && (mem & IXL_MEM_BIT(IXL_MEM_FILE)) &&
          (mem & IXL_MEM_BIT(IXL_MEM_BLK)));
    ixl_agent_destroy(a);
    fprintf(stderr, "  %-44s ok\n", "options in force, capabilities");
}

/* Everything with one engine ("auto" or "threads"). */
static void suite(const char *eng)
{
    uint64_t t0 = now_ms();
    /* An agent first, so what the library sets up once per process is not counted below. */
    struct ixl_agent *a = posix_agent("posix_warm", eng, NULL, NULL);
    ixl_agent_destroy(a);
    int fds0 = count_fds();
    fprintf(stderr, "engine=%s (requests must run on '%s')\n", eng, want_path);
    a = posix_agent("posix", eng, NULL, NULL);

    struct tgt t[6];
    int nt = 0;
    tgt_path(&t[nt++], a, IXL_MEM_FILE, "rw,create", "file_path", 0);
    tgt_fd(&t[nt++], a, IXL_MEM_FILE, O_RDWR, "file_fd");
    if (direct_ok) {
        tgt_path(&t[nt++], a, IXL_MEM_FILE, "rw,direct,create", "file_path_direct", 0);
        tgt_fd(&t[nt++], a, IXL_MEM_FILE, O_RDWR | O_DIRECT, "file_fd_direct");
    }
    tgt_path(&t[nt++], a, IXL_MEM_BLK, "rw", "blk_path", 7);
    tgt_fd(&t[nt++], a, IXL_MEM_BLK, O_RDWR, "blk_fd");
    for (int i = 0; i < nt; i++)
        test_sizes(a, &t[i]);
    for (int i = 0; i < nt; i++)
        if (t[i].direct)
            test_misaligned(a, &t[i]);
    for (int i = 0; i < nt; i++)
        if (t[i].type == IXL_MEM_BLK)
            test_blk_end(a, &t[i]);
    /* A notification cannot travel with a storage request (capability local only). */
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_NOTIF, .notif = "n", .notif_len = 1};
    struct ixl_xfer *x = NULL;
    struct ixl_desc ld = {(uintptr_t)B, 4096, 0}, rd = {0, 4096, t[0].dev};
    CHECK(xfer_make(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, &xp, &x) != IXL_OK);
    test_fd_closed(a);
    test_grow(a);
    test_query(a);
    test_scatter(a);
    test_eof(a);
    test_fd_modes(a);
    test_efbig(a);
    test_bad_regs(a);
    test_modes(a);
    test_concurrent(a);
    test_threads(a);
    test_reversed(a);
    test_subrange(a);
    test_prepped(a);
    test_tiny(a);
    test_inline(a, eng);
    test_inline_write(eng);
    rw_both(a, &t[0], MIB, GUARD); /* still fine after all of that */
    for (int i = 0; i < nt; i++)
        tgt_done(&t[i], a);
    ixl_agent_destroy(a);

    /* Descriptors split into 4 KiB chunks, two in flight. */
    a = posix_agent("posix_chunk", eng, "2", "4096");
    tgt_path(&t[0], a, IXL_MEM_FILE, "rw,create", "chunk", 0);
    rw_both(a, &t[0], MIB, GUARD + 3);
    rw_both(a, &t[0], 4096 + 1, 2 * GUARD + 4095);
    tgt_done(&t[0], a);
    if (direct_ok) {
        tgt_path(&t[0], a, IXL_MEM_FILE, "rw,direct,create", "chunk_direct", 0);
        rw_both(a, &t[0], MIB, GUARD);
        if (dio_off_align > 0 && dio_off_align < 4096) /* a last chunk smaller than 4 KiB */
            rw_both(a, &t[0], 64 * KIB + dio_off_align, GUARD + dio_off_align);
        tgt_done(&t[0], a);
    }
    ixl_agent_destroy(a);

    test_release(eng);

    int fds1 = count_fds();
    if (fds1 != fds0)
        check_fail(__FILE__, __LINE__, "%d fds open before the agents, %d after they are gone",
                   fds0, fds1);
    fprintf(stderr, "engine=%s: ok (%" PRIu64 " ms)\n", eng, now_ms() - t0);
}

/* ---- the default backends: DRAM -> DRAM through NET -------------------------------------- */

static void test_default_backends(void)
{
    fprintf(stderr, "default backends\n");
    static const char *orders[] = {"NET,POSIX", "POSIX,NET"};
    for (int k = 0; k < 2; k++) {
        struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = orders[k]};
        struct ixl_agent *a;
        CHECK_RC(ixl_agent_create("posix_dflt", &ap, &a), IXL_OK);
        CHECK(ixl_backend_count(a) == 2);
        struct ixl_reg_desc d = {(uintptr_t)B, BUF_BYTES, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
        size_t len = MIB;
        uint8_t *src = B + GUARD, *dst = B + 2 * GUARD + len + GUARD;
        uint64_t seed = fresh_seed(0);
        net_pat_fill(src, len, seed, 0);
        memset(dst - GUARD, POISON_D, len + 2 * GUARD);
        struct ixl_desc ld = {(uintptr_t)src, len, 0}, rd = {(uintptr_t)dst, len, 0};
        char what[64];
        snprintf(what, sizeof(what), "%s: DRAM->DRAM", orders[k]);
        xfer_ok(a, IXL_OP_WRITE, &ld, IXL_MEM_DRAM, &rd, 1, "NET", NULL, what);
        check_pat(what, dst, len, seed, 0);
        check_poison(what, dst - GUARD, GUARD, POISON_D);
        check_poison(what, dst + len, GUARD, POISON_D);
        fprintf(stderr, "  %-44s ok (NET)\n", what);
        /* FILE goes to POSIX in the same agent. */
        struct tgt t;
        tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "dflt", 0);
        rw_both(a, &t, 4096, GUARD);
        tgt_done(&t, a);
        ixl_agent_destroy(a);
    }
    /* POSIX alone refuses DRAM <-> DRAM. */
    struct ixl_agent *a = posix_agent("posix_only", NULL, NULL, NULL);
    struct ixl_desc ld = {(uintptr_t)B, 4096, 0}, rd = {(uintptr_t)B + MIB, 4096, 0};
    xfer_refused(a, IXL_OP_WRITE, &ld, IXL_MEM_DRAM, &rd, 1, IXL_ERR_BAD_MEM_TYPE, NULL,
                 "POSIX alone: DRAM->DRAM");
    ixl_agent_destroy(a);
    /* With no backends named, an agent gets IXL_BACKENDS, NET,POSIX by default. */
    if (getenv("IXL_BACKENDS") == NULL) {
        CHECK_RC(ixl_agent_create("posix_env", NULL, &a), IXL_OK);
        struct ixl_backend *b;
        CHECK_RC(ixl_backend_find(a, "NET", &b), IXL_OK);
        CHECK_RC(ixl_backend_find(a, "POSIX", &b), IXL_OK);
        ixl_agent_destroy(a);
    }
}

/* ---- io_uring refused by seccomp ------------------------------------------------------------ */

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static long uring_setup(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    return syscall(__NR_io_uring_setup, 4, &p);
}

/* Makes system calls nr1 and nr2 fail with EPERM. 0 installed; -1 the kernel or the build
 * has no seccomp filters (errno set). */
static int deny_syscalls(unsigned nr1, unsigned nr2)
{
#ifdef TEST_AUDIT_ARCH
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr1, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr2, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -1;
#else
    (void)nr1;
    (void)nr2;
    errno = ENOSYS;
    return -1;
#endif
}

#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif

/* What a seccomp filter refuses with EPERM in test_seccomp's child. */
enum sec_variant {
    SEC_SETUP,     /* io_uring_setup: auto must run on threads, engine=io_uring must fail */
    SEC_ENTER_REG, /* io_uring_enter and io_uring_register (setup works) */
    SEC_ENTER,     /* io_uring_enter only: setup and register work, every submit fails */
};

static const char *const sec_names[] = {"io_uring_setup", "io_uring_enter and io_uring_register",
                                        "io_uring_enter"};

/* In a child forked before this process made any thread. Exit 0 passed, 77 no seccomp.
 * engine=auto must move the data whatever part of io_uring the filter refuses (the README:
 * "when the kernel refuses io_uring (EPERM, ENOSYS, a seccomp filter...), automatically");
 * engine=io_uring must fail at creation or fail its requests with an error, never hang and
 * never claim success. Waits are bounded by 5 s: a hang is what this looks for. */
static void seccomp_child(enum sec_variant v)
{
    alarm(60);
    wait_ms = 5000;
    int rc = v == SEC_SETUP       ? deny_syscalls(__NR_io_uring_setup, __NR_io_uring_setup)
             : v == SEC_ENTER_REG ? deny_syscalls(__NR_io_uring_enter, __NR_io_uring_register)
                                  : deny_syscalls(__NR_io_uring_enter, __NR_io_uring_enter);
    if (rc != 0) {
        fprintf(stderr, "SKIP (seccomp part): cannot install a seccomp filter: %s\n",
                strerror(errno));
        exit(77);
    }
    /* The filter really refuses what it should (or this test could not fail). */
    errno = 0;
    long r = uring_setup();
    if (v == SEC_SETUP && !(r == -1 && errno == EPERM))
        check_fail(__FILE__, __LINE__, "io_uring_setup under the filter: %ld (%s), want EPERM", r,
                   strerror(errno));
    if (v != SEC_SETUP) {
        CHECK(r >= 0);
        errno = 0;
        CHECK(syscall(__NR_io_uring_enter, (int)r, 0, 0, 0, NULL, 0) == -1 && errno == EPERM);
        close((int)r);
    }
    want_path = v == SEC_SETUP ? "threads" : NULL;
    struct ixl_agent *a = posix_agent("posix_sec", "auto", NULL, NULL);
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "seccomp", 0);
    rw_both(a, &t, MIB, GUARD + 1);
    rw_both(a, &t, 1, 3);
    struct ixl_desc ld = {(uintptr_t)B + GUARD, 4096, 0}, rd = {GUARD, 4096, t.dev};
    struct ixl_xfer *x;
    CHECK_RC(xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
    CHECK_RC(post_wait(x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    fprintf(stderr, "  %-44s ok on '%s'\n", "engine=auto", info.path);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    tgt_done(&t, a);
    ixl_agent_destroy(a);

    /* Forcing io_uring is an error that says why, not a silent fallback. */
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create("posix_sec_u", &ap, &a), IXL_OK);
    struct ixl_kv kv[] = {{"engine", "io_uring"}};
    rc = ixl_backend_create(a, "POSIX", kv, 1, NULL);
    if (rc != IXL_OK) {
        CHECK_STR_HAS(ixl_agent_last_error(a), "io_uring");
        fprintf(stderr, "  %-44s %s: %s\n", "engine=io_uring", ixl_strerror(rc),
                ixl_agent_last_error(a));
    } else {
        if (v == SEC_SETUP)
            check_fail(__FILE__, __LINE__,
                       "engine=io_uring was created under a filter refusing "
                       "io_uring_setup");
        struct ixl_reg_desc d = {(uintptr_t)B, BUF_BYTES, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
        uint64_t dev;
        CHECK_RC(reg_path_rc(a, IXL_MEM_FILE, "rw", path_of("seccomp"), 0, &dev), IXL_OK);
        rd.dev = dev;
        CHECK_RC(xfer_make(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, NULL, &x), IXL_OK);
        rc = post_wait(x);
        fprintf(stderr, "  %-44s %s: %s\n", "engine=io_uring, a READ", ixl_strerror(rc),
                rc == IXL_OK ? "" : ixl_agent_last_error(a));
        if (rc == IXL_OK)
            check_fail(__FILE__, __LINE__,
                       "a READ on io_uring returned IXL_OK while "
                       "io_uring_enter is refused");
        if (rc == IXL_ERR_TIMEOUT)
            check_fail(__FILE__, __LINE__,
                       "engine=io_uring: a READ hangs when io_uring_enter "
                       "fails (EPERM): no error within %d ms",
                       wait_ms);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    ixl_agent_destroy(a);
    exit(0);
}

static void test_seccomp(enum sec_variant v)
{
    fprintf(stderr, "seccomp: %s refused (EPERM)\n", sec_names[v]);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        seccomp_child(v);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        check_fail(__FILE__, __LINE__, "the child under a filter refusing %s failed (status 0x%x)",
                   sec_names[v], st);
    fprintf(stderr, "  %-44s ok\n", "seccomp");
}

/* ---- big --------------------------------------------------------------------------------- */

static void big(const char *eng)
{
    fprintf(stderr, "big, engine=%s\n", eng);
    struct ixl_agent *a = posix_agent("posix_big", eng, NULL, NULL);
    struct tgt t;
    tgt_path(&t, a, IXL_MEM_FILE, "rw,create", "big", 0);
    rw_both(a, &t, BIG_BYTES, GUARD + 1);
    tgt_done(&t, a);
    unlink(path_of("big"));
    if (direct_ok) {
        tgt_path(&t, a, IXL_MEM_FILE, "rw,direct,create", "big_direct", 0);
        rw_both(a, &t, BIG_BYTES, GUARD);
        tgt_done(&t, a);
        unlink(path_of("big_direct"));
    }
    ixl_agent_destroy(a);
}

/* ---- root: a loop device, a full file system (test_posix_root.sh sets them up) ------------ */

static void root_blk(const char *dev)
{
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        check_fail(__FILE__, __LINE__, "%s: %s", dev, strerror(errno));
    off_t size = lseek(fd, 0, SEEK_END);
    CHECK(size >= (off_t)(16 * MIB));
    close(fd);
    struct statx sx;
    dio_off_align = dio_mem_align = 0; /* the device's, not those of the test's directory */
    if (statx(AT_FDCWD, dev, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        dio_off_align = sx.stx_dio_offset_align;
        dio_mem_align = sx.stx_dio_mem_align;
    }
    const char *engs[] = {"auto", "threads"};
    for (int k = 0; k < 2; k++) {
        want_path = k == 0 && uring_ok ? "io_uring" : "threads";
        fprintf(stderr, "BLK %s (%lld bytes), engine=%s\n", dev, (long long)size, engs[k]);
        struct ixl_agent *a = posix_agent("posix_blk", engs[k], NULL, NULL);
        char b[PATH_MAX];
        snprintf(b, sizeof(b), "ro:%s", dev);
        struct ixl_reg_desc q = {0, 0, 7, b, strlen(b)};
        struct ixl_mem_query out;
        CHECK_RC(ixl_mem_query(a, IXL_MEM_BLK, &q, 1, NULL, &out), IXL_OK);
        CHECK(out.exists && out.size == (uint64_t)size);
        struct tgt t[4];
        const char *modes[2] = {"rw", "rw,direct"};
        for (int i = 0; i < 2; i++) {
            memset(&t[i], 0, sizeof(t[i]));
            t[i].what = modes[i];
            t[i].type = IXL_MEM_BLK;
            t[i].own = -1;
            t[i].direct = i == 1;
            t[i].end = (uint64_t)size;
            snprintf(t[i].path, sizeof(t[i].path), "%s", dev);
            int rc = reg_path_rc(a, IXL_MEM_BLK, modes[i], dev, 7 + (uint64_t)i, &t[i].dev);
            if (rc != IXL_OK)
                check_fail(__FILE__, __LINE__, "register BLK \"%s:%s\": %s: %s", modes[i], dev,
                           ixl_strerror(rc), ixl_agent_last_error(a));
            CHECK(t[i].dev == 7 + (uint64_t)i);
            t[i].vfd = open(dev, O_RDWR | O_CLOEXEC);
            CHECK(t[i].vfd >= 0);
        }
        for (int i = 2; i < 4; i++) {
            memset(&t[i], 0, sizeof(t[i]));
            t[i].what = i == 2 ? "fd" : "fd O_DIRECT";
            t[i].type = IXL_MEM_BLK;
            t[i].direct = i == 3;
            t[i].end = (uint64_t)size;
            snprintf(t[i].path, sizeof(t[i].path), "%s", dev);
            t[i].vfd = open(dev, O_RDWR | O_CLOEXEC);
            t[i].own = open(dev, O_RDWR | O_CLOEXEC | (i == 3 ? O_DIRECT : 0));
            CHECK(t[i].vfd >= 0 && t[i].own >= 0);
            t[i].dev = (uint64_t)t[i].own;
            struct ixl_reg_desc d = {0, 0, t[i].dev, NULL, 0};
            CHECK_RC(ixl_mem_register(a, IXL_MEM_BLK, &d, 1, NULL), IXL_OK);
            struct ixl_mem_query qo;
            CHECK_RC(ixl_mem_query(a, IXL_MEM_BLK, &d, 1, NULL, &qo), IXL_OK);
            CHECK(qo.exists && qo.size == (uint64_t)size);
        }
        for (int i = 0; i < 4; i++) {
            rw_both(a, &t[i], 4096, 0);
            rw_both(a, &t[i], MIB, 5 * MIB);
            rw_both(a, &t[i], MIB, (uint64_t)size - MIB); /* up to the end */
            if (!t[i].direct) {
                rw_both(a, &t[i], 1, 3 * MIB + 1);
                rw_both(a, &t[i], 100000, 7 * MIB + 12345);
            } else {
                test_misaligned(a, &t[i]);
            }
            test_blk_end(a, &t[i]);
        }
        for (int i = 0; i < 4; i++)
            tgt_done(&t[i], a);
        ixl_agent_destroy(a);
    }
}

static void root_enospc(const char *mnt)
{
    char keep[PATH_MAX], full[PATH_MAX];
    snprintf(keep, sizeof(keep), "%s/keep", mnt);
    snprintf(full, sizeof(full), "%s/full", mnt);
    const char *engs[] = {"auto", "threads"};
    for (int k = 0; k < 2; k++) {
        want_path = k == 0 && uring_ok ? "io_uring" : "threads";
        fprintf(stderr, "ENOSPC in %s, engine=%s\n", mnt, engs[k]);
        int fd = open(keep, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        file_fill(fd, 0, 64 * KIB, true, 5, 0);
        CHECK(fsync(fd) == 0);
        close(fd);
        struct ixl_agent *a = posix_agent("posix_enospc", engs[k], NULL, NULL);
        struct tgt f, g;
        memset(&f, 0, sizeof(f));
        f.what = "full";
        f.type = IXL_MEM_FILE;
        f.own = -1;
        f.end = UINT64_MAX;
        snprintf(f.path, sizeof(f.path), "%s", full);
        CHECK_RC(reg_path_rc(a, IXL_MEM_FILE, "rw,create", full, 0, &f.dev), IXL_OK);
        f.vfd = open(full, O_RDWR | O_CLOEXEC);
        CHECK(f.vfd >= 0);
        size_t len = 16 * MIB; /* more than the file system holds */
        net_pat_fill(B + GUARD, len, 11, 0);
        struct ixl_desc ld = {(uintptr_t)B + GUARD, len, 0}, rd = {0, len, f.dev};
        const char *m = xfer_fails(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_NO_SPACE,
                                   "WRITE 16 MiB into an 8 MiB file system");
        CHECK_STR_HAS(m, full);
        /* Many descriptors: the first that does not fit fails the request. */
        static struct ixl_desc l2[512], r2[512];
        for (int i = 0; i < 512; i++) {
            l2[i] = (struct ixl_desc){(uintptr_t)B + GUARD + (size_t)i * 64 * KIB, 64 * KIB, 0};
            r2[i] = (struct ixl_desc){16 * MIB + (uint64_t)i * 128 * KIB, 64 * KIB, f.dev};
        }
        m = xfer_fails(a, IXL_OP_WRITE, l2, IXL_MEM_FILE, r2, 512, IXL_ERR_NO_SPACE,
                       "WRITE 512 x 64 KiB into a full file system");
        CHECK_STR_HAS(m, full);
        /* One descriptor of 64 KiB: written by the posting thread (inline_bytes), which gets
         * the file system's ENOSPC itself. */
        ld = (struct ixl_desc){(uintptr_t)B + GUARD, 64 * KIB, 0};
        rd = (struct ixl_desc){96 * MIB, 64 * KIB, f.dev};
        m = xfer_fails(a, IXL_OP_WRITE, &ld, IXL_MEM_FILE, &rd, 1, IXL_ERR_NO_SPACE,
                       "WRITE 64 KiB (in post) into a full fs");
        CHECK_STR_HAS(m, "No space left");
        CHECK_STR_HAS(m, full);
        /* The queue goes on: a READ of a file written before. */
        memset(&g, 0, sizeof(g));
        g.what = "keep";
        g.type = IXL_MEM_FILE;
        g.own = -1;
        g.end = UINT64_MAX;
        snprintf(g.path, sizeof(g.path), "%s", keep);
        CHECK_RC(reg_path_rc(a, IXL_MEM_FILE, "ro", keep, 0, &g.dev), IXL_OK);
        g.vfd = open(keep, O_RDONLY | O_CLOEXEC);
        CHECK(g.vfd >= 0);
        memset(B, POISON_D, 64 * KIB + 2 * GUARD);
        ld = (struct ixl_desc){(uintptr_t)B + GUARD, 64 * KIB, 0};
        rd = (struct ixl_desc){0, 64 * KIB, g.dev};
        xfer_ok(a, IXL_OP_READ, &ld, IXL_MEM_FILE, &rd, 1, "POSIX", want_path, "READ after ENOSPC");
        check_pat("READ after ENOSPC", B + GUARD, 64 * KIB, 5, 0);
        check_poison("READ after ENOSPC", B + GUARD + 64 * KIB, GUARD, POISON_D);
        fprintf(stderr, "  %-44s ok\n", "READ after ENOSPC");
        tgt_done(&g, a);
        tgt_done(&f, a);
        ixl_agent_destroy(a);
        CHECK(unlink(full) == 0);
        CHECK(unlink(keep) == 0);
    }
}

/* ---- main ---------------------------------------------------------------------------------- */

static void probe(void)
{
    long fd = uring_setup();
    uring_ok = fd >= 0;
    if (uring_ok)
        close((int)fd);
    else
        fprintf(stderr, "note: io_uring_setup fails here (%s): engine=auto runs on threads\n",
                strerror(errno));
#ifndef IXL_TEST_HAVE_URING
    if (uring_ok) {
        skip_part(1, "ixl was built without liburing (IXL_WITH_URING=OFF): no io_uring engine");
        uring_ok = false;
    }
#endif
    want_path = uring_ok && strcmp(engine, "threads") != 0 ? "io_uring" : "threads";

    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/probe", dir);
    int fd2 = open(p, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
    direct_ok = fd2 >= 0;
    if (!direct_ok)
        fprintf(stderr, "SKIP (O_DIRECT cases): %s: %s\n", dir, strerror(errno));
    else
        close(fd2);
    struct statx sx;
    if (statx(AT_FDCWD, p, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        dio_off_align = sx.stx_dio_offset_align;
        dio_mem_align = sx.stx_dio_mem_align;
    }
    unlink(p);
    fprintf(stderr, "dir %s: O_DIRECT %s, statx direct-I/O alignment: memory %u, offset %u\n", dir,
            direct_ok ? "yes" : "no", dio_mem_align, dio_off_align);
}

int main(int argc, char **argv)
{
    main_pid = getpid();
    signal(SIGALRM, on_alarm);
    signal(SIGXFSZ, SIG_IGN);
    alarm(110);
    bool is_big = false;
    const char *root_cmd = NULL, *root_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "threads") == 0)
            engine = "threads";
        else if (strcmp(argv[i], "big") == 0)
            is_big = true;
        else if ((strcmp(argv[i], "root-blk") == 0 || strcmp(argv[i], "root-enospc") == 0) &&
                 i + 1 < argc) {
            root_cmd = argv[i];
            root_arg = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [threads] [big] [root-blk DEV | root-enospc DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    uint64_t t0 = now_ms();
    snprintf(dir, sizeof(dir), "/tmp/ixl_posix.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    atexit(rm_dir);
    probe();
    B = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    C = malloc(BUF_BYTES);
    CHECK(B != MAP_FAILED && C != NULL);

    if (root_cmd && strcmp(root_cmd, "root-blk") == 0) {
        root_blk(root_arg);
    } else if (root_cmd) {
        root_enospc(root_arg);
    } else if (is_big) {
        want_path = uring_ok ? "io_uring" : "threads";
        big("auto");
        want_path = "threads";
        big("threads");
    } else {
        if (strcmp(engine, "auto") == 0) {
            /* First, while this process has no thread, so the forked child starts clean. */
            test_seccomp(SEC_SETUP);
            if (uring_ok) {
                test_seccomp(SEC_ENTER_REG);
                test_seccomp(SEC_ENTER);
            }
            if (uring_ok) {
                /* engine=io_uring is created where the kernel allows it. */
                struct ixl_agent *a = posix_agent("posix_uring", "io_uring", NULL, NULL);
                ixl_agent_destroy(a);
            }
            test_options();
        }
        suite(engine);
        if (strcmp(engine, "auto") == 0)
            test_default_backends();
    }
    munmap(B, BUF_BYTES);
    free(C);
    if (n_part_skips_ci > 0) {
        fprintf(stderr, "FAIL: %d part(s) skipped for something the project installs (CI=true)\n",
                n_part_skips_ci);
        return 1;
    }
    fprintf(stderr, "test_posix: all passed in %" PRIu64 " ms\n", now_ms() - t0);
    return 0;
}

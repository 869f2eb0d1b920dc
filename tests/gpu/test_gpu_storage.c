/*
 * GPU storage on a real GPU (issue 21): VRAM <-> FILE through every storage backend this
 * machine has -- POSIX's staged path (pinned bounce buffers; the thread-pool engine where
 * liburing is absent), GDS and GDS_MT when their plugins load (cuFile) -- and through the
 * backend the core chooses when none is named, against a raw baseline of the same bytes:
 * cuMemcpy to pinned host memory and pwrite (WRITE), or pread and cuMemcpy to the device
 * (READ), with O_DIRECT, one after the other.
 *
 *   test_gpu_storage           functional: each backend and the automatic choice, WRITE and
 *                              READ of 1, 16 and 64 MiB, data checked (a fresh pattern, the
 *                              destination poisoned first)
 *   test_gpu_storage bench     the bandwidth table (Markdown on stdout): medians of interleaved
 *                              rounds, and whether auto >= 0.9x the best backend and >= 0.9x
 *                              the raw baseline at each size
 *
 * The file is IXL_GPU_STORAGE_DIR (default /var/tmp)/ixl-gpu-storage.<pid>, 64 MiB, registered
 * in path mode "rw,direct:PATH" (O_DIRECT), removed at the end. Every backend gets the option
 * cost_table=$IXL_GPU_COST_TABLE (the table bench/gds.sh measured in the same run.sh), so the
 * automatic choice follows this machine's figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu_common.h"

#define MAXLEN (64u << 20)
#define NSIZES 3
#define NB 3        /* forced backends: POSIX, GDS, GDS_MT */
#define NM (NB + 2) /* + auto + raw */
static const size_t sizes[NSIZES] = {1u << 20, 16u << 20, 64u << 20};
static const char *const bnames[NB] = {"POSIX", "GDS", "GDS_MT"};

static struct ixl_agent *agent;
static const char *self = "gpu-storage";
static struct ixl_backend *bes[NB];
static char path[512];
static uint64_t fdev; /* the FILE region's dev (path mode: the agent's id) */
static CUdeviceptr va;
static int chkfd = -1; /* ixl-independent, buffered: the checks */

static void fail_st(int line, const char *what, ixl_status st)
{
    check_fail(__FILE__, line, "%s: %s: %s", what, ixl_strerror(st), ixl_agent_last_error(agent));
}

static void setup(void)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    ixl_status st = ixl_agent_create(self, &p, &agent);
    if (st != IXL_OK)
        fail_st(__LINE__, "agent", st);
    /* The calibration run.sh made (bench/gds.sh), else each backend's default table. */
    const char *table = getenv("IXL_GPU_COST_TABLE");
    struct ixl_kv kv = {"cost_table", table ? table : ""};
    for (int b = 0; b < NB; b++) {
        st = ixl_backend_create(agent, bnames[b], &kv, 1, &bes[b]);
        if (st != IXL_OK) {
            fprintf(stderr, "%s: not here: %s\n", bnames[b], ixl_agent_last_error(agent));
            bes[b] = NULL;
        } else if (!(ixl_backend_mem_mask(bes[b]) & IXL_MEM_BIT(IXL_MEM_VRAM))) {
            fprintf(stderr, "%s: no VRAM here: %s\n", bnames[b], ixl_backend_mem_why(bes[b]));
            CHECK_RC(ixl_backend_destroy(bes[b]), IXL_OK);
            bes[b] = NULL;
        }
    }
    if (bes[0] == NULL)
        check_fail(__FILE__, __LINE__, "POSIX must move VRAM on a GPU machine");
    const char *d = getenv("IXL_GPU_STORAGE_DIR");
    snprintf(path, sizeof(path), "%s/ixl-gpu-storage.%d", d && *d ? d : "/var/tmp", (int)getpid());
    chkfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (chkfd < 0)
        check_fail(__FILE__, __LINE__, "cannot create %s: %s", path, strerror(errno));
    uint8_t *z = malloc(MAXLEN);
    CHECK(z != NULL);
    memset(z, 0x5A, MAXLEN); /* data, not a hole: a READ of a hole costs no I/O */
    CHECK(pwrite(chkfd, z, MAXLEN, 0) == (ssize_t)MAXLEN);
    CHECK(fdatasync(chkfd) == 0);
    free(z);
    char bytes[600];
    snprintf(bytes, sizeof(bytes), "rw,direct:%s", path);
    struct ixl_reg_desc fd = {0, 0, IXL_DEV_NONE, bytes, strlen(bytes)};
    struct ixl_reg_params rp = {.field_mask = IXL_REG_F_DEVS_OUT, .devs_out = &fdev};
    st = ixl_mem_register(agent, IXL_MEM_FILE, &fd, 1, &rp);
    if (st != IXL_OK)
        fail_st(__LINE__, "registering the file (O_DIRECT)", st);
    va = gpu_alloc(MAXLEN);
    struct ixl_reg_desc vd = {va, MAXLEN, (uint64_t)G.ordinal, NULL, 0};
    st = ixl_mem_register(agent, IXL_MEM_VRAM, &vd, 1, NULL);
    if (st != IXL_OK)
        fail_st(__LINE__, "registering VRAM", st);
    /* A backend the registration left out for this file (IXL_ERR_NOT_SUPPORTED: cuFile serves
     * no file on this file system) is reported and not asked. */
    for (int b = 1; b < NB; b++) {
        if (bes[b] == NULL)
            continue;
        struct ixl_dlist *l, *r;
        CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &l), IXL_OK);
        CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &r), IXL_OK);
        struct ixl_desc ld = {va, 4096, (uint64_t)G.ordinal}, rd = {0, 4096, fdev};
        CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
        struct ixl_xfer_params xp = {
            .field_mask = IXL_XFER_F_BACKENDS, .backends = &bes[b], .n_backends = 1};
        struct ixl_xfer *x = NULL;
        st = ixl_xfer_create(agent, IXL_OP_WRITE, l, r, self, &xp, &x);
        ixl_dlist_destroy(l);
        ixl_dlist_destroy(r);
        if (st == IXL_OK) {
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
        } else if (st == IXL_ERR_NOT_REGISTERED) {
            fprintf(stderr, "%s: serves no file here (left out at registration: see the log)\n",
                    bnames[b]);
            bes[b] = NULL;
        } else {
            fail_st(__LINE__, "probing a backend", st);
        }
    }
}

static void teardown(void)
{
    struct ixl_reg_desc vd = {va, MAXLEN, (uint64_t)G.ordinal, NULL, 0};
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_VRAM, &vd, 1, NULL), IXL_OK);
    ixl_agent_destroy(agent);
    gpu_free(va);
    close(chkfd);
    unlink(path);
}

/* A request VRAM [0, n) <-> FILE [0, n): on backend b (NULL: the core chooses). */
static struct ixl_xfer *req(enum ixl_op op, size_t n, struct ixl_backend *b, char *ran, size_t cap)
{
    struct ixl_dlist *l, *r;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_FILE, 1, &r), IXL_OK);
    struct ixl_desc ld = {va, n, (uint64_t)G.ordinal}, rd = {0, n, fdev};
    CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
    struct ixl_xfer_params p = {0};
    if (b) {
        p.field_mask = IXL_XFER_F_BACKENDS;
        p.backends = &b;
        p.n_backends = 1;
    }
    struct ixl_xfer *x = NULL;
    ixl_status st = ixl_xfer_create(agent, op, l, r, self, &p, &x);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (st != IXL_OK)
        fail_st(__LINE__, "ixl_xfer_create", st);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    snprintf(ran, cap, "%s:%s", info.backend, info.path && info.path[0] ? info.path : "-");
    return x;
}

static void run1(struct ixl_xfer *x, const char *what)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, 60000);
    if (st != IXL_OK)
        fail_st(__LINE__, what, st);
}

static int functional(void)
{
    uint8_t *pat = malloc(MAXLEN), *got = malloc(MAXLEN);
    CHECK(pat != NULL && got != NULL);
    int failures = 0;
    printf(
        "Storage, functional (test_gpu_storage): VRAM <-> FILE (O_DIRECT, %s), data checked.\n\n",
        path);
    printf("| backend asked | ran on | size | WRITE | READ |\n|---|---|---:|---|---|\n");
    for (int b = 0; b <= NB; b++) {
        struct ixl_backend *be = b < NB ? bes[b] : NULL;
        if (b < NB && be == NULL) {
            printf("| %s | absent | | | |\n", bnames[b]);
            continue;
        }
        for (int s = 0; s < NSIZES; s++) {
            size_t n = sizes[s];
            char ran[80], ran2[80], sz[32];
            const char *res[2];
            /* WRITE: a fresh pattern in VRAM, the file poisoned. */
            gpu_pattern(pat, n);
            gpu_put(va, pat, n);
            memset(got, 0xA5, n);
            CHECK(pwrite(chkfd, got, n, 0) == (ssize_t)n);
            CHECK(fdatasync(chkfd) == 0);
            struct ixl_xfer *x = req(IXL_OP_WRITE, n, be, ran, sizeof(ran));
            run1(x, "WRITE");
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            CHECK(pread(chkfd, got, n, 0) == (ssize_t)n);
            res[0] = memcmp(got, pat, n) == 0 ? "pass" : "FAIL";
            /* READ: a fresh pattern in the file, VRAM poisoned. */
            gpu_pattern(pat, n);
            CHECK(pwrite(chkfd, pat, n, 0) == (ssize_t)n);
            CHECK(fdatasync(chkfd) == 0);
            gpu_poison(va, 0xA5, n);
            x = req(IXL_OP_READ, n, be, ran2, sizeof(ran2));
            run1(x, "READ");
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            res[1] = gpu_equal(va, pat, n, "READ") ? "pass" : "FAIL";
            failures += strcmp(res[0], "pass") != 0 || strcmp(res[1], "pass") != 0;
            printf("| %s | %s / %s | %s | %s | %s |\n", b < NB ? bnames[b] : "(auto)", ran, ran2,
                   gpu_size(n, sz, sizeof(sz)), res[0], res[1]);
        }
    }
    free(pat);
    free(got);
    return failures ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void full_io(int fd, int wr, uint8_t *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = wr ? pwrite(fd, buf + done, n - done, (off_t)done)
                       : pread(fd, buf + done, n - done, (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            check_fail(__FILE__, __LINE__, "raw %s: %s", wr ? "pwrite" : "pread",
                       r < 0 ? strerror(errno) : "end of file");
        done += (size_t)r;
    }
}

static int bench(void)
{
    const char *quick = getenv("IXL_GPU_QUICK");
    int rounds = quick && quick[0] == '1' ? 3 : 5;
    uint8_t *hb = aligned_alloc(4096, MAXLEN);
    CHECK(hb != NULL);
    CU_CHECK(G.cuMemHostRegister_v2(hb, MAXLEN, 0));
    int rawfd = open(path, O_RDWR | O_DIRECT);
    if (rawfd < 0)
        check_fail(__FILE__, __LINE__, "open %s O_DIRECT: %s", path, strerror(errno));
    static double gbs[NSIZES][2][NM][8];
    static char auto_ran[NSIZES][2][80];
    struct ixl_xfer *x[NSIZES][2][NM - 1];
    for (int s = 0; s < NSIZES; s++)
        for (int o = 0; o < 2; o++)
            for (int m = 0; m < NM - 1; m++) {
                char ran[80];
                x[s][o][m] = NULL;
                if (m < NB && bes[m] == NULL)
                    continue;
                x[s][o][m] = req(o ? IXL_OP_READ : IXL_OP_WRITE, sizes[s], m < NB ? bes[m] : NULL,
                                 ran, sizeof(ran));
                if (m == NB)
                    snprintf(auto_ran[s][o], sizeof(auto_ran[s][o]), "%s", ran);
            }
    double t_start = gpu_now();
    for (int r = 0; r <= rounds; r++)
        for (int s = 0; s < NSIZES; s++)
            for (int o = 0; o < 2; o++)
                for (int m = 0; m < NM; m++) {
                    if (m < NM - 1 && x[s][o][m] == NULL)
                        continue;
                    size_t n = sizes[s];
                    int k = r == 0 ? 1 : (int)((256u << 20) / n);
                    if (k < 3)
                        k = 3;
                    double t0 = gpu_now();
                    for (int i = 0; i < k; i++) {
                        if (m < NM - 1) {
                            run1(x[s][o][m], "bench");
                        } else if (o == 0) { /* raw WRITE: D2H into pinned memory, then pwrite */
                            CU_CHECK(G.cuMemcpyDtoH_v2(hb, va, n));
                            full_io(rawfd, 1, hb, n);
                        } else { /* raw READ: pread into pinned memory, then H2D */
                            full_io(rawfd, 0, hb, n);
                            CU_CHECK(G.cuMemcpyHtoD_v2(va, hb, n));
                        }
                    }
                    double t = gpu_now() - t0;
                    if (r > 0)
                        gbs[s][o][m][r - 1] = (double)n * k / t / 1e9;
                }
    double t_bench = gpu_now() - t_start;
    printf("Storage bandwidth (test_gpu_storage bench) on %s: GB/s (10^9 bytes/s), medians of %d "
           "interleaved rounds (%.1f s in all); VRAM <-> one file with O_DIRECT (%s); each request "
           "one descriptor, posted and waited for k times. raw: cuMemcpy to pinned host memory "
           "then pwrite (WRITE), pread then cuMemcpy (READ), O_DIRECT, the same bytes. auto: no "
           "backend named, the core chose (ran on). Must show: auto >= 0.9x the best of "
           "GDS/GDS_MT/POSIX and >= 0.9x raw.\n\n",
           G.name, rounds, t_bench, path);
    printf("| op | size | POSIX staged | GDS | GDS_MT | auto | auto ran on | raw | auto/best | "
           "auto/raw | >= 0.9x both |\n|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
    int short_of = 0;
    for (int o = 0; o < 2; o++)
        for (int s = 0; s < NSIZES; s++) {
            double med[NM];
            char cell[NM][32], sz[32];
            double best = 0;
            for (int m = 0; m < NM; m++) {
                med[m] = 0;
                snprintf(cell[m], sizeof(cell[m]), "absent");
                if (m < NM - 1 && x[s][o][m] == NULL)
                    continue;
                qsort(gbs[s][o][m], (size_t)rounds, sizeof(double), cmp_double);
                med[m] = gbs[s][o][m][rounds / 2];
                snprintf(cell[m], sizeof(cell[m]), "%.2f", med[m]);
                if (m < NB && med[m] > best)
                    best = med[m];
            }
            double ab = best > 0 ? med[NB] / best : 0,
                   ar = med[NM - 1] > 0 ? med[NB] / med[NM - 1] : 0;
            int ok = ab >= 0.9 && ar >= 0.9;
            short_of += !ok;
            printf("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n",
                   o ? "READ" : "WRITE", gpu_size(sizes[s], sz, sizeof(sz)), cell[0], cell[1],
                   cell[2], cell[NB], auto_ran[s][o], cell[NM - 1], ab, ar, ok ? "yes" : "NO");
        }
    printf("\n%s\n",
           short_of ? "Some rows fall short of 0.9x (NO above)." : "Every row meets 0.9x.");
    for (int s = 0; s < NSIZES; s++)
        for (int o = 0; o < 2; o++)
            for (int m = 0; m < NM - 1; m++)
                if (x[s][o][m])
                    CHECK_RC(ixl_xfer_release(x[s][o][m]), IXL_OK);
    close(rawfd);
    CU_CHECK(G.cuMemHostUnregister(hb));
    free(hb);
    return 0;
}

int main(int argc, char **argv)
{
    int is_bench = argc > 1 && strcmp(argv[1], "bench") == 0;
    alarm(is_bench ? 280 : 170);
    gpu_open();
    setup();
    int rc = is_bench ? bench() : functional();
    teardown();
    if (rc == 0)
        fprintf(stderr, "PASS\n");
    return rc;
}

/*
 * Real GPU: staged VRAM between two processes over loopback TCP (tcp-staged, issue 20;
 * tests/gpu/README.md). Both agents run NET with local_paths=0 (the same-node paths off), so
 * VRAM goes through pinned staging slots over TCP. The target is a child process (forked
 * before either process touches the driver) driven over a pipe; it poisons and checks its own
 * device memory through the driver.
 *
 *   test_gpu_stage   VRAM->VRAM by WRITE and by READ at 64 MiB and 256 MiB (both larger than
 *                    the default 64 MiB of pinned slots per peer at 256 MiB), each with a fresh
 *                    pattern in the source and the destination poisoned first, checked
 *                    through the driver; the path is "tcp-staged"; then the bandwidth table:
 *                    staged WRITE and READ (medians of 5 rounds, 3 with IXL_GPU_QUICK=1)
 *                    against, measured in the same run, cuMemcpyDtoH into pinned host memory
 *                    and raw loopback TCP (1 and 4 connections, 4 MiB sends) of the same size, and
 *                    the ratio to the slower of the two (issue 20 wants >= 0.8). ~15 s.
 *
 * Markdown on stdout, diagnostics on stderr. Skips (77) without a GPU.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_common.h"

#define MAXLEN ((size_t)256 << 20)
#define NSIZES 2
static const size_t sizes[NSIZES] = {(size_t)64 << 20, MAXLEN};

static void pattern(uint8_t *h, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(h + i, &x, 8);
    }
}

static int rd_all(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)p + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

static void wr_all(int fd, const void *p, size_t n)
{
    for (size_t put = 0; put < n;) {
        ssize_t k = write(fd, (const char *)p + put, n - put);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0);
        put += (size_t)k;
    }
}

static struct ixl_agent *make_agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
                                 .backends = "",
                                 .etcd_endpoints = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    struct ixl_kv kv[] = {{"local_paths", "0"}};
    ixl_status st = ixl_backend_create(a, "NET", kv, 1, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "NET: %s: %s", ixl_strerror(st), ixl_agent_last_error(a));
    return a;
}

static void reg(struct ixl_agent *a, CUdeviceptr p, size_t len)
{
    struct ixl_reg_desc d = {(uint64_t)p, len, (uint64_t)G.ordinal, NULL, 0};
    ixl_status st = ixl_mem_register(a, IXL_MEM_VRAM, &d, 1, NULL);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "register VRAM: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
}

/* ---- the target ------------------------------------------------------------------------------ */

struct cmd {
    char op; /* p poison, c check (seed, len), q quit */
    uint64_t seed, len;
};

static void target_main(int in, int out)
{
    gpu_open();
    struct ixl_agent *a = make_agent("gstage-t");
    CUdeviceptr b = gpu_alloc(MAXLEN);
    reg(a, b, MAXLEN);
    void *md = NULL;
    size_t md_len = 0;
    CHECK_RC(ixl_md_get(a, NULL, &md, &md_len), IXL_OK);
    uint64_t ml = md_len, addr = (uint64_t)b;
    wr_all(out, &ml, sizeof(ml));
    wr_all(out, md, md_len);
    wr_all(out, &addr, sizeof(addr));
    ixl_free(md);
    uint8_t *want = malloc(MAXLEN);
    CHECK(want != NULL);
    struct cmd c;
    while (rd_all(in, &c, sizeof(c)) == 0 && c.op != 'q') {
        int rc = 0;
        if (c.op == 'p') {
            gpu_poison(b, 0xA5, MAXLEN);
        } else if (c.op == 'f') {
            pattern(want, c.len, c.seed);
            gpu_put(b, want, c.len);
        } else if (c.op == 'c') {
            pattern(want, c.len, c.seed);
            rc = gpu_equal(b, want, c.len, "the target's VRAM after a staged WRITE") ? 0 : 1;
            if (rc == 0 && c.len < MAXLEN)
                rc = gpu_all(b + c.len, 0xA5, MAXLEN - c.len, "the target's VRAM past it") ? 0 : 1;
        }
        wr_all(out, &rc, sizeof(rc));
    }
    free(want);
    struct ixl_reg_desc d = {(uint64_t)b, MAXLEN, (uint64_t)G.ordinal, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    gpu_free(b);
}

static pid_t tpid;
static int tto, tfrom;

static int tcmd(char op, uint64_t seed, uint64_t len)
{
    struct cmd c = {op, seed, len};
    int rc = -1;
    wr_all(tto, &c, sizeof(c));
    if (rd_all(tfrom, &rc, sizeof(rc)) != 0)
        check_fail(__FILE__, __LINE__, "the target process ended (its errors are above)");
    return rc;
}

/* ---- baselines: cuMemcpyDtoH into pinned memory, raw loopback TCP ---------------------------- */

struct tcp_rx {
    int fd;
    uint8_t *buf;
    size_t len;
};

static void *tcp_rx_main(void *arg)
{
    struct tcp_rx *r = arg;
    for (size_t got = 0; got < r->len;) {
        ssize_t k = recv(r->fd, r->buf + got, r->len - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return NULL;
}

static void send_all(int fd, const uint8_t *src, size_t len)
{
    for (size_t put = 0; put < len;) {
        size_t n = len - put < ((size_t)4 << 20) ? len - put : ((size_t)4 << 20);
        ssize_t k = send(fd, src + put, n, 0);
        CHECK(k > 0);
        put += (size_t)k;
    }
}

struct tcp_tx {
    int fd;
    const uint8_t *buf;
    size_t len;
};

static void *tcp_tx_main(void *arg)
{
    struct tcp_tx *t = arg;
    send_all(t->fd, t->buf, t->len);
    return NULL;
}

#define TCP_MAX_CONNS 4 /* NET's default conns */

/* Seconds to move len bytes over n loopback TCP connections (4 MiB sends, len/n bytes on each,
 * a sending and a receiving thread per connection), host to host. */
static double tcp_time(int n, const int *tx, const int *rx, uint8_t *src, uint8_t *dst, size_t len)
{
    struct tcp_rx r[TCP_MAX_CONNS];
    struct tcp_tx w[TCP_MAX_CONNS];
    pthread_t rt[TCP_MAX_CONNS], wt[TCP_MAX_CONNS];
    size_t part = len / (size_t)n;
    double t0 = gpu_now();
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)i * part, l = i == n - 1 ? len - off : part;
        r[i] = (struct tcp_rx){rx[i], dst + off, l};
        w[i] = (struct tcp_tx){tx[i], src + off, l};
        CHECK(pthread_create(&rt[i], NULL, tcp_rx_main, &r[i]) == 0);
        if (n > 1)
            CHECK(pthread_create(&wt[i], NULL, tcp_tx_main, &w[i]) == 0);
    }
    if (n == 1)
        send_all(tx[0], src, len);
    for (int i = 0; i < n; i++) {
        if (n > 1)
            pthread_join(wt[i], NULL);
        pthread_join(rt[i], NULL);
    }
    return gpu_now() - t0;
}

static void tcp_pair(int *tx, int *rx)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
    *tx = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(*tx >= 0 && connect(*tx, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    *rx = accept(l, NULL, NULL);
    CHECK(*rx >= 0);
    close(l);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* ---- the initiator -----------------------------------------------------------------------------
 */

static struct ixl_xfer *xfer(struct ixl_agent *a, enum ixl_op op, CUdeviceptr l, uint64_t raddr,
                             size_t len)
{
    struct ixl_desc ld = {(uint64_t)l, len, (uint64_t)G.ordinal};
    struct ixl_desc rd = {raddr, len, (uint64_t)G.ordinal};
    struct ixl_dlist *ll = NULL, *rl = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 1, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add(ll, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(rl, &rd, 1), IXL_OK);
    struct ixl_xfer *x = NULL;
    ixl_status st = ixl_xfer_create(a, op, ll, rl, "gstage-t", NULL, &x);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "ixl_xfer_create: %s: %s", ixl_strerror(st),
                   ixl_agent_last_error(a));
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.path, "tcp-staged") != 0)
        check_fail(__FILE__, __LINE__, "path '%s', want tcp-staged", info.path);
    return x;
}

static double run_xfer(struct ixl_agent *a, struct ixl_xfer *x, const char *what)
{
    double t0 = gpu_now();
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, 60000);
    if (st != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(st),
                   ixl_agent_last_error(a));
    return gpu_now() - t0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    alarm(170);
    int p1[2], p2[2];
    CHECK(pipe(p1) == 0 && pipe(p2) == 0);
    tpid = fork(); /* before either process touches the driver */
    CHECK(tpid >= 0);
    if (tpid == 0) {
        close(p1[1]);
        close(p2[0]);
        target_main(p1[0], p2[1]);
        _exit(0);
    }
    close(p1[0]);
    close(p2[1]);
    tto = p1[1];
    tfrom = p2[0];
    gpu_open(); /* a skip (77) here: the target skips the same way */
    uint64_t ml = 0, raddr = 0;
    if (rd_all(tfrom, &ml, sizeof(ml)) != 0)
        check_fail(__FILE__, __LINE__, "the target process ended before its metadata");
    void *md = malloc(ml);
    CHECK(md != NULL && rd_all(tfrom, md, ml) == 0 && rd_all(tfrom, &raddr, sizeof(raddr)) == 0);
    struct ixl_agent *a = make_agent("gstage-i");
    CHECK_RC(ixl_md_load(a, md, ml, NULL, 0), IXL_OK);
    free(md);
    CUdeviceptr l = gpu_alloc(MAXLEN);
    reg(a, l, MAXLEN);
    uint8_t *h = NULL, *h2 = malloc(MAXLEN);
    CHECK(posix_memalign((void **)&h, 4096, MAXLEN) == 0 && h2 != NULL); /* h is pinned below */

    /* Functional: fresh pattern, poisoned destination, both directions, both sizes. */
    uint64_t seed = 100;
    for (int s = 0; s < NSIZES; s++, seed++) {
        char sz[32];
        gpu_size(sizes[s], sz, sizeof(sz));
        pattern(h, sizes[s], seed);
        gpu_put(l, h, sizes[s]);
        tcmd('p', 0, 0);
        struct ixl_xfer *x = xfer(a, IXL_OP_WRITE, l, raddr, sizes[s]);
        run_xfer(a, x, "staged WRITE");
        if (tcmd('c', seed, sizes[s]) != 0)
            check_fail(__FILE__, __LINE__, "staged WRITE VRAM -> VRAM of %s: wrong data", sz);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        tcmd('f', seed + 50, sizes[s]);
        gpu_poison(l, 0x5A, MAXLEN);
        x = xfer(a, IXL_OP_READ, l, raddr, sizes[s]);
        run_xfer(a, x, "staged READ");
        pattern(h, sizes[s], seed + 50);
        CHECK(gpu_equal(l, h, sizes[s], "staged READ VRAM -> VRAM"));
        if (sizes[s] < MAXLEN)
            CHECK(gpu_all(l + sizes[s], 0x5A, MAXLEN - sizes[s], "past a staged READ"));
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        fprintf(stderr, "staged VRAM -> VRAM of %s between two processes, WRITE and READ: ok\n",
                sz);
    }

    /* Bandwidth, rounds interleaved: staged WRITE, staged READ, DtoH into pinned, raw TCP. */
    int rounds = getenv("IXL_GPU_QUICK") ? 3 : 5;
    CU_CHECK(G.cuMemHostRegister_v2(h, MAXLEN, 0));
    int tx[TCP_MAX_CONNS], rx[TCP_MAX_CONNS];
    for (int i = 0; i < TCP_MAX_CONNS; i++)
        tcp_pair(&tx[i], &rx[i]);
    double t[NSIZES][5][5];
    double t_start = gpu_now();
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < NSIZES; s++) {
            struct ixl_xfer *w = xfer(a, IXL_OP_WRITE, l, raddr, sizes[s]);
            struct ixl_xfer *rd = xfer(a, IXL_OP_READ, l, raddr, sizes[s]);
            t[s][0][r] = run_xfer(a, w, "bench WRITE");
            t[s][1][r] = run_xfer(a, rd, "bench READ");
            CHECK_RC(ixl_xfer_release(w), IXL_OK);
            CHECK_RC(ixl_xfer_release(rd), IXL_OK);
            double t0 = gpu_now();
            CU_CHECK(G.cuMemcpyDtoH_v2(h, l, sizes[s]));
            t[s][2][r] = gpu_now() - t0;
            t[s][3][r] = tcp_time(1, tx, rx, h2, h2, sizes[s]);
            t[s][4][r] = tcp_time(TCP_MAX_CONNS, tx, rx, h2, h2, sizes[s]);
        }
    double t_bench = gpu_now() - t_start;
    CU_CHECK(G.cuMemHostUnregister(h));
    for (int i = 0; i < TCP_MAX_CONNS; i++) {
        close(tx[i]);
        close(rx[i]);
    }
    printf("Staged VRAM between two processes (test_gpu_stage) on %s: NET tcp-staged over "
           "loopback TCP, local_paths=0, default options (conns=4, stage_bytes=64M in 1 MiB "
           "pinned slots); GB/s (10^9 bytes/s), medians of %d interleaved rounds (%.1f s). "
           "Baselines measured in the same run: cuMemcpyDtoH into pinned host memory, and raw "
           "loopback TCP host to host (4 MiB sends) over one connection and over %d (as many "
           "as NET uses; a sending and a receiving thread each). Issue 20 wants staged >= 0.8x "
           "the slower of DtoH and raw TCP; the ratios below take raw TCP over %d "
           "connections.\n\n",
           G.name, rounds, t_bench, TCP_MAX_CONNS, TCP_MAX_CONNS);
    printf("| size | staged WRITE VRAM->VRAM | staged READ VRAM->VRAM | DtoH pinned | raw TCP, 1 "
           "conn | raw TCP, %d conns | WRITE / min(DtoH, TCP %d) | READ / min | >= 0.8 |\n",
           TCP_MAX_CONNS, TCP_MAX_CONNS);
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < NSIZES; s++) {
        double gbs[5];
        for (int k = 0; k < 5; k++)
            gbs[k] = (double)sizes[s] / median(t[s][k], rounds) / 1e9;
        double base = gbs[2] < gbs[4] ? gbs[2] : gbs[4];
        char sz[32];
        printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n",
               gpu_size(sizes[s], sz, sizeof(sz)), gbs[0], gbs[1], gbs[2], gbs[3], gbs[4],
               gbs[0] / base, gbs[1] / base,
               gbs[0] / base >= 0.8 && gbs[1] / base >= 0.8 ? "yes" : "NO");
    }
    printf("\n");
    struct cmd q = {'q', 0, 0};
    wr_all(tto, &q, sizeof(q));
    int ws = 0;
    waitpid(tpid, &ws, 0);
    struct ixl_reg_desc d = {(uint64_t)l, MAXLEN, (uint64_t)G.ordinal, NULL, 0};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_VRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    gpu_free(l);
    free(h);
    free(h2);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    return 0;
}

/*
 * The OBJ backend (plugins/obj/README.md) against a real S3 server started by the test
 * (tests/s3/s3_server.h: s3rver by default, or the server IXL_S3_SERVER names), on 127.0.0.1
 * with an ephemeral port; one server for the whole run (its start is most of the run's time).
 *
 *   test_obj        DRAM -> OBJ -> DRAM of 1 B, 4 KiB, 1 MiB; 10^3 small objects in one request;
 *                   multipart above a small threshold (and reads split into parallel ranges);
 *                   ranged reads at offsets; query of present and missing keys; missing bucket
 *                   and missing key; an unreachable server (a closed port); a server that
 *                   stalls (SIGSTOP: timeout_ms); release in flight; a partial WRITE refused;
 *                   the AWS variables as defaults
 *   test_obj big    the 64 MiB round trip (label big: not in the sanitizer builds)
 * IXL_OBJ_TEST_MANY=N: N objects (<= 10^3) in the one-request case (the sanitizer builds: 250).
 *
 * Exit 0 passed, 1 failed, 77 skipped (no node / s3rver; a failure under CI=true).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../s3/s3_server.h"
#include "check.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define BUCKET "ixl-test"
#define WAIT_MS 60000

static struct s3_srv srv;
static char last_msg[2048]; /* the agent's last error right after a request ended */
static uint8_t *SRC, *DST;
static size_t buf_len;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_obj: alarm: the test ran out of time (a hang)\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
    }
    _exit(1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* An agent with an OBJ backend on the test server, with extra options. */
static struct ixl_agent *agent_with(const char *name, const struct ixl_kv *extra, size_t n_extra,
                                    const char *endpoint)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &ap, &a), IXL_OK);
    struct ixl_kv kv[24] = {
        {"endpoint_override", endpoint}, {"bucket", BUCKET},      {"access_key", "S3RVER"},
        {"secret_key", "S3RVER"},        {"region", "us-east-1"},
    };
    size_t n = 5;
    for (size_t i = 0; i < n_extra; i++)
        kv[n++] = extra[i];
    int rc = ixl_backend_create(a, "OBJ", kv, n, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "OBJ backend: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    struct ixl_reg_desc d = {.addr = (uint64_t)(uintptr_t)SRC, .len = buf_len};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    d.addr = (uint64_t)(uintptr_t)DST;
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    return a;
}

static struct ixl_agent *agent_new(const char *name)
{
    return agent_with(name, NULL, 0, srv.endpoint);
}

/* Registers OBJ regions keys[0..n) (len 0: whole objects), dev = index + base. */
static void reg_objs(struct ixl_agent *a, const char *const *keys, size_t n, uint64_t base)
{
    struct ixl_reg_desc *d = calloc(n > 0 ? n : 1, sizeof(*d));
    CHECK(d != NULL);
    for (size_t i = 0; i < n; i++) {
        d[i].dev = base + i;
        d[i].bytes = keys[i];
        d[i].bytes_len = strlen(keys[i]);
    }
    int rc = ixl_mem_register(a, IXL_MEM_OBJ, d, n, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "register OBJ: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(a));
    free(d);
}

/* One request: mem[i] <-> obj (offset offs[i] of object dev devs[i]), lens[i]; returns the
 * request's final status (or creation's error), waiting at most WAIT_MS. */
static int xfer(struct ixl_agent *a, enum ixl_op op, const uint8_t *const *mem,
                const uint64_t *devs, const uint64_t *offs, const size_t *lens, size_t n,
                struct ixl_xfer **keep)
{
    struct ixl_dlist *l = NULL, *r = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, n, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_OBJ, n, &r), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc dl = {.addr = (uint64_t)(uintptr_t)mem[i], .len = lens[i], .dev = 0};
        struct ixl_desc dr = {.addr = offs ? offs[i] : 0, .len = lens[i], .dev = devs[i]};
        CHECK_RC(ixl_dlist_add(l, &dl, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(r, &dr, 1), IXL_OK);
    }
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(a, op, l, r, ixl_agent_name(a), NULL, &x);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (rc != IXL_OK) {
        snprintf(last_msg, sizeof(last_msg), "%s", ixl_agent_last_error(a));
        return rc;
    }
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, WAIT_MS);
    snprintf(last_msg, sizeof(last_msg), "%s", rc == IXL_OK ? "" : ixl_agent_last_error(a));
    if (keep) {
        *keep = x;
        return rc;
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    return rc;
}

static int xfer1(struct ixl_agent *a, enum ixl_op op, const uint8_t *mem, uint64_t dev,
                 uint64_t off, size_t len)
{
    return xfer(a, op, &mem, &dev, &off, &len, 1, NULL);
}

#define XOK(a, expr)                                                               \
    do {                                                                           \
        int rc_ = (expr);                                                          \
        if (rc_ != IXL_OK)                                                         \
            check_fail(__FILE__, __LINE__, "%s: %s: %s", #expr, ixl_strerror(rc_), \
                       last_msg[0] ? last_msg : ixl_agent_last_error(a));          \
    } while (0)

/* DRAM -> OBJ -> DRAM of one object of len bytes; the WRITE's data path must be path ("s3":
 * one PUT, "s3-multipart") unless NULL. */
static void round_trip_path(struct ixl_agent *a, const char *key, uint64_t dev, size_t len,
                            const char *path)
{
    const char *keys[] = {key};
    reg_objs(a, keys, 1, dev);
    fill(SRC, len, (uint32_t)len);
    memset(DST, 0x5a, len + 1);
    const uint8_t *mem = SRC;
    uint64_t off = 0;
    struct ixl_xfer *x = NULL;
    XOK(a, xfer(a, IXL_OP_WRITE, &mem, &dev, &off, &len, 1, &x));
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (path && (info.path == NULL || strcmp(info.path, path) != 0))
        check_fail(__FILE__, __LINE__, "WRITE of %zu bytes: path '%s', want '%s'", len,
                   info.path ? info.path : "(null)", path);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    XOK(a, xfer1(a, IXL_OP_READ, DST, dev, 0, len));
    CHECK(memcmp(SRC, DST, len) == 0);
    CHECK(DST[len] == 0x5a);
    struct ixl_reg_desc q = {.dev = dev, .bytes = key, .bytes_len = strlen(key)};
    struct ixl_mem_query out = {0};
    XOK(a, ixl_mem_query(a, IXL_MEM_OBJ, &q, 1, NULL, &out));
    CHECK(out.exists && out.size == len);
}

static void round_trip(struct ixl_agent *a, const char *key, uint64_t dev, size_t len)
{
    round_trip_path(a, key, dev, len, NULL);
}

static void case_round_trips(void)
{
    struct ixl_agent *a = agent_new("rt");
    round_trip(a, "rt/one-byte", 1, 1);
    round_trip(a, "rt/4k", 2, 4 * KIB);
    round_trip(a, "rt/1m", 3, MIB);
    /* A key with characters that need encoding. */
    round_trip(a, "rt/odd key+name=1&x", 4, 100);
    ixl_agent_destroy(a);
    fprintf(stderr, "ok round trips 1 B, 4 KiB, 1 MiB\n");
}

static void case_big(void)
{
    /* 64 MiB: one PUT at the default threshold (64M, counted out), and split reads; one byte
     * more: multipart (9 parts of the default 8M, the last of 1 byte) above it. */
    struct ixl_agent *a = agent_new("big");
    round_trip_path(a, "big/64m", 1, 64 * MIB, "s3");
    round_trip_path(a, "big/64m+1", 2, 64 * MIB + 1, "s3-multipart");
    ixl_agent_destroy(a);
    fprintf(stderr, "ok round trips 64 MiB (one PUT) and 64 MiB + 1 (multipart)\n");
}

static int many_n = 1000; /* objects of case_many: 10^3 (250 in the sanitizer builds) */

static void case_many(void)
{
    enum { NMAX = 1000, LEN = 1000 };
    const int N = many_n;
    struct ixl_agent *a = agent_new("many");
    static char names[NMAX][32];
    static const char *keys[NMAX];
    static const uint8_t *src[NMAX], *dst[NMAX];
    static uint64_t devs[NMAX];
    static size_t lens[NMAX];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "many/%04d", i);
        keys[i] = names[i];
        devs[i] = 100 + (uint64_t)i;
        /* Not adjacent in memory, so the core keeps them apart (and 1 byte longer each). */
        src[i] = SRC + (size_t)i * 2 * LEN;
        dst[i] = DST + (size_t)i * 2 * LEN;
        lens[i] = LEN - (size_t)(i % 7);
    }
    reg_objs(a, keys, N, 100);
    fill(SRC, 2 * N * LEN, 77);
    memset(DST, 0, 2 * N * LEN);
    long long t0 = now_ms();
    XOK(a, xfer(a, IXL_OP_WRITE, src, devs, NULL, lens, (size_t)N, NULL));
    long long t1 = now_ms();
    XOK(a, xfer(a, IXL_OP_READ, dst, devs, NULL, lens, (size_t)N, NULL));
    long long t2 = now_ms();
    for (int i = 0; i < N; i++)
        CHECK(memcmp(src[i], dst[i], lens[i]) == 0);
    ixl_agent_destroy(a);
    fprintf(stderr, "ok %d objects in one request (WRITE %lld ms, READ %lld ms)\n", N, t1 - t0,
            t2 - t1);
}

static void case_multipart(void)
{
    /* S3's smallest part is 5 MiB (s3rver enforces it too): 11 MiB in parts of 5 MiB = 3
     * parts; read back as 1 MiB ranges in parallel. */
    const struct ixl_kv kv[] = {{"mpu_threshold", "6M"}, {"part_size", "5M"}, {"read_split", "1M"}};
    struct ixl_agent *a = agent_with("mpu", kv, 3, srv.endpoint);
    const char *keys[] = {"mpu/11m"};
    reg_objs(a, keys, 1, 1);
    size_t len = 11 * MIB + 123;
    fill(SRC, len, 11);
    memset(DST, 0, len);
    XOK(a, xfer1(a, IXL_OP_WRITE, SRC, 1, 0, len));
    XOK(a, xfer1(a, IXL_OP_READ, DST, 1, 0, len));
    CHECK(memcmp(SRC, DST, len) == 0);
    /* Ranged reads at offsets (within a split range, across ranges, the last byte). */
    uint64_t offs[] = {1, 4096, MIB - 3, 5 * MIB + 17, len - 1};
    size_t lens[] = {10, 3 * MIB, 7, 2 * MIB, 1};
    const uint8_t *dst[5];
    uint64_t devs[5] = {1, 1, 1, 1, 1};
    size_t o = 0;
    for (int i = 0; i < 5; i++) {
        dst[i] = DST + o + (size_t)i * 64; /* gaps: no merging */
        o += lens[i];
    }
    memset(DST, 0, o + 1024);
    XOK(a, xfer(a, IXL_OP_READ, dst, devs, offs, lens, 5, NULL));
    for (int i = 0; i < 5; i++)
        CHECK(memcmp(dst[i], SRC + offs[i], lens[i]) == 0);
    /* A READ past the end of the object. */
    int rc = xfer1(a, IXL_OP_READ, DST, 1, len - 10, 20);
    CHECK(rc == IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(last_msg, "past");
    ixl_agent_destroy(a);
    fprintf(stderr, "ok multipart upload, split and ranged reads\n");
}

static void case_query_and_missing(void)
{
    struct ixl_agent *a = agent_new("q");
    const char *keys[] = {"q/present", "q/missing", "s3://no-such-bucket/k"};
    reg_objs(a, keys, 3, 1);
    fill(SRC, 5000, 5);
    XOK(a, xfer1(a, IXL_OP_WRITE, SRC, 1, 0, 5000));
    struct ixl_reg_desc q[3];
    for (int i = 0; i < 3; i++)
        q[i] = (struct ixl_reg_desc){
            .dev = 1 + (uint64_t)i, .bytes = keys[i], .bytes_len = strlen(keys[i])};
    struct ixl_mem_query out[3];
    memset(out, 0xff, sizeof(out));
    XOK(a, ixl_mem_query(a, IXL_MEM_OBJ, q, 3, NULL, out));
    CHECK(out[0].exists && out[0].size == 5000);
    CHECK(!out[1].exists && out[1].size == 0);
    CHECK(!out[2].exists);
    /* Missing key and missing bucket, from the server. */
    CHECK_RC(xfer1(a, IXL_OP_READ, DST, 2, 0, 100), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(last_msg, "no object 'q/missing'");
    CHECK_RC(xfer1(a, IXL_OP_READ, DST, 3, 0, 100), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(last_msg, "bucket 'no-such-bucket' does not exist");
    CHECK_RC(xfer1(a, IXL_OP_WRITE, SRC, 3, 0, 100), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(last_msg, "does not exist");
    /* A partial WRITE is refused at creation, saying why. */
    CHECK_RC(xfer1(a, IXL_OP_WRITE, SRC, 1, 4096, 100), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(last_msg, "offset 4096");
    struct ixl_reg_desc sized = {.len = 8192, .dev = 9, .bytes = "q/sized", .bytes_len = 7};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_OBJ, &sized, 1, NULL), IXL_OK);
    CHECK_RC(xfer1(a, IXL_OP_WRITE, SRC, 9, 0, 4096), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(last_msg, "partial WRITE");
    XOK(a, xfer1(a, IXL_OP_WRITE, SRC, 9, 0, 8192));
    /* The queue still works after the errors. */
    XOK(a, xfer1(a, IXL_OP_READ, DST, 1, 0, 5000));
    CHECK(memcmp(SRC, DST, 5000) == 0);
    ixl_agent_destroy(a);
    fprintf(stderr, "ok query, missing key and bucket, partial WRITE refused\n");
}

static uint16_t closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    close(fd); /* nothing listens there now */
    return ntohs(sa.sin_port);
}

static void case_unreachable_and_stall(void)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", closed_port());
    const struct ixl_kv kv[] = {
        {"max_retries", "2"}, {"retry_base_ms", "10"}, {"timeout_ms", "1000"}};
    struct ixl_agent *a = agent_with("down", kv, 3, ep);
    const char *keys[] = {"k"};
    reg_objs(a, keys, 1, 1);
    long long t0 = now_ms();
    CHECK_RC(xfer1(a, IXL_OP_READ, DST, 1, 0, 100), IXL_ERR_UNREACHABLE);
    CHECK_STR_HAS(last_msg, "cannot reach the server");
    CHECK_STR_HAS(last_msg, "3 tries");
    CHECK(now_ms() - t0 < 10000);
    struct ixl_reg_desc q = {.dev = 1, .bytes = "k", .bytes_len = 1};
    struct ixl_mem_query out;
    CHECK_RC(ixl_mem_query(a, IXL_MEM_OBJ, &q, 1, NULL, &out), IXL_ERR_UNREACHABLE);
    ixl_agent_destroy(a);

    /* A server that stalls (stopped): the request fails within timeout_ms and the retries. */
    const struct ixl_kv kv2[] = {{"max_retries", "0"}, {"timeout_ms", "1000"}};
    a = agent_with("stall", kv2, 2, srv.endpoint);
    reg_objs(a, keys, 1, 1);
    s3_pause(&srv, 1);
    t0 = now_ms();
    int rc = xfer1(a, IXL_OP_READ, DST, 1, 0, 100);
    long long took = now_ms() - t0;
    s3_pause(&srv, 0);
    CHECK_RC(rc, IXL_ERR_UNREACHABLE);
    CHECK_STR_HAS(last_msg, "timeout_ms");
    CHECK(took >= 900 && took < 10000);
    ixl_agent_destroy(a);
    fprintf(stderr, "ok unreachable server, stalled server\n");
}

static void case_release_in_flight(void)
{
    /* 32 x 1 MiB READs through 2 connections: still in flight right after post. */
    const struct ixl_kv kv[] = {{"max_conns", "2"}};
    struct ixl_agent *a = agent_with("rel", kv, 1, srv.endpoint);
    const char *keys[] = {"rel/obj"};
    reg_objs(a, keys, 1, 1);
    fill(SRC, MIB, 3);
    XOK(a, xfer1(a, IXL_OP_WRITE, SRC, 1, 0, MIB));
    enum { N = 32 };
    const uint8_t *dst[N];
    uint64_t devs[N], offs[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        dst[i] = DST + (size_t)i * (MIB + 4096);
        devs[i] = 1;
        offs[i] = 0;
        lens[i] = MIB;
    }
    for (int round = 0; round < 3; round++) {
        memset(DST, 0x11, (size_t)N * (MIB + 4096));
        struct ixl_dlist *l = NULL, *r = NULL;
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, N, &l), IXL_OK);
        CHECK_RC(ixl_dlist_create(IXL_MEM_OBJ, N, &r), IXL_OK);
        for (int i = 0; i < N; i++) {
            struct ixl_desc dl = {.addr = (uint64_t)(uintptr_t)dst[i], .len = lens[i]};
            struct ixl_desc dr = {.addr = offs[i], .len = lens[i], .dev = devs[i]};
            CHECK_RC(ixl_dlist_add(l, &dl, 1), IXL_OK);
            CHECK_RC(ixl_dlist_add(r, &dr, 1), IXL_OK);
        }
        struct ixl_xfer *x = NULL;
        CHECK_RC(ixl_xfer_create(a, IXL_OP_READ, l, r, "rel", NULL, &x), IXL_OK);
        ixl_dlist_destroy(l);
        ixl_dlist_destroy(r);
        CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
        if (round > 0) /* let some bytes land first */
            usleep(20000 * (useconds_t)round);
        CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        /* Nothing lands after release returned. */
        memset(DST, 0x22, (size_t)N * (MIB + 4096));
        usleep(200000);
        for (size_t i = 0; i < (size_t)N * (MIB + 4096); i++)
            if (DST[i] != 0x22)
                check_fail(__FILE__, __LINE__, "byte %zu changed after release", i);
    }
    /* Release of a multipart WRITE in flight: the upload is aborted (no parts left). */
    ixl_agent_destroy(a);
    const struct ixl_kv kv2[] = {{"mpu_threshold", "5M"}, {"part_size", "5M"}, {"max_conns", "1"}};
    a = agent_with("relw", kv2, 3, srv.endpoint);
    const char *keys2[] = {"rel/mpu"};
    reg_objs(a, keys2, 1, 1);
    struct ixl_xfer *x = NULL;
    uint64_t dev = 1, off = 0;
    size_t len = 20 * MIB;
    const uint8_t *src = SRC;
    int rc = xfer(a, IXL_OP_WRITE, &src, &dev, &off, &len, 1, &x);
    (void)rc;
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_agent_destroy(a);
    fprintf(stderr, "ok release in flight\n");
}

static void case_env_defaults(void)
{
    /* The AWS variables fill options left empty (through the host's environment call). */
    setenv("AWS_ENDPOINT_URL", srv.endpoint, 1);
    setenv("AWS_DEFAULT_BUCKET", BUCKET, 1);
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("AWS_REGION", "eu-west-3", 1);
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("env", &ap, &a), IXL_OK);
    CHECK_RC(ixl_backend_create(a, "OBJ", NULL, 0, NULL), IXL_OK);
    struct ixl_reg_desc d = {.addr = (uint64_t)(uintptr_t)SRC, .len = buf_len};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    d.addr = (uint64_t)(uintptr_t)DST;
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    const char *keys[] = {"env/obj"};
    reg_objs(a, keys, 1, 1);
    fill(SRC, 3000, 9);
    XOK(a, xfer1(a, IXL_OP_WRITE, SRC, 1, 0, 3000));
    XOK(a, xfer1(a, IXL_OP_READ, DST, 1, 0, 3000));
    CHECK(memcmp(SRC, DST, 3000) == 0);
    ixl_agent_destroy(a);
    /* Only one of the two keys: refused, saying so. */
    unsetenv("AWS_SECRET_ACCESS_KEY");
    CHECK_RC(ixl_agent_create("env2", &ap, &a), IXL_OK);
    CHECK(ixl_backend_create(a, "OBJ", NULL, 0, NULL) != IXL_OK);
    CHECK_STR_HAS(ixl_agent_last_error(a), "secret key");
    ixl_agent_destroy(a);
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_DEFAULT_BUCKET");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_REGION");
    fprintf(stderr, "ok AWS environment defaults\n");
}

int main(int argc, char **argv)
{
    bool big = argc > 1 && strcmp(argv[1], "big") == 0;
    const char *many = getenv("IXL_OBJ_TEST_MANY");
    if (many && atoi(many) > 0 && atoi(many) <= 1000)
        many_n = atoi(many);
    signal(SIGALRM, on_alarm);
    alarm(110);
    s3_require();
    struct ixl_plugin_info pi = {.size = sizeof(pi)};
    if (ixl_plugin_find("OBJ", &pi) != IXL_OK)
        skip(1, "the OBJ plugin is not built (IXL_WITH_OBJ=OFF or libcurl missing)");
    buf_len = 72 * MIB;
    SRC = aligned_alloc(4096, buf_len);
    DST = aligned_alloc(4096, buf_len);
    CHECK(SRC && DST);
    long long t0 = now_ms();
    CHECK(s3_start(&srv, BUCKET) == 0);
    fprintf(stderr, "server %s up in %lld ms\n", srv.endpoint, now_ms() - t0);
    static void (*const cases[])(void) = {
        case_round_trips,           case_query_and_missing, case_multipart,   case_many,
        case_unreachable_and_stall, case_release_in_flight, case_env_defaults};
    for (size_t i = 0; i < (big ? 1 : sizeof(cases) / sizeof(cases[0])); i++) {
        long long t = now_ms();
        (big ? case_big : cases[i])();
        fprintf(stderr, "  (%lld ms)\n", now_ms() - t);
    }
    s3_stop(&srv);
    free(SRC);
    free(DST);
    fprintf(stderr, "test_obj%s: all passed\n", big ? " big" : "");
    return 0;
}

/*
 * The OBJ backend against tests/s3/s3_strict_server.py, the S3 test server that checks every
 * request's SigV4 signature and answers faults on demand (issue 22). One binary, four groups
 * (argv[1]), each its own ctest entry with its own server.
 *
 * sig: round trips path-style and virtual-hosted, over HTTP and HTTPS (a test CA made at the
 * server's start, given as ca_bundle; without it or with another CA: a certificate error, not a
 * hang), a session token, a wrong secret / access key / region / missing token (403 with the
 * server's code), multipart with part checksums, ranged and split reads, query_mem.
 *
 * faults: every error answer: 503 SlowDown retried within max_retries (and failing after), 500,
 * 403, NoSuchKey, NoSuchBucket, malformed XML (multipart create and complete, an error body),
 * truncated bodies, a wrong checksum header and a corrupted body on GET, a part refused
 * mid-upload (no upload left behind); never a byte of an error body in the destination.
 *
 * inflight: a stalled server (timeout_ms bounds it, before and mid-body), release of a READ in
 * flight (no late writes), release of a multipart WRITE in flight (the upload is aborted),
 * release while CreateMultipartUpload's answer stalls (the upload it creates is aborted, also
 * when the engine is destroyed at once), a closed port, the server killed mid-transfer.
 *
 * vram: VRAM on the simulated device (IXL_CUDA_LIBRARY, copies slowed to 50 ms): a failed
 * device copy (IXL_CUDASIM_FAIL_COPY) fails the WRITE, which succeeds when posted again; WRITE from
 * VRAM (multipart and single PUT) and READ into poisoned VRAM (whole, ranges at offsets), the
 * READ completing only after its device copies, release of a READ and of a multipart WRITE in
 * flight (no late writes, no upload left).
 *
 * Skips (77) when the OBJ plugin, python3-botocore or openssl (sig) is missing; under CI=true
 * the latter two fail.
 */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_ctl.h"

#define AK "ixltestkey"
#define SK "ixltestsecret"
#define BUCKET "ixl-s3t"
#define POISON 0xA5

static struct s3srv srv;

struct ctx {
    struct ixl_agent *a;
    struct ixl_backend *b;
    uint64_t next_dev;
};

/* A backend on srv with the test's credentials and extra options (NULL-terminated k, v pairs).
 * Returns the status of ixl_backend_create (skips when there is no OBJ plugin). */
static int open_ctx(struct ctx *c, const char *const *extra)
{
    memset(c, 0, sizeof(*c));
    c->next_dev = 1;
    struct ixl_agent_params ap = {0};
    static int n_agents;
    char name[32];
    snprintf(name, sizeof(name), "s3t%d", n_agents++);
    CHECK_RC(ixl_agent_create(name, &ap, &c->a), IXL_OK);
    struct ixl_kv kv[40];
    size_t n = 0;
    const char *base[] = {
        "endpoint_override", srv.endpoint, "bucket",     BUCKET,      "access_key",  AK,
        "secret_key",        SK,           "region",     "us-east-1", "max_retries", "2",
        "retry_base_ms",     "5",          "timeout_ms", "3000",      NULL};
    /* extra overrides base: later entries of the same key are skipped. */
    for (const char *const *p = extra; p && *p; p += 2)
        kv[n++] = (struct ixl_kv){p[0], p[1]};
    for (const char *const *p = base; *p; p += 2) {
        int dup = 0;
        for (size_t i = 0; i < n; i++)
            dup |= strcmp(kv[i].key, p[0]) == 0;
        if (!dup)
            kv[n++] = (struct ixl_kv){p[0], p[1]};
    }
    int rc = ixl_backend_create(c->a, "OBJ", kv, n, &c->b);
    if (rc == IXL_ERR_NOT_FOUND)
        skip(0, "no OBJ plugin in this build");
    return rc;
}

static void ctx_open(struct ctx *c, const char *const *extra)
{
    int rc = open_ctx(c, extra);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "OBJ backend: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(c->a));
}

static void ctx_close(struct ctx *c)
{
    ixl_agent_destroy(c->a);
    c->a = NULL;
}

/* Registers an object name (a key in the backend's bucket, or "s3://B/K") as a whole object;
 * returns its dev. */
static uint64_t obj_reg(struct ctx *c, const char *name)
{
    uint64_t dev = c->next_dev++;
    struct ixl_reg_desc d = {0, 0, dev, name, strlen(name)};
    int rc = ixl_mem_register(c->a, IXL_MEM_OBJ, &d, 1, NULL);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "register OBJ %s: %s: %s", name, ixl_strerror(rc),
                   ixl_agent_last_error(c->a));
    return dev;
}

static void *dram(struct ctx *c, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    CHECK(p != NULL);
    memset(p, POISON, len);
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)p, len ? len : 1, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(c->a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    return p;
}

static void dram_free(struct ctx *c, void *p, size_t len)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)p, len ? len : 1, 0, NULL, 0};
    CHECK_RC(ixl_mem_deregister(c->a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    free(p);
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

/* The memory type of the initiator's side of requests (the vram group: VRAM). */
static enum ixl_mem local_mem = IXL_MEM_DRAM;

/* Creates a request moving n descriptors between DRAM or VRAM (bufs[i], lens[i]) and objects
 * (devs[i] at offs[i]). */
static int xfer_make(struct ctx *c, enum ixl_op op, size_t n, void *const *bufs, const size_t *lens,
                     const uint64_t *devs, const uint64_t *offs, struct ixl_xfer **out)
{
    struct ixl_dlist *l, *r;
    CHECK_RC(ixl_dlist_create(local_mem, n, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_OBJ, n, &r), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        struct ixl_desc ld = {(uint64_t)(uintptr_t)bufs[i], lens[i], 0};
        struct ixl_desc rd = {offs ? offs[i] : 0, lens[i], devs[i]};
        CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
        CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
    }
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_BACKENDS | IXL_XFER_F_NO_MERGE,
                                 .backends = &c->b,
                                 .n_backends = 1,
                                 .no_merge = true};
    int rc = ixl_xfer_create(c->a, op, l, r, ixl_agent_name(c->a), &xp, out);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return rc;
}

static char last_msg[2048];

/* Runs a request to its end; returns its status (the message in last_msg). */
static int xfer_run(struct ctx *c, enum ixl_op op, size_t n, void *const *bufs, const size_t *lens,
                    const uint64_t *devs, const uint64_t *offs)
{
    struct ixl_xfer *x = NULL;
    last_msg[0] = '\0';
    int rc = xfer_make(c, op, n, bufs, lens, devs, offs, &x);
    if (rc != IXL_OK) {
        snprintf(last_msg, sizeof(last_msg), "%s", ixl_agent_last_error(c->a));
        return rc;
    }
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 60000);
    if (rc != IXL_OK)
        snprintf(last_msg, sizeof(last_msg), "%s", ixl_agent_last_error(c->a));
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    return rc;
}

static int run1(struct ctx *c, enum ixl_op op, void *buf, size_t len, uint64_t dev, uint64_t off)
{
    return xfer_run(c, op, 1, &buf, &len, &dev, &off);
}

/* The request must succeed. */
#define OK1(c, op, buf, len, dev, off, what)                                                 \
    do {                                                                                     \
        int rc_ = run1(c, op, buf, len, dev, off);                                           \
        if (rc_ != IXL_OK)                                                                   \
            check_fail(__FILE__, __LINE__, "%s: %s: %s", what, ixl_strerror(rc_), last_msg); \
    } while (0)

/* The request must fail with a message that contains want. */
#define FAIL1(c, op, buf, len, dev, off, want, what)                                              \
    do {                                                                                          \
        int rc_ = run1(c, op, buf, len, dev, off);                                                \
        if (rc_ == IXL_OK)                                                                        \
            check_fail(__FILE__, __LINE__, "%s: succeeded, want an error with '%s'", what, want); \
        if (strstr(last_msg, want) == NULL)                                                       \
            check_fail(__FILE__, __LINE__, "%s: %s: '%s' lacks '%s'", what, ixl_strerror(rc_),    \
                       last_msg, want);                                                           \
        fprintf(stderr, "  ok %s: %s: %s\n", what, ixl_strerror(rc_), last_msg);                  \
    } while (0)

/* A WRITE of len bytes of buf to object dev must succeed and take data path want ("s3": one
 * PUT, "s3-multipart"), as ixl_xfer_info says before the post. */
static void write_path(struct ctx *c, void *buf, size_t len, uint64_t dev, const char *want)
{
    struct ixl_xfer *x = NULL;
    uint64_t off = 0;
    CHECK_RC(xfer_make(c, IXL_OP_WRITE, 1, &buf, &len, &dev, &off, &x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (info.path == NULL || strcmp(info.path, want) != 0)
        check_fail(__FILE__, __LINE__, "WRITE of %zu bytes: path '%s', want '%s'", len,
                   info.path ? info.path : "(null)", want);
    int rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 60000);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "WRITE of %zu bytes: %s: %s", len, ixl_strerror(rc),
                   ixl_agent_last_error(c->a));
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
}

/* Nothing of an error body or a wrong answer reached buf: every byte is the poison or, when
 * good is not NULL, the right byte. */
static void check_clean(const uint8_t *buf, size_t len, const uint8_t *good, const char *what)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != POISON && !(good && buf[i] == good[i]))
            check_fail(__FILE__, __LINE__,
                       "%s: byte %zu is 0x%02x: neither the poison nor the "
                       "object's",
                       what, i, buf[i]);
}

static void put_object(const char *key, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "/__ctl/object?bucket=%s&key=%s", BUCKET, key);
    CHECK(s3_ctl(&srv, "PUT", path, data, len, NULL, 0) == 200);
}

/* ---- sig ------------------------------------------------------------------------------------ */

static void roundtrip(struct ctx *c, const char *key, size_t len, unsigned seed, const char *what)
{
    uint8_t *src = dram(c, len), *dst = dram(c, len);
    fill(src, len, seed);
    uint64_t dev = obj_reg(c, key);
    OK1(c, IXL_OP_WRITE, src, len, dev, 0, what);
    OK1(c, IXL_OP_READ, dst, len, dev, 0, what);
    CHECK(memcmp(src, dst, len) == 0);
    uint8_t *stored = malloc(len + 1);
    CHECK(stored != NULL);
    const char *k = strncmp(key, "s3://", 5) == 0 ? strchr(key + 5, '/') + 1 : key;
    CHECK(s3_object(&srv, BUCKET, k, stored, len + 1) == (long)len);
    CHECK(memcmp(stored, src, len) == 0);
    free(stored);
    dram_free(c, src, len);
    dram_free(c, dst, len);
}

static void group_sig(void)
{
    struct ctx c;
    fprintf(stderr, "sig: path-style round trips\n");
    ctx_open(&c, NULL);
    roundtrip(&c, "one-byte", 1, 1, "1 B");
    roundtrip(&c, "dir/4k", 4096, 2, "4 KiB");
    roundtrip(&c, "s3://" BUCKET "/named bucket/odd key+=&?~", 3000, 3, "a key to encode");
    /* Ranged reads at offsets and query_mem, on a 300 KiB object. */
    size_t len = 300 << 10;
    uint8_t *src = dram(&c, len), *dst = dram(&c, len);
    fill(src, len, 4);
    uint64_t dev = obj_reg(&c, "ranged");
    OK1(&c, IXL_OP_WRITE, src, len, dev, 0, "300 KiB");
    void *bufs[3] = {dst, dst + 1000, dst + 100000};
    size_t lens[3] = {7, 5000, len - 100000};
    uint64_t devs[3] = {dev, dev, dev}, offs[3] = {0, 1000, 100000};
    int rc = xfer_run(&c, IXL_OP_READ, 3, bufs, lens, devs, offs);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "ranged READ: %s: %s", ixl_strerror(rc), last_msg);
    CHECK(memcmp(dst, src, 7) == 0);
    CHECK(memcmp(dst + 1000, src + 1000, 5000) == 0);
    CHECK(memcmp(dst + 100000, src + 100000, len - 100000) == 0);
    check_clean(dst + 7, 1000 - 7, NULL, "between ranges");
    struct ixl_reg_desc q[2] = {{0, 0, 0, "ranged", 6}, {0, 0, 0, "missing-key", 11}};
    struct ixl_mem_query out[2];
    memset(out, 0, sizeof(out));
    rc = ixl_mem_query(c.a, IXL_MEM_OBJ, q, 2, c.b, out);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "query: %s: %s", ixl_strerror(rc),
                   ixl_agent_last_error(c.a));
    CHECK(out[0].exists && out[0].size == len);
    CHECK(!out[1].exists);
    uint8_t *want = malloc(len);
    CHECK(want != NULL);
    memcpy(want, src, len);
    dram_free(&c, src, len);
    dram_free(&c, dst, len);
    ctx_close(&c);

    fprintf(stderr, "sig: READ split into parallel ranges, multipart WRITE with part checksums\n");
    const char *split[] = {
        "read_split", "16K", "mpu_threshold", "64K", "part_size", "16K", "max_conns", "4", NULL};
    ctx_open(&c, split);
    src = dram(&c, len);
    dst = dram(&c, len);
    memcpy(src, want, len);
    free(want);
    dev = obj_reg(&c, "multipart");
    s3_reset(&srv);
    OK1(&c, IXL_OP_WRITE, src, len, dev, 0, "multipart WRITE 300 KiB");
    CHECK_REQS(&srv, "PUT", "multipart", (len + (16 << 10) - 1) / (16 << 10));
    CHECK_REQS(&srv, "POST", "multipart", 2); /* create, complete */
    CHECK(s3_outstanding_uploads(&srv) == 0);
    OK1(&c, IXL_OP_READ, dst, len, dev, 0, "split READ 300 KiB");
    CHECK(memcmp(dst, src, len) == 0);
    CHECK(s3_requests(&srv, "GET", "multipart") >= len / (16 << 10));

    /* The threshold's boundary: an object of mpu_threshold bytes goes as one PUT, one byte more
     * by multipart (5 parts of 16 KiB, the last of 1 byte). Each read back whole into a
     * poisoned buffer. */
    fprintf(stderr, "sig: mpu_threshold boundary: 64 KiB = one PUT, 64 KiB + 1 = multipart\n");
    uint64_t at = obj_reg(&c, "mpu-at"), over = obj_reg(&c, "mpu-over");
    size_t th = 64 << 10;
    fill(src, th + 1, 21);
    s3_reset(&srv);
    write_path(&c, src, th, at, "s3");
    CHECK_REQS(&srv, "PUT", "mpu-at", 1);
    CHECK_REQS(&srv, "POST", "mpu-at", 0);
    write_path(&c, src, th + 1, over, "s3-multipart");
    CHECK_REQS(&srv, "PUT", "mpu-over", 5);
    CHECK_REQS(&srv, "POST", "mpu-over", 2); /* create, complete */
    CHECK(s3_outstanding_uploads(&srv) == 0);
    memset(dst, POISON, th + 2);
    OK1(&c, IXL_OP_READ, dst, th, at, 0, "READ of the 64 KiB object");
    CHECK(memcmp(dst, src, th) == 0);
    CHECK(dst[th] == POISON);
    memset(dst, POISON, th + 2);
    OK1(&c, IXL_OP_READ, dst, th + 1, over, 0, "READ of the 64 KiB + 1 object");
    CHECK(memcmp(dst, src, th + 1) == 0);
    dram_free(&c, src, len);
    dram_free(&c, dst, len);
    ctx_close(&c);

    /* A threshold under part_size: an object above the threshold that fits one part goes as
     * one PUT (a multipart upload of one part adds two requests and no parallelism); one of
     * more than part_size by multipart. */
    fprintf(stderr, "sig: an object of one part goes as one PUT, above mpu_threshold too\n");
    const char *small[] = {"mpu_threshold", "16K", "part_size", "64K", NULL};
    ctx_open(&c, small);
    src = dram(&c, len);
    dst = dram(&c, len);
    fill(src, len, 22);
    uint64_t one = obj_reg(&c, "one-part"), two = obj_reg(&c, "two-parts");
    s3_reset(&srv);
    write_path(&c, src, 64 << 10, one, "s3");
    CHECK_REQS(&srv, "PUT", "one-part", 1);
    CHECK_REQS(&srv, "POST", "one-part", 0);
    write_path(&c, src, 100000, two, "s3-multipart");
    CHECK_REQS(&srv, "PUT", "two-parts", 2);
    CHECK_REQS(&srv, "POST", "two-parts", 2);
    memset(dst, POISON, 100000);
    OK1(&c, IXL_OP_READ, dst, 64 << 10, one, 0, "READ of the one-part object");
    CHECK(memcmp(dst, src, 64 << 10) == 0);
    memset(dst, POISON, 100000);
    OK1(&c, IXL_OP_READ, dst, 100000, two, 0, "READ of the two-part object");
    CHECK(memcmp(dst, src, 100000) == 0);
    dram_free(&c, src, len);
    dram_free(&c, dst, len);
    ctx_close(&c);

    fprintf(stderr, "sig: virtual-hosted addressing (BUCKET.localhost)\n");
    char vhost[64];
    snprintf(vhost, sizeof(vhost), "http://localhost:%d", srv.port);
    const char *vh[] = {"endpoint_override", vhost, "use_virtual_addressing", "true", NULL};
    ctx_open(&c, vh);
    roundtrip(&c, "vhosted", 5000, 5, "virtual-hosted");
    ctx_close(&c);

    fprintf(stderr, "sig: HTTPS with the test CA (ca_bundle), path-style and virtual-hosted\n");
    char https[64], https_vh[64], ca[128], other_ca[128];
    snprintf(https, sizeof(https), "https://127.0.0.1:%d", srv.tls_port);
    snprintf(https_vh, sizeof(https_vh), "https://localhost:%d", srv.tls_port);
    snprintf(ca, sizeof(ca), "%s/ca.pem", srv.tls_dir);
    snprintf(other_ca, sizeof(other_ca), "%s/other-ca.pem", srv.tls_dir);
    const char *tls[] = {"endpoint_override", https, "ca_bundle", ca, NULL};
    ctx_open(&c, tls);
    s3_reset(&srv);
    roundtrip(&c, "tls/path", 200000, 8, "HTTPS path-style");
    ctx_close(&c);
    CHECK_REQS(&srv, "PUT", "tls/path", 1); /* one PUT, through the TLS port */
    const char *tls_mp[] = {"endpoint_override", https, "ca_bundle", ca,
                            "mpu_threshold",     "64K", "part_size", "32K",
                            "read_split",        "32K", NULL};
    ctx_open(&c, tls_mp);
    roundtrip(&c, "tls/multipart", 200000, 9, "HTTPS multipart and split READ");
    ctx_close(&c);
    const char *tls_vh[] = {"endpoint_override",      https_vh, "ca_bundle", ca,
                            "use_virtual_addressing", "true",   NULL};
    ctx_open(&c, tls_vh);
    roundtrip(&c, "tls/vhosted", 5000, 10, "HTTPS virtual-hosted (" BUCKET ".localhost)");
    ctx_close(&c);

    fprintf(stderr, "sig: HTTPS without the test CA, or with another CA: a certificate error\n");
    struct {
        const char *ca, *what;
    } untrusted[] = {{NULL, "the system's CAs"}, {other_ca, "another CA"}};
    for (size_t i = 0; i < 2; i++) {
        const char *o[] = {"endpoint_override", https, "ca_bundle", untrusted[i].ca, NULL};
        if (untrusted[i].ca == NULL)
            o[2] = NULL;
        ctx_open(&c, o);
        uint8_t *buf = dram(&c, 4096);
        fill(buf, 4096, 12);
        s3_reset(&srv);
        long long t0 = s3_now_ms();
        FAIL1(&c, IXL_OP_WRITE, buf, 4096, obj_reg(&c, "tls/untrusted"), 0, "TLS failed",
              untrusted[i].what);
        CHECK(strstr(last_msg, "certificate") != NULL && strstr(last_msg, "ca_bundle") != NULL);
        memset(buf, POISON, 4096);
        FAIL1(&c, IXL_OP_READ, buf, 4096, obj_reg(&c, "tls/path"), 0, "TLS failed",
              untrusted[i].what);
        check_clean(buf, 4096, NULL, untrusted[i].what);
        /* Not retried (a certificate does not get better), not a hang: well within timeout_ms. */
        CHECK(s3_now_ms() - t0 < 2500);
        CHECK(s3_object(&srv, BUCKET, "tls/untrusted", buf, 4096) == -1);
        CHECK_REQS(&srv, "PUT", "tls/untrusted", 0);
        dram_free(&c, buf, 4096);
        ctx_close(&c);
    }
    const char *bad_ca[] = {"endpoint_override", https, "ca_bundle", "/nonexistent/ca.pem", NULL};
    CHECK(open_ctx(&c, bad_ca) == IXL_ERR_INVALID_ARG);
    CHECK(strstr(ixl_agent_last_error(c.a), "ca_bundle") != NULL);
    fprintf(stderr, "  ok a missing ca_bundle: %s\n", ixl_agent_last_error(c.a));
    ctx_close(&c);

    fprintf(stderr, "sig: session token\n");
    const char *cfg = "{\"session_token\": \"tok/en+1==\"}";
    CHECK(s3_ctl(&srv, "POST", "/__ctl/config", cfg, strlen(cfg), NULL, 0) == 200);
    const char *tok[] = {"session_token", "tok/en+1==", NULL};
    ctx_open(&c, tok);
    roundtrip(&c, "with-token", 100, 6, "session token");
    ctx_close(&c);
    ctx_open(&c, NULL);
    uint8_t *b = dram(&c, 100);
    FAIL1(&c, IXL_OP_READ, b, 100, obj_reg(&c, "with-token"), 0, "InvalidToken", "no token");
    check_clean(b, 100, NULL, "no token");
    dram_free(&c, b, 100);
    ctx_close(&c);
    cfg = "{\"session_token\": null}";
    CHECK(s3_ctl(&srv, "POST", "/__ctl/config", cfg, strlen(cfg), NULL, 0) == 200);

    fprintf(stderr, "sig: a broken signer fails\n");
    struct {
        const char *k, *v, *code;
    } bad[] = {{"secret_key", "not-the-secret", "SignatureDoesNotMatch"},
               {"access_key", "AKIDWRONG", "InvalidAccessKeyId"},
               {"region", "eu-west-3", "AuthorizationHeaderMalformed"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *o[] = {bad[i].k, bad[i].v, NULL};
        ctx_open(&c, o);
        b = dram(&c, 4096);
        fill(b, 4096, 7);
        uint64_t d = obj_reg(&c, "signed-badly");
        FAIL1(&c, IXL_OP_WRITE, b, 4096, d, 0, bad[i].code, bad[i].k);
        CHECK(s3_object(&srv, BUCKET, "signed-badly", b, 4096) == -1); /* nothing stored */
        memset(b, POISON, 4096);
        FAIL1(&c, IXL_OP_READ, b, 4096, obj_reg(&c, "one-byte"), 0, bad[i].code, bad[i].k);
        check_clean(b, 4096, NULL, bad[i].k);
        dram_free(&c, b, 4096);
        ctx_close(&c);
    }
}

/* ---- faults --------------------------------------------------------------------------------- */

static void group_faults(void)
{
    struct ctx c;
    size_t len = 64 << 10;
    uint8_t *obj = malloc(len);
    CHECK(obj != NULL);
    fill(obj, len, 11);
    put_object("k", obj, len);

    const char *r2[] = {"max_retries", "2", NULL};
    ctx_open(&c, r2);
    uint8_t *dst = dram(&c, len);
    uint64_t k = obj_reg(&c, "k");

    fprintf(stderr, "faults: 503 SlowDown twice, then served (max_retries 2)\n");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"k\", \"count\": 2}");
    OK1(&c, IXL_OP_READ, dst, len, k, 0, "503 x2");
    CHECK(memcmp(dst, obj, len) == 0);
    CHECK_REQS(&srv, "GET", "k", 3);

    fprintf(stderr, "faults: 503 SlowDown every time: fails after 1 + max_retries tries\n");
    s3_reset(&srv);
    memset(dst, POISON, len);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"k\", \"count\": -1}");
    long long t0 = s3_now_ms();
    FAIL1(&c, IXL_OP_READ, dst, len, k, 0, "SlowDown", "503 always");
    CHECK(s3_now_ms() - t0 < 5000);
    CHECK_REQS(&srv, "GET", "k", 3);
    check_clean(dst, len, NULL, "503 always");

    struct {
        const char *rule, *want, *what;
    } errs[] = {
        {"{\"method\": \"GET\", \"key\": \"k\", \"count\": -1, \"status\": 500, \"code\": "
         "\"InternalError\", \"message\": \"We encountered an internal error.\"}",
         "InternalError", "500 always"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"status\": 403, \"code\": \"AccessDenied\", "
         "\"message\": \"Access Denied\"}",
         "AccessDenied", "403"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"malformed\", \"status\": 500, "
         "\"count\": -1, \"body\": \"<Error><Code>Internal\"}",
         "500", "500 with a malformed error body"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"malformed\", \"status\": 404, "
         "\"body\": \"\\u0000\\u00ff<<>>&&;\"}",
         "404", "404 with garbage"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"truncate\", \"bytes\": 1000, "
         "\"count\": -1}",
         "k", "truncated body every time"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"close\", \"count\": -1}", "k",
         "connection closed without an answer every time"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"close\", \"after_bytes\": 3000, "
         "\"count\": -1}",
         "k", "connection closed mid-body every time"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"bad_checksum\", \"algo\": "
         "\"crc32c\", \"count\": -1}",
         "k", "wrong x-amz-checksum-crc32c on GET"},
        {"{\"method\": \"GET\", \"key\": \"k\", \"action\": \"bad_checksum\", \"algo\": "
         "\"crc32\", \"count\": -1}",
         "k", "wrong x-amz-checksum-crc32 on GET"},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        fprintf(stderr, "faults: %s\n", errs[i].what);
        s3_reset(&srv);
        memset(dst, POISON, len);
        s3_fault(&srv, errs[i].rule);
        FAIL1(&c, IXL_OP_READ, dst, len, k, 0, errs[i].want, errs[i].what);
        /* A failed READ may have landed some right bytes, never an error body's. */
        check_clean(dst, len, obj, errs[i].what);
    }
    /* After the faults the object reads back whole. */
    s3_reset(&srv);
    OK1(&c, IXL_OP_READ, dst, len, k, 0, "after the faults");
    CHECK(memcmp(dst, obj, len) == 0);

    fprintf(stderr, "faults: a truncated body once is retried\n");
    memset(dst, POISON, len);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"k\", \"action\": \"truncate\"}");
    OK1(&c, IXL_OP_READ, dst, len, k, 0, "truncated once");
    CHECK(memcmp(dst, obj, len) == 0);

    fprintf(stderr, "faults: NoSuchKey, NoSuchBucket\n");
    memset(dst, POISON, len);
    FAIL1(&c, IXL_OP_READ, dst, 100, obj_reg(&c, "no-such-key"), 0, "NoSuchKey", "missing key");
    check_clean(dst, len, NULL, "missing key");
    FAIL1(&c, IXL_OP_READ, dst, 100, obj_reg(&c, "s3://nobucket/k"), 0, "NoSuchBucket",
          "missing bucket");
    FAIL1(&c, IXL_OP_WRITE, dst, 100, obj_reg(&c, "s3://nobucket/k2"), 0, "NoSuchBucket",
          "WRITE to a missing bucket");
    check_clean(dst, len, NULL, "missing bucket");
    dram_free(&c, dst, len);
    ctx_close(&c);

    fprintf(stderr, "faults: a corrupted body of an object with a stored CRC32C\n");
    ctx_open(&c, r2);
    uint8_t *src = dram(&c, len);
    dst = dram(&c, len);
    memcpy(src, obj, len);
    uint64_t ck = obj_reg(&c, "checked");
    OK1(&c, IXL_OP_WRITE, src, len, ck, 0, "WRITE with req_checksum");
    fprintf(stderr, "faults: a PUT answered with another CRC32C than the one it sent\n");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"PUT\", \"key\": \"echo\", \"action\": \"bad_checksum\", "
                   "\"algo\": \"crc32c\", \"count\": -1}");
    FAIL1(&c, IXL_OP_WRITE, src, len, obj_reg(&c, "echo"), 0, "the server stored",
          "PUT answered with a wrong CRC32C");
    s3_reset(&srv);
    /* S3 sends no checksum with a ranged GET (OBJ always sends a Range); the rule makes the
     * server send the stored CRC32C with the whole-object range. */
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"checked\", \"action\": \"corrupt\", "
                   "\"count\": -1, \"with_checksum\": true}");
    FAIL1(&c, IXL_OP_READ, dst, len, ck, 0, "checksum", "corrupted body");
    s3_reset(&srv);
    OK1(&c, IXL_OP_READ, dst, len, ck, 0, "uncorrupted");
    CHECK(memcmp(dst, obj, len) == 0);
    dram_free(&c, src, len);
    dram_free(&c, dst, len);
    ctx_close(&c);

    fprintf(stderr, "faults: multipart: malformed XML, a part refused, a 200 error on complete\n");
    const char *mp[] = {"mpu_threshold", "32K", "part_size", "16K", "max_retries", "1", NULL};
    ctx_open(&c, mp);
    src = dram(&c, len);
    memcpy(src, obj, len);
    uint64_t m = obj_reg(&c, "mp");
    struct {
        const char *rule, *want, *what;
    } mps[] = {
        {"{\"method\": \"POST\", \"key\": \"mp\", \"query\": \"uploads\", \"action\": "
         "\"malformed\", \"count\": -1}",
         "mp", "create answers malformed XML"},
        {"{\"method\": \"PUT\", \"key\": \"mp\", \"skip\": 1, \"status\": 403, \"code\": "
         "\"AccessDenied\", \"message\": \"Access Denied\"}",
         "AccessDenied", "part 2 refused"},
        {"{\"method\": \"PUT\", \"key\": \"mp\", \"count\": -1, \"skip\": 2}", "SlowDown",
         "parts throttled past max_retries"},
        {"{\"method\": \"PUT\", \"key\": \"mp\", \"skip\": 1, \"action\": \"bad_checksum\", "
         "\"algo\": \"crc32c\"}",
         "the server stored", "part 2 answered with a wrong CRC32C"},
        {"{\"method\": \"POST\", \"key\": \"mp\", \"query\": \"uploadId\", \"action\": "
         "\"malformed\", \"count\": -1, \"body\": \"<?xml version=\\\"1.0\\\"?><Error><Code>"
         "InternalError</Code><Message>We encountered an internal error.</Message></Error>\"}",
         "InternalError", "complete answers 200 with an error"},
        {"{\"method\": \"POST\", \"key\": \"mp\", \"query\": \"uploadId\", \"action\": "
         "\"malformed\", \"count\": -1, \"body\": \"<CompleteMultipartUploadResult><ETa\"}",
         "mp", "complete answers malformed XML"},
    };
    for (size_t i = 0; i < sizeof(mps) / sizeof(mps[0]); i++) {
        fprintf(stderr, "faults: %s\n", mps[i].what);
        s3_reset(&srv);
        s3_fault(&srv, mps[i].rule);
        FAIL1(&c, IXL_OP_WRITE, src, len, m, 0, mps[i].want, mps[i].what);
        long long t1 = s3_now_ms();
        while (s3_outstanding_uploads(&srv) != 0 && s3_now_ms() - t1 < 3000)
            s3_sleep_ms(20);
        if (s3_outstanding_uploads(&srv) != 0)
            check_fail(__FILE__, __LINE__, "%s: an upload is left on the server", mps[i].what);
    }
    s3_reset(&srv);
    OK1(&c, IXL_OP_WRITE, src, len, m, 0, "multipart after the faults");
    uint8_t *stored = malloc(len);
    CHECK(s3_object(&srv, BUCKET, "mp", stored, len) == (long)len);
    CHECK(memcmp(stored, obj, len) == 0);
    free(stored);
    dram_free(&c, src, len);
    ctx_close(&c);
    free(obj);
}

/* ---- inflight ------------------------------------------------------------------------------- */

static void group_inflight(void)
{
    struct ctx c;
    size_t len = 256 << 10;
    uint8_t *obj = malloc(len);
    CHECK(obj != NULL);
    fill(obj, len, 21);
    put_object("big", obj, len);

    fprintf(stderr, "inflight: a stalled server fails within timeout_ms\n");
    const char *t[] = {"timeout_ms", "300", "max_retries", "0", NULL};
    ctx_open(&c, t);
    uint8_t *dst = dram(&c, len);
    uint64_t big = obj_reg(&c, "big");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"big\", \"action\": \"stall\", "
                   "\"seconds\": 5}");
    long long t0 = s3_now_ms();
    FAIL1(&c, IXL_OP_READ, dst, len, big, 0, "big", "stall before answering");
    long long took = s3_now_ms() - t0;
    fprintf(stderr, "  failed after %lld ms\n", took);
    CHECK(took >= 250 && took < 4000); /* timeout_ms + libcurl's 1 s progress tick */
    check_clean(dst, len, NULL, "stall before answering");
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"big\", \"action\": \"stall\", "
                   "\"seconds\": 10, \"after_bytes\": 70000}");
    t0 = s3_now_ms();
    FAIL1(&c, IXL_OP_READ, dst, len, big, 0, "big", "stall mid-body");
    took = s3_now_ms() - t0;
    fprintf(stderr, "  failed after %lld ms\n", took);
    CHECK(took >= 250 && took < 4000); /* timeout_ms + libcurl's 1 s progress tick */
    check_clean(dst, len, obj, "stall mid-body");
    dram_free(&c, dst, len);
    ctx_close(&c);

    fprintf(stderr, "inflight: release of a READ in flight, no late writes\n");
    ctx_open(&c, NULL);
    dst = dram(&c, len);
    big = obj_reg(&c, "big");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"big\", \"action\": \"stall\", "
                   "\"seconds\": 1, \"after_bytes\": 100000}");
    struct ixl_xfer *x;
    void *bp = dst;
    uint64_t off0 = 0;
    CHECK_RC(xfer_make(&c, IXL_OP_READ, 1, &bp, &len, &big, &off0, &x), IXL_OK);
    int rc = ixl_xfer_post(x);
    CHECK(rc == IXL_IN_PROGRESS);
    /* In flight: the server has the GET and sends its first 100000 bytes. */
    t0 = s3_now_ms();
    while (s3_requests(&srv, "GET", "big") == 0 && s3_now_ms() - t0 < 3000)
        s3_sleep_ms(5);
    CHECK_REQS(&srv, "GET", "big", 1); /* logged on arrival */
    s3_sleep_ms(200);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    uint8_t *snap = malloc(len);
    CHECK(snap != NULL);
    memcpy(snap, dst, len);
    check_clean(dst, len, obj, "released READ");
    s3_sleep_ms(1300); /* the stall ends; the rest of the body goes to a closed connection */
    CHECK(memcmp(snap, dst, len) == 0);
    free(snap);
    /* The engine goes on serving. */
    OK1(&c, IXL_OP_READ, dst, len, big, 0, "READ after a release");
    CHECK(memcmp(dst, obj, len) == 0);

    fprintf(stderr, "inflight: release of a multipart WRITE in flight aborts the upload\n");
    dram_free(&c, dst, len);
    ctx_close(&c);
    const char *mp[] = {"mpu_threshold", "64K", "part_size", "32K", NULL};
    ctx_open(&c, mp);
    uint8_t *src = dram(&c, len);
    memcpy(src, obj, len);
    uint64_t w = obj_reg(&c, "mp-released");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"PUT\", \"key\": \"mp-released\", \"action\": \"stall\", "
                   "\"seconds\": 1, \"count\": -1}");
    bp = src;
    CHECK_RC(xfer_make(&c, IXL_OP_WRITE, 1, &bp, &len, &w, &off0, &x), IXL_OK);
    CHECK(ixl_xfer_post(x) == IXL_IN_PROGRESS);
    t0 = s3_now_ms();
    while (s3_outstanding_uploads(&srv) == 0 && s3_now_ms() - t0 < 3000)
        s3_sleep_ms(5);
    CHECK(s3_outstanding_uploads(&srv) == 1);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    t0 = s3_now_ms();
    while (s3_outstanding_uploads(&srv) != 0 && s3_now_ms() - t0 < 4000)
        s3_sleep_ms(20);
    CHECK(s3_outstanding_uploads(&srv) == 0);
    uint8_t *back = malloc(len);
    CHECK(back != NULL);
    CHECK(s3_object(&srv, BUCKET, "mp-released", back, len) == -1); /* never completed */
    free(back);
    dram_free(&c, src, len);
    ctx_close(&c);

    fprintf(stderr, "inflight: release while CreateMultipartUpload is in flight: the upload it "
                    "makes is aborted when it answers\n");
    for (int destroy = 0; destroy < 2; destroy++) {
        const char *key = destroy ? "mp-create-destroyed" : "mp-create-released";
        ctx_open(&c, mp);
        src = dram(&c, len);
        memcpy(src, obj, len);
        w = obj_reg(&c, key);
        s3_reset(&srv);
        char rule[256];
        snprintf(rule, sizeof(rule),
                 "{\"method\": \"POST\", \"key\": \"%s\", \"query\": \"uploads\", "
                 "\"action\": \"stall\", \"seconds\": 0.6}",
                 key);
        s3_fault(&srv, rule);
        bp = src;
        CHECK_RC(xfer_make(&c, IXL_OP_WRITE, 1, &bp, &len, &w, &off0, &x), IXL_OK);
        CHECK(ixl_xfer_post(x) == IXL_IN_PROGRESS);
        t0 = s3_now_ms();
        while (s3_requests(&srv, "POST", key) == 0 && s3_now_ms() - t0 < 3000)
            s3_sleep_ms(5);
        CHECK_REQS(&srv, "POST", key, 1); /* the create arrived; its answer stalls */
        CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
        t0 = s3_now_ms();
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        long long rel = s3_now_ms() - t0;
        CHECK(s3_outstanding_uploads(&srv) == 0); /* not created yet */
        dram_free(&c, src, len);
        if (destroy) {
            /* The engine's destruction waits (at most timeout_ms) for the answer and the
             * abort. */
            t0 = s3_now_ms();
            ctx_close(&c);
            fprintf(stderr, "  released in %lld ms, destroyed in %lld ms\n", rel, s3_now_ms() - t0);
        } else {
            fprintf(stderr, "  released in %lld ms\n", rel);
            t0 = s3_now_ms();
            while (s3_requests(&srv, "DELETE", key) == 0 && s3_now_ms() - t0 < 3000)
                s3_sleep_ms(10);
        }
        t0 = s3_now_ms();
        while (s3_outstanding_uploads(&srv) != 0 && s3_now_ms() - t0 < 2000)
            s3_sleep_ms(10);
        CHECK(rel < 400);                   /* release did not wait for the stalled answer */
        CHECK_REQS(&srv, "DELETE", key, 1); /* AbortMultipartUpload of the upload created */
        CHECK_REQS(&srv, "PUT", key, 0);    /* no part sent */
        CHECK(s3_outstanding_uploads(&srv) == 0);
        if (!destroy)
            ctx_close(&c);
    }

    fprintf(stderr, "inflight: the server killed mid-transfer\n");
    ctx_open(&c, t);
    dst = dram(&c, len);
    big = obj_reg(&c, "big");
    s3_reset(&srv);
    s3_fault(&srv, "{\"method\": \"GET\", \"key\": \"big\", \"action\": \"die\", "
                   "\"after_bytes\": 50000}");
    FAIL1(&c, IXL_OP_READ, dst, len, big, 0, "big", "server killed mid-body");
    check_clean(dst, len, obj, "server killed mid-body");
    t0 = s3_now_ms();
    while (s3srv_alive(&srv) && s3_now_ms() - t0 < 3000)
        s3_sleep_ms(10);
    CHECK(!s3srv_alive(&srv));
    fprintf(stderr, "inflight: nobody listens (the dead server's port)\n");
    memset(dst, POISON, len);
    FAIL1(&c, IXL_OP_READ, dst, len, big, 0, "big", "closed port");
    check_clean(dst, len, NULL, "closed port");
    dram_free(&c, dst, len);
    ctx_close(&c);
    free(obj);
}

/* ---- vram: GPU memory through bounce buffers, on the simulated device ------------------------ */

#define VRAM_DELAY_MS 50 /* IXL_CUDASIM_DELAY_US: each device copy takes this long */

static void *vram_new(size_t len, const void *from)
{
    void *v = NULL;
    CHECK_RC(ixl_device_alloc(0, len, &v), IXL_OK);
    CHECK_RC(ixl_device_copy(v, from, len), IXL_OK);
    return v;
}

static void vram_reg(struct ctx *c, void *v, size_t len, int reg)
{
    struct ixl_reg_desc d = {(uint64_t)(uintptr_t)v, len, 0, NULL, 0};
    if (reg)
        CHECK_RC(ixl_mem_register(c->a, IXL_MEM_VRAM, &d, 1, NULL), IXL_OK);
    else
        CHECK_RC(ixl_mem_deregister(c->a, IXL_MEM_VRAM, &d, 1, NULL), IXL_OK);
}

static void group_vram(void)
{
    struct ctx c;
    size_t len = 300000;
    uint8_t *pat = malloc(len), *poison = malloc(len), *back = malloc(len);
    CHECK(pat && poison && back);
    fill(pat, len, 41);
    memset(poison, POISON, len);
    /* Ranges and parts of 64 KiB: 5 per 300000-byte object, so 5 device copies. */
    const char *o[] = {"mpu_threshold", "64K",       "part_size", "64K", "read_split",
                       "64K",           "max_conns", "4",         NULL};
    ctx_open(&c, o);
    uint8_t *v1 = vram_new(len, pat), *v2 = vram_new(len, poison);
    vram_reg(&c, v1, len, 1);
    vram_reg(&c, v2, len, 1);
    local_mem = IXL_MEM_VRAM;
    uint64_t mp = obj_reg(&c, "vram/mp"), one = obj_reg(&c, "vram/put");

    fprintf(stderr, "vram: a failed device copy fails the WRITE; posted again it succeeds\n");
    /* IXL_CUDASIM_FAIL_COPY=3: the sim's copies 1 and 2 filled v1 and v2, the WRITE's own is 3
     * (and the stream stays failed: OBJ replaces it). */
    int frc = run1(&c, IXL_OP_WRITE, v1 + 1000, 50000, one, 0);
    if (frc != IXL_ERR_BACKEND || strstr(last_msg, "copy") == NULL)
        check_fail(__FILE__, __LINE__, "WRITE with a failed copy: %s (%s), want IXL_ERR_BACKEND",
                   ixl_strerror(frc), last_msg);
    fprintf(stderr, "  ok %s\n", last_msg);
    CHECK(s3_object(&srv, BUCKET, "vram/put", back, len) == -1); /* nothing sent */

    fprintf(stderr, "vram: WRITE VRAM -> a multipart object and a single PUT\n");
    s3_reset(&srv);
    OK1(&c, IXL_OP_WRITE, v1, len, mp, 0, "VRAM -> multipart object");
    CHECK_REQS(&srv, "PUT", "vram/mp", 5);
    OK1(&c, IXL_OP_WRITE, v1 + 1000, 50000, one, 0, "VRAM -> PUT");
    CHECK(s3_object(&srv, BUCKET, "vram/mp", back, len) == (long)len);
    CHECK(memcmp(back, pat, len) == 0);
    CHECK(s3_object(&srv, BUCKET, "vram/put", back, len) == 50000);
    CHECK(memcmp(back, pat + 1000, 50000) == 0);

    fprintf(stderr, "vram: READ into poisoned VRAM: ends after its device copies\n");
    long long t0 = s3_now_ms();
    OK1(&c, IXL_OP_READ, v2, len, mp, 0, "multipart object -> VRAM");
    long long took = s3_now_ms() - t0;
    fprintf(stderr, "  READ of 5 ranges took %lld ms (5 copies of %d ms)\n", took, VRAM_DELAY_MS);
    CHECK(took >= 5 * VRAM_DELAY_MS - 10); /* completion waited for every copy into the VRAM */
    CHECK_RC(ixl_device_copy(back, v2, len), IXL_OK);
    CHECK(memcmp(back, pat, len) == 0);
    /* Ranges at offsets, gaps stay poisoned. */
    CHECK_RC(ixl_device_copy(v2, poison, len), IXL_OK);
    void *bufs[2] = {v2 + 7, v2 + 5000};
    size_t lens[2] = {1000, 50000};
    uint64_t devs[2] = {mp, one}, offs[2] = {100, 0};
    int rc = xfer_run(&c, IXL_OP_READ, 2, bufs, lens, devs, offs);
    if (rc != IXL_OK)
        check_fail(__FILE__, __LINE__, "ranged READ to VRAM: %s: %s", ixl_strerror(rc), last_msg);
    CHECK_RC(ixl_device_copy(back, v2, len), IXL_OK);
    CHECK(memcmp(back + 7, pat + 100, 1000) == 0);
    CHECK(memcmp(back + 5000, pat + 1000, 50000) == 0);
    check_clean(back, 7, NULL, "VRAM before the first range");
    check_clean(back + 1007, 5000 - 1007, NULL, "VRAM between the ranges");
    check_clean(back + 55000, len - 55000, NULL, "VRAM after the ranges");

    fprintf(stderr, "vram: release of a READ into VRAM in flight: no late writes\n");
    CHECK_RC(ixl_device_copy(v2, poison, len), IXL_OK);
    struct ixl_xfer *x;
    void *bp = v2;
    uint64_t off0 = 0;
    CHECK_RC(xfer_make(&c, IXL_OP_READ, 1, &bp, &len, &mp, &off0, &x), IXL_OK);
    s3_reset(&srv);
    CHECK(ixl_xfer_post(x) == IXL_IN_PROGRESS);
    t0 = s3_now_ms();
    while (s3_requests(&srv, "GET", "vram/mp") < 5 && s3_now_ms() - t0 < 3000)
        s3_sleep_ms(2);
    /* Every range has arrived at the server; their copies (50 ms each, one after another on
     * the GPU's stream) cannot all be done. */
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    t0 = s3_now_ms();
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    fprintf(stderr, "  released in %lld ms\n", s3_now_ms() - t0);
    uint8_t *snap = malloc(len);
    CHECK(snap != NULL);
    CHECK_RC(ixl_device_copy(snap, v2, len), IXL_OK);
    check_clean(snap, len, pat, "released READ into VRAM");
    s3_sleep_ms(3 * VRAM_DELAY_MS);
    CHECK_RC(ixl_device_copy(back, v2, len), IXL_OK);
    CHECK(memcmp(snap, back, len) == 0); /* nothing landed after release returned */
    free(snap);

    fprintf(stderr, "vram: release of a multipart WRITE from VRAM in flight\n");
    uint64_t mp2 = obj_reg(&c, "vram/mp-released");
    s3_reset(&srv);
    bp = v1;
    CHECK_RC(xfer_make(&c, IXL_OP_WRITE, 1, &bp, &len, &mp2, &off0, &x), IXL_OK);
    CHECK(ixl_xfer_post(x) == IXL_IN_PROGRESS);
    s3_sleep_ms(VRAM_DELAY_MS); /* the create answered, the parts' copies under way */
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    t0 = s3_now_ms();
    while (s3_outstanding_uploads(&srv) != 0 && s3_now_ms() - t0 < 3000)
        s3_sleep_ms(10);
    CHECK(s3_outstanding_uploads(&srv) == 0);
    CHECK(s3_object(&srv, BUCKET, "vram/mp-released", back, len) == -1);
    /* The engine goes on: a WRITE then READ round trip after the releases. */
    OK1(&c, IXL_OP_WRITE, v1, len, mp2, 0, "VRAM -> object after the releases");
    CHECK_RC(ixl_device_copy(v2, poison, len), IXL_OK);
    OK1(&c, IXL_OP_READ, v2, len, mp2, 0, "object -> VRAM after the releases");
    CHECK_RC(ixl_device_copy(back, v2, len), IXL_OK);
    CHECK(memcmp(back, pat, len) == 0);

    local_mem = IXL_MEM_DRAM;
    vram_reg(&c, v1, len, 0);
    vram_reg(&c, v2, len, 0);
    ctx_close(&c);
    CHECK_RC(ixl_device_free(v1), IXL_OK);
    CHECK_RC(ixl_device_free(v2), IXL_OK);
    free(pat);
    free(poison);
    free(back);
}

int main(int argc, char **argv)
{
    const char *group = argc > 1 ? argv[1] : "sig";
    if (strcmp(group, "vram") == 0) {
        const char *lib = getenv("IXL_CUDA_LIBRARY");
        if (lib == NULL || access(lib, R_OK) != 0)
            skip(1, "IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)");
        char delay[32];
        snprintf(delay, sizeof(delay), "%d", VRAM_DELAY_MS * 1000);
        setenv("IXL_CUDASIM_DELAY_US", delay, 1); /* read when the sim loads, later */
        setenv("IXL_CUDASIM_FAIL_COPY", "3", 1);  /* group_vram's first WRITE */
    }
    struct ixl_plugin_info pi = {.size = sizeof(pi)};
    if (ixl_plugin_find("OBJ", &pi) != IXL_OK)
        skip(0, "no OBJ plugin in this build");
    const char *const args[] = {"--bucket", BUCKET, "--small-parts", NULL};
    s3srv_start_tls(&srv, args, strcmp(group, "sig") == 0); /* sig covers HTTPS */
    long long t0 = s3_now_ms();
    if (strcmp(group, "sig") == 0)
        group_sig();
    else if (strcmp(group, "faults") == 0)
        group_faults();
    else if (strcmp(group, "inflight") == 0)
        group_inflight();
    else if (strcmp(group, "vram") == 0)
        group_vram();
    else
        check_fail(__FILE__, __LINE__, "unknown group '%s' (sig, faults, inflight, vram)", group);
    s3srv_stop(&srv);
    fprintf(stderr, "%s: ok in %lld ms\n", group, s3_now_ms() - t0);
    return 0;
}

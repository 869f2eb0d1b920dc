/* OBJ: options, registration, query_mem and requests. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj.h"

#define OBJ_MEMS (IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_OBJ))
#define OBJ_MEMS_ALL (OBJ_MEMS | IXL_MEM_BIT(IXL_MEM_VRAM)) /* VRAM where there is a GPU */

enum obj_opt {
    OO_ACCESS_KEY,
    OO_SECRET_KEY,
    OO_SESSION_TOKEN,
    OO_BUCKET,
    OO_ENDPOINT,
    OO_SCHEME,
    OO_REGION,
    OO_VIRTUAL,
    OO_REQ_CHECKSUM,
    OO_RESP_CHECKSUM,
    OO_CA_BUNDLE,
    OO_MAX_CONNS,
    OO_MPU_THRESHOLD,
    OO_PART_SIZE,
    OO_READ_SPLIT,
    OO_TIMEOUT,
    OO_MAX_RETRIES,
    OO_RETRY_BASE,
    OO_COUNT
};

static const char *const schemes[] = {"https", "http", NULL};
static const char *const checksum_modes[] = {"supported", "required", NULL};

static const struct ixl_option obj_options[OO_COUNT] = {
    [OO_ACCESS_KEY] = {.name = "access_key",
                       .default_value = "",
                       .type = IXL_OPT_STRING,
                       .description = "access key id; empty: AWS_ACCESS_KEY_ID; none at all: "
                                      "unsigned (anonymous) requests"},
    [OO_SECRET_KEY] = {.name = "secret_key",
                       .default_value = "",
                       .type = IXL_OPT_STRING,
                       .description = "secret access key; empty: AWS_SECRET_ACCESS_KEY"},
    [OO_SESSION_TOKEN] = {.name = "session_token",
                          .default_value = "",
                          .type = IXL_OPT_STRING,
                          .description = "session token of temporary credentials; empty: "
                                         "AWS_SESSION_TOKEN"},
    [OO_BUCKET] = {.name = "bucket",
                   .default_value = "",
                   .type = IXL_OPT_STRING,
                   .description = "bucket of objects whose key names none (\"s3://B/KEY\" names "
                                  "one); empty: AWS_DEFAULT_BUCKET"},
    [OO_ENDPOINT] = {.name = "endpoint_override",
                     .default_value = "",
                     .type = IXL_OPT_STRING,
                     .description = "the server, [scheme://]host[:port]; empty: AWS_ENDPOINT_URL, "
                                    "else AWS_ENDPOINT_OVERRIDE, else s3.REGION.amazonaws.com"},
    [OO_SCHEME] = {.name = "scheme",
                   .default_value = "https",
                   .type = IXL_OPT_ENUM,
                   .choices = schemes,
                   .description = "http or https, for an endpoint given without a scheme"},
    [OO_REGION] = {.name = "region",
                   .default_value = "",
                   .type = IXL_OPT_STRING,
                   .description = "the region requests are signed for; empty: AWS_REGION, else "
                                  "AWS_DEFAULT_REGION, else us-east-1"},
    [OO_VIRTUAL] = {.name = "use_virtual_addressing",
                    .default_value = "false",
                    .type = IXL_OPT_BOOL,
                    .description = "virtual-hosted addressing (BUCKET.host/KEY) instead of "
                                   "path-style (host/BUCKET/KEY)"},
    [OO_REQ_CHECKSUM] = {.name = "req_checksum",
                         .default_value = "supported",
                         .type = IXL_OPT_ENUM,
                         .choices = checksum_modes,
                         .description = "supported: send a CRC32C (x-amz-checksum-crc32c) with "
                                        "every PUT and part, verify what the server echoes; "
                                        "required: only where S3 requires one (none here)"},
    [OO_RESP_CHECKSUM] = {.name = "resp_checksum",
                          .default_value = "supported",
                          .type = IXL_OPT_ENUM,
                          .choices = checksum_modes,
                          .description = "supported: ask for whole-object checksums "
                                         "(x-amz-checksum-mode) and verify those the server "
                                         "returns; required: verify only those sent unasked"},
    [OO_CA_BUNDLE] = {.name = "ca_bundle",
                      .default_value = "",
                      .type = IXL_OPT_STRING,
                      .description = "a PEM file of CA certificates for HTTPS; empty: the "
                                     "system's"},
    [OO_MAX_CONNS] = {.name = "max_conns",
                      .default_value = "32",
                      .type = IXL_OPT_INT,
                      .unit = "connections",
                      .min = 1,
                      .max = 1024,
                      .description = "persistent connections (and HTTP requests in flight) of "
                                     "the backend, all requests together"},
    [OO_MPU_THRESHOLD] = {.name = "mpu_threshold",
                          .default_value = "64M",
                          .type = IXL_OPT_SIZE,
                          .min = 1,
                          .max = (int64_t)5 << 40,
                          .description = "WRITEs of this many bytes or more (and more than "
                                         "part_size) go by multipart upload, in parts of "
                                         "part_size sent in parallel; smaller ones, one PUT"},
    [OO_PART_SIZE] = {.name = "part_size",
                      .default_value = "8M",
                      .type = IXL_OPT_SIZE,
                      .min = 4096,
                      .max = (int64_t)5 << 30,
                      .description = "bytes of a multipart upload's part (S3: 5M..5G, all but "
                                     "the last; at most 10000 parts)"},
    [OO_READ_SPLIT] = {.name = "read_split",
                       .default_value = "8M",
                       .type = IXL_OPT_SIZE,
                       .min = 4096,
                       .max = INT64_MAX,
                       .description = "READ descriptors longer than this are read as parallel "
                                      "ranges of this size"},
    [OO_TIMEOUT] = {.name = "timeout_ms",
                    .default_value = "30000",
                    .type = IXL_OPT_DURATION,
                    .unit = "ms",
                    .min = 100,
                    .max = 3600000,
                    .description = "a connection that does not open, or a transfer that moves "
                                   "no byte, for this long fails (then retried)"},
    [OO_MAX_RETRIES] = {.name = "max_retries",
                        .default_value = "3",
                        .type = IXL_OPT_INT,
                        .unit = "retries",
                        .min = 0,
                        .max = 20,
                        .description = "retries of an HTTP request after a throttling (503 "
                                       "SlowDown), 5xx, broken connection or timeout"},
    [OO_RETRY_BASE] = {.name = "retry_base_ms",
                       .default_value = "50",
                       .type = IXL_OPT_DURATION,
                       .unit = "ms",
                       .min = 1,
                       .max = 60000,
                       .description = "backoff before retry n: up to retry_base_ms * 2^n "
                                      "(jittered, at most 2 s)"},
};

const struct ixl_sys *obj_sys_ptr;

int obj_error(struct obj_engine *e, int status, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "%s", buf);
    return status;
}

long long obj_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- options ----------------------------------------------------------------------------------
 */

/* The option's text, else the first of the environment variables that is set (through the
 * host: ixl reads the environment in one place), else "". 0, or -1 when it does not fit. */
static int opt_or_env(const struct obj_engine *e, const struct ixl_opt_value *v, char *out,
                      size_t cap, const char *const *envs)
{
    const char *s = v->str ? v->str : "";
    if (s[0] != '\0') {
        if (strlen(s) >= cap)
            return -1;
        snprintf(out, cap, "%s", s);
        return 0;
    }
    out[0] = '\0';
    const struct ixl_host *h = e->host;
    if (h->size < offsetof(struct ixl_host, env) + sizeof(h->env) || h->env == NULL)
        return 0;
    for (; *envs; envs++) {
        int rc = h->env(h->ctx, *envs, out, cap);
        if (rc == IXL_OK && out[0] != '\0')
            return 0;
        if (rc == IXL_ERR_TOO_LARGE)
            return -1;
        out[0] = '\0';
    }
    return 0;
}

static int parse_options(struct obj_engine *e, const struct ixl_engine_init *init)
{
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != OO_COUNT)
        return obj_error(e, IXL_ERR_INVALID_ARG, "OBJ: the core passed no typed options");
    const struct ixl_opt_value *o = init->values;
    static const char *const env_ak[] = {"AWS_ACCESS_KEY_ID", NULL};
    static const char *const env_sk[] = {"AWS_SECRET_ACCESS_KEY", NULL};
    static const char *const env_tok[] = {"AWS_SESSION_TOKEN", NULL};
    static const char *const env_bucket[] = {"AWS_DEFAULT_BUCKET", NULL};
    static const char *const env_ep[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                                         "AWS_ENDPOINT_OVERRIDE", NULL};
    static const char *const env_region[] = {"AWS_REGION", "AWS_DEFAULT_REGION", NULL};
    static const char *const env_none[] = {NULL};
    char endpoint[512];
    struct {
        const struct ixl_opt_value *v;
        char *out;
        size_t cap;
        const char *const *envs;
        const char *name;
    } s[] = {
        {&o[OO_ACCESS_KEY], e->access_key, sizeof(e->access_key), env_ak, "access_key"},
        {&o[OO_SECRET_KEY], e->secret_key, sizeof(e->secret_key), env_sk, "secret_key"},
        {&o[OO_SESSION_TOKEN], e->session_token, sizeof(e->session_token), env_tok,
         "session_token"},
        {&o[OO_BUCKET], e->bucket, sizeof(e->bucket), env_bucket, "bucket"},
        {&o[OO_ENDPOINT], endpoint, sizeof(endpoint), env_ep, "endpoint_override"},
        {&o[OO_REGION], e->region, sizeof(e->region), env_region, "region"},
        {&o[OO_CA_BUNDLE], e->ca_bundle, sizeof(e->ca_bundle), env_none, "ca_bundle"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        if (opt_or_env(e, s[i].v, s[i].out, s[i].cap, s[i].envs) != 0)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: option %s (or its environment variable) is longer than %zu "
                             "bytes",
                             s[i].name, s[i].cap - 1);
    if (e->region[0] == '\0')
        snprintf(e->region, sizeof(e->region), "us-east-1");
    for (const char *p = e->region; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: region '%s' is not a region name (a-z, 0-9, '-')", e->region);
    if ((e->access_key[0] != '\0') != (e->secret_key[0] != '\0'))
        return obj_error(e, IXL_ERR_INVALID_ARG,
                         "OBJ: %s is set but %s is not: give both (options access_key and "
                         "secret_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or "
                         "neither for anonymous requests",
                         e->access_key[0] ? "the access key" : "the secret key",
                         e->access_key[0] ? "the secret key" : "the access key");
    if (strchr(e->access_key, ':') || strchr(e->session_token, '\n') ||
        strchr(e->session_token, '\r'))
        return obj_error(e, IXL_ERR_INVALID_ARG,
                         "OBJ: access_key must not hold ':', session_token no line break");
    if (e->ca_bundle[0]) {
        /* Said at creation, not as a TLS error at the first request. */
        int fd = obj_sys()->open(e->ca_bundle, O_RDONLY | O_CLOEXEC, 0);
        if (fd < 0)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: ca_bundle '%s' cannot be read (%s): give a PEM file of the CA "
                             "certificates that sign the endpoint's certificate",
                             e->ca_bundle, strerror(errno));
        obj_sys()->close(fd);
    }
    snprintf(e->sigv4, sizeof(e->sigv4), "aws:amz:%s:s3", e->region);
    /* The endpoint: scheme://host[:port], no path. */
    snprintf(e->scheme, sizeof(e->scheme), "%s", o[OO_SCHEME].i == 1 ? "http" : "https");
    const char *hostp = endpoint;
    char *sep = strstr(endpoint, "://");
    if (sep) {
        *sep = '\0';
        if (strcmp(endpoint, "http") != 0 && strcmp(endpoint, "https") != 0)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: endpoint_override scheme '%s' is neither http nor https",
                             endpoint);
        snprintf(e->scheme, sizeof(e->scheme), "%s", endpoint[4] == 's' ? "https" : "http");
        hostp = sep + 3;
    }
    size_t hl = strlen(hostp);
    while (hl > 0 && hostp[hl - 1] == '/')
        hl--;
    if (hl == 0 && endpoint[0] == '\0' && sep == NULL)
        hl = (size_t)snprintf(e->host_part, sizeof(e->host_part), "s3.%s.amazonaws.com", e->region);
    else if (hl == 0 || hl >= sizeof(e->host_part) || memchr(hostp, '/', hl) ||
             memchr(hostp, '?', hl) || memchr(hostp, '@', hl))
        return obj_error(e, IXL_ERR_INVALID_ARG,
                         "OBJ: endpoint_override '%s' is not [scheme://]host[:port]", hostp);
    else
        snprintf(e->host_part, sizeof(e->host_part), "%.*s", (int)hl, hostp);
    for (const char *p = e->host_part; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: endpoint_override '%s' holds a blank or control character",
                             e->host_part);
    snprintf(e->endpoint, sizeof(e->endpoint), "%s://%s", e->scheme, e->host_part);
    e->virtual_addressing = o[OO_VIRTUAL].i != 0;
    e->req_checksum = o[OO_REQ_CHECKSUM].i == 0;
    e->resp_checksum = o[OO_RESP_CHECKSUM].i == 0;
    e->max_conns = (uint32_t)o[OO_MAX_CONNS].u;
    e->mpu_threshold = o[OO_MPU_THRESHOLD].u;
    e->part_size = o[OO_PART_SIZE].u;
    e->read_split = o[OO_READ_SPLIT].u;
    e->timeout_ms = (long)o[OO_TIMEOUT].u;
    e->max_retries = (uint32_t)o[OO_MAX_RETRIES].u;
    e->retry_base_ms = (long)o[OO_RETRY_BASE].u;
    return IXL_OK;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int obj_create(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    const struct ixl_host *h = init->host;
    if (h->size < offsetof(struct ixl_host, sys) + sizeof(h->sys) || h->sys == NULL ||
        h->sys->size < offsetof(struct ixl_sys, pthread_create) + sizeof(void *)) {
        h->error(h->ctx, IXL_ERR_PLUGIN, "the host has no system-call table (ixl_host.sys)");
        return IXL_ERR_PLUGIN;
    }
    __atomic_store_n(&obj_sys_ptr, h->sys, __ATOMIC_RELAXED);
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        h->error(h->ctx, IXL_ERR_BACKEND, "OBJ: curl_global_init failed: %s",
                 curl_easy_strerror(curl_init_rc));
        return IXL_ERR_BACKEND;
    }
    curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
    if (vi->version_num < 0x074b00) { /* CURLOPT_AWS_SIGV4: 7.75 */
        h->error(h->ctx, IXL_ERR_NOT_SUPPORTED,
                 "OBJ: libcurl %s cannot sign requests (CURLOPT_AWS_SIGV4 needs 7.75 or later)",
                 vi->version);
        return IXL_ERR_NOT_SUPPORTED;
    }
    struct obj_engine *e = obj_sys()->calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = h;
    int rc = parse_options(e, init);
    if (rc != IXL_OK)
        goto free_engine;
    e->rng = (uint64_t)obj_now_ms() ^ (uint64_t)(uintptr_t)e;
    pthread_mutex_init(&e->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    obj_dev_init(e);
    char why[256];
    rc = obj_loop_start(e, why, sizeof(why));
    if (rc != IXL_OK) {
        obj_error(e, rc, "OBJ: %s", why);
        goto destroy_lock;
    }
    if (e->access_key[0] == '\0')
        h->log(h->ctx, IXL_LOG_INFO,
               "OBJ: no credentials (access_key, AWS_ACCESS_KEY_ID): requests go unsigned");
    h->log(h->ctx, IXL_LOG_DEBUG, "OBJ: endpoint %s, region %s, bucket '%s', %s addressing",
           e->endpoint, e->region, e->bucket, e->virtual_addressing ? "virtual-hosted" : "path");
    e->base.size = sizeof(struct ixl_engine);
    e->base.caps = IXL_CAP_LOCAL;
    e->base.mem_mask = e->dev ? OBJ_MEMS_ALL : OBJ_MEMS;
    e->base.mem_why = e->mem_why; /* "" with a device */
    *out = &e->base;
    return IXL_OK;
destroy_lock:
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
free_engine:
    free(e->streams);
    free(e->stream_broken);
    free(e->stream_pending);
    free(e);
    return rc;
}

static void obj_destroy(struct ixl_engine *base)
{
    struct obj_engine *e = (struct obj_engine *)base;
    obj_loop_stop(e);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    free(e->streams);
    free(e->stream_broken);
    free(e->stream_pending);
    free(e);
}

/* ---- registration -----------------------------------------------------------------------------
 */

static void enc(char *out, size_t *o, const char *s, size_t n, bool keep_slash)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
            out[(*o)++] = (char)c;
        else
            *o += (size_t)sprintf(out + *o, "%%%02X", c);
    }
    out[*o] = '\0';
}

/* Bucket and key of a descriptor: bytes "s3://BUCKET/KEY", or bytes = KEY in the backend's
 * bucket, or no bytes: the decimal dev (NIXL's rule). */
static int parse_name(struct obj_engine *e, const struct ixl_reg_desc *d, char *bucket, char *key)
{
    const char *b = d->bytes;
    size_t n = d->bytes_len;
    if (n > 0 && memchr(b, '\0', n))
        n = strnlen(b, n);
    bucket[0] = '\0';
    if (n >= 5 && memcmp(b, "s3://", 5) == 0) {
        const char *slash = memchr(b + 5, '/', n - 5);
        size_t bl = slash ? (size_t)(slash - b - 5) : n - 5;
        if (slash == NULL || bl < 3 || bl >= OBJ_BUCKET_MAX)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: '%.*s' is not s3://BUCKET/KEY (a bucket of 3..63 "
                             "characters, then '/', then the key)",
                             (int)(n > 200 ? 200 : n), b);
        memcpy(bucket, b + 5, bl);
        bucket[bl] = '\0';
        b = slash + 1;
        n -= 5 + bl + 1;
    }
    if (n == 0 && d->bytes_len == 0) {
        n = (size_t)snprintf(key, OBJ_KEY_MAX + 1, "%" PRIu64, d->dev);
    } else {
        if (n == 0 || n > OBJ_KEY_MAX)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: an object key has 1..%d bytes (this one %zu)", OBJ_KEY_MAX, n);
        memcpy(key, b, n);
        key[n] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: object key '%s' holds a control character", key);
    if (bucket[0] == '\0') {
        if (e->bucket[0] == '\0')
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: no bucket for object '%s': set option bucket (or "
                             "AWS_DEFAULT_BUCKET), or register \"s3://BUCKET/%s\"",
                             key, key);
        snprintf(bucket, OBJ_BUCKET_MAX, "%s", e->bucket);
    }
    for (const char *p = bucket; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.' || *p == '_'))
            return obj_error(e, IXL_ERR_INVALID_ARG, "OBJ: '%s' is not a bucket name", bucket);
    return IXL_OK;
}

/* The URL of bucket/key, encoded; malloc'd. */
static char *object_url(const struct obj_engine *e, const char *bucket, const char *key)
{
    size_t cap = strlen(e->endpoint) + strlen(bucket) + 3 * strlen(key) + 8;
    char *u = obj_sys()->malloc(cap);
    if (u == NULL)
        return NULL;
    size_t o;
    if (e->virtual_addressing)
        o = (size_t)sprintf(u, "%s://%s.%s/", e->scheme, bucket, e->host_part);
    else
        o = (size_t)sprintf(u, "%s/%s/", e->endpoint, bucket);
    enc(u, &o, key, strlen(key), true);
    return u;
}

static int make_obj_md(struct obj_engine *e, const struct ixl_reg_desc *d, struct obj_md *m)
{
    char key[OBJ_KEY_MAX + 1];
    int rc = parse_name(e, d, m->bucket, key);
    if (rc != IXL_OK)
        return rc;
    m->key = obj_sys()->strdup(key);
    m->url = m->key ? object_url(e, m->bucket, key) : NULL;
    if (m->url == NULL) {
        free(m->key);
        m->key = NULL;
        return IXL_ERR_NO_MEMORY;
    }
    return IXL_OK;
}

static int obj_register(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *d,
                        struct ixl_md **out)
{
    struct obj_engine *e = (struct obj_engine *)base;
    if (type == IXL_MEM_VRAM && e->dev == NULL)
        return obj_error(e, IXL_ERR_BAD_MEM_TYPE, "OBJ cannot register VRAM here: %s", e->mem_why);
    if (!(OBJ_MEMS_ALL & IXL_MEM_BIT(type)))
        return obj_error(e, IXL_ERR_BAD_MEM_TYPE, "OBJ registers DRAM, VRAM and OBJ only");
    int ordinal = -1;
    if (type == IXL_MEM_VRAM) {
        struct ixl_dev_ptr p = {.size = sizeof(p)};
        char why[256] = "";
        int rc = e->dev->classify(e->dev->ctx, (const void *)(uintptr_t)d->addr, (size_t)d->len, &p,
                                  why, sizeof(why));
        if (rc != IXL_OK)
            return obj_error(e, rc, "OBJ: VRAM region 0x%" PRIx64 "+%" PRIu64 ": %s", d->addr,
                             d->len, why[0] ? why : "the device layer cannot classify it");
        if (p.ordinal < 0)
            return obj_error(e, IXL_ERR_INVALID_ARG,
                             "OBJ: VRAM region 0x%" PRIx64 "+%" PRIu64
                             " is not device memory (register host memory as DRAM)",
                             d->addr, d->len);
        ordinal = p.ordinal;
    }
    struct obj_md *m = obj_sys()->calloc(1, sizeof(*m));
    if (m == NULL)
        return IXL_ERR_NO_MEMORY;
    m->type = type;
    m->addr = d->addr;
    m->len = d->len;
    m->ordinal = ordinal;
    if (type == IXL_MEM_OBJ) {
        int rc = make_obj_md(e, d, m);
        if (rc != IXL_OK) {
            free(m);
            return rc;
        }
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int obj_deregister(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    struct obj_md *m = (struct obj_md *)md;
    free(m->key);
    free(m->url);
    free(m);
    return IXL_OK;
}

static int obj_load_local(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    (void)base;
    *out = md;
    return IXL_OK;
}

static int obj_unload(struct ixl_engine *base, struct ixl_md *md)
{
    (void)base;
    (void)md;
    return IXL_OK;
}

static int obj_connect(struct ixl_engine *base, const char *agent)
{
    (void)base;
    (void)agent;
    return IXL_OK;
}

/* ---- query_mem: HEAD each object, in parallel ---------------------------------------------------
 */

static int obj_query(struct ixl_engine *base, enum ixl_mem type, const struct ixl_reg_desc *descs,
                     size_t n, struct ixl_mem_query *out)
{
    struct obj_engine *e = (struct obj_engine *)base;
    if (type != IXL_MEM_OBJ)
        return obj_error(e, IXL_ERR_BAD_MEM_TYPE, "OBJ answers queries about OBJ only");
    if (n == 0)
        return IXL_OK;
    struct obj_md *mds = obj_sys()->calloc(n, sizeof(*mds));
    struct obj_op *ops = obj_sys()->calloc(n, sizeof(*ops));
    int rc = mds && ops ? IXL_OK : IXL_ERR_NO_MEMORY;
    size_t made = 0;
    for (; rc == IXL_OK && made < n; made++)
        rc = make_obj_md(e, &descs[made], &mds[made]);
    if (rc != IXL_OK) {
        if (made > 0)
            made--; /* the failed one holds nothing */
        goto free_mds;
    }
    struct obj_waiter w = {.left = (uint32_t)n, .status = IXL_OK};
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < n; i++) {
        ops[i].kind = OP_HEAD;
        ops[i].obj = &mds[i];
        ops[i].w = &w;
        obj_enqueue(e, &ops[i]);
    }
    obj_wake(e);
    while (w.left > 0)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
    if (w.status != IXL_OK) {
        rc = obj_error(e, w.status, "%s", w.msg);
        goto free_mds;
    }
    for (size_t i = 0; i < n; i++) {
        out[i].exists = ops[i].http == 200;
        out[i].size = ops[i].http == 200 ? ops[i].content_length : 0;
    }
free_mds:
    for (size_t i = 0; mds && i < made; i++) {
        free(mds[i].key);
        free(mds[i].url);
    }
    free(mds);
    free(ops);
    return rc;
}

/* ---- requests -----------------------------------------------------------------------------------
 */

/* Whether a WRITE of len bytes goes by multipart upload: when it is larger than mpu_threshold
 * (as the AWS CRT's multipart_upload_threshold, aws-sdk-cpp's and Java's TransferManager; boto3
 * counts its threshold in) and than part_size: a multipart upload of one part would cost two
 * more requests (and, on a server that assembles parts by copying them, a second pass over the
 * bytes) for no parallelism. README.md, "Multipart threshold", says why. */
static bool use_mpu(const struct obj_engine *e, uint64_t len)
{
    return len > e->mpu_threshold && len > e->part_size;
}

/* A VRAM descriptor's op: buf is a device address, moved through a bounce buffer. */
static void obj_op_vram(struct obj_op *o, const struct obj_md *mem)
{
    if (o->kind != OP_GET && o->kind != OP_PUT && o->kind != OP_MPU_PART)
        return;
    o->vram = true;
    o->ord = mem ? mem->ordinal : 0;
    o->dev_buf = o->buf;
    o->buf = NULL;
}

static int obj_prep(struct ixl_engine *base, enum ixl_op op, const struct ixl_xfer_side *local,
                    const struct ixl_xfer_side *remote, const char *remote_agent,
                    const struct ixl_xfer_opts *opts, struct ixl_req **out)
{
    struct obj_engine *e = (struct obj_engine *)base;
    (void)remote_agent;
    if (opts && opts->notif)
        return obj_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                         "storage backends do not support notifications: omit the notification");
    bool lobj = local->type == IXL_MEM_OBJ, robj = remote->type == IXL_MEM_OBJ;
    enum ixl_mem mem_type = lobj ? remote->type : local->type;
    if (lobj == robj || (mem_type != IXL_MEM_DRAM && mem_type != IXL_MEM_VRAM))
        return obj_error(e, IXL_ERR_BAD_MEM_TYPE,
                         "OBJ moves data between DRAM or VRAM and OBJ, not %s to %s",
                         lobj                       ? "OBJ"
                         : mem_type == IXL_MEM_DRAM ? "DRAM"
                                                    : "this memory",
                         robj ? "OBJ" : "memory");
    bool vram = mem_type == IXL_MEM_VRAM;
    if (vram && e->dev == NULL)
        return obj_error(e, IXL_ERR_BAD_MEM_TYPE, "OBJ cannot move VRAM here: %s", e->mem_why);
    const struct ixl_xfer_desc *mem = lobj ? remote->descs : local->descs;
    const struct ixl_xfer_desc *obj = lobj ? local->descs : remote->descs;
    bool to_obj = (op == IXL_OP_WRITE) == robj;
    size_t n = local->count;
    /* The plan: how many ops and uploads. */
    size_t n_ops = 0, n_ups = 0;
    for (size_t i = 0; i < n; i++) {
        const struct obj_md *m = (const struct obj_md *)obj[i].md;
        if (m == NULL || m->type != IXL_MEM_OBJ || m->url == NULL)
            return obj_error(e, IXL_ERR_INVALID_ARG, "OBJ: descriptor %zu has no object metadata",
                             i);
        uint64_t len = obj[i].len;
        if (to_obj) {
            if (obj[i].addr != 0)
                return obj_error(
                    e, IXL_ERR_NOT_SUPPORTED,
                    "OBJ: WRITE descriptor %zu writes at offset %" PRIu64 " of object '%s': S3 "
                    "cannot change part of an object (a PUT replaces it whole), so a WRITE "
                    "starts at offset 0 and covers the whole object; write the whole object, "
                    "or give each block its own object",
                    i, obj[i].addr, m->key);
            if (m->len != 0 && len != m->len)
                return obj_error(
                    e, IXL_ERR_NOT_SUPPORTED,
                    "OBJ: WRITE descriptor %zu writes %" PRIu64 " bytes of object '%s', "
                    "registered as %" PRIu64 " bytes: a PUT replaces the whole object, so a "
                    "partial WRITE would cut it; write all %" PRIu64 " bytes, or register the "
                    "object with length 0",
                    i, len, m->key, m->len, m->len);
            if (use_mpu(e, len)) {
                uint64_t parts = (len + e->part_size - 1) / e->part_size;
                if (parts > 10000)
                    return obj_error(e, IXL_ERR_TOO_LARGE,
                                     "OBJ: WRITE descriptor %zu (%" PRIu64 " bytes) needs %" PRIu64
                                     " parts of part_size %" PRIu64
                                     "; S3 allows 10000: raise part_size",
                                     i, len, parts, e->part_size);
                n_ops += 2 + parts;
                n_ups++;
            } else {
                n_ops++;
            }
        } else {
            n_ops += (len + e->read_split - 1) / e->read_split;
        }
    }
    struct obj_req *r = obj_sys()->calloc(1, sizeof(*r));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    r->ops = obj_sys()->calloc(n_ops, sizeof(*r->ops));
    r->ups = n_ups ? obj_sys()->calloc(n_ups, sizeof(*r->ups)) : NULL;
    if (r->ops == NULL || (n_ups && r->ups == NULL))
        goto no_memory;
    r->e = e;
    r->to_obj = to_obj;
    r->n = n;
    r->mem = mem;
    r->obj = obj;
    r->n_ops = n_ops;
    r->n_ups = n_ups;
    atomic_init(&r->state, OBJ_IDLE);
    size_t k = 0, u = 0;
    for (size_t i = 0; i < n; i++) {
        const struct obj_md *m = (const struct obj_md *)obj[i].md;
        uint8_t *buf = (uint8_t *)(uintptr_t)mem[i].addr;
        uint64_t len = obj[i].len;
        size_t k_first = k;
        if (!to_obj) {
            for (uint64_t off = 0; off < len; off += e->read_split) {
                struct obj_op *o = &r->ops[k++];
                o->kind = OP_GET;
                o->r = r;
                o->obj = m;
                o->buf = buf + off;
                o->off = obj[i].addr + off;
                o->len = len - off < e->read_split ? len - off : e->read_split;
            }
        } else if (!use_mpu(e, len)) {
            struct obj_op *o = &r->ops[k++];
            o->kind = OP_PUT;
            o->r = r;
            o->obj = m;
            o->buf = buf;
            o->len = len;
        } else {
            struct obj_upload *up = &r->ups[u++];
            uint32_t parts = (uint32_t)((len + e->part_size - 1) / e->part_size);
            up->n_parts = parts;
            up->etags = obj_sys()->calloc(parts, sizeof(*up->etags));
            up->crcs = obj_sys()->calloc(parts, sizeof(*up->crcs));
            if (up->etags == NULL || up->crcs == NULL)
                goto no_memory;
            up->create = &r->ops[k++];
            up->parts = &r->ops[k];
            k += parts;
            up->complete = &r->ops[k++];
            up->create->kind = OP_MPU_CREATE;
            /* Its own URL: a create released in flight outlives the registration. */
            up->create->own_url = obj_sys()->strdup(m->url);
            if (up->create->own_url == NULL)
                goto no_memory;
            up->complete->kind = OP_MPU_COMPLETE;
            for (uint32_t p = 0; p < parts; p++) {
                struct obj_op *o = &up->parts[p];
                uint64_t off = (uint64_t)p * e->part_size;
                o->kind = OP_MPU_PART;
                o->part = p + 1;
                o->buf = buf + off;
                o->len = len - off < e->part_size ? len - off : e->part_size;
            }
            for (struct obj_op *o = up->create; o <= up->complete; o++) {
                o->r = r;
                o->obj = m;
                o->up = up;
            }
        }
        for (size_t j = k_first; vram && j < k; j++) /* device addresses: staged */
            obj_op_vram(&r->ops[j], (const struct obj_md *)mem[i].md);
    }
    *out = (struct ixl_req *)r;
    return IXL_OK;
no_memory:
    if (r->ops == NULL)
        r->n_ops = 0;
    if (r->ups == NULL)
        r->n_ups = 0;
    obj_req_free(r);
    return IXL_ERR_NO_MEMORY;
}

static int obj_post(struct ixl_engine *base, struct ixl_req *req, const struct ixl_xfer_opts *opts)
{
    struct obj_engine *e = (struct obj_engine *)base;
    struct obj_req *r = (struct obj_req *)req;
    if (opts && opts->notif)
        return obj_error(e, IXL_ERR_NOTIF_UNSUPPORTED,
                         "storage backends do not support notifications: omit the notification");
    pthread_mutex_lock(&e->lock);
    r->status = IXL_OK;
    r->reported = false;
    r->canceled = false;
    r->msg[0] = '\0';
    r->bytes = 0;
    r->pending = 0;
    atomic_store(&r->state, OBJ_RUNNING);
    for (size_t i = 0; i < r->n_ups; i++) {
        struct obj_upload *up = &r->ups[i];
        up->started = up->finished = false;
        up->upload_id[0] = '\0';
    }
    for (size_t i = 0; i < r->n_ops; i++) {
        struct obj_op *o = &r->ops[i];
        o->state = OPS_IDLE;
        o->tries = 0;
        if (o->vram) { /* the VRAM may hold other bytes now */
            free(o->bounce);
            o->bounce = NULL;
            o->buf = NULL;
            o->staged = false;
        }
        /* Multipart parts and completions start when their upload exists / parts are in. */
        if (o->kind == OP_MPU_PART || o->kind == OP_MPU_COMPLETE)
            continue;
        obj_enqueue(e, o);
        r->pending++;
    }
    pthread_mutex_unlock(&e->lock);
    obj_wake(e);
    return IXL_IN_PROGRESS;
}

static int obj_check(struct ixl_engine *base, struct ixl_req *req)
{
    struct obj_engine *e = (struct obj_engine *)base;
    struct obj_req *r = (struct obj_req *)req;
    switch (atomic_load(&r->state)) {
    case OBJ_DONE:
        return IXL_OK;
    case OBJ_FAILED: {
        pthread_mutex_lock(&e->lock);
        int status = r->status;
        if (!r->reported) {
            r->reported = true;
            obj_error(e, status, "%s", r->msg);
        }
        pthread_mutex_unlock(&e->lock);
        return status;
    }
    case OBJ_RUNNING:
        return IXL_IN_PROGRESS;
    default:
        return IXL_ERR_NOT_POSTED;
    }
}

/* r's CreateMultipartUploads in the multi (e->lock held). */
static uint32_t active_creates(const struct obj_req *r)
{
    uint32_t n = 0;
    for (size_t i = 0; i < r->n_ups; i++)
        n += r->ups[i].create->state == OPS_ACTIVE;
    return n;
}

static int obj_release(struct ixl_engine *base, struct ixl_req *req)
{
    struct obj_engine *e = (struct obj_engine *)base;
    struct obj_req *r = (struct obj_req *)req;
    pthread_mutex_lock(&e->lock);
    r->canceled = true;
    r->pending -= obj_dequeue_req(e, r);
    if (r->active > active_creates(r)) {
        /* The loop takes the request's easy handles out of the multi and says so: after that
         * no callback writes into the request's buffers. Bounded: the loop never blocks. */
        e->cancel_pending = true;
        obj_wake(e);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 5;
        while (r->active > active_creates(r)) {
            if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) != 0 &&
                r->active > active_creates(r)) {
                if (r->status == IXL_OK) {
                    r->status = IXL_ERR_CANCELED;
                    snprintf(r->msg, sizeof(r->msg), "the request was canceled");
                }
                pthread_mutex_unlock(&e->lock);
                return obj_error(e, IXL_ERR_BUSY,
                                 "OBJ: %u HTTP request(s) of the request are still in flight: "
                                 "release again",
                                 r->active);
            }
        }
    }
    /* Uploads created and not completed: aborted by the engine after the request is gone. */
    for (size_t i = 0; i < r->n_ups; i++) {
        struct obj_upload *up = &r->ups[i];
        if (up->started && !up->finished)
            obj_abort_upload(e, up->create->obj->url, up->create->obj->key, up->upload_id);
    }
    /* A CreateMultipartUpload still in flight may create an upload: the loop keeps the
     * request (a zombie, touching none of the caller's buffers or registrations) until its
     * answer, and aborts the upload it names (obj_loop.c, zombie_create_end). */
    bool zombie = false;
    for (size_t i = 0; i < r->n_ups; i++) {
        /* Such a create reads only its own URL (own_url), none of the registration. */
        zombie |= r->ups[i].create->state == OPS_ACTIVE;
    }
    if (zombie) {
        r->zombie = true;
        r->mem = r->obj = NULL;
        pthread_mutex_unlock(&e->lock);
        return IXL_OK;
    }
    pthread_mutex_unlock(&e->lock);
    obj_req_free(r);
    return IXL_OK;
}

static int obj_req_info(struct ixl_engine *base, struct ixl_req *req, struct ixl_req_info *out)
{
    (void)base;
    struct obj_req *r = (struct obj_req *)req;
    snprintf(out->path, sizeof(out->path), "%s", r->n_ups ? "s3-multipart" : "s3");
    return IXL_OK;
}

static const struct ixl_engine_ops obj_engine_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = obj_connect,
    .register_mem = obj_register,
    .deregister_mem = obj_deregister,
    .load_local_md = obj_load_local,
    .unload_md = obj_unload,
    .prep_xfer = obj_prep,
    .post_xfer = obj_post,
    .check_xfer = obj_check,
    .release_req = obj_release,
    .query_mem = obj_query,
    .req_info = obj_req_info,
};

static const struct ixl_plugin_desc obj_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "OBJ",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL,
    .mem_mask = OBJ_MEMS_ALL,
    .options = obj_options,
    .n_options = OO_COUNT,
    .create_engine = obj_create,
    .destroy_engine = obj_destroy,
    .ops = &obj_engine_ops,
};

static const struct ixl_plugin_desc *obj_entry(void)
{
    return &obj_desc;
}

IXL_PLUGIN_EXPORT(obj_entry)

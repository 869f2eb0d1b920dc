/* ixlbench helpers: clock, sizes, the data pattern, statistics, the metadata file, agents,
 * control messages. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ixlbench.h"

#define MD_MAGIC "IXLBENCH-MD 1"
#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t ixb_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ixl_status ixb_wait(const struct ixb_opts *o, struct ixl_xfer *x, int timeout_ms)
{
    if (!o->poll)
        return ixl_xfer_wait(x, timeout_ms);
    uint64_t end = ixb_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (unsigned i = 0;; i++) {
        ixl_status st = ixl_xfer_status(x);
        if (st != IXL_IN_PROGRESS)
            return st;
        if ((i & 1023) == 1023 && ixb_now_ns() >= end)
            return IXL_ERR_TIMEOUT;
    }
}

/* The rule of every ixl size (ixl_option_parse, the parser of backend options): a decimal
 * number, or one with K, M, G, T (KiB, ...; powers of 1024). */
int ixb_parse_size(const char *s, uint64_t *out)
{
    static const struct ixl_option size = {
        .name = "size", .default_value = "0", .description = "a size", .type = IXL_OPT_SIZE};
    struct ixl_opt_value v;
    char norm[IXL_OPTION_NORM_MAX];

    if (ixl_option_parse(&size, s, &v, norm, sizeof(norm)) != IXL_OK)
        return -1;
    *out = v.u;
    return 0;
}

const char *ixb_size_str(uint64_t v, char *buf, size_t len)
{
    if (v >= (1ull << 30) && v % (1ull << 30) == 0)
        snprintf(buf, len, "%" PRIu64 " GiB", v >> 30);
    else if (v >= (1ull << 20) && v % (1ull << 20) == 0)
        snprintf(buf, len, "%" PRIu64 " MiB", v >> 20);
    else if (v >= (1ull << 10) && v % (1ull << 10) == 0)
        snprintf(buf, len, "%" PRIu64 " KiB", v >> 10);
    else
        snprintf(buf, len, "%" PRIu64 " B", v);
    return buf;
}

/* Word k of the pattern of seed. The seed is spread by a multiply so that two seeds differ in
 * every word, and the index by another so that a block copied to the wrong place shows. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t k)
{
    return (k + 1) * GOLDEN ^ (seed * 0xD6E8FEB86659FD93ull + 0x632BE59BD9B4E019ull);
}

uint8_t ixb_pattern_byte(uint64_t seed, uint64_t off)
{
    uint64_t w = pattern_word(seed, off >> 3);

    return (uint8_t)(w >> (8 * (off & 7)));
}

void ixb_fill(void *buf, size_t len, uint64_t seed, uint64_t off)
{
    uint8_t *p = buf;
    size_t i = 0;

    while (i < len && ((off + i) & 7) != 0) {
        p[i] = ixb_pattern_byte(seed, off + i);
        i++;
    }
    uint64_t k = (off + i) >> 3;
    for (; i + 8 <= len; i += 8, k++) {
        uint64_t w = pattern_word(seed, k);
        memcpy(p + i, &w, 8); /* the byte order of ixb_pattern_byte: little-endian hosts */
    }
    for (; i < len; i++)
        p[i] = ixb_pattern_byte(seed, off + i);
}

int64_t ixb_verify(const void *buf, size_t len, uint64_t seed, uint64_t off)
{
    const uint8_t *p = buf;
    size_t i = 0;

    while (i < len && ((off + i) & 7) != 0) {
        if (p[i] != ixb_pattern_byte(seed, off + i))
            return (int64_t)i;
        i++;
    }
    uint64_t k = (off + i) >> 3;
    for (; i + 8 <= len; i += 8, k++) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != pattern_word(seed, k)) {
            for (size_t j = i; j < i + 8; j++)
                if (p[j] != ixb_pattern_byte(seed, off + j))
                    return (int64_t)j;
        }
    }
    for (; i < len; i++)
        if (p[i] != ixb_pattern_byte(seed, off + i))
            return (int64_t)i;
    return -1;
}

int64_t ixb_verify_byte(const void *buf, size_t len, uint8_t b)
{
    const uint8_t *p = buf;
    uint64_t w;
    size_t i = 0;

    memset(&w, b, sizeof(w));
    for (; i + 8 <= len; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v != w)
            break;
    }
    for (; i < len; i++)
        if (p[i] != b)
            return (int64_t)i;
    return -1;
}

void *ixb_map(size_t len)
{
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

void ixb_unmap(void *p, size_t len)
{
    if (p != NULL)
        munmap(p, len ? len : 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static double rank(const double *s, size_t n, double pct)
{
    size_t r = (size_t)((pct / 100.0) * (double)n + 0.999999);

    if (r < 1)
        r = 1;
    if (r > n)
        r = n;
    return s[r - 1];
}

void ixb_summarize(double *samples_us, size_t n, struct ixb_summ *out)
{
    double sum = 0;

    memset(out, 0, sizeof(*out));
    if (n == 0)
        return;
    qsort(samples_us, n, sizeof(*samples_us), cmp_double);
    for (size_t i = 0; i < n; i++)
        sum += samples_us[i];
    out->n = n;
    out->avg = sum / (double)n;
    out->p50 = rank(samples_us, n, 50);
    out->p99 = rank(samples_us, n, 99);
    out->max = samples_us[n - 1];
}

const char *ixb_boot_id(void)
{
    static char id[64];

    if (id[0] == '\0') {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f == NULL || fgets(id, sizeof(id), f) == NULL)
            snprintf(id, sizeof(id), "unknown");
        if (f != NULL)
            fclose(f);
        id[strcspn(id, "\n")] = '\0';
    }
    return id;
}

int ixb_md_write(const char *path, const char *agent, const void *md, size_t len)
{
    char tmp[4096];
    FILE *f;
    int ok;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "ixlbench: metadata file name too long: %s\n", path);
        return -1;
    }
    f = fopen(tmp, "wb");
    if (f == NULL) {
        fprintf(stderr, "ixlbench: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    ok = fprintf(f, "%s\nagent %s\npid %ld\nmd %zu\n", MD_MAGIC, agent, (long)getpid(), len) > 0 &&
         fwrite(md, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "ixlbench: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ixb_md_read(const char *path, void **md, size_t *len)
{
    char line[512];
    size_t n = 0;
    void *buf;
    FILE *f = fopen(path, "rb");
    int ok = 0;

    if (f == NULL)
        return -1;
    if (fgets(line, sizeof(line), f) != NULL && strncmp(line, MD_MAGIC, strlen(MD_MAGIC)) == 0) {
        while (fgets(line, sizeof(line), f) != NULL) {
            if (sscanf(line, "md %zu", &n) == 1) {
                ok = 1;
                break;
            }
        }
    }
    if (!ok || n == 0 || n > (64u << 20)) {
        fclose(f);
        fprintf(stderr, "ixlbench: %s is not an ixlbench metadata file\n", path);
        return -2;
    }
    buf = malloc(n);
    if (buf == NULL || fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        fprintf(stderr, "ixlbench: %s is truncated\n", path);
        return -2;
    }
    fclose(f);
    *md = buf;
    *len = n;
    return 0;
}

int ixb_agent_make(const char *name, const char *backend, const struct ixl_kv *opts, size_t n,
                   struct ixl_agent **agent, struct ixl_backend **be)
{
    struct ixl_agent_params p = {
        .field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_NOTIF_MAX,
        .backends = "",
        .notif_max = IXB_NOTIF_MAX,
    };
    struct ixl_agent *a = NULL;
    if (ixb_listen_port >= 0) {
        p.field_mask |= IXL_AGENT_F_LISTEN_PORT | IXL_AGENT_F_LISTEN_ADDR;
        p.listen_port = (uint16_t)ixb_listen_port;
        p.listen_addr = ixb_listen_addr;
    }
    if (ixb_etcd != NULL) {
        p.field_mask |= IXL_AGENT_F_ETCD;
        p.etcd_endpoints = ixb_etcd;
    }
    ixl_status st = ixl_agent_create(name, &p, &a);

    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_agent_create(%s): %s\n", name, ixl_strerror(st));
        return 1;
    }
    st = ixl_backend_create(a, backend, opts, n, be);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: %s: backend %s: %s: %s\n", name, backend, ixl_strerror(st),
                ixl_agent_last_error(a));
        ixl_agent_destroy(a);
        return st == IXL_ERR_NOT_FOUND ? IXB_EXIT_SKIP : 1;
    }
    *agent = a;
    return 0;
}

int ixb_msg_parse(const void *msg, size_t len, struct ixb_msg *out)
{
    const char *m = msg;
    const char *nl = memchr(m, '\n', len);
    size_t ll = nl ? (size_t)(nl - m) : len;
    char *save = NULL;

    if (ll >= sizeof(out->line))
        return -1;
    memcpy(out->line, m, ll);
    out->line[ll] = '\0';
    out->payload = nl ? (const uint8_t *)nl + 1 : NULL;
    out->payload_len = nl ? len - ll - 1 : 0;
    out->argc = 0;
    for (char *t = strtok_r(out->line, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
        if (out->argc == (int)(sizeof(out->argv) / sizeof(out->argv[0])))
            return -1;
        out->argv[out->argc++] = t;
    }
    return out->argc > 0 ? 0 : -1;
}

int ixb_pack2(const void *a, size_t alen, const void *b, size_t blen, void **out, size_t *len)
{
    uint64_t la = alen, lb = blen;
    size_t n = 16 + alen + blen;
    uint8_t *p = malloc(n);

    if (p == NULL)
        return -1;
    memcpy(p, &la, 8);
    memcpy(p + 8, a, alen);
    memcpy(p + 8 + alen, &lb, 8);
    memcpy(p + 16 + alen, b, blen);
    *out = p;
    *len = n;
    return 0;
}

int ixb_unpack2(const uint8_t *p, size_t len, const uint8_t **a, size_t *alen, const uint8_t **b,
                size_t *blen)
{
    uint64_t la, lb;

    if (p == NULL || len < 16)
        return -1;
    memcpy(&la, p, 8);
    if (la > len - 16)
        return -1;
    memcpy(&lb, p + 8 + la, 8);
    if (lb != len - 16 - la)
        return -1;
    *a = p + 8;
    *alen = (size_t)la;
    *b = p + 16 + la;
    *blen = (size_t)lb;
    return 0;
}

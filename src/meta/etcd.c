/*
 * etcd v3 client over the JSON gateway (see etcd.h for the key layout and the guarantees).
 *
 * The pure helpers (head format, crc32c, base64, key and stream parsing) come first and are
 * always built: they are what the fuzz target drives. The client needs libcurl and jansson
 * (IXL_HAVE_ETCD, set by CMake's IXL_WITH_ETCD switch, on by default); a build configured with
 * -DIXL_WITH_ETCD=OFF gets stubs that return IXL_ERR_NOT_SUPPORTED.
 *
 * Threads: callers' threads make requests with easy handles from a small pool (connection
 * reuse without a handle per call); the keep-alive thread takes one from the same pool; the
 * watch thread has its own easy handle inside a multi handle, so that close can interrupt its
 * streaming request at once with curl_multi_wakeup().
 *
 * Locks: c->mu guards the pool, the lease, the callback and the stop flag; c->lease_mu
 * serializes re-granting a lost lease (taken before c->mu, never the other way). Neither is
 * held across a callback; c->mu is never held across a request.
 */
#include "meta/etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl_types.h>

#include "util/log.h"
#include "util/sys.h"

/* ------------------------------------------------------------------------------------------ */
/* Pure helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t ixl_etcd_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void ixl_etcd_b64_encode(const void *p, size_t n, char *out)
{
    const unsigned char *b = p;
    size_t i = 0, o = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        out[o++] = b64_chars[v >> 18];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = b64_chars[(v >> 6) & 63];
        out[o++] = b64_chars[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)b[i] << 16;
        out[o++] = b64_chars[v >> 18];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8;
        out[o++] = b64_chars[v >> 18];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = b64_chars[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

long ixl_etcd_b64_decode(const char *s, size_t slen, void *out)
{
    unsigned char *o = out;
    size_t olen = 0;
    if (slen % 4 != 0 || slen / 4 * 3 > (size_t)LONG_MAX)
        return -1;
    for (size_t i = 0; i < slen; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char ch = (unsigned char)s[i + k];
            if (ch == '=' && i + 4 == slen && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad > 0) /* a character after '=' */
                return -1;
            v[k] = b64_val(ch);
            if (v[k] < 0)
                return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | v[3];
        if ((pad == 1 && (w & 0xff) != 0) || (pad == 2 && (w & 0xffff) != 0))
            return -1; /* non-canonical: unused bits set */
        o[olen++] = (unsigned char)(w >> 16);
        if (pad < 2)
            o[olen++] = (unsigned char)(w >> 8);
        if (pad < 1)
            o[olen++] = (unsigned char)w;
    }
    return (long)olen;
}

/* Reads a field "<name>=<digits>" at *pos of s; base 10 or 16; at most maxd digits; value at
 * most max. Advances *pos past the digits. */
static int head_field(const char *s, size_t slen, size_t *pos, const char *name, int base,
                      unsigned maxd, uint64_t max, uint64_t *out)
{
    size_t nl = strlen(name);
    if (slen - *pos < nl + 2 || memcmp(s + *pos, name, nl) != 0 || s[*pos + nl] != '=')
        return -1;
    size_t p = *pos + nl + 1;
    uint64_t v = 0;
    unsigned nd = 0;
    while (p < slen && s[p] != ' ') {
        char ch = s[p];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (base == 16 && ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (base == 16 && ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            return -1;
        if (++nd > maxd)
            return -1;
        v = v * (unsigned)base + d; /* no overflow: maxd digits fit in 64 bits */
        p++;
    }
    if (nd == 0 || v > max)
        return -1;
    *out = v;
    *pos = p;
    return 0;
}

int ixl_etcd_head_parse(const char *s, size_t slen, struct ixl_etcd_head *h)
{
    static const struct {
        const char *name;
        int base;
        unsigned maxd;
        uint64_t max;
    } f[5] = {
        {"v", 16, 16, UINT64_MAX},          {"n", 10, 10, IXL_ETCD_MAX_CHUNKS},
        {"len", 10, 19, IXL_ETCD_MAX_BLOB}, {"crc", 16, 8, UINT32_MAX},
        {"inc", 16, 16, UINT64_MAX},
    };
    uint64_t v[5];
    size_t pos = 0;
    if (s == NULL)
        return -1;
    for (int i = 0; i < 5; i++) {
        if (i > 0) {
            if (pos >= slen || s[pos] != ' ')
                return -1;
            pos++;
        }
        if (head_field(s, slen, &pos, f[i].name, f[i].base, f[i].maxd, f[i].max, &v[i]) != 0)
            return -1;
    }
    if (pos != slen)
        return -1;
    if ((v[1] == 0) != (v[2] == 0) || v[1] > v[2])
        return -1;
    struct ixl_etcd_head r = {
        .ver = v[0], .n = (uint32_t)v[1], .len = v[2], .crc = (uint32_t)v[3], .inc = v[4]};
    *h = r;
    return 0;
}

size_t ixl_etcd_head_format(const struct ixl_etcd_head *h, char *buf, size_t cap)
{
    int n = snprintf(
        buf, cap, "v=%016" PRIx64 " n=%" PRIu32 " len=%" PRIu64 " crc=%08" PRIx32 " inc=%" PRIx64,
        h->ver, h->n, h->len, h->crc, h->inc);
    return n < 0 ? 0 : (size_t)n;
}

static bool seg_char(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

/* An upper-case hex digit (what enc_agent writes: one encoding per name). */
static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int ixl_etcd_head_key_parse(const char *key, size_t klen, char *agent, char *label)
{
    size_t p = 0, a = 0;
    while (p < klen && key[p] != '/') {
        unsigned char ch = (unsigned char)key[p];
        if (ch == '%') {
            if (klen - p < 3 || hexval((unsigned char)key[p + 1]) < 0 ||
                hexval((unsigned char)key[p + 2]) < 0)
                return -1;
            ch = (unsigned char)(hexval((unsigned char)key[p + 1]) << 4 |
                                 hexval((unsigned char)key[p + 2]));
            if (ch == '\0' || seg_char(ch))
                return -1; /* canonical encoding only */
            p += 3;
        } else if (seg_char(ch)) {
            p++;
        } else {
            return -1;
        }
        if (a + 1 >= IXL_NAME_MAX)
            return -1;
        agent[a++] = (char)ch;
    }
    if (a == 0 || p >= klen)
        return -1;
    p++; /* '/' */
    if (klen - p == 1 && key[p] == 'f') {
        agent[a] = '\0';
        label[0] = '\0';
        return 0;
    }
    if (klen - p < 3 || key[p] != 'l' || key[p + 1] != '/' || klen - p - 2 > 63)
        return -1;
    for (size_t i = p + 2; i < klen; i++)
        if (!seg_char((unsigned char)key[i]))
            return -1;
    agent[a] = '\0';
    memcpy(label, key + p + 2, klen - p - 2);
    label[klen - p - 2] = '\0';
    return 0;
}

int ixl_etcd_lines_feed(struct ixl_etcd_lines *l, const char *data, size_t n,
                        int (*fn)(void *ctx, const char *line, size_t len), void *ctx)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (l->skipping) {
            if (nl)
                l->skipping = 0;
        } else if (l->len + take > l->max) {
            l->dropped++;
            l->len = 0;
            l->skipping = nl == NULL;
        } else if (nl && l->len == 0) {
            int r = fn(ctx, data, take); /* whole line in this piece: no copy */
            if (r != 0)
                return r;
        } else {
            if (l->len + take > l->cap) {
                size_t cap = l->cap ? l->cap : 4096;
                while (cap < l->len + take)
                    cap *= 2;
                if (cap > l->max)
                    cap = l->max;
                char *nb = sys_realloc(l->buf, cap);
                if (nb == NULL)
                    return -1;
                l->buf = nb;
                l->cap = cap;
            }
            if (take > 0)
                memcpy(l->buf + l->len, data, take);
            l->len += take;
            if (nl) {
                size_t len = l->len;
                l->len = 0;
                int r = fn(ctx, l->buf, len);
                if (r != 0)
                    return r;
            }
        }
        if (nl == NULL)
            break;
        data += take + 1;
        n -= take + 1;
    }
    return 0;
}

void ixl_etcd_lines_reset(struct ixl_etcd_lines *l)
{
    free(l->buf);
    l->buf = NULL;
    l->len = l->cap = 0;
    l->skipping = 0;
}

#ifdef IXL_HAVE_ETCD
/* ------------------------------------------------------------------------------------------ */
/* The client                                                                                 */
/* ------------------------------------------------------------------------------------------ */

#include <curl/curl.h>
#include <jansson.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/time.h"

#define MAX_ENDPOINTS 8
#define POOL_MAX 8
#define CHUNK_MIN 1024
#define SMALL_RESP (1u << 20) /* answers other than chunk ranges */
#define POLL_MS 50
#define WATCH_RETRY_MS 250
#define FETCH_TRIES 8
#define TXN_TRIES 16

struct ixl_etcd {
    char *ep[MAX_ENDPOINTS];
    unsigned n_ep;
    unsigned cur_ep; /* the endpoint that last answered (c->mu) */
    char *ns;
    unsigned ttl_s, timeout_ms;
    size_t chunk; /* current chunk size (c->mu): halves when etcd refuses one as too large */

    pthread_mutex_t mu;
    pthread_mutex_t lease_mu;
    pthread_cond_t cond;
    CURL *pool[POOL_MAX];
    unsigned n_pool;
    int64_t lease;
    bool lease_lost;
    bool stop;

    pthread_t ka_thread;
    bool ka_started;

    /* The watch (fn, ctx under c->mu). */
    pthread_t w_thread;
    bool w_started;
    bool w_free_on_exit; /* close was called from the callback: the watch thread frees c */
    CURLM *w_multi;
    ixl_etcd_gone_fn w_fn;
    void *w_ctx;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static CURL *handle_get(struct ixl_etcd *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->n_pool > 0)
        h = c->pool[--c->n_pool];
    pthread_mutex_unlock(&c->mu);
    return h ? h : curl_easy_init();
}

static void handle_put(struct ixl_etcd *c, CURL *h)
{
    pthread_mutex_lock(&c->mu);
    if (c->n_pool < POOL_MAX) {
        c->pool[c->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h)
        curl_easy_cleanup(h);
}

struct resp {
    char *p;
    size_t len, cap, max;
    bool over;
};

static size_t resp_write(char *data, size_t sz, size_t nm, void *ud)
{
    struct resp *r = ud;
    size_t n = sz * nm;
    if (r->len + n > r->max) {
        r->over = true;
        return 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *np = sys_realloc(r->p, cap);
        if (np == NULL)
            return 0;
        r->p = np;
        r->cap = cap;
    }
    memcpy(r->p + r->len, data, n);
    r->len += n;
    return n;
}

/* What etcd said when it refused a request. */
enum etcd_refusal { REF_NONE, REF_TOO_LARGE, REF_NO_LEASE, REF_COMPACTED, REF_OTHER };

struct call {
    json_t *j;                 /* the answer (owned) */
    enum etcd_refusal refusal; /* with IXL_ERR_BACKEND */
    const char *ep;            /* the endpoint that answered (or the last one tried) */
};

static void common_opts(struct ixl_etcd *c, CURL *h, const char *url)
{
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(c->timeout_ms < 2000 ? c->timeout_ms : 2000));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
}

/* POSTs body to path on the endpoints in turn (from the one that last answered) and parses
 * the answer. IXL_OK with call->j, IXL_ERR_BACKEND with call->refusal when etcd refused, or
 * another error; err is filled on error. */
static int http_post(struct ixl_etcd *c, const char *path, const char *body, size_t blen,
                     size_t max_resp, struct call *call, char *err, size_t errlen)
{
    CURL *h = handle_get(c);
    char url[512];
    struct curl_slist hdr = {.data = (char *)"Content-Type: application/json", .next = NULL};
    call->j = NULL;
    call->refusal = REF_NONE;
    if (h == NULL) {
        set_err(err, errlen, "etcd: curl_easy_init failed");
        return IXL_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&c->mu);
    unsigned first = c->cur_ep;
    pthread_mutex_unlock(&c->mu);
    int rc = IXL_ERR_UNREACHABLE;
    for (unsigned k = 0; k < c->n_ep; k++) {
        unsigned e = (first + k) % c->n_ep;
        call->ep = c->ep[e];
        snprintf(url, sizeof(url), "%s%s", c->ep[e], path);
        struct resp r = {.max = max_resp};
        common_opts(c, h, url);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, &hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, resp_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
        CURLcode cc = curl_easy_perform(h);
        if (cc != CURLE_OK) {
            free(r.p);
            if (r.over) {
                set_err(err, errlen, "etcd %s%s: answer over %zu bytes", c->ep[e], path, max_resp);
                rc = IXL_ERR_MALFORMED;
                break;
            }
            set_err(err, errlen, "etcd %s%s: %s", c->ep[e], path, curl_easy_strerror(cc));
            rc = IXL_ERR_UNREACHABLE;
            if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT ||
                cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_RECV_ERROR ||
                cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING)
                continue;
            break;
        }
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        json_error_t je;
        json_t *j = json_loadb(r.p ? r.p : "", r.len, 0, &je);
        free(r.p);
        if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            set_err(err, errlen, "etcd %s%s: HTTP %ld, answer is not JSON (%s)", c->ep[e], path,
                    status, je.text);
            rc = IXL_ERR_PROTOCOL;
            break;
        }
        pthread_mutex_lock(&c->mu);
        c->cur_ep = e;
        pthread_mutex_unlock(&c->mu);
        const char *msg = json_string_value(json_object_get(j, "error"));
        if (msg == NULL)
            msg = json_string_value(json_object_get(j, "message"));
        if (msg != NULL || status != 200) {
            msg = msg ? msg : "(no message)";
            set_err(err, errlen, "etcd %s%s: HTTP %ld: %s", c->ep[e], path, status, msg);
            call->refusal = strstr(msg, "too large")            ? REF_TOO_LARGE
                            : strstr(msg, "lease not found")    ? REF_NO_LEASE
                            : strstr(msg, "has been compacted") ? REF_COMPACTED
                                                                : REF_OTHER;
            json_decref(j);
            rc = IXL_ERR_BACKEND;
            break;
        }
        call->j = j;
        rc = IXL_OK;
        break;
    }
    handle_put(c, h);
    return rc;
}

/* POSTs a jansson object (consumed). */
static int post_json(struct ixl_etcd *c, const char *path, json_t *req, size_t max_resp,
                     struct call *call, char *err, size_t errlen)
{
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (body == NULL) {
        set_err(err, errlen, "etcd: out of memory building a request");
        call->j = NULL;
        return IXL_ERR_NO_MEMORY;
    }
    int rc = http_post(c, path, body, strlen(body), max_resp, call, err, errlen);
    free(body);
    return rc;
}

/* An int64 field of the gateway's JSON (a string of digits, or a number); absent = 0. */
static int j_i64(json_t *o, const char *k, int64_t *out)
{
    json_t *v = json_object_get(o, k);
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (s == NULL || *s == '\0' || strlen(s) > 19)
        return -1;
    int64_t r = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (r > (INT64_MAX - (*p - '0')) / 10)
            return -1;
        r = r * 10 + (*p - '0');
    }
    *out = r;
    return 0;
}

static char *b64_dup(const void *p, size_t n)
{
    char *s = sys_malloc(4 * ((n + 2) / 3) + 1);
    if (s)
        ixl_etcd_b64_encode(p, n, s);
    return s;
}

static json_t *j_b64(const void *p, size_t n)
{
    char *s = b64_dup(p, n);
    json_t *j = s ? json_string_nocheck(s) : NULL;
    free(s);
    return j;
}

static json_t *j_b64s(const char *s)
{
    return j_b64(s, strlen(s));
}

/* The key just past every key with this prefix (prefix's last byte incremented). out's cap
 * is at least the size of prefix's buffer (every caller's is), so nothing is cut. */
static void prefix_end(const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "%s", prefix);
    size_t n = strlen(out);
    while (n > 0 && (unsigned char)out[n - 1] == 0xff)
        out[--n] = '\0';
    if (n > 0)
        out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
}

/* A kv's "value" (or "key") decoded into a new buffer of at most max bytes. */
static int kv_bytes(json_t *kv, const char *field, size_t max, unsigned char **out, size_t *len)
{
    json_t *v = json_object_get(kv, field);
    if (v == NULL) { /* the gateway omits empty values */
        *out = sys_malloc(1);
        *len = 0;
        return *out ? 0 : -1;
    }
    const char *s = json_string_value(v);
    if (s == NULL)
        return -1;
    size_t sl = json_string_length(v);
    if (sl / 4 * 3 > max + 2)
        return -1;
    unsigned char *b = sys_malloc(sl / 4 * 3 + 1);
    if (b == NULL)
        return -1;
    long n = ixl_etcd_b64_decode(s, sl, b);
    if (n < 0 || (size_t)n > max) {
        free(b);
        return -1;
    }
    b[n] = '\0';
    *out = b;
    *len = (size_t)n;
    return 0;
}

/* ---- Keys ---- */

#define KEY_MAX (IXL_NAME_MAX * 3 + 256)

static int check_names(const char *agent, const char *label, char *err, size_t errlen)
{
    if (agent == NULL || agent[0] == '\0' || strlen(agent) >= IXL_NAME_MAX) {
        set_err(err, errlen, "etcd: agent name must be 1..%d bytes", IXL_NAME_MAX - 1);
        return IXL_ERR_INVALID_ARG;
    }
    if (label == NULL || label[0] == '\0')
        return IXL_OK;
    size_t n = strnlen(label, 64);
    bool ok = n <= 63;
    for (size_t i = 0; ok && i < n; i++)
        ok = seg_char((unsigned char)label[i]);
    if (!ok) {
        set_err(err, errlen, "etcd: label '%.80s' must be 1..63 bytes of [A-Za-z0-9_.-]", label);
        return IXL_ERR_INVALID_ARG;
    }
    return IXL_OK;
}

static void enc_agent(const char *agent, char *out)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)agent; *p; p++) {
        if (seg_char(*p)) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = "0123456789ABCDEF"[*p >> 4];
            out[o++] = "0123456789ABCDEF"[*p & 15];
        }
    }
    out[o] = '\0';
}

/* <ns>/md/<A>/{f,l/<L>} and <ns>/data/<A>/{f,l/<L>}/ */
static void make_keys(struct ixl_etcd *c, const char *agent, const char *label, char *head,
                      char *data)
{
    char a[IXL_NAME_MAX * 3];
    enc_agent(agent, a);
    bool full = label == NULL || label[0] == '\0';
    snprintf(head, KEY_MAX, "%s/md/%s/%s%s", c->ns, a, full ? "f" : "l/", full ? "" : label);
    snprintf(data, KEY_MAX, "%s/data/%s/%s%s/", c->ns, a, full ? "f" : "l/", full ? "" : label);
}

static const char *label_text(const char *label)
{
    return label && label[0] ? label : "(full metadata)";
}

/* ---- Lease ---- */

static int lease_grant(struct ixl_etcd *c, int64_t *id, char *err, size_t errlen)
{
    struct call call;
    json_t *req = json_pack("{s:I}", "TTL", (json_int_t)c->ttl_s);
    int rc = post_json(c, "/v3/lease/grant", req, SMALL_RESP, &call, err, errlen);
    if (rc != IXL_OK)
        return rc;
    int64_t v = 0;
    if (j_i64(call.j, "ID", &v) != 0 || v == 0) {
        set_err(err, errlen, "etcd %s/v3/lease/grant: no lease ID in the answer", call.ep);
        rc = IXL_ERR_PROTOCOL;
    }
    json_decref(call.j);
    if (rc == IXL_OK)
        *id = v;
    return rc;
}

/* The lease to attach keys to; grants a new one when the old one was lost. */
static int lease_get(struct ixl_etcd *c, int64_t *id, char *err, size_t errlen)
{
    pthread_mutex_lock(&c->lease_mu);
    pthread_mutex_lock(&c->mu);
    bool lost = c->lease_lost;
    int64_t cur = c->lease;
    pthread_mutex_unlock(&c->mu);
    int rc = IXL_OK;
    if (lost) {
        int64_t nid;
        rc = lease_grant(c, &nid, err, errlen);
        if (rc == IXL_OK) {
            IXL_LOG_INF("etcd: granted a new lease %" PRIx64 " (the old one was lost)",
                        (uint64_t)nid);
            pthread_mutex_lock(&c->mu);
            c->lease = cur = nid;
            c->lease_lost = false;
            pthread_mutex_unlock(&c->mu);
        }
    }
    pthread_mutex_unlock(&c->lease_mu);
    if (rc == IXL_OK)
        *id = cur;
    return rc;
}

static void lease_mark_lost(struct ixl_etcd *c, int64_t id)
{
    pthread_mutex_lock(&c->mu);
    if (c->lease == id && !c->lease_lost) {
        c->lease_lost = true;
        IXL_LOG_WARNING("etcd: lease %" PRIx64 " is lost (etcd restarted, or the keep-alive "
                        "starved past the %u s TTL); what it held is gone, the next publish "
                        "grants a new lease",
                        (uint64_t)id, c->ttl_s);
    }
    pthread_mutex_unlock(&c->mu);
}

static void abs_deadline(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *ka_main(void *arg)
{
    struct ixl_etcd *c = arg;
    unsigned period = c->ttl_s * 1000 / 3;
    bool warned = false;
    if (period < 100)
        period = 100;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        struct timespec ts;
        abs_deadline(&ts, period);
        while (!c->stop && pthread_cond_timedwait(&c->cond, &c->mu, &ts) != ETIMEDOUT)
            ;
        if (c->stop)
            break;
        int64_t id = c->lease;
        bool lost = c->lease_lost;
        pthread_mutex_unlock(&c->mu);
        if (!lost) {
            char err[256];
            char body[64];
            struct call call;
            snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
            int rc = http_post(c, "/v3/lease/keepalive", body, strlen(body), SMALL_RESP, &call, err,
                               sizeof(err));
            if (rc == IXL_OK) {
                int64_t ttl = 0;
                json_t *res = json_object_get(call.j, "result");
                if (res == NULL || j_i64(res, "TTL", &ttl) != 0 || ttl <= 0)
                    lease_mark_lost(c, id);
                json_decref(call.j);
                warned = false;
            } else if (rc == IXL_ERR_BACKEND && call.refusal == REF_NO_LEASE) {
                lease_mark_lost(c, id);
            } else if (!warned) {
                IXL_LOG_WARNING("etcd: lease keep-alive failed: %s", err);
                warned = true;
            }
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- Open / close ---- */

static int parse_endpoints(struct ixl_etcd *c, const char *eps, char *err, size_t errlen)
{
    const char *p = eps;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t n = strcspn(p, ", ");
        if (n == 0)
            break;
        while (n > 0 && p[n - 1] == '/')
            n--;
        if (c->n_ep == MAX_ENDPOINTS || n > 400 || n == 0) {
            set_err(err, errlen, "etcd: endpoints '%.200s': at most %d, each under 400 bytes", eps,
                    MAX_ENDPOINTS);
            return IXL_ERR_INVALID_ARG;
        }
        if (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0) {
            set_err(err, errlen, "etcd: endpoint '%.*s' must start with http:// or https://",
                    (int)n, p);
            return IXL_ERR_INVALID_ARG;
        }
        c->ep[c->n_ep] = sys_strndup(p, n);
        if (c->ep[c->n_ep] == NULL)
            return IXL_ERR_NO_MEMORY;
        c->n_ep++;
        p += strcspn(p, ", ");
    }
    if (c->n_ep == 0) {
        set_err(err, errlen, "etcd: no endpoint given (\"http://host:port[,...]\")");
        return IXL_ERR_INVALID_ARG;
    }
    return IXL_OK;
}

static void client_free(struct ixl_etcd *c)
{
    if (c->w_multi)
        curl_multi_cleanup(c->w_multi);
    for (unsigned i = 0; i < c->n_pool; i++)
        curl_easy_cleanup(c->pool[i]);
    for (unsigned i = 0; i < c->n_ep; i++)
        free(c->ep[i]);
    free(c->ns);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lease_mu);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int ixl_etcd_open(const struct ixl_etcd_opts *opts, struct ixl_etcd **out, char *err, size_t errlen)
{
    if (opts == NULL || opts->endpoints == NULL || out == NULL) {
        set_err(err, errlen, "etcd: no options or endpoints");
        return IXL_ERR_INVALID_ARG;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        set_err(err, errlen, "etcd: curl_global_init: %s", curl_easy_strerror(curl_init_rc));
        return IXL_ERR_BACKEND;
    }
    const char *ns = opts->ns ? opts->ns : "ixl";
    if (ns[0] == '\0' || strlen(ns) > 128) {
        set_err(err, errlen, "etcd: namespace must be 1..128 bytes");
        return IXL_ERR_INVALID_ARG;
    }
    if (opts->ttl_s > 3600 || (opts->chunk_max != 0 && opts->chunk_max < CHUNK_MIN)) {
        set_err(err, errlen, "etcd: ttl_s at most 3600, chunk_max at least %d", CHUNK_MIN);
        return IXL_ERR_INVALID_ARG;
    }
    struct ixl_etcd *c = sys_calloc(1, sizeof(*c));
    if (c == NULL)
        return IXL_ERR_NO_MEMORY;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->lease_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    c->ns = sys_strdup(ns);
    c->ttl_s = opts->ttl_s ? opts->ttl_s : 10;
    c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 5000;
    c->chunk = opts->chunk_max ? opts->chunk_max : 512 * 1024;
    if (c->chunk > IXL_ETCD_MAX_BLOB)
        c->chunk = IXL_ETCD_MAX_BLOB;
    int rc = c->ns ? parse_endpoints(c, opts->endpoints, err, errlen) : IXL_ERR_NO_MEMORY;
    if (rc != IXL_OK)
        goto fail;
    /* The grant is the connection check: it fails when no endpoint answers. */
    rc = lease_grant(c, &c->lease, err, errlen);
    if (rc != IXL_OK)
        goto fail;
    if (sys_pthread_create(&c->ka_thread, NULL, ka_main, c) != 0) {
        set_err(err, errlen, "etcd: cannot start the keep-alive thread");
        rc = IXL_ERR_SYSTEM;
        goto fail_lease;
    }
    pthread_setname_np(c->ka_thread, "ixl-etcd-ka");
    c->ka_started = true;
    *out = c;
    return IXL_OK;
fail_lease : {
    char body[64];
    struct call call;
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", c->lease);
    if (http_post(c, "/v3/lease/revoke", body, strlen(body), SMALL_RESP, &call, NULL, 0) == IXL_OK)
        json_decref(call.j);
}
fail:
    client_free(c);
    return rc;
}

static void close_rest(struct ixl_etcd *c)
{
    if (c->ka_started)
        pthread_join(c->ka_thread, NULL);
    pthread_mutex_lock(&c->mu);
    int64_t id = c->lease;
    bool lost = c->lease_lost;
    pthread_mutex_unlock(&c->mu);
    if (!lost) {
        char body[64];
        struct call call;
        snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
        if (http_post(c, "/v3/lease/revoke", body, strlen(body), SMALL_RESP, &call, NULL, 0) ==
            IXL_OK)
            json_decref(call.j);
    }
}

void ixl_etcd_close(struct ixl_etcd *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cond);
    bool from_cb = c->w_started && pthread_equal(c->w_thread, pthread_self());
    if (from_cb)
        c->w_free_on_exit = true;
    CURLM *multi = c->w_multi;
    bool watching = c->w_started;
    pthread_mutex_unlock(&c->mu);
    if (multi)
        curl_multi_wakeup(multi);
    close_rest(c);
    if (from_cb)
        return; /* the watch thread frees c when the callback returns */
    if (watching)
        pthread_join(c->w_thread, NULL);
    client_free(c);
}

/* ---- Publish ---- */

static int put_kv(struct ixl_etcd *c, const char *key, const void *val, size_t vlen, int64_t lease,
                  struct call *call, char *err, size_t errlen)
{
    char *kb = b64_dup(key, strlen(key));
    char *vb = b64_dup(val, vlen);
    char *body = NULL;
    size_t cap = (kb ? strlen(kb) : 0) + (vb ? strlen(vb) : 0) + 96;
    if (kb && vb)
        body = sys_malloc(cap);
    int rc = IXL_ERR_NO_MEMORY;
    if (body) {
        int n = snprintf(body, cap, "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}",
                         kb, vb, lease);
        rc = http_post(c, "/v3/kv/put", body, (size_t)n, SMALL_RESP, call, err, errlen);
        if (rc == IXL_OK)
            json_decref(call->j);
    } else {
        set_err(err, errlen, "etcd: out of memory building a put of %zu bytes", vlen);
    }
    free(body);
    free(vb);
    free(kb);
    return rc;
}

static int delete_prefix(struct ixl_etcd *c, const char *prefix, char *err, size_t errlen)
{
    char end[KEY_MAX + 32]; /* the size of the caller's prefix buffer */
    struct call call;
    if (strlen(prefix) >= sizeof(end)) {
        set_err(err, errlen, "etcd: a key prefix of %zu bytes is over %zu", strlen(prefix),
                sizeof(end) - 1);
        return IXL_ERR_TOO_LARGE;
    }
    prefix_end(prefix, end, sizeof(end));
    json_t *req = json_pack("{s:o,s:o}", "key", j_b64s(prefix), "range_end", j_b64s(end));
    int rc = post_json(c, "/v3/kv/deleterange", req, SMALL_RESP, &call, err, errlen);
    if (rc == IXL_OK)
        json_decref(call.j);
    return rc;
}

/* The head kv of a range answer (or NULL), its parsed head (ok = it parsed) and revisions. */
struct head_read {
    bool exists, ok;
    struct ixl_etcd_head h;
    int64_t mod_rev, rev;
};

static int head_from_range(json_t *r, struct head_read *hr)
{
    memset(hr, 0, sizeof(*hr));
    json_t *hdr = json_object_get(r, "header");
    if (j_i64(hdr, "revision", &hr->rev) != 0)
        return -1;
    json_t *kvs = json_object_get(r, "kvs");
    if (kvs == NULL || json_array_size(kvs) == 0)
        return 0;
    json_t *kv = json_array_get(kvs, 0);
    if (j_i64(kv, "mod_revision", &hr->mod_rev) != 0)
        return -1;
    hr->exists = true;
    unsigned char *v;
    size_t vlen;
    if (kv_bytes(kv, "value", 256, &v, &vlen) == 0) {
        hr->ok = ixl_etcd_head_parse((const char *)v, vlen, &hr->h) == 0;
        free(v);
    }
    return 0;
}

static int read_head(struct ixl_etcd *c, const char *hkey, struct head_read *hr, char *err,
                     size_t errlen)
{
    struct call call;
    json_t *req = json_pack("{s:o}", "key", j_b64s(hkey));
    int rc = post_json(c, "/v3/kv/range", req, SMALL_RESP, &call, err, errlen);
    if (rc != IXL_OK)
        return rc;
    if (head_from_range(call.j, hr) != 0) {
        set_err(err, errlen, "etcd %s: malformed range answer for %s", call.ep, hkey);
        rc = IXL_ERR_PROTOCOL;
    }
    json_decref(call.j);
    return rc;
}

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (sys_getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = ixl_now_ns() ^ ((uint64_t)getpid() << 32);
    return v;
}

/* Writes one version's chunks. IXL_ERR_BACKEND + *refusal as etcd said. */
static int put_chunks(struct ixl_etcd *c, const char *dprefix, uint64_t ver, const void *blob,
                      size_t len, size_t chunk, uint32_t n, int64_t lease,
                      enum etcd_refusal *refusal, char *err, size_t errlen)
{
    char key[KEY_MAX + 64];
    for (uint32_t i = 0; i < n; i++) {
        size_t off = (size_t)i * chunk;
        size_t cl = len - off < chunk ? len - off : chunk;
        struct call call;
        snprintf(key, sizeof(key), "%s%016" PRIx64 "/%08" PRIx32, dprefix, ver, i);
        int rc = put_kv(c, key, (const char *)blob + off, cl, lease, &call, err, errlen);
        if (rc != IXL_OK) {
            *refusal = rc == IXL_ERR_BACKEND ? call.refusal : REF_NONE;
            return rc;
        }
    }
    return IXL_OK;
}

/* The head switch: put head, delete the old version's chunks, if the head's mod revision is
 * still hr->mod_rev. On a lost race, *hr is the head now there and *won false. */
static int switch_head(struct ixl_etcd *c, const char *hkey, const char *dprefix, const char *hval,
                       int64_t lease, struct head_read *hr, bool *won, enum etcd_refusal *refusal,
                       char *err, size_t errlen)
{
    char old[KEY_MAX + 64], old_end[KEY_MAX + 64];
    char ls[32];
    snprintf(ls, sizeof(ls), "%" PRId64, lease);
    json_t *success = json_pack("[{s:{s:o,s:o,s:s}}]", "request_put", "key", j_b64s(hkey), "value",
                                j_b64s(hval), "lease", ls);
    if (success == NULL) {
        set_err(err, errlen, "etcd: out of memory building a transaction");
        return IXL_ERR_NO_MEMORY;
    }
    if (hr->exists && hr->ok) {
        snprintf(old, sizeof(old), "%s%016" PRIx64 "/", dprefix, hr->h.ver);
        prefix_end(old, old_end, sizeof(old_end));
        json_array_append_new(success, json_pack("{s:{s:o,s:o}}", "request_delete_range", "key",
                                                 j_b64s(old), "range_end", j_b64s(old_end)));
    }
    char mr[32];
    snprintf(mr, sizeof(mr), "%" PRId64, hr->exists ? hr->mod_rev : 0);
    json_t *req = json_pack("{s:[{s:s,s:o,s:s,s:s}],s:o,s:[{s:{s:o}}]}", "compare", "target", "MOD",
                            "key", j_b64s(hkey), "mod_revision", mr, "result", "EQUAL", "success",
                            success, "failure", "request_range", "key", j_b64s(hkey));
    struct call call;
    int rc = post_json(c, "/v3/kv/txn", req, SMALL_RESP, &call, err, errlen);
    if (rc != IXL_OK) {
        *refusal = rc == IXL_ERR_BACKEND ? call.refusal : REF_NONE;
        return rc;
    }
    *won = json_is_true(json_object_get(call.j, "succeeded"));
    if (!*won) {
        json_t *r0 = json_array_get(json_object_get(call.j, "responses"), 0);
        json_t *rr = json_object_get(r0, "response_range");
        if (rr == NULL || head_from_range(rr, hr) != 0) {
            set_err(err, errlen, "etcd %s/v3/kv/txn: malformed answer", call.ep);
            rc = IXL_ERR_PROTOCOL;
        }
    }
    json_decref(call.j);
    return rc;
}

int ixl_etcd_publish(struct ixl_etcd *c, const char *agent, const char *label, uint64_t incarnation,
                     const void *blob, size_t len, char *err, size_t errlen)
{
    if (c == NULL || (blob == NULL && len > 0)) {
        set_err(err, errlen, "etcd: publish: no client or no blob");
        return IXL_ERR_INVALID_ARG;
    }
    int rc = check_names(agent, label, err, errlen);
    if (rc != IXL_OK)
        return rc;
    if (len > IXL_ETCD_MAX_BLOB) {
        set_err(err, errlen, "etcd: metadata of %zu bytes is over the %u-byte limit", len,
                IXL_ETCD_MAX_BLOB);
        return IXL_ERR_TOO_LARGE;
    }
    char hkey[KEY_MAX], dprefix[KEY_MAX], vprefix[KEY_MAX + 32];
    make_keys(c, agent, label, hkey, dprefix);
    uint32_t crc = ixl_etcd_crc32c(0, blob, len);
    bool regranted = false;

    for (int attempt = 0; attempt < 24; attempt++) {
        int64_t lease;
        rc = lease_get(c, &lease, err, errlen);
        if (rc != IXL_OK)
            return rc;
        struct head_read hr;
        rc = read_head(c, hkey, &hr, err, errlen);
        if (rc != IXL_OK)
            return rc;
        pthread_mutex_lock(&c->mu);
        size_t chunk = c->chunk;
        pthread_mutex_unlock(&c->mu);
        uint64_t n64 = len ? (len + chunk - 1) / chunk : 0;
        if (n64 > IXL_ETCD_MAX_CHUNKS) {
            set_err(err, errlen, "etcd: %zu bytes need %" PRIu64 " chunks of %zu (over %u)", len,
                    n64, chunk, IXL_ETCD_MAX_CHUNKS);
            return IXL_ERR_TOO_LARGE;
        }
        struct ixl_etcd_head h = {
            .ver = random64(), .n = (uint32_t)n64, .len = len, .crc = crc, .inc = incarnation};
        snprintf(vprefix, sizeof(vprefix), "%s%016" PRIx64 "/", dprefix, h.ver);
        enum etcd_refusal ref = REF_NONE;
        rc = put_chunks(c, dprefix, h.ver, blob, len, chunk, h.n, lease, &ref, err, errlen);
        if (rc == IXL_OK) {
            char hval[160];
            ixl_etcd_head_format(&h, hval, sizeof(hval));
            bool won = false;
            for (int t = 0; t < TXN_TRIES && rc == IXL_OK && !won; t++)
                rc = switch_head(c, hkey, dprefix, hval, lease, &hr, &won, &ref, err, errlen);
            if (rc == IXL_OK && won)
                return IXL_OK;
            if (rc == IXL_OK) {
                set_err(err, errlen, "etcd: publish of %s/%s lost %d races for the head", agent,
                        label_text(label), TXN_TRIES);
                rc = IXL_ERR_BUSY;
            }
        }
        /* Failed: drop what this version wrote (best effort; the lease would take it too). */
        delete_prefix(c, vprefix, NULL, 0);
        if (rc == IXL_ERR_BACKEND && ref == REF_TOO_LARGE && chunk / 2 >= CHUNK_MIN) {
            pthread_mutex_lock(&c->mu);
            if (c->chunk == chunk)
                c->chunk = chunk / 2;
            pthread_mutex_unlock(&c->mu);
            IXL_LOG_INF("etcd: a chunk of %zu bytes is over etcd's request limit; using %zu", chunk,
                        chunk / 2);
            continue;
        }
        if (rc == IXL_ERR_BACKEND && ref == REF_TOO_LARGE) {
            rc = IXL_ERR_TOO_LARGE;
        } else if (rc == IXL_ERR_BACKEND && ref == REF_NO_LEASE && !regranted) {
            lease_mark_lost(c, lease);
            regranted = true;
            continue;
        }
        return rc;
    }
    set_err(err, errlen, "etcd: publish of %s/%s: too many retries", agent, label_text(label));
    return IXL_ERR_BACKEND;
}

/* ---- Fetch ---- */

/* One look. IXL_ERR_NOT_FOUND when there is no head; *retry when the chunks changed under us. */
static int fetch_once(struct ixl_etcd *c, const char *hkey, const char *dprefix, void **blob,
                      size_t *blen, bool *retry, char *err, size_t errlen)
{
    struct head_read hr;
    *retry = false;
    int rc = read_head(c, hkey, &hr, err, errlen);
    if (rc != IXL_OK)
        return rc;
    if (!hr.exists)
        return IXL_ERR_NOT_FOUND;
    if (!hr.ok) {
        set_err(err, errlen,
                "etcd: head %s is malformed (not \"v=<hex> n=<n> len=<n> crc=<hex> "
                "inc=<hex>\" within %u chunks and %u bytes)",
                hkey, IXL_ETCD_MAX_CHUNKS, IXL_ETCD_MAX_BLOB);
        return IXL_ERR_MALFORMED;
    }
    unsigned char *out = sys_malloc(hr.h.len ? hr.h.len : 1);
    if (out == NULL) {
        set_err(err, errlen, "etcd: out of memory for %" PRIu64 " bytes", hr.h.len);
        return IXL_ERR_NO_MEMORY;
    }
    if (hr.h.n > 0) {
        char pfx[KEY_MAX + 32], end[KEY_MAX + 32], want[KEY_MAX + 48];
        snprintf(pfx, sizeof(pfx), "%s%016" PRIx64 "/", dprefix, hr.h.ver);
        prefix_end(pfx, end, sizeof(end));
        char rev[32];
        snprintf(rev, sizeof(rev), "%" PRId64, hr.rev);
        char lim[32];
        snprintf(lim, sizeof(lim), "%" PRIu32, hr.h.n + 1);
        /* Bound on the answer: the values in base64 plus per-key overhead. */
        size_t max_resp =
            (size_t)hr.h.len / 3 * 4 + 16 + (size_t)(hr.h.n + 1) * (3 * KEY_MAX) + 65536;
        json_t *req = json_pack("{s:o,s:o,s:s,s:s}", "key", j_b64s(pfx), "range_end", j_b64s(end),
                                "revision", rev, "limit", lim);
        struct call call;
        rc = post_json(c, "/v3/kv/range", req, max_resp, &call, err, errlen);
        if (rc != IXL_OK) {
            free(out);
            if (rc == IXL_ERR_BACKEND && call.refusal == REF_COMPACTED)
                *retry = true;
            return rc;
        }
        json_t *kvs = json_object_get(call.j, "kvs");
        size_t nk = json_array_size(kvs);
        size_t off = 0;
        const char *why = NULL;
        if (nk != hr.h.n)
            why = "chunk count differs from the head's";
        for (size_t i = 0; why == NULL && i < nk; i++) {
            json_t *kv = json_array_get(kvs, i);
            unsigned char *k, *v;
            size_t kl, vl;
            snprintf(want, sizeof(want), "%s%08zx", pfx, i);
            if (kv_bytes(kv, "key", KEY_MAX + 64, &k, &kl) != 0) {
                why = "a chunk's key is not base64";
                break;
            }
            bool key_ok = kl == strlen(want) && memcmp(k, want, kl) == 0;
            free(k);
            if (!key_ok) {
                why = "a chunk is missing or misnamed";
                break;
            }
            if (kv_bytes(kv, "value", hr.h.len - off, &v, &vl) != 0) {
                why = "a chunk is not base64 or is past the head's length";
                break;
            }
            if (vl == 0)
                why = "a chunk is empty";
            else
                memcpy(out + off, v, vl);
            off += vl;
            free(v);
        }
        if (why == NULL && off != hr.h.len)
            why = "the chunks' total length differs from the head's";
        json_decref(call.j);
        if (why != NULL) {
            free(out);
            set_err(err, errlen, "etcd: metadata %s version %016" PRIx64 ": %s", hkey, hr.h.ver,
                    why);
            *retry = true;
            return IXL_ERR_MALFORMED;
        }
    }
    if (ixl_etcd_crc32c(0, out, hr.h.len) != hr.h.crc) {
        free(out);
        set_err(err, errlen, "etcd: metadata %s version %016" PRIx64 ": crc mismatch", hkey,
                hr.h.ver);
        *retry = true;
        return IXL_ERR_MALFORMED;
    }
    *blob = out;
    *blen = hr.h.len;
    return IXL_OK;
}

int ixl_etcd_fetch(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms,
                   void **blob, size_t *len, char *err, size_t errlen)
{
    if (c == NULL || blob == NULL || len == NULL) {
        set_err(err, errlen, "etcd: fetch: no client or no output");
        return IXL_ERR_INVALID_ARG;
    }
    int rc = check_names(agent, label, err, errlen);
    if (rc != IXL_OK)
        return rc;
    char hkey[KEY_MAX], dprefix[KEY_MAX];
    make_keys(c, agent, label, hkey, dprefix);
    uint64_t deadline = ixl_now_us() / 1000 + (timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    int tries = 0;
    for (;;) {
        bool retry;
        rc = fetch_once(c, hkey, dprefix, blob, len, &retry, err, errlen);
        if (rc == IXL_OK)
            return rc;
        if (rc == IXL_ERR_NOT_FOUND) {
            uint64_t now = ixl_now_us() / 1000;
            if (now >= deadline) {
                pthread_mutex_lock(&c->mu);
                const char *ep = c->ep[c->cur_ep];
                pthread_mutex_unlock(&c->mu);
                set_err(err, errlen,
                        "etcd %s: no metadata for agent '%s' label %s (key %s) after %d ms", ep,
                        agent, label_text(label), hkey, timeout_ms > 0 ? timeout_ms : 0);
                return rc;
            }
            uint64_t ms = deadline - now < POLL_MS ? deadline - now : POLL_MS;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        /* A mismatch: a newer publish replaced the version as we read it; read the head again
         * (a few times: a head that stays inconsistent is malformed). */
        if (retry && ++tries < FETCH_TRIES)
            continue;
        return rc;
    }
}

int ixl_etcd_remove(struct ixl_etcd *c, const char *agent, char *err, size_t errlen)
{
    if (c == NULL) {
        set_err(err, errlen, "etcd: remove: no client");
        return IXL_ERR_INVALID_ARG;
    }
    int rc = check_names(agent, NULL, err, errlen);
    if (rc != IXL_OK)
        return rc;
    char a[IXL_NAME_MAX * 3], mp[KEY_MAX], dp[KEY_MAX], me[KEY_MAX], de[KEY_MAX];
    enc_agent(agent, a);
    snprintf(mp, sizeof(mp), "%s/md/%s/", c->ns, a);
    snprintf(dp, sizeof(dp), "%s/data/%s/", c->ns, a);
    prefix_end(mp, me, sizeof(me));
    prefix_end(dp, de, sizeof(de));
    /* Heads first, in the same revision as the chunks: no reader sees a head without them. */
    json_t *req = json_pack("{s:[],s:[{s:{s:o,s:o}},{s:{s:o,s:o}}]}", "compare", "success",
                            "request_delete_range", "key", j_b64s(mp), "range_end", j_b64s(me),
                            "request_delete_range", "key", j_b64s(dp), "range_end", j_b64s(de));
    struct call call;
    rc = post_json(c, "/v3/kv/txn", req, SMALL_RESP, &call, err, errlen);
    if (rc == IXL_OK)
        json_decref(call.j);
    return rc;
}

/* ---- Watch ---- */

struct watch_state {
    struct ixl_etcd *c;
    struct ixl_etcd_lines lines;
    int64_t next_rev; /* resume from here (0 = from now) */
    size_t plen;      /* strlen("<ns>/md/") */
    char prefix[160];
};

static uint64_t head_inc(json_t *kv, bool *ok)
{
    unsigned char *v;
    size_t vl;
    struct ixl_etcd_head h;
    *ok = false;
    if (kv == NULL || kv_bytes(kv, "value", 256, &v, &vl) != 0)
        return 0;
    *ok = ixl_etcd_head_parse((const char *)v, vl, &h) == 0;
    free(v);
    return *ok ? h.inc : 0;
}

/* Handles one event; returns its revision (0 if it has none). */
static int64_t watch_event(struct watch_state *ws, json_t *ev)
{
    struct ixl_etcd *c = ws->c;
    json_t *kv = json_object_get(ev, "kv");
    unsigned char *k;
    size_t kl;
    int64_t rev = 0;
    char agent[IXL_NAME_MAX], label[64];
    if (kv == NULL || j_i64(kv, "mod_revision", &rev) != 0 || rev < 0 ||
        kv_bytes(kv, "key", KEY_MAX + 64, &k, &kl) != 0)
        return 0;
    bool mine =
        kl > ws->plen && memcmp(k, ws->prefix, ws->plen) == 0 &&
        ixl_etcd_head_key_parse((const char *)k + ws->plen, kl - ws->plen, agent, label) == 0;
    free(k);
    if (!mine)
        return rev;
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool del = type != NULL && strcmp(type, "DELETE") == 0;
    uint64_t inc = 0;
    if (!del) {
        bool ok_new, ok_old;
        json_t *prev = json_object_get(ev, "prev_kv");
        if (prev == NULL)
            return rev; /* first publish */
        inc = head_inc(kv, &ok_new);
        uint64_t old = head_inc(prev, &ok_old);
        if (!ok_new || (ok_old && old == inc))
            return rev;
    }
    pthread_mutex_lock(&c->mu);
    ixl_etcd_gone_fn fn = c->stop ? NULL : c->w_fn;
    void *ctx = c->w_ctx;
    pthread_mutex_unlock(&c->mu);
    if (fn)
        fn(ctx, agent, label, inc);
    return rev;
}

static int watch_line(void *arg, const char *line, size_t len)
{
    struct watch_state *ws = arg;
    json_error_t je;
    if (len == 0)
        return 0;
    json_t *j = json_loadb(line, len, 0, &je);
    json_t *res = json_object_get(j, "result");
    if (res == NULL) {
        json_t *e = json_object_get(j, "error");
        if (e != NULL) {
            const char *m = json_string_value(json_object_get(e, "message"));
            IXL_LOG_WARNING("etcd: watch: %s", m ? m : "error");
        }
        json_decref(j);
        return 0;
    }
    int64_t rev = 0, compact = 0;
    j_i64(json_object_get(res, "header"), "revision", &rev);
    j_i64(res, "compact_revision", &compact);
    json_t *evs = json_object_get(res, "events");
    for (size_t i = 0; i < json_array_size(evs); i++) {
        int64_t er = watch_event(ws, json_array_get(evs, i));
        if (er >= ws->next_rev)
            ws->next_rev = er + 1; /* resume after the last event seen */
    }
    bool canceled = json_is_true(json_object_get(res, "canceled"));
    json_decref(j);
    if (compact > 0) {
        IXL_LOG_WARNING("etcd: watch: revisions before %" PRId64 " were compacted; events in "
                        "between are lost",
                        compact);
        ws->next_rev = compact;
        return 1;
    }
    if (rev > 0 && ws->next_rev == 0)
        ws->next_rev = rev + 1; /* created: resume after the revision it started at */
    return canceled ? 1 : 0;
}

static size_t watch_write(char *data, size_t sz, size_t nm, void *ud)
{
    struct watch_state *ws = ud;
    int r = ixl_etcd_lines_feed(&ws->lines, data, sz * nm, watch_line, ws);
    return r == 0 ? sz * nm : 0; /* non-zero: reconnect */
}

static bool watch_stopping(struct ixl_etcd *c)
{
    pthread_mutex_lock(&c->mu);
    bool s = c->stop;
    pthread_mutex_unlock(&c->mu);
    return s;
}

static void *watch_main(void *arg)
{
    struct ixl_etcd *c = arg;
    struct watch_state ws = {.c = c, .lines = {.max = 4u << 20}};
    snprintf(ws.prefix, sizeof(ws.prefix), "%s/md/", c->ns);
    ws.plen = strlen(ws.prefix);
    char end[200];
    prefix_end(ws.prefix, end, sizeof(end));
    CURL *h = curl_easy_init();
    struct curl_slist hdr = {.data = (char *)"Content-Type: application/json", .next = NULL};
    unsigned e = 0;
    bool warned = false;
    while (h != NULL && !watch_stopping(c)) {
        json_t *cr = json_pack("{s:o,s:o,s:b}", "key", j_b64s(ws.prefix), "range_end", j_b64s(end),
                               "prev_kv", 1);
        if (ws.next_rev > 0) {
            char rv[32];
            snprintf(rv, sizeof(rv), "%" PRId64, ws.next_rev);
            json_object_set_new(cr, "start_revision", json_string(rv));
        }
        json_t *req = json_pack("{s:o}", "create_request", cr);
        char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        if (body == NULL)
            break;
        char url[512];
        snprintf(url, sizeof(url), "%s/v3/watch", c->ep[e]);
        common_opts(c, h, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, &hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &ws);
        /* No overall timeout (the stream is meant to last); a dead TCP peer is found by
         * keep-alive probes. */
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 10L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 5L);
        curl_multi_add_handle(c->w_multi, h);
        int running = 1;
        CURLcode result = CURLE_OK;
        while (running && !watch_stopping(c)) {
            if (curl_multi_perform(c->w_multi, &running) != CURLM_OK)
                break;
            int left;
            CURLMsg *m;
            while ((m = curl_multi_info_read(c->w_multi, &left)) != NULL)
                if (m->msg == CURLMSG_DONE)
                    result = m->data.result;
            if (running)
                curl_multi_poll(c->w_multi, NULL, 0, 1000, NULL);
        }
        curl_multi_remove_handle(c->w_multi, h);
        free(body);
        ixl_etcd_lines_reset(&ws.lines);
        if (watch_stopping(c))
            break;
        if (!warned && result != CURLE_OK && result != CURLE_WRITE_ERROR) {
            IXL_LOG_WARNING("etcd: watch on %s broke (%s); reconnecting", c->ep[e],
                            curl_easy_strerror(result));
            warned = true;
        }
        if (result != CURLE_WRITE_ERROR)
            e = (e + 1) % c->n_ep;
        /* Wait before reconnecting; close wakes us. */
        pthread_mutex_lock(&c->mu);
        struct timespec ts;
        abs_deadline(&ts, WATCH_RETRY_MS);
        while (!c->stop && pthread_cond_timedwait(&c->cond, &c->mu, &ts) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&c->mu);
    }
    if (h)
        curl_easy_cleanup(h);
    pthread_mutex_lock(&c->mu);
    bool free_it = c->w_free_on_exit;
    pthread_mutex_unlock(&c->mu);
    if (free_it) { /* closed from the callback: close_rest() already ran */
        pthread_detach(pthread_self());
        client_free(c);
    }
    return NULL;
}

int ixl_etcd_watch(struct ixl_etcd *c, ixl_etcd_gone_fn fn, void *ctx, char *err, size_t errlen)
{
    if (c == NULL || fn == NULL) {
        set_err(err, errlen, "etcd: watch: no client or no callback");
        return IXL_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&c->mu);
    c->w_fn = fn;
    c->w_ctx = ctx;
    bool started = c->w_started;
    pthread_mutex_unlock(&c->mu);
    if (started)
        return IXL_OK;
    /* Not started: create the thread under c->mu, so that w_thread, w_multi and w_started
     * are set before the thread (or a close) can look at them. */
    int rc = IXL_OK;
    CURLM *multi = curl_multi_init();
    pthread_mutex_lock(&c->mu);
    if (c->w_started || c->stop) {
        /* another first call won the race, or the client is closing */
    } else if (multi == NULL) {
        rc = IXL_ERR_NO_MEMORY;
    } else {
        c->w_multi = multi;
        if (sys_pthread_create(&c->w_thread, NULL, watch_main, c) != 0) {
            c->w_multi = NULL;
            rc = IXL_ERR_SYSTEM;
        } else {
            pthread_setname_np(c->w_thread, "ixl-etcd-watch");
            c->w_started = true;
            multi = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (multi)
        curl_multi_cleanup(multi);
    if (rc != IXL_OK)
        set_err(err, errlen, "etcd: cannot start the watch thread");
    return rc;
}

#else /* !IXL_HAVE_ETCD */

static int no_etcd(char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen,
                 "ixl was built without etcd support (configured with IXL_WITH_ETCD=OFF; "
                 "rebuild with it ON, which needs libcurl4-openssl-dev and libjansson-dev)");
    return IXL_ERR_NOT_SUPPORTED;
}

int ixl_etcd_open(const struct ixl_etcd_opts *opts, struct ixl_etcd **out, char *err, size_t errlen)
{
    (void)opts;
    (void)out;
    return no_etcd(err, errlen);
}

void ixl_etcd_close(struct ixl_etcd *c)
{
    (void)c;
}

int ixl_etcd_publish(struct ixl_etcd *c, const char *agent, const char *label, uint64_t incarnation,
                     const void *blob, size_t len, char *err, size_t errlen)
{
    (void)c;
    (void)agent;
    (void)label;
    (void)incarnation;
    (void)blob;
    (void)len;
    return no_etcd(err, errlen);
}

int ixl_etcd_fetch(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms,
                   void **blob, size_t *len, char *err, size_t errlen)
{
    (void)c;
    (void)agent;
    (void)label;
    (void)timeout_ms;
    (void)blob;
    (void)len;
    return no_etcd(err, errlen);
}

int ixl_etcd_remove(struct ixl_etcd *c, const char *agent, char *err, size_t errlen)
{
    (void)c;
    (void)agent;
    return no_etcd(err, errlen);
}

int ixl_etcd_watch(struct ixl_etcd *c, ixl_etcd_gone_fn fn, void *ctx, char *err, size_t errlen)
{
    (void)c;
    (void)fn;
    (void)ctx;
    return no_etcd(err, errlen);
}

#endif

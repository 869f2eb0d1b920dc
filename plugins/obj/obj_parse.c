/* OBJ: parsing what an S3 server sends (obj_parse.h). Bounded by len everywhere: the server's
 * bytes are neither NUL-terminated nor trusted. */
#include "obj_parse.h"

#include <pthread.h>
#include <string.h>

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trims blanks off both ends of [*v, *v + *len). */
static void trim(const char **v, size_t *len)
{
    while (*len > 0 && is_blank(**v)) {
        (*v)++;
        (*len)--;
    }
    while (*len > 0 && is_blank((*v)[*len - 1]))
        (*len)--;
}

static const char *find(const char *hay, size_t len, const char *needle, size_t nlen)
{
    if (nlen == 0 || nlen > len)
        return NULL;
    for (size_t i = 0; i + nlen <= len; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nlen) == 0)
            return hay + i;
    return NULL;
}

/* Decodes one entity at p (p[0] == '&', end bounds it): the byte into *c, the entity's length
 * into *used. 0, or -1 when malformed. */
static int entity(const char *p, const char *end, char *c, size_t *used)
{
    static const struct {
        const char *name;
        char c;
    } named[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t left = (size_t)(end - p);
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        size_t n = strlen(named[i].name);
        if (left >= n && memcmp(p, named[i].name, n) == 0) {
            *c = named[i].c;
            *used = n;
            return 0;
        }
    }
    if (left < 4 || p[1] != '#')
        return -1;
    size_t i = 2;
    int hex = p[i] == 'x';
    if (hex)
        i++;
    unsigned v = 0, digits = 0;
    for (; i < left && p[i] != ';' && digits < 8; i++, digits++) {
        char d = p[i];
        unsigned x;
        if (d >= '0' && d <= '9')
            x = (unsigned)(d - '0');
        else if (hex && d >= 'a' && d <= 'f')
            x = (unsigned)(d - 'a' + 10);
        else if (hex && d >= 'A' && d <= 'F')
            x = (unsigned)(d - 'A' + 10);
        else
            return -1;
        v = v * (hex ? 16u : 10u) + x;
    }
    if (digits == 0 || i >= left || p[i] != ';' || v == 0 || v >= 128)
        return -1;
    *c = (char)v;
    *used = i + 1;
    return 0;
}

int obj_xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap)
{
    if (body == NULL || tag == NULL || out == NULL || cap == 0)
        return -1;
    out[0] = '\0';
    size_t tl = strlen(tag);
    if (tl == 0 || tl > 64)
        return -1;
    char open[70];
    open[0] = '<';
    memcpy(open + 1, tag, tl);
    const char *end = body + len;
    const char *p = body;
    for (;;) {
        const char *s = find(p, (size_t)(end - p), open, tl + 1);
        if (s == NULL)
            return 0;
        const char *after = s + tl + 1;
        if (after >= end)
            return -1;
        if (*after != '>' && !is_blank(*after)) { /* <TagX...: another element */
            p = after;
            continue;
        }
        const char *gt = memchr(after, '>', (size_t)(end - after));
        if (gt == NULL)
            return -1;
        if (gt > after && gt[-1] == '/') { /* <Tag/>: empty */
            return 1;
        }
        const char *t = gt + 1;
        size_t n = 0;
        while (t < end && *t != '<') {
            char c = *t;
            size_t used = 1;
            if ((c == '&' && entity(t, end, &c, &used) != 0) ||
                ((unsigned char)c < 0x20 && !is_blank(c)) || n + 1 >= cap) {
                out[0] = '\0';
                return -1;
            }
            out[n++] = c;
            t += used;
        }
        out[n] = '\0';
        /* The text must end at </tag>. */
        if ((size_t)(end - t) < tl + 3 || t[1] != '/' || memcmp(t + 2, tag, tl) != 0 ||
            t[2 + tl] != '>') {
            out[0] = '\0';
            return -1;
        }
        return 1;
    }
}

int obj_xml_is_error(const char *body, size_t len)
{
    const char *p = body, *end = body + len;
    /* Skip blanks, the XML declaration and comments before the root. */
    for (;;) {
        while (p < end && is_blank(*p))
            p++;
        if ((size_t)(end - p) >= 2 && p[0] == '<' && (p[1] == '?' || p[1] == '!')) {
            const char *gt = memchr(p, '>', (size_t)(end - p));
            if (gt == NULL)
                return 0;
            p = gt + 1;
            continue;
        }
        break;
    }
    return (size_t)(end - p) >= 7 && memcmp(p, "<Error", 6) == 0 && (p[6] == '>' || is_blank(p[6]));
}

/* A decimal number below 2^63 at [*p, end): advances *p. 0 or -1. */
static int num(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;
    while (*p < end && **p >= '0' && **p <= '9') {
        if (v > (UINT64_C(1) << 59))
            return -1;
        v = v * 10 + (uint64_t)(**p - '0');
        (*p)++;
    }
    if (*p == s || v >= (UINT64_C(1) << 63))
        return -1;
    *out = v;
    return 0;
}

int obj_content_range(const char *v, size_t len, uint64_t *first, uint64_t *last, uint64_t *total)
{
    if (v == NULL)
        return -1;
    trim(&v, &len);
    const char *end = v + len;
    if (len < 6 || memcmp(v, "bytes", 5) != 0 || !is_blank(v[5]))
        return -1;
    const char *p = v + 6;
    while (p < end && is_blank(*p))
        p++;
    uint64_t a, b, t = UINT64_MAX;
    if (num(&p, end, &a) != 0 || p >= end || *p++ != '-' || num(&p, end, &b) != 0 || p >= end ||
        *p++ != '/')
        return -1;
    if (p < end && *p == '*')
        p++;
    else if (num(&p, end, &t) != 0)
        return -1;
    if (p != end || b < a || (t != UINT64_MAX && b >= t))
        return -1;
    *first = a;
    *last = b;
    *total = t;
    return 0;
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int obj_b64_crc(const char *v, size_t len, uint32_t *crc)
{
    if (v == NULL)
        return -1;
    trim(&v, &len);
    if (len > 8 && len <= 16 && v[8] == '-') { /* composite: "xxxxxx==-N" */
        for (size_t i = 9; i < len; i++)
            if (v[i] < '0' || v[i] > '9')
                return -1;
        return len > 9 ? 1 : -1;
    }
    if (len != 8 || v[6] != '=' || v[7] != '=')
        return -1;
    uint64_t bits = 0; /* 36 bits: a uint32_t would lose the checksum's top 4 */
    for (int i = 0; i < 6; i++) {
        int x = b64_val(v[i]);
        if (x < 0)
            return -1;
        bits = (bits << 6) | (uint64_t)x;
    }
    /* 6 characters carry 36 bits: 32 of the checksum and 4 zero bits. */
    if (bits & 0xf)
        return -1;
    *crc = (uint32_t)(bits >> 4);
    return 0;
}

size_t obj_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t need = 4 * ((n + 2) / 3);
    if (cap < need + 1) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

int obj_etag(const char *v, size_t len, char *out, size_t cap)
{
    if (v == NULL || cap == 0)
        return -1;
    trim(&v, &len);
    if (len == 0 || len >= cap)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char c = v[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '"' || c == '-'))
            return -1;
    }
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

/* ---- CRC-32C --------------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n)
{
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        crc_init(); /* idempotent: racing threads write the same values */
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction takes 3 cycles and can start one a cycle: one chain of them runs
 * at a third of the CPU's rate. So long buffers go as three interleaved chains over three
 * consecutive blocks of CRC_LANE bytes, joined by the linear "append CRC_LANE zero bytes"
 * operator (Mark Adler's crc32c.c): a 64 MiB PUT's checksum, computed before its first byte
 * is sent, took 20 ms as one chain on the 2-vCPU VM. */
#define CRC_LANE 8192

/* GF(2) 32x32 matrices as 32 columns: mat times vec. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

/* lane_shift[k][b]: the operator appending CRC_LANE zero bytes, applied to byte k of a CRC
 * register holding b there (crc_lane_init). */
static uint32_t lane_shift[4][256];

static void crc_lane_init(void)
{
    uint32_t odd[32], even[32];
    odd[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++)
        odd[n] = 1u << (n - 1);
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    gf2_square(even, odd); /* one zero byte */
    for (size_t len = CRC_LANE; len > 1; len >>= 1) {
        gf2_square(odd, even);
        memcpy(even, odd, sizeof(even));
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 0; k < 4; k++)
            lane_shift[k][b] = gf2_times(even, b << (8 * k));
}

static uint32_t lane_shift_of(uint32_t c)
{
    return lane_shift[0][c & 0xff] ^ lane_shift[1][(c >> 8) & 0xff] ^
           lane_shift[2][(c >> 16) & 0xff] ^ lane_shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c0 = c;
    if (n >= 3 * CRC_LANE) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, crc_lane_init);
        while (n >= 3 * CRC_LANE) {
            uint64_t c1 = 0, c2 = 0;
            for (const uint8_t *end = p + CRC_LANE; p < end; p += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p, 8);
                memcpy(&w1, p + CRC_LANE, 8);
                memcpy(&w2, p + 2 * CRC_LANE, 8);
                c0 = __builtin_ia32_crc32di(c0, w0);
                c1 = __builtin_ia32_crc32di(c1, w1);
                c2 = __builtin_ia32_crc32di(c2, w2);
            }
            /* The register after lane 0, moved past lane 1's bytes, plus lane 1's own: the
             * register after both (CRC without its pre- and post-inversion is linear). */
            c0 = lane_shift_of((uint32_t)c0) ^ (uint32_t)c1;
            c0 = lane_shift_of((uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * CRC_LANE;
            n -= 3 * CRC_LANE;
        }
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = __builtin_ia32_crc32di(c0, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c0;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t obj_crc32c(uint32_t crc, const void *buf, size_t len)
{
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc_hw(c, buf, len);
#endif
    return ~crc_soft(c, buf, len);
}

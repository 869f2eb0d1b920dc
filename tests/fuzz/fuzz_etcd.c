/*
 * The etcd client's parsers of what etcd returns (src/meta/etcd.c): heads, base64, head keys
 * seen by the watch, and the watch stream's line splitter. Oracle: no read outside the input
 * (ASan); what a parser accepts is canonical (formatting or encoding it again gives the input
 * back, within the documented limits); the splitter, fed in two pieces, hands out exactly the
 * complete lines of at most max bytes that a plain split of the whole input gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl_types.h>

#include "fuzz.h"
#include "meta/etcd.h"

#define REQUIRE(c)   \
    do {             \
        if (!(c))    \
            abort(); \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

struct collect {
    const uint8_t *data; /* the whole input, for the reference split */
    size_t size, max, pos;
    unsigned long lines;
};

/* Each line handed out must be the next complete line of at most max bytes of the input. */
static int on_line(void *ctx, const char *line, size_t len)
{
    struct collect *c = ctx;
    for (;;) {
        const uint8_t *nl = memchr(c->data + c->pos, '\n', c->size - c->pos);
        REQUIRE(nl != NULL);
        size_t l = (size_t)(nl - (c->data + c->pos));
        size_t at = c->pos;
        c->pos += l + 1;
        if (l > c->max)
            continue; /* dropped by the splitter */
        REQUIRE(l == len && memcmp(c->data + at, line, len) == 0);
        c->lines++;
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Head. */
    struct ixl_etcd_head h, g;
    if (ixl_etcd_head_parse((const char *)data, size, &h) == 0) {
        REQUIRE(h.len <= IXL_ETCD_MAX_BLOB && h.n <= IXL_ETCD_MAX_CHUNKS && h.n <= h.len);
        REQUIRE((h.n == 0) == (h.len == 0));
        char s[160];
        size_t n = ixl_etcd_head_format(&h, s, sizeof(s));
        REQUIRE(n > 0 && n < sizeof(s));
        REQUIRE(ixl_etcd_head_parse(s, n, &g) == 0 && g.ver == h.ver && g.n == h.n &&
                g.len == h.len && g.crc == h.crc && g.inc == h.inc);
    }

    /* Base64: accepted input is canonical; any bytes round-trip. */
    uint8_t *dec = malloc(size / 4 * 3 + 1);
    char *enc = malloc(4 * ((size + 2) / 3) + 1);
    REQUIRE(dec != NULL && enc != NULL);
    long dl = ixl_etcd_b64_decode((const char *)data, size, dec);
    if (dl >= 0) {
        char *re = malloc(4 * (((size_t)dl + 2) / 3) + 1);
        REQUIRE(re != NULL);
        ixl_etcd_b64_encode(dec, (size_t)dl, re);
        REQUIRE(strlen(re) == size && memcmp(re, data, size) == 0);
        free(re);
    }
    ixl_etcd_b64_encode(data, size, enc);
    uint8_t *back = malloc(size + 3);
    REQUIRE(back != NULL);
    REQUIRE(ixl_etcd_b64_decode(enc, strlen(enc), back) == (long)size);
    REQUIRE(size == 0 || memcmp(back, data, size) == 0);
    free(back);
    free(enc);
    free(dec);

    /* Head key (the part after "<ns>/md/"): accepted keys are canonical. */
    char agent[IXL_NAME_MAX], label[64];
    if (ixl_etcd_head_key_parse((const char *)data, size, agent, label) == 0) {
        size_t al = strlen(agent), ll = strlen(label);
        REQUIRE(al >= 1 && al < IXL_NAME_MAX && ll <= 63);
        char *k = malloc(al * 3 + ll + 8);
        REQUIRE(k != NULL);
        size_t o = 0;
        for (size_t i = 0; i < al; i++) {
            unsigned char ch = (unsigned char)agent[i];
            if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                ch == '_' || ch == '.' || ch == '-') {
                k[o++] = (char)ch;
            } else {
                k[o++] = '%';
                k[o++] = "0123456789ABCDEF"[ch >> 4];
                k[o++] = "0123456789ABCDEF"[ch & 15];
            }
        }
        o += (size_t)sprintf(k + o, ll ? "/l/%s" : "/f", label);
        REQUIRE(o == size && memcmp(k, data, size) == 0);
        free(k);
    }

    /* Line splitter: first byte picks the cut, second the line limit. */
    if (size >= 2) {
        const uint8_t *body = data + 2;
        size_t blen = size - 2;
        size_t cut = blen ? data[0] % (blen + 1) : 0;
        struct collect c = {.data = body, .size = blen, .max = data[1] % 64};
        struct ixl_etcd_lines l = {.max = c.max};
        REQUIRE(ixl_etcd_lines_feed(&l, (const char *)body, cut, on_line, &c) == 0);
        REQUIRE(ixl_etcd_lines_feed(&l, (const char *)body + cut, blen - cut, on_line, &c) == 0);
        REQUIRE(l.len <= c.max);
        /* Every complete line was seen: what is left is lines over max, then no newline. */
        const uint8_t *nl;
        while ((nl = memchr(body + c.pos, '\n', blen - c.pos)) != NULL) {
            REQUIRE((size_t)(nl - (body + c.pos)) > c.max);
            c.pos = (size_t)(nl - body) + 1;
        }
        ixl_etcd_lines_reset(&l);
    }

    /* crc32c chains. */
    size_t half = size / 2;
    REQUIRE(ixl_etcd_crc32c(ixl_etcd_crc32c(0, data, half), data + half, size - half) ==
            ixl_etcd_crc32c(0, data, size));
    return 0;
}

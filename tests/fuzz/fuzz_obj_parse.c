/*
 * The OBJ plugin's parsers of what an S3 server sends (plugins/obj/obj_parse.c): XML answers
 * (error documents, InitiateMultipartUploadResult), Content-Range, checksum and ETag headers.
 * The input's first byte picks what the rest is fed to as; every parser also sees the whole
 * input. Oracle: nothing is read outside the input (ASan), outputs stay within their buffers
 * and NUL-terminated, and what is accepted is consistent (a range's last byte >= its first, an
 * ETag holds only its allowed characters, a checksum round-trips through the encoder), and
 * CRC-32C (SSE4.2's three interleaved lanes for long buffers) equals a bitwise reference, whole
 * and continued from a split point the input picks, on the input and on the input repeated past
 * the length where the lanes start.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "obj_parse.h"

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

static void xml(const char *p, size_t n)
{
    static const char *const tags[] = {"Code", "Message", "UploadId", "Error", "ETag", "Key"};
    for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
        char out[64];
        memset(out, 0x7f, sizeof(out));
        int rc = obj_xml_text(p, n, tags[t], out, sizeof(out));
        REQUIRE(rc >= -1 && rc <= 1);
        REQUIRE(memchr(out, '\0', sizeof(out)) != NULL);
        if (rc == 1)
            for (const char *c = out; *c; c++)
                REQUIRE((unsigned char)*c >= 0x20 || *c == '\t' || *c == '\r' || *c == '\n');
    }
    REQUIRE(obj_xml_is_error(p, n) <= 1);
}

static void headers(const char *p, size_t n)
{
    uint64_t a = 7, b = 7, t = 7;
    if (obj_content_range(p, n, &a, &b, &t) == 0)
        REQUIRE(b >= a && (t == UINT64_MAX || b < t));
    uint32_t crc = 0;
    int rc = obj_b64_crc(p, n, &crc);
    REQUIRE(rc >= -1 && rc <= 1);
    if (rc == 0) {
        uint8_t be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                         (uint8_t)crc};
        char enc[16];
        REQUIRE(obj_b64_encode(be, 4, enc, sizeof(enc)) == 8);
        uint32_t back = 0;
        REQUIRE(obj_b64_crc(enc, 8, &back) == 0 && back == crc);
    }
    char etag[80];
    if (obj_etag(p, n, etag, sizeof(etag)) == 0) {
        REQUIRE(strlen(etag) > 0 && strlen(etag) < sizeof(etag));
        for (const char *c = etag; *c; c++)
            REQUIRE(strchr("<>&' \t\r\n", *c) == NULL);
    }
}

/* CRC-32C one bit at a time: the reference. */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void crc(const uint8_t *p, size_t n)
{
    uint32_t want = crc_ref(0, p, n);
    REQUIRE(obj_crc32c(0, p, n) == want);
    size_t split = n ? p[0] * n / 256 : 0;
    REQUIRE(obj_crc32c(obj_crc32c(0, p, split), p + split, n - split) == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so ASan catches a read one past the end. */
    char *p = malloc(size ? size : 1);
    if (p == NULL)
        return 0;
    memcpy(p, data, size);
    xml(p, size);
    headers(p, size);
    if (size > 0) {
        xml(p + 1, size - 1);
        headers(p + 1, size - 1);
    }
    crc((const uint8_t *)p, size);
    /* Past 3 x 8 KiB (the lanes' threshold), up to 64 KiB: the input over and over, the lanes
     * offset by its first byte. */
    size_t big = 3 * 8192 + (size ? (size_t)(uint8_t)p[0] * 157 : 1);
    uint8_t *b = size ? malloc(big) : NULL;
    if (b) {
        for (size_t i = 0; i < big; i++)
            b[i] = (uint8_t)(p[i % size] + i / size);
        crc(b, big);
        free(b);
    }
    free(p);
    return 0;
}

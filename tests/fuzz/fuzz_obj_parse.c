/*
 * The OBJ plugin's parsers of what an S3 server sends (plugins/obj/obj_parse.c): XML answers
 * (error documents, InitiateMultipartUploadResult), Content-Range, checksum and ETag headers.
 * The input's first byte picks what the rest is fed to as; every parser also sees the whole
 * input. Oracle: nothing is read outside the input (ASan), outputs stay within their buffers
 * and NUL-terminated, and what is accepted is consistent (a range's last byte >= its first, an
 * ETag holds only its allowed characters, a checksum round-trips through the encoder).
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
    (void)obj_crc32c(0, p, size);
    free(p);
    return 0;
}

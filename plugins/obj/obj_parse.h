/*
 * obj_parse.h - what the OBJ backend reads from an S3 server: XML answers (error bodies,
 * InitiateMultipartUploadResult), Content-Range and checksum headers. Every byte comes from the
 * server and is untrusted: each function reads at most len bytes (no NUL needed), writes at most
 * cap bytes (NUL-terminated), and answers malformed input with -1, never a crash
 * (tests/fuzz/fuzz_obj_parse.c). Plain C, no libcurl: the fuzz target compiles it alone.
 */
#ifndef IXL_OBJ_PARSE_H
#define IXL_OBJ_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The largest XML body the backend keeps (error bodies, multipart answers); past it a body is
 * cut and reads as malformed when what was looked for lies past the cut. */
#define OBJ_BODY_MAX (64 * 1024)

/*
 * The text of the first element <tag> (at any depth; attributes allowed; not self-closing) in
 * the XML body[0..len), with the five predefined entities and decimal/hex character references
 * below 128 decoded, into out (cap > 0 bytes, NUL-terminated). 1: found; 0: no such element;
 * -1: the element is malformed (unterminated, a nested element inside it, a bad entity, a
 * control character or NUL, or its text does not fit in cap).
 */
int obj_xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap);

/* Whether body looks like an S3 error document: its root element is <Error>. 1 or 0. */
int obj_xml_is_error(const char *body, size_t len);

/*
 * A Content-Range header value "bytes FIRST-LAST/TOTAL" (TOTAL may be "*"; blanks around the
 * value allowed): 0 with *first, *last, *total (UINT64_MAX for "*"), or -1 when malformed
 * (LAST < FIRST, numbers over 2^63, trailing bytes).
 */
int obj_content_range(const char *v, size_t len, uint64_t *first, uint64_t *last, uint64_t *total);

/*
 * A base64 checksum header value of exactly 4 bytes (x-amz-checksum-crc32c / -crc32: 8
 * characters with "==" padding; blanks around allowed) into *crc (big-endian, as S3 sends it):
 * 0, 1 when the value is a composite checksum of a multipart object ("...-N": not a checksum of
 * the bytes, nothing to verify), or -1 when malformed.
 */
int obj_b64_crc(const char *v, size_t len, uint32_t *crc);

/* Base64 of n bytes into out (cap >= 4 * ((n + 2) / 3) + 1). Returns the length. */
size_t obj_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap);

/* CRC-32C (Castagnoli), continued from crc (0 to start): SSE4.2 where the CPU has it. */
uint32_t obj_crc32c(uint32_t crc, const void *buf, size_t len);

/* An ETag header value as S3 sends it ("\"hex\"" or a "hex-N" multipart one) copied into out
 * when it is 1..cap-1 characters of [A-Za-z0-9"-] (so it can go into XML unescaped): 0, else
 * -1. */
int obj_etag(const char *v, size_t len, char *out, size_t cap);

#endif

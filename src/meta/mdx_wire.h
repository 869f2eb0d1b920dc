/*
 * The metadata-exchange protocol between agents' listeners (peer mode). One request and one
 * reply per connection; every frame is a 16-byte header and a body:
 *
 *   header  "IXLX" u8 version(2) u8 type u16 0 u32 body_len u32 0        (little-endian)
 *   SEND    str sender, str label, bytes rest = metadata blob (ixl_md_get)
 *   FETCH   str wanted agent, str label, str requester, u16 requester's listener port (0: none)
 *   INVAL   str agent, u64 incarnation (never 0)
 *   REPLY   i32 status, str message, bytes rest = metadata blob (FETCH) or nothing
 *   HELLO   u8 listener's mode (enum ixl_auth_mode), u8 nonce[16] (zeros without a key)
 *   PROOF   u8 nonce[16], u8 mac[32]
 *   PROVEN  u8 mac[32]
 *
 * A connection (src/meta/exchange.c, docs/metadata.md): the listener sends HELLO at accept
 * (or a REPLY refusing the connection, then closes). Without a key the client then sends its
 * request and reads the REPLY. With a key, the client first sends PROOF (its nonce, and the
 * MAC of both nonces under IXL_MDX_CLIENT_LABEL), the listener answers PROVEN (the MAC of both
 * under IXL_MDX_LISTENER_LABEL) or a REPLY refusing it; then the request and its REPLY each
 * carry 32 more bytes at the end of the body: the MAC under IXL_MDX_REQUEST_LABEL /
 * IXL_MDX_REPLY_LABEL of both nonces, the frame's header and the rest of its body.
 *
 * str = u16 length + bytes (no NUL inside; names 1..IXL_NAME_MAX-1 bytes, labels 0..63,
 * messages 0..511). Everything received is untrusted: the decoders check every length
 * against what is left and reject trailing bytes; bodies over IXL_MDX_MAX_BODY are refused
 * from the header alone, before anything is allocated.
 */
#ifndef IXL_META_MDX_WIRE_H
#define IXL_META_MDX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define IXL_MDX_MAGIC 0x584c5849u /* "IXLX" */
#define IXL_MDX_VERSION 2
#define IXL_MDX_HDR 16
#define IXL_MDX_MAX_BODY ((uint32_t)256 << 20)
#define IXL_MDX_LABEL_MAX 63
#define IXL_MDX_MSG_MAX 511

#define IXL_MDX_NONCE 16
#define IXL_MDX_MAC 32
/* Domain labels of the MACs of a keyed connection. */
#define IXL_MDX_CLIENT_LABEL "ixl mdx client proof v2"
#define IXL_MDX_LISTENER_LABEL "ixl mdx listener proof v2"
#define IXL_MDX_REQUEST_LABEL "ixl mdx request v2"
#define IXL_MDX_REPLY_LABEL "ixl mdx reply v2"

enum mdx_type {
    MDX_SEND = 1,
    MDX_FETCH = 2,
    MDX_INVAL = 3,
    MDX_REPLY = 4,
    MDX_HELLO = 5,
    MDX_PROOF = 6,
    MDX_PROVEN = 7,
};

struct mdx_str {
    const char *p; /* points into the body; not NUL-terminated */
    size_t n;
};

struct mdx_msg {
    enum mdx_type type;
    struct mdx_str name;  /* SEND: sender; FETCH: wanted; INVAL: agent */
    struct mdx_str label; /* SEND, FETCH */
    struct mdx_str from;  /* FETCH: requester */
    uint16_t port;        /* FETCH: requester's listener */
    uint64_t incarnation; /* INVAL */
    int32_t status;       /* REPLY */
    struct mdx_str text;  /* REPLY */
    const uint8_t *blob;  /* SEND, REPLY: the rest of the body */
    size_t blob_len;
    uint8_t mode;         /* HELLO */
    const uint8_t *nonce; /* HELLO, PROOF: IXL_MDX_NONCE bytes */
    const uint8_t *mac;   /* PROOF, PROVEN: IXL_MDX_MAC bytes */
};

/* Checks a header: 0 and the type and body length, or -1 (bad magic, version, type, or a
 * body over max_body). */
int mdx_header_decode(const uint8_t hdr[IXL_MDX_HDR], uint32_t max_body, enum mdx_type *type,
                      uint32_t *body_len);
/* Decodes a body of the given type: 0, or -1 when it is malformed. */
int mdx_decode(enum mdx_type type, const uint8_t *body, size_t len, struct mdx_msg *out);
/* Encodes m as header + body into a malloc'd buffer (*len bytes); NULL on a bad field or
 * no memory. */
uint8_t *mdx_encode(const struct mdx_msg *m, size_t *len);
/* The same with extra more bytes at the end of the body (counted in its length, zeroed): room
 * for a keyed connection's MAC, which covers the frame before it. */
uint8_t *mdx_encode_extra(const struct mdx_msg *m, size_t extra, size_t *len);
/* Encodes a reply without a blob into buf (cap bytes), allocating nothing: the answer a
 * server still gives when it runs out of memory. extra: as mdx_encode_extra's. Its length
 * (extra included), or 0 if it does not fit. */
size_t mdx_encode_reply_into(int status, const char *text, size_t extra, uint8_t *buf, size_t cap);
/* A NUL-terminated copy of s into buf (cap bytes); -1 if it does not fit. */
int mdx_str_copy(struct mdx_str s, char *buf, size_t cap);

#endif

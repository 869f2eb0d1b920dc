/*
 * The binary codecs of ixl: agent metadata and descriptor lists. Little-endian, versioned,
 * every length checked against what is left before it is used: the bytes come from other
 * processes and are untrusted. Decoded metadata points into the input buffer (no copies).
 *
 * Metadata, version 1:
 *   "IXLM" u16 version u16 flags u64 incarnation
 *   u16 name_len, name                      (1..IXL_NAME_MAX-1 bytes, no NUL)
 *   u16 n_backends, each: u8 name_len, name (1..31), u32 conn_len, conn
 *   u32 n_regions, each: u16 backend (< n_backends), u8 mem type, u64 addr, u64 len, u64 dev,
 *                        u32 pub_len, pub
 *   [flags & LABEL] u16 label_len, label
 *   [flags & MAC] u8 mac[32]: HMAC-SHA-256 under the cluster key (src/util/auth.h), label
 *                 IXL_MD_MAC_LABEL, of every byte before it (the header with this flag
 *                 included); written by an agent with a key, required by one (ixl_md_load)
 *   nothing after.
 * Descriptor list, version 1:
 *   "IXLD" u16 version u8 mem type u8 0 u64 n_runs, each: u64 addr len stride count dev
 */
#ifndef IXL_SERDES_CODEC_H
#define IXL_SERDES_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl.h>

#define IXL_MD_VERSION 1
#define IXL_DLIST_VERSION 1
/* The most backends a metadata blob may list: an agent holds at most this many. */
#define IXL_MD_MAX_BACKENDS 16

enum ixl_md_flags {
    IXL_MDF_CONN = 1u << 0,    /* carries connection info */
    IXL_MDF_PARTIAL = 1u << 1, /* only some regions */
    IXL_MDF_LABEL = 1u << 2,   /* ends with a label */
    IXL_MDF_MAC = 1u << 3,     /* ends with a MAC under the cluster key */
};

/* The domain-separation label of a metadata blob's MAC (ixl_auth_mac). */
#define IXL_MD_MAC_LABEL "ixl metadata blob v1"
#define IXL_MD_MAC_LEN 32

/* ---- writer ---------------------------------------------------------------------------- */

struct ixl_wbuf {
    uint8_t *data;
    size_t len, cap;
    int failed;  /* an allocation failed: the buffer is unusable */
    int scratch; /* data is a block of ixl_scratch_take (util/scratch.h), not malloc's */
};

void ixl_wb_u8(struct ixl_wbuf *w, uint8_t v);
void ixl_wb_u16(struct ixl_wbuf *w, uint16_t v);
void ixl_wb_u32(struct ixl_wbuf *w, uint32_t v);
void ixl_wb_u64(struct ixl_wbuf *w, uint64_t v);
void ixl_wb_bytes(struct ixl_wbuf *w, const void *p, size_t n);

/* ---- reader ---------------------------------------------------------------------------- */

struct ixl_rbuf {
    const uint8_t *p;
    size_t left;
    int failed; /* a read went past the end: every later read returns 0 */
};

uint8_t ixl_rb_u8(struct ixl_rbuf *r);
uint16_t ixl_rb_u16(struct ixl_rbuf *r);
uint32_t ixl_rb_u32(struct ixl_rbuf *r);
uint64_t ixl_rb_u64(struct ixl_rbuf *r);
/* Returns a pointer to the next n bytes and skips them, or NULL (and fails) if fewer are left. */
const uint8_t *ixl_rb_bytes(struct ixl_rbuf *r, size_t n);

/* ---- metadata ------------------------------------------------------------------------- */

struct ixl_md_backend {
    const char *name; /* not NUL-terminated: name_len bytes */
    size_t name_len;
    const uint8_t *conn;
    size_t conn_len;
};

struct ixl_md_region {
    unsigned backend;
    enum ixl_mem type;
    uint64_t addr, len, dev;
    const uint8_t *pub;
    size_t pub_len;
};

struct ixl_md_decoded {
    uint16_t version;
    uint16_t flags;
    uint64_t incarnation;
    char name[IXL_NAME_MAX];
    size_t n_backends;
    struct ixl_md_backend *backends;
    size_t n_regions;
    struct ixl_md_region *regions;
    const char *label;
    size_t label_len;
    const uint8_t *mac; /* flags & MAC: the trailer's IXL_MD_MAC_LEN bytes; else NULL */
    size_t signed_len;  /* the bytes the MAC covers (every byte before it) */
};

/* Decodes a metadata blob. IXL_ERR_MALFORMED (with why filled) for anything wrong. Free with
 * ixl_md_decoded_free(). */
int ixl_md_decode(const void *buf, size_t len, struct ixl_md_decoded *out, char *why, size_t cap);
void ixl_md_decoded_free(struct ixl_md_decoded *md);

/* Encoding helpers: header, then backends, then regions, then the optional label. */
void ixl_md_encode_header(struct ixl_wbuf *w, uint16_t flags, uint64_t incarnation,
                          const char *name);
void ixl_md_encode_backend(struct ixl_wbuf *w, const char *name, const void *conn, size_t len);
void ixl_md_encode_region(struct ixl_wbuf *w, unsigned backend, enum ixl_mem type, uint64_t addr,
                          uint64_t len, uint64_t dev, const void *pub, size_t pub_len);
/* Offsets of the two counts, patched once the entries are written. */
size_t ixl_md_encode_count16(struct ixl_wbuf *w);
size_t ixl_md_encode_count32(struct ixl_wbuf *w);
void ixl_md_patch_count16(struct ixl_wbuf *w, size_t at, uint16_t v);
void ixl_md_patch_count32(struct ixl_wbuf *w, size_t at, uint32_t v);

#endif

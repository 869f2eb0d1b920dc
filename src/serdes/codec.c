#include "serdes/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dlist.h"
#include "util/scratch.h"
#include "util/sys.h"

/* ---- writer ---------------------------------------------------------------------------- */

static uint8_t *wb_room(struct ixl_wbuf *w, size_t n)
{
    if (w->failed)
        return NULL;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *d;
        if (w->scratch) { /* a kept block: a larger one, then the old one back */
            d = ixl_scratch_take(cap);
            if (d != NULL) {
                if (w->len > 0)
                    memcpy(d, w->data, w->len);
                ixl_scratch_give(w->data);
                cap = ixl_scratch_cap(d);
            }
        } else {
            d = sys_realloc(w->data, cap);
        }
        if (d == NULL) {
            w->failed = 1;
            return NULL;
        }
        w->data = d;
        w->cap = cap;
    }
    uint8_t *p = w->data + w->len;
    w->len += n;
    return p;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void wb_le(struct ixl_wbuf *w, uint64_t v, int n)
{
    uint8_t *p = wb_room(w, (size_t)n);
    if (p)
        put_le(p, v, n);
}

void ixl_wb_u8(struct ixl_wbuf *w, uint8_t v)
{
    wb_le(w, v, 1);
}

void ixl_wb_u16(struct ixl_wbuf *w, uint16_t v)
{
    wb_le(w, v, 2);
}

void ixl_wb_u32(struct ixl_wbuf *w, uint32_t v)
{
    wb_le(w, v, 4);
}

void ixl_wb_u64(struct ixl_wbuf *w, uint64_t v)
{
    wb_le(w, v, 8);
}

void ixl_wb_bytes(struct ixl_wbuf *w, const void *p, size_t n)
{
    uint8_t *d = wb_room(w, n);
    if (d && n)
        memcpy(d, p, n);
}

/* ---- reader ---------------------------------------------------------------------------- */

const uint8_t *ixl_rb_bytes(struct ixl_rbuf *r, size_t n)
{
    if (r->failed || n > r->left) {
        r->failed = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t rb_le(struct ixl_rbuf *r, int n)
{
    const uint8_t *p = ixl_rb_bytes(r, (size_t)n);
    return p ? get_le(p, n) : 0;
}

uint8_t ixl_rb_u8(struct ixl_rbuf *r)
{
    return (uint8_t)rb_le(r, 1);
}

uint16_t ixl_rb_u16(struct ixl_rbuf *r)
{
    return (uint16_t)rb_le(r, 2);
}

uint32_t ixl_rb_u32(struct ixl_rbuf *r)
{
    return (uint32_t)rb_le(r, 4);
}

uint64_t ixl_rb_u64(struct ixl_rbuf *r)
{
    return rb_le(r, 8);
}

/* ---- metadata ------------------------------------------------------------------------- */

void ixl_md_encode_header(struct ixl_wbuf *w, uint16_t flags, uint64_t incarnation,
                          const char *name)
{
    size_t n = strlen(name);
    ixl_wb_bytes(w, "IXLM", 4);
    ixl_wb_u16(w, IXL_MD_VERSION);
    ixl_wb_u16(w, flags);
    ixl_wb_u64(w, incarnation);
    ixl_wb_u16(w, (uint16_t)n);
    ixl_wb_bytes(w, name, n);
}

void ixl_md_encode_backend(struct ixl_wbuf *w, const char *name, const void *conn, size_t len)
{
    size_t n = strlen(name);
    ixl_wb_u8(w, (uint8_t)n);
    ixl_wb_bytes(w, name, n);
    ixl_wb_u32(w, (uint32_t)len);
    ixl_wb_bytes(w, conn, len);
}

void ixl_md_encode_region(struct ixl_wbuf *w, unsigned backend, enum ixl_mem type, uint64_t addr,
                          uint64_t len, uint64_t dev, const void *pub, size_t pub_len)
{
    ixl_wb_u16(w, (uint16_t)backend);
    ixl_wb_u8(w, (uint8_t)type);
    ixl_wb_u64(w, addr);
    ixl_wb_u64(w, len);
    ixl_wb_u64(w, dev);
    ixl_wb_u32(w, (uint32_t)pub_len);
    ixl_wb_bytes(w, pub, pub_len);
}

size_t ixl_md_encode_count16(struct ixl_wbuf *w)
{
    size_t at = w->len;
    ixl_wb_u16(w, 0);
    return at;
}

size_t ixl_md_encode_count32(struct ixl_wbuf *w)
{
    size_t at = w->len;
    ixl_wb_u32(w, 0);
    return at;
}

void ixl_md_patch_count16(struct ixl_wbuf *w, size_t at, uint16_t v)
{
    if (!w->failed)
        put_le(w->data + at, v, 2);
}

void ixl_md_patch_count32(struct ixl_wbuf *w, size_t at, uint32_t v)
{
    if (!w->failed)
        put_le(w->data + at, v, 4);
}

#define REGION_MIN_BYTES (2 + 1 + 8 + 8 + 8 + 4)
#define BACKEND_MIN_BYTES (1 + 1 + 4)

static int malformed(char *why, size_t cap, const char *what)
{
    snprintf(why, cap, "malformed metadata: %s", what);
    return IXL_ERR_MALFORMED;
}

void ixl_md_decoded_free(struct ixl_md_decoded *md)
{
    if (md == NULL)
        return;
    free(md->backends);
    ixl_scratch_give(md->regions);
    md->backends = NULL;
    md->regions = NULL;
}

static int plugin_name_ok(const uint8_t *s, size_t n)
{
    if (n == 0 || n > 31)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

int ixl_md_decode(const void *buf, size_t len, struct ixl_md_decoded *out, char *why, size_t cap)
{
    struct ixl_rbuf r = {buf, len, 0};
    memset(out, 0, sizeof(*out));
    if (buf == NULL)
        return malformed(why, cap, "no bytes");
    const uint8_t *magic = ixl_rb_bytes(&r, 4);
    if (magic == NULL || memcmp(magic, "IXLM", 4) != 0)
        return malformed(why, cap, "not ixl metadata (bad magic)");
    out->version = ixl_rb_u16(&r);
    out->flags = ixl_rb_u16(&r);
    out->incarnation = ixl_rb_u64(&r);
    if (r.failed)
        return malformed(why, cap, "truncated header");
    if (out->version != IXL_MD_VERSION) {
        snprintf(why, cap, "metadata version %u, this ixl reads version %u", out->version,
                 IXL_MD_VERSION);
        return IXL_ERR_MALFORMED;
    }
    if (out->flags & ~(uint16_t)(IXL_MDF_CONN | IXL_MDF_PARTIAL | IXL_MDF_LABEL | IXL_MDF_MAC))
        return malformed(why, cap, "unknown flags");
    if (out->flags & IXL_MDF_MAC) { /* the trailer is set aside; the rest parses as before */
        if (r.left < IXL_MD_MAC_LEN)
            return malformed(why, cap, "truncated MAC");
        r.left -= IXL_MD_MAC_LEN;
        out->signed_len = len - IXL_MD_MAC_LEN;
        out->mac = (const uint8_t *)buf + out->signed_len;
    }
    uint16_t nlen = ixl_rb_u16(&r);
    const uint8_t *name = ixl_rb_bytes(&r, nlen);
    if (name == NULL || nlen == 0 || nlen >= IXL_NAME_MAX || memchr(name, 0, nlen))
        return malformed(why, cap, "bad agent name");
    memcpy(out->name, name, nlen);
    out->name[nlen] = '\0';

    size_t nb = ixl_rb_u16(&r);
    if (r.failed || nb > r.left / BACKEND_MIN_BYTES)
        return malformed(why, cap, "backend count exceeds the bytes left");
    /* No agent holds more backends; the bound also keeps the duplicate check below cheap. */
    if (nb > IXL_MD_MAX_BACKENDS)
        return malformed(why, cap, "more backends than an agent can hold");
    out->backends = sys_calloc(nb ? nb : 1, sizeof(*out->backends));
    if (out->backends == NULL)
        return IXL_ERR_NO_MEMORY;
    out->n_backends = nb;
    for (size_t i = 0; i < nb; i++) {
        struct ixl_md_backend *b = &out->backends[i];
        b->name_len = ixl_rb_u8(&r);
        const uint8_t *bn = ixl_rb_bytes(&r, b->name_len);
        if (bn == NULL || !plugin_name_ok(bn, b->name_len))
            goto bad_backend;
        b->name = (const char *)bn;
        for (size_t j = 0; j < i; j++)
            if (out->backends[j].name_len == b->name_len &&
                memcmp(out->backends[j].name, bn, b->name_len) == 0)
                goto bad_backend;
        b->conn_len = ixl_rb_u32(&r);
        b->conn = ixl_rb_bytes(&r, b->conn_len);
        if (b->conn == NULL)
            goto bad_backend;
    }

    size_t nr = ixl_rb_u32(&r);
    if (r.failed || nr > r.left / REGION_MIN_BYTES) {
        ixl_md_decoded_free(out);
        return malformed(why, cap, "region count exceeds the bytes left");
    }
    /* A kept block (every field of every entry is set below): a load of 10^4 regions no longer
     * faults half a megabyte in again each time. */
    out->regions = ixl_scratch_take((nr ? nr : 1) * sizeof(*out->regions));
    if (out->regions == NULL) {
        ixl_md_decoded_free(out);
        return IXL_ERR_NO_MEMORY;
    }
    out->n_regions = nr;
    for (size_t i = 0; i < nr; i++) {
        struct ixl_md_region *g = &out->regions[i];
        g->backend = ixl_rb_u16(&r);
        uint8_t type = ixl_rb_u8(&r);
        g->addr = ixl_rb_u64(&r);
        g->len = ixl_rb_u64(&r);
        g->dev = ixl_rb_u64(&r);
        g->pub_len = ixl_rb_u32(&r);
        g->pub = ixl_rb_bytes(&r, g->pub_len);
        if (r.failed) {
            ixl_md_decoded_free(out);
            return malformed(why, cap, "truncated region");
        }
        if (g->backend >= nb || type >= IXL_MEM_COUNT || g->len == 0 ||
            g->len > UINT64_MAX - g->addr) {
            ixl_md_decoded_free(out);
            snprintf(why, cap, "malformed metadata: region %zu has a bad backend, type or range",
                     i);
            return IXL_ERR_MALFORMED;
        }
        g->type = (enum ixl_mem)type;
    }
    if (out->flags & IXL_MDF_LABEL) {
        out->label_len = ixl_rb_u16(&r);
        out->label = (const char *)ixl_rb_bytes(&r, out->label_len);
        if (out->label == NULL) {
            ixl_md_decoded_free(out);
            return malformed(why, cap, "truncated label");
        }
    }
    if (r.left != 0) {
        ixl_md_decoded_free(out);
        return malformed(why, cap, "trailing bytes");
    }
    return IXL_OK;

bad_backend:
    ixl_md_decoded_free(out);
    return malformed(why, cap, "bad backend entry (name, duplicate or connection info)");
}

/* ---- descriptor lists ------------------------------------------------------------------ */

#define RUN_BYTES 40

ixl_status ixl_dlist_serialize(const struct ixl_dlist *list, void **out, size_t *out_len)
{
    if (list == NULL || out == NULL || out_len == NULL)
        return IXL_ERR_INVALID_ARG;
    struct ixl_wbuf w = {0};
    ixl_wb_bytes(&w, "IXLD", 4);
    ixl_wb_u16(&w, IXL_DLIST_VERSION);
    ixl_wb_u8(&w, (uint8_t)list->type);
    ixl_wb_u8(&w, 0);
    ixl_wb_u64(&w, list->n_runs);
    for (size_t i = 0; i < list->n_runs; i++) {
        const struct ixl_run *r = &list->runs[i];
        ixl_wb_u64(&w, r->addr);
        ixl_wb_u64(&w, r->len);
        ixl_wb_u64(&w, r->stride);
        ixl_wb_u64(&w, r->count);
        ixl_wb_u64(&w, r->dev);
    }
    if (w.failed) {
        free(w.data);
        return IXL_ERR_NO_MEMORY;
    }
    *out = w.data;
    *out_len = w.len;
    return IXL_OK;
}

ixl_status ixl_dlist_deserialize(const void *buf, size_t len, struct ixl_dlist **out)
{
    if (buf == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    struct ixl_rbuf r = {buf, len, 0};
    const uint8_t *magic = ixl_rb_bytes(&r, 4);
    uint16_t version = ixl_rb_u16(&r);
    uint8_t type = ixl_rb_u8(&r);
    uint8_t pad = ixl_rb_u8(&r);
    uint64_t n = ixl_rb_u64(&r);
    if (r.failed || memcmp(magic, "IXLD", 4) != 0 || version != IXL_DLIST_VERSION ||
        type >= IXL_MEM_COUNT || pad != 0 || n != r.left / RUN_BYTES || r.left % RUN_BYTES)
        return IXL_ERR_MALFORMED;
    struct ixl_dlist *l;
    int rc = ixl_dlist_create((enum ixl_mem)type, (size_t)n, &l);
    if (rc != IXL_OK)
        return rc;
    for (uint64_t i = 0; i < n; i++) {
        struct ixl_run run;
        run.addr = ixl_rb_u64(&r);
        run.len = ixl_rb_u64(&r);
        run.stride = ixl_rb_u64(&r);
        run.count = ixl_rb_u64(&r);
        run.dev = ixl_rb_u64(&r);
        rc = ixl_dlist_add_runs(l, &run, 1);
        if (rc != IXL_OK) {
            ixl_dlist_destroy(l);
            return rc == IXL_ERR_NO_MEMORY ? rc : IXL_ERR_MALFORMED;
        }
    }
    *out = l;
    return IXL_OK;
}

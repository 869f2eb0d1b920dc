#include "meta/mdx_wire.h"

#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "serdes/codec.h"

static int str_ok(struct mdx_str s, size_t lo, size_t hi)
{
    return s.n >= lo && s.n <= hi && (s.n == 0 || memchr(s.p, '\0', s.n) == NULL);
}

static struct mdx_str rb_str(struct ixl_rbuf *r)
{
    struct mdx_str s = {NULL, ixl_rb_u16(r)};
    s.p = (const char *)ixl_rb_bytes(r, s.n);
    if (s.p == NULL)
        s.n = 0;
    return s;
}

int mdx_header_decode(const uint8_t hdr[IXL_MDX_HDR], uint32_t max_body, enum mdx_type *type,
                      uint32_t *body_len)
{
    struct ixl_rbuf r = {hdr, IXL_MDX_HDR, 0};
    uint32_t magic = ixl_rb_u32(&r);
    uint8_t version = ixl_rb_u8(&r), t = ixl_rb_u8(&r);
    uint16_t zero = ixl_rb_u16(&r);
    uint32_t len = ixl_rb_u32(&r), zero2 = ixl_rb_u32(&r);
    if (magic != IXL_MDX_MAGIC || version != IXL_MDX_VERSION || t < MDX_SEND || t > MDX_PROVEN ||
        zero != 0 || zero2 != 0 || len > max_body || len > IXL_MDX_MAX_BODY)
        return -1;
    *type = (enum mdx_type)t;
    *body_len = len;
    return 0;
}

int mdx_decode(enum mdx_type type, const uint8_t *body, size_t len, struct mdx_msg *out)
{
    struct ixl_rbuf r = {body, len, 0};
    memset(out, 0, sizeof(*out));
    out->type = type;
    int rest_is_blob = 0;
    switch (type) {
    case MDX_SEND:
        out->name = rb_str(&r);
        out->label = rb_str(&r);
        if (!str_ok(out->name, 1, IXL_NAME_MAX - 1) || !str_ok(out->label, 0, IXL_MDX_LABEL_MAX))
            return -1;
        rest_is_blob = 1;
        break;
    case MDX_FETCH:
        out->name = rb_str(&r);
        out->label = rb_str(&r);
        out->from = rb_str(&r);
        out->port = ixl_rb_u16(&r);
        if (!str_ok(out->name, 1, IXL_NAME_MAX - 1) || !str_ok(out->label, 0, IXL_MDX_LABEL_MAX) ||
            !str_ok(out->from, 1, IXL_NAME_MAX - 1))
            return -1;
        break;
    case MDX_INVAL:
        out->name = rb_str(&r);
        out->incarnation = ixl_rb_u64(&r);
        if (!str_ok(out->name, 1, IXL_NAME_MAX - 1))
            return -1;
        break;
    case MDX_REPLY:
        out->status = (int32_t)ixl_rb_u32(&r);
        out->text = rb_str(&r);
        if (!str_ok(out->text, 0, IXL_MDX_MSG_MAX) || out->status > 0 || out->status < -1000)
            return -1;
        rest_is_blob = 1;
        break;
    case MDX_HELLO:
        out->mode = ixl_rb_u8(&r);
        out->nonce = ixl_rb_bytes(&r, IXL_MDX_NONCE);
        if (out->mode > 2)
            return -1;
        break;
    case MDX_PROOF:
        out->nonce = ixl_rb_bytes(&r, IXL_MDX_NONCE);
        out->mac = ixl_rb_bytes(&r, IXL_MDX_MAC);
        break;
    case MDX_PROVEN:
        out->mac = ixl_rb_bytes(&r, IXL_MDX_MAC);
        break;
    default:
        return -1;
    }
    if (r.failed)
        return -1;
    if (rest_is_blob) {
        out->blob = r.p;
        out->blob_len = r.left;
    } else if (r.left != 0) {
        return -1;
    }
    return 0;
}

static void wb_str(struct ixl_wbuf *w, struct mdx_str s)
{
    ixl_wb_u16(w, (uint16_t)s.n);
    if (s.n)
        ixl_wb_bytes(w, s.p, s.n);
}

uint8_t *mdx_encode(const struct mdx_msg *m, size_t *len)
{
    return mdx_encode_extra(m, 0, len);
}

uint8_t *mdx_encode_extra(const struct mdx_msg *m, size_t extra, size_t *len)
{
    struct ixl_wbuf w = {0};
    ixl_wb_u32(&w, IXL_MDX_MAGIC);
    ixl_wb_u8(&w, IXL_MDX_VERSION);
    ixl_wb_u8(&w, (uint8_t)m->type);
    ixl_wb_u16(&w, 0);
    ixl_wb_u32(&w, 0); /* body length, patched below */
    ixl_wb_u32(&w, 0);
    int ok = 1;
    switch (m->type) {
    case MDX_SEND:
        ok = str_ok(m->name, 1, IXL_NAME_MAX - 1) && str_ok(m->label, 0, IXL_MDX_LABEL_MAX);
        wb_str(&w, m->name);
        wb_str(&w, m->label);
        break;
    case MDX_FETCH:
        ok = str_ok(m->name, 1, IXL_NAME_MAX - 1) && str_ok(m->label, 0, IXL_MDX_LABEL_MAX) &&
             str_ok(m->from, 1, IXL_NAME_MAX - 1);
        wb_str(&w, m->name);
        wb_str(&w, m->label);
        wb_str(&w, m->from);
        ixl_wb_u16(&w, m->port);
        break;
    case MDX_INVAL:
        ok = str_ok(m->name, 1, IXL_NAME_MAX - 1);
        wb_str(&w, m->name);
        ixl_wb_u64(&w, m->incarnation);
        break;
    case MDX_REPLY: {
        struct mdx_str t = m->text;
        if (t.n > IXL_MDX_MSG_MAX)
            t.n = IXL_MDX_MSG_MAX; /* a long local message is cut, not refused */
        ok = str_ok(t, 0, IXL_MDX_MSG_MAX) && m->status <= 0 && m->status >= -1000;
        ixl_wb_u32(&w, (uint32_t)m->status);
        wb_str(&w, t);
        break;
    }
    case MDX_HELLO:
        ok = m->mode <= 2 && m->nonce != NULL;
        ixl_wb_u8(&w, m->mode);
        if (ok)
            ixl_wb_bytes(&w, m->nonce, IXL_MDX_NONCE);
        break;
    case MDX_PROOF:
        ok = m->nonce != NULL && m->mac != NULL;
        if (ok) {
            ixl_wb_bytes(&w, m->nonce, IXL_MDX_NONCE);
            ixl_wb_bytes(&w, m->mac, IXL_MDX_MAC);
        }
        break;
    case MDX_PROVEN:
        ok = m->mac != NULL;
        if (ok)
            ixl_wb_bytes(&w, m->mac, IXL_MDX_MAC);
        break;
    default:
        ok = 0;
    }
    if (ok && (m->type == MDX_SEND || m->type == MDX_REPLY) && m->blob_len)
        ixl_wb_bytes(&w, m->blob, m->blob_len);
    for (size_t i = 0; ok && i < extra && extra <= IXL_MDX_MAC; i++)
        ixl_wb_u8(&w, 0); /* room for a MAC, filled by the caller */
    if (!ok || w.failed || extra > IXL_MDX_MAC || w.len - IXL_MDX_HDR > IXL_MDX_MAX_BODY) {
        free(w.data);
        return NULL;
    }
    uint32_t body = (uint32_t)(w.len - IXL_MDX_HDR);
    for (int i = 0; i < 4; i++)
        w.data[8 + i] = (uint8_t)(body >> (8 * i));
    *len = w.len;
    return w.data;
}

size_t mdx_encode_reply_into(int status, const char *text, size_t extra, uint8_t *buf, size_t cap)
{
    size_t n = strlen(text);
    if (n > IXL_MDX_MSG_MAX || extra > cap || IXL_MDX_HDR + 6 + n > cap - extra || status > 0 ||
        status < -1000)
        return 0;
    /* a writer on buf with room for everything never reallocates it */
    struct ixl_wbuf w = {.data = buf, .len = 0, .cap = cap};
    ixl_wb_u32(&w, IXL_MDX_MAGIC);
    ixl_wb_u8(&w, IXL_MDX_VERSION);
    ixl_wb_u8(&w, (uint8_t)MDX_REPLY);
    ixl_wb_u16(&w, 0);
    ixl_wb_u32(&w, (uint32_t)(6 + n + extra));
    ixl_wb_u32(&w, 0);
    ixl_wb_u32(&w, (uint32_t)status);
    wb_str(&w, (struct mdx_str){text, n});
    memset(buf + w.len, 0, extra);
    return w.len + extra;
}

int mdx_str_copy(struct mdx_str s, char *buf, size_t cap)
{
    if (s.n + 1 > cap)
        return -1;
    if (s.n)
        memcpy(buf, s.p, s.n);
    buf[s.n] = '\0';
    return 0;
}

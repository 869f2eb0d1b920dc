/* UCX plugin: wire formats beside UCX's own (see ucx_wire.h). */
#include "ucx_wire.h"

#include <stdlib.h>
#include <string.h>

#include "../common/ixl_plugin_util.h"

uint32_t ucx_fnv32(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return (uint32_t)h;
}

static void *wrap_v(uint32_t magic, uint32_t version, const void *payload, size_t len,
                    size_t *out_len)
{
    if (len == 0 || len > UINT32_MAX)
        return NULL;
    unsigned char *b = malloc(UCX_HDR_LEN + len);
    if (b == NULL)
        return NULL;
    ixlp_put_le(b, magic, 4);
    ixlp_put_le(b + 4, version, 4);
    ixlp_put_le(b + 8, (uint32_t)len, 4);
    ixlp_put_le(b + 12, ucx_fnv32(payload, len), 4);
    memcpy(b + UCX_HDR_LEN, payload, len);
    *out_len = UCX_HDR_LEN + len;
    return b;
}

static const void *unwrap_v(uint32_t magic, uint32_t version, const void *bytes, size_t len,
                            size_t *out_len)
{
    const unsigned char *b = bytes;
    if (b == NULL || len <= UCX_HDR_LEN || (uint32_t)ixlp_get_le(b, 4) != magic ||
        (uint32_t)ixlp_get_le(b + 4, 4) != version ||
        (uint32_t)ixlp_get_le(b + 8, 4) != len - UCX_HDR_LEN ||
        (uint32_t)ixlp_get_le(b + 12, 4) != ucx_fnv32(b + UCX_HDR_LEN, len - UCX_HDR_LEN))
        return NULL;
    *out_len = len - UCX_HDR_LEN;
    return b + UCX_HDR_LEN;
}

void *ucx_wrap(uint32_t magic, const void *payload, size_t len, size_t *out_len)
{
    return wrap_v(magic, UCX_VERSION, payload, len, out_len);
}

const void *ucx_unwrap(uint32_t magic, const void *bytes, size_t len, size_t *out_len)
{
    return unwrap_v(magic, UCX_VERSION, bytes, len, out_len);
}

void *ucx_info_encode(size_t n, const void *const *addrs, const size_t *lens, size_t *out_len)
{
    if (n == 0 || n > UCX_MAX_ADDRS)
        return NULL;
    size_t total = 4;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0 || lens[i] > UCX_ADDR_MAX || total + 4 + lens[i] < total)
            return NULL;
        total += 4 + lens[i];
    }
    unsigned char *p = malloc(total);
    if (p == NULL)
        return NULL;
    ixlp_put_le(p, (uint32_t)n, 4);
    size_t off = 4;
    for (size_t i = 0; i < n; i++) {
        ixlp_put_le(p + off, (uint32_t)lens[i], 4);
        memcpy(p + off + 4, addrs[i], lens[i]);
        off += 4 + lens[i];
    }
    void *w = wrap_v(UCX_INFO_MAGIC, UCX_INFO_VERSION, p, total, out_len);
    free(p);
    return w;
}

size_t ucx_info_decode(const void *bytes, size_t len, const void **addrs, size_t *lens)
{
    size_t plen;
    const unsigned char *p = unwrap_v(UCX_INFO_MAGIC, UCX_INFO_VERSION, bytes, len, &plen);
    if (p == NULL || plen < 4)
        return 0;
    size_t n = (uint32_t)ixlp_get_le(p, 4), off = 4;
    if (n == 0 || n > UCX_MAX_ADDRS)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (plen - off < 4)
            return 0;
        size_t l = (uint32_t)ixlp_get_le(p + off, 4);
        off += 4;
        if (l == 0 || l > UCX_ADDR_MAX || l > plen - off)
            return 0;
        addrs[i] = p + off;
        lens[i] = l;
        off += l;
    }
    return off == plen ? n : 0;
}

void *ucx_notif_encode(const char *name, const void *msg, size_t len, size_t *out_len)
{
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > UCX_NAME_MAX)
        return NULL;
    unsigned char *b = malloc(2 + nlen + len + 1);
    if (b == NULL)
        return NULL;
    b[0] = (unsigned char)nlen;
    b[1] = (unsigned char)(nlen >> 8);
    memcpy(b + 2, name, nlen);
    if (len > 0)
        memcpy(b + 2 + nlen, msg, len);
    *out_len = 2 + nlen + len;
    return b;
}

bool ucx_notif_decode(const void *data, size_t len, size_t msg_max, const char **name,
                      size_t *name_len, const void **msg, size_t *msg_len)
{
    const unsigned char *b = data;
    if (b == NULL || len < 2)
        return false;
    size_t nlen = (size_t)b[0] | (size_t)b[1] << 8;
    if (nlen == 0 || nlen > UCX_NAME_MAX || len - 2 < nlen || len - 2 - nlen > msg_max ||
        memchr(b + 2, '\0', nlen) != NULL)
        return false;
    *name = (const char *)b + 2;
    *name_len = nlen;
    *msg = b + 2 + nlen;
    *msg_len = len - 2 - nlen;
    return true;
}

void *ucx_pub_encode(uint64_t key, const void *rkey, size_t len, size_t *out_len)
{
    if (len == 0 || len > SIZE_MAX - 8)
        return NULL;
    unsigned char *p = malloc(8 + len);
    if (p == NULL)
        return NULL;
    ixlp_put_le(p, key, 8);
    memcpy(p + 8, rkey, len);
    void *w = ucx_wrap(UCX_RKEY_MAGIC, p, 8 + len, out_len);
    free(p);
    return w;
}

const void *ucx_pub_decode(const void *bytes, size_t len, uint64_t *key, size_t *rkey_len)
{
    size_t plen;
    const unsigned char *p = ucx_unwrap(UCX_RKEY_MAGIC, bytes, len, &plen);
    if (p == NULL || plen <= 8)
        return NULL;
    *key = ixlp_get_le(p, 8);
    *rkey_len = plen - 8;
    return p + 8;
}

bool ucx_rkey_check(const void *rkey, size_t len, unsigned *mem_type)
{
    const unsigned char *b = rkey;
    if (b == NULL || len < 9 || len > UCX_RKEY_MAX)
        return false;
    uint64_t md_map = ixlp_get_le(b, 8);
    size_t off = 9;
    for (; md_map != 0; md_map &= md_map - 1) {
        if (off >= len || b[off] > len - off - 1)
            return false;
        off += 1 + (size_t)b[off];
    }
    if (off != len && (len - off - 1) % 3 != 0)
        return false;
    *mem_type = b[8];
    return true;
}

static void rma_hdr(unsigned char *b, enum ucx_rma_kind kind, uint32_t word, uint64_t token,
                    uint16_t n)
{
    b[0] = (unsigned char)kind;
    b[1] = UCX_RMA_VERSION;
    b[2] = (unsigned char)n;
    b[3] = (unsigned char)(n >> 8);
    ixlp_put_le(b + 4, word, 4);
    ixlp_put_le(b + 8, token, 8);
}

void ucx_rma_req_encode(void *out, enum ucx_rma_kind kind, uint64_t token, size_t n,
                        const struct ucx_rma_entry *entries)
{
    unsigned char *b = out;
    rma_hdr(b, kind, 0, token, (uint16_t)n);
    for (size_t i = 0; i < n; i++) {
        unsigned char *e = b + UCX_RMA_HDR + i * UCX_RMA_ENTRY;
        ixlp_put_le(e, entries[i].key, 8);
        ixlp_put_le(e + 8, entries[i].addr, 8);
        ixlp_put_le(e + 16, entries[i].len, 8);
    }
}

void ucx_rma_entry_at(const unsigned char *entries, size_t i, struct ucx_rma_entry *out)
{
    const unsigned char *e = entries + i * UCX_RMA_ENTRY;
    out->key = ixlp_get_le(e, 8);
    out->addr = ixlp_get_le(e + 8, 8);
    out->len = ixlp_get_le(e + 16, 8);
}

bool ucx_rma_req_decode(const void *data, size_t len, enum ucx_rma_kind *kind, uint64_t *token,
                        size_t *n, const unsigned char **entries, const unsigned char **payload,
                        uint64_t *total)
{
    const unsigned char *b = data;
    if (b == NULL || len < UCX_RMA_HDR || (b[0] != UCX_RMA_WRITE && b[0] != UCX_RMA_READ) ||
        b[1] != UCX_RMA_VERSION || (uint32_t)ixlp_get_le(b + 4, 4) != 0)
        return false;
    size_t cnt = (size_t)b[2] | (size_t)b[3] << 8;
    if (cnt == 0 || cnt > UCX_RMA_MAX_ENTRIES || (len - UCX_RMA_HDR) / UCX_RMA_ENTRY < cnt)
        return false;
    const unsigned char *ents = b + UCX_RMA_HDR;
    uint64_t sum = 0;
    for (size_t i = 0; i < cnt; i++) {
        uint64_t l = ixlp_get_le(ents + i * UCX_RMA_ENTRY + 16, 8);
        if (l == 0 || l > UINT64_MAX - sum)
            return false;
        sum += l;
    }
    size_t rest = len - UCX_RMA_HDR - cnt * UCX_RMA_ENTRY;
    if (b[0] == UCX_RMA_WRITE ? rest != sum : rest != 0)
        return false;
    *kind = (enum ucx_rma_kind)b[0];
    *token = ixlp_get_le(b + 8, 8);
    *n = cnt;
    *entries = ents;
    *payload = ents + cnt * UCX_RMA_ENTRY;
    *total = sum;
    return true;
}

void ucx_rma_reply_encode(void *out, enum ucx_rma_kind kind, int32_t status, uint64_t token)
{
    rma_hdr(out, kind, (uint32_t)status, token, 0);
}

bool ucx_rma_reply_decode(const void *data, size_t len, enum ucx_rma_kind *kind, int32_t *status,
                          uint64_t *token, const unsigned char **payload, size_t *payload_len)
{
    const unsigned char *b = data;
    if (b == NULL || len < UCX_RMA_HDR || (b[0] != UCX_RMA_ACK && b[0] != UCX_RMA_DATA) ||
        b[1] != UCX_RMA_VERSION || b[2] != 0 || b[3] != 0)
        return false;
    int32_t st = (int32_t)(uint32_t)ixlp_get_le(b + 4, 4);
    if (st > 0 || (len > UCX_RMA_HDR && (b[0] != UCX_RMA_DATA || st != 0)))
        return false;
    *kind = (enum ucx_rma_kind)b[0];
    *status = st;
    *token = ixlp_get_le(b + 8, 8);
    *payload = b + UCX_RMA_HDR;
    *payload_len = len - UCX_RMA_HDR;
    return true;
}

bool ucx_rma_peek(const void *data, size_t len, enum ucx_rma_kind *kind, uint64_t *token)
{
    const unsigned char *b = data;
    if (b == NULL || len < UCX_RMA_HDR || b[1] != UCX_RMA_VERSION ||
        (b[0] != UCX_RMA_WRITE && b[0] != UCX_RMA_READ && b[0] != UCX_RMA_ACK &&
         b[0] != UCX_RMA_DATA))
        return false;
    *kind = (enum ucx_rma_kind)b[0];
    *token = ixlp_get_le(b + 8, 8);
    return true;
}

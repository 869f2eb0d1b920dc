/*
 * The UCX plugin's own wire formats (plugins/ucx/ucx_wire.c): wrapped connection info and
 * public data (region key + packed rkey), which arrive in untrusted metadata, and notifications
 * and WRITE/READ messages and their replies, which arrive from peers.
 * Oracle: decoders never read outside the input (ASan), accept only what the encoders make,
 * and round-trip whatever the encoders make of the input (connection info: up to UCX_MAX_ADDRS
 * worker addresses cut from the input).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ucx_wire.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The input as received bytes. */
    size_t plen;
    const void *p = ucx_unwrap(UCX_INFO_MAGIC, data, size, &plen);
    if (p != NULL) {
        REQUIRE(plen == size - UCX_HDR_LEN && p == data + UCX_HDR_LEN);
        REQUIRE(ucx_unwrap(UCX_RKEY_MAGIC, data, size, &plen) == NULL); /* magics differ */
    }
    const void *addrs[UCX_MAX_ADDRS];
    size_t lens[UCX_MAX_ADDRS];
    size_t na = ucx_info_decode(data, size, addrs, lens);
    if (na > 0) {
        REQUIRE(na <= UCX_MAX_ADDRS);
        size_t sum = UCX_HDR_LEN + 4;
        for (size_t i = 0; i < na; i++) {
            const uint8_t *a = addrs[i];
            REQUIRE(lens[i] > 0 && a >= data + sum + 4 && a + lens[i] <= data + size);
            sum += 4 + lens[i];
        }
        REQUIRE(sum == size);
    }
    uint64_t key;
    size_t rklen;
    const uint8_t *rk = ucx_pub_decode(data, size, &key, &rklen);
    if (rk != NULL)
        REQUIRE(rklen > 0 && rk == data + UCX_HDR_LEN + 8 && rk + rklen == data + size);
    /* A WRITE/READ message: every entry inside the input, lengths > 0, the payload exactly their
     * total (WRITE) or empty (READ). */
    enum ucx_rma_kind kind, pk;
    uint64_t ptok;
    uint64_t token, total;
    size_t ne;
    const unsigned char *ents, *payload;
    if (ucx_rma_req_decode(data, size, &kind, &token, &ne, &ents, &payload, &total)) {
        REQUIRE(kind == UCX_RMA_WRITE || kind == UCX_RMA_READ);
        REQUIRE(ucx_rma_peek(data, size, &pk, &ptok) && pk == kind && ptok == token);
        REQUIRE(ne >= 1 && ne <= UCX_RMA_MAX_ENTRIES && ents == data + UCX_RMA_HDR);
        REQUIRE(payload == ents + ne * UCX_RMA_ENTRY && payload <= data + size);
        uint64_t sum = 0;
        struct ucx_rma_entry en[UCX_RMA_MAX_ENTRIES];
        for (size_t i = 0; i < ne; i++) {
            ucx_rma_entry_at(ents, i, &en[i]);
            REQUIRE(en[i].len > 0 && sum + en[i].len > sum);
            sum += en[i].len;
        }
        REQUIRE(sum == total);
        REQUIRE((uint64_t)(data + size - payload) == (kind == UCX_RMA_WRITE ? total : 0));
        unsigned char back[UCX_RMA_HDR + UCX_RMA_MAX_ENTRIES * UCX_RMA_ENTRY];
        ucx_rma_req_encode(back, kind, token, ne, en);
        REQUIRE(memcmp(back, data, UCX_RMA_HDR + ne * UCX_RMA_ENTRY) == 0);
    }
    if (ucx_rma_peek(data, size, &pk, &ptok))
        REQUIRE(size >= UCX_RMA_HDR && (uint8_t)pk == data[0] && data[1] == UCX_RMA_VERSION);
    int32_t rst;
    size_t rplen;
    if (ucx_rma_reply_decode(data, size, &kind, &rst, &token, &payload, &rplen)) {
        REQUIRE(kind == UCX_RMA_ACK || kind == UCX_RMA_DATA);
        REQUIRE(rst <= 0 && payload == data + UCX_RMA_HDR && rplen == size - UCX_RMA_HDR);
        REQUIRE(rplen == 0 || (kind == UCX_RMA_DATA && rst == 0));
        unsigned char back[UCX_RMA_HDR];
        ucx_rma_reply_encode(back, kind, rst, token);
        REQUIRE(memcmp(back, data, UCX_RMA_HDR) == 0);
    }
    /* A packed rkey: its layout checked without reading past the input. */
    unsigned mt;
    if (ucx_rkey_check(data, size, &mt))
        REQUIRE(size >= 9 && size <= UCX_RKEY_MAX && mt == data[8]);
    const char *name;
    const void *msg;
    size_t nlen, mlen;
    if (ucx_notif_decode(data, size, 1024, &name, &nlen, &msg, &mlen)) {
        REQUIRE(nlen >= 1 && nlen <= UCX_NAME_MAX && mlen <= 1024);
        REQUIRE(2 + nlen + mlen == size && memchr(name, '\0', nlen) == NULL);
    }

    /* The input as a payload: what the encoders make of it decodes back to it. */
    if (size > 0) {
        size_t wlen;
        void *w = ucx_wrap(UCX_RKEY_MAGIC, data, size, &wlen);
        REQUIRE(w != NULL && wlen == size + UCX_HDR_LEN);
        const void *back = ucx_unwrap(UCX_RKEY_MAGIC, w, wlen, &plen);
        REQUIRE(back != NULL && plen == size && memcmp(back, data, size) == 0);
        ((unsigned char *)w)[wlen - 1] ^= 1; /* any flipped payload bit fails the checksum */
        REQUIRE(ucx_unwrap(UCX_RKEY_MAGIC, w, wlen, &plen) == NULL);
        free(w);
        /* public data: the first 8 bytes (or fewer, zero-padded) as the key, the rest the rkey */
        uint64_t k = 0;
        memcpy(&k, data, size < 8 ? size : 8);
        void *pd = ucx_pub_encode(k, data, size, &wlen);
        REQUIRE(pd != NULL);
        const void *rkb = ucx_pub_decode(pd, wlen, &key, &rklen);
        REQUIRE(rkb != NULL && key == k && rklen == size && memcmp(rkb, data, size) == 0);
        REQUIRE(ucx_pub_decode(pd, wlen - 1, &key, &rklen) == NULL);
        free(pd);
    }
    /* The input cut into up to UCX_RMA_MAX_ENTRIES entries: a READ message decodes back. */
    if (size >= 1) {
        size_t n = (size_t)data[0] % UCX_RMA_MAX_ENTRIES + 1;
        struct ucx_rma_entry en[UCX_RMA_MAX_ENTRIES];
        for (size_t i = 0; i < n; i++) {
            uint64_t v = 0;
            memcpy(&v, data + (i * 7) % size,
                   size - (i * 7) % size < 8 ? size - (i * 7) % size : 8);
            en[i] = (struct ucx_rma_entry){.key = v, .addr = v * 3, .len = (v & 0xffff) + 1};
        }
        unsigned char rmsg[UCX_RMA_HDR + UCX_RMA_MAX_ENTRIES * UCX_RMA_ENTRY];
        size_t mlen2 = UCX_RMA_HDR + n * UCX_RMA_ENTRY;
        ucx_rma_req_encode(rmsg, UCX_RMA_READ, 42, n, en);
        REQUIRE(ucx_rma_req_decode(rmsg, mlen2, &kind, &token, &ne, &ents, &payload, &total));
        REQUIRE(kind == UCX_RMA_READ && token == 42 && ne == n);
        for (size_t i = 0; i < n; i++) {
            struct ucx_rma_entry got;
            ucx_rma_entry_at(ents, i, &got);
            REQUIRE(got.key == en[i].key && got.addr == en[i].addr && got.len == en[i].len);
        }
        REQUIRE(!ucx_rma_req_decode(rmsg, mlen2 - 1, &kind, &token, &ne, &ents, &payload, &total));
        REQUIRE(!ucx_rma_req_decode(rmsg, mlen2 + 1, &kind, &token, &ne, &ents, &payload, &total));
    }
    /* First byte: how many worker addresses (1..UCX_MAX_ADDRS) the rest is cut into. */
    if (size > 1) {
        size_t n = (size_t)data[0] % UCX_MAX_ADDRS + 1, rest = size - 1;
        if (n > rest)
            n = rest;
        const void *in[UCX_MAX_ADDRS];
        size_t inl[UCX_MAX_ADDRS], off = 1;
        bool over = false; /* an address over UCX_ADDR_MAX: neither made nor taken */
        for (size_t i = 0; i < n; i++) {
            inl[i] = i + 1 < n ? rest / n : size - off;
            in[i] = data + off;
            off += inl[i];
            over = over || inl[i] > UCX_ADDR_MAX;
        }
        size_t ilen;
        void *w = ucx_info_encode(n, in, inl, &ilen);
        REQUIRE((w == NULL) == over);
        if (w != NULL) {
            REQUIRE(ucx_info_decode(w, ilen, addrs, lens) == n);
            for (size_t i = 0; i < n; i++)
                REQUIRE(lens[i] == inl[i] && memcmp(addrs[i], in[i], inl[i]) == 0);
            REQUIRE(ucx_info_decode(w, ilen - 1, addrs, lens) == 0);
            ((unsigned char *)w)[ilen - 1] ^= 1;
            REQUIRE(ucx_info_decode(w, ilen, addrs, lens) == 0);
            free(w);
        }
    }
    /* First byte: the sender name's length; then the name; the rest is the message. */
    if (size > 0) {
        size_t n = data[0];
        if (n >= 1 && n < size && memchr(data + 1, '\0', n) == NULL) {
            char nm[UCX_NAME_MAX + 1];
            memcpy(nm, data + 1, n);
            nm[n] = '\0';
            size_t elen;
            void *e = ucx_notif_encode(nm, data + 1 + n, size - 1 - n, &elen);
            REQUIRE(e != NULL);
            REQUIRE(ucx_notif_decode(e, elen, size, &name, &nlen, &msg, &mlen));
            REQUIRE(nlen == n && memcmp(name, nm, n) == 0 && mlen == size - 1 - n &&
                    memcmp(msg, data + 1 + n, mlen) == 0);
            REQUIRE(!ucx_notif_decode(e, elen, mlen ? mlen - 1 : 0, &name, &nlen, &msg, &mlen) ||
                    size - 1 - n == 0);
            free(e);
        }
    }
    return 0;
}

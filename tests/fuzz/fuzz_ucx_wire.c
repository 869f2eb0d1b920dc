/*
 * The UCX plugin's own wire formats (plugins/ucx/ucx_wire.c): wrapped connection info and
 * packed keys, which arrive in untrusted metadata, and notifications, which arrive from peers.
 * Oracle: decoders never read outside the input (ASan), accept only what the encoders make,
 * and round-trip whatever the encoders make of the input (connection info: up to UCX_MAX_ADDRS
 * worker addresses cut from the input).
 */
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
        REQUIRE(ucx_unwrap(UCX_INFO_MAGIC, data, size, &plen) == NULL); /* versions differ */
    }
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
    }
    /* First byte: how many worker addresses (1..UCX_MAX_ADDRS) the rest is cut into. */
    if (size > 1) {
        size_t n = (size_t)data[0] % UCX_MAX_ADDRS + 1, rest = size - 1;
        if (n > rest)
            n = rest;
        const void *in[UCX_MAX_ADDRS];
        size_t inl[UCX_MAX_ADDRS], off = 1;
        for (size_t i = 0; i < n; i++) {
            inl[i] = i + 1 < n ? rest / n : size - off;
            in[i] = data + off;
            off += inl[i];
        }
        size_t ilen;
        void *w = ucx_info_encode(n, in, inl, &ilen);
        REQUIRE(w != NULL);
        REQUIRE(ucx_info_decode(w, ilen, addrs, lens) == n);
        for (size_t i = 0; i < n; i++)
            REQUIRE(lens[i] == inl[i] && memcmp(addrs[i], in[i], inl[i]) == 0);
        REQUIRE(ucx_info_decode(w, ilen - 1, addrs, lens) == 0);
        ((unsigned char *)w)[ilen - 1] ^= 1;
        REQUIRE(ucx_info_decode(w, ilen, addrs, lens) == 0);
        free(w);
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

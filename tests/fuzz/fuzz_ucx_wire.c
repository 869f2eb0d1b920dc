/*
 * The UCX plugin's own wire formats (plugins/ucx/ucx_wire.c): wrapped connection info and
 * packed keys, which arrive in untrusted metadata, and notifications, which arrive from peers.
 * Oracle: decoders never read outside the input (ASan), accept only what the encoders make,
 * and round-trip whatever the encoders make of the input.
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

/*
 * The metadata-exchange protocol (src/meta/mdx_wire.c): frames arrive at an agent's listener
 * from anyone who can connect. Oracle: the decoders never read outside the input (ASan), a
 * frame they accept re-encodes to exactly the same bytes, and whatever the encoder makes of
 * the decoded fields decodes again.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "meta/mdx_wire.h"

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
    if (size < IXL_MDX_HDR)
        return 0;
    enum mdx_type type;
    uint32_t len;
    if (mdx_header_decode(data, IXL_MDX_MAX_BODY, &type, &len) != 0)
        return 0;
    REQUIRE(type >= MDX_SEND && type <= MDX_PROVEN && len <= IXL_MDX_MAX_BODY);
    if (len != size - IXL_MDX_HDR) {
        /* a body of another length: decode what there is as a body of that length */
        size_t n = size - IXL_MDX_HDR < len ? size - IXL_MDX_HDR : len;
        struct mdx_msg m;
        (void)mdx_decode(type, data + IXL_MDX_HDR, n, &m);
        return 0;
    }
    struct mdx_msg m;
    if (mdx_decode(type, data + IXL_MDX_HDR, len, &m) != 0)
        return 0;
    REQUIRE(m.type == type);
    size_t elen;
    uint8_t *e = mdx_encode(&m, &elen);
    REQUIRE(e != NULL && elen == size && memcmp(e, data, size) == 0);
    struct mdx_msg m2;
    REQUIRE(mdx_decode(type, e + IXL_MDX_HDR, elen - IXL_MDX_HDR, &m2) == 0);
    REQUIRE(m2.blob_len == m.blob_len && m2.name.n == m.name.n && m2.label.n == m.label.n &&
            m2.from.n == m.from.n && m2.port == m.port && m2.incarnation == m.incarnation &&
            m2.status == m.status && m2.text.n == m.text.n && m2.mode == m.mode &&
            (m2.nonce == NULL) == (m.nonce == NULL) && (m2.mac == NULL) == (m.mac == NULL));
    free(e);
    return 0;
}

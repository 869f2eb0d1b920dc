/*
 * Fuzz target for serialized descriptor lists (ixl_dlist_deserialize), the bytes a peer sends
 * with a prepared list. The encoding has no checksum, so nothing is bypassed.
 *
 * Oracles (abort on violation): only MALFORMED or NO_MEMORY as errors; a decoded list
 * serializes back to the very same bytes (the encoding is canonical); its first and last
 * descriptors are where its first and last runs say, and the index past the end is refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "fuzz.h"

#define HEADER_BYTES 16
#define RUN_BYTES 40

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_dlist: %s\n", what);
    abort();
}

static void check_desc(const struct ixl_dlist *l, uint64_t index, const struct ixl_run *run,
                       uint64_t k)
{
    struct ixl_desc d;
    if (ixl_dlist_get(l, index, &d) != IXL_OK)
        fail("ixl_dlist_get refused an index inside the list");
    if (d.addr != run->addr + k * run->stride || d.len != run->len || d.dev != run->dev)
        fail("ixl_dlist_get disagrees with the run that holds the descriptor");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t none[1];
    if (data == NULL)
        data = none; /* an empty input is still bytes, not a NULL argument */

    struct ixl_dlist *l;
    ixl_status rc = ixl_dlist_deserialize(data, size, &l);
    if (rc == IXL_ERR_MALFORMED || rc == IXL_ERR_NO_MEMORY)
        return 0;
    if (rc != IXL_OK)
        fail("ixl_dlist_deserialize returned a status other than OK, MALFORMED, NO_MEMORY");

    void *out;
    size_t out_len;
    if (ixl_dlist_serialize(l, &out, &out_len) != IXL_OK)
        fail("a decoded list does not serialize");
    if (out_len != size || memcmp(out, data, size) != 0)
        fail("the round trip is not byte-identical");
    ixl_free(out);

    size_t n_runs = ixl_dlist_run_count(l);
    if (size < HEADER_BYTES || n_runs != (size - HEADER_BYTES) / RUN_BYTES)
        fail("run count disagrees with the input's length");
    if ((unsigned)ixl_dlist_type(l) != data[6])
        fail("memory type disagrees with the input");
    uint64_t count = ixl_dlist_count(l);
    struct ixl_run first, last;
    if (n_runs == 0) {
        if (count != 0)
            fail("a list without runs has descriptors");
    } else {
        if (ixl_dlist_get_run(l, 0, &first) != IXL_OK ||
            ixl_dlist_get_run(l, n_runs - 1, &last) != IXL_OK)
            fail("ixl_dlist_get_run refused a run inside the list");
        if (count < n_runs)
            fail("fewer descriptors than runs");
        check_desc(l, 0, &first, 0);
        check_desc(l, count - 1, &last, last.count - 1);
    }
    struct ixl_desc d;
    struct ixl_run r;
    if (ixl_dlist_get(l, count, &d) != IXL_ERR_INDEX ||
        ixl_dlist_get_run(l, n_runs, &r) != IXL_ERR_INDEX)
        fail("an index past the end is not IXL_ERR_INDEX");
    ixl_dlist_destroy(l);
    return 0;
}

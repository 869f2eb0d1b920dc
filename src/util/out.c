#include "util/out.h"

#include <string.h>

#include <ixl/ixl_types.h>

int ixl_out_check(const void *out, size_t first_size)
{
    uint32_t size;
    memcpy(&size, out, sizeof(size));
    return size < first_size ? IXL_ERR_INVALID_ARG : IXL_OK;
}

int ixl_out_write(void *out, const void *built, size_t built_size, size_t first_size, size_t align)
{
    uint32_t size;
    memcpy(&size, out, sizeof(size));
    if (size < first_size)
        return IXL_ERR_INVALID_ARG;
    size_t n = size < built_size ? size : built_size;
    size_t copy = n;
    /* A caller's size between two fields of a later generation (not a sizeof) must not get
     * part of a field: fields after the first generation are at most align bytes and
     * naturally aligned, so rounding down to align keeps whole ones. */
    if (copy > first_size && align > 1) {
        copy -= copy % align;
        if (copy < first_size)
            copy = first_size;
    }
    memcpy(out, built, copy);
    uint32_t written = (uint32_t)n;
    memcpy(out, &written, sizeof(written));
    return IXL_OK;
}

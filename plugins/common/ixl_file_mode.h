/*
 * The "MODE:PATH" registration bytes of FILE and BLK regions that a backend opens itself
 * (ixl.h: FILE with dev IXL_DEV_NONE; BLK with bytes), shared by the built-in storage plugins
 * (POSIX, GDS) so that they accept exactly the same text. Header-only; a plugin includes it as
 * "../common/ixl_file_mode.h". Not part of the plugin ABI.
 */
#ifndef IXL_FILE_MODE_H
#define IXL_FILE_MODE_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <ixl/ixl_types.h>

/*
 * Parses bytes[0, len) as "MODE:PATH" (MODE: comma-separated ro, rw, direct, sync, dsync,
 * create; rw by default; a NUL ending bytes is allowed). IXL_OK with PATH in path (cap bytes)
 * and the open(2) flags in *flags; IXL_ERR_INVALID_ARG with the reason in why otherwise.
 */
static inline int ixlp_parse_file_mode(const void *bytes, size_t len, char *path, size_t cap,
                                       int *flags, char *why, size_t why_len)
{
    const char *s = bytes;
    const char *colon = s != NULL ? memchr(s, ':', len) : NULL;
    if (colon == NULL) {
        snprintf(why, why_len,
                 "registration bytes must be \"MODE:PATH\" (MODE: ro or rw, and direct, sync, "
                 "dsync, create, comma-separated; e.g. \"rw,create:/data/kv.bin\")");
        return IXL_ERR_INVALID_ARG;
    }
    size_t plen = len - (size_t)(colon + 1 - s);
    while (plen > 0 && colon[plen] == '\0') /* a terminating NUL counted in len */
        plen--;
    if (plen == 0 || plen >= cap || memchr(colon + 1, '\0', plen) != NULL) {
        snprintf(why, why_len, "the path after \"MODE:\" is %s",
                 plen == 0 ? "empty" : "too long or contains a NUL");
        return IXL_ERR_INVALID_ARG;
    }
    int f = O_RDWR;
    const char *w = s;
    while (w < colon) {
        const char *end = memchr(w, ',', (size_t)(colon - w));
        if (end == NULL)
            end = colon;
        size_t n = (size_t)(end - w);
#define IXLP_WORD(lit) (n == sizeof(lit) - 1 && memcmp(w, lit, n) == 0)
        if (IXLP_WORD("ro"))
            f = (f & ~O_ACCMODE) | O_RDONLY;
        else if (IXLP_WORD("rw"))
            f = (f & ~O_ACCMODE) | O_RDWR;
        else if (IXLP_WORD("direct"))
            f |= O_DIRECT;
        else if (IXLP_WORD("sync"))
            f |= O_SYNC;
        else if (IXLP_WORD("dsync"))
            f |= O_DSYNC;
        else if (IXLP_WORD("create"))
            f |= O_CREAT;
        else if (n != 0) {
            snprintf(why, why_len,
                     "unknown mode word '%.*s' (known: ro, rw, direct, sync, dsync, create)",
                     (int)n, w);
            return IXL_ERR_INVALID_ARG;
        }
#undef IXLP_WORD
        w = end + 1;
    }
    if ((f & O_CREAT) && (f & O_ACCMODE) == O_RDONLY) {
        snprintf(why, why_len, "mode 'create' needs 'rw'");
        return IXL_ERR_INVALID_ARG;
    }
    memcpy(path, colon + 1, plen);
    path[plen] = '\0';
    *flags = f;
    return IXL_OK;
}

#endif

#include <stdlib.h>
#include <strings.h>

#include <ixl/ixl.h>

#include "util/log.h"

/* A switch with no default: -Wswitch (in -Wall) reports a status added to the enum but not
 * named here. */
static const char *status_name(enum ixl_status s)
{
    switch (s) {
    case IXL_OK:
        return "IXL_OK";
    case IXL_IN_PROGRESS:
        return "IXL_IN_PROGRESS";
    case IXL_ERR_INVALID_ARG:
        return "IXL_ERR_INVALID_ARG";
    case IXL_ERR_MISMATCH:
        return "IXL_ERR_MISMATCH";
    case IXL_ERR_MALFORMED:
        return "IXL_ERR_MALFORMED";
    case IXL_ERR_TOO_LARGE:
        return "IXL_ERR_TOO_LARGE";
    case IXL_ERR_BAD_MEM_TYPE:
        return "IXL_ERR_BAD_MEM_TYPE";
    case IXL_ERR_INDEX:
        return "IXL_ERR_INDEX";
    case IXL_ERR_NOT_POSTED:
        return "IXL_ERR_NOT_POSTED";
    case IXL_ERR_REPOST_ACTIVE:
        return "IXL_ERR_REPOST_ACTIVE";
    case IXL_ERR_CANCELED:
        return "IXL_ERR_CANCELED";
    case IXL_ERR_STALE:
        return "IXL_ERR_STALE";
    case IXL_ERR_TIMEOUT:
        return "IXL_ERR_TIMEOUT";
    case IXL_ERR_NOT_REGISTERED:
        return "IXL_ERR_NOT_REGISTERED";
    case IXL_ERR_NO_TELEMETRY:
        return "IXL_ERR_NO_TELEMETRY";
    case IXL_ERR_NOTIF_TOO_LARGE:
        return "IXL_ERR_NOTIF_TOO_LARGE";
    case IXL_ERR_REMOTE_DISCONNECT:
        return "IXL_ERR_REMOTE_DISCONNECT";
    case IXL_ERR_CONN_REFUSED:
        return "IXL_ERR_CONN_REFUSED";
    case IXL_ERR_UNREACHABLE:
        return "IXL_ERR_UNREACHABLE";
    case IXL_ERR_PROTOCOL:
        return "IXL_ERR_PROTOCOL";
    case IXL_ERR_REMOTE_REFUSED:
        return "IXL_ERR_REMOTE_REFUSED";
    case IXL_ERR_AUTH:
        return "IXL_ERR_AUTH";
    case IXL_ERR_BACKEND:
        return "IXL_ERR_BACKEND";
    case IXL_ERR_NOT_SUPPORTED:
        return "IXL_ERR_NOT_SUPPORTED";
    case IXL_ERR_IO:
        return "IXL_ERR_IO";
    case IXL_ERR_NO_SPACE:
        return "IXL_ERR_NO_SPACE";
    case IXL_ERR_NO_BACKEND:
        return "IXL_ERR_NO_BACKEND";
    case IXL_ERR_PLUGIN:
        return "IXL_ERR_PLUGIN";
    case IXL_ERR_NOTIF_UNSUPPORTED:
        return "IXL_ERR_NOTIF_UNSUPPORTED";
    case IXL_ERR_NOT_FOUND:
        return "IXL_ERR_NOT_FOUND";
    case IXL_ERR_EXISTS:
        return "IXL_ERR_EXISTS";
    case IXL_ERR_BUSY:
        return "IXL_ERR_BUSY";
    case IXL_ERR_NO_MEMORY:
        return "IXL_ERR_NO_MEMORY";
    case IXL_ERR_NOT_ALLOWED:
        return "IXL_ERR_NOT_ALLOWED";
    case IXL_ERR_SYSTEM:
        return "IXL_ERR_SYSTEM";
    }
    return NULL;
}

const char *ixl_strerror(int status)
{
    const char *s = status_name((enum ixl_status)status);
    return s ? s : "unknown status";
}

/* The header's version is the project's (the file VERSION, read by CMakeLists.txt): bumping
 * VERSION without the header stops here. */
_Static_assert(IXL_VERSION_MAJOR == IXL_PROJECT_VERSION_MAJOR &&
                   IXL_VERSION_MINOR == IXL_PROJECT_VERSION_MINOR &&
                   IXL_VERSION_PATCH == IXL_PROJECT_VERSION_PATCH,
               "include/ixl/ixl.h's IXL_VERSION_* differ from the file VERSION");

const char *ixl_version(void)
{
    return IXL_VERSION_STRING;
}

/* The first minor of major 0 whose ABI is kept (the version script's first node, IXL_0.2). */
#define IXL_FIRST_STABLE_MINOR_0 2u

ixl_status ixl_version_check(unsigned major, unsigned minor)
{
    if (major == IXL_VERSION_MAJOR && minor <= IXL_VERSION_MINOR &&
        (major != 0 || minor >= IXL_FIRST_STABLE_MINOR_0))
        return IXL_OK;
    IXL_LOG_ERR("ixl version check: the application needs libixl %u.%u, this is libixl %s "
                "(compatible: %u.x from %u.%u to %u.%u)",
                major, minor, IXL_VERSION_STRING, (unsigned)IXL_VERSION_MAJOR,
                (unsigned)IXL_VERSION_MAJOR, IXL_VERSION_MAJOR == 0 ? IXL_FIRST_STABLE_MINOR_0 : 0u,
                (unsigned)IXL_VERSION_MAJOR, (unsigned)IXL_VERSION_MINOR);
    return IXL_ERR_NOT_SUPPORTED;
}

void ixl_free(void *ptr)
{
    free(ptr);
}

static const char *const mem_names[IXL_MEM_COUNT] = {
    [IXL_MEM_DRAM] = "DRAM", [IXL_MEM_VRAM] = "VRAM", [IXL_MEM_BLK] = "BLK",
    [IXL_MEM_FILE] = "FILE", [IXL_MEM_OBJ] = "OBJ",
};

const char *ixl_mem_name(enum ixl_mem type)
{
    if ((unsigned)type >= IXL_MEM_COUNT)
        return NULL;
    return mem_names[type];
}

ixl_status ixl_mem_parse(const char *name, enum ixl_mem *out)
{
    if (name == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    for (int i = 0; i < IXL_MEM_COUNT; i++) {
        if (strcasecmp(name, mem_names[i]) == 0) {
            *out = (enum ixl_mem)i;
            return IXL_OK;
        }
    }
    return IXL_ERR_INVALID_ARG;
}

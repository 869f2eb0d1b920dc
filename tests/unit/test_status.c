/* Status names, memory-type names and the version. */
#include "check.h"

int main(void)
{
    static const int all[] = {
        IXL_OK,
        IXL_IN_PROGRESS,
        IXL_ERR_INVALID_ARG,
        IXL_ERR_MISMATCH,
        IXL_ERR_MALFORMED,
        IXL_ERR_TOO_LARGE,
        IXL_ERR_BAD_MEM_TYPE,
        IXL_ERR_INDEX,
        IXL_ERR_NOT_POSTED,
        IXL_ERR_REPOST_ACTIVE,
        IXL_ERR_CANCELED,
        IXL_ERR_STALE,
        IXL_ERR_TIMEOUT,
        IXL_ERR_NOT_REGISTERED,
        IXL_ERR_NO_TELEMETRY,
        IXL_ERR_NOTIF_TOO_LARGE,
        IXL_ERR_REMOTE_DISCONNECT,
        IXL_ERR_CONN_REFUSED,
        IXL_ERR_UNREACHABLE,
        IXL_ERR_PROTOCOL,
        IXL_ERR_REMOTE_REFUSED,
        IXL_ERR_BACKEND,
        IXL_ERR_NOT_SUPPORTED,
        IXL_ERR_IO,
        IXL_ERR_NO_SPACE,
        IXL_ERR_NO_BACKEND,
        IXL_ERR_PLUGIN,
        IXL_ERR_NOTIF_UNSUPPORTED,
        IXL_ERR_NOT_FOUND,
        IXL_ERR_EXISTS,
        IXL_ERR_BUSY,
        IXL_ERR_NO_MEMORY,
        IXL_ERR_NOT_ALLOWED,
        IXL_ERR_SYSTEM,
    };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        const char *s = ixl_strerror(all[i]);
        CHECK(strncmp(s, "IXL_", 4) == 0);
        /* Ranges: arguments -1xx, requests -2xx, connections -3xx, backends -4xx, agent -5xx. */
        CHECK(all[i] >= 0 || (all[i] <= -100 && all[i] > -600));
        for (size_t j = 0; j < i; j++)
            CHECK(all[i] != all[j] && strcmp(s, ixl_strerror(all[j])) != 0);
    }
    CHECK(strcmp(ixl_strerror(IXL_ERR_NOT_FOUND), "IXL_ERR_NOT_FOUND") == 0);
    CHECK(strcmp(ixl_strerror(-99999), "unknown status") == 0);
    CHECK(strcmp(ixl_strerror(2), "unknown status") == 0);

    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        enum ixl_mem back;
        CHECK(ixl_mem_name((enum ixl_mem)t) != NULL);
        CHECK_RC(ixl_mem_parse(ixl_mem_name((enum ixl_mem)t), &back), IXL_OK);
        CHECK(back == (enum ixl_mem)t);
    }
    enum ixl_mem m;
    CHECK_RC(ixl_mem_parse("dram", &m), IXL_OK);
    CHECK(m == IXL_MEM_DRAM);
    CHECK_RC(ixl_mem_parse("HBM", &m), IXL_ERR_INVALID_ARG);
    CHECK(ixl_mem_name(IXL_MEM_COUNT) == NULL);
    CHECK(strcmp(ixl_version(), "0.1.0") == 0);
    ixl_free(NULL);
    printf("ok\n");
    return 0;
}

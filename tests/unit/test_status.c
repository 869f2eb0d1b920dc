/* Status names and values, memory-type names, the version and its runtime check. */
#include "check.h"

/*
 * The value of every status, written out: a status's value is part of the ABI (applications
 * and plugins compiled against older headers return and compare them), so a renumbering
 * fails here. A new status is added to this table with its value.
 */
/* clang-format off */
#define PIN(name, value) {#name, value, name}
/* clang-format on */
static const struct {
    const char *name;
    int value;
    int enum_value;
} pinned[] = {
    PIN(IXL_OK, 0),
    PIN(IXL_IN_PROGRESS, 1),
    PIN(IXL_ERR_INVALID_ARG, -100),
    PIN(IXL_ERR_MISMATCH, -101),
    PIN(IXL_ERR_MALFORMED, -102),
    PIN(IXL_ERR_TOO_LARGE, -103),
    PIN(IXL_ERR_BAD_MEM_TYPE, -104),
    PIN(IXL_ERR_INDEX, -105),
    PIN(IXL_ERR_NOT_POSTED, -200),
    PIN(IXL_ERR_REPOST_ACTIVE, -201),
    PIN(IXL_ERR_CANCELED, -202),
    PIN(IXL_ERR_STALE, -203),
    PIN(IXL_ERR_TIMEOUT, -204),
    PIN(IXL_ERR_NOT_REGISTERED, -205),
    PIN(IXL_ERR_NO_TELEMETRY, -206),
    PIN(IXL_ERR_NOTIF_TOO_LARGE, -207),
    PIN(IXL_ERR_REMOTE_DISCONNECT, -300),
    PIN(IXL_ERR_CONN_REFUSED, -301),
    PIN(IXL_ERR_UNREACHABLE, -302),
    PIN(IXL_ERR_PROTOCOL, -303),
    PIN(IXL_ERR_REMOTE_REFUSED, -304),
    PIN(IXL_ERR_AUTH, -305),
    PIN(IXL_ERR_BACKEND, -400),
    PIN(IXL_ERR_NOT_SUPPORTED, -401),
    PIN(IXL_ERR_IO, -402),
    PIN(IXL_ERR_NO_SPACE, -403),
    PIN(IXL_ERR_NO_BACKEND, -404),
    PIN(IXL_ERR_PLUGIN, -405),
    PIN(IXL_ERR_NOTIF_UNSUPPORTED, -406),
    PIN(IXL_ERR_NOT_FOUND, -500),
    PIN(IXL_ERR_EXISTS, -501),
    PIN(IXL_ERR_BUSY, -502),
    PIN(IXL_ERR_NO_MEMORY, -503),
    PIN(IXL_ERR_NOT_ALLOWED, -504),
    PIN(IXL_ERR_SYSTEM, -505),
#undef PIN
};
#define NPINNED (sizeof(pinned) / sizeof(pinned[0]))

static void check_pinned(void)
{
    for (size_t i = 0; i < NPINNED; i++) {
        if (pinned[i].enum_value != pinned[i].value)
            check_fail(__FILE__, __LINE__, "%s is %d in the header, pinned at %d", pinned[i].name,
                       pinned[i].enum_value, pinned[i].value);
        if (strcmp(ixl_strerror(pinned[i].value), pinned[i].name) != 0)
            check_fail(__FILE__, __LINE__, "ixl_strerror(%d) is %s, want %s", pinned[i].value,
                       ixl_strerror(pinned[i].value), pinned[i].name);
    }
    /* Every value the library names is pinned: a status added to the enum (and so to
     * ixl_strerror's switch, which -Wswitch keeps complete) without a line above fails. */
    size_t named = 0;
    for (int v = -1000; v <= 1000; v++) {
        if (strcmp(ixl_strerror(v), "unknown status") == 0)
            continue;
        named++;
        size_t i = 0;
        while (i < NPINNED && pinned[i].value != v)
            i++;
        if (i == NPINNED)
            check_fail(__FILE__, __LINE__, "status %d (%s) is not in the pinned table", v,
                       ixl_strerror(v));
    }
    CHECK(named == NPINNED);
}

static char last_log[512];

static void capture_log(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void check_version(void)
{
    char want[64];
    snprintf(want, sizeof(want), "%d.%d.%d", IXL_VERSION_MAJOR, IXL_VERSION_MINOR,
             IXL_VERSION_PATCH);
    CHECK(strcmp(ixl_version(), want) == 0);
    CHECK(strcmp(ixl_version(), IXL_TEST_VERSION) == 0); /* the file VERSION */

    enum ixl_log_level level = ixl_log_get_level();
    ixl_log_set_level(IXL_LOG_ERROR); /* each refusal logs an error: caught, not printed */
    ixl_log_set_sink(capture_log, NULL);
    CHECK_RC(IXL_VERSION_CHECK(), IXL_OK);
    CHECK_RC(ixl_version_check(IXL_VERSION_MAJOR, IXL_VERSION_MINOR), IXL_OK);
    CHECK_RC(ixl_version_check(0, 2), IXL_OK);
    /* An application built against a newer minor needs what this library lacks. */
    CHECK(last_log[0] == '\0');
    CHECK_RC(ixl_version_check(IXL_VERSION_MAJOR, IXL_VERSION_MINOR + 1), IXL_ERR_NOT_SUPPORTED);
    char msg[96];
    snprintf(msg, sizeof(msg), "needs libixl %d.%d", IXL_VERSION_MAJOR, IXL_VERSION_MINOR + 1);
    CHECK_STR_HAS(last_log, msg);
    snprintf(msg, sizeof(msg), "this is libixl %s", IXL_TEST_VERSION);
    CHECK_STR_HAS(last_log, msg);
    CHECK_RC(ixl_version_check(IXL_VERSION_MAJOR + 1, 0), IXL_ERR_NOT_SUPPORTED);
    /* In major 0 the ABI is kept from 0.2 on; 0.0 and 0.1 are other ABIs. */
    CHECK_RC(ixl_version_check(0, 1), IXL_ERR_NOT_SUPPORTED);
    CHECK_RC(ixl_version_check(0, 0), IXL_ERR_NOT_SUPPORTED);
    CHECK_RC(ixl_version_check(~0u, ~0u), IXL_ERR_NOT_SUPPORTED);
    ixl_log_set_sink(NULL, NULL);
    ixl_log_set_level(level);
}

int main(void)
{
    check_pinned();
    check_version();
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
        IXL_ERR_AUTH,
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
    ixl_free(NULL);
    printf("ok\n");
    return 0;
}

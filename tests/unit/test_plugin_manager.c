/* The plugin manager over the test plugin directory: accepted plugins with their data, the
 * broken ones refused with their reason, lazy opening by name. */
#include "check.h"

static char captured[16384];
static size_t captured_len;

static void sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    int n = snprintf(captured + captured_len, sizeof(captured) - captured_len, "%s\n", msg);
    if (n > 0 && captured_len + (size_t)n < sizeof(captured))
        captured_len += (size_t)n;
}

static const char *refusal_of(const char *file)
{
    size_t n = ixl_plugin_refused_count();
    for (size_t i = 0; i < n; i++) {
        const char *path, *reason;
        CHECK_RC(ixl_plugin_refused_get(i, &path, &reason), IXL_OK);
        if (strstr(path, file))
            return reason;
    }
    return NULL;
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_sink(sink, NULL);
    ixl_log_set_level(IXL_LOG_WARN);

    /* By name, the manager opens the plugin's own file only: no refusal is logged yet. */
    struct ixl_plugin_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_plugin_find("TEST", &info), IXL_OK);
    CHECK(captured_len == 0);
    CHECK(strcmp(info.name, "TEST") == 0);
    CHECK(!info.builtin);
    CHECK_STR_HAS(info.path, "libixl_plugin_TEST.so");
    CHECK(info.abi_major == 2); /* IXL_PLUGIN_ABI_MAJOR */
    CHECK(info.caps == (IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS));
    CHECK(info.mem_mask & IXL_MEM_BIT(IXL_MEM_DRAM));
    int has_delay = 0;
    for (size_t i = 0; i < info.n_options; i++) {
        CHECK(info.options[i].name && info.options[i].default_value && info.options[i].description);
        if (strcmp(info.options[i].name, "delay_us") == 0) {
            has_delay = 1;
            CHECK(info.options[i].type == IXL_OPT_DURATION);
            CHECK(strcmp(info.options[i].unit, "us") == 0);
        }
    }
    CHECK(has_delay);

    /* A name that no file holds scans everything, then fails. */
    CHECK_RC(ixl_plugin_find("NO_SUCH_PLUGIN", &info), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_plugin_find("bad name/../x", &info), IXL_ERR_NOT_FOUND);
    CHECK(captured_len > 0); /* the broken plugins were opened and refused, with a log line */
    CHECK_STR_HAS(captured, "refused");

    size_t n = ixl_plugin_count();
    int seen_test = 0, seen_testb = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(ixl_plugin_get(i, &info), IXL_OK);
        seen_test += strcmp(info.name, "TEST") == 0;
        seen_testb += strcmp(info.name, "TESTB") == 0;
        CHECK(strncmp(info.name, "BROKEN", 6) != 0);
    }
    CHECK(seen_test == 1 && seen_testb == 1);
    CHECK_RC(ixl_plugin_get(n, &info), IXL_ERR_INDEX);

    CHECK_STR_HAS(refusal_of("libixl_plugin_BROKEN_NOSYM.so"), "no entry symbol");
    CHECK_STR_HAS(refusal_of("libixl_plugin_BROKEN_ABI.so"), "ABI 2.");
    CHECK_STR_HAS(refusal_of("libixl_plugin_BROKEN_SMALL.so"), "too small");
    CHECK_STR_HAS(refusal_of("libixl_plugin_BROKEN_NONOTIF.so"), "without notifications");
    CHECK_STR_HAS(refusal_of("libixl_plugin_BROKEN_OPTS.so"), "option unused: unknown type 99");
    CHECK_STR_HAS(refusal_of("libixl_plugin_TESTDUP.so"), "duplicate plugin name 'TEST'");
    CHECK(refusal_of("libixl_plugin_TEST.so") == NULL);
    CHECK(refusal_of("libixl_plugin_OLDENGINE.so") == NULL);

    /* An engine without a size (built against ABI 1): its backend is refused and the engine
     * destroyed (a leak would show under ASan). */
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create("old-engine", &ap, &a), IXL_OK);
    CHECK_RC(ixl_backend_create(a, "OLDENGINE", NULL, 0, NULL), IXL_ERR_PLUGIN);
    CHECK_STR_HAS(ixl_agent_last_error(a), "below the smallest struct ixl_engine");
    CHECK(ixl_backend_count(a) == 0);
    ixl_agent_destroy(a);

    const char *p, *r;
    CHECK_RC(ixl_plugin_refused_get(ixl_plugin_refused_count(), &p, &r), IXL_ERR_INDEX);
    CHECK_RC(ixl_plugin_find(NULL, &info), IXL_ERR_INVALID_ARG);
    ixl_log_set_sink(NULL, NULL);
    printf("ok\n");
    return 0;
}

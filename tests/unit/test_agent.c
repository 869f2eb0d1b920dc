/* Agents and backends: creation with params, options, defaults from configuration, errors,
 * logging, the pollable fd. */
#include <poll.h>

#include "check.h"

static char captured[8192];
static size_t captured_len;

static void sink(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)level;
    (*(int *)ctx)++;
    int n = snprintf(captured + captured_len, sizeof(captured) - captured_len, "%s\n", msg);
    if (n > 0 && captured_len + (size_t)n < sizeof(captured))
        captured_len += (size_t)n;
}

static const char *param(struct ixl_backend *b, const char *key)
{
    const struct ixl_kv *kv;
    size_t n;
    CHECK_RC(ixl_backend_params(b, &kv, &n), IXL_OK);
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return kv[i].value;
    return NULL;
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    /* Read once, at the first ixl call: the default backends of agents created without a list. */
    setenv("IXL_BACKENDS", "TESTB", 1);

    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("", NULL, &a), IXL_ERR_INVALID_ARG);
    char longname[IXL_NAME_MAX + 1];
    memset(longname, 'x', IXL_NAME_MAX);
    longname[IXL_NAME_MAX] = '\0';
    CHECK_RC(ixl_agent_create(longname, NULL, &a), IXL_ERR_INVALID_ARG);
    longname[IXL_NAME_MAX - 1] = '\0';
    CHECK_RC(ixl_agent_create(longname, NULL, &a), IXL_OK);
    CHECK(strlen(ixl_agent_name(a)) == IXL_NAME_MAX - 1);
    ixl_agent_destroy(a);
    CHECK_RC(ixl_agent_create("a", NULL, NULL), IXL_ERR_INVALID_ARG);

    /* Defaults from IXL_BACKENDS. */
    CHECK_RC(ixl_agent_create("a", NULL, &a), IXL_OK);
    CHECK(ixl_backend_count(a) == 1);
    struct ixl_backend *b;
    CHECK_RC(ixl_backend_get(a, 0, &b), IXL_OK);
    CHECK(strcmp(ixl_backend_name(b), "TESTB") == 0);
    CHECK_RC(ixl_backend_get(a, 1, &b), IXL_ERR_INDEX);
    CHECK(strcmp(ixl_config_value("IXL_BACKENDS"), "TESTB") == 0);

    /* A backend with options: unknown keys are refused and the message lists the known ones. */
    struct ixl_kv bad[] = {{"delay_usec", "5"}};
    CHECK_RC(ixl_backend_create(a, "TEST", bad, 1, &b), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "no option 'delay_usec'");
    CHECK_STR_HAS(ixl_agent_last_error(a), "delay_us");
    /* A bad value: the message names the backend, the option, the value and what it wants. */
    struct ixl_kv badval[] = {{"delay_us", "soon"}};
    CHECK_RC(ixl_backend_create(a, "TEST", badval, 1, &b), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "backend TEST: option delay_us='soon': not a number; "
                                           "want a duration in us, 0..600000000");
    struct ixl_kv badneg[] = {{"fail_post", "5"}, {"delay_us", "1ms"}};
    CHECK_RC(ixl_backend_create(a, "TEST", badneg, 2, &b), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "option fail_post='5': out of range");
    struct ixl_kv badmems[] = {{"mems", "DRAM,HBM"}};
    CHECK_RC(ixl_backend_create(a, "TEST", badmems, 1, &b), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "option mems='DRAM,HBM'");
    CHECK(ixl_backend_count(a) == 1);

    struct ixl_kv good[] = {{"delay_us", "5ms"}, {"mems", "DRAM"}, {"no_progress", "off"}};
    CHECK_RC(ixl_backend_create(a, "TEST", good, 3, &b), IXL_OK);
    CHECK(strcmp(param(b, "delay_us"), "5000") == 0); /* normalized: the base unit, no suffix */
    CHECK(strcmp(param(b, "no_progress"), "0") == 0);
    CHECK(param(b, "fail_post") != NULL); /* every option, with its default */
    CHECK(ixl_backend_mem_mask(b) == IXL_MEM_BIT(IXL_MEM_DRAM));
    CHECK(ixl_backend_caps(b) & IXL_CAP_REMOTE);
    CHECK(ixl_backend_count(a) == 2);
    CHECK_RC(ixl_backend_create(a, "TEST", NULL, 0, NULL), IXL_ERR_EXISTS);
    CHECK_RC(ixl_backend_create(a, "NOPE", NULL, 0, NULL), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(ixl_agent_last_error(a), "no plugin 'NOPE'");
    CHECK_RC(ixl_backend_create(a, "BROKEN_ABI", NULL, 0, NULL), IXL_ERR_NOT_FOUND);
    struct ixl_backend *found;
    CHECK_RC(ixl_backend_find(a, "TEST", &found), IXL_OK);
    CHECK(found == b);
    CHECK_RC(ixl_backend_find(a, "NET", &found), IXL_ERR_NOT_FOUND);

    /* The fd is not readable while nothing happened. */
    int fd = -1;
    CHECK_RC(ixl_agent_fd(a, &fd), IXL_OK);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK_RC(ixl_agent_progress(a), IXL_OK);
    struct ixl_agent_stats st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(a, &st), IXL_OK);
    CHECK(st.posted == 0 && st.completed == 0);
    ixl_agent_destroy(a);

    /* An explicit list: every backend in it, or failure. "" means none. */
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_PROGRESS_THREAD |
                                               IXL_AGENT_F_PROGRESS_PERIOD,
                                 .backends = "TEST,TESTB",
                                 .progress_thread = true,
                                 .progress_period_us = 200};
    CHECK_RC(ixl_agent_create("b", &p, &a), IXL_OK);
    CHECK(ixl_backend_count(a) == 2);
    CHECK(threads_named("ixl-progress") == 1);
    ixl_agent_destroy(a);
    CHECK(threads_named("ixl-progress") == 0);
    p.backends = "TEST, NOPE";
    CHECK_RC(ixl_agent_create("b", &p, &a), IXL_ERR_NOT_FOUND);
    p.backends = "";
    CHECK_RC(ixl_agent_create("b", &p, &a), IXL_OK);
    CHECK(ixl_backend_count(a) == 0);

    /* Logging: a replaced sink sees errors; level NONE silences it. */
    int calls = 0;
    ixl_log_set_sink(sink, &calls);
    ixl_log_set_level(IXL_LOG_ERROR);
    CHECK(ixl_log_get_level() == IXL_LOG_ERROR);
    CHECK_RC(ixl_backend_create(a, "TEST", bad, 1, NULL), IXL_ERR_INVALID_ARG);
    CHECK(calls == 1);
    CHECK_STR_HAS(captured, "delay_usec");
    ixl_log_set_level(IXL_LOG_NONE);
    CHECK_RC(ixl_backend_create(a, "TEST", bad, 1, NULL), IXL_ERR_INVALID_ARG);
    CHECK(calls == 1);
    ixl_log_set_sink(NULL, NULL);
    ixl_log_set_level(IXL_LOG_WARN);
    ixl_agent_destroy(a);
    ixl_agent_destroy(NULL);

    /* Configuration: every variable has a name, value, default and meaning. */
    CHECK(ixl_config_count() >= 4);
    for (size_t i = 0; i < ixl_config_count(); i++) {
        struct ixl_config_var v = {.size = sizeof(v)};
        CHECK_RC(ixl_config_get(i, &v), IXL_OK);
        CHECK(v.name && v.value && v.default_value && v.description);
    }
    struct ixl_config_var v = {.size = sizeof(v)};
    CHECK_RC(ixl_config_get(ixl_config_count(), &v), IXL_ERR_INDEX);
    CHECK(strcmp(ixl_config_value("IXL_PLUGIN_DIR"), getenv("IXL_PLUGIN_DIR")) == 0);
    CHECK(ixl_config_value("IXL_NOPE") == NULL);
    printf("ok\n");
    return 0;
}

/* Agents used from several threads at once: backend creation races (exactly one wins), plugin
 * listing, per-thread last-error text, progress threads, logging. Runs under TSan. */
#include <pthread.h>

#include "check.h"

#define THREADS 8

static struct ixl_agent *shared;
static _Atomic int created_test, created_testb;

static void quiet(void *ctx, enum ixl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    /* Race to create the same backends on the shared agent. */
    int rc = ixl_backend_create(shared, (id & 1) ? "TEST" : "TESTB", NULL, 0, NULL);
    CHECK(rc == IXL_OK || rc == IXL_ERR_EXISTS);
    if (rc == IXL_OK)
        (id & 1) ? created_test++ : created_testb++;
    else
        CHECK_STR_HAS(ixl_agent_last_error(shared), "already has");

    /* Each thread's error text is its own. */
    char opt[32];
    snprintf(opt, sizeof(opt), "NOPE_%ld", id);
    CHECK_RC(ixl_backend_create(shared, opt, NULL, 0, NULL), IXL_ERR_NOT_FOUND);
    for (int i = 0; i < 50; i++) {
        CHECK_STR_HAS(ixl_agent_last_error(shared), opt);
        CHECK(ixl_plugin_count() >= 2);
        CHECK_RC(ixl_agent_progress(shared), IXL_OK);
    }

    /* Private agents with progress threads, created and destroyed concurrently. */
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%ld-%d", id, i);
        struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS |
                                                   IXL_AGENT_F_PROGRESS_THREAD |
                                                   IXL_AGENT_F_PROGRESS_PERIOD,
                                     .backends = "TEST,TESTB",
                                     .progress_thread = true,
                                     .progress_period_us = 100};
        struct ixl_agent *a;
        CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
        CHECK(ixl_backend_count(a) == 2);
        ixl_log_set_level((i & 1) ? IXL_LOG_DEBUG : IXL_LOG_WARN);
        ixl_agent_destroy(a);
    }
    return NULL;
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_sink(quiet, NULL);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_PROGRESS_THREAD,
                                 .backends = "",
                                 .progress_thread = true};
    CHECK_RC(ixl_agent_create("shared", &p, &shared), IXL_OK);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(created_test == 1 && created_testb == 1);
    CHECK(ixl_backend_count(shared) == 2);
    ixl_agent_destroy(shared);
    ixl_log_set_sink(NULL, NULL);
    printf("ok\n");
    return 0;
}

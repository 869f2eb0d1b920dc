/* Agents used from several threads at once: backend creation races (exactly one wins), plugin
 * listing, per-thread last-error text, progress threads, logging; the request counters of
 * ixl_agent_stats exact with more threads than stripes of their own (COUNT_THREADS: the first
 * 48 threads add without a locked instruction, the others share stripes). Runs under TSan. */
#include <pthread.h>
#include <stdlib.h>

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

#define COUNT_THREADS 112 /* more than twice the stripes of one thread alone (48) */
#define COUNT_POSTS 2000
#define COUNT_LEN 64

static struct ixl_agent *counted;
static pthread_barrier_t count_start; /* every thread posts at once: shared stripes race */

/* COUNT_POSTS copies of COUNT_LEN bytes within this thread's two buffers, each posted and
 * waited for (the TEST plugin copies inline). */
static void *count_worker(void *arg)
{
    (void)arg;
    static _Thread_local unsigned char src[COUNT_LEN], dst[COUNT_LEN];
    struct ixl_reg_desc d[2] = {{(uintptr_t)src, COUNT_LEN, 0, NULL, 0},
                                {(uintptr_t)dst, COUNT_LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(counted, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    struct ixl_dlist *l, *r;
    struct ixl_desc ls = {(uintptr_t)src, COUNT_LEN, 0}, rs = {(uintptr_t)dst, COUNT_LEN, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, &ls, 1), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rs, 1), IXL_OK);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(counted, IXL_OP_WRITE, l, r, "counted", NULL, &x), IXL_OK);
    pthread_barrier_wait(&count_start);
    for (int i = 0; i < COUNT_POSTS; i++) {
        memset(src, i & 0xff, COUNT_LEN);
        memset(dst, 0xa5 ^ (i & 0xff), COUNT_LEN);
        int rc = ixl_xfer_post(x);
        CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
        CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
        CHECK(memcmp(src, dst, COUNT_LEN) == 0);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    CHECK_RC(ixl_mem_deregister(counted, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    return NULL;
}

static void test_counters(void)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    CHECK_RC(ixl_agent_create("counted", &p, &counted), IXL_OK);
    pthread_t *t = calloc(COUNT_THREADS, sizeof(*t));
    CHECK(t != NULL);
    CHECK(pthread_barrier_init(&count_start, NULL, COUNT_THREADS) == 0);
    for (long i = 0; i < COUNT_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, count_worker, NULL) == 0);
    for (int i = 0; i < COUNT_THREADS; i++)
        pthread_join(t[i], NULL);
    free(t);
    pthread_barrier_destroy(&count_start);
    struct ixl_agent_stats st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(counted, &st), IXL_OK);
    uint64_t want = (uint64_t)COUNT_THREADS * COUNT_POSTS;
    if (st.posted != want || st.completed != want || st.failed != 0 ||
        st.bytes != want * COUNT_LEN) {
        fprintf(stderr,
                "FAIL: counters posted %llu completed %llu failed %llu bytes %llu, want %llu, "
                "%llu, 0, %llu\n",
                (unsigned long long)st.posted, (unsigned long long)st.completed,
                (unsigned long long)st.failed, (unsigned long long)st.bytes,
                (unsigned long long)want, (unsigned long long)want,
                (unsigned long long)(want * COUNT_LEN));
        exit(1);
    }
    ixl_agent_destroy(counted);
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
    test_counters();
    ixl_log_set_sink(NULL, NULL);
    printf("ok\n");
    return 0;
}

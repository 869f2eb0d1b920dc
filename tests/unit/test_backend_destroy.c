/* ixl_backend_destroy: NULL, destroy then create again (the place is reused), refusals while
 * in use (a request, one whose release failed, a prepared list, ixl_mem_alloc memory, a
 * region registered with it alone under a request) that change nothing, its share of local
 * registrations and of loaded remotes going with it while the other backend keeps working,
 * and destroy/create cycles racing progress and notification calls from other threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

#define SZ 65536

static unsigned char src[SZ], dst[SZ], solo[SZ];

static struct ixl_agent *make_agent(const char *name, const char *backends, bool progress)
{
    struct ixl_agent_params p = {
        .field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_PROGRESS_THREAD,
        .backends = backends,
        .progress_thread = progress,
    };
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static struct ixl_backend *find(struct ixl_agent *a, const char *name)
{
    struct ixl_backend *b = NULL;
    CHECK_RC(ixl_backend_find(a, name, &b), IXL_OK);
    return b;
}

static struct ixl_dlist *list1(const void *p, size_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uintptr_t)p, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

/* A WRITE src -> dst of remote (loopback when remote is the agent itself) through backend b
 * (NULL: any): its status after waiting. */
static int copy_via(struct ixl_agent *a, const char *remote, const void *from, void *to,
                    struct ixl_backend *b)
{
    struct ixl_dlist *l = list1(from, SZ), *r = list1(to, SZ);
    struct ixl_xfer_params xp = {
        .field_mask = IXL_XFER_F_BACKENDS, .backends = &b, .n_backends = 1};
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(a, IXL_OP_WRITE, l, r, remote, b ? &xp : NULL, &x);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, 10000);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return rc;
}

static void test_basic(void)
{
    CHECK_RC(ixl_backend_destroy(NULL), IXL_OK);
    struct ixl_agent *a = make_agent("bd-basic", "TEST,TESTB", false);
    CHECK(ixl_backend_count(a) == 2);
    struct ixl_backend *tb = find(a, "TESTB");
    CHECK_RC(ixl_backend_destroy(find(a, "TEST")), IXL_OK);
    CHECK(ixl_backend_count(a) == 1);
    struct ixl_backend *b = NULL;
    CHECK_RC(ixl_backend_find(a, "TEST", &b), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_backend_get(a, 0, &b), IXL_OK);
    CHECK(b == tb);
    CHECK_RC(ixl_backend_get(a, 1, &b), IXL_ERR_INDEX);
    /* Created again: it takes the first place back. */
    CHECK_RC(ixl_backend_create(a, "TEST", NULL, 0, &b), IXL_OK);
    struct ixl_backend *first = NULL;
    CHECK_RC(ixl_backend_get(a, 0, &first), IXL_OK);
    CHECK(first == b && ixl_backend_count(a) == 2);
    CHECK_RC(ixl_backend_create(a, "TEST", NULL, 0, NULL), IXL_ERR_EXISTS);
    /* Every backend gone, then back. */
    CHECK_RC(ixl_backend_destroy(b), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_OK);
    CHECK(ixl_backend_count(a) == 0);
    struct ixl_reg_desc d = {(uintptr_t)src, SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_ERR_NO_BACKEND);
    CHECK_RC(ixl_backend_create(a, "TESTB", NULL, 0, &tb), IXL_OK);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
}

static void test_in_use(void)
{
    struct ixl_kv busy = {"release_busy", "2"};
    struct ixl_kv slow = {"delay_us", "200000"};
    struct ixl_agent *a = make_agent("bd-use", "TEST", false);
    struct ixl_backend *tb;
    CHECK_RC(ixl_backend_create(a, "TESTB", &busy, 1, &tb), IXL_OK);
    struct ixl_backend *t = find(a, "TEST");
    struct ixl_reg_desc rd[2] = {{(uintptr_t)src, SZ, 0, NULL, 0},
                                 {(uintptr_t)dst, SZ, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK); /* with both */

    /* A request made with TESTB: refused, nothing changes, TESTB still moves data. */
    struct ixl_dlist *l = list1(src, SZ), *r = list1(dst, SZ);
    struct ixl_xfer_params xp = {
        .field_mask = IXL_XFER_F_BACKENDS, .backends = &tb, .n_backends = 1};
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "bd-use", &xp, &x), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_ERR_BUSY);
    CHECK_STR_HAS(ixl_agent_last_error(a), "1 request(s) not released");
    CHECK(ixl_backend_count(a) == 2);
    CHECK_RC(copy_via(a, "bd-use", src, dst, tb), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* A prepared list that can use it. */
    struct ixl_prep *p;
    CHECK_RC(ixl_prep_create(a, NULL, l, NULL, &p), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_ERR_BUSY);
    CHECK_STR_HAS(ixl_agent_last_error(a), "1 prepared list(s)");
    ixl_prep_destroy(p);

    /* Memory it allocated. */
    void *mem = NULL;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 4096, tb, &mem), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_ERR_BUSY);
    CHECK_STR_HAS(ixl_agent_last_error(a), "1 ixl_mem_alloc() buffer(s)");
    CHECK_RC(ixl_mem_free(a, mem), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_OK); /* idle now */
    CHECK_RC(copy_via(a, "bd-use", src, dst, t), IXL_OK);
    ixl_agent_destroy(a);

    /* A request whose release failed (release_busy: the first releases of an in-flight
     * request are refused) still holds it. */
    struct ixl_kv both[2] = {busy, slow};
    a = make_agent("bd-use2", "", false);
    CHECK_RC(ixl_backend_create(a, "TESTB", both, 2, &tb), IXL_OK);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "bd-use2", NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_ERR_BUSY);
    CHECK_RC(ixl_backend_destroy(tb), IXL_ERR_BUSY);
    int rc;
    while ((rc = ixl_xfer_release(x)) == IXL_ERR_BUSY)
        usleep(1000);
    CHECK_RC(rc, IXL_OK);
    /* A region registered with it alone: deregistered with it. */
    CHECK_RC(ixl_backend_destroy(tb), IXL_OK);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_ERR_NOT_FOUND);
    ixl_agent_destroy(a);

    /* Its share of shared registrations goes; TEST keeps them and moves data. */
    a = make_agent("bd-use3", "TEST,TESTB", false);
    t = find(a, "TEST");
    tb = find(a, "TESTB");
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    struct ixl_reg_desc sd = {(uintptr_t)solo, SZ, 0, NULL, 0};
    struct ixl_reg_params only_b = {
        .field_mask = IXL_REG_F_BACKENDS, .backends = &tb, .n_backends = 1};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &sd, 1, &only_b), IXL_OK);
    CHECK_RC(ixl_backend_destroy(tb), IXL_OK);
    CHECK_RC(copy_via(a, "bd-use3", src, dst, t), IXL_OK);
    CHECK_RC(copy_via(a, "bd-use3", solo, dst, NULL), IXL_ERR_NOT_REGISTERED);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &sd, 1, NULL), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
}

/* Two agents: A loaded B's metadata (connection info of TEST and TESTB). */
static void test_remote(void)
{
    struct ixl_agent *a = make_agent("bd-a", "TEST,TESTB", false);
    struct ixl_agent *b = make_agent("bd-b", "TEST,TESTB", false);
    struct ixl_reg_desc ra = {(uintptr_t)src, SZ, 0, NULL, 0},
                        rb = {(uintptr_t)dst, SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &ra, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(b, IXL_MEM_DRAM, &rb, 1, NULL), IXL_OK);
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(b, NULL, &blob, &len), IXL_OK);
    CHECK_RC(ixl_md_load(a, blob, len, NULL, 0), IXL_OK);
    CHECK_RC(copy_via(a, "bd-b", src, dst, find(a, "TESTB")), IXL_OK);

    /* A remote prepared list of A that TESTB can serve: refused. */
    struct ixl_dlist *rl = list1(dst, SZ);
    struct ixl_prep *p;
    CHECK_RC(ixl_prep_create(a, "bd-b", rl, NULL, &p), IXL_OK);
    CHECK_RC(ixl_backend_destroy(find(a, "TESTB")), IXL_ERR_BUSY);
    ixl_prep_destroy(p);
    ixl_dlist_destroy(rl);

    CHECK_RC(ixl_backend_destroy(find(a, "TESTB")), IXL_OK);
    CHECK_RC(ixl_remote_check(a, "bd-b", NULL), IXL_OK); /* still loaded for TEST */
    CHECK_RC(copy_via(a, "bd-b", src, dst, find(a, "TEST")), IXL_OK);

    /* A new TESTB knows nothing of bd-b until its metadata is loaded again. */
    struct ixl_backend *nb;
    CHECK_RC(ixl_backend_create(a, "TESTB", NULL, 0, &nb), IXL_OK);
    struct ixl_reg_params only_nb = {
        .field_mask = IXL_REG_F_BACKENDS, .backends = &nb, .n_backends = 1};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &ra, 1, &only_nb), IXL_OK);
    CHECK(copy_via(a, "bd-b", src, dst, nb) < 0);
    CHECK_RC(ixl_md_load(a, blob, len, NULL, 0), IXL_OK);
    CHECK_RC(copy_via(a, "bd-b", src, dst, nb), IXL_OK);
    ixl_free(blob);

    /* Retired remotes held by a request of the other backend: the last release must not
     * call into the destroyed backend. */
    struct ixl_dlist *l = list1(src, SZ), *r = list1(dst, SZ);
    struct ixl_backend *t = find(a, "TEST");
    struct ixl_xfer_params xp = {
        .field_mask = IXL_XFER_F_BACKENDS, .backends = &t, .n_backends = 1};
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "bd-b", &xp, &x), IXL_OK);
    CHECK_RC(ixl_remote_invalidate(a, "bd-b"), IXL_OK); /* retired, held by x */
    CHECK_RC(ixl_backend_destroy(nb), IXL_OK); /* unloads its share of the retired remote too */
    CHECK_RC(ixl_xfer_release(x), IXL_OK);     /* the last reference: calls TEST only */
    ixl_agent_destroy(b);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
}

static struct ixl_agent *race_agent;
static atomic_bool race_stop;

static void *race_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&race_stop)) {
        CHECK_RC(ixl_agent_progress(race_agent), IXL_OK);
        struct ixl_notif_batch *nb = NULL;
        CHECK_RC(ixl_notif_drain(race_agent, &nb), IXL_OK);
        ixl_free(nb);
        int rc = ixl_notif_send(race_agent, "bd-race", "x", 1, NULL);
        CHECK(rc == IXL_OK || rc == IXL_ERR_NO_BACKEND);
    }
    return NULL;
}

static void test_race(void)
{
    race_agent = make_agent("bd-race", "TEST", true);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, race_main, NULL) == 0);
    for (int i = 0; i < 50; i++) {
        struct ixl_backend *b;
        CHECK_RC(ixl_backend_create(race_agent, "TESTB", NULL, 0, &b), IXL_OK);
        CHECK_RC(ixl_backend_destroy(b), IXL_OK);
        CHECK_RC(ixl_backend_destroy(find(race_agent, "TEST")), IXL_OK);
        CHECK_RC(ixl_backend_create(race_agent, "TEST", NULL, 0, NULL), IXL_OK);
    }
    atomic_store(&race_stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ixl_agent_destroy(race_agent);
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_level(IXL_LOG_NONE);
    test_basic();
    test_in_use();
    test_remote();
    test_race();
    printf("test_backend_destroy: ok\n");
    return 0;
}

/* Many remotes in one agent (a decode worker with hundreds of prefill workers loaded): the core
 * finds each by name through a hash index (core/remote.c) that grows from 16 slots and closes
 * the gap a removed remote leaves by shifting later entries back. 300 TEST agents' metadata is
 * loaded in a shuffled order; then 6 rounds each invalidate a random third of the loaded ones
 * (in random order) and load back a random half of the missing ones, and after each step every
 * name is asked for: a loaded one answers ixl_remote_check with IXL_OK, a missing one with
 * IXL_ERR_NOT_FOUND, and ixl_remote_invalidate of a missing one fails as well. A remote the
 * index lost (or one it kept after its invalidation) fails a check. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "ixl/ixl.h"

#define N 300
#define ROUNDS 6
#define SZ 4096

static unsigned char buf[SZ];

static void shuffle(int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static void check_all(struct ixl_agent *a, char (*name)[32], const int *loaded, struct ixl_dlist *l,
                      const char *when)
{
    for (int i = 0; i < N; i++) {
        int rc = ixl_remote_check(a, name[i], l);
        int want = loaded[i] ? IXL_OK : IXL_ERR_NOT_FOUND;
        if (rc != want)
            check_fail(__FILE__, __LINE__, "%s: remote %s answered %d (%s), want %d", when, name[i],
                       rc, ixl_strerror(rc), want);
    }
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_level(IXL_LOG_NONE);
    srand(41);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create("many-a", &p, &a), IXL_OK);
    static char name[N][32];
    static void *blob[N];
    static size_t blob_len[N];
    int order[N], loaded[N] = {0};
    for (int i = 0; i < N; i++) {
        snprintf(name[i], sizeof(name[i]), "prefill-worker-%03d", i);
        struct ixl_agent *w;
        CHECK_RC(ixl_agent_create(name[i], &p, &w), IXL_OK);
        struct ixl_reg_desc d = {(uintptr_t)buf, SZ, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(w, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
        CHECK_RC(ixl_md_get(w, NULL, &blob[i], &blob_len[i]), IXL_OK);
        ixl_agent_destroy(w);
        order[i] = i;
    }
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uintptr_t)buf, SZ, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);

    check_all(a, name, loaded, l, "none loaded");
    shuffle(order, N);
    for (int k = 0; k < N; k++) {
        int i = order[k];
        CHECK_RC(ixl_md_load(a, blob[i], blob_len[i], NULL, 0), IXL_OK);
        loaded[i] = 1;
        if (k == 7 || k == 8 || k == 31 || k == 32 || k == N - 1)
            check_all(a, name, loaded, l, "while loading");
    }
    for (int round = 0; round < ROUNDS; round++) {
        shuffle(order, N);
        int gone = 0;
        for (int k = 0; k < N && gone < N / 3; k++) {
            int i = order[k];
            if (!loaded[i])
                continue;
            CHECK_RC(ixl_remote_invalidate(a, name[i]), IXL_OK);
            loaded[i] = 0;
            gone++;
        }
        check_all(a, name, loaded, l, "after invalidations");
        for (int i = 0; i < N; i++)
            if (!loaded[i])
                CHECK(ixl_remote_invalidate(a, name[i]) != IXL_OK);
        shuffle(order, N);
        for (int k = 0; k < N; k++) {
            int i = order[k];
            if (loaded[i] || rand() % 2)
                continue;
            CHECK_RC(ixl_md_load(a, blob[i], blob_len[i], NULL, 0), IXL_OK);
            loaded[i] = 1;
        }
        check_all(a, name, loaded, l, "after loading back");
    }
    int n = 0;
    for (int i = 0; i < N; i++)
        n += loaded[i];
    printf("test_remote_many: %d remotes, %d rounds of invalidating a third and loading back: "
           "every name found exactly while loaded (%d loaded at the end)\n",
           N, ROUNDS, n);
    ixl_dlist_destroy(l);
    ixl_agent_destroy(a);
    for (int i = 0; i < N; i++)
        ixl_free(blob[i]);
    printf("test_remote_many: ok\n");
    return 0;
}

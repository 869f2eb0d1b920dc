/* Reloading an agent's metadata (periodic refresh) with two backends in common keeps one
 * region struct per region, carrying both backends' metadata; duplicates inside one blob are
 * loaded once. Reaches the agent's remote table, so it links the core statically. */
#include <stdlib.h>

#include "check.h"
#include "core/internal.h"

static size_t remote_regions(struct ixl_agent *a, const char *name)
{
    pthread_rwlock_rdlock(&a->lock);
    struct remote *r = ixl_remote_find(a, name);
    size_t n = r ? r->regs->all[IXL_MEM_DRAM].n : 0;
    pthread_rwlock_unlock(&a->lock);
    return n;
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST,TESTB"};
    struct ixl_agent *a, *b;
    CHECK_RC(ixl_agent_create("A", &p, &a), IXL_OK);
    CHECK_RC(ixl_agent_create("B", &p, &b), IXL_OK);
    static char buf[3][4096];
    struct ixl_reg_desc d[3];
    for (int i = 0; i < 3; i++)
        d[i] = (struct ixl_reg_desc){(uintptr_t)buf[i], sizeof(buf[i]), 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, d, 3, NULL), IXL_OK);
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &len), IXL_OK);
    for (int k = 0; k < 5; k++) {
        CHECK_RC(ixl_md_load(b, blob, len, NULL, 0), IXL_OK);
        CHECK(remote_regions(b, "A") == 3);
    }
    ixl_free(blob);
    /* Partial metadata naming a region twice. */
    struct ixl_dlist *twice;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &twice), IXL_OK);
    struct ixl_desc two[2] = {{(uintptr_t)buf[0], 16, 0}, {(uintptr_t)buf[0] + 100, 16, 0}};
    CHECK_RC(ixl_dlist_add(twice, two, 2), IXL_OK);
    struct ixl_md_params mp = {.field_mask = IXL_MD_F_REGIONS, .regions = twice};
    CHECK_RC(ixl_md_get(a, &mp, &blob, &len), IXL_OK);
    CHECK_RC(ixl_remote_invalidate(b, "A"), IXL_OK);
    CHECK_RC(ixl_md_load(b, blob, len, NULL, 0), IXL_OK);
    CHECK(remote_regions(b, "A") == 1);
    ixl_free(blob);
    ixl_dlist_destroy(twice);
    ixl_agent_destroy(b);
    ixl_agent_destroy(a);
    printf("ok\n");
    return 0;
}

/* The region index against a brute-force search: nested, overlapping and disjoint regions on
 * several devices, inserted in batches and one at a time, with removals. */
#include <stdlib.h>

#include "check.h"
#include "core/registry.h"

#define MAXR 3000

static struct region *regs[MAXR];
static int live[MAXR];
static int n_regs;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int brute(uint64_t dev, uint64_t addr, uint64_t len)
{
    for (int i = 0; i < n_regs; i++)
        if (live[i] && regs[i]->dev == dev && regs[i]->addr <= addr &&
            regs[i]->addr + regs[i]->len >= addr + len)
            return 1;
    return 0;
}

static void add(struct ixl_registry *r, uint64_t *seed)
{
    struct region *g = calloc(1, sizeof(*g));
    CHECK(g != NULL);
    g->type = IXL_MEM_DRAM;
    g->dev = rnd(seed) % 3;
    g->addr = rnd(seed) % 100000;
    g->len = 1 + rnd(seed) % ((rnd(seed) % 4 == 0) ? 50000 : 500);
    g->reg_len = g->len;
    g->backend_mask = 1;
    regs[n_regs] = g;
    live[n_regs] = 1;
    n_regs++;
    CHECK_RC(ixl_registry_add(r, g), IXL_OK);
    CHECK_RC(ixl_registry_add_backend(r, g, 0), IXL_OK);
}

static void query_all(struct ixl_registry *r, uint64_t *seed, int count)
{
    for (int q = 0; q < count; q++) {
        uint64_t dev = rnd(seed) % 3, addr = rnd(seed) % 110000, len = 1 + rnd(seed) % 3000;
        struct region *g = ixl_registry_cover(r, IXL_MEM_DRAM, 0, dev, addr, len);
        int want = brute(dev, addr, len);
        if (want != (g != NULL))
            check_fail(__FILE__, __LINE__, "cover(dev %llu, 0x%llx, %llu): index %s, brute %s",
                       (unsigned long long)dev, (unsigned long long)addr, (unsigned long long)len,
                       g ? "found" : "none", want ? "found" : "none");
        if (g) {
            CHECK(g->dev == dev && g->addr <= addr && g->addr + g->len >= addr + len);
            CHECK(ixl_registry_cover(r, IXL_MEM_DRAM, 1, dev, addr, len) == NULL);
            CHECK(ixl_registry_cover(r, IXL_MEM_VRAM, 0, dev, addr, len) == NULL);
        }
    }
}

int main(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct ixl_registry *r = ixl_registry_create();
    CHECK(r != NULL);
    /* A batch (sorted all at once), then single insertions. */
    for (int i = 0; i < 1000; i++)
        add(r, &seed);
    ixl_registry_commit(r);
    query_all(r, &seed, 20000);
    for (int i = 0; i < 200; i++) {
        add(r, &seed);
        ixl_registry_commit(r);
        query_all(r, &seed, 50);
    }
    /* Removals, one at a time and in groups. */
    for (int k = 0; k < 600; k++) {
        int i = (int)(rnd(&seed) % (uint64_t)n_regs);
        if (!live[i])
            continue;
        ixl_registry_remove_backend(r, regs[i], 0);
        ixl_registry_remove(r, regs[i]);
        live[i] = 0;
        if (k % 7 == 0) {
            ixl_registry_commit(r);
            query_all(r, &seed, 200);
        }
    }
    ixl_registry_commit(r);
    query_all(r, &seed, 20000);

    /* Exact lookups see every live region. */
    for (int i = 0; i < n_regs; i++) {
        struct region *g =
            ixl_registry_exact(r, IXL_MEM_DRAM, regs[i]->addr, regs[i]->len, regs[i]->dev);
        CHECK(live[i] ? g != NULL : 1);
        if (!live[i])
            free(regs[i]);
    }
    /* Whole-file registrations (len 0) cover everything after their offset. */
    CHECK(ixl_region_span(IXL_MEM_FILE, 4096, 0) == UINT64_MAX - 4096);
    CHECK(ixl_region_span(IXL_MEM_DRAM, 4096, 0) == 0);
    ixl_registry_free(r); /* frees the live regions */
    printf("ok\n");
    return 0;
}

/* Descriptor lists: plain descriptors and strided runs, indexing, bounds, overflow. */
#include "check.h"
#include "core/dlist.h"

/* The division by multiplication that finds a random index's run (src/core/dlist.h): exact for
 * every divisor and dividend, edges near 2^64 and powers of two included. */
static void test_udiv(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    const uint64_t us[] = {2,
                           3,
                           7,
                           64,
                           156250,
                           1ull << 32,
                           (1ull << 32) + 1,
                           1ull << 63,
                           (1ull << 63) + 1,
                           UINT64_MAX - 1,
                           UINT64_MAX};
    for (int t = 0; t < 400000; t++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint64_t u = t < 11 * 16 ? us[t / 16] : 2 + s % (t % 3 ? 1000000 : UINT64_MAX - 2);
        uint64_t x = s * 0x2545f4914f6cdd1dull;
        switch (t % 4) {
        case 0:
            x = UINT64_MAX - (x % 1000);
            break; /* near 2^64 */
        case 1:
            x = u * (x % (UINT64_MAX / u)) - 1 + (x & 2);
            break; /* next to a multiple */
        case 2:
            x %= 64 * u > u ? 64 * u : UINT64_MAX;
            break;
        default:
            break;
        }
        uint64_t q = ixl_udiv_m(x, u, ixl_udiv_magic(u));
        if (q != x / u)
            check_fail(__FILE__, __LINE__, "%llu / %llu: %llu, want %llu", (unsigned long long)x,
                       (unsigned long long)u, (unsigned long long)q, (unsigned long long)(x / u));
    }
}

int main(void)
{
    test_udiv();
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_COUNT, 0, &l), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 0, &l), IXL_OK);
    CHECK(ixl_dlist_count(l) == 0 && ixl_dlist_run_count(l) == 0);
    CHECK(ixl_dlist_type(l) == IXL_MEM_DRAM);

    struct ixl_desc d[3] = {{0x1000, 64, 0}, {0x2000, 128, 0}, {0x3000, 256, 1}};
    CHECK_RC(ixl_dlist_add(l, d, 3), IXL_OK);
    struct ixl_run runs[2] = {{0x10000, 32, 4096, 1000000, 0}, {0x900000000, 8, 8, 7, 2}};
    CHECK_RC(ixl_dlist_add_runs(l, runs, 2), IXL_OK);
    CHECK(ixl_dlist_count(l) == 3 + 1000000 + 7);
    CHECK(ixl_dlist_run_count(l) == 5);

    struct ixl_desc o;
    CHECK_RC(ixl_dlist_get(l, 1, &o), IXL_OK);
    CHECK(o.addr == 0x2000 && o.len == 128 && o.dev == 0);
    CHECK_RC(ixl_dlist_get(l, 3, &o), IXL_OK);
    CHECK(o.addr == 0x10000 && o.len == 32);
    CHECK_RC(ixl_dlist_get(l, 3 + 999999, &o), IXL_OK);
    CHECK(o.addr == 0x10000 + 999999ull * 4096);
    CHECK_RC(ixl_dlist_get(l, 3 + 1000000 + 6, &o), IXL_OK);
    CHECK(o.addr == 0x900000000 + 6 * 8 && o.dev == 2);
    CHECK_RC(ixl_dlist_get(l, ixl_dlist_count(l), &o), IXL_ERR_INDEX);
    struct ixl_run r;
    CHECK_RC(ixl_dlist_get_run(l, 3, &r), IXL_OK);
    CHECK(r.count == 1000000 && r.stride == 4096);
    CHECK_RC(ixl_dlist_get_run(l, 5, &r), IXL_ERR_INDEX);

    /* Zero lengths, zero counts and runs whose end wraps around are refused, and nothing is
     * appended by a call that fails. */
    struct ixl_desc zero = {0x1000, 0, 0};
    CHECK_RC(ixl_dlist_add(l, &zero, 1), IXL_ERR_INVALID_ARG);
    struct ixl_desc wrap = {UINT64_MAX - 10, 64, 0};
    CHECK_RC(ixl_dlist_add(l, &wrap, 1), IXL_ERR_INVALID_ARG);
    struct ixl_run bad[] = {{0x1000, 64, 64, 0, 0},
                            {0x1000, 64, UINT64_MAX / 2, 3, 0},
                            {UINT64_MAX - 100, 64, 100, 2, 0}};
    for (int i = 0; i < 3; i++)
        CHECK_RC(ixl_dlist_add_runs(l, &bad[i], 1), IXL_ERR_INVALID_ARG);
    CHECK(ixl_dlist_run_count(l) == 5);
    CHECK_RC(ixl_dlist_add(NULL, d, 1), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_dlist_add(l, NULL, 1), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_dlist_add(l, NULL, 0), IXL_OK);

    /* Growth past the hint. */
    for (int i = 0; i < 10000; i++) {
        struct ixl_desc x = {(uint64_t)i * 100, 10, 0};
        CHECK_RC(ixl_dlist_add(l, &x, 1), IXL_OK);
    }
    CHECK_RC(ixl_dlist_get(l, ixl_dlist_count(l) - 1, &o), IXL_OK);
    CHECK(o.addr == 9999 * 100);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(NULL);
    printf("ok\n");
    return 0;
}

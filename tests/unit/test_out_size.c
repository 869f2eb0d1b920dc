/* Output structs grow "size first" (ixl.h): an older caller gets only the fields it knows and
 * nothing past them, a size below the first generation is refused with nothing written, a
 * caller newer than the library gets size set back to the library's. Checked on the helper
 * every call uses (with a two-generation struct: this library has only first generations) and
 * on every API function that fills such a struct, with a canary after the caller's size. */
#include <stdalign.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "util/out.h"

#define CANARY 0xA5

/* ---- the helper, with a struct in two generations --------------------------------------- */

struct gen1 {
    uint32_t size;
    uint32_t a;
    uint64_t b;
};

struct gen2 {
    uint32_t size;
    uint32_t a;
    uint64_t b;
    uint32_t c; /* added by generation 2 */
    uint64_t d; /* added by generation 2 */
};

#define GEN_V1 IXL_SIZE_THROUGH(struct gen2, b)

static void test_helper(void)
{
    struct gen2 lib = {.size = sizeof(lib), .a = 1, .b = 2, .c = 3, .d = 4};

    /* An old caller (generation 1) with a canary right after its struct. */
    struct {
        struct gen1 s;
        unsigned char canary[32];
    } old;
    memset(&old, CANARY, sizeof(old));
    old.s.size = sizeof(old.s);
    CHECK_RC(ixl_out_write(&old.s, &lib, sizeof(lib), GEN_V1, alignof(struct gen2)), IXL_OK);
    CHECK(old.s.size == sizeof(struct gen1) && old.s.a == 1 && old.s.b == 2);
    for (size_t i = 0; i < sizeof(old.canary); i++)
        CHECK(old.canary[i] == CANARY);

    /* A size between two fields of generation 2 gets whole fields only. */
    struct gen2 mid;
    memset(&mid, CANARY, sizeof(mid));
    mid.size = (uint32_t)(offsetof(struct gen2, d) + 4);
    CHECK_RC(ixl_out_write(&mid, &lib, sizeof(lib), GEN_V1, alignof(struct gen2)), IXL_OK);
    CHECK(mid.size == offsetof(struct gen2, d) + 4 && mid.b == 2 && mid.c == 3);
    const unsigned char *dp = (const unsigned char *)&mid.d;
    for (size_t i = 0; i < sizeof(mid.d); i++)
        CHECK(dp[i] == CANARY);

    /* Too small: refused, nothing written. */
    struct gen2 small, before;
    memset(&small, CANARY, sizeof(small));
    small.size = (uint32_t)GEN_V1 - 1;
    before = small;
    CHECK_RC(ixl_out_write(&small, &lib, sizeof(lib), GEN_V1, alignof(struct gen2)),
             IXL_ERR_INVALID_ARG);
    CHECK(memcmp(&small, &before, sizeof(small)) == 0);

    /* A newer caller: size comes back as the library's, nothing past it written. */
    struct {
        struct gen1 s;
        unsigned char more[32];
    } big;
    memset(&big, CANARY, sizeof(big));
    big.s.size = sizeof(big);
    struct gen1 lib1 = {.size = sizeof(lib1), .a = 7, .b = 8};
    CHECK_RC(ixl_out_write(&big.s, &lib1, sizeof(lib1), GEN_V1, alignof(struct gen1)), IXL_OK);
    CHECK(big.s.size == sizeof(struct gen1) && big.s.a == 7 && big.s.b == 8);
    for (size_t i = 0; i < sizeof(big.more); i++)
        CHECK(big.more[i] == CANARY);
}

/* ---- every API output struct -------------------------------------------------------------- */

/* One API call filling out (its first member is uint32_t size). */
typedef int (*fill_fn)(void *ctx, void *out);

/* Runs the three cases on one API function whose struct is lib_size bytes, first generation
 * v1 bytes. */
static void check_struct(const char *what, fill_fn fn, void *ctx, size_t lib_size, size_t v1)
{
    size_t cap = lib_size + 64;
    unsigned char *buf = malloc(cap), *before = malloc(cap);
    CHECK(buf && before);

    /* The first generation's size: nothing written past it. */
    memset(buf, CANARY, cap);
    uint32_t size = (uint32_t)v1;
    memcpy(buf, &size, sizeof(size));
    if (fn(ctx, buf) != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s with the first generation's size failed", what);
    memcpy(&size, buf, sizeof(size));
    if (size != v1)
        check_fail(__FILE__, __LINE__, "%s: size %u, want %zu", what, size, v1);
    for (size_t i = v1; i < cap; i++)
        if (buf[i] != CANARY)
            check_fail(__FILE__, __LINE__, "%s wrote byte %zu past the caller's size %zu", what, i,
                       v1);

    /* One byte short of the first generation: refused, nothing written. */
    memset(buf, CANARY, cap);
    size = (uint32_t)v1 - 1;
    memcpy(buf, &size, sizeof(size));
    memcpy(before, buf, cap);
    int rc = fn(ctx, buf);
    if (rc != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, __LINE__, "%s with size %u returned %s, want IXL_ERR_INVALID_ARG",
                   what, size, ixl_strerror(rc));
    if (memcmp(buf, before, cap) != 0)
        check_fail(__FILE__, __LINE__, "%s wrote into a struct it refused", what);

    /* Larger than the library's: size comes back as the library's, nothing past it. */
    memset(buf, CANARY, cap);
    size = (uint32_t)cap;
    memcpy(buf, &size, sizeof(size));
    if (fn(ctx, buf) != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s with a larger size failed", what);
    memcpy(&size, buf, sizeof(size));
    if (size != lib_size)
        check_fail(__FILE__, __LINE__, "%s: size %u, want the library's %zu", what, size, lib_size);
    for (size_t i = lib_size; i < cap; i++)
        if (buf[i] != CANARY)
            check_fail(__FILE__, __LINE__, "%s wrote byte %zu past its own struct", what, i);
    free(buf);
    free(before);
}

static int fill_config(void *ctx, void *out)
{
    (void)ctx;
    return ixl_config_get(0, out);
}

static int fill_plugin_get(void *ctx, void *out)
{
    (void)ctx;
    return ixl_plugin_get(0, out);
}

static int fill_plugin_find(void *ctx, void *out)
{
    (void)ctx;
    return ixl_plugin_find("TEST", out);
}

static int fill_stats(void *ctx, void *out)
{
    return ixl_agent_stats(ctx, out);
}

static int fill_telemetry(void *ctx, void *out)
{
    return ixl_xfer_telemetry(ctx, out);
}

static int fill_info(void *ctx, void *out)
{
    return ixl_xfer_info(ctx, out);
}

static int fill_estimate(void *ctx, void *out)
{
    return ixl_xfer_estimate(ctx, out);
}

static int fill_device_info(void *ctx, void *out)
{
    (void)ctx;
    return ixl_device_info(0, out); /* ctest runs this with the simulated CUDA driver */
}

static void test_api(void)
{
    check_struct("ixl_device_info", fill_device_info, NULL, sizeof(struct ixl_device_info),
                 IXL_SIZE_THROUGH(struct ixl_device_info, pci_bus));
    check_struct("ixl_config_get", fill_config, NULL, sizeof(struct ixl_config_var),
                 IXL_SIZE_THROUGH(struct ixl_config_var, description));
    check_struct("ixl_plugin_get", fill_plugin_get, NULL, sizeof(struct ixl_plugin_info),
                 IXL_SIZE_THROUGH(struct ixl_plugin_info, n_options));
    check_struct("ixl_plugin_find", fill_plugin_find, NULL, sizeof(struct ixl_plugin_info),
                 IXL_SIZE_THROUGH(struct ixl_plugin_info, n_options));

    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create("outsize", &p, &a), IXL_OK);
    check_struct("ixl_agent_stats", fill_stats, a, sizeof(struct ixl_agent_stats),
                 IXL_SIZE_THROUGH(struct ixl_agent_stats, notifs_sent));

    enum { N = 4096 };
    static unsigned char src[N], dst[N];
    struct ixl_reg_desc rd[2] = {{(uintptr_t)src, N, 0, NULL, 0}, {(uintptr_t)dst, N, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    struct ixl_dlist *l, *r;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), IXL_OK);
    struct ixl_desc ld = {(uintptr_t)src, N, 0}, rdd = {(uintptr_t)dst, N, 0};
    CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rdd, 1), IXL_OK);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "outsize", NULL, &x), IXL_OK);
    int rc = ixl_xfer_post(x);
    CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    check_struct("ixl_xfer_telemetry", fill_telemetry, x, sizeof(struct ixl_xfer_telemetry),
                 IXL_SIZE_THROUGH(struct ixl_xfer_telemetry, post_count));
    check_struct("ixl_xfer_info", fill_info, x, sizeof(struct ixl_xfer_info),
                 IXL_SIZE_THROUGH(struct ixl_xfer_info, bytes));
    check_struct("ixl_xfer_estimate", fill_estimate, x, sizeof(struct ixl_cost),
                 IXL_SIZE_THROUGH(struct ixl_cost, method));
    struct ixl_cost cost = {.size = sizeof(cost)};
    CHECK_RC(ixl_xfer_estimate(x, &cost), IXL_OK);
    CHECK(cost.method == IXL_COST_ANALYTICAL && cost.duration_us > 0);

    /* An error leaves the struct as it was (telemetry of a request never completed). */
    struct ixl_xfer *y;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "outsize", NULL, &y), IXL_OK);
    struct ixl_xfer_telemetry t, t0;
    memset(&t, CANARY, sizeof(t));
    t.size = sizeof(t);
    t0 = t;
    CHECK_RC(ixl_xfer_telemetry(y, &t), IXL_ERR_NOT_POSTED);
    CHECK(memcmp(&t, &t0, sizeof(t)) == 0);

    CHECK_RC(ixl_xfer_release(y), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    ixl_agent_destroy(a);
}

int main(void)
{
    test_helper();
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    test_api();
    printf("test_out_size: ok\n");
    return 0;
}

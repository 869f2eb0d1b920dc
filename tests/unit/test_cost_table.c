/* The storage cost table (plugins/common/ixl_cost_table.h): the format's rows, its errors
 * naming the line, interpolation in log2(size), the built-in default, and a missing or
 * malformed calibration file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../plugins/common/ixl_cost_table.h"
#include "check.h"

static const struct ixl_sys sys = {
    .size = sizeof(struct ixl_sys),
    .malloc = malloc,
    .open = (int (*)(const char *, int, mode_t))open,
    .read = read,
    .close = close,
};

static int parse(const char *text, struct ixl_cost_table *t, char *why, size_t n)
{
    return ixl_cost_table_parse(text, strlen(text), "t", true, malloc, t, why, n);
}

int main(void)
{
    char why[512];
    struct ixl_cost_table t;
    CHECK_RC(parse("# c\nixl-cost-table 1\nA staged WRITE 1M 1.0 # x\nA staged WRITE 4M 3\n"
                   "A staged READ 1K 2\nB mt WRITE 1G 9\n",
                   &t, why, sizeof(why)),
             IXL_OK);
    CHECK(t.n == 4 && t.measured);
    CHECK(ixl_cost_table_gbps(&t, "A", "staged", IXL_OP_WRITE, 1 << 20) == 1.0);
    CHECK(ixl_cost_table_gbps(&t, "A", "staged", IXL_OP_WRITE, 2 << 20) == 2.0); /* halfway */
    CHECK(ixl_cost_table_gbps(&t, "A", "staged", IXL_OP_WRITE, 1) == 1.0);       /* held */
    CHECK(ixl_cost_table_gbps(&t, "A", "staged", IXL_OP_WRITE, 1ull << 40) == 3.0);
    CHECK(ixl_cost_table_gbps(&t, "A", "staged", IXL_OP_READ, 5) == 2.0);
    CHECK(ixl_cost_table_gbps(&t, "A", "mt", IXL_OP_READ, 5) == 0);
    struct ixl_cost c = {.size = sizeof(c)};
    CHECK_RC(ixl_cost_table_estimate(&t, "B", "mt", IXL_OP_WRITE, 1ull << 30, 9000000, &c), IXL_OK);
    CHECK(c.duration_us == 1000 && c.method == IXL_COST_MEASURED);
    CHECK_RC(ixl_cost_table_estimate(&t, "C", "mt", IXL_OP_WRITE, 1, 1, &c), IXL_ERR_NOT_SUPPORTED);
    ixl_cost_table_free(&t);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "is empty"},
        {"A staged WRITE 1M 1\n", "line 1: the first line must be"},
        {"ixl-cost-table 2\n", "line 1"},
        {"ixl-cost-table 1\nA staged WRITE 1M\n", "line 2: want 5 fields"},
        {"ixl-cost-table 1\nA/b staged WRITE 1M 1\n", "BACKEND"},
        {"ixl-cost-table 1\n\nA st/ged WRITE 1M 1\n", "line 3: PATH"},
        {"ixl-cost-table 1\nA staged PUT 1M 1\n", "OP must be"},
        {"ixl-cost-table 1\nA staged READ 1X 1\n", "SIZE"},
        {"ixl-cost-table 1\nA staged READ 0 1\n", "SIZE"},
        {"ixl-cost-table 1\nA staged READ 1M -1\n", "GBPS"},
        {"ixl-cost-table 1\nA staged READ 1M 1x\n", "GBPS"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        CHECK_RC(parse(bad[i].text, &t, why, sizeof(why)), IXL_ERR_INVALID_ARG);
        CHECK_STR_HAS(why, bad[i].want);
    }

    /* The default table parses and has rows for every storage backend's VRAM path. */
    CHECK_RC(ixl_cost_table_parse(IXL_COST_TABLE_DEFAULT, sizeof(IXL_COST_TABLE_DEFAULT) - 1,
                                  "built-in default", false, malloc, &t, why, sizeof(why)),
             IXL_OK);
    CHECK(!t.measured);
    CHECK(ixl_cost_table_gbps(&t, "POSIX", "staged", IXL_OP_READ, 16 << 20) > 0);
    CHECK(ixl_cost_table_gbps(&t, "GDS", "batch", IXL_OP_WRITE, 16 << 20) > 0);
    CHECK(ixl_cost_table_gbps(&t, "GDS_MT", "mt", IXL_OP_WRITE, 16 << 20) > 0);
    ixl_cost_table_free(&t);

    /* Files: a named file that is missing is an error; one that exists is read. */
    char dir[] = "/tmp/ixl_cost_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof(path), "%s/missing", dir);
    CHECK_RC(ixl_cost_table_open(&sys, path, &t, why, sizeof(why)), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(why, "bench/gds.sh");
    snprintf(path, sizeof(path), "%s/table", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("ixl-cost-table 1\nPOSIX staged READ 1M 7.5\n", f);
    fclose(f);
    CHECK_RC(ixl_cost_table_open(&sys, path, &t, why, sizeof(why)), IXL_OK);
    CHECK(t.n == 1 && t.measured && strcmp(t.source, path) == 0);
    ixl_cost_table_free(&t);
    f = fopen(path, "w");
    fputs("ixl-cost-table 1\nPOSIX staged READ 1M\n", f);
    fclose(f);
    CHECK_RC(ixl_cost_table_open(&sys, path, &t, why, sizeof(why)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(why, "line 2");
    unlink(path);
    rmdir(dir);
    printf("test_cost_table: ok\n");
    return 0;
}

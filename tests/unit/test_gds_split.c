/*
 * GDS's split planner (plugins/gds/gds_split.c) against cuFile limits read from configuration
 * files (tests/unit/gds/, *.json): cuFile's defaults (1 MiB per buffer, 128 entries: the seeds'
 * 16 MiB "FAILS" row becomes 16 entries of 1 MiB), a device cache that holds only 8 buffers, a
 * configuration that cannot serve any size (the message names the key to change), a malformed
 * value; every plan covers each descriptor exactly once, in order, in pieces within the limit.
 * GDS_MT's piece size across its threads.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../plugins/gds/gds_split.h"
#include "check.h"

#define MiB (1024ull * 1024)

static void load(const char *name, struct gds_limits *l, int want, char *why, size_t n)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", IXL_GDS_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        check_fail(__FILE__, __LINE__, "cannot open %s", path);
    static char text[65536];
    size_t len = fread(text, 1, sizeof(text), f);
    fclose(f);
    gds_limits_default(l);
    CHECK_RC(gds_limits_parse_json(text, len, l, why, n), want);
}

/* Plans lens[0..n) in batches of at most entries pieces of at most entry bytes; checks the
 * coverage and returns the number of batches (*pieces: of pieces). */
static size_t plan(const uint64_t *lens, size_t n, uint64_t entry, uint32_t entries, size_t *pieces)
{
    struct gds_cursor c = {0, 0};
    struct gds_piece *out = calloc(entries, sizeof(*out));
    CHECK(out != NULL);
    size_t batches = 0, total = 0, desc = 0;
    uint64_t off = 0;
    for (;;) {
        size_t k = gds_plan_batch(lens, n, entry, &c, out, entries);
        if (k == 0)
            break;
        CHECK(k <= entries);
        batches++;
        for (size_t i = 0; i < k; i++) {
            while (desc < n && off == lens[desc]) {
                desc++;
                off = 0;
            }
            CHECK(out[i].desc == desc && out[i].off == off); /* in order, no gap */
            CHECK(out[i].len > 0 && out[i].len <= entry);
            off += out[i].len;
            CHECK(off <= lens[desc]);
            total++;
        }
    }
    while (desc < n && off == lens[desc]) {
        desc++;
        off = 0;
    }
    CHECK(desc == n); /* everything covered */
    CHECK(total == gds_count_pieces(lens, n, entry));
    free(out);
    *pieces = total;
    return batches;
}

int main(void)
{
    char why[512];
    struct gds_limits l;
    uint64_t entry;
    uint32_t entries;
    size_t pieces;

    /* cuFile's defaults, from its shipped cufile.json (comments included). */
    load("cufile_default.json", &l, IXL_OK, why, sizeof(why));
    CHECK(l.per_buffer == 1 * MiB && l.batch_max == 128 && l.device_cache == 128 * MiB &&
          l.max_direct == 16 * MiB);
    CHECK_RC(gds_limits_batch(&l, 0, 0, &entry, &entries, why, sizeof(why)), IXL_OK);
    CHECK(entry == 1 * MiB && entries == 128);
    uint64_t one[] = {16 * MiB};
    CHECK(plan(one, 1, entry, entries, &pieces) == 1 && pieces == 16); /* the seeds' FAILS row */
    uint64_t big[] = {64 * MiB};
    CHECK(plan(big, 1, entry, entries, &pieces) == 1 && pieces == 64);
    uint64_t huge[] = {200 * MiB};
    CHECK(plan(huge, 1, entry, entries, &pieces) == 2 && pieces == 200);
    uint64_t mixed[] = {0, 3 * MiB + 5, 4096, 0, 1 * MiB, 0};
    CHECK(plan(mixed, 6, entry, entries, &pieces) == 1 && pieces == 6);
    uint64_t none[] = {0, 0};
    CHECK(plan(none, 2, entry, entries, &pieces) == 0 && pieces == 0);
    /* Options cap further: 64 KiB entries, 10 per batch. */
    CHECK_RC(gds_limits_batch(&l, 64 * 1024, 10, &entry, &entries, why, sizeof(why)), IXL_OK);
    CHECK(entry == 64 * 1024 && entries == 10);
    CHECK(plan(one, 1, entry, entries, &pieces) == 26 && pieces == 256);
    /* A cap above cuFile's limit does not raise it. */
    CHECK_RC(gds_limits_batch(&l, 8 * MiB, 4096, &entry, &entries, why, sizeof(why)), IXL_OK);
    CHECK(entry == 1 * MiB && entries == 128);

    /* A device cache of 8 buffers bounds the batch (max_device_cache_size_kb /
     * per_buffer_cache_size_kb >= io_batchsize is cuFile's rule). */
    load("cufile_small_cache.json", &l, IXL_OK, why, sizeof(why));
    CHECK(l.per_buffer == 256 * 1024 && l.device_cache == 2 * MiB && l.batch_max == 128);
    CHECK(l.max_direct == 16 * MiB); /* absent: the default stays */
    CHECK_RC(gds_limits_batch(&l, 0, 0, &entry, &entries, why, sizeof(why)), IXL_OK);
    CHECK(entry == 256 * 1024 && entries == 8);
    CHECK(plan(one, 1, entry, entries, &pieces) == 8 && pieces == 64);

    /* A device cache smaller than one buffer serves no size: the message says what to do. */
    load("cufile_unservable.json", &l, IXL_OK, why, sizeof(why));
    CHECK_RC(gds_limits_batch(&l, 0, 0, &entry, &entries, why, sizeof(why)), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(why, "max_device_cache_size_kb");
    CHECK_STR_HAS(why, "cufile.json");
    CHECK_STR_HAS(why, "GDS_MT");
    struct gds_limits zero;
    gds_limits_default(&zero);
    zero.per_buffer = 0;
    CHECK_RC(gds_limits_batch(&zero, 0, 0, &entry, &entries, why, sizeof(why)),
             IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(why, "per_buffer_cache_size_kb");

    /* A malformed value is refused, naming the key; the limits are left as they were. */
    load("cufile_bad.json", &l, IXL_ERR_INVALID_ARG, why, sizeof(why));
    CHECK_STR_HAS(why, "per_buffer_cache_size_kb");
    CHECK(l.per_buffer == 1 * MiB);

    /* GDS_MT: len / threads rounded up to 64 KiB, within [min, max]. */
    CHECK(gds_mt_piece(16 * MiB, 8, 1 * MiB, 16 * MiB) == 2 * MiB);
    CHECK(gds_mt_piece(64 * MiB, 8, 1 * MiB, 16 * MiB) == 8 * MiB);
    CHECK(gds_mt_piece(1 * MiB, 8, 1 * MiB, 16 * MiB) == 1 * MiB);
    CHECK(gds_mt_piece(1 * MiB, 8, 4096, 16 * MiB) == 128 * 1024);
    CHECK(gds_mt_piece(1024 * MiB, 8, 1 * MiB, 16 * MiB) == 16 * MiB);
    CHECK(gds_mt_piece(100000, 3, 4096, 16 * MiB) == 64 * 1024);
    printf("ok\n");
    return 0;
}

/*
 * The metadata and descriptor-list decoders on hostile input: a real metadata blob (an agent
 * with the TEST backend and 20 registered regions) and a real serialized list are fed cut at
 * every length and with 10^4 random corruptions each. Truncations must be IXL_ERR_MALFORMED
 * and leave no remote behind; corruptions may load or fail but never crash, and what loads is
 * invalidated again. Also: the intact blob loads and its regions are usable, the list round
 * trip is exact, and a wrong version or magic says so in the agent's last error.
 *
 *   test_codec [seed]     (the seed of the corruptions; printed, so a failure can be replayed)
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "serdes/codec.h"

#define N_REGIONS 20
#define REGION_BYTES 4096
#define N_CORRUPTIONS 10000

static const char *src_name = "codec_src";

/* xorshift64*: small, seedable, the same sequence everywhere. */
static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Flips 1..8 random bytes of buf (each XOR-ed with a non-zero value). */
static void corrupt(uint8_t *buf, size_t len)
{
    int n = 1 + (int)(rng() % 8);
    for (int i = 0; i < n; i++)
        buf[rng() % len] ^= (uint8_t)(1 + rng() % 255);
}

static struct ixl_agent *make_agent(const char *name)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    struct ixl_agent *a = NULL;
    ixl_status rc = ixl_agent_create(name, &p, &a);
    if (rc == IXL_ERR_NOT_FOUND)
        skip(1, "the TEST plugin is not found: set IXL_PLUGIN_DIR to the build's tests/plugins");
    CHECK_RC(rc, IXL_OK);
    return a;
}

/* The name a blob carries, if the decoder reads one (else ""). */
static void blob_name(const uint8_t *blob, size_t len, char *name)
{
    struct ixl_md_decoded md;
    char why[256];
    name[0] = '\0';
    if (ixl_md_decode(blob, len, &md, why, sizeof(why)) == IXL_OK) {
        snprintf(name, IXL_NAME_MAX, "%s", md.name);
        ixl_md_decoded_free(&md);
    }
}

/* (a) every cut of the blob is MALFORMED, says why, and adds no remote. */
static void md_truncations(struct ixl_agent *loader, const uint8_t *blob, size_t len)
{
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *part = malloc(cut ? cut : 1);
        CHECK(part != NULL);
        memcpy(part, blob, cut);
        char name[IXL_NAME_MAX] = "";
        ixl_status rc = ixl_md_load(loader, part, cut, name, sizeof(name));
        if (rc != IXL_ERR_MALFORMED)
            check_fail(__FILE__, __LINE__, "cut at %zu of %zu: ixl_md_load gave %s", cut, len,
                       ixl_strerror(rc));
        CHECK_STR_HAS(ixl_agent_last_error(loader), "malformed metadata");
        CHECK_RC(ixl_remote_check(loader, src_name, NULL), IXL_ERR_NOT_FOUND);
        free(part);
    }
    printf("md: %zu truncations refused\n", len);
}

/* (b) corruptions load or fail, never crash; what loads is invalidated, what fails is gone. */
static void md_corruptions(struct ixl_agent *loader, const uint8_t *blob, size_t len)
{
    uint8_t *buf = malloc(len);
    CHECK(buf != NULL);
    int loaded = 0;
    for (int i = 0; i < N_CORRUPTIONS; i++) {
        memcpy(buf, blob, len);
        corrupt(buf, len);
        char name[IXL_NAME_MAX];
        ixl_status rc = ixl_md_load(loader, buf, len, name, sizeof(name));
        if (rc == IXL_OK) {
            loaded++;
            CHECK_RC(ixl_remote_check(loader, name, NULL), IXL_OK);
            CHECK_RC(ixl_remote_invalidate(loader, name), IXL_OK);
            CHECK_RC(ixl_remote_check(loader, name, NULL), IXL_ERR_NOT_FOUND);
            continue;
        }
        CHECK(rc < 0);
        CHECK(ixl_agent_last_error(loader)[0] != '\0');
        blob_name(buf, len, name);
        if (name[0] != '\0')
            CHECK_RC(ixl_remote_check(loader, name, NULL), IXL_ERR_NOT_FOUND);
    }
    CHECK_RC(ixl_remote_check(loader, src_name, NULL), IXL_ERR_NOT_FOUND);
    printf("md: %d corruptions, %d still loaded\n", N_CORRUPTIONS, loaded);
    free(buf);
}

static struct ixl_dlist *one_desc(uint64_t addr, uint64_t len)
{
    struct ixl_dlist *l;
    struct ixl_desc d = {addr, len, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

/* (c) the intact blob loads and its regions (and only they) are usable. */
static void md_intact(struct ixl_agent *loader, const uint8_t *blob, size_t len,
                      uint8_t (*mem)[REGION_BYTES])
{
    char name[IXL_NAME_MAX] = "";
    CHECK_RC(ixl_md_load(loader, blob, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, src_name) == 0);
    struct ixl_dlist *in = one_desc((uint64_t)(uintptr_t)mem[3] + 100, 1000);
    CHECK_RC(ixl_remote_check(loader, src_name, in), IXL_OK);
    ixl_dlist_destroy(in);
    struct ixl_run kv = {(uint64_t)(uintptr_t)mem[0], 512, REGION_BYTES, N_REGIONS, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &in), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(in, &kv, 1), IXL_OK);
    CHECK_RC(ixl_remote_check(loader, src_name, in), IXL_OK); /* one block in each region */
    ixl_dlist_destroy(in);
    /* Past the last region, and across the end of one (regions are REGION_BYTES apart but
     * only REGION_BYTES / 2 long). */
    struct ixl_dlist *out = one_desc((uint64_t)(uintptr_t)mem[N_REGIONS], 64);
    CHECK_RC(ixl_remote_check(loader, src_name, out), IXL_ERR_NOT_FOUND);
    ixl_dlist_destroy(out);
    out = one_desc((uint64_t)(uintptr_t)mem[5] + REGION_BYTES / 2 - 8, 16);
    CHECK_RC(ixl_remote_check(loader, src_name, out), IXL_ERR_NOT_FOUND);
    ixl_dlist_destroy(out);
    CHECK_RC(ixl_remote_invalidate(loader, src_name), IXL_OK);
    CHECK_RC(ixl_remote_check(loader, src_name, NULL), IXL_ERR_NOT_FOUND);
    printf("md: intact blob of %zu bytes loads\n", len);
}

/* (f) a version this ixl does not read, and bytes that are not metadata, say so. */
static void md_version_magic(struct ixl_agent *loader, const uint8_t *blob, size_t len)
{
    uint8_t *buf = malloc(len);
    CHECK(buf != NULL);
    memcpy(buf, blob, len);
    buf[4] = IXL_MD_VERSION + 1; /* u16 version, little-endian, after the magic */
    CHECK_RC(ixl_md_load(loader, buf, len, NULL, 0), IXL_ERR_MALFORMED);
    CHECK_STR_HAS(ixl_agent_last_error(loader), "metadata version 2");
    CHECK_STR_HAS(ixl_agent_last_error(loader), "reads version 1");
    memcpy(buf, blob, len);
    buf[0] = 'X';
    CHECK_RC(ixl_md_load(loader, buf, len, NULL, 0), IXL_ERR_MALFORMED);
    CHECK_STR_HAS(ixl_agent_last_error(loader), "bad magic");
    memcpy(buf, "IXLD", 4); /* a descriptor list is not metadata */
    CHECK_RC(ixl_md_load(loader, buf, len, NULL, 0), IXL_ERR_MALFORMED);
    CHECK_STR_HAS(ixl_agent_last_error(loader), "not ixl metadata");
    CHECK_RC(ixl_remote_check(loader, src_name, NULL), IXL_ERR_NOT_FOUND);
    free(buf);
}

static void dlist_equal(const struct ixl_dlist *a, const struct ixl_dlist *b)
{
    CHECK(ixl_dlist_type(a) == ixl_dlist_type(b));
    CHECK(ixl_dlist_count(a) == ixl_dlist_count(b));
    CHECK(ixl_dlist_run_count(a) == ixl_dlist_run_count(b));
    for (size_t i = 0; i < ixl_dlist_run_count(a); i++) {
        struct ixl_run x, y;
        CHECK_RC(ixl_dlist_get_run(a, i, &x), IXL_OK);
        CHECK_RC(ixl_dlist_get_run(b, i, &y), IXL_OK);
        CHECK(memcmp(&x, &y, sizeof(x)) == 0);
    }
    uint64_t n = ixl_dlist_count(a);
    uint64_t probe[] = {0, 1, n / 2, n - 2, n - 1};
    for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++) {
        if (probe[i] >= n)
            continue;
        struct ixl_desc x, y;
        CHECK_RC(ixl_dlist_get(a, probe[i], &x), IXL_OK);
        CHECK_RC(ixl_dlist_get(b, probe[i], &y), IXL_OK);
        CHECK(x.addr == y.addr && x.len == y.len && x.dev == y.dev);
    }
}

/* (d) and (e): a serialized list cut, corrupted, and round-tripped. */
static void dlist_cases(void)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_VRAM, 0, &l), IXL_OK);
    struct ixl_desc d[] = {{0x1000, 64, 0}, {0x2000, 128, 1}, {UINT64_MAX - 0x1000, 0x1000, 2}};
    CHECK_RC(ixl_dlist_add(l, d, 3), IXL_OK);
    struct ixl_run runs[] = {{0x200000000ull, 16384, 65536, 1000, 0},
                             {0x300000000ull, 16384, 65536, 1000, 1},
                             {0x10, 8, 0, 5, 3}};
    CHECK_RC(ixl_dlist_add_runs(l, runs, 3), IXL_OK);
    void *buf;
    size_t len;
    CHECK_RC(ixl_dlist_serialize(l, &buf, &len), IXL_OK);
    CHECK(len == 16 + 6 * 40);

    /* (e) the round trip gives the same list and the same bytes. */
    struct ixl_dlist *back;
    CHECK_RC(ixl_dlist_deserialize(buf, len, &back), IXL_OK);
    dlist_equal(l, back);
    void *again;
    size_t again_len;
    CHECK_RC(ixl_dlist_serialize(back, &again, &again_len), IXL_OK);
    CHECK(again_len == len && memcmp(again, buf, len) == 0);
    ixl_free(again);
    ixl_dlist_destroy(back);
    struct ixl_dlist *empty;
    CHECK_RC(ixl_dlist_create(IXL_MEM_OBJ, 0, &empty), IXL_OK);
    CHECK_RC(ixl_dlist_serialize(empty, &again, &again_len), IXL_OK);
    CHECK_RC(ixl_dlist_deserialize(again, again_len, &back), IXL_OK);
    dlist_equal(empty, back);
    ixl_dlist_destroy(back);
    ixl_free(again);
    ixl_dlist_destroy(empty);

    /* (d) every cut is MALFORMED. */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *part = malloc(cut ? cut : 1);
        CHECK(part != NULL);
        memcpy(part, buf, cut);
        ixl_status rc = ixl_dlist_deserialize(part, cut, &back);
        if (rc != IXL_ERR_MALFORMED)
            check_fail(__FILE__, __LINE__, "dlist cut at %zu of %zu: %s", cut, len,
                       ixl_strerror(rc));
        free(part);
    }

    /* (d) corruptions: decoded, or refused as MALFORMED / INVALID_ARG; what decodes
     * serializes back to the corrupted bytes. */
    uint8_t *c = malloc(len);
    CHECK(c != NULL);
    int decoded = 0;
    for (int i = 0; i < N_CORRUPTIONS; i++) {
        memcpy(c, buf, len);
        corrupt(c, len);
        ixl_status rc = ixl_dlist_deserialize(c, len, &back);
        if (rc == IXL_OK) {
            decoded++;
            CHECK_RC(ixl_dlist_serialize(back, &again, &again_len), IXL_OK);
            CHECK(again_len == len && memcmp(again, c, len) == 0);
            ixl_free(again);
            ixl_dlist_destroy(back);
            continue;
        }
        if (rc != IXL_ERR_MALFORMED && rc != IXL_ERR_INVALID_ARG)
            check_fail(__FILE__, __LINE__, "dlist corruption %d: %s", i, ixl_strerror(rc));
    }
    free(c);
    printf("dlist: %zu truncations refused, %d corruptions, %d still decoded\n", len, N_CORRUPTIONS,
           decoded);

    /* Header fields one at a time. */
    uint8_t *h = malloc(len);
    CHECK(h != NULL);
    size_t fields[] = {0, 4, 6, 7, 8, 15};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        memcpy(h, buf, len);
        h[fields[i]] ^= 0x40;
        CHECK_RC(ixl_dlist_deserialize(h, len, &back), IXL_ERR_MALFORMED);
    }
    free(h);
    CHECK_RC(ixl_dlist_deserialize(NULL, 0, &back), IXL_ERR_INVALID_ARG);
    CHECK_RC(ixl_dlist_deserialize(buf, len, NULL), IXL_ERR_INVALID_ARG);
    ixl_free(buf);
    ixl_dlist_destroy(l);
}

int main(int argc, char **argv)
{
    uint64_t seed =
        argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (seed == 0)
        seed = 1; /* xorshift's one fixed point */
    rng_state = seed;
    printf("seed %llu (replay: test_codec %llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    ixl_log_set_level(IXL_LOG_NONE); /* 10^4 refusals would flood the log */

    /* The source: N_REGIONS regions of half a slot each, so gaps lie between them. */
    static uint8_t mem[N_REGIONS + 1][REGION_BYTES];
    struct ixl_agent *src = make_agent(src_name);
    struct ixl_reg_desc regs[N_REGIONS];
    for (int i = 0; i < N_REGIONS; i++)
        regs[i] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)mem[i], REGION_BYTES / 2, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(src, IXL_MEM_DRAM, regs, N_REGIONS, NULL), IXL_OK);
    void *blob;
    size_t len;
    struct ixl_md_params mp = {.field_mask = IXL_MD_F_LABEL, .label = "all"};
    CHECK_RC(ixl_md_get(src, &mp, &blob, &len), IXL_OK);

    /* The decoder sees what was registered. */
    struct ixl_md_decoded md;
    char why[256];
    CHECK_RC(ixl_md_decode(blob, len, &md, why, sizeof(why)), IXL_OK);
    CHECK(strcmp(md.name, src_name) == 0);
    CHECK(md.n_backends == 1 && md.n_regions == N_REGIONS);
    CHECK(md.label_len == 3 && memcmp(md.label, "all", 3) == 0);
    ixl_md_decoded_free(&md);

    struct ixl_agent *loader = make_agent("codec_loader");
    md_truncations(loader, blob, len);
    md_corruptions(loader, blob, len);
    md_intact(loader, blob, len, mem);
    md_version_magic(loader, blob, len);
    dlist_cases();

    ixl_free(blob);
    ixl_agent_destroy(loader);
    ixl_agent_destroy(src);
    printf("ok\n");
    return 0;
}

/*
 * Writes the seed corpus of the fuzz targets: real metadata blobs from ixl_md_get() of agents
 * with the in-memory TEST (and TESTB) backends, real serialized descriptor lists, and
 * handcrafted edge cases (empty, truncated, huge counts, bad fields). The output is checked in
 * under tests/fuzz/corpus; regenerate it after a format change with
 *
 *   IXL_PLUGIN_DIR=build/tests/plugins IXL_CUDA_LIBRARY=build/tests/sim/libixl_cudasim.so \
 *   IXL_CUDASIM_DEVICES=4 build/tests/fuzz_gen_corpus tests/fuzz/corpus
 *
 * VRAM registrations are checked by the device layer (docs/device.md), so the VRAM regions
 * are real device memory of the simulated driver.
 *
 * Files are overwritten, never removed. Blobs carry random instance ids and incarnations, so
 * two runs differ in those bytes only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ixl/ixl.h>

#include "serdes/codec.h"

#define TM_PUB_MAGIC 0x544d4431u                     /* the TEST backend's public data: "TMD1" */
#define FUZZ_MD_KEY "fuzz-md-cluster-key-0123456789" /* fuzz_md.c's keyed loader's */

static const char *out_dir;
static int n_written;

static void die(const char *what, int rc)
{
    fprintf(stderr, "gen_corpus: %s: %s\n", what, rc ? ixl_strerror(rc) : strerror(errno));
    exit(1);
}

static void put(const char *kind, const char *name, const void *p, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", out_dir, kind);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path, 0);
    snprintf(path, sizeof(path), "%s/%s/%s", out_dir, kind, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (len > 0 && fwrite(p, 1, len, f) != len) || fclose(f) != 0)
        die(path, 0);
    n_written++;
}

static struct ixl_agent *agent(const char *name, const char *backends)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = backends};
    struct ixl_agent *a;
    int rc = ixl_agent_create(name, &p, &a);
    if (rc != IXL_OK)
        die("ixl_agent_create (is IXL_PLUGIN_DIR the build tree's tests/plugins?)", rc);
    return a;
}

static void reg(struct ixl_agent *a, enum ixl_mem type, uint64_t addr, uint64_t len, uint64_t dev,
                const char *bytes)
{
    struct ixl_reg_desc d = {addr, len, dev, bytes, bytes ? strlen(bytes) : 0};
    int rc = ixl_mem_register(a, type, &d, 1, NULL);
    if (rc != IXL_OK)
        die(ixl_agent_last_error(a), rc);
}

/* len bytes of device memory on dev (freed at exit). */
static uint64_t vram(int dev, size_t len)
{
    void *p;
    int rc = ixl_device_alloc(dev, len, &p);
    if (rc != IXL_OK)
        die("ixl_device_alloc (run with the simulated driver: see the top of this file)", rc);
    return (uint64_t)(uintptr_t)p;
}

static void md(struct ixl_agent *a, const struct ixl_md_params *p, const char *name)
{
    void *blob;
    size_t len;
    int rc = ixl_md_get(a, p, &blob, &len);
    if (rc != IXL_OK)
        die(ixl_agent_last_error(a), rc);
    put("md", name, blob, len);
    ixl_free(blob);
}

static struct ixl_dlist *dlist(enum ixl_mem type, const struct ixl_run *runs, size_t n)
{
    struct ixl_dlist *l;
    int rc = ixl_dlist_create(type, n, &l);
    if (rc == IXL_OK)
        rc = ixl_dlist_add_runs(l, runs, n);
    if (rc != IXL_OK)
        die("dlist", rc);
    return l;
}

static void dl(enum ixl_mem type, const struct ixl_run *runs, size_t n, const char *name)
{
    struct ixl_dlist *l = dlist(type, runs, n);
    void *buf;
    size_t len;
    int rc = ixl_dlist_serialize(l, &buf, &len);
    if (rc != IXL_OK)
        die("ixl_dlist_serialize", rc);
    put("dlist", name, buf, len);
    ixl_free(buf);
    ixl_dlist_destroy(l);
}

/* ---- real metadata ------------------------------------------------------------------------ */

static void real_md(void)
{
    static char buf[8][4096];
    struct ixl_agent *a = agent("corpus_a", "TEST,TESTB");
    for (int i = 0; i < 4; i++)
        reg(a, IXL_MEM_DRAM, (uint64_t)(uintptr_t)buf[i], sizeof(buf[i]), 0, NULL);
    reg(a, IXL_MEM_DRAM, (uint64_t)(uintptr_t)buf[4], 3 * sizeof(buf[4]), 1, NULL); /* dev 1 */
    reg(a, IXL_MEM_DRAM, (uint64_t)(uintptr_t)buf[4] + 64, 128, 0, NULL);           /* nested */
    reg(a, IXL_MEM_VRAM, vram(0, 1ull << 30), 1ull << 30, 0, NULL);
    reg(a, IXL_MEM_VRAM, vram(3, 1ull << 30), 1ull << 30, 3, NULL);
    reg(a, IXL_MEM_FILE, 0, 1 << 20, 7, "weights");

    md(a, NULL, "full");
    struct ixl_md_params p = {.field_mask = IXL_MD_F_CONN_INFO, .conn_info = false};
    md(a, &p, "no_conn");
    p = (struct ixl_md_params){.field_mask = IXL_MD_F_LABEL, .label = "all-layers"};
    md(a, &p, "full_label");

    struct ixl_backend *b;
    if (ixl_backend_find(a, "TESTB", &b) != IXL_OK)
        die("ixl_backend_find TESTB", IXL_ERR_NOT_FOUND);
    p = (struct ixl_md_params){.field_mask = IXL_MD_F_BACKENDS, .backends = &b, .n_backends = 1};
    md(a, &p, "backend_testb");

    struct ixl_run runs[] = {{(uint64_t)(uintptr_t)buf[0], 512, 1024, 4, 0},
                             {(uint64_t)(uintptr_t)buf[4] + 64, 64, 64, 2, 0}};
    struct ixl_dlist *l = dlist(IXL_MEM_DRAM, runs, 2);
    p = (struct ixl_md_params){.field_mask = IXL_MD_F_REGIONS, .regions = l};
    md(a, &p, "partial");
    p.field_mask |= IXL_MD_F_LABEL;
    p.label = "layer0";
    md(a, &p, "partial_label");
    p.field_mask |= IXL_MD_F_CONN_INFO;
    p.conn_info = false;
    md(a, &p, "partial_label_no_conn");
    ixl_dlist_destroy(l);
    struct ixl_dlist *empty = dlist(IXL_MEM_DRAM, NULL, 0);
    p = (struct ixl_md_params){.field_mask = IXL_MD_F_REGIONS, .regions = empty};
    md(a, &p, "partial_empty");
    ixl_dlist_destroy(empty);
    ixl_agent_destroy(a);

    a = agent("corpus_empty", "TEST");
    md(a, NULL, "no_regions");
    ixl_agent_destroy(a);

    a = agent("corpus_none", "");
    md(a, NULL, "no_backends");
    ixl_agent_destroy(a);

    /* Many regions, strided like KV blocks. */
    a = agent("corpus_kv", "TEST");
    uint64_t kv[2] = {vram(0, 24 * 0x10000), vram(1, 24 * 0x10000)};
    for (int i = 0; i < 24; i++)
        reg(a, IXL_MEM_VRAM, kv[i % 2] + (uint64_t)i * 0x10000, 0x8000, (uint64_t)(i % 2), NULL);
    md(a, NULL, "many_regions");
    ixl_agent_destroy(a);

    /* Authenticated: an agent with a cluster key ends every blob with a MAC (fuzz_md's keyed
     * loader has the same key, so these load there and are refused by the keyless one). */
    struct ixl_agent_params kp = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_AUTH_KEY,
                                  .backends = "TEST",
                                  .auth_key = FUZZ_MD_KEY};
    int krc = ixl_agent_create("corpus_keyed", &kp, &a);
    if (krc != IXL_OK)
        die("ixl_agent_create with a key", krc);
    reg(a, IXL_MEM_DRAM, 0x1000, 0x1000, 0, NULL);
    md(a, NULL, "mac_full");
    struct ixl_run kr = {0x1000, 64, 64, 1, 0};
    l = dlist(IXL_MEM_DRAM, &kr, 1);
    p = (struct ixl_md_params){
        .field_mask = IXL_MD_F_REGIONS | IXL_MD_F_LABEL, .regions = l, .label = "layer0"};
    md(a, &p, "mac_partial_label");
    ixl_dlist_destroy(l);
    ixl_agent_destroy(a);

    /* A long name. */
    char name[IXL_NAME_MAX];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    a = agent(name, "TEST");
    reg(a, IXL_MEM_DRAM, 0x1000, 0x1000, 0, NULL);
    md(a, NULL, "long_name");
    ixl_agent_destroy(a);
}

/* ---- handcrafted metadata ------------------------------------------------------------------ */

static void put_wbuf(const char *name, struct ixl_wbuf *w)
{
    if (w->failed)
        die("out of memory", IXL_ERR_NO_MEMORY);
    put("md", name, w->data, w->len);
    free(w->data);
    *w = (struct ixl_wbuf){0};
}

/* The TEST backend's connection info for agent name (instance id 1). */
static void test_backend(struct ixl_wbuf *w, const char *name)
{
    char conn[512];
    int n = snprintf(conn, sizeof(conn), "testmem1:TEST:%016x:%s", 1u, name);
    ixl_md_encode_backend(w, "TEST", conn, (size_t)n);
}

/* A region with valid TEST public data. */
static void test_region(struct ixl_wbuf *w, unsigned backend, enum ixl_mem type, uint64_t addr,
                        uint64_t len)
{
    uint8_t pub[40];
    uint32_t magic = TM_PUB_MAGIC, t32 = (uint32_t)type;
    uint64_t key = 42, inst = 1;
    memcpy(pub, &magic, 4);
    memcpy(pub + 4, &t32, 4);
    memcpy(pub + 8, &key, 8);
    memcpy(pub + 16, &inst, 8);
    memcpy(pub + 24, &addr, 8);
    memcpy(pub + 32, &len, 8);
    ixl_md_encode_region(w, backend, type, addr, len, 0, pub, sizeof(pub));
}

/* A small valid blob: one TEST backend, n regions, then anything the caller appends. */
static void small_blob(struct ixl_wbuf *w, uint16_t flags, const char *name, unsigned n)
{
    ixl_md_encode_header(w, flags, 7, name);
    ixl_wb_u16(w, 1);
    test_backend(w, name);
    ixl_wb_u32(w, n);
    for (unsigned i = 0; i < n; i++)
        test_region(w, 0, IXL_MEM_DRAM, 0x10000 * (i + 1), 0x1000);
}

static void edge_md(void)
{
    struct ixl_wbuf w = {0};
    put("md", "empty", "", 0);
    put("md", "magic_only", "IXLM", 4);
    put("md", "truncated_header", "IXLM\x01\x00\x01\x00\x05\x00\x00", 11);

    small_blob(&w, IXL_MDF_CONN, "hand", 1);
    put_wbuf("small", &w);
    small_blob(&w, IXL_MDF_CONN | IXL_MDF_PARTIAL | IXL_MDF_LABEL, "hand", 2);
    ixl_wb_u16(&w, 0); /* an empty label */
    put_wbuf("small_empty_label", &w);
    small_blob(&w, IXL_MDF_CONN | IXL_MDF_LABEL, "hand", 1);
    put_wbuf("label_flag_no_label", &w);
    small_blob(&w, IXL_MDF_CONN, "hand", 1);
    ixl_wb_u8(&w, 0);
    put_wbuf("trailing_byte", &w);
    small_blob(&w, IXL_MDF_CONN, "fuzz_loader", 1); /* the fuzz loader's own name */
    put_wbuf("own_name", &w);

    /* Header fields. */
    small_blob(&w, IXL_MDF_CONN, "hand", 1);
    w.data[4] = 2; /* version 2 */
    put_wbuf("version2", &w);
    small_blob(&w, IXL_MDF_CONN, "hand", 1);
    w.data[6] = 0x80; /* unknown flag */
    put_wbuf("unknown_flags", &w);
    small_blob(&w, IXL_MDF_CONN, "hand", 1);
    w.data[0] = 'X';
    put_wbuf("bad_magic", &w);
    ixl_md_encode_header(&w, 0, 1, "x");
    w.data[w.len - 1] = '\0'; /* a NUL in the name */
    ixl_wb_u16(&w, 0);
    ixl_wb_u32(&w, 0);
    put_wbuf("name_nul", &w);

    /* Counts far beyond the bytes. */
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "huge");
    ixl_wb_u16(&w, 0xffff);
    test_backend(&w, "huge");
    put_wbuf("huge_backend_count", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "huge");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "huge");
    ixl_wb_u32(&w, 0xffffffffu);
    test_region(&w, 0, IXL_MEM_DRAM, 0x1000, 0x1000);
    put_wbuf("huge_region_count", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "huge");
    ixl_wb_u16(&w, 1);
    ixl_wb_u8(&w, 4);
    ixl_wb_bytes(&w, "TEST", 4);
    ixl_wb_u32(&w, 0xffffffffu); /* connection info length */
    ixl_wb_u32(&w, 0);
    put_wbuf("huge_conn_len", &w);

    /* Backend entries. */
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "dup");
    ixl_wb_u16(&w, 2);
    test_backend(&w, "dup");
    test_backend(&w, "dup");
    ixl_wb_u32(&w, 0);
    put_wbuf("dup_backend", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "two");
    ixl_wb_u16(&w, 2);
    ixl_md_encode_backend(&w, "OTHER", "x", 1);
    test_backend(&w, "two");
    ixl_wb_u32(&w, 2);
    test_region(&w, 0, IXL_MEM_DRAM, 0x1000, 0x1000); /* a backend the loader lacks */
    test_region(&w, 1, IXL_MEM_DRAM, 0x1000, 0x1000);
    put_wbuf("unknown_backend", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "badname");
    ixl_wb_u16(&w, 1);
    ixl_md_encode_backend(&w, "TE-ST", "", 0);
    ixl_wb_u32(&w, 0);
    put_wbuf("bad_backend_name", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "conn");
    ixl_wb_u16(&w, 1);
    ixl_md_encode_backend(&w, "TEST", "testmem1:TEST:00000000000000zz:conn", 35);
    ixl_wb_u32(&w, 0);
    put_wbuf("bad_conn", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "conn");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "someone_else");
    ixl_wb_u32(&w, 0);
    put_wbuf("conn_other_agent", &w);

    /* Region entries. */
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "reg");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "reg");
    ixl_wb_u32(&w, 1);
    test_region(&w, 5, IXL_MEM_DRAM, 0x1000, 0x1000);
    put_wbuf("region_bad_backend", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "reg");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "reg");
    ixl_wb_u32(&w, 2);
    test_region(&w, 0, IXL_MEM_DRAM, UINT64_MAX - 0x1000, 0x1000); /* ends at the top */
    test_region(&w, 0, IXL_MEM_DRAM, UINT64_MAX - 0x1000, 0x1001); /* wraps */
    put_wbuf("region_wrap", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "reg");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "reg");
    ixl_wb_u32(&w, 3);
    test_region(&w, 0, IXL_MEM_DRAM, 0x1000, 0x1000);
    test_region(&w, 0, IXL_MEM_DRAM, 0x1000, 0x1000); /* the same region twice */
    ixl_md_encode_region(&w, 0, IXL_MEM_DRAM, 0x2000, 0x10, 0, "abc", 3); /* bad public data */
    put_wbuf("region_dup_bad_pub", &w);
    ixl_md_encode_header(&w, IXL_MDF_CONN, 1, "reg");
    ixl_wb_u16(&w, 1);
    test_backend(&w, "reg");
    ixl_wb_u32(&w, 2);
    test_region(&w, 0, IXL_MEM_BLK, 0x1000, 0x1000); /* a type TEST does not take */
    test_region(&w, 0, IXL_MEM_COUNT, 0x1000, 0x1000);
    put_wbuf("region_bad_type", &w);
    ixl_md_encode_header(&w, 0, 1, "noconn");
    ixl_wb_u16(&w, 1);
    ixl_md_encode_backend(&w, "TEST", NULL, 0);
    ixl_wb_u32(&w, 1);
    test_region(&w, 0, IXL_MEM_DRAM, 0x1000, 0x1000); /* a region without a connection */
    put_wbuf("region_without_conn", &w);
}

/* ---- descriptor lists ---------------------------------------------------------------------- */

static void put_dl_header(struct ixl_wbuf *w, uint16_t version, uint8_t type, uint8_t pad,
                          uint64_t n)
{
    ixl_wb_bytes(w, "IXLD", 4);
    ixl_wb_u16(w, version);
    ixl_wb_u8(w, type);
    ixl_wb_u8(w, pad);
    ixl_wb_u64(w, n);
}

static void put_run(struct ixl_wbuf *w, uint64_t addr, uint64_t len, uint64_t stride,
                    uint64_t count, uint64_t dev)
{
    ixl_wb_u64(w, addr);
    ixl_wb_u64(w, len);
    ixl_wb_u64(w, stride);
    ixl_wb_u64(w, count);
    ixl_wb_u64(w, dev);
}

static void put_dl(const char *name, struct ixl_wbuf *w)
{
    if (w->failed)
        die("out of memory", IXL_ERR_NO_MEMORY);
    put("dlist", name, w->data, w->len);
    free(w->data);
    *w = (struct ixl_wbuf){0};
}

static void all_dlists(void)
{
    dl(IXL_MEM_DRAM, NULL, 0, "empty_list");
    struct ixl_run one = {0x1000, 64, 64, 1, 0};
    dl(IXL_MEM_DRAM, &one, 1, "one_desc");
    struct ixl_run descs[] = {
        {0x1000, 64, 64, 1, 0}, {0x2000, 128, 128, 1, 0}, {0x3000, 256, 256, 1, 1}};
    dl(IXL_MEM_VRAM, descs, 3, "descs_vram");
    /* KV cache: 8 layers x K/V, each 1000 blocks of 16 KiB, 64 KiB apart. */
    struct ixl_run kv[16];
    for (int i = 0; i < 16; i++)
        kv[i] = (struct ixl_run){0x200000000ull + (uint64_t)i * 0x4000000, 16384, 65536, 1000,
                                 (uint64_t)(i / 8)};
    dl(IXL_MEM_VRAM, kv, 16, "kv_strided");
    struct ixl_run file = {0, 1 << 20, 1 << 20, 8, 7};
    dl(IXL_MEM_FILE, &file, 1, "file_runs");
    struct ixl_run blk = {4096, 4096, 0, 3, 2}; /* stride 0: the same block thrice */
    dl(IXL_MEM_BLK, &blk, 1, "blk_stride0");
    struct ixl_run obj = {0, 100, 100, 1, 9};
    dl(IXL_MEM_OBJ, &obj, 1, "obj");
    struct ixl_run top[] = {{UINT64_MAX - 0x1000, 0x1000, 0x1000, 1, UINT64_MAX},
                            {0, 1, (UINT64_MAX - 1) / 2, 3, 0}};
    dl(IXL_MEM_DRAM, top, 2, "top_of_space");

    struct ixl_wbuf w = {0};
    put("dlist", "empty", "", 0);
    put("dlist", "magic_only", "IXLD", 4);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 0, 1);
    put_dl("header_no_runs", &w);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 0, UINT64_MAX);
    put_run(&w, 0x1000, 64, 64, 1, 0);
    put_dl("huge_count", &w);
    put_dl_header(&w, 2, IXL_MEM_DRAM, 0, 1);
    put_run(&w, 0x1000, 64, 64, 1, 0);
    put_dl("version2", &w);
    put_dl_header(&w, 1, IXL_MEM_COUNT, 0, 1);
    put_run(&w, 0x1000, 64, 64, 1, 0);
    put_dl("bad_type", &w);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 1, 1);
    put_run(&w, 0x1000, 64, 64, 1, 0);
    put_dl("bad_pad", &w);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 0, 2);
    put_run(&w, 0, 1, 0, 1ull << 63, 0);
    put_run(&w, 0, 1, 0, 1ull << 63, 0); /* the total count overflows */
    put_dl("count_overflow", &w);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 0, 3);
    put_run(&w, 0x1000, 0, 64, 1, 0);             /* len 0 */
    put_run(&w, 0x1000, 64, 64, 0, 0);            /* count 0 */
    put_run(&w, UINT64_MAX - 100, 64, 100, 2, 0); /* wraps */
    put_dl("bad_runs", &w);
    put_dl_header(&w, 1, IXL_MEM_DRAM, 0, 1);
    put_run(&w, 0x1000, 64, 64, 1, 0);
    ixl_wb_u8(&w, 0); /* part of a second run */
    put_dl("trailing_byte", &w);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
        return 1;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        die(out_dir, 0);
    ixl_log_set_level(IXL_LOG_ERROR);
    real_md();
    edge_md();
    all_dlists();
    printf("gen_corpus: wrote %d files under %s\n", n_written, out_dir);
    return 0;
}

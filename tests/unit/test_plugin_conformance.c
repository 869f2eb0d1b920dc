/* The plugin contract through real dynamic plugins, from a scratch plugin directory: each
 * broken plugin refused with the reason for its defect, a garbage file and a duplicate name
 * refused, the minimal conformance plugin (ops table of exactly IXL_ENGINE_OPS_MIN_SIZE)
 * working end to end with every optional call answering its documented fallback, and the
 * plugin larger than this core knows (descriptor and ops table with trailing fields) accepted
 * and working, with notifications after the data; engines claiming more than their plugin are
 * refused. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <ixl/ixl_plugin.h>

#include "check.h"

static char scratch[PATH_MAX];

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY);
    CHECK(in >= 0);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    CHECK(out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        CHECK(write(out, buf, (size_t)n) == n);
    CHECK(n == 0);
    close(in);
    close(out);
}

/* Copies dir's libixl_plugin_<prefix>*.so into the scratch directory; returns how many. */
static int copy_plugins(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    char want[64];
    snprintf(want, sizeof(want), "libixl_plugin_%s", prefix);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t len = strlen(ent->d_name);
        if (strncmp(ent->d_name, want, strlen(want)) != 0 || len < 3 ||
            strcmp(ent->d_name + len - 3, ".so") != 0)
            continue;
        char from[PATH_MAX * 2], to[PATH_MAX * 2];
        snprintf(from, sizeof(from), "%s/%s", dir, ent->d_name);
        snprintf(to, sizeof(to), "%s/%s", scratch, ent->d_name);
        copy_file(from, to);
        n++;
    }
    closedir(d);
    return n;
}

static void remove_scratch(void)
{
    DIR *d = opendir(scratch);
    if (d == NULL)
        return;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        char path[PATH_MAX * 2];
        snprintf(path, sizeof(path), "%s/%s", scratch, ent->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(scratch);
}

/* The refusal recorded for a file of the scratch directory, or NULL. */
static const char *refusal_of(const char *file)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", scratch, file);
    char real[PATH_MAX];
    CHECK(realpath(path, real) != NULL);
    size_t n = ixl_plugin_refused_count();
    for (size_t i = 0; i < n; i++) {
        const char *p, *reason;
        CHECK_RC(ixl_plugin_refused_get(i, &p, &reason), IXL_OK);
        if (strcmp(p, real) == 0)
            return reason;
    }
    return NULL;
}

static void expect_refused(const char *plugin, const char *reason_part)
{
    char file[128];
    snprintf(file, sizeof(file), "libixl_plugin_%s.so", plugin);
    const char *r = refusal_of(file);
    if (r == NULL) {
        fprintf(stderr, "%s was not refused\n", plugin);
        exit(1);
    }
    CHECK_STR_HAS(r, reason_part);
    struct ixl_plugin_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_plugin_find(plugin, &info), IXL_ERR_NOT_FOUND);
}

static void plugin_info(const char *name, struct ixl_plugin_info *out)
{
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    CHECK_RC(ixl_plugin_find(name, out), IXL_OK);
}

static void xfer_info(struct ixl_xfer *x, struct ixl_xfer_info *out)
{
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    CHECK_RC(ixl_xfer_info(x, out), IXL_OK);
}

static struct ixl_agent *make_agent(const char *name, const char *backends)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = backends};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static struct ixl_dlist *list1(void *addr, size_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uintptr_t)addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

#define SZ 65536

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

/* Registers two buffers, moves src -> dst with a WRITE and back with a READ within the agent,
 * and returns the WRITE request (not released) for the caller's further checks. */
static struct ixl_xfer *local_round_trip(struct ixl_agent *a, unsigned char *src,
                                         unsigned char *dst, const void *notif, size_t notif_len)
{
    struct ixl_reg_desc regs[2] = {{(uintptr_t)src, SZ, 0, NULL, 0},
                                   {(uintptr_t)dst, SZ, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, regs, 2, NULL), IXL_OK);
    fill(src, SZ, 1);
    memset(dst, 0, SZ);
    struct ixl_dlist *l = list1(src, SZ), *r = list1(dst, SZ);
    struct ixl_xfer_params xp = {
        .field_mask = notif ? IXL_XFER_F_NOTIF : 0, .notif = notif, .notif_len = notif_len};
    struct ixl_xfer *w = NULL;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, ixl_agent_name(a), &xp, &w), IXL_OK);
    int rc = ixl_xfer_post(w);
    CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(w, 5000), IXL_OK);
    CHECK(memcmp(src, dst, SZ) == 0);

    /* READ: dst's second half back over src's first half. */
    fill(dst + SZ / 2, SZ / 2, 2);
    struct ixl_dlist *l2 = list1(src, SZ / 2), *r2 = list1(dst + SZ / 2, SZ / 2);
    struct ixl_xfer *rd = NULL;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_READ, l2, r2, ixl_agent_name(a), NULL, &rd), IXL_OK);
    rc = ixl_xfer_post(rd);
    CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(rd, 5000), IXL_OK);
    CHECK(memcmp(src, dst + SZ / 2, SZ / 2) == 0);
    CHECK_RC(ixl_xfer_release(rd), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_dlist_destroy(l2);
    ixl_dlist_destroy(r2);
    return w;
}

static void deregister_both(struct ixl_agent *a, unsigned char *src, unsigned char *dst)
{
    struct ixl_reg_desc regs[2] = {{(uintptr_t)src, SZ, 0, NULL, 0},
                                   {(uintptr_t)dst, SZ, 0, NULL, 0}};
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, regs, 2, NULL), IXL_OK);
}

/* CONFMIN: nothing optional, so every optional call takes its fallback. */
static void test_minimal(void)
{
    struct ixl_plugin_info info;
    plugin_info("CONFMIN", &info);
    CHECK(info.caps == IXL_CAP_LOCAL);
    CHECK(info.mem_mask == IXL_MEM_BIT(IXL_MEM_DRAM));

    /* Creation calls connect(own name): a missing connect is "connect lazily". */
    struct ixl_agent *a = make_agent("conf_min", "CONFMIN");
    static unsigned char src[SZ], dst[SZ];
    struct ixl_xfer *w = local_round_trip(a, src, dst, NULL, 0);

    struct ixl_xfer_info xi;
    xfer_info(w, &xi);
    CHECK(strcmp(xi.backend, "CONFMIN") == 0);
    CHECK(strcmp(xi.path, "") == 0); /* req_info: path "" */
    struct ixl_cost cost = {.size = sizeof(cost)};
    CHECK_RC(ixl_xfer_estimate(w, &cost), IXL_ERR_NOT_SUPPORTED);
    /* No NOTIF: notifications are refused before the plugin sees them. */
    CHECK_RC(ixl_xfer_set_notif(w, "n", 1), IXL_ERR_NOTIF_UNSUPPORTED);
    CHECK_RC(ixl_xfer_post(w), IXL_OK); /* a repost copies again, at once */
    CHECK_RC(ixl_xfer_release(w), IXL_OK);
    struct ixl_dlist *l = list1(src, 64), *r = list1(dst, 64);
    struct ixl_xfer_params xp = {.field_mask = IXL_XFER_F_NOTIF, .notif = "n", .notif_len = 1};
    CHECK(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "conf_min", &xp, &w) != IXL_OK);
    CHECK_STR_HAS(ixl_agent_last_error(a), "notifications");
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    CHECK(ixl_notif_send(a, "conf_min", "n", 1, NULL) != IXL_OK);
    struct ixl_notif_batch *batch = (struct ixl_notif_batch *)1;
    CHECK_RC(ixl_notif_drain(a, &batch), IXL_OK); /* get_notifs is never called */
    CHECK(batch == NULL);
    CHECK_RC(ixl_agent_progress(a), IXL_OK); /* progress is never called */

    /* query_mem, alloc_mem/free_mem: absent, so no backend answers. */
    struct ixl_reg_desc q = {(uintptr_t)src, SZ, 0, NULL, 0};
    struct ixl_mem_query qo;
    CHECK_RC(ixl_mem_query(a, IXL_MEM_DRAM, &q, 1, NULL, &qo), IXL_ERR_NOT_SUPPORTED);
    void *mem = NULL;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 4096, NULL, &mem), IXL_ERR_NOT_SUPPORTED);
    CHECK(mem == NULL);

    /* A local-only backend publishes nothing: get_public_data is never called. */
    void *blob = NULL;
    size_t blob_len = 0;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &blob_len), IXL_OK);
    ixl_free(blob);
    deregister_both(a, src, dst);
    ixl_agent_destroy(a);

    /* With the agent's progress thread: a backend without PROGRESS is skipped, not called. */
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_PROGRESS_THREAD,
                                 .backends = "CONFMIN",
                                 .progress_thread = true};
    CHECK_RC(ixl_agent_create("conf_min_pt", &p, &a), IXL_OK);
    w = local_round_trip(a, src, dst, NULL, 0);
    CHECK_RC(ixl_xfer_release(w), IXL_OK);
    deregister_both(a, src, dst);
    ixl_agent_destroy(a); /* with regions and requests left to the agent's teardown */
}

/* CONFBIG: accepted although larger than this core knows; every optional method used. */
static void test_big(void)
{
    struct ixl_plugin_info info;
    plugin_info("CONFBIG", &info);
    CHECK(info.abi_major == IXL_PLUGIN_ABI_MAJOR);
    CHECK(info.abi_minor == IXL_PLUGIN_ABI_MINOR + 7);
    CHECK(info.caps == (IXL_CAP_LOCAL | IXL_CAP_NOTIF | IXL_CAP_PROGRESS));
    CHECK(info.n_options == 0);

    struct ixl_agent *a = make_agent("conf_big", "CONFBIG");
    static unsigned char src[SZ], dst[SZ];
    struct ixl_xfer *w = local_round_trip(a, src, dst, "first", 5);
    struct ixl_xfer_info xi;
    xfer_info(w, &xi);
    CHECK(strcmp(xi.backend, "CONFBIG") == 0);
    CHECK(strcmp(xi.path, "conform-big") == 0);
    struct ixl_cost cost = {.size = sizeof(cost)};
    CHECK_RC(ixl_xfer_estimate(w, &cost), IXL_OK);
    CHECK(cost.method == IXL_COST_ANALYTICAL && cost.duration_us > 0);

    /* The WRITE's notification arrived after its data; a repost with a new message. */
    struct ixl_notif_batch *batch = NULL;
    CHECK_RC(ixl_notif_drain(a, &batch), IXL_OK);
    CHECK(batch != NULL && batch->count == 1);
    CHECK(strcmp(batch->items[0].agent, "conf_big") == 0);
    CHECK(batch->items[0].len == 5 && memcmp(batch->items[0].msg, "first", 5) == 0);
    ixl_free(batch);
    CHECK_RC(ixl_xfer_set_notif(w, "second", 6), IXL_OK);
    fill(src, SZ, 3);
    CHECK_RC(ixl_xfer_post(w), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(w, 5000), IXL_OK);
    CHECK(memcmp(src, dst, SZ) == 0);
    CHECK_RC(ixl_notif_send(a, "conf_big", "third", 5, NULL), IXL_OK);
    batch = NULL;
    CHECK_RC(ixl_notif_drain(a, &batch), IXL_OK);
    CHECK(batch != NULL && batch->count == 2);
    CHECK(batch->items[0].len == 6 && memcmp(batch->items[0].msg, "second", 6) == 0);
    CHECK(batch->items[1].len == 5 && memcmp(batch->items[1].msg, "third", 5) == 0);
    ixl_free(batch);
    /* Released while in flight: no notification. */
    CHECK_RC(ixl_xfer_set_notif(w, "never", 5), IXL_OK);
    CHECK_RC(ixl_xfer_post(w), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(w), IXL_OK);
    CHECK_RC(ixl_agent_progress(a), IXL_OK);
    batch = NULL;
    CHECK_RC(ixl_notif_drain(a, &batch), IXL_OK);
    CHECK(batch == NULL);

    struct ixl_reg_desc q = {(uintptr_t)src, SZ, 0, NULL, 0};
    struct ixl_mem_query qo = {false, 0};
    CHECK_RC(ixl_mem_query(a, IXL_MEM_DRAM, &q, 1, NULL, &qo), IXL_OK);
    CHECK(qo.exists && qo.size == SZ);
    void *mem = NULL;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 4096, NULL, &mem), IXL_OK);
    CHECK(mem != NULL);
    CHECK_RC(ixl_mem_free(a, mem), IXL_OK);
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 4096, NULL, &mem), IXL_OK); /* left to destroy */
    deregister_both(a, src, dst);
    ixl_agent_destroy(a);

    /* An engine may narrow its plugin's capabilities, never widen them. */
    a = make_agent("conf_narrow", "CONFBIG");
    struct ixl_backend *be = NULL;
    CHECK_RC(ixl_backend_find(a, "CONFBIG", &be), IXL_OK);
    CHECK(ixl_backend_caps(be) == IXL_CAP_LOCAL);
    w = local_round_trip(a, src, dst, NULL, 0);
    CHECK_RC(ixl_xfer_set_notif(w, "n", 1), IXL_ERR_NOTIF_UNSUPPORTED);
    CHECK_RC(ixl_xfer_release(w), IXL_OK);
    deregister_both(a, src, dst);
    ixl_agent_destroy(a);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create("conf_widen", &p, &a), IXL_OK);
    CHECK_RC(ixl_backend_create(a, "CONFBIG", NULL, 0, NULL), IXL_ERR_PLUGIN);
    CHECK_STR_HAS(ixl_agent_last_error(a), "beyond its plugin's");
    CHECK(ixl_backend_count(a) == 0);
    ixl_agent_destroy(a);
}

int main(void)
{
    const char *conf = getenv("IXL_CONFORMANCE_DIR");
    const char *tests = getenv("IXL_TEST_PLUGIN_DIR");
    if (conf == NULL || tests == NULL)
        skip(0, "IXL_CONFORMANCE_DIR or IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    snprintf(scratch, sizeof(scratch), "/tmp/ixl_conformance.XXXXXX");
    CHECK(mkdtemp(scratch) != NULL);
    atexit(remove_scratch);
    CHECK(copy_plugins(conf, "CONF") == 2);
    CHECK(copy_plugins(conf, "BROKEN_") >= 17);
    CHECK(copy_plugins(tests, "BROKEN_") == 5); /* NOSYM, ABI, SMALL, NONOTIF, OPTS */
    /* A second file with CONFMIN's name sorts after the first: refused as a duplicate. */
    char from[PATH_MAX * 2], to[PATH_MAX * 2];
    snprintf(from, sizeof(from), "%s/libixl_plugin_CONFMIN.so", conf);
    snprintf(to, sizeof(to), "%s/libixl_plugin_CONFMIN_COPY.so", scratch);
    copy_file(from, to);
    /* Not a shared object at all. */
    snprintf(to, sizeof(to), "%s/libixl_plugin_GARBAGE.so", scratch);
    FILE *f = fopen(to, "w");
    CHECK(f != NULL);
    fputs("not an ELF file\n", f);
    fclose(f);
    /* Only the scratch directory (and the fixed places after it) is searched. */
    CHECK(setenv("IXL_PLUGIN_DIR", scratch, 1) == 0);
    ixl_log_set_level(IXL_LOG_ERROR); /* the refusals are expected */

    /* By name first (lazy), then everything. */
    test_minimal();
    test_big();
    CHECK(ixl_plugin_count() > 0);

    char abi[64];
    snprintf(abi, sizeof(abi), "plugin ABI %d.", IXL_PLUGIN_ABI_MAJOR + 1);
    static const struct {
        const char *plugin, *reason;
    } refused[] = {
        {"GARBAGE", "cannot be opened"},
        {"BROKEN_NOSYM", "no entry symbol"},
        {"BROKEN_NODESC", "returned no descriptor"},
        {"BROKEN_DESCSMALL", "descriptor of"},
        {"BROKEN_NAME", "invalid plugin name"},
        {"BROKEN_NOCREATE", "lacks create_engine"},
        {"BROKEN_NODESTROY", "lacks destroy_engine"},
        {"BROKEN_NOOPS", "no ops table"},
        {"BROKEN_SMALL", "too small"},
        {"BROKEN_CAPS", "unknown capability bits 0x80"},
        {"BROKEN_NOXFER", "neither local nor remote"},
        {"BROKEN_NONOTIF", "without notifications"},
        {"BROKEN_MEM0", "memory-type mask 0x0"},
        {"BROKEN_MEMBAD", "memory-type mask"},
        {"BROKEN_NOCHECK", "lacks check_xfer, a method every backend needs"},
        {"BROKEN_NOLOCALMD", "advertises local transfers but lacks load_local_md"},
        {"BROKEN_NOREMOTEMD", "advertises remote transfers but lacks load_remote_md"},
        {"BROKEN_NOGENNOTIF", "advertises notifications but lacks gen_notif"},
        {"BROKEN_NOPROGRESS", "advertises progress but lacks progress"},
        {"BROKEN_ALLOCPAIR", "alloc_mem without free_mem"},
        {"BROKEN_OPTION", "option table entry 0"},
        {"BROKEN_OPTS", "option unused: unknown type 99"},
        {"CONFMIN_COPY", "duplicate plugin name 'CONFMIN'"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        expect_refused(refused[i].plugin, refused[i].reason);
    expect_refused("BROKEN_ABI", abi);
    CHECK(refusal_of("libixl_plugin_CONFMIN.so") == NULL);
    CHECK(refusal_of("libixl_plugin_CONFBIG.so") == NULL);
    printf("ok (%zu refusal rules)\n", sizeof(refused) / sizeof(refused[0]) + 1);
    return 0;
}

/* Metadata between agents: full and partial blobs, incremental loading, labels, incarnations
 * (a restarted agent replaces its old entry; an old blob cannot come back), invalidation of a
 * remote with a request in flight, agents with no backend in common. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

#define SZ 65536

static unsigned char bufs[4][SZ];

static struct ixl_agent *make_agent(const char *name, const char *backends)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = backends};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static struct ixl_dlist *list1(const void *p, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uintptr_t)p, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static int check1(struct ixl_agent *a, const char *remote, const void *p, uint64_t len)
{
    struct ixl_dlist *l = list1(p, len);
    int rc = ixl_remote_check(a, remote, l);
    ixl_dlist_destroy(l);
    return rc;
}

static void get_md(struct ixl_agent *a, const struct ixl_md_params *p, void **blob, size_t *len)
{
    CHECK_RC(ixl_md_get(a, p, blob, len), IXL_OK);
}

static void register_all(struct ixl_agent *a)
{
    struct ixl_reg_desc d[3];
    for (int i = 0; i < 3; i++)
        d[i] = (struct ixl_reg_desc){(uintptr_t)bufs[i], SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, d, 3, NULL), IXL_OK);
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent *a = make_agent("A", "TEST");
    struct ixl_agent *b = make_agent("B", "TEST");
    register_all(a);

    /* Full metadata. */
    void *full;
    size_t full_len;
    get_md(a, NULL, &full, &full_len);
    char name[IXL_NAME_MAX];
    /* A name buffer too small for "A" (2 bytes): refused, nothing loaded, nothing written. */
    memset(name, 'x', sizeof(name));
    CHECK_RC(ixl_md_load(b, full, full_len, name, 1), IXL_ERR_TOO_LARGE);
    CHECK_STR_HAS(ixl_agent_last_error(b), "needs 2 bytes");
    CHECK(name[0] == 'x');
    CHECK_RC(ixl_remote_check(b, "A", NULL), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_md_load(b, full, full_len, name, 0), IXL_ERR_TOO_LARGE);
    CHECK_RC(ixl_md_load(b, full, full_len, name, 2), IXL_OK);
    CHECK(strcmp(name, "A") == 0);
    CHECK_RC(ixl_remote_invalidate(b, "A"), IXL_OK);
    CHECK_RC(ixl_md_load(b, full, full_len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, "A") == 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(check1(b, "A", bufs[i], SZ), IXL_OK);
    CHECK_RC(check1(b, "A", bufs[3], SZ), IXL_ERR_NOT_FOUND);
    CHECK_RC(check1(b, "A", bufs[0] + 1, SZ), IXL_ERR_NOT_FOUND);
    /* Loading the same blob again is harmless. */
    CHECK_RC(ixl_md_load(b, full, full_len, NULL, 0), IXL_OK);
    /* An agent's own metadata is refused. */
    CHECK_RC(ixl_md_load(a, full, full_len, NULL, 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(a), "own");

    /* Partial: connection info only, then regions one by one (incremental). */
    struct ixl_agent *c = make_agent("C", "TEST");
    struct ixl_dlist *none;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 0, &none), IXL_OK);
    struct ixl_md_params mp = {.field_mask = IXL_MD_F_REGIONS, .regions = none};
    void *blob;
    size_t len;
    get_md(a, &mp, &blob, &len);
    CHECK(len < full_len);
    CHECK_RC(ixl_md_load(c, blob, len, NULL, 0), IXL_OK);
    ixl_free(blob);
    CHECK_RC(ixl_remote_check(c, "A", NULL), IXL_OK);
    CHECK_RC(check1(c, "A", bufs[0], SZ), IXL_ERR_NOT_FOUND);
    for (int i = 0; i < 3; i++) {
        struct ixl_dlist *one = list1(bufs[i] + 100, 200); /* inside region i */
        mp = (struct ixl_md_params){.field_mask =
                                        IXL_MD_F_REGIONS | IXL_MD_F_CONN_INFO | IXL_MD_F_LABEL,
                                    .regions = one,
                                    .conn_info = false,
                                    .label = "layer"};
        get_md(a, &mp, &blob, &len);
        CHECK_RC(ixl_md_load(c, blob, len, NULL, 0), IXL_OK);
        ixl_free(blob);
        ixl_dlist_destroy(one);
        for (int j = 0; j < 3; j++)
            CHECK_RC(check1(c, "A", bufs[j], SZ), j <= i ? IXL_OK : IXL_ERR_NOT_FOUND);
    }
    /* Partial metadata for memory that is not registered is refused. */
    struct ixl_dlist *unreg = list1(bufs[3], 64);
    mp = (struct ixl_md_params){.field_mask = IXL_MD_F_REGIONS, .regions = unreg};
    CHECK_RC(ixl_md_get(a, &mp, &blob, &len), IXL_ERR_NOT_REGISTERED);
    ixl_dlist_destroy(unreg);

    /* Regions without connection info, for an agent not loaded yet, cannot be used. */
    struct ixl_agent *d = make_agent("D", "TEST");
    struct ixl_dlist *one = list1(bufs[0], 64);
    mp = (struct ixl_md_params){
        .field_mask = IXL_MD_F_REGIONS | IXL_MD_F_CONN_INFO, .regions = one, .conn_info = false};
    get_md(a, &mp, &blob, &len);
    CHECK_RC(ixl_md_load(d, blob, len, NULL, 0), IXL_OK);
    CHECK_RC(check1(d, "A", bufs[0], SZ), IXL_ERR_NOT_FOUND);
    ixl_free(blob);
    ixl_dlist_destroy(one);

    /* Garbage is refused with a reason. */
    unsigned char junk[64];
    memcpy(junk, full, sizeof(junk));
    junk[4] = 99; /* version */
    CHECK_RC(ixl_md_load(b, junk, sizeof(junk), NULL, 0), IXL_ERR_MALFORMED);
    CHECK_STR_HAS(ixl_agent_last_error(b), "version 99");
    CHECK_RC(ixl_md_load(b, "nonsense", 8, NULL, 0), IXL_ERR_MALFORMED);

    /* A request in flight to a remote that is invalidated ends in an error, in bounded time. */
    struct ixl_agent *e = make_agent("E", "");
    struct ixl_kv slow[] = {{"delay_us", "200000"}};
    CHECK_RC(ixl_backend_create(e, "TEST", slow, 1, NULL), IXL_OK);
    struct ixl_reg_desc r3 = {(uintptr_t)bufs[3], SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(e, IXL_MEM_DRAM, &r3, 1, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(e, full, full_len, NULL, 0), IXL_OK);
    struct ixl_dlist *l = list1(bufs[3], SZ), *r = list1(bufs[0], SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(e, IXL_OP_READ, l, r, "A", NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_remote_invalidate(e, "A"), IXL_OK);
    int rc = ixl_xfer_wait(x, 10000);
    CHECK(rc < 0 && rc != IXL_ERR_TIMEOUT);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* A restarted agent (same name, new instance) replaces its old entry; requests made for
     * the old one fail; the old blob cannot come back. */
    CHECK_RC(ixl_md_load(e, full, full_len, NULL, 0), IXL_OK);
    CHECK_RC(ixl_xfer_create(e, IXL_OP_READ, l, r, "A", NULL, &x), IXL_OK);
    ixl_agent_destroy(a);
    usleep(2000); /* incarnations are time-ordered at microsecond resolution */
    a = make_agent("A", "TEST");
    struct ixl_reg_desc only2 = {(uintptr_t)bufs[2], SZ, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &only2, 1, NULL), IXL_OK);
    void *fresh;
    size_t fresh_len;
    get_md(a, NULL, &fresh, &fresh_len);
    CHECK_RC(ixl_md_load(e, fresh, fresh_len, NULL, 0), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_STALE);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    CHECK_RC(check1(e, "A", bufs[0], SZ), IXL_ERR_NOT_FOUND); /* the old regions are gone */
    CHECK_RC(check1(e, "A", bufs[2], SZ), IXL_OK);
    CHECK_RC(ixl_md_load(e, full, full_len, NULL, 0), IXL_ERR_STALE);
    CHECK_STR_HAS(ixl_agent_last_error(e), "older instance");
    CHECK_RC(check1(e, "A", bufs[2], SZ), IXL_OK);
    /* The new instance works. */
    struct ixl_dlist *r2 = list1(bufs[2], SZ);
    memset(bufs[2], 0x77, SZ);
    memset(bufs[3], 0, SZ);
    CHECK_RC(ixl_xfer_create(e, IXL_OP_READ, l, r2, "A", NULL, &x), IXL_OK);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(bufs[3][0] == 0x77 && bufs[3][SZ - 1] == 0x77);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* No backend in common: loaded (with a warning), but no transfer is possible. */
    struct ixl_agent *f = make_agent("F", "TESTB");
    CHECK_RC(ixl_mem_register(f, IXL_MEM_DRAM, &r3, 1, NULL), IXL_OK);
    CHECK_RC(ixl_md_load(f, fresh, fresh_len, NULL, 0), IXL_OK);
    CHECK_RC(ixl_xfer_create(f, IXL_OP_READ, l, r2, "A", NULL, &x), IXL_ERR_NO_BACKEND);
    CHECK_RC(ixl_notif_send(f, "A", "x", 1, NULL), IXL_ERR_NO_BACKEND);

    /* A newer instance's blob whose connection info the backend refuses: the load fails and
     * the loaded entry stays as it was. */
    {
        unsigned char *bad = malloc(fresh_len);
        CHECK(bad != NULL);
        memcpy(bad, fresh, fresh_len);
        uint64_t inc;
        memcpy(&inc, bad + 8, 8); /* little-endian incarnation after magic, version, flags */
        inc += 1;
        memcpy(bad + 8, &inc, 8);
        /* The first backend's connection info starts after the name and the backend name. */
        size_t nlen = (size_t)bad[16] | (size_t)bad[17] << 8;
        size_t at = 18 + nlen + 2;       /* backend count */
        size_t blen = bad[at];           /* backend name length */
        size_t conn = at + 1 + blen + 4; /* its connection info */
        bad[conn] ^= 0xff;
        CHECK(ixl_md_load(e, bad, fresh_len, NULL, 0) < 0);
        CHECK_RC(check1(e, "A", bufs[2], SZ), IXL_OK);
        free(bad);
    }

    /* Hostile sizes and arrays at the API boundary. */
    struct ixl_dlist *huge = NULL;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, (size_t)1 << 62, &huge), IXL_ERR_NO_MEMORY);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &huge), IXL_OK);
    struct ixl_run zero_stride = {(uintptr_t)bufs[3], 1, 0, (uint64_t)1 << 58, 0};
    CHECK_RC(ixl_dlist_add_runs(huge, &zero_stride, 1), IXL_OK);
    CHECK_RC(ixl_xfer_create(e, IXL_OP_WRITE, huge, huge, "E", NULL, &x), IXL_ERR_TOO_LARGE);
    ixl_dlist_destroy(huge);
    struct ixl_xfer_params nullb = {.field_mask = IXL_XFER_F_BACKENDS, .n_backends = 2};
    CHECK_RC(ixl_xfer_create(e, IXL_OP_READ, l, r2, "A", &nullb, &x), IXL_ERR_INVALID_ARG);
    struct ixl_reg_params nullr = {.field_mask = IXL_REG_F_BACKENDS, .n_backends = 1};
    CHECK_RC(ixl_mem_register(e, IXL_MEM_DRAM, &r3, 1, &nullr), IXL_ERR_INVALID_ARG);

    ixl_free(fresh);
    ixl_free(full);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_dlist_destroy(r2);
    ixl_dlist_destroy(none);
    ixl_agent_destroy(f);
    ixl_agent_destroy(e);
    ixl_agent_destroy(d);
    ixl_agent_destroy(c);
    ixl_agent_destroy(b);
    ixl_agent_destroy(a);
    printf("ok\n");
    return 0;
}

/*
 * Lists exactly which calls of ixl.h still return IXL_ERR_NOT_SUPPORTED, so none is forgotten:
 * the test fails if one of them starts working without being taken off this list, or if a
 * call not on the list returns IXL_ERR_NOT_SUPPORTED for valid arguments.
 */
#include "check.h"

static struct ixl_agent *agent;
static struct ixl_dlist *list;

static int c_dlist_serialize(void)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = ixl_dlist_serialize(list, &buf, &len);
    ixl_free(buf);
    return rc;
}

static int c_dlist_deserialize(void)
{
    struct ixl_dlist *l = NULL;
    static const unsigned char bytes[64];
    int rc = ixl_dlist_deserialize(bytes, sizeof(bytes), &l);
    ixl_dlist_destroy(l);
    return rc == IXL_ERR_MALFORMED ? IXL_OK : rc;
}

static char buf_a[4096], buf_b[4096];

static int c_mem_register(void)
{
    struct ixl_reg_desc d = {(uintptr_t)buf_a, sizeof(buf_a), 0, NULL, 0};
    int rc = ixl_mem_register(agent, IXL_MEM_DRAM, &d, 1, NULL);
    if (rc == IXL_OK)
        rc = ixl_mem_deregister(agent, IXL_MEM_DRAM, &d, 1, NULL);
    return rc;
}

static int c_mem_deregister(void)
{
    struct ixl_reg_desc d = {(uintptr_t)buf_b, sizeof(buf_b), 0, NULL, 0};
    int rc = ixl_mem_deregister(agent, IXL_MEM_DRAM, &d, 1, NULL);
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

static int c_mem_query(void)
{
    struct ixl_reg_desc d = {(uintptr_t)buf_a, sizeof(buf_a), 0, NULL, 0};
    struct ixl_mem_query q;
    return ixl_mem_query(agent, IXL_MEM_DRAM, &d, 1, NULL, &q);
}

static int c_mem_alloc(void)
{
    void *p = NULL;
    int rc = ixl_mem_alloc(agent, IXL_MEM_DRAM, 4096, NULL, &p);
    if (rc == IXL_OK)
        rc = ixl_mem_free(agent, p);
    return rc;
}

static int c_mem_free(void)
{
    return ixl_mem_free(agent, NULL);
}

static int c_md_get(void)
{
    void *b = NULL;
    size_t n;
    int rc = ixl_md_get(agent, NULL, &b, &n);
    ixl_free(b);
    return rc;
}

static int c_md_load(void)
{
    static const unsigned char junk[16];
    int rc = ixl_md_load(agent, junk, sizeof(junk), NULL, 0);
    return rc == IXL_ERR_MALFORMED ? IXL_OK : rc;
}

static int c_remote_invalidate(void)
{
    int rc = ixl_remote_invalidate(agent, "nobody");
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

static int c_remote_check(void)
{
    int rc = ixl_remote_check(agent, "nobody", NULL);
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

static int c_remote_connect(void)
{
    int rc = ixl_remote_connect(agent, "nobody");
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

static int c_md_send(void)
{
    struct ixl_peer peer = {"127.0.0.1", 1};
    int rc = ixl_md_send(agent, &peer, NULL);
    return rc == IXL_ERR_CONN_REFUSED ? IXL_OK : rc;
}

static int c_md_fetch(void)
{
    struct ixl_peer peer = {"127.0.0.1", 1};
    return ixl_md_fetch(agent, "nobody", &peer, NULL);
}

static int c_md_invalidate_local(void)
{
    return ixl_md_invalidate_local(agent, NULL);
}

static int c_agent_listen_port(void)
{
    uint16_t port;
    int rc = ixl_agent_listen_port(agent, &port);
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

static int c_xfer_create(void)
{
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(agent, IXL_OP_WRITE, list, list, "nobody", NULL, &x);
    int released = ixl_xfer_release(x);
    if (released != IXL_OK)
        return released;
    return rc == IXL_ERR_NOT_FOUND || rc == IXL_ERR_NOT_REGISTERED ? IXL_OK : rc;
}

static int c_xfer_post(void)
{
    return ixl_xfer_post(NULL) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_status(void)
{
    return ixl_xfer_status(NULL) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_wait(void)
{
    return ixl_xfer_wait(NULL, 0) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_release(void)
{
    return ixl_xfer_release(NULL);
}

static int c_xfer_set_notif(void)
{
    return ixl_xfer_set_notif(NULL, "x", 1) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_telemetry(void)
{
    struct ixl_xfer_telemetry t = {.size = sizeof(t)};
    return ixl_xfer_telemetry(NULL, &t) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_info(void)
{
    struct ixl_xfer_info i = {.size = sizeof(i)};
    return ixl_xfer_info(NULL, &i) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_xfer_estimate(void)
{
    struct ixl_cost c = {.size = sizeof(c)};
    return ixl_xfer_estimate(NULL, &c) == IXL_ERR_INVALID_ARG ? IXL_OK : IXL_ERR_NOT_SUPPORTED;
}

static int c_prep_create(void)
{
    struct ixl_prep *p = NULL;
    int rc = ixl_prep_create(agent, NULL, list, NULL, &p);
    ixl_prep_destroy(p);
    return rc == IXL_ERR_NOT_REGISTERED ? IXL_OK : rc;
}

static int c_xfer_create_prepped(void)
{
    struct ixl_xfer *x = NULL;
    int64_t i = 0;
    int rc = ixl_xfer_create_prepped(agent, IXL_OP_READ, NULL, &i, NULL, &i, 1, NULL, &x);
    return rc == IXL_ERR_INVALID_ARG ? IXL_OK : rc;
}

static int c_notif_drain(void)
{
    struct ixl_notif_batch *b = NULL;
    int rc = ixl_notif_drain(agent, &b);
    ixl_free(b);
    return rc;
}

static int c_notif_send(void)
{
    int rc = ixl_notif_send(agent, "nobody", "x", 1, NULL);
    return rc == IXL_ERR_NOT_FOUND ? IXL_OK : rc;
}

struct call {
    const char *name;
    int (*fn)(void);
    int pending; /* 1: still returns IXL_ERR_NOT_SUPPORTED (implemented by a later issue) */
};

static const struct call calls[] = {
    {"ixl_dlist_serialize", c_dlist_serialize, 0},
    {"ixl_dlist_deserialize", c_dlist_deserialize, 0},
    {"ixl_mem_register", c_mem_register, 0},
    {"ixl_mem_deregister", c_mem_deregister, 0},
    {"ixl_mem_query", c_mem_query, 0},
    {"ixl_mem_alloc", c_mem_alloc, 0},
    {"ixl_mem_free", c_mem_free, 0},
    {"ixl_md_get", c_md_get, 0},
    {"ixl_md_load", c_md_load, 0},
    {"ixl_remote_invalidate", c_remote_invalidate, 0},
    {"ixl_remote_check", c_remote_check, 0},
    {"ixl_remote_connect", c_remote_connect, 0},
    {"ixl_md_send", c_md_send, 0},
    {"ixl_md_fetch", c_md_fetch, 0},
    {"ixl_md_invalidate_local", c_md_invalidate_local, 0},
    {"ixl_agent_listen_port", c_agent_listen_port, 0},
    {"ixl_xfer_create", c_xfer_create, 0},
    {"ixl_xfer_post", c_xfer_post, 0},
    {"ixl_xfer_status", c_xfer_status, 0},
    {"ixl_xfer_wait", c_xfer_wait, 0},
    {"ixl_xfer_release", c_xfer_release, 0},
    {"ixl_xfer_set_notif", c_xfer_set_notif, 0},
    {"ixl_xfer_telemetry", c_xfer_telemetry, 0},
    {"ixl_xfer_info", c_xfer_info, 0},
    {"ixl_xfer_estimate", c_xfer_estimate, 0},
    {"ixl_prep_create", c_prep_create, 0},
    {"ixl_xfer_create_prepped", c_xfer_create_prepped, 0},
    {"ixl_notif_drain", c_notif_drain, 0},
    {"ixl_notif_send", c_notif_send, 0},
};

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    CHECK_RC(ixl_agent_create("pending", &p, &agent), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &list), IXL_OK);
    struct ixl_desc d = {(uintptr_t)buf_a, 64, 0};
    CHECK_RC(ixl_dlist_add(list, &d, 1), IXL_OK);

    int failures = 0, pending = 0;
    printf("calls that still return IXL_ERR_NOT_SUPPORTED:\n");
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        int rc = calls[i].fn();
        int is_pending = rc == IXL_ERR_NOT_SUPPORTED;
        if (is_pending) {
            printf("  %s\n", calls[i].name);
            pending++;
        }
        if (is_pending != calls[i].pending) {
            fprintf(stderr, "%s: returned %s, but the list says it is %s\n", calls[i].name,
                    ixl_strerror(rc), calls[i].pending ? "pending" : "implemented");
            failures++;
        }
    }
    printf("%d of %zu calls pending\n", pending, sizeof(calls) / sizeof(calls[0]));
    ixl_dlist_destroy(list);
    ixl_agent_destroy(agent);
    return failures ? 1 : 0;
}

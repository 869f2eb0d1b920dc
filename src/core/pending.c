/*
 * Calls of the north-bound API that the next issue implements (registry, metadata, transfers,
 * prepared lists, notifications). Each returns IXL_ERR_NOT_SUPPORTED; tests/unit/test_api.c
 * lists exactly these, so none is forgotten.
 */
#include <stdlib.h>

#include "core/agent.h"
#include "core/hooks.h"
#include "util/err.h"

int ixl_agent_hooks_init(struct ixl_agent *agent)
{
    (void)agent;
    return IXL_OK;
}

void ixl_agent_hooks_fini(struct ixl_agent *agent)
{
    (void)agent;
}

#define PENDING IXL_ERR_NOT_SUPPORTED

ixl_status ixl_mem_register(struct ixl_agent *a, enum ixl_mem t, const struct ixl_reg_desc *d,
                            size_t n, const struct ixl_reg_params *p)
{
    (void)a, (void)t, (void)d, (void)n, (void)p;
    return PENDING;
}
ixl_status ixl_mem_deregister(struct ixl_agent *a, enum ixl_mem t, const struct ixl_reg_desc *d,
                              size_t n, const struct ixl_reg_params *p)
{
    (void)a, (void)t, (void)d, (void)n, (void)p;
    return PENDING;
}
ixl_status ixl_mem_query(struct ixl_agent *a, enum ixl_mem t, const struct ixl_reg_desc *d,
                         size_t n, struct ixl_backend *b, struct ixl_mem_query *out)
{
    (void)a, (void)t, (void)d, (void)n, (void)b, (void)out;
    return PENDING;
}
ixl_status ixl_mem_alloc(struct ixl_agent *a, enum ixl_mem t, size_t len, struct ixl_backend *b,
                         void **out)
{
    (void)a, (void)t, (void)len, (void)b, (void)out;
    return PENDING;
}
ixl_status ixl_mem_free(struct ixl_agent *a, void *addr)
{
    (void)a, (void)addr;
    return PENDING;
}
ixl_status ixl_md_get(struct ixl_agent *a, const struct ixl_md_params *p, void **out, size_t *len)
{
    (void)a, (void)p, (void)out, (void)len;
    return PENDING;
}
ixl_status ixl_md_load(struct ixl_agent *a, const void *blob, size_t len, char *name)
{
    (void)a, (void)blob, (void)len, (void)name;
    return PENDING;
}
ixl_status ixl_remote_invalidate(struct ixl_agent *a, const char *r)
{
    (void)a, (void)r;
    return PENDING;
}
ixl_status ixl_remote_check(struct ixl_agent *a, const char *r, const struct ixl_dlist *d)
{
    (void)a, (void)r, (void)d;
    return PENDING;
}
ixl_status ixl_remote_connect(struct ixl_agent *a, const char *r)
{
    (void)a, (void)r;
    return PENDING;
}
ixl_status ixl_md_send(struct ixl_agent *a, const struct ixl_peer *peer,
                       const struct ixl_md_params *p)
{
    (void)a, (void)peer, (void)p;
    return PENDING;
}
ixl_status ixl_md_fetch(struct ixl_agent *a, const char *r, const struct ixl_peer *peer,
                        const char *label)
{
    (void)a, (void)r, (void)peer, (void)label;
    return PENDING;
}
ixl_status ixl_md_invalidate_local(struct ixl_agent *a, const struct ixl_peer *peer)
{
    (void)a, (void)peer;
    return PENDING;
}
ixl_status ixl_agent_listen_port(struct ixl_agent *a, uint16_t *out)
{
    (void)a, (void)out;
    return PENDING;
}
ixl_status ixl_xfer_create(struct ixl_agent *a, enum ixl_op op, const struct ixl_dlist *l,
                           const struct ixl_dlist *r, const char *ra,
                           const struct ixl_xfer_params *p, struct ixl_xfer **out)
{
    (void)a, (void)op, (void)l, (void)r, (void)ra, (void)p, (void)out;
    return PENDING;
}
ixl_status ixl_xfer_post(struct ixl_xfer *x)
{
    (void)x;
    return PENDING;
}
ixl_status ixl_xfer_status(struct ixl_xfer *x)
{
    (void)x;
    return PENDING;
}
ixl_status ixl_xfer_wait(struct ixl_xfer *x, int t)
{
    (void)x, (void)t;
    return PENDING;
}
ixl_status ixl_xfer_release(struct ixl_xfer *x)
{
    (void)x;
    return PENDING;
}
ixl_status ixl_xfer_set_notif(struct ixl_xfer *x, const void *m, size_t len)
{
    (void)x, (void)m, (void)len;
    return PENDING;
}
ixl_status ixl_xfer_telemetry(struct ixl_xfer *x, struct ixl_xfer_telemetry *out)
{
    (void)x, (void)out;
    return PENDING;
}
ixl_status ixl_xfer_info(struct ixl_xfer *x, struct ixl_xfer_info *out)
{
    (void)x, (void)out;
    return PENDING;
}
ixl_status ixl_xfer_estimate(struct ixl_xfer *x, struct ixl_cost *out)
{
    (void)x, (void)out;
    return PENDING;
}
ixl_status ixl_prep_create(struct ixl_agent *a, const char *r, const struct ixl_dlist *l,
                           const struct ixl_prep_params *p, struct ixl_prep **out)
{
    (void)a, (void)r, (void)l, (void)p, (void)out;
    return PENDING;
}
void ixl_prep_destroy(struct ixl_prep *p)
{
    (void)p;
}
uint64_t ixl_prep_count(const struct ixl_prep *p)
{
    (void)p;
    return 0;
}
ixl_status ixl_xfer_create_prepped(struct ixl_agent *a, enum ixl_op op, const struct ixl_prep *l,
                                   const int64_t *li, const struct ixl_prep *r, const int64_t *ri,
                                   size_t n, const struct ixl_xfer_params *p, struct ixl_xfer **out)
{
    (void)a, (void)op, (void)l, (void)li, (void)r, (void)ri, (void)n, (void)p, (void)out;
    return PENDING;
}
ixl_status ixl_notif_drain(struct ixl_agent *a, struct ixl_notif_batch **out)
{
    (void)a, (void)out;
    return PENDING;
}
ixl_status ixl_notif_send(struct ixl_agent *a, const char *r, const void *m, size_t len,
                          struct ixl_backend *b)
{
    (void)a, (void)r, (void)m, (void)len, (void)b;
    return PENDING;
}

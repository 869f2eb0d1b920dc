/*
 * Calls of the north-bound API that a later issue implements (metadata exchange through the
 * peer listener and etcd). Each returns IXL_ERR_NOT_SUPPORTED; tests/unit/test_api_pending.c
 * lists exactly these, so none is forgotten.
 */
#include <stdlib.h>

#include "core/agent.h"
#include "util/err.h"

#define PENDING IXL_ERR_NOT_SUPPORTED

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

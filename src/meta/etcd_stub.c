/* Placeholder until the etcd client lands (removed by that merge). */
#include <stdio.h>

#include <ixl/ixl.h>

#include "meta/etcd.h"

#define NOPE(err, errlen) \
    (snprintf(err, errlen, "etcd support is not built"), IXL_ERR_NOT_SUPPORTED)

int ixl_etcd_open(const struct ixl_etcd_opts *opts, struct ixl_etcd **out, char *err, size_t errlen)
{
    (void)opts, (void)out;
    return NOPE(err, errlen);
}
void ixl_etcd_close(struct ixl_etcd *c)
{
    (void)c;
}
int ixl_etcd_publish(struct ixl_etcd *c, const char *agent, const char *label, uint64_t incarnation,
                     const void *blob, size_t len, char *err, size_t errlen)
{
    (void)c, (void)agent, (void)label, (void)incarnation, (void)blob, (void)len;
    return NOPE(err, errlen);
}
int ixl_etcd_fetch(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms,
                   void **blob, size_t *len, char *err, size_t errlen)
{
    (void)c, (void)agent, (void)label, (void)timeout_ms, (void)blob, (void)len;
    return NOPE(err, errlen);
}
int ixl_etcd_remove(struct ixl_etcd *c, const char *agent, char *err, size_t errlen)
{
    (void)c, (void)agent;
    return NOPE(err, errlen);
}
int ixl_etcd_watch(struct ixl_etcd *c, ixl_etcd_gone_fn fn, void *ctx, char *err, size_t errlen)
{
    (void)c, (void)fn, (void)ctx;
    return NOPE(err, errlen);
}

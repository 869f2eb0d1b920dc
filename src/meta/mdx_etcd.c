/* The metadata exchange over etcd (mdx.h): the exchange's operations on etcd.c's client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/agent.h"
#include "core/internal.h"
#include "meta/etcd.h"
#include "meta/mdx.h"
#include "util/config.h"
#include "util/log.h"
#include "util/sys.h"
#include "util/time.h"

#define MDX_FETCH_WAIT_MS 30000 /* how long a fetch waits for the name to appear */
#define MDX_POLL_MS 50

struct mdx_etcd {
    struct ixl_agent *agent;
    struct ixl_etcd *c;
    const atomic_bool *stop;
};

static int etcd_publish(void *impl, const struct ixl_peer *peer, const char *label,
                        const void *blob, size_t len, char *msg, size_t msglen)
{
    struct mdx_etcd *m = impl;
    (void)peer;
    return ixl_etcd_publish(m->c, m->agent->name, label, m->agent->incarnation, blob, len, msg,
                            msglen);
}

static int etcd_fetch(void *impl, struct mdx_thread *t, const char *remote,
                      const struct ixl_peer *peer, const char *label, void **blob, size_t *len,
                      char *msg, size_t msglen)
{
    struct mdx_etcd *m = impl;
    (void)t;
    (void)peer;
    int rc;
    uint64_t deadline = ixl_now_us() + (uint64_t)MDX_FETCH_WAIT_MS * 1000u;
    for (;;) {
        rc = ixl_etcd_fetch(m->c, remote, label, 0, blob, len, msg, msglen);
        if (rc != IXL_ERR_NOT_FOUND || atomic_load(m->stop) || ixl_now_us() >= deadline)
            break;
        usleep(MDX_POLL_MS * 1000);
    }
    return rc;
}

static int etcd_invalidate(void *impl, const struct ixl_peer *peer, char *msg, size_t msglen)
{
    struct mdx_etcd *m = impl;
    (void)peer;
    return ixl_etcd_remove(m->c, m->agent->name, msg, msglen);
}

static void etcd_destroy(void *impl)
{
    struct mdx_etcd *m = impl;
    if (m == NULL)
        return;
    ixl_etcd_close(m->c);
    free(m);
}

const struct ixl_mdx_ops ixl_mdx_etcd_ops = {
    .name = "etcd",
    .publish = etcd_publish,
    .fetch = etcd_fetch,
    .invalidate = etcd_invalidate,
    .destroy = etcd_destroy,
};

/* An agent's head went (deleted or expired: incarnation 0) or another instance replaced it:
 * the remote loaded under that name is dropped, unless it already is that new instance. */
static void etcd_gone(void *ctx, const char *name, const char *label, uint64_t incarnation)
{
    struct mdx_etcd *m = ctx;
    struct ixl_agent *agent = m->agent;
    if (label[0] != '\0' || atomic_load(m->stop) || strcmp(name, agent->name) == 0)
        return;
    pthread_rwlock_rdlock(&agent->lock);
    struct remote *r = ixl_remote_find(agent, name);
    uint64_t loaded = r != NULL ? r->incarnation : 0;
    pthread_rwlock_unlock(&agent->lock);
    if (r == NULL || (incarnation != 0 && loaded == incarnation))
        return;
    if (ixl_remote_invalidate_inc(agent, name, loaded) == IXL_OK) {
        IXL_LOG_INF("agent %s: '%s' %s in etcd: its metadata is dropped", agent->name, name,
                    incarnation ? "restarted" : "left");
        ixl_agent_wake(agent);
    }
}

int ixl_mdx_etcd_open(struct ixl_agent *agent, const char *endpoints, const atomic_bool *stop,
                      void **out, char *msg, size_t msglen)
{
    struct mdx_etcd *m = sys_calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(msg, msglen, "out of memory");
        return IXL_ERR_NO_MEMORY;
    }
    m->agent = agent;
    m->stop = stop;
    uint64_t ttl_s;
    int rc = ixl_cfg_num(IXL_CFG_ETCD_TTL, &ttl_s, msg, msglen);
    if (rc != IXL_OK) {
        etcd_destroy(m);
        return rc;
    }
    struct ixl_etcd_opts o = {
        .endpoints = endpoints,
        .ns = ixl_cfg_get(IXL_CFG_ETCD_NAMESPACE),
        .ttl_s = (unsigned)ttl_s, /* 1..3600: the table's range */
    };
    rc = ixl_etcd_open(&o, &m->c, msg, msglen);
    if (rc == IXL_OK)
        rc = ixl_etcd_watch(m->c, etcd_gone, m, msg, msglen);
    if (rc != IXL_OK) {
        etcd_destroy(m);
        return rc;
    }
    *out = m;
    return IXL_OK;
}

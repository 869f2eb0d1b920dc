/* Notifications: drained from every backend into one batch; sent through a shared backend. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "util/log.h"
#include "util/sys.h"

struct pending_notif {
    char *agent;
    void *msg;
    size_t len;
    size_t seq;
};

struct drain {
    struct pending_notif *v;
    size_t n, cap;
    size_t bytes;
    int failed;
};

static void sink(void *ctx, const char *agent, const void *msg, size_t len)
{
    struct drain *d = ctx;
    if (d->failed || agent == NULL || (msg == NULL && len > 0))
        return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        struct pending_notif *v = sys_realloc(d->v, cap * sizeof(*v));
        if (v == NULL) {
            d->failed = 1;
            return;
        }
        d->v = v;
        d->cap = cap;
    }
    struct pending_notif *p = &d->v[d->n];
    size_t alen = strnlen(agent, IXL_NAME_MAX - 1);
    p->agent = sys_malloc(alen + 1);
    p->msg = sys_malloc(len ? len : 1);
    if (p->agent == NULL || p->msg == NULL) {
        free(p->agent);
        free(p->msg);
        d->failed = 1;
        return;
    }
    memcpy(p->agent, agent, alen);
    p->agent[alen] = '\0';
    if (len)
        memcpy(p->msg, msg, len);
    p->len = len;
    p->seq = d->n;
    d->bytes += alen + 1 + len;
    d->n++;
}

/* Groups by sender, keeping arrival order within a sender. */
static int by_sender(const void *a, const void *b)
{
    const struct pending_notif *x = a, *y = b;
    int c = strcmp(x->agent, y->agent);
    if (c != 0)
        return c;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

ixl_status ixl_notif_drain(struct ixl_agent *agent, struct ixl_notif_batch **out)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (out == NULL)
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_notif_drain: NULL out");
    struct drain d = {0};
    /* One drainer at a time: two would split one sender's notifications between batches in
     * an order the callers could not restore. */
    pthread_mutex_lock(&agent->notif_lock);
    pthread_rwlock_rdlock(&agent->calls_lock); /* no backend is destroyed under these calls */
    pthread_rwlock_rdlock(&agent->lock);
    unsigned n = 0;
    struct ixl_backend *list[IXL_MAX_BACKENDS];
    for (unsigned i = 0; i < agent->n_backends; i++)
        if (agent->backends[i] != NULL && (agent->backends[i]->caps & IXL_CAP_NOTIF))
            list[n++] = agent->backends[i];
    pthread_rwlock_unlock(&agent->lock);
    int rc = IXL_OK;
    for (unsigned i = 0; i < n && rc == IXL_OK; i++) {
        if (list[i]->caps & IXL_CAP_PROGRESS)
            list[i]->plugin->ops.progress(list[i]->engine);
        rc = list[i]->plugin->ops.get_notifs(list[i]->engine, sink, &d);
    }
    pthread_rwlock_unlock(&agent->calls_lock);
    pthread_mutex_unlock(&agent->notif_lock);
    if (rc == IXL_OK && d.failed)
        rc = IXL_ERR_NO_MEMORY;
    struct ixl_notif_batch *batch = NULL;
    if (rc == IXL_OK && d.n > 0) {
        qsort(d.v, d.n, sizeof(d.v[0]), by_sender);
        size_t head = sizeof(*batch) + d.n * sizeof(batch->items[0]);
        batch = sys_malloc(head + d.bytes);
        if (batch == NULL) {
            rc = IXL_ERR_NO_MEMORY;
        } else {
            batch->count = d.n;
            char *pos = (char *)batch + head;
            for (size_t i = 0; i < d.n; i++) {
                size_t alen = strlen(d.v[i].agent) + 1;
                memcpy(pos, d.v[i].agent, alen);
                batch->items[i].agent = pos;
                pos += alen;
                if (d.v[i].len)
                    memcpy(pos, d.v[i].msg, d.v[i].len);
                batch->items[i].msg = pos;
                batch->items[i].len = d.v[i].len;
                pos += d.v[i].len;
            }
            atomic_fetch_add(&agent->st_notifs_rx, d.n);
        }
    }
    for (size_t i = 0; i < d.n; i++) {
        free(d.v[i].agent);
        free(d.v[i].msg);
    }
    free(d.v);
    if (rc != IXL_OK) {
        /* What the backends handed over is lost with this batch: say so loudly. */
        return IXL_AGENT_ERR(agent, rc, "draining notifications failed (%zu lost): %s", d.n,
                             ixl_strerror(rc));
    }
    *out = batch;
    return IXL_OK;
}

ixl_status ixl_notif_send(struct ixl_agent *agent, const char *remote, const void *msg, size_t len,
                          struct ixl_backend *backend)
{
    if (agent == NULL)
        return IXL_ERR_INVALID_ARG;
    ixl_err_clear(agent->id);
    if (remote == NULL || (msg == NULL && len > 0) || (backend && backend->agent != agent))
        return IXL_AGENT_ERR(agent, IXL_ERR_INVALID_ARG, "ixl_notif_send: bad arguments");
    if (len > agent->params.notif_max)
        return IXL_AGENT_ERR(agent, IXL_ERR_NOTIF_TOO_LARGE,
                             "notification of %zu bytes exceeds the maximum of %zu", len,
                             agent->params.notif_max);
    int self = strcmp(remote, agent->name) == 0;
    pthread_rwlock_rdlock(&agent->calls_lock); /* the backend chosen stays until gen_notif ends */
    pthread_rwlock_rdlock(&agent->lock);
    struct remote *r = self ? NULL : ixl_remote_require(agent, remote);
    struct ixl_backend *be = NULL;
    int rc = IXL_OK;
    if (!self && r == NULL) {
        rc = IXL_ERR_NOT_FOUND;
    } else {
        for (unsigned b = 0; b < agent->n_backends && be == NULL; b++) {
            struct ixl_backend *c = agent->backends[b];
            if (c == NULL || (backend && c != backend))
                continue;
            if (!(c->caps & IXL_CAP_NOTIF))
                continue;
            if (self ? (c->caps & IXL_CAP_LOCAL) : (r->conn_mask & (1u << b)) != 0)
                be = c;
        }
        if (be == NULL)
            rc = IXL_AGENT_ERR(agent, backend ? IXL_ERR_NOTIF_UNSUPPORTED : IXL_ERR_NO_BACKEND,
                               "no backend %s%sshared with '%s' supports notifications",
                               backend ? backend->plugin->info.name : "", backend ? " " : "",
                               remote);
    }
    pthread_rwlock_unlock(&agent->lock);
    if (rc == IXL_OK)
        rc = be->plugin->ops.gen_notif(be->engine, remote, msg, len);
    const char *be_name = be ? be->plugin->info.name : NULL; /* plugins outlive backends */
    pthread_rwlock_unlock(&agent->calls_lock);
    if (be_name == NULL)
        return rc;
    if (rc == IXL_OK)
        atomic_fetch_add(&agent->st_notifs_tx, 1);
    else if (ixl_err_get(agent->id)[0] == '\0')
        IXL_AGENT_ERR(agent, rc, "backend %s could not send the notification to '%s': %s", be_name,
                      remote, ixl_strerror(rc));
    return rc;
}

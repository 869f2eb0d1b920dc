/* NET's request table: serial -> request, the state of each post, completion of its parts,
 * failure of a peer's generation. Everything here runs under e->reqs_lock and never calls
 * up into the loops or the copy workers: a completion that owes a notification says so to its
 * caller, which queues it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

static size_t qslot(uint64_t serial, size_t cap)
{
    return (size_t)(serial * 0x9e3779b97f4a7c15ull >> 24) & (cap - 1);
}

struct net_req *net_req_find(struct net_engine *e, uint64_t serial)
{
    if (e->qtab_cap == 0 || serial == 0)
        return NULL;
    for (struct net_req *r = e->qtab[qslot(serial, e->qtab_cap)]; r; r = r->tnext)
        if (r->serial == serial)
            return r;
    return NULL;
}

void net_req_remove(struct net_engine *e, struct net_req *r)
{
    if (r->serial == 0 || e->qtab_cap == 0)
        return;
    struct net_req **pp = &e->qtab[qslot(r->serial, e->qtab_cap)];
    while (*pp && *pp != r)
        pp = &(*pp)->tnext;
    if (*pp)
        *pp = r->tnext;
    r->serial = 0;
}

int net_req_insert(struct net_engine *e, struct net_req *r)
{
    static const size_t first_cap = 1024;
    if (e->qtab_cap == 0) {
        e->qtab = net_sys()->calloc(first_cap, sizeof(*e->qtab));
        if (e->qtab == NULL)
            return IXL_ERR_NO_MEMORY;
        e->qtab_cap = first_cap;
    }
    r->serial = e->next_serial++;
    size_t s = qslot(r->serial, e->qtab_cap);
    r->tnext = e->qtab[s];
    e->qtab[s] = r;
    return IXL_OK;
}

struct net_req *net_req_get_busy(struct net_engine *e, uint64_t serial)
{
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    if (r != NULL && (r->state != NR_RUNNING || r->canceled))
        r = NULL;
    if (r != NULL)
        r->busy++;
    pthread_mutex_unlock(&e->reqs_lock);
    return r;
}

void net_req_unbusy(struct net_engine *e, struct net_req *r)
{
    pthread_mutex_lock(&e->reqs_lock);
    if (--r->busy == 0)
        pthread_cond_broadcast(&e->reqs_cond);
    pthread_mutex_unlock(&e->reqs_lock);
}

static void set_why(struct net_req *r, const char *why)
{
    if (why != NULL && r->why[0] == '\0')
        snprintf(r->why, sizeof(r->why), "%s", why);
}

int net_req_part_done(struct net_engine *e, uint64_t serial, int status, const char *why)
{
    int wake = 0, notif = 0, loop_notif = 0;
    void *msg = NULL;
    size_t len = 0;
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    if (r != NULL && r->state == NR_RUNNING) {
        if (status != IXL_OK && r->status == IXL_OK) {
            r->status = status;
            set_why(r, why);
        }
        if (r->pending > 0 && --r->pending == 0) {
            if (r->status != IXL_OK) {
                r->state = NR_ERROR;
                wake = 1;
            } else if (r->notif != NULL && r->peer != NULL && !r->canceled) {
                notif = 1; /* the data is in place at the target: now its notification */
            } else if (r->notif != NULL && !r->canceled) {
                loop_notif = 1; /* to this agent: done once it is queued */
                msg = net_sys()->malloc(r->notif_len ? r->notif_len : 1);
                if (msg != NULL) {
                    memcpy(msg, r->notif, r->notif_len);
                    len = r->notif_len;
                }
            } else {
                r->state = NR_DONE;
                wake = 1;
            }
        }
    }
    pthread_mutex_unlock(&e->reqs_lock);
    if (loop_notif) {
        int rc = msg ? net_notif_push(e, e->name, msg, len)
                     : net_error(e, IXL_ERR_NO_MEMORY,
                                 "malloc: out of memory copying a notification to this agent");
        free(msg);
        net_req_notif_done(e, serial, rc,
                           "NET: out of memory queueing a notification to this "
                           "agent (malloc failed)");
        return 0;
    }
    if (wake)
        e->host->signal(e->host->ctx);
    return notif;
}

void net_req_notif_done(struct net_engine *e, uint64_t serial, int status, const char *why)
{
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    if (r != NULL && r->state == NR_RUNNING) {
        r->state = status == IXL_OK ? NR_DONE : NR_ERROR;
        r->status = status;
        if (status != IXL_OK)
            set_why(r, why);
    }
    pthread_mutex_unlock(&e->reqs_lock);
    e->host->signal(e->host->ctx);
}

void net_req_notif_sequenced(struct net_engine *e, uint64_t serial)
{
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, serial);
    if (r != NULL && r->state == NR_RUNNING) {
        r->state = NR_DONE;
        r->status = IXL_OK;
    }
    pthread_mutex_unlock(&e->reqs_lock);
}

int net_req_answer(struct net_engine *e, struct net_peer *p, const struct net_hdr *h)
{
    int v = 0;
    pthread_mutex_lock(&e->reqs_lock);
    struct net_req *r = net_req_find(e, h->req);
    if (r != NULL && r->path == NET_PATH_TCP && r->state == NR_RUNNING && !r->canceled) {
        int is_write = h->op == NET_WRITE_ACK;
        if (r->peer != p || is_write != (r->op == IXL_OP_WRITE) || h->chunk >= r->n_chunks ||
            r->answered == NULL || r->answered[h->chunk] ||
            (h->op == NET_READ_DATA && h->status == 0 && h->len != r->chunks[h->chunk].len)) {
            v = -1;
        } else {
            r->answered[h->chunk] = 1;
            v = 1;
        }
    }
    pthread_mutex_unlock(&e->reqs_lock);
    if (v == 0 && h->op == NET_READ_DATA && h->len > e->chunk)
        v = -1; /* more than any frame this engine asks for */
    return v;
}

void net_req_fail_peer(struct net_engine *e, struct net_peer *p, int status, uint64_t torn,
                       const char *why)
{
    int woke = 0;
    pthread_mutex_lock(&e->reqs_lock);
    for (size_t i = 0; i < e->qtab_cap; i++)
        for (struct net_req *r = e->qtab[i]; r; r = r->tnext)
            if (r->peer == p && r->state == NR_RUNNING && r->gen <= torn &&
                (r->path == NET_PATH_TCP || r->notif != NULL)) {
                /* TCP frames, or a same-node request whose notification waits for the
                 * connection (its data is copied already, or being copied: pending says). */
                if (r->path != NET_PATH_TCP && r->pending > 0)
                    continue;
                r->state = NR_ERROR;
                r->status = status;
                set_why(r, why);
                r->pending = 0;
                woke = 1;
            }
    pthread_mutex_unlock(&e->reqs_lock);
    if (woke)
        e->host->signal(e->host->ctx);
}

void net_req_link(struct net_engine *e, struct net_req *r)
{
    pthread_mutex_lock(&e->reqs_lock);
    r->anext = e->all_reqs;
    if (e->all_reqs)
        e->all_reqs->aprev = r;
    e->all_reqs = r;
    pthread_mutex_unlock(&e->reqs_lock);
}

void net_req_unlink(struct net_engine *e, struct net_req *r)
{
    if (r->aprev)
        r->aprev->anext = r->anext;
    else
        e->all_reqs = r->anext;
    if (r->anext)
        r->anext->aprev = r->aprev;
}

void net_req_free(struct net_req *r)
{
    net_ipc_req_free(r);
    free(r->chunks);
    free(r->answered);
    free(r->notif);
    free(r);
}

void net_reqs_free_all(struct net_engine *e)
{
    while (e->all_reqs) {
        struct net_req *r = e->all_reqs;
        net_req_unlink(e, r);
        net_stage_sweep(e, r); /* every thread has stopped */
        net_req_free(r);
    }
}

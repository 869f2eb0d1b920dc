/* UCX plugin: the plugin's own active messages: the generic datatype every message is packed
 * with, and WRITE/READ over lanes without an RMA transport (initiator and target sides). See
 * ucx.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/ixl_plugin_util.h"
#include "ucx.h"

/* ---- the plugin's active messages ------------------------------------------------------------
 *
 * Every message the plugin sends is handed to UCX as a generic datatype that packs from a
 * pack_src: UCX copies it into its own segments and never sends it zero-copy. UCX 1.13.1's tcp
 * transport completes a zero-copy send twice when the socket fails in the middle of it (the peer
 * died) and aborts the process ("uct_iface.h:884 Assertion `comp->count > 0' failed" under
 * uct_tcp_ep_sendv; README.md). The copy costs what UCX's own bcopy costs; the shm and RDMA paths
 * move data with put/get and send only small messages. */

void pack_src_set(struct pack_src *ps, const ucp_dt_iov_t *iov, size_t n, const void *buf,
                  size_t len)
{
    if (n == 0) {
        ps->one = (ucp_dt_iov_t){.buffer = (void *)buf, .length = len};
        iov = &ps->one;
        n = 1;
    }
    ps->iov = iov;
    ps->n = n;
    ps->total = 0;
    for (size_t i = 0; i < n; i++)
        ps->total += iov[i].length;
}

static void *pack_start(void *ctx, const void *buffer, size_t count)
{
    (void)ctx;
    (void)count;
    struct pack_src *ps = (struct pack_src *)buffer;
    ps->i = 0;
    ps->at = 0;
    return ps;
}

static void *unpack_start(void *ctx, void *buffer, size_t count)
{
    (void)ctx;
    (void)count;
    return buffer; /* never received into: the handlers take the data as it arrived */
}

static size_t pack_size(void *state)
{
    return ((struct pack_src *)state)->total;
}

/* Bytes [offset, offset + max) of the message (fewer at its end) into dest. UCX packs in order:
 * the entry the last call ended in is where the next one starts looking. */
static size_t pack_bytes(void *state, size_t offset, void *dest, size_t max)
{
    struct pack_src *ps = state;
    if (offset < ps->at) {
        ps->i = 0;
        ps->at = 0;
    }
    while (ps->i < ps->n && offset - ps->at >= ps->iov[ps->i].length) {
        ps->at += ps->iov[ps->i].length;
        ps->i++;
    }
    size_t done = 0;
    while (done < max && ps->i < ps->n) {
        const ucp_dt_iov_t *v = &ps->iov[ps->i];
        size_t skip = offset + done - ps->at;
        size_t take = v->length - skip < max - done ? v->length - skip : max - done;
        memcpy((char *)dest + done, (const char *)v->buffer + skip, take);
        done += take;
        if (skip + take == v->length) {
            ps->at += v->length;
            ps->i++;
        }
    }
    return done;
}

static ucs_status_t unpack_bytes(void *state, size_t offset, const void *src, size_t len)
{
    (void)state;
    (void)offset;
    (void)src;
    (void)len;
    return UCS_ERR_UNSUPPORTED;
}

static void pack_finish(void *state)
{
    (void)state;
}

const ucp_generic_dt_ops_t pack_ops = {.start_pack = pack_start,
                                       .start_unpack = unpack_start,
                                       .packed_size = pack_size,
                                       .pack = pack_bytes,
                                       .unpack = unpack_bytes,
                                       .finish = pack_finish};

/* Hands ps's message to UCX as an eager active message with rp's callback. */
ucs_status_ptr_t am_send_src(struct ucx_engine *e, ucp_ep_h ep, unsigned id, const void *hdr,
                             size_t hdr_len, struct pack_src *ps, ucp_request_param_t *rp)
{
    rp->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    rp->datatype = e->packer;
    rp->flags |= UCP_AM_SEND_FLAG_EAGER;
    return ucp_am_send_nbx(ep, id, hdr, hdr_len, ps, 1, rp);
}

/* ---- the plugin's own WRITE/READ messages (lanes without an RMA transport) ---------------------
 *
 * UCX 1.13 emulates put/get over tcp with its own active messages, and its target side treats a
 * failed acknowledgment as fatal: a target whose initiator dies in the middle of a transfer
 * aborts ("ucp_request.inl:346 Fatal: unexpected error" under ucp_put_handler). So over such
 * lanes the plugin sends its own messages (ucx_wire.h): a WRITE message carries up to
 * UCX_RMA_MAX_ENTRIES descriptors' bytes (at most UCX_AM_MSG), the target checks every range
 * against its registered regions by key, copies, and replies; a READ message names the ranges
 * and the reply carries their bytes. A reply to a dead initiator fails like any send. The
 * replies replace the flush: a part whose messages were all answered is in place at the target.
 */

/* A send context with room for niov iov entries and `bytes` bytes of message; on w's list. Under
 * w->lock. */
struct ucx_send *send_new(struct ucx_worker *w, struct ucx_part *p, size_t niov, size_t bytes)
{
    struct ucx_send *s = malloc(sizeof(*s) + niov * sizeof(ucp_dt_iov_t) + bytes);
    if (s == NULL)
        return NULL;
    s->w = w;
    s->p = p;
    s->token = 0;
    s->niov = niov;
    s->prev = NULL;
    s->next = w->sends;
    if (w->sends != NULL)
        w->sends->prev = s;
    w->sends = s;
    return s;
}

unsigned char *send_bytes(struct ucx_send *s)
{
    return (unsigned char *)&s->iov[s->niov];
}

void send_free(struct ucx_send *s)
{
    struct ucx_worker *w = s->w;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        w->sends = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s);
}

/* A free slot for a message awaiting its reply, with a fresh generation: its token, or 0 (no
 * memory). Under w->lock. */
static uint64_t op_alloc(struct ucx_worker *w, struct ucx_remote *r)
{
    if (w->free_op == UINT32_MAX) {
        if (w->n_ops == w->cap_ops) {
            uint32_t cap = w->cap_ops ? 2 * w->cap_ops : 256;
            struct ucx_op *ops = cap > w->cap_ops ? realloc(w->ops, cap * sizeof(*ops)) : NULL;
            if (ops == NULL)
                return 0;
            w->ops = ops;
            w->cap_ops = cap;
        }
        w->ops[w->n_ops] = (struct ucx_op){.gen = 0, .next_free = UINT32_MAX};
        w->free_op = w->n_ops++;
    }
    uint32_t i = w->free_op;
    struct ucx_op *o = &w->ops[i];
    w->free_op = o->next_free;
    o->rem = r;
    o->p = NULL;
    o->wait = NULL;
    o->notif = false;
    /* A random generation: a peer cannot guess the token of another peer's message, and a late
     * reply does not match the slot's next use. Never 0, so tokens are never 0. */
    uint32_t g;
    do {
        w->rng ^= w->rng << 13;
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        g = (uint32_t)(w->rng >> 32);
    } while (g == 0 || g == o->gen);
    o->gen = g;
    return (uint64_t)o->gen << 32 | i;
}

/* A slot for a message of p awaiting its reply: its token, or 0 (no memory). Under w->lock. */
static uint64_t op_new(struct ucx_worker *w, struct ucx_part *p, bool read, size_t d0, uint64_t o0,
                       uint64_t bytes)
{
    uint64_t token = op_alloc(w, p->q->rem);
    if (token == 0)
        return 0;
    struct ucx_op *o = &w->ops[(uint32_t)token];
    o->p = p;
    o->read = read;
    o->d0 = d0;
    o->o0 = o0;
    o->bytes = bytes;
    p->replies++;
    p->inflight += bytes;
    return token;
}

/* A slot for a notification to r awaiting the target's answer: of part p (a request's
 * notification), or of a sender waiting on *wait (no request; *wait is IXL_IN_PROGRESS until the
 * answer, a failure or ops_drop sets it). Its token, or 0 (no memory). Under w->lock. */
uint64_t notif_op_new(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int *wait)
{
    uint64_t token = p != NULL ? op_new(w, p, false, 0, 0, 0) : op_alloc(w, r);
    if (token == 0)
        return 0;
    struct ucx_op *o = &w->ops[(uint32_t)token];
    o->notif = true;
    if (p == NULL) {
        o->wait = wait;
        *wait = IXL_IN_PROGRESS;
    }
    return token;
}

/* The slot a token names (live or orphaned), or NULL (free, reused since, or never given out).
 * Under w->lock. */
struct ucx_op *op_find(struct ucx_worker *w, uint64_t token)
{
    uint32_t i = (uint32_t)token;
    if (i >= w->n_ops || w->ops[i].rem == NULL || w->ops[i].gen != (uint32_t)(token >> 32))
        return NULL;
    return &w->ops[i];
}

static void op_free(struct ucx_worker *w, struct ucx_op *o)
{
    o->rem = NULL;
    o->p = NULL;
    o->wait = NULL;
    o->next_free = w->free_op;
    w->free_op = (uint32_t)(o - w->ops);
}

/* The reply o awaited came (or never will, or no longer matters): the operation counts done;
 * `orphan`: the slot stays to recognize the reply, which writes nothing. Under w->lock. */
static void op_end(struct ucx_worker *w, struct ucx_op *o, int status, bool answered, bool orphan)
{
    struct ucx_part *p = o->p;
    o->p = NULL;
    p->inflight -= o->bytes;
    if (!orphan)
        op_free(w, o);
    p->replies--;
    op_done(p, status, answered);
    /* the window has room: its next messages go out after this progress call */
    if (p->pending > 0 && !p->queued && p->phase == PH_DATA && p->inflight <= UCX_AM_WINDOW / 2 &&
        (p->nd < p->d1 || (p->nd == p->d1 && p->no < p->o1))) {
        p->queued = true;
        p->next = w->ready;
        w->ready = p;
    }
}

/* Ends every awaited reply of r's requests, live or orphaned (r's endpoint of w is gone), or
 * orphans those of part p (released): none of them lands after this. Under w->lock. */
void ops_drop(struct ucx_worker *w, struct ucx_remote *r, struct ucx_part *p, int status)
{
    for (uint32_t i = 0; i < w->n_ops; i++) {
        struct ucx_op *o = &w->ops[i];
        if (p != NULL && o->p == p)
            op_end(w, o, status, false, true);
        else if (p == NULL && o->rem == r && o->p != NULL)
            op_end(w, o, status, false, false);
        else if (p == NULL && o->rem == r) {
            if (o->wait != NULL) /* a notification's sender waits: it fails */
                *o->wait = status;
            op_free(w, o);
        }
    }
}

/* UCX completed (or failed) a send of the plugin's. Under its worker's lock. */
static void send_done(struct ucx_send *s, ucs_status_t st)
{
    struct ucx_part *p = s->p;
    struct ucx_op *o = st != UCS_OK && s->token != 0 ? op_find(s->w, s->token) : NULL;
    if (o != NULL && o->p != NULL)
        op_end(s->w, o, status_of(st), false, false); /* never left: no reply */
    else if (o != NULL) {
        if (o->wait != NULL) /* a notification with no request: its sender learns it failed */
            *o->wait = status_of(st);
        op_free(s->w, o);
    }
    if (p != NULL)
        op_done(p, status_of(st), false); /* local completion says nothing of the peer */
    send_free(s);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    ucp_request_free(request);
    send_done(user_data, status);
}

/* Hands s (its message: iov, or `len` bytes at buf) to UCX as an eager active message (a
 * request's message asks for a reply). UCS_INPROGRESS: UCX completes it later; otherwise it
 * ended (s is freed) with the status returned. Under s's worker's lock. */
ucs_status_t send_am(ucp_ep_h ep, unsigned id, struct ucx_send *s, const void *buf, size_t len,
                     bool reply)
{
    ucp_request_param_t rp = {.op_attr_mask =
                                  UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = send_cb,
                              .user_data = s,
                              .flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0};
    pack_src_set(&s->src, s->iov, s->niov, buf, len);
    bool hdr = id == UCX_AM_NOTIF; /* a notification's token travels as UCX's header */
    ucs_status_ptr_t sp =
        am_send_src(s->w->e, ep, id, hdr ? s->thdr : NULL, hdr ? sizeof(s->thdr) : 0, &s->src, &rp);
    if (UCS_PTR_IS_PTR(sp))
        return UCS_INPROGRESS;
    send_done(s, UCS_PTR_STATUS(sp));
    return UCS_PTR_STATUS(sp);
}

/* Sends the notification in s's bytes (len of them, ucx_wire.h) with its token (s->token, from
 * notif_op_new) as UCX's header: the target answers with a reply (UCX_AM_RMA_REPLY, kind 'A')
 * saying whether it queued it. Under s's worker's lock; as send_am. */
ucs_status_t send_notif(ucp_ep_h ep, struct ucx_send *s, size_t len)
{
    ixlp_put_le(s->thdr, s->token, 8);
    return send_am(ep, UCX_AM_NOTIF, s, send_bytes(s), len, true);
}

/* Answers a request message or a notification with a reply header (no payload) of this kind and
 * status; dropped when no memory is left (the sender's deadline fails it). Under w->lock. */
static void reply_status(struct ucx_worker *w, ucp_ep_h reply, enum ucx_rma_kind kind, int st,
                         uint64_t token)
{
    struct ucx_send *s = send_new(w, NULL, 0, UCX_RMA_HDR);
    if (s == NULL)
        return;
    ucx_rma_reply_encode(send_bytes(s), kind, st, token);
    send_am(reply, UCX_AM_RMA_REPLY, s, send_bytes(s), UCX_RMA_HDR, false);
}

/* Target side: a notification. Queued unless the queue of notifications not drained yet is at its
 * bound (nq_max of them, or nq_bytes_max bytes): then refused, and the answer says so, so that the
 * sender's request (or ixl_notif_send) fails rather than the notification being lost. Runs in
 * ucp_worker_progress (w->lock). */
ucs_status_t am_notif_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                         const ucp_am_recv_param_t *param)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    const char *name;
    const void *msg;
    size_t nlen, mlen;
    ucp_ep_h reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
    if (header_len != 8 || reply == NULL) {
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: dropped a notification with no token or no endpoint to answer on (a "
                     "peer of an older version of this plugin?)");
        return UCS_OK;
    }
    uint64_t token = ixlp_get_le(header, 8);
    int st = IXL_OK;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !ucx_notif_decode(data, len, SIZE_MAX, &name, &nlen, &msg, &mlen))
        st = IXL_ERR_PROTOCOL;
    else if (mlen > e->notif_max)
        st = IXL_ERR_NOTIF_TOO_LARGE;
    struct notif *n = NULL;
    size_t cost = sizeof(*n) + mlen + nlen + 1;
    if (st == IXL_OK && (n = malloc(cost)) == NULL)
        st = IXL_ERR_NO_MEMORY;
    size_t count = 0, bytes = 0;
    if (st == IXL_OK) {
        n->next = NULL;
        n->len = mlen;
        memcpy(n->msg, msg, mlen);
        n->agent = (char *)n->msg + mlen;
        memcpy(n->agent, name, nlen);
        n->agent[nlen] = '\0';
        pthread_mutex_lock(&e->nlock);
        count = e->nq_count;
        bytes = e->nq_bytes;
        if (count >= e->nq_max || cost > e->nq_bytes_max - bytes) {
            st = IXL_ERR_BUSY;
        } else {
            *e->ntail = n;
            e->ntail = &n->next;
            e->nq_count++;
            e->nq_bytes += cost;
        }
        pthread_mutex_unlock(&e->nlock);
        if (st != IXL_OK)
            free(n);
    }
    if (st == IXL_ERR_BUSY)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: refused a notification from '%.*s': %zu notifications (%zu bytes) "
                     "wait to be drained (notif_queue_max=%zu, notif_queue_bytes=%zu)",
                     (int)nlen, name, count, bytes, e->nq_max, e->nq_bytes_max);
    else if (st != IXL_OK)
        e->host->log(e->host->ctx, IXL_LOG_WARN, "UCX: refused a notification (%zu bytes): %s", len,
                     st == IXL_ERR_PROTOCOL          ? "malformed"
                     : st == IXL_ERR_NOTIF_TOO_LARGE ? "over notif_max"
                                                     : "out of memory");
    reply_status(w, reply, UCX_RMA_ACK, st, token);
    if (st == IXL_OK)
        e->host->signal(e->host->ctx);
    return UCS_OK;
}

/* One request message of part p: n entries (src: their local bytes), `bytes` in all, whose local
 * side starts at descriptor d0, byte o0. Under w->lock. */
static int am_issue(struct ucx_worker *w, struct ucx_part *p, const struct ucx_rma_entry *ent,
                    void *const *src, size_t n, uint64_t bytes, size_t d0, uint64_t o0)
{
    struct ucx_req *q = p->q;
    bool read = q->op == IXL_OP_READ;
    size_t hlen = UCX_RMA_HDR + n * UCX_RMA_ENTRY;
    struct ucx_send *s = send_new(w, p, read ? 0 : n + 1, hlen);
    uint64_t token = s != NULL ? op_new(w, p, read, d0, o0, bytes) : 0;
    if (token == 0) {
        if (s != NULL)
            send_free(s);
        req_set_err(q, IXL_ERR_NO_MEMORY);
        return IXL_ERR_NO_MEMORY;
    }
    s->token = token;
    unsigned char *hdr = send_bytes(s);
    ucx_rma_req_encode(hdr, read ? UCX_RMA_READ : UCX_RMA_WRITE, token, n, ent);
    if (!read) {
        s->iov[0] = (ucp_dt_iov_t){.buffer = hdr, .length = hlen};
        for (size_t i = 0; i < n; i++)
            s->iov[i + 1] = (ucp_dt_iov_t){.buffer = src[i], .length = ent[i].len};
    }
    op_count(p); /* the reply */
    op_count(p); /* the send */
    send_am(q->rem->lane[w->idx].ep, UCX_AM_RMA, s, hdr, hlen, true);
    return IXL_OK;
}

/* Issues p's next messages on worker w, from (nd, no) while the window has room. Under w->lock,
 * with p->pending held above 0 by the caller. */
void part_fill_am_locked(struct ucx_worker *w, struct ucx_part *p)
{
    struct ucx_req *q = p->q;
    size_t d = p->nd;
    uint64_t off = p->no;
    while (!req_stopped(q) && p->inflight < UCX_AM_WINDOW &&
           (d < p->d1 || (d == p->d1 && off < p->o1))) {
        struct ucx_rma_entry ent[UCX_RMA_MAX_ENTRIES];
        void *src[UCX_RMA_MAX_ENTRIES];
        size_t n = 0, d0 = d;
        uint64_t bytes = 0, o0 = off;
        while (n < UCX_RMA_MAX_ENTRIES && bytes < UCX_AM_MSG &&
               (d < p->d1 || (d == p->d1 && off < p->o1))) {
            const struct ixl_xfer_desc *ld = &q->local.descs[d], *rd = &q->remote.descs[d];
            uint64_t end = d == p->d1 ? p->o1 : ld->len;
            if (off >= end) {
                d++;
                off = 0;
                continue;
            }
            uint64_t take = end - off < UCX_AM_MSG - bytes ? end - off : UCX_AM_MSG - bytes;
            ent[n] = (struct ucx_rma_entry){
                .key = ((const struct ucx_md *)rd->md)->key, .addr = rd->addr + off, .len = take};
            src[n++] = (void *)(uintptr_t)(ld->addr + off);
            bytes += take;
            off += take;
        }
        if (n == 0 || am_issue(w, p, ent, src, n, bytes, d0, o0) != IXL_OK)
            break;
    }
    p->nd = d;
    p->no = off;
}

/* Target side: a request message from a peer's worker. Runs in ucp_worker_progress (w->lock). */
ucs_status_t am_rma_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    (void)header;
    (void)header_len;
    enum ucx_rma_kind kind;
    uint64_t token, total;
    size_t n;
    const unsigned char *ents, *payload;
    ucp_ep_h reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    int st = IXL_OK;
    if (rndv || !ucx_rma_req_decode(data, len, &kind, &token, &n, &ents, &payload, &total)) {
        /* answered when its token can be read, so that its request fails now rather than at
         * the deadline */
        bool peek = !rndv && ucx_rma_peek(data, len, &kind, &token) &&
                    (kind == UCX_RMA_WRITE || kind == UCX_RMA_READ);
        e->host->log(e->host->ctx, IXL_LOG_WARN, "UCX: malformed WRITE/READ message (%zu bytes)%s",
                     len, peek && reply != NULL ? ": answered with IXL_ERR_PROTOCOL" : ", dropped");
        if (!peek)
            return UCS_OK;
        n = 0;
        total = 0;
        st = IXL_ERR_PROTOCOL;
    }
    if (reply == NULL) {
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: dropped a WRITE/READ message with no endpoint to reply on");
        return UCS_OK;
    }
    bool read = kind == UCX_RMA_READ;
    if (st == IXL_OK && total > UCX_RMA_MAX_BYTES)
        st = IXL_ERR_TOO_LARGE;
    struct ucx_send *s = NULL;
    pthread_rwlock_rdlock(&e->klock);
    struct ucx_rma_entry en;
    for (size_t i = 0; i < n && st == IXL_OK; i++) {
        ucx_rma_entry_at(ents, i, &en);
        const struct ucx_md *m = key_find(e, en.key);
        if (m == NULL || en.addr < m->addr || en.len > m->len ||
            en.addr - m->addr > m->len - en.len)
            st = IXL_ERR_REMOTE_REFUSED;
    }
    if (st == IXL_OK && read && (s = send_new(w, NULL, 0, UCX_RMA_HDR + total)) == NULL)
        st = IXL_ERR_NO_MEMORY;
    unsigned char *out = s != NULL ? send_bytes(s) + UCX_RMA_HDR : NULL;
    for (size_t i = 0; i < n && st == IXL_OK; i++) {
        ucx_rma_entry_at(ents, i, &en);
        if (read)
            memcpy(out, (const void *)(uintptr_t)en.addr, en.len);
        else
            memcpy((void *)(uintptr_t)en.addr, payload, en.len);
        out = read ? out + en.len : out;
        payload += read ? 0 : en.len;
    }
    pthread_rwlock_unlock(&e->klock);
    if (st != IXL_OK && st != IXL_ERR_PROTOCOL)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: refused a %s message of %zu ranges, %" PRIu64 " bytes: %s",
                     read ? "READ" : "WRITE", n, total,
                     st == IXL_ERR_REMOTE_REFUSED ? "a range outside every registered region"
                     : st == IXL_ERR_TOO_LARGE    ? "over the largest message"
                                                  : "out of memory");
    if (st != IXL_OK && s != NULL) {
        send_free(s);
        s = NULL;
    }
    if (s == NULL && (s = send_new(w, NULL, 0, UCX_RMA_HDR)) == NULL)
        return UCS_OK; /* no memory even for the reply: the initiator's deadline fails it */
    size_t blen = st == IXL_OK && read ? UCX_RMA_HDR + total : UCX_RMA_HDR;
    ucx_rma_reply_encode(send_bytes(s), read ? UCX_RMA_DATA : UCX_RMA_ACK, st, token);
    send_am(reply, UCX_AM_RMA_REPLY, s, send_bytes(s), blen, false);
    return UCS_OK;
}

/* Initiator side: a reply to one of w's messages. Runs in ucp_worker_progress (w->lock). */
ucs_status_t am_reply_cb(void *arg, const void *header, size_t header_len, void *data, size_t len,
                         const ucp_am_recv_param_t *param)
{
    struct ucx_worker *w = arg;
    struct ucx_engine *e = w->e;
    (void)header;
    (void)header_len;
    enum ucx_rma_kind kind;
    int32_t status = 0;
    uint64_t token;
    const unsigned char *payload;
    size_t plen;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    bool bad = rndv || !ucx_rma_reply_decode(data, len, &kind, &status, &token, &payload, &plen);
    if (bad && (rndv || !ucx_rma_peek(data, len, &kind, &token))) {
        e->host->log(e->host->ctx, IXL_LOG_WARN, "UCX: dropped a malformed reply (%zu bytes)", len);
        return UCS_OK;
    }
    struct ucx_op *o = op_find(w, token);
    if (o != NULL && o->notif) { /* the answer to a notification */
        struct ucx_remote *r = o->rem;
        int st = bad || kind != UCX_RMA_ACK ? IXL_ERR_PROTOCOL
                 : status == 0              ? IXL_OK
                 : status == IXL_ERR_NOTIF_TOO_LARGE || status == IXL_ERR_NO_MEMORY
                     ? status
                     : IXL_ERR_REMOTE_REFUSED;
        if (st != IXL_OK)
            e->host->log(
                e->host->ctx, IXL_LOG_WARN, "UCX: '%s' refused a notification: %s", r->name,
                status == IXL_ERR_BUSY   ? "its queue of notifications not drained is full"
                : st == IXL_ERR_PROTOCOL ? "a malformed answer"
                                         : "it says it was malformed, too large or no memory");
        if (o->p != NULL) {
            op_end(w, o, st, true, false);
            return UCS_OK;
        }
        if (o->wait != NULL)
            *o->wait = st;
        op_free(w, o);
        r->lane[w->idx].stalled = false;
        if (atomic_exchange(&r->stalled, false))
            e->host->log(e->host->ctx, IXL_LOG_INFO, "UCX: '%s' answers again", r->name);
        return UCS_OK;
    }
    if (bad && o != NULL && o->p != NULL) { /* its message fails now, not at the deadline */
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: a malformed reply (%zu bytes) from '%s': its request fails", len,
                     o->rem->name);
        op_end(w, o, IXL_ERR_PROTOCOL, true, false);
        return UCS_OK;
    }
    if (bad)
        return UCS_OK;
    if (o == NULL)
        return UCS_OK;  /* its request failed: nothing of it lands */
    if (o->p == NULL) { /* its request was released: nothing lands, but the peer answers */
        struct ucx_remote *r = o->rem;
        op_free(w, o);
        r->lane[w->idx].stalled = false;
        if (atomic_exchange(&r->stalled, false))
            e->host->log(e->host->ctx, IXL_LOG_INFO, "UCX: '%s' answers again", r->name);
        return UCS_OK;
    }
    struct ucx_req *q = o->p->q;
    int st = IXL_OK;
    if (o->read != (kind == UCX_RMA_DATA) || (status == 0 && o->read && plen != o->bytes))
        st = IXL_ERR_PROTOCOL;
    else if (status != 0)
        st = status == IXL_ERR_TOO_LARGE || status == IXL_ERR_NO_MEMORY ? status
                                                                        : IXL_ERR_REMOTE_REFUSED;
    if (st != IXL_OK)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "UCX: '%s' answered a %s message with status %" PRId32 "%s", q->rem->name,
                     o->read ? "READ" : "WRITE", status,
                     st == IXL_ERR_PROTOCOL ? " and a reply that does not match it" : "");
    if (st == IXL_OK && o->read) {
        size_t d = o->d0;
        uint64_t off = o->o0;
        for (uint64_t left = plen; left > 0;) {
            const struct ixl_xfer_desc *ld = &q->local.descs[d];
            if (off >= ld->len) {
                d++;
                off = 0;
                continue;
            }
            uint64_t take = ld->len - off < left ? ld->len - off : left;
            memcpy((void *)(uintptr_t)(ld->addr + off), payload, take);
            payload += take;
            left -= take;
            off += take;
        }
    }
    op_end(w, o, st, true, false);
    return UCS_OK;
}

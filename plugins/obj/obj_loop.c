/* OBJ: the event loop. One thread per engine drives a curl multi handle; every HTTP request is
 * an obj_op (obj.h). Connections persist in the multi's connection cache (at most max_conns);
 * easy handles are reused from a free list. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "obj.h"

/* ---- requests' bookkeeping (e->lock held) --------------------------------------------------- */

void obj_req_fail(struct obj_req *r, int status, const char *fmt, ...)
{
    if (r->status != IXL_OK)
        return;
    r->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    /* Nothing more of it starts; what is in flight ends on its own (bounded by timeout_ms). */
    r->pending -= obj_dequeue_req(r->e, r);
}

void obj_req_op_ended(struct obj_engine *e, struct obj_req *r)
{
    if (r->pending != 0)
        return;
    if (r->status != IXL_OK && !r->canceled) {
        /* No orphaned parts: abort every upload that was created and not completed. */
        for (size_t i = 0; i < r->n_ups; i++) {
            struct obj_upload *up = &r->ups[i];
            if (up->started && !up->finished) {
                obj_abort_upload(e, up->create->obj->url, up->create->obj->key, up->upload_id);
                up->started = false;
            }
        }
    }
    if (atomic_load(&r->state) == OBJ_RUNNING)
        atomic_store(&r->state, r->status == IXL_OK ? OBJ_DONE : OBJ_FAILED);
    e->host->signal(e->host->ctx);
}

static bool in_list(struct obj_op **head, struct obj_op *op, struct obj_op **tail)
{
    struct obj_op *prev = NULL;
    for (struct obj_op **pp = head; *pp; prev = *pp, pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            if (tail && *tail == op)
                *tail = prev;
            op->next = NULL;
            return true;
        }
    return false;
}

uint32_t obj_dequeue_req(struct obj_engine *e, struct obj_req *r)
{
    uint32_t n = 0;
    for (size_t i = 0; i < r->n_ops; i++) {
        struct obj_op *op = &r->ops[i];
        if (op->state == OPS_QUEUED && in_list(&e->qhead, op, &e->qtail)) {
            op->state = OPS_IDLE;
            n++;
        } else if (op->state == OPS_DELAYED && in_list(&e->delayed, op, NULL)) {
            op->state = OPS_IDLE;
            n++;
        }
    }
    return n;
}

void obj_enqueue(struct obj_engine *e, struct obj_op *op)
{
    op->next = NULL;
    op->state = OPS_QUEUED;
    if (e->qtail)
        e->qtail->next = op;
    else
        e->qhead = op;
    e->qtail = op;
}

void obj_wake(struct obj_engine *e)
{
    if (e->multi) {
        uint64_t one = 1;
        if (write(e->evfd, &one, sizeof(one)) < 0) {
            /* The counter is full: the loop has a wake-up pending anyway. */
        }
    }
}

void obj_abort_upload(struct obj_engine *e, const char *obj_url, const char *key,
                      const char *upload_id)
{
    struct obj_op *op = obj_sys()->calloc(1, sizeof(*op));
    size_t ul = strlen(obj_url), il = strlen(upload_id);
    char *url = op ? obj_sys()->malloc(ul + 3 * il + 16) : NULL;
    if (url == NULL) {
        free(op);
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "OBJ: out of memory: multipart upload %s of '%s' left to the bucket's "
                     "lifecycle rules",
                     upload_id, key);
        return;
    }
    memcpy(url, obj_url, ul);
    size_t o = ul;
    memcpy(url + o, "?uploadId=", 10);
    o += 10;
    for (size_t i = 0; i < il; i++) {
        unsigned char c = (unsigned char)upload_id[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            url[o++] = (char)c;
        } else {
            o += (size_t)sprintf(url + o, "%%%02X", c);
        }
    }
    url[o] = '\0';
    op->kind = OP_MPU_ABORT;
    op->obj = NULL;
    op->own_url = url;
    e->orphans++;
    obj_enqueue(e, op);
    obj_wake(e);
}

void obj_req_free(struct obj_req *r)
{
    for (size_t i = 0; i < r->n_ups; i++) {
        free(r->ups[i].etags);
        free(r->ups[i].crcs);
        free(r->ups[i].complete_body);
    }
    for (size_t i = 0; i < r->n_ops; i++) {
        free(r->ops[i].bounce);
        free(r->ops[i].own_url);
    }
    free(r->ups);
    free(r->ops);
    free(r);
}

/* ---- VRAM: device copies through bounce buffers (loop thread, e->lock held) ------------------ */

#define DEVOPS_COVERS(d, f) ((d)->size >= offsetof(struct ixl_devops, f) + sizeof((d)->f))

void obj_dev_init(struct obj_engine *e)
{
    const struct ixl_host *h = e->host;
    e->dev = NULL;
    if (h->size < offsetof(struct ixl_host, dev) + sizeof(h->dev) || h->dev == NULL ||
        !DEVOPS_COVERS(h->dev, host_unpin)) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: the core has no device layer");
        return;
    }
    char why[200] = "";
    int n = h->dev->count(h->dev->ctx, why, sizeof(why));
    if (n <= 0) {
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: %s",
                 n == 0   ? "no GPU: the driver reports 0 devices"
                 : why[0] ? why
                          : "the device layer cannot say whether there is a GPU");
        return;
    }
    e->streams = obj_sys()->calloc((size_t)n, sizeof(*e->streams));
    e->stream_broken = obj_sys()->calloc((size_t)n, sizeof(*e->stream_broken));
    e->stream_pending = obj_sys()->calloc((size_t)n, sizeof(*e->stream_pending));
    if (e->streams == NULL || e->stream_broken == NULL || e->stream_pending == NULL) {
        free(e->streams);
        free(e->stream_broken);
        free(e->stream_pending);
        e->streams = NULL;
        e->stream_broken = NULL;
        e->stream_pending = NULL;
        snprintf(e->mem_why, sizeof(e->mem_why), "VRAM: out of memory");
        return;
    }
    e->n_devs = n;
    e->dev = h->dev;
}

static void bounce_free(struct obj_op *op)
{
    if (op->vram) {
        free(op->bounce);
        op->bounce = NULL;
        op->buf = NULL;
    }
}

/* Queues op's device copy: to_dev, bounce -> VRAM (after a GET); else VRAM -> bounce (before a
 * PUT or part). It counts in r->active and against max_conns until it ends. */
static void copy_queue(struct obj_engine *e, struct obj_op *op, bool to_dev)
{
    op->to_dev = to_dev;
    op->state = OPS_COPY;
    op->next = e->to_copy;
    e->to_copy = op;
    e->n_copies++;
    op->r->active++;
}

/* Enqueues op's copy and records its event; the device calls run without e->lock. IXL_OK (op
 * joins e->copies), IXL_ERR_BUSY (its GPU's stream failed earlier and still has copies in
 * flight: try later), or the error. */
static int copy_start(struct obj_engine *e, struct obj_op *op)
{
    int ord = op->ord;
    if (ord < 0 || ord >= e->n_devs)
        return IXL_ERR_INVALID_ARG;
    if (e->stream_broken[ord]) {
        if (e->stream_pending[ord] > 0)
            return IXL_ERR_BUSY;
        if (e->streams[ord])
            e->dev->stream_destroy(e->dev->ctx, e->streams[ord]);
        e->streams[ord] = NULL;
        e->stream_broken[ord] = false;
    }
    if (op->bounce == NULL) {
        op->bounce = obj_sys()->malloc(op->len ? op->len : 1);
        if (op->bounce == NULL)
            return IXL_ERR_NO_MEMORY;
        op->buf = op->bounce;
    }
    struct ixl_dev_stream *st = e->streams[ord];
    struct ixl_dev_event *ev = NULL;
    pthread_mutex_unlock(&e->lock);
    int rc = IXL_OK;
    if (st == NULL)
        rc = e->dev->stream_create(e->dev->ctx, ord, &st);
    if (rc == IXL_OK)
        rc = op->to_dev ? e->dev->copy(e->dev->ctx, st, op->dev_buf, op->bounce, op->len)
                        : e->dev->copy(e->dev->ctx, st, op->bounce, op->dev_buf, op->len);
    if (rc == IXL_OK)
        rc = e->dev->record(e->dev->ctx, st, &ev);
    pthread_mutex_lock(&e->lock);
    if (st != NULL)
        e->streams[ord] = st;
    if (rc != IXL_OK) {
        e->stream_broken[ord] = st != NULL;
        return rc;
    }
    op->ev = ev;
    e->stream_pending[ord]++;
    op->next = e->copies;
    e->copies = op;
    return IXL_OK;
}

static void op_end(struct obj_engine *e, struct obj_op *op, int status, const char *msg);

/* op's copy ended (or never started: rc the reason): its next step. */
static void copy_end(struct obj_engine *e, struct obj_op *op, int rc, const char *when)
{
    struct obj_req *r = op->r;
    e->n_copies--;
    r->active--;
    if (r->canceled || (rc == IXL_OK && !op->to_dev && r->status != IXL_OK)) {
        /* Released (release waits on r->active), or failed meanwhile: nothing more to do. */
        op->state = OPS_IDLE;
        r->pending--;
        bounce_free(op);
        if (r->canceled)
            pthread_cond_broadcast(&e->cond);
        else
            obj_req_op_ended(e, r);
        return;
    }
    if (rc != IXL_OK) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "OBJ %s '%s': the copy of %" PRIu64 " bytes %s GPU %d (0x%" PRIxPTR ") %s failed "
                 "%s (%s; the device layer logged the driver's error)",
                 op->to_dev ? "READ" : "WRITE", op->obj->key, op->len, op->to_dev ? "to" : "from",
                 op->ord, (uintptr_t)op->dev_buf,
                 op->to_dev ? "from the bounce buffer" : "into the bounce buffer", when,
                 rc == IXL_ERR_NO_MEMORY ? "out of memory for the bounce buffer"
                                         : "the GPU or its driver failed");
        op_end(e, op, rc == IXL_ERR_NO_MEMORY ? rc : IXL_ERR_BACKEND, msg);
        return;
    }
    if (op->to_dev) { /* the GET's bytes are in the VRAM: done */
        op_end(e, op, IXL_OK, "");
        return;
    }
    /* The bytes to send are in the bounce buffer: to the queue's head. */
    op->staged = true;
    op->state = OPS_QUEUED;
    op->next = e->qhead;
    e->qhead = op;
    if (e->qtail == NULL)
        e->qtail = op;
}

/* Starts the copies waiting to start and reaps those done (never blocks). */
static void copies_step(struct obj_engine *e)
{
    struct obj_op *wait = e->to_copy, *later = NULL;
    e->to_copy = NULL;
    while (wait) {
        struct obj_op *op = wait;
        wait = op->next;
        op->next = NULL;
        struct obj_req *r = op->r;
        if (r->canceled || (!op->to_dev && r->status != IXL_OK)) {
            copy_end(e, op, IXL_OK, "");
            continue;
        }
        int rc = copy_start(e, op);
        if (rc == IXL_ERR_BUSY) {
            op->next = later;
            later = op;
        } else if (rc != IXL_OK) {
            copy_end(e, op, rc, "at enqueue");
        }
    }
    /* Those that wait for a broken stream to drain go back (new arrivals stay first). */
    while (later) {
        struct obj_op *op = later;
        later = op->next;
        op->next = e->to_copy;
        e->to_copy = op;
    }
    for (struct obj_op **pp = &e->copies; *pp;) {
        struct obj_op *op = *pp;
        int rc = e->dev->query(e->dev->ctx, op->ev);
        if (rc == IXL_IN_PROGRESS) {
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        op->next = NULL;
        e->dev->event_destroy(e->dev->ctx, op->ev);
        op->ev = NULL;
        e->stream_pending[op->ord]--;
        if (rc != IXL_OK)
            e->stream_broken[op->ord] = true;
        copy_end(e, op, rc, "on the device");
    }
}

/* Stopping: waits for the copies in flight, drops those not started, frees the streams. */
static void copies_stop(struct obj_engine *e)
{
    while (e->copies) {
        struct obj_op *op = e->copies;
        e->copies = op->next;
        op->next = NULL;
        e->dev->wait(e->dev->ctx, op->ev);
        e->dev->event_destroy(e->dev->ctx, op->ev);
        op->ev = NULL;
        e->stream_pending[op->ord]--;
        op->next = e->to_copy;
        e->to_copy = op;
    }
    while (e->to_copy) {
        struct obj_op *op = e->to_copy;
        e->to_copy = op->next;
        op->next = NULL;
        op->state = OPS_IDLE;
        op->r->active--;
        op->r->pending--;
        e->n_copies--;
        bounce_free(op);
    }
    for (int i = 0; e->streams && i < e->n_devs; i++)
        if (e->streams[i])
            e->dev->stream_destroy(e->dev->ctx, e->streams[i]);
}

/* ---- callbacks (loop thread, without e->lock) ---------------------------------------------- */

static void keep_body(struct obj_op *op, const char *p, size_t n)
{
    if (op->resp == NULL) {
        op->resp = obj_sys()->malloc(OBJ_BODY_MAX);
        if (op->resp == NULL)
            return;
    }
    size_t room = OBJ_BODY_MAX - op->resp_len;
    if (n > room)
        n = room;
    memcpy(op->resp + op->resp_len, p, n);
    op->resp_len += n;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ctx)
{
    struct obj_op *op = ctx;
    size_t n = size * nmemb;
    long code = 0;
    curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &code);
    if (op->kind == OP_GET && (code == 200 || code == 206)) {
        if (n > op->len - op->pos) { /* more than asked for: never past the buffer */
            op->bad_header = true;
            return 0;
        }
        memcpy(op->buf + op->pos, p, n);
        op->pos += n;
        return n;
    }
    keep_body(op, p, n);
    return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *ctx)
{
    struct obj_op *op = ctx;
    size_t n = size * nmemb;
    const uint8_t *src = op->kind == OP_MPU_COMPLETE ? (const uint8_t *)op->body : op->buf;
    uint64_t total = op->kind == OP_MPU_COMPLETE ? op->body_len : op->len;
    if (n > total - op->pos)
        n = (size_t)(total - op->pos);
    memcpy(p, src + op->pos, n);
    op->pos += n;
    return n;
}

/* Rewinds an upload's body when curl sends it again (a redirect or a retried connection). */
static int on_seek(void *ctx, curl_off_t off, int origin)
{
    struct obj_op *op = ctx;
    uint64_t total = op->kind == OP_MPU_COMPLETE ? op->body_len : op->len;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > total)
        return CURL_SEEKFUNC_CANTSEEK;
    op->pos = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

/* libcurl calls this often while bytes move and about once a second while none do: a try
 * that moved no byte (up or down) for timeout_ms is aborted as stalled (loop thread). */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct obj_op *op = ctx;
    (void)dltotal;
    (void)ultotal;
    uint64_t moved = (uint64_t)dlnow + (uint64_t)ulnow;
    long long now = obj_now_ms();
    if (moved != op->moved) {
        op->moved = moved;
        op->moved_ms = now;
        return 0;
    }
    if (now - op->moved_ms >= op->stall_ms) {
        op->stalled = true;
        return 1; /* CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

static bool header_is(const char *p, size_t n, const char *name, const char **v, size_t *vlen)
{
    size_t l = strlen(name);
    if (n <= l || strncasecmp(p, name, l) != 0 || p[l] != ':')
        return false;
    *v = p + l + 1;
    *vlen = n - l - 1;
    return true;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ctx)
{
    struct obj_op *op = ctx;
    size_t n = size * nmemb;
    const char *v;
    size_t vl;
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) { /* a new answer (after 100 Continue, say) */
        op->have_range = op->have_crc = false;
        op->etag[0] = '\0';
        return n;
    }
    if (header_is(p, n, "content-range", &v, &vl)) {
        if (obj_content_range(v, vl, &op->cr_first, &op->cr_last, &op->cr_total) == 0)
            op->have_range = true;
        else
            op->bad_header = true;
    } else if (header_is(p, n, "x-amz-checksum-crc32c", &v, &vl) ||
               header_is(p, n, "x-amz-checksum-crc32", &v, &vl)) {
        int rc = obj_b64_crc(v, vl, &op->resp_crc);
        if (rc == 0) {
            op->have_crc = true;
            op->crc_kind = p[20] == 'c' || p[20] == 'C' ? 1 : 2;
        } else if (rc < 0) {
            op->bad_header = true;
        }
    } else if (header_is(p, n, "etag", &v, &vl)) {
        if (obj_etag(v, vl, op->etag, sizeof(op->etag)) != 0)
            op->etag[0] = '\0';
    }
    return n;
}

/* ---- starting an op ------------------------------------------------------------------------- */

static void enc_append(char *out, size_t *o, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~')
            out[(*o)++] = (char)c;
        else
            *o += (size_t)sprintf(out + *o, "%%%02X", c);
    }
    out[*o] = '\0';
}

static struct curl_slist *add(struct curl_slist *l, const char *h, bool *ok)
{
    struct curl_slist *n = curl_slist_append(l, h);
    if (n == NULL)
        *ok = false;
    return n ? n : l;
}

static uint32_t crc_of(const struct obj_op *op)
{
    return obj_crc32c(0, op->buf, op->len);
}

static void crc_b64(uint32_t crc, char *out, size_t cap)
{
    uint8_t be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
    obj_b64_encode(be, 4, out, cap);
}

/* Sets the easy handle up for op: 0, or -1 (out of memory). Loop thread, without the lock. */
static int setup(struct obj_engine *e, struct obj_op *op, CURL *c)
{
    if (op->vram && op->bounce == NULL) { /* a GET of VRAM lands here first */
        op->bounce = obj_sys()->malloc(op->len ? op->len : 1);
        if (op->bounce == NULL)
            return -1;
        op->buf = op->bounce;
    }
    const char *base = op->own_url ? op->own_url : op->obj->url;
    size_t bl = strlen(base);
    char *url = obj_sys()->malloc(bl + 3 * sizeof(((struct obj_upload *)0)->upload_id) + 64);
    if (url == NULL)
        return -1;
    memcpy(url, base, bl + 1);
    size_t o = bl;
    switch (op->kind) {
    case OP_MPU_CREATE:
        memcpy(url + o, "?uploads=", 10); /* "uploads=": the canonical form SigV4 signs */
        break;
    case OP_MPU_PART:
        /* Parameters in SigV4's canonical (sorted) order: curl signs them as written. */
        o += (size_t)sprintf(url + o, "?partNumber=%u&uploadId=", op->part);
        enc_append(url, &o, op->up->upload_id);
        break;
    case OP_MPU_COMPLETE:
        memcpy(url + o, "?uploadId=", 11);
        o += 10;
        enc_append(url, &o, op->up->upload_id);
        break;
    default:
        break;
    }
    bool ok = true;
    struct curl_slist *h = NULL;
    h = add(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD", &ok);
    if (e->session_token[0]) {
        char t[2100];
        snprintf(t, sizeof(t), "x-amz-security-token: %s", e->session_token);
        h = add(h, t, &ok);
    }
    char line[128];
    switch (op->kind) {
    case OP_GET:
        snprintf(line, sizeof(line), "Range: bytes=%" PRIu64 "-%" PRIu64, op->off,
                 op->off + op->len - 1);
        h = add(h, line, &ok);
        if (e->resp_checksum)
            h = add(h, "x-amz-checksum-mode: ENABLED", &ok);
        break;
    case OP_PUT:
    case OP_MPU_PART:
        if (e->req_checksum) {
            uint32_t crc = crc_of(op);
            op->put_crc = crc;
            if (op->kind == OP_MPU_PART)
                op->up->crcs[op->part - 1] = crc;
            char b[16];
            crc_b64(crc, b, sizeof(b));
            snprintf(line, sizeof(line), "x-amz-checksum-crc32c: %s", b);
            h = add(h, line, &ok);
        }
        break;
    case OP_MPU_CREATE:
        if (e->req_checksum)
            h = add(h, "x-amz-checksum-algorithm: CRC32C", &ok);
        break;
    case OP_MPU_COMPLETE:
        h = add(h, "Content-Type: application/xml", &ok);
        break;
    default:
        break;
    }
    if (!ok) {
        curl_slist_free_all(h);
        free(url);
        return -1;
    }
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    free(url); /* curl copied it */
    curl_easy_setopt(c, CURLOPT_PRIVATE, op);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, op);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
    /* A stall mid-answer: no byte for timeout_ms (on_progress). CURLOPT_LOW_SPEED_TIME alone
     * averages over seconds: a burst of bytes, then silence, held a 300 ms timeout for 7 s. */
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, op);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    /* A stall: less than 1 byte/s for timeout_ms (curl counts whole seconds). */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (e->timeout_ms + 999) / 1000);
    /* libcurl allocates these buffers for each transfer (and frees them at its end): sized to
     * the body, between 16 KiB and 512 KiB, a small GET or PUT does not get (and fault in) a
     * fresh 512 KiB mapping each time. The receive buffer has 4 KiB more, for the answer's
     * headers: a small GET's whole answer then comes in one recv and one write callback (a
     * 64 KiB one took two of each). */
    long bsz = op->len < (16u << 10)    ? 16L << 10
               : op->len > (512u << 10) ? 512L << 10
                                        : (long)op->len;
    long rsz = bsz + (4L << 10) > (512L << 10) ? 512L << 10 : bsz + (4L << 10);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, rsz);
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, bsz);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    /* No 100-continue wait before an upload's body. Not by an "Expect:" header: libcurl 7.88's
     * SigV4 signs that removed header (SignedHeaders=expect;..., curl issue 11664), and S3
     * refuses a signed header the request lacks; the test server does too. */
    curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
    /* HTTP/1.1: one request per connection at a time, so max_conns bounds both (S3 speaks
     * HTTP/1.1; an HTTP/2 endpoint would multiplex past the pool's count). */
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (e->ca_bundle[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, e->ca_bundle);
    if (e->access_key[0]) {
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, e->sigv4);
        curl_easy_setopt(c, CURLOPT_USERNAME, e->access_key);
        curl_easy_setopt(c, CURLOPT_PASSWORD, e->secret_key);
    }
    switch (op->kind) {
    case OP_HEAD:
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        break;
    case OP_PUT:
    case OP_MPU_PART:
    case OP_MPU_COMPLETE:
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, op);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, op);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)(op->kind == OP_MPU_COMPLETE ? op->body_len : op->len));
        if (op->kind == OP_MPU_COMPLETE)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
        break;
    case OP_MPU_CREATE:
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
        break;
    case OP_MPU_ABORT:
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
        break;
    default:
        break;
    }
    op->hdrs = h;
    op->easy = c;
    op->moved = 0;
    op->moved_ms = obj_now_ms();
    op->stall_ms = e->timeout_ms;
    op->stalled = false;
    op->pos = 0;
    op->http = 0;
    op->bad_header = op->have_range = op->have_crc = false;
    op->etag[0] = '\0';
    op->resp_len = 0;
    op->content_length = 0;
    return 0;
}

/* ---- finishing an op (e->lock held) -----------------------------------------------------------
 */

static const char *kind_name(enum obj_op_kind k)
{
    switch (k) {
    case OP_GET:
        return "GET";
    case OP_PUT:
        return "PUT";
    case OP_HEAD:
        return "HEAD";
    case OP_MPU_CREATE:
        return "CreateMultipartUpload";
    case OP_MPU_PART:
        return "UploadPart";
    case OP_MPU_COMPLETE:
        return "CompleteMultipartUpload";
    case OP_MPU_ABORT:
        return "AbortMultipartUpload";
    }
    return "?";
}

static bool retryable_curl(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT ||
           rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_PARTIAL_FILE;
}

static bool retryable_http(long http, const char *code)
{
    return http == 500 || http == 502 || http == 503 || http == 504 ||
           strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0 ||
           strcmp(code, "InternalError") == 0;
}

/* The status and a message saying what to do for an HTTP error answer. */
static int http_error(struct obj_engine *e, const struct obj_op *op, const char *code,
                      const char *message, char *out, size_t cap)
{
    const char *key = op->obj ? op->obj->key : "";
    const char *bucket = op->obj ? op->obj->bucket : "";
    const char *what = kind_name(op->kind);
    char server[512];
    snprintf(server, sizeof(server), "%ld %s%s%s", op->http, code[0] ? code : "(no error code)",
             message[0] ? ": " : "", message);
    if (strcmp(code, "NoSuchBucket") == 0) {
        snprintf(out, cap,
                 "OBJ %s '%s': bucket '%s' does not exist at %s (%s): create it, or name an "
                 "existing one (option bucket, AWS_DEFAULT_BUCKET, or \"s3://BUCKET/KEY\")",
                 what, key, bucket, e->endpoint, server);
        return IXL_ERR_NOT_FOUND;
    }
    if (strcmp(code, "NoSuchKey") == 0 || (op->http == 404 && op->kind == OP_GET)) {
        snprintf(out, cap, "OBJ %s: no object '%s' in bucket '%s' (%s): write it first", what, key,
                 bucket, server);
        return IXL_ERR_NOT_FOUND;
    }
    if (strcmp(code, "NoSuchUpload") == 0) {
        snprintf(out, cap,
                 "OBJ %s '%s': the multipart upload is gone (%s): it was aborted or expired; "
                 "write the object again",
                 what, key, server);
        return IXL_ERR_NOT_FOUND;
    }
    if (op->http == 403) {
        snprintf(out, cap,
                 "OBJ %s '%s' in bucket '%s': access denied (%s): check access_key and "
                 "secret_key (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), session_token, region "
                 "(%s), and the bucket's policy",
                 what, key, bucket, server, e->region);
        return IXL_ERR_NOT_ALLOWED;
    }
    if (op->http == 416 || strcmp(code, "InvalidRange") == 0) {
        snprintf(out, cap,
                 "OBJ GET '%s': bytes %" PRIu64 "-%" PRIu64
                 " lie past the end of the object (%s): read within its size (query_mem "
                 "gives it)",
                 key, op->off, op->off + op->len - 1, server);
        return IXL_ERR_INVALID_ARG;
    }
    if (strcmp(code, "EntityTooSmall") == 0) {
        snprintf(out, cap,
                 "OBJ %s '%s': a part is smaller than the server accepts (%s): raise part_size "
                 "(S3: at least 5 MiB)",
                 what, key, server);
        return IXL_ERR_INVALID_ARG;
    }
    if (retryable_http(op->http, code)) {
        snprintf(out, cap,
                 "OBJ %s '%s': the server is throttling or failing (%s) after %d tries: lower "
                 "the request rate (max_conns) or raise max_retries",
                 what, key, server, op->tries + 1);
        return IXL_ERR_BACKEND;
    }
    snprintf(out, cap, "OBJ %s '%s' in bucket '%s' failed: %s", what, key, bucket, server);
    return op->http == 400 ? IXL_ERR_INVALID_ARG : IXL_ERR_BACKEND;
}

static void schedule_retry(struct obj_engine *e, struct obj_op *op)
{
    /* Exponential backoff with full jitter: base * 2^tries, at most 2 s. */
    long long cap = e->retry_base_ms << (op->tries < 10 ? op->tries : 10);
    if (cap > 2000)
        cap = 2000;
    e->rng = e->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    long long d = cap / 2 + (long long)((e->rng >> 33) % (uint64_t)(cap / 2 + 1));
    op->tries++;
    op->due_ms = obj_now_ms() + d;
    op->state = OPS_DELAYED;
    op->next = e->delayed;
    e->delayed = op;
}

/* Builds CompleteMultipartUpload's body once every part answered: 0 or -1 (no memory). */
static int complete_body(struct obj_engine *e, struct obj_upload *up)
{
    size_t per = 160 + OBJ_ETAG_MAX;
    size_t cap = 128 + (size_t)up->n_parts * per;
    char *b = obj_sys()->malloc(cap);
    if (b == NULL)
        return -1;
    size_t o = (size_t)snprintf(
        b, cap, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (uint32_t i = 0; i < up->n_parts; i++) {
        char crc[16] = "";
        if (e->req_checksum)
            crc_b64(up->crcs[i], crc, sizeof(crc));
        o += (size_t)snprintf(b + o, cap - o, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag>",
                              i + 1, up->etags[i]);
        if (crc[0])
            o += (size_t)snprintf(b + o, cap - o, "<ChecksumCRC32C>%s</ChecksumCRC32C>", crc);
        o += (size_t)snprintf(b + o, cap - o, "</Part>");
    }
    o += (size_t)snprintf(b + o, cap - o, "</CompleteMultipartUpload>");
    free(up->complete_body);
    up->complete_body = b;
    up->complete->body = b;
    up->complete->body_len = o;
    return 0;
}

static uint32_t crc32_of(const uint8_t *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* The answer of a successful (2xx) op: IXL_OK, or an error into msg. */
static int check_ok(struct obj_engine *e, struct obj_op *op, char *msg, size_t cap)
{
    const char *key = op->obj ? op->obj->key : "";
    switch (op->kind) {
    case OP_GET: {
        uint64_t last = op->off + op->len - 1;
        if (op->have_range && (op->cr_first != op->off || op->cr_last > last)) {
            snprintf(msg, cap,
                     "OBJ GET '%s': the server sent bytes %" PRIu64 "-%" PRIu64
                     " for a request of bytes %" PRIu64 "-%" PRIu64 " (malformed answer)",
                     key, op->cr_first, op->cr_last, op->off, last);
            return IXL_ERR_PROTOCOL;
        }
        if (op->pos < op->len) {
            if (op->have_range && op->cr_total != UINT64_MAX && op->cr_total < op->off + op->len) {
                snprintf(msg, cap,
                         "OBJ GET '%s': the object has %" PRIu64 " bytes; bytes %" PRIu64
                         "-%" PRIu64 " lie past its end: read within its size (query_mem "
                         "gives it)",
                         key, op->cr_total, op->off, last);
                return IXL_ERR_INVALID_ARG;
            }
            snprintf(msg, cap,
                     "OBJ GET '%s': the answer ended after %" PRIu64 " of %" PRIu64
                     " bytes (truncated body)",
                     key, op->pos, op->len);
            return IXL_ERR_IO;
        }
        if (op->http == 200 && op->off != 0) {
            snprintf(msg, cap, "OBJ GET '%s': the server ignored the Range header", key);
            return IXL_ERR_PROTOCOL;
        }
        /* A checksum the server gives covers the whole object: verify it when this answer is
         * the whole object. */
        bool whole =
            op->http == 200 || (op->have_range && op->cr_first == 0 && op->cr_total != UINT64_MAX &&
                                op->cr_last + 1 == op->cr_total);
        if (op->have_crc && whole) {
            uint32_t got =
                op->crc_kind == 1 ? obj_crc32c(0, op->buf, op->len) : crc32_of(op->buf, op->len);
            if (got != op->resp_crc) {
                snprintf(msg, cap,
                         "OBJ GET '%s': checksum mismatch: the server's %s is %08x, the %" PRIu64
                         " bytes received have %08x (corrupted in transit or at rest)",
                         key, op->crc_kind == 1 ? "CRC32C" : "CRC32", op->resp_crc, op->len, got);
                return IXL_ERR_IO;
            }
        }
        return IXL_OK;
    }
    case OP_PUT:
    case OP_MPU_PART:
        if (op->have_crc && e->req_checksum && op->crc_kind == 1) {
            /* What the header declared (computed in setup, before the first byte went): not a
             * second pass over the body, which for a 64 MiB PUT held the loop 5-8 ms. */
            uint32_t mine = op->put_crc;
            if (mine != op->resp_crc) {
                snprintf(msg, cap,
                         "OBJ %s '%s': checksum mismatch: sent CRC32C %08x, the server stored "
                         "%08x",
                         kind_name(op->kind), key, mine, op->resp_crc);
                return IXL_ERR_IO;
            }
        }
        if (op->kind == OP_MPU_PART) {
            if (op->etag[0] == '\0') {
                snprintf(msg, cap,
                         "OBJ UploadPart %u of '%s': the answer has no valid ETag (malformed "
                         "answer)",
                         op->part, key);
                return IXL_ERR_PROTOCOL;
            }
            memcpy(op->up->etags[op->part - 1], op->etag, sizeof(op->etag));
        }
        return IXL_OK;
    case OP_MPU_CREATE: {
        int rc = op->resp ? obj_xml_text(op->resp, op->resp_len, "UploadId", op->up->upload_id,
                                         sizeof(op->up->upload_id))
                          : 0;
        if (rc != 1 || op->up->upload_id[0] == '\0') {
            snprintf(msg, cap,
                     "OBJ CreateMultipartUpload '%s': the answer has no valid UploadId "
                     "(malformed answer)",
                     key);
            return IXL_ERR_PROTOCOL;
        }
        op->up->started = true;
        return IXL_OK;
    }
    case OP_MPU_COMPLETE:
        /* S3 may answer 200 and put the error in the body. */
        if (op->resp && obj_xml_is_error(op->resp, op->resp_len)) {
            char code[128] = "", m[256] = "";
            obj_xml_text(op->resp, op->resp_len, "Code", code, sizeof(code));
            obj_xml_text(op->resp, op->resp_len, "Message", m, sizeof(m));
            op->http = 500;
            return http_error(e, op, code, m, msg, cap);
        }
        /* Done only with a CompleteMultipartUploadResult naming the object's ETag: an answer
         * cut short or garbled says nothing about the object (the upload is then aborted). */
        char etag[OBJ_ETAG_MAX];
        if (op->resp == NULL ||
            obj_xml_text(op->resp, op->resp_len, "ETag", etag, sizeof(etag)) != 1) {
            snprintf(msg, cap,
                     "OBJ CompleteMultipartUpload '%s': the answer is no "
                     "CompleteMultipartUploadResult with an ETag (malformed answer)",
                     key);
            return IXL_ERR_PROTOCOL;
        }
        op->up->finished = true;
        return IXL_OK;
    default:
        return IXL_OK;
    }
}

/* Takes op's easy handle out of the multi; keeps it for reuse. Loop thread. */
static void detach(struct obj_engine *e, struct obj_op *op)
{
    CURL *c = op->easy;
    curl_multi_remove_handle(e->multi, c);
    curl_slist_free_all(op->hdrs);
    op->hdrs = NULL;
    op->easy = NULL;
    if (e->n_easy_free < e->max_conns)
        e->easy_free[e->n_easy_free++] = c;
    else
        curl_easy_cleanup(c);
    e->n_active--;
}

/* Frees an engine-owned op (abort). */
static void orphan_done(struct obj_engine *e, struct obj_op *op)
{
    free(op->own_url);
    free(op->resp);
    free(op);
    e->orphans--;
    pthread_cond_broadcast(&e->cond);
}

/* An op's transfer ended with res (e->lock held, op detached). */
/* A CreateMultipartUpload of a released request ended: an upload it created is aborted. */
static void zombie_create_end(struct obj_engine *e, struct obj_op *op, CURLcode res)
{
    struct obj_req *r = op->r;
    char id[sizeof(((struct obj_upload *)0)->upload_id)];
    if (res == CURLE_OK && op->http >= 200 && op->http < 300 && op->resp &&
        obj_xml_text(op->resp, op->resp_len, "UploadId", id, sizeof(id)) == 1 && id[0]) {
        obj_abort_upload(e, op->own_url, op->own_url, id);
    } else if (res != CURLE_OK) {
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "OBJ: CreateMultipartUpload of %s, released in flight, got no answer (%s): "
                     "an upload the server may have created is left to the bucket's lifecycle "
                     "rule for incomplete uploads",
                     op->own_url, curl_easy_strerror(res));
    }
    free(op->resp);
    op->resp = NULL;
    op->resp_len = 0;
    op->state = OPS_DONE;
    if (r->active == 0)
        obj_req_free(r);
    pthread_cond_broadcast(&e->cond);
}

static void finish(struct obj_engine *e, struct obj_op *op, CURLcode res, const char *errbuf)
{
    struct obj_req *r = op->r;
    if (r && r->zombie) {
        zombie_create_end(e, op, res);
        return;
    }
    bool canceled = r && r->canceled;
    char stall[96];
    if (res == CURLE_ABORTED_BY_CALLBACK && op->stalled) {
        res = CURLE_OPERATION_TIMEDOUT;
        snprintf(stall, sizeof(stall), "no byte moved for %ld ms", op->stall_ms);
        errbuf = stall;
    }
    char msg[768] = "";
    int status = IXL_OK;
    char code[128] = "", message[256] = "";
    if (res == CURLE_OK && op->http >= 300 && op->resp && op->resp_len > 0) {
        obj_xml_text(op->resp, op->resp_len, "Code", code, sizeof(code));
        obj_xml_text(op->resp, op->resp_len, "Message", message, sizeof(message));
    }
    bool retry = false;
    if (res != CURLE_OK) {
        if (op->bad_header && res == CURLE_WRITE_ERROR) {
            snprintf(msg, sizeof(msg),
                     "OBJ GET '%s': the server sent more than the %" PRIu64
                     " bytes asked for (malformed answer)",
                     op->obj ? op->obj->key : "", op->len);
            status = IXL_ERR_PROTOCOL;
        } else {
            retry = retryable_curl(res);
            bool conn = res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST;
            snprintf(msg, sizeof(msg), "OBJ %s '%s': %s (%s)%s after %d tr%s: %s",
                     kind_name(op->kind), op->obj ? op->obj->key : "",
                     conn ? "cannot reach the server" : "transfer failed",
                     errbuf[0] ? errbuf : curl_easy_strerror(res),
                     res == CURLE_OPERATION_TIMEDOUT ? " within timeout_ms" : "", op->tries + 1,
                     op->tries ? "ies" : "y",
                     conn ? "check endpoint_override (AWS_ENDPOINT_URL) and that the server runs"
                     : res == CURLE_OPERATION_TIMEDOUT
                         ? "the server stalled; check it, or raise timeout_ms"
                         : "the connection broke; check the server");
            status = conn                              ? IXL_ERR_UNREACHABLE
                     : res == CURLE_OPERATION_TIMEDOUT ? IXL_ERR_UNREACHABLE
                                                       : IXL_ERR_IO;
            if (res == CURLE_PEER_FAILED_VERIFICATION || res == CURLE_SSL_CONNECT_ERROR ||
                res == CURLE_SSL_CACERT_BADFILE) {
                snprintf(msg, sizeof(msg),
                         "OBJ %s '%s': TLS failed (%s): check ca_bundle and "
                         "the endpoint's certificate",
                         kind_name(op->kind), op->obj ? op->obj->key : "",
                         errbuf[0] ? errbuf : curl_easy_strerror(res));
                status = IXL_ERR_AUTH;
            }
        }
    } else if (op->bad_header) {
        snprintf(msg, sizeof(msg), "OBJ %s '%s': a malformed Content-Range or checksum header",
                 kind_name(op->kind), op->obj ? op->obj->key : "");
        status = IXL_ERR_PROTOCOL;
    } else if (op->kind == OP_HEAD) {
        if (op->http == 200 || op->http == 404) {
            status = IXL_OK;
        } else {
            retry = retryable_http(op->http, "");
            status = http_error(e, op, "", "", msg, sizeof(msg));
        }
    } else if (op->kind == OP_MPU_ABORT &&
               (op->http == 404 || (op->http >= 200 && op->http < 300))) {
        status = IXL_OK;
    } else if (op->http >= 200 && op->http < 300) {
        status = check_ok(e, op, msg, sizeof(msg));
        if (status == IXL_ERR_IO && op->kind == OP_GET && strstr(msg, "truncated"))
            retry = true;
    } else {
        retry = retryable_http(op->http, code);
        status = http_error(e, op, code, message, msg, sizeof(msg));
    }
    free(op->resp); /* parsed above (an UploadId was copied out) */
    op->resp = NULL;
    op->resp_len = 0;
    if (status != IXL_OK && retry && !canceled && op->tries < (int)e->max_retries &&
        !(r && r->status != IXL_OK) && !e->stop) {
        schedule_retry(e, op);
        return;
    }
    if (op->kind == OP_MPU_ABORT && op->r == NULL) {
        if (status != IXL_OK)
            e->host->log(e->host->ctx, IXL_LOG_WARN, "OBJ: %s", msg);
        orphan_done(e, op);
        return;
    }
    if (op->w) {
        struct obj_waiter *w = op->w;
        op->state = OPS_DONE;
        if (status != IXL_OK && w->status == IXL_OK) {
            w->status = status;
            snprintf(w->msg, sizeof(w->msg), "%s", msg);
        }
        w->left--;
        pthread_cond_broadcast(&e->cond);
        return;
    }
    if (status == IXL_OK && !canceled && r->status == IXL_OK && op->vram && op->kind == OP_GET &&
        op->len > 0) {
        copy_queue(e, op, true); /* the bytes are in the bounce buffer: now to the VRAM */
        return;
    }
    op_end(e, op, status, msg);
}

/* op ended with status (e->lock held): its request's bookkeeping and next steps. */
static void op_end(struct obj_engine *e, struct obj_op *op, int status, const char *msg)
{
    struct obj_req *r = op->r;
    bool canceled = r->canceled;
    op->state = OPS_DONE;
    r->pending--;
    bounce_free(op);
    if (status != IXL_OK) {
        if (!canceled)
            obj_req_fail(r, status, "%s", msg);
    } else if (!canceled && r->status == IXL_OK) {
        if (op->kind == OP_GET || op->kind == OP_PUT || op->kind == OP_MPU_PART)
            r->bytes += op->len;
        struct obj_upload *up = op->up;
        if (op->kind == OP_MPU_CREATE) {
            for (uint32_t i = 0; i < up->n_parts; i++) {
                up->parts[i].tries = 0;
                obj_enqueue(e, &up->parts[i]);
                r->pending++;
            }
            up->parts_left = up->n_parts;
        } else if (op->kind == OP_MPU_PART && --up->parts_left == 0) {
            if (complete_body(e, up) != 0) {
                obj_req_fail(r, IXL_ERR_NO_MEMORY, "OBJ: out of memory");
            } else {
                up->complete->tries = 0;
                obj_enqueue(e, up->complete);
                r->pending++;
            }
        }
    }
    obj_req_op_ended(e, r);
}

/* ---- the loop ---------------------------------------------------------------------------------
 */

/* libcurl's socket and timer callbacks (loop thread, inside curl_multi_socket_action or
 * curl_multi_add/remove_handle): the loop waits in epoll for what libcurl asks, and calls it
 * back with the socket that is ready, so libcurl looks at that transfer alone (curl_multi_perform
 * polled every running transfer's socket on each call). */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ctx, void *sp)
{
    struct obj_engine *e = ctx;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, s, NULL);
        return 0; /* libcurl forgets the socket's assignment itself */
    }
    struct epoll_event ev = {.data.fd = s};
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    /* sp: set (curl_multi_assign) once the socket is in the set. */
    int op = sp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(e->epfd, op, s, &ev) != 0)
        epoll_ctl(e->epfd, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev);
    if (sp == NULL)
        curl_multi_assign(e->multi, s, e);
    return 0;
}

static int on_timer(CURLM *m, long ms, void *ctx)
{
    struct obj_engine *e = ctx;
    (void)m;
    e->curl_due_ms = ms < 0 ? -1 : obj_now_ms() + ms;
    return 0;
}

static void *loop_main(void *arg)
{
    struct obj_engine *e = arg;
    CURLM *m = e->multi;
    struct obj_op **active = obj_sys()->calloc(e->max_conns, sizeof(*active));
    char(*errbufs)[CURL_ERROR_SIZE] = obj_sys()->calloc(e->max_conns, CURL_ERROR_SIZE);
    long long stop_by = 0;
    enum { NEV = 64 };
    struct epoll_event evs[NEV];
    int n_evs = 0;
    pthread_mutex_lock(&e->lock);
    while (active && errbufs) {
        if (e->stop) {
            if (stop_by == 0)
                stop_by = obj_now_ms() + e->timeout_ms;
            if ((e->orphans == 0 && e->n_active == 0 && e->n_copies == 0) || obj_now_ms() > stop_by)
                break;
        }
        /* Cancels: take canceled requests' easy handles out of the multi, then say so. */
        if (e->cancel_pending) {
            for (uint32_t i = 0; i < e->max_conns; i++) {
                struct obj_op *op = active[i];
                /* A CreateMultipartUpload stays: its answer names an upload to abort. */
                if (op && op->r && op->r->canceled && op->kind != OP_MPU_CREATE) {
                    detach(e, op);
                    op->state = OPS_IDLE;
                    op->r->pending--;
                    op->r->active--;
                    active[i] = NULL;
                }
            }
            e->cancel_pending = false;
            pthread_cond_broadcast(&e->cond);
        }
        if (e->dev && (e->to_copy || e->copies))
            copies_step(e);
        /* Retries that are due go back to the queue's head. */
        long long now = obj_now_ms(), next_due = now + 1000;
        for (struct obj_op **pp = &e->delayed; *pp;) {
            struct obj_op *op = *pp;
            if (op->due_ms <= now) {
                *pp = op->next;
                op->next = e->qhead;
                op->state = OPS_QUEUED;
                e->qhead = op;
                if (e->qtail == NULL)
                    e->qtail = op;
            } else {
                if (op->due_ms < next_due)
                    next_due = op->due_ms;
                pp = &op->next;
            }
        }
        /* Start what fits. */
        while (e->qhead && e->n_active + e->n_copies < e->max_conns) {
            struct obj_op *op = e->qhead;
            e->qhead = op->next;
            if (e->qhead == NULL)
                e->qtail = NULL;
            op->next = NULL;
            if (op->vram && !op->staged && op->len > 0 &&
                (op->kind == OP_PUT || op->kind == OP_MPU_PART)) {
                copy_queue(e, op, false); /* VRAM -> bounce buffer first */
                continue;
            }
            uint32_t slot = 0;
            while (active[slot])
                slot++;
            CURL *c = e->n_easy_free ? e->easy_free[--e->n_easy_free] : curl_easy_init();
            op->state = OPS_ACTIVE;
            e->n_active++;
            if (op->r)
                op->r->active++;
            active[slot] = op;
            pthread_mutex_unlock(&e->lock);
            int rc = c ? setup(e, op, c) : -1;
            if (rc == 0) {
                errbufs[slot][0] = '\0';
                curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbufs[slot]);
                if (curl_multi_add_handle(m, c) != CURLM_OK)
                    rc = -1;
            }
            pthread_mutex_lock(&e->lock);
            if (rc != 0) {
                if (op->hdrs)
                    curl_slist_free_all(op->hdrs);
                op->hdrs = NULL;
                op->easy = NULL;
                if (c)
                    curl_easy_cleanup(c);
                active[slot] = NULL;
                e->n_active--;
                if (op->r)
                    op->r->active--;
                /* Out of memory: fail the op as a transfer error. */
                op->easy = NULL;
                if (op->r && op->r->zombie) { /* a released create: nothing was sent */
                    op->state = OPS_DONE;
                    if (op->r->active == 0)
                        obj_req_free(op->r);
                    pthread_cond_broadcast(&e->cond);
                } else if (op->r) {
                    op->state = OPS_DONE;
                    op->r->pending--;
                    obj_req_fail(op->r, IXL_ERR_NO_MEMORY, "OBJ: out of memory starting a %s",
                                 kind_name(op->kind));
                    obj_req_op_ended(e, op->r);
                } else if (op->w) {
                    op->w->status = IXL_ERR_NO_MEMORY;
                    snprintf(op->w->msg, sizeof(op->w->msg), "OBJ: out of memory");
                    op->w->left--;
                    pthread_cond_broadcast(&e->cond);
                } else {
                    orphan_done(e, op);
                }
            }
        }
        pthread_mutex_unlock(&e->lock);

        int running = 0;
        for (int i = 0; i < n_evs; i++) {
            if (evs[i].data.fd == e->evfd) {
                uint64_t v;
                if (read(e->evfd, &v, sizeof(v)) < 0) {
                    /* nothing to read: another read took it */
                }
                continue;
            }
            int f = ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ? CURL_CSELECT_IN : 0) |
                    ((evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) ? CURL_CSELECT_OUT : 0) |
                    ((evs[i].events & EPOLLERR) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(m, evs[i].data.fd, f, &running);
        }
        n_evs = 0;
        if (e->curl_due_ms >= 0 && obj_now_ms() >= e->curl_due_ms) {
            e->curl_due_ms = -1;
            curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *c = msg->easy_handle;
            CURLcode res = msg->data.result;
            struct obj_op *op = NULL;
            curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&op);
            uint32_t slot = 0;
            while (slot < e->max_conns && active[slot] != op)
                slot++;
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &op->http);
            if (op->kind == OP_HEAD) {
                curl_off_t cl = -1;
                curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
                op->content_length = cl > 0 ? (uint64_t)cl : 0;
            }
            char errbuf[CURL_ERROR_SIZE] = "";
            if (slot < e->max_conns)
                memcpy(errbuf, errbufs[slot], sizeof(errbuf));
            pthread_mutex_lock(&e->lock);
            detach(e, op);
            if (slot < e->max_conns)
                active[slot] = NULL;
            if (op->r)
                op->r->active--;
            finish(e, op, res, errbuf);
            if (e->cancel_pending)
                pthread_cond_broadcast(&e->cond);
            pthread_mutex_unlock(&e->lock);
        }
        pthread_mutex_lock(&e->lock);
        /* Copies waiting to start: at once, unless they wait for a stream to drain. */
        bool work = e->cancel_pending || (e->to_copy && !e->copies) ||
                    (e->qhead && e->n_active + e->n_copies < e->max_conns);
        if (e->copies) /* device events have no descriptor to poll: look again soon */
            next_due = obj_now_ms() + 1;
        long long wait = next_due - obj_now_ms();
        for (struct obj_op *op = e->delayed; op; op = op->next)
            if (op->due_ms - obj_now_ms() < wait)
                wait = op->due_ms - obj_now_ms();
        if (e->stop)
            wait = wait > 50 ? 50 : wait;
        pthread_mutex_unlock(&e->lock);
        if (e->curl_due_ms >= 0 && e->curl_due_ms - obj_now_ms() < wait)
            wait = e->curl_due_ms - obj_now_ms();
        if (work)
            wait = 0;
        n_evs = epoll_wait(e->epfd, evs, NEV, (int)(wait < 0 ? 0 : wait > 1000 ? 1000 : wait));
        if (n_evs < 0)
            n_evs = 0;
        pthread_mutex_lock(&e->lock);
    }
    /* Stopping: whatever is still in the multi goes. */
    for (uint32_t i = 0; active && i < e->max_conns; i++) {
        struct obj_op *op = active[i];
        if (op == NULL)
            continue;
        detach(e, op);
        if (op->r) {
            op->r->active--;
            op->r->pending--;
            if (op->r->zombie && op->r->active == 0)
                obj_req_free(op->r);
        } else if (!op->w) {
            orphan_done(e, op);
        }
    }
    if (e->dev)
        copies_stop(e);
    while (e->qhead) { /* aborts never started */
        struct obj_op *op = e->qhead;
        e->qhead = op->next;
        if (op->r == NULL && op->w == NULL)
            orphan_done(e, op);
    }
    pthread_mutex_unlock(&e->lock);
    free(active);
    free(errbufs);
    return NULL;
}

int obj_loop_start(struct obj_engine *e, char *why, size_t cap)
{
    e->curl_due_ms = -1;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->epfd < 0 || e->evfd < 0) {
        snprintf(why, cap, "cannot make the event loop's epoll set: %s", strerror(errno));
        goto free_fds;
    }
    struct epoll_event wev = {.events = EPOLLIN, .data.fd = e->evfd};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &wev) != 0) {
        snprintf(why, cap, "cannot make the event loop's epoll set: %s", strerror(errno));
        goto free_fds;
    }
    e->easy_free = obj_sys()->calloc(e->max_conns, sizeof(void *));
    e->multi = curl_multi_init();
    if (e->easy_free == NULL || e->multi == NULL) {
        snprintf(why, cap, "out of memory");
        goto free_multi;
    }
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)e->max_conns);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)e->max_conns);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    int rc = obj_sys()->pthread_create(&e->thread, NULL, loop_main, e);
    if (rc != 0) {
        snprintf(why, cap, "cannot start the event loop thread: %s", strerror(rc));
        goto free_multi;
    }
    e->thread_started = true;
    return IXL_OK;
free_multi:
    if (e->multi)
        curl_multi_cleanup(e->multi);
    e->multi = NULL;
    free(e->easy_free);
    e->easy_free = NULL;
free_fds:
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->evfd >= 0)
        close(e->evfd);
    e->epfd = e->evfd = -1;
    return IXL_ERR_SYSTEM;
}

void obj_loop_stop(struct obj_engine *e)
{
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = true;
        pthread_mutex_unlock(&e->lock);
        obj_wake(e);
        pthread_join(e->thread, NULL);
        e->thread_started = false;
    }
    for (uint32_t i = 0; i < e->n_easy_free; i++)
        curl_easy_cleanup(e->easy_free[i]);
    e->n_easy_free = 0;
    free(e->easy_free);
    e->easy_free = NULL;
    if (e->multi)
        curl_multi_cleanup(e->multi);
    e->multi = NULL;
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->evfd >= 0)
        close(e->evfd);
    e->epfd = e->evfd = -1;
}

/*
 * OBJ: the object-store backend (DRAM or VRAM <-> OBJ over the S3 protocol, libcurl). See
 * README.md for the contract: options, descriptors, errors.
 *
 * obj_engine.c: options, registration, query_mem, requests (prep/post/check/release).
 * obj_loop.c:   the engine's one event-loop thread driving a curl multi handle: every HTTP
 *               request of every transfer (ranged GET, PUT, multipart steps, HEAD) is an obj_op
 *               that the loop starts when a connection slot is free (max_conns), retries with
 *               backoff, and finishes.
 * obj_parse.c:  the bounded parsers of what the server sends (fuzzed).
 *
 * VRAM (GPU memory, through the core's device layer, host->dev): an op of a VRAM descriptor
 * moves its bytes through a host bounce buffer of its own (op->bounce, op->len bytes, held from
 * its start to its end). A PUT or part first copies device -> bounce (the op waits on e->to_copy,
 * then e->copies, then goes back to the queue's head, staged); a GET lands in the bounce buffer
 * and then copies bounce -> device before the op ends. The loop thread makes every device call
 * (one stream per GPU, an event per copy, polled without blocking). Ops copying count against
 * max_conns with those in the multi (n_active + n_copies), so at most max_conns bounce buffers
 * are in use, and in r->active, so release waits for their copies (no late writes into VRAM).
 *
 * A CreateMultipartUpload in flight at release stays in the multi: the request becomes a
 * zombie (r->zombie), freed by the loop when its last create ends; a create that answers with an
 * UploadId is then aborted, so no orphaned upload remains (bounded by timeout_ms; the engine's
 * destruction waits for it).
 *
 * Locking: one mutex per engine (e->lock) guards the queue of ops waiting to start, the
 * retry list, every op's and request's progress fields (status, counters) and the flags
 * release sets. The loop thread alone touches the curl multi handle and the easy handles; it
 * runs curl_multi_perform (where the write and read callbacks copy bytes to and from the
 * initiator's buffers) without the lock. Release marks its request canceled and waits on
 * e->cond until the loop has taken the request's easy handles out of the multi: after that no
 * callback can touch the request's buffers.
 */
#ifndef IXL_OBJ_H
#define IXL_OBJ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h>

#include "obj_parse.h"

extern const struct ixl_sys *obj_sys_ptr;
static inline const struct ixl_sys *obj_sys(void)
{
    return __atomic_load_n(&obj_sys_ptr, __ATOMIC_RELAXED);
}

#define OBJ_BUCKET_MAX 64 /* S3 bucket names: 3..63 characters */
#define OBJ_KEY_MAX 1024  /* S3 keys: at most 1024 bytes of UTF-8 */
#define OBJ_ETAG_MAX 80

/* A registered region: DRAM (nothing to keep) or an object. */
struct obj_md {
    enum ixl_mem type;
    uint64_t addr, len; /* the region as registered (OBJ len 0: the whole object) */
    char bucket[OBJ_BUCKET_MAX];
    char *key;   /* OBJ: the object key (malloc'd) */
    char *url;   /* OBJ: the object's URL, key encoded (malloc'd) */
    int ordinal; /* VRAM: the GPU */
};

enum obj_op_kind {
    OP_GET,
    OP_PUT,
    OP_HEAD,
    OP_MPU_CREATE,
    OP_MPU_PART,
    OP_MPU_COMPLETE,
    OP_MPU_ABORT
};

/* OPS_COPY: a VRAM op's device copy waits to start (e->to_copy) or runs (e->copies). */
enum obj_op_state { OPS_IDLE, OPS_QUEUED, OPS_DELAYED, OPS_ACTIVE, OPS_COPY, OPS_DONE };

struct obj_upload;
struct obj_req;
struct obj_waiter;

/* One HTTP request. Owned by a request (its ops array), by a query's waiter, or, for an abort
 * after release, by the engine (freed when it ends). */
struct obj_op {
    struct obj_op *next; /* the queue or the retry list (e->lock) */
    enum obj_op_kind kind;
    enum obj_op_state state;
    struct obj_req *r;        /* NULL for a query's HEAD and an engine-owned abort */
    struct obj_waiter *w;     /* a query's HEAD */
    struct obj_upload *up;    /* multipart steps */
    const struct obj_md *obj; /* the object (borrowed: registered while the op exists) */
    char *own_url;            /* an engine-owned abort: its own copy of the URL */
    uint8_t *buf;             /* GET: where the bytes go; PUT/PART: where they come from */
    uint64_t off, len;        /* the range of the object (GET) or of the buffer (PUT, PART) */
    uint64_t pos;             /* bytes moved so far by this try */
    uint32_t part;            /* PART: its number (1..) */
    int tries;
    long long due_ms; /* DELAYED: when to retry */
    /* ACTIVE, the loop's: bytes moved by this try when last seen, when they last changed, how
     * long they may stay the same (timeout_ms), and whether that ran out. */
    uint64_t moved;
    long long moved_ms;
    long stall_ms;
    bool stalled;
    void *easy;       /* CURL *, ACTIVE: the loop's */
    void *hdrs;       /* struct curl_slist *, ACTIVE */
    const char *body; /* COMPLETE: the request body */
    size_t body_len;
    /* The answer (loop thread while ACTIVE): status, headers of note, an error or XML body. */
    long http;
    bool bad_header; /* a header we check was malformed */
    bool have_range, have_crc, ignore;
    uint64_t cr_first, cr_last, cr_total;
    uint32_t resp_crc;
    int crc_kind;     /* 1: crc32c, 2: crc32 */
    uint32_t put_crc; /* PUT/PART with req_checksum: the CRC32C its header carries */
    char etag[OBJ_ETAG_MAX];
    char *resp; /* a bounded copy of a body that is not data (XML), malloc'd */
    size_t resp_len;
    uint64_t content_length; /* HEAD */
    /* VRAM descriptors (the loop's, e->lock): the device address, its GPU, the bounce buffer
     * (buf points at it while held), whether it holds the bytes to send (PUT, PART), the
     * direction and event of the copy in flight. */
    bool vram, staged, to_dev;
    int ord;
    uint8_t *dev_buf;
    uint8_t *bounce;
    struct ixl_dev_event *ev;
};

/* A multipart upload of one WRITE descriptor. */
struct obj_upload {
    struct obj_op *create, *parts, *complete;
    uint32_t n_parts, parts_left;
    char upload_id[512];
    bool started;  /* CreateMultipartUpload answered: an upload exists on the server */
    bool finished; /* CompleteMultipartUpload answered: nothing to abort */
    char (*etags)[OBJ_ETAG_MAX];
    uint32_t *crcs;
    char *complete_body;
};

enum obj_state { OBJ_IDLE, OBJ_RUNNING, OBJ_DONE, OBJ_FAILED };

struct obj_req {
    struct obj_engine *e;
    bool to_obj; /* WRITE to the object store (else READ from it) */
    size_t n;
    const struct ixl_xfer_desc *mem, *obj; /* borrowed from the core until release */
    struct obj_op *ops;                    /* every op of the plan (prep) */
    size_t n_ops;
    struct obj_upload *ups; /* one per multipart descriptor */
    size_t n_ups;
    /* Progress (e->lock). */
    uint32_t pending; /* ops queued, delayed or active */
    uint32_t active;  /* ops in the multi handle */
    _Atomic int state;
    int status;
    bool reported, canceled;
    bool zombie; /* released with a CreateMultipartUpload in flight: the loop frees it */
    char msg[768];
    uint64_t bytes;
};

/* query_mem's HEADs wait here. */
struct obj_waiter {
    uint32_t left;
    int status;
    char msg[512];
};

struct obj_engine {
    struct ixl_engine base;
    const struct ixl_host *host;
    /* Options, resolved (README.md). */
    char endpoint[512];  /* scheme://host[:port] with no trailing slash */
    char host_part[400]; /* host[:port] of the endpoint */
    char scheme[8];
    char bucket[OBJ_BUCKET_MAX];
    char region[64];
    char access_key[256], secret_key[256], session_token[2048];
    char ca_bundle[512];
    char sigv4[128]; /* "aws:amz:REGION:s3" */
    bool virtual_addressing;
    bool req_checksum;  /* send x-amz-checksum-crc32c with PUT and UploadPart */
    bool resp_checksum; /* ask for (x-amz-checksum-mode) and verify whole-object checksums */
    uint32_t max_conns;
    uint64_t mpu_threshold, part_size, read_split;
    long timeout_ms;
    uint32_t max_retries;
    long retry_base_ms;
    /* The loop (obj_loop.c). */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* release and query waiters: an op or a cancel ended */
    pthread_t thread;
    bool thread_started, stop;
    void *multi;                  /* CURLM * */
    int epfd, evfd;               /* the loop's epoll set (libcurl's sockets) and its wake-up */
    long long curl_due_ms;        /* libcurl's timer: when to call it with no socket (-1: none) */
    struct obj_op *qhead, *qtail; /* ops waiting for a connection slot */
    struct obj_op *delayed;       /* ops waiting for their retry time */
    uint32_t n_active;
    void **easy_free; /* idle easy handles, reused (their connections live in the multi) */
    uint32_t n_easy_free;
    bool cancel_pending; /* a release waits for the loop */
    uint32_t orphans;    /* engine-owned aborts in flight */
    uint64_t rng;
    /* VRAM (obj_loop.c): the device layer (NULL: no VRAM, mem_why says why), a stream per GPU
     * (the loop's), VRAM ops waiting for their copy to start and those copying. */
    const struct ixl_devops *dev;
    int n_devs;
    char mem_why[256];
    struct ixl_dev_stream **streams;
    bool *stream_broken;      /* a copy on it failed: replaced once its copies are done */
    uint32_t *stream_pending; /* copies in flight on it */
    struct obj_op *to_copy, *copies;
    uint32_t n_copies;
};

/* ---- obj_engine.c -------------------------------------------------------------------------- */
int obj_error(struct obj_engine *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
long long obj_now_ms(void);

/* ---- obj_loop.c ---------------------------------------------------------------------------- */
/* Starts and stops the loop thread and its multi handle. */
int obj_loop_start(struct obj_engine *e, char *why, size_t cap);
void obj_loop_stop(struct obj_engine *e);
/* Queues op (e->lock held) and wakes the loop. */
void obj_enqueue(struct obj_engine *e, struct obj_op *op);
void obj_wake(struct obj_engine *e);
/* Takes r's ops that are not in the multi off the queues (e->lock held); returns how many. */
uint32_t obj_dequeue_req(struct obj_engine *e, struct obj_req *r);
/* Fails r (e->lock held) with status and message unless it failed already. */
void obj_req_fail(struct obj_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An op of r ended (e->lock held): finishes r when nothing is left. */
void obj_req_op_ended(struct obj_engine *e, struct obj_req *r);
/* Queues an AbortMultipartUpload of upload_id of the object at url (named key in logs), owned
 * by the engine (e->lock held). */
void obj_abort_upload(struct obj_engine *e, const char *url, const char *key,
                      const char *upload_id);
/* Frees a request (its ops' bounce buffers and URLs too). */
void obj_req_free(struct obj_req *r);
/* VRAM: finds the device layer (creation): sets e->dev or e->mem_why. */
void obj_dev_init(struct obj_engine *e);

#endif

/*
 * A small etcd v3 client over etcd's JSON gateway (HTTP POST /v3/..., base64 keys and values)
 * through libcurl, for the agent's "central KV" metadata mode.
 *
 * Layout under a namespace ns (default "ixl"), for agent A and label L (labels are 1..63 bytes
 * of [A-Za-z0-9_.-]; NULL or "" = the full metadata). A is percent-encoded: every byte outside
 * [A-Za-z0-9_.-] becomes %XX, so any agent name (1..IXL_NAME_MAX-1 bytes) makes one key segment.
 *
 *   <ns>/md/<A>/f                   head of the full metadata
 *   <ns>/md/<A>/l/<L>               head of the metadata under label L
 *   <ns>/data/<A>/f/<ver>/<i>       chunk i of version ver (16 hex digits; i: 8 hex digits,
 *   <ns>/data/<A>/l/<L>/<ver>/<i>   so key order is chunk order), at most chunk_max bytes each
 *
 * A head's value is "v=<ver> n=<chunks> len=<bytes> crc=<crc32c hex> inc=<incarnation hex>"
 * (ixl_etcd_head_parse). Heads and chunks live under different prefixes so that the watch on
 * <ns>/md/ sees heads only, never the chunks' bytes.
 *
 * Every key is attached to the client's lease, kept alive by a thread of the client (every
 * ttl/3): when the process dies, its keys expire after the lease TTL. When the lease is lost
 * anyway (etcd restarted, the keep-alive starved past the TTL), the keep-alive logs a warning
 * and the next publish grants a new lease (what was published under the old one is not
 * re-published). A publish writes the new version's chunks, then in one transaction switches
 * the head (compared on its mod revision, so concurrent publishers of one key never leak
 * chunks) and deletes the older version's chunks. A reader reads the head, then that version's
 * chunks at the head's revision (a consistent snapshot), and checks count, length and crc. So
 * a reader never sees half an update, and metadata larger than etcd's request limit
 * (--max-request-bytes, 1.5 MiB by default) is split across keys. When etcd refuses a chunk as
 * too large, the client halves its chunk size (down to 1 KiB) and writes the version again; the
 * smaller size sticks for the client's later publishes.
 *
 * Limits on what is read back (etcd's answers are untrusted): a blob is at most
 * IXL_ETCD_MAX_BLOB bytes in at most IXL_ETCD_MAX_CHUNKS chunks; a head or chunk set that breaks
 * the format or the limits is IXL_ERR_MALFORMED with a message, never a crash.
 *
 * Timeouts: every HTTP request is limited to timeout_ms (connecting: the smaller of timeout_ms
 * and 2 s), tried on each endpoint in turn. A publish makes 2 + chunks requests (more when it
 * learns a smaller chunk size), a fetch 2 (plus polling while it waits); so with etcd down a
 * call fails within timeout_ms per endpoint with IXL_ERR_UNREACHABLE. Errors: IXL_ERR_UNREACHABLE
 * (no endpoint answered in time), IXL_ERR_BACKEND (etcd refused a request; its message is
 * quoted), IXL_ERR_PROTOCOL (an answer that is not etcd's JSON), IXL_ERR_MALFORMED (bad head or
 * chunks), IXL_ERR_NOT_FOUND, IXL_ERR_TOO_LARGE, IXL_ERR_INVALID_ARG, IXL_ERR_NO_MEMORY,
 * IXL_ERR_NOT_SUPPORTED (built without libcurl/jansson).
 *
 * All functions are thread-safe. Errors are IXL_ERR_* codes with a message in err (errlen
 * bytes; err may be NULL) naming the endpoint and what etcd said. Outputs are written only on
 * success. No function holds a lock of the client while it calls the watch callback.
 */
#ifndef IXL_META_ETCD_H
#define IXL_META_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define IXL_ETCD_MAX_BLOB (256u << 20) /* largest metadata read back */
#define IXL_ETCD_MAX_CHUNKS 65536u     /* most chunks of one version */

struct ixl_etcd;

struct ixl_etcd_opts {
    const char *endpoints; /* "http://127.0.0.1:2379[,http://...]": tried in order */
    const char *ns;        /* key namespace; NULL = "ixl" */
    unsigned ttl_s;        /* lease TTL; 0 = 10 */
    size_t chunk_max;      /* bytes per chunk value; 0 = 512 KiB */
    unsigned timeout_ms;   /* one HTTP request's limit; 0 = 5000 */
};

/* Connects (checks the endpoint answers), grants the lease and starts its keep-alive thread.
 * opts is borrowed for the call (the strings are copied). IXL_ERR_NOT_SUPPORTED when ixl was
 * built without etcd support. */
int ixl_etcd_open(const struct ixl_etcd_opts *opts, struct ixl_etcd **out, char *err,
                  size_t errlen);
/* Stops the keep-alive thread and the watch, revokes the lease (its keys go at once). Accepts
 * NULL. With etcd refusing connections it returns at once; with etcd hung, within about
 * 2 x timeout_ms (a keep-alive request in flight, then the revoke). A watch's streaming request
 * is interrupted at once (curl_multi_wakeup).
 * It waits for a running watch callback to return, so: never call it while holding a lock that
 * the callback may take (take the client out of the shared structure under the lock, drop the
 * lock, then close). Calling it from the callback itself is allowed: the watch thread then
 * finishes the close after the callback returns. */
void ixl_etcd_close(struct ixl_etcd *c);

/* Publishes blob as agent's metadata under label (NULL or "" = the full metadata), attached
 * to the lease, replacing an earlier version atomically. blob is borrowed for the call; len at
 * most IXL_ETCD_MAX_BLOB (else IXL_ERR_TOO_LARGE). */
int ixl_etcd_publish(struct ixl_etcd *c, const char *agent, const char *label, uint64_t incarnation,
                     const void *blob, size_t len, char *err, size_t errlen);

/* Reads agent's metadata under label; waits up to timeout_ms for it to appear (0 or less = look
 * once), polling every 50 ms. IXL_ERR_NOT_FOUND (message naming agent, label and endpoint) when
 * it did not appear in time. The caller frees *blob with free() (a 0-byte blob is a non-NULL
 * pointer). */
int ixl_etcd_fetch(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms,
                   void **blob, size_t *len, char *err, size_t errlen);

/* Deletes every key of agent (all labels): what ixl_md_invalidate_local does in etcd mode. */
int ixl_etcd_remove(struct ixl_etcd *c, const char *agent, char *err, size_t errlen);

/* Called from the watch thread when a head key of (agent, label) was deleted (lease expired,
 * or the agent invalidated itself) or replaced by another incarnation (incarnation = the new
 * one; 0 when deleted). label is "" for the full metadata. The first publish of a head calls
 * nothing; neither does a republish with the same incarnation. agent and label are borrowed for
 * the call. The callback runs with no lock of the client held: it may call any ixl_etcd_*
 * function of this client (a fetch, a publish) and take the caller's own locks, under the rule
 * of ixl_etcd_close. It should return soon: events wait behind it. */
typedef void (*ixl_etcd_gone_fn)(void *ctx, const char *agent, const char *label,
                                 uint64_t incarnation);

/* Starts a thread watching every head under <ns>/md/ (one watch per client; a second call
 * replaces the callback and ctx). The watch reconnects by itself when the stream breaks (after
 * 250 ms, trying the endpoints in turn), resuming from the last revision it saw, so deletions
 * while it was away are still reported (unless etcd compacted them away). Events from before
 * the call are not reported. */
int ixl_etcd_watch(struct ixl_etcd *c, ixl_etcd_gone_fn fn, void *ctx, char *err, size_t errlen);

/* ---- Pure helpers (no libcurl, no client): the untrusted-input parsers, exposed for the
 * fuzz target tests/fuzz/fuzz_etcd.c and the tests. ---- */

struct ixl_etcd_head {
    uint64_t ver;
    uint64_t len; /* at most IXL_ETCD_MAX_BLOB */
    uint64_t inc;
    uint32_t n;   /* chunks: 0 iff len is 0, at most min(len, IXL_ETCD_MAX_CHUNKS) */
    uint32_t crc; /* crc32c of the whole blob */
};

/* Parses a head's value (exactly the format above, fields in order, lower- or upper-case hex,
 * no other bytes). 0 and *h filled, or -1 when malformed or over the limits. */
int ixl_etcd_head_parse(const char *s, size_t slen, struct ixl_etcd_head *h);
/* Writes h as a head's value (NUL-terminated); returns its length. cap >= 128. */
size_t ixl_etcd_head_format(const struct ixl_etcd_head *h, char *buf, size_t cap);

/* crc32c (Castagnoli), chained: start with crc 0. */
uint32_t ixl_etcd_crc32c(uint32_t crc, const void *p, size_t n);

/* Standard base64 with padding. encode writes 4*ceil(n/3) chars plus a NUL into out. decode
 * accepts only canonical input (length a multiple of 4, padding only at the end, zero unused
 * bits) and writes at most (slen/4)*3 bytes; returns the length, or -1 when invalid. */
void ixl_etcd_b64_encode(const void *p, size_t n, char *out);
long ixl_etcd_b64_decode(const char *s, size_t slen, void *out);

/* Splits a key under <ns>/md/ into agent (decoded; buffer of IXL_NAME_MAX bytes) and label
 * (buffer of 64 bytes; "" for the full metadata). key is the key after the "<ns>/md/" prefix.
 * 0, or -1 when it is not a head key of this layout. */
int ixl_etcd_head_key_parse(const char *key, size_t klen, char *agent, char *label);

/* Newline-delimited stream splitter for the watch: feed() hands each complete line (without
 * its newline; not NUL-terminated) to fn and keeps the partial rest. A line longer than max
 * bytes is dropped whole (counted in dropped) without buffering more than max bytes. fn returns
 * 0 to go on, non-zero to stop (feed then returns that value). */
struct ixl_etcd_lines {
    char *buf;
    size_t len, cap, max;
    int skipping; /* inside a line over max, dropping to its newline */
    unsigned long dropped;
};
int ixl_etcd_lines_feed(struct ixl_etcd_lines *l, const char *data, size_t n,
                        int (*fn)(void *ctx, const char *line, size_t len), void *ctx);
void ixl_etcd_lines_reset(struct ixl_etcd_lines *l); /* frees the buffer; keeps max */

#endif

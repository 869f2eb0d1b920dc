/*
 * A small etcd v3 client over etcd's JSON gateway (HTTP POST /v3/..., base64 keys and values)
 * through libcurl, for the agent's "central KV" metadata mode.
 *
 * Layout under a namespace ns (default "ixl"), for agent A and label L ("" = the full
 * metadata; labels are 1..63 bytes of [A-Za-z0-9_.-]):
 *
 *   <ns>/md/<A>/<L>/head            the current version: "v=<ver> n=<chunks> len=<bytes>
 *                                   crc=<crc32c hex> inc=<incarnation hex>"
 *   <ns>/md/<A>/<L>/c/<ver>/<i>     chunk i of version ver (at most chunk_max bytes each)
 *
 * (The full metadata uses the label "_" in the key.) Every key is attached to the client's
 * lease, kept alive by a thread of the client: when the process dies, its keys expire after
 * the lease TTL. A publish writes the new version's chunks, then switches the head in one
 * transaction, then deletes the older version's chunks: a reader that sees a head reads that
 * version's chunks and checks count, length and crc; when the chunks vanished under it (a
 * newer publish), it reads the head again. So a reader never sees half an update, and
 * metadata larger than etcd's request limit (--max-request-bytes, 1.5 MiB by default) is
 * split across keys.
 *
 * All functions are thread-safe. Errors are IXL_ERR_* codes with a message in err (errlen
 * bytes) naming the endpoint and what etcd said.
 */
#ifndef IXL_META_ETCD_H
#define IXL_META_ETCD_H

#include <stddef.h>
#include <stdint.h>

struct ixl_etcd;

struct ixl_etcd_opts {
    const char *endpoints; /* "http://127.0.0.1:2379[,http://...]": tried in order */
    const char *ns;        /* key namespace; NULL = "ixl" */
    unsigned ttl_s;        /* lease TTL; 0 = 10 */
    size_t chunk_max;      /* bytes per chunk value; 0 = 512 KiB */
    unsigned timeout_ms;   /* one HTTP request's limit; 0 = 5000 */
};

/* Connects (checks the endpoint answers), grants the lease and starts its keep-alive thread. */
int ixl_etcd_open(const struct ixl_etcd_opts *opts, struct ixl_etcd **out, char *err,
                  size_t errlen);
/* Stops the keep-alive thread and the watch, revokes the lease (its keys go at once). */
void ixl_etcd_close(struct ixl_etcd *c);

/* Publishes blob as agent's metadata under label (NULL or "" = the full metadata), attached
 * to the lease, replacing an earlier version atomically. */
int ixl_etcd_publish(struct ixl_etcd *c, const char *agent, const char *label, uint64_t incarnation,
                     const void *blob, size_t len, char *err, size_t errlen);

/* Reads agent's metadata under label; waits up to timeout_ms for it to appear (0 = look once).
 * IXL_ERR_NOT_FOUND when it did not appear in time. The caller frees *blob with free(). */
int ixl_etcd_fetch(struct ixl_etcd *c, const char *agent, const char *label, int timeout_ms,
                   void **blob, size_t *len, char *err, size_t errlen);

/* Deletes every key of agent (all labels): what ixl_md_invalidate_local does in etcd mode. */
int ixl_etcd_remove(struct ixl_etcd *c, const char *agent, char *err, size_t errlen);

/* Called from the watch thread when a head key of (agent, label) was deleted (lease expired,
 * or the agent invalidated itself) or replaced by another incarnation (incarnation = the new
 * one; 0 when deleted). label is "" for the full metadata. */
typedef void (*ixl_etcd_gone_fn)(void *ctx, const char *agent, const char *label,
                                 uint64_t incarnation);

/* Starts a thread watching every head under <ns>/md/ (one watch per client; a second call
 * replaces the callback). The watch reconnects by itself when the stream breaks, resuming from
 * the last revision it saw. */
int ixl_etcd_watch(struct ixl_etcd *c, ixl_etcd_gone_fn fn, void *ctx, char *err, size_t errlen);

#endif

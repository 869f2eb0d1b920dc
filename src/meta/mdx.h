/*
 * The metadata exchange's implementations, behind one table of operations. src/meta/exchange.c
 * holds the API (ixl_md_send, ixl_md_fetch, ixl_md_invalidate_local), the fetch threads and the
 * labels, and chooses the implementation of each call in one place (mdx_pick): a peer address
 * goes to the peer exchange (that peer's listener, mdx_wire.h; exchange.c), no address to etcd
 * (mdx_etcd.c, over etcd.c's client). The agent only starts and stops the exchange
 * (ixl_mdx_start/ixl_mdx_stop in core/agent.h) and never learns which one serves a call.
 */
#ifndef IXL_META_MDX_H
#define IXL_META_MDX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl.h>

struct ixl_agent;
struct mdx_thread; /* a fetch's thread (exchange.c): the peer exchange cuts its socket at stop */

/* Every method returns an IXL status and, on failure, a message in msg (msglen bytes) that the
 * caller records with the agent's error. peer is the caller's (NULL or without an address for
 * etcd); blob and label are borrowed for the call. */
struct ixl_mdx_ops {
    const char *name; /* in messages: "peer", "etcd" */
    /* Makes this agent's metadata (blob: the whole, or label's part) fetchable. */
    int (*publish)(void *impl, const struct ixl_peer *peer, const char *label, const void *blob,
                   size_t len, char *msg, size_t msglen);
    /* Fetches remote's metadata (label "" for the whole) into *blob (free()). Blocks: runs on
     * the fetch's own thread t, and returns soon after the exchange stops. */
    int (*fetch)(void *impl, struct mdx_thread *t, const char *remote, const struct ixl_peer *peer,
                 const char *label, void **blob, size_t *len, char *msg, size_t msglen);
    /* Withdraws this agent's metadata: from peer, or (peer NULL) from everywhere it went. */
    int (*invalidate)(void *impl, const struct ixl_peer *peer, char *msg, size_t msglen);
    /* Stops the implementation's threads and frees it; the exchange's fetch threads may still
     * be running (they see *stop). */
    void (*destroy)(void *impl);
};

/* etcd (mdx_etcd.c): connects to endpoints (comma-separated), publishes under the agent's name
 * and incarnation, and drops a loaded remote whose metadata leaves etcd. stop: the exchange's
 * flag, read by waiting fetches. */
extern const struct ixl_mdx_ops ixl_mdx_etcd_ops;
int ixl_mdx_etcd_open(struct ixl_agent *agent, const char *endpoints, const atomic_bool *stop,
                      void **out, char *msg, size_t msglen);

#endif

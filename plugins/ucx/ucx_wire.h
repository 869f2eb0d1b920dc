/*
 * UCX plugin: the bytes it puts on the wire beside UCX's own, and their checked decoders (no
 * UCX dependency, so tests/fuzz/fuzz_ucx_wire.c fuzzes them alone).
 *
 * Wrapped blobs (connection info = worker addresses, public data = packed rkey):
 *   [u32 magic][u32 version][u32 payload length][u32 FNV-1a of the payload, low 32 bits][payload]
 * Public data is version 2, its payload [u64 region key][packed rkey] (the key names the region
 * in the plugin's own WRITE/READ messages below; version 1 held the rkey alone). Connection info
 * is version 3 (2 before notifications were answered), its payload the addresses of the engine's
 * workers: [u32 count (1..UCX_MAX_ADDRS)] count x ([u32 length (> 0)][worker address]) and nothing
 * after them, each address at most UCX_ADDR_MAX bytes. UCX does not validate worker addresses or
 * packed keys: these checks and ucx_rkey_check stop accidents and malformed bytes, not forgery (the
 * checksum is no MAC). Only metadata the core authenticated (a cluster key) or took from a peer the
 * kernel vouches for (no key: same user, this host) reaches them; see docs/ucx.md, Trust.
 * Notifications (an active message): [u16 sender name length][name][message], little-endian, with
 * the sender's token (u64, little-endian) as UCX's active message header. The target answers every
 * one with a reply (below, kind 'A', the token returned): status 0 when it queued it, IXL_ERR_BUSY
 * when its queue of notifications not drained is full (notif_queue_max, notif_queue_bytes),
 * IXL_ERR_NOTIF_TOO_LARGE, IXL_ERR_PROTOCOL or IXL_ERR_NO_MEMORY.
 *
 * WRITE and READ over endpoints without an RMA transport (tcp), as the plugin's own active
 * messages instead of UCX's emulated put/get. A request message (initiator to target):
 *   [u8 kind 'W' or 'R'][u8 UCX_RMA_VERSION][u16 n (1..UCX_RMA_MAX_ENTRIES)][u32 0][u64 token]
 *   n x ([u64 region key][u64 address][u64 length (> 0)])
 *   then, for 'W' only, the n entries' bytes one after another (exactly their total length).
 * A reply (target to initiator, one per request message):
 *   [u8 kind 'A' (to a W) or 'D' (to an R)][u8 UCX_RMA_VERSION][u16 0][i32 status][u64 token]
 *   then, for a 'D' with status 0, the entries' bytes (the initiator checks their total).
 * status is 0 or a negative IXL status. The token is the initiator's, returned unchanged.
 */
#ifndef IXL_UCX_WIRE_H
#define IXL_UCX_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UCX_INFO_MAGIC 0x554c5849u /* "IXLU" */
#define UCX_RKEY_MAGIC 0x4b4c5849u /* "IXLK" */
#define UCX_VERSION 2              /* of public data (region key + rkey) */
#define UCX_INFO_VERSION                                                                   \
    3 /* of connection info: 1 held a single worker address; 3: notifications are answered \
         (ucx_am.c) */
#define UCX_MAX_ADDRS 16 /* most worker addresses in a connection info (the workers option) */
/* Longest worker address and packed rkey taken from a peer (UCX 1.13's are some hundred bytes
 * with every transport of a host; a packed rkey is at most 64 memory domains' keys of at most
 * 255 bytes each, ucp_rkey_packed_size). */
#define UCX_ADDR_MAX 16384
#define UCX_RKEY_MAX (9 + 64 * 256 + 1 + 64 * 3)
#define UCX_HDR_LEN 16
#define UCX_NAME_MAX 255 /* longest sender name a notification may carry */
#define UCX_RMA_VERSION 1
#define UCX_RMA_HDR 16         /* request and reply header bytes */
#define UCX_RMA_ENTRY 24       /* bytes of one request entry */
#define UCX_RMA_MAX_ENTRIES 64 /* entries in one request message */
#define UCX_RMA_MAX_BYTES \
    ((uint64_t)4 << 20) /* bytes one request message may move (refused above) */

enum ucx_rma_kind {
    UCX_RMA_WRITE = 'W',
    UCX_RMA_READ = 'R',
    UCX_RMA_ACK = 'A',
    UCX_RMA_DATA = 'D'
};

struct ucx_rma_entry {
    uint64_t key, addr, len;
};

uint32_t ucx_fnv32(const void *p, size_t n);
/* Wraps payload (len > 0) in the header: a new malloc'd buffer, or NULL. */
void *ucx_wrap(uint32_t magic, const void *payload, size_t len, size_t *out_len);
/* The payload of wrapped bytes, or NULL when they are not what ucx_wrap() made. */
const void *ucx_unwrap(uint32_t magic, const void *bytes, size_t len, size_t *out_len);
/* Connection info from n (1..UCX_MAX_ADDRS) worker addresses, each of length > 0: a new
 * malloc'd buffer, or NULL. */
void *ucx_info_encode(size_t n, const void *const *addrs, const size_t *lens, size_t *out_len);
/* Splits connection info into its worker addresses (pointers into bytes): the count, or 0 when
 * the bytes are not what ucx_info_encode() made. addrs and lens hold UCX_MAX_ADDRS entries. */
size_t ucx_info_decode(const void *bytes, size_t len, const void **addrs, size_t *lens);
/* A notification's bytes from sender name (1..UCX_NAME_MAX bytes) and msg: malloc'd, or NULL. */
void *ucx_notif_encode(const char *name, const void *msg, size_t len, size_t *out_len);
/* Splits received notification bytes; false when malformed or the message is over msg_max. */
bool ucx_notif_decode(const void *data, size_t len, size_t msg_max, const char **name,
                      size_t *name_len, const void **msg, size_t *msg_len);

/* Public data from a region key and a packed rkey (len > 0): malloc'd, or NULL. */
void *ucx_pub_encode(uint64_t key, const void *rkey, size_t len, size_t *out_len);
/* The packed rkey inside public data (a pointer into bytes) and the region key, or NULL when the
 * bytes are not what ucx_pub_encode() made. */
const void *ucx_pub_decode(const void *bytes, size_t len, uint64_t *key, size_t *rkey_len);
/* Whether a packed rkey has the layout of UCX's ucp_rkey_pack (1.10 to 1.16): [u64 md_map][u8
 * memory type] then, for each bit of md_map, [u8 size][size bytes], then nothing or [u8 system
 * device] and 3-byte distances; at most UCX_RKEY_MAX bytes. Fills its memory type. Says nothing of
 * the bytes inside each memory domain's key (UCX's transports parse those). */
bool ucx_rkey_check(const void *rkey, size_t len, unsigned *mem_type);
/* A request message's header and entries into out (UCX_RMA_HDR + n * UCX_RMA_ENTRY bytes). */
void ucx_rma_req_encode(void *out, enum ucx_rma_kind kind, uint64_t token, size_t n,
                        const struct ucx_rma_entry *entries);
/* Checks a received request message: kind W or R, version, 1..UCX_RMA_MAX_ENTRIES entries of
 * length > 0 whose total does not overflow, and a payload of exactly that total (W) or none (R).
 * On success fills the kind, token, entry count, the entries (read with ucx_rma_entry_at), the
 * payload and the total. */
bool ucx_rma_req_decode(const void *data, size_t len, enum ucx_rma_kind *kind, uint64_t *token,
                        size_t *n, const unsigned char **entries, const unsigned char **payload,
                        uint64_t *total);
void ucx_rma_entry_at(const unsigned char *entries, size_t i, struct ucx_rma_entry *out);
/* The kind and token of a message or reply whose header is readable (UCX_RMA_HDR bytes, a known
 * kind, this version), whatever follows: what a malformed one is answered or ended with. */
bool ucx_rma_peek(const void *data, size_t len, enum ucx_rma_kind *kind, uint64_t *token);
/* A reply header into out (UCX_RMA_HDR bytes). */
void ucx_rma_reply_encode(void *out, enum ucx_rma_kind kind, int32_t status, uint64_t token);
/* Checks a received reply: kind A or D, version, status 0 or negative, no payload unless a D with
 * status 0. */
bool ucx_rma_reply_decode(const void *data, size_t len, enum ucx_rma_kind *kind, int32_t *status,
                          uint64_t *token, const unsigned char **payload, size_t *payload_len);

#endif

/*
 * UCX plugin: the bytes it puts on the wire beside UCX's own, and their checked decoders (no
 * UCX dependency, so tests/fuzz/fuzz_ucx_wire.c fuzzes them alone).
 *
 * Wrapped blobs (connection info = worker addresses, public data = packed rkey):
 *   [u32 magic][u32 version][u32 payload length][u32 FNV-1a of the payload, low 32 bits][payload]
 * Public data is version 1, its payload one packed rkey. Connection info is version 2, its
 * payload the addresses of the engine's workers:
 *   [u32 count (1..UCX_MAX_ADDRS)] count x ([u32 length (> 0)][worker address])
 * and nothing after them. UCX does not validate worker addresses or packed keys, so these checks
 * are all that stands between corrupt metadata and UCX's parsers. Notifications (an active
 * message):
 *   [u16 sender name length][name][message], little-endian.
 */
#ifndef IXL_UCX_WIRE_H
#define IXL_UCX_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UCX_INFO_MAGIC 0x554c5849u /* "IXLU" */
#define UCX_RKEY_MAGIC 0x4b4c5849u /* "IXLK" */
#define UCX_VERSION 1              /* of public data (rkeys) */
#define UCX_INFO_VERSION 2         /* of connection info: 1 held a single worker address */
#define UCX_MAX_ADDRS 16 /* most worker addresses in a connection info (the workers option) */
#define UCX_HDR_LEN 16
#define UCX_NAME_MAX 255 /* longest sender name a notification may carry */

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

#endif

/*
 * NET's wire format. Every frame starts with a 48-byte little-endian header; HELLO, WRITE,
 * READ_DATA and NOTIF carry `len` payload bytes after it. Everything that arrives is untrusted:
 * net_hdr_decode() checks the fixed fields, and the target checks every READ/WRITE against its
 * registered regions and their keys before a byte moves.
 *
 *   u32 magic "IXLN"  u8 version  u8 op  u16 flags
 *   i32 status        u32 chunk
 *   u64 req           u64 addr    u64 len   u64 key
 *
 * Connection setup (README.md, "Authentication"): HELLO -> HELLO_ACK; with a cluster key,
 * HELLO (flag NET_HELLO_F_AUTH, the initiator's nonce in addr and key) -> CHALLENGE (the
 * target's nonce and its MAC) -> AUTH (the initiator's MAC) -> HELLO_ACK. Nothing else is
 * taken before HELLO_ACK OK.
 *
 * Version 2: acknowledged notifications (README.md, "Notifications"). A NOTIF carries its
 * sequence number in req (1, 2, ... per session: the initiator's instance and the target's
 * instance it names in its HELLO); the target acknowledges cumulatively: flag NET_F_ACK on a
 * HELLO_ACK, WRITE_ACK, READ_DATA, PONG or HOLD it sends says key holds the highest sequence
 * number it delivered in order (or dropped as a duplicate), and NOTIF_ACK says only that. The
 * HELLO payload ends with the highest number the initiator saw acknowledged.
 */
#ifndef IXL_NET_WIRE_H
#define IXL_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define NET_MAGIC 0x4e4c5849u /* "IXLN" read as little-endian u32 */
#define NET_WIRE_VERSION 2    /* 2: sequenced, acknowledged notifications */
#define NET_HDR_BYTES 48
#define NET_HELLO_MAX 512 /* a HELLO payload: two instances, an agent name, the ack seen */

enum net_op {
    NET_HELLO = 1,     /* initiator -> target: who I am, which instance I expect */
    NET_HELLO_ACK = 2, /* status: OK or why not */
    NET_WRITE = 3,     /* + len bytes to place at addr (region key) */
    NET_WRITE_ACK = 4, /* status of one WRITE frame */
    NET_READ = 5,      /* asks for len bytes at addr (region key) */
    NET_READ_DATA = 6, /* status, then len bytes when status is OK */
    NET_NOTIF = 7,     /* + len bytes: a notification for the target's user; req: its
                        * sequence number (>= 1) */
    NET_PING = 8,
    NET_PONG = 9,
    NET_CHALLENGE = 10, /* target -> initiator: + 48 bytes: its nonce (16), its MAC (32) */
    NET_AUTH = 11,      /* initiator -> target: + 32 bytes: its MAC */
    NET_HOLD = 12,      /* target -> initiator: status 1: it stopped reading this connection
                         * (its queue of received notifications is full), 0: reads again */
    NET_NOTIF_ACK = 13, /* target -> initiator: flag NET_F_ACK, key: notifications delivered */
    NET_OP_MAX = 13
};

#define NET_HELLO_F_AUTH 1u    /* HELLO flag: the initiator holds the key; nonce in addr, key */
#define NET_F_ACK 2u           /* target's frame: key = the cumulative notification ack */
#define NET_NONCE_BYTES 16     /* a challenge nonce */
#define NET_MAC_BYTES 32       /* HMAC-SHA-256 */
#define NET_CHALLENGE_BYTES 48 /* nonce + MAC */

struct net_hdr {
    uint8_t op;
    uint16_t flags;
    int32_t status;
    uint32_t chunk;
    uint64_t req, addr, len, key;
};

void net_hdr_encode(const struct net_hdr *h, uint8_t out[NET_HDR_BYTES]);
/* 0, or -1 when the bytes are not a frame header this version understands. */
int net_hdr_decode(const uint8_t in[NET_HDR_BYTES], struct net_hdr *h);

/* The HELLO payload. */
struct net_hello {
    uint64_t from_instance;
    uint64_t to_instance; /* the target instance the initiator's metadata names */
    char name[256];
    /* The highest notification sequence number the target acknowledged to this initiator
     * instance (0: none); absent in a HELLO without it (read as 0). */
    uint64_t notif_acked;
};
size_t net_hello_encode(const struct net_hello *h, uint8_t *out, size_t cap);
int net_hello_decode(const uint8_t *in, size_t len, struct net_hello *h);

#endif

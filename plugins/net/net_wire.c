#include "net_wire.h"

#include <string.h>

#include "../common/ixl_plugin_util.h"

void net_hdr_encode(const struct net_hdr *h, uint8_t out[NET_HDR_BYTES])
{
    ixlp_put_le(out, NET_MAGIC, 4);
    out[4] = NET_WIRE_VERSION;
    out[5] = h->op;
    ixlp_put_le(out + 6, h->flags, 2);
    ixlp_put_le(out + 8, (uint32_t)h->status, 4);
    ixlp_put_le(out + 12, h->chunk, 4);
    ixlp_put_le(out + 16, h->req, 8);
    ixlp_put_le(out + 24, h->addr, 8);
    ixlp_put_le(out + 32, h->len, 8);
    ixlp_put_le(out + 40, h->key, 8);
}

int net_hdr_decode(const uint8_t in[NET_HDR_BYTES], struct net_hdr *h)
{
    if (ixlp_get_le(in, 4) != NET_MAGIC || in[4] != NET_WIRE_VERSION || in[5] == 0 ||
        in[5] > NET_OP_MAX)
        return -1;
    h->op = in[5];
    h->flags = (uint16_t)ixlp_get_le(in + 6, 2);
    h->status = (int32_t)(uint32_t)ixlp_get_le(in + 8, 4);
    h->chunk = (uint32_t)ixlp_get_le(in + 12, 4);
    h->req = ixlp_get_le(in + 16, 8);
    h->addr = ixlp_get_le(in + 24, 8);
    h->len = ixlp_get_le(in + 32, 8);
    h->key = ixlp_get_le(in + 40, 8);
    if (h->op == NET_HELLO && (h->len < 18 || h->len > NET_HELLO_MAX))
        return -1;
    if ((h->op == NET_HELLO_ACK || h->op == NET_WRITE_ACK || h->op == NET_PING ||
         h->op == NET_PONG || h->op == NET_HOLD || h->op == NET_NOTIF_ACK) &&
        h->len != 0)
        return -1;
    if ((h->op == NET_NOTIF && h->req == 0) || (h->op == NET_NOTIF_ACK && !(h->flags & NET_F_ACK)))
        return -1; /* a notification without its sequence number, an ack without a value */
    if ((h->op == NET_CHALLENGE && h->len != NET_CHALLENGE_BYTES) ||
        (h->op == NET_AUTH && h->len != NET_MAC_BYTES))
        return -1;
    if ((h->op == NET_WRITE || h->op == NET_READ) && h->len == 0)
        return -1;
    return 0;
}

size_t net_hello_encode(const struct net_hello *h, uint8_t *out, size_t cap)
{
    size_t n = strnlen(h->name, sizeof(h->name) - 1);
    if (cap < 26 + n)
        return 0;
    ixlp_put_le(out, h->from_instance, 8);
    ixlp_put_le(out + 8, h->to_instance, 8);
    ixlp_put_le(out + 16, n, 2);
    memcpy(out + 18, h->name, n);
    ixlp_put_le(out + 18 + n, h->notif_acked, 8);
    return 26 + n;
}

int net_hello_decode(const uint8_t *in, size_t len, struct net_hello *h)
{
    if (len < 18)
        return -1;
    size_t n = (size_t)ixlp_get_le(in + 16, 2);
    if (n == 0 || n >= sizeof(h->name) || (len != 18 + n && len != 26 + n) || memchr(in + 18, 0, n))
        return -1;
    h->from_instance = ixlp_get_le(in, 8);
    h->to_instance = ixlp_get_le(in + 8, 8);
    memcpy(h->name, in + 18, n);
    h->name[n] = '\0';
    h->notif_acked = len == 26 + n ? ixlp_get_le(in + 18 + n, 8) : 0;
    return 0;
}

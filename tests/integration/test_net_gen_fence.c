/*
 * A torn-down connection's WRITE must not land after a newer connection's (found by
 * bench/stress.sh: test_net_reconnect saw a WRITE complete IXL_OK and then its slot hold the
 * bytes of a WRITE to that slot 16 requests earlier, which had failed in a teardown). The
 * initiator fails the requests of a connection generation when it tears it down and posts new
 * ones on the next generation; the old connection's bytes may still wait in the target's
 * socket buffer and be taken after the new generation's. The target knows each connection's
 * generation from its HELLO and fences the older one off.
 *
 * A raw client (net_raw.h) plays the initiator against this process's NET target:
 *   1. connection 1 (generation 1): HELLO, then a WRITE of pattern A to region R, header and
 *      the first quarter of its body only (that quarter lands: it came first);
 *   2. connection 2 (generation 2, same name and instance): a WRITE of pattern B to R,
 *      acknowledged OK; R holds B;
 *   3. connection 1 sends the rest of A: R must still hold B everywhere, and connection 1's
 *      WRITE is answered with an error.
 * Also: a connection of a new instance of the same name starts its own generations (a
 * restarted initiator's generation 1 is not fenced by the old instance's 2). ~1 s.
 */
#include <stdlib.h>

#include "net_raw.h"

#define RLEN 4096u

static int hello_gen(int fd, uint64_t from_instance, uint64_t to_instance, const char *name,
                     uint64_t gen)
{
    uint8_t b[NET_HDR_BYTES + NET_HELLO_MAX];
    size_t n = strlen(name);
    uint8_t *pl = b + NET_HDR_BYTES;
    nr_put(pl, from_instance, 8);
    nr_put(pl + 8, to_instance, 8);
    nr_put(pl + 16, n, 2);
    memcpy(pl + 18, name, n);
    nr_hdr(b, NET_HELLO, gen, 0, 18 + n, 0);
    if (nr_send(fd, b, NET_HDR_BYTES + 18 + n) != 0)
        return -1000;
    return nr_hello_ack(fd);
}

/* The status of the next WRITE_ACK on fd, or -1000. */
static int write_ack(int fd)
{
    uint8_t h[NET_HDR_BYTES];
    if (nr_recv_all(fd, h, sizeof(h)) != 0 || nr_get(h, 4) != NET_MAGIC || h[5] != NET_WRITE_ACK)
        return -1000;
    return (int)(int32_t)(uint32_t)nr_get(h + 8, 4);
}

static int all_equal(const uint8_t *p, const uint8_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != want[i]) {
            fprintf(stderr, "FAIL: %s: byte %zu is 0x%02x, want 0x%02x\n", what, i, p[i], want[i]);
            return 0;
        }
    return 1;
}

/* Waits up to 2 s for region r to equal want (the target writes on its own thread). */
static int settle(const uint8_t *r, const uint8_t *want, size_t n)
{
    for (int i = 0; i < 200 && memcmp(r, want, n) != 0; i++)
        nr_sleep_ms(10);
    return memcmp(r, want, n) == 0;
}

int main(void)
{
    alarm(60);
    struct ixl_agent *t;
    const char *kv[] = {"timeout_ms", "5000", NULL};
    char why[512] = "";
    if (nr_agent("fence-target", kv, &t, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "FAIL: %s\n", why);
        return 1;
    }
    uint8_t *r = aligned_alloc(4096, RLEN);
    uint8_t a[RLEN], b[RLEN], c[RLEN];
    for (size_t i = 0; i < RLEN; i++) {
        a[i] = (uint8_t)(0xA0 ^ (i * 7));
        b[i] = (uint8_t)(0x5B ^ (i * 13));
        c[i] = (uint8_t)(0x3C ^ (i * 29));
        r[i] = 0xEE; /* poison */
    }
    struct ixl_reg_desc d = {.addr = (uintptr_t)r, .len = RLEN};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    struct nr_target tg;
    nr_learn(t, &tg);
    uint64_t key = nr_region_key(t, (uintptr_t)r, RLEN);
    const uint64_t inst = 0x1111;

    /* 1. generation 1: a WRITE of A, a quarter of its body sent */
    int c1 = nr_connect(tg.port, 0, 5000);
    CHECK(c1 >= 0);
    CHECK(hello_gen(c1, inst, tg.instance, "fence-init", 1) == 0);
    uint8_t h[NET_HDR_BYTES];
    nr_hdr(h, NET_WRITE, 1, (uintptr_t)r, RLEN, key);
    CHECK(nr_send(c1, h, sizeof(h)) == 0);
    CHECK(nr_send(c1, a, RLEN / 4) == 0);
    CHECK(settle(r, a, RLEN / 4)); /* the first quarter landed: it came before anything else */

    /* 2. generation 2: a WRITE of B, acknowledged */
    int c2 = nr_connect(tg.port, 0, 5000);
    CHECK(c2 >= 0);
    CHECK(hello_gen(c2, inst, tg.instance, "fence-init", 2) == 0);
    nr_hdr(h, NET_WRITE, 2, (uintptr_t)r, RLEN, key);
    CHECK(nr_send(c2, h, sizeof(h)) == 0 && nr_send(c2, b, RLEN) == 0);
    CHECK(write_ack(c2) == 0);
    CHECK(all_equal(r, b, RLEN, "after generation 2's WRITE"));

    /* 3. the rest of generation 1's WRITE arrives late: fenced off */
    CHECK(nr_send(c1, a + RLEN / 4, RLEN - RLEN / 4) == 0);
    int st = write_ack(c1);
    printf("generation 1's late WRITE answered %d (%s)\n", st, ixl_strerror(st));
    CHECK(st != 0 && st != -1000);
    CHECK(all_equal(r, b, RLEN, "after generation 1's late bytes"));

    /* A restarted initiator (new instance) starts again at generation 1: not fenced. */
    int c3 = nr_connect(tg.port, 0, 5000);
    CHECK(c3 >= 0);
    CHECK(hello_gen(c3, inst + 1, tg.instance, "fence-init", 1) == 0);
    nr_hdr(h, NET_WRITE, 3, (uintptr_t)r, RLEN, key);
    CHECK(nr_send(c3, h, sizeof(h)) == 0 && nr_send(c3, c, RLEN) == 0);
    CHECK(write_ack(c3) == 0);
    CHECK(all_equal(r, c, RLEN, "after a new instance's WRITE"));

    close(c1);
    close(c2);
    close(c3);
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    ixl_agent_destroy(t);
    free(r);
    printf("PASS\n");
    return 0;
}

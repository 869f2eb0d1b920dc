/*
 * Metadata exchange in etcd mode, across processes: a real etcd (etcd_ctl.c) started by the
 * test with a small request limit (64 KiB), this process's agent "hub" and ixl_peer processes
 * (agent.etcd=...) publish, fetch and invalidate through it, then transfer over NET.
 *
 * Covered: publish + fetch, a fetch waiting for a name published later, labeled partial
 * metadata, metadata several times the request limit (split, reassembled), invalidation seen
 * through the watch, a killed agent whose entry expires with its lease (IXL_ETCD_TTL=2) and is
 * dropped by the watchers, and a restarted agent replacing its old entry.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "etcd_ctl.h"
#include "net_common.h"
#include "peer_ctl.h"

#ifndef IXL_PEER_PATH
#error "IXL_PEER_PATH must name the ixl_peer binary"
#endif

#define BUF_LEN ((size_t)1 << 20)
#define WAIT_MS 15000
#define N_SMALL 8000 /* regions of the hub: metadata well over etcd's 64 KiB request limit */

static struct etcd_srv srv;
static char peer_opt[128];

static struct ixl_agent *agent_etcd(const char *name)
{
    struct ixl_agent_params ap = {
        .field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
        .backends = "NET",
        .etcd_endpoints = srv.endpoint,
    };
    struct ixl_agent *a;
    int rc = ixl_agent_create(name, &ap, &a);
    if (rc == IXL_ERR_NOT_SUPPORTED)
        skip(1, "ixl was built without etcd support (IXL_WITH_ETCD=OFF)");
    CHECK_RC(rc, IXL_OK);
    return a;
}

static uint64_t wait_state(struct ixl_agent *a, const char *remote, int want, int ms)
{
    uint64_t t0 = now_ms();
    while (ixl_remote_check(a, remote, NULL) != want) {
        if (now_ms() - t0 > (uint64_t)ms)
            check_fail(__FILE__, __LINE__, "'%s' still %s after %d ms", remote,
                       want == IXL_OK ? "not loaded" : "loaded", ms);
        sleep_ms(10);
    }
    return now_ms() - t0;
}

static struct ixl_dlist *list1(uint64_t addr, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static struct peer *start_peer(const char *name)
{
    struct peer *p = peer_start(name, peer_opt, NULL);
    peer_ready(p);
    return p;
}

int main(void)
{
    peers_init("test_mdx_etcd", IXL_PEER_PATH);
    signal(SIGPIPE, SIG_IGN);
    alarm(115);
    etcd_require();
    CHECK(etcd_start(&srv, 65536) == 0);
    setenv("IXL_ETCD_TTL", "2", 1); /* the peers inherit it */
    snprintf(peer_opt, sizeof(peer_opt), "agent.etcd=%s", srv.endpoint);
    uint64_t t0 = now_ms();

    struct ixl_agent *hub = agent_etcd("hub");
    uint8_t *local = aligned_alloc(4096, BUF_LEN);
    CHECK(local != NULL);
    struct ixl_reg_desc rd = {(uintptr_t)local, BUF_LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(hub, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);

    /* publish, fetch, transfer */
    struct peer *p1 = start_peer("p1");
    struct rbuf b1 = peer_alloc(p1, 0, BUF_LEN, "heap");
    PEER_OK(p1, "mdsend etcd 0");
    CHECK_RC(ixl_md_fetch(hub, "p1", NULL, NULL), IXL_OK);
    uint64_t took = wait_state(hub, "p1", IXL_OK, WAIT_MS);
    peer_roundtrip(hub, local, &b1, BUF_LEN);
    fprintf(stderr, "p1 published, hub fetched it in %" PRIu64 " ms: 1 MiB WRITE+READ ok\n", took);

    /* a fetch that waits for a name published later */
    CHECK_RC(ixl_md_fetch(hub, "p2", NULL, NULL), IXL_OK);
    sleep_ms(300);
    CHECK(ixl_remote_check(hub, "p2", NULL) == IXL_ERR_NOT_FOUND);
    struct peer *p2 = start_peer("p2");
    struct rbuf b2 = peer_alloc(p2, 0, BUF_LEN, "heap");
    struct rbuf b2y = peer_alloc(p2, 1, BUF_LEN, "heap");
    PEER_OK(p2, "mdsend etcd 0");
    took = wait_state(hub, "p2", IXL_OK, WAIT_MS);
    peer_roundtrip(hub, local, &b2, BUF_LEN);
    fprintf(stderr, "a fetch waited for p2, loaded %" PRIu64 " ms after it published\n", took);

    /* labels: only buffer 1 of p2 under "kv1" */
    PEER_OK(p2, "mdsend etcd 0 kv1 1");
    struct ixl_agent *lab = agent_etcd("labeled");
    CHECK_RC(ixl_mem_register(lab, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    CHECK_RC(ixl_md_fetch(lab, "p2", NULL, "kv1"), IXL_OK);
    wait_state(lab, "p2", IXL_OK, WAIT_MS);
    struct ixl_dlist *in1 = list1(b2y.addr, BUF_LEN), *in0 = list1(b2.addr, BUF_LEN);
    CHECK_RC(ixl_remote_check(lab, "p2", in1), IXL_OK);
    CHECK(ixl_remote_check(lab, "p2", in0) == IXL_ERR_NOT_FOUND);
    peer_roundtrip(lab, local, &b2y, 4096);
    ixl_dlist_destroy(in1);
    ixl_dlist_destroy(in0);
    fprintf(stderr, "labeled partial metadata: fetched by label, only its region loaded\n");

    /* metadata over the request limit: the hub with N_SMALL more regions, fetched by p1 */
    static uint8_t small[N_SMALL][256];
    struct ixl_reg_desc *sd = calloc(N_SMALL, sizeof(*sd));
    CHECK(sd != NULL);
    for (int i = 0; i < N_SMALL; i++)
        sd[i] = (struct ixl_reg_desc){(uintptr_t)small[i], sizeof(small[i]), 0, NULL, 0};
    CHECK_RC(ixl_mem_register(hub, IXL_MEM_DRAM, sd, N_SMALL, NULL), IXL_OK);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(hub, NULL, &md, &md_len), IXL_OK);
    ixl_free(md);
    CHECK(md_len > 3 * 65536);
    CHECK_RC(ixl_md_send(hub, NULL, NULL), IXL_OK);
    PEER_OK(p1, "mdfetch hub etcd 0");
    PEER_OK(p1, "mdwait hub %d", WAIT_MS);
    fprintf(stderr, "metadata of %zu bytes (etcd limit 65536) published and fetched whole\n",
            md_len);

    /* invalidate_local: the hub's watch drops p1 */
    PEER_OK(p1, "mdinval etcd 0");
    took = wait_state(hub, "p1", IXL_ERR_NOT_FOUND, WAIT_MS);
    fprintf(stderr, "p1 invalidated itself: the hub's watch dropped it in %" PRIu64 " ms\n", took);

    /* a killed agent: its lease expires (TTL 2 s), the watchers drop it */
    peer_kill(p2);
    uint64_t k0 = now_ms();
    took = wait_state(hub, "p2", IXL_ERR_NOT_FOUND, 10000);
    wait_state(lab, "p2", IXL_ERR_NOT_FOUND, 10000);
    CHECK(took >= 1000);
    fprintf(stderr, "p2 killed: its entry expired and the hub dropped it after %" PRIu64 " ms\n",
            now_ms() - k0);

    /* restarted under the same name: the new instance replaces the old entry */
    p2 = start_peer("p2");
    b2 = peer_alloc(p2, 0, BUF_LEN, "heap");
    PEER_OK(p2, "mdsend etcd 0");
    CHECK_RC(ixl_md_fetch(hub, "p2", NULL, NULL), IXL_OK);
    wait_state(hub, "p2", IXL_OK, WAIT_MS);
    peer_roundtrip(hub, local, &b2, BUF_LEN);
    fprintf(stderr, "p2 restarted and republished: fetched again, transfers ok\n");

    peer_exit(p2);
    peer_exit(p1);
    CHECK_RC(ixl_mem_deregister(hub, IXL_MEM_DRAM, sd, N_SMALL, NULL), IXL_OK);
    free(sd);
    CHECK_RC(ixl_mem_deregister(lab, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(lab);
    CHECK_RC(ixl_mem_deregister(hub, IXL_MEM_DRAM, &rd, 1, NULL), IXL_OK);
    ixl_agent_destroy(hub);
    free(local);
    etcd_stop(&srv);
    fprintf(stderr, "test_mdx_etcd: all passed in %" PRIu64 " ms\n", now_ms() - t0);
    return 0;
}

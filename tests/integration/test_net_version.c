/*
 * A peer of the older NET (wire version 1, connection info "IXLNETC2") is refused when its
 * metadata is loaded, with a message naming both versions, and nothing is loaded: an agent's
 * real metadata with its NET connection info's magic turned back to "IXLNETC2" goes to another
 * agent, which refuses it (IXL_ERR_MALFORMED); the unchanged metadata then loads and a WRITE
 * of a fresh pattern lands. ~0.2 s.
 */
#include <stdlib.h>

#include "net_raw.h"

#define LEN 4096

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(60);
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1", NULL};
    char why[256];
    struct ixl_agent *t = NULL, *a = NULL;
    if (nr_agent("ver-t", kv, &t, why, sizeof(why)) != IXL_OK ||
        nr_agent("ver-i", kv, &a, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    static uint8_t tb[LEN], ib[LEN];
    struct ixl_reg_desc td = {(uint64_t)(uintptr_t)tb, LEN, 0, NULL, 0};
    struct ixl_reg_desc id = {(uint64_t)(uintptr_t)ib, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &td, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(t, NULL, &md, &md_len), IXL_OK);
    uint8_t *old = malloc(md_len);
    CHECK(old != NULL);
    memcpy(old, md, md_len);
    uint8_t *c = memmem(old, md_len, "IXLNETC3", 8);
    CHECK(c != NULL);
    c[7] = '2';
    ixl_status st = ixl_md_load(a, old, md_len, NULL, 0);
    const char *err = ixl_agent_last_error(a);
    printf("metadata of the older NET: %s: %s\n", ixl_strerror(st), err);
    CHECK(st == IXL_ERR_MALFORMED);
    CHECK(strstr(err, "IXLNETC2") != NULL && strstr(err, "IXLNETC3") != NULL);
    /* Nothing of it was loaded: a request to it is refused. */
    struct ixl_xfer *x = NULL;
    CHECK(nr_xfer(a, IXL_OP_WRITE, ib, td.addr, LEN, "ver-t", &x) != IXL_OK);
    /* The real metadata loads, and a checked WRITE goes. */
    CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
    for (size_t i = 0; i < LEN; i++) {
        ib[i] = (uint8_t)(i * 7 + 3);
        tb[i] = 0xA5;
    }
    CHECK_RC(nr_xfer(a, IXL_OP_WRITE, ib, td.addr, LEN, "ver-t", &x), IXL_OK);
    CHECK_RC(nr_post_wait(x, 20000), IXL_OK);
    CHECK(memcmp(ib, tb, LEN) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_free(md);
    free(old);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, &td, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    ixl_agent_destroy(t);
    printf("PASS\n");
    return 0;
}

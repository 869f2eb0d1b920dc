/*
 * One initiator with many remotes loaded (a decode worker reading from many prefill workers),
 * argv[1] naming the backend: "net" (40 NET peers: NET finds the peer of each request by name,
 * net_peer_find) or "ucx" (20 UCX remotes: remote_find of the UCX plugin; skips (77) without
 * the plugin). Both look names up in plugins/common/ixl_name_index.h, which grows from 16 slots,
 * at most half full. This process runs the target agents and the initiator (NET: loopback TCP
 * and the same-node paths NET picks, io_threads=1 each; UCX: over tcp); the initiator loads
 * every target's metadata in a shuffled order, so that its index doubles (to 128 slots for NET,
 * 64 for UCX).
 *
 * Two rounds, each over every target in another shuffled order: a WRITE of 4 KiB of a fresh
 * pattern into the target's buffer at an offset of its own (the whole buffer poisoned before),
 * then the buffer checked: the pattern there, the poison everywhere else; then a READ of
 * another fresh pattern back into the initiator's poisoned buffer, checked the same way. A
 * request that reached the wrong remote, or none, fails a check. Then the medians of making
 * (ixl_xfer_create) and of post -> done of TIMED 4 KiB WRITEs to the first target loaded and to
 * the last (printed: informational). Under a second each.
 */
#include <stdlib.h>

#include "net_raw.h"

#define MAX_TARGETS 40
#define BUF (64u << 10)
#define LEN 4096u
#define TIMED 1000

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = (seed + i) * 0x9E3779B97F4A7C15ull + 1;
        memcpy(p + i, &v, 8);
    }
}

static void shuffle(int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* buf holds want[0, LEN) at off and poison everywhere else. */
static void check_buf(const uint8_t *buf, const uint8_t *want, size_t off, uint8_t poison,
                      const char *what, int target)
{
    for (size_t i = 0; i < BUF; i++) {
        uint8_t w = i >= off && i < off + LEN ? want[i - off] : poison;
        if (buf[i] != w)
            check_fail(__FILE__, __LINE__, "%s, target %d: byte %zu is 0x%02x, want 0x%02x", what,
                       target, i, buf[i], w);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Medians over TIMED 4 KiB WRITEs from ib to target name's buffer at tb: of making the
 * request (ixl_xfer_create) into *make_us, of post -> done returned. */
static double median_us(struct ixl_agent *a, const uint8_t *ib, uint64_t tb, const char *name,
                        double *make_us)
{
    static uint64_t t[TIMED], m[TIMED];
    for (int k = 0; k < TIMED; k++) {
        struct ixl_xfer *x = NULL;
        uint64_t t0 = now_ns();
        CHECK_RC(nr_xfer(a, IXL_OP_WRITE, ib, tb, LEN, name, &x), IXL_OK);
        uint64_t t1 = now_ns();
        CHECK_RC(nr_post_wait(x, 20000), IXL_OK);
        t[k] = now_ns() - t1;
        m[k] = t1 - t0;
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    qsort(t, TIMED, sizeof(t[0]), cmp_u64);
    qsort(m, TIMED, sizeof(m[0]), cmp_u64);
    *make_us = (double)m[TIMED / 2] / 1e3;
    return (double)t[TIMED / 2] / 1e3;
}

static bool use_ucx;

/* An agent with the backend under test. UCX: IXL_ERR_NOT_FOUND / IXL_ERR_PLUGIN without it. */
static int make_agent(const char *name, struct ixl_agent **out)
{
    if (!use_ucx) {
        const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1",
                            "io_threads",  "1",         NULL};
        char why[2048];
        int rc = nr_agent(name, kv, out, why, sizeof(why));
        if (rc != IXL_OK)
            check_fail(__FILE__, __LINE__, "%s: %s", name, why);
        return rc;
    }
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create(name, &ap, out), IXL_OK);
    const struct ixl_kv kv[] = {{"transports", "tcp"}};
    int rc = ixl_backend_create(*out, "UCX", kv, 1, NULL);
    if (rc != IXL_OK)
        ixl_agent_destroy(*out);
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(100);
    srand(31);
    use_ucx = argc > 1 && strcmp(argv[1], "ucx") == 0;
    const int ntargets = use_ucx ? 20 : MAX_TARGETS;
    const char *be = use_ucx ? "UCX" : "NET";
    ixl_log_set_level(IXL_LOG_ERROR);
    char name[MAX_TARGETS][32];
    struct ixl_agent *t[MAX_TARGETS], *a = NULL;
    uint8_t *tbuf[MAX_TARGETS];
    int rc = make_agent("many-i", &a);
    if (use_ucx && (rc == IXL_ERR_NOT_FOUND || rc == IXL_ERR_PLUGIN))
        skip(1, "the UCX plugin was not built (libucx missing)");
    CHECK_RC(rc, IXL_OK);
    uint8_t *ib = malloc(BUF), *want = malloc(LEN);
    CHECK(ib != NULL && want != NULL);
    struct ixl_reg_desc id = {(uint64_t)(uintptr_t)ib, BUF, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    int order[MAX_TARGETS];
    for (int i = 0; i < ntargets; i++) {
        snprintf(name[i], sizeof(name[i]), "many-target-%02d", i);
        CHECK_RC(make_agent(name[i], &t[i]), IXL_OK);
        tbuf[i] = malloc(BUF);
        CHECK(tbuf[i] != NULL);
        struct ixl_reg_desc td = {(uint64_t)(uintptr_t)tbuf[i], BUF, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(t[i], IXL_MEM_DRAM, &td, 1, NULL), IXL_OK);
        order[i] = i;
    }
    shuffle(order, ntargets);
    int first = order[0], last = order[ntargets - 1]; /* loaded first and last */
    for (int k = 0; k < ntargets; k++) {
        void *md;
        size_t md_len;
        CHECK_RC(ixl_md_get(t[order[k]], NULL, &md, &md_len), IXL_OK);
        CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
        ixl_free(md);
    }
    for (int round = 0; round < 2; round++) {
        shuffle(order, ntargets);
        for (int k = 0; k < ntargets; k++) {
            int i = order[k];
            size_t off = (size_t)((i + round) % (BUF / LEN)) * LEN;
            uint64_t tb = (uint64_t)(uintptr_t)tbuf[i] + off;
            struct ixl_xfer *x = NULL;
            fill(ib, LEN, 1000u * (unsigned)round + (unsigned)i);
            memcpy(want, ib, LEN);
            memset(tbuf[i], 0x5A, BUF);
            CHECK_RC(nr_xfer(a, IXL_OP_WRITE, ib, tb, LEN, name[i], &x), IXL_OK);
            CHECK_RC(nr_post_wait(x, 20000), IXL_OK);
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            check_buf(tbuf[i], want, off, 0x5A, "WRITE", i);
            fill(tbuf[i] + off, LEN, 5000u + 1000u * (unsigned)round + (unsigned)i);
            memcpy(want, tbuf[i] + off, LEN);
            memset(ib, 0xC3, BUF);
            CHECK_RC(nr_xfer(a, IXL_OP_READ, ib, tb, LEN, name[i], &x), IXL_OK);
            CHECK_RC(nr_post_wait(x, 20000), IXL_OK);
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            check_buf(ib, want, 0, 0xC3, "READ", i);
        }
    }
    printf("%d remotes loaded in one %s agent: WRITE and READ to each, twice, every byte "
           "checked\n",
           ntargets, be);
    double fm, lm;
    double f = median_us(a, ib, (uint64_t)(uintptr_t)tbuf[first], name[first], &fm);
    double l = median_us(a, ib, (uint64_t)(uintptr_t)tbuf[last], name[last], &lm);
    printf("4 KiB WRITE, medians of %d: to %s (loaded first) made in %.2f us, post -> done "
           "%.1f us; to %s (loaded last) %.2f us, %.1f us\n",
           TIMED, name[first], fm, f, name[last], lm, l);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    for (int i = 0; i < ntargets; i++) {
        ixl_agent_destroy(t[i]);
        free(tbuf[i]);
    }
    free(ib);
    free(want);
    printf("PASS\n");
    return 0;
}

/* Transfers end to end through the in-memory TEST plugin: loopback and between two agents,
 * READ and WRITE, notifications, in-flight states, prepared lists and index requests, merging,
 * telemetry, errors that name what is wrong, the release contract, deregistration refusals. */
#include <poll.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define SZ (1 << 20)

static unsigned char *src, *dst, *other;
static uint32_t pattern_seed = 1;

static void fill(unsigned char *p, size_t n)
{
    uint32_t x = pattern_seed++ * 2654435761u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
}

static struct ixl_dlist *list1(uint64_t addr, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static struct ixl_agent *make_agent(const char *name, const char *backends)
{
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = backends};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    return a;
}

static void reg(struct ixl_agent *a, void *p, size_t n)
{
    struct ixl_reg_desc d = {(uintptr_t)p, n, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
}

static int dereg(struct ixl_agent *a, void *p, size_t n)
{
    struct ixl_reg_desc d = {(uintptr_t)p, n, 0, NULL, 0};
    return ixl_mem_deregister(a, IXL_MEM_DRAM, &d, 1, NULL);
}

static void load_into(struct ixl_agent *to, struct ixl_agent *from)
{
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(from, NULL, &blob, &len), IXL_OK);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(to, blob, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, ixl_agent_name(from)) == 0);
    ixl_free(blob);
}

static struct ixl_notif_batch *drain_until(struct ixl_agent *a, size_t want, int ms)
{
    struct ixl_notif_batch *all = NULL;
    for (int t = 0; t < ms; t++) {
        struct ixl_notif_batch *b = NULL;
        CHECK_RC(ixl_notif_drain(a, &b), IXL_OK);
        if (b) {
            CHECK(all == NULL); /* the tests below expect one batch */
            all = b;
        }
        if (all && all->count >= want)
            break;
        usleep(1000);
    }
    return all;
}

static void test_loopback(void)
{
    struct ixl_agent *a = make_agent("loop", "TEST");
    reg(a, src, SZ);
    reg(a, dst, SZ);
    struct ixl_dlist *l = list1((uintptr_t)src, SZ), *r = list1((uintptr_t)dst, SZ);
    for (int op = 0; op < 2; op++) {
        fill(src, SZ);
        fill(dst, SZ);
        struct ixl_xfer *x;
        /* WRITE local into remote; READ remote into local: swap the lists for READ so data
         * always goes src -> dst. */
        if (op == 0)
            CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "loop", NULL, &x), IXL_OK);
        else
            CHECK_RC(ixl_xfer_create(a, IXL_OP_READ, r, l, "loop", NULL, &x), IXL_OK);
        CHECK_RC(ixl_xfer_status(x), IXL_ERR_NOT_POSTED);
        int rc = ixl_xfer_post(x);
        CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
        CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
        CHECK(memcmp(src, dst, SZ) == 0);
        struct ixl_xfer_telemetry t = {.size = sizeof(t)};
        CHECK_RC(ixl_xfer_telemetry(x, &t), IXL_OK);
        CHECK(t.bytes == SZ && t.desc_count == 1 && t.post_count == 1);
        struct ixl_xfer_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
        CHECK(strcmp(info.backend, "TEST") == 0 && info.bytes == SZ);
        CHECK(info.path[0] != '\0');
        struct ixl_cost cost = {.size = sizeof(cost)};
        CHECK_RC(ixl_xfer_estimate(x, &cost), IXL_OK);
        CHECK(cost.method == IXL_COST_ANALYTICAL);
        /* Deregistering a region a request still uses is refused. */
        CHECK_RC(dereg(a, dst, SZ), IXL_ERR_BUSY);
        CHECK_STR_HAS(ixl_agent_last_error(a), "release them");
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    /* Errors that say what is wrong. */
    struct ixl_xfer *x = NULL;
    struct ixl_dlist *half = list1((uintptr_t)dst, SZ / 2);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, half, "loop", NULL, &x), IXL_ERR_MISMATCH);
    CHECK_STR_HAS(ixl_agent_last_error(a), "descriptor pair 0");
    struct ixl_dlist *two;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &two), IXL_OK);
    struct ixl_desc dd[2] = {{(uintptr_t)dst, 64, 0}, {(uintptr_t)other, 64, 0}};
    CHECK_RC(ixl_dlist_add(two, dd, 2), IXL_OK);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, two, "loop", NULL, &x), IXL_ERR_MISMATCH);
    struct ixl_dlist *l2;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &l2), IXL_OK);
    struct ixl_desc sd[2] = {{(uintptr_t)src, 64, 0}, {(uintptr_t)src + 64, 64, 0}};
    CHECK_RC(ixl_dlist_add(l2, sd, 2), IXL_OK);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l2, two, "loop", NULL, &x), IXL_ERR_NOT_REGISTERED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "descriptor 1 of the remote list");
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "nobody", NULL, &x), IXL_ERR_NOT_FOUND);
    CHECK_STR_HAS(ixl_agent_last_error(a), "metadata for remote agent 'nobody' not found");
    CHECK_RC(ixl_xfer_create(a, (enum ixl_op)7, l, r, "loop", NULL, &x), IXL_ERR_INVALID_ARG);
    char big[IXL_NOTIF_MAX_DEFAULT + 1];
    struct ixl_xfer_params p = {
        .field_mask = IXL_XFER_F_NOTIF, .notif = big, .notif_len = sizeof(big)};
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "loop", &p, &x), IXL_ERR_NOTIF_TOO_LARGE);
    /* A descriptor that overruns its region by one byte. */
    struct ixl_dlist *over = list1((uintptr_t)src + 1, SZ);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, over, r, "loop", NULL, &x), IXL_ERR_NOT_REGISTERED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "descriptor 0 of the local list");
    CHECK(x == NULL);
    ixl_dlist_destroy(over);
    ixl_dlist_destroy(l2);
    ixl_dlist_destroy(two);
    ixl_dlist_destroy(half);

    /* Loopback notification. */
    p.notif = "self";
    p.notif_len = 4;
    fill(src, SZ);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "loop", &p, &x), IXL_OK);
    int rc = ixl_xfer_post(x);
    CHECK(rc == IXL_OK || rc == IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    struct ixl_notif_batch *nb = drain_until(a, 1, 5000);
    CHECK(nb && nb->count == 1 && strcmp(nb->items[0].agent, "loop") == 0);
    CHECK(nb->items[0].len == 4 && memcmp(nb->items[0].msg, "self", 4) == 0);
    ixl_free(nb);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    CHECK_RC(dereg(a, dst, SZ), IXL_OK);
    CHECK_RC(dereg(a, dst, SZ), IXL_ERR_NOT_FOUND);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a); /* src is still registered: destroy deregisters it */
}

static void want_path(struct ixl_xfer *x, const char *want)
{
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.path, want) != 0) {
        fprintf(stderr, "FAIL: ixl_xfer_info's path is '%s', want '%s'\n", info.path, want);
        exit(1);
    }
}

/* ixl_xfer_info's path is the backend's for the last completed post (the TEST plugin numbers
 * its posts): read from the backend after each completion, whichever call saw it end (a post
 * done inline, ixl_xfer_wait, ixl_xfer_status); while a post is in flight, the one before. */
static void test_info_path(void)
{
    struct ixl_agent *a = make_agent("pathA", "TEST");
    reg(a, src, SZ);
    reg(a, dst, SZ);
    struct ixl_dlist *l = list1((uintptr_t)src, SZ), *r = list1((uintptr_t)dst, SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "pathA", NULL, &x), IXL_OK);
    want_path(x, "memcpy #0");
    CHECK_RC(ixl_xfer_post(x), IXL_OK); /* inline: done in post */
    want_path(x, "memcpy #1");
    CHECK_RC(ixl_xfer_post(x), IXL_OK);
    CHECK_RC(ixl_xfer_wait(x, 1000), IXL_OK);
    want_path(x, "memcpy #2");
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_agent_destroy(a);

    /* Asynchronous: completed by status, then by wait. */
    a = make_agent("pathB", "");
    struct ixl_kv slow[] = {{"delay_us", "20000"}};
    CHECK_RC(ixl_backend_create(a, "TEST", slow, 1, NULL), IXL_OK);
    reg(a, src, SZ);
    reg(a, dst, SZ);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "pathB", NULL, &x), IXL_OK);
    want_path(x, "memcpy-async #0");
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    want_path(x, "memcpy-async #0"); /* in flight: the path so far */
    int rc = IXL_IN_PROGRESS;
    for (int i = 0; i < 5000 && (rc = ixl_xfer_status(x)) == IXL_IN_PROGRESS; i++)
        usleep(1000);
    CHECK_RC(rc, IXL_OK);
    want_path(x, "memcpy-async #1");
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 5000), IXL_OK);
    want_path(x, "memcpy-async #2");
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
}

static void test_two_agents_async(void)
{
    /* The target side: TEST with a delay so requests are really in flight. */
    struct ixl_agent *b = make_agent("B", "");
    struct ixl_kv slow[] = {{"delay_us", "20000"}};
    CHECK_RC(ixl_backend_create(b, "TEST", slow, 1, NULL), IXL_OK);
    struct ixl_agent *a = make_agent("A", "");
    CHECK_RC(ixl_backend_create(a, "TEST", slow, 1, NULL), IXL_OK);
    reg(a, src, SZ);
    reg(b, dst, SZ);
    load_into(a, b);
    CHECK_RC(ixl_remote_check(a, "B", NULL), IXL_OK);
    CHECK_RC(ixl_remote_connect(a, "B"), IXL_OK);

    struct ixl_dlist *l = list1((uintptr_t)src, SZ), *r = list1((uintptr_t)dst, SZ);
    CHECK_RC(ixl_remote_check(a, "B", r), IXL_OK);
    CHECK_RC(ixl_remote_check(a, "B", l), IXL_ERR_NOT_FOUND);
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NOTIF, .notif = "done-1", .notif_len = 6};
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "B", &p, &x), IXL_OK);
    fill(src, SZ);
    memset(dst, 0xee, SZ);
    int fd;
    CHECK_RC(ixl_agent_fd(a, &fd), IXL_OK);
    CHECK_RC(ixl_agent_progress(a), IXL_OK); /* clears the fd */
    int bfd;
    CHECK_RC(ixl_agent_fd(b, &bfd), IXL_OK);
    CHECK_RC(ixl_agent_progress(b), IXL_OK);
    struct pollfd bp = {.fd = bfd, .events = POLLIN};
    CHECK(poll(&bp, 1, 0) == 0);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_REPOST_ACTIVE);
    CHECK_RC(ixl_xfer_set_notif(x, "x", 1), IXL_ERR_REPOST_ACTIVE);
    /* The fd becomes readable when the request completes. */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 10000) == 1);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(src, dst, SZ) == 0);
    /* The target's fd became readable when the notification arrived, which is after the data
     * (the contract), exactly once. */
    CHECK(poll(&bp, 1, 10000) == 1);
    struct ixl_notif_batch *nb = drain_until(b, 1, 5000);
    CHECK(nb && nb->count == 1 && strcmp(nb->items[0].agent, "A") == 0);
    CHECK(memcmp(nb->items[0].msg, "done-1", 6) == 0);
    ixl_free(nb);

    /* Post again with a new notification and a fresh pattern; then a timeout wait. */
    fill(src, SZ);
    CHECK_RC(ixl_xfer_set_notif(x, "done-2", 6), IXL_OK);
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 0), IXL_ERR_TIMEOUT);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    uint64_t wall_us = (uint64_t)(w1.tv_sec - w0.tv_sec) * 1000000u +
                       (uint64_t)(w1.tv_nsec / 1000) - (uint64_t)(w0.tv_nsec / 1000);
    CHECK(memcmp(src, dst, SZ) == 0);
    nb = drain_until(b, 1, 5000);
    CHECK(nb && nb->count == 1 && memcmp(nb->items[0].msg, "done-2", 6) == 0);
    ixl_free(nb);
    struct ixl_xfer_telemetry t = {.size = sizeof(t)};
    CHECK_RC(ixl_xfer_telemetry(x, &t), IXL_OK);
    CHECK(t.post_count == 2 && t.bytes == SZ && t.xfer_us >= 10000);
    /* The request's times lie inside the caller's (ticks, util/time.h, turned into us; the
     * TSC's rate is calibrated to within 0.07 %). */
    CHECK(t.xfer_us <= wall_us + wall_us / 500 + 1 && t.post_us <= t.xfer_us);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* READ back into a poisoned buffer. */
    memset(other, 0x5a, SZ);
    struct ixl_dlist *o = list1((uintptr_t)other, SZ);
    reg(a, other, SZ);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_READ, o, r, "B", NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(other, dst, SZ) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* Standalone notifications, and one to an unknown agent. */
    CHECK_RC(ixl_notif_send(a, "B", "ping", 4, NULL), IXL_OK);
    CHECK_RC(ixl_notif_send(a, "nobody", "ping", 4, NULL), IXL_ERR_NOT_FOUND);
    nb = drain_until(b, 1, 5000);
    CHECK(nb && nb->count == 1 && memcmp(nb->items[0].msg, "ping", 4) == 0);
    ixl_free(nb);

    /* Release while in flight: after IXL_OK nothing lands and no notification comes. */
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "B", &p, &x), IXL_OK);
    memset(dst, 0x11, SZ);
    fill(src, SZ);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_status(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    usleep(60000);
    for (size_t i = 0; i < SZ; i += 4096)
        CHECK(dst[i] == 0x11);
    struct ixl_notif_batch *none = NULL;
    CHECK_RC(ixl_notif_drain(b, &none), IXL_OK);
    CHECK(none == NULL);

    /* Invalidate: requests made before are refused at post, even after a reload. */
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "B", NULL, &x), IXL_OK);
    CHECK_RC(ixl_remote_invalidate(a, "B"), IXL_OK);
    CHECK_RC(ixl_remote_invalidate(a, "B"), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_STALE);
    load_into(a, b);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_STALE);
    CHECK_STR_HAS(ixl_agent_last_error(a), "make a new request");
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "B", NULL, &x), IXL_OK);
    fill(src, SZ);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(src, dst, SZ) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    struct ixl_agent_stats st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(a, &st), IXL_OK);
    CHECK(st.completed >= 4 && st.notifs_sent == 1);
    ixl_dlist_destroy(o);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
    ixl_agent_destroy(b);
}

static void test_release_busy_and_fail(void)
{
    struct ixl_agent *a = make_agent("R", "");
    struct ixl_kv opts[] = {{"delay_us", "30000"}, {"release_busy", "2"}};
    CHECK_RC(ixl_backend_create(a, "TEST", opts, 2, NULL), IXL_OK);
    reg(a, src, SZ);
    reg(a, dst, SZ);
    struct ixl_dlist *l = list1((uintptr_t)src, SZ), *r = list1((uintptr_t)dst, SZ);
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_NOTIF, .notif = "n", .notif_len = 1};
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "R", &p, &x), IXL_OK);
    memset(dst, 0x22, SZ);
    CHECK_RC(ixl_xfer_post(x), IXL_IN_PROGRESS);
    CHECK_RC(ixl_xfer_release(x), IXL_ERR_BUSY);
    CHECK_RC(ixl_xfer_status(x), IXL_ERR_CANCELED);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_NOT_ALLOWED);
    CHECK_RC(ixl_xfer_release(x), IXL_ERR_BUSY);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    usleep(60000);
    CHECK(dst[0] == 0x22 && dst[SZ - 1] == 0x22);
    struct ixl_notif_batch *none = NULL;
    CHECK_RC(ixl_notif_drain(a, &none), IXL_OK);
    CHECK(none == NULL);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);

    /* A backend that fails posts: the error and its text reach the caller. */
    a = make_agent("F", "");
    struct ixl_kv fail[] = {{"fail_post", "-402"}};
    CHECK_RC(ixl_backend_create(a, "TEST", fail, 1, NULL), IXL_OK);
    reg(a, src, SZ);
    reg(a, dst, SZ);
    l = list1((uintptr_t)src, SZ);
    r = list1((uintptr_t)dst, SZ);
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "F", NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_post(x), IXL_ERR_IO);
    CHECK(ixl_agent_last_error(a)[0] != '\0');
    CHECK_RC(ixl_xfer_status(x), IXL_ERR_IO);
    struct ixl_agent_stats st = {.size = sizeof(st)};
    CHECK_RC(ixl_agent_stats(a, &st), IXL_OK);
    CHECK(st.failed == 1 && st.completed == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
}

static void test_prepped(void)
{
    struct ixl_agent *a = make_agent("P", "TEST");
    struct ixl_agent *b = make_agent("Q", "TEST");
    reg(a, src, SZ);
    reg(b, dst, SZ);
    load_into(a, b);
    /* 4 "layers" of 64 blocks of 1 KiB: local blocks contiguous, remote blocks strided. */
    enum { LAYERS = 4, BLOCKS = 64, BL = 1024 };
    struct ixl_run lr[LAYERS], rr[LAYERS];
    for (int i = 0; i < LAYERS; i++) {
        lr[i] = (struct ixl_run){(uintptr_t)src + (uint64_t)i * BLOCKS * BL, BL, BL, BLOCKS, 0};
        rr[i] =
            (struct ixl_run){(uintptr_t)dst + (uint64_t)i * BLOCKS * 2 * BL, BL, 2 * BL, BLOCKS, 0};
    }
    struct ixl_dlist *ll, *rl;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, LAYERS, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, LAYERS, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(ll, lr, LAYERS), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(rl, rr, LAYERS), IXL_OK);
    struct ixl_prep *lp, *rp;
    CHECK_RC(ixl_prep_create(a, NULL, ll, NULL, &lp), IXL_OK);
    CHECK_RC(ixl_prep_create(a, "Q", rl, NULL, &rp), IXL_OK);
    CHECK(ixl_prep_count(lp) == LAYERS * BLOCKS);
    /* The regions a prepared list covers cannot be deregistered. */
    CHECK_RC(dereg(a, src, SZ), IXL_ERR_BUSY);

    /* Consecutive indices on the local side merge; the remote side is strided, so pairs
     * merge only where both sides are adjacent: here none. */
    int64_t li[BLOCKS], ri[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        li[i] = i;
        ri[i] = BLOCKS + i; /* layer 1 on the remote side */
    }
    fill(src, SZ);
    memset(dst, 0, SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, BLOCKS, NULL, &x), IXL_OK);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    for (int i = 0; i < BLOCKS; i++)
        CHECK(memcmp(src + (size_t)i * BL, dst + (size_t)(BLOCKS + i) * 2 * BL, BL) == 0);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == BLOCKS && info.bytes == (uint64_t)BLOCKS * BL);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* Both sides contiguous: a local prepared list against itself merges to 1 descriptor. */
    struct ixl_prep *self;
    CHECK_RC(ixl_prep_create(a, "P", ll, NULL, &self), IXL_OK);
    int64_t lo[BLOCKS], hi[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        lo[i] = i;
        hi[i] = 2 * BLOCKS + i;
    }
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, lo, self, hi, BLOCKS, NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == 1);
    fill(src, BLOCKS * BL);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(src, src + 2 * BLOCKS * BL, BLOCKS * BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    struct ixl_xfer_params nm = {.field_mask = IXL_XFER_F_NO_MERGE, .no_merge = true};
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, lo, self, hi, BLOCKS, &nm, &x), IXL_OK);
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == BLOCKS);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* Random indices, READ into the local side. */
    srand(7);
    int64_t rl_idx[100], rr_idx[100];
    for (int i = 0; i < 100; i++) {
        rl_idx[i] = i; /* distinct local targets */
        rr_idx[i] = rand() % (LAYERS * BLOCKS);
    }
    fill(dst, SZ);
    memset(src, 0, SZ);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_READ, lp, rl_idx, rp, rr_idx, 100, NULL, &x),
             IXL_OK);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    for (int i = 0; i < 100; i++) {
        int64_t k = rr_idx[i];
        const unsigned char *from =
            dst + (size_t)(k / BLOCKS) * BLOCKS * 2 * BL + (size_t)(k % BLOCKS) * 2 * BL;
        CHECK(memcmp(src + (size_t)i * BL, from, BL) == 0);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* Bad indices name the pair; wrong sides are refused. */
    int64_t bad[2] = {0, LAYERS * BLOCKS};
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_READ, lp, li, rp, bad, 2, NULL, &x), IXL_ERR_INDEX);
    CHECK_STR_HAS(ixl_agent_last_error(a), "index pair 1");
    bad[1] = -1;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_READ, lp, bad, rp, li, 2, NULL, &x), IXL_ERR_INDEX);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_READ, rp, li, lp, li, 2, NULL, &x),
             IXL_ERR_INVALID_ARG);

    /* A prepared target list of a remote that was reloaded is stale. */
    CHECK_RC(ixl_remote_invalidate(a, "Q"), IXL_OK);
    load_into(a, b);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, BLOCKS, NULL, &x),
             IXL_ERR_STALE);
    ixl_prep_destroy(rp);
    CHECK_RC(ixl_prep_create(a, "Q", rl, NULL, &rp), IXL_OK);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, BLOCKS, NULL, &x), IXL_OK);
    /* Requests outlive the lists they were made from. */
    ixl_prep_destroy(rp);
    fill(src, SZ);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(src, dst + (size_t)BLOCKS * 2 * BL, BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* An unregistered run is named at prepare time. */
    struct ixl_dlist *badl;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &badl), IXL_OK);
    struct ixl_run outside = {(uintptr_t)src + SZ - 4 * BL, BL, BL, 8, 0};
    CHECK_RC(ixl_dlist_add_runs(badl, &outside, 1), IXL_OK);
    struct ixl_prep *bp = NULL;
    CHECK_RC(ixl_prep_create(a, NULL, badl, NULL, &bp), IXL_ERR_NOT_REGISTERED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "descriptor 4 of the local list");
    ixl_dlist_destroy(badl);

    ixl_prep_destroy(lp);
    ixl_prep_destroy(self);
    CHECK_RC(dereg(a, src, SZ), IXL_OK);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    ixl_agent_destroy(a);
    ixl_agent_destroy(b);
}

static void test_backend_choice(void)
{
    /* TEST only takes VRAM here, TESTB takes DRAM: a DRAM transfer must go to TESTB. */
    struct ixl_agent *a = make_agent("C", "");
    struct ixl_backend *t, *tb;
    struct ixl_kv vram[] = {{"mems", "VRAM"}};
    CHECK_RC(ixl_backend_create(a, "TEST", vram, 1, &t), IXL_OK);
    CHECK_RC(ixl_backend_create(a, "TESTB", NULL, 0, &tb), IXL_OK);
    reg(a, src, SZ);
    reg(a, dst, SZ);
    struct ixl_dlist *l = list1((uintptr_t)src, SZ), *r = list1((uintptr_t)dst, SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "C", NULL, &x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(strcmp(info.backend, "TESTB") == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    /* A preference list naming only a backend that cannot serve the request. */
    struct ixl_xfer_params p = {.field_mask = IXL_XFER_F_BACKENDS, .backends = &t, .n_backends = 1};
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "C", &p, &x), IXL_ERR_NO_BACKEND);
    p.backends = &tb;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, "C", &p, &x), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    /* Registering with a chosen backend that lacks the memory type. */
    struct ixl_reg_desc d = {(uintptr_t)other, 4096, 0, NULL, 0};
    struct ixl_reg_params rp = {.field_mask = IXL_REG_F_BACKENDS, .backends = &t, .n_backends = 1};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, &rp), IXL_ERR_BAD_MEM_TYPE);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_OBJ, &d, 1, NULL), IXL_ERR_NO_BACKEND);
    /* Nested and overlapping registrations: a descriptor inside the inner one works, and the
     * same region twice is refused. */
    struct ixl_reg_desc nest[2] = {{(uintptr_t)src + 4096, 8192, 0, NULL, 0},
                                   {(uintptr_t)src + 8192, SZ - 8192, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, nest, 2, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, nest, 1, NULL), IXL_ERR_EXISTS);
    struct ixl_reg_desc dup[2] = {{(uintptr_t)other, 64, 0, NULL, 0},
                                  {(uintptr_t)other, 64, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, dup, 2, NULL), IXL_ERR_EXISTS);
    CHECK_RC(dereg(a, other, 64), IXL_ERR_NOT_FOUND); /* all or nothing */
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, nest, 2, NULL), IXL_OK);
    /* Memory the backend allocates, and queries. */
    void *mem = NULL;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 1 << 16, NULL, &mem), IXL_OK);
    reg(a, mem, 1 << 16);
    CHECK_RC(ixl_mem_free(a, mem), IXL_ERR_BUSY);
    CHECK_RC(dereg(a, mem, 1 << 16), IXL_OK);
    CHECK_RC(ixl_mem_free(a, mem), IXL_OK);
    CHECK_RC(ixl_mem_free(a, mem), IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_mem_free(a, NULL), IXL_OK); /* like free(NULL) */
    uint16_t port;
    CHECK_RC(ixl_agent_listen_port(a, &port), IXL_ERR_NOT_FOUND); /* no listener */
    struct ixl_mem_query q;
    char path[] = "mode:/proc/self/status";
    struct ixl_reg_desc fq = {0, 0, IXL_DEV_NONE, path, sizeof(path) - 1};
    CHECK_RC(ixl_mem_query(a, IXL_MEM_FILE, &fq, 1, NULL, &q), IXL_OK);
    CHECK(q.exists);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
}

/* One run across several regions (segments): the request still finds each block's region. */
static void test_run_across_regions(void)
{
    struct ixl_agent *a = make_agent("S", "TEST");
    enum { PARTS = 5, BL = 512 };
    /* The source buffer as PARTS regions of unequal sizes, the destination as one. */
    size_t cut[PARTS + 1] = {0, SZ / 8, SZ / 4, SZ / 2, SZ / 2 + SZ / 16, SZ};
    for (int i = 0; i < PARTS; i++) {
        struct ixl_reg_desc d = {(uintptr_t)src + cut[i], cut[i + 1] - cut[i], 0, NULL, 0};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    }
    reg(a, dst, SZ);
    struct ixl_run lr = {(uintptr_t)src, BL, BL, SZ / BL, 0};
    struct ixl_run rr = {(uintptr_t)dst, BL, BL, SZ / BL, 0};
    struct ixl_dlist *ll, *rl;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(ll, &lr, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(rl, &rr, 1), IXL_OK);
    struct ixl_prep *lp, *rp;
    CHECK_RC(ixl_prep_create(a, NULL, ll, NULL, &lp), IXL_OK);
    CHECK_RC(ixl_prep_create(a, "S", rl, NULL, &rp), IXL_OK);
    enum { N = 1000 };
    int64_t li[N], ri[N];
    srand(11);
    for (int i = 0; i < N; i++) {
        li[i] = rand() % (SZ / BL);
        ri[i] = i;
    }
    fill(src, SZ);
    memset(dst, 0, SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, N, NULL, &x), IXL_OK);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    for (int i = 0; i < N; i++)
        CHECK(memcmp(dst + (size_t)i * BL, src + (size_t)li[i] * BL, BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    /* Consecutive indices across a region boundary split there and nowhere else. */
    enum { W = 200 };
    for (int i = 0; i < W; i++)
        li[i] = (int64_t)(cut[3] / BL) - W / 2 + i;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, W, NULL, &x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == 2);
    fill(src, SZ);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(dst, src + (size_t)li[0] * BL, (size_t)W * BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_prep_destroy(lp);
    ixl_prep_destroy(rp);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    ixl_agent_destroy(a);
}

/* Scattered indices (no pair continues the previous one on both sides) over runs that cross
 * several equal regions: each block lands where its indices say, and pairs that happen to be
 * adjacent on both sides merge even though their indices are not consecutive. */
static void test_scattered(void)
{
    struct ixl_agent *a = make_agent("R", "TEST");
    enum { PARTS = 4, BL = 256, NB = SZ / BL };
    /* Both buffers as PARTS equal regions: a run over a whole buffer has equal segments. */
    for (int i = 0; i < PARTS; i++) {
        struct ixl_reg_desc d[2] = {
            {(uintptr_t)src + (size_t)i * (SZ / PARTS), SZ / PARTS, 0, NULL, 0},
            {(uintptr_t)dst + (size_t)i * (SZ / PARTS), SZ / PARTS, 0, NULL, 0}};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    }
    /* Local: even blocks then odd blocks (two runs of stride 2 x BL); remote: one run. */
    struct ixl_run lr[2] = {{(uintptr_t)src, BL, 2 * BL, NB / 2, 0},
                            {(uintptr_t)src + BL, BL, 2 * BL, NB / 2, 0}};
    struct ixl_run rr = {(uintptr_t)dst, BL, BL, NB, 0};
    struct ixl_dlist *ll, *rl;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &ll), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(ll, lr, 2), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(rl, &rr, 1), IXL_OK);
    struct ixl_prep *lp, *rp;
    CHECK_RC(ixl_prep_create(a, NULL, ll, NULL, &lp), IXL_OK);
    CHECK_RC(ixl_prep_create(a, "R", rl, NULL, &rp), IXL_OK);
    /* Block k of src is local index k / 2 (even k) or NB / 2 + k / 2 (odd k). Remote blocks
     * are distinct (pairs of slots in random order); every fifth slot takes two consecutive
     * pairs (consecutive on both sides: the general loop's case, between scattered ones). */
    enum { N = 2000 };
    static int64_t li[N], ri[N], slot[NB / 2];
    srand(13);
    for (int i = 0; i < NB / 2; i++)
        slot[i] = i;
    for (int i = NB / 2 - 1; i > 0; i--) {
        int j = rand() % (i + 1);
        int64_t t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
    for (int n = 0, k = 0; n < N; k++) {
        int64_t l = rand() % (NB - 1);
        li[n] = l;
        ri[n++] = 2 * slot[k];
        if (k % 5 == 2 && n < N) {
            li[n] = l + 1;
            ri[n++] = 2 * slot[k] + 1;
        }
    }
    fill(src, SZ);
    memset(dst, 0, SZ);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, N, NULL, &x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.bytes == (uint64_t)N * BL);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    for (int i = 0; i < N; i++) {
        int64_t l = li[i];
        size_t blk = l < NB / 2 ? (size_t)(2 * l) : (size_t)(2 * (l - NB / 2) + 1);
        CHECK(memcmp(dst + (size_t)ri[i] * BL, src + blk * BL, BL) == 0);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* Blocks 0, 1, 2, 3 of src are local indices 0, NB / 2, 1, NB / 2 + 1: no two consecutive,
     * yet adjacent in memory, as are remote blocks 8..11: one descriptor. */
    int64_t ml[4] = {0, NB / 2, 1, NB / 2 + 1}, mr[4] = {8, 9, 10, 11};
    memset(dst, 0, SZ);
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, ml, rp, mr, 4, NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == 1 && info.bytes == 4 * BL);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(dst + 8 * BL, src, 4 * BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    /* Adjacent blocks across a region boundary (src and dst block NB / PARTS - 1 and the
     * next) do not merge. */
    int64_t bl[2] = {NB / 2 + NB / PARTS / 2 - 1, NB / PARTS / 2};
    int64_t br[2] = {NB / PARTS - 1, NB / PARTS};
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, bl, rp, br, 2, NULL, &x), IXL_OK);
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.desc_count == 2);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
    CHECK(memcmp(dst + (size_t)(NB / PARTS - 1) * BL, src + (size_t)(NB / PARTS - 1) * BL,
                 2 * BL) == 0);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    /* A bad index after scattered pairs is still named. */
    li[N - 1] = NB;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, N, NULL, &x), IXL_ERR_INDEX);
    CHECK_STR_HAS(ixl_agent_last_error(a), "index pair 1999");
    ixl_prep_destroy(lp);
    ixl_prep_destroy(rp);
    ixl_dlist_destroy(ll);
    ixl_dlist_destroy(rl);
    ixl_agent_destroy(a);
}

/* The list shapes the core finds a random index's descriptor in by division alone (core/xfer.c,
 * fast_pairs): SH_RUNS, K and V runs of one count each inside each region (a KV cache's per-layer
 * runs); SH_ONE, one run across regions, equal but for a longer last one. */
enum { SH_RUNS, SH_ONE };
struct shape {
    int kind;
    unsigned char *base;
    size_t bl, per;     /* block bytes; SH_RUNS: bytes of each region the runs cover */
    uint64_t count, rc; /* descriptors; SH_RUNS: per run */
};

static struct ixl_dlist *shape_list(struct shape *s, int kind, unsigned char *base, size_t size,
                                    size_t bl, size_t per, int nper, size_t vlen)
{
    *s = (struct shape){kind, base, bl, per, 0, 0};
    struct ixl_dlist *l;
    if (kind == SH_ONE) {
        struct ixl_run r = {(uintptr_t)base, bl, bl, size / bl, 0};
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
        CHECK_RC(ixl_dlist_add_runs(l, &r, 1), IXL_OK);
        s->count = size / bl;
        return l;
    }
    s->rc = per / (2 * bl);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, (size_t)(2 * nper), &l), IXL_OK);
    for (int p = 0; p < nper; p++)
        for (int kv = 0; kv < 2; kv++) {
            struct ixl_run r = {(uintptr_t)base + (size_t)p * per + (size_t)kv * bl, kv ? vlen : bl,
                                2 * bl, s->rc, 0};
            CHECK_RC(ixl_dlist_add_runs(l, &r, 1), IXL_OK);
        }
    s->count = 2 * (uint64_t)nper * s->rc;
    return l;
}

static unsigned char *shape_addr(const struct shape *s, uint64_t idx)
{
    if (s->kind == SH_ONE)
        return s->base + idx * s->bl;
    uint64_t r = idx / s->rc, e = idx % s->rc;
    return s->base + (r / 2) * s->per + (r % 2) * s->bl + e * 2 * s->bl;
}

/* n random pairs from ls into rs with distinct targets (slots of two: every fifth slot takes
 * two pairs consecutive on both sides, the general loop's case between the others); each block
 * checked where the reference mapping puts it, every other byte of rbuf still poisoned. */
static void shape_request(struct ixl_agent *a, const struct shape *ls, struct ixl_prep *lp,
                          const struct shape *rs, struct ixl_prep *rp, unsigned char *lbuf,
                          unsigned char *rbuf, size_t size, size_t n, unsigned seed)
{
    int64_t *li = malloc(n * sizeof(*li)), *ri = malloc(n * sizeof(*ri));
    uint64_t nslot = rs->count / 2;
    int64_t *slot = malloc(nslot * sizeof(*slot));
    unsigned char *hit = calloc(size / rs->bl, 1);
    CHECK(li && ri && slot && hit && n <= nslot);
    srand(seed);
    for (uint64_t i = 0; i < nslot; i++)
        slot[i] = (int64_t)i;
    for (uint64_t i = nslot - 1; i > 0; i--) {
        uint64_t j = ((uint64_t)rand() * RAND_MAX + (uint64_t)rand()) % (i + 1);
        int64_t t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
    size_t m = 0;
    for (uint64_t k = 0; m < n; k++) {
        int64_t l = (int64_t)(((uint64_t)rand() * RAND_MAX + (uint64_t)rand()) % (ls->count - 1));
        li[m] = l;
        ri[m++] = 2 * slot[k];
        if (k % 5 == 2 && m < n) {
            li[m] = l + 1;
            ri[m++] = 2 * slot[k] + 1;
        }
    }
    fill(lbuf, size);
    memset(rbuf, 0xa5, size);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, n, NULL, &x), IXL_OK);
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    CHECK(info.bytes == (uint64_t)n * ls->bl);
    CHECK(ixl_xfer_post(x) >= 0);
    CHECK_RC(ixl_xfer_wait(x, 20000), IXL_OK);
    for (size_t i = 0; i < n; i++) {
        unsigned char *to = shape_addr(rs, (uint64_t)ri[i]);
        CHECK(memcmp(to, shape_addr(ls, (uint64_t)li[i]), ls->bl) == 0);
        hit[(size_t)(to - rbuf) / rs->bl] = 1;
    }
    for (size_t b = 0; b < size / rs->bl; b++)
        if (!hit[b])
            for (size_t j = 0; j < rs->bl; j++)
                CHECK(rbuf[b * rs->bl + j] == 0xa5);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    /* An index out of range or negative, or a pair of unequal lengths, in the middle: the
     * request fails naming that pair. */
    char want[32];
    snprintf(want, sizeof(want), "index pair %zu ", n / 2);
    int64_t keep = li[n / 2];
    li[n / 2] = (int64_t)ls->count;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, n, NULL, &x), IXL_ERR_INDEX);
    CHECK_STR_HAS(ixl_agent_last_error(a), want);
    li[n / 2] = -1;
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, n, NULL, &x), IXL_ERR_INDEX);
    CHECK_STR_HAS(ixl_agent_last_error(a), want);
    li[n / 2] = keep;
    free(li);
    free(ri);
    free(slot);
    free(hit);
}

static void test_fast_shapes_at(size_t size, size_t bl, size_t n)
{
    unsigned char *lbuf = malloc(size), *rbuf = malloc(size);
    CHECK(lbuf && rbuf);
    struct ixl_agent *a = make_agent("F", "TEST");
    /* Local: 8 equal regions. Remote: 7 of x and a longer last one. */
    size_t lper = size / 8, x = size / 10 / (2 * bl) * (2 * bl);
    for (int p = 0; p < 8; p++) {
        struct ixl_reg_desc d[2] = {
            {(uintptr_t)lbuf + (size_t)p * lper, lper, 0, NULL, 0},
            {(uintptr_t)rbuf + (size_t)p * x, p < 7 ? x : size - 7 * x, 0, NULL, 0}};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    }
    struct shape ls[2], rs[2];
    struct ixl_dlist *ll[2], *rl[2];
    struct ixl_prep *lp[2], *rp[2];
    for (int k = 0; k < 2; k++) {
        ll[k] = shape_list(&ls[k], k, lbuf, size, bl, lper, 8, bl);
        rl[k] = shape_list(&rs[k], k, rbuf, size, bl, x, 7, bl);
        CHECK_RC(ixl_prep_create(a, NULL, ll[k], NULL, &lp[k]), IXL_OK);
        CHECK_RC(ixl_prep_create(a, "F", rl[k], NULL, &rp[k]), IXL_OK);
    }
    for (int l = 0; l < 2; l++)
        for (int r = 0; r < 2; r++) {
            size_t cap = (size_t)(rs[r].count / 2 < n ? rs[r].count / 2 : n);
            shape_request(a, &ls[l], lp[l], &rs[r], rp[r], lbuf, rbuf, size, cap,
                          (unsigned)(17 + 2 * l + r));
        }

    /* Local K0, V0, K1, V1 (indices 0, rc, 1, rc + 1: none continues the one before) are
     * adjacent in memory, as are remote blocks t..t + 3: one descriptor. */
    struct ixl_xfer *xf;
    struct ixl_xfer_info info = {.size = sizeof(info)};
    int64_t rc1 = (int64_t)ls[SH_RUNS].rc, t = 40;
    int64_t ml[4] = {0, rc1, 1, rc1 + 1}, mr[4] = {t, t + 1, t + 2, t + 3};
    fill(lbuf, size);
    memset(rbuf, 0, size);
    CHECK_RC(
        ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp[SH_RUNS], ml, rp[SH_ONE], mr, 4, NULL, &xf),
        IXL_OK);
    CHECK_RC(ixl_xfer_info(xf, &info), IXL_OK);
    CHECK(info.desc_count == 1 && info.bytes == 4 * bl);
    CHECK(ixl_xfer_post(xf) >= 0);
    CHECK_RC(ixl_xfer_wait(xf, 10000), IXL_OK);
    CHECK(memcmp(rbuf + (size_t)t * bl, lbuf, 4 * bl) == 0);
    CHECK_RC(ixl_xfer_release(xf), IXL_OK);

    /* The same across a region boundary, local (between pairs 1 and 2) or remote: two
     * descriptors, each inside its regions. */
    int64_t xb = (int64_t)(x / bl);
    int64_t bl1[4] = {rc1 - 1, 2 * rc1 - 1, 2 * rc1, 3 * rc1}, br1[4] = {t, t + 1, t + 2, t + 3};
    int64_t bl2[4] = {0, rc1, 1, rc1 + 1}, br2[4] = {xb - 2, xb - 1, xb, xb + 1};
    for (int c = 0; c < 2; c++) {
        fill(lbuf, size);
        memset(rbuf, 0, size);
        CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp[SH_RUNS], c ? bl2 : bl1, rp[SH_ONE],
                                         c ? br2 : br1, 4, NULL, &xf),
                 IXL_OK);
        CHECK_RC(ixl_xfer_info(xf, &info), IXL_OK);
        CHECK(info.desc_count == 2);
        CHECK(ixl_xfer_post(xf) >= 0);
        CHECK_RC(ixl_xfer_wait(xf, 10000), IXL_OK);
        for (int i = 0; i < 4; i++)
            CHECK(memcmp(shape_addr(&rs[SH_ONE], (uint64_t)(c ? br2 : br1)[i]),
                         shape_addr(&ls[SH_RUNS], (uint64_t)(c ? bl2 : bl1)[i]), bl) == 0);
        CHECK_RC(ixl_xfer_release(xf), IXL_OK);
    }

    /* A stretch of consecutive pairs ends where either side stops continuing, wherever in a
     * group of four that is: 12 pairs whose remote or local side jumps at pair p only are 3
     * pieces (2 when p is the last), each one descriptor (contiguous on both sides). */
    for (int jp = 1; jp < 24; jp += jp == 11 ? 2 : 1) {
        int64_t sl[12], sr[12];
        for (int i = 0; i < 12; i++) {
            sl[i] = i == jp - 12 ? 300 : 10 + i; /* jp >= 12: the local side jumps */
            sr[i] = i == jp ? 300 : 50 + i;
        }
        fill(lbuf, size);
        memset(rbuf, 0, size);
        CHECK_RC(
            ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp[SH_ONE], sl, rp[SH_ONE], sr, 12, NULL, &xf),
            IXL_OK);
        CHECK_RC(ixl_xfer_info(xf, &info), IXL_OK);
        CHECK(info.desc_count == (jp % 12 < 11 ? 3u : 2u));
        CHECK(ixl_xfer_post(xf) >= 0);
        CHECK_RC(ixl_xfer_wait(xf, 10000), IXL_OK);
        for (int i = 0; i < 12; i++)
            CHECK(memcmp(rbuf + (size_t)sr[i] * bl, lbuf + (size_t)sl[i] * bl, bl) == 0);
        CHECK_RC(ixl_xfer_release(xf), IXL_OK);
    }

    /* Remote V runs half as long as K: a pair into one, in the middle, is named. */
    struct shape hs;
    struct ixl_dlist *hl = shape_list(&hs, SH_RUNS, rbuf, size, bl, x, 7, bl / 2);
    struct ixl_prep *hp;
    CHECK_RC(ixl_prep_create(a, "F", hl, NULL, &hp), IXL_OK);
    enum { H = 64 };
    int64_t hli[H], hri[H];
    for (int i = 0; i < H; i++) {
        hli[i] = (int64_t)(((size_t)i * 7919) % ls[SH_RUNS].count);
        hri[i] = 2 * (int64_t)hs.rc * (i % 7) + 3 * i; /* K runs only, never consecutive */
    }
    hri[H / 2] = (int64_t)hs.rc + 5; /* in V run 0 */
    CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp[SH_RUNS], hli, hp, hri, H, NULL, &xf),
             IXL_ERR_MISMATCH);
    CHECK_STR_HAS(ixl_agent_last_error(a), "descriptor pair 32:");
    ixl_prep_destroy(hp);
    ixl_dlist_destroy(hl);
    for (int k = 0; k < 2; k++) {
        ixl_prep_destroy(lp[k]);
        ixl_prep_destroy(rp[k]);
        ixl_dlist_destroy(ll[k]);
        ixl_dlist_destroy(rl[k]);
    }
    ixl_agent_destroy(a);
    free(lbuf);
    free(rbuf);
}

/* Every pair of the two shapes with 4,000 random pairs; and a request of 300,000 pairs, more
 * than the first descriptor arrays hold (2^18: they grow while it is built). */
static void test_fast_shapes(void)
{
    test_fast_shapes_at(SZ, 16, 4000);
    test_fast_shapes_at((size_t)8 << 20, 8, 300000);
}

/* The fast shapes at the edge of their exact division (core/xfer.c, side_init): a local list of
 * two runs of u descriptors each, stride 0 (every descriptor of a run is one block), with
 * u = 2^31 + 1 (count x u < 2^64: found by division alone) and u = 2^32 + 1 (over it: the
 * general lookup, where the fast multiplier would put index 2u - 1 in a third run). 128 pairs,
 * the runs' first and last indices among them, none continuing the one before, write 128
 * distinct remote blocks (two interleaved runs); each must hold its index's run's block. */
static void test_fast_huge_runs(void)
{
    enum { BL = 64, NB = 128 };
    unsigned char *l = malloc(2 * BL), *r = malloc(NB * BL);
    CHECK(l && r);
    struct ixl_agent *a = make_agent("H", "TEST");
    reg(a, l, 2 * BL);
    reg(a, r, NB * BL);
    struct ixl_run rr[2] = {{(uintptr_t)r, BL, 2 * BL, NB / 2, 0},
                            {(uintptr_t)r + BL, BL, 2 * BL, NB / 2, 0}};
    struct ixl_dlist *rl;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &rl), IXL_OK);
    CHECK_RC(ixl_dlist_add_runs(rl, rr, 2), IXL_OK);
    struct ixl_prep *rp;
    CHECK_RC(ixl_prep_create(a, "H", rl, NULL, &rp), IXL_OK);
    const uint64_t us[2] = {((uint64_t)1 << 31) + 1, ((uint64_t)1 << 32) + 1};
    srand(23);
    for (int c = 0; c < 2; c++) {
        uint64_t u = us[c];
        struct ixl_run lr[2] = {{(uintptr_t)l, BL, 0, u, 0}, {(uintptr_t)l + BL, BL, 0, u, 0}};
        struct ixl_dlist *ll;
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 2, &ll), IXL_OK);
        CHECK_RC(ixl_dlist_add_runs(ll, lr, 2), IXL_OK);
        struct ixl_prep *lp;
        CHECK_RC(ixl_prep_create(a, NULL, ll, NULL, &lp), IXL_OK);
        int64_t li[NB], ri[NB];
        const uint64_t edge[8] = {u, 0, 2 * u - 1, u - 1, u + 1, 1, 2 * u - 2, u - 2};
        for (int k = 0; k < NB; k++) {
            uint64_t x = k < 8 ? edge[k] : ((uint64_t)rand() << 31 ^ (uint64_t)rand()) % (2 * u);
            while (k >= 8 && (uint64_t)li[k - 1] + 1 == x)
                x = (x + 7) % (2 * u);
            li[k] = (int64_t)x;
            ri[k] = k;
        }
        memset(l, 0xA1, BL);
        memset(l + BL, 0xB2, BL);
        memset(r, 0, NB * BL);
        struct ixl_xfer *x;
        CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, NB, NULL, &x), IXL_OK);
        CHECK(ixl_xfer_post(x) >= 0);
        CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        for (int k = 0; k < NB; k++) {
            const unsigned char *b = r + (size_t)(k % 64 * 2 + k / 64) * BL;
            unsigned char want = (uint64_t)li[k] < u ? 0xA1 : 0xB2;
            for (int j = 0; j < BL; j++)
                if (b[j] != want)
                    check_fail(__FILE__, __LINE__,
                               "u = %llu, pair %d (local index %lld): byte %d "
                               "is 0x%02x, want 0x%02x",
                               (unsigned long long)u, k, (long long)li[k], j, b[j], want);
        }
        ixl_prep_destroy(lp);
        ixl_dlist_destroy(ll);
    }
    ixl_prep_destroy(rp);
    ixl_dlist_destroy(rl);
    ixl_agent_destroy(a);
    free(l);
    free(r);
}

/* Prepared lists large enough that their arrays come from kept blocks (core/xfer.c: from 64 KiB)
 * and are handed from one list to the next: lists of thousands of single blocks in random
 * regions (runs that merge into progressions, segments that outgrow their first room), made,
 * used and destroyed one after another with different sizes, through ixl_prep_create and
 * through ixl_xfer_create; every block must land where its list says each time, whatever a
 * reused block held before. */
static void test_prep_kept(void)
{
    struct ixl_agent *a = make_agent("K", "TEST");
    enum { PARTS = 64, BL = 64, NB = SZ / BL };
    for (int i = 0; i < PARTS; i++) {
        struct ixl_reg_desc d[2] = {
            {(uintptr_t)src + (size_t)i * (SZ / PARTS), SZ / PARTS, 0, NULL, 0},
            {(uintptr_t)dst + (size_t)i * (SZ / PARTS), SZ / PARTS, 0, NULL, 0}};
        CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, d, 2, NULL), IXL_OK);
    }
    static int64_t sel[NB], li[NB], ri[NB];
    static struct ixl_desc d[NB];
    const int sizes[4] = {12000, 7000, 15000, 9000};
    srand(17);
    for (int round = 0; round < 8; round++) {
        int n = sizes[round % 4];
        /* n distinct random source blocks (a shuffled prefix), in that order. */
        for (int i = 0; i < NB; i++)
            sel[i] = i;
        for (int i = 0; i < n; i++) {
            int j = i + rand() % (NB - i);
            int64_t t = sel[i];
            sel[i] = sel[j];
            sel[j] = t;
        }
        for (int i = 0; i < n; i++) {
            d[i] = (struct ixl_desc){(uintptr_t)src + (size_t)sel[i] * BL, BL, 0};
            li[i] = ri[i] = i;
        }
        struct ixl_dlist *ll, *rl;
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, (size_t)n, &ll), IXL_OK);
        CHECK_RC(ixl_dlist_add(ll, d, (size_t)n), IXL_OK);
        struct ixl_run rr = {(uintptr_t)dst, BL, BL, (uint64_t)n, 0};
        CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &rl), IXL_OK);
        CHECK_RC(ixl_dlist_add_runs(rl, &rr, 1), IXL_OK);
        fill(src, SZ);
        memset(dst, 0xa5, SZ);
        struct ixl_xfer *x;
        struct ixl_prep *lp = NULL, *rp = NULL;
        if (round % 2 == 0) {
            CHECK_RC(ixl_prep_create(a, NULL, ll, NULL, &lp), IXL_OK);
            CHECK_RC(ixl_prep_create(a, "K", rl, NULL, &rp), IXL_OK);
            CHECK(ixl_prep_count(lp) == (uint64_t)n);
            CHECK_RC(ixl_xfer_create_prepped(a, IXL_OP_WRITE, lp, li, rp, ri, (size_t)n, NULL, &x),
                     IXL_OK);
        } else {
            CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, ll, rl, "K", NULL, &x), IXL_OK);
        }
        CHECK(ixl_xfer_post(x) >= 0);
        CHECK_RC(ixl_xfer_wait(x, 10000), IXL_OK);
        for (int i = 0; i < n; i++)
            CHECK(memcmp(dst + (size_t)i * BL, src + (size_t)sel[i] * BL, BL) == 0);
        for (size_t i = (size_t)n * BL; i < SZ; i++)
            CHECK(dst[i] == 0xa5);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        ixl_prep_destroy(lp);
        ixl_prep_destroy(rp);
        ixl_dlist_destroy(ll);
        ixl_dlist_destroy(rl);
    }
    ixl_agent_destroy(a);
}

int main(void)
{
    if (getenv("IXL_TEST_PLUGIN_DIR") == NULL)
        skip(0, "IXL_TEST_PLUGIN_DIR is not set (run through ctest)");
    ixl_log_set_level(IXL_LOG_NONE);
    src = malloc(SZ);
    dst = malloc(SZ);
    other = malloc(SZ);
    CHECK(src && dst && other);
    test_loopback();
    test_info_path();
    test_two_agents_async();
    test_release_busy_and_fail();
    test_prepped();
    test_backend_choice();
    test_run_across_regions();
    test_scattered();
    test_fast_shapes();
    test_fast_huge_runs();
    test_prep_kept();
    free(src);
    free(dst);
    free(other);
    printf("ok\n");
    return 0;
}

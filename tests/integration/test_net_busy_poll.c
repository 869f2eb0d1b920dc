/*
 * NET's busy_poll_us (issue 18, gap 1): after each event an event-loop thread polls its
 * connections (epoll_wait with a zero timeout) for busy_poll_us before it sleeps, so that a
 * request arriving within that time is taken without a wake-up. One process, two agents over
 * path=tcp (a target with one loop thread, an initiator), an epoll_wait() hook counting the
 * calls that do not sleep (timeout 0):
 *
 *  on     The target polls for 300 ms after each event. Checked 4 KiB WRITEs and READs (a fresh
 *         pattern, the destination poisoned first) go while its loop spins; right after them
 *         the loop polls hundreds of times within 50 ms; once the window has passed with
 *         nothing arriving it sleeps again (a few calls in 200 ms, for its timers).
 *  off    busy_poll_us=0 (the default): the same transfers, and after them the loops sleep at
 *         once (a few calls in 50 ms).
 *  range  Values above 1 s are refused, naming the option; "2ms" is taken as 2000 us.
 *
 * Usage: test_net_busy_poll [case...] (all by default). About 2 s.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>

#include "net_raw.h"

#define LEN 4096u
#define ROUNDS 20

static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static _Atomic long polls; /* epoll_wait calls with timeout 0 */

static int count_epoll_wait(int fd, struct epoll_event *ev, int max, int ms)
{
    if (ms == 0)
        atomic_fetch_add(&polls, 1);
    return real_epoll_wait(fd, ev, max, ms);
}

/* Zero-timeout epoll_wait calls made in the next ms milliseconds. */
static long polls_in(int ms)
{
    long p0 = atomic_load(&polls);
    nr_sleep_ms(ms);
    return atomic_load(&polls) - p0;
}

/* ROUNDS checked WRITEs and READs of LEN bytes from i to t (its region at dst). */
static void transfers(struct ixl_agent *i, uint8_t *src, struct ixl_agent *t, uint8_t *dst,
                      const char *what)
{
    (void)t;
    nr_checked_rw(i, src, dst, LEN, ROUNDS, 0xb5e0, "bp-t", what);
}

/* A target (one loop thread, busy_poll_us=busy) and an initiator, each with LEN bytes
 * registered, the target's metadata loaded into the initiator. */
static void pair(const char *busy, struct ixl_agent **t, uint8_t **dst, struct ixl_agent **i,
                 uint8_t **src)
{
    char why[512];
    const char *tkv[] = {"path", "tcp", "io_threads", "1", "busy_poll_us", busy, NULL};
    const char *ikv[] = {"path", "tcp", "io_threads", "1", NULL};
    CHECK_RC(nr_agent("bp-t", tkv, t, why, sizeof(why)), IXL_OK);
    CHECK_RC(nr_agent("bp-i", ikv, i, why, sizeof(why)), IXL_OK);
    *dst = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *src = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(*dst != MAP_FAILED && *src != MAP_FAILED);
    struct ixl_reg_desc rt = {(uintptr_t)*dst, LEN, 0, NULL, 0};
    struct ixl_reg_desc ri = {(uintptr_t)*src, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(*t, IXL_MEM_DRAM, &rt, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(*i, IXL_MEM_DRAM, &ri, 1, NULL), IXL_OK);
    void *blob = NULL;
    size_t len = 0;
    CHECK_RC(ixl_md_get(*t, NULL, &blob, &len), IXL_OK);
    CHECK_RC(ixl_md_load(*i, blob, len, NULL, 0), IXL_OK);
    ixl_free(blob);
}

static void unpair(struct ixl_agent *t, uint8_t *dst, struct ixl_agent *i, uint8_t *src)
{
    ixl_agent_destroy(i);
    ixl_agent_destroy(t);
    munmap(dst, LEN);
    munmap(src, LEN);
}

static void case_on(void)
{
    struct ixl_agent *t, *i;
    uint8_t *dst, *src;
    pair("300000", &t, &dst, &i, &src);
    transfers(i, src, t, dst, "on");
    long spin = polls_in(50);
    /* Nothing arrives now: the window (300 ms after the last event) closes. */
    nr_sleep_ms(400);
    long after = polls_in(200);
    fprintf(stderr,
            "on: %ld zero-timeout polls in the 50 ms after the transfers, %ld in 200 ms "
            "after the window\n",
            spin, after);
    if (spin < 200)
        nr_fail("on: the target's loop polled %ld times in 50 ms after its last event (want "
                ">= 200: it slept)",
                spin);
    if (after > 40)
        nr_fail("on: %ld zero-timeout polls in 200 ms after the window ended (want <= 40: it "
                "kept spinning)",
                after);
    transfers(i, src, t, dst, "on, after the window");
    unpair(t, dst, i, src);
}

static void case_off(void)
{
    struct ixl_agent *t, *i;
    uint8_t *dst, *src;
    pair("0", &t, &dst, &i, &src);
    transfers(i, src, t, dst, "off");
    long spin = polls_in(50);
    fprintf(stderr, "off: %ld zero-timeout polls in the 50 ms after the transfers\n", spin);
    if (spin > 20)
        nr_fail("off: %ld zero-timeout polls in 50 ms with busy_poll_us=0 (want <= 20)", spin);
    unpair(t, dst, i, src);
}

static void case_range(void)
{
    char why[512] = "";
    struct ixl_agent *a = NULL;
    const char *big[] = {"busy_poll_us", "1000001", NULL};
    ixl_status st = nr_agent("bp-r", big, &a, why, sizeof(why));
    if (st == IXL_OK) {
        nr_fail("range: busy_poll_us=1000001 was taken");
        ixl_agent_destroy(a);
    } else if (strstr(why, "busy_poll_us") == NULL) {
        nr_fail("range: the refusal does not name the option: %s", why);
    }
    const char *ms[] = {"busy_poll_us", "2ms", NULL};
    st = nr_agent("bp-r", ms, &a, why, sizeof(why));
    if (st != IXL_OK) {
        nr_fail("range: busy_poll_us=2ms refused: %s", why);
        return;
    }
    struct ixl_backend *b = NULL;
    const struct ixl_kv *kv = NULL;
    size_t n = 0;
    const char *val = NULL;
    if (ixl_backend_get(a, 0, &b) == IXL_OK && ixl_backend_params(b, &kv, &n) == IXL_OK)
        for (size_t k = 0; k < n; k++)
            if (strcmp(kv[k].key, "busy_poll_us") == 0)
                val = kv[k].value;
    if (val == NULL || strcmp(val, "2000") != 0)
        nr_fail("range: busy_poll_us=2ms reads back as '%s', want 2000", val ? val : "(none)");
    ixl_agent_destroy(a);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_busy_poll", 60, NULL);
    real_epoll_wait = (int (*)(int, struct epoll_event *, int, int))ixl_syscall_get("epoll_wait");
    CHECK(real_epoll_wait != NULL);
    CHECK_RC(ixl_syscall_set("epoll_wait", (ixl_syscall_fn)count_epoll_wait), IXL_OK);
    static const struct nr_case cases[] = {
        {"on", case_on}, {"off", case_off}, {"range", case_range}};
    return nr_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}

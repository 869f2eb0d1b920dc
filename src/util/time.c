/* The tick clock of time.h: which counter, and its rate. */
#include "util/time.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/config.h"
#include "util/log.h"

struct ixl_tick_clock ixl_tick_clock;

static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
#include <cpuid.h>

/* The kernel keeps time with the TSC only when it found it invariant and the same on every
 * CPU (it changes the clocksource otherwise, at boot or later). */
static int kernel_uses_tsc(void)
{
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (f == NULL)
        return 0;
    if (fgets(cs, sizeof(cs), f) == NULL)
        cs[0] = '\0';
    fclose(f);
    return strcmp(cs, "tsc\n") == 0;
}

static int cpu_invariant_tsc(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1u;
}

/* A (counter, nanoseconds) pair read close together: the counter's midpoint around one
 * clock_gettime, retried while something (an interrupt, a preemption) came between. */
static int pair(uint64_t *tsc, uint64_t *ns)
{
    for (int i = 0; i < 16; i++) {
        uint64_t a = __rdtsc();
        uint64_t n = ixl_now_ns();
        uint64_t b = __rdtsc();
        if (b > a && b - a < 4000u) {
            *tsc = a + (b - a) / 2;
            *ns = n;
            return 0;
        }
    }
    return -1;
}

/* Counts per nanosecond over 2 ms of CLOCK_MONOTONIC: each end is within half its bracket
 * (4000 counts, 1.3 us at 3 GHz), so the rate is within 0.07 %; a rate outside 0.1..10 GHz
 * is no rate (the counter is not what the flags said). */
static int calibrate(uint64_t *mult)
{
    uint64_t c0, n0, c1, n1;
    if (pair(&c0, &n0) != 0)
        return -1;
    struct timespec d = {0, 2000000};
    while (nanosleep(&d, &d) != 0) {
    }
    if (pair(&c1, &n1) != 0 || c1 <= c0 || n1 <= n0)
        return -1;
    uint64_t dc = c1 - c0, dn = n1 - n0;
    if (dn > 1000000000u || dc < dn / 10 || dc > dn * 10) /* a stall of a second: no rate */
        return -1;
    *mult = (dn << 32) / dc;
    return 0;
}
#endif

static void choose(void)
{
    const char *want = ixl_cfg_get(IXL_CFG_CLOCK);
    if (strcmp(want, "monotonic") == 0)
        return;
    if (strcmp(want, "auto") != 0)
        IXL_LOG_ERR("IXL_CLOCK=%s is not auto or monotonic: using auto", want);
#if defined(__x86_64__)
    uint64_t mult;
    if (!cpu_invariant_tsc() || !kernel_uses_tsc())
        return;
    if (calibrate(&mult) != 0) {
        IXL_LOG_INF("tick clock: the TSC did not calibrate: using CLOCK_MONOTONIC");
        return;
    }
    ixl_tick_clock.mult = mult;
    ixl_tick_clock.tsc = 1;
    IXL_LOG_DBG("tick clock: the TSC, %.3f counts per ns", 4294967296.0 / (double)mult);
#endif
}

void ixl_tick_init(void)
{
    pthread_once(&once, choose);
}

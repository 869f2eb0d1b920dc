#ifndef IXL_UTIL_TIME_H
#define IXL_UTIL_TIME_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline uint64_t ixl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ixl_now_us(void)
{
    return ixl_now_ns() / 1000u;
}

/* Ticks: the timestamps of a request's post and end (its telemetry, ixl_xfer_wait's spin).
 * Two of them per request were a fifth of a same-node 4 KiB request (clock_gettime 21 ns
 * against 9 for the counter on the 2-core VM), so they come from the CPU's time-stamp counter
 * where the kernel itself keeps time with it (x86-64, an invariant TSC, and the kernel's
 * clocksource "tsc": constant rate, the same on every CPU), and are nanoseconds of
 * CLOCK_MONOTONIC elsewhere or when IXL_CLOCK=monotonic. Only differences of ticks mean
 * anything; ixl_ticks_ns turns one into nanoseconds. Deadlines and timers stay on
 * ixl_now_ns. */
struct ixl_tick_clock {
    int tsc;       /* ticks are TSC counts; else nanoseconds */
    uint64_t mult; /* nanoseconds per TSC count, 32.32 fixed point */
};
extern struct ixl_tick_clock ixl_tick_clock;

/* Chooses and calibrates the clock, once per process (about 2 ms the first time, with the
 * TSC); every agent's creation calls it before it can have requests. */
void ixl_tick_init(void);

static inline uint64_t ixl_ticks(void)
{
#if defined(__x86_64__)
    if (ixl_tick_clock.tsc)
        return __rdtsc();
#endif
    return ixl_now_ns();
}

static inline uint64_t ixl_ticks_ns(uint64_t ticks)
{
    if (!ixl_tick_clock.tsc)
        return ticks;
    return (uint64_t)(((unsigned __int128)ticks * ixl_tick_clock.mult) >> 32);
}

#endif

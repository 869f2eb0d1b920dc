/* The tick clock (src/util/time.h): per-request times from the CPU's time-stamp counter where
 * the kernel keeps time with it, CLOCK_MONOTONIC elsewhere or when IXL_CLOCK=monotonic. Each
 * case runs in a child of its own, since the configuration and the clock's choice are made
 * once per process:
 *   monotonic  IXL_CLOCK=monotonic: ticks are nanoseconds of CLOCK_MONOTONIC
 *   auto       the TSC exactly where the CPU says its counter is invariant and the kernel's
 *              clocksource is tsc; ticks turned into nanoseconds agree with CLOCK_MONOTONIC
 *              over 50 ms within 0.5 % (+20 us), and on every CPU of the process (the counter is
 *              read on one CPU and again on another)
 *   bogus      IXL_CLOCK=tick: logged, and auto's choice */
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "check.h"
#include "util/time.h"

static void sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&d, &d) != 0) {
    }
}

/* What auto must choose, read here on its own. */
static int tsc_expected(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    if (!((d >> 8) & 1u))
        return 0;
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == NULL)
        return 0;
    if (fgets(cs, sizeof(cs), f) == NULL)
        cs[0] = '\0';
    fclose(f);
    return strcmp(cs, "tsc\n") == 0;
#else
    return 0;
#endif
}

/* A tick and the CLOCK_MONOTONIC time beside it: read between two clock reads at most 20 us
 * apart (retried: a preemption between them on a loaded machine would be an error of its own
 * length). */
static void pair(uint64_t *tick, uint64_t *ns)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t a = ixl_now_ns();
        uint64_t t = ixl_ticks();
        uint64_t b = ixl_now_ns();
        if (b - a <= 20000) {
            *tick = t;
            *ns = a + (b - a) / 2;
            return;
        }
    }
    CHECK(!"a tick and a clock read 20 us apart in 1000 tries");
}

/* Ticks against CLOCK_MONOTONIC over ms milliseconds. */
static void check_rate(long ms)
{
    uint64_t t0, n0, t1, n1;
    pair(&t0, &n0);
    sleep_ms(ms);
    pair(&t1, &n1);
    uint64_t got = ixl_ticks_ns(t1 - t0), want = n1 - n0;
    uint64_t diff = got > want ? got - want : want - got;
    printf("  %ld ms: ticks say %.3f ms, CLOCK_MONOTONIC %.3f ms\n", ms, got / 1e6, want / 1e6);
    CHECK(want + 20000 >= (uint64_t)ms * 1000000u);
    CHECK(diff <= want / 200 + 20000);
}

/* A tick read on each CPU in turn, with CLOCK_MONOTONIC beside it: the differences agree. */
static void check_cpus(void)
{
    cpu_set_t all;
    CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
    int first = -1, n = 0;
    uint64_t t0 = 0, n0 = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 8; c++) {
        if (!CPU_ISSET(c, &all))
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
        uint64_t t, ns;
        pair(&t, &ns);
        if (first < 0) {
            first = c;
            t0 = t;
            n0 = ns;
        } else {
            CHECK(t >= t0); /* never backwards across CPUs */
            uint64_t got = ixl_ticks_ns(t - t0), want = ns - n0;
            uint64_t diff = got > want ? got - want : want - got;
            printf("  CPU %d -> %d: ticks %.1f us, CLOCK_MONOTONIC %.1f us\n", first, c, got / 1e3,
                   want / 1e3);
            CHECK(diff <= want / 200 + 20000);
        }
        n++;
        sleep_ms(2);
    }
    CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
}

static int child(const char *clock_env)
{
    if (clock_env != NULL)
        setenv("IXL_CLOCK", clock_env, 1);
    else
        unsetenv("IXL_CLOCK");
    ixl_tick_init();
    int want_tsc = clock_env != NULL && strcmp(clock_env, "monotonic") == 0 ? 0 : tsc_expected();
    printf("IXL_CLOCK=%s: %s (expected %s)\n", clock_env ? clock_env : "(unset)",
           ixl_tick_clock.tsc ? "TSC" : "CLOCK_MONOTONIC", want_tsc ? "TSC" : "CLOCK_MONOTONIC");
    CHECK(ixl_tick_clock.tsc == want_tsc);
    if (!want_tsc) {
        uint64_t n = ixl_now_ns(), t = ixl_ticks(), m = ixl_now_ns();
        CHECK(t >= n && t <= m); /* nanoseconds of the same clock */
        CHECK(ixl_ticks_ns(12345) == 12345);
    }
    check_rate(50);
    check_cpus();
    fflush(stdout);
    return 0;
}

static void run(const char *clock_env)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(child(clock_env));
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
    run("monotonic");
    run(NULL);
    run("auto");
    run("tick");
    printf("test_time: ok\n");
    return 0;
}

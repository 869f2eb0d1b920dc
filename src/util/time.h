#ifndef IXL_UTIL_TIME_H
#define IXL_UTIL_TIME_H

#include <stdint.h>
#include <time.h>

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

#endif

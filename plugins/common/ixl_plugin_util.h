/*
 * Helpers the built-in plugins share: little-endian integers for their wire formats, and random
 * 64-bit values for instance ids, keys and token seeds. Header-only (static inline) so that a
 * plugin still links against nothing but what ixl_plugin.h declares; a plugin includes it as
 * "../common/ixl_plugin_util.h". Not part of the plugin ABI: a third-party plugin may copy it.
 */
#ifndef IXL_PLUGIN_UTIL_H
#define IXL_PLUGIN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Writes the low n bytes (1..8) of v at p, least significant first. */
static inline void ixlp_put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Reads n bytes (1..8) at p as a little-endian unsigned integer. */
static inline uint64_t ixlp_get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The source of random bytes: getrandom(2) itself, or the host's hook for it (fault injection).
 */
typedef ssize_t (*ixlp_getrandom_fn)(void *buf, size_t n, unsigned int flags);

/* 64 bits from fn (the kernel's random source); false when it fails (a seccomp filter, a kernel
 * without getrandom, an injected fault), and *out is then unchanged. For values that must not be
 * guessable. */
static inline bool ixlp_getrandom64(ixlp_getrandom_fn fn, uint64_t *out)
{
    uint64_t v;
    if (fn(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        return false;
    *out = v;
    return true;
}

/* A non-zero 64-bit value: random where fn gives one, otherwise a mix of the clock and the
 * process id (distinct between processes and calls, but predictable). For ids and seeds. */
static inline uint64_t ixlp_random64(ixlp_getrandom_fn fn)
{
    uint64_t v;
    if (!ixlp_getrandom64(fn, &v)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ull ^
            (uint64_t)getpid();
    }
    return v ? v : 1;
}

/* A hash of the string s for a table keyed by names that come from other agents: FNV-1a from
 * seed (a random value of the table's: colliding names cannot be chosen without it), then
 * MurmurHash3's finalizer, so that names differing in their last characters ("worker-17",
 * "worker-18") spread over the low bits as well. */
static inline uint64_t ixlp_name_hash(uint64_t seed, const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

#endif

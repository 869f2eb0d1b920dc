/*
 * Memory the core keeps for reuse (a registry's slabs and its free regions, scratch blocks)
 * is poisoned under AddressSanitizer while it is free, so that a use after free of what was
 * carved from it is still caught; without ASan the macros do nothing.
 */
#ifndef IXL_UTIL_ASAN_H
#define IXL_UTIL_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define IXL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IXL_ASAN 1
#endif
#endif

#ifdef IXL_ASAN
#include <sanitizer/asan_interface.h>
#define IXL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define IXL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define IXL_POISON(p, n) ((void)(p), (void)(n))
#define IXL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif

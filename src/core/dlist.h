#ifndef IXL_CORE_DLIST_H
#define IXL_CORE_DLIST_H

#include <stdint.h>

#include <ixl/ixl.h>

/* Runs and their prefix counts: first[i] is the index of run i's first descriptor, so a
 * descriptor index maps to its run by binary search. Memory grows with runs only. */
struct ixl_dlist {
    enum ixl_mem type;
    size_t n_runs, cap;
    struct ixl_run *runs;
    uint64_t *first; /* n_runs + 1 entries once cap > 0; first[n_runs] = total */
};

/* floor((2^64 - 1) / u) for u > 1: what ixl_udiv_m() multiplies by. */
static inline uint64_t ixl_udiv_magic(uint64_t u)
{
    return UINT64_MAX / u;
}

/* idx / u (u > 1, m = ixl_udiv_magic(u)) without a division instruction (a 64-bit division costs
 * tens of cycles, two per random index pair of a request): q, the high half of idx * m, is the
 * quotient or less by at most 2 (idx * m / 2^64 > idx / u - (1 + 1/u) for idx < 2^64, and a
 * floor loses less than 1 more); comparisons correct it, and q * u never exceeds idx. */
static inline uint64_t ixl_udiv_m(uint64_t idx, uint64_t u, uint64_t m)
{
    uint64_t q = (uint64_t)(((unsigned __int128)idx * m) >> 64);
    while (idx - q * u >= u)
        q++;
    return q;
}

/* The run holding descriptor index (< total), by binary search. */
size_t ixl_dlist_find_run(const struct ixl_dlist *list, uint64_t index);
/* Appends runs already validated (used by the decoder). */
int ixl_dlist_append_runs(struct ixl_dlist *list, const struct ixl_run *runs, size_t n);

#endif

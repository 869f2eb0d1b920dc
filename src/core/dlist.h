#ifndef IXL_CORE_DLIST_H
#define IXL_CORE_DLIST_H

#include <ixl/ixl.h>

/* Runs and their prefix counts: first[i] is the index of run i's first descriptor, so a
 * descriptor index maps to its run by binary search. Memory grows with runs only. */
struct ixl_dlist {
    enum ixl_mem type;
    size_t n_runs, cap;
    struct ixl_run *runs;
    uint64_t *first; /* n_runs + 1 entries once cap > 0; first[n_runs] = total */
};

/* The run holding descriptor index (< total), by binary search. */
size_t ixl_dlist_find_run(const struct ixl_dlist *list, uint64_t index);
/* Appends runs already validated (used by the decoder). */
int ixl_dlist_append_runs(struct ixl_dlist *list, const struct ixl_run *runs, size_t n);

#endif

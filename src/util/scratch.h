/*
 * Large working arrays of the core's calls (a metadata load's decoded regions and its sort
 * order, a registry's batch lists, the metadata blob while it is encoded), kept for the next
 * call instead of going back to malloc: freed, such arrays left the top of the heap free and
 * malloc gave it back to the system, so every ixl_md_load and ixl_md_get of 10^4 regions
 * faulted ~350 and ~140 pages in again (tens of microseconds each on a virtual machine).
 * Prepared lists' arrays come from here too (ixl_scratch_take_fit), so that a list made again
 * after one was destroyed finds its pages in. A few blocks for the whole process, bounded in
 * bytes; thread-safe.
 */
#ifndef IXL_UTIL_SCRATCH_H
#define IXL_UTIL_SCRATCH_H

#include <stddef.h>

/* A block of at least bytes (uninitialised), or NULL without memory. */
void *ixl_scratch_take(size_t bytes);
/* The same for memory that stays in use a long time (a prepared list's arrays): a kept block
 * only when it is at most twice bytes, so that such an array wastes at most half its block. */
void *ixl_scratch_take_fit(size_t bytes);
/* Its usable size. */
size_t ixl_scratch_cap(const void *p);
/* Gives a block of ixl_scratch_take back (NULL: nothing). */
void ixl_scratch_give(void *p);

#endif

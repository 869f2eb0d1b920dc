#include "util/scratch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/asan.h"
#include "util/sys.h"

#include "../../plugins/common/ixl_pool.h" /* ixlp_map: populated memory */

/* Blocks kept: at most SCRATCH_KEEP, SCRATCH_BYTES in all (what the process holds at most when
 * no call runs); smaller requests than SCRATCH_MIN are not worth keeping. A prepared list of
 * many runs gives back six or seven blocks at once (core/xfer.c), and a few more that its merged
 * runs grew out of; the calls' own one or two. */
#define SCRATCH_KEEP 16
#define SCRATCH_BYTES ((size_t)24 << 20)
#define SCRATCH_MIN ((size_t)16 << 10)
/* A new block this large is mapped with its pages in (ixlp_map) rather than malloc'd: a fresh
 * block's pages were faulted in one by one at first use, ~14-18 us each on a virtual machine
 * (registering 10^4 regions the first time: ~100 faults in its batch arrays). Small pages, not
 * whole huge ones: a block is rarely a multiple of 2 MiB, and where a fresh huge page costs
 * 6-20 ms (see ixlp_map) rounding blocks up to huge pages made the first metadata load of
 * 10^4 regions several times slower (median 26 ms against 7 ms, bench_core, 5 runs each). */
#define SCRATCH_MAP ((size_t)64 << 10)

struct scratch {
    size_t cap;
    size_t mapped; /* bytes of ixlp_map, 0 for malloc (also keeps the block 16-byte aligned) */
};

static void block_free(struct scratch *s)
{
    if (s != NULL && s->mapped > 0)
        ixlp_unmap(&ixl_sys_table, s, s->mapped);
    else
        free(s);
}

static struct {
    pthread_mutex_t lock;
    struct scratch *kept[SCRATCH_KEEP];
    size_t bytes;
} pool = {PTHREAD_MUTEX_INITIALIZER, {NULL}, 0};

static struct scratch *head(const void *p)
{
    return (struct scratch *)((char *)(uintptr_t)p - sizeof(struct scratch));
}

/* A block of at least bytes and at most most bytes (SIZE_MAX: a call's temporary arrays). */
static void *take(size_t bytes, size_t most)
{
    struct scratch *s = NULL;
    int at = -1;
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < SCRATCH_KEEP; i++) /* the smallest that fits */
        if (pool.kept[i] && pool.kept[i]->cap >= bytes && pool.kept[i]->cap <= most &&
            (at < 0 || pool.kept[i]->cap < s->cap))
            s = pool.kept[at = i];
    if (at >= 0) {
        pool.kept[at] = NULL;
        pool.bytes -= s->cap;
    }
    pthread_mutex_unlock(&pool.lock);
    if (s != NULL) {
        IXL_UNPOISON(s + 1, s->cap);
        return s + 1;
    }
    /* Room to grow a little: the next call's arrays are often slightly larger (not for
     * memory that stays in use: there it would only be resident and unused). */
    size_t cap = bytes < SCRATCH_MIN ? SCRATCH_MIN : bytes + (most == SIZE_MAX ? bytes / 8 : 0);
    cap = (cap + 4095) & ~(size_t)4095;
    if (cap < bytes || cap > SIZE_MAX - sizeof(*s))
        return NULL;
    if (cap < SCRATCH_MAP) {
        s = sys_malloc(sizeof(*s) + cap);
        if (s == NULL)
            return NULL;
        s->mapped = 0;
    } else {
        size_t len = (sizeof(*s) + cap + 4095) & ~(size_t)4095;
        if (len < cap || (s = ixlp_map(&ixl_sys_table, len, false)) == NULL)
            return NULL;
        s->mapped = len;
        cap = len - sizeof(*s);
    }
    s->cap = cap;
    return s + 1;
}

void *ixl_scratch_take(size_t bytes)
{
    return take(bytes, SIZE_MAX);
}

void *ixl_scratch_take_fit(size_t bytes)
{
    return take(bytes, bytes > SIZE_MAX / 2 ? SIZE_MAX : 2 * bytes);
}

size_t ixl_scratch_cap(const void *p)
{
    return head(p)->cap;
}

void ixl_scratch_give(void *p)
{
    if (p == NULL)
        return;
    struct scratch *s = head(p);
    pthread_mutex_lock(&pool.lock);
    /* An empty slot, else the smallest kept block if this one is larger. */
    int at = -1;
    for (int i = 0; i < SCRATCH_KEEP; i++) {
        if (pool.kept[i] == NULL) {
            at = i;
            break;
        }
        if (pool.kept[i]->cap < s->cap && (at < 0 || pool.kept[i]->cap < pool.kept[at]->cap))
            at = i;
    }
    if (at >= 0) {
        size_t out = pool.kept[at] ? pool.kept[at]->cap : 0;
        if (pool.bytes - out + s->cap <= SCRATCH_BYTES) {
            struct scratch *old = pool.kept[at];
            IXL_POISON(s + 1, s->cap);
            pool.kept[at] = s;
            pool.bytes = pool.bytes - out + s->cap;
            s = old;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    block_free(s);
}

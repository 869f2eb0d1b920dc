/* plugins/common/ixl_pool.h, the plugins' record pool (issue 18): records are distinct,
 * aligned, zeroed and writable; freed ones come back first and zeroed; a free record is
 * poisoned under ASan; the first chunk is 64 KiB and the next ones 2 MiB on a 2 MiB boundary;
 * a refused mmap gives NULL (and the pool works again once mmap does); fini unmaps every chunk
 * and leaves a pool that can be used again. The system calls go through a table of our own,
 * as a plugin's go through the host's. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "../../plugins/common/ixl_pool.h"

static int refuse_mmap;
static unsigned n_maps, n_unmaps;

static void *t_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (refuse_mmap) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    n_maps++;
    return mmap(addr, len, prot, flags, fd, off);
}

static int t_munmap(void *addr, size_t len)
{
    n_unmaps++;
    return munmap(addr, len);
}

#define REC 40 /* bytes asked for: rounded up to 48 */
#define N 20000

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    struct ixl_sys sys;
    memset(&sys, 0, sizeof(sys));
    sys.size = sizeof(sys);
    sys.mmap = t_mmap;
    sys.munmap = t_munmap;

    /* ixlp_map: small sizes page-aligned, multiples of 2 MiB on a 2 MiB boundary; zeroed. */
    unsigned char *s = ixlp_map(&sys, 64 << 10, true);
    CHECK(s != NULL && (uintptr_t)s % 4096 == 0 && s[0] == 0 && s[(64 << 10) - 1] == 0);
    unsigned char *h = ixlp_map(&sys, (size_t)4 << 20, true);
    CHECK(h != NULL && (uintptr_t)h % ((size_t)2 << 20) == 0);
    CHECK(h[0] == 0 && h[((size_t)4 << 20) - 1] == 0);
    h[12345] = 7;
    ixlp_unmap(&sys, s, 64 << 10);
    ixlp_unmap(&sys, h, (size_t)4 << 20);

    struct ixlp_pool p;
    ixlp_pool_init(&p, &sys, REC);
    CHECK(p.size == 48);
    static void *v[N];
    n_maps = n_unmaps = 0;
    for (int i = 0; i < N; i++) {
        v[i] = ixlp_pool_get(&p);
        CHECK(v[i] != NULL && (uintptr_t)v[i] % 16 == 0);
        unsigned char *b = v[i];
        for (int j = 0; j < REC; j++)
            CHECK(b[j] == 0);
        memset(b, 0xa5, p.size); /* the whole rounded record is the caller's */
    }
    /* 64 KiB holds ~1360 records of 48 bytes, each 2 MiB chunk ~43690: N needs two chunks
     * (a 2 MiB one is mapped with 2 MiB to spare and trimmed: 1 mmap, 1 or 2 munmaps). */
    CHECK(n_maps == 2);
    CHECK(p.chunks != NULL && p.chunks->bytes == ((size_t)2 << 20));
    CHECK((uintptr_t)p.chunks % ((size_t)2 << 20) == 0);
    CHECK(p.chunks->next != NULL && p.chunks->next->bytes == (64 << 10));
    qsort(v, N, sizeof(v[0]), cmp_ptr);
    for (int i = 1; i < N; i++)
        CHECK((uintptr_t)v[i] - (uintptr_t)v[i - 1] >= p.size); /* distinct, not overlapping */

    /* Freed records come back first, zeroed; none is mapped anew meanwhile. */
    unsigned maps = n_maps;
    for (int i = 0; i < N; i += 2)
        ixlp_pool_put(&p, v[i]);
#ifdef IXLP_ASAN
    CHECK(__asan_address_is_poisoned((char *)v[0] + sizeof(void *)));
    CHECK(__asan_address_is_poisoned((char *)v[0] + p.size - 1));
    CHECK(!__asan_address_is_poisoned(v[1]));
#endif
    for (int i = 0; i < N; i += 2) {
        unsigned char *b = ixlp_pool_get(&p);
        CHECK(b != NULL);
        void *key = b;
        CHECK(bsearch(&key, v, N, sizeof(v[0]), cmp_ptr) != NULL);
        for (size_t j = 0; j < p.size; j++)
            CHECK(b[j] == 0);
    }
    CHECK(n_maps == maps);
    ixlp_pool_put(&p, NULL); /* nothing */

    /* A refused mmap once the chunks are full: NULL, errno from mmap; then it works again. */
    while (p.carve_end - p.carve >= (ptrdiff_t)p.size)
        CHECK(ixlp_pool_get(&p) != NULL);
    refuse_mmap = 1;
    errno = 0;
    CHECK(ixlp_pool_get(&p) == NULL && errno == ENOMEM);
    refuse_mmap = 0;
    CHECK(ixlp_pool_get(&p) != NULL);

    /* fini: every chunk unmapped (the trims of the 2 MiB ones counted too), the pool empty
     * and usable again. */
    unsigned unmaps = n_unmaps;
    ixlp_pool_fini(&p);
    CHECK(n_unmaps == unmaps + 3);
    CHECK(p.chunks == NULL && p.free == NULL && p.size == 48);
    void *again = ixlp_pool_get(&p);
    CHECK(again != NULL);
    ixlp_pool_fini(&p);
    ixlp_pool_fini(&p); /* twice: nothing left */
    return 0;
}

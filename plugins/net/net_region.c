/* NET's memory: registered regions (the key table the target checks every frame against,
 * public data), remote regions (with the same-node mapping of a peer's memfd), and the
 * shareable memory of ixl_mem_alloc. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "net.h"
#include "../common/ixl_plugin_util.h"

#define PUB_MAGIC 0x3142554eu /* "NUB1" */
#define PUB_BYTES NET_PUB_BYTES

/* ---- regions ---------------------------------------------------------------------------- */

static size_t key_slot(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

struct net_region *net_region_find(struct net_engine *e, uint64_t key)
{
    if (e->rtab_cap == 0)
        return NULL;
    for (struct net_region *g = e->rtab[key_slot(key, e->rtab_cap)]; g; g = g->hnext)
        if (g->key == key)
            return g;
    return NULL;
}

/* A key table of cap slots, zeroed: from 64 KiB mapped with its pages in (../common/ixl_pool.h:
 * growing to 10^4 regions faulted ~130 pages in one by one, tens of microseconds each on a
 * virtual machine). */
#define RTAB_MAP_BYTES ((size_t)64 << 10)

static struct net_region **rtab_alloc(size_t cap)
{
    if (cap * sizeof(struct net_region *) < RTAB_MAP_BYTES)
        return net_sys()->calloc(cap, sizeof(struct net_region *));
    return ixlp_map(net_sys(), cap * sizeof(struct net_region *), false);
}

void net_rtab_free(struct net_region **t, size_t cap)
{
    if (t != NULL && cap * sizeof(*t) >= RTAB_MAP_BYTES)
        ixlp_unmap(net_sys(), t, cap * sizeof(*t));
    else
        free(t);
}

static int rtab_insert(struct net_engine *e, struct net_region *g)
{
    if (e->n_regions + 1 > e->rtab_cap / 2) {
        size_t cap = e->rtab_cap ? e->rtab_cap * 2 : 256;
        struct net_region **t = cap > SIZE_MAX / 2 / sizeof(*t) ? NULL : rtab_alloc(cap);
        if (t == NULL)
            return IXL_ERR_NO_MEMORY;
        for (size_t i = 0; i < e->rtab_cap; i++)
            for (struct net_region *x = e->rtab[i], *nx; x; x = nx) {
                nx = x->hnext;
                size_t s = key_slot(x->key, cap);
                x->hnext = t[s];
                t[s] = x;
            }
        net_rtab_free(e->rtab, e->rtab_cap);
        e->rtab = t;
        e->rtab_cap = cap;
    }
    size_t s = key_slot(g->key, e->rtab_cap);
    g->hnext = e->rtab[s];
    e->rtab[s] = g;
    e->n_regions++;
    return IXL_OK;
}

static void rtab_remove(struct net_engine *e, struct net_region *g)
{
    struct net_region **pp = &e->rtab[key_slot(g->key, e->rtab_cap)];
    while (*pp && *pp != g)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = g->hnext;
        e->n_regions--;
    }
}

struct net_region *net_region_range(struct net_engine *e, uint64_t key, uint64_t addr, uint64_t len)
{
    struct net_region *g = net_region_find(e, key);
    if (g == NULL || len == 0 || addr < g->addr || addr - g->addr > g->len ||
        len > g->len - (addr - g->addr))
        return NULL;
    return g;
}

/* A random non-zero key (regions_lock held for writing): from the batch, drawn anew when it is
 * used up; when getrandom fails, ixlp_random64's fallback for this key alone. */
static uint64_t next_key(struct net_engine *e)
{
    const size_t n = sizeof(e->key_batch) / sizeof(e->key_batch[0]);
    if (e->keys_left == 0) {
        if (net_sys()->getrandom(e->key_batch, sizeof(e->key_batch), 0) !=
            (ssize_t)sizeof(e->key_batch))
            return ixlp_random64(net_sys()->getrandom);
        e->keys_left = (unsigned)n;
    }
    uint64_t k = e->key_batch[--e->keys_left];
    e->key_batch[e->keys_left] = 0; /* a used key does not stay behind in the batch */
    return k ? k : 1;
}

/* The key of region g, unique in the key table, and g in it (the table is what peers' frames
 * and same-node requests are checked against). A VRAM region is there for TCP frames, which
 * the loops move through staging slots (net_stage.c); it never gets a memfd, and the
 * same-node channel confirms no VRAM region (net_local.c). */
static int region_publish(struct net_engine *e, const struct ixl_reg_desc *d, struct net_region *g)
{
    /* Inside memory NET allocated? Then same-node peers can map it. */
    pthread_mutex_lock(&e->lock);
    for (struct net_alloc *a = e->allocs; a && !g->vram; a = a->next) {
        uint64_t base_addr = (uintptr_t)a->addr;
        if (d->addr >= base_addr && d->addr + d->len <= base_addr + a->len) {
            g->memfd = a->fd;
            g->memfd_off = d->addr - base_addr;
            g->memfd_size = a->len;
            break;
        }
    }
    pthread_mutex_unlock(&e->lock);
    pthread_rwlock_wrlock(&e->regions_lock);
    do
        g->key = next_key(e);
    while (net_region_find(e, g->key) != NULL);
    int rc = rtab_insert(e, g);
    pthread_rwlock_unlock(&e->regions_lock);
    return rc == IXL_OK ? IXL_OK : net_error(e, rc, "out of memory");
}

int net_region_register(struct net_engine *e, enum ixl_mem type, const struct ixl_reg_desc *d,
                        struct net_region **out)
{
    if (d->len == 0 || d->addr == 0 || d->len > UINT64_MAX - d->addr)
        return net_error(e, IXL_ERR_INVALID_ARG, "NET: bad %s region 0x%" PRIx64 "+%" PRIu64,
                         type == IXL_MEM_VRAM ? "VRAM" : "DRAM", d->addr, d->len);
    struct net_region *g = ixlp_pool_get(&e->region_pool);
    if (g == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "no memory for a region record (mmap: %s)",
                         strerror(errno));
    g->magic = NET_REGION_MAGIC;
    g->addr = d->addr;
    g->len = d->len;
    g->memfd = -1;
    int rc;
    if (type == IXL_MEM_VRAM) {
        /* Device memory: classified through the device layer, then in the key table with the
         * same bounds checks as DRAM, for TCP frames only (staged: net_stage.c). */
        rc = net_dev_region(e, d, g);
        if (rc == IXL_OK) /* in the key table for tcp-staged frames (net_stage.c) */
            rc = region_publish(e, d, g);
        if (rc == IXL_OK) { /* and the channel answers IPC claims only for these (net_ipc.c) */
            pthread_rwlock_wrlock(&e->regions_lock);
            g->vnext = e->vram_regions;
            e->vram_regions = g;
            pthread_rwlock_unlock(&e->regions_lock);
        }
    } else {
        rc = region_publish(e, d, g);
    }
    if (rc != IXL_OK) {
        ixlp_pool_put(&e->region_pool, g);
        return rc;
    }
    /* The public data: the network path needs the key; the memfd field only says whether the
     * region lies in memory NET allocated (0) or not (-1): a same-node peer gets the memfd
     * itself over the same-node channel (net_local.c), never by number. */
    ixlp_put_le(g->pub, PUB_MAGIC, 4);
    ixlp_put_le(g->pub + 4, g->key, 8);
    ixlp_put_le(g->pub + 12, g->addr, 8);
    ixlp_put_le(g->pub + 20, g->len, 8);
    ixlp_put_le(g->pub + 28, g->memfd >= 0 ? 0u : UINT32_MAX, 4);
    ixlp_put_le(g->pub + 32, g->memfd_off, 8);
    ixlp_put_le(g->pub + 40, g->memfd_size, 8);
    *out = g;
    return IXL_OK;
}

void net_region_unpublish(struct net_engine *e, struct net_region *g)
{
    if (g->vram) { /* out of the channel's list first; then out of the key table below */
        pthread_rwlock_wrlock(&e->regions_lock);
        for (struct net_region **pp = &e->vram_regions; *pp; pp = &(*pp)->vnext)
            if (*pp == g) {
                *pp = g->vnext;
                break;
            }
        pthread_rwlock_unlock(&e->regions_lock);
    }
    /* Taking the lock for writing waits for a frame being placed into the region right now;
     * once out of the table no frame finds it. */
    pthread_rwlock_wrlock(&e->regions_lock);
    rtab_remove(e, g);
    pthread_rwlock_unlock(&e->regions_lock);
}

struct net_region *net_region_vram(struct net_engine *e, uint64_t key, uint64_t addr, uint64_t len)
{
    for (struct net_region *g = e->vram_regions; g; g = g->vnext)
        if (g->key == key && g->addr == addr && g->len == len)
            return g;
    return NULL;
}

void net_region_free(struct net_engine *e, struct net_region *g)
{
    g->magic = 0;
    ixlp_pool_put(&e->region_pool, g);
}

static struct net_rmd *rmd_new(struct net_engine *e)
{
    struct net_rmd *m = ixlp_pool_get(&e->rmd_pool);
    if (m) {
        m->magic = NET_RMD_MAGIC;
        m->memfd = -1;
        pthread_mutex_init(&m->map_lock, NULL);
    }
    return m;
}

int net_rmd_load_remote(struct net_engine *e, struct net_peer *p, const struct ixl_reg_desc *d,
                        const void *data, size_t len, struct net_rmd **out)
{
    const uint8_t *b = data;
    if (len != PUB_BYTES || ixlp_get_le(b, 4) != PUB_MAGIC)
        return net_error(e, IXL_ERR_MALFORMED, "NET public data of '%s' is malformed", p->name);
    struct net_rmd *m = rmd_new(e);
    if (m == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "no memory for a region record (mmap: %s)",
                         strerror(errno));
    m->key = ixlp_get_le(b + 4, 8);
    m->addr = ixlp_get_le(b + 12, 8);
    m->len = ixlp_get_le(b + 20, 8);
    m->memfd = (int32_t)(uint32_t)ixlp_get_le(b + 28, 4);
    m->memfd_off = ixlp_get_le(b + 32, 8);
    m->memfd_size = ixlp_get_le(b + 40, 8);
    if (m->addr != d->addr || m->len != d->len || m->len == 0 || m->len > UINT64_MAX - m->addr ||
        (m->memfd >= 0 &&
         (m->memfd_off > m->memfd_size || m->len > m->memfd_size - m->memfd_off))) {
        pthread_mutex_destroy(&m->map_lock);
        ixlp_pool_put(&e->rmd_pool, m);
        return net_error(e, IXL_ERR_MALFORMED, "NET public data of '%s' disagrees with its region",
                         p->name);
    }
    m->peer = p;
    *out = m;
    return IXL_OK;
}

int net_rmd_load_local(struct net_engine *e, struct net_region *g, struct net_rmd **out)
{
    struct net_rmd *m = rmd_new(e);
    if (m == NULL)
        return net_error(e, IXL_ERR_NO_MEMORY, "no memory for a region record (mmap: %s)",
                         strerror(errno));
    m->key = g->key;
    m->addr = g->addr;
    m->len = g->len;
    m->local = g;
    m->vram = g->vram;
    m->dev = g->dev;
    *out = m;
    return IXL_OK;
}

void net_rmd_unload(struct net_engine *e, struct net_rmd *m)
{
    if (m->map)
        net_sys()->munmap(m->map, m->map_len);
    pthread_mutex_destroy(&m->map_lock);
    m->magic = 0;
    ixlp_pool_put(&e->rmd_pool, m);
}

/* Maps the memfd the verified owner of m passed over the same-node channel (net_local.c):
 * never a path or descriptor number from metadata, only a memfd of the peer's NET allocator
 * that the peer confirmed holds the region. Asked once per region; the answer is kept. */
void *net_rmd_map(struct net_rmd *m, char *why, size_t why_len)
{
    why[0] = '\0';
    if (m->peer == NULL || m->memfd < 0) {
        snprintf(why, why_len, "the target memory was not allocated with ixl_mem_alloc");
        return NULL;
    }
    /* Asked once per descriptor of every request: decided, the answer is read without a
     * lock (a lock and unlock per descriptor were most of a 32,768-descriptor make). */
    if (atomic_load_explicit(&m->map_tried, memory_order_acquire)) {
        void *r = m->map ? (char *)m->map + m->map_off : NULL;
        if (r == NULL)
            snprintf(why, why_len, "its memory cannot be mapped (said before in the log)");
        return r;
    }
    /* No lock across the channel's system calls; a second thread asking meanwhile maps its
     * own view and the first one kept wins. */
    struct net_engine *e = m->peer->e;
    int fd = -1;
    uint64_t moff = 0, msize = 0, instance = 0;
    void *map = NULL;
    size_t map_len = 0, map_off = 0;
    int rc = net_local_memfd(e, m, &fd, &moff, &msize, &instance, why, why_len);
    if (rc == IXL_ERR_BUSY)
        return NULL; /* the check did not finish (busy, slow): asked again next time */
    if (rc == IXL_OK) {
        struct stat st;
        long page = sysconf(_SC_PAGESIZE);
        uint64_t off = moff & ~((uint64_t)page - 1);
        size_t len = (size_t)(moff - off + m->len);
        void *p = net_sys()->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
        if (p != MAP_FAILED) {
            map = p;
            map_len = len;
            map_off = moff - off;
        } else if (net_sys()->fstat(fd, &st) == 0 && st.st_blksize > page) {
            /* Huge pages: the offset must be huge-page aligned. */
            off = moff & ~((uint64_t)st.st_blksize - 1);
            len = (size_t)(moff - off + m->len);
            len = (len + (size_t)st.st_blksize - 1) & ~((size_t)st.st_blksize - 1);
            if (off + len <= msize) {
                p = net_sys()->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
                if (p != MAP_FAILED) {
                    map = p;
                    map_len = len;
                    map_off = moff - off;
                }
            }
        }
        if (map == NULL)
            snprintf(why, why_len, "mmap of the memfd it passed: %s", strerror(errno));
        net_sys()->close(fd);
    }
    pthread_mutex_lock(&m->map_lock);
    if (atomic_load_explicit(&m->map_tried, memory_order_relaxed)) {
        /* another thread finished first: its answer stands */
        if (map)
            net_sys()->munmap(map, map_len);
    } else {
        m->map = map;
        m->map_len = map_len;
        m->map_off = map_off;
        m->map_instance = instance;
        atomic_store_explicit(&m->map_tried, 1, memory_order_release);
    }
    void *r = m->map ? (char *)m->map + m->map_off : NULL;
    pthread_mutex_unlock(&m->map_lock);
    if (r == NULL && why[0] == '\0')
        snprintf(why, why_len, "its memory cannot be mapped");
    return r;
}

/* ---- allocation ------------------------------------------------------------------------------ */

int net_alloc(struct net_engine *e, size_t len, void **out)
{
    int fd = -1;
    size_t maplen = len;
    void *p = MAP_FAILED;
    if (e->hugepages) {
        fd = net_sys()->memfd_create("ixl-net", MFD_CLOEXEC | MFD_HUGETLB);
        if (fd >= 0) {
            size_t huge = 2u << 20;
            maplen = (len + huge - 1) & ~(huge - 1);
            if (net_sys()->ftruncate(fd, (off_t)maplen) == 0)
                p = net_sys()->mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                    fd, 0);
            if (p == MAP_FAILED) { /* no huge pages reserved */
                net_sys()->close(fd);
                fd = -1;
            }
        }
    }
    if (p == MAP_FAILED) {
        maplen = len;
        fd = net_sys()->memfd_create("ixl-net", MFD_CLOEXEC);
        if (fd < 0)
            return net_error(e, IXL_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
        if (net_sys()->ftruncate(fd, (off_t)maplen) != 0) {
            int err = errno;
            net_sys()->close(fd);
            return net_error(e, IXL_ERR_NO_MEMORY, "ftruncate of %zu bytes: %s", maplen,
                             strerror(err));
        }
        p = net_sys()->mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            net_sys()->close(fd);
            return net_error(e, IXL_ERR_NO_MEMORY, "mmap of %zu bytes: %s", maplen, strerror(err));
        }
        madvise(p, maplen, MADV_HUGEPAGE);
    }
    struct net_alloc *a = net_sys()->calloc(1, sizeof(*a));
    if (a == NULL) {
        net_sys()->munmap(p, maplen);
        net_sys()->close(fd);
        return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
    }
    a->addr = p;
    a->len = maplen;
    a->fd = fd;
    pthread_mutex_lock(&e->lock);
    a->next = e->allocs;
    e->allocs = a;
    pthread_mutex_unlock(&e->lock);
    *out = p;
    return IXL_OK;
}

int net_free(struct net_engine *e, void *addr)
{
    pthread_mutex_lock(&e->lock);
    struct net_alloc **pp = &e->allocs;
    while (*pp && (*pp)->addr != addr)
        pp = &(*pp)->next;
    struct net_alloc *a = *pp;
    if (a)
        *pp = a->next;
    pthread_mutex_unlock(&e->lock);
    if (a == NULL)
        return net_error(e, IXL_ERR_NOT_FOUND, "NET did not allocate %p", addr);
    net_sys()->munmap(a->addr, a->len);
    net_sys()->close(a->fd);
    free(a);
    return IXL_OK;
}

void net_allocs_free_all(struct net_engine *e)
{
    for (struct net_alloc *a = e->allocs, *n; a; a = n) {
        n = a->next;
        net_sys()->munmap(a->addr, a->len);
        net_sys()->close(a->fd);
        free(a);
    }
    e->allocs = NULL;
}

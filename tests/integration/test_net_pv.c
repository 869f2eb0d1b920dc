/*
 * Threads posting to a peer over NET's same-node paths while the peer is restarted and its
 * metadata loaded again. A post reads the peer's instance, whether it is loaded, its pidfd and
 * its life page without the peer's lock (net_peer's post view, a sequence lock; the life page
 * is mapped over a page reserved for the peer, so a reader never touches unmapped memory);
 * every one of those changes here while two threads post 4 KiB WRITEs (shm and cma in turn):
 *   - the peer killed and a new process of the same name started, its metadata loaded (a new
 *     instance: the life page dropped, the pidfd closed, both set again when the new process
 *     is verified);
 *   - the same metadata invalidated and loaded again (loaded off and on).
 * A post must succeed or fail as a request to a gone or reloaded peer does (REMOTE_DISCONNECT,
 * STALE, NOT_FOUND while the name is unknown, UNREACHABLE, NOT_REGISTERED for an address of
 * the process before, which a thread took just before the switch): no other error, no crash,
 * no hang.
 * Afterwards every thread's WRITE to the last process is checked byte for byte there, and a
 * post to a killed peer still fails. Runs under ThreadSanitizer (label threaded).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h"
#include "peer_ctl.h"

#ifndef IXL_PEER_PATH
#error "IXL_PEER_PATH must name the ixl_peer binary"
#endif

#define THREADS 2
#define LEN 4096u
#define CYCLES 6

static struct ixl_agent *ag;
static pthread_mutex_t cur_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rbuf cur[2]; /* 0: shm, 1: heap (cma) */
static atomic_bool stop;
static atomic_ulong n_ok, n_refused;
static uint8_t *L;

static int post_one(unsigned t, int b, uint64_t seed)
{
    pthread_mutex_lock(&cur_lock);
    struct rbuf rb = cur[b];
    pthread_mutex_unlock(&cur_lock);
    uint8_t *src = L + (size_t)t * LEN;
    net_pat_fill(src, LEN, seed, (uint64_t)t * LEN);
    struct ixl_dlist *l, *r;
    struct ixl_desc ld = {(uintptr_t)src, LEN, 0}, rd = {rb.addr + (uint64_t)t * LEN, LEN, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(ag, IXL_OP_WRITE, l, r, "pv_t", NULL, &x);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, 10000);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    return rc;
}

static void *poster(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned k = 0; !atomic_load(&stop); k++) {
        int rc = post_one(t, (int)(k & 1), ((uint64_t)t << 32) + k + 3); /* a fresh seed */
        if (rc == IXL_OK)
            atomic_fetch_add(&n_ok, 1);
        else if (rc == IXL_ERR_REMOTE_DISCONNECT || rc == IXL_ERR_STALE ||
                 rc == IXL_ERR_NOT_FOUND || rc == IXL_ERR_UNREACHABLE ||
                 rc == IXL_ERR_NOT_REGISTERED)
            atomic_fetch_add(&n_refused, 1);
        else
            check_fail(__FILE__, __LINE__, "thread %u post %u: %s: %s", t, k, ixl_strerror(rc),
                       ixl_agent_last_error(ag));
    }
    return NULL;
}

static struct peer *start(void)
{
    struct peer *p = peer_start("pv_t", NULL);
    peer_ready(p);
    struct rbuf s = peer_alloc(p, 0, THREADS * LEN, "shm"),
                h = peer_alloc(p, 1, THREADS * LEN, "heap");
    load_peer(ag, p);
    pthread_mutex_lock(&cur_lock);
    cur[0] = s;
    cur[1] = h;
    pthread_mutex_unlock(&cur_lock);
    return p;
}

int main(void)
{
    peers_init("test_net_pv", IXL_PEER_PATH);
    alarm(110);
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    CHECK_RC(ixl_agent_create("pv_i", &ap, &ag), IXL_OK);
    struct ixl_kv opt[] = {{"timeout_ms", "2000"}};
    CHECK_RC(ixl_backend_create(ag, "NET", opt, 1, NULL), IXL_OK);
    L = aligned_alloc(4096, THREADS * LEN);
    CHECK(L != NULL);
    struct ixl_reg_desc d = {(uintptr_t)L, THREADS * LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(ag, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    struct peer *p = start();
    if (post_one(0, 0, 1) != IXL_OK) {
        fprintf(stderr, "SKIP: a same-node WRITE to a peer fails here: %s\n",
                ixl_agent_last_error(ag));
        return 77;
    }

    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, poster, (void *)(uintptr_t)t) == 0);
    for (int c = 0; c < CYCLES; c++) {
        sleep_ms(30);
        if (c % 2 == 0) { /* a new process, a new instance */
            peer_kill(p);
            p = start();
        } else { /* the same instance, invalidated and loaded again */
            CHECK_RC(ixl_remote_invalidate(ag, "pv_t"), IXL_OK);
            load_peer(ag, p);
        }
    }
    sleep_ms(30);
    atomic_store(&stop, true);
    for (unsigned t = 0; t < THREADS; t++)
        CHECK(pthread_join(th[t], NULL) == 0);
    fprintf(stderr, "%lu WRITEs done, %lu refused across %d restarts and reloads\n",
            atomic_load(&n_ok), atomic_load(&n_refused), CYCLES);
    CHECK(atomic_load(&n_ok) > 0);

    /* The last process has each thread's bytes, over both paths. */
    for (unsigned t = 0; t < THREADS; t++)
        for (int b = 0; b < 2; b++) {
            uint64_t seed = peer_fresh_seed();
            CHECK_RC(post_one(t, b, seed), IXL_OK);
            PEER_OK(p, "check %d %" PRIu64 " %" PRIu64 " %u", b, seed, (uint64_t)t * LEN, LEN);
        }
    /* A killed peer is still refused on the same-node paths. */
    peer_kill(p);
    int rc = post_one(0, 0, 2);
    if (rc != IXL_ERR_REMOTE_DISCONNECT)
        check_fail(__FILE__, __LINE__, "WRITE over shm to a killed peer: %s, want %s",
                   ixl_strerror(rc), ixl_strerror(IXL_ERR_REMOTE_DISCONNECT));
    ixl_agent_destroy(ag);
    free(L);
    fprintf(stderr, "test_net_pv: ok\n");
    return 0;
}

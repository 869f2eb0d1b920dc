/* The kept scratch blocks (src/util/scratch.c): a block given back is handed out again with its
 * pages in; ixl_scratch_take_fit takes a kept block only when it is at most twice the request;
 * blocks live at the same time never overlap, from two threads at once (a pattern written over
 * each block's whole size is checked when it is given back). */
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "util/scratch.h"

#define KIB ((size_t)1 << 10)

/* The most ixl_scratch_take_fit(bytes) may hand out: a kept block of at most twice bytes, or a
 * new one of bytes to the next page (no slack), 16 KiB at least. */
static size_t fit_most(size_t bytes)
{
    return (2 * bytes < 16 * KIB ? 16 * KIB : 2 * bytes) + 4096;
}

static void test_reuse(void)
{
    /* A fresh process: nothing kept yet. */
    void *a = ixl_scratch_take_fit(1024 * KIB);
    CHECK(a != NULL && ixl_scratch_cap(a) >= 1024 * KIB);
    CHECK(ixl_scratch_cap(a) <= 1024 * KIB + 4096); /* no slack for a long-lived array */
    memset(a, 0x5a, 1024 * KIB);
    ixl_scratch_give(a);
    /* The same size again: the kept block. */
    void *b = ixl_scratch_take_fit(1000 * KIB);
    CHECK(b == a);
    ixl_scratch_give(b);
    /* Less than half of it: not that block (it would waste more than half). */
    void *c = ixl_scratch_take_fit(300 * KIB);
    CHECK(c != NULL && c != a && ixl_scratch_cap(c) >= 300 * KIB);
    CHECK(ixl_scratch_cap(c) <= fit_most(300 * KIB));
    /* A call's temporary takes the smallest kept block that fits, whatever its size. */
    void *d = ixl_scratch_take(200 * KIB);
    CHECK(d == a);
    ixl_scratch_give(c);
    ixl_scratch_give(d);
}

struct worker {
    uint64_t seed;
    int fails;
};

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    enum { LIVE = 8, OPS = 1000 };
    unsigned char *live[LIVE] = {NULL};
    size_t cap[LIVE] = {0};
    unsigned char mark[LIVE] = {0};
    for (int op = 0; op < OPS; op++) {
        int i = (int)(next(&w->seed) % LIVE);
        if (live[i] != NULL) {
            /* Intact over its whole size: no other live block overlapped it. */
            for (size_t k = 0; k < cap[i]; k += 61)
                if (live[i][k] != mark[i]) {
                    w->fails++;
                    break;
                }
            if (live[i][cap[i] - 1] != mark[i])
                w->fails++;
            ixl_scratch_give(live[i]);
            live[i] = NULL;
            continue;
        }
        /* 1 KiB to 1 MiB, spread evenly over the powers of two. */
        size_t bytes = (size_t)1 << (10 + next(&w->seed) % 10);
        bytes += next(&w->seed) % bytes;
        int fit = (int)(next(&w->seed) % 2);
        unsigned char *p = fit ? ixl_scratch_take_fit(bytes) : ixl_scratch_take(bytes);
        if (p == NULL || ixl_scratch_cap(p) < bytes ||
            (fit && ixl_scratch_cap(p) > fit_most(bytes))) {
            w->fails++;
            if (p != NULL)
                ixl_scratch_give(p);
            continue;
        }
        live[i] = p;
        cap[i] = ixl_scratch_cap(p);
        mark[i] = (unsigned char)(next(&w->seed) | 1);
        memset(p, mark[i], cap[i]);
    }
    for (int i = 0; i < LIVE; i++)
        ixl_scratch_give(live[i]);
    return NULL;
}

static void test_threads(void)
{
    struct worker w[2] = {{0x9e3779b97f4a7c15ull, 0}, {0xd1b54a32d192ed03ull, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, run, &w[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(w[0].fails == 0 && w[1].fails == 0);
}

int main(void)
{
    test_reuse();
    test_threads();
    ixl_scratch_give(NULL);
    printf("ok\n");
    return 0;
}

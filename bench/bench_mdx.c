/*
 * Time to publish and to fetch an agent's metadata with many regions, through the peer
 * listener and through etcd (bench/mdx.sh starts the etcd). Two agents in this process: "pub"
 * registers N regions of 4 KiB; "sub" gets its metadata.
 *
 *   bench_mdx N ROUNDS [ETCD_ENDPOINT]
 *
 * Prints one line per mode: median and min of ROUNDS rounds, in ms, of
 *   send   ixl_md_send from pub to sub's listener (returns once sub has loaded it)
 *   fetch  ixl_md_fetch by sub from pub's listener, until ixl_remote_check says loaded
 *   publish / etcd-fetch  the same through etcd
 * Between rounds sub drops pub (ixl_remote_invalidate), so every round loads everything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ixl/ixl.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n, size_t bytes, size_t regions)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    printf("%-11s %8zu regions %9zu bytes  median %8.2f ms  min %8.2f ms\n", what, regions, bytes,
           v[n / 2], v[0]);
}

static struct ixl_agent *make(const char *name, const char *etcd)
{
    struct ixl_agent_params p = {
        .field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_LISTEN_PORT,
        .backends = "NET",
        .listen_port = 0,
    };
    if (etcd != NULL) {
        p.field_mask |= IXL_AGENT_F_ETCD;
        p.etcd_endpoints = etcd;
    }
    struct ixl_agent *a;
    int rc = ixl_agent_create(name, &p, &a);
    if (rc != IXL_OK) {
        fprintf(stderr, "bench_mdx: agent %s: %s\n", name, ixl_strerror(rc));
        exit(1);
    }
    return a;
}

static void wait_loaded(struct ixl_agent *a, const char *name)
{
    double t0 = now_ms();
    while (ixl_remote_check(a, name, NULL) != IXL_OK) {
        if (now_ms() - t0 > 60000) {
            fprintf(stderr, "bench_mdx: %s not loaded after 60 s\n", name);
            exit(1);
        }
        usleep(200);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_mdx N ROUNDS [ETCD_ENDPOINT]\n");
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10);
    int rounds = atoi(argv[2]);
    const char *etcd = argc > 3 ? argv[3] : NULL;
    if (n == 0 || rounds < 1 || rounds > 1000)
        return 2;
    struct ixl_agent *pub = make("pub", etcd), *sub = make("sub", etcd);
    char *mem = aligned_alloc(4096, n * 8192);
    struct ixl_reg_desc *d = calloc(n, sizeof(*d));
    if (mem == NULL || d == NULL)
        return 1;
    for (size_t i = 0; i < n; i++) /* gaps between regions: none merge */
        d[i] = (struct ixl_reg_desc){(uintptr_t)(mem + i * 8192), 4096, 0, NULL, 0};
    if (ixl_mem_register(pub, IXL_MEM_DRAM, d, n, NULL) != IXL_OK)
        return 1;
    void *md;
    size_t bytes;
    ixl_md_get(pub, NULL, &md, &bytes);
    ixl_free(md);
    uint16_t pport, sport;
    ixl_agent_listen_port(pub, &pport);
    ixl_agent_listen_port(sub, &sport);
    struct ixl_peer to_sub = {"127.0.0.1", sport}, to_pub = {"127.0.0.1", pport};
    double *v = calloc((size_t)rounds, sizeof(*v));

    for (int r = 0; r < rounds; r++) {
        double t0 = now_ms();
        int rc = ixl_md_send(pub, &to_sub, NULL);
        v[r] = now_ms() - t0;
        if (rc != IXL_OK || ixl_remote_check(sub, "pub", NULL) != IXL_OK)
            return fprintf(stderr, "send: %s\n", ixl_strerror(rc)), 1;
        ixl_remote_invalidate(sub, "pub");
    }
    report("peer send", v, rounds, bytes, n);
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ms();
        if (ixl_md_fetch(sub, "pub", &to_pub, NULL) != IXL_OK)
            return 1;
        wait_loaded(sub, "pub");
        v[r] = now_ms() - t0;
        ixl_remote_invalidate(sub, "pub");
    }
    report("peer fetch", v, rounds, bytes, n);
    if (etcd != NULL) {
        for (int r = 0; r < rounds; r++) {
            double t0 = now_ms();
            int rc = ixl_md_send(pub, NULL, NULL);
            v[r] = now_ms() - t0;
            if (rc != IXL_OK)
                return fprintf(stderr, "publish: %s: %s\n", ixl_strerror(rc),
                               ixl_agent_last_error(pub)),
                       1;
        }
        report("etcd publish", v, rounds, bytes, n);
        for (int r = 0; r < rounds; r++) {
            double t0 = now_ms();
            if (ixl_md_fetch(sub, "pub", NULL, NULL) != IXL_OK)
                return 1;
            wait_loaded(sub, "pub");
            v[r] = now_ms() - t0;
            ixl_remote_invalidate(sub, "pub");
        }
        report("etcd fetch", v, rounds, bytes, n);
    }
    ixl_agent_destroy(sub);
    ixl_agent_destroy(pub);
    free(v);
    free(d);
    free(mem);
    return 0;
}

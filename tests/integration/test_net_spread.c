/*
 * One request's frames spread over the peer's connections (NET, PULL_WINDOW): two agents of
 * this process over loopback TCP (path=tcp, local_paths=0, conns=4, chunk 1 MiB), a WRITE of
 * 32 MiB in one descriptor, then a READ of it back, each with a fresh pattern at the source and
 * a poisoned destination. Around each request the test reads every TCP socket of this process
 * (/proc/self/fd, TCP_INFO's bytes_received): of the sockets that received the request's
 * bytes (the target's accepted connections for the WRITE, the initiator's for the READ), at
 * least 2 must have received 2 MiB or more and none more than 3/4 of it. Before PULL_WINDOW
 * the first connection to wake took up to 64 frames at a time, and a request of up to 64 MiB
 * went over one connection (3.9 GB/s on the H200 machine where four raw connections make
 * 11.4). Not 3 or 4: a connection takes frames when its loop thread runs, and on a loaded
 * machine one loop (two of the four connections, on two loops) may carry a whole request
 * before the other wakes, which is work going where a CPU is. ~1 s.
 */
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "net_raw.h"
#include "tcp_rx.h"

#define LEN (32u << 20)
#define MIN_SHARE (2u << 20)
#define MAX_FDS 256

struct sock_rx {
    int fd;
    uint64_t rx;
};

/* bytes_received of every TCP socket of this process, into s (at most MAX_FDS). */
static int tcp_sockets(struct sock_rx *s)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < MAX_FDS) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd == dirfd(d))
            continue;
        int type = 0, proto = 0;
        socklen_t len = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
            continue;
        len = sizeof(proto);
        if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP)
            continue;
        uint64_t rx;
        if (tcp_rx_bytes(fd, &rx) != 0)
            continue;
        s[n++] = (struct sock_rx){fd, rx};
    }
    closedir(d);
    return n;
}

/* Sockets that received at least MIN_SHARE between before and now; the largest share. */
static int shares(const struct sock_rx *before, int nb, uint64_t *largest, uint64_t *total)
{
    struct sock_rx now[MAX_FDS];
    int n = tcp_sockets(now), k = 0;
    *largest = *total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t was = 0;
        for (int j = 0; j < nb; j++)
            if (before[j].fd == now[i].fd)
                was = before[j].rx;
        uint64_t got = now[i].rx >= was ? now[i].rx - was : now[i].rx;
        *total += got;
        *largest = got > *largest ? got : *largest;
        if (got >= MIN_SHARE)
            k++;
    }
    return k;
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = (seed + i) * 0x9E3779B97F4A7C15ull;
        memcpy(p + i, &v, 8);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(90);
    const char *kv[] = {"path", "tcp",         "local_paths", "0",     "conns",     "4", "chunk",
                        "1M",   "listen_addr", "127.0.0.1",   "addrs", "127.0.0.1", NULL};
    char why[256];
    struct ixl_agent *t = NULL, *a = NULL;
    if (nr_agent("spread-t", kv, &t, why, sizeof(why)) != IXL_OK ||
        nr_agent("spread-i", kv, &a, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    uint8_t *tb = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ib = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(tb != MAP_FAILED && ib != MAP_FAILED);
    struct ixl_reg_desc td = {(uint64_t)(uintptr_t)tb, LEN, 0, NULL, 0};
    struct ixl_reg_desc id = {(uint64_t)(uintptr_t)ib, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &td, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(t, NULL, &md, &md_len), IXL_OK);
    CHECK_RC(ixl_md_load(a, md, md_len, NULL, 0), IXL_OK);
    ixl_free(md);

    /* Connections up first (a small WRITE), so that every socket is there to be counted. */
    struct ixl_xfer *x = NULL;
    CHECK_RC(nr_xfer(a, IXL_OP_WRITE, ib, td.addr, 4096, "spread-t", &x), IXL_OK);
    CHECK_RC(nr_post_wait(x, 20000), IXL_OK);
    CHECK_RC(ixl_xfer_release(x), IXL_OK);

    int rc = 0;
    for (int k = 0; k < 2; k++) {
        enum ixl_op op = k == 0 ? IXL_OP_WRITE : IXL_OP_READ;
        uint8_t *src = op == IXL_OP_WRITE ? ib : tb, *dst = op == IXL_OP_WRITE ? tb : ib;
        fill(src, LEN, 77 + (uint64_t)k);
        memset(dst, 0xA5, LEN);
        CHECK_RC(nr_xfer(a, op, ib, td.addr, LEN, "spread-t", &x), IXL_OK);
        struct sock_rx before[MAX_FDS];
        int nb = tcp_sockets(before);
        CHECK_RC(nr_post_wait(x, 60000), IXL_OK);
        uint64_t largest, total;
        int spread = shares(before, nb, &largest, &total);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
        CHECK(memcmp(src, dst, LEN) == 0);
        const char *name = op == IXL_OP_WRITE ? "WRITE" : "READ";
        printf("%s of 32 MiB: %d sockets received >= 2 MiB of it, the largest share %.1f MiB "
               "of %.1f MiB received\n",
               name, spread, (double)largest / (1 << 20), (double)total / (1 << 20));
        if (spread < 2 || largest > LEN / 4 * 3) {
            fprintf(stderr,
                    "FAIL: the %s's frames went over %d connection(s), not spread over the "
                    "4 (the largest share: %.1f MiB of 32)\n",
                    name, spread, (double)largest / (1 << 20));
            rc = 1;
        }
    }
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, &id, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_deregister(t, IXL_MEM_DRAM, &td, 1, NULL), IXL_OK);
    ixl_agent_destroy(a);
    ixl_agent_destroy(t);
    munmap(tb, LEN);
    munmap(ib, LEN);
    if (rc == 0)
        printf("PASS\n");
    return rc;
}

/*
 * One side of test_net_netns.sh: an agent with a NET backend bound to one address, run inside
 * a network namespace. The two sides meet through files in a shared directory.
 *
 *   net_ns_peer target <dir> <addr>     agent "nstarget": registers 16 MiB filled with pattern
 *                                       1, writes its metadata to <dir>/target.md (and the
 *                                       buffer's address to <dir>/target.addr), waits for the
 *                                       notifications "standalone" and "write-done" from
 *                                       "nsinit", checks that the buffer then holds pattern 2,
 *                                       and waits for <dir>/init.done before it exits
 *   net_ns_peer initiator <dir> <addr>  agent "nsinit" with path=tcp: loads that metadata,
 *                                       READs the 16 MiB and checks pattern 1, sends
 *                                       "standalone", WRITEs pattern 2 with the notification
 *                                       "write-done", then creates <dir>/init.done
 *
 * Exit 0 when every check passed, 1 otherwise (with a message on stderr). A side that fails
 * leaves <dir>/failed behind, so that the other one stops waiting at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define SIZE (16u << 20)
#define WAIT_S 60

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t pattern_word(unsigned seed, size_t i)
{
    uint64_t x = ((uint64_t)seed << 40) ^ (uint64_t)i;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

static void fill(uint64_t *p, unsigned seed)
{
    for (size_t i = 0; i < SIZE / 8; i++)
        p[i] = pattern_word(seed, i);
}

static void check_pattern(const uint64_t *p, unsigned seed, const char *what)
{
    for (size_t i = 0; i < SIZE / 8; i++)
        if (p[i] != pattern_word(seed, i)) {
            fprintf(stderr, "%s: word %zu (byte %zu) differs from pattern %u\n", what, i, i * 8,
                    seed);
            exit(1);
        }
}

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    CHECK(n > 0 && (size_t)n < cap);
}

static const char *shared_dir;
static int succeeded;

/* At exit: a failed run says so to the other side. */
static void mark_failed(void)
{
    char path[4096];
    if (succeeded || shared_dir == NULL ||
        snprintf(path, sizeof(path), "%s/failed", shared_dir) >= (int)sizeof(path))
        return;
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void stop_if_other_failed(void)
{
    char path[4096];
    path_of(path, sizeof(path), shared_dir, "failed");
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "the other side failed\n");
        exit(1);
    }
}

/* Writes a file whole, under a temporary name first, so a reader never sees half of it. */
static void write_file(const char *dir, const char *name, const void *p, size_t len)
{
    char path[4096], tmp[4096];
    path_of(path, sizeof(path), dir, name);
    path_of(tmp, sizeof(tmp), dir, ".tmp");
    FILE *f = fopen(tmp, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(p, 1, len, f) == len);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0);
}

/* Waits up to WAIT_S for a file and returns its bytes (malloc'd, NUL-terminated). */
static char *wait_file(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    path_of(path, sizeof(path), dir, name);
    double t0 = now_s();
    FILE *f;
    while ((f = fopen(path, "rb")) == NULL) {
        stop_if_other_failed();
        if (now_s() - t0 > WAIT_S) {
            fprintf(stderr, "%s did not appear in %d s\n", path, WAIT_S);
            exit(1);
        }
        sleep_ms(20);
    }
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static struct ixl_agent *make_agent(const char *name, const char *addr, const char *path)
{
    /* A real link between hosts: NET listens there only with a cluster key (issue 16), and
     * both ends prove it on every connection. */
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_AUTH_KEY,
                                 .backends = "",
                                 .auth_key = "net-netns-test-cluster-key-0123456789"};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &p, &a), IXL_OK);
    const struct ixl_kv kv[] = {
        {"listen_addr", addr}, {"addrs", addr}, {"path", path}, {"timeout_ms", "10000"}};
    int rc = ixl_backend_create(a, "NET", kv, 4, NULL);
    if (rc != IXL_OK) {
        fprintf(stderr, "NET on %s: %s\n", addr, ixl_agent_last_error(a));
        exit(1);
    }
    return a;
}

static uint64_t *alloc_region(struct ixl_agent *a)
{
    uint64_t *p = aligned_alloc(4096, SIZE);
    CHECK(p != NULL);
    struct ixl_reg_desc d = {(uintptr_t)p, SIZE, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    return p;
}

static int run_target(const char *dir, const char *addr)
{
    struct ixl_agent *a = make_agent("nstarget", addr, "auto");
    uint64_t *buf = alloc_region(a);
    fill(buf, 1);
    char text[64];
    int n = snprintf(text, sizeof(text), "%" PRIxPTR "\n", (uintptr_t)buf);
    write_file(dir, "target.addr", text, (size_t)n);
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &len), IXL_OK);
    write_file(dir, "target.md", blob, len);
    ixl_free(blob);

    int standalone = 0, done = 0;
    double t0 = now_s();
    while (!(standalone && done)) {
        stop_if_other_failed();
        if (now_s() - t0 > WAIT_S) {
            fprintf(stderr,
                    "target: notifications missing after %d s (standalone %d, "
                    "write-done %d)\n",
                    WAIT_S, standalone, done);
            return 1;
        }
        struct ixl_notif_batch *nb;
        CHECK_RC(ixl_notif_drain(a, &nb), IXL_OK);
        for (size_t i = 0; nb && i < nb->count; i++) {
            const struct ixl_notif *it = &nb->items[i];
            if (strcmp(it->agent, "nsinit") != 0) {
                fprintf(stderr, "target: a notification from '%s'\n", it->agent);
                return 1;
            }
            if (it->len == 10 && memcmp(it->msg, "standalone", 10) == 0) {
                standalone++;
            } else if (it->len == 10 && memcmp(it->msg, "write-done", 10) == 0) {
                /* Notifications come after the data: the whole WRITE is in place now. */
                check_pattern(buf, 2, "target after write-done");
                done++;
            } else {
                fprintf(stderr, "target: unexpected notification of %zu bytes\n", it->len);
                return 1;
            }
        }
        ixl_free(nb);
        sleep_ms(10);
    }
    if (standalone != 1 || done != 1) {
        fprintf(stderr, "target: notifications delivered more than once\n");
        return 1;
    }
    free(wait_file(dir, "init.done", NULL));
    ixl_agent_destroy(a);
    free(buf);
    printf("target: got the 16 MiB WRITE and both notifications\n");
    return 0;
}

static struct ixl_dlist *list1(uint64_t addr)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {addr, SIZE, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

static void transfer(struct ixl_agent *a, enum ixl_op op, uint64_t local, uint64_t remote,
                     const char *notif)
{
    struct ixl_dlist *l = list1(local), *r = list1(remote);
    struct ixl_xfer_params p = {0};
    if (notif) {
        p.field_mask = IXL_XFER_F_NOTIF;
        p.notif = notif;
        p.notif_len = strlen(notif);
    }
    struct ixl_xfer *x;
    int rc = ixl_xfer_create(a, op, l, r, "nstarget", &p, &x);
    if (rc != IXL_OK) {
        fprintf(stderr, "initiator: ixl_xfer_create: %s: %s\n", ixl_strerror(rc),
                ixl_agent_last_error(a));
        exit(1);
    }
    rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, WAIT_S * 1000);
    if (rc != IXL_OK) {
        fprintf(stderr, "initiator: %s: %s: %s\n", op == IXL_OP_READ ? "READ" : "WRITE",
                ixl_strerror(rc), ixl_agent_last_error(a));
        exit(1);
    }
    struct ixl_xfer_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_xfer_info(x, &info), IXL_OK);
    if (strcmp(info.backend, "NET") != 0 || strcmp(info.path, "tcp") != 0 || info.bytes != SIZE) {
        fprintf(stderr, "initiator: ran on %s path '%s' (%" PRIu64 " bytes), want NET tcp\n",
                info.backend, info.path, info.bytes);
        exit(1);
    }
    CHECK_RC(ixl_xfer_release(x), IXL_OK);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
}

static int run_initiator(const char *dir, const char *addr)
{
    struct ixl_agent *a = make_agent("nsinit", addr, "tcp");
    uint64_t *buf = alloc_region(a);
    size_t len;
    char *md = wait_file(dir, "target.md", &len);
    char *text = wait_file(dir, "target.addr", NULL);
    uint64_t remote = strtoull(text, NULL, 16);
    CHECK(remote != 0);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(a, md, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, "nstarget") == 0);

    memset(buf, 0, SIZE);
    double t0 = now_s();
    transfer(a, IXL_OP_READ, (uintptr_t)buf, remote, NULL);
    double t_read = now_s() - t0;
    check_pattern(buf, 1, "initiator after READ");

    CHECK_RC(ixl_notif_send(a, "nstarget", "standalone", 10, NULL), IXL_OK);
    fill(buf, 2);
    t0 = now_s();
    transfer(a, IXL_OP_WRITE, (uintptr_t)buf, remote, "write-done");
    double t_write = now_s() - t0;
    write_file(dir, "init.done", "1\n", 2);
    printf("initiator: READ 16 MiB in %.3f s, WRITE 16 MiB in %.3f s over tcp from %s\n", t_read,
           t_write, addr);
    ixl_agent_destroy(a);
    free(buf);
    free(md);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s target|initiator <dir> <ipv4 address>\n", argv[0]);
        return 1;
    }
    ixl_log_set_level(IXL_LOG_WARN);
    shared_dir = argv[2];
    atexit(mark_failed);
    int rc = 1;
    if (strcmp(argv[1], "target") == 0)
        rc = run_target(argv[2], argv[3]);
    else if (strcmp(argv[1], "initiator") == 0)
        rc = run_initiator(argv[2], argv[3]);
    else
        fprintf(stderr, "unknown role '%s'\n", argv[1]);
    succeeded = rc == 0;
    return rc;
}

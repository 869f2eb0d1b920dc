/*
 * ixl_xfer_post never waits on a peer (issue 15): with NET's timeout_ms=2000, a post returns in
 * under 50 ms to
 *   (1) a peer not yet connected, alive: the WRITE then completes, and a READ back into a
 *       poisoned buffer gives the fresh pattern written;
 *   (2) a stopped peer (its process SIGSTOP'ed: the kernel still completes the TCP handshake,
 *       nobody answers the HELLO);
 *   (3) an unreachable address: the metadata of a peer that exited, whose port now belongs to a
 *       listener with a full accept queue (backlog 0 and one connection never accepted), so
 *       that a connect() hangs as towards a black hole (SYNs dropped). A black-hole address
 *       such as 10.255.255.1 does not do it here: this machine's network answers it at once.
 * and the requests of (2) and (3) end with IXL_ERR_REMOTE_DISCONNECT or IXL_ERR_UNREACHABLE
 * within timeout_ms plus a margin (1.5 s: a heartbeat and the machine's slack) of their post,
 * never hanging. The initiator forces path=tcp (the peers are on this node).
 *
 * The peers are processes forked before this process creates its agent: each makes an agent
 * with a NET backend, registers a buffer and sends its metadata and the buffer's address up a
 * pipe, then waits for the pipe to close.
 */
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "net_raw.h"

#define TIMEOUT_MS 2000
#define POST_MAX_S 0.050
#define END_MARGIN_S 1.5
#define LEN (1u << 20)

struct child {
    pid_t pid;
    int fd; /* metadata up, then our end closes to stop it */
    uint8_t *md;
    size_t md_len;
    uint64_t addr;
};

static struct child kids[3];

/* The hang guard's (nr_guard) last act: no child outlives the test. */
static void kill_children(void)
{
    for (int i = 0; i < 3; i++)
        if (kids[i].pid > 0) {
            kill(kids[i].pid, SIGCONT);
            kill(kids[i].pid, SIGKILL);
        }
}

/* The peer process: exit_after_md makes it destroy its agent and exit once the metadata is
 * sent (its listener is then gone). */
static int child_main(int idx, int fd, bool exit_after_md)
{
    char name[16], why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1",
                        "timeout_ms",  "2000",      NULL};
    struct ixl_agent *a;
    snprintf(name, sizeof(name), "peer%d", idx);
    if (nr_agent(name, kv, &a, why, sizeof(why)) != IXL_OK) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    uint8_t *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 1;
    memset(buf, 0x5a, LEN);
    struct ixl_reg_desc rd = {(uint64_t)(uintptr_t)buf, LEN, 0, NULL, 0};
    void *md;
    size_t md_len;
    if (ixl_mem_register(a, IXL_MEM_DRAM, &rd, 1, NULL) != IXL_OK ||
        ixl_md_get(a, NULL, &md, &md_len) != IXL_OK)
        return 1;
    uint64_t hdr[2] = {md_len, (uint64_t)(uintptr_t)buf};
    if (nr_write_all(fd, hdr, sizeof(hdr)) != 0 || nr_write_all(fd, md, md_len) != 0)
        return 1;
    ixl_free(md);
    if (!exit_after_md) {
        char c;
        while (read(fd, &c, 1) > 0) {
        }
    }
    if (ixl_mem_deregister(a, IXL_MEM_DRAM, &rd, 1, NULL) != IXL_OK)
        fprintf(stderr, "peer%d: deregister: %s\n", idx, ixl_agent_last_error(a));
    ixl_agent_destroy(a);
    return 0;
}

static void start_child(int idx, bool exit_after_md)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        for (int j = 0; j < idx; j++)
            close(kids[j].fd); /* the others' ends: each peer sees only its own pipe close */
        _exit(child_main(idx, sv[1], exit_after_md));
    }
    close(sv[1]);
    kids[idx].pid = pid;
    kids[idx].fd = sv[0];
}

static void read_md(int idx)
{
    struct child *k = &kids[idx];
    uint64_t hdr[2];
    CHECK(nr_read_all(k->fd, hdr, sizeof(hdr)) == 0 && hdr[0] > 0 && hdr[0] < (1u << 20));
    k->md_len = (size_t)hdr[0];
    k->addr = hdr[1];
    k->md = malloc(k->md_len);
    CHECK(k->md != NULL && nr_read_all(k->fd, k->md, k->md_len) == 0);
}

/* Posts x and returns how long the post took; *st gets its status. */
static double timed_post(struct ixl_xfer *x, ixl_status *st)
{
    double t0 = nr_now();
    *st = ixl_xfer_post(x);
    return nr_now() - t0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_post_async", 100, kill_children);
    ixl_log_set_level(IXL_LOG_NONE);

    /* The peers, before this process has any of ixl's threads. */
    for (int i = 0; i < 3; i++)
        start_child(i, i == 2);
    for (int i = 0; i < 3; i++)
        read_md(i);
    /* (3): the peer exited; a listener that never accepts takes its port. */
    int st3;
    CHECK(waitpid(kids[2].pid, &st3, 0) == kids[2].pid && WIFEXITED(st3) && WEXITSTATUS(st3) == 0);
    kids[2].pid = 0;
    struct nr_target gone;
    nr_learn_blob(kids[2].md, kids[2].md_len, &gone);
    int hole = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    CHECK(hole >= 0);
    setsockopt(hole, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(gone.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(hole, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        skip(0, "the exited peer's port was taken by another process meanwhile");
    CHECK(listen(hole, 0) == 0);
    int filler = nr_connect(gone.port, 0, 1000); /* fills the accept queue */
    CHECK(filler >= 0);
    /* A connect now hangs: check that it does here (non-blocking, 300 ms). */
    {
        int probe = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        CHECK(probe >= 0);
        int r = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
        CHECK(r != 0 && errno == EINPROGRESS);
        struct pollfd pf = {probe, POLLOUT, 0};
        if (poll(&pf, 1, 300) != 0)
            skip(0, "a connect to a full accept queue does not hang on this machine");
        close(probe);
    }

    /* The initiator. */
    char why[256];
    const char *kv[] = {"listen_addr", "127.0.0.1", "addrs", "127.0.0.1", "timeout_ms",
                        "2000",        "path",      "tcp",   NULL};
    struct ixl_agent *a;
    if (nr_agent("init", kv, &a, why, sizeof(why)) != IXL_OK)
        check_fail(__FILE__, __LINE__, "%s", why);
    uint8_t *src = aligned_alloc(4096, LEN), *dst = aligned_alloc(4096, LEN);
    CHECK(src != NULL && dst != NULL);
    struct ixl_reg_desc rd[2] = {{(uint64_t)(uintptr_t)src, LEN, 0, NULL, 0},
                                 {(uint64_t)(uintptr_t)dst, LEN, 0, NULL, 0}};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    for (int i = 0; i < 3; i++)
        CHECK_RC(ixl_md_load(a, kids[i].md, kids[i].md_len, NULL, 0), IXL_OK);

    /* (1) alive, not yet connected. */
    uint64_t seed = (uint64_t)time(NULL) * 7919u;
    net_pat_fill(src, LEN, seed, 0);
    struct ixl_xfer *w1, *r1, *x2, *x3;
    CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, kids[0].addr, LEN, "peer0", &w1), IXL_OK);
    ixl_status st;
    double t = timed_post(w1, &st);
    fprintf(stderr, "(1) live peer, not connected: post took %.1f ms (%s)\n", t * 1e3,
            ixl_strerror(st));
    if (t >= POST_MAX_S)
        nr_fail("(1) post to a live peer not yet connected took %.1f ms (want < %.0f)", t * 1e3,
                POST_MAX_S * 1e3);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(w1, 10000);
    if (st != IXL_OK) {
        nr_fail("(1) WRITE to a live peer ended with %s: %s", ixl_strerror(st),
                ixl_agent_last_error(a));
    } else {
        memset(dst, 0xa5, LEN);
        CHECK_RC(nr_xfer(a, IXL_OP_READ, dst, kids[0].addr, LEN, "peer0", &r1), IXL_OK);
        CHECK_RC(nr_post_wait(r1, 10000), IXL_OK);
        size_t bad = net_pat_find_bad(dst, LEN, seed, 0);
        if (bad != LEN)
            nr_fail("(1) the data read back differs at byte %zu", bad);
        CHECK_RC(ixl_xfer_release(r1), IXL_OK);
    }
    CHECK_RC(ixl_xfer_release(w1), IXL_OK);

    /* (2) stopped and (3) unreachable: posted back to back, then watched together. */
    CHECK(kill(kids[1].pid, SIGSTOP) == 0);
    nr_sleep_ms(50);
    CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, kids[1].addr, LEN, "peer1", &x2), IXL_OK);
    CHECK_RC(nr_xfer(a, IXL_OP_WRITE, src, kids[2].addr, LEN, "peer2", &x3), IXL_OK);
    struct {
        const char *what;
        struct ixl_xfer *x;
        ixl_status st;
        double posted, took, ended;
    } c[2] = {{"(2) stopped peer", x2, 0, 0, 0, 0}, {"(3) unreachable address", x3, 0, 0, 0, 0}};
    for (int i = 0; i < 2; i++) {
        c[i].posted = nr_now();
        c[i].took = timed_post(c[i].x, &c[i].st);
        if (c[i].st != IXL_IN_PROGRESS)
            c[i].ended = c[i].posted + c[i].took;
        fprintf(stderr, "%s: post took %.1f ms (%s)\n", c[i].what, c[i].took * 1e3,
                ixl_strerror(c[i].st));
        if (c[i].took >= POST_MAX_S)
            nr_fail("%s: post took %.1f ms (want < %.0f; timeout_ms=%d)", c[i].what,
                    c[i].took * 1e3, POST_MAX_S * 1e3, TIMEOUT_MS);
    }
    double limit = TIMEOUT_MS / 1000.0 + END_MARGIN_S;
    double deadline = nr_now() + limit + 10.0; /* watch past the limit, to say how far */
    while ((c[0].ended == 0 || c[1].ended == 0) && nr_now() < deadline) {
        for (int i = 0; i < 2; i++) {
            if (c[i].ended != 0)
                continue;
            ixl_status s = ixl_xfer_status(c[i].x);
            if (s != IXL_IN_PROGRESS) {
                c[i].st = s;
                c[i].ended = nr_now();
            }
        }
        nr_sleep_ms(5);
    }
    for (int i = 0; i < 2; i++) {
        if (c[i].ended == 0) {
            nr_fail("%s: the request was still in flight %.1f s after its post (a hang)", c[i].what,
                    nr_now() - c[i].posted);
            continue;
        }
        double d = c[i].ended - c[i].posted;
        fprintf(stderr, "%s: ended with %s %.2f s after its post\n", c[i].what,
                ixl_strerror(c[i].st), d);
        if (c[i].st != IXL_ERR_REMOTE_DISCONNECT && c[i].st != IXL_ERR_UNREACHABLE)
            nr_fail("%s: ended with %s (want IXL_ERR_REMOTE_DISCONNECT or IXL_ERR_UNREACHABLE)",
                    c[i].what, ixl_strerror(c[i].st));
        if (d > limit)
            nr_fail("%s: ended %.2f s after its post (want <= timeout_ms + %.1f s = %.1f s)",
                    c[i].what, d, END_MARGIN_S, limit);
    }
    for (int i = 0; i < 2; i++)
        if (ixl_xfer_release(c[i].x) != IXL_OK)
            nr_fail("%s: release: %s", c[i].what, ixl_agent_last_error(a));

    /* Cleanup: the stopped peer resumes, every peer is told to exit. */
    kill(kids[1].pid, SIGCONT);
    CHECK_RC(ixl_mem_deregister(a, IXL_MEM_DRAM, rd, 2, NULL), IXL_OK);
    ixl_agent_destroy(a);
    close(filler);
    close(hole);
    for (int i = 0; i < 2; i++) {
        close(kids[i].fd);
        int ws;
        CHECK(waitpid(kids[i].pid, &ws, 0) == kids[i].pid);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            nr_fail("peer%d ended with status %d", i, ws);
        kids[i].pid = 0;
    }
    for (int i = 0; i < 3; i++)
        free(kids[i].md);
    free(src);
    free(dst);
    if (nr_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", nr_failures);
        return 1;
    }
    return 0;
}

/*
 * The metadata listener under a flood of idle, slow and lying clients (issue 15): a child
 * process runs the listening agent "L" (so its threads, memory, CPU time and descriptors are
 * its own, read from /proc/<pid>); this process floods it and, from its own agent "C", keeps
 * sending and fetching metadata.
 *
 *   idle    300 idle clients (connected, silent) + 300 slow ones (a header, then 1 byte per
 *           100 ms): C's send/invalidate/fetch keep working during the flood; L's thread count
 *           does not change; its RSS grows by less than 16 MiB
 *   nofile  the same flood with RLIMIT_NOFILE=64 in L's process: the connections L cannot hold
 *           are refused at once (the backlog drains: at most 64 are still open 3 s into the
 *           flood), L does not spin (CPU < 50% of the flood's time), and C's requests succeed
 *           once the flooders go
 *   nofile_keyed  the same with a cluster key on both sides: the slow clients' headers are
 *           refused at once (no proof), the idle ones hold only their connection until the
 *           5 s deadline; the same bounds hold
 *   huge    16 clients claiming a 200 MiB body each, then trickling bytes: L's RSS and address
 *           space grow by far less than the claims (< 64 MiB), C's requests keep working
 *   limit   1024 idle clients (the listener's limit): C's send is refused at once with
 *           IXL_ERR_BUSY and a text naming the limit; it works again once they go
 *
 *   test_mdx_flood [idle|nofile|huge|limit ...]   default: all. Each case takes 1-4 s.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define N_IDLE 300
#define N_SLOW 300
#define N_HUGE 16
#define N_LIMIT 1024 /* the listener's MDX_MAX_CONNS */
#define HUGE_CLAIM (200u << 20)
#define WAIT_MS 5000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the listener's process ----------------------------------------------------------------- */

struct child {
    pid_t pid;
    int ctl; /* closing it tells the child to destroy its agent and exit */
    uint16_t port;
};

/* The cluster key of the case's agents ("": none). */
static const char *flood_key = "";

static struct ixl_agent *agent_new(const char *name, bool listen, uint16_t *port)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_AUTH_KEY,
                                  .backends = "",
                                  .auth_key = flood_key};
    if (listen) {
        ap.field_mask |= IXL_AGENT_F_LISTEN_PORT;
        ap.listen_port = 0;
    }
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create(name, &ap, &a), IXL_OK);
    if (listen)
        CHECK_RC(ixl_agent_listen_port(a, port), IXL_OK);
    return a;
}

/* Forks the process of agent L (with RLIMIT_NOFILE nofile, 0: unchanged); returns once L
 * listens. */
static struct child child_start(rlim_t nofile)
{
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        if (nofile != 0) {
            struct rlimit rl = {nofile, nofile};
            CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
        }
        uint16_t port = 0;
        struct ixl_agent *l = agent_new("L", true, &port);
        CHECK(write(up[1], &port, sizeof(port)) == (ssize_t)sizeof(port));
        char b;
        while (read(down[0], &b, 1) < 0 && errno == EINTR)
            ;
        ixl_agent_destroy(l);
        exit(0);
    }
    close(up[1]);
    close(down[0]);
    struct child c = {pid, down[1], 0};
    CHECK(read(up[0], &c.port, sizeof(c.port)) == (ssize_t)sizeof(c.port));
    close(up[0]);
    return c;
}

static void child_stop(struct child *c)
{
    close(c->ctl);
    int st = 0;
    CHECK(waitpid(c->pid, &st, 0) == c->pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        check_fail(__FILE__, __LINE__, "the listener's process ended with status 0x%x", st);
}

/* A field of /proc/<pid>/status ("Threads", "VmRSS" in KiB, "VmSize" in KiB). */
static long proc_status(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    CHECK(v >= 0);
    return v;
}

/* The process's CPU time (user + system) in ms. */
static long proc_cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    CHECK(p != NULL);
    unsigned long ut = 0, st = 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
     */
    CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2);
    return (long)((ut + st) * 1000u / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* ---- the flood ------------------------------------------------------------------------------ */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A SEND header (mdx_wire.h) claiming a body of len bytes. */
static void send_header(uint8_t h[16], uint32_t len)
{
    memcpy(h, "IXLX", 4);
    h[4] = 2;
    h[5] = 1;
    put_le(h + 6, 0, 2);
    put_le(h + 8, len, 4);
    put_le(h + 12, 0, 4);
}

struct flooder {
    int fd;
    bool talks;   /* sends a header, then a byte per tick */
    uint32_t len; /* the body length its header claims */
    size_t sent;  /* bytes sent so far */
    bool gone;    /* its connection ended (refused or cut) */
    size_t heard; /* bytes received: the listener's greeting (HELLO) first */
};

struct flood {
    struct flooder *f;
    int n;
    atomic_bool stop;
    pthread_t th;
};

/* A nonblocking connect (a listener that does not accept must not block the flood). */
static int dial_nb(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    CHECK(rc == 0 || errno == EINPROGRESS);
    return fd;
}

/* Every 100 ms each talking client sends what is left of its header, or one more byte. */
static void *flood_main(void *arg)
{
    struct flood *fl = arg;
    while (!atomic_load(&fl->stop)) {
        for (int i = 0; i < fl->n; i++) {
            struct flooder *f = &fl->f[i];
            if (!f->talks || f->gone)
                continue;
            uint8_t buf[16];
            size_t n = 1;
            if (f->sent < 16) {
                send_header(buf, f->len);
                n = 16 - f->sent;
                memmove(buf, buf + f->sent, n);
            } else {
                buf[0] = 'x';
            }
            ssize_t k = send(f->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0)
                f->sent += (size_t)k;
            else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)
                f->gone = true;
        }
        sleep_ms(100);
    }
    return NULL;
}

static void flood_start(struct flood *fl, uint16_t port, int n_idle, int n_talk, uint32_t claim)
{
    fl->n = n_idle + n_talk;
    fl->f = calloc((size_t)fl->n, sizeof(*fl->f));
    CHECK(fl->f != NULL);
    for (int i = 0; i < fl->n; i++) {
        fl->f[i].fd = dial_nb(port);
        fl->f[i].talks = i >= n_idle;
        fl->f[i].len = claim;
    }
    atomic_store(&fl->stop, false);
    CHECK(pthread_create(&fl->th, NULL, flood_main, fl) == 0);
}

/* The listener's greeting at accept (HELLO, mdx_wire.h): 16 + 17 bytes; it asks nothing of a
 * client without a key, and ends nothing. */
#define HELLO_LEN 33

/* How many flood connections the listener ended (a reply, EOF or reset), looking now: anything
 * but the greeting counts (flood_main only sends: heard is this thread's). */
static int flood_ended(struct flood *fl)
{
    int n = 0;
    for (int i = 0; i < fl->n; i++) {
        struct flooder *f = &fl->f[i];
        struct pollfd p = {f->fd, POLLIN, 0};
        if (poll(&p, 1, 0) != 1)
            continue;
        if (p.revents & (POLLHUP | POLLERR)) {
            n++;
            continue;
        }
        uint8_t buf[256];
        size_t want = f->heard < HELLO_LEN ? HELLO_LEN - f->heard : sizeof(buf);
        ssize_t k = recv(f->fd, buf, want, MSG_DONTWAIT);
        if (k > 0)
            f->heard += (size_t)k;
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || f->heard > HELLO_LEN) {
            n++;
            continue;
        }
        if (f->heard < HELLO_LEN)
            continue;
        /* the greeting is in: does anything follow it? */
        p.revents = 0;
        n += poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
    }
    return n;
}

/* Stops the flood; returns the bytes its clients sent. */
static size_t flood_stop(struct flood *fl)
{
    atomic_store(&fl->stop, true);
    pthread_join(fl->th, NULL);
    size_t sent = 0;
    for (int i = 0; i < fl->n; i++) {
        sent += fl->f[i].sent;
        close(fl->f[i].fd);
    }
    free(fl->f);
    return sent;
}

/* ---- the legitimate client ------------------------------------------------------------------ */

/* C sends its metadata to L (L loads it: proven by the invalidation that follows finding it),
 * then fetches L's afresh (dropped first). Returns IXL_OK or the first failure's status. */
static int legit_round(struct ixl_agent *c, uint16_t port, uint64_t *ms)
{
    uint64_t t0 = now_ms();
    struct ixl_peer peer = {"127.0.0.1", port};
    int rc = ixl_md_send(c, &peer, NULL);
    if (rc != IXL_OK) {
        fprintf(stderr, "  send: %s\n", ixl_agent_last_error(c));
        return rc;
    }
    rc = ixl_md_invalidate_local(c, &peer);
    if (rc != IXL_OK) {
        fprintf(stderr, "  invalidate: %s\n", ixl_agent_last_error(c));
        return rc;
    }
    int r = ixl_remote_invalidate(c, "L");
    CHECK(r == IXL_OK || r == IXL_ERR_NOT_FOUND);
    CHECK_RC(ixl_remote_check(c, "L", NULL), IXL_ERR_NOT_FOUND);
    rc = ixl_md_fetch(c, "L", &peer, NULL);
    if (rc != IXL_OK)
        return rc;
    while ((rc = ixl_md_fetch_status(c, "L")) == IXL_IN_PROGRESS) {
        if (now_ms() - t0 > WAIT_MS)
            check_fail(__FILE__, __LINE__, "a fetch from L still runs after %d ms", WAIT_MS);
        sleep_ms(2);
    }
    if (rc != IXL_OK) {
        fprintf(stderr, "  fetch: %s\n", ixl_agent_last_error(c));
        return rc;
    }
    CHECK_RC(ixl_remote_check(c, "L", NULL), IXL_OK);
    *ms = now_ms() - t0;
    return IXL_OK;
}

/* ---- the cases ------------------------------------------------------------------------------ */

static void case_idle(void)
{
    uint64_t t0 = now_ms();
    struct child ch = child_start(0); /* before C: this process has one thread */
    uint16_t unused;
    struct ixl_agent *c = agent_new("C", false, &unused);
    uint64_t ms;
    CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
    long th0 = proc_status(ch.pid, "Threads"), rss0 = proc_status(ch.pid, "VmRSS");
    struct flood fl;
    flood_start(&fl, ch.port, N_IDLE, N_SLOW, 1000);
    long th_max = th0, rss_max = rss0;
    uint64_t worst = 0;
    for (int round = 0; round < 10; round++) { /* about 2 s of flood */
        sleep_ms(150);
        CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
        worst = ms > worst ? ms : worst;
        long th = proc_status(ch.pid, "Threads"), rss = proc_status(ch.pid, "VmRSS");
        th_max = th > th_max ? th : th_max;
        rss_max = rss > rss_max ? rss : rss_max;
    }
    int ended = flood_ended(&fl);
    flood_stop(&fl);
    fprintf(stderr,
            "idle: %d idle + %d slow clients: L's threads %ld -> at most %ld, RSS %ld -> at most "
            "%ld KiB; send+invalidate+fetch from C worked 10 times (slowest %" PRIu64
            " ms); %d flood connections ended early; %" PRIu64 " ms\n",
            N_IDLE, N_SLOW, th0, th_max, rss0, rss_max, worst, ended, now_ms() - t0);
    CHECK(th_max == th0);
    CHECK(rss_max - rss0 < 16 * 1024);
    CHECK(ended == 0); /* under the connection limit, nobody was refused or cut early */
    CHECK(worst < 2000);
    ixl_agent_destroy(c);
    child_stop(&ch);
}

static void case_nofile(const char *key)
{
    flood_key = key;
    uint64_t t0 = now_ms();
    struct child ch = child_start(64); /* before C: this process has one thread */
    uint16_t unused;
    struct ixl_agent *c = agent_new("C", false, &unused);
    uint64_t ms;
    CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
    long cpu0 = proc_cpu_ms(ch.pid), th0 = proc_status(ch.pid, "Threads");
    uint64_t f0 = now_ms();
    struct flood fl;
    flood_start(&fl, ch.port, N_IDLE, N_SLOW, 1000);
    /* during the flood C may be refused (L has no descriptor for it): said, not waited on */
    int during = 0;
    for (int round = 0; round < 5; round++) {
        sleep_ms(200);
        if (legit_round(c, ch.port, &ms) == IXL_OK)
            during++;
    }
    while (now_ms() - f0 < 3000)
        sleep_ms(50);
    int ended = flood_ended(&fl);
    long cpu = proc_cpu_ms(ch.pid) - cpu0, th = proc_status(ch.pid, "Threads");
    uint64_t wall = now_ms() - f0;
    flood_stop(&fl);
    sleep_ms(100); /* L sees the flooders' connections end */
    int rc = legit_round(c, ch.port, &ms);
    fprintf(stderr,
            "nofile%s: RLIMIT_NOFILE=64, %d idle + %d slow clients: %d of their connections "
            "ended within %" PRIu64 " ms; L used %ld ms of CPU in it; threads %ld -> %ld; C's "
            "rounds during the flood: %d of 5 ok; after it: %s (%" PRIu64 " ms); %" PRIu64 " ms\n",
            key[0] ? " (cluster key: no client proves it)" : "", N_IDLE, N_SLOW, ended, wall, cpu,
            th0, th, during, ixl_strerror(rc), ms, now_ms() - t0);
    CHECK(ended >= N_IDLE + N_SLOW - 64); /* refused at once, not left in the backlog */
    CHECK(cpu * 2 < (long)wall);          /* no spinning on EMFILE */
    CHECK(th == th0);
    CHECK_RC(rc, IXL_OK);
    ixl_agent_destroy(c);
    child_stop(&ch);
    flood_key = "";
}

static void case_huge(void)
{
    uint64_t t0 = now_ms();
    struct child ch = child_start(0); /* before C: this process has one thread */
    uint16_t unused;
    struct ixl_agent *c = agent_new("C", false, &unused);
    uint64_t ms;
    CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
    long rss0 = proc_status(ch.pid, "VmRSS"), vm0 = proc_status(ch.pid, "VmSize");
    struct flood fl;
    flood_start(&fl, ch.port, 0, N_HUGE, HUGE_CLAIM);
    long rss_max = rss0, vm_max = vm0;
    for (int round = 0; round < 8; round++) {
        sleep_ms(150);
        CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
        long rss = proc_status(ch.pid, "VmRSS"), vm = proc_status(ch.pid, "VmSize");
        rss_max = rss > rss_max ? rss : rss_max;
        vm_max = vm > vm_max ? vm : vm_max;
    }
    int ended = flood_ended(&fl);
    size_t sent = flood_stop(&fl);
    fprintf(stderr,
            "huge: %d clients claiming %u MiB each (%zu bytes sent in all): L's RSS %ld -> at "
            "most %ld KiB, address space %ld -> at most %ld KiB; %d ended early; %" PRIu64 " ms\n",
            N_HUGE, HUGE_CLAIM >> 20, sent, rss0, rss_max, vm0, vm_max, ended, now_ms() - t0);
    CHECK(sent > (size_t)N_HUGE * 16); /* the headers went, and bytes after them */
    CHECK(rss_max - rss0 < 64 * 1024);
    CHECK(vm_max - vm0 < 64 * 1024);
    CHECK(ended == 0);
    ixl_agent_destroy(c);
    child_stop(&ch);
}

/* Descriptors open in the process. */
static int proc_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Descriptors open in the process once the count has held still for 300 ms: the connection of
 * a round that just ended is closed by L when it reads the end of it, a little later. */
static int proc_fds_settled(pid_t pid, uint64_t t0)
{
    int n = proc_fds(pid);
    uint64_t since = now_ms();
    while (now_ms() - since < 300) {
        if (now_ms() - t0 > WAIT_MS)
            check_fail(__FILE__, __LINE__, "L's descriptors never settle (%d now)", n);
        sleep_ms(20);
        int m = proc_fds(pid);
        if (m != n) {
            n = m;
            since = now_ms();
        }
    }
    return n;
}

static void case_limit(void)
{
    uint64_t t0 = now_ms();
    struct child ch = child_start(0); /* before C: this process has one thread */
    uint16_t unused;
    struct ixl_agent *c = agent_new("C", false, &unused);
    uint64_t ms;
    CHECK_RC(legit_round(c, ch.port, &ms), IXL_OK);
    int fds0 = proc_fds_settled(ch.pid, now_ms());
    struct flood fl;
    flood_start(&fl, ch.port, N_LIMIT, 0, 0);
    uint64_t t_flood = now_ms();
    while (proc_fds(ch.pid) < fds0 + N_LIMIT) { /* L accepted them all */
        if (now_ms() - t_flood > WAIT_MS)
            check_fail(__FILE__, __LINE__, "L holds %d descriptors, %d before %d clients",
                       proc_fds(ch.pid), fds0, N_LIMIT);
        sleep_ms(10);
    }
    /* one more: refused at once with a clear error, not left waiting */
    struct ixl_peer peer = {"127.0.0.1", ch.port};
    uint64_t t1 = now_ms();
    int rc = ixl_md_send(c, &peer, NULL);
    uint64_t took = now_ms() - t1;
    char text[512];
    snprintf(text, sizeof(text), "%s", ixl_agent_last_error(c));
    int ended = flood_ended(&fl);
    flood_stop(&fl);
    sleep_ms(100); /* L sees the flooders' connections end */
    int after = legit_round(c, ch.port, &ms);
    fprintf(stderr,
            "limit: %d idle clients: one more got %s in %" PRIu64 " ms (%s); after they went: "
            "%s; %" PRIu64 " ms\n",
            N_LIMIT, ixl_strerror(rc), took, text, ixl_strerror(after), now_ms() - t0);
    CHECK_RC(rc, IXL_ERR_BUSY);
    CHECK_STR_HAS(text, "connections at once (its limit)");
    CHECK(took < 1000);
    CHECK(ended == 0);
    CHECK_RC(after, IXL_OK);
    ixl_agent_destroy(c);
    child_stop(&ch);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(100);
    /* agents without backends warn at every load, and the listener at every refused client:
     * thousands of lines the cases do not read (IXL_LOG_LEVEL=warn in the environment wins) */
    setenv("IXL_LOG_LEVEL", "error", 0);
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < 2048) {
        if (rl.rlim_max < 2048)
            skip(0, "the flood needs 2048 descriptors (RLIMIT_NOFILE hard limit is lower)");
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }
    const char *all[] = {"idle", "nofile", "nofile_keyed", "huge", "limit"};
    int n = argc > 1 ? argc - 1 : (int)(sizeof(all) / sizeof(all[0]));
    for (int i = 0; i < n; i++) {
        const char *which = argc > 1 ? argv[i + 1] : all[i];
        if (strcmp(which, "idle") == 0)
            case_idle();
        else if (strcmp(which, "nofile") == 0)
            case_nofile("");
        else if (strcmp(which, "nofile_keyed") == 0)
            case_nofile("test-mdx-flood-cluster-key-01");
        else if (strcmp(which, "huge") == 0)
            case_huge();
        else if (strcmp(which, "limit") == 0)
            case_limit();
        else
            check_fail(__FILE__, __LINE__,
                       "unknown case '%s' (idle, nofile, nofile_keyed, huge, limit)", which);
    }
    fprintf(stderr, "test_mdx_flood: all passed\n");
    return 0;
}

/* Peer processes for the two-process tests (see peer_ctl.h). */
#include "peer_ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_common.h"

static struct peer peers[MAX_PEERS];
pid_t main_pid;
static const char *peer_path;
static char alarm_msg[160];
static size_t alarm_len;

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void kill_peers(void)
{
    if (getpid() != main_pid)
        return; /* a forked child exiting */
    for (int i = 0; i < MAX_PEERS; i++)
        if (peers[i].pid > 0 && !peers[i].gone) {
            kill(peers[i].pid, SIGKILL);
            waitpid(peers[i].pid, NULL, 0);
            peers[i].gone = true;
        }
}

static void on_alarm(int sig)
{
    (void)sig;
    const char *msg = alarm_msg;
    if (write(2, msg, alarm_len) < 0) {
    }
    for (int i = 0; i < MAX_PEERS; i++)
        if (peers[i].pid > 0 && !peers[i].gone)
            kill(peers[i].pid, SIGKILL);
    _exit(1);
}

struct peer *peer_start(const char *name, ...)
{
    const char *argv[24];
    int argc = 0;
    argv[argc++] = peer_path;
    argv[argc++] = name;
    va_list ap;
    va_start(ap, name);
    for (const char *o; (o = va_arg(ap, const char *)) != NULL && argc < 23;)
        argv[argc++] = o;
    va_end(ap);
    argv[argc] = NULL;

    struct peer *p = NULL;
    for (int i = 0; i < MAX_PEERS && p == NULL; i++)
        if (peers[i].pid == 0)
            p = &peers[i];
    CHECK(p != NULL);
    int in[2], out[2];
    CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* Only async-signal-safe calls here: the parent has threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != main_pid)
            _exit(127);
        /* A process group of its own: tests stop peers (SIGSTOP) for seconds, and a group with a
         * stopped member that is orphaned (the shell or job that started the test exits, its
         * last link outside the group) gets SIGHUP and SIGCONT from the kernel, every member:
         * SIGHUP turns UCX's debug logging on (UCX_DEBUG_SIGNO) and ends or derails the
         * running peers, SIGCONT wakes the stopped one. Alone in its group, a stopped peer's
         * group keeps this process as its link outside until the peer is killed, and this
         * process's group holds no stopped process. The peer still dies with this process
         * (PDEATHSIG above). */
        if (setpgid(0, 0) != 0)
            _exit(127);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        execv(peer_path, (char *const *)argv);
        _exit(127);
    }
    /* Both sides set the group (whichever runs first; the parent's call fails once the child has
     * exec'd, by then it is set): a stop of the peer right after this must not find it still in
     * this process's group. */
    (void)setpgid(pid, pid);
    CHECK(getpgid(pid) == pid);
    close(in[0]);
    close(out[1]);
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->pid = pid;
    p->to = in[1];
    p->from = out[0];
    return p;
}

/* The next line the peer prints (valid until the next call for this peer). */
char *peer_line(struct peer *p, int timeout_ms)
{
    if (p->used > 0) {
        memmove(p->rbuf, p->rbuf + p->used, p->rlen - p->used);
        p->rlen -= p->used;
        p->used = 0;
    }
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl = p->rbuf ? memchr(p->rbuf, '\n', p->rlen) : NULL;
        if (nl != NULL) {
            *nl = '\0';
            p->used = (size_t)(nl - p->rbuf) + 1;
            return p->rbuf;
        }
        if (p->rcap - p->rlen < 65536) {
            size_t cap = p->rcap ? 2 * p->rcap : 1 << 17;
            char *b = realloc(p->rbuf, cap);
            CHECK(b != NULL);
            p->rbuf = b;
            p->rcap = cap;
        }
        uint64_t now = now_ms();
        if (now >= deadline)
            check_fail(__FILE__, __LINE__, "peer %s: no answer within %d ms", p->name, timeout_ms);
        struct pollfd pf = {.fd = p->from, .events = POLLIN};
        if (poll(&pf, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t n = read(p->from, p->rbuf + p->rlen, p->rcap - p->rlen);
        if (n == 0)
            check_fail(__FILE__, __LINE__, "peer %s exited (see its output above)", p->name);
        if (n < 0 && errno != EINTR)
            check_fail(__FILE__, __LINE__, "peer %s: read: %s", p->name, strerror(errno));
        if (n > 0)
            p->rlen += (size_t)n;
    }
}

static void peer_vsend(struct peer *p, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *cmd = malloc((size_t)n + 2);
    CHECK(cmd != NULL);
    vsnprintf(cmd, (size_t)n + 1, fmt, ap);
    cmd[n] = '\n';
    for (size_t off = 0; off < (size_t)n + 1;) {
        ssize_t w = write(p->to, cmd + off, (size_t)n + 1 - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            check_fail(__FILE__, __LINE__, "peer %s: cannot send a command: %s", p->name,
                       strerror(errno));
        off += (size_t)w;
    }
    free(cmd);
}

void peer_send(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void peer_send(struct peer *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    peer_vsend(p, fmt, ap);
    va_end(ap);
}

/* Sends a command and returns the text after "ok" of its answer; any other answer fails. */
char *peer_ok_at(const char *file, int line, struct peer *p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
char *peer_ok_at(const char *file, int line, struct peer *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char cmd[96];
    va_list ap2;
    va_copy(ap2, ap);
    vsnprintf(cmd, sizeof(cmd), fmt, ap2);
    va_end(ap2);
    peer_vsend(p, fmt, ap);
    va_end(ap);
    char *r = peer_line(p, REPLY_MS);
    if (strncmp(r, "ok", 2) != 0 || (r[2] != '\0' && r[2] != ' '))
        check_fail(file, line, "peer %s: '%.80s' answered '%.300s'", p->name, cmd, r);
    return r[2] == ' ' ? r + 3 : r + 2;
}

void peer_ready(struct peer *p)
{
    char *r = peer_line(p, REPLY_MS);
    if (strncmp(r, "ready ", 6) != 0)
        check_fail(__FILE__, __LINE__, "peer %s did not start: '%s'", p->name, r);
}

/* Exits the peer through its protocol and checks it ended cleanly (the sanitizers' leak
 * check included). */
void peer_exit(struct peer *p)
{
    PEER_OK(p, "exit");
    close(p->to);
    int st = 0;
    pid_t w = 0;
    for (int i = 0; i < 2000 && (w = waitpid(p->pid, &st, WNOHANG)) == 0; i++)
        sleep_ms(10);
    if (w == 0)
        check_fail(__FILE__, __LINE__, "peer %s did not exit within 20 s of 'exit'", p->name);
    p->gone = true;
    close(p->from);
    free(p->rbuf);
    p->rbuf = NULL;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        check_fail(__FILE__, __LINE__, "peer %s ended with status 0x%x", p->name, st);
    p->pid = 0;
}

void peer_kill(struct peer *p)
{
    CHECK(kill(p->pid, SIGKILL) == 0);
    CHECK(waitpid(p->pid, NULL, 0) == p->pid);
    p->gone = true;
    close(p->to);
    close(p->from);
    free(p->rbuf);
    p->rbuf = NULL;
    p->pid = 0;
}

struct rbuf peer_alloc(struct peer *p, int id, size_t len, const char *kind)
{
    struct rbuf b = {p, id, 0, 0};
    char *r = PEER_OK(p, "alloc %d %zu %s", id, len, kind);
    CHECK(sscanf(r, "%" SCNx64 " %" SCNu64, &b.addr, &b.len) == 2 && b.len == len);
    return b;
}

/* The peer's metadata (caller frees). */
uint8_t *peer_md(struct peer *p, size_t *len)
{
    char *hex = PEER_OK(p, "md");
    uint8_t *blob = net_hex_decode(hex, strlen(hex), len);
    CHECK(blob != NULL);
    return blob;
}

void load_peer(struct ixl_agent *a, struct peer *p)
{
    size_t len;
    uint8_t *blob = peer_md(p, &len);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(a, blob, len, name, sizeof(name)), IXL_OK);
    CHECK(strcmp(name, p->name) == 0);
    free(blob);
}

/* Gives a peer this agent's metadata (so it can send notifications to it). */
void load_into_peer(struct peer *p, struct ixl_agent *a)
{
    void *blob;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &blob, &len), IXL_OK);
    char *hex = malloc(2 * len + 1);
    CHECK(hex != NULL);
    net_hex_encode(blob, len, hex);
    char *r = PEER_OK(p, "load %s", hex);
    CHECK(strcmp(r, ixl_agent_name(a)) == 0);
    free(hex);
    ixl_free(blob);
}

void peers_init(const char *test_name, const char *path)
{
    main_pid = getpid();
    peer_path = path;
    int n = snprintf(alarm_msg, sizeof(alarm_msg), "%s: alarm: the test ran out of time (a hang)\n",
                     test_name);
    alarm_len = n > 0 && (size_t)n < sizeof(alarm_msg) ? (size_t)n : 0;
    signal(SIGALRM, on_alarm);
    atexit(kill_peers);
}

uint64_t peer_fresh_seed(void)
{
    static uint64_t counter;
    for (;;) {
        uint64_t s = ((uint64_t)main_pid << 32) + ++counter;
        if (net_pat_byte(s, 0) != 0x5a && net_pat_byte(s, 0) != 0xa5)
            return s;
    }
}

static int xfer_wait(struct ixl_agent *a, enum ixl_op op, uint8_t *local, const struct rbuf *rb,
                     size_t len)
{
    struct ixl_dlist *l, *r;
    struct ixl_desc ld = {(uintptr_t)local, len, 0}, rd = {rb->addr, len, 0};
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &r), IXL_OK);
    CHECK_RC(ixl_dlist_add(l, &ld, 1), IXL_OK);
    CHECK_RC(ixl_dlist_add(r, &rd, 1), IXL_OK);
    struct ixl_xfer *x;
    int rc = ixl_xfer_create(a, op, l, r, rb->p->name, NULL, &x);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, REPLY_MS);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return rc;
}

void peer_roundtrip(struct ixl_agent *a, uint8_t *local, const struct rbuf *rb, size_t len)
{
    uint64_t s = peer_fresh_seed();
    net_pat_fill(local, len, s, 0);
    PEER_OK(rb->p, "poison %d 165 0 %zu", rb->id, len);
    CHECK_RC(xfer_wait(a, IXL_OP_WRITE, local, rb, len), IXL_OK);
    PEER_OK(rb->p, "check %d %" PRIu64 " 0 %zu", rb->id, s, len);
    s = peer_fresh_seed();
    PEER_OK(rb->p, "fill %d %" PRIu64 " 0 %zu", rb->id, s, len);
    memset(local, 0x5a, len);
    CHECK_RC(xfer_wait(a, IXL_OP_READ, local, rb, len), IXL_OK);
    CHECK(net_pat_find_bad(local, len, s, 0) == len);
}

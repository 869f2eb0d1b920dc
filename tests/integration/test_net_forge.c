/*
 * Forged same-node claims against NET (issue 16, finding 1), and the same-node paths between
 * two processes that are not root.
 *
 *   test_net_forge          this process is the victim: three agents (path auto, shm, cma).
 *                           An attacker process (this binary again, "attacker") is given the
 *                           victims' public metadata and publishes forged metadata of its own:
 *                           "forger" replays a victim's NET connection info (its pid, host, CMA
 *                           probe or same-node socket, instance) and "atk" is the attacker's
 *                           real connection info; both announce regions whose public data name
 *                           a descriptor slot that in the victim holds a file it opened
 *                           read-only, a slot holding the victim's own ixl_mem_alloc memory,
 *                           and the address of a buffer of the victim that it never registered.
 *                           The victim WRITEs to each: its file and memory must stay unchanged,
 *                           forced shm/cma must fail at creation saying why, auto must use TCP.
 *   test_net_forge nobody   (root only, else 77) a copy of this binary and libixl in a 0755
 *                           temporary directory runs as uid/gid 65534: an initiator and its
 *                           target, both nobody, READ and WRITE over shm and cma with checks.
 *
 * Every wait is bounded (alarm); the children die with this process (their pipes close).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ixl/ixl.h>

#include "check.h"
#include "net_common.h"

#define PAGE 4096u
#define FILE_ADDR 0x100000000ull /* where the forged regions say they lie (any address) */
#define OWN_ADDR 0x200000000ull

static int n_failed;

static void expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int ok, const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    fprintf(stderr, "FAIL: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    n_failed++;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void send_blob(int fd, const void *b, size_t len)
{
    uint32_t l = (uint32_t)len;
    CHECK(write_all(fd, &l, 4) == 0 && write_all(fd, b, len) == 0);
}

static uint8_t *recv_blob(int fd, size_t *len)
{
    uint32_t l;
    CHECK(read_all(fd, &l, 4) == 0 && l > 0 && l < (1u << 24));
    uint8_t *b = malloc(l);
    CHECK(b != NULL && read_all(fd, b, l) == 0);
    *len = l;
    return b;
}

static struct ixl_agent *agent(const char *name, const struct ixl_kv *kv, size_t n)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create(name, &ap, &a), IXL_OK);
    CHECK_RC(ixl_backend_create(a, "NET", kv, n, NULL), IXL_OK);
    return a;
}

static void reg(struct ixl_agent *a, const void *p, size_t len)
{
    struct ixl_reg_desc d = {(uintptr_t)p, len, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(a, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
}

static struct ixl_dlist *list1(uint64_t addr, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

/* ---- the attacker ------------------------------------------------------------------------ */

struct forge_in {
    uint64_t file_fd, own_fd, own_size, secret_addr;
};

static void put(uint8_t **p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        *(*p)++ = (uint8_t)(v >> (8 * i));
}

/* NET's connection info inside an agent's metadata ("IXLNETC..." after its u32 length). */
static const uint8_t *net_conn(const uint8_t *md, size_t len, size_t *conn_len)
{
    const uint8_t *c = memmem(md, len, "IXLNETC", 7);
    CHECK(c != NULL && c - md >= 4);
    uint32_t l =
        (uint32_t)c[-4] | (uint32_t)c[-3] << 8 | (uint32_t)c[-2] << 16 | (uint32_t)c[-1] << 24;
    CHECK(l >= 56 && (size_t)(c - md) + l <= len);
    *conn_len = l;
    return c;
}

/* NET's public data of a region ("NUB1" u64 key u64 addr u64 len i32 memfd u64 off u64 size). */
static void pub(uint8_t **p, uint64_t addr, uint64_t len, int32_t memfd, uint64_t size)
{
    put(p, 0x3142554eu, 4);
    put(p, ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ 0x5151, 8);
    put(p, addr, 8);
    put(p, len, 8);
    put(p, (uint32_t)memfd, 4);
    put(p, 0, 8);
    put(p, size, 8);
}

/* An agent's metadata (serdes/codec.h, version 1): name, NET with conn, and the three forged
 * regions. */
static size_t forge(uint8_t *out, const char *name, const uint8_t *conn, size_t conn_len,
                    const struct forge_in *in)
{
    uint8_t *p = out;
    memcpy(p, "IXLM", 4);
    p += 4;
    put(&p, 1, 2); /* version */
    put(&p, 1, 2); /* flags: connection info */
    put(&p, 1, 8); /* incarnation */
    put(&p, strlen(name), 2);
    memcpy(p, name, strlen(name));
    p += strlen(name);
    put(&p, 1, 2);
    put(&p, 3, 1);
    memcpy(p, "NET", 3);
    p += 3;
    put(&p, conn_len, 4);
    memcpy(p, conn, conn_len);
    p += conn_len;
    put(&p, 3, 4);
    const uint64_t addrs[3] = {FILE_ADDR, OWN_ADDR, in->secret_addr};
    const int32_t fds[3] = {(int32_t)in->file_fd, (int32_t)in->own_fd, -1};
    const uint64_t sizes[3] = {PAGE, in->own_size, 0};
    for (int i = 0; i < 3; i++) {
        put(&p, 0, 2);
        put(&p, IXL_MEM_DRAM, 1);
        put(&p, addrs[i], 8);
        put(&p, PAGE, 8);
        put(&p, 0, 8);
        put(&p, 48, 4);
        pub(&p, addrs[i], PAGE, fds[i], sizes[i]);
    }
    return (size_t)(p - out);
}

static int attacker_main(void)
{
    alarm(60);
    srand((unsigned)getpid());
    struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}};
    struct ixl_agent *a = agent("atk", kv, 2);
    void *mine;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, 1 << 20, NULL, &mine), IXL_OK);
    reg(a, mine, 1 << 20);
    void *own_md;
    size_t own_len, own_conn_len;
    CHECK_RC(ixl_md_get(a, NULL, &own_md, &own_len), IXL_OK);
    const uint8_t *own_conn = net_conn(own_md, own_len, &own_conn_len);
    struct forge_in in;
    CHECK(read_all(0, &in, sizeof(in)) == 0);
    for (int v = 0; v < 3; v++) {
        size_t md_len, conn_len;
        uint8_t *md = recv_blob(0, &md_len);
        const uint8_t *conn = net_conn(md, md_len, &conn_len);
        uint8_t out[2048];
        /* The victim's own connection info under another name: its pid, host, probe word or
         * socket, instance. */
        send_blob(1, out, forge(out, "forger", conn, conn_len, &in));
        /* The attacker's real connection info, with the same forged regions. */
        send_blob(1, out, forge(out, "atk", own_conn, own_conn_len, &in));
        free(md);
    }
    char c;
    while (read(0, &c, 1) > 0) { /* serve TCP until the victim is done */
    }
    ixl_free(own_md);
    ixl_agent_destroy(a); /* deregisters and frees its memory */
    return 0;
}

/* ---- the victim ---------------------------------------------------------------------------- */

static pid_t spawn(const char *mode, int *to, int *from)
{
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
            self[n] = '\0';
            execl(self, self, mode, (char *)NULL);
        }
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = in[1];
    *from = out[0];
    return pid;
}

/* The fd number of this process's memfd of NET's allocator that maps addr. */
static int memfd_of(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *de;
    int found = -1;
    while ((de = readdir(d)) != NULL) {
        char path[300], link[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            if (strncmp(link, "/memfd:ixl-net", 14) == 0)
                found = atoi(de->d_name);
        }
    }
    closedir(d);
    return found;
}

/* A raw connection to the same-node socket of agent a ("IXLNETC3" ... u64 socket id at 45 of
 * NET's connection info; net_local.c). */
static int raw_connect(struct ixl_agent *a)
{
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &md, &len), IXL_OK);
    const uint8_t *c = memmem(md, len, "IXLNETC3", 8);
    CHECK(c != NULL && c + 53 <= (const uint8_t *)md + len);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id |= (uint64_t)c[45 + i] << (8 * i);
    ixl_free(md);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int nl = snprintf(sa.sun_path, sizeof(sa.sun_path), "%cixl-net-%016" PRIx64, '\0', id);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    CHECK(connect(s, (struct sockaddr *)&sa,
                  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)nl)) == 0);
    return s;
}

/* 1 when s answers a HELLO within ms, 0 when it stays silent, -1 when it closed. */
static int raw_hello(int s, int ms, size_t frame)
{
    uint8_t f[512] = {'I', 'X', 'L', 'U', 1};
    if (send(s, f, frame, MSG_NOSIGNAL) != (ssize_t)frame)
        return -1;
    struct pollfd pf = {.fd = s, .events = POLLIN};
    if (poll(&pf, 1, ms) == 0)
        return 0;
    ssize_t n = recv(s, f, sizeof(f), MSG_DONTWAIT);
    return n == 280 && f[4] == 2 ? 1 : n > 0 ? 2 : -1;
}

/* The same-node socket's bounds: at most 8 connections served at once (the rest wait in the
 * backlog, and are served once others close), a malformed frame closes its connection. */
static void channel_bounds(struct ixl_agent *a)
{
    int s[12], answered = 0;
    for (int i = 0; i < 12; i++)
        s[i] = raw_connect(a);
    for (int i = 0; i < 12; i++)
        answered += raw_hello(s[i], i < 8 ? 2000 : 200, 280) == 1;
    expect(answered == 8, "the same-node socket served %d of 12 connections at once, want 8",
           answered);
    for (int i = 0; i < 8; i++)
        close(s[i]);
    int late = 0; /* the waiting ones are served now (their HELLOs are queued) */
    for (int i = 8; i < 12; i++) {
        struct pollfd pf = {.fd = s[i], .events = POLLIN};
        uint8_t f[512];
        late += poll(&pf, 1, 2000) == 1 && recv(s[i], f, sizeof(f), 0) == 280;
        close(s[i]);
    }
    expect(late == 4, "%d of the 4 waiting connections were served after others closed", late);
    int m = raw_connect(a);
    expect(raw_hello(m, 2000, 100) == -1, "a short frame did not close its connection");
    close(m);
    m = raw_connect(a);
    expect(raw_hello(m, 2000, 280) == 1, "a fresh connection was not served");
    close(m);
    fprintf(stderr, "  same-node socket: 8 connections served at once, the rest after; a "
                    "malformed frame closes its connection\n");
}

static int forge_main(void)
{
    alarm(100);
    /* What the forger aims at: a file the victim opened read-only, the victim's own memory
     * from ixl_mem_alloc, and a buffer of the victim it never registered. */
    char tmpl[] = "/tmp/ixl-forge-XXXXXX";
    int wfd = mkstemp(tmpl);
    CHECK(wfd >= 0);
    uint8_t want_file[PAGE], want_own[PAGE], want_secret[PAGE], got[PAGE];
    net_pat_fill(want_file, PAGE, 0xf11e, 0);
    net_pat_fill(want_own, PAGE, 0x0e4e, 0);
    net_pat_fill(want_secret, PAGE, 0x5ec4e7, 0);
    CHECK(write_all(wfd, want_file, PAGE) == 0);
    close(wfd);
    int file_fd = open(tmpl, O_RDONLY | O_CLOEXEC);
    int check_fd = open(tmpl, O_RDWR | O_CLOEXEC); /* the test's own view, to check and restore */
    CHECK(file_fd >= 0 && check_fd >= 0);
    unlink(tmpl);
    uint8_t *secret = aligned_alloc(PAGE, PAGE);
    CHECK(secret != NULL);
    memcpy(secret, want_secret, PAGE);

    const char *names[3] = {"v_auto", "v_shm", "v_cma"};
    const char *paths[3] = {"auto", "shm", "cma"};
    struct ixl_agent *v[3];
    uint8_t *src[3];
    for (int i = 0; i < 3; i++) {
        struct ixl_kv kv[] = {{"path", paths[i]},
                              {"listen_addr", "127.0.0.1"},
                              {"addrs", "127.0.0.1"},
                              {"hugepages", "0"},
                              {"timeout_ms", "1000"}};
        v[i] = agent(names[i], kv, 5);
        src[i] = aligned_alloc(PAGE, PAGE);
        CHECK(src[i] != NULL);
        reg(v[i], src[i], PAGE);
    }
    void *own;
    CHECK_RC(ixl_mem_alloc(v[0], IXL_MEM_DRAM, PAGE, NULL, &own), IXL_OK);
    memcpy(own, want_own, PAGE);
    int own_fd = memfd_of();
    CHECK(own_fd >= 0);

    int to, from;
    pid_t atk = spawn("attacker", &to, &from);
    struct forge_in in = {(uint64_t)file_fd, (uint64_t)own_fd, PAGE, (uintptr_t)secret};
    CHECK(write_all(to, &in, sizeof(in)) == 0);
    for (int i = 0; i < 3; i++) {
        void *md;
        size_t len;
        CHECK_RC(ixl_md_get(v[i], NULL, &md, &len), IXL_OK);
        send_blob(to, md, len);
        ixl_free(md);
    }
    const char *what[3] = {"its read-only file", "its own ixl_mem_alloc memory",
                           "its own unregistered buffer"};
    const uint64_t addrs[3] = {FILE_ADDR, OWN_ADDR, (uintptr_t)secret};
    uint64_t seed = (uint64_t)getpid() << 20;
    for (int i = 0; i < 3; i++) {
        for (int b = 0; b < 2; b++) {
            size_t len;
            uint8_t *blob = recv_blob(from, &len);
            char name[IXL_NAME_MAX];
            CHECK_RC(ixl_md_load(v[i], blob, len, name, sizeof(name)), IXL_OK);
            free(blob);
            for (int t = 0; t < 3; t++) {
                /* A fresh pattern in the source; the targets hold their known bytes. */
                net_pat_fill(src[i], PAGE, ++seed, 0);
                struct ixl_dlist *l = list1((uintptr_t)src[i], PAGE), *r = list1(addrs[t], PAGE);
                struct ixl_xfer *x = NULL;
                ixl_status st = ixl_xfer_create(v[i], IXL_OP_WRITE, l, r, name, NULL, &x);
                char err[512];
                snprintf(err, sizeof(err), "%s", st == IXL_OK ? "" : ixl_agent_last_error(v[i]));
                char used[16] = "-";
                ixl_status post = IXL_OK;
                if (st == IXL_OK) {
                    struct ixl_xfer_info xi = {.size = sizeof(xi)};
                    CHECK_RC(ixl_xfer_info(x, &xi), IXL_OK);
                    snprintf(used, sizeof(used), "%s", xi.path);
                    post = ixl_xfer_post(x);
                    if (post == IXL_IN_PROGRESS)
                        post = ixl_xfer_wait(x, 10000);
                    CHECK_RC(ixl_xfer_release(x), IXL_OK);
                }
                ixl_dlist_destroy(l);
                ixl_dlist_destroy(r);
                fprintf(stderr,
                        "  %-6s WRITE -> '%s' region on %-29s create %-20s path %-3s "
                        "post %s\n",
                        names[i], name, what[t], ixl_strerror(st), used,
                        st == IXL_OK ? ixl_strerror(post) : "-");
                if (st != IXL_OK)
                    fprintf(stderr, "         (%s)\n", err);
                /* The victim's own bytes did not change. */
                CHECK(pread(check_fd, got, PAGE, 0) == (ssize_t)PAGE);
                expect(memcmp(got, want_file, PAGE) == 0,
                       "%s: a WRITE to '%s' changed the file it opened read-only", names[i], name);
                expect(memcmp(own, want_own, PAGE) == 0,
                       "%s: a WRITE to '%s' changed its own ixl_mem_alloc memory", names[i], name);
                expect(memcmp(secret, want_secret, PAGE) == 0,
                       "%s: a WRITE to '%s' changed its own unregistered buffer", names[i], name);
                /* Restored, so each case reports only what it did itself. */
                CHECK(pwrite(check_fd, want_file, PAGE, 0) == (ssize_t)PAGE);
                memcpy(own, want_own, PAGE);
                memcpy(secret, want_secret, PAGE);
                if (i == 0) { /* auto: never a same-node path to a forged claim */
                    expect(st != IXL_OK || strcmp(used, "tcp") == 0,
                           "%s: path %s to '%s' (%s), want tcp", names[i], used, name, what[t]);
                    expect(st != IXL_OK || post != IXL_OK,
                           "%s: a WRITE to the forged region of '%s' succeeded", names[i], name);
                } else { /* forced: refused at creation, saying why */
                    expect(st == IXL_ERR_NOT_SUPPORTED && strstr(err, "is forced") != NULL,
                           "%s: a WRITE to '%s' (%s) was created (%s), want NOT_SUPPORTED "
                           "saying why",
                           names[i], name, what[t], ixl_strerror(st));
                    /* Why: the replayed socket is the victim's own; the attacker's own
                     * agent never registered the regions; heap memory is never mapped. */
                    const char *why = b == 0 ? "this very process" : "did not register";
                    if (st == IXL_ERR_NOT_SUPPORTED)
                        expect(strstr(err, why) != NULL ||
                                   (i == 1 && t == 2 && strstr(err, "ixl_mem_alloc") != NULL),
                               "%s: the refusal does not say why (want '%s'): %s", names[i], why,
                               err);
                }
            }
        }
    }
    close(to);
    int status;
    CHECK(waitpid(atk, &status, 0) == atk);
    channel_bounds(v[0]); /* after the attacks: on a NET without the socket this part fails */
    for (int i = 0; i < 3; i++) {
        if (i == 0)
            CHECK_RC(ixl_mem_free(v[0], own), IXL_OK);
        ixl_agent_destroy(v[i]);
        free(src[i]);
    }
    free(secret);
    close(file_fd);
    close(check_fd);
    if (n_failed) {
        fprintf(stderr, "test_net_forge: %d checks FAILED\n", n_failed);
        return 1;
    }
    fprintf(stderr, "test_net_forge: forged same-node claims refused, the victim's bytes intact\n");
    return 0;
}

/* ---- both peers nobody ----------------------------------------------------------------------- */

#define NB_LEN ((size_t)1 << 20)

static int nobody_target(void)
{
    alarm(60);
    CHECK(geteuid() == 65534);
    struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}, {"hugepages", "0"}};
    struct ixl_agent *a = agent("nb_target", kv, 3);
    void *shm;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, NB_LEN, NULL, &shm), IXL_OK);
    uint8_t *heap = aligned_alloc(PAGE, NB_LEN);
    CHECK(heap != NULL);
    net_pat_fill(shm, NB_LEN, 11, 0);
    net_pat_fill(heap, NB_LEN, 12, 0);
    reg(a, shm, NB_LEN);
    reg(a, heap, NB_LEN);
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(a, NULL, &md, &len), IXL_OK);
    send_blob(1, md, len);
    uint64_t addrs[2] = {(uintptr_t)shm, (uintptr_t)heap};
    CHECK(write_all(1, addrs, sizeof(addrs)) == 0);
    ixl_free(md);
    uint64_t seed;
    while (read_all(0, &seed, 8) == 0) { /* "do both regions hold pattern seed, seed + 1?" */
        uint8_t ok = net_pat_find_bad(shm, NB_LEN, seed, 0) == NB_LEN &&
                     net_pat_find_bad(heap, NB_LEN, seed + 1, 0) == NB_LEN;
        CHECK(write_all(1, &ok, 1) == 0);
    }
    ixl_agent_destroy(a); /* frees shm */
    free(heap);
    return 0;
}

/* Another user's agent (root's, its metadata in the file md_path): this process's NET refuses
 * its same-node paths (the kernel names uid 0 on its socket), and root's socket closes a raw
 * connection from this user before answering anything. */
static void other_user(const char *md_path)
{
    int fd = open(md_path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    uint8_t md[4096];
    ssize_t len = read(fd, md, sizeof(md));
    close(fd);
    CHECK(len > 0);
    struct ixl_kv kv[] = {{"path", "shm"}, {"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}};
    struct ixl_agent *a = agent("nb_other", kv, 3);
    uint8_t *buf = aligned_alloc(PAGE, PAGE);
    CHECK(buf != NULL);
    reg(a, buf, PAGE);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(a, md, (size_t)len, name, sizeof(name)), IXL_OK);
    uint64_t addr;
    CHECK(read_all(3, &addr, 8) == 0);
    struct ixl_dlist *l = list1((uintptr_t)buf, PAGE), *r = list1(addr, PAGE);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(a, IXL_OP_WRITE, l, r, name, NULL, &x), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(ixl_agent_last_error(a), "belongs to uid 0");
    fprintf(stderr, "  as nobody: path=shm to root's agent refused: %s\n", ixl_agent_last_error(a));
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(a);
    free(buf);

    /* The raw socket ("IXLNETC3" ... u64 socket id at 45): a HELLO gets no answer. */
    const uint8_t *c = memmem(md, (size_t)len, "IXLNETC3", 8);
    CHECK(c != NULL && c + 53 <= md + len);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id |= (uint64_t)c[45 + i] << (8 * i);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int nl = snprintf(sa.sun_path, sizeof(sa.sun_path), "%cixl-net-%016" PRIx64, '\0', id);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    CHECK(connect(s, (struct sockaddr *)&sa,
                  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)nl)) == 0);
    uint8_t f[280] = {'I', 'X', 'L', 'U', 1};
    struct timeval tv = {5, 0};
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
    ssize_t n = send(s, f, sizeof(f), MSG_NOSIGNAL);
    ssize_t got = recv(s, f, sizeof(f), 0);
    if (got > 0)
        check_fail(__FILE__, __LINE__, "root's same-node socket answered a nobody process (%zd)",
                   got);
    CHECK(got == 0 || (got < 0 && errno == ECONNRESET) || n < 0);
    close(s);
    fprintf(stderr, "  as nobody: root's same-node socket closed the connection unanswered\n");
}

static int nobody_initiator(const char *md_path)
{
    alarm(60);
    CHECK(geteuid() == 65534 && getegid() == 65534);
    other_user(md_path);
    int to, from;
    pid_t t = spawn("nobody-target", &to, &from);
    struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}};
    struct ixl_agent *a = agent("nb_init", kv, 2);
    uint8_t *buf = aligned_alloc(PAGE, NB_LEN);
    CHECK(buf != NULL);
    reg(a, buf, NB_LEN);
    size_t len;
    uint8_t *md = recv_blob(from, &len);
    uint64_t addrs[2];
    CHECK(read_all(from, addrs, sizeof(addrs)) == 0);
    char name[IXL_NAME_MAX];
    CHECK_RC(ixl_md_load(a, md, len, name, sizeof(name)), IXL_OK);
    free(md);
    const char *want[2] = {"shm", "cma"};
    uint64_t wseed = 1000 + (uint64_t)getpid();
    for (int k = 0; k < 2; k++) {
        for (int op = 0; op < 2; op++) {
            if (op == 0)
                memset(buf, 0xa5, NB_LEN); /* READ: poisoned destination */
            else
                net_pat_fill(buf, NB_LEN, wseed + (uint64_t)k, 0);
            struct ixl_dlist *l = list1((uintptr_t)buf, NB_LEN), *r = list1(addrs[k], NB_LEN);
            struct ixl_xfer *x;
            CHECK_RC(ixl_xfer_create(a, op == 0 ? IXL_OP_READ : IXL_OP_WRITE, l, r, name, NULL, &x),
                     IXL_OK);
            struct ixl_xfer_info xi = {.size = sizeof(xi)};
            CHECK_RC(ixl_xfer_info(x, &xi), IXL_OK);
            char used[16];
            snprintf(used, sizeof(used), "%s", xi.path); /* xi lives as long as x */
            if (strcmp(used, want[k]) != 0)
                check_fail(__FILE__, __LINE__, "as nobody: path %s, want %s", used, want[k]);
            ixl_status st = ixl_xfer_post(x);
            if (st == IXL_IN_PROGRESS)
                st = ixl_xfer_wait(x, 20000);
            CHECK_RC(st, IXL_OK);
            CHECK_RC(ixl_xfer_release(x), IXL_OK);
            ixl_dlist_destroy(l);
            ixl_dlist_destroy(r);
            if (op == 0)
                CHECK(net_pat_find_bad(buf, NB_LEN, 11 + (uint64_t)k, 0) == NB_LEN);
            fprintf(stderr, "  as nobody: %s %zu B over %s ok\n", op == 0 ? "READ" : "WRITE",
                    NB_LEN, used);
        }
    }
    uint8_t ok = 0;
    CHECK(write_all(to, &wseed, 8) == 0 && read_all(from, &ok, 1) == 0);
    CHECK(ok == 1); /* the target holds what the WRITEs sent */
    close(to);
    int status;
    CHECK(waitpid(t, &status, 0) == t && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ixl_agent_destroy(a);
    free(buf);
    return 0;
}

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    CHECK(in >= 0 && out >= 0);
    char b[65536];
    ssize_t n;
    while ((n = read(in, b, sizeof(b))) > 0)
        CHECK(write_all(out, b, (size_t)n) == 0);
    CHECK(n == 0);
    close(in);
    CHECK(fchmod(out, 0755) == 0 && close(out) == 0);
}

/* Runs "nobody-init" from a 0755 copy of this binary and libixl as uid/gid 65534. */
static int nobody_main(void)
{
    alarm(100);
    if (geteuid() != 0)
        skip(0, "running peers as nobody needs root");
    char dir[] = "/tmp/ixl-nobody-XXXXXX";
    CHECK(mkdtemp(dir) != NULL && chmod(dir, 0755) == 0);
    char self[PATH_MAX], exe[PATH_MAX + 64], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(n > 0);
    self[n] = '\0';
    snprintf(exe, sizeof(exe), "%s/test_net_forge", dir);
    copy_file(self, exe);
    Dl_info di;
    CHECK(dladdr((void *)ixl_agent_create, &di) != 0 && di.dli_fname != NULL);
    const char *base = strrchr(di.dli_fname, '/');
    snprintf(lib, sizeof(lib), "%s/%s", dir, base ? base + 1 : di.dli_fname);
    copy_file(di.dli_fname, lib);
    /* An agent of root, for the other-user checks: its metadata in a file, the address of its
     * region on descriptor 3. */
    struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"}, {"addrs", "127.0.0.1"}, {"hugepages", "0"}};
    struct ixl_agent *root = agent("root_t", kv, 3);
    void *rmem;
    CHECK_RC(ixl_mem_alloc(root, IXL_MEM_DRAM, PAGE, NULL, &rmem), IXL_OK);
    memset(rmem, 0x3c, PAGE);
    reg(root, rmem, PAGE);
    void *md;
    size_t md_len;
    CHECK_RC(ixl_md_get(root, NULL, &md, &md_len), IXL_OK);
    char md_path[PATH_MAX + 64];
    snprintf(md_path, sizeof(md_path), "%s/root.md", dir);
    int mfd = open(md_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(mfd >= 0 && write_all(mfd, md, md_len) == 0 && fchmod(mfd, 0644) == 0 && close(mfd) == 0);
    ixl_free(md);
    int ap[2];
    CHECK(pipe(ap) == 0);
    uint64_t raddr = (uintptr_t)rmem;
    CHECK(write_all(ap[1], &raddr, 8) == 0);
    char env[PATH_MAX + 32]; /* the child only makes system calls until it execs */
    snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", dir);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *const argv[] = {exe, "nobody-init", md_path, NULL}, *const envp[] = {env, NULL};
        if (dup2(ap[0], 3) != 3)
            _exit(125);
        if (chdir(dir) != 0 || setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(126);
        execve(exe, argv, envp);
        _exit(127);
    }
    close(ap[0]);
    close(ap[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    for (size_t i = 0; i < PAGE; i++)
        CHECK(((uint8_t *)rmem)[i] == 0x3c);
    ixl_agent_destroy(root);
    unlink(md_path);
    unlink(exe);
    unlink(lib);
    rmdir(dir);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL: the nobody initiator ended with status 0x%x\n", status);
        return 1;
    }
    fprintf(stderr, "test_net_forge nobody: shm and cma between two nobody processes work\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stderr, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "attacker") == 0)
        return attacker_main();
    if (argc > 1 && strcmp(argv[1], "nobody") == 0)
        return nobody_main();
    if (argc > 2 && strcmp(argv[1], "nobody-init") == 0)
        return nobody_initiator(argv[2]);
    if (argc > 1 && strcmp(argv[1], "nobody-target") == 0)
        return nobody_target();
    return forge_main();
}

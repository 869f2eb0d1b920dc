/*
 * peers_driver - the driver of bench/peers.sh: one NET target agent in its own process and up
 * to 256 initiator agents spread over a few worker processes, through the public API only.
 *
 *   peers_driver [--paths "tcp auto"] [--peers "1 16 64 256"] [--sizes "64K 1M"]
 *                [--ops "write read"] [--workers 4] [--threads 4] [--ms 500] [--rounds 3]
 *                [--conns 2] [--timeout-ms 2000] [--opt KEY=VALUE]...
 *
 * For each path (the initiators' NET option path: tcp, or auto = the same-node path NET picks,
 * shm here since the target's memory comes from ixl_mem_alloc), a fresh target process and
 * fresh workers. The target registers one region of MAXPEERS x 1 MiB (touched before anything
 * is measured) and each initiator agent i works on its own slice [i MiB, i MiB + size). For
 * each peer count N (ascending), the agents N-1 .. not yet made are created (each with its own
 * NET backend and registered buffers), load the target's metadata and connect with one 4 KiB
 * WRITE; after a short settle the target's thread count and RSS are read with N peers connected
 * and idle (the "idle" rows; RSS per idle peer = (RSS now - RSS before any peer) / N). Then for
 * each size and op, a warm-up round of 100 ms (checked, not printed), then ROUNDS rounds of MS
 * milliseconds each with the N agents busy:
 *
 *   WRITE  a fresh pattern in each agent's source, posted again and again into its slice; after
 *          the round the slice is read back into a poisoned buffer and compared;
 *   READ   a fresh pattern written into the slice first (untimed), the destination poisoned,
 *          then READs of the slice again and again; compared after the round.
 *
 * Each worker runs THREADS threads over its active agents (agent k of a worker on thread
 * k % THREADS); a thread posts one request per agent, then waits for each (so a thread keeps as
 * many requests in flight as it drives agents). All workers start a round together; the
 * aggregate is the sum of each worker's bytes / its elapsed time. The target's thread count and
 * RSS are sampled in the middle of each round (/proc/PID/status: Threads, VmRSS).
 *
 * Output: lines for the script, "#"-prefixed notes otherwise:
 *   IDLE path=P peers=N connected=C threads=T rss_kib=R base_kib=B per_peer_kib=X
 *   RUN path=P used=U size=S op=O peers=N round=K gbps=G threads=T rss_kib=R errors=E
 *   FAIL path=P peers=N what="..."      (agents that could not be made or connected, a worker
 *                                        that died or hung, a data check that failed)
 * Exit status 0 when every data check passed and nothing failed, 1 otherwise, 77 without NET.
 *
 * Limits: a failure (threads or file descriptors exhausted by today's thread-per-connection
 * NET, say) is reported with the reason and the run goes on with the agents that work; a
 * worker that does not answer within the round's time plus 60 s is killed and the path ends.
 * The driver raises RLIMIT_NOFILE to its hard limit in every process and prints what it needs.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ixl/ixl.h"

#define EXIT_SKIP 77
#define MAXPEERS 256
#define MAXWORKERS 16
#define MAXTHREADS 16
#define MAXOPTS 16
#define SLICE (1u << 20) /* bytes of the target's region per initiator */
#define CONNECT_BYTES 4096
#define WAIT_MS 30000
#define REPLY_SLACK_MS 60000 /* a worker's answer may take this long beyond its work */

enum cmd_type { CMD_CONNECT = 1, CMD_PREP, CMD_GO, CMD_QUIT };
enum op_kind { OP_WRITE = 0, OP_READ = 1 };

struct cmd {
    int32_t type;
    int32_t n; /* peers active */
    int32_t op;
    uint32_t size;
    uint32_t ms;
    uint32_t pad;
    uint64_t seed;
};

struct rep {
    int32_t ok;     /* agents connected (CONNECT) */
    int32_t failed; /* agents that failed (CONNECT), requests that failed (GO) */
    int32_t bad;    /* data checks that failed */
    int32_t pad;
    uint64_t bytes;
    double secs;
    char path[16];
    char msg[256];
};

struct opts {
    char paths[64], peers[64], sizes[64], ops[64];
    int workers, threads, ms, rounds, conns, timeout_ms;
    const char *extra[MAXOPTS];
    int n_extra;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
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

/* 0 when len bytes came within timeout_ms (-1: no limit), -1 otherwise. */
static int read_all_to(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    double end = now_s() + timeout_ms / 1000.0;
    while (len > 0) {
        if (timeout_ms >= 0) {
            int left = (int)((end - now_s()) * 1000);
            struct pollfd pf = {fd, POLLIN, 0};
            if (left <= 0)
                return -1;
            int r = poll(&pf, 1, left);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return -1;
        }
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

static uint64_t parse_size(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        break;
    default:
        break;
    }
    return v;
}

/* The pattern: a function of (seed, byte offset), 8 bytes at a time. */
static uint64_t pat_word(uint64_t seed, uint64_t word)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void pat_fill(uint8_t *p, size_t len, uint64_t seed)
{
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(seed, i / 8);
        memcpy(p + i, &w, 8);
    }
}

/* Offset of the first wrong byte, or len. */
static size_t pat_bad(const uint8_t *p, size_t len, uint64_t seed)
{
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(seed, i / 8);
        if (memcmp(p + i, &w, 8) != 0)
            return i;
    }
    return len;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Threads and VmRSS (KiB) of a process; -1 when it is gone. */
static int proc_stat(pid_t pid, long *threads, long *rss_kib)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    *threads = -1;
    *rss_kib = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Threads:", 8) == 0)
            *threads = strtol(line + 8, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            *rss_kib = strtol(line + 6, NULL, 10);
    }
    fclose(f);
    return 0;
}

static const struct ixl_agent_params no_backends = {
    .field_mask = IXL_AGENT_F_BACKENDS,
    .backends = "",
};

/* NET's options: the common ones, then path (initiators), then the extra ones. */
static size_t net_opts(const struct opts *o, const char *path, struct ixl_kv *kv, char *conns,
                       char *tmo)
{
    size_t n = 0;
    snprintf(conns, 16, "%d", o->conns);
    snprintf(tmo, 16, "%d", o->timeout_ms);
    kv[n++] = (struct ixl_kv){"listen_addr", "127.0.0.1"};
    kv[n++] = (struct ixl_kv){"addrs", "127.0.0.1"};
    kv[n++] = (struct ixl_kv){"conns", conns};
    kv[n++] = (struct ixl_kv){"timeout_ms", tmo};
    if (path != NULL) {
        kv[n++] = (struct ixl_kv){"path", path};
        kv[n++] = (struct ixl_kv){"copy_threads", "1"};
    }
    return n;
}

/* Splits KEY=VALUE options into kv (the strings are copied into store). */
static size_t add_extra(const struct opts *o, struct ixl_kv *kv, size_t n, char store[][128])
{
    for (int i = 0; i < o->n_extra; i++) {
        snprintf(store[i], 128, "%s", o->extra[i]);
        char *eq = strchr(store[i], '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        kv[n++] = (struct ixl_kv){store[i], eq + 1};
    }
    return n;
}

/* ---- the target process ---------------------------------------------------------------- */

static int target_main(const struct opts *o, int fd)
{
    struct ixl_kv kv[8 + MAXOPTS];
    char conns[16], tmo[16], store[MAXOPTS][128];
    struct ixl_agent *agent = NULL;
    struct ixl_backend *be = NULL;
    size_t len = (size_t)MAXPEERS * SLICE, md_len = 0;
    void *buf = NULL, *md = NULL;
    bool from_ixl = false;
    int64_t hdr[2] = {0, 0}; /* status, md length */
    char why[256] = "";

    raise_nofile();
    size_t n = net_opts(o, NULL, kv, conns, tmo);
    n = add_extra(o, kv, n, store);
    ixl_status st = ixl_agent_create("target", &no_backends, &agent);
    if (st == IXL_OK)
        st = ixl_backend_create(agent, "NET", kv, n, &be);
    if (st != IXL_OK) {
        snprintf(why, sizeof(why), "target: NET: %s: %s", ixl_strerror(st),
                 ixl_agent_last_error(agent));
        hdr[0] = st == IXL_ERR_NOT_FOUND ? EXIT_SKIP : 1;
        goto fail;
    }
    if (ixl_mem_alloc(agent, IXL_MEM_DRAM, len, be, &buf) == IXL_OK) {
        from_ixl = true;
    } else {
        fprintf(stderr, "# target: ixl_mem_alloc failed (%s); malloc instead: no shm path\n",
                ixl_agent_last_error(agent));
        buf = malloc(len);
    }
    memset(buf, 0x5a, len); /* resident before any measurement */
    struct ixl_reg_desc rd = {(uint64_t)(uintptr_t)buf, len, 0, NULL, 0};
    st = ixl_mem_register(agent, IXL_MEM_DRAM, &rd, 1, NULL);
    if (st == IXL_OK)
        st = ixl_md_get(agent, NULL, &md, &md_len);
    if (st != IXL_OK) {
        snprintf(why, sizeof(why), "target: register/md_get: %s: %s", ixl_strerror(st),
                 ixl_agent_last_error(agent));
        hdr[0] = 1;
        goto fail;
    }
    uint64_t base = (uint64_t)(uintptr_t)buf;
    hdr[1] = (int64_t)md_len;
    if (write_all(fd, hdr, sizeof(hdr)) != 0 || write_all(fd, &base, sizeof(base)) != 0 ||
        write_all(fd, md, md_len) != 0)
        return 1;
    ixl_free(md);
    /* Serve until the driver closes its end, driving progress when the agent asks. */
    int afd = -1;
    if (ixl_agent_fd(agent, &afd) != IXL_OK)
        afd = -1;
    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {afd, POLLIN, 0}};
        int r = poll(p, afd >= 0 ? 2 : 1, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || p[0].revents != 0)
            break;
        if (afd >= 0 && p[1].revents != 0)
            ixl_agent_progress(agent);
    }
    if (ixl_mem_deregister(agent, IXL_MEM_DRAM, &rd, 1, NULL) != IXL_OK)
        fprintf(stderr, "# target: deregister: %s\n", ixl_agent_last_error(agent));
    if (from_ixl) {
        if (ixl_mem_free(agent, buf) != IXL_OK)
            fprintf(stderr, "# target: ixl_mem_free: %s\n", ixl_agent_last_error(agent));
    } else {
        free(buf);
    }
    ixl_agent_destroy(agent);
    return 0;
fail:
    hdr[1] = (int64_t)strlen(why);
    write_all(fd, hdr, sizeof(hdr));
    write_all(fd, why, strlen(why));
    ixl_agent_destroy(agent);
    return (int)hdr[0];
}

/* ---- worker processes: initiator agents ------------------------------------------------- */

struct peer {
    int idx; /* global index: its slice of the target */
    bool made, dead;
    struct ixl_agent *agent;
    uint8_t *src, *dst;
    struct ixl_xfer *conn;     /* 4 KiB WRITE that connects */
    struct ixl_xfer *x[2][2];  /* [op][size index] */
    struct ixl_xfer *vread[2]; /* read-back of the slice into dst, per size index */
    struct ixl_reg_desc rd[2];
};

struct worker {
    const struct opts *o;
    const char *path;
    int id;
    const void *md;
    size_t md_len;
    uint64_t base;
    struct peer peers[MAXPEERS];
    int n_peers;
    uint32_t sizes[2];
    int n_sizes;
    char used[16];
    char first_err[256];
};

struct runner {
    struct worker *w;
    struct peer **act;
    int t, nthreads, n_active;
    int op, si;
    uint32_t size;
    double deadline;
    uint64_t bytes;
    int errors;
    pthread_t th;
};

static void note_err(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_err(struct worker *w, const char *fmt, ...)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (w->first_err[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->first_err, sizeof(w->first_err), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&lock);
}

static int size_index(const struct worker *w, uint32_t size)
{
    for (int i = 0; i < w->n_sizes; i++)
        if (w->sizes[i] == size)
            return i;
    return -1;
}

static ixl_status post_wait(struct ixl_xfer *x)
{
    ixl_status st = ixl_xfer_post(x);
    if (st == IXL_IN_PROGRESS)
        st = ixl_xfer_wait(x, WAIT_MS);
    return st;
}

static ixl_status mk_list(uint64_t addr, uint64_t len, struct ixl_dlist **out)
{
    struct ixl_desc d = {addr, len, 0};
    ixl_status st = ixl_dlist_create(IXL_MEM_DRAM, 1, out);
    if (st == IXL_OK && (st = ixl_dlist_add(*out, &d, 1)) != IXL_OK) {
        ixl_dlist_destroy(*out);
        *out = NULL;
    }
    return st;
}

static ixl_status mk_xfer(struct peer *p, enum ixl_op op, uint8_t *local, uint64_t len,
                          uint64_t remote, struct ixl_xfer **out)
{
    struct ixl_dlist *l = NULL, *r = NULL;
    ixl_status st = mk_list((uint64_t)(uintptr_t)local, len, &l);
    if (st == IXL_OK)
        st = mk_list(remote, len, &r);
    if (st == IXL_OK)
        st = ixl_xfer_create(p->agent, op, l, r, "target", NULL, out);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return st;
}

/* Makes agent p (NET backend, buffers, requests) and connects it with one small WRITE. */
static int peer_make(struct worker *w, struct peer *p)
{
    struct ixl_kv kv[8 + MAXOPTS];
    char conns[16], tmo[16], store[MAXOPTS][128], name[32];
    size_t n = net_opts(w->o, w->path, kv, conns, tmo);
    n = add_extra(w->o, kv, n, store);
    uint64_t slice = w->base + (uint64_t)p->idx * SLICE;
    ixl_status st;

    p->made = true;
    snprintf(name, sizeof(name), "peer%03d", p->idx);
    st = ixl_agent_create(name, &no_backends, &p->agent);
    if (st != IXL_OK) {
        note_err(w, "%s: ixl_agent_create: %s: %s", name, ixl_strerror(st),
                 ixl_agent_last_error(NULL));
        goto dead;
    }
    st = ixl_backend_create(p->agent, "NET", kv, n, NULL);
    if (st != IXL_OK) {
        note_err(w, "%s: NET: %s: %s", name, ixl_strerror(st), ixl_agent_last_error(p->agent));
        goto dead;
    }
    p->src = aligned_alloc(4096, SLICE);
    p->dst = aligned_alloc(4096, SLICE);
    if (p->src == NULL || p->dst == NULL) {
        note_err(w, "%s: out of memory", name);
        goto dead;
    }
    memset(p->src, 0, SLICE);
    memset(p->dst, 0, SLICE);
    p->rd[0] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->src, SLICE, 0, NULL, 0};
    p->rd[1] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->dst, SLICE, 0, NULL, 0};
    st = ixl_mem_register(p->agent, IXL_MEM_DRAM, p->rd, 2, NULL);
    if (st == IXL_OK)
        st = ixl_md_load(p->agent, w->md, w->md_len, NULL, 0);
    if (st == IXL_OK)
        st = mk_xfer(p, IXL_OP_WRITE, p->src, CONNECT_BYTES, slice, &p->conn);
    for (int s = 0; s < w->n_sizes && st == IXL_OK; s++) {
        st = mk_xfer(p, IXL_OP_WRITE, p->src, w->sizes[s], slice, &p->x[OP_WRITE][s]);
        if (st == IXL_OK)
            st = mk_xfer(p, IXL_OP_READ, p->dst, w->sizes[s], slice, &p->x[OP_READ][s]);
        if (st == IXL_OK)
            st = mk_xfer(p, IXL_OP_READ, p->dst, w->sizes[s], slice, &p->vread[s]);
    }
    if (st != IXL_OK) {
        note_err(w, "%s: setup: %s: %s", name, ixl_strerror(st), ixl_agent_last_error(p->agent));
        goto dead;
    }
    st = post_wait(p->conn);
    if (st != IXL_OK) {
        note_err(w, "%s: connecting WRITE: %s: %s", name, ixl_strerror(st),
                 ixl_agent_last_error(p->agent));
        goto dead;
    }
    return 0;
dead:
    p->dead = true;
    return -1;
}

/* The agents of this worker that take part with n peers active. */
static int active(const struct worker *w, int n, struct peer **out)
{
    int k = 0;
    for (int i = 0; i < w->n_peers; i++)
        if (w->peers[i].idx < n && w->peers[i].made && !w->peers[i].dead)
            out[k++] = (struct peer *)&w->peers[i];
    return k;
}

static void *runner_main(void *arg)
{
    struct runner *r = arg;
    struct peer *mine[MAXPEERS];
    int nm = 0;
    for (int i = r->t; i < r->n_active; i += r->nthreads)
        mine[nm++] = r->act[i];
    /* At least one pass, even when this thread first runs after the deadline (hundreds of
     * threads on 2 cores): the data check after the round expects every agent's data. */
    do {
        ixl_status st[MAXPEERS];
        for (int i = 0; i < nm; i++)
            st[i] = ixl_xfer_post(mine[i]->x[r->op][r->si]);
        for (int i = 0; i < nm; i++) {
            if (st[i] == IXL_IN_PROGRESS)
                st[i] = ixl_xfer_wait(mine[i]->x[r->op][r->si], WAIT_MS);
            if (st[i] == IXL_OK) {
                r->bytes += r->size;
            } else {
                r->errors++;
                note_err(r->w, "peer%03d: %s %u B: %s: %s", mine[i]->idx,
                         r->op == OP_WRITE ? "WRITE" : "READ", r->size, ixl_strerror(st[i]),
                         ixl_agent_last_error(mine[i]->agent));
                mine[i]->dead = true; /* left out from now on */
                mine[i] = mine[--nm];
                st[i] = st[nm];
                i--;
            }
        }
    } while (nm > 0 && now_s() < r->deadline);
    return NULL;
}

static int worker_main(struct worker *w, int fd)
{
    struct cmd c;
    struct rep rp;
    struct peer *act[MAXPEERS];
    int cur_op = 0, cur_si = 0, n_act = 0, cur_n = 0;
    uint32_t cur_size = 0;
    uint64_t cur_seed = 0;

    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    while (read_all_to(fd, &c, sizeof(c), -1) == 0 && c.type != CMD_QUIT) {
        memset(&rp, 0, sizeof(rp));
        w->first_err[0] = '\0';
        if (c.type == CMD_CONNECT) {
            for (int i = 0; i < w->n_peers; i++) {
                struct peer *p = &w->peers[i];
                if (p->idx < c.n && !p->made)
                    peer_make(w, p);
                if (p->idx < c.n) {
                    if (p->dead)
                        rp.failed++;
                    else
                        rp.ok++;
                }
            }
        } else if (c.type == CMD_PREP) {
            /* Fresh pattern: in the sources (WRITE), or in the slices (READ). */
            cur_op = c.op;
            cur_size = c.size;
            cur_si = size_index(w, c.size);
            cur_seed = c.seed;
            cur_n = c.n;
            n_act = active(w, c.n, act);
            for (int i = 0; i < n_act; i++) {
                struct peer *p = act[i];
                pat_fill(p->src, cur_size, cur_seed + (uint64_t)p->idx);
                memset(p->dst, 0xa5, cur_size);
                if (cur_op == OP_READ) {
                    ixl_status st = post_wait(p->x[OP_WRITE][cur_si]);
                    if (st != IXL_OK) {
                        note_err(w, "peer%03d: WRITE before READ: %s: %s", p->idx, ixl_strerror(st),
                                 ixl_agent_last_error(p->agent));
                        p->dead = true;
                        rp.failed++;
                    }
                }
            }
        } else if (c.type == CMD_GO) {
            struct runner r[MAXTHREADS];
            int nt = w->o->threads;
            n_act = active(w, cur_n, act);
            if (nt > n_act)
                nt = n_act;
            double t0 = now_s();
            for (int t = 0; t < nt; t++) {
                r[t] = (struct runner){.w = w,
                                       .act = act,
                                       .t = t,
                                       .nthreads = nt,
                                       .n_active = n_act,
                                       .op = cur_op,
                                       .si = cur_si,
                                       .size = cur_size,
                                       .deadline = t0 + c.ms / 1000.0};
                if (pthread_create(&r[t].th, NULL, runner_main, &r[t]) != 0) {
                    note_err(w, "pthread_create of a runner failed");
                    nt = t;
                    break;
                }
            }
            for (int t = 0; t < nt; t++) {
                pthread_join(r[t].th, NULL);
                rp.bytes += r[t].bytes;
                rp.failed += r[t].errors;
            }
            rp.secs = now_s() - t0;
            /* The data check, outside the timing. */
            for (int i = 0; i < n_act; i++) {
                struct peer *p = act[i];
                if (p->dead)
                    continue;
                if (cur_op == OP_WRITE) {
                    memset(p->dst, 0xa5, cur_size);
                    ixl_status st = post_wait(p->vread[cur_si]);
                    if (st != IXL_OK) {
                        note_err(w, "peer%03d: read-back: %s", p->idx, ixl_strerror(st));
                        rp.failed++;
                        continue;
                    }
                }
                size_t bad = pat_bad(p->dst, cur_size, cur_seed + (uint64_t)p->idx);
                if (bad != cur_size) {
                    /* Say what is there instead: how much is wrong, poison, or a pattern
                     * of an earlier round (seeds step by 1000 per round) or another peer. */
                    size_t nbad = 0, npoison = 0;
                    for (size_t o8 = 0; o8 + 8 <= cur_size; o8 += 8) {
                        uint64_t v, want = pat_word(cur_seed + (uint64_t)p->idx, o8 / 8);
                        memcpy(&v, p->dst + o8, 8);
                        nbad += v != want;
                        npoison += v == 0xa5a5a5a5a5a5a5a5ull;
                    }
                    uint64_t v0;
                    memcpy(&v0, p->dst + bad, 8);
                    long found = -1, peer = -1;
                    for (long back = 0; back <= 64 && found < 0; back++)
                        for (long q = 0; q < MAXPEERS; q++)
                            if (pat_word(cur_seed - (uint64_t)back * 1000 + (uint64_t)q, bad / 8) ==
                                v0) {
                                found = back;
                                peer = q;
                                break;
                            }
                    /* Read it again after a pause: right now, or only late? */
                    const char *again = "-";
                    if (cur_op == OP_WRITE) {
                        sleep_ms(100);
                        memset(p->dst, 0xa5, cur_size);
                        ixl_status st2 = post_wait(p->vread[cur_si]);
                        size_t bad2 = pat_bad(p->dst, cur_size, cur_seed + (uint64_t)p->idx);
                        again = st2 != IXL_OK      ? "failed"
                                : bad2 == cur_size ? "right"
                                                   : "still wrong";
                    }
                    rp.bad++;
                    note_err(w,
                             "peer%03d: %s %u B: data mismatch at byte %zu: %zu of %u words "
                             "wrong, %zu poison; the first is %s (%ld rounds back, peer %ld); "
                             "read again 100 ms later: %s",
                             p->idx, cur_op == OP_WRITE ? "WRITE" : "READ", cur_size, bad, nbad,
                             cur_size / 8, npoison, found >= 0 ? "an earlier pattern" : "unknown",
                             found, peer, again);
                }
            }
            if (n_act > 0 && w->used[0] == '\0') {
                struct ixl_xfer_info info = {.size = sizeof(info)};
                if (ixl_xfer_info(act[0]->x[cur_op][cur_si], &info) == IXL_OK && info.path != NULL)
                    snprintf(w->used, sizeof(w->used), "%s", info.path);
            }
        }
        snprintf(rp.path, sizeof(rp.path), "%s", w->used);
        snprintf(rp.msg, sizeof(rp.msg), "%s", w->first_err);
        if (write_all(fd, &rp, sizeof(rp)) != 0)
            break;
    }
    /* Release everything, so the target sees its peers leave cleanly. */
    for (int i = 0; i < w->n_peers; i++) {
        struct peer *p = &w->peers[i];
        if (p->agent == NULL)
            continue;
        bool ok = ixl_xfer_release(p->conn) == IXL_OK;
        for (int s = 0; s < w->n_sizes; s++)
            ok = ixl_xfer_release(p->x[0][s]) == IXL_OK && ixl_xfer_release(p->x[1][s]) == IXL_OK &&
                 ixl_xfer_release(p->vread[s]) == IXL_OK && ok;
        if (ok && p->src != NULL && !p->dead &&
            ixl_mem_deregister(p->agent, IXL_MEM_DRAM, p->rd, 2, NULL) != IXL_OK)
            ok = false;
        (void)ok; /* the agent's destroy takes what is left */
        ixl_agent_destroy(p->agent);
        free(p->src);
        free(p->dst);
    }
    return 0;
}

/* ---- the driver ------------------------------------------------------------------------- */

struct run {
    const struct opts *o;
    const char *path;
    pid_t tpid;
    int tfd;
    pid_t wpid[MAXWORKERS];
    int wfd[MAXWORKERS];
    int nw;
    bool broken; /* a worker died or hung: the rest of this path is skipped */
    int failures;
};

static void kill_all(struct run *r)
{
    for (int i = 0; i < r->nw; i++) {
        if (r->wpid[i] > 0) {
            kill(r->wpid[i], SIGKILL);
            waitpid(r->wpid[i], NULL, 0);
            r->wpid[i] = 0;
        }
    }
    if (r->tpid > 0) {
        kill(r->tpid, SIGKILL);
        waitpid(r->tpid, NULL, 0);
        r->tpid = 0;
    }
}

/* Sends c to every worker and collects the answers; -1 (and the path broken) on a worker that
 * died or did not answer in time. */
static int broadcast(struct run *r, const struct cmd *c, struct rep *reps, int timeout_ms)
{
    for (int i = 0; i < r->nw; i++)
        if (write_all(r->wfd[i], c, sizeof(*c)) != 0)
            goto broken;
    for (int i = 0; i < r->nw; i++)
        if (read_all_to(r->wfd[i], &reps[i], sizeof(reps[i]), timeout_ms) != 0)
            goto broken;
    return 0;
broken:
    printf("FAIL path=%s peers=%d what=\"a worker died or did not answer in %d s; killing the"
           " processes of this path\"\n",
           r->path, c->n, timeout_ms / 1000);
    fflush(stdout);
    r->broken = true;
    r->failures++;
    kill_all(r);
    return -1;
}

static void report_fail(struct run *r, int n, const char *what, const struct rep *reps)
{
    for (int i = 0; i < r->nw; i++) {
        if (reps[i].msg[0] != '\0') {
            printf("FAIL path=%s peers=%d what=\"%s: %s\"\n", r->path, n, what, reps[i].msg);
            r->failures++;
            return;
        }
    }
    printf("FAIL path=%s peers=%d what=\"%s\"\n", r->path, n, what);
    r->failures++;
}

static int run_path(const struct opts *o, const char *path)
{
    struct run r = {.o = o, .path = path};
    struct rep reps[MAXWORKERS];
    int sv[2];
    int64_t hdr[2];
    uint64_t base = 0;
    uint8_t *md = NULL;
    uint32_t sizes[2];
    int n_sizes = 0, rc = 0;
    char buf[64], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", o->sizes);
    for (char *t = strtok_r(buf, " ", &save); t != NULL && n_sizes < 2;
         t = strtok_r(NULL, " ", &save))
        sizes[n_sizes++] = (uint32_t)parse_size(t);

    /* The target. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 1;
    fflush(stdout);
    r.tpid = fork();
    if (r.tpid == 0) {
        close(sv[0]);
        _exit(target_main(o, sv[1]));
    }
    close(sv[1]);
    r.tfd = sv[0];
    if (read_all_to(r.tfd, hdr, sizeof(hdr), 60000) != 0 || hdr[1] < 0 || hdr[1] > (1 << 24)) {
        printf("FAIL path=%s peers=0 what=\"the target sent no metadata\"\n", path);
        kill_all(&r);
        return 1;
    }
    if (hdr[0] != 0) {
        char why[256] = "";
        size_t n = (size_t)hdr[1] < sizeof(why) - 1 ? (size_t)hdr[1] : sizeof(why) - 1;
        read_all_to(r.tfd, why, n, 1000);
        printf("# %s\n", why);
        kill_all(&r);
        return hdr[0] == EXIT_SKIP ? EXIT_SKIP : 1;
    }
    md = malloc((size_t)hdr[1]);
    if (md == NULL || read_all_to(r.tfd, &base, sizeof(base), 10000) != 0 ||
        read_all_to(r.tfd, md, (size_t)hdr[1], 10000) != 0) {
        kill_all(&r);
        free(md);
        return 1;
    }

    /* The workers: agent i lives in worker i % nw. */
    int maxn = 0;
    {
        char pb[64], *s2 = NULL;
        snprintf(pb, sizeof(pb), "%s", o->peers);
        for (char *t = strtok_r(pb, " ", &s2); t != NULL; t = strtok_r(NULL, " ", &s2))
            if (atoi(t) > maxn)
                maxn = atoi(t);
    }
    if (maxn > MAXPEERS)
        maxn = MAXPEERS;
    r.nw = o->workers < maxn ? o->workers : maxn;
    for (int i = 0; i < r.nw; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return 1;
        fflush(stdout);
        r.wpid[i] = fork();
        if (r.wpid[i] == 0) {
            close(sv[0]);
            close(r.tfd);
            for (int j = 0; j < i; j++)
                close(r.wfd[j]); /* the other workers' pipes are none of this one's business */
            static struct worker w;
            w = (struct worker){.o = o,
                                .path = path,
                                .id = i,
                                .md = md,
                                .md_len = (size_t)hdr[1],
                                .base = base,
                                .n_sizes = n_sizes};
            memcpy(w.sizes, sizes, sizeof(sizes));
            for (int k = i; k < maxn; k += r.nw)
                w.peers[w.n_peers++] = (struct peer){.idx = k};
            _exit(worker_main(&w, sv[1]));
        }
        close(sv[1]);
        r.wfd[i] = sv[0];
    }

    long t_threads, t_rss, base_rss;
    sleep_ms(200);
    proc_stat(r.tpid, &t_threads, &base_rss);
    printf("# path %s: target pid %d, %ld threads and %ld KiB RSS before any peer (region %u "
           "MiB touched)\n",
           path, (int)r.tpid, t_threads, base_rss, MAXPEERS * SLICE >> 20);
    fflush(stdout);

    char pb[64], *s3 = NULL;
    snprintf(pb, sizeof(pb), "%s", o->peers);
    uint64_t seed = (uint64_t)time(NULL) << 20;
    for (char *t = strtok_r(pb, " ", &s3); t != NULL && !r.broken; t = strtok_r(NULL, " ", &s3)) {
        int n = atoi(t);
        if (n < 1 || n > MAXPEERS)
            continue;
        struct cmd c = {.type = CMD_CONNECT, .n = n};
        double c0 = now_s();
        if (broadcast(&r, &c, reps, 300000) != 0)
            break;
        int ok = 0, failed = 0;
        for (int i = 0; i < r.nw; i++) {
            ok += reps[i].ok;
            failed += reps[i].failed;
        }
        if (failed > 0)
            report_fail(&r, n, "agents that could not be made or connected", reps);
        sleep_ms(300); /* let the target settle */
        proc_stat(r.tpid, &t_threads, &t_rss);
        printf("IDLE path=%s peers=%d connected=%d threads=%ld rss_kib=%ld base_kib=%ld "
               "per_peer_kib=%.1f connect_s=%.2f\n",
               path, n, ok, t_threads, t_rss, base_rss,
               ok > 0 ? (double)(t_rss - base_rss) / ok : 0.0, now_s() - c0 - 0.3);
        fflush(stdout);
        char ob[64], *s4 = NULL;
        snprintf(ob, sizeof(ob), "%s", o->ops);
        for (char *op = strtok_r(ob, " ", &s4); op != NULL && !r.broken;
             op = strtok_r(NULL, " ", &s4)) {
            int opk = strcmp(op, "read") == 0 ? OP_READ : OP_WRITE;
            for (int si = 0; si < n_sizes && !r.broken; si++) {
                /* Round 0 warms up (first touches of buffers and mappings): not printed. */
                for (int round = 0; round <= o->rounds && !r.broken; round++) {
                    c = (struct cmd){.type = CMD_PREP,
                                     .n = n,
                                     .op = opk,
                                     .size = sizes[si],
                                     .seed = ++seed * 1000};
                    if (broadcast(&r, &c, reps, 120000) != 0)
                        break;
                    c.type = CMD_GO;
                    c.ms = (uint32_t)(round == 0 && o->ms > 100 ? 100 : o->ms);
                    for (int i = 0; i < r.nw; i++)
                        if (write_all(r.wfd[i], &c, sizeof(c)) != 0)
                            r.broken = true;
                    /* Sample the target in the middle of the round. */
                    sleep_ms((int)c.ms / 2);
                    long th = -1, rss = -1;
                    proc_stat(r.tpid, &th, &rss);
                    double gbps = 0;
                    int errors = 0, bad = 0;
                    char used[16] = "?";
                    for (int i = 0; i < r.nw && !r.broken; i++) {
                        if (read_all_to(r.wfd[i], &reps[i], sizeof(reps[i]),
                                        o->ms + REPLY_SLACK_MS) != 0) {
                            printf("FAIL path=%s peers=%d what=\"worker %d did not answer in "
                                   "%d s; killing the processes of this path\"\n",
                                   path, n, i, (o->ms + REPLY_SLACK_MS) / 1000);
                            r.broken = true;
                            r.failures++;
                            kill_all(&r);
                            break;
                        }
                        if (reps[i].secs > 0)
                            gbps += (double)reps[i].bytes / reps[i].secs / 1e9;
                        errors += reps[i].failed;
                        bad += reps[i].bad;
                        if (reps[i].path[0] != '\0')
                            snprintf(used, sizeof(used), "%s", reps[i].path);
                    }
                    if (r.broken)
                        break;
                    if (round > 0)
                        printf("RUN path=%s used=%s size=%u op=%s peers=%d round=%d gbps=%.3f "
                               "threads=%ld rss_kib=%ld errors=%d bad=%d\n",
                               path, used, sizes[si], op, n, round, gbps, th, rss, errors, bad);
                    fflush(stdout);
                    if (errors > 0 || bad > 0)
                        report_fail(&r, n, bad > 0 ? "data check" : "transfer errors", reps);
                }
            }
        }
    }
    if (!r.broken) {
        struct cmd q = {.type = CMD_QUIT};
        for (int i = 0; i < r.nw; i++) {
            write_all(r.wfd[i], &q, sizeof(q));
            close(r.wfd[i]);
        }
        for (int i = 0; i < r.nw; i++) {
            int st;
            if (waitpid(r.wpid[i], &st, 0) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
                printf("FAIL path=%s peers=0 what=\"worker %d ended with status %d\"\n", path, i,
                       st);
                r.failures++;
            }
            r.wpid[i] = 0;
        }
        close(r.tfd);
        int st;
        if (waitpid(r.tpid, &st, 0) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
            printf("FAIL path=%s peers=0 what=\"the target ended with status %d\"\n", path, st);
            r.failures++;
        }
        r.tpid = 0;
    }
    kill_all(&r);
    free(md);
    rc = r.failures > 0 ? 1 : 0;
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: peers_driver [--paths \"tcp auto\"] [--peers \"1 16 64 256\"]\n"
                    "  [--sizes \"64K 1M\"] [--ops \"write read\"] [--workers 4] [--threads 4]\n"
                    "  [--ms 500] [--rounds 3] [--conns 2] [--timeout-ms 2000]"
                    " [--opt KEY=VALUE]...\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct opts o = {.paths = "tcp auto",
                     .peers = "1 16 64 256",
                     .sizes = "64K 1M",
                     .ops = "write read",
                     .workers = 4,
                     .threads = 4,
                     .ms = 500,
                     .rounds = 3,
                     .conns = 2,
                     .timeout_ms = 2000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return usage();
        i++;
        if (strcmp(a, "--paths") == 0)
            snprintf(o.paths, sizeof(o.paths), "%s", v);
        else if (strcmp(a, "--peers") == 0)
            snprintf(o.peers, sizeof(o.peers), "%s", v);
        else if (strcmp(a, "--sizes") == 0)
            snprintf(o.sizes, sizeof(o.sizes), "%s", v);
        else if (strcmp(a, "--ops") == 0)
            snprintf(o.ops, sizeof(o.ops), "%s", v);
        else if (strcmp(a, "--workers") == 0)
            o.workers = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            o.threads = atoi(v);
        else if (strcmp(a, "--ms") == 0)
            o.ms = atoi(v);
        else if (strcmp(a, "--rounds") == 0)
            o.rounds = atoi(v);
        else if (strcmp(a, "--conns") == 0)
            o.conns = atoi(v);
        else if (strcmp(a, "--timeout-ms") == 0)
            o.timeout_ms = atoi(v);
        else if (strcmp(a, "--opt") == 0 && o.n_extra < MAXOPTS)
            o.extra[o.n_extra++] = v;
        else
            return usage();
    }
    if (o.workers < 1 || o.workers > MAXWORKERS || o.threads < 1 || o.threads > MAXTHREADS ||
        o.ms < 10 || o.rounds < 1 || o.conns < 1)
        return usage();
    {
        char sb[64], *ss = NULL;
        snprintf(sb, sizeof(sb), "%s", o.sizes);
        for (char *t = strtok_r(sb, " ", &ss); t != NULL; t = strtok_r(NULL, " ", &ss))
            if (parse_size(t) < 8 || parse_size(t) > SLICE || parse_size(t) % 8 != 0)
                return usage();
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    printf("# RLIMIT_NOFILE %llu (raised to the hard limit); the target needs about %d fds "
           "(peers x conns + 16), each worker about %d (its agents x (conns + 8))\n",
           (unsigned long long)rl.rlim_cur, MAXPEERS * o.conns + 16,
           (MAXPEERS + o.workers - 1) / o.workers * (o.conns + 8));
    fflush(stdout);
    int rc = 0;
    char pb[64], *save = NULL;
    snprintf(pb, sizeof(pb), "%s", o.paths);
    for (char *p = strtok_r(pb, " ", &save); p != NULL; p = strtok_r(NULL, " ", &save)) {
        int r = run_path(&o, p);
        if (r == EXIT_SKIP)
            return EXIT_SKIP;
        if (r != 0)
            rc = 1;
    }
    return rc;
}

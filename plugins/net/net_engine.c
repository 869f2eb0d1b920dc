/* NET engine: the ops table. Options, identity and connection info, peers, the methods on
 * regions (net_region.c holds them; deregistration also waits for the loops), notifications,
 * create and destroy. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "../common/ixl_plugin_util.h"

/* "IXLNETC2": the same-node socket replaced the pid and the CMA probe address of "IXLNETC1"
 * (issue 16). "IXLNETC3": the same layout, for wire version 2 (net_wire.h: sequenced,
 * acknowledged notifications); an older peer's connection info is refused, saying so, and an
 * older peer refuses this one as malformed, before any connection is tried. */
#define CONN_MAGIC "IXLNETC3"
#define CONN_MAGIC_PREFIX "IXLNETC"

uint64_t net_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int net_error(struct net_engine *e, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->host->error(e->host->ctx, status, "%s", msg);
    return status;
}

/* ---- options ------------------------------------------------------------------------------ */

/* The options, by index: create_engine reads init->values[NO_x]. */
enum net_opt {
    NO_PATH,
    NO_LOCAL_PATHS,
    NO_LISTEN_ADDR,
    NO_PORT,
    NO_ADDRS,
    NO_CONNS,
    NO_CHUNK,
    NO_TIMEOUT,
    NO_HEARTBEAT,
    NO_HUGEPAGES,
    NO_COPY_THREADS,
    NO_IO_THREADS,
    NO_MAX_CONNS,
    NO_PEER_CONNS,
    NO_IDLE,
    NO_QUEUE_MAX,
    NO_NOTIF_QUEUE_MAX,
    NO_NOTIF_QUEUE_BYTES,
    NO_STAGE_BYTES,
    NO_NOTIF_UNACKED_MAX,
    NO_NOTIF_UNACKED_BYTES,
    NO_BUSY_POLL,
    NO_LOOP_NICE,
    NO_COUNT
};

/* In the order of enum net_path: the choice's index is the path. */
static const char *const net_paths[] = {"auto", "shm", "cma", "tcp", NULL};

static const struct ixl_option net_options[NO_COUNT] = {
    [NO_PATH] = {.name = "path",
                 .default_value = "auto",
                 .type = IXL_OPT_ENUM,
                 .choices = net_paths,
                 .description = "data path to peers: auto (same node: mapped memory, then "
                                "cross-memory attach, then TCP), or force shm, cma or tcp"},
    [NO_LOCAL_PATHS] = {.name = "local_paths",
                        .default_value = "1",
                        .type = IXL_OPT_BOOL,
                        .description = "0: same-node peers must use TCP to reach this agent's "
                                       "memory"},
    [NO_LISTEN_ADDR] = {.name = "listen_addr",
                        .default_value = "0.0.0.0",
                        .type = IXL_OPT_STRING,
                        .description = "IPv4 address the data listener binds; without a "
                                       "cluster key (IXL_AUTH_KEY) or insecure_remote, "
                                       "0.0.0.0 means 127.0.0.1 and other addresses than "
                                       "loopback are refused"},
    [NO_PORT] = {.name = "port",
                 .default_value = "0",
                 .type = IXL_OPT_INT,
                 .min = 0,
                 .max = 65535,
                 .description = "data listener port (0: any free port)"},
    [NO_ADDRS] = {.name = "addrs",
                  .default_value = "",
                  .type = IXL_OPT_STRING,
                  .description = "addresses advertised to peers, comma-separated IPv4 (default: "
                                 "every interface's; loopback only without a cluster key or "
                                 "insecure_remote)"},
    [NO_CONNS] = {.name = "conns",
                  .default_value = "4",
                  .type = IXL_OPT_INT,
                  .unit = "connections",
                  .min = 1,
                  .max = NET_MAX_CONNS,
                  .description = "TCP connections per peer"},
    [NO_CHUNK] = {.name = "chunk",
                  .default_value = "1M",
                  .type = IXL_OPT_SIZE,
                  .min = 4096,
                  .max = 1 << 30,
                  .description = "bytes per TCP frame when a descriptor is split"},
    [NO_TIMEOUT] = {.name = "timeout_ms",
                    .default_value = "2000",
                    .type = IXL_OPT_DURATION,
                    .unit = "ms",
                    .min = 10,
                    .max = 3600000,
                    .description = "a peer silent this long with work outstanding is declared "
                                   "dead"},
    [NO_HEARTBEAT] = {.name = "heartbeat_ms",
                      .default_value = "250",
                      .type = IXL_OPT_DURATION,
                      .unit = "ms",
                      .min = 5,
                      .max = 60000,
                      .description = "interval of the liveness checks"},
    [NO_HUGEPAGES] = {.name = "hugepages",
                      .default_value = "1",
                      .type = IXL_OPT_BOOL,
                      .description = "memory from ixl_mem_alloc tries huge pages first"},
    [NO_COPY_THREADS] = {.name = "copy_threads",
                         .default_value = "2",
                         .type = IXL_OPT_INT,
                         .unit = "threads",
                         .min = 1,
                         .max = 8,
                         .description = "threads doing same-node copies"},
    [NO_IO_THREADS] = {.name = "io_threads",
                       .default_value = "0",
                       .type = IXL_OPT_INT,
                       .unit = "threads",
                       .min = 0,
                       .max = NET_MAX_LOOPS,
                       .description = "event-loop threads that run every TCP connection (0: "
                                      "from the number of cores, at most 4)"},
    [NO_MAX_CONNS] = {.name = "max_conns",
                      .default_value = "1024",
                      .type = IXL_OPT_INT,
                      .unit = "connections",
                      .min = 1,
                      .max = 1 << 20,
                      .description = "accepted connections open at once; more are closed at "
                                     "once"},
    [NO_PEER_CONNS] = {.name = "peer_conns",
                       .default_value = "16",
                       .type = IXL_OPT_INT,
                       .unit = "connections",
                       .min = 1,
                       .max = 4096,
                       .description = "accepted connections one peer name may hold"},
    [NO_IDLE] = {.name = "idle_ms",
                 .default_value = "300000",
                 .type = IXL_OPT_DURATION,
                 .unit = "ms",
                 .min = 0,
                 .max = 86400000,
                 .description = "a connection with nothing outstanding this long is closed (0: "
                                "never); peers reconnect when needed"},
    [NO_QUEUE_MAX] = {.name = "queue_max",
                      .default_value = "1048576",
                      .type = IXL_OPT_INT,
                      .unit = "frames",
                      .min = 16,
                      .max = 1 << 30,
                      .description = "frames queued per peer (16 bytes each); a post past it "
                                     "fails with IXL_ERR_BUSY"},
    [NO_NOTIF_QUEUE_MAX] = {.name = "notif_queue_max",
                            .default_value = "65536",
                            .type = IXL_OPT_INT,
                            .unit = "notifications",
                            .min = 1,
                            .max = 1 << 30,
                            .description = "received notifications the application has not "
                                           "taken yet; at the bound NET stops reading the "
                                           "connections that bring more (senders wait)"},
    [NO_NOTIF_QUEUE_BYTES] = {.name = "notif_queue_bytes",
                              .default_value = "64M",
                              .type = IXL_OPT_SIZE,
                              .min = 4096,
                              .max = (int64_t)1 << 40,
                              .description = "bytes of received notifications not taken yet; "
                                             "at the bound NET stops reading as for "
                                             "notif_queue_max"},
    [NO_STAGE_BYTES] = {.name = "stage_bytes",
                        .default_value = "64M",
                        .type = IXL_OPT_SIZE,
                        .min = 2 << 20,
                        .max = (int64_t)64 << 30,
                        .description = "pinned host memory per peer for VRAM over TCP (staged "
                                       "in 1 MiB slots, pinned once and reused); a transfer "
                                       "beyond it waits for slots"},
    [NO_NOTIF_UNACKED_MAX] = {.name = "notif_unacked_max",
                              .default_value = "4096",
                              .type = IXL_OPT_INT,
                              .unit = "notifications",
                              .min = 1,
                              .max = 1 << 20,
                              .description = "notifications sent to one peer and not "
                                             "acknowledged yet, kept to be sent again after a "
                                             "reconnect; at the bound new ones wait (a send "
                                             "fails with IXL_ERR_BUSY after timeout_ms)"},
    [NO_NOTIF_UNACKED_BYTES] = {.name = "notif_unacked_bytes",
                                .default_value = "16M",
                                .type = IXL_OPT_SIZE,
                                .min = 4096,
                                .max = (int64_t)1 << 40,
                                .description = "bytes of notifications sent to one peer and not "
                                               "acknowledged yet; the same"},
    [NO_BUSY_POLL] = {.name = "busy_poll_us",
                      .default_value = "0",
                      .type = IXL_OPT_DURATION,
                      .unit = "us",
                      .min = 0,
                      .max = 1000000,
                      .description = "after each event an event-loop thread polls its "
                                     "connections this long before it sleeps: a request that "
                                     "arrives within it is taken without a wake-up, for a "
                                     "core per loop while it lasts (0: sleep at once)"},
    [NO_LOOP_NICE] = {.name = "loop_nice",
                      .default_value = "0",
                      .type = IXL_OPT_INT,
                      .min = 0,
                      .max = 19,
                      .description = "added to the nice value of each event-loop thread at "
                                     "its start (at most 19): on a shared CPU a loop woken "
                                     "together with an application thread (a caller's answer "
                                     "arriving) runs after it (0: the creating thread's)"},
};

static bool is_loopback(uint32_t s_addr)
{
    return (ntohl(s_addr) >> 24) == 127;
}

/* The host's trust settings; a host older than ABI 2.1 has none: no key, no peer checks. */
static void host_trust(struct net_engine *e)
{
    const struct ixl_host *h = e->host;
    if (h->size >= offsetof(struct ixl_host, peer_check) + sizeof(h->peer_check) &&
        h->auth_mode != NULL && h->auth_mac != NULL && h->auth_equal != NULL &&
        h->peer_check != NULL) {
        e->auth_mode = h->auth_mode(h->ctx);
        e->can_check_peer = true;
    } else {
        e->auth_mode = IXL_AUTH_LOCAL;
        e->can_check_peer = false;
    }
}

/* The core parsed and range-checked every option (see net_options); what is left are the
 * addresses, whose syntax no option type says. */
static int parse_options(struct net_engine *e, const struct ixl_engine_init *init)
{
    if (init->size < offsetof(struct ixl_engine_init, n_values) + sizeof(init->n_values) ||
        init->n_values != NO_COUNT)
        return net_error(e, IXL_ERR_INVALID_ARG, "NET: the core passed no typed options");
    const struct ixl_opt_value *opt = init->values;
    e->force_path = (enum net_path)opt[NO_PATH].i;
    e->local_paths = opt[NO_LOCAL_PATHS].i != 0;
    e->port = (uint16_t)opt[NO_PORT].u;
    e->n_conns = (int)opt[NO_CONNS].i;
    e->chunk = opt[NO_CHUNK].u;
    e->timeout_ns = opt[NO_TIMEOUT].u * 1000000ull;
    e->heartbeat_ns = opt[NO_HEARTBEAT].u * 1000000ull;
    e->hugepages = opt[NO_HUGEPAGES].i != 0;
    e->copy_threads = (int)opt[NO_COPY_THREADS].i;
    e->n_loops = (int)opt[NO_IO_THREADS].i;
    if (e->n_loops == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        e->n_loops = cores < 2 ? 1 : cores > 8 ? 4 : (int)((cores + 1) / 2);
        if (e->n_loops < 2 && cores >= 2)
            e->n_loops = 2;
    }
    e->max_conns = (int)opt[NO_MAX_CONNS].i;
    e->peer_conns = (int)opt[NO_PEER_CONNS].i;
    e->idle_ns = opt[NO_IDLE].u * 1000000ull;
    e->busy_poll_ns = opt[NO_BUSY_POLL].u * 1000ull;
    e->loop_nice = (int)opt[NO_LOOP_NICE].i;
    e->queue_max = (size_t)opt[NO_QUEUE_MAX].i;
    e->notif_queue_max = (size_t)opt[NO_NOTIF_QUEUE_MAX].i;
    e->notif_queue_bytes = (size_t)opt[NO_NOTIF_QUEUE_BYTES].u;
    e->stage_bytes = (size_t)opt[NO_STAGE_BYTES].u;
    e->notif_unacked_max = (size_t)opt[NO_NOTIF_UNACKED_MAX].i;
    e->notif_unacked_bytes = (size_t)opt[NO_NOTIF_UNACKED_BYTES].u;

    host_trust(e);
    bool local_only = e->auth_mode != IXL_AUTH_KEY && e->auth_mode != IXL_AUTH_OPEN;
    const char *la = opt[NO_LISTEN_ADDR].str;
    struct in_addr tmp;
    if (inet_pton(AF_INET, la, &tmp) != 1)
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "option listen_addr='%s': want an IPv4 address (a.b.c.d)", la);
    if (local_only && tmp.s_addr == htonl(INADDR_ANY)) {
        la = "127.0.0.1"; /* without a key, only processes of this host (and user) connect */
    } else if (local_only && !is_loopback(tmp.s_addr)) {
        return net_error(e, IXL_ERR_INVALID_ARG,
                         "option listen_addr='%s': NET listens beyond loopback only with a "
                         "cluster key (IXL_AUTH_KEY, IXL_AUTH_KEY_FILE or the agent's auth_key) "
                         "or with insecure_remote (IXL_INSECURE_REMOTE=1: any host that reaches "
                         "it can read and write registered memory)",
                         la);
    }
    snprintf(e->listen_addr, sizeof(e->listen_addr), "%s", la);

    const char *adv = opt[NO_ADDRS].str;
    while (*adv) {
        char one[64];
        const char *comma = strchr(adv, ',');
        size_t n = comma ? (size_t)(comma - adv) : strlen(adv);
        if (n == 0 || n >= sizeof(one))
            return net_error(e, IXL_ERR_INVALID_ARG,
                             "option addrs='%s': want comma-separated IPv4 addresses (an empty "
                             "or overlong entry)",
                             opt[NO_ADDRS].str);
        if (e->n_adv_addrs == NET_MAX_ADDRS)
            return net_error(e, IXL_ERR_INVALID_ARG, "option addrs='%s': more than %d addresses",
                             opt[NO_ADDRS].str, NET_MAX_ADDRS);
        memcpy(one, adv, n);
        one[n] = '\0';
        if (inet_pton(AF_INET, one, &tmp) != 1)
            return net_error(e, IXL_ERR_INVALID_ARG,
                             "option addrs='%s': '%s' is not an IPv4 address", opt[NO_ADDRS].str,
                             one);
        e->adv_addrs[e->n_adv_addrs++] = tmp.s_addr;
        adv = comma ? comma + 1 : adv + n;
    }
    for (int i = 0; i < e->n_adv_addrs && local_only; i++) {
        if (!is_loopback(e->adv_addrs[i])) {
            char one[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &e->adv_addrs[i], one, sizeof(one));
            return net_error(e, IXL_ERR_INVALID_ARG,
                             "option addrs='%s': '%s' is not a loopback address, and NET "
                             "advertises others only with a cluster key (IXL_AUTH_KEY) or "
                             "insecure_remote",
                             opt[NO_ADDRS].str, one);
        }
    }
    return IXL_OK;
}

/* ---- identity and connection info ---------------------------------------------------------- */

/* The kernel boot and pid namespace, announced in the connection info as a hint only (a peer
 * that claims ours is dialed over loopback first). Whether a peer really is on this node, and
 * which process it is, only its same-node socket says (net_local.c). */
static void host_identity(uint8_t out[24])
{
    memset(out, 0, 24);
    int fd = net_sys()->open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
        char buf[64] = {0};
        ssize_t n = net_sys()->read(fd, buf, sizeof(buf) - 1);
        net_sys()->close(fd);
        int k = 0;
        for (ssize_t i = 0; i < n && k < 32; i++) {
            char c = buf[i];
            int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            if (v < 0)
                continue;
            out[k / 2] |= (uint8_t)(v << ((k & 1) ? 0 : 4));
            k++;
        }
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        ixlp_put_le(out + 16, (uint64_t)st.st_ino, 8);
}

static void collect_addrs(struct net_engine *e)
{
    if (e->n_adv_addrs > 0)
        return;
    struct in_addr any;
    inet_pton(AF_INET, e->listen_addr, &any);
    if (any.s_addr != htonl(INADDR_ANY)) {
        e->adv_addrs[e->n_adv_addrs++] = any.s_addr;
        return;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        /* Non-loopback first: a remote peer tries them in order. */
        for (int loop = 0; loop < 2; loop++)
            for (struct ifaddrs *i = ifs; i && e->n_adv_addrs < NET_MAX_ADDRS; i = i->ifa_next) {
                if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                    !(i->ifa_flags & IFF_UP))
                    continue;
                int is_loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
                if (is_loop != loop)
                    continue;
                e->adv_addrs[e->n_adv_addrs++] =
                    ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
            }
        freeifaddrs(ifs);
    }
    if (e->n_adv_addrs == 0)
        e->adv_addrs[e->n_adv_addrs++] = htonl(INADDR_LOOPBACK);
}

/* "IXLNETC2" u64 instance u32 0 u8[24] host (a hint) u8 flags (1: same-node paths on) u64
 * same-node socket id (0: none) u16 port u8 n u32[n] addrs u32 notif_max. */
static void build_conn_info(struct net_engine *e)
{
    uint8_t *p = e->conn_info;
    memcpy(p, CONN_MAGIC, 8);
    ixlp_put_le(p + 8, e->instance, 8);
    ixlp_put_le(p + 16, 0, 4);
    memcpy(p + 20, e->host_id, 24);
    p[44] = e->local_paths && e->local_id != 0 ? 1 : 0;
    ixlp_put_le(p + 45, e->local_id, 8);
    ixlp_put_le(p + 53, e->port, 2);
    p[55] = (uint8_t)e->n_adv_addrs;
    for (int i = 0; i < e->n_adv_addrs; i++)
        memcpy(p + 56 + 4 * i, &e->adv_addrs[i], 4);
    size_t at = 56 + 4 * (size_t)e->n_adv_addrs;
    ixlp_put_le(p + at, e->notif_max > UINT32_MAX ? UINT32_MAX : e->notif_max, 4);
    e->conn_len = at + 4;
}

static int net_get_conn_info(struct ixl_engine *base, const void **info, size_t *len)
{
    struct net_engine *e = (struct net_engine *)base;
    *info = e->conn_info;
    *len = e->conn_len;
    return IXL_OK;
}

/* A sequence lock without fences (ThreadSanitizer has none): the writer (p->lock held) makes
 * pv_seq odd, sequentially consistent, before it changes anything a reader may be using (a
 * pidfd it closes, a life page it replaces), then stores the fields and an even pv_seq with
 * release; a reader loads them with acquire and pv_seq last, sequentially consistent
 * (peer_at_post), so a reader that saw any of this writer's fields sees pv_seq moved. On x86
 * only the odd store costs more than a plain move. */
void net_peer_pv_begin(struct net_peer *p)
{
    uint32_t s = atomic_load_explicit(&p->pv_seq, memory_order_relaxed);
    atomic_store_explicit(&p->pv_seq, s + 1, memory_order_seq_cst);
}

void net_peer_pv_end(struct net_peer *p)
{
    atomic_store_explicit(&p->pv_instance, p->instance, memory_order_release);
    atomic_store_explicit(&p->pv_pid, p->pid, memory_order_release);
    atomic_store_explicit(&p->pv_loaded, p->loaded ? 1 : 0, memory_order_release);
    atomic_store_explicit(&p->pv_pidfd, p->pidfd, memory_order_release);
    atomic_store_explicit(&p->pv_life, p->life != NULL ? 1 : 0, memory_order_release);
    uint32_t s = atomic_load_explicit(&p->pv_seq, memory_order_relaxed);
    atomic_store_explicit(&p->pv_seq, s + 1, memory_order_release);
}

struct net_peer *net_peer_find(struct net_engine *e, const char *name)
{
    return ixlp_index_find(&e->peer_idx, name);
}

static int net_load_remote_conn_info(struct ixl_engine *base, const char *remote, const void *info,
                                     size_t len)
{
    struct net_engine *e = (struct net_engine *)base;
    const uint8_t *b = info;
    if (len >= 8 && memcmp(b, CONN_MAGIC, 8) != 0 && memcmp(b, CONN_MAGIC_PREFIX, 7) == 0)
        return net_error(e, IXL_ERR_MALFORMED,
                         "NET connection info of '%s' is of another NET version (%.8s; this "
                         "agent's is %s, wire version %d: notifications are acknowledged): "
                         "run the same ixl version on both",
                         remote, (const char *)b, CONN_MAGIC, NET_WIRE_VERSION);
    if (len < 56 || memcmp(b, CONN_MAGIC, 8) != 0 || b[55] == 0 || b[55] > NET_MAX_ADDRS ||
        len != 56 + 4 * (size_t)b[55] + 4 || strlen(remote) >= sizeof(((struct net_peer *)0)->name))
        return net_error(e, IXL_ERR_MALFORMED, "NET connection info of '%s' is malformed", remote);
    pthread_mutex_lock(&e->lock);
    struct net_peer *p = net_peer_find(e, remote);
    if (p == NULL) {
        p = net_sys()->calloc(1, sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&e->lock);
            return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
        }
        snprintf(p->name, sizeof(p->name), "%s", remote);
        if (ixlp_index_add(&e->peer_idx, p->name, p, net_sys()->calloc) != 0) {
            free(p);
            pthread_mutex_unlock(&e->lock);
            return net_error(e, IXL_ERR_NO_MEMORY, "out of memory");
        }
        p->e = e;
        p->pidfd = -1;
        atomic_init(&p->pv_pidfd, -1);
        net_local_life_reserve(p);
        p->loop_base = e->n_peers++ % e->n_loops;
        pthread_mutex_init(&p->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->cond, &ca);
        pthread_condattr_destroy(&ca);
        p->next = e->peers;
        e->peers = p;
    }
    pthread_mutex_unlock(&e->lock);

    uint64_t instance = ixlp_get_le(b + 8, 8);
    pthread_mutex_lock(&p->lock);
    int changed = p->loaded && p->instance != instance;
    bool other = p->instance != instance; /* loaded now or before an invalidation */
    pthread_mutex_unlock(&p->lock);
    if (changed) { /* the peer restarted: everything bound for the old instance fails */
        net_peer_teardown(p, IXL_ERR_REMOTE_DISCONNECT,
                          "NET: the peer restarted (new metadata was loaded)");
        net_ipc_drop_peer(e, p); /* its device memory opened here is closed */
    }
    if (other) /* its notifications not acknowledged went with it: reported; a new session */
        net_peer_notif_lost(p, "it restarted (metadata of a new instance was loaded)", false,
                            instance);
    pthread_mutex_lock(&p->lock);
    net_peer_pv_begin(p);
    bool reloaded = !other && p->un_len > 0;
    p->instance = instance;
    p->same_host = memcmp(b + 20, e->host_id, 24) == 0; /* the dial order only */
    p->local_id = ixlp_get_le(b + 45, 8);
    p->peer_allows_local = (b[44] & 1) && p->local_id != 0;
    p->port = (uint16_t)ixlp_get_le(b + 53, 2);
    p->n_addrs = b[55];
    for (int i = 0; i < p->n_addrs; i++)
        memcpy(&p->addrs[i], b + 56 + 4 * i, 4);
    p->notif_max = (size_t)ixlp_get_le(b + 56 + 4 * (size_t)p->n_addrs, 4);
    if (changed || !p->loaded) { /* a new instance is verified again (net_local.c) */
        p->cma = -1;
        p->local_ok = -1;
        p->local_why[0] = '\0';
        p->pid = 0;
        net_local_life_drop(p);
        if (p->pidfd >= 0)
            net_sys()->close(p->pidfd);
        p->pidfd = -1;
    }
    p->loaded = true;
    net_peer_pv_end(p);
    pthread_mutex_unlock(&p->lock);
    if (reloaded) /* the same instance again: what it did not acknowledge goes again */
        net_peer_notif_kick(p);
    return IXL_OK;
}

static int net_connect(struct ixl_engine *base, const char *remote)
{
    struct net_engine *e = (struct net_engine *)base;
    if (strcmp(remote, e->name) == 0)
        return IXL_OK; /* loopback needs no connection */
    pthread_mutex_lock(&e->lock);
    struct net_peer *p = net_peer_find(e, remote);
    pthread_mutex_unlock(&e->lock);
    if (p == NULL || !p->loaded)
        return net_error(e, IXL_ERR_NOT_FOUND, "NET has no connection info for '%s'", remote);
    return net_peer_connect(p);
}

static int net_disconnect(struct ixl_engine *base, const char *remote)
{
    struct net_engine *e = (struct net_engine *)base;
    pthread_mutex_lock(&e->lock);
    struct net_peer *p = net_peer_find(e, remote);
    pthread_mutex_unlock(&e->lock);
    if (p == NULL)
        return IXL_OK;
    /* Notifications sent just before: their ack is asked for (a PING) and waited for, 20 ms
     * at most (a busy machine's scheduling), so that an agent being destroyed (it disconnects
     * its peers first) reports only what is really missing. */
    uint64_t settle = e->heartbeat_ns < 20000000u ? e->heartbeat_ns : 20000000u;
    net_peer_notif_settle(p, net_now_ns() + settle);
    pthread_mutex_lock(&p->lock);
    net_peer_pv_begin(p);
    p->loaded = false; /* nothing new is queued to it */
    net_peer_pv_end(p);
    pthread_mutex_unlock(&p->lock);
    net_peer_teardown(p, IXL_ERR_REMOTE_DISCONNECT, "NET: the peer was disconnected");
    net_ipc_drop_peer(e, p); /* its device memory opened here is closed */
    pthread_mutex_lock(&p->lock);
    pthread_mutex_unlock(&p->lock);
    return IXL_OK;
}

/* ---- regions ------------------------------------------------------------------------------ */

static int net_register_mem(struct ixl_engine *base, enum ixl_mem type,
                            const struct ixl_reg_desc *d, struct ixl_md **out)
{
    struct net_engine *e = (struct net_engine *)base;
    if (type != IXL_MEM_DRAM && type != IXL_MEM_VRAM)
        return net_error(e, IXL_ERR_BAD_MEM_TYPE, "NET moves DRAM and VRAM only");
    struct net_region *g;
    int rc = net_region_register(e, type, d, &g);
    if (rc == IXL_OK)
        *out = (struct ixl_md *)g;
    return rc;
}

/* Sleeps until g has no READ answer queued or the deadline passes. */
static void wait_inflight(struct net_region *g, uint64_t deadline)
{
    uint64_t step = 100000; /* 0.1 ms, doubling to 10 ms */
    while (atomic_load(&g->inflight) > 0 && net_now_ns() < deadline) {
        struct timespec ts = {0, (long)step};
        nanosleep(&ts, NULL);
        if (step < 10000000)
            step *= 2;
    }
}

/* Out of the key table at once (no frame finds it any more); then waits for the READ answers
 * already queued from it, at most timeout_ms, and cuts the connections still holding it. Only
 * this region's readers are waited for, and no lock is held meanwhile. */
static int net_deregister_mem(struct ixl_engine *base, struct ixl_md *md)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_region *g = (struct net_region *)md;
    net_region_unpublish(e, g);
    if (atomic_load(&g->inflight) > 0) {
        wait_inflight(g, net_now_ns() + e->timeout_ns);
        if (atomic_load(&g->inflight) > 0) {
            atomic_store(&g->cut, 1);
            net_loops_cut_regions(e);
            wait_inflight(g, net_now_ns() + 2000000000ull);
        }
        if (atomic_load(&g->inflight) > 0) {
            /* A loop that does not answer: never free memory a frame may still read. */
            e->host->log(e->host->ctx, IXL_LOG_ERROR,
                         "NET: region 0x%llx+%llu is still being sent from; its record is kept",
                         (unsigned long long)g->addr, (unsigned long long)g->len);
            return IXL_OK;
        }
    }
    net_region_free(e, g);
    return IXL_OK;
}

static int net_get_public_data(struct ixl_engine *base, const struct ixl_md *md, const void **data,
                               size_t *len)
{
    (void)base;
    const struct net_region *g = (const struct net_region *)md;
    *data = g->pub;
    *len = NET_PUB_BYTES;
    return IXL_OK;
}

static int net_load_remote_md(struct ixl_engine *base, const char *remote, enum ixl_mem type,
                              const struct ixl_reg_desc *d, const void *data, size_t len,
                              struct ixl_md **out)
{
    struct net_engine *e = (struct net_engine *)base;
    if (type != IXL_MEM_DRAM && type != IXL_MEM_VRAM)
        return net_error(e, IXL_ERR_MALFORMED, "NET public data of '%s' is malformed", remote);
    pthread_mutex_lock(&e->lock);
    struct net_peer *p = net_peer_find(e, remote);
    if (p)
        p->refs++;
    pthread_mutex_unlock(&e->lock);
    if (p == NULL)
        return net_error(e, IXL_ERR_NOT_FOUND, "NET has no connection info for '%s'", remote);
    struct net_rmd *m;
    int rc = net_rmd_load_remote(e, p, d, data, len, &m);
    if (rc == IXL_OK)
        m->vram = type == IXL_MEM_VRAM; /* CUDA IPC (net_ipc.c) or tcp-staged (net_stage.c) */
    if (rc != IXL_OK) {
        pthread_mutex_lock(&e->lock);
        p->refs--;
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    *out = (struct ixl_md *)m;
    return IXL_OK;
}

static int net_load_local_md(struct ixl_engine *base, struct ixl_md *md, struct ixl_md **out)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_rmd *m;
    int rc = net_rmd_load_local(e, (struct net_region *)md, &m);
    if (rc == IXL_OK)
        *out = (struct ixl_md *)m;
    return rc;
}

static int net_unload_md(struct ixl_engine *base, struct ixl_md *md)
{
    struct net_engine *e = (struct net_engine *)base;
    struct net_rmd *m = (struct net_rmd *)md;
    if (m->peer) {
        pthread_mutex_lock(&e->lock);
        m->peer->refs--;
        pthread_mutex_unlock(&e->lock);
    }
    net_rmd_unload(e, m);
    return IXL_OK;
}

static int net_alloc_mem(struct ixl_engine *base, enum ixl_mem type, size_t len, void **out)
{
    struct net_engine *e = (struct net_engine *)base;
    if (type != IXL_MEM_DRAM)
        return IXL_ERR_NOT_SUPPORTED;
    return net_alloc(e, len, out);
}

static int net_free_mem(struct ixl_engine *base, void *addr, size_t len)
{
    (void)len;
    return net_free((struct net_engine *)base, addr);
}

/* ---- notifications ----------------------------------------------------------------------- */

int net_notif_push(struct net_engine *e, const char *agent, const void *msg, size_t len)
{
    struct net_notif *n = net_sys()->calloc(1, sizeof(*n));
    if (n != NULL) {
        n->agent = net_sys()->strdup(agent);
        n->msg = net_sys()->malloc(len ? len : 1);
    }
    if (n == NULL || n->agent == NULL || n->msg == NULL) {
        if (n != NULL) {
            free(n->agent);
            free(n->msg);
            free(n);
        }
        /* Lost: said where it happened (the caller's thread, or NET's log from its own). */
        return net_error(e, IXL_ERR_NO_MEMORY,
                         "out of memory queueing a notification from '%s' (%zu bytes): lost", agent,
                         len);
    }
    if (len)
        memcpy(n->msg, msg, len);
    n->len = len;
    pthread_mutex_lock(&e->notif_lock);
    if (e->notif_tail)
        e->notif_tail->next = n;
    else
        e->notif_head = n;
    e->notif_tail = n;
    e->notif_count++;
    e->notif_bytes += len;
    pthread_mutex_unlock(&e->notif_lock);
    e->host->signal(e->host->ctx);
    return IXL_OK;
}

/* Peers' notifications are taken only while the queue is under its bound (one is always
 * taken into an empty queue, whatever its size); a loop that is refused stops reading that
 * connection, and the next drain wakes it. A notification whose body was being received
 * when the bound was reached still lands: the queue exceeds the bound by at most one
 * notification (notif_max bytes) per connection. Notifications an agent sends itself are
 * not bounded here (they are the application's own). */
bool net_notif_room(struct net_engine *e, size_t len)
{
    pthread_mutex_lock(&e->notif_lock);
    bool room = e->notif_count == 0 || (e->notif_count < e->notif_queue_max &&
                                        e->notif_bytes + len <= e->notif_queue_bytes);
    if (!room)
        e->notif_blocked = true; /* in the same section as the check: no drain is missed */
    pthread_mutex_unlock(&e->notif_lock);
    return room;
}

static int net_get_notifs(struct ixl_engine *base, ixl_notif_sink_fn sink, void *ctx)
{
    struct net_engine *e = (struct net_engine *)base;
    pthread_mutex_lock(&e->notif_lock);
    struct net_notif *n = e->notif_head;
    e->notif_head = e->notif_tail = NULL;
    e->notif_count = e->notif_bytes = 0;
    bool blocked = e->notif_blocked;
    e->notif_blocked = false;
    pthread_mutex_unlock(&e->notif_lock);
    if (blocked)
        net_loops_resume(e); /* the connections paused at the bound read again */
    while (n) {
        struct net_notif *next = n->next;
        sink(ctx, n->agent, n->msg, n->len);
        free(n->agent);
        free(n->msg);
        free(n);
        n = next;
    }
    return IXL_OK;
}

static int net_gen_notif(struct ixl_engine *base, const char *remote, const void *msg, size_t len)
{
    struct net_engine *e = (struct net_engine *)base;
    if (len > e->notif_max)
        return net_error(e, IXL_ERR_NOTIF_TOO_LARGE, "notification of %zu bytes over %zu", len,
                         e->notif_max);
    if (strcmp(remote, e->name) == 0) {
        return net_notif_push(e, e->name, msg, len);
    }
    pthread_mutex_lock(&e->lock);
    struct net_peer *p = net_peer_find(e, remote);
    pthread_mutex_unlock(&e->lock);
    if (p == NULL || !p->loaded)
        return net_error(e, IXL_ERR_NOT_FOUND, "NET has no connection info for '%s'", remote);
    return net_peer_send_msg(p, msg, len);
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static void net_destroy_engine(struct ixl_engine *base);

const struct ixl_sys *net_sys_ptr;

int net_sys_set(const struct ixl_engine_init *init)
{
    const struct ixl_host *h = init->host;
    if (h->size < offsetof(struct ixl_host, sys) + sizeof(h->sys) || h->sys == NULL ||
        h->sys->size < offsetof(struct ixl_sys, io_uring_queue_init) + sizeof(void *)) {
        h->error(h->ctx, IXL_ERR_PLUGIN, "the host has no system-call table (ixl_host.sys)");
        return IXL_ERR_PLUGIN;
    }
    __atomic_store_n(&net_sys_ptr, h->sys, __ATOMIC_RELAXED);
    return IXL_OK;
}

static int net_create_engine(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    if (net_sys_set(init) != IXL_OK)
        return IXL_ERR_PLUGIN;
    struct net_engine *e = net_sys()->calloc(1, sizeof(*e));
    if (e == NULL)
        return IXL_ERR_NO_MEMORY;
    e->host = init->host;
    ixlp_pool_init(&e->region_pool, net_sys(), sizeof(struct net_region));
    ixlp_pool_init(&e->rmd_pool, net_sys(), sizeof(struct net_rmd));
    e->listen_fd = -1;
    e->spare_fd = -1;
    snprintf(e->name, sizeof(e->name), "%s", init->agent_name);
    e->notif_max = init->notif_max;
    e->instance = ixlp_random64(net_sys()->getrandom);
    e->peer_idx.seed = ixlp_random64(net_sys()->getrandom);
    e->next_serial = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_rwlock_init(&e->regions_lock, NULL);
    pthread_mutex_init(&e->reqs_lock, NULL);
    pthread_cond_init(&e->reqs_cond, NULL);
    pthread_mutex_init(&e->notif_lock, NULL);
    pthread_mutex_init(&e->nsess_lock, NULL);
    pthread_mutex_init(&e->msg_lock, NULL);
    pthread_cond_init(&e->msg_cond, NULL);
    pthread_mutex_init(&e->work_lock, NULL);
    pthread_cond_init(&e->work_cond, NULL);
    int rc = parse_options(e, init);
    if (rc == IXL_OK && e->auth_mode == IXL_AUTH_OPEN)
        e->host->log(e->host->ctx, IXL_LOG_WARN,
                     "NET: insecure_remote: its listener (%s) takes connections from any host "
                     "and user without proof; whoever reaches it can read and write registered "
                     "memory and send notifications under any name. Set a cluster key "
                     "(IXL_AUTH_KEY) instead",
                     e->listen_addr);
    if (rc == IXL_OK) {
        host_identity(e->host_id);
        rc = net_loops_start(e);
    }
    if (rc == IXL_OK)
        rc = net_local_start(e);
    if (rc == IXL_OK) {
        collect_addrs(e);
        build_conn_info(e);
        rc = net_workers_start(e);
    }
    if (rc == IXL_OK)
        rc = net_dev_init(e);
    if (rc != IXL_OK) {
        net_destroy_engine(&e->base);
        return rc;
    }
    e->base.size = sizeof(struct ixl_engine);
    /* No IXL_CAP_PROGRESS: NET's own threads move everything and signal the host at each
     * end, so a waiting caller sleeps (ixl_xfer_wait's slice of 20 ms, not the 1 ms timer a
     * backend that must be driven gets) and nobody calls a progress() that does nothing. */
    e->base.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF;
    /* VRAM only with a device layer that has a device (net_dev.c); else the reason shows in
     * ixl-info and in a refused VRAM registration. */
    e->base.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM) | (e->dev ? IXL_MEM_BIT(IXL_MEM_VRAM) : 0);
    if (e->dev == NULL) {
        e->base.mem_why = e->mem_why; /* ixl-info and a refused VRAM registration say it */
        e->host->log(e->host->ctx, IXL_LOG_DEBUG, "NET: no VRAM (%s)", e->mem_why);
    }
    *out = &e->base;
    return IXL_OK;
}

static void net_destroy_engine(struct ixl_engine *base)
{
    struct net_engine *e = (struct net_engine *)base;
    /* Notifications sent just before to peers still connected: their acks are asked for and
     * waited for (the loops still run). Peers are only ever added at the head and freed
     * below. */
    pthread_mutex_lock(&e->lock);
    struct net_peer *peers = e->peers;
    pthread_mutex_unlock(&e->lock);
    uint64_t settle = net_now_ns() + e->heartbeat_ns;
    for (struct net_peer *p = peers; p; p = p->next)
        net_peer_notif_settle(p, settle);
    atomic_store(&e->stopping, 1); /* nothing new is queued or dialed from now on */
    pthread_mutex_lock(&e->lock);
    peers = e->peers;
    e->peers = NULL;
    ixlp_index_free(&e->peer_idx); /* found by name no more */
    pthread_mutex_unlock(&e->lock);
    for (struct net_peer *p = peers; p; p = p->next) {
        pthread_mutex_lock(&p->lock);
        net_peer_pv_begin(p);
        p->loaded = false;
        net_peer_pv_end(p);
        pthread_mutex_unlock(&p->lock);
        net_peer_teardown(p, IXL_ERR_REMOTE_DISCONNECT, "NET: the agent is being destroyed");
    }
    net_local_stop(e);
    net_workers_stop(e);
    net_dev_stop(e);      /* every recorded event waited for */
    net_loops_stop(e);    /* every connection closes; the references its frames held drop */
    net_reqs_free_all(e); /* only requests whose release kept failing are left */
    while (peers) {
        struct net_peer *n = peers->next;
        net_ipc_drop_peer(e, peers); /* no copy is in flight any more */
        net_peer_notif_lost(peers, "the agent was destroyed", true, peers->instance);
        free(peers->q.v);
        free(peers->nq.v);
        if (peers->pidfd >= 0)
            net_sys()->close(peers->pidfd);
        net_local_life_release(peers);
        net_spool_unref(peers->stage);
        pthread_mutex_destroy(&peers->lock);
        pthread_cond_destroy(&peers->cond);
        free(peers);
        peers = n;
    }
    while (e->innames) {
        struct net_inname *n = e->innames->next;
        net_spool_unref(e->innames->stage);
        free(e->innames);
        e->innames = n;
    }
    net_allocs_free_all(e);
    struct net_notif *nn = e->notif_head;
    while (nn) {
        struct net_notif *next = nn->next;
        free(nn->agent);
        free(nn->msg);
        free(nn);
        nn = next;
    }
    net_rtab_free(e->rtab, e->rtab_cap);
    ixlp_pool_fini(&e->region_pool); /* (a region kept from a loop that did not answer too: the
                                        loops are stopped) */
    ixlp_pool_fini(&e->rmd_pool);
    free(e->qtab);
    free(e->work);
    pthread_cond_destroy(&e->work_cond);
    pthread_mutex_destroy(&e->work_lock);
    pthread_cond_destroy(&e->msg_cond);
    pthread_mutex_destroy(&e->msg_lock);
    pthread_mutex_destroy(&e->notif_lock);
    pthread_mutex_destroy(&e->nsess_lock);
    pthread_cond_destroy(&e->reqs_cond);
    pthread_mutex_destroy(&e->reqs_lock);
    pthread_rwlock_destroy(&e->regions_lock);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static const struct ixl_engine_ops net_ops = {
    .size = sizeof(struct ixl_engine_ops),
    .connect = net_connect,
    .disconnect = net_disconnect,
    .get_conn_info = net_get_conn_info,
    .load_remote_conn_info = net_load_remote_conn_info,
    .register_mem = net_register_mem,
    .deregister_mem = net_deregister_mem,
    .get_public_data = net_get_public_data,
    .load_remote_md = net_load_remote_md,
    .load_local_md = net_load_local_md,
    .unload_md = net_unload_md,
    .prep_xfer = net_prep_xfer,
    .estimate_xfer_cost = net_estimate,
    .post_xfer = net_post_xfer,
    .check_xfer = net_check_xfer,
    .release_req = net_release_req,
    .get_notifs = net_get_notifs,
    .gen_notif = net_gen_notif,
    .alloc_mem = net_alloc_mem,
    .free_mem = net_free_mem,
    .req_info = net_req_info,
    .wait_xfer = net_wait_xfer,
};

static const struct ixl_plugin_desc net_desc = {
    .abi_major = IXL_PLUGIN_ABI_MAJOR,
    .abi_minor = IXL_PLUGIN_ABI_MINOR,
    .size = sizeof(struct ixl_plugin_desc),
    .name = "NET",
    .version = "1.0",
    .caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF,
    .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM) | IXL_MEM_BIT(IXL_MEM_VRAM),
    .options = net_options,
    .n_options = NO_COUNT,
    .create_engine = net_create_engine,
    .destroy_engine = net_destroy_engine,
    .ops = &net_ops,
};

static const struct ixl_plugin_desc *net_entry(void)
{
    return &net_desc;
}

IXL_PLUGIN_EXPORT(net_entry)

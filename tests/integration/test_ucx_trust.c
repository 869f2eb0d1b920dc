/*
 * The UCX plugin and the trust boundaries of issue 16 (finding 3), with in-process agents:
 *
 *   forged   an agent with a cluster key loads metadata whose UCX worker address or packed
 *            remote key was forged with the plugin's checksum recomputed (random bytes, bytes
 *            flipped, the memory domains' keys altered: a shared memory segment's id): refused
 *            with IXL_ERR_AUTH or IXL_ERR_MALFORMED, and the loading process survives. Each
 *            load (and, were it accepted, a WRITE to the forged peer, which makes UCX parse the
 *            address and unpack the key) runs in a child process, so that an abort inside UCX is
 *            this test's failure, not its crash.
 *   plugin   without a key, remote keys the plugin can tell are not UCX's (a layout whose
 *            lengths do not add up) are refused by the plugin itself with IXL_ERR_MALFORMED.
 *   loopback without a key the UCX backend's network transports use the loopback device only:
 *            its worker address names none of the host's other IPv4 addresses (with
 *            insecure_remote it names them: the check sees what it looks for), devices=eth0 is
 *            refused, and a WRITE between two such agents works (tcp over lo); with shared
 *            memory allowed (err_mode=none) UCX makes no SysV segment (mode 0660: open to the
 *            agent's group), where with insecure_remote it does.
 *   put      without a key (and err_mode=peer) UCX's own put/get protocol, which carries an
 *            address and no key, is not served: a peer using it (rma_emulation=ucx) writes
 *            nothing into the victim.
 *   notifs   received notifications are bounded (notif_queue_max, notif_queue_bytes): past the
 * bound the sender's ixl_notif_send and a WRITE's notification fail with IXL_ERR_REMOTE_REFUSED
 * (the WRITE's bytes are in place), nothing is lost silently, and after a drain notifications go
 * through again.
 *
 * Usage: test_ucx_trust [forged] [plugin] [loopback] [put] [notifs] (no argument: all). Skips (77)
 * when the UCX plugin was not built (libucx missing): a failure under CI=true.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define KEY "ucx-trust-test-cluster-key-0123456789"
#define BUF_LEN 65536
#define WAIT_MS 10000
#define CHILD_S 30 /* a child that hangs this long fails */

static uint8_t *bufs[4];

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* An agent with a UCX backend (options kv), a key or none, and buffer buf registered. */
static int make_agent(const char *name, const char *key, bool insecure, const struct ixl_kv *kv,
                      size_t n, uint8_t *buf, struct ixl_agent **out)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_AUTH_KEY |
                                                IXL_AGENT_F_INSECURE_REMOTE,
                                  .backends = "",
                                  .auth_key = key,
                                  .insecure_remote = insecure};
    CHECK_RC(ixl_agent_create(name, &ap, out), IXL_OK);
    int rc = ixl_backend_create(*out, "UCX", kv, n, NULL);
    if (rc != IXL_OK)
        return rc;
    if (buf != NULL) {
        struct ixl_reg_desc d = {(uintptr_t)buf, BUF_LEN, 0, NULL, 0};
        CHECK_RC(ixl_mem_register(*out, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    }
    return IXL_OK;
}

static struct ixl_dlist *list1(const void *addr, uint64_t len)
{
    struct ixl_dlist *l;
    CHECK_RC(ixl_dlist_create(IXL_MEM_DRAM, 1, &l), IXL_OK);
    struct ixl_desc d = {(uintptr_t)addr, len, 0};
    CHECK_RC(ixl_dlist_add(l, &d, 1), IXL_OK);
    return l;
}

/* A WRITE of len bytes from a's buf to b's buf (b loaded on a), with notif when not NULL: its
 * final status. */
static int write_to(struct ixl_agent *a, const char *b, uint8_t *src, uint8_t *dst, size_t len,
                    const char *notif)
{
    struct ixl_dlist *l = list1(src, len), *r = list1(dst, len);
    struct ixl_xfer_params xp = {.field_mask = notif != NULL ? IXL_XFER_F_NOTIF : 0,
                                 .notif = notif,
                                 .notif_len = notif != NULL ? strlen(notif) : 0};
    struct ixl_xfer *x = NULL;
    int rc = ixl_xfer_create(a, IXL_OP_WRITE, l, r, b, &xp, &x);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, WAIT_MS);
        CHECK(rc != IXL_ERR_TIMEOUT);
        CHECK_RC(ixl_xfer_release(x), IXL_OK);
    }
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    return rc;
}

/* ---- forging -------------------------------------------------------------------------------- */

static uint32_t fnv32(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return (uint32_t)h;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The plugin's wrapped blob with this magic ("IXLU": connection info, "IXLK": a region's public
 * data) inside metadata: its payload (after the 16-byte header) and length, found by its magic
 * and a header that checks. */
static uint8_t *find_wrapped(uint8_t *md, size_t len, const char *magic, size_t *plen)
{
    for (size_t i = 0; i + 16 < len; i++) {
        if (memcmp(md + i, magic, 4) != 0)
            continue;
        uint32_t n = get32(md + i + 8);
        if (n > 0 && n <= len - i - 16 && get32(md + i + 12) == fnv32(md + i + 16, n)) {
            *plen = n;
            return md + i + 16;
        }
    }
    return NULL;
}

/* Recomputes the checksum of the wrapped payload p (what a forger does). */
static void reseal(uint8_t *p, size_t plen)
{
    put32(p - 4, fnv32(p, plen));
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint8_t rnd8(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

enum forgery {
    F_ADDR_RANDOM,  /* the first worker address: random bytes */
    F_ADDR_FLIP,    /* its bytes past the first 8 inverted */
    F_ADDR_TAIL,    /* its last half random */
    F_RKEY_RANDOM,  /* the packed rkey: random bytes */
    F_RKEY_KEYS,    /* the memory domains' keys inside it altered, its layout kept */
    F_RKEY_MDMAP,   /* its memory domain map: every bit */
    F_RKEY_OVERRUN, /* its first domain's key said to run past the end */
    F_COUNT
};
static const char *const forgery_name[F_COUNT] = {
    "address: random bytes",   "address: bytes inverted",   "address: last half random",
    "rkey: random bytes",      "rkey: domain keys altered", "rkey: every memory domain",
    "rkey: a key past the end"};

/* Forges md (checksums recomputed): false when it has nothing to forge this way. */
static bool forge(uint8_t *md, size_t len, enum forgery f)
{
    size_t plen;
    uint8_t *p;
    if (f <= F_ADDR_TAIL) {
        if ((p = find_wrapped(md, len, "IXLU", &plen)) == NULL || plen < 8)
            return false;
        size_t alen = get32(p + 4);
        uint8_t *a = p + 8;
        CHECK(alen > 8 && alen <= plen - 8);
        for (size_t i = f == F_ADDR_TAIL ? alen / 2 : f == F_ADDR_FLIP ? 8 : 0; i < alen; i++)
            a[i] = f == F_ADDR_FLIP ? (uint8_t)~a[i] : rnd8();
    } else {
        if ((p = find_wrapped(md, len, "IXLK", &plen)) == NULL || plen < 8 + 9)
            return false;
        uint8_t *rk = p + 8;
        size_t rlen = plen - 8;
        if (f == F_RKEY_RANDOM) {
            for (size_t i = 0; i < rlen; i++)
                rk[i] = rnd8();
        } else if (f == F_RKEY_MDMAP) {
            memset(rk, 0xff, 8);
        } else {
            /* [u64 md_map][u8 mem type] then per domain of the map [u8 size][key] */
            uint64_t map = 0;
            for (int i = 7; i >= 0; i--)
                map = map << 8 | rk[i];
            size_t off = 9;
            bool any = false;
            for (; map != 0 && off < rlen && (size_t)rk[off] + 1 <= rlen - off; map &= map - 1) {
                size_t n = rk[off];
                if (f == F_RKEY_OVERRUN && n > 0) {
                    rk[off] = (uint8_t)(rlen - off);
                    any = true;
                    break;
                }
                for (size_t i = 0; f == F_RKEY_KEYS && i < n; i++)
                    rk[off + 1 + i] ^= (uint8_t)(0x5a + i);
                any = any || n > 0;
                off += 1 + n;
            }
            if (!any)
                return false;
        }
    }
    reseal(p, plen);
    return true;
}

/* In a child: agents "fsrc" (its metadata forged) and "fvic" (loads it), with key or not;
 * exits 0 when the load is refused with IXL_ERR_AUTH or IXL_ERR_MALFORMED, 2 when it is
 * accepted (after a WRITE to the forged peer, which makes UCX use what it loaded), 3 when the
 * forgery has nothing to change, 1 on another error. */
static void forged_child(const char *key, enum forgery f)
{
    alarm(CHILD_S);
    struct ixl_agent *src, *vic;
    /* tcp and shared memory (err_mode=none): the remote key then holds the shared memory
     * transports' keys too */
    const struct ixl_kv kv[] = {{"err_mode", "none"}};
    CHECK_RC(make_agent("fsrc", key, false, kv, 1, NULL, &src), IXL_OK);
    CHECK_RC(make_agent("fvic", key, false, kv, 1, bufs[1], &vic), IXL_OK);
    /* memory UCX allocated: its remote key names a shared memory segment (sysv, posix) */
    void *mem;
    CHECK_RC(ixl_mem_alloc(src, IXL_MEM_DRAM, BUF_LEN, NULL, &mem), IXL_OK);
    struct ixl_reg_desc d = {(uintptr_t)mem, BUF_LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(src, IXL_MEM_DRAM, &d, 1, NULL), IXL_OK);
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(src, NULL, &md, &len), IXL_OK);
    /* the genuine blob loads (and is dropped again): what the forgery changes is what counts */
    CHECK_RC(ixl_md_load(vic, md, len, NULL, 0), IXL_OK);
    CHECK_RC(ixl_remote_invalidate(vic, "fsrc"), IXL_OK);
    if (!forge(md, len, f))
        _exit(3);
    char name[64];
    int rc = ixl_md_load(vic, md, len, name, sizeof(name));
    ixl_free(md);
    if (rc == IXL_ERR_AUTH || rc == IXL_ERR_MALFORMED) {
        fprintf(stderr, "  %-28s refused: %s\n", forgery_name[f], ixl_agent_last_error(vic));
        _exit(0);
    }
    if (rc != IXL_OK) {
        fprintf(stderr, "  %-28s load: %s (%s), want IXL_ERR_AUTH or IXL_ERR_MALFORMED\n",
                forgery_name[f], ixl_strerror(rc), ixl_agent_last_error(vic));
        _exit(1);
    }
    memset(mem, 0xa5, BUF_LEN);
    rc = write_to(vic, "fsrc", bufs[1], mem, 4096, NULL);
    fprintf(stderr, "  %-28s ACCEPTED by ixl_md_load; a WRITE to it then gave %s\n",
            forgery_name[f], ixl_strerror(rc));
    _exit(2);
}

/* Runs forged_child for every forgery: each must be refused and the child must survive. */
static void test_forged(const char *key, const enum forgery *which, size_t n)
{
    fprintf(stderr, "forged metadata, %s:\n", key != NULL ? "cluster key" : "no key");
    unsigned refused = 0;
    for (size_t i = 0; i < n; i++) {
        fflush(stderr);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            forged_child(key, which[i]);
        int ws;
        CHECK(waitpid(pid, &ws, 0) == pid);
        if (WIFSIGNALED(ws))
            check_fail(__FILE__, __LINE__, "%s: the loading process died of signal %d (%s)",
                       forgery_name[which[i]], WTERMSIG(ws), strsignal(WTERMSIG(ws)));
        if (WEXITSTATUS(ws) == 3) {
            fprintf(stderr, "  %-28s nothing to forge here\n", forgery_name[which[i]]);
            continue;
        }
        if (WEXITSTATUS(ws) != 0)
            check_fail(__FILE__, __LINE__, "%s: not refused (child exit %d)",
                       forgery_name[which[i]], WEXITSTATUS(ws));
        refused++;
    }
    CHECK(refused > 0);
}

/* ---- loopback only without a key ----------------------------------------------------------- */

/* Whether the UCX connection info in a's metadata holds these bytes. */
static bool info_has(struct ixl_agent *a, const void *bytes, size_t n)
{
    void *md;
    size_t len, plen;
    CHECK_RC(ixl_md_get(a, NULL, &md, &len), IXL_OK);
    uint8_t *p = find_wrapped(md, len, "IXLU", &plen);
    CHECK(p != NULL);
    bool has = memmem(p, plen, bytes, n) != NULL;
    ixl_free(md);
    return has;
}

/* SysV shared memory segments this process created (/proc/sysvipc/shm: key shmid perms size
 * cpid ...). */
static unsigned sysv_mine(void)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    if (f == NULL)
        return 0;
    char line[512];
    unsigned n = 0;
    long key, id, perms, size, cpid;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%ld %ld %lo %ld %ld", &key, &id, &perms, &size, &cpid) == 5 &&
            cpid == (long)getpid())
            n++;
    fclose(f);
    return n;
}

/* With err_mode=none (shared memory allowed) and memory UCX allocated: how many SysV segments
 * (0660: open to this group) the agent made. */
static unsigned sysv_of_agent(bool insecure)
{
    struct ixl_agent *a;
    const struct ixl_kv kv[] = {{"err_mode", "none"}};
    unsigned before = sysv_mine();
    CHECK_RC(make_agent("shm_a", NULL, insecure, kv, 1, NULL, &a), IXL_OK);
    void *mem;
    CHECK_RC(ixl_mem_alloc(a, IXL_MEM_DRAM, BUF_LEN, NULL, &mem), IXL_OK);
    unsigned made = sysv_mine() - before;
    CHECK_RC(ixl_mem_free(a, mem), IXL_OK);
    ixl_agent_destroy(a);
    return made;
}

static void test_loopback(void)
{
    /* no SysV segments (group-accessible) without a key; with insecure_remote UCX makes them,
     * so the count sees what it looks for */
    unsigned sysv_local = sysv_of_agent(false), sysv_open = sysv_of_agent(true);
    if (sysv_local != 0)
        check_fail(__FILE__, __LINE__,
                   "without a key UCX made %u SysV segments (mode 0660: open to the group)",
                   sysv_local);
    CHECK(sysv_open > 0);
    fprintf(stderr, "sysv: none without a key (%u with insecure_remote)\n", sysv_open);

    struct ixl_agent *a, *b, *open;
    CHECK_RC(make_agent("lo_a", NULL, false, NULL, 0, bufs[0], &a), IXL_OK);
    CHECK_RC(make_agent("lo_b", NULL, false, NULL, 0, bufs[1], &b), IXL_OK);
    CHECK_RC(make_agent("lo_open", NULL, true, NULL, 0, NULL, &open), IXL_OK);
    /* (UCX 1.13 packs a loopback tcp interface as the host's id, not as 127.0.0.1) */
    struct ifaddrs *ifs;
    CHECK(getifaddrs(&ifs) == 0);
    unsigned others = 0, seen_open = 0;
    char dev[64] = "";
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct in_addr in = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
        if ((ntohl(in.s_addr) >> 24) == 127)
            continue;
        char txt[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &in, txt, sizeof(txt));
        if (info_has(a, &in, sizeof(in)))
            check_fail(__FILE__, __LINE__,
                       "without a key the UCX worker address names %s (%s), not loopback only", txt,
                       i->ifa_name);
        others++;
        seen_open += info_has(open, &in, sizeof(in));
        snprintf(dev, sizeof(dev), "%s", i->ifa_name);
    }
    freeifaddrs(ifs);
    /* The check looks where the addresses are: with insecure_remote they are there. */
    if (others > 0)
        CHECK(seen_open > 0);
    fprintf(stderr,
            "loopback: no key: none of the host's %u other IPv4 addresses in the worker address "
            "(%u of them there with insecure_remote)\n",
            others, seen_open);
    if (dev[0] != '\0') {
        struct ixl_agent *c;
        const struct ixl_kv kv[] = {{"devices", dev}};
        CHECK_RC(make_agent("lo_dev", NULL, false, kv, 1, NULL, &c), IXL_ERR_NOT_ALLOWED);
        CHECK_STR_HAS(ixl_agent_last_error(c), "loopback");
        ixl_agent_destroy(c);
    }
    /* tcp over lo between two agents without a key */
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(b, NULL, &md, &len), IXL_OK);
    CHECK_RC(ixl_md_load(a, md, len, NULL, 0), IXL_OK);
    ixl_free(md);
    for (size_t i = 0; i < 4096; i++)
        bufs[0][i] = (uint8_t)(i * 7 + 3);
    memset(bufs[1], 0xa5, BUF_LEN);
    CHECK_RC(write_to(a, "lo_b", bufs[0], bufs[1], 4096, NULL), IXL_OK);
    CHECK(memcmp(bufs[0], bufs[1], 4096) == 0 && bufs[1][4096] == 0xa5);
    ixl_agent_destroy(a);
    ixl_agent_destroy(b);
    ixl_agent_destroy(open);
}

/* ---- UCX's own put without a key ----------------------------------------------------------- */

/* Without a key (and peer error handling: no RMA lane possible) the victim's UCX answers no put
 * or get of UCX's own protocol, which carries an address and no key and would let any process
 * connected to its tcp port on lo write its memory: a peer that uses it (rma_emulation=ucx)
 * writes nothing. */
static void test_ucx_put(void)
{
    struct ixl_agent *vic, *evil;
    const struct ixl_kv kv[] = {{"rma_emulation", "ucx"}, {"timeout_ms", "500"}};
    CHECK_RC(make_agent("p_vic", NULL, false, NULL, 0, bufs[1], &vic), IXL_OK);
    CHECK_RC(make_agent("p_evil", NULL, false, kv, 2, bufs[0], &evil), IXL_OK);
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(vic, NULL, &md, &len), IXL_OK);
    CHECK_RC(ixl_md_load(evil, md, len, NULL, 0), IXL_OK);
    ixl_free(md);
    memset(bufs[0], 0x3c, BUF_LEN);
    memset(bufs[1], 0xa5, BUF_LEN);
    struct ixl_dlist *l = list1(bufs[0], 4096), *r = list1(bufs[1], 4096);
    struct ixl_xfer *x;
    CHECK_RC(ixl_xfer_create(evil, IXL_OP_WRITE, l, r, "p_vic", NULL, &x), IXL_OK);
    int rc = ixl_xfer_post(x);
    if (rc == IXL_IN_PROGRESS)
        rc = ixl_xfer_wait(x, 3000);
    for (size_t i = 0; i < BUF_LEN; i++)
        if (bufs[1][i] != 0xa5)
            check_fail(__FILE__, __LINE__,
                       "UCX's own put (no key) wrote byte %zu of the victim (request: %s)", i,
                       ixl_strerror(rc));
    CHECK(rc != IXL_OK);
    ixl_agent_destroy(vic); /* the peer is gone: UCX ends the put's operations */
    uint64_t end = ms_now() + 5000;
    while ((rc = ixl_xfer_release(x)) == IXL_ERR_BUSY && ms_now() < end)
        ixl_agent_progress(evil);
    ixl_dlist_destroy(l);
    ixl_dlist_destroy(r);
    ixl_agent_destroy(evil);
    fprintf(stderr, "UCX's put without a key: nothing written, the request failed\n");
}

/* ---- bounded notifications ----------------------------------------------------------------- */

static size_t drain_count(struct ixl_agent *a, const char *from)
{
    struct ixl_notif_batch *nb;
    CHECK_RC(ixl_notif_drain(a, &nb), IXL_OK);
    size_t n = nb != NULL ? nb->count : 0;
    for (size_t i = 0; i < n; i++)
        CHECK(strcmp(nb->items[i].agent, from) == 0);
    ixl_free(nb);
    return n;
}

static void test_notifs(void)
{
    struct ixl_agent *tx, *rx;
    const struct ixl_kv kv[] = {{"notif_queue_max", "8"}, {"notif_queue_bytes", "4096"}};
    CHECK_RC(make_agent("n_tx", NULL, false, NULL, 0, bufs[0], &tx), IXL_OK);
    CHECK_RC(make_agent("n_rx", NULL, false, kv, 2, bufs[1], &rx), IXL_OK);
    void *md;
    size_t len;
    CHECK_RC(ixl_md_get(rx, NULL, &md, &len), IXL_OK);
    CHECK_RC(ixl_md_load(tx, md, len, NULL, 0), IXL_OK);
    ixl_free(md);
    /* count: 8 queue, the 9th is refused where it was sent */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 8; i++)
            CHECK_RC(ixl_notif_send(tx, "n_rx", "hello", 5, NULL), IXL_OK);
        CHECK_RC(ixl_notif_send(tx, "n_rx", "hello", 5, NULL), IXL_ERR_REMOTE_REFUSED);
        CHECK_STR_HAS(ixl_agent_last_error(tx), "queue");
        /* a WRITE's notification too: the bytes are in place, the request says it was refused */
        for (size_t i = 0; i < 4096; i++)
            bufs[0][i] = (uint8_t)(i * 13 + round);
        memset(bufs[1], 0xa5, BUF_LEN);
        CHECK_RC(write_to(tx, "n_rx", bufs[0], bufs[1], 4096, "with-data"), IXL_ERR_REMOTE_REFUSED);
        CHECK(memcmp(bufs[0], bufs[1], 4096) == 0);
        CHECK(drain_count(rx, "n_tx") == 8);
    }
    /* bytes: 4096 of them hold 3 notifications of 1000 bytes (with their overhead), not 4 */
    char big[1000];
    memset(big, 'b', sizeof(big));
    int ok = 0, rc;
    while ((rc = ixl_notif_send(tx, "n_rx", big, sizeof(big), NULL)) == IXL_OK && ok < 8)
        ok++;
    CHECK_RC(rc, IXL_ERR_REMOTE_REFUSED);
    CHECK(ok >= 3 && ok < 5);
    CHECK(drain_count(rx, "n_tx") == (size_t)ok);
    /* after the drain they go through again, with their data */
    CHECK_RC(write_to(tx, "n_rx", bufs[0], bufs[1], 4096, "after-drain"), IXL_OK);
    uint64_t end = ms_now() + WAIT_MS;
    size_t got = 0;
    while (got == 0 && ms_now() < end)
        got = drain_count(rx, "n_tx");
    CHECK(got == 1);
    fprintf(stderr,
            "notifications: bounded at 8 and at 4096 bytes (%d of 1000 bytes): the "
            "sender is refused, nothing is lost\n",
            ok);
    ixl_agent_destroy(tx);
    ixl_agent_destroy(rx);
}

/* Whether part `name` runs: all of them without arguments, else those named. */
static bool part(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    alarm(110);
    ixl_log_set_level(IXL_LOG_ERROR);
    for (int i = 0; i < 4; i++)
        CHECK((bufs[i] = calloc(1, BUF_LEN)) != NULL);
    struct ixl_agent *probe;
    int rc = make_agent("probe", NULL, false, NULL, 0, NULL, &probe);
    ixl_agent_destroy(probe);
    if (rc == IXL_ERR_NOT_FOUND || rc == IXL_ERR_PLUGIN)
        skip(1, "the UCX plugin was not built (libucx missing)");
    CHECK_RC(rc, IXL_OK);
    uint64_t t0 = ms_now();
    static const enum forgery all[] = {F_ADDR_RANDOM, F_ADDR_FLIP,  F_ADDR_TAIL,   F_RKEY_RANDOM,
                                       F_RKEY_KEYS,   F_RKEY_MDMAP, F_RKEY_OVERRUN};
    if (part(argc, argv, "forged"))
        test_forged(KEY, all, sizeof(all) / sizeof(all[0]));
    static const enum forgery layout[] = {F_RKEY_MDMAP, F_RKEY_OVERRUN};
    if (part(argc, argv, "plugin"))
        test_forged(NULL, layout, sizeof(layout) / sizeof(layout[0]));
    if (part(argc, argv, "loopback"))
        test_loopback();
    if (part(argc, argv, "put"))
        test_ucx_put();
    if (part(argc, argv, "notifs"))
        test_notifs();
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    fprintf(stderr, "test_ucx_trust: ok in %llu ms\n", (unsigned long long)(ms_now() - t0));
    return 0;
}

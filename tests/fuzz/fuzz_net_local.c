/*
 * Fuzz target for NET's same-node channel (net_local.c): the frames a process of this user
 * sends to an agent's abstract Unix socket (SOCK_SEQPACKET, one fixed 280-byte frame per
 * message). The NET sources are compiled into this binary, with a table of built-in plugins
 * that lists NET, as in fuzz_net.c.
 *
 * An input is a sequence of messages, each a u16 little-endian length (at most MSG_MAX; larger
 * values are cut to it) and that many bytes; a length running past the input's end takes what
 * is left. Each message is sent on one connection to the agent's same-node socket, one at a
 * time, and the answer (or the end of the connection) is awaited before the next.
 *
 * One relocation lets the fuzzer reach the registered regions, whose addresses and keys change
 * from run to run: in a message that is a well-formed REG_Q (280 bytes, magic, type 5), key 0
 * stands for region A's key and key 1 for region B's, and addr is then an offset from that
 * region's first byte (wrapping at 2^64). A is plain heap memory; B comes from NET's allocator
 * (a memfd), the only kind of memory whose descriptor the channel passes.
 *
 * The oracle, a model written from net_local.c's header comment (not its code):
 *  - a message of another length than 280, or without the magic, or of a type other than
 *    HELLO_Q, CHAL_Q, REG_Q, VREG_Q and LIFE_Q ends the connection: no answer, the socket
 *    reads end-of-file;
 *  - LIFE_Q (issue 18) by LIFE_A LS_OK, zeros after the head, and one descriptor passed: a
 *    sealed (F_SEAL_SHRINK) memfd of 4096 bytes whose first word (the robust lock the agent's
 *    same-node thread holds) names a live owner: tid bits set, FUTEX_OWNER_DIED clear;
 *  - VREG_Q (issue 20: a VRAM region's IPC handle) by VREG_A LS_NO_REGION with nothing else
 *    and no descriptor: the agent registered no VRAM (keys 0 and 1 are relocated as for REG_Q,
 *    so DRAM regions claimed as VRAM are refused too);
 *  - HELLO_Q is answered by HELLO_A with the agent's instance (from its connection info) and
 *    name;
 *  - CHAL_Q by CHAL_A with the address of a word of this process that holds the 16-byte nonce
 *    (read back here: the channel serves the process it runs in);
 *  - REG_Q by REG_A: LS_NO_REGION unless key, addr and len name a registered region exactly;
 *    with want_fd (byte 32 == 1), LS_NO_MEMFD for A and, for B, LS_OK with a descriptor passed
 *    whose bytes at the answered offset are B's; without want_fd, LS_OK; a descriptor is passed
 *    only with want_fd and LS_OK;
 *  - every answer is one 280-byte frame with the magic, its type, zeros where nothing is said;
 *  - after each input, no descriptor of this process is left over (the channel's duplicates
 *    are closed) and the agent still answers a fresh HELLO_Q.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <ixl/ixl.h>

#include "fuzz.h"
#include "plugin/builtin.h"
#include "serdes/codec.h"

/* The built-in plugins of this binary: NET, compiled in with IXL_PLUGIN_BUILTIN_NAME=NET. */
const struct ixl_plugin_desc *ixl_plugin_builtin_NET(void);
const ixl_plugin_entry_fn ixl_builtin_plugins[] = {ixl_plugin_builtin_NET, NULL};

#define AGENT_NAME "fuzz_net_local_target"
#define LF_MAGIC 0x554c5849u /* "IXLU" */
#define LF_BYTES 280
#define MSG_MAX 600
#define REGION 16384u
#define DEADLINE_MS 10000

enum { HELLO_Q = 1, HELLO_A, CHAL_Q, CHAL_A, REG_Q, REG_A, VREG_Q, VREG_A, LIFE_Q, LIFE_A };
enum { LS_OK = 0, LS_NO_REGION = 1, LS_NO_MEMFD = 2 };

static struct ixl_agent *agent;
static uint8_t *a_mem, *b_mem;
static uint64_t key_a, key_b, instance, local_id;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_net_local: %s\n", what);
    abort();
}

static void put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        fail("cannot list /proc/self/fd");
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* ---- the connection ------------------------------------------------------------------------ */

static int dial(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail("socket");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "ixl-net-%016llx",
                     (unsigned long long)local_id);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    /* The channel takes a connection while one of its slots is free; the previous input's may
     * still be closing, so a refusal is retried briefly. */
    for (int tries = 0; connect(fd, (struct sockaddr *)&sa, len) != 0; tries++) {
        if ((errno != EAGAIN && errno != ECONNREFUSED) || tries > 1000)
            fail("cannot connect to the agent's same-node socket");
        usleep(1000);
    }
    struct timeval tv = {.tv_sec = DEADLINE_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* One answer: 1 with the frame in f (and a passed descriptor in *pfd, else -1), 0 at the
 * connection's end. */
static int receive(int fd, uint8_t *f, int *pfd)
{
    uint8_t big[LF_BYTES + 64];
    struct iovec iov = {big, sizeof(big)};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    ssize_t n;
    do
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        fail("the channel neither answered nor closed the connection in time");
    if (n < 0 && errno == ECONNRESET)
        n = 0;
    if (n < 0)
        fail("recvmsg");
    *pfd = -1;
    int fds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int got;
                memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (fds++ == 0)
                    *pfd = got;
                else
                    close(got);
            }
        }
    if (fds > 1)
        fail("the channel passed more than one descriptor with one answer");
    if (n == 0) {
        if (*pfd >= 0)
            fail("a descriptor came with the connection's end");
        return 0;
    }
    if (n != LF_BYTES || (mh.msg_flags & MSG_TRUNC))
        fail("an answer is not one 280-byte frame");
    memcpy(f, big, LF_BYTES);
    return 1;
}

static void expect_head(const uint8_t *f, int type, int status)
{
    if (get(f, 4) != LF_MAGIC || f[4] != type || f[5] != status || f[6] != 0 || f[7] != 0)
        fail("an answer's head differs from the model's");
}

static void expect_zero(const uint8_t *f, size_t from)
{
    for (size_t i = from; i < LF_BYTES; i++)
        if (f[i] != 0)
            fail("an answer carries bytes where the format says nothing");
}

/* ---- the model ------------------------------------------------------------------------------ */

/* Sends message m (len bytes) on fd and checks the answer; 0 when the connection must have
 * ended (and did), 1 when it goes on. */
static int one_message(int fd, uint8_t *m, size_t len)
{
    int valid =
        len == LF_BYTES && get(m, 4) == LF_MAGIC &&
        (m[4] == HELLO_Q || m[4] == CHAL_Q || m[4] == REG_Q || m[4] == VREG_Q || m[4] == LIFE_Q);
    if (valid && (m[4] == REG_Q || m[4] == VREG_Q)) {
        uint64_t key = get(m + 8, 8);
        if (key == 0 || key == 1) {
            uint64_t base = (uintptr_t)(key == 0 ? a_mem : b_mem);
            put(m + 8, key == 0 ? key_a : key_b, 8);
            put(m + 16, base + get(m + 16, 8), 8);
        }
    }
    ssize_t n = send(fd, m, len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        if (valid)
            fail("the channel closed the connection after valid frames only");
        return 0;
    }
    if (n != (ssize_t)len)
        fail("send");
    uint8_t f[LF_BYTES];
    int pfd;
    int got = receive(fd, f, &pfd);
    if (!valid) {
        if (got)
            fail("the channel answered a frame it must refuse");
        return 0;
    }
    if (!got)
        fail("the channel closed the connection after a valid frame");
    if (m[4] == HELLO_Q) {
        expect_head(f, HELLO_A, LS_OK);
        if (get(f + 8, 8) != instance || strcmp((const char *)f + 16, AGENT_NAME) != 0)
            fail("HELLO_A names another instance or agent");
        expect_zero(f, 16 + sizeof(AGENT_NAME));
    } else if (m[4] == LIFE_Q) {
        expect_head(f, LIFE_A, LS_OK);
        expect_zero(f, 8);
        struct stat st;
        int seals = pfd >= 0 ? fcntl(pfd, F_GET_SEALS) : -1;
        if (pfd < 0 || fstat(pfd, &st) != 0 || st.st_size != 4096 || seals < 0 ||
            !(seals & F_SEAL_SHRINK))
            fail("LIFE_A passed no sealed 4096-byte memfd");
        const uint32_t *w = mmap(NULL, 4096, PROT_READ, MAP_SHARED, pfd, 0);
        if (w == MAP_FAILED)
            fail("the life page does not map");
        uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if ((v & 0x3fffffffu) == 0 || (v & 0x40000000u))
            fail("the life page's lock names no live owner");
        munmap((void *)w, 4096);
        close(pfd);
    } else if (m[4] == VREG_Q) {
        /* The agent registered no VRAM: every claim, A's and B's DRAM keys included, is
         * refused and nothing is exported or passed. */
        expect_head(f, VREG_A, LS_NO_REGION);
        if (pfd >= 0)
            fail("VREG_A passed a descriptor for memory never registered as VRAM");
        expect_zero(f, 8);
    } else if (m[4] == CHAL_Q) {
        expect_head(f, CHAL_A, LS_OK);
        const uint8_t *word = (const uint8_t *)(uintptr_t)get(f + 8, 8);
        if (word == NULL || memcmp(word, m + 8, 16) != 0)
            fail("CHAL_A's word does not hold the nonce");
        expect_zero(f, 16);
    } else {
        uint64_t key = get(m + 8, 8), addr = get(m + 16, 8), rlen = get(m + 24, 8);
        int want_fd = m[32] == 1;
        int is_a = key == key_a && addr == (uintptr_t)a_mem && rlen == REGION;
        int is_b = key == key_b && addr == (uintptr_t)b_mem && rlen == REGION;
        int status = !is_a && !is_b ? LS_NO_REGION : want_fd && is_a ? LS_NO_MEMFD : LS_OK;
        expect_head(f, REG_A, status);
        if ((pfd >= 0) != (status == LS_OK && want_fd))
            fail("a descriptor passed without want_fd and LS_OK, or missing with them");
        uint64_t off = get(f + 8, 8), size = get(f + 16, 8);
        if (pfd >= 0) {
            struct stat st;
            if (fstat(pfd, &st) != 0 || (uint64_t)st.st_size != size || off > size ||
                size - off < REGION)
                fail("REG_A's offset and size do not fit the descriptor passed");
            uint8_t *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, pfd, 0);
            if (map == MAP_FAILED)
                fail("the descriptor passed does not map");
            if (memcmp(map + off, b_mem, REGION) != 0)
                fail("the descriptor passed does not hold region B at the answered offset");
            munmap(map, (size_t)size);
            close(pfd);
        } else if (off != 0 || size != 0) {
            fail("REG_A carries an offset or size without a descriptor");
        }
        expect_zero(f, 24);
    }
    return 1;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static void destroy_agent(void)
{
    struct ixl_reg_desc d[2] = {{(uintptr_t)a_mem, REGION, 0, NULL, 0},
                                {(uintptr_t)b_mem, REGION, 0, NULL, 0}};
    if (ixl_mem_deregister(agent, IXL_MEM_DRAM, d, 2, NULL) != IXL_OK ||
        ixl_mem_free(agent, b_mem) != IXL_OK)
        fail("cannot release the regions");
    ixl_agent_destroy(agent);
    agent = NULL;
    free(a_mem);
}

static void learn_md(void)
{
    void *blob;
    size_t len;
    if (ixl_md_get(agent, NULL, &blob, &len) != IXL_OK)
        fail("ixl_md_get");
    struct ixl_md_decoded md;
    char why[256];
    if (ixl_md_decode(blob, len, &md, why, sizeof(why)) != IXL_OK)
        fail("the agent's own metadata does not decode");
    int net = -1;
    for (size_t i = 0; i < md.n_backends; i++) {
        const struct ixl_md_backend *b = &md.backends[i];
        if (b->name_len == 3 && memcmp(b->name, "NET", 3) == 0 && b->conn_len >= 56) {
            net = (int)i;
            instance = get(b->conn + 8, 8); /* net_engine.c build_conn_info() */
            local_id = b->conn[44] & 1 ? get(b->conn + 45, 8) : 0;
        }
    }
    for (size_t i = 0; i < md.n_regions; i++) {
        const struct ixl_md_region *g = &md.regions[i];
        if ((int)g->backend != net || g->pub_len < 12)
            continue;
        if (g->addr == (uintptr_t)a_mem)
            key_a = get(g->pub + 4, 8); /* net_register_mem(): u32 magic, u64 key, ... */
        else if (g->addr == (uintptr_t)b_mem)
            key_b = get(g->pub + 4, 8);
    }
    ixl_md_decoded_free(&md);
    ixl_free(blob);
    if (net < 0 || local_id == 0 || key_a == 0 || key_b == 0 || key_a == key_b)
        fail("NET's same-node socket, instance or keys are missing from the metadata");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (agent != NULL)
        return 0;
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    if (ixl_agent_create(AGENT_NAME, &p, &agent) != IXL_OK)
        fail("cannot create the agent");
    const struct ixl_kv kv[] = {{"listen_addr", "127.0.0.1"},
                                {"addrs", "127.0.0.1"},
                                {"local_paths", "1"},
                                {"copy_threads", "1"},
                                {"timeout_ms", "5000"}};
    struct ixl_backend *net = NULL;
    if (ixl_backend_create(agent, "NET", kv, sizeof(kv) / sizeof(kv[0]), &net) != IXL_OK) {
        fprintf(stderr, "fuzz_net_local: %s\n", ixl_agent_last_error(agent));
        fail("cannot create the NET backend");
    }
    a_mem = malloc(REGION);
    void *b = NULL;
    if (a_mem == NULL || ixl_mem_alloc(agent, IXL_MEM_DRAM, REGION, net, &b) != IXL_OK)
        fail("cannot allocate the regions");
    b_mem = b;
    for (size_t i = 0; i < REGION; i++) {
        a_mem[i] = (uint8_t)(i * 7u + 1u);
        b_mem[i] = (uint8_t)(i * 13u + 5u);
    }
    struct ixl_reg_desc d[2] = {{(uintptr_t)a_mem, REGION, 0, NULL, 0},
                                {(uintptr_t)b_mem, REGION, 0, NULL, 0}};
    if (ixl_mem_register(agent, IXL_MEM_DRAM, d, 2, NULL) != IXL_OK)
        fail("cannot register the regions");
    learn_md();
    atexit(destroy_agent);
    return 0;
}

/* ---- one input ------------------------------------------------------------------------------ */

/* Waits until the channel closed its end of fd (it reads end-of-file after our shutdown) and
 * every descriptor it duplicated is gone. */
static void settle(int fd, int fds_before)
{
    shutdown(fd, SHUT_WR);
    uint8_t f[LF_BYTES];
    int pfd;
    if (receive(fd, f, &pfd))
        fail("the channel answered after the connection's end");
    close(fd);
    for (int i = 0; count_fds() != fds_before; i++) {
        if (i > DEADLINE_MS)
            fail("descriptors are left over after the connection ended");
        usleep(1000);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (agent == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    int fds_before = count_fds();
    int fd = dial();
    size_t at = 0;
    int open_conn = 1;
    while (open_conn && at + 2 <= size) {
        size_t len = (size_t)get(data + at, 2);
        at += 2;
        if (len > MSG_MAX)
            len = MSG_MAX;
        if (len > size - at)
            len = size - at;
        uint8_t m[MSG_MAX];
        memcpy(m, data + at, len);
        at += len;
        open_conn = one_message(fd, m, len);
    }
    if (open_conn) {
        settle(fd, fds_before);
    } else {
        close(fd);
        for (int i = 0; count_fds() != fds_before; i++) {
            if (i > DEADLINE_MS)
                fail("descriptors are left over after the channel closed a connection");
            usleep(1000);
        }
    }
    /* The channel still serves: a fresh connection's HELLO_Q is answered. */
    fd = dial();
    uint8_t hello[LF_BYTES] = {0};
    put(hello, LF_MAGIC, 4);
    hello[4] = HELLO_Q;
    if (!one_message(fd, hello, sizeof(hello)))
        fail("a fresh HELLO_Q went unanswered");
    settle(fd, fds_before);
    return 0;
}

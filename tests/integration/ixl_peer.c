/*
 * ixl_peer - an agent in its own process, driven line by line over stdin/stdout, for the
 * cross-process tests of the NET backend (test_net).
 *
 *   ixl_peer NAME [KEY=VALUE...]
 *
 * creates agent NAME with a NET backend taking the given options (agent.listen=PORT and
 * agent.etcd=ENDPOINTS set the agent's listener and etcd instead), prints "ready NAME PID" and
 * answers one command per line. Every answer is one line, "ok ..." or "err STATUS message" (or
 * "bad ..." for a failed data check); `notifs` adds one line per notification. It exits when
 * stdin closes or on `exit`, releasing everything, so a leak checker sees a clean process.
 *
 *   alloc ID SIZE shm|heap|vram|vmm|vmmnox
 *                                  buffer ID (0..127), zeroed and registered: shm from
 *                                  ixl_mem_alloc, heap other memory (anonymous mmap); device
 *                                  memory registered as VRAM (GPU 0): vram from
 *                                  ixl_device_alloc (cuMemAlloc), vmm from cuMemCreate with a
 *                                  POSIX-fd handle type, vmmnox without one (the library
 *                                  IXL_CUDA_LIBRARY names); fill/poison/check reach device
 *                                  memory through ixl_device_copy; -> ok ADDR SIZE
 *   free ID                        deregisters and frees it
 *   md [PATH]                      the agent's metadata: -> ok HEX, or written to PATH
 *   dlist ID [NDESC [OFF LEN]]     serialized list of [OFF, OFF+LEN) of the buffer (default: all)
 *                                  in NDESC equal descriptors (default 1): -> ok HEX
 *   fill ID SEED [OFF LEN]         writes the pattern of SEED (see net_common.h)
 *   poison ID BYTE [OFF LEN]       writes BYTE
 *   check ID SEED [OFF LEN]        -> ok, or bad OFFSET got X want Y (first mismatch)
 *   checkbyte ID BYTE [OFF LEN]    the same against BYTE
 *   notifs                         drains: -> ok N, then N lines "SENDER HEX" ("-": empty)
 *   waitnotif MS [ID SEED OFF LEN] waits at most MS ms for a notification and, the moment it is
 *                                  seen, checks the data (notifications come after the data):
 *                                  -> ok SENDER HEX, bad ..., or err timeout
 *   load HEX                       loads another agent's metadata: -> ok NAME
 *   send REMOTE HEX                ixl_notif_send
 *   xfer read|write REMOTE ID LOFF DLIST_HEX [NOTIF_HEX]
 *                                  a request as initiator: the remote list as given, the local
 *                                  side contiguous from offset LOFF of buffer ID, descriptor
 *                                  lengths pairwise equal; waits for it: -> ok PATH
 *   port                           the listener's port: -> ok PORT
 *   mdsend HOST|etcd PORT [LABEL ID]  ixl_md_send to a listener or etcd; with LABEL, only
 *                                  buffer ID's region under that label
 *   mdfetch NAME HOST|etcd PORT [LABEL]  ixl_md_fetch (returns at once)
 *   mdwait NAME MS                 waits until NAME's metadata is loaded: -> ok, err timeout
 *   mdinval [HOST|etcd PORT]       ixl_md_invalidate_local (no argument: everywhere)
 *   has NAME                       ixl_remote_check: -> ok, or err
 *   exit
 *
 * Numbers are decimal or 0x-prefixed hex.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include <ixl/ixl.h>

#include "../../src/device/cuda_api.h"
#include "net_common.h"

#define MAX_BUFS 128
#define MAX_ARGS 16
#define MAX_KV 32

struct buf {
    uint8_t *p;
    size_t len;
    int shm; /* from ixl_mem_alloc */
    int dev; /* 0 host, 1 ixl_device_alloc, 2 VMM (mapped len bytes, handle h) */
    unsigned long long h;
};

static enum ixl_mem buf_type(const struct buf *b)
{
    return b->dev ? IXL_MEM_VRAM : IXL_MEM_DRAM;
}

/* VMM memory from the driver IXL_CUDA_LIBRARY names (the one the device layer loaded). */
static struct {
    ixl_cuDevicePrimaryCtxRetain_fn *retain;
    ixl_cuCtxSetCurrent_fn *set;
    ixl_cuMemCreate_fn *create;
    ixl_cuMemRelease_fn *release;
    ixl_cuMemAddressReserve_fn *reserve;
    ixl_cuMemAddressFree_fn *unreserve;
    ixl_cuMemMap_fn *map;
    ixl_cuMemUnmap_fn *unmap;
    ixl_cuMemSetAccess_fn *access;
    ixl_cuMemGetAllocationGranularity_fn *gran;
} V;

static int vmm_load(void)
{
    if (V.gran != NULL)
        return 0;
    const char *path = getenv("IXL_CUDA_LIBRARY");
    void *lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW);
    if (lib == NULL)
        return -1;
    void *f[10];
    const char *n[10] = {"cuDevicePrimaryCtxRetain",
                         "cuCtxSetCurrent",
                         "cuMemCreate",
                         "cuMemRelease",
                         "cuMemAddressReserve",
                         "cuMemAddressFree",
                         "cuMemMap",
                         "cuMemUnmap",
                         "cuMemSetAccess",
                         "cuMemGetAllocationGranularity"};
    for (int i = 0; i < 10; i++)
        if ((f[i] = dlsym(lib, n[i])) == NULL)
            return -1;
    memcpy(&V.retain, &f[0], sizeof(void *));
    memcpy(&V.set, &f[1], sizeof(void *));
    memcpy(&V.create, &f[2], sizeof(void *));
    memcpy(&V.release, &f[3], sizeof(void *));
    memcpy(&V.reserve, &f[4], sizeof(void *));
    memcpy(&V.unreserve, &f[5], sizeof(void *));
    memcpy(&V.map, &f[6], sizeof(void *));
    memcpy(&V.unmap, &f[7], sizeof(void *));
    memcpy(&V.access, &f[8], sizeof(void *));
    memcpy(&V.gran, &f[9], sizeof(void *));
    return 0;
}

/* len bytes (rounded up to the granularity in *len) of VMM memory on GPU 0, exportable as a
 * POSIX fd when exportable; NULL on failure. */
static void *vmm_alloc(size_t *len, int exportable, unsigned long long *h)
{
    CUcontext ctx = NULL;
    if (vmm_load() != 0 || V.retain(&ctx, 0) != CUDA_SUCCESS || V.set(ctx) != CUDA_SUCCESS)
        return NULL;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes =
                                    exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                               : CU_MEM_HANDLE_TYPE_NONE,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g = 0;
    if (V.gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0)
        return NULL;
    *len = (*len + g - 1) / g * g;
    CUmemGenericAllocationHandle mh;
    CUdeviceptr va = 0;
    if (V.create(&mh, *len, &prop, 0) != CUDA_SUCCESS)
        return NULL;
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (V.reserve(&va, *len, 0, 0, 0) != CUDA_SUCCESS ||
        V.map(va, *len, 0, mh, 0) != CUDA_SUCCESS || V.access(va, *len, &acc, 1) != CUDA_SUCCESS) {
        V.release(mh);
        return NULL;
    }
    *h = mh;
    return (void *)(uintptr_t)va;
}

/* A host copy of [off, +len) of b (device memory through the device layer); free with
 * view_end, which first writes it back when put. */
static uint8_t *view(const struct buf *b, uint64_t off, uint64_t len)
{
    if (!b->dev)
        return b->p + off;
    uint8_t *h = malloc(len ? len : 1);
    if (h != NULL && ixl_device_copy(h, b->p + off, len) != IXL_OK) {
        free(h);
        h = NULL;
    }
    return h;
}

static int view_end(const struct buf *b, uint64_t off, uint64_t len, uint8_t *h, int put)
{
    if (!b->dev)
        return 0;
    int rc = put ? ixl_device_copy(b->p + off, h, len) : IXL_OK;
    free(h);
    return rc == IXL_OK ? 0 : -1;
}

struct pending {
    char *agent;
    uint8_t *msg;
    size_t len;
};

static struct ixl_agent *agent;
static struct buf bufs[MAX_BUFS];
static struct pending *pend;
static size_t n_pend, cap_pend;

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

static void reply_err(int rc)
{
    reply("err %s %s", ixl_strerror(rc), ixl_agent_last_error(agent));
}

/* Prints "ok PREFIX HEX" for n bytes without building the line twice. */
static void reply_hex(const char *prefix, const void *p, size_t n)
{
    char *hex = malloc(2 * n + 2);
    if (hex == NULL) {
        reply("err IXL_ERR_NO_MEMORY out of memory");
        return;
    }
    net_hex_encode(p, n, hex);
    if (n == 0)
        strcpy(hex, "-");
    reply("ok %s%s%s", prefix, *prefix ? " " : "", hex);
    free(hex);
}

static int num(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0)
        return -1;
    *out = v;
    return 0;
}

static struct buf *buf_arg(const char *s)
{
    uint64_t id;
    if (num(s, &id) != 0 || id >= MAX_BUFS || bufs[id].p == NULL)
        return NULL;
    return &bufs[id];
}

/* [OFF LEN] of argv[k..] inside b, default the whole buffer; -1 if malformed or outside. */
static int range_args(const struct buf *b, int argc, char **argv, int k, uint64_t *off,
                      uint64_t *len)
{
    *off = 0;
    *len = b->len;
    if (argc == k)
        return 0;
    if (argc != k + 2 || num(argv[k], off) != 0 || num(argv[k + 1], len) != 0 || *off > b->len ||
        *len > b->len - *off)
        return -1;
    return 0;
}

static void reg_desc(const struct buf *b, struct ixl_reg_desc *d)
{
    *d = (struct ixl_reg_desc){(uintptr_t)b->p, b->len, 0, NULL, 0};
}

static void dev_free(struct buf *b)
{
    if (b->dev == 1) {
        ixl_device_free(b->p);
    } else {
        V.unmap((CUdeviceptr)(uintptr_t)b->p, b->len);
        V.unreserve((CUdeviceptr)(uintptr_t)b->p, b->len);
        V.release(b->h);
    }
}

static void release_buf(struct buf *b)
{
    struct ixl_reg_desc d;
    reg_desc(b, &d);
    if (ixl_mem_deregister(agent, buf_type(b), &d, 1, NULL) != IXL_OK)
        fprintf(stderr, "ixl_peer: deregister: %s\n", ixl_agent_last_error(agent));
    if (b->dev) {
        dev_free(b);
    } else if (b->shm) {
        if (ixl_mem_free(agent, b->p) != IXL_OK)
            fprintf(stderr, "ixl_peer: ixl_mem_free: %s\n", ixl_agent_last_error(agent));
    } else {
        munmap(b->p, b->len);
    }
    b->p = NULL;
}

static void cmd_alloc(int argc, char **argv)
{
    uint64_t id, size;
    const char *k = argc == 4 ? argv[3] : "";
    int dev = strcmp(k, "vram") == 0 ? 1 : strncmp(k, "vmm", 3) == 0 ? 2 : 0;
    if (argc != 4 || num(argv[1], &id) != 0 || id >= MAX_BUFS || num(argv[2], &size) != 0 ||
        size == 0 ||
        (strcmp(k, "shm") != 0 && strcmp(k, "heap") != 0 && strcmp(k, "vram") != 0 &&
         strcmp(k, "vmm") != 0 && strcmp(k, "vmmnox") != 0)) {
        reply("err IXL_ERR_INVALID_ARG usage: alloc ID SIZE shm|heap|vram|vmm|vmmnox");
        return;
    }
    struct buf *b = &bufs[id];
    if (b->p != NULL)
        release_buf(b);
    b->shm = strcmp(argv[3], "shm") == 0;
    b->dev = dev;
    b->len = (size_t)size;
    void *p = NULL;
    if (dev == 1) {
        int rc = ixl_device_alloc(0, b->len, &p);
        if (rc != IXL_OK) {
            reply_err(rc);
            return;
        }
    } else if (dev == 2) {
        p = vmm_alloc(&b->len, strcmp(k, "vmm") == 0, &b->h);
        if (p == NULL) {
            reply("err IXL_ERR_BACKEND cannot make VMM memory of %zu bytes", b->len);
            return;
        }
    } else if (b->shm) {
        int rc = ixl_mem_alloc(agent, IXL_MEM_DRAM, b->len, NULL, &p);
        if (rc != IXL_OK) {
            reply_err(rc);
            return;
        }
    } else {
        p = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            reply("err IXL_ERR_NO_MEMORY cannot map %zu bytes: %s", b->len, strerror(errno));
            return;
        }
    }
    b->p = p; /* both kinds come zeroed from the kernel */
    struct ixl_reg_desc d;
    reg_desc(b, &d);
    int rc = ixl_mem_register(agent, buf_type(b), &d, 1, NULL);
    if (rc != IXL_OK) {
        reply_err(rc);
        if (b->dev)
            dev_free(b);
        else if (!b->shm)
            munmap(b->p, b->len);
        else if (ixl_mem_free(agent, b->p) != IXL_OK)
            fprintf(stderr, "ixl_peer: ixl_mem_free: %s\n", ixl_agent_last_error(agent));
        b->p = NULL;
        return;
    }
    reply("ok 0x%" PRIxPTR " %zu", (uintptr_t)b->p, b->len);
}

static void cmd_md(int argc, char **argv)
{
    void *blob;
    size_t len;
    int rc = ixl_md_get(agent, NULL, &blob, &len);
    if (rc != IXL_OK) {
        reply_err(rc);
        return;
    }
    if (argc == 2) {
        FILE *f = fopen(argv[1], "wb");
        int ok = f != NULL && fwrite(blob, 1, len, f) == len;
        if (f != NULL && fclose(f) != 0)
            ok = 0;
        if (ok)
            reply("ok");
        else
            reply("err IXL_ERR_SYSTEM cannot write %s: %s", argv[1], strerror(errno));
    } else {
        reply_hex("", blob, len);
    }
    ixl_free(blob);
}

static void cmd_dlist(int argc, char **argv)
{
    struct buf *b = argc >= 2 ? buf_arg(argv[1]) : NULL;
    uint64_t ndesc = 1, off, len;
    if (b == NULL || (argc >= 3 && (num(argv[2], &ndesc) != 0 || ndesc == 0)) ||
        range_args(b, argc, argv, argc >= 3 ? 3 : 2, &off, &len) != 0 || len % ndesc != 0 ||
        len == 0) {
        reply("err IXL_ERR_INVALID_ARG usage: dlist ID [NDESC [OFF LEN]] (LEN a multiple of "
              "NDESC)");
        return;
    }
    struct ixl_dlist *l;
    int rc = ixl_dlist_create(buf_type(b), 1, &l);
    if (rc != IXL_OK) {
        reply_err(rc);
        return;
    }
    uint64_t one = len / ndesc;
    struct ixl_run run = {(uintptr_t)b->p + off, one, one, ndesc, 0};
    void *ser = NULL;
    size_t ser_len = 0;
    rc = ixl_dlist_add_runs(l, &run, 1);
    if (rc == IXL_OK)
        rc = ixl_dlist_serialize(l, &ser, &ser_len);
    if (rc == IXL_OK)
        reply_hex("", ser, ser_len);
    else
        reply_err(rc);
    ixl_free(ser);
    ixl_dlist_destroy(l);
}

static void cmd_fill_poison(int argc, char **argv, int fill)
{
    struct buf *b = argc >= 3 ? buf_arg(argv[1]) : NULL;
    uint64_t v, off, len;
    if (b == NULL || num(argv[2], &v) != 0 || (!fill && v > 255) ||
        range_args(b, argc, argv, 3, &off, &len) != 0) {
        reply("err IXL_ERR_INVALID_ARG usage: %s ID %s [OFF LEN]", argv[0], fill ? "SEED" : "BYTE");
        return;
    }
    uint8_t *h = view(b, off, len);
    if (h == NULL) {
        reply("err IXL_ERR_BACKEND cannot reach buffer %s", argv[1]);
        return;
    }
    if (fill)
        net_pat_fill(h, (size_t)len, v, off);
    else
        memset(h, (int)v, (size_t)len);
    if (view_end(b, off, len, h, 1) != 0)
        reply("err IXL_ERR_BACKEND ixl_device_copy into buffer %s failed", argv[1]);
    else
        reply("ok");
}

/* Checks [off, off+len) of b against the pattern of seed (pattern) or the byte seed; prints
 * bad ... and returns -1 on a mismatch, without printing anything when it holds. */
static int check_range(const struct buf *b, uint64_t off, uint64_t len, uint64_t v, int pattern)
{
    uint8_t *h = view(b, off, len);
    if (h == NULL) {
        reply("bad %" PRIu64 " cannot read the device memory", off);
        return -1;
    }
    size_t bad = pattern ? net_pat_find_bad(h, (size_t)len, v, off)
                         : net_byte_find_bad(h, (size_t)len, (uint8_t)v);
    if (bad == len) {
        view_end(b, off, len, h, 0);
        return 0;
    }
    uint64_t at = off + bad;
    reply("bad %" PRIu64 " got 0x%02x want 0x%02x", at, h[bad],
          pattern ? net_pat_byte(v, at) : (unsigned)v);
    view_end(b, off, len, h, 0);
    return -1;
}

static void cmd_check(int argc, char **argv, int pattern)
{
    struct buf *b = argc >= 3 ? buf_arg(argv[1]) : NULL;
    uint64_t v, off, len;
    if (b == NULL || num(argv[2], &v) != 0 || (!pattern && v > 255) ||
        range_args(b, argc, argv, 3, &off, &len) != 0) {
        reply("err IXL_ERR_INVALID_ARG usage: %s ID %s [OFF LEN]", argv[0],
              pattern ? "SEED" : "BYTE");
        return;
    }
    if (check_range(b, off, len, v, pattern) == 0)
        reply("ok");
}

/* Moves the agent's notifications into the pending queue (in arrival order). */
static int drain(void)
{
    struct ixl_notif_batch *nb = NULL;
    int rc = ixl_notif_drain(agent, &nb);
    if (rc != IXL_OK || nb == NULL)
        return rc;
    for (size_t i = 0; i < nb->count; i++) {
        if (n_pend == cap_pend) {
            size_t cap = cap_pend ? 2 * cap_pend : 64;
            struct pending *p = realloc(pend, cap * sizeof(*p));
            if (p == NULL)
                break;
            pend = p;
            cap_pend = cap;
        }
        struct pending *p = &pend[n_pend];
        p->agent = strdup(nb->items[i].agent);
        p->msg = malloc(nb->items[i].len + 1);
        if (p->agent == NULL || p->msg == NULL) {
            free(p->agent);
            free(p->msg);
            break;
        }
        memcpy(p->msg, nb->items[i].msg, nb->items[i].len);
        p->len = nb->items[i].len;
        n_pend++;
    }
    ixl_free(nb);
    return IXL_OK;
}

static void cmd_notifs(void)
{
    int rc = drain();
    if (rc != IXL_OK) {
        reply_err(rc);
        return;
    }
    reply("ok %zu", n_pend);
    for (size_t i = 0; i < n_pend; i++) {
        char *hex = malloc(2 * pend[i].len + 2);
        if (hex != NULL) {
            net_hex_encode(pend[i].msg, pend[i].len, hex);
            printf("%s %s\n", pend[i].agent, pend[i].len ? hex : "-");
        } else {
            printf("%s ?\n", pend[i].agent);
        }
        free(hex);
        free(pend[i].agent);
        free(pend[i].msg);
    }
    n_pend = 0;
    fflush(stdout);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void cmd_waitnotif(int argc, char **argv)
{
    uint64_t ms, seed = 0, off = 0, len = 0;
    struct buf *b = NULL;
    if ((argc != 2 && argc != 6) || num(argv[1], &ms) != 0 ||
        (argc == 6 &&
         ((b = buf_arg(argv[2])) == NULL || num(argv[3], &seed) != 0 || num(argv[4], &off) != 0 ||
          num(argv[5], &len) != 0 || off > b->len || len > b->len - off))) {
        reply("err IXL_ERR_INVALID_ARG usage: waitnotif MS [ID SEED OFF LEN]");
        return;
    }
    uint64_t deadline = now_ms() + ms;
    while (n_pend == 0) {
        int rc = drain();
        if (rc != IXL_OK) {
            reply_err(rc);
            return;
        }
        if (n_pend > 0)
            break;
        if (now_ms() >= deadline) {
            reply("err timeout no notification within %" PRIu64 " ms", ms);
            return;
        }
        usleep(200);
    }
    struct pending first = pend[0];
    memmove(pend, pend + 1, (n_pend - 1) * sizeof(*pend));
    n_pend--;
    if (b == NULL || check_range(b, off, len, seed, 1) == 0) {
        char prefix[IXL_NAME_MAX];
        snprintf(prefix, sizeof(prefix), "%s", first.agent);
        reply_hex(prefix, first.msg, first.len);
    }
    free(first.agent);
    free(first.msg);
}

static void cmd_load(int argc, char **argv)
{
    size_t len;
    uint8_t *blob = argc == 2 ? net_hex_decode(argv[1], strlen(argv[1]), &len) : NULL;
    if (blob == NULL) {
        reply("err IXL_ERR_INVALID_ARG usage: load HEX");
        return;
    }
    char name[IXL_NAME_MAX];
    int rc = ixl_md_load(agent, blob, len, name, sizeof(name));
    free(blob);
    if (rc == IXL_OK)
        reply("ok %s", name);
    else
        reply_err(rc);
}

static void cmd_send(int argc, char **argv)
{
    size_t len;
    uint8_t *msg = argc == 3 ? net_hex_decode(argv[2], strlen(argv[2]), &len) : NULL;
    if (msg == NULL) {
        reply("err IXL_ERR_INVALID_ARG usage: send REMOTE HEX");
        return;
    }
    int rc = ixl_notif_send(agent, argv[1], msg, len, NULL);
    free(msg);
    if (rc == IXL_OK)
        reply("ok");
    else
        reply_err(rc);
}

static void cmd_xfer(int argc, char **argv)
{
    struct buf *b = argc >= 6 ? buf_arg(argv[3]) : NULL;
    uint64_t loff;
    size_t ser_len, notif_len = 0;
    uint8_t *ser = NULL, *notif = NULL;
    int op = argc >= 2 && strcmp(argv[1], "read") == 0    ? IXL_OP_READ
             : argc >= 2 && strcmp(argv[1], "write") == 0 ? IXL_OP_WRITE
                                                          : -1;
    if (op < 0 || b == NULL || argc > 7 || num(argv[4], &loff) != 0 || loff > b->len ||
        (ser = net_hex_decode(argv[5], strlen(argv[5]), &ser_len)) == NULL ||
        (argc == 7 && (notif = net_hex_decode(argv[6], strlen(argv[6]), &notif_len)) == NULL)) {
        free(ser);
        reply("err IXL_ERR_INVALID_ARG usage: xfer read|write REMOTE ID LOFF DLIST_HEX "
              "[NOTIF_HEX]");
        return;
    }
    struct ixl_dlist *remote = NULL, *local = NULL;
    struct ixl_xfer *x = NULL;
    int rc = ixl_dlist_deserialize(ser, ser_len, &remote);
    if (rc == IXL_OK)
        rc = ixl_dlist_create(buf_type(b), ixl_dlist_run_count(remote), &local);
    /* The local side mirrors the remote runs, laid end to end. */
    uint64_t pos = loff;
    for (size_t i = 0; rc == IXL_OK && i < ixl_dlist_run_count(remote); i++) {
        struct ixl_run r;
        rc = ixl_dlist_get_run(remote, i, &r);
        if (rc != IXL_OK)
            break;
        if (r.count > (b->len - pos) / r.len) {
            rc = IXL_ERR_TOO_LARGE;
            break;
        }
        struct ixl_run lr = {(uintptr_t)b->p + pos, r.len, r.len, r.count, 0};
        pos += r.len * r.count;
        rc = ixl_dlist_add_runs(local, &lr, 1);
    }
    struct ixl_xfer_params p = {0};
    if (argc == 7) {
        p.field_mask = IXL_XFER_F_NOTIF;
        p.notif = notif;
        p.notif_len = notif_len;
    }
    if (rc == IXL_OK)
        rc = ixl_xfer_create(agent, (enum ixl_op)op, local, remote, argv[2], &p, &x);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(x);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(x, 30000);
    }
    if (rc == IXL_OK) {
        struct ixl_xfer_info info = {.size = sizeof(info)};
        ixl_xfer_info(x, &info);
        reply("ok %s", info.path[0] ? info.path : "?");
    } else {
        reply_err(rc);
    }
    if (x != NULL && ixl_xfer_release(x) != IXL_OK) {
        /* A request that cannot be stopped stays; the process exits soon after anyway. */
    }
    ixl_dlist_destroy(local);
    ixl_dlist_destroy(remote);
    free(ser);
    free(notif);
}

static int peer_arg(int argc, char **argv, int k, struct ixl_peer *out, const struct ixl_peer **pp)
{
    uint64_t port = 0;
    if (argc <= k + 1 || num(argv[k + 1], &port) != 0 || port > 65535)
        return -1;
    out->addr = strcmp(argv[k], "etcd") == 0 ? NULL : argv[k];
    out->port = (uint16_t)port;
    *pp = out;
    return 0;
}

static void cmd_exchange(int argc, char **argv)
{
    const char *c = argv[0];
    struct ixl_peer peer;
    const struct ixl_peer *pp = NULL;
    int rc;
    if (strcmp(c, "port") == 0) {
        uint16_t port;
        rc = ixl_agent_listen_port(agent, &port);
        if (rc == IXL_OK)
            reply("ok %u", (unsigned)port);
        else
            reply_err(rc);
        return;
    }
    if (strcmp(c, "mdsend") == 0) {
        struct buf *b = argc == 5 ? buf_arg(argv[4]) : NULL;
        if ((argc != 3 && argc != 5) || peer_arg(argc, argv, 1, &peer, &pp) != 0 ||
            (argc == 5 && b == NULL)) {
            reply("err IXL_ERR_INVALID_ARG usage: mdsend HOST|etcd PORT [LABEL ID]");
            return;
        }
        struct ixl_md_params mp = {0};
        struct ixl_dlist *l = NULL;
        if (argc == 5) {
            struct ixl_desc d = {(uintptr_t)b->p, b->len, 0};
            if (ixl_dlist_create(IXL_MEM_DRAM, 1, &l) != IXL_OK ||
                ixl_dlist_add(l, &d, 1) != IXL_OK) {
                reply("err IXL_ERR_NO_MEMORY list");
                ixl_dlist_destroy(l);
                return;
            }
            mp.field_mask = IXL_MD_F_REGIONS | IXL_MD_F_LABEL;
            mp.regions = l;
            mp.label = argv[3];
        }
        rc = ixl_md_send(agent, pp, argc == 5 ? &mp : NULL);
        ixl_dlist_destroy(l);
    } else if (strcmp(c, "mdfetch") == 0) {
        if ((argc != 4 && argc != 5) || peer_arg(argc, argv, 2, &peer, &pp) != 0) {
            reply("err IXL_ERR_INVALID_ARG usage: mdfetch NAME HOST|etcd PORT [LABEL]");
            return;
        }
        rc = ixl_md_fetch(agent, argv[1], pp, argc == 5 ? argv[4] : NULL);
    } else if (strcmp(c, "mdwait") == 0) {
        uint64_t ms;
        if (argc != 3 || num(argv[2], &ms) != 0) {
            reply("err IXL_ERR_INVALID_ARG usage: mdwait NAME MS");
            return;
        }
        uint64_t deadline = now_ms() + ms;
        for (;;) {
            rc = ixl_remote_check(agent, argv[1], NULL);
            if (rc == IXL_OK || now_ms() >= deadline)
                break;
            struct timespec d = {0, 5000000};
            nanosleep(&d, NULL);
        }
        if (rc != IXL_OK) {
            reply("err timeout %s not loaded", argv[1]);
            return;
        }
    } else if (strcmp(c, "mdinval") == 0) {
        if (argc != 1 && (argc != 3 || peer_arg(argc, argv, 1, &peer, &pp) != 0)) {
            reply("err IXL_ERR_INVALID_ARG usage: mdinval [HOST|etcd PORT]");
            return;
        }
        rc = ixl_md_invalidate_local(agent, pp);
    } else { /* has */
        if (argc != 2) {
            reply("err IXL_ERR_INVALID_ARG usage: has NAME");
            return;
        }
        rc = ixl_remote_check(agent, argv[1], NULL);
    }
    if (rc == IXL_OK)
        reply("ok");
    else
        reply_err(rc);
}

/* Splits line in place at spaces. */
static int split(char *line, char **argv)
{
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t && argc < MAX_ARGS;
         t = strtok_r(NULL, " \t\r\n", &save))
        argv[argc++] = t;
    return argc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc - 2 > MAX_KV) {
        fprintf(stderr, "usage: ixl_peer NAME [KEY=VALUE...] (NET backend options)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct ixl_kv kv[MAX_KV];
    size_t n_kv = 0;
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq == NULL) {
            fprintf(stderr, "ixl_peer: option '%s' is not KEY=VALUE\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        if (strcmp(argv[i], "agent.listen") == 0) {
            ap.field_mask |= IXL_AGENT_F_LISTEN_PORT;
            ap.listen_port = (uint16_t)atoi(eq + 1);
        } else if (strcmp(argv[i], "agent.etcd") == 0) {
            ap.field_mask |= IXL_AGENT_F_ETCD;
            ap.etcd_endpoints = eq + 1;
        } else {
            kv[n_kv++] = (struct ixl_kv){argv[i], eq + 1};
        }
    }
    int rc = ixl_agent_create(argv[1], &ap, &agent);
    if (rc != IXL_OK) {
        printf("err %s cannot create agent '%s'\n", ixl_strerror(rc), argv[1]);
        return 1;
    }
    rc = ixl_backend_create(agent, "NET", kv, n_kv, NULL);
    if (rc != IXL_OK) {
        printf("err %s %s\n", ixl_strerror(rc), ixl_agent_last_error(agent));
        ixl_agent_destroy(agent);
        return 1;
    }
    reply("ready %s %d", argv[1], (int)getpid());

    char *line = NULL;
    size_t cap = 0;
    int done = 0;
    while (!done && getline(&line, &cap, stdin) >= 0) {
        char *av[MAX_ARGS];
        int ac = split(line, av);
        if (ac == 0)
            continue;
        const char *c = av[0];
        if (strcmp(c, "alloc") == 0)
            cmd_alloc(ac, av);
        else if (strcmp(c, "free") == 0) {
            struct buf *b = ac == 2 ? buf_arg(av[1]) : NULL;
            if (b != NULL) {
                release_buf(b);
                reply("ok");
            } else {
                reply("err IXL_ERR_INVALID_ARG usage: free ID");
            }
        } else if (strcmp(c, "md") == 0)
            cmd_md(ac, av);
        else if (strcmp(c, "dlist") == 0)
            cmd_dlist(ac, av);
        else if (strcmp(c, "fill") == 0)
            cmd_fill_poison(ac, av, 1);
        else if (strcmp(c, "poison") == 0)
            cmd_fill_poison(ac, av, 0);
        else if (strcmp(c, "check") == 0)
            cmd_check(ac, av, 1);
        else if (strcmp(c, "checkbyte") == 0)
            cmd_check(ac, av, 0);
        else if (strcmp(c, "notifs") == 0)
            cmd_notifs();
        else if (strcmp(c, "waitnotif") == 0)
            cmd_waitnotif(ac, av);
        else if (strcmp(c, "load") == 0)
            cmd_load(ac, av);
        else if (strcmp(c, "send") == 0)
            cmd_send(ac, av);
        else if (strcmp(c, "xfer") == 0)
            cmd_xfer(ac, av);
        else if (strcmp(c, "port") == 0 || strcmp(c, "mdsend") == 0 || strcmp(c, "mdfetch") == 0 ||
                 strcmp(c, "mdwait") == 0 || strcmp(c, "mdinval") == 0 || strcmp(c, "has") == 0)
            cmd_exchange(ac, av);
        else if (strcmp(c, "exit") == 0) {
            reply("ok");
            done = 1;
        } else
            reply("err IXL_ERR_INVALID_ARG unknown command '%s'", c);
    }
    free(line);
    for (int i = 0; i < MAX_BUFS; i++)
        if (bufs[i].p != NULL)
            release_buf(&bufs[i]);
    for (size_t i = 0; i < n_pend; i++) {
        free(pend[i].agent);
        free(pend[i].msg);
    }
    free(pend);
    ixl_agent_destroy(agent);
    return 0;
}

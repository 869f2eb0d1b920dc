/*
 * ixlbench's target role. It publishes its metadata in a file, then serves one initiator,
 * which drives it with control messages sent as ixl notifications (the initiator's own
 * metadata comes with its first message, so the target can answer):
 *
 *   hello SEQ PID BOOTID  + the initiator's metadata      -> ok SEQ PID BOOTID
 *   alloc SEQ ID ixl|heap NREGIONS REGION_LEN GAP         -> ok SEQ + (metadata, list)
 *       pool ID: NREGIONS regions, GAP bytes apart, each registered (and the whole span too
 *       when there are several, so one descriptor may cover them all); the answer carries the
 *       metadata of those regions and a list with one descriptor per region
 *   fill SEQ ID SEED OFF LEN STRIDE COUNT                 -> ok SEQ
 *       writes the pattern of SEED into COUNT ranges of LEN bytes at OFF + i * STRIDE
 *   check SEQ ID SEED OFF LEN STRIDE COUNT                -> ok SEQ | bad SEQ OFF GOT WANT
 *   notes SEQ  -> ok SEQ N + N lines "TAG NS": the notifications that were no command,
 *                 each with the CLOCK_MONOTONIC time the target took it (then forgotten)
 *   done SEQ   -> ok SEQ, and the target exits
 *
 * Any other message is such a "note" (the KV scenario's request notifications). The target
 * blocks in poll() on the agent's fd between messages (no spinning: on two cores a spinning
 * target steals the initiator's core).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ixlbench.h"

#define MAX_POOLS 16
#define MAX_REGIONS 4096

struct pool {
    uint8_t *base;
    size_t len;
    bool used, from_ixl, registered;
    struct ixl_reg_desc *regs;
    size_t n_regs;
};

struct note {
    char tag[64];
    uint64_t at_ns;
};

struct target {
    const struct ixb_opts *o;
    struct ixl_agent *agent;
    struct ixl_backend *be;
    struct pool pools[MAX_POOLS];
    char peer[IXL_NAME_MAX]; /* the initiator, once it said hello */
    long peer_pid;
    bool peer_local;
    struct note *notes;
    size_t n_notes, cap_notes;
    bool done;
};

volatile sig_atomic_t ixb_target_stop = 0;
int ixb_listen_port = -1;
const char *ixb_listen_addr = "127.0.0.1";
const char *ixb_etcd = NULL;
_Atomic int ixb_target_gone = 0;

static void reply(struct target *t, const char *to, const void *payload, size_t plen,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void reply(struct target *t, const char *to, const void *payload, size_t plen,
                  const char *fmt, ...)
{
    char line[512];
    va_list ap;
    size_t ll;
    uint8_t *msg;
    ixl_status st;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    ll = strlen(line);
    line[ll++] = '\n';
    msg = malloc(ll + plen);
    if (msg == NULL) {
        fprintf(stderr, "ixlbench target: out of memory for an answer\n");
        return;
    }
    memcpy(msg, line, ll);
    if (plen > 0)
        memcpy(msg + ll, payload, plen);
    st = ixl_notif_send(t->agent, to, msg, ll + plen, NULL);
    if (st != IXL_OK)
        fprintf(stderr, "ixlbench target: cannot answer %s: %s: %s\n", to, ixl_strerror(st),
                ixl_agent_last_error(t->agent));
    free(msg);
}

static void pool_free(struct target *t, struct pool *p)
{
    if (p->registered &&
        ixl_mem_deregister(t->agent, t->o->target_mem, p->regs, p->n_regs, NULL) != IXL_OK)
        fprintf(stderr, "ixlbench: deregistering the target pool: %s\n",
                ixl_agent_last_error(t->agent));
    if (p->from_ixl) {
        if (ixl_mem_free(t->agent, p->base) != IXL_OK)
            fprintf(stderr, "ixlbench: ixl_mem_free: %s\n", ixl_agent_last_error(t->agent));
    } else {
        ixb_mem_release(t->o->target_mem, p->base, p->len);
    }
    free(p->regs);
    memset(p, 0, sizeof(*p));
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;

    errno = 0;
    *v = strtoull(s, &end, 0);
    return errno != 0 || end == s || *end != '\0' || *s == '-' ? -1 : 0;
}

static void cmd_alloc(struct target *t, const char *from, const struct ixb_msg *m)
{
    const char *seq = m->argv[1];
    uint64_t id, nreg, rlen, gap, stride;
    struct pool *p;
    struct ixl_dlist *dl = NULL, *cover = NULL;
    void *md = NULL, *dls = NULL, *payload = NULL;
    size_t md_len = 0, dl_len = 0, plen = 0;
    ixl_status st;

    if (m->argc != 7 || parse_u64(m->argv[2], &id) || parse_u64(m->argv[4], &nreg) ||
        parse_u64(m->argv[5], &rlen) || parse_u64(m->argv[6], &gap) || id >= MAX_POOLS ||
        nreg == 0 || nreg > MAX_REGIONS || rlen == 0 || gap > (1u << 30) ||
        rlen > (SIZE_MAX / 4) / nreg) {
        reply(t, from, NULL, 0, "err %s bad alloc arguments", seq);
        return;
    }
    p = &t->pools[id];
    if (p->used) {
        reply(t, from, NULL, 0, "err %s pool %" PRIu64 " exists", seq, id);
        return;
    }
    stride = rlen + gap;
    p->len = (size_t)(nreg * stride - gap);
    if (t->o->target_mem == IXL_MEM_VRAM) {
        /* Device memory (ixl_device_alloc), touched only through ixl_device_copy. */
        p->base = ixb_mem_alloc(IXL_MEM_VRAM, t->o->target_dev, p->len);
        if (p->base == NULL) {
            reply(t, from, NULL, 0, "err %s no device memory for %zu bytes", seq, p->len);
            memset(p, 0, sizeof(*p));
            return;
        }
    } else if (strcmp(m->argv[3], "ixl") == 0) {
        st = ixl_mem_alloc(t->agent, t->o->target_mem, p->len, t->be, (void **)&p->base);
        if (st != IXL_OK) {
            reply(t, from, NULL, 0, "err %s ixl_mem_alloc(%zu): %s: %s", seq, p->len,
                  ixl_strerror(st), ixl_agent_last_error(t->agent));
            memset(p, 0, sizeof(*p));
            return;
        }
        p->from_ixl = true;
    } else {
        p->base = ixb_map(p->len);
        if (p->base == NULL) {
            reply(t, from, NULL, 0, "err %s out of memory for %zu bytes", seq, p->len);
            memset(p, 0, sizeof(*p));
            return;
        }
    }
    p->used = true;
    if (t->o->target_mem != IXL_MEM_VRAM)
        memset(p->base, 0, p->len); /* every page touched before anything is timed */
    p->n_regs = nreg > 1 ? nreg + 1 : 1;
    p->regs = calloc(p->n_regs, sizeof(*p->regs));
    if (p->regs == NULL) {
        reply(t, from, NULL, 0, "err %s out of memory", seq);
        pool_free(t, p);
        return;
    }
    uint64_t dev = ixb_target_dev(t->o);
    for (uint64_t r = 0; r < nreg; r++)
        p->regs[r] =
            (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->base + r * stride, rlen, dev, NULL, 0};
    if (nreg > 1)
        p->regs[nreg] = (struct ixl_reg_desc){(uint64_t)(uintptr_t)p->base, p->len, dev, NULL, 0};
    st = ixl_mem_register(t->agent, t->o->target_mem, p->regs, p->n_regs, NULL);
    if (st != IXL_OK) {
        reply(t, from, NULL, 0, "err %s ixl_mem_register: %s: %s", seq, ixl_strerror(st),
              ixl_agent_last_error(t->agent));
        pool_free(t, p);
        return;
    }
    p->registered = true;
    /* The list the initiator builds on: one descriptor per region. The metadata covers every
     * registered region of the pool (the whole span included). */
    st = ixl_dlist_create(t->o->target_mem, nreg, &dl);
    if (st == IXL_OK)
        st = ixl_dlist_create(t->o->target_mem, p->n_regs, &cover);
    for (size_t r = 0; st == IXL_OK && r < p->n_regs; r++) {
        struct ixl_desc d = {p->regs[r].addr, p->regs[r].len, dev};
        if (r < nreg)
            st = ixl_dlist_add(dl, &d, 1);
        if (st == IXL_OK)
            st = ixl_dlist_add(cover, &d, 1);
    }
    if (st == IXL_OK)
        st = ixl_dlist_serialize(dl, &dls, &dl_len);
    if (st == IXL_OK) {
        struct ixl_md_params mp = {
            .field_mask = IXL_MD_F_REGIONS | IXL_MD_F_CONN_INFO,
            .regions = cover,
            .conn_info = false,
        };
        st = ixl_md_get(t->agent, &mp, &md, &md_len);
    }
    if (st != IXL_OK) {
        reply(t, from, NULL, 0, "err %s metadata of pool %" PRIu64 ": %s: %s", seq, id,
              ixl_strerror(st), ixl_agent_last_error(t->agent));
        pool_free(t, p);
    } else if (ixb_pack2(md, md_len, dls, dl_len, &payload, &plen) != 0) {
        reply(t, from, NULL, 0, "err %s out of memory", seq);
        pool_free(t, p);
    } else {
        reply(t, from, payload, plen, "ok %s", seq);
    }
    free(payload);
    ixl_free(md);
    ixl_free(dls);
    ixl_dlist_destroy(dl);
    ixl_dlist_destroy(cover);
}

/* fill/check: COUNT ranges of LEN bytes at OFF + i * STRIDE of pool ID. */
static void cmd_range(struct target *t, const char *from, const struct ixb_msg *m, bool check)
{
    const char *seq = m->argv[1];
    uint64_t id, seed, off, len, stride, count;
    struct pool *p;

    if (m->argc != 8 || parse_u64(m->argv[2], &id) || parse_u64(m->argv[3], &seed) ||
        parse_u64(m->argv[4], &off) || parse_u64(m->argv[5], &len) ||
        parse_u64(m->argv[6], &stride) || parse_u64(m->argv[7], &count) || id >= MAX_POOLS ||
        !t->pools[id].used) {
        reply(t, from, NULL, 0, "err %s bad %s arguments", seq, m->argv[0]);
        return;
    }
    p = &t->pools[id];
    enum ixl_mem type = t->o->target_mem;
    size_t sl = len < (8u << 20) ? (size_t)len : (8u << 20);
    uint8_t *scratch = type == IXL_MEM_VRAM ? ixb_map(sl ? sl : 1) : NULL;
    if (type == IXL_MEM_VRAM && scratch == NULL) {
        reply(t, from, NULL, 0, "err %s out of memory", seq);
        return;
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t o = off + i * stride;
        if (o > p->len || len > p->len - o) {
            reply(t, from, NULL, 0, "err %s range %" PRIu64 "+%" PRIu64 " outside pool %" PRIu64,
                  seq, o, len, id);
            goto unmap_scratch;
        }
        if (!check) {
            if (ixb_mem_put(type, p->base, o, len, seed, false, scratch, sl) != 0) {
                reply(t, from, NULL, 0, "err %s cannot fill pool %" PRIu64, seq, id);
                goto unmap_scratch;
            }
            continue;
        }
        uint8_t got = 0;
        int64_t bad = ixb_mem_verify(type, p->base, o, len, seed, scratch, sl, &got);
        if (bad == -2) {
            reply(t, from, NULL, 0, "err %s cannot read pool %" PRIu64, seq, id);
            goto unmap_scratch;
        }
        if (bad >= 0) {
            uint64_t at = o + (uint64_t)bad;
            reply(t, from, NULL, 0, "bad %s %" PRIu64 " %u %u", seq, at, got,
                  ixb_pattern_byte(seed, at));
            goto unmap_scratch;
        }
    }
    reply(t, from, NULL, 0, "ok %s", seq);
unmap_scratch:
    ixb_unmap(scratch, sl ? sl : 1);
}

static void cmd_notes(struct target *t, const char *from, const struct ixb_msg *m)
{
    size_t cap = t->n_notes * 96 + 1, len = 0;
    char *buf = malloc(cap);

    if (buf == NULL) {
        reply(t, from, NULL, 0, "err %s out of memory", m->argv[1]);
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < t->n_notes; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s %" PRIu64 "\n", t->notes[i].tag,
                                t->notes[i].at_ns);
    reply(t, from, buf, len, "ok %s %zu", m->argv[1], t->n_notes);
    t->n_notes = 0;
    free(buf);
}

static void note(struct target *t, const void *msg, size_t len, uint64_t at)
{
    if (t->n_notes == t->cap_notes) {
        size_t cap = t->cap_notes ? t->cap_notes * 2 : 64;
        struct note *n = realloc(t->notes, cap * sizeof(*n));
        if (n == NULL)
            return;
        t->notes = n;
        t->cap_notes = cap;
    }
    struct note *n = &t->notes[t->n_notes++];
    size_t l = len < sizeof(n->tag) - 1 ? len : sizeof(n->tag) - 1;
    memcpy(n->tag, msg, l);
    n->tag[l] = '\0';
    for (size_t i = 0; i < l; i++)
        if (n->tag[i] == ' ' || n->tag[i] == '\n' || n->tag[i] == '\0')
            n->tag[i] = '_';
    n->at_ns = at;
}

static bool is_command(const char *w)
{
    static const char *const cmds[] = {"hello", "alloc", "fill", "check", "notes", "done"};

    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(w, cmds[i]) == 0)
            return true;
    return false;
}

static void handle(struct target *t, const struct ixl_notif *n, uint64_t at)
{
    struct ixb_msg m;

    if (ixb_msg_parse(n->msg, n->len, &m) != 0 || !is_command(m.argv[0])) {
        note(t, n->msg, n->len, at);
        return;
    }
    if (m.argc < 2) {
        fprintf(stderr, "ixlbench target: '%s' from %s without a sequence number\n", m.argv[0],
                n->agent);
        return;
    }
    if (strcmp(m.argv[0], "hello") == 0) {
        char name[IXL_NAME_MAX];
        ixl_status st = ixl_md_load(t->agent, m.payload, m.payload_len, name, sizeof(name));
        if (st != IXL_OK) {
            fprintf(stderr, "ixlbench target: cannot load the metadata of %s: %s: %s\n", n->agent,
                    ixl_strerror(st), ixl_agent_last_error(t->agent));
            return;
        }
        snprintf(t->peer, sizeof(t->peer), "%s", name);
        t->peer_pid = m.argc > 2 ? strtol(m.argv[2], NULL, 10) : 0;
        t->peer_local = m.argc > 3 && strcmp(m.argv[3], ixb_boot_id()) == 0;
        reply(t, name, NULL, 0, "ok %s %ld %s", m.argv[1], (long)getpid(), ixb_boot_id());
        return;
    }
    if (t->peer[0] == '\0' || strcmp(n->agent, t->peer) != 0) {
        fprintf(stderr, "ixlbench target: '%s' from %s, which never said hello: ignored\n",
                m.argv[0], n->agent);
        return;
    }
    if (strcmp(m.argv[0], "alloc") == 0) {
        cmd_alloc(t, n->agent, &m);
    } else if (strcmp(m.argv[0], "fill") == 0) {
        cmd_range(t, n->agent, &m, false);
    } else if (strcmp(m.argv[0], "check") == 0) {
        cmd_range(t, n->agent, &m, true);
    } else if (strcmp(m.argv[0], "notes") == 0) {
        cmd_notes(t, n->agent, &m);
    } else if (strcmp(m.argv[0], "done") == 0) {
        reply(t, n->agent, NULL, 0, "ok %s", m.argv[1]);
        t->done = true;
    }
}

static int serve(struct target *t)
{
    int fd = -1;
    uint64_t last = ixb_now_ns();

    if (ixl_agent_fd(t->agent, &fd) != IXL_OK) {
        fprintf(stderr, "ixlbench target: no agent fd\n");
        return 1;
    }
    while (!t->done) {
        struct pollfd p = {fd, POLLIN, 0};
        struct ixl_notif_batch *b = NULL;
        int n = poll(&p, 1, 1000);

        if (ixb_target_stop) {
            fprintf(stderr, "ixlbench target: stopped by a signal\n");
            return 1;
        }
        if (n < 0 && errno != EINTR) {
            perror("ixlbench target: poll");
            return 1;
        }
        if (n > 0)
            ixl_agent_progress(t->agent);
        if (ixl_notif_drain(t->agent, &b) == IXL_OK && b != NULL) {
            uint64_t at = ixb_now_ns();
            for (size_t i = 0; i < b->count && !t->done; i++)
                handle(t, &b->items[i], at);
            ixl_free(b);
            last = ixb_now_ns();
            continue;
        }
        if (t->peer_local && t->peer_pid > 0 && kill((pid_t)t->peer_pid, 0) != 0 &&
            errno == ESRCH) {
            fprintf(stderr, "ixlbench target: the initiator (pid %ld) exited without 'done'\n",
                    t->peer_pid);
            return 1;
        }
        if (t->o->idle_timeout_s > 0 &&
            ixb_now_ns() - last > (uint64_t)t->o->idle_timeout_s * 1000000000ull) {
            fprintf(stderr, "ixlbench target: nothing from an initiator for %u s: exiting\n",
                    t->o->idle_timeout_s);
            return 1;
        }
    }
    return 0;
}

int ixb_target_run(const struct ixb_opts *o, const char *md_file, const char *name,
                   const struct ixl_kv *opts, size_t n_opts)
{
    struct target t;
    void *md = NULL;
    size_t md_len = 0;
    ixl_status st;
    int rc;

    memset(&t, 0, sizeof(t));
    t.o = o;
    if (o->target_mem != IXL_MEM_DRAM && o->target_mem != IXL_MEM_VRAM) {
        fprintf(stderr, "ixlbench target: memory type %s: ixlbench allocates DRAM and VRAM only\n",
                ixl_mem_name(o->target_mem));
        return 1;
    }
    rc = ixb_agent_make(name, o->backend, opts, n_opts, &t.agent, &t.be);
    if (rc != 0)
        return rc;
    st = ixl_md_get(t.agent, NULL, &md, &md_len);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench target: ixl_md_get: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(t.agent));
        ixl_agent_destroy(t.agent);
        return 1;
    }
    rc = md_file == NULL || ixb_md_write(md_file, name, md, md_len) == 0 ? 0 : 1;
    ixl_free(md);
    uint16_t port = 0;
    if (rc == 0 && o->listen_port >= 0 && o->role == IXB_ROLE_TARGET) {
        ixl_agent_listen_port(t.agent, &port);
        /* the line scripts read to find the port */
        printf("ixlbench target: listening on port %u\n", (unsigned)port);
        fflush(stdout);
    }
    if (rc == 0 && o->etcd != NULL && o->role == IXB_ROLE_TARGET) {
        st = ixl_md_send(t.agent, NULL, NULL);
        if (st != IXL_OK) {
            fprintf(stderr, "ixlbench target: publishing to etcd: %s: %s\n", ixl_strerror(st),
                    ixl_agent_last_error(t.agent));
            rc = 1;
        }
    }
    if (rc == 0) {
        if (!o->quiet && o->role == IXB_ROLE_TARGET)
            fprintf(stderr, "ixlbench target: agent %s (pid %ld) waiting; metadata%s%s%s\n", name,
                    (long)getpid(), md_file ? " in " : "", md_file ? md_file : "",
                    o->etcd               ? " in etcd"
                    : o->listen_port >= 0 ? " at the listener"
                                          : "");
        rc = serve(&t);
        if (o->etcd != NULL && o->role == IXB_ROLE_TARGET)
            ixl_md_invalidate_local(t.agent, NULL);
        if (md_file != NULL)
            unlink(md_file);
    }
    for (int i = 0; i < MAX_POOLS; i++)
        if (t.pools[i].used)
            pool_free(&t, &t.pools[i]);
    free(t.notes);
    ixl_agent_destroy(t.agent);
    return rc;
}

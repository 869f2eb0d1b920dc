/*
 * ixlbench's device mode (--initiator-mem VRAM and/or --target-mem VRAM): one process, one
 * agent, no target role and no control channel, as in storage mode. The agent registers both
 * pools itself (the initiator's in --initiator-mem on GPU --initiator-dev, the target's in
 * --target-mem on GPU --target-dev) and every request's remote agent is its own name: NET
 * moves VRAM within an agent (plugins/net/README.md); between agents comes with issue 20.
 *
 * Device memory comes from ixl_device_alloc and is never touched by the CPU: every fill,
 * poison and check goes through a host buffer and ixl_device_copy (untimed), so the bench runs
 * unchanged on the simulated device of the tests, whose device memory faults when touched.
 * The sweep of ixlbench_initiator.c runs unchanged otherwise; DRAM pools come from mmap.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ixlbench.h"

void *ixb_mem_alloc(enum ixl_mem type, int dev, size_t len)
{
    void *p = NULL;
    char b[32];

    if (type != IXL_MEM_VRAM)
        return ixb_map(len);
    ixl_status st = ixl_device_alloc(dev, len, &p);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_device_alloc of %s on GPU %d: %s: %s\n",
                ixb_size_str(len, b, sizeof(b)), dev, ixl_strerror(st), ixl_agent_last_error(NULL));
        return NULL;
    }
    return p;
}

void ixb_mem_release(enum ixl_mem type, void *p, size_t len)
{
    if (p == NULL)
        return;
    if (type != IXL_MEM_VRAM) {
        ixb_unmap(p, len);
        return;
    }
    ixl_status st = ixl_device_free(p);
    if (st != IXL_OK)
        fprintf(stderr, "ixlbench: ixl_device_free: %s: %s\n", ixl_strerror(st),
                ixl_agent_last_error(NULL));
}

/* One synchronous copy to or from device memory; 0, or -1 (printed). */
static int dev_copy(void *dst, const void *src, size_t len)
{
    ixl_status st = ixl_device_copy(dst, src, len);
    if (st != IXL_OK) {
        fprintf(stderr, "ixlbench: ixl_device_copy of %zu bytes: %s: %s\n", len, ixl_strerror(st),
                ixl_agent_last_error(NULL));
        return -1;
    }
    return 0;
}

int ixb_mem_put(enum ixl_mem type, uint8_t *base, uint64_t off, uint64_t len, uint64_t seed,
                bool poison, uint8_t *scratch, size_t scratch_len)
{
    return ixb_mem_put_at(type, base, off, len, seed, off, poison, scratch, scratch_len);
}

int ixb_mem_put_at(enum ixl_mem type, uint8_t *base, uint64_t off, uint64_t len, uint64_t seed,
                   uint64_t pat_off, bool poison, uint8_t *scratch, size_t scratch_len)
{
    if (type != IXL_MEM_VRAM) {
        if (poison)
            memset(base + off, IXB_POISON, (size_t)len);
        else
            ixb_fill(base + off, (size_t)len, seed, pat_off);
        return 0;
    }
    for (uint64_t done = 0; done < len;) {
        size_t n = (size_t)(len - done < scratch_len ? len - done : scratch_len);
        if (poison)
            memset(scratch, IXB_POISON, n);
        else
            ixb_fill(scratch, n, seed, pat_off + done);
        if (dev_copy(base + off + done, scratch, n) != 0)
            return -1;
        done += n;
    }
    return 0;
}

int64_t ixb_mem_verify(enum ixl_mem type, const uint8_t *base, uint64_t off, uint64_t len,
                       uint64_t seed, uint8_t *scratch, size_t scratch_len, uint8_t *got)
{
    return ixb_mem_verify_at(type, base, off, len, seed, off, scratch, scratch_len, got);
}

int64_t ixb_mem_verify_at(enum ixl_mem type, const uint8_t *base, uint64_t off, uint64_t len,
                          uint64_t seed, uint64_t pat_off, uint8_t *scratch, size_t scratch_len,
                          uint8_t *got)
{
    if (type != IXL_MEM_VRAM) {
        int64_t bad = ixb_verify(base + off, (size_t)len, seed, pat_off);
        if (bad >= 0)
            *got = base[off + (uint64_t)bad];
        return bad;
    }
    for (uint64_t done = 0; done < len;) {
        size_t n = (size_t)(len - done < scratch_len ? len - done : scratch_len);
        if (dev_copy(scratch, base + off + done, n) != 0)
            return -2;
        int64_t bad = ixb_verify(scratch, n, seed, pat_off + done);
        if (bad >= 0) {
            *got = scratch[bad];
            return (int64_t)done + bad;
        }
        done += n;
    }
    return -1;
}

int ixb_mem_flip(enum ixl_mem type, uint8_t *base, uint64_t off)
{
    uint8_t b;

    if (type != IXL_MEM_VRAM) {
        base[off] ^= 0xFF;
        return 0;
    }
    if (dev_copy(&b, base + off, 1) != 0)
        return -1;
    b ^= 0xFF;
    return dev_copy(base + off, &b, 1);
}

int ixb_dev_run(const struct ixb_opts *o)
{
    struct ixb_init in;
    char why[256] = "";
    int rc;

    memset(&in, 0, sizeof(in));
    in.name = o->name ? o->name : "ixlbench";
    int n = ixl_device_count(why, sizeof(why));
    if (n <= 0) {
        fprintf(stderr, "ixlbench: VRAM needs a GPU, and there is none: %s\n",
                n == 0 ? "the driver reports 0 devices" : why);
        return IXB_EXIT_SKIP;
    }
    for (int side = 0; side < 2; side++) {
        enum ixl_mem t = side ? o->target_mem : o->init_mem;
        int dev = side ? o->target_dev : o->init_dev;
        if (t == IXL_MEM_VRAM && dev >= n) {
            fprintf(stderr, "ixlbench: --%s-dev %d: there %s %d GPU%s (0..%d)\n",
                    side ? "target" : "initiator", dev, n == 1 ? "is" : "are", n, n == 1 ? "" : "s",
                    n - 1);
            return 1;
        }
    }
    in.o = o;
    in.seed = o->seed;
    in.loop = true;
    rc = ixb_agent_make(in.name, o->backend, o->opts, o->n_opts, &in.agent, &in.be);
    if (rc != 0)
        return rc;
    if (!(ixl_backend_mem_mask(in.be) & IXL_MEM_BIT(IXL_MEM_VRAM))) {
        const char *w = ixl_backend_mem_why(in.be);
        fprintf(stderr, "ixlbench: backend %s does not move VRAM here%s%s\n", o->backend,
                w[0] ? ": " : "", w);
        ixl_agent_destroy(in.agent);
        return IXB_EXIT_SKIP;
    }
    in.ctl.agent = in.agent;
    snprintf(in.ctl.target, sizeof(in.ctl.target), "%s", in.name);
    pthread_mutex_init(&in.ctl.lock, NULL);
    ixb_out_header(o->backend, in.name, in.name);
    rc = ixb_sweep(&in);
    ixb_progress_clear();
    if (rc == 0 && in.check_failures > 0) {
        fprintf(stderr, "ixlbench: %d row(s) failed their data check\n", in.check_failures);
        rc = 1;
    }
    pthread_mutex_destroy(&in.ctl.lock);
    ixl_agent_destroy(in.agent);
    return rc;
}

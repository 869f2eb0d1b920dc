/*
 * Real GPU: registration of VRAM (tests/gpu/README.md). The device layer sees the driver the
 * test sees; cuMemAlloc memory and VMM memory (cuMemCreate + cuMemMap, POSIX fd handle type,
 * several physical allocations in one reserved range as PyTorch's expandable segments make)
 * register as VRAM of their GPU; many tensors inside one allocation register cheaply; the
 * wrong GPU, a range past its allocation's end and host memory claimed as VRAM are refused
 * with a message; ixl_device_alloc / ixl_device_copy work on the real device. Prints its
 * figures as Markdown on stdout. Skips (77) without a GPU. ~1 s.
 */
#include <stdio.h>
#include <unistd.h>

#include "gpu_common.h"

#define BIG (64u << 20)
#define TENSOR (16u << 10)
#define NTENSORS 4096u

static struct ixl_agent *agent;

static ixl_status reg(uint64_t addr, uint64_t len, uint64_t dev)
{
    struct ixl_reg_desc d = {.addr = addr, .len = len, .dev = dev};
    return ixl_mem_register(agent, IXL_MEM_VRAM, &d, 1, NULL);
}

static ixl_status dereg(uint64_t addr, uint64_t len, uint64_t dev)
{
    struct ixl_reg_desc d = {.addr = addr, .len = len, .dev = dev};
    return ixl_mem_deregister(agent, IXL_MEM_VRAM, &d, 1, NULL);
}

/* A registration that must be refused: prints ixl's reason, which must say something. */
static void refused(const char *what, uint64_t addr, uint64_t len, uint64_t dev)
{
    ixl_status st = reg(addr, len, dev);
    const char *msg = ixl_agent_last_error(agent);
    fprintf(stderr, "%s: %s: %s\n", what, ixl_strerror(st), msg);
    if (st == IXL_OK)
        check_fail(__FILE__, __LINE__, "%s was registered", what);
    CHECK(msg != NULL && strlen(msg) > 10);
    printf("| %s | refused: %s |\n", what, ixl_strerror(st));
}

int main(void)
{
    alarm(110);
    gpu_open();

    /* The device layer sees what the driver shows. */
    char why[256] = "";
    int n = ixl_device_count(why, sizeof(why));
    if (n != G.count)
        check_fail(__FILE__, __LINE__, "ixl_device_count says %d (%s), the driver %d", n, why,
                   G.count);
    int ver = 0;
    CHECK_RC(ixl_device_driver_version(&ver), IXL_OK);
    CHECK(ver == G.driver_version);
    struct ixl_device_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_device_info(G.ordinal, &info), IXL_OK);
    CHECK(info.ordinal == G.ordinal && strcmp(info.name, G.name) == 0);
    CHECK(info.total_mem == G.total_mem && info.cc_major == G.cc_major &&
          info.cc_minor == G.cc_minor);
    CHECK_RC(ixl_device_info(G.count, &info), IXL_ERR_INVALID_ARG);

    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "NET"};
    CHECK_RC(ixl_agent_create("gpu-reg", &p, &agent), IXL_OK);
    printf("Registration (test_gpu_reg) on %s (ixl_device_info: %s, %.1f GiB, compute "
           "capability %d.%d, PCI bus %d):\n\n",
           G.name, info.name, (double)info.total_mem / (1 << 30), info.cc_major, info.cc_minor,
           info.pci_bus);
    printf("| case | result |\n|---|---|\n");

    /* cuMemAlloc memory: whole, and a slice inside */
    CUdeviceptr a = gpu_alloc(BIG);
    CHECK_RC(reg(a, BIG, (uint64_t)G.ordinal), IXL_OK);
    CHECK_RC(reg(a + 4096, 8192, (uint64_t)G.ordinal), IXL_OK);
    CHECK_RC(dereg(a + 4096, 8192, (uint64_t)G.ordinal), IXL_OK);
    printf("| cuMemAlloc, 64 MiB, whole and a slice | registered as VRAM of GPU %d |\n", G.ordinal);

    /* Many tensors inside one allocation: one call of NTENSORS, then one call each. */
    struct ixl_reg_desc *ds = calloc(NTENSORS, sizeof(*ds));
    CHECK(ds != NULL);
    for (unsigned i = 0; i < NTENSORS; i++)
        ds[i] = (struct ixl_reg_desc){
            .addr = a + (uint64_t)i * TENSOR, .len = TENSOR - 256, .dev = (uint64_t)G.ordinal};
    double t0 = gpu_now();
    CHECK_RC(ixl_mem_register(agent, IXL_MEM_VRAM, ds, NTENSORS, NULL), IXL_OK);
    double t_batch = gpu_now() - t0;
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_VRAM, ds, NTENSORS, NULL), IXL_OK);
    t0 = gpu_now();
    for (unsigned i = 0; i < NTENSORS; i++)
        CHECK_RC(ixl_mem_register(agent, IXL_MEM_VRAM, &ds[i], 1, NULL), IXL_OK);
    double t_each = gpu_now() - t0;
    CHECK_RC(ixl_mem_deregister(agent, IXL_MEM_VRAM, ds, NTENSORS, NULL), IXL_OK);
    printf("| %u tensors of 16 KiB in one cuMemAlloc allocation | registered: %.2f us each in "
           "one call, %.2f us each one call per tensor |\n",
           NTENSORS, t_batch * 1e6 / NTENSORS, t_each * 1e6 / NTENSORS);
    /* "Cheap": one handle per allocation, reused. A generous bound (a driver round trip per
     * tensor is ~1 us; a new handle per tensor costs far more). */
    CHECK(t_each / NTENSORS < 200e-6);
    free(ds);

    /* Refusals */
    char what[128];
    if (G.count > 1) {
        refused("cuMemAlloc memory of GPU 0 registered as GPU 1", a, BIG, 1);
    } else {
        snprintf(what, sizeof(what), "cuMemAlloc memory registered as GPU %d (there is 1 GPU)",
                 G.count);
        refused(what, a, BIG, (uint64_t)G.count);
    }
    refused("a range running 4 KiB past the allocation's end", a + BIG - 4096, 8192,
            (uint64_t)G.ordinal);
    void *host = aligned_alloc(4096, 1 << 20);
    CHECK(host != NULL);
    refused("host memory (aligned_alloc) registered as VRAM", (uintptr_t)host, 1 << 20,
            (uint64_t)G.ordinal);
    CHECK_RC(dereg(a, BIG, (uint64_t)G.ordinal), IXL_OK);
    /* Freed now: no other allocation of the test may lie right after a VMM range below (the
     * layer takes adjacent device memory for more mappings of the same tensor). */
    gpu_free(a);

    /* VMM memory, POSIX fd handle type: one physical allocation, then four in one range. */
    if (!G.vmm) {
        printf("| VMM memory | not supported by this device: not tested |\n");
    } else {
        struct gpu_vmm v1, v4;
        gpu_vmm_alloc(&v1, BIG, 1);
        CHECK_RC(reg(v1.ptr, v1.len, (uint64_t)G.ordinal), IXL_OK);
        CHECK_RC(reg(v1.ptr + 65536, 4096, (uint64_t)G.ordinal), IXL_OK);
        CHECK_RC(dereg(v1.ptr + 65536, 4096, (uint64_t)G.ordinal), IXL_OK);
        printf("| VMM (cuMemCreate, %s handle), 64 MiB, one physical allocation | registered "
               "as VRAM of GPU %d |\n",
               G.vmm_fd ? "POSIX fd" : "no shareable", G.ordinal);
        refused("VMM memory, a range running past the mapping's end", v1.ptr + v1.len - 4096, 8192,
                (uint64_t)G.ordinal);
        CHECK_RC(dereg(v1.ptr, v1.len, (uint64_t)G.ordinal), IXL_OK);

        gpu_vmm_alloc(&v4, BIG, 4);
        for (size_t i = 0; i < v4.n; i++)
            CHECK_RC(reg(v4.ptr + i * v4.chunk, v4.chunk, (uint64_t)G.ordinal), IXL_OK);
        for (size_t i = 0; i < v4.n; i++)
            CHECK_RC(dereg(v4.ptr + i * v4.chunk, v4.chunk, (uint64_t)G.ordinal), IXL_OK);
        char sz[32];
        printf("| VMM, %zu physical allocations of %s mapped side by side, each | registered |\n",
               v4.n, gpu_size(v4.chunk, sz, sizeof(sz)));
        /* A tensor across two physical allocations of one reserved range (PyTorch's
         * expandable segments can make one): either registered, or refused with a reason. */
        ixl_status st = reg(v4.ptr + v4.chunk - 4096, 8192, (uint64_t)G.ordinal);
        if (st == IXL_OK) {
            CHECK_RC(dereg(v4.ptr + v4.chunk - 4096, 8192, (uint64_t)G.ordinal), IXL_OK);
            printf("| VMM, a tensor across two physical allocations | registered |\n");
        } else {
            fprintf(stderr, "across two VMM allocations: %s: %s\n", ixl_strerror(st),
                    ixl_agent_last_error(agent));
            CHECK(strlen(ixl_agent_last_error(agent)) > 10);
            printf("| VMM, a tensor across two physical allocations | refused: %s |\n",
                   ixl_strerror(st));
        }
        gpu_vmm_free(&v4);
        gpu_vmm_free(&v1);
    }

    /* ixl's own device functions on the real device */
    void *d = NULL;
    CHECK_RC(ixl_device_alloc(G.ordinal, 1 << 20, &d), IXL_OK);
    uint8_t *pat = malloc(1 << 20), *back = malloc(1 << 20);
    CHECK(pat != NULL && back != NULL);
    gpu_pattern(pat, 1 << 20);
    CHECK_RC(ixl_device_copy(d, pat, 1 << 20), IXL_OK);
    CHECK(gpu_equal((CUdeviceptr)(uintptr_t)d, pat, 1 << 20, "ixl_device_copy host -> device"));
    memset(back, 0xEE, 1 << 20);
    CHECK_RC(ixl_device_copy(back, d, 1 << 20), IXL_OK);
    CHECK(memcmp(back, pat, 1 << 20) == 0);
    CHECK_RC(reg((uintptr_t)d, 1 << 20, (uint64_t)G.ordinal), IXL_OK);
    CHECK_RC(dereg((uintptr_t)d, 1 << 20, (uint64_t)G.ordinal), IXL_OK);
    CHECK_RC(ixl_device_free(d), IXL_OK);
    printf("| ixl_device_alloc / ixl_device_copy both ways / register | ok |\n");

    free(pat);
    free(back);
    free(host);
    ixl_agent_destroy(agent);
    fprintf(stderr, "PASS\n");
    return 0;
}

/* ixl-info: the plugins ixl finds (and refuses), their capabilities and options, the GPU
 * driver and devices the device layer sees (or why none), the configuration in force, and the
 * names of status codes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: ixl-info [--plugins] [--cuda] [--config] [--strerror N] [--version]\n"
               "                [--help]\n"
               "  with no option: the version (what --version prints), every plugin with its\n"
               "  options (type, range or choices, default; sizes take K, M, G, T suffixes,\n"
               "  durations us, ms, s), the memory types an engine of it offers here (and why\n"
               "  others are not), each refused one with its reason, the CUDA driver and\n"
               "  devices (or why there are none), and the configuration variables with their\n"
               "  values\n");
}

static void print_caps(uint32_t caps)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {{IXL_CAP_LOCAL, "local"},
                 {IXL_CAP_REMOTE, "remote"},
                 {IXL_CAP_NOTIF, "notif"},
                 {IXL_CAP_PROGRESS, "progress"}};
    int first = 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (caps & names[i].bit) {
            printf("%s%s", first ? "" : ",", names[i].name);
            first = 0;
        }
    }
    if (first)
        printf("none");
}

static void print_mems(uint32_t mask)
{
    int first = 1;
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        if (mask & IXL_MEM_BIT(t)) {
            printf("%s%s", first ? "" : ",", ixl_mem_name((enum ixl_mem)t));
            first = 0;
        }
    }
}

/* What an engine of the plugin offers on this machine: its memory types, and why those of the
 * plugin it dropped are missing (a UCX without CUDA, no GPU), from a backend created with
 * default options in a probe agent. */
static void print_here(struct ixl_agent *probe, const struct ixl_plugin_info *info)
{
    struct ixl_backend *b = NULL;
    if (probe == NULL || ixl_backend_create(probe, info->name, NULL, 0, &b) != IXL_OK) {
        /* The plugin cannot make an engine here (GDS without cuFile, ...): say why. */
        printf("             unavailable here: %s\n", ixl_agent_last_error(probe));
        return;
    }
    printf("             memory here: ");
    print_mems(ixl_backend_mem_mask(b));
    printf("\n");
    const char *why = ixl_backend_mem_why(b);
    while (*why) {
        size_t n = strcspn(why, "\n");
        printf("             not here: %.*s\n", (int)n, why);
        why += n + (why[n] == '\n');
    }
    if (ixl_backend_destroy(b) != IXL_OK)
        fprintf(stderr, "ixl-info: destroying the probe backend %s: %s\n", info->name,
                ixl_agent_last_error(probe));
}

static void print_plugins(void)
{
    size_t n = ixl_plugin_count();
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS | IXL_AGENT_F_ETCD,
                                  .backends = "",
                                  .etcd_endpoints = ""};
    struct ixl_agent *probe = NULL;
    if (ixl_agent_create("ixl-info-probe", &ap, &probe) != IXL_OK)
        probe = NULL;
    printf("plugins (%zu):\n", n);
    for (size_t i = 0; i < n; i++) {
        struct ixl_plugin_info info = {.size = sizeof(info)};
        if (ixl_plugin_get(i, &info) != IXL_OK)
            continue;
        printf("  %-10s version %s, ABI %u.%u, %s\n", info.name, info.version, info.abi_major,
               info.abi_minor, info.path);
        printf("             memory: ");
        print_mems(info.mem_mask);
        printf("\n");
        print_here(probe, &info);
        printf("             capabilities: ");
        print_caps(info.caps);
        printf("\n");
        if (info.n_options == 0)
            printf("             options: none\n");
        for (size_t j = 0; j < info.n_options; j++) {
            const struct ixl_option *o = &info.options[j];
            char type[1024];
            if (ixl_option_describe(o, type, sizeof(type)) != IXL_OK)
                snprintf(type, sizeof(type), "(%s)", ixl_agent_last_error(NULL));
            printf("             option %-16s %s, default \"%s\"\n                    %s\n",
                   o->name, type, o->default_value, o->description);
        }
    }
    ixl_agent_destroy(probe);
    size_t r = ixl_plugin_refused_count();
    if (r > 0)
        printf("refused (%zu):\n", r);
    for (size_t i = 0; i < r; i++) {
        const char *path, *reason;
        if (ixl_plugin_refused_get(i, &path, &reason) == IXL_OK)
            printf("  %s\n             refused: %s\n", path, reason);
    }
}

/* The device layer's view (docs/device.md): the driver's version and each device, or why
 * there is no usable GPU. */
static void print_cuda(void)
{
    char why[512];
    int n = ixl_device_count(why, sizeof(why));
    int version = 0;
    int have_version = ixl_device_driver_version(&version) == IXL_OK;
    printf("cuda:\n");
    if (have_version)
        printf("  driver      CUDA %d.%d (%d)\n", version / 1000, version % 1000 / 10, version);
    if (n < 0) {
        printf("  devices     none: %s\n", why);
        return;
    }
    printf("  devices     %d\n", n);
    for (int i = 0; i < n; i++) {
        struct ixl_device_info d = {.size = sizeof(d)};
        if (ixl_device_info(i, &d) != IXL_OK) {
            printf("  device %d    (no description)\n", i);
            continue;
        }
        printf("  device %d    %s, %llu MiB, compute capability %d.%d, PCI bus %d\n", i, d.name,
               (unsigned long long)(d.total_mem >> 20), d.cc_major, d.cc_minor, d.pci_bus);
    }
}

static void print_config(void)
{
    size_t n = ixl_config_count();
    printf("configuration:\n");
    for (size_t i = 0; i < n; i++) {
        struct ixl_config_var v = {.size = sizeof(v)};
        if (ixl_config_get(i, &v) != IXL_OK)
            continue;
        printf("  %-20s = \"%s\"%s\n                         %s (default \"%s\")\n", v.name,
               v.value, strcmp(v.value, v.default_value) ? "" : " (default)", v.description,
               v.default_value);
    }
}

int main(int argc, char **argv)
{
    int plugins = 0, config = 0, cuda = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--strerror") == 0) {
            if (i + 1 >= argc) {
                usage(stderr);
                return 2;
            }
            char *end;
            errno = 0;
            long v = strtol(argv[++i], &end, 0);
            if (*end != '\0' || errno != 0) {
                fprintf(stderr, "ixl-info: '%s' is not a number\n", argv[i]);
                return 2;
            }
            const char *s = ixl_strerror((int)v);
            printf("%ld %s\n", v, s);
            return strcmp(s, "unknown status") == 0 ? 1 : 0;
        } else if (strcmp(argv[i], "--plugins") == 0) {
            plugins = 1;
        } else if (strcmp(argv[i], "--config") == 0) {
            config = 1;
        } else if (strcmp(argv[i], "--cuda") == 0) {
            cuda = 1;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("ixl %s\n", ixl_version()); /* the library's: the file VERSION */
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!plugins && !config && !cuda) {
        plugins = config = cuda = 1;
        printf("ixl %s\n", ixl_version());
    }
    if (plugins)
        print_plugins();
    if (cuda)
        print_cuda();
    if (config)
        print_config();
    return 0;
}

/*
 * GDS and GDS_MT where cuFile is absent (CI): both plugins are built in and listed (VRAM,
 * FILE, BLK; local only; their options), and creating either backend fails cleanly with
 * IXL_ERR_NOT_SUPPORTED and "cuFile not found (<library>: <dlerror>)" -- for the default
 * libcufile.so.0 and for a `library` option naming a file that does not exist. Options are
 * checked before cuFile is looked for (a bad value names the option).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <ixl/ixl.h>
#include <ixl/ixl_plugin.h>

#include "check.h"

static struct ixl_agent *agent_new(void)
{
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("gds-test", &ap, &a), IXL_OK);
    return a;
}

static void listed(const char *name, const char *option)
{
    for (size_t i = 0; i < ixl_plugin_count(); i++) {
        struct ixl_plugin_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_plugin_get(i, &info), IXL_OK);
        if (strcmp(info.name, name) != 0)
            continue;
        CHECK(info.mem_mask ==
              (IXL_MEM_BIT(IXL_MEM_VRAM) | IXL_MEM_BIT(IXL_MEM_FILE) | IXL_MEM_BIT(IXL_MEM_BLK)));
        CHECK(info.caps == IXL_CAP_LOCAL);
        bool lib = false, opt = false;
        for (size_t j = 0; j < info.n_options; j++) {
            lib |= strcmp(info.options[j].name, "library") == 0 &&
                   strcmp(info.options[j].default_value, "libcufile.so.0") == 0;
            opt |= strcmp(info.options[j].name, option) == 0;
        }
        CHECK(lib && opt);
        return;
    }
    check_fail(__FILE__, __LINE__, "plugin %s is not listed", name);
}

static void refused(struct ixl_agent *a, const char *name, const struct ixl_kv *kv, size_t n,
                    int want, const char *text)
{
    struct ixl_backend *b = NULL;
    CHECK_RC(ixl_backend_create(a, name, kv, n, &b), want);
    CHECK(b == NULL);
    printf("%s: %s\n", name, ixl_agent_last_error(a));
    CHECK_STR_HAS(ixl_agent_last_error(a), text);
}

int main(void)
{
    listed("GDS", "max_entry");
    listed("GDS_MT", "threads");
    struct ixl_agent *a = agent_new();
    const char *names[] = {"GDS", "GDS_MT"};
    /* Where a real cuFile is installed the default library loads: only the path cases run. */
    void *real = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (real != NULL)
        dlclose(real);
    for (int i = 0; i < 2; i++) {
        if (real == NULL)
            refused(a, names[i], NULL, 0, IXL_ERR_NOT_SUPPORTED,
                    "cuFile not found (libcufile.so.0: ");
        struct ixl_kv lib = {"library", "/nonexistent/libcufile.so.0"};
        refused(a, names[i], &lib, 1, IXL_ERR_NOT_SUPPORTED,
                "cuFile not found (/nonexistent/libcufile.so.0: ");
        CHECK_STR_HAS(ixl_agent_last_error(a), "option library");
        /* A file that is not a library: dlopen's own reason. */
        struct ixl_kv notlib = {"library", "/proc/self/status"};
        refused(a, names[i], &notlib, 1, IXL_ERR_NOT_SUPPORTED, "cuFile not found (/proc/self/");
    }
    struct ixl_kv bad_threads = {"threads", "0"};
    refused(a, "GDS_MT", &bad_threads, 1, IXL_ERR_INVALID_ARG, "threads");
    struct ixl_kv bad_entry = {"max_entry", "5000"};
    refused(a, "GDS", &bad_entry, 1, IXL_ERR_INVALID_ARG, "max_entry");
    ixl_agent_destroy(a);
    printf("ok\n");
    return 0;
}

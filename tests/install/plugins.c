/* Built against an installed ixl (tests/install/test_install.sh): which libixl this process
 * loaded and where each plugin it found comes from, so the test can see that an installed tree
 * uses its own library and plugins, not a build tree's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <ixl/ixl.h>

int main(void)
{
    if (IXL_VERSION_CHECK() != IXL_OK) {
        fprintf(stderr, "plugins: libixl %s does not provide header %d.%d\n", ixl_version(),
                IXL_VERSION_MAJOR, IXL_VERSION_MINOR);
        return 1;
    }
    Dl_info dl;
    void *sym = dlsym(RTLD_DEFAULT, "ixl_version");
    if (sym == NULL || dladdr(sym, &dl) == 0 || dl.dli_fname == NULL) {
        fprintf(stderr, "plugins: cannot tell where ixl_version comes from\n");
        return 1;
    }
    printf("libixl %s %s\n", ixl_version(), dl.dli_fname);
    size_t n = ixl_plugin_count();
    for (size_t i = 0; i < n; i++) {
        struct ixl_plugin_info info = {.size = sizeof(info)};
        if (ixl_plugin_get(i, &info) == IXL_OK)
            printf("plugin %s %s\n", info.name, info.path);
    }
    size_t r = ixl_plugin_refused_count();
    for (size_t i = 0; i < r; i++) {
        const char *path, *reason;
        if (ixl_plugin_refused_get(i, &path, &reason) == IXL_OK)
            printf("refused %s: %s\n", path, reason);
    }
    return 0;
}

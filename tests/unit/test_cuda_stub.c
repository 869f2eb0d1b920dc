/*
 * The real CUDA entry points, checked without a GPU: every entry point the device layer
 * resolves (ixl_device_entry_points(): the list its dlsym loop walks, not a copy) is exported
 * by the CUDA toolkit's stub libcuda.so, and the stub's answer (cuInit returns
 * CUDA_ERROR_STUB_LIBRARY) reads as "no GPU driver ... stub library" through
 * ixl_device_count(). Skips (77) when no toolkit is installed: CUDA is not something this
 * project installs. A stub elsewhere can be named as the first argument.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ixl/ixl.h>

#include "check.h"
#include "device/device.h"

static const char *const stub_paths[] = {
    "/usr/local/cuda/lib64/stubs/libcuda.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
    "/usr/local/cuda/targets/sbsa-linux/lib/stubs/libcuda.so",
};

int main(int argc, char **argv)
{
    const char *stub = argc > 1 ? argv[1] : NULL;
    for (size_t i = 0; stub == NULL && i < sizeof(stub_paths) / sizeof(stub_paths[0]); i++)
        if (access(stub_paths[i], R_OK) == 0)
            stub = stub_paths[i];
    if (stub == NULL)
        skip(0, "no CUDA toolkit stub libcuda.so under /usr/local/cuda (lib64/stubs or "
                "targets/*/lib/stubs): CUDA is not something this project installs");

    const char *const *names;
    size_t n = ixl_device_entry_points(&names);
    CHECK(n > 0);
    void *lib = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        check_fail(__FILE__, __LINE__, "dlopen %s: %s", stub, dlerror());
    size_t missing = 0;
    for (size_t i = 0; i < n; i++) {
        if (dlsym(lib, names[i]) == NULL) {
            fprintf(stderr, "%s does not export %s\n", stub, names[i]);
            missing++;
        }
    }
    if (missing > 0)
        check_fail(__FILE__, __LINE__,
                   "%zu of the %zu entry points the device layer resolves are "
                   "not in %s (listed above)",
                   missing, n, stub);
    printf("test_cuda_stub: %s exports all %zu entry points the device layer resolves\n", stub, n);

    /* The stub through the layer: "no GPU", saying it is the stub. */
    setenv("IXL_CUDA_LIBRARY", stub, 1); /* before ixl reads its configuration (once) */
    char why[512];
    CHECK_RC(ixl_device_count(why, sizeof(why)), IXL_ERR_NOT_SUPPORTED);
    CHECK_STR_HAS(why, "no GPU driver");
    CHECK_STR_HAS(why, "stub library");
    printf("test_cuda_stub: ixl_device_count: %s\n", why);
    dlclose(lib);
    return 0;
}

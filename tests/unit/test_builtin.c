/* A plugin compiled into the library goes through the same descriptor and checks as a dynamic
 * one, and is found without any plugin directory. */
#include <stdlib.h>

#include "check.h"

int main(void)
{
    unsetenv("IXL_PLUGIN_DIR");
    struct ixl_plugin_info info = {.size = sizeof(info)};
    CHECK_RC(ixl_plugin_find("TESTSTATIC", &info), IXL_OK);
    CHECK(info.builtin);
    CHECK(strcmp(info.path, "(built in)") == 0);
    CHECK(info.caps & IXL_CAP_NOTIF);
    CHECK(ixl_plugin_count() >= 1);
    CHECK_RC(ixl_plugin_get(0, &info), IXL_OK);
    CHECK(strcmp(info.name, "TESTSTATIC") == 0); /* built-ins come first */

    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TESTSTATIC"};
    struct ixl_agent *a;
    CHECK_RC(ixl_agent_create("static", &p, &a), IXL_OK);
    CHECK(ixl_backend_count(a) == 1);
    ixl_agent_destroy(a);
    printf("ok\n");
    return 0;
}

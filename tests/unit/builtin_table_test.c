/* The built-in plugin table of test_builtin: the TEST plugin compiled in statically. */
#include <stddef.h>

#include "plugin/builtin.h"

const struct ixl_plugin_desc *ixl_plugin_builtin_TESTSTATIC(void);

const ixl_plugin_entry_fn ixl_builtin_plugins[] = {ixl_plugin_builtin_TESTSTATIC, NULL};

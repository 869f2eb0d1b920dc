/* An empty built-in plugin table for tests that link the core statically. */
#include <stddef.h>

#include "plugin/builtin.h"

const ixl_plugin_entry_fn ixl_builtin_plugins[] = {NULL};

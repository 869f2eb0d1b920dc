/*
 * ucx_peer - ixl_peer (see ixl_peer.c: an agent driven line by line over stdin/stdout) whose
 * backend is the UCX plugin instead of NET, for test_ucx:
 *
 *   ucx_peer NAME [KEY=VALUE...]     KEY=VALUE: the UCX backend's options
 *
 * ixl_peer.c names its backend in one ixl_backend_create() call; the macro below redirects that
 * call, so both peers share every command.
 */
#include <ixl/ixl.h>

#define ixl_backend_create(agent, name, kv, n, out) ixl_backend_create(agent, "UCX", kv, n, out)

#include "ixl_peer.c"

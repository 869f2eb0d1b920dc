"""NIXL's Python API on ixl: `from ixl.compat import nixl_agent, nixl_agent_config` in place of
`from nixl._api import nixl_agent, nixl_agent_config`.

The implementation is ixl._nixl's, shared with the `nixl` compatibility package; the two
differ only in defaults. Here they are ixl's: backends from ixl's configuration
(IXL_BACKENDS) rather than ["UCX"], and listen_port / DEFAULT_COMM_PORT 0 (any free port)
rather than 8888. "UCX" may be named when ixl's UCX plugin is installed. Errors raise NIXL's
exception classes (nixlNotFoundError, nixlBackendError, ...), which are the bases of ixl's
per-status exceptions.
"""
from ._nixl import make_api
from .errors import (NIXL_ERRORS, nixlBackendError, nixlCancelledError,
                     nixlInvalidParamError, nixlMismatchError, nixlNotAllowedError,
                     nixlNoTelemetryError, nixlNotFoundError, nixlNotPostedError,
                     nixlNotSupportedError, nixlRemoteDisconnectError, nixlRepostActiveError,
                     nixlUnknownError)

_api = make_api(0, None, __name__)
DEFAULT_COMM_PORT = _api["DEFAULT_COMM_PORT"]
nixl_agent = _api["nixl_agent"]
nixl_agent_config = _api["nixl_agent_config"]
nixl_thread_sync_t = _api["nixl_thread_sync_t"]
nixl_xfer_handle = _api["nixl_xfer_handle"]
nixl_prepped_dlist_handle = _api["nixl_prepped_dlist_handle"]
nixl_backend_handle = _api["nixl_backend_handle"]
nixlRegDList = _api["nixlRegDList"]
nixlXferDList = _api["nixlXferDList"]
nixlRemoteDList = _api["nixlRemoteDList"]
nixlXferTelemetry = _api["nixlXferTelemetry"]
INIT_AGENT = _api["INIT_AGENT"]
del _api

__all__ = ["nixl_agent", "nixl_agent_config", "nixl_thread_sync_t", "nixl_xfer_handle",
           "nixl_prepped_dlist_handle", "nixl_backend_handle", "DEFAULT_COMM_PORT",
           "nixlRegDList", "nixlXferDList", "nixlRemoteDList", "nixlXferTelemetry",
           "INIT_AGENT", "nixlBackendError", "nixlCancelledError",
           "nixlInvalidParamError", "nixlMismatchError", "nixlNotAllowedError",
           "nixlNoTelemetryError", "nixlNotFoundError", "nixlNotPostedError",
           "nixlNotSupportedError", "nixlRemoteDisconnectError", "nixlRepostActiveError",
           "nixlUnknownError"]
assert len(__all__) == 12 + len(NIXL_ERRORS)

"""nixl._api on ixl: NIXL 1.4's nixl_agent, nixl_agent_config and their companions.

The implementation is ixl's (ixl._nixl, also behind ixl.compat: the same methods, signatures,
return values and exceptions; a list or handle made through one name works through the other).
Only the defaults are NIXL's here: nixl_agent_config() creates the "UCX" backend, and the
listener port and metadata peers' port default to DEFAULT_COMM_PORT (8888), where ixl.compat's
defaults are ixl's configuration (IXL_BACKENDS) and 0 (any free port).
"""
from ixl import _nixl

from . import _bindings as nixlBind
from .logging import get_logger

logger = get_logger(__name__)

_names = _nixl.make_api(nixlBind.DEFAULT_COMM_PORT, ["UCX"], __name__)
DEFAULT_COMM_PORT = _names["DEFAULT_COMM_PORT"]
nixl_agent_config = _names["nixl_agent_config"]
nixl_agent = _names["nixl_agent"]
# NIXL's thread-synchronization modes: all accepted; an ixl agent is thread-safe in each.
nixl_thread_sync_t = _names["nixl_thread_sync_t"]
# Handles: ixl's objects owning the C handle (release(), or released when collected).
nixl_xfer_handle = _names["nixl_xfer_handle"]
nixl_prepped_dlist_handle = _names["nixl_prepped_dlist_handle"]
nixl_backend_handle = _names["nixl_backend_handle"]
del _names

__all__ = ["DEFAULT_COMM_PORT", "nixl_agent", "nixl_agent_config", "nixl_thread_sync_t",
           "nixl_xfer_handle", "nixl_prepped_dlist_handle", "nixl_backend_handle", "logger"]

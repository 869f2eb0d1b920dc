"""nixl._api on ixl: NIXL 1.4's nixl_agent and nixl_agent_config.

The implementation is ixl's (ixl.compat: the same classes, methods, signatures, return values
and exceptions); what differs is NIXL's defaults: nixl_agent_config() creates the "UCX" backend
and listens (when enable_listen_thread) on DEFAULT_COMM_PORT (8888), where ixl.compat's
defaults are ixl's configuration (IXL_BACKENDS) and any free port.
"""
import enum as _enum
import inspect as _inspect
from typing import Optional

import ixl as _ixl
from ixl import compat as _compat

from . import _bindings as nixlBind
from .logging import get_logger

logger = get_logger(__name__)

DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT

# Handles: ixl's classes (objects owning the C handle, released by release() or when
# collected), constructed by the agent.
nixl_xfer_handle = getattr(_compat, "nixl_xfer_handle", None) or _ixl.XferHandle
nixl_prepped_dlist_handle = (getattr(_compat, "nixl_prepped_dlist_handle", None)
                             or _ixl.PrepHandle)
nixl_backend_handle = int


def _sync_enum():
    ours = getattr(_compat, "nixl_thread_sync_t", None)
    if ours is not None:
        return ours
    return _enum.Enum("nixl_thread_sync_t", [
        (name, nixlBind.nixl_thread_sync_t[name])
        for name in ("NIXL_THREAD_SYNC_NONE", "NIXL_THREAD_SYNC_STRICT",
                     "NIXL_THREAD_SYNC_RW", "NIXL_THREAD_SYNC_DEFAULT")],
        module=__name__)


# NIXL's thread-synchronization modes: accepted; ixl's agent is thread-safe in all of them.
nixl_thread_sync_t = _sync_enum()
del _sync_enum


_PARENT_TAKES_SYNC_MODE = "sync_mode" in _inspect.signature(
    _compat.nixl_agent_config.__init__).parameters


class nixl_agent_config(_compat.nixl_agent_config):
    """NIXL's agent configuration, with NIXL's defaults (backends ["UCX"], listener port
    DEFAULT_COMM_PORT); ixl.compat.nixl_agent_config has the same parameters with ixl's."""

    def __init__(self, enable_prog_thread: bool = True, enable_listen_thread: bool = False,
                 listen_port: int = DEFAULT_COMM_PORT, capture_telemetry: bool = False,
                 num_threads: int = 0, backends: list = ["UCX"],  # noqa: B006 (NIXL's)
                 sync_mode: Optional[nixl_thread_sync_t] = None):
        args = (enable_prog_thread, enable_listen_thread, listen_port, capture_telemetry,
                num_threads, list(backends))
        if _PARENT_TAKES_SYNC_MODE:
            super().__init__(*args, sync_mode=sync_mode)
        else:  # TEMPORARY until ixl.compat takes sync_mode (issue 17, i17-core)
            if sync_mode is not None and not isinstance(sync_mode, nixl_thread_sync_t):
                raise TypeError("sync_mode must be a nixl_thread_sync_t "
                                f"(got {type(sync_mode).__name__!r})")
            super().__init__(*args)
            self.sync_mode = sync_mode


class nixl_agent(_compat.nixl_agent):
    """NIXL's nixl_agent(agent_name, nixl_conf=None, instantiate_all=False): ixl.compat's
    agent; without nixl_conf it takes nixl_agent_config() (NIXL's defaults)."""

    _default_config = nixl_agent_config


__all__ = ["DEFAULT_COMM_PORT", "nixl_agent", "nixl_agent_config", "nixl_thread_sync_t",
           "nixl_xfer_handle", "nixl_prepped_dlist_handle", "nixl_backend_handle", "logger"]

"""NIXL's Python API on ixl: `from ixl.compat import nixl_agent, nixl_agent_config` in place of
`from nixl._api import nixl_agent, nixl_agent_config`.

Differences from ixl.Agent, to follow NIXL's conventions: add_remote_agent returns the name as
bytes; nixl_agent_config's defaults are NIXL's (progress thread on, telemetry off), except that
backends default to ixl's configuration (IXL_BACKENDS) rather than ["UCX"]. "UCX" may be named
when ixl's UCX plugin is installed. Errors raise NIXL's exception classes (nixlNotFoundError,
nixlBackendError, ...), which are the bases of ixl's per-status exceptions.
"""
from .agent import INIT_AGENT, Agent, AgentConfig, XferTelemetry
from .descs import RegDList, XferDList
from .errors import (NIXL_ERRORS, nixlBackendError, nixlCancelledError,
                     nixlInvalidParamError, nixlMismatchError, nixlNotAllowedError,
                     nixlNoTelemetryError, nixlNotFoundError, nixlNotPostedError,
                     nixlNotSupportedError, nixlRemoteDisconnectError, nixlRepostActiveError,
                     nixlUnknownError)

nixlRegDList = RegDList
nixlXferDList = XferDList
nixlXferTelemetry = XferTelemetry


class nixl_agent_config(AgentConfig):
    """NIXL's agent configuration: (enable_prog_thread=True, enable_listen_thread=False,
    listen_port=0, capture_telemetry=False, num_threads=0, backends=None = IXL_BACKENDS)."""

    def __init__(self, enable_prog_thread=True, enable_listen_thread=False, listen_port=0,
                 capture_telemetry=False, num_threads=0, backends=None, **ixl_options):
        super().__init__(enable_prog_thread, enable_listen_thread, listen_port,
                         capture_telemetry, num_threads, backends, **ixl_options)


class nixl_agent(Agent):
    """NIXL's nixl_agent(agent_name, nixl_conf=None, instantiate_all=False) on ixl."""

    _default_config = nixl_agent_config

    def add_remote_agent(self, metadata):
        """Loads a remote agent's metadata; returns its name as bytes (as NIXL does)."""
        return super().add_remote_agent(metadata).encode()


__all__ = ["nixl_agent", "nixl_agent_config", "nixlRegDList", "nixlXferDList",
           "nixlXferTelemetry", "INIT_AGENT", "nixlBackendError", "nixlCancelledError",
           "nixlInvalidParamError", "nixlMismatchError", "nixlNotAllowedError",
           "nixlNoTelemetryError", "nixlNotFoundError", "nixlNotPostedError",
           "nixlNotSupportedError", "nixlRemoteDisconnectError", "nixlRepostActiveError",
           "nixlUnknownError"]
assert len(__all__) == 6 + len(NIXL_ERRORS)

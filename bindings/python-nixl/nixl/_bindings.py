"""nixl._bindings on ixl: the names Python code imports from NIXL's C++ binding module.

Everything here is ixl's own object (ixl._nixl.bindings_names(), shared with ixl.compat):
the exception classes (ixl.errors; RuntimeError subclasses, under which every ixl status of
that category falls), nixlXferDList / nixlRegDList (ixl's lists: NIXL's constructors, list
methods and pickling), nixlRemoteDList, nixlXferTelemetry, and the constants: segments
(nixl_mem_t members, equal to ixl's memory type names: list.getType() == DRAM_SEG), NIXL's
operation, status and thread-sync values, DEFAULT_COMM_PORT (8888).

Not provided: nixlAgent and nixlAgentConfig, NIXL's C++ agent bound with pybind11
(nixl._api's nixl_agent and nixl_agent_config are the agent here; docs/python.md).
"""
from ixl import _nixl

globals().update(_nixl.bindings_names())

__all__ = sorted(_nixl.bindings_names())

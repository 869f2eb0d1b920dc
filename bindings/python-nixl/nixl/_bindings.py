"""nixl._bindings on ixl: the names Python code imports from NIXL's C++ binding module.

The exception classes, descriptor lists and telemetry are ixl's own (ixl.compat, ixl.errors):
`except nixlNotFoundError` catches every ixl status of that category. The constants have NIXL
1.4's names and values, but for FILE_SEG and OBJ_SEG (see below). NIXL's C++ binding classes nixlAgent and nixlAgentConfig are not provided:
nixl._api's nixl_agent and nixl_agent_config are the interface (docs/python.md).
"""
import enum as _enum

from ixl import _nixl
from ixl import descs as _descs
from ixl import compat as _compat
from ixl import errors as _errors

# -- exceptions (ixl.errors; each ixl status derives from the class of its NIXL category) ----
from ixl.compat import (nixlBackendError, nixlCancelledError,  # noqa: F401
                        nixlInvalidParamError, nixlMismatchError, nixlNotAllowedError,
                        nixlNoTelemetryError, nixlNotFoundError, nixlNotPostedError,
                        nixlNotSupportedError, nixlRemoteDisconnectError,
                        nixlRepostActiveError, nixlUnknownError)

# -- descriptor lists and telemetry: ixl's classes -------------------------------------------
nixlRemoteDList = _compat.nixlRemoteDList
nixlXferTelemetry = _compat.nixlXferTelemetry


class _IxlList(type):
    """Lists an agent makes are ixl's own class: they are instances of the NIXL-named class."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.__bases__[0])

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__bases__[0])


def _from(descs, what):
    if isinstance(descs, int):  # NIXL's init_size: that many empty descriptors
        if descs:
            raise ValueError(f"{what}(type, init_size): ixl lists hold no empty descriptors; "
                             "give the descriptors, or append them")
        return []
    return descs


class nixlXferDList(_compat.nixlXferDList, metaclass=_IxlList):
    """NIXL's transfer descriptor list: nixlXferDList(type, descs) with descs a list of
    (addr, len, dev) tuples or an N x 3 numpy array (or 0 for an empty list); ixl's
    XferDList, with NIXL's list methods and pickling."""

    __slots__ = ()

    def __init__(self, type, descs=0):  # noqa: A002 (NIXL's parameter name)
        made = _descs.xfer_dlist(_from(descs, "nixlXferDList"), _nixl._mem_index(type))
        super().__init__(made._ptr, made._keep)
        made._ptr = None


class nixlRegDList(_compat.nixlRegDList, metaclass=_IxlList):
    """NIXL's registration descriptor list: nixlRegDList(type, descs) with descs a list of
    (addr, len, dev, meta) tuples or an N x 3 numpy array (or 0 for an empty list); ixl's
    RegDList, with NIXL's list methods and pickling."""

    __slots__ = ()

    def __init__(self, type, descs=0):  # noqa: A002 (NIXL's parameter name)
        made = _descs.reg_dlist(_from(descs, "nixlRegDList"), _nixl._mem_index(type))
        super().__init__(made._mem, made._arr, made._n, made._metas, made._keep)

# -- constants ----------------------------------------------------------------------------
NIXL_INIT_AGENT = ""  # prep_xfer_dlist's initiator side ("NIXL_INIT_AGENT" is accepted too)
DEFAULT_COMM_PORT = _nixl.NIXL_DEFAULT_COMM_PORT  # 8888, the metadata listener's default
HAVE_UCX_GPU_DEVICE_API = False  # GPU-initiated transfers (NIXL's device API): not in ixl

# Memory segments by the values of ixl's memory types, which every call here takes (as it
# takes "DRAM", "FILE", ...): DRAM, VRAM and BLK have NIXL's values; FILE_SEG (3) and OBJ_SEG
# (4) are swapped with respect to NIXL's C++ enum. Use them by name, as NIXL programs do.
nixl_mem_t = _enum.IntEnum("nixl_mem_t", sorted(_nixl.SEGMENTS.items(), key=lambda kv: kv[1]),
                           module=__name__)


class nixl_xfer_op_t(_enum.IntEnum):
    NIXL_READ = _nixl.NIXL_READ
    NIXL_WRITE = _nixl.NIXL_WRITE


class nixl_status_t(_enum.IntEnum):
    NIXL_IN_PROG = 1
    NIXL_SUCCESS = 0
    NIXL_ERR_NOT_POSTED = -1
    NIXL_ERR_INVALID_PARAM = -2
    NIXL_ERR_BACKEND = -3
    NIXL_ERR_NOT_FOUND = -4
    NIXL_ERR_MISMATCH = -5
    NIXL_ERR_NOT_ALLOWED = -6
    NIXL_ERR_REPOST_ACTIVE = -7
    NIXL_ERR_UNKNOWN = -8
    NIXL_ERR_NOT_SUPPORTED = -9


class nixl_thread_sync_t(_enum.IntEnum):
    """The binding's thread-sync values; nixl._api.nixl_thread_sync_t is the class
    nixl_agent_config takes. ixl is thread-safe in every mode."""
    NIXL_THREAD_SYNC_NONE = 0
    NIXL_THREAD_SYNC_STRICT = 1
    NIXL_THREAD_SYNC_RW = 2
    NIXL_THREAD_SYNC_DEFAULT = 0  # an alias of NONE, as in NIXL


class nixl_cost_t(_enum.IntEnum):
    NIXL_COST_ANALYTICAL_BACKEND = 0


# Module-level names, as pybind11's export_values() gives them.
for _e in (nixl_mem_t, nixl_xfer_op_t, nixl_status_t, nixl_thread_sync_t, nixl_cost_t):
    globals().update(_e.__members__)
del _e

__all__ = (["nixlXferDList", "nixlRegDList", "nixlXferTelemetry", "NIXL_INIT_AGENT",
            "DEFAULT_COMM_PORT", "HAVE_UCX_GPU_DEVICE_API", "nixl_mem_t", "nixl_xfer_op_t",
            "nixl_status_t", "nixl_thread_sync_t", "nixl_cost_t"]
           + [c.__name__ for c in _errors.NIXL_ERRORS if c.__name__.startswith("nixl")]
           + [n for e in (nixl_mem_t, nixl_xfer_op_t, nixl_status_t, nixl_thread_sync_t,
                          nixl_cost_t) for n in e.__members__]
           + ["nixlRemoteDList"])

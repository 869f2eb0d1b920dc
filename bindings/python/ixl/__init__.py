"""ixl: the inference transfer library from Python, over libixl.so through ctypes.

    import ixl
    agent = ixl.Agent("decode")                 # default backends: IXL_BACKENDS (NET,POSIX)
    reg = agent.register_memory([buf])          # bytearray, mmap, numpy, torch, (addr, len, dev)
    meta = agent.get_agent_metadata()           # bytes, for the peer's add_remote_agent()

Method names and argument order follow NIXL's nixl_agent; `ixl.compat` provides nixl_agent and
nixl_agent_config themselves, so code written for NIXL moves by changing its import line.
"""
from . import errors
from ._lib import DEV_ASSIGNED_MIN, DEV_NONE, lib as _clib, status_name, text as _text
from .agent import (INIT_AGENT, Agent, AgentConfig, Backend, PrepHandle, XferHandle,
                    XferTelemetry, plugin_list)
from .descs import RegDList, XferDList, buffer_info
from .errors import *  # noqa: F401,F403 (one exception class per status)

__all__ = ["Agent", "AgentConfig", "Backend", "XferHandle", "PrepHandle", "XferTelemetry",
           "RegDList", "XferDList", "INIT_AGENT", "DEV_NONE", "DEV_ASSIGNED_MIN", "errors",
           "buffer_info", "plugin_list", "version", "strerror", "config", "set_log_level",
           "library_path"] + errors.__all__



def _package_version():
    """The repository's VERSION: written into _version.py when the package is built
    (setup.py); read from the source tree when the package is used from there."""
    try:
        from ._version import version as v
        return v
    except ImportError:
        pass
    import os
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    try:
        with open(os.path.join(repo, "VERSION")) as f:
            return f.read().strip()
    except OSError:
        return _text(_clib.ixl_version())  # neither: the library's


# The package's version; version() is the loaded library's (equal for a wheel, which carries
# its library, and for the source tree with its own build).
__version__ = _package_version()
library_path = _clib.path


def version():
    """libixl's version, "major.minor.patch"."""
    return _text(_clib.ixl_version())


def strerror(status):
    """The name of a status ("IXL_ERR_NOT_FOUND")."""
    return status_name(status)


def config():
    """ixl's configuration variables: {name: value}."""
    import ctypes
    from . import _lib
    out = {}
    var = _lib.ConfigVar()
    for i in range(_clib.ixl_config_count()):
        if _clib.ixl_config_get(i, ctypes.byref(var)) == 0:
            out[_text(var.name)] = _text(var.value)
    return out


def set_log_level(level):
    """Sets libixl's log level: "NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE" or 0-5."""
    names = ["NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
    _clib.ixl_log_set_level(names.index(level.upper()) if isinstance(level, str) else level)

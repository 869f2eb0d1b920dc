"""Loading libixl.so and declaring the C API of include/ixl/ixl.h for ctypes.

Where the library comes from, first match wins:
  0. The package's own directory: the libixl.so.0 a wheel built by wheels.py carries (always
     that one when it is there: its plugins and its version are the package's).
  1. IXL_LIBRARY: the path of libixl.so itself.
  2. IXL_BUILD_DIR: a build tree; its lib/libixl.so.
  3. The source tree this package sits in (bindings/python/ixl): <repo>/build/lib/libixl.so.
  4. The installed prefix, through the system's loader (ctypes.util.find_library("ixl")).
libixl finds its plugins by itself: IXL_PLUGIN_DIR, ixl/plugins and plugins/ next to
libixl.so, then the installed plugin directory (so a build tree's plugins come with its
library, and a wheel's ixl/plugins with the wheel's).
"""
import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_bool, c_char_p, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint16, c_uint32, c_uint64, c_void_p)

from . import errors

NAME_MAX = 256
DEV_NONE = (1 << 64) - 1
DEV_ASSIGNED_MIN = 1 << 62

OK = 0
IN_PROGRESS = 1

MEM_NAMES = ("DRAM", "VRAM", "BLK", "FILE", "OBJ")
OP_READ = 0
OP_WRITE = 1

AGENT_F_PROGRESS_THREAD = 1 << 0
AGENT_F_PROGRESS_PERIOD = 1 << 1
AGENT_F_LISTEN_PORT = 1 << 2
AGENT_F_LISTEN_ADDR = 1 << 3
AGENT_F_THREAD_MODE = 1 << 4
AGENT_F_TELEMETRY = 1 << 5
AGENT_F_BACKENDS = 1 << 6
AGENT_F_NOTIF_MAX = 1 << 7
AGENT_F_ETCD = 1 << 8
AGENT_F_AUTH_KEY = 1 << 9
AGENT_F_INSECURE_REMOTE = 1 << 10

REG_F_BACKENDS = 1 << 0
REG_F_DEVS_OUT = 1 << 1

MD_F_REGIONS = 1 << 0
MD_F_CONN_INFO = 1 << 1
MD_F_BACKENDS = 1 << 2
MD_F_LABEL = 1 << 3

XFER_F_NOTIF = 1 << 0
XFER_F_BACKENDS = 1 << 1
XFER_F_NO_MERGE = 1 << 2

PREP_F_BACKENDS = 1 << 0

CAP_LOCAL = 1 << 0
CAP_REMOTE = 1 << 1
CAP_NOTIF = 1 << 2
CAP_PROGRESS = 1 << 3


class Desc(Structure):
    _fields_ = [("addr", c_uint64), ("len", c_uint64), ("dev", c_uint64)]


class Run(Structure):
    _fields_ = [("addr", c_uint64), ("len", c_uint64), ("stride", c_uint64),
                ("count", c_uint64), ("dev", c_uint64)]


class RegDesc(Structure):
    _fields_ = [("addr", c_uint64), ("len", c_uint64), ("dev", c_uint64),
                ("bytes", c_void_p), ("bytes_len", c_size_t)]


class KV(Structure):
    _fields_ = [("key", c_char_p), ("value", c_char_p)]


# enum ixl_opt_type (ixl_types.h): the type of a backend option.
OPT_BOOL = 1
OPT_INT = 2
OPT_SIZE = 3
OPT_DURATION = 4
OPT_ENUM = 5
OPT_STRING = 6
OPT_TYPE_NAMES = {OPT_BOOL: "bool", OPT_INT: "int", OPT_SIZE: "size", OPT_DURATION: "duration",
                  OPT_ENUM: "enum", OPT_STRING: "string"}


class Option(Structure):
    """struct ixl_option: frozen layout (arrays of it cannot grow)."""
    _fields_ = [("name", c_char_p), ("default_value", c_char_p), ("description", c_char_p),
                ("type", c_int), ("flags", c_uint32), ("unit", c_char_p), ("min", c_int64),
                ("max", c_int64), ("choices", POINTER(c_char_p)), ("reserved", c_void_p * 4)]


class OptValue(Structure):
    """struct ixl_opt_value: an option's parsed value (frozen layout)."""
    _fields_ = [("i", c_int64), ("u", c_uint64), ("str", c_char_p), ("reserved", c_uint64 * 2)]


class _Sized(Structure):
    """An output struct that grows "size first" (ixl.h): size is set to the struct's size as
    this binding knows it, before every call that fills it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.size = ctypes.sizeof(self)


class PluginInfo(_Sized):
    _fields_ = [("size", c_uint32), ("name", c_char_p), ("version", c_char_p),
                ("abi_major", c_uint), ("abi_minor", c_uint), ("caps", c_uint32), ("mem_mask", c_uint32),
                ("builtin", c_bool), ("path", c_char_p), ("options", POINTER(Option)),
                ("n_options", c_size_t)]


class ConfigVar(_Sized):
    _fields_ = [("size", c_uint32), ("name", c_char_p), ("value", c_char_p), ("default_value", c_char_p),
                ("description", c_char_p)]


class DeviceInfo(_Sized):
    _fields_ = [("size", c_uint32), ("ordinal", c_int32), ("name", ctypes.c_char * 128),
                ("total_mem", c_uint64), ("cc_major", c_int32), ("cc_minor", c_int32),
                ("pci_bus", c_int32)]


class AgentParams(Structure):
    _fields_ = [("field_mask", c_uint64), ("progress_thread", c_bool),
                ("progress_period_us", c_uint32), ("listen_port", c_uint16),
                ("listen_addr", c_char_p), ("thread_mode", c_int), ("telemetry", c_bool),
                ("backends", c_char_p), ("notif_max", c_size_t), ("etcd_endpoints", c_char_p),
                ("auth_key", c_char_p), ("insecure_remote", c_bool)]


class RegParams(Structure):
    _fields_ = [("field_mask", c_uint64), ("backends", POINTER(c_void_p)),
                ("n_backends", c_size_t), ("devs_out", POINTER(c_uint64))]


class MemQuery(Structure):
    _fields_ = [("exists", c_bool), ("size", c_uint64)]


class MdParams(Structure):
    _fields_ = [("field_mask", c_uint64), ("regions", c_void_p), ("conn_info", c_bool),
                ("backends", POINTER(c_void_p)), ("n_backends", c_size_t),
                ("label", c_char_p)]


class Peer(Structure):
    _fields_ = [("addr", c_char_p), ("port", c_uint16)]


class XferParams(Structure):
    _fields_ = [("field_mask", c_uint64), ("notif", c_void_p), ("notif_len", c_size_t),
                ("backends", POINTER(c_void_p)), ("n_backends", c_size_t),
                ("no_merge", c_bool)]


class XferTelemetry(_Sized):
    _fields_ = [("size", c_uint32), ("post_us", c_uint64), ("xfer_us", c_uint64), ("bytes", c_uint64),
                ("desc_count", c_uint64), ("post_count", c_uint64)]


class XferInfo(_Sized):
    _fields_ = [("size", c_uint32), ("backend", c_char_p), ("path", c_char_p), ("desc_count", c_uint64),
                ("bytes", c_uint64)]


class Cost(_Sized):
    _fields_ = [("size", c_uint32), ("duration_us", c_uint64), ("error_margin_us", c_uint64), ("method", c_int)]


class PrepParams(Structure):
    _fields_ = [("field_mask", c_uint64), ("backends", POINTER(c_void_p)),
                ("n_backends", c_size_t)]


class Notif(Structure):
    _fields_ = [("agent", c_char_p), ("msg", c_void_p), ("len", c_size_t)]


class NotifBatchHead(Structure):
    """struct ixl_notif_batch without its flexible array (items follow at sizeof)."""
    _fields_ = [("count", c_size_t)]


class AgentStats(_Sized):
    _fields_ = [("size", c_uint32), ("posted", c_uint64), ("completed", c_uint64), ("failed", c_uint64),
                ("bytes", c_uint64), ("notifs_received", c_uint64),
                ("notifs_sent", c_uint64)]


_st = c_int  # enum ixl_status
_p = c_void_p  # opaque handles and arrays passed as addresses
_pp = POINTER(c_void_p)

# name: (restype, argtypes)
_PROTOTYPES = {
    "ixl_strerror": (c_char_p, [c_int]),
    "ixl_version": (c_char_p, []),
    "ixl_free": (None, [_p]),
    "ixl_mem_name": (c_char_p, [c_int]),
    "ixl_mem_parse": (_st, [c_char_p, POINTER(c_int)]),
    "ixl_dlist_create": (_st, [c_int, c_size_t, _pp]),
    "ixl_dlist_destroy": (None, [_p]),
    "ixl_dlist_add": (_st, [_p, _p, c_size_t]),
    "ixl_dlist_add_runs": (_st, [_p, _p, c_size_t]),
    "ixl_dlist_type": (c_int, [_p]),
    "ixl_dlist_count": (c_uint64, [_p]),
    "ixl_dlist_run_count": (c_size_t, [_p]),
    "ixl_dlist_get": (_st, [_p, c_uint64, POINTER(Desc)]),
    "ixl_dlist_get_run": (_st, [_p, c_size_t, POINTER(Run)]),
    "ixl_dlist_serialize": (_st, [_p, _pp, POINTER(c_size_t)]),
    "ixl_dlist_deserialize": (_st, [_p, c_size_t, _pp]),
    "ixl_log_set_level": (None, [c_int]),
    "ixl_log_get_level": (c_int, []),
    "ixl_config_count": (c_size_t, []),
    "ixl_config_get": (_st, [c_size_t, POINTER(ConfigVar)]),
    "ixl_config_value": (c_char_p, [c_char_p]),
    "ixl_plugin_count": (c_size_t, []),
    "ixl_plugin_get": (_st, [c_size_t, POINTER(PluginInfo)]),
    "ixl_plugin_find": (_st, [c_char_p, POINTER(PluginInfo)]),
    "ixl_plugin_refused_count": (c_size_t, []),
    "ixl_plugin_refused_get": (_st, [c_size_t, POINTER(c_char_p), POINTER(c_char_p)]),
    "ixl_device_count": (c_int, [c_char_p, c_size_t]),
    "ixl_device_driver_version": (_st, [POINTER(c_int)]),
    "ixl_device_info": (_st, [c_int, POINTER(DeviceInfo)]),
    "ixl_option_describe": (_st, [POINTER(Option), c_char_p, c_size_t]),
    "ixl_option_parse": (_st, [POINTER(Option), c_char_p, POINTER(OptValue), c_char_p, c_size_t]),
    "ixl_agent_create": (_st, [c_char_p, POINTER(AgentParams), _pp]),
    "ixl_agent_destroy": (None, [_p]),
    "ixl_agent_name": (c_char_p, [_p]),
    "ixl_agent_last_error": (c_char_p, [_p]),
    "ixl_backend_create": (_st, [_p, c_char_p, POINTER(KV), c_size_t, _pp]),
    "ixl_backend_destroy": (_st, [_p]),
    "ixl_backend_count": (c_size_t, [_p]),
    "ixl_backend_get": (_st, [_p, c_size_t, _pp]),
    "ixl_backend_find": (_st, [_p, c_char_p, _pp]),
    "ixl_backend_name": (c_char_p, [_p]),
    "ixl_backend_caps": (c_uint32, [_p]),
    "ixl_backend_mem_mask": (c_uint32, [_p]),
    "ixl_backend_mem_why": (c_char_p, [_p]),
    "ixl_backend_params": (_st, [_p, POINTER(POINTER(KV)), POINTER(c_size_t)]),
    "ixl_mem_register": (_st, [_p, c_int, _p, c_size_t, POINTER(RegParams)]),
    "ixl_mem_deregister": (_st, [_p, c_int, _p, c_size_t, POINTER(RegParams)]),
    "ixl_mem_query": (_st, [_p, c_int, _p, c_size_t, _p, POINTER(MemQuery)]),
    "ixl_mem_alloc": (_st, [_p, c_int, c_size_t, _p, _pp]),
    "ixl_mem_free": (_st, [_p, _p]),
    "ixl_md_get": (_st, [_p, POINTER(MdParams), _pp, POINTER(c_size_t)]),
    "ixl_md_load": (_st, [_p, _p, c_size_t, c_char_p, c_size_t]),
    "ixl_remote_invalidate": (_st, [_p, c_char_p]),
    "ixl_remote_check": (_st, [_p, c_char_p, _p]),
    "ixl_remote_connect": (_st, [_p, c_char_p]),
    "ixl_md_send": (_st, [_p, POINTER(Peer), POINTER(MdParams)]),
    "ixl_md_fetch": (_st, [_p, c_char_p, POINTER(Peer), c_char_p]),
    "ixl_md_fetch_status": (_st, [_p, c_char_p]),
    "ixl_md_invalidate_local": (_st, [_p, POINTER(Peer)]),
    "ixl_agent_listen_port": (_st, [_p, POINTER(c_uint16)]),
    "ixl_xfer_create": (_st, [_p, c_int, _p, _p, c_char_p, POINTER(XferParams), _pp]),
    "ixl_xfer_post": (_st, [_p]),
    "ixl_xfer_status": (_st, [_p]),
    "ixl_xfer_wait": (_st, [_p, c_int]),
    "ixl_xfer_release": (_st, [_p]),
    "ixl_xfer_set_notif": (_st, [_p, _p, c_size_t]),
    "ixl_xfer_telemetry": (_st, [_p, POINTER(XferTelemetry)]),
    "ixl_xfer_info": (_st, [_p, POINTER(XferInfo)]),
    "ixl_xfer_estimate": (_st, [_p, POINTER(Cost)]),
    "ixl_prep_create": (_st, [_p, c_char_p, _p, POINTER(PrepParams), _pp]),
    "ixl_prep_destroy": (None, [_p]),
    "ixl_prep_count": (c_uint64, [_p]),
    "ixl_xfer_create_prepped": (_st, [_p, c_int, _p, _p, _p, _p, c_size_t,
                                      POINTER(XferParams), _pp]),
    "ixl_notif_drain": (_st, [_p, _pp]),
    "ixl_notif_send": (_st, [_p, c_char_p, _p, c_size_t, _p]),
    "ixl_agent_fd": (_st, [_p, POINTER(c_int)]),
    "ixl_agent_progress": (_st, [_p]),
    "ixl_agent_stats": (_st, [_p, POINTER(AgentStats)]),
}


HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(HERE, "libixl.so.0")


def _candidates():
    if os.path.exists(BUNDLED):
        return [BUNDLED]
    env = os.environ.get("IXL_LIBRARY")
    if env:
        return [env]
    paths = []
    build = os.environ.get("IXL_BUILD_DIR")
    if build:
        paths.append(os.path.join(build, "lib", "libixl.so"))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    paths.append(os.path.join(repo, "build", "lib", "libixl.so"))
    paths = [p for p in paths if os.path.exists(p)]
    found = ctypes.util.find_library("ixl")
    if found:
        paths.append(found)
    paths.append("libixl.so.0")
    return paths


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        lib.path = path
        return lib
    if os.path.exists(BUNDLED):
        raise ImportError("ixl: cannot load the libixl.so.0 this package carries (a system "
                          "library it links is missing? see docs/python.md): " + tried[0])
    raise ImportError("ixl: cannot load libixl.so (set IXL_LIBRARY to its path, or "
                      "IXL_BUILD_DIR to a build tree); tried: " + "; ".join(tried))


lib = _load()


def text(raw):
    """A C string from the library as str ("" for NULL)."""
    return raw.decode("utf-8", "replace") if raw else ""


def status_name(status):
    return text(lib.ixl_strerror(status))


def check(status, agent=None, what=""):
    """Raises the status's exception for a negative status; returns the status otherwise."""
    if status >= 0:
        return status
    detail = text(lib.ixl_agent_last_error(agent)) if agent else ""
    raise errors.from_status(status, status_name(status), detail, what)


def check_agentless(status, what=""):
    """check() for the calls that need no agent (ixl_option_*): the reason is the calling
    thread's ixl_agent_last_error(NULL)."""
    if status >= 0:
        return status
    raise errors.from_status(status, status_name(status), text(lib.ixl_agent_last_error(None)),
                             what)


def option_describe(opt):
    """What an Option accepts, as ixl-info prints it ("size 4K..1G bytes")."""
    buf = ctypes.create_string_buffer(1024)
    check_agentless(lib.ixl_option_describe(ctypes.byref(opt), buf, len(buf)),
                    "ixl_option_describe")
    return text(buf.value)

"""NIXL 1.4.0's Python API (`nixl._api`) on ixl: the one implementation behind `ixl.compat`
and the `nixl` compatibility package.

The two names differ only in defaults, which `make_api(default_port, default_backends)` binds
into the signatures (inspect.signature shows them as NIXL's does):

    ixl.compat:  make_api(0, None)         # ixl's: IXL_BACKENDS, any free listener port
    nixl._api:   make_api(8888, ["UCX"])   # NIXL's: DEFAULT_COMM_PORT, ["UCX"]

Everything else (the agent's behaviour, handles, descriptor lists, exceptions, the
thread-sync enum) is shared: a list or handle made through one name is usable through the
other. NIXL's conventions followed here, where ixl.Agent's own differ:

- An empty agent name raises ValueError; an unknown operation or memory type raises KeyError.
- get_xfer_descs / get_reg_descs / get_remote_descs return None, with a log line, for
  malformed input (tuples of the wrong width, no memory type for tuples or an N x 3 array, a
  list of the other kind, a non-contiguous tensor); ixl's buffers (bytearray, mmap, numpy
  arrays in a list) and strided runs (5-tuples, N x 5 arrays) are accepted besides.
- Unknown plugin or backend names give empty results from get_plugin_* / get_backend_*.
- add_remote_agent returns the name as bytes; create_backend returns None; estimate_xfer_cost
  reports "ANALYTICAL_BACKEND" / "UNKNOWN" (ixl adds "MEASURED").
- get_serialized_descs pickles the list (NIXL's format); deserialize_descs unpickles with
  a restricted unpickler that only rebuilds descriptor lists (it never runs other code), and
  also takes ixl's own serialized lists.
- deregister_memory while prepared lists or requests of this agent use the memory: NIXL
  accepts it, and so does this API, safely: those lists and requests are invalidated first
  (released; any later use raises nixlNotAllowedError), then the memory is deregistered. A
  request still in flight that cannot be stopped defers the deregistration until it is
  released (each release retries it; close() does it at the latest).
- NIXL_ETCD_ENDPOINTS is the agent's etcd, as in NIXL, unless ixl's etcd_endpoints option or
  IXL_ETCD_ENDPOINTS names one.
- NIXL_TELEMETRY_ENABLE (y/yes/on/true/1) turns capture on whatever capture_telemetry says,
  as in NIXL (any other value leaves it to capture_telemetry); get_xfer_telemetry's
  descCount counts the descriptors the request was made with, and backendName names the
  backend.
- Every nixl_thread_sync_t mode is accepted (a TypeError for anything else, as in NIXL); an
  ixl agent is thread-safe in all of them.
"""
import copy
import enum
import io
import logging
import os
import pickle
import weakref

from . import _lib
from .agent import INIT_AGENT, Agent, AgentConfig, PrepHandle, XferHandle, XferTelemetry, \
    plugin_info, plugin_list
from .descs import RegDList, XferDList, reg_dlist, xfer_dlist
from .errors import Error, nixlNotSupportedError

try:
    import numpy as np
except ImportError:
    np = None

logger = logging.getLogger("ixl.nixl")

NIXL_DEFAULT_COMM_PORT = 8888  # NIXL's DEFAULT_COMM_PORT (nixl._bindings)



class nixl_mem_t(str, enum.Enum):
    """nixl._bindings' memory segments. Each is also the memory type's name as ixl writes it,
    so getType() of a list ("DRAM") equals DRAM_SEG, and every call taking a memory type takes
    them. (NIXL's integer values differ from ixl's enum: compare members, not ints.)"""

    DRAM_SEG = "DRAM"
    VRAM_SEG = "VRAM"
    BLK_SEG = "BLK"
    OBJ_SEG = "OBJ"
    FILE_SEG = "FILE"


SEGMENTS = {m.name: m for m in nixl_mem_t}
NIXL_READ = _lib.OP_READ
NIXL_WRITE = _lib.OP_WRITE
# NIXL's names of memory types (nixl_agent.nixl_mems), plus ixl's BLK.
_MEMS = {"DRAM": "DRAM", "VRAM": "VRAM", "FILE": "FILE", "BLOCK": "BLK", "BLK": "BLK",
         "OBJ": "OBJ", "cpu": "DRAM", "cuda": "VRAM"}
_OPS = {"WRITE": NIXL_WRITE, "READ": NIXL_READ}
_TRUE = ("y", "yes", "on", "true", "1")


class nixl_thread_sync_t(enum.Enum):
    """NIXL's thread-synchronization modes (DEFAULT is NONE, as in NIXL). ixl agents are
    thread-safe in every mode."""

    NIXL_THREAD_SYNC_NONE = 0
    NIXL_THREAD_SYNC_STRICT = 1
    NIXL_THREAD_SYNC_RW = 2
    NIXL_THREAD_SYNC_DEFAULT = 0


nixl_backend_handle = int
nixl_xfer_handle = XferHandle
nixl_prepped_dlist_handle = PrepHandle


class RemoteDList:
    """NIXL's nixlRemoteDList: descriptors (addr, len, dev, remote agent name) of one memory
    type. Its only consumer in NIXL, prep_mem_view, needs a GPU device API (not supported)."""

    __slots__ = ("_mem", "_descs")

    def __init__(self, type, descs=()):  # noqa: A002 (NIXL's name)
        self._mem = _lib.MEM_NAMES[_mem_index(type)]
        self._descs = [(int(a), int(n), int(d), str(name)) for a, n, d, name in descs]

    def getType(self):
        return self._mem

    def descCount(self):
        return len(self._descs)

    def isEmpty(self):
        return not self._descs

    def __len__(self):
        return len(self._descs)

    def __getitem__(self, i):
        return self._descs[i]

    def __iter__(self):
        return iter(self._descs)

    def __eq__(self, other):
        return isinstance(other, RemoteDList) and (self._mem, self._descs) == \
            (other._mem, other._descs)

    def __reduce__(self):
        return (RemoteDList, (self._mem, list(self._descs)))

    def __repr__(self):
        return f"RemoteDList({self._mem}, {len(self._descs)} descriptors)"


def _mem_index(value):
    """ixl's enum value of a memory type: NIXL's names, ixl's, or a segment constant.
    KeyError otherwise (NIXL's self.nixl_mems[mem_type])."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(_lib.MEM_NAMES):
            return value
        raise KeyError(value)
    name = _MEMS.get(value) if isinstance(value, str) else None
    if name is None:
        raise KeyError(value)
    return _lib.MEM_NAMES.index(name)


def _is_tuple_list(descs):
    return isinstance(descs, (list, tuple)) and len(descs) > 0 and isinstance(descs[0], tuple)


def _is_ndarray(obj):
    return np is not None and isinstance(obj, np.ndarray)


class _Unpickler(pickle.Unpickler):
    """Rebuilds descriptor lists only: pickled data from a peer never runs other code."""

    _ALLOWED = {("ixl.descs", "_xfer_dlist_from_bytes"), ("ixl.descs", "_reg_dlist_from_values"),
                ("ixl._nixl", "RemoteDList"),
                ("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
                ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"ixl: deserialize_descs rebuilds descriptor lists only, "
                                     f"not {module}.{name}")


class NixlAgentConfigBase(AgentConfig):
    """What nixl_agent_config of either name holds (NIXL's attribute names)."""

    def _nixl_init(self, enable_prog_thread, enable_listen_thread, listen_port,
                   capture_telemetry, num_threads, backends, sync_mode, ixl_options):
        if sync_mode is not None and not isinstance(sync_mode, nixl_thread_sync_t):
            raise TypeError("sync_mode must be a nixl_thread_sync_t (got "
                            f"{type(sync_mode).__name__!r})")
        AgentConfig.__init__(self, enable_prog_thread, enable_listen_thread, listen_port,
                             capture_telemetry, num_threads, backends, **ixl_options)
        self.sync_mode = sync_mode

    def _params(self):
        # NIXL's rule: NIXL_TELEMETRY_ENABLE=y/yes/on/1 turns capture on; otherwise
        # capture_telemetry decides (NIXL's test_get_xfer_telemetry_cfg: "no" + True is on).
        env = os.environ.get("NIXL_TELEMETRY_ENABLE")
        conf = copy.copy(self)  # this one stays as the caller made it
        if env is not None and env.strip().lower() in _TRUE:
            conf.capture_telemetry = True
        # NIXL_ETCD_ENDPOINTS, as NIXL reads it at agent creation (ixl's etcd_endpoints
        # option and IXL_ETCD_ENDPOINTS, when given, come first).
        etcd = os.environ.get("NIXL_ETCD_ENDPOINTS")
        if etcd and conf.etcd_endpoints is None:
            from . import config
            if not config().get("IXL_ETCD_ENDPOINTS"):
                conf.etcd_endpoints = etcd
        if conf.backends is not None:
            conf.backends = []  # created one by one by nixl_agent (NIXL skips missing plugins)
        return AgentConfig._params(conf)


class NixlAgentBase(Agent):
    """nixl_agent's behaviour; make_api's subclasses add the defaults of their name."""

    _default_config = None  # set by make_api
    _tracks_users = True  # deregister_memory invalidates the lists and requests using it

    def _nixl_init(self, agent_name, nixl_conf, instantiate_all):
        if isinstance(agent_name, bytes):
            agent_name = agent_name.decode()
        if not agent_name:
            raise ValueError("nixl_agent: the agent name must not be empty")
        if nixl_conf is not None and instantiate_all:
            logger.warning("Ignoring instantiate_all based on the provided config in agent "
                           "creation.")
            instantiate_all = False
        conf = nixl_conf if nixl_conf is not None else self._default_config()
        self._invalid = weakref.WeakSet()  # live handles deregister_memory may invalidate
        self._pending_dereg = []  # (RegDList, backends) deferred by a request in flight
        Agent.__init__(self, agent_name, conf, False)
        names = list(self.plugin_list) if instantiate_all else conf.backends
        for name in names or ():
            if name in self.backends:
                continue
            if name not in self.plugin_list:
                logger.warning("Skipping backend registration %s due to the missing plugin.",
                               name)
                continue
            try:
                self.create_backend(name, {})
            except Error:
                if not instantiate_all:
                    self.close()
                    raise
        self.nixl_mems = dict(_MEMS)
        self.nixl_ops = dict(_OPS)

    # -- handles this API may invalidate ----------------------------------------------------

    def _track(self, handle):
        if handle._local:
            self._invalid.add(handle)
        return Agent._track(self, handle)

    # -- plugins and backends ---------------------------------------------------------------

    # nixl_agent's tables, as attributes: {plugin or backend name: its answer}.
    @property
    def plugin_mem_types(self):
        return {p: Agent.get_plugin_mem_types(self, p) for p in self.plugin_list}

    @property
    def plugin_b_options(self):
        return {p: Agent.get_plugin_params(self, p) for p in self.plugin_list}

    @property
    def backend_mems(self):
        return {b: Agent.get_backend_mem_types(self, b) for b in self.backends}

    @property
    def backend_options(self):
        return {b: Agent.get_backend_params(self, b) for b in self.backends}

    def get_plugin_list(self):
        return list(self.plugin_list)

    def get_plugin_mem_types(self, backend):
        if backend not in self.plugin_list:
            logger.warning("Plugin %s is not available to get its supported mem types.",
                           backend)
            return []
        return Agent.get_plugin_mem_types(self, backend)

    def get_plugin_params(self, backend):
        if backend not in self.plugin_list:
            logger.warning("Plugin %s is not available to get its parameters.", backend)
            return {}
        return Agent.get_plugin_params(self, backend)

    def get_backend_mem_types(self, backend):
        if backend not in self.backends:
            logger.warning("Backend %s not instantiated to get its supported mem types.",
                           backend)
            return []
        return Agent.get_backend_mem_types(self, backend)

    def get_backend_params(self, backend):
        if backend not in self.backends:
            logger.warning("Backend %s not instantiated to get its parameters.", backend)
            return {}
        return Agent.get_backend_params(self, backend)

    def create_backend(self, backend, initParams={}):  # noqa: B006 (NIXL's signature)
        Agent.create_backend(self, backend, initParams)

    def _backend_names(self, backends):
        """NIXL's self.backends[name] for each: KeyError for a backend not created."""
        for name in backends or ():
            if name not in self.backends:
                raise KeyError(name)
        return list(backends or ())

    # -- descriptor lists -------------------------------------------------------------------

    @staticmethod
    def _mem(mem_type):
        return None if mem_type is None else _lib.MEM_NAMES[_mem_index(mem_type)]

    def get_xfer_descs(self, descs, mem_type=None):
        if isinstance(descs, XferDList):
            return descs
        if isinstance(descs, RegDList):
            logger.error("RegList type detected for transfer, please use XferList")
            return None
        mem = self._mem(mem_type)  # KeyError first, as in NIXL
        if _is_tuple_list(descs) or _is_ndarray(descs):
            if mem is None:
                logger.error("Please specify a mem type if not using Tensors")
                return None
            width = descs.shape[1] if _is_ndarray(descs) and descs.ndim == 2 else \
                None if _is_ndarray(descs) else len(descs[0])
            if width not in (3, 5):  # 5: ixl's strided runs
                logger.error("3-tuple list (or N x 3 array) needed for transfer")
                return None
        try:
            return xfer_dlist(descs, mem)
        except (TypeError, ValueError, IndexError) as e:
            logger.error("get_xfer_descs: %s", e)
            return None

    def get_reg_descs(self, descs, mem_type=None):
        if isinstance(descs, RegDList):
            return descs
        if isinstance(descs, XferDList):
            logger.error("XferList type detected for registration, please use RegList")
            return None
        mem = self._mem(mem_type)
        if _is_tuple_list(descs) or _is_ndarray(descs):
            if mem is None:
                logger.error("Please specify a mem type if not using Tensors")
                return None
            ok = (descs.ndim == 2 and descs.shape[1] == 3) if _is_ndarray(descs) else \
                len(descs[0]) == 4
            if not ok:
                logger.error("4-tuple list (or N x 3 array) needed for registration")
                return None
        try:
            return reg_dlist(descs, mem)
        except (TypeError, ValueError, IndexError) as e:
            logger.error("get_reg_descs: %s", e)
            return None

    def get_remote_descs(self, descs, mem_type=None):
        if isinstance(descs, RemoteDList):
            return descs
        if not _is_tuple_list(descs):
            return None
        if mem_type is None:
            logger.error("Please specify a mem type")
            return None
        if len(descs[0]) != 4:
            logger.error("4-tuple list (addr, len, dev_id, agent_name) needed for remote "
                         "descriptors")
            return None
        try:
            return RemoteDList(mem_type, descs)
        except (TypeError, ValueError) as e:
            logger.error("get_remote_descs: %s", e)
            return None

    def get_serialized_descs(self, descs):
        return pickle.dumps(descs)

    def deserialize_descs(self, serialized_descs):
        data = bytes(serialized_descs)
        if data[:1] == b"\x80":  # a pickle (NIXL's format)
            return _Unpickler(io.BytesIO(data)).load()
        return XferDList.deserialize(data)  # ixl's own serialized list

    # -- memory -----------------------------------------------------------------------------

    def _descs_or_raise(self, descs, what):
        if descs is None:
            raise TypeError(f"{what}: no descriptor list (the conversion logged why)")
        return descs

    def register_memory(self, reg_list, mem_type=None, backends=[]):  # noqa: B006
        descs = self._descs_or_raise(self.get_reg_descs(reg_list, mem_type), "register_memory")
        return Agent.register_memory(self, descs, None, False, self._backend_names(backends))

    def deregister_memory(self, dereg_list, backends=[]):  # noqa: B006
        descs = reg_dlist(self._descs_or_raise(dereg_list, "deregister_memory"))
        names = self._backend_names(backends)
        self._invalidate_users(descs)
        try:
            Agent.deregister_memory(self, descs, names)
        except _lib.errors.BusyError:
            # A request in flight that could not be stopped: deregistered when released.
            self._pending_dereg.append((descs, names))

    def _invalidate_users(self, descs):
        """Releases this agent's prepared lists and requests that use the regions of descs;
        their later use raises nixlNotAllowedError."""
        live = [h for h in list(self._invalid) if h._ptr]
        if not live:
            return
        regions = [(descs._mem,) + descs._row(i) for i in range(len(descs))]
        why = ("invalidated: deregister_memory of memory it uses (NIXL API); make a new one "
               "over registered memory")
        for h in live:
            if not any(_overlaps(dl, regions) for dl in h._local):
                continue
            if isinstance(h, XferHandle):
                if h._release() is not True:
                    continue  # in flight and not stoppable yet: deregistration deferred
            else:
                h._release()
            h._dead = f"{h._what} {why}"

    def _retry_pending(self):
        pending, self._pending_dereg = self._pending_dereg, []
        for descs, names in pending:
            try:
                Agent.deregister_memory(self, descs, names)
            except _lib.errors.BusyError:
                self._pending_dereg.append((descs, names))

    def query_memory(self, reg_list, backend, mem_type=None):
        descs = self._descs_or_raise(self.get_reg_descs(reg_list, mem_type), "query_memory")
        if backend not in self.backends:
            raise ValueError(f"Backend '{backend}' not found. Available backends: "
                             f"{list(self.backends)}")
        if descs.mem_type != "FILE":
            return [None if r is None else {k: str(v) for k, v in r.items()}
                    for r in Agent.query_memory(self, descs, backend)]
        out = []
        for i in range(len(descs)):
            addr, length, dev, meta = descs[i]
            if not meta:  # an open fd, no path: ixl's backend answers
                r = Agent.query_memory(self, [(addr, length, dev, "")], backend, "FILE")[0]
                out.append(None if r is None else {"size": str(r["size"])})
                continue
            # NIXL's (0, 0, 0, path) entries name the file by path; ixl's path mode
            # (dev None, "MODE:PATH") too.
            path = meta.split(":", 1)[1] if dev == _lib.DEV_NONE and ":" in meta else meta
            try:
                st = os.stat(path)
            except OSError:
                out.append(None)
                continue
            out.append({"size": str(st.st_size), "mode": str(st.st_mode),
                        "mtime": str(int(st.st_mtime))})
        return out

    # -- transfers --------------------------------------------------------------------------

    def make_connection(self, remote_agent, backends=[]):  # noqa: B006
        self._backend_names(backends)
        Agent.make_connection(self, remote_agent)

    def prep_xfer_dlist(self, agent_name, xfer_list, mem_type=None, backends=[]):  # noqa: B006
        descs = self._descs_or_raise(self.get_xfer_descs(xfer_list, mem_type),
                                     "prep_xfer_dlist")
        return Agent.prep_xfer_dlist(self, agent_name, descs, None, False,
                                     self._backend_names(backends))

    def estimate_xfer_cost(self, req_handle):
        duration, margin, method = Agent.estimate_xfer_cost(self, req_handle)
        return duration, margin, "ANALYTICAL_BACKEND" if method == "ANALYTICAL" else method

    def make_prepped_xfer(self, operation, local_xfer_side, local_indices, remote_xfer_side,
                          remote_indices, notif_msg=b"", backends=[],  # noqa: B006
                          skip_desc_merge=False):
        _OPS[operation]  # KeyError for anything but READ / WRITE, before anything else
        return Agent.make_prepped_xfer(self, operation, local_xfer_side, local_indices,
                                       remote_xfer_side, remote_indices, notif_msg,
                                       self._backend_names(backends), skip_desc_merge)

    def initialize_xfer(self, operation, local_descs, remote_descs, remote_agent,
                        notif_msg=b"", backends=[]):  # noqa: B006
        _OPS[operation]
        return Agent.initialize_xfer(self, operation, local_descs, remote_descs, remote_agent,
                                     notif_msg, self._backend_names(backends))

    def get_xfer_telemetry(self, handle):
        t = Agent.get_xfer_telemetry(self, handle)
        t.backendName = self.query_xfer_backend(handle)
        return t

    def release_xfer_handle(self, handle):
        Agent.release_xfer_handle(self, handle)
        if self._pending_dereg:
            self._retry_pending()

    def release_dlist_handle(self, handle):
        Agent.release_dlist_handle(self, handle)
        if self._pending_dereg:
            self._retry_pending()

    def prep_mem_view(self, dlist, *, backends=None):
        raise nixlNotSupportedError("prep_mem_view: memory views are NIXL's UCX GPU device "
                                    "API (HAVE_UCX_GPU_DEVICE_API); ixl does not provide them",
                                    status=-401)

    def release_mem_view(self, mvh):
        raise nixlNotSupportedError("release_mem_view: ixl makes no memory views "
                                    "(prep_mem_view)", status=-401)

    # -- notifications ----------------------------------------------------------------------

    def get_new_notifs(self, backends=[]):  # noqa: B006
        self._backend_names(backends)  # ixl drains every backend's notifications at once
        return Agent.get_new_notifs(self)

    def update_notifs(self, backends=[]):  # noqa: B006
        self._backend_names(backends)
        return Agent.update_notifs(self)

    def check_remote_xfer_done(self, remote_agent_name, lookup_tag, backends=[],  # noqa: B006
                               tag_is_prefix=True):
        self._backend_names(backends)
        return Agent.check_remote_xfer_done(self, remote_agent_name, lookup_tag, tag_is_prefix)

    def send_notif(self, remote_agent_name, notif_msg, backend=None):
        Agent.send_notif(self, remote_agent_name, notif_msg, backend)

    # -- metadata ---------------------------------------------------------------------------

    def get_partial_agent_metadata(self, descs, inc_conn_info=False, backends=[]):  # noqa
        return Agent.get_partial_agent_metadata(self, descs, inc_conn_info,
                                                self._backend_names(backends))

    def add_remote_agent(self, metadata):
        return Agent.add_remote_agent(self, metadata).encode()

    def remove_remote_agent(self, agent):
        Agent.remove_remote_agent(self, agent)

    def check_remote_metadata(self, agent, descs=None):
        return Agent.check_remote_metadata(self, agent, descs)

    def _send_local_metadata(self, ip_addr, port):
        Agent.send_local_metadata(self, ip_addr, port)

    def _send_partial(self, descs, inc_conn_info, backends, ip_addr, port, label):
        Agent.send_partial_agent_metadata(self, descs, inc_conn_info,
                                          self._backend_names(backends), ip_addr, port, label)

    def _fetch(self, remote_agent, ip_addr, port, label):
        Agent.fetch_remote_metadata(self, remote_agent, ip_addr, port, label)

    def _invalidate_local(self, ip_addr, port):
        Agent.invalidate_local_metadata(self, ip_addr, port)


def _overlaps(dl, regions):
    """Whether any descriptor of dl (strided runs) meets one of regions (mem, addr, len, dev)."""
    mem = _lib.lib.ixl_dlist_type(dl.ptr) if dl.ptr else None
    mine = [(a, n) for m, a, n, d in regions if m == mem]
    if not mine:
        return False
    devs = {d for m, a, n, d in regions if m == mem}
    for addr, length, stride, count, dev in dl.runs():
        if dev not in devs:
            continue
        for a, n in mine:
            lo, hi = a, a + (n or (1 << 64))  # len 0: a whole file
            if count <= 1 or stride == 0:
                if addr < hi and addr + length > lo:
                    return True
                continue
            k = max(0, -(-(lo - addr - length + 1) // stride))  # first run ending past lo
            if k < count and addr + k * stride < hi:
                return True
    return False


def bindings_names():
    """What `nixl._bindings` exports that Python code imports, made from ixl's objects:
    {name: object}. The classes nixlAgent / nixlAgentConfig (NIXL's C++ agent bound with
    pybind11) have no counterpart: nixl_agent is the agent here."""
    from . import errors
    names = dict(SEGMENTS)
    names.update({
        "nixl_mem_t": nixl_mem_t, "NIXL_READ": NIXL_READ, "NIXL_WRITE": NIXL_WRITE,
        "NIXL_INIT_AGENT": INIT_AGENT, "DEFAULT_COMM_PORT": NIXL_DEFAULT_COMM_PORT,
        "NIXL_COST_ANALYTICAL_BACKEND": 1,  # ixl_cost_method's IXL_COST_ANALYTICAL
        "HAVE_UCX_GPU_DEVICE_API": False,
        "nixlXferDList": XferDList, "nixlRegDList": RegDList, "nixlRemoteDList": RemoteDList,
        "nixlXferTelemetry": XferTelemetry,
        # NIXL's status values (nixl_types.h), for code that compares them.
        "NIXL_IN_PROG": 1, "NIXL_SUCCESS": 0, "NIXL_ERR_NOT_POSTED": -1,
        "NIXL_ERR_INVALID_PARAM": -2, "NIXL_ERR_BACKEND": -3, "NIXL_ERR_NOT_FOUND": -4,
        "NIXL_ERR_MISMATCH": -5, "NIXL_ERR_NOT_ALLOWED": -6, "NIXL_ERR_REPOST_ACTIVE": -7,
        "NIXL_ERR_UNKNOWN": -8, "NIXL_ERR_NOT_SUPPORTED": -9,
        "NIXL_ERR_REMOTE_DISCONNECT": -10, "NIXL_ERR_CANCELED": -11,
        "NIXL_ERR_NO_TELEMETRY": -12,
    })
    for m in nixl_thread_sync_t.__members__:
        names[m] = nixl_thread_sync_t[m].value
    for cls in errors.NIXL_ERRORS:
        names[cls.__name__] = cls
    return names


def make_api(default_port, default_backends, module=__name__):
    """The public names of nixl._api with these defaults (see the module's docstring):
    {name: object}. default_backends None: ixl's configuration (IXL_BACKENDS)."""

    DEFAULT_COMM_PORT = default_port  # noqa: N806 (NIXL's name)

    class nixl_agent_config(NixlAgentConfigBase):
        """NIXL's agent configuration; ixl's own options (AgentConfig) as keywords."""

        def __init__(self, enable_prog_thread: bool = True, enable_listen_thread: bool = False,
                     listen_port: int = DEFAULT_COMM_PORT, capture_telemetry: bool = False,
                     num_threads: int = 0, backends: list = default_backends,
                     sync_mode=None, **ixl_options):
            self._nixl_init(enable_prog_thread, enable_listen_thread, listen_port,
                            capture_telemetry, num_threads,
                            None if backends is None else list(backends), sync_mode,
                            ixl_options)

    class nixl_agent(NixlAgentBase):
        """NIXL's nixl_agent on ixl (see ixl._nixl)."""

        _default_config = nixl_agent_config

        def __init__(self, agent_name: str, nixl_conf=None, instantiate_all: bool = False):
            self._nixl_init(agent_name, nixl_conf, instantiate_all)

        def send_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT):
            self._send_local_metadata(ip_addr, port)

        def send_partial_agent_metadata(self, descs, inc_conn_info: bool = False,
                                        backends: list = [], ip_addr: str = "",  # noqa: B006
                                        port: int = DEFAULT_COMM_PORT, label: str = ""):
            self._send_partial(descs, inc_conn_info, backends, ip_addr, port, label)

        def fetch_remote_metadata(self, remote_agent: str, ip_addr: str = "",
                                  port: int = DEFAULT_COMM_PORT, label: str = ""):
            self._fetch(remote_agent, ip_addr, port, label)

        def invalidate_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT):
            self._invalidate_local(ip_addr, port)

    for cls in (nixl_agent_config, nixl_agent):
        cls.__module__ = module
    return {
        "DEFAULT_COMM_PORT": DEFAULT_COMM_PORT,
        "nixl_agent_config": nixl_agent_config,
        "nixl_agent": nixl_agent,
        "nixl_thread_sync_t": nixl_thread_sync_t,
        "nixl_xfer_handle": nixl_xfer_handle,
        "nixl_prepped_dlist_handle": nixl_prepped_dlist_handle,
        "nixl_backend_handle": nixl_backend_handle,
        "nixlXferDList": XferDList,
        "nixlRegDList": RegDList,
        "nixlRemoteDList": RemoteDList,
        "nixlXferTelemetry": XferTelemetry,
        "INIT_AGENT": INIT_AGENT,
    }


__all__ = ["make_api", "bindings_names", "nixl_thread_sync_t", "nixl_mem_t", "RemoteDList",
           "SEGMENTS", "NIXL_READ",
           "NIXL_WRITE", "NIXL_DEFAULT_COMM_PORT", "NixlAgentBase", "NixlAgentConfigBase",
           "plugin_info", "plugin_list"]

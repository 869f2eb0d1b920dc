"""ixl.Agent: an ixl agent with the methods (names and argument order) of NIXL's nixl_agent.

Transfers report "DONE" or "PROC" and raise on errors (ixl.errors: one class per status,
under the NIXL exception of its category). Handles are objects; a handle not released is
released when it is garbage-collected, and closing the agent releases everything it holds.
"""
import ctypes
import threading
import time
from ctypes import byref, c_size_t, c_uint16, c_uint64, c_void_p

from . import _lib
from ._lib import check, lib, text
from .descs import RegDList, XferDList, index_array, mem_name, mem_type, reg_dlist, xfer_dlist

INIT_AGENT = "NIXL_INIT_AGENT"  # prep_xfer_dlist's name for the initiator's own side


class AgentConfig:
    """Agent parameters, in nixl_agent_config's order, plus ixl's own (keywords only).

    enable_prog_thread: also call backends' progress() on a timer (every progress_period_us).
    enable_listen_thread, listen_port: start the metadata listener (port 0 = any free port).
    capture_telemetry: keep per-request telemetry (get_xfer_telemetry).
    num_threads: accepted for compatibility; ixl's backends size their own thread pools.
    backends: backends created with the agent; None = the configuration's IXL_BACKENDS.
    auth_key: the cluster key (str or bytes, 16..256 bytes; docs/security.md); None = the
        configuration's (IXL_AUTH_KEY, IXL_AUTH_KEY_FILE), "" = no key.
    insecure_remote: without a key, listen beyond loopback and accept any peer.
    """

    def __init__(self, enable_prog_thread=False, enable_listen_thread=False, listen_port=0,
                 capture_telemetry=True, num_threads=0, backends=None, *, listen_addr=None,
                 etcd_endpoints=None, thread_safe=True, notif_max=None,
                 progress_period_us=None, auth_key=None, insecure_remote=None):
        self.enable_pthread = enable_prog_thread
        self.enable_listen = enable_listen_thread
        self.port = listen_port
        self.capture_telemetry = capture_telemetry
        self.num_threads = num_threads
        self.backends = backends
        self.listen_addr = listen_addr
        self.etcd_endpoints = etcd_endpoints
        self.thread_safe = thread_safe
        self.notif_max = notif_max
        self.progress_period_us = progress_period_us
        self.auth_key = auth_key
        self.insecure_remote = insecure_remote

    def _params(self):
        p = _lib.AgentParams()
        m = _lib.AGENT_F_PROGRESS_THREAD | _lib.AGENT_F_TELEMETRY | _lib.AGENT_F_THREAD_MODE
        p.progress_thread = bool(self.enable_pthread)
        p.telemetry = bool(self.capture_telemetry)
        p.thread_mode = 0 if self.thread_safe else 1
        if self.progress_period_us is not None:
            m |= _lib.AGENT_F_PROGRESS_PERIOD
            p.progress_period_us = self.progress_period_us
        if self.enable_listen:
            m |= _lib.AGENT_F_LISTEN_PORT
            p.listen_port = self.port or 0
        if self.listen_addr is not None:
            m |= _lib.AGENT_F_LISTEN_ADDR
            p.listen_addr = self.listen_addr.encode()
        if self.backends is not None:
            names = self.backends
            if not isinstance(names, str):
                names = ",".join(names)
            m |= _lib.AGENT_F_BACKENDS
            p.backends = names.encode()
        if self.notif_max is not None:
            m |= _lib.AGENT_F_NOTIF_MAX
            p.notif_max = self.notif_max
        if self.etcd_endpoints is not None:
            m |= _lib.AGENT_F_ETCD
            p.etcd_endpoints = self.etcd_endpoints.encode()
        if self.auth_key is not None:
            m |= _lib.AGENT_F_AUTH_KEY
            key = self.auth_key
            p.auth_key = key if isinstance(key, bytes) else key.encode()
        if self.insecure_remote is not None:
            m |= _lib.AGENT_F_INSECURE_REMOTE
            p.insecure_remote = bool(self.insecure_remote)
        p.field_mask = m
        return p


class Backend:
    """A backend of an agent (NIXL's backend handle)."""

    __slots__ = ("_ptr", "_core", "name")

    def __init__(self, ptr, core):
        self._ptr = ptr
        self._core = core
        self.name = text(lib.ixl_backend_name(ptr))

    @property
    def ptr(self):
        if self._core.closed:
            raise _closed_error(f"backend {self.name}")
        return self._ptr

    def __reduce__(self):
        raise TypeError("ixl: a backend belongs to its agent; it cannot be pickled or copied")

    @property
    def caps(self):
        return lib.ixl_backend_caps(self.ptr)

    @property
    def mem_types(self):
        mask = lib.ixl_backend_mem_mask(self.ptr)
        return [n for i, n in enumerate(_lib.MEM_NAMES) if mask & (1 << i)]

    def params(self):
        kv = ctypes.POINTER(_lib.KV)()
        n = c_size_t()
        check(lib.ixl_backend_params(self.ptr, byref(kv), byref(n)))
        return {text(kv[i].key): text(kv[i].value) for i in range(n.value)}

    def __repr__(self):
        return f"Backend({self.name})"


class _Core:
    """The C agent's pointer and whether it is destroyed, shared by the Agent and every handle
    it made (each holds it strongly). Lifetimes go one way: a handle keeps its agent alive;
    when the agent goes first anyway (the two are garbage of one cycle, where Python runs the
    finalizers in any order, or close() was called), the handles see `closed` and leave their
    C objects to ixl_agent_destroy, which released them. `lock` (reentrant: a finalizer may
    run inside a locked section of the same thread) orders a release against the destroy."""

    __slots__ = ("ptr", "closed", "lock", "leaked")

    def __init__(self, ptr):
        self.ptr = ptr
        self.closed = False
        self.lock = threading.RLock()
        # Requests collected while in flight that could not be stopped yet: (ptr, buffers),
        # the buffers kept alive until the request is released (retried as the agent makes
        # new ones; at the latest ixl_agent_destroy releases them).
        self.leaked = []

    def retry_leaked(self, _release=lib.ixl_xfer_release):
        with self.lock:
            if self.closed:
                self.leaked = []
                return
            self.leaked = [(p, k) for p, k in self.leaked if _release(p) < 0]


def _closed_error(what):
    return _lib.errors.from_status(-504, "IXL_ERR_NOT_ALLOWED",
                                   f"{what}: its agent is closed (close() released it)")


class _Handle:
    """What XferHandle and PrepHandle share: a C object of an agent, released once (explicitly,
    by the finalizer, or by the agent's destruction), never after the agent is destroyed."""

    __slots__ = ("_ptr", "_agent", "_core", "_keep", "_dead", "_local", "__weakref__")
    _what = "handle"

    def __init__(self, agent, value, *, keep=None):
        self._ptr = int(value) if value else None
        self._agent = agent  # strong: the agent outlives its handles
        self._core = agent._core
        self._keep = keep
        self._dead = None  # why the handle cannot be used (set when invalidated)
        self._local = ()  # the XferDLists of this agent's own memory the handle uses

    @property
    def ptr(self):
        if self._core.closed:
            raise _closed_error(self._what)
        if not self._ptr:
            if self._dead:
                raise _lib.errors.from_status(-504, "IXL_ERR_NOT_ALLOWED", self._dead)
            raise _lib.errors.from_status(-100, "IXL_ERR_INVALID_ARG",
                                          f"{self._what} already released")
        return self._ptr

    def _free(self, ptr):  # the C release of ptr; the core's lock is held, the agent open
        raise NotImplementedError

    def _release(self):
        """Releases the C object once; True when it is gone (or was already)."""
        with self._core.lock:
            ptr = self._ptr
            if not ptr or self._core.closed:
                self._ptr = None
                return True
            st = self._free(ptr)
            if st is not None and st < 0:
                return st
            self._ptr = None
            self._keep = None
            self._local = ()
            return True

    def __reduce__(self):
        raise TypeError(f"ixl: a {self._what} belongs to its agent and process; it cannot be "
                        "pickled or copied")

    def __del__(self):
        try:
            if getattr(self, "_ptr", None) and self._release() is not True:
                with self._core.lock:  # in flight, not stoppable yet: the agent keeps it
                    if not self._core.closed:
                        self._core.leaked.append((self._ptr, self._keep))
        except Exception:  # interpreter shutdown: nothing left to release into
            pass

    def __repr__(self):
        state = "released" if not self._ptr else hex(self._ptr)
        if self._core.closed:
            state = "agent closed"
        return f"{type(self).__name__}({state})"


class XferHandle(_Handle):
    """A transfer request (ixl_xfer). Released by release_xfer_handle (or release()), or when
    collected; never used after its agent is closed."""

    __slots__ = ("_start_us", "_desc_count")
    _what = "transfer handle"

    def __init__(self, agent, value, *, keep=None, desc_count=None):
        super().__init__(agent, value, keep=keep)
        self._start_us = None
        self._desc_count = desc_count  # descriptors as the caller gave them (NIXL's descCount)

    def _free(self, ptr, _release=lib.ixl_xfer_release):
        return _release(ptr)

    def release(self):
        """release_xfer_handle(self) of its agent."""
        self._agent.release_xfer_handle(self)


class PrepHandle(_Handle):
    """A prepared descriptor list (ixl_prep), for make_prepped_xfer."""

    __slots__ = ()
    _what = "prepared list"

    def _free(self, ptr, _destroy=lib.ixl_prep_destroy):
        _destroy(ptr)

    def __len__(self):
        return lib.ixl_prep_count(self.ptr)

    def release(self):
        """release_dlist_handle(self) of its agent."""
        self._agent.release_dlist_handle(self)


class XferTelemetry:
    """Telemetry of a request's last completed post, in microseconds and bytes; also under
    NIXL's names (startTime, postDuration, xferDuration, totalBytes, descCount)."""

    def __init__(self, t, start_us, desc_count=None):
        self.post_us = t.post_us
        self.xfer_us = t.xfer_us
        self.bytes = t.bytes
        self.desc_count = t.desc_count
        self.post_count = t.post_count
        self.startTime = start_us
        self.postDuration = t.post_us
        self.xferDuration = t.xfer_us
        self.totalBytes = t.bytes
        # NIXL counts the descriptors the request was made with (2 adjacent ones are 2);
        # desc_count is what ixl moved after merging them.
        self.descCount = t.desc_count if desc_count is None else desc_count

    def __repr__(self):
        return (f"XferTelemetry(post_us={self.post_us}, xfer_us={self.xfer_us}, "
                f"bytes={self.bytes}, desc_count={self.desc_count}, "
                f"post_count={self.post_count})")


def _name(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode()


def _op(operation):
    op = str(operation).upper()
    if op == "READ":
        return _lib.OP_READ
    if op == "WRITE":
        return _lib.OP_WRITE
    raise _lib.errors.from_status(-100, "IXL_ERR_INVALID_ARG",
                                  f"operation {operation!r}: READ or WRITE")


def _peer(ip_addr, port):
    peer = _lib.Peer()
    peer.addr = ip_addr.encode() if ip_addr else None
    peer.port = port or 0
    return peer


def plugin_list():
    """Names of the plugins ixl can load (built in first)."""
    info = _lib.PluginInfo()
    out = []
    for i in range(lib.ixl_plugin_count()):
        if lib.ixl_plugin_get(i, byref(info)) == _lib.OK:
            out.append(text(info.name))
    return out


def plugin_info(name):
    info = _lib.PluginInfo()
    check(lib.ixl_plugin_find(_name(name), byref(info)), what=f"plugin {name!r}")
    return info


class Agent:
    """An ixl agent. Methods follow NIXL's nixl_agent (names, argument order, defaults)."""

    _default_config = AgentConfig
    # Whether handles remember the lists of this agent's memory they use (h._local), for
    # the NIXL API's deregistration (ixl._nixl); a prepared list then keeps its transfer list.
    _tracks_users = False

    def __init__(self, agent_name, nixl_conf=None, instantiate_all=False):
        conf = nixl_conf if nixl_conf is not None else self._default_config()
        params = conf._params()
        ptr = c_void_p()
        # No agent, no per-agent message yet: libixl logs the reason (stderr by default).
        check(lib.ixl_agent_create(_name(agent_name), byref(params), byref(ptr)),
              what=f"agent {agent_name!r} (the reason is in libixl's log)")
        self._ptr = ptr.value
        self._core = _Core(self._ptr)
        self.name = text(lib.ixl_agent_name(self._ptr))
        self.config = conf
        self._lock = threading.Lock()
        self.notifs = {}
        self.backends = {}
        for i in range(lib.ixl_backend_count(self._ptr)):
            b = c_void_p()
            check(lib.ixl_backend_get(self._ptr, i, byref(b)), self._ptr)
            backend = Backend(b.value, self._core)
            self.backends[backend.name] = backend
        self.plugin_list = plugin_list()
        if instantiate_all:
            for name in self.plugin_list:
                if name not in self.backends:
                    try:
                        self.create_backend(name)
                    except _lib.errors.Error:
                        pass  # a plugin that cannot run here (no device, no server)

    # -- lifetime -------------------------------------------------------------------------

    def close(self, _destroy=lib.ixl_agent_destroy):
        """Destroys the agent: releases its requests and prepared lists, deregisters what is
        left, invalidates remotes. Handles of this agent become unusable."""
        core = getattr(self, "_core", None)
        if core is None:
            return
        with core.lock:
            if core.closed:
                return
            # Handles still alive in Python see `closed` and never release again: their C
            # objects go with the agent (ixl_agent_destroy releases them).
            core.closed = True
            self._ptr = None
            _destroy(core.ptr)
            core.leaked = []

    def __reduce__(self):
        raise TypeError("ixl: an agent cannot be pickled or copied (send its metadata: "
                        "get_agent_metadata)")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def ptr(self):
        if not self._ptr:
            raise _lib.errors.from_status(-504, "IXL_ERR_NOT_ALLOWED", "agent is closed")
        return self._ptr

    def _check(self, status, what=""):
        return check(status, self._ptr, what)

    def _track(self, handle):
        if self._core.leaked:
            self._core.retry_leaked()
        return handle

    # -- plugins and backends ---------------------------------------------------------------

    def get_plugin_list(self):
        return list(self.plugin_list)

    def get_plugin_params(self, backend):
        """The plugin's options and their defaults, as a dict."""
        info = plugin_info(backend)
        return {text(info.options[i].name): text(info.options[i].default_value)
                for i in range(info.n_options)}

    def get_plugin_options(self, backend):
        """The plugin's options as a list of dicts: name, type ("bool", "int", "size",
        "duration", "enum", "string"), default, description, describe (the type and what it
        accepts as ixl-info prints it, from ixl_option_describe: "size 4K..1G bytes"), and
        where they apply unit (an int's, or a duration's base unit), min and max (an int's, a
        size's in bytes, a duration's in its unit; absent when unbounded) and choices (an
        enum's)."""
        info = plugin_info(backend)
        out = []
        for i in range(info.n_options):
            o = info.options[i]
            d = {"name": text(o.name), "type": _lib.OPT_TYPE_NAMES.get(o.type, "unknown"),
                 "default": text(o.default_value), "description": text(o.description),
                 "describe": _lib.option_describe(o)}
            if o.unit:
                d["unit"] = text(o.unit)
            if o.type in (_lib.OPT_INT, _lib.OPT_SIZE, _lib.OPT_DURATION) and (o.min or o.max):
                d["min"], d["max"] = o.min, o.max
            if o.type == _lib.OPT_ENUM:
                choices, j = [], 0
                while o.choices[j]:
                    choices.append(text(o.choices[j]))
                    j += 1
                d["choices"] = choices
            out.append(d)
        return out

    def get_plugin_mem_types(self, backend):
        mask = plugin_info(backend).mem_mask
        return [n for i, n in enumerate(_lib.MEM_NAMES) if mask & (1 << i)]

    def create_backend(self, backend, initParams=None):
        """Creates a backend of plugin backend with options initParams (a dict)."""
        items = list((initParams or {}).items())
        kv = (_lib.KV * max(len(items), 1))()
        for i, (k, v) in enumerate(items):
            kv[i].key = str(k).encode()
            kv[i].value = str(v).encode()
        out = c_void_p()
        self._check(lib.ixl_backend_create(self.ptr, _name(backend), kv, len(items), byref(out)),
                    f"create_backend({backend!r})")
        b = Backend(out.value, self._core)
        self.backends[b.name] = b
        return b

    def destroy_backend(self, backend):
        """Destroys a backend (a Backend or a plugin name). Refused (ixl.BusyError) while a
        request, a prepared list or allocated memory still uses it; its share of registrations
        and loaded remotes goes with it (ixl_backend_destroy)."""
        ptr = self._backend(backend)
        name = text(lib.ixl_backend_name(ptr))
        self._check(lib.ixl_backend_destroy(ptr), f"destroy_backend({name!r})")
        self.backends.pop(name, None)

    def _backend(self, backend):
        if isinstance(backend, Backend):
            return backend.ptr
        out = c_void_p()
        self._check(lib.ixl_backend_find(self.ptr, _name(backend), byref(out)),
                    f"backend {backend!r}")
        return out.value

    def _backend_array(self, backends):
        if not backends:
            return None, 0
        if isinstance(backends, (str, bytes, Backend)):
            backends = [backends]
        ptrs = [self._backend(b) for b in backends]
        return (c_void_p * len(ptrs))(*ptrs), len(ptrs)

    def get_backend_params(self, backend):
        return Backend(self._backend(backend), self._core).params()

    def get_backend_mem_types(self, backend):
        return Backend(self._backend(backend), self._core).mem_types

    # -- descriptors and memory -------------------------------------------------------------

    def get_reg_descs(self, descs, mem_type=None, is_sorted=False):
        """A registration list from (addr, len, dev, meta) tuples, buffers or tensors, or an
        N x 3 numpy array."""
        return reg_dlist(descs, mem_type)

    def get_xfer_descs(self, descs, mem_type=None, is_sorted=False):
        """A transfer list from (addr, len, dev) tuples, buffers or tensors, or an N x 3
        (descriptors) or N x 5 (strided runs: addr, len, stride, count, dev) numpy array."""
        return xfer_dlist(descs, mem_type)

    def register_memory(self, reg_list, mem_type=None, is_sorted=False, backends=()):
        """Registers the regions; returns the registration list to deregister with (for FILE
        in path mode, with the dev ids the agent assigned)."""
        descs = reg_dlist(reg_list, mem_type)
        p = _lib.RegParams()
        arr, n = self._backend_array(backends)
        if n:
            p.field_mask |= _lib.REG_F_BACKENDS
            p.backends = ctypes.cast(arr, ctypes.POINTER(c_void_p))
            p.n_backends = n
        devs = None
        if descs._mem == _lib.MEM_NAMES.index("FILE") and len(descs):
            devs = (c_uint64 * len(descs))()
            p.field_mask |= _lib.REG_F_DEVS_OUT
            p.devs_out = devs
        self._check(lib.ixl_mem_register(self.ptr, descs._mem, descs.ptr, len(descs), byref(p)),
                    "register_memory")
        if devs is not None and list(devs) != descs.devs():
            descs = descs.with_devs(list(devs))
        return descs

    def deregister_memory(self, dereg_list, backends=()):
        descs = reg_dlist(dereg_list)
        p = _lib.RegParams()
        arr, n = self._backend_array(backends)
        if n:
            p.field_mask |= _lib.REG_F_BACKENDS
            p.backends = ctypes.cast(arr, ctypes.POINTER(c_void_p))
            p.n_backends = n
        self._check(lib.ixl_mem_deregister(self.ptr, descs._mem, descs.ptr, len(descs),
                                           byref(p)), "deregister_memory")

    def query_memory(self, reg_list, backend=None, mem_type=None):
        """For each descriptor: None if the file/object does not exist, else {"size": n}."""
        descs = reg_dlist(reg_list, mem_type)
        out = (_lib.MemQuery * max(len(descs), 1))()
        b = self._backend(backend) if backend else None
        self._check(lib.ixl_mem_query(self.ptr, descs._mem, descs.ptr, len(descs), b, out),
                    "query_memory")
        return [{"size": out[i].size} if out[i].exists else None for i in range(len(descs))]

    # -- metadata ---------------------------------------------------------------------------

    def _md_params(self, descs, inc_conn_info, backends, label):
        p = _lib.MdParams()
        keep = []
        if descs is not None:
            regions = xfer_dlist(descs) if not isinstance(descs, XferDList) else descs
            keep.append(regions)
            p.field_mask |= _lib.MD_F_REGIONS
            p.regions = regions.ptr
        if inc_conn_info is not None:
            p.field_mask |= _lib.MD_F_CONN_INFO
            p.conn_info = bool(inc_conn_info)
        arr, n = self._backend_array(backends)
        if n:
            keep.append(arr)
            p.field_mask |= _lib.MD_F_BACKENDS
            p.backends = ctypes.cast(arr, ctypes.POINTER(c_void_p))
            p.n_backends = n
        if label:
            p.field_mask |= _lib.MD_F_LABEL
            p.label = label.encode() if isinstance(label, str) else bytes(label)
        return p, keep

    def _md_get(self, params):
        buf = c_void_p()
        n = c_size_t()
        self._check(lib.ixl_md_get(self.ptr, params, byref(buf), byref(n)), "get_agent_metadata")
        try:
            return ctypes.string_at(buf, n.value)
        finally:
            lib.ixl_free(buf)

    def get_agent_metadata(self):
        """The agent's metadata (connection info and registered regions) as bytes."""
        return self._md_get(None)

    def get_partial_agent_metadata(self, descs, inc_conn_info, backends, label=""):
        """Metadata with only the regions covering descs (empty: none), connection info if
        inc_conn_info, of backends only (empty: all)."""
        p, _keep = self._md_params(descs, inc_conn_info, backends, label)
        return self._md_get(byref(p))

    def add_remote_agent(self, metadata):
        """Loads a remote agent's metadata; returns its name."""
        data = bytes(metadata)
        name = ctypes.create_string_buffer(_lib.NAME_MAX)
        self._check(lib.ixl_md_load(self.ptr, data, len(data), name, len(name)),
                    "add_remote_agent")
        try:
            return name.value.decode()
        except UnicodeDecodeError:
            # Names are str here: a name that is not UTF-8 is unloaded again, so that nothing
            # stays loaded that cannot be named.
            lib.ixl_remote_invalidate(self.ptr, name.value)
            raise _lib.errors.from_status(
                -102, "IXL_ERR_MALFORMED",
                f"the remote agent's name {name.value!r} is not UTF-8; nothing was loaded",
                "add_remote_agent") from None

    def remove_remote_agent(self, agent):
        self._check(lib.ixl_remote_invalidate(self.ptr, _name(agent)),
                    f"remove_remote_agent({agent!r})")

    def make_connection(self, remote_agent, backends=()):
        """Connects now to a loaded remote agent (with every backend in common)."""
        self._check(lib.ixl_remote_connect(self.ptr, _name(remote_agent)), "make_connection")

    def check_remote_metadata(self, remote_name, descs=None):
        """True when remote_name's metadata is loaded (and covers descs, if given)."""
        dl = xfer_dlist(descs) if descs is not None else None
        st = lib.ixl_remote_check(self.ptr, _name(remote_name), dl.ptr if dl else None)
        if st == -500:  # IXL_ERR_NOT_FOUND
            return False
        self._check(st, "check_remote_metadata")
        return True

    def send_local_metadata(self, ip_addr="", port=0, label=""):
        """Sends the agent's metadata to a peer's listener (ip_addr, port) or, with no
        ip_addr, to etcd."""
        p, _keep = self._md_params(None, None, None, label)
        self._check(lib.ixl_md_send(self.ptr, byref(_peer(ip_addr, port)),
                                    byref(p) if label else None), "send_local_metadata")

    def send_partial_agent_metadata(self, descs, inc_conn_info, backends, ip_addr="", port=0,
                                    label=""):
        p, _keep = self._md_params(descs, inc_conn_info, backends, label)
        self._check(lib.ixl_md_send(self.ptr, byref(_peer(ip_addr, port)), byref(p)),
                    "send_partial_agent_metadata")

    def fetch_remote_metadata(self, remote_name, ip_addr="", port=0, label=""):
        """Starts fetching remote_name's metadata from a peer or etcd (see
        check_remote_metadata)."""
        self._check(lib.ixl_md_fetch(self.ptr, _name(remote_name), byref(_peer(ip_addr, port)),
                                     label.encode() if label else None),
                    "fetch_remote_metadata")

    def fetch_remote_metadata_status(self, remote_name):
        """Where remote_name's metadata stands: "loaded", "in_progress" (a fetch runs) or
        "none" (not loaded and no fetch coming: none started, or the last one found no such
        agent or label). Any other failure of the last fetch raises its error, with the
        reason."""
        st = lib.ixl_md_fetch_status(self.ptr, _name(remote_name))
        if st == 1:  # IXL_IN_PROGRESS
            return "in_progress"
        if st == -500:  # IXL_ERR_NOT_FOUND
            return "none"
        self._check(st, "fetch_remote_metadata_status")
        return "loaded"

    def invalidate_local_metadata(self, ip_addr="", port=0):
        """Tells the peer at (ip_addr, port) to drop this agent's metadata; with no ip_addr,
        every peer it was sent to or fetched by, and etcd."""
        peer = byref(_peer(ip_addr, port)) if ip_addr else None
        self._check(lib.ixl_md_invalidate_local(self.ptr, peer), "invalidate_local_metadata")

    @property
    def listen_port(self):
        """The metadata listener's port."""
        out = c_uint16()
        self._check(lib.ixl_agent_listen_port(self.ptr, byref(out)), "listen_port")
        return out.value

    def get_serialized_descs(self, descs):
        return xfer_dlist(descs).serialize()

    def deserialize_descs(self, serdes):
        return XferDList.deserialize(serdes)

    # -- transfers --------------------------------------------------------------------------

    def _xfer_params(self, notif_msg, backends, skip_desc_merge):
        p = _lib.XferParams()
        keep = []
        if notif_msg:
            msg = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
            keep.append(msg)
            p.field_mask |= _lib.XFER_F_NOTIF
            p.notif = ctypes.cast(ctypes.c_char_p(msg), c_void_p)
            p.notif_len = len(msg)
        arr, n = self._backend_array(backends)
        if n:
            keep.append(arr)
            p.field_mask |= _lib.XFER_F_BACKENDS
            p.backends = ctypes.cast(arr, ctypes.POINTER(c_void_p))
            p.n_backends = n
        if skip_desc_merge:
            p.field_mask |= _lib.XFER_F_NO_MERGE
            p.no_merge = True
        return p, keep

    def initialize_xfer(self, operation, local_descs, remote_descs, remote_agent,
                        notif_msg=b"", backends=(), skip_desc_merge=False):
        """A request moving local_descs <-> remote_descs of remote_agent (this agent's own
        name for loopback and storage). READ: remote into local; WRITE: local into remote."""
        local = xfer_dlist(local_descs)
        remote = xfer_dlist(remote_descs)
        p, _keep = self._xfer_params(notif_msg, backends, skip_desc_merge)
        out = c_void_p()
        self._check(lib.ixl_xfer_create(self.ptr, _op(operation), local.ptr, remote.ptr,
                                        _name(remote_agent), byref(p), byref(out)),
                    "initialize_xfer")
        h = XferHandle(self, out.value, keep=(local._keep, remote._keep), desc_count=len(local))
        if self._tracks_users:
            h._local = (local, remote) if _name(remote_agent) == _name(self.name) else (local,)
        return self._track(h)

    def prep_xfer_dlist(self, agent_name, xfer_list, mem_type=None, is_sorted=False,
                        backends=()):
        """Prepares xfer_list once: agent_name "" or "NIXL_INIT_AGENT" for the initiator's
        side, a remote agent's name (or this agent's own, for loopback) for a target side."""
        dl = xfer_dlist(xfer_list, mem_type)
        remote = None if agent_name in (None, "", b"", INIT_AGENT) else _name(agent_name)
        p = _lib.PrepParams()
        arr, n = self._backend_array(backends)
        if n:
            p.field_mask |= _lib.PREP_F_BACKENDS
            p.backends = ctypes.cast(arr, ctypes.POINTER(c_void_p))
            p.n_backends = n
        out = c_void_p()
        self._check(lib.ixl_prep_create(self.ptr, remote, dl.ptr, byref(p), byref(out)),
                    "prep_xfer_dlist")
        h = PrepHandle(self, out.value, keep=dl._keep)
        if self._tracks_users and (remote is None or remote == _name(self.name)):
            h._local = (dl,)
        return self._track(h)

    def make_prepped_xfer(self, operation, local_xfer_side, local_indices, remote_xfer_side,
                          remote_indices, notif_msg=b"", backends=(), skip_desc_merge=False):
        """A request from index arrays (numpy arrays, lists, ranges) into two prepared
        lists: local_indices[i] pairs with remote_indices[i]."""
        la, ln, lkeep = index_array(local_indices)
        ra, rn, rkeep = index_array(remote_indices)
        if ln != rn:
            raise _lib.errors.from_status(-101, "IXL_ERR_MISMATCH",
                                          f"{ln} local indices, {rn} remote indices")
        p, _keep = self._xfer_params(notif_msg, backends, skip_desc_merge)
        out = c_void_p()
        self._check(lib.ixl_xfer_create_prepped(self.ptr, _op(operation), local_xfer_side.ptr,
                                                la, remote_xfer_side.ptr, ra, ln, byref(p),
                                                byref(out)), "make_prepped_xfer")
        h = XferHandle(self, out.value, keep=(local_xfer_side._keep, remote_xfer_side._keep),
                       desc_count=ln)
        h._local = tuple(local_xfer_side._local) + tuple(remote_xfer_side._local)
        return self._track(h)

    def transfer(self, handle, notif_msg=b""):
        """Posts the request (with notif_msg as its notification, if given): "DONE" if it
        completed already, "PROC" if it runs; raises on error."""
        if notif_msg:
            msg = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
            self._check(lib.ixl_xfer_set_notif(handle.ptr, msg, len(msg)), "transfer")
        handle._start_us = time.time_ns() // 1000
        st = self._check(lib.ixl_xfer_post(handle.ptr), "transfer")
        return "DONE" if st == _lib.OK else "PROC"

    def check_xfer_state(self, handle):
        """"DONE" or "PROC"; raises the request's error."""
        st = self._check(lib.ixl_xfer_status(handle.ptr), "check_xfer_state")
        return "DONE" if st == _lib.OK else "PROC"

    def wait(self, handle, timeout=None):
        """Waits without spinning for at most timeout seconds (None: no limit): "DONE", or
        "PROC" if the time ran out; raises the request's error."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        st = lib.ixl_xfer_wait(handle.ptr, ms)
        if st == -204:  # IXL_ERR_TIMEOUT
            return "PROC"
        self._check(st, "wait")
        return "DONE" if st == _lib.OK else "PROC"

    def get_xfer_telemetry(self, handle):
        t = _lib.XferTelemetry()
        self._check(lib.ixl_xfer_telemetry(handle.ptr, byref(t)), "get_xfer_telemetry")
        return XferTelemetry(t, handle._start_us, handle._desc_count)

    def get_xfer_info(self, handle):
        """The chosen backend, the data path it used, descriptors (after merging), bytes."""
        info = _lib.XferInfo()
        self._check(lib.ixl_xfer_info(handle.ptr, byref(info)), "get_xfer_info")
        return {"backend": text(info.backend), "path": text(info.path),
                "desc_count": info.desc_count, "bytes": info.bytes}

    def query_xfer_backend(self, handle):
        return self.get_xfer_info(handle)["backend"]

    def estimate_xfer_cost(self, handle):
        """(duration_us, error_margin_us, method) from the backend's estimate."""
        c = _lib.Cost()
        self._check(lib.ixl_xfer_estimate(handle.ptr, byref(c)), "estimate_xfer_cost")
        method = {0: "UNKNOWN", 1: "ANALYTICAL", 2: "MEASURED"}.get(c.method, str(c.method))
        return c.duration_us, c.error_margin_us, method

    def release_xfer_handle(self, handle, timeout=10.0):
        """Releases the request, canceling it if in flight. While the backend cannot stop it
        yet (IXL_ERR_BUSY), retries for up to timeout seconds, then raises."""
        deadline = time.monotonic() + timeout
        while True:
            st = handle._release()
            if st is True:
                return
            if st != -502 or time.monotonic() > deadline:  # IXL_ERR_BUSY
                break
            time.sleep(0.001)
        self._check(st, "release_xfer_handle")

    def release_dlist_handle(self, handle):
        handle._release()

    # -- notifications ----------------------------------------------------------------------

    def get_new_notifs(self):
        """Notifications received since the last call: {sender name: [message bytes]}."""
        out = c_void_p()
        self._check(lib.ixl_notif_drain(self.ptr, byref(out)), "get_new_notifs")
        notifs = {}
        if not out.value:
            return notifs
        try:
            count = _lib.NotifBatchHead.from_address(out.value).count
            items = (_lib.Notif * count).from_address(
                out.value + ctypes.sizeof(_lib.NotifBatchHead))
            for n in items:
                notifs.setdefault(text(n.agent), []).append(ctypes.string_at(n.msg, n.len))
        finally:
            lib.ixl_free(out)
        return notifs

    def update_notifs(self):
        """Adds new notifications to self.notifs (NIXL's accumulated table)."""
        new = self.get_new_notifs()
        with self._lock:
            for k, v in new.items():
                self.notifs.setdefault(k, []).extend(v)
        return self.notifs

    def check_remote_xfer_done(self, remote_agent_name, lookup_msg, tag_is_prefix=True):
        """True (and the message is consumed) when remote_agent_name sent a notification that
        starts with (tag_is_prefix) or contains lookup_msg."""
        self.update_notifs()
        key = remote_agent_name.decode() if isinstance(remote_agent_name, bytes) \
            else remote_agent_name
        with self._lock:
            msgs = self.notifs.get(key, [])
            for i, msg in enumerate(msgs):
                if (msg.startswith(lookup_msg) if tag_is_prefix else lookup_msg in msg):
                    del msgs[i]
                    return True
        return False

    def send_notif(self, remote_agent_name, notif_msg, backend=None):
        msg = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
        b = self._backend(backend) if backend else None
        self._check(lib.ixl_notif_send(self.ptr, _name(remote_agent_name), msg, len(msg), b),
                    "send_notif")

    # -- waiting, progress, stats -----------------------------------------------------------

    def fileno(self):
        """A file descriptor that becomes readable when a request may have completed or a
        notification arrived; call progress() after it fires."""
        fd = ctypes.c_int()
        self._check(lib.ixl_agent_fd(self.ptr, byref(fd)), "fileno")
        return fd.value

    def progress(self):
        self._check(lib.ixl_agent_progress(self.ptr), "progress")

    def stats(self):
        s = _lib.AgentStats()
        self._check(lib.ixl_agent_stats(self.ptr, byref(s)), "stats")
        return {f: getattr(s, f) for f, _ in _lib.AgentStats._fields_}

    def __repr__(self):
        return f"Agent({self.name!r}, backends={list(self.backends)})"


__all__ = ["Agent", "AgentConfig", "Backend", "XferHandle", "PrepHandle", "XferTelemetry",
           "RegDList", "XferDList", "plugin_list", "INIT_AGENT", "mem_type", "mem_name"]

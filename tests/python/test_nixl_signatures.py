"""Signature conformance with NIXL 1.4.0's Python API (issue 17).

The table below is NIXL 1.4.0's `nixl._api` (ai-dynamo/nixl 8770b655a, as listed in
../shared/nixl-1.4-python-api.md), written out here by hand. Each row is checked with
inspect.signature against ixl.compat and against the `nixl` package (through NIXL's defaults,
port 8888 and backends ["UCX"]; ixl.compat's are ixl's, 0 and IXL_BACKENDS: the only
difference). NIXL's parameters must come first, in NIXL's order, with its names, kinds and
defaults; ixl may add keyword-only parameters only. Annotations are not compared.
Where the `nixl` package is not importable, its rows are checked on ixl._nixl.make_api(8888,
["UCX"]), which is what the package exports.
"""
import enum
import inspect

import pytest

import ixl.compat
from ixl import _nixl

# name: "(parameters)" as NIXL 1.4.0 writes them, annotations left out.
CONFIG_INIT = ("(self, enable_prog_thread=True, enable_listen_thread=False, "
               "listen_port=DEFAULT_COMM_PORT, capture_telemetry=False, num_threads=0, "
               "backends=DEFAULT_BACKENDS, sync_mode=None)")
AGENT = {
    "__init__": "(self, agent_name, nixl_conf=None, instantiate_all=False)",
    "get_plugin_list": "(self)",
    "get_plugin_mem_types": "(self, backend)",
    "get_plugin_params": "(self, backend)",
    "get_backend_mem_types": "(self, backend)",
    "get_backend_params": "(self, backend)",
    "create_backend": "(self, backend, initParams={})",
    "register_memory": "(self, reg_list, mem_type=None, backends=[])",
    "deregister_memory": "(self, dereg_list, backends=[])",
    "query_memory": "(self, reg_list, backend, mem_type=None)",
    "make_connection": "(self, remote_agent, backends=[])",
    "prep_xfer_dlist": "(self, agent_name, xfer_list, mem_type=None, backends=[])",
    "estimate_xfer_cost": "(self, req_handle)",
    "make_prepped_xfer": "(self, operation, local_xfer_side, local_indices, remote_xfer_side, "
                         "remote_indices, notif_msg=b'', backends=[], skip_desc_merge=False)",
    "initialize_xfer": "(self, operation, local_descs, remote_descs, remote_agent, "
                       "notif_msg=b'', backends=[])",
    "transfer": "(self, handle, notif_msg=b'')",
    "check_xfer_state": "(self, handle)",
    "get_xfer_telemetry": "(self, handle)",
    "query_xfer_backend": "(self, handle)",
    "release_xfer_handle": "(self, handle)",
    "release_dlist_handle": "(self, handle)",
    "prep_mem_view": "(self, dlist, *, backends=None)",
    "release_mem_view": "(self, mvh)",
    "get_new_notifs": "(self, backends=[])",
    "update_notifs": "(self, backends=[])",
    "check_remote_xfer_done": "(self, remote_agent_name, lookup_tag, backends=[], "
                              "tag_is_prefix=True)",
    "send_notif": "(self, remote_agent_name, notif_msg, backend=None)",
    "get_agent_metadata": "(self)",
    "get_partial_agent_metadata": "(self, descs, inc_conn_info=False, backends=[])",
    "add_remote_agent": "(self, metadata)",
    "remove_remote_agent": "(self, agent)",
    "send_local_metadata": "(self, ip_addr='', port=DEFAULT_COMM_PORT)",
    "send_partial_agent_metadata": "(self, descs, inc_conn_info=False, backends=[], "
                                   "ip_addr='', port=DEFAULT_COMM_PORT, label='')",
    "fetch_remote_metadata": "(self, remote_agent, ip_addr='', port=DEFAULT_COMM_PORT, "
                             "label='')",
    "invalidate_local_metadata": "(self, ip_addr='', port=DEFAULT_COMM_PORT)",
    "check_remote_metadata": "(self, agent, descs=None)",
    "get_xfer_descs": "(self, descs, mem_type=None)",
    "get_remote_descs": "(self, descs, mem_type=None)",
    "get_reg_descs": "(self, descs, mem_type=None)",
    "get_serialized_descs": "(self, descs)",
    "deserialize_descs": "(self, serialized_descs)",
}
HANDLE = {"__init__": "(self, agent, value)", "release": "(self)"}
SYNC_MODES = ["NIXL_THREAD_SYNC_NONE", "NIXL_THREAD_SYNC_STRICT", "NIXL_THREAD_SYNC_RW",
              "NIXL_THREAD_SYNC_DEFAULT"]
API_NAMES = ["DEFAULT_COMM_PORT", "nixl_agent", "nixl_agent_config", "nixl_thread_sync_t",
             "nixl_xfer_handle", "nixl_prepped_dlist_handle", "nixl_backend_handle"]


def _expected(params, port, backends):
    ns = {"DEFAULT_COMM_PORT": port, "DEFAULT_BACKENDS": backends}
    exec(f"def f{params}: pass", ns)  # the table's text as a signature
    return inspect.signature(ns["f"])


def _check(fn, params, port, backends, where):
    want = list(_expected(params, port, backends).parameters.values())
    have = list(inspect.signature(fn).parameters.values())
    assert len(have) >= len(want), f"{where}: {len(have)} parameters, NIXL has {len(want)}"
    for w, h in zip(want, have):
        assert (h.name, h.kind) == (w.name, w.kind), f"{where}: {h} where NIXL has {w}"
        assert h.default == w.default and type(h.default) is type(w.default), \
            f"{where}: {h.name}={h.default!r}, NIXL: {w.default!r}"
    for h in have[len(want):]:
        assert h.kind in (h.KEYWORD_ONLY, h.VAR_KEYWORD), f"{where}: extra positional {h}"


def _flavors():
    try:
        import nixl._api as nixl_api
        nixl_ns = vars(nixl_api)
    except ImportError:  # the package layer is not installed here: what it exports
        nixl_ns = _nixl.make_api(8888, ["UCX"], "nixl._api")
    return [("ixl.compat", vars(ixl.compat), 0, None), ("nixl", nixl_ns, 8888, ["UCX"])]


@pytest.mark.parametrize("flavor", _flavors(), ids=lambda f: f[0])
def test_signatures(flavor):
    where, ns, port, backends = flavor
    for name in API_NAMES:
        assert name in ns, f"{where} lacks {name}"
    assert ns["DEFAULT_COMM_PORT"] == port
    assert ns["nixl_backend_handle"] is int
    _check(ns["nixl_agent_config"].__init__, CONFIG_INIT, port, backends,
           f"{where}.nixl_agent_config.__init__")
    agent = ns["nixl_agent"]
    public = {n for n in dir(agent) if not n.startswith("_")}
    for method, params in AGENT.items():
        assert method == "__init__" or method in public, f"{where}: no nixl_agent.{method}"
        _check(getattr(agent, method), params, port, backends, f"{where}.nixl_agent.{method}")
    for cls in ("nixl_xfer_handle", "nixl_prepped_dlist_handle"):
        for method, params in HANDLE.items():
            _check(getattr(ns[cls], method), params, port, backends, f"{where}.{cls}.{method}")
    sync = ns["nixl_thread_sync_t"]
    assert issubclass(sync, enum.Enum)
    assert [m for m in SYNC_MODES if not hasattr(sync, m)] == []
    assert sync.NIXL_THREAD_SYNC_DEFAULT is sync.NIXL_THREAD_SYNC_NONE  # as in NIXL's enum
    # One implementation behind both names.
    assert issubclass(agent, _nixl.NixlAgentBase)
    assert issubclass(ns["nixl_agent_config"], _nixl.NixlAgentConfigBase)
    assert ns["nixl_xfer_handle"] is ixl.compat.nixl_xfer_handle


def test_exceptions_are_runtime_errors():
    for name in [n for n in ixl.compat.__all__ if n.endswith("Error")]:
        assert issubclass(getattr(ixl.compat, name), RuntimeError), name


def test_config_defaults_and_sync_mode():
    conf = ixl.compat.nixl_agent_config()
    assert (conf.enable_pthread, conf.enable_listen, conf.port, conf.capture_telemetry,
            conf.num_threads, conf.backends, conf.sync_mode) == (True, False, 0, False, 0,
                                                                  None, None)
    nixl_conf = _nixl.make_api(8888, ["UCX"])["nixl_agent_config"]()
    assert (nixl_conf.port, nixl_conf.backends) == (8888, ["UCX"])
    mode = ixl.compat.nixl_thread_sync_t.NIXL_THREAD_SYNC_RW
    assert ixl.compat.nixl_agent_config(sync_mode=mode).sync_mode is mode
    with pytest.raises(TypeError, match="sync_mode must be a nixl_thread_sync_t"):
        ixl.compat.nixl_agent_config(sync_mode=1)
    # Positional order: NIXL's examples pass (prog, listen, port, telemetry) positionally.
    conf = ixl.compat.nixl_agent_config(False, False, 0, True, 0, ["NET"])
    assert (conf.enable_pthread, conf.capture_telemetry, conf.backends) == (False, True,
                                                                           ["NET"])


# nixl._bindings' names that Python code imports (../shared/nixl-1.4-python-api.md), but for
# nixlAgent / nixlAgentConfig (NIXL's C++ agent classes: nixl_agent is the agent here).
BINDINGS = ("nixlXferDList nixlRegDList nixlRemoteDList nixlXferTelemetry DRAM_SEG VRAM_SEG "
            "BLK_SEG OBJ_SEG FILE_SEG NIXL_READ NIXL_WRITE NIXL_SUCCESS NIXL_IN_PROG "
            "NIXL_ERR_NOT_POSTED NIXL_ERR_INVALID_PARAM NIXL_ERR_BACKEND NIXL_ERR_NOT_FOUND "
            "NIXL_ERR_MISMATCH NIXL_ERR_NOT_ALLOWED NIXL_ERR_REPOST_ACTIVE NIXL_ERR_UNKNOWN "
            "NIXL_ERR_NOT_SUPPORTED NIXL_THREAD_SYNC_NONE NIXL_THREAD_SYNC_STRICT "
            "NIXL_THREAD_SYNC_RW NIXL_THREAD_SYNC_DEFAULT NIXL_COST_ANALYTICAL_BACKEND "
            "NIXL_INIT_AGENT DEFAULT_COMM_PORT HAVE_UCX_GPU_DEVICE_API nixlNotPostedError "
            "nixlInvalidParamError nixlBackendError nixlNotFoundError nixlMismatchError "
            "nixlNotAllowedError nixlRepostActiveError nixlUnknownError nixlNotSupportedError "
            "nixlRemoteDisconnectError nixlCancelledError nixlNoTelemetryError").split()


def test_bindings_names():
    try:
        import nixl._bindings as b
        ns = vars(b)
    except ImportError:
        ns = _nixl.bindings_names()
    assert [n for n in BINDINGS if n not in ns] == []
    assert ns["DEFAULT_COMM_PORT"] == 8888
    assert ns["nixlXferDList"] is ixl.XferDList and ns["nixlRegDList"] is ixl.RegDList
    for n in BINDINGS:
        if n.endswith("Error"):
            assert issubclass(ns[n], RuntimeError) and ns[n] is getattr(ixl.compat, n), n
    x = ns["nixlXferDList"](ns["FILE_SEG"], [(0, 64, 3)])
    assert x.getType() == ns["FILE_SEG"] and x.getType() == "FILE"

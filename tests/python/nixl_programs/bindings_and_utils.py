"""The module-level names NIXL programs import (nixl._bindings, nixl._utils, nixl.logging, and
nixl itself), used as NIXL's test/python uses them: descriptor lists built directly and edited
with the list methods, pickled, compared; constants; exception classes; the raw-memory helpers;
the logger hierarchy and NIXL_LOG_LEVEL. Every public name of NIXL 1.4.0 is present but those
docs/python.md lists as not provided.
"""
import ctypes
import logging
import os
import pickle
import subprocess
import sys

import numpy as np

import nixl
import nixl._bindings as nixlBind
import nixl._utils as nixl_utils
from nixl._api import (DEFAULT_COMM_PORT, nixl_agent, nixl_agent_config,
                       nixl_backend_handle, nixl_prepped_dlist_handle, nixl_thread_sync_t,
                       nixl_xfer_handle)
from nixl.logging import get_logger, set_log_level_by_env, setup_logging

# NIXL 1.4.0's public names (../shared/nixl-1.4-python-api.md), but nixlAgent and
# nixlAgentConfig: NIXL's C++ binding classes, not provided (docs/python.md).
BINDINGS = """nixlXferDList nixlRegDList nixlRemoteDList nixlXferTelemetry DRAM_SEG VRAM_SEG BLK_SEG
OBJ_SEG FILE_SEG NIXL_READ NIXL_WRITE NIXL_SUCCESS NIXL_IN_PROG NIXL_ERR_NOT_POSTED
NIXL_ERR_INVALID_PARAM NIXL_ERR_BACKEND NIXL_ERR_NOT_FOUND NIXL_ERR_MISMATCH
NIXL_ERR_NOT_ALLOWED NIXL_ERR_REPOST_ACTIVE NIXL_ERR_UNKNOWN NIXL_ERR_NOT_SUPPORTED
NIXL_THREAD_SYNC_NONE NIXL_THREAD_SYNC_STRICT NIXL_THREAD_SYNC_RW NIXL_THREAD_SYNC_DEFAULT
NIXL_COST_ANALYTICAL_BACKEND NIXL_INIT_AGENT DEFAULT_COMM_PORT HAVE_UCX_GPU_DEVICE_API""".split()
ERRORS = """nixlNotPostedError nixlInvalidParamError nixlBackendError nixlNotFoundError
nixlMismatchError nixlNotAllowedError nixlRepostActiveError nixlUnknownError
nixlNotSupportedError nixlRemoteDisconnectError nixlCancelledError nixlNoTelemetryError""".split()


def names():
    for n in BINDINGS + ERRORS:
        assert hasattr(nixlBind, n), n
        assert getattr(nixl, n) is getattr(nixlBind, n), n
    for n in ERRORS:
        assert issubclass(getattr(nixlBind, n), RuntimeError), n  # as in NIXL
    for n in ("malloc_passthru", "free_passthru", "ba_buf", "verify_transfer"):
        assert callable(getattr(nixl_utils, n)) and getattr(nixl, n) is getattr(nixl_utils, n)
    assert DEFAULT_COMM_PORT == nixlBind.DEFAULT_COMM_PORT == 8888
    assert nixl_backend_handle is int and nixl_xfer_handle and nixl_prepped_dlist_handle
    assert nixl_thread_sync_t.NIXL_THREAD_SYNC_DEFAULT is nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE
    assert nixlBind.NIXL_THREAD_SYNC_DEFAULT == nixlBind.NIXL_THREAD_SYNC_NONE
    assert (nixlBind.NIXL_SUCCESS, nixlBind.NIXL_IN_PROG, nixlBind.NIXL_ERR_NOT_FOUND) == (0, 1, -4)
    assert len({nixlBind.DRAM_SEG, nixlBind.VRAM_SEG, nixlBind.BLK_SEG, nixlBind.OBJ_SEG,
                nixlBind.FILE_SEG}) == 5
    assert nixlBind.NIXL_READ != nixlBind.NIXL_WRITE
    assert nixlBind.HAVE_UCX_GPU_DEVICE_API is False
    for mode in nixl_thread_sync_t:  # every mode accepted; ixl is thread-safe in each
        nixl_agent_config(backends=[], sync_mode=mode)
    try:
        nixl_agent_config(sync_mode=1)
    except TypeError:
        pass
    else:
        raise AssertionError("sync_mode=1 accepted")


def lists():
    rows = [(0x10000, 64, 0), (0x20000, 128, 0), (0x30000, 256, 1)]
    d = nixlBind.nixlXferDList(nixlBind.DRAM_SEG, rows)
    assert d.descCount() == 3 and not d.isEmpty() and [d[i] for i in range(3)] == rows
    arr = nixlBind.nixlXferDList(nixlBind.DRAM_SEG, np.array(rows, dtype=np.uint64))
    assert arr == d
    d.append((0x40000, 32, 0))
    d.addDesc((0x50000, 16, 0))
    assert d.descCount() == 5 and d.index((0x40000, 32, 0)) == 3
    d[0] = (0x11000, 8, 0)
    d.remDesc(1)
    assert [d[i] for i in range(d.descCount())] == [(0x11000, 8, 0), (0x30000, 256, 1),
                                                   (0x40000, 32, 0), (0x50000, 16, 0)]
    try:
        d.index((1, 2, 3))
    except nixlBind.nixlNotFoundError:
        pass
    else:
        raise AssertionError("index of a missing descriptor")
    copy = pickle.loads(pickle.dumps(d))
    assert copy == d and copy is not d and isinstance(copy, nixlBind.nixlXferDList)
    copy.clear()
    assert copy.isEmpty() and d.descCount() == 4  # the copy owns its own list

    r = nixlBind.nixlRegDList(nixlBind.DRAM_SEG, [(0x10000, 64, 0, "a"), (0x20000, 64, 0, "")])
    r.append((0x30000, 64, 0, "c"))
    assert r.descCount() == 3 and r.index((0x30000, 64, 0, "c")) == 2
    t = r.trim()
    assert isinstance(t, nixlBind.nixlXferDList) and t[2] == (0x30000, 64, 0)
    assert pickle.loads(pickle.dumps(r)) == r
    r.remDesc(0)
    assert r.descCount() == 2

    agent = nixl_agent("lists", nixl_agent_config(backends=[]))
    made = agent.get_xfer_descs(rows, "DRAM")
    assert isinstance(made, nixlBind.nixlXferDList) and made == nixlBind.nixlXferDList(
        nixlBind.DRAM_SEG, rows)
    assert isinstance(agent.get_reg_descs([r + ("",) for r in rows], "DRAM"),
                      nixlBind.nixlRegDList)


def utils():
    size = 10000
    a, b = nixl_utils.malloc_passthru(size), nixl_utils.malloc_passthru(size)
    assert a % 4096 == 0 and b % 4096 == 0
    nixl_utils.ba_buf(a, size)
    assert ctypes.string_at(a, size) == b"\xba" * size
    ctypes.memmove(b, os.urandom(size), size)
    try:
        nixl_utils.verify_transfer(a, b, size)
    except AssertionError:
        pass
    else:
        raise AssertionError("verify_transfer passed different buffers")
    ctypes.memmove(b, a, size)
    nixl_utils.verify_transfer(a, b, size)
    nixl_utils.free_passthru(a)
    nixl_utils.free_passthru(b)


def logs():
    assert get_logger("_api").name == "nixl.api"
    assert get_logger("__main__").name == "nixl.main__"  # leading underscores only
    setup_logging()
    probe = logging.getLogger("nixl-level-probe")
    os.environ["NIXL_LOG_LEVEL"] = "debug"
    set_log_level_by_env(probe)
    assert probe.level == logging.DEBUG
    os.environ["NIXL_LOG_LEVEL"] = "chatty"
    set_log_level_by_env(probe)  # a bad value: warning, level unchanged
    assert probe.level == logging.DEBUG
    del os.environ["NIXL_LOG_LEVEL"]
    out = subprocess.run([sys.executable, "-c", "import logging, nixl.logging as l; "
                          "l.get_logger('x'); print(logging.getLogger('nixl').level)"],
                         env=dict(os.environ, NIXL_LOG_LEVEL="ERROR"), capture_output=True,
                         text=True, timeout=30)
    assert out.stdout.strip() == str(logging.ERROR), out


def environment():
    """NIXL_ETCD_ENDPOINTS names the agent's etcd, as in NIXL (checked on the parameters ixl's
    agent is created with: no etcd runs here)."""
    os.environ["NIXL_ETCD_ENDPOINTS"] = "http://127.0.0.1:2379"
    try:
        assert nixl_agent_config()._params().etcd_endpoints == b"http://127.0.0.1:2379"
    finally:
        del os.environ["NIXL_ETCD_ENDPOINTS"]
    assert nixl_agent_config()._params().etcd_endpoints is None


if __name__ == "__main__":
    environment()
    names()
    lists()
    utils()
    logs()
    print("bindings, utils and logging: ok")

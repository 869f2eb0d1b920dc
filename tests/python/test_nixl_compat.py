"""NIXL 1.4.0's conventions through ixl.compat (issue 17): keyword names and positional order
that NIXL programs use, errors and None returns, query_memory by path, deregistration while
prepared lists are alive, telemetry. Backends and ports are passed explicitly (NET, loopback,
ephemeral listener ports)."""
import os
import tempfile
import time

import pytest

import ixl
from ixl.compat import (nixl_agent, nixl_agent_config, nixlNotAllowedError, nixlNotFoundError,
                        nixlNotSupportedError,
                        nixlNoTelemetryError, nixlRegDList, nixlRemoteDList, nixlXferDList)

np = pytest.importorskip("numpy")

SIZE = 4096
TIMEOUT_S = 10


def net(name, **kw):
    return nixl_agent(name, nixl_agent_config(backends=["NET"], **kw))


def wait_done(agent, handle):
    state = agent.transfer(handle)
    deadline = time.monotonic() + TIMEOUT_S
    while state != "DONE":
        assert state == "PROC" and time.monotonic() < deadline
        state = agent.check_xfer_state(handle)


def test_names_and_errors(caplog):
    with pytest.raises(ValueError):
        nixl_agent("")
    a = nixl_agent("conv", nixl_agent_config(backends=[]))
    try:
        assert a.backends == {}
        lst = a.get_xfer_descs([(0x1000, 8, 0)], "DRAM")
        with pytest.raises(KeyError):
            a.make_prepped_xfer("RD", 0, [], 0, [])
        with pytest.raises(KeyError):
            a.initialize_xfer("WR", lst, lst, "nobody")
        with pytest.raises(KeyError):
            a.get_xfer_descs([(1, 2, 3)], mem_type="V-RAM")
        with pytest.raises(KeyError):
            a.get_reg_descs([(1, 2, 3, "")], mem_type="V-RAM")
        caplog.clear()
        assert a.get_xfer_descs([(1, 2, 3, 4)], "DRAM") is None  # transfer lists: 3-tuples
        assert a.get_xfer_descs([(1, 2, 3)], mem_type=None) is None  # tuples need a type
        assert a.get_xfer_descs(a.get_reg_descs([(1, 2, 3, "")], "DRAM")) is None
        assert a.get_reg_descs([(1, 2, 3)], "DRAM") is None  # registration: 4-tuples
        assert a.get_reg_descs([(1, 2, 3, 4)], mem_type=None) is None
        assert a.get_reg_descs(lst) is None
        assert a.get_xfer_descs(np.zeros((4, 3), np.uint64)) is None  # arrays need a type
        assert a.get_xfer_descs(np.zeros((4, 4), np.uint64), "DRAM") is None
        assert a.get_xfer_descs(np.zeros((8, 8), np.uint8)[:, ::2]) is None  # ixl: buffer
        assert a.get_remote_descs([(1, 2, 0)], "DRAM") is None
        assert len(caplog.records) >= 10  # each None comes with a log line
        assert isinstance(a.get_xfer_descs(np.ones((4, 3), np.uint64), "DRAM"), nixlXferDList)
        assert isinstance(a.get_reg_descs([(1, 2, 3, "x")], "BLOCK"), nixlRegDList)
        rd = a.get_remote_descs([(0x1000, 64, 0, "peer")], "VRAM")
        assert isinstance(rd, nixlRemoteDList) and rd.getType() == "VRAM" and len(rd) == 1
        assert a.deserialize_descs(serialized_descs=a.get_serialized_descs(rd)) == rd
        # Unknown plugin / backend names: empty answers; creating one: nixlNotFoundError.
        assert a.get_plugin_mem_types("UVX") == [] and a.get_plugin_params("UVX") == {}
        assert a.get_backend_mem_types("UVX") == [] and a.get_backend_params("UVX") == {}
        assert a.get_plugin_mem_types("NET") and "DRAM" in a.get_plugin_mem_types("NET")
        with pytest.raises(nixlNotFoundError):
            a.create_backend("UVX")
        assert a.create_backend("NET") is None and list(a.backends) == ["NET"]
        assert a.backend_mems["NET"] == a.get_backend_mem_types("NET")
        assert a.plugin_mem_types["POSIX"] == a.get_plugin_mem_types("POSIX")
        assert set(a.plugin_b_options) == set(a.plugin_list) and "NET" in a.backend_options
        with pytest.raises(KeyError):
            a.get_new_notifs(backends=["UCX"])  # not created here
        assert a.get_new_notifs(backends=["NET"]) == {}
        with pytest.raises(nixlNotSupportedError):
            a.prep_mem_view(lst)
        # A pickled list from a peer is rebuilt, never run.
        with pytest.raises(Exception, match="descriptor lists only"):
            a.deserialize_descs(b"\x80\x04cos\nsystem\n.")
    finally:
        a.close()


def test_missing_plugin_skipped(caplog):
    a = nixl_agent("skip", nixl_agent_config(backends=["NO_SUCH_PLUGIN", "NET"]))
    try:
        assert list(a.backends) == ["NET"]
        assert "Skipping backend registration NO_SUCH_PLUGIN" in caplog.text
    finally:
        a.close()


def test_positional_backends_and_keywords(rng):
    a, b = net("kw_a", capture_telemetry=True), net("kw_b")
    try:
        src = rng.integers(0, 256, SIZE, dtype=np.uint8)
        dst = np.full(SIZE, 0xA5, np.uint8)
        # backends positionally, where NIXL 1.4.0 has it (is_sorted is gone).
        a.register_memory(a.get_reg_descs([(src.ctypes.data, SIZE, 0, "")], "DRAM"), "DRAM",
                          ["NET"])
        with pytest.raises(KeyError):
            a.register_memory([dst], None, ["POSIX"])  # not created: NIXL's KeyError
        b_reg = b.register_memory([dst], "DRAM", ["NET"])
        md = b.get_partial_agent_metadata(b_reg, True, ["NET"])
        assert a.add_remote_agent(md) == b"kw_b"
        half = SIZE // 2
        local = a.prep_xfer_dlist("NIXL_INIT_AGENT", [(src.ctypes.data, half, 0),
                                                      (src.ctypes.data + half, half, 0)],
                                  "DRAM", ["NET"])
        remote = a.prep_xfer_dlist("kw_b", [(dst.ctypes.data, half, 0),
                                            (dst.ctypes.data + half, half, 0)], "DRAM", ["NET"])
        h = a.make_prepped_xfer("WRITE", local, [0, 1], remote, np.array([0, 1]), b"tag-1",
                                ["NET"])
        wait_done(a, h)
        assert np.array_equal(src, dst)
        t = a.get_xfer_telemetry(h)
        assert t.descCount == 2 and t.totalBytes == SIZE and t.backendName == "NET"
        duration, margin, method = a.estimate_xfer_cost(req_handle=h)
        assert method in ("ANALYTICAL_BACKEND", "UNKNOWN", "MEASURED")
        assert a.query_xfer_backend(h) == "NET"
        deadline = time.monotonic() + TIMEOUT_S
        while not b.check_remote_xfer_done("kw_a", lookup_tag=b"tag", backends=["NET"],
                                           tag_is_prefix=True):
            assert time.monotonic() < deadline
        assert b.update_notifs(backends=["NET"]) == {"kw_a": []}
        a.send_notif("kw_b", b"plain", backend="NET")
        deadline = time.monotonic() + TIMEOUT_S
        while not b.check_remote_xfer_done("kw_a", b"lai", [], False):  # a substring
            assert time.monotonic() < deadline
        h.release()
        a.release_dlist_handle(local)
        remote.release()
        assert a.check_remote_metadata(agent="kw_b")
        a.remove_remote_agent("kw_b")
        assert not a.check_remote_metadata("kw_b")
    finally:
        a.close()
        b.close()


def test_listener_keywords():
    """fetch_remote_metadata(remote_agent=...) from a peer's listener on an ephemeral port;
    check_remote_metadata(agent=...) tells when it arrived."""
    target = net("lst_t", enable_listen_thread=True, listen_port=0)
    init = net("lst_i", enable_listen_thread=True, listen_port=0)
    try:
        def arrived():
            deadline = time.monotonic() + TIMEOUT_S
            while not init.check_remote_metadata(agent="lst_t"):
                assert time.monotonic() < deadline
                time.sleep(0.002)

        target.send_partial_agent_metadata(target.get_reg_descs([], "DRAM"), True, ["NET"],
                                           "127.0.0.1", init.listen_port)
        arrived()
        init.remove_remote_agent("lst_t")
        assert not init.check_remote_metadata("lst_t")
        init.fetch_remote_metadata(remote_agent="lst_t", ip_addr="127.0.0.1",
                                   port=target.listen_port)
        arrived()
        target.invalidate_local_metadata("127.0.0.1", init.listen_port)
    finally:
        init.close()
        target.close()


def test_query_memory_paths():
    a = nixl_agent("query", nixl_agent_config(backends=["POSIX"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "present")
        with open(path, "wb") as f:
            f.write(b"x" * 123)
        missing = os.path.join(tmp, "missing")
        try:
            resp = a.query_memory([(0, 0, 0, path), (0, 0, 0, missing),
                                   (0, 0, None, f"ro:{path}")], "POSIX", mem_type="FILE")
            st = os.stat(path)
            assert resp[0] == {"size": "123", "mode": str(st.st_mode),
                               "mtime": str(int(st.st_mtime))}
            assert resp[1] is None and resp[2] == resp[0]
            with pytest.raises(ValueError):
                a.query_memory([(0, 0, 0, path)], "NET", "FILE")  # no such backend here
        finally:
            a.close()


def test_deregister_with_live_prepared_lists(rng):
    """NIXL accepts deregister_memory while prepared lists over the memory are alive
    (engines do it at shutdown): the lists and requests using it are invalidated (later use
    raises), those over other memory are untouched, and the memory is deregistered."""
    a = net("dereg")
    try:
        buf = np.zeros(SIZE, np.uint8)
        other = np.zeros(SIZE, np.uint8)
        reg = a.register_memory([buf])
        oreg = a.register_memory([other])
        lp = a.prep_xfer_dlist("", [(buf.ctypes.data, 256, 0)], "DRAM")
        rp = a.prep_xfer_dlist("dereg", [(buf.ctypes.data + 1024, 256, 0)], "DRAM")
        op = a.prep_xfer_dlist("", [(other.ctypes.data, 256, 0)], "DRAM")
        orp = a.prep_xfer_dlist("dereg", [(other.ctypes.data + 1024, 256, 0)], "DRAM")
        h = a.make_prepped_xfer("WRITE", lp, [0], rp, [0])
        a.deregister_memory(reg)  # accepted
        for dead in (lp, rp, h):
            with pytest.raises(nixlNotAllowedError, match="deregister_memory"):
                _ = dead.ptr
        with pytest.raises(nixlNotAllowedError):
            a.make_prepped_xfer("WRITE", lp, [0], rp, [0])
        with pytest.raises(nixlNotAllowedError):
            a.transfer(h)
        with pytest.raises(ixl.errors.NotFoundError):
            a.deregister_memory(reg)  # it is gone
        other[:256] = rng.integers(0, 256, 256, dtype=np.uint8)
        h2 = a.make_prepped_xfer("WRITE", op, [0], orp, [0])  # other memory: untouched
        wait_done(a, h2)
        assert np.array_equal(other[:256], other[1024:1280])
        a.release_xfer_handle(h2)
        a.release_dlist_handle(lp)  # releasing an invalidated list is a no-op
        a.deregister_memory(oreg)
        with pytest.raises(nixlNotAllowedError):
            a.make_prepped_xfer("WRITE", op, [0], orp, [0])
    finally:
        a.close()


# NIXL's rule (agent.cpp, test_get_xfer_telemetry_cfg): y/yes/on/1 turns capture on; any
# other value leaves it to capture_telemetry ("no" with capture_telemetry=True captures).
@pytest.mark.parametrize("env,capture,expect", [("y", False, True), ("no", True, True),
                                                ("no", False, False), (None, True, True),
                                                (None, False, False)])
def test_telemetry_env(monkeypatch, rng, env, capture, expect):
    if env is None:
        monkeypatch.delenv("NIXL_TELEMETRY_ENABLE", raising=False)
    else:
        monkeypatch.setenv("NIXL_TELEMETRY_ENABLE", env)
    a = net(f"tel{env}{capture}", capture_telemetry=capture)
    try:
        buf = rng.integers(0, 256, 256, dtype=np.uint8)
        dst = np.zeros(256, np.uint8)
        a.register_memory([buf, dst])
        src = a.get_xfer_descs([(buf.ctypes.data, 128, 0), (buf.ctypes.data + 128, 128, 0)],
                               "DRAM")
        dl = a.get_xfer_descs([(dst.ctypes.data, 128, 0), (dst.ctypes.data + 128, 128, 0)],
                              "DRAM")
        h = a.initialize_xfer("WRITE", src, dl, "tel" + str(env) + str(capture), b"m")
        wait_done(a, h)
        if expect:
            t = a.get_xfer_telemetry(h)
            assert t.descCount == 2 and t.totalBytes == 256 and t.startTime > 0
        else:
            with pytest.raises(nixlNoTelemetryError):
                a.get_xfer_telemetry(h)
        a.release_xfer_handle(h)
    finally:
        a.close()

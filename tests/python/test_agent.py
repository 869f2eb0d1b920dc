"""ixl.Agent in one process: two agents over NET, loopback, storage, errors, telemetry."""
import mmap
import os
import time

import pytest

import ixl

np = pytest.importorskip("numpy")

SIZE = 1 << 20
TIMEOUT_S = 30


def done(agent, handle):
    assert agent.wait(handle, TIMEOUT_S) == "DONE"
    assert agent.check_xfer_state(handle) == "DONE"


def fill(rng, *arrays):
    """Fresh random pattern in each array."""
    for a in arrays:
        a[:] = rng.integers(0, 256, a.shape, dtype=np.uint8)


def poison(*arrays):
    for a in arrays:
        a[:] = 0xA5


def pair(agents):
    """Two agents with NET only, each having loaded the other's metadata, and a registered
    buffer in each: (a, b, abuf, bbuf)."""
    a = agents("a", backends=["NET"])
    b = agents("b", backends=["NET"])
    abuf = np.zeros(SIZE, dtype=np.uint8)
    bbuf = np.zeros(SIZE, dtype=np.uint8)
    a.register_memory([abuf])
    b.register_memory([bbuf])
    assert a.add_remote_agent(b.get_agent_metadata()) == "b"
    assert b.add_remote_agent(a.get_agent_metadata()) == "a"
    return a, b, abuf, bbuf


def test_status_names_match_libixl():
    for status, cls in ixl.errors.BY_STATUS.items():
        assert ixl.strerror(status) == cls.status_name
        assert issubclass(cls, ixl.Error)
    assert ixl.version().count(".") == 2


def test_default_backends_come_from_configuration(agents):
    a = agents("defaults")
    configured = [n for n in ixl.config()["IXL_BACKENDS"].split(",") if n]
    assert sorted(a.backends) == sorted(configured)
    assert "NET" in a.get_plugin_list() and "POSIX" in a.get_plugin_list()
    assert "engine" in a.get_plugin_params("POSIX")
    opts = {o["name"]: o for o in a.get_plugin_options("POSIX")}
    assert opts["engine"]["type"] == "enum"
    assert opts["engine"]["choices"] == ["auto", "io_uring", "threads"]
    assert opts["chunk"]["type"] == "size" and opts["chunk"]["max"] == 1 << 30
    assert opts["chunk"]["describe"] == "size 4K..1G bytes"
    assert opts["engine"]["describe"] == "enum auto|io_uring|threads"
    net = {o["name"]: o for o in a.get_plugin_options("NET")}
    assert net["timeout_ms"]["type"] == "duration" and net["timeout_ms"]["unit"] == "ms"
    assert net["local_paths"]["type"] == "bool" and "min" not in net["local_paths"]
    assert net["timeout_ms"]["describe"] == "duration 10..3600000 ms"
    assert net["local_paths"]["describe"] == "bool"
    assert "FILE" in a.get_plugin_mem_types("POSIX")
    assert a.get_backend_params("POSIX")["engine"]
    assert agents("none", backends=[]).backends == {}


def test_destroy_backend(agents):
    a = agents("bdestroy", backends=["NET", "POSIX"])
    buf = np.zeros(4096, dtype=np.uint8)
    a.register_memory([buf], backends=["POSIX"])
    a.destroy_backend("POSIX")  # its registration goes with it
    assert sorted(a.backends) == ["NET"]
    with pytest.raises(ixl.NotFoundError):
        a.deregister_memory([buf], backends=["NET"])
    a.create_backend("POSIX")
    assert sorted(a.backends) == ["NET", "POSIX"]
    # a prepared list that can use it: refused until the list is released
    a.register_memory([buf])
    h = a.prep_xfer_dlist("", a.get_xfer_descs([buf]))
    with pytest.raises(ixl.BusyError):
        a.destroy_backend("POSIX")
    a.release_dlist_handle(h)
    a.destroy_backend("POSIX")
    a.deregister_memory([buf])  # still registered with NET


def test_write_read_with_notifications(agents, rng):
    a, b, abuf, bbuf = pair(agents)
    blocks = 16
    blk = SIZE // blocks
    local = a.get_xfer_descs([(abuf.ctypes.data + i * blk, blk, 0) for i in range(blocks)],
                             "DRAM")
    remote = b.deserialize_descs(b.get_serialized_descs(
        b.get_xfer_descs([(bbuf.ctypes.data + i * blk, blk, 0) for i in range(blocks)])))
    assert len(local) == len(remote) == blocks

    fill(rng, abuf)
    poison(bbuf)
    h = a.initialize_xfer("WRITE", local, remote, "b", b"written")
    assert a.transfer(h) in ("DONE", "PROC")
    done(a, h)
    assert wait_notif(b, "a") == [b"written"]
    assert b.get_new_notifs() == {}
    assert np.array_equal(abuf, bbuf)
    a.release_xfer_handle(h)

    fill(rng, bbuf)
    poison(abuf)
    h = a.initialize_xfer("READ", local, remote, "b", notif_msg=b"read")
    a.transfer(h)
    done(a, h)
    assert np.array_equal(abuf, bbuf)
    assert wait_notif(b, "a") == [b"read"]
    # A repost with a new message replaces the notification.
    fill(rng, bbuf)
    poison(abuf)
    a.transfer(h, b"again")
    done(a, h)
    assert np.array_equal(abuf, bbuf)
    assert wait_notif(b, "a") == [b"again"]
    a.release_xfer_handle(h)
    a.release_xfer_handle(h)  # a second release is a no-op


def wait_notif(agent, sender, deadline_s=TIMEOUT_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = agent.get_new_notifs().get(sender)
        if got:
            return got
        time.sleep(0.001)
    return None


def test_send_notif_and_check_remote_xfer_done(agents):
    a, b, _, _ = pair(agents)
    a.send_notif("b", b"tag-1:hello")
    a.send_notif("b", "tag-2")
    end = time.monotonic() + TIMEOUT_S
    while not b.check_remote_xfer_done("a", b"tag-1") and time.monotonic() < end:
        time.sleep(0.001)
    assert time.monotonic() < end
    while not b.check_remote_xfer_done("a", b"tag-2", tag_is_prefix=False) and \
            time.monotonic() < end:
        time.sleep(0.001)
    assert time.monotonic() < end


def test_prepared_lists_and_index_requests_from_numpy(agents, rng):
    a, b, abuf, bbuf = pair(agents)
    n = 4096
    blk = SIZE // n
    # Local side: an N x 3 array; remote side: one N x 5 strided run per half.
    local = np.empty((n, 3), dtype=np.uint64)
    local[:, 0] = abuf.ctypes.data + np.arange(n, dtype=np.uint64) * blk
    local[:, 1] = blk
    local[:, 2] = 0
    half = n // 2
    runs = np.array([[bbuf.ctypes.data, blk, blk, half, 0],
                     [bbuf.ctypes.data + half * blk, blk, blk, half, 0]], dtype=np.uint64)
    rdl = b.get_xfer_descs(runs, "DRAM")
    assert len(rdl) == n and rdl.run_count == 2
    lprep = a.prep_xfer_dlist("NIXL_INIT_AGENT", local)
    rprep = a.prep_xfer_dlist("b", a.deserialize_descs(b.get_serialized_descs(rdl)))
    assert len(lprep) == len(rprep) == n

    perm = rng.permutation(n).astype(np.int64)
    fill(rng, abuf)
    poison(bbuf)
    h = a.make_prepped_xfer("WRITE", lprep, np.arange(n), rprep, perm, b"prepped")
    a.transfer(h)
    done(a, h)
    want = np.empty_like(abuf)
    want.reshape(n, blk)[perm] = abuf.reshape(n, blk)
    assert np.array_equal(bbuf, want)
    assert wait_notif(b, "a") == [b"prepped"]
    a.release_xfer_handle(h)

    # READ of a subset by list indices; the rest stays poisoned.
    fill(rng, bbuf)
    poison(abuf)
    idx = [5, 7, 11]
    h = a.make_prepped_xfer("READ", lprep, idx, rprep, np.array(idx, dtype=np.int32))
    a.transfer(h)
    done(a, h)
    for i in range(n):
        got = abuf[i * blk:(i + 1) * blk]
        if i in idx:
            assert np.array_equal(got, bbuf[i * blk:(i + 1) * blk])
        else:
            assert (got == 0xA5).all()
    a.release_xfer_handle(h)

    with pytest.raises(ixl.BadIndexError) as e:
        a.make_prepped_xfer("READ", lprep, [n], rprep, [0])
    assert isinstance(e.value, ixl.nixlInvalidParamError)
    with pytest.raises(ixl.MismatchError):
        a.make_prepped_xfer("READ", lprep, [0, 1], rprep, [0])
    a.release_dlist_handle(lprep)
    a.release_dlist_handle(rprep)


def test_telemetry(agents, rng):
    a, b, abuf, bbuf = pair(agents)
    h = a.initialize_xfer("WRITE", [abuf], [(bbuf.ctypes.data, SIZE, 0)], "b")
    with pytest.raises(ixl.NotPostedError):
        a.get_xfer_telemetry(h)
    fill(rng, abuf)
    poison(bbuf)
    a.transfer(h)
    done(a, h)
    assert np.array_equal(abuf, bbuf)
    t = a.get_xfer_telemetry(h)
    assert t.bytes == t.totalBytes == SIZE
    assert t.desc_count == t.descCount == 1
    assert t.post_count == 1 and t.startTime > 0
    assert t.xferDuration >= 0 and t.postDuration >= 0
    info = a.get_xfer_info(h)
    assert info["backend"] == "NET" == a.query_xfer_backend(h)

    quiet = agents("quiet", backends=["NET"], capture_telemetry=False)
    qbuf = bytearray(64)
    quiet.register_memory([qbuf])
    addr = ixl.buffer_info(qbuf)[0]
    h2 = quiet.initialize_xfer("WRITE", [(addr, 32, 0)], [(addr + 32, 32, 0)], "quiet")
    quiet.transfer(h2)
    done(quiet, h2)
    with pytest.raises(ixl.nixlNoTelemetryError):
        quiet.get_xfer_telemetry(h2)


def test_errors_carry_status_names(agents):
    a, b, abuf, bbuf = pair(agents)
    with pytest.raises(ixl.NotFoundError) as e:
        a.initialize_xfer("WRITE", [abuf], [bbuf], "nobody")
    assert isinstance(e.value, ixl.nixlNotFoundError)
    assert e.value.status_name == "IXL_ERR_NOT_FOUND" and e.value.status == -500
    assert "IXL_ERR_NOT_FOUND" in str(e.value) and "nobody" in str(e.value)

    stray = np.zeros(64, dtype=np.uint8)
    with pytest.raises(ixl.NotRegisteredError):
        a.initialize_xfer("WRITE", [stray], [(bbuf.ctypes.data, 64, 0)], "b")
    with pytest.raises(ixl.MismatchError) as e:
        a.initialize_xfer("WRITE", [(abuf.ctypes.data, 64, 0)], [(bbuf.ctypes.data, 32, 0)],
                          "b")
    assert isinstance(e.value, ixl.nixlMismatchError)
    with pytest.raises(ixl.MalformedError):
        a.add_remote_agent(b"not metadata")
    with pytest.raises(ixl.InvalidArgError):
        a.initialize_xfer("COPY", [abuf], [bbuf], "b")
    with pytest.raises(ixl.NotFoundError):
        a.create_backend("NO_SUCH_PLUGIN")
    with pytest.raises(ixl.ExistsError) as e:
        a.create_backend("NET")
    assert isinstance(e.value, ixl.nixlNotAllowedError)
    with pytest.raises(ixl.NotFoundError):
        a.remove_remote_agent("nobody")

    # A region used by a prepared list cannot be deregistered.
    prep = a.prep_xfer_dlist("", [(abuf.ctypes.data, 64, 0)])
    with pytest.raises(ixl.BusyError):
        a.deregister_memory([abuf])
    a.release_dlist_handle(prep)
    a.deregister_memory([abuf])
    with pytest.raises(ixl.NotFoundError):
        a.deregister_memory([abuf])

    a.remove_remote_agent("b")
    assert not a.check_remote_metadata("b")


def test_check_remote_metadata_and_partial_metadata(agents, rng):
    a = agents("a2", backends=["NET"])
    b = agents("b2", backends=["NET"])
    bbuf = np.zeros(2 * SIZE, dtype=np.uint8)
    other = np.zeros(SIZE, dtype=np.uint8)
    abuf = np.zeros(SIZE, dtype=np.uint8)
    a.register_memory([abuf])
    b.register_memory([bbuf])
    b.register_memory([other])
    assert not a.check_remote_metadata("b2")
    # Connection info and only bbuf's region.
    part = b.get_partial_agent_metadata([bbuf], True, [])
    assert a.add_remote_agent(part) == "b2"
    assert a.check_remote_metadata("b2")
    assert a.check_remote_metadata("b2", [(bbuf.ctypes.data, SIZE, 0)])
    assert not a.check_remote_metadata("b2", [other])
    with pytest.raises(ixl.NotRegisteredError):
        a.initialize_xfer("WRITE", [abuf], [other], "b2")
    fill(rng, abuf)
    poison(bbuf)
    h = a.initialize_xfer("WRITE", [abuf], [(bbuf.ctypes.data + SIZE, SIZE, 0)], "b2")
    a.transfer(h)
    done(a, h)
    assert np.array_equal(bbuf[SIZE:], abuf) and (bbuf[:SIZE] == 0xA5).all()
    # An incremental update adds the other region.
    a.add_remote_agent(b.get_partial_agent_metadata([other], False, ["NET"]))
    assert a.check_remote_metadata("b2", [other])
    a.make_connection("b2")


def test_buffers_of_every_kind(agents, rng):
    a = agents("loop", backends=["NET"])
    n = 4096
    src_np = np.zeros(n, dtype=np.uint8)
    dst_ba = bytearray(n)
    mm = mmap.mmap(-1, n)
    mv = memoryview(bytearray(n))
    raw = np.zeros(n, dtype=np.uint8)
    reg = a.register_memory([src_np, dst_ba, mm, mv, (raw.ctypes.data, n, 0)])
    assert len(reg) == 5 and reg.mem_type == "DRAM"
    descs = [(d[0], d[1], d[2]) for d in reg]
    assert descs[0] == (src_np.ctypes.data, n, 0)
    assert reg.trim()[4] == (raw.ctypes.data, n, 0)

    def view(i):
        return [src_np, np.frombuffer(dst_ba, dtype=np.uint8),
                np.frombuffer(mm, dtype=np.uint8), np.frombuffer(mv, dtype=np.uint8),
                raw][i]

    # Chain: numpy -> bytearray -> mmap -> memoryview -> raw tuple, each checked.
    fill(rng, src_np)
    for i in range(4):
        poison(view(i + 1))
        h = a.initialize_xfer("WRITE", [reg.trim()[i]], [reg.trim()[i + 1]], "loop")
        a.transfer(h)
        done(a, h)
        assert np.array_equal(view(i + 1), src_np)
        a.release_xfer_handle(h)

    # A read-only buffer can be a WRITE's source.
    ro = bytes(rng.integers(0, 256, n, dtype=np.uint8))
    a.register_memory([ro])
    poison(raw)
    h = a.initialize_xfer("WRITE", [ro], [raw], "loop")
    a.transfer(h)
    done(a, h)
    assert bytes(raw) == ro
    a.release_xfer_handle(h)
    a.deregister_memory([ro])
    a.deregister_memory(reg)
    mm.close()  # the lists hold the mmap, not an export of its buffer


def test_storage_path_mode_and_query(agents, rng, tmp_path):
    a = agents("store", backends=["POSIX"])
    path = tmp_path / "kv.bin"
    assert a.query_memory([(0, 0, ixl.DEV_NONE, f"rw:{path}")], "POSIX", "FILE") == [None]
    buf = np.zeros(SIZE, dtype=np.uint8)
    back = np.zeros(SIZE, dtype=np.uint8)
    a.register_memory([buf, back])
    freg = a.register_memory([(0, 0, None, f"rw,create:{path}")], "FILE")
    dev = freg[0][2]
    assert dev >= ixl.DEV_ASSIGNED_MIN
    with pytest.raises(ixl.InvalidArgError):
        freg.trim()  # the whole file (len 0) is no transfer descriptor
    fx = a.get_xfer_descs([(0, SIZE, dev)], "FILE")
    fill(rng, buf)
    h = a.initialize_xfer("WRITE", [buf], fx, "store")
    a.transfer(h)
    done(a, h)
    a.release_xfer_handle(h)
    assert a.query_memory([(0, 0, ixl.DEV_NONE, f"rw:{path}")], "POSIX", "FILE") == \
        [{"size": SIZE}]
    poison(back)
    h = a.initialize_xfer("READ", [back], fx, "store")
    a.transfer(h)
    done(a, h)
    assert np.array_equal(buf, back)
    a.release_xfer_handle(h)
    with pytest.raises(ixl.NotifUnsupportedError) as e:
        a.initialize_xfer("WRITE", [buf], fx, "store", b"notif")
    assert isinstance(e.value, ixl.nixlNotSupportedError)
    a.deregister_memory(freg)
    with open(path, "rb") as f:
        assert f.read() == buf.tobytes()


def test_fd_mode_file_and_fileno(agents, rng, tmp_path):
    a = agents("fd", backends=["POSIX"])
    fd = os.open(tmp_path / "f.bin", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        buf = np.zeros(SIZE, dtype=np.uint8)
        a.register_memory([buf])
        freg = a.register_memory(a.get_reg_descs([(0, SIZE, fd, "file")], "FILE"))
        assert freg[0] == (0, SIZE, fd, "file")
        fill(rng, buf)
        h = a.initialize_xfer("WRITE", [buf], freg.trim(), "fd")
        assert a.fileno() >= 0
        a.transfer(h)
        done(a, h)
        a.progress()
        assert os.pread(fd, SIZE, 0) == buf.tobytes()
        assert a.stats()["completed"] >= 1
        a.release_xfer_handle(h)
        a.deregister_memory(freg)
    finally:
        os.close(fd)


def test_handles_outlive_nothing(agents, rng):
    a, b, abuf, bbuf = pair(agents)
    h = a.initialize_xfer("WRITE", [abuf], [bbuf], "b")
    a.transfer(h)
    del h  # collected without release: released, no crash
    h = a.initialize_xfer("WRITE", [abuf], [bbuf], "b")
    a.close()
    with pytest.raises(ixl.Error):
        a.check_xfer_state(h)
    a.close()


def test_remote_name_not_utf8():
    """A remote agent whose name is not UTF-8 gives a clean error and leaves nothing loaded."""
    raw = b"nu-\xff\xfe"
    a = ixl.Agent("nu-a", ixl.AgentConfig(backends=["NET"]))
    b = ixl.Agent(raw, ixl.AgentConfig(backends=["NET"]))
    try:
        md = b.get_agent_metadata()
        for _ in range(2):  # the second load meets no half-loaded agent either
            with pytest.raises(ixl.MalformedError) as e:
                a.add_remote_agent(md)
            assert "not UTF-8" in str(e.value)
            assert not a.check_remote_metadata(raw)
    finally:
        a.close()
        b.close()


def test_compat_conventions(rng):
    from ixl.compat import nixl_agent, nixl_agent_config, nixlNotFoundError
    conf = nixl_agent_config(backends=["NET"], capture_telemetry=True)
    a = nixl_agent("ca", conf)
    b = nixl_agent("cb", nixl_agent_config(backends=["NET"]))
    try:
        buf = np.zeros(SIZE, dtype=np.uint8)
        dst = np.zeros(SIZE, dtype=np.uint8)
        a.register_memory(a.get_reg_descs([(buf.ctypes.data, SIZE, 0, "")], "DRAM"))
        b.register_memory(b.get_reg_descs([dst]))
        name = a.add_remote_agent(b.get_agent_metadata())
        assert name == b"cb"
        fill(rng, buf)
        poison(dst)
        h = a.initialize_xfer("WRITE", a.get_xfer_descs([buf]), b.get_xfer_descs([dst]), name,
                              b"c")
        state = a.transfer(h)
        while state != "DONE":
            assert state == "PROC"
            state = a.check_xfer_state(h)
        assert np.array_equal(buf, dst)
        assert a.get_xfer_telemetry(h).totalBytes == SIZE
        a.release_xfer_handle(h)
        assert wait_notif(b, "ca") == [b"c"]
        with pytest.raises(nixlNotFoundError):
            a.initialize_xfer("READ", [buf], [dst], "nobody")
        a.remove_remote_agent(name)
    finally:
        a.close()
        b.close()


def test_compat_ucx_when_present():
    from ixl.compat import nixl_agent, nixl_agent_config
    if "UCX" not in ixl.plugin_list():
        pytest.skip("the UCX plugin is not built (libucx-dev missing)")
    a = nixl_agent("ucx", nixl_agent_config(backends=["UCX"]))
    b = nixl_agent("ucx_peer", nixl_agent_config(backends=["UCX"]))
    try:
        assert list(a.backends) == ["UCX"]
        assert "DRAM" in a.get_backend_mem_types("UCX")
        src = np.random.default_rng().integers(0, 256, SIZE, dtype=np.uint8)
        dst = np.full(SIZE, 0xA5, dtype=np.uint8)
        a.register_memory([src])
        b.register_memory([dst])
        peer = a.add_remote_agent(b.get_agent_metadata())
        h = a.initialize_xfer("WRITE", [src], [dst], peer, b"ucx")
        state = a.transfer(h)
        deadline = time.monotonic() + TIMEOUT_S
        while state != "DONE" and time.monotonic() < deadline:
            state = a.check_xfer_state(h)
        assert state == "DONE" and np.array_equal(src, dst)
        assert a.query_xfer_backend(h) == "UCX"
        assert wait_notif(b, "ucx") == [b"ucx"]
        a.release_xfer_handle(h)
    finally:
        a.close()
        b.close()


def test_descriptor_lists(agents):
    a = agents("lists", backends=[])
    rows = [(0x1000 + i * 64, 64, i % 3) for i in range(200)]  # > 64 rows: through numpy
    fast = a.get_xfer_descs(rows, "FILE")
    slow = a.get_xfer_descs(rows[:50], "FILE")
    assert list(fast)[:50] == list(slow) == rows[:50] and fast[-1] == rows[-1]
    assert fast.mem_type == "FILE" and len(fast) == 200 and fast.run_count == 200
    runs = a.get_xfer_descs([(0x1000, 64, 128, 1000, 0)] * 3)
    assert len(runs) == 3000 and runs.run_count == 3 and runs[1001] == (0x1000 + 128, 64, 0)
    back = a.deserialize_descs(a.get_serialized_descs(runs))
    assert back.runs() == runs.runs() and back.mem_type == "DRAM"
    reg = a.get_reg_descs(fast)
    assert reg.mem_type == "FILE" and reg[5] == rows[5] + ("",)
    reg = a.get_reg_descs([(0, 10, 3, "label"), (0, 0, None, b"rw:/x")], "FILE")
    assert reg[0][3] == "label" and reg[1][2] == ixl.DEV_NONE and reg[1][3] == "rw:/x"
    arr = np.array(rows, dtype=np.int64)
    assert list(a.get_reg_descs(arr, "DRAM"))[7] == rows[7] + ("",)
    with pytest.raises(ixl.InvalidArgError):
        a.get_xfer_descs([(0x1000, 0, 0)])
    with pytest.raises(TypeError):
        a.get_xfer_descs(np.zeros((4, 3), dtype=np.float64))
    with pytest.raises(ValueError):
        a.get_xfer_descs(np.zeros((4, 4), dtype=np.uint64))
    with pytest.raises(ixl.BadMemTypeError):
        a.get_xfer_descs(rows, "HBM")
    with pytest.raises(TypeError):
        a.get_xfer_descs([object()])


def test_auth_key_config(agents, rng):
    """AgentConfig's auth_key reaches the agent: a short key is refused at creation; agents
    holding the same key exchange metadata and move data."""
    with pytest.raises(ixl.errors.InvalidArgError):
        agents("short", backends=["NET"], auth_key="too-short")
    key = b"k" * 16 + os.urandom(16)
    a = agents("ka", backends=["NET"], auth_key=key)
    b = agents("kb", backends=["NET"], auth_key=key)
    abuf = np.zeros(SIZE, dtype=np.uint8)
    bbuf = np.zeros(SIZE, dtype=np.uint8)
    a.register_memory([abuf])
    b.register_memory([bbuf])
    assert a.add_remote_agent(b.get_agent_metadata()) == "kb"
    fill(rng, abuf)
    poison(bbuf)
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([abuf]), b.get_xfer_descs([bbuf]), "kb")
    assert a.transfer(h) in ("DONE", "PROC")
    done(a, h)
    assert (abuf == bbuf).all()
    a.release_xfer_handle(h)

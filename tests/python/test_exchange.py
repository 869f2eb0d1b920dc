"""Metadata exchange from Python without a side channel: listeners (peer mode)."""
import time

import pytest

import ixl

np = pytest.importorskip("numpy")

SIZE = 1 << 20
TIMEOUT_S = 20


def wait_loaded(agent, name, want=True):
    deadline = time.time() + TIMEOUT_S
    while agent.check_remote_metadata(name) != want:
        assert time.time() < deadline, f"{name} loaded={not want} after {TIMEOUT_S} s"
        time.sleep(0.01)


def test_send_fetch_invalidate_through_listeners(agents):
    rng = np.random.default_rng()
    a = agents("xa", backends=["NET"], enable_listen_thread=True, listen_port=0)
    b = agents("xb", backends=["NET"], enable_listen_thread=True, listen_port=0)
    abuf = np.zeros(SIZE, dtype=np.uint8)
    bbuf = np.zeros(SIZE, dtype=np.uint8)
    a.register_memory([abuf])
    b.register_memory([bbuf])
    assert a.listen_port != 0 and b.listen_port != 0

    # b sends its metadata to a's listener; a fetches nothing itself
    assert not a.check_remote_metadata("xb")
    b.send_local_metadata("127.0.0.1", a.listen_port)
    assert a.check_remote_metadata("xb")
    # b fetches a's metadata from a's listener (asynchronous)
    b.fetch_remote_metadata("xa", "127.0.0.1", a.listen_port)
    wait_loaded(b, "xa")

    # a WRITE with a notification, a READ back, each with fresh data and a poisoned target
    local = a.get_xfer_descs([(abuf.ctypes.data, SIZE, 0)], "DRAM")
    remote = b.get_xfer_descs([(bbuf.ctypes.data, SIZE, 0)], "DRAM")
    abuf[:] = rng.integers(0, 256, SIZE, dtype=np.uint8)
    bbuf[:] = 0xA5
    h = a.initialize_xfer("WRITE", local, remote, "xb", b"via listener")
    a.transfer(h)
    assert a.wait(h, TIMEOUT_S) == "DONE"
    a.release_xfer_handle(h)
    assert np.array_equal(abuf, bbuf)
    deadline = time.time() + TIMEOUT_S
    got = {}
    while not got and time.time() < deadline:
        got = b.get_new_notifs()
    assert got == {"xa": [b"via listener"]}
    bbuf[:] = rng.integers(0, 256, SIZE, dtype=np.uint8)
    abuf[:] = 0x5A
    h = b.initialize_xfer("READ", remote, local, "xa")
    b.transfer(h)
    assert b.wait(h, TIMEOUT_S) == "DONE"
    b.release_xfer_handle(h)
    assert np.array_equal(abuf, bbuf)

    # labeled partial metadata, fetched by label by a third agent
    c = agents("xc", backends=["NET"])
    b.send_partial_agent_metadata(remote, True, [], "127.0.0.1", a.listen_port, label="kv0")
    c.fetch_remote_metadata("xb", "127.0.0.1", b.listen_port, label="kv0")
    wait_loaded(c, "xb")
    assert c.check_remote_metadata("xb", remote)

    # b invalidates itself everywhere it was sent to: a drops it
    b.invalidate_local_metadata()
    wait_loaded(a, "xb", want=False)

    # errors carry their status: nothing listens there
    with pytest.raises(ixl.ConnRefusedError) as e:
        a.send_local_metadata("127.0.0.1", 1)
    assert e.value.status_name == "IXL_ERR_CONN_REFUSED"


def test_fetch_status(agents):
    """fetch_remote_metadata_status: none, in progress or loaded, and a failed fetch's error."""
    a = agents("fa", backends=["NET"], enable_listen_thread=True, listen_port=0)
    b = agents("fb", backends=["NET"])
    assert b.fetch_remote_metadata_status("fa") == "none"
    b.fetch_remote_metadata("fa", "127.0.0.1", a.listen_port)
    deadline = time.time() + TIMEOUT_S
    while (st := b.fetch_remote_metadata_status("fa")) == "in_progress":
        assert time.time() < deadline, f"the fetch still runs after {TIMEOUT_S} s"
        time.sleep(0.01)
    assert st == "loaded"
    # nothing listens on port 1: the fetch fails in its thread, and the status says why
    b.fetch_remote_metadata("nobody", "127.0.0.1", 1)
    deadline = time.time() + TIMEOUT_S
    with pytest.raises(ixl.ConnRefusedError) as e:
        while b.fetch_remote_metadata_status("nobody") == "in_progress":
            assert time.time() < deadline, f"the fetch still runs after {TIMEOUT_S} s"
            time.sleep(0.01)
    assert "cannot connect" in str(e.value)

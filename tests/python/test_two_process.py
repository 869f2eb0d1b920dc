"""Two agents in two processes over NET: metadata and descriptors over a pipe, WRITE and READ
with notifications from prepared lists and numpy index arrays, telemetry, and the error a
request to a peer that exited ends in."""
import multiprocessing as mp
import time

import pytest

import ixl

np = pytest.importorskip("numpy")
peers = pytest.importorskip("peers")

TIMEOUT_S = 30


@pytest.fixture
def peer():
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=peers.target, args=(there, "target", ["NET"]))
    proc.start()
    assert here.poll(TIMEOUT_S), "the target process did not start"
    yield proc, here
    if proc.is_alive():
        try:
            here.send(("exit",))
        except OSError:
            pass
        proc.join(TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
        proc.join()


def ask(conn, *cmd):
    conn.send(cmd)
    assert conn.poll(TIMEOUT_S + 5), f"no answer to {cmd[0]}"
    return conn.recv()


def test_two_processes(peer, rng):
    proc, conn = peer
    metadata, serialized = conn.recv()
    agent = ixl.Agent("initiator", ixl.AgentConfig(backends=["NET"]))
    try:
        assert agent.add_remote_agent(metadata) == "target"
        assert agent.check_remote_metadata("target")
        remote = agent.deserialize_descs(serialized)
        n = len(remote)
        assert n == peers.BLOCKS
        blk = peers.SIZE // n
        buf = np.zeros(peers.SIZE, dtype=np.uint8)
        agent.register_memory([buf])
        local = agent.prep_xfer_dlist("", [(buf.ctypes.data, blk, blk, n, 0)])
        rprep = agent.prep_xfer_dlist("target", remote)

        # WRITE every block to a permuted place, with a notification.
        buf[:] = rng.integers(0, 256, buf.shape, dtype=np.uint8)
        ask(conn, "poison")
        perm = rng.permutation(n)
        h = agent.make_prepped_xfer("WRITE", local, np.arange(n), rprep, perm, b"written")
        agent.transfer(h)
        assert agent.wait(h, TIMEOUT_S) == "DONE"
        assert ask(conn, "notifs", "initiator") == [b"written"]
        got = np.frombuffer(ask(conn, "data"), dtype=np.uint8).reshape(n, blk)
        assert np.array_equal(got[perm], buf.reshape(n, blk))
        t = agent.get_xfer_telemetry(h)
        assert t.bytes == peers.SIZE and t.post_count == 1
        agent.release_xfer_handle(h)

        # READ half of the blocks back, with a notification to the target.
        want = np.frombuffer(ask(conn, "fill"), dtype=np.uint8).reshape(n, blk)
        buf[:] = 0xA5
        idx = np.arange(0, n, 2)
        h = agent.make_prepped_xfer("READ", local, idx, rprep, idx, b"read")
        assert agent.transfer(h) in ("DONE", "PROC")
        while agent.check_xfer_state(h) != "DONE":
            time.sleep(0.0005)
        mine = buf.reshape(n, blk)
        assert np.array_equal(mine[idx], want[idx])
        assert (mine[1::2] == 0xA5).all()
        assert ask(conn, "notifs", "initiator") == [b"read"]
        agent.release_xfer_handle(h)

        # Whole-list request (no prepared lists) after the target has exited: an error,
        # raised by name, in bounded time.
        h = agent.initialize_xfer("WRITE", [buf], [(remote[0][0], peers.SIZE, 0)], "target")
        assert ask(conn, "exit") == "bye"
        proc.join(TIMEOUT_S)
        start = time.monotonic()
        with pytest.raises(ixl.Error) as e:
            agent.transfer(h)
            agent.wait(h, TIMEOUT_S)
        assert time.monotonic() - start < TIMEOUT_S
        assert e.value.status_name.startswith("IXL_ERR_")
        print(f"request to an exited peer: {e.value.status_name}: {e.value.detail}")
        agent.release_xfer_handle(h)
        agent.release_dlist_handle(local)
        agent.release_dlist_handle(rprep)
    finally:
        agent.close()

"""Two processes exchanging metadata through their listeners, as NIXL programs do: the
target pushes partial metadata (send_partial_agent_metadata) to the initiator's listener, one
region set at a time; the initiator waits on check_remote_metadata, READs the first set (a
transfer into the second set fails with nixlNotFoundError until it is sent), WRITEs the second;
then it drops the target and fetches its whole metadata from the target's listener
(fetch_remote_metadata), and the target invalidates it. Buffers come from nixl._utils.

Written for NIXL 1.4's Python API; only ports and backends are chosen here: ephemeral ports
(listen_port=0, the port read back from the agent) and the NET backend.
"""
import ctypes
import multiprocessing as mp
import os
import sys
import time

import nixl._utils as nixl_utils
from nixl._api import nixl_agent, nixl_agent_config
from nixl._bindings import nixlNotFoundError
from nixl.logging import get_logger

logger = get_logger(__name__)
IP = "127.0.0.1"
BUF, COUNT = 4096, 8
TIMEOUT_S = 20


def until(what, cond):
    end = time.monotonic() + TIMEOUT_S
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.001)


def port_of(agent):
    # ixl's agent tells the port its listener took (listen_port=0: any free port).
    return agent.listen_port


def recv(conn):
    if not conn.poll(TIMEOUT_S):
        raise TimeoutError("the peer process did not answer")
    return conn.recv()


def pattern(addrs):
    """A fresh random pattern in every buffer."""
    for a in addrs:
        ctypes.memmove(a, os.urandom(BUF), BUF)


def read_all(addrs):
    return [ctypes.string_at(a, BUF) for a in addrs]


def target(conn):
    agent = nixl_agent("target", nixl_agent_config(True, True, 0, backends=["NET"]))
    sets = [[nixl_utils.malloc_passthru(BUF) for _ in range(COUNT)] for _ in range(2)]
    regs = [agent.get_reg_descs([(a, BUF, 0, "") for a in s], "DRAM") for s in sets]
    for r in regs:
        assert agent.register_memory(r) is not None
    init_port = recv(conn)
    conn.send((port_of(agent), [agent.get_serialized_descs(r.trim()) for r in regs]))

    # Set 1: fresh pattern, then only its regions go to the initiator.
    pattern(sets[0])
    conn.send(read_all(sets[0]))
    agent.send_partial_agent_metadata(regs[0], True, ["NET"], IP, init_port)
    until("the READ's notification",
          lambda: agent.check_remote_xfer_done("initiator", b"UUID1"))
    conn.send("read seen")

    # Set 2: poisoned; sent; the initiator WRITEs it.
    for a in sets[1]:
        nixl_utils.ba_buf(a, BUF)
    assert recv(conn) == "send set 2"
    agent.send_partial_agent_metadata(regs[1], True, ["NET"], IP, init_port)
    until("the WRITE's notification",
          lambda: agent.check_remote_xfer_done("initiator", b"UUID2"))
    conn.send(read_all(sets[1]))

    # Whole metadata fetched from this listener; then invalidated at the initiator.
    pattern(sets[0] + sets[1])
    conn.send(read_all(sets[0] + sets[1]))
    assert recv(conn) == "fetched"
    agent.invalidate_local_metadata(IP, init_port)
    assert recv(conn) == "bye"
    for r in regs:
        agent.deregister_memory(r)
    for a in sets[0] + sets[1]:
        nixl_utils.free_passthru(a)


def wait_done(agent, handle):
    state = agent.transfer(handle)
    end = time.monotonic() + TIMEOUT_S
    while state != "DONE":
        assert state == "PROC", state
        if time.monotonic() > end:
            raise TimeoutError("transfer did not complete")
        state = agent.check_xfer_state(handle)


def initiator(conn):
    agent = nixl_agent("initiator", nixl_agent_config(True, True, 0, backends=["NET"]))
    mine = [nixl_utils.malloc_passthru(BUF) for _ in range(COUNT * 2)]
    reg = agent.get_reg_descs([(a, BUF, 0, "") for a in mine], "DRAM")
    agent.register_memory(reg)
    local1 = agent.get_xfer_descs([(a, BUF, 0) for a in mine[:COUNT]], "DRAM")
    local2 = agent.get_xfer_descs([(a, BUF, 0) for a in mine[COUNT:]], "DRAM")
    local_all = reg.trim()

    conn.send(port_of(agent))
    target_port, serialized = recv(conn)
    remote1, remote2 = (agent.deserialize_descs(s) for s in serialized)
    remote_all = agent.get_xfer_descs(list(remote1) + list(remote2), "DRAM")

    # READ set 1 once its regions arrived (partial metadata, with connection info).
    expect = recv(conn)
    for a in mine:
        nixl_utils.ba_buf(a, BUF)
    until("set 1's metadata", lambda: agent.check_remote_metadata("target", remote1))
    assert not agent.check_remote_metadata("target", remote2)
    try:
        agent.initialize_xfer("READ", local2, remote2, "target", b"UUID0")
    except nixlNotFoundError:
        pass
    else:
        raise AssertionError("a transfer into regions not sent yet was accepted")
    h1 = agent.initialize_xfer("READ", local1, remote1, "target", b"UUID1")
    wait_done(agent, h1)
    assert read_all(mine[:COUNT]) == expect
    assert recv(conn) == "read seen"

    # WRITE set 2 once its regions arrived.
    pattern(mine[COUNT:])
    sent = read_all(mine[COUNT:])
    conn.send("send set 2")
    until("set 2's metadata", lambda: agent.check_remote_metadata("target", remote2))
    h2 = agent.initialize_xfer("WRITE", local2, remote2, "target", b"UUID2")
    wait_done(agent, h2)
    assert recv(conn) == sent
    agent.release_xfer_handle(h1)
    agent.release_xfer_handle(h2)

    # Drop the target; fetch its whole metadata from its listener; READ everything.
    agent.remove_remote_agent("target")
    assert not agent.check_remote_metadata("target")
    expect = recv(conn)
    for a in mine:
        nixl_utils.ba_buf(a, BUF)
    agent.fetch_remote_metadata("target", IP, target_port)
    until("the fetched metadata", lambda: agent.check_remote_metadata("target", remote_all))
    h3 = agent.initialize_xfer("READ", local_all, remote_all, "target")
    wait_done(agent, h3)
    assert read_all(mine) == expect
    agent.release_xfer_handle(h3)

    conn.send("fetched")
    until("the invalidation", lambda: not agent.check_remote_metadata("target"))
    conn.send("bye")
    agent.deregister_memory(reg)
    for a in mine:
        nixl_utils.free_passthru(a)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    peer = ctx.Process(target=target, args=(b,))
    peer.start()
    try:
        initiator(a)
    finally:
        peer.join(TIMEOUT_S)
        if peer.is_alive():
            peer.kill()
    if peer.exitcode != 0:
        sys.exit(f"target process failed (exit code {peer.exitcode})")
    print("two processes, listener and partial metadata: ok")

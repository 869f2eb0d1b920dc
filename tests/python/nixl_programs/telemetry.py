"""Per-request telemetry as NIXL programs read it: NIXL_TELEMETRY_ENABLE=y in the environment
switches capture on for agents created after it, as capture_telemetry=True does; without
either, get_xfer_telemetry raises nixlNoTelemetryError. Counts are NIXL's: descCount is the
number of descriptors given (two adjacent ones count 2), totalBytes their sum. Buffers come
from nixl._utils.

Written for NIXL 1.4's Python API; only the backend (NET) is chosen here.
"""
import ctypes
import os
import time
import uuid

import nixl._utils as nixl_utils
from nixl._api import nixl_agent, nixl_agent_config
from nixl._bindings import nixlNoTelemetryError

SIZE = 128 * 1024
TIMEOUT_S = 20


def transfer(agent1, agent2):
    """A WRITE of two adjacent halves agent1 -> agent2; returns (agent1, handle)."""
    addr1 = nixl_utils.malloc_passthru(SIZE)
    addr2 = nixl_utils.malloc_passthru(SIZE)
    agent1.register_memory([(addr1, SIZE, 0, "")], "DRAM")
    agent2.register_memory([(addr2, SIZE, 0, "")], "DRAM")
    agent1.add_remote_agent(agent2.get_agent_metadata())
    half = SIZE // 2
    src = agent1.get_xfer_descs([(addr1, half, 0), (addr1 + half, half, 0)], "DRAM")
    dst = agent1.get_xfer_descs([(addr2, half, 0), (addr2 + half, half, 0)], "DRAM")
    ctypes.memmove(addr1, os.urandom(SIZE), SIZE)
    nixl_utils.ba_buf(addr2, SIZE)
    handle = agent1.initialize_xfer("WRITE", src, dst, agent2.name, b"telem")
    state = agent1.transfer(handle)
    end = time.monotonic() + TIMEOUT_S
    while state != "DONE":
        assert state == "PROC", state
        assert time.monotonic() < end, "transfer did not complete"
        state = agent1.check_xfer_state(handle)
    while not agent2.check_remote_xfer_done(agent1.name, b"telem"):
        assert time.monotonic() < end, "no notification"
    nixl_utils.verify_transfer(addr1, addr2, SIZE)
    return handle, (addr1, addr2)


def check(agent1, agent2):
    handle, addrs = transfer(agent1, agent2)
    t = agent1.get_xfer_telemetry(handle)
    assert t.descCount == 2, t.descCount
    assert t.totalBytes == SIZE, t.totalBytes
    assert t.startTime > 0
    assert t.xferDuration >= t.postDuration >= 0
    agent1.release_xfer_handle(handle)
    for a in addrs:
        nixl_utils.free_passthru(a)


def agents(**cfg):
    return (nixl_agent(str(uuid.uuid4()), nixl_agent_config(backends=["NET"], **cfg)),
            nixl_agent(str(uuid.uuid4()), nixl_agent_config(backends=["NET"])))


def main():
    os.environ.pop("NIXL_TELEMETRY_ENABLE", None)
    # Off by default.
    a1, a2 = agents()
    handle, addrs = transfer(a1, a2)
    try:
        a1.get_xfer_telemetry(handle)
    except nixlNoTelemetryError:
        pass
    else:
        raise AssertionError("telemetry without NIXL_TELEMETRY_ENABLE or capture_telemetry")
    a1.release_xfer_handle(handle)
    for a in addrs:
        nixl_utils.free_passthru(a)

    # On through the environment, for agents created after it is set.
    os.environ["NIXL_TELEMETRY_ENABLE"] = "y"
    try:
        check(*agents())
    finally:
        del os.environ["NIXL_TELEMETRY_ENABLE"]

    # On through the configuration, whatever the environment says.
    os.environ["NIXL_TELEMETRY_ENABLE"] = "no"
    try:
        check(*agents(capture_telemetry=True))
    finally:
        del os.environ["NIXL_TELEMETRY_ENABLE"]


if __name__ == "__main__":
    main()
    print("telemetry: ok")

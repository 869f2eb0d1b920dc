"""A storage round trip as NIXL programs do it: query_memory on file paths through the POSIX
backend ((0, 0, 0, path) entries: a dict with size, mode and mtime, or None for a missing
file), then DRAM -> FILE (WRITE) and FILE -> DRAM (READ) on a file registered by fd, with the
agent's own name as the remote agent. Buffers come from nixl._utils.

Written for NIXL 1.4's Python API; only the backends are chosen here (none at creation, then
POSIX through create_backend).
"""
import ctypes
import os
import stat
import sys
import tempfile
import time

import nixl._utils as nixl_utils
from nixl._api import nixl_agent, nixl_agent_config

SIZE, BLOCKS = 1 << 20, 16
TIMEOUT_S = 20


def run(agent, op, local, remote):
    handle = agent.initialize_xfer(op, local, remote, agent.name)
    state = agent.transfer(handle)
    end = time.monotonic() + TIMEOUT_S
    while state != "DONE":
        assert state == "PROC", state
        if time.monotonic() > end:
            raise TimeoutError(f"{op} did not complete")
        state = agent.check_xfer_state(handle)
    agent.release_xfer_handle(handle)


def main(tmp):
    agent = nixl_agent("storage", nixl_agent_config(False, False, 0, backends=[]))
    assert "POSIX" in agent.get_plugin_list()
    agent.create_backend("POSIX", agent.get_plugin_params("POSIX"))
    assert "FILE" in agent.get_backend_mem_types("POSIX")

    path = os.path.join(tmp, "blocks.bin")
    missing = os.path.join(tmp, "missing.bin")
    with open(path, "wb") as f:
        f.write(b"x" * 100)
    resp = agent.query_memory([(0, 0, 0, path), (0, 0, 0, missing)], "POSIX", mem_type="FILE")
    assert len(resp) == 2 and resp[1] is None, resp
    assert all(isinstance(v, str) for v in resp[0].values()), resp  # NIXL: strings
    st = os.stat(path)
    assert int(resp[0]["size"]) == 100, resp
    assert int(resp[0]["mode"]) == st.st_mode and stat.S_ISREG(int(resp[0]["mode"])), resp
    assert int(resp[0]["mtime"]) == int(st.st_mtime), resp

    src = nixl_utils.malloc_passthru(SIZE)
    dst = nixl_utils.malloc_passthru(SIZE)
    dram = agent.register_memory([(src, SIZE, 0, ""), (dst, SIZE, 0, "")], "DRAM")
    fd = os.open(path, os.O_RDWR)
    try:
        file_reg = agent.register_memory([(0, SIZE, fd, "blocks")], "FILE")
        blk = SIZE // BLOCKS
        files = agent.get_xfer_descs([(i * blk, blk, fd) for i in range(BLOCKS)], "FILE")
        srcs = agent.get_xfer_descs([(src + i * blk, blk, 0) for i in range(BLOCKS)], "DRAM")
        dsts = agent.get_xfer_descs([(dst + i * blk, blk, 0) for i in range(BLOCKS)], "DRAM")

        # DRAM -> FILE: fresh pattern; the file's bytes are checked on disk.
        ctypes.memmove(src, os.urandom(SIZE), SIZE)
        os.pwrite(fd, b"\xa5" * SIZE, 0)
        run(agent, "WRITE", srcs, files)
        assert os.pread(fd, SIZE, 0) == ctypes.string_at(src, SIZE)

        # FILE -> DRAM into a poisoned buffer.
        nixl_utils.ba_buf(dst, SIZE)
        run(agent, "READ", dsts, files)
        nixl_utils.verify_transfer(src, dst, SIZE)

        resp = agent.query_memory([(0, 0, 0, path)], "POSIX", "FILE")
        assert int(resp[0]["size"]) == SIZE, resp
        agent.deregister_memory(file_reg)
    finally:
        os.close(fd)
    agent.deregister_memory(dram)
    nixl_utils.free_passthru(src)
    nixl_utils.free_passthru(dst)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
    print("storage round trip with query_memory: ok")
    sys.exit(0)

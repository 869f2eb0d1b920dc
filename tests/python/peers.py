"""Peer processes for test_two_process.py (a module of its own so that multiprocessing's
spawn start method can import it in the child)."""
import time

import numpy as np

import ixl

SIZE = 1 << 20
BLOCKS = 256
TIMEOUT_S = 30


def target(conn, name, backends):
    """A target agent driven over a pipe: it sends its metadata and descriptors, then serves
    commands: ("fill",) random data, ("poison",), ("data",), ("notifs", sender), ("exit",)."""
    agent = ixl.Agent(name, ixl.AgentConfig(backends=backends))
    buf = np.zeros(SIZE, dtype=np.uint8)
    agent.register_memory([buf])
    blk = SIZE // BLOCKS
    descs = np.empty((BLOCKS, 3), dtype=np.uint64)
    descs[:, 0] = buf.ctypes.data + np.arange(BLOCKS, dtype=np.uint64) * blk
    descs[:, 1] = blk
    descs[:, 2] = 0
    conn.send((agent.get_agent_metadata(),
               agent.get_serialized_descs(agent.get_xfer_descs(descs, "DRAM"))))
    rng = np.random.default_rng()
    while True:
        cmd = conn.recv()
        if cmd[0] == "fill":
            buf[:] = rng.integers(0, 256, SIZE, dtype=np.uint8)
            conn.send(bytes(buf))
        elif cmd[0] == "poison":
            buf[:] = 0xA5
            conn.send(None)
        elif cmd[0] == "data":
            conn.send(bytes(buf))
        elif cmd[0] == "notifs":
            end = time.monotonic() + TIMEOUT_S
            got = []
            while not got and time.monotonic() < end:
                got = agent.get_new_notifs().get(cmd[1], [])
                if not got:
                    time.sleep(0.001)
            conn.send(got)
        elif cmd[0] == "exit":
            agent.close()
            conn.send("bye")
            return

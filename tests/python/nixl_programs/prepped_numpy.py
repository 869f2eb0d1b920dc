"""Prepared lists from numpy, as serving engines use NIXL: two agents exchange metadata
(get_agent_metadata / add_remote_agent) and serialized descriptors; each side is prepared
once (prep_xfer_dlist from N x 3 numpy arrays of (addr, len, dev)), then requests are made
from index arrays (make_prepped_xfer) many times, checked each time against a fresh pattern in
a poisoned destination. Descriptor lists survive pickling. At shutdown memory is deregistered
before the prepared lists are released, as engines do.

Written for NIXL 1.4's Python API; only the backend (NET) is chosen here.
"""
import pickle
import time

import numpy as np

from nixl._api import nixl_agent, nixl_agent_config
from nixl._bindings import nixlXferDList

BLOCKS, BLOCK = 256, 1024
TIMEOUT_S = 20


def rows(arr):
    """N x 3 uint64 (addr, len, dev) rows, one per block of arr."""
    out = np.empty((BLOCKS, 3), dtype=np.uint64)
    out[:, 0] = arr.ctypes.data + np.arange(BLOCKS, dtype=np.uint64) * BLOCK
    out[:, 1] = BLOCK
    out[:, 2] = 0
    return out


def wait(agent, handle):
    state = agent.transfer(handle)
    end = time.monotonic() + TIMEOUT_S
    while state != "DONE":
        assert state == "PROC", state
        if time.monotonic() > end:
            raise TimeoutError("transfer did not complete")
        state = agent.check_xfer_state(handle)


def main():
    rng = np.random.default_rng()
    cfg = nixl_agent_config(backends=["NET"])
    init = nixl_agent("prefill", cfg)
    tgt = nixl_agent("decode", nixl_agent_config(backends=["NET"]))
    kv = np.zeros(BLOCKS * BLOCK, dtype=np.uint8)
    cache = np.zeros(BLOCKS * BLOCK, dtype=np.uint8)
    init_reg = init.register_memory([kv])
    tgt_reg = tgt.register_memory([cache])

    # The target's side: its descriptors as bytes (serialized, and pickled as NIXL allows).
    tgt_descs = tgt.get_xfer_descs(rows(cache), "DRAM")
    assert isinstance(tgt_descs, nixlXferDList) and tgt_descs.descCount() == BLOCKS
    wire = pickle.dumps((tgt.get_agent_metadata(), tgt.get_serialized_descs(tgt_descs),
                         tgt_descs))
    metadata, serialized, pickled = pickle.loads(wire)
    assert init.add_remote_agent(metadata) == b"decode"
    remote = init.deserialize_descs(serialized)
    assert [remote[i] for i in range(BLOCKS)] == [pickled[i] for i in range(BLOCKS)]
    assert pickled[BLOCKS - 1] == tuple(int(x) for x in rows(cache)[-1])

    local_side = init.prep_xfer_dlist("NIXL_INIT_AGENT", rows(kv), "DRAM")
    remote_side = init.prep_xfer_dlist("decode", remote)
    kv2 = kv.reshape(BLOCKS, BLOCK)
    cache2 = cache.reshape(BLOCKS, BLOCK)
    for step in range(4):
        ids = rng.permutation(BLOCKS)[:64].astype(np.int32)
        dst_ids = rng.permutation(BLOCKS)[:64].astype(np.int32)
        kv[:] = rng.integers(0, 256, kv.shape, dtype=np.uint8)
        cache[:] = 0xA5
        if step % 2 == 0:  # WRITE kv[ids] -> cache[dst_ids]
            h = init.make_prepped_xfer("WRITE", local_side, ids, remote_side, dst_ids,
                                       b"step%d" % step)
            wait(init, h)
            assert np.array_equal(cache2[dst_ids], kv2[ids])
        else:  # READ cache[dst_ids] -> kv[ids] (a list of indices this time)
            cache[:] = rng.integers(0, 256, cache.shape, dtype=np.uint8)
            kv[:] = 0xA5
            h = init.make_prepped_xfer("READ", local_side, ids.tolist(), remote_side,
                                       dst_ids.tolist())
            wait(init, h)
            assert np.array_equal(kv2[ids], cache2[dst_ids])
        untouched = np.setdiff1d(np.arange(BLOCKS), dst_ids if step % 2 == 0 else [])
        if step % 2 == 0:
            assert (cache2[untouched] == 0xA5).all()
        init.release_xfer_handle(h)

    # Shutdown in an engine's order: memory first, then the prepared lists.
    init.deregister_memory(init_reg)
    tgt.deregister_memory(tgt_reg)
    init.release_dlist_handle(local_side)
    init.release_dlist_handle(remote_side)
    init.remove_remote_agent("decode")


if __name__ == "__main__":
    main()
    print("prepared lists from numpy: ok")

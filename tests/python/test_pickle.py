"""Pickling of descriptor lists (issue 17): a pickled list carries its descriptors' values,
never its C pointer, so pickle.loads gives an independent list, in this process (no second
owner of the same C list: no double free) and in another one (no wild pointer). Handles and
agents, which belong to a process, refuse to be pickled."""
import copy
import gc
import os
import pickle
import subprocess
import sys

import pytest

import ixl
from ixl.compat import nixl_agent, nixl_agent_config

np = pytest.importorskip("numpy")

ROWS = [(0x10000 + i * 4096, 512, i % 2) for i in range(5)]


def test_xfer_dlist_in_process():
    d = ixl.XferDList.deserialize(ixl.Agent.get_serialized_descs(None, ROWS))
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        e = pickle.loads(pickle.dumps(d, protocol=proto))
        assert e is not d and e.ptr != d.ptr and list(e) == list(d) == ROWS
        assert e.mem_type == d.mem_type == "DRAM"
    f = copy.copy(d)
    assert f.ptr != d.ptr and list(f) == ROWS
    runs = pickle.loads(pickle.dumps(ixl.Agent.get_xfer_descs(None, [(0x1000, 64, 128, 1000, 0)],
                                                              "FILE")))
    assert runs.run_count == 1 and len(runs) == 1000 and runs.mem_type == "FILE"
    del d, f
    gc.collect()
    assert list(e) == ROWS  # still its own list after the original is gone


def test_reg_dlist_in_process():
    a = ixl.Agent("pkl", ixl.AgentConfig(backends=[]))
    try:
        reg = a.get_reg_descs([(0x1000, 10, 3, "label"), (0, 0, None, b"rw:/x"),
                               (0x9000, 8, 0, "")], "FILE")
        back = pickle.loads(pickle.dumps(reg))
        assert list(back) == list(reg) and back.mem_type == "FILE"
        assert back.ptr != reg.ptr
        # The entries' bytes are the copy's own: the original's buffers may go.
        del reg
        gc.collect()
        assert back[0][3] == "label" and back[1][3] == "rw:/x" and back[1][2] == ixl.DEV_NONE
        big = a.get_reg_descs(np.array([r[:3] for r in ROWS] * 30, dtype=np.uint64), "DRAM")
        assert list(pickle.loads(pickle.dumps(big))) == list(big)
    finally:
        a.close()


def test_compat_lists_and_handles():
    a = nixl_agent("pkl_c", nixl_agent_config(backends=["NET"]))
    buf = np.zeros(4096, np.uint8)
    reg = a.register_memory([buf])
    x = a.get_xfer_descs([(buf.ctypes.data, 1024, 0)], "DRAM")
    assert list(pickle.loads(a.get_serialized_descs(x))) == list(x)
    assert list(a.deserialize_descs(a.get_serialized_descs(x))) == list(x)
    assert list(pickle.loads(pickle.dumps(reg)))[0][:3] == (buf.ctypes.data, 4096, 0)
    prep = a.prep_xfer_dlist("", x)
    h = a.initialize_xfer("WRITE", x, x, a.name)
    for obj in (a, prep, h, a.backends["NET"]):
        with pytest.raises(TypeError):
            pickle.dumps(obj)
        with pytest.raises(TypeError):
            copy.copy(obj)
    a.release_xfer_handle(h)
    a.release_dlist_handle(prep)
    a.deregister_memory(reg)


def test_across_processes():
    d = ixl.Agent.get_xfer_descs(None, ROWS, "VRAM")
    reg = ixl.Agent.get_reg_descs(None, [(0x2000, 16, 1, "meta-bytes")], "OBJ")
    code = ("import pickle, sys; d, r = pickle.load(sys.stdin.buffer); "
            "print(list(d), d.mem_type, list(r), r.mem_type)")
    proc = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((d, reg)),
                          capture_output=True, timeout=60, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert out.strip() == f"{ROWS} VRAM [(8192, 16, 1, 'meta-bytes')] OBJ"


def test_nixl_list_classes():
    """nixlXferDList / nixlRegDList are ixl's lists, with NIXL's constructors and list
    methods: a list made either way is the same class (isinstance holds through both)."""
    from ixl.compat import nixlRegDList, nixlXferDList
    x = nixlXferDList(0, [(0x1000, 64, 0), (0x2000, 64, 0)])
    assert isinstance(x, ixl.XferDList) and x.getType() == "DRAM" and x.descCount() == 2
    x.append((0x3000, 64, 0))
    x[0] = (0x1100, 32, 0)
    assert list(x) == [(0x1100, 32, 0), (0x2000, 64, 0), (0x3000, 64, 0)]
    assert x.index((0x2000, 64, 0)) == 1
    x.remDesc(1)
    assert list(x) == [(0x1100, 32, 0), (0x3000, 64, 0)]
    assert pickle.loads(pickle.dumps(x)) == x
    assert nixlXferDList("DRAM", np.array([[1, 2, 0]], dtype=np.uint64))[0] == (1, 2, 0)
    y = nixlXferDList("DRAM", x)  # a copy, not a second owner of x's C list
    assert y.ptr != x.ptr and y == x
    x.clear()
    assert x.isEmpty() and nixlXferDList(3).getType() == "FILE" and len(y) == 2
    r = nixlRegDList("FILE", [(0, 10, 5, "a"), (0, 20, 6, "b")])
    assert isinstance(r, ixl.RegDList) and r.descCount() == 2 and r[1] == (0, 20, 6, "b")
    r.append((0, 30, 7, "c"))
    r[0] = (1, 11, 5, "z")
    r.remDesc(1)
    assert list(r) == [(1, 11, 5, "z"), (0, 30, 7, "c")] and r.index((0, 30, 7)) == 1
    assert pickle.loads(pickle.dumps(r)) == r and list(r.trim()) == [(1, 11, 5), (0, 30, 7)]
    assert nixlRegDList(0).isEmpty()

"""VRAM from Python (issue 19): objects with __cuda_array_interface__ (CuPy arrays and the like)
and CUDA tensors describe themselves as VRAM with their GPU index, and register and move
through NET within one agent.

The device is the simulated one (tests/sim, a fake libcuda that ctest names in
IXL_CUDA_LIBRARY, with IXL_CUDASIM_DEVICES=2): its device memory is PROT_NONE to the CPU, so
the data checks go through libixl's own ixl_device_alloc / ixl_device_copy (ctypes), and a
fake array object stands for CuPy (neither CuPy nor torch is needed or imported). ~1 s.
"""
import ctypes
import os
import subprocess
import sys
import types

import pytest

import ixl

SIM = os.environ.get("IXL_CUDA_LIBRARY", "")
TIMEOUT_S = 30
LEN = 1 << 20


class FakeCudaArray:
    """What CuPy shows of an array: __cuda_array_interface__ (version 3) and device.id."""

    def __init__(self, ptr, nbytes, dev, typestr="<u4", strides=None, shape=None):
        item = int(typestr[2:])
        self.device = types.SimpleNamespace(id=dev)
        self.__cuda_array_interface__ = {
            "shape": shape if shape is not None else (nbytes // item,),
            "typestr": typestr, "data": (ptr, False), "version": 3, "strides": strides,
            "stream": None}


# -- description only (no device needed) -------------------------------------------------------


def test_cuda_array_interface_described():
    a = FakeCudaArray(0x7f0000000000, 4096, 1)
    assert ixl.buffer_info(a) == (0x7f0000000000, 4096, 1, "VRAM")
    # shape x item size; C strides given explicitly (version 2 may give them) are accepted
    b = FakeCudaArray(0x7f0000100000, 0, 0, typestr="<f2", shape=(8, 16), strides=(32, 2))
    assert ixl.buffer_info(b) == (0x7f0000100000, 256, 0, "VRAM")
    # a dimension of 1 may carry any stride
    c = FakeCudaArray(0x7f0000200000, 0, 0, typestr="<c16", shape=(4, 1), strides=(16, 999))
    assert ixl.buffer_info(c)[1] == 64
    # torch-style device.index, and no device at all (0: the core checks it at registration)
    d = FakeCudaArray(0x7f0000300000, 64, 0)
    d.device = types.SimpleNamespace(index=3)
    assert ixl.buffer_info(d)[2] == 3
    del d.device
    assert ixl.buffer_info(d)[2] == 0
    # a transposed view, and every other row: not one range
    for shape, strides in (((8, 16), (4, 32)), ((8, 16), (128, 4))):
        with pytest.raises(ValueError, match="contiguous"):
            ixl.buffer_info(FakeCudaArray(0x7f0000400000, 0, 0, shape=shape, strides=strides))
    agent = ixl.Agent("vram-desc", ixl.AgentConfig(backends=[]))
    try:
        x = agent.get_xfer_descs([a, FakeCudaArray(0x7f0000500000, 8192, 1)])
        assert x.mem_type == "VRAM" and list(x) == [(0x7f0000000000, 4096, 1),
                                                    (0x7f0000500000, 8192, 1)]
        r = agent.get_reg_descs([a])
        assert r.mem_type == "VRAM" and r[0][:3] == (0x7f0000000000, 4096, 1)
        with pytest.raises(ixl.Error):
            agent.get_xfer_descs([a, bytearray(16)])  # VRAM and DRAM in one list
    finally:
        agent.close()
    from ixl.compat import nixl_agent, nixl_agent_config
    nagent = nixl_agent("vram-desc-compat", nixl_agent_config(backends=[]))
    try:
        x = nagent.get_xfer_descs([a])
        assert x.getType() == "VRAM" and x[0] == (0x7f0000000000, 4096, 1)
    finally:
        nagent.close()


def test_no_torch_or_cupy_imported():
    code = ("import sys, types, ixl\n"
            "o = types.SimpleNamespace(__cuda_array_interface__={'shape': (4,), 'typestr': '|u1',"
            " 'data': (4096, False), 'version': 2, 'strides': None})\n"
            "assert ixl.buffer_info(o) == (4096, 4, 0, 'VRAM')\n"
            "assert ixl.buffer_info(bytearray(8))[3] == 'DRAM'\n"
            "bad = [m for m in ('torch', 'cupy', 'numba') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- on the simulated device ----------------------------------------------------------------


@pytest.fixture
def dev():
    """libixl's device functions (ctypes) on the simulated device: alloc(dev, n) -> ptr (freed
    after the test), put(ptr, bytes), get(ptr, n) -> bytes."""
    if not SIM or not os.path.exists(SIM):
        pytest.skip("the simulated device (tests/sim libixl_cudasim.so) is not built: "
                    "IXL_CUDA_LIBRARY does not name it")
    lib = ctypes.CDLL(ixl.library_path)
    lib.ixl_device_count.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ixl_device_count.restype = ctypes.c_int
    lib.ixl_device_alloc.argtypes = [ctypes.c_int, ctypes.c_size_t,
                                     ctypes.POINTER(ctypes.c_void_p)]
    lib.ixl_device_alloc.restype = ctypes.c_int
    lib.ixl_device_free.argtypes = [ctypes.c_void_p]
    lib.ixl_device_free.restype = ctypes.c_int
    lib.ixl_device_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.ixl_device_copy.restype = ctypes.c_int
    why = ctypes.create_string_buffer(256)
    count = lib.ixl_device_count(why, len(why))
    assert count >= 2, f"the simulated device shows {count} GPUs: {why.value!r}"
    made = []

    def alloc(ordinal, n):
        p = ctypes.c_void_p()
        assert lib.ixl_device_alloc(ordinal, n, ctypes.byref(p)) == 0
        made.append(p.value)
        return p.value

    def put(ptr, data):
        assert lib.ixl_device_copy(ptr, data, len(data)) == 0

    def get(ptr, n):
        out = ctypes.create_string_buffer(n)
        assert lib.ixl_device_copy(out, ptr, n) == 0
        return out.raw

    yield types.SimpleNamespace(alloc=alloc, put=put, get=get)
    for p in made:
        assert lib.ixl_device_free(p) == 0


def _wait(agent, h):
    agent.transfer(h)
    assert agent.wait(h, TIMEOUT_S) == "DONE"
    agent.release_xfer_handle(h)


def test_vram_round_trip_through_net(agents, dev):
    a = agents("pyvram", backends=["NET"])
    src_p, dst_p = dev.alloc(1, LEN), dev.alloc(1, LEN)
    src, dst = FakeCudaArray(src_p, LEN, 1), FakeCudaArray(dst_p, LEN, 1)
    host = bytearray(LEN)
    reg = a.register_memory([src, dst])
    assert reg.mem_type == "VRAM"
    assert [d[:3] for d in reg] == [(src_p, LEN, 1), (dst_p, LEN, 1)]
    hreg = a.register_memory([host])

    # VRAM -> VRAM: fresh pattern in the source, poisoned destination
    pattern = os.urandom(LEN)
    dev.put(src_p, pattern)
    dev.put(dst_p, b"\xee" * LEN)
    _wait(a, a.initialize_xfer("WRITE", a.get_xfer_descs([src]), a.get_xfer_descs([dst]),
                               "pyvram"))
    assert dev.get(dst_p, LEN) == pattern

    # VRAM -> DRAM (READ of the device into host memory), half the range
    host[:] = b"\xee" * LEN
    half = LEN // 2
    part = FakeCudaArray(dst_p + half, half, 1)
    _wait(a, a.initialize_xfer("READ", a.get_xfer_descs([memoryview(host)[:half]]),
                               a.get_xfer_descs([part]), "pyvram"))
    assert bytes(host[:half]) == pattern[half:] and host[half:] == b"\xee" * half

    # DRAM -> VRAM
    pattern2 = os.urandom(LEN)
    host[:] = pattern2
    dev.put(src_p, b"\xee" * LEN)
    _wait(a, a.initialize_xfer("WRITE", a.get_xfer_descs([host]), a.get_xfer_descs([src]),
                               "pyvram"))
    assert dev.get(src_p, LEN) == pattern2

    a.deregister_memory(reg)
    a.deregister_memory(hreg)


def test_vram_claims_checked_by_the_core(agents, dev):
    a = agents("pyvram-bad", backends=["NET"])
    p = dev.alloc(1, 4096)
    # host memory that claims to be a CUDA array
    host = bytearray(4096)
    liar = FakeCudaArray(ixl.buffer_info(host)[0], 4096, 0)
    with pytest.raises(ixl.Error) as e:
        a.register_memory([liar])
    print("host pointer claimed as VRAM:", e.value)
    assert "host" in str(e.value).lower()
    # device memory of GPU 1 that claims GPU 0
    with pytest.raises(ixl.Error) as e:
        a.register_memory([FakeCudaArray(p, 4096, 0)])
    print("wrong GPU:", e.value)
    assert "device 1" in str(e.value).lower()
    # past the allocation's end
    with pytest.raises(ixl.Error) as e:
        a.register_memory([FakeCudaArray(p, 8192, 1)])
    print("past the end:", e.value)
    assert "end" in str(e.value).lower()
    # and the truth registers
    a.deregister_memory(a.register_memory([FakeCudaArray(p, 4096, 1)]))

"""torch CPU tensors (Debian's python3-torch): registered as NIXL's seeds do
(register_memory([tensor])), described by get_xfer_descs, and moved between two agents."""
import pytest

import ixl

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

TIMEOUT_S = 30


def test_tensors_registered_and_transferred(agents):
    a = agents("ta", backends=["NET"])
    b = agents("tb", backends=["NET"])
    layers, blocks, block_elems = 4, 32, 1024
    src = torch.zeros(layers, blocks, block_elems, dtype=torch.float16)
    dst = torch.zeros(layers, blocks, block_elems, dtype=torch.float16)
    reg = a.register_memory([src])
    assert reg.mem_type == "DRAM"
    assert reg[0][:3] == (src.data_ptr(), src.numel() * src.element_size(), 0)
    b.register_memory(b.get_reg_descs([dst]))
    a.add_remote_agent(b.get_agent_metadata())

    # One descriptor per (layer, block), as a KV cache is moved; from numpy, no rows in Python.
    blk = block_elems * src.element_size()
    ids = np.arange(layers * blocks, dtype=np.uint64)

    def descs(t):
        d = np.empty((layers * blocks, 3), dtype=np.uint64)
        d[:, 0] = t.data_ptr() + ids * blk
        d[:, 1] = blk
        d[:, 2] = 0
        return d

    local = a.prep_xfer_dlist("", descs(src))
    remote = a.prep_xfer_dlist("tb", descs(dst))
    src.copy_(torch.randn(layers, blocks, block_elems).to(torch.float16))
    dst.fill_(-7.0)
    sel = np.random.default_rng().permutation(layers * blocks)[: layers * blocks // 2]
    h = a.make_prepped_xfer("WRITE", local, sel, remote, sel, b"kv")
    a.transfer(h)
    assert a.wait(h, TIMEOUT_S) == "DONE"
    flat_src = src.view(layers * blocks, block_elems)
    flat_dst = dst.view(layers * blocks, block_elems)
    mask = torch.zeros(layers * blocks, dtype=torch.bool)
    mask[torch.from_numpy(sel.astype(np.int64))] = True
    assert torch.equal(flat_dst[mask], flat_src[mask])
    assert bool((flat_dst[~mask] == -7.0).all())
    a.release_xfer_handle(h)

    # Whole tensors and a contiguous slice as buffers, READ back.
    src.fill_(0)
    dst.copy_(torch.randn(layers, blocks, block_elems).to(torch.float16))
    h = a.initialize_xfer("READ", a.get_xfer_descs([src[1]]), b.get_xfer_descs([dst[1]]), "tb")
    a.transfer(h)
    assert a.wait(h, TIMEOUT_S) == "DONE"
    assert torch.equal(src[1], dst[1]) and bool((src[0] == 0).all())
    a.release_xfer_handle(h)
    a.release_dlist_handle(local)
    a.release_dlist_handle(remote)
    a.deregister_memory(reg)


def test_tensor_dtypes_and_views(agents):
    a = agents("tl", backends=["NET"])
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.uint8):
        s = torch.arange(4096).to(dtype)
        d = torch.zeros(4096, dtype=dtype)
        a.register_memory([s, d])
        h = a.initialize_xfer("WRITE", [s], [d], "tl")
        a.transfer(h)
        assert a.wait(h, TIMEOUT_S) == "DONE"
        assert torch.equal(s, d)
        a.release_xfer_handle(h)
        a.deregister_memory([s, d])
    with pytest.raises(ValueError):
        a.get_xfer_descs([torch.zeros(8, 8).t()])  # not contiguous
    assert ixl.buffer_info(torch.zeros(3, dtype=torch.float64))[1] == 24

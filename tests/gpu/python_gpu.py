"""Real GPU from Python (tests/gpu/README.md; run by tests/gpu/run.sh, not by ctest).

PyTorch CUDA tensors through the `nixl` compatibility package (NIXL's own import line,
`from nixl._api import nixl_agent, nixl_agent_config`; ixl.compat when the package is not
there), NET within one agent: whole tensors VRAM -> VRAM, KV-style blocks by prepared lists and
index arrays, VRAM -> CPU tensor and back, a notification, and a non-contiguous view refused;
then a CuPy array through __cuda_array_interface__ when CuPy is installed. Each transfer has a
fresh pattern in its source and a poisoned destination. Markdown on stdout, details on
stderr. Exit 0 pass, 1 fail, 77 skip (no PyTorch, or no CUDA device for it). ~10 s (most of it
importing torch and creating its context).
"""
import sys
import time

TIMEOUT_S = 30
rows = []


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def skip(why):
    log(f"SKIP: {why}")
    sys.exit(77)


try:
    import torch
except ImportError as e:
    skip(f"PyTorch is not installed for {sys.executable} ({e})")
if not torch.cuda.is_available():
    skip(f"PyTorch {torch.__version__} sees no CUDA device")

try:
    from nixl._api import nixl_agent, nixl_agent_config
    via = "the nixl package (nixl._api)"
except ImportError as e:
    log(f"no nixl package ({e}): using ixl.compat")
    from ixl.compat import nixl_agent, nixl_agent_config
    via = "ixl.compat (no nixl package on the path)"
import ixl  # noqa: E402 (after the choice above: the nixl package loads ixl itself)

name = "gpu-py"
agent = nixl_agent(name, nixl_agent_config(backends=["NET"]))
dev = torch.device("cuda", 0)
log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, via {via}, "
    f"libixl {ixl.library_path}")


def done(handle):
    state = agent.transfer(handle)
    t0 = time.monotonic()
    while state != "DONE":
        assert state == "PROC", f"transfer state {state}"
        assert time.monotonic() - t0 < TIMEOUT_S, "transfer did not finish in 30 s"
        state = agent.check_xfer_state(handle)
    agent.release_xfer_handle(handle)


def fresh(t):
    """A new pattern in t's bytes, finished before ixl reads them."""
    u = t.view(torch.uint8)
    u.copy_(torch.randint(0, 256, u.shape, dtype=torch.uint8, device=u.device))
    torch.cuda.synchronize()


def poison(t):
    t.view(torch.uint8).fill_(0xEE)
    torch.cuda.synchronize()


def same(a, b):
    return torch.equal(a.view(torch.uint8).cpu(), b.view(torch.uint8).cpu())


# --- whole tensors, VRAM -> VRAM, with a notification -----------------------------------------
layers, blocks, block_elems = 4, 64, 8192  # float16 blocks of 16 KiB: 4 x 64 x 16 KiB = 4 MiB
src = torch.empty(layers, blocks, block_elems, dtype=torch.float16, device=dev)
dst = torch.empty_like(src)
host = torch.empty(layers, blocks, block_elems, dtype=torch.float16).pin_memory()
reg = agent.register_memory([src, dst])
assert reg is not None, "register_memory of CUDA tensors returned None"
info = ixl.buffer_info(src)
assert info == (src.data_ptr(), src.numel() * 2, 0, "VRAM"), info
hreg = agent.register_memory([host])

fresh(src)
poison(dst)
done(agent.initialize_xfer("WRITE", agent.get_xfer_descs([src]), agent.get_xfer_descs([dst]),
                           name, b"kv-ready"))
assert same(src, dst), "VRAM -> VRAM data differ"
notifs = {}
t0 = time.monotonic()
while b"kv-ready" not in notifs.get(name, []) and time.monotonic() - t0 < 5:
    for k, v in agent.get_new_notifs().items():
        notifs.setdefault(k if isinstance(k, str) else k.decode(), []).extend(v)
    time.sleep(0.001)
assert b"kv-ready" in notifs.get(name, []), f"notification not received: {notifs}"
rows.append("| torch CUDA tensors, 4 MiB, WRITE VRAM -> VRAM with a notification | data checked, "
            "notification after the data |")

# --- KV blocks: prepared lists, a random half of the blocks, READ ---------------------------------
import numpy as np  # noqa: E402 (PyTorch needs it anyway)

blk = block_elems * 2
ids = np.arange(layers * blocks, dtype=np.uint64)


def block_descs(t):
    d = np.empty((layers * blocks, 3), dtype=np.uint64)
    d[:, 0] = t.data_ptr() + ids * blk
    d[:, 1] = blk
    d[:, 2] = 0
    return d


local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", block_descs(dst), "VRAM")
remote = agent.prep_xfer_dlist(name, block_descs(src), "VRAM")
fresh(src)
poison(dst)
sel = np.random.default_rng().permutation(layers * blocks)[: layers * blocks // 2]
done(agent.make_prepped_xfer("READ", local, sel, remote, sel))
flat_s = src.view(torch.uint8).view(layers * blocks, blk)
flat_d = dst.view(torch.uint8).view(layers * blocks, blk)
mask = torch.zeros(layers * blocks, dtype=torch.bool, device=dev)
mask[torch.from_numpy(sel.astype(np.int64)).to(dev)] = True
assert torch.equal(flat_d[mask], flat_s[mask]), "selected blocks differ"
assert bool((flat_d[~mask] == 0xEE).all()), "blocks not selected were written"
agent.release_dlist_handle(local)
agent.release_dlist_handle(remote)
rows.append("| KV blocks: prepared VRAM lists, 128 random blocks of 16 KiB, READ | data checked, "
            "other blocks untouched |")

# --- VRAM -> CPU tensor and back --------------------------------------------------------------
fresh(src)
host.view(torch.uint8).fill_(0xEE)
done(agent.initialize_xfer("WRITE", agent.get_xfer_descs([src]), agent.get_xfer_descs([host]),
                           name))
assert same(host, src), "VRAM -> DRAM"
fresh(host)
poison(dst)
done(agent.initialize_xfer("READ", agent.get_xfer_descs([dst]), agent.get_xfer_descs([host]),
                           name))
assert same(dst, host), "DRAM -> VRAM"
rows.append("| torch: VRAM -> pinned CPU tensor (WRITE), CPU tensor -> VRAM (READ) | data "
            "checked |")

# --- a non-contiguous view: refused (NIXL's convention through nixl: None) -------------------------
try:
    r = agent.get_xfer_descs([src[:, :, :16].transpose(0, 1)])
    assert r is None, f"a non-contiguous view was described: {r!r}"
except ValueError:
    pass
rows.append("| torch: a non-contiguous CUDA view | refused |")

agent.deregister_memory(reg)
agent.deregister_memory(hreg)

# --- CuPy through __cuda_array_interface__ ------------------------------------------------------
try:
    import cupy
except ImportError as e:
    log(f"CuPy not installed ({e}): CuPy part not run")
    rows.append("| CuPy array through __cuda_array_interface__ | not run: no CuPy |")
    cupy = None
if cupy is not None:
    with cupy.cuda.Device(0):
        csrc = cupy.random.randint(0, 255, size=(1 << 20,), dtype=cupy.uint8)
        cdst = cupy.full((1 << 20,), 0xEE, dtype=cupy.uint8)
        cupy.cuda.runtime.deviceSynchronize()
        assert ixl.buffer_info(csrc) == (csrc.data.ptr, 1 << 20, 0, "VRAM")
        creg = agent.register_memory([csrc, cdst])
        tdst = torch.full((1 << 20,), 0xEE, dtype=torch.uint8, device=dev)
        treg = agent.register_memory([tdst])
        torch.cuda.synchronize()
        done(agent.initialize_xfer("WRITE", agent.get_xfer_descs([csrc]),
                                   agent.get_xfer_descs([cdst]), name))
        assert bool((csrc == cdst).all()), "CuPy VRAM -> VRAM"
        done(agent.initialize_xfer("WRITE", agent.get_xfer_descs([cdst]),
                                   agent.get_xfer_descs([tdst]), name))
        assert bytes(cupy.asnumpy(csrc)) == bytes(tdst.cpu().numpy()), "CuPy -> torch"
        agent.deregister_memory(creg)
        agent.deregister_memory(treg)
    rows.append(f"| CuPy {cupy.__version__} array (__cuda_array_interface__), 1 MiB, VRAM -> "
                "VRAM, then into a torch tensor | data checked |")

print(f"Python (python_gpu.py): torch {torch.__version__} on {torch.cuda.get_device_name(0)}, "
      f"through {via}:\n")
print("| case | result |\n|---|---|")
print("\n".join(rows))
log("PASS")

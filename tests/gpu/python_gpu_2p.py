"""PyTorch CUDA tensors between two processes through the `nixl` package (issue 20; run by
tests/gpu/run.sh, not by ctest).

Two agents in two processes on one GPU, NIXL's own calls only (nixl_agent, get_agent_metadata,
add_remote_agent, get_serialized_descs / deserialize_descs, initialize_xfer, make_prepped_xfer,
get_new_notifs): the target registers CUDA tensors and sends its metadata and descriptors over a
pipe; the initiator WRITEs a 64 MiB tensor into the target's with a notification (the target
checks the digest after the notification came), READs a fresh pattern back, and moves KV-style
blocks by prepared lists with random indices both ways (blocks not chosen stay poisoned). Each
request must report the path cuda-ipc (ixl's get_xfer_info). Then a short timing of 64 MiB
WRITEs waited from Python (informational). Markdown on stdout, details on stderr. Exit 0 pass,
1 fail, 77 skip (no PyTorch, or no CUDA device).
"""
import hashlib
import multiprocessing as mp
import sys
import time

TIMEOUT_S = 30
SIZE = 64 << 20
BLOCKS, BLK = 256, 64 << 10  # KV blocks: 256 x 64 KiB = 16 MiB


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def imports():
    import torch
    try:
        from nixl._api import nixl_agent, nixl_agent_config
        via = "the nixl package (nixl._api)"
    except ImportError:
        from ixl.compat import nixl_agent, nixl_agent_config
        via = "ixl.compat (no nixl package on the path)"
    return torch, nixl_agent, nixl_agent_config, via


def digest(t):
    import torch
    torch.cuda.synchronize()
    return hashlib.sha256(bytes(t.view(torch.uint8).cpu().numpy())).hexdigest()


def target(conn):
    """The target process: answers the initiator's commands over conn."""
    torch, nixl_agent, nixl_agent_config, _ = imports()
    dev = torch.device("cuda", 0)
    agent = nixl_agent("gpu-target", nixl_agent_config(backends=["NET"]))
    big = torch.empty(SIZE, dtype=torch.uint8, device=dev)
    kv = torch.empty(BLOCKS * BLK, dtype=torch.uint8, device=dev)
    reg = agent.register_memory([big, kv])
    conn.send((agent.get_agent_metadata(), agent.get_serialized_descs(agent.get_xfer_descs([big])),
               kv.data_ptr()))
    notifs = []
    while True:
        cmd = conn.recv()
        if cmd[0] == "poison":
            big.fill_(0xEE)
            kv.fill_(0xEE)
            torch.cuda.synchronize()
            conn.send("ok")
        elif cmd[0] == "fill":
            big.copy_(torch.randint(0, 256, big.shape, dtype=torch.uint8, device=dev))
            kv.copy_(torch.randint(0, 256, kv.shape, dtype=torch.uint8, device=dev))
            conn.send((digest(big), bytes(kv.cpu().numpy())))
        elif cmd[0] == "notif":  # wait for one message, then the digests of what landed
            t0 = time.monotonic()
            while cmd[1] not in notifs and time.monotonic() - t0 < TIMEOUT_S:
                for _, msgs in agent.get_new_notifs().items():
                    notifs.extend(msgs)
                time.sleep(0.0005)
            got = cmd[1] in notifs
            conn.send((got, digest(big), bytes(kv.cpu().numpy())))
        elif cmd[0] == "exit":
            agent.deregister_memory(reg)
            conn.send("bye")
            return


def main():
    try:
        import torch
    except ImportError as e:
        log(f"SKIP: PyTorch is not installed for {sys.executable} ({e})")
        return 77
    if not torch.cuda.is_available():
        log(f"SKIP: PyTorch {torch.__version__} sees no CUDA device")
        return 77
    torch, nixl_agent, nixl_agent_config, via = imports()
    import numpy as np

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=target, args=(there,))
    proc.start()
    rows = []
    try:
        assert here.poll(120), "the target process did not start"
        meta, serialized, rkv = here.recv()

        def ask(*cmd):
            here.send(cmd)
            assert here.poll(TIMEOUT_S + 30), f"no answer to {cmd[0]}"
            return here.recv()

        dev = torch.device("cuda", 0)
        agent = nixl_agent("gpu-initiator", nixl_agent_config(backends=["NET"]))
        name = agent.add_remote_agent(meta)  # bytes, as NIXL returns it
        assert name in (b"gpu-target", "gpu-target"), name
        rbig = agent.deserialize_descs(serialized)  # the target's 64 MiB tensor
        src = torch.empty(SIZE, dtype=torch.uint8, device=dev)
        kv = torch.empty(BLOCKS * BLK, dtype=torch.uint8, device=dev)
        reg = agent.register_memory([src, kv])
        paths = set()

        def run(h):
            state = agent.transfer(h)
            t0 = time.monotonic()
            while state != "DONE":
                assert state == "PROC", f"transfer state {state}"
                assert time.monotonic() - t0 < TIMEOUT_S, "transfer did not finish in 30 s"
                state = agent.check_xfer_state(h)
            paths.add(agent.get_xfer_info(h)["path"])
            agent.release_xfer_handle(h)

        # 64 MiB WRITE with a notification: the data is there when the notification is.
        src.copy_(torch.randint(0, 256, src.shape, dtype=torch.uint8, device=dev))
        torch.cuda.synchronize()
        want = digest(src)
        assert ask("poison") == "ok"
        run(agent.initialize_xfer("WRITE", agent.get_xfer_descs([src]),
                                  rbig, "gpu-target", b"big-written"))
        got, dbig, _ = ask("notif", b"big-written")
        assert got, "the notification of the WRITE did not arrive"
        assert dbig == want, "64 MiB WRITE: the target's tensor differs"
        rows.append("| 64 MiB CUDA tensor WRITE into the other process's tensor, with a "
                    "notification | data checked at the target after the notification |")

        # READ a fresh pattern back into a poisoned tensor.
        tbig, tkv = ask("fill")
        src.fill_(0xEE)
        torch.cuda.synchronize()
        run(agent.initialize_xfer("READ", agent.get_xfer_descs([src]),
                                  rbig, "gpu-target"))
        assert digest(src) == tbig, "64 MiB READ: data differ"
        rows.append("| 64 MiB READ of a fresh pattern from the other process | data checked |")

        # KV blocks by prepared lists and random indices, READ then WRITE.
        def blocks(base):
            d = np.empty((BLOCKS, 3), dtype=np.uint64)
            d[:, 0] = base + np.arange(BLOCKS, dtype=np.uint64) * BLK
            d[:, 1] = BLK
            d[:, 2] = 0
            return d

        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", blocks(kv.data_ptr()), "VRAM")
        rprep = agent.prep_xfer_dlist("gpu-target", blocks(rkv), "VRAM")
        rng = np.random.default_rng()
        kv.fill_(0xEE)
        torch.cuda.synchronize()
        sel = rng.permutation(BLOCKS)[: BLOCKS // 2]
        dst_idx = rng.permutation(BLOCKS)[: BLOCKS // 2]
        run(agent.make_prepped_xfer("READ", local, dst_idx, rprep, sel))
        mine = kv.view(BLOCKS, BLK).cpu().numpy()
        theirs = np.frombuffer(tkv, dtype=np.uint8).reshape(BLOCKS, BLK)
        assert np.array_equal(mine[dst_idx], theirs[sel]), "KV READ: chosen blocks differ"
        rest = np.setdiff1d(np.arange(BLOCKS), dst_idx)
        assert (mine[rest] == 0xEE).all(), "KV READ: blocks not chosen were written"
        kv.copy_(torch.randint(0, 256, kv.shape, dtype=torch.uint8, device=dev))
        assert ask("poison") == "ok"
        run(agent.make_prepped_xfer("WRITE", local, sel, rprep, dst_idx, b"kv-written"))
        got, _, tkv2 = ask("notif", b"kv-written")
        assert got, "the notification of the KV WRITE did not arrive"
        theirs = np.frombuffer(tkv2, dtype=np.uint8).reshape(BLOCKS, BLK)
        mine = kv.view(BLOCKS, BLK).cpu().numpy()
        assert np.array_equal(theirs[dst_idx], mine[sel]), "KV WRITE: chosen blocks differ"
        rest = np.setdiff1d(np.arange(BLOCKS), dst_idx)
        assert (theirs[rest] == 0xEE).all(), "KV WRITE: blocks not chosen were written"
        rows.append(f"| KV blocks: prepared VRAM lists across processes, {BLOCKS // 2} random "
                    f"blocks of {BLK >> 10} KiB, READ then WRITE with a notification | data "
                    "checked, other blocks untouched |")
        assert paths == {"cuda-ipc"}, f"paths reported: {paths} (want cuda-ipc only)"

        # Timing from Python (informational): 64 MiB WRITEs, each waited for.
        h = agent.initialize_xfer("WRITE", agent.get_xfer_descs([src]),
                                  rbig, "gpu-target")
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            state = agent.transfer(h)
            while state != "DONE":
                state = agent.check_xfer_state(h)
            times.append(time.perf_counter() - t0)
        agent.release_xfer_handle(h)
        med = sorted(times)[len(times) // 2]
        rows.append(f"| 64 MiB WRITE posted and polled from Python, 20 times | median "
                    f"{med * 1e6:.0f} us, {SIZE / med / 1e9:.0f} GB/s |")
        agent.release_dlist_handle(local)
        agent.release_dlist_handle(rprep)
        agent.deregister_memory(reg)
        assert ask("exit") == "bye"
        proc.join(TIMEOUT_S)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()

    print(f"Python, two processes (python_gpu_2p.py): torch {torch.__version__} on "
          f"{torch.cuda.get_device_name(0)}, through {via}, path cuda-ipc:\n")
    print("| case | result |\n|---|---|")
    print("\n".join(rows))
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

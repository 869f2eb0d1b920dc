"""Garbage-collection safety of the binding (issue 17).

Cyclic garbage holding an agent and its unreleased handles used to end in a double free, a
SIGSEGV or a hang: Python clears weak references before it runs the finalizers of a cycle, in
any order, so the agent's close() destroyed handles whose __del__ then released them again.
Lifetimes now go one way (a handle keeps its agent alive; a finalizer never touches a destroyed
agent). Each scenario runs in a child interpreter, so that a crash or a hang is a failure of
this test and not of pytest; the stress runs again under `python3 -X dev`, and in the ASan
build with libixl built with ASan+UBSan and the sanitizer runtimes preloaded (test_gc_asan.py).
"""
import os
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")

TIMEOUT_S = 60

# The issue's snippet, as a user of NIXL's examples would write it.
SNIPPET = """
import gc
import numpy as np
from ixl.compat import nixl_agent, nixl_agent_config

def f():
    a = nixl_agent("a", nixl_agent_config(backends=["NET"])); b = np.zeros(256, np.uint8)
    a.register_memory([b])
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([b[:128]]), a.get_xfer_descs([b[128:]]), "a")
    c = [a, h]; c.append(c)

for _ in range(20):
    f(); gc.collect()
print("snippet: ok")
"""

# Cycles of agents, requests (unposted, posted, in flight), prepared lists, transfer and
# registration lists, each collected by gc.collect(); agents are made in turn with the
# cycles, so the agent's finalizer and its handles' meet in every order.
STRESS = """
import gc, random, sys, time
import numpy as np
import ixl
from ixl.compat import nixl_agent, nixl_agent_config

rounds = int(sys.argv[1])
rng = random.Random(17)
buf = np.zeros(1 << 16, np.uint8)
t0 = time.monotonic()
cycles = collects = 0
for r in range(rounds):
    if r % 2:
        a = nixl_agent(f"gc{r}", nixl_agent_config(backends=["NET"]))
    else:
        a = ixl.Agent(f"gc{r}", ixl.AgentConfig(backends=["NET"]))
    a.register_memory([buf])
    junk = [a]
    for i in range(40):
        k = rng.randrange(6)
        src = a.get_xfer_descs([buf[:256]])
        dst = a.get_xfer_descs([(buf.ctypes.data + 4096, 256, 0)], "DRAM")
        if k == 0:
            h = a.initialize_xfer("WRITE", src, dst, a.name)
            node = [h, src, dst]
        elif k == 1:
            h = a.initialize_xfer("READ", src, dst, a.name)
            a.transfer(h)  # posted, maybe still in flight
            node = [h]
        elif k == 2:
            lp = a.prep_xfer_dlist("", src)
            rp = a.prep_xfer_dlist(a.name, dst)
            h = a.make_prepped_xfer("WRITE", lp, [0], rp, [0])
            node = [lp, rp, h]
        elif k == 3:
            node = [a.prep_xfer_dlist("", src), a.get_reg_descs([buf[:64]])]
        elif k == 4:
            lp = a.prep_xfer_dlist("", src)
            lp.release()  # released early: the finalizer must not release it again
            node = [lp, src]
        else:
            h = a.initialize_xfer("WRITE", src, dst, a.name)
            a.release_xfer_handle(h)
            node = [h, a]
        node.append(a)
        node.append(node)  # a cycle holding the agent
        cycles += 1
        if rng.random() < 0.5:
            junk.append(node)  # garbage with the agent, at the end of the round
        else:
            del node
            h = lp = rp = src = dst = None
            gc.collect(0)  # garbage alone: the handles' finalizers, the agent alive
            collects += 1
    junk.append(junk)
    del a, junk
    node = h = lp = rp = src = dst = None
    gc.collect()
    collects += 1
print(f"stress: {cycles} cycles in {rounds} rounds, {collects} collections, "
      f"{time.monotonic() - t0:.2f} s")
"""

# Threads make and drop cycles of one agent's handles while collections (any thread's) run
# their finalizers; then the agent goes in a cycle with handles still alive.
THREADS = """
import gc, random, threading
import numpy as np
from ixl.compat import nixl_agent, nixl_agent_config

a = nixl_agent("gct", nixl_agent_config(backends=["NET"]))
buf = np.zeros(1 << 14, np.uint8)
a.register_memory([buf])
errors = []

def work(seed):
    rng = random.Random(seed)
    try:
        for i in range(150):
            src = a.get_xfer_descs([buf[:128]])
            dst = a.get_xfer_descs([(buf.ctypes.data + 8192 + 128 * (seed % 8), 128, 0)],
                                   "DRAM")
            h = a.initialize_xfer("WRITE", src, dst, "gct")
            if rng.random() < 0.5:
                a.transfer(h)
            p = a.prep_xfer_dlist("", src)
            node = [h, p, src, a]
            node.append(node)
            del node, h, p, src, dst
            if rng.random() < 0.2:
                gc.collect(rng.randrange(3))
    except Exception as e:
        errors.append(e)

ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert not errors, errors
keep = [a, a.initialize_xfer("READ", [buf[:64]], [buf[64:128]], "gct")]
keep.append(keep)
del a, keep
gc.collect()
print("threads: ok")
"""


def _env(extra=None):
    env = dict(os.environ)
    env.update(extra or {})
    return env


def _run(code, *args, python_args=(), env=None):
    proc = subprocess.run([sys.executable, *python_args, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env=_env(env))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{out[-4000:]}"
    for bad in ("double free", "Segmentation", "AddressSanitizer", "runtime error:"):
        assert bad not in out, out[-4000:]
    return out


def test_issue_snippet():
    assert "snippet: ok" in _run(SNIPPET)


def test_gc_stress():
    out = _run(STRESS, "60")
    assert "stress: 2400 cycles" in out


def test_gc_threads():
    assert "threads: ok" in _run(THREADS)


def test_gc_stress_dev_mode():
    """-X dev: Python's debug hooks on its allocators, and warnings (ResourceWarning
    included) shown; none may come from the binding."""
    out = _run(STRESS, "10", python_args=("-X", "dev", "-W", "error::ResourceWarning"))
    assert "stress: 400 cycles" in out
    assert "Exception ignored" not in out, out

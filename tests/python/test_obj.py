"""The OBJ backend from Python (issue 22), against s3rver started here: NIXL's calls
(create_backend("OBJ", params), register_memory of OBJ descriptors (addr, len, dev, key),
query_memory with NIXL's result shape: {"size": "N"} or None) and ixl's own Agent API."""
import os
import sys

import pytest

import ixl
from ixl.compat import nixl_agent, nixl_agent_config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "s3"))
from s3_server import S3Server  # noqa: E402

np = pytest.importorskip("numpy")

BUCKET = "ixl-py"


@pytest.fixture(scope="module")
def s3():
    with S3Server(BUCKET) as s:
        yield s


def params(s3):
    return {"endpoint_override": s3.endpoint, "bucket": BUCKET, "access_key": "S3RVER",
            "secret_key": "S3RVER", "region": "us-east-1"}


def wait(a, h):
    for _ in range(20000):
        st = a.check_xfer_state(h)
        if st == "DONE":
            return
        assert st == "PROC", st
        import time
        time.sleep(0.001)
    raise AssertionError("transfer did not finish")


def test_nixl_register_query_round_trip(s3):
    a = nixl_agent("objpy", nixl_agent_config(backends=[]))
    try:
        a.create_backend("OBJ", params(s3))
        n = 3
        src = [np.random.default_rng(i).integers(0, 256, 1000 + i, dtype=np.uint8)
               for i in range(n)]
        dst = [np.zeros_like(x) for x in src]
        a.register_memory(src + dst)
        keys = [f"py/obj{i}" for i in range(n)]
        objs = [(0, 0, 10 + i, keys[i]) for i in range(n)]
        reg = a.register_memory(objs, "OBJ")
        assert a.query_memory(objs, "OBJ", "OBJ") == [None] * n
        remote = a.get_xfer_descs([(0, src[i].nbytes, 10 + i) for i in range(n)], "OBJ")
        h = a.initialize_xfer("WRITE", a.get_xfer_descs(src), remote, "objpy")
        assert a.transfer(h) in ("DONE", "PROC")
        wait(a, h)
        a.release_xfer_handle(h)
        assert a.query_memory(objs + [(0, 0, 99, "py/none")], "OBJ", "OBJ") == \
            [{"size": str(x.nbytes)} for x in src] + [None]
        h = a.initialize_xfer("READ", a.get_xfer_descs(dst), remote, "objpy")
        assert a.transfer(h) in ("DONE", "PROC")
        wait(a, h)
        a.release_xfer_handle(h)
        for x, y in zip(src, dst):
            assert np.array_equal(x, y)
        a.deregister_memory(reg)
    finally:
        a.close()


def test_ixl_agent_query_and_errors(s3, agents):
    a = agents("objix", backends=[])
    a.create_backend("OBJ", params(s3))
    buf = np.zeros(4096, dtype=np.uint8)
    a.register_memory([buf])
    a.register_memory([(0, 0, 1, "py/missing"), (0, 0, 2, "s3://no-such-bucket/k")], "OBJ")
    assert a.query_memory([(0, 0, 1, "py/missing")], mem_type="OBJ") == [None]
    h = a.initialize_xfer("READ", [buf], a.get_xfer_descs([(0, 4096, 1)], "OBJ"), "objix")
    a.transfer(h)
    with pytest.raises(ixl.NotFoundError) as e:
        for _ in range(20000):
            if a.check_xfer_state(h) != "PROC":
                break
            import time
            time.sleep(0.001)
    assert "no object 'py/missing'" in str(e.value)
    a.release_xfer_handle(h)
    # A WRITE at an offset is refused when the request is made, saying why.
    with pytest.raises(ixl.NotSupportedError) as e:
        a.initialize_xfer("WRITE", [buf], a.get_xfer_descs([(4096, 4096, 1)], "OBJ"), "objix")
    assert "S3 cannot change part of an object" in str(e.value)

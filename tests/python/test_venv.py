"""The package installs offline into a virtual environment that sees Debian's packages
(python3 -m venv --system-site-packages; pip install --no-build-isolation --no-index) and then
finds libixl.so through IXL_LIBRARY, IXL_BUILD_DIR, or an installed prefix."""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(REPO, "bindings", "python")
TIMEOUT_S = 100

PROBE = """
import sys, numpy as np, ixl
from ixl.compat import nixl_agent, nixl_agent_config
a = nixl_agent("venv", nixl_agent_config(backends=["NET"]))
src = np.random.default_rng().integers(0, 256, 4096, dtype=np.uint8)
dst = np.full(4096, 0xA5, dtype=np.uint8)
a.register_memory([src, dst])
h = a.initialize_xfer("WRITE", a.get_xfer_descs([src]), a.get_xfer_descs([dst]), "venv")
state = a.transfer(h)
while state != "DONE":
    state = a.check_xfer_state(h)
assert np.array_equal(src, dst)
mapped = next(line.split()[-1] for line in open("/proc/self/maps") if "/libixl.so" in line)
print(ixl.__file__, mapped)
"""


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT_S)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout}"
    return p.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    if subprocess.run([sys.executable, "-c", "import ensurepip, venv"]).returncode != 0:
        pytest.skip("python3-venv is not installed (scripts/deps.sh test installs it)")
    tmp = tmp_path_factory.mktemp("venv")
    src = tmp / "src"
    # A copy, so that the build leaves nothing in the source tree.
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                           "__pycache__"))
    shutil.copyfile(os.path.join(REPO, "VERSION"), src / "VERSION")  # setup.py's version
    env_dir = tmp / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)])
    py = str(env_dir / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(src)])
    return py, tmp


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "IXL_LIBRARY", "IXL_BUILD_DIR")}
    env.update(extra)
    return env


def build_dir():
    build = os.environ.get("IXL_BUILD_DIR")
    if not build or not os.path.exists(os.path.join(build, "lib", "libixl.so")):
        pytest.skip("IXL_BUILD_DIR does not name a build tree (ctest sets it)")
    return build


def test_installed_package_with_ixl_library(venv):
    py, tmp = venv
    lib = os.path.join(build_dir(), "lib", "libixl.so")
    out = run([py, "-c", PROBE], env=clean_env(IXL_LIBRARY=lib), cwd=str(tmp))
    where, mapped = out.split()
    assert "site-packages" in where and mapped == os.path.realpath(lib)


def test_installed_package_with_build_dir(venv):
    py, tmp = venv
    build = build_dir()
    out = run([py, "-c", PROBE], env=clean_env(IXL_BUILD_DIR=build), cwd=str(tmp))
    assert out.split()[1] == os.path.realpath(os.path.join(build, "lib", "libixl.so"))


def test_installed_package_with_installed_prefix(venv):
    py, tmp = venv
    build = build_dir()
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    prefix = tmp / "prefix"
    run(["cmake", "--install", build, "--prefix", str(prefix)])
    libdir = next(str(p.parent) for p in prefix.rglob("libixl.so.0"))
    out = run([py, "-c", PROBE], env=clean_env(LD_LIBRARY_PATH=libdir), cwd=str(tmp))
    assert out.split()[1].startswith(str(prefix))

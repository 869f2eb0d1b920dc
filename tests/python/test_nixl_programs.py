"""NIXL programs (nixl_programs/: two processes with listeners and partial metadata, storage
round trip with query_memory, prepared lists from numpy, notifications, telemetry, the
names of nixl._bindings, nixl._utils and nixl.logging) run with
`import nixl` from a virtual environment in which only ixl's binding and its NIXL
compatibility package (bindings/python-nixl) are installed, by pip, offline.

The environment is isolated (no --system-site-packages): the two packages are built into
wheels by Debian's pip (python3-pip, python3-wheel: pip cannot reach PyPI, and an isolated
venv has no `wheel` to build with) and installed into it with `pip --python`; numpy, which the
programs use (as NIXL's own API does), is Debian's python3-numpy, linked into the environment
alone. libixl.so comes from IXL_LIBRARY, as for any installed ixl binding.
"""
import glob
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
IXL_PKG = os.path.join(REPO, "bindings", "python")
NIXL_PKG = os.path.join(REPO, "bindings", "python-nixl")
PROGRAMS = os.path.join(HERE, "nixl_programs")
TIMEOUT_S = 60
# /usr/bin/python3, whose pip, wheel and numpy are Debian's (scripts/deps.sh test).
PY = sys.executable


def run(cmd, env=None, cwd=None, timeout=TIMEOUT_S):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}"
    return p.stdout


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "IXL_LIBRARY", "IXL_BUILD_DIR", "PYTHONHOME")
           and not k.startswith("NIXL_")}
    env.update(extra)
    return env


def library():
    lib = os.environ.get("IXL_LIBRARY")
    if not lib or not os.path.exists(lib):
        pytest.skip("IXL_LIBRARY does not name libixl.so (ctest sets it)")
    return lib


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    missing = [m for m in ("venv", "pip", "wheel", "numpy")
               if subprocess.run([PY, "-c", f"import {m}"], capture_output=True).returncode]
    if missing:
        pytest.skip(f"{PY} lacks {', '.join(missing)} (scripts/deps.sh test installs "
                    "python3-venv, python3-pip, python3-wheel, python3-numpy)")
    tmp = tmp_path_factory.mktemp("nixl")
    # Copies, so that building leaves nothing in the source tree.
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(IXL_PKG, tmp / "ixl", ignore=ignore)
    shutil.copytree(NIXL_PKG, tmp / "nixl", ignore=ignore)
    for d in ("ixl", "nixl"):  # setup.py's version: VERSION beside it in a copy
        shutil.copyfile(os.path.join(REPO, "VERSION"), tmp / d / "VERSION")
    env = clean_env(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([PY, "-m", "venv", "--without-pip", str(tmp / "venv")])
    run([PY, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-index", "--no-deps",
         "-w", str(tmp / "wheels"), str(tmp / "ixl"), str(tmp / "nixl")], env=env)
    py = str(tmp / "venv" / "bin" / "python")
    wheels = sorted(glob.glob(str(tmp / "wheels" / "*.whl")))
    run([PY, "-m", "pip", "--python", py, "install", "-q", "--no-index", "--no-deps"] + wheels,
        env=env)
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    import numpy
    os.symlink(os.path.dirname(numpy.__file__), os.path.join(site, "numpy"))
    return py, tmp, wheels


def test_ixl_package_never_provides_nixl(venv):
    """The binding's own wheel has no `nixl`, nor has its source directory: only the separate
    package installs that name."""
    _, _, wheels = venv
    ixl_wheel = next(w for w in wheels if os.path.basename(w).startswith("ixl-"))
    names = zipfile.ZipFile(ixl_wheel).namelist()
    assert not [n for n in names if n.startswith("nixl")], names
    assert not os.path.exists(os.path.join(IXL_PKG, "nixl"))
    out = subprocess.run([PY, "-c", "import nixl"], env=clean_env(PYTHONPATH=IXL_PKG),
                         capture_output=True, text=True)
    assert out.returncode != 0 and "No module named 'nixl'" in out.stderr, out


PROBE = """
import importlib.metadata as md, sys, sysconfig
import nixl, nixl._api, nixl._bindings, nixl._utils, nixl.logging, ixl, ixl.compat
site = sysconfig.get_paths()["purelib"]
assert nixl.__file__.startswith(site) and ixl.__file__.startswith(site), (nixl.__file__, site)
# One implementation behind both names, which differ only in defaults.
assert nixl.IXL_COMPAT and issubclass(nixl._api.nixl_agent, ixl._nixl.NixlAgentBase)
assert nixl.nixl_agent_config is nixl._api.nixl_agent_config
c, d = nixl._api.nixl_agent_config(), ixl.compat.nixl_agent_config()
assert (c.port, c.backends, d.port, d.backends) == (8888, ["UCX"], 0, None), vars(c)
assert not [p for p in sys.path if "dist-packages" in p], sys.path
print(sorted(d.metadata["Name"] for d in md.distributions()))
"""


def test_venv_holds_only_ixl_and_nixl(venv):
    py, tmp, _ = venv
    out = run([py, "-c", PROBE], env=clean_env(IXL_LIBRARY=library()), cwd=str(tmp))
    assert out.split("\n")[-2] == "['ixl', 'ixl-nixl-compat']", out


@pytest.mark.parametrize("program", ["two_process_listener", "storage_roundtrip",
                                     "prepped_numpy", "notifications", "telemetry",
                                     "bindings_and_utils"])
def test_nixl_program(venv, program):
    py, tmp, _ = venv
    out = run([py, "-X", "dev", os.path.join(PROGRAMS, program + ".py")],
              env=clean_env(IXL_LIBRARY=library()), cwd=str(tmp))
    assert ": ok" in out, out


def test_signatures_of_the_nixl_package():
    """test_nixl_signatures.py checks the `nixl` package itself when it can import it (else
    what the package exports, from ixl._nixl): run it with bindings/python-nixl importable."""
    env = clean_env(PYTHONPATH=os.pathsep.join([IXL_PKG, NIXL_PKG]), IXL_LIBRARY=library(),
                    PYTHONDONTWRITEBYTECODE="1")
    # -c: the current directory (this one) is on sys.path, for run_pytest.
    out = run([PY, "-c", "import sys, nixl._api, nixl._bindings, run_pytest; "
               "sys.exit(run_pytest.main([sys.argv[1]]))",
               os.path.join(HERE, "test_nixl_signatures.py")], env=env, cwd=HERE)
    assert " passed" in out and "failed" not in out, out

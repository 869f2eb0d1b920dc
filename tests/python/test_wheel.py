"""The wheels (issue 23): bindings/python/wheels.py builds ixl and ixl-nixl-compat offline from
this build tree with Debian's pip, setuptools and wheel; a fresh, isolated venv (no
--system-site-packages) installs them by pip with --no-index, and then, from a directory
outside the repository and with no IXL_LIBRARY, IXL_BUILD_DIR, PYTHONPATH, IXL_PLUGIN_DIR or
LD_LIBRARY_PATH:

- `python -m ixl` prints what this build's ixl-info prints (plugin paths aside: the venv's
  ixl/plugins there, the build's lib/plugins here), the version first;
- a NET WRITE between two agents through the `nixl` API moves 1 MiB with its notification,
  and checks the bytes;
- every libixl file mapped into that process (the library, the plugins) is the venv's, none
  the build tree's;
- the versions agree: VERSION, ixl.__version__, ixl.version() (the bundled library's), and
  both distributions' metadata (ixl-nixl-compat requires ixl==VERSION, which pip resolved);
- a carried plugin whose library is missing (UCX without libucx) is refused with the reason.
"""
import glob
import json
import os
import shutil
import subprocess
import sysconfig
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TIMEOUT_S = 60
PY = "/usr/bin/python3"  # Debian's, whose pip, setuptools and wheel build the wheels

PROBE = r"""
import ctypes, importlib.metadata as md, json, os, time
import ixl, nixl
import nixl._utils as u
from nixl._api import nixl_agent, nixl_agent_config

SIZE = 1 << 20
init = nixl_agent("wheel-init", nixl_agent_config(backends=["NET"]))
tgt = nixl_agent("wheel-target", nixl_agent_config(backends=["NET"]))
plugins = init.get_plugin_list()  # opens every plugin the library finds
src, dst = u.malloc_passthru(SIZE), u.malloc_passthru(SIZE)
ctypes.memmove(src, os.urandom(SIZE), SIZE)
u.ba_buf(dst, SIZE)
init.register_memory([(src, SIZE, 0, "")], "DRAM")
tgt.register_memory([(dst, SIZE, 0, "")], "DRAM")
assert init.add_remote_agent(tgt.get_agent_metadata()) == b"wheel-target"
h = init.initialize_xfer("WRITE", init.get_xfer_descs([(src, SIZE, 0)], "DRAM"),
                         tgt.get_xfer_descs([(dst, SIZE, 0)], "DRAM"), "wheel-target", b"w1")
state = init.transfer(h)
end = time.monotonic() + 20
while state != "DONE":
    assert state != "ERR" and time.monotonic() < end, state
    state = init.check_xfer_state(h)
while not tgt.check_remote_xfer_done("wheel-init", b"w1"):
    assert time.monotonic() < end, "no notification"
    time.sleep(0.001)
u.verify_transfer(src, dst, SIZE)
init.release_xfer_handle(h)
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps")
                 if "/libixl" in line.split()[-1]})
print(json.dumps({"package": ixl.__version__, "library": ixl.version(),
                  "dist_ixl": md.version("ixl"), "dist_nixl": md.version("ixl-nixl-compat"),
                  "requires": md.requires("ixl-nixl-compat"), "library_path": ixl.library_path,
                  "ixl_dir": os.path.dirname(ixl.__file__), "compat": nixl.IXL_COMPAT,
                  "plugins": plugins, "mapped": mapped}))
"""


def run(cmd, env=None, cwd=None, timeout=TIMEOUT_S):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p.stdout


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "IXL_LIBRARY", "IXL_BUILD_DIR", "IXL_PLUGIN_DIR",
                        "LD_LIBRARY_PATH", "PYTHONHOME") and not k.startswith("NIXL_")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


@pytest.fixture(scope="module")
def build():
    build = os.environ.get("IXL_BUILD_DIR")
    if not build or not os.path.exists(os.path.join(build, "lib", "libixl.so.0")):
        pytest.skip("IXL_BUILD_DIR does not name a build tree (ctest sets it)")
    return os.path.realpath(build)


@pytest.fixture(scope="module")
def version():
    with open(os.path.join(REPO, "VERSION")) as f:
        return f.read().strip()


@pytest.fixture(scope="module")
def venv(tmp_path_factory, build):
    missing = [m for m in ("venv", "pip", "setuptools", "wheel")
               if subprocess.run([PY, "-c", f"import {m}"], capture_output=True).returncode]
    if missing:
        pytest.skip(f"{PY} lacks {', '.join(missing)} (scripts/deps.sh test installs "
                    "python3-venv, python3-pip, python3-setuptools, python3-wheel)")
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    out = run([PY, os.path.join(REPO, "bindings", "python", "wheels.py"), build, str(dist)],
              env=clean_env(), cwd=str(tmp), timeout=90)
    print(out)
    wheels = sorted(glob.glob(str(dist / "*.whl")))
    # A fresh venv outside the repository, and Debian's pip installing into it (`pip --python`:
    # the pip ensurepip would put there is the same one, and copying it in costs 10 s).
    run([PY, "-m", "venv", "--without-pip", str(tmp / "venv")], env=clean_env(), cwd=str(tmp))
    py = str(tmp / "venv" / "bin" / "python")
    # Only the compatibility package named: pip finds the ixl it requires among the wheels.
    run([PY, "-m", "pip", "--python", py, "install", "-q", "--no-index", "--find-links",
         str(dist), "ixl-nixl-compat"], env=clean_env(), cwd=str(tmp))
    yield py, tmp, wheels
    shutil.rmtree(tmp, ignore_errors=True)


def test_wheel_files(venv, build, version):
    _, _, wheels = venv
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    names = sorted(os.path.basename(w) for w in wheels)
    assert names == [f"ixl-{version}-py3-none-{plat}.whl",
                     f"ixl_nixl_compat-{version}-py3-none-any.whl"], names
    with zipfile.ZipFile(wheels[0]) as z:
        files = set(z.namelist())
        assert f"ixl-{version}.dist-info/WHEEL" in files
        assert "Root-Is-Purelib: false" in z.read(f"ixl-{version}.dist-info/WHEEL").decode()
    plugins = {os.path.basename(p) for p in glob.glob(os.path.join(build, "lib", "plugins",
                                                                   "libixl_plugin_*.so"))}
    assert {"ixl/libixl.so.0", "ixl/_version.py", "ixl/__main__.py"} <= files
    assert {f for f in files if f.startswith("ixl/plugins/")} == \
        {f"ixl/plugins/{p}" for p in plugins}
    with zipfile.ZipFile(wheels[1]) as z:
        meta = z.read(f"ixl_nixl_compat-{version}.dist-info/METADATA").decode()
        assert f"Requires-Dist: ixl (=={version})" in meta or \
            f"Requires-Dist: ixl=={version}" in meta, meta


def test_python_m_ixl_prints_what_ixl_info_prints(venv, build, version):
    py, tmp, _ = venv
    ixl_info = os.path.join(build, "tools", "ixl-info")
    assert os.path.exists(ixl_info), f"{ixl_info} is not built"
    pkg = run([py, "-c", "import ixl, os; print(os.path.dirname(ixl.__file__))"],
              env=clean_env(), cwd=str(tmp)).strip()
    assert pkg.startswith(str(tmp / "venv")), pkg
    ours = run([py, "-m", "ixl"], env=clean_env(), cwd=str(tmp))
    print(ours)
    theirs = run([ixl_info], env=clean_env(), cwd=str(tmp))
    assert ours.startswith(f"ixl {version}\nplugins ("), ours
    # The wheel's plugins are found in the package (accepted or refused with a reason).
    for p in glob.glob(os.path.join(build, "lib", "plugins", "libixl_plugin_*.so")):
        assert os.path.join(os.path.realpath(pkg), "plugins", os.path.basename(p)) in ours
    norm_ours = ours.replace(os.path.join(os.path.realpath(pkg), "plugins"), "<plugins>")
    norm_theirs = theirs.replace(os.path.join(build, "lib", "plugins"), "<plugins>")
    assert norm_ours == norm_theirs
    for args in (["--strerror", "-100"], ["--strerror", "-4"], ["--cuda"]):
        a = subprocess.run([py, "-m", "ixl"] + args, env=clean_env(), cwd=str(tmp),
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        b = subprocess.run([ixl_info] + args, env=clean_env(), cwd=str(tmp),
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        assert (a.returncode, a.stdout.replace(os.path.join(os.path.realpath(pkg), "plugins"),
                                               "<plugins>")) == \
            (b.returncode, b.stdout.replace(os.path.join(build, "lib", "plugins"),
                                            "<plugins>")), args


def test_nixl_transfer_and_versions_from_the_venv(venv, build, version):
    py, tmp, _ = venv
    out = json.loads(run([py, "-c", PROBE], env=clean_env(), cwd=str(tmp)))
    print(out)
    assert out["package"] == out["library"] == out["dist_ixl"] == out["dist_nixl"] == version
    assert [r.replace(" ", "").replace("(", "").replace(")", "") for r in out["requires"]] == \
        [f"ixl=={version}"] and out["compat"] is True
    ixl_dir = os.path.realpath(out["ixl_dir"])
    assert ixl_dir.startswith(str(tmp / "venv")) and "NET" in out["plugins"]
    assert out["library_path"] == os.path.join(out["ixl_dir"], "libixl.so.0")
    # Everything of ixl in the process comes from the venv (plugins: those the library opened).
    assert os.path.join(ixl_dir, "libixl.so.0") in out["mapped"], out["mapped"]
    for m in out["mapped"]:
        assert m.startswith(ixl_dir + os.sep), f"{m} is not the wheel's"
        assert not m.startswith(REPO + os.sep) and not m.startswith(build + os.sep), m


def test_plugin_without_its_library_is_refused_with_the_reason(venv, build):
    """The UCX plugin is carried even where libucx is missing: it is then refused with the
    loader's reason (shown by python -m ixl), and the rest works. Shown on a copy of the
    installed package whose UCX plugin asks for a libucp that no system has."""
    py, tmp, _ = venv
    if not os.path.exists(os.path.join(build, "lib", "plugins", "libixl_plugin_UCX.so")):
        pytest.skip("this build has no UCX plugin (libucx-dev: scripts/deps.sh build)")
    pkg = run([py, "-c", "import ixl, os; print(os.path.dirname(ixl.__file__))"],
              env=clean_env(), cwd=str(tmp)).strip()
    alt = tmp / "alt"
    shutil.copytree(pkg, alt / "ixl")
    ucx = alt / "ixl" / "plugins" / "libixl_plugin_UCX.so"
    data = ucx.read_bytes()
    assert b"libucp.so.0" in data
    ucx.write_bytes(data.replace(b"libucp.so.0", b"libucp.so.9"))  # same length: NEEDED
    p = subprocess.run([py, "-m", "ixl", "--plugins"], env=clean_env(PYTHONPATH=str(alt)),
                       cwd=str(tmp), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert p.returncode == 0, p
    refused = p.stdout[p.stdout.index("\nrefused ("):]
    assert f"  {os.path.realpath(ucx)}\n             refused: cannot be opened: libucp.so.9: " \
        "cannot open shared object file" in refused, p.stdout
    assert "  NET        version" in p.stdout and "libixl_plugin_OBJ.so" in p.stdout
    assert "libucp.so.9" in p.stderr  # and the library's warning says so

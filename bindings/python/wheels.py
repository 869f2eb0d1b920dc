"""Builds the two wheels offline from a build tree: ixl (carrying libixl.so.0 and the build's
dynamic plugins) and ixl-nixl-compat (the `nixl` import name, requiring ixl of the same
version).

    /usr/bin/python3 bindings/python/wheels.py BUILD_DIR OUT_DIR      (what `make wheel` runs)

Nothing is written into the source tree: bindings/python and bindings/python-nixl are copied
into a scratch directory with the repository's VERSION, libixl.so.0 and lib/plugins/
libixl_plugin_*.so of BUILD_DIR go into the copy's ixl/ (debug information stripped when
binutils' strip is there), and Debian's pip builds both with Debian's setuptools and wheel
(--no-build-isolation --no-index: no network). Prints each wheel's path and size.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def die(msg):
    print(f"wheels.py: {msg}", file=sys.stderr)
    sys.exit(1)


def copy_elf(src, dst):
    shutil.copyfile(src, dst)  # the file a symlink names, under dst's name
    os.chmod(dst, 0o755)
    strip = shutil.which("strip")
    if strip:
        subprocess.run([strip, "--strip-debug", dst], check=True)


def stage(build, tmp):
    lib = os.path.join(build, "lib", "libixl.so.0")
    if not os.path.exists(lib):
        die(f"{lib} does not exist: build the library first (make wheel does)")
    version_file = os.path.join(REPO, "VERSION")
    if not os.path.exists(version_file):
        die(f"{version_file} does not exist")
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                    "wheels.py", "_version.py", "*.so", "*.so.*")
    ixl = os.path.join(tmp, "ixl")
    nixl = os.path.join(tmp, "ixl-nixl-compat")
    shutil.copytree(HERE, ixl, ignore=ignore)
    shutil.copytree(os.path.join(REPO, "bindings", "python-nixl"), nixl, ignore=ignore)
    for d in (ixl, nixl):
        shutil.copyfile(version_file, os.path.join(d, "VERSION"))
    copy_elf(lib, os.path.join(ixl, "ixl", "libixl.so.0"))
    plugins = sorted(glob.glob(os.path.join(build, "lib", "plugins", "libixl_plugin_*.so")))
    os.mkdir(os.path.join(ixl, "ixl", "plugins"))
    for p in plugins:
        copy_elf(p, os.path.join(ixl, "ixl", "plugins", os.path.basename(p)))
    return ixl, nixl, [os.path.basename(p) for p in plugins]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, out = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ixl-wheels-") as tmp:
        ixl, nixl, plugins = stage(build, tmp)
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        for k in ("PYTHONPATH", "IXL_LIBRARY", "IXL_BUILD_DIR"):
            env.pop(k, None)
        wheels = os.path.join(tmp, "wheels")
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                            "--no-index", "--no-deps", "-w", wheels, ixl, nixl], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            die(f"pip wheel failed ({p.returncode}):\n{p.stdout}")
        built = sorted(glob.glob(os.path.join(wheels, "*.whl")))
        if len(built) != 2:
            die(f"expected 2 wheels, pip made: {built}")
        for w in built:
            dst = os.path.join(out, os.path.basename(w))
            shutil.copyfile(w, dst)
            rel = os.path.relpath(dst)
            print(f"{dst if rel.startswith('..') else rel}  {os.path.getsize(dst)} bytes")
    print(f"(libixl.so.0 and {len(plugins)} plugin(s): {', '.join(plugins) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

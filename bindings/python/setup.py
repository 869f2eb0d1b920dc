"""Build script of the ixl package (setuptools, Debian's: `pip wheel --no-build-isolation`).

The version is the repository's VERSION file (one line, "major.minor.patch"), read when the
package is built: VERSION beside this file (an sdist, or the copy wheels.py stages), else
../../VERSION (the source tree). The build writes it into ixl/_version.py, so ixl.__version__
needs no file at run time; an sdist carries VERSION at its top.

A copy staged by wheels.py holds libixl.so.0 and plugins/libixl_plugin_*.so inside ixl/: the
wheel then carries them and is tagged for this platform (py3-none-linux_x86_64: the Python is
pure, the library is not). Without them (`pip install bindings/python`) the wheel is pure
(py3-none-any) and the package finds libixl.so at run time (ixl/_lib.py).
"""
import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.exists(os.path.join(HERE, "ixl", "libixl.so.0"))


def read_version():
    for path in (os.path.join(HERE, "VERSION"), os.path.join(HERE, "..", "..", "VERSION")):
        if os.path.exists(path):
            with open(path) as f:
                version = f.read().strip()
            if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
                raise SystemExit(f"{path}: {version!r} is not major.minor.patch")
            return version
    raise SystemExit("ixl: no VERSION file beside setup.py or two levels up (the repository's); "
                     "build from the source tree, an sdist, or bindings/python/wheels.py")


VERSION = read_version()


class BuildPy(build_py):
    """Also writes ixl/_version.py into the build (never into the source tree)."""

    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "ixl", "_version.py")
        with open(path, "w") as f:
            f.write(f'"""Written by setup.py from the repository\'s VERSION."""\n'
                    f'version = "{VERSION}"\n')


class Sdist(sdist):
    """Puts VERSION at the top of the sdist, where read_version() looks first."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        with open(os.path.join(base_dir, "VERSION"), "w") as f:
            f.write(VERSION + "\n")


cmdclass = {"build_py": BuildPy, "sdist": Sdist}
extra = {}
if BUNDLED:
    from wheel.bdist_wheel import bdist_wheel

    class BinaryDistribution(Distribution):
        """Platform files inside: installed as platlib, the wheel not pure."""

        def has_ext_modules(self):
            return True

    class PlatformWheel(bdist_wheel):
        """A wheel for this platform but any Python 3: the ELF files are no extension module
        (ctypes loads them), so the interpreter and its ABI do not matter."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel
    extra = {"distclass": BinaryDistribution,
             "package_data": {"ixl": ["libixl.so.0", "plugins/libixl_plugin_*.so"]}}

setup(version=VERSION, cmdclass=cmdclass, **extra)

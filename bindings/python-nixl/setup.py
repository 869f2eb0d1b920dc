"""Build script of ixl-nixl-compat (the `nixl` import name over ixl; setuptools, Debian's).

Its version is the repository's VERSION file, read as for ixl (bindings/python/setup.py):
VERSION beside this file (an sdist, or the copy bindings/python/wheels.py stages), else
../../VERSION. It requires ixl of exactly that version: both come from one tree.
"""
import os
import re

from setuptools import setup
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def read_version():
    for path in (os.path.join(HERE, "VERSION"), os.path.join(HERE, "..", "..", "VERSION")):
        if os.path.exists(path):
            with open(path) as f:
                version = f.read().strip()
            if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
                raise SystemExit(f"{path}: {version!r} is not major.minor.patch")
            return version
    raise SystemExit("ixl-nixl-compat: no VERSION file beside setup.py or two levels up (the "
                     "repository's); build from the source tree, an sdist, or "
                     "bindings/python/wheels.py")


VERSION = read_version()


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        with open(os.path.join(base_dir, "VERSION"), "w") as f:
            f.write(VERSION + "\n")


setup(version=VERSION, install_requires=[f"ixl=={VERSION}"], cmdclass={"sdist": Sdist})

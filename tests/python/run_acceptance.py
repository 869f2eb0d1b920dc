"""Runs one program of the shared acceptance suite (written against NIXL's Python API, its
import line pointing at ixl.compat) unmodified, for ctest: exit 0 pass, 1 fail, 77 skip.

Usage: run_acceptance.py DIR PROGRAM.py
DIR is ../shared/acceptance beside the repository; when it is missing the test skips, except
under CI=true, where the layout always has it and its absence is a failure.
"""
import os
import subprocess
import sys

TIMEOUT_S = 110


def main(directory, program):
    ci = os.environ.get("CI", "").lower() == "true"
    path = os.path.join(directory, program)
    if not os.path.isfile(path):
        print(f"{path} is missing (the acceptance programs live in ../shared/acceptance "
              "beside the repository)")
        return 1 if ci else 77
    with open(path) as f:
        if "from ixl.compat import" not in f.read():
            print(f"{path} does not import ixl.compat")
            return 1
    try:
        p = subprocess.run([sys.executable, path], cwd=directory, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"{program} did not finish in {TIMEOUT_S} s")
        return 1
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

"""test_gc.py's scenarios with libixl built with ASan+UBSan (the ASan build's ctest runs this
file; tests/python/CMakeLists.txt): the interpreter is not instrumented, so each child
interpreter gets the sanitizer runtimes through LD_PRELOAD (IXL_ASAN_PRELOAD, found at
configure time) and IXL_LIBRARY points at the ASan build's libixl.so. This pytest process
itself never loads libixl. Leak checking is off: CPython keeps memory until exit by design.
"""
import os

import pytest

from test_gc import SNIPPET, STRESS, THREADS, _run

PRELOAD = os.environ.get("IXL_ASAN_PRELOAD", "")


def _env():
    if not PRELOAD:
        pytest.fail("IXL_ASAN_PRELOAD is not set (run through ctest in the ASan build)")
    return {"LD_PRELOAD": PRELOAD,
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:verify_asan_link_order=0",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def test_issue_snippet_asan():
    assert "snippet: ok" in _run(SNIPPET, env=_env())


def test_gc_stress_asan():
    assert "stress: 240 cycles" in _run(STRESS, "6", env=_env())


def test_gc_threads_asan():
    assert "threads: ok" in _run(THREADS, env=_env())

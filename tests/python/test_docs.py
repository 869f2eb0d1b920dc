"""The Python examples of docs/python.md run as written (each ```python block, in a fresh
interpreter, from a file so that multiprocessing's spawn can import its main module)."""
import os
import re
import subprocess
import sys

import pytest

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "docs", "python.md")


def blocks():
    with open(DOC) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_doc_has_examples():
    assert len(blocks()) >= 3


@pytest.mark.parametrize("index", range(len(blocks())))
def test_doc_example(index, tmp_path):
    pytest.importorskip("numpy")
    script = tmp_path / f"example_{index}.py"
    script.write_text(blocks()[index])
    p = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    assert "Traceback" not in p.stdout

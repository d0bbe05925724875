"""A kernel that crashes the process (a wild write, an abort inside LLVM) fails its own test
and the run goes on: pytest runs the suite in pytest-xdist workers (pyproject.toml's
addopts), and a worker that dies is replaced. Checked here with the suite's own options
on a file whose second test kills its process."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

CRASHING = '''
import ctypes, os

def test_before():
    pass

def test_segfault():
    ctypes.string_at(0)  # SIGSEGV, as a kernel reading past an array could

def test_abort():
    os.abort()  # "Fatal Python error: Aborted", as LLVM's assertions give

def test_after():
    pass
'''


def test_a_crashing_test_fails_alone(tmp_path):
    options = re.search(r'^addopts = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    (tmp_path / "test_crashing.py").write_text(CRASHING)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *shlex.split(options), "-p", "no:cacheprovider", "-rf",
         "--rootdir", str(tmp_path), str(tmp_path / "test_crashing.py")],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONFAULTHANDLER": ""}, timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "2 failed, 2 passed" in out, out
    assert "crashed while running 'test_crashing.py::test_segfault'" in out, out
    assert "crashed while running 'test_crashing.py::test_abort'" in out, out

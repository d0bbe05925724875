"""Runs the lit + FileCheck suite (tests/lit) from pytest, so one command runs everything."""

import os
import subprocess
import sys
from pathlib import Path

LIT_DIR = Path(__file__).parent / "lit"


def test_lit_suite():
    env = dict(os.environ)
    lit = Path(sys.executable).parent / "lit"
    cmd = [str(lit), "-q", "--order=lexical", str(LIT_DIR)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"lit failed:\n{proc.stdout}\n{proc.stderr}"

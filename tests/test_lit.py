"""Runs the lit + FileCheck suite (tests/lit) from pytest, so one command runs everything:
once per kind of x86-64 host (tests/targets.py), with LOOM_TARGET set in lit's
environment, so that a test that depends on the vector width without pinning its
target fails here whatever host this is. A test that pins its own target in every RUN
line gives the same result both times: the second run leaves it out."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from targets import TARGETS

LIT_DIR = Path(__file__).parent / "lit"
KINDS = sorted(TARGETS)


def pins_target(test: Path) -> bool:
    """Whether every RUN line of `test` sets LOOM_TARGET itself (`env LOOM_TARGET=...`):
    then the one in lit's environment does not reach it."""
    runs = [line for line in test.read_text().splitlines() if "RUN:" in line]
    return bool(runs) and all("LOOM_TARGET=" in line for line in runs)


def test_pins_target():
    assert pins_target(LIT_DIR / "loom-default" / "default.mlir")
    assert not pins_target(LIT_DIR / "loom-vectorize" / "vectorize.mlir")


@pytest.mark.parametrize("kind", KINDS)
def test_lit_suite(kind):
    env = {**os.environ, "LOOM_TARGET": TARGETS[kind]}
    lit = Path(sys.executable).parent / "lit"
    pinned = sorted(str(t.relative_to(LIT_DIR)) for t in LIT_DIR.glob("*/*.mlir") if pins_target(t))
    again = ["--filter-out", "|".join(re.escape(name) + "$" for name in pinned)] if kind != KINDS[0] and pinned else []
    cmd = [str(lit), "-q", "--order=lexical", *again, str(LIT_DIR)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"lit failed with LOOM_TARGET={TARGETS[kind]}:\n{proc.stdout}\n{proc.stderr}"

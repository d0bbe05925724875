"""compile(profile=True): each loop nest timed as the kernel runs (loom-profile), read
back with `Kernel.profile()`; the results are the unprofiled kernel's, bit for bit."""

from __future__ import annotations

import time

import numpy as np
import pytest

import compiler
from compiler.jit.kernel import tick_rate
from kernels import conv2d, matmul
from passes.support.diagnostics import LoomError


def _chain(n: int) -> str:
    """n elementwise adds in a row: more nests than loom-outline leaves in one function."""
    lines = ["func.func @chain(%x0: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {"]
    for i in range(n):
        lines.append(f"  %x{i + 1} = loom.add %x{i}, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>")
    lines += [f"  func.return %x{n} : tensor<64xf32>", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_profiled_matmul_times_its_nests_and_computes_the_same(threads):
    src = matmul((256, 192), (192, 320), (256, 320), np.float32)
    plain = compiler.compile(src, num_threads=threads)
    timed = compiler.compile(src, num_threads=threads, profile=True)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 192), np.float32), rng.standard_normal((192, 320), np.float32)
    np.testing.assert_array_equal(timed(a, b), plain(a, b))
    timed.reset_profile()
    calls = 20
    t0 = time.perf_counter()
    for _ in range(calls):
        timed(a, b)
    wall = time.perf_counter() - t0
    rows = timed.profile()
    assert rows and all(r.calls == calls for r in rows), rows
    assert any(r.tag == "matmul" for r in rows), rows
    spent = sum(r.seconds for r in rows)
    # the nests are most of a call, and never more than the calls took
    assert 0.5 * wall < spent < wall, (spent, wall, rows)
    timed.reset_profile()
    assert all(r.calls == 0 and r.seconds == 0 for r in timed.profile())


def test_outlined_nests_are_timed_at_their_calls():
    """Past loom-outline's threshold each nest is a call of a function of its own: each
    call is a slot, named after the nest it calls."""
    src = _chain(20)
    kern = compiler.compile(src, profile=True)
    x, b = np.arange(64, dtype=np.float32), np.ones(64, np.float32)
    np.testing.assert_array_equal(kern(x, b), x + 20)
    rows = kern.profile()
    assert [r.tag for r in rows] == ["add"] * 20 and all(r.calls == 1 for r in rows), rows
    assert [r.location for r in rows] == [f"<source>:{line}:3" for line in range(2, 22)]


def test_a_profiled_conv2d_names_its_staging_and_its_matmul():
    src = conv2d((1, 14, 14, 32), (3, 3, 32, 64), (1, 14, 14, 64), (1, 1), (1, 1), (1, 1), np.float32, layout="nhwc")
    kern = compiler.compile(src, profile=True, num_threads=1)
    kern(np.ones((1, 14, 14, 32), np.float32), np.ones((3, 3, 32, 64), np.float32))
    tags = {r.tag for r in kern.profile()}
    assert "matmul" in tags and tags <= {"matmul", "direct.pad", "conv2d", "conv2d.init"}, tags


def test_the_tick_rate_is_a_clock_rate():
    assert 1e8 < tick_rate() < 1e11


def test_profile_errors():
    src = matmul((4, 4), (4, 4), (4, 4), np.float32)
    with pytest.raises(ValueError, match="was not compiled with profile=True"):
        compiler.compile(src).profile()
    with pytest.raises(TypeError, match="profile must be True or False"):
        compiler.compile(src, profile="yes")
    # a pipeline that runs loom-profile itself, after the lowering to LLVM: nothing to time
    late = "loom-bufferize,convert-loom-to-affine,loom-lower-affine,convert-scf-to-cf,loom-convert-to-llvm,loom-profile"
    with pytest.raises(LoomError, match="loom-profile did not see @mm on memrefs"):
        compiler.compile(src, pipeline=late, profile=True)

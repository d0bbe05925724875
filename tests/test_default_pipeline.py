"""The `default` pipeline: numerics on odd shapes, every ablation variant, the remarks,
and the cost model's choices for a few targets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
from compiler.diagnostics import LoomError
from compiler.target import Target, override
from kernels import assert_within_bound, matmul, small_ints
from passes.cost_model import plan_matmul, register_tile
from passes.loom_default import STEPS

AVX2 = Target("test", 32 * 1024, 512 * 1024, 32 << 20, 256, 16, True)


def check(m: int, n: int, k: int, pipeline: str = "default", seed: int = 0) -> None:
    kernel = compiler.compile(matmul((m, k), (k, n), (m, n), np.float32), pipeline=pipeline)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    assert_within_bound(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), k, np.float32, pipeline)
    a, b = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32)
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 300, 200), (4, 64, 33), (7, 5, 3), (200, 33, 9), (97, 131, 70)])
def test_default_fixed_shapes(shape):
    check(*shape)


@settings(deadline=None, max_examples=8)
@given(st.integers(1, 80), st.integers(1, 80), st.integers(1, 80))
def test_default_random_shapes(m, n, k):
    check(m, n, k)


@pytest.mark.parametrize("skip", [*STEPS, "tile,pack", "peel,hoist"])
def test_every_ablation_variant_is_correct(skip):
    check(37, 45, 29, f"loom-default{{skip={skip}}}")


def test_unknown_step_is_refused():
    with pytest.raises(LoomError, match="unknown step bogus in option 'skip' \\(steps: peel, tile"):
        compiler.compile(matmul((4, 4), (4, 4), (4, 4), np.float32), pipeline="loom-default{skip=bogus}")


def test_batched_and_epilogue():
    src = """func.func @f(%a: tensor<3x13x20xf32>, %b: tensor<3x20x17xf32>, %bias: tensor<17xf32>) -> tensor<3x13x17xf32> {
  %c = loom.matmul %a, %b : (tensor<3x13x20xf32>, tensor<3x20x17xf32>) -> tensor<3x13x17xf32>
  %s = loom.add %c, %bias : (tensor<3x13x17xf32>, tensor<17xf32>) -> tensor<3x13x17xf32>
  %r = loom.relu %s : tensor<3x13x17xf32>
  func.return %r : tensor<3x13x17xf32>
}"""
    rng = np.random.default_rng(1)
    a, b, bias = (small_ints(rng, s, np.float32) for s in [(3, 13, 20), (3, 20, 17), (17,)])
    got = compiler.compile(src, pipeline="default")(a, b, bias)
    np.testing.assert_array_equal(got, compiler.reference(src, a, b, bias))


def test_remarks_say_the_plan_and_the_pass_list():
    src = matmul((50, 70), (70, 40), (50, 40), np.float32)
    kernel = compiler.compile(src, pipeline="default", remarks=True)
    plan = [r for r in kernel.remarks if "[loom-default]" in r]
    assert plan and "register tile" in plan[0] and "estimated traffic" in plan[0] and "pass list: " in plan[0]
    assert plan[0].split("pass list: ")[1].startswith("loom-tile{sizes=")
    rng = np.random.default_rng(2)
    a, b = small_ints(rng, (50, 70), np.float32), small_ints(rng, (70, 40), np.float32)
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_register_tiles_for_targets():
    assert register_tile(AVX2) == (6, 16)
    assert register_tile(override(AVX2, "vector_bits=512,vector_registers=32")) == (14, 32)
    mr, nr = register_tile(override(AVX2, "vector_bits=128,vector_registers=16"))
    assert mr * (nr // 4) + nr // 4 + 1 <= 16


def test_plan_respects_the_caches():
    plan = plan_matmul(1024, 1024, 1024, AVX2)
    assert (plan.mr, plan.nr) == (6, 16) and plan.pack
    assert plan.kc * plan.nr * 4 <= AVX2.l1
    assert plan.mc % plan.mr == 0 and plan.mc * plan.kc * 4 <= AVX2.l2
    assert all(v > 0 for v in plan.traffic().values())
    assert not plan_matmul(64, 64, 64, AVX2).pack  # A and B fit in L1 together
    assert not plan_matmul(1, 4096, 4096, AVX2).rows_tiled  # a matrix-vector product


def test_target_override_errors():
    with pytest.raises(LoomError, match="LOOM_TARGET"):
        override(AVX2, "bogus=1")
    with pytest.raises(LoomError, match="needs a number"):
        override(AVX2, "l1=lots")

"""Zero-size dimensions, end to end: a matmul with K = 0 gives zeros, one with M or N = 0
(or a batch of 0) an empty result, a conv2d with no input channels zeros and one with no
filters an empty result; an elementwise op on a 4x0 tensor an empty one. Each through
the naive pipeline, the default one (loom-default leaves a nest with a zero extent as it
is, with a remark, and its cost model does not divide by the zero) and schedules of every
schedule pass, compared with the numpy reference.
"""

import numpy as np
import pytest

import compiler
from passes.support.target import host
from kernels import binary, conv2d, matmul, ty
from passes.analysis.cost_model import plan_matmul

F32 = np.float32


def _matmul_bias_relu(m: int, k: int, n: int) -> str:
    ta, tb, tc, tbias = ty((m, k), F32), ty((k, n), F32), ty((m, n), F32), ty((n,), F32)
    return f"""func.func @mm(%a: {ta}, %b: {tb}, %bias: {tbias}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  %s = loom.add %c, %bias : ({tc}, {tbias}) -> {tc}
  %r = loom.relu %s : {tc}
  func.return %r : {tc}
}}"""


CASES = {
    "matmul K=0": (matmul((4, 0), (0, 5), (4, 5), F32), [(4, 0), (0, 5)]),
    "matmul M=0": (matmul((0, 3), (3, 5), (0, 5), F32), [(0, 3), (3, 5)]),
    "matmul N=0": (matmul((4, 3), (3, 0), (4, 0), F32), [(4, 3), (3, 0)]),
    "matmul K=0, bias, relu": (_matmul_bias_relu(8, 0, 16), [(8, 0), (0, 16), (16,)]),
    "batched matmul B=0": (matmul((0, 4, 3), (0, 3, 5), (0, 4, 5), F32), [(0, 4, 3), (0, 3, 5)]),
    "conv2d C=0": (conv2d((1, 0, 8, 8), (4, 0, 3, 3), (1, 4, 6, 6), (1, 1), (0, 0), (1, 1), F32),
                   [(1, 0, 8, 8), (4, 0, 3, 3)]),
    "conv2d F=0": (conv2d((1, 3, 8, 8), (0, 3, 3, 3), (1, 0, 8, 8), (1, 1), (1, 1), (1, 1), F32),
                   [(1, 3, 8, 8), (0, 3, 3, 3)]),
    "add+relu 4x0": (binary("add", (4, 0), (0,), (4, 0), F32, relu=True), [(4, 0), (0,)]),
}

PIPELINES = [
    "naive",
    "default",
    # every nest, every register-level step
    "loom-tile{sizes=2,2},loom-unroll-jam{factors=2,2},loom-hoist,loom-unroll{factor=3},"
    "loom-vectorize,loom-prefetch",
    "loom-peel{sizes=6,16},loom-interchange{order=1,0},loom-hoist,loom-unroll-jam{factors=4}",
]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("case", list(CASES))
def test_zero_size_matches_numpy(case, pipeline):
    src, shapes = CASES[case]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(F32) for s in shapes]
    out = compiler.compile(src, pipeline=pipeline)(*arrays)
    ref = compiler.reference(src, *arrays)
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref.astype(F32))


@pytest.mark.parametrize("case", ["matmul K=0", "matmul M=0", "batched matmul B=0"])
def test_zero_size_matmul_packed(case):
    """Packing a tile of an operand with a zero extent: an empty copy, and no read of it."""
    src, shapes = CASES[case]
    depth = len(shapes[0]) - 2
    pipeline = (f"loom-tile{{sizes=2,2,2 depth={depth} op=matmul}},"
                f"loom-pack{{operand=0 level={depth + 2} op=matmul}},loom-pack{{operand=1 level={depth + 2} op=matmul}}")
    arrays = [np.ones(s, F32) for s in shapes]
    out = compiler.compile(src, pipeline=pipeline)(*arrays)
    np.testing.assert_array_equal(out, compiler.reference(src, *arrays).astype(F32))


def test_default_leaves_zero_extent_nests_with_a_remark():
    src, _ = CASES["matmul K=0, bias, relu"]
    kern = compiler.compile(src, pipeline="default", remarks=True)
    said = [r for r in kern.remarks if "[loom-default]" in r]
    assert any("nest 'matmul' left as it is: loop %k has no iterations (a zero-size dimension)" in r for r in said)
    # the zero fill of C and the epilogue have no zero extent: scheduled as usual
    assert not any("'matmul.init' left as it is" in r or "'add' left as it is" in r for r in said)


@pytest.mark.parametrize("mnk", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0), (1000, 1000, 0), (0, 1000, 1000)])
def test_cost_model_plans_zero_extents(mnk):
    """The cost model does not divide by a zero extent: tiles of at least 1, a
    description without per-fma ratios when there is no fma."""
    plan = plan_matmul(*mnk, host())
    assert min(plan.mc, plan.nc, plan.kc, plan.mr, plan.nr) >= 1
    text = plan.describe()
    assert "estimated traffic" in text and "/fma" not in text

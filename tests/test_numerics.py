"""Differential tests: compiled kernels against numpy in float64.

Random inputs are checked within about 4*K*eps*max|ref| (K the reduction length);
small-integer inputs, whose products and sums are exact in f32, bit-exactly.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import compiler
from dialects.loom import broadcast_shapes
from kernels import assert_within_bound, binary, conv2d_cases, conv2d_kernel, matmul, small_ints

DTYPES = [np.float32, np.float64]
# 1, primes, powers of two and odd sizes
dim = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 64])


@given(m=dim, k=dim, n=dim, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_matmul_random(m, k, n, dtype, seed):
    src = matmul((m, k), (k, n), (m, n), dtype)
    kern = compiler.compile(src)
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(dtype) for s in [(m, k), (k, n)])
    out = kern(a, b)
    assert out.shape == (m, n) and out.dtype == dtype
    assert_within_bound(out, compiler.reference(src, a, b), k, dtype)


@given(bsz=st.integers(1, 3), m=dim, k=dim, n=dim, dtype=st.sampled_from(DTYPES))
def test_batched_matmul_exact(bsz, m, k, n, dtype):
    src = matmul((bsz, m, k), (bsz, k, n), (bsz, m, n), dtype)
    rng = np.random.default_rng(0)
    a, b = small_ints(rng, (bsz, m, k), dtype), small_ints(rng, (bsz, k, n), dtype)
    out = compiler.compile(src)(a, b)
    np.testing.assert_array_equal(out, np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype))


conv_cases = conv2d_cases(max_c=4, max_f=5, max_rs=4, max_stride=3, max_padding=3, max_dilation=3, max_hw=12)


@given(case=conv_cases, dtype=st.sampled_from(DTYPES), exact=st.booleans())
def test_conv2d(case, dtype, exact):
    src, (x_shape, w_shape), k = conv2d_kernel(case, dtype)
    rng = np.random.default_rng(1)
    make = small_ints if exact else (lambda g, sh, dt: g.standard_normal(sh).astype(dt))
    x, wt = make(rng, x_shape, dtype), make(rng, w_shape, dtype)
    out = compiler.compile(src)(x, wt)
    ref = compiler.reference(src, x, wt)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(dtype))
    else:
        assert_within_bound(out, ref, k, dtype)


shape = st.lists(st.sampled_from([1, 2, 3, 5]), min_size=0, max_size=3)


@given(a=shape, b=shape, op=st.sampled_from(["add", "mul"]), relu=st.booleans(), dtype=st.sampled_from(DTYPES))
def test_elementwise_broadcast(a, b, op, relu, dtype):
    out_shape = broadcast_shapes(a, b)
    if out_shape is None:
        return
    src = binary(op, a, b, out_shape, dtype, relu=relu)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(a).astype(dtype), rng.standard_normal(b).astype(dtype)
    out = compiler.compile(src)(x, y)
    want = (x + y) if op == "add" else (x * y)
    if relu:
        want = np.maximum(want, 0)
    np.testing.assert_array_equal(out, np.asarray(want, dtype=dtype))


@pytest.mark.parametrize("path", ["matmul_bias_relu", "conv2d", "conv2d_dilated_f64", "batched_matmul_f64"])
def test_examples_check(path):
    from pathlib import Path

    from compiler.measure.runner import run_and_check

    file = Path(__file__).parent.parent / "examples" / f"{path}.mlir"
    report = run_and_check(file.read_text(), filename=str(file), repeat=1)
    assert report.ok, report.format()


def test_relu_keeps_nan_like_numpy():
    src = binary("add", [4], [4], (4,), np.float32, relu=True)
    x = np.array([np.nan, -1.0, 2.0, -0.0], dtype=np.float32)
    out = compiler.compile(src)(x, np.zeros(4, np.float32))
    np.testing.assert_array_equal(out, np.maximum(x, 0))


RETURNS_ARGUMENT = {
    "alone": """func.func @id(%a: tensor<5x3xf32>, %b: tensor<3x4xf32>) -> tensor<5x3xf32> {
  func.return %a : tensor<5x3xf32>
}""",
    # the argument beside a computed result, and the same argument and result twice
    "beside": """func.func @mixed(%a: tensor<5x3xf32>, %b: tensor<3x4xf32>) -> (tensor<5x4xf32>, tensor<5x3xf32>, tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x3xf32>) {
  %c = loom.matmul %a, %b : (tensor<5x3xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
  func.return %c, %a, %b, %c, %a : tensor<5x4xf32>, tensor<5x3xf32>, tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x3xf32>
}""",
}


@pytest.mark.parametrize("pipeline", ["naive", "default"])
@pytest.mark.parametrize("case", sorted(RETURNS_ARGUMENT))
def test_returned_argument_is_copied(case, pipeline):
    """loom-bufferize copies a returned argument into its out-parameter (memref.copy): the
    results hold the argument's values, in fresh arrays."""
    src = RETURNS_ARGUMENT[case]
    rng = np.random.default_rng(4)
    a, b = small_ints(rng, (5, 3), np.float32), small_ints(rng, (3, 4), np.float32)
    got = compiler.compile(src, pipeline=pipeline)(a, b)
    got = got if isinstance(got, tuple) else (got,)
    want = compiler.reference(src, a, b)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.astype(np.float32))
        assert not np.shares_memory(g, a) and not np.shares_memory(g, b)

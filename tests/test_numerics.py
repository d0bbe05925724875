"""Differential tests: compiled kernels against numpy in float64.

Random inputs are checked within about 4*K*eps*max|ref| (K the reduction length);
small-integer inputs, whose products and sums are exact in f32, bit-exactly.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import compiler
from compiler.runner import error_bound
from dialects.loom import broadcast_shapes, conv2d_output_hw
from mlirgen import binary, conv2d, matmul

DTYPES = [np.float32, np.float64]
# 1, primes, powers of two and odd sizes
dim = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 64])


def check(kernel_out, ref, k, dtype):
    bound = error_bound(k, np.dtype(dtype), float(np.max(np.abs(ref), initial=0.0)))
    err = float(np.max(np.abs(kernel_out - ref), initial=0.0))
    assert err <= bound, f"max error {err} > bound {bound}"


def small_ints(rng, shape, dtype):
    return rng.integers(-4, 5, size=shape).astype(dtype)


@given(m=dim, k=dim, n=dim, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_matmul_random(m, k, n, dtype, seed):
    src = matmul((m, k), (k, n), (m, n), dtype)
    kern = compiler.compile(src)
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(dtype) for s in [(m, k), (k, n)])
    out = kern(a, b)
    assert out.shape == (m, n) and out.dtype == dtype
    check(out, compiler.reference(src, a, b), k, dtype)


@given(bsz=st.integers(1, 3), m=dim, k=dim, n=dim, dtype=st.sampled_from(DTYPES))
def test_batched_matmul_exact(bsz, m, k, n, dtype):
    src = matmul((bsz, m, k), (bsz, k, n), (bsz, m, n), dtype)
    rng = np.random.default_rng(0)
    a, b = small_ints(rng, (bsz, m, k), dtype), small_ints(rng, (bsz, k, n), dtype)
    out = compiler.compile(src)(a, b)
    np.testing.assert_array_equal(out, np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype))


@st.composite
def conv_cases(draw):
    n, c, f = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 5))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    dilations = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    h = draw(st.integers(max(1, dilations[0] * (r - 1) + 1 - 2 * padding[0]), 12))
    w = draw(st.integers(max(1, dilations[1] * (s - 1) + 1 - 2 * padding[1]), 12))
    return n, c, h, w, f, r, s, strides, padding, dilations


@given(case=conv_cases(), dtype=st.sampled_from(DTYPES), exact=st.booleans())
def test_conv2d(case, dtype, exact):
    n, c, h, w, f, r, s, strides, padding, dilations = case
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    src = conv2d((n, c, h, w), (f, c, r, s), (n, f, ho, wo), strides, padding, dilations, dtype)
    rng = np.random.default_rng(1)
    make = small_ints if exact else (lambda g, sh, dt: g.standard_normal(sh).astype(dt))
    x, wt = make(rng, (n, c, h, w), dtype), make(rng, (f, c, r, s), dtype)
    out = compiler.compile(src)(x, wt)
    ref = compiler.reference(src, x, wt)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(dtype))
    else:
        check(out, ref, c * r * s, dtype)


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

    from compiler.runner import run_and_check

    file = Path(__file__).parent.parent / "examples" / f"{path}.mlir"
    report = run_and_check(file.read_text(), filename=str(file), repeat=1)
    assert report.ok, report.format()


def test_relu_keeps_nan_like_numpy():
    src = binary("add", [4], [4], (4,), np.float32, relu=True)
    x = np.array([np.nan, -1.0, 2.0, -0.0], dtype=np.float32)
    out = compiler.compile(src)(x, np.zeros(4, np.float32))
    np.testing.assert_array_equal(out, np.maximum(x, 0))

"""bf16 and int8 in the loom dialect (issue 28): contractions that sum bf16 products in f32
and i8/ui8 products exactly in i32, the casts, quantize and dequantize, and a quantized layer
as one function, each against the numpy reference (compiler/numpy_reference.py): int8
bit-exact against int64 (the i32 sums wrap as i32 wraps), bf16 within the f32 bound of the
float64 result of the bf16-rounded inputs, the casts and the quantization ops bit-exact
(they are defined by the f32 operations the kernel does). Over shapes no tile divides,
with hypothesis, on the naive and the default schedule, one and two threads. The reference's
own rules are checked against independent numpy formulas here too."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels import assert_within_bound, conv2d, matmul

import compiler
from compiler.measure.runner import run_and_check
from passes.support.diagnostics import LoomError

BF16 = ml_dtypes.bfloat16
LIMITS = {np.int8: (-128, 127), np.uint8: (0, 255)}
PIPELINES = [("naive", None), ("default", 1), ("default", 2)]
#: the accumulator of each input type
SUM = {BF16: np.float32, np.int8: np.int32, np.uint8: np.int32}


def _compile(src, pipeline):
    name, threads = pipeline
    return compiler.compile(src, pipeline=name, num_threads=threads)


def _ints(rng, shape, dtype, extremes=False):
    """Random values of an 8-bit type; `extremes`: only its least and greatest (the products
    that stress i32 and the s8 x s8 path)."""
    lo, hi = LIMITS[dtype]
    if extremes:
        return rng.choice(np.array([lo, hi]), size=shape).astype(dtype)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


def _exact(got, want, what=""):
    """Integer results equal the int64 reference; the kernel's dtype is the declared one."""
    assert np.asarray(want).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got).astype(np.int64), want, err_msg=what)


# --------------------------------------------------------------------------------------
# int8 contractions: exact


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("a_dtype, b_dtype", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8),
                                              (np.int8, np.uint8)])
@given(m=st.sampled_from([1, 2, 7, 13, 31]), k=st.sampled_from([1, 3, 17, 64]), n=st.sampled_from([1, 5, 16, 29]),
       extremes=st.booleans())
def test_int8_matmul_is_exact(pipeline, a_dtype, b_dtype, m, k, n, extremes):
    src = matmul((m, k), (k, n), (m, n), a_dtype, b_dtype, np.int32)
    kernel = _compile(src, pipeline)
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _ints(rng, (m, k), a_dtype, extremes), _ints(rng, (k, n), b_dtype, extremes)
    got = kernel(a, b)
    assert got.dtype == np.int32
    want = compiler.reference(src, a, b)
    np.testing.assert_array_equal(want, a.astype(np.int64) @ b.astype(np.int64))  # no wrap at these sizes
    _exact(got, want, f"{a_dtype.__name__} x {b_dtype.__name__}, {m}x{k}x{n}")


def test_int8_sums_wrap_as_i32_does():
    """255 * 255 * 33,100 passes 2^31: the i32 sum wraps, and the reference says so."""
    k = 33_100
    src = matmul((1, k), (k, 2), (1, 2), np.uint8, np.uint8, np.int32)
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 2), 255, np.uint8)
    exact = 255 * 255 * k
    assert exact > 2**31 - 1
    want = compiler.reference(src, a, b)
    assert want[0, 0] == exact - 2**32
    for pipeline in PIPELINES[:2]:
        _exact(_compile(src, pipeline)(a, b), want, str(pipeline))


def test_batched_int8_matmul():
    src = matmul((3, 5, 9), (3, 9, 6), (3, 5, 6), np.uint8, np.int8, np.int32)
    rng = np.random.default_rng(0)
    a, b = _ints(rng, (3, 5, 9), np.uint8), _ints(rng, (3, 9, 6), np.int8)
    for pipeline in PIPELINES:
        _exact(_compile(src, pipeline)(a, b), np.matmul(a.astype(np.int64), b.astype(np.int64)), str(pipeline))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("dtypes", [(np.uint8, np.int8), (np.int8, np.int8), (BF16, BF16)],
                         ids=["u8s8", "s8s8", "bf16"])
@given(c=st.integers(1, 5), f=st.integers(1, 6), hw=st.integers(3, 9), rs=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 1))
def test_conv2d_low_precision(layout, dtypes, c, f, hw, rs, stride, pad):
    """Unscheduled, through im2col (one thread) and as a direct convolution (two threads):
    int8 exact, bf16 within the f32 bound."""
    x_dtype, w_dtype = dtypes
    ho = (hw + 2 * pad - rs) // stride + 1
    shapes = ((1, c, hw, hw), (f, c, rs, rs), (1, f, ho, ho)) if layout == "nchw" else (
        (1, hw, hw, c), (rs, rs, c, f), (1, ho, ho, f))
    src = conv2d(*shapes, (stride, stride), (pad, pad), (1, 1), x_dtype, w_dtype, SUM[x_dtype], layout=layout)
    rng = np.random.default_rng(c + 10 * f + 100 * hw)
    if x_dtype is BF16:
        x, w = _bf16(rng, shapes[0]), _bf16(rng, shapes[1])
    else:
        x, w = _ints(rng, shapes[0], x_dtype), _ints(rng, shapes[1], w_dtype)
    want = compiler.reference(src, x, w)
    for pipeline in [PIPELINES[0], ("loom-default{skip=direct}", 1), ("loom-default{skip=im2col}", 2)]:
        got = _compile(src, pipeline)(x, w)
        assert got.dtype == SUM[x_dtype]
        if x_dtype is BF16:
            assert_within_bound(got, want, c * rs * rs, np.float32, str(pipeline))
        else:
            _exact(got, want, str(pipeline))


# --------------------------------------------------------------------------------------
# bf16 contractions: products in f32


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: f"{p[0]}-{p[1]}")
@given(m=st.sampled_from([1, 6, 13, 37]), k=st.sampled_from([1, 7, 64, 129]), n=st.sampled_from([1, 8, 17, 40]))
def test_bf16_matmul_within_the_f32_bound(pipeline, m, k, n):
    src = matmul((m, k), (k, n), (m, n), BF16, BF16, np.float32)
    rng = np.random.default_rng(m + k + n)
    a, b = _bf16(rng, (m, k)), _bf16(rng, (k, n))
    got = _compile(src, pipeline)(a, b)
    assert got.dtype == np.float32
    want = compiler.reference(src, a, b)
    np.testing.assert_array_equal(want, a.astype(np.float64) @ b.astype(np.float64))
    assert_within_bound(got, want, k, np.float32, f"{m}x{k}x{n}")


def test_bf16_matmul_of_small_integers_is_exact():
    """Integers up to 16 are exact in bf16, their products and sums in f32: any order."""
    src = matmul((9, 33), (33, 20), (9, 20), BF16, BF16, np.float32)
    rng = np.random.default_rng(3)
    a = rng.integers(-16, 17, (9, 33)).astype(BF16)
    b = rng.integers(-16, 17, (33, 20)).astype(BF16)
    for pipeline in PIPELINES:
        np.testing.assert_array_equal(_compile(src, pipeline)(a, b), a.astype(np.float64) @ b.astype(np.float64))


# --------------------------------------------------------------------------------------
# casts: bit-exact

CAST = """func.func @cast(%x: tensor<NxSRC>) -> tensor<NxDST> {
  %y = loom.cast %x : tensor<NxSRC> -> tensor<NxDST>
  func.return %y : tensor<NxDST>
}"""


def _cast_source(n, src, dst):
    return CAST.replace("N", str(n)).replace("SRC", src).replace("DST", dst)


def _f32_specials():
    """Values where rounding to bf16 is decided: ties to even both ways, one past a tie, the
    largest f32 (rounds to infinity), the smallest bf16 subnormal's neighbours, infinities,
    signed zeros, NaNs with payloads that the rounding would carry into the sign."""
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000,
                     0x00008000, 0x00018000, 0x00007FFF, 0x80008000, 0x7F800000, 0xFF800000, 0x00000000,
                     0x80000000, 0x7FC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001, 0x7FFF8000], np.uint32)
    return bits.view(np.float32)


@pytest.mark.parametrize("pipeline", PIPELINES[:2], ids=lambda p: p[0])
def test_f32_to_bf16_rounds_to_nearest_even(pipeline):
    rng = np.random.default_rng(0)
    x = np.concatenate([_f32_specials(), (rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 39, 2000))
                        .astype(np.float32)])
    src = _cast_source(x.size, "f32", "bf16")
    got = _compile(src, pipeline)(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(BF16)  # ml_dtypes: round to nearest even
    assert got.dtype == BF16
    nan = np.isnan(x)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()  # a NaN stays a NaN (quiet), whatever its payload
    np.testing.assert_array_equal(np.signbit(got[nan].astype(np.float32)), np.signbit(x[nan]))
    np.testing.assert_array_equal(compiler.reference(src, x)[~nan], want[~nan].astype(np.float64))


@pytest.mark.parametrize("pipeline", PIPELINES[:2], ids=lambda p: p[0])
def test_bf16_to_f32_and_i32_to_f32(pipeline):
    every = np.arange(2**16, dtype=np.uint16).view(BF16)  # every bf16, NaNs included
    got = _compile(_cast_source(every.size, "bf16", "f32"), pipeline)(every)
    np.testing.assert_array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(1)
    ints = np.concatenate([np.array([0, 1, -1, 2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**31 - 1, -(2**31)], np.int32),
                           rng.integers(-(2**31), 2**31, 1000).astype(np.int32)])
    src = _cast_source(ints.size, "i32", "f32")
    got = _compile(src, pipeline)(ints)
    np.testing.assert_array_equal(got, ints.astype(np.float32))  # round to nearest even past 2^24
    np.testing.assert_array_equal(compiler.reference(src, ints), ints.astype(np.float32))


# --------------------------------------------------------------------------------------
# quantize, dequantize: bit-exact

QUANT = """func.func @q(%x: tensor<MxNxf32>, %s: tensor<Pxf32>, %z: tensor<Pxi32>) -> tensor<MxNxQ> {
  %q = loom.quantize %x, %s, %z AXIS : (tensor<MxNxf32>, tensor<Pxf32>, tensor<Pxi32>) -> tensor<MxNxQ>
  func.return %q : tensor<MxNxQ>
}"""
DEQUANT = """func.func @d(%q: tensor<MxNxQ>, %s: tensor<Pxf32>, %z: tensor<Pxi32>) -> tensor<MxNxf32> {
  %y = loom.dequantize %q, %s, %z AXIS : (tensor<MxNxQ>, tensor<Pxf32>, tensor<Pxi32>) -> tensor<MxNxf32>
  func.return %y : tensor<MxNxf32>
}"""


def _quant_source(template, m, n, q, axis):
    per = {None: "", 0: f"{m}x", 1: f"{n}x"}[axis]
    return (template.replace("MxN", f"{m}x{n}").replace("tensor<Px", f"tensor<{per}").replace("Q>", f"{q}>")
            .replace("AXIS", "" if axis is None else f"{{axis = {axis} : i64}}"))


def _parameters(rng, m, n, axis, dtype):
    count = {None: (), 0: (m,), 1: (n,)}[axis]
    scale = (rng.uniform(0.01, 2.0, count) * 2.0 ** rng.integers(-6, 6, count)).astype(np.float32)
    lo, hi = LIMITS[dtype]
    return np.asarray(scale, np.float32), np.asarray(rng.integers(lo, hi + 1, count), np.int32)


def _broadcast(v, axis, ndim=2):
    return v if axis is None else v.reshape([-1 if d == axis else 1 for d in range(ndim)])


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("qtype", ["i8", "ui8"])
@given(m=st.sampled_from([1, 3, 8, 19]), n=st.sampled_from([1, 5, 16, 33]), axis=st.sampled_from([None, 0, 1]),
       seed=st.integers(0, 2**16))
def test_quantize_is_exact(pipeline, qtype, m, n, axis, seed):
    """Against an independent numpy formula for the finite values (round half to even of the
    f32 quotient, plus the zero point, clipped), and against the reference for all, with
    ties (x an odd multiple of scale / 2), values past the range, infinities and NaNs."""
    dtype = np.int8 if qtype == "i8" else np.uint8
    rng = np.random.default_rng(seed)
    scale, zero_point = _parameters(rng, m, n, axis, dtype)
    s = _broadcast(scale, axis)
    ties = ((rng.integers(-300, 300, (m, n)) * 2 + 1).astype(np.float32) * 0.5) * s
    x = np.where(rng.random((m, n)) < 0.5, ties, rng.standard_normal((m, n)).astype(np.float32) * 100 * s)
    x = x.astype(np.float32)
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    x.flat[: min(x.size, 5)] = specials[: min(x.size, 5)]
    src = _quant_source(QUANT, m, n, qtype, axis)
    got = _compile(src, pipeline)(x, scale, zero_point)
    assert got.dtype == dtype
    want = compiler.reference(src, x, scale, zero_point)
    _exact(got, want)
    lo, hi = LIMITS[dtype]
    finite = np.isfinite(x)
    independent = np.clip(np.rint(x / s) + _broadcast(zero_point, axis), lo, hi)
    np.testing.assert_array_equal(want[finite], independent[finite])
    nan = np.isnan(x)
    assert (want[nan] == lo).all()  # a NaN saturates to the least value
    np.testing.assert_array_equal(want[np.isposinf(x)], hi)


@pytest.mark.parametrize("pipeline", PIPELINES[:2], ids=lambda p: p[0])
@pytest.mark.parametrize("qtype", ["i8", "ui8", "i32"])
@given(m=st.sampled_from([1, 4, 11]), n=st.sampled_from([1, 7, 24]), axis=st.sampled_from([None, 0, 1]),
       seed=st.integers(0, 2**16))
def test_dequantize_is_exact(pipeline, qtype, m, n, axis, seed):
    dtype = {"i8": np.int8, "ui8": np.uint8, "i32": np.int32}[qtype]
    rng = np.random.default_rng(seed)
    scale, zero_point = _parameters(rng, m, n, axis, np.int8 if dtype is np.int32 else dtype)
    if dtype is np.int32:
        q = rng.integers(-(2**24), 2**24, (m, n)).astype(np.int32)
    else:
        q = _ints(rng, (m, n), dtype)
    src = _quant_source(DEQUANT, m, n, qtype, axis)
    got = _compile(src, pipeline)(q, scale, zero_point)
    want = compiler.reference(src, q, scale, zero_point)
    independent = (q.astype(np.int64) - _broadcast(zero_point, axis)).astype(np.float32) * _broadcast(scale, axis)
    np.testing.assert_array_equal(want, independent.astype(np.float64))
    np.testing.assert_array_equal(got, independent)


# --------------------------------------------------------------------------------------
# a quantized layer and a bf16 layer as one function each

LAYER = """func.func @layer(%a: tensor<MxKxui8>, %b: tensor<KxNxi8>, %bias: tensor<Nxi32>, %s: tensor<Nxf32>,
                  %z: tensor<Nxi32>, %so: tensor<f32>, %zo: tensor<i32>) -> tensor<MxNxui8> {
  %c = loom.matmul %a, %b : (tensor<MxKxui8>, tensor<KxNxi8>) -> tensor<MxNxi32>
  %cb = loom.add %c, %bias : (tensor<MxNxi32>, tensor<Nxi32>) -> tensor<MxNxi32>
  %y = loom.dequantize %cb, %s, %z {axis = 1 : i64} : (tensor<MxNxi32>, tensor<Nxf32>, tensor<Nxi32>) -> tensor<MxNxf32>
  %r = loom.relu %y : tensor<MxNxf32>
  %q = loom.quantize %r, %so, %zo : (tensor<MxNxf32>, tensor<f32>, tensor<i32>) -> tensor<MxNxui8>
  func.return %q : tensor<MxNxui8>
}"""

BF16_LAYER = """func.func @layer(%a: tensor<MxKxbf16>, %b: tensor<KxNxbf16>, %bias: tensor<Nxf32>) -> tensor<MxNxbf16> {
  %c = loom.matmul %a, %b : (tensor<MxKxbf16>, tensor<KxNxbf16>) -> tensor<MxNxf32>
  %cb = loom.add %c, %bias : (tensor<MxNxf32>, tensor<Nxf32>) -> tensor<MxNxf32>
  %r = loom.relu %cb : tensor<MxNxf32>
  %h = loom.cast %r : tensor<MxNxf32> -> tensor<MxNxbf16>
  func.return %h : tensor<MxNxbf16>
}"""


def _layer(template, m, k, n):
    return template.replace("M", str(m)).replace("K", str(k)).replace("N", str(n))


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: f"{p[0]}-{p[1]}")
def test_a_quantized_layer_is_exact(pipeline):
    """u8 x s8 -> i32, + an i32 bias, dequantized per channel, relu, requantized to u8: every
    step is exact or an f32 operation the reference does alike, so the whole is bit-exact."""
    m, k, n = 37, 70, 45
    src = _layer(LAYER, m, k, n)
    rng = np.random.default_rng(5)
    a, b = _ints(rng, (m, k), np.uint8), _ints(rng, (k, n), np.int8)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    s = (rng.uniform(0.5, 2, n) * 1e-4).astype(np.float32)
    z = rng.integers(-3, 4, n).astype(np.int32)
    so, zo = np.asarray(0.1, np.float32), np.asarray(3, np.int32)
    got = _compile(src, pipeline)(a, b, bias, s, z, so, zo)
    want = compiler.reference(src, a, b, bias, s, z, so, zo)
    assert ((want > 3) & (want < 255)).mean() > 0.4  # through the range, not only at its ends
    _exact(got, want)


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: f"{p[0]}-{p[1]}")
def test_a_bf16_layer_within_one_bf16_rounding(pipeline):
    """bf16 x bf16 summed in f32, + bias, relu, stored as bf16: within the f32 bound before the
    last rounding, so at most one bf16 step (2^-8 relative) from the reference's."""
    m, k, n = 29, 96, 50
    src = _layer(BF16_LAYER, m, k, n)
    rng = np.random.default_rng(6)
    a, b, bias = _bf16(rng, (m, k)), _bf16(rng, (k, n)), rng.standard_normal(n).astype(np.float32)
    got = _compile(src, pipeline)(a, b, bias).astype(np.float64)
    want = compiler.reference(src, a, b, bias)
    assert np.all(np.abs(got - want) <= 2.0**-8 * np.abs(want) + 1e-30)


# --------------------------------------------------------------------------------------
# arrays in and out


def test_a_wrong_dtype_says_how_to_convert():
    kernel = compiler.compile(matmul((2, 3), (3, 4), (2, 4), BF16, BF16, np.float32))
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"argument #0 \(%a\) has dtype float32, expected bfloat16 "
                                        r"\(convert with \.astype\(ml_dtypes\.bfloat16\)\)"):
        kernel(a, np.zeros((3, 4), BF16))
    kernel = compiler.compile(matmul((2, 3), (3, 4), (2, 4), np.uint8, np.int8, np.int32))
    with pytest.raises(TypeError, match=r"argument #1 \(%b\) has dtype uint8, expected int8 "
                                        r"\(convert with \.astype\(np\.int8\)\)"):
        kernel(np.zeros((2, 3), np.uint8), np.zeros((3, 4), np.uint8))


def test_an_unknown_element_type_is_refused_at_the_signature():
    src = """func.func @f(%a: memref<4xi16>) {
  func.return
}"""
    with pytest.raises(LoomError, match=r"unsupported element type i16 for %a \(f32, f64, bf16, i8, ui8 and i32 are\)"):
        compiler.compile(src)


# --------------------------------------------------------------------------------------
# every schedule pass on low-precision nests: the right answer or a clean refusal

SCHEDULES = ["default", "loom-vectorize{width=8}", "loom-vectorize{width=16}", "loom-hoist", "loom-fuse-epilogue",
             "loom-tile{sizes=8,16,8 op=matmul},loom-pack{operand=0 level=1 op=matmul}",
             "loom-pack{operand=1 level=0 op=matmul}",
             "loom-tile{sizes=8,16,8 op=matmul},loom-pack{operand=1 level=2 panel=8 op=matmul},loom-vectorize{width=8}",
             "loom-unroll-jam{factors=2,2}", "loom-parallelize{num-threads=2}",
             "loom-peel{sizes=6,16}", "loom-im2col", "loom-direct-conv", "loom-transpose-copy{width=4}"]
NHWC_U8 = conv2d((1, 9, 9, 5), (3, 3, 5, 7), (1, 9, 9, 7), (1, 1), (1, 1), (1, 1), np.uint8, np.int8, np.int32,
                 layout="nhwc")
TRANSPOSED_I8 = """func.func @t(%a: tensor<16x12xi8>) -> tensor<12x16xi8> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<16x12xi8> -> tensor<12x16xi8>
  %c = loom.contiguous %t : tensor<12x16xi8> -> tensor<12x16xi8>
  func.return %c : tensor<12x16xi8>
}"""


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_pass_takes_low_precision_nests(schedule):
    """The quantized layer, the bf16 layer, an NHWC u8 x s8 conv2d and a transposing i8 copy
    under each pass: exact (within one bf16 rounding for the bf16 layer), or a LoomError
    (a pass that finds nothing to do), never an internal error or a wrong answer."""
    rng = np.random.default_rng(7)
    cases = {
        "int8 layer": (_layer(LAYER, 13, 20, 17), lambda: [
            _ints(rng, (13, 20), np.uint8), _ints(rng, (20, 17), np.int8), rng.integers(-99, 99, 17).astype(np.int32),
            np.full(17, 1e-3, np.float32), np.zeros(17, np.int32), np.asarray(0.2, np.float32),
            np.asarray(1, np.int32)]),
        "bf16 layer": (_layer(BF16_LAYER, 13, 20, 17), lambda: [
            _bf16(rng, (13, 20)), _bf16(rng, (20, 17)), rng.standard_normal(17).astype(np.float32)]),
        "u8 conv": (NHWC_U8, lambda: [_ints(rng, (1, 9, 9, 5), np.uint8), _ints(rng, (3, 3, 5, 7), np.int8)]),
        "i8 copy": (TRANSPOSED_I8, lambda: [_ints(rng, (16, 12), np.int8)]),
    }
    compiled = 0
    for name, (src, make) in cases.items():
        try:
            kernel = compiler.compile(src, pipeline=schedule)
        except LoomError:
            continue
        compiled += 1
        args = make()
        got, want = kernel(*args), compiler.reference(src, *args)
        if name == "bf16 layer":
            assert np.all(np.abs(got.astype(np.float64) - want) <= 2.0**-8 * np.abs(want)), name
        else:
            _exact(got, want, name)
    assert compiled, f"{schedule} refused every case"


PACKED = ("loom-tile{sizes=16,32,24 op=matmul},loom-pack{operand=0 level=2 panel=4 op=matmul},"
          "loom-pack{operand=1 level=2 panel=8 op=matmul},loom-vectorize{width=8},loom-hoist")


@pytest.mark.parametrize("a_dtype, b_dtype, c, widened", [
    (BF16, BF16, np.float32, ("bf16 to f32", "bf16 to f32")), (np.uint8, np.int8, np.int32, ("ui8 to i32", "i8 to i32")),
    (np.int8, np.uint8, np.int32, ("i8 to i32", "ui8 to i32"))])
def test_packing_widens_low_precision_operands_once(a_dtype, b_dtype, c, widened):
    """loom-pack copies a bf16 or int8 operand into a buffer of the widened type (the copy
    widens each element once, the compute loops read it ready): at prime sizes no tile
    divides, exact on integers, within the f32 bound of K terms on bf16."""
    m, k, n = 37, 53, 41
    src = matmul((m, k), (k, n), (m, n), a_dtype, b_dtype, c)
    kernel = compiler.compile(src, pipeline=PACKED, remarks=True)
    packs = [str(r) for r in kernel.remarks if "loom-pack] packed" in str(r)]
    assert len(packs) == 2 and all(f"widened from {w} as it is copied" in r for r, w in zip(packs, widened)), packs
    rng = np.random.default_rng(3)
    if c is np.float32:
        a, b = _bf16(rng, (m, k)), _bf16(rng, (k, n))
        assert_within_bound(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), k, np.float32)
    else:
        a, b = _ints(rng, (m, k), a_dtype, extremes=True), _ints(rng, (k, n), b_dtype, extremes=True)
        _exact(kernel(a, b), a.astype(np.int64) @ b.astype(np.int64))


def test_loom_run_draws_inputs_of_each_kind():
    """loom-run's random inputs for the int8 example: the full 8-bit ranges, i32, f32 and 0-d
    arguments (which np.ascontiguousarray made 1-d), checked against the reference."""
    source = (Path(__file__).parent.parent / "examples" / "int8_layer.mlir").read_text()
    report = run_and_check(source, pipeline="naive", repeat=1, budget=0.01, rounds=1)
    assert report.shapes == ("(128x256 uint8, 256x64 int8, 64 int32, 64 float32, 64 int32, 0-d float32, "
                             "0-d int32)")
    assert report.max_err <= report.bound == 1  # quantize after float steps: one step from the float64 reference

"""@loom.jit on bfloat16, int8, uint8 and int32 arrays (issue 28), against numpy.

int8 and uint8 contractions equal `np.matmul(a, b, dtype=np.int32)` bit for bit (the
extremes -128, 127 and 255 included), bfloat16 ones are within the float32 bound of the
float64 product of the bfloat16 inputs, int32 epilogues (+ bias, * and - with Python
ints, relu) equal numpy's int32 arithmetic, wrapping included; `.astype` equals numpy's
astype bit for bit; loom.quantize and loom.dequantize equal their formulas in float32.
Every dtype or mix Loom does not compute is refused at the user's line, saying what to
convert. (The random programs of tests/test_jit_fuzz.py cover int8 views and epilogues too.)
"""

import inspect

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound

import compiler as loom
from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc

BF16 = ml_dtypes.bfloat16
LIMITS = {np.int8: (-128, 127), np.uint8: (0, 255)}
MIXES = [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8), (np.int8, np.uint8)]


def ints(rng, shape, dtype, extremes=False):
    """Random values of an 8-bit dtype; `extremes`: its least and greatest only."""
    lo, hi = LIMITS[dtype]
    values = rng.choice([lo, hi], size=shape) if extremes else rng.integers(lo, hi + 1, size=shape)
    return values.astype(dtype)


def bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def refused(fn, args, message, text, kind=loom.TraceError):
    """`fn(*args)` is refused with `message` (a regex), located at the line holding `text`."""
    with pytest.raises(kind, match=message) as e:
        fn(*args)
    assert isinstance(e.value, loom.TraceError)
    assert str(e.value).startswith(f"{__file__}:{line_of(fn.fn, text)}:"), str(e.value)


# --------------------------------------------------------------------------------------
# contractions: int8 exact, bf16 within the f32 bound


@pytest.mark.parametrize("a_dtype, b_dtype", MIXES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=4, deadline=None)
@given(m=st.sampled_from([1, 7, 33]), k=st.sampled_from([1, 5, 67]), n=st.sampled_from([1, 9, 40]),
       extremes=st.booleans(), seed=st.integers(0, 99))
def test_int8_matmul_is_numpys_with_an_int32_result(a_dtype, b_dtype, m, k, n, extremes, seed):
    @loom.jit
    def f(a, b):
        return a @ b

    rng = np.random.default_rng(seed)
    a, b = ints(rng, (m, k), a_dtype, extremes), ints(rng, (k, n), b_dtype, extremes)
    got = f(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.matmul(a, b, dtype=np.int32))
    assert f"-> tensor<{m}x{n}xi32>" in f.lower(a, b)


def test_int8_matmul_at_the_extremes_batched_and_through_views():
    """Every product at its extremes (-128 * -128, 255 * 127, 255 * -128) summed over a K
    no tile divides; 3-D @ 3-D, 3-D @ 2-D, a transposed view, np.matmul spelled with dtype=."""
    @loom.jit
    def f(a, b, c, wt):
        return a @ b, np.matmul(c, wt.T, dtype=np.int32), a[0] @ wt.T

    rng = np.random.default_rng(7)
    k = 131
    a = ints(rng, (2, 9, k), np.int8, extremes=True)
    b = ints(rng, (2, k, 6), np.int8, extremes=True)
    c = ints(rng, (3, 5, k), np.uint8, extremes=True)
    wt = ints(rng, (11, k), np.int8, extremes=True)
    a[0, 0], b[0, :, 0], c[0, 0], wt[0] = -128, -128, 255, -128  # one sum all -128 * -128, one all 255 * -128
    got = f(a, b, c, wt)
    want = (np.matmul(a, b, dtype=np.int32), np.matmul(c, wt.T, dtype=np.int32), np.matmul(a[0], wt.T, dtype=np.int32))
    for g, w in zip(got, want):
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, w)
    assert got[0][0, 0, 0] == k * 128 * 128 and got[1][0, 0, 0] == -k * 255 * 128


def test_int8_sums_wrap_as_numpys_int32():
    @loom.jit
    def f(a, b):
        return a @ b

    k = 33_100  # 255 * 255 * k passes 2**31
    a, b = np.full((1, k), 255, np.uint8), np.full((k, 2), 255, np.uint8)
    want = np.matmul(a, b, dtype=np.int32)
    assert want[0, 0] == 255 * 255 * k - 2**32
    np.testing.assert_array_equal(f(a, b), want)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("dtypes", [(np.uint8, np.int8), (np.int8, np.int8), (BF16, BF16)],
                         ids=["u8s8", "s8s8", "bf16"])
def test_conv2d_low_precision(layout, dtypes):
    """int8: the int64 sums, exactly; bfloat16: within the f32 bound of the float64 sums of
    the bfloat16 inputs; an int32 or float32 bias and relu after it."""
    @loom.jit
    def f(x, w, bias):
        return loom.relu(loom.conv2d(x, w, stride=2, padding=1, dilation=(1, 2), layout=layout) + bias)

    rng = np.random.default_rng(2)
    xs, ws = ((1, 3, 12, 11), (4, 3, 3, 2)) if layout == "nchw" else ((1, 12, 11, 3), (3, 2, 3, 4))
    params = ((2, 2), (1, 1), (1, 2))
    reference = conv2d_nchw if layout == "nchw" else conv2d_nhwc
    x_dtype, w_dtype = dtypes
    bias_shape = (4, 1, 1) if layout == "nchw" else (4,)
    if x_dtype is BF16:
        x, w, bias = bf16(rng, xs), bf16(rng, ws), rng.standard_normal(bias_shape).astype(np.float32)
        domain = np.float64
    else:
        x, w = ints(rng, xs, x_dtype, extremes=True), ints(rng, ws, w_dtype)
        bias, domain = rng.integers(-5000, 5000, bias_shape).astype(np.int32), np.int64
    got = f(x, w, bias)
    want = np.maximum(reference(x.astype(domain), w.astype(domain), *params) + bias, 0)
    if x_dtype is BF16:
        assert got.dtype == np.float32
        assert_within_bound(got, want, 3 * 3 * 2 + 1, np.float32)
    else:
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


@settings(max_examples=6, deadline=None)
@given(m=st.sampled_from([1, 6, 29]), k=st.sampled_from([1, 7, 130]), n=st.sampled_from([1, 17, 48]),
       seed=st.integers(0, 99))
def test_bf16_matmul_is_float32_within_the_bound(m, k, n, seed):
    @loom.jit
    def f(a, b):
        return a @ b

    rng = np.random.default_rng(seed)
    a, b = bf16(rng, (m, k)), bf16(rng, (k, n))
    got = f(a, b)
    assert got.dtype == np.float32 == np.matmul(a, b, dtype=np.float32).dtype
    assert_within_bound(got, a.astype(np.float64) @ b.astype(np.float64), k, np.float32, f"{m}x{k}x{n}")


# --------------------------------------------------------------------------------------
# int32 epilogues: numpy's int32 arithmetic


def test_int32_epilogue_is_numpys_int32_arithmetic():
    """+ an int32 bias, * and - with Python ints (int32 as numpy keeps them), unary -,
    relu: the same int32 values as numpy, wrapping past 2**31 included."""
    @loom.jit
    def f(a, b, bias):
        acc = np.matmul(a, b, dtype=np.int32) + bias
        return loom.relu(acc * 3 - 7), -acc + 1, 5 - acc, bias * 2

    rng = np.random.default_rng(3)
    a, b = ints(rng, (13, 40), np.uint8), ints(rng, (40, 21), np.int8)
    bias = rng.integers(-20_000, 20_000, 21).astype(np.int32)
    bias[:3] = [2**31 - 1, -(2**31), 2**30]  # * 2 wraps; acc + bias wraps
    acc = np.matmul(a, b, dtype=np.int32) + bias
    with np.errstate(over="ignore"):
        want = (np.maximum(acc * 3 - 7, 0), -acc + 1, 5 - acc, bias * 2)
    for g, w in zip(f(a, b, bias), want):
        assert g.dtype == np.int32 == w.dtype
        np.testing.assert_array_equal(g, w)


# --------------------------------------------------------------------------------------
# casts: numpy's astype, bit for bit


def f32_specials():
    """Where rounding to bf16 decides: ties to even both ways, one past a tie, the largest
    f32 (to infinity), bf16 subnormals and their neighbours, infinities, signed zeros."""
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000,
                     0x00008000, 0x00018000, 0x00007FFF, 0x80008000, 0x7F800000, 0xFF800000, 0x00000000,
                     0x80000000], np.uint32)
    return bits.view(np.float32)


def test_astype_to_bf16_rounds_as_numpy():
    @loom.jit
    def f(x):
        return x.astype(ml_dtypes.bfloat16), (x * 2.0).astype("bfloat16")

    rng = np.random.default_rng(4)
    x = np.concatenate([f32_specials(), np.float32([np.nan, -np.nan]),
                        (rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 38, 3000)).astype(np.float32)])
    got, doubled = f(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want, want2 = x.astype(BF16), (x * np.float32(2)).astype(BF16)
    finite = ~np.isnan(x)
    for g, w in ((got, want), (doubled, want2)):
        assert g.dtype == BF16
        np.testing.assert_array_equal(g.view(np.uint16)[finite], w.view(np.uint16)[finite])
        assert np.isnan(g[~finite].astype(np.float32)).all()


def test_astype_to_float32_of_bf16_and_int32():
    """Every bf16 (NaNs included) widens bit for bit; int32 rounds to nearest even past 2**24."""
    @loom.jit
    def f(h, i):
        return h.astype(np.float32), i.astype(np.float32), i.astype(np.int32)

    every = np.arange(2**16, dtype=np.uint16).view(BF16)
    rng = np.random.default_rng(5)
    i = np.concatenate([np.int32([0, -1, 2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**31 - 1, -(2**31)]),
                        rng.integers(-(2**31), 2**31, 1000).astype(np.int32)])
    widened, converted, same = f(every, i)
    np.testing.assert_array_equal(widened.view(np.uint32), every.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(converted.view(np.uint32), i.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(same, i)  # astype to its own dtype: the values (a fresh array)
    assert not np.shares_memory(same, i)


def test_a_bf16_layer():
    """bf16 in, matmul into f32, f32 bias and relu, bf16 out: within one bf16 step of the
    float64 result (rounded to bf16 once)."""
    @loom.jit
    def layer(x, w, b):
        return loom.relu(x @ w + b).astype(BF16)

    rng = np.random.default_rng(6)
    x, w, b = bf16(rng, (31, 96)), bf16(rng, (96, 44)), rng.standard_normal(44).astype(np.float32)
    got = layer(x, w, b)
    assert got.dtype == BF16
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0)
    assert np.all(np.abs(got.astype(np.float64) - want) <= 2.0**-8 * np.abs(want) + 1e-6)


# --------------------------------------------------------------------------------------
# quantize and dequantize: their formulas


def per(v, axis, ndim):
    """A per-channel parameter shaped to broadcast along `axis` (as is for per tensor)."""
    return v if axis is None else v.reshape([-1 if d == axis % ndim else 1 for d in range(ndim)])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("axis", [None, 0, 1, -2])  # -2: the first axis counted from the end
def test_quantize_and_dequantize_are_their_formulas(dtype, axis):
    """q = clip(rint(x / scale) + zero_point) with the quotient in float32 (ties to even, a
    NaN the least value), and float32(q - zero_point) * scale, bit for bit."""
    @loom.jit
    def f(x, scale, zero_point):
        q = loom.quantize(x, scale, zero_point, dtype=dtype, axis=axis)
        return q, loom.dequantize(q, scale, zero_point, axis=axis)

    rng = np.random.default_rng(8)
    m, n = 9, 14
    count = () if axis is None else ((m, n)[axis],)
    scale = np.asarray(rng.uniform(0.01, 2.0, count) * 2.0 ** rng.integers(-6, 6, count), np.float32)
    lo, hi = LIMITS[dtype]
    zero_point = np.asarray(rng.integers(lo, hi + 1, count), np.int32)
    s, z = per(scale, axis, 2), per(zero_point, axis, 2)
    ties = ((rng.integers(-300, 300, (m, n)) * 2 + 1).astype(np.float32) * np.float32(0.5)) * s
    x = np.where(rng.random((m, n)) < 0.5, ties, rng.standard_normal((m, n)).astype(np.float32) * 100 * s)
    x = x.astype(np.float32)
    x.flat[:5] = [np.inf, -np.inf, np.nan, 0.0, -0.0]
    q, y = f(x, scale, zero_point)
    assert q.dtype == dtype and y.dtype == np.float32
    with np.errstate(invalid="ignore"):
        want = np.clip(np.rint(x / s) + z, lo, hi)
    want[np.isnan(x)] = lo
    np.testing.assert_array_equal(q, want.astype(dtype))
    np.testing.assert_array_equal(y, (q.astype(np.int64) - z).astype(np.float32) * s)


def test_a_quantized_layer_is_exact():
    """u8 x s8 -> i32, + an i32 bias, dequantized per channel, relu, requantized to u8 per
    tensor: each step a float32 operation numpy does alike, so bit for bit."""
    @loom.jit
    def layer(x, w, bias, s, z, so, zo):
        acc = x @ w + bias
        return loom.quantize(loom.relu(loom.dequantize(acc, s, z, axis=1)), so, zo)  # uint8: the default dtype

    rng = np.random.default_rng(9)
    m, k, n = 23, 70, 37
    x, w = ints(rng, (m, k), np.uint8), ints(rng, (k, n), np.int8)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    s = (rng.uniform(0.5, 2, n) * 1e-4).astype(np.float32)
    z = rng.integers(-3, 4, n).astype(np.int32)
    so, zo = np.asarray(0.1, np.float32), np.asarray(3, np.int32)
    got = layer(x, w, bias, s, z, so, zo)
    y = np.maximum((np.matmul(x, w, dtype=np.int32) + bias - z).astype(np.float32) * s, np.float32(0))
    want = np.clip(np.rint(y / so) + zo, 0, 255).astype(np.uint8)
    assert ((want > 3) & (want < 255)).mean() > 0.4  # through the range, not only at its ends
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_quantize_and_dequantize_outside_a_trace_say_so_like_relu():
    x = np.ones(3, np.float32)
    for call in (lambda: loom.quantize(x, np.float32(1), np.int32(0)),
                 lambda: loom.dequantize(x.astype(np.int8), np.float32(1), np.int32(0)), lambda: loom.relu(x)):
        with pytest.raises(TypeError, match=r"works on the arrays of a @loom.jit function while it is traced; got "
                                            r"ndarray outside one \(decorate the function with @loom.jit\)"):
            call()


# --------------------------------------------------------------------------------------
# refusals: located, saying what to convert


def test_contractions_loom_lacks_are_refused():
    a32, h = np.ones((2, 3), np.float32), np.ones((3, 2), BF16)
    i8, i32 = np.ones((3, 2), np.int8), np.ones((2, 3), np.int32)

    @loom.jit
    def mixed(a, b):
        return a @ b

    refused(mixed, (a32, h), r"a @ b of float32 and bfloat16 arrays: both operands must have one dtype \(numpy "
                             r"would compute in float32\); convert the bfloat16 one with \.astype\(np\.float32\)$",
            "return a @ b", TypeError)
    refused(mixed, (a32, i8), r"a @ b of float32 and int8 arrays: .* \(numpy would compute in float32\); convert "
                              r"the int8 one with \.astype\(np\.float32\) before the call \(inside @loom\.jit "
                              r"\.astype converts float32 -> bfloat16, bfloat16 -> float32, int32 -> float32\)",
            "return a @ b", TypeError)
    refused(mixed, (i32, i8), r"a @ b of an int32 array: Loom's matmul and conv2d take float32, float64, bfloat16 "
                              r"\(summed in float32\), int8 \(summed in int32\) and uint8 \(summed in int32\) arrays "
                              r"\(int8 and uint8 mix\); convert it with \.astype\(np\.float32\)$",
            "return a @ b", TypeError)

    @loom.jit
    def conv(x, w):
        return loom.conv2d(x, w)

    refused(conv, (np.ones((1, 2, 4, 4), BF16), np.ones((1, 2, 3, 3), np.float32)),
            r"loom.conv2d of bfloat16 and float32 arrays: .* convert the bfloat16 one with \.astype\(np\.float32\)$",
            "return loom.conv2d", TypeError)

    @loom.jit
    def wide(a, b):
        return np.matmul(a, b, dtype=np.float64)

    refused(wide, (a32, a32.T), r"np.matmul\(\.\.\., dtype=float64\): Loom computes this matmul in float32 "
                                r"\(dtype=np\.float32, or leave dtype= out\)", "return np.matmul", TypeError)


def test_elementwise_on_narrow_types_is_refused_saying_to_widen():
    h, q = np.ones((2, 2), BF16), np.ones((2, 2), np.uint8)
    cases = [(lambda x: x + x, h, "a \\+ b of a bfloat16 array", r"widen it first with \.astype\(np\.float32\)$"),
             (lambda x: loom.relu(x), q, "loom.relu of a uint8 array",
              r"widen it first with \.astype\(np\.int32\) before the call \(inside @loom\.jit \.astype converts "),
             (lambda x: 2 * x, q, "a \\* b of a uint8 array", r"widen it first with \.astype\(np\.int32\)"),
             (lambda x: -x, h, "-x of a bfloat16 array", r"widen it first")]
    for body, arg, what, hint in cases:
        f = loom.jit(body)
        with pytest.raises(TypeError, match=rf"{what}: Loom computes \+, -, \* and loom.relu in float32, float64 and "
                                            rf"int32; {hint}") as e:
            f(arg)
        assert str(e.value).startswith(f"{__file__}:{body.__code__.co_firstlineno}:")


def test_numbers_beside_int32_arrays_follow_numpy():
    i = np.arange(6, dtype=np.int32)

    @loom.jit
    def floats(x, s):
        return x * 3 + (x * 1.5 if s is None else x * s)

    refused(floats, (i, None), r"a \* b of an int32 array and a number of type float: numpy computes it in float64, "
                               r"which Loom does not; convert the array first with \.astype\(np\.float32\)$",
            "return x * 3", TypeError)
    refused(floats, (i, 2.0), r"a \* b of an int32 array and the float argument s: numpy computes it in float64",
            "return x * 3", TypeError)

    @loom.jit
    def wider(x):
        return x + np.int64(1)

    refused(wider, (i,), r"a \+ b of an int32 array and a number of type int64: numpy computes it in int64, which "
                         r"Loom does not; use a Python int", "return x + np.int64", TypeError)

    @loom.jit
    def overflow(x):
        return x + 2**31

    refused(overflow, (i,), r"a \+ b: the Python integer 2147483648 is out of bounds for int32 \(numpy raises "
                            r"OverflowError\)", "return x + 2**31")

    @loom.jit
    def minus(x, b):  # b checked as given, not negated: numpy refuses x - 2**31 and wraps x - -2**31
        return x - b

    refused(minus, (i, 2**31), r"a - b: the Python integer 2147483648 is out of bounds for int32", "return x - b")
    for b in (-(2**31), 2**31 - 1):
        got, want = minus(i, b), i - b
        assert got.dtype == np.int32 == want.dtype
        np.testing.assert_array_equal(got, want)


def test_astype_loom_lacks_is_refused():
    x = np.ones(4, np.float32)
    for body, message in [
        (lambda x: x.astype(np.float64), (r"x\.astype\(float64\) of a float32 array: inside @loom\.jit \.astype "
                                          r"converts float32 -> bfloat16, bfloat16 -> float32, int32 -> float32 "
                                          r"\(convert an argument before the call\)")),
        (lambda x: x.astype(np.int8), r"x\.astype\(int8\) of a float32 array"),
        (lambda x: x.astype(BF16, copy=False), r"x\.astype takes the dtype alone inside @loom\.jit"),
        (lambda x: x.astype("nothing"), r"x\.astype: 'nothing' is not a dtype"),
    ]:
        with pytest.raises(TypeError, match=message) as e:
            loom.jit(body)(x)
        assert isinstance(e.value, loom.TraceError) and str(e.value).startswith(__file__)


def test_quantization_parameters_are_checked():
    x, s, z = np.ones((3, 4), np.float32), np.ones(4, np.float32), np.zeros(4, np.int32)

    @loom.jit
    def q(x, s, z, dtype, axis):  # dtype a string: a constant of the trace
        return loom.quantize(x, s, z, dtype=dtype, axis=axis)

    line = "return loom.quantize"
    refused(q, (x.astype(np.float64), s, z, "int8", 1),
            r"loom.quantize of a float64 array: it quantizes float32 arrays; convert it with \.astype\(np\.float32\) "
            r"before the call", line, TypeError)
    refused(q, (x, s, z, "int32", 1), r"loom.quantize: dtype must be np.int8 or np.uint8, got int32", line, TypeError)
    refused(q, (x, s, z, "int8", None), r"loom.quantize: the scale has shape \(4,\), expected \(\) \(0-d per tensor\)",
            line)
    refused(q, (x, s, z, "int8", 0), r"the scale has shape \(4,\), expected \(3,\) \(per channel along axis 0\)", line)
    refused(q, (x, s, z, "int8", 2), r"loom.quantize: axis must be None \(per tensor\) or an axis of the input of "
                                      r"shape \(3, 4\), got 2", line)
    for axis, shown in [(-3, "-3"), (True, "True"), (1.0, "<traced float argument axis>")]:  # -3: past the first
        refused(q, (x, s, z, "int8", axis), rf"loom.quantize: axis must be None .* got {shown}$", line)
    refused(q, (x, s.astype(np.float64), z, "int8", 1), r"the scale must be a float32 array, got a float64 array",
            line, TypeError)
    refused(q, (x, s, z.astype(np.int8), "int8", -1), r"the zero_point must be an int32 array, got an int8 array",
            line, TypeError)
    refused(q, (x, 0.5, z, "int8", 1), r"loom.quantize: the scale is a float32 array passed as an argument \(per "
                                        r"channel along axis 1\), got the float argument s", line, TypeError)

    @loom.jit
    def d(x, s, z):
        return loom.dequantize(x, s, z)

    refused(d, (x, np.ones((), np.float32), np.zeros((), np.int32)),
            r"loom.dequantize of a float32 array: it takes int8, uint8 and int32 arrays", "return loom.dequantize",
            TypeError)

"""loom.max_pool2d, loom.avg_pool2d and loom.mean: the ops, their lowering (one guard-free
nest per run of windows that overhang the border alike, the channels vectorized) and the
front end's `loom.max_pool2d` / `loom.avg_pool2d` / `loom.mean`, against the float64 numpy
reference."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler as loom
from dialects.loom import conv2d_output_hw
from kernels import assert_within_bound

sizes = st.sampled_from([1, 2, 3, 5, 7, 8, 13])


def _pool_source(shape, window, strides, padding, layout, ty, op="max_pool2d", extra=""):
    n, a, b, c = shape
    h, w = (a, b) if layout == "nhwc" else (b, c)
    ho, wo = conv2d_output_hw(h, w, *window, strides, padding, (1, 1))
    out = (n, ho, wo, c) if layout == "nhwc" else (n, a, ho, wo)
    xt, yt = (f"tensor<{'x'.join(map(str, s))}x{ty}>" for s in (shape, out))
    attrs = (f"window = array<i64: {window[0]}, {window[1]}>, strides = array<i64: {strides[0]}, {strides[1]}>, "
             f'padding = array<i64: {padding[0]}, {padding[1]}>, layout = "{layout}"{extra}')
    return f"""func.func @pool(%x: {xt}) -> {yt} {{
  %y = loom.{op} %x {{{attrs}}} : {xt} -> {yt}
  func.return %y : {yt}
}}"""


@settings(max_examples=30, deadline=None)
@given(n=st.sampled_from([1, 2]), h=sizes, w=sizes, c=st.sampled_from([1, 3, 16, 17, 33]),
       r=st.integers(1, 4), s=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       layout=st.sampled_from(["nhwc", "nchw"]), ty=st.sampled_from(["f32", "f64", "i32"]),
       data=st.data())
def test_max_pool2d_is_exactly_the_reference(n, h, w, c, r, s, sh, sw, layout, ty, data):
    """A max is exact: every dtype, every window, stride and padding (at most half the
    window), shapes no vector width divides, against the float64 (int64) reference."""
    ph, pw = data.draw(st.integers(0, r // 2)), data.draw(st.integers(0, s // 2))
    if (h + 2 * ph - r) < 0 or (w + 2 * pw - s) < 0:
        return
    shape = (n, h, w, c) if layout == "nhwc" else (n, c, h, w)
    src = _pool_source(shape, (r, s), (sh, sw), (ph, pw), layout, ty)
    kern = loom.compile(src)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[ty]
    x = (rng.integers(-2**31, 2**31 - 1, shape) if ty == "i32" else rng.standard_normal(shape)).astype(dtype)
    np.testing.assert_array_equal(kern(x), loom.reference(src, x).astype(dtype))


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([1, 2]), h=sizes, w=sizes, c=st.sampled_from([1, 3, 16, 17]),
       r=st.integers(1, 4), s=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       layout=st.sampled_from(["nhwc", "nchw"]), ty=st.sampled_from(["f32", "f64"]), counts=st.booleans(),
       data=st.data())
def test_avg_pool2d_is_within_the_bound_of_the_reference(n, h, w, c, r, s, sh, sw, layout, ty, counts, data):
    """The window's sum over its area, or over its taps inside the input: each run of
    windows scaled by its own count."""
    ph, pw = data.draw(st.integers(0, r // 2)), data.draw(st.integers(0, s // 2))
    if (h + 2 * ph - r) < 0 or (w + 2 * pw - s) < 0:
        return
    shape = (n, h, w, c) if layout == "nhwc" else (n, c, h, w)
    src = _pool_source(shape, (r, s), (sh, sw), (ph, pw), layout, ty, "avg_pool2d",
                       "" if counts else ", count_include_pad = false")
    dtype = np.float32 if ty == "f32" else np.float64
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).standard_normal(shape).astype(dtype)
    assert_within_bound(loom.compile(src)(x), loom.reference(src, x), r * s + 1, dtype)


def test_avg_pool2d_small_integers_are_exact():
    """Integer sums and a power-of-two count: exact in f32, both ways of counting."""
    for counts, want in ((True, [[0.25, 0.5], [0.5, 1.0]]), (False, [[1.0, 1.0], [1.0, 1.0]])):
        src = _pool_source((1, 1, 3, 3), (2, 2), (2, 2), (1, 1), "nchw", "f32", "avg_pool2d",
                           "" if counts else ", count_include_pad = false")
        y = loom.compile(src)(np.ones((1, 1, 3, 3), np.float32))
        np.testing.assert_array_equal(y[0, 0], np.array(want, np.float32))


def test_max_pool2d_passes_a_nan_and_never_picks_the_border():
    src = _pool_source((1, 4, 4, 16), (3, 3), (2, 2), (1, 1), "nhwc", "f32")
    kern = loom.compile(src)
    x = np.full((1, 4, 4, 16), -5.0, np.float32)  # all below zero: a zero border would win
    x[0, 0, 0, 3] = np.nan
    y = kern(x)
    assert np.isnan(y[0, 0, 0, 3]) and np.isnan(y).sum() == 1
    assert (y[~np.isnan(y)] == -5.0).all()


def test_max_pool2d_vectorizes_the_channels_with_no_guard():
    kern = loom.compile(_pool_source((1, 112, 112, 64), (3, 3), (2, 2), (1, 1), "nhwc", "f32"), remarks=True,
                        stages=True)
    pools = [r for r in kern.remarks if "[loom-vectorize]" in r and re.search(r"loop %c by \d+ ", r)]
    assert len(pools) == 4, kern.remarks  # the corner, the top row, the left column, the inside
    assert "affine.if" not in str(kern.stages["convert-loom-to-affine"])


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(sizes, min_size=1, max_size=4), ty=st.sampled_from(["f32", "f64"]), data=st.data())
def test_mean_is_within_the_bound_of_the_reference(shape, ty, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    out = [1 if d in axes else n for d, n in enumerate(shape)]
    xt, mt = (f"tensor<{'x'.join(map(str, s))}x{ty}>" for s in (shape, out))
    src = f"""func.func @m(%x: {xt}) -> {mt} {{
  %m = loom.mean %x {{axes = array<i64: {', '.join(map(str, axes))}>}} : {xt} -> {mt}
  func.return %m : {mt}
}}"""
    dtype = np.float32 if ty == "f32" else np.float64
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).standard_normal(shape).astype(dtype)
    count = int(np.prod([shape[a] for a in axes]))
    assert_within_bound(loom.compile(src)(x), loom.reference(src, x), count + 1, dtype)


def test_the_front_end_pools_and_averages_like_numpy():
    @loom.jit
    def head(x):
        return loom.mean(loom.max_pool2d(loom.relu(x), 3, stride=2, padding=1, layout="nhwc"), (1, 2))

    x = np.random.default_rng(0).standard_normal((2, 15, 12, 24)).astype(np.float32)
    p = np.full((2, 17, 14, 24), -np.inf)
    p[:, 1:16, 1:13] = np.maximum(x, 0)
    pooled = np.stack([np.stack([p[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(1, 2)) for j in range(6)], 1)
                       for i in range(8)], 1)
    assert_within_bound(head(x), pooled.mean(axis=(1, 2)), 48, np.float32)
    assert head(x).shape == (2, 24)
    keep = loom.jit(lambda x: loom.mean(x, -1, keepdims=True))(x)
    assert keep.shape == (2, 15, 12, 1)
    average = loom.jit(lambda x: loom.avg_pool2d(x, 2, stride=1, layout="nhwc", count_include_pad=False))(x)
    want = (x[:, :-1, :-1] + x[:, 1:, :-1] + x[:, :-1, 1:] + x[:, 1:, 1:]) / 4
    assert_within_bound(average, want.astype(np.float64), 5, np.float32)


@pytest.mark.parametrize("call, message", [
    (lambda x: loom.max_pool2d(x, 3, padding=2), "padding (2, 2) is more than half the window (3, 3)"),
    (lambda x: loom.max_pool2d(x, 0), "window must be an integer or a pair of integers >= 1"),
    (lambda x: loom.max_pool2d(x, 2, layout="hwc"), "layout must be 'nchw' or 'nhwc'"),
    (lambda x: loom.max_pool2d(x, 9), "the 9x9 window does not fit the padded 8x8 input"),
    (lambda x: loom.mean(x, (1, 1)), "axis must be an axis or a tuple of distinct axes"),
    (lambda x: loom.mean(x, 4), "axis must be an axis or a tuple of distinct axes"),
    (lambda x: loom.avg_pool2d(x, 2, count_include_pad=1), "count_include_pad must be True or False"),
    (lambda x: loom.avg_pool2d(x, 2), "loom.avg_pool2d of an int32 array"),
])
def test_front_end_errors_name_the_problem(call, message):
    f = loom.jit(call)
    dtype = np.int32 if "int32" in message else np.float32
    with pytest.raises(loom.TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        f(np.ones((1, 3, 8, 8), dtype))

"""A conv2d's NHWC filter in panels of NR output channels (P x R x S x C x NR,
`loom.pack_filter`): the direct convolution batched over the panels, each read in place.
A bf16 or int8 filter comes in panels of groups (P x R x S x C/G x NR x G), read in
place by the dot-product instructions, or copied with its groups undone first on a
target without them.

The panels are W's elements in another order, so a conv with them computes what it
computes with the HWCF filter: bit for bit the same result (the same products summed
in the same order), exactly numpy's on small integers (int8: on any bytes), on any
thread count, with the epilogue fused; the cost model's choice of NR (`filter_panel`)
on ResNet's layers.
"""

from __future__ import annotations

import numpy as np
import pytest
import ml_dtypes
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, small_ints
from targets import planning_for

import compiler as loom
from compiler.numpy_reference import conv2d_nhwc, unpack_filter
from passes.analysis.cost_model import filter_panel
from passes.support.target import Target, host

ZNVER4 = Target("znver4", 32768, 1 << 20, 32 << 20, 512, 32, True)
HOST = host()
#: the host as it is (its dot-product instructions, where it has them), and without them
HOST_TARGETS = ["", "bf16_dot=0,int8_dot=0"]
#: (input, filter) dtypes of a filter in groups
GROUPED = [(ml_dtypes.bfloat16, ml_dtypes.bfloat16), (np.uint8, np.int8), (np.int8, np.uint8), (np.int8, np.int8)]


def _conv(stride, padding, dilation):
    def f(x, w):
        return loom.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, layout="nhwc")
    return f


@settings(deadline=None, max_examples=30)
@given(n=st.integers(1, 2), c=st.sampled_from([1, 3, 8, 17]), panels=st.integers(1, 3),
       nr=st.sampled_from([1, 3, 8, 16, 32]), window=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.integers(1, 2), padding=st.integers(0, 1), dilation=st.integers(1, 2),
       threads=st.sampled_from([1, 2, 3]), data=st.data())
def test_panels_compute_what_the_hwcf_filter_does(n, c, panels, nr, window, stride, padding, dilation, threads, data):
    """Shapes with 1, primes and sizes no tile divides, panels of any width (whole vectors
    or not): the same bits as the HWCF filter's kernel, and numpy's on small integers."""
    r, s = window
    h = data.draw(st.integers(max(1, dilation * (r - 1) + 1 - 2 * padding), 9))
    w_ = data.draw(st.integers(max(1, dilation * (s - 1) + 1 - 2 * padding), 9))
    rng = np.random.default_rng(n * 1000 + c * 10 + nr)
    x = small_ints(rng, (n, h, w_, c), np.float32)
    w = small_ints(rng, (r, s, c, panels * nr), np.float32)
    f = _conv(stride, padding, dilation)
    packed = loom.jit(f, num_threads=threads)(x, loom.pack_filter(w, nr))
    np.testing.assert_array_equal(packed, loom.jit(f, num_threads=threads)(x, w))
    reference = conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), (stride, stride), (padding, padding),
                            (dilation, dilation))
    np.testing.assert_array_equal(packed, reference)


def test_f64_within_the_bound():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 9, 9, 24)), rng.standard_normal((3, 3, 24, 64))
    out = loom.jit(_conv(1, 1, 1))(x, loom.pack_filter(w, 16))
    assert out.dtype == np.float64
    assert_within_bound(out, conv2d_nhwc(x, w, (1, 1), (1, 1), (1, 1)), 9 * 24, np.float64)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_epilogue_fuses_into_the_panels_stores(threads):
    """bias, residual and relu in the matmul's stores, each into its panel's columns of Y
    (a view P x rows x NR, NR apart): the same bits as with the HWCF filter."""
    rng = np.random.default_rng(threads)
    x, w = small_ints(rng, (1, 7, 7, 32), np.float32), small_ints(rng, (3, 3, 32, 128), np.float32)
    b, z = small_ints(rng, (128,), np.float32), small_ints(rng, (1, 7, 7, 128), np.float32)

    def f(x, w, b, z):
        return loom.relu(loom.conv2d(x, w, padding=1, layout="nhwc") + b + z)

    jit = loom.jit(f, num_threads=threads, remarks=True)
    out = jit(x, loom.pack_filter(w, 32), b, z)
    fused = [r for r in jit.kernel(x, loom.pack_filter(w, 32), b, z).remarks if "[loom-fuse-epilogue] fused" in r]
    assert fused and "into the 'matmul' nest" in fused[0], fused
    np.testing.assert_array_equal(out, loom.jit(f, num_threads=threads)(x, w, b, z))


def _operand(rng, shape, dtype):
    """Small integers for bf16 (exact products and sums in f32), any bytes for int8."""
    if dtype == ml_dtypes.bfloat16:
        return small_ints(rng, shape, np.float32).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


@settings(deadline=None, max_examples=40)
@given(types=st.sampled_from(GROUPED), n=st.integers(1, 2), groups=st.integers(1, 5), panels=st.integers(1, 3),
       nr=st.sampled_from([1, 3, 16, 32, 48]), window=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.integers(1, 2), padding=st.integers(0, 1), dilation=st.integers(1, 2),
       threads=st.sampled_from([1, 2, 3]), spec=st.sampled_from(HOST_TARGETS), data=st.data())
def test_groups_compute_what_the_hwcf_filter_does(types, n, groups, panels, nr, window, stride, padding, dilation,
                                                  threads, spec, data):
    """bf16, u8 x s8, s8 x u8 and s8 x s8 filters in panels of groups, on the host's
    dot-product instructions (B read in place) or without them (the groups undone by a
    copy), rows no register tile divides (peeled copies): exactly numpy's result."""
    xt, wt = types
    g = 2 if wt == ml_dtypes.bfloat16 else 4
    r, s = window
    h = data.draw(st.integers(max(1, dilation * (r - 1) + 1 - 2 * padding), 9))
    w_ = data.draw(st.integers(max(1, dilation * (s - 1) + 1 - 2 * padding), 9))
    c = groups * g
    rng = np.random.default_rng(n * 1000 + c * 10 + nr)
    x, w = _operand(rng, (n, h, w_, c), xt), _operand(rng, (r, s, c, panels * nr), wt)
    f = _conv(stride, padding, dilation)
    with planning_for(spec):
        packed = loom.jit(f, num_threads=threads)(x, loom.pack_filter(w, nr))
    reference = conv2d_nhwc(x.astype(np.int64 if g == 4 else np.float64), w.astype(np.int64 if g == 4 else np.float64),
                            (stride, stride), (padding, padding), (dilation, dilation))
    np.testing.assert_array_equal(packed, reference.astype(packed.dtype))


def _remarks(spec: str, x, w) -> str:
    jit = loom.jit(_conv(1, 1, 1), remarks=True)
    with planning_for(spec):
        return "\n".join(jit.kernel(x, w).remarks)


@pytest.mark.skipif(not HOST.bf16_dot, reason="the host has no AVX512-BF16")
def test_bf16_groups_run_on_vdpbf16ps_reading_both_operands_in_place():
    """The filter's panel is B as it is and the windows are A: nothing packed, and the
    same bits as the HWCF filter's (which packs B into the same groups per call)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 7, 7, 64)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((3, 3, 64, 64)).astype(ml_dtypes.bfloat16)
    text = _remarks("", x, loom.pack_filter(w, 32))
    assert "no packing: B is a panel of the filter, packed ahead of time" in text, text
    assert "[loom-dot]" in text and "vdpbf16ps" in text and "[loom-pack]" not in text, text
    assert "groups undone" not in text, text
    np.testing.assert_array_equal(loom.jit(_conv(1, 1, 1))(x, loom.pack_filter(w, 32)),
                                  loom.jit(_conv(1, 1, 1))(x, w))


def test_groups_are_undone_where_the_target_lacks_the_instruction():
    """Without AVX512-BF16 the widened schedule reads B's rows as vectors: a copy with
    the groups undone, the remark saying why, and the matmul vectorized."""
    x = np.ones((1, 7, 7, 64), ml_dtypes.bfloat16)
    w = np.ones((3, 3, 64, 64), ml_dtypes.bfloat16)
    text = _remarks("bf16_dot=0,int8_dot=0", x, loom.pack_filter(w, 32))
    assert "B's panels are in groups of 2 along k, but no AVX512-BF16 on this target: copied with the groups " \
           "undone first (nest 'matmul.ungrouped', memref<2x288x64xbf16> -> memref<2x576x32xbf16>)" in text, text
    assert "[loom-dot]" not in text and "not vectorized" not in text, text


def test_pack_filter_is_the_layout_the_dialect_names():
    """W[r, s, c, f] at [f floordiv NR, r, s, c, f mod NR], contiguous; unpacked back."""
    w = np.arange(2 * 3 * 4 * 12, dtype=np.float32).reshape(2, 3, 4, 12)
    p = loom.pack_filter(w, 4)
    assert p.shape == (3, 2, 3, 4, 4) and p.flags.c_contiguous
    for f in (0, 5, 11):
        assert p[f // 4, 1, 2, 3, f % 4] == w[1, 2, 3, f]
    np.testing.assert_array_equal(unpack_filter(p), w)


@pytest.mark.parametrize("dtype, g", [(ml_dtypes.bfloat16, 2), (np.int8, 4), (np.uint8, 4)])
def test_pack_filter_groups_low_precision_channels(dtype, g):
    """W[r, s, c, f] at [f floordiv NR, r, s, c floordiv G, f mod NR, c mod G]: each panel
    row G channels of NR output channels side by side; unpacked back."""
    w = (np.arange(2 * 3 * 8 * 12) % 100).astype(dtype).reshape(2, 3, 8, 12)
    p = loom.pack_filter(w, 4)
    assert p.shape == (3, 2, 3, 8 // g, 4, g) and p.dtype == w.dtype and p.flags.c_contiguous
    for c, f in ((0, 0), (5, 7), (7, 11)):
        assert p[f // 4, 1, 2, c // g, f % 4, c % g] == w[1, 2, c, f]
    np.testing.assert_array_equal(unpack_filter(p), w)


@pytest.mark.parametrize("call, message", [
    (lambda w: loom.pack_filter(w, 5), r"panel must be a positive integer that divides F = 12, got 5"),
    (lambda w: loom.pack_filter(w, 0), r"panel must be a positive integer that divides F = 12, got 0"),
    (lambda w: loom.pack_filter(w[0], 4), r"takes an RxSxCxF \(HWCF\) float32, float64, bfloat16, int8 or uint8 "
     r"filter, got shape \(3, 4, 12\)"),
    (lambda w: loom.pack_filter(w.astype(np.int32), 4), r"uint8 filter, got shape \(2, 3, 4, 12\) int32"),
    (lambda w: loom.pack_filter(w[:, :, :3].astype(ml_dtypes.bfloat16), 4),
     r"a filter of bfloat16 is packed in groups of 2 channels, and C = 3 is not a multiple of 2"),
    (lambda w: loom.pack_filter(w[:, :, :2].astype(np.int8), 4),
     r"a filter of int8 is packed in groups of 4 channels, and C = 2 is not a multiple of 4"),
])
def test_pack_filter_refuses_what_it_cannot_pack(call, message):
    with pytest.raises(loom.TraceError, match=message):
        call(np.ones((2, 3, 4, 12), np.float32))


@pytest.mark.parametrize("dtype, shape, message", [
    (ml_dtypes.bfloat16, (2, 3, 3, 4, 8), r"a 5-D filter in panels of bfloat16 is not pack_filter's layout \(5-D for "
     r"float32/float64, 6-D with groups of 2 last for bfloat16\)"),
    (np.float32, (2, 3, 3, 2, 8, 2), r"a 6-D filter in panels of float32 is not pack_filter's layout \(5-D for "
     r"float32/float64, 6-D with groups of G last for float32\)"),
    (ml_dtypes.bfloat16, (2, 3, 3, 1, 8, 4), r"6-D with groups of 2 last for bfloat16"),
])
def test_a_filter_in_panels_has_the_layout_of_its_dtype(dtype, shape, message):
    x = np.ones((1, 5, 5, 4), dtype)
    with pytest.raises(TypeError, match=message):
        loom.jit(_conv(1, 1, 1))(x, np.ones(shape, dtype))


@pytest.mark.parametrize("m, f, k, nr", [
    (49, 512, 9 * 512, 32),  # 3x3 C512 7^2 at batch 1: 7x32 tiles (49 rows), panels of 32
    (49, 512, 9 * 256, 32),  # 3x3/2 C256 -> 512
    (196, 256, 9 * 256, 64),  # 3x3 C256 14^2: 4x64
    (392, 512, 9 * 512, 64),  # batch 8
    (784, 128, 9 * 128, 0),  # 3x3 C128 28^2: its 576 KiB filter fits L2
    (49, 512, 256, 0),  # the 1x1/2 projection, 512 KiB
    (12544, 64, 147, 0),  # the stem
])
def test_filter_panel_packs_the_filters_larger_than_l2(m, f, k, nr):
    assert filter_panel(m, f, k, ZNVER4) == nr
    assert filter_panel(m, f, k, ZNVER4, element_bytes=2) == 0  # bf16: only with its dot-product instruction


@pytest.mark.parametrize("m, f, k, nr", [
    (49, 512, 9 * 512, 32),  # 7x48 tiles for 49 rows, but 48 does not divide F: 7x32
    (49, 512, 9 * 256, 32),
    (196, 256, 9 * 256, 64),
    (196, 256, 9 * 128, 64),  # 3x3/2 C128 -> 256: 576 KiB in bf16, over half of L2
    (784, 128, 9 * 128, 0),  # 288 KiB
    (3136, 64, 9 * 64, 0),
])
def test_filter_panel_packs_bf16_filters_larger_than_half_of_l2(m, f, k, nr):
    assert filter_panel(m, f, k, ZNVER4, element_bytes=2, dot="vdpbf16ps") == nr


def test_unpack_then_conv_is_the_reference_of_a_panel_conv():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 6, 6, 5)), rng.standard_normal((3, 3, 5, 16))
    src = """func.func @c(%x: tensor<1x6x6x5xf64>, %w: tensor<2x3x3x5x8xf64>) -> tensor<1x6x6x16xf64> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x6x6x5xf64>, tensor<2x3x3x5x8xf64>) -> tensor<1x6x6x16xf64>
  return %y : tensor<1x6x6x16xf64>
}"""
    np.testing.assert_allclose(loom.reference(src, x, loom.pack_filter(w, 8)),
                               conv2d_nhwc(x, w, (1, 1), (1, 1), (1, 1)), rtol=1e-12, atol=1e-12)

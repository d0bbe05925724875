"""Grouped and depthwise conv2d (`groups`): the reference, the textbook nest, loom-grouped-conv
(other tiles and vector widths drawn too) and the default schedule against float64 over random layers (groups dividing C and F, one
channel per group, several, several outputs per group; windows, strides, padding,
dilations; both layouts, where NCHW stays the textbook nest), exactly on small integers, the
same bits as the unscheduled nest; @jit's `groups=` and its refusals; the staged input
freed."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc
from dialects.loom import conv2d_output_hw
from kernels import DT, assert_within_bound, small_ints, ty

GROUPED = "loom-bufferize,convert-loom-to-affine,loom-grouped-conv"
PIPELINES = ["naive", GROUPED, "default"]
#: other tiles and vector widths, bare and scheduled by loom-default after them
SCHEDULES = [f"{GROUPED}{{tile=3 width=4}}", f"{GROUPED}{{tile=5 width=16}},loom-default",
             f"{GROUPED}{{tile=1 width=2}},loom-default"]


@st.composite
def grouped_layers(draw):
    """(n, groups, c/groups, f/groups, h, w, r, s, strides, padding, dilations): depthwise
    (1, 1) most often, MobileNet's channel multipliers, RegNet's groups of several."""
    groups = draw(st.sampled_from([2, 3, 5, 8, 16, 17, 24]))
    cg, fg = draw(st.sampled_from([(1, 1), (1, 1), (1, 2), (2, 1), (4, 4), (3, 8), (8, 8), (1, 16)]))
    n = draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, (r - 1) // 2 + 1)), draw(st.integers(0, (s - 1) // 2 + 1)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilations[0] * (r - 1) + 1 - 2 * padding[0]), 13))
    w = draw(st.integers(max(1, dilations[1] * (s - 1) + 1 - 2 * padding[1]), 23))
    return n, groups, cg, fg, h, w, r, s, strides, padding, dilations


def source(layer, dtype=np.float32, layout="nhwc", relu=False) -> str:
    n, groups, cg, fg, h, w, r, s, strides, padding, dilations = layer
    c, f = groups * cg, groups * fg
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    shapes = ([(n, h, w, c), (r, s, cg, f), (n, ho, wo, f)] if layout == "nhwc" else
              [(n, c, h, w), (f, cg, r, s), (n, f, ho, wo)])
    tx, tw, tyy = (ty(sh, dtype) for sh in shapes)
    attrs = (f"strides = array<i64: {strides[0]}, {strides[1]}>, padding = array<i64: {padding[0]}, {padding[1]}>, "
             f"dilations = array<i64: {dilations[0]}, {dilations[1]}>, groups = {groups} : i64"
             + (', layout = "nhwc"' if layout == "nhwc" else ""))
    tail = f"  %z = loom.relu %y : {tyy}\n  func.return %z : {tyy}" if relu else f"  func.return %y : {tyy}"
    return f"""func.func @conv(%x: {tx}, %w: {tw}) -> {tyy} {{
  %y = loom.conv2d %x, %w {{{attrs}}} : ({tx}, {tw}) -> {tyy}
{tail}
}}"""


def reference(layer, x, w, layout="nhwc"):
    conv = conv2d_nhwc if layout == "nhwc" else conv2d_nchw
    return conv(x.astype(np.float64), w.astype(np.float64), *layer[8:], layer[1])


def inputs(layer, dtype, rng, layout="nhwc", ints=False):
    n, groups, cg, fg, h, w, r, s = layer[:8]
    shapes = [(n, h, w, groups * cg), (r, s, cg, groups * fg)] if layout == "nhwc" else \
        [(n, groups * cg, h, w), (groups * fg, cg, r, s)]
    if ints:
        return [small_ints(rng, sh, dtype) for sh in shapes]
    return [rng.standard_normal(sh).astype(dtype) for sh in shapes]


@settings(max_examples=40, deadline=None)
@given(layer=grouped_layers(), pipeline=st.sampled_from(PIPELINES[1:] + SCHEDULES), seed=st.integers(0, 2**16))
def test_grouped_conv_within_bound_and_exact_on_integers(layer, pipeline, seed):
    src = source(layer)
    kern = compiler.compile(src, pipeline=pipeline)
    rng = np.random.default_rng(seed)
    x, w = inputs(layer, np.float32, rng)
    k = layer[2] * layer[6] * layer[7]
    assert_within_bound(kern(x, w), reference(layer, x, w), k, np.float32, f"{pipeline} {layer}")
    xi, wi = inputs(layer, np.float32, rng, ints=True)
    np.testing.assert_array_equal(kern(xi, wi), reference(layer, xi, wi).astype(np.float32))


@settings(max_examples=10, deadline=None)
@given(layer=grouped_layers(), seed=st.integers(0, 2**16))
def test_nchw_and_f64_grouped_conv(layer, seed):
    """NCHW (the textbook nest, which no conv2d schedule takes) and f64 in the default
    pipeline, with a relu after it."""
    rng = np.random.default_rng(seed)
    for layout, dtype in (("nchw", np.float32), ("nhwc", np.float64)):
        kern = compiler.compile(source(layer, dtype, layout, relu=True))
        x, w = inputs(layer, dtype, rng, layout)
        want = np.maximum(reference(layer, x, w, layout), 0)
        assert_within_bound(kern(x, w), want, layer[2] * layer[6] * layer[7], dtype, f"{layout} {DT[dtype]} {layer}")


@pytest.mark.parametrize("layer", [
    (1, 32, 1, 1, 12, 12, 3, 3, (1, 1), (1, 1), (1, 1)),  # depthwise, whole tiles of 8 x 8
    (2, 20, 1, 1, 9, 13, 3, 3, (2, 2), (1, 1), (1, 1)),  # stride 2, 20 channels: a vector and a rest
    (1, 6, 8, 8, 7, 7, 3, 3, (1, 1), (1, 1), (1, 1)),  # RegNet's groups of 8
    (1, 4, 1, 4, 5, 11, 5, 5, (1, 1), (2, 2), (1, 1)),  # a channel multiplier of 4, 5x5
])
def test_scheduled_grouped_conv_matches_the_textbook_nest_bit_for_bit(layer):
    """On small integers every order of the sums is exact: loom-grouped-conv's nests and
    the default schedule write what the unscheduled nest writes, bit for bit."""
    src = source(layer)
    rng = np.random.default_rng(1)
    x, w = inputs(layer, np.float32, rng, ints=True)
    want = compiler.compile(src, pipeline="naive")(x, w)
    np.testing.assert_array_equal(want, reference(layer, x, w).astype(np.float32))
    for pipeline in PIPELINES[1:]:
        np.testing.assert_array_equal(compiler.compile(src, pipeline=pipeline)(x, w), want, err_msg=pipeline)


def test_default_schedule_keeps_the_tile_in_registers_and_frees_the_staged_input():
    layer = (1, 16, 1, 1, 10, 10, 3, 3, (1, 1), (1, 1), (1, 1))
    kern = compiler.compile(source(layer), remarks=True, stages=True, num_threads=1)
    said = "\n".join(str(r) for r in kern.remarks)
    assert "depthwise" in said and "tiles of 8 outputs along ow x 8 channels along f" in said
    assert "kept in registers across loop %r" in said
    scheduled = kern.stages["loom-default"]
    # the boxes of the padded input the top and bottom rows and the left and right columns read
    assert scheduled.count("memref.alloc") == scheduled.count("memref.dealloc") == 4
    assert "vector.fma" in scheduled


def test_jit_groups():
    @compiler.jit
    def depthwise(x, w):
        return compiler.relu(compiler.conv2d(x, w, padding=1, layout="nhwc", groups=x.shape[3]))

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 9, 11, 24)).astype(np.float32), rng.standard_normal((3, 3, 1, 24)).astype(np.float32)
    want = np.maximum(conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1), 24), 0)
    assert_within_bound(depthwise(x, w), want, 9, np.float32)


@pytest.mark.parametrize("groups, w_shape, error, says", [
    (3, (3, 3, 1, 8), compiler.TraceError, "3 groups do not split the 8 input and 8 output channels"),
    (4, (3, 3, 1, 8), compiler.TraceError, "the filter takes 1 per group (4 groups: C/groups = 2)"),
    (0, (3, 3, 8, 8), compiler.TraceError, "groups must be a positive integer, got 0"),
    (2.0, (3, 3, 4, 8), TypeError, "groups must be a positive integer, got 2.0"),
    (True, (3, 3, 8, 8), TypeError, "groups must be a positive integer, got True"),
])
def test_jit_groups_refused(groups, w_shape, error, says):
    @compiler.jit
    def conv(x, w):
        return compiler.conv2d(x, w, layout="nhwc", groups=groups)

    x, w = np.ones((1, 5, 5, 8), np.float32), np.ones(w_shape, np.float32)
    with pytest.raises(error, match=re.escape(says)):
        conv(x, w)


def test_the_reference_is_a_convolution_per_group():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 6, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    y = conv2d_nchw(x, w, (1, 1), (1, 1), (1, 1), 2)
    np.testing.assert_array_equal(y[:, :2], conv2d_nchw(x[:, :3], w[:2], (1, 1), (1, 1), (1, 1)))
    np.testing.assert_array_equal(y[:, 2:], conv2d_nchw(x[:, 3:], w[2:], (1, 1), (1, 1), (1, 1)))

"""loom-im2col, loom-direct-conv and conv2d in the default pipeline (either strategy):
numerics against the float64 reference over random layers (batch, channels, window,
strides, padding, dilations; NCHW and NHWC),
exactly on small integers; the copy-free 1x1 case; the patch buffers freed."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import compiler
from dialects.loom import conv2d_output_hw
from kernels import assert_within_bound, conv2d, matches_naive, small_ints

IM2COL = "loom-bufferize,convert-loom-to-affine,loom-im2col"
DIRECT = "loom-bufferize,convert-loom-to-affine,loom-direct-conv"
PIPELINES = [IM2COL, "default"]
#: (pipeline, layout): each strategy bare and scheduled (`skip=` forces the other out),
#: and the default's own choice, in both layouts
CASES = [(pipeline, layout) for layout in ("nchw", "nhwc")
         for pipeline in (IM2COL, DIRECT, "default", "loom-default{skip=im2col}", "loom-default{skip=direct}")]
CHANNELS = st.sampled_from([1, 3, 10, 16, 17, 64])


@st.composite
def layers(draw):
    """(n, c, h, w, f, r, s, strides, padding, dilations): batch 1-4, C and F from
    CHANNELS, windows 1-7, strides 1-3, padding 0-3, dilations 1-2, and an input that
    the dilated window fits (padding included), at most 14 wide."""
    n, c, f = draw(st.integers(1, 4)), draw(CHANNELS), draw(CHANNELS)
    r, s = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilations[0] * (r - 1) + 1 - 2 * padding[0]), 14))
    w = draw(st.integers(max(1, dilations[1] * (s - 1) + 1 - 2 * padding[1]), 14))
    return n, c, h, w, f, r, s, strides, padding, dilations


def source(layer, dtype, layout="nchw"):
    n, c, h, w, f, r, s, strides, padding, dilations = layer
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    if layout == "nchw":
        return conv2d((n, c, h, w), (f, c, r, s), (n, f, ho, wo), strides, padding, dilations, dtype)
    return conv2d((n, h, w, c), (r, s, c, f), (n, ho, wo, f), strides, padding, dilations, dtype).replace(
        "{strides", '{layout = "nhwc", strides')


def shapes(layer, layout):
    """The input and filter shapes of a layer in a layout."""
    n, c, h, w, f, r, s = layer[:7]
    return ((n, c, h, w), (f, c, r, s)) if layout == "nchw" else ((n, h, w, c), (r, s, c, f))


def exact_with_remark(layer, layout, pipeline, said, seed):
    """Compile a layer with remarks, check one says `said`, and run it on small integers:
    exactly the reference."""
    src = source(layer, np.float32, layout)
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    assert any(said in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(seed)
    x, wt = (small_ints(rng, s, np.float32) for s in shapes(layer, layout))
    np.testing.assert_array_equal(kern(x, wt), compiler.reference(src, x, wt).astype(np.float32))


@pytest.mark.parametrize(("pipeline", "layout"), CASES)
@given(layer=layers(), dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_conv2d_matches_the_reference(pipeline, layout, layer, dtype, seed):
    c, r, s = layer[1], layer[5], layer[6]
    src = source(layer, dtype, layout)
    kern = compiler.compile(src, pipeline=pipeline)
    rng = np.random.default_rng(seed)
    x_shape, w_shape = shapes(layer, layout)
    x, wt = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    assert_within_bound(kern(x, wt), compiler.reference(src, x, wt), c * r * s, dtype, str(layer))
    x, wt = small_ints(rng, x_shape, dtype), small_ints(rng, w_shape, dtype)
    np.testing.assert_array_equal(kern(x, wt), compiler.reference(src, x, wt).astype(dtype), err_msg=str(layer))


def test_nhwc_reference_is_nchw_transposed():
    """The reference of an NHWC conv2d is the NCHW one on transposed arrays."""
    from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc

    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 5, 6, 3)), rng.standard_normal((3, 2, 3, 4))
    want = conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 1), (1, 0), (1, 2))
    np.testing.assert_allclose(conv2d_nhwc(x, w, (2, 1), (1, 0), (1, 2)), want.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_pointwise_conv_reads_the_input_in_place(pipeline):
    """A 1x1 stride-1 conv is a matmul on X as it is: no buffer at all before the matmul
    schedule's own packing (and none with loom-im2col alone)."""
    layer = (2, 17, 5, 7, 10, 1, 1, (1, 1), (0, 0), (1, 1))
    src = source(layer, np.float32)
    kern = compiler.compile(src, pipeline=pipeline, stages=True)
    after = kern.stages["loom-im2col" if pipeline == IM2COL else "loom-default"]
    assert "x_staged" not in after and "%col" not in after
    if pipeline == IM2COL:
        assert "memref.alloc" not in after.split("loom.tag = \"conv2d.init\"")[1]
    rng = np.random.default_rng(0)
    x, wt = small_ints(rng, (2, 17, 5, 7), np.float32), small_ints(rng, (10, 17, 1, 1), np.float32)
    np.testing.assert_array_equal(kern(x, wt), compiler.reference(src, x, wt).astype(np.float32))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("pipeline, strides", [(IM2COL, (2, 1)), (IM2COL, (1, 2)), ("loom-default{skip=direct}", (2, 2))])
def test_strided_pointwise_conv_copies_its_patches(pipeline, strides, layout):
    """A 1x1 window with a stride reads every other pixel: X is not the patch matrix,
    the patches are copied (only stride 1 reads X in place). Exact on small integers."""
    exact_with_remark((2, 5, 7, 6, 3, 1, 1, strides, (0, 0), (1, 1)), layout, pipeline, "copied by nest 'im2col'", 12)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("pipeline", [DIRECT, "loom-default{skip=im2col}", IM2COL])
def test_conv_of_a_strided_input_without_padding(layout, pipeline):
    """No padding, stride 1: the direct convolution reads a contiguous X in place, but X
    in the other layout's order (a transposed view) must be staged into planes first;
    im2col's NHWC copy reads a contiguous X's rows as runs of S*C, a strided X tap by
    tap. Read as if contiguous, it would give other pixels. Exact on small integers."""
    rng = np.random.default_rng(11)
    layer = (2, 3, 7, 8, 4, 3, 2, (1, 1), (0, 0), (1, 1))
    x_shape, w_shape = shapes(layer, layout)
    order = (0, 2, 3, 1) if layout == "nchw" else (0, 3, 1, 2)  # stored as the other layout
    x = small_ints(rng, [x_shape[i] for i in order], np.float32).transpose(np.argsort(order))
    wt = small_ints(rng, w_shape, np.float32)
    strides = ", ".join(str(s // 4) for s in x.strides)
    src = source(layer, np.float32, layout).replace(
        f"%x: tensor<{'x'.join(map(str, x_shape))}xf32>",
        f"%x: tensor<{'x'.join(map(str, x_shape))}xf32> {{loom.buffer_layout = strided<[{strides}]>}}")
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    staged = "copied by nest 'im2col'" if pipeline == IM2COL else "direct convolution: X staged"
    assert any(staged in r for r in kern.remarks), kern.remarks
    np.testing.assert_array_equal(kern(x, wt), compiler.reference(src, x, wt).astype(np.float32))


def test_patch_buffers_are_freed():
    """Each buffer loom-im2col allocates is freed once, after its last use."""
    src = source((1, 3, 9, 9, 4, 3, 3, (2, 2), (1, 1), (1, 1)), np.float32)
    text = compiler.compile(src, pipeline=IM2COL, stages=True).stages["loom-im2col"]
    for name in ("x_staged", "col"):
        assert text.count(f"%{name} = memref.alloc") == 1 and text.count(f"memref.dealloc %{name}") == 1, text
    assert text.index("memref.dealloc %x_staged") < text.index("reinterpret_cast %w")
    assert text.index("memref.dealloc %col") > text.index('loom.tag = "matmul"')


_CONV_6X6 = """func.func @conv(%x: memref<1x2x6x6xf32>, %w: memref<3x2x3x3xf32>,
                                                        %y: memref<1x3x4x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x6x6xf32>, memref<3x2x3x3xf32>) outs(%y : memref<1x3x4x4xf32>)
  func.return
}"""


def _conv_nest_text(conv: str = _CONV_6X6) -> str:
    """The 7-loop nest convert-loom-to-affine makes of `conv` (by default a 1x2x6x6 * 3x2x3x3 conv2d), in the
    generic form (which keeps its maps over the loop ivs as dims, as the pass builds them)."""
    from io import StringIO

    from xdsl.printer import Printer

    from dialects.context import make_context
    from passes.conversion.convert_loom_to_affine import ConvertLoomToAffinePass
    from passes.support.parser import parse_module

    module = parse_module(make_context(), conv, "conv.mlir")
    ConvertLoomToAffinePass().apply(make_context(), module)
    text = StringIO()
    Printer(stream=text, print_generic_format=True).print_op(module)
    return text.getvalue()


X_MAP = "-> (d0, d4, (d2 + d5), (d3 + d6))>"
W_MAP = "-> (d1, d4, d5, d6)>"
Y_MAP = "-> (d0, d1, d2, d3)>}> : (f32, memref<1x3x4x4xf32>, index, index, index, index, index, index, index)"
#: case -> (what replaces what in the nest, why it is not conv2d's)
NOT_CONV2D = {
    "x_rows_and_cols_swapped": ((X_MAP, "-> (d0, d4, (d3 + d6), (d2 + d5))>"),
                                "its read of X is not X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw]"),
    "x_cols_along_r": ((X_MAP, "-> (d0, d4, (d2 + d5), (d3 + d5))>"),
                       "its read of X is not X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw]"),
    "x_r_and_s_swapped": ((X_MAP, "-> (d0, d4, (d2 + d6), (d3 + d5))>"),
                          "its read of X is not X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw]"),
    "w_transposed": ((W_MAP, "-> (d1, d4, d6, d5)>"),
                     "its accesses of W and Y are not W[f, c, r, s] and Y[n, f, oh, ow] (NCHW)"),
    "y_stored_transposed": ((Y_MAP, Y_MAP.replace("(d0, d1, d2, d3)", "(d0, d1, d3, d2)")),
                            "its body is not the conv2d statement Y += X * W"),
    "x_squared": (('"arith.mulf"(%5, %6)', '"arith.mulf"(%5, %5)'), "its body is not the conv2d statement Y += X * W"),
    "subtracted": (('"arith.addf"(%7, %8)', '"arith.subf"(%7, %8)'), "its body is not the conv2d statement Y += X * W"),
    # the row one past oh + r (a padding of -1), the same row for every oh (a stride of 0), or for every r
    "x_row_shifted": ((X_MAP, "-> (d0, d4, ((d2 + d5) + 1), (d3 + d6))>"),
                      "its read of X has strides [1, 1], dilations [1, 1], padding [-1, 0]"),
    "x_row_without_oh": ((X_MAP, "-> (d0, d4, d5, (d3 + d6))>"),
                         "its read of X has strides [0, 1], dilations [1, 1], padding [0, 0]"),
    "x_row_without_r": ((X_MAP, "-> (d0, d4, d2, (d3 + d6))>"),
                        "its read of X has strides [1, 1], dilations [0, 1], padding [0, 0]"),
}


@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
@pytest.mark.parametrize("case", sorted(NOT_CONV2D))
def test_a_nest_one_step_off_conv2d_is_not_rewritten(case, rewrite):
    """The nest of conv2d is rewritten (exact against the unscheduled loops); each change
    that makes it another computation (X read transposed or with r and s swapped, W
    transposed, Y stored elsewhere than it is read, X * X, Y - X * W) is refused, the
    reason named."""
    text = _conv_nest_text()
    (old, new), why = NOT_CONV2D[case]
    assert text.count(old) == 1
    with pytest.raises(compiler.LoomError,
                       match=re.escape(f"{rewrite}: no conv2d nest to rewrite: nest 'conv2d': {why}")):
        compiler.compile(text.replace(old, new), pipeline=rewrite)


@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
def test_a_conv_adds_to_a_y_that_is_not_zeroed_right_before(rewrite):
    """Y filled with ones by a nest that is not conv2d's zero fill: the conv adds to it (the
    direct convolution's copy of Y' into Y adds, rather than overwrites); exact against the
    unscheduled loops."""
    text = _conv_nest_text().replace('loom.tag = "conv2d.init"', 'loom.tag = "ones"')
    text = text.replace("0.000000e+00 : f32", "1.000000e+00 : f32")
    kern = compiler.compile(text, pipeline=rewrite)
    rng = np.random.default_rng(15)
    x, w = small_ints(rng, (1, 2, 6, 6), np.float32), small_ints(rng, (3, 2, 3, 3), np.float32)
    matches_naive(kern, text, x, w, np.zeros((1, 3, 4, 4), np.float32))


@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
def test_a_nest_over_part_of_y_is_not_rewritten(rewrite):
    """Y 1x3x4x5 under loops of ow < 4: the nest writes 4 of each row's 5 columns, which
    a matmul on Y viewed as 3 x 20 would not. Refused, the reason named."""
    text = _conv_nest_text().replace("memref<1x3x4x4xf32>", "memref<1x3x4x5xf32>")
    why = "nest 'conv2d': its memrefs' shapes do not match its loops"
    with pytest.raises(compiler.LoomError, match=re.escape(why)):
        compiler.compile(text, pipeline=rewrite)


@pytest.mark.parametrize("rewrite, said", [("loom-im2col", "then matmul 3x16x18"),
                                           ("loom-direct-conv", "direct convolution: X read in place")])
def test_the_conv2d_nest_built_by_the_lowering_is_rewritten(rewrite, said):
    text = _conv_nest_text()
    kern = compiler.compile(text, pipeline=rewrite, remarks=True)
    assert any(said in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(14)
    x, w = small_ints(rng, (1, 2, 6, 6), np.float32), small_ints(rng, (3, 2, 3, 3), np.float32)
    got = np.full((1, 3, 4, 4), np.nan, np.float32)
    want = got.copy()
    kern(x, w, got)
    compiler.compile(text, pipeline="naive")(x, w, want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("layer", [(2, 3, 9, 10, 4, 4, 4, (2, 2), (1, 1), (2, 2)),
                                   (1, 3, 9, 9, 4, 2, 2, (2, 2), (0, 0), (1, 1))], ids=["dilated", "last_row_read"])
def test_direct_conv_with_strides_of_two(layer, layout):
    """Two images, a 4x4 window dilated by 2 with stride 2 and padding 1: each plane has
    Ho + (R-1)*2 floordiv 2 rows (3 more than Ho, not 1), and the batch is split. A 2x2
    window with stride 2 over 9 rows: the planes hold rows 0..7, the last one read by the
    last output row's second tap, so the staging copies it. Exact on small integers."""
    exact_with_remark(layer, layout, DIRECT, "direct convolution", 15)


@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
def test_a_padding_guard_one_row_off_is_not_rewritten(rewrite):
    """A conv2d with padding 1 whose guard lets the last row + 1 of X (row 4 of 4) through:
    not the guard that keeps the read inside the input, refused with that reason."""
    text = _conv_nest_text(_CONV_6X6.replace("6x6", "4x4").replace(
        "outs(%y : memref<1x3x4x4xf32>)", "outs(%y : memref<1x3x4x4xf32>) {padding = array<i64: 1, 1>}"))
    guard = "(((d2 * -1) + (d5 * -1)) + 4) >= 0"
    assert text.count(guard) == 1
    compiler.compile(text, pipeline=rewrite)
    with pytest.raises(compiler.LoomError, match=re.escape(
            f"{rewrite}: no conv2d nest to rewrite: nest 'conv2d': its padding guard is not the one that keeps the "
            "read of X inside the input")):
        compiler.compile(text.replace(guard, guard.replace("+ 4", "+ 5")), pipeline=rewrite)


#: the 1x2x6x6 * 3x2x3x3 conv2d on ui8 x i8 elements summed in i32 (each element widened as it is read)
_CONV_U8 = _CONV_6X6.replace("1x2x6x6xf32", "1x2x6x6xui8").replace("3x2x3x3xf32", "3x2x3x3xi8").replace(
    "1x3x4x4xf32", "1x3x4x4xi32")
#: case -> (what replaces what in the widened nest, or None for the nest as it is)
LOW_PRECISION = {
    "as_lowered": None,
    # Y filled with ones by another nest: the direct convolution's copy of Y' into Y adds in i32
    "y_not_zeroed": [('loom.tag = "conv2d.init"', 'loom.tag = "ones"'), ("value = 0 : i32", "value = 1 : i32")],
    # X's widened element times itself, W's widening unused: not X * W
    "x_squared": [('"arith.muli"(%8, %9)', '"arith.muli"(%8, %8)')],
    # W's widening reading X instead: X * X again
    "w_widened_twice": [('"arith_ext.extsi"(%6) : (i8)', '"arith_ext.extsi"(%5) : (ui8)')],
}


@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
@pytest.mark.parametrize("case", sorted(LOW_PRECISION))
def test_a_low_precision_conv2d_nest_is_rewritten_and_one_step_off_is_not(case, rewrite):
    """The ui8 x i8 conv2d nest (its elements widened to i32 as they are read) is rewritten
    with its patch matrix or planes holding ui8 elements, and is exact against the
    unscheduled loops, also when Y was not zeroed right before; X * X, or W's widening
    reading X, is refused as not conv2d's statement."""
    text = _conv_nest_text(_CONV_U8)
    for old, new in LOW_PRECISION[case] or []:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    if case in ("x_squared", "w_widened_twice"):
        why = "its body is not the conv2d statement Y += X * W"
        with pytest.raises(compiler.LoomError,
                           match=re.escape(f"{rewrite}: no conv2d nest to rewrite: nest 'conv2d': {why}")):
            compiler.compile(text, pipeline=rewrite)
        return
    kern = compiler.compile(text, pipeline=rewrite, stages=True)
    read = ("%x_planes = memref.reinterpret_cast %x" if rewrite == "loom-direct-conv" else  # X read in place
            "%col = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x3x4x4xui8>")
    assert read in kern.stages[rewrite], kern.stages[rewrite]
    rng = np.random.default_rng(16)
    x, w = rng.integers(0, 256, (1, 2, 6, 6)).astype(np.uint8), rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    matches_naive(kern, text, x, w, np.zeros((1, 3, 4, 4), np.int32))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("rewrite", ["loom-im2col", "loom-direct-conv"])
def test_a_padded_ui8_conv2d_stages_its_zero_border_in_ui8(rewrite, layout):
    """A padded, strided ui8 x i8 conv2d: X is staged with its zero border in a ui8 buffer
    (its zero an i32 zero truncated: arith's constants are signless), the IR verifying
    after every pass (stages=True), and the result exact."""
    layer = (2, 3, 7, 6, 4, 3, 3, (2, 2), (1, 1), (1, 1))
    ho, wo = conv2d_output_hw(7, 6, 3, 3, (2, 2), (1, 1), (1, 1))
    x_shape, w_shape = shapes(layer, layout)
    y_shape = (2, 4, ho, wo) if layout == "nchw" else (2, ho, wo, 4)
    src = conv2d(x_shape, w_shape, y_shape, (2, 2), (1, 1), (1, 1), np.uint8, np.int8, np.int32, layout=layout)
    kern = compiler.compile(src, pipeline=f"loom-bufferize,convert-loom-to-affine,{rewrite}", stages=True)
    assert "arith_ext.trunci %" in kern.stages[rewrite] and "xui8>" in kern.stages[rewrite]
    rng = np.random.default_rng(17)
    x, w = rng.integers(0, 256, x_shape).astype(np.uint8), rng.integers(-128, 128, w_shape).astype(np.int8)
    np.testing.assert_array_equal(kern(x, w), compiler.reference(src, x, w))


#: (n, c, h, w, f, r, s, strides, padding, dilations) whose window rows are short: the stem
#: (7x7/2 of 3 channels, a row of 21 taps), a 3x3 of 3 channels (9), a dilated 5x5 of one (5)
SHORT_ROWS = [(2, 3, 30, 29, 16, 7, 7, (2, 2), (3, 3), (1, 1)), (3, 3, 11, 13, 24, 3, 3, (1, 1), (1, 1), (1, 1)),
              (1, 1, 14, 14, 8, 5, 5, (1, 1), (2, 2), (2, 2))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layer", SHORT_ROWS, ids=["stem", "3x3_c3", "5x5_c1_dilated"])
def test_short_window_rows_are_unroll_jammed(layer, threads, monkeypatch):
    """An NHWC direct convolution whose window rows hold at most WINDOW_RUN_JAM taps gets k
    unroll-jammed by a row (the remark says so): exact on small integers, and bit for bit
    the schedule without it (the same sums in the same order)."""
    from passes.schedule import loom_default

    src = source(layer, np.float32, "nhwc")
    run = layer[1] * layer[6]
    kern = compiler.compile(src, remarks=True, num_threads=threads, cache=False)
    assert any(f"k unroll-jammed by {run}, a window row of taps" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(run)
    x, wt = (small_ints(rng, s, np.float32) for s in shapes(layer, "nhwc"))
    np.testing.assert_array_equal(kern(x, wt), compiler.reference(src, x, wt).astype(np.float32))
    monkeypatch.setattr(loom_default, "WINDOW_RUN_JAM", 0)
    plain = compiler.compile(src, remarks=True, num_threads=threads, cache=False)
    assert not any("a window row of taps" in r for r in plain.remarks)
    x, wt = (rng.standard_normal(s).astype(np.float32) for s in shapes(layer, "nhwc"))
    np.testing.assert_array_equal(kern(x, wt), plain(x, wt))

"""s8 x s8 through the +128 shift (issue 28): loom-pack{element=ui8} stores A's bytes plus
128, loom-compensate takes 128 x B's column sums back out of C, loom-dot runs both the
products and the sums on vpdpbusd. The rewrite is exact in i32 whatever runs the
products, so the schedules here run on any host without loom-dot (the products widened),
bit for bit against int64 numpy, at the extremes too; the host's own plan runs on
vpdpbusd in test_dot_products.py where the host has VNNI."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from kernels import conv2d, matmul, quantized_matmul
from targets import TARGETS, planning_for

import compiler
from passes.support.diagnostics import LoomError
from passes.support.target import host

AVX2 = TARGETS["avx2"] + ",bf16_dot=0,int8_dot=0"
#: loom-interchange's order from the tiled band (i_t, j_t, k_t, i_r, j_r, i, j, k) to the
#: panel order (i_t, k_t, j_t, j_r, i_r, k, i, j) and to BLIS's (j_t, k_t, i_t, i_r, j_r, k, i, j),
#: and the levels of B's and A's copies in it
ORDERS = {"panels": ("0,2,1,4,3,7,5,6", 3, 1), "blis": ("1,2,0,3,4,7,5,6", 1, 2)}
dim = st.sampled_from([1, 3, 4, 5, 8, 13, 16, 17, 31, 64])


def _ints(rng: np.random.Generator, shape: tuple[int, ...], extremes: bool) -> np.ndarray:
    if extremes:
        return rng.choice(np.array([-128, 127], np.int8), size=shape)
    return rng.integers(-128, 128, size=shape).astype(np.int8)


@st.composite
def compensated_schedules(draw: st.DrawFn) -> str:
    """A tiled, interchanged matmul with both operands packed in quads (A shifted), then
    loom-compensate, and some of the passes loom-default runs after it (not loom-dot)."""
    order, b_level, a_level = ORDERS[draw(st.sampled_from(sorted(ORDERS)))]
    mc, nc = draw(st.sampled_from([4, 8, 12, 64])), draw(st.sampled_from([8, 16, 24, 64]))
    kc = draw(st.sampled_from([4, 8, 12, 64]))
    mr, nr = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([4, 8]))
    private = " private=2" if order.startswith("0") and draw(st.booleans()) else ""
    steps = [f"loom-tile{{sizes={mc},{nc},{kc} op=matmul}}", f"loom-tile{{sizes={mr},{nr} op=matmul depth=3}}",
             f"loom-interchange{{order={order} op=matmul}}",
             f"loom-pack{{operand=1 level={b_level} panel={nr}{private} group=4 element=i8 op=matmul}}",
             f"loom-pack{{operand=0 level={a_level} panel={mr} group=4 element=ui8 op=matmul}}",
             "loom-compensate{op=matmul}"]
    if draw(st.booleans()):
        steps.append("loom-vectorize{width=8 op=matmul}")
    if draw(st.booleans()):
        steps.append("loom-hoist{op=matmul}")
    steps.append("loom-fuse-epilogue")
    return ",".join(steps)


@settings(max_examples=30, deadline=None)
@given(m=dim, n=dim, k=dim, extremes=st.booleans(), threads=st.sampled_from([1, 2]),
       pipeline=compensated_schedules())
def test_compensated_schedules_are_exact(m, n, k, extremes, threads, pipeline):
    """s8 x s8 through random schedules of the shift and its compensation (shapes 1,
    primes, sizes no tile divides, K tiles ending inside a quad; the panel order with a
    slot per thread, BLIS's): the int64 product bit for bit, or a refusal naming the pass."""
    if threads > 1:
        pipeline += ",loom-parallelize"
    src = matmul((m, k), (k, n), (m, n), np.int8, np.int8, np.int32)
    rng = np.random.default_rng(m + 31 * n + 17 * k)
    a, b = _ints(rng, (m, k), extremes), _ints(rng, (k, n), extremes)
    try:
        with planning_for(AVX2):
            kernel = compiler.compile(src, pipeline=pipeline, num_threads=threads, remarks=True)
    except LoomError as e:
        assert re.search(r"error: loom-[a-z-]+: ", str(e)), f"a refusal that names no pass: {e}"
        event("refused")
        return
    event("compensated" if any("[loom-compensate]" in r for r in kernel.remarks) else "not compensated")
    np.testing.assert_array_equal(kernel(a, b).astype(np.int64), a.astype(np.int64) @ b.astype(np.int64),
                                  err_msg=pipeline)


PANELS = ("loom-tile{sizes=64,64,256 op=matmul},loom-tile{sizes=4,16 op=matmul depth=3},"
          "loom-interchange{order=0,2,1,4,3,7,5,6 op=matmul},"
          "loom-pack{operand=1 level=3 panel=16 group=4 element=i8 op=matmul},"
          "loom-pack{operand=0 level=1 panel=4 group=4 element=ui8 op=matmul},loom-compensate{op=matmul},"
          "loom-vectorize{width=8 op=matmul},loom-hoist{op=matmul},loom-fuse-epilogue")


def test_the_largest_sums_are_exact():
    """K = 4096 of -128 x -128 and of -128 x 127: sums of +-2^26, and 128 x B's column sums
    of -2^26 taken out of sums of the shifted bytes (0 x -128 and 255 x 127), exact."""
    m, n, k = 8, 32, 4096
    src = matmul((m, k), (k, n), (m, n), np.int8, np.int8, np.int32)
    with planning_for(AVX2):
        kernel = compiler.compile(src, pipeline=PANELS, num_threads=1, remarks=True)
    assert any("[loom-compensate]" in r for r in kernel.remarks)
    for x, y in ((-128, -128), (-128, 127), (127, -128)):
        a, b = np.full((m, k), x, np.int8), np.full((k, n), y, np.int8)
        np.testing.assert_array_equal(kernel(a, b), np.full((m, n), x * y * k, np.int32))


def test_a_quantized_layer_keeps_its_fused_epilogue():
    """s8 activations x s8 weights, + bias, dequantized, relu, requantized to i8, one nest:
    the epilogue at the last write of C (the register tile's stores after the k loop, the
    compensation's subtraction before it), the zero fill dropped; bit for bit Loom's numpy
    reference."""
    m, k, n = 64, 256, 64
    src = quantized_matmul(m, k, n, "i8", "i8")
    pipeline = PANELS.replace("loom-hoist{op=matmul}", "loom-unroll-jam{factors=1,1,1,1,1,1,4,2 op=matmul},"
                                                       "loom-hoist{op=matmul}")
    with planning_for(AVX2):
        kernel = compiler.compile(src, pipeline=pipeline, num_threads=1, remarks=True)
    fused = [r for r in kernel.remarks if "[loom-fuse-epilogue]" in r]
    assert any("zero fill" in r and "dropped" in r for r in fused), fused
    assert not any("not fused" in r or "kept" in r for r in fused), fused
    rng = np.random.default_rng(5)
    args = (rng.integers(-128, 128, (m, k)).astype(np.int8), rng.integers(-128, 128, (k, n)).astype(np.int8),
            rng.integers(-5000, 5000, n).astype(np.int32), rng.uniform(1e-4, 1e-3, n).astype(np.float32),
            rng.integers(-3, 3, n).astype(np.int32), np.array(0.05, np.float32), np.array(7, np.int32))
    np.testing.assert_array_equal(kernel(*args), compiler.reference(src, *args))


@pytest.mark.skipif(not host().int8_dot, reason="the host has no VNNI")
@pytest.mark.parametrize("layout, x_shape, w_shape, y_shape, padding", [
    ("nchw", (1, 64, 14, 14), (64, 64, 3, 3), (1, 64, 14, 14), (1, 1)),
    ("nhwc", (2, 14, 14, 32), (3, 3, 32, 64), (2, 14, 14, 64), (1, 1)),
])
def test_the_host_runs_s8_convolutions_exactly(layout, x_shape, w_shape, y_shape, padding):
    """s8 activations x s8 filters on the host's own plan (im2col or direct, its tile): the
    filter or the patches shifted as A, the other's column sums taken out; bit for bit
    Loom's int64 reference, at the extremes too."""
    src = conv2d(x_shape, w_shape, y_shape, (1, 1), padding, (1, 1), np.int8, np.int8, np.int32, layout=layout)
    kernel = compiler.compile(src, pipeline="default", remarks=True)
    assert any("[loom-compensate]" in r for r in kernel.remarks), kernel.remarks
    rng = np.random.default_rng(3)
    for extremes in (False, True):
        x, w = _ints(rng, x_shape, extremes), _ints(rng, w_shape, extremes)
        np.testing.assert_array_equal(kernel(x, w), compiler.reference(src, x, w))

"""Numerics of loom-tile, loom-unroll and loom-hoist, alone and in pipelines.

Every compiled result is compared with the numpy reference (within 4*K*eps*max|ref| for
random inputs, bit-exactly for small integers). On matmul, whose reduction is the one
loop k, none of the three passes reorders the floating-point additions (the tiles of k
run in order, unrolled copies chain, a promoted accumulator adds in the same order), so
there each schedule must also give exactly the bits of the naive pipeline. (Tiling
conv2d's c, r, s does reorder its reduction.)

The default run draws a few cases per test (fast); `HYPOTHESIS_PROFILE=long` draws the
profile's number.
"""

import os
import re

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import compiler
from kernels import (
    TRIANGLE, assert_within_bound, conv2d_cases, conv2d_kernel, matches_naive, matmul, small_ints, unknown_memref,
)

LONG = os.environ.get("HYPOTHESIS_PROFILE", "default") != "default"
few = settings() if LONG else settings(max_examples=6)

# 1, primes, powers of two, sizes no small tile divides
dim = st.sampled_from([1, 2, 3, 5, 7, 8, 11, 13, 16, 17])
size = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16, 64])


def run_and_compare(src, shapes, reduction, pipeline, *, exact, dtype=np.float32, naive_bits=True):
    rng = np.random.default_rng(7)
    if exact:
        arrays = [small_ints(rng, s, dtype) for s in shapes]
    else:
        arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    out = compiler.compile(src, pipeline=pipeline)(*arrays)
    ref = compiler.reference(src, *arrays)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(dtype))
    else:
        assert_within_bound(out, ref, reduction, dtype)
    if naive_bits:
        np.testing.assert_array_equal(out, compiler.compile(src, pipeline="naive")(*arrays))


def sizes_option(sizes, depth=0):
    return f"sizes={','.join(map(str, sizes))}" + (f" depth={depth}" if depth else "")


@st.composite
def matmul_case(draw):
    batched = draw(st.booleans())
    b = draw(st.integers(1, 3))
    m, k, n = draw(dim), draw(dim), draw(dim)
    lead = (b,) if batched else ()
    src = matmul((*lead, m, k), (*lead, k, n), (*lead, m, n), np.float32)
    return src, [(*lead, m, k), (*lead, k, n)], k, 3 + batched


@st.composite
def tile_pipeline(draw, depth):
    """One or two levels of tiling on the `depth`-deep band of the `matmul` nest."""
    outer = draw(st.lists(size, min_size=1, max_size=depth))
    steps = [f"loom-tile{{{sizes_option(outer)} op=matmul}}"]
    if draw(st.booleans()):
        inner = draw(st.lists(size, min_size=1, max_size=depth))
        steps.append(f"loom-tile{{{sizes_option(inner, len(outer))} op=matmul}}")
    return steps


@few
@given(case=matmul_case(), data=st.data(), exact=st.booleans())
def test_matmul_tiled(case, data, exact):
    src, shapes, k, depth = case
    pipeline = ",".join(data.draw(tile_pipeline(depth)))
    note(pipeline)
    run_and_compare(src, shapes, k, pipeline, exact=exact)


@few
@given(case=matmul_case(), data=st.data(), exact=st.booleans())
def test_matmul_tile_hoist_unroll(case, data, exact):
    """Tiling (or not), then hoisting and unrolling in either order, on every nest or on
    the matmul one."""
    src, shapes, k, depth = case
    steps = data.draw(st.one_of(st.just([]), tile_pipeline(depth)))
    sel = data.draw(st.sampled_from(["", " op=matmul"]))
    late = [f"loom-hoist{{{sel.strip()}}}", f"loom-unroll{{factor={data.draw(st.integers(1, 5))}{sel}}}"]
    steps += data.draw(st.permutations(late))[: data.draw(st.integers(1, 2))]
    pipeline = ",".join(steps)
    note(pipeline)
    run_and_compare(src, shapes, k, pipeline, exact=exact)


conv_cases = conv2d_cases(max_c=3, max_f=3, max_rs=3, max_stride=2, max_padding=2, max_dilation=2, max_hw=8)


@few
@given(case=conv_cases, data=st.data(), exact=st.booleans())
def test_conv2d_schedules(case, data, exact):
    """The 7-deep conv2d band (reduction under the padding guard) tiled at one or two
    levels, hoisted (the accumulator carried through the guard), unrolled."""
    src, shapes, k = conv2d_kernel(case, np.float32)
    steps = []
    if data.draw(st.booleans()):
        outer = data.draw(st.lists(size, min_size=1, max_size=7))
        steps.append(f"loom-tile{{{sizes_option(outer)} op=conv2d}}")
        if data.draw(st.booleans()):
            inner = data.draw(st.lists(size, min_size=1, max_size=7))
            steps.append(f"loom-tile{{{sizes_option(inner, len(outer))} op=conv2d}}")
    if data.draw(st.booleans()):
        steps.append("loom-hoist")
    if data.draw(st.booleans()) or not steps:
        steps.append(f"loom-unroll{{factor={data.draw(st.integers(2, 4))}}}")
    pipeline = ",".join(steps)
    note(pipeline)
    run_and_compare(src, shapes, k, pipeline, exact=exact, naive_bits=False)


@pytest.mark.parametrize(
    "shape, pipeline",
    [
        # sizes that divide, that do not, larger than the extents, and all 1
        ((8, 8, 8), "loom-tile{sizes=4,4,4},loom-hoist"),
        ((13, 11, 7), "loom-tile{sizes=4,3,5},loom-tile{sizes=2,2,2 depth=3},loom-hoist,loom-unroll{factor=3}"),
        ((5, 3, 2), "loom-tile{sizes=64,64,64},loom-unroll{factor=4},loom-hoist"),
        ((3, 4, 5), "loom-tile{sizes=1,1,1},loom-unroll{factor=2}"),
        ((17, 16, 1), "loom-tile{sizes=8 op=matmul},loom-tile{sizes=4,4 depth=1 op=matmul},loom-unroll{factor=4}"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_fixed_schedules(shape, pipeline, dtype):
    m, k, n = shape
    src = matmul((m, k), (k, n), (m, n), dtype)
    run_and_compare(src, [(m, k), (k, n)], k, pipeline, exact=False, dtype=dtype)


def test_schedule_remarks_from_compile():
    src = matmul((5, 3), (3, 6), (5, 6), np.float32)
    kern = compiler.compile(src, pipeline="loom-tile{sizes=4,4,4},loom-hoist,loom-unroll{factor=4}", remarks=True)
    text = "\n".join(kern.remarks)
    assert "size 4 for loop %k clamped to its trip count 3" in text
    assert "sizes requested [4, 4, 4], applied [4, 4, 3]" in text
    assert "kept in registers across loop %k" in text
    assert "loop %k of nest 'matmul': unrolled by 3, requested 4 (clamped to the trip count 3)" in text


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("loom-tile{sizes=0,4}", "loom-tile: option 'sizes' must be positive integers, got [0, 4]"),
        ("loom-tile{sizes=2,2,2,2 op=matmul}", "loom-tile: option 'sizes' gives 4 sizes, but nest 'matmul'"),
        ("loom-tile{sizes=2 depth=-1}", "loom-tile: option 'depth' must be >= 0, got -1"),
        ("loom-unroll{factor=0}", "loom-unroll: option 'factor' must be a positive integer, got 0"),
    ],
)
def test_invalid_options_from_compile(pipeline, message):
    src = matmul((4, 4), (4, 4), (4, 4), np.float32)
    with pytest.raises(compiler.LoomError, match=message.replace("[", r"\[").replace("]", r"\]")):
        compiler.compile(src, pipeline=pipeline)


MICRO_KERNEL = (
    "loom-tile{sizes=6,16 op=matmul},loom-interchange{order=0,1,4,2,3 op=matmul},"
    "loom-unroll-jam{factors=1,1,1,6 op=matmul},loom-vectorize{width=8 op=matmul},"
    "loom-unroll{factor=2 op=matmul},loom-hoist{op=matmul}"
)


@pytest.mark.parametrize("m, k, n", [(13, 29, 17), (12, 7, 32), (6, 5, 16), (5, 3, 9)])
@pytest.mark.parametrize("exact", [False, True])
def test_matmul_register_micro_kernel(m, k, n, exact):
    """The 6x16 register micro-kernel pipeline (issue 4) on shapes its tiles do not
    divide: the 16 wide j tile unrolled away (two 8 wide vectors), vector accumulators
    of C where they are promoted. The fma contracts each product and add, so random
    inputs are within the bound rather than bit-equal to the naive pipeline."""
    src = matmul((m, k), (k, n), (m, n), np.float32)
    run_and_compare(src, [(m, k), (k, n)], k, MICRO_KERNEL, exact=exact, naive_bits=False)


STORE_BASE_LOAD_VIEW = """func.func @store_base_load_view(%a: memref<8x4xf32>) {
  %one = arith.constant 1.0 : f32
  %v = memref.subview %a[2, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: 8>>
  affine.for %i = 0 to 8 {
    %l = affine.load %v[1, 0] : memref<4x4xf32, strided<[4, 1], offset: 8>>
    %s = arith.addf %l, %one : f32
    affine.store %s, %a[%i, 0] : memref<8x4xf32>
  } {loom.tag = "view"}
  func.return
}"""


@pytest.mark.parametrize("pipeline", ["naive", "loom-hoist", "loom-unroll{factor=3},loom-hoist"])
def test_hoist_keeps_a_load_through_a_view_of_a_stored_buffer(pipeline):
    """%v[1, 0] is %a[3, 0], which iteration 3 rewrites: rows 0-3 get the old value + 1,
    rows 4-7 the new one + 1. A load hoisted out of the loop would give every row the old
    value + 1."""
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    want = a.copy()
    for i in range(8):
        want[i, 0] = want[3, 0] + 1
    compiler.compile(STORE_BASE_LOAD_VIEW, pipeline=pipeline)(a)
    np.testing.assert_array_equal(a, want)


def store_through_unknown(maker: str) -> str:
    """The loop stores to %m, which is %a or %b (flag[0] > 0 or not), and reads %b[0]."""
    made = unknown_memref(maker, "memref<8xf32>")
    return f"""func.func @store_through_unknown(%a: memref<8xf32>, %b: memref<8xf32>, %flag: memref<1xf32>) {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %f = memref.load %flag[%c0] : memref<1xf32>
  %c = arith.cmpf ogt, %f, %zero : f32
  {made}
  affine.for %i = 0 to 8 {{
    %x = affine.load %b[0] : memref<8xf32>
    %y = arith.addf %x, %one : f32
    affine.store %y, %m[%i] : memref<8xf32>
  }} {{loom.tag = "unknown"}}
  func.return
}}"""


@pytest.mark.parametrize("maker", ["arith.select", "scf.if"])
@pytest.mark.parametrize("pipeline", ["naive", "loom-hoist", "loom-unroll{factor=3},loom-hoist"])
def test_hoist_keeps_a_load_that_a_store_through_an_unknown_buffer_may_change(maker, pipeline):
    """When %m is %b, iteration 0 rewrites %b[0]: %b becomes 1, 2, 2, ... A load of %b[0]
    hoisted out of the loop gave 1, 1, 1, ... (memref_root took %m for %a, or for a
    buffer of its own)."""
    kern = compiler.compile(store_through_unknown(maker), pipeline=pipeline, remarks=True)
    for flag, want_a, want_b in [(1.0, [1.0] * 8, [0.0] * 8), (-1.0, [0.0] * 8, [1.0] + [2.0] * 7)]:
        a, b = np.zeros(8, np.float32), np.zeros(8, np.float32)
        kern(a, b, np.array([flag], np.float32))
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)
    if "hoist" in pipeline:
        assert any(f"%b[0] not hoisted out of loop %i: 'affine.store' in the loop writes %m, the result of '{maker}', "
                   "which may be any buffer" in str(r) for r in kern.remarks), kern.remarks


#: %c views the 4 elements of %base as 2 x 2 with strides (1, 1): %c[0, 1] and %c[1, 0] are
#: both base[1], which each iteration adds x[k] to twice
OVERLAPPING_ACCUMULATORS = """func.func @overlapping_accumulators(%base: memref<4xf32>, %x: memref<8xf32>) {
  %c = memref.reinterpret_cast %base to offset: [0], sizes: [2, 2], strides: [1, 1] : memref<4xf32> to memref<2x2xf32, strided<[1, 1]>>
  affine.for %k = 0 to 8 {
    %v = affine.load %x[%k] : memref<8xf32>
    %p = affine.load %c[0, 1] : memref<2x2xf32, strided<[1, 1]>>
    %s = arith.addf %p, %v : f32
    affine.store %s, %c[0, 1] : memref<2x2xf32, strided<[1, 1]>>
    %q = affine.load %c[1, 0] : memref<2x2xf32, strided<[1, 1]>>
    %t = arith.addf %q, %v : f32
    affine.store %t, %c[1, 0] : memref<2x2xf32, strided<[1, 1]>>
  } {loom.tag = "acc"}
  func.return
}"""


@pytest.mark.parametrize("pipeline", ["naive", "loom-hoist", "loom-unroll{factor=2},loom-hoist"])
def test_hoist_does_not_promote_two_subscripts_of_one_element(pipeline):
    """Kept in two registers, %c[0, 1] and %c[1, 0] would each add sum(x) once and the
    last store would win: base[1] = 8 instead of 16."""
    kern = compiler.compile(OVERLAPPING_ACCUMULATORS, pipeline=pipeline, remarks=True)
    base = np.zeros(4, np.float32)
    kern(base, np.ones(8, np.float32))
    np.testing.assert_array_equal(base, [0, 16, 0, 0])
    if "hoist" in pipeline:
        assert any("%c[0, 1] not promoted to a register in loop %k: its layout strided<[1, 1]> reaches some "
                   "elements from several indices" in str(r) for r in kern.remarks), kern.remarks


def _accumulate(extra: str = "", head: str = "") -> str:
    """%c[1] += %x[k] over k < 8, and `extra` in the loop."""
    return f"""func.func @acc(%c: memref<8xf32>, %x: memref<8xf32>) {{
{head}  affine.for %k = 0 to 8 {{
    %v = affine.load %x[%k] : memref<8xf32>
    %p = affine.load %c[1] : memref<8xf32>
    %s = arith.addf %p, %v : f32
    affine.store %s, %c[1] : memref<8xf32>
{extra}  }} {{loom.tag = "acc"}}
  func.return
}}"""


def _lanes_at(at: int) -> str:
    return (f"    %q = affine.vector_load %c[{at}] : memref<8xf32>, vector<4xf32>\n"
            f"    %r = arith.addf %q, %q : vector<4xf32>\n"
            f"    affine.vector_store %r, %c[{at}] : memref<8xf32>, vector<4xf32>\n")


#: case -> (source, the remark about %c[1])
HOIST_GUARDS = {
    "alone": (_accumulate(), "kept in registers across loop %k (loaded before, stored after): %c[1]"),
    "read_by_memref_load": (
        _accumulate("    %z = arith.constant 1 : index\n    %m = memref.load %c[%z] : memref<8xf32>\n"
                    "    affine.store %m, %c[2] : memref<8xf32>\n"),
        "%c[1] not promoted to a register in loop %k: it is accessed by 'memref.load'"),
    "read_through_a_view": (
        _accumulate("    %q = affine.load %w[0] : memref<7xf32, strided<[1], offset: 1>>\n"
                    "    affine.store %q, %c[3] : memref<8xf32>\n",
                    head="  %w = memref.subview %c[1] [7] [1] : memref<8xf32> to "
                         "memref<7xf32, strided<[1], offset: 1>>\n"),
        "%c[1] not promoted to a register in loop %k: it is accessed through several views"),
    # 4 lanes from %c[1] (as a vector and a scalar), from %c[0] (over %c[1]), from %c[2] (after it)
    "lanes_from_it": (_accumulate(_lanes_at(1)),
                      "%c[1] not promoted to a register in loop %k: %c[1] is accessed both as a scalar and as a "
                      "vector, or as vectors of different types"),
    "lanes_over_it": (_accumulate(_lanes_at(0)),
                      "%c[1] not promoted to a register in loop %k: %c[1] and %c[0] may be the same element"),
    # %c[%k] is %c[1] at k = 1: it must read the sum so far, not memory left behind
    "read_where_the_loop_moves": (
        _accumulate("    %m = affine.load %c[%k] : memref<8xf32>\n    affine.store %m, %x[%k] : memref<8xf32>\n"),
        "%c[1] not promoted to a register in loop %k: %c[%k] is also accessed, at an address that changes in the "
        "loop (%k)"),
    "beside_lanes": (_accumulate(_lanes_at(2)),
                     "kept in registers across loop %k (loaded before, stored after): %c[1], %c[2]"),
}


@pytest.mark.parametrize("case", sorted(HOIST_GUARDS))
def test_hoist_promotes_only_an_element_nothing_else_reaches(case):
    """%c[1] is kept in a register across %k only when no other access may reach it (a
    memref.load, a view, a vector's lanes from %c[1]; lanes from %c[2] are apart): the
    remark, and exact against the unscheduled loops."""
    src, said = HOIST_GUARDS[case]
    kern = compiler.compile(src, pipeline="loom-hoist", remarks=True)
    assert said in [r.split("] ", 1)[1] for r in kern.remarks], kern.remarks
    rng = np.random.default_rng(11)
    x = small_ints(rng, (8,), np.float32)
    matches_naive(kern, src, small_ints(rng, (8,), np.float32), x)


STEP_2 = """func.func @double(%a: memref<16xf32>, %c: memref<16xf32>) {
  affine.for %i = 0 to 12 step 2 {
    %v = affine.load %a[%i] : memref<16xf32>
    %w = arith.addf %v, %v : f32
    affine.store %w, %c[%i] : memref<16xf32>
  } {loom.tag = "double"}
  func.return
}"""


def _stepped_against_naive(src: str, pipeline: str, size: int) -> np.ndarray:
    """`src` (c[i] = 2 * a[i] over its loop) under `pipeline`, c filled with -1 first: what
    it wrote, checked equal to what the unscheduled loop writes."""
    kern = compiler.compile(src, pipeline=pipeline)
    return matches_naive(kern, src, np.arange(size, dtype=np.float32), np.full(size, -1, np.float32))[1]


@pytest.mark.parametrize("sizes", [1, 2, 3, 4, 5, 6, 7])
def test_tile_of_a_loop_with_a_step_counts_iterations(sizes):
    """`sizes` counts iterations: 4 iterations of a step-2 loop are 8 index units, so 0 to 12
    (6 iterations) is 2 tiles, the last one partial (12 is no multiple of 8); every element
    the loop writes, and none past its end, against the unscheduled loop."""
    got = _stepped_against_naive(STEP_2, f"loom-tile{{sizes={sizes}}}", 16)
    assert list(got[12:]) == [-1] * 4 and list(got[:12:2]) == [0, 4, 8, 12, 16, 20]


def test_tile_of_a_loop_from_2_to_12_clamps_its_last_tile():
    """12 is a multiple of 4, but 12 - 2 is not: the tiles from 2 are not all full, and the
    last one stops at 12. Exact against the unscheduled loop, nothing written past it."""
    got = _stepped_against_naive(STEP_2.replace("0 to 12 step 2", "2 to 12"), "loom-tile{sizes=4}", 16)
    assert list(np.flatnonzero(got != -1)) == list(range(2, 12))


def _stepped(ub: int, step: int) -> str:
    return STEP_2.replace("0 to 12 step 2", f"0 to {ub} step {step}").replace("16xf32", "24xf32")


@pytest.mark.parametrize(("ub", "step", "factor"), [(10, 4, 2), (10, 4, 3), (20, 2, 3), (16, 2, 4), (15, 7, 2)])
def test_unroll_of_a_loop_with_a_step(ub, step, factor):
    """A step that does not divide the range (0 to 10 step 4 runs 3 times: 0, 4, 8) and a
    factor that does not divide the trip count: every iteration runs once, the remainder
    from where the unrolled loop stops; exact against the unscheduled loop."""
    got = _stepped_against_naive(_stepped(ub, step), f"loom-unroll{{factor={factor}}}", 24)
    assert list(np.flatnonzero(got != -1)) == list(range(0, ub, step))  # (c[i] = 2 * i, never -1)


def test_unroll_of_a_loop_that_may_not_run():
    """%j = %i to 10 runs no iteration for %i >= 10: its split point, %i + ((10 - %i) floordiv
    4) * 4, then lies below %i, and the remainder loop must start at %i, not there. Exact
    against the unscheduled loops."""
    src = TRIANGLE.replace("9x9", "16x16").replace("0 to 9", "0 to 16").replace(
        "affine.for %j = 0 to affine_map<(d0) -> (d0 + 1)>(%i)", "affine.for %j = affine_map<(d0) -> (d0)>(%i) to 10")
    kern = compiler.compile(src, pipeline="loom-unroll{factor=4}")
    got = matches_naive(kern, src, small_ints(np.random.default_rng(4), (16, 16), np.float32),
                        np.full((16, 16), -1, np.float32))[1]
    assert (got != -1).sum() == sum(range(11))


#: c[k] = a[SUBSCRIPT] over %k = LB to 13
DIVIDED = """func.func @divided(%a: memref<8xf32>, %c: memref<16xf32>) {
  affine.for %k = LB to 13 {
    %x = affine.load %a[SUBSCRIPT] : memref<8xf32>
    affine.store %x, %c[%k] : memref<16xf32>
  } {loom.tag = "divided"}
  func.return
}"""


@pytest.mark.parametrize(("lb", "subscript"), [(0, "(%k + 3) floordiv 6"), (0, "(%k + 3) mod 6"),
                                               (1, "(%k + 2) floordiv 3")])
def test_unroll_splits_a_division_only_where_its_constant_cannot_carry(lb, subscript):
    """Unrolled by 3, %k steps by 3 from `lb`: a multiple of 3 from 0, where (%k + 3)
    floordiv 6 is still not %k floordiv 6 (3 carries: %k = 3 gives 1), and not at all from
    1, where (%k + 2) floordiv 3 is not %k floordiv 3. Exact against the unscheduled loop."""
    src = DIVIDED.replace("LB", str(lb)).replace("SUBSCRIPT", subscript)
    kern = compiler.compile(src, pipeline="loom-unroll{factor=3}")
    got = matches_naive(kern, src, np.arange(8, dtype=np.float32), np.full(16, -1, np.float32))[1]
    assert list(np.flatnonzero(got == -1)) == [*range(lb), 13, 14, 15]


STENCIL_2D = """func.func @stencil(%a: memref<9x9xf32>) {
  %one = arith.constant 1.0 : f32
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %a[%i, %j + 1] : memref<9x9xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %a[%i + 1, %j] : memref<9x9xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}"""


#: STENCIL_2D twice, under a loop %t: its (i, j) band tiled at depth 1
STENCIL_TWICE = STENCIL_2D.replace(
    "  affine.for %i = 0 to 8 {", "  affine.for %t = 0 to 2 {\n  affine.for %i = 0 to 8 {").replace(
    "  } {loom.tag", "  }\n  } {loom.tag")


@pytest.mark.parametrize("src, sizes, message", [
    (TRIANGLE, "2,2", "cannot tile (i, j) of nest 'tri': the bounds of loop %j use %i (the band is not rectangular)"),
    (STENCIL_2D, "2,2", "cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, dependence "
                        "store %a[%i + 1, %j] (line 7) -> load %a[%i, %j + 1] (line 5), direction (<, >)"),
    (STENCIL_TWICE, "2,2 depth=1", "cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, "
                                   "dependence store %a[%i + 1, %j] (line 8) -> load %a[%i, %j + 1] (line 6), "
                                   "direction (*, <, >)"),
])
def test_tile_refuses_a_band_it_cannot_tile(src, sizes, message):
    """Refused, nothing changed; tiling the outer loop alone keeps every dependence and is
    exact against the unscheduled loops."""
    with pytest.raises(compiler.LoomError, match=re.escape(f"loom-tile: {message}")):
        compiler.compile(src, pipeline=f"loom-tile{{sizes={sizes}}}")
    kern = compiler.compile(src, pipeline="loom-tile{sizes=3}")
    rng = np.random.default_rng(12)
    matches_naive(kern, src, *[small_ints(rng, (9, 9), np.float32) for _ in range(2 if src is TRIANGLE else 1)])


#: the sum of %a into %s[0]: after loom-hoist, %i and %j carry it (iter_args), %j the only
#: op in %i's body besides the yield of its value
SUM = """func.func @sum(%a: memref<6x8xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 6 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[%i, %j] : memref<6x8xf32>
      %p = affine.load %s[0] : memref<1xf32>
      %q = arith.addf %p, %x : f32
      affine.store %q, %s[0] : memref<1xf32>
    }
  } {loom.tag = "sum"}
  func.return
}"""


@pytest.mark.parametrize("sizes, message", [
    # the tile loop would not carry the sum: it was an internal error ('llvm.store' op operand #0 does not dominate)
    ("2", "cannot tile (i) of nest 'sum': loop %i carries values (iter_args): tile before loom-hoist"),
    # a loop that carries values ends the perfect band: %j is not in it
    ("2,2", "the options fit no loop nest: nest 'sum': 2 sizes, but its band at depth 0, (i), has 1 loop"),
])
def test_tile_refuses_loops_that_carry_values(sizes, message):
    """Tiling after loom-hoist, which made %i and %j carry the sum, is refused; before it,
    exact against the unscheduled loops."""
    with pytest.raises(compiler.LoomError, match=re.escape(f"loom-tile: {message}")):
        compiler.compile(SUM, pipeline=f"loom-hoist,loom-tile{{sizes={sizes}}}")
    kern = compiler.compile(SUM, pipeline=f"loom-tile{{sizes={sizes}}},loom-hoist")
    matches_naive(kern, SUM, small_ints(np.random.default_rng(3), (6, 8), np.float32), np.ones(1, np.float32))


def test_unroll_by_the_trip_count_keeps_the_nest():
    """The outermost loop unrolled by its trip count stays a loop of one iteration that
    keeps the nest's tag: a later pass still finds the nest. Exact."""
    kern = compiler.compile(STEP_2, pipeline="loom-unroll{factor=6},loom-unroll{factor=2 op=double}", remarks=True)
    assert [r.split("] ", 1)[1] for r in kern.remarks][-1] == \
        "loop %i of nest 'double' skipped: 1 iteration, nothing to unroll"
    matches_naive(kern, STEP_2, np.arange(16, dtype=np.float32), np.full(16, -1, np.float32))


def test_unroll_skips_a_loop_that_starts_at_a_max():
    src = _accumulate().replace("affine.for %k = 0 to 8", "affine.for %k = max affine_map<() -> (0, 2)>() to 8")
    kern = compiler.compile(src, pipeline="loom-unroll{factor=2}", remarks=True)
    assert any("skipped: its lower bound is a max of several expressions" in r for r in kern.remarks), kern.remarks
    x = np.arange(8, dtype=np.float32)
    c = np.zeros(8, np.float32)
    kern(c, x)
    assert c[1] == sum(range(2, 8))


def test_unroll_refuses_a_nest_past_the_op_limit():
    """The body (5 ops) unrolled 4000 times makes about 20,001 ops: one past the limit,
    refused before anything is copied; the limit itself is accepted."""
    from passes.analysis.loop_utils import MAX_UNROLLED_OPS, check_unrolled_size, select_nests
    from dialects.context import make_context
    from passes.support.parser import parse_module

    src = _accumulate().replace("0 to 8 {", "0 to 8000 {").replace("%x: memref<8xf32>", "%x: memref<8000xf32>") \
        .replace("%x[%k] : memref<8xf32>", "%x[%k] : memref<8000xf32>")
    with pytest.raises(compiler.LoomError, match=re.escape(
            "loom-unroll: unrolling its innermost loops by 4000 would make nest 'acc' about 20,001 ops, more than "
            "the limit of 20,000 ops per unrolled nest")):
        compiler.compile(src, pipeline="loom-unroll{factor=4000}")
    [nest] = select_nests(parse_module(make_context(), src, "acc.mlir"), "acc")
    check_unrolled_size("loom-unroll", nest, MAX_UNROLLED_OPS, "unrolling")
    with pytest.raises(compiler.LoomError, match="about 20,001 ops, more than the limit of 20,000"):
        check_unrolled_size("loom-unroll", nest, MAX_UNROLLED_OPS + 1, "unrolling")


@pytest.mark.parametrize("subscript, size", [("%i", 8), ("(%i + 1) ceildiv 2", 5)])
def test_hoist_keeps_an_access_the_loop_may_never_reach(subscript, size):
    """%c[%i] in %k = %i to 8, %i up to 8: for %i = 8 the loop runs no iteration, and a
    load hoisted before it would read %c[8], past the end (and %c[(8 + 1) ceildiv 2], past
    the end of 5 elements: the ceildiv rounds up). Not promoted; exact."""
    src = f"""func.func @tri(%c: memref<{size}xf32>, %x: memref<9xf32>) {{
  affine.for %i = 0 to 9 {{
    affine.for %k = affine_map<(d0) -> (d0)>(%i) to 8 {{
      %v = affine.load %x[%k] : memref<9xf32>
      %p = affine.load %c[{subscript}] : memref<{size}xf32>
      %s = arith.addf %p, %v : f32
      affine.store %s, %c[{subscript}] : memref<{size}xf32>
    }}
  }} {{loom.tag = "tri"}}
  func.return
}}"""
    kern = compiler.compile(src, pipeline="loom-hoist", remarks=True)
    access = f"%c[{subscript}]"
    assert [r.split("] ", 1)[1] for r in kern.remarks] == [
        f"{access} not promoted to a register in loop %k: {access} is not provably in bounds (the loop may not run)"]
    rng = np.random.default_rng(15)
    c, x = small_ints(rng, (size,), np.float32), small_ints(rng, (9,), np.float32)
    want = c.astype(np.float64)
    for i in range(8):
        want[i if size == 8 else -(-(i + 1) // 2)] += x[i:8].sum(dtype=np.float64)
    kern(c, x)
    np.testing.assert_array_equal(c, want)


def test_hoist_keeps_a_remainder_that_may_trap_in_a_loop_that_may_not_run():
    """%i mod (8 - %i) is invariant in %k = %i to 8, but for %i = 8, where the loop runs no
    iteration, it divides by zero: it stays in the loop. Exact against numpy."""
    src = """func.func @rem(%c: memref<8xf32>) {
  %c8 = arith.constant 8 : index
  affine.for %i = 0 to 9 {
    %d = arith.subi %c8, %i : index
    affine.for %k = affine_map<(d0) -> (d0)>(%i) to 8 {
      %r = arith.remsi %i, %d : index
      %n = arith.index_cast %r : index to i32
      %f = arith.sitofp %n : i32 to f32
      %p = affine.load %c[%k] : memref<8xf32>
      %s = arith.addf %p, %f : f32
      affine.store %s, %c[%k] : memref<8xf32>
    }
  } {loom.tag = "rem"}
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-hoist", remarks=True)
    assert not any("hoisted out of loop %k" in r for r in kern.remarks), kern.remarks
    c = np.zeros(8, np.float32)
    kern(c)
    np.testing.assert_array_equal(c, [sum(i % (8 - i) for i in range(k + 1)) for k in range(8)])

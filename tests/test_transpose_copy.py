"""loom-transpose-copy end to end: x @ w.T (B a transposed view) through the default
schedule, whose packed panels of B are now copied as tiles transposed in registers.
Results within the bound of the float64 reference on random normal inputs and exact on
small integers, f32 and f64, on both kinds of host (tests/targets.py), shapes of 1,
primes and sizes no tile divides, one and several threads; the remark; a batch of
transposed matrices.
"""

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, small_ints
from targets import TARGETS, planning_for

import compiler
from passes.analysis.cost_model import register_tile

dim = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 15, 16, 17, 47, 48, 49, 97]), st.integers(1, 130))


def xwt(m, n, k, dtype="f32", batch=()):
    """x @ w.T, w given as N x K (the layout of torch's Linear)."""
    lead = "".join(f"{b}x" for b in batch)
    perm = ", ".join(str(d) for d in [*range(len(batch)), len(batch) + 1, len(batch)])
    tx, tw, twt, tc = (f"tensor<{lead}{r}x{c}x{dtype}>" for r, c in ((m, k), (n, k), (k, n), (m, n)))
    return f"""func.func @mm(%x: {tx}, %w: {tw}) -> {tc} {{
  %wt = loom.transpose %w {{perm = array<i64: {perm}>}} : {tw} -> {twt}
  %c = loom.matmul %x, %wt : ({tx}, {twt}) -> {tc}
  func.return %c : {tc}
}}"""


def check(src, shapes, k, dtype, pipeline, seed=0):
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    rng = np.random.default_rng(seed)
    normal = [rng.standard_normal(s).astype(dtype) for s in shapes]
    assert_within_bound(kern(*normal), compiler.reference(src, *normal), k, dtype, pipeline)
    ints = [small_ints(rng, s, dtype) for s in shapes]
    np.testing.assert_array_equal(kern(*ints), compiler.reference(src, *ints).astype(dtype), err_msg=pipeline)
    return kern


@settings(deadline=None)
@given(m=dim, n=dim, k=st.one_of(dim, st.sampled_from([385, 769])), dtype=st.sampled_from(["f32", "f64"]),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16), kind=st.sampled_from(sorted(TARGETS)))
@example(m=128, n=96, k=64, dtype="f32", threads=1, seed=0, kind="avx512")  # the panel order, whole tiles
@example(m=13, n=50, k=769, dtype="f32", threads=1, seed=0, kind="avx2")  # partial tiles both ways
@example(m=600, n=97, k=130, dtype="f64", threads=2, seed=0, kind="avx512")  # the order of row tiles, threads
def test_x_times_w_transposed_is_right(m, n, k, dtype, threads, seed, kind):
    np_dtype = np.float32 if dtype == "f32" else np.float64
    with planning_for(TARGETS[kind]):
        check(xwt(m, n, k, dtype), [(m, k), (n, k)], k, np_dtype, f"loom-default{{num-threads={threads}}}", seed)


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_the_panels_are_copied_as_transposed_tiles(kind):
    """The remark, with the target's width: 16 lanes of f32 on AVX-512, 8 on AVX2."""
    with planning_for(TARGETS[kind]) as target:
        w = target.lanes(4)
        kern = check(xwt(64, 96, 200), [(64, 200), (96, 200)], 200, np.float32, "loom-default{num-threads=1}")
    copies = [r for r in kern.remarks if "[loom-transpose-copy]" in r]
    assert copies and all(f"vectorized as {w}x{w} tiles transposed in registers" in r for r in copies), copies


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_a_batch_of_transposed_matrices(kind):
    with planning_for(TARGETS[kind]):
        kern = check(xwt(20, 70, 40, "f64", batch=(3,)), [(3, 20, 40), (3, 70, 40)], 40, np.float64,
                     "loom-default{num-threads=1}")
    assert any("[loom-transpose-copy]" in r and "vectorized" in r for r in kern.remarks)


@settings(deadline=None)
@given(rows=dim, cols=st.one_of(dim, st.sampled_from([255, 300, 511])), dtype=st.sampled_from(["f32", "f64"]),
       batch=st.sampled_from([(), (2,)]), kind=st.sampled_from(sorted(TARGETS)))
@example(rows=300, cols=40, dtype="f32", batch=(), kind="avx512")  # blocks of 128x128, a partial last block
@example(rows=4, cols=100, dtype="f32", batch=(), kind="avx512")  # narrower than a tile: scalar 8x8 tiles
@example(rows=24, cols=40, dtype="f64", batch=(2,), kind="avx2")  # 4x4 tiles (4 lanes of f64)
def test_contiguous_of_a_transposed_view_is_exact(rows, cols, dtype, batch, kind):
    """loom.contiguous of a transposed view (its tiles transposed in registers where both
    dimensions hold a tile): the same bits as numpy's ascontiguousarray."""
    lead = "".join(f"{b}x" for b in batch)
    perm = ", ".join(str(d) for d in [*range(len(batch)), len(batch) + 1, len(batch)])
    ta, tt = f"tensor<{lead}{rows}x{cols}x{dtype}>", f"tensor<{lead}{cols}x{rows}x{dtype}>"
    src = f"""func.func @c(%a: {ta}) -> {tt} {{
  %t = loom.transpose %a {{perm = array<i64: {perm}>}} : {ta} -> {tt}
  %c = loom.contiguous %t : {tt} -> {tt}
  func.return %c : {tt}
}}"""
    a = np.random.default_rng(rows * cols).standard_normal((*batch, rows, cols)).astype(dtype.replace("f", "float"))
    with planning_for(TARGETS[kind]):
        out = compiler.compile(src, pipeline="loom-default{num-threads=1}")(a)
    np.testing.assert_array_equal(out, np.ascontiguousarray(np.swapaxes(a, -1, -2)))


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_peeled_rows_take_the_row_major_copy_when_another_nest_needs_one(kind):
    """A small x @ w.T (A and B fit in L1: no packing) whose main nest reads B's rows as
    vectors gets B copied into a row-major buffer; the copy peeled off its last rows then
    streams that buffer's rows (no dot products of strided rows of the copy)."""
    with planning_for(TARGETS[kind]) as target:
        m = 30 if 30 % register_tile(target)[0] else 31
        kern = check(xwt(m, 32, 32), [(m, 32), (32, 32)], 32, np.float32, "loom-default{num-threads=1}")
    assert any("copied into a row-major buffer first" in r for r in kern.remarks), kern.remarks
    assert any("peeled copy 1" in r and "rows of B streamed once" in r for r in kern.remarks), kern.remarks
    assert not any("dot products" in r for r in kern.remarks)


def test_a_copy_within_one_buffer_stays_in_order():
    """%m[k, j] = %m[j, k] in the order of the loops (the transposed view %t is %m): each
    element read may be one written before it, which tiles that load all their rows
    first would read stale. Left scalar, with the remark; exact against the loops run in
    numpy."""
    src = """func.func @in_place(%m: memref<8x8xf32>) {
  %t = memref.reinterpret_cast %m to offset: [0], sizes: [8, 8], strides: [1, 8] : memref<8x8xf32> to memref<8x8xf32, strided<[1, 8]>>
  affine.for %j = 0 to 8 {
    affine.for %k = 0 to 8 {
      %v = affine.load %t[%k, %j] : memref<8x8xf32, strided<[1, 8]>>
      affine.store %v, %m[%k, %j] : memref<8x8xf32>
    }
  }
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-transpose-copy{width=4}", remarks=True)
    assert any("left scalar: %t[%k, %j] and %m[%k, %j] may be one buffer" in r for r in kern.remarks), kern.remarks
    m = small_ints(np.random.default_rng(3), (8, 8), np.float32)
    want = m.astype(np.float64)
    for j in range(8):
        for k in range(8):
            want[k, j] = want[j, k]
    kern(m)
    np.testing.assert_array_equal(m, want)


def test_a_triangular_copy_stays_scalar():
    """%m[k, j] = %w[j, k] for k >= j only (%k starts at %j): width x width tiles would
    copy whole squares, below the diagonal too. Left scalar, with the remark; the
    elements below the diagonal keep their values, exact against numpy."""
    src = """func.func @upper(%w: memref<8x8xf32>, %m: memref<8x8xf32>) {
  %t = memref.reinterpret_cast %w to offset: [0], sizes: [8, 8], strides: [1, 8]
    : memref<8x8xf32> to memref<8x8xf32, strided<[1, 8]>>
  affine.for %j = 0 to 8 {
    affine.for %k = affine_map<(d0) -> (d0)>(%j) to 8 {
      %v = affine.load %t[%k, %j] : memref<8x8xf32, strided<[1, 8]>>
      affine.store %v, %m[%k, %j] : memref<8x8xf32>
    }
  }
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-transpose-copy{width=4}", remarks=True)
    assert any("left scalar: the bounds of %k use %j" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(4)
    w, m = small_ints(rng, (8, 8), np.float32), small_ints(rng, (8, 8), np.float32)
    want = np.where(np.tril(np.ones((8, 8), bool)), w.T, m)
    kern(w, m)
    np.testing.assert_array_equal(m, want)


def _near_copy(load: str, store: str, source=((8, 8), (1, 8)), dest=((8, 8), (8, 1))) -> str:
    """%d[store] = %t[load] over %j, %k < 8, %t and %d views (shape, strides) of two flat
    buffers of 128 elements: with the defaults, %t[%k, %j] to %d[%k, %j] is a transposing
    copy."""
    def view(name, flat, shape_strides):
        (rows, cols), (s0, s1) = shape_strides
        t = f"memref<{rows}x{cols}xf32, strided<[{s0}, {s1}]>>"
        return t, (f"  %{name} = memref.reinterpret_cast %{flat} to offset: [0], sizes: [{rows}, {cols}], "
                   f"strides: [{s0}, {s1}]\n    : memref<128xf32> to {t}\n")
    (tt, tv), (dt, dv) = view("t", "w", source), view("d", "m", dest)
    return f"""func.func @c(%w: memref<128xf32>, %m: memref<128xf32>) {{
{tv}{dv}  affine.for %j = 0 to 8 {{
    affine.for %k = 0 to 8 {{
      %v = affine.load %t[{load}] : {tt}
      affine.store %v, %d[{store}] : {dt}
    }}
  }}
  func.return
}}"""


#: case -> (source, transposed in registers): each one thing off the transposing copy
NEAR_COPIES = {
    "transposing": (_near_copy("%k, %j", "%k, %j"), True),
    "subscript_not_linear": (_near_copy("%k, (%j + %k) mod 8", "%k, %j"), False),
    "load_stride_2": (_near_copy("2 * %k, %j", "%k, %j", source=((16, 8), (1, 16))), False),
    "load_walks_two_dims": (_near_copy("%k, %j + %k", "%k, %j", source=((8, 16), (1, 8))), False),
    "load_along_a_strided_dim": (_near_copy("%k, %j", "%k, %j", source=((8, 8), (2, 16))), False),
    "load_along_its_last_dim": (_near_copy("%j, %k", "%k, %j", source=((8, 8), (8, 1))), False),
    "store_stride_2": (_near_copy("%k, %j", "%k, 2 * %j", dest=((8, 16), (16, 1))), False),
    "store_walks_two_dims": (_near_copy("%k, %j", "%k + %j, %j", dest=((16, 8), (8, 1))), False),
    "store_moves_along_the_load": (_near_copy("%k, %j", "%k, %j + %k", dest=((8, 16), (16, 1))), False),
    "store_into_a_strided_row": (_near_copy("%k, %j", "%k, %j", dest=((8, 8), (1, 8))), False),
}


@pytest.mark.parametrize("case", sorted(NEAR_COPIES))
def test_only_a_transposing_copy_is_transposed(case):
    """A copy one step off the transposing one (a subscript not linear, a stride
    other than 1 on either side, a load or store that moves along two dimensions or the
    wrong one) is left as it is: exactly what the loops compute, run unscheduled."""
    src, transposed = NEAR_COPIES[case]
    kern = compiler.compile(src, pipeline="loom-transpose-copy{width=4}", remarks=True)
    assert any("transposed in registers" in r for r in kern.remarks) == transposed, kern.remarks
    rng = np.random.default_rng(5)
    w = small_ints(rng, (128,), np.float32)
    got = small_ints(rng, (128,), np.float32)
    want = got.copy()
    compiler.compile(src, pipeline="naive")(w, want)
    kern(w, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("width", [-4, 1, 3, 6])
def test_a_width_that_is_not_a_power_of_two_of_at_least_2_is_refused(width):
    """width=1 would be tiles of one element (vectors of one lane): refused as the other
    widths that are not a power of two of at least 2 are; 2 and 4 tile the 8x8 copy."""
    src = NEAR_COPIES["transposing"][0]
    with pytest.raises(compiler.LoomError, match=re.escape(f"must be a power of two of at least 2 (or 0: the "
                                                           f"target's), got {width}")):
        compiler.compile(src, pipeline=f"loom-transpose-copy{{width={width}}}")
    for accepted in (2, 4):
        kern = compiler.compile(src, pipeline=f"loom-transpose-copy{{width={accepted}}}", remarks=True)
        assert any("transposed in registers" in r for r in kern.remarks), kern.remarks

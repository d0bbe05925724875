"""loom-pack: packed kernels against numpy, and against the same schedule unpacked.

Packing moves where the data is read from, not the order of the arithmetic, so a packed
kernel gives the same bits as the tiled kernel without packing; against numpy (float64)
random inputs are checked within 4*K*eps*max|ref| and small-integer inputs exactly.
Shapes: 1, primes, tile sizes that do not divide the extents (remainder tiles), panels
that do not divide the tiles (padded buffers), batched matmul, conv2d with stride and
padding.
"""

import itertools
import re

import numpy as np
import pytest

import compiler
from kernels import assert_within_bound, conv2d, matmul, small_ints


def tiled(mc, nc, kc, *packs: str) -> str:
    return ",".join([f"loom-tile{{sizes={mc},{nc},{kc} op=matmul}}", *packs])


def pack(operand: int, level: int, panel: int | None = None) -> str:
    return f"loom-pack{{operand={operand} level={level}{f' panel={panel}' if panel else ''} op=matmul}}"


def blis(mc, nc, kc, mr, nr) -> str:
    """Cache tiles MC x NC x KC, B packed in panels of NR columns, A in panels of MR rows."""
    return tiled(mc, nc, kc, pack(1, 2, nr), pack(0, 2, mr))


CASES = [
    pytest.param((1, 1, 1), blis(8, 8, 8, 4, 4), id="1x1x1"),
    pytest.param((7, 13, 5), tiled(4, 4, 4, pack(1, 2), pack(0, 2)), id="primes"),
    # remainder tiles on j and k, A's panels padded (32 = 5 * 6 + 2)
    pytest.param((64, 50, 70), blis(32, 64, 16, 6, 16), id="remainders"),
    # remainders everywhere, both layouts padded
    pytest.param((33, 17, 65), blis(16, 32, 8, 5, 6), id="padded-panels"),
    # two levels of tiles: B at the cache tile (k_t) in panels that the register tiles of
    # j walk one by one, A at the register tile of i (i_t2, level 3)
    pytest.param(
        (29, 31, 37), tiled(16, 16, 8, "loom-tile{sizes=4,8 depth=3 op=matmul}", pack(1, 2, 8), pack(0, 3)),
        id="two-levels",
    ),
    # register tiles of 8 columns in panels of 16: every other tile starts mid-panel, so
    # a tile's offset in its panel is not j - j_t2
    pytest.param(
        (29, 31, 37), tiled(16, 32, 8, "loom-tile{sizes=4,8 depth=3 op=matmul}", pack(1, 2, 16)),
        id="half-panel-tiles",
    ),
]


@pytest.mark.parametrize("shape, pipeline", CASES)
def test_matmul(shape, pipeline):
    m, k, n = shape
    src = matmul((m, k), (k, n), (m, n), np.float32)
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(m, k), (k, n)])
    packed = compiler.compile(src, pipeline=pipeline, remarks=True)
    assert sum("loom-pack] packed" in str(r) for r in packed.remarks) == pipeline.count("loom-pack")
    out = packed(a, b)
    assert_within_bound(out, compiler.reference(src, a, b), k, np.float32)
    # same arithmetic in the same order as the tiled kernel: the same bits
    unpacked = pipeline.split(",loom-pack")[0]
    np.testing.assert_array_equal(out, compiler.compile(src, pipeline=unpacked)(a, b))
    ia, ib = (small_ints(rng, x.shape, np.float32) for x in (a, b))
    np.testing.assert_array_equal(packed(ia, ib), (ia.astype(np.int64) @ ib.astype(np.int64)).astype(np.float32))


def test_batched_matmul_f64():
    bsz, m, k, n = 3, 11, 9, 13
    src = matmul((bsz, m, k), (bsz, k, n), (bsz, m, n), np.float64)
    # tile (i, j, k) under the batch loop: (b, i_t, j_t, k_t, i, j, k); pack at k_t (level 3);
    # the batch index is fixed in each tile
    pipeline = (
        "loom-tile{sizes=4,8,4 depth=1 op=matmul},"
        "loom-pack{operand=1 level=3 panel=4 op=matmul},loom-pack{operand=0 level=3 panel=3 op=matmul}"
    )
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((bsz, m, k)), rng.standard_normal((bsz, k, n))
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    text = "\n".join(map(str, kern.remarks))
    assert "packed B (%b) of nest 'matmul': tile 4x8 at loop %k_t (level 3) as panels [2][4][4], 256 B" in text
    assert (
        "packed A (%a) of nest 'matmul': tile 4x4 at loop %k_t (level 3) as panels [2][4][3] (the last panel padded)"
        in text
    )
    assert_within_bound(kern(a, b), compiler.reference(src, a, b), k, np.float64)


def test_conv2d_strided_padded():
    # X's window inside ow (c, r, s walk it with unit strides), clamped to the input
    # where the padding is; W's filter of one output channel inside f.
    x_shape, w_shape, strides, padding = (2, 3, 9, 8), (4, 3, 3, 2), (2, 1), (1, 1)
    y_shape = (2, 4, 5, 9)
    src = conv2d(x_shape, w_shape, y_shape, strides, padding, (1, 1), np.float32)
    pipeline = "loom-pack{operand=0 level=3 op=conv2d},loom-pack{operand=1 level=1 op=conv2d}"
    rng = np.random.default_rng(6)
    x, w = small_ints(rng, x_shape, np.float32), small_ints(rng, w_shape, np.float32)
    out = compiler.compile(src, pipeline=pipeline)(x, w)
    np.testing.assert_array_equal(out, compiler.reference(src, x, w).astype(np.float32))


def test_refuses_the_output():
    src = matmul((4, 4), (4, 4), (4, 4), np.float32)
    written = r"cannot pack C \(%c\) of nest 'matmul': it is written inside the nest"
    with pytest.raises(compiler.LoomError, match=written):
        compiler.compile(src, pipeline=tiled(2, 2, 2, pack(2, 2)))


def test_refuses_a_strided_input_row():
    # conv2d's input rows, oh * 2 + r - 1, when both oh and r are inside the level
    src = conv2d((1, 1, 7, 7), (1, 1, 3, 3), (1, 1, 4, 4), (2, 2), (1, 1), (1, 1), np.float32)
    with pytest.raises(compiler.LoomError, match=r"subscript 2 \(2 \* %oh \+ %r - 1\) combines loops %oh and %r"):
        compiler.compile(src, pipeline="loom-pack{operand=0 level=1 op=conv2d}")


def test_packs_a_broadcast_operand():
    """B one row broadcast (stride 0, only read): packed like any operand, into a buffer
    that repeats the row; exact on small integers."""
    src = """func.func @mm(%a: memref<8x8xf32>, %b: memref<8x8xf32, strided<[0, 1]>>, %c: memref<8x8xf32>) {
  loom.matmul ins(%a, %b : memref<8x8xf32>, memref<8x8xf32, strided<[0, 1]>>) outs(%c : memref<8x8xf32>)
  func.return
}"""
    rng = np.random.default_rng(8)
    a = small_ints(rng, (8, 8), np.float32)
    b = np.broadcast_to(small_ints(rng, (8,), np.float32), (8, 8))
    c = np.full((8, 8), np.nan, np.float32)
    kern = compiler.compile(src, pipeline=tiled(4, 4, 4, pack(1, 2, 2), pack(0, 2)), remarks=True)
    assert sum("loom-pack] packed" in str(r) for r in kern.remarks) == 2
    kern(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


#: the operand read is %m, %a or %c chosen at run time: a buffer of unknown origin, which
#: may be the output's
UNKNOWN_OPERAND = """func.func @mm(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>, %flag: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %f = memref.load %flag[%c0] : memref<1xf32>
  %cond = arith.cmpf ogt, %f, %zero : f32
  %m = arith.select %cond, %a, %c : memref<8x8xf32>
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %m[%i, %k] : memref<8x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x8xf32>
        %z = affine.load %c[%i, %j] : memref<8x8xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}"""


@pytest.mark.parametrize("pipeline", ["naive", pack(0, 0), pack(1, 0)])
def test_an_operand_of_unknown_origin_is_not_packed(pipeline):
    """%m may be %c, which the nest writes: a copy of it taken before the loops would miss
    those writes. Packing it is refused (memref_root took %m for %a: it was packed); B,
    beside it, is packed and the results are those of the loops in order."""
    try:
        kern = compiler.compile(UNKNOWN_OPERAND, pipeline=pipeline)
    except compiler.LoomError as e:
        assert "cannot pack A (%m) of nest 'matmul': %m, the result of 'arith.select', may be the buffer " \
               "'affine.store' writes inside the nest" in str(e), str(e)
        assert pipeline == pack(0, 0), str(e)
        return
    rng = np.random.default_rng(9)
    a, b, c = (small_ints(rng, (8, 8), np.float32) for _ in range(3))
    for flag in (1.0, -1.0):
        want = c.astype(np.float64)
        m = a.astype(np.float64) if flag > 0 else want
        for i, j, k in itertools.product(range(8), repeat=3):
            want[i, j] += m[i, k] * b[k, j]
        got = c.copy()
        kern(a, b, got, np.array([flag], np.float32))
        np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("options, message", [
    ("operand=-1 level=2", "option 'operand' must be >= 0, got -1"),
    ("operand=1 level=-1", "option 'level' must be >= 0, got -1"),
    ("level=2", "option 'operand' is required (an integer >= 0)"),
    ("operand=1", "option 'level' is required (an integer >= 0)"),
    ("operand=1 level=2 private=2", "option 'private' must be the level of a loop around the copy's, 0 to level - 1, "
                                    "got 2"),
    ("operand=1 level=2 private=-1", "option 'private' must be the level of a loop around the copy's, 0 to level - 1, "
                                     "got -1"),
    ("operand=1 level=2 panel=0", "option 'panel' must be a positive integer, got 0"),
    ("operand=3 level=2", "option 'operand' is 3, but nest 'matmul' reads 3 memrefs (operands 0..2)"),
    ("operand=1 level=6", "option 'level' is 6, but the read of %b in nest 'matmul' is inside 6 loops (levels 0..5)"),
])
def test_pack_option_refusals(options, message):
    src = matmul((8, 8), (8, 8), (8, 8), np.float32)
    with pytest.raises(compiler.LoomError, match=re.escape(f"loom-pack: {message}")):
        compiler.compile(src, pipeline=tiled(4, 4, 4, f"loom-pack{{{options} op=matmul}}"))


@pytest.mark.parametrize("options, packed", [
    ("operand=1 level=2 private=1", "into memref<2x4x4xf32>, a slot per iteration of %j_t (private)"),
    ("operand=1 level=2 private=0 panel=4", "as panels [2][1][4][4], a slot per iteration of %i_t (private)"),
    ("operand=1 level=2 panel=1", "as panels [4][4][1]"),
])
def test_pack_last_accepted_options(options, packed):
    """private at level - 1 and at 0, a panel of 1: packed, exact on small integers."""
    src = matmul((8, 8), (8, 8), (8, 8), np.float32)
    kern = compiler.compile(src, pipeline=tiled(4, 4, 4, f"loom-pack{{{options} op=matmul}}"), remarks=True)
    assert any(f"packed B (%b) of nest 'matmul': tile 4x4 at loop %k_t (level 2) {packed}" in r
               for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(13)
    a, b = small_ints(rng, (8, 8), np.float32), small_ints(rng, (8, 8), np.float32)
    np.testing.assert_array_equal(kern(a, b), a.astype(np.float64) @ b)


def test_private_slots_count_the_partial_last_iteration():
    """private= over %j_t from 0 to 10 step 4: 3 iterations (the last over 2 columns), 3
    slots; with 2, the third iteration's tile lands past the buffer. Exact on small integers."""
    src = matmul((10, 10), (10, 10), (10, 10), np.float32)
    kern = compiler.compile(src, pipeline=tiled(4, 4, 4, "loom-pack{operand=1 level=2 private=1 op=matmul}"),
                            remarks=True)
    assert any("into memref<3x4x4xf32>, a slot per iteration of %j_t (private)" in r for r in kern.remarks), \
        kern.remarks
    rng = np.random.default_rng(14)
    a, b = small_ints(rng, (10, 10), np.float32), small_ints(rng, (10, 10), np.float32)
    np.testing.assert_array_equal(kern(a, b), a.astype(np.float64) @ b)


def test_a_level_no_nest_has_is_refused_without_op():
    """Without op=, a nest the options do not fit is skipped with a remark, but a level
    that no nest has (6 = the depth of the read of %b) packs nothing: refused."""
    src = matmul((8, 8), (8, 8), (8, 8), np.float32)
    with pytest.raises(compiler.LoomError, match=re.escape("loom-pack: option 'level' is 6, but the read of %b")):
        compiler.compile(src, pipeline=tiled(4, 4, 4, "loom-pack{operand=1 level=6}"))

"""loom-pack: packed kernels against numpy, and against the same schedule unpacked.

Packing moves where the data is read from, not the order of the arithmetic, so a packed
kernel gives the same bits as the tiled kernel without packing; against numpy (float64)
random inputs are checked within 4*K*eps*max|ref| and small-integer inputs exactly.
Shapes: 1, primes, tile sizes that do not divide the extents (remainder tiles), panels
that do not divide the tiles (padded buffers), batched matmul, conv2d with stride and
padding.
"""

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

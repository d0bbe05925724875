"""loom-peel end to end: the register micro-kernel pipeline (peel the rows and columns
that do not fill a 6x16 register tile off into copies of the nest, tile for the caches
and the registers, pack B and A, vectorize, unroll-and-jam the 6 rows and unroll the 2
vectors of the 6x16 block, hoist C's block out of k) on matmuls of random shapes and cache-tile sizes, compiled with
`compiler.compile(pipeline=...)` and compared with numpy: within 4*K*eps*max|ref| on
random inputs, bit-exactly on small integers (whose products and sums are exact in f32 in
any order). Then a batched matmul against `naive`, the remarks, and the refusals.

The default run is a short fixed-seed sample (tests/conftest.py; each compile takes
1-4 s); `HYPOTHESIS_PROFILE=long pytest tests/test_peel.py` explores.
"""

import re

import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, check_both, matmul, small_ints

import compiler


def micro_kernel(mc: int, nc: int, kc: int, peel_op: bool = True) -> str:
    """The register micro-kernel pipeline for matmul, with MC x NC x KC cache tiles. With
    `peel_op=False`, loom-peel runs on every nest (the init nest is peeled too).

    The vector width is part of the schedule, so it is written out (`width=0` would take
    the target's): 16 columns are two vectors of 8, a j loop of 2 that loom-unroll
    unrolls. The j loop is not given an unroll-jam factor: in a peeled copy narrower than
    a vector (the last 5 columns) it is one masked vector, no loop, and its band is one
    loop shorter than the main nest's; `op=matmul` makes a factor list longer than a band
    an error. The 7 factors (i by 6) fit both bands."""
    sel = " op=matmul" if peel_op else ""
    return (
        f"loom-peel{{sizes=6,16{sel}}},"
        f"loom-tile{{sizes={mc},{nc},{kc} op=matmul}},"
        "loom-tile{sizes=6,16 op=matmul depth=3},"
        "loom-interchange{order=1,2,0,4,3,7,5,6 op=matmul},"
        "loom-pack{operand=1 level=1 panel=16},"
        "loom-pack{operand=0 level=2 panel=6},"
        "loom-vectorize{width=8 op=matmul},"
        "loom-unroll-jam{factors=1,1,1,1,1,1,6 op=matmul},"
        "loom-unroll{factor=2 op=matmul},"
        "loom-hoist{op=matmul}"
    )


# 1, primes, multiples of 6 and of 16 and their neighbours, the largest
EDGE_DIMS = [1, 2, 5, 6, 7, 11, 12, 13, 16, 17, 23, 31, 32, 37, 47, 48, 61, 67, 70]
dim = st.one_of(st.sampled_from(EDGE_DIMS), st.integers(1, 70))

# Each example compiles once (1-4 s): fewer than the default profile's 20, unless a
# longer profile was asked for.
_EXAMPLES = settings().max_examples
EXAMPLES = min(_EXAMPLES, 8) if _EXAMPLES <= 20 else _EXAMPLES


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    m=dim, n=dim, k=dim,
    mc=st.sampled_from([6, 12, 18, 24]), nc=st.sampled_from([16, 32, 48]), kc=st.sampled_from([4, 8, 13]),
    peel_op=st.booleans(),
)
@example(m=1, n=1, k=1, mc=6, nc=16, kc=4, peel_op=True)  # nothing to peel: all remainder
@example(m=12, n=32, k=8, mc=12, nc=32, kc=8, peel_op=True)  # nothing to peel: all full tiles
@example(m=10, n=37, k=5, mc=24, nc=48, kc=13, peel_op=False)  # both loops peeled, the init nest too
@example(m=70, n=67, k=61, mc=18, nc=48, kc=13, peel_op=True)  # partial cache tiles everywhere
def test_micro_kernel_matches_numpy(m, n, k, mc, nc, kc, peel_op):
    src = matmul((m, k), (k, n), (m, n), np.float32)
    pipeline = micro_kernel(mc, nc, kc, peel_op)
    note(f"M={m} N={n} K={k}: {pipeline}")
    check_both(src, [(m, k), (k, n)], k, pipeline)


def test_main_nest_gets_full_register_tiles():
    """What the peel is for: in the main nest of a 10x37 matmul (rows [0, 6), columns
    [0, 32)), the 6-row point loop has a constant extent and is unrolled whole (the main
    loop's single iteration replaced by its body); the copies peeled off are scheduled too."""
    src = matmul((10, 5), (5, 37), (10, 37), np.float32)
    kern = compiler.compile(src, pipeline=micro_kernel(24, 48, 13), remarks=True)
    assert any(
        "[loom-peel] nest 'matmul' peeled for sizes [6, 16]: %i: iterations [0, 6) in the main nest, "
        "the last 4 in a copy; %j: iterations [0, 32) in the main nest, the last 5 in a copy" in r
        for r in kern.remarks
    ), kern.remarks
    jams = [r for r in kern.remarks if "[loom-unroll-jam]" in r]
    assert len(jams) == 3, jams  # the main nest and the two copies
    assert "i by 6 (trip count 6: 1 main iterations, 0 in the cleanup loop)" in jams[0], jams
    tiles = [r for r in kern.remarks if "[loom-tile] nest 'matmul': tiled (i, j, k) at depth 0" in r]
    assert [t.split("applied ")[1] for t in tiles] == ["[6, 32, 5]", "[6, 5, 5]", "[4, 37, 5]"], tiles


# --------------------------------------------------------------------------------------
# Batched matmul


BATCHED_PEEL = (
    "loom-peel{sizes=1,6,16 op=matmul},"
    "loom-tile{sizes=1,6,16 op=matmul},"
    "loom-interchange{order=0,1,2,3,6,4,5 op=matmul},"
    "loom-vectorize{width=16 op=matmul},"  # 16 columns, one vector: the j loop is gone
    "loom-unroll-jam{factors=1,1,1,1,1,6 op=matmul},"  # i by 6 (no j loop left for a factor)
    "loom-hoist{op=matmul}"
)


@pytest.mark.parametrize("bmkn", [(3, 10, 5, 37), (2, 13, 7, 17), (1, 6, 3, 16), (2, 1, 1, 1), (2, 5, 4, 15)])
@pytest.mark.parametrize("pipeline", [BATCHED_PEEL, "loom-peel{sizes=1,6,16}"], ids=["register-tile", "peel-only"])
def test_batched_peel_matches_naive(bmkn, pipeline):
    """The batched band (b, i, j, k): sizes=1,6,16 leaves the batch loop alone and peels
    i and j. The result equals naive's bit for bit on small integers, and both are within
    the bound of numpy on random inputs."""
    b, m, k, n = bmkn
    src = matmul((b, m, k), (b, k, n), (b, m, n), np.float32)
    shapes = [(b, m, k), (b, k, n)]
    peeled, naive = compiler.compile(src, pipeline=pipeline), compiler.compile(src)
    rng = np.random.default_rng(1)
    ints = [small_ints(rng, s, np.float32) for s in shapes]
    np.testing.assert_array_equal(peeled(*ints), naive(*ints))
    normal = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ref = compiler.reference(src, *normal)
    assert_within_bound(peeled(*normal), ref, k, np.float32, pipeline)
    assert_within_bound(naive(*normal), ref, k, np.float32, "naive")


# --------------------------------------------------------------------------------------
# Bugs


# A nest whose outermost loop carries a value (iter_args): a sum of 10 elements.
ITER_SUM = """func.func @sum(%A: memref<10xf32>, %out: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %s = affine.for %i = 0 to 10 iter_args(%acc = %z) -> (f32) {
    %v = affine.load %A[%i] : memref<10xf32>
    %n = arith.addf %acc, %v : f32
    affine.yield %n : f32
  } {loom.tag = "sum"}
  affine.store %s, %out[0] : memref<1xf32>
  func.return
}"""


def _run_sum(pipeline: str) -> float:
    kern = compiler.compile(ITER_SUM, pipeline=pipeline)
    out = np.zeros(1, np.float32)
    kern(np.arange(10, dtype=np.float32), out)
    return float(out[0])


def test_sum_with_iter_args_naive():
    assert _run_sum("naive") == 45.0


def test_peel_refuses_a_root_loop_with_iter_args():
    """Splitting a loop that carries values would restart them in the copy: refused."""
    from passes.support.diagnostics import LoomError

    with pytest.raises(LoomError, match="carries values"):
        _run_sum("loom-peel{sizes=4 op=sum}")
    assert _run_sum("loom-peel{sizes=4}") == 45.0  # without op=: skipped with a remark


# Two nests with one tag: the first can be peeled, the second (rows up to %n) cannot.
TWO_NESTS = """func.func @two(%m: memref<?x37xf32>, %n: index, %v: f32) {
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 37 {
      affine.store %v, %m[%i, %j] : memref<?x37xf32>
    }
  } {loom.tag = "x"}
  affine.for %i = 0 to %n {
    affine.for %j = 0 to 37 {
      affine.store %v, %m[%i, %j] : memref<?x37xf32>
    }
  } {loom.tag = "x"}
  func.return
}"""


def _refused_peel_of_two_nests():
    """(module text before, module text after, remarks) of loom-peel{sizes=6,16 op=x}."""
    from dialects.context import make_context
    from passes.support.diagnostics import LoomError
    from compiler.build import load_module
    from passes.pipelines import build
    from passes.support.remarks import collect

    module = load_module(TWO_NESTS)
    before = str(module)
    with collect() as remarks, pytest.raises(LoomError, match="no constant bounds"):
        build("loom-peel{sizes=6,16 op=x}").apply(make_context(), module)
    return before, str(module), [str(r) for r in remarks]


def test_refusal_of_one_nest_changes_no_nest():
    """Every nest is checked before any is split: the second nest's refusal leaves the
    first one as it was."""
    before, after, _ = _refused_peel_of_two_nests()
    assert after == before


def test_refusal_of_one_nest_remarks_no_peel():
    _, _, remarks = _refused_peel_of_two_nests()
    assert not any("peeled" in r for r in remarks), remarks


def _in_place(load: str, store: str) -> str:
    """%A[store] = %A[load] + 1 over 3 x 10."""
    return f"""func.func @inplace(%A: memref<4x11xf32>) {{
  %one = arith.constant 1.0 : f32
  affine.for %i = 0 to 3 {{
    affine.for %j = 0 to 10 {{
      %v = affine.load %A[{load}] : memref<4x11xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[{store}] : memref<4x11xf32>
    }}
  }} {{loom.tag = "inplace"}}
  func.return
}}"""


@pytest.mark.parametrize("load, store, refused", [
    # (1, 7) reads what (0, 8) wrote: the copy of j >= 8 would run after it
    ("%i, %j + 1", "%i + 1, %j", "store %A[%i + 1, %j] (line 7) -> load %A[%i, %j + 1] (line 5), direction (<, >)"),
    ("%i, %j", "%i, %j", None),  # each element read and written in one iteration: peeled
])
def test_peel_refuses_to_reorder_a_dependence(load, store, refused):
    """Splitting %j runs its last iterations after all the others: refused (with op=, else
    skipped) when a dependence is not within one iteration; exact against the loops."""
    from passes.support.diagnostics import LoomError

    src = _in_place(load, store)
    if refused:
        with pytest.raises(LoomError, match=re.escape(f"cannot peel nest 'inplace': peeling would reorder the "
                                                      f"dependence {refused}")):
            compiler.compile(src, pipeline="loom-peel{sizes=1,4 op=inplace}")
    kern = compiler.compile(src, pipeline="loom-peel{sizes=1,4}", remarks=True)
    assert any("the last 2 in a copy" in r for r in kern.remarks) == (refused is None), kern.remarks
    a = small_ints(np.random.default_rng(2), (4, 11), np.float32)
    want = a.copy()
    compiler.compile(src, pipeline="naive")(want)
    kern(a)
    np.testing.assert_array_equal(a, want)


def test_a_loop_that_does_not_start_at_zero_is_split_inside_its_range():
    """%i = 5 to 12, sizes=4: the main nest keeps [5, 9), the copy runs [9, 12); a split
    counted from 0 (at 4) would make the copy run iteration 4 too."""
    src = """func.func @late(%A: memref<13xf32>) {
  %one = arith.constant 1.0 : f32
  affine.for %i = 5 to 12 {
    %v = affine.load %A[%i] : memref<13xf32>
    %w = arith.addf %v, %one : f32
    affine.store %w, %A[%i] : memref<13xf32>
  } {loom.tag = "late"}
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-peel{sizes=4 op=late}", remarks=True)
    assert any("iterations [5, 9) in the main nest, the last 3 in a copy" in r for r in kern.remarks), kern.remarks
    a = np.zeros(13, np.float32)
    kern(a)
    np.testing.assert_array_equal(a, [0] * 5 + [1] * 7 + [0])

"""loom-interchange and loom-unroll-jam end to end: every interchange order of matmul,
orders of batched matmul and conv2d, unroll-jam factor sets with dividing and
non-dividing trip counts, compiled with `compiler.compile(pipeline=...)` and compared with
numpy: within 4*K*eps*max|ref| on random inputs, bit-exactly on small integers (whose
products and sums are exact in f32 in any order). Plus the Python side of refusals
and remarks."""

import itertools
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels import TRIANGLE, check_both, conv2d_kernel, matches_naive, matmul, small_ints

import compiler


def order(o) -> str:
    return ",".join(map(str, o))


# --------------------------------------------------------------------------------------
# matmul: every order, sizes 1, primes, non-dividing


MATMUL_SHAPES = [(5, 7, 3), (1, 4, 6), (7, 1, 5), (3, 5, 1), (11, 13, 2), (2, 3, 17)]


@pytest.mark.parametrize(
    "perm, mkn", list(zip(itertools.permutations(range(3)), MATMUL_SHAPES)), ids=lambda x: order(x)
)
def test_matmul_every_order(perm, mkn):
    m, k, n = mkn
    src = matmul((m, k), (k, n), (m, n), np.float32)
    check_both(src, [(m, k), (k, n)], k, f"loom-interchange{{order={order(perm)}}}")


@pytest.mark.parametrize(
    "pipeline",
    [
        "loom-unroll-jam{factors=2,2}",  # 6 = 3 * 2, 5 = 2 * 2 + 1
        "loom-unroll-jam{factors=4,4}",  # remainders on both loops
        "loom-unroll-jam{factors=1,3}",
        "loom-unroll-jam{factors=7}",  # lowered to the trip count 6
        "loom-interchange{order=0,2,1},loom-unroll-jam{factors=4,4}",  # i, k, j: k unrolled too
        "loom-interchange{order=1,0,2},loom-unroll-jam{factors=3,2}",
        "loom-interchange{order=2,0,1},loom-unroll-jam{factors=2,5}",
        "loom-interchange{order=1,0},loom-unroll-jam{factors=2,2}",  # j, i, k: k stays innermost
    ],
)
def test_matmul_unroll_jam(pipeline):
    m, k, n = 6, 7, 5
    check_both(matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], k, pipeline)


def test_matmul_tiled_then_unroll_jammed():
    """The point loops of a tile have non-constant bounds: the split points are
    affine.apply/affine.min ops."""
    m, k, n = 10, 9, 11
    pipeline = "loom-tile{sizes=4,4,4},loom-interchange{order=0,1,2,3,5,4},loom-unroll-jam{factors=1,1,1,2,3}"
    check_both(matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], k, pipeline)


@pytest.mark.parametrize(
    "pipeline",
    [
        # the point loops of tiles of 3 (4) run at most 3 (4) times: factors lowered to that
        "loom-tile{sizes=3,3,3},loom-unroll-jam{factors=1,1,1,8,8}",
        "loom-tile{sizes=4,4,4},loom-unroll{factor=100}",
        "loom-tile{sizes=4,4,4},loom-unroll-jam{factors=1,1,1,1000000,1000000},loom-unroll{factor=1000000}",
    ],
)
def test_matmul_factors_lowered_to_the_tile(pipeline):
    m, k, n = 10, 9, 11
    check_both(matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], k, pipeline)


@pytest.mark.parametrize(
    "pipeline",
    [
        # C carried across k first: the band is (i, j), the k loop with its iter_args is
        # copied whole (issue 9: this order raised from loop_transforms._fuse)
        "loom-hoist,loom-unroll-jam{factors=2,2}",
        "loom-hoist,loom-unroll-jam{factors=4,3}",  # cleanup loops on both
        "loom-hoist{op=matmul},loom-unroll-jam{factors=2,2 op=matmul},loom-hoist,loom-unroll{factor=3}",
        "loom-tile{sizes=4,4,4},loom-hoist,loom-unroll-jam{factors=1,1,1,2,2}",
        "loom-hoist,loom-default",
    ],
)
def test_matmul_hoist_then_unroll_jam(pipeline):
    m, k, n = 6, 7, 5
    check_both(matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], k, pipeline)


@pytest.mark.parametrize(
    "pipeline",
    [
        "loom-interchange{order=3,2,1,0}",
        "loom-interchange{order=1,0,3,2}",
        "loom-interchange{order=0,1,3,2},loom-unroll-jam{factors=2,2,2}",
        "loom-unroll-jam{factors=1,3,2}",
        "loom-hoist,loom-unroll-jam{factors=3,3,3}",
        "loom-hoist,loom-default",
    ],
)
def test_batched_matmul(pipeline):
    b, m, k, n = 3, 5, 4, 7
    src = matmul((b, m, k), (b, k, n), (b, m, n), np.float32)
    check_both(src, [(b, m, k), (b, k, n)], k, pipeline)


# --------------------------------------------------------------------------------------
# conv2d


CONVS = [
    # (n, c, h, w), (f, r, s), strides, padding, dilations
    ((1, 2, 6, 5), (3, 3, 2), (1, 1), (1, 0), (1, 1)),
    ((2, 3, 7, 6), (2, 2, 3), (2, 1), (0, 1), (1, 2)),
]


def conv_case(i):
    (n, c, h, w), (f, r, s), strides, padding, dilations = CONVS[i]
    return conv2d_kernel((n, c, h, w, f, r, s, strides, padding, dilations), np.float32)


@pytest.mark.parametrize(
    "case, pipeline",
    [
        (0, "loom-interchange{order=0,4,5,6,1,2,3}"),
        (1, "loom-interchange{order=6,5,4,3,2,1,0}"),
        (0, "loom-interchange{order=0,2,3,4,5,6,1},loom-unroll-jam{factors=1,2,1,1,1,2}"),
        (1, "loom-unroll-jam{factors=1,2,2}"),
        (1, "loom-interchange{order=0,1,4,5,6,2,3},loom-unroll-jam{factors=1,2,1,1,1,2}"),
    ],
)
def test_conv2d(case, pipeline):
    src, shapes, k = conv_case(case)
    check_both(src, shapes, k, pipeline)


# --------------------------------------------------------------------------------------
# Random schedules (a fixed sample by default; HYPOTHESIS_PROFILE=long explores)


@st.composite
def schedules(draw):
    kind = draw(st.sampled_from(["matmul", "batched", "conv2d"]))
    if kind == "conv2d":
        src, shapes, k = conv_case(draw(st.integers(0, len(CONVS) - 1)))
        depth = 7
    else:
        dims = st.sampled_from([1, 2, 3, 5, 7])
        m, k, n = draw(dims), draw(dims), draw(dims)
        if kind == "matmul":
            src, shapes, depth = matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], 3
        else:
            b = draw(st.integers(1, 3))
            src, shapes, depth = matmul((b, m, k), (b, k, n), (b, m, n), np.float32), [(b, m, k), (b, k, n)], 4
    perm = draw(st.permutations(range(depth)))
    # keep the jammed body small: compile time grows with it
    factors = draw(st.lists(st.integers(1, 2 if kind == "conv2d" else 3), min_size=1, max_size=min(3, depth - 1)))
    pipeline = f"loom-interchange{{order={order(perm)}}},loom-unroll-jam{{factors={order(factors)}}}"
    return src, shapes, k, pipeline


@given(case=schedules())
def test_random_schedules(case):
    check_both(*case)


# --------------------------------------------------------------------------------------
# Refusals and remarks through the Python API


STENCIL = """
func.func @two(%A: memref<6x6xf32>, %B: memref<6x6xf32>) {
  %one = arith.constant 1.0 : f32
  affine.for %i = 0 to 6 {
    affine.for %j = 0 to 6 {
      %v = affine.load %B[%j, %i] : memref<6x6xf32>
      affine.store %v, %B[%j, %i] : memref<6x6xf32>
    }
  } {loom.tag = "copy"}
  affine.for %i = 1 to 6 {
    affine.for %j = 0 to 5 {
      %v = affine.load %A[%i - 1, %j + 1] : memref<6x6xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i, %j] : memref<6x6xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}
"""


@pytest.mark.parametrize("pipeline", ["loom-interchange{order=1,0}", "loom-unroll-jam{factors=2}"])
def test_refusal_changes_nothing(pipeline):
    """The first nest could be transformed, the second cannot: an error, and the module
    as it was (the passes check every nest before they change one)."""
    from dialects.context import make_context
    from passes.support.parser import parse_module
    from passes.pipelines import build

    module = parse_module(make_context(), STENCIL, "stencil.mlir")
    before = str(module)
    with pytest.raises(compiler.LoomError, match=r"stencil.mlir:10:3: error: loom-.*breaks the dependence"):
        build(pipeline).apply(make_context(), module)
    assert str(module) == before


#: a[i + 1] = a[i] + 1 along %i, under a loop %t of one iteration (0 to 4 step 4): its
#: distance is 0, so %t may go outside %i
ONE_ITERATION = """func.func @one(%a: memref<9xf32>) {
  %one = arith.constant 1.0 : f32
  affine.for %i = 0 to 8 {
    affine.for %t = 0 to 4 step 4 {
      %v = affine.load %a[%i] : memref<9xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %a[%i + 1] : memref<9xf32>
    }
  } {loom.tag = "one"}
  func.return
}"""

#: a[i, 0] written from a[i - 1, 1], which nothing writes: column 1 is apart from column 0,
#: so no dependence runs along %i
APART = """func.func @apart(%a: memref<8x2xf32>, %b: memref<8x8xf32>) {
  affine.for %i = 1 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %a[%i - 1, 1] : memref<8x2xf32>
      %x = affine.load %b[%i, %j] : memref<8x8xf32>
      %w = arith.addf %v, %x : f32
      affine.store %w, %a[%i, 0] : memref<8x2xf32>
    }
  } {loom.tag = "apart"}
  func.return
}"""


@pytest.mark.parametrize("src, shapes", [(ONE_ITERATION, [(9,)]), (APART, [(8, 2), (8, 8)])])
def test_interchange_where_no_dependence_is_reversed(src, shapes):
    """Legal orders the analysis must not refuse: a loop of one iteration carries nothing,
    and subscripts that differ by a constant in a dimension no loop walks never meet.
    Exact against the unscheduled loops."""
    kern = compiler.compile(src, pipeline="loom-interchange{order=1,0}")
    rng = np.random.default_rng(5)
    matches_naive(kern, src, *[small_ints(rng, s, np.float32) for s in shapes])


def test_compile_reports_an_illegal_order():
    with pytest.raises(compiler.LoomError, match=r"breaks the dependence .* legal orders: \[0, 1\]"):
        compiler.compile(STENCIL, pipeline="loom-interchange{order=1,0 op=stencil}")


def test_an_upper_bound_on_the_outer_iv_ties_the_loops():
    """Only %j's upper bound uses %i, which ties them as a lower bound would: interchange
    is refused (%j outside %i would end at an %i not yet defined), and unroll-jam leaves
    %i alone (the copies' %j loops end at different rows, they are not one loop). Exact
    against numpy."""
    with pytest.raises(compiler.LoomError, match=r"order \[1, 0\] puts loop j outside loop i, which its bounds"):
        compiler.compile(TRIANGLE, pipeline="loom-interchange{order=1,0}")
    kern = compiler.compile(TRIANGLE, pipeline="loom-unroll-jam{factors=2}", remarks=True)
    assert any("i not unrolled: the bounds of loop j inside it depend on i" in r for r in kern.remarks), kern.remarks
    a = small_ints(np.random.default_rng(6), (9, 9), np.float32)
    c = np.zeros((9, 9), np.float32)
    kern(a, c)
    np.testing.assert_array_equal(c, np.tril(2 * a))


def test_compile_keeps_remarks():
    src = matmul((4, 3), (3, 5), (4, 5), np.float32)
    kern = compiler.compile(
        src, pipeline="loom-interchange{order=0,2,1},loom-unroll-jam{factors=2,2}", remarks=True
    )
    text = "\n".join(kern.remarks)
    assert "[loom-interchange] interchanged band (i, j, k) -> (i, k, j)" in text
    assert "[loom-interchange] skipped: order [0, 2, 1] is longer than the 2-loop band" in text
    assert "[loom-unroll-jam] unroll-jam band (i, k, j): factors [2, 2] requested, [2, 2] applied" in text


def _twice_nest(tag: str, outer: str = "affine.for %i = 0 to 8", beside: str = "", result: str = "",
                out: str = "") -> str:
    """%c = 2 %a over 8 x 8 (%e[%i] = %a[%i, 0] with `beside`), under the `outer` loop."""
    return f"""func.func @{tag}(%a: memref<8x8xf32>, %c: memref<8x8xf32>, %e: memref<8xf32>) {{
  %z = arith.constant 0.0 : f32
  {result}{outer} {{
    affine.for %j = 0 to 8 {{
      %x = affine.load %a[%i, %j] : memref<8x8xf32>
      %y = arith.addf %x, %x : f32
      affine.store %y, %c[%i, %j] : memref<8x8xf32>
    }}{beside}
  }} {{loom.tag = "{tag}"}}{out}
  func.return
}}"""


#: an outer loop with iter_args (its value passed through), one whose lower bound is a
#: max, one whose body holds more than the inner loop
CARRYING = _twice_nest("carrying", "affine.for %i = 0 to 8 iter_args(%acc = %z) -> (f32)", result="%r = ",
                       beside="\n    affine.yield %acc : f32", out="\n  affine.store %r, %e[0] : memref<8xf32>")
FROM_A_MAX = _twice_nest("from_a_max", "affine.for %i = max affine_map<() -> (0, 1)>() to 8")
BESIDE = _twice_nest("beside", beside="\n    %w = affine.load %a[%i, 0] : memref<8x8xf32>\n"
                                      "    affine.store %w, %e[%i] : memref<8xf32>")


@pytest.mark.parametrize("src, why", [
    (CARRYING, "it carries values (iter_args)"),
    (FROM_A_MAX, "its lower bound is the max of several expressions"),
    (BESIDE, "its body holds more than loop j (copy nests or a vector remainder beside it)"),
])
def test_unroll_jam_leaves_an_outer_loop_it_cannot_jam(src, why):
    """The outer loop is not unrolled (the remark says why), the inner one is; exact
    against the unscheduled loops."""
    kern = compiler.compile(src, pipeline="loom-unroll-jam{factors=2,2}", remarks=True)
    [said] = [r.split("] ", 1)[1] for r in kern.remarks]
    assert said.startswith("unroll-jam band (i, j): factors [2, 2] requested, [1, 2] applied, 2 copies of the body; "
                           "j by 2 (trip count 8: 4 main iterations, 0 in the cleanup loop); "), said
    assert said.endswith(f"i not unrolled: {why}"), said
    rng = np.random.default_rng(8)
    a = small_ints(rng, (8, 8), np.float32)
    got = [np.full((8, 8), np.nan, np.float32), small_ints(rng, (8,), np.float32)]
    want = [got[0].copy(), got[1].copy()]
    kern(a, *got)
    compiler.compile(src, pipeline="naive")(a, *want)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("pipeline, message", [
    ("loom-interchange{order=1,0}",
     "loom-interchange: cannot permute loops that carry values (iter_args) in band (i, j)"),
    ("loom-interchange", "loom-interchange: option 'order' is required (a permutation such as order=0,2,1)"),
    ("loom-interchange{order=0,0}", "loom-interchange: option 'order' must be a permutation, got [0, 0]"),
    ("loom-interchange{order=0,1,2}", "loom-interchange: the options fit no loop nest: nest 'carrying': order "
                                      "[0, 1, 2] is longer than the 2-loop band (i, j)"),
    ("loom-interchange{order=0,1,2 op=carrying}", "loom-interchange: order [0, 1, 2] is longer than the 2-loop "
                                                  "band (i, j)"),
    ("loom-unroll-jam{factors=2,2,2 op=carrying}", "loom-unroll-jam: 3 factors [2, 2, 2] for the 2 loops of band "
                                                   "(i, j)"),
    ("loom-unroll-jam{factors=2,0}", "loom-unroll-jam: option 'factors' must be positive integers, got [2, 0]"),
])
def test_interchange_and_unroll_jam_refusals(pipeline, message):
    with pytest.raises(compiler.LoomError, match=re.escape(message)):
        compiler.compile(CARRYING, pipeline=pipeline)


def test_an_order_that_fits_one_nest_of_two_skips_the_other():
    """Without op=, a nest too short for the order is skipped with a remark while the
    other is interchanged; exact."""
    src = CARRYING.replace("func.return", "affine.for %p = 0 to 8 {\n    affine.for %q = 0 to 8 {\n"
                                          "      affine.for %s = 0 to 2 {\n"
                                          "        %v = affine.load %a[%q, %p] : memref<8x8xf32>\n"
                                          "        affine.store %v, %c[%q, %p] : memref<8x8xf32>\n"
                                          "      }\n    }\n  } {loom.tag = \"deep\"}\n  func.return")
    kern = compiler.compile(src, pipeline="loom-interchange{order=2,1,0}", remarks=True)
    assert [r.split("] ", 1)[1] for r in kern.remarks] == [
        "skipped: order [2, 1, 0] is longer than the 2-loop band (i, j)",
        "interchanged band (p, q, s) -> (s, q, p)"]
    a = small_ints(np.random.default_rng(9), (8, 8), np.float32)
    c, e = np.full((8, 8), np.nan, np.float32), np.zeros(8, np.float32)
    kern(a, c, e)
    np.testing.assert_array_equal(c, a)

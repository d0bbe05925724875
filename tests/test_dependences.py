"""passes.analysis.dependences: direction vectors of affine loop bands and the legality queries
the schedule passes ask (interchange, unroll-and-jam, tiling)."""

import dataclasses
import itertools

import numpy as np
import pytest
from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir.affine import AffineExpr
from kernels import unknown_memref

import compiler
from dialects.context import make_context
from passes.support.parser import parse_module
from dialects.layout import is_injective
from passes.conversion.convert_loom_to_affine import ConvertLoomToAffinePass, build_nest, load, store
from passes.analysis.dependences import (
    band_dependences,
    is_fully_permutable,
    legal_orders,
    permutation_is_legal,
    unroll_jam_is_legal,
)
from passes.analysis.loop_utils import (
    constant_trip_count,
    max_trip_count,
    perfect_band,
    provably_nonempty,
    select_nests,
)


def parse(text: str) -> ModuleOp:
    return parse_module(make_context(), text, "deps.mlir")


def band_of(module: ModuleOp, tag: str | None = None):
    nests = select_nests(module, tag)
    assert nests, "no nest"
    return perfect_band(nests[0])


def lowered(text: str) -> ModuleOp:
    module = parse(text)
    ConvertLoomToAffinePass().apply(make_context(), module)
    return module


def real(deps):
    """(source op name, sink op name, directions, distance) of each dependence, sorted."""
    return sorted((d.source.name, d.sink.name, d.directions, d.distance, d.is_reduction) for d in deps)


MATMUL = """
func.func @mm(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  func.return
}
"""

BATCHED = """
func.func @bmm(%a: memref<2x4x3xf32>, %b: memref<2x3x5xf32>, %c: memref<2x4x5xf32>) {
  loom.matmul ins(%a, %b : memref<2x4x3xf32>, memref<2x3x5xf32>) outs(%c : memref<2x4x5xf32>)
  func.return
}
"""

CONV = """
func.func @conv(%x: memref<1x2x6x6xf32>, %w: memref<3x2x3x3xf32>, %y: memref<1x3x{ho}x{ho}xf32>) {{
  loom.conv2d ins(%x, %w : memref<1x2x6x6xf32>, memref<3x2x3x3xf32>) outs(%y : memref<1x3x{ho}x{ho}xf32>) {{padding = array<i64: {p}, {p}>}}
  func.return
}}
"""


def stencil(load_subscripts: str, store_subscripts: str = "%i, %j", n: int = 8) -> str:
    return f"""
func.func @stencil(%A: memref<{n}x{n}xf32>, %one: f32) {{
  affine.for %i = 0 to {n} {{
    affine.for %j = 0 to {n} {{
      %v = affine.load %A[{load_subscripts}] : memref<{n}x{n}xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[{store_subscripts}] : memref<{n}x{n}xf32>
    }}
  }}
  func.return
}}
"""


# --------------------------------------------------------------------------------------
# Reductions: every order legal


def test_matmul_is_a_reduction_and_all_orders_are_legal():
    band = band_of(lowered(MATMUL), "matmul")
    deps = band_dependences(band)
    assert deps and all(d.is_reduction for d in deps)
    assert {d.directions for d in deps} == {("=", "=", "*")}
    assert legal_orders(deps, 3) == list(itertools.permutations(range(3)))
    assert is_fully_permutable(deps, range(3))
    assert all(unroll_jam_is_legal(deps, loop, 3) is None for loop in range(3))


def test_batched_matmul_reduction():
    band = band_of(lowered(BATCHED), "matmul")
    deps = band_dependences(band)
    assert {d.directions for d in deps} == {("=", "=", "=", "*")}
    assert len(legal_orders(deps, 4)) == 24


@pytest.mark.parametrize("padding", [0, 1])
def test_conv2d_reduces_along_c_r_s(padding):
    ho = 6 - 2 + 2 * padding
    band = band_of(lowered(CONV.format(ho=ho, p=padding)), "conv2d")
    assert len(band) == 7
    deps = band_dependences(band)
    assert deps and all(d.is_reduction for d in deps)
    assert {d.directions for d in deps} == {("=", "=", "=", "=", "*", "*", "*")}
    assert permutation_is_legal(deps, (0, 4, 5, 6, 1, 2, 3)) is None
    assert permutation_is_legal(deps, (6, 5, 4, 3, 2, 1, 0)) is None
    assert is_fully_permutable(deps, range(7))


def test_zeroing_nest_has_only_loop_independent_dependences():
    band = band_of(lowered(MATMUL), "matmul.init")
    assert band_dependences(band) == []


def test_accumulation_observed_elsewhere_is_no_reduction():
    """The partial sums are also copied out: reordering k would change what D sees."""
    text = """
func.func @f(%A: memref<4x5x6xf32>, %B: memref<4xf32>, %D: memref<4x5x6xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 6 {
        %b = affine.load %B[%i] : memref<4xf32>
        %a = affine.load %A[%i, %j, %k] : memref<4x5x6xf32>
        %s = arith.addf %b, %a : f32
        affine.store %s, %B[%i] : memref<4xf32>
        affine.store %s, %D[%i, %j, %k] : memref<4x5x6xf32>
      }
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert deps and not any(d.is_reduction for d in deps)
    # (=, <, >) would become (=, >, <): j and k cannot be swapped
    assert permutation_is_legal(deps, (0, 2, 1)) is not None
    assert permutation_is_legal(deps, (1, 0, 2)) is None


def test_product_is_no_reduction():
    text = """
func.func @f(%A: memref<4x5xf32>, %B: memref<4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 6 {
        %b = affine.load %B[%i] : memref<4xf32>
        %a = affine.load %A[%i, %j] : memref<4x5xf32>
        %s = arith.mulf %b, %a : f32
        affine.store %s, %B[%i] : memref<4xf32>
      }
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert {d.directions for d in deps} == {("=", "*", "*")}
    assert not any(d.is_reduction for d in deps)
    assert permutation_is_legal(deps, (0, 2, 1)) is not None
    assert legal_orders(deps, 3) == [(0, 1, 2), (1, 0, 2), (1, 2, 0)]  # j stays before k


# --------------------------------------------------------------------------------------
# Uniform dependences: exact distances


def test_stencil_distance_and_illegal_interchange():
    deps = band_dependences(band_of(parse(stencil("%i - 1, %j + 1"))))
    assert len(deps) == 1
    dep = deps[0]
    assert (dep.source.name, dep.sink.name) == ("affine.store", "affine.load")
    assert dep.distance == (1, -1) and dep.directions == ("<", ">") and not dep.is_reduction
    assert permutation_is_legal(deps, (1, 0)) is dep
    assert permutation_is_legal(deps, (0, 1)) is None
    assert legal_orders(deps, 2) == [(0, 1)]
    assert not is_fully_permutable(deps, range(2))
    assert is_fully_permutable(deps, range(1, 2))
    assert unroll_jam_is_legal(deps, 0, 2) is dep
    assert dep.describe() == (
        "store %A[%i, %j] (line 7) -> load %A[%i - 1, %j + 1] (line 5), direction (<, >)"
    )


@pytest.mark.parametrize(
    "subscripts, directions, distance, orders",
    [
        ("%i, %j - 1", ("=", "<"), (0, 1), [(0, 1), (1, 0)]),
        ("%i - 1, %j - 1", ("<", "<"), (1, 1), [(0, 1), (1, 0)]),
        ("%i - 1, %j", ("<", "="), (1, 0), [(0, 1), (1, 0)]),
        ("%i - 2, %j + 3", ("<", ">"), (2, -3), [(0, 1)]),
        ("%i + 1, %j - 1", ("<", ">"), (1, -1), [(0, 1)]),  # an anti dependence: load first
    ],
)
def test_uniform_distances(subscripts, directions, distance, orders):
    deps = band_dependences(band_of(parse(stencil(subscripts))))
    assert [(d.directions, d.distance) for d in deps] == [(directions, distance)]
    assert legal_orders(deps, 2) == orders


def test_anti_dependence_runs_from_the_load():
    (dep,) = band_dependences(band_of(parse(stencil("%i + 1, %j - 1"))))
    assert (dep.source.name, dep.sink.name) == ("affine.load", "affine.store")


def test_distance_beyond_the_loop_is_no_dependence():
    assert band_dependences(band_of(parse(stencil("%i - 8, %j", n=8)))) == []
    # a trip count of 1 leaves no room for a distance
    assert band_dependences(band_of(parse(stencil("%i, %j + 1", n=1)))) == []


def test_same_address_is_loop_independent():
    deps = band_dependences(band_of(parse(stencil("%i, %j"))))
    assert [d.directions for d in deps] == [("=", "=")]
    assert legal_orders(deps, 2) == [(0, 1), (1, 0)]
    # (an accumulation: a reduction) and the same vector as an ordinary dependence
    plain = [dataclasses.replace(d, is_reduction=False) for d in deps]
    assert is_fully_permutable(plain, range(2)) and is_fully_permutable(plain, range(1, 2))
    assert permutation_is_legal(plain, (1, 0)) is None


def test_loop_missing_from_subscripts_gets_star():
    deps = band_dependences(band_of(parse(stencil("%i, 0", "%i, 0"))))
    assert {d.directions for d in deps} == {("=", "*")}


def test_coupled_subscript_solved():
    """A[i + j] written, A[i + j - 1] read: d_i + d_j = 1, neither fixed."""
    text = """
func.func @f(%A: memref<20xf32>, %one: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %A[%i + %j - 1] : memref<20xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i + %j] : memref<20xf32>
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert deps and all(d.directions == ("*", "*") for d in deps)
    assert legal_orders(deps, 2) == [(0, 1)]


# --------------------------------------------------------------------------------------
# Conservative answers


def test_non_uniform_pair_is_star_everywhere():
    deps = band_dependences(band_of(parse(stencil("%j, %i"))))
    assert deps and all(d.directions == ("*", "*") and d.distance is None for d in deps)
    assert not any(d.is_reduction for d in deps)
    assert legal_orders(deps, 2) == [(0, 1)]


def test_floordiv_of_an_iv_is_not_analysed():
    deps = band_dependences(band_of(parse(stencil("%i floordiv 2, %j"))))
    assert deps and all(d.directions == ("*", "*") for d in deps)


def test_other_memref_effects_are_conservative():
    text = """
func.func @f(%A: memref<8x8xf32>, %B: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = memref.load %A[%i, %j] : memref<8x8xf32>
      affine.store %v, %A[%i, %j] : memref<8x8xf32>
      affine.store %v, %B[%i, %j] : memref<8x8xf32>
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    on_a = [d for d in deps if d.memref.name_hint == "A"]
    assert on_a and all(d.directions == ("*", "*") for d in on_a)
    assert permutation_is_legal(deps, (1, 0)).describe() == (
        "memref.load on %A (line 5) -> store %A[%i, %j] (line 6), direction (*, *)"
    )


def test_distinct_memrefs_do_not_alias():
    text = """
func.func @f(%A: memref<8x8xf32>, %B: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %A[%j, %i] : memref<8x8xf32>
      affine.store %v, %B[%i, %j] : memref<8x8xf32>
    }
  }
  func.return
}
"""
    assert band_dependences(band_of(parse(text))) == []


def test_vector_accesses_cover_their_width():
    text = """
func.func @f(%A: memref<64xf32>) {
  affine.for %i = 0 to 56 step 4 {
    %v = affine.vector_load %A[%i] : memref<64xf32>, vector<4xf32>
    affine.vector_store %v, %A[%i + 4] : memref<64xf32>, vector<4xf32>
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    flow = [d for d in deps if d.source.name == "affine.vector_store" and d.sink.name == "affine.vector_load"]
    assert [d.distance for d in flow] == [(4,)]


VECTOR_BESIDE_SCALAR = """
func.func @mixed(%A: memref<16x32xf32>) {
  affine.for %i = 2 to 16 {
    affine.for %j = 0 to 24 step 4 {
      %x = affine.load %A[%i - 2, %j + 5] : memref<16x32xf32>
      %v = vector.broadcast %x : f32 to vector<4xf32>
      affine.vector_store %v, %A[%i, %j] : memref<16x32xf32>, vector<4xf32>
    }
  } {loom.tag = "mixed"}
  func.return
}
"""


def test_vector_beside_scalar_access_covers_the_vector():
    """A 4-lane store of A[i, j .. j + 3] and a scalar load of A[i - 2, j + 5]: the load of
    iteration (i + 2, j - 4) reads lane 1 of the store of (i, j). Lane 0 alone would give
    j distance -5, no multiple of the step 4: no dependence at all."""
    deps = band_dependences(band_of(parse(VECTOR_BESIDE_SCALAR)))
    flow = [d for d in deps if d.source.name == "affine.vector_store" and d.sink.name == "affine.load"]
    assert [(d.directions, d.distance) for d in flow] == [(("<", ">"), (2, -4))]


@pytest.mark.parametrize(
    "pipeline",
    ["loom-interchange{order=1,0}", "loom-tile{sizes=4,4}", "loom-tile{sizes=2,2}", "loom-unroll-jam{factors=2}",
     "loom-unroll{factor=2}", "loom-hoist"],
)
def test_vector_beside_scalar_schedule_refused_or_right(pipeline):
    """Every schedule of the nest above is refused (the (<, >) dependence) or computes
    what the loops in their order do (interchange and tiling would read A[i, j + 1]
    before it is written)."""
    a = np.random.default_rng(3).standard_normal((16, 32)).astype(np.float32)
    want = a.copy()
    for i in range(2, 16):
        for j in range(0, 24, 4):
            want[i, j : j + 4] = want[i - 2, j + 5]
    try:
        kern = compiler.compile(VECTOR_BESIDE_SCALAR, pipeline=pipeline)
    except compiler.LoomError as e:
        assert "dependence vector_store %A[%i, %j]" in str(e) and "direction (<, >)" in str(e)
        assert pipeline.startswith(("loom-interchange", "loom-tile", "loom-unroll-jam")), str(e)
        return
    got = a.copy()
    kern(got)
    np.testing.assert_array_equal(got, want)


THROUGH_A_VIEW = """
func.func @view(%A: memref<10x10xf32>) {
  %one = arith.constant 1.0 : f32
  %v = memref.subview %A[0, 1] [9, 9] [1, 1] : memref<10x10xf32> to memref<9x9xf32, strided<[10, 1], offset: 1>>
  affine.for %i = 1 to 9 {
    affine.for %j = 0 to 8 {
      %x = affine.load %v[%i - 1, %j] : memref<9x9xf32, strided<[10, 1], offset: 1>>
      %w = arith.addf %x, %one : f32
      affine.store %w, %A[%i, %j] : memref<10x10xf32>
    }
  } {loom.tag = "view"}
  func.return
}
"""


def test_views_of_one_buffer_may_alias():
    """A store to %A and a load through a subview of %A: a dependence in any direction
    (the view's subscripts count from its own origin), not none."""
    deps = band_dependences(band_of(parse(THROUGH_A_VIEW)))
    assert [(d.source.name, d.sink.name, d.directions) for d in deps] == [
        ("affine.load", "affine.store", ("*", "*"))
    ]


@pytest.mark.parametrize(
    "pipeline", ["loom-interchange{order=1,0}", "loom-tile{sizes=2,2}", "loom-unroll-jam{factors=2}", "loom-hoist"]
)
def test_view_schedule_refused_or_right(pipeline):
    """A[i, j] = A[i - 1, j + 1] + 1, the read through a view: interchange and tiling
    would read elements before they are written."""
    a = np.random.default_rng(4).standard_normal((10, 10)).astype(np.float32)
    want = a.copy()
    for i in range(1, 9):
        for j in range(8):
            want[i, j] = want[i - 1, j + 1] + np.float32(1)
    try:
        kern = compiler.compile(THROUGH_A_VIEW, pipeline=pipeline)
    except compiler.LoomError as e:
        assert "load %v[%i - 1, %j]" in str(e) and "direction (*, *)" in str(e)
        assert not pipeline.startswith("loom-hoist"), str(e)
        return
    got = a.copy()
    kern(got)
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------
# Buffers of unknown origin and layouts that overlap themselves


def unknown_buffer(maker: str) -> str:
    """%m is %a when flag[0] > 0, else %b, made by `maker`; the nest writes %m[i, j] =
    %b[i - 1, j + 1]: a stencil over %b (the order of the loops matters) when %m is %b."""
    made = unknown_memref(maker, "memref<9x9xf32>")
    return f"""func.func @unknown(%a: memref<9x9xf32>, %b: memref<9x9xf32>, %flag: memref<1xf32>) {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %f = memref.load %flag[%c0] : memref<1xf32>
  %c = arith.cmpf ogt, %f, %zero : f32
  {made}
  affine.for %i = 1 to 9 {{
    affine.for %j = 0 to 8 {{
      %x = affine.load %b[%i - 1, %j + 1] : memref<9x9xf32>
      affine.store %x, %m[%i, %j] : memref<9x9xf32>
    }}
  }} {{loom.tag = "unknown"}}
  func.return
}}"""


@pytest.mark.parametrize("maker", ["arith.select", "scf.if"])
def test_a_buffer_of_unknown_origin_may_be_any(maker):
    """%m may be %b: the pair is a dependence in any direction (it was none: memref_root
    took the select's first memref operand, %a, and stopped at the scf.if)."""
    deps = band_dependences(band_of(parse(unknown_buffer(maker))))
    assert [(d.source.name, d.sink.name, d.directions) for d in deps] == [("affine.load", "affine.store", ("*", "*"))]
    assert f"(%m, the result of '{maker}', may be any buffer)" in deps[0].describe()


@pytest.mark.parametrize("maker", ["arith.select", "scf.if"])
@pytest.mark.parametrize(
    "pipeline",
    ["loom-interchange{order=1,0}", "loom-tile{sizes=4,4}", "loom-unroll-jam{factors=2}", "loom-unroll{factor=2}",
     "loom-hoist"],
)
def test_unknown_buffer_schedule_refused_or_right(maker, pipeline):
    """With %m = %b, interchange, tiling and unroll-jam read %b's elements after they are
    written (the reviewer's case gave row 8 as 64, 65, ... instead of 8, 17, ...)."""
    try:
        kern = compiler.compile(unknown_buffer(maker), pipeline=pipeline)
    except compiler.LoomError as e:
        assert f"direction (*, *) (%m, the result of '{maker}', may be any buffer)" in str(e), str(e)
        assert pipeline.startswith(("loom-interchange", "loom-tile", "loom-unroll-jam")), str(e)
        return
    for flag in (1.0, -1.0):
        a, b = np.zeros((9, 9), np.float32), np.arange(81, dtype=np.float32).reshape(9, 9)
        want_a, want_b = a.copy(), b.copy()
        m = want_a if flag > 0 else want_b
        for i in range(1, 9):
            for j in range(8):
                m[i, j] = want_b[i - 1, j + 1]
        kern(a, b, np.array([flag], np.float32))
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)


#: %a views the 17 elements of %base as 9 x 9 with strides (1, 1): %a[i, 1] and %a[i + 1, 0]
#: are one element, base[i + 1]. In order, base[i] = base[i + 1] + 1 reads the old base[i + 1]
OVERLAPPING = """func.func @overlap(%base: memref<17xf32>) {
  %one = arith.constant 1.0 : f32
  %a = memref.reinterpret_cast %base to offset: [0], sizes: [9, 9], strides: [1, 1] : memref<17xf32> to memref<9x9xf32, strided<[1, 1]>>
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[%i, 1] : memref<9x9xf32, strided<[1, 1]>>
      %y = arith.addf %x, %one : f32
      affine.store %y, %a[%i, 0] : memref<9x9xf32, strided<[1, 1]>>
    }
  } {loom.tag = "overlap"}
  func.return
}"""


def test_a_layout_that_overlaps_itself_is_star():
    """The subscripts (i, 1) and (i', 0) never match, yet (i, 1) and (i + 1, 0) are one
    element: distinct subscripts are not distinct elements, the pair is `*`."""
    deps = band_dependences(band_of(parse(OVERLAPPING)))
    pairs = {(d.source.name, d.sink.name, d.directions) for d in deps}
    assert ("affine.load", "affine.store", ("*", "*")) in pairs
    assert all(d.directions == ("*", "*") for d in deps)
    assert "(the layout of %a reaches some elements from several indices)" in deps[0].describe()


@pytest.mark.parametrize(
    "pipeline",
    ["loom-interchange{order=1,0}", "loom-tile{sizes=2,2}", "loom-unroll-jam{factors=2}", "loom-unroll{factor=2}",
     "loom-hoist"],
)
def test_overlapping_layout_schedule_refused_or_right(pipeline):
    """With j outermost, each pass over i reads the base[i + 1] that the previous pass
    wrote (the reviewer's 16, 15, ..., 9 instead of 2, 3, ..., 9)."""
    base = np.arange(17, dtype=np.float32)
    want = base.copy()
    want[:8] = base[1:9] + 1
    try:
        kern = compiler.compile(OVERLAPPING, pipeline=pipeline)
    except compiler.LoomError as e:
        assert "(the layout of %a reaches some elements from several indices)" in str(e), str(e)
        assert pipeline.startswith(("loom-interchange", "loom-tile", "loom-unroll-jam")), str(e)
        return
    kern(base)
    np.testing.assert_array_equal(base, want)


@pytest.mark.parametrize(
    "shape, strides, injective",
    [
        ((9, 9), (1, 1), False), ((9, 9), (9, 1), True), ((9, 9), (1, 9), True), ((4, 4), (8, 1), True),
        ((4, 4), (0, 1), False), ((1, 4), (0, 1), True), ((4, 3), (3, 2), False), ((4, 3), (5, 2), True),
        ((4, 4), (-4, 1), True), ((0, 9), (1, 1), True), ((-1, 4), (4, 1), True), ((4, -1), (4, 1), False),
    ],
)
def test_injective_layouts(shape, strides, injective):
    """Sorted by |stride|, each dimension longer than 1 steps past the span of those inside
    it (a dynamic extent, -1, is unbounded; an empty shape reaches nothing)."""
    assert is_injective(shape, strides) == injective


def test_injective_numpy_strides_count_bytes():
    assert is_injective((4, 4), (16, 4), 4) and not is_injective((4, 4), (4, 4), 4)
    assert not is_injective((4,), (2,), 4)  # elements of 4 bytes, 2 apart: they overlap


#: B is one row, broadcast: every row of %b is the same 8 elements (stride 0), only read
BROADCAST_READ = """func.func @broadcast(%b: memref<8x8xf32, strided<[0, 1]>>, %c: memref<8x8xf32>) {
  affine.for %i = 1 to 8 {
    affine.for %j = 0 to 7 {
      %x = affine.load %b[%i, %j] : memref<8x8xf32, strided<[0, 1]>>
      %y = affine.load %c[%i - 1, %j + 1] : memref<8x8xf32>
      %s = arith.addf %x, %y : f32
      affine.store %s, %c[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "broadcast"}
  func.return
}"""


def test_a_broadcast_that_is_only_read_keeps_exact_dependences():
    """Only accesses to a memref that is written need distinct elements: the stencil on
    %c keeps its exact (<, >), nothing involves %b."""
    deps = band_dependences(band_of(parse(BROADCAST_READ)))
    assert [(d.memref.name_hint, d.directions, d.distance) for d in deps] == [("c", ("<", ">"), (1, -1))]


@pytest.mark.parametrize(
    "pipeline", ["naive", "loom-unroll-jam{factors=1,2}", "loom-unroll{factor=3}", "loom-hoist", "loom-vectorize"]
)
def test_a_broadcast_read_still_runs(pipeline):
    """A zero-stride argument the kernel only reads (np.broadcast_to's view) is taken as it
    is, under each schedule the stencil allows."""
    row = np.arange(8, dtype=np.float32)
    c = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = c.copy()
    for i in range(1, 8):
        for j in range(7):
            want[i, j] = row[j] + want[i - 1, j + 1]
    compiler.compile(BROADCAST_READ, pipeline=pipeline)(np.broadcast_to(row, (8, 8)), c)
    np.testing.assert_array_equal(c, want)


#: matmul with B one row broadcast (stride 0), read only: every schedule of matmul applies
BROADCAST_MATMUL = """func.func @mm(%a: memref<8x8xf32>, %b: memref<8x8xf32, strided<[0, 1]>>, %c: memref<8x8xf32>) {
  loom.matmul ins(%a, %b : memref<8x8xf32>, memref<8x8xf32, strided<[0, 1]>>) outs(%c : memref<8x8xf32>)
  func.return
}"""


@pytest.mark.parametrize(
    "pipeline",
    ["loom-interchange{order=1,2,0}", "loom-tile{sizes=4,4,4}", "loom-unroll-jam{factors=2,2}", "default"],
)
def test_a_broadcast_matmul_operand_is_scheduled(pipeline):
    """B's zero stride does not make matmul's schedules conservative (B is only read): each
    applies and computes A @ B exactly on small integers."""
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (8, 8)).astype(np.float32)
    b = np.broadcast_to(rng.integers(-3, 4, 8).astype(np.float32), (8, 8))
    c = np.full((8, 8), np.nan, np.float32)
    compiler.compile(BROADCAST_MATMUL, pipeline=pipeline)(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


#: the reviewer's case: the argument itself overlaps (as_strided's (4, 4) bytes on f32)
OVERLAPPING_ARGUMENT = OVERLAPPING.replace("%base: memref<17xf32>", "%a: memref<9x9xf32, strided<[1, 1]>>").replace(
    "  %a = memref.reinterpret_cast %base to offset: [0], sizes: [9, 9], strides: [1, 1] : memref<17xf32> to "
    "memref<9x9xf32, strided<[1, 1]>>\n", "")


def test_a_written_argument_that_overlaps_itself_is_refused():
    """The kernel writes %a: an array whose strides reach one element from two indices is
    refused by the call (the schedule passes take distinct indices for distinct elements);
    the passes refuse to reorder its nest."""
    assert "reinterpret_cast" not in OVERLAPPING_ARGUMENT
    with pytest.raises(compiler.LoomError, match="the layout of %a reaches some elements from several indices"):
        compiler.compile(OVERLAPPING_ARGUMENT, pipeline="loom-interchange{order=1,0}")
    kern = compiler.compile(OVERLAPPING_ARGUMENT, pipeline="naive")
    base = np.arange(17, dtype=np.float32)
    with pytest.raises(ValueError, match=r"argument #0 \(%a\) is written by the kernel but its strides \(4, 4\) "
                                         "reach some elements from several indices"):
        kern(np.lib.stride_tricks.as_strided(base, (9, 9), (4, 4)))
    np.testing.assert_array_equal(base, np.arange(17, dtype=np.float32))


# --------------------------------------------------------------------------------------
# Built and parsed IR agree; maps applied to dims and symbols alike


def _built_stencil():
    """The stencil of `stencil("%i - 1, %j + 1")` built the way passes build IR: the
    loop ivs as map dims (the parser makes them symbols)."""
    module = parse("""
func.func @stencil(%A: memref<8x8xf32>, %one: f32) {
  func.return
}
""")
    func = next(op for op in module.walk() if op.name == "func.func")
    a, one = func.body.block.args
    i, j = AffineExpr.dimension(0), AffineExpr.dimension(1)

    def body(ivs):
        v = load(a, ivs, [i - 1, j + 1])
        w = arith.AddfOp(v, one)
        return [v, w, store(w.result, a, ivs, [i, j])]

    func.body.block.insert_ops_before(build_nest([8, 8], "stencil", body, ["i", "j"]), func.body.block.last_op)
    return module


def test_built_and_parsed_accesses_agree():
    built = _built_stencil()
    parsed = parse(stencil("%i - 1, %j + 1"))
    for module in (built, parsed):
        load_op = next(op for op in module.walk() if op.name == "affine.load")
        dims = load_op.map.data.num_dims
        assert dims == (2 if module is built else 0)
    assert real(band_dependences(band_of(built))) == real(band_dependences(band_of(parsed)))


def test_matmul_reparsed_gives_the_same_dependences():
    built = lowered(MATMUL)
    reparsed = parse(str(built))
    assert real(band_dependences(band_of(built, "matmul"))) == real(band_dependences(band_of(reparsed, "matmul")))


def test_affine_apply_is_seen_through():
    text = """
func.func @f(%A: memref<9x9xf32>, %one: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %im = affine.apply affine_map<(d0) -> (d0 - 1)>(%i)
      %jp = affine.apply affine_map<()[s0] -> (s0 + 1)>()[%j]
      %v = affine.load %A[%im, %jp] : memref<9x9xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i, %j] : memref<9x9xf32>
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert [(d.directions, d.distance) for d in deps] == [(("<", ">"), (1, -1))]


def test_outer_values_are_parameters():
    """An offset by a function argument cancels out when both sides have it."""
    text = """
func.func @f(%A: memref<20x20xf32>, %n: index, %one: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %A[%i + %n - 1, %j] : memref<20x20xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i + %n, %j] : memref<20x20xf32>
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert [d.distance for d in deps] == [(1, 0)]
    # on one side only, a parameter's value is unknown: the distance along j is too
    one_sided = text.replace("%A[%i + %n - 1, %j]", "%A[%i - 1, %j + %n]").replace("%A[%i + %n, %j]", "%A[%i, %j]")
    (dep,) = band_dependences(band_of(parse(one_sided)))
    assert dep.directions[1] == "*" and dep.distance is None, dep  # (j's direction unknown: no interchange)


# --------------------------------------------------------------------------------------
# The legality queries on direction vectors


def test_partial_order_keeps_the_rest_in_place():
    text = """
func.func @f(%A: memref<8x8x8xf32>, %one: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %v = affine.load %A[%i, %j - 1, %k + 1] : memref<8x8x8xf32>
        %w = arith.addf %v, %one : f32
        affine.store %w, %A[%i, %j, %k] : memref<8x8x8xf32>
      }
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert [d.directions for d in deps] == [("=", "<", ">")]
    assert permutation_is_legal(deps, (1, 0)) is None
    assert permutation_is_legal(deps, (0, 2, 1)) is deps[0]
    assert legal_orders(deps, 2) == [(0, 1), (1, 0)]
    assert is_fully_permutable(deps, range(2))
    assert not is_fully_permutable(deps, range(1, 3))
    assert unroll_jam_is_legal(deps, 0, 3) is None
    assert unroll_jam_is_legal(deps, 1, 3) is deps[0]


def test_vector_accumulation_is_a_reduction():
    text = """
func.func @f(%A: memref<4x6xf32>, %B: memref<6x8xf32>, %C: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 step 4 {
      affine.for %k = 0 to 6 {
        %a = affine.vector_load %A[%i, %k] : memref<4x6xf32>, vector<4xf32>
        %b = affine.vector_load %B[%k, %j] : memref<6x8xf32>, vector<4xf32>
        %c = affine.vector_load %C[%i, %j] : memref<4x8xf32>, vector<4xf32>
        %s = vector.fma %a, %b, %c : vector<4xf32>
        affine.vector_store %s, %C[%i, %j] : memref<4x8xf32>, vector<4xf32>
      }
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert deps and all(d.is_reduction for d in deps)
    assert {d.directions for d in deps} == {("=", "=", "*")}


# --------------------------------------------------------------------------------------
# Subscripts scaled by a constant, constant divisions, masked vector accesses


@pytest.mark.parametrize(
    "load_subscripts, store_subscripts, found",
    [
        ("2 * %i - 2, %j", "2 * %i, %j", [("affine.store", "affine.load", ("<", "="), (1, 0))]),
        ("%i * 3 + 3, %j", "%i * 3, %j", [("affine.load", "affine.store", ("<", "="), (1, 0))]),
        # 2 d = 1 has no integer solution: the odd elements read are never written
        ("2 * %i + 1, %j", "2 * %i, %j", []),
        ("2 * %i + 2, 3 * %j - 3", "2 * %i, 3 * %j", [("affine.load", "affine.store", ("<", ">"), (1, -1))]),
    ],
)
def test_subscripts_scaled_by_a_constant(load_subscripts, store_subscripts, found):
    deps = band_dependences(band_of(parse(stencil(load_subscripts, store_subscripts, n=16))))
    assert [(d.source.name, d.sink.name, d.directions, d.distance) for d in deps] == found


def _offset_by(expr: str, value: int) -> str:
    """A[%i + o, %j] read and A[%i, %j] written, o = `expr` of a constant `value`."""
    return f"""
func.func @f(%A: memref<40x8xf32>, %one: f32) {{
  affine.for %i = 0 to 16 {{
    affine.for %j = 0 to 8 {{
      %c = arith.constant {value} : index
      %o = affine.apply affine_map<()[s0] -> ({expr})>()[%c]
      %v = affine.load %A[%i + %o + 8, %j] : memref<40x8xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i + 8, %j] : memref<40x8xf32>
    }}
  }}
  func.return
}}
"""


@pytest.mark.parametrize(
    "expr, value, offset",
    [
        ("s0 floordiv 2", -7, -4), ("s0 floordiv 2", 7, 3), ("s0 ceildiv 2", -7, -3), ("s0 ceildiv 2", 7, 4),
        ("s0 mod 3", -7, 2), ("s0 mod 3", 7, 1), ("s0 floordiv 1", 5, 5), ("s0 * 2", -3, -6), ("2 * s0", 3, 6),
    ],
)
def test_constant_divisions_give_exact_offsets(expr, value, offset):
    """Python's floor semantics: -7 floordiv 2 = -4, -7 ceildiv 2 = -3, -7 mod 3 = 2. A
    negative offset reads what an earlier iteration wrote (store -> load), a positive one
    what a later iteration will overwrite (load -> store)."""
    (dep,) = band_dependences(band_of(parse(_offset_by(expr, value))))
    first = ("affine.store", "affine.load") if offset < 0 else ("affine.load", "affine.store")
    assert (dep.source.name, dep.sink.name, dep.directions, dep.distance) == (*first, ("<", "="), (abs(offset), 0))


@pytest.mark.parametrize("divide", ["floordiv", "ceildiv", "mod"])
def test_a_division_by_a_non_positive_constant_is_not_analysed(divide):
    """A divisor <= 0 is left alone: an index computed inside the band that the analysis
    does not follow, `*` on every loop; the divisor 1 is the last one analysed."""
    for divisor in (0, -2):
        deps = band_dependences(band_of(parse(_offset_by(f"s0 {divide} {divisor}", 7))))
        assert deps and all(d.directions == ("*", "*") and d.distance is None for d in deps)
    deps = band_dependences(band_of(parse(_offset_by(f"s0 {divide} 1", 7))))
    assert [d.distance for d in deps] == [(0, 0) if divide == "mod" else (7, 0)]


MASKED_ROW = """
func.func @f(%A: memref<4x48xf32>, %n: index, %zero: vector<8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %mask = vector.create_mask %n : vector<8xi1>
      %at = affine.apply affine_map<(d0) -> (d0 * 8 + OFFSET)>(%j)
      %to = affine.apply affine_map<(d0) -> (d0 * 8)>(%j)
      %v = vector.maskedload %A[%i, %at], %mask, %zero
        : memref<4x48xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
      vector.maskedstore %A[%i, %to], %mask, %v : memref<4x48xf32>, vector<8xi1>, vector<8xf32>
    }
  }
  func.return
}
"""


@pytest.mark.parametrize("offset, found", [
    # 8 lanes read from 8j + 4: half of what iteration j writes, half of what j + 1 writes
    (4, [("vector.maskedload", "vector.maskedstore", ("=", "<"), (0, 1)),
         ("vector.maskedload", "vector.maskedstore", ("=", "="), (0, 0))]),
    (8, [("vector.maskedload", "vector.maskedstore", ("=", "<"), (0, 1))]),
    (16, [("vector.maskedload", "vector.maskedstore", ("=", "<"), (0, 2))]),
    (-8, [("vector.maskedstore", "vector.maskedload", ("=", "<"), (0, 1))]),
])
def test_masked_accesses_cover_their_full_width(offset, found):
    """A masked access is analysed as its whole vector (the mask only leaves lanes out)."""
    text = MASKED_ROW.replace("OFFSET", str(offset)).replace("+ -", "- ")
    deps = band_dependences(band_of(parse(text)))
    assert sorted((d.source.name, d.sink.name, d.directions, d.distance) for d in deps) == sorted(found)
    # the write of the row %i to itself, each lane once: no dependence of the store on itself
    assert all(d.source is not d.sink for d in deps)


def test_an_index_computed_inside_the_band_is_not_analysed():
    """`%i + 1` by arith.addi inside the band: not followed, `*` on every loop; the same
    `floordiv` of a value defined before the band is a parameter, and cancels out."""
    text = """
func.func @f(%A: memref<20x20xf32>, %n: index, %one: f32) {
  %c1 = arith.constant 1 : index
  %q = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%n)
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %ip = arith.addi %i, %c1 : index
      %v = affine.load %A[%ip, %j] : memref<20x20xf32>
      %u = affine.load %A[%q, %j - 1] : memref<20x20xf32>
      %w = arith.addf %v, %u : f32
      affine.store %w, %A[%q, %j] : memref<20x20xf32>
      affine.store %w, %A[%i, %j] : memref<20x20xf32>
    }
  }
  func.return
}
"""
    deps = band_dependences(band_of(parse(text)))
    assert [(d.describe(), d.distance) for d in deps] == [
        ("load %A[%ip, %j] (line 8) -> store %A[%q, %j] (line 11), direction (*, *)", None),
        ("load %A[%ip, %j] (line 8) -> store %A[%i, %j] (line 12), direction (*, *)", None),
        ("load %A[%q, %j - 1] (line 9) -> store %A[%q, %j] (line 11), direction (*, >)", (None, -1)),
        ("store %A[%q, %j] (line 11) -> load %A[%q, %j - 1] (line 9), direction (*, <)", (None, 1)),
        ("load %A[%q, %j - 1] (line 9) -> store %A[%i, %j] (line 12), direction (*, *)", None),
        ("store %A[%q, %j] (line 11) -> store %A[%q, %j] (line 11), direction (*, =)", (None, 0)),
        ("store %A[%q, %j] (line 11) -> store %A[%i, %j] (line 12), direction (*, *)", None),
    ]
    assert legal_orders(deps, 2) == [(0, 1)]


# --------------------------------------------------------------------------------------
# loop_utils: trip counts and non-emptiness (the last-write analysis counts on them)


def _inner_loop(lower: str, upper: str, step: int = 1) -> affine.ForOp:
    """The loop %i = lower to upper inside %it = 0 to 100 step 32."""
    module = parse(f"""func.func @f(%A: memref<100xf32>, %n: index, %one: f32) {{
  affine.for %it = 0 to 100 step 32 {{
    affine.for %i = {lower} to {upper} step {step} {{
      affine.store %one, %A[%i] : memref<100xf32>
    }}
  }}
  func.return
}}""")
    return [op for op in module.walk() if isinstance(op, affine.ForOp)][1]


AT_TILE = "affine_map<(d0) -> (d0)>(%it)"


@pytest.mark.parametrize("lower, upper, step, nonempty, at_most, trips", [
    (AT_TILE, "min affine_map<(d0) -> (d0 + 32, 100)>(%it)", 1, True, 32, None),  # a tile's point loop
    (AT_TILE, "min affine_map<(d0) -> (d0 + 32, 100)>(%it)", 4, True, 8, None),
    # 90 is not the tile loop's bound: the last tile (%it = 96) runs no iteration
    (AT_TILE, "min affine_map<(d0) -> (d0 + 32, 90)>(%it)", 1, False, 32, None),
    (AT_TILE, "affine_map<(d0) -> (d0 + 1)>(%it)", 1, True, 1, 1),  # the least gap that runs
    (AT_TILE, "min affine_map<(d0) -> (d0, 100)>(%it)", 1, False, 0, None),
    ("affine_map<(d0) -> (d0 + 1)>(%it)", "min affine_map<(d0) -> (d0 + 32, 100)>(%it)", 1, False, 31, None),
    ("0", "%n", 1, False, None, None),
    ("0", "1", 1, True, 1, 1),
    ("0", "0", 1, False, 0, 0),
    ("4", "3", 1, False, 0, 0),
    ("0", "10", 3, True, 4, 4),
])
def test_trip_counts_and_provably_nonempty(lower, upper, step, nonempty, at_most, trips):
    loop = _inner_loop(lower, upper, step)
    assert (provably_nonempty(loop), max_trip_count(loop), constant_trip_count(loop)) == (nonempty, at_most, trips)

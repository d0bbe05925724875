"""The panel order and loom-fuse-pack end to end: a matmul whose rows fit one block, on
one thread, copies each B panel in its first row tile while it computes. Results within
the bound of numpy's on random normal inputs and exact on small integers, for both kinds
of host (tests/targets.py), on shapes of 1, primes, and more than one k block; the same
bits as the order without it (`skip=fuse-pack`) on small integers; the epilogue fused
beside it; the remarks and the plan.
"""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, check_both, conv2d_kernel, matches_naive, matmul, small_ints
from targets import TARGETS, planning_for

import compiler
from passes.analysis.cost_model import A_IN_PLACE, MEASURED_PANEL_TILES, plan_matmul, register_tile

ONE_THREAD = "loom-default{num-threads=1}"
dim = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 13, 16, 47, 48, 49, 97]), st.integers(1, 120))


def mm(m, n, k):
    return matmul((m, k), (k, n), (m, n), np.float32)


@settings(deadline=None)
@given(m=dim, n=dim, k=st.one_of(dim, st.sampled_from([769, 1031])), seed=st.integers(0, 2**16),
       kind=st.sampled_from(sorted(TARGETS)))
@example(m=8, n=96, k=16, seed=0, kind="avx512")  # one row tile: the fused copy is all of it
@example(m=16, n=97, k=1031, seed=0, kind="avx512")  # two k blocks, a 1-column panel left over
@example(m=13, n=50, k=769, seed=0, kind="avx2")  # peeled rows, two k blocks
def test_panel_order_is_correct(m, n, k, seed, kind):
    with planning_for(TARGETS[kind]):
        check_both(mm(m, n, k), [(m, k), (k, n)], k, ONE_THREAD, seed=seed)


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_same_bits_as_without_the_fusion(kind):
    m, n, k = 24, 150, 40
    rng = np.random.default_rng(1)
    a, b = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32)
    with planning_for(TARGETS[kind]):
        fused = compiler.compile(mm(m, n, k), pipeline=ONE_THREAD)(a, b)
        apart = compiler.compile(mm(m, n, k), pipeline="loom-default{num-threads=1 skip=fuse-pack}")(a, b)
    np.testing.assert_array_equal(fused, apart)
    np.testing.assert_array_equal(fused, a @ b)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_read_in_place_only_where_its_rows_are_contiguous(transposed):
    """On znver4 the panel order's tile (MEASURED_PANEL_TILES, 4x48) reads A's rows where
    they are; a transposed A (a view whose rows are strided) is packed into panels of MR
    rows as before. Both right, on random inputs and exactly on small integers."""
    m, n, k = 32, 96, 200
    a_type = f"tensor<{k}x{m}xf32>" if transposed else f"tensor<{m}x{k}xf32>"
    view = (f"  %at = loom.transpose %a {{perm = array<i64: 1, 0>}} : {a_type} -> tensor<{m}x{k}xf32>\n"
            if transposed else "")
    src = f"""func.func @mm(%a: {a_type}, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
{view}  %c = loom.matmul {"%at" if transposed else "%a"}, %b : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  func.return %c : tensor<{m}x{n}xf32>
}}"""
    with planning_for(TARGETS["avx512"]):
        kern = compiler.compile(src, pipeline=ONE_THREAD, remarks=True)
    plan = next(r for r in kern.remarks if "[loom-default] matmul 32x96x200" in r)
    assert "panel order" in plan, plan
    if transposed:
        assert "register tile 8x48" in plan and "packed A 32x200" in plan and "loom-pack{operand=0" in plan, plan
    else:
        assert "register tile 4x48" in plan and "A's rows read in place" in plan and "operand=0" not in plan, plan
    rng = np.random.default_rng(5)
    a_shape = (k, m) if transposed else (m, k)
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    a_mat = a.T if transposed else a
    assert_within_bound(kern(a, b), a_mat.astype(np.float64) @ b, k, np.float32)
    a, b = small_ints(rng, a_shape, np.float32), small_ints(rng, (k, n), np.float32)
    np.testing.assert_array_equal(kern(a, b), (a.T if transposed else a) @ b)


def dense(m, n, k):
    """relu(x @ w + b)."""
    return f"""func.func @dense(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %c = loom.matmul %x, %w : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %s = loom.add %c, %b : (tensor<{m}x{n}xf32>, tensor<{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = loom.relu %s : tensor<{m}x{n}xf32>
  func.return %r : tensor<{m}x{n}xf32>
}}"""


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("m, n, k", [(32, 100, 900), (13, 50, 769), (600, 97, 800)])
def test_transposed_b(kind, m, n, k):
    """x @ w.T (B a transposed view): its panels copied along k (loom-pack reads each of
    a panel's columns, a row of w, in one sweep), in the panel order and, with more rows
    than one block holds, the order of row tiles."""
    src = f"""func.func @mm(%x: tensor<{m}x{k}xf32>, %w: tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %wt = loom.transpose %w {{perm = array<i64: 1, 0>}} : tensor<{n}x{k}xf32> -> tensor<{k}x{n}xf32>
  %c = loom.matmul %x, %wt : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  func.return %c : tensor<{m}x{n}xf32>
}}"""
    with planning_for(TARGETS[kind]):
        check_both(src, [(m, k), (n, k)], k, ONE_THREAD)


def test_epilogue_fused_beside_it():
    """relu(x @ w + b): both the first row tile and the others apply the epilogue."""
    m, n, k = 32, 144, 1100
    with planning_for(TARGETS["avx512"]):
        kern = compiler.compile(dense(m, n, k), pipeline=ONE_THREAD, remarks=True)
    text = "\n".join(kern.remarks)
    assert "A's rows read in place, not packed (32x768 a block" in text and "%x_pack" not in text
    assert "copy of %w into %w_pack fused into the first iteration of %i_t2" in text
    assert "prefetch what the next iteration of %j_t2 copies" in text
    assert "[loom-fuse-epilogue] fused add" in text
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (n,)))
    ref = np.maximum(x.astype(np.float64) @ w + b, 0)
    assert_within_bound(kern(x, w, b), ref, k, np.float32)
    xi, wi, bi = (small_ints(rng, s, np.float32) for s in ((m, k), (k, n), (n,)))
    np.testing.assert_array_equal(kern(xi, wi, bi), np.maximum(xi @ wi + bi, 0))


def test_peeled_columns_keep_the_panel_tile():
    """The copy peeled off for the last columns (256 = 5 x 48 + 16) gets the panel order's
    tile too (4 rows on znver4, as the main nest's rows were peeled for), so that no row
    remainder is left in it and the epilogue is fused into both."""
    m, n, k = 196, 256, 256  # (the 1x1 C256 14x14 NHWC layer's matmul)
    with planning_for(TARGETS["avx512"]):
        kern = compiler.compile(dense(m, n, k), pipeline=ONE_THREAD, remarks=True)
    plans = [r for r in kern.remarks if "[loom-default] matmul" in r]
    assert len(plans) == 2 and "matmul 196x240x256" in plans[0] and "peeled copy 1" in plans[1], plans
    assert "register tile 4x48" in plans[0] and "register tile 4x16" in plans[1], plans
    assert any("[loom-fuse-epilogue] fused add (line 3), relu (line 4)" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(6)
    x, w, b = (small_ints(rng, s, np.float32) for s in ((m, k), (k, n), (n,)))
    np.testing.assert_array_equal(kern(x, w, b), np.maximum(x @ w + b, 0))


def test_two_threads_a_column_block_each_and_not_for_several_row_blocks():
    """Two threads: a block of whole panels each (the column blocks' loop in parallel, the
    B panel buffer a slot per block); M > MC rows: the order of row tiles."""
    m, n, k = 24, 200, 150  # peeled to 192 columns: 4 panels of 48, 2 per thread
    rng = np.random.default_rng(4)
    a, b = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32)
    with planning_for(TARGETS["avx512"]) as target:
        two = compiler.compile(mm(m, n, k), pipeline="loom-default{num-threads=2}", remarks=True)
        text = "\n".join(two.remarks)
        assert "a slot per iteration of %j_t (private)" in text and "fused into the first iteration" in text
        assert "[loom-parallelize] nest 'matmul': loop %j_t run in parallel (2 iterations, 2 threads)" in text
        np.testing.assert_array_equal(two(a, b), a @ b)
        plan = plan_matmul(m, 192, k, target, panels=True, threads=2)
        assert plan.panels and plan.nc == 96
        assert not plan_matmul(m, 144, k, target, panels=True, threads=2).panels  # 3 panels: not even
        plan = plan_matmul(4096, 96, 64, target, panels=True)
        assert not plan.panels and plan.mc < 4096
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    assert_within_bound(two(a, b), a.astype(np.float64) @ b, k, np.float32)


@pytest.mark.parametrize("kind, m", [("avx2", 64), ("avx512", 128)])
def test_plan_of_the_panel_order(kind, m):
    """NC = N on one thread; KC halved while A's block, B's panel and C (reread per k
    block) exceed 3/4 of L2; a direct convolution's windows (A read in place) too, A then
    not packed, but not an NCHW convolution's (B in place) nor on a dot-product instruction."""
    with planning_for(TARGETS[kind]) as target:
        plan = plan_matmul(m, 768, 3072, target, panels=True)
        assert plan.panels and plan.nc == 768 and plan.mc >= m
        assert plan.kc < plan_matmul(m, 768, 3072, target).kc
        assert (m * plan.kc + plan.kc * plan.nr + m * 768) * 4 <= 3 * target.l2 // 4
        single = plan_matmul(m, 3072, 768, target, panels=True)
        assert single.panels and single.kc == plan_matmul(m, 3072, 768, target).kc
        windows = plan_matmul(m, 768, 3072, target, in_place="A", panels=True)
        assert windows.panels and windows.in_place == "A" and not windows.pack_a
        assert not plan_matmul(m, 768, 3072, target, in_place="B", panels=True).panels
        assert not plan_matmul(m, 768, 3072, target, in_place="A", panels=True, dot="vdpbf16ps").panels
        assert not plan_matmul(m, 768, 3072, target).panels
        # A read in place where measured (znver4, f32) and its rows are contiguous along k,
        # the panel order then with its own tile
        a_in_place = 4 in A_IN_PLACE.get(target.cpu, ())
        tile = MEASURED_PANEL_TILES.get(target.cpu, {}).get(4) if a_in_place else None
        assert (plan.mr, plan.nr, plan.pack_a) == ((*tile, False) if tile else (*register_tile(target), True))
        packed = plan_matmul(m, 768, 3072, target, panels=True, a_rows=False)
        assert packed.pack_a and (packed.mr, packed.nr) == register_tile(target)
        rows = plan_matmul(m, 768, 3072, target)  # the order of row tiles
        assert rows.pack_a != a_in_place and (rows.mr, rows.nr) == register_tile(target)
        assert plan_matmul(m, 768, 3072, target, 8, panels=True).pack_a  # f64: none measured


def test_row_blocks_equal_and_a_in_place_on_threads_only_where_they_split_evenly():
    """The order of row tiles on znver4: MC gives equal row blocks (512 rows in 2 of 256,
    not 384 + 128), and on several threads A is read in place only where the blocks split
    evenly over them (the row-block loop then runs in parallel): 1000 rows in 5 blocks of
    200 keep A packed on 2 threads, not on one."""
    with planning_for(TARGETS["avx512"]) as target:
        plan = plan_matmul(512, 512, 512, target, threads=2)
        assert (plan.mc, plan.pack_a) == (256, False)
        assert plan_matmul(1000, 1000, 1000, target, threads=2).pack_a
        assert not plan_matmul(1000, 1000, 1000, target, threads=1).pack_a
        assert plan_matmul(1000, 1000, 1000, target).mc == 200
    with planning_for(TARGETS["avx2"]) as target:  # no A_IN_PLACE there: A packed
        assert plan_matmul(1024, 1024, 1024, target, threads=2).pack_a
        assert plan_matmul(1024, 1024, 1024, target).pack_a


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_batched_f64_and_im2col_conv_in_the_panel_order(kind):
    """A batched matmul (the batch loop outside the panel order), f64 (its own tile), and
    a conv2d through im2col (its matmul of F rows by the patch matrix), on one thread."""
    rng = np.random.default_rng(3)
    bmm = matmul((3, 20, 70), (3, 70, 100), (3, 20, 100), np.float64)
    a, b = rng.standard_normal((3, 20, 70)), rng.standard_normal((3, 70, 100))
    with planning_for(TARGETS[kind]):
        kern = compiler.compile(bmm, pipeline=ONE_THREAD, remarks=True)
        assert any("[loom-fuse-pack]" in r and "fused" in r for r in kern.remarks)
        assert_within_bound(kern(a, b), a @ b, 70, np.float64)
        src, shapes, k = conv2d_kernel((2, 8, 12, 12, 24, 3, 3, (1, 1), (1, 1), (1, 1)), np.float32)
        conv = compiler.compile(src, pipeline="loom-default{num-threads=1 skip=direct}", remarks=True)
        assert any("[loom-fuse-pack]" in r and "fused" in r for r in conv.remarks)
        x, w = (small_ints(rng, s, np.float32) for s in shapes)
        np.testing.assert_array_equal(conv(x, w), compiler.reference(src, x, w).astype(np.float32))


@settings(deadline=None)
@given(m=st.integers(1, 60), panels=st.integers(1, 4), k=st.one_of(dim, st.sampled_from([769, 1031])),
       threads=st.sampled_from([2, 3]), seed=st.integers(0, 2**16), kind=st.sampled_from(sorted(TARGETS)))
@example(m=16, panels=2, k=1031, threads=2, seed=0, kind="avx512")  # two k blocks, a column block per thread
@example(m=7, panels=3, k=40, threads=3, seed=0, kind="avx2")  # fewer rows than MR: no panel order
def test_column_blocks_on_threads_are_correct(m, panels, k, threads, seed, kind):
    """N = a whole number of panels per thread: each thread its column block and its slot
    of the panel buffer; exact on small integers, within the bound on normal inputs."""
    with planning_for(TARGETS[kind]) as target:
        n = panels * threads * register_tile(target)[1]
        check_both(mm(m, n, k), [(m, k), (k, n)], k, f"loom-default{{num-threads={threads}}}", seed=seed)


def rows_from(upper):
    """Iteration %t copies row %t of %b into %buf, then its reader adds %buf to the rows
    %t to `upper` of %c (an affine bound of %t)."""
    return f"""func.func @rows(%b: memref<8x4xf32>, %c: memref<8x4xf32>) {{
  %buf = memref.alloc() : memref<4xf32>
  affine.for %t = 0 to 8 {{
    affine.for %x = 0 to 4 {{
      %v = affine.load %b[%t, %x] : memref<8x4xf32>
      affine.store %v, %buf[%x] : memref<4xf32>
    }}
    affine.for %i = %t to {upper} {{
      affine.for %x = 0 to 4 {{
        %p = affine.load %buf[%x] : memref<4xf32>
        %q = affine.load %c[%i, %x] : memref<8x4xf32>
        %s = arith.addf %p, %q : f32
        affine.store %s, %c[%i, %x] : memref<8x4xf32>
      }}
    }}
  }} {{loom.tag = "rows"}}
  memref.dealloc %buf : memref<4xf32>
  func.return
}}"""


@pytest.mark.parametrize("upper, last, fuses", [
    ("8", lambda t: 8, True),  # %t to 8: at least one row, always
    ("min affine_map<(d0) -> (d0 + 2, 7)>(%t)", lambda t: min(t + 2, 7), False),  # none when %t = 7
], ids=["always_once", "maybe_never"])
def test_a_reader_that_may_run_no_iteration_keeps_its_copy(upper, last, fuses):
    """The copy is fused into its reader's first iteration only where the reader runs at
    least once: a reader that runs no iteration (%t = 7 with the min bound) would still
    run the peeled first one. Exact against the loops run in numpy."""
    kern = compiler.compile(rows_from(upper), pipeline="loom-fuse-pack", remarks=True)
    remarks = [r for r in kern.remarks if "[loom-fuse-pack]" in r]
    assert any(("fused into the first iteration of %i" if fuses else "its reader %i may run no iteration") in r
               for r in remarks), remarks
    rng = np.random.default_rng(7)
    b, c = small_ints(rng, (8, 4), np.float32), small_ints(rng, (8, 4), np.float32)
    want = c.astype(np.float64)
    for t in range(8):
        want[t:last(t)] += b[t]
    kern(b, c)
    np.testing.assert_array_equal(c, want)


#: readers whose iterations read different elements of the buffer: (the bounds of the
#: loop %y inside the reader %i, the element read, the values of %y that read it, the
#: element in Python)
VARYING = {
    "subscript": ("0 to 1", "%i", lambda i: range(1), lambda i, y: i),
    "upper_bound": ("0 to affine_map<(d0) -> (d0 + 1)>(%i)", "%y", lambda i: range(i + 1), lambda i, y: y),
    "lower_bound": ("affine_map<(d0) -> (d0)>(%i) to 4", "%y", lambda i: range(i, 4), lambda i, y: y),
    # the read under `affine.if %y <= %i`: the first iteration reads element 0 only
    "condition": ("0 to 4", "%y", lambda i: range(i + 1), lambda i, y: y),
    # one element, read in a loop whose upper bound uses %i: the first iteration reads none
    "fixed_under_upper_bound": ("0 to affine_map<(d0) -> (d0)>(%i)", "2", lambda i: range(i), lambda i, y: 2),
}


@pytest.mark.parametrize("case", sorted(VARYING))
def test_a_reader_whose_iterations_read_different_elements_keeps_its_copy(case):
    """The first iteration of the reader stores into the buffer only what it reads: when
    the others read other elements (at %i, or at the iv of a loop whose bounds use %i,
    which varies with %i too, or under a condition on %i; or one element, in a loop whose
    upper bound is %i, which the first iteration runs no times), those would never be copied.
    Left as it is, with the remark naming the subscripts or the condition; exact against
    numpy."""
    bounds, element, ys, at = VARYING[case]
    body = f"""%p = affine.load %buf[{element}] : memref<4xf32>
        %q = affine.load %c[%i, {element}] : memref<4x4xf32>
        %s = arith.addf %p, %q : f32
        affine.store %s, %c[%i, {element}] : memref<4x4xf32>"""
    why = "the iterations of %i read different elements of it (" + (
        "a loop or condition around a read depends on %i)" if case in ("condition", "fixed_under_upper_bound")
        else "its subscripts at affine.load depend on %i)")
    if case == "condition":
        body = f"""\"affine.if\"(%i, %y) <{{condition = affine_set<(d0, d1) : (d0 - d1 >= 0)>}}> ({{
        {body}
        affine.yield
        }}, {{
        }}) : (index, index) -> ()"""
    src = f"""func.func @varying(%b: memref<3x4xf32>, %c: memref<4x4xf32>) {{
  %buf = memref.alloc() : memref<4xf32>
  affine.for %t = 0 to 3 {{
    affine.for %x = 0 to 4 {{
      %v = affine.load %b[%t, %x] : memref<3x4xf32>
      affine.store %v, %buf[%x] : memref<4xf32>
    }}
    affine.for %i = 0 to 4 {{
      affine.for %y = {bounds} {{
        {body}
      }}
    }}
  }} {{loom.tag = "varying"}}
  memref.dealloc %buf : memref<4xf32>
  func.return
}}"""
    kern = compiler.compile(src, pipeline="loom-fuse-pack", remarks=True)
    assert any(f"left as it is: {why}" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(10)
    b, c = small_ints(rng, (3, 4), np.float32), small_ints(rng, (4, 4), np.float32)
    want = c.astype(np.float64)
    for t in range(3):
        for i in range(4):
            for y in ys(i):
                want[i, at(i, y)] += b[t, at(i, y)]
    kern(b, c)
    np.testing.assert_array_equal(c, want)


#: copy nests one step off a copy (what the copy nest of %buf holds): its reader, which
#: reads %buf[2 * %y] for %y < 2, must not be given a copy at other subscripts
NOT_COPIES = {
    # every second element: %buf[2 * %x] = %b[%t, %x], not %buf[%x]
    "store_stride_2": """affine.for %x = 0 to 2 {
      %v = affine.load %b[%t, %x] : memref<3x4xf32>
      affine.store %v, %buf[2 * %x] : memref<4xf32>
    }""",
    # the load walks %k, which the store does not: the last %k's row wins
    "load_walks_a_loop_the_store_does_not": """affine.for %x = 0 to 4 {
      affine.for %k = 0 to 3 {
        %v = affine.load %b[%k, %x] : memref<3x4xf32>
        affine.store %v, %buf[%x] : memref<4xf32>
      }
    }""",
}


@pytest.mark.parametrize("case", sorted(NOT_COPIES))
def test_a_nest_that_is_not_a_plain_copy_is_not_fused(case):
    """A nest whose store walks its loop by 2, or whose load walks a loop the store does
    not, is not a copy of one element per store: left as it is, with no remark of a
    fusion; exact against the loops run unscheduled."""
    src = f"""func.func @not_copy(%b: memref<3x4xf32>, %c: memref<3x2xf32>) {{
  %buf = memref.alloc() : memref<4xf32>
  affine.for %t = 0 to 3 {{
    {NOT_COPIES[case]}
    affine.for %i = 0 to 3 {{
      affine.for %y = 0 to 2 {{
        %p = affine.load %buf[2 * %y] : memref<4xf32>
        %q = affine.load %c[%i, %y] : memref<3x2xf32>
        %s = arith.addf %p, %q : f32
        affine.store %s, %c[%i, %y] : memref<3x2xf32>
      }}
    }}
  }} {{loom.tag = "not_copy"}}
  memref.dealloc %buf : memref<4xf32>
  func.return
}}"""
    kern = compiler.compile(src, pipeline="loom-fuse-pack", remarks=True)
    assert not any("fused into" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(11)
    matches_naive(kern, src, small_ints(rng, (3, 4), np.float32), small_ints(rng, (3, 2), np.float32))

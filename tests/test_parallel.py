"""Parallel loops (loom-parallelize, loom-lower-parallel, the default pipeline's parallel
step) against numpy, and bit for bit against one thread.

Only loops whose iterations are independent run in parallel, each element computed by
one thread in the order it was: results do not depend on the thread count, so every
kernel is compared bit for bit across 1, 2, 3 and 8 threads (more threads than this
machine's cores must be right too), and with numpy within 4*K*eps*max|ref| (bit-exactly
with small integers). Kernels are sized so that the default pipeline's cost model
parallelizes them (`MIN_PARALLEL_WORK`).
"""

from __future__ import annotations

import os
import re
import resource
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import TRIANGLE, assert_within_bound, binary, conv2d, conv2d_kernel, matmul, small_ints

from xdsl.dialects import affine

import compiler
from dialects.context import make_context
from passes.support.parser import parse_module
from passes.analysis.parallel_analysis import carried_dependence
from passes.schedule.loom_parallelize import LoomParallelizePass
from passes.support.remarks import collect
from passes.support.target import openmp_runtime
from passes.analysis.cost_model import MIN_PARALLEL_WORK

pytestmark = pytest.mark.skipif(openmp_runtime() is None, reason="libgomp is not installed")

THREADS = [1, 2, 3, 8]


def kernels(src: str, pipeline: str = "default", threads=THREADS, **kw):
    return [compiler.compile(src, pipeline=pipeline, num_threads=t, remarks=True, **kw) for t in threads]


def parallel_remarks(kernel) -> list[str]:
    return [r for r in kernel.remarks if "run in parallel" in r]


def assert_same_across_threads(ks, *args):
    outs = [k(*args) for k in ks]
    for k, out in zip(ks[1:], outs[1:]):
        np.testing.assert_array_equal(out, outs[0], err_msg=f"{k.num_threads} threads differ from 1")
    return outs[0]


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (300, 200, 100), (127, 255, 511), (1, 8192, 1024),
                                   (5, 2000, 1201), (97, 130, 1000)])
def test_matmul_bit_identical_across_thread_counts(m, n, k, vector_target):
    src = matmul((m, k), (k, n), (m, n), np.float32)
    ks = kernels(src)
    assert not parallel_remarks(ks[0]), ks[0].remarks  # one thread: nothing parallel
    assert parallel_remarks(ks[1]), ks[1].remarks
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    out = assert_same_across_threads(ks, a, b)
    assert_within_bound(out, a.astype(np.float64) @ b, k, np.float32)
    ai, bi = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32)
    np.testing.assert_array_equal(ks[1](ai, bi), ai @ bi)


def test_batched_matmul_f64(vector_target):
    src = matmul((3, 130, 190), (3, 190, 150), (3, 130, 150), np.float64)
    ks = kernels(src)
    assert parallel_remarks(ks[1]), ks[1].remarks
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 130, 190)), rng.standard_normal((3, 190, 150))
    out = assert_same_across_threads(ks, a, b)
    assert_within_bound(out, a @ b, 190, np.float64)


def test_conv2d_output_channels_in_parallel(vector_target):
    case = (2, 8, 30, 30, 16, 3, 3, (1, 1), (1, 1), (1, 1))
    src, shapes, _ = conv2d_kernel(case, np.float32)
    ks = kernels(src)
    assert parallel_remarks(ks[1]), ks[1].remarks
    rng = np.random.default_rng(2)
    x, w = (small_ints(rng, s, np.float32) for s in shapes)
    out = assert_same_across_threads(ks, x, w)
    np.testing.assert_array_equal(out, compiler.reference(src, x, w).astype(np.float32))


@pytest.mark.parametrize("stride", [1, 2])
def test_nhwc_direct_conv_in_the_panel_order_on_threads(stride, vector_target):
    """A small map's direct convolution (ResNet's 7x7 at batch 1: its rows one block) takes
    the panel order with its windows read in place: the threads each copy and stream their
    own block of the filter's panels (with 8 threads, more than the panels, the order of
    row tiles). The same bits on every thread count, and exact on small integers."""
    h = 7 * stride
    src = conv2d((1, h, h, 96), (3, 3, 96, 128), (1, 7, 7, 128), (stride, stride), (1, 1), (1, 1), np.float32,
                 layout="nhwc")
    ks = kernels(src)
    assert "panel order" in default_plan(ks[1]) and "A read in place" in default_plan(ks[1])
    assert parallel_remarks(ks[1]), ks[1].remarks
    rng = np.random.default_rng(stride)
    x, w = small_ints(rng, (1, h, h, 96), np.float32), small_ints(rng, (3, 3, 96, 128), np.float32)
    out = assert_same_across_threads(ks, x, w)
    np.testing.assert_array_equal(out, compiler.reference(src, x, w).astype(np.float32))


def default_plan(kernel) -> str:
    return next(r for r in kernel.remarks if "[loom-default] matmul" in r)


def test_elementwise_in_parallel(vector_target):
    src = binary("add", (2000, 1000), (1000,), (2000, 1000), np.float32, relu=True)
    ks = kernels(src)
    assert parallel_remarks(ks[1]), ks[1].remarks
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2000, 1000), dtype=np.float32), rng.standard_normal(1000, dtype=np.float32)
    np.testing.assert_array_equal(assert_same_across_threads(ks, a, b), np.maximum(a + b, 0))


def test_small_kernels_stay_serial():
    """Fork and join cost more than a 24^3 matmul gains: the cost model keeps it serial."""
    src = matmul((24, 24), (24, 24), (24, 24), np.float32)
    kernel = compiler.compile(src, pipeline="default", num_threads=2, remarks=True)
    assert not parallel_remarks(kernel)
    assert any(f"fewer than min-work={MIN_PARALLEL_WORK:,}" in r for r in kernel.remarks), kernel.remarks
    assert "GOMP_parallel" not in kernel.llvm_ir


@settings(max_examples=12)
@given(m=st.sampled_from([1, 2, 13, 97, 140]), n=st.sampled_from([1, 17, 64, 301]), k=st.sampled_from([1, 7, 256]),
       threads=st.sampled_from([2, 3, 5]), min_work=st.sampled_from([0, 1000]))
def test_explicit_parallel_pipeline_on_random_shapes(m, n, k, threads, min_work):
    """loom-parallelize with no work threshold on shapes with 1, primes and sizes no tile
    divides, after the default schedule: every legal loop may run in parallel."""
    src = matmul((m, k), (k, n), (m, n), np.float32)
    serial = compiler.compile(src, pipeline="loom-default{skip=parallel}")
    par = compiler.compile(src, pipeline=f"loom-default{{skip=parallel}},loom-parallelize{{num-threads={threads} "
                                          f"min-work={min_work}}}")
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    np.testing.assert_array_equal(par(a, b), serial(a, b))


def _threads_of_process() -> int:
    return len(os.listdir("/proc/self/task"))


def test_many_calls_hold_threads_and_memory_steady():
    """libgomp keeps its team between calls: 10,000 calls of a 2-thread kernel create no
    thread and no memory after the first."""
    src = matmul((256, 256), (256, 256), (256, 256), np.float32)
    kernel = compiler.compile(src, pipeline="default", num_threads=2)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((256, 256), dtype=np.float32), rng.standard_normal((256, 256), dtype=np.float32)
    out = np.empty((256, 256), np.float32)
    for _ in range(100):
        kernel(a, b)
    threads, rss = _threads_of_process(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(10_000):
        out = kernel(a, b)
    assert _threads_of_process() == threads
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 16 * 1024  # KiB
    assert_within_bound(out, a.astype(np.float64) @ b, 256, np.float32)


def test_kernel_called_from_several_python_threads():
    """Each calling thread gets its own libgomp team: calls from two Python threads at
    once are right."""
    src = matmul((200, 300), (300, 150), (200, 150), np.float32)
    kernel = compiler.compile(src, pipeline="default", num_threads=2)
    rng = np.random.default_rng(5)
    pairs = [(small_ints(rng, (200, 300), np.float32), small_ints(rng, (300, 150), np.float32)) for _ in range(4)]
    results: dict[int, bool] = {}

    def run(i):
        a, b = pairs[i]
        results[i] = all(np.array_equal(kernel(a, b), a @ b) for _ in range(20))

    workers = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert results == {i: True for i in range(4)}


def test_omp_num_threads_is_the_default(tmp_path: Path):
    """Without num_threads, the default pipeline takes OMP_NUM_THREADS (here 1: serial)."""
    import subprocess
    import sys

    code = ("import compiler, numpy as np\n"
            "from kernels import matmul\n"
            "src = matmul((256, 256), (256, 256), (256, 256), np.float32)\n"
            "k = compiler.compile(src, pipeline='default', remarks=True)\n"
            "print(sum('run in parallel' in r for r in k.remarks))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parent)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert p.stdout.strip() == "0"
    env["OMP_NUM_THREADS"] = "2"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert int(p.stdout.strip()) > 0


def serial_remarks(kernel) -> list[str]:
    return [r for r in kernel.remarks if "left serial" in r]


def test_a_triangular_band_is_not_collapsed():
    """9 rows on 2 or 4 threads split unevenly, but the inner loop's bound uses the
    outer iv (a triangle): the two are not one rectangular iteration space, so only the
    outer loop runs in parallel. Exact, whatever the thread count."""
    src = TRIANGLE
    a = small_ints(np.random.default_rng(6), (9, 9), np.float32)
    for kernel in kernels(src, pipeline="loom-parallelize", threads=[2, 4]):
        assert parallel_remarks(kernel) == [r for r in kernel.remarks if "loop %i run in parallel (9 iterations," in r]
        c = np.zeros((9, 9), np.float32)
        kernel(a, c)
        np.testing.assert_array_equal(c, np.tril(2 * a))


#: iteration %j writes %c[%j] and %c[%j + 1] (rows of %a and %b, so that the iteration
#: that writes an element last decides its value): parallel only when %j steps by 2 or more
NEIGHBOURS = """func.func @neighbours(%a: memref<64xf32>, %b: memref<64xf32>, %c: memref<65xf32>) {
  affine.for %j = 0 to 64 step STEP {
    %x = affine.load %a[%j] : memref<64xf32>
    affine.store %x, %c[%j] : memref<65xf32>
    %y = affine.load %b[%j] : memref<64xf32>
    affine.store %y, %c[%j + 1] : memref<65xf32>
  } {loom.tag = "neighbours"}
  func.return
}"""

#: iteration %j stores LANES elements of row %j of %a at %c[%j]: parallel only when the
#: lanes do not reach past the step
LANES = """func.func @lanes(%a: memref<64x8xf32>, %c: memref<72xf32>) {
  affine.for %j = 0 to 64 step 4 {
    %v = affine.vector_load %a[%j, 0] : memref<64x8xf32>, vector<LANESxf32>
    affine.vector_store %v, %c[%j] : memref<72xf32>, vector<LANESxf32>
  } {loom.tag = "lanes"}
  func.return
}"""


#: case -> (source, whether its loop may run in parallel)
WINDOWS = {
    # what one iteration writes spans 2 elements, one more than the step: neighbours overlap
    "neighbours_step_1": (NEIGHBOURS.replace("STEP", "1"), False),
    "neighbours_step_2": (NEIGHBOURS.replace("STEP", "2"), True),  # 2 elements in a step of 2: apart
    "lanes_8_step_4": (LANES.replace("LANES", "8"), False),  # 8 lanes in a step of 4: overlap
    "lanes_4_step_4": (LANES.replace("LANES", "4"), True),  # 4 lanes in a step of 4: apart
}


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_iterations_overlap_by_their_window(case):
    """An iteration writes a window (two neighbours, a vector's lanes); iterations one
    step apart overlap when the window is longer than the step: left serial, with the
    dependence named. The results are those of the loops in order on 1, 2, 3 and 8
    threads, built elementwise in numpy."""
    src, parallel = WINDOWS[case]
    rng = np.random.default_rng(8)
    ks = kernels(src, pipeline="loom-parallelize")
    for k in ks[1:]:
        assert bool(parallel_remarks(k)) == parallel, k.remarks
        assert parallel or any("in different iterations" in r for r in serial_remarks(k)), k.remarks
    if case.startswith("neighbours"):
        step = int(case[-1])
        a, b = small_ints(rng, (64,), np.float32), small_ints(rng, (64,), np.float32)
        want = np.zeros(65, np.float64)
        for j in range(0, 64, step):
            want[j], want[j + 1] = a[j], b[j]
        args = (a, b)
    else:
        lanes = int(case.split("_")[1])
        a = small_ints(rng, (64, 8), np.float32)
        want = np.zeros(72, np.float64)
        for j in range(0, 64, 4):
            want[j:j + lanes] = a[j, :lanes]
        args = (a,)
    for k in ks:
        for _ in range(20):  # a race shows at a thread's boundary, in some of the runs
            c = np.zeros(len(want), np.float32)
            k(*args, c)
            np.testing.assert_array_equal(c, want, err_msg=f"{k.num_threads} threads")


def test_accesses_offset_by_an_outer_iv_may_meet():
    """%c[%i + %t] and %c[%i] differ by %t, fixed while %i runs but not a constant: for
    %t = 1 iteration %i writes what %i + 1 reads (a running sum). %i is left serial, as
    is %t; the sums are exact on any thread count."""
    src = """func.func @offset(%a: memref<64xf32>, %c: memref<65xf32>) {
  affine.for %t = 0 to 2 {
    affine.for %i = 0 to 64 {
      %x = affine.load %c[%i] : memref<65xf32>
      %y = affine.load %a[%i] : memref<64xf32>
      %s = arith.addf %x, %y : f32
      affine.store %s, %c[%i + %t] : memref<65xf32>
    }
  } {loom.tag = "offset"}
  func.return
}"""
    rng = np.random.default_rng(9)
    a, c0 = small_ints(rng, (64,), np.float32), small_ints(rng, (65,), np.float32)
    want = c0.astype(np.float64)
    for t in range(2):
        for i in range(64):
            want[i + t] = want[i] + a[i]
    for k in kernels(src, pipeline="loom-parallelize"):
        assert not parallel_remarks(k), k.remarks
        assert any("%i: load %c[%i]" in r and "may touch the same element" in r for r in serial_remarks(k)), k.remarks
        c = c0.copy()
        k(a, c)
        np.testing.assert_array_equal(c, want, err_msg=f"{k.num_threads} threads")


# --------------------------------------------------------------------------------------
# carried_dependence on its own: each reason a loop is left serial, and the last window
# that still fits in a step


def _outer_loop(text: str) -> affine.ForOp:
    module = parse_module(make_context(), text, "par.mlir")
    return next(op for op in module.walk() if isinstance(op, affine.ForOp))


def _step_4(body: str, args: str = "%a: memref<64xf32>, %c: memref<72xf32>", head: str = "", decl: str = "") -> str:
    """A loop %j = 0 to 64 step 4 around `body`."""
    return f"""{decl}func.func @f({args}) {{
{head}  affine.for %j = 0 to 64 step 4 {{
{body}
  }}
  func.return
}}"""


def _window(extent: int, subscript: str) -> str:
    return _step_4(f"""    affine.for %k = 0 to {extent} {{
      %x = affine.load %a[%j] : memref<64xf32>
      affine.store %x, %c[{subscript}] : memref<72xf32>
    }}""")


def _private_slot(slot: str, lb: int = 0, upper: str = "64") -> str:
    """Iteration %j (step 4) writes and reads back %p[slot]: loom-pack's private buffer
    when the slot is the iteration number `(%j - lb) floordiv 4`."""
    return f"""func.func @f(%a: memref<64xf32>, %c: memref<64xf32>, %p: memref<16x4xf32>, %u: index) {{
  affine.for %j = {lb} to {upper} step 4 {{
    %s = affine.apply affine_map<(d0) -> ({slot})>(%j)
    %x = affine.load %a[%j] : memref<64xf32>
    affine.store %x, %p[%s, 0] : memref<16x4xf32>
    %y = affine.load %p[%s, 0] : memref<16x4xf32>
    affine.store %y, %c[%j] : memref<64xf32>
  }}
  func.return
}}"""


CALL = "func.func private @g({}) -> ()\n"
CARRIED = {
    # an inner loop's range widens the window: 4 elements fit in the step of 4, 5 do not
    "inner_4": (_window(4, "%j + %k"), None),
    "inner_5": (_window(5, "%j + %k"), "store %c[%j + %k] (line 5) write the same element in different iterations"),
    "inner_4_backwards": (_window(4, "%j - %k + 3"), None),
    "inner_5_backwards": (_window(5, "%j - %k + 4"),
                          "store %c[%j + %k * -1 + 4] (line 5) write the same element in different iterations"),
    "memref_store": (_step_4("""    %x = memref.load %a[%j] : memref<64xf32>
    memref.store %x, %c[%j] : memref<72xf32>"""), None),
    # reads 3 ahead: still within the step; 4 ahead: what the next iteration writes
    "memref_store_reads_3_ahead": (_step_4("""    %x = affine.load %c[%j + 3] : memref<72xf32>
    memref.store %x, %c[%j] : memref<72xf32>"""), None),
    "memref_store_reads_4_ahead": (_step_4("""    %x = affine.load %c[%j + 4] : memref<72xf32>
    memref.store %x, %c[%j] : memref<72xf32>"""),
        "load %c[%j + 4] (line 3) and memref.store on %c (line 4) may touch the same element in different iterations"),
    "alloc": (_step_4("""    %t = memref.alloc() : memref<4xf32>
    %x = affine.load %a[%j] : memref<64xf32>
    affine.store %x, %t[0] : memref<4xf32>"""),
        "it allocates %t in its body (a temporary each thread would allocate, and could not report failing to)"),
    "call": (_step_4("    func.call @g() : () -> ()", decl=CALL.format("")),
             "'func.call' in the loop may touch any memory"),
    "call_on_c": (_step_4("    func.call @g(%c) : (memref<72xf32>) -> ()", decl=CALL.format("memref<72xf32>")),
                  "func.call on %c (line 4) write the same element in different iterations"),
    "call_on_a_and_c": (_step_4("    func.call @g(%a, %c) : (memref<64xf32>, memref<72xf32>) -> ()",
                                decl=CALL.format("memref<64xf32>, memref<72xf32>")),
                        "'func.call' in the loop touches %a, %c in a way the analysis does not follow"),
    "view": (_step_4("""    %x = affine.load %v[%j] : memref<64xf32, strided<[1], offset: 8>>
    affine.store %x, %c[%j] : memref<72xf32>""",
                     head="  %v = memref.subview %c[8] [64] [1] : memref<72xf32> to "
                          "memref<64xf32, strided<[1], offset: 8>>\n"),
             "load %v[%j] (line 4) and store %c[%j] (line 5) reach one buffer through different views"),
    "select": (_step_4("""    %x = affine.load %a[%j] : memref<64xf32>
    affine.store %x, %s[%j] : memref<72xf32>""",
                       args="%a: memref<64xf32>, %c: memref<72xf32>, %d: memref<72xf32>, %p: i1",
                       head="  %s = arith.select %p, %c, %d : memref<72xf32>\n"),
               "load %a[%j] (line 4) and store %s[%j] (line 5): %s, the result of 'arith.select', may be any buffer"),
    "private_slot": (_private_slot("d0 floordiv 4"), None),
    "private_slot_from_4": (_private_slot("(d0 - 4) floordiv 4", lb=4), None),
    # two iterations share a slot
    "shared_slot": (_private_slot("d0 floordiv 8"),
                    "store %p[%s, 0] (line 5) write the same element in different iterations"),
    # a trip count known at run time: not read as the iteration number
    "slot_of_a_run_time_loop": (_private_slot("d0 floordiv 4", upper="%u"),
                                "store %p[%s, 0] (line 5) write the same element in different iterations"),
    # the iteration number is comparable only with another: %p[%j] is %p[%s] of iteration %j / 4,
    # and %s + 1 is the next iteration's slot
    "slot_beside_the_iv": (
        _private_slot("d0 floordiv 4").replace("load %p[%s, 0]", "load %p[%j, 0]").replace("16x4", "64x4"),
        "store %p[%s, 0] (line 5) and load %p[%j, 0] (line 6) may touch the same element in different iterations"),
    "next_slot": (
        _private_slot("d0 floordiv 4").replace("store %x, %p[%s, 0]", "store %x, %p[%s + 1, 0]").replace(
            "16x4", "17x4"),
        "store %p[%s + 1, 0] (line 5) write the same element in different iterations"),
    # %k counts down: the stores reach %c[%j .. %j + 3], and the load %c[%j + 4] is the next iteration's
    "inner_4_backwards_reads_ahead": (_step_4("""    %y = affine.load %c[%j + 4] : memref<72xf32>
    affine.for %k = 0 to 4 {
      affine.store %y, %c[%j - %k + 3] : memref<72xf32>
    }"""), "load %c[%j + 4] (line 3) and store %c[%j + %k * -1 + 3] (line 5) may touch the same element in "
           "different iterations"),
    # %k starts at -%j, computed in the loop by arith.subi: every iteration writes %c[0]
    "inner_from_a_computed_start": (_step_4("""    %z = arith.constant 0 : index
    %s = arith.subi %z, %j : index
    %x = affine.load %a[%j] : memref<64xf32>
    affine.for %k = %s to affine_map<(d0) -> (d0 + 1)>(%s) {
      affine.store %x, %c[%j + %k] : memref<72xf32>
    }"""), "store %c[%j + %k] (line 7) write the same element in different iterations"),
    # 7 ceildiv 2 is 4: the next iteration's element
    "reads_a_ceildiv_ahead": (_step_4("""    %seven = arith.constant 7 : index
    %o = affine.apply affine_map<()[s0] -> (s0 ceildiv 2)>()[%seven]
    %x = affine.load %c[%j + %o] : memref<72xf32>
    affine.store %x, %c[%j] : memref<72xf32>"""),
        "load %c[%j + %o] (line 5) and store %c[%j] (line 6) may touch the same element in different iterations"),
    # a subscript computed by arith.addi is not followed: alone, a conflict; beside %j, apart
    "arith_subscript": (_step_4("""    %one = arith.constant 1 : index
    %k = arith.addi %j, %one : index
    %x = affine.load %a[%j] : memref<64xf32>
    memref.store %x, %c[%k] : memref<72xf32>"""),
                        "memref.store on %c (line 6) write the same element in different iterations"),
    "arith_subscript_beside_the_iv": (_step_4("""    %one = arith.constant 1 : index
    %k = arith.addi %j, %one : index
    %x = affine.load %a[%j] : memref<64xf32>
    memref.store %x, %d[%j, %k] : memref<64x72xf32>""", args="%a: memref<64xf32>, %d: memref<64x72xf32>"), None),
    "iter_args": ("""func.func @f(%a: memref<64xf32>) -> f32 {
  %z = arith.constant 0.0 : f32
  %r = affine.for %j = 0 to 64 iter_args(%acc = %z) -> (f32) {
    %x = affine.load %a[%j] : memref<64xf32>
    %s = arith.addf %acc, %x : f32
    affine.yield %s : f32
  }
  func.return %r : f32
}""", "loop %j carries values from one iteration to the next (iter_args)"),
}


@pytest.mark.parametrize("case", sorted(CARRIED))
def test_carried_dependence_names_the_reason(case):
    text, why = CARRIED[case]
    assert carried_dependence(_outer_loop(text)) == why


def _twice(rows: int, cols: int | str) -> str:
    """c = a + a over rows x cols, the inner loop's trip count a static `cols` or the
    argument %n."""
    upper, n = ("%n", ", %n: index") if cols == "n" else (cols, "")
    cols = 4 if cols == "n" else cols
    return f"""func.func @twice(%a: memref<{rows}x{cols}xf32>, %c: memref<{rows}x{cols}xf32>{n}) {{
  affine.for %t = 0 to {rows} {{
    affine.for %j = 0 to {upper} {{
      %x = affine.load %a[%t, %j] : memref<{rows}x{cols}xf32>
      %y = arith.addf %x, %x : f32
      affine.store %y, %c[%t, %j] : memref<{rows}x{cols}xf32>
    }}
  }} {{loom.tag = "twice"}}
  func.return
}}"""


def _run_twice(kernel, rows: int, cols: int) -> None:
    a = small_ints(np.random.default_rng(rows), (rows, cols), np.float32)
    c = np.full_like(a, np.nan)
    kernel(a, c)
    np.testing.assert_array_equal(c, 2 * a)


@pytest.mark.parametrize("rows, parallel", [(0, "%j"), (1, "%j"), (2, "%t")])
def test_a_loop_of_fewer_than_two_iterations_is_not_parallel(rows, parallel):
    """2 iterations are the fewest run in parallel: below, the loop inside runs in parallel
    instead, and the loop itself, asked for, is refused with its count."""
    k = compiler.compile(_twice(rows, 8), pipeline="loom-parallelize{num-threads=2}", remarks=True)
    assert [r.split("] ", 1)[1] for r in parallel_remarks(k)] == [
        f"nest 'twice': loop {parallel} run in parallel ({8 if parallel == '%j' else 2} iterations, 2 threads)"]
    if rows:
        _run_twice(k, rows, 8)
    if rows < 2:
        count = f"{rows} iteration{'s' * (rows != 1)}"
        with pytest.raises(compiler.LoomError, match=f"loop %t at depth 0 is not parallel: {count}$"):
            compiler.compile(_twice(rows, 8), pipeline="loom-parallelize{op=twice depth=0}")


def test_min_work_is_the_least_work_run_in_parallel():
    """A nest of exactly min-work operations runs in parallel; one operation more asked
    for, it stays serial, with its estimate named."""
    big = compiler.compile(_twice(4, 8), pipeline="loom-parallelize{min-work=1000000000}", remarks=True)
    [note] = serial_remarks(big)
    work = int(note.split("about ")[1].split(" operations")[0].replace(",", ""))
    assert work > 0
    for min_work, parallel in ((work, True), (work + 1, False)):
        k = compiler.compile(_twice(4, 8), pipeline=f"loom-parallelize{{min-work={min_work} num-threads=2}}",
                             remarks=True)
        assert bool(parallel_remarks(k)) == parallel, k.remarks
        if not parallel:
            assert any(f"fewer than min-work={min_work:,}" in r for r in serial_remarks(k)), k.remarks
        _run_twice(k, 4, 8)


@pytest.mark.parametrize("rows, parallel", [(255, True), (256, False)])
def test_a_run_time_trip_count_is_parallel_inside_fewer_than_256_forks(rows, parallel):
    """With min-work, a loop whose trip count is known only at run time is run in parallel
    inside loops of at most 255 iterations (each one a fork and join), not 256. (A kernel
    takes no index argument: the pass alone.)"""
    module = parse_module(make_context(), _twice(rows, "n"), "forks.mlir")
    with collect() as found:
        LoomParallelizePass(depth=1, min_work=1).apply(make_context(), module)
    assert [r.message for r in found] == [
        "nest 'twice': loop %j run in parallel (a trip count known at run time, the runtime default number of threads)"
        if parallel else "loop %j at depth 1 is not parallel: its trip count is known only at run time, and the "
                         "loops around it would start and join the threads at least 256 times"]
    assert [r.missed for r in found] == [not parallel]


@pytest.mark.parametrize("options, message", [
    ("depth=-2", "option 'depth' must be -1 (the outermost parallel loop) or at least 0, got -2"),
    ("num-threads=-1", "option 'num-threads' must be at least 0, got -1"),
    ("min-work=-1", "option 'min-work' must be at least 0, got -1"),
    ("op=twice depth=2", "nest 'twice' has no loop at depth 2"),
])
def test_parallelize_options_refused(options, message):
    with pytest.raises(compiler.LoomError, match=re.escape(f"loom-parallelize: {message}")):
        compiler.compile(_twice(4, 8), pipeline=f"loom-parallelize{{{options}}}")


def test_the_last_accepted_options_run():
    """depth -1 and 1 (the innermost loop), num-threads and min-work 0; depth 2 without
    op= leaves the nest serial with a remark."""
    for options, parallel in (("depth=-1 num-threads=0 min-work=0", "%t"), ("depth=1", "%j"), ("depth=2", None)):
        k = compiler.compile(_twice(4, 8), pipeline=f"loom-parallelize{{{options}}}", remarks=True)
        assert [r.split("loop ")[1].split(" ")[0] for r in parallel_remarks(k)] == ([parallel] if parallel else [])
        if parallel is None:
            assert [r.split("] ", 1)[1] for r in k.remarks] == ["nest 'twice' has no loop at depth 2"]
        _run_twice(k, 4, 8)

"""The runtime: a Kernel call and its calling convention, where they can go wrong.

- A temporary that cannot be allocated is a MemoryError naming it, its type, size and
  location; the buffers held then are freed; a callee's failure reaches the caller. The
  huge cases run in a subprocess with an address-space limit (RLIMIT_AS), so that they
  fail the same way on a machine that overcommits memory.
- Memref arguments with a strided layout take arrays of exactly that layout (a view into
  a larger array); others are refused, naming the argument and both strides.
- Only the arguments a kernel writes must not overlap another; read-only ones may alias.
- Zero-size arrays, messages with locations, a short repr, loom-run's checks of memref
  functions and its rounds of timing.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import compiler
from passes.support.diagnostics import LoomError
from compiler.build import load_module, written_arguments
from compiler.jit.kernel import MAX_THREADS, array_data_offset
from compiler.measure.runner import array_with_layout, outside_view, run_and_check
from passes import pipelines
from passes.support.target import openmp_runtime

PIPELINES = ["naive", "default"]
BIN = Path(sys.executable).parent
ROOT = Path(__file__).parent.parent

# --------------------------------------------------------------------------------------
# 1. Allocation failure

#: small inputs and output, a 37.3 GiB temporary (100000 x 100000 f32)
HUGE = """\
func.func @f(%a: tensor<100000x1xf32>, %b: tensor<1x100000xf32>, %c: tensor<100000x1xf32>) -> tensor<100000x1xf32> {
  %t = loom.matmul %a, %b : (tensor<100000x1xf32>, tensor<1x100000xf32>) -> tensor<100000x100000xf32>
  %r = loom.matmul %t, %c : (tensor<100000x100000xf32>, tensor<100000x1xf32>) -> tensor<100000x1xf32>
  func.return %r : tensor<100000x1xf32>
}
"""
HUGE_MESSAGE = r"@f: cannot allocate the temporary %t \(memref<100000x100000xf32>, 37\.3 GiB\) at .*huge\.mlir:2:3"

#: what a subprocess may map: the interpreter, LLVM and numpy take about 0.3 GiB
ADDRESS_SPACE = 2 << 30


def limited(argv, tmp_path, limit=ADDRESS_SPACE):
    """Run `argv` with at most `limit` bytes of address space (so that a huge allocation
    fails whatever the machine's overcommit policy), one BLAS thread."""
    import resource

    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=tmp_path, env=env,
                          preexec_fn=limit_address_space, timeout=600)


def python_limited(code, tmp_path, limit=ADDRESS_SPACE):
    return limited([sys.executable, "-c", textwrap.dedent(code)], tmp_path, limit)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_huge_temporary_is_a_memory_error(pipeline, tmp_path):
    """The issue's case: a 37 GiB intermediate. The call raises MemoryError (no segfault,
    no half-written result), and the process goes on: the same kernel runs again (by the
    checked call: %b a view whose strides fit but are not the fast call's) and fails the
    same way, and another kernel runs."""
    (tmp_path / "huge.mlir").write_text(HUGE)
    p = python_limited(f"""
        import numpy as np, compiler
        k = compiler.compile(open("huge.mlir").read(), pipeline={pipeline!r}, filename="huge.mlir")
        a, b = np.ones((100000, 1), np.float32), np.ones((1, 100000), np.float32)
        for b in (b, np.ones((2, 100001), np.float32)[:1, :100000]):
            try:
                k(a, b, a)
                print("returned")
            except MemoryError as e:
                print("MemoryError:", e)
        small = compiler.compile(open("huge.mlir").read().replace("100000", "100"), pipeline={pipeline!r})
        x, y = np.ones((100, 1), np.float32), np.ones((1, 100), np.float32)
        print("small", small(x, y, x)[0, 0])
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and lines[2] == "small 100.0", p.stdout
    for line in lines[:2]:
        assert re.fullmatch("MemoryError: " + HUGE_MESSAGE, line), line


def test_loom_run_reports_a_failed_allocation(tmp_path):
    (tmp_path / "huge.mlir").write_text(HUGE)
    p = limited([BIN / "loom-run", "huge.mlir", "--pipeline", "default"], tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert re.fullmatch(r"huge\.mlir: error: " + HUGE_MESSAGE + "\n", p.stderr), p.stderr


def test_loom_bench_reports_a_failed_allocation(tmp_path):
    """loom-bench --compile checks the kernel it compiled: the 37 GiB temporary is the same
    one-line error as loom-run's (it was a traceback)."""
    (tmp_path / "huge.mlir").write_text(HUGE)
    p = limited([BIN / "loom-bench", "--compile", "--examples", "huge.mlir", "--chain", "1", "--matmul", "none",
                 "--pipeline", "naive", "--json"], tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert re.fullmatch(r"loom-bench: error: " + HUGE_MESSAGE + "\n", p.stderr), p.stderr


def test_allocation_sites_name_the_file_compiled():
    """The same text under another filename is another kernel: its MemoryError names its
    own file (the cache key left the filename out, so the second got the first's)."""
    first = compiler.compile(HUGE, filename="first.mlir")
    second = compiler.compile(HUGE, filename="second.mlir")
    assert second is not first and compiler.compile(HUGE, filename="first.mlir") is first
    assert first.allocation_sites[1].location == "first.mlir:2:3"
    assert second.allocation_sites[1].location == "second.mlir:2:3"
    assert first.allocation_sites[1].nbytes == 100000 * 100000 * 4  # the alloc_site's `bytes`


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_failed_allocation_frees_the_buffers_held(pipeline, tmp_path):
    """%t (64 MiB, written) is allocated when %u (37 GiB) fails: the failure path frees
    it. Were it leaked, 40 calls would leak 2.5 GiB, past the address-space limit, and
    the allocation of %t itself would fail and be named."""
    src = """\
func.func @g(%a: tensor<4096x1xf32>, %b: tensor<1x4096xf32>, %x: tensor<100000x1xf32>, %y: tensor<1x100000xf32>) -> (tensor<4096x4096xf32>, tensor<100000x1xf32>) {
  %t = loom.add %a, %b : (tensor<4096x1xf32>, tensor<1x4096xf32>) -> tensor<4096x4096xf32>
  %r = loom.relu %t : tensor<4096x4096xf32>
  %u = loom.matmul %x, %y : (tensor<100000x1xf32>, tensor<1x100000xf32>) -> tensor<100000x100000xf32>
  %v = loom.matmul %u, %x : (tensor<100000x100000xf32>, tensor<100000x1xf32>) -> tensor<100000x1xf32>
  func.return %r, %v : tensor<4096x4096xf32>, tensor<100000x1xf32>
}
"""
    (tmp_path / "g.mlir").write_text(src)
    p = python_limited(f"""
        import numpy as np, compiler
        k = compiler.compile(open("g.mlir").read(), pipeline={pipeline!r}, filename="g.mlir")
        a, b = np.ones((4096, 1), np.float32), np.ones((1, 4096), np.float32)
        x, y = np.ones((100000, 1), np.float32), np.ones((1, 100000), np.float32)
        for _ in range(40):
            try:
                k(a, b, x, y)
            except MemoryError as e:
                print(e)
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 40 and len(set(lines)) == 1, p.stdout
    assert lines[0].startswith("@g: cannot allocate the temporary %u (memref<100000x100000xf32>, 37.3 GiB) at g.mlir:4:3")


# 2^56 bytes: more than any x86-64 process can map, refused by malloc on any machine
IMPOSSIBLE = "memref<18014398509481984xf32>"


def test_failure_in_a_callee_reaches_the_caller():
    """@helper's buffer is used (at indices read from %a, so that LLVM cannot drop it), and
    cannot be had: @main frees %u, passes the status on, and the Kernel names %big."""
    src = f"""func.func private @helper(%a: memref<4xf32>) {{
  %big = memref.alloc() : {IMPOSSIBLE}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = memref.load %a[%c0] : memref<4xf32>
  %y = memref.load %a[%c1] : memref<4xf32>
  %xi = arith.fptoui %x : f32 to i64
  %yi = arith.fptoui %y : f32 to i64
  %i = arith.index_cast %xi : i64 to index
  %j = arith.index_cast %yi : i64 to index
  memref.store %x, %big[%i] : {IMPOSSIBLE}
  %v = memref.load %big[%j] : {IMPOSSIBLE}
  memref.store %v, %a[%c0] : memref<4xf32>
  memref.dealloc %big : {IMPOSSIBLE}
  func.return
}}
func.func @main(%a: memref<4xf32>, %out: memref<4xf32>) {{
  %u = memref.alloc() : memref<4xf32>
  loom.relu ins(%a : memref<4xf32>) outs(%u : memref<4xf32>)
  func.call @helper(%u) : (memref<4xf32>) -> ()
  loom.relu ins(%u : memref<4xf32>) outs(%out : memref<4xf32>)
  memref.dealloc %u : memref<4xf32>
  func.return
}}"""
    k = compiler.compile(src, entry="main", filename="callee.mlir")
    assert k.returns_status and [s.name for s in k.allocation_sites.values()] == ["%big", "%u"]
    a, out = np.ones(4, np.float32), np.full(4, 7.0, np.float32)
    with pytest.raises(MemoryError, match=re.escape(
            f"@main: cannot allocate the temporary %big of @helper (which @main calls) ({IMPOSSIBLE}, 64 PiB) "
            "at callee.mlir:2:3; the arrays it writes in place may hold partial results")):
        k(a, out)
    np.testing.assert_array_equal(out, 7.0)  # the failure came before the write


def test_temporary_beyond_64_bits_is_refused_at_compile_time():
    n = 2**32  # n x n f32 is 2^66 bytes: its size would wrap around in i64
    src = f"""func.func @f(%a: tensor<{n}x1xf32>, %b: tensor<1x{n}xf32>) -> tensor<1x1xf32> {{
  %t = loom.matmul %a, %b : (tensor<{n}x1xf32>, tensor<1x{n}xf32>) -> tensor<{n}x{n}xf32>
  %r = loom.matmul %b, %a : (tensor<1x{n}xf32>, tensor<{n}x1xf32>) -> tensor<1x1xf32>
  func.return %r : tensor<1x1xf32>
}}"""
    with pytest.raises(LoomError, match=rf"^<source>:2:3: error: loom-convert-to-llvm: memref<{n}x{n}xf32> spans "
                                        r"73786976294838206464 bytes, more than a 64-bit address or size can hold"):
        compiler.compile(src)


def test_allocation_checks_stay_out_of_the_loops():
    """The default pipeline's packing buffers are checked for null where they are
    allocated, before the loop nest: in the optimized code every null check precedes
    the first loop."""
    # rows and columns that every host's register tile divides (6x16, 14x32, 8x48): one
    # nest, nothing peeled, so A and B are packed once each
    m, n, kk = 168, 192, 256
    src = f"""func.func @mm(%a: tensor<{m}x{kk}xf32>, %b: tensor<{kk}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %c = loom.matmul %a, %b : (tensor<{m}x{kk}xf32>, tensor<{kk}x{n}xf32>) -> tensor<{m}x{n}xf32>
  func.return %c : tensor<{m}x{n}xf32>
}}"""
    k = compiler.compile(src, pipeline="default")
    # B packed, and A unless the panel order reads its rows in place (MEASURED_PANEL_TILES)
    sites = sorted(s.name for s in k.allocation_sites.values())
    assert k.returns_status and sites in (["%a_pack", "%b_pack"], ["%b_pack"]), sites
    body = re.split(r"define .*i32 @mm\(", k.optimized_ir, maxsplit=1)[1]
    checks = [m.start() for m in re.finditer(r"icmp eq ptr %\w+, null", body)]
    assert len(checks) == len(sites), body[:2000]
    # the first loop: in the function, or in the threads' function GOMP_parallel starts
    first_loop = min(i for i in (body.find("!llvm.loop"), body.find("@GOMP_parallel(")) if i >= 0)
    assert max(checks) < first_loop


# --------------------------------------------------------------------------------------
# 2. Strided memref arguments

STRIDED = """func.func @t(%a: memref<4x4xf32, strided<[8, 1]{offset}>>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {{
  loom.matmul ins(%a, %b : memref<4x4xf32, strided<[8, 1]{offset}>>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  func.return
}}"""


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("offset", [0, 3])
def test_strided_argument_takes_a_view(pipeline, offset):
    """The issue's case: %a read with row stride 8, passed as the view base[:, :4] (or, with
    an offset of 3 elements, base[:, 3:7]: the kernel gets the data pointer minus 3)."""
    k = compiler.compile(STRIDED.format(offset=f", offset: {offset}" if offset else ""), pipeline=pipeline)
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 8)).astype(np.float32)
    a = base[:, offset:offset + 4]
    b = rng.standard_normal((4, 4)).astype(np.float32)
    c = np.full((4, 4), np.nan, np.float32)
    before = base.copy()
    k(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(base, before)
    with pytest.raises(ValueError, match=re.escape(
            "@t argument #0 (%a) has strides (16, 4), expected (32, 4) (bytes): the kernel reads %a in place with "
            f"the layout of memref<4x4xf32, strided<[8, 1]{f', offset: {offset}' if offset else ''}>>")):
        k(np.ascontiguousarray(a), b, c)


def test_strided_output_is_written_through_its_view():
    src = """func.func @s(%a: memref<3x5xf64>, %c: memref<3x5xf64, strided<[1, 3]>>) {
  loom.relu ins(%a : memref<3x5xf64>) outs(%c : memref<3x5xf64, strided<[1, 3]>>)
  func.return
}"""
    k = compiler.compile(src)
    a = np.linspace(-1, 1, 15).reshape(3, 5)
    base = np.full((5, 3), 9.0)
    k(a, base.T)  # column-major: strides (8, 24), the layout [1, 3] in elements
    np.testing.assert_array_equal(base.T, np.maximum(a, 0))
    assert "(strided, written)" in repr(k)


def test_dynamic_layout_is_refused_at_compile_time():
    src = """func.func @d(%a: memref<4x4xf32, strided<[?, 1]>>, %c: memref<4x4xf32>) {
  loom.relu ins(%a : memref<4x4xf32, strided<[?, 1]>>) outs(%c : memref<4x4xf32>)
  func.return
}"""
    with pytest.raises(LoomError, match=re.escape("<source>:1:1: error: argument %a: memref<4x4xf32, strided<[?, 1]>> "
                                                  "has a dynamic layout")):
        compiler.compile(src)


def test_loom_run_makes_strided_inputs_and_checks_outputs(tmp_path):
    """loom-run builds each strided argument as a view into a buffer of NaNs: the check
    then covers %c, the argument written, through its strided view."""
    src = STRIDED.format(offset=", offset: 2").replace("outs(%c : memref<4x4xf32>)",
                                                       "outs(%c : memref<4x4xf32, strided<[5, 1]>>)")
    src = src.replace("%c: memref<4x4xf32>)", "%c: memref<4x4xf32, strided<[5, 1]>>)")
    for pipeline in PIPELINES:
        report = run_and_check(src, pipeline=pipeline, budget=0.01, rounds=1)
        assert report.ok and report.checked == "argument %c", report.format()


def test_array_with_layout_pads_with_nan():
    from compiler.jit.kernel import ArgSpec

    spec = ArgSpec("%a", (2, 3), np.dtype(np.float32), False, strides=(20, 4), offset=2)
    values = np.arange(6.0).reshape(2, 3)
    a = array_with_layout(spec, values)
    assert a.strides == (20, 4)
    np.testing.assert_array_equal(a, values)
    base = a.base  # the buffer, from the pointer the kernel gets: offset 2, rows of 5
    assert base.size == 2 + 5 + 3 and np.isnan(base[:2]).all() and np.isnan(base[5:7]).all()
    assert outside_view(a).size == 4 and np.isnan(outside_view(a)).all()  # the offset and the row gap
    base[0] = 1.0  # where a base pointer one element short would write
    assert not np.isnan(outside_view(a)).all()


def test_loom_run_sees_a_write_before_the_view(monkeypatch):
    """%c's rows are contiguous, 2 elements after the pointer: a kernel given a pointer one
    element short writes into that offset, before the view. The check looked only from
    the view's first element on (and not at all at a view with contiguous rows)."""
    from compiler.jit.kernel import Kernel

    src = READ_TWICE.replace("%c: memref<4x4xf32>", "%c: memref<4x4xf32, strided<[4, 1], offset: 2>>")
    src = src.replace("outs(%c : memref<4x4xf32>)", "outs(%c : memref<4x4xf32, strided<[4, 1], offset: 2>>)")
    report = run_and_check(src, budget=0.01, rounds=1)
    assert report.ok and not report.notes, report.format()
    real = Kernel._pointers

    def one_short(self, arrays):
        pointers = real(self, arrays)
        return [p - 4 if s.in_place else p for p, s in zip(pointers, self.inputs)]

    monkeypatch.setattr(Kernel, "_pointers", one_short)
    report = run_and_check(src, budget=0.01, rounds=1)
    assert "the kernel wrote outside the view of argument %c" in report.notes, report.format()


# --------------------------------------------------------------------------------------
# 3. Which arguments are written

READ_TWICE = """func.func @m(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  loom.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  func.return
}"""


def test_read_only_arguments_may_alias_and_be_read_only():
    k = compiler.compile(READ_TWICE)
    assert [s.in_place for s in k.inputs] == [False, False, True]
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    a.flags.writeable = False
    c = np.empty((4, 4), np.float32)
    k(a, a, c)
    np.testing.assert_array_equal(c, a @ a)
    with pytest.raises(ValueError, match=r"argument #2 \(%c\) is written by the kernel and overlaps argument #0 \(%a\)"):
        k(c, a, c)
    with pytest.raises(ValueError, match=r"argument #2 \(%c\) is written by the kernel but is read-only"):
        k(c.copy(), c.copy(), a)
    # the checked call (a kernel that writes an argument): an array of another shape with the
    # same strides is refused, never read or written past its end
    bad = np.ones((3, 4), np.float32)
    for args in ((bad, a, c), (a, a, bad)):
        with pytest.raises(ValueError, match=r"has shape \(3, 4\), expected \(4, 4\)"):
            k(*args)


def test_interleaved_views_do_not_overlap():
    """Even and odd columns of one array share no element: one may be written while the
    other is read."""
    src = """func.func @e(%a: memref<4x4xf32, strided<[8, 2]>>, %c: memref<4x4xf32, strided<[8, 2], offset: 1>>) {
  loom.relu ins(%a : memref<4x4xf32, strided<[8, 2]>>) outs(%c : memref<4x4xf32, strided<[8, 2], offset: 1>>)
  func.return
}"""
    k = compiler.compile(src)
    base = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    even = base[:, 0::2].copy()
    k(base[:, 0::2], base[:, 1::2])
    np.testing.assert_array_equal(base[:, 1::2], np.maximum(even, 0))
    np.testing.assert_array_equal(base[:, 0::2], even)


def test_written_arguments_from_the_ir():
    """Written: a loom op's outs, a store (through a view too), a copy's target, anything
    passed to a call. Read only: loads (memref, affine, vector, through a view), a copy's
    source, a loom op's ins, dim."""
    src = """func.func private @ext(memref<4xf32>)
func.func @w(%outs: memref<4xf32>, %ins: memref<4xf32>, %stored: memref<4xf32>, %viewed: memref<8xf32>,
             %copied_to: memref<4xf32>, %copied_from: memref<4xf32>, %called: memref<4xf32>,
             %loaded: memref<4xf32>, %astored: memref<4xf32>, %vstored: memref<8xf32>, %aloaded: memref<4xf32>,
             %vloaded: memref<8xf32>, %view_loaded: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %x = memref.load %loaded[%c0] : memref<4xf32>
  %n = memref.dim %loaded, %c0 : memref<4xf32>
  %y = affine.load %aloaded[0] : memref<4xf32>
  %z = vector.load %vloaded[%c0] : memref<8xf32>, vector<4xf32>
  %r = memref.subview %view_loaded[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  %u = memref.load %r[%c0] : memref<4xf32, strided<[1], offset: 2>>
  loom.relu ins(%ins : memref<4xf32>) outs(%outs : memref<4xf32>)
  memref.store %x, %stored[%c0] : memref<4xf32>
  %v = memref.subview %viewed[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  memref.store %x, %v[%c0] : memref<4xf32, strided<[1], offset: 2>>
  "memref.copy"(%copied_from, %copied_to) : (memref<4xf32>, memref<4xf32>) -> ()
  func.call @ext(%called) : (memref<4xf32>) -> ()
  affine.store %x, %astored[0] : memref<4xf32>
  %vec = vector.broadcast %x : f32 to vector<4xf32>
  vector.store %vec, %vstored[%c0] : memref<8xf32>, vector<4xf32>
  func.return
}"""
    module = load_module(src)
    fn = list(module.ops)[1]
    names = [a.name_hint for a in fn.body.block.args]
    assert sorted(names[i] for i in written_arguments(fn)) == sorted(
        ["outs", "stored", "viewed", "copied_to", "called", "astored", "vstored"])


def test_a_written_argument_overlapping_a_later_one_is_refused():
    """The overlap check looks at every other argument, those after the written one too."""
    k = compiler.compile("""func.func @w(%c: memref<4x4xf32>, %a: memref<4x4xf32>) {
  loom.relu ins(%a : memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  func.return
}""")
    c = np.arange(-8, 8, dtype=np.float32).reshape(4, 4)
    with pytest.raises(ValueError, match=r"#0 \(%c\) is written by the kernel and overlaps argument #1 \(%a\)"):
        k(c, c)
    np.testing.assert_array_equal(c, np.arange(-8, 8).reshape(4, 4))  # refused before anything ran


# --------------------------------------------------------------------------------------
# 4. Messages, 5. repr

MM = """func.func @mm(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}"""


def test_layout_error_names_the_argument():
    k = compiler.compile(MM)
    x = np.ones((4, 3), np.float32)
    w = np.ones((5, 3), np.float32).T
    with pytest.raises(ValueError, match=re.escape(
            "@mm argument #1 (%w) is not C-contiguous (strides (4, 12), expected (20, 4)): the kernel reads %w in "
            "place with row-major strides; pass np.ascontiguousarray(w)")):
        k(x, w)


def test_layout_error_of_a_written_argument_says_to_copy_back():
    """A copy of an argument the kernel writes would get the results: the message says so
    (it suggested np.ascontiguousarray, whose copy then silently took the results)."""
    k = compiler.compile(READ_TWICE)
    a = np.ones((4, 4), np.float32)
    c = np.zeros((4, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=re.escape(
            "@m argument #2 (%c) is not C-contiguous (strides (32, 8), expected (16, 4)): the kernel writes %c in "
            "place with row-major strides, so a copy would get its results: pass a C-contiguous array "
            "(buf = np.ascontiguousarray(c)) and copy them back (c[...] = buf)")):
        k(a, a, c)
    strided = compiler.compile("""func.func @s(%a: memref<3x5xf64>, %c: memref<3x5xf64, strided<[1, 3]>>) {
  loom.relu ins(%a : memref<3x5xf64>) outs(%c : memref<3x5xf64, strided<[1, 3]>>)
  func.return
}""")
    with pytest.raises(ValueError, match=re.escape(
            "the kernel writes %c in place with the layout of memref<3x5xf64, strided<[1, 3]>>, so a copy would get "
            "its results: pass a view with exactly those strides into a larger array, and copy the results from it")):
        strided(np.ones((3, 5)), np.zeros((3, 5)))


def test_signature_errors_are_located():
    with pytest.raises(LoomError, match=re.escape("<source>:1:1: error: unsupported element type f16 for %a")):
        compiler.compile("func.func @h(%a: memref<4xf16>) {\n  func.return\n}")
    with pytest.raises(LoomError, match=re.escape(
            "<source>:1:1: error: result #0 is memref<4xf32>: a kernel's results must be tensors")):
        compiler.compile("func.func @r(%a: memref<4xf32>) -> memref<4xf32> {\n  func.return %a : memref<4xf32>\n}")


TWO = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = loom.relu %a : tensor<2xf32>
  func.return %r : tensor<2xf32>
}
func.func @g(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = loom.relu %a : tensor<2xf32>
  func.return %r : tensor<2xf32>
}
"""


def test_entry_error_says_how_to_choose(tmp_path):
    """The API says entry=, loom-run says --entry; both point at the module's first
    function."""
    with pytest.raises(LoomError, match=re.escape(
            "<source>:1:1: error: the module has 2 functions (@f, @g): name one with entry=")):
        compiler.compile(TWO)
    (tmp_path / "two.mlir").write_text(TWO)
    p = subprocess.run([str(BIN / "loom-run"), "two.mlir"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 1
    assert p.stderr == "two.mlir:1:1: error: the module has 2 functions (@f, @g): name one with --entry\n"


def test_repr_is_short():
    k = compiler.compile(MM, pipeline="default")
    text = repr(k)
    assert text == (f"<Kernel @mm(%x: float32[4, 3], %w: float32[3, 5]) -> float32[4, 5], pipeline='default', "
                    f"target={k.target!r}>")
    assert k.target and len(k.llvm_ir) > len(text) and len(k.asm()) > len(text)  # kept in the attributes
    from passes.support.target import machine

    assert k.target == k._module.cpu == machine().cpu  # what the code was generated for


# --------------------------------------------------------------------------------------
# 6. loom-run checks memref functions


def test_run_and_check_compares_written_arguments(monkeypatch):
    report = run_and_check(READ_TWICE, budget=0.01, rounds=2)
    assert report.ok and report.checked == "argument %c" and report.bound > 0, report.format()
    assert "check    OK: argument %c: max |loom - numpy(f64)|" in report.format()

    from compiler import numpy_reference as ref

    real = ref.evaluate

    def wrong(fn, arrays, dtype=np.float64):
        results = real(fn, arrays, dtype)
        arrays[2][0, 0] += 1.0  # the reference's %c, written in place
        return results

    monkeypatch.setattr(ref, "evaluate", wrong)
    report = run_and_check(READ_TWICE, budget=0.01, rounds=1)
    assert not report.ok and "MISMATCH" in report.format()


def test_run_and_check_function_returning_an_argument():
    src = """func.func @id(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %s = loom.add %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %a, %s : tensor<3x4xf32>, tensor<3x4xf32>
}"""
    report = run_and_check(src, budget=0.01, rounds=1)
    assert report.ok and report.checked == "result #0, result #1", report.format()


def test_timed_rounds_sizes_its_rounds_from_a_warm_call():
    """One timing scheme for loom-run and loom-bench: a warm run of the kernel (the caller
    has run it once) sizes the rounds to the budget, then the functions run interleaved,
    round after round."""
    import time

    from compiler.measure.runner import timed_rounds

    calls = []

    def kernel():
        calls.append("k")
        time.sleep(0.002)

    timing = timed_rounds([kernel, lambda: calls.append("n")], budget=0.02, at_most=100, rounds=3)
    assert 3 <= timing.runs <= 10 and calls == ["k"] + ["k", "n"] * (3 * timing.runs)
    assert len(timing.per_round) == 3 and timing.median(0) >= 0.002 > timing.median(1)
    assert timing.round_medians() == tuple(t[0] for t in timing.per_round)
    assert timing.ratios() == tuple(t[1] / t[0] for t in timing.per_round)
    assert timed_rounds([kernel], budget=1.0, at_most=4).runs == 4


def test_loom_run_times_in_rounds(tmp_path):
    p = subprocess.run([str(BIN / "loom-run"), ROOT / "examples" / "matmul.mlir", "--budget", "0.05", "--rounds", "3",
                        "--numpy"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert re.search(r"time +[\d.]+ ms median .*\(3 rounds of \d+ runs, round medians [\d.]+-[\d.]+ ms", p.stdout)
    assert re.search(r"loom/numpy speed [\d.]+x median, rounds [\d.]+-[\d.]+x\)", p.stdout), p.stdout
    p = subprocess.run([str(BIN / "loom-run"), ROOT / "examples" / "matmul.mlir", "--rounds", "0"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--repeat, --rounds, --budget and --threads must be positive" in p.stderr


# --------------------------------------------------------------------------------------
# 7. Zero-size arrays


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_zero_size_arrays(pipeline):
    """K = 0: the product is all zeros; a zero extent elsewhere: empty results."""
    k0 = compiler.compile("""func.func @k0(%a: tensor<4x0xf32>, %b: tensor<0x5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %a, %b : (tensor<4x0xf32>, tensor<0x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}""", pipeline=pipeline)
    np.testing.assert_array_equal(k0(np.empty((4, 0), np.float32), np.empty((0, 5), np.float32)), np.zeros((4, 5)))
    m0 = compiler.compile("""func.func @m0(%a: tensor<0x3xf32>, %b: tensor<3x5xf32>, %bias: tensor<5xf32>) -> tensor<0x5xf32> {
  %c = loom.matmul %a, %b : (tensor<0x3xf32>, tensor<3x5xf32>) -> tensor<0x5xf32>
  %s = loom.add %c, %bias : (tensor<0x5xf32>, tensor<5xf32>) -> tensor<0x5xf32>
  %r = loom.relu %s : tensor<0x5xf32>
  func.return %r : tensor<0x5xf32>
}""", pipeline=pipeline)
    out = m0(np.empty((0, 3), np.float32), np.ones((3, 5), np.float32), np.ones(5, np.float32))
    assert out.shape == (0, 5) and out.dtype == np.float32
    e = compiler.compile("""func.func @e(%a: memref<4x0xf64>, %c: memref<4x0xf64>) {
  loom.relu ins(%a : memref<4x0xf64>) outs(%c : memref<4x0xf64>)
  func.return
}""", pipeline=pipeline)
    base = np.empty((4, 0))
    assert e(base, np.empty((4, 0))) is None


def test_strides_that_address_nothing_may_be_anything():
    """Only the strides of dimensions longer than 1 address an element, and none of an
    empty array's: a row taken with a step, or an empty view, is taken as it is."""
    k = compiler.compile("""func.func @k(%a: tensor<1x4xf32>, %e: tensor<0x4xf32>) -> tensor<1x4xf32> {
  %r = loom.relu %a : tensor<1x4xf32>
  func.return %r : tensor<1x4xf32>
}""")
    base = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    empty = np.empty((0, 8), np.float32)[:, ::2]
    assert base[::2].strides != k.inputs[0].strides and empty.strides != k.inputs[1].strides
    np.testing.assert_array_equal(k(base[::2], empty), base[:1])


def test_contiguous_arrays_go_by_their_addresses():
    """On CPython each kernel exports beside its entry a function that takes the arrays
    as their objects' addresses (id) and loads each data pointer itself, at the offset
    `array_data_offset` found by looking; the fast call passes those (28 ns an array, not
    cffi's from_buffer), with two results too, and computes what the general path does."""
    assert array_data_offset() is not None
    src = """
    func.func @f(%a: tensor<5x7xf32>, %b: tensor<7x3xf32>) -> (tensor<5x3xf32>, tensor<5x7xf32>) {
      %c = loom.matmul %a, %b : (tensor<5x7xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
      %r = loom.relu %a : tensor<5x7xf32>
      func.return %c, %r : tensor<5x3xf32>, tensor<5x7xf32>
    }
    """
    k = compiler.compile(src, pipeline="default", cache=False)
    assert k.objects_address and k._fast is not None
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    fast, general = k(a, b), k._call((a, b))
    for got, want, ref in zip(fast, general, compiler.reference(src, a, b)):
        np.testing.assert_array_equal(got, want)
        assert np.abs(got - ref).max() <= 4 * 7 * np.finfo(np.float32).eps * np.abs(ref).max()
    ints = (np.arange(35, dtype=np.float32).reshape(5, 7) % 5 - 2, np.arange(21, dtype=np.float32).reshape(7, 3) % 3)
    np.testing.assert_array_equal(k(*ints)[0], ints[0] @ ints[1])


# --------------------------------------------------------------------------------------
# Threads: no more than libgomp can start

#: a matmul whose loops loom-parallelize runs on threads
SMALL_MM = """\
func.func @mm(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = loom.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}
"""


def test_remarks_only_when_asked():
    quiet = compiler.compile(SMALL_MM, pipeline="default", cache=False)
    told = compiler.compile(SMALL_MM, pipeline="default", remarks=True, cache=False)
    assert quiet.remarks == [] and quiet.remark_records == () and told.remarks and told.remark_records


def test_num_threads_beyond_what_libgomp_starts_is_refused():
    for n in (MAX_THREADS + 1, 100_000):
        with pytest.raises(ValueError, match=f"num_threads must be a positive integer of at most {MAX_THREADS}.*"
                                             f"got {n}$"):
            compiler.compile(SMALL_MM, num_threads=n)


#: under OMP_NUM_THREADS=100000 (libgomp's default too), each way of asking for a thread
#: count beyond the cap: refused, or run and checked (JSON: name -> message or rightness)
_THREAD_COUNTS = """
import json, sys
import numpy as np
import compiler
from compiler.jit.kernel import MAX_THREADS

source = sys.argv[1]
a = (np.arange(64 * 64) % 7 - 3).astype(np.float32).reshape(64, 64)
out = {}
for name, pipeline in [("OMP_NUM_THREADS", "default"), ("num-threads", "loom-parallelize{num-threads=100000}"),
                       ("libgomp's default", "loom-parallelize"),
                       ("the cap", f"loom-parallelize{{num-threads={MAX_THREADS}}}")]:
    try:
        kernel = compiler.compile(source, pipeline=pipeline, remarks=True, filename="mm.mlir")
        out[name] = {"right": bool((kernel(a, a) == a @ a).all()),
                     "threads": [r for r in kernel.remarks if "run in parallel" in r]}
    except compiler.LoomError as e:
        out[name] = {"error": str(e)}
print(json.dumps(out))
"""


@pytest.mark.skipif(openmp_runtime() is None, reason="libgomp is not installed")
def test_thread_counts_libgomp_cannot_start_are_refused_never_a_crash(tmp_path):
    """100,000 threads overflowed libgomp's team start (a record per thread on the calling
    thread's stack: SIGSEGV); whichever way the count is set, the compile refuses it at
    the loop, and the cap itself runs (4,096 threads, here on 2 cores)."""
    p = subprocess.run([sys.executable, "-c", _THREAD_COUNTS, SMALL_MM], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "100000"}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    for name, what in [("OMP_NUM_THREADS", "100000 threads"), ("num-threads", "100000 threads"),
                       ("libgomp's default", "libgomp's default of 100000 threads")]:
        assert re.fullmatch(rf"mm\.mlir:2:3: error: a parallel loop would run on {what}, more than the {MAX_THREADS} "
                            r"Loom runs a loop on \(.*\): ask for fewer \(.*OMP_NUM_THREADS.*\)", out[name].get("error", ""),
                            re.S), (name, out[name])
    assert out["the cap"]["right"] and f"{MAX_THREADS} threads)" in out["the cap"]["threads"][0], out["the cap"]


def test_loom_run_refuses_too_many_threads(tmp_path):
    (tmp_path / "mm.mlir").write_text(SMALL_MM)
    p = subprocess.run([BIN / "loom-run", "mm.mlir", "--threads", "100000"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert p.stderr == (f"mm.mlir: error: num_threads must be a positive integer of at most {MAX_THREADS} (the most "
                        "threads Loom runs a loop on: compiler/jit/kernel.py), got 100000\n"), p.stderr


# --------------------------------------------------------------------------------------
# 6. What a call refuses, and why


def test_each_bad_argument_is_named_with_what_is_wrong():
    """A Kernel call checks every argument in turn; the error names the first bad one
    and says what it is and what the kernel takes."""
    k = compiler.compile(MM)
    x, w = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    signature = "(%x: float32 array of shape (4, 3), %w: float32 array of shape (3, 5))"
    with pytest.raises(TypeError, match=re.escape(f"@mm takes 2 arrays {signature}, got 1")):
        k(x)
    with pytest.raises(TypeError, match=re.escape(f"@mm takes 2 arrays {signature}, got 3")):
        k(x, w, w)
    with pytest.raises(TypeError, match=re.escape(
            "@mm argument #1 (%w) must be a numpy array (float32 array of shape (3, 5)), got list")):
        k(x, w.tolist())
    with pytest.raises(TypeError, match=re.escape(
            "@mm argument #0 (%x) has dtype int32, expected float32 (convert with .astype(np.float32))")):
        k(x.astype(np.int32), w)
    misaligned = np.frombuffer(bytearray(4 * 12 + 1), np.float32, 12, offset=1).reshape(4, 3)
    assert not misaligned.flags.aligned
    with pytest.raises(ValueError, match=re.escape("@mm argument #0 (%x) is not aligned to its element size")):
        k(misaligned, w)

    class Sub(np.ndarray):
        pass

    with pytest.raises(TypeError, match=re.escape("@mm: arrays must be numpy.ndarray instances (not subclasses)")):
        k(x, w.view(Sub))
    np.testing.assert_array_equal(k(x, w), np.full((4, 5), 3, np.float32))  # the same arrays, right


BROADCAST_OUT = """func.func @b(%a: memref<4x4xf32>, %c: memref<4x4xf32, strided<[0, 1]>>) {
  loom.relu ins(%a : memref<4x4xf32>) outs(%c : memref<4x4xf32, strided<[0, 1]>>)
  func.return
}"""


def test_a_written_argument_that_reaches_an_element_twice_is_refused():
    """A layout whose rows all lie on one row fits the kernel's type, but an argument it
    writes must be one element per index: the call refuses it, naming its strides, and
    the signature says so of its layout."""
    k = compiler.compile(BROADCAST_OUT, pipeline="naive")
    assert k.inputs[1].describe() == ("float32 array of shape (4, 4) with strides (0, 4) (bytes, "
                                      "memref<4x4xf32, strided<[0, 1]>>)")
    row = np.zeros(4, np.float32)
    c = np.lib.stride_tricks.as_strided(row, (4, 4), (0, 4))
    assert c.flags.writeable
    with pytest.raises(ValueError, match=re.escape(
            "@b argument #1 (%c) is written by the kernel but its strides (0, 4) reach some elements from several "
            "indices (a broadcast or as_strided view): an argument the kernel writes must not overlap itself")):
        k(np.ones((4, 4), np.float32), c)
    assert not row.any()  # refused before anything ran


def test_a_status_without_its_site_is_still_a_memory_error():
    k = compiler.compile(HUGE, pipeline="naive")
    assert k.returns_status and 99 not in k.allocation_sites
    error = k._allocation_error(99)
    assert isinstance(error, MemoryError)
    assert str(error) == "@f: a temporary could not be allocated (status 99)"


def test_the_call_without_the_objects_wrapper_passes_buffers():
    """Where the arrays' data pointer cannot be found in the array object (objects_address
    0), the generated call passes each array through cffi: the same results."""
    import dataclasses

    k = compiler.compile(MM)
    assert k.objects_address
    plain = dataclasses.replace(k, objects_address=0)
    rng = np.random.default_rng(3)
    x, w = rng.integers(-4, 5, (4, 3)).astype(np.float32), rng.integers(-4, 5, (3, 5)).astype(np.float32)
    np.testing.assert_array_equal(plain(x, w), x @ w)
    with pytest.raises(TypeError, match=r"@mm takes 2 arrays .* got 1"):
        plain(x)


@pytest.mark.parametrize(("source", "message"), [
    ("func.func @s(%a: tensor<4xf32>, %n: i32) -> tensor<4xf32> {\n  func.return %a : tensor<4xf32>\n}",
     "kernel arguments must be tensors or memrefs, got i32 for %n"),
    ("func.func @d(%a: tensor<?xf32>) -> tensor<?xf32> {\n  func.return %a : tensor<?xf32>\n}",
     "%a has a dynamic shape (tensor<?xf32>): kernels take static shapes only"),
    ("func.func @m(%a: memref<?xf32>) {\n  func.return\n}",
     "argument %a has a dynamic shape (memref<?xf32>): kernels take static shapes only"),
])
def test_a_signature_a_kernel_cannot_take_is_refused_at_its_function(source, message):
    with pytest.raises(LoomError, match=re.escape(f"<source>:1:1: error: {message}")):
        compiler.compile(source)


def test_the_entry_named_must_exist_and_the_source_be_text_or_a_module():
    with pytest.raises(LoomError, match=re.escape("no function @h in the module (functions: @f, @g)")):
        compiler.compile(TWO, entry="h")
    with pytest.raises(TypeError, match="source must be MLIR text or a ModuleOp, got int"):
        load_module(42)
    module = load_module(MM)
    text = str(module)
    kernel = compiler.compile(module)
    assert str(module) == text  # compiled from a copy: the caller's module is left as it was
    x, w = np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((3, 5), np.float32)
    np.testing.assert_array_equal(kernel(x, w), x @ w)


def test_a_declared_function_is_not_an_entry():
    """The entry is the only function with a body: a declaration beside it is not one."""
    k = compiler.compile("func.func private @ext(memref<4xf32>)\n" + MM)
    x, w = np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((3, 5), np.float32)
    np.testing.assert_array_equal(k(x, w), x @ w)


def test_a_pass_that_runs_several_times_keeps_each_stage_and_timing():
    """stages=True keeps the output of each run of a pass, and timings gets each run's
    seconds (`cse`, `cse#2`, `cse#3`), none written over another's."""
    timings = {}
    k = compiler.compile(MM, pipeline="cse,cse,cse", stages=True, cache=False)
    compiler.compile(MM, pipeline="cse,cse,cse", timings=timings)
    assert len(k.stages) == 1 + len(pipelines.completed("cse,cse,cse"))
    assert sum(name.split("#")[0] == "cse" for name in k.stages) == 3
    assert {"cse", "cse#2", "cse#3"} <= set(timings) and "cse#4" not in timings

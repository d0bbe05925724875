"""The Python API: compile(), Kernel calls, reference(), and their errors; what `import
compiler` loads."""

import json
import subprocess
import sys

import numpy as np
import pytest

import compiler
from compiler.jit.kernel import MAX_THREADS
from kernels import matmul
from targets import TARGETS, planning_for

MM = matmul((4, 3), (3, 5), (4, 5), np.float32)

TWO_RESULTS = """
func.func @two(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %bias: tensor<5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %s = loom.add %c, %bias : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %r = loom.relu %s : tensor<4x5xf32>
  func.return %c, %r : tensor<4x5xf32>, tensor<4x5xf32>
}
func.func @other(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = loom.relu %a : tensor<2xf32>
  func.return %r : tensor<2xf32>
}
"""


@pytest.fixture(scope="module")
def mm():
    return compiler.compile(MM)


def args(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)


def test_call_returns_result(mm):
    a, b = args()
    np.testing.assert_allclose(mm(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_several_results_and_entry():
    k = compiler.compile(TWO_RESULTS, entry="two")
    rng = np.random.default_rng(3)
    a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3, 5), (5,)])
    c, r = k(a, b, bias)
    rc, rr = compiler.reference(TWO_RESULTS, a, b, bias, entry="two")
    np.testing.assert_allclose(c, rc, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r, rr, rtol=1e-5, atol=1e-5)


def test_entry_required_when_ambiguous():
    with pytest.raises(ValueError, match=r"2 functions \(@two, @other\): name one with entry="):
        compiler.compile(TWO_RESULTS)
    with pytest.raises(ValueError, match=r"no function @nope in the module \(functions: @two, @other\)"):
        compiler.compile(TWO_RESULTS, entry="nope")


def test_wrong_count(mm):
    a, _ = args()
    with pytest.raises(TypeError, match=r"@mm takes 2 arrays .* got 1"):
        mm(a)


def test_wrong_dtype(mm):
    a, b = args()
    with pytest.raises(TypeError, match=r"argument #1 \(%b\) has dtype float64, expected float32"):
        mm(a, b.astype(np.float64))


def test_wrong_shape(mm):
    a, b = args()
    with pytest.raises(ValueError, match=r"argument #0 \(%a\) has shape \(3, 4\), expected \(4, 3\)"):
        mm(a.T.copy(), b)


def test_not_an_array(mm):
    _, b = args()
    with pytest.raises(TypeError, match=r"argument #0 \(%a\) must be a numpy array"):
        mm([[1.0] * 3] * 4, b)


def test_non_contiguous_refused(mm):
    _, b = args()
    a = np.zeros((3, 4), np.float32).T  # right shape, column-major view
    with pytest.raises(ValueError, match="not C-contiguous"):
        mm(a, b)


def test_inputs_untouched_and_outputs_fresh(mm):
    a, b = args()
    a0, b0 = a.copy(), b.copy()
    c1, c2 = mm(a, b), mm(a, b)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    assert c1 is not c2 and not np.shares_memory(c1, c2)


def test_fast_call_path_and_its_fallback(mm, monkeypatch):
    """The generated call takes exact arrays without `Kernel._call`; an array that fits
    otherwise (a size-1 dimension with another stride) goes there and gets the same
    answer; a bad one (a big-endian dtype) gets `_call`'s error."""
    a, b = args()
    want = mm(a, b)
    calls = []
    real = type(mm)._call
    monkeypatch.setattr(type(mm), "_call", lambda self, arrays: calls.append(1) or real(self, arrays))
    k = mm
    np.testing.assert_array_equal(k(a, b), want)
    assert not calls
    big_endian = a.astype(a.dtype.newbyteorder(">"))
    with pytest.raises(TypeError, match="has dtype >f4, expected float32"):
        k(big_endian, b)
    assert calls
    calls.clear()
    row = np.lib.stride_tricks.as_strided(a, shape=(1, 3), strides=(999 * 4, 4))  # its row stride addresses nothing
    one_row = compiler.compile(matmul((1, 3), (3, 5), (1, 5), np.float32))
    np.testing.assert_array_equal(one_row(row, b), one_row(a[:1].copy(), b))
    assert calls


def test_memref_kernel_writes_in_place_zero_copy():
    src = """func.func @f(%a: memref<8xf32>, %out: memref<8xf32>) {
      loom.relu ins(%a : memref<8xf32>) outs(%out : memref<8xf32>)
      func.return
    }"""
    k = compiler.compile(src)
    a = np.linspace(-1, 1, 8).astype(np.float32)
    out = np.full(8, 7.0, np.float32)
    assert k(a, out) is None
    np.testing.assert_array_equal(out, np.maximum(a, 0))  # the caller's buffer, written by pointer
    with pytest.raises(ValueError, match=r"argument #1 \(%out\) is written by the kernel and overlaps argument #0"):
        k(a, a)


def test_inspectable_stages(mm):
    assert mm.stages == {}  # kept on request only
    mm = compiler.compile(MM, stages=True)
    assert list(mm.stages)[:3] == ["input", "loom-bufferize", "convert-loom-to-affine"]
    assert "affine.for" in mm.stages["convert-loom-to-affine"]
    assert "llvm.func @mm" in mm.stages["loom-convert-to-llvm"]
    assert "define void @mm(ptr noalias" in mm.llvm_ir
    assert "@mm" in mm.optimized_ir
    assert mm.flops == 2 * 4 * 3 * 5


def test_pipeline_as_pass_list_and_cache():
    spec = "loom-bufferize,convert-loom-to-affine,loom-lower-affine,convert-scf-to-cf,loom-convert-to-llvm"
    k = compiler.compile(MM, pipeline=spec)
    a, b = args(1)
    np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert compiler.compile(MM, pipeline=spec) is k


def test_bad_source_and_options():
    with pytest.raises(ValueError, match=r"<source>:1:\d+: error: "):
        compiler.compile("func.func @f( {")
    with pytest.raises(ValueError, match=r"invalid pass pipeline 'no-such-pass'"):
        compiler.compile(MM, pipeline="no-such-pass")
    with pytest.raises(ValueError, match="num_threads must be a positive integer"):
        compiler.compile(MM, num_threads=0)
    assert compiler.compile(MM, num_threads=1).num_threads == 1  # the bounds themselves are taken
    assert compiler.compile(MM, num_threads=MAX_THREADS).num_threads == MAX_THREADS
    with pytest.raises(ValueError, match=f"num_threads must be a positive integer of at most {MAX_THREADS}"):
        compiler.compile(MM, num_threads=MAX_THREADS + 1)
    with pytest.raises(TypeError, match="source must be MLIR text or a ModuleOp"):
        compiler.compile(42)
    with pytest.raises(TypeError, match="pipeline must be a string, got int"):
        compiler.compile(MM, pipeline=42)


def test_each_option_is_part_of_the_cache_key():
    """A compile that asks for another pipeline, thread count or remarks gets its own kernel,
    never the one cached without them."""
    plain = compiler.compile(MM, pipeline="loom-default")
    with_remarks = compiler.compile(MM, pipeline="loom-default", remarks=True)
    assert plain.remarks == [] and any("[loom-default]" in r for r in with_remarks.remarks)
    assert with_remarks is not plain and compiler.compile(MM, pipeline="loom-default", remarks=True) is with_remarks
    assert compiler.compile(MM, pipeline="naive") is not plain
    assert compiler.compile(MM, pipeline="loom-default", num_threads=1) is not plain


def test_options_of_the_wrong_type_are_refused():
    """A number of threads that is not an int (2.0 compares like 2, True like 1) and a
    `cache` that is not a bool (1 is truthy) are refused, not taken."""
    for threads in (2.0, True):
        with pytest.raises(ValueError, match=rf"num_threads must be a positive integer .* got {threads}$"):
            compiler.compile(MM, num_threads=threads)
    with pytest.raises(TypeError, match="cache must be True or False, got 1$"):
        compiler.compile(MM, cache=1)


def test_a_timed_compile_neither_uses_nor_fills_the_cache():
    source = matmul((2, 3), (3, 2), (2, 2), np.float32)
    cached, timings = compiler.compile(source), {}
    timed = compiler.compile(source, timings=timings)
    assert timed is not cached and "LLVM O3" in timings
    assert compiler.compile(source) is cached
    source = matmul((2, 3), (3, 3), (2, 3), np.float32)
    timed = compiler.compile(source, timings={})
    assert compiler.compile(source) is not timed


def test_the_target_planned_for_is_part_of_the_cache_key():
    """A kernel planned for one LOOM_TARGET is not served to a compile planning for another
    (the default pipeline's schedule depends on it)."""
    source = matmul((2, 5), (5, 3), (2, 3), np.float32)
    with planning_for(TARGETS["avx2"]):
        avx2 = compiler.compile(source)
    with planning_for(TARGETS["avx512"]):
        assert compiler.compile(source) is not avx2
    with planning_for(TARGETS["avx2"]):
        assert compiler.compile(source) is avx2


def test_verifier_error_has_location():
    bad = MM.replace("4x5", "4x6")
    with pytest.raises(ValueError, match=r"^<source>:2:3: error: 'loom.matmul' op result has shape 4x6"):
        compiler.compile(bad)


def test_reference_checks_shapes():
    a, b = args()
    with pytest.raises(ValueError, match=r"argument #1 \(%b\) has shape \(5, 3\), expected \(3, 5\)"):
        compiler.reference(MM, a, b.T)
    with pytest.raises(TypeError, match=r"@mm takes 2 arrays, got 1"):
        compiler.reference(MM, a)
    with pytest.raises(TypeError, match=r"@mm takes 2 arrays, got 3"):
        compiler.reference(MM, a, b, b)
    np.testing.assert_allclose(compiler.reference(MM, a, b), a.astype(np.float64) @ b)  # one result: an array


def test_no_leak_across_calls():
    """Intermediates are freed: resident memory stays flat over many calls."""
    import resource

    src = """func.func @f(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>) -> tensor<256x256xf32> {
      %s = loom.add %a, %b : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
      %m = loom.mul %s, %a : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
      %r = loom.relu %m : tensor<256x256xf32>
      func.return %r : tensor<256x256xf32>
    }"""
    k = compiler.compile(src)
    a = np.ones((256, 256), np.float32)
    for _ in range(20):
        k(a, a)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(300):  # 2 x 256 KiB of intermediates per call: 150 MiB if leaked
        k(a, a)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50 * 1024


#: what a fresh interpreter has imported after `import compiler`, then after it names the API
_IMPORTS = """
import json, sys
import compiler
def loaded():
    return sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "xdsl", "llvmlite", "passes", "dialects"})
first = loaded()
api = (compiler.jit, compiler.explain, compiler.compile)
print(json.dumps({"first": first, "then": loaded(), "names": [getattr(f, "__name__", "") for f in api]}))
"""


def test_import_compiler_loads_nothing_until_the_api_is_used():
    """`import compiler` imports none of the API (numpy, xDSL, LLVM), and each name loads
    at its first use. `compiler.jit` and `compiler.explain` stay the API's functions, though
    subpackages of those names are imported meanwhile."""
    done = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    assert got["first"] == []
    assert {"numpy", "xdsl", "passes"} <= set(got["then"])
    assert got["names"] == ["jit", "explain", "compile"]
    assert compiler.jit.__module__ == "compiler.frontends.python" and callable(compiler.explain)


def test_the_api_names_are_its_modules_own():
    from compiler.driver import compile as compile_source
    from compiler.jit.kernel import Kernel
    from passes.support.diagnostics import LoomError

    assert compiler.compile is compile_source and compiler.Kernel is Kernel and compiler.LoomError is LoomError
    assert set(compiler.__all__) <= set(dir(compiler))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        compiler.nothing  # noqa: B018

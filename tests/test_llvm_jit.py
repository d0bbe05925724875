"""End to end below the schedule passes: func/arith/scf/memref MLIR written by hand →
convert-scf-to-cf, loom-convert-to-llvm → LLVM IR (compiler.jit.emit) → O3 + MCJIT
(compiler.jit.engine) → called through ctypes on numpy arrays, compared with numpy.

Also checks the point of the GEP + noalias design: LLVM vectorizes a plain loop.
"""

from __future__ import annotations

import ctypes
import math
import re
import threading

import numpy as np
import pytest
from xdsl.passes import PassPipeline

from dialects.context import make_context
from passes.support.diagnostics import LoomError
from passes.support.parser import parse_module
from compiler.jit import pool
from compiler.jit.engine import JITModule, assembly, compile_ir, optimize, undefined_symbols
from compiler.jit.emit import to_llvm_ir
from passes import get_all_passes

PTR = ctypes.c_void_p
I64 = ctypes.c_int64

pool.install()  # a large temporary of the lowered code comes from the buffer pool, as in compile()'s kernels


def lower(mlir: str) -> str:
    """MLIR text → LLVM IR text."""
    ctx = make_context()
    module = parse_module(ctx, mlir, "test.mlir")
    PassPipeline.parse_spec(get_all_passes(), "convert-scf-to-cf,loom-convert-to-llvm").apply(ctx, module)
    module.verify()
    return to_llvm_ir(module)


def build(mlir: str) -> JITModule:
    return compile_ir(lower(mlir))


def function(jit: JITModule, name: str, restype, *argtypes):  # noqa: ANN001, ANN201
    f = ctypes.CFUNCTYPE(restype, *argtypes)(jit.function_address(name))
    f.jit = jit  # the machine code lives as long as its JITModule
    return f


def ptr(a: np.ndarray) -> int:
    return a.ctypes.data


MATMUL = """
func.func @matmul(%A: memref<7x5xf32>, %B: memref<5x3xf32>, %C: memref<7x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  scf.for %i = %c0 to %c7 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      scf.for %k = %c0 to %c5 step %c1 {
        %a = memref.load %A[%i, %k] : memref<7x5xf32>
        %b = memref.load %B[%k, %j] : memref<5x3xf32>
        %c = memref.load %C[%i, %j] : memref<7x3xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        memref.store %s, %C[%i, %j] : memref<7x3xf32>
      }
    }
  }
  func.return
}
"""


def test_matmul_loop_nest():
    f = function(build(MATMUL), "matmul", None, PTR, PTR, PTR)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((7, 5), dtype=np.float32)
    B = rng.standard_normal((5, 3), dtype=np.float32)
    C = rng.standard_normal((7, 3), dtype=np.float32)
    expected = C + A @ B
    f(ptr(A), ptr(B), ptr(C))
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)


def test_alloc_dealloc_temporary():
    jit = compile_ir(ir := lower("""
    func.func @twice_plus_one(%A: memref<6x10xf32>, %B: memref<6x10xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %c10 = arith.constant 10 : index
      %two = arith.constant 2.0 : f32
      %one = arith.constant 1.0 : f32
      %t = memref.alloc() : memref<6x10xf32>
      scf.for %i = %c0 to %c6 step %c1 {
        scf.for %j = %c0 to %c10 step %c1 {
          %a = memref.load %A[%i, %j] : memref<6x10xf32>
          %d = arith.mulf %a, %two : f32
          memref.store %d, %t[%i, %j] : memref<6x10xf32>
        }
      }
      scf.for %i = %c0 to %c6 step %c1 {
        scf.for %j = %c0 to %c10 step %c1 {
          %d = memref.load %t[%i, %j] : memref<6x10xf32>
          %e = arith.addf %d, %one : f32
          memref.store %e, %B[%i, %j] : memref<6x10xf32>
        }
      }
      memref.dealloc %t : memref<6x10xf32>
      func.return
    }
    """))
    assert "%t = call ptr @aligned_alloc(i64 64, i64 256)" in ir  # 240 bytes, rounded up
    assert "call void @free(ptr %t)" in ir
    f = function(jit, "twice_plus_one", None, PTR, PTR)
    A = np.arange(60, dtype=np.float32).reshape(6, 10)
    B = np.zeros_like(A)
    for _ in range(3):  # allocates and frees each call
        f(ptr(A), ptr(B))
    np.testing.assert_array_equal(B, A * 2 + 1)


def test_allocating_function_returns_a_status():
    """A function that allocates returns 0, or the site number of the allocation that got
    no memory (2^56 bytes: more than any process can map), before touching anything."""
    jit = build("""
    func.func @fill(%A: memref<4xf32>, %v: f32) {
      %c0 = arith.constant 0 : index
      %t = memref.alloc() : memref<4xf32>
      memref.store %v, %t[%c0] : memref<4xf32>
      %x = memref.load %t[%c0] : memref<4xf32>
      memref.store %x, %A[%c0] : memref<4xf32>
      memref.dealloc %t : memref<4xf32>
      func.return
    }
    func.func @too_big(%A: memref<4xf32>, %i: index) {
      %c0 = arith.constant 0 : index
      %t = memref.alloc() : memref<4xf32>
      %u = memref.alloc() : memref<18014398509481984xf32>
      %x = memref.load %A[%c0] : memref<4xf32>
      memref.store %x, %u[%i] : memref<18014398509481984xf32>
      %y = memref.load %u[%c0] : memref<18014398509481984xf32>
      memref.store %y, %A[%c0] : memref<4xf32>
      memref.dealloc %u : memref<18014398509481984xf32>
      memref.dealloc %t : memref<4xf32>
      func.return
    }
    """)
    A = np.zeros(4, np.float32)
    assert function(jit, "fill", ctypes.c_int32, PTR, ctypes.c_float)(ptr(A), 2.5) == 0
    assert A[0] == 2.5
    too_big = function(jit, "too_big", ctypes.c_int32, PTR, I64)
    for _ in range(3):
        assert too_big(ptr(A), 7) == 3  # sites 1 (@fill's %t), 2 (%t), 3 (%u)
    assert A[0] == 2.5


def test_f64_kernel_with_scalar_argument_and_fma():
    f = function(
        build("""
        func.func @axpy(%a: f64, %X: memref<100xf64>, %Y: memref<100xf64>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 100 : index
          scf.for %i = %c0 to %n step %c1 {
            %x = memref.load %X[%i] : memref<100xf64>
            %y = memref.load %Y[%i] : memref<100xf64>
            %r = math.fma %a, %x, %y : f64
            memref.store %r, %Y[%i] : memref<100xf64>
          }
          func.return
        }
        """),
        "axpy",
        None,
        ctypes.c_double,
        PTR,
        PTR,
    )
    X = np.linspace(-1, 1, 100)
    Y = np.cos(X)
    expected = 2.5 * X + Y
    f(2.5, ptr(X), ptr(Y))
    np.testing.assert_allclose(Y, expected, rtol=1e-14)


def test_integer_ops():
    f = function(
        build("""
        func.func @ints(%A: memref<64xi32>, %B: memref<64xi32>, %C: memref<64xi32>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 64 : index
          %three = arith.constant 3 : i32
          %seven = arith.constant 7 : i32
          %two = arith.constant 2 : i32
          scf.for %i = %c0 to %n step %c1 {
            %a = memref.load %A[%i] : memref<64xi32>
            %b = memref.load %B[%i] : memref<64xi32>
            %p = arith.muli %a, %three : i32
            %s = arith.addi %p, %b : i32
            %m = arith.maxsi %s, %b : i32
            %r = arith.remsi %m, %seven : i32
            %sh = arith.shli %r, %two : i32
            %x = arith.xori %sh, %a : i32
            %ii = arith.index_cast %i : index to i32
            %y = arith.subi %x, %ii : i32
            memref.store %y, %C[%i] : memref<64xi32>
          }
          func.return
        }
        """),
        "ints",
        None,
        PTR,
        PTR,
        PTR,
    )
    rng = np.random.default_rng(1)
    A = rng.integers(-1000, 1000, 64, dtype=np.int32)
    B = rng.integers(-1000, 1000, 64, dtype=np.int32)
    C = np.zeros(64, dtype=np.int32)
    f(ptr(A), ptr(B), ptr(C))
    m = np.maximum(A * 3 + B, B)
    r = np.fmod(m, 7)  # remsi truncates toward zero, like C
    expected = ((r << 2) ^ A) - np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(C, expected)


def test_rounding_divisions():
    f = function(
        build("""
        func.func @divs(%A: memref<40xi64>, %B: memref<40xi64>, %F: memref<40xi64>, %C: memref<40xi64>, %U: memref<40xi64>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 40 : index
          scf.for %i = %c0 to %n step %c1 {
            %a = memref.load %A[%i] : memref<40xi64>
            %b = memref.load %B[%i] : memref<40xi64>
            %f = arith.floordivsi %a, %b : i64
            %c = arith.ceildivsi %a, %b : i64
            %u = arith.ceildivui %a, %b : i64
            memref.store %f, %F[%i] : memref<40xi64>
            memref.store %c, %C[%i] : memref<40xi64>
            memref.store %u, %U[%i] : memref<40xi64>
          }
          func.return
        }
        """),
        "divs",
        None,
        *[PTR] * 5,
    )
    rng = np.random.default_rng(2)
    A = rng.integers(-50, 50, 40, dtype=np.int64)
    B = rng.choice([-7, -3, -1, 1, 2, 5], 40).astype(np.int64)
    F, C, U = (np.zeros(40, dtype=np.int64) for _ in range(3))
    f(ptr(A), ptr(B), ptr(F), ptr(C), ptr(U))
    np.testing.assert_array_equal(F, A // B)
    np.testing.assert_array_equal(C, -(-A // B))
    ua, ub = A.astype(np.uint64), B.astype(np.uint64)
    np.testing.assert_array_equal(U.astype(np.uint64), ua // ub + (ua % ub != 0))


def test_strided_layout_argument():
    """The pointer is the buffer's base; the layout's offset and strides are applied."""
    f = function(
        build("""
        func.func @copy_view(%V: memref<4x3xf32, strided<[8, 2], offset: 5>>, %O: memref<4x3xf32>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c3 = arith.constant 3 : index
          %c4 = arith.constant 4 : index
          scf.for %i = %c0 to %c4 step %c1 {
            scf.for %j = %c0 to %c3 step %c1 {
              %v = memref.load %V[%i, %j] : memref<4x3xf32, strided<[8, 2], offset: 5>>
              memref.store %v, %O[%i, %j] : memref<4x3xf32>
            }
          }
          func.return
        }
        """),
        "copy_view",
        None,
        PTR,
        PTR,
    )
    base = np.arange(40, dtype=np.float32)
    view = np.lib.stride_tricks.as_strided(base[5:], shape=(4, 3), strides=(8 * 4, 2 * 4))
    out = np.zeros((4, 3), dtype=np.float32)
    f(ptr(base), ptr(out))
    np.testing.assert_array_equal(out, view)


def test_negative_stride_view():
    """A reversed view: base = start of the buffer, offset = last element, stride -1."""
    f = function(
        build("""
        func.func @copy_rev(%V: memref<6xf64, strided<[-1], offset: 5>>, %O: memref<6xf64>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 6 : index
          scf.for %i = %c0 to %n step %c1 {
            %v = memref.load %V[%i] : memref<6xf64, strided<[-1], offset: 5>>
            memref.store %v, %O[%i] : memref<6xf64>
          }
          func.return
        }
        """),
        "copy_rev",
        None,
        PTR,
        PTR,
    )
    buf = np.arange(6, dtype=np.float64)
    out = np.zeros(6)
    f(ptr(buf), ptr(out))
    np.testing.assert_array_equal(out, buf[::-1])


def test_reduction_with_iter_args_and_call():
    """scf.for iter_args become block arguments (phis); func.call between functions."""
    jit = build("""
    func.func private @square(%x: f32) -> f32 {
      %r = arith.mulf %x, %x : f32
      func.return %r : f32
    }
    func.func @sum_squares(%A: memref<50xf32>) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 50 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
        %a = memref.load %A[%i] : memref<50xf32>
        %s = func.call @square(%a) : (f32) -> f32
        %next = arith.addf %acc, %s : f32
        scf.yield %next : f32
      }
      func.return %sum : f32
    }
    """)
    assert jit.functions == ["sum_squares"]  # @square is private: internal, inlined
    f = function(jit, "sum_squares", ctypes.c_float, PTR)
    A = np.linspace(0, 1, 50, dtype=np.float32)
    assert f(ptr(A)) == pytest.approx(float(np.sum(A.astype(np.float64) ** 2)), rel=1e-5)


def test_math_through_libm():
    f = function(
        build("""
        func.func @act(%X: memref<32xf32>, %Y: memref<32xf32>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 32 : index
          scf.for %i = %c0 to %n step %c1 {
            %x = memref.load %X[%i] : memref<32xf32>
            %t = math.tanh %x : f32
            %e = math.exp %t : f32
            %q = math.sqrt %e : f32
            %m = arith.maximumf %q, %x : f32
            memref.store %m, %Y[%i] : memref<32xf32>
          }
          func.return
        }
        """),
        "act",
        None,
        PTR,
        PTR,
    )
    X = np.linspace(-3, 3, 32, dtype=np.float32)
    Y = np.zeros_like(X)
    f(ptr(X), ptr(Y))
    np.testing.assert_allclose(Y, np.maximum(np.sqrt(np.exp(np.tanh(X))), X), rtol=1e-6)


def test_casts_and_selects():
    f = function(
        build("""
        func.func @conv(%X: memref<16xf32>, %Y: memref<16xf64>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 16 : index
          %zero = arith.constant 0.0 : f32
          scf.for %i = %c0 to %n step %c1 {
            %x = memref.load %X[%i] : memref<16xf32>
            %k = arith.fptosi %x : f32 to i32
            %u = arith.uitofp %k : i32 to f32
            %neg = arith.cmpf olt, %x, %zero : f32
            %s = arith.sitofp %k : i32 to f32
            %v = arith.select %neg, %s, %u : f32
            %d = arith.extf %v : f32 to f64
            memref.store %d, %Y[%i] : memref<16xf64>
          }
          func.return
        }
        """),
        "conv",
        None,
        PTR,
        PTR,
    )
    X = np.linspace(-7.5, 7.5, 16, dtype=np.float32)
    Y = np.zeros(16, dtype=np.float64)
    f(ptr(X), ptr(Y))
    np.testing.assert_array_equal(Y, np.trunc(X).astype(np.float64))


def test_vector_values_through_memrefs_of_vectors():
    """Elementwise arith/math on vector<8xf32> lowers like scalars (the vector path's base)."""
    f = function(
        build("""
        func.func @vfma(%X: memref<4xvector<8xf32>>, %Y: memref<4xvector<8xf32>>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %n = arith.constant 4 : index
          %half = arith.constant dense<0.5> : vector<8xf32>
          scf.for %i = %c0 to %n step %c1 {
            %x = memref.load %X[%i] : memref<4xvector<8xf32>>
            %a = math.absf %x : vector<8xf32>
            %r = math.fma %a, %half, %x fastmath<contract> : vector<8xf32>
            memref.store %r, %Y[%i] : memref<4xvector<8xf32>>
          }
          func.return
        }
        """),
        "vfma",
        None,
        PTR,
        PTR,
    )
    X = np.linspace(-4, 4, 32, dtype=np.float32).reshape(4, 8)
    Y = np.zeros_like(X)
    f(ptr(X), ptr(Y))
    np.testing.assert_allclose(Y, np.abs(X) * 0.5 + X, rtol=1e-6)


def test_libcalls_introduced_by_code_generation():
    """llvm.powi → __powisf2 (libgcc), sin+cos → sincosf, erf → erff: all resolved."""
    jit = build("""
    func.func @k(%X: memref<16xf32>, %Y: memref<16xf32>, %n: i32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.for %i = %c0 to %c16 step %c1 {
        %x = memref.load %X[%i] : memref<16xf32>
        %p = math.fpowi %x, %n : f32, i32
        %s = math.sin %x : f32
        %c = math.cos %x : f32
        %a = arith.addf %s, %c : f32
        %b = arith.addf %a, %p : f32
        %e = math.erf %b : f32
        memref.store %e, %Y[%i] : memref<16xf32>
      }
      func.return
    }
    """)
    assert "erff" in undefined_symbols(jit.object_code)
    f = function(jit, "k", None, PTR, PTR, ctypes.c_int32)
    X = np.linspace(-1, 1, 16, dtype=np.float32)
    Y = np.zeros_like(X)
    f(ptr(X), ptr(Y), 3)
    expected = [math.erf(v) for v in np.sin(X) + np.cos(X) + X.astype(np.float64) ** 3]
    np.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-6)


def test_unresolvable_external_is_an_error():
    with pytest.raises(LoomError, match="unresolved external functions: loom_no_such_symbol"):
        build("""
        func.func private @loom_no_such_symbol(f32) -> f32
        func.func @k(%x: f32) -> f32 {
          %r = func.call @loom_no_such_symbol(%x) : (f32) -> f32
          func.return %r : f32
        }
        """)


def test_emitter_extensions_on_llvm_dialect_input():
    """extractelement and the fptosi/uitofp ops, which Loom's context adds to xDSL's llvm."""
    ctx = make_context()
    module = parse_module(ctx, """
    llvm.func @lane(%p: !llvm.ptr, %i: i64) -> f64 {
      %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
      %e = "llvm.extractelement"(%v, %i) : (vector<4xf32>, i64) -> f32
      %n = llvm.fptoui %e : f32 to i32
      %d = llvm.uitofp %n : i32 to f64
      llvm.return %d : f64
    }
    """)
    f = function(compile_ir(to_llvm_ir(module)), "lane", ctypes.c_double, PTR, I64)
    data = np.array([1.5, 7.25, 3.0, 9.75], dtype=np.float32)
    assert [f(ptr(data), k) for k in range(4)] == [1.0, 7.0, 3.0, 9.0]


ELEMENTWISE = """
func.func @add(%A: memref<1024xf32>, %B: memref<1024xf32>, %C: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  scf.for %i = %c0 to %n step %c1 {
    %a = memref.load %A[%i] : memref<1024xf32>
    %b = memref.load %B[%i] : memref<1024xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %C[%i] : memref<1024xf32>
  }
  func.return
}
"""


def test_elementwise_loop_is_vectorized():
    """GEP addressing + noalias arguments let LLVM's loop vectorizer do its job."""
    ir = lower(ELEMENTWISE)
    assert "noalias" in ir and "getelementptr inbounds" in ir
    optimized = optimize(ir)
    assert re.search(r"<(8|16) x float>", optimized), optimized
    jit = compile_ir(ir)
    assert re.search(r"<(8|16) x float>", jit.optimized_ir)
    assert re.search(r"\b(v?addps|vaddps)\b", jit.asm())
    assert assembly(ir) == jit.asm()  # loom-opt -t asm: the same code, with no engine
    f = function(jit, "add", None, PTR, PTR, PTR)
    A = np.arange(1024, dtype=np.float32)
    B = np.full(1024, 0.5, dtype=np.float32)
    C = np.zeros(1024, dtype=np.float32)
    f(ptr(A), ptr(B), ptr(C))
    np.testing.assert_array_equal(C, A + B)


def test_same_function_name_in_two_modules():
    one = build("func.func @k() -> i32 {\n %c = arith.constant 1 : i32\n func.return %c : i32\n}")
    two = build("func.func @k() -> i32 {\n %c = arith.constant 2 : i32\n func.return %c : i32\n}")
    assert function(one, "k", ctypes.c_int32)() == 1
    assert function(two, "k", ctypes.c_int32)() == 2


def test_unknown_function_and_bad_ir():
    jit = build(MATMUL)
    with pytest.raises(LoomError, match="no function 'nope'"):
        jit.function_address("nope")
    with pytest.raises(LoomError, match="invalid LLVM IR"):
        compile_ir("define void @f( {")
    # parses, but does not verify (a value used before it is defined): refused, never compiled
    with pytest.raises(LoomError, match="invalid LLVM IR: .*Instruction does not dominate all uses"):
        compile_ir("define i32 @g(i32 %x) {\n  %a = add i32 %b, 1\n  %b = add i32 %x, 1\n  ret i32 %a\n}\n")


def test_compile_from_threads():
    results: list[float] = []
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            jit = build(f"func.func @g(%x: f64) -> f64 {{\n %c = arith.constant {k}.0 : f64\n"
                        f" %r = arith.mulf %x, %c : f64\n func.return %r : f64\n}}")
            results.append(function(jit, "g", ctypes.c_double, ctypes.c_double)(2.0))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == [2.0, 4.0, 6.0, 8.0]


def test_a_closed_or_dropped_module_frees_its_engine():
    """close() frees the machine code now (an address asked after is an error, a second
    close nothing); a module dropped hands its engine to the next compile or release()."""
    import gc

    from compiler.jit import engine

    one = build("func.func @k() -> i32 {\n %c = arith.constant 5 : i32\n func.return %c : i32\n}")
    assert function(one, "k", ctypes.c_int32)() == 5
    one.close()
    one.close()
    with pytest.raises(LoomError, match=re.escape("this module's machine code was freed (JITModule.close())")):
        one.function_address("k")
    with pytest.raises(LoomError, match=re.escape("no function 'g' in this module (it has: k)")):
        one.function_address("g")
    engine.release()
    two, three = (build(f"func.func @k() -> i32 {{\n %c = arith.constant {n} : i32\n func.return %c : i32\n}}")
                  for n in (6, 7))
    handles = [two._engine, three._engine]
    del two, three
    gc.collect()
    for handle in handles:
        assert any(e is handle for e in engine._retired) and not handle._closed  # not freed in a finalizer
    engine.release()
    assert engine._retired == [] and all(handle._closed for handle in handles)  # every one dropped


def test_undefined_symbols_reads_64_bit_little_endian_elf_only():
    jit = build("""
    func.func private @cosf(f32) -> f32
    func.func @k(%x: f32) -> f32 {
      %r = func.call @cosf(%x) : (f32) -> f32
      func.return %r : f32
    }
    """)
    obj = jit.object_code
    assert undefined_symbols(obj) == ["cosf"]
    assert function(jit, "k", ctypes.c_float, ctypes.c_float)(0.0) == 1.0
    for other in (obj[:4] + b"\x01" + obj[5:], obj[:5] + b"\x02" + obj[6:], b"MZ" + obj[2:]):
        assert undefined_symbols(other) == []


def test_only_external_functions_are_exported():
    """An internal function the module keeps (never inlined) is none of the module's
    functions: only the external ones get a symbol of their own and an address."""
    jit = compile_ir("define internal i32 @helper(i32 %x) noinline {\n  %r = add i32 %x, 1\n  ret i32 %r\n}\n"
                     "define i32 @f(i32 %x) {\n  %r = call i32 @helper(i32 %x)\n  ret i32 %r\n}\n")
    assert re.search(r"define internal .*@helper", jit.optimized_ir)  # kept, not inlined
    assert jit.functions == ["f"] and list(jit.symbols) == ["f"]
    assert function(jit, "f", ctypes.c_int32, ctypes.c_int32)(41) == 42
    with pytest.raises(LoomError, match=re.escape("no function 'helper' in this module (it has: f)")):
        jit.function_address("helper")


def test_a_stage_timed_again_adds_its_seconds():
    """timed() adds to what the stage already has (a pass that verifies after each pass is
    timed many times): never less than before; without timings, nothing is kept."""
    from compiler.jit.engine import timed

    timings = {"stage": (5.0, 7.0)}
    with timed(timings, "stage"):
        pass
    assert timings["stage"][0] >= 5.0 and timings["stage"][1] >= 7.0
    with timed(None, "stage"):
        pass


def test_a_symbol_resolved_before_does_not_stop_the_resolution_of_the_next():
    """A module that declares a symbol an earlier compile resolved, then one of the
    runtime's own not resolved yet: both are linked."""
    from compiler.jit import loader

    seven = build("func.func @seven() -> i32 {\n %c = arith.constant 7 : i32\n func.return %c : i32\n}")
    loader.register_symbols(["loom_test_seven"], lambda name: seven.function_address("seven"))
    call_free = "declare void @free(ptr)\ndefine void @g(ptr %p) {\n  call void @free(ptr %p)\n  ret void\n}\n"
    compile_ir(call_free)  # @free resolved now
    jit = compile_ir(call_free.replace("define", "declare i32 @loom_test_seven()\ndefine")
                     + "define i32 @f() {\n  %r = call i32 @loom_test_seven()\n  ret i32 %r\n}\n")
    assert function(jit, "f", ctypes.c_int32)() == 7


def test_a_symbol_code_generation_needs_and_nothing_has_is_an_error(monkeypatch):
    """A symbol the object file needs (a libcall code generation introduced) that is found
    nowhere fails the compile: code linked against a null address is never handed out."""
    from compiler.jit import engine

    monkeypatch.setattr(engine, "undefined_symbols", lambda obj: ["loom_no_such_libcall"])
    with pytest.raises(LoomError, match="the compiled code needs symbols found nowhere: loom_no_such_libcall"):
        compile_ir("define i32 @f() {\n  ret i32 1\n}\n")

// RUN: not loom-opt %s -p loom-convert-to-llvm --split-input-file 2>&1 | filecheck %s

// A dynamic memref cannot be a bare pointer: refused with its location.
func.func @dynamic(%A: memref<?x4xf32>) {
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: memref<?x4xf32> has a dynamic shape; only static shapes and layouts can be lowered (a memref is passed as a bare pointer)

// -----

// A dynamic layout offset is refused the same way.
func.func @dynamic_layout(%A: memref<4xf32, strided<[1], offset: ?>>) {
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: memref<4xf32, strided<[1], offset: ?>> has a dynamic layout

// -----

// An op with no lowering is named, at its own line.
func.func @copy(%A: memref<4xf32>, %B: memref<4xf32>) {
  "memref.copy"(%A, %B) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:3: error: loom-convert-to-llvm: no lowering to the llvm dialect for 'memref.copy'

// -----

// scf must be lowered first.
func.func @loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
  }
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 5]]:3: error: loom-convert-to-llvm: run convert-scf-to-cf first ('scf.for' is still here)

// -----

// Two results cannot be returned.
func.func @two(%a: f32) -> (f32, f32) {
  func.return %a, %a : f32, f32
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: 'two' returns 2 values; at most one is supported

// -----

// A layout that reaches before the base pointer cannot be addressed from it.
func.func @before_base(%A: memref<4xf32, strided<[-1], offset: 2>>) {
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: memref<4xf32, strided<[-1], offset: 2>> addresses elements before its base pointer (negative offset)

// -----

// A function that allocates (or calls one that does) reports a failed allocation by
// returning a status: one that returns a value has no way to, and is refused.
func.func @allocates_and_returns(%x: f32) -> f32 {
  %t = memref.alloc() : memref<4xf32>
  memref.dealloc %t : memref<4xf32>
  func.return %x : f32
}

// CHECK: refuse.mlir:[[# @LINE - 6]]:1: error: loom-convert-to-llvm: '@allocates_and_returns' allocates memory on the heap (or calls a function that does) and returns a value, so it could not report an allocation failure; return results through out-parameters (as loom-bufferize does)

// -----

// A memref of 2^63 bytes or more: its size and addresses would wrap around in i64.
func.func @too_large() {
  %t = memref.alloc() : memref<4611686018427387904x2xf32>
  memref.dealloc %t : memref<4611686018427387904x2xf32>
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 5]]:3: error: loom-convert-to-llvm: memref<4611686018427387904x2xf32> spans 36893488147419103232 bytes, more than a 64-bit address or size can hold (2^63 - 1)

// -----

// An element type with no lowering: refused here, not as an internal error at emission
// (bf16 is an i16: low-precision.mlir; f80 and f128 are refused by the verifier).
func.func @complex_memref(%a: memref<8xcomplex<f32>>) {
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: unsupported memref element type complex<f32>

// -----

func.func @tuple_argument(%v: tuple<f32>) {
  func.return
}

// CHECK: refuse.mlir:[[# @LINE - 4]]:1: error: loom-convert-to-llvm: no LLVM type for tuple<f32>

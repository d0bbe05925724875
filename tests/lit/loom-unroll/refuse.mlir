// RUN: not loom-opt %s -p 'loom-unroll{factor=0}' 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not loom-opt %s -p 'loom-unroll{factor=-2}' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not loom-opt %s -p 'loom-unroll' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not loom-opt %s -p 'loom-unroll{factor=1000000000}' --split-input-file 2>&1 | filecheck %s --check-prefix=SIZE

// A factor below 1 (or none) is an error naming the pass and the option; nothing is
// printed, nothing changed.
// ZERO: {{^}}loom-opt: error: loom-unroll: option 'factor' must be a positive integer, got 0
// ZERO-NOT: affine.for
// NEG: {{^}}loom-opt: error: loom-unroll: option 'factor' must be a positive integer, got -2
// NEG-NOT: affine.for
// MISSING: {{^}}loom-opt: error: loom-unroll: option 'factor' must be a positive integer, got 0
// MISSING-NOT: affine.for
func.func @f(%m: memref<8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.store %z, %m[%i] : memref<8xf32>
  } {loom.tag = "zero"}
  func.return
}

// -----

// A loop whose trip count is not known (%n) unrolled by 10^9: its copies would make
// about 4 * 10^9 ops (each copy's body and its iv). Refused before any is made, with the limit and the estimate. (A
// constant trip count, as in @f, clamps the factor instead.)
// SIZE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll: unrolling its innermost loops by 1000000000 would make nest 'sum' about 4,000,000,005 ops, more than the limit of 20,000 ops per unrolled nest (compile time and memory grow with it): use smaller factors
func.func @unknown_trip_count(%a: memref<?xf32>, %n: index, %z: f32) {
  affine.for %i = 0 to %n {
    %v = affine.load %a[%i] : memref<?xf32>
    %s = arith.addf %v, %z : f32
    affine.store %s, %a[%i] : memref<?xf32>
  } {loom.tag = "sum"}
  func.return
}

// -----

// An empty body counts its iv per copy: unrolled by 10^9 it is refused too (the
// fuzzer's find: it ran on, making 10^9 copies of nothing).
// SIZE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll: unrolling its innermost loops by 1000000000 would make nest 'untagged' about 1,000,000,002 ops
func.func @empty_body(%lo: index, %hi: index) {
  affine.for %i = %lo to %hi {
  }
  func.return
}

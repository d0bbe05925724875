// RUN: not loom-opt %s -p 'loom-unroll{factor=0}' 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not loom-opt %s -p 'loom-unroll{factor=-2}' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not loom-opt %s -p 'loom-unroll' 2>&1 | filecheck %s --check-prefix=MISSING

// A factor below 1 (or none) is an error naming the pass and the option; nothing is
// printed, nothing changed.
// ZERO: {{^}}error: loom-unroll: option 'factor' must be a positive integer, got 0
// ZERO-NOT: affine.for
// NEG: {{^}}error: loom-unroll: option 'factor' must be a positive integer, got -2
// NEG-NOT: affine.for
// MISSING: {{^}}error: loom-unroll: option 'factor' must be a positive integer, got 0
// MISSING-NOT: affine.for
func.func @f(%m: memref<8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.store %z, %m[%i] : memref<8xf32>
  } {loom.tag = "zero"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-outline{min-nests=-1}' 2>&1 | filecheck %s

// A negative threshold is an error naming the pass and the option; nothing is printed.
// CHECK: {{^}}loom-opt: error: loom-outline: option 'min-nests' must be a non-negative integer, got -1
// CHECK-NOT: affine.for
func.func @f(%m: memref<8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.store %z, %m[%i] : memref<8xf32>
  } {loom.tag = "fill"}
  func.return
}

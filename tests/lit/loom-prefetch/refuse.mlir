// RUN: not loom-opt %s -p 'loom-prefetch{distance=0}' 2>&1 | filecheck %s --check-prefix=DISTANCE
// RUN: not loom-opt %s -p 'loom-prefetch{locality=4}' 2>&1 | filecheck %s --check-prefix=LOCALITY
// RUN: not loom-opt %s -p 'loom-prefetch{ahead=2}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: loom-opt %s -p 'loom-prefetch{op=conv2d}' --remarks 2>&1 | filecheck %s --check-prefix=NOTAG

// Bad options are errors naming the pass and the option; nothing is printed.
// DISTANCE: {{^}}error: loom-prefetch: option 'distance' must be a positive integer (iterations ahead), got 0
// DISTANCE-NOT: affine.for
// LOCALITY: {{^}}error: loom-prefetch: option 'locality' is 0 (no reuse) to 3 (keep in every cache level), got 4
// LOCALITY-NOT: affine.for
// OPTION: error: {{.*}}ahead
// OPTION-NOT: affine.for
// A tag that no nest has: a remark, the module unchanged.
// NOTAG: remark: [loom-prefetch] no loop nest tagged 'conv2d'
// NOTAG-NOT: loom.prefetch
func.func @f(%a: memref<4x8xf32>, %c: memref<4xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 4 {
      %x = affine.load %a[%i, %k] : memref<4x8xf32>
      affine.for %j = 0 to 4 {
        affine.store %x, %c[%j] : memref<4xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-prefetch{distance=0}' 2>&1 | filecheck %s --check-prefix=DISTANCE
// RUN: not loom-opt %s -p 'loom-prefetch{locality=4}' 2>&1 | filecheck %s --check-prefix=LOCALITY
// RUN: not loom-opt %s -p 'loom-prefetch{ahead=2}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not loom-opt %s -p 'loom-prefetch{op=conv2d}' 2>&1 | filecheck %s --check-prefix=NOTAG
// RUN: not loom-opt %s -p 'loom-prefetch{distance=0 locality=-1}' 2>&1 | filecheck %s --check-prefix=BOTH

// Bad options are errors naming the pass and the option; nothing is printed.
// DISTANCE: {{^}}loom-opt: error: loom-prefetch: option 'distance' must be a positive integer (iterations ahead), got 0
// DISTANCE-NOT: affine.for
// LOCALITY: {{^}}loom-opt: error: loom-prefetch: option 'locality' is 0 (no reuse) to 3 (keep in every cache level), got 4
// LOCALITY-NOT: affine.for
// OPTION: error: {{.*}}ahead
// OPTION-NOT: affine.for
// Two bad options: both in one error.
// BOTH: error: loom-prefetch: option 'distance' must be a positive integer (iterations ahead), got 0; option 'locality' is 0 (no reuse) to 3 (keep in every cache level), got -1
// A tag that no nest has: an error that lists the tags there are; nothing is printed.
// NOTAG: refuse.mlir:[[# @LINE + 3]]:3: error: loom-prefetch: option 'op' is 'conv2d', but no loop nest is tagged so; the tags present: 'matmul'
// NOTAG-NOT: affine.for
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

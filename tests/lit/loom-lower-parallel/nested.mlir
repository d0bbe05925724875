// RUN: loom-opt %s -p 'loom-parallelize{depth=1 num-threads=2},loom-parallelize{depth=0 num-threads=2},loom-lower-affine,loom-lower-parallel' | filecheck %s

// A parallel loop inside another: one team, the outer loop's; each thread runs its slice
// of %i with the inner loop as a plain loop (serialized before the outer one is outlined).
// CHECK-LABEL: func.func @copy(
// CHECK:         func.call @GOMP_parallel
// CHECK-NOT:     GOMP_parallel
// CHECK-LABEL: func.func private @copy_parallel0(
// CHECK:         scf.for %it = %lo to %hi
// CHECK:           scf.for %j =
// CHECK-NOT:     scf.parallel
// CHECK-NOT:     func.call @GOMP_parallel
func.func @copy(%a: memref<16x8xf32>, %c: memref<16x8xf32>) {
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[%i, %j] : memref<16x8xf32>
      affine.store %x, %c[%i, %j] : memref<16x8xf32>
    }
  } {loom.tag = "copy"}
  func.return
}

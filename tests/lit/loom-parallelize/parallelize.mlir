// RUN: loom-opt %s -p 'loom-parallelize{num-threads=2}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-parallelize{num-threads=2}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// An elementwise nest: its outer loop runs in parallel, the inner one stays a loop of
// each iteration; the tag and the thread count are on the affine.parallel.
// CHECK-LABEL: func.func @add
// CHECK:         "affine.parallel"() <{reductions = [], lowerBoundsMap = affine_map<() -> (0)>, lowerBoundsGroups = dense<1> : vector<1xi32>, upperBoundsMap = affine_map<() -> (64)>, upperBoundsGroups = dense<1> : vector<1xi32>, steps = [1 : i64]}> ({
// CHECK-NEXT:    ^bb0(%i: index):
// CHECK-NEXT:      affine.for %j = 0 to 32 {
// CHECK:           affine.store %{{.*}}, %c[%i, %j]
// CHECK:         }) {loom.tag = "add", loom.num_threads = 2 : i64} : () -> ()
// REMARK: parallelize.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'add': loop %i run in parallel (64 iterations, 2 threads)
func.func @add(%a: memref<64x32xf32>, %b: memref<64x32xf32>, %c: memref<64x32xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 32 {
      %x = affine.load %a[%i, %j] : memref<64x32xf32>
      %y = affine.load %b[%i, %j] : memref<64x32xf32>
      %z = arith.addf %x, %y : f32
      affine.store %z, %c[%i, %j] : memref<64x32xf32>
    }
  } {loom.tag = "add"}
  func.return
}

// -----

// matmul: i and j are parallel, k carries the sum into C[i, j]. The outermost, i, is
// taken; its body keeps j and k.
// CHECK-LABEL: func.func @matmul
// CHECK:         "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (16)>{{.*}}steps = [1 : i64]}> ({
// CHECK-NEXT:    ^bb0(%i: index):
// CHECK-NEXT:      affine.for %j = 0 to 8 {
// CHECK-NEXT:        affine.for %k = 0 to 4 {
// REMARK: parallelize.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'matmul': loop %i run in parallel (16 iterations, 2 threads)
func.func @matmul(%a: memref<16x4xf32>, %b: memref<4x8xf32>, %c: memref<16x8xf32>) {
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 4 {
        %x = affine.load %a[%i, %k] : memref<16x4xf32>
        %y = affine.load %b[%k, %j] : memref<4x8xf32>
        %z = affine.load %c[%i, %j] : memref<16x8xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<16x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Tiles: %i_t steps by 4 and each iteration writes rows %i_t .. %i_t + 3 (the point
// loop %i), so two iterations never meet: %i_t runs in parallel.
// CHECK-LABEL: func.func @tiled
// CHECK:         "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (16)>{{.*}}steps = [4 : i64]}> ({
// CHECK-NEXT:    ^bb0(%i_t: index):
// CHECK-NEXT:      affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 4))>(%i_t) {
func.func @tiled(%a: memref<16xf32>, %c: memref<16xf32>) {
  affine.for %i_t = 0 to 16 step 4 {
    affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 4)>(%i_t) {
      %x = affine.load %a[%i] : memref<16xf32>
      affine.store %x, %c[%i] : memref<16xf32>
    }
  } {loom.tag = "copy"}
  func.return
}

// -----

// Three iterations on two threads leave one thread twice the work of the other: the
// outer loop is collapsed with the inner one, 3 x 10 = 30 iterations, 15 each.
// CHECK-LABEL: func.func @collapse
// CHECK:         "affine.parallel"() <{reductions = [], lowerBoundsMap = affine_map<() -> (0, 0)>, lowerBoundsGroups = dense<1> : vector<2xi32>, upperBoundsMap = affine_map<() -> (3, 10)>, upperBoundsGroups = dense<1> : vector<2xi32>, steps = [1 : i64, 1 : i64]}> ({
// CHECK-NEXT:    ^bb0(%n: index, %f: index):
// CHECK-NEXT:      affine.for %p = 0 to 5 {
// REMARK: parallelize.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'conv': loops %n, %f run in parallel (30 iterations, collapsed, 2 threads)
func.func @collapse(%x: memref<3x10x5xf32>, %y: memref<3x10x5xf32>) {
  affine.for %n = 0 to 3 {
    affine.for %f = 0 to 10 {
      affine.for %p = 0 to 5 {
        %v = affine.load %x[%n, %f, %p] : memref<3x10x5xf32>
        affine.store %v, %y[%n, %f, %p] : memref<3x10x5xf32>
      }
    }
  } {loom.tag = "conv"}
  func.return
}

// -----

// A loop that carries a dependence is looked into: %k sums into %c[0], %j does not.
// CHECK-LABEL: func.func @inner
// CHECK:         affine.for %k = 0 to 8 {
// CHECK-NEXT:      "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (32)>
// REMARK: parallelize.mlir:[[# @LINE + 3]]:5: remark: [loom-parallelize] nest 'sum': loop %j run in parallel (32 iterations, 2 threads)
func.func @inner(%a: memref<8x32xf32>, %c: memref<32xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %j = 0 to 32 {
      %x = affine.load %a[%k, %j] : memref<8x32xf32>
      %s = affine.load %c[%j] : memref<32xf32>
      %t = arith.addf %s, %x : f32
      affine.store %t, %c[%j] : memref<32xf32>
    }
  } {loom.tag = "sum"}
  func.return
}

// -----

// loom-pack's grouped copy: %k steps by 4 from 0 and each iteration writes the group
// `%k floordiv 4`, its own (the iteration number), so %k runs in parallel.
// CHECK-LABEL: func.func @grouped_copy
// CHECK:         "affine.parallel"() <{{{.*}}steps = [4 : i64]
// REMARK: parallelize.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'copy': loop %k run in parallel (16 iterations, 2 threads)
func.func @grouped_copy(%b: memref<64x16xi8>, %pack: memref<16x64xi8>) {
  affine.for %k = 0 to 64 step 4 {
    affine.for %j = 0 to 16 {
      %x0 = affine.load %b[%k, %j] : memref<64x16xi8>
      affine.store %x0, %pack[%k floordiv 4, %j * 4] : memref<16x64xi8>
      %x1 = affine.load %b[%k + 1, %j] : memref<64x16xi8>
      affine.store %x1, %pack[%k floordiv 4, %j * 4 + 1] : memref<16x64xi8>
    }
  } {loom.tag = "copy"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-vectorize{width=3}' 2>&1 | filecheck %s --check-prefix=W3
// RUN: not loom-opt %s -p 'loom-vectorize{width=-8}' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: loom-opt %s -p 'loom-vectorize{width=8}' --split-input-file --remarks 2>&1 | filecheck %s

// A width that is not a power of two is an error of the pipeline, before any IR changes.
// W3: error: loom-vectorize: option 'width' must be a power of two (or 0: the target's), got 3
// W3-NOT: {{vector[.<]}}
// NEG: error: loom-vectorize: option 'width' must be a power of two (or 0: the target's), got -8

// What loom-vectorize leaves alone: each loop stays scalar, with a remark saying why.

// matmul in order (i, j, k): B[k, j] moves by a row (64 elements) per iteration of k.
// CHECK-LABEL: func.func @matmul_ijk
// CHECK:       affine.for %k = 0 to 64 {
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       } {loom.tag = "matmul"}
// CHECK:       refuse.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'matmul': loop %k not vectorized: %b[%k, %j] has stride 64 in %k
func.func @matmul_ijk(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 64 {
      affine.for %k = 0 to 64 {
        %x = affine.load %a[%i, %k] : memref<64x64xf32>
        %y = affine.load %b[%k, %j] : memref<64x64xf32>
        %z = affine.load %c[%i, %j] : memref<64x64xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<64x64xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// B a transposed view (strides [1, 64]): its elements are adjacent along %k, but along
// its first dimension, which a vector load does not read along.
// CHECK-LABEL: func.func @matmul_transposed_b
// CHECK:       affine.for %k = 0 to 64 {
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       } {loom.tag = "matmul"}
// CHECK:       refuse.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'matmul': loop %k not vectorized: %b[%k, %j] has stride 1 in %k, along a dimension other than the last (a vector load reads along the last)
func.func @matmul_transposed_b(%a: memref<64x64xf32>, %b: memref<64x64xf32, strided<[1, 64]>>, %c: memref<64x64xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 64 {
      affine.for %k = 0 to 64 {
        %x = affine.load %a[%i, %k] : memref<64x64xf32>
        %y = affine.load %b[%k, %j] : memref<64x64xf32, strided<[1, 64]>>
        %z = affine.load %c[%i, %j] : memref<64x64xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<64x64xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// conv2d with stride 2: the input moves by 2 elements per output column.
// CHECK-LABEL: func.func @conv_stride2
// CHECK:       affine.for %ow = 0 to 16 {
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'conv2d': loop %ow not vectorized: %x[0, 0, %oh, %ow * 2 + %s] has stride 2 in %ow
func.func @conv_stride2(%x: memref<1x1x9x33xf32>, %w: memref<1x1x1x3xf32>, %y: memref<1x1x9x16xf32>) {
  affine.for %oh = 0 to 9 {
    affine.for %s = 0 to 3 {
      affine.for %ow = 0 to 16 {
        %a = affine.load %x[0, 0, %oh, %ow * 2 + %s] : memref<1x1x9x33xf32>
        %b = affine.load %w[0, 0, 0, %s] : memref<1x1x1x3xf32>
        %c = affine.load %y[0, 0, %oh, %ow] : memref<1x1x9x16xf32>
        %p = arith.mulf %a, %b : f32
        %q = arith.addf %c, %p : f32
        affine.store %q, %y[0, 0, %oh, %ow] : memref<1x1x9x16xf32>
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}


// -----

// conv2d's padding guard: an affine.if in the body.
// CHECK-LABEL: func.func @padded
// CHECK:       affine.for %o = 0 to 18 {
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'pad': loop %o not vectorized: its body has an affine.if (a guard)
func.func @padded(%x: memref<16xf32>, %y: memref<18xf32>) {
  affine.for %o = 0 to 18 {
    "affine.if"(%o) <{condition = affine_set<(d0) : (d0 - 1 >= 0, 16 - d0 >= 0)>}> ({
      %a = affine.load %x[%o - 1] : memref<16xf32>
      affine.store %a, %y[%o] : memref<18xf32>
      affine.yield
    }, {
    }) : (index) -> ()
  } {loom.tag = "pad"}
  func.return
}


// -----

// a[j + 4] = a[j] + 1: iteration j + 4 reads what iteration j wrote; 8 lanes at a time
// would read 4 of them before they are written.
// CHECK-LABEL: func.func @recurrence
// CHECK:       affine.for %j = 0 to 96 {
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'scan': loop %j not vectorized: dependence store %a[%j + 4] (line [[# @LINE + 6]]) -> load %a[%j] (line [[# @LINE + 3]]), direction (<) at distance 4 (vector width 8)
func.func @recurrence(%a: memref<100xf32>) {
  affine.for %j = 0 to 96 {
    %x = affine.load %a[%j] : memref<100xf32>
    %one = arith.constant 1.000000e+00 : f32
    %y = arith.addf %x, %one : f32
    affine.store %y, %a[%j + 4] : memref<100xf32>
  } {loom.tag = "scan"}
  func.return
}


// -----

// The iv used as a number, not an index.
// CHECK-LABEL: func.func @iv_value
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'iota': loop %j not vectorized: %j is used as a value by 'arith.index_cast'
func.func @iv_value(%a: memref<32xf32>) {
  affine.for %j = 0 to 32 {
    %n = arith.index_cast %j : index to i64
    %f = arith.sitofp %n : i64 to f32
    affine.store %f, %a[%j] : memref<32xf32>
  } {loom.tag = "iota"}
  func.return
}


// -----

// The same element stored in every iteration, not as a sum (the last one wins).
// CHECK-LABEL: func.func @last
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'last': loop %j not vectorized: %r[0] is stored to the same element in every iteration of %j, not as a sum
func.func @last(%a: memref<32xf32>, %r: memref<1xf32>) {
  affine.for %j = 0 to 32 {
    %x = affine.load %a[%j] : memref<32xf32>
    affine.store %x, %r[0] : memref<1xf32>
  } {loom.tag = "last"}
  func.return
}


// -----

// A comparison that is not relu's: xDSL's arith.select takes no vector condition.
// CHECK-LABEL: func.func @compare
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'min': loop %j not vectorized: an arith.select on a condition that varies with %j: xDSL's arith.select takes no vector condition
func.func @compare(%a: memref<32xf32>, %b: memref<32xf32>, %c: memref<32xf32>) {
  affine.for %j = 0 to 32 {
    %x = affine.load %a[%j] : memref<32xf32>
    %y = affine.load %b[%j] : memref<32xf32>
    %lt = arith.cmpf olt, %x, %y : f32
    %m = arith.select %lt, %x, %y : f32
    affine.store %m, %c[%j] : memref<32xf32>
  } {loom.tag = "min"}
  func.return
}


// -----

// Reading and writing two views of one buffer.
// CHECK-LABEL: func.func @views
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-vectorize] nest 'copy': loop %j not vectorized: %m and %v are views of one buffer
func.func @views(%m: memref<40xf32>) {
  %v = memref.subview %m[8] [32] [1] : memref<40xf32> to memref<32xf32, strided<[1], offset: 8>>
  affine.for %j = 0 to 32 {
    %x = affine.load %m[%j] : memref<40xf32>
    affine.store %x, %v[%j] : memref<32xf32, strided<[1], offset: 8>>
  } {loom.tag = "copy"}
  func.return
}


// -----

// Fewer iterations than the width, and a step of 2 (an unrolled loop).
// CHECK-LABEL: func.func @short
// CHECK-NOT:   {{vector[.<]}}
// CHECK:       refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-vectorize] nest 'copy': loop %j not vectorized: it has 5 iterations, fewer than the width 8
// CHECK:       refuse.mlir:[[# @LINE + 6]]:3: remark: [loom-vectorize] nest 'copy': loop %j not vectorized: its step is 2, not 1
func.func @short(%a: memref<5xf32>, %b: memref<5xf32>) {
  affine.for %j = 0 to 5 {
    %x = affine.load %a[%j] : memref<5xf32>
    affine.store %x, %b[%j] : memref<5xf32>
  } {loom.tag = "copy"}
  affine.for %j = 0 to 10 step 2 {
    %x = affine.load %a[%j floordiv 2] : memref<5xf32>
    affine.store %x, %b[%j floordiv 2] : memref<5xf32>
  } {loom.tag = "copy"}
  func.return
}

// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-peel{sizes=6,16},loom-fuse-epilogue' --split-input-file | filecheck %s --check-prefix=PEELED

// The textbook nests (no schedule): the matmul's store in the k loop is the last write
// of C[i, j] when k is in its last iteration (k >= 36): there the stored value is
// relu(c + bias[j]), into %r; its load is the first read of C[i, j] when k is in its
// first iteration: there it reads a zero, and the zero fill goes. The add and relu
// nests, C and S are gone: %r is the only buffer written.
// CHECK-LABEL: func.func @dense(
// CHECK-SAME:      %r: memref<20x45xf32>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %k = 0 to 37 {
// CHECK:           %[[C:.*]] = affine.load %r[%i, %j] : memref<20x45xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[START:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[FIRST:.*]] = arith.cmpi eq, %k, %[[START]] : index
// CHECK-NEXT:      %[[C0:.*]] = arith.select %[[FIRST]], %[[Z]], %[[C]] : f32
// CHECK:           %[[ACC:.*]] = arith.addf %[[C0]], %{{.*}} : f32
// CHECK-NEXT:      %[[LAST:.*]] = arith.constant 36 : index
// CHECK-NEXT:      %[[GUARD:.*]] = arith.cmpi sge, %k, %[[LAST]] : index
// CHECK-NEXT:      %[[B:.*]] = affine.load %bias[%j] : memref<45xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpf ugt, %[[S]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[RELU:.*]] = arith.select %[[KEEP]], %[[S]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[V:.*]] = arith.select %[[GUARD]], %[[RELU]], %[[ACC]] : f32
// CHECK-NEXT:      affine.store %[[V]], %r[%i, %j] : memref<20x45xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
// CHECK-NOT:     loom.tag = "relu"
// CHECK:         func.return
// REMARK: fuse.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), relu (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %c for the last time, 1 store (1 in the last iteration of %k), into %r; %c and %s no longer written; the zero fill dropped: the loads that read it read zeros
func.func @dense(%x: tensor<20x37xf32>, %w: tensor<37x45xf32>, %bias: tensor<45xf32>) -> tensor<20x45xf32> {
  %c = loom.matmul %x, %w : (tensor<20x37xf32>, tensor<37x45xf32>) -> tensor<20x45xf32>
  %s = loom.add %c, %bias : (tensor<20x45xf32>, tensor<45xf32>) -> tensor<20x45xf32>
  %r = loom.relu %s : tensor<20x45xf32>
  func.return %r : tensor<20x45xf32>
}

// -----

// A batched matmul in f64, times a full-shape D, plus a bias per row (3x5x1, broadcast
// over the columns), then relu: four nests in one; each operand read at the element
// (or its broadcast) the matmul writes.
// CHECK-LABEL: func.func @batched(
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %b = 0 to 3 {
// CHECK:           affine.for %k = 0 to 7 {
// CHECK:             %[[ACC:.*]] = arith.addf %{{.*}}, %{{.*}} : f64
// CHECK:             %[[GUARD:.*]] = arith.cmpi sge, %k, %{{.*}} : index
// CHECK-NEXT:        %[[D:.*]] = affine.load %d[%b, %i, %j] : memref<3x5x6xf64>
// CHECK-NEXT:        %[[M:.*]] = arith.mulf %[[ACC]], %[[D]] : f64
// CHECK-NEXT:        %[[E:.*]] = affine.load %e[%b, %i, 0] : memref<3x5x1xf64>
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[M]], %[[E]] : f64
// CHECK:             arith.select %[[GUARD]], %{{.*}}, %[[ACC]] : f64
// CHECK-NEXT:        affine.store %{{.*}}, %r[%b, %i, %j] : memref<3x5x6xf64>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: fuse.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused mul (line [[# @LINE + 3]]), add (line [[# @LINE + 4]]), relu (line [[# @LINE + 5]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %c for the last time, 1 store (1 in the last iteration of %k), into %r; %c and %m and %s no longer written; the zero fill dropped: the loads that read it read zeros
func.func @batched(%a: tensor<3x5x7xf64>, %bm: tensor<3x7x6xf64>, %d: tensor<3x5x6xf64>, %e: tensor<3x5x1xf64>) -> tensor<3x5x6xf64> {
  %c = loom.matmul %a, %bm : (tensor<3x5x7xf64>, tensor<3x7x6xf64>) -> tensor<3x5x6xf64>
  %m = loom.mul %c, %d : (tensor<3x5x6xf64>, tensor<3x5x6xf64>) -> tensor<3x5x6xf64>
  %s = loom.add %m, %e : (tensor<3x5x6xf64>, tensor<3x5x1xf64>) -> tensor<3x5x6xf64>
  %r = loom.relu %s : tensor<3x5x6xf64>
  func.return %r : tensor<3x5x6xf64>
}

// -----

// An epilogue that reads C twice (c * c): both reads are the value the matmul stores.
// K = 1: the k loop has one iteration, every store is the last one and every load the
// first: no guard, no load of C at all (it starts from a zero), no zero fill.
// CHECK-LABEL: func.func @square(
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %k = 0 to 1 {
// CHECK-NOT:       affine.load %r
// CHECK:           %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:           %[[ACC:.*]] = arith.addf %[[Z]], %{{.*}} : f32
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[ACC]], %[[ACC]] : f32
// CHECK-NEXT:      affine.store %[[SQ]], %r[%i, %j] : memref<4x4xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: remark: [loom-fuse-epilogue] fused mul (line [[# @LINE + 3]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %c for the last time, 1 store (1 unconditionally), into %r; %c no longer written; the zero fill dropped: the loads that read it read zeros
func.func @square(%x: tensor<4x1xf32>, %w: tensor<1x4xf32>) -> tensor<4x4xf32> {
  %c = loom.matmul %x, %w : (tensor<4x1xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  %r = loom.mul %c, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// -----

// No epilogue: the zero fill goes all the same. The matmul's load of C reads a zero in
// the first iteration of k, and C, the function's result, is written by the matmul only.
// With every nest peeled (the fill too: a main nest and copies of it, all written
// before the matmul's), all of the fill's nests go.
// PEELED-LABEL: func.func @plain(
// PEELED-NOT:     loom.tag = "matmul.init"
// PEELED:         } {loom.tag = "matmul"}
// PEELED-NOT:     loom.tag = "matmul.init"
// PEELED:         func.return
// CHECK-LABEL: func.func @plain(
// CHECK-SAME:      %c: memref<20x45xf32>)
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %k = 0 to 37 {
// CHECK:           %[[C:.*]] = affine.load %c[%i, %j] : memref<20x45xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[START:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[FIRST:.*]] = arith.cmpi eq, %k, %[[START]] : index
// CHECK-NEXT:      %[[C0:.*]] = arith.select %[[FIRST]], %[[Z]], %[[C]] : f32
// CHECK:           %[[ACC:.*]] = arith.addf %[[C0]], %{{.*}} : f32
// CHECK-NEXT:      affine.store %[[ACC]], %c[%i, %j] : memref<20x45xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: fuse.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] the zero fill of %c dropped, with no epilogue to fuse: the 'matmul' nest (line [[# @LINE + 2]]) reads a zero where it read the fill, and writes %c once
func.func @plain(%x: tensor<20x37xf32>, %w: tensor<37x45xf32>) -> tensor<20x45xf32> {
  %c = loom.matmul %x, %w : (tensor<20x37xf32>, tensor<37x45xf32>) -> tensor<20x45xf32>
  func.return %c : tensor<20x45xf32>
}

// -----

// An epilogue refused (C is also returned) leaves the matmul alone, but not its zero
// fill: the matmul writes every element of C, and the add only reads it after.
// CHECK-LABEL: func.func @returned(
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    affine.for
// CHECK:         } {loom.tag = "add"}
// REMARK: fuse.mlir:[[# @LINE + 4]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 4]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): %c is a result of the function: it must still be written
// REMARK: fuse.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] the zero fill of %c dropped, with no epilogue to fuse: the 'matmul' nest (line [[# @LINE + 2]]) reads a zero where it read the fill, and writes %c once
func.func @returned(%x: tensor<4x5xf32>, %w: tensor<5x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %c = loom.matmul %x, %w : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %s = loom.add %c, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  func.return %c, %s : tensor<4x6xf32>, tensor<4x6xf32>
}

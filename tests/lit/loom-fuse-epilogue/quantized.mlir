// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A quantized layer: i32 sums + bias, dequantized (f32), requantized to ui8. The epilogue
// changes the element type, so the ui8 result cannot hold the partial sums: C (%acc) keeps
// them where the nest reads them back (the textbook k loop: every iteration), and the
// epilogue and the result's own store run under the guard of the last k iteration
// (scf.if: C's store stays beside it). %sum and %y are no longer written.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: %q: memref<4x8xui8>
// CHECK-NOT:  %sum = memref.alloc
// CHECK:      %acc = memref.alloc() : memref<4x8xi32>
// CHECK-NOT:  %y = memref.alloc
// CHECK:      affine.for %k = 0 to 6 {
// CHECK:        %[[SUM:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:        %[[LAST:.*]] = arith.cmpi sge, %k, %{{.*}} : index
// CHECK-NEXT:   scf.if %[[LAST]] {
// CHECK-NEXT:     %[[BIAS:.*]] = affine.load %bias[%j] : memref<8xi32>
// CHECK-NEXT:     %[[S:.*]] = arith.addi %[[SUM]], %[[BIAS]] : i32
// CHECK:          %[[F:.*]] = arith_ext.sitofp %{{.*}} : i32 to f32
// CHECK:          %[[OS:.*]] = affine.load %os[] : memref<f32>
// CHECK:          %[[I:.*]] = arith_ext.fptosi %{{.*}} : f32 to i32
// CHECK-NEXT:     %[[U:.*]] = arith_ext.trunci %[[I]] : i32 to ui8
// CHECK-NEXT:     affine.store %[[U]], %q[%i, %j] : memref<4x8xui8>
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.store %[[SUM]], %acc[%i, %j] : memref<4x8xi32>
// CHECK:      } {loom.tag = "matmul"}
// CHECK-NOT:  loom.tag = "dequantize"
// CHECK-NOT:  loom.tag = "quantize"
// REMARK: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 4]]), dequantize (line [[# @LINE + 5]]), quantize (line [[# @LINE + 6]]) into the 'matmul' nest (line [[# @LINE + 3]]): applied where it writes each element of %acc for the last time, 1 store (1 in the last iteration of %k), into %q; %sum and %y no longer written; %acc still holds the partial sums, which the nest reads back before its last writes (i32; %q is ui8); the zero fill dropped: the loads that read it read zeros
func.func @layer(%x: tensor<4x6xui8>, %w: tensor<6x8xi8>, %bias: tensor<8xi32>, %scale: tensor<8xf32>,
                 %zero: tensor<8xi32>, %os: tensor<f32>, %oz: tensor<i32>) -> tensor<4x8xui8> {
  %acc = loom.matmul %x, %w : (tensor<4x6xui8>, tensor<6x8xi8>) -> tensor<4x8xi32>
  %sum = loom.add %acc, %bias : (tensor<4x8xi32>, tensor<8xi32>) -> tensor<4x8xi32>
  %y = loom.dequantize %sum, %scale, %zero {axis = 1 : i64} : (tensor<4x8xi32>, tensor<8xf32>, tensor<8xi32>) -> tensor<4x8xf32>
  %q = loom.quantize %y, %os, %oz : (tensor<4x8xf32>, tensor<f32>, tensor<i32>) -> tensor<4x8xui8>
  func.return %q : tensor<4x8xui8>
}

// -----

// K = 1: the matmul's one store per element is its last write, with no guard: the result
// stores the epilogue's value there, and C, never read back, is not written at all.
// CHECK-LABEL: func.func @one_k
// CHECK-NOT:  memref<2x8xi32>
// CHECK:      %[[U:.*]] = arith_ext.trunci %{{.*}} : i32 to ui8
// CHECK-NEXT: affine.store %[[U]], %q[%i, %j] : memref<2x8xui8>
// REMARK: remark: [loom-fuse-epilogue] fused dequantize (line [[# @LINE + 4]]), quantize (line [[# @LINE + 5]]) into the 'matmul' nest (line [[# @LINE + 3]]): applied where it writes each element of %acc for the last time, 1 store (1 unconditionally), into %q; %acc and %y no longer written; the zero fill dropped: the loads that read it read zeros
func.func @one_k(%x: tensor<2x1xui8>, %w: tensor<1x8xi8>, %scale: tensor<8xf32>, %zero: tensor<8xi32>,
                 %os: tensor<f32>, %oz: tensor<i32>) -> tensor<2x8xui8> {
  %acc = loom.matmul %x, %w : (tensor<2x1xui8>, tensor<1x8xi8>) -> tensor<2x8xi32>
  %y = loom.dequantize %acc, %scale, %zero {axis = 1 : i64} : (tensor<2x8xi32>, tensor<8xf32>, tensor<8xi32>) -> tensor<2x8xf32>
  %q = loom.quantize %y, %os, %oz : (tensor<2x8xf32>, tensor<f32>, tensor<i32>) -> tensor<2x8xui8>
  func.return %q : tensor<2x8xui8>
}

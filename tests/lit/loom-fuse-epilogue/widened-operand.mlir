// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A bf16 residual widened to f32 and added to a matmul's result (a residual block's last
// conv, in a bf16 model whose activations are stored in bf16): the cast nest wrote a
// temporary after the producer, which the epilogue could not read. The add reads the bf16
// residual and widens it itself; the cast nest and its temporary go, and the add and the
// relu fuse into the matmul's store.
// CHECK-LABEL: func.func @residual(
// CHECK-NOT:     loom.tag = "cast"
// CHECK:         %[[R:.*]] = affine.load %r[%{{.*}}, %{{.*}}] : memref<8x16xbf16>
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[R]] : bf16 to f32
// CHECK:         arith.addf %{{.*}}, %[[W]] : f32
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
// CHECK-NOT:     loom.tag = "relu"
// REMARK: widened-operand.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 5]]) reads %r and widens it to f32 itself: the cast nest before it and its temporary dropped
// REMARK: widened-operand.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 4]]), relu (line [[# @LINE + 5]]) into the 'matmul' nest
func.func @residual(%a: tensor<8x4xbf16>, %b: tensor<4x16xbf16>, %r: tensor<8x16xbf16>) -> tensor<8x16xf32> {
  %y = loom.matmul %a, %b : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xf32>
  %w = loom.cast %r : tensor<8x16xbf16> -> tensor<8x16xf32>
  %s = loom.add %y, %w : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %o = loom.relu %s : tensor<8x16xf32> -> tensor<8x16xf32>
  return %o : tensor<8x16xf32>
}

// -----

// The widened temporary read by two nests (or a result of the function) stays: each
// would have to widen it, and it must be written.
// CHECK-LABEL: func.func @twice(
// CHECK:         } {loom.tag = "cast"}
// REMARK: widened-operand.mlir:[[# @LINE + 4]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 4]]) not fused into the 'matmul' nest (line [[# @LINE + 2]]): its operand %w is written by nest 'cast' (line [[# @LINE + 3]]) after the producer
func.func @twice(%a: tensor<8x4xbf16>, %b: tensor<4x16xbf16>, %r: tensor<8x16xbf16>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %y = loom.matmul %a, %b : (tensor<8x4xbf16>, tensor<4x16xbf16>) -> tensor<8x16xf32>
  %w = loom.cast %r : tensor<8x16xbf16> -> tensor<8x16xf32>
  %s = loom.add %y, %w : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %s, %w : tensor<8x16xf32>, tensor<8x16xf32>
}

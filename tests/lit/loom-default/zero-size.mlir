// RUN: env LOOM_TARGET=threads=1 loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET=threads=1 loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Zero-size dimensions: a nest with a loop of no iterations runs nothing, so loom-default
// leaves it as it is, with a remark (the cost model has nothing to plan for it). The
// loops come out as convert-loom-to-affine made them, on any target.

// K = 0: the zero fill of C is scheduled (vectorized) as usual; the matmul nest, whose k
// loop runs 0 times, is left alone.
// CHECK-LABEL: func.func @k0
// CHECK:      affine.for %i = 0 to 4 {
// CHECK-NEXT:   affine.for %j = 0 to 5 {
// CHECK-NEXT:     affine.for %k = 0 to 0 {
// CHECK:      } {loom.tag = "matmul"}
// REMARK: zero-size.mlir:[[# @LINE + 2]]:3: remark: [loom-default] nest 'matmul' left as it is: loop %k has no iterations (a zero-size dimension), so the nest runs nothing
func.func @k0(%a: tensor<4x0xf32>, %b: tensor<0x5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %a, %b : (tensor<4x0xf32>, tensor<0x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

// M = 0: both nests (the zero fill and the matmul) are empty.
// CHECK-LABEL: func.func @m0
// CHECK:      affine.for %{{.*}} = 0 to 0 {
// CHECK:      } {loom.tag = "matmul.init"}
// CHECK-NEXT: affine.for %i = 0 to 0 {
// CHECK-NEXT:   affine.for %j = 0 to 5 {
// CHECK-NEXT:     affine.for %k = 0 to 3 {
// CHECK:      } {loom.tag = "matmul"}
// REMARK: zero-size.mlir:[[# @LINE + 3]]:3: remark: [loom-default] nest 'matmul.init' left as it is: one of its loops has no iterations (a zero-size dimension), so the nest runs nothing
// REMARK: zero-size.mlir:[[# @LINE + 2]]:3: remark: [loom-default] nest 'matmul' left as it is: loop %i has no iterations (a zero-size dimension), so the nest runs nothing
func.func @m0(%a: tensor<0x3xf32>, %b: tensor<3x5xf32>) -> tensor<0x5xf32> {
  %c = loom.matmul %a, %b : (tensor<0x3xf32>, tensor<3x5xf32>) -> tensor<0x5xf32>
  func.return %c : tensor<0x5xf32>
}

// -----

// A conv2d without input channels: the reduction is empty, the output zeros.
// CHECK-LABEL: func.func @c0
// CHECK:      affine.for %c = 0 to 0 {
// CHECK:      } {loom.tag = "conv2d"}
// REMARK: zero-size.mlir:[[# @LINE + 2]]:3: remark: [loom-default] nest 'conv2d' left as it is: loop %c has no iterations (a zero-size dimension), so the nest runs nothing
func.func @c0(%x: tensor<1x0x8x8xf32>, %w: tensor<4x0x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = loom.conv2d %x, %w : (tensor<1x0x8x8xf32>, tensor<4x0x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// RUN: not loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-grouped-conv{op=conv2d}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-grouped-conv' --split-input-file 2>&1 | filecheck %s --check-prefix=ANY
// RUN: not loom-opt %s -p 'loom-grouped-conv{width=3 tile=-1}' 2>&1 | filecheck %s --check-prefix=OPTIONS

// OPTIONS: error: loom-grouped-conv: option 'width' must be 0 (the target's) or a power of two, got 3; option 'tile' must be 0 (the default, 8) or more, got -1

// A dense convolution is loom-direct-conv's or loom-im2col's.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-grouped-conv: cannot rewrite nest 'conv2d': it is not grouped (groups = 1: loom-direct-conv or loom-im2col schedule it)
// ANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-grouped-conv: no grouped conv2d nest to rewrite: nest 'conv2d': it is not grouped
func.func @dense(%x: tensor<1x6x6x4xf32>, %w: tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x6x6x4xf32>, tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

// NCHW: the channels are not contiguous.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-grouped-conv: cannot rewrite nest 'conv2d': it is NCHW: its channels are not contiguous
// ANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-grouped-conv: no grouped conv2d nest to rewrite: nest 'conv2d': it is NCHW
func.func @nchw(%x: tensor<1x4x6x6xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {groups = 4 : i64} : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

// Not a conv2d nest: a matmul's.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-grouped-conv: option 'op' is 'conv2d', but no loop nest is tagged so
// ANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-grouped-conv: no grouped conv2d nest to rewrite: no nest has the 7 loops
func.func @matmul(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %c = loom.matmul %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %c : tensor<4x4xf32>
}

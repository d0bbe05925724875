// RUN: loom-opt %s -p 'loom-winograd{tile=2}' --split-input-file --remarks 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-winograd{tile=3}' 2>&1 | filecheck %s --check-prefix=TILE
// RUN: not loom-opt %s -p 'loom-bufferize,loom-winograd' --split-input-file 2>&1 | filecheck %s --check-prefix=BUFFERIZED

// What loom-winograd leaves as it is (a remark says why), and what it refuses.

// TILE: error: loom-winograd: tile must be 0 (the cost model's choice) or the output tile's side, 2 or 4, got 3
// BUFFERIZED: refuse.mlir:[[# @LINE + 3]]:3: error: loom-winograd runs on tensors, before loom-bufferize: this conv2d is already bufferized
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: NCHW: the transforms vectorize along the channels, innermost only in NHWC
func.func @nchw(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %y = loom.conv2d %x, %w {padding = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: a 5x5 window: Winograd F(m x m, 3 x 3) is for 3x3 windows
func.func @five(%x: tensor<1x8x8x4xf32>, %w: tensor<5x5x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x4xf32>, tensor<5x5x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: strides [2, 2], dilations [1, 1]: Winograd's tiles need stride 1, dilation 1
func.func @strided(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", strides = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: its filter is in panels (packed for the direct convolution), not HWCF
func.func @panels(%x: tensor<1x8x8x4xf32>, %w: tensor<2x3x3x4x8xf32>) -> tensor<1x8x8x16xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<2x3x3x4x8xf32>) -> tensor<1x8x8x16xf32>
  return %y : tensor<1x8x8x16xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: strides [1, 1], dilations [2, 2]: Winograd's tiles need stride 1, dilation 1
func.func @dilated(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", dilations = array<i64: 2, 2>} : (tensor<1x8x8x4xf32>, tensor<3x3x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: bf16 inputs: the transformed tiles would be rounded to them (only f32 and f64 are transformed)
func.func @bf16(%x: tensor<1x8x8x4xbf16>, %w: tensor<3x3x4x4xbf16>) -> tensor<1x8x8x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x8x8x4xbf16>, tensor<3x3x4x4xbf16>) -> tensor<1x8x8x4xf32>
  return %y : tensor<1x8x8x4xf32>
}

// RUN: loom-opt %s -p 'loom-winograd{tile=2}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-winograd{tile=4}' --split-input-file | filecheck %s --check-prefix=F4
// RUN: loom-opt %s -p loom-winograd --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=AUTO

// A 3x3 stride-1 NHWC conv2d becomes the filter transform (16 = 4x4 products of F(2x2)),
// the input transform (49 = 7x7 tiles of 2x2 over the 14x14 output), their batched
// matmul over the channels and the output transform; the relu after it reads the result.
// CHECK-LABEL: func.func @layer
// CHECK-NEXT:    %y_u = loom.winograd_filter %w {tile = 2 : i64} : tensor<3x3x16x32xf32> -> tensor<16x16x32xf32>
// CHECK-NEXT:    %y_v = loom.winograd_input %x {tile = 2 : i64, padding = array<i64: 1, 1>} : tensor<1x14x14x16xf32> -> tensor<16x49x16xf32>
// CHECK-NEXT:    %y_m = loom.matmul %y_v, %y_u : (tensor<16x49x16xf32>, tensor<16x16x32xf32>) -> tensor<16x49x32xf32>
// CHECK-NEXT:    %y = loom.winograd_output %y_m {tile = 2 : i64} : tensor<16x49x32xf32> -> tensor<1x14x14x32xf32>
// CHECK-NEXT:    %r = loom.relu %y : tensor<1x14x14x32xf32>
// F(4x4): 36 products, 4x4 tiles of 4x4 over 14x14 (the last row and column of tiles
// overhang it by 2).
// F4-LABEL: func.func @layer
// F4-NEXT:    %y_u = loom.winograd_filter %w {tile = 4 : i64} : tensor<3x3x16x32xf32> -> tensor<36x16x32xf32>
// F4-NEXT:    %y_v = loom.winograd_input %x {tile = 4 : i64, padding = array<i64: 1, 1>} : tensor<1x14x14x16xf32> -> tensor<36x16x16xf32>
// F4-NEXT:    %y_m = loom.matmul %y_v, %y_u : (tensor<36x16x16xf32>, tensor<36x16x32xf32>) -> tensor<36x16x32xf32>
// F4-NEXT:    %y = loom.winograd_output %y_m {tile = 4 : i64} : tensor<36x16x32xf32> -> tensor<1x14x14x32xf32>
// Without a tile the cost model chooses, and says why: F(2x2) here, F(4x4) for the large
// layer, the direct convolution for the tiny one (its filter transform costs more than
// the multiplications it saves).
// AUTO: winograd.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] F(2x2, 3x3): estimated time in fmas at the peak: direct 0.972M, F(2x2) 0.874M, F(4x4) 0.953M
func.func @layer(%x: tensor<1x14x14x16xf32>, %w: tensor<3x3x16x32xf32>, %b: tensor<32xf32>) -> tensor<1x14x14x32xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x14x14x16xf32>, tensor<3x3x16x32xf32>) -> tensor<1x14x14x32xf32>
  %r = loom.relu %y : tensor<1x14x14x32xf32>
  return %r : tensor<1x14x14x32xf32>
}

// -----

// AUTO: winograd.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] F(4x4, 3x3): estimated time in fmas at the peak: direct 116M, F(2x2) 66.9M, F(4x4) 40.4M
func.func @big(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x56x56x64xf32>, tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32>
  return %y : tensor<1x56x56x64xf32>
}

// -----

// AUTO: winograd.mlir:[[# @LINE + 2]]:3: remark: [loom-winograd] kept the direct convolution: estimated time in fmas at the peak: direct 0.00112M, F(2x2) 0.00516M, F(4x4) 0.00803M
func.func @tiny(%x: tensor<1x4x4x2xf32>, %w: tensor<3x3x2x2xf32>) -> tensor<1x4x4x2xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x3x2x2xf32>) -> tensor<1x4x4x2xf32>
  return %y : tensor<1x4x4x2xf32>
}

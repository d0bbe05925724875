// RUN: loom-opt %s | loom-opt | filecheck %s
// The textual forms users write round-trip through the parser and printer.

// CHECK-LABEL: func.func @matmul
// CHECK: %c = loom.matmul %a, %b : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
func.func @matmul(%a: tensor<64x32xf32>, %b: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %c = loom.matmul %a, %b : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  func.return %c : tensor<64x16xf32>
}

// CHECK-LABEL: func.func @batched
// CHECK: loom.matmul %a, %b : (tensor<3x8x4xf64>, tensor<3x4x5xf64>) -> tensor<3x8x5xf64>
func.func @batched(%a: tensor<3x8x4xf64>, %b: tensor<3x4x5xf64>) -> tensor<3x8x5xf64> {
  %c = loom.matmul %a, %b : (tensor<3x8x4xf64>, tensor<3x4x5xf64>) -> tensor<3x8x5xf64>
  func.return %c : tensor<3x8x5xf64>
}

// CHECK-LABEL: func.func @conv
// CHECK: loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x32x32xf32>, tensor<8x3x7x7xf32>) -> tensor<1x8x16x16xf32>
// CHECK: loom.conv2d %x, %w : (tensor<1x3x32x32xf32>, tensor<8x3x7x7xf32>) -> tensor<1x8x26x26xf32>
func.func @conv(%x: tensor<1x3x32x32xf32>, %w: tensor<8x3x7x7xf32>) -> (tensor<1x8x16x16xf32>, tensor<1x8x26x26xf32>) {
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x32x32xf32>, tensor<8x3x7x7xf32>) -> tensor<1x8x16x16xf32>
  %z = loom.conv2d %x, %w : (tensor<1x3x32x32xf32>, tensor<8x3x7x7xf32>) -> tensor<1x8x26x26xf32>
  func.return %y, %z : tensor<1x8x16x16xf32>, tensor<1x8x26x26xf32>
}

// NHWC input, HWCF filter (R x S x C x F), NHWF result.
// CHECK-LABEL: func.func @conv_nhwc
// CHECK: loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x32x32x3xf32>, tensor<3x3x3x8xf32>) -> tensor<1x32x32x8xf32>
func.func @conv_nhwc(%x: tensor<1x32x32x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<1x32x32x8xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x32x32x3xf32>, tensor<3x3x3x8xf32>) -> tensor<1x32x32x8xf32>
  func.return %y : tensor<1x32x32x8xf32>
}

// Grouped (torch's groups=): the filter holds C/groups input channels; depthwise with
// groups = C = F.
// CHECK-LABEL: func.func @conv_grouped
// CHECK: loom.conv2d %x, %w {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK: loom.conv2d %xd, %wd {layout = "nhwc", padding = array<i64: 1, 1>, groups = 16 : i64} : (tensor<1x8x8x16xf32>, tensor<3x3x1x16xf32>) -> tensor<1x8x8x16xf32>
func.func @conv_grouped(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %xd: tensor<1x8x8x16xf32>, %wd: tensor<3x3x1x16xf32>) -> (tensor<1x6x6x6xf32>, tensor<1x8x8x16xf32>) {
  %y = loom.conv2d %x, %w {groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  %z = loom.conv2d %xd, %wd {layout = "nhwc", padding = array<i64: 1, 1>, groups = 16 : i64} : (tensor<1x8x8x16xf32>, tensor<3x3x1x16xf32>) -> tensor<1x8x8x16xf32>
  func.return %y, %z : tensor<1x6x6x6xf32>, tensor<1x8x8x16xf32>
}

// NHWC with the filter in panels of NR output channels: P x R x S x C x NR, F = P*NR.
// CHECK-LABEL: func.func @conv_panels
// CHECK: loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x32x32x3xf32>, tensor<2x3x3x3x16xf32>) -> tensor<1x32x32x32xf32>
func.func @conv_panels(%x: tensor<1x32x32x3xf32>, %w: tensor<2x3x3x3x16xf32>) -> tensor<1x32x32x32xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x32x32x3xf32>, tensor<2x3x3x3x16xf32>) -> tensor<1x32x32x32xf32>
  func.return %y : tensor<1x32x32x32xf32>
}

// A bf16 filter in panels of pairs of channels: P x R x S x C/2 x NR x 2 (int8: quads).
// CHECK-LABEL: func.func @conv_groups
// CHECK: loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x8xbf16>, tensor<2x3x3x4x16x2xbf16>) -> tensor<1x6x6x32xf32>
func.func @conv_groups(%x: tensor<1x8x8x8xbf16>, %w: tensor<2x3x3x4x16x2xbf16>) -> tensor<1x6x6x32xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x8xbf16>, tensor<2x3x3x4x16x2xbf16>) -> tensor<1x6x6x32xf32>
  func.return %y : tensor<1x6x6x32xf32>
}

// CHECK-LABEL: func.func @epilogue
// CHECK: %s = loom.add %c, %bias : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK: %p = loom.mul %s, %c : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
// CHECK: %r = loom.relu %p : tensor<4x5xf32>
func.func @epilogue(%c: tensor<4x5xf32>, %bias: tensor<5xf32>) -> tensor<4x5xf32> {
  %s = loom.add %c, %bias : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %p = loom.mul %s, %c : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = loom.relu %p : tensor<4x5xf32>
  func.return %r : tensor<4x5xf32>
}

// clamp's bounds are f64 attributes (hardtanh, ReLU6, numpy.clip).
// CHECK-LABEL: func.func @clamp
// CHECK: %r = loom.clamp %x {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : tensor<4x5xf32>
// CHECK: loom.clamp ins(%m : memref<8xf64>) outs(%n : memref<8xf64>) {min = -1.500000e+00 : f64, max = 2.500000e-01 : f64}
func.func @clamp(%x: tensor<4x5xf32>, %m: memref<8xf64>, %n: memref<8xf64>) -> tensor<4x5xf32> {
  %r = loom.clamp %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4x5xf32>
  loom.clamp ins(%m : memref<8xf64>) outs(%n : memref<8xf64>) {min = -1.5 : f64, max = 0.25 : f64}
  func.return %r : tensor<4x5xf32>
}

// CHECK-LABEL: func.func @bufferized
// CHECK: loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
func.func @bufferized(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  func.return
}

// CHECK-LABEL: func.func @prefetch
// CHECK: loom.prefetch %c[%i, %j], write, locality<3>, data : memref<8x16xf32>
// CHECK: loom.prefetch %c[%j, %i], read, locality<0>, data : memref<8x16xf32>
// CHECK: loom.prefetch %v[], read, locality<2>, data : memref<f32>
func.func @prefetch(%c: memref<8x16xf32>, %v: memref<f32>, %i: index, %j: index) {
  loom.prefetch %c[%i, %j], write, locality<3>, data : memref<8x16xf32>
  loom.prefetch %c[%j, %i], read, locality<0>, data : memref<8x16xf32>
  loom.prefetch %v[], read, locality<2>, data : memref<f32>
  func.return
}

// Elementwise ops may write over an input of the output's shape and layout (numpy's
// `np.add(a, b, out=a)`): each element is read before it is written.
// CHECK-LABEL: func.func @in_place
// CHECK: loom.add ins(%a, %b : memref<4x5xf32>, memref<5xf32>) outs(%a : memref<4x5xf32>)
// CHECK: loom.mul ins(%a, %a : memref<4x5xf32>, memref<4x5xf32>) outs(%a : memref<4x5xf32>)
// CHECK: loom.relu ins(%v : memref<2x5xf32, strided<[5, 1], offset: 10>>) outs(%w : memref<2x5xf32, strided<[5, 1], offset: 10>>)
func.func @in_place(%a: memref<4x5xf32>, %b: memref<5xf32>) {
  loom.add ins(%a, %b : memref<4x5xf32>, memref<5xf32>) outs(%a : memref<4x5xf32>)
  loom.mul ins(%a, %a : memref<4x5xf32>, memref<4x5xf32>) outs(%a : memref<4x5xf32>)
  %v = memref.subview %a[2, 0] [2, 5] [1, 1] : memref<4x5xf32> to memref<2x5xf32, strided<[5, 1], offset: 10>>
  %w = memref.subview %a[2, 0] [2, 5] [1, 1] : memref<4x5xf32> to memref<2x5xf32, strided<[5, 1], offset: 10>>
  loom.relu ins(%v : memref<2x5xf32, strided<[5, 1], offset: 10>>) outs(%w : memref<2x5xf32, strided<[5, 1], offset: 10>>)
  func.return
}

// CHECK-LABEL: func.func @pools
// CHECK: %y = loom.max_pool2d %x {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc"} : tensor<1x112x112x64xf32> -> tensor<1x56x56x64xf32>
// CHECK: %a = loom.avg_pool2d %y {window = array<i64: 2, 2>, layout = "nhwc", count_include_pad = false} : tensor<1x56x56x64xf32> -> tensor<1x28x28x64xf32>
// CHECK: %m = loom.mean %y {axes = array<i64: 1, 2>} : tensor<1x56x56x64xf32> -> tensor<1x1x1x64xf32>
func.func @pools(%x: tensor<1x112x112x64xf32>) -> (tensor<1x1x1x64xf32>, tensor<1x28x28x64xf32>) {
  %y = loom.max_pool2d %x {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc"} : tensor<1x112x112x64xf32> -> tensor<1x56x56x64xf32>
  %a = loom.avg_pool2d %y {window = array<i64: 2, 2>, layout = "nhwc", count_include_pad = false} : tensor<1x56x56x64xf32> -> tensor<1x28x28x64xf32>
  %m = loom.mean %y {axes = array<i64: 1, 2>} : tensor<1x56x56x64xf32> -> tensor<1x1x1x64xf32>
  func.return %m, %a : tensor<1x1x1x64xf32>, tensor<1x28x28x64xf32>
}

// CHECK-LABEL: func.func @winograd
// CHECK: %u = loom.winograd_filter %w {tile = 4 : i64} : tensor<3x3x8x16xf32> -> tensor<36x8x16xf32>
// CHECK: %v = loom.winograd_input %x {tile = 4 : i64, padding = array<i64: 1, 1>} : tensor<2x9x9x8xf32> -> tensor<36x18x8xf32>
// CHECK: %m = loom.matmul %v, %u : (tensor<36x18x8xf32>, tensor<36x8x16xf32>) -> tensor<36x18x16xf32>
// CHECK: %y = loom.winograd_output %m {tile = 4 : i64} : tensor<36x18x16xf32> -> tensor<2x9x9x16xf32>
func.func @winograd(%x: tensor<2x9x9x8xf32>, %w: tensor<3x3x8x16xf32>) -> tensor<2x9x9x16xf32> {
  %u = loom.winograd_filter %w {tile = 4} : tensor<3x3x8x16xf32> -> tensor<36x8x16xf32>
  %v = loom.winograd_input %x {tile = 4, padding = array<i64: 1, 1>} : tensor<2x9x9x8xf32> -> tensor<36x18x8xf32>
  %m = loom.matmul %v, %u : (tensor<36x18x8xf32>, tensor<36x8x16xf32>) -> tensor<36x18x16xf32>
  %y = loom.winograd_output %m {tile = 4} : tensor<36x18x16xf32> -> tensor<2x9x9x16xf32>
  func.return %y : tensor<2x9x9x16xf32>
}

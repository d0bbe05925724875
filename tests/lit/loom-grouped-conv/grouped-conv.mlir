// RUN: env LOOM_TARGET="cpu=test,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-grouped-conv' --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-grouped-conv' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-grouped-conv{tile=4}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=WIDE

// Depthwise 3x3, padding 1, 16 channels on 10x10: the outputs whose windows lie inside X
// (rows and columns 1 to 8) read X in place, in one tile of 8 columns x 8 channels, at
// channel f + c with c gone (one channel per group); the top and bottom rows read staged
// boxes of the padded input (3 rows x 12 columns, zeroed, X's part copied in), in a tile of
// 8 columns and one of the 2 left; the left and right columns boxes of 10 rows x 3
// columns; each box freed after the nests.
// CHECK-LABEL: func.func @depthwise
// CHECK:       affine.for %oh = 0 to 8 {
// CHECK-NEXT:    affine.for %owt = 0 to 1 {
// CHECK-NEXT:      affine.for %ft = 0 to 2 {
// CHECK-NEXT:        affine.for %r = 0 to 3 {
// CHECK-NEXT:          affine.for %s = 0 to 3 {
// CHECK-NEXT:            affine.for %t = 0 to 8 {
// CHECK-NEXT:              affine.for %fv = 0 to 8 {
// CHECK-NEXT:                %{{.*}} = affine.load %x[%n, %oh + %r, %owt * 8 + %t + %s, %ft * 8 + %fv] : memref<1x10x10x16xf32>
// CHECK-NEXT:                %{{.*}} = affine.load %w[%r, %s, 0, %ft * 8 + %fv] : memref<3x3x1x16xf32>
// CHECK-NEXT:                %{{.*}} = affine.load %y[%n, %oh + 1, %owt * 8 + %t + 1, %ft * 8 + %fv] : memref<1x10x10x16xf32>
// CHECK:                     affine.store %{{.*}}, %y[%n, %oh + 1, %owt * 8 + %t + 1, %ft * 8 + %fv] : memref<1x10x10x16xf32>
// CHECK:       } {loom.tag = "grouped_conv"}
// CHECK-NEXT:  %x_top = memref.alloc() {alignment = 64 : i64} : memref<1x3x12x16xf32>
// CHECK:       } {loom.tag = "grouped.pad"}
// CHECK:         affine.for %h = 0 to 2 {
// CHECK-NEXT:      affine.for %w_1 = 0 to 10 {
// CHECK-NEXT:        affine.for %c = 0 to 16 {
// CHECK-NEXT:          %{{.*}} = affine.load %x[%n{{.*}}, %h, %w_1, %c] : memref<1x10x10x16xf32>
// CHECK-NEXT:          affine.store %{{.*}}, %x_top[%n{{.*}}, %h + 1, %w_1 + 1, %c] : memref<1x3x12x16xf32>
// CHECK:       } {loom.tag = "grouped.pad"}
// CHECK:       affine.load %x_top[%n{{.*}}, %oh{{.*}} + %r{{.*}}, %owt{{.*}} * 8 + %t{{.*}} + %s{{.*}}, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x3x12x16xf32>
// CHECK:       affine.store %{{.*}}, %y[%n{{.*}}, %oh{{.*}}, %owt{{.*}} * 8 + %t{{.*}}, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x10x10x16xf32>
// CHECK:       affine.for %t{{.*}} = 0 to 2 {
// CHECK:       affine.load %x_top[%n{{.*}}, %oh{{.*}} + %r{{.*}}, %owt{{.*}} * 2 + %t{{.*}} + %s{{.*}} + 8, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x3x12x16xf32>
// CHECK:       %x_bottom = memref.alloc() {alignment = 64 : i64} : memref<1x3x12x16xf32>
// CHECK:       affine.store %{{.*}}, %y[%n{{.*}}, %oh{{.*}} + 9, %owt{{.*}} * 8 + %t{{.*}}, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x10x10x16xf32>
// CHECK:       %x_left = memref.alloc() {alignment = 64 : i64} : memref<1x10x3x16xf32>
// CHECK:       affine.load %x_left[%n{{.*}}, %oh{{.*}} + %r{{.*}}, %owt{{.*}} + %s{{.*}}, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x10x3x16xf32>
// CHECK:       %x_right = memref.alloc() {alignment = 64 : i64} : memref<1x10x3x16xf32>
// CHECK:       affine.store %{{.*}}, %y[%n{{.*}}, %oh{{.*}} + 1, %owt{{.*}} + 9, %ft{{.*}} * 8 + %fv{{.*}}] : memref<1x10x10x16xf32>
// CHECK:       } {loom.tag = "grouped_conv"}
// CHECK-NEXT:  memref.dealloc %x_top : memref<1x3x12x16xf32>
// CHECK-NEXT:  memref.dealloc %x_bottom : memref<1x3x12x16xf32>
// CHECK-NEXT:  memref.dealloc %x_left : memref<1x10x3x16xf32>
// CHECK-NEXT:  memref.dealloc %x_right : memref<1x10x3x16xf32>
// REMARK: grouped-conv.mlir:[[# @LINE + 3]]:3: remark: [loom-grouped-conv] nest 'conv2d' NHWC 1x10x10x16 * HWCF 3x3x1x16 (strides [1, 1], padding [1, 1], dilations [1, 1], depthwise) -> 1x10x10x16: the outputs whose windows cross the zero border read staged copies of what they read (2112 elements, 132% of X), the others X in place; tiles of 8 outputs along ow x 8 channels along f, kept in registers across the window; 7 nests 'grouped_conv' (the border's and the columns and channels past the last whole tile in their own)
// WIDE: remark: [loom-grouped-conv] nest 'conv2d' {{.*}} tiles of 4 outputs along ow x 16 channels along f
func.func @depthwise(%x: tensor<1x10x10x16xf32>, %w: tensor<3x3x1x16xf32>) -> tensor<1x10x10x16xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>, groups = 16 : i64} : (tensor<1x10x10x16xf32>, tensor<3x3x1x16xf32>) -> tensor<1x10x10x16xf32>
  func.return %y : tensor<1x10x10x16xf32>
}

// -----

// Groups of 4 input and 4 output channels (12 in all), stride 2, no padding: no staging;
// a vector of 4 channels lies in one group, whose channel of X, (f floordiv 4) * 4 + c,
// is the same in all its lanes (read at its first channel's, without fv: loom-vectorize
// broadcasts it); c runs over the group inside the window; the 12 channels
// make a nest of whole vectors (8 would cross a group). 3 columns: one tile of 3.
// CHECK-LABEL: func.func @groups
// CHECK-NOT:   memref.alloc
// CHECK:       affine.for %r = 0 to 3 {
// CHECK-NEXT:    affine.for %s = 0 to 3 {
// CHECK-NEXT:      affine.for %c = 0 to 4 {
// CHECK-NEXT:        affine.for %t = 0 to 3 {
// CHECK-NEXT:          affine.for %fv = 0 to 4 {
// CHECK-NEXT:            %{{.*}} = affine.load %x[%n, %oh * 2 + %r, %owt * 6 + %t * 2 + %s, %ft * 4 floordiv 4 * 4 + %c] : memref<2x7x7x12xf32>
// CHECK-NEXT:            %{{.*}} = affine.load %w[%r, %s, %c, %ft * 4 + %fv] : memref<3x3x4x12xf32>
// CHECK:       } {loom.tag = "grouped_conv"}
// CHECK-NOT:   loom.tag = "grouped_conv"
// CHECK:       func.return
// REMARK: remark: [loom-grouped-conv] nest 'conv2d' NHWC 2x7x7x12 * HWCF 3x3x4x12 (strides [2, 2], padding [0, 0], dilations [1, 1], 3 groups) -> 2x3x3x12: tiles of 3 outputs along ow x 4 channels along f, kept in registers across the window and the group; 1 nest 'grouped_conv'
func.func @groups(%x: tensor<2x7x7x12xf32>, %w: tensor<3x3x4x12xf32>) -> tensor<2x3x3x12xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", strides = array<i64: 2, 2>, groups = 3 : i64} : (tensor<2x7x7x12xf32>, tensor<3x3x4x12xf32>) -> tensor<2x3x3x12xf32>
  func.return %y : tensor<2x3x3x12xf32>
}

// -----

// Two input channels per group and one output: along f, X's channel moves by 2, so the
// channels are not vectorized (V = 1: no loop fv).
// CHECK-LABEL: func.func @two_to_one
// CHECK:       affine.for %t = 0 to 4 {
// CHECK-NEXT:    %{{.*}} = affine.load %x[%n, %oh + %r, %owt * 4 + %t + %s, %ft * 2 + %c] : memref<1x4x6x8xf32>
// REMARK: remark: [loom-grouped-conv] nest 'conv2d' {{.*}} 4 groups) -> 1x4x4x4: tiles of 4 outputs along ow x 1 channels along f
func.func @two_to_one(%x: tensor<1x4x6x8xf32>, %w: tensor<1x3x2x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", groups = 4 : i64} : (tensor<1x4x6x8xf32>, tensor<1x3x2x4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

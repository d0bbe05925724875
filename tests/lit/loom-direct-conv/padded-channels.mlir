// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv{op=conv2d group=2}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv{op=conv2d group=2}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// group=G: an NHWC conv whose C is not a multiple of G (the 3-channel stem) gets planes
// of C rounded up to whole groups, the added channels zero (the staging zeroes the whole
// buffer, then copies X's 3 channels of each pixel 4 apart), and W copied into a zeroed
// R x S x 4 x F buffer: the implicit matmul's k runs over the 7*7*4 taps, a window row's
// 28 of them one run of whole pairs.

// CHECK-LABEL: func.func @stem(
// CHECK:         %w_padded = memref.alloc() {alignment = 64 : i64} : memref<7x7x4x8xbf16>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK:         affine.for %r = 0 to 7 {
// CHECK-NEXT:      affine.for %s = 0 to 7 {
// CHECK-NEXT:        affine.for %c = 0 to 3 {
// CHECK-NEXT:          affine.for %f = 0 to 8 {
// CHECK-NEXT:            %{{.*}} = affine.load %w[%r, %s, %c, %f] : memref<7x7x3x8xbf16>
// CHECK-NEXT:            affine.store %{{.*}}, %w_padded[%r, %s, %c, %f] : memref<7x7x4x8xbf16>
// CHECK:         %x_planes = memref.alloc() {alignment = 64 : i64} : memref<1x2x968xbf16>
// CHECK:         affine.for %[[C:c[_0-9]*]] = 0 to 3 {
// CHECK-NEXT:      %{{.*}} = affine.load %x[%n, %h, %w_1, %[[C]]] : memref<1x16x16x3xbf16>
// CHECK-NEXT:      affine.store %{{.*}}, %x_planes[%n, (%h + 3) mod 2, (%h + 3) floordiv 2 * 88 + %w_1 * 4 + 12 + %[[C]]] : memref<1x2x968xbf16>
// CHECK:         %w_mat = memref.reinterpret_cast %w_padded to offset: [0], sizes: [196, 8], strides: [8, 1] : memref<7x7x4x8xbf16> to memref<196x8xbf16>
// CHECK:         affine.for %k = 0 to 196 {
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         memref.dealloc %w_padded
// REMARK: padded-channels.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 1x16x16x3 * HWCF 7x7x3x8 (strides [2, 2], padding [3, 3], dilations [1, 1]) -> 1x8x8x8: direct convolution: X staged as 1x2 planes of 11x22x4 with its zero border (3 KiB, nests 'direct.pad'), its 3 channels padded with zeros to 4 (whole groups of 2), and W copied into a 7x7x4x8 buffer with zeros in the added channels; then an implicit matmul 64x8x196 (A's 64 rows the windows read from the planes, W as 196x8, no patch matrix)
func.func @stem(%x: memref<1x16x16x3xbf16>, %w: memref<7x7x3x8xbf16>, %y: memref<1x8x8x8xf32>) {
  loom.conv2d ins(%x, %w : memref<1x16x16x3xbf16>, memref<7x7x3x8xbf16>) outs(%y : memref<1x8x8x8xf32>) {layout = "nhwc", strides = array<i64: 2, 2>, padding = array<i64: 3, 3>}
  func.return
}

// -----

// C already whole groups: nothing padded, as without the option.
// CHECK-LABEL: func.func @whole(
// CHECK-NOT:     w_padded
// REMARK: padded-channels.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 1x8x8x4 * HWCF 3x3x4x8 {{.*}}; then an implicit matmul 64x8x36 (A's 64 rows
func.func @whole(%x: memref<1x8x8x4xbf16>, %w: memref<3x3x4x8xbf16>, %y: memref<1x8x8x8xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x4xbf16>, memref<3x3x4x8xbf16>) outs(%y : memref<1x8x8x8xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

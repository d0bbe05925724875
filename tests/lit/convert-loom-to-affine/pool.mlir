// RUN: loom-opt %s -p convert-loom-to-affine --split-input-file | filecheck %s

// max_pool2d: Y filled with -inf, then one nest per run of output rows and columns whose
// windows overhang the padding alike, each over the taps inside the input (no guard, the
// channels innermost). 8x8, window 3, stride 2, padding 1: output row 0 reads taps 1..2,
// rows 1..3 all three; likewise the columns: four nests.
// CHECK-LABEL: func.func @max_pool
// CHECK:      %[[LEAST:.*]] = arith.constant 0xff800000 : f32
// CHECK:        affine.store %[[LEAST]], %y[{{.*}}] : memref<1x4x4x16xf32>
// CHECK:      } {loom.tag = "max_pool2d.init"}
// CHECK-NEXT: affine.for %n = 0 to 1 {
// CHECK-NEXT:   affine.for %oh = 0 to 1 {
// CHECK-NEXT:     affine.for %ow = 0 to 1 {
// CHECK-NEXT:       affine.for %r = 0 to 2 {
// CHECK-NEXT:         affine.for %s = 0 to 2 {
// CHECK-NEXT:           affine.for %c = 0 to 16 {
// CHECK-NEXT:             %[[X:.*]] = affine.load %x[%n, %oh * 2 + %r, %ow * 2 + %s, %c] : memref<1x8x8x16xf32>
// CHECK-NEXT:             %[[Y:.*]] = affine.load %y[%n, %oh, %ow, %c] : memref<1x4x4x16xf32>
// CHECK-NEXT:             %[[M:.*]] = arith.maximumf %[[Y]], %[[X]] : f32
// CHECK-NEXT:             affine.store %[[M]], %y[%n, %oh, %ow, %c] : memref<1x4x4x16xf32>
// CHECK:      } {loom.tag = "max_pool2d"}
// CHECK-NEXT: affine.for %n_1 = 0 to 1 {
// CHECK-NEXT:   affine.for %oh_1 = 0 to 1 {
// CHECK-NEXT:     affine.for %ow_1 = 0 to 3 {
// CHECK-NEXT:       affine.for %r_1 = 0 to 2 {
// CHECK-NEXT:         affine.for %s_1 = 0 to 3 {
// CHECK-NEXT:           affine.for %c_1 = 0 to 16 {
// CHECK-NEXT:             affine.load %x[%n_1, %oh_1 * 2 + %r_1, %ow_1 * 2 + 2 + %s_1 + -1, %c_1]
// CHECK:             affine.store %{{.*}}, %y[%n_1, %oh_1, %ow_1 + 1, %c_1] : memref<1x4x4x16xf32>
// CHECK:      } {loom.tag = "max_pool2d"}
// CHECK:      } {loom.tag = "max_pool2d"}
// CHECK:      } {loom.tag = "max_pool2d"}
// CHECK-NOT:  affine.if
// CHECK:      func.return
func.func @max_pool(%x: memref<1x8x8x16xf32>, %y: memref<1x4x4x16xf32>) {
  loom.max_pool2d ins(%x : memref<1x8x8x16xf32>) outs(%y : memref<1x4x4x16xf32>) {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc"}
  func.return
}

// -----

// NCHW, i32, no padding: one nest, n, c, oh, ow, r, s, the strides defaulting to the window;
// i32's least as the fill, maxsi.
// CHECK-LABEL: func.func @max_pool_nchw
// CHECK:      %[[LEAST:.*]] = arith.constant -2147483648 : i32
// CHECK:      } {loom.tag = "max_pool2d.init"}
// CHECK:                  affine.load %x[%n, %c, %oh * 2 + %r, %ow * 2 + %s] : memref<2x3x4x6xi32>
// CHECK:                  arith.maxsi
// CHECK:      } {loom.tag = "max_pool2d"}
// CHECK-NEXT: func.return
func.func @max_pool_nchw(%x: memref<2x3x4x6xi32>, %y: memref<2x3x2x3xi32>) {
  loom.max_pool2d ins(%x : memref<2x3x4x6xi32>) outs(%y : memref<2x3x2x3xi32>) {window = array<i64: 2, 2>}
  func.return
}

// -----

// mean: a zero fill, the sum over X's own loop order into Y at the kept indices, then Y
// times 1 / count (1/49).
// CHECK-LABEL: func.func @mean
// CHECK:      } {loom.tag = "mean.init"}
// CHECK-NEXT: affine.for %[[N:.*]] = 0 to 2 {
// CHECK-NEXT:   affine.for %[[H:.*]] = 0 to 7 {
// CHECK-NEXT:     affine.for %[[W:.*]] = 0 to 7 {
// CHECK-NEXT:       affine.for %[[C:.*]] = 0 to 32 {
// CHECK-NEXT:         %[[X:.*]] = affine.load %x[%[[N]], %[[H]], %[[W]], %[[C]]] : memref<2x7x7x32xf32>
// CHECK-NEXT:         %[[M:.*]] = affine.load %m[%[[N]], 0, 0, %[[C]]] : memref<2x1x1x32xf32>
// CHECK-NEXT:         %[[S:.*]] = arith.addf %[[M]], %[[X]] : f32
// CHECK-NEXT:         affine.store %[[S]], %m[%[[N]], 0, 0, %[[C]]] : memref<2x1x1x32xf32>
// CHECK:      } {loom.tag = "mean"}
// CHECK-NEXT: %[[INV:[0-9]+]] = arith.constant 0.020408162{{[0-9]*}} : f32
// CHECK:              arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK:      } {loom.tag = "mean.scale"}
func.func @mean(%x: memref<2x7x7x32xf32>, %m: memref<2x1x1x32xf32>) {
  loom.mean ins(%x : memref<2x7x7x32xf32>) outs(%m : memref<2x1x1x32xf32>) {axes = array<i64: 1, 2>}
  func.return
}

// -----

// avg_pool2d: a zero fill, the same runs summing with addf, then each run scaled by 1 / its
// count: with count_include_pad = false the corner's 4 taps, the edges' 6, the inside's 9
// (4x4, window 3, stride 2, padding 1: runs of 1 and 1 per side).
// CHECK-LABEL: func.func @avg_pool
// CHECK:      } {loom.tag = "avg_pool2d.init"}
// CHECK:                  arith.addf
// CHECK:      } {loom.tag = "avg_pool2d"}
// CHECK:      } {loom.tag = "avg_pool2d"}
// CHECK:      } {loom.tag = "avg_pool2d"}
// CHECK:      } {loom.tag = "avg_pool2d"}
// CHECK-NEXT: %{{.*}} = arith.constant 2.500000e-01 : f32
// CHECK:      } {loom.tag = "avg_pool2d.scale"}
// CHECK-NEXT: %{{.*}} = arith.constant 0.166666672 : f32
// CHECK:      } {loom.tag = "avg_pool2d.scale"}
// CHECK-NEXT: %{{.*}} = arith.constant 0.166666672 : f32
// CHECK:      } {loom.tag = "avg_pool2d.scale"}
// CHECK-NEXT: %{{.*}} = arith.constant 0.111111112 : f32
// CHECK:      } {loom.tag = "avg_pool2d.scale"}
// CHECK-NEXT: func.return
func.func @avg_pool(%x: memref<1x4x4x8xf32>, %y: memref<1x2x2x8xf32>) {
  loom.avg_pool2d ins(%x : memref<1x4x4x8xf32>) outs(%y : memref<1x2x2x8xf32>) {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc", count_include_pad = false}
  func.return
}

// -----

// Counting the padding: one scale over the whole output, by 1 / the window's area.
// CHECK-LABEL: func.func @avg_pool_area
// CHECK:      %{{.*}} = arith.constant 0.111111112 : f32
// CHECK:      } {loom.tag = "avg_pool2d.scale"}
// CHECK-NEXT: func.return
func.func @avg_pool_area(%x: memref<1x4x4x8xf32>, %y: memref<1x2x2x8xf32>) {
  loom.avg_pool2d ins(%x : memref<1x4x4x8xf32>) outs(%y : memref<1x2x2x8xf32>) {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc"}
  func.return
}

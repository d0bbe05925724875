// RUN: loom-opt %s -p convert-loom-to-affine --split-input-file | filecheck %s

// CHECK-LABEL: func.func @matmul
// CHECK:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:   affine.for %{{.*}} = 0 to 5 {
// CHECK-NEXT:     affine.store %[[ZERO]], %c[{{.*}}] : memref<4x5xf32>
// CHECK:      } {loom.tag = "matmul.init"}
// CHECK-NEXT: affine.for %i = 0 to 4 {
// CHECK-NEXT:   affine.for %j = 0 to 5 {
// CHECK-NEXT:     affine.for %k = 0 to 3 {
// CHECK-NEXT:       %[[A:.*]] = affine.load %a[%i, %k] : memref<4x3xf32>
// CHECK-NEXT:       %[[B:.*]] = affine.load %b[%k, %j] : memref<3x5xf32>
// CHECK-NEXT:       %[[C:.*]] = affine.load %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT:       %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:       affine.store %[[S]], %c[%i, %j] : memref<4x5xf32>
// CHECK:      } {loom.tag = "matmul"}
func.func @matmul(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  func.return
}

// -----

// CHECK-LABEL: func.func @batched
// CHECK: affine.for %b_1 = 0 to 2 {
// CHECK-NEXT: affine.for %i = 0 to 4 {
// CHECK-NEXT: affine.for %j = 0 to 5 {
// CHECK-NEXT: affine.for %k = 0 to 3 {
// CHECK-NEXT: affine.load %a[%b_1, %i, %k] : memref<2x4x3xf64>
// CHECK-NEXT: affine.load %b[%b_1, %k, %j] : memref<2x3x5xf64>
// CHECK: {loom.tag = "matmul"}
func.func @batched(%a: memref<2x4x3xf64>, %b: memref<2x3x5xf64>, %c: memref<2x4x5xf64>) {
  loom.matmul ins(%a, %b : memref<2x4x3xf64>, memref<2x3x5xf64>) outs(%c : memref<2x4x5xf64>)
  func.return
}

// -----

// Without padding every read is in bounds: no guard.
// CHECK-LABEL: func.func @conv_strided_dilated
// CHECK: affine.for %n = 0 to 1 {
// CHECK-NEXT: affine.for %f = 0 to 4 {
// CHECK-NEXT: affine.for %oh = 0 to 3 {
// CHECK-NEXT: affine.for %ow = 0 to 3 {
// CHECK-NEXT: affine.for %c = 0 to 3 {
// CHECK-NEXT: affine.for %r = 0 to 3 {
// CHECK-NEXT: affine.for %s = 0 to 3 {
// CHECK-NEXT: affine.load %x[%n, %c, %oh * 2 + %r * 2, %ow * 2 + %s * 2] : memref<1x3x9x9xf32>
// CHECK-NEXT: affine.load %w[%f, %c, %r, %s] : memref<4x3x3x3xf32>
// CHECK-NOT: affine.if
// CHECK: {loom.tag = "conv2d"}
func.func @conv_strided_dilated(%x: memref<1x3x9x9xf32>, %w: memref<4x3x3x3xf32>, %y: memref<1x4x3x3xf32>) {
  loom.conv2d ins(%x, %w : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x3x3xf32>) {strides = array<i64: 2, 2>, dilations = array<i64: 2, 2>}
  func.return
}

// -----

// With padding the read is guarded: 0 <= oh + r - 1 <= 7 and 0 <= ow + s - 1 <= 7.
// CHECK-LABEL: func.func @conv_padded
// CHECK: affine.for %s = 0 to 3 {
// CHECK-NEXT: "affine.if"(%n, %f, %oh, %ow, %c, %r, %s) <{condition = affine_set<(d0, d1, d2, d3, d4, d5, d6) : (((d2 + d5) + -1) >= 0, (((d2 * -1) + (d5 * -1)) + 8) >= 0, ((d3 + d6) + -1) >= 0, (((d3 * -1) + (d6 * -1)) + 8) >= 0)>}> ({
// CHECK-NEXT: affine.load %x[%n, %c, %oh + %r + -1, %ow + %s + -1] : memref<1x2x8x8xf32>
// CHECK: affine.store
// CHECK-NEXT: affine.yield
// CHECK: {loom.tag = "conv2d"}
func.func @conv_padded(%x: memref<1x2x8x8xf32>, %w: memref<3x2x3x3xf32>, %y: memref<1x3x8x8xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x8x8xf32>, memref<3x2x3x3xf32>) outs(%y : memref<1x3x8x8xf32>) {padding = array<i64: 1, 1>}
  func.return
}

// -----

// NHWC: the output's dimensions n, oh, ow, f, then r, s, c (c innermost: contiguous in X
// and in the filter's rows); Y[n, oh, ow, f] += X[n, ih, iw, c] * W[r, s, c, f].
// CHECK-LABEL: func.func @conv_nhwc
// CHECK: affine.for %n = 0 to 1 {
// CHECK-NEXT: affine.for %oh = 0 to 4 {
// CHECK-NEXT: affine.for %ow = 0 to 8 {
// CHECK-NEXT: affine.for %f = 0 to 3 {
// CHECK-NEXT: affine.for %r = 0 to 3 {
// CHECK-NEXT: affine.for %s = 0 to 3 {
// CHECK-NEXT: affine.for %c = 0 to 2 {
// CHECK-NEXT: "affine.if"(%n, %oh, %ow, %f, %r, %s, %c)
// CHECK-NEXT: affine.load %x[%n, %oh * 2 + %r + -1, %ow + %s + -1, %c] : memref<1x8x8x2xf32>
// CHECK-NEXT: affine.load %w[%r, %s, %c, %f] : memref<3x3x2x3xf32>
// CHECK-NEXT: affine.load %y[%n, %oh, %ow, %f] : memref<1x4x8x3xf32>
// CHECK: {loom.tag = "conv2d"}
func.func @conv_nhwc(%x: memref<1x8x8x2xf32>, %w: memref<3x3x2x3xf32>, %y: memref<1x4x8x3xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x2xf32>, memref<3x3x2x3xf32>) outs(%y : memref<1x4x8x3xf32>) {layout = "nhwc", strides = array<i64: 2, 1>, padding = array<i64: 1, 1>}
  func.return
}

// -----

// NHWC with the filter in panels of NR = 4 output channels (P x R x S x C x NR): the same
// nest, W[r, s, c, f] read at [f floordiv 4, r, s, c, f mod 4].
// CHECK-LABEL: func.func @conv_panels
// CHECK: affine.for %f = 0 to 8 {
// CHECK: affine.load %w[%f floordiv 4, %r, %s, %c, %f mod 4] : memref<2x3x3x2x4xf32>
// CHECK: {loom.tag = "conv2d"}
func.func @conv_panels(%x: memref<1x8x8x2xf32>, %w: memref<2x3x3x2x4xf32>, %y: memref<1x8x8x8xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x2xf32>, memref<2x3x3x2x4xf32>) outs(%y : memref<1x8x8x8xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// A bf16 filter in panels of groups (P x R x S x C/2 x NR x 2): W[r, s, c, f] read at
// [f floordiv 4, r, s, c floordiv 2, f mod 4, c mod 2], widened to f32 as it is read.
// CHECK-LABEL: func.func @conv_groups
// CHECK: %[[W:.*]] = affine.load %w[%f floordiv 4, %r, %s, %c floordiv 2, %f mod 4, %c mod 2] : memref<2x3x3x2x4x2xbf16>
// CHECK: arith.extf %[[W]] : bf16 to f32
// CHECK: {loom.tag = "conv2d"}
func.func @conv_groups(%x: memref<1x8x8x4xbf16>, %w: memref<2x3x3x2x4x2xbf16>, %y: memref<1x8x8x8xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x4xbf16>, memref<2x3x3x2x4x2xbf16>) outs(%y : memref<1x8x8x8xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// Grouped: c runs over a group's C/groups = 2 channels and X is read at the group's,
// (f floordiv (F/groups)) * (C/groups) + c; depthwise (one channel each) at f + c.
// CHECK-LABEL: func.func @conv_grouped
// CHECK: affine.for %c = 0 to 2 {
// CHECK: affine.load %x[%n, %f floordiv 3 * 2 + %c, %oh + %r, %ow + %s] : memref<1x4x5x5xf32>
// CHECK: affine.load %w[%f, %c, %r, %s] : memref<6x2x3x3xf32>
// CHECK: {loom.tag = "conv2d"}
// CHECK: affine.for %c{{.*}} = 0 to 1 {
// CHECK: affine.load %xd[%n{{.*}}, %oh{{.*}} + %r{{.*}}, %ow{{.*}} + %s{{.*}}, %f{{.*}} + %c{{.*}}] : memref<1x5x5x4xf32>
func.func @conv_grouped(%x: memref<1x4x5x5xf32>, %w: memref<6x2x3x3xf32>, %y: memref<1x6x3x3xf32>,
                        %xd: memref<1x5x5x4xf32>, %wd: memref<3x3x1x4xf32>, %yd: memref<1x3x3x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x4x5x5xf32>, memref<6x2x3x3xf32>) outs(%y : memref<1x6x3x3xf32>) {groups = 2 : i64}
  loom.conv2d ins(%xd, %wd : memref<1x5x5x4xf32>, memref<3x3x1x4xf32>) outs(%yd : memref<1x3x3x4xf32>) {layout = "nhwc", groups = 4 : i64}
  func.return
}

// -----

// Broadcasting: a missing leading dimension is dropped, a size-1 dimension reads index 0.
// CHECK-LABEL: func.func @add_broadcast
// CHECK: affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT: affine.for %[[J:.*]] = 0 to 5 {
// CHECK-NEXT: %[[A:.*]] = affine.load %a[%[[I]], 0] : memref<4x1xf32>
// CHECK-NEXT: %[[B:.*]] = affine.load %bias[%[[J]]] : memref<5xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: affine.store %[[S]], %out[%[[I]], %[[J]]] : memref<4x5xf32>
// CHECK: {loom.tag = "add"}
func.func @add_broadcast(%a: memref<4x1xf32>, %bias: memref<5xf32>, %out: memref<4x5xf32>) {
  loom.add ins(%a, %bias : memref<4x1xf32>, memref<5xf32>) outs(%out : memref<4x5xf32>)
  func.return
}

// -----

// relu keeps NaN like numpy.maximum(x, 0): select(x >u 0, x, 0).
// CHECK-LABEL: func.func @relu_mul
// CHECK: %[[X:.*]] = affine.load %a[%{{.*}}] : memref<8xf64>
// CHECK-NEXT: %[[Y:.*]] = affine.load %b[%{{.*}}] : memref<8xf64>
// CHECK-NEXT: arith.mulf %[[X]], %[[Y]] : f64
// CHECK: {loom.tag = "mul"}
// CHECK: %[[V:.*]] = affine.load %p[%{{.*}}] : memref<8xf64>
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[GT:.*]] = arith.cmpf ugt, %[[V]], %[[Z]] : f64
// CHECK-NEXT: arith.select %[[GT]], %[[V]], %[[Z]] : f64
// CHECK: {loom.tag = "relu"}
func.func @relu_mul(%a: memref<8xf64>, %b: memref<8xf64>, %p: memref<8xf64>, %r: memref<8xf64>) {
  loom.mul ins(%a, %b : memref<8xf64>, memref<8xf64>) outs(%p : memref<8xf64>)
  loom.relu ins(%p : memref<8xf64>) outs(%r : memref<8xf64>)
  func.return
}

// -----

// clamp: max(x, min) then min(., max), each a select that keeps a NaN (numpy.clip's).
// CHECK-LABEL: func.func @clamp
// CHECK: %[[V:.*]] = affine.load %p[%{{.*}}] : memref<8xf32>
// CHECK-NEXT: %[[LO:.*]] = arith.constant -1.000000e+00 : f32
// CHECK-NEXT: %[[HI:.*]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT: %[[GT:.*]] = arith.cmpf ugt, %[[V]], %[[LO]] : f32
// CHECK-NEXT: %[[UP:.*]] = arith.select %[[GT]], %[[V]], %[[LO]] : f32
// CHECK-NEXT: %[[LT:.*]] = arith.cmpf ult, %[[UP]], %[[HI]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %[[LT]], %[[UP]], %[[HI]] : f32
// CHECK-NEXT: affine.store %[[R]], %r[%{{.*}}] : memref<8xf32>
// CHECK: {loom.tag = "clamp"}
func.func @clamp(%p: memref<8xf32>, %r: memref<8xf32>) {
  loom.clamp ins(%p : memref<8xf32>) outs(%r : memref<8xf32>) {min = -1.0 : f64, max = 6.0 : f64}
  func.return
}

// -----

// CHECK-LABEL: func.func @copy
// CHECK: affine.for %[[I:.*]] = 0 to 2 {
// CHECK-NEXT: affine.for %[[J:.*]] = 0 to 3 {
// CHECK-NEXT: %[[V:.*]] = affine.load %a[%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK-NEXT: affine.store %[[V]], %b[%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK: {loom.tag = "copy"}
func.func @copy(%a: memref<2x3xf32>, %b: memref<2x3xf32>) {
  "memref.copy"(%a, %b) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
  func.return
}

// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-im2col{op=conv2d}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-im2col' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A padded, strided, dilated conv2d, batch 2: X is copied into a zero-bordered buffer
// whose columns are split by their phase modulo the column stride (x_staged[n, c, ih,
// iw mod 2, iw floordiv 2]: both nests tagged im2col.pad), then the windows into the patch
// matrix (im2col: constant bounds, no guard; each tap's phase and shift computed per s,
// so that ow walks consecutive addresses), then a batched matmul on views: W repeated
// over the batch (stride 0) as 4 x 27, the patch matrix as 27 x 12, Y as 4 x 12. The zero
// fill of Y stays; the buffers are freed after their last use.
// CHECK-LABEL: func.func @padded(
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK-NEXT:    %x_staged = memref.alloc() {alignment = 64 : i64} : memref<2x3x11x2x4xf32>
// CHECK:           affine.store %{{.*}}, %x_staged[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x11x2x4xf32>
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK-NEXT:    affine.for %n = 0 to 2 {
// CHECK-NEXT:      affine.for %c = 0 to 3 {
// CHECK-NEXT:        affine.for %h = 0 to 7 {
// CHECK-NEXT:          affine.for %w_1 = 0 to 6 {
// CHECK-NEXT:            %[[V:.*]] = affine.load %x[%n, %c, %h, %w_1] : memref<2x3x7x6xf32>
// CHECK-NEXT:            affine.store %[[V]], %x_staged[%n, %c, %h + 2, (%w_1 + 1) mod 2, (%w_1 + 1) floordiv 2] : memref<2x3x11x2x4xf32>
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK-NEXT:    %col = memref.alloc() {alignment = 64 : i64} : memref<2x3x3x3x4x3xf32>
// CHECK-NEXT:    affine.for %n_1 = 0 to 2 {
// CHECK-NEXT:      affine.for %c_1 = 0 to 3 {
// CHECK-NEXT:        affine.for %r = 0 to 3 {
// CHECK-NEXT:          affine.for %s = 0 to 3 {
// CHECK-NEXT:            %phase = affine.apply affine_map<(d0) -> ((d0 mod 2))> (%s)
// CHECK-NEXT:            %shift = affine.apply affine_map<(d0) -> ((d0 floordiv 2))> (%s)
// CHECK-NEXT:            affine.for %oh = 0 to 4 {
// CHECK-NEXT:              affine.for %ow = 0 to 3 {
// CHECK-NEXT:                %[[P:.*]] = affine.load %x_staged[%n_1, %c_1, %oh * 2 + %r * 2, %phase, %ow + %shift] : memref<2x3x11x2x4xf32>
// CHECK-NEXT:                affine.store %[[P]], %col[%n_1, %c_1, %r, %s, %oh, %ow] : memref<2x3x3x3x4x3xf32>
// CHECK:         } {loom.tag = "im2col"}
// CHECK-NEXT:    memref.dealloc %x_staged : memref<2x3x11x2x4xf32>
// CHECK-NEXT:    %[[A:.*]] = memref.reinterpret_cast %w to offset: [0], sizes: [2, 4, 27], strides: [0, 27, 1] : memref<4x3x3x3xf32> to memref<2x4x27xf32, strided<[0, 27, 1]>>
// CHECK-NEXT:    %[[B:.*]] = memref.reinterpret_cast %col to offset: [0], sizes: [2, 27, 12], strides: [324, 12, 1] : memref<2x3x3x3x4x3xf32> to memref<2x27x12xf32>
// CHECK-NEXT:    %[[C:.*]] = memref.reinterpret_cast %y to offset: [0], sizes: [2, 4, 12], strides: [48, 12, 1] : memref<2x4x4x3xf32> to memref<2x4x12xf32>
// CHECK-NEXT:    affine.for %b = 0 to 2 {
// CHECK-NEXT:      affine.for %i = 0 to 4 {
// CHECK-NEXT:        affine.for %j = 0 to 12 {
// CHECK-NEXT:          affine.for %k = 0 to 27 {
// CHECK-NEXT:            %{{.*}} = affine.load %[[A]][%b, %i, %k]
// CHECK-NEXT:            %{{.*}} = affine.load %[[B]][%b, %k, %j]
// CHECK-NEXT:            %{{.*}} = affine.load %[[C]][%b, %i, %j]
// CHECK:                 affine.store %{{.*}}, %[[C]][%b, %i, %j]
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %col : memref<2x3x3x3x4x3xf32>
// CHECK-NEXT:    func.return
// REMARK: im2col.mlir:[[# @LINE + 3]]:3: remark: [loom-im2col] nest 'conv2d.init' skipped: its perfect band has 4 loops, not the 7 of conv2d's n, f, oh, ow, c, r, s
// REMARK: im2col.mlir:[[# @LINE + 2]]:3: remark: [loom-im2col] nest 'conv2d' 2x3x7x6 * 4x3x3x3 (strides [2, 2], padding [2, 1], dilations [2, 1]) -> 2x4x4x3: patch matrix 2x27x12 (2 KiB) copied by nest 'im2col'; then matmul 4x12x27, batched over 2 (W as 4x27, Y as 4x12)
func.func @padded(%x: memref<2x3x7x6xf32>, %w: memref<4x3x3x3xf32>, %y: memref<2x4x4x3xf32>) {
  loom.conv2d ins(%x, %w : memref<2x3x7x6xf32>, memref<4x3x3x3xf32>) outs(%y : memref<2x4x4x3xf32>) {strides = array<i64: 2, 2>, padding = array<i64: 2, 1>, dilations = array<i64: 2, 1>}
  func.return
}

// -----

// A 1x1 convolution with stride 1 and no padding is a matmul on the input as it is: no
// copy, X viewed as C x (H*W), one image: no batch loop.
// CHECK-LABEL: func.func @pointwise(
// CHECK-NOT:     memref.alloc
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK-NEXT:    %[[A:.*]] = memref.reinterpret_cast %w to offset: [0], sizes: [16, 8], strides: [8, 1] : memref<16x8x1x1xf64> to memref<16x8xf64>
// CHECK-NEXT:    %[[B:.*]] = memref.reinterpret_cast %x to offset: [0], sizes: [8, 35], strides: [35, 1] : memref<1x8x5x7xf64> to memref<8x35xf64>
// CHECK-NEXT:    %[[C:.*]] = memref.reinterpret_cast %y to offset: [0], sizes: [16, 35], strides: [35, 1] : memref<1x16x5x7xf64> to memref<16x35xf64>
// CHECK-NEXT:    affine.for %i = 0 to 16 {
// CHECK-NEXT:      affine.for %j = 0 to 35 {
// CHECK-NEXT:        affine.for %k = 0 to 8 {
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: im2col.mlir:[[# @LINE + 2]]:3: remark: [loom-im2col] nest 'conv2d' 1x8x5x7 * 16x8x1x1 (strides [1, 1], padding [0, 0], dilations [1, 1]) -> 1x16x5x7: a 1x1 convolution with stride 1 and no padding: X is already the patch matrix, no copy; then matmul 16x35x8 (W as 16x8, Y as 16x35)
func.func @pointwise(%x: memref<1x8x5x7xf64>, %w: memref<16x8x1x1xf64>, %y: memref<1x16x5x7xf64>) {
  loom.conv2d ins(%x, %w : memref<1x8x5x7xf64>, memref<16x8x1x1xf64>) outs(%y : memref<1x16x5x7xf64>)
  func.return
}

// -----

// A 1x1 convolution with stride 2 reads every other pixel: staged by phase (no border
// to write), then copied.
// CHECK-LABEL: func.func @pointwise_strided(
// CHECK:         %x_staged = memref.alloc() {alignment = 64 : i64} : memref<1x4x6x2x4xf32>
// CHECK:         %col = memref.alloc() {alignment = 64 : i64} : memref<1x4x1x1x3x4xf32>
// CHECK:                   %{{.*}} = affine.load %x_staged[%n_1, %c_1, %oh * 2 + %r, %phase, %ow + %shift] : memref<1x4x6x2x4xf32>
// CHECK:         } {loom.tag = "im2col"}
func.func @pointwise_strided(%x: memref<1x4x6x8xf32>, %w: memref<2x4x1x1xf32>, %y: memref<1x2x3x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x4x6x8xf32>, memref<2x4x1x1xf32>) outs(%y : memref<1x2x3x4xf32>) {strides = array<i64: 2, 2>}
  func.return
}

// -----

// Stride 1 with padding: one phase, X's column iw lands at iw + pw and the tap's column
// is ow + s*dw: linear, no apply (both copies vectorize).
// CHECK-LABEL: func.func @same_padding(
// CHECK:         %x_staged = memref.alloc() {alignment = 64 : i64} : memref<1x2x7x1x9xf32>
// CHECK:               affine.store %{{.*}}, %x_staged[%n, %c, %h + 1, 0, %w_1 + 2] : memref<1x2x7x1x9xf32>
// CHECK:                   %{{.*}} = affine.load %x_staged[%n_1, %c_1, %oh + %r, 0, %ow + %s * 2] : memref<1x2x7x1x9xf32>
func.func @same_padding(%x: memref<1x2x5x5xf32>, %w: memref<3x2x3x3xf32>, %y: memref<1x3x5x5xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x5x5xf32>, memref<3x2x3x3xf32>) outs(%y : memref<1x3x5x5xf32>) {padding = array<i64: 1, 2>, dilations = array<i64: 1, 2>}
  func.return
}

// -----

// NHWC: X with its border (no phase split: the copy runs along c, contiguous whatever
// the strides), the patch matrix (N*Ho*Wo) x (R*S*C), then one matmul, the batch folded
// into its rows: patch matrix (16 x 18) @ W as 18 x 4 = Y as 16 x 4. Without dilation
// the taps of a window row (s, c) are S*C consecutive elements of a row of X: the copy
// moves runs of 6 on views (x_rows, col_runs).
// CHECK-LABEL: func.func @nhwc(
// CHECK:         %x_padded = memref.alloc() {alignment = 64 : i64} : memref<2x9x4x2xf32>
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK-NEXT:    %col = memref.alloc() {alignment = 64 : i64} : memref<2x4x2x3x3x2xf32>
// CHECK-NEXT:    %x_rows = memref.reinterpret_cast %x_padded to offset: [0], sizes: [2, 9, 8], strides: [72, 8, 1]
// CHECK-NEXT:    %col_runs = memref.reinterpret_cast %col to offset: [0], sizes: [2, 4, 2, 3, 6], strides: [144, 36, 18, 6, 1]
// CHECK:                   %{{.*}} = affine.load %x_rows[%n_1, %oh * 2 + %r, %ow * 2 + %t] : memref<2x9x8xf32>
// CHECK-NEXT:              affine.store %{{.*}}, %col_runs[%n_1, %oh, %ow, %r, %t] : memref<2x4x2x3x6xf32>
// CHECK:         } {loom.tag = "im2col"}
// CHECK-NEXT:    memref.dealloc %x_padded
// CHECK-NEXT:    %col_mat = memref.reinterpret_cast %col to offset: [0], sizes: [16, 18], strides: [18, 1]
// CHECK-NEXT:    %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [18, 4], strides: [4, 1]
// CHECK-NEXT:    %y_mat = memref.reinterpret_cast %y to offset: [0], sizes: [16, 4], strides: [4, 1]
// CHECK-NEXT:    affine.for %i = 0 to 16 {
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %col
func.func @nhwc(%x: memref<2x7x2x2xf32>, %w: memref<3x3x2x4xf32>, %y: memref<2x4x2x4xf32>) {
  loom.conv2d ins(%x, %w : memref<2x7x2x2xf32>, memref<3x3x2x4xf32>) outs(%y : memref<2x4x2x4xf32>) {layout = "nhwc", strides = array<i64: 2, 1>, padding = array<i64: 1, 1>}
  func.return
}

// -----

// NHWC with a column dilation: the taps of a window row are not consecutive; the copy
// runs along c.
// CHECK-LABEL: func.func @nhwc_dilated(
// CHECK:                     %{{.*}} = affine.load %x[%n, %oh + %r, %ow + %s * 2, %c] : memref<1x5x6x3xf32>
// CHECK-NEXT:                affine.store %{{.*}}, %col[%n, %oh, %ow, %r, %s, %c] : memref<1x3x2x3x3x3xf32>
func.func @nhwc_dilated(%x: memref<1x5x6x3xf32>, %w: memref<3x3x3x4xf32>, %y: memref<1x3x2x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x5x6x3xf32>, memref<3x3x3x4xf32>) outs(%y : memref<1x3x2x4xf32>) {layout = "nhwc", dilations = array<i64: 1, 2>}
  func.return
}

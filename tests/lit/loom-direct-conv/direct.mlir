// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv{op=conv2d}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A padded, strided, dilated conv2d, batch 2. X is staged into planes, one per channel
// and phase pair of the strides (2 x 2), each 6 rows of 4 columns flattened: zeroed, then
// X copied in (nests direct.pad). Y is computed 4 columns a row, one more than its 3 (the
// overhang of the windows), into y_wide, zeroed in place of Y (the conv2d.init nest now
// zeroes y_wide), then copied into Y (direct.out). The matmul reads B straight from the
// planes: k = (c*3 + r)*3 + s split back into c, r, s; the row dilation 2 is a multiple
// of the stride, so every row tap is in phase 0, r rows down; the column tap s*1 is in
// phase s mod 2, s floordiv 2 columns along. No patch matrix.
// CHECK-LABEL: func.func @padded(
// CHECK-NEXT:    %x_planes = memref.alloc() {alignment = 64 : i64} : memref<2x3x2x2x24xf32>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK-NEXT:    affine.for %n = 0 to 2 {
// CHECK-NEXT:      affine.for %c = 0 to 3 {
// CHECK-NEXT:        affine.for %h = 0 to 7 {
// CHECK-NEXT:          affine.for %w_1 = 0 to 6 {
// CHECK-NEXT:            %[[V:.*]] = affine.load %x[%n, %c, %h, %w_1] : memref<2x3x7x6xf32>
// CHECK-NEXT:            affine.store %[[V]], %x_planes[%n, %c, (%h + 2) mod 2, (%w_1 + 1) mod 2, (%h + 2) floordiv 2 * 4 + (%w_1 + 1) floordiv 2] : memref<2x3x2x2x24xf32>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK-NEXT:    %y_wide = memref.alloc() {alignment = 64 : i64} : memref<2x4x15xf32>
// CHECK:           affine.store %{{.*}}, %y_wide[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x4x15xf32>
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK-NEXT:    %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [2, 4, 27], strides: [0, 27, 1] : memref<4x3x3x3xf32> to memref<2x4x27xf32, strided<[0, 27, 1]>>
// CHECK-NEXT:    %y_mat = memref.reinterpret_cast %y_wide to offset: [0], sizes: [2, 4, 15], strides: [60, 15, 1] : memref<2x4x15xf32> to memref<2x4x15xf32>
// CHECK-NEXT:    affine.for %b = 0 to 2 {
// CHECK-NEXT:      affine.for %i = 0 to 4 {
// CHECK-NEXT:        affine.for %j = 0 to 15 {
// CHECK-NEXT:          affine.for %k = 0 to 27 {
// CHECK-NEXT:            %{{.*}} = affine.load %w_mat[%b, %i, %k]
// CHECK-NEXT:            %{{.*}} = affine.load %x_planes[%b, %k floordiv 9, 0, %k mod 3 mod 2, %j + %k mod 9 floordiv 3 * 4 + %k mod 3 floordiv 2] : memref<2x3x2x2x24xf32>
// CHECK-NEXT:            %{{.*}} = affine.load %y_mat[%b, %i, %j]
// CHECK:                 affine.store %{{.*}}, %y_mat[%b, %i, %j]
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    affine.for %n_1 = 0 to 2 {
// CHECK-NEXT:      affine.for %f = 0 to 4 {
// CHECK-NEXT:        affine.for %oh = 0 to 4 {
// CHECK-NEXT:          affine.for %ow = 0 to 3 {
// CHECK-NEXT:            %[[O:.*]] = affine.load %y_wide[%n_1, %f, %oh * 4 + %ow] : memref<2x4x15xf32>
// CHECK-NEXT:            affine.store %[[O]], %y[%n_1, %f, %oh, %ow] : memref<2x4x4x3xf32>
// CHECK:         } {loom.tag = "direct.out"}
// CHECK-NEXT:    memref.dealloc %x_planes : memref<2x3x2x2x24xf32>
// CHECK-NEXT:    memref.dealloc %y_wide : memref<2x4x15xf32>
// CHECK-NEXT:    func.return
// REMARK: direct.mlir:[[# @LINE + 3]]:3: remark: [loom-direct-conv] nest 'conv2d.init' skipped: its perfect band has 4 loops, not the 7 of conv2d's n, f, oh, ow, c, r, s
// REMARK: direct.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' 2x3x7x6 * 4x3x3x3 (strides [2, 2], padding [2, 1], dilations [2, 1]) -> 2x4x4x3: direct convolution: X staged as 2x3x2x2 planes of 6x4 with its zero border (2 KiB, nests 'direct.pad'); Y computed as 15 pixels per image (20.0% of them the windows' overhang, thrown away), then copied into Y (nest 'direct.out'); then an implicit matmul 4x15x27, batched over 2 (W as 4x27, B's 27 rows the window taps read from the planes, no patch matrix)
func.func @padded(%x: memref<2x3x7x6xf32>, %w: memref<4x3x3x3xf32>, %y: memref<2x4x4x3xf32>) {
  loom.conv2d ins(%x, %w : memref<2x3x7x6xf32>, memref<4x3x3x3xf32>) outs(%y : memref<2x4x4x3xf32>) {strides = array<i64: 2, 2>, padding = array<i64: 2, 1>, dilations = array<i64: 2, 1>}
  func.return
}

// -----

// No padding, stride 1: X is its own staging, viewed as one plane per channel (no
// copy); the 3-wide window overhangs each 4-column output row by 2 columns, computed
// into y_wide. One image: no batch loop, the planes' batch index 0.
// CHECK-LABEL: func.func @valid(
// CHECK-NOT:     direct.pad
// CHECK:         %x_planes = memref.reinterpret_cast %x to offset: [0], sizes: [1, 5, 1, 1, 36], strides: [180, 36, 0, 0, 1] : memref<1x5x6x6xf32> to memref<1x5x1x1x36xf32, strided<[180, 36, 0, 0, 1]>>
// CHECK:         %y_wide = memref.alloc() {alignment = 64 : i64} : memref<1x7x22xf32>
// CHECK:         affine.for %i = 0 to 7 {
// CHECK-NEXT:      affine.for %j = 0 to 22 {
// CHECK-NEXT:        affine.for %k = 0 to 45 {
// CHECK:               %{{.*}} = affine.load %x_planes[0, %k floordiv 9, 0, 0, %j + %k mod 9 floordiv 3 * 6 + %k mod 3]
// CHECK:         } {loom.tag = "direct.out"}
// CHECK-NOT:     memref.dealloc %x_planes
// CHECK:         memref.dealloc %y_wide
func.func @valid(%x: memref<1x5x6x6xf32>, %w: memref<7x5x3x3xf32>, %y: memref<1x7x4x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x5x6x6xf32>, memref<7x5x3x3xf32>) outs(%y : memref<1x7x4x4xf32>) {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>}
  func.return
}

// -----

// A 1x1 window with stride 1: no overhang, so Y is its own y_wide (a view) and the zero
// fill of Y stays; B's subscripts are linear (X as C x H*W): a plain matmul.
// CHECK-LABEL: func.func @pointwise(
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK:         %x_planes = memref.reinterpret_cast %x
// CHECK:         %y_mat = memref.reinterpret_cast %y to offset: [0], sizes: [3, 20], strides: [20, 1] : memref<1x3x4x5xf32> to memref<3x20xf32>
// CHECK:               %{{.*}} = affine.load %x_planes[0, %k, 0, 0, %j]
// CHECK-NOT:     direct.out
// CHECK-NOT:     y_wide
func.func @pointwise(%x: memref<1x2x4x5xf32>, %w: memref<3x2x1x1xf32>, %y: memref<1x3x4x5xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x4x5xf32>, memref<3x2x1x1xf32>) outs(%y : memref<1x3x4x5xf32>) {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>}
  func.return
}

// -----

// A conv2d nest with no zero fill of Y right before it accumulates into Y: y_wide gets
// its own zero fill, and the copy into Y adds. (The nest in generic syntax: each access
// takes all seven ivs, as convert-loom-to-affine's do.)
// CHECK-LABEL: func.func @accumulate(
// CHECK:         %y_wide = memref.alloc() {alignment = 64 : i64} : memref<1x1x7xf32>
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK:         } {loom.tag = "matmul"}
// CHECK:             %[[NEW:.*]] = affine.load %y_wide[%n, %f, %oh * 4 + %ow] : memref<1x1x7xf32>
// CHECK-NEXT:        %[[OLD:.*]] = affine.load %y[%n, %f, %oh, %ow] : memref<1x1x2x3xf32>
// CHECK-NEXT:        %[[SUM:.*]] = arith.addf %[[OLD]], %[[NEW]] : f32
// CHECK-NEXT:        affine.store %[[SUM]], %y[%n, %f, %oh, %ow] : memref<1x1x2x3xf32>
// CHECK:         } {loom.tag = "direct.out"}
func.func @accumulate(%x: memref<1x1x3x4xf32>, %w: memref<1x1x2x2xf32>, %y: memref<1x1x2x3xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 1 {
      affine.for %oh = 0 to 2 {
        affine.for %ow = 0 to 3 {
          affine.for %c = 0 to 1 {
            affine.for %r = 0 to 2 {
              affine.for %s = 0 to 2 {
                %a = "affine.load"(%x, %n, %f, %oh, %ow, %c, %r, %s) <{map = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>}> : (memref<1x1x3x4xf32>, index, index, index, index, index, index, index) -> f32
                %b = "affine.load"(%w, %n, %f, %oh, %ow, %c, %r, %s) <{map = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>}> : (memref<1x1x2x2xf32>, index, index, index, index, index, index, index) -> f32
                %o = "affine.load"(%y, %n, %f, %oh, %ow, %c, %r, %s) <{map = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>}> : (memref<1x1x2x3xf32>, index, index, index, index, index, index, index) -> f32
                %p = arith.mulf %a, %b : f32
                %q = arith.addf %o, %p : f32
                "affine.store"(%q, %y, %n, %f, %oh, %ow, %c, %r, %s) <{map = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>}> : (f32, memref<1x1x2x3xf32>, index, index, index, index, index, index, index) -> ()
              }
            }
          }
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// -----

// NHWC, batch 2, strides 2, padding and a row dilation: X staged into one plane per row
// phase (2), each 6 rows of 4 columns times the 2 column phases side by side, 3 channels
// each (6 x 24): tap (r, s, c) of pixel (oh, ow) at ((oh + r)*4 + ow)*2*3 + s*3 + c in
// plane (2r) mod 2 = 0. The pixels are the matmul's rows, the batch folded in (i =
// (n, oh, ow): n = i floordiv 12), so nothing is computed twice and Y is written in
// place: no y_wide, no copy, the zero fill of Y stays. W (HWCF) is B as it is.
// CHECK-LABEL: func.func @nhwc(
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK-NEXT:    %x_planes = memref.alloc() {alignment = 64 : i64} : memref<2x2x144xf32>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK:               affine.store %{{.*}}, %x_planes[%n, (%h + 2) mod 2, (%h + 2) floordiv 2 * 24 + %w_1 * 3 + 3 + %c] : memref<2x2x144xf32>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK-NEXT:    %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [27, 4], strides: [4, 1] : memref<3x3x3x4xf32> to memref<27x4xf32>
// CHECK-NEXT:    %y_mat = memref.reinterpret_cast %y to offset: [0], sizes: [24, 4], strides: [4, 1] : memref<2x4x3x4xf32> to memref<24x4xf32>
// CHECK-NEXT:    affine.for %i = 0 to 24 {
// CHECK-NEXT:      affine.for %j = 0 to 4 {
// CHECK-NEXT:        affine.for %k = 0 to 27 {
// CHECK-NEXT:          %{{.*}} = affine.load %x_planes[%i floordiv 12, 0, %i mod 12 floordiv 3 * 24 + %k floordiv 9 * 24 + %i mod 12 mod 3 * 6 + %k mod 9] : memref<2x2x144xf32>
// CHECK-NEXT:          %{{.*}} = affine.load %w_mat[%k, %j]
// CHECK-NEXT:          %{{.*}} = affine.load %y_mat[%i, %j]
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %x_planes : memref<2x2x144xf32>
// CHECK-NEXT:    func.return
// REMARK: direct.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 2x7x6x3 * HWCF 3x3x3x4 (strides [2, 2], padding [2, 1], dilations [2, 1]) -> 2x4x3x4: direct convolution: X staged as 2x2 planes of 6x8x3 with its zero border (2 KiB, nests 'direct.pad'); then an implicit matmul 24x4x27 (A's 24 rows the windows read from the planes, W as 27x4, no patch matrix)
func.func @nhwc(%x: memref<2x7x6x3xf32>, %w: memref<3x3x3x4xf32>, %y: memref<2x4x3x4xf32>) {
  loom.conv2d ins(%x, %w : memref<2x7x6x3xf32>, memref<3x3x3x4xf32>) outs(%y : memref<2x4x3x4xf32>) {layout = "nhwc", strides = array<i64: 2, 2>, padding = array<i64: 2, 1>, dilations = array<i64: 2, 1>}
  func.return
}

// -----

// NHWC with the filter in panels of 16 output channels (P x R x S x C x NR): one implicit
// matmul per panel, batched over the 2 panels (%b), A the windows (which %b does not
// index: the same planes for every panel), B the panel as a 72 x 16 matrix (contiguous),
// C the panel's 16 columns of Y (rows 32 elements apart).
// CHECK-LABEL: func.func @panels(
// CHECK:         %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [2, 72, 16], strides: [1152, 16, 1] : memref<2x3x3x8x16xf32> to memref<2x72x16xf32>
// CHECK-NEXT:    %y_mat = memref.reinterpret_cast %y to offset: [0], sizes: [2, 16, 16], strides: [16, 32, 1] : memref<1x4x4x32xf32> to memref<2x16x16xf32, strided<[16, 32, 1]>>
// CHECK-NEXT:    affine.for %b = 0 to 2 {
// CHECK-NEXT:      affine.for %i = 0 to 16 {
// CHECK-NEXT:        affine.for %j = 0 to 16 {
// CHECK-NEXT:          affine.for %k = 0 to 72 {
// CHECK-NEXT:            %{{.*}} = affine.load %x_planes[0, 0, %i floordiv 4 * 48 + %k floordiv 24 * 48 + %i mod 4 * 8 + %k mod 24] : memref<1x1x288xf32>
// CHECK-NEXT:            %{{.*}} = affine.load %w_mat[%b, %k, %j] : memref<2x72x16xf32>
// CHECK-NEXT:            %{{.*}} = affine.load %y_mat[%b, %i, %j]
// CHECK:         } {loom.tag = "matmul"}
// REMARK: direct.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 1x4x4x8 * panels 2x3x3x8x16 (strides [1, 1], padding [1, 1], dilations [1, 1]) -> 1x4x4x32: direct convolution: X staged as 1x1 planes of 6x6x8 with its zero border (1 KiB, nests 'direct.pad'); then an implicit matmul 16x16x72 per panel of the filter, batched over its 2 (A's 16 rows the windows read from the planes, B a panel of W, 72x16, no patch matrix)
func.func @panels(%x: memref<1x4x4x8xf32>, %w: memref<2x3x3x8x16xf32>, %y: memref<1x4x4x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x4x4x8xf32>, memref<2x3x3x8x16xf32>) outs(%y : memref<1x4x4x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// A bf16 filter in panels of pairs of channels (P x R x S x C/2 x NR x 2): B the panel
// as K/2 x 2*NR (contiguous), read at [k floordiv 2, j*2 + k mod 2], the groups
// vdpbf16ps reads (loom-dot); k still runs over the 72 taps.
// CHECK-LABEL: func.func @groups(
// CHECK:         %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [2, 36, 32], strides: [1152, 32, 1] : memref<2x3x3x4x16x2xbf16> to memref<2x36x32xbf16>
// CHECK:                   affine.for %k = 0 to 72 {
// CHECK-NEXT:            %{{.*}} = affine.load %x_planes
// CHECK-NEXT:            %{{.*}} = affine.load %w_mat[%b, %k floordiv 2, %j * 2 + %k mod 2] : memref<2x36x32xbf16>
// CHECK:         } {loom.tag = "matmul"}
// REMARK: direct.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 1x4x4x8 * panels of groups 2x3x3x4x16x2 {{.*}}then an implicit matmul 16x16x72 per panel of the filter, batched over its 2 (A's 16 rows the windows read from the planes, B a panel of W, 72x16 in groups of 2 along k, no patch matrix)
func.func @groups(%x: memref<1x4x4x8xbf16>, %w: memref<2x3x3x4x16x2xbf16>, %y: memref<1x4x4x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x4x4x8xbf16>, memref<2x3x3x4x16x2xbf16>) outs(%y : memref<1x4x4x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// An NHWC 1x1 window at stride 2 with no padding (a ResNet projection): X read in place,
// no planes: A's row (n, oh, ow) is X[n, oh*2, ow*2, :], at ((oh*Wq + ow)*2*C + c) of X
// viewed flat, Wq = W.
// CHECK-LABEL: func.func @projection(
// CHECK-NOT:     direct.pad
// CHECK:         %x_planes = memref.reinterpret_cast %x to offset: [0], sizes: [1, 1, 512], strides: [512, 0, 1]
// CHECK:         affine.load %x_planes[0, %k floordiv 8 mod 2, %i floordiv 4 * 128 + %k floordiv 8 floordiv 2 * 128 + %i mod 4 * 16 + %k mod 8]
// REMARK: direct.mlir:[[# @LINE + 2]]:3: remark: [loom-direct-conv] nest 'conv2d' NHWC 1x8x8x8 * HWCF 1x1x8x16 (strides [2, 2], padding [0, 0], dilations [1, 1]) -> 1x4x4x16: direct convolution: X read in place (a 1x1 window, no padding: each window the 8 channels of X[n, oh*2, ow*2] where they lie); then an implicit matmul 16x16x8
func.func @projection(%x: memref<1x8x8x8xf32>, %w: memref<1x1x8x16xf32>, %y: memref<1x4x4x16xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x8xf32>, memref<1x1x8x16xf32>) outs(%y : memref<1x4x4x16xf32>) {layout = "nhwc", strides = array<i64: 2, 2>}
  func.return
}

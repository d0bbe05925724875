// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=direct,fuse-pack}' --split-input-file | filecheck %s --check-prefix=IM2COL
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=direct,im2col,fuse-pack}' --split-input-file | filecheck %s --check-prefix=SKIP

// skip=fuse-pack: these cases show the order of row tiles (j_t, k_t, i_t, ...); the panel
// order that one thread takes for a matmul of one row block is tests/lit/loom-fuse-pack's
// and tests/test_default.py's.

// A padded 3x3 conv2d of 24 output channels: im2col would copy a patch element per 24
// fmas (+67% at 16 fmas' time each), the direct convolution computes 2 columns too many
// per 12-column row (+15%) and reads its taps in place (+4%): loom-default picks the
// direct convolution (loom-direct-conv: X staged into a plane per channel, the copies
// vectorized), then schedules its implicit matmul W (24 x 144) by the windows (144 x 166:
// 160 columns in 6x16 tiles, 6 in a peeled copy) into
// y_wide with the matmul plan, packing only W (6x16 tiles), and copies y_wide into Y;
// y_wide has no zero fill (loom-fuse-epilogue drops it: the matmul writes it once).
// With skip=direct it takes im2col: the patch matrix, then the matmul, packing both.
// CHECK-LABEL: func.func @conv(
// CHECK:         %x_planes = memref.alloc() {alignment = 64 : i64} : memref<1x16x1x1x196xf32>
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK:         affine.vector_load %x[
// CHECK:         } {loom.tag = "direct.pad"}
// CHECK:         %y_wide = memref.alloc() {alignment = 64 : i64} : memref<1x24x166xf32>
// CHECK-NOT:     loom.tag = "conv2d.init"
// CHECK:         %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [24, 144], strides: [144, 1]
// CHECK-NOT:     %x_planes_pack
// CHECK:         %w_mat_pack = memref.alloc() {alignment = 64 : i64} : memref<4x144x6xf32>
// CHECK:         affine.vector_load %x_planes[
// CHECK:         vector.fma
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         affine.vector_load %y_wide[
// CHECK:         } {loom.tag = "direct.out"}
// CHECK:         memref.dealloc %x_planes
// CHECK:         memref.dealloc %y_wide
// REMARK: conv2d.mlir:[[# @LINE + 12]]:3: remark: [loom-default] conv2d 1x16x12x12 * 24x16x3x3 (strides [1, 1], padding [1, 1], dilations [1, 1]) -> 1x24x12x12 on test: {{.*}}: direct: estimated time over the matmul's: direct +19.3% (the windows' overhang 13.3% of the computed pixels, taps read in place +4%), im2col +66.7% (the patch matrix, 0.0207M elements, copied and packed: 16 fmas' time each, 1/24 per fma); estimated traffic of its matmul: {{.*}}
// REMARK: conv2d.mlir:[[# @LINE + 11]]:3: remark: [loom-default] nest 'conv2d' 1x16x12x12 * 24x16x3x3 {{.*}}: direct convolution: X staged as 1x16x1x1 planes of 14x14
// REMARK: conv2d.mlir:[[# @LINE + 10]]:3: remark: [loom-default] matmul 24x160x144 on test: {{.*}}register tile 6x16{{.*}}B read in place
// IM2COL-LABEL: func.func @conv(
// IM2COL:         %col = memref.alloc() {alignment = 64 : i64} : memref<1x16x3x3x12x12xf32>
// IM2COL:         } {loom.tag = "im2col"}
// IM2COL:         %col_mat_pack = memref.alloc() {alignment = 64 : i64} : memref<9x144x16xf32>
// IM2COL:         %w_mat_pack = memref.alloc() {alignment = 64 : i64} : memref<4x144x6xf32>
// SKIP-NOT: im2col
// SKIP-NOT: direct
// SKIP: } {loom.tag = "conv2d"}
func.func @conv(%x: memref<1x16x12x12xf32>, %w: memref<24x16x3x3xf32>, %y: memref<1x24x12x12xf32>) {
  loom.conv2d ins(%x, %w : memref<1x16x12x12xf32>, memref<24x16x3x3xf32>) outs(%y : memref<1x24x12x12xf32>) {padding = array<i64: 1, 1>}
  func.return
}

// -----

// A 7x7 map with 64 output channels: the windows' overhang is 2 of 9 columns a row
// (+25% and +4%), the patch matrix one element per 64 fmas (+25%): im2col, just.
// CHECK-LABEL: func.func @small_map(
// CHECK:         %col = memref.alloc()
// CHECK:         } {loom.tag = "im2col"}
// CHECK-NOT:     direct.out
// REMARK: conv2d.mlir:[[# @LINE + 2]]:3: remark: [loom-default] conv2d 1x16x7x7 * 64x16x3x3 {{.*}}: im2col: estimated time over the matmul's: direct +28.5% (the windows' overhang 19.7% of the computed pixels, taps read in place +4%), im2col +25.0%
func.func @small_map(%x: memref<1x16x7x7xf32>, %w: memref<64x16x3x3xf32>, %y: memref<1x64x7x7xf32>) {
  loom.conv2d ins(%x, %w : memref<1x16x7x7xf32>, memref<64x16x3x3xf32>) outs(%y : memref<1x64x7x7xf32>) {padding = array<i64: 1, 1>}
  func.return
}

// -----

// An NHWC filter in panels of 16 output channels (loom.conv2d's rank-5 filter, packed
// ahead of time): a direct convolution only, one implicit matmul per panel (the batch
// loop %b), each reading its panel of W in place, contiguous: nothing packed. C is Y's
// 16 columns of the panel (a view, 32 elements a row). skip=direct leaves it: im2col's
// matrix of W could not read panels.
// CHECK-LABEL: func.func @panels(
// CHECK:         %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [2, 72, 16], strides: [1152, 16, 1]
// CHECK-NEXT:    %y_mat = memref.reinterpret_cast %y to offset: [0], sizes: [2, 36, 16], strides: [16, 32, 1]
// CHECK-NOT:     _pack
// CHECK:         affine.for %b = 0 to 2 {
// CHECK:         affine.vector_load %w_mat[%b, %k, %j_t2] : memref<2x72x16xf32>, vector<8xf32>
// CHECK:         vector.fma
// CHECK:         } {loom.tag = "matmul"}
// REMARK: conv2d.mlir:[[# @LINE + 7]]:3: remark: [loom-default] conv2d NHWC 1x6x6x8 * panels 2x3x3x8x16 {{.*}}: direct: im2col not allowed here
// REMARK: conv2d.mlir:[[# @LINE + 6]]:3: remark: [loom-default] nest 'conv2d' {{.*}}; then an implicit matmul 36x16x72 per panel of the filter, batched over its 2 (A's 36 rows the windows read from the planes, B a panel of W, 72x16, no patch matrix)
// REMARK: conv2d.mlir:[[# @LINE + 5]]:3: remark: [loom-default] matmul 36x16x72 on test: {{.*}}register tile 6x16{{.*}}no packing: B is a panel of the filter, packed ahead of time (contiguous)
// IM2COL-LABEL: func.func @panels(
// IM2COL:         } {loom.tag = "conv2d"}
// SKIP-LABEL: func.func @panels(
func.func @panels(%x: memref<1x6x6x8xf32>, %w: memref<2x3x3x8x16xf32>, %y: memref<1x6x6x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x6x6x8xf32>, memref<2x3x3x8x16xf32>) outs(%y : memref<1x6x6x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

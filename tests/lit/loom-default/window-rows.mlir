// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'convert-loom-to-affine,loom-default' --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'convert-loom-to-affine,loom-default' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'convert-loom-to-affine,loom-default{skip=unroll-jam}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=SKIP

// A 7x7/2 conv of 3 channels (ResNet's stem, smaller): the direct convolution's windows
// read a row of S*C = 21 taps, then jump to the next tap row, dividing k by 21. k is
// unroll-jammed by the whole row: the k loop steps by 21 and its 21 copies of the 6x16
// register tile read at `%k floordiv 21` plus a constant, one division per row.
// CHECK-LABEL: func.func @stem(
// CHECK:         affine.for %k_t = 0 to 147 step 147 {
// CHECK:         affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> ((d0 + 147))>(%k_t) step 21 iter_args(
// CHECK-NEXT:      affine.load %x_planes[0, %k floordiv 21 + %k floordiv 21 floordiv 2 * -2, %i_t2 * 6 + %k + %i_t2 floordiv 7 * 18 + %k floordiv 21 * -21 + %k floordiv 21 floordiv 2 * 60]
// CHECK:           affine.load %x_planes[0, %k floordiv 21 + %k floordiv 21 floordiv 2 * -2, %i_t2 * 6 + %k + %i_t2 floordiv 7 * 18 + %k floordiv 21 * -21 + %k floordiv 21 floordiv 2 * 60 + 20]
// CHECK-NOT:       (%k + 
// CHECK:           affine.yield
// REMARK: remark: [loom-default] matmul 48x16x147 on test: {{.*}}cache tiles MC=48 NC=16 KC=147; k unroll-jammed by 21, a window row of taps: the division of k by it once per row;
// REMARK: remark: [loom-unroll-jam] unroll-jam band {{.*}}: factors [1, 1, 1, 1, 1, 21, 6, 2] requested, [1, 1, 1, 1, 1, 21, 6, 2] applied
// SKIP: remark: [loom-default] matmul 48x16x147 on test: {{.*}}cache tiles MC=48 NC=16 KC=147; panel order
func.func @stem(%x: memref<1x20x20x3xf32>, %w: memref<7x7x3x16xf32>, %y: memref<1x7x7x16xf32>) {
  loom.conv2d ins(%x, %w : memref<1x20x20x3xf32>, memref<7x7x3x16xf32>) outs(%y : memref<1x7x7x16xf32>) {layout = "nhwc", strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>}
  func.return
}

// -----

// A row of S*C = 3 * 16 = 48 taps, past WINDOW_RUN_JAM (32): long rows leave the division
// little to cost, and k keeps its single step.
// CHECK-LABEL: func.func @long_rows(
// CHECK:         affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> ((d0 + 144))>(%k_t) iter_args(
// REMARK-NOT: a window row of taps
// REMARK: remark: [loom-default] matmul 36x16x144 on test:
func.func @long_rows(%x: memref<1x8x8x16xf32>, %w: memref<3x3x16x16xf32>, %y: memref<1x6x6x16xf32>) {
  loom.conv2d ins(%x, %w : memref<1x8x8x16xf32>, memref<3x3x16x16xf32>) outs(%y : memref<1x6x6x16xf32>) {layout = "nhwc", strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>}
  func.return
}

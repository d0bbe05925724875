// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p loom-default | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p loom-default --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=im2col}' | filecheck %s --check-prefix=SKIP

// A padded 3x3 conv2d: loom-default rewrites it with loom-im2col (X with its border,
// the patch matrix, both copies vectorized), then schedules the matmul W (24 x 144) by
// the patch matrix (144 x 144) into Y with the matmul plan: packed panels, 6x16 tiles.
// CHECK-LABEL: func.func @conv(
// CHECK:         } {loom.tag = "conv2d.init"}
// CHECK:         %x_staged = memref.alloc() {alignment = 64 : i64} : memref<1x16x14x1x14xf32>
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK:         affine.vector_load %x[
// CHECK:         } {loom.tag = "im2col.pad"}
// CHECK:         %col = memref.alloc() {alignment = 64 : i64} : memref<1x16x3x3x12x12xf32>
// CHECK:         affine.vector_load %x_staged[
// CHECK:         } {loom.tag = "im2col"}
// CHECK:         %w_mat = memref.reinterpret_cast %w to offset: [0], sizes: [24, 144], strides: [144, 1]
// CHECK:         %col_mat = memref.reinterpret_cast %col
// CHECK:         %y_mat = memref.reinterpret_cast %y
// CHECK:         %col_mat_pack = memref.alloc() {alignment = 64 : i64} : memref<9x144x16xf32>
// CHECK:         %w_mat_pack = memref.alloc() {alignment = 64 : i64} : memref<4x144x6xf32>
// CHECK:         vector.fma
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         memref.dealloc %col
// REMARK: conv2d.mlir:[[# @LINE + 5]]:3: remark: [loom-default] conv2d 1x16x12x12 * 24x16x3x3 (strides [1, 1], padding [1, 1], dilations [1, 1]) -> 1x24x12x12 on test: {{.*}}: im2col: the patch matrix copied once (0.0207M elements, 81 KiB, 0.0417 per fma), then a matmul 24x144x144 on the matmul schedule (estimated traffic of the matmul: DRAM->L3 0.0311M, L2->L1 0.0864M, L1->registers 0.114M)
// REMARK: conv2d.mlir:[[# @LINE + 4]]:3: remark: [loom-default] matmul 24x144x144 on test: {{.*}}register tile 6x16
// SKIP-NOT: im2col
// SKIP: } {loom.tag = "conv2d"}
func.func @conv(%x: memref<1x16x12x12xf32>, %w: memref<24x16x3x3xf32>, %y: memref<1x24x12x12xf32>) {
  loom.conv2d ins(%x, %w : memref<1x16x12x12xf32>, memref<24x16x3x3xf32>) outs(%y : memref<1x24x12x12xf32>) {padding = array<i64: 1, 1>}
  func.return
}

// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-im2col' --split-input-file | filecheck %s

// Low precision: the staged input and the patch matrix hold X's own elements (bf16 here:
// half the bytes of f32 to copy), and the matmul nest widens each element as it reads it
// (arith.extf), its products and sums in f32, as the conv2d nest did.
// CHECK-LABEL: func.func @bf16(
// CHECK:         %x_staged = memref.alloc() {alignment = 64 : i64} : memref<1x2x7x2x4xbf16>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK:         affine.store %[[Z]], %x_staged[{{.*}}] : memref<1x2x7x2x4xbf16>
// CHECK:         %col = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x3x3x3xbf16>
// CHECK:         } {loom.tag = "im2col"}
// CHECK:         %[[A:.*]] = affine.load %w_mat[%i, %k] : memref<3x18xbf16>
// CHECK-NEXT:    %[[B:.*]] = affine.load %col_mat[%k, %j] : memref<18x9xbf16>
// CHECK-NEXT:    %[[C:.*]] = affine.load %y_mat[%i, %j] : memref<3x9xf32>
// CHECK-NEXT:    %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:    %[[BW:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[AW]], %[[BW]] : f32
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:    affine.store %[[S]], %y_mat[%i, %j] : memref<3x9xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %col : memref<1x2x3x3x3x3xbf16>
func.func @bf16(%x: memref<1x2x5x5xbf16>, %w: memref<3x2x3x3xbf16>, %y: memref<1x3x3x3xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x5x5xbf16>, memref<3x2x3x3xbf16>) outs(%y : memref<1x3x3x3xf32>) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>}
  func.return
}

// -----

// u8 x s8 NHWC: X padded in a ui8 buffer, whose zero is an i32 zero truncated (arith's
// constants are signless); the patch matrix in ui8; u8 zero-extended, s8 sign-extended,
// products and sums in i32.
// CHECK-LABEL: func.func @u8s8(
// CHECK:         %x_padded = memref.alloc() {alignment = 64 : i64} : memref<2x7x7x4xui8>
// CHECK-NEXT:    %[[Z32:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[Z:.*]] = arith_ext.trunci %[[Z32]] : i32 to ui8
// CHECK:         affine.store %[[Z]], %x_padded[{{.*}}] : memref<2x7x7x4xui8>
// CHECK:         %col = memref.alloc() {alignment = 64 : i64} : memref<2x5x5x3x3x4xui8>
// CHECK:         } {loom.tag = "im2col"}
// CHECK:         %[[A:.*]] = affine.load %col_mat[%i, %k] : memref<50x36xui8>
// CHECK-NEXT:    %[[B:.*]] = affine.load %w_mat[%k, %j] : memref<36x6xi8>
// CHECK-NEXT:    %[[C:.*]] = affine.load %y_mat[%i, %j] : memref<50x6xi32>
// CHECK-NEXT:    %[[AW:.*]] = arith_ext.extui %[[A]] : ui8 to i32
// CHECK-NEXT:    %[[BW:.*]] = arith_ext.extsi %[[B]] : i8 to i32
// CHECK-NEXT:    %[[P:.*]] = arith.muli %[[AW]], %[[BW]] : i32
// CHECK-NEXT:    %[[S:.*]] = arith.addi %[[C]], %[[P]] : i32
// CHECK-NEXT:    affine.store %[[S]], %y_mat[%i, %j] : memref<50x6xi32>
func.func @u8s8(%x: memref<2x5x5x4xui8>, %w: memref<3x3x4x6xi8>, %y: memref<2x5x5x6xi32>) {
  loom.conv2d ins(%x, %w : memref<2x5x5x4xui8>, memref<3x3x4x6xi8>) outs(%y : memref<2x5x5x6xi32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

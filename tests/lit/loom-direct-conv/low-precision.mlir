// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv' --split-input-file | filecheck %s

// Low precision: the planes hold X's own elements (bf16), Y' (the wide output) Y's f32;
// the implicit matmul widens each element as it reads it, products and sums in f32.
// CHECK-LABEL: func.func @bf16(
// CHECK:         %x_planes = memref.alloc() {alignment = 64 : i64} : memref<1x2x2x2x16xbf16>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK:         %y_wide = memref.alloc() {alignment = 64 : i64} : memref<1x3x11xf32>
// CHECK:         %[[A:.*]] = affine.load %w_mat[%i, %k] : memref<3x18xbf16>
// CHECK-NEXT:    %[[B:.*]] = affine.load %x_planes[0, {{.*}}] : memref<1x2x2x2x16xbf16>
// CHECK-NEXT:    %[[C:.*]] = affine.load %y_mat[%i, %j] : memref<3x11xf32>
// CHECK-NEXT:    %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:    %[[BW:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[AW]], %[[BW]] : f32
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK:         } {loom.tag = "direct.out"}
func.func @bf16(%x: memref<1x2x5x5xbf16>, %w: memref<3x2x3x3xbf16>, %y: memref<1x3x3x3xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x5x5xbf16>, memref<3x2x3x3xbf16>) outs(%y : memref<1x3x3x3xf32>) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>}
  func.return
}

// -----

// u8 x s8 NHWC: the planes in ui8 with their zero border (an i32 zero truncated: arith's
// constants are signless); the windows (A) zero-extended, W sign-extended, sums in i32.
// CHECK-LABEL: func.func @u8s8(
// CHECK:         %x_planes = memref.alloc() {alignment = 64 : i64} : memref<2x1x196xui8>
// CHECK-NEXT:    %[[Z32:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[Z:.*]] = arith_ext.trunci %[[Z32]] : i32 to ui8
// CHECK:         affine.store %[[Z]], %x_planes[{{.*}}] : memref<2x1x196xui8>
// CHECK:         %[[A:.*]] = affine.load %x_planes[{{.*}}] : memref<2x1x196xui8>
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

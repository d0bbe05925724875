// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv{op=conv2d}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-direct-conv' --split-input-file 2>&1 | filecheck %s --check-prefix=ANY
// RUN: not loom-opt %s -p 'loom-direct-conv{group=-1}' 2>&1 | filecheck %s --check-prefix=OPTIONS

// OPTIONS: error: loom-direct-conv: option 'group' is the channels a window's group holds, 0 (none) or more, got -1

// Already scheduled: the nest is no longer the textbook conv2d.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-direct-conv: cannot rewrite nest 'conv2d': its perfect band has 4 loops, not the 7 of conv2d's n, f, oh, ow, c, r, s
// ANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-direct-conv: no conv2d nest to rewrite: no nest has the 7 loops of conv2d's n, f, oh, ow, c, r, s
func.func @scheduled(%x: memref<1x2x4x4xf32>, %w: memref<3x2x1x1xf32>, %y: memref<1x3x4x4xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 3 {
      affine.for %oh = 0 to 4 {
        affine.for %ow = 0 to 4 {
          %a = affine.load %x[%n, 0, %oh, %ow] : memref<1x2x4x4xf32>
          affine.store %a, %y[%n, %f, %oh, %ow] : memref<1x3x4x4xf32>
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// -----

// W with a row stride of its own: the implicit matmul views W as a matrix.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-direct-conv: cannot rewrite nest 'conv2d': W (memref<3x2x1x1xf32, strided<[4, 1, 1, 1]>>) is not contiguous: the matmul views it as a matrix
// ANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-direct-conv: no conv2d nest to rewrite: nest 'conv2d': W (memref<3x2x1x1xf32, strided<[4, 1, 1, 1]>>) is not contiguous: the matmul views it as a matrix
func.func @strided_w(%x: memref<1x2x4x4xf32>, %w: memref<3x2x1x1xf32, strided<[4, 1, 1, 1]>>, %y: memref<1x3x4x4xf32>) {
  loom.conv2d ins(%x, %w : memref<1x2x4x4xf32>, memref<3x2x1x1xf32, strided<[4, 1, 1, 1]>>) outs(%y : memref<1x3x4x4xf32>) {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>}
  func.return
}

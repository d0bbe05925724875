// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-im2col{op=conv2d}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-tile{sizes=1,2 op=conv2d},loom-im2col{op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=TILED
// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-im2col{op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=MATMUL
// RUN: not loom-opt %s -p 'convert-loom-to-affine,loom-im2col' --split-input-file 2>&1 | filecheck %s --check-prefix=NONE

// What loom-im2col refuses, at the nest, nothing changed.

// Y is a strided view (every other column of a wider buffer): the matmul could not view
// it as F x (Ho*Wo).
// CHECK: refuse.mlir:[[# @LINE + 5]]:3: error: loom-im2col: cannot rewrite nest 'conv2d': Y (memref<1x2x4x4xf32, strided<[64, 32, 8, 2]>>) is not contiguous: the matmul views it as a matrix
// An already tiled nest is no longer the textbook conv2d.
// TILED: refuse.mlir:[[# @LINE + 3]]:3: error: loom-im2col: cannot rewrite nest 'conv2d': its perfect band has 9 loops, not the 7 of conv2d's n, f, oh, ow, c, r, s
// NONE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-im2col: no conv2d nest to rewrite: nest 'conv2d': Y (memref<1x2x4x4xf32, strided<[64, 32, 8, 2]>>) is not contiguous: the matmul views it as a matrix
func.func @strided_output(%x: memref<1x3x6x6xf32>, %w: memref<2x3x3x3xf32>, %y: memref<1x2x4x4xf32, strided<[64, 32, 8, 2]>>) {
  loom.conv2d ins(%x, %w : memref<1x3x6x6xf32>, memref<2x3x3x3xf32>) outs(%y : memref<1x2x4x4xf32, strided<[64, 32, 8, 2]>>)
  func.return
}

// -----

// op= names a matmul: not a conv2d nest. Without op=, a module with no conv2d nest at all
// is an error too (the pass would do nothing).
// MATMUL: refuse.mlir:[[# @LINE + 3]]:3: error: loom-im2col: cannot rewrite nest 'matmul': its perfect band has 3 loops, not the 7 of conv2d's n, f, oh, ow, c, r, s
// NONE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-im2col: no conv2d nest to rewrite: no nest has the 7 loops of conv2d's n, f, oh, ow, c, r, s
func.func @matmul(%a: memref<4x5xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  loom.matmul ins(%a, %b : memref<4x5xf32>, memref<5x6xf32>) outs(%c : memref<4x6xf32>)
  func.return
}

// -----

// A filter in panels (rank 5, NHWC): im2col views W as a matrix of F columns, which the
// panels are not; only a direct convolution reads them.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-im2col: cannot rewrite nest 'conv2d': its filter is in panels (P x R x S x C x NR): only a direct convolution reads them
func.func @panels(%x: memref<1x6x6x8xf32>, %w: memref<2x3x3x8x16xf32>, %y: memref<1x6x6x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x6x6x8xf32>, memref<2x3x3x8x16xf32>) outs(%y : memref<1x6x6x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-im2col: cannot rewrite nest 'conv2d': its filter is in panels (P x R x S x C/G x NR x G): only a direct convolution reads them
func.func @groups(%x: memref<1x6x6x8xbf16>, %w: memref<2x3x3x4x16x2xbf16>, %y: memref<1x6x6x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x6x6x8xbf16>, memref<2x3x3x4x16x2xbf16>) outs(%y : memref<1x6x6x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

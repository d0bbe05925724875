// RUN: not loom-opt %s -p 'loom-transpose-copy{width=3}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: loom-opt %s -p 'loom-transpose-copy{width=4}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-transpose-copy{width=4}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// OPTION: {{^}}loom-opt: error: loom-transpose-copy: option 'width' must be a power of two of at least 2 (or 0: the target's), got 3
// OPTION-NOT: affine.for

// Transposing copies the pass must leave scalar, each with a remark saying why; the IR is
// unchanged. Fewer iterations than the width along k.
// CHECK-LABEL: func.func @short
// CHECK-NOT:     vector
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-transpose-copy] copy of %b into %p left scalar: %k runs 2 iterations, fewer than the width 4
func.func @short(%b: memref<2x8xf32, strided<[1, 2]>>, %p: memref<2x8xf32>) {
  affine.for %j = 0 to 8 {
    affine.for %k = 0 to 2 {
      %v = affine.load %b[%k, %j] : memref<2x8xf32, strided<[1, 2]>>
      affine.store %v, %p[%k, %j] : memref<2x8xf32>
    }
  }
  func.return
}

// -----

// The inner loop's bounds use the outer loop's iv (a triangle: no square tiles).
// CHECK-LABEL: func.func @triangle
// CHECK-NOT:     vector
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-transpose-copy] copy of %b into %p left scalar: the bounds of %k use %j
func.func @triangle(%b: memref<8x8xf32, strided<[1, 8]>>, %p: memref<8x8xf32>) {
  affine.for %j = 0 to 8 {
    affine.for %k = 0 to affine_map<(d0) -> (d0 + 1)>(%j) {
      %v = affine.load %b[%k, %j] : memref<8x8xf32, strided<[1, 8]>>
      affine.store %v, %p[%k, %j] : memref<8x8xf32>
    }
  }
  func.return
}

// -----

// Source and buffer are views of one buffer (a transpose in place would read what it
// has written).
// CHECK-LABEL: func.func @one_buffer
// CHECK-NOT:     vector
// REMARK: refuse.mlir:[[# @LINE + 4]]:3: remark: [loom-transpose-copy] copy of %t into %m left scalar: %t[%k, %j] and %m[%k, %j] may be one buffer
func.func @one_buffer() {
  %m = memref.alloc() : memref<8x8xf32>
  %t = memref.reinterpret_cast %m to offset: [0], sizes: [8, 8], strides: [1, 8] : memref<8x8xf32> to memref<8x8xf32, strided<[1, 8]>>
  affine.for %j = 0 to 8 {
    affine.for %k = 0 to 8 {
      %v = affine.load %t[%k, %j] : memref<8x8xf32, strided<[1, 8]>>
      affine.store %v, %m[%k, %j] : memref<8x8xf32>
    }
  }
  memref.dealloc %m : memref<8x8xf32>
  func.return
}

// -----

// Copies that do not transpose are not this pass's: a row-major source (loom-vectorize's),
// and a transposed source copied along its unit stride on both sides (a transposed A's
// panels, MR rows wide): left alone, silently.
// CHECK-LABEL: func.func @not_transposing
// CHECK-NOT:     vector
// REMARK-NOT: loom-transpose-copy
func.func @not_transposing(%a: memref<8x8xf32>, %at: memref<8x8xf32, strided<[1, 8]>>, %p: memref<8x8xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %a[%k, %j] : memref<8x8xf32>
      affine.store %v, %p[%k, %j] : memref<8x8xf32>
    }
  }
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      %v = affine.load %at[%i, %k] : memref<8x8xf32, strided<[1, 8]>>
      affine.store %v, %p[%k, %i] : memref<8x8xf32>
    }
  }
  func.return
}

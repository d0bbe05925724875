// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2 op=stencil}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,0}' --split-input-file 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not loom-opt %s -p 'loom-unroll-jam' --split-input-file 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,2,2,2 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=256,256 op=big}' --split-input-file 2>&1 | filecheck %s --check-prefix=SIZE

// What loom-unroll-jam refuses, each at the nest, with the reason; nothing is changed.
// The options are checked before any nest is looked at.
// ZERO: error: loom-unroll-jam: option 'factors' must be positive integers, got [2, 0]
// NONE: error: loom-unroll-jam: option 'factors' is required (a list of positive integers)

// A[i, j] = A[i - 1, j + 1] + 1: the copy for i + 1 would read A[i, j + 1] before the
// copy for i has written it (in iteration j + 1): a dependence (<, >) carried by i.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll-jam: unroll-jam of loop i by 2 breaks the dependence store %A[%i, %j] (line [[# @LINE + 6]]) -> load %A[%i - 1, %j + 1] (line [[# @LINE + 4]]), direction (<, >) in band (i, j)
func.func @stencil(%A: memref<100x100xf32>, %one: f32) {
  affine.for %i = 1 to 100 {
    affine.for %j = 0 to 99 {
      %v = affine.load %A[%i - 1, %j + 1] : memref<100x100xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i, %j] : memref<100x100xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}

// -----

// Four factors for a band of three loops.
// MANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll-jam: 4 factors [2, 2, 2, 2] for the 3 loops of band (i, j, k)
func.func @matmul(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 3 {
        %0 = affine.load %a[%i, %k] : memref<4x3xf32>
        %1 = affine.load %b[%k, %j] : memref<3x5xf32>
        %2 = affine.load %c[%i, %j] : memref<4x5xf32>
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%i, %j] : memref<4x5xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// 256 x 256 copies of a 6-op body and an iv: about 459,000 ops, more than the limit. Refused
// before any copy is made (unrolled, such a nest took 10 minutes and 3.6 GB to compile).
// SIZE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll-jam: unroll-jam of band (i, j, k) by [256, 256] would make nest 'big' about 458,757 ops, more than the limit of 20,000 ops per unrolled nest (compile time and memory grow with it): use smaller factors
func.func @big(%a: memref<256x256xf32>, %b: memref<256x256xf32>, %c: memref<256x256xf32>) {
  affine.for %i = 0 to 256 {
    affine.for %j = 0 to 256 {
      affine.for %k = 0 to 256 {
        %0 = affine.load %a[%i, %k] : memref<256x256xf32>
        %1 = affine.load %b[%k, %j] : memref<256x256xf32>
        %2 = affine.load %c[%i, %j] : memref<256x256xf32>
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%i, %j] : memref<256x256xf32>
      }
    }
  } {loom.tag = "big"}
  func.return
}

// -----

// %m is %a or %b, chosen at run time: a buffer of unknown origin, which may be %b. Its
// accesses meet those of every buffer in any direction (memref_root took the select's
// first memref operand, %a, for its buffer: no dependence, and a different result).
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-unroll-jam: unroll-jam of loop i by 2 breaks the dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 5]]) -> store %m[%i, %j] (line [[# @LINE + 6]]), direction (*, *) (%m, the result of 'arith.select', may be any buffer) in band (i, j)
func.func @select_buffer(%a: memref<9x9xf32>, %b: memref<9x9xf32>, %c: i1) {
  %m = arith.select %c, %a, %b : memref<9x9xf32>
  affine.for %i = 1 to 9 {
    affine.for %j = 0 to 8 {
      %x = affine.load %b[%i - 1, %j + 1] : memref<9x9xf32>
      affine.store %x, %m[%i, %j] : memref<9x9xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}

// -----

// The same through an scf.if's result (memref_root stopped at it: a buffer of its own).
// CHECK: refuse.mlir:[[# @LINE + 7]]:3: error: loom-unroll-jam: unroll-jam of loop i by 2 breaks the dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 9]]) -> store %m[%i, %j] (line [[# @LINE + 10]]), direction (*, *) (%m, the result of 'scf.if', may be any buffer) in band (i, j)
func.func @if_buffer(%a: memref<9x9xf32>, %b: memref<9x9xf32>, %c: i1) {
  %m = scf.if %c -> (memref<9x9xf32>) {
    scf.yield %a : memref<9x9xf32>
  } else {
    scf.yield %b : memref<9x9xf32>
  }
  affine.for %i = 1 to 9 {
    affine.for %j = 0 to 8 {
      %x = affine.load %b[%i - 1, %j + 1] : memref<9x9xf32>
      affine.store %x, %m[%i, %j] : memref<9x9xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}

// -----

// Strides (1, 1) on 9 x 9: %a[%i, 1] and %a[%i + 1, 0] are one element, though their
// subscripts differ: every pair on %a is a dependence in any direction.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-unroll-jam: unroll-jam of loop i by 2 breaks the dependence load %a[%i, 1] (line [[# @LINE + 4]]) -> store %a[%i, 0] (line [[# @LINE + 6]]), direction (*, *) (the layout of %a reaches some elements from several indices) in band (i, j)
func.func @overlapping_layout(%a: memref<9x9xf32, strided<[1, 1]>>, %one: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[%i, 1] : memref<9x9xf32, strided<[1, 1]>>
      %y = arith.addf %x, %one : f32
      affine.store %y, %a[%i, 0] : memref<9x9xf32, strided<[1, 1]>>
    }
  } {loom.tag = "stencil"}
  func.return
}

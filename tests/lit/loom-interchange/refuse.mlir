// RUN: not loom-opt %s -p 'loom-interchange{order=1,0}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-interchange{order=0,2,1 op=stencil3}' --split-input-file 2>&1 | filecheck %s --check-prefix=THREE
// RUN: not loom-opt %s -p 'loom-interchange{order=0,0}' --split-input-file 2>&1 | filecheck %s --check-prefix=PERM
// RUN: not loom-opt %s -p 'loom-interchange{order=0,1,2 op=stencil}' --split-input-file 2>&1 | filecheck %s --check-prefix=LONG
// RUN: not loom-opt %s -p 'loom-interchange{order=2,0,1}' --split-input-file 2>&1 | filecheck %s --check-prefix=BOUNDS
// RUN: not loom-opt %s -p 'loom-interchange' --split-input-file 2>&1 | filecheck %s --check-prefix=NONE

// What loom-interchange refuses, each at the nest, with the reason; nothing is changed.
// The options are checked before any nest is looked at.
// PERM: error: loom-interchange: option 'order' must be a permutation, got [0, 0]
// NONE: error: loom-interchange: option 'order' is required (a permutation such as order=0,2,1)

// A[i, j] = A[i - 1, j + 1] + 1: iteration (i, j) writes what (i + 1, j - 1) reads, a
// dependence with direction (<, >) that j outside i would turn around.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-interchange: order [1, 0] breaks the dependence store %A[%i, %j] (line [[# @LINE + 7]]) -> load %A[%i - 1, %j + 1] (line [[# @LINE + 5]]), direction (<, >) in band (i, j); legal orders: [0, 1]
// LONG: refuse.mlir:[[# @LINE + 2]]:3: error: loom-interchange: order [0, 1, 2] is longer than the 2-loop band (i, j)
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

// The same along j and k: the legal orders keep j outside k.
// THREE: refuse.mlir:[[# @LINE + 2]]:3: error: loom-interchange: order [0, 2, 1] breaks the dependence store %A[%i, %j, %k] (line [[# @LINE + 7]]) -> load %A[%i, %j - 1, %k + 1] (line [[# @LINE + 5]]), direction (=, <, >) in band (i, j, k); legal orders: [0, 1, 2], [1, 0, 2], [1, 2, 0]
func.func @stencil3(%A: memref<10x10x10xf32>, %one: f32) {
  affine.for %i = 0 to 10 {
    affine.for %j = 1 to 10 {
      affine.for %k = 0 to 9 {
        %v = affine.load %A[%i, %j - 1, %k + 1] : memref<10x10x10xf32>
        %w = arith.addf %v, %one : f32
        affine.store %w, %A[%i, %j, %k] : memref<10x10x10xf32>
      }
    }
  } {loom.tag = "stencil3"}
  func.return
}

// -----

// A tiled band: the point loop %ii runs from %it, so it cannot go outside %it.
// BOUNDS: refuse.mlir:[[# @LINE + 2]]:3: error: loom-interchange: order [2, 0, 1] puts loop ii outside loop it, which its bounds depend on, in band (it, jt, ii, jj, k); legal orders: [0, 1, 2], [0, 2, 1], [1, 0, 2]
func.func @tiled(%A: memref<10x7xf32>, %B: memref<7x9xf32>, %C: memref<10x9xf32>) {
  affine.for %it = 0 to 10 step 4 {
    affine.for %jt = 0 to 9 step 4 {
      affine.for %ii = %it to min affine_map<(d0) -> (d0 + 4, 10)>(%it) {
        affine.for %jj = %jt to min affine_map<(d0) -> (d0 + 4, 9)>(%jt) {
          affine.for %k = 0 to 7 {
            %a = affine.load %A[%ii, %k] : memref<10x7xf32>
            %b = affine.load %B[%k, %jj] : memref<7x9xf32>
            %c = affine.load %C[%ii, %jj] : memref<10x9xf32>
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %c, %p : f32
            affine.store %s, %C[%ii, %jj] : memref<10x9xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A vector store beside a scalar load of the same buffer: the store of iteration (i, j)
// writes A[i, j .. j + 3], which the load of iteration (i + 2, j - 4) reads (A[i, j + 1]),
// direction (<, >). (Found only when the vector's 4 lanes are counted: lane 0 alone would
// meet the load nowhere, and j outside i would read A[i, j + 1] before it is written.)
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-interchange: order [1, 0] breaks the dependence vector_store %A[%i, %j] (line [[# @LINE + 6]]) -> load %A[%i - 2, %j + 5] (line [[# @LINE + 4]]), direction (<, >) in band (i, j); legal orders: [0, 1]
func.func @vector_store_scalar_load(%A: memref<16x32xf32>) {
  affine.for %i = 2 to 16 {
    affine.for %j = 0 to 24 step 4 {
      %x = affine.load %A[%i - 2, %j + 5] : memref<16x32xf32>
      %v = vector.broadcast %x : f32 to vector<4xf32>
      affine.vector_store %v, %A[%i, %j] : memref<16x32xf32>, vector<4xf32>
    }
  } {loom.tag = "mixed"}
  func.return
}

// -----

// The load reads through a view of the buffer the store writes: %v[%i - 1, %j] is
// %A[%i - 1, %j + 1], the stencil above. Subscripts of different views count in
// different index spaces: the pair is not analysed, a dependence in any direction.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-interchange: order [1, 0] breaks the dependence load %v[%i - 1, %j] (line [[# @LINE + 5]]) -> store %A[%i, %j] (line [[# @LINE + 7]]), direction (*, *) in band (i, j); legal orders: [0, 1]
func.func @through_a_view(%A: memref<10x10xf32>, %one: f32) {
  %v = memref.subview %A[0, 1] [9, 9] [1, 1] : memref<10x10xf32> to memref<9x9xf32, strided<[10, 1], offset: 1>>
  affine.for %i = 1 to 9 {
    affine.for %j = 0 to 8 {
      %x = affine.load %v[%i - 1, %j] : memref<9x9xf32, strided<[10, 1], offset: 1>>
      %w = arith.addf %x, %one : f32
      affine.store %w, %A[%i, %j] : memref<10x10xf32>
    }
  } {loom.tag = "view"}
  func.return
}

// -----

// %m is %a or %b, chosen at run time: a buffer of unknown origin, which may be %b. Its
// accesses meet those of every buffer in any direction (memref_root took the select's
// first memref operand, %a, for its buffer: no dependence, and a different result).
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-interchange: order [1, 0] breaks the dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 5]]) -> store %m[%i, %j] (line [[# @LINE + 6]]), direction (*, *) (%m, the result of 'arith.select', may be any buffer) in band (i, j); legal orders: [0, 1]
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
// CHECK: refuse.mlir:[[# @LINE + 7]]:3: error: loom-interchange: order [1, 0] breaks the dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 9]]) -> store %m[%i, %j] (line [[# @LINE + 10]]), direction (*, *) (%m, the result of 'scf.if', may be any buffer) in band (i, j); legal orders: [0, 1]
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
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-interchange: order [1, 0] breaks the dependence load %a[%i, 1] (line [[# @LINE + 4]]) -> store %a[%i, 0] (line [[# @LINE + 6]]), direction (*, *) (the layout of %a reaches some elements from several indices) in band (i, j); legal orders: [0, 1]
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

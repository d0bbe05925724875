// RUN: not loom-opt %s -p 'loom-tile{sizes=2,2}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-tile{sizes=0,4}' --split-input-file 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not loom-opt %s -p 'loom-tile{sizes=4,-2}' --split-input-file 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not loom-opt %s -p 'loom-tile{sizes=2 depth=-1}' --split-input-file 2>&1 | filecheck %s --check-prefix=DEPTH
// RUN: not loom-opt %s -p 'loom-tile{sizes=2,2,2 op=stencil}' --split-input-file 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not loom-opt %s -p 'loom-tile{sizes=2 depth=5 op=stencil}' --split-input-file 2>&1 | filecheck %s --check-prefix=DEEP
// RUN: not loom-opt %s -p 'loom-hoist,loom-tile{sizes=2 op=sum}' --split-input-file 2>&1 | filecheck %s --check-prefix=CARRY

// Invalid options: an error naming the pass and the option, and no output.
// ZERO-COUNT-2: {{^}}loom-opt: error: loom-tile: option 'sizes' must be positive integers, got [0, 4]
// ZERO-NOT: affine.for
// NEG-COUNT-2: {{^}}loom-opt: error: loom-tile: option 'sizes' must be positive integers, got [4, -2]
// NEG-NOT: affine.for
// DEPTH-COUNT-2: {{^}}loom-opt: error: loom-tile: option 'depth' must be >= 0, got -1
// DEPTH-NOT: affine.for

// A[i, j] = A[i - 1, j + 1]: iteration (i, j) reads what (i - 1, j + 1) wrote, direction
// (<, >). Tiled, the reader (i, j) runs in an earlier j-tile than the writer
// (i - 1, j + 1) when both share an i-tile: the loops are not fully permutable.
// CHECK: refuse.mlir:[[# @LINE + 6]]:3: error: loom-tile: cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, dependence store %a[%i, %j] (line [[# @LINE + 10]]) -> load %a[%i - 1, %j + 1] (line [[# @LINE + 8]]), direction (<, >)
// With op=, a nest whose band is shorter than the sizes is an error, not a skip.
// MANY: refuse.mlir:[[# @LINE + 4]]:3: error: loom-tile: option 'sizes' gives 3 sizes, but nest 'stencil': its band at depth 0, (i, j), has 2 loops
// DEEP: refuse.mlir:[[# @LINE + 3]]:3: error: loom-tile: option 'sizes' gives 1 size, but nest 'stencil': its perfect band (i, j) has 2 loops, none at depth 5
// CHECK-NOT: affine.for %i_t
func.func @stencil(%a: memref<8x8xf32>) {
  affine.for %i = 1 to 8 {
    affine.for %j = 0 to 7 {
      %v = affine.load %a[%i - 1, %j + 1] : memref<8x8xf32>
      %w = arith.addf %v, %v : f32
      affine.store %w, %a[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}

// -----

// A triangular band: the bounds of j use i, so the tile loops cannot be hoisted out.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-tile: cannot tile (i, j) of nest 'tri': the bounds of loop %j use %i (the band is not rectangular)
func.func @triangular(%a: memref<8x8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = affine_map<(d0) -> (d0)>(%i) to 8 {
      affine.store %z, %a[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "tri"}
  func.return
}

// -----

// A vector store beside a scalar load of the same buffer: the store of iteration (i, j)
// writes A[i, j .. j + 3], which the load of iteration (i + 2, j - 4) reads (A[i, j + 1]):
// direction (<, >), so the loops are not fully permutable. (The dependence is found only
// when the vector's 4 lanes are counted: lane 0 alone would meet the load nowhere.)
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-tile: cannot tile (i, j) of nest 'mixed': the loops are not fully permutable, dependence vector_store %A[%i, %j] (line [[# @LINE + 6]]) -> load %A[%i - 2, %j + 5] (line [[# @LINE + 4]]), direction (<, >)
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

// %m is %a or %b, chosen at run time: a buffer of unknown origin, which may be %b. Its
// accesses meet those of every buffer in any direction (memref_root took the select's
// first memref operand, %a, for its buffer: no dependence, and a different result).
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-tile: cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 5]]) -> store %m[%i, %j] (line [[# @LINE + 6]]), direction (*, *) (%m, the result of 'arith.select', may be any buffer)
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
// CHECK: refuse.mlir:[[# @LINE + 7]]:3: error: loom-tile: cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, dependence load %b[%i - 1, %j + 1] (line [[# @LINE + 9]]) -> store %m[%i, %j] (line [[# @LINE + 10]]), direction (*, *) (%m, the result of 'scf.if', may be any buffer)
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
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-tile: cannot tile (i, j) of nest 'stencil': the loops are not fully permutable, dependence load %a[%i, 1] (line [[# @LINE + 4]]) -> store %a[%i, 0] (line [[# @LINE + 6]]), direction (*, *) (the layout of %a reaches some elements from several indices)
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

// -----

// After loom-hoist, %i and %j carry the sum (iter_args): the tile loop would not carry it.
// CARRY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-tile: cannot tile (i) of nest 'sum': loop %i carries values (iter_args): tile before loom-hoist
func.func @sum(%a: memref<6x8xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 6 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[%i, %j] : memref<6x8xf32>
      %p = affine.load %s[0] : memref<1xf32>
      %q = arith.addf %p, %x : f32
      affine.store %q, %s[0] : memref<1xf32>
    }
  } {loom.tag = "sum"}
  func.return
}

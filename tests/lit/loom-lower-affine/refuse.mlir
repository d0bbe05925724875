// RUN: not loom-opt %s -p loom-lower-affine --split-input-file 2>&1 | filecheck %s

// What loom-lower-affine refuses, each with the location of the op and the reason.
// (A floordiv/mod by a symbol, `d0 floordiv s0`, never reaches the pass: xDSL 0.74's
// parser does not accept semi-affine maps.)

// A mod by a negative constant has no lowering to remsi that keeps its meaning.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-lower-affine: cannot lower '(d0 mod -2)': mod by non-positive constant -2
func.func @mod_by_negative(%i: index) -> index {
  %0 = affine.apply affine_map<(d0) -> (d0 mod -2)>(%i)
  func.return %0 : index
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 3]]:5: error: loom-lower-affine: cannot lower '(s0 floordiv 0)': floordiv by non-positive constant 0
func.func @load_div_by_zero(%m: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %v = affine.load %m[%i floordiv 0] : memref<8xf32>
  }
  func.return
}

// -----

// The bounds of a loop are checked as well as its body.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-lower-affine: cannot lower '(d0 ceildiv -4)': ceildiv by non-positive constant -4
func.func @bound_ceildiv_by_negative(%n: index) {
  affine.for %i = 0 to affine_map<(d0) -> (d0 ceildiv -4)>(%n) {
  }
  func.return
}

// -----

// Reductions are not lowered (to scf.reduce regions) yet. The unused index operand is
// what xDSL 0.74's verifier asks of an affine.parallel with a result.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-lower-affine: cannot lower affine.parallel with reductions
func.func @parallel_with_reduction(%m: memref<10xf32>, %n: index) -> f32 {
  %r = "affine.parallel"(%n) <{lowerBoundsMap = affine_map<() -> (0)>, lowerBoundsGroups = dense<1> : vector<1xi32>, upperBoundsMap = affine_map<() -> (10)>, upperBoundsGroups = dense<1> : vector<1xi32>, steps = [1 : i64], reductions = ["addf"]}> ({
  ^bb0(%i: index):
    %v = affine.load %m[%i] : memref<10xf32>
    "affine.yield"(%v) : (f32) -> ()
  }) : (index) -> f32
  func.return %r : f32
}

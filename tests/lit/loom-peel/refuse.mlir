// RUN: not loom-opt %s -p 'loom-peel{sizes=0,16}' --split-input-file 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not loom-opt %s -p 'loom-peel' --split-input-file 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not loom-opt %s -p 'loom-peel{sizes=4,16,2 op=stencil}' --split-input-file 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not loom-opt %s -p 'loom-peel{sizes=6,16 op=sym}' --split-input-file 2>&1 | filecheck %s --check-prefix=SYM
// RUN: not loom-opt %s -p 'loom-peel{sizes=1,16 op=stencil}' --split-input-file 2>&1 | filecheck %s --check-prefix=DEP
// RUN: loom-opt %s -p 'loom-peel{sizes=6,16}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=SKIP
// RUN: not loom-opt %s -p 'loom-peel{sizes=4,16,2}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=SKIP-MANY

// What loom-peel refuses: with op=, an error at the nest and nothing changed (the input
// split that holds it prints no module); without op=, the same nests are skipped with a
// remark and left as they are, unless the sizes fit no nest of the module (SKIP-MANY):
// then the pass would do nothing, an error.

// Invalid options: an error naming the pass and the option (once per input split),
// before any nest is looked at, and no output.
// ZERO-COUNT-2: {{^}}loom-opt: error: loom-peel: option 'sizes' must be positive integers, got [0, 16]
// ZERO-NOT: affine.for
// NONE-COUNT-2: {{^}}loom-opt: error: loom-peel: option 'sizes' is required (a list of positive integers)
// NONE-NOT: affine.for

// A[i, j] = A[i - 1, j + 1] + 1: iteration (i, j) reads what (i - 1, j + 1) wrote, the
// dependence (<, >). Peeling j at 32 would run every (i, j) with j < 32 before any with
// j >= 32, so the reader (i, 31) would run before the writer (i - 1, 32): the split
// breaks the dependence and is refused.
// DEP: refuse.mlir:[[# @LINE + 13]]:3: error: loom-peel: cannot peel nest 'stencil': peeling would reorder the dependence store %A[%i, %j] (line [[# @LINE + 17]]) -> load %A[%i - 1, %j + 1] (line [[# @LINE + 15]]), direction (<, >)
// DEP-NOT: func.func @stencil
// Three sizes for the two loops of the band.
// MANY: refuse.mlir:[[# @LINE + 10]]:3: error: loom-peel: cannot peel nest 'stencil': 3 sizes [4, 16, 2] for the 2 loops of band (i, j)
// MANY-NOT: func.func @stencil
// Without op=: skipped with a remark, the nest as it was.
// SKIP-LABEL: func.func @stencil
// SKIP:      affine.for %i = 1 to 10 {
// SKIP-NEXT:   affine.for %j = 0 to 39 {
// SKIP:      } {loom.tag = "stencil"}
// SKIP:      refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-peel] nest 'stencil' skipped: peeling would reorder the dependence store %A[%i, %j] (line [[# @LINE + 7]]) -> load %A[%i - 1, %j + 1] (line [[# @LINE + 5]]), direction (<, >)
// SKIP-MANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-peel: the options fit no loop nest: nest 'stencil': 3 sizes [4, 16, 2] for the 2 loops of band (i, j)
func.func @stencil(%A: memref<10x40xf32>, %one: f32) {
  affine.for %i = 1 to 10 {
    affine.for %j = 0 to 39 {
      %v = affine.load %A[%i - 1, %j + 1] : memref<10x40xf32>
      %w = arith.addf %v, %one : f32
      affine.store %w, %A[%i, %j] : memref<10x40xf32>
    }
  } {loom.tag = "stencil"}
  func.return
}

// -----

// Loop i runs to %n: there is no constant split point for size 6.
// SYM: refuse.mlir:[[# @LINE + 10]]:3: error: loom-peel: cannot peel nest 'sym': loop %i of band (i, j) has no constant bounds
// SYM-NOT: affine.for
// Without op=: skipped with a remark, the nest as it was.
// SKIP-LABEL: func.func @symbolic
// SKIP:      affine.for %i = 0 to %n {
// SKIP-NEXT:   affine.for %j = 0 to 37 {
// SKIP:      } {loom.tag = "sym"}
// SKIP:      refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-peel] nest 'sym' skipped: loop %i of band (i, j) has no constant bounds
// SKIP-MANY: refuse.mlir:[[# @LINE + 2]]:3: error: loom-peel: the options fit no loop nest: nest 'sym': 3 sizes [4, 16, 2] for the 2 loops of band (i, j)
func.func @symbolic(%m: memref<?x37xf32>, %n: index, %v: f32) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to 37 {
      affine.store %v, %m[%i, %j] : memref<?x37xf32>
    }
  } {loom.tag = "sym"}
  func.return
}

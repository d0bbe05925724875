// RUN: not loom-opt %s -p 'loom-tile{sizes=4,4,4}' --split-input-file 2>&1 | filecheck %s
// RUN: loom-opt %s -p 'loom-tile{sizes=3,5}' --split-input-file | filecheck %s --check-prefix=MIN
// RUN: not loom-opt %s -p 'loom-tile{sizes=4,4,4},loom-tile{sizes=2,2,2 depth=3}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=TWO
// RUN: not loom-opt %s -p 'loom-tile{sizes=2 op=matmull}' --split-input-file 2>&1 | filecheck %s --check-prefix=OP
// RUN: loom-opt %s -p 'loom-tile{sizes=64,3}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=REMARK

// A matmul nest, 8 x 8 x 8: every size divides its extent, so the point loops run a whole
// tile (single-result bounds) and the tag moves to the outermost tile loop.
// CHECK-LABEL: func.func @matmul
// CHECK:      affine.for %i_t = 0 to 8 step 4 {
// CHECK-NEXT:   affine.for %j_t = 0 to 8 step 4 {
// CHECK-NEXT:     affine.for %k_t = 0 to 8 step 4 {
// CHECK-NEXT:       affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 4))>(%i_t) {
// CHECK-NEXT:         affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 4))>(%j_t) {
// CHECK-NEXT:           affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> ((d0 + 4))>(%k_t) {
// CHECK-NEXT:             affine.load %a[%i, %k]
// CHECK:                  affine.store %{{.*}}, %c[%i, %j]
// CHECK:      } {loom.tag = "matmul"}

// Two levels: the intra-tile band (i, j, k) is tiled again by 2; its extent is the
// constant 4 (from %i_t to %i_t + 4), which 2 divides.
// TWO-LABEL: func.func @matmul
// TWO:      affine.for %i_t = 0 to 8 step 4 {
// TWO-NEXT:   affine.for %j_t = 0 to 8 step 4 {
// TWO-NEXT:     affine.for %k_t = 0 to 8 step 4 {
// TWO-NEXT:       affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 4))>(%i_t) step 2 {
// TWO-NEXT:         affine.for %j_t2 = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 4))>(%j_t) step 2 {
// TWO-NEXT:           affine.for %k_t2 = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> ((d0 + 4))>(%k_t) step 2 {
// TWO-NEXT:             affine.for %i = affine_map<(d0) -> (d0)>(%i_t2) to affine_map<(d0) -> ((d0 + 2))>(%i_t2) {
// TWO-NEXT:               affine.for %j = affine_map<(d0) -> (d0)>(%j_t2) to affine_map<(d0) -> ((d0 + 2))>(%j_t2) {
// TWO-NEXT:                 affine.for %k = affine_map<(d0) -> (d0)>(%k_t2) to affine_map<(d0) -> ((d0 + 2))>(%k_t2) {
// TWO-NEXT:                   affine.load %a[%i, %k]
// TWO:      } {loom.tag = "matmul"}

// With sizes 3 and 5, neither divides 8: the point loops stop at min(tile + size, 8);
// loop k is not tiled.
// MIN-LABEL: func.func @matmul
// MIN:      affine.for %i_t = 0 to 8 step 3 {
// MIN-NEXT:   affine.for %j_t = 0 to 8 step 5 {
// MIN-NEXT:     affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> ((d0 + 3), 8)>(%i_t) {
// MIN-NEXT:       affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 5), 8)>(%j_t) {
// MIN-NEXT:         affine.for %k = 0 to 8 {
// MIN:      } {loom.tag = "matmul"}

// No nest tagged 'matmull' (a typo): an error that names the tags there are and the
// closest one; nothing printed.
// OP: tile.mlir:[[# @LINE + 6]]:3: error: loom-tile: option 'op' is 'matmull', but no loop nest is tagged so (did you mean 'matmul'?); the tags present: 'matmul'
// OP-NOT: func.func @matmul

// REMARK-DAG: tile.mlir:[[# @LINE + 3]]:3: remark: [loom-tile] size 64 for loop %i clamped to its trip count 8
// REMARK-DAG: tile.mlir:[[# @LINE + 2]]:3: remark: [loom-tile] nest 'matmul': tiled (i, j) at depth 0, sizes requested [64, 3], applied [8, 3]
func.func @matmul(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x8xf32>
        %z = affine.load %c[%i, %j] : memref<8x8xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Bounds that are not constants: a symbol upper bound joins the min. Loop j steps by 2
// over 1..9 (4 iterations): size 5 is clamped to 4, a tile loop step of 8 and no min.
// MIN-LABEL: func.func @symbolic
// MIN:      affine.for %i_t = 0 to %n step 3 {
// MIN-NEXT:   affine.for %j_t = 1 to 9 step 8 {
// MIN-NEXT:     affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0)[s0] -> ((d0 + 3), s0)>(%i_t)[%n] {
// MIN-NEXT:       affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 8))>(%j_t) step 2 {
// MIN-NEXT:         affine.store %v, %m[%i, %j] : memref<?x9xf32>

// Three sizes for a 2-deep band, the only nest: the pass would do nothing, an error (a
// nest that does not fit beside one that does is skipped with a remark: see @init).
// CHECK: tile.mlir:[[# @LINE + 5]]:3: error: loom-tile: the options fit no loop nest: nest 'add': 3 sizes, but its band at depth 0, (i, j), has 2 loops

// REMARK: tile.mlir:[[# @LINE + 3]]:3: remark: [loom-tile] nest 'add': tiled (i, j) at depth 0, sizes requested [64, 3], applied [64, 3]
// REMARK-NOT: clamped
func.func @symbolic(%m: memref<?x9xf32>, %n: index, %v: f32) {
  affine.for %i = 0 to %n {
    affine.for %j = 1 to 9 step 2 {
      affine.store %v, %m[%i, %j] : memref<?x9xf32>
    }
  } {loom.tag = "add"}
  func.return
}

// -----

// A 1-deep nest and two sizes: skipped, with a remark saying why; the 2-deep nest beside
// it is tiled.
// REMARK: tile.mlir:[[# @LINE + 3]]:3: remark: [loom-tile] nest 'matmul.init' skipped: 2 sizes, but its band at depth 0, (i), has 1 loop
// REMARK: tile.mlir:[[# @LINE + 5]]:3: remark: [loom-tile] nest 'fill': tiled (i, j) at depth 0, sizes requested [64, 3], applied [8, 3]
func.func @init(%c: memref<8xf32>, %d: memref<8x8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.store %z, %c[%i] : memref<8xf32>
  } {loom.tag = "matmul.init"}
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.store %z, %d[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "fill"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,1,6,2 op=tiled}' --split-input-file 2>/dev/null | filecheck %s
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,1,6,2 op=tiled}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=LOOPS
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,3 op=matmul}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=INNER
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,8 op=fill}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=PROMOTE
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=4,2 op=fill}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=ROOT
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=7 op=row}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=ROW
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,1,6,2 op=tiled}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// The runs name a nest by op=: in the chunks that have no nest with that tag they end
// in an error (an unknown tag is not ignored: see loom-tile/tile.mlir), hence `not`.

// The register tile of a matmul as `loom-tile{sizes=6,16},loom-interchange{order=0,1,4,2,3}`
// leave it: (i_t, j_t, k, i, j), with constant-extent point loops i (6) and j (16).
// factors=1,1,1,6,2 has one factor per band loop: the last one unrolls the innermost loop
// j by 2 (nothing inside to jam); then i is unrolled by its whole trip count 6 and
// jammed. The main loop of i is left with one iteration: it is replaced by its body,
// whose copies read %i_t for %i, directly inside the k loop. The 12 copies are grouped by
// row: (%i_t, %j), (%i_t, %j + 1), (%i_t + 1, %j), ..., (%i_t + 5, %j + 1).
// CHECK-LABEL: func.func @tiled
// CHECK:      affine.for %i_t = 0 to 12 step 6 {
// CHECK-NEXT:   affine.for %j_t = 0 to 32 step 16 {
// CHECK-NEXT:     affine.for %k = 0 to 8 {
// CHECK-NEXT:       affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 16))>(%j_t) step 2 {
// CHECK-NEXT:         %x = affine.load %a[%i_t, %k] : memref<12x8xf32>
// CHECK-NEXT:         %y = affine.load %b[%k, %j] : memref<8x32xf32>
// CHECK-NEXT:         %z = affine.load %c[%i_t, %j] : memref<12x32xf32>
// CHECK-NEXT:         %p = arith.mulf %x, %y : f32
// CHECK-NEXT:         %s = arith.addf %z, %p : f32
// CHECK-NEXT:         affine.store %s, %c[%i_t, %j] : memref<12x32xf32>
// CHECK-NEXT:         affine.load %a[%i_t, %k]
// CHECK-NEXT:         affine.load %b[%k, %j + 1]
// CHECK-NEXT:         affine.load %c[%i_t, %j + 1]
// CHECK:              affine.store %{{.*}}, %c[%i_t, %j + 1] : memref<12x32xf32>
// CHECK-NEXT:         affine.load %a[%i_t + 1, %k]
// CHECK-NEXT:         affine.load %b[%k, %j]
// CHECK-NEXT:         affine.load %c[%i_t + 1, %j]
// CHECK:              affine.store %{{.*}}, %c[%i_t + 1, %j] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 1, %j + 1] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 2, %j] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 2, %j + 1] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 3, %j] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 3, %j + 1] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 4, %j] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 4, %j + 1] : memref<12x32xf32>
// CHECK:              affine.store %{{.*}}, %c[%i_t + 5, %j] : memref<12x32xf32>
// CHECK-NEXT:         affine.load %a[%i_t + 5, %k]
// CHECK-NEXT:         affine.load %b[%k, %j + 1]
// CHECK-NEXT:         affine.load %c[%i_t + 5, %j + 1]
// CHECK-NEXT:         arith.mulf
// CHECK-NEXT:         arith.addf
// CHECK-NEXT:         affine.store %{{.*}}, %c[%i_t + 5, %j + 1] : memref<12x32xf32>
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "tiled"}
// CHECK-NEXT: func.return
// Four loops are left (i_t, j_t, k, j): none over %i, no cleanup loop (6 and 2 divide
// the extents 6 and 16).
// LOOPS-LABEL: func.func @tiled
// LOOPS-COUNT-4: affine.for
// LOOPS-NOT:     affine.for
// LOOPS:         } {loom.tag = "tiled"}
// REMARK: innermost.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (i_t, j_t, k, i, j): factors [1, 1, 1, 6, 2] requested, [1, 1, 1, 6, 2] applied, 12 copies of the body; i by 6 (trip count 6: 1 main iterations, 0 in the cleanup loop); j by 2 (trip count 16: 8 main iterations, 0 in the cleanup loop)
func.func @tiled(%a: memref<12x8xf32>, %b: memref<8x32xf32>, %c: memref<12x32xf32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %j_t = 0 to 32 step 16 {
      affine.for %k = 0 to 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 16)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<12x8xf32>
            %y = affine.load %b[%k, %j] : memref<8x32xf32>
            %z = affine.load %c[%i, %j] : memref<12x32xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<12x32xf32>
          }
        }
      }
    }
  } {loom.tag = "tiled"}
  func.return
}

// -----

// factors=1,1,3 on (i, j, k): a factor for the innermost loop unrolls it, 3 copies of the
// body per iteration along k (each reading and writing C[i, j] in turn), and a cleanup
// loop over the last 8 mod 3 = 2 iterations.
// INNER-LABEL: func.func @matmul
// INNER:      affine.for %i = 0 to 4 {
// INNER-NEXT:   affine.for %j = 0 to 5 {
// INNER-NEXT:     affine.for %k = 0 to 6 step 3 {
// INNER-NEXT:       affine.load %a[%i, %k]
// INNER-NEXT:       affine.load %b[%k, %j]
// INNER-NEXT:       affine.load %c[%i, %j]
// INNER:            affine.store %{{.*}}, %c[%i, %j]
// INNER-NEXT:       affine.load %a[%i, %k + 1]
// INNER-NEXT:       affine.load %b[%k + 1, %j]
// INNER-NEXT:       affine.load %c[%i, %j]
// INNER:            affine.store %{{.*}}, %c[%i, %j]
// INNER-NEXT:       affine.load %a[%i, %k + 2]
// INNER-NEXT:       affine.load %b[%k + 2, %j]
// INNER-NEXT:       affine.load %c[%i, %j]
// INNER:            affine.store %{{.*}}, %c[%i, %j]
// INNER-NEXT:     }
// INNER-NEXT:     affine.for %[[KR:.*]] = 6 to 8 {
// INNER-NEXT:       affine.load %a[%i, %[[KR]]]
// INNER-NEXT:       affine.load %b[%[[KR]], %j]
// INNER:            affine.store %{{.*}}, %c[%i, %j]
// INNER-NEXT:     }
// INNER-NEXT:   }
// INNER-NEXT: } {loom.tag = "matmul"}
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x5xf32>, %c: memref<4x5xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<4x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x5xf32>
        %z = affine.load %c[%i, %j] : memref<4x5xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x5xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// factors=1,8 unrolls the innermost loop j, 8 iterations, entirely: the one-iteration
// main loop is replaced by its body, the iv read through an affine.apply of the lower
// bound (a constant, not an operand).
// PROMOTE-LABEL: func.func @fill
// PROMOTE:      affine.for %i = 0 to 4 {
// PROMOTE-NEXT:   %[[J:.*]] = affine.apply affine_map<() -> (0)> ()
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]]] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 1] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 2] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 3] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 4] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 5] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 6] : memref<4x8xf32>
// PROMOTE-NEXT:   affine.store %v, %m[%i, %[[J]] + 7] : memref<4x8xf32>
// PROMOTE-NEXT: } {loom.tag = "fill"}
// PROMOTE-NEXT: func.return

// The nest's root loop is never promoted, even with a single iteration: it keeps the
// tag. factors=4,2: i (4 iterations) by 4 stays a loop `0 to 4 step 4` around the jammed
// j loop.
// ROOT-LABEL: func.func @fill
// ROOT:      affine.for %i = 0 to 4 step 4 {
// ROOT-NEXT:   affine.for %j = 0 to 8 step 2 {
// ROOT-NEXT:     affine.store %v, %m[%i, %j] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i, %j + 1] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 1, %j] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 1, %j + 1] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 2, %j] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 2, %j + 1] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 3, %j] : memref<4x8xf32>
// ROOT-NEXT:     affine.store %v, %m[%i + 3, %j + 1] : memref<4x8xf32>
// ROOT-NEXT:   }
// ROOT-NEXT: } {loom.tag = "fill"}
// ROOT-NEXT: func.return
func.func @fill(%m: memref<4x8xf32>, %v: f32) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      affine.store %v, %m[%i, %j] : memref<4x8xf32>
    }
  } {loom.tag = "fill"}
  func.return
}

// -----

// A one-loop nest unrolled by its trip count 7: the innermost loop is the root, which
// stays a loop (`0 to 7 step 7`, one iteration) with the tag.
// ROW-LABEL: func.func @row
// ROW:      affine.for %i = 0 to 7 step 7 {
// ROW-NEXT:   affine.store %v, %m[%i] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 1] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 2] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 3] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 4] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 5] : memref<7xf32>
// ROW-NEXT:   affine.store %v, %m[%i + 6] : memref<7xf32>
// ROW-NEXT: } {loom.tag = "row"}
// ROW-NEXT: func.return
func.func @row(%m: memref<7xf32>, %v: f32) {
  affine.for %i = 0 to 7 {
    affine.store %v, %m[%i] : memref<7xf32>
  } {loom.tag = "row"}
  func.return
}

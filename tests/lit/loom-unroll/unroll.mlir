// RUN: loom-opt %s -p 'loom-unroll{factor=4}' --split-input-file | filecheck %s
// RUN: not loom-opt %s -p 'loom-unroll{factor=4 op=other}' --split-input-file 2>&1 | filecheck %s --check-prefix=OP
// RUN: loom-opt %s -p 'loom-unroll{factor=4}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: loom-opt %s -p 'loom-unroll{factor=1}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=ONE

// A reduction over 10 elements by 4: the main loop steps 4 over 0..8 with the carried
// sum chained through the four copies (the offsets folded into the loads), then a
// remainder loop over 8..10 carries on from the main loop's result.
// CHECK-LABEL: func.func @sum
// CHECK:      %[[MAIN:.*]] = affine.for %k = 0 to 8 step 4 iter_args(%[[ACC:.*]] = %z) -> (f32) {
// CHECK-NEXT:   %[[V0:.*]] = affine.load %a[%k] : memref<10xf32>
// CHECK-NEXT:   %[[S0:.*]] = arith.addf %[[ACC]], %[[V0]] : f32
// CHECK-NEXT:   %[[V1:.*]] = affine.load %a[%k + 1] : memref<10xf32>
// CHECK-NEXT:   %[[S1:.*]] = arith.addf %[[S0]], %[[V1]] : f32
// CHECK-NEXT:   %[[V2:.*]] = affine.load %a[%k + 2] : memref<10xf32>
// CHECK-NEXT:   %[[S2:.*]] = arith.addf %[[S1]], %[[V2]] : f32
// CHECK-NEXT:   %[[V3:.*]] = affine.load %a[%k + 3] : memref<10xf32>
// CHECK-NEXT:   %[[S3:.*]] = arith.addf %[[S2]], %[[V3]] : f32
// CHECK-NEXT:   affine.yield %[[S3]] : f32
// CHECK-NEXT: } {loom.tag = "sum"}
// CHECK-NEXT: %[[REM:.*]] = affine.for %[[K:.*]] = 8 to 10 iter_args(%[[ACC2:.*]] = %[[MAIN]]) -> (f32) {
// CHECK-NEXT:   %[[V:.*]] = affine.load %a[%[[K]]] : memref<10xf32>
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[ACC2]], %[[V]] : f32
// CHECK-NEXT:   affine.yield %[[S]] : f32
// CHECK-NEXT: } {loom.tag = "sum"}
// CHECK-NEXT: affine.store %[[REM]], %s[0] : memref<1xf32>

// No nest tagged 'other': an error naming the tags there are, nothing printed.
// OP: unroll.mlir:[[# @LINE + 7]]:3: error: loom-unroll: option 'op' is 'other', but no loop nest is tagged so; the tags present: 'sum'
// OP-NOT: func.func @sum

// REMARK: unroll.mlir:[[# @LINE + 4]]:3: remark: [loom-unroll] loop %k of nest 'sum': unrolled by 4, requested 4; main loop 2 iterations of 4 copies, remainder 2
// ONE-COUNT-3: remark: [loom-unroll] factor 1: nothing to unroll
func.func @sum(%a: memref<10xf32>, %s: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %k = 0 to 10 iter_args(%acc = %z) -> (f32) {
    %v = affine.load %a[%k] : memref<10xf32>
    %n = arith.addf %acc, %v : f32
    affine.yield %n : f32
  } {loom.tag = "sum"}
  affine.store %r, %s[0] : memref<1xf32>
  func.return
}

// -----

// The point loop of a tile, %k_t to min(%k_t + 10, 100) with step 2: the split point,
// where whole groups of 4 iterations end, is computed before the loop; the remainder
// starts at max(split, %k_t). Every innermost loop of the nest is unrolled (both here).
// CHECK-LABEL: func.func @tiled
// CHECK:      affine.for %k_t = 0 to 100 step 10 {
// CHECK-NEXT:   %[[UB:.*]] = affine.min affine_map<(d0) -> ((d0 + 10), 100)> (%k_t)
// CHECK-NEXT:   %[[SPLIT:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + (((((d0 * -1) + d1) ceildiv 2) floordiv 4) * 8)))> (%k_t, %[[UB]])
// CHECK-NEXT:   affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0)>(%[[SPLIT]]) step 8 {
// CHECK-NEXT:     affine.store %z, %m[%k] : memref<100xf32>
// CHECK-NEXT:     affine.store %z, %m[%k + 2] : memref<100xf32>
// CHECK-NEXT:     affine.store %z, %m[%k + 4] : memref<100xf32>
// CHECK-NEXT:     affine.store %z, %m[%k + 6] : memref<100xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.for %[[K:.*]] = max affine_map<(d0, d1) -> (d0, d1)>(%[[SPLIT]], %k_t) to min affine_map<(d0) -> ((d0 + 10), 100)>(%k_t) step 2 {
// CHECK-NEXT:     affine.store %z, %m[%[[K]]] : memref<100xf32>
// CHECK-NEXT:   }
// An affine.if reading the iv gets the offset in its condition.
// CHECK-NEXT:   affine.for %j = 0 to 8 step 4 {
// CHECK-NEXT:     "affine.if"(%j) <{condition = affine_set<(d0) : ((d0 + -2) >= 0)>}> ({
// CHECK-NEXT:       affine.store %z, %m[%j] : memref<100xf32>
// CHECK:          "affine.if"(%j) <{condition = affine_set<(d0) : ((d0 + -1) >= 0)>}> ({
// CHECK-NEXT:       affine.store %z, %m[%j + 1] : memref<100xf32>
// CHECK:      } {loom.tag = "zero"}

// REMARK: unroll.mlir:[[# @LINE + 4]]:5: remark: [loom-unroll] loop %k of nest 'zero': unrolled by 4, requested 4; trip count not constant: main and remainder split at run time
// REMARK: unroll.mlir:[[# @LINE + 6]]:5: remark: [loom-unroll] loop %j of nest 'zero': unrolled by 4, requested 4; main loop 2 iterations of 4 copies, no remainder
func.func @tiled(%m: memref<100xf32>, %z: f32) {
  affine.for %k_t = 0 to 100 step 10 {
    affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> (d0 + 10, 100)>(%k_t) step 2 {
      affine.store %z, %m[%k] : memref<100xf32>
    }
    affine.for %j = 0 to 8 {
      "affine.if"(%j) <{condition = affine_set<(d0) : (d0 - 2 >= 0)>}> ({
        affine.store %z, %m[%j] : memref<100xf32>
        "affine.yield"() : () -> ()
      }, {
      }) : (index) -> ()
    }
  } {loom.tag = "zero"}
  func.return
}

// -----

// A point loop of at most 3 iterations (%k_t to min(%k_t + 6, 100) step 2): the factor
// is lowered to 3, since a main loop of 4 copies would never run; whether the tile is
// full is known at run time only, so the split stays.
// CHECK-LABEL: func.func @tiled_short
// CHECK:      affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0)>(%{{.*}}) step 6 {
// CHECK-NEXT:   affine.store %z, %m[%k] : memref<100xf32>
// CHECK-NEXT:   affine.store %z, %m[%k + 2] : memref<100xf32>
// CHECK-NEXT:   affine.store %z, %m[%k + 4] : memref<100xf32>
// CHECK-NEXT: }

// REMARK: unroll.mlir:[[# @LINE + 3]]:5: remark: [loom-unroll] loop %k of nest 'zero': unrolled by 3, requested 4 (clamped to the most iterations it runs, 3); trip count not constant: main and remainder split at run time
func.func @tiled_short(%m: memref<100xf32>, %z: f32) {
  affine.for %k_t = 0 to 100 step 6 {
    affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> (d0 + 6, 100)>(%k_t) step 2 {
      affine.store %z, %m[%k] : memref<100xf32>
    }
  } {loom.tag = "zero"}
  func.return
}

// -----

// A factor larger than the trip count (3) is clamped to it: one iteration of 3 copies.
// CHECK-LABEL: func.func @short
// CHECK:      affine.for %i = 0 to 3 step 3 {
// CHECK-NEXT:   affine.store %z, %m[%i] : memref<3xf32>
// CHECK-NEXT:   affine.store %z, %m[%i + 1] : memref<3xf32>
// CHECK-NEXT:   affine.store %z, %m[%i + 2] : memref<3xf32>
// CHECK-NEXT: } {loom.tag = "short"}
// CHECK-NOT:  affine.for

// REMARK: unroll.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll] loop %i of nest 'short': unrolled by 3, requested 4 (clamped to the trip count 3); main loop 1 iteration of 3 copies, no remainder
func.func @short(%m: memref<3xf32>, %z: f32) {
  affine.for %i = 0 to 3 {
    affine.store %z, %m[%i] : memref<3xf32>
  } {loom.tag = "short"}
  func.return
}

// -----

// A factor equal to the constant trip count of an inner loop (2, a point loop of a tile
// of 2): the one-iteration loop left is dropped, its iv read as the lower bound %j_t, so
// the copies sit directly in the outer loop; the carried value goes from init to result.
// CHECK-LABEL: func.func @single
// CHECK:      affine.for %j_t = 0 to 8 step 2 {
// CHECK-NEXT:   %[[V0:.*]] = affine.load %a[%j_t] : memref<8xf32>
// CHECK-NEXT:   %[[S0:.*]] = arith.addf %z, %[[V0]] : f32
// CHECK-NEXT:   %[[V1:.*]] = affine.load %a[%j_t + 1] : memref<8xf32>
// CHECK-NEXT:   %[[S1:.*]] = arith.addf %[[S0]], %[[V1]] : f32
// CHECK-NEXT:   affine.store %[[S1]], %s[%j_t] : memref<8xf32>
// CHECK-NEXT: } {loom.tag = "single"}

// REMARK: unroll.mlir:[[# @LINE + 3]]:5: remark: [loom-unroll] loop %j of nest 'single': unrolled by 2, requested 4 (clamped to the trip count 2); a single iteration: the loop is replaced by the copies
func.func @single(%a: memref<8xf32>, %s: memref<8xf32>, %z: f32) {
  affine.for %j_t = 0 to 8 step 2 {
    %r = affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 2)>(%j_t) iter_args(%acc = %z) -> (f32) {
      %v = affine.load %a[%j] : memref<8xf32>
      %n = arith.addf %acc, %v : f32
      affine.yield %n : f32
    }
    affine.store %r, %s[%j_t] : memref<8xf32>
  } {loom.tag = "single"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,2 op=matmul}' --split-input-file 2>/dev/null | filecheck %s
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2 op=ikj}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=IKJ
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,2,3 op=tiled}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=TILED
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=1,1,2 op=conv2d}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=CONV
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,2 op=matmul}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=8 op=ikj}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK-IKJ
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,1,2 op=tiled}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=TILE-LOOP
// RUN: not loom-opt %s -p 'loom-unroll-jam{factors=2,2 op=hoisted}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=HOISTED

// The runs name a nest by op=: in the chunks that have no nest with that tag they end
// in an error (an unknown tag is not ignored: see loom-tile/tile.mlir), hence `not`.

// i by 2 divides 4: no cleanup; j by 2 leaves one of 5 iterations to a cleanup loop,
// which still has the copies of i. The jammed body holds (i, j), (i, j+1), (i+1, j),
// (i+1, j+1): the copies of the outer loop vary slowest.
// CHECK-LABEL: func.func @matmul
// CHECK:      affine.for %i = 0 to 4 step 2 {
// CHECK-NEXT:   affine.for %j = 0 to 4 step 2 {
// CHECK-NEXT:     affine.for %k = 0 to 3 {
// CHECK-NEXT:       %[[A0:.*]] = affine.load %a[%i, %k] : memref<4x3xf32>
// CHECK-NEXT:       %[[B0:.*]] = affine.load %b[%k, %j] : memref<3x5xf32>
// CHECK-NEXT:       %[[C0:.*]] = affine.load %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT:       %[[P0:.*]] = arith.mulf %[[A0]], %[[B0]] : f32
// CHECK-NEXT:       %[[S0:.*]] = arith.addf %[[C0]], %[[P0]] : f32
// CHECK-NEXT:       affine.store %[[S0]], %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT:       %[[A1:.*]] = affine.load %a[%i, %k] : memref<4x3xf32>
// CHECK-NEXT:       %[[B1:.*]] = affine.load %b[%k, %j + 1] : memref<3x5xf32>
// CHECK-NEXT:       %[[C1:.*]] = affine.load %c[%i, %j + 1] : memref<4x5xf32>
// CHECK-NEXT:       %[[P1:.*]] = arith.mulf %[[A1]], %[[B1]] : f32
// CHECK-NEXT:       %[[S1:.*]] = arith.addf %[[C1]], %[[P1]] : f32
// CHECK-NEXT:       affine.store %[[S1]], %c[%i, %j + 1] : memref<4x5xf32>
// CHECK-NEXT:       affine.load %a[%i + 1, %k]
// CHECK-NEXT:       affine.load %b[%k, %j]
// CHECK-NEXT:       affine.load %c[%i + 1, %j]
// CHECK:            affine.store %{{.*}}, %c[%i + 1, %j] : memref<4x5xf32>
// CHECK-NEXT:       affine.load %a[%i + 1, %k]
// CHECK-NEXT:       affine.load %b[%k, %j + 1]
// CHECK-NEXT:       affine.load %c[%i + 1, %j + 1]
// CHECK:            affine.store %{{.*}}, %c[%i + 1, %j + 1] : memref<4x5xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.for %[[JR:.*]] = 4 to 5 {
// CHECK-NEXT:     affine.for %[[KR:.*]] = 0 to 3 {
// CHECK-NEXT:       affine.load %a[%i, %[[KR]]]
// CHECK:            affine.store %{{.*}}, %c[%i, %[[JR]]] : memref<4x5xf32>
// CHECK-NEXT:       affine.load %a[%i + 1, %[[KR]]]
// CHECK:            affine.store %{{.*}}, %c[%i + 1, %[[JR]]] : memref<4x5xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul"}
// CHECK-NEXT: func.return
// REMARK: unroll-jam.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (i, j, k): factors [2, 2] requested, [2, 2] applied, 4 copies of the body; i by 2 (trip count 4: 2 main iterations, 0 in the cleanup loop); j by 2 (trip count 5: 2 main iterations, 1 in the cleanup loop)
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

// The i, k, j order: unroll i by 2 and jam into the j body. 5 = 2 * 2 + 1: the cleanup
// nest over the last i is a second nest, tagged like the first.
// IKJ-LABEL: func.func @ikj
// IKJ:      affine.for %i = 0 to 4 step 2 {
// IKJ-NEXT:   affine.for %k = 0 to 3 {
// IKJ-NEXT:     affine.for %j = 0 to 4 {
// IKJ-NEXT:       affine.load %a[%i, %k]
// IKJ:            affine.store %{{.*}}, %c[%i, %j] : memref<5x4xf32>
// IKJ-NEXT:       affine.load %a[%i + 1, %k]
// IKJ:            affine.store %{{.*}}, %c[%i + 1, %j] : memref<5x4xf32>
// IKJ-NEXT:     }
// IKJ-NEXT:   }
// IKJ-NEXT: } {loom.tag = "ikj"}
// IKJ-NEXT: affine.for %[[IR:.*]] = 4 to 5 {
// IKJ-NEXT:   affine.for %[[KR:.*]] = 0 to 3 {
// IKJ-NEXT:     affine.for %[[JR:.*]] = 0 to 4 {
// IKJ-NEXT:       affine.load %a[%[[IR]], %[[KR]]]
// IKJ:            affine.store %{{.*}}, %c[%[[IR]], %[[JR]]] : memref<5x4xf32>
// IKJ-NEXT:     }
// IKJ-NEXT:   }
// IKJ-NEXT: } {loom.tag = "ikj"}
// A factor above the trip count is lowered to it.
// REMARK-IKJ: unroll-jam.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (i, k, j): factors [8] requested, [5] applied, 5 copies of the body; i by 5 (trip count 5: 1 main iterations, 0 in the cleanup loop)
func.func @ikj(%a: memref<5x3xf32>, %b: memref<3x4xf32>, %c: memref<5x4xf32>) {
  affine.for %i = 0 to 5 {
    affine.for %k = 0 to 3 {
      affine.for %j = 0 to 4 {
        %0 = affine.load %a[%i, %k] : memref<5x3xf32>
        %1 = affine.load %b[%k, %j] : memref<3x4xf32>
        %2 = affine.load %c[%i, %j] : memref<5x4xf32>
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%i, %j] : memref<5x4xf32>
      }
    }
  } {loom.tag = "ikj"}
  func.return
}

// -----

// The point loops of a tiled band: non-constant bounds. The split point is computed
// before each unrolled loop, lb + ((ub - lb) floordiv f) * f with ub the min of the
// upper bound map; the cleanup loop runs from max(split, lb) to the original ub.
// TILED-LABEL: func.func @tiled
// TILED:      affine.for %it = 0 to 10 step 4 {
// TILED-NEXT:   affine.for %jt = 0 to 9 step 4 {
// TILED-NEXT:     %[[UBI:.*]] = affine.min affine_map<(d0) -> ((d0 + 4), 10)> (%it)
// TILED-NEXT:     %[[SPI:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + ((((d0 * -1) + d1) floordiv 2) * 2)))> (%it, %[[UBI]])
// TILED-NEXT:     affine.for %ii = %it to affine_map<(d0) -> (d0)>(%[[SPI]]) step 2 {
// TILED-NEXT:       %[[UBJ:.*]] = affine.min affine_map<(d0) -> ((d0 + 4), 9)> (%jt)
// TILED-NEXT:       %[[SPJ:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + ((((d0 * -1) + d1) floordiv 3) * 3)))> (%jt, %[[UBJ]])
// TILED-NEXT:       affine.for %jj = %jt to affine_map<(d0) -> (d0)>(%[[SPJ]]) step 3 {
// TILED-NEXT:         affine.for %k = 0 to 7 {
// TILED-COUNT-6:        affine.store
// TILED-NEXT:         }
// TILED-NEXT:       }
// TILED-NEXT:       affine.for %[[JJR:.*]] = max affine_map<(d0)[s0] -> (d0, s0)>(%[[SPJ]])[%jt] to min affine_map<(d0) -> ((d0 + 4), 9)>(%jt) {
// TILED-NEXT:         affine.for %{{.*}} = 0 to 7 {
// TILED:                affine.store %{{.*}}, %C[%ii, %[[JJR]]]
// TILED:                affine.store %{{.*}}, %C[%ii + 1, %[[JJR]]]
// TILED-NEXT:         }
// TILED-NEXT:       }
// TILED-NEXT:     }
// TILED-NEXT:     affine.for %[[IIR:.*]] = max affine_map<(d0)[s0] -> (d0, s0)>(%[[SPI]])[%it] to min affine_map<(d0) -> ((d0 + 4), 10)>(%it) {
// TILED-NEXT:       affine.min
// TILED-NEXT:       affine.apply
// TILED-NEXT:       affine.for %{{.*}} = %jt to {{.*}} step 3 {
// TILED-NEXT:         affine.for
// TILED-COUNT-3:        affine.store %{{.*}}, %C[%[[IIR]],
// TILED:        } {loom.tag = "tiled"}
// The copies of a tile loop cannot be jammed (the point loop's bounds differ per copy):
// it keeps factor 1, and the remark says why.
// TILE-LOOP-LABEL: func.func @tiled
// TILE-LOOP:      affine.for %it = 0 to 10 step 4 {
// TILE-LOOP-NEXT:   affine.for %jt = 0 to 9 step 4 {
// TILE-LOOP:          affine.for %ii = %it to affine_map<(d0) -> (d0)>(%{{.*}}) step 2 {
// TILE-LOOP: unroll-jam.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (it, jt, ii, jj, k): factors [2, 1, 2] requested, [1, 1, 2] applied, 2 copies of the body; ii by 2 (a cleanup loop for the rest); it not unrolled: the bounds of loop ii inside it depend on it
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
  } {loom.tag = "tiled"}
  func.return
}

// -----

// conv2d with padding: the shift of oh goes into the guard's condition as well as into
// the subscripts (oh + 1 + r - 1 >= 0 is d2 + d5 >= 0).
// CONV-LABEL: func.func @conv
// CONV:      affine.for %oh = 0 to 4 step 2 {
// CONV:        "affine.if"(%n, %f, %oh, %ow, %c, %r, %s) <{condition = affine_set<(d0, d1, d2, d3, d4, d5, d6) : (((d2 + d5) + -1) >= 0, (((d2 * -1) + (d5 * -1)) + 5) >= 0, ((d3 + d6) + -1) >= 0, (((d3 * -1) + (d6 * -1)) + 5) >= 0)>}>
// CONV:        affine.store %{{.*}}, %y[%n, %f, %oh, %ow]
// CONV:        "affine.if"(%n, %f, %oh, %ow, %c, %r, %s) <{condition = affine_set<(d0, d1, d2, d3, d4, d5, d6) : ((d2 + d5) >= 0, (((d2 * -1) + (d5 * -1)) + 4) >= 0, ((d3 + d6) + -1) >= 0, (((d3 * -1) + (d6 * -1)) + 5) >= 0)>}>
// CONV-NEXT:     affine.load %x[%n, %c, %oh + %r, %ow + %s + -1]
// CONV:          affine.store %{{.*}}, %y[%n, %f, %oh + 1, %ow]
// CONV:      affine.for %{{.*}} = 4 to 5 {
// CONV:      } {loom.tag = "conv2d"}
func.func @conv(%x: memref<1x2x5x5xf32>, %w: memref<3x2x3x3xf32>, %y: memref<1x3x5x5xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 3 {
      affine.for %oh = 0 to 5 {
        affine.for %ow = 0 to 5 {
          affine.for %c = 0 to 2 {
            affine.for %r = 0 to 3 {
              affine.for %s = 0 to 3 {
                "affine.if"(%n, %f, %oh, %ow, %c, %r, %s) <{condition = affine_set<(d0, d1, d2, d3, d4, d5, d6) : (((d2 + d5) + -1) >= 0, (((d2 * -1) + (d5 * -1)) + 5) >= 0, ((d3 + d6) + -1) >= 0, (((d3 * -1) + (d6 * -1)) + 5) >= 0)>}> ({
                  %0 = affine.load %x[%n, %c, %oh + %r + -1, %ow + %s + -1] : memref<1x2x5x5xf32>
                  %1 = affine.load %w[%f, %c, %r, %s] : memref<3x2x3x3xf32>
                  %2 = affine.load %y[%n, %f, %oh, %ow] : memref<1x3x5x5xf32>
                  %3 = arith.mulf %0, %1 : f32
                  %4 = arith.addf %2, %3 : f32
                  affine.store %4, %y[%n, %f, %oh, %ow] : memref<1x3x5x5xf32>
                  affine.yield
                }, {
                }) : (index, index, index, index, index, index, index) -> ()
              }
            }
          }
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// -----

// After loom-hoist: C[i, j] is carried across k in an iter_arg, stored after the k loop,
// so the band around the statement is (i, j), and the k loop with its iter_args is part
// of the body that is copied. factors=2,2: j unrolled by 2, i by 2 jammed into j's body:
// four copies of (load C, k loop carrying it, store C), each with its own k loop.
// HOISTED-LABEL: func.func @hoisted
// HOISTED:      affine.for %i = 0 to 4 step 2 {
// HOISTED-NEXT:   affine.for %j = 0 to 4 step 2 {
// HOISTED-NEXT:     %[[C0:.*]] = affine.load %c[%i, %j] : memref<4x4xf32>
// HOISTED-NEXT:     %[[R0:.*]] = affine.for %k = 0 to 3 iter_args(%{{.*}} = %[[C0]]) -> (f32) {
// HOISTED:          affine.store %[[R0]], %c[%i, %j] : memref<4x4xf32>
// HOISTED-NEXT:     %[[C1:.*]] = affine.load %c[%i, %j + 1] : memref<4x4xf32>
// HOISTED-NEXT:     %[[R1:.*]] = affine.for %{{.*}} = 0 to 3 iter_args(%{{.*}} = %[[C1]]) -> (f32) {
// HOISTED-NEXT:       affine.load %a[%i, %{{.*}}] : memref<4x3xf32>
// HOISTED-NEXT:       affine.load %b[%{{.*}}, %j + 1] : memref<3x4xf32>
// HOISTED:          affine.store %[[R1]], %c[%i, %j + 1] : memref<4x4xf32>
// HOISTED-NEXT:     %[[C2:.*]] = affine.load %c[%i + 1, %j] : memref<4x4xf32>
// HOISTED:          affine.store %{{.*}}, %c[%i + 1, %j] : memref<4x4xf32>
// HOISTED-NEXT:     %[[C3:.*]] = affine.load %c[%i + 1, %j + 1] : memref<4x4xf32>
// HOISTED:          affine.store %{{.*}}, %c[%i + 1, %j + 1] : memref<4x4xf32>
// HOISTED-NEXT:   }
// HOISTED-NEXT: } {loom.tag = "hoisted"}
func.func @hoisted(%a: memref<4x3xf32>, %b: memref<3x4xf32>, %c: memref<4x4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %c0 = affine.load %c[%i, %j] : memref<4x4xf32>
      %r = affine.for %k = 0 to 3 iter_args(%acc = %c0) -> (f32) {
        %x = affine.load %a[%i, %k] : memref<4x3xf32>
        %y = affine.load %b[%k, %j] : memref<3x4xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        affine.yield %s : f32
      }
      affine.store %r, %c[%i, %j] : memref<4x4xf32>
    }
  } {loom.tag = "hoisted"}
  func.return
}

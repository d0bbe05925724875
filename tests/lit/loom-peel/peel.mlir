// RUN: not loom-opt %s -p 'loom-peel{sizes=6,16 op=matmul}' --split-input-file 2>&1 | filecheck %s
// RUN: loom-opt %s -p 'loom-peel{sizes=6,16}' --split-input-file | filecheck %s --check-prefix=ALL
// RUN: not loom-opt %s -p 'loom-peel{sizes=1,16 op=matmul}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=ONE
// RUN: not loom-opt %s -p 'loom-peel{sizes=1,1,4 op=matmul}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=K
// RUN: not loom-opt %s -p 'loom-peel{sizes=1,16 op=sym}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=SYM
// RUN: not loom-opt %s -p 'loom-peel{sizes=1,6,16 op=bmm}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=BATCH
// RUN: not loom-opt %s -p 'loom-peel{sizes=6,16 op=matmul}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: loom-opt %s -p 'loom-peel{sizes=6,16}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK-ALL

// The runs with op= end in an error for the chunks that have no nest with that tag
// (hence `not`); the first run checks those errors, the others only the output.

// A 10 x 37 (x 5) matmul as `loom-opt -p loom-bufferize,convert-loom-to-affine` writes it
// (the init nest's ivs named here). sizes=6,16: i is split at 6 (the last 10 mod 6 = 4
// rows in a copy), then j, in the main nest only, at 32 (the last 5 columns in a second
// copy). The main nest [0, 6) x [0, 32) comes first, then the copy over j in [32, 37)
// (rows [0, 6)), then the copy over i in [6, 10), which keeps every column. Every copy
// keeps the tag, each loop keeps its iv (renamed in the copies). op=matmul leaves the init
// nest alone.
// CHECK-LABEL: func.func @matmul
// CHECK:      affine.for %i0 = 0 to 10 {
// CHECK-NEXT:   affine.for %j0 = 0 to 37 {
// CHECK-NEXT:     affine.store %zero, %c[%i0, %j0] : memref<10x37xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul.init"}
// CHECK-NEXT: affine.for %i = 0 to 6 {
// CHECK-NEXT:   affine.for %j = 0 to 32 {
// CHECK-NEXT:     affine.for %k = 0 to 5 {
// CHECK-NEXT:       %x = affine.load %a[%i, %k] : memref<10x5xf32>
// CHECK-NEXT:       %y = affine.load %b[%k, %j] : memref<5x37xf32>
// CHECK-NEXT:       %z = affine.load %c[%i, %j] : memref<10x37xf32>
// CHECK-NEXT:       %p = arith.mulf %x, %y : f32
// CHECK-NEXT:       %s = arith.addf %z, %p : f32
// CHECK-NEXT:       affine.store %s, %c[%i, %j] : memref<10x37xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul"}
// CHECK-NEXT: affine.for %[[I1:.*]] = 0 to 6 {
// CHECK-NEXT:   affine.for %[[J1:.*]] = 32 to 37 {
// CHECK-NEXT:     affine.for %[[K1:.*]] = 0 to 5 {
// CHECK-NEXT:       affine.load %a[%[[I1]], %[[K1]]] : memref<10x5xf32>
// CHECK-NEXT:       affine.load %b[%[[K1]], %[[J1]]] : memref<5x37xf32>
// CHECK-NEXT:       affine.load %c[%[[I1]], %[[J1]]] : memref<10x37xf32>
// CHECK-NEXT:       arith.mulf
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       affine.store %{{.*}}, %c[%[[I1]], %[[J1]]] : memref<10x37xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul"}
// CHECK-NEXT: affine.for %[[I2:.*]] = 6 to 10 {
// CHECK-NEXT:   affine.for %[[J2:.*]] = 0 to 37 {
// CHECK-NEXT:     affine.for %[[K2:.*]] = 0 to 5 {
// CHECK-NEXT:       affine.load %a[%[[I2]], %[[K2]]] : memref<10x5xf32>
// CHECK-NEXT:       affine.load %b[%[[K2]], %[[J2]]] : memref<5x37xf32>
// CHECK-NEXT:       affine.load %c[%[[I2]], %[[J2]]] : memref<10x37xf32>
// CHECK-NEXT:       arith.mulf
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       affine.store %{{.*}}, %c[%[[I2]], %[[J2]]] : memref<10x37xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul"}
// CHECK-NEXT: func.return

// Without op=, every nest with a long enough band is peeled: the 2-deep init nest is
// split the same way (three init nests, then the three matmul nests), so each part of C
// is zeroed by an init nest of the same shape as the matmul nest that accumulates it.
// ALL-LABEL: func.func @matmul
// ALL:      affine.for %i0 = 0 to 6 {
// ALL-NEXT:   affine.for %j0 = 0 to 32 {
// ALL-NEXT:     affine.store %zero, %c[%i0, %j0] : memref<10x37xf32>
// ALL-NEXT:   }
// ALL-NEXT: } {loom.tag = "matmul.init"}
// ALL-NEXT: affine.for %[[I1:.*]] = 0 to 6 {
// ALL-NEXT:   affine.for %[[J1:.*]] = 32 to 37 {
// ALL-NEXT:     affine.store %zero, %c[%[[I1]], %[[J1]]] : memref<10x37xf32>
// ALL-NEXT:   }
// ALL-NEXT: } {loom.tag = "matmul.init"}
// ALL-NEXT: affine.for %[[I2:.*]] = 6 to 10 {
// ALL-NEXT:   affine.for %[[J2:.*]] = 0 to 37 {
// ALL-NEXT:     affine.store %zero, %c[%[[I2]], %[[J2]]] : memref<10x37xf32>
// ALL-NEXT:   }
// ALL-NEXT: } {loom.tag = "matmul.init"}
// ALL-NEXT: affine.for %i = 0 to 6 {
// ALL-NEXT:   affine.for %j = 0 to 32 {
// ALL:      } {loom.tag = "matmul"}
// ALL-NEXT: affine.for %{{.*}} = 0 to 6 {
// ALL-NEXT:   affine.for %{{.*}} = 32 to 37 {
// ALL:      } {loom.tag = "matmul"}
// ALL-NEXT: affine.for %{{.*}} = 6 to 10 {
// ALL-NEXT:   affine.for %{{.*}} = 0 to 37 {
// ALL:      } {loom.tag = "matmul"}
// ALL-NEXT: func.return

// A size of 1 leaves its loop alone: only j is split, into two nests over every row.
// ONE-LABEL: func.func @matmul
// ONE:      } {loom.tag = "matmul.init"}
// ONE-NEXT: affine.for %i = 0 to 10 {
// ONE-NEXT:   affine.for %j = 0 to 32 {
// ONE-NEXT:     affine.for %k = 0 to 5 {
// ONE:      } {loom.tag = "matmul"}
// ONE-NEXT: affine.for %{{.*}} = 0 to 10 {
// ONE-NEXT:   affine.for %{{.*}} = 32 to 37 {
// ONE-NEXT:     affine.for %{{.*}} = 0 to 5 {
// ONE:      } {loom.tag = "matmul"}
// ONE-NEXT: func.return

// The reduction loop k can be split too: its dependence C[i, j] -> C[i, j], direction
// (=, =, <), is a reduction's, and the copy runs k in [4, 5) after [0, 4) for every
// (i, j), in the original order.
// K-LABEL: func.func @matmul
// K:      } {loom.tag = "matmul.init"}
// K-NEXT: affine.for %i = 0 to 10 {
// K-NEXT:   affine.for %j = 0 to 37 {
// K-NEXT:     affine.for %k = 0 to 4 {
// K:      } {loom.tag = "matmul"}
// K-NEXT: affine.for %{{.*}} = 0 to 10 {
// K-NEXT:   affine.for %{{.*}} = 0 to 37 {
// K-NEXT:     affine.for %{{.*}} = 4 to 5 {
// K:      } {loom.tag = "matmul"}
// K-NEXT: func.return

// REMARK: peel.mlir:[[# @LINE + 10]]:3: remark: [loom-peel] nest 'matmul' peeled for sizes [6, 16]: %i: iterations [0, 6) in the main nest, the last 4 in a copy; %j: iterations [0, 32) in the main nest, the last 5 in a copy
// REMARK-ALL: peel.mlir:[[# @LINE + 4]]:3: remark: [loom-peel] nest 'matmul.init' peeled for sizes [6, 16]: %i0: iterations [0, 6) in the main nest, the last 4 in a copy; %j0: iterations [0, 32) in the main nest, the last 5 in a copy
// REMARK-ALL: peel.mlir:[[# @LINE + 8]]:3: remark: [loom-peel] nest 'matmul' peeled for sizes [6, 16]: %i: iterations [0, 6) in the main nest, the last 4 in a copy; %j: iterations [0, 32) in the main nest, the last 5 in a copy
func.func @matmul(%a: memref<10x5xf32>, %b: memref<5x37xf32>, %c: memref<10x37xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  affine.for %i0 = 0 to 10 {
    affine.for %j0 = 0 to 37 {
      affine.store %zero, %c[%i0, %j0] : memref<10x37xf32>
    }
  } {loom.tag = "matmul.init"}
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 37 {
      affine.for %k = 0 to 5 {
        %x = affine.load %a[%i, %k] : memref<10x5xf32>
        %y = affine.load %b[%k, %j] : memref<5x37xf32>
        %z = affine.load %c[%i, %j] : memref<10x37xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<10x37xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// 12 x 32: 6 divides 12 and 16 divides 32, every register tile is full already; the
// nest is left as it is (one nest, same bounds), which the remark says.
// CHECK-LABEL: func.func @divides
// CHECK:      affine.for %i = 0 to 12 {
// CHECK-NEXT:   affine.for %j = 0 to 32 {
// CHECK-NEXT:     affine.for %k = 0 to 3 {
// CHECK:      } {loom.tag = "matmul"}
// CHECK-NEXT: func.return
// REMARK: peel.mlir:[[# @LINE + 2]]:3: remark: [loom-peel] nest 'matmul' left as it is: %i: 12 iterations, nothing to peel for size 6; %j: 32 iterations, nothing to peel for size 16
func.func @divides(%a: memref<12x3xf32>, %b: memref<3x32xf32>, %c: memref<12x32xf32>) {
  affine.for %i = 0 to 12 {
    affine.for %j = 0 to 32 {
      affine.for %k = 0 to 3 {
        %x = affine.load %a[%i, %k] : memref<12x3xf32>
        %y = affine.load %b[%k, %j] : memref<3x32xf32>
        %z = affine.load %c[%i, %j] : memref<12x32xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<12x32xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// 4 x 10, fewer iterations than the sizes: all of each loop is remainder, there is no
// main part to split off; the nest is left as it is.
// CHECK-LABEL: func.func @short
// CHECK:      affine.for %i = 0 to 4 {
// CHECK-NEXT:   affine.for %j = 0 to 10 {
// CHECK-NEXT:     affine.for %k = 0 to 3 {
// CHECK:      } {loom.tag = "matmul"}
// CHECK-NEXT: func.return
// REMARK: peel.mlir:[[# @LINE + 2]]:3: remark: [loom-peel] nest 'matmul' left as it is: %i: 4 iterations, nothing to peel for size 6; %j: 10 iterations, nothing to peel for size 16
func.func @short(%a: memref<4x3xf32>, %b: memref<3x10xf32>, %c: memref<4x10xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 10 {
      affine.for %k = 0 to 3 {
        %x = affine.load %a[%i, %k] : memref<4x3xf32>
        %y = affine.load %b[%k, %j] : memref<3x10xf32>
        %z = affine.load %c[%i, %j] : memref<4x10xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x10xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A loop with a lower bound and a step: %i = 1 to 20 step 3 runs 1, 4, ..., 19, 7
// iterations; size 6 keeps the first 6 (up to 19) and the copy runs the last one
// (19 to 20 step 3). Loop j (8 iterations, size 16) is not split.
// ALL-LABEL: func.func @strided
// ALL:      affine.for %i = 1 to 19 step 3 {
// ALL-NEXT:   affine.for %j = 0 to 8 {
// ALL:      } {loom.tag = "fill"}
// ALL-NEXT: affine.for %{{.*}} = 19 to 20 step 3 {
// ALL-NEXT:   affine.for %{{.*}} = 0 to 8 {
// ALL:      } {loom.tag = "fill"}
// ALL-NEXT: func.return
// CHECK: peel.mlir:[[# @LINE + 3]]:3: error: loom-peel: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'fill'
// REMARK-ALL: peel.mlir:[[# @LINE + 2]]:3: remark: [loom-peel] nest 'fill' peeled for sizes [6, 16]: %i: iterations [1, 19) in the main nest, the last 1 in a copy; %j: 8 iterations, nothing to peel for size 16
func.func @strided(%m: memref<20x8xf32>, %v: f32) {
  affine.for %i = 1 to 20 step 3 {
    affine.for %j = 0 to 8 {
      affine.store %v, %m[%i, %j] : memref<20x8xf32>
    }
  } {loom.tag = "fill"}
  func.return
}

// -----

// A loop without constant bounds is fine with size 1: only j, whose bounds are
// constant, is split.
// SYM-LABEL: func.func @symbolic
// SYM:      affine.for %i = 0 to %n {
// SYM-NEXT:   affine.for %j = 0 to 32 {
// SYM:      } {loom.tag = "sym"}
// SYM-NEXT: affine.for %{{.*}} = 0 to %n {
// SYM-NEXT:   affine.for %{{.*}} = 32 to 37 {
// SYM:      } {loom.tag = "sym"}
// SYM-NEXT: func.return
// CHECK: peel.mlir:[[# @LINE + 2]]:3: error: loom-peel: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'sym'
func.func @symbolic(%m: memref<?x37xf32>, %n: index, %v: f32) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to 37 {
      affine.store %v, %m[%i, %j] : memref<?x37xf32>
    }
  } {loom.tag = "sym"}
  func.return
}

// -----

// A batched matmul, 3 x 10 x 37 (x 5), band (b, i, j, k): sizes=1,6,16 leaves the batch
// loop alone and splits i and j as for the 2-d matmul; each copy runs every batch.
// BATCH-LABEL: func.func @batched
// BATCH:      affine.for %bb = 0 to 3 {
// BATCH-NEXT:   affine.for %i = 0 to 6 {
// BATCH-NEXT:     affine.for %j = 0 to 32 {
// BATCH-NEXT:       affine.for %k = 0 to 5 {
// BATCH:      } {loom.tag = "bmm"}
// BATCH-NEXT: affine.for %[[B1:.*]] = 0 to 3 {
// BATCH-NEXT:   affine.for %[[I1:.*]] = 0 to 6 {
// BATCH-NEXT:     affine.for %[[J1:.*]] = 32 to 37 {
// BATCH-NEXT:       affine.for %[[K1:.*]] = 0 to 5 {
// BATCH:              affine.store %{{.*}}, %c[%[[B1]], %[[I1]], %[[J1]]] : memref<3x10x37xf32>
// BATCH:      } {loom.tag = "bmm"}
// BATCH-NEXT: affine.for %[[B2:.*]] = 0 to 3 {
// BATCH-NEXT:   affine.for %[[I2:.*]] = 6 to 10 {
// BATCH-NEXT:     affine.for %[[J2:.*]] = 0 to 37 {
// BATCH-NEXT:       affine.for %[[K2:.*]] = 0 to 5 {
// BATCH:              affine.store %{{.*}}, %c[%[[B2]], %[[I2]], %[[J2]]] : memref<3x10x37xf32>
// BATCH:      } {loom.tag = "bmm"}
// BATCH-NEXT: func.return
// CHECK: peel.mlir:[[# @LINE + 2]]:3: error: loom-peel: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'bmm'
func.func @batched(%a: memref<3x10x5xf32>, %b: memref<3x5x37xf32>, %c: memref<3x10x37xf32>) {
  affine.for %bb = 0 to 3 {
    affine.for %i = 0 to 10 {
      affine.for %j = 0 to 37 {
        affine.for %k = 0 to 5 {
          %x = affine.load %a[%bb, %i, %k] : memref<3x10x5xf32>
          %y = affine.load %b[%bb, %k, %j] : memref<3x5x37xf32>
          %z = affine.load %c[%bb, %i, %j] : memref<3x10x37xf32>
          %p = arith.mulf %x, %y : f32
          %s = arith.addf %z, %p : f32
          affine.store %s, %c[%bb, %i, %j] : memref<3x10x37xf32>
        }
      }
    }
  } {loom.tag = "bmm"}
  func.return
}

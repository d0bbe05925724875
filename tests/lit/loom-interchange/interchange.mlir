// RUN: loom-opt %s -p 'loom-interchange{order=0,2,1}' --split-input-file | filecheck %s
// RUN: not loom-opt %s -p 'loom-interchange{order=0,4,5,6,1,2,3 op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=CONV
// RUN: not loom-opt %s -p 'loom-interchange{order=1,0 op=add}' --split-input-file 2>&1 | filecheck %s --check-prefix=ADD
// RUN: not loom-opt %s -p 'loom-interchange{order=1,0,3,2}' --split-input-file 2>&1 | filecheck %s --check-prefix=TILED
// RUN: loom-opt %s -p 'loom-interchange{order=0,2,1}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// matmul i, j, k -> i, k, j: the body and its maps as they were, the tag on the
// outermost loop; the 2-deep zeroing nest is skipped (with a remark).
// CHECK-LABEL: func.func @matmul
// CHECK:      affine.for %[[I0:.*]] = 0 to 4 {
// CHECK-NEXT:   affine.for %[[J0:.*]] = 0 to 5 {
// CHECK-NEXT:     affine.store %{{.*}}, %c[%[[I0]], %[[J0]]] : memref<4x5xf32>
// CHECK:      } {loom.tag = "matmul.init"}
// CHECK-NEXT: affine.for %i = 0 to 4 {
// CHECK-NEXT:   affine.for %k = 0 to 3 {
// CHECK-NEXT:     affine.for %j = 0 to 5 {
// CHECK-NEXT:       %[[A:.*]] = affine.load %a[%i, %k] : memref<4x3xf32>
// CHECK-NEXT:       %[[B:.*]] = affine.load %b[%k, %j] : memref<3x5xf32>
// CHECK-NEXT:       %[[C:.*]] = affine.load %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT:       %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:       affine.store %[[S]], %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: } {loom.tag = "matmul"}
// The op= runs below (CONV, ADD) name a tag this module has no nest of: an error at
// its first nest that lists the tags there are, and the module is not printed.
// CONV: interchange.mlir:[[# @LINE + 9]]:3: error: loom-interchange: option 'op' is 'conv2d', but no loop nest is tagged so; the tags present: 'matmul.init', 'matmul'
// ADD: interchange.mlir:[[# @LINE + 8]]:3: error: loom-interchange: option 'op' is 'add', but no loop nest is tagged so; the tags present: 'matmul.init', 'matmul'
// An order longer than every band of the module (TILED's 4 loops): an error, at the first
// nest; a nest too shallow beside one that is deep enough is skipped with a remark.
// TILED: interchange.mlir:[[# @LINE + 5]]:3: error: loom-interchange: the options fit no loop nest: nest 'matmul.init': order [1, 0, 3, 2] is longer than the 2-loop band (i0, j0); nest 'matmul': order [1, 0, 3, 2] is longer than the 3-loop band (i, j, k)
// REMARK: interchange.mlir:[[# @LINE + 4]]:3: remark: [loom-interchange] skipped: order [0, 2, 1] is longer than the 2-loop band (i0, j0)
// REMARK: interchange.mlir:[[# @LINE + 8]]:3: remark: [loom-interchange] interchanged band (i, j, k) -> (i, k, j)
func.func @matmul(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  affine.for %i0 = 0 to 4 {
    affine.for %j0 = 0 to 5 {
      affine.store %zero, %c[%i0, %j0] : memref<4x5xf32>
    }
  } {loom.tag = "matmul.init"}
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

// conv2d's 7 loops, the reduction loops c, r, s moved outside f, oh, ow (legal: the
// only dependences are the accumulation into y); the padding guard moves with the body.
// CHECK-LABEL: func.func @conv
// CHECK:      affine.for %n = 0 to 1 {
// CHECK-NEXT:   affine.for %oh = 0 to 5 {
// CHECK-NEXT:     affine.for %f = 0 to 3 {
// CONV-LABEL: func.func @conv
// CONV:      affine.for %n = 0 to 1 {
// CONV-NEXT:   affine.for %c = 0 to 2 {
// CONV-NEXT:     affine.for %r = 0 to 3 {
// CONV-NEXT:       affine.for %s = 0 to 3 {
// CONV-NEXT:         affine.for %f = 0 to 3 {
// CONV-NEXT:           affine.for %oh = 0 to 5 {
// CONV-NEXT:             affine.for %ow = 0 to 5 {
// CONV-NEXT:               "affine.if"(%n, %f, %oh, %ow, %c, %r, %s)
// CONV-NEXT:                 affine.load %x[%n, %c, %oh + %r + -1, %ow + %s + -1]
// CONV:                      affine.store %{{.*}}, %y[%n, %f, %oh, %ow]
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

// op= selects one nest of two: only the add nest is permuted under ADD.
// CHECK-LABEL: func.func @two_nests
// CHECK:      affine.for %i = 0 to 2 {
// CHECK-NEXT:   affine.for %k = 0 to 3 {
// CHECK-NEXT:     affine.for %j = 0 to 4 {
// CHECK:      } {loom.tag = "matmul"}
// CHECK-NEXT: affine.for %p = 0 to 2 {
// CHECK-NEXT:   affine.for %q = 0 to 4 {
// CHECK:      } {loom.tag = "add"}
// ADD-LABEL: func.func @two_nests
// ADD:      affine.for %i = 0 to 2 {
// ADD-NEXT:   affine.for %j = 0 to 4 {
// ADD-NEXT:     affine.for %k = 0 to 3 {
// ADD:      } {loom.tag = "matmul"}
// ADD-NEXT: affine.for %q = 0 to 4 {
// ADD-NEXT:   affine.for %p = 0 to 2 {
// ADD-NEXT:     %[[L:.*]] = affine.load %c[%p, %q] : memref<2x4xf32>
// ADD-NEXT:     %[[R:.*]] = affine.load %bias[%q] : memref<4xf32>
// ADD-NEXT:     %[[S:.*]] = arith.addf %[[L]], %[[R]] : f32
// ADD-NEXT:     affine.store %[[S]], %out[%p, %q] : memref<2x4xf32>
// ADD-NEXT:   }
// ADD-NEXT: } {loom.tag = "add"}
func.func @two_nests(%a: memref<2x3xf32>, %b: memref<3x4xf32>, %c: memref<2x4xf32>, %bias: memref<4xf32>, %out: memref<2x4xf32>) {
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 3 {
        %0 = affine.load %a[%i, %k] : memref<2x3xf32>
        %1 = affine.load %b[%k, %j] : memref<3x4xf32>
        %2 = affine.load %c[%i, %j] : memref<2x4xf32>
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%i, %j] : memref<2x4xf32>
      }
    }
  } {loom.tag = "matmul"}
  affine.for %p = 0 to 2 {
    affine.for %q = 0 to 4 {
      %0 = affine.load %c[%p, %q] : memref<2x4xf32>
      %1 = affine.load %bias[%q] : memref<4xf32>
      %2 = arith.addf %0, %1 : f32
      affine.store %2, %out[%p, %q] : memref<2x4xf32>
    }
  } {loom.tag = "add"}
  func.return
}

// -----

// A tiled band (as loom-tile leaves it): the point loops' bounds read their tile loop's
// iv, and a legal order keeps each point loop inside its tile loop with its bounds.
// CHECK-LABEL: func.func @tiled
// CHECK:      affine.for %it = 0 to 10 step 4 {
// CHECK-NEXT:   affine.for %ii = %it to min affine_map<(d0) -> ((d0 + 4), 10)>(%it) {
// CHECK-NEXT:     affine.for %jt = 0 to 9 step 4 {
// CHECK-NEXT:       affine.for %jj = %jt to min affine_map<(d0) -> ((d0 + 4), 9)>(%jt) {
// CHECK-NEXT:         affine.for %k = 0 to 7 {
// CHECK-NEXT:           affine.load %A[%ii, %k]
// CHECK:      } {loom.tag = "matmul"}
// TILED-LABEL: func.func @tiled
// TILED:      affine.for %jt = 0 to 9 step 4 {
// TILED-NEXT:   affine.for %it = 0 to 10 step 4 {
// TILED-NEXT:     affine.for %jj = %jt to min affine_map<(d0) -> ((d0 + 4), 9)>(%jt) {
// TILED-NEXT:       affine.for %ii = %it to min affine_map<(d0) -> ((d0 + 4), 10)>(%it) {
// TILED-NEXT:         affine.for %k = 0 to 7 {
// TILED-NEXT:           affine.load %A[%ii, %k]
// TILED:      } {loom.tag = "matmul"}
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

// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=0 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=B0
// RUN: not loom-opt %s -p 'loom-pack{operand=0 level=1 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=A1
// RUN: not loom-opt %s -p 'loom-pack{operand=0 level=3 op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=X3
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=W1

// Levels on untiled nests: the tile is what the loops inside the level read, with
// constant bounds; subscripts the inner loops do not walk (the batch index, an outer
// loop's iv) are fixed in the copy and are not dimensions of the buffer.

// The loops inside i read all of B: copied once per i (level 0), read at [k, j].
// B0-LABEL: func.func @untiled
// B0-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5x6xf32>
// B0-NEXT:    affine.for %{{.*}} = 0 to 8 {
// B0-NEXT:      affine.for %[[KC:.*]] = 0 to 5 {
// B0-NEXT:        affine.for %[[JC:.*]] = 0 to 6 {
// B0-NEXT:          %[[V:.*]] = affine.load %b[%[[KC]], %[[JC]]] : memref<5x6xf32>
// B0-NEXT:          affine.store %[[V]], %[[PACK]][%[[KC]], %[[JC]]] : memref<5x6xf32>
// B0:           affine.for %[[J:.*]] = 0 to 6 {
// B0-NEXT:        affine.for %[[K:.*]] = 0 to 5 {
// B0-NEXT:          affine.load %a
// B0-NEXT:          affine.load %[[PACK]][%[[K]], %[[J]]] : memref<5x6xf32>
// B0:         memref.dealloc %[[PACK]] : memref<5x6xf32>

// Inside j only k walks A: one row of A, A[i, 0:5], copied per (i, j).
// A1-LABEL: func.func @untiled
// A1-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5xf32>
// A1-NEXT:    affine.for %[[I:.*]] = 0 to 8 {
// A1-NEXT:      affine.for %{{.*}} = 0 to 6 {
// A1-NEXT:        affine.for %[[KC:.*]] = 0 to 5 {
// A1-NEXT:          %[[V:.*]] = affine.load %a[%[[I]], %[[KC]]] : memref<8x5xf32>
// A1-NEXT:          affine.store %[[V]], %[[PACK]][%[[KC]]] : memref<5xf32>
// A1:             affine.for %[[K:.*]] = 0 to 5 {
// A1-NEXT:          affine.load %[[PACK]][%[[K]]] : memref<5xf32>

// op=conv2d where the module has no conv2d nest: an error that names the tags there are.
// X3: levels.mlir:[[# @LINE + 3]]:3: error: loom-pack: option 'op' is 'conv2d', but no loop nest is tagged so; the tags present: 'matmul'
// W1: levels.mlir:[[# @LINE + 2]]:3: error: loom-pack: option 'op' is 'conv2d', but no loop nest is tagged so; the tags present: 'matmul'
func.func @untiled(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 6 {
      affine.for %k = 0 to 5 {
        %x = affine.load %a[%i, %k] : memref<8x5xf32>
        %y = affine.load %b[%k, %j] : memref<5x6xf32>
        %z = affine.load %c[%i, %j] : memref<8x6xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<8x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}


// -----

// The batch index n is the level loop's own iv: fixed in the copy.
// B0-LABEL: func.func @batched
// B0-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5x6xf64>
// B0-NEXT:    affine.for %[[N:.*]] = 0 to 3 {
// B0-NEXT:      affine.for %[[KC:.*]] = 0 to 5 {
// B0-NEXT:        affine.for %[[JC:.*]] = 0 to 6 {
// B0-NEXT:          %[[V:.*]] = affine.load %b[%[[N]], %[[KC]], %[[JC]]] : memref<3x5x6xf64>
// B0-NEXT:          affine.store %[[V]], %[[PACK]][%[[KC]], %[[JC]]] : memref<5x6xf64>
// B0:                 affine.load %[[PACK]][%{{.*}}, %{{.*}}] : memref<5x6xf64>

// A1-LABEL: func.func @batched
// A1-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5xf64>
// A1-NEXT:    affine.for %[[N:.*]] = 0 to 3 {
// A1-NEXT:      affine.for %[[I:.*]] = 0 to 8 {
// A1-NEXT:        affine.for %[[KC:.*]] = 0 to 5 {
// A1-NEXT:          %[[V:.*]] = affine.load %a[%[[N]], %[[I]], %[[KC]]] : memref<3x8x5xf64>
func.func @batched(%a: memref<3x8x5xf64>, %b: memref<3x5x6xf64>, %c: memref<3x8x6xf64>) {
  affine.for %n = 0 to 3 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 6 {
        affine.for %k = 0 to 5 {
          %x = affine.load %a[%n, %i, %k] : memref<3x8x5xf64>
          %y = affine.load %b[%n, %k, %j] : memref<3x5x6xf64>
          %z = affine.load %c[%n, %i, %j] : memref<3x8x6xf64>
          %p = arith.mulf %x, %y : f64
          %s = arith.addf %z, %p : f64
          affine.store %s, %c[%n, %i, %j] : memref<3x8x6xf64>
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}


// -----

// conv2d with stride 2 and padding 1. Inside ow, X[n, c, 2*oh + r - 1, 2*ow + s - 1] is
// walked by c, r, s with unit strides: the 2x3x3 window, whose copy is clamped to the
// input (r >= 1 - 2*oh, r < 10 - 2*oh): the padding is never read; the guarded reads
// never look at what is not copied.
// X3-LABEL: func.func @conv
// X3-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x3xf32>
// X3:               affine.for %[[OH:.*]] = 0 to 5 {
// X3-NEXT:            affine.for %[[OW:.*]] = 0 to 5 {
// X3-NEXT:              affine.for %[[CC:.*]] = 0 to 2 {
// X3-NEXT:                affine.for %[[RC:.*]] = max affine_map<(d0) -> (0, ((d0 * -2) + 1))>(%[[OH]]) to min affine_map<(d0) -> (3, ((d0 * -2) + 10))>(%[[OH]]) {
// X3-NEXT:                  affine.for %[[SC:.*]] = max affine_map<(d0) -> (0, ((d0 * -2) + 1))>(%[[OW]]) to min affine_map<(d0) -> (3, ((d0 * -2) + 10))>(%[[OW]]) {
// X3-NEXT:                    %[[V:.*]] = affine.load %x[%{{.*}}, %[[CC]], %[[OH]] * 2 + %[[RC]] + -1, %[[OW]] * 2 + %[[SC]] + -1] : memref<1x2x9x9xf32>
// X3-NEXT:                    affine.store %[[V]], %[[PACK]][%[[CC]], %[[RC]], %[[SC]]] : memref<2x3x3xf32>
// X3:                       "affine.if"
// X3-NEXT:                    affine.load %[[PACK]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x3xf32>
// X3:         memref.dealloc %[[PACK]] : memref<2x3x3xf32>

// The filter of one output channel f, W[f, :, :, :], copied per f.
// W1-LABEL: func.func @conv
// W1-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x3xf32>
// W1-NEXT:    affine.for %{{.*}} = 0 to 1 {
// W1-NEXT:      affine.for %[[F:.*]] = 0 to 4 {
// W1-NEXT:        affine.for %[[CC:.*]] = 0 to 2 {
// W1-NEXT:          affine.for %[[RC:.*]] = 0 to 3 {
// W1-NEXT:            affine.for %[[SC:.*]] = 0 to 3 {
// W1-NEXT:              %[[V:.*]] = affine.load %w[%[[F]], %[[CC]], %[[RC]], %[[SC]]] : memref<4x2x3x3xf32>
// W1-NEXT:              affine.store %[[V]], %[[PACK]][%[[CC]], %[[RC]], %[[SC]]] : memref<2x3x3xf32>
// W1:                         affine.load %[[PACK]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x3xf32>
// op=matmul here: an error.
// B0: levels.mlir:[[# @LINE + 3]]:3: error: loom-pack: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'conv2d'
// A1: levels.mlir:[[# @LINE + 2]]:3: error: loom-pack: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'conv2d'
func.func @conv(%x: memref<1x2x9x9xf32>, %w: memref<4x2x3x3xf32>, %y: memref<1x4x5x5xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 4 {
      affine.for %oh = 0 to 5 {
        affine.for %ow = 0 to 5 {
          affine.for %c = 0 to 2 {
            affine.for %r = 0 to 3 {
              affine.for %s = 0 to 3 {
                "affine.if"(%oh, %ow, %r, %s) <{condition = affine_set<(d0, d1, d2, d3) : (d0 * 2 + d2 - 1 >= 0, -(d0 * 2) - d2 + 9 >= 0, d1 * 2 + d3 - 1 >= 0, -(d1 * 2) - d3 + 9 >= 0)>}> ({
                  %u = affine.load %x[%n, %c, %oh * 2 + %r - 1, %ow * 2 + %s - 1] : memref<1x2x9x9xf32>
                  %v = affine.load %w[%f, %c, %r, %s] : memref<4x2x3x3xf32>
                  %o = affine.load %y[%n, %f, %oh, %ow] : memref<1x4x5x5xf32>
                  %p = arith.mulf %u, %v : f32
                  %t = arith.addf %o, %p : f32
                  affine.store %t, %y[%n, %f, %oh, %ow] : memref<1x4x5x5xf32>
                  affine.yield
                }, {
                }) : (index, index, index, index) -> ()
              }
            }
          }
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// RUN: loom-opt %s -p convert-loom-to-affine --split-input-file | filecheck %s

// winograd_input, F(2x2), a 3x3 input padded by 1: 2x2 tiles of 4x4 over the 3x3 output.
// One nest per run of tiles that overhang the border alike, each loading only its taps
// inside the input (the padded ones are zeros, left out of the sums): the first tile's
// rows 1..3 of its 4 (row 0 is the border), the second's rows 0..1 (2 and 3 lie past the
// input). No guard: the channels (c, innermost) vectorize.
// CHECK-LABEL: func.func @input
// CHECK:           affine.for %c = 0 to 8 {
// CHECK-NEXT:        affine.load %x[%n, %i * 2, %j * 2, %c] : memref<1x3x3x8xf32>
// CHECK-COUNT-8:     affine.load %x
// CHECK-NOT:         affine.load
// The first row of B^T d is d0 - d2: d0 is the border, so -d2.
// CHECK:             arith.negf
// CHECK:             affine.store %{{.*}}, %v[0, %n * 4 + %i * 2 + %j, %c] : memref<16x4x8xf32>
// CHECK-COUNT-15:    affine.store %{{.*}}, %v[{{[0-9]+}}, %n * 4 + %i * 2 + %j, %c]
// CHECK:           } {loom.tag = "winograd_input"}
// The corner's right neighbour: taps 1..3 of the rows, 0..1 of the columns, 6 loads.
// CHECK:           affine.for %c_1 = 0 to 8 {
// CHECK-NEXT:        affine.load %x[%n_1, %i_1 * 2, %j_1 * 2 + 1, %c_1]
// CHECK-COUNT-5:     affine.load %x
// CHECK-NOT:         affine.load
// CHECK:             affine.store %{{.*}}, %v[0, %n_1 * 4 + %i_1 * 2 + %j_1 + 1, %c_1]
// CHECK:           } {loom.tag = "winograd_input"}
// CHECK-COUNT-2:   } {loom.tag = "winograd_input"}
// CHECK-NOT:       loom.tag = "winograd_input"
func.func @input(%x: memref<1x3x3x8xf32>, %v: memref<16x4x8xf32>) {
  loom.winograd_input ins(%x : memref<1x3x3x8xf32>) outs(%v : memref<16x4x8xf32>) {tile = 2, padding = array<i64: 1, 1>}
  func.return
}

// -----

// winograd_filter: one nest over (c, f), f innermost, 9 taps loaded, 16 sums stored; G's
// row (1/2, 1/2, 1/2) is one product of the sum.
// CHECK-LABEL: func.func @filter
// CHECK:         affine.for %c = 0 to 8 {
// CHECK-NEXT:      affine.for %f = 0 to 4 {
// CHECK-NEXT:        affine.load %w[0, 0, %c, %f] : memref<3x3x8x4xf32>
// CHECK-COUNT-8:     affine.load %w
// CHECK-NEXT:        %[[S:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:        %[[T:.*]] = arith.addf %[[S]], %{{.*}} : f32
// CHECK-NEXT:        %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:        arith.mulf %[[T]], %[[HALF]] : f32
// CHECK:             affine.store %{{.*}}, %u[0, %c, %f] : memref<16x8x4xf32>
// CHECK-COUNT-15:    affine.store %{{.*}}, %u[{{[0-9]+}}, %c, %f]
// CHECK:         } {loom.tag = "winograd_filter"}
func.func @filter(%w: memref<3x3x8x4xf32>, %u: memref<16x8x4xf32>) {
  loom.winograd_filter ins(%w : memref<3x3x8x4xf32>) outs(%u : memref<16x8x4xf32>) {tile = 2}
  func.return
}

// -----

// winograd_output: a nest per run of tiles with the same outputs inside Y: the first
// tile stores its 2x2, the last column's tiles 2x1 (their second column lies past Y),
// the last row's 1x2, the corner 1x1; each reads all 16 products.
// CHECK-LABEL: func.func @output
// CHECK:           affine.for %f = 0 to 4 {
// CHECK-COUNT-16:    affine.load %m[{{[0-9]+}}, %n * 4 + %i * 2 + %j, %f] : memref<16x4x4xf32>
// CHECK:             affine.store %{{.*}}, %y[%n, %i * 2, %j * 2, %f]
// CHECK-NEXT:        affine.store %{{.*}}, %y[%n, %i * 2, %j * 2 + 1, %f]
// CHECK-NEXT:        affine.store %{{.*}}, %y[%n, %i * 2 + 1, %j * 2, %f]
// CHECK-NEXT:        affine.store %{{.*}}, %y[%n, %i * 2 + 1, %j * 2 + 1, %f]
// CHECK:           } {loom.tag = "winograd_output"}
// CHECK:             affine.store %{{.*}}, %y[%n_1, %i_1 * 2, %j_1 * 2 + 2, %f_1]
// CHECK-NEXT:        affine.store %{{.*}}, %y[%n_1, %i_1 * 2 + 1, %j_1 * 2 + 2, %f_1]
// CHECK-NEXT:      }
// CHECK:           } {loom.tag = "winograd_output"}
// CHECK:             affine.store %{{.*}}, %y[%n_2, %i_2 * 2 + 2, %j_2 * 2, %f_2]
// CHECK-NEXT:        affine.store %{{.*}}, %y[%n_2, %i_2 * 2 + 2, %j_2 * 2 + 1, %f_2]
// CHECK-NEXT:      }
// CHECK:             affine.store %{{.*}}, %y[%n_3, %i_3 * 2 + 2, %j_3 * 2 + 2, %f_3]
// CHECK-NEXT:      }
// CHECK:           } {loom.tag = "winograd_output"}
func.func @output(%m: memref<16x4x4xf32>, %y: memref<1x3x3x4xf32>) {
  loom.winograd_output ins(%m : memref<16x4x4xf32>) outs(%y : memref<1x3x3x4xf32>) {tile = 2}
  func.return
}

// RUN: loom-opt %s -p 'loom-transpose-copy{width=4}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-transpose-copy{width=4}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// loom-pack's panel copy of a transposed B (x @ w.T: B adjacent along k), the offset in
// the panel outside k: 4x4 tiles, each read as 4 vectors along k through a view of B's
// buffer with k last (made once, before the loops), transposed in 2 rounds of shuffles, stored as 4 vectors along the
// panel's rows. Nothing is left scalar: both loops divide by the width.
// CHECK-LABEL: func.func @panel
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [96, 64], strides: [64, 1] : memref<64x96xf32, strided<[1, 64]>> to memref<96x64xf32>
// CHECK-NEXT:    affine.for %j_t2 = 0 to 96 step 48 {
// CHECK-NEXT:      affine.for %j_panel = 0 to 1 {
// CHECK-NEXT:    affine.for %j_cp = 0 to 48 step 4 {
// CHECK-NEXT:      affine.for %k_cp = 0 to 64 step 4 {
// CHECK-NEXT:        %[[R0:.*]] = affine.vector_load %b_t[%j_t2 + %j_panel * 48 + %j_cp, %k_cp] : memref<96x64xf32>, vector<4xf32>
// CHECK-NEXT:        %[[R1:.*]] = affine.vector_load %b_t[%j_t2 + %j_panel * 48 + %j_cp + 1, %k_cp] : memref<96x64xf32>, vector<4xf32>
// CHECK-NEXT:        %[[R2:.*]] = affine.vector_load %b_t[%j_t2 + %j_panel * 48 + %j_cp + 2, %k_cp] : memref<96x64xf32>, vector<4xf32>
// CHECK-NEXT:        %[[R3:.*]] = affine.vector_load %b_t[%j_t2 + %j_panel * 48 + %j_cp + 3, %k_cp] : memref<96x64xf32>, vector<4xf32>
// CHECK-NEXT:        %[[S0:.*]] = vector.shuffle %[[R0]], %[[R1]] [0, 4, 2, 6] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[S1:.*]] = vector.shuffle %[[R0]], %[[R1]] [1, 5, 3, 7] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[S2:.*]] = vector.shuffle %[[R2]], %[[R3]] [0, 4, 2, 6] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[S3:.*]] = vector.shuffle %[[R2]], %[[R3]] [1, 5, 3, 7] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[T0:.*]] = vector.shuffle %[[S0]], %[[S2]] [0, 1, 4, 5] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[T2:.*]] = vector.shuffle %[[S0]], %[[S2]] [2, 3, 6, 7] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[T1:.*]] = vector.shuffle %[[S1]], %[[S3]] [0, 1, 4, 5] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        %[[T3:.*]] = vector.shuffle %[[S1]], %[[S3]] [2, 3, 6, 7] : vector<4xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_store %[[T0]], %p[%j_panel, %k_cp, %j_cp] : memref<1x64x48xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_store %[[T1]], %p[%j_panel, %k_cp + 1, %j_cp] : memref<1x64x48xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_store %[[T2]], %p[%j_panel, %k_cp + 2, %j_cp] : memref<1x64x48xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_store %[[T3]], %p[%j_panel, %k_cp + 3, %j_cp] : memref<1x64x48xf32>, vector<4xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     affine.load
// REMARK: transpose-copy.mlir:[[# @LINE + 4]]:7: remark: [loom-transpose-copy] copy of %b into %p (loops %j_cp, %k_cp) vectorized as 4x4 tiles transposed in registers: 4 vector loads along its unit-stride dimension, 8 shuffles, 4 vector stores
func.func @panel(%b: memref<64x96xf32, strided<[1, 64]>>, %p: memref<1x64x48xf32>) {
  affine.for %j_t2 = 0 to 96 step 48 {
    affine.for %j_panel = 0 to 1 {
      affine.for %j_cp = 0 to 48 {
        affine.for %k_cp = 0 to 64 {
          %0 = affine.load %b[%k_cp, %j_t2 + %j_panel * 48 + %j_cp] : memref<64x96xf32, strided<[1, 64]>>
          affine.store %0, %p[%j_panel, %k_cp, %j_cp] : memref<1x64x48xf32>
        }
      }
    }
  }
  func.return
}

// -----

// Partial tiles (a B of 50x70 in blocks of 16): the tiles run to the last multiple of the
// width below each `min` bound; the tiled rows' last columns (k) run scalar inside the
// tile loop, then the rows no tile holds run as the original nest did, from where the
// tiles stop.
// CHECK-LABEL: func.func @partial
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [70, 50], strides: [50, 1]
// CHECK-NEXT:    affine.for %k_t = 0 to 50 step 16 {
// CHECK-NEXT:      affine.for %j_t = 0 to 70 step 16 {
// CHECK-NEXT:    %[[ROWS:.*]] = affine.min affine_map<(d0) -> (16, ((((d0 * -1) + 70) floordiv 4) * 4))> (%j_t)
// CHECK-NEXT:    %[[COLS:.*]] = affine.min affine_map<(d0) -> (16, ((((d0 * -1) + 50) floordiv 4) * 4))> (%k_t)
// CHECK-NEXT:    affine.for %j_cp = 0 to min affine_map<(d0) -> (16, ((((d0 * -1) + 70) floordiv 4) * 4))>(%j_t) step 4 {
// CHECK-NEXT:      affine.for %k_cp = 0 to min affine_map<(d0) -> (16, ((((d0 * -1) + 50) floordiv 4) * 4))>(%k_t) step 4 {
// CHECK-COUNT-4:     affine.vector_load %b_t
// CHECK-COUNT-8:     vector.shuffle
// CHECK-COUNT-4:     affine.vector_store
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.for %[[J:.*]] = affine_map<(d0) -> (d0)>(%j_cp) to affine_map<(d0) -> ((d0 + 4))>(%j_cp) {
// CHECK-NEXT:        affine.for %[[K:.*]] = affine_map<(d0) -> (d0)>(%[[COLS]]) to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%k_t) {
// CHECK-NEXT:          %[[V:.*]] = affine.load %b[%k_t + %[[K]], %j_t + %[[J]]] : memref<50x70xf32, strided<[1, 50]>>
// CHECK-NEXT:          affine.store %[[V]], %p[%[[K]], %[[J]]] : memref<16x16xf32>
// CHECK:         affine.for %[[J2:.*]] = affine_map<(d0) -> (d0)>(%[[ROWS]]) to min affine_map<(d0) -> (16, ((d0 * -1) + 70))>(%j_t) {
// CHECK-NEXT:      affine.for %[[K2:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%k_t) {
// CHECK-NEXT:        %[[V2:.*]] = affine.load %b[%k_t + %[[K2]], %j_t + %[[J2]]]
// CHECK-NEXT:        affine.store %[[V2]], %p[%[[K2]], %[[J2]]]
// CHECK-NOT:     affine.min
// REMARK: transpose-copy.mlir:[[# @LINE + 4]]:7: remark: [loom-transpose-copy] copy of %b into %p (loops %j_cp, %k_cp) vectorized as 4x4 tiles
func.func @partial(%b: memref<50x70xf32, strided<[1, 50]>>, %p: memref<16x16xf32>) {
  affine.for %k_t = 0 to 50 step 16 {
    affine.for %j_t = 0 to 70 step 16 {
      affine.for %j_cp = 0 to min affine_map<(d0) -> (16, -d0 + 70)>(%j_t) {
        affine.for %k_cp = 0 to min affine_map<(d0) -> (16, -d0 + 50)>(%k_t) {
          %v = affine.load %b[%k_t + %k_cp, %j_t + %j_cp] : memref<50x70xf32, strided<[1, 50]>>
          affine.store %v, %p[%k_cp, %j_cp] : memref<16x16xf32>
        }
      }
    }
  }
  func.return
}

// -----

// A batch of transposed matrices (f64): the view moves the unit-stride dimension last and
// keeps the batch dimension where it is.
// CHECK-LABEL: func.func @batched
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [2, 12, 8], strides: [96, 8, 1] : memref<2x8x12xf64, strided<[96, 1, 8]>> to memref<2x12x8xf64>
// CHECK:         affine.vector_load %b_t[%n, %j_cp + 3, %k_cp] : memref<2x12x8xf64>, vector<4xf64>
// CHECK:         affine.vector_store %{{.*}}, %p[%n, %k_cp + 3, %j_cp] : memref<2x8x12xf64>, vector<4xf64>
// CHECK-NOT:     affine.load
func.func @batched(%b: memref<2x8x12xf64, strided<[96, 1, 8]>>, %p: memref<2x8x12xf64>) {
  affine.for %n = 0 to 2 {
    affine.for %j_cp = 0 to 12 {
      affine.for %k_cp = 0 to 8 {
        %v = affine.load %b[%n, %k_cp, %j_cp] : memref<2x8x12xf64, strided<[96, 1, 8]>>
        affine.store %v, %p[%n, %k_cp, %j_cp] : memref<2x8x12xf64>
      }
    }
  }
  func.return
}

// -----

// The load's loop outside the store's (loom-pack's order for a panel of at most 8
// columns): the same tiles, k the outer loop of the tiles.
// CHECK-LABEL: func.func @load_loop_outside
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [8, 12], strides: [12, 1] : memref<12x8xf32, strided<[1, 12]>> to memref<8x12xf32>
// CHECK-NEXT:    affine.for %k_cp = 0 to 12 step 4 {
// CHECK-NEXT:      affine.for %j_cp = 0 to 8 step 4 {
// CHECK-NEXT:        affine.vector_load %b_t[%j_cp, %k_cp] : memref<8x12xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_load %b_t[%j_cp + 1, %k_cp] : memref<8x12xf32>, vector<4xf32>
// CHECK:             affine.vector_store %{{.*}}, %p[%k_cp, %j_cp] : memref<12x8xf32>, vector<4xf32>
// CHECK-NEXT:        affine.vector_store %{{.*}}, %p[%k_cp + 1, %j_cp] : memref<12x8xf32>, vector<4xf32>
// CHECK-NOT:     affine.load
// REMARK: transpose-copy.mlir:[[# @LINE + 2]]:3: remark: [loom-transpose-copy] copy of %b into %p (loops %k_cp, %j_cp) vectorized as 4x4 tiles
func.func @load_loop_outside(%b: memref<12x8xf32, strided<[1, 12]>>, %p: memref<12x8xf32>) {
  affine.for %k_cp = 0 to 12 {
    affine.for %j_cp = 0 to 8 {
      %v = affine.load %b[%k_cp, %j_cp] : memref<12x8xf32, strided<[1, 12]>>
      affine.store %v, %p[%k_cp, %j_cp] : memref<12x8xf32>
    }
  }
  func.return
}

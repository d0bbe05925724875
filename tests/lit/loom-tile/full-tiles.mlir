// RUN: not loom-opt %s -p 'loom-tile{sizes=96,256,256 op=matmul},loom-tile{sizes=6,16 depth=3 op=matmul}' --split-input-file 2>/dev/null | filecheck %s
// RUN: not loom-opt %s -p 'loom-tile{sizes=100 op=fill},loom-tile{sizes=6 depth=1 op=fill}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=FILL

// The runs name a nest by op=: in the chunks that have no nest with that tag they end
// in an error (an unknown tag is not ignored: see loom-tile/tile.mlir), hence `not`.

// Full tiles proved by divisibility (affine_forms.known_multiple, tiles_are_full): a
// point loop gets the constant extent `%i_t2 + 6`, with no `min`, when the size divides
// upper - lower of the loop it tiles for every value of the ivs in it. A tile iv is a
// multiple of the gcd of its lower bound and its step.

// 960 x 960 x 960 by 96, 256, 256, then the intra-tile (i, j) by 6, 16. 96 divides 960:
// the i point loop ends at %i_t + 96. 256 does not: the j and k point loops end at
// min(%j_t + 256, 960); but %j_t is a multiple of 256, so 960 - %j_t is a multiple of 64
// (and 256 of course), hence of 16: every 16-column tile of a 256-tile is full, even the
// last, 192-column one. Likewise (%i_t + 96) - %i_t2 is a multiple of 6 (%i_t2 steps by
// 6 from %i_t, a multiple of 96): the 6-row tiles are full. Both register-tile point
// loops have constant extents 6 and 16.
// CHECK-LABEL: func.func @matmul960
// CHECK:      affine.for %i_t = 0 to 960 step 96 {
// CHECK-NEXT:   affine.for %j_t = 0 to 960 step 256 {
// CHECK-NEXT:     affine.for %k_t = 0 to 960 step 256 {
// CHECK-NEXT:       affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 96))>(%i_t) step 6 {
// CHECK-NEXT:         affine.for %j_t2 = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 256), 960)>(%j_t) step 16 {
// CHECK-NEXT:           affine.for %i = affine_map<(d0) -> (d0)>(%i_t2) to affine_map<(d0) -> ((d0 + 6))>(%i_t2) {
// CHECK-NEXT:             affine.for %j = affine_map<(d0) -> (d0)>(%j_t2) to affine_map<(d0) -> ((d0 + 16))>(%j_t2) {
// CHECK-NEXT:               affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> ((d0 + 256), 960)>(%k_t) {
// CHECK-NEXT:                 affine.load %a[%i, %k]
// CHECK:      } {loom.tag = "matmul"}
func.func @matmul960(%a: memref<960x960xf32>, %b: memref<960x960xf32>, %c: memref<960x960xf32>) {
  affine.for %i = 0 to 960 {
    affine.for %j = 0 to 960 {
      affine.for %k = 0 to 960 {
        %x = affine.load %a[%i, %k] : memref<960x960xf32>
        %y = affine.load %b[%k, %j] : memref<960x960xf32>
        %z = affine.load %c[%i, %j] : memref<960x960xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<960x960xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// 1020 rows (what loom-peel{sizes=6,16} leaves of 1024): 96 does not divide 1020, so the
// 6-row tiles run up to min(%i_t + 96, 1020); both %i_t + 96 - %i_t2 and 1020 - %i_t2
// (1020 = 6 * 170, %i_t2 a multiple of 6) are multiples of 6: still full, `%i_t2 + 6`.
// K = 40 is below 256: the k tile is clamped to 40, one full tile.
// CHECK-LABEL: func.func @rows1020
// CHECK:      affine.for %i_t = 0 to 1020 step 96 {
// CHECK-NEXT:   affine.for %j_t = 0 to 960 step 256 {
// CHECK-NEXT:     affine.for %k_t = 0 to 40 step 40 {
// CHECK-NEXT:       affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> ((d0 + 96), 1020)>(%i_t) step 6 {
// CHECK-NEXT:         affine.for %j_t2 = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 256), 960)>(%j_t) step 16 {
// CHECK-NEXT:           affine.for %i = affine_map<(d0) -> (d0)>(%i_t2) to affine_map<(d0) -> ((d0 + 6))>(%i_t2) {
// CHECK-NEXT:             affine.for %j = affine_map<(d0) -> (d0)>(%j_t2) to affine_map<(d0) -> ((d0 + 16))>(%j_t2) {
// CHECK-NEXT:               affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> ((d0 + 40))>(%k_t) {
// CHECK:      } {loom.tag = "matmul"}
func.func @rows1020(%a: memref<1020x40xf32>, %b: memref<40x960xf32>, %c: memref<1020x960xf32>) {
  affine.for %i = 0 to 1020 {
    affine.for %j = 0 to 960 {
      affine.for %k = 0 to 40 {
        %x = affine.load %a[%i, %k] : memref<1020x40xf32>
        %y = affine.load %b[%k, %j] : memref<40x960xf32>
        %z = affine.load %c[%i, %j] : memref<1020x960xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<1020x960xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// 1000 rows: 1000 - %i_t2 is only known to be a multiple of 2 (gcd(1000, 96, 6)), so the
// last 96-tile (rows 960..999, 40 of them) ends in a partial 6-row tile: the i point loop
// keeps the min, with every upper bound of the loop it tiles. The j tiles are full.
// CHECK-LABEL: func.func @rows1000
// CHECK:      affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> ((d0 + 96), 1000)>(%i_t) step 6 {
// CHECK-NEXT:   affine.for %j_t2 = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 256), 960)>(%j_t) step 16 {
// CHECK-NEXT:     affine.for %i = affine_map<(d0) -> (d0)>(%i_t2) to min affine_map<(d0, d1) -> ((d0 + 6), (d1 + 96), 1000)>(%i_t2, %i_t) {
// CHECK-NEXT:       affine.for %j = affine_map<(d0) -> (d0)>(%j_t2) to affine_map<(d0) -> ((d0 + 16))>(%j_t2) {
// CHECK:      } {loom.tag = "matmul"}
func.func @rows1000(%a: memref<1000x40xf32>, %b: memref<40x960xf32>, %c: memref<1000x960xf32>) {
  affine.for %i = 0 to 1000 {
    affine.for %j = 0 to 960 {
      affine.for %k = 0 to 40 {
        %x = affine.load %a[%i, %k] : memref<1000x40xf32>
        %y = affine.load %b[%k, %j] : memref<40x960xf32>
        %z = affine.load %c[%i, %j] : memref<1000x960xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<1000x960xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The outer tile size is not a multiple of the inner one: 100 divides 1000, so the 100-row
// tiles are full (`%i_t + 100`), but (%i_t + 100) - %i_t2 is a multiple of 2, not of 6
// (100 = 16 * 6 + 4): each 100-row tile ends with a 4-row tile, and the 6-row point loop
// keeps min(%i_t2 + 6, %i_t + 100).
// FILL-LABEL: func.func @fill
// FILL:      affine.for %i_t = 0 to 1000 step 100 {
// FILL-NEXT:   affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 100))>(%i_t) step 6 {
// FILL-NEXT:     affine.for %i = affine_map<(d0) -> (d0)>(%i_t2) to min affine_map<(d0, d1) -> ((d0 + 6), (d1 + 100))>(%i_t2, %i_t) {
// FILL-NEXT:       affine.for %j = 0 to 16 {
// FILL-NEXT:         affine.store %v, %m[%i, %j] : memref<1000x16xf32>
// FILL:      } {loom.tag = "fill"}
func.func @fill(%m: memref<1000x16xf32>, %v: f32) {
  affine.for %i = 0 to 1000 {
    affine.for %j = 0 to 16 {
      affine.store %v, %m[%i, %j] : memref<1000x16xf32>
    }
  } {loom.tag = "fill"}
  func.return
}

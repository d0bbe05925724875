// RUN: loom-opt %s -p 'loom-unroll{factor=2}' | filecheck %s
// RUN: loom-opt %s -p 'loom-tile{sizes=4}' | filecheck %s --check-prefix=TILE
// RUN: loom-opt %s -p 'loom-unroll-jam{factors=2}' | filecheck %s
// RUN: loom-opt %s -p 'loom-vectorize{width=8}' | filecheck %s --check-prefix=VEC

// A bound that divides by a negative constant is valid affine IR that xDSL's flattener
// cannot simplify (the fuzzer found a ValueError escaping from every schedule pass): the
// passes treat it as an opaque bound, as they do a semi-affine one, and loom-lower-affine
// refuses it later with its location (tests/lit/loom-lower-affine/refuse.mlir).
func.func @bound_ceildiv_by_negative(%n: index, %a: memref<64xf32>) {
  affine.for %i = 0 to affine_map<(d0) -> (d0 ceildiv -4)>(%n) {
    %v = affine.load %a[%i] : memref<64xf32>
    %w = arith.addf %v, %v : f32
    affine.store %w, %a[%i] : memref<64xf32>
  }
  func.return
}

// The trip count is not constant: a main loop by 2 and a remainder, split at run time.
// CHECK-LABEL: func.func @bound_ceildiv_by_negative
// CHECK:         %[[SPLIT:.*]] = affine.apply affine_map<(d0) -> ((((d0 ceildiv -4) floordiv 2) * 2))> (%n)
// CHECK-NEXT:    affine.for %i = 0 to affine_map<(d0) -> (d0)>(%[[SPLIT]]) step 2 {
// CHECK:         affine.for %{{.*}} = max affine_map<(d0) -> (d0, 0)>(%[[SPLIT]]) to affine_map<(d0) -> ((d0 ceildiv -4))>(%n) {

// TILE-LABEL: func.func @bound_ceildiv_by_negative
// TILE:         affine.for %i_t = 0 to affine_map<(d0) -> ((d0 ceildiv -4))>(%n) step 4 {
// TILE-NEXT:      affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0, d1) -> ((d0 + 4), (d1 ceildiv -4))>(%i_t, %n) {

// VEC-LABEL: func.func @bound_ceildiv_by_negative
// VEC:         affine.for %i = 0 to affine_map<(d0) -> ((((d0 ceildiv -4) floordiv 8) * 8))>(%n) step 8 {
// VEC:         vector.maskedstore

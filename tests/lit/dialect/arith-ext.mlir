// RUN: loom-opt %s --split-input-file | filecheck %s
// arith_ext: arith's integer casts on scalars and on vectors (xDSL 0.74's take scalars only).

// CHECK-LABEL: func.func @casts
// CHECK:      arith_ext.extsi %s : vector<8xi8> to vector<8xi32>
// CHECK-NEXT: arith_ext.extui %u : ui8 to i32
// CHECK-NEXT: arith_ext.sitofp %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: arith_ext.fptosi %{{.*}} : vector<8xf32> to vector<8xi32>
// CHECK-NEXT: arith_ext.trunci %{{.*}} : vector<8xi32> to vector<8xui8>
func.func @casts(%s: vector<8xi8>, %u: ui8) -> vector<8xui8> {
  %ws = arith_ext.extsi %s : vector<8xi8> to vector<8xi32>
  %wu = arith_ext.extui %u : ui8 to i32
  %f = arith_ext.sitofp %ws : vector<8xi32> to vector<8xf32>
  %w = arith_ext.fptosi %f : vector<8xf32> to vector<8xi32>
  %q = arith_ext.trunci %w : vector<8xi32> to vector<8xui8>
  func.return %q : vector<8xui8>
}

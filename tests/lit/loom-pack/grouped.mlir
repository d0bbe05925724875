// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 group=2 element=i16},loom-pack{operand=0 level=0 panel=6 group=2 element=i16}' | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 group=4 element=i8}' --remarks -o /dev/null 2>&1 | filecheck %s --check-prefix=QUADS

// `group=G`: each panel row holds G consecutive k of every column side by side (the
// layout the dot-product instructions read: loom-dot), [panel][k floordiv G][offset * G
// + k mod G]; the copy's k loop steps by G, each iteration writing a group: G reads down
// k and G adjacent writes (B), or, where the group is adjacent in the operand too (A's
// rows along k), one vector of G read and one written. `element=i16` stores the bytes as i16 (extsi for i8, extui for
// ui8), and the compute loops widen the i16 to i32 (extsi) as they read it.
// CHECK-LABEL: func.func @u8_s8
// CHECK:      %[[BP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x4x16xi16>
// CHECK:      %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x4x12xi16>
// CHECK:      affine.for %k_cp = 0 to 8 step 2 {
// CHECK:      %[[X:.*]] = affine.vector_load %a[%i_t + %i_panel * 6 + %i_cp, %k_cp] : memref<12x8xui8>, vector<2xui8>
// CHECK-NEXT: %[[XW:.*]] = arith_ext.extui %[[X]] : vector<2xui8> to vector<2xi16>
// CHECK-NEXT: affine.vector_store %[[XW]], %[[AP]][%i_panel, %k_cp floordiv 2, %i_cp * 2] : memref<1x4x12xi16>, vector<2xi16>
// CHECK-NEXT: }
// CHECK:      affine.for %k_cp_1 = 0 to 8 step 2 {
// CHECK:      %[[Y:.*]] = affine.load %b[%k_cp_1, %j_t + %j_panel * 8 + %j_cp] : memref<8x16xi8>
// CHECK-NEXT: %[[YW:.*]] = arith_ext.extsi %[[Y]] : i8 to i16
// CHECK-NEXT: affine.store %[[YW]], %[[BP]][%j_panel, %k_cp_1 floordiv 2, %j_cp * 2] : memref<1x4x16xi16>
// CHECK-NEXT: %[[Y1:.*]] = affine.load %b[%k_cp_1 + 1, %j_t + %j_panel * 8 + %j_cp] : memref<8x16xi8>
// CHECK-NEXT: %[[YW1:.*]] = arith_ext.extsi %[[Y1]] : i8 to i16
// CHECK-NEXT: affine.store %[[YW1]], %[[BP]][%j_panel, %k_cp_1 floordiv 2, %j_cp * 2 + 1] : memref<1x4x16xi16>
// CHECK:      %[[A:.*]] = affine.load %[[AP]][0, %k floordiv 2, %i * 2 + %i_t * -2 + %k mod 2] : memref<1x4x12xi16>
// CHECK-NEXT: %[[B:.*]] = affine.load %[[BP]][0, %k floordiv 2, %j * 2 + %j_t * -2 + %k mod 2] : memref<1x4x16xi16>
// CHECK-NEXT: %[[C:.*]] = affine.load %c[%i, %j] : memref<12x16xi32>
// CHECK-NEXT: %[[AW:.*]] = arith_ext.extsi %[[A]] : i16 to i32
// CHECK-NEXT: %[[BW:.*]] = arith_ext.extsi %[[B]] : i16 to i32
// CHECK-NEXT: arith.muli %[[AW]], %[[BW]] : i32
// Quads of B's own i8 (vpdpbusd's layout): no copy cast, the compute loops widen as before.
// QUADS: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 8x8 at loop %j_t (level 1) as panels [1][2][32], %k in groups of 4 inside each panel's rows (the dot-product layout), 64 B
func.func @u8_s8(%a: memref<12x8xui8>, %b: memref<8x16xi8>, %c: memref<12x16xi32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %j_t = 0 to 16 step 8 {
      affine.for %k = 0 to 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<12x8xui8>
            %y = affine.load %b[%k, %j] : memref<8x16xi8>
            %acc = affine.load %c[%i, %j] : memref<12x16xi32>
            %wx = arith_ext.extui %x : ui8 to i32
            %wy = arith_ext.extsi %y : i8 to i32
            %p = arith.muli %wx, %wy : i32
            %s = arith.addi %acc, %p : i32
            affine.store %s, %c[%i, %j] : memref<12x16xi32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

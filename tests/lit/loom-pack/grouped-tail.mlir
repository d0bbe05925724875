// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 group=2 element=i16},loom-pack{operand=0 level=1 panel=6 group=4 element=ui8}' --remarks 2>&1 | filecheck %s

// `group=G` where a tile of k may end inside a group: K = 7 tiled by 4, pairs of B (its last
// tile 3 long: one pair and 1 element) and quads of A (1 element short of one). The copy runs
// to the end's last whole group (A's a vector of 4 at a time); a second copy, whose k loop runs once in the tile that ends
// inside a group (from 7 - r - k_t to the end), copies the last group's r elements and writes
// zeros after them (a ui8 zero is an i32 zero truncated); the buffers are marked
// `loom.zero_padded_groups`, so that loom-dot may run k on to the last whole group.
// CHECK:      %b_pack = memref.alloc() {alignment = 64 : i64, loom.zero_padded_groups} : memref<1x2x16xi16>
// CHECK-NEXT: %a_pack = memref.alloc() {alignment = 64 : i64, loom.zero_padded_groups} : memref<2x1x24xui8>
// CHECK:      affine.for %k_cp = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 4))>(%k_t) step 4 {
// CHECK:      %[[QUAD:.*]] = affine.vector_load %a[%i_panel * 6 + %i_cp, %k_t + %k_cp] : memref<12x7xui8>, vector<4xui8>
// CHECK-NEXT: affine.vector_store %[[QUAD]], %a_pack[%i_panel, %k_cp floordiv 4, %i_cp * 4] : memref<2x1x24xui8>, vector<4xui8>
// CHECK:      affine.for %k_cp_1 = affine_map<(d0) -> (((d0 * -1) + 4))>(%k_t) to min affine_map<(d0) -> (4, ((d0 * -1) + 7))>(%k_t) step 4 {
// CHECK:        %[[A2:.*]] = affine.load %a[%i_panel_1 * 6 + %i_cp_1, %k_t + %k_cp_1 + 2] : memref<12x7xui8>
// CHECK-NEXT:   affine.store %[[A2]], %a_pack[%i_panel_1, %k_cp_1 floordiv 4, %i_cp_1 * 4 + 2] : memref<2x1x24xui8>
// CHECK-NEXT:   %[[WIDE:.*]] = arith.constant 0 : i32
// CHECK-NEXT:   %[[ZERO:.*]] = arith_ext.trunci %[[WIDE]] : i32 to ui8
// CHECK-NEXT:   affine.store %[[ZERO]], %a_pack[%i_panel_1, %k_cp_1 floordiv 4, %i_cp_1 * 4 + 3] : memref<2x1x24xui8>
// CHECK:      affine.for %k_cp_2 = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 6))>(%k_t) step 2 {
// CHECK:      affine.for %k_cp_3 = affine_map<(d0) -> (((d0 * -1) + 6))>(%k_t) to min affine_map<(d0) -> (4, ((d0 * -1) + 7))>(%k_t) step 2 {
// CHECK:        %[[B0:.*]] = affine.load %b[%k_t + %k_cp_3, %j_t + %j_panel_1 * 8 + %j_cp_1] : memref<7x16xi8>
// CHECK-NEXT:   %[[B0W:.*]] = arith_ext.extsi %[[B0]] : i8 to i16
// CHECK-NEXT:   affine.store %[[B0W]], %b_pack[%j_panel_1, %k_cp_3 floordiv 2, %j_cp_1 * 2] : memref<1x2x16xi16>
// CHECK-NEXT:   %[[Z16:.*]] = arith.constant 0 : i16
// CHECK-NEXT:   affine.store %[[Z16]], %b_pack[%j_panel_1, %k_cp_3 floordiv 2, %j_cp_1 * 2 + 1] : memref<1x2x16xi16>
// The compute loop keeps its bounds (it reads no padding until loom-dot runs it on).
// CHECK:      affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> ((d0 + 4), 7)>(%k_t) {
// CHECK: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 4x8 at loop %k_t (level 1) as panels [1][2][16], %k in groups of 2 inside each panel's rows (the dot-product layout), a tile's last group of 1 padded with zeros, widened from i8 to i16 as it is copied, 64 B
// CHECK: remark: [loom-pack] packed A (%a) of nest 'matmul': tile 12x4 at loop %k_t (level 1) as panels [2][1][24], %k in groups of 4 inside each panel's rows (the dot-product layout), a tile's last group of 3 padded with zeros, 48 B
func.func @odd_k(%a: memref<12x7xui8>, %b: memref<7x16xi8>, %c: memref<12x16xi32>) {
  affine.for %j_t = 0 to 16 step 8 {
    affine.for %k_t = 0 to 7 step 4 {
      affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> (d0 + 4, 7)>(%k_t) {
        affine.for %i = 0 to 12 {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<12x7xui8>
            %y = affine.load %b[%k, %j] : memref<7x16xi8>
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

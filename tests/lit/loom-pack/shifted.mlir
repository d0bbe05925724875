// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 group=4 element=i8},loom-pack{operand=0 level=0 panel=6 group=4 element=ui8}' | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=0 level=0 panel=6 group=4 element=ui8}' --remarks -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK

// `element=ui8` for an i8 operand that the loops sign-extend (s8 x s8): the copy stores
// each element plus 128 as an unsigned byte (-128..127 as 0..255), and the compute loops
// read `extui(x) - 128`, the operand's value again: the IR computes what it did, with A's
// bytes in the unsigned layout vpdpbusd reads (loom-compensate then takes the 128 out).
// CHECK-LABEL: func.func @s8_s8
// CHECK:      %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x24xui8>
// CHECK:      %[[X:.*]] = affine.vector_load %a[%i_t + %i_panel * 6 + %i_cp, %k_cp] : memref<12x8xi8>, vector<4xi8>
// CHECK-NEXT: %[[XW:.*]] = arith_ext.extsi %[[X]] : vector<4xi8> to vector<4xi32>
// CHECK-NEXT: %[[S:.*]] = arith.constant dense<128> : vector<4xi32>
// CHECK-NEXT: %[[XS:.*]] = arith.addi %[[XW]], %[[S]] : vector<4xi32>
// CHECK-NEXT: %[[XU:.*]] = arith_ext.trunci %[[XS]] : vector<4xi32> to vector<4xui8>
// CHECK-NEXT: affine.vector_store %[[XU]], %[[AP]][%i_panel, %k_cp floordiv 4, %i_cp * 4] : memref<1x2x24xui8>, vector<4xui8>
// CHECK:      %[[A:.*]] = affine.load %[[AP]][0, %k floordiv 4, %i * 4 + %i_t * -4 + %k mod 4] : memref<1x2x24xui8>
// CHECK:      %[[AW:.*]] = arith_ext.extui %[[A]] : ui8 to i32
// CHECK-NEXT: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[AV:.*]] = arith.subi %[[AW]], %[[C128]] : i32
// CHECK-NEXT: %[[BW:.*]] = arith_ext.extsi %{{.*}} : i8 to i32
// CHECK-NEXT: arith.muli %[[AV]], %[[BW]] : i32
// REMARK: remark: [loom-pack] packed A (%a) of nest 'matmul': tile 6x8 at loop %i_t (level 0) as panels [1][2][24], %k in groups of 4 inside each panel's rows (the dot-product layout), shifted by +128 to ui8 as it is copied (read back zero-extended, minus 128), 48 B
func.func @s8_s8(%a: memref<12x8xi8>, %b: memref<8x16xi8>, %c: memref<12x16xi32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %j_t = 0 to 16 step 8 {
      affine.for %k = 0 to 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<12x8xi8>
            %y = affine.load %b[%k, %j] : memref<8x16xi8>
            %acc = affine.load %c[%i, %j] : memref<12x16xi32>
            %wx = arith_ext.extsi %x : i8 to i32
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

// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 group=4 element=i8},loom-pack{operand=0 level=0 panel=4 group=4 element=ui8},loom-compensate' | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 group=4 element=i8},loom-pack{operand=0 level=0 panel=4 group=4 element=ui8},loom-compensate{op=matmul}' --remarks -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=dot512,vector_bits=512,vector_registers=32,fma=1,bf16_dot=1,int8_dot=1" loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 group=4 element=i8},loom-pack{operand=0 level=0 panel=4 group=4 element=ui8},loom-compensate,loom-vectorize{width=16},loom-dot{width=16}' | filecheck %s --check-prefix=DOT

// s8 x s8 with A packed shifted (loom-pack{element=ui8}: A + 128 stored, `extui - 128`
// read): the statement multiplies the shifted bytes as they are, and 128 x each column's
// sum of B over the k loop is taken back out of C. The sums come from B's packed panel,
// right after its copy, by a nest of the statement's own loops along B (k, j: the rows
// dropped) that multiplies B's quads by a row of 128s (%shift) in the same grouped reads,
// so that loom-dot puts it on vpdpbusd too; C -= comp over the register tile's loops
// before the k loop.
// CHECK-LABEL: func.func @s8_s8
// CHECK:      %[[COMP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x16xi32>
// CHECK-NEXT: %[[SHIFT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4xui8>
// CHECK-NEXT: %[[W:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[H:.*]] = arith_ext.trunci %[[W]] : i32 to ui8
// CHECK:      affine.store %[[H]], %[[SHIFT]][%q, %g] : memref<2x4xui8>
// The copy of B, then the sums over its columns:
// CHECK:      affine.store %{{.*}}, %b_pack[%j_panel, %k_cp_1 floordiv 4, %j_cp * 4 + 3] : memref<1x2x64xi8>
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: affine.for %j_sum = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 16))>(%j_t) {
// CHECK-NEXT:   affine.store %[[ZERO]], %[[COMP]][0, %j_sum + %j_t * -1] : memref<1x16xi32>
// CHECK:      affine.for %k_sum = 0 to 8 {
// CHECK-NEXT:   affine.for %j_sum_1 = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 16))>(%j_t) {
// CHECK-NEXT:     %[[S:.*]] = affine.load %[[SHIFT]][%k_sum floordiv 4, %k_sum mod 4] : memref<2x4xui8>
// CHECK-NEXT:     %[[B:.*]] = affine.load %b_pack[0, %k_sum floordiv 4, %j_sum_1 * 4 + %j_t * -4 + %k_sum mod 4] : memref<1x2x64xi8>
// CHECK-NEXT:     %[[Q:.*]] = affine.load %[[COMP]][0, %j_sum_1 + %j_t * -1] : memref<1x16xi32>
// CHECK-NEXT:     %[[SW:.*]] = arith_ext.extui %[[S]] : ui8 to i32
// CHECK-NEXT:     %[[BW:.*]] = arith_ext.extsi %[[B]] : i8 to i32
// CHECK-NEXT:     %[[P:.*]] = arith.muli %[[SW]], %[[BW]] : i32
// CHECK-NEXT:     %[[T:.*]] = arith.addi %[[Q]], %[[P]] : i32
// CHECK-NEXT:     affine.store %[[T]], %[[COMP]][0, %j_sum_1 + %j_t * -1] : memref<1x16xi32>
// C -= comp over the tile, before the k loop:
// CHECK:      affine.for %i_comp = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 4))>(%i_t) {
// CHECK-NEXT:   affine.for %j_comp = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> ((d0 + 16))>(%j_t) {
// CHECK-NEXT:     %[[C:.*]] = affine.load %c[%i_comp, %j_comp] : memref<8x16xi32>
// CHECK-NEXT:     %[[Q2:.*]] = affine.load %[[COMP]][0, %j_comp + %j_t * -1] : memref<1x16xi32>
// CHECK-NEXT:     %[[D:.*]] = arith.subi %[[C]], %[[Q2]] : i32
// CHECK-NEXT:     affine.store %[[D]], %c[%i_comp, %j_comp] : memref<8x16xi32>
// The statement: the shifted bytes zero-extended, no subi.
// CHECK:      affine.for %k = 0 to 8 {
// CHECK:        %[[X:.*]] = affine.load %a_pack[0, %k floordiv 4, %i * 4 + %i_t * -4 + %k mod 4] : memref<1x2x16xui8>
// CHECK:        %[[XW:.*]] = arith_ext.extui %[[X]] : ui8 to i32
// CHECK-NEXT:   %[[YW:.*]] = arith_ext.extsi %{{.*}} : i8 to i32
// CHECK-NEXT:   arith.muli %[[XW]], %[[YW]] : i32
// CHECK:      memref.dealloc %[[COMP]] : memref<1x16xi32>
// CHECK-NEXT: memref.dealloc %[[SHIFT]] : memref<2x4xui8>
// REMARK: remark: [loom-compensate] nest 'matmul': s8 x s8 products as u8 x s8: A's bytes read as packed (+128), and 128 x the sums of B's columns over loop %k (%comp, from %b_pack before loop %k, in groups of 4 as the products) subtracted from %c before loop %k
// Both on vpdpbusd: the sums (a row of 128s broadcast) and the products.
// DOT:      affine.for %k_sum = 0 to 8 step 4 {
// DOT:        x86vector.dot "vpdpbusd" %{{.*}}, %{{.*}}, %{{.*}} : vector<4xui8>, vector<64xi8> -> vector<16xi32>
// DOT:      affine.for %k = 0 to 8 step 4 {
// DOT:        x86vector.dot "vpdpbusd" %{{.*}}, %{{.*}}, %{{.*}} : vector<4xui8>, vector<64xi8> -> vector<16xi32>
func.func @s8_s8(%a: memref<8x8xi8>, %b: memref<8x16xi8>, %c: memref<8x16xi32>) {
  affine.for %i_t = 0 to 8 step 4 {
    affine.for %j_t = 0 to 16 step 16 {
      affine.for %k = 0 to 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 4)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 16)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<8x8xi8>
            %y = affine.load %b[%k, %j] : memref<8x16xi8>
            %acc = affine.load %c[%i, %j] : memref<8x16xi32>
            %wx = arith_ext.extsi %x : i8 to i32
            %wy = arith_ext.extsi %y : i8 to i32
            %p = arith.muli %wx, %wy : i32
            %s = arith.addi %acc, %p : i32
            affine.store %s, %c[%i, %j] : memref<8x16xi32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

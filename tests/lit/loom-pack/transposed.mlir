// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2 panel=16}' | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=0 level=2 panel=6}' | filecheck %s --check-prefix=A

// B a transposed view (strided<[1, 50]>: adjacent along k): each of a panel's 16 columns
// is a row of the buffer underneath, in lines of its own, and 16 of them read in turn
// (the order for a row-major B, k_cp outside) could fall into one set of an 8-way L1
// (rows a power of two apart: 3072 bytes apart, 768 floats, fall into 4 sets). Wider
// than that (loom_pack.ASSOCIATIVITY), the copy reads each column along k: the offset in
// the panel (j_cp) outside k_cp. A's panels of 6 rows keep the order of a row-major
// operand's panels (k_cp outside, the 6 rows read in turn).
// CHECK-LABEL: func.func @transposed_b
// CHECK:         affine.for %[[KT:.*]] = 0 to 50 step 16 {
// CHECK-NEXT:      affine.for %[[P:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.for %[[JC:.*]] = 0 to min affine_map<(d0, d1) -> (16, (((d0 * -1) + (d1 * -16)) + 70))>(%{{.*}}, %[[P]]) {
// CHECK-NEXT:          affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// CHECK-NEXT:            %[[V:.*]] = affine.load %b[%[[KT]] + %[[KC]], %{{.*}} + %[[P]] * 16 + %[[JC]]] : memref<50x70xf32, strided<[1, 50]>>
// CHECK-NEXT:            affine.store %[[V]], %{{.*}}[%[[P]], %[[KC]], %[[JC]]] : memref<4x16x16xf32>
// A-LABEL: func.func @transposed_b
// A:         affine.for %[[KT:.*]] = 0 to 50 step 16 {
// A-NEXT:      affine.for %[[P:.*]] = 0 to 6 {
// A-NEXT:        affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// A-NEXT:          affine.for %[[IC:.*]] = 0 to min affine_map<(d0) -> (6, ((d0 * -6) + 32))>(%[[P]]) {
// A-NEXT:            affine.load %a[%{{.*}} + %[[P]] * 6 + %[[IC]], %[[KT]] + %[[KC]]] : memref<64x50xf32>
func.func @transposed_b(%a: memref<64x50xf32>, %b: memref<50x70xf32, strided<[1, 50]>>, %c: memref<64x70xf32>) {
  affine.for %i_t = 0 to 64 step 32 {
    affine.for %j_t = 0 to 70 step 64 {
      affine.for %k_t = 0 to 50 step 16 {
        affine.for %i = %i_t to affine_map<(d0) -> (d0 + 32)>(%i_t) {
          affine.for %j = %j_t to min affine_map<(d0) -> (d0 + 64, 70)>(%j_t) {
            affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 16, 50)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<64x50xf32>
              %y = affine.load %b[%k, %j] : memref<50x70xf32, strided<[1, 50]>>
              %z = affine.load %c[%i, %j] : memref<64x70xf32>
              %p = arith.mulf %x, %y : f32
              %s = arith.addf %z, %p : f32
              affine.store %s, %c[%i, %j] : memref<64x70xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

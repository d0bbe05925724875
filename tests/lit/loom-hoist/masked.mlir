// RUN: loom-opt %s -p loom-hoist --split-input-file | filecheck %s
// RUN: loom-opt %s -p loom-hoist --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// The last 7 columns of a register tile (loom-vectorize's masked remainder): C's masked
// vector is loaded once before k under the same mask, carried as an iter_arg (the fma
// only combines lanes), stored once after k under the mask. The mask and its count move
// out of the loop first (invariant code motion).
// CHECK-LABEL: func.func @masked_tile
// CHECK:       %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// CHECK-NEXT:  %[[C0:.*]] = vector.maskedload %c[%i, %{{.*}}], %[[MASK]], %{{.*}} : memref<6x15xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK-NEXT:  %[[R:.*]] = affine.for %k = 0 to 64 iter_args(%[[ACC:.*]] = %[[C0]]) -> (vector<8xf32>) {
// CHECK-NOT:     vector.maskedstore
// CHECK:         %[[S:.*]] = vector.fma %{{.*}}, %{{.*}}, %[[ACC]] : vector<8xf32>
// CHECK-NEXT:    affine.yield %[[S]] : vector<8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  vector.maskedstore %c[%i, %{{.*}}], %[[MASK]], %[[R]] : memref<6x15xf32>, vector<8xi1>, vector<8xf32>
// REMARK: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[%i, %{{.*}}] (masked)
func.func @masked_tile(%a: memref<6x64xf32>, %b: memref<64x15xf32>, %c: memref<6x15xf32>, %i: index) {
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %rest = arith.constant 8 : index
  affine.for %k = 0 to 64 {
    %n = arith.constant 7 : index
    %mask = vector.create_mask %n : vector<8xi1>
    %x = affine.load %a[%i, %k] : memref<6x64xf32>
    %xv = vector.broadcast %x : f32 to vector<8xf32>
    %y = vector.maskedload %b[%k, %rest], %mask, %zero : memref<64x15xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
    %acc = vector.maskedload %c[%i, %rest], %mask, %zero : memref<6x15xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
    %s = vector.fma %xv, %y, %acc : vector<8xf32>
    vector.maskedstore %c[%i, %rest], %mask, %s : memref<6x15xf32>, vector<8xi1>, vector<8xf32>
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The same for i32 sums (a low-precision matmul's last 4 columns, widened: muli, addi are
// lane-wise too): kept in registers across k, not loaded and stored under the mask at
// every k (u8 x s8 256x4x256, znver4: 1.1 -> 13.8 GOP/s).
// CHECK-LABEL: func.func @masked_i32
// CHECK:       %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK-NEXT:  %[[C0:.*]] = vector.maskedload %c[%i, %{{.*}}], %[[MASK]], %{{.*}} : memref<6x4xi32>, vector<16xi1>, vector<16xi32> into vector<16xi32>
// CHECK-NEXT:  %[[R:.*]] = affine.for %k = 0 to 64 iter_args(%[[ACC:.*]] = %[[C0]]) -> (vector<16xi32>) {
// CHECK:         %[[S:.*]] = arith.addi %[[ACC]], %{{.*}} : vector<16xi32>
// CHECK-NEXT:    affine.yield %[[S]] : vector<16xi32>
// CHECK-NEXT:  }
// CHECK-NEXT:  vector.maskedstore %c[%i, %{{.*}}], %[[MASK]], %[[R]] : memref<6x4xi32>, vector<16xi1>, vector<16xi32>
// REMARK: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[%i, %{{.*}}] (masked)
// REMARK-NOT: %c[%i, %c0] (masked) not promoted
func.func @masked_i32(%a: memref<6x64xi32>, %b: memref<64x4xi32>, %c: memref<6x4xi32>, %i: index) {
  %zero = arith.constant dense<0> : vector<16xi32>
  %n = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %mask = vector.create_mask %n : vector<16xi1>
  affine.for %k = 0 to 64 {
    %x = affine.load %a[%i, %k] : memref<6x64xi32>
    %xv = vector.broadcast %x : i32 to vector<16xi32>
    %y = vector.maskedload %b[%k, %c0], %mask, %zero : memref<64x4xi32>, vector<16xi1>, vector<16xi32> into vector<16xi32>
    %acc = vector.maskedload %c[%i, %c0], %mask, %zero : memref<6x4xi32>, vector<16xi1>, vector<16xi32> into vector<16xi32>
    %p = arith.muli %xv, %y : vector<16xi32>
    %s = arith.addi %acc, %p : vector<16xi32>
    vector.maskedstore %c[%i, %c0], %mask, %s : memref<6x4xi32>, vector<16xi1>, vector<16xi32>
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The loaded masked vector is also stored whole elsewhere: the lanes the mask leaves
// out (pass_thru's zeros there) would be the carried vector's, so nothing is promoted.
// CHECK-LABEL: func.func @masked_leak
// CHECK:       affine.for %k = 0 to 64 {
// CHECK:         vector.maskedload %c
// CHECK:         vector.maskedstore %c
// REMARK: remark: [loom-hoist] %c[%i, %{{.*}}] (masked) not promoted to a register in loop %k: the lanes %c[%i, %{{.*}}] (masked) leaves out reach 'affine.vector_store'
func.func @masked_leak(%b: memref<64x15xf32>, %c: memref<6x15xf32>, %out: memref<64x8xf32>, %i: index) {
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %rest = arith.constant 8 : index
  %n = arith.constant 7 : index
  %mask = vector.create_mask %n : vector<8xi1>
  affine.for %k = 0 to 64 {
    %y = vector.maskedload %b[%k, %rest], %mask, %zero : memref<64x15xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
    %acc = vector.maskedload %c[%i, %rest], %mask, %zero : memref<6x15xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
    %s = arith.addf %y, %acc : vector<8xf32>
    affine.vector_store %acc, %out[%k, 0] : memref<64x8xf32>, vector<8xf32>
    vector.maskedstore %c[%i, %rest], %mask, %s : memref<6x15xf32>, vector<8xi1>, vector<8xf32>
  } {loom.tag = "matmul"}
  func.return
}

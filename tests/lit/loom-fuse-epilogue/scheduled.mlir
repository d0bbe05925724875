// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-tile{sizes=16,32,32 op=matmul},loom-tile{sizes=4,16 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,4,2 op=matmul},loom-hoist{op=matmul},loom-fuse-epilogue' | filecheck %s
// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-tile{sizes=16,32,32 op=matmul},loom-tile{sizes=4,16 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,4,2 op=matmul},loom-hoist{op=matmul},loom-fuse-epilogue' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// BLIS's nest by hand (what loom-default builds, smaller): K = 64 in two panels of
// KC = 32 (%k_t), the 4x16 register block held in 8 vectors across %k and stored after
// it. A store is the last write of its 8 elements in the last panel (%k_t >= 32, one
// test per block): there it stores relu(c + bias) on the vectors (the bias read as the
// two vectors of the block's columns, once each; relu as maximumf), into %r. The block's
// loads read the partial sums of the first panel from %r in the second, and zeros in the
// first (%k_t == 0): the zero fill goes, %r is written once per panel, the last time
// with the epilogue.
// CHECK-LABEL: func.func @tiled(
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %k_t = 0 to 64 step 32 {
// CHECK:           %[[L0:.*]] = affine.vector_load %r[%i_t2, %j_t2] : memref<16x32xf32>, vector<8xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:      %[[START:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[FIRST:.*]] = arith.cmpi eq, %k_t, %[[START]] : index
// CHECK-NEXT:      arith.select %[[FIRST]], %[[Z]], %[[L0]] : vector<8xf32>
// CHECK:           %[[C0:.*]], %[[C1:.*]], %[[C2:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = affine.for %k =
// CHECK:           }
// CHECK-NEXT:      %[[LAST:.*]] = arith.constant 32 : index
// CHECK-NEXT:      %[[GUARD:.*]] = arith.cmpi sge, %k_t, %[[LAST]] : index
// CHECK-NEXT:      %[[B0:.*]] = affine.vector_load %bias[%j_t2] : memref<32xf32>, vector<8xf32>
// CHECK-NEXT:      %[[S0:.*]] = arith.addf %[[C0]], %[[B0]] : vector<8xf32>
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:      %[[R0:.*]] = arith.maximumf %[[S0]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:      %[[V0:.*]] = arith.select %[[GUARD]], %[[R0]], %[[C0]] : vector<8xf32>
// CHECK-NEXT:      affine.vector_store %[[V0]], %r[%i_t2, %j_t2] : memref<16x32xf32>, vector<8xf32>
// CHECK-NEXT:      %[[B1:.*]] = affine.vector_load %bias[%j_t2 + 8] : memref<32xf32>, vector<8xf32>
// CHECK-NEXT:      %[[S1:.*]] = arith.addf %[[C1]], %[[B1]] : vector<8xf32>
// CHECK-NEXT:      %[[R1:.*]] = arith.maximumf %[[S1]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:      %[[V1:.*]] = arith.select %[[GUARD]], %[[R1]], %[[C1]] : vector<8xf32>
// CHECK-NEXT:      affine.vector_store %[[V1]], %r[%i_t2, %j_t2 + 8] : memref<16x32xf32>, vector<8xf32>
// CHECK-NEXT:      %[[S2:.*]] = arith.addf %[[C2]], %[[B0]] : vector<8xf32>
// CHECK-NEXT:      %[[R2:.*]] = arith.maximumf %[[S2]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:      %[[V2:.*]] = arith.select %[[GUARD]], %[[R2]], %[[C2]] : vector<8xf32>
// CHECK-NEXT:      affine.vector_store %[[V2]], %r[%i_t2 + 1, %j_t2] : memref<16x32xf32>, vector<8xf32>
// CHECK-COUNT-5:   affine.vector_store
// CHECK-NOT:       affine.vector_store
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: scheduled.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), relu (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %c for the last time, 8 stores (8 in the last iteration of %k_t), into %r; %c and %s no longer written; the zero fill dropped: the loads that read it read zeros
func.func @tiled(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %c = loom.matmul %x, %w : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %s = loom.add %c, %bias : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %r = loom.relu %s : tensor<16x32xf32>
  func.return %r : tensor<16x32xf32>
}

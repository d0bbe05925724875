// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file | filecheck %s --check-prefix=WIDTH

// loom-default planned for an AVX-512 machine (default.mlir: the same for AVX2): 32 KiB
// L1d, 1 MiB L2, 32 zmm registers of 16 f32 lanes, whatever the host is. Register tile
// 14x32: 28 accumulators, 2 vectors of B and a broadcast of A in 31 registers. Every
// vector of the module has the target's 16 lanes, in the matmul and in the nests
// loom-default vectorizes besides it (the zero fill of C, the epilogues): the one target
// every pass asks, not the host's width.
// WIDTH-NOT:   vector<8x
// WIDTH-NOT:   vector<4x
// WIDTH-NOT:   vector<32x

// 64x64x64: M = 64 is peeled into a 56-row main nest (4 x MR) and an 8-row copy; N = 64
// is 2 x NR. The main nest keeps the 14x32 block of C in 28 vector<16xf32> iter_args
// across k (28 fmas per k); the 8-row copy has fewer rows than MR: (k, i, j), k jammed
// by 4, j by the 2 vectors of 32 columns. No zero fill of C (loom-fuse-epilogue drops
// it): the accumulators start at zero.
// CHECK-LABEL: func.func @mm64
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %j_t = 0 to 64 step 64 {
// CHECK-NEXT:      affine.for %k_t = 0 to 64 step 64 {
// CHECK-NEXT:        affine.for %i_t = 0 to 56 step 56 {
// CHECK-NEXT:          affine.for %i_t2 = {{.*}}(%i_t) to {{.*}}(%i_t) step 14 {
// CHECK-NEXT:            affine.for %j_t2 = {{.*}}(%j_t) to {{.*}}(%j_t) step 32 {
// CHECK-NOT:               affine.vector_load %c[
// CHECK:                   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT:              = affine.for %k = {{.*}}(%k_t) to {{.*}}(%k_t) iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-NOT:                 affine.for
// CHECK-COUNT-28:            vector.fma %{{.*}}, %{{.*}}, %c_acc{{.*}} : vector<16xf32>
// CHECK-NOT:                 affine.for
// CHECK:                     affine.yield
// CHECK-NEXT:              }
// CHECK-COUNT-28:          affine.vector_store %{{.*}}, %c[%i_t2{{.*}}, %j_t2{{.*}}] : memref<64x64xf32>, vector<16xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 64 step 8 {
// CHECK-NEXT:      affine.for %{{.*}} = 56 to 64 {
// CHECK:             affine.for %{{.*}} = 0 to 64 step 32 {
// CHECK-COUNT-16:      vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         func.return
// REMARK:      avx512.mlir:[[# @LINE + 7]]:3: remark: [loom-vectorize] nest 'loom_default_0': vectorized its innermost loop by 16 (main 4 iterations, no remainder)
// REMARK:      avx512.mlir:[[# @LINE + 6]]:3: remark: [loom-peel] nest 'loom_default_1' peeled for sizes [14, 32]: %i: iterations [0, 56) in the main nest, the last 8 in a copy; %j: 64 iterations, nothing to peel for size 32
// REMARK:      avx512.mlir:[[# @LINE + 5]]:3: remark: [loom-default] matmul 56x64x64 on test512: L1d 32 KiB, L2 1 MiB, L3 32 MiB, 512-bit vectors x 32 registers, FMA: register tile 14x32 (28 accumulators of 16 lanes); cache tiles MC=56 NC=64 KC=64; no packing: A and B fit in L1 together; {{.*}}; pass list: loom-tile{sizes=56,64,64 op=matmul depth=0},loom-tile{sizes=14,32 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-vectorize{width=16 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,14,2 op=matmul},loom-hoist{op=matmul},loom-prefetch{op=matmul}
// REMARK:      avx512.mlir:[[# @LINE + 4]]:3: remark: [loom-prefetch] loop %j_t2: 28 prefetches one iteration (32 in %j_t2) ahead
// REMARK:      avx512.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 8x64x64 (peeled copy 1 of the nest) on test512: {{.*}}: 8 rows < MR=14: rows of B streamed once (loop order k, i, j), k unroll-jammed by 8, j in 16-lane vectors; {{.*}}; pass list: loom-interchange{order=2,0,1 op=matmul},loom-vectorize{width=16 op=matmul},loom-unroll-jam{factors=8,1,2 op=matmul},loom-hoist{op=matmul}
// REMARK:      avx512.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (k, i, j): factors [8, 1, 2] requested, [8, 1, 2] applied
func.func @mm64(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = loom.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}

// -----

// 28x40x8: N = 40 is peeled into 32 columns (one NR) and an 8-column copy, whose tile is
// 14x8: narrower than one vector, so each row is one masked vector<16xf32>, kept in
// registers across k by loom-hoist (14 masked stores after k; no loads of C before it:
// C's zero fill is dropped and the accumulators start at zero), and the unroll-jam
// factors have no j factor: the j loop of one vector is gone.
// CHECK-LABEL: func.func @mm_columns
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         affine.for %{{.*}} = 32 to 40 step 8 {
// CHECK:           affine.for %{{.*}} = {{.*}} step 14 {
// CHECK:             affine.for %{{.*}} = {{.*}} step 8 {
// CHECK-NOT:           vector.maskedload %c[
// CHECK:               = affine.for %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-14:        vector.fma %{{.*}}, %{{.*}}, %c_acc{{.*}} : vector<16xf32>
// CHECK:                 affine.yield
// CHECK-NEXT:          }
// CHECK-COUNT-14:      vector.maskedstore %c[{{.*}}], %{{.*}}, %{{.*}} : memref<28x40xf32>, vector<16xi1>, vector<16xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "matmul"
// CHECK:         func.return
// REMARK:      avx512.mlir:[[# @LINE + 6]]:3: remark: [loom-peel] nest 'loom_default_1' peeled for sizes [14, 32]: %i: 28 iterations, nothing to peel for size 14; %j: iterations [0, 32) in the main nest, the last 8 in a copy
// REMARK:      avx512.mlir:[[# @LINE + 5]]:3: remark: [loom-default] matmul 28x32x8 on test512: {{.*}} register tile 14x32 {{.*}}loom-unroll-jam{factors=1,1,1,1,1,1,14,2 op=matmul}
// REMARK:      avx512.mlir:[[# @LINE + 4]]:3: remark: [loom-default] matmul 28x8x8 (peeled copy 1 of the nest) on test512: {{.*}} register tile 14x8 {{.*}}loom-vectorize{width=16 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,14 op=matmul}
// REMARK:      avx512.mlir:[[# @LINE + 3]]:3: remark: [loom-vectorize] nest 'loom_default_1_1': vectorized loop %j by 16 (one masked vector of 8: fewer iterations than the width)
// REMARK:      avx512.mlir:[[# @LINE + 2]]:3: remark: [loom-unroll-jam] unroll-jam band (j_t, k_t, i_t, i_t2, j_t2, k, i): factors [1, 1, 1, 1, 1, 1, 14] requested, [1, 1, 1, 1, 1, 1, 14] applied
func.func @mm_columns(%a: tensor<28x8xf32>, %b: tensor<8x40xf32>) -> tensor<28x40xf32> {
  %c = loom.matmul %a, %b : (tensor<28x8xf32>, tensor<8x40xf32>) -> tensor<28x40xf32>
  func.return %c : tensor<28x40xf32>
}

// -----

// The epilogue of a dense layer: the add of the bias and the relu are fused into the
// matmul's register block by the target's 16 lanes (loom-fuse-epilogue).
// CHECK-LABEL: func.func @dense
// CHECK:         arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         arith.maximumf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
// CHECK-NOT:     loom.tag = "relu"
// REMARK:      avx512.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line {{[0-9]+}}), relu (line {{[0-9]+}}) into the 'matmul' nest
func.func @dense(%x: tensor<14x8xf32>, %w: tensor<8x36xf32>, %bias: tensor<36xf32>) -> tensor<14x36xf32> {
  %c = loom.matmul %x, %w : (tensor<14x8xf32>, tensor<8x36xf32>) -> tensor<14x36xf32>
  %s = loom.add %c, %bias : (tensor<14x36xf32>, tensor<36xf32>) -> tensor<14x36xf32>
  %r = loom.relu %s : tensor<14x36xf32>
  func.return %r : tensor<14x36xf32>
}

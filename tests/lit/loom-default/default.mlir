// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file | filecheck %s --check-prefix=NOLLVM

// skip=fuse-pack: these cases show the order of row tiles (j_t, k_t, i_t, ...); the panel
// order that one thread takes for a matmul of one row block is tests/lit/loom-fuse-pack's
// and tests/test_default.py's.

// loom-default on loom-dialect input: the module is bufferized and lowered to affine
// loops first, then each matmul nest gets the cost model's BLIS schedule. The target is
// fixed by LOOM_TARGET (an AVX2-like machine: 32 KiB L1d, 512 KiB L2, 16 ymm registers,
// 8 f32 lanes), so the plan does not depend on the host: register tile 6x16, KC = 512
// (clamped to K), MC a multiple of 6, NC a multiple of 16 (avx512.mlir: the same for
// AVX-512). The output stays at the affine level: no llvm dialect. Every vector has the
// target's 8 lanes, in the nests loom-default vectorizes besides matmul too (the zero
// fill of C, the epilogue), whatever the host's width is.
// NOLLVM-NOT: llvm.
// NOLLVM-NOT: loom.matmul
// NOLLVM-NOT: vector<16x
// NOLLVM-NOT: vector<4x

// 64x64x64: M = 64 is peeled into a 60-row main nest (a multiple of MR = 6) and a 4-row
// copy; N = 64 is a multiple of NR = 16. A and B fit in L1 together (2 x 16 KiB), so
// nothing is packed: no buffer is allocated. The main nest runs BLIS's loop order
// (j_t, k_t, i_t, i_r, j_r, k) with the cache tiles clamped to the extents and the 6x16
// block of C in 12 vector<8xf32> accumulators (iter_args) across k: 12 fmas per k. The
// 4-row copy has fewer rows than MR: loop order (k, i, j), k unroll-jammed by 8 (N is a
// multiple of the vector width: no masked remainder), j in vectors. C has no zero fill
// (loom-fuse-epilogue, the step `fuse`, drops it with no epilogue too): K fits one k
// block, so the accumulators start at zero and C is written once; the 4-row copy's
// first k step reads a zero in place of C.
// CHECK-LABEL: func.func @mm64
// CHECK-SAME:    (%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %j_t = 0 to 64 step 64 {
// CHECK-NEXT:      affine.for %k_t = 0 to 64 step 64 {
// CHECK-NEXT:        affine.for %i_t = 0 to 60 step 60 {
// CHECK-NEXT:          affine.for %i_t2 = {{.*}}(%i_t) to {{.*}}(%i_t) step 6 {
// CHECK-NEXT:            affine.for %j_t2 = {{.*}}(%j_t) to {{.*}}(%j_t) step 16 {
// CHECK-NOT:               affine.vector_load %c[
// CHECK:                   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:              = affine.for %k = {{.*}}(%k_t) to {{.*}}(%k_t) iter_args(%c_acc = %[[ZERO]], %c_acc_1 = %[[ZERO]], {{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NOT:                 affine.for
// CHECK-COUNT-12:            vector.fma %{{.*}}, %{{.*}}, %c_acc{{.*}} : vector<8xf32>
// CHECK-NOT:                 affine.for
// CHECK:                     affine.yield
// CHECK-NEXT:              }
// CHECK-COUNT-12:          affine.vector_store %{{.*}}, %c[%i_t2{{.*}}, %j_t2{{.*}}] : memref<64x64xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    affine.for %[[K:.*]] = 0 to 64 step 8 {
// CHECK-NEXT:      affine.for %[[I:.*]] = 60 to 64 {
// CHECK:             affine.for %{{.*}} = 0 to 64 step 16 {
// CHECK:               %[[C:.*]] = affine.vector_load %c[%[[I]], %{{.*}}] : memref<64x64xf32>, vector<8xf32>
// CHECK-NEXT:          %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:          %[[START:.*]] = arith.constant 0 : index
// CHECK-NEXT:          %[[FIRST:.*]] = arith.cmpi eq, %[[K]], %[[START]] : index
// CHECK-NEXT:          %{{.*}} = arith.select %[[FIRST]], %[[Z]], %[[C]] : vector<8xf32>
// CHECK-COUNT-16:      vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     memref.alloc
// CHECK:         func.return
// REMARK:      default.mlir:[[# @LINE + 6]]:3: remark: [loom-peel] nest 'loom_default_1' peeled for sizes [6, 16]: %i: iterations [0, 60) in the main nest, the last 4 in a copy
// REMARK:      default.mlir:[[# @LINE + 5]]:3: remark: [loom-default] matmul 60x64x64 on test: L1d 32 KiB, L2 512 KiB, L3 32 MiB, 256-bit vectors x 16 registers, FMA: register tile 6x16 (12 accumulators of 8 lanes); cache tiles MC=60 NC=64 KC=64; no packing: A and B fit in L1 together; estimated traffic in f32 elements: DRAM->L3 {{.*}}, L2->L1 {{.*}}, L1->registers {{.*}}; pass list: loom-tile{sizes=60,64,64 op=matmul depth=0},loom-tile{sizes=6,16 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,6,2 op=matmul},loom-hoist{op=matmul},loom-prefetch{op=matmul}
// REMARK:      remark: [loom-hoist] kept in registers across loop %k
// REMARK:      default.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 4x64x64 (peeled copy 1 of the nest) on test: {{.*}}: 4 rows < MR=6: rows of B streamed once (loop order k, i, j), k unroll-jammed by 8, j in 8-lane vectors; {{.*}}; pass list: loom-interchange{order=2,0,1 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=8,1,2 op=matmul},loom-hoist{op=matmul}
// REMARK:      remark: [loom-unroll-jam] unroll-jam band (k, i, j): factors [8, 1, 2] requested, [8, 1, 2] applied
func.func @mm64(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = loom.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}

// -----

// 100x70x90: peeled into a 96x64 main nest and two copies (columns 64..70 of the first
// 96 rows, then the last 4 rows). A and B no longer fit in L1: the main nest packs B as
// KC x NR panels (4 panels of 90x16, copied row by row) at k_t and A as KC x MR panels
// (16 panels of 90x6) at i_t, in buffers allocated before the nest and freed after it; the micro-kernel
// reads both packed buffers. The 96x6 copy is planned for its own extents (its B panel
// padded to 16 columns); the 4-row copy gets the (k, i, j) order and is not packed.
// CHECK-LABEL: func.func @mm_pack
// CHECK-SAME:    (%a: memref<100x90xf32>, %b: memref<90x70xf32>, %c: memref<100x70xf32>)
// CHECK-NEXT:    %[[BP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x90x16xf32>
// CHECK-NEXT:    %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x90x6xf32>
// CHECK-NEXT:    affine.for %j_t = 0 to 64 step 64 {
// CHECK-NEXT:      affine.for %k_t = 0 to 90 step 90 {
// CHECK-NEXT:        affine.for %k_cp = 0 to 90 {
// CHECK-NEXT:          affine.for %{{.*}} = 0 to 4 {
// CHECK:                 affine.vector_store %{{.*}}, %[[BP]][{{.*}}] : memref<4x90x16xf32>, vector<8xf32>
// CHECK:             affine.for %i_t = 0 to 96 step 96 {
// CHECK-NEXT:          affine.for %{{.*}} = 0 to 16 {
// CHECK:                 affine.store %{{.*}}, %[[AP]][{{.*}}] : memref<16x90x6xf32>
// CHECK:               affine.for %i_t2 = {{.*}}(%i_t) to {{.*}}(%i_t) step 6 {
// CHECK-NEXT:            affine.for %j_t2 = {{.*}}(%j_t) to {{.*}}(%j_t) step 16 {
// CHECK:                   = affine.for %k = {{.*}}(%k_t) to {{.*}}(%k_t) iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:                %{{.*}} = affine.load %[[AP]][{{.*}}] : memref<16x90x6xf32>
// CHECK-NEXT:                %{{.*}} = affine.vector_load %[[BP]][{{.*}}] : memref<4x90x16xf32>, vector<8xf32>
// CHECK-NEXT:                %{{.*}} = vector.broadcast
// CHECK-NEXT:                %{{.*}} = vector.fma {{.*}} : vector<8xf32>
// CHECK-NOT:                 affine.load %a[
// CHECK-NOT:                 affine.vector_load %b[
// CHECK:                     affine.yield
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %[[AP]] : memref<16x90x6xf32>
// CHECK-NEXT:    memref.dealloc %[[BP]] : memref<4x90x16xf32>
// CHECK-NEXT:    %[[BP1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x90x6xf32>
// CHECK-NEXT:    %[[AP1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x90x6xf32>
// CHECK:         affine.for %{{.*}} = 64 to 70 step 6 {
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %[[AP1]]
// CHECK-NEXT:    memref.dealloc %[[BP1]]
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %{{.*}} = 0 to 88 step 8 {
// CHECK-NEXT:      affine.for %{{.*}} = 96 to 100 {
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         func.return
// REMARK:      default.mlir:[[# @LINE + 8]]:3: remark: [loom-peel] nest 'loom_default_1' peeled for sizes [6, 16]: %i: iterations [0, 96) in the main nest, the last 4 in a copy; %j: iterations [0, 64) in the main nest, the last 6 in a copy
// REMARK:      default.mlir:[[# @LINE + 7]]:3: remark: [loom-default] matmul 96x64x90 on test: {{.*}}: register tile 6x16 (12 accumulators of 8 lanes); cache tiles MC=96 NC=64 KC=90; packed A 96x90 ({{.*}}, L2), B 90x64 ({{.*}}, L3), A sliver 90x6 ({{.*}}, L1); estimated traffic {{.*}}; pass list: loom-tile{sizes=96,64,90 op=matmul depth=0},loom-tile{sizes=6,16 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-pack{operand=1 level=1 panel=16 op=matmul},loom-pack{operand=0 level=2 panel=6 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,6,2 op=matmul},loom-hoist{op=matmul},loom-prefetch{op=matmul}
// REMARK:      remark: [loom-pack] packed operand 1 (%b) of nest 'loom_default_1_0': tile 90x64 at loop %k_t (level 1) as panels [4][90][16]
// REMARK:      remark: [loom-pack] packed operand 0 (%a) of nest 'loom_default_1_0': tile 96x90 at loop %i_t (level 2) as panels [16][90][6]
// REMARK:      default.mlir:[[# @LINE + 4]]:3: remark: [loom-default] matmul 96x6x90 (peeled copy 1 of the nest)
// REMARK:      default.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 4x64x90 (peeled copy 2 of the nest) on test: {{.*}} 4 rows < MR=6
// REMARK:      default.mlir:[[# @LINE + 2]]:3: remark: [loom-default] matmul 4x6x90 (peeled copy 3 of the nest) on test: {{.*}} 4 rows < MR=6
func.func @mm_pack(%a: tensor<100x90xf32>, %b: tensor<90x70xf32>) -> tensor<100x70xf32> {
  %c = loom.matmul %a, %b : (tensor<100x90xf32>, tensor<90x70xf32>) -> tensor<100x70xf32>
  func.return %c : tensor<100x70xf32>
}

// -----

// 100x70x50: A and B together (34000 bytes) do not fit in L1, but the packing decision
// is taken on the peeled main nest's extents, 96x64x50, whose operands do (32000 bytes):
// no packing, the micro-kernel reads A and B in place.
// CHECK-LABEL: func.func @mm_nopack
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %j_t = 0 to 64 step 64 {
// CHECK-NEXT:      affine.for %k_t = 0 to 50 step 50 {
// CHECK-NEXT:        affine.for %i_t = 0 to 96 step 96 {
// CHECK:                 = affine.for %k = {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:              affine.load %a[%i_t2, %k] : memref<100x50xf32>
// CHECK-NEXT:              affine.vector_load %b[%k, %j_t2] : memref<50x70xf32>, vector<8xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         func.return
// REMARK:      default.mlir:[[# @LINE + 2]]:3: remark: [loom-default] matmul 96x64x50 on test: {{.*}}; cache tiles MC=96 NC=64 KC=50; no packing: A and B fit in L1 together;
func.func @mm_nopack(%a: tensor<100x50xf32>, %b: tensor<50x70xf32>) -> tensor<100x70xf32> {
  %c = loom.matmul %a, %b : (tensor<100x50xf32>, tensor<50x70xf32>) -> tensor<100x70xf32>
  func.return %c : tensor<100x70xf32>
}

// -----

// A batched matmul 2 x (12x32x8): the batch loop stays outermost, BLIS's order inside
// it; 12 and 32 are multiples of the 6x16 register tile, so nothing is peeled.
// CHECK-LABEL: func.func @bmm
// CHECK-SAME:    (%a: memref<2x12x8xf32>, %b: memref<2x8x32xf32>, %c: memref<2x12x32xf32>)
// CHECK-NEXT:    affine.for %[[B:.*]] = 0 to 2 {
// CHECK-NEXT:      affine.for %j_t = 0 to 32 step 32 {
// CHECK-NEXT:        affine.for %k_t = 0 to 8 step 8 {
// CHECK-NEXT:          affine.for %i_t = 0 to 12 step 12 {
// CHECK-NEXT:            affine.for %i_t2 = {{.*}} step 6 {
// CHECK-NEXT:              affine.for %j_t2 = {{.*}} step 16 {
// CHECK:                     = affine.for %k = {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:                  affine.load %a[%[[B]], %i_t2, %k] : memref<2x12x8xf32>
// CHECK-NEXT:                  affine.vector_load %b[%[[B]], %k, %j_t2] : memref<2x8x32xf32>, vector<8xf32>
// CHECK-NEXT:                  vector.broadcast
// CHECK-NEXT:                  vector.fma
// CHECK:                     affine.vector_store %{{.*}}, %c[%[[B]], %i_t2 + 5, %j_t2 + 8] : memref<2x12x32xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "matmul"
// CHECK:         func.return
// REMARK:      default.mlir:[[# @LINE + 4]]:3: remark: [loom-peel] nest 'loom_default_1' left as it is
// REMARK:      default.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 12x32x8 on test: {{.*}}register tile 6x16{{.*}}pass list: loom-tile{sizes=12,32,8 op=matmul depth=1},loom-tile{sizes=6,16 op=matmul depth=4},loom-interchange{order=0,2,3,1,4,5,8,6,7 op=matmul},loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,1,6,2 op=matmul},loom-hoist{op=matmul},loom-prefetch{op=matmul}
// REMARK:      remark: [loom-interchange] interchanged band (b, i_t, j_t, k_t, i_t2, j_t2, i, j, k) -> (b, j_t, k_t, i_t, i_t2, j_t2, k, i, j)
func.func @bmm(%a: tensor<2x12x8xf32>, %b: tensor<2x8x32xf32>) -> tensor<2x12x32xf32> {
  %c = loom.matmul %a, %b : (tensor<2x12x8xf32>, tensor<2x8x32xf32>) -> tensor<2x12x32xf32>
  func.return %c : tensor<2x12x32xf32>
}

// -----

// The epilogue of a dense layer: the add of a bias (broadcast over the rows) and the
// relu are fused into the matmul's register block (loom-fuse-epilogue), 8 lanes.
// CHECK-LABEL: func.func @dense
// CHECK:         arith.addf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:         arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
// CHECK-NOT:     loom.tag = "relu"
// REMARK:      default.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line {{[0-9]+}}), relu (line {{[0-9]+}}) into the 'matmul' nest
func.func @dense(%x: tensor<12x8xf32>, %w: tensor<8x32xf32>, %bias: tensor<32xf32>) -> tensor<12x32xf32> {
  %c = loom.matmul %x, %w : (tensor<12x8xf32>, tensor<8x32xf32>) -> tensor<12x32xf32>
  %s = loom.add %c, %bias : (tensor<12x32xf32>, tensor<32xf32>) -> tensor<12x32xf32>
  %r = loom.relu %s : tensor<12x32xf32>
  func.return %r : tensor<12x32xf32>
}

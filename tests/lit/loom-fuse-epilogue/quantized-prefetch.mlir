// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-tile{sizes=4,16 op=matmul},loom-interchange{order=0,1,4,2,3 op=matmul},loom-vectorize{width=16 op=matmul},loom-unroll-jam{factors=1,1,1,4 op=matmul},loom-hoist{op=matmul},loom-prefetch{op=matmul},loom-fuse-epilogue' --remarks 2>&1 | filecheck %s

// A requantized layer whose scheduled nest prefetches C's lines for writing (loom-prefetch)
// and never reads its partial sums back (K in one panel, kept in registers): C goes, and
// its prefetches with it (they would ask for lines nothing writes; before, C's buffer
// could not be erased under them: an internal error on znver4's 3x3 conv layers).
// CHECK-LABEL: func.func @layer
// CHECK-NOT: %acc = memref.alloc
// CHECK-NOT: loom.prefetch
// CHECK:     affine.vector_store %{{.*}}, %q[%i_t, %j_t] : memref<8x64xui8>, vector<16xui8>
// CHECK-NOT: loom.prefetch
// CHECK:     remark: [loom-prefetch] loop %j_t: 4 prefetches {{.*}} (4 for writing, locality 3), e.g. of %acc[%i_t, %j_t]
// CHECK:     remark: [loom-fuse-epilogue] fused dequantize (line {{[0-9]+}}), quantize (line {{[0-9]+}}) into the 'matmul' nest (line {{[0-9]+}}): applied where it writes each element of %acc for the last time, 4 stores (4 unconditionally), into %q; %acc and %y no longer written
func.func @layer(%x: tensor<8x16xui8>, %w: tensor<16x64xi8>, %scale: tensor<64xf32>, %zero: tensor<64xi32>,
                 %os: tensor<f32>, %oz: tensor<i32>) -> tensor<8x64xui8> {
  %acc = loom.matmul %x, %w : (tensor<8x16xui8>, tensor<16x64xi8>) -> tensor<8x64xi32>
  %y = loom.dequantize %acc, %scale, %zero {axis = 1 : i64} : (tensor<8x64xi32>, tensor<64xf32>, tensor<64xi32>) -> tensor<8x64xf32>
  %q = loom.quantize %y, %os, %oz : (tensor<8x64xf32>, tensor<f32>, tensor<i32>) -> tensor<8x64xui8>
  func.return %q : tensor<8x64xui8>
}

// RUN: env LOOM_TARGET="cpu=znver4,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=znver4,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// On znver4 (cost_model.A_IN_PLACE) the matmul reads A's rows where they are, MR at a
// time, instead of packing them into panels: B alone is packed. In the panel order (one
// row block) with the tile measured for it (MEASURED_PANEL_TILES: 4x48), in the order of
// row tiles with the register tile (8x48). A transposed A (its rows strided) is packed.

// CHECK-LABEL: func.func @panels
// CHECK:         %w_pack = memref.alloc() {alignment = 64 : i64} : memref<1x256x48xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %j_t2 =
// CHECK-NEXT:      affine.for %i_t2 = {{.*}} step 4 {
// CHECK:             affine.for %k =
// CHECK-NEXT:          affine.load %x[%i_t2, %k] : memref<128x256xf32>
// CHECK:             affine.load %x[%i_t2 + 3, %k] : memref<128x256xf32>
// CHECK:         memref.dealloc %w_pack
// CHECK-NOT:     memref.dealloc
// REMARK:      a-in-place.mlir:[[# @LINE + 2]]:3: remark: [loom-default] matmul 128x96x256 on znver4: {{.*}}: register tile 4x48 (12 accumulators of 16 lanes); {{.*}}; panel order: {{.*}}; A's rows read in place, not packed (128x256 a block, 128 KiB, L2), B 256x48 panels (48 KiB, L2), A sliver 256x4 (4 KiB, L1); {{.*}}; pass list: loom-tile{sizes=128,96,256 op=matmul depth=0},loom-tile{sizes=4,48 op=matmul depth=3},loom-interchange{order=0,2,1,4,3,7,5,6 op=matmul},loom-pack{operand=1 level=3 panel=48 op=matmul},loom-vectorize
func.func @panels(%x: tensor<128x256xf32>, %w: tensor<256x96xf32>) -> tensor<128x96xf32> {
  %c = loom.matmul %x, %w : (tensor<128x256xf32>, tensor<256x96xf32>) -> tensor<128x96xf32>
  func.return %c : tensor<128x96xf32>
}

// -----

// CHECK-LABEL: func.func @rows
// CHECK:         %w_pack = memref.alloc() {alignment = 64 : i64} : memref<2x768x48xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %i_t = 0 to 1024 step 256 {
// CHECK-NEXT:      affine.for %i_t2 = {{.*}} step 8 {
// CHECK-NEXT:        affine.for %j_t2 =
// CHECK:               affine.for %k =
// CHECK-NEXT:            affine.load %x[%i_t2, %k] : memref<1024x768xf32>
// CHECK:               affine.load %x[%i_t2 + 7, %k] : memref<1024x768xf32>
// REMARK:      a-in-place.mlir:[[# @LINE + 2]]:3: remark: [loom-default] matmul 1024x96x768 on znver4: {{.*}}: register tile 8x48 (24 accumulators of 16 lanes); cache tiles MC=256 NC=96 KC=768; A's rows read in place, not packed (256x768 a block, 768 KiB, L2), B 768x96 (288 KiB, L3), A sliver 768x8 (24 KiB, L1); {{.*}}; pass list: loom-tile{sizes=256,96,768 op=matmul depth=0},loom-tile{sizes=8,48 op=matmul depth=3},loom-interchange{order=1,2,0,3,4,7,5,6 op=matmul},loom-pack{operand=1 level=1 panel=48 op=matmul},loom-vectorize
func.func @rows(%x: tensor<1024x768xf32>, %w: tensor<768x96xf32>) -> tensor<1024x96xf32> {
  %c = loom.matmul %x, %w : (tensor<1024x768xf32>, tensor<768x96xf32>) -> tensor<1024x96xf32>
  func.return %c : tensor<1024x96xf32>
}

// -----

// CHECK-LABEL: func.func @transposed
// CHECK-DAG:     memref.alloc() {alignment = 64 : i64} : memref<1x256x48xf32>
// CHECK-DAG:     memref.alloc() {alignment = 64 : i64} : memref<16x256x8xf32>
// REMARK:      a-in-place.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 128x96x256 on znver4: {{.*}}: register tile 8x48 (24 accumulators of 16 lanes); {{.*}}; packed A 128x256 (128 KiB, L2), {{.*}}loom-pack{operand=0 level=1 panel=8 op=matmul}
func.func @transposed(%xt: tensor<256x128xf32>, %w: tensor<256x96xf32>) -> tensor<128x96xf32> {
  %x = loom.transpose %xt {perm = array<i64: 1, 0>} : tensor<256x128xf32> -> tensor<128x256xf32>
  %c = loom.matmul %x, %w : (tensor<128x256xf32>, tensor<256x96xf32>) -> tensor<128x96xf32>
  func.return %c : tensor<128x96xf32>
}

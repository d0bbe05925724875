// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=2" loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=2" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=2" loom-opt %s -p 'loom-default{skip=fuse-pack}' --split-input-file | filecheck %s --check-prefix=ROWS

// With 2 threads, after the schedule: 192 rows fit one block (MC = 384), so the panel
// order (cost_model.py): the copy loop of A's panels runs in parallel, then the two
// column blocks (%j_t, 128 columns each), each with its slot of the B panel buffer
// (%slot), whose first row tile copies each panel (loom-fuse-pack). C has no zero fill
// left to run in parallel or not (loom-fuse-epilogue dropped it).
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         affine.for %i_t = 0 to 192 step 192 {
// CHECK-NEXT:      affine.for %k_t = 0 to 256 step 256 {
// CHECK-NEXT:        "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (32)>{{.*}}}> ({
// CHECK-NEXT:        ^bb0(%i_panel: index):
// CHECK:             }) {loom.num_threads = 2 : i64} : () -> ()
// CHECK-NEXT:        "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (256)>{{.*}}steps = [128 : i64]}> ({
// CHECK-NEXT:        ^bb0(%j_t: index):
// CHECK-NEXT:          %slot = affine.apply affine_map<(d0) -> ((d0 floordiv 128))> (%j_t)
// CHECK-NEXT:          affine.for %j_t2 =
// CHECK-NEXT:            affine.for %i_t2 = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> ((d0 + 6))>(%i_t) step 6 {
// CHECK:                   affine.vector_store %{{.*}}, %b_pack[%slot, 0, %k + %k_t * -1, %j_t2 + %j_t2 * -1] : memref<2x1x256x16xf32>, vector<8xf32>
// CHECK:                 affine.for %i_t2_1 = affine_map<(d0) -> ((d0 + 6))>(%i_t) to affine_map<(d0) -> ((d0 + 192))>(%i_t) step 6 {
// CHECK:             }) {loom.num_threads = 2 : i64} : () -> ()
// REMARK: parallel.mlir:[[# @LINE + 17]]:3: remark: [loom-fuse-epilogue] the zero fill of %c dropped, with no epilogue to fuse: the 'matmul' nest (line [[# @LINE + 17]]) reads a zero where it read the fill, and writes %c once
// REMARK: parallel.mlir:[[# @LINE + 16]]:3: remark: [loom-parallelize] nest 'matmul': loop %i_panel run in parallel (32 iterations, 2 threads)
// REMARK: parallel.mlir:[[# @LINE + 15]]:3: remark: [loom-parallelize] nest 'matmul': loop %j_t run in parallel (2 iterations, 2 threads)

// skip=fuse-pack, the order of row tiles: the loop over the register tiles of the block
// (%i_t2) runs in parallel; the tile loops %j_t, %k_t, %i_t do not (each iteration packs
// into the one shared buffer); the copy of B's panels is too little work.
// ROWS-LABEL: func.func @matmul(
// ROWS:         affine.for %j_t = 0 to 256 step 256 {
// ROWS-NEXT:      affine.for %k_t = 0 to 256 step 256 {
// ROWS-NEXT:        affine.for %k_cp = 0 to 256 {
// ROWS:             affine.for %i_t = 0 to 192 step 192 {
// ROWS-NEXT:          "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (32)>{{.*}}}> ({
// ROWS:               "affine.parallel"(%i_t, %i_t) <{{{.*}}steps = [6 : i64]}> ({
// ROWS-NEXT:          ^bb0(%i_t2: index):
// ROWS-NEXT:            affine.for %j_t2 =
func.func @matmul(%a: memref<192x256xf32>, %b: memref<256x256xf32>, %c: memref<192x256xf32>) {
  loom.matmul ins(%a, %b : memref<192x256xf32>, memref<256x256xf32>) outs(%c : memref<192x256xf32>)
  func.return
}

// -----

// A matrix-vector product has no row tiles to share: its columns are split into one
// block per thread (j_t), each block streaming its rows of B with k outside.
// CHECK-LABEL: func.func @gemv(
// CHECK:         "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (1024)>{{.*}}steps = [512 : i64]}> ({
// CHECK-NEXT:    ^bb0(%j_t: index):
// CHECK-NEXT:      affine.for %k = 0 to 1024 step 8 {
// CHECK:         }) {loom.tag = "matmul", loom.num_threads = 2 : i64} : () -> ()
// REMARK: parallel.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 1x1024x1024 on test: {{.*}}: 1 row < MR=6: rows of B streamed once (loop order k, i, j){{.*}}; j split into blocks of 512 columns, one per thread (loop order j_t, k, i, j); pass list: loom-interchange{order=1,0,2 op=matmul},loom-tile{sizes=512 op=matmul depth=0},loom-interchange{order=0,3,2,1 op=matmul},
// REMARK: parallel.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'matmul': loop %j_t run in parallel (2 iterations, 2 threads)
func.func @gemv(%a: memref<1x1024xf32>, %b: memref<1024x1024xf32>, %c: memref<1x1024xf32>) {
  loom.matmul ins(%a, %b : memref<1x1024xf32>, memref<1024x1024xf32>) outs(%c : memref<1x1024xf32>)
  func.return
}

// -----

// A batched matmul of 6 products on 2 threads: each thread runs a block of 3 whole
// products (%b_t in parallel), packing its own panels into its slot of each buffer,
// rather than sharing the 12 rows of each product (each thread would stream all of B).
// CHECK-LABEL: func.func @products(
// CHECK:         %b_pack = memref.alloc() {alignment = 64 : i64} : memref<2x1x256x16xf32>
// CHECK-NEXT:    %a_pack = memref.alloc() {alignment = 64 : i64} : memref<2x2x256x6xf32>
// CHECK-NEXT:    "affine.parallel"() <{{{.*}}upperBoundsMap = affine_map<() -> (6)>{{.*}}steps = [3 : i64]}> ({
// CHECK-NEXT:    ^bb0(%b_t: index):
// CHECK-NEXT:      %slot = affine.apply affine_map<(d0) -> ((d0 floordiv 3))> (%b_t)
// CHECK:           affine.for %b_1 = affine_map<(d0) -> (d0)>(%b_t) to affine_map<(d0) -> ((d0 + 3))>(%b_t) {
// CHECK:             affine.store %{{.*}}, %a_pack[%slot, %i_panel, %k_cp, %i_cp] : memref<2x2x256x6xf32>
// CHECK-NOT:     "affine.parallel"
// CHECK:         memref.dealloc %a_pack
// REMARK: remark: [loom-default] matmul 12x256x256 on test: {{.*}}; the 6 products in blocks of 3, one per thread, each with its own packed panels; pass list: loom-tile{sizes=3 op=matmul depth=0},
func.func @products(%a: memref<6x12x256xf32>, %b: memref<6x256x256xf32>, %c: memref<6x12x256xf32>) {
  loom.matmul ins(%a, %b : memref<6x12x256xf32>, memref<6x256x256xf32>) outs(%c : memref<6x12x256xf32>)
  func.return
}

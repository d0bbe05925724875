// RUN: loom-opt %s -p loom-fuse-pack --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-fuse-pack{prefetch=0}' --split-input-file | filecheck %s --check-prefix=NOPF
// RUN: loom-opt %s -p loom-fuse-pack --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A B panel copied before the loop over the row tiles (loom-pack's copy, after
// loom-vectorize and loom-hoist): the first row tile reads %b and stores the panel,
// one load and one store per address (the two reads of %b_pack[0, %k, 0] share them);
// the other row tiles read the panel and prefetch the next %j_t's source, 16 columns on.
// CHECK-LABEL: func.func @panel
// CHECK:       affine.for %j_t = 0 to 64 step 16 {
// CHECK-NOT:     %b_pack[0, %k_cp
// CHECK-NEXT:    affine.for %i = 0 to 2 step 2 {
// CHECK:           affine.for %k = 0 to 16 iter_args
// CHECK-NEXT:        %[[V:.*]] = affine.vector_load %b[%k, %j_t] : memref<16x64xf32>, vector<8xf32>
// CHECK-NEXT:        affine.vector_store %[[V]], %b_pack[0, %k, 0] : memref<1x16x16xf32>, vector<8xf32>
// CHECK-NOT:         %b_pack
// CHECK:             vector.fma %{{.*}}, %[[V]], %{{.*}}
// CHECK-NEXT:        vector.fma %{{.*}}, %[[V]], %{{.*}}
// CHECK:         affine.for %i_1 = 2 to 8 step 2 {
// CHECK:           affine.for %k_1 = 0 to 16 iter_args
// CHECK-NEXT:        %[[C:.*]] = affine.apply affine_map<(d0, d1) -> ((d1 + 16))> (%k_1, %j_t)
// CHECK-NEXT:        loom.prefetch %b[%k_1, %[[C]]], read, locality<3>, data : memref<16x64xf32>
// CHECK-NEXT:        affine.vector_load %b_pack[0, %k_1, 0]
// CHECK-NEXT:        affine.vector_load %b_pack[0, %k_1, 0]
// CHECK:       } {loom.tag = "matmul"}

// prefetch=0: the fusion alone.
// NOPF-LABEL: func.func @panel
// NOPF-NOT:   loom.prefetch
// NOPF:       affine.vector_store %{{.*}}, %b_pack[0, %k, 0]
// NOPF-NOT:   loom.prefetch
// NOPF:       } {loom.tag = "matmul"}

// REMARK: fuse-pack.mlir:[[# @LINE + 10]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack fused into the first iteration of %i: it reads %b and stores 1 value into %b_pack per iteration of its innermost loop as it computes; the other iterations read %b_pack and prefetch what the next iteration of %j_t copies (1 prefetch)
func.func @panel(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
  %b_pack = memref.alloc() {alignment = 64 : i64} : memref<1x16x16xf32>
  affine.for %j_t = 0 to 64 step 16 {
    affine.for %k_cp = 0 to 16 {
      affine.for %j_cp = 0 to 16 step 8 {
        %v = affine.vector_load %b[%k_cp, %j_t + %j_cp] : memref<16x64xf32>, vector<8xf32>
        affine.vector_store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x16x16xf32>, vector<8xf32>
      }
    }
    affine.for %i = 0 to 8 step 2 {
      %c0 = affine.vector_load %c[%i, %j_t] : memref<8x64xf32>, vector<8xf32>
      %r = affine.for %k = 0 to 16 iter_args(%x = %c0) -> (vector<8xf32>) {
        %bv = affine.vector_load %b_pack[0, %k, 0] : memref<1x16x16xf32>, vector<8xf32>
        %bw = affine.vector_load %b_pack[0, %k, 0] : memref<1x16x16xf32>, vector<8xf32>
        %a0 = affine.load %a[%i, %k] : memref<8x16xf32>
        %s = vector.broadcast %a0 : f32 to vector<8xf32>
        %y = vector.fma %s, %bv, %x : vector<8xf32>
        %z = vector.fma %s, %bw, %y : vector<8xf32>
        affine.yield %z : vector<8xf32>
      }
      affine.vector_store %r, %c[%i, %j_t] : memref<8x64xf32>, vector<8xf32>
    }
  } {loom.tag = "matmul"}
  memref.dealloc %b_pack : memref<1x16x16xf32>
  func.return
}

// -----

// A single row tile: it is the whole loop, no other iterations to prefetch in.
// CHECK-LABEL: func.func @one_row_tile
// CHECK:       affine.for %i = 0 to 2 step 2 {
// CHECK:         affine.vector_store %{{.*}}, %b_pack[0, %k, 0]
// CHECK-NOT:   loom.prefetch
// CHECK-NOT:   affine.for %i_1
// CHECK:       } {loom.tag = "matmul"}
// REMARK: fuse-pack.mlir:[[# @LINE + 10]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack fused into the first iteration of %i: it reads %b and stores 1 value into %b_pack per iteration of its innermost loop as it computes{{$}}
func.func @one_row_tile(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
  %b_pack = memref.alloc() {alignment = 64 : i64} : memref<1x16x16xf32>
  affine.for %j_t = 0 to 64 step 16 {
    affine.for %k_cp = 0 to 16 {
      affine.for %j_cp = 0 to 16 step 8 {
        %v = affine.vector_load %b[%k_cp, %j_t + %j_cp] : memref<16x64xf32>, vector<8xf32>
        affine.vector_store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x16x16xf32>, vector<8xf32>
      }
    }
    affine.for %i = 0 to 2 step 2 {
      %c0 = affine.vector_load %c[%i, %j_t] : memref<8x64xf32>, vector<8xf32>
      %r = affine.for %k = 0 to 16 iter_args(%x = %c0) -> (vector<8xf32>) {
        %bv = affine.vector_load %b_pack[0, %k, 0] : memref<1x16x16xf32>, vector<8xf32>
        %bw = affine.vector_load %b_pack[0, %k, 0] : memref<1x16x16xf32>, vector<8xf32>
        %a0 = affine.load %a[%i, %k] : memref<8x16xf32>
        %s = vector.broadcast %a0 : f32 to vector<8xf32>
        %y = vector.fma %s, %bv, %x : vector<8xf32>
        %z = vector.fma %s, %bw, %y : vector<8xf32>
        affine.yield %z : vector<8xf32>
      }
      affine.vector_store %r, %c[%i, %j_t] : memref<8x64xf32>, vector<8xf32>
    }
  } {loom.tag = "matmul"}
  memref.dealloc %b_pack : memref<1x16x16xf32>
  func.return
}

// -----

// A scalar reader of a vector copy: each element read is one the copy stored, read from
// %b where the copy read it (an element of its vector); a scalar load and store.
// CHECK-LABEL: func.func @scalar_read
// CHECK:       affine.for %i = 0 to 1 {
// CHECK:         %[[S:.*]] = affine.load %b[%k, %j + %j_t] : memref<16x64xf32>
// CHECK-NEXT:    affine.store %[[S]], %b_pack[0, %k, %j] : memref<1x16x16xf32>
// CHECK:       affine.for %i_1 = 1 to 8 {
// CHECK:         affine.load %b_pack[0, %k_1, %j_1] : memref<1x16x16xf32>
func.func @scalar_read(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
  %z = arith.constant 0.0 : f32
  %b_pack = memref.alloc() {alignment = 64 : i64} : memref<1x16x16xf32>
  affine.for %j_t = 0 to 64 step 16 {
    affine.for %k_cp = 0 to 16 {
      affine.for %j_cp = 0 to 16 step 8 {
        %v = affine.vector_load %b[%k_cp, %j_t + %j_cp] : memref<16x64xf32>, vector<8xf32>
        affine.vector_store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x16x16xf32>, vector<8xf32>
      }
    }
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 16 {
        %r = affine.for %k = 0 to 16 iter_args(%x = %z) -> (f32) {
          %bv = affine.load %b_pack[0, %k, %j] : memref<1x16x16xf32>
          %a1 = affine.load %a[%i, %k] : memref<8x16xf32>
          %p = arith.mulf %a1, %bv : f32
          %y = arith.addf %x, %p : f32
          affine.yield %y : f32
        }
        affine.store %r, %c[%i, %j_t + %j] : memref<8x64xf32>
      }
    }
  } {loom.tag = "matmul"}
  memref.dealloc %b_pack : memref<1x16x16xf32>
  func.return
}

// -----

// A copy into groups of 4 along k (loom-pack{group=4}, a dot-product instruction's layout):
// each vector its reader loads interleaves 4 rows of %b, which no read of %b gives, so the
// copy stays where it is. It prefetches what the copy 2 iterations of %j_t ahead reads
// (GROUPED_AHEAD): each of its 4 rows, 128 bytes of it, 2 cache lines, before the loops
// that walk a row.
// CHECK-LABEL: func.func @groups
// CHECK:         affine.for %k_cp = 0 to 16 step 4 {
// CHECK-NEXT:      %[[J0:.*]] = affine.apply affine_map<(d0, d1) -> ((d1 + 256))> (%k_cp, %j_t)
// CHECK-NEXT:      loom.prefetch %b[%k_cp, %[[J0]]], read, locality<3>, data : memref<16x256xi8>
// CHECK-NEXT:      %[[J1:.*]] = affine.apply affine_map<(d0, d1) -> ((d1 + 320))> (%k_cp, %j_t)
// CHECK-NEXT:      loom.prefetch %b[%k_cp, %[[J1]]], read
// CHECK-NEXT:      %[[K1:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + 1))> (%k_cp, %j_t)
// CHECK-NEXT:      loom.prefetch %b[%[[K1]], %[[J0]]], read
// CHECK-NEXT:      loom.prefetch %b[%[[K1]], %[[J1]]], read
// CHECK-COUNT-4:   loom.prefetch %b[
// CHECK-NOT:       loom.prefetch
// CHECK:           affine.for %j_panel = 0 to 1 {
// CHECK:             affine.store %{{.*}}, %b_pack[%j_panel, %k_cp floordiv 4, %j_cp * 4 + 3]
// CHECK:         affine.for %i = 0 to 8 {
// CHECK-NEXT:      affine.vector_load %b_pack[0, 0, 0]

// NOPF-LABEL: func.func @groups
// NOPF-NOT:   loom.prefetch

// REMARK: fuse-pack.mlir:[[# @LINE + 4]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: it lays %b_pack out in groups (each vector its reader loads interleaves rows of %b); it prefetches what the copy 2 iterations of %j_t ahead reads (8 prefetches)
func.func @groups(%b: memref<16x256xi8>, %c: memref<8x256xi8>) {
  %b_pack = memref.alloc() {alignment = 64 : i64} : memref<1x4x512xi8>
  affine.for %j_t = 0 to 256 step 128 {
    affine.for %k_cp = 0 to 16 step 4 {
      affine.for %j_panel = 0 to 1 {
        affine.for %j_cp = 0 to 128 {
          %0 = affine.load %b[%k_cp, %j_t + %j_panel * 128 + %j_cp] : memref<16x256xi8>
          affine.store %0, %b_pack[%j_panel, %k_cp floordiv 4, %j_cp * 4] : memref<1x4x512xi8>
          %1 = affine.load %b[%k_cp + 1, %j_t + %j_panel * 128 + %j_cp] : memref<16x256xi8>
          affine.store %1, %b_pack[%j_panel, %k_cp floordiv 4, %j_cp * 4 + 1] : memref<1x4x512xi8>
          %2 = affine.load %b[%k_cp + 2, %j_t + %j_panel * 128 + %j_cp] : memref<16x256xi8>
          affine.store %2, %b_pack[%j_panel, %k_cp floordiv 4, %j_cp * 4 + 2] : memref<1x4x512xi8>
          %3 = affine.load %b[%k_cp + 3, %j_t + %j_panel * 128 + %j_cp] : memref<16x256xi8>
          affine.store %3, %b_pack[%j_panel, %k_cp floordiv 4, %j_cp * 4 + 3] : memref<1x4x512xi8>
        }
      }
    }
    affine.for %i = 0 to 8 {
      %v = affine.vector_load %b_pack[0, 0, 0] : memref<1x4x512xi8>, vector<64xi8>
      affine.vector_store %v, %c[%i, %j_t] : memref<8x256xi8>, vector<64xi8>
    }
  } {loom.tag = "matmul"}
  memref.dealloc %b_pack : memref<1x4x512xi8>
  func.return
}

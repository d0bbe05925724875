// RUN: not loom-opt %s -p 'loom-fuse-pack{prefetch=2}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: loom-opt %s -p loom-fuse-pack --split-input-file | filecheck %s
// RUN: loom-opt %s -p loom-fuse-pack --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// OPTION: {{^}}loom-opt: error: loom-fuse-pack: option 'prefetch' is 1 (prefetch the next copy's source) or 0, got 2
// OPTION-NOT: affine.for

// Copies the pass must leave as they are, each with a remark saying why; the IR is unchanged.
// The row tiles read different rows of the buffer: the first does not read all the copy wrote.
// CHECK-LABEL: func.func @varies
// CHECK:         affine.vector_store %v, %b_pack[0, %k_cp, %j_cp]
// CHECK-NOT:     loom.prefetch
// REMARK: refuse.mlir:[[# @LINE + 4]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: the iterations of %i read different elements of it (its subscripts at affine.vector_load depend on %i)
func.func @varies(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
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
        %bv = affine.vector_load %b_pack[0, %i, 0] : memref<1x16x16xf32>, vector<8xf32>
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

// A store between the copy and its reader (it may write %b).
// CHECK-LABEL: func.func @store_between
// CHECK:         affine.vector_store %v, %b_pack[0, %k_cp, %j_cp]
// REMARK: refuse.mlir:[[# @LINE + 4]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: affine.store between the copy and its reader may write memory
func.func @store_between(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
  %b_pack = memref.alloc() {alignment = 64 : i64} : memref<1x16x16xf32>
  affine.for %j_t = 0 to 64 step 16 {
    affine.for %k_cp = 0 to 16 {
      affine.for %j_cp = 0 to 16 step 8 {
        %v = affine.vector_load %b[%k_cp, %j_t + %j_cp] : memref<16x64xf32>, vector<8xf32>
        affine.vector_store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x16x16xf32>, vector<8xf32>
      }
    }
    %zero = arith.constant 0.0 : f32
    affine.store %zero, %a[0, 0] : memref<8x16xf32>
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

// The buffer read again after the reader.
// CHECK-LABEL: func.func @read_after
// CHECK:         affine.vector_store %v, %b_pack[0, %k_cp, %j_cp]
// REMARK: refuse.mlir:[[# @LINE + 4]]:5: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: affine.load uses it outside the copy and its reader %i
func.func @read_after(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
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
    %late = affine.load %b_pack[0, 0, 0] : memref<1x16x16xf32>
    affine.store %late, %c[0, 0] : memref<8x64xf32>
  } {loom.tag = "matmul"}
  memref.dealloc %b_pack : memref<1x16x16xf32>
  func.return
}

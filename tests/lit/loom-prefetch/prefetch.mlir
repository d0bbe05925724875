// RUN: loom-opt %s -p loom-prefetch --split-input-file | filecheck %s
// RUN: not loom-opt %s -p 'loom-prefetch{distance=2 locality=1 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=OPTS
// RUN: loom-opt %s -p loom-prefetch,loom-prefetch --split-input-file | filecheck %s --check-prefix=TWICE
// RUN: loom-opt %s -p loom-prefetch --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A register tile of C loaded before the k loop and stored after it (loom-hoist's
// result): the next %i iteration's rows are prefetched for writing, before the loads.
// CHECK-LABEL: func.func @c_tile
// CHECK:       affine.for %i = 0 to 8 step 2 {
// CHECK-NEXT:    %[[R0:.*]] = affine.apply affine_map<()[s0, s1] -> ((s0 + 2))> ()[%i, %j]
// CHECK-NEXT:    loom.prefetch %c[%[[R0]], %j], write, locality<3>, data : memref<8x16xf32>
// CHECK-NEXT:    %[[R1:.*]] = affine.apply affine_map<()[s0, s1] -> ((s0 + 3))> ()[%i, %j]
// CHECK-NEXT:    loom.prefetch %c[%[[R1]], %j], write, locality<3>, data : memref<8x16xf32>
// CHECK-NEXT:    %{{.*}} = affine.vector_load %c[%i, %j] : memref<8x16xf32>, vector<8xf32>
// CHECK-NEXT:    %{{.*}} = affine.vector_load %c[%i + 1, %j] : memref<8x16xf32>, vector<8xf32>
// CHECK-NEXT:    %{{.*}} = affine.for %k = 0 to 4 iter_args
// CHECK-NOT:       loom.prefetch
// CHECK:         affine.yield
// CHECK-NEXT:    }
// CHECK-NOT:     loom.prefetch
// CHECK:       } {loom.tag = "matmul"}

// distance=2: four rows ahead; locality=1.
// OPTS-LABEL: func.func @c_tile
// OPTS:         %[[R0:.*]] = affine.apply affine_map<()[s0, s1] -> ((s0 + 4))> ()[%i, %j]
// OPTS-NEXT:    loom.prefetch %c[%[[R0]], %j], write, locality<1>, data : memref<8x16xf32>

// Run twice, the second run leaves the loop alone.
// TWICE-LABEL: func.func @c_tile
// TWICE-COUNT-2: loom.prefetch
// TWICE-NOT:     loom.prefetch
// TWICE:       } {loom.tag = "matmul"}

// REMARK: prefetch.mlir:[[# @LINE + 3]]:5: remark: [loom-prefetch] loop %i: 2 prefetches one iteration (2 in %i) ahead of the loads before its inner loop (2 for writing, locality 3), e.g. of %c[%i, %j]
func.func @c_tile(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>) {
  affine.for %j = 0 to 16 step 8 {
    affine.for %i = 0 to 8 step 2 {
      %c0 = affine.vector_load %c[%i, %j] : memref<8x16xf32>, vector<8xf32>
      %c1 = affine.vector_load %c[%i + 1, %j] : memref<8x16xf32>, vector<8xf32>
      %r0, %r1 = affine.for %k = 0 to 4 iter_args(%x0 = %c0, %x1 = %c1) -> (vector<8xf32>, vector<8xf32>) {
        %bv = affine.vector_load %b[%k, %j] : memref<4x16xf32>, vector<8xf32>
        %a0 = affine.load %a[%i, %k] : memref<8x4xf32>
        %a1 = affine.load %a[%i + 1, %k] : memref<8x4xf32>
        %s0 = vector.broadcast %a0 : f32 to vector<8xf32>
        %s1 = vector.broadcast %a1 : f32 to vector<8xf32>
        %y0 = vector.fma %s0, %bv, %x0 : vector<8xf32>
        %y1 = vector.fma %s1, %bv, %x1 : vector<8xf32>
        affine.yield %y0, %y1 : vector<8xf32>, vector<8xf32>
      }
      affine.vector_store %r0, %c[%i, %j] : memref<8x16xf32>, vector<8xf32>
      affine.vector_store %r1, %c[%i + 1, %j] : memref<8x16xf32>, vector<8xf32>
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A load that is only read before an inner loop gets a read prefetch; the same address
// loaded twice, one prefetch. Loads that do not move with the loop (%s[%k]) and loads
// after the inner loop are left alone, and so is the innermost loop's stream.
// CHECK-LABEL: func.func @rows
// CHECK:       affine.for %i = 0 to 4 {
// CHECK-NEXT:    %[[N:.*]] = affine.apply affine_map<()[s0, s1] -> ((s0 + 1))> ()[%i, %k]
// CHECK-NEXT:    loom.prefetch %a[%[[N]], %k], read, locality<3>, data : memref<4x8xf32>
// CHECK-NEXT:    %{{.*}} = affine.load %a[%i, %k] : memref<4x8xf32>
// CHECK-NEXT:    %{{.*}} = affine.load %a[%i, %k] : memref<4x8xf32>
// CHECK-NEXT:    %{{.*}} = affine.load %s[%k] : memref<8xf32>
// CHECK-NEXT:    affine.for %j = 0 to 16 {
// CHECK-NOT:       loom.prefetch
// CHECK:         }
// CHECK-NEXT:    %{{.*}} = affine.load %a[%i, %k] : memref<4x8xf32>
// CHECK-NEXT:  }
// No nest tagged 'matmul' here: op=matmul is an error.
// OPTS: prefetch.mlir:[[# @LINE + 2]]:3: error: loom-prefetch: option 'op' is 'matmul', but no loop nest is tagged so; the tags present: 'rows'
func.func @rows(%a: memref<4x8xf32>, %s: memref<8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 4 {
      %x = affine.load %a[%i, %k] : memref<4x8xf32>
      %x2 = affine.load %a[%i, %k] : memref<4x8xf32>
      %y = affine.load %s[%k] : memref<8xf32>
      affine.for %j = 0 to 16 {
        %bv = affine.load %b[%k, %j] : memref<8x16xf32>
        %cv = affine.load %c[%i, %j] : memref<4x16xf32>
        %p = arith.mulf %x, %bv : f32
        %q = arith.mulf %p, %y : f32
        %r = arith.addf %cv, %q : f32
        affine.store %r, %c[%i, %j] : memref<4x16xf32>
      }
      %z = affine.load %a[%i, %k] : memref<4x8xf32>
    }
  } {loom.tag = "rows"}
  func.return
}

// -----

// A loop of one iteration has no next iteration to prefetch for: skipped, with a remark.
// CHECK-LABEL: func.func @single
// CHECK-NOT:   loom.prefetch
// CHECK:       func.return
// REMARK: prefetch.mlir:[[# @LINE + 3]]:5: remark: [loom-prefetch] loop %i skipped: a single iteration, no next one to prefetch for
func.func @single(%a: memref<4x8xf32>, %c: memref<4xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 1 {
      %x = affine.load %a[%i, %k] : memref<4x8xf32>
      affine.for %j = 0 to 4 {
        affine.store %x, %c[%j] : memref<4xf32>
      }
    }
  }
  func.return
}

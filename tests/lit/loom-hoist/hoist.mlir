// RUN: loom-opt %s -p loom-hoist --split-input-file | filecheck %s
// RUN: not loom-opt %s -p 'loom-hoist{op=other}' --split-input-file 2>&1 | filecheck %s --check-prefix=OP
// RUN: loom-opt %s -p loom-hoist --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Matmul in order i, j, k: C[i, j] is read and written at one address in the k loop.
// It is loaded once before the loop, carried as an iter_arg, stored once after.
// CHECK-LABEL: func.func @matmul_ijk
// CHECK:      affine.for %j = 0 to 6 {
// CHECK-NEXT:   %[[C0:.*]] = affine.load %c[%i, %j] : memref<4x6xf32>
// CHECK-NEXT:   %[[R:.*]] = affine.for %k = 0 to 5 iter_args(%[[ACC:.*]] = %[[C0]]) -> (f32) {
// CHECK-NEXT:     %[[A:.*]] = affine.load %a[%i, %k] : memref<4x5xf32>
// CHECK-NEXT:     %[[B:.*]] = affine.load %b[%k, %j] : memref<5x6xf32>
// CHECK-NEXT:     %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:     affine.yield %[[S]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.store %[[R]], %c[%i, %j] : memref<4x6xf32>
// CHECK-NEXT: }

// op=other where no nest is tagged 'other': an error that names the tags there are, and
// the chunk is not printed (the chunks below that have an 'other' nest are).
// OP: hoist.mlir:[[# @LINE + 6]]:3: error: loom-hoist: option 'op' is 'other', but no loop nest is tagged so; the tags present: 'matmul'
// OP-NOT: func.func @matmul_ijk

// REMARK: hoist.mlir:[[# @LINE + 5]]:7: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[%i, %j]
// REMARK-NOT: not promoted
func.func @matmul_ijk(%a: memref<4x5xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 6 {
      affine.for %k = 0 to 5 {
        %x = affine.load %a[%i, %k] : memref<4x5xf32>
        %y = affine.load %b[%k, %j] : memref<5x6xf32>
        %z = affine.load %c[%i, %j] : memref<4x6xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Order i, k, j: A[i, k] does not change in the j loop and A is not stored: it is
// loaded once per k. C[i, j] moves with j: it stays.
// CHECK-LABEL: func.func @matmul_ikj
// CHECK:      affine.for %k = 0 to 5 {
// CHECK-NEXT:   %[[A:.*]] = affine.load %a[%i, %k] : memref<4x5xf32>
// CHECK-NEXT:   affine.for %j = 0 to 6 {
// CHECK-NEXT:     %[[B:.*]] = affine.load %b[%k, %j] : memref<5x6xf32>
// CHECK-NEXT:     %[[C:.*]] = affine.load %c[%i, %j] : memref<4x6xf32>
// CHECK-NEXT:     %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:     affine.store %[[S]], %c[%i, %j] : memref<4x6xf32>

// REMARK: hoist.mlir:[[# @LINE + 5]]:7: remark: [loom-hoist] hoisted out of loop %j: load %a[%i, %k]
// REMARK-NOT: not promoted
func.func @matmul_ikj(%a: memref<4x5xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 5 {
      affine.for %j = 0 to 6 {
        %x = affine.load %a[%i, %k] : memref<4x5xf32>
        %y = affine.load %b[%k, %j] : memref<5x6xf32>
        %z = affine.load %c[%i, %j] : memref<4x6xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A 2 x 2 block of C after unroll-and-jam: four distinct elements, four registers,
// four stores after the k loop. The index computations move out of the k loop.
// CHECK-LABEL: func.func @block
// CHECK:      affine.for %i = 0 to 4 step 2 {
// CHECK-NEXT:   %i1 = affine.apply affine_map<(d0) -> ((d0 + 1))> (%i)
// CHECK-NEXT:   affine.for %j = 0 to 6 step 2 {
// CHECK-NEXT:     %[[C00:.*]] = affine.load %c[%i, %j] : memref<4x6xf32>
// CHECK-NEXT:     %[[C01:.*]] = affine.load %c[%i, %j + 1] : memref<4x6xf32>
// CHECK-NEXT:     %[[C10:.*]] = affine.load %c[%i1, %j] : memref<4x6xf32>
// CHECK-NEXT:     %[[C11:.*]] = affine.load %c[%i1, %j + 1] : memref<4x6xf32>
// CHECK-NEXT:     %[[R0:.*]], %[[R1:.*]], %[[R2:.*]], %[[R3:.*]] = affine.for %k = 0 to 5 iter_args(%[[A00:.*]] = %[[C00]], %[[A01:.*]] = %[[C01]], %[[A10:.*]] = %[[C10]], %[[A11:.*]] = %[[C11]]) -> (f32, f32, f32, f32) {
// CHECK-NOT:        affine.store
// CHECK:            %[[S00:.*]] = arith.addf %[[A00]], %{{.*}} : f32
// CHECK:            %[[S01:.*]] = arith.addf %[[A01]], %{{.*}} : f32
// CHECK:            %[[S10:.*]] = arith.addf %[[A10]], %{{.*}} : f32
// CHECK:            %[[S11:.*]] = arith.addf %[[A11]], %{{.*}} : f32
// CHECK-NEXT:       affine.yield %[[S00]], %[[S01]], %[[S10]], %[[S11]] : f32, f32, f32, f32
// CHECK-NEXT:     }
// CHECK-NEXT:     affine.store %[[R0]], %c[%i, %j] : memref<4x6xf32>
// CHECK-NEXT:     affine.store %[[R1]], %c[%i, %j + 1] : memref<4x6xf32>
// CHECK-NEXT:     affine.store %[[R2]], %c[%i1, %j] : memref<4x6xf32>
// CHECK-NEXT:     affine.store %[[R3]], %c[%i1, %j + 1] : memref<4x6xf32>
// CHECK-NEXT:   }

// REMARK: hoist.mlir:[[# @LINE + 6]]:7: remark: [loom-hoist] hoisted out of loop %k: affine.apply
// REMARK: hoist.mlir:[[# @LINE + 5]]:7: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[%i, %j], %c[%i, %j + 1], %c[%i1, %j], %c[%i1, %j + 1]
// REMARK: hoist.mlir:[[# @LINE + 3]]:5: remark: [loom-hoist] hoisted out of loop %j: affine.apply
func.func @block(%a: memref<4x5xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  affine.for %i = 0 to 4 step 2 {
    affine.for %j = 0 to 6 step 2 {
      affine.for %k = 0 to 5 {
        %i1 = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)
        %a0 = affine.load %a[%i, %k] : memref<4x5xf32>
        %a1 = affine.load %a[%i1, %k] : memref<4x5xf32>
        %b0 = affine.load %b[%k, %j] : memref<5x6xf32>
        %b1 = affine.load %b[%k, %j + 1] : memref<5x6xf32>
        %c00 = affine.load %c[%i, %j] : memref<4x6xf32>
        %p00 = arith.mulf %a0, %b0 : f32
        %s00 = arith.addf %c00, %p00 : f32
        affine.store %s00, %c[%i, %j] : memref<4x6xf32>
        %c01 = affine.load %c[%i, %j + 1] : memref<4x6xf32>
        %p01 = arith.mulf %a0, %b1 : f32
        %s01 = arith.addf %c01, %p01 : f32
        affine.store %s01, %c[%i, %j + 1] : memref<4x6xf32>
        %c10 = affine.load %c[%i1, %j] : memref<4x6xf32>
        %p10 = arith.mulf %a1, %b0 : f32
        %s10 = arith.addf %c10, %p10 : f32
        affine.store %s10, %c[%i1, %j] : memref<4x6xf32>
        %c11 = affine.load %c[%i1, %j + 1] : memref<4x6xf32>
        %p11 = arith.mulf %a1, %b1 : f32
        %s11 = arith.addf %c11, %p11 : f32
        affine.store %s11, %c[%i1, %j + 1] : memref<4x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Conv2d with padding: the accumulation sits under the affine.if guard. The carried
// value goes through the if (its else branch yields it unchanged), across s, r and c.
// CHECK-LABEL: func.func @conv
// CHECK:      affine.for %ow = 0 to 4 {
// CHECK-NEXT:   %[[Y0:.*]] = affine.load %y[%n, %f, %oh, %ow] : memref<1x2x4x4xf32>
// CHECK-NEXT:   %[[RC:.*]] = affine.for %c = 0 to 2 iter_args(%[[AC:.*]] = %[[Y0]]) -> (f32) {
// CHECK-NEXT:     %[[RR:.*]] = affine.for %r = 0 to 3 iter_args(%[[AR:.*]] = %[[AC]]) -> (f32) {
// CHECK-NEXT:       %[[RS:.*]] = affine.for %s = 0 to 3 iter_args(%[[AS:.*]] = %[[AR]]) -> (f32) {
// CHECK-NEXT:         %[[IF:.*]] = "affine.if"(%n, %f, %oh, %ow, %c, %r, %s)
// CHECK-NEXT:           %[[X:.*]] = affine.load %x
// CHECK-NEXT:           %[[W:.*]] = affine.load %w
// CHECK-NEXT:           %[[P:.*]] = arith.mulf %[[X]], %[[W]] : f32
// CHECK-NEXT:           %[[S:.*]] = arith.addf %[[AS]], %[[P]] : f32
// CHECK-NEXT:           affine.yield %[[S]] : f32
// CHECK-NEXT:         }, {
// CHECK-NEXT:           affine.yield %[[AS]] : f32
// CHECK-NEXT:         }) : (index, index, index, index, index, index, index) -> f32
// CHECK-NEXT:         affine.yield %[[IF]] : f32
// CHECK-NEXT:       }
// CHECK-NEXT:       affine.yield %[[RS]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     affine.yield %[[RR]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.store %[[RC]], %y[%n, %f, %oh, %ow] : memref<1x2x4x4xf32>

// REMARK-COUNT-3: remark: [loom-hoist] kept in registers across loop %{{[crs]}} (loaded before, stored after): %y[%n, %f, %oh, %ow]
func.func @conv(%x: memref<1x2x4x4xf32>, %w: memref<2x2x3x3xf32>, %y: memref<1x2x4x4xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 2 {
      affine.for %oh = 0 to 4 {
        affine.for %ow = 0 to 4 {
          affine.for %c = 0 to 2 {
            affine.for %r = 0 to 3 {
              affine.for %s = 0 to 3 {
                "affine.if"(%n, %f, %oh, %ow, %c, %r, %s) <{condition = affine_set<(d0, d1, d2, d3, d4, d5, d6) : (d2 + d5 - 1 >= 0, -d2 - d5 + 4 >= 0, d3 + d6 - 1 >= 0, -d3 - d6 + 4 >= 0)>}> ({
                  %xv = affine.load %x[%n, %c, %oh + %r - 1, %ow + %s - 1] : memref<1x2x4x4xf32>
                  %wv = affine.load %w[%f, %c, %r, %s] : memref<2x2x3x3xf32>
                  %yv = affine.load %y[%n, %f, %oh, %ow] : memref<1x2x4x4xf32>
                  %p = arith.mulf %xv, %wv : f32
                  %acc = arith.addf %yv, %p : f32
                  affine.store %acc, %y[%n, %f, %oh, %ow] : memref<1x2x4x4xf32>
                  "affine.yield"() : () -> ()
                }, {
                }) : (index, index, index, index, index, index, index) -> ()
              }
            }
          }
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// -----

// A load from a memref the loop stores to stays in the loop, and is not promoted: the
// store is at an address that changes with the loop.
// CHECK-LABEL: func.func @aliasing
// CHECK:      affine.for %j = 0 to 8 {
// CHECK-NEXT:   %[[V:.*]] = affine.load %m[%i] : memref<8xf32>
// CHECK-NEXT:   affine.store %[[V]], %m[%j] : memref<8xf32>

// REMARK: hoist.mlir:[[# @LINE + 4]]:7: remark: [loom-hoist] %m[%i] not promoted to a register in loop %j: %m[%j] is also accessed, at an address that changes in the loop (%j)
func.func @aliasing(%m: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %m[%i] : memref<8xf32>
      affine.store %v, %m[%j] : memref<8xf32>
    }
  } {loom.tag = "copy"}
  func.return
}

// -----

// An element stored at one address and read at another that may be the same (i vs
// j + 1 is not known): neither is promoted. A pure op of the iv stays; one of values
// defined outside moves out of both loops.
// CHECK-LABEL: func.func @maybe_same
// CHECK:      %[[T:.*]] = arith.mulf %u, %u : f32
// CHECK-NEXT: affine.for %i = 0 to 8 {
// CHECK-NEXT:   affine.for %k = 0 to 8 {
// CHECK-NEXT:     %[[K:.*]] = arith.index_cast %k : index to i64
// CHECK-NEXT:     %[[V:.*]] = affine.load %m[%i] : memref<9xf32>
// CHECK-NEXT:     affine.store %[[T]], %m[%j + 1] : memref<9xf32>

// REMARK: hoist.mlir:[[# @LINE + 6]]:5: remark: [loom-hoist] hoisted out of loop %k: arith.mulf
// REMARK: hoist.mlir:[[# @LINE + 8]]:7: remark: [loom-hoist] %m[%i] not promoted to a register in loop %k: %m[%i] and %m[%j + 1] may be the same element
// REMARK: hoist.mlir:[[# @LINE + 3]]:3: remark: [loom-hoist] hoisted out of loop %i: arith.mulf
// REMARK: hoist.mlir:[[# @LINE + 7]]:7: remark: [loom-hoist] %m[%j + 1] not promoted to a register in loop %i: it is accessed inside the inner loop %k
func.func @maybe_same(%m: memref<9xf32>, %j: index, %u: f32) {
  affine.for %i = 0 to 8 {
    affine.for %k = 0 to 8 {
      %t = arith.mulf %u, %u : f32
      %kk = arith.index_cast %k : index to i64
      %v = affine.load %m[%i] : memref<9xf32>
      affine.store %t, %m[%j + 1] : memref<9xf32>
    }
  } {loom.tag = "other"}
  func.return
}

// The nest of this function is not selected by op=other: left as it is.
// CHECK-LABEL: func.func @not_selected
// CHECK:      arith.mulf %u, %u : f32
// CHECK-NEXT: affine.for %k = 0 to 8 {
func.func @not_selected(%m: memref<9xf32>, %u: f32) {
  affine.for %k = 0 to 8 {
    %t = arith.mulf %u, %u : f32
    affine.store %t, %m[%k] : memref<9xf32>
  } {loom.tag = "copy"}
  func.return
}

// Tagged 'other', unlike the nests above: selected by op=other; the 'copy' nest beside
// it is not.
// OP-LABEL: func.func @maybe_same
// OP:      arith.mulf %u, %u : f32
// OP-NEXT: affine.for %i = 0 to 8 {
// OP-LABEL: func.func @not_selected
// OP-NEXT:  affine.for %k = 0 to 8 {
// OP-NEXT:    arith.mulf %u, %u : f32

// -----

// A memref of unknown size: the element cannot be proven in bounds, so it is not read
// before a loop that may not run (here %n may be 0).
// CHECK-LABEL: func.func @dynamic
// CHECK:      affine.for %k = 0 to %n {
// CHECK-NEXT:   affine.load %a[%k]
// CHECK-NEXT:   affine.load %c[0]

// REMARK: hoist.mlir:[[# @LINE + 4]]:5: remark: [loom-hoist] %c[0] not promoted to a register in loop %k: %c[0] is not provably in bounds (the loop may not run)
func.func @dynamic(%a: memref<?xf32>, %c: memref<?xf32>, %n: index) {
  affine.for %k = 0 to %n {
    %x = affine.load %a[%k] : memref<?xf32>
    %z = affine.load %c[0] : memref<?xf32>
    %s = arith.addf %z, %x : f32
    affine.store %s, %c[0] : memref<?xf32>
  } {loom.tag = "sum"}
  func.return
}

// -----

// An affine.min of outer values moves out, and so does the load it indexes (provably
// in bounds: 0 <= min(i + 4, 7) <= 7); with an op of unknown memory effects in the loop
// (it could write %a), the load stays.
// CHECK-LABEL: func.func @min_index
// CHECK:      affine.for %i = 0 to 8 {
// CHECK-NEXT:   %b = affine.min affine_map<(d0) -> ((d0 + 4), 7)> (%i)
// CHECK-NEXT:   %v = affine.load %a[%b] : memref<8xf32>
// CHECK-NEXT:   affine.for %k = 0 to 4 {
// CHECK-NEXT:     affine.store %v, %m[%k] : memref<8xf32>
// CHECK-LABEL: func.func @unknown_effects
// CHECK:      affine.for %i = 0 to 8 {
// CHECK-NEXT:   %b = affine.min affine_map<(d0) -> ((d0 + 4), 7)> (%i)
// CHECK-NEXT:   affine.for %k = 0 to 4 {
// CHECK-NEXT:     %v = affine.load %a[%b] : memref<8xf32>
// CHECK-NEXT:     "test.op"() : () -> ()

// REMARK: hoist.mlir:[[# @LINE + 3]]:5: remark: [loom-hoist] hoisted out of loop %k: affine.min, load %a[%b]
func.func @min_index(%a: memref<8xf32>, %m: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %k = 0 to 4 {
      %b = affine.min affine_map<(d0) -> (d0 + 4, 7)>(%i)
      %v = affine.load %a[%b] : memref<8xf32>
      affine.store %v, %m[%k] : memref<8xf32>
    }
  } {loom.tag = "t"}
  func.return
}

// REMARK: hoist.mlir:[[# @LINE + 5]]:7: remark: [loom-hoist] %a[%b] not hoisted out of loop %k: an op with unknown memory effects is in the loop
func.func @unknown_effects(%a: memref<8xf32>, %m: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %k = 0 to 4 {
      %b = affine.min affine_map<(d0) -> (d0 + 4, 7)>(%i)
      %v = affine.load %a[%b] : memref<8xf32>
      "test.op"() : () -> ()
      affine.store %v, %m[%k] : memref<8xf32>
    }
  } {loom.tag = "t"}
  func.return
}

// -----

// Sizes unknown, but the point loop of a tile runs at least once (%k_t < %n, so both
// %k_t + 4 and %n exceed %k_t): %c[0], read and written in every iteration, is
// promoted across %k. Not across %k_t, which may not run.
// CHECK-LABEL: func.func @point_loop
// CHECK:      affine.for %k_t = 0 to %n step 4 {
// CHECK-NEXT:   %[[C0:.*]] = affine.load %c[0] : memref<?xf32>
// CHECK-NEXT:   %[[R:.*]] = affine.for %k = {{.*}} iter_args(%{{.*}} = %[[C0]]) -> (f32) {
// CHECK:        affine.store %[[R]], %c[0] : memref<?xf32>

// REMARK: hoist.mlir:[[# @LINE + 4]]:5: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[0]
// REMARK: hoist.mlir:[[# @LINE + 5]]:7: remark: [loom-hoist] %c[0] not promoted to a register in loop %k_t: %c[0] is not provably in bounds (the loop may not run)
func.func @point_loop(%a: memref<?xf32>, %c: memref<?xf32>, %n: index) {
  affine.for %k_t = 0 to %n step 4 {
    affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0)[s0] -> (d0 + 4, s0)>(%k_t)[%n] {
      %x = affine.load %a[%k] : memref<?xf32>
      %z = affine.load %c[0] : memref<?xf32>
      %s = arith.addf %z, %x : f32
      affine.store %s, %c[0] : memref<?xf32>
    }
  } {loom.tag = "sum"}
  func.return
}

// -----

// Vector accumulators: the affine.vector_load/vector_store pairs of %c at the two
// k-invariant addresses [%i, %j] and [%i, %j + 8] (8 wide, so they do not overlap)
// become vector iter_args of %k, loaded before and stored after the loop.
// CHECK-LABEL: func.func @vector_acc
// CHECK:      %[[C0:.*]] = affine.vector_load %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
// CHECK-NEXT: %[[C1:.*]] = affine.vector_load %c[%i, %j + 8] : memref<8x32xf32>, vector<8xf32>
// CHECK-NEXT: %[[R0:.*]], %[[R1:.*]] = affine.for %k = 0 to 64 iter_args(%[[A0:.*]] = %[[C0]], %[[A1:.*]] = %[[C1]]) -> (vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:   %x = affine.load %a[%i, %k] : memref<8x64xf32>
// CHECK-NEXT:   %xb = vector.broadcast %x : f32 to vector<8xf32>
// CHECK-NEXT:   %b0 = affine.vector_load %b[%k, %j] : memref<64x32xf32>, vector<8xf32>
// CHECK-NEXT:   %s0 = vector.fma %xb, %b0, %[[A0]] : vector<8xf32>
// CHECK-NEXT:   %b1 = affine.vector_load %b[%k, %j + 8] : memref<64x32xf32>, vector<8xf32>
// CHECK-NEXT:   %s1 = vector.fma %xb, %b1, %[[A1]] : vector<8xf32>
// CHECK-NEXT:   affine.yield %s0, %s1 : vector<8xf32>, vector<8xf32>
// CHECK-NEXT: } {loom.tag = "vector_acc"}
// CHECK-NEXT: affine.vector_store %[[R0]], %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
// CHECK-NEXT: affine.vector_store %[[R1]], %c[%i, %j + 8] : memref<8x32xf32>, vector<8xf32>

// REMARK: hoist.mlir:[[# @LINE + 2]]:3: remark: [loom-hoist] kept in registers across loop %k (loaded before, stored after): %c[%i, %j], %c[%i, %j + 8]
func.func @vector_acc(%a: memref<8x64xf32>, %b: memref<64x32xf32>, %c: memref<8x32xf32>, %i: index, %j: index) {
  affine.for %k = 0 to 64 {
    %x = affine.load %a[%i, %k] : memref<8x64xf32>
    %xb = vector.broadcast %x : f32 to vector<8xf32>
    %b0 = affine.vector_load %b[%k, %j] : memref<64x32xf32>, vector<8xf32>
    %c0 = affine.vector_load %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
    %s0 = vector.fma %xb, %b0, %c0 : vector<8xf32>
    affine.vector_store %s0, %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
    %b1 = affine.vector_load %b[%k, %j + 8] : memref<64x32xf32>, vector<8xf32>
    %c1 = affine.vector_load %c[%i, %j + 8] : memref<8x32xf32>, vector<8xf32>
    %s1 = vector.fma %xb, %b1, %c1 : vector<8xf32>
    affine.vector_store %s1, %c[%i, %j + 8] : memref<8x32xf32>, vector<8xf32>
  } {loom.tag = "vector_acc"}
  func.return
}

// -----

// A vector access covers [%j, %j + 8): [%i, %j + 4] overlaps [%i, %j], so neither is promoted.
// CHECK-LABEL: func.func @vector_overlap
// CHECK:      affine.for %k = 0 to 64 {
// CHECK-NEXT:   %b0 = affine.vector_load %b[%k, %j]
// CHECK-NEXT:   %c0 = affine.vector_load %c[%i, %j]

// REMARK: hoist.mlir:[[# @LINE + 4]]:5: remark: [loom-hoist] %c[%i, %j] not promoted to a register in loop %k: %c[%i, %j] and %c[%i, %j + 4] may be the same element
func.func @vector_overlap(%b: memref<64x32xf32>, %c: memref<8x32xf32>, %i: index, %j: index) {
  affine.for %k = 0 to 64 {
    %b0 = affine.vector_load %b[%k, %j] : memref<64x32xf32>, vector<8xf32>
    %c0 = affine.vector_load %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
    %s0 = arith.addf %b0, %c0 : vector<8xf32>
    affine.vector_store %s0, %c[%i, %j] : memref<8x32xf32>, vector<8xf32>
    %c1 = affine.vector_load %c[%i, %j + 4] : memref<8x32xf32>, vector<8xf32>
    %s1 = arith.addf %b0, %c1 : vector<8xf32>
    affine.vector_store %s1, %c[%i, %j + 4] : memref<8x32xf32>, vector<8xf32>
  } {loom.tag = "vector_overlap"}
  func.return
}

// -----

// The store goes through the buffer itself, the load through a view of it: %v[1, 0] is
// %a[3, 0], which the store rewrites when %i = 3. The load is not hoisted (the stored
// buffer is the view's root), nor promoted (two views of one buffer).
// CHECK-LABEL: func.func @store_base_load_view
// CHECK:      affine.for %i = 0 to 8 {
// CHECK-NEXT:   %{{.*}} = affine.load %v[1, 0]
// CHECK-NEXT:   %{{.*}} = arith.addf
// CHECK-NEXT:   affine.store %{{.*}}, %a[%i, 0]

// REMARK-NOT: hoisted out of loop %i: load %v[1, 0]
// REMARK: hoist.mlir:[[# @LINE + 4]]:5: remark: [loom-hoist] %v[1, 0] not promoted to a register in loop %i: %a[%i, 0] is also accessed, at an address that changes in the loop (%i)
func.func @store_base_load_view(%a: memref<8x4xf32>, %x: f32) {
  %v = memref.subview %a[2, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: 8>>
  affine.for %i = 0 to 8 {
    %l = affine.load %v[1, 0] : memref<4x4xf32, strided<[4, 1], offset: 8>>
    %s = arith.addf %l, %x : f32
    affine.store %s, %a[%i, 0] : memref<8x4xf32>
  } {loom.tag = "view"}
  func.return
}

// -----

// The store goes through %m, %a or %b chosen at run time (arith.select): a buffer of
// unknown origin, which may be %b. The load of %b[0] stays in the loop: iteration 0 may
// rewrite it. (memref_root took the select's first memref operand, %a, for its buffer:
// the load was hoisted.)
// CHECK-LABEL: func.func @store_through_select
// CHECK:      affine.for %i = 0 to 8 {
// CHECK-NEXT:   %{{.*}} = affine.load %b[0]
// CHECK-NEXT:   %{{.*}} = arith.addf
// CHECK-NEXT:   affine.store %{{.*}}, %m[%i]

// REMARK: hoist.mlir:[[# @LINE + 5]]:5: remark: [loom-hoist] %b[0] not hoisted out of loop %i: 'affine.store' in the loop writes %m, the result of 'arith.select', which may be any buffer
func.func @store_through_select(%a: memref<8xf32>, %b: memref<8xf32>, %c: i1) {
  %one = arith.constant 1.0 : f32
  %m = arith.select %c, %a, %b : memref<8xf32>
  affine.for %i = 0 to 8 {
    %x = affine.load %b[0] : memref<8xf32>
    %y = arith.addf %x, %one : f32
    affine.store %y, %m[%i] : memref<8xf32>
  } {loom.tag = "t"}
  func.return
}

// -----

// The same through an scf.if's result (memref_root stopped at it: a buffer of its own).
// CHECK-LABEL: func.func @store_through_if
// CHECK:      affine.for %i = 0 to 8 {
// CHECK-NEXT:   %{{.*}} = affine.load %b[0]

// REMARK: hoist.mlir:[[# @LINE + 9]]:5: remark: [loom-hoist] %b[0] not hoisted out of loop %i: 'affine.store' in the loop writes %m, the result of 'scf.if', which may be any buffer
func.func @store_through_if(%a: memref<8xf32>, %b: memref<8xf32>, %c: i1) {
  %one = arith.constant 1.0 : f32
  %m = scf.if %c -> (memref<8xf32>) {
    scf.yield %a : memref<8xf32>
  } else {
    scf.yield %b : memref<8xf32>
  }
  affine.for %i = 0 to 8 {
    %x = affine.load %b[0] : memref<8xf32>
    %y = arith.addf %x, %one : f32
    affine.store %y, %m[%i] : memref<8xf32>
  } {loom.tag = "t"}
  func.return
}

// -----

// A read-modify-write through a buffer of unknown origin is not promoted either: %m may
// be %a, which the loop also reads.
// CHECK-LABEL: func.func @accumulate_through_select
// CHECK:      affine.for %k = 0 to 8 {
// CHECK-NEXT:   %{{.*}} = affine.load %a[%k]
// CHECK-NEXT:   %{{.*}} = affine.load %m[0]

// REMARK: hoist.mlir:[[# @LINE + 5]]:5: remark: [loom-hoist] %m[0] not promoted to a register in loop %k: 'affine.store' in the loop writes %m, the result of 'arith.select', which may be any buffer
func.func @accumulate_through_select(%a: memref<8xf32>, %b: memref<8xf32>, %c: i1) {
  %m = arith.select %c, %a, %b : memref<8xf32>
  affine.for %k = 0 to 8 {
    %x = affine.load %a[%k] : memref<8xf32>
    %z = affine.load %m[0] : memref<8xf32>
    %s = arith.addf %z, %x : f32
    affine.store %s, %m[0] : memref<8xf32>
  } {loom.tag = "sum"}
  func.return
}

// -----

// Strides (1, 1) on 2 x 2: %c[0, 1] and %c[1, 0] are one element, which each iteration
// adds to twice. Kept in two registers, each would add once and the last store win.
// CHECK-LABEL: func.func @overlapping_accumulators
// CHECK:      affine.for %k = 0 to 8 {
// CHECK-NEXT:   %{{.*}} = affine.load %x[%k]
// CHECK-NEXT:   %{{.*}} = affine.load %c[0, 1]

// REMARK: hoist.mlir:[[# @LINE + 4]]:5: remark: [loom-hoist] %c[0, 1] not promoted to a register in loop %k: its layout strided<[1, 1]> reaches some elements from several indices
func.func @overlapping_accumulators(%c: memref<2x2xf32, strided<[1, 1]>>, %x: memref<8xf32>) {
  affine.for %k = 0 to 8 {
    %v = affine.load %x[%k] : memref<8xf32>
    %p = affine.load %c[0, 1] : memref<2x2xf32, strided<[1, 1]>>
    %s = arith.addf %p, %v : f32
    affine.store %s, %c[0, 1] : memref<2x2xf32, strided<[1, 1]>>
    %q = affine.load %c[1, 0] : memref<2x2xf32, strided<[1, 1]>>
    %t = arith.addf %q, %v : f32
    affine.store %t, %c[1, 0] : memref<2x2xf32, strided<[1, 1]>>
  } {loom.tag = "acc"}
  func.return
}

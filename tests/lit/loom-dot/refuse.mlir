// RUN: not loom-opt %s -p 'loom-dot{width=5}' 2>&1 | filecheck %s --check-prefix=WIDTH
// RUN: env LOOM_TARGET="cpu=avx2,vector_bits=256,vector_registers=16,fma=1,bf16_dot=0,int8_dot=0" not loom-opt %s -p 'loom-dot{op=matmul}' --split-input-file 2>&1 | filecheck %s
// RUN: env LOOM_TARGET="cpu=avx2,vector_bits=256,vector_registers=16,fma=1,bf16_dot=0,int8_dot=0" loom-opt %s -p 'loom-dot' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=SKIP

// What loom-dot refuses with op= (a LoomError at the nest, nothing changed), and leaves
// as it is with a remark without op=.
// WIDTH: error: loom-dot: option 'width' is the accumulator's lanes, 4, 8 or 16 (128, 256 or 512 bits), got 5

// A textbook matmul: its reads are widened, but not in groups.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-dot: nest 'matmul' not rewritten: the read of %a is not in groups (no `e floordiv G, r + e mod G` subscripts)
// SKIP: remark: [loom-dot] nest 'matmul' not rewritten: the read of %a is not in groups
func.func @not_grouped(%a: memref<8x8xi16>, %b: memref<8x8xi16>, %c: memref<8x8xi32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xi16>
        %y = affine.load %b[%k, %j] : memref<8x8xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// k runs 7 iterations: its last group would be half outside the loop, and its buffers are
// not known to hold zeros there (loom-pack's `loom.zero_padded_groups`).
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: loop %k does not run in whole groups of 2, nor to a known place in a group of buffers padded with zeros to whole groups
func.func @partial_group(%ap: memref<4x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 7 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// j runs 6 iterations: not a whole vector of 8 accumulators.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: loop %j does not run a constant multiple of 8 iterations
func.func @short_row(%ap: memref<4x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x6xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 6 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x6xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x6xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// C written along its rows' stride (C[j, i]): its 8 elements are not a vector.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: C is not read along loop %j with unit stride
func.func @c_transposed(%ap: memref<4x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%j, %i] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%j, %i] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// i16 read unsigned (extui): vpmaddwd multiplies signed i16.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: vpmaddwd reads signed i16, not as these reads widen them
func.func @unsigned_i16(%ap: memref<4x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extui %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The groups of A move with j too (A' read at j): not one group per row to broadcast.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: both of its operands are read along loop %j
func.func @both_along_j(%ap: memref<4x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The floordiv and the mod are of different expressions (k and k + 1).
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: the read of %ap is not in groups (its floordiv and mod are of different expressions)
func.func @mismatched(%ap: memref<5x16xi16>, %bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + (%k + 1) mod 2] : memref<5x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A's buffer is padded with zeros past k's end, B's is not (its group's second element may
// be anything, and bf16 garbage times 0 may be a NaN): refused as well.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-dot: nest 'matmul' not rewritten: loop %k does not run in whole groups of 2, nor to a known place in a group of buffers padded with zeros to whole groups
func.func @one_padded(%bp: memref<4x16xi16>, %c: memref<8x8xi32>) {
  %ap = memref.alloc() {alignment = 64 : i64, loom.zero_padded_groups} : memref<4x16xi16>
  affine.for %k = 0 to 7 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 2, %i * 2 + %k mod 2] : memref<4x16xi16>
        %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extsi %x : i16 to i32
        %wy = arith_ext.extsi %y : i16 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  memref.dealloc %ap : memref<4x16xi16>
  func.return
}

// -----

// s8 x u8 quads whose A is widened as unsigned: vpdpbusd (B's bytes as its unsigned
// source) would read A's bytes signed, not as the statement does.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-dot: nest 'matmul' not rewritten: vpdpbusd reads B's bytes unsigned and A's signed, not as these reads widen them
func.func @s8_read_unsigned(%ap: memref<2x24xi8>, %bp: memref<2x32xui8>, %c: memref<6x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 6 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 4, %i * 4 + %k mod 4] : memref<2x24xi8>
        %y = affine.load %bp[%k floordiv 4, %j * 4 + %k mod 4] : memref<2x32xui8>
        %acc = affine.load %c[%i, %j] : memref<6x8xi32>
        %wx = arith_ext.extui %x : i8 to i32
        %wy = arith_ext.extui %y : ui8 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<6x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A read in place whose pairs may straddle a change of `k floordiv 3` (3 is no multiple of
// 2: k = 2, 3 are taps of two window rows, far apart): not read as a group.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-dot: nest 'matmul' not rewritten: the read of %x is not in groups (no `e floordiv G, r + e mod G` subscripts), nor read in place in groups of 2 (it reads k other than linearly or through a floordiv or mod where a group of 2 may straddle the quotient's change)
// SKIP: remark: [loom-dot] nest 'matmul' not rewritten: the read of %x is not in groups {{.*}}, nor read in place in groups of 2
func.func @straddling(%x: memref<512xi16>, %bp: memref<3x16xi16>, %c: memref<8x8xi32>) {
  affine.for %k = 0 to 6 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %a = affine.load %x[%i * 32 + %k floordiv 3 * 64 + %k mod 3] : memref<512xi16>
        %b = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<3x16xi16>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wa = arith_ext.extsi %a : i16 to i32
        %wb = arith_ext.extsi %b : i16 to i32
        %p = arith.muli %wa, %wb : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-compensate{op=matmul}' --split-input-file 2>&1 | filecheck %s
// RUN: loom-opt %s -p 'loom-compensate' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=SKIP

// What loom-compensate refuses with op= (a LoomError at the nest, nothing changed), and
// leaves as it is with a remark without op=.

// u8 x s8 (no shift to take out): vpdpbusd takes it as it is.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-compensate: nest 'matmul' not rewritten: its product is not (extui(x) - 128) * extsi(y) of ui8 x and i8 y (pack A with loom-pack{element=ui8})
// SKIP: remark: [loom-compensate] nest 'matmul' not rewritten: its product is not (extui(x) - 128) * extsi(y)
func.func @unsigned(%a: memref<8x8xui8>, %b: memref<8x8xi8>, %c: memref<8x8xi32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xui8>
        %y = affine.load %b[%k, %j] : memref<8x8xi8>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extui %x : ui8 to i32
        %wy = arith_ext.extsi %y : i8 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Shifted, but neither read in groups along k (pack both with group=4).
// CHECK: refuse.mlir:[[# @LINE + 4]]:3: error: loom-compensate: nest 'matmul' not rewritten: the read of %a is not in groups (no `e floordiv G, r + e mod G` subscripts)
// SKIP: remark: [loom-compensate] nest 'matmul' not rewritten: the read of %a is not in groups
func.func @not_grouped(%a: memref<8x8xui8>, %b: memref<8x8xi8>, %c: memref<8x8xi32>) {
  %c128 = arith.constant 128 : i32
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xui8>
        %y = affine.load %b[%k, %j] : memref<8x8xi8>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extui %x : ui8 to i32
        %sx = arith.subi %wx, %c128 : i32
        %wy = arith_ext.extsi %y : i8 to i32
        %p = arith.muli %sx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// In groups, but B is an argument, not a buffer of loom-pack's whose copy the nest holds.
// CHECK: refuse.mlir:[[# @LINE + 4]]:3: error: loom-compensate: nest 'matmul' not rewritten: %b is not a buffer of loom-pack's
// SKIP: remark: [loom-compensate] nest 'matmul' not rewritten: %b is not a buffer of loom-pack's
func.func @b_argument(%a: memref<2x32xui8>, %b: memref<2x32xi8>, %c: memref<8x8xi32>) {
  %c128 = arith.constant 128 : i32
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %x = affine.load %a[%k floordiv 4, %i * 4 + %k mod 4] : memref<2x32xui8>
        %y = affine.load %b[%k floordiv 4, %j * 4 + %k mod 4] : memref<2x32xi8>
        %acc = affine.load %c[%i, %j] : memref<8x8xi32>
        %wx = arith_ext.extui %x : ui8 to i32
        %sx = arith.subi %wx, %c128 : i32
        %wy = arith_ext.extsi %y : i8 to i32
        %p = arith.muli %sx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<8x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

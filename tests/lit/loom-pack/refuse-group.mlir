// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 group=0}' 2>&1 | filecheck %s --check-prefix=GROUP0
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 group=2}' 2>&1 | filecheck %s --check-prefix=NO-PANEL
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 element=f64 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=ELEMENT
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 panel=8 group=2 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=ODD

// loom-pack's `group=` and `element=` options, refused with the reason, nothing changed.
// GROUP0: error: loom-pack: option 'group' must be a positive integer, with 'panel', got 0 without 'panel'
// NO-PANEL: error: loom-pack: option 'group' must be a positive integer, with 'panel', got 2 without 'panel'

// An i8 operand widened to i32 can be packed as i8, i16 or i32, not f64.
// ELEMENT: refuse-group.mlir:[[# @LINE + 11]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul': option 'element' is f64, but its buffer can hold i8 or i16 or ui8 or i32 (the operand's type, or what its reads widen it to; ui8: its i8 shifted by 128)
// k tiled by 3: a tile ends 1 past a group (3) or at 7 - k_t, which may be anywhere in one
// (k_t is a multiple of 3, not of 2), so no copy knows where to pad.
// ODD: refuse-group.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul': option 'group' is 2, but a tile of loop %k does not start a group, or its end is not a known number of elements past whole groups (tile 3; tile k from 0 by a multiple of 2)
func.func @odd_k(%a: memref<12x7xi8>, %b: memref<7x16xi8>, %c: memref<12x16xi32>) {
  affine.for %j_t = 0 to 16 step 8 {
    affine.for %k_t = 0 to 7 step 3 {
      affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> (d0 + 3, 7)>(%k_t) {
        affine.for %i = 0 to 12 {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
            %x = affine.load %a[%i, %k] : memref<12x7xi8>
            %y = affine.load %b[%k, %j] : memref<7x16xi8>
            %acc = affine.load %c[%i, %j] : memref<12x16xi32>
            %wx = arith_ext.extsi %x : i8 to i32
            %wy = arith_ext.extsi %y : i8 to i32
            %p = arith.muli %wx, %wy : i32
            %s = arith.addi %acc, %p : i32
            affine.store %s, %c[%i, %j] : memref<12x16xi32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

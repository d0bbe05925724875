// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2 panel=16}' --split-input-file | filecheck %s --check-prefix=PANEL
// RUN: loom-opt %s -p 'loom-pack{operand=0 level=2 panel=6},loom-pack{operand=1 level=2 panel=16}' --split-input-file | filecheck %s --check-prefix=BOTH
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2 op=matmul}' --split-input-file | filecheck %s --check-prefix=OP
// RUN: loom-opt %s -p 'loom-pack{operand=0 level=2 panel=6},loom-pack{operand=1 level=2 panel=16}' --split-input-file --remarks -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK

// The nests are those of `convert-loom-to-affine` for matmul after
// `loom-tile{sizes=32,64,16}`, written out: tile loops (i_t, j_t, k_t), point loops
// (i, j, k) clamped with a min where the tile size does not divide the extent.

// One level of tiles over a 64x50 * 50x70 matmul: i divides (no min), j and k have
// remainder tiles (70 = 64 + 6, 50 = 3 * 16 + 2).
// B's 16x64 tile (k, j) is copied at the start of each k_t iteration, from 0 to the
// tile's end (min with the extent for the remainder tiles), and read at [k - k_t, j - j_t].
// CHECK-LABEL: func.func @tiled_matmul
// CHECK-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
// CHECK-NEXT:    affine.for %[[IT:.*]] = 0 to 64 step 32 {
// CHECK-NEXT:      affine.for %[[JT:.*]] = 0 to 70 step 64 {
// CHECK-NEXT:        affine.for %[[KT:.*]] = 0 to 50 step 16 {
// CHECK-NEXT:          affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// CHECK-NEXT:            affine.for %[[JC:.*]] = 0 to min affine_map<(d0) -> (64, ((d0 * -1) + 70))>(%[[JT]]) {
// CHECK-NEXT:              %[[V:.*]] = affine.load %b[%[[KT]] + %[[KC]], %[[JT]] + %[[JC]]] : memref<50x70xf32>
// CHECK-NEXT:              affine.store %[[V]], %[[PACK]][%[[KC]], %[[JC]]] : memref<16x64xf32>
// CHECK-NEXT:            }
// CHECK-NEXT:          }
// CHECK-NEXT:          affine.for %[[I:.*]] = %[[IT]] to
// CHECK-NEXT:            affine.for %[[J:.*]] = %[[JT]] to
// CHECK-NEXT:              affine.for %[[K:.*]] = %[[KT]] to
// CHECK-NEXT:                affine.load %a[%[[I]], %[[K]]] : memref<64x50xf32>
// CHECK-NEXT:                affine.load %[[PACK]][%[[K]] + %[[KT]] * -1, %[[J]] + %[[JT]] * -1] : memref<16x64xf32>
// CHECK-NEXT:                affine.load %c[%[[I]], %[[J]]] : memref<64x70xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %[[PACK]] : memref<16x64xf32>
// CHECK-NEXT:    func.return

// panel=16: B's tile as [64/16][16][16]; the micro-kernel's read is
// [(j - j_t) floordiv 16, k - k_t, (j - j_t) mod 16]. The panels split B's unit-stride
// dimension (j), so the copy goes row by row (k_cp outside the panel loop): each row of
// the tile read in one sweep across the panels.
// PANEL-LABEL: func.func @tiled_matmul
// PANEL-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16x16xf32>
// PANEL-NEXT:    affine.for %{{.*}} = 0 to 64 step 32 {
// PANEL-NEXT:      affine.for %[[JT:.*]] = 0 to 70 step 64 {
// PANEL-NEXT:        affine.for %[[KT:.*]] = 0 to 50 step 16 {
// PANEL-NEXT:          affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// PANEL-NEXT:            affine.for %[[P:.*]] = 0 to 4 {
// PANEL-NEXT:              affine.for %[[JC:.*]] = 0 to min affine_map<(d0, d1) -> (16, (((d0 * -1) + (d1 * -16)) + 70))>(%[[JT]], %[[P]]) {
// PANEL-NEXT:                %[[V:.*]] = affine.load %b[%[[KT]] + %[[KC]], %[[JT]] + %[[P]] * 16 + %[[JC]]] : memref<50x70xf32>
// PANEL-NEXT:                affine.store %[[V]], %[[PACK]][%[[P]], %[[KC]], %[[JC]]] : memref<4x16x16xf32>
// PANEL:                   affine.for %[[J:.*]] = %[[JT]] to
// PANEL-NEXT:                affine.for %[[K:.*]] = %[[KT]] to
// PANEL-NEXT:                  affine.load %a
// PANEL-NEXT:                  affine.load %[[PACK]][(%[[J]] + %[[JT]] * -1) floordiv 16, %[[K]] + %[[KT]] * -1, (%[[J]] + %[[JT]] * -1) mod 16] : memref<4x16x16xf32>
// PANEL:         memref.dealloc %[[PACK]] : memref<4x16x16xf32>

// Both operands: A's 32x16 tile as panels of 6 rows, [6][16][6], the last panel padded
// (32 = 5 * 6 + 2: its copy loop stops at 32 - 6 * panel). Each pass puts its copy first
// in the k_t body, its alloc right before the nest and its dealloc right after it. A's
// panels split its rows, not its unit-stride dimension: its copy goes panel by panel.
// BOTH-LABEL: func.func @tiled_matmul
// BOTH-NEXT:    %[[APACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x16x6xf32>
// BOTH-NEXT:    %[[BPACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16x16xf32>
// BOTH-NEXT:    affine.for %[[IT:.*]] = 0 to 64 step 32 {
// BOTH:           affine.for %[[KT:.*]] = 0 to 50 step 16 {
// BOTH-NEXT:        affine.for %{{.*}} = 0 to min
// BOTH-NEXT:          affine.for %{{.*}} = 0 to 4 {
// BOTH:             affine.store %{{.*}}, %[[BPACK]]
// BOTH:           affine.for %[[P:.*]] = 0 to 6 {
// BOTH-NEXT:        affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// BOTH-NEXT:          affine.for %[[IC:.*]] = 0 to min affine_map<(d0) -> (6, ((d0 * -6) + 32))>(%[[P]]) {
// BOTH-NEXT:            %[[V:.*]] = affine.load %a[%[[IT]] + %[[P]] * 6 + %[[IC]], %[[KT]] + %[[KC]]] : memref<64x50xf32>
// BOTH-NEXT:            affine.store %[[V]], %[[APACK]][%[[P]], %[[KC]], %[[IC]]] : memref<6x16x6xf32>
// BOTH:           affine.for %[[I:.*]] = %[[IT]] to
// BOTH:                 affine.load %[[APACK]][(%[[I]] + %[[IT]] * -1) floordiv 6, %{{.*}} + %[[KT]] * -1, (%[[I]] + %[[IT]] * -1) mod 6] : memref<6x16x6xf32>
// BOTH-NEXT:            affine.load %[[BPACK]][
// BOTH:         } {loom.tag = "matmul"}
// BOTH-NEXT:    memref.dealloc %[[BPACK]] : memref<4x16x16xf32>
// BOTH-NEXT:    memref.dealloc %[[APACK]] : memref<6x16x6xf32>

// OP-LABEL: func.func @tiled_matmul
// OP-NEXT:    memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>

// REMARK: pack.mlir:[[# @LINE + 3]]:3: remark: [loom-pack] packed A (%a) of nest 'matmul': tile 32x16 at loop %k_t (level 2) as panels [6][16][6] (the last panel padded), 2.25 KiB
// REMARK-NEXT: pack.mlir:[[# @LINE + 2]]:3: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 16x64 at loop %k_t (level 2) as panels [4][16][16], 4 KiB
func.func @tiled_matmul(%a: memref<64x50xf32>, %b: memref<50x70xf32>, %c: memref<64x70xf32>) {
  affine.for %i_t = 0 to 64 step 32 {
    affine.for %j_t = 0 to 70 step 64 {
      affine.for %k_t = 0 to 50 step 16 {
        affine.for %i = %i_t to affine_map<(d0) -> (d0 + 32)>(%i_t) {
          affine.for %j = %j_t to min affine_map<(d0) -> (d0 + 64, 70)>(%j_t) {
            affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 16, 50)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<64x50xf32>
              %y = affine.load %b[%k, %j] : memref<50x70xf32>
              %z = affine.load %c[%i, %j] : memref<64x70xf32>
              %p = arith.mulf %x, %y : f32
              %s = arith.addf %z, %p : f32
              affine.store %s, %c[%i, %j] : memref<64x70xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Two levels of tiles (`loom-tile{sizes=4,16,4 depth=3}` on top): at level 2 the tile
// of B is still what the loops inside k_t read, through the register-tile loops.
// The same tiles as above, through the register-tile loops: k runs in
// [k_t2, min(k_t2 + 4, k_t + 16, 50)) for k_t2 in [k_t, min(k_t + 16, 50)) step 4, so
// the tile along k is [k_t, min(k_t + 16, 50)), 16 long; A's along i is 32 long
// (i_t2 + 4 <= i_t + 32, the step of i_t2 taken into account).
// CHECK-LABEL: func.func @two_level_tiles
// CHECK-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
// CHECK:             affine.for %[[KT:.*]] = 0 to 50 step 16 {
// CHECK-NEXT:          affine.for %[[KC:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%[[KT]]) {
// CHECK-NEXT:            affine.for %[[JC:.*]] = 0 to min affine_map<(d0) -> (64, ((d0 * -1) + 70))>(%{{.*}}) {
// CHECK:                               affine.load %[[PACK]][%{{.*}} + %[[KT]] * -1, %{{.*}} + %{{.*}} * -1] : memref<16x64xf32>
// CHECK:         memref.dealloc %[[PACK]] : memref<16x64xf32>

// With panels of 16, each register tile of j (%j_t2 stepping by 16 from %j_t, %j < %j_t2 + 16)
// lies in one panel: the read is [(%j_t2 - %j_t) floordiv 16, %k - %k_t, %j - %j_t2],
// invariant in the point loops but for the last index, which is unit stride in %j.
// PANEL-LABEL: func.func @two_level_tiles
// PANEL-NEXT:    %[[PACK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16x16xf32>
// PANEL-NEXT:    affine.for %{{.*}} = 0 to 64 step 32 {
// PANEL-NEXT:      affine.for %[[JT:.*]] = 0 to 70 step 64 {
// PANEL-NEXT:        affine.for %[[KT:.*]] = 0 to 50 step 16 {
// PANEL:               affine.for %[[JT2:.*]] = %[[JT]] to min affine_map<(d0) -> ((d0 + 64), 70)>(%[[JT]]) step 16 {
// PANEL:                     affine.for %[[J:.*]] = %[[JT2]] to
// PANEL-NEXT:                  affine.for %[[K:.*]] = %{{.*}} to
// PANEL-NEXT:                    affine.load %a
// PANEL-NEXT:                    affine.load %[[PACK]][(%[[JT2]] + %[[JT]] * -1) floordiv 16, %[[K]] + %[[KT]] * -1, %[[JT2]] * -1 + %[[J]]] : memref<4x16x16xf32>

// BOTH-LABEL: func.func @two_level_tiles
// BOTH-NEXT:    memref.alloc() {alignment = 64 : i64} : memref<6x16x6xf32>
// BOTH-NEXT:    memref.alloc() {alignment = 64 : i64} : memref<4x16x16xf32>

// REMARK: pack.mlir:[[# @LINE + 3]]:3: remark: [loom-pack] packed A (%a) of nest 'matmul': tile 32x16 at loop %k_t (level 2)
// REMARK-NEXT: pack.mlir:[[# @LINE + 2]]:3: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 16x64 at loop %k_t (level 2)
func.func @two_level_tiles(%a: memref<64x50xf32>, %b: memref<50x70xf32>, %c: memref<64x70xf32>) {
  affine.for %i_t = 0 to 64 step 32 {
    affine.for %j_t = 0 to 70 step 64 {
      affine.for %k_t = 0 to 50 step 16 {
        affine.for %i_t2 = %i_t to affine_map<(d0) -> (d0 + 32)>(%i_t) step 4 {
          affine.for %j_t2 = %j_t to min affine_map<(d0) -> (d0 + 64, 70)>(%j_t) step 16 {
            affine.for %k_t2 = %k_t to min affine_map<(d0) -> (d0 + 16, 50)>(%k_t) step 4 {
              affine.for %i = %i_t2 to affine_map<(d0) -> (d0 + 4)>(%i_t2) {
                affine.for %j = %j_t2 to min affine_map<(d0, d1) -> (d0 + 16, d1 + 64, 70)>(%j_t2, %j_t) {
                  affine.for %k = %k_t2 to min affine_map<(d0, d1) -> (d0 + 4, d1 + 16, 50)>(%k_t2, %k_t) {
                    %x = affine.load %a[%i, %k] : memref<64x50xf32>
                    %y = affine.load %b[%k, %j] : memref<50x70xf32>
                    %z = affine.load %c[%i, %j] : memref<64x70xf32>
                    %p = arith.mulf %x, %y : f32
                    %s = arith.addf %z, %p : f32
                    affine.store %s, %c[%i, %j] : memref<64x70xf32>
                  }
                }
              }
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Two nests: `op=matmul` packs only the one tagged matmul, no `op=` packs both.
// CHECK-LABEL: func.func @select_by_tag
// CHECK-NEXT:    %[[PACK:.*]] = memref.alloc() {{.*}} : memref<16x64xf32>
// CHECK:           affine.load %[[PACK]]
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    memref.dealloc %[[PACK]]
// CHECK-NEXT:    %[[PACK2:.*]] = memref.alloc() {{.*}} : memref<16x64xf32>
// CHECK:           affine.load %[[PACK2]]
// CHECK:         } {loom.tag = "other"}
// CHECK-NEXT:    memref.dealloc %[[PACK2]]

// The nest tagged "other" keeps reading %b.
// OP-LABEL: func.func @select_by_tag
// OP-NEXT:    %[[PACK:.*]] = memref.alloc() {{.*}} : memref<16x64xf32>
// OP:         } {loom.tag = "matmul"}
// OP-NEXT:    memref.dealloc %[[PACK]]
// OP-NEXT:    affine.for
// OP-NOT:     memref.alloc
// OP:         affine.load %b[%{{.*}}, %{{.*}}] : memref<50x70xf32>
// OP:         } {loom.tag = "other"}
// OP-NEXT:    func.return
func.func @select_by_tag(%a: memref<64x50xf32>, %b: memref<50x70xf32>, %c: memref<64x70xf32>, %d: memref<64x70xf32>) {
  affine.for %i_t = 0 to 64 step 32 {
    affine.for %j_t = 0 to 70 step 64 {
      affine.for %k_t = 0 to 50 step 16 {
        affine.for %i = %i_t to affine_map<(d0) -> (d0 + 32)>(%i_t) {
          affine.for %j = %j_t to min affine_map<(d0) -> (d0 + 64, 70)>(%j_t) {
            affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 16, 50)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<64x50xf32>
              %y = affine.load %b[%k, %j] : memref<50x70xf32>
              %z = affine.load %c[%i, %j] : memref<64x70xf32>
              %p = arith.mulf %x, %y : f32
              %s = arith.addf %z, %p : f32
              affine.store %s, %c[%i, %j] : memref<64x70xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  affine.for %i_t = 0 to 64 step 32 {
    affine.for %j_t = 0 to 70 step 64 {
      affine.for %k_t = 0 to 50 step 16 {
        affine.for %i = %i_t to affine_map<(d0) -> (d0 + 32)>(%i_t) {
          affine.for %j = %j_t to min affine_map<(d0) -> (d0 + 64, 70)>(%j_t) {
            affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 16, 50)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<64x50xf32>
              %y = affine.load %b[%k, %j] : memref<50x70xf32>
              %z = affine.load %d[%i, %j] : memref<64x70xf32>
              %p = arith.mulf %x, %y : f32
              %s = arith.addf %z, %p : f32
              affine.store %s, %d[%i, %j] : memref<64x70xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "other"}
  func.return
}

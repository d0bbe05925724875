// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 private=0 op=matmul}' | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 private=0 op=matmul},loom-parallelize{num-threads=2}' --remarks 2>&1 | filecheck %s --check-prefix=PAR
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 op=matmul},loom-parallelize{num-threads=2}' --remarks 2>&1 | filecheck %s --check-prefix=SHARED
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 panel=16 private=1 op=matmul}' 2>&1 | filecheck %s --check-prefix=LEVEL

// private=0: the buffer has a slot per iteration of the loop at level 0 (%j_t, two column
// blocks), `%slot = (%j_t - 0) floordiv 32` first in its body, a plain value to the
// subscripts (their forms stay linear for the passes after). Each block then copies into
// its own slot, and loom-parallelize may run %j_t's iterations at once (each thread its
// columns of C, its slot of the buffer); with one shared buffer it may not.
// CHECK-LABEL: func.func @blocks
// CHECK:         %b_pack = memref.alloc() {alignment = 64 : i64} : memref<2x1x16x16xf32>
// CHECK-NEXT:    affine.for %j_t = 0 to 64 step 32 {
// CHECK-NEXT:      %slot = affine.apply affine_map<(d0) -> ((d0 floordiv 32))> (%j_t)
// CHECK-NEXT:      affine.for %j_r =
// CHECK:               affine.store %{{.*}}, %b_pack[%slot, %j_panel, %k_cp, %j_cp] : memref<2x1x16x16xf32>
// CHECK:               affine.load %b_pack[%slot, 0, %k, %j + %j_r * -1] : memref<2x1x16x16xf32>
// PAR: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 16x16 at loop %j_r (level 1) as panels [2][1][16][16], a slot per iteration of %j_t (private), 2 KiB
// PAR: remark: [loom-parallelize] nest 'matmul': loop %j_t run in parallel (2 iterations, 2 threads)
// SHARED-NOT: loop %j_t run in parallel
// SHARED: remark: [loom-parallelize] nest 'matmul': loop %i run in parallel
// LEVEL: error: loom-pack: option 'private' must be the level of a loop around the copy's, 0 to level - 1, got 1
func.func @blocks(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %c: memref<8x64xf32>) {
  affine.for %j_t = 0 to 64 step 32 {
    affine.for %j_r = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 32)>(%j_t) step 16 {
      affine.for %i = 0 to 8 {
        affine.for %j = affine_map<(d0) -> (d0)>(%j_r) to affine_map<(d0) -> (d0 + 16)>(%j_r) {
          affine.for %k = 0 to 16 {
            %x = affine.load %a[%i, %k] : memref<8x16xf32>
            %y = affine.load %b[%k, %j] : memref<16x64xf32>
            %z = affine.load %c[%i, %j] : memref<8x64xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x64xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

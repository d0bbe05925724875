// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2 panel=8}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-pack{operand=1 level=2 panel=8}' --split-input-file --remarks -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK

// A bf16 operand that the compute loops widen to f32 is packed widened: the buffer holds
// f32, the copy widens each element once, the body reads the buffer with no extf.
// CHECK-LABEL: func.func @bf16
// CHECK:      %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8x8xf32>
// CHECK:      %[[E:.*]] = affine.load %b[%{{.*}}, %{{.*}}] : memref<24x16xbf16>
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[E]] : bf16 to f32
// CHECK-NEXT: affine.store %[[W]], %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x8x8xf32>
// CHECK:      %[[Y:.*]] = affine.load %[[P]][{{.*}}] : memref<2x8x8xf32>
// CHECK-NOT:  arith.extf %[[Y]]
// CHECK:      arith.mulf %{{.*}}, %[[Y]] : f32
// REMARK: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 8x16 at loop %k_t (level 2) as panels [2][8][8], widened from bf16 to f32 as it is copied, 512 B
func.func @bf16(%a: memref<8x24xbf16>, %b: memref<24x16xbf16>, %c: memref<8x16xf32>) {
  affine.for %i_t = 0 to 8 step 8 {
    affine.for %j_t = 0 to 16 step 16 {
      affine.for %k_t = 0 to 24 step 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 8)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 16)>(%j_t) {
            affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0 + 8)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<8x24xbf16>
              %y = affine.load %b[%k, %j] : memref<24x16xbf16>
              %acc = affine.load %c[%i, %j] : memref<8x16xf32>
              %wx = arith.extf %x : bf16 to f32
              %wy = arith.extf %y : bf16 to f32
              %p = arith.mulf %wx, %wy : f32
              %s = arith.addf %acc, %p : f32
              affine.store %s, %c[%i, %j] : memref<8x16xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// An s8 operand widened to i32 (arith_ext.extsi) is packed as i32.
// CHECK-LABEL: func.func @s8
// CHECK:      memref.alloc() {alignment = 64 : i64} : memref<2x8x8xi32>
// CHECK:      arith_ext.extsi %{{.*}} : i8 to i32
// CHECK-NOT:  arith_ext.extsi
// CHECK:      arith.muli
// REMARK: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 8x16 at loop %k_t (level 2) as panels [2][8][8], widened from i8 to i32 as it is copied, 512 B
func.func @s8(%a: memref<8x24xui8>, %b: memref<24x16xi8>, %c: memref<8x16xi32>) {
  affine.for %i_t = 0 to 8 step 8 {
    affine.for %j_t = 0 to 16 step 16 {
      affine.for %k_t = 0 to 24 step 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 8)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 16)>(%j_t) {
            affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0 + 8)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<8x24xui8>
              %y = affine.load %b[%k, %j] : memref<24x16xi8>
              %acc = affine.load %c[%i, %j] : memref<8x16xi32>
              %wx = arith_ext.extui %x : ui8 to i32
              %wy = arith_ext.extsi %y : i8 to i32
              %p = arith.muli %wx, %wy : i32
              %s = arith.addi %acc, %p : i32
              affine.store %s, %c[%i, %j] : memref<8x16xi32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A read whose value is also used unwidened keeps its type: no widening.
// CHECK-LABEL: func.func @mixed
// CHECK:      memref.alloc() {alignment = 64 : i64} : memref<2x8x8xbf16>
// REMARK: remark: [loom-pack] packed B (%b) of nest 'matmul': tile 8x16 at loop %k_t (level 2) as panels [2][8][8], 256 B
func.func @mixed(%a: memref<8x24xbf16>, %b: memref<24x16xbf16>, %c: memref<8x16xf32>, %d: memref<8x16xbf16>) {
  affine.for %i_t = 0 to 8 step 8 {
    affine.for %j_t = 0 to 16 step 16 {
      affine.for %k_t = 0 to 24 step 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 8)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 16)>(%j_t) {
            affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0 + 8)>(%k_t) {
              %x = affine.load %a[%i, %k] : memref<8x24xbf16>
              %y = affine.load %b[%k, %j] : memref<24x16xbf16>
              %acc = affine.load %c[%i, %j] : memref<8x16xf32>
              %wx = arith.extf %x : bf16 to f32
              %wy = arith.extf %y : bf16 to f32
              %p = arith.mulf %wx, %wy : f32
              %s = arith.addf %acc, %p : f32
              affine.store %y, %d[%i, %j] : memref<8x16xbf16>
              affine.store %s, %c[%i, %j] : memref<8x16xf32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

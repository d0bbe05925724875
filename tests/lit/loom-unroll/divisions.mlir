// RUN: loom-opt %s -p 'loom-unroll{factor=3}' | filecheck %s

// The copies' divisions are split over what is known to be a multiple: %k steps by 3
// from 0, so (%k + 1) floordiv 9 is %k floordiv 9 (the constant cannot carry past a
// multiple of 3) and (%k + 1) mod 3 is 1: every copy shares the first's divisions and
// adds a constant (affine_forms.distribute_divisions).
// CHECK-LABEL: func.func @divisions(
// CHECK:         affine.for %k = 0 to 36 step 3 {
// CHECK-NEXT:      %v = affine.load %a[%k floordiv 9, %k + %k floordiv 9 * -9] : memref<4x9xf32>
// CHECK-NEXT:      affine.store %v, %b[(%k + %k floordiv 9 * -9) floordiv 3 * 12] : memref<36xf32>
// CHECK-NEXT:      %v_1 = affine.load %a[%k floordiv 9, %k + %k floordiv 9 * -9 + 1] : memref<4x9xf32>
// CHECK-NEXT:      affine.store %v_1, %b[%k + %k floordiv 3 * 9 + %k floordiv 9 * -36 + 1] : memref<36xf32>
// CHECK-NEXT:      %v_2 = affine.load %a[%k floordiv 9, %k + %k floordiv 9 * -9 + 2] : memref<4x9xf32>
// CHECK-NEXT:      affine.store %v_2, %b[%k + %k floordiv 3 * 9 + %k floordiv 9 * -36 + 2] : memref<36xf32>
// CHECK-NEXT:    }
func.func @divisions(%a: memref<4x9xf32>, %b: memref<36xf32>) {
  affine.for %k = 0 to 36 {
    %v = affine.load %a[%k floordiv 9, %k mod 9] : memref<4x9xf32>
    affine.store %v, %b[(%k mod 9) floordiv 3 * 12 + %k mod 3] : memref<36xf32>
  }
  func.return
}

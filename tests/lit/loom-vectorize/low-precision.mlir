// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-vectorize{width=8}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'convert-loom-to-affine,loom-vectorize{width=8}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// bf16 x bf16 summed in f32: the widening read becomes a vector extf, and the product and
// sum an fma on the widened vectors.
// CHECK-LABEL: func.func @bf16
// CHECK:      %[[B:.*]] = affine.vector_load %b[%k, %{{.*}}] : memref<8x16xbf16>, vector<8xbf16>
// CHECK:      %[[WB:.*]] = arith.extf %[[B]] : vector<8xbf16> to vector<8xf32>
// CHECK:      vector.fma %{{.*}}, %[[WB]], %{{.*}} : vector<8xf32>
func.func @bf16(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 8 {
      affine.for %j = 0 to 16 {
        %x = affine.load %a[%i, %k] : memref<4x8xbf16>
        %y = affine.load %b[%k, %j] : memref<8x16xbf16>
        %acc = affine.load %c[%i, %j] : memref<4x16xf32>
        %wx = arith.extf %x : bf16 to f32
        %wy = arith.extf %y : bf16 to f32
        %p = arith.mulf %wx, %wy : f32
        %s = arith.addf %acc, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x16xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// f32 -> bf16 rounding lane by lane (loom.cast).
// CHECK-LABEL: func.func @cast
// CHECK:      %[[X:.*]] = affine.vector_load %x[%{{.*}}, %{{.*}}] : memref<4x16xf32>, vector<8xf32>
// CHECK-NEXT: %[[H:.*]] = arith.truncf %[[X]] : vector<8xf32> to vector<8xbf16>
// CHECK-NEXT: affine.vector_store %[[H]], %h[%{{.*}}, %{{.*}}] : memref<4x16xbf16>, vector<8xbf16>
func.func @cast(%x: memref<4x16xf32>, %h: memref<4x16xbf16>) {
  loom.cast ins(%x : memref<4x16xf32>) outs(%h : memref<4x16xbf16>)
  func.return
}

// -----

// An i8 widening read has no vector form in xDSL 0.74 (its extsi takes scalars): refused,
// the nest left scalar.
// REMARK: remark: [loom-vectorize] nest 'matmul': loop %j not vectorized: 'arith.extsi' on values that vary with %j has no vector form here
func.func @u8s8(%a: memref<4x8xui8>, %b: memref<8x16xi8>, %c: memref<4x16xi32>) {
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 8 {
      affine.for %j = 0 to 16 {
        %x = affine.load %a[%i, %k] : memref<4x8xui8>
        %y = affine.load %b[%k, %j] : memref<8x16xi8>
        %acc = affine.load %c[%i, %j] : memref<4x16xi32>
        %wx = arith.extui %x : ui8 to i32
        %wy = arith.extsi %y : i8 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<4x16xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

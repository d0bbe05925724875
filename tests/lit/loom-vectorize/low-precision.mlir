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

// u8 x s8 summed in i32: the widening reads (arith_ext's casts, which take vectors) become
// vector casts, the A element's is splatted, the product and sum i32 vector ops.
// CHECK-LABEL: func.func @u8s8
// CHECK:      %[[X:.*]] = affine.load %a[%i, %k] : memref<4x8xui8>
// CHECK:      %[[Y:.*]] = affine.vector_load %b[%k, %{{.*}}] : memref<8x16xi8>, vector<8xi8>
// CHECK:      %[[WX:.*]] = arith_ext.extui %[[X]] : ui8 to i32
// CHECK:      %[[WY:.*]] = arith_ext.extsi %[[Y]] : vector<8xi8> to vector<8xi32>
// CHECK:      %[[P:.*]] = arith.muli %{{.*}}, %[[WY]] : vector<8xi32>
// CHECK:      arith.addi %{{.*}}, %[[P]] : vector<8xi32>
// REMARK: remark: [loom-vectorize] nest 'matmul': vectorized loop %j by 8
func.func @u8s8(%a: memref<4x8xui8>, %b: memref<8x16xi8>, %c: memref<4x16xi32>) {
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 8 {
      affine.for %j = 0 to 16 {
        %x = affine.load %a[%i, %k] : memref<4x8xui8>
        %y = affine.load %b[%k, %j] : memref<8x16xi8>
        %acc = affine.load %c[%i, %j] : memref<4x16xi32>
        %wx = arith_ext.extui %x : ui8 to i32
        %wy = arith_ext.extsi %y : i8 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<4x16xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Quantization lane by lane: the float steps, then fptosi and trunci on vectors.
// CHECK-LABEL: func.func @quantize
// CHECK:      math.roundeven %{{.*}} : vector<8xf32>
// CHECK:      %[[W:.*]] = arith_ext.fptosi %{{.*}} : vector<8xf32> to vector<8xi32>
// CHECK-NEXT: %[[Q:.*]] = arith_ext.trunci %[[W]] : vector<8xi32> to vector<8xui8>
// CHECK-NEXT: affine.vector_store %[[Q]], %q[%{{.*}}, %{{.*}}] : memref<4x16xui8>, vector<8xui8>
func.func @quantize(%x: memref<4x16xf32>, %s: memref<f32>, %z: memref<i32>, %q: memref<4x16xui8>) {
  loom.quantize ins(%x, %s, %z : memref<4x16xf32>, memref<f32>, memref<i32>) outs(%q : memref<4x16xui8>)
  func.return
}

// -----

// xDSL's own arith.extsi takes scalars only: a nest written with it stays scalar, and says why.
// REMARK: remark: [loom-vectorize] nest 'matmul': loop %j not vectorized: 'arith.extsi' on values that vary with %j has no vector form here
func.func @xdsl_extsi(%b: memref<8x16xi8>, %c: memref<8x16xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %j = 0 to 16 {
      %y = affine.load %b[%k, %j] : memref<8x16xi8>
      %wy = arith.extsi %y : i8 to i32
      affine.store %wy, %c[%k, %j] : memref<8x16xi32>
    }
  } {loom.tag = "matmul"}
  func.return
}

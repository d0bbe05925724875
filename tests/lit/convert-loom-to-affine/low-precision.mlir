// RUN: loom-opt %s -p convert-loom-to-affine --split-input-file | filecheck %s

// A bf16 matmul: each element widened to f32 (exact), the products summed in f32.
// CHECK-LABEL: func.func @bf16_matmul
// CHECK:      affine.for %i = 0 to 4 {
// CHECK:      %[[A:.*]] = affine.load %a[%i, %k] : memref<4x3xbf16>
// CHECK-NEXT: %[[B:.*]] = affine.load %b[%k, %j] : memref<3x5xbf16>
// CHECK-NEXT: %[[C:.*]] = affine.load %c[%i, %j] : memref<4x5xf32>
// CHECK-NEXT: %[[WA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[WB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT: affine.store %[[S]], %c[%i, %j] : memref<4x5xf32>
func.func @bf16_matmul(%a: memref<4x3xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) {
  loom.matmul ins(%a, %b : memref<4x3xbf16>, memref<3x5xbf16>) outs(%c : memref<4x5xf32>)
  func.return
}

// -----

// u8 x s8: zero- and sign-extended to i32, an integer zero fill, products summed in i32.
// CHECK-LABEL: func.func @u8s8_matmul
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK:      affine.store %[[ZERO]], %c[%{{.*}}, %{{.*}}] : memref<4x5xi32>
// CHECK:      %[[A:.*]] = affine.load %a[%i, %k] : memref<4x3xui8>
// CHECK-NEXT: %[[B:.*]] = affine.load %b[%k, %j] : memref<3x5xi8>
// CHECK-NEXT: %[[C:.*]] = affine.load %c[%i, %j] : memref<4x5xi32>
// CHECK-NEXT: %[[WA:.*]] = arith_ext.extui %[[A]] : ui8 to i32
// CHECK-NEXT: %[[WB:.*]] = arith_ext.extsi %[[B]] : i8 to i32
// CHECK-NEXT: %[[P:.*]] = arith.muli %[[WA]], %[[WB]] : i32
// CHECK-NEXT: %[[S:.*]] = arith.addi %[[C]], %[[P]] : i32
// CHECK-NEXT: affine.store %[[S]], %c[%i, %j] : memref<4x5xi32>
func.func @u8s8_matmul(%a: memref<4x3xui8>, %b: memref<3x5xi8>, %c: memref<4x5xi32>) {
  loom.matmul ins(%a, %b : memref<4x3xui8>, memref<3x5xi8>) outs(%c : memref<4x5xi32>)
  func.return
}

// -----

// An i8 conv2d: the same widening in the guarded body.
// CHECK-LABEL: func.func @i8_conv
// CHECK:      affine.if
// CHECK:      arith_ext.extsi %{{.*}} : i8 to i32
// CHECK-NEXT: arith_ext.extsi %{{.*}} : i8 to i32
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.addi
func.func @i8_conv(%x: memref<1x2x5x5xi8>, %w: memref<3x2x3x3xi8>, %y: memref<1x3x5x5xi32>) {
  loom.conv2d ins(%x, %w : memref<1x2x5x5xi8>, memref<3x2x3x3xi8>) outs(%y : memref<1x3x5x5xi32>) {padding = array<i64: 1, 1>}
  func.return
}

// -----

// i32 epilogues: addi, muli, and relu as maxsi with 0.
// CHECK-LABEL: func.func @i32_epilogue
// CHECK:      arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:      arith.muli %{{.*}}, %{{.*}} : i32
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: arith.maxsi %{{.*}}, %[[ZERO]] : i32
func.func @i32_epilogue(%a: memref<4x5xi32>, %b: memref<5xi32>, %c: memref<4x5xi32>) {
  loom.add ins(%a, %b : memref<4x5xi32>, memref<5xi32>) outs(%c : memref<4x5xi32>)
  loom.mul ins(%c, %c : memref<4x5xi32>, memref<4x5xi32>) outs(%c : memref<4x5xi32>)
  loom.relu ins(%c : memref<4x5xi32>) outs(%c : memref<4x5xi32>)
  func.return
}

// -----

// The casts: truncf to bf16 (the lowering to LLVM rounds to nearest even), extf, sitofp.
// CHECK-LABEL: func.func @casts
// CHECK:      arith.truncf %{{.*}} : f32 to bf16
// CHECK:      arith.extf %{{.*}} : bf16 to f32
// CHECK:      arith_ext.sitofp %{{.*}} : i32 to f32
func.func @casts(%x: memref<8xf32>, %h: memref<8xbf16>, %y: memref<8xf32>, %i: memref<8xi32>) {
  loom.cast ins(%x : memref<8xf32>) outs(%h : memref<8xbf16>)
  loom.cast ins(%h : memref<8xbf16>) outs(%y : memref<8xf32>)
  loom.cast ins(%i : memref<8xi32>) outs(%y : memref<8xf32>)
  func.return
}

// -----

// Quantize per channel along axis 1: the scale and zero point read at that loop's index;
// x / scale rounded half to even, the zero point added, clamped to ui8's range by maxnum
// and minnum (a NaN gives 0), then converted and truncated.
// CHECK-LABEL: func.func @quantize
// CHECK:      affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT: affine.for %[[J:.*]] = 0 to 5 {
// CHECK-NEXT: %[[X:.*]] = affine.load %x[%[[I]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT: %[[S:.*]] = affine.load %s[%[[J]]] : memref<5xf32>
// CHECK-NEXT: %[[Z:.*]] = affine.load %z[%[[J]]] : memref<5xi32>
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[X]], %[[S]] : f32
// CHECK-NEXT: %[[R:.*]] = math.roundeven %[[D]] : f32
// CHECK-NEXT: %[[ZF:.*]] = arith_ext.sitofp %[[Z]] : i32 to f32
// CHECK-NEXT: %[[SH:.*]] = arith.addf %[[R]], %[[ZF]] : f32
// CHECK-NEXT: %[[LO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[HI:.*]] = arith.constant 2.550000e+02 : f32
// CHECK-NEXT: %[[UP:.*]] = arith.maxnumf %[[SH]], %[[LO]] : f32
// CHECK-NEXT: %[[CL:.*]] = arith.minnumf %[[UP]], %[[HI]] : f32
// CHECK-NEXT: %[[W:.*]] = arith_ext.fptosi %[[CL]] : f32 to i32
// CHECK-NEXT: %[[Q:.*]] = arith_ext.trunci %[[W]] : i32 to ui8
// CHECK-NEXT: affine.store %[[Q]], %q[%[[I]], %[[J]]] : memref<4x5xui8>
// CHECK:      {loom.tag = "quantize"}
func.func @quantize(%x: memref<4x5xf32>, %s: memref<5xf32>, %z: memref<5xi32>, %q: memref<4x5xui8>) {
  loom.quantize ins(%x, %s, %z : memref<4x5xf32>, memref<5xf32>, memref<5xi32>) outs(%q : memref<4x5xui8>) {axis = 1 : i64}
  func.return
}

// -----

// Dequantize per tensor: 0-d scale and zero point; q widened, the zero point subtracted in
// i32, converted, scaled in f32.
// CHECK-LABEL: func.func @dequantize
// CHECK:      %[[Q:.*]] = affine.load %q[%{{.*}}, %{{.*}}] : memref<4x5xi8>
// CHECK-NEXT: %[[S:.*]] = affine.load %s[] : memref<f32>
// CHECK-NEXT: %[[Z:.*]] = affine.load %z[] : memref<i32>
// CHECK-NEXT: %[[W:.*]] = arith_ext.extsi %[[Q]] : i8 to i32
// CHECK-NEXT: %[[D:.*]] = arith.subi %[[W]], %[[Z]] : i32
// CHECK-NEXT: %[[F:.*]] = arith_ext.sitofp %[[D]] : i32 to f32
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[F]], %[[S]] : f32
// CHECK-NEXT: affine.store %[[Y]], %y[%{{.*}}, %{{.*}}] : memref<4x5xf32>
// CHECK:      {loom.tag = "dequantize"}
func.func @dequantize(%q: memref<4x5xi8>, %s: memref<f32>, %z: memref<i32>, %y: memref<4x5xf32>) {
  loom.dequantize ins(%q, %s, %z : memref<4x5xi8>, memref<f32>, memref<i32>) outs(%y : memref<4x5xf32>)
  func.return
}

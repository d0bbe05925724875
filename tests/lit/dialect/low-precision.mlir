// RUN: loom-opt %s | loom-opt | filecheck %s
// bf16 and int8 contractions (products summed in f32 and i32), the casts and the affine
// quantization ops round-trip; a unary op of another result type prints its arrow.

// CHECK-LABEL: func.func @layer
// CHECK:      %c = loom.matmul %a, %b : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xf32>
// CHECK-NEXT: %h = loom.cast %c : tensor<4x5xf32> -> tensor<4x5xbf16>
// CHECK-NEXT: %acc = loom.matmul %x, %w : (tensor<4x3xui8>, tensor<3x5xi8>) -> tensor<4x5xi32>
// CHECK-NEXT: %sum = loom.add %acc, %bias : (tensor<4x5xi32>, tensor<5xi32>) -> tensor<4x5xi32>
// CHECK-NEXT: %y = loom.dequantize %sum, %s, %z {axis = 1 : i64} : (tensor<4x5xi32>, tensor<5xf32>, tensor<5xi32>) -> tensor<4x5xf32>
// CHECK-NEXT: %r = loom.relu %y : tensor<4x5xf32>
// CHECK-NEXT: %q = loom.quantize %r, %so, %zo : (tensor<4x5xf32>, tensor<f32>, tensor<i32>) -> tensor<4x5xui8>
// CHECK-NEXT: %f = loom.cast %sum : tensor<4x5xi32> -> tensor<4x5xf32>
// CHECK-NEXT: %conv = loom.conv2d %cx, %cw {layout = "nhwc"} : (tensor<1x6x6x3xi8>, tensor<3x3x3x4xi8>) -> tensor<1x4x4x4xi32>
func.func @layer(%a: tensor<4x3xbf16>, %b: tensor<3x5xbf16>, %x: tensor<4x3xui8>, %w: tensor<3x5xi8>,
                 %bias: tensor<5xi32>, %s: tensor<5xf32>, %z: tensor<5xi32>, %so: tensor<f32>, %zo: tensor<i32>,
                 %cx: tensor<1x6x6x3xi8>, %cw: tensor<3x3x3x4xi8>)
    -> (tensor<4x5xbf16>, tensor<4x5xui8>, tensor<4x5xf32>, tensor<1x4x4x4xi32>) {
  %c = loom.matmul %a, %b : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xf32>
  %h = loom.cast %c : tensor<4x5xf32> -> tensor<4x5xbf16>
  %acc = loom.matmul %x, %w : (tensor<4x3xui8>, tensor<3x5xi8>) -> tensor<4x5xi32>
  %sum = loom.add %acc, %bias : (tensor<4x5xi32>, tensor<5xi32>) -> tensor<4x5xi32>
  %y = loom.dequantize %sum, %s, %z {axis = 1 : i64} : (tensor<4x5xi32>, tensor<5xf32>, tensor<5xi32>) -> tensor<4x5xf32>
  %r = loom.relu %y : tensor<4x5xf32>
  %q = loom.quantize %r, %so, %zo : (tensor<4x5xf32>, tensor<f32>, tensor<i32>) -> tensor<4x5xui8>
  %f = loom.cast %sum : tensor<4x5xi32> -> tensor<4x5xf32>
  %conv = loom.conv2d %cx, %cw {layout = "nhwc"} : (tensor<1x6x6x3xi8>, tensor<3x3x3x4xi8>) -> tensor<1x4x4x4xi32>
  func.return %h, %q, %f, %conv : tensor<4x5xbf16>, tensor<4x5xui8>, tensor<4x5xf32>, tensor<1x4x4x4xi32>
}

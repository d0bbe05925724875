// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s
// The element types of the low-precision ops: each refusal names the operand and says
// what it must be.

func.func @bf16_into_bf16(%a: tensor<4x3xbf16>, %b: tensor<3x5xbf16>) -> tensor<4x5xbf16> {
  // CHECK: low-precision-invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op result has element type bf16, expected f32: bf16 products are summed in f32
  %c = loom.matmul %a, %b : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
  func.return %c : tensor<4x5xbf16>
}

// -----

func.func @i8_into_f32(%a: tensor<4x3xi8>, %b: tensor<3x5xi8>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.matmul' op result has element type f32, expected i32: i8 products are summed in i32
  %c = loom.matmul %a, %b : (tensor<4x3xi8>, tensor<3x5xi8>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @mixed(%a: tensor<4x3xbf16>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.matmul' op operand #1 (rhs) has element type f32, expected bf16 (the lhs's): only i8 and ui8 mix
  %c = loom.matmul %a, %b : (tensor<4x3xbf16>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @i8_with_bf16(%x: tensor<1x3x6x6xi8>, %w: tensor<4x3x3x3xbf16>) -> tensor<1x4x4x4xi32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has element type bf16, expected i8 (the input's): only i8 and ui8 mix
  %y = loom.conv2d %x, %w : (tensor<1x3x6x6xi8>, tensor<4x3x3x3xbf16>) -> tensor<1x4x4x4xi32>
  func.return %y : tensor<1x4x4x4xi32>
}

// -----

func.func @i32_inputs(%a: tensor<4x3xi32>, %b: tensor<3x5xi32>) -> tensor<4x5xi32> {
  // CHECK: error: 'loom.matmul' op operand #0 (lhs) has element type i32: loom.matmul takes f32, f64, bf16, i8 and ui8
  %c = loom.matmul %a, %b : (tensor<4x3xi32>, tensor<3x5xi32>) -> tensor<4x5xi32>
  func.return %c : tensor<4x5xi32>
}

// -----

func.func @bf16_epilogue(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  // CHECK: error: 'loom.relu' op operand #0 (input) has element type bf16: loom.relu computes in f32, f64 and i32
  %r = loom.relu %a : tensor<4xbf16>
  func.return %r : tensor<4xbf16>
}

// -----

func.func @cast_pair(%a: tensor<4xf32>) -> tensor<4xi32> {
  // CHECK: error: 'loom.cast' op cannot cast f32 to i32: loom.cast converts f32 -> bf16, bf16 -> f32, i32 -> f32
  %r = loom.cast %a : tensor<4xf32> -> tensor<4xi32>
  func.return %r : tensor<4xi32>
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) -> tensor<5xbf16> {
  // CHECK: error: 'loom.cast' op result has shape 5, expected 4 from the operand shapes (4)
  %r = loom.cast %a : tensor<4xf32> -> tensor<5xbf16>
  func.return %r : tensor<5xbf16>
}

// -----

func.func @quantize_to_i32(%x: tensor<4x5xf32>, %s: tensor<f32>, %z: tensor<i32>) -> tensor<4x5xi32> {
  // CHECK: error: 'loom.quantize' op result has element type i32, expected i8 or ui8
  %q = loom.quantize %x, %s, %z : (tensor<4x5xf32>, tensor<f32>, tensor<i32>) -> tensor<4x5xi32>
  func.return %q : tensor<4x5xi32>
}

// -----

func.func @quantize_bf16(%x: tensor<4x5xbf16>, %s: tensor<f32>, %z: tensor<i32>) -> tensor<4x5xi8> {
  // CHECK: error: 'loom.quantize' op operand #0 (input) has element type bf16, expected f32
  %q = loom.quantize %x, %s, %z : (tensor<4x5xbf16>, tensor<f32>, tensor<i32>) -> tensor<4x5xi8>
  func.return %q : tensor<4x5xi8>
}

// -----

func.func @zero_point_type(%x: tensor<4x5xf32>, %s: tensor<f32>, %z: tensor<i8>) -> tensor<4x5xi8> {
  // CHECK: error: 'loom.quantize' op operand #2 (zero_point) has element type i8, expected i32
  %q = loom.quantize %x, %s, %z : (tensor<4x5xf32>, tensor<f32>, tensor<i8>) -> tensor<4x5xi8>
  func.return %q : tensor<4x5xi8>
}

// -----

func.func @per_tensor_shape(%x: tensor<4x5xf32>, %s: tensor<5xf32>, %z: tensor<i32>) -> tensor<4x5xi8> {
  // CHECK: error: 'loom.quantize' op operand #1 (scale) has shape 5, expected scalar (per tensor: a 0-d tensor)
  %q = loom.quantize %x, %s, %z : (tensor<4x5xf32>, tensor<5xf32>, tensor<i32>) -> tensor<4x5xi8>
  func.return %q : tensor<4x5xi8>
}

// -----

func.func @per_channel_shape(%q: tensor<4x5xi8>, %s: tensor<4xf32>, %z: tensor<4xi32>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.dequantize' op operand #1 (scale) has shape 4, expected 5 (per channel: the input's extent along axis 1)
  %y = loom.dequantize %q, %s, %z {axis = 1 : i64} : (tensor<4x5xi8>, tensor<4xf32>, tensor<4xi32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}

// -----

func.func @axis_range(%q: tensor<4x5xi8>, %s: tensor<5xf32>, %z: tensor<5xi32>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.dequantize' op attribute 'axis' must be an integer from 0 to 1 (the input has rank 2), got 2 : i64
  %y = loom.dequantize %q, %s, %z {axis = 2 : i64} : (tensor<4x5xi8>, tensor<5xf32>, tensor<5xi32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}

// -----

func.func @dequantize_float(%q: tensor<4x5xf32>, %s: tensor<f32>, %z: tensor<i32>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.dequantize' op operand #0 (input) has element type f32, expected i8, ui8 or i32
  %y = loom.dequantize %q, %s, %z : (tensor<4x5xf32>, tensor<f32>, tensor<i32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}

// -----

func.func @dequantize_to_bf16(%q: tensor<4x5xi8>, %s: tensor<f32>, %z: tensor<i32>) -> tensor<4x5xbf16> {
  // CHECK: error: 'loom.dequantize' op result has element type bf16, expected f32
  %y = loom.dequantize %q, %s, %z : (tensor<4x5xi8>, tensor<f32>, tensor<i32>) -> tensor<4x5xbf16>
  func.return %y : tensor<4x5xbf16>
}

// -----

func.func @operands(%x: tensor<4x5xf32>, %s: tensor<f32>) -> tensor<4x5xi8> {
  // CHECK: error: 'loom.quantize' op expects 3 input operands, got 2
  %q = loom.quantize %x, %s : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xi8>
  func.return %q : tensor<4x5xi8>
}

// -----

func.func @panels_bf16(%x: tensor<1x8x8x3xbf16>, %w: tensor<2x3x3x3x4xbf16>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) in panels has element type bf16: a filter in panels of rank 5 is f32 or f64 (a bf16 one comes in groups, rank 6)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xbf16>, tensor<2x3x3x3x4xbf16>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}


// -----

func.func @groups_f32(%x: tensor<1x8x8x4xf32>, %w: tensor<2x3x3x2x4x2xf32>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) in panels of groups (rank 6) has element type f32: a filter in groups is bf16, i8 or ui8
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x4xf32>, tensor<2x3x3x2x4x2xf32>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}

// -----

func.func @groups_size(%x: tensor<1x8x8x4xui8>, %w: tensor<2x3x3x2x4x2xi8>) -> tensor<1x6x6x8xi32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) in panels of groups of 2 (its last dimension): i8 filters are in groups of 4
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x4xui8>, tensor<2x3x3x2x4x2xi8>) -> tensor<1x6x6x8xi32>
  func.return %y : tensor<1x6x6x8xi32>
}

// -----

func.func @groups_channels(%x: tensor<1x8x8x6xbf16>, %w: tensor<2x3x3x2x4x2xbf16>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 4 input channels (shape 2x3x3x2x4x2, in panels of groups), expected C = 6 from input shape 1x8x8x6 (NHWC)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x6xbf16>, tensor<2x3x3x2x4x2xbf16>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}

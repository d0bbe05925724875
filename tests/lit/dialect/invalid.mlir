// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s
// Each verifier names the offending operand and the expected vs actual shape or type.

func.func @k_mismatch(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op operand #1 (rhs) has shape 4x5: its dimension 0 is 4, expected K = 3 (lhs shape 4x3)
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @wrong_result(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x6xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op result has shape 4x6, expected 4x5 from the operand shapes (4x3, 3x5)
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x6xf32>
  func.return %c : tensor<4x6xf32>
}

// -----

func.func @elt_mismatch(%a: tensor<4x3xf32>, %b: tensor<3x5xf64>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.matmul' op operand #1 (rhs) has element type f64, expected f32 (the result's)
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf64>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @batch(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) -> tensor<2x4x5xf32> {
  // CHECK: error: 'loom.matmul' op operand #1 (rhs) has batch size 3, expected 2 (lhs batch size)
  %c = loom.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  func.return %c : tensor<2x4x5xf32>
}

// -----

func.func @channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 2 input channels (shape 4x2x3x3), expected C = 3 from input shape 1x3x8x8
  %y = loom.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_out(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op result has shape 1x4x6x6, expected 1x4x4x4 from the operand shapes (1x3x8x8, 4x3x3x3)
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @bad_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op strides must be >= 1, got [0, 1]
  %y = loom.conv2d %x, %w {strides = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @window(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) window 3x3 (dilations [1, 1]) does not fit the padded input 2x2
  %y = loom.conv2d %x, %w : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  func.return %y : tensor<1x4x1x1xf32>
}

// -----

func.func @broadcast(%a: tensor<4x5xf32>, %b: tensor<4xf32>) -> tensor<4x5xf32> {
  // CHECK: error: 'loom.add' op operand #1 (rhs) shape 4 does not broadcast with lhs shape 4x5
  %c = loom.add %a, %b : (tensor<4x5xf32>, tensor<4xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @int_type(%a: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: error: 'loom.relu' op result element type must be f32 or f64, got i32
  %r = loom.relu %a : tensor<4xi32>
  func.return %r : tensor<4xi32>
}

// -----

func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: Operation loom.softmax is not registered
  %r = loom.softmax %a : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @syntax(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:21: error: Expected ':'
  %r = loom.relu %a tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @attr(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op property 'stride' is not defined by the operation 'loom.conv2d'
  %y = loom.conv2d %x, %w {stride = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @prefetch_rank(%c: memref<8x16xf32>, %i: index) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.prefetch' op needs 2 indices for memref<8x16xf32>, got 1
  loom.prefetch %c[%i], read, locality<3>, data : memref<8x16xf32>
  func.return
}

// -----

func.func @prefetch_locality(%c: memref<8xf32>, %i: index) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:40: error: locality is 0 to 3, got 4
  loom.prefetch %c[%i], read, locality<4>, data : memref<8xf32>
  func.return
}

// -----

func.func @prefetch_kind(%c: memref<8xf32>, %i: index) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:25: error: expected 'read' or 'write', got 'load'
  loom.prefetch %c[%i], load, locality<3>, data : memref<8xf32>
  func.return
}

// -----

func.func @prefetch_cache(%c: memref<8xf32>, %i: index) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:44: error: only data prefetches ('data') are supported
  loom.prefetch %c[%i], read, locality<3>, instr : memref<8xf32>
  func.return
}

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
  // CHECK: error: 'loom.matmul' op operand #1 (rhs) has element type f64, expected f32 (the lhs's): only i8 and ui8 mix
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

func.func @groups_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op attribute 'groups' must be a positive i64 (the channel groups; 1: a dense convolution), got 0 : i64
  %y = loom.conv2d %x, %w {groups = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @groups_split(%x: tensor<1x6x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op 3 groups do not split the 4 output channels (input shape 1x6x8x8 (NCHW), filter shape 4x2x3x3 (FCHW))
  %y = loom.conv2d %x, %w {groups = 3 : i64} : (tensor<1x6x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @groups_channels(%x: tensor<1x8x8x8xf32>, %w: tensor<3x3x1x8xf32>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 1 input channels (shape 3x3x1x8, HWCF) per group, expected C/groups = 2 from input shape 1x8x8x8 (NHWC)
  %y = loom.conv2d %x, %w {layout = "nhwc", groups = 4 : i64} : (tensor<1x8x8x8xf32>, tensor<3x3x1x8xf32>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}

// -----

func.func @groups_panels(%x: tensor<1x8x8x8xf32>, %w: tensor<2x3x3x2x4xf32>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has shape 2x3x3x2x4: a grouped filter (groups = 4) comes in its plain layout, rank 4 (HWCF), not in panels
  %y = loom.conv2d %x, %w {layout = "nhwc", groups = 4 : i64} : (tensor<1x8x8x8xf32>, tensor<2x3x3x2x4xf32>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}

// -----

func.func @channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 2 input channels (shape 4x2x3x3, FCHW), expected C = 3 from input shape 1x3x8x8 (NCHW)
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
  // CHECK: error: 'loom.conv2d' op attribute 'strides' must be array<i64: a, b> with a, b >= 1, got array<i64: 0, 1>
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

func.func @clamp_no_bounds(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.clamp' op attribute 'min' is required: a finite float, as in {min = 6.0 : f64}, got none
  %r = loom.clamp %a {max = 6.0 : f64} : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @clamp_f32_bound(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.clamp' op attribute 'max' is required: a finite float, as in {max = 6.0 : f64}, got 6.000000e+00 : f32
  %r = loom.clamp %a {min = 0.0 : f64, max = 6.0 : f32} : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @clamp_infinite(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.clamp' op attribute 'max' is required: a finite float
  %r = loom.clamp %a {min = 0.0 : f64, max = 0x7FF0000000000000 : f64} : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @clamp_reversed(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.clamp' op attribute 'min' (6.0) is larger than 'max' (0.0)
  %r = loom.clamp %a {min = 6.0 : f64, max = 0.0 : f64} : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @clamp_int(%a: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.clamp' op operand #0 (input) has element type i32: loom.clamp computes in f32 and f64
  %r = loom.clamp %a {min = 0.0 : f64, max = 6.0 : f64} : tensor<4xi32>
  func.return %r : tensor<4xi32>
}

// -----

func.func @int_type(%a: tensor<4xi8>) -> tensor<4xi8> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op operand #0 (input) has element type i8: loom.relu computes in f32, f64 and i32
  %r = loom.relu %a : tensor<4xi8>
  func.return %r : tensor<4xi8>
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

// -----

// Element types loom ops do not know are refused at the op, naming the operand (they
// used to pass here and fail late: f16 in the numpy reference, f80/f128 in LLVM).
func.func @f16(%a: tensor<4x3xf16>, %b: tensor<3x5xf16>) -> tensor<4x5xf16> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op operand #0 (lhs) has element type f16: loom ops support f32, f64, bf16, i8, ui8 and i32
  %c = loom.matmul %a, %b : (tensor<4x3xf16>, tensor<3x5xf16>) -> tensor<4x5xf16>
  func.return %c : tensor<4x5xf16>
}

// -----

func.func @bf16(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.add' op operand #1 (rhs) has element type bf16: loom.add computes in f32, f64 and i32
  %c = loom.add %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// -----

func.func @f80(%a: tensor<4xf80>) -> tensor<4xf80> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op operand #0 (input) has element type f80: loom ops support f32, f64, bf16, i8, ui8 and i32
  %r = loom.relu %a : tensor<4xf80>
  func.return %r : tensor<4xf80>
}

// -----

func.func @f128_memref(%x: memref<1x1x4x4xf128>, %w: memref<1x1x3x3xf128>, %y: memref<1x1x2x2xf128>) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op operand #0 (input) has element type f128: loom ops support f32, f64, bf16, i8, ui8 and i32
  loom.conv2d ins(%x, %w : memref<1x1x4x4xf128>, memref<1x1x3x3xf128>) outs(%y : memref<1x1x2x2xf128>)
  func.return
}

// -----

func.func @f16_result(%a: tensor<4xf32>) -> tensor<4xf16> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op result has element type f16: loom ops support f32, f64, bf16, i8, ui8 and i32
  %r = loom.relu %a : (tensor<4xf32>) -> tensor<4xf16>
  func.return %r : tensor<4xf16>
}

// -----

// Every conv2d attribute error names the attribute and the form it must have.
func.func @dense_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op attribute 'padding' must be array<i64: a, b> with a, b >= 0, got dense<1> : tensor<2xi64>
  %y = loom.conv2d %x, %w {padding = dense<1> : tensor<2xi64>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @three_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op attribute 'strides' must be array<i64: a, b> with a, b >= 1, got array<i64: 1, 1, 1>
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @integer_dilations(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op attribute 'dilations' must be array<i64: a, b> with a, b >= 1, got 2 : i64
  %y = loom.conv2d %x, %w {dilations = 2 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @i32_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op attribute 'padding' must be array<i64: a, b> with a, b >= 0, got array<i32: 1, 1>
  %y = loom.conv2d %x, %w {padding = array<i32: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @negative_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op attribute 'padding' must be array<i64: a, b> with a, b >= 0, got array<i64: -1, -1>
  %y = loom.conv2d %x, %w {padding = array<i64: -1, -1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

// outs must not alias ins for matmul and conv2d: the loops read the inputs while they
// write the output (matmul's zero fill of C wiped A: all zeros).
func.func @matmul_outs_is_lhs(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op outs operand is operand #0 (lhs): loom.matmul reads its inputs while it writes the output, so the output must be a separate buffer
  loom.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%a : memref<4x4xf32>)
  func.return
}

// -----

func.func @matmul_outs_views_rhs(%a: memref<4x4xf32>, %m: memref<8x4xf32>) {
  // Two views of one buffer, even of disjoint rows, are refused: the verifier does not
  // compare the index ranges of views.
  %b = memref.subview %m[0, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1]>>
  %v = memref.subview %m[4, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: 16>>
  %c = "memref.cast"(%v) : (memref<4x4xf32, strided<[4, 1], offset: 16>>) -> memref<4x4xf32, strided<[4, 1], offset: ?>>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op outs operand views the same buffer as operand #1 (rhs): loom.matmul reads its inputs while it writes the output, so the output must be a separate buffer
  loom.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32, strided<[4, 1]>>) outs(%c : memref<4x4xf32, strided<[4, 1], offset: ?>>)
  func.return
}

// -----

func.func @conv_outs_reshapes_input(%x: memref<1x1x2x8xf32>, %w: memref<1x1x1x1xf32>) {
  %y = memref.collapse_shape %x [[0], [1], [2, 3]] : memref<1x1x2x8xf32> into memref<1x1x16xf32>
  %o = memref.expand_shape %y [[0], [1], [2, 3]] output_shape [1, 1, 2, 8] : memref<1x1x16xf32> into memref<1x1x2x8xf32>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.conv2d' op outs operand views the same buffer as operand #0 (input): loom.conv2d reads its inputs
  loom.conv2d ins(%x, %w : memref<1x1x2x8xf32>, memref<1x1x1x1xf32>) outs(%o : memref<1x1x2x8xf32>)
  func.return
}

// -----

// Elementwise ops may work in place (ops.mlir), but only over an input with the output's
// shape and layout: writing over a broadcast input would change elements still to be read.
func.func @add_over_broadcast(%a: memref<4x4xf32>, %row: memref<16xf32>) {
  %o = memref.reinterpret_cast %row to offset: [0], sizes: [4, 4], strides: [4, 1] : memref<16xf32> to memref<4x4xf32, strided<[4, 1]>>
  %r = memref.subview %row[0] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1]>>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.add' op outs operand views the same buffer as operand #1 (rhs) with another shape or layout (memref<4xf32, strided<[1]>> vs memref<4x4xf32, strided<[4, 1]>>): in place, the input must have the output's shape and layout
  loom.add ins(%a, %r : memref<4x4xf32>, memref<4xf32, strided<[1]>>) outs(%o : memref<4x4xf32, strided<[4, 1]>>)
  func.return
}

// -----

func.func @relu_shifted_view(%m: memref<8xf32>) {
  %lo = memref.subview %m[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %hi = memref.subview %m[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op outs operand views the same buffer as operand #0 (input) with another shape or layout
  loom.relu ins(%lo : memref<4xf32, strided<[1]>>) outs(%hi : memref<4xf32, strided<[1], offset: 2>>)
  func.return
}

// -----

// A buffer of unknown origin (arith.select of two, an scf.if's or a call's result) may be
// any buffer: it may be an input's, here %a when %c holds.
func.func @matmul_outs_selected(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %d: memref<4x4xf32>, %c: i1) {
  %m = arith.select %c, %a, %d : memref<4x4xf32>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op outs operand may view the same buffer as operand #0 (lhs): the outs operand is the result of 'arith.select', which may be any buffer, and loom.matmul needs its output to be a separate buffer
  loom.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%m : memref<4x4xf32>)
  func.return
}

// -----

// In place, only the input itself is known to be the output's elements.
func.func @relu_over_selected(%a: memref<4xf32>, %d: memref<4xf32>, %c: i1) {
  %m = arith.select %c, %a, %d : memref<4xf32>
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op outs operand may view the same buffer as operand #0 (input): it is the result of 'arith.select', which may be any buffer, and loom.relu needs its output to be a separate buffer or the input itself
  loom.relu ins(%m : memref<4xf32>) outs(%a : memref<4xf32>)
  func.return
}

// -----

// A symbol defined twice is reported at the second definition.
func.func @twice() {
  func.return
}
// CHECK: invalid.mlir:[[# @LINE + 1]]:1: error: redefinition of symbol "twice" (first defined at {{.*}}invalid.mlir:[[# @LINE - 3]]:1)
func.func @twice() {
  func.return
}

// -----

// Operand and result kinds are checked by the verifier, which names them.
func.func @scalar_operand(%a: f32, %b: f32) -> tensor<4x4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.add' op operand #0 (lhs) must be a tensor, got f32
  %c = "loom.add"(%a, %b) <{operandSegmentSizes = array<i32: 2, 0>}> : (f32, f32) -> tensor<4x4xf32>
  func.return %c : tensor<4x4xf32>
}

// -----

func.func @vector_result(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op result must be a tensor, got vector<4xf32>
  %c = "loom.relu"(%a) <{operandSegmentSizes = array<i32: 1, 0>}> : (tensor<4x4xf32>) -> vector<4xf32>
  func.return %a : tensor<4x4xf32>
}

// -----

func.func @tensor_outs(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' op outs operand must be a memref, got tensor<4x4xf32>
  "loom.matmul"(%a, %b, %c) <{operandSegmentSizes = array<i32: 2, 1>}> : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  func.return
}

// -----

// A block label defined twice crashed xDSL's parser (KeyError): a located error instead.
func.func @label_twice(%p: i1) {
  cf.cond_br %p, ^bb1, ^exit
^bb1:
  cf.br ^exit
^exit:
  func.return
// CHECK: invalid.mlir:[[# @LINE + 1]]:6: error: invalid syntax (xDSL's parser failed here with KeyError: 'exit')
^exit:
  func.return
}

// -----

// xDSL's verifier of llvm.trunc asserts that its operands are integers: a located error.
func.func @trunc_float(%x: f32) -> f16 {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'llvm.trunc' op is malformed: its verifier failed with AssertionError
  %y = llvm.trunc %x : f32 to f16
  func.return %y : f16
}

// -----

// Affine constants are 64-bit, as in MLIR (a multiplier of 2^64 failed inside the lowering).
func.func @affine_constant(%m: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    // CHECK: invalid.mlir:[[# @LINE + 1]]:5: error: 'affine.load' op has the constant 18446744073709551616 in affine_map<{{.*}}>: affine constants are 64-bit integers
    %v = affine.load %m[%i * 18446744073709551616] : memref<8xf32>
  }
  func.return
}

// -----

func.func @index_constant(%m: memref<8xf32>) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'affine.for' op has the index constant 18446744073709551616: index values are 64-bit integers
  affine.for %i = 0 to 8 step 18446744073709551616 {
    %v = affine.load %m[%i] : memref<8xf32>
  }
  func.return
}

// -----

// f80 and f128 are refused wherever they appear (xDSL can neither print nor lower their
// constants; the fuzzer reached a bare NotImplementedError through loop-level input).
func.func @f80_argument(%a: memref<8xf80>) {
  func.return
}
// CHECK: invalid.mlir:[[# @LINE - 3]]:1: error: 'func.func' op has a value of type memref<8xf80>: f80 is not supported (Loom's floats are f32, f64, bf16 and f16)

// -----

func.func @f128_constant() {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'arith.constant' op has a value of type f128: f128 is not supported
  %zero = arith.constant 0.000000e+00 : f128
  func.return
}

// -----

// A loop's step must be positive: xDSL parses `step 0`, which divided by zero in every
// schedule pass (the fuzzer's find).
func.func @affine_step_zero(%a: memref<8xf32>, %x: f32) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'affine.for' op has the step 0: a loop's step must be positive
  affine.for %i = 0 to 8 step 0 {
    affine.store %x, %a[%i] : memref<8xf32>
  }
  func.return
}

// -----

// An scf.for with a constant step of 0 would never end.
func.func @scf_step_zero(%a: memref<8xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'scf.for' op has the step 0: a loop's step must be positive
  scf.for %i = %c0 to %c8 step %c0 {
    memref.store %x, %a[%i] : memref<8xf32>
  }
  func.return
}

// -----

// Nor may an affine.parallel's step be 0 (the lowered scf.parallel would never end).
func.func @parallel_step_zero(%a: memref<8xf32>, %x: f32) {
  // CHECK: invalid.mlir:[[# @LINE + 1]]:3: error: 'affine.parallel' op has the step 0: a loop's step must be positive
  "affine.parallel"() <{lowerBoundsMap = affine_map<() -> (0)>, lowerBoundsGroups = dense<1> : vector<1xi32>, upperBoundsMap = affine_map<() -> (8)>, upperBoundsGroups = dense<1> : vector<1xi32>, steps = [0 : i64], reductions = []}> ({
  ^bb0(%i: index):
    affine.store %x, %a[%i] : memref<8xf32>
    affine.yield
  }) : () -> ()
  func.return
}

// -----

func.func @nhwc_channels(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x2x4xf32>) -> tensor<1x6x6x4xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 2 input channels (shape 3x3x2x4, HWCF), expected C = 3 from input shape 1x8x8x3 (NHWC)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<3x3x2x4xf32>) -> tensor<1x6x6x4xf32>
  func.return %y : tensor<1x6x6x4xf32>
}

// -----

func.func @nhwc_result(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op result has shape 1x4x6x6, expected 1x6x6x4 from the operand shapes (1x8x8x3, 3x3x3x4)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @layout(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op attribute 'layout' must be "nchw" (NCHW input, FCHW filter) or "nhwc" (NHWC input, HWCF filter), got "chwn"
  %y = loom.conv2d %x, %w {layout = "chwn"} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @pool_no_window(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // CHECK: error: 'loom.max_pool2d' op attribute 'window' is required: array<i64: a, b> with a, b >= 1
  %y = loom.max_pool2d %x : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// -----

func.func @pool_padding(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x5x5xf32> {
  // CHECK: error: 'loom.max_pool2d' op padding [2, 2] is more than half the window [3, 3]: a window would hold only the padded border
  %y = loom.max_pool2d %x {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 2, 2>} : tensor<1x3x8x8xf32> -> tensor<1x3x5x5xf32>
  func.return %y : tensor<1x3x5x5xf32>
}

// -----

func.func @pool_shape(%x: tensor<1x8x8x3xf32>) -> tensor<1x4x4x4xf32> {
  // CHECK: error: 'loom.max_pool2d' op result has shape 1x4x4x4, expected 1x4x4x3 from the operand shapes (1x8x8x3)
  %y = loom.max_pool2d %x {window = array<i64: 2, 2>, layout = "nhwc"} : tensor<1x8x8x3xf32> -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

func.func @pool_rank(%x: tensor<3x8x8xf32>) -> tensor<3x4x4xf32> {
  // CHECK: error: 'loom.max_pool2d' op operand #0 (input) must have rank 4 (NCHW), got shape 3x8x8
  %y = loom.max_pool2d %x {window = array<i64: 2, 2>} : tensor<3x8x8xf32> -> tensor<3x4x4xf32>
  func.return %y : tensor<3x4x4xf32>
}

// -----

func.func @mean_axes(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // CHECK: error: 'loom.mean' op attribute 'axes' must be array<i64: ...> of distinct axes of the input (rank 2), got array<i64: 2>
  %m = loom.mean %x {axes = array<i64: 2>} : tensor<2x3xf32> -> tensor<2x1xf32>
  func.return %m : tensor<2x1xf32>
}

// -----

func.func @mean_int(%x: tensor<2x3xi32>) -> tensor<2x1xi32> {
  // CHECK: error: 'loom.mean' op operand #0 (input) has element type i32: loom.mean computes in f32 and f64
  %m = loom.mean %x {axes = array<i64: 1>} : tensor<2x3xi32> -> tensor<2x1xi32>
  func.return %m : tensor<2x1xi32>
}

// -----

func.func @avg_int(%x: tensor<1x3x8x8xi32>) -> tensor<1x3x4x4xi32> {
  // CHECK: error: 'loom.avg_pool2d' op operand #0 (input) has element type i32: loom.avg_pool2d computes in f32 and f64
  %y = loom.avg_pool2d %x {window = array<i64: 2, 2>} : tensor<1x3x8x8xi32> -> tensor<1x3x4x4xi32>
  func.return %y : tensor<1x3x4x4xi32>
}

// -----

func.func @avg_counts(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // CHECK: error: 'loom.avg_pool2d' op attribute 'count_include_pad' must be true or false, got 1 : i64
  %y = loom.avg_pool2d %x {window = array<i64: 2, 2>, count_include_pad = 1} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// -----

func.func @winograd_tile(%w: tensor<3x3x8x16xf32>) -> tensor<25x8x16xf32> {
  // CHECK: error: 'loom.winograd_filter' op attribute 'tile' must be the output tile's side, one of 2, 4 (F(m x m, 3 x 3)), got 3 : i64
  %u = loom.winograd_filter %w {tile = 3} : tensor<3x3x8x16xf32> -> tensor<25x8x16xf32>
  func.return %u : tensor<25x8x16xf32>
}

// -----

func.func @winograd_window(%w: tensor<5x5x8x16xf32>) -> tensor<16x8x16xf32> {
  // CHECK: error: 'loom.winograd_filter' op operand #0 (filter) has shape 5x5x8x16: a 5x5 window, expected 3x3 (F(m x m, 3 x 3))
  %u = loom.winograd_filter %w {tile = 2} : tensor<5x5x8x16xf32> -> tensor<16x8x16xf32>
  func.return %u : tensor<16x8x16xf32>
}

// -----

func.func @winograd_tiles(%x: tensor<1x9x9x8xf32>) -> tensor<16x16x8xf32> {
  // CHECK: error: 'loom.winograd_input' op result has shape 16x16x8, expected 16x25x8 from the operand shapes (1x9x9x8)
  %v = loom.winograd_input %x {tile = 2, padding = array<i64: 1, 1>} : tensor<1x9x9x8xf32> -> tensor<16x16x8xf32>
  func.return %v : tensor<16x16x8xf32>
}

// -----

func.func @winograd_products(%m: tensor<16x16x8xf32>) -> tensor<1x9x9x8xf32> {
  // CHECK: error: 'loom.winograd_output' op operand #0 (products) has shape 16x16x8, expected 16 products x 25 tiles (of 2x2, F(2x2, 3x3)) for an output of 1x9x9
  %y = loom.winograd_output %m {tile = 2} : tensor<16x16x8xf32> -> tensor<1x9x9x8xf32>
  func.return %y : tensor<1x9x9x8xf32>
}

// -----

func.func @winograd_int(%w: tensor<3x3x8x16xi32>) -> tensor<16x8x16xi32> {
  // CHECK: error: 'loom.winograd_filter' op operand #0 (filter) has element type i32: loom.winograd_filter computes in f32 and f64
  %u = loom.winograd_filter %w {tile = 2} : tensor<3x3x8x16xi32> -> tensor<16x8x16xi32>
  func.return %u : tensor<16x8x16xi32>
}

// -----

func.func @panels_nchw(%x: tensor<1x3x8x8xf32>, %w: tensor<2x4x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) must have rank 4 (FCHW), got shape 2x4x3x3x3
  %y = loom.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<2x4x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  func.return %y : tensor<1x8x6x6xf32>
}

// -----

func.func @panels_rank(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3xf32>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) must have rank 4 (HWCF) or 5 (P x R x S x C x NR, in panels) or 6 (P x R x S x C/G x NR x G, in panels of groups), got shape 3x3x3
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<3x3x3xf32>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}

// -----

func.func @panels_out(%x: tensor<1x8x8x3xf32>, %w: tensor<2x3x3x3x4xf32>) -> tensor<1x6x6x4xf32> {
  // CHECK: error: 'loom.conv2d' op result has shape 1x6x6x4, expected 1x6x6x8 from the operand shapes (1x8x8x3, 2x3x3x3x4)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<2x3x3x3x4xf32>) -> tensor<1x6x6x4xf32>
  func.return %y : tensor<1x6x6x4xf32>
}

// -----

func.func @panels_channels(%x: tensor<1x8x8x3xf32>, %w: tensor<2x3x3x2x4xf32>) -> tensor<1x6x6x8xf32> {
  // CHECK: error: 'loom.conv2d' op operand #1 (filter) has 2 input channels (shape 2x3x3x2x4, in panels), expected C = 3 from input shape 1x8x8x3 (NHWC)
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<2x3x3x2x4xf32>) -> tensor<1x6x6x8xf32>
  func.return %y : tensor<1x6x6x8xf32>
}


// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s
// The view ops' verifiers name what is wrong: the attribute, the dimension, the shapes.

func.func @perm_not_a_permutation(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: views-invalid.mlir:[[# @LINE + 1]]:3: error: 'loom.transpose' op attribute 'perm' must be a permutation of 0..1 (each dimension of the input once), got [0, 0]
  %t = loom.transpose %a {perm = array<i64: 0, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @perm_out_of_range(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: error: 'loom.transpose' op attribute 'perm' must be a permutation of 0..1 (each dimension of the input once), got [2, 0]
  %t = loom.transpose %a {perm = array<i64: 2, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @perm_wrong_length(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: error: 'loom.transpose' op attribute 'perm' must be array<i64: ...> with 2 values (a permutation of the input's dimensions): the input has rank 2, got 3 values [1, 0, 2]
  %t = loom.transpose %a {perm = array<i64: 1, 0, 2>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @perm_missing(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: error: 'loom.transpose' op attribute 'perm' must be array<i64: ...> with 2 values (a permutation of the input's dimensions), and it is missing
  %t = loom.transpose %a : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @perm_not_an_array(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: error: 'loom.transpose' op attribute 'perm' must be array<i64: ...> with 2 values (a permutation of the input's dimensions), got [1 : i64, 0 : i64]
  %t = loom.transpose %a {perm = [1, 0]} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @transpose_result(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: error: 'loom.transpose' op result has shape 4x8, expected 8x4 (the input shape 4x8 permuted by [1, 0])
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>
}

// -----

func.func @slice_past_the_end(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // CHECK: error: 'loom.slice' op dimension 1: the slice reads elements 6 to 8 (offset 6, size 3, stride 1), but the input's dimension 1 has 8: its last element 8 is out of bounds
  %s = loom.slice %a {offsets = array<i64: 0, 6>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// -----

func.func @slice_stride_past_the_end(%a: tensor<4x8xf32>) -> tensor<3x3xf32> {
  // CHECK: error: 'loom.slice' op dimension 0: the slice reads elements 0 to 4 (offset 0, size 3, stride 2), but the input's dimension 0 has 4: its last element 4 is out of bounds
  %s = loom.slice %a {offsets = array<i64: 0, 0>, sizes = array<i64: 3, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<3x3xf32>
  func.return %s : tensor<3x3xf32>
}

// -----

func.func @slice_negative_offset(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // CHECK: error: 'loom.slice' op dimension 0: the slice reads elements -1 to 1 (offset -1, size 2, stride 2), but the input's dimension 0 has 4: its first element -1 is out of bounds
  %s = loom.slice %a {offsets = array<i64: -1, 0>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// -----

func.func @slice_reversed_past_the_start(%a: tensor<4x8xf32>) -> tensor<4x3xf32> {
  // CHECK: error: 'loom.slice' op dimension 1: the slice reads elements 5 to -1 (offset 5, size 3, stride -3), but the input's dimension 1 has 8: its last element -1 is out of bounds
  %s = loom.slice %a {offsets = array<i64: 0, 5>, sizes = array<i64: 4, 3>, strides = array<i64: 1, -3>} : tensor<4x8xf32> -> tensor<4x3xf32>
  func.return %s : tensor<4x3xf32>
}

// -----

func.func @slice_zero_stride(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // CHECK: error: 'loom.slice' op attribute 'strides' must be nonzero, got 0 in dimension 0 (a stride of 0 repeats an element: that is loom.broadcast_to)
  %s = loom.slice %a {offsets = array<i64: 0, 0>, sizes = array<i64: 2, 3>, strides = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// -----

func.func @slice_negative_size(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // CHECK: error: 'loom.slice' op attribute 'sizes' must be >= 0, got -2 in dimension 0
  %s = loom.slice %a {offsets = array<i64: 0, 0>, sizes = array<i64: -2, 3>, strides = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// -----

func.func @slice_empty_offset(%a: tensor<4x8xf32>) -> tensor<0x3xf32> {
  // CHECK: error: 'loom.slice' op dimension 0: offset 5 is outside the input's dimension of 4 (an empty slice starts at 0 to n)
  %s = loom.slice %a {offsets = array<i64: 5, 0>, sizes = array<i64: 0, 3>, strides = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<0x3xf32>
  func.return %s : tensor<0x3xf32>
}

// -----

func.func @slice_result(%a: tensor<4x8xf32>) -> tensor<2x4xf32> {
  // CHECK: error: 'loom.slice' op result has shape 2x4, expected 2x3 (attribute 'sizes')
  %s = loom.slice %a {offsets = array<i64: 0, 0>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<2x4xf32>
  func.return %s : tensor<2x4xf32>
}

// -----

func.func @slice_missing_strides(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  // CHECK: error: 'loom.slice' op attribute 'strides' must be array<i64: ...> with 2 values (the step between elements read, per dimension), and it is missing
  %s = loom.slice %a {offsets = array<i64: 0, 0>, sizes = array<i64: 2, 3>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// -----

func.func @broadcast_not_one(%a: tensor<4xf32>) -> tensor<4x8xf32> {
  // CHECK: error: 'loom.broadcast_to' op cannot broadcast input shape 4 to 4x8: input dimension 0 has size 4, expected 1 (stretched) or 8 (result dimension 1)
  %b = loom.broadcast_to %a : tensor<4xf32> -> tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}

// -----

func.func @broadcast_drops_rank(%a: tensor<2x4xf32>) -> tensor<4xf32> {
  // CHECK: error: 'loom.broadcast_to' op result has rank 1, less than the input's 2 (shape 2x4): broadcasting only adds leading dimensions
  %b = loom.broadcast_to %a : tensor<2x4xf32> -> tensor<4xf32>
  func.return %b : tensor<4xf32>
}

// -----

func.func @reshape_count(%a: tensor<4x8xf32>) -> tensor<5x6xf32> {
  // CHECK: error: 'loom.reshape' op result shape 5x6 has 30 elements, the input (shape 4x8) has 32: a reshape keeps the element count
  %r = loom.reshape %a : tensor<4x8xf32> -> tensor<5x6xf32>
  func.return %r : tensor<5x6xf32>
}

// -----

func.func @contiguous_shape(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: error: 'loom.contiguous' op result has shape 8x4, expected 4x8 (the input's: a contiguous copy keeps the shape)
  %c = loom.contiguous %a : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %c : tensor<8x4xf32>
}

// -----

func.func @element_type(%a: tensor<4x8xf32>) -> tensor<8x4xf64> {
  // CHECK: error: 'loom.transpose' op result has element type f64, expected f32 (the input's): view ops keep the element type
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf64>
  func.return %t : tensor<8x4xf64>
}

// -----

func.func @unsupported_element(%a: tensor<4x8xi16>) -> tensor<8x4xi16> {
  // CHECK: error: 'loom.transpose' op operand #0 (input) has element type i16: loom ops support f32, f64, bf16, i8, ui8 and i32
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xi16> -> tensor<8x4xi16>
  func.return %t : tensor<8x4xi16>
}

// -----

func.func @on_memref(%a: memref<4x8xf32>) {
  // CHECK: error: 'loom.reshape' op operand #0 (input) must be a tensor, got memref<4x8xf32> (loom.reshape takes tensors; loom-bufferize makes it a view of the operand's buffer)
  %r = loom.reshape %a : memref<4x8xf32> -> memref<2x16xf32>
  func.return
}

// -----

func.func @dynamic(%a: tensor<?x8xf32>) -> tensor<8x?xf32> {
  // CHECK: error: 'loom.transpose' op operand #0 (input) must have a static shape, got tensor<?x8xf32>
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<?x8xf32> -> tensor<8x?xf32>
  func.return %t : tensor<8x?xf32>
}

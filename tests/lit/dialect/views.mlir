// RUN: loom-opt %s | loom-opt | filecheck %s
// The view ops' textual forms round-trip through the parser and printer.

// CHECK-LABEL: func.func @transpose
// CHECK: %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: %u = loom.transpose %b {perm = array<i64: 2, 0, 3, 1>} : tensor<2x3x5x7xf64> -> tensor<5x2x7x3xf64>
func.func @transpose(%a: tensor<4x8xf32>, %b: tensor<2x3x5x7xf64>) -> (tensor<8x4xf32>, tensor<5x2x7x3xf64>) {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %u = loom.transpose %b {perm = array<i64: 2, 0, 3, 1>} : tensor<2x3x5x7xf64> -> tensor<5x2x7x3xf64>
  func.return %t, %u : tensor<8x4xf32>, tensor<5x2x7x3xf64>
}

// A rank-0 tensor has the empty permutation.
// CHECK-LABEL: func.func @transpose_scalar
// CHECK: loom.transpose %a {perm = array<i64>} : tensor<f32> -> tensor<f32>
func.func @transpose_scalar(%a: tensor<f32>) -> tensor<f32> {
  %t = loom.transpose %a {perm = array<i64>} : tensor<f32> -> tensor<f32>
  func.return %t : tensor<f32>
}

// CHECK-LABEL: func.func @slice
// CHECK: %s = loom.slice %a {offsets = array<i64: 0, 1>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
func.func @slice(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  %s = loom.slice %a {offsets = array<i64: 0, 1>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}

// Negative strides walk backwards from the offset (x[::-1] is offset n-1, stride -1);
// an empty slice may start at the end.
// CHECK-LABEL: func.func @slice_reversed
// CHECK: loom.slice %a {offsets = array<i64: 3, 7>, sizes = array<i64: 4, 3>, strides = array<i64: -1, -3>} : tensor<4x8xf32> -> tensor<4x3xf32>
// CHECK: loom.slice %a {offsets = array<i64: 4, 0>, sizes = array<i64: 0, 8>, strides = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<0x8xf32>
func.func @slice_reversed(%a: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<0x8xf32>) {
  %r = loom.slice %a {offsets = array<i64: 3, 7>, sizes = array<i64: 4, 3>, strides = array<i64: -1, -3>} : tensor<4x8xf32> -> tensor<4x3xf32>
  %e = loom.slice %a {offsets = array<i64: 4, 0>, sizes = array<i64: 0, 8>, strides = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<0x8xf32>
  func.return %r, %e : tensor<4x3xf32>, tensor<0x8xf32>
}

// Leading dimensions added, size-1 dimensions stretched (to 0 too, as numpy does).
// CHECK-LABEL: func.func @broadcast_to
// CHECK: %b = loom.broadcast_to %a : tensor<8xf32> -> tensor<4x8xf32>
// CHECK: %c = loom.broadcast_to %v : tensor<3x1xf64> -> tensor<2x3x5xf64>
// CHECK: %d = loom.broadcast_to %v : tensor<3x1xf64> -> tensor<3x0xf64>
func.func @broadcast_to(%a: tensor<8xf32>, %v: tensor<3x1xf64>) -> (tensor<4x8xf32>, tensor<2x3x5xf64>, tensor<3x0xf64>) {
  %b = loom.broadcast_to %a : tensor<8xf32> -> tensor<4x8xf32>
  %c = loom.broadcast_to %v : tensor<3x1xf64> -> tensor<2x3x5xf64>
  %d = loom.broadcast_to %v : tensor<3x1xf64> -> tensor<3x0xf64>
  func.return %b, %c, %d : tensor<4x8xf32>, tensor<2x3x5xf64>, tensor<3x0xf64>
}

// CHECK-LABEL: func.func @reshape
// CHECK: %r = loom.reshape %a : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK: %s = loom.reshape %r : tensor<2x16xf32> -> tensor<2x1x2x8x1xf32>
func.func @reshape(%a: tensor<4x8xf32>) -> tensor<2x1x2x8x1xf32> {
  %r = loom.reshape %a : tensor<4x8xf32> -> tensor<2x16xf32>
  %s = loom.reshape %r : tensor<2x16xf32> -> tensor<2x1x2x8x1xf32>
  func.return %s : tensor<2x1x2x8x1xf32>
}

// CHECK-LABEL: func.func @contiguous
// CHECK: %c = loom.contiguous %t : tensor<8x4xf32> -> tensor<8x4xf32>
func.func @contiguous(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %c = loom.contiguous %t : tensor<8x4xf32> -> tensor<8x4xf32>
  func.return %c : tensor<8x4xf32>
}

// A view feeds the compute ops like any tensor.
// CHECK-LABEL: func.func @views_into_compute
// CHECK: %t = loom.transpose %b {perm = array<i64: 1, 0>} : tensor<5x3xf32> -> tensor<3x5xf32>
// CHECK-NEXT: %c = loom.matmul %a, %t : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
func.func @views_into_compute(%a: tensor<4x3xf32>, %b: tensor<5x3xf32>) -> tensor<4x5xf32> {
  %t = loom.transpose %b {perm = array<i64: 1, 0>} : tensor<5x3xf32> -> tensor<3x5xf32>
  %c = loom.matmul %a, %t : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// The layout a tensor argument is passed with (a numpy view) is an argument attribute.
// CHECK-LABEL: func.func @buffer_layout
// CHECK-SAME: (%a: tensor<4x4xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<4x4xf32> {loom.buffer_layout = strided<[0, 1]>})
func.func @buffer_layout(%a: tensor<4x4xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<4x4xf32> {loom.buffer_layout = strided<[0, 1]>}) -> tensor<4x4xf32> {
  %s = loom.add %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}

// RUN: not loom-opt %s -p convert-loom-to-affine 2>&1 | filecheck %s
// View ops exist on tensors only: loom-bufferize makes them memref views first.

func.func @view_not_bufferized(%a: tensor<4x3xf32>) -> tensor<3x4xf32> {
  // CHECK: views-refuse.mlir:[[# @LINE + 1]]:3: error: 'loom.transpose' must be bufferized first (run loom-bufferize): it becomes a memref view
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  func.return %t : tensor<3x4xf32>
}

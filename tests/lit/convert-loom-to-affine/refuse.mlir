// RUN: not loom-opt %s -p convert-loom-to-affine 2>&1 | filecheck %s

func.func @not_bufferized(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  // CHECK: refuse.mlir:[[# @LINE + 1]]:3: error: 'loom.matmul' must be bufferized first (run loom-bufferize)
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// RUN: not loom-opt %s -p loom-bufferize --split-input-file 2>&1 | filecheck %s

func.func @foreign_tensor_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: refuse.mlir:[[# @LINE + 1]]:3: error: loom-bufferize cannot bufferize 'tensor.empty' on tensors
  %e = tensor.empty() : tensor<4xf32>
  func.return %e : tensor<4xf32>
}

// -----

// CHECK: refuse.mlir:[[# @LINE + 1]]:1: error: cannot bufferize a function declaration with tensor types
func.func private @decl(%a: tensor<4xf32>) -> tensor<4xf32>

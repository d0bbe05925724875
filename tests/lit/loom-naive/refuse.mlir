// RUN: not loom-opt %s -p loom-naive 2>&1 | filecheck %s
// Tensors of dynamic shape cannot be lowered: the refusal names the op.

func.func @dynamic(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // CHECK: refuse.mlir:[[# @LINE + 1]]:3: error: 'loom.relu' op operand #0 (input) must have a static shape, got tensor<?x4xf32>
  %r = loom.relu %a : tensor<?x4xf32>
  func.return %r : tensor<?x4xf32>
}

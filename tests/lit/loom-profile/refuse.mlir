// RUN: not loom-opt %s -p loom-profile --split-input-file 2>&1 | filecheck %s

// A function on tensors: its counters are a memref argument, so bufferize first.
// CHECK: refuse.mlir:[[# @LINE + 1]]:1: error: loom-profile: @t works on tensors: run loom-bufferize first (the counters are a memref argument)
func.func @t(%a: tensor<4xf32>) -> tensor<4xf32> {
  func.return %a : tensor<4xf32>
}

// -----

// A function profiled already (its counters argument is there): not timed twice.
// CHECK: refuse.mlir:[[# @LINE + 2]]:1: error: loom-profile: @p is profiled already (it takes its counters argument)
builtin.module attributes {loom.profile = {p = []}} {
func.func @p(%a: memref<4xf32>, %loom_profile: memref<0x2xi64>) {
  func.return
}
}

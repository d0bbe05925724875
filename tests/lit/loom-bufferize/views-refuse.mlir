// RUN: not loom-opt %s -p loom-bufferize --split-input-file 2>&1 | filecheck %s
// A `loom.buffer_layout` that is not the static strides of the array passed is refused,
// located at the function.

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: 'loom.buffer_layout' of argument #0 must be strided<[...]> with 2 static strides (one per dimension of tensor<4x4xf32>) and no offset: the element strides of the array passed; got strided<[1]>
func.func @rank(%a: tensor<4x4xf32> {loom.buffer_layout = strided<[1]>}) -> tensor<4x4xf32> {
  %r = loom.relu %a : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// -----

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: 'loom.buffer_layout' of argument #0 must be strided<[...]> with 2 static strides (one per dimension of tensor<4x4xf32>) and no offset: the element strides of the array passed; got strided<[?, 1]>
func.func @dynamic(%a: tensor<4x4xf32> {loom.buffer_layout = strided<[?, 1]>}) -> tensor<4x4xf32> {
  %r = loom.relu %a : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// -----

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: 'loom.buffer_layout' of argument #0 must be strided<[...]> with 2 static strides (one per dimension of tensor<4x4xf32>) and no offset: the element strides of the array passed; got strided<[1, 4], offset: 2>
func.func @offset(%a: tensor<4x4xf32> {loom.buffer_layout = strided<[1, 4], offset: 2>}) -> tensor<4x4xf32> {
  %r = loom.relu %a : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// -----

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: 'loom.buffer_layout' of argument #0 must be strided<[...]> with 2 static strides (one per dimension of tensor<4x4xf32>) and no offset: the element strides of the array passed; got affine_map<(d0, d1) -> (d1, d0)>
func.func @map(%a: tensor<4x4xf32> {loom.buffer_layout = affine_map<(d0, d1) -> (d1, d0)>}) -> tensor<4x4xf32> {
  %r = loom.relu %a : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

// -----

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: argument #0 has attribute 'loom.buffer_layout' but is a memref<4xf32>: only a tensor argument takes a buffer layout (a memref's layout is in its type)
func.func @on_memref(%m: memref<4xf32> {loom.buffer_layout = strided<[2]>}, %a: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.relu %a : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// CHECK: views-refuse.mlir:[[# @LINE + 1]]:1: error: loom-bufferize: 'loom.buffer_layout' on a result: results are fresh row-major arrays (only arguments take a buffer layout)
func.func @on_result(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.buffer_layout = strided<[2]>}) {
  %r = loom.relu %a : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// RUN: loom-opt %s -p loom-bufferize,convert-loom-to-affine --split-input-file | filecheck %s
// Views need nothing of their own here: the nests read them through their memref types,
// strided layouts included (the lowering to LLVM applies the strides and the offset).

// CHECK-LABEL: func.func @relu_of_transpose
// CHECK:         %[[T:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [3, 4], strides: [1, 3]
// CHECK:         affine.for %[[I:.*]] = 0 to 3 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 4 {
// CHECK-NEXT:        %{{.*}} = affine.load %[[T]][%[[I]], %[[J]]] : memref<3x4xf32, strided<[1, 3]>>
// CHECK:           } {loom.tag = "relu"}
func.func @relu_of_transpose(%a: tensor<4x3xf32>) -> tensor<3x4xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  %r = loom.relu %t : tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}

// -----

// loom.contiguous of a strided view: a copy nest that reads the view in place.
// CHECK-LABEL: func.func @contiguous_copy
// CHECK:         %[[S:.*]] = memref.reinterpret_cast %a to offset: [7], sizes: [2, 3], strides: [-4, -1]
// CHECK:         affine.for %[[I:.*]] = 0 to 2 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 3 {
// CHECK-NEXT:        %[[V:.*]] = affine.load %[[S]][%[[I]], %[[J]]] : memref<2x3xf32, strided<[-4, -1], offset: 7>>
// CHECK-NEXT:        affine.store %[[V]], %{{.*}}[%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK:         } {loom.tag = "copy"}
func.func @contiguous_copy(%a: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %s = loom.slice %a {offsets = array<i64: 1, 3>, sizes = array<i64: 2, 3>, strides = array<i64: -1, -1>} : tensor<2x4xf32> -> tensor<2x3xf32>
  %c = loom.contiguous %s : tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %c : tensor<2x3xf32>
}

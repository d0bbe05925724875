// RUN: loom-opt %s -p loom-bufferize --split-input-file --remarks 2>&1 | filecheck %s
// View ops become memref.reinterpret_cast of their operand's buffer to the strided layout
// they give it: no allocation, no copy. Only loom.contiguous (of a buffer that is not
// row-major) and a reshape that no strides express copy.

// The strides permuted.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%a: memref<4x8xf32>, %[[OUT:.*]]: memref<8x4xf32>) {
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [8, 4], strides: [1, 8] : memref<4x8xf32> to memref<8x4xf32, strided<[1, 8]>>
// CHECK-NEXT: loom.relu ins(%[[T]] : memref<8x4xf32, strided<[1, 8]>>) outs(%[[OUT]] : memref<8x4xf32>)
// CHECK-NEXT: func.return
func.func @transpose(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = loom.relu %t : tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}

// -----

// The first element read is the offset (1 * 8 + 2), the strides multiplied by the steps.
// CHECK-LABEL: func.func @slice
// CHECK-NEXT: %[[S:.*]] = memref.reinterpret_cast %a to offset: [10], sizes: [2, 3], strides: [16, 1] : memref<4x8xf32> to memref<2x3xf32, strided<[16, 1], offset: 10>>
// CHECK-NEXT: loom.relu ins(%[[S]] : memref<2x3xf32, strided<[16, 1], offset: 10>>)
// CHECK-NOT: memref.alloc
func.func @slice(%a: tensor<4x8xf32>) -> tensor<2x3xf32> {
  %s = loom.slice %a {offsets = array<i64: 1, 2>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
  %r = loom.relu %s : tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}

// -----

// Views of views compose: element (i, j) of %s is %t[7 - 3i, 1 + 2j] = %a[1 + 2j, 7 - 3i],
// at 15 - 3i + 16j. A negative stride is fine: the offset keeps every element read at or
// after the buffer's base.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [8, 6], strides: [1, 8] : memref<6x8xf32> to memref<8x6xf32, strided<[1, 8]>>
// CHECK-NEXT: %[[S:.*]] = memref.reinterpret_cast %[[T]] to offset: [15], sizes: [3, 2], strides: [-3, 16] : memref<8x6xf32, strided<[1, 8]>> to memref<3x2xf32, strided<[-3, 16], offset: 15>>
// CHECK-NEXT: loom.relu ins(%[[S]] : memref<3x2xf32, strided<[-3, 16], offset: 15>>)
func.func @chain(%a: tensor<6x8xf32>) -> tensor<3x2xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<6x8xf32> -> tensor<8x6xf32>
  %s = loom.slice %t {offsets = array<i64: 7, 1>, sizes = array<i64: 3, 2>, strides = array<i64: -3, 2>} : tensor<8x6xf32> -> tensor<3x2xf32>
  %r = loom.relu %s : tensor<3x2xf32>
  func.return %r : tensor<3x2xf32>
}

// -----

// A broadcast dimension has stride 0: the added leading one and the stretched one.
// CHECK-LABEL: func.func @broadcast
// CHECK-NEXT: %[[V:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [2, 3, 5], strides: [0, 1, 0] : memref<3x1xf32> to memref<2x3x5xf32, strided<[0, 1, 0]>>
// CHECK-NEXT: loom.add ins(%[[V]], %b : memref<2x3x5xf32, strided<[0, 1, 0]>>, memref<2x3x5xf32>)
func.func @broadcast(%a: tensor<3x1xf32>, %b: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %v = loom.broadcast_to %a : tensor<3x1xf32> -> tensor<2x3x5xf32>
  %r = loom.add %v, %b : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  func.return %r : tensor<2x3x5xf32>
}

// -----

// A reshape of a row-major buffer is row-major; a reshape of a strided view is a view
// when the dimensions it merges or splits are contiguous with each other (6x4 with
// strides [1, 6]: its first dimension, of stride 1, splits into 2x3 as [3, 1]).
// CHECK-LABEL: func.func @reshape_views
// CHECK-NEXT: %[[U:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [3, 8], strides: [8, 1] : memref<4x6xf32> to memref<3x8xf32>
// CHECK-NEXT: loom.relu ins(%[[U]] : memref<3x8xf32>)
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [6, 4], strides: [1, 6] : memref<4x6xf32> to memref<6x4xf32, strided<[1, 6]>>
// CHECK-NEXT: %[[S:.*]] = memref.reinterpret_cast %[[T]] to offset: [0], sizes: [2, 3, 4], strides: [3, 1, 6] : memref<6x4xf32, strided<[1, 6]>> to memref<2x3x4xf32, strided<[3, 1, 6]>>
// CHECK-NEXT: loom.relu ins(%[[S]] : memref<2x3x4xf32, strided<[3, 1, 6]>>)
// CHECK-NOT: memref.copy
// CHECK-NOT: remark
func.func @reshape_views(%a: tensor<4x6xf32>) -> (tensor<3x8xf32>, tensor<2x3x4xf32>) {
  %u = loom.reshape %a : tensor<4x6xf32> -> tensor<3x8xf32>
  %r = loom.relu %u : tensor<3x8xf32>
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %s = loom.reshape %t : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %q = loom.relu %s : tensor<2x3x4xf32>
  func.return %r, %q : tensor<3x8xf32>, tensor<2x3x4xf32>
}

// -----

// Flattening a transposed matrix merges dimensions that are not contiguous with each
// other: no strides give it, so the operand is copied into a row-major buffer (viewed in
// its own shape for the copy), freed after its last use, and a remark says so.
// CHECK-LABEL: func.func @reshape_copies
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [6, 4], strides: [1, 6]
// CHECK-NEXT: %[[BUF:.*]] = memref.alloc() : memref<24xf32>
// CHECK-NEXT: %[[AS:.*]] = memref.reinterpret_cast %[[BUF]] to offset: [0], sizes: [6, 4], strides: [4, 1] : memref<24xf32> to memref<6x4xf32>
// CHECK-NEXT: "memref.copy"(%[[T]], %[[AS]]) : (memref<6x4xf32, strided<[1, 6]>>, memref<6x4xf32>) -> ()
// CHECK-NEXT: loom.add ins(%[[BUF]], %b : memref<24xf32>, memref<24xf32>)
// CHECK-NEXT: memref.dealloc %[[BUF]] : memref<24xf32>
// CHECK-NEXT: func.return
// CHECK: views.mlir:[[# @LINE + 3]]:3: remark: [loom-bufferize] reshape of 6x4 to 24 copies its operand: laid out as memref<6x4xf32, strided<[1, 6]>>, the dimensions it merges are not contiguous with each other, so no strides give the result (numpy's reshape copies there too); to keep it a view, reshape before the transpose or slice, or merge only dimensions that stay contiguous
func.func @reshape_copies(%a: tensor<4x6xf32>, %b: tensor<24xf32>) -> tensor<24xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %f = loom.reshape %t : tensor<6x4xf32> -> tensor<24xf32>
  %r = loom.add %f, %b : (tensor<24xf32>, tensor<24xf32>) -> tensor<24xf32>
  func.return %r : tensor<24xf32>
}

// -----

// The tile swap [[0,1,8,9],[4,5,12,13],[2,3,10,11],[6,7,14,15]] of arange(16).reshape(4,4):
// as a 2x2x2x2 view with strides [2, 4, 8, 1], read in place by relu, which writes its
// result into the out-parameter viewed as 2x2x2x2 (the returned reshape and copy of a
// row-major result are the result). No allocation, no copy.
// CHECK-LABEL: func.func @tile_swap
// CHECK-SAME: (%a: memref<4x4xf32>, %[[OUT:.*]]: memref<4x4xf32>) {
// CHECK-NEXT: %[[R:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [2, 2, 2, 2], strides: [8, 4, 2, 1] : memref<4x4xf32> to memref<2x2x2x2xf32>
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %[[R]] to offset: [0], sizes: [2, 2, 2, 2], strides: [2, 4, 8, 1] : memref<2x2x2x2xf32> to memref<2x2x2x2xf32, strided<[2, 4, 8, 1]>>
// CHECK-NEXT: %[[O:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [2, 2, 2, 2], strides: [8, 4, 2, 1] : memref<4x4xf32> to memref<2x2x2x2xf32>
// CHECK-NEXT: loom.relu ins(%[[T]] : memref<2x2x2x2xf32, strided<[2, 4, 8, 1]>>) outs(%[[O]] : memref<2x2x2x2xf32>)
// CHECK-NEXT: func.return
func.func @tile_swap(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = loom.reshape %a : tensor<4x4xf32> -> tensor<2x2x2x2xf32>
  %t = loom.transpose %r {perm = array<i64: 2, 1, 0, 3>} : tensor<2x2x2x2xf32> -> tensor<2x2x2x2xf32>
  %e = loom.relu %t : tensor<2x2x2x2xf32>
  %s = loom.reshape %e : tensor<2x2x2x2xf32> -> tensor<4x4xf32>
  %c = loom.contiguous %s : tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %c : tensor<4x4xf32>
}

// -----

// The tile swap returned as it is: the one copy there must be (the view into a row-major
// result) goes straight into the out-parameter.
// CHECK-LABEL: func.func @tile_swap_copy
// CHECK-SAME: (%a: memref<4x4xf32>, %[[OUT:.*]]: memref<4x4xf32>) {
// CHECK-NEXT: memref.reinterpret_cast %a
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast {{.*}} to memref<2x2x2x2xf32, strided<[2, 4, 8, 1]>>
// CHECK-NEXT: %[[O:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [2, 2, 2, 2], strides: [8, 4, 2, 1] : memref<4x4xf32> to memref<2x2x2x2xf32>
// CHECK-NEXT: "memref.copy"(%[[T]], %[[O]])
// CHECK-NEXT: func.return
// CHECK: remark: [loom-bufferize] reshape of 2x2x2x2 to 4x4 copies its operand
func.func @tile_swap_copy(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = loom.reshape %a : tensor<4x4xf32> -> tensor<2x2x2x2xf32>
  %t = loom.transpose %r {perm = array<i64: 2, 1, 0, 3>} : tensor<2x2x2x2xf32> -> tensor<2x2x2x2xf32>
  %s = loom.reshape %t : tensor<2x2x2x2xf32> -> tensor<4x4xf32>
  %c = loom.contiguous %s : tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %c : tensor<4x4xf32>
}

// -----

// loom.contiguous of a strided view copies it (into the out-parameter when returned); of
// a row-major buffer it is that buffer.
// CHECK-LABEL: func.func @contiguous
// CHECK-SAME: (%a: memref<4x8xf32>, %[[R0:.*]]: memref<8x4xf32>, %[[R1:.*]]: memref<4x8xf32>) {
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a
// CHECK-NEXT: "memref.copy"(%[[T]], %[[R0]]) : (memref<8x4xf32, strided<[1, 8]>>, memref<8x4xf32>) -> ()
// CHECK-NEXT: loom.relu ins(%a : memref<4x8xf32>) outs(%[[R1]] : memref<4x8xf32>)
// CHECK-NEXT: func.return
func.func @contiguous(%a: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %c = loom.contiguous %t : tensor<8x4xf32> -> tensor<8x4xf32>
  %d = loom.contiguous %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %r = loom.relu %d : tensor<4x8xf32>
  func.return %c, %r : tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// A strided view returned as it is is copied into its out-parameter.
// CHECK-LABEL: func.func @returned_view
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %a
// CHECK-NEXT: "memref.copy"(%[[T]], %{{.*}}) : (memref<8x4xf32, strided<[1, 8]>>, memref<8x4xf32>) -> ()
func.func @returned_view(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

// A temporary is freed after the last use of its views, not of itself.
// CHECK-LABEL: func.func @view_of_temporary
// CHECK-NEXT: %[[C:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK-NEXT: loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%[[C]] : memref<4x5xf32>)
// CHECK-NEXT: %[[T:.*]] = memref.reinterpret_cast %[[C]]
// CHECK-NEXT: loom.relu ins(%[[T]] : memref<5x4xf32, strided<[1, 5]>>)
// CHECK-NEXT: memref.dealloc %[[C]] : memref<4x5xf32>
// CHECK-NEXT: func.return
func.func @view_of_temporary(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<5x4xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %t = loom.transpose %c {perm = array<i64: 1, 0>} : tensor<4x5xf32> -> tensor<5x4xf32>
  %r = loom.relu %t : tensor<5x4xf32>
  func.return %r : tensor<5x4xf32>
}

// -----

// A returned reshape of a computed value: computed into the out-parameter, viewed in its
// shape.
// CHECK-LABEL: func.func @returned_reshape
// CHECK-SAME: (%a: memref<4x3xf32>, %b: memref<3x5xf32>, %[[OUT:.*]]: memref<20xf32>) {
// CHECK-NEXT: %[[O:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [4, 5], strides: [5, 1] : memref<20xf32> to memref<4x5xf32>
// CHECK-NEXT: loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%[[O]] : memref<4x5xf32>)
// CHECK-NEXT: func.return
func.func @returned_reshape(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<20xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %f = loom.reshape %c : tensor<4x5xf32> -> tensor<20xf32>
  func.return %f : tensor<20xf32>
}

// -----

// `loom.buffer_layout`: the argument's memref has the strides of the array passed: a
// transposed array, a broadcast one (stride 0), a reversed one (a negative stride: the
// base is the lowest address, the offset the distance to the first element), and the
// row-major strides, which are the identity layout. The attribute is dropped: the type
// carries it.
// CHECK-LABEL: func.func @buffer_layout
// CHECK-SAME: (%a: memref<4x3xf32, strided<[1, 4]>>, %b: memref<4x3xf32, strided<[0, 1]>>, %c: memref<4x3xf32, strided<[-3, 1], offset: 9>>, %d: memref<4x3xf32>, %{{.*}}: memref<4x3xf32>) {
func.func @buffer_layout(%a: tensor<4x3xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<4x3xf32> {loom.buffer_layout = strided<[0, 1]>}, %c: tensor<4x3xf32> {loom.buffer_layout = strided<[-3, 1]>}, %d: tensor<4x3xf32> {loom.buffer_layout = strided<[3, 1]>}) -> tensor<4x3xf32> {
  %s = loom.add %a, %b : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %t = loom.add %s, %c : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %u = loom.add %t, %d : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %u : tensor<4x3xf32>
}

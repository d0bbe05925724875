// RUN: loom-opt %s -p loom-bufferize --split-input-file | filecheck %s

// A returned result is computed straight into its out-parameter.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%a: memref<4x3xf32>, %b: memref<3x5xf32>, %[[OUT:.*]]: memref<4x5xf32>) {
// CHECK-NEXT: loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%[[OUT]] : memref<4x5xf32>)
// CHECK-NEXT: func.return
// CHECK-NOT: memref.alloc
func.func @matmul(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

// Intermediates get a buffer each, freed right after their last use.
// CHECK-LABEL: func.func @epilogue
// CHECK-SAME: (%a: memref<4x3xf32>, %b: memref<3x5xf32>, %bias: memref<5xf32>, %[[OUT:.*]]: memref<4x5xf32>) {
// CHECK-NEXT: %[[C:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK-NEXT: loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%[[C]] : memref<4x5xf32>)
// CHECK-NEXT: %[[S:.*]] = memref.alloc() : memref<4x5xf32>
// CHECK-NEXT: loom.add ins(%[[C]], %bias : memref<4x5xf32>, memref<5xf32>) outs(%[[S]] : memref<4x5xf32>)
// CHECK-NEXT: memref.dealloc %[[C]] : memref<4x5xf32>
// CHECK-NEXT: loom.relu ins(%[[S]] : memref<4x5xf32>) outs(%[[OUT]] : memref<4x5xf32>)
// CHECK-NEXT: memref.dealloc %[[S]] : memref<4x5xf32>
// CHECK-NEXT: func.return
func.func @epilogue(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %bias: tensor<5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %s = loom.add %c, %bias : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %r = loom.relu %s : tensor<4x5xf32>
  func.return %r : tensor<4x5xf32>
}

// -----

// Two intermediates read last by the same op are both freed after it, in allocation
// order; one read twice is freed after its second reader.
// CHECK-LABEL: func.func @last_uses
// CHECK-NEXT: %[[P:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: loom.relu ins(%a : memref<4xf32>) outs(%[[P]] : memref<4xf32>)
// CHECK-NEXT: %[[Q:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: loom.mul ins(%[[P]], %a : memref<4xf32>, memref<4xf32>) outs(%[[Q]] : memref<4xf32>)
// CHECK-NEXT: %[[S:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: loom.add ins(%[[P]], %[[Q]] : memref<4xf32>, memref<4xf32>) outs(%[[S]] : memref<4xf32>)
// CHECK-NEXT: memref.dealloc %[[P]] : memref<4xf32>
// CHECK-NEXT: memref.dealloc %[[Q]] : memref<4xf32>
// CHECK-NEXT: loom.relu ins(%[[S]] : memref<4xf32>) outs(%{{.*}} : memref<4xf32>)
// CHECK-NEXT: memref.dealloc %[[S]] : memref<4xf32>
// CHECK-NEXT: func.return
func.func @last_uses(%a: tensor<4xf32>) -> tensor<4xf32> {
  %p = loom.relu %a : tensor<4xf32>
  %q = loom.mul %p, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = loom.add %p, %q : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = loom.relu %s : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// An argument returned as is, and a value returned twice, are copied into their slots.
// CHECK-LABEL: func.func @copies
// CHECK-SAME: (%a: memref<4xf64>, %[[R0:.*]]: memref<4xf64>, %[[R1:.*]]: memref<4xf64>, %[[R2:.*]]: memref<4xf64>) {
// CHECK-NEXT: loom.relu ins(%a : memref<4xf64>) outs(%[[R0]] : memref<4xf64>)
// CHECK-NEXT: "memref.copy"(%a, %[[R1]])
// CHECK-NEXT: "memref.copy"(%[[R0]], %[[R2]])
// CHECK-NEXT: func.return
func.func @copies(%a: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %r = loom.relu %a : tensor<4xf64>
  func.return %r, %a, %r : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}

// -----

// Functions without tensors are left alone.
// CHECK-LABEL: func.func @scalars
// CHECK-SAME: (%x: f32) -> f32
func.func @scalars(%x: f32) -> f32 {
  func.return %x : f32
}

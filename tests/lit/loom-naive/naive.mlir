// RUN: loom-opt %s -p loom-naive | filecheck %s
// RUN: loom-opt %s -p loom-naive -t llvm | filecheck %s --check-prefix=IR

// The whole way from the loom dialect to the llvm dialect: nothing else is left.
// CHECK-LABEL: llvm.func @dense
// CHECK-SAME: !llvm.ptr {llvm.noalias
// CHECK-NOT: loom.
// CHECK-NOT: affine.
// CHECK-NOT: scf.
// CHECK-NOT: memref.
// CHECK-NOT: arith.
// CHECK-NOT: func.func
// CHECK: llvm.call @aligned_alloc
// CHECK: llvm.call @free
// CHECK: llvm.return

// IR-LABEL: define void @dense(ptr noalias
// IR: getelementptr inbounds
// IR: fmul
// IR: fadd
// IR: call void @free
func.func @dense(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %bias: tensor<4xf32>) -> tensor<8x4xf32> {
  %c = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = loom.add %c, %bias : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %r = loom.relu %s : tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}

// RUN: loom-opt %s -p loom-naive | filecheck %s
// RUN: loom-opt %s -p loom-naive -t llvm | filecheck %s --check-prefix=IR

// The whole way from the loom dialect to the llvm dialect: nothing else is left, in the
// whole function (the CHECK-NOTs between the anchors cover it from its first line to its
// last): the temporaries %c and %s, each checked for a null pointer, the loop nests (the
// zero fill of %c, the matmul, the bias add), %c freed after its last use (the add), the
// relu into the out-parameter %r, %s freed, and the status 0; a failure goes to the
// cleanup blocks, which free what is held and return the site number.
// CHECK-LABEL: llvm.func @dense(
// CHECK-SAME:    %r: !llvm.ptr {llvm.noalias, llvm.nocapture}) -> i32 attributes {no_unwind} {
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         %c = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 1 : i32, name = "c", type = memref<8x4xf32>, bytes = 128 : i64}}
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.cond_br %{{.*}}, ^[[NONE:bb[0-9]+]](%{{.*}} : i32), ^{{bb[0-9]+}}
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.fmul
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         %s = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 2 : i32, name = "s", type = memref<8x4xf32>, bytes = 128 : i64}}
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.cond_br %{{.*}}, ^[[FREE_C:bb[0-9]+]](%{{.*}} : i32), ^{{bb[0-9]+}}
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.call @free(%c) : (!llvm.ptr) -> ()
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.fcmp "ugt"
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.getelementptr inbounds %r[
// CHECK-NOT:     {{(loom|affine|scf|memref|arith|func|cf|math|vector|builtin)\.|unrealized_conversion_cast}}
// CHECK:         llvm.call @free(%s) : (!llvm.ptr) -> ()
// CHECK-NEXT:    %[[OK:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    llvm.return %[[OK]] : i32
// CHECK-NEXT:  ^[[NONE]](%[[S0:.*]]: i32):
// CHECK-NEXT:    llvm.return %[[S0]] : i32
// CHECK-NEXT:  ^[[FREE_C]](%[[S1:.*]]: i32):
// CHECK-NEXT:    llvm.call @free(%c) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.br ^[[NONE]](%[[S1]] : i32)
// CHECK-NEXT:  }
// CHECK-NEXT:  llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK-NEXT:  llvm.func @free(!llvm.ptr)
// CHECK-NEXT:  }

// IR-LABEL: define i32 @dense(ptr noalias
// IR:         %c = call ptr @aligned_alloc(i64 64, i64 128)
// IR:         getelementptr inbounds
// IR:         fmul
// IR:         fadd
// IR:         %s = call ptr @aligned_alloc(i64 64, i64 128)
// IR:         call void @free(ptr %c)
// IR:         call void @free(ptr %s)
// IR-NEXT:    ret i32 0
// IR:         ret i32 %
// IR:         call void @free(ptr %c)
// IR-NEXT:    br label %
func.func @dense(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %bias: tensor<4xf32>) -> tensor<8x4xf32> {
  %c = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = loom.add %c, %bias : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %r = loom.relu %s : tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}

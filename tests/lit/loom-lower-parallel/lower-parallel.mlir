// RUN: loom-opt %s -p 'loom-parallelize{num-threads=2},loom-lower-affine,loom-lower-parallel' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-parallelize{num-threads=1},loom-lower-affine,loom-lower-parallel' --split-input-file | filecheck %s --check-prefix=ONE

// The loop's captured values (two buffers, a float, the trip count) go into a context
// block of i64 slots at the function's entry; GOMP_parallel runs the thread function on
// 2 threads; each thread takes its slice [total * t / nt, total * (t + 1) / nt) and calls
// the body function, whose memref arguments are whole buffers (noalias after lowering).
// CHECK-LABEL: func.func @scale(
// CHECK-NEXT:    %[[N:.*]] = arith.constant 4 : i64
// CHECK-NEXT:    %parallel_ctx = llvm.alloca %[[N]] x i64 {alignment = 8 : i64} : (i64) -> !llvm.ptr
// CHECK:         %[[TRIPS:.*]] = arith.maxsi
// CHECK:         %[[A:.*]] = builtin.unrealized_conversion_cast %a : memref<64xf32> to !llvm.ptr
// CHECK-NEXT:    %[[AW:.*]] = llvm.ptrtoint %[[A]] : !llvm.ptr to i64
// CHECK-NEXT:    %[[S0:.*]] = llvm.getelementptr %parallel_ctx[0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[AW]], %[[S0]] : i64, !llvm.ptr
// CHECK-NEXT:    %[[SB:.*]] = arith.bitcast %s : f32 to i32
// CHECK-NEXT:    %[[SW:.*]] = arith.extui %[[SB]] : i32 to i64
// CHECK:         %[[TW:.*]] = arith.index_cast %[[TRIPS]] : index to i64
// CHECK-NEXT:    %[[S3:.*]] = llvm.getelementptr %parallel_ctx[3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[TW]], %[[S3]] : i64, !llvm.ptr
// CHECK-NEXT:    %[[FN:.*]] = llvm.mlir.addressof @scale_parallel0_thread : !llvm.ptr
// CHECK-NEXT:    %[[NT:.*]] = arith.constant 2 : i32
// CHECK-NEXT:    %[[FLAGS:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    func.call @GOMP_parallel(%[[FN]], %parallel_ctx, %[[NT]], %[[FLAGS]]) : (!llvm.ptr, !llvm.ptr, i32, i32) -> ()
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func private @scale_parallel0_thread(%ctx: !llvm.ptr) attributes {no_inline} {
// CHECK:         %[[P1:.*]] = llvm.getelementptr %ctx[1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[W1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> i64
// CHECK-NEXT:    %[[T1:.*]] = arith.trunci %[[W1]] : i64 to i32
// CHECK-NEXT:    %[[F:.*]] = arith.bitcast %[[T1]] : i32 to f32
// CHECK:         %[[TID:.*]] = func.call @omp_get_thread_num() : () -> i32
// CHECK-NEXT:    %[[NTH:.*]] = func.call @omp_get_num_threads() : () -> i32
// CHECK:         %[[LO:.*]] = arith.divui
// CHECK-NEXT:    %[[HI:.*]] = arith.divui
// CHECK-NEXT:    func.call @scale_parallel0(%{{.*}}, %[[F]], %{{.*}}, %[[LO]], %[[HI]]) : (memref<64xf32>, f32, memref<64xf32>, index, index) -> ()
// CHECK-LABEL: func.func private @scale_parallel0(%a: memref<64xf32>, %s: f32, %c: memref<64xf32>, %lo: index, %hi: index) {
// CHECK:         scf.for %it = %lo to %hi step %{{.*}} {
// CHECK-NEXT:      %[[OFF:.*]] = arith.muli %it, %{{.*}} : index
// CHECK-NEXT:      %i = arith.addi %{{.*}}, %[[OFF]] : index
// CHECK-NEXT:      %x = memref.load %a[%i] : memref<64xf32>
// CHECK:         func.func private @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32) -> ()
// CHECK-NEXT:    func.func private @omp_get_thread_num() -> i32
// CHECK-NEXT:    func.func private @omp_get_num_threads() -> i32

// On one thread the loop stays a loop: no runtime call, no outlined function.
// ONE-LABEL: func.func @scale(
// ONE-NOT:     GOMP_parallel
// ONE:         scf.for %i =
// ONE-NOT:     func.func private @scale_parallel0
func.func @scale(%a: memref<64xf32>, %c: memref<64xf32>, %s: f32) {
  affine.for %i = 0 to 64 {
    %x = affine.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %s : f32
    affine.store %y, %c[%i] : memref<64xf32>
  } {loom.tag = "scale"}
  func.return
}

// -----

// Two collapsed loops (3 x 10): the trip count of the inner dimension travels in the
// context; the body takes the ivs apart from the linear iteration number, the last
// dimension fastest.
// CHECK-LABEL: func.func private @collapse_parallel0(%x: memref<3x10xf32>, %y: memref<3x10xf32>, %{{.*}}: index, %lo: index, %hi: index) {
// CHECK:         scf.for %it = %lo to %hi step %{{.*}} {
// CHECK-NEXT:      %[[F:.*]] = arith.remui %it, %[[TRIPS:.*]] : index
// CHECK-NEXT:      %[[N:.*]] = arith.divui %it, %[[TRIPS]] : index
// CHECK-NEXT:      %[[NS:.*]] = arith.muli %[[N]], %{{.*}} : index
// CHECK-NEXT:      %n = arith.addi %{{.*}}, %[[NS]] : index
// CHECK-NEXT:      %[[FS:.*]] = arith.muli %[[F]], %{{.*}} : index
// CHECK-NEXT:      %f = arith.addi %{{.*}}, %[[FS]] : index
// CHECK-NEXT:      %v = memref.load %x[%n, %f] : memref<3x10xf32>
func.func @collapse(%x: memref<3x10xf32>, %y: memref<3x10xf32>) {
  affine.for %n = 0 to 3 {
    affine.for %f = 0 to 10 {
      %v = affine.load %x[%n, %f] : memref<3x10xf32>
      affine.store %v, %y[%n, %f] : memref<3x10xf32>
    }
  } {loom.tag = "copy"}
  func.return
}

// -----

// A parallel loop inside a serial one: the outer loop's iv is captured like any value.
// CHECK-LABEL: func.func @inner(
// CHECK:         scf.for %k =
// CHECK:           %[[K:.*]] = arith.index_cast %k : index to i64
// CHECK:           func.call @GOMP_parallel
// CHECK-LABEL: func.func private @inner_parallel0(%a: memref<8x32xf32>, %k: index, %c: memref<32xf32>, %lo: index, %hi: index) {
func.func @inner(%a: memref<8x32xf32>, %c: memref<32xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %j = 0 to 32 {
      %x = affine.load %a[%k, %j] : memref<8x32xf32>
      %s = affine.load %c[%j] : memref<32xf32>
      %t = arith.addf %s, %x : f32
      affine.store %t, %c[%j] : memref<32xf32>
    }
  } {loom.tag = "sum"}
  func.return
}

// RUN: not loom-opt %s -p 'loom-parallelize{op=stencil depth=0}' --split-input-file 2>&1 | filecheck %s
// RUN: loom-opt %s -p 'loom-parallelize' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: not loom-opt %s -p 'loom-parallelize{depth=-2}' 2>&1 | filecheck %s --check-prefix=DEPTH
// RUN: not loom-opt %s -p 'loom-parallelize{num-threads=-1}' 2>&1 | filecheck %s --check-prefix=THREADS
// RUN: loom-opt %s -p 'loom-parallelize{min-work=1000}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=FORKS

// DEPTH: error: loom-parallelize: option 'depth' must be -1 (the outermost parallel loop) or at least 0, got -2
// THREADS: error: loom-parallelize: option 'num-threads' must be at least 0, got -1

// Each iteration reads what the one before wrote: a dependence carried by %i, named.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: load %a[%i - 1] (line [[# @LINE + 4]]) and store %a[%i] (line [[# @LINE + 6]]) may touch the same element in different iterations
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: load %a[%i - 1] (line [[# @LINE + 3]]) and store %a[%i] (line [[# @LINE + 5]]) may touch the same element in different iterations
func.func @stencil(%a: memref<64xf32>, %one: f32) {
  affine.for %i = 1 to 64 {
    %x = affine.load %a[%i - 1] : memref<64xf32>
    %y = arith.addf %x, %one : f32
    affine.store %y, %a[%i] : memref<64xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// Every iteration writes the same element: the last write must win, as in order.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: store %s[0] (line [[# @LINE + 5]]) write the same element in different iterations
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: store %s[0] (line [[# @LINE + 4]]) write the same element in different iterations
func.func @last_write(%a: memref<64xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 64 {
    %x = affine.load %a[%i] : memref<64xf32>
    affine.store %x, %s[0] : memref<1xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// A loop that carries a value (a sum in iter_args) is not parallel.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: loop %i carries values from one iteration to the next (iter_args)
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: loop %i carries values from one iteration to the next (iter_args)
func.func @sum(%a: memref<64xf32>, %zero: f32) -> f32 {
  %r = affine.for %i = 0 to 64 iter_args(%acc = %zero) -> (f32) {
    %x = affine.load %a[%i] : memref<64xf32>
    %s = arith.addf %acc, %x : f32
    affine.yield %s : f32
  } {loom.tag = "stencil"}
  func.return %r : f32
}

// -----

// A temporary allocated in each iteration would have to be allocated by each thread,
// which could not report a failure.
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: it allocates %t in its body
// REMARK: refuse.mlir:[[# @LINE + 2]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: it allocates %t in its body
func.func @alloc(%a: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %t = memref.alloc() : memref<4xf32>
    %x = affine.load %a[%i] : memref<64xf32>
    affine.store %x, %t[0] : memref<4xf32>
    memref.dealloc %t : memref<4xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// %m is %a or %b, chosen at run time: it may be the buffer the loop reads shifted.
// CHECK: refuse.mlir:[[# @LINE + 4]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: load %b[%i + 1] (line [[# @LINE + 5]]) and store %m[%i] (line [[# @LINE + 6]]): %m, the result of 'arith.select', may be any buffer
// REMARK: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: load %b[%i + 1] (line [[# @LINE + 4]]) and store %m[%i] (line [[# @LINE + 5]]): %m, the result of 'arith.select', may be any buffer
func.func @select(%a: memref<65xf32>, %b: memref<65xf32>, %c: i1) {
  %m = arith.select %c, %a, %b : memref<65xf32>
  affine.for %i = 0 to 64 {
    %x = affine.load %b[%i + 1] : memref<65xf32>
    affine.store %x, %m[%i] : memref<65xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// A subview and its buffer: two names for one buffer, not analysed.
// CHECK: refuse.mlir:[[# @LINE + 4]]:3: error: loom-parallelize: loop %i at depth 0 is not parallel: load %v[%i] (line [[# @LINE + 5]]) and store %a[%i] (line [[# @LINE + 6]]) reach one buffer through different views
// REMARK: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %i: load %v[%i] (line [[# @LINE + 4]]) and store %a[%i] (line [[# @LINE + 5]]) reach one buffer through different views
func.func @views(%a: memref<65xf32>) {
  %v = memref.subview %a[1] [64] [1] : memref<65xf32> to memref<64xf32, strided<[1], offset: 1>>
  affine.for %i = 0 to 64 {
    %x = affine.load %v[%i] : memref<64xf32, strided<[1], offset: 1>>
    affine.store %x, %a[%i] : memref<65xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// A masked store writes its vector's width along the last subscript (here 4 lanes from
// %j): iterations %j and %j + 1 overlap. (Its width was read off the memref operand once:
// one element per iteration, and the loop ran in parallel.)
// CHECK: refuse.mlir:[[# @LINE + 5]]:3: error: loom-parallelize: loop %j at depth 0 is not parallel: vector.maskedstore on %a (line [[# @LINE + 6]]) write the same element in different iterations
// REMARK: refuse.mlir:[[# @LINE + 4]]:3: remark: [loom-parallelize] nest 'stencil' left serial: %j: vector.maskedstore on %a (line [[# @LINE + 5]]) write the same element in different iterations
func.func @masked_store(%a: memref<20xf32>, %v: vector<4xf32>) {
  %n = arith.constant 3 : index
  %m = vector.create_mask %n : vector<4xi1>
  affine.for %j = 0 to 16 {
    vector.maskedstore %a[%j], %m, %v : memref<20xf32>, vector<4xi1>, vector<4xf32>
  } {loom.tag = "stencil"}
  func.return
}

// -----

// With a min-work (the cost model's), a loop whose trip count is known only at run time
// has a guessed work; inside a loop of 512 iterations (which carries the sum) it would
// start and join the threads 512 times per call: left serial. (With min-work=0 it runs
// in parallel, as asked.)
// FORKS: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-parallelize] nest 'rows' left serial: %k: load %c[0, %j] (line [[# @LINE + 5]]) and store %c[0, %j] (line [[# @LINE + 8]]) may touch the same element in different iterations; %j: its trip count is known only at run time, and the loops around it would start and join the threads 512 times
// REMARK: refuse.mlir:[[# @LINE + 3]]:5: remark: [loom-parallelize] nest 'rows': loop %j run in parallel (a trip count known at run time, the runtime default number of threads)
func.func @forks(%c: memref<1x4096xf32>, %b: memref<512x4096xf32>, %n: index) {
  affine.for %k = 0 to 512 {
    affine.for %j = 0 to %n {
      %x = affine.load %c[0, %j] : memref<1x4096xf32>
      %y = affine.load %b[%k, %j] : memref<512x4096xf32>
      %z = arith.addf %x, %y : f32
      affine.store %z, %c[0, %j] : memref<1x4096xf32>
    }
  } {loom.tag = "rows"}
  func.return
}

// -----

// %k steps by 4, but `%k floordiv 8` is shared by two iterations: left serial (without
// depth=, %j inside it is taken instead).
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: error: loom-parallelize: loop %k at depth 0 is not parallel: store %pack[%k floordiv 8, %j] (line [[# @LINE + 6]]) write the same element in different iterations
// REMARK: refuse.mlir:[[# @LINE + 3]]:5: remark: [loom-parallelize] nest 'stencil': loop %j run in parallel
func.func @shared_group(%b: memref<64x16xi8>, %pack: memref<8x16xi8>) {
  affine.for %k = 0 to 64 step 4 {
    affine.for %j = 0 to 16 {
      %x = affine.load %b[%k, %j] : memref<64x16xi8>
      affine.store %x, %pack[%k floordiv 8, %j] : memref<8x16xi8>
    }
  } {loom.tag = "stencil"}
  func.return
}

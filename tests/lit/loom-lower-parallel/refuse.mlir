// RUN: not loom-opt %s -p loom-lower-parallel --split-input-file 2>&1 | filecheck %s

// A temporary allocated in the loop: a thread could not report failing to allocate it.
// CHECK: refuse.mlir:[[# @LINE + 7]]:5: error: loom-lower-parallel: the parallel loop allocates memory in its body ('memref.alloc'): a thread could not report failing to; allocate before the loop
func.func @alloc(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  "scf.parallel"(%c0, %c8, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    %t = memref.alloc() : memref<4xf32>
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %t[%c0] : memref<4xf32>
    memref.dealloc %t : memref<4xf32>
    scf.reduce
  }) {loom.num_threads = 2 : i64} : (index, index, index) -> ()
  func.return
}

// -----

// A buffer of unknown origin (an scf.if's result) may be another argument: the body
// function could not take it as a noalias buffer.
// CHECK: refuse.mlir:[[# @LINE + 10]]:3: error: loom-lower-parallel: the parallel loop reads a buffer that is neither an argument nor an allocation of the function (it might alias another)
func.func @unknown(%a: memref<8xf32>, %b: memref<8xf32>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %m = scf.if %c -> (memref<8xf32>) {
    scf.yield %a : memref<8xf32>
  } else {
    scf.yield %b : memref<8xf32>
  }
  "scf.parallel"(%c0, %c8, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %m[%i] : memref<8xf32>
    scf.reduce
  }) {loom.num_threads = 2 : i64} : (index, index, index) -> ()
  func.return
}

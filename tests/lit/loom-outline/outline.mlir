// RUN: loom-opt %s -p 'loom-outline{min-nests=1}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-outline' --split-input-file | filecheck %s --check-prefix=DEFAULT
// RUN: loom-opt %s -p 'loom-outline{min-nests=1}' --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Nests that differ only in the buffers they work on share a function; a different nest
// (mul, not add) gets its own. Each function takes the whole buffers the nest reads and
// writes, in the order the nest first uses them, and is private and no_inline.
// CHECK-LABEL: func.func @chain(%x0: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) {
// CHECK-NEXT:    %x1 = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %x2 = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    func.call @chain_nest0(%x0, %b, %x1) : (memref<8xf32>, memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    func.call @chain_nest0(%x1, %b, %x2) : (memref<8xf32>, memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    func.call @chain_nest1(%x2, %b, %out) : (memref<8xf32>, memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %x1 : memref<8xf32>
// CHECK-NEXT:    memref.dealloc %x2 : memref<8xf32>
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @chain_nest0(%x0: memref<8xf32>, %b: memref<8xf32>, %x1: memref<8xf32>) attributes {no_inline} {
// CHECK-NEXT:    affine.for %i = 0 to 8 {
// CHECK-NEXT:      %{{.*}} = affine.load %x0[%i] : memref<8xf32>
// CHECK-NEXT:      %{{.*}} = affine.load %b[%i] : memref<8xf32>
// CHECK-NEXT:      %{{.*}} = arith.addf
// CHECK-NEXT:      affine.store %{{.*}}, %x1[%i] : memref<8xf32>
// CHECK-NEXT:    } {loom.tag = "add"}
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @chain_nest1(%x2: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) attributes {no_inline} {
// CHECK-NEXT:    affine.for %i = 0 to 8 {
// CHECK:           arith.mulf
// CHECK:         } {loom.tag = "mul"}
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NOT:   func.func
// With the default min-nests=16, three nests stay where they are.
// DEFAULT-LABEL: func.func @chain(
// DEFAULT-NOT:   func.call
// DEFAULT-COUNT-3: affine.for %{{i|i_[0-9]}} = 0 to 8 {
// DEFAULT-NOT:   @chain_nest
// REMARK: outline.mlir:[[# @LINE + 1]]:1: remark: [loom-outline] 3 of 3 loop nests moved into 2 functions (one per distinct nest, or group: a matmul or conv2d with its zero fill and the elementwise nests after it)
func.func @chain(%x0: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) {
  %x1 = memref.alloc() : memref<8xf32>
  %x2 = memref.alloc() : memref<8xf32>
  affine.for %i = 0 to 8 {
    %u = affine.load %x0[%i] : memref<8xf32>
    %v = affine.load %b[%i] : memref<8xf32>
    %s = arith.addf %u, %v : f32
    affine.store %s, %x1[%i] : memref<8xf32>
  } {loom.tag = "add"}
  affine.for %i = 0 to 8 {
    %u = affine.load %x1[%i] : memref<8xf32>
    %v = affine.load %b[%i] : memref<8xf32>
    %s = arith.addf %u, %v : f32
    affine.store %s, %x2[%i] : memref<8xf32>
  } {loom.tag = "add"}
  affine.for %i = 0 to 8 {
    %u = affine.load %x2[%i] : memref<8xf32>
    %v = affine.load %b[%i] : memref<8xf32>
    %s = arith.mulf %u, %v : f32
    affine.store %s, %out[%i] : memref<8xf32>
  } {loom.tag = "mul"}
  memref.dealloc %x1 : memref<8xf32>
  memref.dealloc %x2 : memref<8xf32>
  func.return
}

// -----

// A view and a constant the nests read are rebuilt in the new function, which takes the
// buffer the view is of (arguments are whole, distinct buffers: noalias holds); the
// copies left unused in the caller are erased. Two views at different offsets make two
// functions.
// CHECK-LABEL: func.func @views(%a: memref<8x8xf32>, %c: memref<4x4xf32>, %d: memref<4x4xf32>) {
// CHECK-NEXT:    func.call @views_nest0(%a, %c) : (memref<8x8xf32>, memref<4x4xf32>) -> ()
// CHECK-NEXT:    func.call @views_nest0(%a, %d) : (memref<8x8xf32>, memref<4x4xf32>) -> ()
// CHECK-NEXT:    func.call @views_nest1(%a, %c) : (memref<8x8xf32>, memref<4x4xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @views_nest0(%a: memref<8x8xf32>, %c: memref<4x4xf32>) attributes {no_inline} {
// CHECK-NEXT:    %v = memref.subview %a[2, 4] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 20>>
// CHECK-NEXT:    %two = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    affine.for %i = 0 to 4 {
// CHECK:         func.func private @views_nest1(%a: memref<8x8xf32>, %c: memref<4x4xf32>) attributes {no_inline} {
// CHECK-NEXT:    %w = memref.subview %a[0, 0] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1]>>
func.func @views(%a: memref<8x8xf32>, %c: memref<4x4xf32>, %d: memref<4x4xf32>) {
  %two = arith.constant 2.0 : f32
  %v = memref.subview %a[2, 4] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 20>>
  %w = memref.subview %a[0, 0] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %x = affine.load %v[%i, %j] : memref<4x4xf32, strided<[8, 1], offset: 20>>
      %y = arith.mulf %x, %two : f32
      affine.store %y, %c[%i, %j] : memref<4x4xf32>
    }
  } {loom.tag = "mul"}
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %x = affine.load %v[%i, %j] : memref<4x4xf32, strided<[8, 1], offset: 20>>
      %y = arith.mulf %x, %two : f32
      affine.store %y, %d[%i, %j] : memref<4x4xf32>
    }
  } {loom.tag = "mul"}
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %x = affine.load %w[%i, %j] : memref<4x4xf32, strided<[8, 1]>>
      %y = arith.mulf %x, %two : f32
      affine.store %y, %c[%i, %j] : memref<4x4xf32>
    }
  } {loom.tag = "mul"}
  func.return
}

// -----

// A scalar argument is passed as it is. A buffer of unknown origin (returned by a call:
// it might alias an argument) keeps its nest in place, and a nest with results stays too.
// CHECK-LABEL: func.func @stays(%m: memref<8xf32>, %z: f32) -> f32 {
// CHECK-NEXT:    func.call @stays_nest0(%z, %m) : (f32, memref<8xf32>) -> ()
// CHECK-NEXT:    %u = func.call @make() : () -> memref<8xf32>
// CHECK-NEXT:    affine.for %i = 0 to 8 {
// CHECK-NEXT:      affine.store %z, %u[%i] : memref<8xf32>
// CHECK-NEXT:    } {loom.tag = "fill"}
// CHECK-NEXT:    %{{.*}} = affine.for
// CHECK:       func.func private @stays_nest0(%z: f32, %m: memref<8xf32>) attributes {no_inline} {
// REMARK: outline.mlir:[[# @LINE + 8]]:3: remark: [loom-outline] nest left in its function: it reads a buffer that is neither an argument nor an allocation of the function (it might alias another)
// REMARK: remark: [loom-outline] 1 of 2 loop nests moved into 1 function (one per distinct nest, or group: a matmul or conv2d with its zero fill and the elementwise nests after it)
func.func private @make() -> memref<8xf32>
func.func @stays(%m: memref<8xf32>, %z: f32) -> f32 {
  affine.for %i = 0 to 8 {
    affine.store %z, %m[%i] : memref<8xf32>
  } {loom.tag = "fill"}
  %u = func.call @make() : () -> memref<8xf32>
  affine.for %i = 0 to 8 {
    affine.store %z, %u[%i] : memref<8xf32>
  } {loom.tag = "fill"}
  %sum = affine.for %i = 0 to 8 iter_args(%acc = %z) -> (f32) {
    %x = affine.load %m[%i] : memref<8xf32>
    %s = arith.addf %acc, %x : f32
    affine.yield %s : f32
  }
  func.return %sum : f32
}

// -----

// A matmul moves with its zero fill and the elementwise nests after it (what
// loom-fuse-epilogue fuses into it), and so do the buffers only they use: allocated and
// freed inside the new function, where the fusion can drop them. The buffer the group
// writes for a later nest (%r) is allocated before the call and freed after its last reader.
// CHECK-LABEL: func.func @layer(%x: memref<4x8xf32>, %w: memref<8x8xf32>, %b: memref<8xf32>, %v: memref<8x8xf32>, %d: memref<4x8xf32>) {
// CHECK-NEXT:    %r = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    func.call @layer_nest0(%x, %w, %b, %r) : (memref<4x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<4x8xf32>) -> ()
// CHECK-NEXT:    func.call @layer_nest1(%d, %r, %v) : (memref<4x8xf32>, memref<4x8xf32>, memref<8x8xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %r : memref<4x8xf32>
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @layer_nest0(%x: memref<4x8xf32>, %w: memref<8x8xf32>, %b: memref<8xf32>, %r: memref<4x8xf32>) attributes {no_inline} {
// CHECK-NEXT:    %{{.*}} = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %c = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    %s = memref.alloc() : memref<4x8xf32>
// CHECK:         } {loom.tag = "matmul.init"}
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         } {loom.tag = "add"}
// CHECK:         } {loom.tag = "relu"}
// CHECK-NEXT:    memref.dealloc %c : memref<4x8xf32>
// CHECK-NEXT:    memref.dealloc %s : memref<4x8xf32>
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @layer_nest1(%d: memref<4x8xf32>, %r: memref<4x8xf32>, %v: memref<8x8xf32>) attributes {no_inline} {
// CHECK:         } {loom.tag = "matmul.init"}
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// REMARK: remark: [loom-outline] 6 of 6 loop nests moved into 2 functions
func.func @layer(%x: memref<4x8xf32>, %w: memref<8x8xf32>, %b: memref<8xf32>, %v: memref<8x8xf32>, %d: memref<4x8xf32>) {
  %c = memref.alloc() : memref<4x8xf32>
  %0 = arith.constant 0.000000e+00 : f32
  affine.for %1 = 0 to 4 {
    affine.for %2 = 0 to 8 {
      affine.store %0, %c[%1, %2] : memref<4x8xf32>
    }
  } {loom.tag = "matmul.init"}
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %3 = affine.load %x[%i, %k] : memref<4x8xf32>
        %4 = affine.load %w[%k, %j] : memref<8x8xf32>
        %5 = affine.load %c[%i, %j] : memref<4x8xf32>
        %6 = arith.mulf %3, %4 : f32
        %7 = arith.addf %5, %6 : f32
        affine.store %7, %c[%i, %j] : memref<4x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  %s = memref.alloc() : memref<4x8xf32>
  affine.for %8 = 0 to 4 {
    affine.for %9 = 0 to 8 {
      %10 = affine.load %c[%8, %9] : memref<4x8xf32>
      %11 = affine.load %b[%9] : memref<8xf32>
      %12 = arith.addf %10, %11 : f32
      affine.store %12, %s[%8, %9] : memref<4x8xf32>
    }
  } {loom.tag = "add"}
  memref.dealloc %c : memref<4x8xf32>
  %r = memref.alloc() : memref<4x8xf32>
  affine.for %13 = 0 to 4 {
    affine.for %14 = 0 to 8 {
      %15 = affine.load %s[%13, %14] : memref<4x8xf32>
      %16 = arith.constant 0.000000e+00 : f32
      %17 = arith.cmpf ugt, %15, %16 : f32
      %18 = arith.select %17, %15, %16 : f32
      affine.store %18, %r[%13, %14] : memref<4x8xf32>
    }
  } {loom.tag = "relu"}
  memref.dealloc %s : memref<4x8xf32>
  %19 = arith.constant 0.000000e+00 : f32
  affine.for %20 = 0 to 4 {
    affine.for %21 = 0 to 8 {
      affine.store %19, %d[%20, %21] : memref<4x8xf32>
    }
  } {loom.tag = "matmul.init"}
  affine.for %i_1 = 0 to 4 {
    affine.for %j_1 = 0 to 8 {
      affine.for %k_1 = 0 to 8 {
        %22 = affine.load %r[%i_1, %k_1] : memref<4x8xf32>
        %23 = affine.load %v[%k_1, %j_1] : memref<8x8xf32>
        %24 = affine.load %d[%i_1, %j_1] : memref<4x8xf32>
        %25 = arith.mulf %22, %23 : f32
        %26 = arith.addf %24, %25 : f32
        affine.store %26, %d[%i_1, %j_1] : memref<4x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  memref.dealloc %r : memref<4x8xf32>
  func.return
}

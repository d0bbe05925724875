// RUN: loom-opt %s -p 'loom-vectorize{width=8}' --split-input-file | filecheck %s
// RUN: loom-opt %s -p 'loom-vectorize{width=4}' --split-input-file | filecheck %s --check-prefix=W4
// RUN: not loom-opt %s -p 'loom-vectorize{width=8 op=relu}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=OP
// RUN: loom-opt %s -p 'loom-vectorize{width=8}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=REMARK

// matmul in order (i, k, j), 64 x 256 x 64: j is innermost; B's and C's rows are vector
// loads, A[i, k] does not move along j and is broadcast, multiply-add is one fma. 8
// divides 64: no remainder.
// CHECK-LABEL: func.func @matmul_ikj
// CHECK:      affine.for %k = 0 to 256 {
// CHECK-NEXT:   affine.for %j = 0 to 64 step 8 {
// CHECK-NEXT:     %a = affine.load %A[%i, %k] : memref<64x256xf32>
// CHECK-NEXT:     %b = affine.vector_load %B[%k, %j] : memref<256x64xf32>, vector<8xf32>
// CHECK-NEXT:     %c = affine.vector_load %C[%i, %j] : memref<64x64xf32>, vector<8xf32>
// CHECK-NEXT:     %[[A:.*]] = vector.broadcast %a : f32 to vector<8xf32>
// CHECK-NEXT:     %s = vector.fma %[[A]], %b, %c : vector<8xf32>
// CHECK-NEXT:     affine.vector_store %s, %C[%i, %j] : memref<64x64xf32>, vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: } {loom.tag = "matmul"}
// W4-LABEL: func.func @matmul_ikj
// W4:       affine.for %j = 0 to 64 step 4 {
// W4:         affine.vector_load %B[%k, %j] : memref<256x64xf32>, vector<4xf32>
// REMARK: vectorize.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'matmul': vectorized loop %j by 8 (main 8 iterations, no remainder)
func.func @matmul_ikj(%A: memref<64x256xf32>, %B: memref<256x64xf32>, %C: memref<64x64xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 256 {
      affine.for %j = 0 to 64 {
        %a = affine.load %A[%i, %k] : memref<64x256xf32>
        %b = affine.load %B[%k, %j] : memref<256x64xf32>
        %c = affine.load %C[%i, %j] : memref<64x64xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<64x64xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// j runs to 100: 12 vectors, then one masked vector at 96 whose first 4 lanes are live
// (loads and stores under the mask; nothing is touched past column 99).
// CHECK-LABEL: func.func @matmul_ikj_rest
// CHECK:      affine.for %k = 0 to 256 {
// CHECK-NEXT:   %[[REST:.*]] = arith.constant 96 : index
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:   affine.for %j = 0 to 96 step 8 {
// CHECK:          %s = vector.fma
// CHECK-NEXT:     affine.vector_store %s, %C[%i, %j]
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[N:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[MASK:.*]] = vector.create_mask %[[N]] : vector<8xi1>
// CHECK-NEXT:   %[[A:.*]] = affine.load %A[%i, %k] : memref<64x256xf32>
// CHECK-NEXT:   %[[B:.*]] = vector.maskedload %B[%k, %[[REST]]], %[[MASK]], %[[ZERO]] : memref<256x100xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK-NEXT:   %[[C:.*]] = vector.maskedload %C[%i, %[[REST]]], %[[MASK]], %[[ZERO]]
// CHECK-NEXT:   %[[AV:.*]] = vector.broadcast %[[A]] : f32 to vector<8xf32>
// CHECK-NEXT:   %[[S:.*]] = vector.fma %[[AV]], %[[B]], %[[C]] : vector<8xf32>
// CHECK-NEXT:   vector.maskedstore %C[%i, %[[REST]]], %[[MASK]], %[[S]] : memref<64x100xf32>, vector<8xi1>, vector<8xf32>
// CHECK-NEXT: }
// W4-LABEL: func.func @matmul_ikj_rest
// W4:       affine.for %j = 0 to 100 step 4 {
// W4-NOT:   vector.create_mask
// W4:       } {loom.tag = "matmul"}
// REMARK: vectorize.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'matmul': vectorized loop %j by 8 (main 12 iterations, masked remainder of 4)
func.func @matmul_ikj_rest(%A: memref<64x256xf32>, %B: memref<256x100xf32>, %C: memref<64x100xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 256 {
      affine.for %j = 0 to 100 {
        %a = affine.load %A[%i, %k] : memref<64x256xf32>
        %b = affine.load %B[%k, %j] : memref<256x100xf32>
        %c = affine.load %C[%i, %j] : memref<64x100xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<64x100xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The point loop of a tile, %jt to min(%jt + 32, 100): the vectors end at the min over
// both results of lb + ((ub - lb) floordiv 8) * 8, the remainder's size is an affine.min
// and the masked iteration runs only when it is at least 1.
// CHECK-LABEL: func.func @tiled
// CHECK:      affine.for %jt = 0 to 100 step 32 {
// CHECK-NEXT:   %[[REST:.*]] = affine.min affine_map<(d0) -> ((d0 + 32), (d0 + ((((d0 * -1) + 100) floordiv 8) * 8)))> (%jt)
// CHECK-NEXT:   %[[N:.*]] = affine.min affine_map<(d0, d1) -> ((((d0 * -1) + d1) + 32), ((d0 * -1) + 100), 32, ((d1 * -1) + 100))> (%[[REST]], %jt)
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:   affine.for %j = affine_map<(d0) -> (d0)>(%jt) to min affine_map<(d0) -> ((d0 + 32), (d0 + ((((d0 * -1) + 100) floordiv 8) * 8)))>(%jt) step 8 {
// CHECK-NEXT:     %a = affine.vector_load %A[%i, %j] : memref<64x100xf32>, vector<8xf32>
// CHECK-NEXT:     %b = affine.vector_load %B[%j] : memref<100xf32>, vector<8xf32>
// CHECK-NEXT:     %s = arith.addf %a, %b : vector<8xf32>
// CHECK-NEXT:     affine.vector_store %s, %C[%i, %j] : memref<64x100xf32>, vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   "affine.if"(%[[N]]) <{condition = affine_set<(d0) : ((d0 + -1) >= 0)>}> ({
// CHECK-NEXT:     %[[MASK:.*]] = vector.create_mask %[[N]] : vector<8xi1>
// CHECK-NEXT:     %[[A:.*]] = vector.maskedload %A[%i, %[[REST]]], %[[MASK]], %[[ZERO]]
// CHECK-NEXT:     %[[B:.*]] = vector.maskedload %B[%[[REST]]], %[[MASK]], %[[ZERO]]
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<8xf32>
// CHECK-NEXT:     vector.maskedstore %C[%i, %[[REST]]], %[[MASK]], %[[S]]
// CHECK-NEXT:     affine.yield
// CHECK-NEXT:   }, {
// CHECK-NEXT:   }) : (index) -> ()
// CHECK-NEXT: }
// REMARK: vectorize.mlir:[[# @LINE + 4]]:7: remark: [loom-vectorize] nest 'add': vectorized loop %j by 8 (a main loop and a masked remainder: the trip count is not constant)
func.func @tiled(%A: memref<64x100xf32>, %B: memref<100xf32>, %C: memref<64x100xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %jt = 0 to 100 step 32 {
      affine.for %j = affine_map<(d0) -> (d0)>(%jt) to min affine_map<(d0) -> (d0 + 32, 100)>(%jt) {
        %a = affine.load %A[%i, %j] : memref<64x100xf32>
        %b = affine.load %B[%j] : memref<100xf32>
        %s = arith.addf %a, %b : f32
        affine.store %s, %C[%i, %j] : memref<64x100xf32>
      }
    }
  } {loom.tag = "add"}
  func.return
}

// -----

// The nests convert-loom-to-affine makes for x + bias (bias 16x1, broadcast along j: its
// size-1 dimension reads index 0) and relu: the bias is a scalar load and a broadcast;
// relu's select(x > 0 or NaN, x, 0.0) is arith.maximumf(x, 0.0) on vectors (the same
// result for NaN and -0.0), the 0.0 a splat made before the loop.
// CHECK-LABEL: func.func @bias_relu
// CHECK:      affine.for %j = 0 to 16 step 8 {
// CHECK-NEXT:   %a = affine.vector_load %x[%i, %j] : memref<16x20xf32>, vector<8xf32>
// CHECK-NEXT:   %b = affine.load %bias[%i, 0] : memref<16x1xf32>
// CHECK-NEXT:   %[[B:.*]] = vector.broadcast %b : f32 to vector<8xf32>
// CHECK-NEXT:   %s = arith.addf %a, %[[B]] : vector<8xf32>
// CHECK:      } {loom.tag = "add"}
// CHECK:      %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT: affine.for %j{{.*}} = 0 to 16 step 8 {
// CHECK-NEXT:   %v = affine.vector_load %t[%i{{.*}}, %j{{.*}}] : memref<16x20xf32>, vector<8xf32>
// CHECK-NEXT:   %r = arith.maximumf %v, %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:   affine.vector_store %r, %y[%i{{.*}}, %j{{.*}}] : memref<16x20xf32>, vector<8xf32>
// CHECK-NEXT: }
// CHECK:      %[[V:.*]] = vector.maskedload %t
// CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[V]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT: vector.maskedstore %y[{{.*}}], %{{.*}}, %[[R]]
// CHECK-NOT:  arith.cmpf
// CHECK:      } {loom.tag = "relu"}
// op=relu: only the relu nest.
// OP-LABEL: func.func @bias_relu
// OP:       affine.for %j = 0 to 20 {
// OP:       } {loom.tag = "add"}
// OP:       arith.maximumf
// OP:       } {loom.tag = "relu"}
// REMARK: vectorize.mlir:[[# @LINE + 4]]:5: remark: [loom-vectorize] nest 'add': vectorized loop %j by 8 (main 2 iterations, masked remainder of 4)
// REMARK: vectorize.mlir:[[# @LINE + 11]]:5: remark: [loom-vectorize] nest 'relu': vectorized loop %j by 8 (main 2 iterations, masked remainder of 4)
func.func @bias_relu(%x: memref<16x20xf32>, %bias: memref<16x1xf32>, %t: memref<16x20xf32>, %y: memref<16x20xf32>) {
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 20 {
      %a = affine.load %x[%i, %j] : memref<16x20xf32>
      %b = affine.load %bias[%i, 0] : memref<16x1xf32>
      %s = arith.addf %a, %b : f32
      affine.store %s, %t[%i, %j] : memref<16x20xf32>
    }
  } {loom.tag = "add"}
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 20 {
      %v = affine.load %t[%i, %j] : memref<16x20xf32>
      %zero = arith.constant 0.000000e+00 : f32
      %keep = arith.cmpf ugt, %v, %zero : f32
      %r = arith.select %keep, %v, %zero : f32
      affine.store %r, %y[%i, %j] : memref<16x20xf32>
    }
  } {loom.tag = "relu"}
  func.return
}

// -----

// f64 with width 4 (a 256-bit register): two vectors and a masked one of 2. The nest is
// the loop itself: its tag moves to the vector loop.
// W4-LABEL: func.func @f64
// W4:       %[[REST:.*]] = arith.constant 8 : index
// W4-NEXT:  %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf64>
// W4-NEXT:  affine.for %j = 0 to 8 step 4 {
// W4-NEXT:    %x = affine.vector_load %a[%j] : memref<10xf64>, vector<4xf64>
// W4-NEXT:    %y = affine.vector_load %b[%j] : memref<10xf64>, vector<4xf64>
// W4-NEXT:    %p = arith.mulf %x, %y : vector<4xf64>
// W4-NEXT:    affine.vector_store %p, %c[%j] : memref<10xf64>, vector<4xf64>
// W4-NEXT:  } {loom.tag = "mul"}
// W4-NEXT:  %[[N:.*]] = arith.constant 2 : index
// W4-NEXT:  %[[MASK:.*]] = vector.create_mask %[[N]] : vector<4xi1>
// W4-NEXT:  %[[X:.*]] = vector.maskedload %a[%[[REST]]], %[[MASK]], %[[ZERO]] : memref<10xf64>, vector<4xi1>, vector<4xf64> into vector<4xf64>
// W4-NEXT:  %[[Y:.*]] = vector.maskedload %b[%[[REST]]], %[[MASK]], %[[ZERO]]
// W4-NEXT:  %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : vector<4xf64>
// W4-NEXT:  vector.maskedstore %c[%[[REST]]], %[[MASK]], %[[P]] : memref<10xf64>, vector<4xi1>, vector<4xf64>
// W4-NEXT:  func.return
// REMARK: vectorize.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'mul': vectorized loop %j by 8 (main 1 iteration, masked remainder of 2)
func.func @f64(%a: memref<10xf64>, %b: memref<10xf64>, %c: memref<10xf64>) {
  affine.for %j = 0 to 10 {
    %x = affine.load %a[%j] : memref<10xf64>
    %y = affine.load %b[%j] : memref<10xf64>
    %p = arith.mulf %x, %y : f64
    affine.store %p, %c[%j] : memref<10xf64>
  } {loom.tag = "mul"}
  func.return
}

// -----

// A sum along the vectorized loop (c[i] += a[i, k] * b[i, k]; matmul along k is the
// same, when B is stored transposed): a vector accumulator starting at -0.0 in every
// lane, the masked lanes of the remainder kept from before (a shuffle), then one
// reassociating vector.reduction onto c[i]'s old value after the loop. The main loop
// has one iteration: its ops take its place (%k reads its lower bound).
// CHECK-LABEL: func.func @dot
// CHECK:      affine.for %i = 0 to 4 {
// CHECK-NEXT:   %[[REST:.*]] = arith.constant 8 : index
// CHECK-NEXT:   %[[NEG0:.*]] = arith.constant dense<-0.000000e+00> : vector<8xf32>
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:   %k = affine.apply affine_map<() -> (0)> ()
// CHECK-NEXT:   %x = affine.vector_load %a[%i, %k] : memref<4x13xf32>, vector<8xf32>
// CHECK-NEXT:   %y = affine.vector_load %b[%i, %k] : memref<4x13xf32>, vector<8xf32>
// CHECK-NEXT:   %[[ACC:.*]] = vector.fma %x, %y, %[[NEG0]] : vector<8xf32>
// CHECK-NEXT:   %[[N:.*]] = arith.constant 5 : index
// CHECK-NEXT:   %[[MASK:.*]] = vector.create_mask %[[N]] : vector<8xi1>
// CHECK-NEXT:   %[[X:.*]] = vector.maskedload %a[%i, %[[REST]]], %[[MASK]], %[[ZERO]]
// CHECK-NEXT:   %[[Y:.*]] = vector.maskedload %b[%i, %[[REST]]], %[[MASK]], %[[ZERO]]
// CHECK-NEXT:   %[[S:.*]] = vector.fma %[[X]], %[[Y]], %[[ACC]] : vector<8xf32>
// CHECK-NEXT:   %[[KEPT:.*]] = vector.shuffle %[[S]], %[[ACC]] [0, 1, 2, 3, 4, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK-NEXT:   %[[OLD:.*]] = affine.load %c[%i] : memref<4xf32>
// CHECK-NEXT:   %[[SUM:.*]] = vector.reduction <add>, %[[KEPT]], %[[OLD]] fastmath<reassoc> : vector<8xf32> into f32
// CHECK-NEXT:   affine.store %[[SUM]], %c[%i] : memref<4xf32>
// CHECK-NEXT: } {loom.tag = "dot"}
// REMARK: vectorize.mlir:[[# @LINE + 3]]:5: remark: [loom-vectorize] nest 'dot': vectorized loop %k by 8 (main 1 iteration, masked remainder of 5); sum into %c[%i] in a vector accumulator, reduced after the loop; the main loop's single iteration inlined
func.func @dot(%a: memref<4x13xf32>, %b: memref<4x13xf32>, %c: memref<4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %k = 0 to 13 {
      %x = affine.load %a[%i, %k] : memref<4x13xf32>
      %y = affine.load %b[%i, %k] : memref<4x13xf32>
      %acc = affine.load %c[%i] : memref<4xf32>
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      affine.store %s, %c[%i] : memref<4xf32>
    }
  } {loom.tag = "dot"}
  func.return
}

// -----

// The same sum carried in an iter_arg (as loom-hoist leaves it): reduced onto the
// iter_arg's initial value, which replaces the loop's result.
// CHECK-LABEL: func.func @dot_iter_args
// CHECK:      %[[ACC:.*]] = affine.for %k = 0 to 16 step 8 iter_args(%{{.*}} = %{{.*}}) -> (vector<8xf32>) {
// CHECK:      } {loom.tag = "dot"}
// CHECK:      %[[KEPT:.*]] = vector.shuffle %{{.*}}, %[[ACC]] [0, 1, 2, 3, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK-NEXT: %sum = vector.reduction <add>, %[[KEPT]], %init fastmath<reassoc> : vector<8xf32> into f32
// CHECK-NEXT: func.return %sum : f32
// REMARK: vectorize.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'dot': vectorized loop %k by 8 (main 2 iterations, masked remainder of 4); sum into iter_arg #0 in a vector accumulator, reduced after the loop
func.func @dot_iter_args(%a: memref<20xf32>, %b: memref<20xf32>, %init: f32) -> f32 {
  %sum = affine.for %k = 0 to 20 iter_args(%acc = %init) -> (f32) {
    %x = affine.load %a[%k] : memref<20xf32>
    %y = affine.load %b[%k] : memref<20xf32>
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    affine.yield %s : f32
  } {loom.tag = "dot"}
  func.return %sum : f32
}

// -----

// A sum whose remainder's size is only known at run time: the masked lanes are kept
// lane by lane (xDSL's arith.select takes no vector condition), under the affine.if.
// CHECK-LABEL: func.func @dot_tiled
// CHECK:      %[[R:.*]] = "affine.if"(%[[N:.*]]) <{condition = affine_set<(d0) : ((d0 + -1) >= 0)>}> ({
// CHECK:        %[[L0:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[LIVE0:.*]] = arith.cmpi slt, %[[L0]], %[[N]] : index
// CHECK-NEXT:   %[[NEW0:.*]] = vector.extract %[[S:.*]][0] : f32 from vector<8xf32>
// CHECK-NEXT:   %[[OLD0:.*]] = vector.extract %[[ACC:.*]][0] : f32 from vector<8xf32>
// CHECK-NEXT:   %[[LANE0:.*]] = arith.select %[[LIVE0]], %[[NEW0]], %[[OLD0]] : f32
// CHECK-NEXT:   %{{.*}} = vector.insert %[[LANE0]], %[[ACC]] [0] : f32 into vector<8xf32>
// CHECK:        %[[LAST:.*]] = vector.insert %{{.*}}, %{{.*}} [7] : f32 into vector<8xf32>
// CHECK-NEXT:   affine.yield %[[LAST]] : vector<8xf32>
// CHECK-NEXT: }, {
// CHECK-NEXT:   affine.yield %[[ACC]] : vector<8xf32>
// CHECK-NEXT: }) : (index) -> vector<8xf32>
// CHECK:      vector.reduction <add>, %[[R]], %{{.*}} fastmath<reassoc>
func.func @dot_tiled(%a: memref<100xf32>, %b: memref<100xf32>, %c: memref<1xf32>) {
  affine.for %kt = 0 to 100 step 32 {
    affine.for %k = affine_map<(d0) -> (d0)>(%kt) to min affine_map<(d0) -> (d0 + 32, 100)>(%kt) {
      %x = affine.load %a[%k] : memref<100xf32>
      %y = affine.load %b[%k] : memref<100xf32>
      %acc = affine.load %c[0] : memref<1xf32>
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      affine.store %s, %c[0] : memref<1xf32>
    }
  } {loom.tag = "dot"}
  func.return
}

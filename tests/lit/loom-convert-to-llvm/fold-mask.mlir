// RUN: loom-opt %s -p loom-convert-to-llvm --split-input-file | filecheck %s

// A mask of constant lanes is folded before the lowering (MLIR's canonicalization folds
// all-true and all-false masks): one lane on is a scalar load/store of lane 0, which is
// what a vectorized loop's remainder of one element is. As a 1-lane llvm.intr.masked.store
// LLVM's x86 code generation time grew as the 3.7th power of their count in a block.
// CHECK-LABEL: llvm.func @one_lane(
// CHECK-NOT:     llvm.icmp
// CHECK:         %[[L:.*]] = llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK:         %[[V:.*]] = llvm.insertelement %[[L]], %zero[%{{.*}} : i64] : vector<4xf64>
// CHECK:         %[[E:.*]] = "llvm.extractelement"(%[[V]], %{{.*}}) : (vector<4xf64>, i64) -> f64
// CHECK:         llvm.store %[[E]], %{{.*}} {alignment = 8 : i64} : f64, !llvm.ptr
// CHECK-NOT:     llvm.intr.masked
// CHECK:         llvm.return
func.func @one_lane(%A: memref<100xf64>, %j: index) {
  %one = arith.constant 1 : index
  %mask = vector.create_mask %one : vector<4xi1>
  %zero = arith.constant dense<0.000000e+00> : vector<4xf64>
  %v = vector.maskedload %A[%j], %mask, %zero : memref<100xf64>, vector<4xi1>, vector<4xf64> into vector<4xf64>
  vector.maskedstore %A[%j], %mask, %v : memref<100xf64>, vector<4xi1>, vector<4xf64>
  func.return
}

// -----

// Every lane on (a constant at least the width): a plain vector load and store.
// CHECK-LABEL: llvm.func @all_lanes(
// CHECK-NOT:     llvm.icmp
// CHECK:         %[[V:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<8xf32>
// CHECK:         llvm.store %[[V]], %{{.*}} {alignment = 4 : i64} : vector<8xf32>, !llvm.ptr
// CHECK-NEXT:    llvm.return
func.func @all_lanes(%A: memref<100xf32>, %j: index) {
  %nine = arith.constant 9 : index
  %mask = vector.create_mask %nine : vector<8xi1>
  %zero = arith.constant dense<0.000000e+00> : vector<8xf32>
  %v = vector.maskedload %A[%j], %mask, %zero : memref<100xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  vector.maskedstore %A[%j], %mask, %v : memref<100xf32>, vector<8xi1>, vector<8xf32>
  func.return
}

// -----

// No lane on (a constant of 0 or less): the load is its pass-through, the store is gone.
// CHECK-LABEL: llvm.func @no_lane(
// CHECK-NOT:     llvm.icmp
// CHECK-NOT:     llvm.load
// CHECK-NOT:     llvm.store
// CHECK-NOT:     llvm.intr.masked
// CHECK:         llvm.return %zero : vector<8xf32>
func.func @no_lane(%A: memref<100xf32>, %j: index) -> vector<8xf32> {
  %none = arith.constant -2 : index
  %mask = vector.create_mask %none : vector<8xi1>
  %zero = arith.constant dense<0.000000e+00> : vector<8xf32>
  %v = vector.maskedload %A[%j], %mask, %zero : memref<100xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  vector.maskedstore %A[%j], %mask, %v : memref<100xf32>, vector<8xi1>, vector<8xf32>
  func.return %v : vector<8xf32>
}

// -----

// Two or more lanes, but not all, stay masked.
// CHECK-LABEL: llvm.func @some_lanes(
// CHECK:         %mask = llvm.icmp "slt"
// CHECK:         llvm.intr.masked.load
// CHECK:         llvm.intr.masked.store
func.func @some_lanes(%A: memref<100xf32>, %j: index) {
  %three = arith.constant 3 : index
  %mask = vector.create_mask %three : vector<8xi1>
  %zero = arith.constant dense<0.000000e+00> : vector<8xf32>
  %v = vector.maskedload %A[%j], %mask, %zero : memref<100xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  vector.maskedstore %A[%j], %mask, %v : memref<100xf32>, vector<8xi1>, vector<8xf32>
  func.return
}

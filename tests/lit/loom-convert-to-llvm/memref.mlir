// RUN: loom-opt %s -p loom-convert-to-llvm --split-input-file | filecheck %s

// A memref argument is a bare pointer with noalias/nocapture; A[i, j] is
// getelementptr inbounds with the index i*5 + j computed in i64 (nsw).
func.func @load_store(%A: memref<7x5xf32>, %i: index, %j: index) {
  %v = memref.load %A[%i, %j] : memref<7x5xf32>
  memref.store %v, %A[%j, %i] : memref<7x5xf32>
  func.return
}

// CHECK-LABEL: llvm.func @load_store(
// CHECK-SAME:    %A: !llvm.ptr {llvm.noalias, llvm.nocapture}, %i: i64, %j: i64)
// CHECK:         %[[S0:.*]] = llvm.mlir.constant(5) : i64
// CHECK-NEXT:    %[[M0:.*]] = llvm.mul %i, %[[S0]] overflow<nsw> : i64
// CHECK-NEXT:    %[[L0:.*]] = llvm.add %[[M0]], %j overflow<nsw> : i64
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr inbounds %A[%[[L0]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %v = llvm.load %[[P0]] {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK:         %[[M1:.*]] = llvm.mul %j, %{{.*}} overflow<nsw> : i64
// CHECK-NEXT:    %[[L1:.*]] = llvm.add %[[M1]], %i overflow<nsw> : i64
// CHECK-NEXT:    %[[P1:.*]] = llvm.getelementptr inbounds %A[%[[L1]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %v, %[[P1]] {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK-NEXT:    llvm.return

// -----

// A strided layout: the pointer is the base of the buffer, the layout offset is part of
// the index (3 + i*8 + j*2).
func.func @strided(%A: memref<4x4xf64, strided<[8, 2], offset: 3>>, %i: index, %j: index) -> f64 {
  %v = memref.load %A[%i, %j] : memref<4x4xf64, strided<[8, 2], offset: 3>>
  func.return %v : f64
}

// CHECK-LABEL: llvm.func @strided(
// CHECK-SAME:    %A: !llvm.ptr {llvm.noalias, llvm.nocapture}, %i: i64, %j: i64) -> f64
// CHECK:         %[[MI:.*]] = llvm.mul %i, %{{.*}} overflow<nsw> : i64
// CHECK:         %[[MJ:.*]] = llvm.mul %j, %{{.*}} overflow<nsw> : i64
// CHECK-NEXT:    %[[SUM:.*]] = llvm.add %[[MI]], %[[MJ]] overflow<nsw> : i64
// CHECK-NEXT:    %[[OFF:.*]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %[[LIN:.*]] = llvm.add %[[SUM]], %[[OFF]] overflow<nsw> : i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %A[%[[LIN]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:    %v = llvm.load %[[P]] {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK-NEXT:    llvm.return %v : f64

// -----

// Constant indices fold into a constant GEP index: 2*5 + 3 + offset 1 = 14.
func.func @constant_index(%A: memref<7x5xi32, strided<[5, 1], offset: 1>>) -> i32 {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %v = memref.load %A[%c2, %c3] : memref<7x5xi32, strided<[5, 1], offset: 1>>
  func.return %v : i32
}

// CHECK-LABEL: llvm.func @constant_index(
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %A[14] : (!llvm.ptr) -> !llvm.ptr, i32
// CHECK-NEXT:    %v = llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr -> i32

// -----

// alloc → aligned_alloc(64, size rounded up to 64 bytes), tagged with its site number,
// name and type; dealloc → free. 3x5xf32 is 60 bytes → 64; the declarations are added
// once. (The status the function returns, and the checks: alloc-failure.mlir.)
func.func @alloc_dealloc() {
  %t = memref.alloc() : memref<3x5xf32>
  %u = memref.alloc() : memref<100xf64>
  memref.dealloc %t : memref<3x5xf32>
  memref.dealloc %u : memref<100xf64>
  func.return
}

// CHECK-LABEL: llvm.func @alloc_dealloc() -> i32
// CHECK:         %[[A0:.*]] = llvm.mlir.constant(64) : i64
// CHECK-NEXT:    %[[S0:.*]] = llvm.mlir.constant(64) : i64
// CHECK-NEXT:    %t = llvm.call @aligned_alloc(%[[A0]], %[[S0]]) {alloc_site = {site = 1 : i32, name = "t", type = memref<3x5xf32>, bytes = 60 : i64}} : (i64, i64) -> !llvm.ptr
// CHECK:         %[[S1:.*]] = llvm.mlir.constant(832) : i64
// CHECK-NEXT:    %u = llvm.call @aligned_alloc(%{{.*}}, %[[S1]]) {alloc_site = {site = 2 : i32, name = "u", type = memref<100xf64>, bytes = 800 : i64}} : (i64, i64) -> !llvm.ptr
// CHECK:         llvm.call @free(%t) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.call @free(%u) : (!llvm.ptr) -> ()
// CHECK:       llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK-NEXT:  llvm.func @free(!llvm.ptr)

// -----

// alloca → llvm.alloca of the element count.
func.func @alloca(%x: f32) -> f32 {
  %c1 = arith.constant 1 : index
  %t = memref.alloca() : memref<4xf32>
  memref.store %x, %t[%c1] : memref<4xf32>
  %v = memref.load %t[%c1] : memref<4xf32>
  func.return %v : f32
}

// CHECK-LABEL: llvm.func @alloca(
// CHECK:         %[[N:.*]] = llvm.mlir.constant(4) : i64
// CHECK-NEXT:    %t = llvm.alloca %[[N]] x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// CHECK:         llvm.getelementptr inbounds %t[1] : (!llvm.ptr) -> !llvm.ptr, f32

// -----

// Views keep the base pointer: the subview's type carries the offset (1*5 + 2 = 7).
func.func @views(%A: memref<7x5xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %s = memref.subview %A[1, 2] [3, 3] [1, 1] : memref<7x5xf32> to memref<3x3xf32, strided<[5, 1], offset: 7>>
  %v = memref.load %s[%c0, %c0] : memref<3x3xf32, strided<[5, 1], offset: 7>>
  %r = memref.reinterpret_cast %A to offset: [0], sizes: [35], strides: [1] : memref<7x5xf32> to memref<35xf32>
  %w = memref.load %r[%c0] : memref<35xf32>
  %sum = arith.addf %v, %w : f32
  func.return %sum : f32
}

// CHECK-LABEL: llvm.func @views(
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %A[7] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK-NEXT:    %v = llvm.load %[[P]]
// CHECK:         %[[Q:.*]] = llvm.getelementptr inbounds %A[0] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK-NEXT:    %w = llvm.load %[[Q]]

// -----

// memref.dim of a static memref is a constant.
func.func @dim(%A: memref<7x5xf32>) -> index {
  %c1 = arith.constant 1 : index
  %d = memref.dim %A, %c1 : memref<7x5xf32>
  func.return %d : index
}

// CHECK-LABEL: llvm.func @dim(
// CHECK:         %[[D:.*]] = llvm.mlir.constant(5) : i64
// CHECK-NEXT:    llvm.return %[[D]] : i64

// -----

// loom.prefetch: llvm.prefetch.p0(ptr, rw, locality, 1 = data). The address may lie past
// the memref (the next tile's, at the last one): the getelementptr is not inbounds.
func.func @prefetch(%A: memref<7x5xf32>, %i: index, %j: index) {
  loom.prefetch %A[%i, %j], write, locality<3>, data : memref<7x5xf32>
  loom.prefetch %A[%j, %i], read, locality<1>, data : memref<7x5xf32>
  func.return
}

// CHECK-LABEL: llvm.func @prefetch(
// CHECK:         %[[L0:.*]] = llvm.add %{{.*}}, %j overflow<nsw> : i64
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr %A[%[[L0]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[W:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:    %[[L3:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT:    %[[D:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.prefetch.p0"(%[[P0]], %[[W]], %[[L3]], %[[D]]) : (!llvm.ptr, i32, i32, i32) -> ()
// CHECK:         %[[P1:.*]] = llvm.getelementptr %A[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[R:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    %[[L1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:    %{{.*}} = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:    llvm.call_intrinsic "llvm.prefetch.p0"(%[[P1]], %[[R]], %[[L1]], %{{.*}}) : (!llvm.ptr, i32, i32, i32) -> ()
// CHECK-NEXT:    llvm.return

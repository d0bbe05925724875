// RUN: loom-opt %s -p loom-convert-to-llvm --split-input-file | filecheck %s

// cf branches with block arguments → llvm.br / llvm.cond_br with operands; index block
// arguments become i64.
func.func @sum_to(%n: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  cf.br ^loop(%c0, %c0 : index, index)
^loop(%i: index, %acc: index):
  %more = arith.cmpi slt, %i, %n : index
  cf.cond_br %more, ^body, ^exit(%acc : index)
^body:
  %acc2 = arith.addi %acc, %i : index
  %i2 = arith.addi %i, %c1 : index
  cf.br ^loop(%i2, %acc2 : index, index)
^exit(%r: index):
  func.return %r : index
}

// CHECK-LABEL: llvm.func @sum_to(%n: i64) -> i64
// CHECK-NEXT:    %c0 = llvm.mlir.constant(0) : i64
// CHECK-NEXT:    %c1 = llvm.mlir.constant(1) : i64
// CHECK-NEXT:    llvm.br ^[[LOOP:.*]](%c0, %c0 : i64, i64)
// CHECK-NEXT:  ^[[LOOP]](%i: i64, %acc: i64):
// CHECK-NEXT:    %more = llvm.icmp "slt" %i, %n : i64
// CHECK-NEXT:    llvm.cond_br %more, ^[[BODY:.*]], ^[[EXIT:.*]](%acc : i64)
// CHECK-NEXT:  ^[[BODY]]:
// CHECK-NEXT:    %acc2 = llvm.add %acc, %i : i64
// CHECK-NEXT:    %i2 = llvm.add %i, %c1 : i64
// CHECK-NEXT:    llvm.br ^[[LOOP]](%i2, %acc2 : i64, i64)
// CHECK-NEXT:  ^[[EXIT]](%r: i64):
// CHECK-NEXT:    llvm.return %r : i64

// -----

// A memref block argument (e.g. from an scf.if that yields a memref) is a pointer too.
func.func @pick(%c: i1, %A: memref<4xf32>, %B: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  cf.cond_br %c, ^join(%A : memref<4xf32>), ^join(%B : memref<4xf32>)
^join(%M: memref<4xf32>):
  %v = memref.load %M[%c0] : memref<4xf32>
  func.return %v : f32
}

// CHECK-LABEL: llvm.func @pick(
// CHECK:         llvm.cond_br %c, ^[[JOIN:.*]](%A : !llvm.ptr), ^[[JOIN]](%B : !llvm.ptr)
// CHECK-NEXT:  ^[[JOIN]](%M: !llvm.ptr):
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %M[0] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK-NEXT:    %v = llvm.load %[[P]]

// -----

// func.call → llvm.call; memref arguments pass the pointer; private declarations become
// external llvm.func declarations, private definitions internal ones.
func.func private @external(memref<8xf32>, index) -> f32

func.func private @helper(%x: f32) -> f32 {
  func.return %x : f32
}

func.func @caller(%A: memref<8xf32>) -> f32 {
  %c3 = arith.constant 3 : index
  %r = func.call @external(%A, %c3) : (memref<8xf32>, index) -> f32
  %s = func.call @helper(%r) : (f32) -> f32
  func.return %s : f32
}

// CHECK:       llvm.func @external(!llvm.ptr, i64) -> f32
// CHECK:       llvm.func internal @helper(%x: f32) -> f32
// CHECK-LABEL: llvm.func @caller(%A: !llvm.ptr {llvm.noalias, llvm.nocapture}) -> f32
// CHECK-NEXT:    %c3 = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %r = llvm.call @external(%A, %c3) : (!llvm.ptr, i64) -> f32
// CHECK-NEXT:    %s = llvm.call @helper(%r) : (f32) -> f32
// CHECK-NEXT:    llvm.return %s : f32

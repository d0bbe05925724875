// RUN: loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-fuse-epilogue' --split-input-file --remarks 2>&1 | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=direct,im2col}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=TEXTBOOK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse},loom-fuse-epilogue' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=SCHEDULED
// RUN: not loom-opt %s -p loom-fuse-epilogue --split-input-file 2>&1 | filecheck %s --check-prefix=UNLOWERED
// RUN: not loom-opt %s -p 'loom-bufferize,convert-loom-to-affine,loom-interchange{order=0,2,1 op=matmul},loom-vectorize{width=8 op=matmul},loom-fuse-epilogue' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=VECTOR

// What loom-fuse-epilogue refuses: a remark at the elementwise nest saying why, and the
// nests left as they were (never a wrong result).

// The add reads C transposed: not the element the matmul writes.
// CHECK-LABEL: func.func @transposed(
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         } {loom.tag = "add"}
// CHECK: refuse.mlir:[[# @LINE + 15]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 15]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): add (line [[# @LINE + 15]]) reads %c[%j, %i], not the element it writes (a transpose or a broadcast of %c)
func.func @transposed(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %s: memref<8x8xf32>) {
  %c = memref.alloc() : memref<8x8xf32>
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x8xf32>
        %z = affine.load %c[%i, %j] : memref<8x8xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %z, %p : f32
        affine.store %q, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %c[%j, %i] : memref<8x8xf32>
      %w = affine.load %b[%i, %j] : memref<8x8xf32>
      %t = arith.addf %v, %w : f32
      affine.store %t, %s[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "add"}
  memref.dealloc %c : memref<8x8xf32>
  func.return
}

// -----

// C is also a result of the function: it must still be written.
// CHECK-LABEL: func.func @returned(
// CHECK:         } {loom.tag = "add"}
// CHECK: refuse.mlir:[[# @LINE + 4]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 4]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): %c is a result of the function: it must still be written
// TEXTBOOK-LABEL: func.func @returned(
func.func @returned(%x: tensor<4x5xf32>, %w: tensor<5x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %c = loom.matmul %x, %w : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %s = loom.add %c, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  func.return %c, %s : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// C read by two elementwise ops: neither can take it over.
// CHECK-LABEL: func.func @two_readers(
// CHECK:         } {loom.tag = "add"}
// CHECK:         } {loom.tag = "mul"}
// CHECK: refuse.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 5]]) not fused into the 'matmul' nest (line [[# @LINE + 4]]): %c is also used by nest 'mul' (line [[# @LINE + 6]]): it must still be written
// CHECK: refuse.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] mul (line [[# @LINE + 5]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): %c is also used by nest 'add' (line [[# @LINE + 4]]): it must still be written
// TEXTBOOK-LABEL: func.func @two_readers(
func.func @two_readers(%x: tensor<4x5xf32>, %w: tensor<5x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %c = loom.matmul %x, %w : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %s = loom.add %c, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %m = loom.mul %c, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  func.return %s, %m : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// The sum S is also a result: the add is fused (the matmul writes %s), the relu that
// reads S stays a nest of its own.
// CHECK-LABEL: func.func @intermediate_returned(
// CHECK-NOT:     loom.tag = "add"
// CHECK:         } {loom.tag = "relu"}
// CHECK-NOT:     remark: [loom-fuse-epilogue] relu
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 3]]): applied where it writes each element of %c for the last time, 1 store (1 in the last iteration of %k), into %s; %c no longer written; the zero fill dropped: the loads that read it read zeros; relu (line [[# @LINE + 5]]) left as its own nest: %s is a result of the function: it must still be written
// TEXTBOOK-LABEL: func.func @intermediate_returned(
func.func @intermediate_returned(%x: tensor<4x5xf32>, %w: tensor<5x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %c = loom.matmul %x, %w : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %s = loom.add %c, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %r = loom.relu %s : tensor<4x6xf32>
  func.return %s, %r : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// A reduction after the matmul (row sums of C into %s[%i], written in every iteration of
// %j): not an elementwise nest.
// CHECK-LABEL: func.func @row_sums(
// CHECK:         } {loom.tag = "add"}
// CHECK: refuse.mlir:[[# @LINE + 15]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 15]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): add (line [[# @LINE + 15]]) is not the textbook elementwise nest (one store, at its iteration's element)
func.func @row_sums(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %s: memref<8xf32>) {
  %c = memref.alloc() : memref<8x8xf32>
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x8xf32>
        %z = affine.load %c[%i, %j] : memref<8x8xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %z, %p : f32
        affine.store %q, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %c[%i, %j] : memref<8x8xf32>
      %w = affine.load %s[%i] : memref<8xf32>
      %t = arith.addf %v, %w : f32
      affine.store %t, %s[%i] : memref<8xf32>
    }
  } {loom.tag = "add"}
  memref.dealloc %c : memref<8x8xf32>
  func.return
}

// -----

// The add's operand %d is written after the matmul: the epilogue, run inside the
// matmul, would read it before it is written.
// CHECK-LABEL: func.func @operand_after(
// CHECK:         } {loom.tag = "add"}
// CHECK: refuse.mlir:[[# @LINE + 21]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 21]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): its operand %d is written by nest 'copy' (line [[# @LINE + 15]]) after the producer
func.func @operand_after(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %d: memref<8x8xf32>, %s: memref<8x8xf32>) {
  %c = memref.alloc() : memref<8x8xf32>
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %x = affine.load %a[%i, %k] : memref<8x8xf32>
        %y = affine.load %b[%k, %j] : memref<8x8xf32>
        %z = affine.load %c[%i, %j] : memref<8x8xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %z, %p : f32
        affine.store %q, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %a[%i, %j] : memref<8x8xf32>
      affine.store %v, %d[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "copy"}
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %v = affine.load %c[%i, %j] : memref<8x8xf32>
      %w = affine.load %d[%i, %j] : memref<8x8xf32>
      %t = arith.addf %v, %w : f32
      affine.store %t, %s[%i, %j] : memref<8x8xf32>
    }
  } {loom.tag = "add"}
  memref.dealloc %c : memref<8x8xf32>
  func.return
}

// -----

// An empty reduction (K = 0): C is the zero fill, which the epilogue would not see; and
// the fill stays (nothing else writes C).
// CHECK-LABEL: func.func @empty_k(
// CHECK:         } {loom.tag = "matmul.init"}
// CHECK:         } {loom.tag = "add"}
// CHECK: refuse.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 5]]) not fused into the 'matmul' nest (line [[# @LINE + 4]]): loop %k of nest 'matmul' has no iterations (a zero-size dimension): the zero fill would be the last write of %c
// CHECK: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-fuse-epilogue] the zero fill of %c kept: loop %k of nest 'matmul' has no iterations (a zero-size dimension): the zero fill would be the last write of %c
// TEXTBOOK-LABEL: func.func @empty_k(
func.func @empty_k(%x: tensor<4x0xf32>, %w: tensor<0x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %c = loom.matmul %x, %w : (tensor<4x0xf32>, tensor<0x4xf32>) -> tensor<4x4xf32>
  %s = loom.add %c, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}

// -----

// The conv2d nest as convert-loom-to-affine writes it (loom-default with both strategies
// skipped leaves it so): its store sits under the padding guard, in some iterations only.
// With skip=fuse, loom-default vectorizes the epilogue nests: then they are no longer the
// textbook ones this pass reads.
// TEXTBOOK-LABEL: func.func @conv(
// TEXTBOOK:         } {loom.tag = "add"}
// TEXTBOOK: refuse.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 5]]) not fused into the 'conv2d' nest (line [[# @LINE + 4]]): a store of %y in nest 'conv2d' sits under 'affine.if' (line [[# @LINE + 4]]): it runs in some iterations only
// SCHEDULED-LABEL: func.func @conv(
// SCHEDULED: refuse.mlir:[[# @LINE + 3]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 3]]) not fused into the 'direct.out' nest (line [[# @LINE + 2]]): add (line [[# @LINE + 3]]) is not the textbook elementwise nest (already scheduled: vectorized?)
func.func @conv(%x: tensor<1x2x6x6xf32>, %w: tensor<4x2x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  %s = loom.add %y, %b : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
  func.return %s : tensor<1x4x6x6xf32>
}

// -----

// The matmul's stores are vectors along %j; the add's operand %d is read transposed,
// 16 elements apart along them: no vector load reads it (the scalar textbook nests
// take it, see the first RUN line).
// CHECK-LABEL: func.func @strided_operand(
// CHECK:         %dt = memref.reinterpret_cast %d
// CHECK:         affine.load %dt[%i, %j] : memref<16x16xf32, strided<[1, 16]>>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// CHECK: remark: [loom-fuse-epilogue] fused add
// VECTOR: refuse.mlir:[[# @LINE + 5]]:3: remark: [loom-fuse-epilogue] add (line [[# @LINE + 5]]) not fused into the 'matmul' nest (line [[# @LINE + 3]]): operand %dt of add (line [[# @LINE + 5]]) is read 16 elements apart along the vector (only 0, a broadcast, or 1)
// TEXTBOOK-LABEL: func.func @strided_operand(
func.func @strided_operand(%x: tensor<16x5xf32>, %w: tensor<5x16xf32>, %d: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %c = loom.matmul %x, %w : (tensor<16x5xf32>, tensor<5x16xf32>) -> tensor<16x16xf32>
  %dt = loom.transpose %d {perm = array<i64: 1, 0>} : tensor<16x16xf32> -> tensor<16x16xf32>
  %s = loom.add %c, %dt : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %s : tensor<16x16xf32>
}

// -----

// The loom ops not lowered yet: an error saying which passes to put first.
// UNLOWERED: error: loom-fuse-epilogue: the module still holds loom ops ('loom.relu' on tensors): the lowering to the affine loop nests that schedule passes work on has not run; put loom-bufferize,convert-loom-to-affine before loom-fuse-epilogue
func.func @unlowered(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = loom.relu %x : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}

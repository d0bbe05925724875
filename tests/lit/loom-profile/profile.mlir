// RUN: loom-opt %s -p loom-profile | filecheck %s
// RUN: loom-opt %s -p loom-profile,loom-lower-affine,convert-scf-to-cf,loom-convert-to-llvm -t llvm | filecheck %s --check-prefix=LLVM

// Each top-level nest and each call of a private function (an outlined nest) gets a
// slot: the counter read before and after, the difference and one call added to its row
// of the counters, a memref appended to the public function's arguments. The module
// says what each slot times: the nest's tag (a call: its callee's nests', joined by +) and
// where it came from. Private functions are not instrumented themselves.
// CHECK: builtin.module attributes {loom.profile = {f = [{tag = "add", location = "{{.*}}profile.mlir:[[# @LINE + 19]]:3"}, {tag = "relu", location = "{{.*}}profile.mlir:[[# @LINE + 24]]:3"}]}}
// CHECK: func.func @f(%a: memref<8xf32>, %b: memref<8xf32>, %loom_profile: memref<2x2xi64>)
// CHECK-NEXT: %[[T0:.*]] = loom.ticks : i64
// CHECK-NEXT: affine.for
// CHECK: {loom.tag = "add"}
// CHECK-NEXT: %[[T1:.*]] = loom.ticks : i64
// CHECK: %[[D:.*]] = arith.subi %[[T1]], %[[T0]] : i64
// CHECK-NEXT: %[[OLD:.*]] = memref.load %loom_profile[%[[ROW:.*]], %[[COL:.*]]] : memref<2x2xi64>
// CHECK-NEXT: %[[NEW:.*]] = arith.addi %[[OLD]], %[[D]] : i64
// CHECK-NEXT: memref.store %[[NEW]], %loom_profile[%[[ROW]], %[[COL]]] : memref<2x2xi64>
// CHECK: loom.ticks
// CHECK-NEXT: func.call @nest(%b) : (memref<8xf32>) -> ()
// CHECK-NEXT: loom.ticks
// CHECK: func.func private @nest(%x: memref<8xf32>)
// CHECK-NOT: loom.ticks
// CHECK: func.return
// LLVM: define void @f(ptr {{.*}}%a, ptr {{.*}}%b, ptr {{.*}}%loom_profile)
// LLVM: call i64 @llvm.readcyclecounter()
func.func @f(%a: memref<8xf32>, %b: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %x = affine.load %a[%i] : memref<8xf32>
    %y = arith.addf %x, %x : f32
    affine.store %y, %b[%i] : memref<8xf32>
  } {loom.tag = "add"}
  func.call @nest(%b) : (memref<8xf32>) -> ()
  func.return
}
func.func private @nest(%x: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %v = affine.load %x[%i] : memref<8xf32>
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    affine.store %r, %x[%i] : memref<8xf32>
  } {loom.tag = "relu"}
  func.return
}

// RUN: loom-opt %s -p loom-convert-to-llvm --split-input-file | filecheck %s

// math.fma → llvm.intr.fma; ops with an llvm intrinsic op use it, fastmath kept.
func.func @math_ops(%a: f32, %b: f32, %c: f32) -> f32 {
  %0 = math.fma %a, %b, %c : f32
  %1 = math.sqrt %0 fastmath<afn> : f32
  %2 = math.exp %1 : f32
  %3 = math.log %2 : f32
  %4 = math.absf %3 : f32
  %5 = math.powf %4, %a : f32
  %6 = math.floor %5 : f32
  %7 = math.tanh %6 : f32
  %8 = math.rsqrt %7 : f32
  func.return %8 : f32
}

// CHECK-LABEL: llvm.func @math_ops(%a: f32, %b: f32, %c: f32) -> f32
// CHECK-NEXT:    %[[FMA:.*]] = llvm.intr.fma(%a, %b, %c) : (f32, f32, f32) -> f32
// CHECK-NEXT:    %[[SQRT:.*]] = llvm.intr.sqrt(%[[FMA]]) {fastmathFlags = #llvm.fastmath<afn>} : (f32) -> f32
// CHECK-NEXT:    %[[EXP:.*]] = llvm.intr.exp(%[[SQRT]]) : (f32) -> f32
// CHECK-NEXT:    %[[LOG:.*]] = llvm.intr.log(%[[EXP]]) : (f32) -> f32
// CHECK-NEXT:    %[[ABS:.*]] = llvm.intr.fabs(%[[LOG]]) : (f32) -> f32
// CHECK-NEXT:    %[[POW:.*]] = llvm.intr.pow(%[[ABS]], %a) : (f32, f32) -> f32
// CHECK-NEXT:    %[[FLOOR:.*]] = llvm.intr.floor(%[[POW]]) : (f32) -> f32
// CHECK-NEXT:    %[[TANH:.*]] = llvm.call_intrinsic "llvm.tanh.f32"(%[[FLOOR]]) : (f32) -> f32
// CHECK-NEXT:    %[[S:.*]] = llvm.intr.sqrt(%[[TANH]]) : (f32) -> f32
// CHECK-NEXT:    %[[ONE:.*]] = llvm.mlir.constant(1.000000e+00 : f32) : f32
// CHECK-NEXT:    %[[RSQRT:.*]] = llvm.fdiv %[[ONE]], %[[S]] : f32
// CHECK-NEXT:    llvm.return %[[RSQRT]] : f32

// -----

// Functions without an intrinsic call libm; integer ops use the integer intrinsics.
func.func @libm_and_int(%x: f64, %n: i32) -> f64 {
  %0 = math.erf %x : f64
  %1 = math.absi %n : i32
  %2 = math.ctpop %1 : i32
  %3 = math.fpowi %0, %2 : f64, i32
  func.return %3 : f64
}

// CHECK-LABEL: llvm.func @libm_and_int(%x: f64, %n: i32) -> f64
// CHECK-NEXT:    %[[ERF:.*]] = llvm.call @erf(%x) : (f64) -> f64
// CHECK-NEXT:    %[[F:.*]] = llvm.mlir.constant(false) : i1
// CHECK-NEXT:    %[[ABS:.*]] = llvm.call_intrinsic "llvm.abs.i32"(%n, %[[F]]) : (i32, i1) -> i32
// CHECK-NEXT:    %[[POP:.*]] = llvm.call_intrinsic "llvm.ctpop.i32"(%[[ABS]]) : (i32) -> i32
// CHECK-NEXT:    %{{.*}} = llvm.call_intrinsic "llvm.powi.f64.i32"(%[[ERF]], %[[POP]]) : (f64, i32) -> f64
// CHECK:       llvm.func @erf(f64) -> f64

// RUN: loom-opt %s -t llvm | filecheck %s

// Function attributes and linkage from llvm.func properties (xDSL's emitter drops them),
// and block arguments as phis.
builtin.module {
  llvm.func internal @helper(%x: f64) -> f64 attributes {no_unwind, no_inline, passthrough = ["norecurse", ["denormal-fp-math", "preserve-sign"]], target_cpu = "x86-64-v3"} {
    %r = llvm.fmul %x, %x {fastmathFlags = #llvm.fastmath<contract>} : f64
    llvm.return %r : f64
  }
  llvm.func @entry(%x: f64, %c: i1) -> f64 attributes {no_unwind} {
    llvm.cond_br %c, ^a, ^b(%x : f64)
  ^a:
    %y = llvm.call @helper(%x) : (f64) -> f64
    llvm.br ^b(%y : f64)
  ^b(%v: f64):
    llvm.return %v : f64
  }
}

// CHECK:       define internal double @helper(double %x) #[[H:[0-9]+]] {
// CHECK:         %r = fmul contract double %x, %x
// CHECK:       define double @entry(double %x, i1 %c) #[[E:[0-9]+]] {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    br i1 %c, label %a, label %b
// CHECK:       a:
// CHECK-NEXT:    %y = call double @helper(double %x)
// CHECK-NEXT:    br label %b
// CHECK:       b:
// CHECK-NEXT:    %v = phi double [ %x, %entry ], [ %y, %a ]
// CHECK-NEXT:    ret double %v
// CHECK-DAG:   attributes #[[H]] = { noinline norecurse nounwind "denormal-fp-math"="preserve-sign" "target-cpu"="x86-64-v3" }
// CHECK-DAG:   attributes #[[E]] = { nounwind }

// RUN: loom-opt %s -p loom-convert-to-llvm --split-input-file | filecheck %s

// Float arithmetic, with the fastmath flags carried over.
func.func @float_ops(%a: f32, %b: f32) -> f32 {
  %0 = arith.addf %a, %b : f32
  %1 = arith.subf %0, %b fastmath<fast> : f32
  %2 = arith.mulf %1, %a fastmath<contract> : f32
  %3 = arith.divf %2, %b : f32
  %4 = arith.negf %3 : f32
  %5 = arith.maximumf %4, %a : f32
  %6 = arith.minnumf %5, %b : f32
  %7 = arith.maxnumf %6, %a : f32
  %8 = arith.minimumf %7, %b : f32
  func.return %8 : f32
}

// CHECK-LABEL: llvm.func @float_ops(%a: f32, %b: f32) -> f32
// CHECK-NEXT:    %0 = llvm.fadd %a, %b : f32
// CHECK-NEXT:    %1 = llvm.fsub %0, %b {fastmathFlags = #llvm.fastmath<fast>} : f32
// CHECK-NEXT:    %2 = llvm.fmul %1, %a {fastmathFlags = #llvm.fastmath<contract>} : f32
// CHECK-NEXT:    %3 = llvm.fdiv %2, %b : f32
// CHECK-NEXT:    %4 = llvm.fneg %3 : f32
// CHECK-NEXT:    %5 = llvm.call_intrinsic "llvm.maximum.f32"(%4, %a) : (f32, f32) -> f32
// CHECK-NEXT:    %6 = llvm.intr.minnum(%5, %b) : (f32, f32) -> f32
// CHECK-NEXT:    %7 = llvm.intr.maxnum(%6, %a) : (f32, f32) -> f32
// CHECK-NEXT:    %8 = llvm.call_intrinsic "llvm.minimum.f32"(%7, %b) : (f32, f32) -> f32
// CHECK-NEXT:    llvm.return %8 : f32

// -----

// Integer arithmetic on i32 and on index (→ i64), overflow flags kept.
func.func @int_ops(%a: i32, %b: i32, %i: index, %j: index) -> index {
  %0 = arith.addi %a, %b overflow<nsw> : i32
  %1 = arith.subi %0, %b : i32
  %2 = arith.muli %1, %a : i32
  %3 = arith.divsi %2, %b : i32
  %4 = arith.divui %3, %b : i32
  %5 = arith.remsi %4, %b : i32
  %6 = arith.remui %5, %b : i32
  %7 = arith.andi %6, %a : i32
  %8 = arith.ori %7, %a : i32
  %9 = arith.xori %8, %a : i32
  %10 = arith.shli %9, %b : i32
  %11 = arith.shrsi %10, %b : i32
  %12 = arith.shrui %11, %b : i32
  %13 = arith.addi %i, %j : index
  %14 = arith.muli %13, %j overflow<nsw, nuw> : index
  func.return %14 : index
}

// CHECK-LABEL: llvm.func @int_ops(%a: i32, %b: i32, %i: i64, %j: i64) -> i64
// CHECK-NEXT:    %0 = llvm.add %a, %b overflow<nsw> : i32
// CHECK-NEXT:    %1 = llvm.sub %0, %b : i32
// CHECK-NEXT:    %2 = llvm.mul %1, %a : i32
// CHECK-NEXT:    %3 = llvm.sdiv %2, %b : i32
// CHECK-NEXT:    %4 = llvm.udiv %3, %b : i32
// CHECK-NEXT:    %5 = llvm.srem %4, %b : i32
// CHECK-NEXT:    %6 = llvm.urem %5, %b : i32
// CHECK-NEXT:    %7 = llvm.and %6, %a : i32
// CHECK-NEXT:    %8 = llvm.or %7, %a : i32
// CHECK-NEXT:    %9 = llvm.xor %8, %a : i32
// CHECK-NEXT:    %10 = llvm.shl %9, %b : i32
// CHECK-NEXT:    %11 = llvm.ashr %10, %b : i32
// CHECK-NEXT:    %12 = llvm.lshr %11, %b : i32
// CHECK-NEXT:    %13 = llvm.add %i, %j : i64
// CHECK-NEXT:    %14 = llvm.mul %13, %j overflow<nsw,nuw> : i64
// CHECK-NEXT:    llvm.return %14 : i64

// -----

// Comparisons and select; integer min/max become icmp + select.
func.func @cmp_select(%a: i32, %b: i32, %x: f64, %y: f64) -> f64 {
  %lt = arith.cmpi slt, %a, %b : i32
  %m = arith.maxsi %a, %b : i32
  %n = arith.minui %a, %m : i32
  %eq = arith.cmpi eq, %n, %b : i32
  %gt = arith.cmpf ogt, %x, %y fastmath<nnan> : f64
  %une = arith.cmpf une, %x, %y : f64
  %both = arith.andi %gt, %une : i1
  %any = arith.ori %both, %eq : i1
  %all = arith.andi %any, %lt : i1
  %r = arith.select %all, %x, %y : f64
  func.return %r : f64
}

// CHECK-LABEL: llvm.func @cmp_select(
// CHECK-NEXT:    %lt = llvm.icmp "slt" %a, %b : i32
// CHECK-NEXT:    %[[C0:.*]] = llvm.icmp "sgt" %a, %b : i32
// CHECK-NEXT:    %m = llvm.select %[[C0]], %a, %b : i1, i32
// CHECK-NEXT:    %[[C1:.*]] = llvm.icmp "ult" %a, %m : i32
// CHECK-NEXT:    %n = llvm.select %[[C1]], %a, %m : i1, i32
// CHECK-NEXT:    %eq = llvm.icmp "eq" %n, %b : i32
// CHECK-NEXT:    %gt = llvm.fcmp "ogt" %x, %y : f64
// CHECK-NEXT:    %une = llvm.fcmp "une" %x, %y : f64
// CHECK:         %r = llvm.select %all, %x, %y : i1, f64
// CHECK-NEXT:    llvm.return %r : f64

// -----

// Casts: index_cast is sext/trunc (or nothing for i64), the rest map one to one.
func.func @casts(%i: index, %a: i32, %b: i64, %x: f32, %h: f16) -> f64 {
  %0 = arith.index_cast %a : i32 to index
  %1 = arith.index_cast %i : index to i32
  %2 = arith.index_cast %b : i64 to index
  %3 = arith.sitofp %1 : i32 to f32
  %4 = arith.uitofp %a : i32 to f32
  %5 = arith.fptosi %x : f32 to i32
  %6 = arith.fptoui %x : f32 to i64
  %7 = arith.extf %x : f32 to f64
  %8 = arith.truncf %7 : f64 to f32
  %9 = arith.extsi %5 : i32 to i64
  %10 = arith.extui %5 : i32 to i64
  %11 = arith.trunci %10 : i64 to i16
  %12 = arith.bitcast %x : f32 to i32
  %13 = arith.extf %h : f16 to f64
  func.return %13 : f64
}

// CHECK-LABEL: llvm.func @casts(%i: i64, %a: i32, %b: i64, %x: f32, %h: f16) -> f64
// CHECK-NEXT:    %0 = llvm.sext %a : i32 to i64
// CHECK-NEXT:    %1 = llvm.trunc %i : i64 to i32
// CHECK-NEXT:    %2 = llvm.sitofp %1 : i32 to f32
// CHECK-NEXT:    %3 = llvm.uitofp %a : i32 to f32
// CHECK-NEXT:    %4 = llvm.fptosi %x : f32 to i32
// CHECK-NEXT:    %5 = llvm.fptoui %x : f32 to i64
// CHECK-NEXT:    %6 = llvm.fpext %x : f32 to f64
// CHECK-NEXT:    %7 = llvm.fptrunc %6 : f64 to f32
// CHECK-NEXT:    %8 = llvm.sext %4 : i32 to i64
// CHECK-NEXT:    %9 = llvm.zext %4 : i32 to i64
// CHECK-NEXT:    %10 = llvm.trunc %9 : i64 to i16
// CHECK-NEXT:    %11 = llvm.bitcast %x : f32 to i32
// CHECK-NEXT:    %12 = llvm.fpext %h : f16 to f64
// CHECK-NEXT:    llvm.return %12 : f64

// -----

// Constants: index → i64, i1, floats, dense vectors (index vectors → i64 vectors).
func.func private @use(index, i1, f64, vector<4xindex>)

func.func @constants() -> vector<4xf32> {
  %0 = arith.constant 42 : index
  %1 = arith.constant true
  %2 = arith.constant 1.5 : f64
  %3 = arith.constant dense<2.0> : vector<4xf32>
  %4 = arith.constant dense<[1, 2, 3, 4]> : vector<4xindex>
  func.call @use(%0, %1, %2, %4) : (index, i1, f64, vector<4xindex>) -> ()
  func.return %3 : vector<4xf32>
}

// CHECK:       llvm.func @use(i64, i1, f64, vector<4xi64>)
// CHECK-LABEL: llvm.func @constants() -> vector<4xf32>
// CHECK-NEXT:    %0 = llvm.mlir.constant(42) : i64
// CHECK-NEXT:    %1 = llvm.mlir.constant(true) : i1
// CHECK-NEXT:    %2 = llvm.mlir.constant(1.500000e+00 : f64) : f64
// CHECK-NEXT:    %3 = llvm.mlir.constant(dense<2.000000e+00> : vector<4xf32>) : vector<4xf32>
// CHECK-NEXT:    %4 = llvm.mlir.constant(dense<[1, 2, 3, 4]> : vector<4xi64>) : vector<4xi64>
// CHECK-NEXT:    llvm.call @use(%0, %1, %2, %4) : (i64, i1, f64, vector<4xi64>) -> ()
// CHECK-NEXT:    llvm.return %3 : vector<4xf32>

// -----

// Elementwise ops take vectors the same way as scalars.
func.func @vector_elementwise(%a: vector<8xf32>, %b: vector<8xf32>, %i: vector<4xindex>) -> vector<8xf32> {
  %0 = arith.addf %a, %b : vector<8xf32>
  %1 = arith.mulf %0, %b fastmath<reassoc> : vector<8xf32>
  %2 = math.fma %1, %a, %b : vector<8xf32>
  %3 = arith.addi %i, %i : vector<4xindex>
  func.return %2 : vector<8xf32>
}

// CHECK-LABEL: llvm.func @vector_elementwise(%a: vector<8xf32>, %b: vector<8xf32>, %i: vector<4xi64>) -> vector<8xf32>
// CHECK-NEXT:    %0 = llvm.fadd %a, %b : vector<8xf32>
// CHECK-NEXT:    %1 = llvm.fmul %0, %b {fastmathFlags = #llvm.fastmath<reassoc>} : vector<8xf32>
// CHECK-NEXT:    %2 = llvm.intr.fma(%1, %a, %b) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:    %3 = llvm.add %i, %i : vector<4xi64>
// CHECK-NEXT:    llvm.return %2 : vector<8xf32>

// -----

// floordivsi/ceildivsi: sdiv + srem and a ±1 correction; vector integer min/max use the
// llvm.smax/umin intrinsics.
func.func @rounding(%a: i32, %b: i32, %v: vector<8xi32>, %w: vector<8xi32>) -> vector<8xi32> {
  %f = arith.floordivsi %a, %b : i32
  %c = arith.ceildivsi %f, %b : i32
  %m = arith.maxsi %v, %w : vector<8xi32>
  %n = arith.minui %m, %w : vector<8xi32>
  func.return %n : vector<8xi32>
}

// CHECK-LABEL: llvm.func @rounding(
// CHECK:         %[[Q:.*]] = llvm.sdiv %a, %b : i32
// CHECK-NEXT:    %[[R:.*]] = llvm.srem %a, %b : i32
// CHECK:         %[[QM1:.*]] = llvm.sub %[[Q]], %{{.*}} : i32
// CHECK:         %f = llvm.select %{{.*}}, %[[QM1]], %[[Q]] : i1, i32
// CHECK:         %[[Q2:.*]] = llvm.sdiv %f, %b : i32
// CHECK:         %[[QP1:.*]] = llvm.add %[[Q2]], %{{.*}} : i32
// CHECK:         %c = llvm.select %{{.*}}, %[[QP1]], %[[Q2]] : i1, i32
// CHECK-NEXT:    %m = llvm.call_intrinsic "llvm.smax.v8i32"(%v, %w) : (vector<8xi32>, vector<8xi32>) -> vector<8xi32>
// CHECK-NEXT:    %n = llvm.call_intrinsic "llvm.umin.v8i32"(%m, %w) : (vector<8xi32>, vector<8xi32>) -> vector<8xi32>

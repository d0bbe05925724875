// RUN: not loom-opt %s -p loom-convert-to-llvm --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p loom-convert-to-llvm -t llvm --split-input-file 2>&1 | filecheck %s --check-prefix=IR

// vector.load/store: the GEP of the first element, then an llvm.load/store of the vector
// type, aligned to the element only (numpy buffers are only element-aligned).
// CHECK-LABEL: llvm.func @load_store(
// CHECK:         %[[L0:.*]] = llvm.add %{{.*}}, %j overflow<nsw> : i64
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr inbounds %A[%[[L0]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %v = llvm.load %[[P0]] {alignment = 4 : i64} : !llvm.ptr -> vector<8xf32>
// CHECK:         %[[P1:.*]] = llvm.getelementptr inbounds %A[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %v, %[[P1]] {alignment = 4 : i64} : vector<8xf32>, !llvm.ptr
// IR-LABEL: define void @load_store(
// IR:         %v = load <8 x float>, ptr %{{.*}}, align 4
// IR:         store <8 x float> %v, ptr %{{.*}}, align 4
func.func @load_store(%A: memref<4x16xf32>, %i: index, %j: index) {
  %v = vector.load %A[%i, %j] : memref<4x16xf32>, vector<8xf32>
  vector.store %v, %A[%j, %i] : memref<4x16xf32>, vector<8xf32>
  func.return
}


// -----

// create_mask: lanes 0..3 compared (slt) with a splat of %n; masked load/store at the
// first element, element-aligned (LLVM 22's form: the alignment on the pointer).
// CHECK-LABEL: llvm.func @masked(
// CHECK:         %[[LANES:.*]] = llvm.mlir.constant(dense<[0, 1, 2, 3]> : vector<4xi64>) : vector<4xi64>
// CHECK-NEXT:    %[[U:.*]] = llvm.mlir.undef : vector<4xi64>
// CHECK-NEXT:    %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    %[[I:.*]] = llvm.insertelement %n, %[[U]][%[[C0]] : i32] : vector<4xi64>
// CHECK-NEXT:    %[[N:.*]] = llvm.shufflevector %[[I]], %[[U]] [0, 0, 0, 0] : vector<4xi64>
// CHECK-NEXT:    %mask = llvm.icmp "slt" %[[LANES]], %[[N]] : vector<4xi64>
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %A[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:    %v = llvm.intr.masked.load %[[P]], %mask, %zero {alignment = 8 : i32} : (!llvm.ptr, vector<4xi1>, vector<4xf64>) -> vector<4xf64>
// CHECK:         llvm.intr.masked.store %v, %{{.*}}, %mask {alignment = 8 : i32} : vector<4xf64>, vector<4xi1> into !llvm.ptr
// IR-LABEL: define void @masked(
// IR:         %mask = icmp slt <4 x i64> <i64 0, i64 1, i64 2, i64 3>, %{{.*}}
// IR:         %v = call <4 x double> @llvm.masked.load.v4f64.p0(ptr align 8 %{{.*}}, <4 x i1> %mask, <4 x double> zeroinitializer)
// IR:         call void @llvm.masked.store.v4f64.p0(<4 x double> %v, ptr align 8 %{{.*}}, <4 x i1> %mask)
func.func @masked(%A: memref<100xf64>, %j: index, %n: index) {
  %mask = vector.create_mask %n : vector<4xi1>
  %zero = arith.constant dense<0.000000e+00> : vector<4xf64>
  %v = vector.maskedload %A[%j], %mask, %zero : memref<100xf64>, vector<4xi1>, vector<4xf64> into vector<4xf64>
  vector.maskedstore %A[%j], %mask, %v : memref<100xf64>, vector<4xi1>, vector<4xf64>
  func.return
}


// -----

// broadcast: insertelement into lane 0 and a shufflevector of zeros (a splat);
// vector.fma and math.fma on vectors: llvm.intr.fma, @llvm.fma.v8f32.
// CHECK-LABEL: llvm.func @fma(
// CHECK:         %[[U:.*]] = llvm.mlir.undef : vector<8xf32>
// CHECK-NEXT:    %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    %[[I:.*]] = llvm.insertelement %a, %[[U]][%[[C0]] : i32] : vector<8xf32>
// CHECK-NEXT:    %s = llvm.shufflevector %[[I]], %[[U]] [0, 0, 0, 0, 0, 0, 0, 0] : vector<8xf32>
// CHECK-NEXT:    %f = llvm.intr.fma(%s, %b, %c) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:    %g = llvm.intr.fma(%f, %b, %c) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// IR-LABEL: define <8 x float> @fma(float %a, <8 x float> %b, <8 x float> %c)
// IR:         %s = shufflevector <8 x float> %{{.*}}, <8 x float> undef, <8 x i32> zeroinitializer
// IR-NEXT:    %f = call <8 x float> @llvm.fma.v8f32(<8 x float> %s, <8 x float> %b, <8 x float> %c)
func.func @fma(%a: f32, %b: vector<8xf32>, %c: vector<8xf32>) -> vector<8xf32> {
  %s = vector.broadcast %a : f32 to vector<8xf32>
  %f = vector.fma %s, %b, %c : vector<8xf32>
  %g = math.fma %f, %b, %c : vector<8xf32>
  func.return %g : vector<8xf32>
}


// -----

// reduction <add>: llvm.intr.vector.reduce.fadd from the accumulator (or -0.0), fastmath
// flags kept: reassoc allows a tree sum; without it the sum is in lane order.
// CHECK-LABEL: llvm.func @reduce(
// CHECK:         %tree = "llvm.intr.vector.reduce.fadd"(%init, %v) <{fastmathFlags = #llvm.fastmath<reassoc>}> : (f32, vector<8xf32>) -> f32
// CHECK-NEXT:    %[[NEG0:.*]] = llvm.mlir.constant(-0.000000e+00 : f32) : f32
// CHECK-NEXT:    %ordered = "llvm.intr.vector.reduce.fadd"(%[[NEG0]], %v) <{fastmathFlags = #llvm.fastmath<none>}> : (f32, vector<8xf32>) -> f32
// IR-LABEL: define float @reduce(
// IR:         %tree = call reassoc float @llvm.vector.reduce.fadd.v8f32(float %init, <8 x float> %v)
// IR-NEXT:    %ordered = call float @llvm.vector.reduce.fadd.v8f32(float -0.000000e+00, <8 x float> %v)
func.func @reduce(%v: vector<8xf32>, %init: f32) -> f32 {
  %tree = vector.reduction <add>, %v, %init fastmath<reassoc> : vector<8xf32> into f32
  %ordered = vector.reduction <add>, %v : vector<8xf32> into f32
  %s = arith.addf %tree, %ordered : f32
  func.return %s : f32
}


// -----

// One lane out, one lane in, and a shuffle (the remainder's kept lanes).
// CHECK-LABEL: llvm.func @lanes(
// CHECK:         %[[C3:.*]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %e = "llvm.extractelement"(%a, %[[C3]]) : (vector<8xf32>, i64) -> f32
// CHECK:         %[[C5:.*]] = llvm.mlir.constant(5) : i64
// CHECK-NEXT:    %i = llvm.insertelement %s, %b[%[[C5]] : i64] : vector<8xf32>
// CHECK-NEXT:    %k = llvm.shufflevector %i, %a [0, 1, 2, 11, 12, 13, 14, 15] : vector<8xf32>
// IR-LABEL: define <8 x float> @lanes(
// IR:         %e = extractelement <8 x float> %a, i64 3
// IR:         %i = insertelement <8 x float> %b, float %s, i64 5
// IR-NEXT:    %k = shufflevector <8 x float> %i, <8 x float> %a, <8 x i32> <i32 0, i32 1, i32 2, i32 11, i32 12, i32 13, i32 14, i32 15>
func.func @lanes(%a: vector<8xf32>, %b: vector<8xf32>, %x: f32) -> vector<8xf32> {
  %e = vector.extract %a[3] : f32 from vector<8xf32>
  %s = arith.addf %e, %x : f32
  %i = vector.insert %s, %b [5] : f32 into vector<8xf32>
  %k = vector.shuffle %i, %a [0, 1, 2, 11, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
  func.return %k : vector<8xf32>
}


// -----

// Refused: a vector along a dimension that is not contiguous,
// CHECK: vector.mlir:[[# @LINE + 3]]:3: error: loom-convert-to-llvm: cannot lower 'vector.load': the last dimension of memref<16x8xf32, strided<[1, 16]>> is not contiguous
// IR:    vector.mlir:[[# @LINE + 2]]:3: error: loom-convert-to-llvm: cannot lower 'vector.load'
func.func @column(%A: memref<16x8xf32, strided<[1, 16]>>, %i: index) {
  %v = vector.load %A[%i, %i] : memref<16x8xf32, strided<[1, 16]>>, vector<8xf32>
  func.return
}


// -----

// reductions other than <add>,
// CHECK: vector.mlir:[[# @LINE + 3]]:3: error: loom-convert-to-llvm: cannot lower 'vector.reduction': <mul> reductions are not supported (only <add>)
// IR:    vector.mlir:[[# @LINE + 2]]:3: error: loom-convert-to-llvm: cannot lower 'vector.reduction'
func.func @product(%v: vector<8xf32>) -> f32 {
  %p = vector.reduction <mul>, %v : vector<8xf32> into f32
  func.return %p : f32
}


// -----

// and any other vector op, by name.
// CHECK: vector.mlir:[[# @LINE + 4]]:3: error: loom-convert-to-llvm: no lowering to the llvm dialect for 'vector.transfer_read'
// IR:    vector.mlir:[[# @LINE + 3]]:3: error: loom-convert-to-llvm: no lowering to the llvm dialect for 'vector.transfer_read'
func.func @transfer(%A: memref<16xf32>, %i: index) -> vector<8xf32> {
  %pad = arith.constant 0.000000e+00 : f32
  %v = vector.transfer_read %A[%i], %pad : memref<16xf32>, vector<8xf32>
  func.return %v : vector<8xf32>
}

// RUN: loom-opt %s -p loom-convert-to-llvm -t llvm | filecheck %s

// The LLVM IR of the lowered module (compiler/jit/emit.py): noalias pointer arguments,
// getelementptr inbounds, nounwind, and what xDSL's emitter lacks (fptosi/uitofp,
// fastmath on fcmp and intrinsics, intrinsic names mangled per type).
func.func @f(%A: memref<4x8xf32>, %B: memref<4x8xf32, strided<[16, 1], offset: 2>>, %i: index, %j: index) {
  %a = memref.load %A[%i, %j] : memref<4x8xf32>
  %n = arith.fptosi %a : f32 to i32
  %u = arith.uitofp %n : i32 to f32
  %s = math.sqrt %u fastmath<fast> : f32
  %gt = arith.cmpf ogt, %s, %a fastmath<nnan> : f32
  %m = arith.select %gt, %s, %a : f32
  %t = memref.alloc() : memref<8xf32>
  memref.store %m, %t[%j] : memref<8xf32>
  memref.store %m, %B[%j, %i] : memref<4x8xf32, strided<[16, 1], offset: 2>>
  memref.dealloc %t : memref<8xf32>
  func.return
}

func.func @v(%x: vector<8xf32>, %y: f32) -> vector<8xf32> {
  %a = math.absf %x : vector<8xf32>
  %b = math.absf %y : f32
  %c = math.fma %a, %a, %x fastmath<contract> : vector<8xf32>
  func.return %c : vector<8xf32>
}

// A conditional branch to one block on both edges, with different arguments: a phi takes
// one value per predecessor, so the false edge gets a block of its own.
func.func @pick(%c: i1, %x: f32, %y: f32) -> f32 {
  cf.cond_br %c, ^join(%x : f32), ^join(%y : f32)
^join(%m: f32):
  func.return %m : f32
}

// @f allocates, so it returns a status: 0, or 1 when allocation site 1 (%t) got null.
// CHECK:       ; Function Attrs: nounwind
// CHECK-NEXT:  define i32 @f(ptr noalias captures(none) %A, ptr noalias captures(none) %B, i64 %i, i64 %j) #0 {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    %[[M:.*]] = mul nsw i64 %i, 8
// CHECK-NEXT:    %[[L:.*]] = add nsw i64 %[[M]], %j
// CHECK-NEXT:    %[[P:.*]] = getelementptr inbounds float, ptr %A, i64 %[[L]]
// CHECK-NEXT:    %a = load float, ptr %[[P]], align 4
// CHECK-NEXT:    %n = fptosi float %a to i32
// CHECK-NEXT:    %u = uitofp i32 %n to float
// CHECK-NEXT:    %s = call fast float @llvm.sqrt.f32(float %u)
// CHECK-NEXT:    %gt = fcmp nnan ogt float %s, %a
// CHECK-NEXT:    %m = select i1 %gt, float %s, float %a
// CHECK-NEXT:    %t = call ptr @aligned_alloc(i64 64, i64 64)
// CHECK-NEXT:    %[[ADDR:.*]] = ptrtoint ptr %t to i64
// CHECK-NEXT:    %[[NULL:.*]] = icmp eq i64 %[[ADDR]], 0
// CHECK-NEXT:    %[[UNLIKELY:.*]] = call i1 @llvm.expect.i1(i1 %[[NULL]], i1 false)
// CHECK-NEXT:    br i1 %[[UNLIKELY]], label %[[FAIL:.*]], label %[[OK:[a-z0-9]+]]
// CHECK-EMPTY:
// CHECK-NEXT:  [[OK]]:
// CHECK-NEXT:    %[[PT:.*]] = getelementptr inbounds float, ptr %t, i64 %j
// CHECK-NEXT:    store float %m, ptr %[[PT]], align 4
// CHECK-NEXT:    %[[MB:.*]] = mul nsw i64 %j, 16
// CHECK-NEXT:    %[[LB:.*]] = add nsw i64 %[[MB]], %i
// CHECK-NEXT:    %[[LB2:.*]] = add nsw i64 %[[LB]], 2
// CHECK-NEXT:    %[[PB:.*]] = getelementptr inbounds float, ptr %B, i64 %[[LB2]]
// CHECK-NEXT:    store float %m, ptr %[[PB]], align 4
// CHECK-NEXT:    call void @free(ptr %t)
// CHECK-NEXT:    ret i32 0
// CHECK-EMPTY:
// CHECK-NEXT:  [[FAIL]]:
// CHECK-NEXT:    %[[STATUS:.*]] = phi i32 [ 1, %entry ]
// CHECK-NEXT:    ret i32 %[[STATUS]]

// CHECK:       define <8 x float> @v(<8 x float> %x, float %y) #0 {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    %a = call <8 x float> @llvm.fabs.v8f32(<8 x float> %x)
// CHECK-NEXT:    %b = call float @llvm.fabs.f32(float %y)
// CHECK-NEXT:    %c = call contract <8 x float> @llvm.fma.v8f32(<8 x float> %a, <8 x float> %a, <8 x float> %x)
// CHECK-NEXT:    ret <8 x float> %c

// CHECK:       define float @pick(i1 %c, float %x, float %y) #0 {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    br i1 %c, label %[[JOIN:.*]], label %[[ELSE:.*]]
// CHECK-EMPTY:
// CHECK-NEXT:  [[JOIN]]:
// CHECK-NEXT:    %m = phi float [ %x, %entry ], [ %y, %[[ELSE]] ]
// CHECK-NEXT:    ret float %m
// CHECK-EMPTY:
// CHECK-NEXT:  [[ELSE]]:
// CHECK-NEXT:    br label %[[JOIN]]

// CHECK-DAG:   declare ptr @aligned_alloc(i64, i64)
// CHECK-DAG:   declare void @free(ptr)
// CHECK-DAG:   attributes #0 = { nounwind }

// RUN: loom-opt %s -p loom-convert-to-llvm | filecheck %s

// bf16 is its 16 bits in LLVM (an i16); ui8 and i8 are i8: the ops say how they widen.
// bf16 -> f32 is exact: the bits become the upper half of an f32.
// CHECK-LABEL: llvm.func @widen
// CHECK:      %[[H:.*]] = llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr -> i16
// CHECK-NEXT: %[[Z:.*]] = llvm.zext %[[H]] : i16 to i32
// CHECK-NEXT: %[[SIXTEEN:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK-NEXT: %[[UP:.*]] = llvm.shl %[[Z]], %[[SIXTEEN]] : i32
// CHECK-NEXT: %{{.*}} = llvm.bitcast %[[UP]] : i32 to f32
// CHECK:      %[[U:.*]] = llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr -> i8
// CHECK-NEXT: %{{.*}} = llvm.zext %[[U]] : i8 to i32
// CHECK:      %[[S:.*]] = llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr -> i8
// CHECK-NEXT: %{{.*}} = llvm.sext %[[S]] : i8 to i32
func.func @widen(%a: memref<8xbf16>, %q: memref<8xui8>, %s: memref<8xi8>, %r: memref<3xi32>, %rf: memref<1xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %h = memref.load %a[%i] : memref<8xbf16>
  %f = arith.extf %h : bf16 to f32
  memref.store %f, %rf[%c0] : memref<1xf32>
  %u = memref.load %q[%i] : memref<8xui8>
  %uw = arith.extui %u : ui8 to i32
  memref.store %uw, %r[%c0] : memref<3xi32>
  %v = memref.load %s[%i] : memref<8xi8>
  %vw = arith.extsi %v : i8 to i32
  memref.store %vw, %r[%c1] : memref<3xi32>
  func.return
}

// f32 -> bf16 rounds to nearest even (add 0x7fff and the lowest kept bit, keep the upper
// half); a NaN (magnitude above 0x7f800000) keeps its upper half with the quiet bit, chosen
// lane by lane with a mask. A bf16 constant is its bits (1.0 = 0x3f80 = 16256).
// CHECK-LABEL: llvm.func @narrow
// CHECK:      %[[ONE:.*]] = llvm.mlir.constant(16256 : i16) : i16
// CHECK:      %[[BITS:.*]] = llvm.bitcast %{{.*}} : vector<8xf32> to vector<8xi32>
// CHECK:      %[[UPPER:.*]] = llvm.lshr %[[BITS]], %{{.*}} : vector<8xi32>
// CHECK:      %[[LOWEST:.*]] = llvm.and %[[UPPER]], %{{.*}} : vector<8xi32>
// CHECK:      %[[C7FFF:.*]] = llvm.mlir.constant(dense<32767> : vector<8xi32>) : vector<8xi32>
// CHECK-NEXT: %[[BIAS:.*]] = llvm.add %[[LOWEST]], %[[C7FFF]] : vector<8xi32>
// CHECK-NEXT: %[[SUM:.*]] = llvm.add %[[BITS]], %[[BIAS]] : vector<8xi32>
// CHECK:      %[[ROUNDED:.*]] = llvm.lshr %[[SUM]], %{{.*}} : vector<8xi32>
// CHECK:      %[[QUIET:.*]] = llvm.or %[[UPPER]], %{{.*}} : vector<8xi32>
// CHECK:      %[[MAG:.*]] = llvm.and %[[BITS]], %{{.*}} : vector<8xi32>
// CHECK:      %[[INF:.*]] = llvm.mlir.constant(dense<2139095040> : vector<8xi32>) : vector<8xi32>
// CHECK-NEXT: %[[NAN:.*]] = llvm.icmp "ugt" %[[MAG]], %[[INF]] : vector<8xi32>
// CHECK-NEXT: %[[MASK:.*]] = llvm.sext %[[NAN]] : vector<8xi1> to vector<8xi32>
// CHECK-NEXT: %[[DIFF:.*]] = llvm.xor %[[ROUNDED]], %[[QUIET]] : vector<8xi32>
// CHECK-NEXT: %[[PICK:.*]] = llvm.and %[[DIFF]], %[[MASK]] : vector<8xi32>
// CHECK-NEXT: %[[PICKED:.*]] = llvm.xor %[[ROUNDED]], %[[PICK]] : vector<8xi32>
// CHECK-NEXT: %[[HALF:.*]] = llvm.trunc %[[PICKED]] : vector<8xi32> to vector<8xi16>
// CHECK:      llvm.store %[[HALF]], %{{.*}} {alignment = 2 : i64} : vector<8xi16>, !llvm.ptr
// CHECK:      llvm.store %[[ONE]], %{{.*}} {alignment = 2 : i64} : i16, !llvm.ptr
func.func @narrow(%x: vector<8xf32>, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %h = arith.truncf %x : vector<8xf32> to vector<8xbf16>
  vector.store %h, %out[%c0] : memref<8xbf16>, vector<8xbf16>
  %one = arith.constant 1.0 : bf16
  memref.store %one, %out[%c0] : memref<8xbf16>
  func.return
}

// arith_ext's casts (what convert-loom-to-affine widens and quantizes with) on vectors: the
// llvm casts of the same meaning, lane by lane; ui8 and i8 alike are i8.
// CHECK-LABEL: llvm.func @vector_casts
// CHECK:      %[[S:.*]] = llvm.sext %{{.*}} : vector<8xi8> to vector<8xi32>
// CHECK-NEXT: %[[U:.*]] = llvm.zext %{{.*}} : vector<8xi8> to vector<8xi32>
// CHECK-NEXT: %[[F:.*]] = llvm.sitofp %[[S]] : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: %[[W:.*]] = llvm.fptosi %[[F]] : vector<8xf32> to vector<8xi32>
// CHECK-NEXT: %{{.*}} = llvm.trunc %[[W]] : vector<8xi32> to vector<8xi8>
func.func @vector_casts(%s: vector<8xi8>, %u: vector<8xui8>, %out: memref<8xui8>, %wide: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %ws = arith_ext.extsi %s : vector<8xi8> to vector<8xi32>
  %wu = arith_ext.extui %u : vector<8xui8> to vector<8xi32>
  %f = arith_ext.sitofp %ws : vector<8xi32> to vector<8xf32>
  %w = arith_ext.fptosi %f : vector<8xf32> to vector<8xi32>
  %q = arith_ext.trunci %w : vector<8xi32> to vector<8xui8>
  vector.store %q, %out[%c0] : memref<8xui8>, vector<8xui8>
  vector.store %wu, %wide[%c0] : memref<8xi32>, vector<8xi32>
  func.return
}

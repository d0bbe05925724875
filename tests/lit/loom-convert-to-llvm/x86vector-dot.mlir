// RUN: loom-opt %s -p loom-convert-to-llvm | filecheck %s

// x86vector.dot becomes the instruction's LLVM intrinsic at the accumulator's width:
// A's group (32 bits) broadcast to every lane (insertelement + shufflevector), bitcast
// to B's type; vpmaddwd has no accumulator operand (an add after it).
// CHECK-LABEL: llvm.func @pairs
// CHECK:      %[[G:.*]] = llvm.bitcast %a : vector<2xi16> to i32
// CHECK:      %[[L:.*]] = llvm.insertelement %[[G]], %{{.*}}[%{{.*}} : i32] : vector<8xi32>
// CHECK-NEXT: %[[S:.*]] = llvm.shufflevector %[[L]], %{{.*}} [0, 0, 0, 0, 0, 0, 0, 0] : vector<8xi32>
// CHECK-NEXT: %[[A:.*]] = llvm.bitcast %[[S]] : vector<8xi32> to vector<16xi16>
// CHECK-NEXT: %[[P:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[A]], %b) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// CHECK-NEXT: %{{.*}} = llvm.add %acc, %[[P]] : vector<8xi32>
func.func @pairs(%acc: vector<8xi32>, %a: vector<2xi16>, %b: vector<16xi16>) -> vector<8xi32> {
  %r = x86vector.dot "vpmaddwd" %acc, %a, %b : vector<2xi16>, vector<16xi16> -> vector<8xi32>
  func.return %r : vector<8xi32>
}

// CHECK-LABEL: llvm.func @pairs512
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.pmaddw.d.512"(%{{.*}}, %b{{.*}}) : (vector<32xi16>, vector<32xi16>) -> vector<16xi32>
func.func @pairs512(%acc: vector<16xi32>, %a: vector<2xi16>, %b: vector<32xi16>) -> vector<16xi32> {
  %r = x86vector.dot "vpmaddwd" %acc, %a, %b : vector<2xi16>, vector<32xi16> -> vector<16xi32>
  func.return %r : vector<16xi32>
}

// u8 x s8 quads accumulate in the instruction: vpdpbusd's intrinsic takes the accumulator.
// CHECK-LABEL: llvm.func @quads
// CHECK:      %[[A:.*]] = llvm.bitcast %{{.*}} : vector<8xi32> to vector<32xi8>
// CHECK-NEXT: %{{.*}} = llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"(%acc{{.*}}, %[[A]], %b{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
func.func @quads(%acc: vector<8xi32>, %a: vector<4xui8>, %b: vector<32xi8>) -> vector<8xi32> {
  %r = x86vector.dot "vpdpbusd" %acc, %a, %b : vector<4xui8>, vector<32xi8> -> vector<8xi32>
  func.return %r : vector<8xi32>
}

// bf16 is i16 in Loom's LLVM IR; the emitter bitcasts dpbf16ps's operands to bfloat.
// CHECK-LABEL: llvm.func @bf16
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%acc{{.*}}, %{{.*}}, %b{{.*}}) : (vector<16xf32>, vector<32xi16>, vector<32xi16>) -> vector<16xf32>
func.func @bf16(%acc: vector<16xf32>, %a: vector<2xbf16>, %b: vector<32xbf16>) -> vector<16xf32> {
  %r = x86vector.dot "vdpbf16ps" %acc, %a, %b : vector<2xbf16>, vector<32xbf16> -> vector<16xf32>
  func.return %r : vector<16xf32>
}

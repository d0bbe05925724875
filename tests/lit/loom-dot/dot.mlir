// RUN: env LOOM_TARGET="cpu=avx2,vector_bits=256,vector_registers=16,fma=1,bf16_dot=0,int8_dot=0" loom-opt %s -p 'loom-dot' --split-input-file --remarks 2>&1 | filecheck %s
// RUN: env LOOM_TARGET="cpu=dot512,vector_bits=512,vector_registers=32,fma=1,bf16_dot=1,int8_dot=1" loom-opt %s -p 'loom-dot{width=8}' --split-input-file 2>&1 | filecheck %s --check-prefix=DOT

// The statement of a matmul whose A and B loom-pack laid out in groups of 2 along k
// (`[k floordiv 2, r + k mod 2]`): k steps by 2, j by the 8 lanes; A's group is read as a
// vector<2xi16> (broadcast by the instruction), B's 8 groups as one vector<16xi16>, C's 8
// elements as the accumulator of vpmaddwd + vpaddd. Any target has it (AVX2's, AVX-512BW's).
// CHECK-LABEL: func.func @i16_pairs
// CHECK:      affine.for %k = 0 to 8 step 2 {
// CHECK:        affine.for %j = {{.*}} step 8 {
// CHECK-NEXT:     %[[A:.*]] = affine.vector_load %ap[%k floordiv 2, %i * 2 + %i_t * -2] : memref<4x12xi16>, vector<2xi16>
// CHECK-NEXT:     %[[B:.*]] = affine.vector_load %bp[%k floordiv 2, %j * 2 + %j_t * -2] : memref<4x16xi16>, vector<16xi16>
// CHECK-NEXT:     %[[C:.*]] = affine.vector_load %c[%i, %j] : memref<12x16xi32>, vector<8xi32>
// CHECK-NEXT:     %[[D:.*]] = x86vector.dot "vpmaddwd" %[[C]], %[[A]], %[[B]] : vector<2xi16>, vector<16xi16> -> vector<8xi32>
// CHECK-NEXT:     affine.vector_store %[[D]], %c[%i, %j] : memref<12x16xi32>, vector<8xi32>
// CHECK-NEXT:   }
// CHECK: remark: [loom-dot] nest 'matmul': vpmaddwd + vpaddd on 256-bit vectors: loop %k steps by 2 (A's group of 2, broadcast), %j by 8 (B's 8 groups, 8 accumulators of i32)
// DOT-LABEL: func.func @i16_pairs
// DOT: x86vector.dot "vpmaddwd" {{.*}} : vector<2xi16>, vector<16xi16> -> vector<8xi32>
func.func @i16_pairs(%ap: memref<4x12xi16>, %bp: memref<4x16xi16>, %c: memref<12x16xi32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %j_t = 0 to 16 step 8 {
      affine.for %k = 0 to 8 {
        affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
          affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
            %x = affine.load %ap[%k floordiv 2, %i * 2 + %i_t * -2 + %k mod 2] : memref<4x12xi16>
            %y = affine.load %bp[%k floordiv 2, %j * 2 + %j_t * -2 + %k mod 2] : memref<4x16xi16>
            %acc = affine.load %c[%i, %j] : memref<12x16xi32>
            %wx = arith_ext.extsi %x : i16 to i32
            %wy = arith_ext.extsi %y : i16 to i32
            %p = arith.muli %wx, %wy : i32
            %s = arith.addi %acc, %p : i32
            affine.store %s, %c[%i, %j] : memref<12x16xi32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// s8 (A) x u8 (B), a convolution's weights times its patches: vpdpbusd reads its first
// source unsigned, so B's block goes first (`vpdpbusd.swapped`; the lowering passes B,
// then A's broadcast group).
// CHECK: remark: [loom-dot] nest 'matmul' not rewritten: vpdpbusd is not on target avx2 (int8_dot=0)
// DOT-LABEL: func.func @s8_u8_quads
// DOT:        %[[A:.*]] = affine.vector_load %ap[%k floordiv 4, %i * 4] : memref<2x24xi8>, vector<4xi8>
// DOT-NEXT:   %[[B:.*]] = affine.vector_load %bp[%k floordiv 4, %j * 4] : memref<2x32xui8>, vector<32xui8>
// DOT-NEXT:   %[[C:.*]] = affine.vector_load %c[%i, %j] : memref<6x8xi32>, vector<8xi32>
// DOT-NEXT:   x86vector.dot "vpdpbusd.swapped" %[[C]], %[[A]], %[[B]] : vector<4xi8>, vector<32xui8> -> vector<8xi32>
func.func @s8_u8_quads(%ap: memref<2x24xi8>, %bp: memref<2x32xui8>, %c: memref<6x8xi32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 6 {
      affine.for %j = 0 to 8 {
        %x = affine.load %ap[%k floordiv 4, %i * 4 + %k mod 4] : memref<2x24xi8>
        %y = affine.load %bp[%k floordiv 4, %j * 4 + %k mod 4] : memref<2x32xui8>
        %acc = affine.load %c[%i, %j] : memref<6x8xi32>
        %wx = arith_ext.extsi %x : i8 to i32
        %wy = arith_ext.extui %y : ui8 to i32
        %p = arith.muli %wx, %wy : i32
        %s = arith.addi %acc, %p : i32
        affine.store %s, %c[%i, %j] : memref<6x8xi32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// u8 x s8 in groups of 4 (k - k_t: the groups start where the k tile does): vpdpbusd,
// where the target has VNNI (int8_dot); on the AVX2 target the nest is left as it is.
// CHECK-LABEL: func.func @u8_s8_quads
// CHECK-NOT:  x86vector.dot
// CHECK: remark: [loom-dot] nest 'matmul' not rewritten: vpdpbusd is not on target avx2 (int8_dot=0)
// DOT-LABEL: func.func @u8_s8_quads
// DOT:      affine.for %k = {{.*}}(%k_t) to {{.*}}(%k_t) step 4 {
// DOT:        %[[A:.*]] = affine.vector_load %ap[(%k + %k_t * -1) floordiv 4, %i * 4 + %i_t * -4] : memref<4x24xui8>, vector<4xui8>
// DOT-NEXT:   %[[B:.*]] = affine.vector_load %bp[(%k + %k_t * -1) floordiv 4, %j * 4 + %j_t * -4] : memref<4x32xi8>, vector<32xi8>
// DOT-NEXT:   %[[C:.*]] = affine.vector_load %c[%i, %j] : memref<12x8xi32>, vector<8xi32>
// DOT-NEXT:   x86vector.dot "vpdpbusd" %[[C]], %[[A]], %[[B]] : vector<4xui8>, vector<32xi8> -> vector<8xi32>
func.func @u8_s8_quads(%ap: memref<4x24xui8>, %bp: memref<4x32xi8>, %c: memref<12x8xi32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %j_t = 0 to 8 step 8 {
      affine.for %k_t = 0 to 32 step 16 {
        affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to affine_map<(d0) -> (d0 + 16)>(%k_t) {
          affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
            affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 8)>(%j_t) {
              %x = affine.load %ap[(%k - %k_t) floordiv 4, %i * 4 - %i_t * 4 + (%k - %k_t) mod 4] : memref<4x24xui8>
              %y = affine.load %bp[(%k - %k_t) floordiv 4, %j * 4 - %j_t * 4 + (%k - %k_t) mod 4] : memref<4x32xi8>
              %acc = affine.load %c[%i, %j] : memref<12x8xi32>
              %wx = arith_ext.extui %x : ui8 to i32
              %wy = arith_ext.extsi %y : i8 to i32
              %p = arith.muli %wx, %wy : i32
              %s = arith.addi %acc, %p : i32
              affine.store %s, %c[%i, %j] : memref<12x8xi32>
            }
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// bf16 pairs summed in f32: vdpbf16ps where the target has AVX512-BF16 (bf16_dot).
// CHECK-LABEL: func.func @bf16_pairs
// CHECK-NOT:  x86vector.dot
// CHECK: remark: [loom-dot] nest 'matmul' not rewritten: vdpbf16ps is not on target avx2 (bf16_dot=0)
// DOT-LABEL: func.func @bf16_pairs
// DOT:      affine.for %k = 0 to 8 step 2 {
// DOT:        x86vector.dot "vdpbf16ps" %{{.*}}, %{{.*}}, %{{.*}} : vector<2xbf16>, vector<16xbf16> -> vector<8xf32>
func.func @bf16_pairs(%ap: memref<4x12xbf16>, %bp: memref<4x16xbf16>, %c: memref<12x8xf32>) {
  affine.for %i_t = 0 to 12 step 6 {
    affine.for %k = 0 to 8 {
      affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to affine_map<(d0) -> (d0 + 6)>(%i_t) {
        affine.for %j = 0 to 8 {
          %x = affine.load %ap[%k floordiv 2, %i * 2 + %i_t * -2 + %k mod 2] : memref<4x12xbf16>
          %y = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<4x16xbf16>
          %acc = affine.load %c[%i, %j] : memref<12x8xf32>
          %wx = arith.extf %x : bf16 to f32
          %wy = arith.extf %y : bf16 to f32
          %p = arith.mulf %wx, %wy : f32
          %s = arith.addf %acc, %p : f32
          affine.store %s, %c[%i, %j] : memref<12x8xf32>
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// k runs 7 in its last tile, and both reads are of buffers that loom-pack padded with zeros
// to whole groups (`loom.zero_padded_groups`): the loop runs on to the tile's last whole
// group, min(k_t + 4, 8), whose second element adds 0 x 0.
// CHECK-LABEL: func.func @zero_padded_tail
// CHECK:      affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> ((d0 + 4), 8)>(%k_t) step 2 {
// CHECK:        x86vector.dot "vpmaddwd"
// CHECK: remark: [loom-dot] nest 'matmul': vpmaddwd + vpaddd on 256-bit vectors: loop %k steps by 2 (A's group of 2, broadcast), %j by 8 (B's 8 groups, 8 accumulators of i32); %k runs on to its tiles' last whole group, whose elements past the end are zeros in both buffers
// DOT-LABEL: func.func @zero_padded_tail
// DOT: affine.for %k = {{.*}} to min affine_map<(d0) -> ((d0 + 4), 8)>(%k_t) step 2 {
func.func @zero_padded_tail(%c: memref<12x8xi32>) {
  %ap = memref.alloc() {alignment = 64 : i64, loom.zero_padded_groups} : memref<2x24xi16>
  %bp = memref.alloc() {alignment = 64 : i64, loom.zero_padded_groups} : memref<2x16xi16>
  affine.for %k_t = 0 to 7 step 4 {
    affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> (d0 + 4, 7)>(%k_t) {
      affine.for %i = 0 to 12 {
        affine.for %j = 0 to 8 {
          %x = affine.load %ap[(%k - %k_t) floordiv 2, %i * 2 + (%k - %k_t) mod 2] : memref<2x24xi16>
          %y = affine.load %bp[(%k - %k_t) floordiv 2, %j * 2 + (%k - %k_t) mod 2] : memref<2x16xi16>
          %acc = affine.load %c[%i, %j] : memref<12x8xi32>
          %wx = arith_ext.extsi %x : i16 to i32
          %wy = arith_ext.extsi %y : i16 to i32
          %p = arith.muli %wx, %wy : i32
          %s = arith.addi %acc, %p : i32
          affine.store %s, %c[%i, %j] : memref<12x8xi32>
        }
      }
    }
  } {loom.tag = "matmul"}
  memref.dealloc %ap : memref<2x24xi16>
  memref.dealloc %bp : memref<2x16xi16>
  func.return
}

// -----

// A read in place (an NHWC direct convolution's windows: tap r at `(k floordiv 32) * 64`,
// channel and column tap at `k mod 32`, 32 a multiple of 2): each pair of k is adjacent, so
// its group is read where it lies, with the read's own map, and only B is packed. bf16 on
// vdpbf16ps (the AVX2 target has none: left as it is, the remark says why).
// CHECK-LABEL: func.func @windows_in_place
// CHECK: remark: [loom-dot] nest 'matmul' not rewritten: vdpbf16ps is not on target avx2 (bf16_dot=0)
// DOT-LABEL: func.func @windows_in_place
// DOT:      affine.for %k = 0 to 64 step 2 {
// DOT:        %[[A:.*]] = affine.vector_load %x[%i * 32 + %k floordiv 32 * 64 + %k mod 32] : memref<512xbf16>, vector<2xbf16>
// DOT-NEXT:   %[[B:.*]] = affine.vector_load %bp[%k floordiv 2, %j * 2] : memref<32x16xbf16>, vector<16xbf16>
// DOT:        x86vector.dot "vdpbf16ps" %{{.*}}, %[[A]], %[[B]] : vector<2xbf16>, vector<16xbf16> -> vector<8xf32>
func.func @windows_in_place(%x: memref<512xbf16>, %c: memref<8x8xf32>) {
  %bp = memref.alloc() {alignment = 64 : i64} : memref<32x16xbf16>
  affine.for %k = 0 to 64 {
    affine.for %i = 0 to 8 {
      affine.for %j = 0 to 8 {
        %a = affine.load %x[%i * 32 + %k floordiv 32 * 64 + %k mod 32] : memref<512xbf16>
        %b = affine.load %bp[%k floordiv 2, %j * 2 + %k mod 2] : memref<32x16xbf16>
        %acc = affine.load %c[%i, %j] : memref<8x8xf32>
        %wa = arith.extf %a : bf16 to f32
        %wb = arith.extf %b : bf16 to f32
        %p = arith.mulf %wa, %wb : f32
        %s = arith.addf %acc, %p : f32
        affine.store %s, %c[%i, %j] : memref<8x8xf32>
      }
    }
  } {loom.tag = "matmul"}
  memref.dealloc %bp : memref<32x16xbf16>
  func.return
}

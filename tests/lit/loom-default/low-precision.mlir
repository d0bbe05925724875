// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1,bf16_dot=0,int8_dot=0" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=AVX2
// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1,bf16_dot=1,int8_dot=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=DOT
// RUN: env LOOM_TARGET="cpu=znver4,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1,bf16_dot=1,int8_dot=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=ZNVER4
// The plan's remark says how a low-precision matmul's products run: on the target's
// dot-product instruction (loom-dot), A and B packed in groups along k (bytes as i16 for
// vpmaddwd), or widened once per element as loom-pack copies them (where the plan packs)
// or as the loops read them, and why not the dot-product instruction. On znver4, where
// matmuls read A's rows in place (cost_model.A_IN_PLACE), the instruction's broadcast reads
// each group of k where A's row holds it: only B is packed (not for s8 x s8, whose A is
// shifted as it is packed, nor with K not whole groups, whose last group is padded).

// AVX2: remark: [loom-default] matmul 510x512x512 on test: {{.*}}; bf16 x bf16 products summed in f32: widened to f32 as they are packed, f32 FMAs (no AVX512-BF16 on this target); pass list: {{.*}}loom-pack{{.*}}
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x512 on test512: {{.*}}; bf16 x bf16 products summed in f32: packed in groups of 2 along k, vdpbf16ps (loom-dot); pass list: {{.*}}loom-pack{operand=1 {{.*}} group=2 element=bf16 {{.*}}loom-dot{width=16 op=matmul}
// ZNVER4: remark: [loom-default] matmul {{[0-9]+}}x{{[0-9]+}}x512 on znver4: {{.*}}; A's rows read in place, not packed {{.*}}; bf16 x bf16 products summed in f32: B packed in groups of 2 along k, A's rows read in place (each group of 2 side by side in them), vdpbf16ps (loom-dot); pass list:
// ZNVER4-NOT: loom-pack{operand=0
// ZNVER4: remark: [loom-dot] {{.*}}vdpbf16ps
func.func @bf16(%a: tensor<512x512xbf16>, %b: tensor<512x512xbf16>) -> tensor<512x512xf32> {
  %c = loom.matmul %a, %b : (tensor<512x512xbf16>, tensor<512x512xbf16>) -> tensor<512x512xf32>
  func.return %c : tensor<512x512xf32>
}

// -----

// AVX2: remark: [loom-default] matmul 48x64x64 on test: {{.*}}; no packing: {{.*}}; ui8 x i8 products summed in i32: widened to i32 as they are read, vpmulld + vpaddd (vpmaddwd not used: both operands must be packed in panels); pass list:
// DOT: remark: [loom-default] matmul 42x64x64 on test512: {{.*}}; ui8 x i8 products summed in i32: widened to i32 as they are read, vpmulld + vpaddd (vpdpbusd not used: both operands must be packed in panels); pass list:
func.func @u8s8(%a: tensor<48x64xui8>, %b: tensor<64x64xi8>) -> tensor<48x64xi32> {
  %c = loom.matmul %a, %b : (tensor<48x64xui8>, tensor<64x64xi8>) -> tensor<48x64xi32>
  func.return %c : tensor<48x64xi32>
}

// -----

// u8 x s8 packed: i16 pairs on vpmaddwd + vpaddd on AVX2, u8/s8 quads on vpdpbusd with VNNI.
// AVX2: remark: [loom-default] matmul 510x512x512 on test: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 2 along k (ui8 as i16, i8 as i16), vpmaddwd + vpaddd (loom-dot); pass list: {{.*}}group=2 element=i16{{.*}}loom-dot{width=8 op=matmul}
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x512 on test512: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 4 along k, vpdpbusd (loom-dot); pass list: {{.*}}group=4 element=i8{{.*}}group=4 element=ui8{{.*}}loom-dot{width=16 op=matmul}
// ZNVER4: remark: [loom-default] matmul {{[0-9]+}}x{{[0-9]+}}x512 on znver4: {{.*}}; A's rows read in place, not packed {{.*}}; ui8 x i8 products summed in i32: B packed in groups of 4 along k, A's rows read in place (each group of 4 side by side in them), vpdpbusd (loom-dot); pass list:
// ZNVER4-NOT: loom-pack{operand=0
// ZNVER4: remark: [loom-dot] {{.*}}vpdpbusd
// ZNVER4: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: it lays %b_pack out in groups {{.*}}; it prefetches what the copy 2 iterations of %j_t2 ahead reads (4 prefetches)
func.func @u8s8_packed(%a: tensor<512x512xui8>, %b: tensor<512x512xi8>) -> tensor<512x512xi32> {
  %c = loom.matmul %a, %b : (tensor<512x512xui8>, tensor<512x512xi8>) -> tensor<512x512xi32>
  func.return %c : tensor<512x512xi32>
}

// -----

// s8 x s8: i16 pairs on vpmaddwd without VNNI; with it, on vpdpbusd, which reads one side
// unsigned: A shifted by +128 as it is packed, 128 x B's column sums taken back out of C
// (loom-compensate), B's copy then before its row tiles (the sums read it), prefetching a
// later panel's rows as every copy into groups does, the zero fill of C dropped all the
// same (the subtraction reads a zero first).
// AVX2: remark: [loom-default] matmul 510x512x512 on test: {{.*}}; i8 x i8 products summed in i32: packed in groups of 2 along k (i8 as i16, i8 as i16), vpmaddwd + vpaddd (loom-dot); pass list:
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x512 on test512: {{.*}}; i8 x i8 products summed in i32: packed in groups of 4 along k (A's i8 shifted by +128 to ui8), vpdpbusd with 128 x B's column sums subtracted (loom-compensate, loom-dot); pass list: {{.*}}group=4 element=i8{{.*}}group=4 element=ui8{{.*}}loom-compensate{op=matmul},loom-vectorize{{.*}}loom-dot{width=16 op=matmul}
// ZNVER4: remark: [loom-default] matmul {{[0-9]+}}x{{[0-9]+}}x512 on znver4: {{.*}}B a KC x NR panel at a time, copied before its row tiles (its column sums read it), each copy prefetching the rows of the panel two ahead (where there is one); packed A {{.*}}; i8 x i8 products summed in i32: packed in groups of 4 along k (A's i8 shifted by +128 to ui8), vpdpbusd with 128 x B's column sums subtracted (loom-compensate, loom-dot); pass list:
// ZNVER4: remark: [loom-fuse-pack] copy of %b into %b_pack left as it is: it lays %b_pack out in groups {{.*}}; it prefetches what the copy 2 iterations of %j_t2 ahead reads
// ZNVER4: remark: [loom-fuse-epilogue] the zero fill of %c dropped
func.func @s8s8(%a: tensor<512x512xi8>, %b: tensor<512x512xi8>) -> tensor<512x512xi32> {
  %c = loom.matmul %a, %b : (tensor<512x512xi8>, tensor<512x512xi8>) -> tensor<512x512xi32>
  func.return %c : tensor<512x512xi32>
}

// -----

// K = 511, not whole groups: loom-pack pads the last group of each buffer with zeros (one
// element of a pair, three of a quad), loom-dot runs k on to 512.
// AVX2: remark: [loom-default] matmul 510x512x511 on test: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 2 along k (ui8 as i16, i8 as i16), vpmaddwd + vpaddd (loom-dot); pass list:
// AVX2: remark: [loom-pack] packed operand 1 (%b) {{.*}}, a tile's last group of 1 padded with zeros,
// AVX2: remark: [loom-dot] {{.*}}; %k runs on to its tiles' last whole group, whose elements past the end are zeros in both buffers
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x511 on test512: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 4 along k, vpdpbusd (loom-dot); pass list:
// DOT: remark: [loom-pack] packed operand 1 (%b) {{.*}}, a tile's last group of 3 padded with zeros,
// DOT: remark: [loom-dot] nest {{.*}}: vpdpbusd {{.*}}; %k runs on to its tiles' last whole group
// ZNVER4: remark: [loom-default] matmul {{[0-9]+}}x512x511 on znver4: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 4 along k, vpdpbusd (loom-dot); pass list: {{.*}}loom-pack{operand=0
func.func @odd_k(%a: tensor<512x511xui8>, %b: tensor<511x512xi8>) -> tensor<512x512xi32> {
  %c = loom.matmul %a, %b : (tensor<512x511xui8>, tensor<511x512xi8>) -> tensor<512x512xi32>
  func.return %c : tensor<512x512xi32>
}

// -----

// f32: no products clause.
// AVX2: remark: [loom-default] matmul 48x64x64 on test: {{.*}}; no packing: A and B fit in L1 together; estimated traffic in f32 elements: {{[^;]*}}; pass list:
func.func @f32(%a: tensor<48x64xf32>, %b: tensor<64x64xf32>) -> tensor<48x64xf32> {
  %c = loom.matmul %a, %b : (tensor<48x64xf32>, tensor<64x64xf32>) -> tensor<48x64xf32>
  func.return %c : tensor<48x64xf32>
}

// -----

// A low-precision conv2d takes im2col: its packing widens each element once (here as i16
// pairs for vpmaddwd: W x patches is i8 x ui8), where the direct convolution would widen
// a window's element at every read.
// AVX2: remark: [loom-default] conv2d 1x64x56x56 * 64x64x3x3 {{.*}} on test: {{.*}}: im2col: ui8 input: im2col's packing widens each element once (in groups along k for a dot-product instruction), the direct convolution at every read; estimated time
// AVX2: remark: [loom-default] matmul 60x3136x576 on test: {{.*}}; i8 x ui8 products summed in i32: packed in groups of 2 along k (i8 as i16, ui8 as i16), vpmaddwd + vpaddd (loom-dot); pass list:
// DOT: remark: [loom-default] conv2d 1x64x56x56 * 64x64x3x3 {{.*}}: im2col: ui8 input
func.func @conv_u8s8(%x: tensor<1x64x56x56xui8>, %w: tensor<64x64x3x3xi8>) -> tensor<1x64x56x56xi32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x64x56x56xui8>, tensor<64x64x3x3xi8>) -> tensor<1x64x56x56xi32>
  func.return %y : tensor<1x64x56x56xi32>
}

// -----

// x @ w.T (B a transposed view of W[N, K]): the groups are copied from W's rows, where a
// group's elements lie side by side; no loom-transpose-copy (that copies ungrouped panels).
// AVX2: remark: [loom-default] matmul 510x512x512 on test: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 2 along k (ui8 as i16, i8 as i16), vpmaddwd + vpaddd (loom-dot); pass list:
// AVX2-SAME: loom-vectorize{width=8 op=matmul},loom-dot{width=8 op=matmul},loom-unroll-jam
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x512 on test512: {{.*}}; ui8 x i8 products summed in i32: packed in groups of 4 along k, vpdpbusd (loom-dot); pass list:
// DOT-SAME: loom-vectorize{width=16 op=matmul},loom-dot{width=16 op=matmul},loom-unroll-jam
func.func @u8s8_transposed(%a: tensor<512x512xui8>, %w: tensor<512x512xi8>) -> tensor<512x512xi32> {
  %b = loom.transpose %w {perm = array<i64: 1, 0>} : tensor<512x512xi8> -> tensor<512x512xi8>
  %c = loom.matmul %a, %b : (tensor<512x512xui8>, tensor<512x512xi8>) -> tensor<512x512xi32>
  func.return %c : tensor<512x512xi32>
}

// -----

// A bf16 NHWC filter in panels of pairs (loom.conv2d's rank 6, P x R x S x C/2 x NR x 2):
// with AVX512-BF16 the panel is B as it is, in the groups vdpbf16ps reads, and the
// windows A: nothing packed; 36 rows are 28 in the register tile's rows and a copy of 8,
// planned as a matrix-vector product, which the instruction does not run: that copy
// reads a copy of B with the groups undone. Without the instruction, every nest does.
// AVX2: remark: [loom-default] B's panels are in groups of 2 along k, but no AVX512-BF16 on this target: copied with the groups undone first (nest 'matmul.ungrouped', memref<2x36x32xbf16> -> memref<2x72x16xbf16>)
// AVX2: remark: [loom-default] matmul 36x16x72 on test: {{.*}}no packing: B is a panel of the filter, packed ahead of time (contiguous);{{.*}} bf16 x bf16 products summed in f32: widened to f32 as they are read, f32 FMAs (no AVX512-BF16 on this target); pass list: loom-tile{{.*}},loom-vectorize{width=8 op=matmul}
// DOT: remark: [loom-default] matmul 28x16x72 on test512: {{.*}}no packing: B is a panel of the filter, packed ahead of time (contiguous);{{.*}} bf16 x bf16 products summed in f32: both read in place in groups of 2 along k (the windows, and the filter's panel), vdpbf16ps (loom-dot); pass list: {{[^_]*}}loom-dot{width=16 op=matmul}
// DOT: remark: [loom-default] B's panels are in groups of 2 along k, but vdpbf16ps not used: both operands must be packed in panels: copied with the groups undone first (nest 'matmul.ungrouped', memref<2x36x32xbf16> -> memref<2x72x16xbf16>)
// DOT: remark: [loom-default] matmul 8x16x72 (peeled copy 1 of the nest) on test512: {{.*}}8 rows < MR=14
func.func @groups(%x: memref<1x6x6x8xbf16>, %w: memref<2x3x3x4x16x2xbf16>, %y: memref<1x6x6x32xf32>) {
  loom.conv2d ins(%x, %w : memref<1x6x6x8xbf16>, memref<2x3x3x4x16x2xbf16>) outs(%y : memref<1x6x6x32xf32>) {layout = "nhwc", padding = array<i64: 1, 1>}
  func.return
}

// -----

// The 3-channel bf16 stem: with AVX512-BF16 a direct convolution on 4 channels (the
// planes and the filter padded with zeros: a third more products, estimated cheaper than
// im2col's patch matrix), its windows read in place in pairs; without it, im2col.
// AVX2: remark: [loom-default] conv2d NHWC 1x32x32x3 * HWCF 7x7x3x64 {{.*}}: im2col: bf16 input: im2col's packing widens each element once
// DOT: remark: [loom-default] conv2d NHWC 1x32x32x3 * HWCF 7x7x3x64 {{.*}}: direct: bf16 input, vdpbf16ps reading the windows in place, in groups; estimated time over the matmul's: direct +33.3% ({{.*}}, 3 channels padded to 4 +33.3%), im2col +75.0%
// DOT: remark: [loom-default] nest 'conv2d' {{.*}}its 3 channels padded with zeros to 4 (whole groups of 2), and W copied into a 7x7x4x64 buffer with zeros in the added channels; then an implicit matmul 256x64x196
// DOT: remark: [loom-default] matmul 252x64x196 on test512: {{.*}}A read in place (the windows of the staged input), packed B 196x64{{.*}}vdpbf16ps (loom-dot)
func.func @stem(%x: memref<1x32x32x3xbf16>, %w: memref<7x7x3x64xbf16>, %y: memref<1x16x16x64xf32>) {
  loom.conv2d ins(%x, %w : memref<1x32x32x3xbf16>, memref<7x7x3x64xbf16>) outs(%y : memref<1x16x16x64xf32>) {layout = "nhwc", strides = array<i64: 2, 2>, padding = array<i64: 3, 3>}
  func.return
}

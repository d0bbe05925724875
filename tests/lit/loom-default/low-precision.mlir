// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1,bf16_dot=0,int8_dot=0" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=AVX2
// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1,bf16_dot=1,int8_dot=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=DOT
// The plan's remark says how a low-precision matmul's products run: widened once per
// element as loom-pack copies them (where the plan packs) or as the loops read them, the
// instruction, and whether the target's dot-product instruction is used.

// AVX2: remark: [loom-default] matmul 510x512x512 on test: {{.*}}; bf16 x bf16 products summed in f32: widened to f32 as they are packed, f32 FMAs (no AVX512-BF16 on this target); pass list: {{.*}}loom-pack{{.*}}
// DOT: remark: [loom-default] matmul {{[0-9]+}}x512x512 on test512: {{.*}}; bf16 x bf16 products summed in f32: widened to f32 {{.*}}, f32 FMAs (vdpbf16ps not used yet); pass list:
func.func @bf16(%a: tensor<512x512xbf16>, %b: tensor<512x512xbf16>) -> tensor<512x512xf32> {
  %c = loom.matmul %a, %b : (tensor<512x512xbf16>, tensor<512x512xbf16>) -> tensor<512x512xf32>
  func.return %c : tensor<512x512xf32>
}

// -----

// AVX2: remark: [loom-default] matmul 48x64x64 on test: {{.*}}; no packing: {{.*}}; ui8 x i8 products summed in i32: widened to i32 as they are read, vpmulld + vpaddd (no VNNI on this target); pass list:
// DOT: remark: [loom-default] matmul 42x64x64 on test512: {{.*}}; ui8 x i8 products summed in i32: widened to i32 as they are read, vpmulld + vpaddd (vpdpbusd not used yet); pass list:
func.func @u8s8(%a: tensor<48x64xui8>, %b: tensor<64x64xi8>) -> tensor<48x64xi32> {
  %c = loom.matmul %a, %b : (tensor<48x64xui8>, tensor<64x64xi8>) -> tensor<48x64xi32>
  func.return %c : tensor<48x64xi32>
}

// -----

// f32: no products clause.
// AVX2: remark: [loom-default] matmul 48x64x64 on test: {{.*}}; no packing: A and B fit in L1 together; estimated traffic in f32 elements: {{[^;]*}}; pass list:
func.func @f32(%a: tensor<48x64xf32>, %b: tensor<64x64xf32>) -> tensor<48x64xf32> {
  %c = loom.matmul %a, %b : (tensor<48x64xf32>, tensor<64x64xf32>) -> tensor<48x64xf32>
  func.return %c : tensor<48x64xf32>
}

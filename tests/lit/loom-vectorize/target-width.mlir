// RUN: env LOOM_TARGET="vector_bits=256" loom-opt %s -p loom-vectorize --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=AVX2
// RUN: env LOOM_TARGET="vector_bits=512" loom-opt %s -p 'loom-vectorize{width=0}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=AVX512
// RUN: env LOOM_TARGET="vector_bits=512" loom-opt %s -p 'loom-vectorize{width=4}' --split-input-file --remarks 2>&1 | filecheck %s --check-prefix=W4

// width=0 (the default) takes the width of the target every pass asks
// (passes.support.target.host()): the host's vectors, or LOOM_TARGET's vector_bits, as the cost
// model does, never the CPU's features read behind its back. 256 bits: 8 f32 or 4 f64
// lanes; 512 bits: 16 and 8. An explicit width wins over the target.

// AVX2-LABEL:   func.func @fill_f32
// AVX2:           affine.for %j = 0 to 64 step 8 {
// AVX2-NEXT:        affine.vector_store %{{.*}}, %c[%i, %j] : memref<64x64xf32>, vector<8xf32>
// AVX2:           remark: [loom-vectorize] nest 'fill': vectorized loop %j by 8 (main 8 iterations, no remainder)
// AVX512-LABEL: func.func @fill_f32
// AVX512:         affine.for %j = 0 to 64 step 16 {
// AVX512-NEXT:      affine.vector_store %{{.*}}, %c[%i, %j] : memref<64x64xf32>, vector<16xf32>
// AVX512:         remark: [loom-vectorize] nest 'fill': vectorized loop %j by 16 (main 4 iterations, no remainder)
// W4-LABEL:     func.func @fill_f32
// W4:             affine.for %j = 0 to 64 step 4 {
// W4-NEXT:          affine.vector_store %{{.*}}, %c[%i, %j] : memref<64x64xf32>, vector<4xf32>
func.func @fill_f32(%c: memref<64x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 64 {
      affine.store %zero, %c[%i, %j] : memref<64x64xf32>
    }
  } {loom.tag = "fill"}
  func.return
}

// -----

// f64: half the lanes of f32 in the same registers.
// AVX2-LABEL:   func.func @add_f64
// AVX2:           affine.for %j = 0 to 64 step 4 {
// AVX2:             arith.addf %{{.*}}, %{{.*}} : vector<4xf64>
// AVX2:           remark: [loom-vectorize] nest 'add': vectorized loop %j by 4 (main 16 iterations, no remainder)
// AVX512-LABEL: func.func @add_f64
// AVX512:         affine.for %j = 0 to 64 step 8 {
// AVX512:           arith.addf %{{.*}}, %{{.*}} : vector<8xf64>
// AVX512:         remark: [loom-vectorize] nest 'add': vectorized loop %j by 8 (main 8 iterations, no remainder)
// W4-LABEL:     func.func @add_f64
// W4:             affine.for %j = 0 to 64 step 4 {
// W4:               arith.addf %{{.*}}, %{{.*}} : vector<4xf64>
func.func @add_f64(%a: memref<8x64xf64>, %b: memref<8x64xf64>, %c: memref<8x64xf64>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 64 {
      %x = affine.load %a[%i, %j] : memref<8x64xf64>
      %y = affine.load %b[%i, %j] : memref<8x64xf64>
      %s = arith.addf %x, %y : f64
      affine.store %s, %c[%i, %j] : memref<8x64xf64>
    }
  } {loom.tag = "add"}
  func.return
}

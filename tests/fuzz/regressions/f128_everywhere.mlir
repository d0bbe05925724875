func.func @fill_f32(%c: memref<17x17xf128, strided<[51, 1]>>) {
  %zero = arith.constant 0.000000e+00 : f128
  affine.for %i = 0 to 17 {
    affine.for %j = 0 to 17 {
      affine.store %zero, %c[%i, %j] : memref<17x17xf128, strided<[51, 1]>>
    }
  } {loom.tag = "fill"}
  func.return
}
// fuzz: loom-opt: internal [NotImplementedError at tools/loom_opt.py:output_resulting_program:169, xdsl xdsl/dialects/builtin.py:format:1651]: loom-opt: error: internal compiler error: NotImplementedError: 
// fuzz-key: internal NotImplementedError at tools/loom_opt.py:output_resulting_program
// fuzz-run: loom-opt FILE 
// fuzz-pipeline: loom-hoist
// fuzz-to-llvm: true
// fuzz-seed: tests/lit/loom-vectorize/target-width.mlir#0
// fuzz-mutations: [('every_dim', 732, '17'), ('strided', 17590, 3), ('every_element_type', 'f128')]

func.func @bmm(%a: tensor<4x64x48xf64>, %b: tensor<4x48x17xf64>, %s: tensor<4x64x17xf64>) -> tensor<4x64x17xf64> {
  %c = loom.matmul %a, %b : (tensor<4x64x48xf64>, tensor<4x48x17xf64>) -> tensor<4x64x17xf64>
  %p = loom.mul %c, %s : (tensor<4x64x17xf64>, tensor<4x64x17xf64>) -> tensor<4x64x17xf64>
  func.return %p : tensor<4x64x17xf64>
}
// fuzz: compile(default): hang: no answer within 20 s
// fuzz-key: hang in compile(default) compile
// fuzz-run: compiler.compile(open(FILE).read(), pipeline='default') and a call
// fuzz-pipeline: loom-naive
// fuzz-to-llvm: false
// fuzz-target: 
// fuzz-seed: examples/batched_matmul_f64.mlir
// fuzz-mutations: [('every_dim', 0, '17')]

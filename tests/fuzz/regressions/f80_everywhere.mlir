func.func @matmul_ikj(%a: memref<4x5xf80>, %b: memref<5x6xf80>, %c: memref<4x6xf80, strided<[18, 1]>>) {
  affine.for %i = 1 to 4 {
    affine.for %k = 0 to 5 {
      affine.for %j = 0 to 6 {
        %x = affine.load %a[%i, %k] : memref<4x5xf80>
        %y = affine.load %b[%k, %j] : memref<5x6xf80>
        %z = affine.load %c[%i, %j] : memref<4x6xf80, strided<[18, 1]>>
        %p = arith.mulf %x, %y : f80
        %s = arith.addf %z, %p : f80
        affine.store %s, %c[%i, %j] : memref<4x6xf80, strided<[18, 1]>>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}
// fuzz: loom-opt -p tile,vectorize: internal [NotImplementedError at passes/loom_vectorize.py:hoist_splat:716, xdsl xdsl/dialects/builtin.py:format:1638]: loom-opt: error: internal compiler error: NotImplementedError: 
// fuzz-key: internal NotImplementedError at passes/loom_vectorize.py:hoist_splat
// fuzz-run: loom-opt FILE -p 'loom-bufferize,convert-loom-to-affine,loom-tile{sizes=4,4,4},loom-vectorize'
// fuzz-pipeline: loom-prefetch{factors=2,1,2 op=tiled}
// fuzz-to-llvm: true
// fuzz-seed: tests/lit/loom-hoist/hoist.mlir#1
// fuzz-mutations: [('every_element_type', 'f80'), ('strided', 349, 3), ('number', 34932, '1'), ('element_type', 5791, 'f80')]

func.func @symbolic_bounds(%lo: index, %hi: index, %a: index, %n: index) {
  affine.for %i = %lo to %hi {
  }
  affine.for %j = affine_map<(d0) -> (d0)>(%a) to affine_map<(d0)[s0] -> (d0 + s0)>(%a)[%n] {
  }
  func.return
}
// fuzz: loom-opt -p mutated: hang: no answer within 20 s
// fuzz-key: hang in loom-opt -p mutated
// fuzz-run: loom-opt FILE -p 'loom-unroll{factor=1000000000}'
// fuzz-pipeline: loom-unroll{factor=1000000000}
// fuzz-to-llvm: false
// fuzz-target: 
// fuzz-seed: tests/lit/loom-lower-affine/lower-affine.mlir#1
// fuzz-mutations: [('ssa', 0, 0)]

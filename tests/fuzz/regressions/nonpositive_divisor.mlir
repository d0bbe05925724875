func.func @bound_ceildiv_by_negative(%n: index) {
  affine.for %i = 0 to affine_map<(d0) -> (d0 ceildiv -4)>(%n) {
  }
  func.return
}
// fuzz: loom-opt -p loom-default: internal [ValueError at passes/loop_utils.py:simplify:213, xdsl xdsl/ir/affine/affine_expr.py:visit_div_expr:653]: loom-opt: error: internal compiler error: ValueError: RHS of division must be positive, got -4
// fuzz-key: internal ValueError at passes/loop_utils.py:simplify
// fuzz-run: loom-opt FILE -p loom-default
// fuzz-pipeline: loom-default
// fuzz-to-llvm: true
// fuzz-seed: tests/lit/loom-lower-affine/refuse.mlir#2
// fuzz-mutations: [('strided', 65536, 3), ('strided', 0, 2), ('move_line', 32483, 1293)]

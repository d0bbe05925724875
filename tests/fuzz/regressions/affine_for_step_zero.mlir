func.func @zero_step() {
  affine.for %i = 0 to 10 step 0 {
  }
  func.return
}
// fuzz: compile(default): traceback [ZeroDivisionError at passes/loop_utils.py:constant_trip_count:267, xdsl xdsl/passes.py:apply:171]: ZeroDivisionError: integer division or modulo by zero
// fuzz-key: traceback ZeroDivisionError at passes/loop_utils.py:constant_trip_count
// fuzz-run: compiler.compile(open(FILE).read(), pipeline='default') and a call
// fuzz-pipeline: 
// fuzz-to-llvm: true
// fuzz-target: 
// fuzz-seed: tests/lit/loom-lower-affine/refuse.mlir#3
// fuzz-mutations: [('strided', 21974, 3), ('strided', 21974, 3), ('strided', 21974, 3), ('element_type', 372, 'i1')]

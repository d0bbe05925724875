// RUN: not loom-opt %s -p 'loom-hoist{factor=2}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not loom-opt %s -p 'loom-hoist{op=3}' 2>&1 | filecheck %s --check-prefix=TYPE

// loom-hoist refuses no nest (what it cannot move or promote stays, with a remark: see
// hoist.mlir); its only errors are bad options: an unknown option, an ill-typed op=.
// Nothing is printed, nothing changed.
// OPTION: {{^}}loom-opt: error: invalid pass pipeline 'loom-hoist{factor=2}': Provided arguments ["factor"] not found in expected arguments ["op"]
// OPTION-NOT: affine.for
// TYPE: {{^}}loom-opt: error: invalid pass pipeline 'loom-hoist{op=3}': Incompatible types: given (3,), expected str | None
// TYPE-NOT: affine.for
func.func @f(%m: memref<8xf32>, %z: f32) {
  affine.for %i = 0 to 8 {
    affine.store %z, %m[%i] : memref<8xf32>
  } {loom.tag = "zero"}
  func.return
}

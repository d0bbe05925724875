// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=VALID
// Every input is verified for SSA dominance (xDSL 0.74 checks none): a value is used
// after its definition in the same block, in a block its block dominates, or in a region
// nested in its own, and not across an op isolated from above. A use that is not
// dominated used to pass loom-opt and fail inside LLVM.

func.func @use_before_def(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: dominance.mlir:[[# @LINE + 1]]:3: error: 'loom.add' op operand #0 does not dominate this use: %c is defined after it, later in the block (defined at {{.*}}dominance.mlir:[[# @LINE + 2]]:3)
  %d = loom.add %c, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = loom.matmul %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %d : tensor<4x4xf32>
}

// -----

func.func @other_branch(%a: f32, %p: i1) -> f32 {
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  %x = arith.addf %a, %a : f32
  cf.br ^bb3
^bb2:
  cf.br ^bb3
^bb3:
  // CHECK: dominance.mlir:[[# @LINE + 1]]:3: error: 'arith.addf' op operand #0 does not dominate this use: %x is defined in a block that does not dominate the use's block (defined at {{.*}}dominance.mlir:[[# @LINE - 5]]:3)
  %y = arith.addf %x, %a : f32
  func.return %y : f32
}

// -----

func.func @loop_body_value(%m: memref<4xf32>) {
  affine.for %i = 0 to 4 {
    %v = affine.load %m[%i] : memref<4xf32>
  }
  // CHECK: dominance.mlir:[[# @LINE + 1]]:3: error: use of undefined value %v (not defined before this use, or defined in a region that does not enclose it)
  affine.store %v, %m[0] : memref<4xf32>
  func.return
}

// -----

func.func @own_result() {
  %r = scf.execute_region -> f32 {
    // CHECK: dominance.mlir:[[# @LINE + 1]]:5: error: 'arith.addf' op operand #0 does not dominate this use: %r is a result of the op that encloses the use
    %q = arith.addf %r, %r : f32
    scf.yield %q : f32
  }
  func.return
}

// -----

func.func @outer(%a: f32, %n: index) {
  func.func @inner(%m: memref<4xf32>) {
    // CHECK: dominance.mlir:[[# @LINE + 1]]:5: error: 'scf.for' op operand #0 does not dominate this use: %n is defined outside the 'func.func' op that encloses the use, which is isolated from above (defined at {{.*}}dominance.mlir:[[# @LINE - 2]]:1)
    scf.for %i = %n to %n step %n {
      memref.store %a, %m[%i] : memref<4xf32>
    }
    func.return
  }
  func.return
}

// -----

func.func @unreachable_block_in_order(%a: f32) -> f32 {
  cf.br ^bb2
^bb1:
  // CHECK: dominance.mlir:[[# @LINE + 1]]:3: error: 'arith.addf' op operand #0 does not dominate this use: %t is defined after it, later in the block
  %u = arith.addf %t, %a : f32
  %t = arith.addf %a, %a : f32
  cf.br ^bb2
^bb2:
  func.return %a : f32
}

// -----

// What dominance allows.
// VALID-LABEL: func.func @dominated
// VALID: %y = arith.addf %w, %x : f32
func.func @dominated(%a: f32, %p: i1) -> f32 {
  %x = arith.addf %a, %a : f32
  cf.cond_br %p, ^bb1, ^bb2
^bb1:
  cf.br ^bb3(%x : f32)
^bb2:
  %z = arith.mulf %x, %a : f32
  cf.br ^bb3(%z : f32)
^bb3(%w: f32):
  %y = arith.addf %w, %x : f32
  func.return %y : f32
}

// -----

// A loop back edge: the header dominates the body and the exit, not the other way round.
// VALID-LABEL: func.func @loop
// VALID: %s = arith.addf %acc, %a : f32
func.func @loop(%a: f32, %n: i1) -> f32 {
  cf.br ^header(%a : f32)
^header(%acc: f32):
  %s = arith.addf %acc, %a : f32
  cf.cond_br %n, ^header(%s : f32), ^exit
^exit:
  func.return %s : f32
}

// -----

// An unreachable block is dominated by every block (MLIR, LLVM): it may use %y.
// VALID-LABEL: func.func @unreachable
// VALID: %u = arith.addf %y, %a : f32
func.func @unreachable(%a: f32) -> f32 {
  cf.br ^bb2
^bb1:
  %u = arith.addf %y, %a : f32
  cf.br ^bb2
^bb2:
  %y = arith.addf %a, %a : f32
  func.return %y : f32
}

// -----

// A module is a graph region: a call may name a function defined below it.
// VALID-LABEL: func.func @calls_later
func.func @calls_later() {
  func.call @later() : () -> ()
  func.return
}
func.func @later() {
  func.return
}

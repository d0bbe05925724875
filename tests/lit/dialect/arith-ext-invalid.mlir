// RUN: not loom-opt %s --split-input-file 2>&1 | filecheck %s
// arith_ext's casts refuse what LLVM's casts of the same name would not take.

func.func @narrower(%x: i32) -> i8 {
  // CHECK: arith-ext-invalid.mlir:[[# @LINE + 1]]:3: error: 'arith_ext.extsi' op makes an integer wider, got i32 to i8
  %w = arith_ext.extsi %x : i32 to i8
  func.return %w : i8
}

// -----

func.func @same_width(%x: vector<8xi32>) -> vector<8xi32> {
  // CHECK: error: 'arith_ext.trunci' op makes an integer narrower, got i32 to i32
  %w = arith_ext.trunci %x : vector<8xi32> to vector<8xi32>
  func.return %w : vector<8xi32>
}

// -----

func.func @shape(%x: vector<8xi8>) -> vector<4xi32> {
  // CHECK: error: 'arith_ext.extui' op casts a scalar to a scalar or a vector to a vector of the same shape, got vector<8xi8> to vector<4xi32>
  %w = arith_ext.extui %x : vector<8xi8> to vector<4xi32>
  func.return %w : vector<4xi32>
}

// -----

func.func @scalar_to_vector(%x: i8) -> vector<8xi32> {
  // CHECK: error: 'arith_ext.extsi' op casts a scalar to a scalar or a vector to a vector of the same shape, got i8 to vector<8xi32>
  %w = arith_ext.extsi %x : i8 to vector<8xi32>
  func.return %w : vector<8xi32>
}

// -----

func.func @float_from_int(%x: i32) -> f32 {
  // CHECK: error: 'arith_ext.fptosi' op casts a float to an integer, got i32 to f32
  %a = arith_ext.fptosi %x : i32 to f32
  func.return %a : f32
}

// -----

func.func @int_from_float(%y: f32) -> i32 {
  // CHECK: error: 'arith_ext.sitofp' op casts an integer to a float, got f32 to i32
  %b = arith_ext.sitofp %y : f32 to i32
  func.return %b : i32
}

// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=2 op=matmul}' --split-input-file 2>&1 | filecheck %s
// RUN: not loom-opt %s -p 'loom-pack{operand=2 level=2 op=matmul}' --split-input-file 2>&1 | filecheck %s --check-prefix=WRITTEN
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=1 panel=2 op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=PANEL
// RUN: not loom-opt %s -p 'loom-pack{operand=0 level=5 op=conv2d}' --split-input-file 2>&1 | filecheck %s --check-prefix=FIXED
// RUN: not loom-opt %s -p 'loom-pack{level=2}' 2>&1 | filecheck %s --check-prefix=NO-OPERAND
// RUN: not loom-opt %s -p 'loom-pack{operand=1}' 2>&1 | filecheck %s --check-prefix=NO-LEVEL
// RUN: not loom-opt %s -p 'loom-pack{operand=-1 level=2}' 2>&1 | filecheck %s --check-prefix=NEG-OPERAND
// RUN: not loom-opt %s -p 'loom-pack{operand=1 level=2 panel=0}' 2>&1 | filecheck %s --check-prefix=PANEL0
// RUN: not loom-opt %s -p 'loom-pack{operand=7 panel=-3}' --split-input-file 2>&1 | filecheck %s --check-prefix=EVERY

// What loom-pack refuses, each with the op it points at and the reason; nothing is
// changed. The nests are tiled matmuls (i, j_t, k_t, j, k) unless said otherwise;
// level 2 is k_t, whose inner loops j and k walk B.

// Options, checked before any nest is looked at:
// NO-OPERAND: error: loom-pack: option 'operand' is required
// NO-LEVEL: error: loom-pack: option 'level' is required
// NEG-OPERAND: error: loom-pack: option 'operand' must be >= 0, got -1
// PANEL0: error: loom-pack: option 'panel' must be a positive integer, got 0
// Every problem with the options in one message: the missing level, the bad panel and
// an operand that no nest of the module has (located at its first nest).
// EVERY: refuse.mlir:[[# @LINE + 7]]:3: error: loom-pack: option 'level' is required (an integer >= 0); option 'panel' must be a positive integer, got -3; option 'operand' is 7, but nest 'matmul' reads 3 memrefs (operands 0..2)

// Level 2 of an untiled (i, j, k) nest is k, the innermost loop: no loop inside it.
// Operand 2, C, is accumulated into: written inside the nest.
// CHECK: refuse.mlir:[[# @LINE + 7]]:9: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k): no loop inside it walks %b, nothing to pack
// WRITTEN: refuse.mlir:[[# @LINE + 10]]:9: error: loom-pack: cannot pack C (%c) of nest 'matmul': it is written inside the nest ('affine.store')
func.func @nothing_inside_level(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 6 {
      affine.for %k = 0 to 5 {
        %x = affine.load %a[%i, %k] : memref<8x5xf32>
        %y = affine.load %b[%k, %j] : memref<5x6xf32>
        %z = affine.load %c[%i, %j] : memref<8x6xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<8x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// B is written too, through a view of its buffer.
// CHECK: refuse.mlir:[[# @LINE + 14]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul': it is written inside the nest ('affine.store')
func.func @written_through_view(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  %bv = "memref.cast"(%b) : (memref<5x6xf32>) -> memref<?x6xf32>
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
            affine.store %s, %bv[%k, %j] : memref<?x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A stride along a loop inside the level (a dilation, say) is not packed.
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): subscript 0 (2 * %k) steps by 2 along loop %k (only unit strides)
func.func @strided(%a: memref<8x5xf32>, %b: memref<10x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k * 2, %j] : memref<10x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// One subscript walked by two loops inside the level (conv2d's input rows, oh * sh + r, when both are inside).
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): subscript 0 (%k + %j) combines loops %k and %j
func.func @combined(%a: memref<8x5xf32>, %b: memref<12x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k + %j, %j] : memref<12x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// One loop walking two subscripts (a diagonal).
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): loop %k walks both subscript 0 and subscript 1
func.func @diagonal(%a: memref<8x5xf32>, %b: memref<5x5xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %k] : memref<5x5xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A subscript that is not linear.
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): subscript 0 of %b[%k floordiv 2, %j] is not linear
func.func @floordiv(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k floordiv 2, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// An index computed inside the loops (not an affine function of their ivs).
// CHECK: refuse.mlir:[[# @LINE + 9]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): subscript 0 (%q) uses %q, computed inside the loops
func.func @computed_index(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %q = affine.apply affine_map<(d0) -> (d0 mod 5)>(%k)
            %y = affine.load %b[%q, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// Two reads at different subscripts (after unrolling j by 2): pack before unrolling.
// CHECK: refuse.mlir:[[# @LINE + 9]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): it is read at different subscripts inside the loop (pack before unrolling)
func.func @unrolled(%a: memref<8x5xf32>, %b: memref<5x7xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<5x7xf32>
            %y2 = affine.load %b[%k, %j + 1] : memref<5x7xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A read that is not an affine.load cannot be redirected to the buffer.
// CHECK: refuse.mlir:[[# @LINE + 9]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul': its 'memref.load' inside loop %k_t cannot be rewritten
func.func @memref_load(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<5x6xf32>
            %y2 = memref.load %b[%k, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The tile starts at an unknown %lo: its size is not static.
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): the footprint along loop %k has no static size: min(%k_t + 2, 5) - (%lo)
func.func @unknown_start(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>, %lo: index) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %lo to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The tile starts at max(%k_t, %lo): no single start to index the buffer from.
// CHECK: refuse.mlir:[[# @LINE + 8]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul' at level 2 (loop %k_t): loop %k has no single lower bound: max(%k_t, %lo)
func.func @max_start(%a: memref<8x5xf32>, %b: memref<5x6xf32>, %c: memref<8x6xf32>, %lo: index) {
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = max affine_map<(d0)[s0] -> (d0, s0)>(%k_t)[%lo] to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<5x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// With op=, a nest too shallow for the level is an error (without op=, skipped with a remark).
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-pack: option 'level' is 2, but the read of %b in nest 'matmul' is inside 2 loops (levels 0..1)
func.func @shallow(%a: memref<8x6xf32>, %b: memref<8x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 6 {
      %x = affine.load %a[%i, %j] : memref<8x6xf32>
      %y = affine.load %b[%i, %j] : memref<8x6xf32>
      %s = arith.addf %x, %y : f32
      affine.store %s, %c[%i, %j] : memref<8x6xf32>
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// With op=, a nest without the operand is an error.
// CHECK: refuse.mlir:[[# @LINE + 2]]:3: error: loom-pack: option 'operand' is 1, but nest 'matmul' reads 1 memref (operand 0)
func.func @one_input(%a: memref<8x6xf32>, %c: memref<8x6xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 6 {
      affine.for %k = 0 to 6 {
        %x = affine.load %a[%i, %j] : memref<8x6xf32>
        affine.store %x, %c[%i, %j] : memref<8x6xf32>
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// A conv2d with padding 1 (the reads guarded). panel= splits the packed dimension walked
// by a loop of the output; W's tile inside f (c, r, s) has none, all its loops are reduced.
// Inside r, X's row oh + r - 1 is fixed in the tile and is -1 for oh = r = 0, where the
// guard skips the read: a copy there would read out of bounds.
// PANEL: refuse.mlir:[[# @LINE + 12]]:19: error: loom-pack: cannot pack W (%w) of nest 'conv2d': option 'panel' splits the one packed dimension walked by a loop of the output %y, but 0 of the tile's loops (%c, %r, %s) are
// FIXED: refuse.mlir:[[# @LINE + 10]]:19: error: loom-pack: cannot pack X (%x) of nest 'conv2d' at level 5 (loop %r): subscript 2 (%oh + %r - 1), fixed in the tile, may leave the memref (-1..3, not 0..2): copying would read where the access may not
func.func @conv_padded(%x: memref<1x2x3x3xf32>, %w: memref<4x2x3x3xf32>, %y: memref<1x4x3x3xf32>) {
  affine.for %n = 0 to 1 {
    affine.for %f = 0 to 4 {
      affine.for %oh = 0 to 3 {
        affine.for %ow = 0 to 3 {
          affine.for %c = 0 to 2 {
            affine.for %r = 0 to 3 {
              affine.for %s = 0 to 3 {
                "affine.if"(%oh, %ow, %r, %s) <{condition = affine_set<(d0, d1, d2, d3) : (d0 + d2 - 1 >= 0, -d0 - d2 + 3 >= 0, d1 + d3 - 1 >= 0, -d1 - d3 + 3 >= 0)>}> ({
                  %u = affine.load %x[%n, %c, %oh + %r - 1, %ow + %s - 1] : memref<1x2x3x3xf32>
                  %v = affine.load %w[%f, %c, %r, %s] : memref<4x2x3x3xf32>
                  %o = affine.load %y[%n, %f, %oh, %ow] : memref<1x4x3x3xf32>
                  %p = arith.mulf %u, %v : f32
                  %t = arith.addf %o, %p : f32
                  affine.store %t, %y[%n, %f, %oh, %ow] : memref<1x4x3x3xf32>
                  affine.yield
                }, {
                }) : (index, index, index, index) -> ()
              }
            }
          }
        }
      }
    }
  } {loom.tag = "conv2d"}
  func.return
}

// -----

// B is %b or %c, chosen at run time (arith.select): a buffer of unknown origin, which may
// be C, written inside the nest; a copy taken before the loops would miss those writes.
// (memref_root took the select's first memref operand, %b, for its buffer: packed.)
// CHECK: refuse.mlir:[[# @LINE + 13]]:13: error: loom-pack: cannot pack B (%bc) of nest 'matmul': %bc, the result of 'arith.select', may be the buffer 'affine.store' writes inside the nest
func.func @unknown_operand(%a: memref<8x5xf32>, %b: memref<8x6xf32>, %c: memref<8x6xf32>, %flag: i1) {
  %bc = arith.select %flag, %b, %c : memref<8x6xf32>
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %bc[%k, %j] : memref<8x6xf32>
            %z = affine.load %c[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %c[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

// -----

// The other way round: B is %b, but the nest writes through %cb, %c or %b.
// CHECK: refuse.mlir:[[# @LINE + 13]]:13: error: loom-pack: cannot pack B (%b) of nest 'matmul': 'affine.store' inside the nest writes %cb, the result of 'arith.select', which may be its buffer
func.func @writes_an_unknown_buffer(%a: memref<8x5xf32>, %b: memref<8x6xf32>, %c: memref<8x6xf32>, %flag: i1) {
  %cb = arith.select %flag, %c, %b : memref<8x6xf32>
  affine.for %i = 0 to 8 {
    affine.for %j_t = 0 to 6 step 3 {
      affine.for %k_t = 0 to 5 step 2 {
        affine.for %j = %j_t to affine_map<(d0) -> (d0 + 3)>(%j_t) {
          affine.for %k = %k_t to min affine_map<(d0) -> (d0 + 2, 5)>(%k_t) {
            %x = affine.load %a[%i, %k] : memref<8x5xf32>
            %y = affine.load %b[%k, %j] : memref<8x6xf32>
            %z = affine.load %cb[%i, %j] : memref<8x6xf32>
            %p = arith.mulf %x, %y : f32
            %s = arith.addf %z, %p : f32
            affine.store %s, %cb[%i, %j] : memref<8x6xf32>
          }
        }
      }
    }
  } {loom.tag = "matmul"}
  func.return
}

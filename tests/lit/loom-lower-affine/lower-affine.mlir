// RUN: loom-opt %s -p loom-lower-affine --split-input-file | filecheck %s

// Constant bounds: three index constants and an scf.for over them.
// CHECK-LABEL: func.func @constant_bounds
// CHECK:         %[[LB:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[UB:.*]] = arith.constant 10 : index
// CHECK-NEXT:    %[[STEP:.*]] = arith.constant 1 : index
// CHECK-NEXT:    scf.for %[[I:.*]] = %[[LB]] to %[[UB]] step %[[STEP]] {
// CHECK-NEXT:      memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<10xf32>
// CHECK-NEXT:    }
// CHECK-NOT:     affine.
func.func @constant_bounds(%m: memref<10xf32>, %v: f32) {
  affine.for %i = 0 to 10 {
    affine.store %v, %m[%i] : memref<10xf32>
  }
  func.return
}

// -----

// A bare SSA bound is a symbol; a map bound applies to dims and symbols alike.
// CHECK-LABEL: func.func @symbolic_bounds
// CHECK-SAME:    (%[[LO:.*]]: index, %[[HI:.*]]: index, %[[A:.*]]: index, %[[N:.*]]: index)
// CHECK:         scf.for %{{.*}} = %[[LO]] to %[[HI]] step %{{.*}} {
// CHECK:         %[[UB:.*]] = arith.addi %[[A]], %[[N]] : index
// CHECK:         scf.for %{{.*}} = %[[A]] to %[[UB]] step %{{.*}} {
func.func @symbolic_bounds(%lo: index, %hi: index, %a: index, %n: index) {
  affine.for %i = %lo to %hi {
  }
  affine.for %j = affine_map<(d0) -> (d0)>(%a) to affine_map<(d0)[s0] -> (d0 + s0)>(%a)[%n] {
  }
  func.return
}

// -----

// A tiled loop: the point loop's upper bound is the min of the tile end and the extent.
// CHECK-LABEL: func.func @min_upper_bound
// CHECK:         %[[C32:.*]] = arith.constant 32 : index
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %[[C32]] {
// CHECK-NEXT:      %[[C32B:.*]] = arith.constant 32 : index
// CHECK-NEXT:      %[[END:.*]] = arith.addi %[[I]], %[[C32B]] : index
// CHECK-NEXT:      %[[C100:.*]] = arith.constant 100 : index
// CHECK-NEXT:      %[[UB:.*]] = arith.minsi %[[END]], %[[C100]] : index
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:      scf.for %[[II:.*]] = %[[I]] to %[[UB]] step %[[ONE]] {
// CHECK-NEXT:        memref.load %{{.*}}[%[[II]]] : memref<100xf32>
func.func @min_upper_bound(%m: memref<100xf32>) {
  affine.for %i = 0 to 100 step 32 {
    affine.for %ii = affine_map<(d0) -> (d0)>(%i) to min affine_map<(d0) -> (d0 + 32, 100)>(%i) {
      %v = affine.load %m[%ii] : memref<100xf32>
    }
  }
  func.return
}

// -----

// A max lower bound over a dim, a symbol and a constant: a chain of arith.maxsi.
// CHECK-LABEL: func.func @max_lower_bound
// CHECK-SAME:    (%[[A:.*]]: index, %[[N:.*]]: index)
// CHECK:         %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[AM1:.*]] = arith.addi %[[A]], %[[CM1]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[M1:.*]] = arith.maxsi %[[AM1]], %[[N]] : index
// CHECK-NEXT:    %[[LB:.*]] = arith.maxsi %[[M1]], %[[C0]] : index
// CHECK-NEXT:    %[[UB:.*]] = arith.constant 64 : index
// CHECK-NEXT:    %{{.*}} = arith.constant 1 : index
// CHECK-NEXT:    scf.for %{{.*}} = %[[LB]] to %[[UB]] step
func.func @max_lower_bound(%a: index, %n: index) {
  affine.for %i = max affine_map<(d0)[s0] -> (d0 - 1, s0, 0)>(%a)[%n] to 64 {
  }
  func.return
}

// -----

// CHECK-LABEL: func.func @non_unit_step
// CHECK:         %[[STEP:.*]] = arith.constant 4 : index
// CHECK-NEXT:    scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STEP]] {
func.func @non_unit_step(%n: index) {
  affine.for %i = 0 to %n step 4 {
  }
  func.return
}

// -----

// Loop-carried values become scf.for iter_args; affine.yield becomes scf.yield.
// CHECK-LABEL: func.func @iter_args
// CHECK-SAME:    (%[[M:.*]]: memref<100xf32>, %[[INIT:.*]]: f32) -> f32
// CHECK:         %[[R:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:      %[[V:.*]] = memref.load %[[M]][%[[I]]] : memref<100xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:      scf.yield %[[S]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]] : f32
func.func @iter_args(%m: memref<100xf32>, %init: f32) -> f32 {
  %r = affine.for %i = 0 to 100 iter_args(%acc = %init) -> (f32) {
    %v = affine.load %m[%i] : memref<100xf32>
    %s = arith.addf %acc, %v : f32
    affine.yield %s : f32
  }
  func.return %r : f32
}

// -----

// `%m[%i * 2 + %j - 1, %j]` is parsed with the map ()[s0, s1] -> (s0 * 2 + s1 - 1, s1):
// the indices are symbols. The generic form below has the same map over dims.
// CHECK-LABEL: func.func @load_store_maps
// CHECK-SAME:    (%[[M:.*]]: memref<16x16xf32>, %[[I:.*]]: index, %[[J:.*]]: index)
// CHECK:         %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %[[T:.*]] = arith.muli %[[I]], %[[C2]] : index
// CHECK-NEXT:    %[[U:.*]] = arith.addi %[[T]], %[[J]] : index
// CHECK-NEXT:    %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[ROW:.*]] = arith.addi %[[U]], %[[CM1]] : index
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[M]][%[[ROW]], %[[J]]] : memref<16x16xf32>
// CHECK:         %[[T2:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK-NEXT:    %[[U2:.*]] = arith.addi %[[T2]], %[[J]] : index
// CHECK:         %[[ROW2:.*]] = arith.addi %[[U2]], %{{.*}} : index
// CHECK-NEXT:    %[[W:.*]] = memref.load %[[M]][%[[ROW2]], %[[J]]] : memref<16x16xf32>
// CHECK-NEXT:    memref.store %[[V]], %[[M]][%[[J]], %[[I]]] : memref<16x16xf32>
// CHECK-NOT:     affine.
func.func @load_store_maps(%m: memref<16x16xf32>, %i: index, %j: index) {
  %v = affine.load %m[%i * 2 + %j - 1, %j] : memref<16x16xf32>
  %w = "affine.load"(%m, %i, %j) <{map = affine_map<(d0, d1) -> (d0 * 2 + d1 - 1, d1)>}> : (memref<16x16xf32>, index, index) -> f32
  affine.store %v, %m[%j, %i] : memref<16x16xf32>
  func.return
}

// -----

// floordiv by a positive constant, with signed semantics: for a < 0 the quotient of
// (-1 - a) is taken and corrected, so that only arith.divsi is needed.
// CHECK-LABEL: func.func @apply_floordiv
// CHECK-SAME:    (%[[A:.*]]: index) -> index
// CHECK:         %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[NEG:.*]] = arith.cmpi slt, %[[A]], %[[C0]] : index
// CHECK-NEXT:    %[[ND:.*]] = arith.subi %[[CM1]], %[[A]] : index
// CHECK-NEXT:    %[[DIVIDEND:.*]] = arith.select %[[NEG]], %[[ND]], %[[A]] : index
// CHECK-NEXT:    %[[Q:.*]] = arith.divsi %[[DIVIDEND]], %[[C4]] : index
// CHECK-NEXT:    %[[CQ:.*]] = arith.subi %[[CM1]], %[[Q]] : index
// CHECK-NEXT:    %[[R:.*]] = arith.select %[[NEG]], %[[CQ]], %[[Q]] : index
// CHECK-NEXT:    func.return %[[R]] : index
func.func @apply_floordiv(%a: index) -> index {
  %r = affine.apply affine_map<(d0) -> (d0 floordiv 4)>(%a)
  func.return %r : index
}

// -----

// ceildiv: a <= 0 ? -((-a) divsi b) : ((a - 1) divsi b) + 1
// CHECK-LABEL: func.func @apply_ceildiv
// CHECK-SAME:    (%[[A:.*]]: index) -> index
// CHECK:         %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[NP:.*]] = arith.cmpi sle, %[[A]], %[[C0]] : index
// CHECK-NEXT:    %[[NEGA:.*]] = arith.subi %[[C0]], %[[A]] : index
// CHECK-NEXT:    %[[DEC:.*]] = arith.subi %[[A]], %[[C1]] : index
// CHECK-NEXT:    %[[DIVIDEND:.*]] = arith.select %[[NP]], %[[NEGA]], %[[DEC]] : index
// CHECK-NEXT:    %[[Q:.*]] = arith.divsi %[[DIVIDEND]], %[[C4]] : index
// CHECK-NEXT:    %[[NQ:.*]] = arith.subi %[[C0]], %[[Q]] : index
// CHECK-NEXT:    %[[IQ:.*]] = arith.addi %[[Q]], %[[C1]] : index
// CHECK-NEXT:    %[[R:.*]] = arith.select %[[NP]], %[[NQ]], %[[IQ]] : index
// CHECK-NEXT:    func.return %[[R]] : index
func.func @apply_ceildiv(%a: index) -> index {
  %r = affine.apply affine_map<(d0) -> (d0 ceildiv 4)>(%a)
  func.return %r : index
}

// -----

// mod: remsi, made non-negative by adding the divisor to a negative remainder.
// The dividend d0 + s0 applies the map to a dim and a symbol.
// CHECK-LABEL: func.func @apply_mod
// CHECK-SAME:    (%[[A:.*]]: index, %[[N:.*]]: index) -> index
// CHECK:         %[[SUM:.*]] = arith.addi %[[A]], %[[N]] : index
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[REM:.*]] = arith.remsi %[[SUM]], %[[C8]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[NEG:.*]] = arith.cmpi slt, %[[REM]], %[[C0]] : index
// CHECK-NEXT:    %[[ADJ:.*]] = arith.addi %[[REM]], %[[C8]] : index
// CHECK-NEXT:    %[[R:.*]] = arith.select %[[NEG]], %[[ADJ]], %[[REM]] : index
// CHECK-NEXT:    func.return %[[R]] : index
func.func @apply_mod(%a: index, %n: index) -> index {
  %r = affine.apply affine_map<(d0)[s0] -> ((d0 + s0) mod 8)>(%a)[%n]
  func.return %r : index
}

// -----

// Trivial cases fold: a constant expression is one constant, division by 1 is nothing,
// mod 1 is 0.
// CHECK-LABEL: func.func @apply_folds
// CHECK-SAME:    (%[[A:.*]]: index) -> (index, index, index)
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    func.return %[[C3]], %[[A]], %[[C0]] : index, index, index
func.func @apply_folds(%a: index) -> (index, index, index) {
  %c = affine.apply affine_map<() -> (7 floordiv 2)>()
  %d = affine.apply affine_map<(d0) -> (d0 floordiv 1)>(%a)
  %e = affine.apply affine_map<(d0) -> (d0 mod 1)>(%a)
  func.return %c, %d, %e : index, index, index
}

// -----

// CHECK-LABEL: func.func @affine_min
// CHECK-SAME:    (%[[I:.*]]: index, %[[N:.*]]: index) -> index
// CHECK:         %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT:    %[[E:.*]] = arith.subi %[[N]], %[[I]] : index
// CHECK-NEXT:    %[[M:.*]] = arith.minsi %[[C32]], %[[E]] : index
// CHECK-NEXT:    func.return %[[M]] : index
func.func @affine_min(%i: index, %n: index) -> index {
  %m = affine.min affine_map<(d0)[s0] -> (32, s0 - d0)>(%i)[%n]
  func.return %m : index
}

// -----

// A padded read: the condition is the conjunction of the set's constraints, and the
// affine.if with a result becomes an scf.if with one.
// CHECK-LABEL: func.func @if_else_padding
// CHECK-SAME:    (%[[M:.*]]: memref<8x8xf32>, %[[I:.*]]: index, %[[J:.*]]: index, %[[PAD:.*]]: f32) -> f32
// CHECK:         %[[S:.*]] = arith.addi %[[I]], %[[J]] : index
// CHECK-NEXT:    %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[E0:.*]] = arith.addi %[[S]], %[[CM1]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[K0:.*]] = arith.cmpi sge, %[[E0]], %[[C0]] : index
// CHECK-NEXT:    %[[NI:.*]] = arith.muli %[[I]], %[[CM1]] : index
// CHECK-NEXT:    %[[D:.*]] = arith.subi %[[NI]], %[[J]] : index
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[E1:.*]] = arith.addi %[[D]], %[[C8]] : index
// CHECK-NEXT:    %[[K1:.*]] = arith.cmpi sge, %[[E1]], %[[C0]] : index
// CHECK-NEXT:    %[[COND:.*]] = arith.andi %[[K0]], %[[K1]] : i1
// CHECK-NEXT:    %[[R:.*]] = scf.if %[[COND]] -> (f32) {
// CHECK-NEXT:      %[[V:.*]] = memref.load %[[M]][%[[I]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:      scf.yield %[[V]] : f32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[PAD]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]] : f32
func.func @if_else_padding(%m: memref<8x8xf32>, %i: index, %j: index, %pad: f32) -> f32 {
  %r = "affine.if"(%i, %j) <{condition = affine_set<(d0, d1) : (d0 + d1 - 1 >= 0, -d0 - d1 + 8 >= 0)>}> ({
    %v = affine.load %m[%i, %j] : memref<8x8xf32>
    "affine.yield"(%v) : (f32) -> ()
  }, {
    "affine.yield"(%pad) : (f32) -> ()
  }) : (index, index) -> f32
  func.return %r : f32
}

// -----

// Without else (and an equality over a dim and a symbol): an scf.if without else.
// CHECK-LABEL: func.func @if_no_else
// CHECK-SAME:    (%[[M:.*]]: memref<8xf32>, %[[I:.*]]: index, %[[N:.*]]: index, %[[V:.*]]: f32)
// CHECK:         %[[E:.*]] = arith.subi %[[I]], %[[N]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[COND:.*]] = arith.cmpi eq, %[[E]], %[[C0]] : index
// CHECK-NEXT:    scf.if %[[COND]] {
// CHECK-NEXT:      memref.store %[[V]], %[[M]][%[[I]]] : memref<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @if_no_else(%m: memref<8xf32>, %i: index, %n: index, %v: f32) {
  "affine.if"(%i, %n) <{condition = affine_set<(d0)[s0] : (d0 - s0 == 0)>}> ({
    affine.store %v, %m[%i] : memref<8xf32>
    "affine.yield"() : () -> ()
  }, {
  }) : (index, index) -> ()
  func.return
}

// -----

// A matmul nest: the inner loops' bodies keep using the outer induction variables.
// CHECK-LABEL: func.func @nested_loops
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          %[[A:.*]] = memref.load %{{.*}}[%[[I]], %[[K]]] : memref<4x6xf32>
// CHECK-NEXT:          %[[B:.*]] = memref.load %{{.*}}[%[[K]], %[[J]]] : memref<6x5xf32>
// CHECK-NEXT:          %[[C:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT:          %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:          %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT:          memref.store %[[S]], %{{.*}}[%[[I]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     affine.
func.func @nested_loops(%a: memref<4x6xf32>, %b: memref<6x5xf32>, %c: memref<4x5xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 6 {
        %x = affine.load %a[%i, %k] : memref<4x6xf32>
        %y = affine.load %b[%k, %j] : memref<6x5xf32>
        %z = affine.load %c[%i, %j] : memref<4x5xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %z, %p : f32
        affine.store %s, %c[%i, %j] : memref<4x5xf32>
      }
    }
  }
  func.return
}

// -----

// affine.parallel without reductions: scf.parallel, each bound group a max or min, the
// affine.yield an scf.reduce. Vector loads and stores keep their map.
// CHECK-LABEL: func.func @parallel_simple
// CHECK-SAME:    (%[[M:.*]]: memref<?x?xf32>, %[[N:.*]]: index, %[[K:.*]]: index)
// CHECK:         %[[LB0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT:    %[[E:.*]] = arith.addi %[[N]], %[[C32]] : index
// CHECK-NEXT:    %[[C64:.*]] = arith.constant 64 : index
// CHECK-NEXT:    %[[UB1:.*]] = arith.minsi %[[E]], %[[C64]] : index
// CHECK-NEXT:    %[[S0:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[S1:.*]] = arith.constant 4 : index
// CHECK-NEXT:    "scf.parallel"(%[[LB0]], %[[K]], %[[N]], %[[UB1]], %[[S0]], %[[S1]])
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK:           %[[J4:.*]] = arith.muli %[[J]], %{{.*}} : index
// CHECK-NEXT:      %[[V:.*]] = vector.load %[[M]][%[[I]], %[[J4]]] : memref<?x?xf32>, vector<4xf32>
// CHECK-NEXT:      vector.store %[[V]], %[[M]][%[[J]], %[[I]]] : memref<?x?xf32>, vector<4xf32>
// CHECK-NEXT:      scf.reduce
// CHECK-NEXT:    })
func.func @parallel_simple(%m: memref<?x?xf32>, %n: index, %k: index) {
  "affine.parallel"(%k, %n) <{lowerBoundsMap = affine_map<()[s0] -> (0, s0)>, lowerBoundsGroups = dense<[1, 1]> : vector<2xi32>, upperBoundsMap = affine_map<()[s0] -> (s0, s0 + 32, 64)>, upperBoundsGroups = dense<[1, 2]> : vector<2xi32>, steps = [1 : i64, 4 : i64], reductions = []}> ({
  ^bb0(%i: index, %j: index):
    %v = affine.vector_load %m[%i, %j * 4] : memref<?x?xf32>, vector<4xf32>
    affine.vector_store %v, %m[%j, %i] : memref<?x?xf32>, vector<4xf32>
    "affine.yield"() : () -> ()
  }) : (index, index) -> ()
  func.return
}

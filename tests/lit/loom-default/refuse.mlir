// RUN: not env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1" loom-opt %s -p 'loom-default{skip=bogus}' --split-input-file 2>&1 | filecheck %s
// RUN: not env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1" loom-opt %s -p 'loom-default{skip=pack,bogus,zzz}' --split-input-file 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not env LOOM_TARGET="cpu=test,l1=32768,vector_bits=x" loom-opt %s -p loom-default 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not env LOOM_TARGET="cpu=test,l4=1M" loom-opt %s -p loom-default 2>&1 | filecheck %s --check-prefix=KEY

// What loom-default refuses. `skip=` names steps of the schedule (peel, tile, pack,
// vectorize, unroll-jam, hoist, prefetch, fuse-pack, parallel); an unknown one is an error naming the valid steps, raised
// before anything is changed: no module is printed, no traceback, exit status 1.
// CHECK-NOT:   Traceback
// CHECK:       {{^}}loom-opt: error: loom-default: unknown step bogus in option 'skip' (steps: direct, im2col, grouped, fuse, peel, tile, pack, vectorize, unroll-jam, hoist, prefetch, fuse-pack, parallel)
// CHECK-NOT:   affine.for
// CHECK-NOT:   func.func
// CHECK-NOT:   Traceback

// Several unknown steps are named together, sorted; a valid one beside them does not
// make the option acceptable.
// MANY-NOT:    Traceback
// MANY:        {{^}}loom-opt: error: loom-default: unknown steps bogus, zzz in option 'skip' (steps: direct, im2col, grouped, fuse, peel, tile, pack, vectorize, unroll-jam, hoist, prefetch, fuse-pack, parallel)
// MANY-NOT:    affine.for
// MANY-NOT:    Traceback
// A bad LOOM_TARGET (the target the cost model plans for) is an error too: a field
// that needs a number, and a field the target does not have.
// TARGET-NOT:  Traceback
// TARGET:      {{^}}loom-opt: error: LOOM_TARGET: 'vector_bits' needs a number, got 'x'
// TARGET-NOT:  affine.for
// KEY-NOT:     Traceback
// KEY:         {{^}}loom-opt: error: LOOM_TARGET: expected key=value with key in cpu, l1, l2, l3, vector_bits, vector_registers, fma, threads, bf16_dot, int8_dot, got 'l4=1M'
// KEY-NOT:     affine.for
func.func @mm(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>) -> tensor<8x16xf32> {
  %c = loom.matmul %a, %b : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  func.return %c : tensor<8x16xf32>
}

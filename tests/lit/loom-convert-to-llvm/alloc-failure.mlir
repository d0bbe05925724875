// RUN: loom-opt %s -p convert-scf-to-cf,loom-convert-to-llvm --split-input-file | filecheck %s

// A function that allocates returns an i32 status: 0, or the number of the allocation
// site that got a null pointer (sites are numbered in module order, from 1). After each
// allocation, an unlikely branch to the cleanup of what the function holds at that point,
// with the site number as the status: a cleanup block frees the latest buffer held and
// goes on to the one for the rest, shared by the failure points (n buffers held one after
// another take n blocks); the last returns the status.
func.func @three_temporaries(%A: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  %u = memref.alloc() : memref<8xf32>
  %w = memref.alloc() : memref<16xf32>
  memref.dealloc %t : memref<4xf32>
  memref.dealloc %u : memref<8xf32>
  memref.dealloc %w : memref<16xf32>
  func.return
}

// CHECK-LABEL: llvm.func @three_temporaries(
// CHECK-SAME:    ) -> i32
// CHECK-NEXT:    %[[FALSE:.*]] = llvm.mlir.constant(false) : i1
// CHECK-NEXT:    %[[NULL:.*]] = llvm.mlir.constant(0) : i64
// CHECK:         %t = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 1 : i32, name = "t", type = memref<4xf32>, bytes = 16 : i64}}
// CHECK-NEXT:    %[[TA:.*]] = llvm.ptrtoint %t : !llvm.ptr to i64
// CHECK-NEXT:    %[[TN:.*]] = llvm.icmp "eq" %[[TA]], %[[NULL]] : i64
// CHECK-NEXT:    %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:    %[[TX:.*]] = llvm.call_intrinsic "llvm.expect.i1"(%[[TN]], %[[FALSE]]) : (i1, i1) -> i1
// CHECK-NEXT:    llvm.cond_br %[[TX]], ^[[NONE:.*]](%[[ONE]] : i32), ^[[GOT_T:.*]]
// CHECK-NEXT:  ^[[GOT_T]]:
// CHECK:         %u = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 2 : i32, name = "u", type = memref<8xf32>, bytes = 32 : i64}}
// CHECK-NEXT:    %[[UA:.*]] = llvm.ptrtoint %u : !llvm.ptr to i64
// CHECK-NEXT:    %[[UN:.*]] = llvm.icmp "eq" %[[UA]], %[[NULL]] : i64
// CHECK-NEXT:    %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT:    %[[UX:.*]] = llvm.call_intrinsic "llvm.expect.i1"(%[[UN]], %[[FALSE]]) : (i1, i1) -> i1
// CHECK-NEXT:    llvm.cond_br %[[UX]], ^[[FREE_T:.*]](%[[TWO]] : i32), ^[[GOT_U:.*]]
// CHECK-NEXT:  ^[[GOT_U]]:
// CHECK:         %w = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 3 : i32, name = "w", type = memref<16xf32>, bytes = 64 : i64}}
// CHECK:         %[[THREE:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK-NEXT:    %[[WX:.*]] = llvm.call_intrinsic "llvm.expect.i1"(%{{.*}}, %[[FALSE]]) : (i1, i1) -> i1
// CHECK-NEXT:    llvm.cond_br %[[WX]], ^[[FREE_U:.*]](%[[THREE]] : i32), ^[[GOT_W:.*]]
// CHECK-NEXT:  ^[[GOT_W]]:
// CHECK-NEXT:    llvm.call @free(%t) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.call @free(%u) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.call @free(%w) : (!llvm.ptr) -> ()
// CHECK-NEXT:    %[[OK:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    llvm.return %[[OK]] : i32
// Nothing held (%t failed): return the status.
// CHECK-NEXT:  ^[[NONE]](%[[S0:.*]]: i32):
// CHECK-NEXT:    llvm.return %[[S0]] : i32
// %t held (%u failed): free it, then return.
// CHECK-NEXT:  ^[[FREE_T]](%[[S1:.*]]: i32):
// CHECK-NEXT:    llvm.call @free(%t) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.br ^[[NONE]](%[[S1]] : i32)
// %t and %u held (%w failed): free %u, then on as for %t.
// CHECK-NEXT:  ^[[FREE_U]](%[[S2:.*]]: i32):
// CHECK-NEXT:    llvm.call @free(%u) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.br ^[[FREE_T]](%[[S2]] : i32)
// CHECK-NEXT:  }

// -----

// In a loop: the buffer of the iteration before was freed, the one from before the loop
// is held on every path to the inner allocation.
func.func @in_loop(%A: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %outer = memref.alloc() : memref<16xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %inner = memref.alloc() : memref<4xf32>
    memref.dealloc %inner : memref<4xf32>
  }
  memref.dealloc %outer : memref<16xf32>
  func.return
}

// CHECK-LABEL: llvm.func @in_loop(
// CHECK:         %outer = llvm.call @aligned_alloc
// CHECK:         llvm.cond_br %{{.*}}, ^[[NONE:.*]](%{{.*}} : i32), ^{{.*}}
// CHECK:         %inner = llvm.call @aligned_alloc
// CHECK:         llvm.cond_br %{{.*}}, ^[[OUTER:.*]](%{{.*}} : i32), ^{{.*}}
// CHECK:       ^[[NONE]](%[[S0:.*]]: i32):
// CHECK-NEXT:    llvm.return %[[S0]] : i32
// CHECK-NEXT:  ^[[OUTER]](%[[S1:.*]]: i32):
// CHECK-NEXT:    llvm.call @free(%outer) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.br ^[[NONE]](%[[S1]] : i32)
// CHECK-NEXT:  }

// -----

// A call of a function that may fail passes its nonzero status on, after freeing what the
// caller holds. Functions that cannot fail, and external ones, keep returning nothing.
func.func private @callee(%A: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.dealloc %t : memref<4xf32>
  func.return
}
func.func @caller(%A: memref<4xf32>) {
  %u = memref.alloc() : memref<8xf32>
  func.call @callee(%A) : (memref<4xf32>) -> ()
  memref.dealloc %u : memref<8xf32>
  func.return
}
func.func private @external(memref<4xf32>)
func.func @plain(%A: memref<4xf32>) {
  func.call @external(%A) : (memref<4xf32>) -> ()
  func.return
}

// CHECK-LABEL: llvm.func internal @callee(
// CHECK-SAME:    ) -> i32
// CHECK:         {alloc_site = {site = 1 : i32, name = "t", type = memref<4xf32>, bytes = 16 : i64}}
// CHECK-LABEL: llvm.func @caller(
// CHECK-SAME:    ) -> i32
// CHECK-NEXT:    llvm.mlir.constant(false) : i1
// CHECK-NEXT:    llvm.mlir.constant(0) : i64
// CHECK-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %u = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 2 : i32, name = "u", type = memref<8xf32>, bytes = 32 : i64}}
// CHECK:         %[[S:.*]] = llvm.call @callee(%{{.*}}) : (!llvm.ptr) -> i32
// CHECK-NEXT:    %[[BAD:.*]] = llvm.icmp "ne" %[[S]], %[[ZERO]] : i32
// CHECK-NEXT:    %[[X:.*]] = llvm.call_intrinsic "llvm.expect.i1"(%[[BAD]], %{{.*}}) : (i1, i1) -> i1
// CHECK-NEXT:    llvm.cond_br %[[X]], ^[[FREE_U:.*]](%[[S]] : i32), ^{{.*}}
// CHECK:       ^[[FREE_U]](%[[STATUS:.*]]: i32):
// CHECK-NEXT:    llvm.call @free(%u) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.br ^{{.*}}(%[[STATUS]] : i32)
// CHECK-NEXT:  }
// CHECK-NEXT:  llvm.func @external(!llvm.ptr)
// CHECK-NEXT:  llvm.func @plain(%{{.*}}: !llvm.ptr {llvm.noalias, llvm.nocapture}) attributes {no_unwind} {
// CHECK-NEXT:    llvm.call @external(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK-NEXT:    llvm.return
// CHECK-NEXT:  }

// -----

// A free of a pointer that is not an allocation's (here an argument's) forgets what is
// held: the failure path then leaks %t rather than risk freeing a buffer twice.
func.func @unknown_free(%A: memref<4xf32>) {
  %t = memref.alloc() : memref<8xf32>
  memref.dealloc %A : memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.dealloc %u : memref<4xf32>
  memref.dealloc %t : memref<8xf32>
  func.return
}

// CHECK-LABEL: llvm.func @unknown_free(
// CHECK:         %t = llvm.call @aligned_alloc
// CHECK:         llvm.cond_br %{{.*}}, ^[[NONE:.*]](%{{.*}} : i32), ^{{.*}}
// CHECK:         llvm.call @free(%A)
// CHECK:         %u = llvm.call @aligned_alloc
// CHECK:         llvm.cond_br %{{.*}}, ^[[NONE]](%{{.*}} : i32), ^{{.*}}
// CHECK:       ^[[NONE]](%[[S:.*]]: i32):
// CHECK-NEXT:    llvm.return %[[S]] : i32
// CHECK-NEXT:  }

// -----

// From 64 KiB up (compiler/jit/pool.py) a buffer comes from loom_take and goes back to
// loom_give, which keeps it for the next call; the failure path is the same, and a
// buffer held when a later allocation fails is freed. Below 64 KiB: aligned_alloc, free.
// CHECK-LABEL: llvm.func @pooled
// CHECK:         %big = llvm.call @loom_take(%{{.*}}, %{{.*}}) {alloc_site = {site = 1 : i32, name = "big", type = memref<128x128xf32>, bytes = 65536 : i64}}
// CHECK:         %small = llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) {alloc_site = {site = 2 : i32, name = "small", type = memref<16xf32>, bytes = 64 : i64}}
// CHECK:         llvm.call @free(%small) : (!llvm.ptr) -> ()
// CHECK:         llvm.call @loom_give(%big, %{{.*}}) : (!llvm.ptr, i64) -> ()
// CHECK:         llvm.call @free(%big) : (!llvm.ptr) -> ()
func.func @pooled() {
  %big = memref.alloc() {alignment = 64 : i64} : memref<128x128xf32>
  %small = memref.alloc() : memref<16xf32>
  memref.dealloc %small : memref<16xf32>
  memref.dealloc %big : memref<128x128xf32>
  func.return
}

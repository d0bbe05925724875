"""loom-prefetch{distance=1 locality=3 op=...}: software prefetch of what the next
iterations of a loop will load before the loop inside it can start.

A loop body that loads from memory and then runs an inner loop that needs those values
stalls at every iteration for the loads' latency: after loom-hoist, the register tile's
loop loads its block of C (a line per row, rows a whole matrix row apart, far from the
hardware prefetcher's streams) and the k loop's first fmas wait for it. For every
`affine.load`/`affine.vector_load` directly in a loop's body, whose address moves with
the loop's iv and that comes before a nested loop, this pass puts a `loom.prefetch` of
the address the load will have `distance` iterations later at the top of the body:
`write` when the body also stores to that address (C's tile is written back), `read`
otherwise.

```mlir
affine.for %i = 0 to 96 step 6 {
  %c0 = affine.vector_load %C[%i, %j] : memref<96x64xf32>, vector<8xf32>
  %r = affine.for %k = 0 to 64 iter_args(%acc = %c0) -> (vector<8xf32>) { ... }
  affine.vector_store %r, %C[%i, %j] : memref<96x64xf32>, vector<8xf32>
}
// becomes
affine.for %i = 0 to 96 step 6 {
  %0 = affine.apply affine_map<(d0, d1) -> ((d0 + 6))>(%i, %j)
  loom.prefetch %C[%0, %j], write, locality<3>, data : memref<96x64xf32>
  %c0 = affine.vector_load %C[%i, %j] : memref<96x64xf32>, vector<8xf32>
  ...
```

The prefetched address of the last iterations lies past the loop's range (even past the
memref): a prefetch never faults and changes no value, so no guard is needed. Loads in
innermost loops (streams the hardware prefetcher follows) and masked loads are left
alone, and so is a loop that prefetches already (the pass can run twice). Both vectors
of a row of C get a prefetch: if C is not 64-byte aligned they are on two lines.

`loom.prefetch` has unknown memory effects to the other passes (as MLIR's
memref.prefetch has), so that no pass drops it as dead: run loom-prefetch last.
Refused (LoomError): distance < 1, locality outside 0..3.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.passes import ModulePass

from passes.support.remarks import remark
from dialects.loom import PrefetchOp
from passes.schedule.loop_transforms import shift_map_operand
from passes.analysis.loop_utils import (
    AFFINE_LOADS,
    AFFINE_STORES,
    constant_trip_count,
    describe_access,
    iv_name,
    loops_of_nest,
    raise_problems,
    select_nests,
    step_of,
    used_positions,
)


def _holds_loop(op: Operation) -> bool:
    return any(isinstance(inner, affine.ForOp) for inner in op.walk())


def _address(op: Operation) -> tuple[SSAValue, AffineMap, tuple[SSAValue, ...]]:
    return op.memref, op.map.data, tuple(op.indices)


@dataclass(frozen=True)
class LoomPrefetchPass(ModulePass):
    name = "loom-prefetch"

    distance: int = 1
    locality: int = 3
    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, [
            f"option 'distance' must be a positive integer (iterations ahead), got {self.distance}"
            if not isinstance(self.distance, int) or self.distance < 1 else None,
            f"option 'locality' is 0 (no reuse) to 3 (keep in every cache level), got {self.locality}"
            if not isinstance(self.locality, int) or not 0 <= self.locality <= 3 else None,
        ])
        nests = select_nests(op, self.op, self.name)
        for nest in nests:
            for loop in loops_of_nest(nest):
                self._prefetch(loop)

    def _prefetch(self, loop: affine.ForOp) -> None:
        body = loop.body.block
        iv = body.args[0]
        ops = list(body.ops)
        last_loop = max((n for n, o in enumerate(ops) if _holds_loop(o)), default=0)
        loads = [o for o in ops[:last_loop] if isinstance(o, AFFINE_LOADS) and self._moves_with(o, iv)]
        if not loads:
            return
        if any(isinstance(o, PrefetchOp) for o in ops):
            remark(self.name, loop, f"loop %{iv_name(loop)} skipped: it already prefetches", missed=True)
            return
        if constant_trip_count(loop) == 1:
            remark(self.name, loop, f"loop %{iv_name(loop)} skipped: a single iteration, no next one to prefetch for",
                   missed=True)
            return
        stored = {_address(o) for o in ops if isinstance(o, AFFINE_STORES)}
        delta = self.distance * step_of(loop)
        seen: set[tuple[SSAValue, AffineMap, tuple[SSAValue, ...]]] = set()
        computed: dict[tuple[AffineExpr, int, int, tuple[SSAValue, ...]], SSAValue] = {}
        first = body.first_op
        assert first is not None
        writes = 0
        for load in loads:
            mem, m, indices = _address(load)
            ahead = m
            for position in (p for p, v in enumerate(indices) if v is iv):
                ahead = shift_map_operand(ahead, position, delta)
            if (mem, ahead, indices) in seen:
                continue
            seen.add((mem, ahead, indices))
            subscripts = [self._subscript(e, m, indices, computed, first) for e in ahead.results]
            write = (mem, m, indices) in stored
            writes += write
            body.insert_op_before(PrefetchOp(mem, subscripts, write=write, locality=self.locality), first)
        example = describe_access(loads[0])
        ahead_words = "one iteration" if self.distance == 1 else f"{self.distance} iterations"
        remark(self.name, loop, f"loop %{iv_name(loop)}: {len(seen)} prefetch{'es' * (len(seen) != 1)} "
               f"{ahead_words} ({delta} in %{iv_name(loop)}) ahead of the loads before its inner loop "
               f"({writes} for writing, locality {self.locality}), e.g. of {example}")

    @staticmethod
    def _subscript(e: AffineExpr, m: AffineMap, indices: tuple[SSAValue, ...],
                   computed: dict[tuple[AffineExpr, int, int, tuple[SSAValue, ...]], SSAValue],
                   before: Operation) -> SSAValue:
        """The value of `e` over the load's operands: the operand itself for a bare
        dimension or symbol, else one `affine.apply` per distinct expression."""
        if isinstance(e, AffineDimExpr):
            return indices[e.position]
        if isinstance(e, AffineSymExpr):
            return indices[m.num_dims + e.position]
        key = (e, m.num_dims, m.num_symbols, indices)
        if key not in computed:
            apply = affine.ApplyOp(list(indices), AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, (e,))))
            assert before.parent is not None
            before.parent.insert_op_before(apply, before)
            computed[key] = apply.result
        return computed[key]

    @staticmethod
    def _moves_with(load: Operation, iv: SSAValue) -> bool:
        m = load.map.data
        return any(load.indices[p] is iv for p in used_positions(m.results, m.num_dims))

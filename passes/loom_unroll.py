"""loom-unroll{factor=... op=...}: unroll the innermost loops of each selected nest.

Every innermost `affine.for` of a selected nest (one that holds no other loop) is unrolled
by `factor`: a main loop stepping `factor` iterations at a time, whose body is `factor`
copies of the original, copy k reading the iv as `iv + k*step` (folded into the maps of
the loads and stores); loops with iter_args chain the carried values from copy to copy.
When the factor does not divide the trip count, a remainder loop runs the original body
over the iterations left. Bounds need not be constant: after tiling, the split point of
`%k = %k_t to min(%k_t + 32, 100)` is computed by affine ops before the loop.

```mlir
affine.for %k = 0 to 10 {             // loom-unroll{factor=4}
  "use"(%k)
}
// becomes
affine.for %k = 0 to 8 step 4 {
  "use"(%k)
  %k1 = affine.apply affine_map<(d0) -> (d0 + 1)>(%k)
  "use"(%k1)
  ...                                  // + 2, + 3
}
affine.for %k = 8 to 10 {
  "use"(%k)
}
```

A factor larger than a constant trip count is clamped to it; when the factor equals the
trip count the one-iteration loop left is dropped (MLIR's promoteIfSingleIteration): the
copies replace it, the iv read as its lower bound (unless it is the nest's outermost
loop, which keeps the nest's tag). Factor 1 changes nothing.
Refused (LoomError, nothing changed): a factor < 1. Skipped with a remark: a loop with
no iterations or a single one, and (with a non-constant extent) a loop whose lower
bound is a max of several expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from compiler.diagnostics import LoomError
from compiler.remarks import remark
from passes.loop_transforms import unroll_loop
from passes.loop_utils import (
    constant_trip_count,
    iv_name,
    loops_of_nest,
    nest_tag,
    select_nests,
)


@dataclass(frozen=True)
class LoomUnrollPass(ModulePass):
    name = "loom-unroll"

    factor: int = 0
    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not isinstance(self.factor, int) or self.factor < 1:
            raise LoomError(f"{self.name}: option 'factor' must be a positive integer, got {self.factor}")
        if self.factor == 1:
            remark(self.name, None, "factor 1: nothing to unroll")
            return
        for nest in select_nests(op, self.op):
            innermost = [l for l in loops_of_nest(nest) if len(loops_of_nest(l)) == 1]
            for loop in innermost:
                self._unroll(nest, loop)

    def _unroll(self, nest: affine.ForOp, loop: affine.ForOp) -> None:
        where = f"loop %{iv_name(loop)} of nest '{nest_tag(nest) or 'untagged'}'"
        trips = constant_trip_count(loop)
        factor = self.factor
        if trips is not None and trips <= 1:
            remark(self.name, loop, f"{where} skipped: {trips} iteration{'s' * (trips != 1)}, nothing to unroll")
            return
        if trips is None and len(loop.lowerBoundMap.data.results) > 1:
            remark(self.name, loop, f"{where} skipped: its lower bound is a max of several expressions")
            return
        if trips is not None and factor > trips:
            factor = trips
        promote = trips == factor and loop is not nest  # the nest's root keeps its tag
        if trips is None:
            counts = "trip count not constant: main and remainder split at run time"
        elif promote:
            counts = "a single iteration: the loop is replaced by the copies"
        else:
            counts = f"main loop {trips // factor} iteration{'s' * (trips // factor != 1)} of {factor} copies"
            counts += f", remainder {trips % factor}" if trips % factor else ", no remainder"
        clamp = f" (clamped to the trip count {trips})" if factor != self.factor else ""
        remark(self.name, loop, f"{where}: unrolled by {factor}, requested {self.factor}{clamp}; {counts}")
        unroll_loop(loop, factor, promote=promote)

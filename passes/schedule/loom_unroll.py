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

A factor larger than a constant trip count is clamped to it, and so is one larger than
the most iterations a loop can run (a tile's point loop `%k = %k_t to min(%k_t + 6, 100)`
runs at most 6: a main loop of more copies would never run); when the factor equals the
trip count the one-iteration loop left is dropped (MLIR's promoteIfSingleIteration): the
copies replace it, the iv read as its lower bound (unless it is the nest's outermost
loop, which keeps the nest's tag). Factor 1 changes nothing.
Refused (LoomError, nothing changed): a factor < 1; copies that would make a nest larger
than `loop_utils.MAX_UNROLLED_OPS` (20,000 ops; the estimate is the loop bodies times
the copies), checked for every nest before any is changed. Skipped with a remark: a loop
with no iterations or a single one, and (with a non-constant extent) a loop whose lower
bound is a max of several expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine

from passes.support.remarks import remark
from passes.schedule.loop_transforms import unroll_loop
from passes.analysis.loop_utils import (
    check_unrolled_size,
    constant_trip_count,
    iv_name,
    loops_of_nest,
    max_trip_count,
    nest_tag,
    op_count,
)
from passes.schedule.nest_pass import NestPass


#: an unrolling plan: (loop, factor, promote, remark) per innermost loop to unroll
_Unrolling = list[tuple[affine.ForOp, int, bool, str]]


@dataclass(frozen=True)
class LoomUnrollPass(NestPass[_Unrolling]):
    name = "loom-unroll"

    factor: int = 0
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        if not isinstance(self.factor, int) or self.factor < 1:
            return [f"option 'factor' must be a positive integer, got {self.factor}"]
        return []

    def nothing_to_do(self) -> str | None:
        return "factor 1: nothing to unroll" if self.factor == 1 else None

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Unrolling:
        """(loop, factor, promote, remark) for each innermost loop of the nest to unroll
        (the others get their remark here); a LoomError when the copies would make the
        nest larger than the size limit."""
        innermost = [l for l in loops_of_nest(nest) if len(loops_of_nest(l)) == 1]
        plan = [p for loop in innermost if (p := self._loop_plan(nest, loop)) is not None]
        check_unrolled_size(self.name, nest, _estimate(nest, plan), f"unrolling its innermost loops by {self.factor}")
        return plan

    def rewrite(self, nest: affine.ForOp, plan: _Unrolling) -> None:
        for loop, factor, promote, message in plan:
            remark(self.name, loop, message)
            unroll_loop(loop, factor, promote=promote)

    def _loop_plan(self, nest: affine.ForOp, loop: affine.ForOp) -> tuple[affine.ForOp, int, bool, str] | None:
        where = f"loop %{iv_name(loop)} of nest '{nest_tag(nest) or 'untagged'}'"
        trips = constant_trip_count(loop)
        most = max_trip_count(loop)
        factor = self.factor
        if most is not None and most <= 1:
            many = f"{'' if trips is not None else 'at most '}{most} iteration{'s' * (most != 1)}"
            remark(self.name, loop, f"{where} skipped: {many}, nothing to unroll", missed=True)
            return None
        if trips is None and len(loop.lowerBoundMap.data.results) > 1:
            remark(self.name, loop, f"{where} skipped: its lower bound is a max of several expressions", missed=True)
            return None
        if most is not None and factor > most:
            factor = most
        promote = trips == factor and loop is not nest  # the nest's root keeps its tag
        if trips is None:
            counts = "trip count not constant: main and remainder split at run time"
        elif promote:
            counts = "a single iteration: the loop is replaced by the copies"
        else:
            counts = f"main loop {trips // factor} iteration{'s' * (trips // factor != 1)} of {factor} copies"
            counts += f", remainder {trips % factor}" if trips % factor else ", no remainder"
        clamp = ""
        if factor != self.factor:
            clamp = f" (clamped to {'the trip count' if trips is not None else 'the most iterations it runs,'} {most})"
        return loop, factor, promote, f"{where}: unrolled by {factor}, requested {self.factor}{clamp}; {counts}"


def _estimate(nest: affine.ForOp, plan: _Unrolling) -> int:
    """About the ops of the nest after unrolling: each unrolled loop's body once per copy,
    and once more in the remainder loop when the factor may not divide the trip count;
    a copy is at least its iv's affine.apply (an empty body unrolled by 10^9 is refused)."""
    total = op_count(nest)
    for loop, factor, _, _ in plan:
        trips = constant_trip_count(loop)
        remainder = trips is None or trips % factor != 0
        total += (op_count(loop) - 2 + 1) * (factor - 1 + remainder)
    return total

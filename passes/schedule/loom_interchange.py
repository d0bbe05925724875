"""loom-interchange{order=... op=...}: permute the loops of a perfect band.

`order[i]` is the loop of the nest's outermost perfect band placed at position i; an
order shorter than the band permutes its first len(order) loops. For matmul,
`order=0,2,1` makes the textbook i, j, k nest i, k, j, whose innermost loop walks B and
C along rows:

```mlir
affine.for %i = 0 to 64 {                      affine.for %i = 0 to 64 {
  affine.for %j = 0 to 64 {                      affine.for %k = 0 to 64 {
    affine.for %k = 0 to 64 {           ->         affine.for %j = 0 to 64 {
      ... C[%i, %j] += A[%i, %k] * B[%k, %j]          ... (the same body)
    }                                              }
  }                                              }
} {loom.tag = "matmul"}                        } {loom.tag = "matmul"}
```

Loops keep their bounds, steps and iv names; the body is moved, not rewritten; the tag
stays on the outermost loop. `op=` selects the nests by tag; without it every nest whose
band is deep enough is permuted, the others skipped with a remark (an error when no nest
is deep enough: the pass would do nothing).

Refused with a LoomError at the nest, nothing changed: an order that is not a
permutation of 0..n-1 or is longer than the band of the selected nest; an order that
breaks a dependence (`passes.analysis.dependences`: the message names the dependence and lists
the legal orders; reductions may be reordered); an order that puts a loop outside a loop
its bounds depend on (a tiled band's point loop outside its tile loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.analysis.dependences import (
    Dependence,
    band_dependences,
    legal_orders,
    permutation_is_legal,
)
from passes.schedule.loop_transforms import permute_band
from passes.analysis.loop_utils import (
    bound_dependences,
    describe_band,
    iv_name,
    perfect_band,
    permutation_problem,
)
from passes.schedule.nest_pass import NestPass

#: legal orders listed in a refusal, at most; and the longest order whose
#: permutations are searched for them (8! = 40320)
LISTED_ORDERS = 12
SEARCHED_DEPTH = 8


@dataclass(frozen=True)
class LoomInterchangePass(NestPass[list[affine.ForOp]]):
    name = "loom-interchange"

    order: tuple[int, ...] = ()
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        if not self.order:
            return ["option 'order' is required (a permutation such as order=0,2,1)"]
        return [permutation_problem("order", self.order)]

    def misfit(self, nest: affine.ForOp) -> str | None:
        band = perfect_band(nest)
        if len(self.order) <= len(band):
            return None
        return f"order {list(self.order)} is longer than the {len(band)}-loop band {describe_band(band)}"

    def plan(self, nest: affine.ForOp, misfit: str | None) -> list[affine.ForOp] | str:
        """The nest's band when the order applies to it; why not, to skip it, when no
        nest was named; a LoomError when the order is illegal for it."""
        order = tuple(self.order)
        band = perfect_band(nest)
        where = f"band {describe_band(band)}"
        if misfit is not None:
            if self.op is None:
                return f"skipped: {misfit}"
            raise LoomError(f"{self.name}: {misfit}", nest)
        if any(loop.inits for loop in band[: len(order)]):
            raise LoomError(f"{self.name}: cannot permute loops that carry values (iter_args) in {where}", nest)
        bounds = bound_dependences(band)
        deps = band_dependences(band)
        outside = _bound_violation(order, bounds)
        broken = permutation_is_legal(deps, order)
        if outside is None and broken is None:
            return band
        if outside is not None:
            inner, outer = outside
            why = (
                f"puts loop {iv_name(band[inner])} outside loop {iv_name(band[outer])}, "
                f"which its bounds depend on,"
            )
        else:
            assert broken is not None
            why = f"breaks the dependence {broken.describe()}"
        raise LoomError(f"{self.name}: order {list(order)} {why} in {where}; {_legal(deps, bounds, len(order))}", nest)

    def rewrite(self, nest: affine.ForOp, band: list[affine.ForOp]) -> None:
        order = tuple(self.order)
        before = describe_band(band[: len(order)])
        if order == tuple(range(len(order))):
            remark(self.name, nest, f"band {before} kept: the order is the identity", missed=True)
            return
        after = describe_band([band[o] for o in order])
        remark(self.name, nest, f"interchanged band {before} -> {after}")
        permute_band(band, order)


def _legal(deps: list[Dependence], bounds: list[tuple[int, int]], n: int) -> str:
    if n > SEARCHED_DEPTH:
        return f"legal orders: not searched for an order of {n} loops"
    legal = [o for o in legal_orders(deps, n) if _bound_violation(o, bounds) is None]
    listed = ", ".join(str(list(o)) for o in legal[:LISTED_ORDERS])
    if len(legal) > LISTED_ORDERS:
        listed += f", ... ({len(legal)} in all)"
    return f"legal orders: {listed}"


def _bound_violation(order: tuple[int, ...], bounds: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The first (inner, outer) bound dependence the order puts inner outside outer."""
    placed = {loop: position for position, loop in enumerate(order)}
    for inner, outer in bounds:
        if inner in placed and outer in placed and placed[outer] > placed[inner]:
            return inner, outer
    return None

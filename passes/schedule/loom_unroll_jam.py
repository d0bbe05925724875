"""loom-unroll-jam{factors=... op=...}: unroll the outer loops of a band and jam the
copies into the innermost body (register tiling).

The band is the loops around the nest's statement (its perfect band, or after
loom-pack the compute loops beside the copy nests); only the loops of its perfect
innermost part can be jammed. For a band of depth d, `factors` gives up to d factors,
outermost first (1 leaves a loop alone); a factor for the innermost loop unrolls it
(there is nothing inside to jam), before the outer loops are jammed, so that the
copies come grouped by the outer loop: after loom-vectorize made %j two 8-wide steps,
`factors=...,6,2` on (k, i, j) gives, per i, one broadcast of A[i, k] and its two fmas.
Each such loop steps by factor*step and the innermost body holds the product of the factors copies, in lexicographic order (the
copies of an outer loop vary slowest). On matmul i, j, k (or i, k, j after
loom-interchange), `factors=4,4` updates a 4x4 block of C per innermost iteration.
`factors=2` on a 5-row matmul:

```mlir
affine.for %i = 0 to 5 {                  affine.for %i = 0 to 4 step 2 {
  affine.for %j = 0 to 8 {                  affine.for %j = 0 to 8 {
    affine.for %k = 0 to 3 {                  affine.for %k = 0 to 3 {
      C[%i, %j] += A[%i, %k] * B[%k, %j]        C[%i, %j] += A[%i, %k] * B[%k, %j]
    }                                ->         C[%i + 1, %j] += A[%i + 1, %k] * B[%k, %j]
  }                                           }
} {loom.tag = "matmul"}                     }
                                          } {loom.tag = "matmul"}
                                          affine.for %i_1 = 4 to 5 {
                                            ... the j and k loops as they were ...
                                          } {loom.tag = "matmul"}
```

When the factor does not divide the trip count, a cleanup loop runs the rest with the
loops inside it as they are (or as the unroll-jam of an inner loop made them). With
non-constant bounds (`%ii = %it to min(%it + 32, 100)` after tiling) the split point is
an `affine.apply` before the loop (with an `affine.min` for a multi-result upper bound),
`lb + ((ub - lb) floordiv f*step) * f*step`, and the cleanup loop starts at
`max(split, lb)`. The mechanics are `loop_transforms.unroll_jam_loop` (unroll, then
fuse the copies).

A main loop left with a single iteration (a full unroll-jam of a tile's 6-row point
loop, `%i = %i_t to %i_t + 6`) is replaced by its body, as loom-unroll does (except the
nest's outermost loop, which keeps the tag), so that the copies sit directly in the loop
around it: C's block can then be held in registers across k (loom-hoist).

Applied factors can be smaller than requested, as the remark says: a factor larger than
a constant trip count is lowered to it (or larger than the most iterations a tile's point
loop runs: its copies would never run), and a loop whose copies cannot be jammed gets 1
(a loop inside it has bounds that use its iv, as a tiled band's point loop does with its
tile loop; a max lower bound; iter_args).

After loom-hoist the statement's loops end above the reduction loop, which carries the
accumulators (iter_args): the band is (i, j) for matmul, and the k loop with its loads
and stores of C around it is part of the body, copied whole, one k loop per copy.

Refused with a LoomError at the nest, nothing changed: a factor below 1, more factors
than the band has outer loops (for a nest named by `op=`; other nests are skipped with
a remark, unless that is every nest), a jam that breaks a dependence (unroll-jam of L is
legal iff moving L innermost is: no non-reduction dependence with `<` on L and `>` on a
loop inside it),
copies that would make the nest larger than `loop_utils.MAX_UNROLLED_OPS` (20,000 ops:
the innermost body times the product of the factors, plus cleanup loops).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.dialects import affine

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.analysis.dependences import band_dependences, unroll_jam_is_legal
from passes.schedule.loop_transforms import promote_single_iteration, unroll_jam_loop
from passes.analysis.loop_utils import (
    bound_dependences,
    check_unrolled_size,
    constant_trip_count,
    describe_band,
    iv_name,
    max_trip_count,
    nest_tag,
    op_count,
    perfect_band,
    positive_problem,
    statement_loops,
)
from passes.schedule.nest_pass import NestPass, more_than_loops


#: an unroll-and-jam plan: the band, the factors applied, the remark
_Jam = tuple[list[affine.ForOp], list[int], str]


@dataclass(frozen=True)
class LoomUnrollJamPass(NestPass[_Jam]):
    name = "loom-unroll-jam"

    factors: tuple[int, ...] = ()
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        return [positive_problem("factors", self.factors)]

    def misfit(self, nest: affine.ForOp) -> str | None:
        return more_than_loops("factors", self.factors, statement_loops(nest))

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Jam | str:
        """(band, applied factors, remark) for a nest to transform; why not, to skip it
        with a remark; a LoomError for a nest that cannot take the factors asked."""
        factors = tuple(self.factors)
        band = statement_loops(nest)
        perfect_from = next(q for q in range(len(band)) if perfect_band(band[q]) == band[q:])
        where = f"band {describe_band(band)}"
        if misfit is not None:
            if self.op is None:
                return f"skipped: {misfit}"
            raise LoomError(f"{self.name}: {misfit}", nest)
        bounds = bound_dependences(band)
        applied, notes = [], []
        for position, factor in enumerate(factors):
            loop = band[position]
            factor = _clamped(loop, factor)
            why = _cannot_jam(band, position, bounds, perfect_from) if factor > 1 else None
            if why is not None:
                notes.append(f"{iv_name(loop)} not unrolled: {why}")
                factor = 1
            applied.append(factor)
        if all(f == 1 for f in applied):
            return "; ".join([f"{where} left as it is: factors {list(factors)} requested, none above 1 applies", *notes])
        deps = band_dependences(band[perfect_from:])  # the loops outside it stay fixed
        for position, factor in enumerate(applied):
            inner = position - perfect_from
            broken = unroll_jam_is_legal(deps, inner, len(band) - perfect_from) if factor > 1 else None
            if broken is not None:
                raise LoomError(
                    f"{self.name}: unroll-jam of loop {iv_name(band[position])} by {factor} breaks the dependence "
                    f"{broken.describe()} in {where}",
                    nest,
                )
        check_unrolled_size(self.name, nest, _estimate(nest, band, applied),
                            f"unroll-jam of band {describe_band(band)} by {applied}")
        return band, applied, "; ".join([_describe(band, factors, applied), *notes])

    def rewrite(self, nest: affine.ForOp, plan: _Jam) -> None:
        band, applied, message = plan
        remark(self.name, nest, message)
        mains = [
            unroll_jam_loop(band[position], applied[position], len(band) - 1 - position)[0]
            for position in reversed(range(len(applied)))
            if applied[position] > 1
        ]
        # Only once every loop is jammed: the jams walk the band's levels.
        for main in mains:
            if nest_tag(main) is None and main.parent is not None and constant_trip_count(main) == 1:
                promote_single_iteration(main)


def _cannot_jam(band: list[affine.ForOp], position: int, bounds: list[tuple[int, int]], perfect_from: int) -> str | None:
    """Why the copies of band loop `position` cannot be jammed, if they cannot."""
    loop = band[position]
    name = iv_name(loop)
    if position < perfect_from:
        return f"its body holds more than loop {iv_name(band[position + 1])} (copy nests or a vector remainder beside it)"
    if loop.inits:
        return "it carries values (iter_args)"
    if len(loop.lowerBoundMap.data.results) != 1:
        return "its lower bound is the max of several expressions"
    for inner, outer in bounds:
        if outer == position and inner > position:
            return f"the bounds of loop {iv_name(band[inner])} inside it depend on {name}"
    return None


def _describe(band: list[affine.ForOp], requested: tuple[int, ...], applied: list[int]) -> str:
    parts = []
    for loop, factor in zip(band, applied):
        if factor == 1:
            continue
        trips = constant_trip_count(loop)
        if trips is None:
            parts.append(f"{iv_name(loop)} by {factor} (a cleanup loop for the rest)")
        else:
            parts.append(
                f"{iv_name(loop)} by {factor} (trip count {trips}: {trips // factor} main iterations, "
                f"{trips % factor} in the cleanup loop)"
            )
    return (
        f"unroll-jam band {describe_band(band)}: factors {list(requested)} requested, {applied} applied, "
        f"{prod(applied)} copies of the body; " + "; ".join(parts)
    )


def _clamped(loop: affine.ForOp, factor: int) -> int:
    """The factor, at most the loop's trip count or the bound on it (a tile's point loop),
    and at least 1."""
    trips = max_trip_count(loop)
    return factor if trips is None else max(1, min(factor, trips))


def _estimate(nest: affine.ForOp, band: list[affine.ForOp], applied: list[int]) -> int:
    """About the ops of the nest after the unroll-jam: the innermost band loop's body
    once per copy, where each unrolled loop makes as many copies as its factor, and one
    more for its cleanup loop when the factor may not divide its trip count (the loops
    and split points around the copies are few)."""
    copies = 1
    for loop, factor in zip(band, applied):
        trips = constant_trip_count(loop)
        copies *= factor + (factor > 1 and (trips is None or trips % factor != 0))
    body = op_count(band[-1]) - 2 + 1  # the innermost band loop's body, without the loop and its yield; an iv
    return op_count(nest) + body * (copies - 1)

"""loom-peel{sizes=... op=...}: split the last iterations of a nest's outer loops off into
copies of the nest, so that the main nest's extents are multiples of `sizes` (index-set
splitting; MLIR's scf-for-loop-peeling at the level of a whole nest).

For a nest whose perfect band starts with loops of constant bounds, `sizes` gives up to
one size per band loop, outermost first. Loop p with trip count T is split at the last
multiple of sizes[p] iterations: the nest keeps iterations [0, T - T mod size) of it and a
copy of the whole nest, placed right after it, runs the rest. Loop 0 is peeled first; loop 1 is
then peeled in the main nest only (the copy peeled off loop 0 keeps every iteration of
loop 1), and so on. The copies keep the nest's tag, so the passes that follow with `op=`
schedule them as well, each with its own (small, constant) extents; loom-tile,
loom-unroll-jam and loom-vectorize clamp their sizes to them.

Why: after `loom-peel{sizes=6,16}` a 1024x1024 matmul's main nest has 1020 rows and 1024
columns, so every 6x16 register tile of the main nest is full: loom-tile emits
constant-extent point loops (`%i = %i_t to %i_t + 6`), which loom-unroll-jam unrolls
away, and C's 6x16 block stays in registers across k. The 4 rows left run as a copy.

```mlir
affine.for %i = 0 to 10 {                 affine.for %i = 0 to 6 {
  affine.for %j = 0 to 8 {       ->          affine.for %j = 0 to 8 { ... }
    ...                                     } {loom.tag = "matmul"}
  }                                         affine.for %i = 6 to 10 {
} {loom.tag = "matmul"}                       affine.for %j = 0 to 8 { ... }
                                            } {loom.tag = "matmul"}
```

A size of 1, or one that divides the trip count, leaves the loop alone; a loop with fewer
iterations than its size is not split either (all of it is remainder). Running the
peeled iterations after the main nest is legal when no dependence other than a
reduction's has a direction other than `=` on the loops up to the peeled one (matmul's i
and j; the reduction over k is reassociated, which Loom allows).

Refused with a LoomError at the nest, nothing changed: a size below 1; copies that would
make the nest and its copies larger than `loop_utils.MAX_UNROLLED_OPS` (20,000 ops: a
peel after an unroll); with `op=`, more
sizes than the nest's band has loops, a loop to split without constant bounds, a loop
up to it that carries values (iter_args), or a dependence that the split would break.
Without `op=` those nests are skipped with a remark (more sizes than every nest's band
has loops is an error: the pass would do nothing). Each split is a remark (`--remarks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.ir.affine import AffineMap

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.analysis.dependences import band_dependences
from passes.schedule.loop_transforms import rebuild_loop
from passes.analysis.loop_utils import (
    check_unrolled_size,
    constant_bounds,
    describe_band,
    iv_name,
    nest_tag,
    op_count,
    perfect_band,
    positive_problem,
    step_of,
)
from passes.schedule.nest_pass import NestPass, more_than_loops


#: a peeling plan: (band position, split point) per loop to split, and the remark
_Peeling = tuple[list[tuple[int, int]], str]


@dataclass(frozen=True)
class LoomPeelPass(NestPass[_Peeling]):
    name = "loom-peel"

    sizes: tuple[int, ...] = ()
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        return [positive_problem("sizes", self.sizes)]

    def misfit(self, nest: affine.ForOp) -> str | None:
        return more_than_loops("sizes", self.sizes, perfect_band(nest))

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Peeling | str:
        """((band position, split point) per loop to split, remark); why not, to skip the
        nest."""
        sizes = tuple(self.sizes)
        tag = nest_tag(nest) or "untagged"
        band = perfect_band(nest)
        why = misfit
        splits, notes = [], []
        for position, size in enumerate(sizes[: len(band)]):
            loop = band[position]
            bounds = constant_bounds(loop)
            if size == 1:
                continue
            if bounds is None:
                why = why or f"loop %{iv_name(loop)} of band {describe_band(band)} has no constant bounds"
                continue
            lower, upper = bounds
            step = step_of(loop)
            trips = max(0, -(-(upper - lower) // step))
            main = trips - trips % size
            if main in (0, trips):
                notes.append(f"%{iv_name(loop)}: {trips} iterations, nothing to peel for size {size}")
                continue
            splits.append((position, lower + main * step))
            notes.append(f"%{iv_name(loop)}: iterations [{lower}, {lower + main * step}) in the main nest, "
                         f"the last {trips - main} in a copy")
        if why is None and splits:
            # each split copies the whole (main) nest once: refused before the analysis,
            # whose time grows with the square of the accesses of a large unrolled body
            check_unrolled_size(self.name, nest, op_count(nest) * (1 + len(splits)),
                                f"peeling for sizes {list(sizes)} ({len(splits)} copies of the nest)",
                                "peel before unrolling, or fewer loops")
            last = max(p for p, _ in splits)
            carrying = next((loop for loop in band[: last + 1] if loop.inits), None)
            if carrying is not None:
                why = f"loop %{iv_name(carrying)} carries values (iter_args): the copy would restart them"
            for dep in band_dependences(band):
                if not dep.is_reduction and any(d != "=" for d in dep.directions[: last + 1]):
                    why = f"peeling would reorder the dependence {dep.describe()}"
                    break
        if why is not None:
            if self.op is not None:
                raise LoomError(f"{self.name}: cannot peel nest '{tag}': {why}", nest)
            return f"nest '{tag}' skipped: {why}"
        if not splits:
            return f"nest '{tag}' left as it is: " + ("; ".join(notes) or f"sizes {list(sizes)}, nothing to peel")
        return splits, f"nest '{tag}' peeled for sizes {list(sizes)}: " + "; ".join(notes)

    def rewrite(self, nest: affine.ForOp, plan: _Peeling) -> None:
        splits, message = plan
        remark(self.name, nest, message)
        for position, split in splits:
            nest, _ = peel(nest, position, split)


def peel(nest: affine.ForOp, position: int, split: int) -> tuple[affine.ForOp, affine.ForOp]:
    """Split band loop `position` of `nest` (constant bounds) at `split`: the nest keeps
    the iterations below it, a copy placed right after it runs the others. Returns
    (the nest, rebuilt when `position` is 0; the copy)."""
    copy = nest.clone()
    parent = nest.parent_block()
    assert parent is not None
    parent.insert_op_after(copy, nest)
    loop = rebuild_loop(perfect_band(nest)[position], upper=(AffineMap.constant_map(split), []))
    rebuild_loop(perfect_band(copy)[position], lower=(AffineMap.constant_map(split), []))
    return (loop if position == 0 else nest), copy

"""loom-tile{sizes=... op=... depth=0}: tile a perfect band of each selected loop nest.

`sizes` (iterations per tile) apply to the first len(sizes) loops of the perfect band that
starts `depth` loops below the nest's outermost loop. Tile loops step over the band,
outermost; point loops run inside one tile, clamped with a `min` where the size does not
divide the extent (no padding, nothing out of bounds):

```mlir
affine.for %i = 0 to 10 {            // loom-tile{sizes=4,4}
  affine.for %j = 0 to 8 {
    "use"(%i, %j)
  }
} {loom.tag = "t"}
// becomes
affine.for %i_t = 0 to 10 step 4 {
  affine.for %j_t = 0 to 8 step 4 {
    affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> (d0 + 4, 10)>(%i_t) {
      affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to affine_map<(d0) -> (d0 + 4)>(%j_t) {
        "use"(%i, %j)
      }
    }
  }
} {loom.tag = "t"}
```

After one tiling of a 3-deep band, the band is 6 deep and `depth=3` is the intra-tile
band: `loom-tile{sizes=64,64,64},loom-tile{sizes=8,8,8 depth=3}` tiles for the cache,
then for registers. A size larger than a loop's (constant) trip count is clamped to it.

Refused (LoomError, nothing changed): a size < 1, a negative depth, more sizes than the
band of a nest selected with `op=` has loops at that depth, a loop that carries values
(iter_args, after loom-hoist), a band whose loop bounds use the iv of an outer loop of
the band, and loops that are not fully permutable (a dependence that tiling would
reverse, named in the message; reductions may be reordered). Without `op=`, nests whose
band is too short are skipped with a remark (an error when that is every nest: the pass
would do nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.analysis.dependences import band_dependences, is_fully_permutable
from passes.schedule.loop_transforms import tile_band
from passes.analysis.loop_utils import (
    band_at,
    bound_dependences,
    constant_trip_count,
    describe_band,
    iv_name,
    nest_tag,
    perfect_band,
    positive_problem,
)
from passes.schedule.nest_pass import NestPass


#: a tiling plan: the band, the sizes applied, the remarks
_Tiling = tuple[list[affine.ForOp], list[int], list[str]]


@dataclass(frozen=True)
class LoomTilePass(NestPass[_Tiling]):
    name = "loom-tile"

    sizes: tuple[int, ...] = ()
    op: str | None = None
    depth: int = 0

    def option_problems(self) -> list[str | None]:
        return [
            positive_problem("sizes", self.sizes),
            f"option 'depth' must be >= 0, got {self.depth}" if self.depth < 0 else None,
        ]

    def misfit(self, nest: affine.ForOp) -> str | None:
        """Why the sizes do not fit the nest: its band at `depth` has fewer loops."""
        band = band_at(nest, self.depth)
        if len(band) >= len(self.sizes):
            return None
        if not band:
            outer = perfect_band(nest)
            return f"its perfect band {describe_band(outer)} has {_loops(len(outer))}, none at depth {self.depth}"
        return f"its band at depth {self.depth}, {describe_band(band)}, has {_loops(len(band))}"

    def misfit_line(self, nest: affine.ForOp, why: str) -> str:
        return f"nest '{_tag(nest)}': {_sizes(len(self.sizes))}, but {why}"

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Tiling | str:
        """(band, applied sizes, remarks); why not, to skip the nest; raises for a nest
        that cannot be tiled."""
        sizes = tuple(self.sizes)
        tag = _tag(nest)
        band = band_at(nest, self.depth)
        if misfit is not None:
            if self.op is not None:
                raise LoomError(f"{self.name}: option 'sizes' gives {_sizes(len(sizes))}, but nest '{tag}': {misfit}",
                                nest)
            return f"nest '{tag}' skipped: {_sizes(len(sizes))}, but {misfit}"
        tiled = band[: len(sizes)]
        carrying = next((loop for loop in tiled if loop.inits), None)
        if carrying is not None:
            raise LoomError(f"{self.name}: cannot tile {describe_band(tiled)} of nest '{tag}': loop "
                            f"%{iv_name(carrying)} carries values (iter_args): tile before loom-hoist", nest)
        for inner, outer_loop in bound_dependences(band):
            if inner < len(sizes):
                raise LoomError(
                    f"{self.name}: cannot tile {describe_band(tiled)} of nest '{tag}': the bounds of loop "
                    f"%{iv_name(band[inner])} use %{iv_name(band[outer_loop])} (the band is not rectangular)",
                    nest,
                )
        loops = range(self.depth, self.depth + len(sizes))
        deps = band_dependences(perfect_band(nest))
        if not is_fully_permutable(deps, loops):
            broken = next(d for d in deps if not is_fully_permutable([d], loops))
            raise LoomError(
                f"{self.name}: cannot tile {describe_band(tiled)} of nest '{tag}': the loops are not "
                f"fully permutable, dependence {broken.describe()}",
                nest,
            )
        applied, notes = [], []
        for loop, size in zip(tiled, sizes):
            trips = constant_trip_count(loop)
            if trips is not None and size > max(trips, 1):
                notes.append(f"size {size} for loop %{iv_name(loop)} clamped to its trip count {trips}")
                size = max(trips, 1)
            applied.append(size)
        notes.append(
            f"nest '{tag}': tiled {describe_band(tiled)} at depth {self.depth}, "
            f"sizes requested {list(sizes)}, applied {applied}"
        )
        return band, applied, notes

    def rewrite(self, nest: affine.ForOp, plan: _Tiling) -> None:
        band, applied, notes = plan
        for note in notes:
            remark(self.name, nest, note)
        tile_band(band, applied)


def _tag(nest: affine.ForOp) -> str:
    return nest_tag(nest) or "untagged"


def _loops(n: int) -> str:
    return f"{n} loop{'s' * (n != 1)}"


def _sizes(n: int) -> str:
    return f"{n} size{'s' * (n != 1)}"

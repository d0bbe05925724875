"""loom-parallelize{op=... depth=... num-threads=0 min-work=0}: run loops whose iterations
are independent on several threads.

A loop whose iterations touch no element another iteration writes
(`parallel_analysis.carried_dependence`) becomes an `affine.parallel`; loom-lower-affine
makes it an `scf.parallel`, and loom-lower-parallel runs its iterations on libgomp's
threads, each thread a contiguous slice of them. For a matmul after loom-default's
tiling and packing, the copy loop of each packed panel and the loop over the register
tiles of a block (BLIS's i_r) are parallel; the loops over the tiles (j_t, k_t, i_t) are
not, as each of their iterations packs into one shared buffer:

```mlir
affine.for %i_t2 = %i_t to %i_t + 252 step 14 {     "affine.parallel"(%i_t, %i_t) <{
  ...  C[%i_t2 + r, %j] for r < 14           ->        ..., steps = [14 : i64]}> ({
}                                                    ^bb0(%i_t2: index): ...
                                                     }) {loom.num_threads = 0 : i64}
```

Without `depth`, every nest is walked from its outermost loop down, and on each path the
first loop that is parallel and worth it is taken (a loop that is not is looked into);
with `depth=d`, the loops d levels below the nest's outermost loop are taken. A loop runs
in parallel only with at least 2 iterations, and at least `min-work` operations (the
body's ops times the trip counts around them: fork and join cost microseconds, a small
loop is faster on one thread; loom-default sets it). When the loop's iterations split
unevenly over the threads (the busiest more than 5% above the average) and its body is
one loop that is parallel too, whose bounds do not depend on it, the two are collapsed
into one 2-D parallel iteration space (conv2d's batch x output channels; 9 register
tiles of rows x 24 of columns rather than 9 rows on 2 threads).

`num-threads` is recorded on the op (`loom.num_threads`; 0: what libgomp decides,
`OMP_NUM_THREADS` or the cores) for loom-lower-parallel. Results do not depend on the
number of threads: only loops whose iterations are independent run in parallel, so each
element is computed by one thread, in the order it was.

Refused, with a remark naming the dependence (a LoomError with `op=` and `depth=`, when no
loop at that depth is parallel): a loop two of whose iterations may touch one element,
one writing it; a loop with iter_args; a loop whose body allocates (each thread would
have to report the failure). A module with no nest is left alone with a remark.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    ModuleOp,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.support.target import host
from passes.analysis.loop_utils import (
    constant_trip_count,
    enclosing_loops,
    iv_name,
    max_trip_count,
    nest_tag,
    perfect_band,
    select_nests,
)
from passes.analysis.parallel_analysis import NUM_THREADS, carried_dependence

#: collapse a parallel loop with the one inside it while its iterations split over the
#: threads leave the busiest thread this much more work than the average
MAX_IMBALANCE = 0.05
#: a loop whose trip count (hence work) is unknown is not run in parallel inside loops that
#: would start its threads this many times or more
MAX_FORKS = 256


@dataclass(frozen=True)
class LoomParallelizePass(ModulePass):
    name = "loom-parallelize"

    op: str | None = None
    depth: int = -1
    num_threads: int = 0
    min_work: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.depth < -1:
            raise LoomError(f"{self.name}: option 'depth' must be -1 (the outermost parallel loop) or at least 0, "
                            f"got {self.depth}")
        if self.num_threads < 0 or self.min_work < 0:
            which = "num-threads" if self.num_threads < 0 else "min-work"
            raise LoomError(f"{self.name}: option '{which}' must be at least 0, got "
                            f"{self.num_threads if self.num_threads < 0 else self.min_work}")
        for nest in select_nests(op, self.op, self.name):
            tag = nest_tag(nest) or "untagged"
            if self.depth < 0:
                chosen = self._outermost(nest, tag)
            else:
                chosen = self._at_depth(nest, tag)
            for loop in chosen:
                self._parallelize(loop, tag)

    def _outermost(self, nest: affine.ForOp, tag: str) -> list[affine.ForOp]:
        """On each path down from `nest`, the first loop that is parallel and worth it."""
        chosen: list[affine.ForOp] = []
        notes: list[str] = []
        stack = [nest]
        while stack:
            loop = stack.pop()
            why = self._why_not(loop)
            if why is None:
                chosen.append(loop)
                continue
            notes.append(f"%{iv_name(loop)}: {why}")
            stack.extend(reversed(_child_loops(loop)))
        if not chosen:
            remark(self.name, nest, f"nest '{tag}' left serial: " + "; ".join(notes), missed=True)
        return chosen

    def _at_depth(self, nest: affine.ForOp, tag: str) -> list[affine.ForOp]:
        level = [nest]
        for _ in range(self.depth):
            level = [child for loop in level for child in _child_loops(loop)]
        if not level:
            message = f"nest '{tag}' has no loop at depth {self.depth}"
            if self.op is not None:
                raise LoomError(f"{self.name}: {message}", nest)
            remark(self.name, nest, message, missed=True)
            return []
        chosen, notes = [], []
        for loop in level:
            why = self._why_not(loop)
            if why is None:
                chosen.append(loop)
            else:
                notes.append(f"loop %{iv_name(loop)} at depth {self.depth} is not parallel: {why}")
        if not chosen and self.op is not None:
            raise LoomError(f"{self.name}: " + "; ".join(notes), nest)
        for note in notes:
            remark(self.name, nest, note, missed=True)
        return chosen

    def _why_not(self, loop: affine.ForOp) -> str | None:
        """Why `loop` is not run in parallel: a dependence, too few iterations or too
        little work; None when it is."""
        trips = max_trip_count(loop)
        if trips is not None and trips < 2:
            return f"{trips} iteration{'s' * (trips != 1)}"
        carried = carried_dependence(loop)
        if carried is not None:
            return carried
        work = estimated_work(loop)
        if work < self.min_work:
            return f"about {work:,} operations, fewer than min-work={self.min_work:,} (fork and join would cost more)"
        if trips is None and self.min_work:
            # its work is a guess (an unknown trip count counts as large): inside loops
            # that run it many times, each run a fork and join, the guess is not good enough
            forks = 1
            for outer in enclosing_loops(loop):
                forks *= max_trip_count(outer) or MAX_FORKS
            if forks >= MAX_FORKS:
                return (f"its trip count is known only at run time, and the loops around it would start "
                        f"and join the threads {'at least ' * (forks == MAX_FORKS)}{forks:,} times")
        return None

    def _parallelize(self, loop: affine.ForOp, tag: str) -> None:
        band = [loop]
        threads = self.num_threads or host().threads
        while (trips := _product(band)) is not None and imbalance(trips, threads) > MAX_IMBALANCE:
            inner = _only_child_loop(band[-1])
            if inner is None or any(_uses_ivs(inner, band)) or self._why_not(inner) is not None:
                break
            band.append(inner)
        names = ", ".join(f"%{iv_name(b)}" for b in band)
        trips = _product(band)
        count = f"{trips} iterations" if trips is not None else "a trip count known at run time"
        remark(self.name, loop, f"nest '{tag}': loop{'s' * (len(band) > 1)} {names} run in parallel "
                                f"({count}{', collapsed' if len(band) > 1 else ''}, "
                                f"{self.num_threads or 'the runtime default number of'} threads)")
        to_parallel(band, self.num_threads)


def imbalance(trips: int, threads: int) -> float:
    """How much longer the busiest of `threads` threads runs than the average, for
    `trips` equal iterations split as evenly as they go (9 on 2: 5 and 4, 11%)."""
    return -(-trips // threads) * threads / trips - 1 if trips else 0.0


def _child_loops(loop: affine.ForOp) -> list[affine.ForOp]:
    """The affine.for loops directly inside `loop` (through affine.if regions too)."""
    found = []
    for op in loop.body.walk():
        if isinstance(op, affine.ForOp) and op is not loop:
            parent = op.parent_op()
            while parent is not None and not isinstance(parent, affine.ForOp):
                parent = parent.parent_op()
            if parent is loop:
                found.append(op)
    return found


def _only_child_loop(loop: affine.ForOp) -> affine.ForOp | None:
    """The loop perfectly nested in `loop`, if there is one."""
    band = perfect_band(loop)
    return band[1] if len(band) > 1 else None


def _uses_ivs(loop: affine.ForOp, band: list[affine.ForOp]) -> list[bool]:
    ivs = {b.body.block.args[0] for b in band}
    return [v in ivs for v in (*loop.lowerBoundOperands, *loop.upperBoundOperands)]


def _product(band: list[affine.ForOp]) -> int | None:
    total = 1
    for loop in band:
        trips = constant_trip_count(loop)
        if trips is None:
            return None
        total *= trips
    return total


def estimated_work(loop: affine.ForOp) -> int:
    """The ops `loop` runs: each op inside once per iteration of the loops around it up to
    `loop` (an unknown trip count counts as large): the ops of each block times the runs
    of the block, from `loop` down."""
    unknown = 1 << 20

    def runs(inner: affine.ForOp) -> int:
        trips = max_trip_count(inner)
        return trips if trips is not None else unknown

    total = 0
    stack = [(loop, runs(loop))]
    while stack:
        op, times = stack.pop()
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    if isinstance(child, affine.ForOp):
                        stack.append((child, times * runs(child)))
                    elif not isinstance(child, affine.YieldOp):
                        total += times
                        if child.regions:
                            stack.append((child, times))
    return total


def to_parallel(band: list[affine.ForOp], num_threads: int) -> affine.ParallelOp:
    """Replace the perfectly nested loops `band` (no bound of one uses another's iv) by one
    affine.parallel over their iteration space, with their body."""
    outer, inner = band[0], band[-1]
    lower, lower_operands = _joined([(b.lowerBoundMap.data, list(b.lowerBoundOperands)) for b in band])
    upper, upper_operands = _joined([(b.upperBoundMap.data, list(b.upperBoundOperands)) for b in band])

    def groups(maps: list[AffineMap]) -> DenseIntOrFPElementsAttr:
        sizes = [len(m.results) for m in maps]
        return DenseIntOrFPElementsAttr.from_list(VectorType(i32, [len(sizes)]), sizes)

    block = Block(arg_types=[b.body.block.args[0].type for b in band])
    for arg, loop in zip(block.args, band):
        arg.name_hint = loop.body.block.args[0].name_hint
        loop.body.block.args[0].replace_all_uses_with(arg)
    for op in list(inner.body.block.ops):
        op.detach()
        block.add_op(op if not isinstance(op, affine.YieldOp) else affine.YieldOp.get())
    par = affine.ParallelOp(
        operands=[[*lower_operands, *upper_operands]],
        result_types=[[]],
        properties={
            "reductions": ArrayAttr([]),
            "lowerBoundsMap": lower,
            "lowerBoundsGroups": groups([b.lowerBoundMap.data for b in band]),
            "upperBoundsMap": upper,
            "upperBoundsGroups": groups([b.upperBoundMap.data for b in band]),
            "steps": ArrayAttr([IntegerAttr(b.step.value.data, i64) for b in band]),
        },
        regions=[Region(block)],
    )
    par.attributes.update(outer.attributes)
    par.attributes[NUM_THREADS] = IntegerAttr(num_threads, i64)
    par.location = outer.location
    parent = outer.parent_block()
    assert parent is not None
    parent.insert_op_before(par, outer)
    outer.detach()
    outer.erase()
    return par


def _joined(maps: list[tuple[AffineMap, list[SSAValue]]]) -> tuple[AffineMapAttr, list[SSAValue]]:
    """One map whose results are those of `maps`, over all their operands as dims."""
    results, operands = [], []
    for m, ops in maps:
        offset = len(operands)
        dims = [AffineExpr.dimension(offset + d) for d in range(m.num_dims)]
        symbols = [AffineExpr.dimension(offset + m.num_dims + s) for s in range(m.num_symbols)]
        results += [e.replace_dims_and_symbols(dims, symbols) for e in m.results]
        operands += ops
    return AffineMapAttr(AffineMap(len(operands), 0, tuple(results))), operands

"""loom-default{skip=... num-threads=0}: the schedule Loom picks for the host, nest by nest.

For each matmul nest (2-D or batched) it asks the cost model (passes/analysis/cost_model.py) for a
register tile, cache tiles and whether to pack, for the nest's own M, N, K and the host's
caches and vectors (passes/support/target.py), then runs Loom's schedule passes on that nest
alone, in this order (the steps `skip=` names):

    peel        loom-peel{sizes=MR,NR}: the main nest gets extents that are multiples of
                the register tile; the rest runs in copies of the nest
    tile        loom-tile{sizes=MC,NC,KC}, loom-tile{sizes=MR,NR depth=3} and
                loom-interchange to (j_t, k_t, i_t, i_r, j_r, k, i, j): BLIS's loop
                order with the register tiles row by row, so that A's sliver stays in
                L1 while B's panels stream past it (cost_model.py says why)
    pack        loom-pack of B (KC x NC, panels of NR) at k_t and of A (MC x KC, panels
                of MR) at i_t
    vectorize   loom-vectorize: the NR columns become NR/w vectors; the panel copy of a
                transposed B (x @ w.T) by loom-transpose-copy: w x w tiles transposed in
                registers
    unroll-jam  loom-unroll-jam: i by MR, the vectors of j by NR/w: the MR x NR block
    hoist       loom-hoist: C's block in vector registers across k (iter_args)
    prefetch    loom-prefetch: the next register tile's block of C is prefetched while
                this one runs (its rows are a matrix row apart: no hardware stream
                brings them: +5% at 2048^3, nothing at 1024^3, where C stays in L3)
    fuse-pack   the panel order, where the rows fit one block (cost_model.py): the
                tiles are (i_t, k_t, j_t, j_r, i_r, k, i, j), j_t a block of NC columns
                per thread, B packed at j_r (a slot per j_t on several threads) and A at
                k_t, then loom-fuse-pack has the first row tile copy each B panel as it
                computes and the others prefetch the next panel's source; the parallel
                step runs j_t on the threads (skipped: the order above)
    fuse        loom-fuse-epilogue, after the matmuls are scheduled: the elementwise
                nests after a matmul or conv2d (add, mul, relu) computed on its register
                block where it stores C for the last time, C no longer written; the
                epilogue nests it leaves are vectorized after it
    parallel    loom-parallelize, last, on every nest, with `num-threads` threads (0:
                the target's, `OMP_NUM_THREADS` or the cores): in a matmul the copy
                loops of the packed panels and the loop over the register tiles of a
                block (collapsed with the one over its columns when the rows split
                unevenly); in the zero fill and the epilogues their outer loop; a loop
                with less work than `cost_model.MIN_PARALLEL_WORK` ops stays serial

Each peeled copy is planned for its own extents: a copy with fewer rows than MR (a
4-row copy, or a whole matrix-vector product) gets the (k, i, j) row-streaming plan,
its columns peeled to NR first; a copy of fewer columns than NR gets a tile as wide as
it is (6x15: a full and a masked vector per row, kept in registers by loom-hoist).
A matmul with fewer rows than MR whose B is a transposed view (adjacent along k: `x @
w.T`) is not peeled: it gets dot products of rows of A and rows of B's buffer, read in
place (`LoomDefaultPass._dot`). Nests of other ops (elementwise epilogues, the zero fill
of C) are vectorized. A conv2d nest is first rewritten into a matmul, by the strategy
`cost_model.choose_conv2d` estimates faster (its remark gives both estimates):

    direct      loom-direct-conv: X staged with its zero border, then an implicit
                matmul that reads the windows in place (no patch matrix); its matmul
                schedule packs only the filter (the plan's `in_place` operand)
    im2col      loom-im2col: X's windows copied into a patch matrix (from X staged
                with its zero border and its columns by phase, when the conv pads or
                strides; no copy for a 1x1 stride-1 conv), then a matmul of W by it

either matmul then gets the matmul schedule above; the copies are vectorized.
`skip=direct` or `skip=im2col` leaves the other; both leave the conv2d nest as it is.
A grouped conv2d (depthwise included, `groups`) is no matmul:

    grouped     loom-grouped-conv: tiles of outputs along ow by a vector of output
                channels; then loom-vectorize{width} of the channels, loom-unroll of the
                tile, and loom-hoist keeps the tile of Y in registers across the window
`--remarks` prints, per matmul, the plan
with the estimated traffic per memory level and the equivalent pass list, which
`loom-opt -p` and `compile(pipeline=...)` accept, to take as a starting point.

`skip=pack,hoist` drops steps (`loom-bench --ablation` measures each one); skipping
`tile` skips `pack` too (there are no tiles to pack). Steps are checked against STEPS.

When the module still holds loom ops, they are first bufferized and lowered to affine
loops, so that `loom-opt -p loom-default` shows the scheduled loops.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import arith_ext
from dialects.layout import contiguous, dimension_last, static_strides
from dialects.x86vector import INSTRUCTIONS, Instruction
from passes.analysis.affine_forms import LinearForm
from passes.analysis.cost_model import (
    MIN_PARALLEL_WORK,
    MV_K_JAM,
    WINDOW_RUN_JAM,
    MatmulPlan,
    choose_conv2d,
    plan_matmul,
)
from passes.analysis.grouped_reads import NotGrouped, contiguous_group, grouped_read
from passes.analysis.loop_utils import (
    TAG,
    constant_trip_count,
    iv_name,
    loops_of_nest,
    nest_tag,
    outermost_nests,
    perfect_band,
    select_nests,
    tagged_nests,
    unlowered_loom_op,
)
from passes.conversion.convert_loom_to_affine import build_nest, copy_nest
from passes.conversion.convert_loom_to_affine import load as load_at
from passes.conversion.convert_loom_to_affine import store as store_at
from passes.pipelines import TO_AFFINE, LoomPipeline, build, pass_list_text
from passes.schedule import loom_direct_conv, loom_grouped_conv, loom_im2col
from passes.schedule.loom_compensate import LoomCompensatePass
from passes.schedule.loom_dot import LoomDotPass
from passes.schedule.loom_fuse_epilogue import EPILOGUES, LoomFuseEpiloguePass
from passes.schedule.loom_fuse_pack import LoomFusePackPass
from passes.schedule.loom_hoist import LoomHoistPass
from passes.schedule.loom_interchange import LoomInterchangePass
from passes.schedule.loom_pack import LoomPackPass
from passes.schedule.loom_parallelize import LoomParallelizePass
from passes.schedule.loom_peel import LoomPeelPass
from passes.schedule.loom_prefetch import LoomPrefetchPass
from passes.schedule.loom_tile import LoomTilePass
from passes.schedule.loom_transpose_copy import LoomTransposeCopyPass
from passes.schedule.loom_unroll import LoomUnrollPass
from passes.schedule.loom_unroll_jam import LoomUnrollJamPass
from passes.schedule.loom_vectorize import LoomVectorizePass
from passes.schedule.loop_transforms import retarget_load
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark, scope
from passes.support.target import Target, host, openmp_runtime

#: the steps of a matmul's schedule (`loom-bench --ablation` drops each in turn)
MATMUL_STEPS = ("peel", "tile", "pack", "vectorize", "unroll-jam", "hoist", "prefetch", "fuse-pack", "parallel")
#: the steps `skip=` accepts: a conv2d's strategy, the epilogue's fusion, then the matmul's
STEPS = ("direct", "im2col", "grouped", "fuse", *MATMUL_STEPS)


@dataclass(frozen=True)
class LoomDefaultPass(ModulePass):
    name = "loom-default"

    skip: tuple[str, ...] = ()
    num_threads: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        skip = set(self.skip)
        unknown = sorted(skip - set(STEPS))
        if unknown:
            raise LoomError(f"{self.name}: unknown step{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                            f"in option 'skip' (steps: {', '.join(STEPS)})")
        if "tile" in skip:
            skip.add("pack")
        if self.num_threads < 0:
            raise LoomError(f"{self.name}: option 'num-threads' must be at least 0 (0: the target's), "
                            f"got {self.num_threads}")
        if unlowered_loom_op(op) is not None:
            build(",".join(TO_AFFINE)).apply(ctx, op)
        target = host()
        for nest in tagged_nests(op, "conv2d"):
            if _empty_loop(nest) is None:  # else left as it is, with the remark below
                self._conv2d(ctx, nest, target, skip)
        epilogues: list[tuple[NestName, affine.ForOp]] = []
        for index, nest in enumerate(select_nests(op, None, self.name)):
            tag = nest_tag(nest)
            empty = _empty_loop(nest)
            if empty is not None:
                loop = f"loop %{iv_name(empty)}" if empty.body.block.args[0].name_hint else "one of its loops"
                remark(self.name, nest, f"nest '{tag or 'untagged'}' left as it is: {loop} has no iterations "
                       "(a zero-size dimension), so the nest runs nothing", missed=True)
                continue
            if tag == "matmul":
                self._matmul(ctx, nest, index, skip, target)
            elif tag == loom_grouped_conv.TAG and "vectorize" not in skip:
                _grouped_conv(ctx, nest, NestName(tag, index), skip)
            elif tag in EPILOGUES and "fuse" not in skip:
                epilogues.append((NestName(tag, index), nest))  # vectorized below, unless fused
            elif tag == "copy" and "tile" not in skip and _transposed_source(nest):
                _tile_copy(ctx, self.name, nest, "vectorize" not in skip)  # (loom-vectorize would refuse it)
            elif tag not in ("conv2d", None) and "vectorize" not in skip:
                _run_on(ctx, nest, NestName(tag, index), [LoomVectorizePass(op=tag)])
        if "fuse" not in skip:
            LoomFuseEpiloguePass().apply(ctx, op)
            for name, nest in epilogues:
                if nest.parent is not None and "vectorize" not in skip:
                    _run_on(ctx, nest, name, [LoomVectorizePass(op=name.tag)])
        if "parallel" not in skip:
            self._parallelize(ctx, op, target)

    def _conv2d(self, ctx: Context, nest: affine.ForOp, target: Target, skip: set[str]) -> None:
        """A conv2d nest becomes a direct convolution (loom-direct-conv) or a patch-matrix
        copy and a matmul (loom-im2col), as `cost_model.choose_conv2d` estimates (or as
        `skip=` leaves); the loop over the nests then schedules the matmul like any other."""
        grouped = loom_grouped_conv.match(nest)
        if isinstance(grouped, loom_im2col.Conv2DNest):
            if "grouped" in skip:
                remark(self.name, nest, "grouped conv2d nest left as it is (skip=grouped)", missed=True)
            else:
                remark(self.name, nest, loom_grouped_conv.rewrite(grouped, target), rewrite="grouped")
            return
        if {"direct", "im2col"} <= skip:
            return
        conv = loom_im2col.match_conv2d(nest, any_filter_layout=True, panels=True)
        if not isinstance(conv, str) and not contiguous(conv.w.type):
            _contiguous_filter(ctx, self.name, nest, conv.w, "vectorize" not in skip)
            conv = loom_im2col.match_conv2d(nest, panels=True)
        if not isinstance(conv, str) and conv.panel and "direct" in skip:
            conv = "its filter is in panels, which only a direct convolution reads (skip=direct)"
        if isinstance(conv, str):
            remark(self.name, nest, f"conv2d nest left as it is: {conv}", missed=True)
            return
        patch = conv.n * conv.c * conv.r * conv.s * conv.ho * conv.wo if conv.copies else 0
        element = str(conv.x.type.get_element_type())
        in_groups, group = _windows_in_groups(conv, nest, target, skip)
        channels = loom_direct_conv.padded_channels(conv, group)
        choice = choose_conv2d(conv.f, patch, loom_direct_conv.Geometry.of(conv).wasted(conv), conv.layout,
                               conv.strides != (1, 1), direct="direct" not in skip,
                               im2col="im2col" not in skip and not conv.panel,
                               low_precision=element if element in ("bf16", "i8", "ui8") else "",
                               dot_in_place=in_groups, padded=(channels, conv.c) if channels else None)
        element = conv.y.type.get_element_type().bitwidth // 8
        direct = choice.strategy == "direct"
        strategy = loom_direct_conv if direct else loom_im2col
        in_place = ("A" if conv.layout == "nhwc" else "B") if direct else ""
        plan = plan_matmul(*strategy.matmul_shape(replace(conv, c=channels) if direct and channels else conv),
                           target, element, in_place)
        remark(self.name, nest, f"conv2d {conv.describe()} on {target.describe()}: {choice.strategy}: {choice.why}; "
               f"estimated traffic of its matmul: "
               f"{', '.join(f'{lv} {el / 1e6:.3g}M' for lv, el in plan.traffic().items())}", choice=choice)
        rewritten = loom_direct_conv.rewrite(conv, group) if direct else loom_im2col.rewrite(conv)
        remark(self.name, nest, rewritten, rewrite=choice.strategy)

    def _parallelize(self, ctx: Context, op: ModuleOp, target: Target) -> None:
        """Every nest's parallel loops worth it on `num-threads` threads (loom-parallelize)."""
        threads = self._threads(set(), target)
        if threads > 1 and outermost_nests(op):
            LoomParallelizePass(num_threads=threads, min_work=MIN_PARALLEL_WORK).apply(ctx, op)
        elif threads == 1:
            why = ("libgomp (GCC's OpenMP runtime, Debian's libgomp1) is not installed"
                   if openmp_runtime() is None else "one thread")
            remark(self.name, None, f"{why}: every loop stays serial", threads=1, missed=True)

    def _threads(self, skip: set[str], target: Target) -> int:
        """The threads the parallel step will use (1: it will not run: skipped, one thread
        asked for, or no libgomp)."""
        if "parallel" in skip or openmp_runtime() is None:
            return 1
        return self.num_threads or target.threads

    def _column_blocks(self, plan: MatmulPlan, skip: set[str], target: Target) -> int:
        """For a plan without row tiles (a matrix-vector product, a few rows), the width of
        the column blocks that give each thread its share, whole vectors; 0 when the
        product stays on one thread (too little work, too few columns, or columns that do
        not split into equal blocks of whole vectors)."""
        threads = self._threads(skip, target)
        work = plan.m * plan.n * plan.k // plan.lanes  # vector fmas
        if plan.rows_tiled or threads == 1 or work < MIN_PARALLEL_WORK or plan.n < 2 * plan.nr:
            return 0
        # equal blocks, whole vectors: a block of another width would have a trip count
        # known only at run time, and its vector remainder would keep k from being jammed
        share = plan.n // threads
        return share if plan.n % threads == 0 and share % plan.lanes == 0 else 0

    def _matmul(self, ctx: Context, nest: affine.ForOp, index: int, skip: set[str], target: Target) -> None:
        """Peel the nest (the `index`-th loom-default took) for the register tile, then plan
        and schedule the main nest and each peeled copy for its own extents (a 1-row copy
        gets the matrix-vector plan)."""
        shape = _matmul_shape(nest)
        if shape is None:
            remark(self.name, nest, "matmul nest left as it is: not the textbook (b,) i, j, k nest "
                   "with constant bounds (already scheduled?)", missed=True)
            return
        batch = shape[0]
        element = _element_bytes(nest)

        in_place = loom_direct_conv.windows_operand(nest)

        panels, workers = not {"tile", "pack", "fuse-pack"} & skip, self._threads(skip, target)
        batches = constant_trip_count(perfect_band(nest)[0]) if batch == 1 else None
        # products enough for each thread to run whole ones (`batch_blocks`), each planned as on one thread
        block = -(-batches // workers) if batches is not None else 0
        split = (block > 0 and workers > 1 and not {"tile", "pack", "parallel"} & skip
                 and block * workers <= batches * (1 + BATCH_IMBALANCE))
        threads = 1 if split else workers
        instruction = _instruction(nest, target)
        grouped = isinstance(instruction, Instruction)
        a_rows = _a_rows_contiguous(nest)
        # on a dot-product instruction, A's rows may be read in place where the broadcast
        # can read each group of k where it lies (`_a_groups_in_place`)
        a_groups = grouped and a_rows and _a_groups_in_place(nest, instruction)
        # an NHWC direct convolution batched over the panels of its filter (loom.conv2d's
        # filter in panels): each product's B a panel, packed ahead of time
        b_panel = in_place == "A" and batch > 0
        windows_bytes = math.prod(_operand(nest, 0).type.get_shape()) * element if in_place == "A" else 0

        def plan_of(sub: affine.ForOp, packed: int | None = None, pack_a: bool = grouped and not a_groups) -> MatmulPlan:
            """The plan of a nest of the matmul; for a dot-product instruction, its tile, and
            `pack_a`: A packed in the instruction's groups wherever its rows, read in place
            (A_IN_PLACE), would not hold them as the instruction reads them."""
            found = _matmul_shape(sub)
            assert found is not None
            return plan_matmul(*found[1], target, element, in_place, panels=panels, threads=threads,
                               a_rows=a_rows and not pack_a, packed_bytes=packed,
                               dot=instruction.name if grouped else "", b_panel=b_panel,
                               windows_bytes=windows_bytes)

        def dot(sub: affine.ForOp, plan: MatmulPlan) -> bool:
            """B a transposed view (not made contiguous for another nest of the matmul):
            a nest with fewer rows than MR (the whole matmul, or a copy peeled off its
            last rows) gets dot products of rows of A and of B's buffer."""
            return (not in_place and not {"vectorize", "tile"} & skip and not plan.rows_tiled
                    and _transposed_b(sub) is not None)

        whole = plan_of(nest)
        if dot(nest, whole):
            self._dot(ctx, nest, NestName("matmul", index), _operand(nest, 1), batch, whole, skip, target)
            return
        nests = [nest]
        if "peel" not in skip:
            # the register tile's rows and columns; then, in a copy with fewer rows than MR,
            # the columns (so that no masked remainder sits beside the j loop that k is
            # jammed around)
            plan = plan_of(nest)
            rows = plan.mr if plan.rows_tiled else 1
            peel = LoomPeelPass(sizes=(*[1] * batch, rows, plan.nr), op="matmul")
            nests = []
            for sub in _run_on(ctx, nest, NestName("matmul", index), [peel]):
                plan = plan_of(sub)
                # (a dot-product plan's tile is whole vectors: a narrow copy's last columns
                # are peeled off too)
                if (plan.rows_tiled and not grouped) or plan.n % plan.nr == 0:
                    nests.append(sub)
                    continue
                columns = LoomPeelPass(sizes=(*[1] * (batch + 1), plan.nr), op="matmul")
                nests += _run_on(ctx, sub, NestName("matmul", index), [columns])
        if not in_place:
            _contiguous_b(ctx, self.name, nests, sum(_reads_b_in_place(plan_of(sub), skip) and not dot(sub, plan_of(sub))
                                                     for sub in nests), "vectorize" not in skip)
        for part, sub in enumerate(nests):
            plan = plan_of(sub)
            name = NestName("matmul", index, part, len(nests))
            if dot(sub, plan):
                self._dot(ctx, sub, name, _operand(sub, 1), batch, plan, skip, target)
                continue
            columns = self._column_blocks(plan, skip, target)
            transposed = _transposed_b(sub) is not None
            on = dot_products(sub, target, plan, skip)
            if not isinstance(on, DotProducts) and _b_in_groups(sub, 0):
                _ungrouped_b(self.name, sub, on)
            if isinstance(on, DotProducts):  # blocks of A's packed elements (where the plan keeps the dot path)
                packed = plan_of(sub, on.packed_bytes)
                plan = packed if isinstance(dot_products(sub, target, packed, skip), DotProducts) else plan
                plan = replace(plan, b_copy="before" if on.compensated else "ahead")
            elif grouped:  # widened after all (a copy peeled off the last columns): A need not be packed
                plan = plan_of(sub, pack_a=False)
            elif in_place == "A" and plan.rows_tiled and "unroll-jam" not in skip:
                run = loom_direct_conv.window_run(sub)
                if 1 < run <= WINDOW_RUN_JAM and plan.kc % run == 0:
                    plan = replace(plan, k_jam=run)
            passes = matmul_schedule(plan, batch, skip, columns, transposed_b=transposed,
                                     dot=on if isinstance(on, DotProducts) else None)
            blocks = ""
            if split and plan.rows_tiled and plan.pack:
                passes = batch_blocks(passes, block)
                blocks = (f"the {batches} products in blocks of {block}, one per thread, each with its own packed "
                          f"panels")
            skipped = tuple(step for step in MATMUL_STEPS if step in skip)
            low = products(sub, plan, on, skip)
            notes = "".join(f"; {note}" for note in [*plan_notes(columns, skipped), *filter(None, [low, blocks])])
            remark(self.name, sub, f"{_matmul_words(plan, part)} on {target.describe()}: {plan.describe()}{notes}; "
                   f"pass list: {pass_list(passes)}", plan=plan, part=part, columns=columns, skipped=skipped,
                   passes=passes)
            _run_on(ctx, sub, name, passes)

    def _dot(self, ctx: Context, nest: affine.ForOp, name: NestName, b: SSAValue, batch: int, plan: MatmulPlan,
             skip: set[str], target: Target) -> None:
        """Fewer rows than MR and B a transposed view (its elements adjacent along k, the
        layout `x @ w.T` gives): each element of C is the dot product of a row of A and a
        row of B's buffer, both contiguous. B is read through the view with its two last
        dimensions swapped (no copy), the nest keeps its (b,) i, j, k order, k becomes a
        vector sum (reduced once per element), and the register tile is DOT_J_JAM columns
        by as many rows as fit beside them (each vector of B's buffer used by every row
        of A, each vector of A by every column). `x @ w.T` at 1x1024x1024, znver4, one
        thread: 0.050 ms, numpy 0.053; B copied into rows, then the row-streaming plan
        (what it got before): 0.63 ms."""
        _swap_last_dimensions(nest, b)
        regs = target.vector_registers
        rows = max(1, min(plan.m, (regs - DOT_J_JAM) // (DOT_J_JAM + 1)))
        passes: list[ModulePass] = []
        if "unroll-jam" not in skip:
            passes.append(LoomUnrollJamPass(factors=(*[1] * batch, rows, DOT_J_JAM, 1), op="matmul"))
        passes.append(LoomVectorizePass(width=plan.lanes, op="matmul"))
        if "hoist" not in skip:
            passes.append(LoomHoistPass(op="matmul"))
        part = name.part or 0
        remark(self.name, nest, f"{_matmul_words(plan, part)} on {target.describe()}: {plan.m} row"
               f"{'s' * (plan.m != 1)} < MR={plan.mr} and B a transposed view ({b.type}, adjacent along k): "
               f"dot products of rows of A and rows of B's buffer, read in place (loop order i, j, k; k in "
               f"{plan.lanes}-lane vector sums; {rows}x{DOT_J_JAM} of them at a time); "
               f"pass list: {pass_list(passes)}", plan=plan, part=part, passes=tuple(passes), dot=(rows, DOT_J_JAM))
        _run_on(ctx, nest, name, passes)


def _matmul_words(plan: MatmulPlan, part: int) -> str:
    """`matmul 60x64x64`, or `matmul 4x64x64 (peeled copy 1 of the nest)`: the nest a plan's
    remark is about."""
    return f"matmul {plan.m}x{plan.n}x{plan.k}" + (f" (peeled copy {part} of the nest)" if part else "")


def plan_notes(columns: int, skipped: Sequence[str]) -> list[str]:
    """What a matmul's remark adds to its plan: the column blocks its threads share
    (`columns`, 0 for none) and the steps `skip=` left out."""
    return [*([f"j split into blocks of {columns} columns, one per thread (loop order j_t, k, i, j)"] if columns else []),
            *([f"steps left out (skip=): {', '.join(skipped)}"] if skipped else [])]


def pass_list(passes: Sequence[ModulePass]) -> str:
    """A matmul's pass list as its remark writes it (which `loom-opt -p` and
    `compile(pipeline=...)` take): loom-tile's depth written even where it is 0, the
    band level each tiling goes at."""
    return pass_list_text(passes, shown=("depth",))


@dataclass(frozen=True)
class NestName:
    """What loom-default calls a nest while passes run on it alone (`_run_on`): the passes
    select it by a temporary tag, and their remarks name it so (`temporary`): the
    `index`-th nest loom-default took is `loom_default_3`, its part `part` of `parts` after
    peeling `loom_default_3_1`, a copy it tiles `loom_default_copy`. Every remark made
    meanwhile carries it (payload `nest`), to say which nest of the module that is."""

    tag: str  # the nest's own tag
    index: int | None = None  # None: a copy loom-default made
    part: int | None = None  # None: the whole nest
    parts: int = 1

    @property
    def temporary(self) -> str:
        if self.index is None:
            return "loom_default_copy"
        return f"loom_default_{self.index}" + (f"_{self.part}" if self.part is not None else "")


#: columns of C computed at once by the dot-product schedule (`LoomDefaultPass._dot`):
#: each vector of A's row feeds that many dot products (1x1024x1024, znver4: 1, 4 and 8
#: alike, memory-bound; 4 leaves room for rows beside them)
DOT_J_JAM = 4


def _transposed_b(nest: affine.ForOp) -> SSAValue | None:
    """B of a textbook matmul nest when it is a strided view whose elements are adjacent
    along k and not along j (a transposed B); else None."""
    b = _operand(nest, 1)
    layout = static_strides(b.type)
    if layout is None or len(layout[0]) < 2:
        return None
    shape, strides = b.type.get_shape(), layout[0]
    if strides[-2] != 1 or strides[-1] == 1 or shape[-2] == 1 or shape[-1] == 1:
        return None
    return b if all(not load.map.data.num_symbols for load in _loads_of(nest, b)) else None


def _swap_last_dimensions(nest: affine.ForOp, b: SSAValue) -> None:
    """Read B in `nest` through a view of its buffer with its two last dimensions swapped
    (B[..., k, j] becomes Bt[..., j, k], a reinterpret_cast before the nest: no copy)."""
    assert isinstance(b.type, MemRefType)
    swap = lambda xs: [*xs[:-2], xs[-1], xs[-2]]  # noqa: E731
    view = dimension_last(b, b.type.get_num_dims() - 2)
    view.result.name_hint = f"{b.name_hint or 'b'}_t"
    parent = nest.parent_block()
    assert parent is not None
    parent.insert_op_before(view, nest)
    for load in _loads_of(nest, b):
        retarget_load(load, view.result, swap(list(load.map.data.results)), list(load.indices))


def _loads_of(nest: affine.ForOp, mem: SSAValue) -> list[affine.LoadOp]:
    return [o for o in nest.walk() if isinstance(o, affine.LoadOp) and o.memref is mem]


def _operand(nest: affine.ForOp, position: int) -> SSAValue:
    """A textbook matmul nest's operand: 0 A, 1 B, 2 C (the order its body loads them)."""
    return [o for o in nest.walk() if isinstance(o, affine.LoadOp)][position].memref


def _row_stride(mem: SSAValue) -> int | None:
    """The stride of a memref's elements along its last dimension (1 for one of extent
    1: its rows are contiguous either way); None where the layout is not known."""
    layout = static_strides(mem.type)
    if layout is None:
        return None
    return 1 if mem.type.get_shape()[-1] == 1 else layout[0][-1]


def _a_rows_contiguous(nest: affine.ForOp) -> bool:
    """Whether the rows of a textbook matmul nest's A are contiguous: unit stride along k,
    so that a schedule may read them in place, a sliver of MR rows at a time
    (`MatmulPlan.pack_a`)."""
    return _row_stride(_operand(nest, 0)) == 1


def _reads_b_in_place(plan: MatmulPlan, skip: set[str]) -> bool:
    """Whether the schedule of `plan` loads vectors of B's rows from B itself, not from
    packed panels (no packing: a small product, fewer rows than MR, `skip=pack`)."""
    packs_b = plan.rows_tiled and plan.pack and not {"tile", "pack"} & skip
    return "vectorize" not in skip and not packs_b


def _contiguous_b(ctx: Context, pass_name: str, nests: list[affine.ForOp], in_place: int, vectorize: bool) -> None:
    """Give a matmul's nests (the main one and its peeled copies) a row-major copy of B
    when B is a strided view whose rows are not contiguous (a transposed B) and `in_place`
    of them read its rows in place (`_reads_b_in_place`): loom-vectorize loads a vector of
    a row only at unit stride, and would leave those nests scalar. The nests that pack B
    then pack the copy too (its panels are copied from contiguous rows)."""
    if not in_place:
        return
    b = _operand(nests[0], 1)
    stride = _row_stride(b)
    if stride is None or stride == 1:
        return
    _contiguous_copy(ctx, pass_name, nests, b, "matmul.contiguous",
                     f"B is a strided view ({b.type}): its rows are not contiguous (stride {stride} along j), "
                     f"and the schedule of {in_place} of the matmul's {len(nests)} nests reads them as vectors in "
                     "place (no packing)", vectorize)


def _contiguous_filter(ctx: Context, pass_name: str, nest: affine.ForOp, w: SSAValue, vectorize: bool) -> None:
    """Give a textbook conv2d nest a row-major copy of its filter `w`, a strided view (a
    transposed filter): both strategies view W as a matrix, and the textbook nest would
    stay unscheduled."""
    _contiguous_copy(ctx, pass_name, [nest], w, "conv2d.contiguous",
                     f"W is a strided view ({w.type}), and both conv2d strategies view it as a matrix", vectorize)


def _contiguous_copy(ctx: Context, pass_name: str, nests: list[affine.ForOp], mem: SSAValue, tag: str,
                     why: str, vectorize: bool) -> None:
    """What `loom.contiguous` does, for a schedule that needs unit strides and gets no
    copy from packing: `mem` copied into a row-major buffer (a nest tagged `tag`, in
    tiles if `mem` is transposed: `_tile_copy`, `vectorize` or not) before the first of `nests`, which read
    the copy instead; freed after the last of them. A remark says why (`why`)."""
    t = mem.type
    assert isinstance(t, MemRefType)
    block = nests[0].parent_block()
    assert block is not None
    order = sorted(nests, key=block.get_operation_index)
    alloc = memref.AllocOp.get(t.get_element_type(), shape=t.get_shape())
    alloc.memref.name_hint = f"{mem.name_hint or 'operand'}_contiguous"
    copy = copy_nest(mem, alloc.memref, tag)
    for op in [alloc, *(inner for outer in copy for inner in outer.walk())]:
        op.location = order[0].location
    block.insert_ops_before([alloc, *copy], order[0])
    block.insert_op_after(memref.DeallocOp.get(alloc.memref), order[-1])
    mem.replace_uses_with_if(alloc.memref, lambda use: any(n.is_ancestor(use.operation) for n in nests))
    remark(pass_name, order[0], f"{why}: copied into a row-major buffer first (nest '{tag}', like "
           f"loom.contiguous: {t} -> {alloc.memref.type})")
    if _transposed_source(copy[-1]):
        _tile_copy(ctx, pass_name, copy[-1], vectorize)


#: the tiles a transposed view is copied in: 8 rows of a tile 4 KiB apart (a power-of-two
#: row) fall in one set of an 8-way L1; 16 evict each other. Copying a transposed 1024x1024
#: f32 matrix: row by row 5.7 ms (numpy's ascontiguousarray 5.7 ms), 16x16 tiles 5.2 ms,
#: 8x8 tiles 1.5 ms; 768x768: 1.1 ms, 0.30 ms, 0.32 ms (medians, one thread, znver4)
COPY_TILE = 8
#: the blocks of tiles a larger transposed view is copied in (a block of 128 rows of
#: tiles, then the next): the pages and lines a block writes stay in the TLB and L2 while
#: its tiles fill them. loom.contiguous of a transposed f32 matrix, ns per element, 8x8
#: tiles alone -> in 128x128 blocks (znver4, one thread): 1024x1024 1.09 -> 0.80, 768x3072
#: 2.10 -> 1.20, 2048x2048 2.21 -> 1.22, 3072x768 1.15 -> 1.34, 768x768 0.52 -> 0.54
#: (numpy's ascontiguousarray: 3.3-3.7, 2.2, 5.6, 2.6-2.7, 1.1); blocks of 64: 1.37, 1.44,
#: 1.60, 1.68, 0.53
COPY_BLOCK = 128


def _transposed_source(copy: affine.ForOp) -> bool:
    """Whether a copy nest (`copy_nest`: row-major order) reads a source whose unit
    stride is along its next-to-last dimension (a transposed matrix, or a batch of them):
    row by row, each element read would be a cache line of its own."""
    load = next((o for o in copy.walk() if isinstance(o, affine.LoadOp)), None)
    t = load.memref.type if load is not None else None
    layout = static_strides(t)
    return layout is not None and len(layout[0]) >= 2 and abs(layout[0][-2]) == 1 and t.get_shape()[-1] > 1


def _tile_copy(ctx: Context, pass_name: str, copy: affine.ForOp, vectorize: bool) -> None:
    """Copy a transposed source in COPY_TILE x COPY_TILE tiles of its last two dimensions,
    so that the lines each tile reads and writes stay in L1 while it uses them; where
    either dimension is longer than COPY_BLOCK, in blocks of COPY_BLOCK x COPY_BLOCK of
    those tiles. `vectorize`: the tiles are loom-transpose-copy's, transposed in registers
    (vectors of COPY_TILE lanes, or as many as the target's hold), and only the edges of
    the matrix, not of every tile, run scalar."""
    band = perfect_band(copy)
    depth, tag = len(band) - 2, nest_tag(copy)
    extents = [constant_trip_count(loop) for loop in band[-2:]]
    blocks = any(e is None or e > COPY_BLOCK for e in extents)
    width = min(COPY_TILE, host().lanes(_element_bytes(copy)))
    # (a dimension shorter than a tile: loom-transpose-copy would leave it scalar, untiled)
    vectorize = vectorize and all(e is None or e >= width for e in extents)
    width = width if vectorize else COPY_TILE
    remark(pass_name, copy, f"nest '{tag}' copies a transposed view: in {width}x{width} tiles, each cache "
           "line it reads or writes used for a whole tile"
           + f", in blocks of {COPY_BLOCK}x{COPY_BLOCK}" * blocks)
    passes: list[ModulePass] = [LoomTilePass(sizes=(COPY_BLOCK, COPY_BLOCK), op=tag, depth=depth)] if blocks else []
    if vectorize:
        passes.append(LoomTransposeCopyPass(width=width, op=tag))
    else:
        passes.append(LoomTilePass(sizes=(COPY_TILE, COPY_TILE), op=tag, depth=depth + 2 * blocks))
    _run_on(ctx, copy, NestName(tag), passes)


def _empty_loop(nest: affine.ForOp) -> affine.ForOp | None:
    """A loop of the nest with a constant trip count of 0 (a zero-size dimension), if any:
    such a nest does nothing, and the cost model has nothing to plan for it."""
    return next((loop for loop in loops_of_nest(nest) if constant_trip_count(loop) == 0), None)


def _element_bytes(nest: affine.ForOp) -> int:
    """Bytes of the element type the nest stores (C's)."""
    stores = [o for o in nest.walk() if isinstance(o, affine.StoreOp)]
    element = stores[-1].value.type if stores else None
    return element.bitwidth // 8 if isinstance(element, AnyFloat) else 4


@dataclass(frozen=True)
class DotProducts:
    """How a low-precision matmul's register tile runs on a dot-product instruction
    (loom-dot): the instruction, and the element types loom-pack stores A's and B's
    groups in (the instruction's: i16 for bytes on vpmaddwd, else the operands' own)."""

    instruction: Instruction
    #: i8 x i8 on vpdpbusd: A packed shifted by +128 to ui8, and 128 x B's column sums
    #: subtracted from C (loom-compensate)
    compensated: bool = False

    @property
    def elements(self) -> tuple[str, str]:
        return self.instruction.a, self.instruction.b

    @property
    def packed_bytes(self) -> int:
        """The bytes of a packed element: an accumulator lane's 4 over the group."""
        return 4 // self.instruction.group


def _sources(nest: affine.ForOp) -> list[str]:
    """The element types the nest's statement widens (A's, then B's): [] for f32/f64."""
    return [str(o.operands[0].type) for o in nest.walk() if isinstance(o, arith_ext.WIDENING)]


def _instruction(nest: affine.ForOp, target: Target) -> Instruction | str:
    """The dot-product instruction for the element types a low-precision matmul nest
    widens, or why there is none ("" for f32/f64)."""
    sources = _sources(nest)
    if len(sources) != 2:
        return ""
    if sources == ["bf16", "bf16"]:
        return INSTRUCTIONS["vdpbf16ps"] if target.bf16_dot else "no AVX512-BF16 on this target"
    if target.int8_dot and sources in (["ui8", "i8"], ["i8", "ui8"]):  # (a conv's weights x its ui8 patches)
        return INSTRUCTIONS["vpdpbusd" if sources[0] == "ui8" else "vpdpbusd.swapped"]
    if target.int8_dot and sources == ["i8", "i8"]:  # A shifted to unsigned (loom-compensate)
        return INSTRUCTIONS["vpdpbusd"]
    return INSTRUCTIONS["vpmaddwd"]


#: the instructions that may read A in place, in groups (its own elements: not vpmaddwd's
#: i16 pairs of widened bytes, nor s8 x s8's A shifted as it is packed)
IN_PLACE_INSTRUCTIONS = ("vdpbf16ps", "vpdpbusd", "vpdpbusd.swapped")


def _windows_in_groups(conv: loom_im2col.Conv2DNest, nest: affine.ForOp, target: Target,
                       skip: set[str]) -> tuple[str, int]:
    """The dot-product instruction that would read a direct convolution's windows in place
    in groups (`dot_products`, `grouped_reads.contiguous_group`), and its group; or ("", 0):
    NHWC, no dilation (a window row's S*C taps are one run, in a plane of their own per
    phase of the strides), and an instruction that reads A's own elements. Where C is not
    whole groups, the planes get zero channels up to whole groups
    (`loom_direct_conv.padded_channels`)."""
    instruction = _instruction(nest, target)
    if (not isinstance(instruction, Instruction) or instruction.key not in IN_PLACE_INSTRUCTIONS
            or _sources(nest) == ["i8", "i8"] or conv.layout != "nhwc" or conv.dilations != (1, 1)
            or {"pack", "vectorize"} & skip):
        return "", 0
    return instruction.name, instruction.group


def _a_groups_in_place(nest: affine.ForOp, instruction: Instruction) -> bool:
    """Whether the dot-product instruction can broadcast each group of A's k from A itself
    (a matmul whose A rows are contiguous along k): one that reads A's own elements
    (`IN_PLACE_INSTRUCTIONS`, not s8 x s8, whose A is shifted to u8 as it is packed), and
    K in whole groups."""
    shape = _matmul_shape(nest)
    return (instruction.key in IN_PLACE_INSTRUCTIONS and _sources(nest) != ["i8", "i8"] and shape is not None
            and shape[1][2] % instruction.group == 0 and _a_in_groups(nest, instruction.group))


def _a_in_groups(nest: affine.ForOp, group: int) -> bool:
    """Whether the textbook matmul nest's A (read in place: a direct convolution's windows,
    a matmul's rows) has each group of `group` k adjacent (`grouped_reads.contiguous_group`)."""
    band = perfect_band(nest)
    loads = [o for o in band[-1].body.block.ops if isinstance(o, affine.LoadOp)]
    if not loads:
        return False
    try:
        contiguous_group(loads[0], band[-1].body.block.args[0], group, LinearForm())
    except NotGrouped:
        return False
    return True


def _b_in_groups(nest: affine.ForOp, group: int) -> bool:
    """Whether the textbook matmul nest reads B in groups of `group` (0: of any size) along
    k already (a panel of a filter in panels of groups, `grouped_reads.grouped_read`)."""
    loads = _loads_of(nest, _operand(nest, 1))
    if not loads:
        return False
    try:
        g = grouped_read(loads[0])[1]
    except NotGrouped:
        return False
    return not group or g == group


def _ungrouped_b(pass_name: str, nest: affine.ForOp, why: str) -> None:
    """Give a textbook matmul nest whose B is read in groups in place (`_b_in_groups`: the
    panels of a filter in groups, b, k floordiv G, j*G + k mod G) but that will not run on
    the dot-product instruction (the target lacks it, or the plan cannot use it: `why`) a
    copy of B with its groups undone, P x K x NR, read at [b, k, j] as the panels of a
    filter of rank 5 are: the widened schedule then reads B's rows as vectors, where
    the groups would leave it scalar (stride G along j)."""
    b = _operand(nest, 1)
    load = _loads_of(nest, b)[0]
    g = grouped_read(load)[1]
    p, kg, nrg = b.type.get_shape()
    alloc = memref.AllocOp.get(b.type.get_element_type(), 64, [p, kg * g, nrg // g])
    alloc.memref.name_hint = "w_ungrouped"
    d = [AffineExpr.dimension(i) for i in range(3)]

    def body(ivs: list[SSAValue]) -> list[Operation]:
        element = load_at(b, ivs, [d[0], d[1] // g, d[2] * g + d[1] % g])
        return [element, store_at(element.result, alloc.memref, ivs, d)]

    copy = build_nest([p, kg * g, nrg // g], "matmul.ungrouped", body, ["b", "k", "j"])
    block = nest.parent_block()
    assert block is not None
    for op in [alloc, *(inner for outer in copy for inner in outer.walk())]:
        op.location = nest.location
    block.insert_ops_before([alloc, *copy], nest)
    block.insert_op_after(memref.DeallocOp.get(alloc.memref), nest)
    bv, _, j, k = (AffineExpr.dimension(i) for i in range(4))  # the textbook nest's (b, i, j, k)
    new = affine.LoadOp(alloc.memref, list(load.indices), AffineMapAttr(AffineMap(4, 0, (bv, k, j))),
                        load.result.type)
    Rewriter.replace_op(load, new)
    remark(pass_name, nest, f"B's panels are in groups of {g} along k, but {why}: copied with the groups undone "
           f"first (nest 'matmul.ungrouped', {b.type} -> {alloc.memref.type})")


def dot_products(nest: affine.ForOp, target: Target, plan: MatmulPlan, skip: set[str]) -> DotProducts | str:
    """The dot-product instruction a low-precision matmul nest's register tile runs on, or
    why it runs widened: bf16 pairs on vdpbf16ps (AVX512-BF16), u8 x s8 quads on vpdpbusd
    (VNNI), any other i8/ui8 pair as i16 pairs on vpmaddwd + vpaddd (exact: the products of
    two i16 from bytes and their pair sums fit an i32), where both operands are packed in
    panels (a K that is not whole groups is padded with zeros in both: loom-pack). B may
    be a transposed view (`x @ w.T`): a group's elements then lie side by side in a row of
    W, and the grouped copy reads them so (u8 x s8 at 128x3072x768, znver3, one thread:
    106 GOP/s, as x @ b 119; widened as before 54)."""
    instruction = _instruction(nest, target)
    if not isinstance(instruction, Instruction):
        return instruction
    dot = DotProducts(instruction, compensated=_sources(nest) == ["i8", "i8"] and instruction.key == "vpdpbusd")
    g = instruction.group
    # A read in place: a direct convolution's windows, or a matmul's rows (`MatmulPlan.pack_a`)
    windows = ((plan.in_place == "A" or not plan.pack_a) and not dot.compensated
               and instruction.key in IN_PLACE_INSTRUCTIONS and _a_in_groups(nest, g))
    # B a panel of a filter in panels of groups, read in place (loom.conv2d's rank 6)
    b_packed = plan.pack or (windows and _b_in_groups(nest, g))
    if {"tile", "pack", "vectorize"} & skip or not (plan.rows_tiled and b_packed and (plan.pack_a or windows)) or (
            plan.in_place and not windows):
        return f"{dot.instruction.name} not used: both operands must be packed in panels"
    if plan.kc < plan.k and plan.kc % g:
        return f"{dot.instruction.name} not used: KC={plan.kc} is not a multiple of its groups of {g}"
    if min(plan.n, plan.nr) % plan.lanes:
        return f"{dot.instruction.name} not used: the register tile's {min(plan.n, plan.nr)} columns are not whole vectors"
    return dot


def products(nest: affine.ForOp, plan: MatmulPlan, dot: DotProducts | str, skip: set[str]) -> str:
    """How a low-precision matmul's products run ("" for f32/f64): the element types, the
    instruction, and how they are packed or widened."""
    sources = _sources(nest)
    if not sources:
        return ""
    pair = " x ".join(sources[:2])
    summed = "f32" if "bf16" in sources else "i32"
    if isinstance(dot, DotProducts):
        i = dot.instruction
        if dot.compensated:
            return (f"{pair} products summed in {summed}: packed in groups of {i.group} along k (A's i8 shifted by "
                    f"+128 to ui8), {i.described} with 128 x B's column sums subtracted (loom-compensate, loom-dot)")
        widened = [f"{s} as {e}" for s, e in zip(sources, dot.elements) if s != e]
        packed = f"packed in groups of {i.group} along k" + (f" ({', '.join(widened)})" if widened else "")
        if plan.pack and not plan.pack_a and plan.in_place != "A":
            packed = f"B {packed}, A's rows read in place (each group of {i.group} side by side in them)"
        if not plan.pack:  # (dot_products: B a panel of a filter in groups, A the windows)
            packed = f"both read in place in groups of {i.group} along k (the windows, and the filter's panel)"
        return f"{pair} products summed in {summed}: {packed}, {i.described} (loom-dot)"
    packed = plan.pack and "pack" not in skip
    where = ("as they are read" if not packed else "as they are packed" if plan.pack_a
             else "B's as they are packed, A's as they are read")
    instruction = "f32 FMAs" if summed == "f32" else "vpmulld + vpaddd"
    return f"{pair} products summed in {summed}: widened to {summed} {where}, {instruction} ({dot})"


def _matmul_shape(nest: affine.ForOp) -> tuple[int, tuple[int, int, int]] | None:
    """(batch loops, (M, N, K)) of a textbook matmul nest: band (b,) i, j, k with
    constant bounds starting at 0 and step 1."""
    band = perfect_band(nest)
    if len(band) not in (3, 4):
        return None
    trips = [constant_trip_count(loop) for loop in band]
    if any(t is None for t in trips) or any(loop.step.value.data != 1 for loop in band):
        return None
    m, n, k = trips[-3:]
    return len(band) - 3, (m, n, k)  # type: ignore[return-value]


#: a textbook matmul nest's loops (after its batch loops)
TEXTBOOK = ("i", "j", "k")
#: fewer rows than MR: B streamed once, row by row, each row used by every row of A from
#: L1, the rows of C in L1
ROWS_STREAMED = ("k", "i", "j")
#: the same in column blocks, one per thread: j first, to be tiled (COLUMN_TILED), then
#: each block's columns streamed row by row of B (COLUMN_BLOCKS)
COLUMNS_FIRST = ("j", "i", "k")
COLUMN_TILED = ("j_t", "j", "i", "k")
COLUMN_BLOCKS = ("j_t", "k", "i", "j")
#: the band tiled for the caches (i_t, j_t, k_t: MC, NC, KC), then for the registers
#: (i_r, j_r: MR, NR)
TILED = ("i_t", "j_t", "k_t", "i_r", "j_r", "i", "j", "k")
#: BLIS's loop order with the register tiles row by row: A's sliver stays in L1 while B's
#: panels stream past it (cost_model.py)
BLIS = ("j_t", "k_t", "i_t", "i_r", "j_r", "k", "i", "j")
#: the panel order, where the rows fit one block: j_t a block of NC columns per thread, a
#: panel of B at j_r (cost_model.py)
PANELS = ("i_t", "k_t", "j_t", "j_r", "i_r", "k", "i", "j")


def loop_order(band: Sequence[str], order: Sequence[str], batch: int) -> tuple[int, ...]:
    """loom-interchange's `order` that puts the loops named `band` (after `batch` batch
    loops, which stay outermost) in the order `order`: TEXTBOOK to ROWS_STREAMED is (2, 0, 1)."""
    return (*range(batch), *(batch + band.index(loop) for loop in order))


def matmul_schedule(plan: MatmulPlan, batch: int, skip: set[str], columns: int = 0,
                    transposed_b: bool = False, dot: DotProducts | None = None) -> tuple[ModulePass, ...]:
    """The passes of the plan (peeling aside, see `LoomDefaultPass._matmul`) for the 'matmul'
    nest with `batch` batch loops; `columns`, for a plan without row tiles: the width of
    the column blocks the threads share (`column_blocks`), 0 for none; `transposed_b`: B is
    a transposed view, whose panels loom-transpose-copy then copies as tiles transposed in
    registers (not in groups: the grouped copy reads a group's elements side by side in a
    row of W); `dot`: the operands packed in groups along k and the register tile run on
    that dot-product instruction (loom-dot)."""
    b, op = batch, "matmul"
    passes: list[ModulePass] = []
    vectors = _j_factors(plan, skip)
    if not plan.rows_tiled and columns and "tile" not in skip:
        passes += [
            LoomInterchangePass(order=loop_order(TEXTBOOK, COLUMNS_FIRST, b), op=op),
            LoomTilePass(sizes=(columns,), op=op, depth=b),
            LoomInterchangePass(order=loop_order(COLUMN_TILED, COLUMN_BLOCKS, b), op=op),
        ]
        factors = [1] * b + [1, MV_K_JAM, 1, *vectors]
    elif not plan.rows_tiled:
        # k jammed by MV_K_JAM (as many fmas per load and store of C), j by the vectors of
        # a register tile
        if "tile" not in skip:
            passes.append(LoomInterchangePass(order=loop_order(TEXTBOOK, ROWS_STREAMED, b), op=op))
        factors = [1] * b + [MV_K_JAM, 1, *vectors]
    elif "tile" not in skip:
        packed = "pack" not in skip and plan.pack
        order = PANELS if plan.panels else BLIS
        passes += [
            LoomTilePass(sizes=(plan.mc, plan.nc, plan.kc), op=op, depth=b),
            LoomTilePass(sizes=(plan.mr, plan.nr), op=op, depth=b + TILED.index("i_r")),
            LoomInterchangePass(order=loop_order(TILED, order, b), op=op),
        ]
        a_group, b_group = ({}, {}) if dot is None else (
            {"group": dot.instruction.group, "element": element} for element in dot.elements)
        if packed and plan.panels:
            # B's panel at j_r, a slot per column block where there are several (threads)
            private = b + PANELS.index("j_t") if plan.nc < plan.n else None
            passes.append(LoomPackPass(operand=1, level=b + PANELS.index("j_r"), panel=plan.nr, private=private, op=op,
                                       **b_group))
            if plan.pack_a:
                passes.append(LoomPackPass(operand=0, level=b + PANELS.index("k_t"), panel=plan.mr, op=op, **a_group))
        elif packed:
            if plan.in_place != "B":
                passes.append(LoomPackPass(operand=1, level=b + BLIS.index("k_t"), panel=plan.nr, op=op, **b_group))
            if plan.in_place != "A" and plan.pack_a:
                passes.append(LoomPackPass(operand=0, level=b + BLIS.index("i_t"), panel=plan.mr, op=op, **a_group))
        factors = [1] * (b + order.index("k")) + [plan.k_jam, plan.mr, *vectors]
    else:
        factors = []  # band (b,) i, j, k: no register tile to jam, k innermost
    if dot is not None and dot.compensated:
        passes.append(LoomCompensatePass(op=op))
    if "vectorize" not in skip:
        passes.append(LoomVectorizePass(width=plan.lanes, op=op))
        if dot is not None:
            passes.append(LoomDotPass(width=plan.lanes, op=op))
        elif transposed_b and any(isinstance(p, LoomPackPass) and p.operand == 1 for p in passes):
            passes.append(LoomTransposeCopyPass(width=plan.lanes, op=op))
    if "unroll-jam" not in skip and factors:
        passes.append(LoomUnrollJamPass(factors=tuple(factors), op=op))
    if "hoist" not in skip:
        passes.append(LoomHoistPass(op=op))
    if "prefetch" not in skip and plan.rows_tiled:
        passes.append(LoomPrefetchPass(op=op))
    if plan.panels:  # (not where tile, pack or fuse-pack is skipped: see plan_matmul)
        passes.append(LoomFusePackPass(op=op))
    return tuple(passes)


#: a batched matmul runs whole products per thread (`batch_blocks`) where its blocks of
#: products leave the busiest thread at most this much above the average (36 products on
#: 2 threads: 0; 16 on 3: 12.5%); else the threads share each product, as a 2-D matmul's
BATCH_IMBALANCE = 0.25


def batch_blocks(passes: Sequence[ModulePass], size: int) -> tuple[ModulePass, ...]:
    """A batched matmul's schedule (one batch loop) with the batch tiled into blocks of
    `size` products, one block per thread, each with its own slot of the packed buffers
    (loom-pack's `private`): the threads run whole products, packing their own panels,
    with no fork and join inside them (the plan is the one-thread plan). Where they split a
    product's rows instead, each thread streamed all of its B for a few rows: Winograd's 36
    products of 16x256x256 (3x3 C256 14^2 by F(4x4)), znver4: its matmul took 1.51 ms on two
    threads against 0.75 on one; in blocks of products, the whole layer takes 0.44 ms on
    two threads (0.86 on one). Plain batched matmuls, two threads, against the rows split:
    8x256x256x256 179 -> 222 GFLOP/s, 16x64x256x256 114 -> 213, 4x512x512x512 218 either way."""
    moved = []
    for p in passes:
        if isinstance(p, LoomPackPass):
            p = replace(p, level=p.level + 1, private=0)
        elif isinstance(p, LoomTilePass):
            p = replace(p, depth=p.depth + 1)
        elif isinstance(p, LoomInterchangePass):
            p = replace(p, order=(0, *(i + 1 for i in p.order)))
        elif isinstance(p, LoomUnrollJamPass):
            p = replace(p, factors=(1, *p.factors))
        moved.append(p)
    return (LoomTilePass(sizes=(size,), op="matmul", depth=0), *moved)


def _j_factors(plan: MatmulPlan, skip: set[str]) -> list[int]:
    """The unroll-jam factor for the j loop inside the register tile, as loom-vectorize
    leaves it: NR/w full vectors (a loop of that many iterations, unrolled); a single
    vector, full or masked (and a masked rest), has no loop left to give a factor to."""
    if "vectorize" in skip:
        return [1]
    full = min(plan.n, plan.nr) // plan.lanes
    return [full] if full > 1 else []


def _grouped_conv(ctx: Context, nest: affine.ForOp, name: NestName, skip: set[str]) -> None:
    """A nest of loom-grouped-conv's: its channel loop fv vectorized (by the largest power of
    two in its extent, the rest masked), the tile's loop t unrolled (it is then the
    innermost), the tile of Y kept in registers across the window (loom-hoist)."""
    # (its loops t and fv are there when they run more than once)
    extents = {loop.body.block.args[0].name_hint: constant_trip_count(loop) for loop in perfect_band(nest)}
    tile, channels = extents.get("t", 1), extents.get("fv", 1)
    assert tile is not None and channels is not None
    width = 1 << (channels.bit_length() - 1)
    passes: list[ModulePass] = [LoomVectorizePass(op=name.tag, width=width)] if width > 1 else []
    if "unroll-jam" not in skip and width == channels and tile > 1:
        passes.append(LoomUnrollPass(op=name.tag, factor=tile))
    if "hoist" not in skip:
        passes.append(LoomHoistPass(op=name.tag))
    _run_on(ctx, nest, name, passes)


def _run_on(ctx: Context, nest: affine.ForOp, name: NestName, passes: Sequence[ModulePass]) -> list[affine.ForOp]:
    """Run `passes` on `nest` alone: the nest is tagged `name.temporary` meanwhile, and each
    pass selects that tag; it and the nests made from it (peeled copies) get their tag back
    after. Returns those nests. The passes see the nest's function alone (`_alone`), and
    their remarks carry `name` (payload `nest`)."""
    original = nest.attributes[TAG]
    nest.attributes[TAG] = StringAttr(name.temporary)
    with _alone(nest) as module, scope(nest=name):
        try:
            if passes:
                LoomPipeline(tuple(replace(p, op=name.temporary) for p in passes)).apply(ctx, module)
        finally:
            made = tagged_nests(module, name.temporary)
            for root in made:
                root.attributes[TAG] = original
    return made


@contextmanager
def _alone(nest: Operation) -> Iterator[ModuleOp]:
    """The function around `nest`, in a module of its own while the block runs, then back
    in its place: passes run on it walk that function, not every function of the module,
    so that scheduling a module of many functions (loom-outline's, one per nest) stays
    linear in its size."""
    top: Operation = nest
    while not isinstance(parent := top.parent_op(), ModuleOp):
        assert parent is not None, "the nest is in a module"
        top = parent
    home, after = top.parent_block(), top.next_op
    assert home is not None
    top.detach()
    try:
        yield ModuleOp([top])
    finally:
        top.detach()
        if after is not None:
            home.insert_op_before(top, after)
        else:
            home.add_op(top)

"""loom-pack{operand=N level=L panel=P private=L2 op=TAG}: copy the tile of an operand that the
inner loops of a nest read into a contiguous buffer, and read it from there (the packing
of BLIS and of Bondhugula's MLIR matmul; MLIR's `affine-data-copy-generate`).

Options:

- `operand=N` (required): which input of the nest's op to pack, counted like the op's
  operands: the memrefs that its statement (the block of the nest's last `affine.store`)
  reads, in the order it first reads them. Matmul `C[i,j] += A[i,k] * B[k,j]`: 0 is A,
  1 is B (2 is C, written, so refused); conv2d: 0 is X, 1 is W.
- `level=L` (required): the loop at the start of whose body the copy runs, counted from
  0 at the nest's outermost loop along the loops around the operand's read. The buffer
  holds what the loops inside that loop read: after `loom-tile{sizes=MC,NC,KC}` on
  (i, j, k) the loops are (i_t, j_t, k_t, i, j, k), and `level=2` packs the KC x NC tile
  of B (the MC x KC tile of A) once per k_t iteration.
- `panel=P` (optional): lay the tile out in panels, the BLIS way. The packed dimension
  walked by a loop of the output (j for B, i for A) is split into ceil(E/P) panels of P,
  panel index first, offset in the panel last: B's [KC][NC] becomes [NC/P][KC][P], A's
  [MC][KC] becomes [MC/P][KC][P], so that a micro-kernel of P columns (rows) reads one
  panel contiguously. Where P does not divide the tile's extent E the buffer is padded up
  to whole panels; the padding is neither written nor zeroed (the compute loops keep their
  bounds and never read it). A P larger than E is lowered to E (one panel, no padding).
- `private=L` (optional): a slot of the buffer per iteration of the loop at level L
  (< `level`, constant bounds): the buffer gets a leading dimension of its trip count,
  indexed by `%slot = (%iv - lb) floordiv step`, computed first in that loop's body, so
  that its iterations copy into and read from their own slots and may run on threads of
  their own (loom-parallelize reads %slot as the iteration's number): the panel order's
  column blocks, one per thread.
- `group=G` (optional, with `panel`): the dot-product layout. The packed dimension
  beside the panel's (k) is split into groups of G consecutive elements, each group
  innermost beside its column's (row's) others in the panel: B's [NC/P][KC][P] becomes
  [NC/P][KC/G][P*G], read at `[p, (k - base) floordiv G, offset * G + (k - base) mod G]`,
  so that one panel row holds G k of P columns side by side, as vpmaddwd (G=2),
  vpdpbusd (G=4) and vdpbf16ps (G=2) read them (loom-dot). Every tile along k must start
  a group, and end on whole groups or a known number r of elements past them (the loop's
  bounds show it: K = 147 tiled by 64 ends its last tile 1 past a pair): the last group
  of such a tile holds its r elements and G - r zeros, and the buffer is marked
  `loom.zero_padded_groups`, so that loom-dot may run k on to whole groups (the zeros'
  products add 0) rather than leave the matmul widened (u8 x s8 on vpmaddwd, znver3, one
  thread, alternating processes: 1000x1000x999 74 -> 130 GOP/s, 197x768x767 73 -> 135,
  the stem's 64x12544x147 53-68 -> 117-131). The copy's k loop steps by G, each
  iteration copying a group: G reads down k, G adjacent writes, which LLVM vectorizes as
  interleaved stores (u8 x s8 3x3 C128 28^2 through im2col, znver3, one thread: 81 -> 103
  GOP/s; 1x1 C256 14^2 38 -> 58); where the group lies along the operand's unit-stride
  last dimension as well (A's k), one vector of G read and one written (LLVM had copied
  A's quads byte by byte: u8 x s8 2048^3, znver4, 354 -> 389 GOP/s); a tile's last partial
  group is copied by a second nest after it, which runs once, in the tile that ends inside
  a group.
- `element=T` (optional): the buffer's element type, for an operand its reads widen: the
  operand's own (`i8`, `ui8`, `bf16`: no cast in the copy, the compute loops widen as
  they read), `i16` for an i8/ui8 operand (the copy sign- or zero-extends to i16, the
  compute loops sign-extend the i16 to i32), `ui8` for an i8 operand its reads
  sign-extend: the copy stores each element plus 128 as an unsigned byte (-128..127 as
  0..255, LLVM's xor of the sign bit) and the compute loops read `extui(x) - 128`, the
  same value (so that loom-compensate can put s8 x s8 products on vpdpbusd, which reads
  one side unsigned), or the widened type (the default).
- `op=TAG`: only the nests tagged TAG (`matmul`, `conv2d`); without it every nest,
  skipping with a remark those that lack the operand or the level (but not all of them).

The tile is the footprint of the read over the loops inside the level
(`affine_forms.access_footprint`): each subscript walked by one of those loops with
coefficient 1 (`iv + offset`) is a dimension of the buffer, whose static size is the
largest tile (KC, NC: the tile sizes, or the extent when smaller); subscripts that those
loops do not walk (the batch index, an outer loop's iv) are fixed in the tile and not
dimensions of the buffer. The buffer is allocated (`memref.alloc`, 64-byte aligned) right
before the nest and freed right after it. The copy nest, first in the level loop's body,
runs over the same `min` bounds as the loops it serves, so a remainder tile copies only
what exists, and it is clamped to the memref's shape as well: nothing is read out of
bounds, not even for a read under a guard (conv2d's padding). Every read of the operand
inside the level loop becomes a read of the buffer at [iv - base, ...] (with panels
[(iv - base) floordiv P, ..., (iv - base) mod P], or, when the loop is the point loop of
a tile of at most P that starts on a panel boundary, [(t - base) floordiv P, ..., iv - t]
with t the tile loop's iv: invariant in the point loops, then unit stride).

```mlir
// loom-tile{sizes=32,64,16},loom-pack{operand=1 level=2 panel=16} on a 100x50 * 50x70 matmul
affine.for %i_t = 0 to 100 step 32 {
  affine.for %j_t = 0 to 70 step 64 {
    affine.for %k_t = 0 to 50 step 16 {
      affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> ((d0 + 32), 100)>(%i_t) {
        affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 64), 70)>(%j_t) {
          affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> ((d0 + 16), 50)>(%k_t) {
            %4 = affine.load %a[%i, %k] : memref<100x50xf32>
            %5 = affine.load %b[%k, %j] : memref<50x70xf32>
            ...
} {loom.tag = "matmul"}
// becomes
%b_pack = memref.alloc() {alignment = 64 : i64} : memref<4x16x16xf32>
affine.for %i_t = 0 to 100 step 32 {
  affine.for %j_t = 0 to 70 step 64 {
    affine.for %k_t = 0 to 50 step 16 {
      affine.for %k_cp = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 50))>(%k_t) {
        affine.for %j_panel = 0 to 4 {
          affine.for %j_cp = 0 to min affine_map<(d0, d1) -> (16, (((d0 * -1) + (d1 * -16)) + 70))>(%j_t, %j_panel) {
            %3 = affine.load %b[%k_t + %k_cp, %j_t + %j_panel * 16 + %j_cp] : memref<50x70xf32>
            affine.store %3, %b_pack[%j_panel, %k_cp, %j_cp] : memref<4x16x16xf32>
          }
        }
      }
      affine.for %i = affine_map<(d0) -> (d0)>(%i_t) to min affine_map<(d0) -> ((d0 + 32), 100)>(%i_t) {
        affine.for %j = affine_map<(d0) -> (d0)>(%j_t) to min affine_map<(d0) -> ((d0 + 64), 70)>(%j_t) {
          affine.for %k = affine_map<(d0) -> (d0)>(%k_t) to min affine_map<(d0) -> ((d0 + 16), 50)>(%k_t) {
            %4 = affine.load %a[%i, %k] : memref<100x50xf32>
            %5 = affine.load %b_pack[(%j + %j_t * -1) floordiv 16, %k + %k_t * -1, (%j + %j_t * -1) mod 16] : memref<4x16x16xf32>
            ...
} {loom.tag = "matmul"}
memref.dealloc %b_pack : memref<4x16x16xf32>
```

A low-precision operand is packed widened: where each read of it inside the level loop is
used only by a widening cast, all alike (`arith.extf` bf16 -> f32, `arith_ext.extsi` /
`extui` i8 / ui8 -> i32, as convert-loom-to-affine reads them), the buffer has the
widened element type, the copy widens each element once, and the compute loops read the
widened values with no cast (their micro-kernel is then f32's or i32's). The remark says
`widened from bf16 to f32 as it is copied`.

Refused with a LoomError, nothing changed: a missing or negative `operand` or `level`, a
non-positive `panel`, a non-positive `group` or one without `panel`, an `element` the
buffer cannot hold, a `group` whose tiles along k do not start a group or may end anywhere
in one (k tiled by 3 in pairs), an operand or a
level that no nest has (every one of those problems in one message); with `op=`, an
operand or a level the nest does not have; an operand
written inside the nest (through any view of its buffer), read inside the level loop other
than by `affine.load`, or read there at different subscripts (pack before unrolling); a
subscript that is not linear, that combines two loops inside the level (conv2d's input row
`oh * sh + r * dh - ph` when both oh and r are inside: pack inside ow instead), or that
steps by more than 1 along one (a dilation), or that is fixed in the tile but may fall
outside the memref (conv2d's padded input row inside r: the read is guarded there, a copy
would not be); a tile without a static size or a single start; a level with no loop
inside it walking the operand; `panel` where not exactly one packed dimension is walked by
a loop of the output. Each packing is a remark (`--remarks`): `packed B (%b) of nest
'matmul': tile 16x64 at loop %k_t (level 2) as panels [4][16][16], 4 KiB`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseIntOrFPElementsAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    UnitAttr,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from dialects import arith_ext
from dialects.layout import (
    VIEW_OPS,
    may_alias,
    memref_root,
    static_strides,
    unknown_origin,
)
from passes.analysis.affine_forms import (
    FootprintDim,
    FootprintError,
    LinearForm,
    Range,
    access_footprint,
    affine_exprs,
    map_forms,
    prune_bounds,
    residue,
)
from passes.analysis.loop_utils import (
    SelectionError,
    constant_bounds,
    enclosing_loops,
    iteration_number_map,
    iv_name,
    nest_tag,
    select_nests,
    step_of,
    value_name,
)
from passes.conversion.convert_loom_to_affine import constant, zero_of
from passes.schedule.loop_transforms import LoopBounds, build_affine_nest, retarget_load
from passes.support.diagnostics import LoomError, op_location
from passes.support.remarks import remark
from passes.support.units import format_bytes

#: how the remarks name the operands of the ops Loom knows
OPERAND_LETTERS = {"matmul": "ABC", "conv2d": "XWY"}
#: ops that only read the memrefs they take
READS = (affine.LoadOp, memref.LoadOp, affine.VectorLoadOp)
#: the ways of an L1 set on the CPUs Loom plans for (8 on Zen 3 and Zen 4): as many rows
#: of a source, a power-of-two distance apart, can be read in turn from one set
ASSOCIATIVITY = 8
#: the unit attribute of a grouped buffer (`group=G`) whose tiles may end inside a group:
#: the copy writes zeros past a tile's end to the end of its group, so that a loop may
#: run on to whole groups and add their products, 0 (loom-dot)
ZERO_PADDED = "loom.zero_padded_groups"
#: what `element=ui8` adds to an i8 operand's elements as it copies them: -128..127 as
#: 0..255, the unsigned bytes vpdpbusd multiplies (loom-compensate takes it back out)
SHIFT = 128


@dataclass
class _Plan:
    """One packing, decided before anything is changed."""

    nest: affine.ForOp
    what: str  # "B (%b) of nest 'matmul'"
    memref: SSAValue
    reads: list[affine.LoadOp]
    level_loop: affine.ForOp
    footprint: list[FootprintDim]
    packed: list[int]  # the subscripts that are dimensions of the buffer
    split: int | None  # the subscript split into panels
    shape: list[int]
    #: `private=`: the loop with a slot of the buffer per iteration (a leading dimension),
    #: its lower bound, step and number of iterations
    private: tuple[affine.ForOp, int, int, int] | None = None
    #: the widening cast every read of the operand goes through (bf16 -> f32, i8 -> i32),
    #: and its result type: the buffer holds widened elements, copied through it once
    widen: tuple[type[Operation], Attribute] | None = None
    #: `group=G`: the dimension grouped by G (k), innermost in the panel
    grouped: int | None = None
    group: int = 1
    #: the elements of a tile's last group where its end falls inside one (K mod G, for
    #: K = 147 in pairs: 1), 0 where every tile is whole groups
    tail: int = 0
    #: `element=`: the buffer's element type where it is not the widened one (i16 for an
    #: i8 operand widened to i32), and the cast the compute loops then read it through
    element: Attribute | None = None
    read_cast: type[Operation] | None = None
    #: `element=ui8` for an i8 operand: the copy stores each element plus SHIFT (as an
    #: unsigned byte), the compute loops read it zero-extended minus SHIFT
    shifted: bool = False

    @property
    def width(self) -> int:
        """The panel's width (its last dimension holds `group` elements per column)."""
        return self.shape[-1] // self.group


@dataclass(frozen=True)
class LoomPackPass(ModulePass):
    name = "loom-pack"

    operand: int | None = None
    level: int | None = None
    panel: int | None = None
    private: int | None = None
    group: int | None = None
    element: str | None = None
    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # every problem with the options at once, so that one run shows all there is to fix
        problems = self._option_problems()
        location = None
        try:
            nests = select_nests(op, self.op, self.name)
        except SelectionError as e:
            if not problems:
                raise
            problems.append(e.reason)
            location, nests = e.location, []
        if ranged := self._range_problems(nests):
            problems += ranged
            location = op_location(nests[0])
        if problems:
            raise LoomError(f"{self.name}: {'; '.join(problems)}", location=location)
        plans = [plan for nest in nests if (plan := self._plan(nest)) is not None]
        for plan in plans:
            self._pack(plan)

    def _option_problems(self) -> list[str]:
        """What is wrong with the options by themselves."""
        problems = []
        for option, value in (("operand", self.operand), ("level", self.level)):
            if value is None:
                problems.append(f"option '{option}' is required (an integer >= 0)")
            elif value < 0:
                problems.append(f"option '{option}' must be >= 0, got {value}")
        if self.private is not None and (self.private < 0 or (self.level is not None and self.private >= self.level)):
            problems.append(f"option 'private' must be the level of a loop around the copy's, 0 to level - 1, "
                            f"got {self.private}")
        if self.panel is not None and self.panel < 1:
            problems.append(f"option 'panel' must be a positive integer, got {self.panel}")
        if self.group is not None and (self.group < 1 or self.panel is None):
            problems.append(f"option 'group' must be a positive integer, with 'panel', got {self.group}"
                            + ("" if self.panel is not None else " without 'panel'"))
        return problems

    def _range_problems(self, nests: list[affine.ForOp]) -> list[str]:
        """An operand (a level) that no nest has: nothing would be packed (a nest named by
        `op=` that lacks them is refused by `_plan`, others are skipped with a remark)."""
        if self.operand is None or self.operand < 0 or not nests:
            return []
        reads = {nest: _statement(nest)[1] for nest in nests}
        having = [nest for nest in nests if self.operand < len(reads[nest])]
        if not having:
            what = ", ".join(f"nest '{nest_tag(n) or 'untagged'}' {_reads(len(reads[n]))}" for n in nests)
            return [f"option 'operand' is {self.operand}, but {what}"]
        if self.level is None or self.level < 0:
            return []
        operand = [list(reads[n].items())[self.operand] for n in having]
        if all(self.level >= len(enclosing_loops(read)) for _, read in operand):
            what = ", ".join(_depth(n, mem, read) for n, (mem, read) in zip(having, operand))
            return [f"option 'level' is {self.level}, but {what}"]
        return []

    def _skip(self, nest: affine.ForOp, message: str) -> None:
        """A nest the options do not fit: an error when it was selected by name."""
        if self.op is not None:
            raise LoomError(f"{self.name}: {message}", nest)
        remark(self.name, nest, f"skipped: {message}", missed=True)

    def _plan(self, nest: affine.ForOp) -> _Plan | None:
        assert self.operand is not None and self.level is not None
        tag = nest_tag(nest) or "untagged"
        store, reads = _statement(nest)
        if self.operand >= len(reads):
            return self._skip(nest, f"option 'operand' is {self.operand}, but nest '{tag}' {_reads(len(reads))}")
        mem = list(reads)[self.operand]
        read = reads[mem]
        letters = OPERAND_LETTERS.get(tag, "")
        letter = f"{letters[self.operand]} " if self.operand < len(letters) else f"operand {self.operand} "
        what = f"{letter}({value_name(mem)}) of nest '{tag}'"
        chain = enclosing_loops(read)
        if self.level >= len(chain):
            return self._skip(nest, f"option 'level' is {self.level}, but {_depth(nest, mem, read)}")
        refuse = f"{self.name}: cannot pack {what}"
        if (written := _writer(nest, mem)) is not None:
            raise LoomError(f"{refuse}: {written[1]}", written[0])
        level_loop = chain[self.level]
        at = f"at level {self.level} (loop %{iv_name(level_loop)})"
        uses = [u.operation for u in mem.uses if level_loop.is_ancestor(u.operation)]
        if other := next((o for o in uses if not isinstance(o, affine.LoadOp)), None):
            where = f"inside loop %{iv_name(level_loop)}"
            raise LoomError(f"{refuse}: its '{other.name}' {where} cannot be rewritten", other)
        loads = [o for o in uses if isinstance(o, affine.LoadOp)]
        subscripts = map_forms(read.map.data, read.indices)
        if other := next((o for o in loads if map_forms(o.map.data, o.indices) != subscripts), None):
            raise LoomError(
                f"{refuse} {at}: it is read at different subscripts inside the loop (pack before unrolling)", other
            )
        try:
            footprint = access_footprint(read, chain[self.level + 1 :])
        except FootprintError as e:
            raise LoomError(f"{refuse} {at}: {e}", read) from None
        packed = [d for d, fd in enumerate(footprint) if fd.loop is not None]
        if not packed:
            raise LoomError(f"{refuse} {at}: no loop inside it walks {value_name(mem)}, nothing to pack", read)
        split = None if self.panel is None else self._panel_dim(refuse, store, footprint, packed, read)
        shape = [footprint[d].extent for d in packed if d != split]
        grouped, tail = (None, 0) if self.group is None else self._grouped_dim(refuse, footprint, packed, split, read)
        group = self.group or 1
        if split is not None:
            assert self.panel is not None
            # a panel wider than the tile would only pad the buffer: one panel, the tile's width
            panel = min(self.panel, footprint[split].extent)
            shape = [-(-footprint[split].extent // panel), *shape, panel]
            if grouped is not None:
                shape = [shape[0], -(-shape[1] // group), panel * group]
        private = None
        if self.private is not None:
            owner = chain[self.private]
            bounds = constant_bounds(owner)
            if bounds is None:
                raise LoomError(f"{refuse}: option 'private' names loop %{iv_name(owner)}, whose bounds are not "
                                "constant (a slot per iteration needs their number)", owner)
            lb, ub = bounds
            private = (owner, lb, step_of(owner), max(1, -(-(ub - lb) // step_of(owner))))
        widen = _widening(loads)
        element, read_cast = self._element(refuse, mem.type, widen, read)
        return _Plan(nest, what, mem, loads, level_loop, footprint, packed, split, shape, private, widen,
                     grouped, group, tail, element, read_cast, read_cast is arith_ext.ExtUIOp and widen is not None
                     and widen[0] is arith_ext.ExtSIOp)

    def _grouped_dim(self, refuse: str, footprint: list[FootprintDim], packed: list[int], split: int | None,
                     read: affine.LoadOp) -> tuple[int, int]:
        """`group=G`: the packed dimension beside the panel's (k), whose every tile starts
        a group, and the elements of the last group of a tile that ends inside one (0: all
        whole groups), provably from the loop's bounds: each term of its end is a multiple
        of G, but for at most one, which is a known number past one (147 - %k_t: 1)."""
        assert self.group is not None
        others = [d for d in packed if d != split]
        if len(others) != 1:
            raise LoomError(f"{refuse}: option 'group' groups the one packed dimension beside the panel's, "
                            f"but the tile has {len(others)}", read)
        fd = footprint[others[0]]
        lower = [f - fd.base for f in fd.lower]
        ends = [residue(u - fd.base, self.group) for u in fd.upper]
        tails = [r for r in ends if r != 0]
        if any(f.coeffs or f.const for f in lower) or len(tails) > 1 or None in tails:
            raise LoomError(f"{refuse}: option 'group' is {self.group}, but a tile of loop %{iv_name(fd.loop)} "
                            f"does not start a group, or its end is not a known number of elements past "
                            f"whole groups (tile {fd.extent}; tile k from 0 by a multiple of {self.group})", read)
        return others[0], (tails[0] if tails else 0)

    def _element(self, refuse: str, mtype: MemRefType, widen: tuple[type[Operation], Attribute] | None,
                 read: affine.LoadOp) -> tuple[Attribute | None, type[Operation] | None]:
        """`element=`: the buffer's element type (the operand's own, i16 for i8/ui8, ui8
        shifted for a sign-extended i8, or the widened one) and the cast the compute loops
        then widen it with (None: as today)."""
        if self.element is None:
            return None, None
        source = mtype.get_element_type()
        choices = {str(source): source}
        if widen is not None:
            wide = widen[1]
            if isinstance(source, IntegerType) and source.width.data == 8:
                choices["i16"] = IntegerType(16)
                if widen[0] is arith_ext.ExtSIOp and str(source) == "i8":
                    choices["ui8"] = IntegerType(8, Signedness.UNSIGNED)
            choices[str(wide)] = wide
        chosen = choices.get(self.element)
        if chosen is None:
            raise LoomError(f"{refuse}: option 'element' is {self.element}, but its buffer can hold "
                            f"{' or '.join(choices)} (the operand's type, or what its reads widen it to"
                            + ("; ui8: its i8 shifted by 128)" if str(source) == "i8" and "ui8" in choices else ")"),
                            read)
        if widen is None or chosen == widen[1]:
            return None, None
        if str(chosen) == "ui8" and str(source) == "i8":
            return chosen, arith_ext.ExtUIOp
        return chosen, (widen[0] if chosen == source else arith_ext.ExtSIOp)

    def _panel_dim(
        self, refuse: str, store: affine.StoreOp, footprint: list[FootprintDim], packed: list[int], read: affine.LoadOp
    ) -> int:
        """The packed subscript walked by a loop of the output (j for B, i for A)."""
        output = {v for f in map_forms(store.map.data, store.indices) if f is not None for v in f.coeffs}
        free = [d for d in packed if _iv(footprint[d].loop) in output]
        if len(free) != 1:
            loops = ", ".join(f"%{iv_name(footprint[d].loop)}" for d in packed)
            raise LoomError(
                f"{refuse}: option 'panel' splits the one packed dimension walked by a loop of the output "
                f"{value_name(store.memref)}, but {len(free)} of the tile's loops ({loops}) are",
                read,
            )
        return free[0]

    def _pack(self, plan: _Plan) -> None:
        mtype = plan.memref.type
        assert isinstance(mtype, MemRefType)
        slots = [] if plan.private is None else [plan.private[3]]
        element = plan.element or (plan.widen[1] if plan.widen else mtype.get_element_type())
        alloc = memref.AllocOp.get(element, 64, [*slots, *plan.shape])
        alloc.memref.name_hint = f"{plan.memref.name_hint or 'operand'}_pack"
        if plan.tail:
            alloc.attributes[ZERO_PADDED] = UnitAttr()
        buffer = alloc.memref
        dealloc = memref.DeallocOp.get(buffer)
        parent = plan.nest.parent_block()
        assert parent is not None
        parent.insert_op_before(alloc, plan.nest)
        parent.insert_op_after(dealloc, plan.nest)
        slot = _slot(plan)
        copies = self._copy_nests(plan, buffer, slot)
        for new in (alloc, dealloc, *(op for copy in copies for op in copy.walk())):
            new.location = plan.nest.location
        body = plan.level_loop.body.block
        assert body.first_op is not None
        first = body.first_op
        for copy in copies:
            body.insert_op_before(copy, first)
        index = _private(*self._packed_index(plan), slot)
        for read in plan.reads:
            casts = [use.operation for use in read.result.uses] if plan.widen else []
            new = retarget_load(read, buffer, *index)
            for cast in casts:  # the buffer's elements are widened already (or part of the way)
                if plan.read_cast is not None and plan.widen is not None:
                    rest: list[Operation] = [plan.read_cast(new.result, plan.widen[1])]
                    if plan.shifted:  # zero-extended minus the shift: the operand's value
                        rest += [shift := constant(SHIFT, plan.widen[1]), arith.SubiOp(rest[0], shift)]
                    for o in rest:
                        o.location = cast.location
                        cast.parent_block().insert_op_before(o, cast)
                    cast.results[0].replace_all_uses_with(rest[-1].results[0])
                else:
                    cast.results[0].replace_all_uses_with(new.result)
                cast.detach()
                cast.erase()
        tile = "x".join(str(plan.footprint[d].extent) for d in plan.packed)
        if plan.split is None:
            layout = f"into {buffer.type}"
        else:
            padded = plan.footprint[plan.split].extent % plan.width
            panels = "".join(f"[{n}]" for n in [*slots, *plan.shape])
            layout = f"as panels {panels}" + (" (the last panel padded)" if padded else "")
        if plan.private is not None:
            layout += f", a slot per iteration of %{iv_name(plan.private[0])} (private)"
        if plan.grouped is not None:
            layout += (f", %{iv_name(plan.footprint[plan.grouped].loop)} in groups of {plan.group} inside each "
                       f"panel's rows (the dot-product layout)")
            if plan.tail:
                layout += f", a tile's last group of {plan.tail} padded with zeros"
        if plan.shifted:
            layout += f", shifted by +{SHIFT} to {element} as it is copied (read back zero-extended, minus {SHIFT})"
        elif element != mtype.get_element_type():
            layout += f", widened from {mtype.get_element_type()} to {element} as it is copied"
        size = element.bitwidth // 8 * math.prod([*slots, *plan.shape])
        remark(
            self.name, plan.nest,
            f"packed {plan.what}: tile {tile} at loop %{iv_name(plan.level_loop)} (level {self.level}) "
            f"{layout}, {format_bytes(size)}",
        )

    def _copy_nests(self, plan: _Plan, buffer: SSAValue, slot: SSAValue | None) -> list[affine.ForOp]:
        """buffer[...] = operand[...] over the tile: one loop per dimension of the buffer,
        from 0 (the tile's start) to the tile's end in this iteration; in the buffer's
        order (it is written contiguously), except where the panels split the operand's
        unit-stride dimension (B's columns): there the panel loop goes inside the others,
        just outside the offset in the panel, so that the copy reads the operand row by
        row, each row of the tile in one sweep across the panels (the panel-first order
        read NR columns of every row of a panel, then the next panel: short bursts a
        row apart, which the hardware prefetchers do not follow across pages; measured,
        znver4, one thread: 128x768x3072 +4%, 128x1024x1024 +4%, 1024^3 +1%); and where
        the operand is adjacent along the other dimension and a panel is wider than
        ASSOCIATIVITY (a transposed B), the offset loop goes outside the other, so that
        each of the panel's columns is read in one sweep along k.

        Grouped, where a tile may end inside a group (`plan.tail`), the copy runs to its
        end's last whole group, and a second nest copies the last group's `tail` elements
        and writes zeros after them (its k loop runs once, in the tile that ends inside a
        group: from that end's whole groups to the end)."""
        fp = plan.footprint
        order = [d for d in plan.packed if d != plan.split]
        names = [_name(fp[d].loop, "cp") for d in order]
        if plan.split is not None:
            names = [_name(fp[plan.split].loop, "panel"), *names, _name(fp[plan.split].loop, "cp")]
        unit = _unit_stride_dimension(plan.memref)
        rows_first = plan.split is not None and plan.split == unit
        # a source adjacent along the other dimension (a transposed B: its panel's NR
        # columns are NR rows of the buffer underneath, each in lines of its own): the
        # offset loop outside the other, so that the copy reads each of them along k. Not
        # for a panel of at most ASSOCIATIVITY rows (A's MR rows): their lines stay in L1
        # however they fall, and LLVM copies them as a transpose in registers. x @ w.T
        # (w 3072x768) at 128x3072x768, znver4, one thread: 55 -> 84 GFLOP/s (x @ w 94)
        along = (plan.split is not None and len(order) == 1 and unit == order[0]
                 and plan.width > ASSOCIATIVITY)

        def arranged(items: list) -> list:
            """The loops' items (panel, others..., offset) in the nest's order."""
            if along:
                return [items[0], items[2], items[1]]
            return [*items[1:-1], items[0], items[-1]] if rows_first else items

        def buffer_order(ivs: list[SSAValue]) -> list[SSAValue]:
            """The nest's ivs in the buffer's order (panel, others..., offset)."""
            if along:
                return [ivs[0], ivs[2], ivs[1]]
            return [ivs[-2], *ivs[:-2], ivs[-1]] if rows_first else ivs

        def relative(fd: FootprintDim, start: LinearForm, known: dict[SSAValue, Range] | None = None) -> LoopBounds:
            """The loop over the tile along fd, counted from `start`."""
            lower = prune_bounds([LinearForm(), *(t - start for t in fd.lower)], "max", known)
            return lower, prune_bounds([u - start for u in fd.upper], "min", known)

        def bounds(ivs: list[SSAValue], tail: bool = False) -> list[LoopBounds]:
            inner = [relative(fp[d], fp[d].base) for d in order]
            if plan.tail:
                at = order.index(plan.grouped)
                lower, upper = inner[at]
                whole = [u - (residue(u, plan.group) or 0) for u in upper]
                inner[at] = (prune_bounds([LinearForm(), *(w for w, u in zip(whole, upper) if w != u)], "max"),
                             upper) if tail else (lower, whole)
            if plan.split is None:
                return inner
            # panel p, then the other dimensions, then the offset in the panel
            panels, width = plan.shape[0], plan.width
            known = {ivs[0]: (0, panels - 1)}
            lower, upper = relative(fp[plan.split], fp[plan.split].base + LinearForm.of(ivs[0]) * width, known)
            upper = prune_bounds([LinearForm(const=width), *upper], "min", known)
            return [([LinearForm()], [LinearForm(const=panels)]), *inner, (lower, upper)]

        # a group adjacent in the operand too (A's k, unit stride, its last dimension): one
        # vector of G elements read and one written (LLVM copied them byte by byte)
        shape = plan.memref.type.get_shape()
        whole_groups = plan.grouped is not None and unit == plan.grouped == len(shape) - 1

        def body(ivs: list[SSAValue], tail: bool = False) -> list[Operation]:
            forms = [LinearForm.of(iv) for iv in ivs]
            if whole_groups and not tail:
                return copy_group(forms)
            # grouped, the k loop steps by G from 0 and each iteration copies a group: G
            # reads down k, G adjacent writes (a copy LLVM vectorizes as interleaved stores)
            return [op for g in range(plan.group) for op in copy(forms, g, zero=tail and g >= plan.tail)]

        def copy_group(forms: list[LinearForm]) -> list[Operation]:
            """buffer[group at forms] = operand[the G adjacent elements], as vectors."""
            exprs, operands = _private(*_grouped(plan, *affine_exprs(forms), within=0), slot)
            copied = read(forms, 0, plan.group)
            store = affine.VectorStoreOp(copied[-1].results[0], buffer, operands,
                                         AffineMapAttr(AffineMap(len(operands), 0, tuple(exprs))))
            return [*copied, store]

        def copy(forms: list[LinearForm], g: int, zero: bool = False) -> list[Operation]:
            """buffer[at forms] = operand[...] (grouped: the g-th of the group at k = forms[1]),
            or 0 (`zero`)."""
            exprs, operands = _grouped(plan, *affine_exprs(forms), within=g)  # (k = forms[1], a multiple of G)
            exprs, operands = _private(exprs, operands, slot)
            copied = zero_of(buffer.type.get_element_type()) if zero else read(forms, g)
            store = affine.StoreOp(copied[-1].results[0], buffer, operands,
                                   AffineMapAttr(AffineMap(len(operands), 0, tuple(exprs))))
            return [*copied, store]

        def operand_at(forms: list[LinearForm], g: int) -> list[LinearForm]:
            """The operand's subscripts of what buffer[at forms] holds (grouped: the g-th
            of the group at k = forms[1])."""
            if plan.grouped is not None:
                forms = [forms[0], forms[1] + g, forms[2]]
            if plan.split is None:
                at = dict(zip(order, forms))
            else:
                at = dict(zip(order, forms[1:-1]))
                at[plan.split] = forms[0] * plan.width + forms[-1]
            return [fd.offset if fd.loop is None else fd.base + fd.offset + at[d] for d, fd in enumerate(fp)]

        def read(forms: list[LinearForm], g: int, lanes: int = 0) -> list[Operation]:
            """operand[...] where buffer[at forms] holds it, widened as the buffer holds it
            (`lanes`: a vector of that many adjacent elements from there)."""
            indices, at = _map(operand_at(forms, g))
            source = plan.memref.type.get_element_type()
            load = (affine.VectorLoadOp(plan.memref, indices, at, VectorType(source, [lanes])) if lanes
                    else affine.LoadOp(plan.memref, indices, at))
            copied: list[Operation] = [load]
            if plan.shifted:  # v + SHIFT as an unsigned byte (LLVM: a xor of the sign bit)
                assert plan.widen is not None and plan.element is not None
                wide = plan.widen[1]
                copied += [extended := arith_ext.ExtSIOp(load.result, VectorType(wide, [lanes]) if lanes else wide),
                           shift := _splat(SHIFT, VectorType(wide, [lanes]) if lanes else wide),
                           moved := arith.AddiOp(extended, shift),
                           arith_ext.TruncIOp(moved.result, VectorType(plan.element, [lanes]) if lanes
                                              else plan.element)]
            elif plan.widen and plan.element != source:
                cast, to = plan.widen
                element = plan.element or to
                copied.append(cast(load.result, VectorType(element, [lanes]) if lanes else element))
            return copied

        steps = arranged([1, plan.group, 1]) if plan.grouped is not None else None
        return [build_affine_nest(arranged(names), lambda ivs: arranged(bounds(buffer_order(ivs), tail)),
                                  lambda ivs: body(buffer_order(ivs), tail), steps)
                for tail in ((False, True) if plan.tail else (False,))]

    def _packed_index(self, plan: _Plan) -> tuple[list[AffineExpr], list[SSAValue]]:
        """Where the body's read lands in the buffer: [iv - base, ...]; with panels,
        [(iv - base) floordiv P, ..., (iv - base) mod P] for the split dimension, or, when
        its loop is the point loop of a tile that lies in one panel (`%j = %j_t2 to
        %j_t2 + P` with %j_t2 stepping by P from the base), [(%j_t2 - base) floordiv P,
        ..., %j - %j_t2]: invariant in the point loop, then unit stride."""
        fp = plan.footprint
        relative = {d: LinearForm.of(_iv(fp[d].loop)) - fp[d].base for d in plan.packed}
        others = [relative[d] for d in plan.packed if d != plan.split]
        if plan.split is None:
            return affine_exprs(others)
        split = fp[plan.split]
        width = plan.width
        if (tile := _panel_tile(split, width)) is not None:
            start = LinearForm.of(tile)
            exprs, operands = affine_exprs([start - split.base, *others, LinearForm.of(_iv(split.loop)) - start])
            return _grouped(plan, [exprs[0] // width, *exprs[1:]], operands)
        exprs, operands = affine_exprs([relative[plan.split], *others])
        return _grouped(plan, [exprs[0] // width, *exprs[1:], exprs[0] % width], operands)


def _grouped(plan: _Plan, exprs: list[AffineExpr], operands: list[SSAValue],
             within: int | None = None) -> tuple[list[AffineExpr], list[SSAValue]]:
    """A subscript of the panels [p, k, j] in the grouped layout: [p, k floordiv G,
    j * G + k mod G], or [..., j * G + within] where k is known to start a group
    (unchanged without `group=`)."""
    if plan.grouped is None:
        return exprs, operands
    p, k, j = exprs
    g = plan.group
    return [p, k // g, j * g + (k % g if within is None else within)], operands


def _splat(value: int, t: Attribute) -> arith.ConstantOp:
    """An integer constant of scalar or vector type `t` (every lane `value`)."""
    if isinstance(t, VectorType):
        return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [value] * t.get_shape()[0]))
    return constant(value, t)


def _widening(loads: list[affine.LoadOp]) -> tuple[type[Operation], Attribute] | None:
    """The cast and type every read's value goes through, where each read is used only by
    one widening cast (all alike): a bf16 or int8 operand the compute loops widen."""
    casts = [use.operation for load in loads for use in load.result.uses]
    if not loads or any(not load.result.uses for load in loads) or not all(isinstance(c, arith_ext.WIDENING) for c in casts):
        return None
    kinds = {(type(c), c.results[0].type) for c in casts}
    return kinds.pop() if len(kinds) == 1 else None


def _unit_stride_dimension(mem: SSAValue) -> int | None:
    """The dimension of memref `mem` along which its elements are adjacent (stride 1:
    the last of a row-major memref), or None (no such dimension, or dynamic strides)."""
    layout = static_strides(mem.type)
    if layout is None:
        return None
    units = [d for d, stride in enumerate(layout[0]) if stride == 1]
    return units[-1] if units else None


def _panel_tile(fd: FootprintDim, width: int) -> SSAValue | None:
    """The iv %t of the tile loop around fd's loop when each tile lies in one panel:
    fd's loop runs from %t to at most %t + width, and %t is the footprint's base or steps
    from it by a multiple of width."""
    loop = fd.loop
    assert loop is not None
    lower = map_forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)
    if len(lower) != 1 or lower[0] is None or not lower[0].is_value():
        return None
    (start,) = lower[0].coeffs
    block = start.owner
    if not isinstance(block, Block) or start is not block.args[0]:
        return None
    tile = block.parent_op()
    if not isinstance(tile, affine.ForOp):
        return None
    # the footprint starts at %t itself (the copy runs in the tile loop: one panel), or
    # %t steps from where it starts by whole panels
    if fd.base != LinearForm.of(start) and (
        map_forms(tile.lowerBoundMap.data, tile.lowerBoundOperands) != [fd.base] or step_of(tile) % width
    ):
        return None
    for end in map_forms(loop.upperBoundMap.data, loop.upperBoundOperands):
        if end is not None and not (end - lower[0]).coeffs and (end - lower[0]).const <= width:
            return start
    return None


def _statement(nest: affine.ForOp) -> tuple[affine.StoreOp | None, dict[SSAValue, affine.LoadOp]]:
    """The nest's last affine.store and the memrefs that its block reads, in the order
    of their first read, each with that read: the op's operands."""
    stores = [o for o in nest.walk() if isinstance(o, affine.StoreOp)]
    if not stores:
        return None, {}
    block = stores[-1].parent_block()
    assert block is not None
    reads: dict[SSAValue, affine.LoadOp] = {}
    for top in block.ops:
        for o in top.walk():
            if isinstance(o, affine.LoadOp):
                reads.setdefault(o.memref, o)
    return stores[-1], reads


def _writer(nest: affine.ForOp, mem: SSAValue) -> tuple[Operation, str] | None:
    """An op inside the nest that may write the buffer `mem` views, and how: any op but
    a read or a view that takes a memref that may be of that buffer (`may_alias`: one of
    unknown origin may be any)."""
    for o in nest.walk():
        if isinstance(o, (*READS, *VIEW_OPS)):
            continue
        other = next((v for v in o.operands if isinstance(v.type, MemRefType) and may_alias(v, mem)), None)
        if other is None:
            continue
        if memref_root(mem) is None:
            return o, f"{value_name(mem)}, {unknown_origin(mem)}, may be the buffer '{o.name}' writes inside the nest"
        if memref_root(other) is None:
            return o, (f"'{o.name}' inside the nest writes {value_name(other)}, {unknown_origin(other)}, "
                       "which may be its buffer")
        return o, f"it is written inside the nest ('{o.name}')"
    return None


def _depth(nest: affine.ForOp, mem: SSAValue, read: affine.LoadOp) -> str:
    """`the read of %b in nest 'matmul' is inside 3 loops (levels 0..2)`."""
    n = len(enclosing_loops(read))
    levels = f"{n} loops (levels 0..{n - 1})" if n > 1 else "1 loop (level 0)"
    return f"the read of {value_name(mem)} in nest '{nest_tag(nest) or 'untagged'}' is inside {levels}"


def _reads(n: int) -> str:
    """`reads 3 memrefs (operands 0..2)`."""
    if n <= 1:
        return "reads 1 memref (operand 0)" if n else "reads no memref"
    return f"reads {n} memrefs (operands 0..{n - 1})"


def _name(loop: affine.ForOp, suffix: str) -> str | None:
    hint = loop.body.block.args[0].name_hint
    return f"{hint}_{suffix}" if hint else None


def _iv(loop: affine.ForOp | None) -> SSAValue:
    assert loop is not None
    return loop.body.block.args[0]


def _private(exprs: list[AffineExpr], operands: list[SSAValue],
             slot: SSAValue | None = None) -> tuple[list[AffineExpr], list[SSAValue]]:
    """A subscript of the buffer (expressions, one dim per operand), with `private=` the
    iteration's slot `slot` in front."""
    if slot is None:
        return exprs, operands
    return [AffineExpr.dimension(len(operands)), *exprs], [*operands, slot]


def _slot(plan: _Plan) -> SSAValue | None:
    """With `private=`, `%slot = (%iv - lb) floordiv step` of the private loop, first in
    its body: the iteration's number, a plain value to the subscripts (their forms stay
    linear, for the passes after: loom-vectorize, loom-hoist, loom-parallelize)."""
    if plan.private is None:
        return None
    loop, lb, step, _ = plan.private
    body = loop.body.block
    apply = affine.ApplyOp([body.args[0]], AffineMapAttr(iteration_number_map(lb, step)))
    apply.result.name_hint = "slot"
    apply.location = loop.location
    assert body.first_op is not None
    body.insert_op_before(apply, body.first_op)
    return apply.result


def _map(forms: Sequence[LinearForm]) -> tuple[list[SSAValue], AffineMapAttr]:
    """(operands, map) of an access at `forms`."""
    exprs, operands = affine_exprs(forms)
    return operands, AffineMapAttr(AffineMap(len(operands), 0, tuple(exprs)))

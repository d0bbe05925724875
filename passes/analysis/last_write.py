"""Which stores of a buffer are the last write of their elements, and which loads read
it first: the analysis loom-fuse-epilogue applies an epilogue by (at the last write of
each element) and drops a zero fill by (a zero at the first read).

Given a buffer (an allocation: a matmul's or conv2d's result) and the nests that write
it (its zero fills, INITS, and the producer's nests, however scheduled), each store is
an `Access` with its subscripts as linear forms and its loops:

- an access's loops are *spatial* (their ivs, or the bounds of such loops, give the
  element it touches: i_t, i_r, j_t, j_r, ...) or *reductions* (k_t, k: every iteration
  touches the same element again). A store is the last write of its element when every
  reduction loop around it is in its last iteration, unless a later store rewrites what
  it wrote (the first 7 of 8 stores of a k loop unroll-jammed by 8, the k remainder's
  nest after the main one): then it is never the last. A load is the first read in the
  first iterations, unless an earlier store of the producer wrote its elements;
- that is exact only if different iterations of a spatial loop touch different elements
  (what its body writes in one iteration, a box, spans at most its step), the loops
  inside a reduction loop run in each of its iterations, no access sits under a guard
  (`affine.if`), every store after (before) the access writes elements apart from its
  own or all of them (or the stores after it that write some write all of them together:
  a register tile's, after loom-compensate's subtraction over the tile), every load of the buffer is followed by a store of the same
  elements (it is read only to accumulate), and the last writes write every element of
  the buffer (their counts add up to its size: an element only the zero fill writes
  would take no epilogue). Otherwise `Refused` says why, in a remark's words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, memref, vector
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Operation, SSAValue

from dialects.layout import VIEW_OPS, memref_root
from dialects.loom import PrefetchOp
from passes.analysis.affine_forms import (
    FootprintError,
    LinearForm,
    form_range,
    iv_bounds,
    map_forms,
    value_form,
)
from passes.analysis.loop_utils import (
    AFFINE_STORES,
    LOADS,
    MASKED,
    STORES,
    access_memref,
    accessed_type,
    constant_bounds,
    constant_trip_count,
    defined_outside,
    describe_access,
    iv_name,
    line_suffix,
    nest_tag,
    provably_nonempty,
    step_of,
    value_name,
)

#: the zero fills of a producer's result (convert-loom-to-affine's), which its
#: accumulation then overwrites: they zero the epilogue's result instead
INITS = ("matmul.init", "conv2d.init")


class Refused(Exception):
    """Why the last writes cannot be told exactly, in a remark's words (loom-fuse-epilogue
    raises it too, for why an epilogue is not fused or why its chain stops)."""


def _reaches(value: SSAValue, root: SSAValue) -> bool:
    """Whether memref `value` may reach `root`'s buffer (an unknown origin may)."""
    if not isinstance(value.type, MemRefType):
        return False
    found = memref_root(value)
    return found is None or found is root


def _writes_itself(op: Operation, root: SSAValue) -> bool:
    """Whether `op` itself may write `root`'s buffer: anything other than a load, a
    prefetch, a view or a dealloc given a memref that reaches it."""
    return not isinstance(op, (*LOADS, PrefetchOp, *VIEW_OPS, memref.DeallocOp)) and any(
        _reaches(v, root) for v in op.operands)


def may_write(op: Operation, root: SSAValue) -> bool:
    """Whether `op` (or an op inside it) may write `root`'s buffer."""
    return any(_writes_itself(inner, root) for inner in op.walk())


@dataclass
class Access:
    """A store (or a load) of the producer's result in one of its nests."""

    op: Operation
    forms: list[LinearForm]
    lanes: int  # elements it touches along the last dimension
    exact: bool  # `lanes` is exact (not a mask of unknown count)
    loops: list[affine.ForOp]  # its nest's outermost loop first
    #: a store: the loops that must be in their last iteration for it to be the last
    #: write of its elements (empty: always), or None: never the last write; a load: the
    #: loops that must be in their first iteration for it to read the zero fill
    when: list[affine.ForOp] | None = None

    @property
    def value(self) -> SSAValue:
        return self.op.value_to_store if isinstance(self.op, vector.MaskedStoreOp) else self.op.value  # type: ignore[attr-defined]


def _subscripts(op: Operation) -> list[LinearForm | None]:
    if isinstance(op, MASKED):
        return [value_form(v) for v in op.indices]
    return map_forms(op.map.data, op.indices)  # type: ignore[attr-defined]


def _lanes(op: Operation) -> tuple[int, bool]:
    vtype = accessed_type(op)
    width = vtype.get_shape()[0] if isinstance(vtype, VectorType) else 1
    if not isinstance(op, MASKED):
        return width, True
    make = op.mask.owner
    if isinstance(make, vector.CreateMaskOp) and len(make.mask_dim_sizes) == 1:
        count = value_form(make.mask_dim_sizes[0])
        if not count.coeffs:
            return max(0, min(width, count.const)), True
    return width, False


class LastWriteAnalysis:
    """Which stores of `root` (in `nests`) are the last write of their elements, and
    when (see the module's docstring); Refused when that cannot be told exactly."""

    def __init__(self, root: SSAValue, nests: list[affine.ForOp]):
        self.root = root
        self.writes: dict[Operation, Access] = {}
        self.loads: list[Access] = []
        self.disjoint_loops: dict[affine.ForOp, bool] = {}
        #: why the zero fill stays ('' when every load that reads it is known: it goes)
        self.keep_fill = ""
        for nest in nests:
            empty = next((loop for loop in nest.walk() if isinstance(loop, affine.ForOp)
                          and constant_trip_count(loop) == 0), None)
            if empty is not None and nest_tag(nest) not in INITS:
                raise Refused(f"loop %{iv_name(empty)} of nest '{nest_tag(nest)}' has no iterations (a zero-size "
                              f"dimension): the zero fill would be the last write of {value_name(root)}")
            self._collect(nest)
        for nest in nests:
            if nest_tag(nest) not in INITS:
                self._check_loads(nest)
        for write in self.writes.values():
            if not _in_fill(write):
                write.when = self._last(write)
        self._check_covered()
        try:
            for load in self.loads:
                load.when = self._first(load)
        except Refused as why:
            self.keep_fill = str(why)
        if not any(_in_fill(w) for w in self.writes.values()):
            self.keep_fill = "no zero fill"

    def _collect(self, nest: affine.ForOp) -> None:
        for op in nest.walk():
            if not _writes_itself(op, self.root):
                continue
            if not isinstance(op, STORES):
                raise Refused(f"nest '{nest_tag(nest)}' writes {value_name(self.root)} by '{op.name}'")
            forms = _subscripts(op)
            if any(f is None for f in forms):
                raise Refused(f"a store of {value_name(self.root)} in nest '{nest_tag(nest)}' has a subscript that "
                              "is not linear")
            lanes, exact = _lanes(op)
            self.writes[op] = Access(op, forms, lanes, exact, self._loops(op, nest))  # type: ignore[arg-type]

    def _loops(self, op: Operation, nest: affine.ForOp) -> list[affine.ForOp]:
        """The loops around a store up to its nest's outermost one: affine.for only (a
        store under an affine.if or in a parallel loop runs in some iterations only)."""
        loops = []
        cur = op.parent_op()
        while cur is not None:
            if not isinstance(cur, affine.ForOp):
                raise Refused(f"a store of {value_name(self.root)} in nest '{nest_tag(nest)}' sits under "
                              f"'{cur.name}'{line_suffix(cur)}: it runs in some iterations only")
            loops.append(cur)
            if cur is nest:
                return loops[::-1]
            cur = cur.parent_op()
        raise AssertionError("a store inside its nest")

    def _check_covered(self) -> None:
        """Refused unless the last writes write every element of the buffer: their
        counts (each store's lanes times the iterations of its spatial loops) add up to
        its size, as they write different elements (checked). An element that only the
        zero fill writes would take no epilogue, and lose its zero with the fill."""
        written = 0
        for write in self.writes.values():
            if _in_fill(write) or write.when is None:
                continue
            count = self._count(write)
            if count is None:
                raise Refused(f"cannot count the elements {_access_text(write.op)} writes, to tell that the "
                              f"producer writes all of {value_name(self.root)}")
            written += count
        size = math.prod(self.root.type.get_shape())  # type: ignore[attr-defined]
        if written != size:
            raise Refused(f"the producer writes {written} of the {size} elements of {value_name(self.root)}: "
                          "the others only the zero fill writes")

    def _count(self, write: Access) -> int | None:
        """How many elements `write` writes in the last iteration of its reduction loops
        (each of which must run): its lanes per iteration of its spatial loops, those
        counted group by group (a group: loops whose bounds use each other's ivs, the
        outer ones' iterations walked); None when that is not known."""
        spatial = self._spatial(write)
        if not write.exact or any(loop not in spatial and not provably_nonempty(loop) for loop in write.loops):
            return None
        loops = [loop for loop in write.loops if loop in spatial]
        groups: list[list[affine.ForOp]] = []
        for loop in loops:
            used = set((*loop.lowerBoundOperands, *loop.upperBoundOperands))
            joined = [g for g in groups if any(outer.body.block.args[0] in used for outer in g)]
            groups = [g for g in groups if g not in joined] + [[l for g in joined for l in g] + [loop]]
        count = write.lanes
        for group in groups:
            iterations = _iterations(sorted(group, key=loops.index))
            if iterations is None:
                return None
            count *= iterations
        return count

    def _check_loads(self, nest: affine.ForOp) -> None:
        """Every load of the result is followed, in its block, by a store of the same
        elements: the nest reads it only to accumulate, never after the last write."""
        for load in (o for o in nest.walk() if isinstance(o, LOADS) and _reaches(access_memref(o), self.root)):
            forms, lanes = _subscripts(load), _lanes(load)
            if any(f is None for f in forms):
                raise Refused(f"a load of {value_name(self.root)} in nest '{nest_tag(nest)}' has a subscript that "
                              "is not linear")
            self.loads.append(Access(load, forms, *lanes, self._loops(load, nest)))  # type: ignore[arg-type]
            later = load.next_op
            while later is not None and not (
                later in self.writes and self.writes[later].forms == forms
                and (self.writes[later].lanes, self.writes[later].exact) == lanes and lanes[1]
            ):
                later = later.next_op
            if later is None:
                raise Refused(f"nest '{nest_tag(nest)}' reads {value_name(self.root)} other than to accumulate into "
                              f"it ({load.name}{line_suffix(load)}: no store of the same elements after it)")

    def _last(self, write: Access) -> list[affine.ForOp] | None:
        """The loops that must be in their last iteration for `write` to be the last
        write of its elements, or None: never (a later store rewrites them)."""
        reductions = self._reductions(write)
        if self._touched(write, later=True):
            return None
        return reductions

    def _first(self, load: Access) -> list[affine.ForOp] | None:
        """The loops that must be in their first iteration for `load` to read the zero
        fill, or None: never (an earlier store of the producer wrote its elements)."""
        reductions = self._reductions(load)
        if self._touched(load, later=False):
            return None
        for loop in reductions:
            if len(loop.lowerBoundMap.data.results) != 1:
                raise Refused(f"loop %{iv_name(loop)} starts at a max of bounds")
        return reductions

    def _reductions(self, access: Access) -> list[affine.ForOp]:
        """The loops around `access` in whose iterations it touches the same elements
        again (of more than one iteration), checked so that their last (first) iteration
        is the last (first) time: the loops inside each run in all its iterations, and
        the iterations of the other loops touch different elements."""
        spatial = self._spatial(access)
        reductions = [loop for loop in access.loops if loop not in spatial and constant_trip_count(loop) != 1]
        for loop in reductions:
            for inner in access.loops[access.loops.index(loop) + 1:]:
                if not provably_nonempty(inner):
                    raise Refused(f"cannot tell that loop %{iv_name(inner)} runs in every iteration of "
                                  f"%{iv_name(loop)}, which accumulates into {value_name(self.root)}")
        for loop in spatial:
            if constant_trip_count(loop) != 1 and not self._iterations_disjoint(loop):
                raise Refused(f"cannot tell that the iterations of loop %{iv_name(loop)} write different elements "
                              f"of {value_name(self.root)}")
        return reductions

    def _spatial(self, write: Access) -> set[affine.ForOp]:
        """The loops that choose the elements a store writes: those whose ivs are in its
        subscripts, or in the bounds of such loops (a tile loop around its point loop)."""
        ivs = {loop.body.block.args[0]: loop for loop in write.loops}
        pending = [v for f in write.forms for v in f.coeffs]
        for v in pending:
            if v not in ivs and not defined_outside(v, write.loops[0]):
                raise Refused(f"a store of {value_name(self.root)} has a subscript computed in its nest "
                              f"({value_name(v)})")
        spatial: set[affine.ForOp] = set()
        while pending:
            loop = ivs.get(pending.pop())
            if loop is None or loop in spatial:
                continue
            spatial.add(loop)
            for m, operands in ((loop.lowerBoundMap.data, loop.lowerBoundOperands),
                                (loop.upperBoundMap.data, loop.upperBoundOperands)):
                forms = map_forms(m, operands)
                pending += list(operands) if None in forms else [v for f in forms for v in f.coeffs]  # type: ignore[union-attr]
        return spatial

    def _iterations_disjoint(self, loop: affine.ForOp) -> bool:
        """Whether different iterations of `loop` write different elements: along some
        dimension, what all the stores inside write in one iteration lies in
        [c*iv + a, c*iv + b] with b - a < c * the step."""
        if loop not in self.disjoint_loops:
            iv = loop.body.block.args[0]
            stores = [self.writes[o] for o in loop.walk() if o in self.writes]
            if len({id(access_memref(w.op)) for w in stores}) > 1:
                self.disjoint_loops[loop] = False
                return False
            boxes = [self._box(w, _inside(w.loops, loop)) for w in stores]
            windows = [_window(boxes, d, iv) for d in range(len(stores[0].forms))]
            self.disjoint_loops[loop] = any(w is not None and w[0] < w[1] * step_of(loop) for w in windows)
        return self.disjoint_loops[loop]

    def _touched(self, access: Access, later: bool) -> bool:
        """Whether a store of the producer after `access` (`later`) or before it, in the
        same iterations of their common loops (up to the function: another nest), writes
        all its elements (True) or none of them (False); Refused when it may write some.
        The zero fill is not the producer's."""
        cur: Operation = access.op
        while True:
            block = cur.parent_block()
            assert block is not None
            owner = block.parent_op()
            within = _inside(access.loops, owner)
            other_op = cur.next_op if later else cur.prev_op
            partial: list[Access] = []  # stores that rewrite some of its elements
            while other_op is not None:
                for other in (self.writes[o] for o in other_op.walk() if o in self.writes):
                    if _in_fill(other):
                        continue
                    rewritten = self._rewrites(access, within, other, _inside(other.loops, owner))
                    if rewritten:
                        return True
                    if rewritten is None:
                        partial.append(other)
                other_op = other_op.next_op if later else other_op.prev_op
            if partial:
                # together they may rewrite all of it (the stores of a register tile,
                # unroll-jammed, after a loop nest over the tile: loom-compensate's)
                if self._union_covers(access, within, partial, owner):
                    return True
                raise Refused(f"cannot tell whether {_access_text(partial[0].op)} rewrites some of the elements "
                              f"{_access_text(access.op)} wrote")
            if owner not in access.loops:
                return False
            cur = owner  # type: ignore[assignment]

    def _rewrites(self, write: Access, within: Sequence[affine.ForOp], other: Access,
                  other_within: Sequence[affine.ForOp]) -> bool | None:
        """Whether `other`, running after `write`, rewrites all of what it wrote (True),
        none of it (False), or may rewrite some (None)."""
        if access_memref(other.op) is not access_memref(write.op):
            raise Refused(f"{_access_text(other.op)} and {_access_text(write.op)} write "
                          f"{value_name(self.root)} through different views")
        mine, theirs = self._box(write, within), self._box(other, other_within)
        if _disjoint(mine, theirs):
            return False
        paired = _structural(write, within, other, other_within)
        if paired is not None:
            return paired == "same"
        if self._covers(other, other_within, mine):
            return True
        return None

    def _union_covers(self, write: Access, within: Sequence[affine.ForOp], others: list[Access],
                      owner: Operation | None) -> bool:
        """Whether stores (in `owner`'s body), each writing exactly its elements in loops
        of constant trip counts, write together every element of the box `write` writes
        while the loops `within` run: their elements a constant apart from the box's
        corner in each iteration, at most MAX_WALKED of them, counted."""
        mine = self._box(write, within)
        if any(len(lows) != 1 or len(highs) != 1 for lows, highs in mine):
            return False
        base = [lows[0] for lows, _ in mine]
        extents = [highs[0] - low + 1 for (_, highs), low in zip(mine, base)]
        if any(e.coeffs or e.const < 1 for e in extents) or math.prod(e.const for e in extents) > MAX_WALKED:
            return False
        covered: set[tuple[int, ...]] = set()
        for other in others:
            loops = _inside(other.loops, owner)
            starts = [_start(loop) for loop in loops]
            trips = [constant_trip_count(loop) for loop in loops]
            if not other.exact or None in starts or None in trips or math.prod(trips) > MAX_WALKED:  # type: ignore[arg-type]
                return False
            for iteration in _points([range(t) for t in trips]):  # type: ignore[arg-type]
                forms = other.forms
                for loop, start, t in zip(loops, starts, iteration):
                    at = start + t * step_of(loop)  # type: ignore[operator]
                    forms = [f.substitute(loop.body.block.args[0], at) for f in forms]
                spans = []
                for d, (form, low) in enumerate(zip(forms, base)):
                    offset = form - low
                    if offset.coeffs:
                        return False
                    width = other.lanes if d == len(forms) - 1 else 1
                    spans.append(range(offset.const, offset.const + width))
                covered.update(_points(spans))
                if len(covered) > MAX_WALKED:
                    return False
        return all(p in covered for p in _points([range(e.const) for e in extents]))

    def _box(self, write: Access, within: Sequence[affine.ForOp]) -> list[tuple[list[LinearForm], list[LinearForm]]]:
        """Per dimension, bounds on what `write` writes over the iterations of the loops
        `within`: at least each of the first forms, at most each of the second."""
        bounds: dict[SSAValue, tuple[list[LinearForm], list[LinearForm]]] = {}
        try:
            for loop in within:
                low, high = iv_bounds(loop, within)
                bounds[loop.body.block.args[0]] = (low, [h - 1 for h in high])
        except FootprintError as e:
            raise Refused(str(e)) from None
        box = []
        for d, form in enumerate(write.forms):
            lows, highs = [form], [form]
            for v in [v for v in form.coeffs if v in bounds]:
                low, high = bounds[v]
                up, down = (high, low) if form.coeff(v) > 0 else (low, high)
                lows = [f.substitute(v, b) for f in lows for b in down]
                highs = [f.substitute(v, b) for f in highs for b in up]
            if d == len(write.forms) - 1:
                highs = [h + (write.lanes - 1) for h in highs]
            box.append((lows, highs))
        return box

    def _covers(self, other: Access, within: Sequence[affine.ForOp],
                box: list[tuple[list[LinearForm], list[LinearForm]]]) -> bool:
        """Whether `other` writes every element of `box` while the loops `within` run:
        each of its subscripts walked by one loop of constant bounds (a step no longer
        than what one iteration writes), every such loop running at least once."""
        if not other.exact or any(constant_trip_count(loop) in (None, 0) or _start(loop) is None for loop in within):
            return False
        ivs = {loop.body.block.args[0]: loop for loop in within}
        walked: set[SSAValue] = set()
        for d, (form, (lows, highs)) in enumerate(zip(other.forms, box)):
            inner = [v for v in form.coeffs if v in ivs]
            width = other.lanes if d == len(other.forms) - 1 else 1
            lo = hi = form
            if inner:
                (v,) = inner if len(inner) == 1 else (None,)
                loop = ivs.get(v)  # type: ignore[arg-type]
                trips = constant_trip_count(loop) if loop is not None else None
                if loop is None or v in walked or form.coeff(v) != 1 or (step_of(loop) > width and trips != 1):
                    return False
                walked.add(v)
                start = _start(loop)
                assert start is not None
                lo = form.substitute(v, start)
                hi = form.substitute(v, start + (constant_trip_count(loop) - 1) * step_of(loop))  # type: ignore[operator]
            hi = hi + (width - 1)
            if not any(_nonnegative(low - lo) for low in lows) or not any(_nonnegative(hi - high) for high in highs):
                return False
        return True


def _start(loop: affine.ForOp) -> LinearForm | None:
    """A loop's lower bound where it is one linear form (a constant, or %i_t2 for a tile's
    point loop), else None."""
    lower = map_forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)
    return lower[0] if len(lower) == 1 else None


def _points(spans: Sequence[range]) -> list[tuple[int, ...]]:
    """Every point of the box of `spans` (a range per dimension)."""
    points: list[tuple[int, ...]] = [()]
    for span in spans:
        points = [(*p, x) for p in points for x in span]
    return points


def _in_fill(access: Access) -> bool:
    return nest_tag(access.loops[0]) in INITS


#: the most iterations of outer loops `_iterations` walks to count those of inner ones
MAX_WALKED = 1 << 16


def _iterations(loops: list[affine.ForOp]) -> int | None:
    """How many times the innermost of `loops` (nested, outermost first; their bounds
    use no iv but theirs) runs its body, the iterations of the outer loops whose ivs an
    inner bound uses walked; None when a bound uses another value or is not linear, or
    the walk would take more than MAX_WALKED iterations."""
    bounds = []
    for loop in loops:
        pair = []
        for m, operands in ((loop.lowerBoundMap.data, loop.lowerBoundOperands),
                            (loop.upperBoundMap.data, loop.upperBoundOperands)):
            forms = map_forms(m, operands)
            if any(f is None for f in forms):
                return None
            pair.append(forms)
        bounds.append(pair)
    budget = MAX_WALKED

    def count(depth: int, ivs: dict[SSAValue, int]) -> int | None:
        nonlocal budget
        if depth == len(loops):
            return 1
        loop = loops[depth]
        ends = []
        for forms, pick in zip(bounds[depth], (max, min)):
            if any(v not in ivs for f in forms for v in f.coeffs):
                return None
            ends.append(pick(f.const + sum(c * ivs[v] for v, c in f.coeffs.items()) for f in forms))
        points = range(ends[0], ends[1], step_of(loop))
        iv = loop.body.block.args[0]
        if not any(iv in f.coeffs for pair in bounds[depth + 1:] for forms in pair for f in forms):
            rest = count(depth + 1, ivs)
            return None if rest is None else len(points) * rest
        budget -= len(points)
        if budget < 0:
            return None
        total = 0
        for value in points:
            rest = count(depth + 1, {**ivs, iv: value})
            if rest is None:
                return None
            total += rest
        return total

    return count(0, {})


def _structural(write: Access, within: Sequence[affine.ForOp], other: Access,
                other_within: Sequence[affine.ForOp]) -> str | None:
    """What `other` writes, while the loops `other_within` run, beside what `write` writes
    while `within` run, when their subscripts are walked by loops of the same constant
    bounds and steps, paired dimension by dimension (a nest copied for the remainder of
    an unroll-jammed k loop, or a vector beside another): "apart" (no element in common:
    along some dimension the offsets differ by no multiple of the step within reach),
    "same" (the same elements, and `other`'s loops all run), or None (not comparable)."""
    mine = {loop.body.block.args[0]: loop for loop in within}
    theirs = {loop.body.block.args[0]: loop for loop in other_within}
    pairs: dict[SSAValue, SSAValue] = {}
    same = write.exact and other.exact and all(
        constant_trip_count(loop) not in (None, 0) and constant_bounds(loop) is not None for loop in other_within)
    for d, (form, other_form) in enumerate(zip(write.forms, other.forms)):
        a = [v for v in form.coeffs if v in mine]
        b = [v for v in other_form.coeffs if v in theirs]
        if len(a) != len(b) or len(a) > 1:
            return None
        reach = [0]
        if a:
            (v,), (u,) = a, b
            lv, lu = mine[v], theirs[u]
            if (pairs.setdefault(v, u) is not u or form.coeff(v) != other_form.coeff(u)
                    or constant_bounds(lv) is None or constant_bounds(lv) != constant_bounds(lu)
                    or step_of(lv) != step_of(lu)):
                return None
            stride, trips = abs(form.coeff(v)) * step_of(lv), constant_trip_count(lv) or 1
            reach = [stride, trips]
            form, other_form = form.substitute(v, LinearForm()), other_form.substitute(u, LinearForm())
        delta = form - other_form
        if delta.coeffs:
            return None
        last = d == len(write.forms) - 1
        width, other_width = (write.lanes, other.lanes) if last else (1, 1)
        # other's start - write's start lies in [low, high] where they overlap
        low, high = delta.const - other_width + 1, delta.const + width - 1
        if not _multiple_within(low, high, *reach):
            return "apart"
        same = same and delta.const == 0 and width == other_width
    return "same" if same else None


def _multiple_within(low: int, high: int, stride: int = 0, trips: int = 1) -> bool:
    """Whether m * stride lies in [low, high] for some |m| < trips (m = 0 when stride is 0)."""
    if stride == 0:
        return low <= 0 <= high
    first, last = -(-low // stride), high // stride
    return max(first, -(trips - 1)) <= min(last, trips - 1)


def _inside(loops: list[affine.ForOp], owner: Operation | None) -> list[affine.ForOp]:
    """The loops of `loops` (outermost first) inside `owner` (all of them when `owner` is
    not one of them: the function)."""
    return loops[loops.index(owner) + 1:] if owner in loops else loops


def _window(boxes: list[list[tuple[list[LinearForm], list[LinearForm]]]], d: int,
            iv: SSAValue) -> tuple[int, int] | None:
    """(b - a, c), where every box lies in [c*iv + a, c*iv + b] along dimension d, c > 0
    the same for all (a Winograd tile's rows: c = m); None if one has no bound of that form."""
    lows, highs, scales = [], [], set()
    for box in boxes:
        low = [(f.const, f.coeff(iv)) for f in box[d][0] if set(f.coeffs) == {iv} and f.coeff(iv) > 0]
        high = [(f.const, f.coeff(iv)) for f in box[d][1] if set(f.coeffs) == {iv} and f.coeff(iv) > 0]
        if not low or not high:
            return None
        scales |= {c for _, c in low + high}
        lows.append(max(a for a, _ in low))
        highs.append(min(b for b, _ in high))
    if len(scales) != 1:
        return None
    return max(highs) - min(lows), scales.pop()


def _nonnegative(form: LinearForm) -> bool:
    lo = form_range(form)[0]
    return lo is not None and lo >= 0


def _disjoint(a: list[tuple[list[LinearForm], list[LinearForm]]],
              b: list[tuple[list[LinearForm], list[LinearForm]]]) -> bool:
    """Whether two boxes provably share no element: apart along some dimension."""
    for (a_lows, a_highs), (b_lows, b_highs) in zip(a, b):
        if any(_nonnegative(low - high - 1) for low in b_lows for high in a_highs):
            return True
        if any(_nonnegative(low - high - 1) for low in a_lows for high in b_highs):
            return True
    return False


def _access_text(op: Operation) -> str:
    if isinstance(op, AFFINE_STORES):
        return f"the store of {describe_access(op)}{line_suffix(op)}"
    return f"the store of {value_name(access_memref(op))}{line_suffix(op)}"
